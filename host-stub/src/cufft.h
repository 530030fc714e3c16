// cuFFT on the host (issue 12 point 3): the library's entry points and the traits every handler
// of a cuFFT call uses (generated: build/generated/cufft/cufft_host.cc; hand-written: cufft.cc).
#pragma once

#include "cufft_host_api.h"
#include "nvlib.h"

namespace vmcuda::host {

// cufftResult values (cufft.h) the host answers itself.
inline constexpr int32_t CUFFT_SUCCESS = 0, CUFFT_INVALID_PLAN = 1, CUFFT_INVALID_VALUE = 4, CUFFT_SETUP_FAILED = 7,
                         CUFFT_INVALID_SIZE = 8, CUFFT_INVALID_DEVICE = 11, CUFFT_NOT_SUPPORTED = 16;

// The entry points of libcufft.so.12 the calls use (generated list; ABI types).
struct CufftApi {
#define VMCUDA_CUFFT_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUFFT_FUNCTIONS(VMCUDA_CUFFT_DECLARE)
#undef VMCUDA_CUFFT_DECLARE
};

struct CufftTraits {
  using Api = CufftApi;
  using Data = CufftPlanObject;
  using Native = int;
  static constexpr ObjectKind kKind = ObjectKind::CufftPlan;
  static constexpr int32_t kBadHandle = CUFFT_INVALID_PLAN, kNoLibrary = CUFFT_SETUP_FAILED,
                           kInvalidValue = CUFFT_INVALID_VALUE, kInvalidSize = CUFFT_INVALID_SIZE,
                           kNotSupported = CUFFT_NOT_SUPPORTED;
  static constexpr const char* kLibrary = "libcufft.so.12";
  static const CufftApi* library(const DriverApi& driver, std::string* why);
  static int& native(CufftPlanObject& p) { return p.plan; }
  static void reset_stream(const CufftApi& lib, int plan) {
    if (lib.cufftSetStream) lib.cufftSetStream(plan, nullptr);
  }
};
using CufftScope = NvlibScope<CufftTraits>;

}  // namespace vmcuda::host
