// Guest side, inside a VM without the vmcuda driver: the region is BAR2 and the
// doorbell is BAR0's Doorbell register, both mapped from sysfs (root only). There are
// no interrupts this way (MSI-X needs a kernel driver), so clients poll for replies.
// Used by the VM smoke test and as a fallback; guest-lib prefers /dev/vmcudaN.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vmrpc/client.h"
#include "vmrpc/fd.h"

namespace vmrpc {

class BarDevice : public GuestDoorbell {
 public:
  // `sysfs_dir`: e.g. /sys/bus/pci/devices/0000:00:03.0 (an ivshmem-doorbell device).
  static std::unique_ptr<BarDevice> open(const std::string& sysfs_dir);

  const RegionView& region() const { return region_; }
  uint32_t iv_position() const;  // this VM's peer id, from BAR0

  void ring(uint32_t slot) override;
  bool can_sleep() const override { return false; }
  bool wait(uint32_t) override { return true; }

 private:
  BarDevice() = default;
  Mapping regs_;
  Mapping shm_;
  RegionView region_;
};

}  // namespace vmrpc
