// cuGetProcAddress: the driver entry point for a name, a CUDA version and a stream mode, as
// NVIDIA's driver chooses it (cuda.h): the newest variant of NAME whose version is at most
// the one asked (cuMemAlloc at 12000: cuMemAlloc_v2), and with
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM its per-thread (_ptds/_ptsz) variant where
// there is one. The table (exports/libcuda.so.1.versions, generated from cudaTypedefs.h)
// names the exported symbol of each version; a symbol vmcuda has not implemented is its
// not-supported stub, so the caller gets a function that answers 801 and logs its name.
#include <cstring>
#include <span>
#include <string_view>

#include "driver_proc.h"
#include "driver_state.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

#define CU_API extern "C" __attribute__((visibility("default")))

namespace vmcuda::guest {

ProcLookup lookup_proc(std::string_view symbol, int cuda_version, cuuint64_t flags) noexcept {
  const bool per_thread = flags & cu::kProcPerThreadStream;
  ProcLookup out;
  bool known = false;
  int best_plain = -1, best_pt = -1;
  for (const ProcRow& r : std::span(kProcRows, kProcRowCount)) {
    if (symbol != r.name) continue;
    known = true;
    if (r.version > cuda_version) continue;
    if (r.pt == 0) {
      if (r.version > best_plain) best_plain = r.version, out.fn = reinterpret_cast<void*>(r.fn);
    }
  }
  if (per_thread) {
    for (const ProcRow& r : std::span(kProcRows, kProcRowCount))
      if (symbol == r.name && r.pt != 0 && r.version <= cuda_version && r.version > best_pt) {
        best_pt = r.version;
        // The per-thread variant of the version chosen (not of an older one).
        if (r.version >= best_plain || best_plain < 0) out.fn = reinterpret_cast<void*>(r.fn);
      }
  }
  if (out.fn) out.status = cu::kProcSuccess;
  else out.status = known ? cu::kProcVersionNotSufficient : cu::kProcSymbolNotFound;
  return out;
}

}  // namespace vmcuda::guest

namespace {
CUresult get_proc(const char* symbol, void** pfn, int version, cuuint64_t flags, int* status) {
  if (!symbol || !pfn) return vmcuda::cu::kInvalidValue;
  if (flags & ~(vmcuda::cu::kProcLegacyStream | vmcuda::cu::kProcPerThreadStream)) return vmcuda::cu::kInvalidValue;
  const auto r = vmcuda::guest::lookup_proc(symbol, version, flags);
  *pfn = r.fn;
  // With a status to fill, a symbol not found is an answer, not an error (NVIDIA's driver
  // 580 on an H100: CUDA_SUCCESS and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND or
  // VERSION_NOT_SUFFICIENT, for an unknown name, an empty one and a too-old version alike).
  if (status) {
    *status = r.status;
    return vmcuda::cu::kSuccess;
  }
  return r.fn ? vmcuda::cu::kSuccess : vmcuda::cu::kNotFound;
}
}  // namespace

CU_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* symbolStatus) {
  return get_proc(symbol, pfn, cudaVersion, flags, symbolStatus);
}
CU_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return get_proc(symbol, pfn, cudaVersion, flags, nullptr);
}

// The runtime's way to the same table (cuda_runtime_api.h): cudaEnableDefault (0) is the
// legacy default stream unless the caller was built for per-thread streams (the _ptsz
// entry points), cudaEnableLegacyStream 1, cudaEnablePerThreadDefaultStream 2 (the
// driver's flag values; both at once NVIDIA's runtime takes, as per-thread here). Without
// a version, the runtime's own (CUDA 13.0). A symbol not found is cudaSuccess and NULL,
// with or without a status to fill (NVIDIA's 13.0 runtime on an H100).
namespace {
cudaError_t driver_entry_point(const char* symbol, void** fn, unsigned version, unsigned long long flags,
                               bool per_thread_build, cudaDriverEntryPointQueryResult* status) {
  constexpr unsigned long long kLegacy = 1, kPerThread = 2;
  if (flags & ~(kLegacy | kPerThread)) return vmcuda::guest::record(cudaErrorInvalidValue);
  if (flags == 0) flags = per_thread_build ? kPerThread : kLegacy;
  if (flags == (kLegacy | kPerThread)) flags = kPerThread;
  int found_status = 0;
  const CUresult r = get_proc(symbol, fn, static_cast<int>(version), flags, &found_status);
  if (r != vmcuda::cu::kSuccess) return vmcuda::guest::record(cudaErrorInvalidValue);
  if (status) *status = static_cast<cudaDriverEntryPointQueryResult>(found_status);
  return cudaSuccess;
}
constexpr unsigned kRuntimeVersion = 13000;
}  // namespace

CU_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                           cudaDriverEntryPointQueryResult* driverStatus) {
  return driver_entry_point(symbol, funcPtr, kRuntimeVersion, flags, false, driverStatus);
}
CU_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                                cudaDriverEntryPointQueryResult* driverStatus) {
  return driver_entry_point(symbol, funcPtr, kRuntimeVersion, flags, true, driverStatus);
}
CU_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                    unsigned long long flags,
                                                    cudaDriverEntryPointQueryResult* driverStatus) {
  return driver_entry_point(symbol, funcPtr, cudaVersion, flags, false, driverStatus);
}
CU_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                         unsigned long long flags,
                                                         cudaDriverEntryPointQueryResult* driverStatus) {
  return driver_entry_point(symbol, funcPtr, cudaVersion, flags, true, driverStatus);
}
