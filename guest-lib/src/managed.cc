// __managed__ variables: shadows in the shared heap, bound on the host per device
// (managed.h). The tables have their own leaf lock, as host_objects.cc's.
#include "managed.h"

#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "host_objects.h"
#include "log.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"

namespace vmcuda::guest {
namespace {

using vgpu_db::Variable;

struct Tables {
  std::mutex mu;  // a leaf lock: held only while a table is read or changed
  std::map<const Variable*, vmrpc::HeapBlock> shadows;  // one per variable, for every device
  std::map<uint64_t, const Variable*> by_shadow;        // shadow address -> variable
  std::map<std::pair<const Variable*, int>, ManagedBinding> bound;  // (variable, guest device)
};
Tables& tables() {
  static auto* t = new Tables;  // never destroyed: used from atexit handlers
  return *t;
}

std::vector<const Variable*> managed_of(const vgpu_db::Module& m) {
  std::vector<const Variable*> out;
  vgpu_db::ModuleRegistry::process().with_module(&m, [&](const vgpu_db::Module& mod) {
    for (const auto& v : mod.variables)
      if (v->kind == Variable::kManaged) out.push_back(v.get());
  });
  return out;
}

}  // namespace

cudaError_t bind_managed(Remote& r, const vgpu_db::Module& m, uint64_t module) {
  const int device = Remote::thread_device();
  auto& t = tables();
  for (const Variable* v : managed_of(m)) {
    std::optional<vmrpc::HeapBlock> shadow;
    {
      std::lock_guard l(t.mu);
      if (t.bound.contains({v, device})) continue;
      if (auto it = t.shadows.find(v); it != t.shadows.end()) shadow = it->second;
    }
    const bool fresh = !shadow;
    if (fresh) {
      if (v->size == 0) return cudaErrorInvalidSymbol;
      shadow = r.slot().heap().allocate(v->size);
      if (!shadow) {
        VMCUDA_LOG(kWarn, "managed", "__managed__ %s (%zu bytes): the shared heap is full; give the VM a larger region "
                                     "(vmcuda-stub --region-bytes)", v->name.c_str(), v->size);
        return cudaErrorMemoryAllocation;
      }
    }
    // A first binding fills the shadow with the variable's initial value; on another
    // device the shadow keeps what the host code made of it.
    auto res = r.call<api::Call::ManagedVarBind>(
        {module, shadow->ref(), static_cast<uint32_t>(v->name.size()), fresh ? 0u : api::kManagedBindKeep},
        std::as_bytes(std::span(v->name)));
    // Bound even when the status is an earlier queued call's error (reply.var says so):
    // the host may write the shadow from now on.
    if (res.reply.var == 0) {
      if (fresh) r.slot().heap().free(shadow->offset);
      if (res.status == cudaSuccess) return cudaErrorUnknown;
      return res.status == 500 ? cudaErrorInvalidSymbol : static_cast<cudaError_t>(res.status);
    }
    const ManagedBinding b{res.reply.var, res.reply.ptr, res.reply.bytes};
    // Symbol copies go to the variable's device storage (checked like a module global's).
    vgpu_db::AllocationMap::process().add({b.ptr, b.bytes, vgpu_db::Allocation::kModuleGlobal, device, 0});
    {
      std::lock_guard l(t.mu);
      if (fresh) {
        t.shadows[v] = *shadow;
        t.by_shadow[reinterpret_cast<uint64_t>(shadow->data)] = v;
      }
      t.bound[{v, device}] = b;
    }
    *v->managed_slot() = shadow->data;
    VMCUDA_LOG(kDebug, "managed", "__managed__ %s (%zu bytes): shadow %p, device %d", v->name.c_str(), v->size,
               static_cast<void*>(shadow->data), device);
    if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  }
  return cudaSuccess;
}

cudaError_t init_managed(const vgpu_db::Module& m) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return e;
  auto lock = r->lock();
  uint64_t module = 0;
  if (cudaError_t le = load_module(*r, m, &module)) return le;  // binds on its first load
  return bind_managed(*r, m, module);                          // what an earlier failure left
}

const Variable* find_managed(const void* symbol) noexcept {
  auto& t = tables();
  std::lock_guard l(t.mu);
  auto it = t.by_shadow.find(reinterpret_cast<uint64_t>(symbol));
  return it == t.by_shadow.end() ? nullptr : it->second;
}

cudaError_t managed_binding(Remote& r, const Variable& v, ManagedBinding* out) {
  const auto key = std::make_pair(&v, Remote::thread_device());
  auto& t = tables();
  auto find = [&] {
    std::lock_guard l(t.mu);
    auto it = t.bound.find(key);
    return it == t.bound.end() ? false : (*out = it->second, true);
  };
  if (find()) return cudaSuccess;
  uint64_t module = 0;
  if (cudaError_t e = load_module(r, *v.module, &module)) return e;
  if (cudaError_t e = bind_managed(r, *v.module, module)) return e;
  return find() ? cudaSuccess : cudaErrorInvalidSymbol;
}

cudaError_t sync_managed(uint64_t var, uint64_t stream, bool pull) {
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return e;
  auto lock = r->lock();
  if (!pull) return r->enqueue<api::Call::ManagedVarSync>({var, stream, 0, 0});
  return static_cast<cudaError_t>(r->call<api::Call::ManagedVarSync>({var, stream, api::kManagedPull, 0}).status);
}

void forget_managed(const vgpu_db::Module* m) noexcept {
  auto& t = tables();
  std::lock_guard l(t.mu);
  for (auto it = t.bound.begin(); it != t.bound.end();) {
    if (it->first.first->module == m) {
      vgpu_db::AllocationMap::process().remove(it->second.ptr, vgpu_db::Allocation::kModuleGlobal);
      it = t.bound.erase(it);
    } else {
      ++it;
    }
  }
  // The shadows stay allocated (the host may write them until the slot closes); a module
  // registered again gets new ones.
  std::erase_if(t.by_shadow, [m](const auto& kv) { return kv.second->module == m; });
  std::erase_if(t.shadows, [m](const auto& kv) { return kv.first->module == m; });
}

}  // namespace vmcuda::guest
