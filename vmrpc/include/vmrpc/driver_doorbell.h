// Guest side, inside a VM with the vmcuda kernel driver (ivshmem-driver/): the region
// is BAR2 mapped through /dev/vmcudaN, the doorbell is the driver's RING ioctl and
// the guest sleeps on its slot's MSI-X vector (WAIT ioctl, or poll()). One open
// device file owns one slot, which the driver claimed in open(); use it with
//   auto dev = DriverDevice::open();
//   auto slot = ClientSlot::adopt(dev->region(), *dev, dev->slot(), &why);
// Destroy the ClientSlot before the DriverDevice. The driver frees the slot (and
// tells the host) when the device is closed, also when the process dies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vmrpc/client.h"
#include "vmrpc/fd.h"

namespace vmrpc {

class DriverDevice : public GuestDoorbell {
 public:
  // What the driver reports (VMCUDA_IOC_INFO).
  struct Info {
    uint32_t version = 0;       // driver interface version
    uint32_t slot = 0;          // the slot this open file owns
    uint64_t region_bytes = 0;  // BAR2
    uint32_t slot_count = 0;
    uint32_t vectors = 0;       // MSI-X vectors the driver got
    uint32_t iv_position = 0;   // this VM's ivshmem peer id
    uint32_t host_peer_id = 0;
  };
  // How wait() sleeps: the WAIT ioctl, or poll() + a non-blocking WAIT.
  enum class WaitMode { kIoctl, kPoll };
  struct Stats {
    uint64_t rings = 0;
    uint64_t waits = 0;        // wait() calls
    uint64_t wakeups = 0;      // ... that returned because the vector fired
    uint64_t timeouts = 0;     // ... that ran into the internal time limit
    uint64_t interrupted = 0;  // ... cut short by a signal
  };

  // Opens the device (claims a slot), maps the region, checks its header. Throws
  // with a message saying what to do (load the module, free slots, start the stub).
  static std::unique_ptr<DriverDevice> open(const std::string& path = "/dev/vmcuda0");
  ~DriverDevice() override;  // unmaps and closes: the driver releases the slot

  const RegionView& region() const { return region_; }
  const Info& info() const { return info_; }
  uint32_t slot() const { return info_.slot; }
  int fd() const { return fd_.get(); }

  void set_wait_mode(WaitMode m) { mode_ = m; }
  // Longest single sleep inside wait(); after it wait() returns (spuriously) so the
  // caller re-checks. Default 1 s.
  void set_wait_slice_ns(uint64_t ns) { slice_ns_ = ns; }
  const Stats& stats() const { return stats_; }

  // The driver rings the host's vector of this file's own slot; `slot` must be it.
  void ring(uint32_t slot) override;
  bool can_sleep() const override { return true; }
  bool wait(uint32_t slot) override;
  bool alive() override;

 private:
  DriverDevice() = default;
  std::string path_;
  UniqueFd fd_;
  Mapping map_;
  RegionView region_;
  Info info_;
  WaitMode mode_ = WaitMode::kIoctl;
  uint64_t slice_ns_ = 1000000000ull;
  Stats stats_;
  bool gone_ = false;
};

}  // namespace vmrpc
