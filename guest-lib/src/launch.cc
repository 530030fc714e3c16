// launch area: the <<<>>> configuration and kernel launches.
//
// nvcc lowers `k<<<g, b, s, st>>>(args)` to
//   __cudaPushCallConfiguration(g, b, s, st) ? (void)0 : k(args);
// and k's host stub pops the configuration and launches (docs/cuda-runtime-internals.md §1).
// The arguments are evaluated between the push and the pop and may launch kernels
// themselves, so the configurations form a stack, one per thread.
#include <cstring>
#include <map>
#include <span>
#include <vector>

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
// accept either). The first launch of a kernel on a device ships its module's fatbin
// once and learns the kernel's parameter layout from the host (cuFuncGetParamInfo);
// every launch then packs the arguments by that layout into one queued frame.

namespace {

using vmcuda::guest::Remote;
using vmcuda::guest::record;
namespace api = vmcuda::api;

struct HostKernel {
  uint64_t handle = 0;
  std::vector<api::ParamInfo> params;
  uint32_t arg_bytes = 0;  // end of the last parameter
};

// Host handles per (module or kernel, device). Guarded by the Remote's lock.
std::map<std::pair<const vgpu_db::Module*, int>, uint64_t>& host_modules() {
  static auto* m = new std::map<std::pair<const vgpu_db::Module*, int>, uint64_t>;
  return *m;
}
std::map<std::pair<const vgpu_db::Function*, int>, HostKernel>& host_kernels() {
  static auto* m = new std::map<std::pair<const vgpu_db::Function*, int>, HostKernel>;
  return *m;
}

// Precondition: r's lock held.
cudaError_t load_module(Remote& r, const vgpu_db::Module& m, uint64_t* handle) {
  const int dev = Remote::thread_device();
  auto key = std::make_pair(&m, dev);
  if (auto it = host_modules().find(key); it != host_modules().end()) return *handle = it->second, cudaSuccess;
  if (!m.valid) {
    VMCUDA_LOG(kWarn, "launch", "module %llu cannot be loaded: %s", static_cast<unsigned long long>(m.id),
               m.problem.c_str());
    return cudaErrorInvalidKernelImage;
  }
  const auto& fb = m.image.fatbin;
  auto block = r.slot().heap().allocate(fb.size);
  if (!block) return cudaErrorMemoryAllocation;
  std::memcpy(block->data, fb.data, fb.size);
  auto res = r.call<api::Call::ModuleLoad>({block->ref()});
  r.slot().heap().free(block->offset);
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  host_modules()[key] = res.reply.handle;
  *handle = res.reply.handle;
  return cudaSuccess;
}

// Precondition: r's lock held.
cudaError_t host_kernel(Remote& r, const vgpu_db::Function& f, const HostKernel** out) {
  const int dev = Remote::thread_device();
  auto key = std::make_pair(&f, dev);
  auto& cache = host_kernels();
  if (auto it = cache.find(key); it != cache.end()) return *out = &it->second, cudaSuccess;
  uint64_t module = 0;
  if (cudaError_t e = load_module(r, *f.module, &module)) return e;
  auto res = r.call<api::Call::ModuleGetFunction>({module, static_cast<uint32_t>(f.name.size()), 0},
                                                 std::as_bytes(std::span(f.name)),
                                                 api::kMaxKernelParams * sizeof(api::ParamInfo));
  if (res.status != cudaSuccess)
    return res.status == 500 ? cudaErrorInvalidDeviceFunction : static_cast<cudaError_t>(res.status);
  HostKernel k;
  k.handle = res.reply.function;
  k.params.resize(std::min<size_t>(res.reply.param_count, res.extra.size() / sizeof(api::ParamInfo)));
  std::memcpy(k.params.data(), res.extra.data(), k.params.size() * sizeof(api::ParamInfo));
  for (const auto& p : k.params) k.arg_bytes = std::max(k.arg_bytes, p.offset + p.size);
  *out = &(cache[key] = std::move(k));
  return cudaSuccess;
}

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
  auto& registry = vgpu_db::ModuleRegistry::process();
  const vgpu_db::Function* f = registry.find_function(func);
  if (!f) f = registry.function_from_kernel(func);
  if (!f) return record(cudaErrorInvalidDeviceFunction);
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  if (cudaError_t c = check_configuration(*r, grid, block)) return record(c);
  auto lock = r->lock();
  const HostKernel* k = nullptr;
  if (cudaError_t ke = host_kernel(*r, *f, &k)) return record(ke);
  if (!k->params.empty() && !args) return record(cudaErrorInvalidValue);
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
