// cuSPARSE on the host (issue 12 point 3): the library's entry points and the traits every handler
// of a cuSPARSE call uses (generated: build/generated/cusparse/cusparse_host.cc; helpers: nvobj.h).
#pragma once

#include <span>

#include "cusparse_host_api.h"
#include "nvobj.h"

namespace vmcuda::host {

// cusparseStatus_t values the host answers itself.
inline constexpr int32_t CUSPARSE_STATUS_NOT_INITIALIZED = 1, CUSPARSE_STATUS_ALLOC_FAILED = 2,
                         CUSPARSE_STATUS_INVALID_VALUE = 3, CUSPARSE_STATUS_INTERNAL_ERROR = 7,
                         CUSPARSE_STATUS_NOT_SUPPORTED = 10;

// The legacy API's matrix descriptor (cusparseMatDescr_t): the host makes one per call from the
// guest's fields (api/libs/cusparse.calls), with these entry points.
#define VMCUDA_CUSPARSE_DESCR_FUNCTIONS(X)      \
  X(cusparseCreateMatDescr, int (*)(void**))    \
  X(cusparseDestroyMatDescr, int (*)(void*))    \
  X(cusparseSetMatType, int (*)(void*, int))     \
  X(cusparseSetMatFillMode, int (*)(void*, int)) \
  X(cusparseSetMatDiagType, int (*)(void*, int)) \
  X(cusparseSetMatIndexBase, int (*)(void*, int))

// The entry points of libcusparse.so.12 the calls use (generated list; ABI types).
struct CusparseApi {
#define VMCUDA_CUSPARSE_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUSPARSE_FUNCTIONS(VMCUDA_CUSPARSE_DECLARE)
  VMCUDA_CUSPARSE_DESCR_FUNCTIONS(VMCUDA_CUSPARSE_DECLARE)
#undef VMCUDA_CUSPARSE_DECLARE
};

// The library's cusparseMatDescr_t for one call, made from the guest's four fields (type, fill
// mode, diagonal type, index base; api::cusparse wire: two uint64_t). A field the library's
// setter refuses is its status (the guest's values are not trusted); destroyed with the call.
class CusparseMatDescr {
 public:
  CusparseMatDescr(const CusparseApi& lib, const uint64_t (&fields)[2]);
  ~CusparseMatDescr();
  CusparseMatDescr(const CusparseMatDescr&) = delete;
  CusparseMatDescr& operator=(const CusparseMatDescr&) = delete;
  bool ok() const { return status_ == 0; }
  int32_t status() const { return status_; }
  void* get() const { return descr_; }

 private:
  const CusparseApi& lib_;
  void* descr_ = nullptr;
  int32_t status_ = 0;
};

struct CusparseTraits {
  using Api = CusparseApi;
  static constexpr ObjectKind kKind = ObjectKind::Cusparse;
  static constexpr int32_t kBadHandle = CUSPARSE_STATUS_NOT_INITIALIZED, kInvalidValue = CUSPARSE_STATUS_INVALID_VALUE,
                           kNoLibrary = CUSPARSE_STATUS_NOT_INITIALIZED, kNotSupported = CUSPARSE_STATUS_NOT_SUPPORTED,
                           kAllocFailed = CUSPARSE_STATUS_ALLOC_FAILED;
  static constexpr const char* kLibrary = "libcusparse.so.12";
  static constexpr const char* kNames[] = VMCUDA_CUSPARSE_OBJECT_NAMES;
  static const CusparseApi* library(const DriverApi& driver);
  static void reset_stream(const CusparseApi& lib, void* handle) {
    if (lib.cusparseSetStream) lib.cusparseSetStream(handle, nullptr);
  }
  static constexpr HostLibrary kHostLibrary = HostLibrary::kSparse;
  static constexpr int kTypes = VMCUDA_CUSPARSE_OBJECT_TYPES;
  // Generated (cusparse_host.cc): what a recorded step names; the step run again (a resume).
  static bool step_info(uint32_t call, std::span<const std::byte> bytes, NvobjStepInfo* out);
  static int32_t replay(Session& s, uint32_t call, std::span<const std::byte> bytes);
};
using CusparseScope = NvobjScope<CusparseTraits>;

// Generated (cusparse_host.cc): the library's destruction of an object of `type`.
int cusparse_destroy(const CusparseApi& lib, int type, void* o);

}  // namespace vmcuda::host
