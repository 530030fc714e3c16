// peer area: peer access between this process's devices and copies between them
// (docs/cuda-runtime-internals.md §7). Every call goes to the host, which asks the driver
// about the GPUs the devices map to and keeps one context per device for this process
// (host-stub peer.cc). Enable and disable are synchronous (their errors, 704 already
// enabled and 705 not enabled, are the answer); copies are queued like cudaMemcpy's
// device-to-device copies, after the local checks that both ranges are this process's
// device memory.
#include "host_pointers.h"
#include "entry.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

bool valid_device(const Remote& r, int device) noexcept {
  return device >= 0 && static_cast<size_t>(device) < r.devices().size();
}

// The checks both peer copies make; cudaSuccess when the copy may be queued.
cudaError_t check_copy(const Remote& r, const void* dst, int dst_device, const void* src, int src_device,
                       size_t count) {
  if (!valid_device(r, dst_device) || !valid_device(r, src_device)) return cudaErrorInvalidDevice;
  if (!is_device(dst, count) || !is_device(src, count)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace
}  // namespace vmcuda::guest

using namespace vmcuda::guest;
namespace api = vmcuda::api;

// A device and itself: 0 (as NVIDIA's answers), without asking the host.
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (canAccessPeer == nullptr) return record(cudaErrorInvalidValue);
  if (!valid_device(*r, device) || !valid_device(*r, peerDevice)) return record(cudaErrorInvalidDevice);
  if (device == peerDevice) return *canAccessPeer = 0, cudaSuccess;
  auto lock = r->lock();
  const auto res = r->call<api::Call::DeviceCanAccessPeer>({device, peerDevice});
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  *canAccessPeer = res.reply.value;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  return plain_call<api::Call::EnablePeerAccess>({peerDevice, flags});
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) { return plain_call<api::Call::DisablePeerAccess>({peerDevice, 0}); }

cudaError_t cudaDeviceGetP2PAttribute(int* value, enum cudaDeviceP2PAttr attr, int srcDevice, int dstDevice) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (value == nullptr) return record(cudaErrorInvalidValue);
  if (!valid_device(*r, srcDevice) || !valid_device(*r, dstDevice)) return record(cudaErrorInvalidDevice);
  auto lock = r->lock();
  const auto res = r->call<api::Call::DeviceGetP2PAttribute>({static_cast<int32_t>(attr), srcDevice, dstDevice, 0});
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  *value = res.reply.value;
  return cudaSuccess;
}

// Asynchronous with respect to the host, ordered after the work of both devices (the
// host's cuMemcpyPeer): queued.
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_copy(*r, dst, dstDevice, src, srcDevice, count)) return record(e);
  auto lock = r->lock();
  return record(r->enqueue<api::Call::MemcpyPeer>({addr(dst), addr(src), count, dstDevice, srcDevice}));
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                cudaStream_t stream) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  uint64_t wire;
  if (cudaError_t e = stream_wire_handle(stream, false, &wire)) return record(e);
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_copy(*r, dst, dstDevice, src, srcDevice, count)) return record(e);
  auto lock = r->lock();
  return record(r->enqueue<api::Call::MemcpyPeerAsync>({addr(dst), addr(src), count, dstDevice, srcDevice, wire}));
}
