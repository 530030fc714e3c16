// cuRAND calls (calls.def 0x2300-0x23ff; api/libs/curand.calls): the library, the generators'
// destruction and stream; the rest is generated (scripts/gen-nvlib.py) on NvlibScope
// (nvlib.h). A generator is a VOL entry under its device's context, destroyed with the client;
// a suspend carries it as the steps that brought it where it stands (CurandTraits::record).
// Without the generated sources (no curand.h at build time) only the teardown hook is built.
#include "session.h"

#include <algorithm>

#ifdef VMCUDA_WITH_CURAND
#include "curand.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CURAND
CUresult Session::curand_release(CurandGeneratorObject&) { return CUDA_SUCCESS; }
bool Session::curand_recreate(CurandGeneratorObject&, std::string* why) {
  *why = "the state has cuRAND generators, and this vmcuda-stub was built without cuRAND";
  return false;
}
bool Session::restore_curand_settings(std::string*) { return true; }
uint64_t Session::curand_step_bytes(uint32_t, std::span<const std::byte>) { return UINT64_MAX; }
#else

namespace {
constexpr uint32_t call_number(api::Call c) { return static_cast<uint32_t>(c); }
// Whether a step moves the generator along its sequence (a generation), rather than setting it.
bool moves(uint32_t call, std::span<const std::byte> args) {
  return call == call_number(api::Call::curandGenerateSeeds) || curand_replay_scratch(call, args) > 0;
}
uint64_t saturating_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
}  // namespace

void CurandTraits::record(CurandGeneratorObject& g, uint32_t call, std::span<const std::byte> args) {
  auto& log = g.made_by;
  const bool generation = moves(call, args);
  if (call == call_number(api::Call::curandSetGeneratorOffset)) {
    // An absolute position: what generated before it, and an earlier offset, no longer count.
    std::erase_if(log, [](const CurandStep& s) {
      return s.call == call_number(api::Call::curandSetGeneratorOffset) || moves(s.call, s.args);
    });
    g.replay_bytes = 0;
  }
  if (!log.empty() && log.back().call == call) {
    CurandStep& last = log.back();
    if (generation && std::ranges::equal(last.args, args)) {
      ++last.repeat;
      g.replay_bytes = saturating_add(g.replay_bytes, curand_replay_scratch(call, args));
      return;
    }
    if (!generation && !curand_replay_makes(call)) {  // a setting set again: the last value counts
      last.args.assign(args.begin(), args.end());
      return;
    }
  }
  if (log.size() >= kCurandMaxSteps) {
    g.overflow = true;  // sticky: the log no longer says where the generator stands
    return;
  }
  log.push_back({call, std::vector<std::byte>(args.begin(), args.end()), 1});
  if (generation) g.replay_bytes = saturating_add(g.replay_bytes, curand_replay_scratch(call, args));
}

uint64_t Session::curand_step_bytes(uint32_t call, std::span<const std::byte> args) {
  return curand_replayable(call, args.size()) ? curand_replay_scratch(call, args) : UINT64_MAX;
}

bool Session::curand_recreate(CurandGeneratorObject& g, std::string* why) {
  std::string w;
  const CurandApi* lib = CurandTraits::library(api_, &w);
  if (!lib) {
    *why = "a cuRAND generator cannot be made again: no libcurand.so.10 on this host (" + w + ")";
    return false;
  }
  g.generator = nullptr;
  if (g.made_by.empty() || !curand_replay_makes(g.made_by.front().call)) {
    *why = "a cuRAND generator's steps do not begin with its creation";
    return false;
  }
  // One scratch buffer, the size of the largest generation, takes every replayed number.
  uint64_t scratch_bytes = 0;
  for (const CurandStep& s : g.made_by) scratch_bytes = std::max(scratch_bytes, curand_replay_scratch(s.call, s.args));
  CUdeviceptr scratch = 0;
  const std::string scratch_what = std::to_string((scratch_bytes + (1 << 20) - 1) >> 20) +
                                   " MiB scratch buffer that brings a cuRAND generator back to where it stood in its sequence";
  // The VM's device memory while the replay runs (its quota bounds what a resume may take too).
  const bool charged = scratch_bytes && account_;
  if (charged && !account_->charge(scratch_bytes)) {
    *why = "the VM's device memory quota has no room for the " + scratch_what +
           " (raise --memory-quota-mib, or end another program of the VM, and resume again)";
    return false;
  }
  if (scratch_bytes && api_.cuMemAlloc_v2(&scratch, scratch_bytes) != CUDA_SUCCESS) {
    if (charged) account_->refund(scratch_bytes);
    *why = "no device memory for the " + scratch_what;
    return false;
  }
  int st = CURAND_STATUS_SUCCESS;
  for (size_t i = 0; st == CURAND_STATUS_SUCCESS && i < g.made_by.size(); ++i) {
    const CurandStep& s = g.made_by[i];
    if (i > 0 && curand_replay_makes(s.call)) st = CURAND_STATUS_OUT_OF_RANGE;  // only the first makes it
    for (uint64_t k = 0; st == CURAND_STATUS_SUCCESS && k < s.repeat; ++k)
      st = curand_replay(*lib, &g.generator, s.call, s.args, reinterpret_cast<void*>(scratch));
  }
  // The generations ran on the default stream: done before their buffer goes.
  const CUresult synced = api_.cuCtxSynchronize();
  if (scratch) api_.cuMemFree_v2(scratch);
  if (charged) account_->refund(scratch_bytes);
  if (st != CURAND_STATUS_SUCCESS || synced != CUDA_SUCCESS) {
    if (g.generator) lib->curandDestroyGenerator(g.generator);
    g.generator = nullptr;
    *why = st != CURAND_STATUS_SUCCESS
               ? "bringing a cuRAND generator back failed (curandStatus_t " + std::to_string(st) + ")"
               : "bringing a cuRAND generator back failed: " + describe(api_, synced);
    return false;
  }
  return true;
}

bool Session::restore_curand_settings(std::string* why) {
  const CurandApi* lib = CurandTraits::library(api_, nullptr);
  for (const auto& [guest, id] : vol_.of(ObjectKind::CurandGenerator)) {
    Object& o = *vol_.get(id);
    CurandGeneratorObject& g = o.as<CurandGeneratorObject>();
    if (!g.stream) continue;
    const Object* s = vol_.find(ObjectKind::Stream, g.stream);
    if (!s || s->device != o.device) {
      *why = "a cuRAND generator's stream is not in the state";
      return false;
    }
    make_current(o.device);
    const int st = lib && lib->curandSetStream ? lib->curandSetStream(g.generator, s->as<StreamObject>().stream)
                                               : CURAND_STATUS_INTERNAL_ERROR;
    if (st != CURAND_STATUS_SUCCESS) {
      *why = "restoring a cuRAND generator's stream failed (curandStatus_t " + std::to_string(st) + ")";
      return false;
    }
  }
  make_current(current_);
  return true;
}

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
