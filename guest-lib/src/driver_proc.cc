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
  if (status) *status = r.status;
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
