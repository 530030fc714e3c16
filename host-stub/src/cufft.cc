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
bool Session::cufft_recreate(CufftPlanObject&, std::string* why) {
  *why = "the state has cuFFT plans, and this vmcuda-stub was built without cuFFT";
  return false;
}
bool Session::restore_cufft_settings(std::string*) { return true; }
bool Session::cufft_replayable_call(uint32_t, size_t) { return false; }
#else

bool Session::cufft_replayable_call(uint32_t call, size_t bytes) { return cufft_replayable(call, bytes); }

const CufftApi* CufftTraits::library(const DriverApi& driver, std::string* why) {
  return load_nvidia_api<CufftApi>(
      driver, kLibrary, "__vmcuda_cufft_table", "CUDA 13's cuFFT (package libcufft-13-0)",
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

bool Session::cufft_recreate(CufftPlanObject& p, std::string* why) {
  std::string w;
  const CufftApi* lib = CufftTraits::library(api_, &w);
  if (!lib) {
    *why = "a cuFFT plan cannot be made again: no libcufft.so.12 on this host (" + w + ")";
    return false;
  }
  p.plan = -1;
  int st = CUFFT_SUCCESS;
  // A plan made by cufftPlan* is made again by that call; one made in steps starts as cufftCreate's.
  if (p.made_by.empty() || !cufft_replay_makes(p.made_by.front().first)) st = lib->cufftCreate(&p.plan);
  for (size_t i = 0; st == CUFFT_SUCCESS && i < p.made_by.size(); ++i) {
    const auto& [call, args] = p.made_by[i];
    if (i > 0 && cufft_replay_makes(call)) st = CUFFT_INVALID_VALUE;  // only the first call makes the plan
    else st = cufft_replay(*lib, &p.plan, call, args, nullptr);  // no cuFFT call writes device memory
  }
  if (st != CUFFT_SUCCESS) {
    if (p.plan >= 0) lib->cufftDestroy(p.plan);
    p.plan = -1;
    *why = "making a cuFFT plan again failed (cufftResult " + std::to_string(st) + ")";
    return false;
  }
  return true;
}

bool Session::restore_cufft_settings(std::string* why) {
  const CufftApi* lib = CufftTraits::library(api_, nullptr);
  for (const auto& [guest, id] : vol_.of(ObjectKind::CufftPlan)) {
    Object& o = *vol_.get(id);
    CufftPlanObject& p = o.as<CufftPlanObject>();
    if (!p.stream && !p.work_area) continue;
    make_current(o.device);
    int st = CUFFT_SUCCESS;
    if (p.stream) {
      const Object* s = vol_.find(ObjectKind::Stream, p.stream);
      if (!s || s->device != o.device) {
        *why = "a cuFFT plan's stream is not in the state";
        return false;
      }
      st = lib->cufftSetStream ? lib->cufftSetStream(p.plan, s->as<StreamObject>().stream) : CUFFT_NOT_SUPPORTED;
    }
    if (st == CUFFT_SUCCESS && p.work_area) {
      if (!owns_range(p.work_area, 1)) {
        *why = "a cuFFT plan's work area is not the client's memory in the state";
        return false;
      }
      st = lib->cufftSetWorkArea ? lib->cufftSetWorkArea(p.plan, reinterpret_cast<void*>(p.work_area))
                                 : CUFFT_NOT_SUPPORTED;
    }
    if (st != CUFFT_SUCCESS) {
      *why = "restoring a cuFFT plan's stream or work area failed (cufftResult " + std::to_string(st) + ")";
      return false;
    }
  }
  make_current(current_);
  return true;
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
  const int st = c.lib->cufftSetWorkArea(c.native(), reinterpret_cast<void*>(a.workArea));
  if (st == CUFFT_SUCCESS) c.data().work_area = a.workArea;
  return st;
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
