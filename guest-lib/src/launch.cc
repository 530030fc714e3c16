// launch area: the <<<>>> configuration and kernel launches.
//
// nvcc lowers `k<<<g, b, s, st>>>(args)` to
//   __cudaPushCallConfiguration(g, b, s, st) ? (void)0 : k(args);
// and k's host stub pops the configuration and launches (docs/cuda-runtime-internals.md §1).
// The arguments are evaluated between the push and the pop and may launch kernels
// themselves, so the configurations form a stack, one per thread.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "host_objects.h"
#include "log.h"
#include "remote.h"
#include "stream_event.h"
#include "vgpu_db/module_registry.h"
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

// ------------------------------------------------------------------ launches
//
// A launch names a kernel by its host stub (cudaLaunchKernel, <<<>>>) or its cudaKernel_t
// (__cudaLaunchKernel, which NVIDIA's library makes a jump to cudaLaunchKernel, so both
// accept either). The first use of a kernel on a device ships its module's fatbin once
// and learns the kernel's parameter layout from the host (cuFuncGetParamInfo;
// host_objects.h); every launch then packs the arguments by that layout into one queued
// frame.

namespace {

using vmcuda::guest::HostKernel;
using vmcuda::guest::Remote;
using vmcuda::guest::record;
namespace api = vmcuda::api;

// The launch configuration errors CUDA reports at once (docs §7 rule 1): no round trip.
// Codes as NVIDIA's 13.0 runtime gives them on an H200 (tests/cuda/vector_add.cu prints
// them natively and through vmcuda): every refused configuration is cudaErrorInvalidValue.
cudaError_t check_configuration(const Remote& r, dim3 grid, dim3 block) {
  const auto& devs = r.devices();
  const int dev = Remote::thread_device();
  if (dev < 0 || static_cast<size_t>(dev) >= devs.size()) return cudaErrorInvalidDevice;
  const int32_t* a = devs[dev].attributes;
  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1, MAX_BLOCK_DIM_X..Z = 2..4, MAX_GRID_DIM_X..Z = 5..7
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return cudaErrorInvalidValue;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (a[1] > 0 && threads > static_cast<uint64_t>(a[1])) return cudaErrorInvalidValue;
  if ((a[2] > 0 && block.x > static_cast<unsigned>(a[2])) || (a[3] > 0 && block.y > static_cast<unsigned>(a[3])) ||
      (a[4] > 0 && block.z > static_cast<unsigned>(a[4])))
    return cudaErrorInvalidValue;
  if ((a[5] > 0 && grid.x > static_cast<unsigned>(a[5])) || (a[6] > 0 && grid.y > static_cast<unsigned>(a[6])) ||
      (a[7] > 0 && grid.z > static_cast<unsigned>(a[7])))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t launch(const void* func, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t stream,
                   bool per_thread) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  uint64_t wire_stream = 0;
  if (cudaError_t se = vmcuda::guest::stream_wire_handle(stream, per_thread, &wire_stream)) return record(se);
  const vgpu_db::Function* f = vmcuda::guest::find_kernel(func);
  if (!f) return record(cudaErrorInvalidDeviceFunction);
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  if (cudaError_t c = check_configuration(*r, grid, block)) return record(c);
  auto lock = r->lock();
  HostKernel* k = nullptr;
  if (cudaError_t ke = vmcuda::guest::host_kernel(*r, *f, &k)) return record(ke);
  if (!k->params.empty() && !args) return record(cudaErrorInvalidValue);
  // More dynamic shared memory than the kernel allows (cudaFuncAttributeMaxDynamicSharedMemorySize)
  // is refused at the launch natively, not at the next synchronize: check it here against the
  // kernel's attributes, asked once per kernel and only by launches that use dynamic shared memory.
  if (shared > 0) {
    if (!k->attributes) {
      auto res = r->call<api::Call::FuncGetAttributes>({k->handle});
      if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
      k->attributes = res.reply;
    }
    constexpr int kMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if (shared > static_cast<uint64_t>(std::max(0, k->attributes->values[kMaxDynamicSharedSizeBytes])))
      return record(cudaErrorInvalidValue);
  }
  thread_local std::vector<std::byte> packed;
  packed.assign(k->arg_bytes, std::byte{0});
  for (size_t i = 0; i < k->params.size(); ++i)
    std::memcpy(packed.data() + k->params[i].offset, args[i], k->params[i].size);
  api::LaunchArgs la{k->handle, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z},
                     static_cast<uint32_t>(shared), k->arg_bytes, wire_stream};
  // Queued: the kernel's own errors come with the next synchronizing call, as in CUDA.
  return record(r->enqueue<api::Call::LaunchKernel>(la, packed));
}

}  // namespace

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                             cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream, false);
}
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                  cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream, true);
}
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                               cudaStream_t stream) {
  return launch(kernel, gridDim, blockDim, args, sharedMem, stream, false);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                                    size_t sharedMem, cudaStream_t stream) {
  return launch(kernel, gridDim, blockDim, args, sharedMem, stream, true);
}
