// cuBLAS on the host (issue 12 point 3): the library's entry points and what every handler of
// a cuBLAS call does (the generated ones, build/generated/cublas/cublas_host.cc, and those of
// cublas.cc): find the client's handle, switch to its device's context, check each device
// pointer is the client's memory, take each scalar by value or as a device pointer per the
// handle's pointer mode, call the real library, switch back.
#pragma once

#include <type_traits>

#include "aligned_scalars.h"
#include "cublas_host_api.h"
#include "session.h"
#include "vmcuda/api/cublas_scalars.h"

namespace vmcuda::host {

// cublasStatus_t values (cublas_api.h) the host answers itself.
inline constexpr int32_t CUBLAS_STATUS_SUCCESS = 0;
inline constexpr int32_t CUBLAS_STATUS_NOT_INITIALIZED = 1;
inline constexpr int32_t CUBLAS_STATUS_ALLOC_FAILED = 3;
inline constexpr int32_t CUBLAS_STATUS_INVALID_VALUE = 7;
inline constexpr int32_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
inline constexpr int32_t CUBLAS_POINTER_MODE_DEVICE = 1;

// The entry points of libcublas.so.13 the calls use (generated list; ABI types).
struct CublasApi {
#define VMCUDA_CUBLAS_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUBLAS_FUNCTIONS(VMCUDA_CUBLAS_DECLARE)
#undef VMCUDA_CUBLAS_DECLARE
};

using api::cublas_scalar_bytes;

// One cuBLAS call on a client's handle: its checks and its context (restored at the end).
class CublasScope {
 public:
  CublasScope(Session& s, uint64_t guest, const char* call);
  ~CublasScope();
  CublasScope(const CublasScope&) = delete;
  CublasScope& operator=(const CublasScope&) = delete;

  bool ok() const { return status_ == CUBLAS_STATUS_SUCCESS; }
  int32_t status() const { return status_; }
  // Whether the host's library has this entry point (else CUBLAS_STATUS_NOT_SUPPORTED, logged once).
  template <class F>
  bool has(F f) {
    if (f) return true;
    status_ = missing();
    return false;
  }
  // 0 or a pointer into the client's device memory.
  bool device(uint64_t ptr) const { return ptr == 0 || s_.owns_range(ptr, 1); }
  // A scalar: the wire bytes (pointer mode host) or the client's device memory; nullptr when
  // neither (or `bytes` is 0: a compute type vmcuda does not know).
  const void* scalar(const uint8_t (&field)[16], size_t bytes) const;
  // A result: room in the reply's trailing bytes (pointer mode host) or the client's device memory.
  void* result(uint64_t ptr, Request& req, size_t bytes) const;
  // The guest named memory that is not its own: refused (logged as a malformed call).
  int32_t bad_pointer(const char* param);
  int32_t done(int status) const { return status; }
  // Right before a routine that runs kernels (kLaunches) is issued on the handle's stream: counted
  // as a kernel launch is (Session::count_launch: fair sharing may hold it back here).
  void launch(const vmrpc::CallContext& ctx);

  const CublasApi* lib = nullptr;
  CublasHandleObject* handle = nullptr;

 private:
  int32_t missing();
  Session& s_;
  const char* call_;
  int device_ = -1;  // the handle's guest device
  int32_t status_ = CUBLAS_STATUS_SUCCESS;
  mutable AlignedScalars scalars_;
};

}  // namespace vmcuda::host
