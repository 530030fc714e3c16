// Guest-made stream and event handles (DESIGN.md, lazy RPC): cudaStreamCreate and
// cudaEventCreate make the handle here, hand it to the app at once and queue the creation;
// the host maps it to its own CUstream/CUevent (per client) and checks every handle it is
// sent. A handle is a number from a process-wide counter, never reused (so a stale handle
// can never name a newer object, unlike the driver's), spaced like aligned pointers and
// never 0, 1 or 2: those are CUDA's legacy default stream, cudaStreamLegacy and
// cudaStreamPerThread. The same number travels on the wire (api::StreamArgs, ...).
//
// The registries below answer "is this a live handle of this process" locally, so that a
// forged, destroyed or foreign handle is cudaErrorInvalidResourceHandle at the call that
// names it, not later through the lazy queue. They have their own lock: callers may hold
// Remote::lock() or not.
#pragma once

#include <cstdint>

#include "vmcuda/api/wire.h"
#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

struct StreamInfo {
  unsigned flags = 0;  // cudaStreamDefault / cudaStreamNonBlocking
  int priority = 0;    // as asked (the host clamps it; cudaStreamGetPriority asks the host)
  int device = 0;      // the device it was created on (cudaDeviceReset destroys it)
};
struct EventInfo {
  unsigned flags = 0;  // cudaEvent* flags
  int device = 0;
};

/// The wire handle of `stream`, as named by an entry point: `per_thread_default` for the
/// _ptsz/_ptds variants (nvcc --default-stream per-thread), where 0 means
/// cudaStreamPerThread. cudaErrorInvalidResourceHandle for a handle this process has not
/// created or has destroyed. Launches (launch.cc) use this too.
cudaError_t stream_wire_handle(cudaStream_t stream, bool per_thread_default, uint64_t* wire) noexcept;

/// The synchronous _ptds forms (nvcc --default-stream per-thread): `issued` is the call's
/// async form on cudaStreamPerThread; its error, else the wait for that stream. So they are
/// ordered with the calling thread's work alone, as natively (the legacy forms would wait
/// for every blocking stream, other threads' default streams included).
cudaError_t finish_on_per_thread_stream(cudaError_t issued) noexcept;

/// The wire handle of a live event, or cudaErrorInvalidResourceHandle (NULL included).
cudaError_t event_wire_handle(cudaEvent_t event, uint64_t* wire) noexcept;

namespace handles {
/// A fresh handle value (never 0, 1, 2; never one given before).
uint64_t next() noexcept;
bool add_stream(uint64_t handle, StreamInfo info) noexcept;
bool remove_stream(uint64_t handle) noexcept;
bool find_stream(uint64_t handle, StreamInfo* info) noexcept;
bool add_event(uint64_t handle, EventInfo info) noexcept;
bool remove_event(uint64_t handle) noexcept;
bool find_event(uint64_t handle, EventInfo* info) noexcept;
/// Forgets the streams and events of `device` (cudaDeviceReset destroyed them on the host).
void forget_device(int device) noexcept;
}  // namespace handles

}  // namespace vmcuda::guest
