// nvlib.h: the guest side shared by cuFFT and cuRAND.
#include "nvlib.h"

#include "entry.h"
#include "log.h"
#include "runtime_state.h"

namespace vmcuda::guest::nvlib {

int status_of(const Statuses& st, int32_t s, const char* call) noexcept {
  if (s == 0) return 0;
  if (s < 0) {
    VMCUDA_LOG(kWarn, st.tag, "%s: the host refused the call (channel status %d): vmcuda's guest library and "
               "vmcuda-stub do not match; update both", call, s);
    return st.internal;
  }
  if (st.is_status(s)) return s;
  // An error of earlier queued CUDA work came back with this call: the application's next
  // cudaGetLastError reports it; the library call could not run after it.
  record(static_cast<cudaError_t>(s));
  return st.earlier_error;
}

Remote* remote(const Statuses& st, int* status) noexcept {
  // A sticky error: the context is unusable, as natively every library call then fails.
  if (enter_device_call() != cudaSuccess) return *status = st.earlier_error, nullptr;
  cudaError_t e;
  Remote* r = connected(&e);
  if (!r) *status = st.no_connection;
  return r;
}

void unsupported(const Statuses& st, const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.load(std::memory_order_relaxed) && !logged.exchange(true, std::memory_order_relaxed))
    VMCUDA_LOG(kWarn, st.tag, "%s is not supported yet; it returns %s", name, st.not_supported);
}

}  // namespace vmcuda::guest::nvlib
