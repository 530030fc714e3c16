// Whether the kernel time limit has ended this worker process's GPU work (--kernel-time-limit,
// host-stub/src/kernel_watchdog.h; a worker serves one client). Set by the worker's timeout
// handler before it ends the work; from then on every answer is cudaErrorLaunchTimeout, also a
// call the end of the work lets return with another error (MPS's terminate_client: 810): the
// channel status kLaunchTimeout, as after the worker has ended.
#pragma once

#include <atomic>

namespace vmcuda::host {

inline std::atomic<bool>& kernel_time_limit_expired() {
  static std::atomic<bool> expired{false};
  return expired;
}

}  // namespace vmcuda::host
