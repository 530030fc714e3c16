// cuRAND on the host (issue 12 point 3): the library's entry points and the traits every handler
// of a cuRAND call uses (generated: build/generated/curand/curand_host.cc; hand-written: curand.cc).
#pragma once

#include "curand_host_api.h"
#include "nvlib.h"

namespace vmcuda::host {

// curandStatus_t values (curand.h) the host answers itself.
inline constexpr int32_t CURAND_STATUS_SUCCESS = 0, CURAND_STATUS_NOT_INITIALIZED = 101,
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
                           kNotSupported = CURAND_STATUS_INTERNAL_ERROR;
  static constexpr const char* kLibrary = "libcurand.so.10";
  static const CurandApi* library(const DriverApi& driver, std::string* why);
  static void*& native(CurandGeneratorObject& g) { return g.generator; }
  static void reset_stream(const CurandApi& lib, void* generator) {
    if (lib.curandSetStream) lib.curandSetStream(generator, nullptr);
  }
};
using CurandScope = NvlibScope<CurandTraits>;

}  // namespace vmcuda::host
