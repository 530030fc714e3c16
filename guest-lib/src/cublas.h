// cuBLAS in libcuda.so.1 (vmcuda's libcublas.so.13 forwards each export here, as libcudart.so.13
// does): what the generated entry points (build/generated/cublas/cublas_guest.cc, from
// scripts/gen-cublas.py) share. A handle is a guest object with a wire handle (streams'
// counter); the guest keeps its pointer mode, which says whether a scalar is copied by value
// or passed as a device pointer and whether a result comes back in the reply (the call waits)
// or goes to device memory (the call is queued, as the GPU work is).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "remote.h"
#include "vmcuda/api/calls.h"
#include "vmcuda/api/cublas_scalars.h"

#define VMCUDA_CUBLAS_API extern "C"

struct cublasContext;  // the application's cublasHandle_t points at a guest Handle
using cublasHandle_t = cublasContext*;

namespace vmcuda::guest::cublas {

// cublasStatus_t and cublasPointerMode_t values (cublas_api.h).
inline constexpr int kSuccess = 0, kNotInitialized = 1, kAllocFailed = 3, kInvalidValue = 7, kMappingError = 11,
                     kExecutionFailed = 13, kInternalError = 14, kNotSupported = 15;
inline constexpr int kPointerModeHost = 0, kPointerModeDevice = 1;
extern const int kVersion[3];  // cublas_api.h's CUBLAS_VER_MAJOR/MINOR/PATCH (generated)

struct Handle {
  uint64_t wire = 0;
  int device = 0;  // the calling thread's device at cublasCreate
  std::atomic<int> pointer_mode{kPointerModeHost};
  std::atomic<int> math_mode{0};
  std::atomic<void*> stream{nullptr};  // cudaStream_t as the app gave it
  std::atomic<int> environment_mode{0};  // cublasSetEnvironmentMode's (no header declares it)
};

// The live handle `app` names (*h), or kNotInitialized (NULL, destroyed, never made), as
// NVIDIA's answers a NULL handle.
int enter(cublasHandle_t app, Handle** h) noexcept;
inline uint64_t device_pointer(const void* p) noexcept { return reinterpret_cast<uintptr_t>(p); }
// A scalar's wire field: its `bytes` copied (pointer mode host) or its device pointer.
int scalar(const Handle& h, const void* value, size_t bytes, uint8_t (&field)[16]) noexcept;
inline size_t scalar_bytes(int compute_type) noexcept { return api::cublas_scalar_bytes(compute_type); }
// cuBLAS's checks of sizes, made here because the calls are queued: natively the call itself
// answers them (api/libs/cublas.calls check=). Each answers the first bad parameter's number as
// the reference BLAS counts them (SGEMM's LDA is 8), 0 when all are good.
inline bool op_ok(int op) noexcept { return op == 0 || op == 1 || op == 2; }  // N, T, C
inline int gemm_bad(int ta, int tb, long long m, long long n, long long k, long long lda, long long ldb,
                    long long ldc) noexcept {
  auto at_least = [](long long ld, long long rows) { return ld >= (rows > 1 ? rows : 1); };
  return !op_ok(ta) ? 1 : !op_ok(tb) ? 2 : m < 0 ? 3 : n < 0 ? 4 : k < 0 ? 5 : !at_least(lda, ta == 0 ? m : k) ? 8
         : !at_least(ldb, tb == 0 ? k : n) ? 10 : !at_least(ldc, m) ? 13 : 0;
}
inline int gemv_bad(int t, long long m, long long n, long long lda, long long incx, long long incy) noexcept {
  return !op_ok(t) ? 1 : m < 0 ? 2 : n < 0 ? 3 : lda < (m > 1 ? m : 1) ? 6 : incx == 0 ? 8 : incy == 0 ? 11 : 0;
}
// What NVIDIA's library prints for a bad parameter (" ** On entry to SGEMM  parameter number 8
// had an illegal value", on stdout), then CUBLAS_STATUS_INVALID_VALUE.
int illegal_value(const char* routine, int parameter) noexcept;
// The host's answer as the app's cublasStatus_t.
int status_of(int32_t host_status, const char* call) noexcept;
void unsupported(const char* name, std::atomic<bool>& logged) noexcept;
// The connection (and the sticky error's check), or the status to return.
Remote* remote(int* status) noexcept;

// Queues call C (its errors, if any, come with a later synchronizing call).
template <api::Call C>
int queue(const typename api::CallTraits<C>::Args& a) noexcept {
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  return status_of(r->enqueue<C>(a), api::CallTraits<C>::kName);
}

// Runs call C now. `out`: where the result in the reply's trailing bytes goes (`bytes` of it).
template <api::Call C>
int wait(const typename api::CallTraits<C>::Args& a, typename api::CallTraits<C>::Reply* reply, void* out,
         size_t bytes) noexcept {
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  const auto res = r->call<C>(a, {}, out ? 16 : 0);
  if (res.status != 0) return status_of(res.status, api::CallTraits<C>::kName);
  if (out) {
    if (res.extra.size() < bytes) return status_of(-1, api::CallTraits<C>::kName);
    std::memcpy(out, res.extra.data(), bytes);
  }
  *reply = res.reply;
  return kSuccess;
}

}  // namespace vmcuda::guest::cublas

namespace vmcuda::guest::cublaslt {
// Forgets the heuristic answers given for handle `wire` (cublaslt.cc): a cuBLAS handle is a
// cuBLASLt handle too, and its destruction drops them as cublasLtDestroy's does.
void forget_handle(uint64_t wire) noexcept;
}  // namespace vmcuda::guest::cublaslt
