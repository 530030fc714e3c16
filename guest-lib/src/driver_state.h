// The driver API's guest-side state (driver_*.cc): initialization, contexts, and the
// translation of the runtime's answers into CUresults. Everything else (the connection,
// lazy queue, allocations, streams, events, modules) is the runtime areas' state, shared:
// the driver entry points are built on the runtime's, in the same library (README.md "One
// process, one session").
//
// Contexts: the host gives each client one context per device (its primary context), so a
// guest CUcontext names a device. Each device's primary context is one object for the
// process's life; cuCtxCreate makes another object on the same host context (documented
// deviation: allocations and modules are shared with the primary's, and cuCtxDestroy frees
// nothing). A thread's current context is the top of its own stack; a runtime call on a
// thread with an empty stack makes the primary context of the runtime's device current, as
// NVIDIA's runtime does; making a context current makes its device the runtime's.
#pragma once

#include <atomic>

#include "vmcuda/cuda_driver_types.h"
#include "vmcuda/cudart_types.h"

struct CUctx_st {
  int device = 0;
  bool primary = false;
  unsigned flags = 0;          // cuCtxCreate's / cuDevicePrimaryCtxSetFlags'
  std::atomic<bool> alive{true};  // false once cuCtxDestroy'ed (the object stays: a stale handle is refused)
  // cuCtxGetId's: unique in the process, never reused (contexts are never freed).
  const unsigned long long id = next_id();
  static unsigned long long next_id() {
    static std::atomic<unsigned long long> n{0};
    return ++n;
  }
};

namespace vmcuda::guest {

/// The body of every generated driver stub: logs "vmcuda: NAME is not supported yet; it
/// returns CUDA_ERROR_NOT_SUPPORTED (801)" once (VMCUDA_LOG >= 1) and returns 801.
int unsupported_driver_call(const char* name, std::atomic<bool>& logged) noexcept;

/// The CUresult a driver call returns for what the runtime area answered. The codes the two
/// APIs share keep their number; the runtime's own are mapped to the driver's meaning.
CUresult to_cu_result(cudaError_t e) noexcept;

/// Keeps the runtime's per-thread last error as it was: driver calls do not change what
/// cudaGetLastError returns (the sticky error still sticks: it is the context's).
class KeepRuntimeLastError {
 public:
  KeepRuntimeLastError() noexcept;
  ~KeepRuntimeLastError();
  KeepRuntimeLastError(const KeepRuntimeLastError&) = delete;
  KeepRuntimeLastError& operator=(const KeepRuntimeLastError&) = delete;

 private:
  cudaError_t saved_;
  bool runtime_used_;
};

/// cuInit was called successfully (CUDA_ERROR_NOT_INITIALIZED otherwise).
bool driver_initialized() noexcept;
/// CUDA_SUCCESS, CUDA_ERROR_NOT_INITIALIZED, or the sticky error.
CUresult enter_driver_call() noexcept;
/// As enter_driver_call, and the calling thread must have a current context
/// (CUDA_ERROR_INVALID_CONTEXT); its device becomes the runtime's for this thread.
CUresult enter_context_call(CUcontext* out = nullptr) noexcept;

// A driver call made of runtime calls (driver*.cc): the runtime's last error stays as it was.
#define VMCUDA_DRIVER_RUNTIME(expr)  \
  do {                               \
    ::vmcuda::guest::KeepRuntimeLastError keep_; \
    return ::vmcuda::guest::to_cu_result((expr)); \
  } while (0)
#define VMCUDA_ENTER(call)               \
  do {                                   \
    if (CUresult e_ = (call)) return e_; \
  } while (0)
// The same, for a call that needs a current context (CUDA_ERROR_INVALID_CONTEXT without one)
// or only an initialized driver.
#define VMCUDA_DRIVER_IN_CONTEXT(expr)                        \
  do {                                                        \
    VMCUDA_ENTER(::vmcuda::guest::enter_context_call());      \
    VMCUDA_DRIVER_RUNTIME(expr);                              \
  } while (0)
#define VMCUDA_DRIVER_CALL(expr)                              \
  do {                                                        \
    VMCUDA_ENTER(::vmcuda::guest::enter_driver_call());       \
    VMCUDA_DRIVER_RUNTIME(expr);                              \
  } while (0)

/// The process's primary context object of `device` (valid device, else nullptr).
CUcontext primary_context(int device) noexcept;
/// The calling thread's current context, or nullptr.
CUcontext current_context() noexcept;
/// Whether `ctx` is a context object of this process that is not destroyed.
bool valid_context(CUcontext ctx) noexcept;
/// Thread context stack operations (cuCtxSetCurrent / Push / Pop).
void set_current_context(CUcontext ctx) noexcept;
/// cuCtxCreate's object on `device` (nullptr when out of memory), and cuCtxDestroy.
CUcontext make_context(int device, unsigned flags) noexcept;
void destroy_context(CUcontext ctx) noexcept;
/// cuInit succeeded.
void mark_driver_initialized() noexcept;
void push_context(CUcontext ctx) noexcept;
CUcontext pop_context() noexcept;

}  // namespace vmcuda::guest
