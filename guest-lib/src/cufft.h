// cuFFT in libcuda.so.1 (vmcuda's libcufft.so.12 forwards each export here, as libcudart.so.13
// does): what the generated entry points (build/generated/cufft/cufft_guest.cc, from
// scripts/gen-nvlib.py) share. A plan (cufftHandle, an int) names a guest Handle with a wire
// handle (streams' counter); the host keeps the library's plan in the client's object list.
#pragma once

#include <memory>

#include "nvlib.h"

#define VMCUDA_CUFFT_API extern "C"


namespace vmcuda::guest::cufft {

// cufftResult values (cufft.h).
inline constexpr int kSuccess = 0, kInvalidPlan = 1, kAllocFailed = 2, kInvalidType = 3, kInvalidValue = 4,
                     kInternalError = 5, kExecFailed = 6, kSetupFailed = 7, kInvalidSize = 8, kNotSupported = 16;
extern const int kVersion[3];  // cufft.h's CUFFT_VER_MAJOR/MINOR/PATCH (generated)
extern const nvlib::Statuses kStatuses;

struct Handle {
  uint64_t wire = 0;
  int plan = 0;  // what the app holds
};

// The live plan `plan` names (*h), or CUFFT_INVALID_PLAN.
int enter(int plan, Handle** h) noexcept;
// A new plan's guest object; publish() makes it live and gives the app its number.
std::unique_ptr<Handle> make_handle();
void publish(std::unique_ptr<Handle> h, int* plan) noexcept;
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

}  // namespace vmcuda::guest::cufft
