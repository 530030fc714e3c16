// cuFFT calls (calls.def 0x2200-0x22ff; api/libs/cufft.calls): the library, the plans'
// destruction and settings; the rest is generated (scripts/gen-nvlib.py) on NvlibScope
// (nvlib.h). A plan is a VOL entry under its device's context, destroyed with the client; its
// stream is a guest stream handle, its work area the client's device memory. Without the
// generated sources (no cufft.h at build time) only the teardown hook is built.
#include "session.h"

#ifdef VMCUDA_WITH_CUFFT
#include "cufft.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CUFFT
CUresult Session::cufft_release(CufftPlanObject&) { return CUDA_SUCCESS; }
#else

const CufftApi* CufftTraits::library(const DriverApi& driver, std::string* why) {
  return load_nvidia_api<CufftApi>(
      driver, "libcufft.so.12", "__vmcuda_cufft_table", "CUDA 13's cuFFT (package libcufft-13-0)",
      [&](void* lib, CufftApi& api) {
#define VMCUDA_CUFFT_LOAD(name, type) \
  api.name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
        VMCUDA_CUFFT_FUNCTIONS(VMCUDA_CUFFT_LOAD)
#undef VMCUDA_CUFFT_LOAD
        return api.cufftCreate && api.cufftDestroy;
      },
      why);
}

CUresult Session::cufft_release(CufftPlanObject& p) {
  const CufftApi* lib = CufftTraits::library(api_, nullptr);
  if (p.plan >= 0 && lib) lib->cufftDestroy(p.plan);
  p.plan = -1;
  return CUDA_SUCCESS;  // a cufftResult is no CUresult: teardown goes on either way
}

int32_t Session::on_cufftDestroy(const api::cufftDestroy_Args& a, api::Empty&, Request&) {
  CufftScope c(*this, a.plan, "cufftDestroy");
  if (!c.ok()) return c.status();
  const int st = c.lib->cufftDestroy(c.native());
  c.data().plan = -1;
  vol_.remove(c.object().id);
  return st;
}

int32_t Session::on_cufftSetWorkArea(const api::cufftSetWorkArea_Args& a, api::Empty&, Request&) {
  CufftScope c(*this, a.plan, "cufftSetWorkArea");
  if (!c.ok() || !c.has(c.lib->cufftSetWorkArea)) return c.status();
  // The library writes the plan's whole work area: all of it must be the client's (its size
  // as the library states it; 1 byte when it cannot say, before the plan is made).
  size_t bytes = 1;
  if (a.workArea && c.lib->cufftGetSize && c.lib->cufftGetSize(c.native(), &bytes) != CUFFT_SUCCESS) bytes = 1;
  if (!c.device(a.workArea, bytes, 1)) return c.bad_pointer("workArea");
  return c.lib->cufftSetWorkArea(c.native(), reinterpret_cast<void*>(a.workArea));
}

int32_t Session::on_cufftSetStream(const api::cufftSetStream_Args& a, api::Empty&, Request&) {
  CufftScope c(*this, a.plan, "cufftSetStream");
  if (!c.ok() || !c.has(c.lib->cufftSetStream)) return c.status();
  CUstream s = nullptr;
  int device = -1;
  if (resolve_stream(a.stream, &s, &device) != CUDA_SUCCESS) return CUFFT_INVALID_VALUE;
  // A special stream (legacy, per-thread) resolves to the current device's; the plan's own
  // device is what counts for a stream the app made.
  if (a.stream >= api::kFirstGuestHandle && device != c.object().device) return CUFFT_INVALID_VALUE;
  const int st = c.lib->cufftSetStream(c.native(), s);
  if (st == CUFFT_SUCCESS) c.data().stream = a.stream >= api::kFirstGuestHandle ? a.stream : 0;
  return st;
}

#endif  // VMCUDA_WITH_CUFFT

}  // namespace vmcuda::host
