// cuSOLVER (dense) in libcuda.so.1 (vmcuda's libcusolver.so.12 forwards each export here): what
// the generated entry points (build/generated/cusolver/cusolver_guest.cc, from
// scripts/gen-nvobj.py) share. A cusolverDnHandle_t or cusolverDnParams_t points at a guest
// nvobj::Handle.
#pragma once

#include "nvobj.h"

#define VMCUDA_CUSOLVER_API extern "C"

namespace vmcuda::guest::cusolver {

// cusolverStatus_t values (cusolver_common.h).
inline constexpr int kSuccess = 0, kNotInitialized = 1, kAllocFailed = 2, kInvalidValue = 3, kArchMismatch = 4,
                     kMappingError = 5, kExecutionFailed = 6, kInternalError = 7, kMatrixTypeNotSupported = 8,
                     kNotSupported = 9, kZeroPivot = 10;
extern const int kVersion[3];  // cusolver_common.h's CUSOLVER_VER_MAJOR/MINOR/PATCH (generated)
extern const nvlib::Statuses kStatuses;
nvobj::Registry& registry();

VMCUDA_NVOBJ_HELPERS

}  // namespace vmcuda::guest::cusolver
