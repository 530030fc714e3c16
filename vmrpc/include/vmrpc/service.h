// What the host endpoint calls: the service behind the channel (vmcuda-stub's
// dispatcher, or a test service). vmrpc itself knows nothing of CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>
#include <memory>
#include <optional>
#include <span>

#include "vmrpc/region.h"
#include "vmrpc/wire.h"

namespace vmrpc {

struct SlotInfo {
  uint64_t connection_id = 0;  // one per connected VM / local process
  uint32_t slot = 0;
  uint32_t owner_tag = 0;      // guest-reported pid: diagnostics only
};

// Everything a handler may touch for one call.
struct CallContext {
  const SlotInfo& slot;
  const RegionView& region;
  // Set when the endpoint stops serving this slot (a local client's connection died, the
  // endpoint shuts down): a handler that waits on the guest must give up then. May be null.
  const std::atomic<bool>* stop = nullptr;
  // Bytes of the shared heap `ref` names, or nothing if it points outside the heap.
  // The guest may change these bytes at any time: copy what you must check.
  std::optional<std::span<std::byte>> heap(const wire::HeapRef& ref) const { return region.resolve(ref); }
};

// One per served slot; runs on that slot's service thread.
class SlotService {
 public:
  virtual ~SlotService() = default;
  // Runs one call. `args` is a private copy; `reply` is shared memory the handler
  // only writes (never reads back). Returns a status >= 0 of the service, or a
  // wire::ChannelStatus < 0; sets reply_bytes <= reply.size().
  virtual int32_t call(const CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
                       std::span<std::byte> reply, uint32_t& reply_bytes) = 0;
  // After the last call of each batch (the guest waits for no more of this batch's work):
  // e.g. vmcuda-stub records what the batch left pending on the GPU.
  virtual void batch_done() {}
  // Before the first call or control request: the region the slot lives in (valid while the
  // slot is served). A client restored into a new service needs it before any call.
  virtual void bind_region(const RegionView& region) {}
  // The client released the slot or died: free everything it owned.
  virtual void close() {}
  // A request of the control path (HostEndpoint::control_slot: suspend, resume, status in
  // host-stub), run on the slot's service thread at a call boundary. `progress` passes
  // interim messages back (a long suspend's bytes done). Returns the reply. The default
  // service has no control requests: it answers nothing.
  using Progress = std::function<void(std::span<const std::byte>)>;
  virtual std::vector<std::byte> control(std::span<const std::byte> request, const Progress& progress) {
    return {};
  }
  // A view of the service for status displays, from any thread and without waiting for the
  // slot's call boundary (a client in a long call still answers): the service makes it safe.
  virtual std::vector<std::byte> snapshot() const { return {}; }
};

class Service {
 public:
  virtual ~Service() = default;
  // A VM (or local process) connected and its region exists; on the loop thread.
  // E.g. vmcuda-stub registers the shared heap with the driver here.
  virtual void connection_opened(uint64_t connection_id, const RegionView& region) {}
  // Its slots are all closed and the region is about to be unmapped.
  virtual void connection_closed(uint64_t connection_id, const RegionView& region) {}
  // A guest claimed a slot. Nothing means refused (the slot answers kUnknownCall).
  virtual std::unique_ptr<SlotService> open(const SlotInfo& info) = 0;
};

}  // namespace vmrpc
