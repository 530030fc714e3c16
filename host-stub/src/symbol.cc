// Module variables (calls.def, 0x1310): a module's __device__ and __constant__ variables,
// found by name with cuModuleGetGlobal in a module this client loaded
// (docs/cuda-runtime-internals.md §1). Each one found joins the client's VOL as a global:
// copies and memsets may name its bytes (owns_range), Free may not (the driver frees it
// with its module), and suspend can re-fill it by name after reloading the module.
#include <string>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::on_ModuleGetGlobal(const api::GetGlobalArgs& a, api::GlobalReply& r, Request& req) {
  const Object* mod = find_module_here(a.module);
  if (!mod) return CUDA_ERROR_INVALID_HANDLE;
  if (a.name_bytes == 0 || a.name_bytes > limits_.max_name_bytes || a.name_bytes != req.tail.size())
    return guest_fault("ModuleGetGlobal: a variable name of the wrong length");
  const std::string name(reinterpret_cast<const char*>(req.tail.data()), req.tail.size());
  if (name.find('\0') != std::string::npos) return guest_fault("ModuleGetGlobal: a variable name with a NUL byte");
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  if (CUresult e = api_.cuModuleGetGlobal_v2(&ptr, &bytes, mod->as<ModuleObject>().module, name.c_str()); e != CUDA_SUCCESS) return e;
  // Asked again (another thread's first use, or a guest that forgot): the same entry.
  if (!vol_.find(ObjectKind::Global, ptr)) vol_.add(ObjectKind::Global, current_, ptr, mod->id, GlobalObject{bytes, name});
  r.ptr = ptr;
  r.bytes = bytes;
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
