// cuSPARSE's hand-written part in libcuda.so.1 (cusparse.h): the objects' registry and what the
// guest answers itself (error names and strings, versions, the pointer mode it keeps). The rest
// is generated (scripts/gen-nvobj.py, api/libs/cusparse.calls).
#include "cusparse.h"

namespace vmcuda::guest::cusparse {
namespace {

bool is_status(int32_t s) { return s >= 0 && s <= 11; }

// NVIDIA's names and strings, in status order (read out of libcusparse.so.12 12.6).
constexpr const char* kNames[] = {
    "CUSPARSE_STATUS_SUCCESS",          "CUSPARSE_STATUS_NOT_INITIALIZED",
    "CUSPARSE_STATUS_ALLOC_FAILED",     "CUSPARSE_STATUS_INVALID_VALUE",
    "CUSPARSE_STATUS_ARCH_MISMATCH",    "CUSPARSE_STATUS_MAPPING_ERROR",
    "CUSPARSE_STATUS_EXECUTION_FAILED", "CUSPARSE_STATUS_INTERNAL_ERROR",
    "CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED", "CUSPARSE_STATUS_ZERO_PIVOT",
    "CUSPARSE_STATUS_NOT_SUPPORTED",    "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES"};
constexpr const char* kStrings[] = {"success",           "initialization error",
                                    "out of memory",     "invalid value",
                                    "architecture mismatch", "texture memory mapping error",
                                    "kernel launch failure", "internal error",
                                    "matrix type not supported", "zero pivot",
                                    "operation not supported", "insufficient resources"};

}  // namespace

const nvlib::Statuses kStatuses = {"cusparse", kNotInitialized, kExecutionFailed, kInternalError, is_status,
                                   "CUSPARSE_STATUS_NOT_SUPPORTED (10)"};

nvobj::Registry& registry() {
  static auto* r = new nvobj::Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

}  // namespace vmcuda::guest::cusparse

using namespace vmcuda::guest::cusparse;

// ---- answered here

// TODO(remoting): the text for a value that is no status is a guess (not read from NVIDIA's).
VMCUDA_CUSPARSE_API const char* cusparseGetErrorName(int status) {
  return status >= 0 && status <= 11 ? kNames[status] : "CUSPARSE_STATUS_UNKNOWN";
}

VMCUDA_CUSPARSE_API const char* cusparseGetErrorString(int status) {
  return status >= 0 && status <= 11 ? kStrings[status] : "unknown error";
}

VMCUDA_CUSPARSE_API int cusparseGetProperty(int type, int* value) {
  if (!value || type < 0 || type > 2) return kInvalidValue;  // libraryPropertyType: MAJOR, MINOR, PATCH
  *value = kVersion[type];
  return kSuccess;
}

VMCUDA_CUSPARSE_API int cusparseGetPointerMode(void* handle, int* mode) {
  Handle* h;
  if (int s = enter(handle, 0, &h)) return s;
  if (!mode) return kInvalidValue;
  *mode = h->pointer_mode;
  return kSuccess;
}
