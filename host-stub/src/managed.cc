// __managed__ variables (calls.def, 0x1320). A managed variable lives in its module
// (cuModuleGetGlobal gives its address, managed memory of this process), but the guest's
// CPU cannot reach this process's memory: the guest's host code reads and writes a shadow,
// a block of the shared heap, instead. This file keeps the two coherent at CUDA's sync
// points (docs/cuda-runtime-internals.md §1):
//  - push, before each launch (a kernel's, or a graph's: its kernels read the variables as a
//    launch's do; a launch captured into a graph pushes nothing) on the launch's stream: the bytes of the shadow that differ
//    from `last` (the shadow as it was when last made equal to the variable) are what the
//    guest wrote since; only those go to the variable, so that what kernels wrote to other
//    bytes, not pulled yet, is kept (k1 and k2 each increment, one sync: 2);
//  - pull, after each synchronizing call that succeeded (device, stream and event
//    synchronize, successful queries, synchronous copies to the host) and after a symbol
//    copy: push, then the variable's value into the shadow and `last`.
// A pull waits for nothing else (its own non-blocking stream) and happens only while the
// device had work since its last cudaDeviceSynchronize. Clients without managed variables
// pay one test of an empty vector per hook.
#include <cstring>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::on_ManagedVarBind(const api::ManagedBindArgs& a, api::ManagedBindReply& r, Request& req) {
  const Object* mod = find_module_here(a.module);
  if (!mod) return CUDA_ERROR_INVALID_HANDLE;
  if (a.name_bytes == 0 || a.name_bytes > limits_.max_name_bytes || a.name_bytes != req.tail.size())
    return guest_fault("ManagedVarBind: a variable name of the wrong length");
  const std::string name(reinterpret_cast<const char*>(req.tail.data()), req.tail.size());
  if (name.find('\0') != std::string::npos) return guest_fault("ManagedVarBind: a variable name with a NUL byte");
  if (a.flags & ~(api::kManagedBindKeep | api::kManagedBindOnlyManaged)) return guest_fault("ManagedVarBind: unknown flags");
  auto shadow = req.ctx.heap(a.shadow);
  if (!shadow) return guest_fault("ManagedVarBind: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  if (CUresult e = api_.cuModuleGetGlobal_v2(&ptr, &bytes, mod->as<ModuleObject>().module, name.c_str()); e != CUDA_SUCCESS) return e;
  // A library's managed variable (cuLibraryGetManaged) is one the driver made managed memory;
  // a __device__ variable of the same module is no managed variable.
  if (a.flags & api::kManagedBindOnlyManaged) {
    unsigned int managed = 0;
    if (api_.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr) != CUDA_SUCCESS || !managed)
      return CUDA_ERROR_NOT_FOUND;
  }
  // The shadow is the variable as the guest's code sees it: exactly its size.
  if (bytes == 0 || bytes != shadow->size()) return CUDA_ERROR_INVALID_VALUE;
  // `last` is the variable's initial value: into the shadow too (a first binding), or the
  // shadow's bytes that differ from it go to the variable at the next launch (kManagedBindKeep).
  std::vector<std::byte> value(bytes);
  if (CUresult e = api_.cuMemcpyDtoH_v2(value.data(), ptr, bytes); e != CUDA_SUCCESS) return e;
  if (!(a.flags & api::kManagedBindKeep)) std::memcpy(shadow->data(), value.data(), bytes);
  // Bound again (the guest registered the module anew): the same entry, the new shadow.
  Object* var = nullptr;
  for (ObjectId c : mod->children) {
    Object* o = vol_.get(c);
    if (o->kind == ObjectKind::ManagedVar && o->as<ManagedVarObject>().name == name) var = o;
  }
  if (!var)
    var = &vol_.add(ObjectKind::ManagedVar, current_, vol_.next_handle(ObjectKind::ManagedVar), mod->id,
                    ManagedVarObject{ptr, a.shadow, {}, name});
  ManagedVarObject& v = var->as<ManagedVarObject>();
  v.shadow = a.shadow;
  v.last = std::move(value);
  // Symbol copies name the variable's own bytes (ModuleGetGlobal's rule: never freed here).
  if (!vol_.find(ObjectKind::Global, ptr)) vol_.add(ObjectKind::Global, current_, ptr, mod->id, GlobalObject{bytes, name});
  managed_dirty_.resize(devices_.size(), 0);
  managed_streams_.resize(devices_.size(), nullptr);
  r.var = var->handle;
  r.ptr = ptr;
  r.bytes = bytes;
  return CUDA_SUCCESS;
}

int32_t Session::on_ManagedVarSync(const api::ManagedSyncArgs& a, api::Empty&, Request& req) {
  Object* var = vol_.find(ObjectKind::ManagedVar, a.var);
  if (!var) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~api::kManagedPull) return guest_fault("ManagedVarSync: unknown flags");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  ManagedVarObject& v = var->as<ManagedVarObject>();
  if (device != var->device) return CUDA_ERROR_INVALID_HANDLE;
  // A symbol copy to or from the variable follows on `s`: the device's copy may change.
  managed_dirty_[device] = 1;
  return on_device(device, [&] {
    return (a.flags & api::kManagedPull) ? managed_pull(req.ctx, v, s) : managed_push(req.ctx, v, s);
  });
}

CUresult Session::managed_before_launch(const vmrpc::CallContext& ctx, int device, CUstream stream) {
  if (vol_.count(ObjectKind::ManagedVar) == 0) return CUDA_SUCCESS;
  if (captures_open_ && capturing(stream)) return CUDA_SUCCESS;
  managed_dirty_[device] = 1;
  for (const auto& [handle, id] : vol_.of(ObjectKind::ManagedVar)) {
    Object* o = vol_.get(id);
    if (o->device == device)
      if (CUresult e = managed_push(ctx, o->as<ManagedVarObject>(), stream); e != CUDA_SUCCESS) return e;
  }
  return CUDA_SUCCESS;
}

CUresult Session::managed_after_sync(const vmrpc::CallContext& ctx, int device, CUresult r, bool all) {
  if (vol_.count(ObjectKind::ManagedVar) == 0 || r != CUDA_SUCCESS) return r;
  if (device < 0 || static_cast<size_t>(device) >= managed_dirty_.size() || !managed_dirty_[device]) return r;
  const CUresult e = on_device(device, [&] {
    CUstream& s = managed_streams_[device];
    // Its own stream, so that the pull waits for no other work (a query stays a query);
    // the legacy stream if there cannot be one.
    if (!s && api_.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) s = nullptr;
    for (const auto& [handle, id] : vol_.of(ObjectKind::ManagedVar)) {
      Object* o = vol_.get(id);
      if (o->device == device)
        if (CUresult pe = managed_pull(ctx, o->as<ManagedVarObject>(), s); pe != CUDA_SUCCESS) return pe;
    }
    return CUDA_SUCCESS;
  });
  // After cudaDeviceSynchronize nothing runs that could change a variable until the next launch.
  if (e == CUDA_SUCCESS && all) managed_dirty_[device] = 0;
  return e;
}

// Precondition: v.device's context current.
CUresult Session::managed_push(const vmrpc::CallContext& ctx, ManagedVarObject& v, CUstream stream) {
  auto shadow = ctx.heap(v.shadow);  // checked at the bind; the heap does not move
  if (!shadow || shadow->size() != v.last.size()) return CUDA_ERROR_INVALID_VALUE;
  const std::byte* sh = shadow->data();
  std::byte* last = v.last.data();
  const size_t n = v.last.size();
  if (std::memcmp(sh, last, n) == 0) return CUDA_SUCCESS;
  for (size_t i = 0; i < n;) {
    if (sh[i] == last[i]) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < n && sh[j] != last[j]) ++j;
    // Into `last` first (the guest may write on): what goes to the device is what `last`
    // says it has. From pageable memory the driver stages the bytes before it returns.
    std::memcpy(last + i, sh + i, j - i);
    if (CUresult e = api_.cuMemcpyHtoDAsync_v2(v.ptr + i, last + i, j - i, stream); e != CUDA_SUCCESS) return e;
    i = j;
  }
  return CUDA_SUCCESS;
}

// Precondition: v.device's context current. The guest's writes first, then the variable's
// value, ordered on `stream` after what the stream holds.
CUresult Session::managed_pull(const vmrpc::CallContext& ctx, ManagedVarObject& v, CUstream stream) {
  if (CUresult e = managed_push(ctx, v, stream); e != CUDA_SUCCESS) return e;
  auto shadow = ctx.heap(v.shadow);
  if (!shadow || shadow->size() != v.last.size()) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::byte> value(v.last.size());
  CUresult e = api_.cuMemcpyDtoHAsync_v2(value.data(), v.ptr, value.size(), stream);
  if (e == CUDA_SUCCESS) e = api_.cuStreamSynchronize(stream);
  if (e != CUDA_SUCCESS) return e;
  v.last = value;
  std::memcpy(shadow->data(), value.data(), value.size());
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
