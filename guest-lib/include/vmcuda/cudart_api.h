// Declarations of the libcudart.so.13 entry points that guest-lib implements by hand, with
// NVIDIA's signatures (cuda_runtime_api.h, crt/host_runtime.h, crt/device_functions.h)
// spelled in vmcuda's own types. Every other export is a generated stub that returns
// cudaErrorNotSupported until its API area remotes it (guest-lib/README.md).
//
// Tests call these directly. The ABI parity tests include this file inside a namespace
// (VMCUDA_CUDART_PARITY_NAMESPACE) and compare each signature with NVIDIA's declaration.
#pragma once

#include "vmcuda/cudart_types.h"

#ifdef VMCUDA_CUDART_PARITY_NAMESPACE
#define VMCUDA_CUDART_API
#else
#define VMCUDA_CUDART_API extern "C" __attribute__((visibility("default")))
#endif

VMCUDA_CUDART_BEGIN

// error area (guest-lib/src/error.cc)
VMCUDA_CUDART_API const char* cudaGetErrorString(cudaError_t error);
VMCUDA_CUDART_API const char* cudaGetErrorName(cudaError_t error);
VMCUDA_CUDART_API cudaError_t cudaGetLastError(void);
VMCUDA_CUDART_API cudaError_t cudaPeekAtLastError(void);

// device area (guest-lib/src/device.cc)
VMCUDA_CUDART_API cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);

// memory area (guest-lib/src/memory.cc)
VMCUDA_CUDART_API struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                                     enum cudaChannelFormatKind f);
VMCUDA_CUDART_API cudaError_t cudaMalloc(void** devPtr, size_t size);
VMCUDA_CUDART_API cudaError_t cudaFree(void* devPtr);
VMCUDA_CUDART_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemset(void* devPtr, int value, size_t count);
VMCUDA_CUDART_API cudaError_t cudaMallocHost(void** ptr, size_t size);
VMCUDA_CUDART_API cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaFreeHost(void* ptr);
VMCUDA_CUDART_API cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost);
VMCUDA_CUDART_API cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaHostUnregister(void* ptr);
VMCUDA_CUDART_API cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, struct cudaMemLocation location,
                                                   unsigned int flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count,
                                                        struct cudaMemLocation location, unsigned int flags,
                                                        cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice,
                                            struct cudaMemLocation location);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetHostAtomicCapabilities(unsigned int* capabilities,
                                                                  const enum cudaAtomicOperation* operations,
                                                                  unsigned int count, int device);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                                                 const enum cudaAtomicOperation* operations,
                                                                 unsigned int count, int srcDevice, int dstDevice);
VMCUDA_CUDART_API cudaError_t cudaCtxResetPersistingL2Cache(void);
VMCUDA_CUDART_API cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                                                 enum cudaFlushGPUDirectRDMAWritesScope scope);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements,
                                                                   const struct cudaChannelFormatDesc* fmtDesc,
                                                                   int device);
VMCUDA_CUDART_API cudaError_t cudaOccupancyMaxPotentialClusterSize(int* clusterSize, const void* func,
                                                                   const cudaLaunchConfig_t* launchConfig);
VMCUDA_CUDART_API cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc* pResViewDesc,
                                                                   cudaTextureObject_t texObject);
VMCUDA_CUDART_API cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t graphExec, unsigned long long* flags);
VMCUDA_CUDART_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                              cudaGraphInstantiateParams* instantiateParams);
VMCUDA_CUDART_API cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                                   cudaGraphInstantiateParams* instantiateParams);
VMCUDA_CUDART_API cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                             const cudaGraphNode_t* dependencies,
                                                             const cudaGraphEdgeData* dependencyData,
                                                             size_t numDependencies, enum cudaStreamCaptureMode mode);
VMCUDA_CUDART_API cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                                  const cudaGraphNode_t* dependencies,
                                                                  const cudaGraphEdgeData* dependencyData,
                                                                  size_t numDependencies,
                                                                  enum cudaStreamCaptureMode mode);
VMCUDA_CUDART_API cudaError_t cudaMemRangeGetAttribute(void* data, size_t dataSize, enum cudaMemRangeAttribute attribute,
                                                       const void* devPtr, size_t count);
VMCUDA_CUDART_API cudaError_t cudaMemRangeGetAttributes(void** data, size_t* dataSizes,
                                                        enum cudaMemRangeAttribute* attributes, size_t numAttributes,
                                                        const void* devPtr, size_t count);
VMCUDA_CUDART_API cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length,
                                                       unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length,
                                                            unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaMemPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                                        struct cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                                        size_t numPrefetchLocs, unsigned long long flags,
                                                        cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                                             struct cudaMemLocation* prefetchLocs,
                                                             size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                             unsigned long long flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemDiscardBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                                       unsigned long long flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemDiscardBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                                            unsigned long long flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                                                  struct cudaMemLocation* prefetchLocs,
                                                                  size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                                  unsigned long long flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemDiscardAndPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                                                       struct cudaMemLocation* prefetchLocs,
                                                                       size_t* prefetchLocIdxs,
                                                                       size_t numPrefetchLocs,
                                                                       unsigned long long flags, cudaStream_t stream);

// stream-ordered allocation and memory pools (guest-lib/src/memory_pool.cc).
VMCUDA_CUDART_API cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream);
VMCUDA_CUDART_API cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream);
VMCUDA_CUDART_API cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                                      cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                                           cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream);
VMCUDA_CUDART_API cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device);
VMCUDA_CUDART_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool);
VMCUDA_CUDART_API cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const struct cudaMemPoolProps* poolProps);
VMCUDA_CUDART_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool);
VMCUDA_CUDART_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep);
VMCUDA_CUDART_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value);
VMCUDA_CUDART_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value);
VMCUDA_CUDART_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc* descList,
                                                   size_t count);
VMCUDA_CUDART_API cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                                   struct cudaMemLocation* location);
VMCUDA_CUDART_API cudaError_t cudaMemPoolExportToShareableHandle(void* shareableHandle, cudaMemPool_t memPool,
                                                                 enum cudaMemAllocationHandleType handleType,
                                                                 unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t* memPool, void* shareableHandle,
                                                                   enum cudaMemAllocationHandleType handleType,
                                                                   unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData* exportData, void* ptr);
VMCUDA_CUDART_API cudaError_t cudaMemPoolImportPointer(void** ptr, cudaMemPool_t memPool,
                                                       struct cudaMemPoolPtrExportData* exportData);

// launch area (guest-lib/src/launch.cc): the <<<>>> configuration stack and launches.
VMCUDA_CUDART_API cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                               size_t sharedMem, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                                    size_t sharedMem, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                                                 size_t sharedMem, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args,
                                                      size_t sharedMem, cudaStream_t stream);
// Cooperative launches (every block co-resident: grid-wide barriers) and launches with
// attributes (cooperative, priority, clusters), batched like the others (launch.cc).
VMCUDA_CUDART_API cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                                          size_t sharedMem, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim,
                                                               void** args, size_t sharedMem, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args);
VMCUDA_CUDART_API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                                       void** args);
VMCUDA_CUDART_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                       struct CUstream_st* stream);
VMCUDA_CUDART_API cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem,
                                                         void* stream);

// module area (guest-lib/src/module.cc): what nvcc's generated host code calls.
VMCUDA_CUDART_API void** __cudaRegisterFatBinary(void* fatCubin);
VMCUDA_CUDART_API void __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
VMCUDA_CUDART_API void __cudaUnregisterFatBinary(void** fatCubinHandle);
VMCUDA_CUDART_API void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                              const char* deviceName, int thread_limit, uint3* tid, uint3* bid,
                                              dim3* bDim, dim3* gDim, int* wSize);
VMCUDA_CUDART_API void __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress,
                                         const char* deviceName, int ext, size_t size, int constant, int global);
VMCUDA_CUDART_API void __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress, char* deviceAddress,
                                                const char* deviceName, int ext, size_t size, int constant, int global);
VMCUDA_CUDART_API char __cudaInitModule(void** fatCubinHandle);
VMCUDA_CUDART_API cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun);
VMCUDA_CUDART_API cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, const void* entryFuncAddr);
VMCUDA_CUDART_API cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr, const void* symbolPtr);

// function area (guest-lib/src/function.cc)
VMCUDA_CUDART_API cudaError_t cudaFuncGetName(const char** name, const void* func);

// driver entry points (guest-lib/src/driver_proc.cc: cuGetProcAddress's table)
VMCUDA_CUDART_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                                      enum cudaDriverEntryPointQueryResult* driverStatus);
VMCUDA_CUDART_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                                               unsigned int cudaVersion, unsigned long long flags,
                                                               enum cudaDriverEntryPointQueryResult* driverStatus);

// profiler (guest-lib/src/profiler.cc)
VMCUDA_CUDART_API cudaError_t cudaProfilerStart(void);
VMCUDA_CUDART_API cudaError_t cudaProfilerStop(void);

// stream area (guest-lib/src/stream.cc): guest-made handles, creation queued (lazy RPC).
VMCUDA_CUDART_API cudaError_t cudaStreamCreate(cudaStream_t* pStream);
VMCUDA_CUDART_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority);
VMCUDA_CUDART_API cudaError_t cudaStreamDestroy(cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaStreamQuery(cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags);
VMCUDA_CUDART_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
// Stream attributes (cudaStreamAttrID/cudaStreamAttrValue are the launch attributes').
VMCUDA_CUDART_API cudaError_t cudaStreamSetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                     const cudaLaunchAttributeValue* value);
VMCUDA_CUDART_API cudaError_t cudaStreamGetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                     cudaLaunchAttributeValue* value_out);
VMCUDA_CUDART_API cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src);
// The per-thread-default-stream variants (nvcc --default-stream per-thread): stream 0 means
// cudaStreamPerThread. Same signatures; cuda_runtime_api.h declares them only through its
// __CUDART_API_PTSZ renaming.
VMCUDA_CUDART_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int* flags);
VMCUDA_CUDART_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int* priority);
VMCUDA_CUDART_API cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                          const cudaLaunchAttributeValue* value);
VMCUDA_CUDART_API cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                                          cudaLaunchAttributeValue* value_out);
VMCUDA_CUDART_API cudaError_t cudaStreamCopyAttributes_ptsz(cudaStream_t dst, cudaStream_t src);
// host functions (guest-lib/src/host_func.cc): run in this process, in stream order.
VMCUDA_CUDART_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData);
VMCUDA_CUDART_API cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                                    unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void* userData);
VMCUDA_CUDART_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                         void* userData, unsigned int flags);

// event area (guest-lib/src/event.cc)
VMCUDA_CUDART_API cudaError_t cudaEventCreate(cudaEvent_t* event);
VMCUDA_CUDART_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaEventQuery(cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaEventDestroy(cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
// IPC between programs of one VM (ipc.cc).
VMCUDA_CUDART_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr);
VMCUDA_CUDART_API cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaIpcCloseMemHandle(void* devPtr);
VMCUDA_CUDART_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle);
VMCUDA_CUDART_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags);

// asynchronous copies and memsets (guest-lib/src/memory_async.cc)
VMCUDA_CUDART_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                              cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                                   cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count, cudaStream_t stream);

// pitched memory, 2D copies and memsets (guest-lib/src/memory_2d.cc); pointer attributes
// (memory.cc, answered from the process's allocation map)
VMCUDA_CUDART_API cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                           size_t height, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                                size_t height, enum cudaMemcpyKind kind, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                                                cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch,
                                                     size_t width, size_t height, enum cudaMemcpyKind kind,
                                                     cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemset2DAsync_ptsz(void* devPtr, size_t pitch, int value, size_t width,
                                                     size_t height, cudaStream_t stream);
// 3D pitched memory (guest-lib/src/memory_3d.cc): made of the 2D calls, slice by slice.
VMCUDA_CUDART_API cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr, struct cudaExtent extent);
VMCUDA_CUDART_API cudaError_t cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent);
VMCUDA_CUDART_API cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent,
                                                cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms* p);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms* p, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr pitchedDevPtr, int value,
                                                     struct cudaExtent extent, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms* p, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr);

// arrays and textures area (guest-lib/src/arrays.cc)
VMCUDA_CUDART_API cudaError_t cudaMallocArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc, size_t width,
                                              size_t height, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaMalloc3DArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                                                struct cudaExtent extent, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* mipmappedArray,
                                                       const struct cudaChannelFormatDesc* desc, struct cudaExtent extent,
                                                       unsigned int numLevels, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGetMipmappedArrayLevel(cudaArray_t* levelArray,
                                                         cudaMipmappedArray_const_t mipmappedArray, unsigned int level);
VMCUDA_CUDART_API cudaError_t cudaFreeArray(cudaArray_t array);
VMCUDA_CUDART_API cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray);
VMCUDA_CUDART_API cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc* desc, struct cudaExtent* extent,
                                               unsigned int* flags, cudaArray_t array);
VMCUDA_CUDART_API cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc* desc, cudaArray_const_t array);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                                  size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                                       size_t spitch, size_t width, size_t height,
                                                       enum cudaMemcpyKind kind, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                            const void* src, size_t spitch, size_t width, size_t height,
                                                            enum cudaMemcpyKind kind, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                                    size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src,
                                                         size_t wOffset, size_t hOffset, size_t width, size_t height,
                                                         enum cudaMemcpyKind kind, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void* dst, size_t dpitch, cudaArray_const_t src,
                                                              size_t wOffset, size_t hOffset, size_t width,
                                                              size_t height, enum cudaMemcpyKind kind,
                                                              cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                                       cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                                       size_t width, size_t height, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                                size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                                     size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                                  size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                                       size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                                     cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                                     size_t count, enum cudaMemcpyKind kind);
// Library management (library.cc), kernel parameters, valid devices, stream devices, the
// private tables' door, memory pools by location and batched copies.
VMCUDA_CUDART_API cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code,
                                                  enum cudaJitOption* jitOptions, void** jitOptionsValues,
                                                  unsigned int numJitOptions, enum cudaLibraryOption* libraryOptions,
                                                  void** libraryOptionValues, unsigned int numLibraryOptions);
VMCUDA_CUDART_API cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t* library, const char* fileName,
                                                      enum cudaJitOption* jitOptions, void** jitOptionsValues,
                                                      unsigned int numJitOptions,
                                                      enum cudaLibraryOption* libraryOptions,
                                                      void** libraryOptionValues, unsigned int numLibraryOptions);
VMCUDA_CUDART_API cudaError_t cudaLibraryUnload(cudaLibrary_t library);
VMCUDA_CUDART_API cudaError_t cudaLibraryGetKernel(cudaKernel_t* pKernel, cudaLibrary_t library, const char* name);
VMCUDA_CUDART_API cudaError_t cudaLibraryGetGlobal(void** dptr, size_t* bytes, cudaLibrary_t library,
                                                   const char* name);
VMCUDA_CUDART_API cudaError_t cudaLibraryGetManaged(void** dptr, size_t* bytes, cudaLibrary_t library,
                                                    const char* name);
VMCUDA_CUDART_API cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr,
                                                              int value, int device);
VMCUDA_CUDART_API cudaError_t cudaFuncGetParamInfo(const void* func, size_t paramIndex, size_t* paramOffset,
                                                   size_t* paramSize);
VMCUDA_CUDART_API cudaError_t cudaSetValidDevices(int* device_arr, int len);
VMCUDA_CUDART_API cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int* device);
VMCUDA_CUDART_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int* device);
VMCUDA_CUDART_API cudaError_t cudaGetExportTable(const void** ppExportTable, const cudaUUID_t* pExportTableId);
VMCUDA_CUDART_API cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* memPool, struct cudaMemLocation* location,
                                                       enum cudaMemAllocationType type);
VMCUDA_CUDART_API cudaError_t cudaMemGetMemPool(cudaMemPool_t* memPool, struct cudaMemLocation* location,
                                                enum cudaMemAllocationType type);
VMCUDA_CUDART_API cudaError_t cudaMemSetMemPool(struct cudaMemLocation* location, enum cudaMemAllocationType type,
                                                cudaMemPool_t memPool);
VMCUDA_CUDART_API cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes,
                                                   size_t count, struct cudaMemcpyAttributes* attrs,
                                                   size_t* attrsIdxs, size_t numAttrs, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpyBatchAsync_ptsz(void* const* dsts, const void* const* srcs,
                                                        const size_t* sizes, size_t count,
                                                        struct cudaMemcpyAttributes* attrs, size_t* attrsIdxs,
                                                        size_t numAttrs, cudaStream_t stream);
// rt3 (calls.def 0x1d00): 3D peer and batched 3D copies, array queries, library kernel
// enumeration, capture dependencies.
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms* p);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms* p);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms* p, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms* p, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp* opList,
                                                     unsigned long long flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t numOps, struct cudaMemcpy3DBatchOp* opList,
                                                          unsigned long long flags, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaArrayGetPlane(cudaArray_t* pPlaneArray, cudaArray_t hArray, unsigned int planeIdx);
VMCUDA_CUDART_API cudaError_t cudaArrayGetMemoryRequirements(struct cudaArrayMemoryRequirements* memoryRequirements,
                                                             cudaArray_t array, int device);
VMCUDA_CUDART_API cudaError_t cudaMipmappedArrayGetMemoryRequirements(
    struct cudaArrayMemoryRequirements* memoryRequirements, cudaMipmappedArray_t mipmap, int device);
VMCUDA_CUDART_API cudaError_t cudaArrayGetSparseProperties(struct cudaArraySparseProperties* sparseProperties,
                                                           cudaArray_t array);
VMCUDA_CUDART_API cudaError_t cudaMipmappedArrayGetSparseProperties(struct cudaArraySparseProperties* sparseProperties,
                                                                    cudaMipmappedArray_t mipmap);
VMCUDA_CUDART_API cudaError_t cudaLibraryGetKernelCount(unsigned int* count, cudaLibrary_t lib);
VMCUDA_CUDART_API cudaError_t cudaDeviceRegisterAsyncNotification(int device, cudaAsyncCallback callbackFunc,
                                                                  void* userData, cudaAsyncCallbackHandle_t* callback);
VMCUDA_CUDART_API cudaError_t cudaDeviceUnregisterAsyncNotification(int device, cudaAsyncCallbackHandle_t callback);
VMCUDA_CUDART_API cudaError_t cudaLogsRegisterCallback(cudaLogsCallback_t callbackFunc, void* userData,
                                                       cudaLogsCallbackHandle* callback_out);
VMCUDA_CUDART_API cudaError_t cudaLogsUnregisterCallback(cudaLogsCallbackHandle callback);
VMCUDA_CUDART_API cudaError_t cudaLogsCurrent(cudaLogIterator* iterator_out, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaLogsDumpToFile(cudaLogIterator* iterator, const char* pathToFile, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaLogsDumpToMemory(cudaLogIterator* iterator, char* buffer, size_t* size,
                                                   unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t* kernels, unsigned int numKernels,
                                                          cudaLibrary_t lib);
VMCUDA_CUDART_API cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t* dependencies,
                                                                  const struct cudaGraphEdgeData* dependencyData,
                                                                  size_t numDependencies, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream,
                                                                       cudaGraphNode_t* dependencies,
                                                                       const struct cudaGraphEdgeData* dependencyData,
                                                                       size_t numDependencies, unsigned int flags);
// The per-thread default stream's synchronous forms (nvcc --default-stream per-thread; not
// declared by cuda_runtime_api.h without its renaming) and the array copies' async forms.
VMCUDA_CUDART_API cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemset_ptds(void* devPtr, int value, size_t count);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                                size_t height, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemset2D_ptds(void* devPtr, size_t pitch, int value, size_t width, size_t height);
VMCUDA_CUDART_API cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms* p);
VMCUDA_CUDART_API cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count, size_t offset,
                                                      enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count, size_t offset,
                                                        enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                                       size_t spitch, size_t width, size_t height,
                                                       enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DFromArray_ptds(void* dst, size_t dpitch, cudaArray_const_t src,
                                                         size_t wOffset, size_t hOffset, size_t width, size_t height,
                                                         enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                                            cudaArray_const_t src, size_t wOffsetSrc,
                                                            size_t hOffsetSrc, size_t width, size_t height,
                                                            enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                                     size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromArray_ptds(void* dst, cudaArray_const_t src, size_t wOffset,
                                                       size_t hOffset, size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                                          cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                                          size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                          const void* src, size_t count, enum cudaMemcpyKind kind,
                                                          cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromArrayAsync_ptsz(void* dst, cudaArray_const_t src, size_t wOffset,
                                                            size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                                            cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaCreateTextureObject(cudaTextureObject_t* pTexObject,
                                                      const struct cudaResourceDesc* pResDesc,
                                                      const struct cudaTextureDesc* pTexDesc,
                                                      const struct cudaResourceViewDesc* pResViewDesc);
VMCUDA_CUDART_API cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject);
VMCUDA_CUDART_API cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc* pResDesc,
                                                               cudaTextureObject_t texObject);
VMCUDA_CUDART_API cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc* pTexDesc,
                                                              cudaTextureObject_t texObject);
VMCUDA_CUDART_API cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* pSurfObject,
                                                      const struct cudaResourceDesc* pResDesc);
VMCUDA_CUDART_API cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject);
VMCUDA_CUDART_API cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc* pResDesc,
                                                               cudaSurfaceObject_t surfObject);

// module variables (guest-lib/src/symbol.cc): __device__ and __constant__ variables by
// their host shadow's address. With NVIDIA's default arguments.
VMCUDA_CUDART_API cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol);
VMCUDA_CUDART_API cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset = 0,
                                                 enum cudaMemcpyKind kind = cudaMemcpyHostToDevice);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset = 0,
                                                   enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                                      size_t offset, enum cudaMemcpyKind kind,
                                                      cudaStream_t stream = nullptr);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                                        enum cudaMemcpyKind kind, cudaStream_t stream = nullptr);
VMCUDA_CUDART_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src, size_t count,
                                                           size_t offset, enum cudaMemcpyKind kind,
                                                           cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count,
                                                             size_t offset, enum cudaMemcpyKind kind,
                                                             cudaStream_t stream);

// function attributes and occupancy (guest-lib/src/function.cc): cached per kernel and device.
VMCUDA_CUDART_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func);
VMCUDA_CUDART_API cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value);
VMCUDA_CUDART_API cudaError_t cudaOccupancyMaxActiveClusters(int* numClusters, const void* func,
                                                             const cudaLaunchConfig_t* config);
VMCUDA_CUDART_API cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, const void* func,
                                                                        int numBlocks, int blockSize);
VMCUDA_CUDART_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func,
                                                                            int blockSize, size_t dynamicSMemSize);
VMCUDA_CUDART_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks,
                                                                                     const void* func,
                                                                                     int blockSize,
                                                                                     size_t dynamicSMemSize,
                                                                                     unsigned int flags);

// Exported by NVIDIA's library but declared in no header. Signatures from its machine code
// (argument registers used) and from LLVM flang's CUDA Fortran runtime, which calls
// __cudaRegisterHostVar.
VMCUDA_CUDART_API void __cudaRegisterHostVar(void** fatCubinHandle, const char* deviceName, char* hostVar, size_t size);
VMCUDA_CUDART_API void __cudaRegisterUnifiedTable(void** fatCubinHandle, void* table1, void* table2, void* table3,
                                                  void* table4);
/// NVIDIA's body is `xor eax,eax; ret`: whatever it returns is zero.
VMCUDA_CUDART_API void* __cudaGetProcAddress(void);


// graph area (guest-lib/src/graph.cc)
VMCUDA_CUDART_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
VMCUDA_CUDART_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
VMCUDA_CUDART_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph);
VMCUDA_CUDART_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph);
VMCUDA_CUDART_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* pCaptureStatus);
VMCUDA_CUDART_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                         enum cudaStreamCaptureStatus* pCaptureStatus);
VMCUDA_CUDART_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus* captureStatus_out,
                                                       unsigned long long* id_out, cudaGraph_t* graph_out,
                                                       const cudaGraphNode_t** dependencies_out,
                                                       const struct cudaGraphEdgeData** edgeData_out,
                                                       size_t* numDependencies_out);
VMCUDA_CUDART_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                                            enum cudaStreamCaptureStatus* captureStatus_out,
                                                            unsigned long long* id_out, cudaGraph_t* graph_out,
                                                            const cudaGraphNode_t** dependencies_out,
                                                            const struct cudaGraphEdgeData** edgeData_out,
                                                            size_t* numDependencies_out);
VMCUDA_CUDART_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode);
VMCUDA_CUDART_API cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGraphDestroy(cudaGraph_t graph);
VMCUDA_CUDART_API cudaError_t cudaGraphClone(cudaGraph_t* pGraphClone, cudaGraph_t originalGraph);
VMCUDA_CUDART_API cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                     const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                     const struct cudaKernelNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                     const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                     const struct cudaMemcpy3DParms* pCopyParams);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                       const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                       void* dst, const void* src, size_t count,
                                                       enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                     const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                     const struct cudaMemsetParams* pMemsetParams);
VMCUDA_CUDART_API cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                   const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                   const struct cudaHostNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                    const cudaGraphNode_t* pDependencies, size_t numDependencies);
VMCUDA_CUDART_API cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                          const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                          cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                        const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                        cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                         const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                         cudaGraph_t childGraph);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                       const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                       struct cudaMemAllocNodeParams* nodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                      const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                                      void* dptr);
VMCUDA_CUDART_API cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node, struct cudaMemAllocNodeParams* params_out);
VMCUDA_CUDART_API cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr_out);
VMCUDA_CUDART_API cudaError_t cudaDeviceGraphMemTrim(int device);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void* value);
VMCUDA_CUDART_API cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void* value);
VMCUDA_CUDART_API cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                       const cudaGraphNode_t* to, const struct cudaGraphEdgeData* edgeData,
                                                       size_t numDependencies);
VMCUDA_CUDART_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes);
VMCUDA_CUDART_API cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* pRootNodes,
                                                    size_t* pNumRootNodes);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType* pType);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t* pNode, cudaGraphNode_t originalNode,
                                                       cudaGraph_t clonedGraph);
VMCUDA_CUDART_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                   unsigned long long flags);
VMCUDA_CUDART_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                            unsigned long long flags);
VMCUDA_CUDART_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
VMCUDA_CUDART_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);
VMCUDA_CUDART_API cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                               const struct cudaKernelNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                                  struct cudaGraphExecUpdateResultInfo* resultInfo);
// Graph nodes after their creation (graph_nodes.cc).
VMCUDA_CUDART_API cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, struct cudaKernelNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                                           const struct cudaKernelNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphKernelNodeGetAttribute(cudaGraphNode_t hNode, enum cudaLaunchAttributeID attr,
                                                              union cudaLaunchAttributeValue* value_out);
VMCUDA_CUDART_API cudaError_t cudaGraphKernelNodeSetAttribute(cudaGraphNode_t hNode, enum cudaLaunchAttributeID attr,
                                                              const union cudaLaunchAttributeValue* value);
VMCUDA_CUDART_API cudaError_t cudaGraphKernelNodeCopyAttributes(cudaGraphNode_t hDst, cudaGraphNode_t hSrc);
VMCUDA_CUDART_API cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node, struct cudaMemcpy3DParms* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node, const struct cudaMemcpy3DParms* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst, const void* src,
                                                             size_t count, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node, const void* symbol,
                                                                   const void* src, size_t count, size_t offset,
                                                                   enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void* dst,
                                                                     const void* symbol, size_t count, size_t offset,
                                                                     enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                             const cudaGraphNode_t* pDependencies,
                                                             size_t numDependencies, const void* symbol,
                                                             const void* src, size_t count, size_t offset,
                                                             enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                               const cudaGraphNode_t* pDependencies,
                                                               size_t numDependencies, void* dst, const void* symbol,
                                                               size_t count, size_t offset, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, struct cudaMemsetParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node, const struct cudaMemsetParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, struct cudaHostNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const struct cudaHostNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event_out);
VMCUDA_CUDART_API cudaError_t cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event_out);
VMCUDA_CUDART_API cudaError_t cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* pGraph);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* pDependencies,
                                                           struct cudaGraphEdgeData* edgeData, size_t* pNumDependencies);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* pDependentNodes,
                                                             struct cudaGraphEdgeData* edgeData,
                                                             size_t* pNumDependentNodes);
VMCUDA_CUDART_API cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                                                struct cudaGraphEdgeData* edgeData, size_t* numEdges);
VMCUDA_CUDART_API cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                          const cudaGraphNode_t* to,
                                                          const struct cudaGraphEdgeData* edgeData,
                                                          size_t numDependencies);
VMCUDA_CUDART_API cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                                      unsigned int* isEnabled);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                                      unsigned int isEnabled);
VMCUDA_CUDART_API cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                               const struct cudaMemcpy3DParms* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                                 void* dst, const void* src, size_t count,
                                                                 enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                                       const void* symbol, const void* src,
                                                                       size_t count, size_t offset,
                                                                       enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(cudaGraphExec_t hGraphExec,
                                                                         cudaGraphNode_t node, void* dst,
                                                                         const void* symbol, size_t count,
                                                                         size_t offset, enum cudaMemcpyKind kind);
VMCUDA_CUDART_API cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                               const struct cudaMemsetParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                             const struct cudaHostNodeParams* pNodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                                   cudaGraph_t childGraph);
VMCUDA_CUDART_API cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                                                   cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                                                 cudaEvent_t event);
VMCUDA_CUDART_API cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle* pHandle_out, cudaGraph_t graph,
                                                               unsigned int defaultLaunchValue, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGraphAddNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t* pDependencies,
                                               const struct cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                               struct cudaGraphNodeParams* nodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node, struct cudaGraphNodeParams* nodeParams);
VMCUDA_CUDART_API cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t graphExec, cudaGraphNode_t node,
                                                         struct cudaGraphNodeParams* nodeParams);
VMCUDA_CUDART_API cudaError_t cudaUserObjectCreate(cudaUserObject_t* object_out, void* ptr, cudaHostFn_t destroy,
                                                   unsigned int initialRefcount, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count);
VMCUDA_CUDART_API cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count);
VMCUDA_CUDART_API cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                                        unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count);
VMCUDA_CUDART_API cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long* streamId);
VMCUDA_CUDART_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long* streamId);

VMCUDA_CUDART_END

/// The hand-written entry points that cuda_runtime_api.h declares (for the parity test).
#define VMCUDA_CUDART_PUBLIC_HAND_WRITTEN(X) \
  X(cudaLibraryLoadData)                     \
  X(cudaLibraryLoadFromFile)                 \
  X(cudaLibraryUnload)                       \
  X(cudaLibraryGetKernel)                    \
  X(cudaLibraryGetGlobal)                    \
  X(cudaLibraryGetManaged)                   \
  X(cudaKernelSetAttributeForDevice)         \
  X(cudaFuncGetParamInfo)                    \
  X(cudaSetValidDevices)                     \
  X(cudaStreamGetDevice)                     \
  X(cudaGetExportTable)                      \
  X(cudaMemGetDefaultMemPool)                \
  X(cudaMemGetMemPool)                       \
  X(cudaMemSetMemPool)                       \
  X(cudaMemcpyBatchAsync)                    \
  X(cudaMemcpy3DPeer)                        \
  X(cudaMemcpy3DPeerAsync)                   \
  X(cudaMemcpy3DBatchAsync)                  \
  X(cudaArrayGetPlane)                       \
  X(cudaArrayGetMemoryRequirements)          \
  X(cudaMipmappedArrayGetMemoryRequirements) \
  X(cudaArrayGetSparseProperties)            \
  X(cudaMipmappedArrayGetSparseProperties)   \
  X(cudaLibraryGetKernelCount)               \
  X(cudaLibraryEnumerateKernels)             \
  X(cudaDeviceRegisterAsyncNotification)    \
  X(cudaDeviceUnregisterAsyncNotification)  \
  X(cudaLogsRegisterCallback)                \
  X(cudaLogsUnregisterCallback)              \
  X(cudaLogsCurrent)                         \
  X(cudaLogsDumpToFile)                      \
  X(cudaLogsDumpToMemory)                    \
  X(cudaStreamUpdateCaptureDependencies)     \
  X(cudaGetErrorString)                      \
  X(cudaGetErrorName)                        \
  X(cudaGetLastError)                        \
  X(cudaPeekAtLastError)                     \
  X(cudaRuntimeGetVersion)                   \
  X(cudaCreateChannelDesc)                   \
  X(cudaMalloc)                              \
  X(cudaFree)                                \
  X(cudaMemcpy)                              \
  X(cudaMemset)                              \
  X(cudaMallocHost)                          \
  X(cudaHostAlloc)                           \
  X(cudaFreeHost)                            \
  X(cudaHostGetDevicePointer)                \
  X(cudaHostGetFlags)                        \
  X(cudaHostRegister)                        \
  X(cudaHostUnregister)                      \
  X(cudaMallocManaged)                       \
  X(cudaMemAdvise)                           \
  X(cudaMemPrefetchAsync)                    \
  X(cudaMemRangeGetAttribute)                \
  X(cudaMemRangeGetAttributes)               \
  X(cudaGraphInstantiateWithParams)          \
  X(cudaGraphExecGetFlags)                   \
  X(cudaGetTextureObjectResourceViewDesc)    \
  X(cudaStreamBeginCaptureToGraph)           \
  X(cudaDeviceGetHostAtomicCapabilities)     \
  X(cudaDeviceGetP2PAtomicCapabilities)      \
  X(cudaCtxResetPersistingL2Cache)           \
  X(cudaDeviceFlushGPUDirectRDMAWrites)      \
  X(cudaDeviceGetTexture1DLinearMaxWidth)    \
  X(cudaOccupancyMaxPotentialClusterSize)    \
  X(cudaStreamAttachMemAsync)                \
  X(cudaMemPrefetchBatchAsync)               \
  X(cudaMemDiscardBatchAsync)                \
  X(cudaMemDiscardAndPrefetchBatchAsync)     \
  X(cudaLaunchKernel)                        \
  X(cudaLaunchCooperativeKernel)             \
  X(cudaLaunchKernelExC)                     \
  X(cudaGetKernel)                           \
  X(cudaGetFuncBySymbol)                     \
  X(cudaFuncGetName)                         \
  X(cudaGetDriverEntryPoint)                 \
  X(cudaGetDriverEntryPointByVersion)        \
  X(cudaProfilerStart)                       \
  X(cudaProfilerStop)                        \
  VMCUDA_CUDART_STREAM_EVENT_HAND_WRITTEN(X) \
  VMCUDA_CUDART_SYMBOL_PITCH_FUNC_HAND_WRITTEN(X)

/// The stream, event and async copy entry points (for the parity test, through the list
/// above; the _ptsz variants are not declared by cuda_runtime_api.h without its renaming).
#define VMCUDA_CUDART_STREAM_EVENT_HAND_WRITTEN(X) \
  X(cudaStreamCreate)                              \
  X(cudaStreamCreateWithFlags)                     \
  X(cudaStreamCreateWithPriority)                  \
  X(cudaStreamDestroy)                             \
  X(cudaStreamSynchronize)                         \
  X(cudaStreamQuery)                               \
  X(cudaStreamWaitEvent)                           \
  X(cudaStreamGetFlags)                            \
  X(cudaStreamGetPriority)                         \
  X(cudaDeviceGetStreamPriorityRange)              \
  X(cudaStreamSetAttribute)                        \
  X(cudaStreamGetAttribute)                        \
  X(cudaStreamCopyAttributes)                      \
  X(cudaEventCreate)                               \
  X(cudaEventCreateWithFlags)                      \
  X(cudaEventRecord)                               \
  X(cudaEventRecordWithFlags)                      \
  X(cudaEventQuery)                                \
  X(cudaEventSynchronize)                          \
  X(cudaEventDestroy)                              \
  X(cudaEventElapsedTime)                          \
  X(cudaIpcGetMemHandle)                           \
  X(cudaIpcOpenMemHandle)                          \
  X(cudaIpcCloseMemHandle)                         \
  X(cudaIpcGetEventHandle)                         \
  X(cudaIpcOpenEventHandle)                        \
  X(cudaMemcpyAsync)                               \
  X(cudaMemsetAsync)                               \
  X(cudaLaunchHostFunc)                            \
  X(cudaStreamAddCallback)

/// Module variables, pitched memory and 2D copies, pointer attributes, function attributes
/// and occupancy (for the parity test, through the public list; the _ptsz variants are
/// not declared by cuda_runtime_api.h without its renaming).
#define VMCUDA_CUDART_SYMBOL_PITCH_FUNC_HAND_WRITTEN(X) \
  X(cudaGetSymbolAddress)                               \
  X(cudaGetSymbolSize)                                  \
  X(cudaMemcpyToSymbol)                                 \
  X(cudaMemcpyFromSymbol)                               \
  X(cudaMemcpyToSymbolAsync)                            \
  X(cudaMemcpyFromSymbolAsync)                          \
  X(cudaMallocPitch)                                    \
  X(cudaMemcpy2D)                                       \
  X(cudaMemset2D)                                       \
  X(cudaMemcpy2DAsync)                                  \
  X(cudaMemset2DAsync)                                  \
  X(cudaMalloc3D)                                       \
  X(cudaMemset3D)                                       \
  X(cudaMemset3DAsync)                                  \
  X(cudaMemcpy3D)                                       \
  X(cudaMemcpy3DAsync)                                  \
  X(cudaPointerGetAttributes)                           \
  X(cudaMallocArray)                                    \
  X(cudaMalloc3DArray)                                  \
  X(cudaMallocMipmappedArray)                           \
  X(cudaGetMipmappedArrayLevel)                         \
  X(cudaFreeArray)                                      \
  X(cudaFreeMipmappedArray)                             \
  X(cudaArrayGetInfo)                                   \
  X(cudaGetChannelDesc)                                 \
  X(cudaMemcpy2DToArray)                                \
  X(cudaMemcpy2DToArrayAsync)                           \
  X(cudaMemcpy2DFromArray)                              \
  X(cudaMemcpy2DFromArrayAsync)                         \
  X(cudaMemcpy2DArrayToArray)                           \
  X(cudaMemcpyToArray)                                  \
  X(cudaMemcpyToArrayAsync)                             \
  X(cudaMemcpyFromArray)                                \
  X(cudaMemcpyFromArrayAsync)                           \
  X(cudaMemcpyArrayToArray)                             \
  X(cudaCreateTextureObject)                            \
  X(cudaDestroyTextureObject)                           \
  X(cudaGetTextureObjectResourceDesc)                   \
  X(cudaGetTextureObjectTextureDesc)                    \
  X(cudaCreateSurfaceObject)                            \
  X(cudaDestroySurfaceObject)                           \
  X(cudaGetSurfaceObjectResourceDesc)                   \
  X(cudaFuncGetAttributes)                              \
  X(cudaFuncSetAttribute)                               \
  X(cudaOccupancyMaxActiveBlocksPerMultiprocessor)      \
  X(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)

/// The hand-written entry points that only nvcc's internal headers declare (checked when
/// compiling with nvcc, tests/guest-lib/app/abi_parity_nvcc.cu).
#define VMCUDA_CUDART_INTERNAL_HAND_WRITTEN(X) \
  X(__cudaPushCallConfiguration)               \
  X(__cudaPopCallConfiguration)                \
  X(__cudaRegisterFatBinary)                   \
  X(__cudaRegisterFatBinaryEnd)                \
  X(__cudaUnregisterFatBinary)                 \
  X(__cudaRegisterFunction)                    \
  X(__cudaRegisterVar)                         \
  X(__cudaRegisterManagedVar)                  \
  X(__cudaInitModule)                          \
  X(__cudaGetKernel)

// ---------------------------------------------------------------- device area (device.cc)
// Answered from the vGPU database (the handshake) where CUDA's answer is local; the
// others are round trips. cudaRuntimeGetVersion is declared above.
VMCUDA_CUDART_BEGIN
VMCUDA_CUDART_API cudaError_t cudaGetDeviceCount(int* count);
VMCUDA_CUDART_API cudaError_t cudaGetDevice(int* device);
VMCUDA_CUDART_API cudaError_t cudaSetDevice(int device);
VMCUDA_CUDART_API cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device);
VMCUDA_CUDART_API cudaError_t cudaDriverGetVersion(int* driverVersion);
VMCUDA_CUDART_API cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pciBusId);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device);
VMCUDA_CUDART_API cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);
VMCUDA_CUDART_API cudaError_t cudaSetDeviceFlags(unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaGetDeviceFlags(unsigned int* flags);
VMCUDA_CUDART_API cudaError_t cudaDeviceSynchronize(void);
VMCUDA_CUDART_API cudaError_t cudaDeviceReset(void);
VMCUDA_CUDART_API cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
VMCUDA_CUDART_API cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetLimit(size_t* pValue, enum cudaLimit limit);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* pCacheConfig);
VMCUDA_CUDART_API cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig);
VMCUDA_CUDART_API cudaError_t cudaFuncSetCacheConfig(const void* func, enum cudaFuncCache cacheConfig);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig* pConfig);
VMCUDA_CUDART_API cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config);
VMCUDA_CUDART_API cudaError_t cudaFuncSetSharedMemConfig(const void* func, enum cudaSharedMemConfig config);
// peer access (guest-lib/src/peer.cc)
VMCUDA_CUDART_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
VMCUDA_CUDART_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice);
VMCUDA_CUDART_API cudaError_t cudaDeviceGetP2PAttribute(int* value, enum cudaDeviceP2PAttr attr, int srcDevice,
                                                        int dstDevice);
VMCUDA_CUDART_API cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count);
VMCUDA_CUDART_API cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                                  size_t count, cudaStream_t stream);
VMCUDA_CUDART_END

/// The device area's hand-written entry points (for the parity test).
#define VMCUDA_CUDART_DEVICE_HAND_WRITTEN(X) \
  X(cudaGetDeviceCount)                      \
  X(cudaGetDevice)                           \
  X(cudaSetDevice)                           \
  X(cudaInitDevice)                          \
  X(cudaGetDeviceProperties)                 \
  X(cudaDeviceGetAttribute)                  \
  X(cudaDriverGetVersion)                    \
  X(cudaChooseDevice)                        \
  X(cudaDeviceGetByPCIBusId)                 \
  X(cudaDeviceGetPCIBusId)                   \
  X(cudaDeviceCanAccessPeer)                 \
  X(cudaSetDeviceFlags)                      \
  X(cudaGetDeviceFlags)                      \
  X(cudaDeviceSynchronize)                   \
  X(cudaDeviceReset)                         \
  X(cudaMemGetInfo)                          \
  X(cudaDeviceSetLimit)                      \
  X(cudaDeviceGetLimit)                      \
  X(cudaDeviceGetCacheConfig)                \
  X(cudaDeviceSetCacheConfig)                \
  X(cudaFuncSetCacheConfig)                  \
  X(cudaDeviceGetSharedMemConfig)            \
  X(cudaDeviceSetSharedMemConfig)            \
  X(cudaFuncSetSharedMemConfig)              \
  X(cudaDeviceEnablePeerAccess)              \
  X(cudaDeviceDisablePeerAccess)             \
  X(cudaDeviceGetP2PAttribute)               \
  X(cudaMemcpyPeer)                          \
  X(cudaMemcpyPeerAsync)
