// cuSPARSE's hand-written part in libcuda.so.1 (cusparse.h): the objects' registry and what the
// guest answers itself (error names and strings, versions, the pointer mode it keeps, the legacy
// API's matrix descriptors). The rest
// is generated (scripts/gen-nvobj.py, api/libs/cusparse.calls).
#include "cusparse.h"

#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

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

// The legacy API's matrix descriptor: kept here, its fields sent with each call that names it
// (the host makes the library's own for that call; api/libs/cusparse.calls).
struct MatDescr {
  int32_t type = 0, fill = 0, diag = 0, base = 0;  // GENERAL, LOWER, NON_UNIT, ZERO: the library's defaults
};
std::mutex descr_mu;
std::unordered_set<MatDescr*>& live_descrs() {
  static auto* s = new std::unordered_set<MatDescr*>;  // never destroyed: calls may come from atexit handlers
  return *s;
}
// The live descriptor `d` (nullptr: NULL or not one of ours); descr_mu held.
MatDescr* find_descr(const void* d) {
  auto* p = static_cast<MatDescr*>(const_cast<void*>(d));
  return p && live_descrs().count(p) ? p : nullptr;
}
// A setter: `value` must be one of `count` enumerators (the library's invalid value otherwise).
int set_field(void* d, int32_t MatDescr::*field, int value, int count) {
  std::lock_guard l(descr_mu);
  MatDescr* m = find_descr(d);
  if (!m || value < 0 || value >= count) return kInvalidValue;
  m->*field = value;
  return kSuccess;
}
// A getter answers the enum itself: a descriptor that is not one reads as the default (0).
int get_field(const void* d, int32_t MatDescr::*field) {
  std::lock_guard l(descr_mu);
  const MatDescr* m = find_descr(d);
  return m ? m->*field : 0;
}

}  // namespace

bool descr_fields(const void* d, uint64_t (&out)[2]) noexcept {
  std::lock_guard l(descr_mu);
  const MatDescr* m = find_descr(d);
  if (!m) return false;
  const int32_t f[4] = {m->type, m->fill, m->diag, m->base};
  static_assert(sizeof f == sizeof out);
  std::memcpy(out, f, sizeof f);
  return true;
}

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

// The legacy API's cusparseMatDescr_t (MatDescr above).
VMCUDA_CUSPARSE_API int cusparseCreateMatDescr(void** descr) {
  if (!descr) return kInvalidValue;
  auto* m = new (std::nothrow) MatDescr;
  if (!m) return kAllocFailed;
  std::lock_guard l(descr_mu);
  live_descrs().insert(m);
  *descr = m;
  return kSuccess;
}

VMCUDA_CUSPARSE_API int cusparseDestroyMatDescr(void* descr) {
  if (!descr) return kSuccess;  // nothing to destroy
  std::lock_guard l(descr_mu);
  MatDescr* m = find_descr(descr);
  if (!m) return kInvalidValue;  // not one, or destroyed already
  live_descrs().erase(m);
  delete m;
  return kSuccess;
}

VMCUDA_CUSPARSE_API int cusparseSetMatType(void* d, int type) { return set_field(d, &MatDescr::type, type, 4); }
VMCUDA_CUSPARSE_API int cusparseGetMatType(const void* d) { return get_field(d, &MatDescr::type); }
VMCUDA_CUSPARSE_API int cusparseSetMatFillMode(void* d, int fill) { return set_field(d, &MatDescr::fill, fill, 2); }
VMCUDA_CUSPARSE_API int cusparseGetMatFillMode(const void* d) { return get_field(d, &MatDescr::fill); }
VMCUDA_CUSPARSE_API int cusparseSetMatDiagType(void* d, int diag) { return set_field(d, &MatDescr::diag, diag, 2); }
VMCUDA_CUSPARSE_API int cusparseGetMatDiagType(const void* d) { return get_field(d, &MatDescr::diag); }
VMCUDA_CUSPARSE_API int cusparseSetMatIndexBase(void* d, int base) { return set_field(d, &MatDescr::base, base, 2); }
VMCUDA_CUSPARSE_API int cusparseGetMatIndexBase(const void* d) { return get_field(d, &MatDescr::base); }
