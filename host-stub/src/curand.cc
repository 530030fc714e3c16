// cuRAND calls (calls.def 0x2300-0x23ff; api/libs/curand.calls): the library, the generators'
// destruction and stream; the rest is generated (scripts/gen-nvlib.py) on NvlibScope
// (nvlib.h). A generator is a VOL entry under its device's context, destroyed with the client.
// Without the generated sources (no curand.h at build time) only the teardown hook is built.
#include "session.h"

#ifdef VMCUDA_WITH_CURAND
#include "curand.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CURAND
CUresult Session::curand_release(CurandGeneratorObject&) { return CUDA_SUCCESS; }
#else

const CurandApi* CurandTraits::library(const DriverApi& driver, std::string* why) {
  return load_nvidia_api<CurandApi>(
      driver, kLibrary, "__vmcuda_curand_table", "CUDA 13's cuRAND (package libcurand-13-0)",
      [&](void* lib, CurandApi& api) {
#define VMCUDA_CURAND_LOAD(name, type) \
  api.name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
        VMCUDA_CURAND_FUNCTIONS(VMCUDA_CURAND_LOAD)
#undef VMCUDA_CURAND_LOAD
        return api.curandCreateGenerator && api.curandDestroyGenerator;
      },
      why);
}

CUresult Session::curand_release(CurandGeneratorObject& g) {
  const CurandApi* lib = CurandTraits::library(api_, nullptr);
  if (g.generator && lib) lib->curandDestroyGenerator(g.generator);
  g.generator = nullptr;
  return CUDA_SUCCESS;  // a curandStatus_t is no CUresult: teardown goes on either way
}

int32_t Session::on_curandDestroyGenerator(const api::curandDestroyGenerator_Args& a, api::Empty&, Request&) {
  CurandScope c(*this, a.generator, "curandDestroyGenerator");
  if (!c.ok()) return c.status();
  const int st = c.lib->curandDestroyGenerator(c.native());
  c.data().generator = nullptr;
  vol_.remove(c.object().id);
  return st;
}

int32_t Session::on_curandSetStream(const api::curandSetStream_Args& a, api::Empty&, Request&) {
  CurandScope c(*this, a.generator, "curandSetStream");
  if (!c.ok() || !c.has(c.lib->curandSetStream)) return c.status();
  CUstream s = nullptr;
  int device = -1;
  if (resolve_stream(a.stream, &s, &device) != CUDA_SUCCESS) return CURAND_STATUS_OUT_OF_RANGE;
  if (a.stream >= api::kFirstGuestHandle && device != c.object().device) return CURAND_STATUS_OUT_OF_RANGE;
  const int st = c.lib->curandSetStream(c.native(), s);
  if (st == CURAND_STATUS_SUCCESS) c.data().stream = a.stream >= api::kFirstGuestHandle ? a.stream : 0;
  return st;
}

#endif  // VMCUDA_WITH_CURAND

}  // namespace vmcuda::host
