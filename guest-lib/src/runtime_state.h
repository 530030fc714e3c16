// The CUDA runtime's error state, shared by every API area (docs/cuda-runtime-internals.md §7):
//  - a last error per host thread, set by every call that fails, read by cudaGetLastError
//    (which resets it) and cudaPeekAtLastError (which does not);
//  - a process-wide sticky error: once a sticky code (an illegal address, a device assert,
//    ...) has been seen, every later call that needs the device returns it, and a
//    cudaGetLastError that took it sees it set again by the next such call.
// Calls that answer locally without the device (error strings, version, registration,
// the launch configuration stack) ignore the sticky error, as NVIDIA's do.
#pragma once

#include <atomic>
#include <cstdint>

#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

/// Whether `error` leaves the process unusable (driver_types.h: "any further CUDA work will
/// return the same error").
bool is_sticky(cudaError_t error) noexcept;

/// The result of a call: a failure becomes the calling thread's last error, and a sticky
/// one the process's sticky error too. Returns `result`, so a call can end with
/// `return record(...)`.
cudaError_t record(cudaError_t result) noexcept;

/// cudaPeekAtLastError / cudaGetLastError.
cudaError_t peek_last_error() noexcept;
cudaError_t take_last_error() noexcept;

/// The process's sticky error, or cudaSuccess.
cudaError_t sticky_error() noexcept;

/// For a call that needs the device: the sticky error (recorded) when there is one,
/// otherwise cudaSuccess. Use as `if (cudaError_t e = enter_device_call()) return e;`.
cudaError_t enter_device_call() noexcept;

/// The body of every generated stub for a call not remoted yet: logs
/// "vmcuda: NAME is not supported yet; it returns cudaErrorNotSupported (801)" the first
/// time (knob VMCUDA_LOG >= 1), then returns the sticky error if there is one and
/// cudaErrorNotSupported otherwise, recorded as the last error. `logged` is the stub's own
/// flag.
int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept;

/// Whether this thread has made a runtime call that needs the device (enter_device_call):
/// NVIDIA's runtime then has made its device's primary context current on the thread, which
/// the driver API's current context reflects (driver_state.h).
bool runtime_used_on_this_thread() noexcept;

/// Puts the thread's last error and runtime_used_on_this_thread back as they were (cudaSuccess
/// included), after a driver call that used the runtime areas: driver calls change neither.
void restore_runtime_thread_state(cudaError_t last_error, bool runtime_used) noexcept;

/// For tests of this module only: forget the sticky error.
void reset_sticky_error_for_testing() noexcept;

// A pointer cudaMemPoolImportPointer returned (memory_pool.cc): cudaFree/cudaFreeAsync of it
// closes that import (true, *status the answer); false for any other pointer.
bool release_pool_import(void* ptr, cudaError_t* status);

// An allocation of a pool of host memory (memory_pool.cc): freed (true, *status the answer)
// after the work of `*stream` (a wire handle; the device's work when null), as cudaFreeAsync
// and cudaFree free it; false for any other pointer.
bool release_host_pool_allocation(void* ptr, const uint64_t* stream, cudaError_t* status);
// Whether `ptr` is the start of such an allocation.
bool is_host_pool_allocation(const void* ptr);

}  // namespace vmcuda::guest
