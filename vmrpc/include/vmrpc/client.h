// Guest side of the channel: claim a slot, send batches, wait for the replies.
//
// The same code runs in a VM (region = BAR2, doorbell = BAR0 or /dev/vmcudaN) and in
// a host process on the local transport (region = memfd from the stub's socket,
// doorbell = eventfds). Only GuestDoorbell differs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "vmrpc/batch_writer.h"
#include "vmrpc/heap.h"
#include "vmrpc/region.h"
#include "vmrpc/wire.h"

namespace vmrpc {

// How the guest rings the host and waits for the host to ring it (small transport
// interface: one implementation per way of reaching the host).
class GuestDoorbell {
 public:
  virtual ~GuestDoorbell() = default;
  // Wakes the host's service for `slot` (ivshmem vector `slot` of the host peer).
  virtual void ring(uint32_t slot) = 0;
  // Whether wait() can block; if not, the client spins (with pauses) instead.
  virtual bool can_sleep() const = 0;
  // Blocks until the host rang `slot` (may return spuriously). False: the host is gone.
  virtual bool wait(uint32_t slot) = 0;
  // Whether the host is still there (cheap; checked while spinning for long).
  virtual bool alive() { return true; }
};

class ClientSlot {
 public:
  // Claims a free slot (CAS), opens it with a Hello round trip. Nothing (and `why`)
  // when no slot is free or the host does not answer as expected.
  static std::unique_ptr<ClientSlot> claim(const RegionView& region, GuestDoorbell& doorbell, std::string* why);
  // Same, for the slot a driver already claimed for us (state must be kClaimed).
  static std::unique_ptr<ClientSlot> adopt(const RegionView& region, GuestDoorbell& doorbell, uint32_t slot,
                                           std::string* why);
  ~ClientSlot();  // releases the slot (state kClosing + doorbell)
  ClientSlot(const ClientSlot&) = delete;
  ClientSlot& operator=(const ClientSlot&) = delete;

  uint32_t index() const { return slot_; }
  const RegionView& region() const { return region_; }
  HeapAllocator& heap() { return heap_; }

  // The batch being built. Frames appended here go with the next flush().
  BatchWriter& batch() { return batch_; }
  // Sends the batch and waits until every frame is answered. kOk means the host
  // decoded the batch (each frame then has its own status); after it, results stay
  // readable until the next append.
  wire::ChannelStatus flush();
  // flush() in two halves, so the caller can work (e.g. fill the next heap chunk)
  // while the host runs the batch. Between them the RPC stack belongs to the host:
  // append nothing until wait() returned.
  wire::ChannelStatus submit();
  wire::ChannelStatus wait();
  bool in_flight() const { return in_flight_; }
  FrameResult result(FrameRef f) const { return batch_.result(f); }
  // The first error of work the service accepted in an earlier batch and ran later
  // (SlotControl::late_status of any batch answered since the last call), 0 if none; clears it.
  int32_t take_late_status() {
    const int32_t v = late_;
    late_ = 0;
    return v;
  }

  // One synchronous call (flushes what is queued first, in the same batch).
  struct Reply {
    int32_t status;                    // frame status, or the batch's ChannelStatus
    std::span<const std::byte> bytes;  // valid until the next append
  };
  Reply call(uint32_t call_id, std::span<const std::byte> args, uint32_t reply_capacity);

  uint64_t host_epoch() const { return host_epoch_; }

 private:
  ClientSlot(const RegionView& region, GuestDoorbell& doorbell, uint32_t slot);
  bool hello(std::string* why);
  bool wait_response(uint64_t seq);

  RegionView region_;
  GuestDoorbell& doorbell_;
  uint32_t slot_;
  BatchWriter batch_;
  HeapAllocator heap_;
  uint64_t seq_ = 0;
  uint64_t host_epoch_ = 0;
  bool lost_ = false;
  bool in_flight_ = false;
  int32_t late_ = 0;
};

// The local transport: a process on the host connects to the stub's socket and gets
// the memfd and eventfds exactly as QEMU does.
// Whether the process serving the connected UNIX socket `fd` may be trusted with this
// process's calls and data: root, this process's user, or `service_uid`. False and why
// otherwise (another local user who created the socket first).
bool server_trusted(int fd, const std::string& path, std::optional<uid_t> service_uid, std::string* why);

class LocalConnection : public GuestDoorbell {
 public:
  // Connects and completes the ivshmem handshake; throws with a message naming the
  // socket and what to do when it cannot, or when the process serving it is neither root,
  // this user nor `service_uid` (vmcuda's service user: server_trusted()).
  static std::unique_ptr<LocalConnection> connect(const std::string& socket_path,
                                                  std::optional<uid_t> service_uid = std::nullopt);
  ~LocalConnection() override;

  const RegionView& region() const { return region_; }
  uint32_t peer_id() const { return own_id_; }

  void ring(uint32_t slot) override;
  bool can_sleep() const override { return true; }
  bool wait(uint32_t slot) override;
  bool alive() override;

 private:
  LocalConnection() = default;
  struct State;
  std::unique_ptr<State> s_;
  RegionView region_;
  uint32_t own_id_ = 0;
  bool host_left_ = false;
};

}  // namespace vmrpc
