// cuRAND's host API in libcuda.so.1 (vmcuda's libcurand.so.10 forwards each export here):
// what the generated entry points (build/generated/curand/curand_guest.cc, from
// scripts/gen-nvlib.py) share. A curandGenerator_t points at a guest Handle with a wire handle
// (streams' counter); the host keeps the library's generator in the client's object list.
#pragma once

#include <memory>
#include <mutex>

#include "nvlib.h"
#include "vmcuda/cudart_types.h"

#define VMCUDA_CURAND_API extern "C"

struct curandGenerator_st;  // the application's curandGenerator_t points at a guest Handle
using curandGenerator_t = curandGenerator_st*;

namespace vmcuda::guest::curand {

// curandStatus_t values (curand.h). cuRAND has no invalid-value or not-supported status.
inline constexpr int kSuccess = 0, kNotInitialized = 101, kAllocationFailed = 102, kTypeError = 103, kOutOfRange = 104,
                     kLengthNotMultiple = 105, kLaunchFailure = 201, kPreexistingFailure = 202,
                     kInitializationFailed = 203, kInternalError = 999;
inline constexpr int kInvalidValue = kOutOfRange;  // a NULL output pointer (the generated checks)
extern const int kVersion[3];  // curand.h's CURAND_VER_MAJOR/MINOR/PATCH (generated)
extern const nvlib::Statuses kStatuses;

struct Handle {
  uint64_t wire = 0;
  int rng_type = 0;
  unsigned dims = 1;  // a quasi-random generator's dimensions
  // A host generator (curandCreateGeneratorHost): a device generator on the host whose numbers
  // land in `scratch` (the client's device memory, grown as needed, freed with the generator)
  // and are copied into the app's host memory on the generator's stream (curandSetStream's).
  bool host = false;
  cudaStream_t stream = nullptr;
  std::mutex mu;  // one generation into the scratch at a time
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

// A host generator's generation (api/libs/curand.calls `hostout`): the scratch buffer to generate
// into, then the numbers copied into the app's memory before the call returns (NVIDIA's host
// generators answer with their numbers in place). Holds the generator's lock.
class HostOutput {
 public:
  HostOutput(Handle* h, void* out, size_t count, size_t elem) noexcept;
  int status() const noexcept { return status_; }
  uint64_t scratch() const noexcept { return reinterpret_cast<uintptr_t>(h_->scratch); }
  // The generation's status `generated`; on success the numbers copied out (the stream waited for).
  int copy_out(int generated) noexcept;

 private:
  Handle* h_;
  std::lock_guard<std::mutex> lock_;
  void* out_;
  size_t bytes_ = 0;
  int status_ = kSuccess;
};

// The live generator `app` names (*h), or CURAND_STATUS_NOT_INITIALIZED.
int enter(curandGenerator_t app, Handle** h) noexcept;
std::unique_ptr<Handle> make_handle();
void publish(std::unique_ptr<Handle> h, curandGenerator_t* out) noexcept;
// cuRAND's own checks of the calls that are queued here (api/libs/curand.calls check=): each
// answers the status NVIDIA's library answers (curand.h), 0 when the call is good.
// curandCreateGenerator: a type curand.h does not name.
int rng_bad(int rng_type) noexcept;
inline bool quasi(const Handle* h) noexcept { return h->rng_type >= 200; }
// A seed: pseudo-random generators only.
inline int pseudo_bad(const Handle* h) noexcept { return quasi(h) ? kTypeError : kSuccess; }
// Orderings: the quasi-random default for those, a pseudo-random one for the others.
inline int ordering_bad(const Handle* h, int order) noexcept {
  return quasi(h) ? (order == 201 ? kSuccess : kOutOfRange) : (order >= 100 && order <= 104 ? kSuccess : kOutOfRange);
}
inline int dims_bad(const Handle* h, unsigned d) noexcept {
  return !quasi(h) ? kTypeError : d < 1 || d > 20000 ? kOutOfRange : kSuccess;
}
// A count of a quasi-random generator is a multiple of its dimensions; `bits` 32 or 64: the
// integers of curandGenerate (not of a 64-bit generator) and curandGenerateLongLong (64-bit
// Sobol only), 0: any generator.
inline int length_bad(const Handle* h, size_t n, int bits) noexcept {
  const bool wide = h->rng_type == 203 || h->rng_type == 204;  // SOBOL64, SCRAMBLED_SOBOL64
  if ((bits == 32 && wide) || (bits == 64 && !wide)) return kTypeError;
  return quasi(h) && n % h->dims ? kLengthNotMultiple : kSuccess;
}
// Normals come in pairs from a pseudo-random generator, except Philox's (on the H100, NVIDIA's
// cuRAND 10 generated an odd count with Philox4_32_10 and refused it with XORWOW).
inline int normal_bad(const Handle* h, size_t n) noexcept {
  if (int s = length_bad(h, n, 0)) return s;
  constexpr int kPhilox = 161;  // CURAND_RNG_PSEUDO_PHILOX4_32_10
  return !quasi(h) && h->rng_type != kPhilox && n % 2 ? kLengthNotMultiple : kSuccess;
}
inline int poisson_bad(const Handle* h, size_t n, double lambda) noexcept {
  return !(lambda > 0) ? kOutOfRange : length_bad(h, n, 0);
}
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
