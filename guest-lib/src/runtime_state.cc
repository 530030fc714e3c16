#include "runtime_state.h"

#include "log.h"
#include "program_log.h"

namespace vmcuda::guest {
namespace {

// Trivially destructible, so it is usable from any thread until the very end of the process
// (atexit handlers included).
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local bool t_runtime_used = false;

std::atomic<cudaError_t> g_sticky_error{cudaSuccess};

}  // namespace

bool is_sticky(cudaError_t error) noexcept {
  switch (error) {
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

cudaError_t record(cudaError_t result) noexcept {
  if (result != cudaSuccess) {
    t_last_error = result;
    if (is_sticky(result)) {
      cudaError_t none = cudaSuccess;
      // The first sticky error wins; later ones are consequences of it.
      g_sticky_error.compare_exchange_strong(none, result, std::memory_order_acq_rel);
    }
  }
  return result;
}

cudaError_t peek_last_error() noexcept { return t_last_error; }

cudaError_t take_last_error() noexcept {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t sticky_error() noexcept { return g_sticky_error.load(std::memory_order_acquire); }

cudaError_t enter_device_call() noexcept {
  t_runtime_used = true;
  cudaError_t e = sticky_error();
  return e == cudaSuccess ? cudaSuccess : record(e);
}

int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept {
  // Each call into the program's error log; the console says it once.
  program_log::add(program_log::kError, "vmcuda", name, "is not supported yet; it returns cudaErrorNotSupported (801)");
  if (!logged.load(std::memory_order_relaxed) && !logged.exchange(true, std::memory_order_relaxed))
    log::console(log::kWarn, "api", "%s is not supported yet; it returns cudaErrorNotSupported (801)", name);
  if (cudaError_t e = enter_device_call()) return e;
  return record(cudaErrorNotSupported);
}

bool runtime_used_on_this_thread() noexcept { return t_runtime_used; }

void restore_runtime_thread_state(cudaError_t last_error, bool runtime_used) noexcept {
  t_last_error = last_error;
  t_runtime_used = runtime_used;
}

void reset_sticky_error_for_testing() noexcept { g_sticky_error.store(cudaSuccess); }

}  // namespace vmcuda::guest
