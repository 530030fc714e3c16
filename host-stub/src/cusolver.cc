// cuSOLVER calls (calls.def 0x2500-0x25ff; api/libs/cusolver.calls): the library and the
// objects' teardown; every handler is generated (scripts/gen-nvobj.py) on NvobjScope (nvobj.h).
// Without the generated sources (no header at build time) only the teardown hook is built.
#include "session.h"

#ifdef VMCUDA_WITH_CUSOLVER
#include "cusolver.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CUSOLVER
CUresult Session::cusolver_release(NvobjObject&) { return CUDA_SUCCESS; }
#else

const CusolverApi* CusolverTraits::library(const DriverApi& driver) {
  return load_nvidia_api<CusolverApi>(
      driver, kLibrary, "__vmcuda_cusolver_table", "CUDA 13's cuSOLVER (package libcusolver-13-0)",
      [&](void* lib, CusolverApi& api) {
#define VMCUDA_CUSOLVER_LOAD(name, type) \
  api.name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
        VMCUDA_CUSOLVER_FUNCTIONS(VMCUDA_CUSOLVER_LOAD)
#undef VMCUDA_CUSOLVER_LOAD
        return api.cusolverDnCreate && api.cusolverDnDestroy;
      },
      nullptr);
}

CUresult Session::cusolver_release(NvobjObject& o) {
  const CusolverApi* lib = CusolverTraits::library(api_);
  if (o.ptr && lib) cusolver_destroy(*lib, o.type, o.ptr);
  o.ptr = nullptr;
  return CUDA_SUCCESS;  // a library status is no CUresult: teardown goes on either way
}

#endif  // VMCUDA_WITH_CUSOLVER

}  // namespace vmcuda::host
