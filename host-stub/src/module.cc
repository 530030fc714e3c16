// Module calls (calls.def, 0x1300): fatbins shipped once, kernels and their parameter
// layouts (cuFuncGetParamInfo, once per kernel; docs/cuda-runtime-internals.md §3).
#include <cstring>
#include <vector>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::on_ModuleLoad(const api::ModuleLoadArgs& a, api::HandleReply& r, Request& req) {
  auto image = req.ctx.heap(a.image);
  if (!image) return static_cast<int32_t>(ChannelStatus::kBadHeapRef);
  if (image->empty() || image->size() > limits_.max_module_bytes) return CUDA_ERROR_INVALID_VALUE;
  // The driver parses the image: give it a private copy the guest cannot change meanwhile.
  std::vector<std::byte> copy(image->begin(), image->end());
  CUmodule m = nullptr;
  if (CUresult e = api_.cuModuleLoadData(&m, copy.data()); e != CUDA_SUCCESS) return e;
  modules_.push_back({m, current_});
  r.handle = modules_.size();
  return CUDA_SUCCESS;
}

int32_t Session::on_ModuleGetFunction(const api::GetFunctionArgs& a, api::GetFunctionReply& r, Request& req) {
  if (a.module == 0 || a.module > modules_.size() || !modules_[a.module - 1].module) return CUDA_ERROR_INVALID_HANDLE;
  const Module& mod = modules_[a.module - 1];
  if (mod.device != current_) return CUDA_ERROR_INVALID_HANDLE;
  if (a.name_bytes == 0 || a.name_bytes > limits_.max_name_bytes || a.name_bytes != req.tail.size())
    return static_cast<int32_t>(ChannelStatus::kBadArguments);
  const std::string name(reinterpret_cast<const char*>(req.tail.data()), req.tail.size());
  if (name.find('\0') != std::string::npos) return static_cast<int32_t>(ChannelStatus::kBadArguments);
  Function f{nullptr, current_, {}};
  if (CUresult e = api_.cuModuleGetFunction(&f.fn, mod.module, name.c_str()); e != CUDA_SUCCESS)
    return e;
  // There is no count API: ask until the driver says there is no such parameter.
  for (size_t i = 0; i < api::kMaxKernelParams; ++i) {
    size_t off = 0, size = 0;
    if (api_.cuFuncGetParamInfo(f.fn, i, &off, &size) != CUDA_SUCCESS) break;
    f.params.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
  }
  const size_t bytes = f.params.size() * sizeof(api::ParamInfo);
  if (bytes > req.extra.size()) return static_cast<int32_t>(ChannelStatus::kReplyTooSmall);
  if (bytes) std::memcpy(req.extra.data(), f.params.data(), bytes);
  req.extra_bytes = static_cast<uint32_t>(bytes);
  r.param_count = static_cast<uint32_t>(f.params.size());
  functions_.push_back(std::move(f));
  r.function = functions_.size();
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
