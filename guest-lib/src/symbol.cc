// Module variables: cudaGetSymbolAddress, cudaGetSymbolSize and the symbol copies, for the
// __device__ and __constant__ variables nvcc's host code registers (__cudaRegisterVar,
// docs/cuda-runtime-internals.md §1). A symbol is its host shadow's address; the first use
// on a device loads the module on the host and asks it where the variable is
// (cuModuleGetGlobal, host_objects.h); later uses answer locally. The storage is then
// device memory of this process like a cudaMalloc'ed block (vgpu_db::AllocationMap,
// Allocation::kModuleGlobal): the copies are cudaMemcpy and cudaMemcpyAsync at its
// address, and the address works in kernels and every copy, but not with cudaFree.
//
// A __managed__ variable's symbol is its shadow in the shared heap (managed.h): what the
// host code sees, so what cudaGetSymbolAddress gives. Its copies go to the variable's
// device storage on the calling thread's device, after the guest's writes to the shadow
// (ManagedVarSync, queued on the copy's stream); a synchronous copy to it then refreshes
// the shadow, an asynchronous one leaves that to the next synchronizing call, as CUDA
// leaves the host's view to it.
#include "host_objects.h"
#include "log.h"
#include "managed.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/module_registry.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

using vgpu_db::Variable;

// Where `symbol` lives on the calling thread's device; for a managed variable, `*managed`
// is its binding's handle there (0 for the others).
cudaError_t resolve(const void* symbol, HostGlobal* out, uint64_t* managed = nullptr) {
  if (cudaError_t e = enter_device_call()) return e;
  if (managed) *managed = 0;
  const Variable* v = vgpu_db::ModuleRegistry::process().find_variable(symbol);
  // A managed variable is known by its shadow (the registry knows its slot, which is no symbol).
  const Variable* mv = v ? nullptr : find_managed(symbol);
  if (!mv && (!v || v->kind == Variable::kHost || v->kind == Variable::kManaged)) return cudaErrorInvalidSymbol;
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return e;
  auto lock = r->lock();
  if (!mv) return host_global(*r, *v, out);
  ManagedBinding b;
  if (cudaError_t be = managed_binding(*r, *mv, &b)) return be;
  *out = HostGlobal{b.ptr, b.bytes};
  if (managed) *managed = b.var;
  return cudaSuccess;
}

// [offset, offset + count) of a variable of `bytes` bytes.
bool fits(uint64_t bytes, size_t offset, size_t count) { return offset <= bytes && count <= bytes - offset; }

void* at(const HostGlobal& g, size_t offset) { return reinterpret_cast<void*>(g.ptr + offset); }

// The copy kinds each direction allows (cuda_runtime_api.h).
bool to_symbol_kind(cudaMemcpyKind k) {
  return k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice || k == cudaMemcpyDefault;
}
bool from_symbol_kind(cudaMemcpyKind k) {
  return k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice || k == cudaMemcpyDefault;
}

// The variable's range [offset, offset + count), checked, or the error. For a managed
// variable (*managed != 0) the guest's writes to its shadow are queued to reach it first,
// ordered on `stream` (what the copy that follows names).
cudaError_t range(const void* symbol, size_t count, size_t offset, HostGlobal* g, uint64_t* managed,
                  cudaStream_t stream = nullptr, bool per_thread = false) {
  if (cudaError_t e = resolve(symbol, g, managed)) return e;
  if (!fits(g->bytes, offset, count)) return cudaErrorInvalidValue;
  if (!*managed) return cudaSuccess;
  uint64_t wire = 0;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &wire)) return e;
  return sync_managed(*managed, wire, false);
}

cudaError_t to_symbol_async(const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind kind,
                            cudaStream_t stream, bool per_thread) {
  if (!to_symbol_kind(kind)) return record(cudaErrorInvalidMemcpyDirection);
  HostGlobal g;
  uint64_t managed = 0;
  if (cudaError_t e = range(symbol, count, offset, &g, &managed, stream, per_thread)) return record(e);
  return per_thread ? cudaMemcpyAsync_ptsz(at(g, offset), src, count, kind, stream)
                    : cudaMemcpyAsync(at(g, offset), src, count, kind, stream);
}

cudaError_t from_symbol_async(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind,
                              cudaStream_t stream, bool per_thread) {
  if (!from_symbol_kind(kind)) return record(cudaErrorInvalidMemcpyDirection);
  HostGlobal g;
  uint64_t managed = 0;
  if (cudaError_t e = range(symbol, count, offset, &g, &managed, stream, per_thread)) return record(e);
  return per_thread ? cudaMemcpyAsync_ptsz(dst, at(g, offset), count, kind, stream)
                    : cudaMemcpyAsync(dst, at(g, offset), count, kind, stream);
}

}  // namespace
}  // namespace vmcuda::guest

using vmcuda::guest::HostGlobal;
using vmcuda::guest::record;

cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  if (!devPtr) return record(cudaErrorInvalidValue);
  if (vmcuda::guest::find_managed(symbol)) {
    // Managed memory has one address for the host and the device: here, what the host sees.
    if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
    *devPtr = const_cast<void*>(symbol);
    return cudaSuccess;
  }
  HostGlobal g;
  if (cudaError_t e = vmcuda::guest::resolve(symbol, &g)) return record(e);
  *devPtr = reinterpret_cast<void*>(g.ptr);
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  if (!size) return record(cudaErrorInvalidValue);
  HostGlobal g;
  if (cudaError_t e = vmcuda::guest::resolve(symbol, &g)) return record(e);
  *size = g.bytes;
  return cudaSuccess;
}

// Synchronous as cudaMemcpy is (host to device from pageable memory: once the bytes are
// staged; device to host: once they have arrived).
cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  if (!vmcuda::guest::to_symbol_kind(kind)) return record(cudaErrorInvalidMemcpyDirection);
  HostGlobal g;
  uint64_t managed = 0;
  if (cudaError_t e = vmcuda::guest::range(symbol, count, offset, &g, &managed)) return record(e);
  cudaError_t e = cudaMemcpy(vmcuda::guest::at(g, offset), src, count, kind);
  // The host code reads the variable next: its shadow is refreshed now.
  if (e == cudaSuccess && managed) e = record(vmcuda::guest::sync_managed(managed, 0, true));
  return e;
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
  if (!vmcuda::guest::from_symbol_kind(kind)) return record(cudaErrorInvalidMemcpyDirection);
  HostGlobal g;
  uint64_t managed = 0;
  if (cudaError_t e = vmcuda::guest::range(symbol, count, offset, &g, &managed)) return record(e);
  return cudaMemcpy(dst, vmcuda::guest::at(g, offset), count, kind);
}

cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind) {
  return vmcuda::guest::finish_on_per_thread_stream(
      cudaMemcpyToSymbolAsync(symbol, src, count, offset, kind, cudaStreamPerThread));
}
cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind) {
  return vmcuda::guest::finish_on_per_thread_stream(
      cudaMemcpyFromSymbolAsync(dst, symbol, count, offset, kind, cudaStreamPerThread));
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream) {
  return vmcuda::guest::to_symbol_async(symbol, src, count, offset, kind, stream, false);
}
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind, cudaStream_t stream) {
  return vmcuda::guest::to_symbol_async(symbol, src, count, offset, kind, stream, true);
}
cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  return vmcuda::guest::from_symbol_async(dst, symbol, count, offset, kind, stream, false);
}
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t stream) {
  return vmcuda::guest::from_symbol_async(dst, symbol, count, offset, kind, stream, true);
}
