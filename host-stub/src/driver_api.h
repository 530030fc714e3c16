// The CUDA driver API as vmcuda-stub uses it: a table of entry points filled from
// libcuda.so.1 at run time (so the stub builds and starts without a GPU and says so
// clearly), or by the test executor under tests/ that stands in for a GPU in CI.
//
// Types are declared here (ABI-identical to cuda.h) so the stub builds without the
// CUDA toolkit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace vmcuda::host {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUarray = struct CUarray_st*;
using CUhostFn = void (*)(void* userData);                                  // cuLaunchHostFunc
using CUstreamCallback = void (*)(CUstream, CUresult status, void* userData);  // cuStreamAddCallback

// CUmemorytype and CUDA_MEMCPY2D (cuMemcpy2D), as cuda.h declares them.
enum CUmemorytype : int {
  CU_MEMORYTYPE_HOST = 0x01,
  CU_MEMORYTYPE_DEVICE = 0x02,
  CU_MEMORYTYPE_ARRAY = 0x03,
  CU_MEMORYTYPE_UNIFIED = 0x04,
};
struct CUDA_MEMCPY2D {
  size_t srcXInBytes;
  size_t srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
};
static_assert(sizeof(CUDA_MEMCPY2D) == 128 && offsetof(CUDA_MEMCPY2D, srcHost) == 24 &&
              offsetof(CUDA_MEMCPY2D, dstMemoryType) == 72 && offsetof(CUDA_MEMCPY2D, Height) == 120);

// CUDA arrays, 3D copies, texture and surface objects (arrays.cc), as cuda.h declares them.
using CUmipmappedArray = struct CUmipmappedArray_st*;
using CUtexObject = unsigned long long;
using CUsurfObject = unsigned long long;
struct CUDA_ARRAY3D_DESCRIPTOR {
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;  // CUarray_format
  unsigned NumChannels;
  unsigned Flags;
};
static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40);
// CUDA_MEMCPY3D: below, with the graph structs (memcpy nodes use it too).
enum CUresourcetype : int {
  CU_RESOURCE_TYPE_ARRAY = 0,
  CU_RESOURCE_TYPE_MIPMAPPED_ARRAY = 1,
  CU_RESOURCE_TYPE_LINEAR = 2,
  CU_RESOURCE_TYPE_PITCH2D = 3,
};
struct CUDA_RESOURCE_DESC {
  CUresourcetype resType;
  union {
    struct {
      CUarray hArray;
    } array;
    struct {
      CUmipmappedArray hMipmappedArray;
    } mipmap;
    struct {
      CUdeviceptr devPtr;
      int format;
      unsigned numChannels;
      size_t sizeInBytes;
    } linear;
    struct {
      CUdeviceptr devPtr;
      int format;
      unsigned numChannels;
      size_t width, height, pitchInBytes;
    } pitch2D;
    struct {
      int reserved[32];
    } reserved;
  } res;
  unsigned flags;
};
static_assert(sizeof(CUDA_RESOURCE_DESC) == 144 && offsetof(CUDA_RESOURCE_DESC, flags) == 136);
struct CUDA_TEXTURE_DESC {
  int addressMode[3];  // CUaddress_mode: 0 wrap, 1 clamp, 2 mirror, 3 border
  int filterMode;      // CUfilter_mode: 0 point, 1 linear
  unsigned flags;      // CU_TRSF_*
  unsigned maxAnisotropy;
  int mipmapFilterMode;
  float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
  float borderColor[4];
  int reserved[12];
};
static_assert(sizeof(CUDA_TEXTURE_DESC) == 104);
struct CUDA_RESOURCE_VIEW_DESC {
  int format;  // CUresourceViewFormat (== cudaResourceViewFormat)
  size_t width, height, depth;
  unsigned firstMipmapLevel, lastMipmapLevel, firstLayer, lastLayer;
  unsigned reserved[16];
};
static_assert(sizeof(CUDA_RESOURCE_VIEW_DESC) == 112);
// CU_TRSF_* and CUDA_ARRAY3D_* (macros in cuda.h, so named otherwise here).
inline constexpr unsigned kTrsfReadAsInteger = 0x01;
inline constexpr unsigned kTrsfNormalizedCoordinates = 0x02;
inline constexpr unsigned kTrsfSrgb = 0x10;
inline constexpr unsigned kTrsfDisableTrilinearOptimization = 0x20;
inline constexpr unsigned kTrsfSeamlessCubemap = 0x40;
inline constexpr unsigned kArray3DLayered = 0x01;
inline constexpr unsigned kArray3DSurfaceLdst = 0x02;
inline constexpr unsigned kArray3DCubemap = 0x04;
inline constexpr unsigned kArray3DTextureGather = 0x08;
// CUarray_format values vmcuda passes on (the plain ones and half/float).
inline constexpr int CU_AD_FORMAT_UNSIGNED_INT8 = 0x01, CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
                     CU_AD_FORMAT_UNSIGNED_INT32 = 0x03, CU_AD_FORMAT_SIGNED_INT8 = 0x08,
                     CU_AD_FORMAT_SIGNED_INT16 = 0x09, CU_AD_FORMAT_SIGNED_INT32 = 0x0a, CU_AD_FORMAT_HALF = 0x10,
                     CU_AD_FORMAT_FLOAT = 0x20;

// Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...; arena.h),
// as cuda.h declares it.
using CUmemGenericAllocationHandle = unsigned long long;
enum CUmemAllocationType : int { CU_MEM_ALLOCATION_TYPE_PINNED = 0x1 };
enum CUmemAllocationHandleType : int { CU_MEM_HANDLE_TYPE_NONE = 0x0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1 };
// CUipcEventHandle (cuda.h): 64 opaque bytes, passed by value.
struct CUipcEventHandle {
  char reserved[64];
};
enum CUmemLocationType : int { CU_MEM_LOCATION_TYPE_INVALID = 0x0, CU_MEM_LOCATION_TYPE_DEVICE = 0x1 };
enum CUmemAccess_flags : int {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
};
enum CUmemAllocationGranularity_flags : int {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
};
struct CUmemLocation {
  CUmemLocationType type;
  int id;
};
struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};
static_assert(sizeof(CUmemLocation) == 8 && sizeof(CUmemAccessDesc) == 12 && sizeof(CUmemAllocationProp) == 32 &&
              offsetof(CUmemAllocationProp, location) == 8 &&
              offsetof(CUmemAllocationProp, win32HandleMetaData) == 16 &&
              offsetof(CUmemAllocationProp, allocFlags) == 24);

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712;
// The runtime's own codes a handler returns where the runtime reports what the driver does
// not (a cudaError_t with no CUresult of that number and meaning): the guest passes it on.
inline constexpr int32_t CUDART_ERROR_INVALID_DEVICE_FUNCTION = 98;  // cudaErrorInvalidDeviceFunction
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_MAP_FAILED = 205;
inline constexpr CUresult CUDA_ERROR_NOT_PERMITTED = 800;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;  // "operation not permitted in the current state"
// Limits and peer access (cuda.h).
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_LIMIT = 215;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705;
inline constexpr int CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 6;  // cudaLimit's last (CU_LIMIT_* == cudaLimit*)
inline constexpr int CU_FUNC_CACHE_PREFER_EQUAL = 3;        // CUfunc_cache's last (== cudaFuncCache)

// Special streams (cuda.h).
inline const CUstream CU_STREAM_LEGACY = reinterpret_cast<CUstream>(0x1);
inline const CUstream CU_STREAM_PER_THREAD = reinterpret_cast<CUstream>(0x2);
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
// CUevent_flags and record/wait flags (cuda.h).
inline constexpr unsigned CU_EVENT_BLOCKING_SYNC = 0x1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned CU_EVENT_INTERPROCESS = 0x4;
inline constexpr unsigned CU_EVENT_RECORD_EXTERNAL = 0x1;
inline constexpr unsigned CU_EVENT_WAIT_EXTERNAL = 0x1;

inline constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 0x01;
inline constexpr unsigned CU_MEMHOSTREGISTER_DEVICEMAP = 0x02;

// CUpointer_attribute values used here (cuda.h).
inline constexpr int CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;

// CUdevice_attribute values used here (cuda.h).
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 102;

// CUfunction_attribute: 0 CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK .. 15
// CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE (the same numbers as
// cudaFuncAttribute where that has them); CU_FUNC_ATTRIBUTE_MAX is 16.
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
inline constexpr int CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9;
inline constexpr int CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX = 16;

// Launch attributes and the extensible launch configuration (cuLaunchKernelEx), as cuda.h
// declares them; only the members vmcuda forwards are named (the union is 64 bytes, 8-aligned).
inline constexpr int CU_LAUNCH_ATTRIBUTE_IGNORE = 0;
inline constexpr int CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2;
inline constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
inline constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5;
inline constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
inline constexpr int CU_LAUNCH_ATTRIBUTE_PRIORITY = 8;
// The stream attributes (CUstreamAttrID, the same numbers; stream.cc).
inline constexpr int CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1;
inline constexpr int CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY = 3;
inline constexpr int CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP = 9;
inline constexpr int CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN = 10;
struct CUaccessPolicyWindow {
  void* base_ptr;
  size_t num_bytes;
  float hitRatio;
  int hitProp;   // CUaccessProperty: 0 normal, 1 streaming, 2 persisting
  int missProp;
};
static_assert(sizeof(CUaccessPolicyWindow) == 32);
union alignas(8) CUlaunchAttributeValue {
  char pad[64];
  CUaccessPolicyWindow accessPolicyWindow;
  int syncPolicy;  // CUsynchronizationPolicy: 1 auto .. 4 blocking sync
  struct {
    unsigned char default_, remote;
  } memSyncDomainMap;
  int memSyncDomain;  // CUlaunchMemSyncDomain: 0 default, 1 remote
  int cooperative;
  struct {
    unsigned x, y, z;
  } clusterDim;
  int clusterSchedulingPolicyPreference;  // CUclusterSchedulingPolicy: 0 default, 1 spread, 2 load balancing
  int programmaticStreamSerializationAllowed;
  int priority;
};
struct CUlaunchAttribute {
  int id;  // CUlaunchAttributeID
  char pad[4];
  CUlaunchAttributeValue value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchAttributeValue) == 64 && sizeof(CUlaunchAttribute) == 72 &&
              offsetof(CUlaunchAttribute, value) == 8 && sizeof(CUlaunchConfig) == 56 &&
              offsetof(CUlaunchConfig, hStream) == 32 && offsetof(CUlaunchConfig, attrs) == 40 &&
              offsetof(CUlaunchConfig, numAttrs) == 48);
inline constexpr CUresult CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720;

// Graphs and stream capture (graph.cc), as cuda.h declares them.
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUkernel = struct CUkern_st*;
inline constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
inline constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;
inline constexpr int CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
inline constexpr int CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
inline constexpr CUresult CUDA_ERROR_INVALID_CLUSTER_SIZE = 912;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904;
inline constexpr CUresult CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910;
struct CUDA_KERNEL_NODE_PARAMS_v2 {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
};
static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v2) == 72 && offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kernelParams) == 40);
struct CUDA_MEMCPY3D {
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  void* reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  void* reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
};
static_assert(sizeof(CUDA_MEMCPY3D) == 200 && offsetof(CUDA_MEMCPY3D, srcHost) == 40 &&
              offsetof(CUDA_MEMCPY3D, dstMemoryType) == 120 && offsetof(CUDA_MEMCPY3D, Depth) == 192);
struct CUDA_MEMSET_NODE_PARAMS {
  CUdeviceptr dst;
  size_t pitch;
  unsigned value;
  unsigned elementSize;
  size_t width;
  size_t height;
};
static_assert(sizeof(CUDA_MEMSET_NODE_PARAMS) == 40);
struct CUDA_HOST_NODE_PARAMS {
  CUhostFn fn;
  void* userData;
};
struct CUgraphExecUpdateResultInfo {
  int result;  // CUgraphExecUpdateResult
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};
static_assert(sizeof(CUgraphExecUpdateResultInfo) == 24);
// cuGraphAddNode's parameters: only the conditional node's are used (graph_nodes.cc).
struct CUDA_CONDITIONAL_NODE_PARAMS {
  unsigned long long handle;
  int type;  // CUgraphConditionalNodeType: if, while, switch
  unsigned size;
  CUgraph* phGraph_out;
  CUcontext ctx;
};
static_assert(sizeof(CUDA_CONDITIONAL_NODE_PARAMS) == 32);
struct CUgraphNodeParams {
  int type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_CONDITIONAL_NODE_PARAMS conditional;
  };
  long long reserved2;
};
static_assert(sizeof(CUgraphNodeParams) == 256);
// An edge's data (cuGraphGetEdges_v2): all zero for a plain (full) dependency.
struct CUgraphEdgeData {
  unsigned char from_port, to_port, type;
  unsigned char reserved[5];
};
static_assert(sizeof(CUgraphEdgeData) == 8);

// The entry points, by their exported (versioned) names.
#define VMCUDA_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit, CUresult (*)(unsigned))                                                                  \
  X(cuDriverGetVersion, CUresult (*)(int*))                                                          \
  X(cuDeviceGetCount, CUresult (*)(int*))                                                            \
  X(cuDeviceGet, CUresult (*)(CUdevice*, int))                                                       \
  X(cuDeviceGetName, CUresult (*)(char*, int, CUdevice))                                             \
  X(cuDeviceTotalMem_v2, CUresult (*)(size_t*, CUdevice))                                            \
  X(cuDeviceGetAttribute, CUresult (*)(int*, int, CUdevice))                                         \
  X(cuCtxCreate_v4, CUresult (*)(CUcontext*, void*, unsigned, CUdevice))                             \
  X(cuCtxDestroy_v2, CUresult (*)(CUcontext))                                                        \
  X(cuCtxSetCurrent, CUresult (*)(CUcontext))                                                        \
  X(cuCtxSynchronize, CUresult (*)())                                                                \
  X(cuCtxGetLimit, CUresult (*)(size_t*, int))                                                      \
  X(cuCtxSetLimit, CUresult (*)(int, size_t))                                                       \
  X(cuCtxGetCacheConfig, CUresult (*)(int*))                                                        \
  X(cuCtxSetCacheConfig, CUresult (*)(int))                                                         \
  X(cuFuncSetCacheConfig, CUresult (*)(CUfunction, int))                                            \
  X(cuDeviceCanAccessPeer, CUresult (*)(int*, CUdevice, CUdevice))                                  \
  X(cuCtxEnablePeerAccess, CUresult (*)(CUcontext, unsigned))                                       \
  X(cuCtxDisablePeerAccess, CUresult (*)(CUcontext))                                                \
  X(cuDeviceGetP2PAttribute, CUresult (*)(int*, int, CUdevice, CUdevice))                           \
  X(cuMemcpyPeer, CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t))             \
  X(cuMemcpyPeerAsync, CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)) \
  X(cuMemAlloc_v2, CUresult (*)(CUdeviceptr*, size_t))                                               \
  X(cuMemFree_v2, CUresult (*)(CUdeviceptr))                                                         \
  X(cuMemAddressReserve, CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long))  \
  X(cuMemAddressFree, CUresult (*)(CUdeviceptr, size_t))                                             \
  X(cuMemCreate, CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,     \
                              unsigned long long))                                                   \
  X(cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle))                                        \
  X(cuMemMap, CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)) \
  X(cuMemUnmap, CUresult (*)(CUdeviceptr, size_t))                                                   \
  X(cuMemSetAccess, CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))               \
  X(cuMemGetAllocationGranularity, CUresult (*)(size_t*, const CUmemAllocationProp*,                 \
                                                CUmemAllocationGranularity_flags))                   \
  X(cuMemcpyHtoD_v2, CUresult (*)(CUdeviceptr, const void*, size_t))                                 \
  X(cuMemcpyDtoH_v2, CUresult (*)(void*, CUdeviceptr, size_t))                                       \
  X(cuMemcpyDtoD_v2, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t))                                 \
  X(cuMemsetD8_v2, CUresult (*)(CUdeviceptr, unsigned char, size_t))                                 \
  X(cuModuleLoadData, CUresult (*)(CUmodule*, const void*))                                          \
  X(cuModuleUnload, CUresult (*)(CUmodule))                                                          \
  X(cuModuleGetFunction, CUresult (*)(CUfunction*, CUmodule, const char*))                           \
  X(cuFuncGetParamInfo, CUresult (*)(CUfunction, size_t, size_t*, size_t*))                          \
  X(cuLaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,       \
                                 unsigned, unsigned, CUstream, void**, void**))                      \
  X(cuLaunchCooperativeKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, \
                                            unsigned, unsigned, CUstream, void**))                   \
  X(cuLaunchKernelEx, CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**))               \
  X(cuDeviceGetUuid_v2, CUresult (*)(unsigned char*, CUdevice))                                      \
  X(cuMemGetInfo_v2, CUresult (*)(size_t*, size_t*))                                                 \
  X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext*, CUdevice))                                   \
  X(cuMemHostRegister_v2, CUresult (*)(void*, size_t, unsigned))                                      \
  X(cuMemHostUnregister, CUresult (*)(void*))                                                        \
  X(cuMemHostGetDevicePointer_v2, CUresult (*)(CUdeviceptr*, void*, unsigned))                        \
  X(cuGetErrorName, CUresult (*)(CUresult, const char**))                                            \
  X(cuCtxGetStreamPriorityRange, CUresult (*)(int*, int*))                                           \
  X(cuStreamCreateWithPriority, CUresult (*)(CUstream*, unsigned, int))                              \
  X(cuStreamDestroy_v2, CUresult (*)(CUstream))                                                      \
  X(cuStreamSynchronize, CUresult (*)(CUstream))                                                     \
  X(cuStreamQuery, CUresult (*)(CUstream))                                                           \
  X(cuStreamWaitEvent, CUresult (*)(CUstream, CUevent, unsigned))                                    \
  X(cuStreamGetPriority, CUresult (*)(CUstream, int*))                                               \
  X(cuStreamSetAttribute, CUresult (*)(CUstream, int, const CUlaunchAttributeValue*))                 \
  X(cuStreamGetAttribute, CUresult (*)(CUstream, int, CUlaunchAttributeValue*))                       \
  X(cuStreamCopyAttributes, CUresult (*)(CUstream, CUstream))                                         \
  X(cuLaunchHostFunc, CUresult (*)(CUstream, CUhostFn, void*))                                      \
  X(cuStreamAddCallback, CUresult (*)(CUstream, CUstreamCallback, void*, unsigned))                  \
  X(cuEventCreate, CUresult (*)(CUevent*, unsigned))                                                 \
  X(cuEventDestroy_v2, CUresult (*)(CUevent))                                                        \
  X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                                  \
  X(cuEventRecordWithFlags, CUresult (*)(CUevent, CUstream, unsigned))                               \
  X(cuEventSynchronize, CUresult (*)(CUevent))                                                       \
  X(cuEventQuery, CUresult (*)(CUevent))                                                             \
  X(cuEventElapsedTime_v2, CUresult (*)(float*, CUevent, CUevent))                                   \
  X(cuMemcpyHtoDAsync_v2, CUresult (*)(CUdeviceptr, const void*, size_t, CUstream))                  \
  X(cuMemcpyDtoHAsync_v2, CUresult (*)(void*, CUdeviceptr, size_t, CUstream))                        \
  X(cuMemcpyDtoDAsync_v2, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))                  \
  X(cuMemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream))                    \
  X(cuMemsetD16_v2, CUresult (*)(CUdeviceptr, unsigned short, size_t))                               \
  X(cuMemsetD32_v2, CUresult (*)(CUdeviceptr, unsigned int, size_t))                                 \
  X(cuMemsetD16Async, CUresult (*)(CUdeviceptr, unsigned short, size_t, CUstream))                   \
  X(cuMemsetD32Async, CUresult (*)(CUdeviceptr, unsigned int, size_t, CUstream))                     \
  X(cuModuleGetGlobal_v2, CUresult (*)(CUdeviceptr*, size_t*, CUmodule, const char*))                \
  X(cuPointerGetAttribute, CUresult (*)(void*, int, CUdeviceptr))                                    \
  X(cuMemAllocPitch_v2, CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned))               \
  X(cuMemcpy2D_v2, CUresult (*)(const CUDA_MEMCPY2D*))                                               \
  X(cuMemsetD2D8_v2, CUresult (*)(CUdeviceptr, size_t, unsigned char, size_t, size_t))               \
  X(cuMemsetD2D16_v2, CUresult (*)(CUdeviceptr, size_t, unsigned short, size_t, size_t))             \
  X(cuMemsetD2D32_v2, CUresult (*)(CUdeviceptr, size_t, unsigned int, size_t, size_t))               \
  X(cuMemcpy2DAsync_v2, CUresult (*)(const CUDA_MEMCPY2D*, CUstream))                                \
  X(cuMemsetD2D8Async, CUresult (*)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))     \
  X(cuMemsetD2D16Async, CUresult (*)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream))   \
  X(cuMemsetD2D32Async, CUresult (*)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream))     \
  X(cuFuncGetAttribute, CUresult (*)(int*, int, CUfunction))                                         \
  X(cuFuncSetAttribute, CUresult (*)(CUfunction, int, int))                                          \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult (*)(int*, CUfunction, int, size_t))       \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, CUresult (*)(int*, CUfunction, int, size_t, unsigned)) \
  X(cuOccupancyAvailableDynamicSMemPerBlock, CUresult (*)(size_t*, CUfunction, int, int))                 \
  X(cuOccupancyMaxActiveClusters, CUresult (*)(int*, CUfunction, const CUlaunchConfig*))                    \
  X(cuStreamBeginCapture_v2, CUresult (*)(CUstream, int))                                            \
  X(cuStreamBeginCaptureToGraph, CUresult (*)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t, int)) \
  X(cuStreamEndCapture, CUresult (*)(CUstream, CUgraph*))                                            \
  X(cuStreamIsCapturing, CUresult (*)(CUstream, int*))                                               \
  X(cuStreamGetCaptureInfo_v3, CUresult (*)(CUstream, int*, unsigned long long*, CUgraph*,          \
                                            const CUgraphNode**, const CUgraphEdgeData**, size_t*)) \
  X(cuThreadExchangeStreamCaptureMode, CUresult (*)(int*))                                           \
  X(cuGraphCreate, CUresult (*)(CUgraph*, unsigned))                                                 \
  X(cuGraphDestroy, CUresult (*)(CUgraph))                                                           \
  X(cuGraphClone, CUresult (*)(CUgraph*, CUgraph))                                                   \
  X(cuGraphAddKernelNode_v2, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,         \
                                          const CUDA_KERNEL_NODE_PARAMS_v2*))                        \
  X(cuGraphAddMemcpyNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,            \
                                       const CUDA_MEMCPY3D*, CUcontext))                             \
  X(cuGraphAddMemsetNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,            \
                                       const CUDA_MEMSET_NODE_PARAMS*, CUcontext))                   \
  X(cuGraphAddHostNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,              \
                                     const CUDA_HOST_NODE_PARAMS*))                                  \
  X(cuGraphAddEmptyNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t))            \
  X(cuGraphAddEventRecordNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUevent)) \
  X(cuGraphAddEventWaitNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUevent))   \
  X(cuGraphAddChildGraphNode, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUgraph))  \
  X(cuGraphAddDependencies_v2, CUresult (*)(CUgraph, const CUgraphNode*, const CUgraphNode*,         \
                                            const CUgraphEdgeData*, size_t))                         \
  X(cuGraphGetNodes, CUresult (*)(CUgraph, CUgraphNode*, size_t*))                                   \
  X(cuGraphGetRootNodes, CUresult (*)(CUgraph, CUgraphNode*, size_t*))                               \
  X(cuGraphNodeGetType, CUresult (*)(CUgraphNode, int*))                                             \
  X(cuGraphNodeFindInClone, CUresult (*)(CUgraphNode*, CUgraphNode, CUgraph))                        \
  X(cuGraphInstantiateWithFlags, CUresult (*)(CUgraphExec*, CUgraph, unsigned long long))            \
  X(cuGraphLaunch, CUresult (*)(CUgraphExec, CUstream))                                              \
  X(cuGraphUpload, CUresult (*)(CUgraphExec, CUstream))                                              \
  X(cuGraphExecDestroy, CUresult (*)(CUgraphExec))                                                   \
  X(cuGraphExecKernelNodeSetParams_v2, CUresult (*)(CUgraphExec, CUgraphNode,                        \
                                                    const CUDA_KERNEL_NODE_PARAMS_v2*))              \
  X(cuGraphExecUpdate_v2, CUresult (*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*))         \
  X(cuGraphGetEdges_v2, CUresult (*)(CUgraph, CUgraphNode*, CUgraphNode*, CUgraphEdgeData*, size_t*))  \
  X(cuGraphKernelNodeGetParams_v2, CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2*))            \
  X(cuGraphKernelNodeSetParams_v2, CUresult (*)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*))      \
  X(cuGraphKernelNodeGetAttribute, CUresult (*)(CUgraphNode, int, CUlaunchAttributeValue*))          \
  X(cuGraphKernelNodeSetAttribute, CUresult (*)(CUgraphNode, int, const CUlaunchAttributeValue*))    \
  X(cuGraphMemcpyNodeGetParams, CUresult (*)(CUgraphNode, CUDA_MEMCPY3D*))                          \
  X(cuGraphMemsetNodeGetParams, CUresult (*)(CUgraphNode, CUDA_MEMSET_NODE_PARAMS*))                \
  X(cuGraphHostNodeGetParams, CUresult (*)(CUgraphNode, CUDA_HOST_NODE_PARAMS*))                    \
  X(cuGraphChildGraphNodeGetGraph, CUresult (*)(CUgraphNode, CUgraph*))                             \
  X(cuGraphEventRecordNodeGetEvent, CUresult (*)(CUgraphNode, CUevent*))                            \
  X(cuGraphEventWaitNodeGetEvent, CUresult (*)(CUgraphNode, CUevent*))                              \
  X(cuGraphMemcpyNodeSetParams, CUresult (*)(CUgraphNode, const CUDA_MEMCPY3D*))                    \
  X(cuGraphMemsetNodeSetParams, CUresult (*)(CUgraphNode, const CUDA_MEMSET_NODE_PARAMS*))          \
  X(cuGraphHostNodeSetParams, CUresult (*)(CUgraphNode, const CUDA_HOST_NODE_PARAMS*))              \
  X(cuGraphEventRecordNodeSetEvent, CUresult (*)(CUgraphNode, CUevent))                             \
  X(cuGraphEventWaitNodeSetEvent, CUresult (*)(CUgraphNode, CUevent))                               \
  X(cuGraphExecMemcpyNodeSetParams, CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D*, CUcontext)) \
  X(cuGraphExecMemsetNodeSetParams, CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS*,   \
                                                 CUcontext))                                        \
  X(cuGraphExecHostNodeSetParams, CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_HOST_NODE_PARAMS*))      \
  X(cuGraphExecChildGraphNodeSetParams, CUresult (*)(CUgraphExec, CUgraphNode, CUgraph))            \
  X(cuGraphExecEventRecordNodeSetEvent, CUresult (*)(CUgraphExec, CUgraphNode, CUevent))            \
  X(cuGraphExecEventWaitNodeSetEvent, CUresult (*)(CUgraphExec, CUgraphNode, CUevent))              \
  X(cuGraphNodeSetEnabled, CUresult (*)(CUgraphExec, CUgraphNode, unsigned))                        \
  X(cuGraphNodeGetEnabled, CUresult (*)(CUgraphExec, CUgraphNode, unsigned*))                       \
  X(cuGraphNodeGetDependencies_v2, CUresult (*)(CUgraphNode, CUgraphNode*, CUgraphEdgeData*, size_t*))   \
  X(cuGraphNodeGetDependentNodes_v2, CUresult (*)(CUgraphNode, CUgraphNode*, CUgraphEdgeData*, size_t*)) \
  X(cuGraphRemoveDependencies_v2, CUresult (*)(CUgraph, const CUgraphNode*, const CUgraphNode*,      \
                                               const CUgraphEdgeData*, size_t))                      \
  X(cuGraphDestroyNode, CUresult (*)(CUgraphNode))                                                  \
  X(cuGraphKernelNodeCopyAttributes, CUresult (*)(CUgraphNode, CUgraphNode))                        \
  X(cuStreamGetId, CUresult (*)(CUstream, unsigned long long*))                                     \
  X(cuGraphConditionalHandleCreate, CUresult (*)(unsigned long long*, CUgraph, CUcontext, unsigned, unsigned)) \
  X(cuGraphAddNode_v2, CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t, \
                                    CUgraphNodeParams*))                                             \
  X(cuArray3DCreate_v2, CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*))                         \
  X(cuArrayDestroy, CUresult (*)(CUarray))                                                             \
  X(cuMipmappedArrayCreate, CUresult (*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned))   \
  X(cuMipmappedArrayGetLevel, CUresult (*)(CUarray*, CUmipmappedArray, unsigned))                        \
  X(cuMipmappedArrayDestroy, CUresult (*)(CUmipmappedArray))                                           \
  X(cuMemcpy3D_v2, CUresult (*)(const CUDA_MEMCPY3D*))                                                 \
  X(cuMemcpy3DAsync_v2, CUresult (*)(const CUDA_MEMCPY3D*, CUstream))                                  \
  X(cuTexObjectCreate, CUresult (*)(CUtexObject*, const CUDA_RESOURCE_DESC*, const CUDA_TEXTURE_DESC*,   \
                                    const CUDA_RESOURCE_VIEW_DESC*))                                   \
  X(cuTexObjectDestroy, CUresult (*)(CUtexObject))                                                     \
  X(cuSurfObjectCreate, CUresult (*)(CUsurfObject*, const CUDA_RESOURCE_DESC*))                         \
  X(cuSurfObjectDestroy, CUresult (*)(CUsurfObject))                                                   \
  X(cuMemExportToShareableHandle, CUresult (*)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, \
                                               unsigned long long))                                    \
  X(cuMemImportFromShareableHandle, CUresult (*)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType)) \
  X(cuIpcGetEventHandle, CUresult (*)(CUipcEventHandle*, CUevent))                                     \
  X(cuIpcOpenEventHandle, CUresult (*)(CUevent*, CUipcEventHandle))                                  \
  X(cuDeviceGetTexture1DLinearMaxWidth, CUresult (*)(size_t*, int, unsigned, CUdevice))                \
  X(cuDeviceGetHostAtomicCapabilities, CUresult (*)(unsigned*, const int*, unsigned, CUdevice))        \
  X(cuDeviceGetP2PAtomicCapabilities, CUresult (*)(unsigned*, const int*, unsigned, CUdevice, CUdevice)) \
  X(cuCtxResetPersistingL2Cache, CUresult (*)())                                                      \
  X(cuFlushGPUDirectRDMAWrites, CUresult (*)(int, int))                                               \
  X(cuOccupancyMaxPotentialClusterSize, CUresult (*)(int*, CUfunction, const CUlaunchConfig*))          \
  X(cuStreamUpdateCaptureDependencies_v2, CUresult (*)(CUstream, CUgraphNode*, const CUgraphEdgeData*, size_t, \
                                                       unsigned))                                          \
  X(cuModuleGetFunctionCount, CUresult (*)(unsigned*, CUmodule))                                       \
  X(cuModuleEnumerateFunctions, CUresult (*)(CUfunction*, unsigned, CUmodule))                         \
  X(cuFuncGetName, CUresult (*)(const char**, CUfunction))

struct DriverApi {
#define VMCUDA_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_DRIVER_FUNCTIONS(VMCUDA_DECLARE)
#undef VMCUDA_DECLARE
  std::string origin;  // "libcuda.so.1 (driver 580.x)" or the test executor's name
  // NVIDIA's libraries the guests call at their own API (cuBLAS: cublas.cc), opened at their
  // first use: dlopen/dlsym of the host's (load_libcuda sets them), or the test executor's
  // fakes. open_library returns nullptr and says why when the library is not there.
  void* (*open_library)(const char* soname, std::string* why) = nullptr;
  void* (*library_symbol)(void* library, const char* name) = nullptr;
};

// Loads libcuda.so.1 and every entry point above. On failure returns false and says
// in `why` what is missing and what to do (install the NVIDIA driver, ...).
bool load_libcuda(DriverApi& api, std::string* why);

// "CUDA_ERROR_OUT_OF_MEMORY (2)" for logs.
std::string describe(const DriverApi& api, CUresult r);

}  // namespace vmcuda::host
