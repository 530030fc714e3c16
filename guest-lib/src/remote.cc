#include "remote.h"

#include <errno.h>  // program_invocation_short_name

#include <string_view>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include "log.h"
#include "vmrpc/driver_doorbell.h"
#include "vmrpc/unix_socket.h"

namespace vmcuda::guest {

using vmrpc::wire::ChannelStatus;

namespace {
// Where vmcuda-run and the stub's default put the local socket.
constexpr const char* kDefaultSocket = "/run/vmcuda/local.sock";
// The first device of the guest kernel driver (ivshmem-driver/), inside a VM.
constexpr const char* kDefaultDevice = "/dev/vmcuda0";

// Whether DriverDevice::open failed because every slot is taken (EBUSY): the device
// exists but is busy, as CUDA's cudaErrorDevicesUnavailable means.
bool errno_busy(const std::exception& e) {
  const auto* se = dynamic_cast<const std::system_error*>(&e);
  return se && se->code().value() == EBUSY;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000  // Linux 4.17; older kernels take it as a hint (checked below)
#endif

// Reserves the client's device arena range (handshake) in this process, inaccessible and
// without memory, so that no host pointer of this process can ever equal a device pointer
// (pointer classification, cudaMemcpyDefault). Kept for the process's life. Where the
// range is taken (the stub in this very process, an old kernel) it is only logged: the
// allocation map stays the source of truth.
void reserve_device_range(uint64_t base, uint64_t bytes) {
  if (base == 0 || bytes == 0) return;
  void* want = reinterpret_cast<void*>(base);
  void* got = ::mmap(want, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == want) return;
  const int err = got == MAP_FAILED ? errno : 0;
  if (got != MAP_FAILED) ::munmap(got, bytes);  // placed elsewhere: no use
  VMCUDA_LOG(kDebug, "remote", "cannot reserve the device range [0x%llx, +0x%llx) in this process (errno %d)",
             static_cast<unsigned long long>(base), static_cast<unsigned long long>(bytes), err);
}
}  // namespace

cudaError_t to_cuda_error(int32_t status, const char* call) noexcept {
  if (status >= 0) return static_cast<cudaError_t>(status);  // CUresult and cudaError_t agree on numbers
  if (status == static_cast<int32_t>(ChannelStatus::kTransportLost)) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMCUDA_LOG(kWarn, "remote", "lost the connection to vmcuda-stub: CUDA calls fail from now on; restart the "
                                  "application once the stub serves again");
    return cudaErrorDevicesUnavailable;
  }
  if (status == static_cast<int32_t>(ChannelStatus::kStateLost)) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMCUDA_LOG(kWarn, "remote", "this program's GPU state is gone: vmcuda-stub was restarted without it (it "
                                  "crashed, or was killed), or the VM was restored from a save or snapshot taken "
                                  "without vmcuda's GPU state (save VMs with `vmcudactl save`, see "
                                  "docs/snapshots.md); CUDA calls fail from now on: restart the application");
    return cudaErrorDevicesUnavailable;
  }
  if (status == static_cast<int32_t>(ChannelStatus::kLaunchTimeout)) {
    // As a native launch timeout: sticky (runtime_state.cc), the context is gone.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMCUDA_LOG(kWarn, "remote", "a kernel of this program ran longer than the host allows (vmcuda-stub "
                                  "--kernel-time-limit): the host ended its GPU context; CUDA calls fail with "
                                  "cudaErrorLaunchTimeout from now on: restart the application");
    return cudaErrorLaunchTimeout;
  }
  if (status == static_cast<int32_t>(ChannelStatus::kRefused))
    return cudaErrorDevicesUnavailable;  // said where the slot was opened (Remote::open_*)
  VMCUDA_LOG(kWarn, "remote", "the host rejected %s (channel status %d): a vmcuda bug or a guest/host version "
                              "mismatch", call, status);
  return cudaErrorUnknown;
}

Remote* Remote::get(cudaError_t* error) noexcept {
  // Connected once, kept for the process's life (destroyed at exit by the OS: the
  // host sees the connection close and frees everything).
  static Remote* instance = nullptr;
  static cudaError_t failure = cudaSuccess;
  static std::once_flag once;
  std::call_once(once, [] {
    auto* r = new Remote;
    if (r->connect(&failure)) {
      instance = r;
      started_.store(true, std::memory_order_release);
    } else {
      delete r;
    }
  });
  if (!instance && error) *error = failure;
  return instance;
}

bool Remote::open_device(const std::string& device, bool explicit_choice, cudaError_t* error) {
  try {
    auto dev = vmrpc::DriverDevice::open(device);
    const unsigned slot = dev->slot();
    std::string why;
    slot_ = vmrpc::ClientSlot::adopt(dev->region(), *dev, slot, &why);
    transport_ = std::move(dev);
    if (!slot_) {
      VMCUDA_LOG(kWarn, "remote", "cannot open slot %u of %s: %s. Check that vmcuda-stub serves this VM's "
                                  "ivshmem socket (the host's stub log says why)",
                 slot, device.c_str(), why.c_str());
      *error = cudaErrorDevicesUnavailable;
      return false;
    }
  } catch (const std::exception& e) {
    // DriverDevice's message names the device and what to do (load the module, free
    // slots, start the stub).
    VMCUDA_LOG(kWarn, "remote", "no GPU: %s%s", e.what(),
               explicit_choice ? " (VMCUDA_DEVICE names it; unset VMCUDA_DEVICE to use the local socket)" : "");
    *error = errno_busy(e) ? cudaErrorDevicesUnavailable : cudaErrorNoDevice;
    return false;
  }
  VMCUDA_LOG(kInfo, "remote", "connected through %s (slot %u)", device.c_str(), static_cast<unsigned>(slot_->index()));
  return true;
}

bool Remote::open_socket(const std::string& path, bool explicit_choice, cudaError_t* error) {
  try {
    // vmcuda's system service user (the packaged stub runs as it) may serve too.
    std::optional<uid_t> service_uid;
    try {
      service_uid = vmrpc::find_user("vmcuda");
    } catch (const std::exception&) {
    }
    auto conn = vmrpc::LocalConnection::connect(path, service_uid);
    std::string why;
    slot_ = vmrpc::ClientSlot::claim(conn->region(), *conn, &why);
    transport_ = std::move(conn);
    if (!slot_) {
      VMCUDA_LOG(kWarn, "remote", "cannot open a slot on %s: %s", path.c_str(), why.c_str());
      *error = cudaErrorDevicesUnavailable;
      return false;
    }
  } catch (const std::exception& e) {
    VMCUDA_LOG(kWarn, "remote", "no GPU: %s. Start the app with vmcuda-run, or set VMCUDA_SOCKET to the socket "
                                "of a running vmcuda-stub%s", e.what(),
               explicit_choice ? "" : "; inside a VM, load the vmcuda module (ivshmem-driver/) so that "
                                      "/dev/vmcuda0 exists, or set VMCUDA_DEVICE");
    *error = cudaErrorNoDevice;
    return false;
  }
  VMCUDA_LOG(kInfo, "remote", "connected through %s (slot %u)", path.c_str(), static_cast<unsigned>(slot_->index()));
  return true;
}

bool Remote::connect(cudaError_t* error) {
  const char* device_env = std::getenv("VMCUDA_DEVICE");
  const char* socket_env = std::getenv("VMCUDA_SOCKET");
  bool ok;
  if (device_env && *device_env) ok = open_device(device_env, true, error);
  else if (socket_env && *socket_env) ok = open_socket(socket_env, true, error);
  else if (::access(kDefaultDevice, F_OK) == 0) ok = open_device(kDefaultDevice, false, error);
  else ok = open_socket(kDefaultSocket, false, error);
  if (!ok) {
    slot_.reset();  // before its transport
    transport_.reset();
    return false;
  }
  // The handshake fills the vGPU database: later device queries are local.
  auto hs = api::remote<api::Call::Handshake>(*slot_, {});
  if (hs.status != 0) {
    *error = to_cuda_error(hs.status, "Handshake");
    return false;
  }
  handshake_ = hs.reply;
  // The program's name, for the host's status (vmcudactl status); a host that does not know
  // the call answers an error, which changes nothing here.
  {
    const std::string_view name(program_invocation_short_name ? program_invocation_short_name : "");
    const auto bytes = std::as_bytes(std::span(name.data(), std::min<size_t>(name.size(), api::kMaxProgramName)));
    (void)api::remote<api::Call::ClientInfo>(*slot_, {}, bytes);
  }
  reserve_device_range(handshake_.arena_base, handshake_.arena_bytes);
  for (int i = 0; i < handshake_.device_count; ++i) {
    auto p = api::remote<api::Call::DeviceProperties>(*slot_, {i, 0});
    if (p.status != 0) {
      *error = to_cuda_error(p.status, "DeviceProperties");
      return false;
    }
    devices_.push_back(p.reply);
  }
  return true;
}

void Remote::collect_queued() {
  for (const Queued& q : queued_) {
    const int32_t st = slot_->result(q.frame).status;
    if (st != 0 && deferred_ == cudaSuccess) deferred_ = to_cuda_error(st, api::call_name(q.call));
  }
  queued_.clear();
  collect_late();
}

void Remote::collect_late() {
  // Work the host accepted earlier and ran after answering (its GPU working thread).
  if (const int32_t late = slot_->take_late_status(); late != 0 && deferred_ == cudaSuccess)
    deferred_ = to_cuda_error(late, "a queued call");
}

cudaError_t Remote::take_deferred() {
  cudaError_t e = deferred_;
  deferred_ = cudaSuccess;
  return e;
}

void Remote::send_queue() {
  settle();
  if (slot_->batch().empty()) return;
  const ChannelStatus st = slot_->flush();
  if (st != ChannelStatus::kOk) {
    queued_.clear();
    if (deferred_ == cudaSuccess) deferred_ = to_cuda_error(static_cast<int32_t>(st), "a batch of queued calls");
    return;
  }
  collect_queued();
}

void Remote::submit_queue() {
  settle();
  if (slot_->batch().empty()) return;
  if (const ChannelStatus st = slot_->submit(); st != ChannelStatus::kOk) {
    queued_.clear();
    if (deferred_ == cudaSuccess) deferred_ = to_cuda_error(static_cast<int32_t>(st), "a batch of queued calls");
    return;
  }
  in_flight_queued_.swap(queued_);
  queued_.clear();
  if (!spill_batch_) {
    spill_.resize(slot_->batch().capacity());
    spill_batch_.emplace(std::span(spill_));
  }
  spill_batch_->reset();
  in_flight_ = true;
}

void Remote::settle() {
  if (!in_flight_) return;
  in_flight_ = false;
  const ChannelStatus st = slot_->wait();
  if (st != ChannelStatus::kOk) {
    if (deferred_ == cudaSuccess) deferred_ = to_cuda_error(static_cast<int32_t>(st), "a batch of queued calls");
  } else {
    for (const Queued& q : in_flight_queued_) {
      const int32_t s = slot_->result(q.frame).status;
      if (s != 0 && deferred_ == cudaSuccess) deferred_ = to_cuda_error(s, api::call_name(q.call));
    }
  }
  in_flight_queued_.clear();
  collect_late();
  // The stack is the guest's again (its answers read above): the calls queued meanwhile
  // move in at the same offsets.
  slot_->batch().adopt(*spill_batch_);
  queued_.swap(spill_queued_);
  spill_queued_.clear();
  spill_batch_->reset();
}

cudaError_t Remote::flush() {
  send_queue();
  return take_deferred();
}

}  // namespace vmcuda::guest
