// cuRAND on the host (issue 12 point 3): the library's entry points and the traits every handler
// of a cuRAND call uses (generated: build/generated/curand/curand_host.cc; hand-written: curand.cc).
#pragma once

#include <span>

#include "curand_host_api.h"
#include "nvlib.h"

namespace vmcuda::host {

// curandStatus_t values (curand.h) the host answers itself.
inline constexpr int32_t CURAND_STATUS_SUCCESS = 0, CURAND_STATUS_NOT_INITIALIZED = 101, CURAND_STATUS_ALLOCATION_FAILED = 102,
                         CURAND_STATUS_OUT_OF_RANGE = 104, CURAND_STATUS_INITIALIZATION_FAILED = 203,
                         CURAND_STATUS_INTERNAL_ERROR = 999;

// The entry points of libcurand.so.10 the calls use (generated list; ABI types).
struct CurandApi {
#define VMCUDA_CURAND_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CURAND_FUNCTIONS(VMCUDA_CURAND_DECLARE)
#undef VMCUDA_CURAND_DECLARE
};

struct CurandTraits {
  using Api = CurandApi;
  using Data = CurandGeneratorObject;
  using Native = void*;
  static constexpr ObjectKind kKind = ObjectKind::CurandGenerator;
  // cuRAND has no invalid-value or not-supported status: what it answers nearest.
  static constexpr int32_t kBadHandle = CURAND_STATUS_NOT_INITIALIZED, kNoLibrary = CURAND_STATUS_INITIALIZATION_FAILED,
                           kInvalidValue = CURAND_STATUS_OUT_OF_RANGE, kInvalidSize = CURAND_STATUS_OUT_OF_RANGE,
                           kNotSupported = CURAND_STATUS_INTERNAL_ERROR, kAllocFailed = CURAND_STATUS_ALLOCATION_FAILED;
  static constexpr HostLibrary kHostLibrary = HostLibrary::kRand;
  static constexpr const char* kLibrary = "libcurand.so.10";
  static const CurandApi* library(const DriverApi& driver, std::string* why);
  static void*& native(CurandGeneratorObject& g) { return g.generator; }
  static void reset_stream(const CurandApi& lib, void* generator) {
    if (lib.curandSetStream) lib.curandSetStream(generator, nullptr);
  }
  // Where a generator stands cannot be read back from cuRAND, so a resume replays what put it
  // there (curand.cc). The log stays short: curandSetGeneratorOffset sets the position outright
  // (curand.h), so what generated before it, and an earlier offset, are dropped; a setting set
  // again right after itself replaces itself; a generation repeated with the same arguments
  // counts repeats. More than kCurandMaxSteps steps is an overflow; more than
  // kCurandMaxReplayBytes to generate again refuses the suspend too (nvlib_block_suspend).
  static void record(CurandGeneratorObject& g, uint32_t call, std::span<const std::byte> args);
};
using CurandScope = NvlibScope<CurandTraits>;

// Generated (curand_host.cc): replaying a recorded call on *generator (a resume), its numbers
// written into `scratch` (curand_replay_scratch bytes).
bool curand_replay_makes(uint32_t call);
bool curand_replayable(uint32_t call, size_t bytes);
uint64_t curand_replay_scratch(uint32_t call, std::span<const std::byte> bytes);
int curand_replay(const CurandApi& lib, void** generator, uint32_t call, std::span<const std::byte> bytes,
                  void* scratch);

}  // namespace vmcuda::host
