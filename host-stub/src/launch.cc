// Kernel launches (calls.def, 0x1400): parameters arrive packed at the offsets the host
// reported for the kernel; each is checked to lie inside the packed bytes.
#include <vector>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::on_LaunchKernel(const api::LaunchArgs& a, api::Empty&, Request& req) {
  const Object* fo = find_function(a.function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  if (a.arg_bytes != req.tail.size()) return static_cast<int32_t>(ChannelStatus::kBadArguments);
  CUstream stream;
  int stream_device;
  if (CUresult e = resolve_stream(a.stream, &stream, &stream_device); e != CUDA_SUCCESS) return e;
  // "A kernel launch will fail if it is issued to a stream that is not associated to the
  // current device" (cudaErrorInvalidResourceHandle).
  if (stream_device != current_) return CUDA_ERROR_INVALID_HANDLE;
  const FunctionObject& f = fo->as<FunctionObject>();
  if (fo->device != current_) return 98;  // cudaErrorInvalidDeviceFunction: loaded for another device
  // Reused: launches are the hot path (no allocation per launch).
  thread_local std::vector<void*> params;
  params.resize(f.params.size());
  // `tail` is the decoder's private copy: stable for the launch.
  auto* base = const_cast<std::byte*>(req.tail.data());
  for (size_t i = 0; i < f.params.size(); ++i) {
    const auto& p = f.params[i];
    if (uint64_t{p.offset} + p.size > a.arg_bytes) return static_cast<int32_t>(ChannelStatus::kBadArguments);
    params[i] = base + p.offset;
  }
  if (CUresult e = managed_before_launch(req.ctx, stream); e != CUDA_SUCCESS) return e;
  output_possible_ = true;
  return api_.cuLaunchKernel(f.fn, a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2],
                             a.shared_bytes, stream, params.data(), nullptr);
}

}  // namespace vmcuda::host
