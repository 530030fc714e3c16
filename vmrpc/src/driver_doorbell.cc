#include "vmrpc/driver_doorbell.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "uapi/vmcuda.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"

namespace vmrpc {

std::unique_ptr<DriverDevice> DriverDevice::open(const std::string& path) {
  std::unique_ptr<DriverDevice> d(new DriverDevice);
  d->path_ = path;
  d->fd_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!d->fd_) {
    const int err = errno;
    std::string hint;
    switch (err) {
      case ENOENT:
      case ENXIO:
        hint = " (load the vmcuda module: modprobe vmcuda, and check that the VM has an ivshmem-doorbell device)";
        break;
      case EBUSY:
        hint = " (all client slots of the region are in use: close other CUDA processes of this VM or give it more "
               "slots on the host)";
        break;
      case ENODEV:
        hint = " (the shared memory holds no vmrpc region: is vmcuda-stub serving this VM's ivshmem socket? see dmesg)";
        break;
      case EACCES:
      case EPERM:
        hint = " (no permission: see ivshmem-driver/README.md for a udev rule)";
        break;
    }
    throw_errno("open " + path + hint, err);
  }
  vmcuda_info i{};
  if (::ioctl(d->fd_.get(), VMCUDA_IOC_INFO, &i) < 0) throw_errno("VMCUDA_IOC_INFO on " + path);
  if (i.version != VMCUDA_UAPI_VERSION)
    throw std::runtime_error("vmrpc: " + path + ": driver interface version " + std::to_string(i.version) +
                             ", this library speaks " + std::to_string(VMCUDA_UAPI_VERSION) +
                             "; install matching driver and library");
  d->info_ = Info{i.version, i.slot, i.region_bytes, i.slot_count, i.vectors, i.iv_position, i.host_peer_id};
  d->map_ = Mapping::map_shared(d->fd_.get(), static_cast<size_t>(i.region_bytes), path + " (shared region)");
  std::string why;
  auto layout = Layout::from_header(*reinterpret_cast<const wire::RegionHeader*>(d->map_.data()), i.region_bytes,
                                    &why);
  if (!layout) throw std::runtime_error("vmrpc: " + path + ": " + why);
  if (layout->slot_count != i.slot_count || i.slot >= layout->slot_count ||
      layout->host_peer_id != i.host_peer_id)
    throw std::runtime_error("vmrpc: " + path + ": driver and region header disagree (slot " +
                             std::to_string(i.slot) + " of " + std::to_string(i.slot_count) + ")");
  // At the host's address when free (the driver's mmap takes the address like any file's).
  if (!map_at_host_address(d->fd_.get(), 0, *layout, d->map_, &why))
    VMRPC_LOG(kInfo, "client", path + ": region not at the host's address: " + why);
  d->region_ = RegionView(d->map_.data(), *layout);
  return d;
}

DriverDevice::~DriverDevice() {
  // The mapping holds the file open: unmap first, so that close() releases the slot.
  region_ = RegionView();
  map_.reset();
  fd_.reset();
}

void DriverDevice::ring(uint32_t) {
  // The driver rings this file's own slot whatever the caller asks; ClientSlot only
  // ever rings its own. The ioctl is a full barrier for our earlier stores.
  ++stats_.rings;
  if (::ioctl(fd_.get(), VMCUDA_IOC_RING) < 0 && errno == ENODEV) gone_ = true;
}

bool DriverDevice::wait(uint32_t) {
  if (gone_) return false;
  ++stats_.waits;
  if (mode_ == WaitMode::kPoll) {
    pollfd p{fd_.get(), POLLIN, 0};
    const int ms = static_cast<int>(std::min<uint64_t>((slice_ns_ + 999999) / 1000000, 1u << 30));
    const int n = ::poll(&p, 1, ms);
    if (n < 0) {
      if (errno == EINTR) {
        ++stats_.interrupted;
        return true;
      }
      return false;
    }
    if (n == 0) {
      ++stats_.timeouts;
      return alive();
    }
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
      gone_ = true;
      return false;
    }
    vmcuda_wait w{0, 0, 0, 0};  // take the event without sleeping
    if (::ioctl(fd_.get(), VMCUDA_IOC_WAIT, &w) == 0) ++stats_.wakeups;
    return true;
  }
  vmcuda_wait w{slice_ns_ ? slice_ns_ : VMCUDA_WAIT_FOREVER, 0, 0, 0};
  if (::ioctl(fd_.get(), VMCUDA_IOC_WAIT, &w) == 0) {
    ++stats_.wakeups;
    return true;
  }
  switch (errno) {
    case ETIMEDOUT:
      ++stats_.timeouts;
      return alive();
    case EINTR:
      ++stats_.interrupted;
      return true;
    case ENODEV:
      gone_ = true;
      return false;
    default:
      return false;
  }
}

bool DriverDevice::alive() {
  if (gone_ || !region_.base()) return false;
  // The host stub rewrites the header only when it (re)initialises; a region without
  // our magic means nobody serves it any more.
  return ordering::load_relaxed(region_.header().magic) == wire::kRegionMagic;
}

}  // namespace vmrpc
