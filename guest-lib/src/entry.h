// How an entry point of the runtime reaches the host, in one place:
//  - connected(): the connection (made on first use), or why there is none;
//  - device_call(): the same after the sticky-error check of a call that needs the device;
//  - plain_call<C>(): the whole entry point of a call that passes plain values, from its line
//    in calls.def: the sticky error, the connection, the slot's lock, the call (queued when
//    the table says kQueued and it has no reply) and its result recorded as the thread's
//    last error (runtime_state.h). The caller only maps the app's arguments to the wire
//    struct and the reply to the app's out-parameters.
#pragma once

#include <type_traits>

#include "remote.h"
#include "runtime_state.h"

namespace vmcuda::guest {

// The connected remote, or nothing and why (cudaErrorNoDevice when no stub can be reached;
// Remote::get has logged what to do). Records nothing.
inline Remote* connected(cudaError_t* error) noexcept {
  *error = cudaSuccess;
  Remote* r = Remote::get(error);
  if (!r && *error == cudaSuccess) *error = cudaErrorNoDevice;
  return r;
}

// For a call that needs the device: the sticky error or the connection's failure (recorded,
// in `*error`), else the connected remote.
inline Remote* device_call(cudaError_t* error) noexcept {
  if (cudaError_t e = enter_device_call()) return *error = e, nullptr;
  Remote* r = connected(error);
  if (!r) record(*error);
  return r;
}

struct IgnoreReply {
  template <class Reply>
  void operator()(const Reply&) const noexcept {}
};

// `invalid`: the app's arguments are wrong (a NULL out-pointer, a value out of range), which
// gives cudaErrorInvalidValue once the runtime is up, as NVIDIA's checks after its start-up.
template <api::Call C, class OnReply = IgnoreReply>
cudaError_t plain_call(const typename api::CallTraits<C>::Args& args, OnReply on_reply = {},
                       bool invalid = false) noexcept {
  using Traits = api::CallTraits<C>;
  cudaError_t err;
  Remote* r = device_call(&err);
  if (!r) return err;
  if (invalid) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  if constexpr ((Traits::kFlags & api::kQueued) != 0 && std::is_empty_v<typename Traits::Reply>) {
    return record(r->enqueue<C>(args));
  } else {
    const auto res = r->call<C>(args);
    if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
    on_reply(res.reply);
    return cudaSuccess;
  }
}

}  // namespace vmcuda::guest
