// launch area: the <<<>>> configuration and kernel launches.
//
// nvcc lowers `k<<<g, b, s, st>>>(args)` to
//   __cudaPushCallConfiguration(g, b, s, st) ? (void)0 : k(args);
// and k's host stub pops the configuration and launches (docs/cuda-runtime-internals.md §1).
// The arguments are evaluated between the push and the pop and may launch kernels
// themselves, so the configurations form a stack, one per thread.
#include <vector>

#include "log.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_mem;
  cudaStream_t stream;
};

std::vector<LaunchConfig>& config_stack() {
  thread_local std::vector<LaunchConfig> stack;
  return stack;
}

}  // namespace

// Returns 0 (the kernel's host stub then runs). Nothing is checked here: the launch
// validates the configuration, as NVIDIA's does.
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st* stream) {
  VMCUDA_LOG(kDebug, "launch", "push grid %u,%u,%u block %u,%u,%u shared %zu stream %p", gridDim.x, gridDim.y,
             gridDim.z, blockDim.x, blockDim.y, blockDim.z, sharedMem, static_cast<void*>(stream));
  try {
    config_stack().push_back(LaunchConfig{gridDim, blockDim, sharedMem, stream});
  } catch (...) {  // out of memory: skip the launch, as a failed push does
    return vmcuda::guest::record(cudaErrorMemoryAllocation);
  }
  return 0;
}

// `stream` is a cudaStream_t*.
cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, void* stream) {
  auto& stack = config_stack();
  if (stack.empty()) return vmcuda::guest::record(cudaErrorMissingConfiguration);
  LaunchConfig c = stack.back();
  stack.pop_back();
  if (gridDim != nullptr) *gridDim = c.grid;
  if (blockDim != nullptr) *blockDim = c.block;
  if (sharedMem != nullptr) *sharedMem = c.shared_mem;
  if (stream != nullptr) *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

// TODO(remoting): cudaLaunchKernel and __cudaLaunchKernel (which NVIDIA's library makes a
// jump to cudaLaunchKernel, so it takes a host stub or a cudaKernel_t: resolve either with
// vgpu_db::ModuleRegistry::function_from_kernel, then find_function), validating the
// configuration locally and queueing the launch. Until then both are generated stubs.
