// Host side: serving one claimed slot — wait for a batch (spin, then sleep on the
// doorbell), decode it from a private copy, run its frames, answer in place, ring a
// sleeping guest. Used by the host endpoint's service threads and by worker processes
// (a worker serves one slot in a process of its own, so that a client that breaks its
// CUDA context cannot break anyone else's: see host-stub).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "vmrpc/region.h"
#include "vmrpc/service.h"
#include "vmrpc/slot_gate.h"

namespace vmrpc {

struct SlotServer {
  RegionView view;
  uint32_t slot = 0;
  int doorbell_fd = -1;  // the guest rings it (host_rx of the slot's vector)
  int notify_fd = -1;    // we ring it (the guest's vector: an eventfd, MSI-X in a VM)
  SlotInfo info;
  uint64_t host_epoch = 0;
  const std::atomic<bool>* stop = nullptr;  // set, then ring doorbell_fd, to make it return
  std::function<void(const std::string&)> on_bad_batch;  // for statistics and the log
  // Whether serve_slot hands a released slot back (Free) itself. A worker process must
  // not: a new client could claim the slot before the worker has exited, and the
  // endpoint would take that for the worker dying under its client. The endpoint hands
  // it back once the worker is gone.
  bool hand_back = true;
  // Control from another thread (suspend/resume): looked at between batches; closed when
  // serve_slot returns. May be null.
  SlotGate* gate = nullptr;
  // Set (before stop) when the region was replaced by a restored image: the slot's control
  // page and heap pages are the image's now, so serve_slot leaves them as they are.
  const std::atomic<bool>* region_replaced = nullptr;
  // Set by serve_slot when it left the slot because the region was replaced (by the host,
  // or seen from the image token before a batch).
  bool* left_for_replaced_region = nullptr;
};

// Serves the slot with `svc` (may be null: every service call is then kUnknownCall)
// until the guest releases it or *stop. Closes `svc` before it returns. Returns true
// when the guest released the slot: it was then reset and handed back (Free) if
// `hand_back`, else left Closing for the endpoint.
bool serve_slot(const SlotServer& s, SlotService* svc);

// Makes a slot reusable: reclaims its heap pages, resets what the next owner reads,
// hands it back (Free). Precondition: nobody serves the slot.
void reset_slot(const RegionView& view, uint32_t slot);

// Answers a batch that will never run and marks the slot `why`: kFailed (its server died;
// the batch answers kHandlerFailed) or kStateLost (a restored region whose client's GPU
// state the host does not have; the batch answers kStateLost) or kTimedOut (its server was
// ended because a kernel ran past the time limit; the batch answers kLaunchTimeout). Rings
// the guest.
void fail_slot(const RegionView& view, uint32_t slot, int notify_fd,
               wire::HostSlotState why = wire::HostSlotState::kFailed);

}  // namespace vmrpc
