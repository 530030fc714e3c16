// cuSOLVER's hand-written part in libcuda.so.1 (cusolver.h): the objects' registry and what the
// guest answers itself (versions). The rest is generated (scripts/gen-nvobj.py,
// api/libs/cusolver.calls).
#include "cusolver.h"

namespace vmcuda::guest::cusolver {
namespace {

bool is_status(int32_t s) { return (s >= 0 && s <= 16) || (s >= 20 && s <= 23) || s == 25 || s == 26 || s == 30 || s == 31; }

}  // namespace

const nvlib::Statuses kStatuses = {"cusolver", kNotInitialized, kExecutionFailed, kInternalError, is_status,
                                   "CUSOLVER_STATUS_NOT_SUPPORTED (9)"};

nvobj::Registry& registry() {
  static auto* r = new nvobj::Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

}  // namespace vmcuda::guest::cusolver

using namespace vmcuda::guest::cusolver;

// ---- answered here (cusolver_common.h's version: the library vmcuda was built against)

VMCUDA_CUSOLVER_API int cusolverGetProperty(int type, int* value) {
  if (!value || type < 0 || type > 2) return kInvalidValue;  // libraryPropertyType: MAJOR, MINOR, PATCH
  *value = kVersion[type];
  return kSuccess;
}

VMCUDA_CUSOLVER_API int cusolverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = kVersion[0] * 1000 + kVersion[1] * 100 + kVersion[2];  // CUSOLVER_VERSION
  return kSuccess;
}
