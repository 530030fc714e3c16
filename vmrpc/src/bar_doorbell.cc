#include "vmrpc/bar_doorbell.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "vmrpc/ordering.h"

namespace vmrpc {
namespace {
// ivshmem BAR0 registers (32-bit accesses only).
constexpr size_t kRegIvPosition = 8;
constexpr size_t kRegDoorbell = 12;
}  // namespace

std::unique_ptr<BarDevice> BarDevice::open(const std::string& dir) {
  std::unique_ptr<BarDevice> d(new BarDevice);
  UniqueFd r0(::open((dir + "/resource0").c_str(), O_RDWR | O_SYNC | O_CLOEXEC));
  if (!r0) throw_errno("open " + dir + "/resource0 (ivshmem registers; needs root)");
  d->regs_ = Mapping::map_shared(r0.get(), 256, dir + "/resource0");  // BAR0 is 256 bytes
  UniqueFd r2(::open((dir + "/resource2").c_str(), O_RDWR | O_CLOEXEC));
  if (!r2) throw_errno("open " + dir + "/resource2 (ivshmem shared memory)");
  struct stat st{};
  if (::fstat(r2.get(), &st) < 0) throw_errno("stat " + dir + "/resource2");
  d->shm_ = Mapping::map_shared(r2.get(), static_cast<size_t>(st.st_size), dir + "/resource2");
  std::string why;
  auto layout = Layout::from_header(*reinterpret_cast<const wire::RegionHeader*>(d->shm_.data()),
                                    static_cast<uint64_t>(st.st_size), &why);
  if (!layout) throw std::runtime_error("vmrpc: " + dir + ": " + why);
  d->region_ = RegionView(d->shm_.data(), *layout);
  return d;
}

uint32_t BarDevice::iv_position() const {
  return *reinterpret_cast<volatile uint32_t*>(regs_.data() + kRegIvPosition);
}

void BarDevice::ring(uint32_t slot) {
  // The request must be in shared memory before QEMU forwards the doorbell.
  ordering::full_fence();
  *reinterpret_cast<volatile uint32_t*>(regs_.data() + kRegDoorbell) =
      (region_.layout().host_peer_id << 16) | (slot & 0xffff);
}

}  // namespace vmrpc
