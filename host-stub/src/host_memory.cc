// Pinned host memory (calls.def PinHeap/UnpinHeap): ranges of the shared heap the guest
// uses as cudaMallocHost memory or copy staging, registered with the driver so copies
// from and to them are DMA. Only what is used gets pinned.
#include <algorithm>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::on_PinHeap(const api::HeapRangeArgs& a, api::Empty&, Request& req) {
  auto range = req.ctx.heap(a.range);
  if (!range || range->empty()) return guest_fault("PinHeap: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  if (vol_.find(ObjectKind::HostRegistration, a.range.offset)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  // Page-locked memory is the host's to give: counted against the VM's host memory bound
  // (natively, cudaHostRegister and cudaMallocHost beyond what the host lets a process lock
  // answer cudaErrorMemoryAllocation).
  HostRegistrationObject reg{range->data(), range->size()};
  if (!charge_host(reg.bytes, "pinning host memory")) return CUDA_ERROR_OUT_OF_MEMORY;
  reg.charged = account_ ? reg.bytes : 0;
  // Portable: pinned for every context of this client; device-mapped: for
  // cudaHostAllocMapped.
  CUresult e = api_.cuMemHostRegister_v2(reg.host, reg.bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (e != CUDA_SUCCESS) {
    if (reg.charged) account_->refund(reg.charged, VmLedger::kHost);
    return e;
  }
  vol_.add(ObjectKind::HostRegistration, -1, a.range.offset, 0, reg);
  return CUDA_SUCCESS;
}

namespace {
struct HostLibraryCost {
  const vmrpc::knobs::Knob* knob;
  const char* what;  // for the log line of a refusal
};
constexpr HostLibraryCost kHostLibraryCosts[kHostLibraries] = {
    {&vmrpc::knobs::kBlasHostBytes, "NVIDIA's cuBLAS and cuBLASLt in a worker (VMCUDA_BLAS_HOST_BYTES)"},
    {&vmrpc::knobs::kSparseHostBytes, "NVIDIA's cuSPARSE in a worker (VMCUDA_SPARSE_HOST_BYTES)"},
    {&vmrpc::knobs::kSolverHostBytes, "NVIDIA's cuSOLVER in a worker (VMCUDA_SOLVER_HOST_BYTES)"},
    {&vmrpc::knobs::kDnnHostBytes, "NVIDIA's cuDNN in a worker (VMCUDA_DNN_HOST_BYTES)"},
    {&vmrpc::knobs::kFftHostBytes, "NVIDIA's cuFFT in a worker (VMCUDA_FFT_HOST_BYTES)"},
    {&vmrpc::knobs::kRandHostBytes, "NVIDIA's cuRAND in a worker (VMCUDA_RAND_HOST_BYTES)"},
};
}  // namespace

const vmrpc::knobs::Knob& host_library_knob(HostLibrary l) { return *kHostLibraryCosts[static_cast<size_t>(l)].knob; }

// The library stays loaded until the worker ends, as the charge does (the VM's ledger takes back
// a worker's charges when it ends).
bool Session::charge_library_host(HostLibrary l) {
  const auto i = static_cast<size_t>(l);
  if (library_host_charged_[i] || !limits_.library_host_bytes[i]) return true;
  if (!charge_host(limits_.library_host_bytes[i], kHostLibraryCosts[i].what)) return false;
  library_host_charged_[i] = true;
  return true;
}

bool Session::charge_host(uint64_t bytes, const char* what) {
  if (!account_ || bytes == 0 || account_->charge(bytes, VmLedger::kHost)) return true;
  if (host_refusals_++ < 8)
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": " + what + " (" + std::to_string(bytes >> 20) + " MiB): the VM's host " +
                                 "memory bound (" + std::to_string(limits_.ledger->limit(VmLedger::kHost) >> 20) +
                                 " MiB, vmcuda-stub --host-memory-quota-mib) has " +
                                 std::to_string((limits_.ledger->limit(VmLedger::kHost) -
                                                 std::min(limits_.ledger->limit(VmLedger::kHost),
                                                          limits_.ledger->used(VmLedger::kHost))) >> 20) +
                                 " MiB left; answered cudaErrorMemoryAllocation");
  return false;
}

// For a guest whose region is not at this process's address: the device address of pinned
// heap bytes (a guest at the same address uses its own pointer, which is this one).
int32_t Session::on_HostGetDevicePointer(const api::HeapRangeArgs& a, api::PtrReply& reply, Request& req) {
  auto range = req.ctx.heap(a.range);
  if (!range) return guest_fault("HostGetDevicePointer: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  // Only bytes inside one block this client pinned (with DEVICEMAP) have a device address.
  const auto& pinned = vol_.of(ObjectKind::HostRegistration);
  auto it = pinned.upper_bound(a.range.offset);
  if (it == pinned.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  const uint64_t off = a.range.offset - it->first, bytes = vol_.get(it->second)->as<HostRegistrationObject>().bytes;
  if (off >= bytes || a.range.bytes > bytes - off) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr d = 0;
  CUresult e = api_.cuMemHostGetDevicePointer_v2(&d, range->data(), 0);
  if (e != CUDA_SUCCESS) return e;
  reply.ptr = d;
  return CUDA_SUCCESS;
}

int32_t Session::on_UnpinHeap(const api::HeapRangeArgs& a, api::Empty&, Request&) {
  return destroy_entry(ObjectKind::HostRegistration, a.range.offset, 713);  // cudaErrorHostMemoryNotRegistered
}

}  // namespace vmcuda::host
