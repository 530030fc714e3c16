// The rest of the runtime's device calls (calls.def 0x1c00) that need a handler of their own:
// atomic capabilities with the host and between devices (the 1D linear texture width, the
// persisting L2 reset and the GPUDirect RDMA flush are plain_calls.def's). Devices are guest
// indexes, checked here; the driver checks the operations and its answer is the guest's.
#include <cstring>

#include "session.h"

namespace vmcuda::host {

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

}  // namespace vmcuda::host
