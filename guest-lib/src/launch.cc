// launch area: the <<<>>> configuration and kernel launches (cudaLaunchKernel,
// cudaLaunchCooperativeKernel, cudaLaunchKernelExC with launch attributes), all queued.
//
// nvcc lowers `k<<<g, b, s, st>>>(args)` to
//   __cudaPushCallConfiguration(g, b, s, st) ? (void)0 : k(args);
// and k's host stub pops the configuration and launches (docs/cuda-runtime-internals.md §1).
// The arguments are evaluated between the push and the pop and may launch kernels
// themselves, so the configurations form a stack, one per thread.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <span>
#include <vector>

#include "graph.h"
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
}  // namespace

cudaError_t vmcuda::guest::check_launch_configuration(const Remote& r, dim3 grid, dim3 block) {
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

namespace {

using vmcuda::guest::check_launch_configuration;

// How a launch reaches the host: LaunchKernel, LaunchCooperativeKernel, or LaunchKernelEx
// with its attributes (already translated and checked by cudaLaunchKernelExC).
struct LaunchOptions {
  bool cooperative = false;
  bool ex = false;
  std::span<const api::LaunchAttribute> attributes;
};

// The most blocks a cooperative grid of `k` may have: every block co-resident, the
// occupancy calculator's blocks per multiprocessor times the multiprocessors, as the driver
// counts them (cuLaunchCooperativeKernel: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE). The
// occupancy is asked once per block size and dynamic shared memory (kept with the kernel,
// as cudaOccupancyMaxActiveBlocksPerMultiprocessor's answers are). Precondition: r locked.
cudaError_t max_cooperative_blocks(Remote& r, HostKernel& k, uint64_t threads, size_t shared, uint64_t* out) {
  const auto& devs = r.devices();
  const int dev = Remote::thread_device();
  if (dev < 0 || static_cast<size_t>(dev) >= devs.size()) return cudaErrorInvalidDevice;
  constexpr int kMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  const int sms = devs[dev].attributes[kMultiprocessorCount];
  if (sms <= 0) return *out = UINT64_MAX, cudaSuccess;  // not known here: the host's driver decides
  const auto key = std::make_tuple(static_cast<int>(threads), uint64_t{shared}, 0u);
  auto it = k.occupancy.find(key);
  if (it == k.occupancy.end()) {
    auto res = r.call<api::Call::OccupancyMaxActiveBlocks>({k.handle, static_cast<int32_t>(threads), 0u, shared});
    if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
    it = k.occupancy.emplace(key, res.reply.blocks).first;
  }
  *out = static_cast<uint64_t>(std::max(0, it->second)) * static_cast<uint64_t>(sms);
  return cudaSuccess;
}

cudaError_t launch(const void* func, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t stream,
                   bool per_thread, const LaunchOptions& opt = {}) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  uint64_t wire_stream = 0;
  if (cudaError_t se = vmcuda::guest::stream_wire_handle(stream, per_thread, &wire_stream)) return record(se);
  const vgpu_db::Function* f = vmcuda::guest::find_kernel(func);
  HostKernel* k = nullptr;  // a registered kernel's, or the driver object's given
  if (!f)
    if (cudaError_t de = vmcuda::guest::driver_kernel(func, &k)) return record(de);
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  if (cudaError_t c = check_launch_configuration(*r, grid, block)) return record(c);
  auto lock = r->lock();
  if (!k)
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
  // A cooperative grid larger than can be co-resident is refused at the launch natively too
  // (the host's driver checks it again).
  if (opt.cooperative) {
    uint64_t most = 0;
    const uint64_t threads = uint64_t{block.x} * block.y * block.z;
    if (cudaError_t ce = max_cooperative_blocks(*r, *k, threads, shared, &most)) return record(ce);
    if (uint64_t{grid.x} * grid.y * grid.z > most) return record(cudaErrorCooperativeLaunchTooLarge);
  }
  // Reused: launches are the hot path. LaunchKernelEx's attributes come first.
  thread_local std::vector<std::byte> packed;
  const size_t attr_bytes = opt.ex ? opt.attributes.size_bytes() : 0;
  packed.assign(attr_bytes + k->arg_bytes, std::byte{0});
  if (attr_bytes) std::memcpy(packed.data(), opt.attributes.data(), attr_bytes);
  for (size_t i = 0; i < k->params.size(); ++i)
    std::memcpy(packed.data() + attr_bytes + k->params[i].offset, args[i], k->params[i].size);
  // Queued: the kernel's own errors come with the next synchronizing call, as in CUDA.
  if (opt.ex) {
    api::LaunchExArgs la{k->handle,
                         {grid.x, grid.y, grid.z},
                         {block.x, block.y, block.z},
                         static_cast<uint32_t>(shared),
                         k->arg_bytes,
                         wire_stream,
                         static_cast<uint32_t>(opt.attributes.size()),
                         0};
    return record(r->enqueue<api::Call::LaunchKernelEx>(la, packed));
  }
  api::LaunchArgs la{k->handle, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z},
                     static_cast<uint32_t>(shared), k->arg_bytes, wire_stream};
  if (opt.cooperative) return record(r->enqueue<api::Call::LaunchCooperativeKernel>(la, packed));
  return record(r->enqueue<api::Call::LaunchKernel>(la, packed));
}

cudaError_t launch_ex(const cudaLaunchConfig_t* config, const void* func, void** args, bool per_thread) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!config) return record(cudaErrorInvalidValue);
  thread_local std::vector<api::LaunchAttribute> attributes;
  LaunchOptions opt;
  opt.ex = true;
  if (cudaError_t e = vmcuda::guest::translate_attributes(*config, &attributes, &opt.cooperative)) return record(e);
  opt.attributes = attributes;
  return launch(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream, per_thread,
                opt);
}

}  // namespace

namespace vmcuda::guest {
// cudaLaunchKernelExC's attributes as the wire carries them (api::LaunchAttribute): the ones
// vmcuda forwards, checked as far as the guest can; cudaLaunchAttributeIgnore entries dropped.
// Attributes that name events or memory windows (programmatic and completion events, access
// policy windows, ...) are refused with cudaErrorNotSupported, each logged once by name;
// ids CUDA does not know are cudaErrorInvalidValue.
cudaError_t translate_attributes(const cudaLaunchConfig_t& config, std::vector<api::LaunchAttribute>* out,
                                 bool* cooperative) {
  out->clear();
  *cooperative = false;
  if (config.numAttrs > 0 && !config.attrs) return cudaErrorInvalidValue;
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    const cudaLaunchAttribute& a = config.attrs[i];
    // Read as the integers they are: an app may put any value in the enums.
    uint32_t id;
    std::memcpy(&id, &a.id, sizeof id);
    api::LaunchAttribute w{id, {0, 0, 0}, 0};
    switch (id) {
      case cudaLaunchAttributeIgnore:
        continue;
      case cudaLaunchAttributeCooperative:
        *cooperative = a.val.cooperative != 0;
        w.value[0] = *cooperative ? 1 : 0;
        break;
      case cudaLaunchAttributePriority:
        w.value[0] = static_cast<uint32_t>(a.val.priority);
        break;
      case cudaLaunchAttributeClusterDimension:
        w.value[0] = a.val.clusterDim.x;
        w.value[1] = a.val.clusterDim.y;
        w.value[2] = a.val.clusterDim.z;
        break;
      case cudaLaunchAttributeClusterSchedulingPolicyPreference:
        std::memcpy(&w.value[0], &a.val.clusterSchedulingPolicyPreference, sizeof w.value[0]);
        if (w.value[0] > cudaClusterSchedulingPolicyLoadBalancing) return cudaErrorInvalidValue;
        break;
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        w.value[0] = a.val.programmaticStreamSerializationAllowed != 0 ? 1 : 0;
        break;
#define VMCUDA_REFUSED(id)                                                                          \
  case id: {                                                                                        \
    static std::atomic<bool> logged{false};                                                         \
    if (!logged.exchange(true, std::memory_order_relaxed))                                          \
      VMCUDA_LOG(kWarn, "launch", "cudaLaunchKernelExC with " #id " is not supported yet; it returns " \
                                  "cudaErrorNotSupported (801)");                                   \
    return cudaErrorNotSupported;                                                                   \
  }
        VMCUDA_REFUSED(cudaLaunchAttributeAccessPolicyWindow)
        VMCUDA_REFUSED(cudaLaunchAttributeSynchronizationPolicy)
        VMCUDA_REFUSED(cudaLaunchAttributeProgrammaticEvent)
        VMCUDA_REFUSED(cudaLaunchAttributeMemSyncDomainMap)
        VMCUDA_REFUSED(cudaLaunchAttributeMemSyncDomain)
        VMCUDA_REFUSED(cudaLaunchAttributePreferredClusterDimension)
        VMCUDA_REFUSED(cudaLaunchAttributeLaunchCompletionEvent)
        VMCUDA_REFUSED(cudaLaunchAttributeDeviceUpdatableKernelNode)
        VMCUDA_REFUSED(cudaLaunchAttributePreferredSharedMemoryCarveout)
        VMCUDA_REFUSED(cudaLaunchAttributeNvlinkUtilCentricScheduling)
#undef VMCUDA_REFUSED
      default:
        return cudaErrorInvalidValue;
    }
    // Only repeats can pass the limit (CUDA has fewer ids): refused, as the host would.
    if (out->size() == api::kMaxLaunchAttributes) return cudaErrorInvalidValue;
    out->push_back(w);
  }
  return cudaSuccess;
}

}  // namespace vmcuda::guest

namespace vmcuda::guest {
// A graph kernel node's kernel that is a driver object (a CUfunction, CUkernel or
// cudaKernel_t), resolved before the client's lock is taken (a CUkernel's module may be
// loaded on the way); *k stays nullptr for a registered kernel's host stub.
cudaError_t graph_kernel_object(const void* func, HostKernel** k) {
  *k = nullptr;
  if (!func) return cudaErrorInvalidDeviceFunction;
  if (find_kernel(func)) return cudaSuccess;
  return driver_kernel(func, k);
}

// A graph's kernel node (graph.cc): the launch's checks and packing, nothing queued. `func`
// is a registered kernel's host stub, or `k` the driver object graph_kernel_object found;
// the arguments are `args` (a pointer per parameter) or `extra`'s packed buffer
// (CU_LAUNCH_PARAM_BUFFER_POINTER/_SIZE/_END), as cuLaunchKernel takes them.
cudaError_t pack_kernel(Remote& r, HostKernel* k, const void* func, dim3 grid, dim3 block, size_t shared, void** args,
                        void** extra, uint64_t* function, std::vector<std::byte>* packed) {
  const vgpu_db::Function* f = k ? nullptr : find_kernel(func);
  if (!k && !f) return cudaErrorInvalidDeviceFunction;
  if (cudaError_t c = check_launch_configuration(r, grid, block)) return c;
  if (!k)
    if (cudaError_t ke = host_kernel(r, *f, &k)) return ke;
  static void* const kEnd = nullptr;
  static void* const kBufferPointer = reinterpret_cast<void*>(1);
  static void* const kBufferSize = reinterpret_cast<void*>(2);
  const void* buffer = nullptr;
  size_t buffer_bytes = 0;
  bool have_size = false;
  for (void** e = extra; e && *e != kEnd; e += 2) {
    if (*e == kBufferPointer) buffer = e[1];
    else if (*e == kBufferSize) have_size = true, buffer_bytes = e[1] ? *static_cast<size_t*>(e[1]) : 0;
    else return cudaErrorInvalidValue;  // an option the driver does not know
  }
  if ((args && buffer) || (buffer && !have_size)) return cudaErrorInvalidValue;
  if (buffer && buffer_bytes > k->arg_bytes) return cudaErrorLaunchOutOfResources;  // as cuLaunchKernel
  if (!k->params.empty() && !args && !buffer) return cudaErrorInvalidValue;
  packed->assign(k->arg_bytes, std::byte{0});
  if (buffer) {
    std::memcpy(packed->data(), buffer, buffer_bytes);
  } else {
    for (size_t i = 0; i < k->params.size(); ++i) {
      if (!args[i]) return cudaErrorInvalidValue;
      std::memcpy(packed->data() + k->params[i].offset, args[i], k->params[i].size);
    }
  }
  (void)shared;  // the host's driver checks it against the kernel when the graph is instantiated
  *function = k->handle;
  return cudaSuccess;
}
}  // namespace vmcuda::guest

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

cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                        cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream, false, LaunchOptions{true, false, {}});
}
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                             size_t sharedMem, cudaStream_t stream) {
  return launch(func, gridDim, blockDim, args, sharedMem, stream, true, LaunchOptions{true, false, {}});
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  return launch_ex(config, func, args, false);
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func, void** args) {
  return launch_ex(config, func, args, true);
}
