// The rest of the runtime's device calls (calls.def 0x1c00; the host's device_ext.cc): atomic
// capabilities with the host and between devices (CUDA 13), the persisting L2 reset and the
// GPUDirect RDMA flush. The 1D linear texture width is in arrays.cc (it needs the channel
// formats), the cluster size in function.cc (it needs the kernel).
#include <algorithm>
#include <span>

#include "entry.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace api = vmcuda::api;
using vmcuda::guest::record;

namespace {
// One capability mask per operation, asked in pieces of at most kMaxAtomicOperations.
cudaError_t atomic_caps(unsigned int* caps, const cudaAtomicOperation* ops, unsigned count, int src, int dst) {
  cudaError_t err;
  vmcuda::guest::Remote* r = vmcuda::guest::device_call(&err);
  if (!r) return err;
  if (!caps || !ops || count == 0) return record(cudaErrorInvalidValue);
  const auto valid = [&](int d) { return d >= 0 && static_cast<size_t>(d) < r->devices().size(); };
  if (!valid(src) || (dst != api::kAtomicHost && !valid(dst))) return record(cudaErrorInvalidDevice);
  auto lock = r->lock();
  for (unsigned at = 0; at < count;) {
    const unsigned n = std::min(count - at, api::kMaxAtomicOperations);
    uint32_t wire[api::kMaxAtomicOperations];
    for (unsigned i = 0; i < n; ++i) wire[i] = static_cast<uint32_t>(ops[at + i]);
    const auto res = r->call<api::Call::AtomicCapabilities>({src, dst, n, 0}, std::as_bytes(std::span(wire, n)));
    if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
    std::copy_n(res.reply.caps, n, caps + at);
    at += n;
  }
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaDeviceGetHostAtomicCapabilities(unsigned int* capabilities, const enum cudaAtomicOperation* operations,
                                                unsigned int count, int device) {
  return atomic_caps(capabilities, operations, count, device, api::kAtomicHost);
}

cudaError_t cudaDeviceGetP2PAtomicCapabilities(unsigned int* capabilities, const enum cudaAtomicOperation* operations,
                                               unsigned int count, int srcDevice, int dstDevice) {
  // A device and itself is no peer pair (the driver's answer, also where two guest devices are one GPU).
  if (srcDevice == dstDevice && srcDevice >= 0) {
    cudaError_t err;
    if (!vmcuda::guest::device_call(&err)) return err;
    return record(cudaErrorInvalidDevice);
  }
  return atomic_caps(capabilities, operations, count, srcDevice, dstDevice);
}

// Queued: it only resets the L2 lines of the current device's context (no answer to wait for).
cudaError_t cudaCtxResetPersistingL2Cache(void) {
  return vmcuda::guest::plain_call<api::Call::CtxResetPersistingL2Cache>({});
}

// The host's writes to the GPU (none come from a VM: no GPUDirect RDMA peer there) flushed as asked.
cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                               enum cudaFlushGPUDirectRDMAWritesScope scope) {
  return vmcuda::guest::plain_call<api::Call::FlushGPUDirectRDMAWrites>(
      {static_cast<uint32_t>(target), static_cast<uint32_t>(scope)});
}
