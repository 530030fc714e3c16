// The CUDA runtime types guest-lib needs, transcribed from CUDA 13.0's driver_types.h and
// vector_types.h so that the guest library builds without the toolkit. Only layout and
// values matter (they cross the C ABI of libcudart.so.13); the static_asserts below pin the
// sizes, and tests/guest-lib/abi_parity_test.cc checks every value, size and offset against
// NVIDIA's own headers where the toolkit is installed. Add a type here when an API area
// needs it, together with its parity check.
//
// Everything is declared in the global namespace with NVIDIA's spelling, so that an
// implementation reads like the documentation. A test that includes NVIDIA's headers too
// defines VMCUDA_CUDART_PARITY_NAMESPACE first, which moves all of this into that namespace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#ifdef VMCUDA_CUDART_PARITY_NAMESPACE
#define VMCUDA_CUDART_BEGIN namespace VMCUDA_CUDART_PARITY_NAMESPACE {
#define VMCUDA_CUDART_END }
#else
#define VMCUDA_CUDART_BEGIN
#define VMCUDA_CUDART_END
#endif

VMCUDA_CUDART_BEGIN

/// The runtime version this library reports (CUDART_VERSION of CUDA 13.0).
inline constexpr int kCudartVersion = 13000;

/// cudaError_t: every value NVIDIA's libcudart.so.13 names (generated list).
enum cudaError {
#define VMCUDA_CUDART_ERROR(name, value, string) name = value,
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
};
typedef enum cudaError cudaError_t;
static_assert(sizeof(cudaError_t) == 4);

/// vector_types.h: uint3 and dim3 (dim3's members default to 1, as NVIDIA's constructor does).
struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3() = default;
  constexpr dim3(unsigned int vx, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
static_assert(sizeof(uint3) == 12 && sizeof(dim3) == 12 && alignof(dim3) == 4);
// Passed by value in registers, as NVIDIA's (trivially copyable) dim3 is.
static_assert(std::is_trivially_copyable_v<dim3>);

/// driver_types.h: cudaChannelFormatKind and cudaChannelFormatDesc.
enum cudaChannelFormatKind {
  cudaChannelFormatKindSigned = 0,
  cudaChannelFormatKindUnsigned = 1,
  cudaChannelFormatKindFloat = 2,
  cudaChannelFormatKindNone = 3,
  cudaChannelFormatKindNV12 = 4,
  cudaChannelFormatKindUnsignedNormalized8X1 = 5,
  cudaChannelFormatKindUnsignedNormalized8X2 = 6,
  cudaChannelFormatKindUnsignedNormalized8X4 = 7,
  cudaChannelFormatKindUnsignedNormalized16X1 = 8,
  cudaChannelFormatKindUnsignedNormalized16X2 = 9,
  cudaChannelFormatKindUnsignedNormalized16X4 = 10,
  cudaChannelFormatKindSignedNormalized8X1 = 11,
  cudaChannelFormatKindSignedNormalized8X2 = 12,
  cudaChannelFormatKindSignedNormalized8X4 = 13,
  cudaChannelFormatKindSignedNormalized16X1 = 14,
  cudaChannelFormatKindSignedNormalized16X2 = 15,
  cudaChannelFormatKindSignedNormalized16X4 = 16,
  cudaChannelFormatKindUnsignedBlockCompressed1 = 17,
  cudaChannelFormatKindUnsignedBlockCompressed1SRGB = 18,
  cudaChannelFormatKindUnsignedBlockCompressed2 = 19,
  cudaChannelFormatKindUnsignedBlockCompressed2SRGB = 20,
  cudaChannelFormatKindUnsignedBlockCompressed3 = 21,
  cudaChannelFormatKindUnsignedBlockCompressed3SRGB = 22,
  cudaChannelFormatKindUnsignedBlockCompressed4 = 23,
  cudaChannelFormatKindSignedBlockCompressed4 = 24,
  cudaChannelFormatKindUnsignedBlockCompressed5 = 25,
  cudaChannelFormatKindSignedBlockCompressed5 = 26,
  cudaChannelFormatKindUnsignedBlockCompressed6H = 27,
  cudaChannelFormatKindSignedBlockCompressed6H = 28,
  cudaChannelFormatKindUnsignedBlockCompressed7 = 29,
  cudaChannelFormatKindUnsignedBlockCompressed7SRGB = 30,
  cudaChannelFormatKindUnsignedNormalized1010102 = 31,
};

struct cudaChannelFormatDesc {
  int x;
  int y;
  int z;
  int w;
  enum cudaChannelFormatKind f;
};
// 20 bytes: returned through a hidden pointer (SysV class MEMORY), like NVIDIA's.
static_assert(sizeof(cudaChannelFormatDesc) == 20 && offsetof(cudaChannelFormatDesc, f) == 16);

/// driver_types.h: cudaMemcpyKind.
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

/// driver_types.h: pitched memory and 3D copies (cudaMalloc3D, cudaMemset3D, cudaMemcpy3D;
/// memory_3d.cc). Arrays are opaque handles (arrays.cc).
typedef struct cudaArray* cudaArray_t;
typedef const struct cudaArray* cudaArray_const_t;
typedef struct cudaMipmappedArray* cudaMipmappedArray_t;
typedef const struct cudaMipmappedArray* cudaMipmappedArray_const_t;
struct cudaPitchedPtr {
  void* ptr;
  size_t pitch;
  size_t xsize;
  size_t ysize;
};
struct cudaExtent {
  size_t width;
  size_t height;
  size_t depth;
};
struct cudaPos {
  size_t x;
  size_t y;
  size_t z;
};
struct cudaMemcpy3DParms {
  cudaArray_t srcArray;
  struct cudaPos srcPos;
  struct cudaPitchedPtr srcPtr;
  cudaArray_t dstArray;
  struct cudaPos dstPos;
  struct cudaPitchedPtr dstPtr;
  struct cudaExtent extent;
  enum cudaMemcpyKind kind;
};
static_assert(sizeof(cudaMemcpy3DParms) == 160 && offsetof(cudaMemcpy3DParms, dstArray) == 64 &&
              offsetof(cudaMemcpy3DParms, extent) == 128 && offsetof(cudaMemcpy3DParms, kind) == 152);
struct cudaMemcpy3DPeerParms {
  cudaArray_t srcArray;
  struct cudaPos srcPos;
  struct cudaPitchedPtr srcPtr;
  int srcDevice;
  cudaArray_t dstArray;
  struct cudaPos dstPos;
  struct cudaPitchedPtr dstPtr;
  int dstDevice;
  struct cudaExtent extent;
};
static_assert(sizeof(cudaMemcpy3DPeerParms) == 168 && offsetof(cudaMemcpy3DPeerParms, dstArray) == 72 &&
              offsetof(cudaMemcpy3DPeerParms, extent) == 144);
// Sparse arrays and arrays of deferred mapping (driver_types.h): never made by vmcuda.
struct cudaArraySparseProperties {
  struct {
    unsigned int width;
    unsigned int height;
    unsigned int depth;
  } tileExtent;
  unsigned int miptailFirstLevel;
  unsigned long long miptailSize;
  unsigned int flags;
  unsigned int reserved[4];
};
static_assert(sizeof(cudaArraySparseProperties) == 48);
struct cudaArrayMemoryRequirements {
  size_t size;
  size_t alignment;
  unsigned int reserved[4];
};
static_assert(sizeof(cudaArrayMemoryRequirements) == 32);

/// driver_types.h, texture_types.h, surface_types.h: resources, texture and surface objects
/// (arrays.cc).
enum cudaResourceType {
  cudaResourceTypeArray = 0x00,
  cudaResourceTypeMipmappedArray = 0x01,
  cudaResourceTypeLinear = 0x02,
  cudaResourceTypePitch2D = 0x03,
};
struct cudaResourceDesc {
  enum cudaResourceType resType;
  union {
    struct {
      cudaArray_t array;
    } array;
    struct {
      cudaMipmappedArray_t mipmap;
    } mipmap;
    struct {
      void* devPtr;
      struct cudaChannelFormatDesc desc;
      size_t sizeInBytes;
    } linear;
    struct {
      void* devPtr;
      struct cudaChannelFormatDesc desc;
      size_t width;
      size_t height;
      size_t pitchInBytes;
    } pitch2D;
    struct {
      int reserved[32];
    } reserved;
  } res;
  unsigned int flags;
};
static_assert(sizeof(cudaResourceDesc) == 144 && offsetof(cudaResourceDesc, flags) == 136);
struct cudaResourceViewDesc {
  int format;  // enum cudaResourceViewFormat (== CUresourceViewFormat)
  size_t width;
  size_t height;
  size_t depth;
  unsigned int firstMipmapLevel;
  unsigned int lastMipmapLevel;
  unsigned int firstLayer;
  unsigned int lastLayer;
  unsigned int reserved[16];
};
enum cudaTextureAddressMode {
  cudaAddressModeWrap = 0,
  cudaAddressModeClamp = 1,
  cudaAddressModeMirror = 2,
  cudaAddressModeBorder = 3,
};
enum cudaTextureFilterMode {
  cudaFilterModePoint = 0,
  cudaFilterModeLinear = 1,
};
enum cudaTextureReadMode {
  cudaReadModeElementType = 0,
  cudaReadModeNormalizedFloat = 1,
};
struct cudaTextureDesc {
  enum cudaTextureAddressMode addressMode[3];
  enum cudaTextureFilterMode filterMode;
  enum cudaTextureReadMode readMode;
  int sRGB;
  float borderColor[4];
  int normalizedCoords;
  unsigned int maxAnisotropy;
  enum cudaTextureFilterMode mipmapFilterMode;
  float mipmapLevelBias;
  float minMipmapLevelClamp;
  float maxMipmapLevelClamp;
  int disableTrilinearOptimization;
  int seamlessCubemap;
};
static_assert(sizeof(cudaTextureDesc) == 72 && offsetof(cudaTextureDesc, normalizedCoords) == 40);
typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
#define cudaArrayDefault 0x00
#define cudaArrayLayered 0x01
#define cudaArraySurfaceLoadStore 0x02
#define cudaArrayCubemap 0x04
#define cudaArrayTextureGather 0x08
#define cudaArraySparse 0x40
#define cudaArrayDeferredMapping 0x80

/// driver_types.h: cudaMemoryType and cudaPointerAttributes (cudaPointerGetAttributes).
enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
};
static_assert(sizeof(cudaPointerAttributes) == 88 && offsetof(cudaPointerAttributes, devicePointer) == 8);

/// driver_types.h: memory locations and advice (cudaMemPrefetchAsync, cudaMemAdvise).
enum cudaMemLocationType {
  cudaMemLocationTypeInvalid = 0,
  cudaMemLocationTypeNone = 0,
  cudaMemLocationTypeDevice = 1,
  cudaMemLocationTypeHost = 2,
  cudaMemLocationTypeHostNuma = 3,
  cudaMemLocationTypeHostNumaCurrent = 4,
};
struct cudaMemLocation {
  enum cudaMemLocationType type;
  int id;
};
static_assert(sizeof(cudaMemLocation) == 8);
/// driver_types.h: stream-ordered allocation and memory pools (memory_pool.cc).
typedef struct CUmemPoolHandle_st* cudaMemPool_t;
enum cudaMemPoolAttr {
  cudaMemPoolReuseFollowEventDependencies = 0x1,
  cudaMemPoolReuseAllowOpportunistic = 0x2,
  cudaMemPoolReuseAllowInternalDependencies = 0x3,
  cudaMemPoolAttrReleaseThreshold = 0x4,
  cudaMemPoolAttrReservedMemCurrent = 0x5,
  cudaMemPoolAttrReservedMemHigh = 0x6,
  cudaMemPoolAttrUsedMemCurrent = 0x7,
  cudaMemPoolAttrUsedMemHigh = 0x8,
};
enum cudaMemAccessFlags {
  cudaMemAccessFlagsProtNone = 0,
  cudaMemAccessFlagsProtRead = 1,
  cudaMemAccessFlagsProtReadWrite = 3,
};
struct cudaMemAccessDesc {
  struct cudaMemLocation location;
  enum cudaMemAccessFlags flags;
};
enum cudaMemAllocationType {
  cudaMemAllocationTypeInvalid = 0x0,
  cudaMemAllocationTypePinned = 0x1,
  cudaMemAllocationTypeManaged = 0x2,
  cudaMemAllocationTypeMax = 0x7FFFFFFF,
};
enum cudaMemAllocationHandleType {
  cudaMemHandleTypeNone = 0x0,
  cudaMemHandleTypePosixFileDescriptor = 0x1,
  cudaMemHandleTypeWin32 = 0x2,
  cudaMemHandleTypeWin32Kmt = 0x4,
  cudaMemHandleTypeFabric = 0x8,
};
// Opaque data of one pool allocation for cudaMemPoolImportPointer (driver_types.h).
struct cudaMemPoolPtrExportData {
  unsigned char reserved[64];
};
struct cudaMemPoolProps {
  enum cudaMemAllocationType allocType;
  enum cudaMemAllocationHandleType handleTypes;
  struct cudaMemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};
enum cudaMemoryAdvise {
  cudaMemAdviseSetReadMostly = 1,
  cudaMemAdviseUnsetReadMostly = 2,
  cudaMemAdviseSetPreferredLocation = 3,
  cudaMemAdviseUnsetPreferredLocation = 4,
  cudaMemAdviseSetAccessedBy = 5,
  cudaMemAdviseUnsetAccessedBy = 6,
};
/// driver_types.h: atomic operations and capabilities (cudaDeviceGet{Host,P2P}AtomicCapabilities)
/// and the GPUDirect RDMA flush (cudaDeviceFlushGPUDirectRDMAWrites).
enum cudaAtomicOperation {
  cudaAtomicOperationIntegerAdd = 0,
  cudaAtomicOperationIntegerMin = 1,
  cudaAtomicOperationIntegerMax = 2,
  cudaAtomicOperationIntegerIncrement = 3,
  cudaAtomicOperationIntegerDecrement = 4,
  cudaAtomicOperationAnd = 5,
  cudaAtomicOperationOr = 6,
  cudaAtomicOperationXOR = 7,
  cudaAtomicOperationExchange = 8,
  cudaAtomicOperationCAS = 9,
  cudaAtomicOperationFloatAdd = 10,
  cudaAtomicOperationFloatMin = 11,
  cudaAtomicOperationFloatMax = 12,
};
enum cudaAtomicOperationCapability {
  cudaAtomicCapabilitySigned = 1u << 0,
  cudaAtomicCapabilityUnsigned = 1u << 1,
  cudaAtomicCapabilityReduction = 1u << 2,
  cudaAtomicCapabilityScalar32 = 1u << 3,
  cudaAtomicCapabilityScalar64 = 1u << 4,
  cudaAtomicCapabilityScalar128 = 1u << 5,
  cudaAtomicCapabilityVector32x4 = 1u << 6,
};
enum cudaFlushGPUDirectRDMAWritesScope {
  cudaFlushGPUDirectRDMAWritesToOwner = 100,
  cudaFlushGPUDirectRDMAWritesToAllDevices = 200,
};
enum cudaFlushGPUDirectRDMAWritesTarget {
  cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
};
/// driver_types.h: what cudaMemRangeGetAttribute[s] asks of managed memory.
enum cudaMemRangeAttribute {
  cudaMemRangeAttributeReadMostly = 1,
  cudaMemRangeAttributePreferredLocation = 2,
  cudaMemRangeAttributeAccessedBy = 3,
  cudaMemRangeAttributeLastPrefetchLocation = 4,
  cudaMemRangeAttributePreferredLocationType = 5,
  cudaMemRangeAttributePreferredLocationId = 6,
  cudaMemRangeAttributeLastPrefetchLocationType = 7,
  cudaMemRangeAttributeLastPrefetchLocationId = 8,
};

/// driver_types.h: cudaFuncAttributes (cudaFuncGetAttributes) and cudaFuncAttribute
/// (cudaFuncSetAttribute; the same numbers as the driver's CUfunction_attribute).
struct cudaFuncAttributes {
  size_t sharedSizeBytes;
  size_t constSizeBytes;
  size_t localSizeBytes;
  int maxThreadsPerBlock;
  int numRegs;
  int ptxVersion;
  int binaryVersion;
  int cacheModeCA;
  int maxDynamicSharedSizeBytes;
  int preferredShmemCarveout;
  int clusterDimMustBeSet;
  int requiredClusterWidth;
  int requiredClusterHeight;
  int requiredClusterDepth;
  int clusterSchedulingPolicyPreference;
  int nonPortableClusterSizeAllowed;
  int reserved[16];
};
static_assert(sizeof(cudaFuncAttributes) == 144 && offsetof(cudaFuncAttributes, maxThreadsPerBlock) == 24 &&
              offsetof(cudaFuncAttributes, reserved) == 76);
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeClusterDimMustBeSet = 10,
  cudaFuncAttributeRequiredClusterWidth = 11,
  cudaFuncAttributeRequiredClusterHeight = 12,
  cudaFuncAttributeRequiredClusterDepth = 13,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 14,
  cudaFuncAttributeClusterSchedulingPolicyPreference = 15,
  cudaFuncAttributeMax
};
/// driver_types.h: limits, cache and shared memory configuration, peer attributes (device.cc, peer.cc).
enum cudaLimit {
  cudaLimitStackSize = 0x00,
  cudaLimitPrintfFifoSize = 0x01,
  cudaLimitMallocHeapSize = 0x02,
  cudaLimitDevRuntimeSyncDepth = 0x03,
  cudaLimitDevRuntimePendingLaunchCount = 0x04,
  cudaLimitMaxL2FetchGranularity = 0x05,
  cudaLimitPersistingL2CacheSize = 0x06
};
enum cudaFuncCache {
  cudaFuncCachePreferNone = 0,
  cudaFuncCachePreferShared = 1,
  cudaFuncCachePreferL1 = 2,
  cudaFuncCachePreferEqual = 3
};
enum cudaSharedMemConfig {
  cudaSharedMemBankSizeDefault = 0,
  cudaSharedMemBankSizeFourByte = 1,
  cudaSharedMemBankSizeEightByte = 2
};
enum cudaDeviceP2PAttr {
  cudaDevP2PAttrPerformanceRank = 1,
  cudaDevP2PAttrAccessSupported = 2,
  cudaDevP2PAttrNativeAtomicSupported = 3,
  cudaDevP2PAttrCudaArrayAccessSupported = 4,
  cudaDevP2PAttrOnlyPartialNativeAtomicSupported = 5
};

/// Opaque handles. The guest library makes these up itself (virtual handles); only their
/// size (a pointer) is fixed by the ABI.
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUkern_st* cudaKernel_t;
typedef struct CUfunc_st* cudaFunction_t;
typedef struct CUlib_st* cudaLibrary_t;
/// driver_types.h: async notifications (cudaDeviceRegisterAsyncNotification).
struct cudaAsyncCallbackEntry;
typedef struct cudaAsyncCallbackEntry* cudaAsyncCallbackHandle_t;
typedef enum cudaAsyncNotificationType_enum { cudaAsyncNotificationTypeOverBudget = 0x1 } cudaAsyncNotificationType;
typedef struct cudaAsyncNotificationInfo {
  cudaAsyncNotificationType type;
  union {
    struct {
      unsigned long long bytesOverBudget;
    } overBudget;
  } info;
} cudaAsyncNotificationInfo_t;
typedef void (*cudaAsyncCallback)(cudaAsyncNotificationInfo_t*, void*, cudaAsyncCallbackHandle_t);
/// driver_types.h: the error log (cudaLogs*, CUDA 12.9).
typedef enum CUDAlogLevel_enum { cudaLogLevelError = 0, cudaLogLevelWarning = 1 } cudaLogLevel;
typedef struct CUlogsCallbackEntry_st* cudaLogsCallbackHandle;
typedef unsigned int cudaLogIterator;
typedef void (*cudaLogsCallback_t)(void* data, cudaLogLevel logLevel, char* message, size_t length);
/// driver_types.h: cudaLibraryLoadData's options (JIT options are accepted and ignored).
enum cudaJitOption { cudaJitMaxRegisters = 0 };
enum cudaLibraryOption { cudaLibraryHostUniversalFunctionAndDataTable = 0, cudaLibraryBinaryIsPreserved = 1 };
/// driver_types.h: cudaMemcpyBatchAsync's attributes.
enum cudaMemcpySrcAccessOrder {
  cudaMemcpySrcAccessOrderInvalid = 0x0,
  cudaMemcpySrcAccessOrderStream = 0x1,
  cudaMemcpySrcAccessOrderDuringApiCall = 0x2,
  cudaMemcpySrcAccessOrderAny = 0x3,
  cudaMemcpySrcAccessOrderMax = 0x7FFFFFFF
};
enum cudaMemcpyFlags { cudaMemcpyFlagDefault = 0x0, cudaMemcpyFlagPreferOverlapWithCompute = 0x1 };
struct cudaMemcpyAttributes {
  enum cudaMemcpySrcAccessOrder srcAccessOrder;
  struct cudaMemLocation srcLocHint;
  struct cudaMemLocation dstLocHint;
  unsigned int flags;
};
static_assert(sizeof(cudaMemcpyAttributes) == 24);
// cudaMemcpy3DBatchAsync's operations (CUDA 12.8).
enum cudaMemcpy3DOperandType {
  cudaMemcpyOperandTypePointer = 0x1,
  cudaMemcpyOperandTypeArray = 0x2,
  cudaMemcpyOperandTypeMax = 0x7FFFFFFF
};
struct cudaOffset3D {
  size_t x;
  size_t y;
  size_t z;
};
struct cudaMemcpy3DOperand {
  enum cudaMemcpy3DOperandType type;
  union {
    struct {
      void* ptr;
      size_t rowLength;
      size_t layerHeight;
      struct cudaMemLocation locHint;
    } ptr;
    struct {
      cudaArray_t array;
      struct cudaOffset3D offset;
    } array;
  } op;
};
static_assert(sizeof(cudaMemcpy3DOperand) == 40 && offsetof(cudaMemcpy3DOperand, op) == 8);
struct cudaMemcpy3DBatchOp {
  struct cudaMemcpy3DOperand src;
  struct cudaMemcpy3DOperand dst;
  struct cudaExtent extent;
  enum cudaMemcpySrcAccessOrder srcAccessOrder;
  unsigned int flags;
};
static_assert(sizeof(cudaMemcpy3DBatchOp) == 112 && offsetof(cudaMemcpy3DBatchOp, srcAccessOrder) == 104);

/// cudaGetDriverEntryPoint's answer (driver_types.h; == CUdriverProcAddressQueryResult).
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficient = 2
};

/// Host functions (cudaLaunchHostFunc, cudaStreamAddCallback; CUDART_CB is empty on Linux).
typedef void (*cudaHostFn_t)(void* userData);
typedef void (*cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void* userData);

/// driver_types.h: launch attributes and the extensible launch configuration
/// (cudaLaunchKernelExC). The value union is 64 bytes; only the members vmcuda reads are
/// spelled out (the event ones too, to refuse them by name), the rest is `pad`.
enum cudaLaunchAttributeID {
  cudaLaunchAttributeIgnore = 0,
  cudaLaunchAttributeAccessPolicyWindow = 1,
  cudaLaunchAttributeCooperative = 2,
  cudaLaunchAttributeSynchronizationPolicy = 3,
  cudaLaunchAttributeClusterDimension = 4,
  cudaLaunchAttributeClusterSchedulingPolicyPreference = 5,
  cudaLaunchAttributeProgrammaticStreamSerialization = 6,
  cudaLaunchAttributeProgrammaticEvent = 7,
  cudaLaunchAttributePriority = 8,
  cudaLaunchAttributeMemSyncDomainMap = 9,
  cudaLaunchAttributeMemSyncDomain = 10,
  cudaLaunchAttributePreferredClusterDimension = 11,
  cudaLaunchAttributeLaunchCompletionEvent = 12,
  cudaLaunchAttributeDeviceUpdatableKernelNode = 13,
  cudaLaunchAttributePreferredSharedMemoryCarveout = 14,
  cudaLaunchAttributeNvlinkUtilCentricScheduling = 16
};
enum cudaClusterSchedulingPolicy {
  cudaClusterSchedulingPolicyDefault = 0,
  cudaClusterSchedulingPolicySpread = 1,
  cudaClusterSchedulingPolicyLoadBalancing = 2
};
/// Access policy windows (L2 persistence) and the other stream attributes' values.
enum cudaAccessProperty {
  cudaAccessPropertyNormal = 0,
  cudaAccessPropertyStreaming = 1,
  cudaAccessPropertyPersisting = 2
};
struct cudaAccessPolicyWindow {
  void* base_ptr;
  size_t num_bytes;
  float hitRatio;
  enum cudaAccessProperty hitProp;
  enum cudaAccessProperty missProp;
};
enum cudaSynchronizationPolicy {
  cudaSyncPolicyAuto = 1,
  cudaSyncPolicySpin = 2,
  cudaSyncPolicyYield = 3,
  cudaSyncPolicyBlockingSync = 4
};
typedef struct cudaLaunchMemSyncDomainMap_st {
  unsigned char default_;
  unsigned char remote;
} cudaLaunchMemSyncDomainMap;
enum cudaLaunchMemSyncDomain { cudaLaunchMemSyncDomainDefault = 0, cudaLaunchMemSyncDomainRemote = 1 };
union cudaLaunchAttributeValue {
  char pad[64];
  struct cudaAccessPolicyWindow accessPolicyWindow;
  int cooperative;
  enum cudaSynchronizationPolicy syncPolicy;
  struct {
    unsigned int x;
    unsigned int y;
    unsigned int z;
  } clusterDim;
  enum cudaClusterSchedulingPolicy clusterSchedulingPolicyPreference;
  int programmaticStreamSerializationAllowed;
  struct {
    cudaEvent_t event;
    int flags;
    int triggerAtBlockStart;
  } programmaticEvent;
  int priority;
  cudaLaunchMemSyncDomainMap memSyncDomainMap;
  enum cudaLaunchMemSyncDomain memSyncDomain;
  struct {
    cudaEvent_t event;
    int flags;
  } launchCompletionEvent;
};
struct cudaLaunchAttribute_st {
  enum cudaLaunchAttributeID id;
  char pad[8 - sizeof(enum cudaLaunchAttributeID)];
  union cudaLaunchAttributeValue val;
};
typedef struct cudaLaunchAttribute_st cudaLaunchAttribute;
struct cudaLaunchConfig_st {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
};
typedef struct cudaLaunchConfig_st cudaLaunchConfig_t;
static_assert(sizeof(cudaLaunchAttributeValue) == 64 && sizeof(cudaLaunchAttribute) == 72 &&
              offsetof(cudaLaunchAttribute, val) == 8 && sizeof(cudaLaunchConfig_t) == 56 &&
              offsetof(cudaLaunchConfig_t, dynamicSmemBytes) == 24 && offsetof(cudaLaunchConfig_t, attrs) == 40 &&
              offsetof(cudaLaunchConfig_t, numAttrs) == 48);
static_assert(sizeof(cudaAccessPolicyWindow) == 32 && offsetof(cudaAccessPolicyWindow, hitRatio) == 16);

VMCUDA_CUDART_END

/// Stream attributes are launch attributes (driver_types.h spells them as macros).
#ifndef cudaStreamAttrID
#define cudaStreamAttrID cudaLaunchAttributeID
#define cudaStreamAttrValue cudaLaunchAttributeValue
#define cudaStreamAttributeAccessPolicyWindow cudaLaunchAttributeAccessPolicyWindow
#define cudaStreamAttributeSynchronizationPolicy cudaLaunchAttributeSynchronizationPolicy
#define cudaStreamAttributeMemSyncDomainMap cudaLaunchAttributeMemSyncDomainMap
#define cudaStreamAttributeMemSyncDomain cudaLaunchAttributeMemSyncDomain
#define cudaStreamAttributePriority cudaLaunchAttributePriority
#endif

VMCUDA_CUDART_BEGIN

VMCUDA_CUDART_END

/// driver_types.h: cudaHostAlloc, cudaHostRegister and cudaMallocManaged flags. Macros, as NVIDIA's are.
#ifndef cudaHostAllocDefault
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaHostRegisterIoMemory 0x04
#define cudaHostRegisterReadOnly 0x08
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaMemAttachSingle 0x04
#endif

/// driver_types.h: the device id of no device, and the occupancy flags. Macros, as NVIDIA's are.
#ifndef cudaInvalidDeviceId
#define cudaInvalidDeviceId ((int)-2)
#endif
#ifndef cudaCpuDeviceId
#define cudaCpuDeviceId ((int)-1)
#endif
#ifndef cudaOccupancyDefault
#define cudaOccupancyDefault 0x00
#define cudaOccupancyDisableCachingOverride 0x01
#endif

/// driver_types.h: stream and event flags and the special streams. Macros, as NVIDIA's are
/// (so they are global even under VMCUDA_CUDART_PARITY_NAMESPACE); defined only where
/// NVIDIA's headers have not defined them already.
#ifndef cudaStreamDefault
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04
// IPC (cuda_runtime_api.h): 64 opaque bytes each.
#define CUDA_IPC_HANDLE_SIZE 64
typedef struct cudaIpcEventHandle_st {
  char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcEventHandle_t;
typedef struct cudaIpcMemHandle_st {
  char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcMemHandle_t;
#define cudaIpcMemLazyEnablePeerAccess 0x01
#define cudaEventRecordDefault 0x00
#define cudaEventRecordExternal 0x01
#define cudaEventWaitDefault 0x00
#define cudaEventWaitExternal 0x01
#endif

// ---------------------------------------------------------------- device area (device.cc)

/// driver_types.h: cudaDeviceAttr, as one list (the parity test checks every value). Each
/// value is the CUdevice_attribute of the same number, which indexes
/// api::DevicePropertiesReply::attributes.
#define VMCUDA_CUDART_DEVICE_ATTRS(X) \
  X(cudaDevAttrMaxThreadsPerBlock, 1) \
  X(cudaDevAttrMaxBlockDimX, 2) \
  X(cudaDevAttrMaxBlockDimY, 3) \
  X(cudaDevAttrMaxBlockDimZ, 4) \
  X(cudaDevAttrMaxGridDimX, 5) \
  X(cudaDevAttrMaxGridDimY, 6) \
  X(cudaDevAttrMaxGridDimZ, 7) \
  X(cudaDevAttrMaxSharedMemoryPerBlock, 8) \
  X(cudaDevAttrTotalConstantMemory, 9) \
  X(cudaDevAttrWarpSize, 10) \
  X(cudaDevAttrMaxPitch, 11) \
  X(cudaDevAttrMaxRegistersPerBlock, 12) \
  X(cudaDevAttrClockRate, 13) \
  X(cudaDevAttrTextureAlignment, 14) \
  X(cudaDevAttrGpuOverlap, 15) \
  X(cudaDevAttrMultiProcessorCount, 16) \
  X(cudaDevAttrKernelExecTimeout, 17) \
  X(cudaDevAttrIntegrated, 18) \
  X(cudaDevAttrCanMapHostMemory, 19) \
  X(cudaDevAttrComputeMode, 20) \
  X(cudaDevAttrMaxTexture1DWidth, 21) \
  X(cudaDevAttrMaxTexture2DWidth, 22) \
  X(cudaDevAttrMaxTexture2DHeight, 23) \
  X(cudaDevAttrMaxTexture3DWidth, 24) \
  X(cudaDevAttrMaxTexture3DHeight, 25) \
  X(cudaDevAttrMaxTexture3DDepth, 26) \
  X(cudaDevAttrMaxTexture2DLayeredWidth, 27) \
  X(cudaDevAttrMaxTexture2DLayeredHeight, 28) \
  X(cudaDevAttrMaxTexture2DLayeredLayers, 29) \
  X(cudaDevAttrSurfaceAlignment, 30) \
  X(cudaDevAttrConcurrentKernels, 31) \
  X(cudaDevAttrEccEnabled, 32) \
  X(cudaDevAttrPciBusId, 33) \
  X(cudaDevAttrPciDeviceId, 34) \
  X(cudaDevAttrTccDriver, 35) \
  X(cudaDevAttrMemoryClockRate, 36) \
  X(cudaDevAttrGlobalMemoryBusWidth, 37) \
  X(cudaDevAttrL2CacheSize, 38) \
  X(cudaDevAttrMaxThreadsPerMultiProcessor, 39) \
  X(cudaDevAttrAsyncEngineCount, 40) \
  X(cudaDevAttrUnifiedAddressing, 41) \
  X(cudaDevAttrMaxTexture1DLayeredWidth, 42) \
  X(cudaDevAttrMaxTexture1DLayeredLayers, 43) \
  X(cudaDevAttrMaxTexture2DGatherWidth, 45) \
  X(cudaDevAttrMaxTexture2DGatherHeight, 46) \
  X(cudaDevAttrMaxTexture3DWidthAlt, 47) \
  X(cudaDevAttrMaxTexture3DHeightAlt, 48) \
  X(cudaDevAttrMaxTexture3DDepthAlt, 49) \
  X(cudaDevAttrPciDomainId, 50) \
  X(cudaDevAttrTexturePitchAlignment, 51) \
  X(cudaDevAttrMaxTextureCubemapWidth, 52) \
  X(cudaDevAttrMaxTextureCubemapLayeredWidth, 53) \
  X(cudaDevAttrMaxTextureCubemapLayeredLayers, 54) \
  X(cudaDevAttrMaxSurface1DWidth, 55) \
  X(cudaDevAttrMaxSurface2DWidth, 56) \
  X(cudaDevAttrMaxSurface2DHeight, 57) \
  X(cudaDevAttrMaxSurface3DWidth, 58) \
  X(cudaDevAttrMaxSurface3DHeight, 59) \
  X(cudaDevAttrMaxSurface3DDepth, 60) \
  X(cudaDevAttrMaxSurface1DLayeredWidth, 61) \
  X(cudaDevAttrMaxSurface1DLayeredLayers, 62) \
  X(cudaDevAttrMaxSurface2DLayeredWidth, 63) \
  X(cudaDevAttrMaxSurface2DLayeredHeight, 64) \
  X(cudaDevAttrMaxSurface2DLayeredLayers, 65) \
  X(cudaDevAttrMaxSurfaceCubemapWidth, 66) \
  X(cudaDevAttrMaxSurfaceCubemapLayeredWidth, 67) \
  X(cudaDevAttrMaxSurfaceCubemapLayeredLayers, 68) \
  X(cudaDevAttrMaxTexture1DLinearWidth, 69) \
  X(cudaDevAttrMaxTexture2DLinearWidth, 70) \
  X(cudaDevAttrMaxTexture2DLinearHeight, 71) \
  X(cudaDevAttrMaxTexture2DLinearPitch, 72) \
  X(cudaDevAttrMaxTexture2DMipmappedWidth, 73) \
  X(cudaDevAttrMaxTexture2DMipmappedHeight, 74) \
  X(cudaDevAttrComputeCapabilityMajor, 75) \
  X(cudaDevAttrComputeCapabilityMinor, 76) \
  X(cudaDevAttrMaxTexture1DMipmappedWidth, 77) \
  X(cudaDevAttrStreamPrioritiesSupported, 78) \
  X(cudaDevAttrGlobalL1CacheSupported, 79) \
  X(cudaDevAttrLocalL1CacheSupported, 80) \
  X(cudaDevAttrMaxSharedMemoryPerMultiprocessor, 81) \
  X(cudaDevAttrMaxRegistersPerMultiprocessor, 82) \
  X(cudaDevAttrManagedMemory, 83) \
  X(cudaDevAttrIsMultiGpuBoard, 84) \
  X(cudaDevAttrMultiGpuBoardGroupID, 85) \
  X(cudaDevAttrHostNativeAtomicSupported, 86) \
  X(cudaDevAttrSingleToDoublePrecisionPerfRatio, 87) \
  X(cudaDevAttrPageableMemoryAccess, 88) \
  X(cudaDevAttrConcurrentManagedAccess, 89) \
  X(cudaDevAttrComputePreemptionSupported, 90) \
  X(cudaDevAttrCanUseHostPointerForRegisteredMem, 91) \
  X(cudaDevAttrReserved92, 92) \
  X(cudaDevAttrReserved93, 93) \
  X(cudaDevAttrReserved94, 94) \
  X(cudaDevAttrCooperativeLaunch, 95) \
  X(cudaDevAttrReserved96, 96) \
  X(cudaDevAttrMaxSharedMemoryPerBlockOptin, 97) \
  X(cudaDevAttrCanFlushRemoteWrites, 98) \
  X(cudaDevAttrHostRegisterSupported, 99) \
  X(cudaDevAttrPageableMemoryAccessUsesHostPageTables, 100) \
  X(cudaDevAttrDirectManagedMemAccessFromHost, 101) \
  X(cudaDevAttrMaxBlocksPerMultiprocessor, 106) \
  X(cudaDevAttrMaxPersistingL2CacheSize, 108) \
  X(cudaDevAttrMaxAccessPolicyWindowSize, 109) \
  X(cudaDevAttrReservedSharedMemoryPerBlock, 111) \
  X(cudaDevAttrSparseCudaArraySupported, 112) \
  X(cudaDevAttrHostRegisterReadOnlySupported, 113) \
  X(cudaDevAttrTimelineSemaphoreInteropSupported, 114) \
  X(cudaDevAttrMemoryPoolsSupported, 115) \
  X(cudaDevAttrGPUDirectRDMASupported, 116) \
  X(cudaDevAttrGPUDirectRDMAFlushWritesOptions, 117) \
  X(cudaDevAttrGPUDirectRDMAWritesOrdering, 118) \
  X(cudaDevAttrMemoryPoolSupportedHandleTypes, 119) \
  X(cudaDevAttrClusterLaunch, 120) \
  X(cudaDevAttrDeferredMappingCudaArraySupported, 121) \
  X(cudaDevAttrReserved122, 122) \
  X(cudaDevAttrReserved123, 123) \
  X(cudaDevAttrReserved124, 124) \
  X(cudaDevAttrIpcEventSupport, 125) \
  X(cudaDevAttrMemSyncDomainCount, 126) \
  X(cudaDevAttrReserved127, 127) \
  X(cudaDevAttrReserved128, 128) \
  X(cudaDevAttrReserved129, 129) \
  X(cudaDevAttrNumaConfig, 130) \
  X(cudaDevAttrNumaId, 131) \
  X(cudaDevAttrReserved132, 132) \
  X(cudaDevAttrMpsEnabled, 133) \
  X(cudaDevAttrHostNumaId, 134) \
  X(cudaDevAttrD3D12CigSupported, 135) \
  X(cudaDevAttrVulkanCigSupported, 138) \
  X(cudaDevAttrGpuPciDeviceId, 139) \
  X(cudaDevAttrGpuPciSubsystemId, 140) \
  X(cudaDevAttrReserved141, 141) \
  X(cudaDevAttrHostNumaMemoryPoolsSupported, 142) \
  X(cudaDevAttrHostNumaMultinodeIpcSupported, 143) \
  X(cudaDevAttrHostMemoryPoolsSupported, 144) \
  X(cudaDevAttrReserved145, 145) \
  X(cudaDevAttrOnlyPartialHostNativeAtomicSupported, 147)

VMCUDA_CUDART_BEGIN

enum cudaDeviceAttr {
#define VMCUDA_CUDART_ENUMERATOR(name, value) name = value,
  VMCUDA_CUDART_DEVICE_ATTRS(VMCUDA_CUDART_ENUMERATOR)
#undef VMCUDA_CUDART_ENUMERATOR
  cudaDevAttrMax  // 148 in CUDA 13.0: one past the last attribute
};
static_assert(sizeof(cudaDeviceAttr) == 4);

/// driver_types.h: cudaUUID_t (CUuuid).
struct CUuuid_st {
  char bytes[16];
};
typedef struct CUuuid_st cudaUUID_t;

/// driver_types.h: cudaDeviceProp of CUDA 13.0 (cudaGetDeviceProperties; CUDA 12's fields
/// that 13.0 removed, clockRate, computeMode, ..., are gone, and the struct is 1008 bytes).
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int multiProcessorCount;
  int integrated;
  int canMapHostMemory;
  int maxTexture1D;
  int maxTexture1DMipmap;
  int maxTexture2D[2];
  int maxTexture2DMipmap[2];
  int maxTexture2DLinear[3];
  int maxTexture2DGather[2];
  int maxTexture3D[3];
  int maxTexture3DAlt[3];
  int maxTextureCubemap;
  int maxTexture1DLayered[2];
  int maxTexture2DLayered[3];
  int maxTextureCubemapLayered[2];
  int maxSurface1D;
  int maxSurface2D[2];
  int maxSurface3D[3];
  int maxSurface1DLayered[2];
  int maxSurface2DLayered[3];
  int maxSurfaceCubemap;
  int maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int tccDriver;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported;
  int globalL1CacheSupported;
  int localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int multiGpuBoardGroupID;
  int hostNativeAtomicSupported;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  int computePreemptionSupported;
  int canUseHostPointerForRegisteredMem;
  int cooperativeLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables;
  int directManagedMemAccessFromHost;
  int maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported;
  int sparseCudaArraySupported;
  int hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported;
  int memoryPoolsSupported;
  int gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingCudaArraySupported;
  int ipcEventSupported;
  int clusterLaunch;
  int unifiedFunctionPointers;
  int deviceNumaConfig;
  int deviceNumaId;
  int mpsEnabled;
  int hostNumaId;
  unsigned int gpuPciDeviceID;
  unsigned int gpuPciSubsystemID;
  int hostNumaMultinodeIpcSupported;
  int reserved[56];
};
static_assert(sizeof(cudaDeviceProp) == 1008 && alignof(cudaDeviceProp) == 8);
static_assert(offsetof(cudaDeviceProp, totalGlobalMem) == 288 && offsetof(cudaDeviceProp, reserved) == 784);


/// driver_types.h: graphs and stream capture (graph.cc). The handles are opaque pointers;
/// vmcuda's are numbers it makes (like streams'), never dereferenced.
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphNode_st* cudaGraphNode_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamUpdateCaptureDependenciesFlags {
  cudaStreamAddCaptureDependencies = 0x0,
  cudaStreamSetCaptureDependencies = 0x1,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaGraphNodeType {
  cudaGraphNodeTypeKernel = 0x00,
  cudaGraphNodeTypeMemcpy = 0x01,
  cudaGraphNodeTypeMemset = 0x02,
  cudaGraphNodeTypeHost = 0x03,
  cudaGraphNodeTypeGraph = 0x04,
  cudaGraphNodeTypeEmpty = 0x05,
  cudaGraphNodeTypeWaitEvent = 0x06,
  cudaGraphNodeTypeEventRecord = 0x07,
  cudaGraphNodeTypeExtSemaphoreSignal = 0x08,
  cudaGraphNodeTypeExtSemaphoreWait = 0x09,
  cudaGraphNodeTypeMemAlloc = 0x0a,
  cudaGraphNodeTypeMemFree = 0x0b,
  cudaGraphNodeTypeConditional = 0x0d,
  cudaGraphNodeTypeCount,
};
enum cudaGraphExecUpdateResult {
  cudaGraphExecUpdateSuccess = 0x0,
  cudaGraphExecUpdateError = 0x1,
  cudaGraphExecUpdateErrorTopologyChanged = 0x2,
  cudaGraphExecUpdateErrorNodeTypeChanged = 0x3,
  cudaGraphExecUpdateErrorFunctionChanged = 0x4,
  cudaGraphExecUpdateErrorParametersChanged = 0x5,
  cudaGraphExecUpdateErrorNotSupported = 0x6,
  cudaGraphExecUpdateErrorUnsupportedFunctionChange = 0x7,
  cudaGraphExecUpdateErrorAttributesChanged = 0x8,
};
struct cudaGraphExecUpdateResultInfo {
  enum cudaGraphExecUpdateResult result;
  cudaGraphNode_t errorNode;
  cudaGraphNode_t errorFromNode;
};
static_assert(sizeof(cudaGraphExecUpdateResultInfo) == 24);
struct cudaGraphEdgeData {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
};
static_assert(sizeof(cudaGraphEdgeData) == 8);
/// driver_types.h: cudaGraphInstantiateWithParams's parameters and results.
enum cudaGraphInstantiateFlags {
  cudaGraphInstantiateFlagAutoFreeOnLaunch = 1,
  cudaGraphInstantiateFlagUpload = 2,
  cudaGraphInstantiateFlagDeviceLaunch = 4,
  cudaGraphInstantiateFlagUseNodePriority = 8,
};
typedef enum cudaGraphInstantiateResult {
  cudaGraphInstantiateSuccess = 0,
  cudaGraphInstantiateError = 1,
  cudaGraphInstantiateInvalidStructure = 2,
  cudaGraphInstantiateNodeOperationNotSupported = 3,
  cudaGraphInstantiateMultipleDevicesNotSupported = 4,
  cudaGraphInstantiateConditionalHandleUnused = 5,
} cudaGraphInstantiateResult;
typedef struct cudaGraphInstantiateParams_st {
  unsigned long long flags;
  cudaStream_t uploadStream;
  cudaGraphNode_t errNode_out;
  cudaGraphInstantiateResult result_out;
} cudaGraphInstantiateParams;
static_assert(sizeof(cudaGraphInstantiateParams) == 32);
struct cudaKernelNodeParams {
  void* func;
  dim3 gridDim;
  dim3 blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
};
static_assert(sizeof(cudaKernelNodeParams) == 56 && offsetof(cudaKernelNodeParams, kernelParams) == 40);
struct cudaMemsetParams {
  void* dst;
  size_t pitch;
  unsigned int value;
  unsigned int elementSize;
  size_t width;
  size_t height;
};
static_assert(sizeof(cudaMemsetParams) == 40);
struct cudaHostNodeParams {
  cudaHostFn_t fn;
  void* userData;
};
/// Graph memory nodes (graph_memory.cc).
struct cudaMemAllocNodeParams {
  struct cudaMemPoolProps poolProps;
  const struct cudaMemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  void* dptr;  // out
};
static_assert(sizeof(cudaMemAllocNodeParams) == 120 && offsetof(cudaMemAllocNodeParams, dptr) == 112);
struct cudaMemAllocNodeParamsV2 {
  struct cudaMemPoolProps poolProps;
  const struct cudaMemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  void* dptr;
};
struct cudaMemFreeNodeParams {
  void* dptr;
};
enum cudaGraphMemAttributeType {
  cudaGraphMemAttrUsedMemCurrent = 0x0,
  cudaGraphMemAttrUsedMemHigh = 0x1,
  cudaGraphMemAttrReservedMemCurrent = 0x2,
  cudaGraphMemAttrReservedMemHigh = 0x3,
};
/// cudaGraphAddNode's parameters (graph_nodes.cc), CUDA 12.3's layout: a type, then a union
/// of each kind's parameters (232 bytes).
typedef unsigned long long cudaGraphConditionalHandle;
enum cudaGraphConditionalHandleFlags { cudaGraphCondAssignDefault = 1 };
enum cudaGraphConditionalNodeType { cudaGraphCondTypeIf = 0, cudaGraphCondTypeWhile = 1, cudaGraphCondTypeSwitch = 2 };
struct cudaConditionalNodeParams {
  cudaGraphConditionalHandle handle;
  enum cudaGraphConditionalNodeType type;
  unsigned int size;
  cudaGraph_t* phGraph_out;
};
struct cudaKernelNodeParamsV2 {
  void* func;
  dim3 gridDim;
  dim3 blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
};
struct cudaMemcpyNodeParams {
  int flags;
  int reserved[3];
  struct cudaMemcpy3DParms copyParams;
};
struct cudaMemsetParamsV2 {
  void* dst;
  size_t pitch;
  unsigned int value;
  unsigned int elementSize;
  size_t width;
  size_t height;
};
struct cudaHostNodeParamsV2 {
  cudaHostFn_t fn;
  void* userData;
};
enum cudaGraphChildGraphNodeOwnership { cudaGraphChildGraphOwnershipClone = 0, cudaGraphChildGraphOwnershipMove = 1 };
struct cudaChildGraphNodeParams {
  cudaGraph_t graph;
  enum cudaGraphChildGraphNodeOwnership ownership;
};
struct cudaEventRecordNodeParams {
  cudaEvent_t event;
};
struct cudaEventWaitNodeParams {
  cudaEvent_t event;
};
struct cudaGraphNodeParams {
  enum cudaGraphNodeType type;
  int reserved0[3];
  union {
    long long reserved1[29];
    struct cudaKernelNodeParamsV2 kernel;
    struct cudaMemcpyNodeParams memcpy;
    struct cudaMemsetParamsV2 memset;
    struct cudaHostNodeParamsV2 host;
    struct cudaChildGraphNodeParams graph;
    struct cudaEventWaitNodeParams eventWait;
    struct cudaEventRecordNodeParams eventRecord;
    struct cudaConditionalNodeParams conditional;
    struct cudaMemAllocNodeParamsV2 alloc;
    struct cudaMemFreeNodeParams free;
  };
  long long reserved2;
};
static_assert(sizeof(cudaGraphNodeParams) == 256 && offsetof(cudaGraphNodeParams, kernel) == 16 &&
              sizeof(cudaMemcpyNodeParams) == 176 && sizeof(cudaConditionalNodeParams) == 24 &&
              offsetof(cudaGraphNodeParams, alloc) == 16);
/// User objects (user_objects.cc).
typedef struct CUuserObject_st* cudaUserObject_t;
enum cudaUserObjectFlags { cudaUserObjectNoDestructorSync = 0x1 };
enum cudaUserObjectRetainFlags { cudaGraphUserObjectMove = 0x1 };

VMCUDA_CUDART_END

/// driver_types.h: device flags (cudaSetDeviceFlags, cudaGetDeviceFlags, cudaInitDevice).
/// Macros, as NVIDIA's are; defined only where NVIDIA's headers have not defined them.
#ifndef cudaDeviceScheduleAuto
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceScheduleSpin 0x01
#define cudaDeviceScheduleYield 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceBlockingSync 0x04
#define cudaDeviceScheduleMask 0x07
#define cudaDeviceMapHost 0x08
#define cudaDeviceLmemResizeToMax 0x10
#define cudaDeviceSyncMemops 0x80
#define cudaDeviceMask 0xff
#define cudaInitDeviceFlagsAreValid 0x01
#endif
