// Parity of guest-lib's own CUDA types and hand-written signatures with NVIDIA's, where the
// toolkit is installed (CMake builds this test only then; elsewhere it reports a skip).
//  - at compile time: every cudaError_t value, the other enums, the structs' sizes and
//    offsets, and the ABI of each hand-written entry point, against NVIDIA's headers;
//  - at run time: the error names and strings, the runtime version and channel
//    descriptors, against NVIDIA's libcudart.so.13 itself (dlopen'ed by path, no driver
//    needed), and that NVIDIA's knows no error code guest-lib does not.
// The order of these includes matters.
// clang-format off
#include <math.h>    // crt/host_runtime.h uses sqrt, memcpy, ... without including them
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#include <cuda_profiler_api.h>
#include <cuda.h>
// The host-side registration entry points: the second inclusion of crt/host_runtime.h
// declares them (the first defines the macros nvcc's generated code uses).
#include <crt/host_runtime.h>
#include <crt/host_runtime.h>
// clang-format on

#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <iterator>

#include "guest-lib/abi_shape.h"
// vmcuda's declarations, in namespace ours beside NVIDIA's.
#define VMCUDA_CUDART_PARITY_NAMESPACE ours
#include "vmcuda/cudart_api.h"
// After it: its declarations then name NVIDIA's types (cudaDeviceProp, cudaDevAttrMax).
#include "device_props.h"
// vmcuda-stub's transcription of the driver structures it passes (host-stub/src); cuda.h's
// macros of the same names are set aside meanwhile.
#pragma push_macro("CU_STREAM_LEGACY")
#pragma push_macro("CU_STREAM_PER_THREAD")
#pragma push_macro("CU_MEMHOSTREGISTER_PORTABLE")
#pragma push_macro("CU_MEMHOSTREGISTER_DEVICEMAP")
#undef CU_STREAM_LEGACY
#undef CU_STREAM_PER_THREAD
#undef CU_MEMHOSTREGISTER_PORTABLE
#undef CU_MEMHOSTREGISTER_DEVICEMAP
#include "driver_api.h"
#pragma pop_macro("CU_STREAM_LEGACY")
#pragma pop_macro("CU_STREAM_PER_THREAD")
#pragma pop_macro("CU_MEMHOSTREGISTER_PORTABLE")
#pragma pop_macro("CU_MEMHOSTREGISTER_DEVICEMAP")
#include "vmcuda/api/wire.h"  // the launch attribute ids on the wire

// ---- values
#define VMCUDA_CUDART_ERROR(name, value, string)                                       \
  static_assert(static_cast<long>(::name) == value, #name ": NVIDIA's value differs"); \
  static_assert(static_cast<long>(ours::name) == value);
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
static_assert(sizeof(::cudaError_t) == sizeof(ours::cudaError_t));
static_assert(std::is_signed_v<std::underlying_type_t<::cudaError>> ==
              std::is_signed_v<std::underlying_type_t<ours::cudaError>>);
static_assert(ours::kCudartVersion == CUDART_VERSION);

#define SAME_ENUMERATOR(name) static_assert(static_cast<int>(::name) == static_cast<int>(ours::name), #name);
SAME_ENUMERATOR(cudaChannelFormatKindSigned)
SAME_ENUMERATOR(cudaChannelFormatKindUnsigned)
SAME_ENUMERATOR(cudaChannelFormatKindFloat)
SAME_ENUMERATOR(cudaChannelFormatKindNone)
SAME_ENUMERATOR(cudaChannelFormatKindNV12)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized8X1)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized8X2)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized8X4)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized16X1)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized16X2)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized16X4)
SAME_ENUMERATOR(cudaChannelFormatKindSignedNormalized8X1)
SAME_ENUMERATOR(cudaChannelFormatKindSignedNormalized8X2)
SAME_ENUMERATOR(cudaChannelFormatKindSignedNormalized8X4)
SAME_ENUMERATOR(cudaChannelFormatKindSignedNormalized16X1)
SAME_ENUMERATOR(cudaChannelFormatKindSignedNormalized16X2)
SAME_ENUMERATOR(cudaChannelFormatKindSignedNormalized16X4)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed1)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed1SRGB)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed2)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed2SRGB)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed3)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed3SRGB)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed4)
SAME_ENUMERATOR(cudaChannelFormatKindSignedBlockCompressed4)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed5)
SAME_ENUMERATOR(cudaChannelFormatKindSignedBlockCompressed5)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed6H)
SAME_ENUMERATOR(cudaChannelFormatKindSignedBlockCompressed6H)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed7)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedBlockCompressed7SRGB)
SAME_ENUMERATOR(cudaChannelFormatKindUnsignedNormalized1010102)
SAME_ENUMERATOR(cudaMemcpyHostToHost)
SAME_ENUMERATOR(cudaMemcpyHostToDevice)
SAME_ENUMERATOR(cudaMemcpyDeviceToHost)
SAME_ENUMERATOR(cudaMemcpyDeviceToDevice)
SAME_ENUMERATOR(cudaMemcpyDefault)
SAME_ENUMERATOR(cudaMemoryTypeUnregistered)
SAME_ENUMERATOR(cudaMemoryTypeHost)
SAME_ENUMERATOR(cudaMemoryTypeDevice)
SAME_ENUMERATOR(cudaMemoryTypeManaged)
SAME_ENUMERATOR(cudaMemRangeAttributeReadMostly)
SAME_ENUMERATOR(cudaMemRangeAttributePreferredLocation)
SAME_ENUMERATOR(cudaMemRangeAttributeAccessedBy)
SAME_ENUMERATOR(cudaMemRangeAttributeLastPrefetchLocation)
SAME_ENUMERATOR(cudaMemRangeAttributePreferredLocationType)
SAME_ENUMERATOR(cudaMemRangeAttributePreferredLocationId)
SAME_ENUMERATOR(cudaMemRangeAttributeLastPrefetchLocationType)
SAME_ENUMERATOR(cudaMemRangeAttributeLastPrefetchLocationId)
SAME_ENUMERATOR(cudaAtomicOperationIntegerAdd)
SAME_ENUMERATOR(cudaAtomicOperationCAS)
SAME_ENUMERATOR(cudaAtomicOperationFloatMax)
SAME_ENUMERATOR(cudaAtomicCapabilitySigned)
SAME_ENUMERATOR(cudaAtomicCapabilityReduction)
SAME_ENUMERATOR(cudaAtomicCapabilityScalar64)
SAME_ENUMERATOR(cudaAtomicCapabilityVector32x4)
SAME_ENUMERATOR(cudaFlushGPUDirectRDMAWritesToOwner)
SAME_ENUMERATOR(cudaFlushGPUDirectRDMAWritesToAllDevices)
SAME_ENUMERATOR(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice)
SAME_ENUMERATOR(cudaGraphInstantiateSuccess)
SAME_ENUMERATOR(cudaGraphInstantiateFlagUpload)
SAME_ENUMERATOR(cudaGraphInstantiateFlagUseNodePriority)
SAME_ENUMERATOR(cudaGraphInstantiateConditionalHandleUnused)
static_assert(sizeof(::cudaGraphInstantiateParams) == sizeof(ours::cudaGraphInstantiateParams) &&
              offsetof(::cudaGraphInstantiateParams, result_out) == offsetof(ours::cudaGraphInstantiateParams, result_out));
static_assert(cudaCpuDeviceId == -1 && cudaInvalidDeviceId == -2);
SAME_ENUMERATOR(cudaFuncAttributeMaxDynamicSharedMemorySize)
SAME_ENUMERATOR(cudaFuncAttributePreferredSharedMemoryCarveout)
SAME_ENUMERATOR(cudaFuncAttributeClusterDimMustBeSet)
SAME_ENUMERATOR(cudaFuncAttributeRequiredClusterWidth)
SAME_ENUMERATOR(cudaFuncAttributeRequiredClusterHeight)
SAME_ENUMERATOR(cudaFuncAttributeRequiredClusterDepth)
SAME_ENUMERATOR(cudaFuncAttributeNonPortableClusterSizeAllowed)
SAME_ENUMERATOR(cudaFuncAttributeClusterSchedulingPolicyPreference)
SAME_ENUMERATOR(cudaFuncAttributeMax)
// Memory pools (memory_pool.cc).
SAME_ENUMERATOR(cudaMemPoolReuseFollowEventDependencies)
SAME_ENUMERATOR(cudaMemPoolAttrReleaseThreshold)
SAME_ENUMERATOR(cudaMemPoolAttrUsedMemHigh)
SAME_ENUMERATOR(cudaMemAccessFlagsProtReadWrite)
SAME_ENUMERATOR(cudaMemAllocationTypePinned)
SAME_ENUMERATOR(cudaMemHandleTypeFabric)
#undef SAME_ENUMERATOR
static_assert(sizeof(::cudaMemoryType) == sizeof(ours::cudaMemoryType));
static_assert(sizeof(::cudaFuncAttribute) == sizeof(ours::cudaFuncAttribute));
// The CUfunction_attribute numbers cudaFuncAttributes is filled from, and the driver
// structures vmcuda-stub passes (host-stub/src/driver_api.h, checked by its own tests).
static_assert(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == 0 && CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == 1 &&
              CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES == 2 && CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES == 3 &&
              CU_FUNC_ATTRIBUTE_NUM_REGS == 4 && CU_FUNC_ATTRIBUTE_PTX_VERSION == 5 &&
              CU_FUNC_ATTRIBUTE_BINARY_VERSION == 6 && CU_FUNC_ATTRIBUTE_CACHE_MODE_CA == 7 &&
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == 8 &&
              CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT == 9 &&
              CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET == 10 && CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH == 11 &&
              CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT == 12 && CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH == 13 &&
              CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED == 14 &&
              CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE == 15 && CU_FUNC_ATTRIBUTE_MAX == 16);
static_assert(cudaInvalidDeviceId == -2 && cudaOccupancyDefault == 0 && cudaOccupancyDisableCachingOverride == 1);
#define SAME_MEMCPY2D_FIELD(f)                                                                                   \
  static_assert(offsetof(::CUDA_MEMCPY2D, f) == offsetof(vmcuda::host::CUDA_MEMCPY2D, f), "CUDA_MEMCPY2D." #f); \
  static_assert(sizeof(::CUDA_MEMCPY2D::f) == sizeof(vmcuda::host::CUDA_MEMCPY2D::f), "CUDA_MEMCPY2D." #f);
SAME_MEMCPY2D_FIELD(srcXInBytes)
SAME_MEMCPY2D_FIELD(srcY)
SAME_MEMCPY2D_FIELD(srcMemoryType)
SAME_MEMCPY2D_FIELD(srcHost)
SAME_MEMCPY2D_FIELD(srcDevice)
SAME_MEMCPY2D_FIELD(srcArray)
SAME_MEMCPY2D_FIELD(srcPitch)
SAME_MEMCPY2D_FIELD(dstXInBytes)
SAME_MEMCPY2D_FIELD(dstY)
SAME_MEMCPY2D_FIELD(dstMemoryType)
SAME_MEMCPY2D_FIELD(dstHost)
SAME_MEMCPY2D_FIELD(dstDevice)
SAME_MEMCPY2D_FIELD(dstArray)
SAME_MEMCPY2D_FIELD(dstPitch)
SAME_MEMCPY2D_FIELD(WidthInBytes)
SAME_MEMCPY2D_FIELD(Height)
#undef SAME_MEMCPY2D_FIELD
static_assert(sizeof(::CUDA_MEMCPY2D) == sizeof(vmcuda::host::CUDA_MEMCPY2D));
// Arrays, 3D copies, textures and surfaces (host-stub/src/arrays.cc).
namespace arrays_parity {
namespace h = vmcuda::host;
static_assert(sizeof(::CUDA_MEMCPY3D) == sizeof(h::CUDA_MEMCPY3D) &&
              offsetof(::CUDA_MEMCPY3D, srcArray) == offsetof(h::CUDA_MEMCPY3D, srcArray) &&
              offsetof(::CUDA_MEMCPY3D, srcHeight) == offsetof(h::CUDA_MEMCPY3D, srcHeight) &&
              offsetof(::CUDA_MEMCPY3D, dstXInBytes) == offsetof(h::CUDA_MEMCPY3D, dstXInBytes) &&
              offsetof(::CUDA_MEMCPY3D, dstHeight) == offsetof(h::CUDA_MEMCPY3D, dstHeight) &&
              offsetof(::CUDA_MEMCPY3D, Depth) == offsetof(h::CUDA_MEMCPY3D, Depth));
static_assert(sizeof(::CUDA_ARRAY3D_DESCRIPTOR) == sizeof(h::CUDA_ARRAY3D_DESCRIPTOR) &&
              offsetof(::CUDA_ARRAY3D_DESCRIPTOR, Flags) == offsetof(h::CUDA_ARRAY3D_DESCRIPTOR, Flags));
static_assert(sizeof(::CUDA_RESOURCE_DESC) == sizeof(h::CUDA_RESOURCE_DESC) &&
              offsetof(::CUDA_RESOURCE_DESC, flags) == offsetof(h::CUDA_RESOURCE_DESC, flags) &&
              offsetof(::CUDA_RESOURCE_DESC, res.pitch2D.pitchInBytes) ==
                  offsetof(h::CUDA_RESOURCE_DESC, res.pitch2D.pitchInBytes) &&
              offsetof(::CUDA_RESOURCE_DESC, res.linear.sizeInBytes) ==
                  offsetof(h::CUDA_RESOURCE_DESC, res.linear.sizeInBytes));
static_assert(sizeof(::CUDA_TEXTURE_DESC) == sizeof(h::CUDA_TEXTURE_DESC) &&
              offsetof(::CUDA_TEXTURE_DESC, borderColor) == offsetof(h::CUDA_TEXTURE_DESC, borderColor) &&
              offsetof(::CUDA_TEXTURE_DESC, mipmapFilterMode) == offsetof(h::CUDA_TEXTURE_DESC, mipmapFilterMode));
static_assert(CU_TRSF_READ_AS_INTEGER == h::kTrsfReadAsInteger && CU_TRSF_NORMALIZED_COORDINATES == h::kTrsfNormalizedCoordinates &&
              CU_TRSF_SRGB == h::kTrsfSrgb && CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION == h::kTrsfDisableTrilinearOptimization &&
              CU_TRSF_SEAMLESS_CUBEMAP == h::kTrsfSeamlessCubemap);
static_assert(CUDA_ARRAY3D_LAYERED == h::kArray3DLayered && CUDA_ARRAY3D_SURFACE_LDST == h::kArray3DSurfaceLdst &&
              CUDA_ARRAY3D_CUBEMAP == h::kArray3DCubemap && CUDA_ARRAY3D_TEXTURE_GATHER == h::kArray3DTextureGather);
static_assert(::CU_AD_FORMAT_UNSIGNED_INT8 == h::CU_AD_FORMAT_UNSIGNED_INT8 && ::CU_AD_FORMAT_SIGNED_INT32 == h::CU_AD_FORMAT_SIGNED_INT32 &&
              ::CU_AD_FORMAT_HALF == h::CU_AD_FORMAT_HALF && ::CU_AD_FORMAT_FLOAT == h::CU_AD_FORMAT_FLOAT &&
              ::CU_AD_FORMAT_SIGNED_INT16 == h::CU_AD_FORMAT_SIGNED_INT16);
}  // namespace arrays_parity
static_assert(int{::CU_MEMORYTYPE_HOST} == int{vmcuda::host::CU_MEMORYTYPE_HOST} &&
              int{::CU_MEMORYTYPE_DEVICE} == int{vmcuda::host::CU_MEMORYTYPE_DEVICE} &&
              int{::CU_MEMORYTYPE_ARRAY} == int{vmcuda::host::CU_MEMORYTYPE_ARRAY} &&
              int{::CU_MEMORYTYPE_UNIFIED} == int{vmcuda::host::CU_MEMORYTYPE_UNIFIED});
static_assert(::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
                  vmcuda::host::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
              ::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT ==
                  vmcuda::host::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT &&
              ::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE ==
                  vmcuda::host::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE &&
              ::CU_FUNC_ATTRIBUTE_MAX == vmcuda::host::CU_FUNC_ATTRIBUTE_MAX);
// Launch attribute ids (cudaLaunchAttributeID == CUlaunchAttributeID, and the wire's) and the
// driver's launch configuration as vmcuda-stub fills it (cuLaunchKernelEx).
#define SAME_LAUNCH_ATTRIBUTE(name, cu)                                                          \
  static_assert(int{::name} == int{ours::name} && int{::name} == int{::cu}, #name);
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeIgnore, CU_LAUNCH_ATTRIBUTE_IGNORE)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeAccessPolicyWindow, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeCooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeSynchronizationPolicy, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeClusterDimension, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeClusterSchedulingPolicyPreference,
                      CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeProgrammaticStreamSerialization,
                      CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeProgrammaticEvent, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributePriority, CU_LAUNCH_ATTRIBUTE_PRIORITY)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeMemSyncDomainMap, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeMemSyncDomain, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributePreferredClusterDimension, CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeLaunchCompletionEvent, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeDeviceUpdatableKernelNode, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributePreferredSharedMemoryCarveout,
                      CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)
SAME_LAUNCH_ATTRIBUTE(cudaLaunchAttributeNvlinkUtilCentricScheduling,
                      CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING)
#undef SAME_LAUNCH_ATTRIBUTE
static_assert(int{::cudaClusterSchedulingPolicySpread} == int{ours::cudaClusterSchedulingPolicySpread} &&
              int{::cudaClusterSchedulingPolicyLoadBalancing} == int{ours::cudaClusterSchedulingPolicyLoadBalancing});
static_assert(::CU_LAUNCH_ATTRIBUTE_COOPERATIVE == vmcuda::host::CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
              ::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == vmcuda::host::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&
              ::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE ==
                  vmcuda::host::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE &&
              ::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ==
                  vmcuda::host::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
              ::CU_LAUNCH_ATTRIBUTE_PRIORITY == vmcuda::host::CU_LAUNCH_ATTRIBUTE_PRIORITY &&
              ::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE == vmcuda::host::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
static_assert(::CU_LAUNCH_ATTRIBUTE_COOPERATIVE == vmcuda::api::kLaunchAttrCooperative &&
              ::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == vmcuda::api::kLaunchAttrClusterDimension &&
              ::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE ==
                  vmcuda::api::kLaunchAttrClusterSchedulingPolicy &&
              ::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ==
                  vmcuda::api::kLaunchAttrProgrammaticSerialization &&
              ::CU_LAUNCH_ATTRIBUTE_PRIORITY == vmcuda::api::kLaunchAttrPriority);
static_assert(sizeof(::CUlaunchAttributeValue) == sizeof(vmcuda::host::CUlaunchAttributeValue) &&
              alignof(::CUlaunchAttributeValue) == alignof(vmcuda::host::CUlaunchAttributeValue) &&
              sizeof(::CUlaunchAttribute) == sizeof(vmcuda::host::CUlaunchAttribute) &&
              offsetof(::CUlaunchAttribute, value) == offsetof(vmcuda::host::CUlaunchAttribute, value) &&
              offsetof(::CUlaunchAttributeValue, clusterDim) == offsetof(vmcuda::host::CUlaunchAttributeValue, clusterDim) &&
              offsetof(::CUlaunchAttributeValue, priority) == offsetof(vmcuda::host::CUlaunchAttributeValue, priority));
// Stream attributes (stream.cc on both sides): the value members and their enums.
static_assert(::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW == vmcuda::host::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW &&
              ::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY == vmcuda::host::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY &&
              ::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP == vmcuda::host::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP &&
              ::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN == vmcuda::host::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN);
static_assert(int{::cudaStreamAttributeAccessPolicyWindow} == int{ours::cudaLaunchAttributeAccessPolicyWindow} &&
              int{::cudaStreamAttributeSynchronizationPolicy} == int{ours::cudaLaunchAttributeSynchronizationPolicy} &&
              int{::cudaStreamAttributePriority} == int{ours::cudaLaunchAttributePriority} &&
              int{::cudaStreamAttributeMemSyncDomainMap} == int{ours::cudaLaunchAttributeMemSyncDomainMap} &&
              int{::cudaStreamAttributeMemSyncDomain} == int{ours::cudaLaunchAttributeMemSyncDomain});
static_assert(int{::cudaAccessPropertyPersisting} == int{ours::cudaAccessPropertyPersisting} &&
              int{::cudaAccessPropertyStreaming} == int{ours::cudaAccessPropertyStreaming} &&
              int{::cudaSyncPolicyAuto} == int{ours::cudaSyncPolicyAuto} &&
              int{::cudaSyncPolicyBlockingSync} == int{ours::cudaSyncPolicyBlockingSync} &&
              int{::cudaLaunchMemSyncDomainRemote} == int{ours::cudaLaunchMemSyncDomainRemote} &&
              int{::CU_ACCESS_PROPERTY_PERSISTING} == int{ours::cudaAccessPropertyPersisting} &&
              int{::CU_SYNC_POLICY_BLOCKING_SYNC} == int{ours::cudaSyncPolicyBlockingSync});
static_assert(sizeof(::cudaAccessPolicyWindow) == sizeof(ours::cudaAccessPolicyWindow) &&
              offsetof(::cudaAccessPolicyWindow, num_bytes) == offsetof(ours::cudaAccessPolicyWindow, num_bytes) &&
              offsetof(::cudaAccessPolicyWindow, hitRatio) == offsetof(ours::cudaAccessPolicyWindow, hitRatio) &&
              offsetof(::cudaAccessPolicyWindow, hitProp) == offsetof(ours::cudaAccessPolicyWindow, hitProp) &&
              offsetof(::cudaAccessPolicyWindow, missProp) == offsetof(ours::cudaAccessPolicyWindow, missProp) &&
              sizeof(::CUaccessPolicyWindow) == sizeof(vmcuda::host::CUaccessPolicyWindow) &&
              offsetof(::CUaccessPolicyWindow, missProp) == offsetof(vmcuda::host::CUaccessPolicyWindow, missProp) &&
              offsetof(::cudaLaunchAttributeValue, memSyncDomainMap) ==
                  offsetof(ours::cudaLaunchAttributeValue, memSyncDomainMap) &&
              offsetof(::cudaLaunchMemSyncDomainMap, remote) == offsetof(ours::cudaLaunchMemSyncDomainMap, remote) &&
              offsetof(::CUlaunchAttributeValue, memSyncDomainMap) ==
                  offsetof(vmcuda::host::CUlaunchAttributeValue, memSyncDomainMap));
#define SAME_LAUNCH_CONFIG_FIELD(f)                                                                           \
  static_assert(offsetof(::CUlaunchConfig, f) == offsetof(vmcuda::host::CUlaunchConfig, f), "CUlaunchConfig." #f); \
  static_assert(sizeof(::CUlaunchConfig::f) == sizeof(vmcuda::host::CUlaunchConfig::f), "CUlaunchConfig." #f);
SAME_LAUNCH_CONFIG_FIELD(gridDimX)
SAME_LAUNCH_CONFIG_FIELD(gridDimZ)
SAME_LAUNCH_CONFIG_FIELD(blockDimX)
SAME_LAUNCH_CONFIG_FIELD(blockDimZ)
SAME_LAUNCH_CONFIG_FIELD(sharedMemBytes)
SAME_LAUNCH_CONFIG_FIELD(hStream)
SAME_LAUNCH_CONFIG_FIELD(attrs)
SAME_LAUNCH_CONFIG_FIELD(numAttrs)
#undef SAME_LAUNCH_CONFIG_FIELD
static_assert(sizeof(::CUlaunchConfig) == sizeof(vmcuda::host::CUlaunchConfig));
static_assert(sizeof(::cudaChannelFormatKind) == sizeof(ours::cudaChannelFormatKind));
static_assert(sizeof(::cudaMemcpyKind) == sizeof(ours::cudaMemcpyKind));

// ---- structs
#define SAME_LAYOUT(type)                                       \
  static_assert(sizeof(::type) == sizeof(ours::type), #type);   \
  static_assert(alignof(::type) == alignof(ours::type), #type); \
  static_assert(std::is_trivially_copyable_v<::type> == std::is_trivially_copyable_v<ours::type>, #type);
#define SAME_OFFSET(type, member) \
  static_assert(offsetof(::type, member) == offsetof(ours::type, member), #type "." #member);
SAME_LAYOUT(dim3)
SAME_OFFSET(dim3, x)
SAME_OFFSET(dim3, y)
SAME_OFFSET(dim3, z)
SAME_LAYOUT(uint3)
SAME_OFFSET(uint3, x)
SAME_OFFSET(uint3, y)
SAME_OFFSET(uint3, z)
SAME_LAYOUT(cudaChannelFormatDesc)
SAME_OFFSET(cudaChannelFormatDesc, x)
SAME_OFFSET(cudaChannelFormatDesc, y)
SAME_OFFSET(cudaChannelFormatDesc, z)
SAME_OFFSET(cudaChannelFormatDesc, w)
SAME_OFFSET(cudaChannelFormatDesc, f)
// Pitched memory and 3D copies (memory_3d.cc).
SAME_LAYOUT(cudaPitchedPtr)
SAME_OFFSET(cudaPitchedPtr, ptr)
SAME_OFFSET(cudaPitchedPtr, pitch)
SAME_OFFSET(cudaPitchedPtr, xsize)
SAME_OFFSET(cudaPitchedPtr, ysize)
SAME_LAYOUT(cudaExtent)
SAME_OFFSET(cudaExtent, depth)
SAME_LAYOUT(cudaPos)
SAME_OFFSET(cudaPos, z)
SAME_LAYOUT(cudaMemcpy3DParms)
// rt3: 3D peer and batched copies, sparse and memory-requirement queries.
SAME_LAYOUT(cudaMemcpy3DPeerParms)
SAME_OFFSET(cudaMemcpy3DPeerParms, srcDevice)
SAME_OFFSET(cudaMemcpy3DPeerParms, dstArray)
SAME_OFFSET(cudaMemcpy3DPeerParms, dstDevice)
SAME_OFFSET(cudaMemcpy3DPeerParms, extent)
SAME_LAYOUT(cudaMemcpy3DOperand)
SAME_OFFSET(cudaMemcpy3DOperand, op.ptr.rowLength)
SAME_OFFSET(cudaMemcpy3DOperand, op.ptr.layerHeight)
SAME_OFFSET(cudaMemcpy3DOperand, op.array.offset)
SAME_LAYOUT(cudaMemcpy3DBatchOp)
SAME_OFFSET(cudaMemcpy3DBatchOp, dst)
SAME_OFFSET(cudaMemcpy3DBatchOp, extent)
SAME_OFFSET(cudaMemcpy3DBatchOp, srcAccessOrder)
SAME_OFFSET(cudaMemcpy3DBatchOp, flags)
SAME_LAYOUT(cudaArraySparseProperties)
SAME_OFFSET(cudaArraySparseProperties, miptailSize)
SAME_OFFSET(cudaArraySparseProperties, flags)
SAME_LAYOUT(cudaArrayMemoryRequirements)
SAME_OFFSET(cudaArrayMemoryRequirements, alignment)
static_assert(static_cast<int>(::cudaMemcpyOperandTypeArray) == static_cast<int>(ours::cudaMemcpyOperandTypeArray));
static_assert(static_cast<int>(::cudaStreamSetCaptureDependencies) ==
              static_cast<int>(ours::cudaStreamSetCaptureDependencies));
SAME_OFFSET(cudaMemcpy3DParms, srcArray)
SAME_OFFSET(cudaMemcpy3DParms, srcPos)
SAME_OFFSET(cudaMemcpy3DParms, srcPtr)
SAME_OFFSET(cudaMemcpy3DParms, dstArray)
SAME_OFFSET(cudaMemcpy3DParms, dstPos)
SAME_OFFSET(cudaMemcpy3DParms, dstPtr)
SAME_OFFSET(cudaMemcpy3DParms, extent)
SAME_OFFSET(cudaMemcpy3DParms, kind)
// Memory pools (memory_pool.cc).
SAME_LAYOUT(cudaMemAccessDesc)
SAME_OFFSET(cudaMemAccessDesc, flags)
SAME_LAYOUT(cudaMemPoolProps)
SAME_OFFSET(cudaMemPoolProps, location)
SAME_OFFSET(cudaMemPoolProps, win32SecurityAttributes)
SAME_OFFSET(cudaMemPoolProps, maxSize)
SAME_OFFSET(cudaMemPoolProps, usage)
SAME_OFFSET(cudaMemPoolProps, reserved)
// Pointer and function attributes.
SAME_LAYOUT(cudaPointerAttributes)
SAME_OFFSET(cudaPointerAttributes, type)
SAME_OFFSET(cudaPointerAttributes, device)
SAME_OFFSET(cudaPointerAttributes, devicePointer)
SAME_OFFSET(cudaPointerAttributes, hostPointer)
SAME_OFFSET(cudaPointerAttributes, reserved)
SAME_LAYOUT(cudaFuncAttributes)
SAME_OFFSET(cudaFuncAttributes, sharedSizeBytes)
SAME_OFFSET(cudaFuncAttributes, constSizeBytes)
SAME_OFFSET(cudaFuncAttributes, localSizeBytes)
SAME_OFFSET(cudaFuncAttributes, maxThreadsPerBlock)
SAME_OFFSET(cudaFuncAttributes, numRegs)
SAME_OFFSET(cudaFuncAttributes, ptxVersion)
SAME_OFFSET(cudaFuncAttributes, binaryVersion)
SAME_OFFSET(cudaFuncAttributes, cacheModeCA)
SAME_OFFSET(cudaFuncAttributes, maxDynamicSharedSizeBytes)
SAME_OFFSET(cudaFuncAttributes, preferredShmemCarveout)
SAME_OFFSET(cudaFuncAttributes, clusterDimMustBeSet)
SAME_OFFSET(cudaFuncAttributes, requiredClusterWidth)
SAME_OFFSET(cudaFuncAttributes, requiredClusterHeight)
SAME_OFFSET(cudaFuncAttributes, requiredClusterDepth)
SAME_OFFSET(cudaFuncAttributes, clusterSchedulingPolicyPreference)
SAME_OFFSET(cudaFuncAttributes, nonPortableClusterSizeAllowed)
SAME_OFFSET(cudaFuncAttributes, reserved)
SAME_LAYOUT(cudaLaunchAttributeValue)
SAME_LAYOUT(cudaLaunchAttribute)
SAME_OFFSET(cudaLaunchAttribute, val)
SAME_LAYOUT(cudaLaunchConfig_t)
SAME_OFFSET(cudaLaunchConfig_t, gridDim)
SAME_OFFSET(cudaLaunchConfig_t, blockDim)
SAME_OFFSET(cudaLaunchConfig_t, dynamicSmemBytes)
SAME_OFFSET(cudaLaunchConfig_t, stream)
SAME_OFFSET(cudaLaunchConfig_t, attrs)
SAME_OFFSET(cudaLaunchConfig_t, numAttrs)
SAME_OFFSET(cudaLaunchAttributeValue, cooperative)
SAME_OFFSET(cudaLaunchAttributeValue, clusterDim)
SAME_OFFSET(cudaLaunchAttributeValue, priority)
SAME_OFFSET(cudaLaunchAttributeValue, programmaticEvent)
SAME_OFFSET(cudaLaunchAttributeValue, launchCompletionEvent)
// Graphs (graph.cc).
SAME_LAYOUT(cudaKernelNodeParams)
SAME_OFFSET(cudaKernelNodeParams, gridDim)
SAME_OFFSET(cudaKernelNodeParams, blockDim)
SAME_OFFSET(cudaKernelNodeParams, sharedMemBytes)
SAME_OFFSET(cudaKernelNodeParams, kernelParams)
SAME_OFFSET(cudaKernelNodeParams, extra)
SAME_LAYOUT(cudaMemsetParams)
SAME_OFFSET(cudaMemsetParams, pitch)
SAME_OFFSET(cudaMemsetParams, value)
SAME_OFFSET(cudaMemsetParams, elementSize)
SAME_OFFSET(cudaMemsetParams, width)
SAME_OFFSET(cudaMemsetParams, height)
SAME_LAYOUT(cudaHostNodeParams)
SAME_OFFSET(cudaHostNodeParams, userData)
SAME_LAYOUT(cudaGraphExecUpdateResultInfo)
SAME_OFFSET(cudaGraphExecUpdateResultInfo, errorNode)
SAME_OFFSET(cudaGraphExecUpdateResultInfo, errorFromNode)
SAME_LAYOUT(cudaGraphEdgeData)
SAME_OFFSET(cudaGraphEdgeData, to_port)
SAME_OFFSET(cudaGraphEdgeData, type)
static_assert(static_cast<int>(::cudaStreamCaptureModeRelaxed) == static_cast<int>(ours::cudaStreamCaptureModeRelaxed), "cudaStreamCaptureModeRelaxed");
static_assert(static_cast<int>(::cudaStreamCaptureModeThreadLocal) == static_cast<int>(ours::cudaStreamCaptureModeThreadLocal), "cudaStreamCaptureModeThreadLocal");
static_assert(static_cast<int>(::cudaStreamCaptureStatusInvalidated) == static_cast<int>(ours::cudaStreamCaptureStatusInvalidated), "cudaStreamCaptureStatusInvalidated");
static_assert(static_cast<int>(::cudaGraphNodeTypeEventRecord) == static_cast<int>(ours::cudaGraphNodeTypeEventRecord), "cudaGraphNodeTypeEventRecord");
static_assert(static_cast<int>(::cudaGraphNodeTypeMemFree) == static_cast<int>(ours::cudaGraphNodeTypeMemFree), "cudaGraphNodeTypeMemFree");
static_assert(static_cast<int>(::cudaGraphNodeTypeConditional) == static_cast<int>(ours::cudaGraphNodeTypeConditional), "cudaGraphNodeTypeConditional");
static_assert(static_cast<int>(::cudaGraphExecUpdateErrorTopologyChanged) == static_cast<int>(ours::cudaGraphExecUpdateErrorTopologyChanged), "cudaGraphExecUpdateErrorTopologyChanged");
static_assert(static_cast<int>(::cudaGraphExecUpdateErrorAttributesChanged) == static_cast<int>(ours::cudaGraphExecUpdateErrorAttributesChanged), "cudaGraphExecUpdateErrorAttributesChanged");
static_assert(sizeof(::cudaGraph_t) == sizeof(ours::cudaGraph_t) && sizeof(::cudaGraphExec_t) == sizeof(ours::cudaGraphExec_t));
// cudaGraphAddNode's parameters and conditional nodes (graph_nodes.cc), user objects.
SAME_LAYOUT(cudaGraphNodeParams)
SAME_OFFSET(cudaGraphNodeParams, kernel)
SAME_OFFSET(cudaGraphNodeParams, reserved2)
SAME_LAYOUT(cudaKernelNodeParamsV2)
SAME_OFFSET(cudaKernelNodeParamsV2, kernelParams)
SAME_OFFSET(cudaKernelNodeParamsV2, extra)
SAME_LAYOUT(cudaMemcpyNodeParams)
SAME_OFFSET(cudaMemcpyNodeParams, copyParams)
SAME_LAYOUT(cudaMemsetParamsV2)
SAME_OFFSET(cudaMemsetParamsV2, height)
SAME_LAYOUT(cudaHostNodeParamsV2)
SAME_LAYOUT(cudaChildGraphNodeParams)
SAME_OFFSET(cudaChildGraphNodeParams, ownership)
SAME_LAYOUT(cudaEventRecordNodeParams)
SAME_LAYOUT(cudaEventWaitNodeParams)
SAME_LAYOUT(cudaConditionalNodeParams)
SAME_OFFSET(cudaConditionalNodeParams, type)
SAME_OFFSET(cudaConditionalNodeParams, size)
SAME_OFFSET(cudaConditionalNodeParams, phGraph_out)
static_assert(static_cast<int>(::cudaGraphCondTypeSwitch) == static_cast<int>(ours::cudaGraphCondTypeSwitch), "cudaGraphCondTypeSwitch");
static_assert(static_cast<int>(::cudaGraphCondAssignDefault) == static_cast<int>(ours::cudaGraphCondAssignDefault), "cudaGraphCondAssignDefault");
static_assert(static_cast<int>(::cudaGraphChildGraphOwnershipMove) == static_cast<int>(ours::cudaGraphChildGraphOwnershipMove), "cudaGraphChildGraphOwnershipMove");
static_assert(static_cast<int>(::cudaUserObjectNoDestructorSync) == static_cast<int>(ours::cudaUserObjectNoDestructorSync), "cudaUserObjectNoDestructorSync");
static_assert(static_cast<int>(::cudaGraphUserObjectMove) == static_cast<int>(ours::cudaGraphUserObjectMove), "cudaGraphUserObjectMove");
static_assert(sizeof(::cudaGraphConditionalHandle) == sizeof(ours::cudaGraphConditionalHandle));
// The driver's graph structs vmcuda-stub builds (driver_api.h).
#define SAME_DRIVER_FIELD(type, ourtype, f)                                                              \
  static_assert(offsetof(::type, f) == offsetof(vmcuda::host::ourtype, f), #type "." #f);              \
  static_assert(sizeof(::type::f) == sizeof(vmcuda::host::ourtype::f), #type "." #f);
SAME_DRIVER_FIELD(CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes)
SAME_DRIVER_FIELD(CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, kernelParams)
SAME_DRIVER_FIELD(CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, kern)
SAME_DRIVER_FIELD(CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, ctx)
SAME_DRIVER_FIELD(CUDA_MEMCPY3D, CUDA_MEMCPY3D, srcLOD)
SAME_DRIVER_FIELD(CUDA_MEMCPY3D, CUDA_MEMCPY3D, srcHost)
SAME_DRIVER_FIELD(CUDA_MEMCPY3D, CUDA_MEMCPY3D, srcHeight)
SAME_DRIVER_FIELD(CUDA_MEMCPY3D, CUDA_MEMCPY3D, dstMemoryType)
SAME_DRIVER_FIELD(CUDA_MEMCPY3D, CUDA_MEMCPY3D, dstHeight)
SAME_DRIVER_FIELD(CUDA_MEMCPY3D, CUDA_MEMCPY3D, Depth)
SAME_DRIVER_FIELD(CUDA_MEMSET_NODE_PARAMS, CUDA_MEMSET_NODE_PARAMS, elementSize)
SAME_DRIVER_FIELD(CUDA_MEMSET_NODE_PARAMS, CUDA_MEMSET_NODE_PARAMS, height)
SAME_DRIVER_FIELD(CUDA_HOST_NODE_PARAMS, CUDA_HOST_NODE_PARAMS, userData)
SAME_DRIVER_FIELD(CUgraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo, errorFromNode)
#undef SAME_DRIVER_FIELD
static_assert(sizeof(::CUDA_KERNEL_NODE_PARAMS_v2) == sizeof(vmcuda::host::CUDA_KERNEL_NODE_PARAMS_v2) &&
              sizeof(::CUDA_MEMCPY3D) == sizeof(vmcuda::host::CUDA_MEMCPY3D) &&
              sizeof(::CUDA_MEMSET_NODE_PARAMS) == sizeof(vmcuda::host::CUDA_MEMSET_NODE_PARAMS));
static_assert(::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == vmcuda::host::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
              ::CUDA_ERROR_STREAM_CAPTURE_UNJOINED == vmcuda::host::CUDA_ERROR_STREAM_CAPTURE_UNJOINED &&
              ::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE == vmcuda::host::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
static_assert(int{::CU_GRAPH_NODE_TYPE_EVENT_RECORD} == vmcuda::api::kGraphNodeEventRecord &&
              int{::CU_GRAPH_NODE_TYPE_GRAPH} == vmcuda::api::kGraphNodeChild);
// arrays and textures (guest-lib/src/arrays.cc)
SAME_LAYOUT(cudaResourceDesc)
SAME_OFFSET(cudaResourceDesc, res.array.array)
SAME_OFFSET(cudaResourceDesc, res.linear.desc)
SAME_OFFSET(cudaResourceDesc, res.linear.sizeInBytes)
SAME_OFFSET(cudaResourceDesc, res.pitch2D.width)
SAME_OFFSET(cudaResourceDesc, res.pitch2D.pitchInBytes)
SAME_OFFSET(cudaResourceDesc, flags)
SAME_LAYOUT(cudaResourceViewDesc)
SAME_OFFSET(cudaResourceViewDesc, firstMipmapLevel)
SAME_OFFSET(cudaResourceViewDesc, reserved)
SAME_LAYOUT(cudaTextureDesc)
SAME_OFFSET(cudaTextureDesc, filterMode)
SAME_OFFSET(cudaTextureDesc, readMode)
SAME_OFFSET(cudaTextureDesc, borderColor)
SAME_OFFSET(cudaTextureDesc, normalizedCoords)
SAME_OFFSET(cudaTextureDesc, mipmapFilterMode)
SAME_OFFSET(cudaTextureDesc, seamlessCubemap)
static_assert(int{::cudaResourceTypePitch2D} == int{ours::cudaResourceTypePitch2D} &&
              int{::cudaAddressModeBorder} == int{ours::cudaAddressModeBorder} &&
              int{::cudaFilterModeLinear} == int{ours::cudaFilterModeLinear} &&
              int{::cudaReadModeNormalizedFloat} == int{ours::cudaReadModeNormalizedFloat});
static_assert(sizeof(::cudaTextureObject_t) == sizeof(ours::cudaTextureObject_t) &&
              sizeof(::cudaSurfaceObject_t) == sizeof(ours::cudaSurfaceObject_t));
#undef SAME_LAYOUT
#undef SAME_OFFSET
static_assert(sizeof(::cudaStream_t) == sizeof(ours::cudaStream_t));
static_assert(sizeof(::cudaEvent_t) == sizeof(ours::cudaEvent_t));
static_assert(sizeof(::cudaKernel_t) == sizeof(ours::cudaKernel_t));
// dim3's defaults.
static_assert(::dim3().x == ours::dim3().x && ::dim3().y == ours::dim3().y && ::dim3().z == ours::dim3().z);
static_assert(::dim3(7).y == ours::dim3(7).y && ::dim3(7, 8).z == ours::dim3(7, 8).z);

// ---- signatures of the hand-written entry points
VMCUDA_CUDART_PUBLIC_HAND_WRITTEN(VMCUDA_EXPECT_SAME_ABI)
// From crt/host_runtime.h (the other internal ones are checked under nvcc, in
// tests/guest-lib/app/abi_parity_nvcc.cu).
VMCUDA_EXPECT_SAME_ABI(__cudaRegisterFatBinary)
VMCUDA_EXPECT_SAME_ABI(__cudaRegisterFatBinaryEnd)
VMCUDA_EXPECT_SAME_ABI(__cudaUnregisterFatBinary)
VMCUDA_EXPECT_SAME_ABI(__cudaRegisterFunction)
VMCUDA_EXPECT_SAME_ABI(__cudaRegisterVar)
VMCUDA_EXPECT_SAME_ABI(__cudaRegisterManagedVar)
VMCUDA_EXPECT_SAME_ABI(__cudaInitModule)
VMCUDA_EXPECT_SAME_ABI(__cudaPopCallConfiguration)
// Graphs.
VMCUDA_EXPECT_SAME_ABI(cudaStreamBeginCapture)
VMCUDA_EXPECT_SAME_ABI(cudaStreamEndCapture)
VMCUDA_EXPECT_SAME_ABI(cudaStreamIsCapturing)
VMCUDA_EXPECT_SAME_ABI(cudaStreamGetCaptureInfo)
VMCUDA_EXPECT_SAME_ABI(cudaThreadExchangeStreamCaptureMode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphCreate)
VMCUDA_EXPECT_SAME_ABI(cudaGraphDestroy)
VMCUDA_EXPECT_SAME_ABI(cudaGraphClone)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddKernelNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddMemcpyNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddMemcpyNode1D)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddMemsetNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddHostNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddEmptyNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddEventRecordNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddEventWaitNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddChildGraphNode)
VMCUDA_EXPECT_SAME_ABI(cudaGraphAddDependencies)
VMCUDA_EXPECT_SAME_ABI(cudaGraphGetNodes)
VMCUDA_EXPECT_SAME_ABI(cudaGraphGetRootNodes)
VMCUDA_EXPECT_SAME_ABI(cudaGraphNodeGetType)
VMCUDA_EXPECT_SAME_ABI(cudaGraphNodeFindInClone)
VMCUDA_EXPECT_SAME_ABI(cudaGraphInstantiate)
VMCUDA_EXPECT_SAME_ABI(cudaGraphInstantiateWithFlags)
VMCUDA_EXPECT_SAME_ABI(cudaGraphLaunch)
VMCUDA_EXPECT_SAME_ABI(cudaGraphUpload)
VMCUDA_EXPECT_SAME_ABI(cudaGraphExecDestroy)
VMCUDA_EXPECT_SAME_ABI(cudaGraphExecKernelNodeSetParams)
VMCUDA_EXPECT_SAME_ABI(cudaGraphExecUpdate)
// The checker itself tells signatures apart.
static_assert(!vmcuda_test::SameAbi<int(int), int(long)>::value);
static_assert(!vmcuda_test::SameAbi<int(int*), int(int**)>::value);
static_assert(!vmcuda_test::SameAbi<void(::dim3), void(::uint3*)>::value);
static_assert(!vmcuda_test::SameAbi<char(void**), int(void**)>::value);
static_assert(!vmcuda_test::SameAbi<int(int), int(int, int)>::value);

// ---- device area: cudaDeviceProp, cudaDeviceAttr, the driver's CUdevice_attribute numbers
// that guest-lib fills cudaDeviceProp from (device_props.h), and the entry points.
VMCUDA_CUDART_DEVICE_HAND_WRITTEN(VMCUDA_EXPECT_SAME_ABI)
// Limits, cache and shared memory configuration, peer attributes: the values travel to the
// host as CUlimit, CUfunc_cache and CUdevice_P2PAttribute (the same numbers).
#define SAME_VALUE(name) static_assert(static_cast<int>(::name) == static_cast<int>(ours::name), #name);
SAME_VALUE(cudaLimitStackSize)
SAME_VALUE(cudaLimitPrintfFifoSize)
SAME_VALUE(cudaLimitMallocHeapSize)
SAME_VALUE(cudaLimitDevRuntimeSyncDepth)
SAME_VALUE(cudaLimitDevRuntimePendingLaunchCount)
SAME_VALUE(cudaLimitMaxL2FetchGranularity)
SAME_VALUE(cudaLimitPersistingL2CacheSize)
static_assert(int{::CU_LIMIT_PERSISTING_L2_CACHE_SIZE} == vmcuda::host::CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
SAME_VALUE(cudaFuncCachePreferNone)
SAME_VALUE(cudaFuncCachePreferShared)
SAME_VALUE(cudaFuncCachePreferL1)
SAME_VALUE(cudaFuncCachePreferEqual)
static_assert(int{::CU_FUNC_CACHE_PREFER_EQUAL} == vmcuda::host::CU_FUNC_CACHE_PREFER_EQUAL);
SAME_VALUE(cudaSharedMemBankSizeDefault)
SAME_VALUE(cudaSharedMemBankSizeFourByte)
SAME_VALUE(cudaSharedMemBankSizeEightByte)
SAME_VALUE(cudaDevP2PAttrPerformanceRank)
SAME_VALUE(cudaDevP2PAttrAccessSupported)
SAME_VALUE(cudaDevP2PAttrNativeAtomicSupported)
SAME_VALUE(cudaDevP2PAttrCudaArrayAccessSupported)
SAME_VALUE(cudaDevP2PAttrOnlyPartialNativeAtomicSupported)
static_assert(sizeof(::cudaLimit) == sizeof(ours::cudaLimit) && sizeof(::cudaFuncCache) == sizeof(ours::cudaFuncCache));
static_assert(vmcuda::host::CUDA_ERROR_UNSUPPORTED_LIMIT == ::CUDA_ERROR_UNSUPPORTED_LIMIT &&
              vmcuda::host::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED == ::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED &&
              vmcuda::host::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED == ::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED &&
              vmcuda::host::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED == ::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
#undef SAME_VALUE
static_assert(sizeof(::cudaDeviceProp) == 1008 && sizeof(ours::cudaDeviceProp) == 1008);
static_assert(alignof(::cudaDeviceProp) == alignof(ours::cudaDeviceProp));
static_assert(sizeof(::cudaUUID_t) == sizeof(ours::cudaUUID_t) && offsetof(::cudaUUID_t, bytes) == 0);
// Every field of NVIDIA's, in order (a field NVIDIA has not fails to compile; one that ours
// lacks moves the offsets after it).
#define DEVICE_PROP_FIELDS(X) \
  X(name) X(uuid) X(luid) X(luidDeviceNodeMask) X(totalGlobalMem) X(sharedMemPerBlock) X(regsPerBlock) \
  X(warpSize) X(memPitch) X(maxThreadsPerBlock) X(maxThreadsDim) X(maxGridSize) X(totalConstMem) X(major) \
  X(minor) X(textureAlignment) X(texturePitchAlignment) X(multiProcessorCount) X(integrated) \
  X(canMapHostMemory) X(maxTexture1D) X(maxTexture1DMipmap) X(maxTexture2D) X(maxTexture2DMipmap) \
  X(maxTexture2DLinear) X(maxTexture2DGather) X(maxTexture3D) X(maxTexture3DAlt) X(maxTextureCubemap) \
  X(maxTexture1DLayered) X(maxTexture2DLayered) X(maxTextureCubemapLayered) X(maxSurface1D) X(maxSurface2D) \
  X(maxSurface3D) X(maxSurface1DLayered) X(maxSurface2DLayered) X(maxSurfaceCubemap) \
  X(maxSurfaceCubemapLayered) X(surfaceAlignment) X(concurrentKernels) X(ECCEnabled) X(pciBusID) \
  X(pciDeviceID) X(pciDomainID) X(tccDriver) X(asyncEngineCount) X(unifiedAddressing) X(memoryBusWidth) \
  X(l2CacheSize) X(persistingL2CacheMaxSize) X(maxThreadsPerMultiProcessor) X(streamPrioritiesSupported) \
  X(globalL1CacheSupported) X(localL1CacheSupported) X(sharedMemPerMultiprocessor) X(regsPerMultiprocessor) \
  X(managedMemory) X(isMultiGpuBoard) X(multiGpuBoardGroupID) X(hostNativeAtomicSupported) \
  X(pageableMemoryAccess) X(concurrentManagedAccess) X(computePreemptionSupported) \
  X(canUseHostPointerForRegisteredMem) X(cooperativeLaunch) X(sharedMemPerBlockOptin) \
  X(pageableMemoryAccessUsesHostPageTables) X(directManagedMemAccessFromHost) X(maxBlocksPerMultiProcessor) \
  X(accessPolicyMaxWindowSize) X(reservedSharedMemPerBlock) X(hostRegisterSupported) \
  X(sparseCudaArraySupported) X(hostRegisterReadOnlySupported) X(timelineSemaphoreInteropSupported) \
  X(memoryPoolsSupported) X(gpuDirectRDMASupported) X(gpuDirectRDMAFlushWritesOptions) \
  X(gpuDirectRDMAWritesOrdering) X(memoryPoolSupportedHandleTypes) X(deferredMappingCudaArraySupported) \
  X(ipcEventSupported) X(clusterLaunch) X(unifiedFunctionPointers) X(deviceNumaConfig) X(deviceNumaId) \
  X(mpsEnabled) X(hostNumaId) X(gpuPciDeviceID) X(gpuPciSubsystemID) X(hostNumaMultinodeIpcSupported) \
  X(reserved)
#define SAME_DEVICE_PROP_FIELD(f)                                                                   \
  static_assert(offsetof(::cudaDeviceProp, f) == offsetof(ours::cudaDeviceProp, f), "cudaDeviceProp." #f); \
  static_assert(sizeof(::cudaDeviceProp::f) == sizeof(ours::cudaDeviceProp::f), "cudaDeviceProp." #f);
DEVICE_PROP_FIELDS(SAME_DEVICE_PROP_FIELD)
#undef SAME_DEVICE_PROP_FIELD
#undef DEVICE_PROP_FIELDS
#define SAME_DEVICE_ATTR(name, value)                                                            \
  static_assert(static_cast<int>(::name) == (value) && static_cast<int>(ours::name) == (value), #name);
VMCUDA_CUDART_DEVICE_ATTRS(SAME_DEVICE_ATTR)
SAME_DEVICE_ATTR(cudaDevAttrMax, 148)
#undef SAME_DEVICE_ATTR
static_assert(sizeof(::cudaDeviceAttr) == sizeof(ours::cudaDeviceAttr));
#define SAME_CU_ATTRIBUTE(name, value)                                                                           \
  static_assert(static_cast<int>(::name) == (value) && static_cast<int>(vmcuda::guest::cu::name) == (value), \
                #name);
VMCUDA_CU_DEVICE_ATTRIBUTES(SAME_CU_ATTRIBUTE)
SAME_CU_ATTRIBUTE(CU_DEVICE_ATTRIBUTE_MAX, 148)
#undef SAME_CU_ATTRIBUTE
// The device flags are NVIDIA's macros here (cudart_types.h defines its own only without
// them); their values are spelled out in cudart_types.h and checked against these.
static_assert(cudaDeviceScheduleAuto == 0x00 && cudaDeviceScheduleSpin == 0x01 && cudaDeviceScheduleYield == 0x02 &&
              cudaDeviceScheduleBlockingSync == 0x04 && cudaDeviceBlockingSync == 0x04 &&
              cudaDeviceScheduleMask == 0x07 && cudaDeviceMapHost == 0x08 && cudaDeviceLmemResizeToMax == 0x10 &&
              cudaDeviceSyncMemops == 0x80 && cudaDeviceMask == 0xff && cudaInitDeviceFlagsAreValid == 0x01);
// fill_device_prop (device_props.h) compiled against NVIDIA's cudaDeviceProp: every field
// it names is NVIDIA's.
[[maybe_unused]] void fill_nvidia_device_prop(const vmcuda::api::DevicePropertiesReply& d, ::cudaDeviceProp* p) {
  vmcuda::guest::fill_device_prop(d, p);
}

namespace {

// NVIDIA's library, opened by path beside this test's own libraries (RTLD_LOCAL: its
// symbols do not interpose anyone's).
class NvidiaCudart : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    handle_ = dlopen(NVIDIA_CUDART_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  template <typename F>
  static F* sym(const char* name) {
    void* p = dlsym(handle_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F*>(p);
  }
  static void* handle_;
};
void* NvidiaCudart::handle_ = nullptr;

TEST_F(NvidiaCudart, ErrorNamesAndStringsMatch) {
  auto* name = sym<decltype(::cudaGetErrorName)>("cudaGetErrorName");
  auto* string = sym<decltype(::cudaGetErrorString)>("cudaGetErrorString");
  struct Entry {
    int value;
    const char* name;
    const char* string;
  };
  static constexpr Entry kOurs[] = {
#define VMCUDA_CUDART_ERROR(n, value, s) {value, #n, s},
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
  };
  for (const Entry& e : kOurs) {
    EXPECT_STREQ(name(static_cast<::cudaError_t>(e.value)), e.name);
    EXPECT_STREQ(string(static_cast<::cudaError_t>(e.value)), e.string);
  }
  const size_t ours_count = std::size(kOurs);
  // And NVIDIA's names no code outside the table.
  size_t nvidia_count = 0;
  for (int v = 0; v < 200000; ++v)
    nvidia_count += strcmp(name(static_cast<::cudaError_t>(v)), "unrecognized error code") != 0;
  EXPECT_EQ(nvidia_count, ours_count);
  for (int unknown : {-1, 1000, 10001, INT_MAX, INT_MIN}) {
    EXPECT_STREQ(name(static_cast<::cudaError_t>(unknown)), "unrecognized error code");
    EXPECT_STREQ(string(static_cast<::cudaError_t>(unknown)), "unrecognized error code");
  }
}

TEST_F(NvidiaCudart, RuntimeVersionAndChannelDescMatch) {
  int v = 0;
  ASSERT_EQ(sym<decltype(::cudaRuntimeGetVersion)>("cudaRuntimeGetVersion")(&v), ::cudaSuccess);
  EXPECT_EQ(v, ours::kCudartVersion);
  auto* create = sym<decltype(::cudaCreateChannelDesc)>("cudaCreateChannelDesc");
  ::cudaChannelFormatDesc d = create(8, 16, 24, 32, ::cudaChannelFormatKindSignedNormalized8X4);
  ours::cudaChannelFormatDesc expected{8, 16, 24, 32, ours::cudaChannelFormatKindSignedNormalized8X4};
  static_assert(sizeof d == sizeof expected);
  EXPECT_EQ(memcmp(&d, &expected, sizeof d), 0);
}


// What guest-lib's device area does without a host mirrors NVIDIA's library without a
// driver (where this test runs on a machine without one): the driver version is 0 with
// success, and the device calls fail with the initialization error before they look at
// their arguments.
TEST_F(NvidiaCudart, WithoutADriver) {
  int version = -1;
  ASSERT_EQ(sym<decltype(::cudaDriverGetVersion)>("cudaDriverGetVersion")(&version), ::cudaSuccess);
  if (version != 0) GTEST_SKIP() << "a CUDA driver is installed (version " << version << ")";
  EXPECT_EQ(sym<decltype(::cudaDriverGetVersion)>("cudaDriverGetVersion")(nullptr), ::cudaErrorInvalidValue);
  int n = 7;
  const ::cudaError_t e = sym<decltype(::cudaGetDeviceCount)>("cudaGetDeviceCount")(&n);
  EXPECT_TRUE(e == ::cudaErrorInsufficientDriver || e == ::cudaErrorNoDevice) << e;
  EXPECT_EQ(sym<decltype(::cudaGetDeviceCount)>("cudaGetDeviceCount")(nullptr), e);
  EXPECT_EQ(sym<decltype(::cudaDeviceSynchronize)>("cudaDeviceSynchronize")(), e);
  int v;
  EXPECT_EQ(sym<decltype(::cudaDeviceGetAttribute)>("cudaDeviceGetAttribute")(&v, ::cudaDevAttrMaxThreadsPerBlock, 0),
            e);
}

}  // namespace
