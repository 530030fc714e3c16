// cuSOLVER on the host (issue 12 point 3): the library's entry points and the traits every handler
// of a cuSOLVER call uses (generated: build/generated/cusolver/cusolver_host.cc; helpers: nvobj.h).
#pragma once

#include <span>

#include "cusolver_host_api.h"
#include "nvobj.h"

namespace vmcuda::host {

// cusolverStatus_t values the host answers itself.
inline constexpr int32_t CUSOLVER_STATUS_NOT_INITIALIZED = 1, CUSOLVER_STATUS_ALLOC_FAILED = 2,
                         CUSOLVER_STATUS_INVALID_VALUE = 3, CUSOLVER_STATUS_INTERNAL_ERROR = 7,
                         CUSOLVER_STATUS_NOT_SUPPORTED = 9;

// The entry points of libcusolver.so.12 the calls use (generated list; ABI types).
struct CusolverApi {
#define VMCUDA_CUSOLVER_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUSOLVER_FUNCTIONS(VMCUDA_CUSOLVER_DECLARE)
#undef VMCUDA_CUSOLVER_DECLARE
};

struct CusolverTraits {
  using Api = CusolverApi;
  static constexpr ObjectKind kKind = ObjectKind::Cusolver;
  static constexpr int32_t kBadHandle = CUSOLVER_STATUS_NOT_INITIALIZED, kInvalidValue = CUSOLVER_STATUS_INVALID_VALUE,
                           kNoLibrary = CUSOLVER_STATUS_NOT_INITIALIZED, kNotSupported = CUSOLVER_STATUS_NOT_SUPPORTED,
                           kAllocFailed = CUSOLVER_STATUS_ALLOC_FAILED;
  static constexpr const char* kLibrary = "libcusolver.so.12";
  static constexpr const char* kNames[] = VMCUDA_CUSOLVER_OBJECT_NAMES;
  static const CusolverApi* library(const DriverApi& driver);
  static void reset_stream(const CusolverApi& lib, void* handle) {
    if (lib.cusolverDnSetStream) lib.cusolverDnSetStream(handle, nullptr);
  }
  static constexpr HostLibrary kHostLibrary = HostLibrary::kSolver;
  static constexpr int kTypes = VMCUDA_CUSOLVER_OBJECT_TYPES;
  // Generated (cusolver_host.cc): what a recorded step names; the step run again (a resume).
  static bool step_info(uint32_t call, std::span<const std::byte> bytes, NvobjStepInfo* out);
  static int32_t replay(Session& s, uint32_t call, std::span<const std::byte> bytes);
};
using CusolverScope = NvobjScope<CusolverTraits>;

// Generated (cusolver_host.cc): the library's destruction of an object of `type`.
int cusolver_destroy(const CusolverApi& lib, int type, void* o);

}  // namespace vmcuda::host
