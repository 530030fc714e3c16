// driver API: initialization, versions, devices, contexts and primary contexts, error
// strings, memory, streams and events (cuda.h). Built on the runtime areas in this library
// (driver_state.h): a CUdeviceptr is a cudaMalloc pointer, a CUstream a cudaStream_t, a
// CUevent a cudaEvent_t, so each works with either API, as natively.
#include <algorithm>
#include <cstring>
#include <vector>

#include "driver_array.h"
#include "driver_export_tables.h"
#include "driver_state.h"
#include "host_objects.h"
#include "host_pointers.h"
#include "log.h"
#include "memory_2d.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

#define CU_API extern "C" __attribute__((visibility("default")))

using namespace vmcuda::guest;
namespace cu = vmcuda::cu;
namespace api = vmcuda::api;

namespace {

const api::DevicePropertiesReply* device_props(CUdevice dev) {
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r || dev < 0 || dev >= static_cast<int>(r->devices().size())) return nullptr;
  return &r->devices()[dev];
}

// Primary context state per device: retain count and flags (cuDevicePrimaryCtx*).
struct PrimaryState {
  int retained = 0;
  unsigned flags = 0;
};
std::mutex g_primary_mu;  // trivially destructible: usable in exit handlers
// Never destroyed: NVIDIA's runtime releases its primary contexts in its exit handlers, which
// may run after this library's static destructors.
std::vector<PrimaryState>& g_primary = *new std::vector<PrimaryState>;
PrimaryState& primary_state(int dev) {
  if (static_cast<int>(g_primary.size()) <= dev) g_primary.resize(dev + 1);
  return g_primary[dev];
}

// Runs `f` with the runtime's device set to `dev` on this thread (calls that name a device,
// not the current context), and puts it back.
template <class F>
cudaError_t on_device(int dev, F f) {
  int& d = Remote::thread_device();
  const int saved = d;
  d = dev;
  cudaError_t e = f();
  d = saved;
  return e;
}

}  // namespace

// ------------------------------------------------------------------ initialization, versions

CU_API CUresult cuInit(unsigned int flags) {
  if (flags != 0) return cu::kInvalidValue;
  cudaError_t e = cudaSuccess;
  if (!Remote::get(&e)) return e == cudaErrorDevicesUnavailable ? 46 : cu::kNoDevice;
  mark_driver_initialized();
  return cu::kSuccess;
}

CU_API CUresult cuDriverGetVersion(int* version) {
  if (!version) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaDriverGetVersion(version));
}

// ------------------------------------------------------------------ devices

CU_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  VMCUDA_ENTER(enter_driver_call());
  if (!device) return cu::kInvalidValue;
  if (!device_props(ordinal)) return cu::kInvalidDevice;
  *device = ordinal;
  return cu::kSuccess;
}

CU_API CUresult cuDeviceGetCount(int* count) {
  VMCUDA_ENTER(enter_driver_call());
  if (!count) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaGetDeviceCount(count));
}

CU_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!name || len <= 0) return cu::kInvalidValue;
  const auto* p = device_props(dev);
  if (!p) return cu::kInvalidDevice;
  const size_t n = strnlen(p->name, sizeof p->name);
  const size_t k = std::min(n, static_cast<size_t>(len) - 1);
  std::memcpy(name, p->name, k);
  name[k] = '\0';
  return cu::kSuccess;
}

CU_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!uuid) return cu::kInvalidValue;
  const auto* p = device_props(dev);
  if (!p) return cu::kInvalidDevice;
  std::memcpy(uuid->bytes, p->uuid, 16);
  return cu::kSuccess;
}
CU_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CU_API CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetPCIBusId(pciBusId, len, dev));
}

CU_API CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetByPCIBusId(dev, pciBusId));
}

CU_API CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  VMCUDA_DRIVER_CALL(cudaDeviceCanAccessPeer(canAccessPeer, dev, peerDev));
}

// CUatomicOperation == cudaAtomicOperation (numbers); capabilities are the same bits.
CU_API CUresult cuDeviceGetHostAtomicCapabilities(unsigned int* caps, const int* ops, unsigned int count,
                                                  CUdevice dev) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetHostAtomicCapabilities(caps, reinterpret_cast<const cudaAtomicOperation*>(ops),
                                                         count, dev));
}
CU_API CUresult cuDeviceGetP2PAtomicCapabilities(unsigned int* caps, const int* ops, unsigned int count,
                                                 CUdevice src, CUdevice dst) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetP2PAtomicCapabilities(caps, reinterpret_cast<const cudaAtomicOperation*>(ops),
                                                        count, src, dst));
}
CU_API CUresult cuCtxResetPersistingL2Cache(void) { VMCUDA_DRIVER_IN_CONTEXT(cudaCtxResetPersistingL2Cache()); }
CU_API CUresult cuFlushGPUDirectRDMAWrites(int target, int scope) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceFlushGPUDirectRDMAWrites(static_cast<cudaFlushGPUDirectRDMAWritesTarget>(target),
                                                              static_cast<cudaFlushGPUDirectRDMAWritesScope>(scope)));
}

CU_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!bytes) return cu::kInvalidValue;
  const auto* p = device_props(dev);
  if (!p) return cu::kInvalidDevice;
  *bytes = p->total_mem;
  return cu::kSuccess;
}
// The CUDA 2.0 form: an unsigned int byte count (clamped, as a 32-bit count must be).
CU_API CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  size_t b = 0;
  if (!bytes) return cu::kInvalidValue;
  CUresult e = cuDeviceTotalMem_v2(&b, dev);
  if (e == cu::kSuccess) *bytes = static_cast<unsigned>(std::min<size_t>(b, 0xffffffffu));
  return e;
}

CU_API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!value) return cu::kInvalidValue;
  if (!device_props(dev)) return cu::kInvalidDevice;
  VMCUDA_DRIVER_RUNTIME(cudaDeviceGetAttribute(value, static_cast<cudaDeviceAttr>(attribute), dev));
}

CU_API CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!major || !minor) return cu::kInvalidValue;
  const auto* p = device_props(dev);
  if (!p) return cu::kInvalidDevice;
  *major = p->attributes[75];  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  *minor = p->attributes[76];
  return cu::kSuccess;
}

CU_API CUresult cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!prop) return cu::kInvalidValue;
  const auto* p = device_props(dev);
  if (!p) return cu::kInvalidDevice;
  const int32_t* a = p->attributes;  // indexed by CUdevice_attribute
  prop->maxThreadsPerBlock = a[1];
  for (int i = 0; i < 3; ++i) {
    prop->maxThreadsDim[i] = a[2 + i];
    prop->maxGridSize[i] = a[5 + i];
  }
  prop->sharedMemPerBlock = a[8];
  prop->totalConstantMemory = a[9];
  prop->SIMDWidth = a[10];
  prop->memPitch = a[11];
  prop->regsPerBlock = a[12];
  prop->clockRate = a[13];
  prop->textureAlign = a[14];
  return cu::kSuccess;
}

// ------------------------------------------------------------------ primary contexts

CU_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!pctx) return cu::kInvalidValue;
  CUcontext c = primary_context(dev);
  if (!c) return cu::kInvalidDevice;
  std::lock_guard l(g_primary_mu);
  ++primary_state(dev).retained;
  *pctx = c;
  return cu::kSuccess;
}

CU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!primary_context(dev)) return cu::kInvalidDevice;
  std::lock_guard l(g_primary_mu);
  auto& s = primary_state(dev);
  if (s.retained <= 0) return cu::kInvalidContext;  // released more often than retained
  --s.retained;
  return cu::kSuccess;
}
CU_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

CU_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  VMCUDA_ENTER(enter_driver_call());
  if (!flags || !active) return cu::kInvalidValue;
  if (!primary_context(dev)) return cu::kInvalidDevice;
  std::lock_guard l(g_primary_mu);
  const auto& s = primary_state(dev);
  *flags = s.flags;
  // Retained by the driver API, or by the runtime (which retains its device's at first use).
  *active = s.retained > 0 || (runtime_used_on_this_thread() && Remote::thread_device() == dev);
  return cu::kSuccess;
}

CU_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  VMCUDA_ENTER(enter_driver_call());
  if (!primary_context(dev)) return cu::kInvalidDevice;
  if (flags & ~0xffu) return cu::kInvalidValue;  // CU_CTX_FLAGS_MASK
  std::lock_guard l(g_primary_mu);
  primary_state(dev).flags = flags;  // remembered, as cudaSetDeviceFlags' are (not applied on the host)
  return cu::kSuccess;
}
CU_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

// As cudaDeviceReset on that device: its allocations, streams and events are freed.
CU_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!primary_context(dev)) return cu::kInvalidDevice;
  // Context-local storage first: its destructors (NVIDIA's runtime's) still use the context.
  run_context_storage_destructors(primary_context(dev));
  {
    std::lock_guard l(g_primary_mu);
    primary_state(dev) = {};
  }
  VMCUDA_DRIVER_RUNTIME(on_device(dev, [] { return cudaDeviceReset(); }));
}
CU_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

// ------------------------------------------------------------------ contexts

// The current context's limits and cache settings: the runtime's device-wide calls on the
// current device (CUlimit == cudaLimit, CUfunc_cache == cudaFuncCache, CUsharedconfig ==
// cudaSharedMemConfig, numbers included).
CU_API CUresult cuCtxGetLimit(size_t* value, int limit) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceGetLimit(value, static_cast<cudaLimit>(limit)));
}
CU_API CUresult cuCtxSetLimit(int limit, size_t value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceSetLimit(static_cast<cudaLimit>(limit), value));
}
CU_API CUresult cuCtxGetCacheConfig(int* config) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceGetCacheConfig(reinterpret_cast<cudaFuncCache*>(config)));
}
CU_API CUresult cuCtxSetCacheConfig(int config) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceSetCacheConfig(static_cast<cudaFuncCache>(config)));
}
CU_API CUresult cuCtxGetSharedMemConfig(int* config) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceGetSharedMemConfig(reinterpret_cast<cudaSharedMemConfig*>(config)));
}
CU_API CUresult cuCtxSetSharedMemConfig(int config) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceSetSharedMemConfig(static_cast<cudaSharedMemConfig>(config)));
}
CU_API CUresult cuDeviceGetDefaultMemPool(cudaMemPool_t* pool, CUdevice dev) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetDefaultMemPool(pool, dev));
}
CU_API CUresult cuDeviceGetMemPool(cudaMemPool_t* pool, CUdevice dev) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetMemPool(pool, dev));
}
CU_API CUresult cuDeviceSetMemPool(CUdevice dev, cudaMemPool_t pool) {
  VMCUDA_DRIVER_CALL(cudaDeviceSetMemPool(dev, pool));
}

// ------------------------------------------------------------------ stream-ordered memory
// On the runtime's pools (memory_pool.cc): CUmemoryPool == cudaMemPool_t, CUmemPoolProps ==
// cudaMemPoolProps, CUmemAccessDesc == cudaMemAccessDesc, CUmemPool_attribute ==
// cudaMemPoolAttr (layouts and numbers).
CU_API CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMallocAsync(reinterpret_cast<void**>(p), bytes, s));
}
CU_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* p, size_t bytes, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMallocAsync_ptsz(reinterpret_cast<void**>(p), bytes, s));
}
CU_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t bytes, cudaMemPool_t pool, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMallocFromPoolAsync(reinterpret_cast<void**>(p), bytes, pool, s));
}
CU_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* p, size_t bytes, cudaMemPool_t pool, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMallocFromPoolAsync_ptsz(reinterpret_cast<void**>(p), bytes, pool, s));
}
CU_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaFreeAsync(reinterpret_cast<void*>(static_cast<uintptr_t>(p)), s));
}
CU_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaFreeAsync_ptsz(reinterpret_cast<void*>(static_cast<uintptr_t>(p)), s));
}
CU_API CUresult cuMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  VMCUDA_DRIVER_CALL(cudaMemPoolCreate(pool, props));
}
// By location (CUDA 13): CUmemLocation == cudaMemLocation, CUmemAllocationType ==
// cudaMemAllocationType; a device's pools, and the host locations' (pools of host memory).
CU_API CUresult cuMemGetDefaultMemPool(cudaMemPool_t* pool, cudaMemLocation* location, int type) {
  VMCUDA_DRIVER_CALL(cudaMemGetDefaultMemPool(pool, location, static_cast<cudaMemAllocationType>(type)));
}
CU_API CUresult cuMemGetMemPool(cudaMemPool_t* pool, cudaMemLocation* location, int type) {
  VMCUDA_DRIVER_CALL(cudaMemGetMemPool(pool, location, static_cast<cudaMemAllocationType>(type)));
}
CU_API CUresult cuMemSetMemPool(cudaMemLocation* location, int type, cudaMemPool_t pool) {
  VMCUDA_DRIVER_CALL(cudaMemSetMemPool(location, static_cast<cudaMemAllocationType>(type), pool));
}
CU_API CUresult cuMemPoolDestroy(cudaMemPool_t pool) {
  VMCUDA_DRIVER_CALL(cudaMemPoolDestroy(pool));
}
CU_API CUresult cuMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  VMCUDA_DRIVER_CALL(cudaMemPoolTrimTo(pool, keep));
}
CU_API CUresult cuMemPoolSetAttribute(cudaMemPool_t pool, int attr, void* value) {
  VMCUDA_DRIVER_CALL(cudaMemPoolSetAttribute(pool, static_cast<cudaMemPoolAttr>(attr), value));
}
CU_API CUresult cuMemPoolGetAttribute(cudaMemPool_t pool, int attr, void* value) {
  VMCUDA_DRIVER_CALL(cudaMemPoolGetAttribute(pool, static_cast<cudaMemPoolAttr>(attr), value));
}
CU_API CUresult cuMemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* list, size_t count) {
  VMCUDA_DRIVER_CALL(cudaMemPoolSetAccess(pool, list, count));
}
CU_API CUresult cuMemPoolGetAccess(int* flags, cudaMemPool_t pool, cudaMemLocation* location) {
  VMCUDA_DRIVER_CALL(cudaMemPoolGetAccess(reinterpret_cast<cudaMemAccessFlags*>(flags), pool, location));
}
// Pool IPC (memory_pool.cc): CUmemAllocationHandleType == cudaMemAllocationHandleType,
// CUmemPoolPtrExportData == cudaMemPoolPtrExportData. The runtime's flags are unsigned int:
// larger driver flags are invalid as they are.
CU_API CUresult cuMemPoolExportToShareableHandle(void* handle, cudaMemPool_t pool, int type, unsigned long long flags) {
  VMCUDA_DRIVER_CALL(cudaMemPoolExportToShareableHandle(handle, pool, static_cast<cudaMemAllocationHandleType>(type),
                                                        flags > 0xffffffffull ? 1u : static_cast<unsigned>(flags)));
}
CU_API CUresult cuMemPoolImportFromShareableHandle(cudaMemPool_t* pool, void* handle, int type, unsigned long long flags) {
  VMCUDA_DRIVER_CALL(cudaMemPoolImportFromShareableHandle(pool, handle, static_cast<cudaMemAllocationHandleType>(type),
                                                          flags > 0xffffffffull ? 1u : static_cast<unsigned>(flags)));
}
CU_API CUresult cuMemPoolExportPointer(cudaMemPoolPtrExportData* data, CUdeviceptr p) {
  VMCUDA_DRIVER_CALL(cudaMemPoolExportPointer(data, reinterpret_cast<void*>(static_cast<uintptr_t>(p))));
}
CU_API CUresult cuMemPoolImportPointer(CUdeviceptr* p, cudaMemPool_t pool, cudaMemPoolPtrExportData* data) {
  VMCUDA_DRIVER_CALL(cudaMemPoolImportPointer(reinterpret_cast<void**>(p), pool, data));
}

// Async notifications (async_notification.cc): CUasyncCallback == cudaAsyncCallback,
// CUasyncNotificationInfo == cudaAsyncNotificationInfo_t, the handles the same.
CU_API CUresult cuDeviceRegisterAsyncNotification(CUdevice dev, cudaAsyncCallback callback, void* data,
                                                  cudaAsyncCallbackHandle_t* out) {
  VMCUDA_DRIVER_CALL(cudaDeviceRegisterAsyncNotification(dev, callback, data, out));
}
CU_API CUresult cuDeviceUnregisterAsyncNotification(CUdevice dev, cudaAsyncCallbackHandle_t callback) {
  VMCUDA_DRIVER_CALL(cudaDeviceUnregisterAsyncNotification(dev, callback));
}
// The error log (logs.cc): CUlogIterator == cudaLogIterator, CUlogLevel == cudaLogLevel,
// CUlogsCallback == cudaLogsCallback_t. Local: no cuInit needed.
CU_API CUresult cuLogsRegisterCallback(cudaLogsCallback_t callback, void* data, cudaLogsCallbackHandle* out) {
  VMCUDA_DRIVER_RUNTIME(cudaLogsRegisterCallback(callback, data, out));
}
CU_API CUresult cuLogsUnregisterCallback(cudaLogsCallbackHandle callback) {
  VMCUDA_DRIVER_RUNTIME(cudaLogsUnregisterCallback(callback));
}
CU_API CUresult cuLogsCurrent(cudaLogIterator* iterator, unsigned int flags) {
  VMCUDA_DRIVER_RUNTIME(cudaLogsCurrent(iterator, flags));
}
CU_API CUresult cuLogsDumpToFile(cudaLogIterator* iterator, const char* path, unsigned int flags) {
  VMCUDA_DRIVER_RUNTIME(cudaLogsDumpToFile(iterator, path, flags));
}
CU_API CUresult cuLogsDumpToMemory(cudaLogIterator* iterator, char* buffer, size_t* size, unsigned int flags) {
  VMCUDA_DRIVER_RUNTIME(cudaLogsDumpToMemory(iterator, buffer, size, flags));
}

CU_API CUresult cuCtxGetCurrent(CUcontext* pctx);
CU_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  VMCUDA_ENTER(enter_driver_call());
  if (!id) return cu::kInvalidValue;
  if (!ctx && cuCtxGetCurrent(&ctx) != cu::kSuccess) return cu::kInvalidContext;
  if (!ctx || !ctx->alive.load()) return cu::kInvalidContext;
  *id = ctx->id;
  return cu::kSuccess;
}

CU_API CUresult cuCtxGetCurrent(CUcontext* pctx) {
  VMCUDA_ENTER(enter_driver_call());
  if (!pctx) return cu::kInvalidValue;
  *pctx = current_context();
  return cu::kSuccess;
}

CU_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  VMCUDA_ENTER(enter_driver_call());
  if (ctx && !valid_context(ctx)) return cu::kInvalidContext;
  set_current_context(ctx);
  return cu::kSuccess;
}

CU_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  VMCUDA_ENTER(enter_driver_call());
  if (!valid_context(ctx)) return cu::kInvalidContext;
  push_context(ctx);
  return cu::kSuccess;
}
CU_API CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

CU_API CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  VMCUDA_ENTER(enter_driver_call());
  CUcontext top = pop_context();
  if (!top) return cu::kInvalidContext;
  if (pctx) *pctx = top;
  return cu::kSuccess;
}
CU_API CUresult cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }

CU_API CUresult cuCtxGetDevice(CUdevice* device) {
  CUcontext c = nullptr;
  VMCUDA_ENTER(enter_context_call(&c));
  if (!device) return cu::kInvalidValue;
  *device = c->device;
  return cu::kSuccess;
}

// CUDA 13's form: the device of `ctx`, or of the current context when it is NULL.
CU_API CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  if (!ctx) return cuCtxGetDevice(device);
  VMCUDA_ENTER(enter_driver_call());
  if (!device) return cu::kInvalidValue;
  if (!valid_context(ctx)) return cu::kInvalidContext;
  *device = ctx->device;
  return cu::kSuccess;
}

CU_API CUresult cuCtxGetFlags(unsigned int* flags) {
  CUcontext c = nullptr;
  VMCUDA_ENTER(enter_context_call(&c));
  if (!flags) return cu::kInvalidValue;
  if (c->primary) {
    std::lock_guard l(g_primary_mu);
    *flags = primary_state(c->device).flags;
  } else {
    *flags = c->flags;
  }
  // Every context maps host memory since CUDA 11 (CU_CTX_MAP_HOST has no effect and is
  // always on): NVIDIA's runtime reports cudaDeviceMapHost among cudaGetDeviceFlags from here.
  *flags |= 0x08;
  return cu::kSuccess;
}

CU_API CUresult cuCtxSynchronize(void) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceSynchronize());
}

CU_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (!ctx) return cuCtxSynchronize();
  VMCUDA_ENTER(enter_driver_call());
  if (!valid_context(ctx)) return cu::kInvalidContext;
  VMCUDA_DRIVER_RUNTIME(on_device(ctx->device, [] { return cudaDeviceSynchronize(); }));
}

CU_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  VMCUDA_ENTER(enter_driver_call());
  if (!version) return cu::kInvalidValue;
  if (!ctx) ctx = current_context();
  if (!ctx) return cu::kInvalidContext;
  if (!valid_context(ctx)) return cu::kInvalidContext;
  *version = 3020;  // what NVIDIA's driver answers for every context since CUDA 3.2
  return cu::kSuccess;
}

// An explicit context: its own object on the device's one host context (driver_state.h).
CU_API CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  if (!pctx) return cu::kInvalidValue;
  if (!primary_context(dev)) return cu::kInvalidDevice;
  if (flags & ~0xffu) return cu::kInvalidValue;
  CUcontext c = make_context(dev, flags);
  if (!c) return cu::kOutOfMemory;
  push_context(c);
  *pctx = c;
  return cu::kSuccess;
}

// CUDA 11.4's and 12.5's forms: execution affinity and CIG parameters are not remoted (801).
CU_API CUresult cuCtxCreate_v3(CUcontext* pctx, void* params, int num_params, unsigned int flags, CUdevice dev) {
  if (params && num_params > 0) return cu::kNotSupported;
  return cuCtxCreate_v2(pctx, flags, dev);
}
CU_API CUresult cuCtxCreate_v4(CUcontext* pctx, void* create_params, unsigned int flags, CUdevice dev) {
  if (create_params) return cu::kNotSupported;
  return cuCtxCreate_v2(pctx, flags, dev);
}

CU_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  VMCUDA_ENTER(enter_driver_call());
  if (!valid_context(ctx) || ctx->primary) return cu::kInvalidContext;
  run_context_storage_destructors(ctx);
  destroy_context(ctx);
  return cu::kSuccess;
}

// ------------------------------------------------------------------ errors

namespace {
struct ErrorText {
  CUresult value;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrorTexts[] = {
#define VMCUDA_CU_ERROR(name, value, string) {value, #name, string},
#include "vmcuda/cuda_errors.inc"
#undef VMCUDA_CU_ERROR
};
// The name or the description of a CUresult; CUDA_ERROR_INVALID_VALUE (and NULL) for an
// unknown code, as NVIDIA's driver answers.
CUresult error_text(CUresult error, const char** str, const char* ErrorText::*field) {
  if (!str) return cu::kInvalidValue;
  for (const ErrorText& e : kErrorTexts)
    if (e.value == error) return *str = e.*field, cu::kSuccess;
  *str = nullptr;
  return cu::kInvalidValue;
}
}  // namespace

CU_API CUresult cuGetErrorName(CUresult error, const char** str) { return error_text(error, str, &ErrorText::name); }
CU_API CUresult cuGetErrorString(CUresult error, const char** str) { return error_text(error, str, &ErrorText::text); }

// ------------------------------------------------------------------ memory

namespace {
void* dptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// cuMemsetD16/D32: a pattern of 2- or 4-byte elements. One of identical bytes is a byte
// memset; any other is written as copies of a pattern buffer (no wire call for wider
// memsets yet). Async ones are queued copies whose bytes are taken at call time.
cudaError_t memset_wide(CUdeviceptr dst, uint32_t value, unsigned width, size_t count, bool async, cudaStream_t s,
                        bool per_thread) {
  const auto* b = reinterpret_cast<const uint8_t*>(&value);
  bool bytes_equal = true;
  for (unsigned i = 1; i < width; ++i) bytes_equal &= b[i] == b[0];
  if (width == 1 || bytes_equal) {
    if (!async) return per_thread ? (cudaMemsetAsync_ptsz(dptr(dst), b[0], count * width, nullptr) ?: cudaStreamSynchronize_ptsz(nullptr))
                                  : cudaMemset(dptr(dst), b[0], count * width);
    return per_thread ? cudaMemsetAsync_ptsz(dptr(dst), b[0], count * width, s)
                      : cudaMemsetAsync(dptr(dst), b[0], count * width, s);
  }
  if (dst % width) return cudaErrorInvalidValue;  // the driver requires aligned elements
  // Device memory, and host memory the device reaches (pinned, managed, registered): one
  // call of wide elements (also inside a stream capture).
  if (is_device(dptr(dst), count * width) || is_memset_host_memory(dptr(dst), count * width))
    return memset_elements(dst, value, width, count * width, s, per_thread, async);
  constexpr size_t kChunk = 1 << 20;
  std::vector<uint8_t> pattern(std::min(kChunk, count * width));
  for (size_t i = 0; i < pattern.size(); i += width) std::memcpy(&pattern[i], &value, width);
  const size_t total = count * width;
  for (size_t off = 0; off < total; off += pattern.size()) {
    const size_t n = std::min(pattern.size(), total - off);
    cudaError_t e = async || per_thread
                        ? (per_thread ? cudaMemcpyAsync_ptsz(dptr(dst + off), pattern.data(), n, cudaMemcpyHostToDevice, s)
                                      : cudaMemcpyAsync(dptr(dst + off), pattern.data(), n, cudaMemcpyHostToDevice, s))
                        : cudaMemcpy(dptr(dst + off), pattern.data(), n, cudaMemcpyHostToDevice);
    if (e) return e;
  }
  if (per_thread && !async) return cudaStreamSynchronize_ptsz(nullptr);
  return cudaSuccess;
}

// The per-thread (_ptds) forms of the synchronous copies: ordered on the thread's default
// stream, then waited for.
cudaError_t copy_ptds(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (cudaError_t e = cudaMemcpyAsync_ptsz(dst, src, n, kind, nullptr)) return e;
  return cudaStreamSynchronize_ptsz(nullptr);
}
}  // namespace

CU_API CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  VMCUDA_ENTER(enter_context_call());
  if (!p) return cu::kInvalidValue;
  if (bytes == 0) return cu::kInvalidValue;  // the driver refuses empty allocations (cudaMalloc does not)
  void* q = nullptr;
  KeepRuntimeLastError keep;
  cudaError_t e = cudaMalloc(&q, bytes);
  if (e == cudaSuccess) *p = reinterpret_cast<uintptr_t>(q);
  return to_cu_result(e);
}

CU_API CUresult cuMemFree_v2(CUdeviceptr p) {
  VMCUDA_ENTER(enter_context_call());
  if (p == 0) return cu::kSuccess;
  VMCUDA_DRIVER_RUNTIME(cudaFree(dptr(p)));
}

CU_API CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  VMCUDA_ENTER(enter_context_call());
  // NULLs are not written (NVIDIA's runtime 13.0 answers cudaMemGetInfo(NULL, NULL) with
  // success, and the static runtime passes them here as they are).
  VMCUDA_DRIVER_RUNTIME(cudaMemGetInfo(free, total));
}

#define VMCUDA_COPY(name, dst_t, src_t, kind, dst_expr, src_expr)                                       \
  CU_API CUresult name(dst_t dst, src_t src, size_t n) {                                                \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(cudaMemcpy(dst_expr, src_expr, n, kind));                                     \
  }                                                                                                     \
  CU_API CUresult name##_ptds(dst_t dst, src_t src, size_t n) {                                         \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(copy_ptds(dst_expr, src_expr, n, kind));                                      \
  }
VMCUDA_COPY(cuMemcpyHtoD_v2, CUdeviceptr, const void*, cudaMemcpyHostToDevice, dptr(dst), src)
VMCUDA_COPY(cuMemcpyDtoH_v2, void*, CUdeviceptr, cudaMemcpyDeviceToHost, dst, dptr(src))
VMCUDA_COPY(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr, cudaMemcpyDeviceToDevice, dptr(dst), dptr(src))
// cuMemcpy: unified addressing, either side anywhere.
VMCUDA_COPY(cuMemcpy, CUdeviceptr, CUdeviceptr, cudaMemcpyDefault, dptr(dst), dptr(src))
#undef VMCUDA_COPY

#define VMCUDA_COPY_ASYNC(name, dst_t, src_t, kind, dst_expr, src_expr)                                 \
  CU_API CUresult name(dst_t dst, src_t src, size_t n, CUstream s) {                                    \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(cudaMemcpyAsync(dst_expr, src_expr, n, kind, s));                             \
  }                                                                                                     \
  CU_API CUresult name##_ptsz(dst_t dst, src_t src, size_t n, CUstream s) {                             \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(cudaMemcpyAsync_ptsz(dst_expr, src_expr, n, kind, s));                        \
  }
VMCUDA_COPY_ASYNC(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void*, cudaMemcpyHostToDevice, dptr(dst), src)
VMCUDA_COPY_ASYNC(cuMemcpyDtoHAsync_v2, void*, CUdeviceptr, cudaMemcpyDeviceToHost, dst, dptr(src))
VMCUDA_COPY_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, cudaMemcpyDeviceToDevice, dptr(dst), dptr(src))
VMCUDA_COPY_ASYNC(cuMemcpyAsync, CUdeviceptr, CUdeviceptr, cudaMemcpyDefault, dptr(dst), dptr(src))
#undef VMCUDA_COPY_ASYNC

#define VMCUDA_MEMSET(bits, type, width)                                                                 \
  CU_API CUresult cuMemsetD##bits##_v2(CUdeviceptr dst, type v, size_t n) {                             \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(memset_wide(dst, v, width, n, false, nullptr, false));                        \
  }                                                                                                     \
  CU_API CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr dst, type v, size_t n) {                        \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(memset_wide(dst, v, width, n, false, nullptr, true));                         \
  }                                                                                                     \
  CU_API CUresult cuMemsetD##bits##Async(CUdeviceptr dst, type v, size_t n, CUstream s) {               \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(memset_wide(dst, v, width, n, true, s, false));                               \
  }                                                                                                     \
  CU_API CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr dst, type v, size_t n, CUstream s) {          \
    VMCUDA_ENTER(enter_context_call());                                                                 \
    VMCUDA_DRIVER_RUNTIME(memset_wide(dst, v, width, n, true, s, true));                                \
  }
VMCUDA_MEMSET(8, unsigned char, 1)
VMCUDA_MEMSET(16, unsigned short, 2)
VMCUDA_MEMSET(32, unsigned int, 4)
#undef VMCUDA_MEMSET

// ------------------------------------------------------------------ pitched memory (2D)
// Made of the runtime's 2D calls (memory_2d.cc); a copy naming a CUDA array is a 3D copy of
// one slice (driver_array.cc). The per-thread (_ptds/_ptsz) forms are stubs still.

struct CUDA_MEMCPY2D_st {  // cuda.h's CUDA_MEMCPY2D
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
};
static_assert(sizeof(CUDA_MEMCPY2D_st) == 128);

namespace {
enum : int { kMemHost = 1, kMemDevice = 2, kMemArray = 3, kMemUnified = 4 };

// One side's first byte, and whether it is device memory (unified: either; told by address).
CUresult side(int type, const void* host, CUdeviceptr device, size_t x, size_t y, size_t pitch, const char** at,
              int* kind) {
  switch (type) {
    case kMemHost: *at = static_cast<const char*>(host); *kind = 0; break;
    case kMemDevice: *at = static_cast<const char*>(dptr(device)); *kind = 1; break;
    case kMemUnified: *at = static_cast<const char*>(dptr(device)); *kind = 2; break;
    case kMemArray: return cu::kNotSupported;
    default: return cu::kInvalidValue;
  }
  if (!*at) return cu::kInvalidValue;
  *at += y * pitch + x;
  return cu::kSuccess;
}

CUresult copy_2d(const CUDA_MEMCPY2D_st* c, bool async, CUstream s) {
  if (!c) return cu::kInvalidValue;
  if (c->srcMemoryType == kMemArray || c->dstMemoryType == kMemArray) {
    CUDA_MEMCPY3D_st m{};
    m.srcXInBytes = c->srcXInBytes, m.srcY = c->srcY, m.srcMemoryType = c->srcMemoryType, m.srcHost = c->srcHost;
    m.srcDevice = c->srcDevice, m.srcArray = static_cast<CUarray_st*>(c->srcArray), m.srcPitch = c->srcPitch;
    m.dstXInBytes = c->dstXInBytes, m.dstY = c->dstY, m.dstMemoryType = c->dstMemoryType, m.dstHost = c->dstHost;
    m.dstDevice = c->dstDevice, m.dstArray = static_cast<CUarray_st*>(c->dstArray), m.dstPitch = c->dstPitch;
    m.WidthInBytes = c->WidthInBytes, m.Height = c->Height, m.Depth = 1;
    return copy_3d_driver(&m, async, s);
  }
  const char *src, *dst;
  int sk, dk;
  if (CUresult e = side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcPitch, &src, &sk))
    return e;
  if (CUresult e = side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstPitch, &dst, &dk))
    return e;
  cudaMemcpyKind kind = cudaMemcpyDefault;
  if (sk != 2 && dk != 2) {
    static constexpr cudaMemcpyKind kinds[2][2] = {{cudaMemcpyHostToHost, cudaMemcpyHostToDevice},
                                                   {cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice}};
    kind = kinds[sk][dk];
  }
  // A height of 1 needs no pitch (the driver accepts 0 then; the runtime's call does not).
  const size_t spitch = c->Height == 1 && c->srcPitch == 0 ? c->WidthInBytes : c->srcPitch;
  const size_t dpitch = c->Height == 1 && c->dstPitch == 0 ? c->WidthInBytes : c->dstPitch;
  KeepRuntimeLastError keep;
  return to_cu_result(async ? cudaMemcpy2DAsync(const_cast<char*>(dst), dpitch, src, spitch, c->WidthInBytes, c->Height,
                                                kind, s)
                            : cudaMemcpy2D(const_cast<char*>(dst), dpitch, src, spitch, c->WidthInBytes, c->Height, kind));
}

// 2D memsets of 1-, 2- or 4-byte elements (any value), of device memory or of host memory the
// device reaches (pinned, managed, registered): memset_2d's.
CUresult driver_memset_2d(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned width, size_t w, size_t h,
                          bool async, CUstream s) {
  if (w > ~size_t{0} / width) return cu::kInvalidValue;
  KeepRuntimeLastError keep;
  return to_cu_result(memset_2d_elements(dptr(dst), pitch, value, width, w * width, h, s, async));
}
}  // namespace

CU_API CUresult cuMemAllocPitch_v2(CUdeviceptr* p, size_t* pitch, size_t width, size_t height, unsigned element) {
  VMCUDA_ENTER(enter_context_call());
  if (!p || !pitch) return cu::kInvalidValue;
  if (element != 4 && element != 8 && element != 16) return cu::kInvalidValue;
  void* q = nullptr;
  KeepRuntimeLastError keep;
  cudaError_t e = cudaMallocPitch(&q, pitch, width, height);
  if (e == cudaSuccess) *p = reinterpret_cast<uintptr_t>(q);
  return to_cu_result(e);
}

CU_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D_st* c) {
  VMCUDA_ENTER(enter_context_call());
  return copy_2d(c, false, nullptr);
}
CU_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D_st* c) {
  VMCUDA_ENTER(enter_context_call());
  return copy_2d(c, false, nullptr);
}
CU_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D_st* c, CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  return copy_2d(c, true, s);
}

#define VMCUDA_MEMSET_2D(bits, type, width)                                                               \
  CU_API CUresult cuMemsetD2D##bits##_v2(CUdeviceptr dst, size_t pitch, type v, size_t w, size_t h) {       \
    VMCUDA_ENTER(enter_context_call());                                                                   \
    return driver_memset_2d(dst, pitch, v, width, w, h, false, nullptr);                                  \
  }                                                                                                       \
  CU_API CUresult cuMemsetD2D##bits##Async(CUdeviceptr dst, size_t pitch, type v, size_t w, size_t h,      \
                                           CUstream s) {                                                  \
    VMCUDA_ENTER(enter_context_call());                                                                   \
    return driver_memset_2d(dst, pitch, v, width, w, h, true, s);                                         \
  }
VMCUDA_MEMSET_2D(8, unsigned char, 1)
VMCUDA_MEMSET_2D(16, unsigned short, 2)
VMCUDA_MEMSET_2D(32, unsigned int, 4)
#undef VMCUDA_MEMSET_2D

CU_API CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  VMCUDA_ENTER(enter_context_call());
  if (!p) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaMallocHost(p, bytes));
}

// CU_MEMHOSTALLOC_* == cudaHostAlloc* (1, 2, 4).
CU_API CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned int flags) {
  VMCUDA_ENTER(enter_context_call());
  if (!p) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaHostAlloc(p, bytes, flags));
}

CU_API CUresult cuMemFreeHost(void* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaFreeHost(p));
}

CU_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdev, void* p, unsigned int flags) {
  VMCUDA_ENTER(enter_context_call());
  if (!pdev) return cu::kInvalidValue;
  void* d = nullptr;
  KeepRuntimeLastError keep;
  cudaError_t e = cudaHostGetDevicePointer(&d, p, flags);
  if (e == cudaSuccess) *pdev = reinterpret_cast<uintptr_t>(d);
  return to_cu_result(e);
}

CU_API CUresult cuMemHostGetFlags(unsigned int* flags, void* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaHostGetFlags(flags, p));
}

// CU_MEMHOSTREGISTER_* == cudaHostRegister* (1, 2, 4, 8).
CU_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaHostRegister(p, bytes, flags));
}

CU_API CUresult cuMemHostUnregister(void* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaHostUnregister(p));
}

// Managed memory, on the runtime's (memory.cc, managed_advice.cc): CU_MEM_ATTACH_* ==
// cudaMemAttach*, CUmem_advise == cudaMemoryAdvise, CUmem_range_attribute ==
// cudaMemRangeAttribute, CUmemLocation == cudaMemLocation; the CUDA 8 forms name a device,
// CU_DEVICE_CPU (-1) for the host.
CU_API CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned int flags) {
  VMCUDA_ENTER(enter_context_call());
  if (!p) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaMallocManaged(reinterpret_cast<void**>(p), bytes, flags));
}
namespace {
cudaMemLocation location_of_device(CUdevice d) {
  return d == -1 ? cudaMemLocation{cudaMemLocationTypeHost, 0} : cudaMemLocation{cudaMemLocationTypeDevice, d};
}
cudaMemLocation location_of(CUmemLocation l) { return {static_cast<cudaMemLocationType>(l.type), l.id}; }
}  // namespace
CU_API CUresult cuMemAdvise(CUdeviceptr p, size_t count, int advice, CUdevice device) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemAdvise(dptr(p), count, static_cast<cudaMemoryAdvise>(advice), location_of_device(device)));
}
CU_API CUresult cuMemAdvise_v2(CUdeviceptr p, size_t count, int advice, CUmemLocation location) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemAdvise(dptr(p), count, static_cast<cudaMemoryAdvise>(advice), location_of(location)));
}
CU_API CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice device, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemPrefetchAsync(dptr(p), count, location_of_device(device), 0, s));
}
CU_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t count, CUdevice device, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemPrefetchAsync_ptsz(dptr(p), count, location_of_device(device), 0, s));
}
CU_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t count, CUmemLocation location, unsigned int flags,
                                      CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemPrefetchAsync(dptr(p), count, location_of(location), flags, s));
}
CU_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t count, CUmemLocation location, unsigned int flags,
                                           CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemPrefetchAsync_ptsz(dptr(p), count, location_of(location), flags, s));
}
CU_API CUresult cuStreamAttachMemAsync(CUstream s, CUdeviceptr p, size_t length, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamAttachMemAsync(s, dptr(p), length, flags));
}
CU_API CUresult cuStreamAttachMemAsync_ptsz(CUstream s, CUdeviceptr p, size_t length, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamAttachMemAsync_ptsz(s, dptr(p), length, flags));
}
CU_API CUresult cuMemRangeGetAttribute(void* data, size_t size, int attribute, CUdeviceptr p, size_t count) {
  VMCUDA_DRIVER_IN_CONTEXT(
      cudaMemRangeGetAttribute(data, size, static_cast<cudaMemRangeAttribute>(attribute), dptr(p), count));
}
CU_API CUresult cuMemRangeGetAttributes(void** data, size_t* sizes, int* attributes, size_t n, CUdeviceptr p,
                                        size_t count) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemRangeGetAttributes(
      data, sizes, reinterpret_cast<cudaMemRangeAttribute*>(attributes), n, dptr(p), count));
}

namespace {
// One pointer attribute from the process's allocation map (as cudaPointerGetAttributes).
CUresult pointer_attribute(void* data, int attribute, CUdeviceptr ptr) {
  cudaPointerAttributes a{};
  {
    KeepRuntimeLastError keep;
    if (cudaError_t e = cudaPointerGetAttributes(&a, dptr(ptr))) return to_cu_result(e);
  }
  const bool known = a.type != cudaMemoryTypeUnregistered;
  const auto found = vgpu_db::AllocationMap::process().find(ptr);
  const bool have_range = found.has_value();
  const vgpu_db::Allocation range = found.value_or(vgpu_db::Allocation{});
  switch (attribute) {
    case cu::kPointerContext:
      if (!known) return cu::kInvalidValue;
      *static_cast<CUcontext*>(data) = primary_context(a.device);
      return cu::kSuccess;
    case cu::kPointerMemoryType:
      if (!known) return cu::kInvalidValue;
      *static_cast<unsigned*>(data) = a.type == cudaMemoryTypeHost     ? cu::kMemoryTypeHost
                                      : a.type == cudaMemoryTypeDevice ? cu::kMemoryTypeDevice
                                                                       : cu::kMemoryTypeUnified;
      return cu::kSuccess;
    case cu::kPointerDevicePointer:
      if (!known || !a.devicePointer) return cu::kInvalidValue;
      *static_cast<CUdeviceptr*>(data) = reinterpret_cast<uintptr_t>(a.devicePointer);
      return cu::kSuccess;
    case cu::kPointerHostPointer:
      if (!known || !a.hostPointer) return cu::kInvalidValue;
      *static_cast<void**>(data) = a.hostPointer;
      return cu::kSuccess;
    case cu::kPointerIsManaged:
      *static_cast<int*>(data) = a.type == cudaMemoryTypeManaged;
      return known ? cu::kSuccess : cu::kInvalidValue;
    case cu::kPointerDeviceOrdinal:
      if (!known) return cu::kInvalidValue;
      *static_cast<int*>(data) = a.device;
      return cu::kSuccess;
    case cu::kPointerMapped:
      *static_cast<int*>(data) = known;
      return cu::kSuccess;
    case cu::kPointerSyncMemops:
      if (!known) return cu::kInvalidValue;
      *static_cast<int*>(data) = 1;  // copies through vmcuda are synchronous where CUDA's are
      return cu::kSuccess;
    case cu::kPointerBufferId:
      if (!have_range) return cu::kInvalidValue;
      *static_cast<unsigned long long*>(data) = range.base;  // unique while the allocation lives
      return cu::kSuccess;
    case cu::kPointerRangeStart:
      if (!have_range) return cu::kInvalidValue;
      *static_cast<CUdeviceptr*>(data) = range.base;
      return cu::kSuccess;
    case cu::kPointerRangeSize:
      if (!have_range) return cu::kInvalidValue;
      *static_cast<size_t*>(data) = range.bytes;
      return cu::kSuccess;
    default:
      return cu::kNotSupported;
  }
}

// Whether vmcuda knows `ptr` (device, managed, pinned or registered memory).
bool known_pointer(CUdeviceptr ptr) {
  cudaPointerAttributes a{};
  KeepRuntimeLastError keep;
  return cudaPointerGetAttributes(&a, dptr(ptr)) == cudaSuccess && a.type != cudaMemoryTypeUnregistered;
}
}  // namespace

CU_API CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  VMCUDA_ENTER(enter_driver_call());
  if (!data) return cu::kInvalidValue;
  return pointer_attribute(data, attribute, ptr);
}

// Unlike cuPointerGetAttribute, unknown pointers answer zeros (and CUDA_SUCCESS).
CU_API CUresult cuPointerGetAttributes(unsigned int count, int* attributes, void** data, CUdeviceptr ptr) {
  VMCUDA_ENTER(enter_driver_call());
  if (!attributes || !data) return cu::kInvalidValue;
  for (unsigned i = 0; i < count; ++i) {
    if (!data[i]) return cu::kInvalidValue;
    unsigned long long scratch = 0;
    CUresult e = pointer_attribute(&scratch, attributes[i], ptr);
    if (e == cu::kNotSupported) return e;
    const size_t size = attributes[i] == cu::kPointerMemoryType || attributes[i] == cu::kPointerIsManaged ||
                                attributes[i] == cu::kPointerDeviceOrdinal || attributes[i] == cu::kPointerMapped ||
                                attributes[i] == cu::kPointerSyncMemops
                            ? 4
                            : 8;
    // What the driver gives for memory it does not know (NVIDIA's runtime builds
    // cudaPointerGetAttributes of unregistered memory from them: device -2, hostPointer
    // the pointer itself; device memory's hostPointer stays NULL).
    if (e != cu::kSuccess)
      scratch = attributes[i] == cu::kPointerDeviceOrdinal                ? static_cast<unsigned>(-2)
                : attributes[i] == cu::kPointerHostPointer && !known_pointer(ptr) ? static_cast<unsigned long long>(ptr)
                                                                                  : 0;
    std::memcpy(data[i], &scratch, size);
  }
  return cu::kSuccess;
}

// ------------------------------------------------------------------ streams

// CU_STREAM_* == cudaStream* flags (0, 1).
CU_API CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  VMCUDA_ENTER(enter_context_call());
  if (!s) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaStreamCreateWithFlags(s, flags));
}
CU_API CUresult cuStreamCreateWithPriority(CUstream* s, unsigned int flags, int priority) {
  VMCUDA_ENTER(enter_context_call());
  if (!s) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaStreamCreateWithPriority(s, flags, priority));
}
CU_API CUresult cuStreamDestroy_v2(CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  if (!s) return cu::kInvalidHandle;  // the default stream cannot be destroyed
  VMCUDA_DRIVER_RUNTIME(cudaStreamDestroy(s));
}
CU_API CUresult cuStreamDestroy(CUstream s) { return cuStreamDestroy_v2(s); }
// CUhostFn == cudaHostFn_t. A callback's status is the runtime's code, which equals the
// CUresult for every error a stream can report (7xx).
CU_API CUresult cuLaunchHostFunc(CUstream s, cudaHostFn_t fn, void* data) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaLaunchHostFunc(s, fn, data));
}
CU_API CUresult cuLaunchHostFunc_ptsz(CUstream s, cudaHostFn_t fn, void* data) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaLaunchHostFunc_ptsz(s, fn, data));
}
CU_API CUresult cuStreamAddCallback(CUstream s, cudaStreamCallback_t fn, void* data, unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamAddCallback(s, fn, data, flags));
}
CU_API CUresult cuStreamAddCallback_ptsz(CUstream s, cudaStreamCallback_t fn, void* data, unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamAddCallback_ptsz(s, fn, data, flags));
}
CU_API CUresult cuStreamSynchronize(CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamSynchronize(s));
}
CU_API CUresult cuStreamSynchronize_ptsz(CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamSynchronize_ptsz(s));
}
CU_API CUresult cuStreamQuery(CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamQuery(s));
}
CU_API CUresult cuStreamQuery_ptsz(CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamQuery_ptsz(s));
}
CU_API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamWaitEvent(s, e, flags));
}
CU_API CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamWaitEvent_ptsz(s, e, flags));
}
CU_API CUresult cuStreamGetFlags(CUstream s, unsigned int* flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetFlags(s, flags));
}
CU_API CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int* flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetFlags_ptsz(s, flags));
}
CU_API CUresult cuStreamGetPriority(CUstream s, int* priority) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetPriority(s, priority));
}
CU_API CUresult cuStreamGetPriority_ptsz(CUstream s, int* priority) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetPriority_ptsz(s, priority));
}
// CUstreamAttrID == cudaStreamAttrID and CUstreamAttrValue == cudaStreamAttrValue (the
// launch attributes' ids and 64-byte union; abi_parity_test).
CU_API CUresult cuStreamSetAttribute(CUstream s, int attr, const cudaLaunchAttributeValue* value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamSetAttribute(s, static_cast<cudaLaunchAttributeID>(attr), value));
}
CU_API CUresult cuStreamSetAttribute_ptsz(CUstream s, int attr, const cudaLaunchAttributeValue* value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamSetAttribute_ptsz(s, static_cast<cudaLaunchAttributeID>(attr), value));
}
CU_API CUresult cuStreamGetAttribute(CUstream s, int attr, cudaLaunchAttributeValue* value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetAttribute(s, static_cast<cudaLaunchAttributeID>(attr), value));
}
CU_API CUresult cuStreamGetAttribute_ptsz(CUstream s, int attr, cudaLaunchAttributeValue* value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetAttribute_ptsz(s, static_cast<cudaLaunchAttributeID>(attr), value));
}
CU_API CUresult cuStreamCopyAttributes(CUstream dst, CUstream src) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamCopyAttributes(dst, src));
}
CU_API CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamCopyAttributes_ptsz(dst, src));
}
CU_API CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaDeviceGetStreamPriorityRange(least, greatest));
}

// ------------------------------------------------------------------ events

// CU_EVENT_* == cudaEvent* flags (0, 1, 2, 4).
CU_API CUresult cuEventCreate(CUevent* e, unsigned int flags) {
  VMCUDA_ENTER(enter_context_call());
  if (!e) return cu::kInvalidValue;
  VMCUDA_DRIVER_RUNTIME(cudaEventCreateWithFlags(e, flags));
}
CU_API CUresult cuEventRecord(CUevent e, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventRecord(e, s));
}
CU_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventRecord_ptsz(e, s));
}
CU_API CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventRecordWithFlags(e, s, flags));
}
CU_API CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventRecordWithFlags_ptsz(e, s, flags));
}
CU_API CUresult cuEventSynchronize(CUevent e) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventSynchronize(e));
}
CU_API CUresult cuEventQuery(CUevent e) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventQuery(e));
}
CU_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventElapsedTime(ms, start, end));
}
CU_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) { return cuEventElapsedTime(ms, start, end); }
CU_API CUresult cuEventDestroy_v2(CUevent e) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaEventDestroy(e));
}
CU_API CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

// IPC (the runtime's cudaIpc*, guest-lib/src/ipc.cc): the handles are the same 64 bytes.
namespace {
cudaIpcMemHandle_t to_runtime(const CUipcMemHandle& h) {
  cudaIpcMemHandle_t r;
  std::memcpy(r.reserved, h.reserved, sizeof r.reserved);
  return r;
}
cudaIpcEventHandle_t to_runtime(const CUipcEventHandle& h) {
  cudaIpcEventHandle_t r;
  std::memcpy(r.reserved, h.reserved, sizeof r.reserved);
  return r;
}
}  // namespace
CU_API CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr p) {
  static_assert(sizeof(CUipcMemHandle) == sizeof(cudaIpcMemHandle_t));
  VMCUDA_DRIVER_IN_CONTEXT(cudaIpcGetMemHandle(reinterpret_cast<cudaIpcMemHandle_t*>(handle), dptr(p)));
}
CU_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* out, CUipcMemHandle handle, unsigned int flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaIpcOpenMemHandle(reinterpret_cast<void**>(out), to_runtime(handle), flags));
}
CU_API CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle handle, unsigned int flags) {
  return cuIpcOpenMemHandle_v2(dptr, handle, flags);
}
CU_API CUresult cuIpcCloseMemHandle(CUdeviceptr p) { VMCUDA_DRIVER_IN_CONTEXT(cudaIpcCloseMemHandle(dptr(p))); }
CU_API CUresult cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent e) {
  static_assert(sizeof(CUipcEventHandle) == sizeof(cudaIpcEventHandle_t));
  VMCUDA_DRIVER_IN_CONTEXT(cudaIpcGetEventHandle(reinterpret_cast<cudaIpcEventHandle_t*>(handle), e));
}
CU_API CUresult cuIpcOpenEventHandle(CUevent* e, CUipcEventHandle handle) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaIpcOpenEventHandle(e, to_runtime(handle)));
}
