// cuSPARSE calls (calls.def 0x2400-0x24ff; api/libs/cusparse.calls): the library and the
// objects' teardown; every handler is generated (scripts/gen-nvobj.py) on NvobjScope (nvobj.h).
// Without the generated sources (no header at build time) only the teardown hook is built.
#include <cstring>

#include "session.h"

#ifdef VMCUDA_WITH_CUSPARSE
#include "cusparse.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CUSPARSE
CUresult Session::cusparse_release(NvobjObject&) { return CUDA_SUCCESS; }
#else

const CusparseApi* CusparseTraits::library(const DriverApi& driver) {
  return load_nvidia_api<CusparseApi>(
      driver, kLibrary, "__vmcuda_cusparse_table", "CUDA 13's cuSPARSE (package libcusparse-13-0)",
      [&](void* lib, CusparseApi& api) {
#define VMCUDA_CUSPARSE_LOAD(name, type) \
  api.name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
        VMCUDA_CUSPARSE_FUNCTIONS(VMCUDA_CUSPARSE_LOAD)
        VMCUDA_CUSPARSE_DESCR_FUNCTIONS(VMCUDA_CUSPARSE_LOAD)
#undef VMCUDA_CUSPARSE_LOAD
        return api.cusparseCreate && api.cusparseDestroy;
      },
      nullptr);
}

CusparseMatDescr::CusparseMatDescr(const CusparseApi& lib, const uint64_t (&fields)[2]) : lib_(lib) {
  if (!lib.cusparseCreateMatDescr || !lib.cusparseDestroyMatDescr || !lib.cusparseSetMatType ||
      !lib.cusparseSetMatFillMode || !lib.cusparseSetMatDiagType || !lib.cusparseSetMatIndexBase) {
    status_ = log_missing(CusparseTraits::kLibrary, "cusparseCreateMatDescr", CUSPARSE_STATUS_NOT_SUPPORTED,
                          "its not-supported status");
    return;
  }
  int32_t f[4];
  static_assert(sizeof f == sizeof fields);
  std::memcpy(f, fields, sizeof f);
  if ((status_ = lib.cusparseCreateMatDescr(&descr_)) != 0) {
    descr_ = nullptr;
    return;
  }
  // The library's own checks of each value (a guest's descriptor is only its bytes).
  if ((status_ = lib.cusparseSetMatType(descr_, f[0])) == 0 && (status_ = lib.cusparseSetMatFillMode(descr_, f[1])) == 0 &&
      (status_ = lib.cusparseSetMatDiagType(descr_, f[2])) == 0)
    status_ = lib.cusparseSetMatIndexBase(descr_, f[3]);
}

CusparseMatDescr::~CusparseMatDescr() {
  if (descr_) lib_.cusparseDestroyMatDescr(descr_);
}

CUresult Session::cusparse_release(NvobjObject& o) {
  const CusparseApi* lib = CusparseTraits::library(api_);
  if (o.ptr && lib) cusparse_destroy(*lib, o.type, o.ptr);
  o.ptr = nullptr;
  return CUDA_SUCCESS;  // a library status is no CUresult: teardown goes on either way
}

#endif  // VMCUDA_WITH_CUSPARSE

}  // namespace vmcuda::host
