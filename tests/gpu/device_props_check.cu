// Checks guest-lib's cudaDeviceProp recipe (guest-lib/src/device_props.h) on a real GPU:
// for each device, builds the vGPU database record the way vmcuda-stub does
// (host-stub/src/device.cc: name, UUID, total memory, cuDeviceGetAttribute 1..159), fills
// a cudaDeviceProp from it with fill_device_prop, and compares every field with NVIDIA's
// own cudaGetDeviceProperties (luid and luidDeviceNodeMask aside: undefined on Linux).
// Built with nvcc against NVIDIA's runtime and driver:
//   nvcc -std=c++20 -Iguest-lib/src -Iguest-lib/include -Iapi/include -Ivmrpc/include \
//        tests/gpu/device_props_check.cu -lcuda -o device_props_check
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

// guest-lib's types in a namespace of their own (as the parity test has them), so that
// fill_device_prop below is compiled against NVIDIA's cudaDeviceProp.
#define VMCUDA_CUDART_PARITY_NAMESPACE ours
#include "device_props.h"

#define FIELDS(X)                                                                                                \
  X(name) X(uuid) X(totalGlobalMem) X(sharedMemPerBlock) X(regsPerBlock) X(warpSize) X(memPitch)                 \
  X(maxThreadsPerBlock) X(maxThreadsDim) X(maxGridSize) X(totalConstMem) X(major) X(minor) X(textureAlignment)  \
  X(texturePitchAlignment) X(multiProcessorCount) X(integrated) X(canMapHostMemory) X(maxTexture1D)             \
  X(maxTexture1DMipmap) X(maxTexture2D) X(maxTexture2DMipmap) X(maxTexture2DLinear) X(maxTexture2DGather)      \
  X(maxTexture3D) X(maxTexture3DAlt) X(maxTextureCubemap) X(maxTexture1DLayered) X(maxTexture2DLayered)         \
  X(maxTextureCubemapLayered) X(maxSurface1D) X(maxSurface2D) X(maxSurface3D) X(maxSurface1DLayered)            \
  X(maxSurface2DLayered) X(maxSurfaceCubemap) X(maxSurfaceCubemapLayered) X(surfaceAlignment)                   \
  X(concurrentKernels) X(ECCEnabled) X(pciBusID) X(pciDeviceID) X(pciDomainID) X(tccDriver) X(asyncEngineCount) \
  X(unifiedAddressing) X(memoryBusWidth) X(l2CacheSize) X(persistingL2CacheMaxSize)                             \
  X(maxThreadsPerMultiProcessor) X(streamPrioritiesSupported) X(globalL1CacheSupported)                         \
  X(localL1CacheSupported) X(sharedMemPerMultiprocessor) X(regsPerMultiprocessor) X(managedMemory)              \
  X(isMultiGpuBoard) X(multiGpuBoardGroupID) X(hostNativeAtomicSupported) X(pageableMemoryAccess)               \
  X(concurrentManagedAccess) X(computePreemptionSupported) X(canUseHostPointerForRegisteredMem)                 \
  X(cooperativeLaunch) X(sharedMemPerBlockOptin) X(pageableMemoryAccessUsesHostPageTables)                      \
  X(directManagedMemAccessFromHost) X(maxBlocksPerMultiProcessor) X(accessPolicyMaxWindowSize)                  \
  X(reservedSharedMemPerBlock) X(hostRegisterSupported) X(sparseCudaArraySupported)                             \
  X(hostRegisterReadOnlySupported) X(timelineSemaphoreInteropSupported) X(memoryPoolsSupported)                 \
  X(gpuDirectRDMASupported) X(gpuDirectRDMAFlushWritesOptions) X(gpuDirectRDMAWritesOrdering)                   \
  X(memoryPoolSupportedHandleTypes) X(deferredMappingCudaArraySupported) X(ipcEventSupported) X(clusterLaunch)  \
  X(unifiedFunctionPointers) X(deviceNumaConfig) X(deviceNumaId) X(mpsEnabled) X(hostNumaId)                    \
  X(gpuPciDeviceID) X(gpuPciSubsystemID) X(hostNumaMultinodeIpcSupported) X(reserved)

int main() {
  if (cuInit(0) != CUDA_SUCCESS) {
    std::printf("no driver\n");
    return 2;
  }
  int n = 0;
  cuDeviceGetCount(&n);
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    CUdevice dev;
    cuDeviceGet(&dev, i);
    vmcuda::api::DevicePropertiesReply d{};
    cuDeviceGetName(d.name, sizeof d.name - 1, dev);
    cuDeviceGetUuid_v2(reinterpret_cast<CUuuid*>(d.uuid), dev);
    size_t total = 0;
    cuDeviceTotalMem(&total, dev);
    d.total_mem = total;
    int unknown = 0;
    for (uint32_t a = 1; a < vmcuda::api::kDeviceAttributeSlots; ++a)
      if (cuDeviceGetAttribute(&d.attributes[a], static_cast<CUdevice_attribute>(a), dev) != CUDA_SUCCESS) {
        d.attributes[a] = 0;
        if (a < CU_DEVICE_ATTRIBUTE_MAX) std::printf("device %d: the driver does not know attribute %u\n", i, a), ++unknown;
      }
    cudaDeviceProp ours_prop, nvidia;
    vmcuda::guest::fill_device_prop(d, &ours_prop);
    if (cudaGetDeviceProperties(&nvidia, i) != cudaSuccess) {
      std::printf("device %d: cudaGetDeviceProperties failed\n", i);
      return 2;
    }
    int differ = 0;
#define COMPARE(f)                                                                              \
  if (std::memcmp(&ours_prop.f, &nvidia.f, sizeof nvidia.f) != 0) {                             \
    std::printf("device %d: %s differs (vmcuda's first word %lld, NVIDIA's %lld)\n", i, #f,     \
                (long long)*reinterpret_cast<const int*>(&ours_prop.f),                         \
                (long long)*reinterpret_cast<const int*>(&nvidia.f));                           \
    ++differ;                                                                                   \
  }
    FIELDS(COMPARE)
    std::printf("device %d (%s, sm_%d%d): %d fields differ, %d attributes below CU_DEVICE_ATTRIBUTE_MAX unknown\n", i,
                nvidia.name, nvidia.major, nvidia.minor, differ, unknown);
    failures += differ;
  }
  std::printf("%s\n", failures ? "FAILED" : "PASS");
  return failures != 0;
}
