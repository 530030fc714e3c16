// cuRAND's host API in libcuda.so.1 (vmcuda's libcurand.so.10 forwards each export here):
// what the generated entry points (build/generated/curand/curand_guest.cc, from
// scripts/gen-nvlib.py) share. A curandGenerator_t points at a guest Handle with a wire handle
// (streams' counter); the host keeps the library's generator in the client's object list.
#pragma once

#include <memory>

#include "nvlib.h"

#define VMCUDA_CURAND_API extern "C"

struct curandGenerator_st;  // the application's curandGenerator_t points at a guest Handle
using curandGenerator_t = curandGenerator_st*;

namespace vmcuda::guest::curand {

// curandStatus_t values (curand.h). cuRAND has no invalid-value or not-supported status.
inline constexpr int kSuccess = 0, kNotInitialized = 101, kTypeError = 103, kOutOfRange = 104,
                     kLengthNotMultiple = 105, kLaunchFailure = 201, kPreexistingFailure = 202,
                     kInitializationFailed = 203, kInternalError = 999;
inline constexpr int kInvalidValue = kOutOfRange;  // a NULL output pointer (the generated checks)
extern const int kVersion[3];  // curand.h's CURAND_VER_MAJOR/MINOR/PATCH (generated)
extern const nvlib::Statuses kStatuses;

struct Handle {
  uint64_t wire = 0;
};

// The live generator `app` names (*h), or CURAND_STATUS_NOT_INITIALIZED.
int enter(curandGenerator_t app, Handle** h) noexcept;
std::unique_ptr<Handle> make_handle();
void publish(std::unique_ptr<Handle> h, curandGenerator_t* out) noexcept;
// curandCreateGenerator's check: CURAND_STATUS_TYPE_ERROR for a type curand.h does not name.
int rng_bad(int rng_type) noexcept;
using nvlib::device_pointer;
inline void unsupported(const char* name, std::atomic<bool>& logged) noexcept {
  nvlib::unsupported(kStatuses, name, logged);
}
template <api::Call C>
int queue(const typename api::CallTraits<C>::Args& a) noexcept {
  return nvlib::queue<C>(kStatuses, a);
}
template <api::Call C>
int wait(const typename api::CallTraits<C>::Args& a, typename api::CallTraits<C>::Reply* reply) noexcept {
  return nvlib::wait<C>(kStatuses, a, reply);
}

}  // namespace vmcuda::guest::curand
