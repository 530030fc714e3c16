// The rest of the runtime's device calls (calls.def 0x1c00): device queries CUDA 12-13 added
// (1D linear texture width, atomic capabilities with the host and between devices), the
// persisting L2 reset and the GPUDirect RDMA flush. Devices are guest indexes, checked here;
// the driver checks the rest (formats, operations, targets) and its answer is the guest's.
#include <cstring>

#include "session.h"

namespace vmcuda::host {

int32_t Session::on_Texture1DLinearMaxWidth(const api::Texture1DWidthArgs& a, api::Texture1DWidthReply& r, Request&) {
  if (a.pad != 0) return guest_fault("Texture1DLinearMaxWidth: padding not zero");
  if (!valid_device(a.device)) return CUDA_ERROR_INVALID_DEVICE;
  CUdevice dev;
  if (CUresult e = api_.cuDeviceGet(&dev, devices_[a.device]); e != CUDA_SUCCESS) return e;
  size_t width = 0;
  const CUresult e = api_.cuDeviceGetTexture1DLinearMaxWidth(&width, static_cast<int>(a.format), a.channels, dev);
  r.width = width;
  return e;
}

int32_t Session::on_AtomicCapabilities(const api::AtomicCapsArgs& a, api::AtomicCapsReply& r, Request& req) {
  if (a.pad != 0 || a.count == 0 || a.count > api::kMaxAtomicOperations)
    return guest_fault("AtomicCapabilities: no operations, too many, or padding not zero");
  if (req.tail.size() != size_t{a.count} * sizeof(uint32_t))
    return guest_fault("AtomicCapabilities: operation bytes of the wrong length");
  if (!valid_device(a.src) || (a.dst != api::kAtomicHost && !valid_device(a.dst))) return CUDA_ERROR_INVALID_DEVICE;
  int ops[api::kMaxAtomicOperations];
  std::memcpy(ops, req.tail.data(), req.tail.size());
  CUdevice src, dst;
  if (CUresult e = api_.cuDeviceGet(&src, devices_[a.src]); e != CUDA_SUCCESS) return e;
  if (a.dst == api::kAtomicHost) return api_.cuDeviceGetHostAtomicCapabilities(r.caps, ops, a.count, src);
  if (CUresult e = api_.cuDeviceGet(&dst, devices_[a.dst]); e != CUDA_SUCCESS) return e;
  return api_.cuDeviceGetP2PAtomicCapabilities(r.caps, ops, a.count, src, dst);
}

// The current device's context (the dispatcher made it current).
int32_t Session::on_CtxResetPersistingL2Cache(const api::Empty&, api::Empty&, Request&) {
  return api_.cuCtxResetPersistingL2Cache();
}

int32_t Session::on_FlushGPUDirectRDMAWrites(const api::FlushRdmaArgs& a, api::Empty&, Request&) {
  return api_.cuFlushGPUDirectRDMAWrites(static_cast<int>(a.target), static_cast<int>(a.scope));
}

}  // namespace vmcuda::host
