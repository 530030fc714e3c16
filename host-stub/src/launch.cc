// Kernel launches (calls.def, 0x1400): parameters arrive packed at the offsets the host
// reported for the kernel; each is checked to lie inside the packed bytes.
#include <vector>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::on_LaunchKernel(const api::LaunchArgs& a, api::Empty&, Request& req) {
  if (a.function == 0 || a.function > functions_.size()) return CUDA_ERROR_INVALID_HANDLE;
  if (a.arg_bytes != req.tail.size()) return static_cast<int32_t>(ChannelStatus::kBadArguments);
  if (a.stream != 0) return CUDA_ERROR_INVALID_HANDLE;  // streams come with the stream area
  const Function& f = functions_[a.function - 1];
  if (f.device != current_) return 98;  // cudaErrorInvalidDeviceFunction: loaded for another device
  std::vector<void*> params(f.params.size());
  // `tail` is the decoder's private copy: stable for the launch.
  auto* base = const_cast<std::byte*>(req.tail.data());
  for (size_t i = 0; i < f.params.size(); ++i) {
    const auto& p = f.params[i];
    if (uint64_t{p.offset} + p.size > a.arg_bytes) return static_cast<int32_t>(ChannelStatus::kBadArguments);
    params[i] = base + p.offset;
  }
  return api_.cuLaunchKernel(f.fn, a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2],
                             a.shared_bytes, nullptr, params.data(), nullptr);
}

}  // namespace vmcuda::host
