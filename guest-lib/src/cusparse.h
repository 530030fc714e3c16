// cuSPARSE in libcuda.so.1 (vmcuda's libcusparse.so.12 forwards each export here): what the
// generated entry points (build/generated/cusparse/cusparse_guest.cc, from scripts/gen-nvobj.py)
// share. A cusparseHandle_t or descriptor points at a guest nvobj::Handle.
#pragma once

#include "nvobj.h"

#define VMCUDA_CUSPARSE_API extern "C"

namespace vmcuda::guest::cusparse {

// cusparseStatus_t values (cusparse.h).
inline constexpr int kSuccess = 0, kNotInitialized = 1, kAllocFailed = 2, kInvalidValue = 3, kArchMismatch = 4,
                     kMappingError = 5, kExecutionFailed = 6, kInternalError = 7, kMatrixTypeNotSupported = 8,
                     kZeroPivot = 9, kNotSupported = 10, kInsufficientResources = 11;
extern const int kVersion[3];  // cusparse.h's CUSPARSE_VER_MAJOR/MINOR/PATCH (generated)
extern const nvlib::Statuses kStatuses;
nvobj::Registry& registry();

VMCUDA_NVOBJ_HELPERS

// The four fields of the app's cusparseMatDescr_t `d` (type, fill mode, diagonal type, index
// base) as the wire carries them; false for NULL or what no cusparseCreateMatDescr made.
bool descr_fields(const void* d, uint64_t (&out)[2]) noexcept;

// cusparsePointerMode_t: HOST 0, DEVICE 1.
inline int mode_bad(int mode) noexcept { return mode == 0 || mode == 1 ? kSuccess : kInvalidValue; }

}  // namespace vmcuda::guest::cusparse
