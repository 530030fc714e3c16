// What cuSPARSE and cuSOLVER share on the host (nvobj.h): their objects across a suspend. Each
// object carries the calls that made and set it (NvobjStep, recorded by the generated handlers
// of the `replay`/`replace` calls of api/libs/LIB.calls); a resume replays them, in the
// client's order across the library's objects, through the same handlers once device memory
// is back (suspend.cc). A suspend is refused while a step names an object the program has
// destroyed or memory it has freed since (it could not be replayed), or an object has more
// steps than are kept, or holds a call the library's table marks notcarried (its reason).
#include "nvobj.h"

#ifdef VMCUDA_WITH_CUSPARSE
#include "cusparse.h"
#endif
#ifdef VMCUDA_WITH_CUSOLVER
#include "cusolver.h"
#endif

namespace vmcuda::host {

bool Session::nvobj_step_info(ObjectKind kind, uint32_t call, std::span<const std::byte> args, NvobjStepInfo* out) {
#ifdef VMCUDA_WITH_CUSPARSE
  if (kind == ObjectKind::Cusparse) return CusparseTraits::step_info(call, args, out);
#endif
#ifdef VMCUDA_WITH_CUSOLVER
  if (kind == ObjectKind::Cusolver) return CusolverTraits::step_info(call, args, out);
#endif
  (void)kind, (void)call, (void)args, (void)out;
  return false;
}

int Session::nvobj_types(ObjectKind kind) {
#ifdef VMCUDA_WITH_CUSPARSE
  if (kind == ObjectKind::Cusparse) return CusparseTraits::kTypes;
#endif
#ifdef VMCUDA_WITH_CUSOLVER
  if (kind == ObjectKind::Cusolver) return CusolverTraits::kTypes;
#endif
  (void)kind;
  return 0;
}

int32_t Session::nvobj_replay(ObjectKind kind, uint32_t call, std::span<const std::byte> args) {
#ifdef VMCUDA_WITH_CUSPARSE
  if (kind == ObjectKind::Cusparse) return CusparseTraits::replay(*this, call, args);
#endif
#ifdef VMCUDA_WITH_CUSOLVER
  if (kind == ObjectKind::Cusolver) return CusolverTraits::replay(*this, call, args);
#endif
  (void)kind, (void)call, (void)args;
  return -1;
}

bool Session::suspend_window_open() {
  if (!captures_block_suspend().empty()) return true;
  for (ObjectKind kind : {ObjectKind::Cusparse, ObjectKind::Cusolver})
    for (const auto& [guest, id] : vol_.of(kind))
      if (vol_.get(id)->as<NvobjObject>().pivot_unread) return true;
  return false;
}

std::string Session::nvobj_blocks_suspend() const {
  for (ObjectKind kind : {ObjectKind::Cusparse, ObjectKind::Cusolver}) {
    const char* lib = kind == ObjectKind::Cusparse ? "cuSPARSE" : "cuSOLVER";
    for (const auto& [guest, id] : vol_.of(kind)) {
      const NvobjObject& d = vol_.get(id)->as<NvobjObject>();
      if (d.pivot_unread)
        return std::string("a ") + lib + " factorization or BSR triangular solve (csrilu02, csric02, bsrilu02, "
               "bsric02, bsrsv2, bsrsm2) has run and its zero pivot has not been read, which a resume could not make "
               "again; suspend again once the program has called its X..._zeroPivot or destroyed the info object, or "
               "end the program";
      if (d.overflow)
        return std::string("a ") + lib + " object (" + std::to_string(guest) + ") was set up by more than " +
               std::to_string(kNvobjMaxSteps) +
               " calls, more than a suspend carries; destroy it (or make it anew) and suspend again, or end the program";
      for (const NvobjStep& step : d.steps) {
        NvobjStepInfo info;
        if (!nvobj_step_info(kind, step.call, step.args, &info)) continue;  // never: recorded by the handler
        if (info.not_carried)
          return std::string("a ") + lib + " " + info.object + " was set up by " + api::call_name(step.call) +
                 ", which a resume could not replay: " + info.not_carried + "; destroy it (" + info.destroyed_by +
                 ") and suspend again, or end the program";
        for (uint64_t other : info.others)
          if (!vol_.find(kind, other))
            return std::string("a ") + lib + " object was set up by " + api::call_name(step.call) +
                   " with an object the program has destroyed since, which a resume could not replay; destroy it "
                   "too (for example the SpSV/SpGEMM descriptor with its matrices) and suspend again, or end the "
                   "program";
        for (uint64_t ptr : info.memory)
          if (ptr && !owns_range(ptr, 1))
            return std::string("a ") + lib + " object was set up by " + api::call_name(step.call) +
                   " with device memory the program has freed since, which a resume could not replay; destroy "
                   "the object (or give it its memory again) and suspend again, or end the program";
      }
    }
  }
  return {};
}

}  // namespace vmcuda::host
