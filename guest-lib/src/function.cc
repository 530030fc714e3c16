// Function attributes and occupancy: cudaFuncGetAttributes, cudaFuncSetAttribute,
// cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags]. The host answers with the
// driver's (cuFuncGetAttribute, cuOccupancyMaxActiveBlocksPerMultiprocessor) once per
// kernel and device, and once per (block size, dynamic shared memory, flags) for
// occupancy; the answers are kept with the kernel (host_objects.h), so later calls are
// local, as frameworks that ask before every launch need (docs/cuda-runtime-internals.md
// §7). cudaFuncSetAttribute is checked here as the driver checks it, then queued (lazy
// RPC); the kept answers follow the value set.
#include <span>

#include "host_objects.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

// CUfunction_attribute numbers (== cudaFuncAttribute's where both have them).
enum : int {
  kMaxThreadsPerBlock = 0,
  kSharedSizeBytes = 1,
  kConstSizeBytes = 2,
  kLocalSizeBytes = 3,
  kNumRegs = 4,
  kPtxVersion = 5,
  kBinaryVersion = 6,
  kCacheModeCa = 7,
  kMaxDynamicSharedSizeBytes = 8,
  kPreferredSharedMemoryCarveout = 9,
  kClusterSizeMustBeSet = 10,
  kRequiredClusterWidth = 11,
  kRequiredClusterHeight = 12,
  kRequiredClusterDepth = 13,
  kNonPortableClusterSizeAllowed = 14,
  kClusterSchedulingPolicyPreference = 15,
};
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN.
constexpr int kDeviceSharedOptin = 97;

// The kernel `func` names on the calling thread's device, with the Remote locked. A
// pointer that names no kernel is an invalid handle (cudaErrorInvalidResourceHandle), as
// NVIDIA's 13.0 runtime answers these calls (not cudaErrorInvalidDeviceFunction, which
// launches answer): tests/cuda/symbols_pitch.cu prints it natively and through vmcuda.
struct Kernel {
  Remote* remote = nullptr;
  std::unique_lock<std::mutex> lock;
  HostKernel* kernel = nullptr;
};
cudaError_t kernel_of(const void* func, Kernel* k) {
  const vgpu_db::Function* f = find_kernel(func);
  if (!f) {  // a driver object (a cudaKernel_t from cudaLibraryGetKernel), or nothing
    if (driver_kernel(func, &k->kernel) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  }
  cudaError_t e = cudaSuccess;
  k->remote = Remote::get(&e);
  if (!k->remote) return e;
  k->lock = k->remote->lock();
  return f ? host_kernel(*k->remote, *f, &k->kernel) : cudaSuccess;
}

cudaError_t occupancy(int* blocks, const void* func, int block_size, size_t shared, unsigned flags) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!blocks) return record(cudaErrorInvalidValue);
  Kernel k;
  if (cudaError_t e = kernel_of(func, &k)) return record(e);
  return record(kernel_occupancy(*k.remote, *k.kernel, block_size, shared, flags, blocks));
}

}  // namespace

cudaError_t kernel_attributes(Remote& r, HostKernel& k, const api::FuncAttributesReply** out) {
  if (!k.attributes) {
    auto res = r.call<api::Call::FuncGetAttributes>({k.handle});
    if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
    k.attributes = res.reply;
  }
  *out = &*k.attributes;
  return cudaSuccess;
}

cudaError_t set_kernel_attribute(Remote& r, HostKernel& k, int attr, int value) {
  if (attr < cudaFuncAttributeMaxDynamicSharedMemorySize || attr >= cudaFuncAttributeMax) return cudaErrorInvalidValue;
  // The values the driver refuses, refused here at once (the call is queued).
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    const api::FuncAttributesReply* a = nullptr;
    if (cudaError_t e = kernel_attributes(r, k, &a)) return e;
    const auto& devices = r.devices();
    const int dev = Remote::thread_device();
    const int optin =
        dev >= 0 && static_cast<size_t>(dev) < devices.size() ? devices[dev].attributes[kDeviceSharedOptin] : 0;
    // Up to the device's opt-in maximum less the kernel's static shared memory (cuda.h).
    if (value < 0 || (optin > 0 && value > optin - a->values[kSharedSizeBytes])) return cudaErrorInvalidValue;
  } else if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
    if (value < -1 || value > 100) return cudaErrorInvalidValue;  // percent, or -1: no preference
  }
  if (cudaError_t e = r.enqueue<api::Call::FuncSetAttribute>({k.handle, attr, value})) return e;
  // What the kernel now reports. The cluster attributes the driver may still refuse (the
  // error comes with the next synchronizing call): those are asked again.
  if (k.attributes && attr <= cudaFuncAttributePreferredSharedMemoryCarveout)
    k.attributes->values[attr] = value;
  else
    k.attributes.reset();
  k.occupancy.clear();
  return cudaSuccess;
}

cudaError_t kernel_available_shared(Remote& r, HostKernel& k, int blocks, int block_size, size_t* bytes) {
  auto res = r.call<api::Call::OccupancyAvailableSharedMemory>({k.handle, blocks, block_size});
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  *bytes = res.reply.bytes;
  return cudaSuccess;
}

namespace {
template <api::Call C>
cudaError_t cluster_query(Remote& r, HostKernel& k, dim3 grid, dim3 block, size_t shared,
                          const std::vector<api::LaunchAttribute>& attrs, int* out) {
  if (shared > UINT32_MAX) return cudaErrorInvalidValue;
  const api::LaunchExArgs a{k.handle, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z},
                            static_cast<uint32_t>(shared), 0, 0, static_cast<uint32_t>(attrs.size()), 0};
  auto res = r.call<C>(a, std::as_bytes(std::span(attrs.data(), attrs.size())));
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  *out = res.reply.blocks;
  return cudaSuccess;
}
}  // namespace

cudaError_t kernel_max_clusters(Remote& r, HostKernel& k, dim3 grid, dim3 block, size_t shared,
                                const std::vector<api::LaunchAttribute>& attrs, int* clusters) {
  return cluster_query<api::Call::OccupancyMaxActiveClusters>(r, k, grid, block, shared, attrs, clusters);
}

cudaError_t kernel_max_cluster_size(Remote& r, HostKernel& k, dim3 grid, dim3 block, size_t shared,
                                    const std::vector<api::LaunchAttribute>& attrs, int* size) {
  return cluster_query<api::Call::OccupancyMaxPotentialClusterSize>(r, k, grid, block, shared, attrs, size);
}

cudaError_t kernel_occupancy(Remote& r, HostKernel& k, int block_size, size_t shared, unsigned flags, int* blocks) {
  if (flags & ~unsigned{cudaOccupancyDisableCachingOverride}) return cudaErrorInvalidValue;
  const auto key = std::make_tuple(block_size, uint64_t{shared}, flags);
  if (auto it = k.occupancy.find(key); it != k.occupancy.end()) return *blocks = it->second, cudaSuccess;
  auto res = r.call<api::Call::OccupancyMaxActiveBlocks>({k.handle, block_size, flags, uint64_t{shared}});
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  k.occupancy[key] = res.reply.blocks;
  *blocks = res.reply.blocks;
  return cudaSuccess;
}

}  // namespace vmcuda::guest

using vmcuda::guest::record;

// Parameter layouts come with the host's function handle (cuFuncGetParamInfo, once per kernel).
cudaError_t cudaFuncGetParamInfo(const void* func, size_t paramIndex, size_t* paramOffset, size_t* paramSize) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  g::Kernel k;
  if (cudaError_t e = g::kernel_of(func, &k)) return record(e);
  if (paramIndex >= k.kernel->params.size()) return record(cudaErrorInvalidValue);
  if (paramOffset) *paramOffset = k.kernel->params[paramIndex].offset;
  if (paramSize) *paramSize = k.kernel->params[paramIndex].size;
  return cudaSuccess;
}

// The kernel's name as its module has it (the mangled name), answered from the registry.
cudaError_t cudaFuncGetName(const char** name, const void* func) {
  namespace g = vmcuda::guest;
  if (name == nullptr) return record(cudaErrorInvalidValue);
  const vgpu_db::Function* f = g::find_kernel(func);
  if (f == nullptr) return record(cudaErrorInvalidResourceHandle);  // as NVIDIA's 13.0 answers
  *name = f->name.c_str();
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!attr) return record(cudaErrorInvalidValue);
  g::Kernel k;
  if (cudaError_t e = g::kernel_of(func, &k)) return record(e);
  const vmcuda::api::FuncAttributesReply* a = nullptr;
  if (cudaError_t e = g::kernel_attributes(*k.remote, *k.kernel, &a)) return record(e);
  const int32_t* v = a->values;
  *attr = cudaFuncAttributes{};
  attr->sharedSizeBytes = static_cast<size_t>(v[g::kSharedSizeBytes]);
  attr->constSizeBytes = static_cast<size_t>(v[g::kConstSizeBytes]);
  attr->localSizeBytes = static_cast<size_t>(v[g::kLocalSizeBytes]);
  attr->maxThreadsPerBlock = v[g::kMaxThreadsPerBlock];
  attr->numRegs = v[g::kNumRegs];
  attr->ptxVersion = v[g::kPtxVersion];
  attr->binaryVersion = v[g::kBinaryVersion];
  attr->cacheModeCA = v[g::kCacheModeCa];
  attr->maxDynamicSharedSizeBytes = v[g::kMaxDynamicSharedSizeBytes];
  attr->preferredShmemCarveout = v[g::kPreferredSharedMemoryCarveout];
  attr->clusterDimMustBeSet = v[g::kClusterSizeMustBeSet];
  attr->requiredClusterWidth = v[g::kRequiredClusterWidth];
  attr->requiredClusterHeight = v[g::kRequiredClusterHeight];
  attr->requiredClusterDepth = v[g::kRequiredClusterDepth];
  attr->clusterSchedulingPolicyPreference = v[g::kClusterSchedulingPolicyPreference];
  attr->nonPortableClusterSizeAllowed = v[g::kNonPortableClusterSizeAllowed];
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  g::Kernel k;
  if (cudaError_t e = g::kernel_of(func, &k)) return record(e);
  return record(g::set_kernel_attribute(*k.remote, *k.kernel, attr, value));
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, const void* func, int numBlocks,
                                                     int blockSize) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!dynamicSmemSize) return record(cudaErrorInvalidValue);
  g::Kernel k;
  if (cudaError_t e = g::kernel_of(func, &k)) return record(e);
  return record(g::kernel_available_shared(*k.remote, *k.kernel, numBlocks, blockSize, dynamicSmemSize));
}

cudaError_t cudaOccupancyMaxActiveClusters(int* numClusters, const void* func, const cudaLaunchConfig_t* config) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!numClusters || !config) return record(cudaErrorInvalidValue);
  std::vector<vmcuda::api::LaunchAttribute> attrs;
  bool cooperative = false;
  if (cudaError_t e = g::translate_attributes(*config, &attrs, &cooperative)) return record(e);
  g::Kernel k;
  if (cudaError_t e = g::kernel_of(func, &k)) return record(e);
  return record(g::kernel_max_clusters(*k.remote, *k.kernel, config->gridDim, config->blockDim,
                                       config->dynamicSmemBytes, attrs, numClusters));
}

// The largest cluster the configuration's kernel can launch with (the host driver's answer;
// a cluster dimension attribute in the configuration is ignored, as CUDA documents).
cudaError_t cudaOccupancyMaxPotentialClusterSize(int* clusterSize, const void* func, const cudaLaunchConfig_t* config) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!clusterSize || !config) return record(cudaErrorInvalidValue);
  std::vector<vmcuda::api::LaunchAttribute> attrs;
  bool cooperative = false;
  if (cudaError_t e = g::translate_attributes(*config, &attrs, &cooperative)) return record(e);
  g::Kernel k;
  if (cudaError_t e = g::kernel_of(func, &k)) return record(e);
  return record(g::kernel_max_cluster_size(*k.remote, *k.kernel, config->gridDim, config->blockDim,
                                           config->dynamicSmemBytes, attrs, clusterSize));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func, int blockSize,
                                                          size_t dynamicSMemSize) {
  return vmcuda::guest::occupancy(numBlocks, func, blockSize, dynamicSMemSize, cudaOccupancyDefault);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func, int blockSize,
                                                                   size_t dynamicSMemSize, unsigned int flags) {
  return vmcuda::guest::occupancy(numBlocks, func, blockSize, dynamicSMemSize, flags);
}
