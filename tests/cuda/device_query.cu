// vmcuda CUDA test program: the device area. Prints what an application learns about its
// devices (every cudaDeviceProp field, every attribute, versions, PCI ids, flags, peers)
// and how the device calls treat bad arguments, one line each, so that its output through
// vmcuda can be compared with its output on NVIDIA's library (scripts/gpu-check.sh) and
// checked against the test executor (tests/guest-lib/nvcc_device_query_test.sh).
// Leaves out what differs from run to run: free memory, and luid, which NVIDIA leaves
// undefined on Linux. Exits non-zero only when a call that must succeed fails.
// Built with: nvcc -cudart shared.
#include <cstdio>
#include <cstring>

static int failures = 0;
#define MUST(call)                                                              \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                    \
      std::printf("FAILED: %s: %d %s\n", #call, (int)e_, cudaGetErrorName(e_)); \
      ++failures;                                                               \
    }                                                                           \
  } while (0)
#define RC(what, call) std::printf("%s %d\n", what, (int)(call))

#define INT_FIELDS(X)                                                                                              \
  X(regsPerBlock) X(warpSize) X(maxThreadsPerBlock) X(major) X(minor) X(multiProcessorCount) X(integrated)          \
  X(canMapHostMemory) X(maxTexture1D) X(maxTexture1DMipmap) X(maxTextureCubemap) X(maxSurface1D)                   \
  X(maxSurfaceCubemap) X(concurrentKernels) X(ECCEnabled) X(pciBusID) X(pciDeviceID) X(pciDomainID) X(tccDriver)   \
  X(asyncEngineCount) X(unifiedAddressing) X(memoryBusWidth) X(l2CacheSize) X(persistingL2CacheMaxSize)            \
  X(maxThreadsPerMultiProcessor) X(streamPrioritiesSupported) X(globalL1CacheSupported) X(localL1CacheSupported)   \
  X(regsPerMultiprocessor) X(managedMemory) X(isMultiGpuBoard) X(multiGpuBoardGroupID)                             \
  X(hostNativeAtomicSupported) X(pageableMemoryAccess) X(concurrentManagedAccess) X(computePreemptionSupported)   \
  X(canUseHostPointerForRegisteredMem) X(cooperativeLaunch) X(pageableMemoryAccessUsesHostPageTables)              \
  X(directManagedMemAccessFromHost) X(maxBlocksPerMultiProcessor) X(accessPolicyMaxWindowSize)                     \
  X(hostRegisterSupported) X(sparseCudaArraySupported) X(hostRegisterReadOnlySupported)                            \
  X(timelineSemaphoreInteropSupported) X(memoryPoolsSupported) X(gpuDirectRDMASupported)                           \
  X(gpuDirectRDMAFlushWritesOptions) X(gpuDirectRDMAWritesOrdering) X(memoryPoolSupportedHandleTypes)              \
  X(deferredMappingCudaArraySupported) X(ipcEventSupported) X(clusterLaunch) X(unifiedFunctionPointers)            \
  X(deviceNumaConfig) X(deviceNumaId) X(mpsEnabled) X(hostNumaId) X(gpuPciDeviceID) X(gpuPciSubsystemID)           \
  X(hostNumaMultinodeIpcSupported)
#define SIZE_FIELDS(X)                                                                                         \
  X(totalGlobalMem) X(sharedMemPerBlock) X(memPitch) X(totalConstMem) X(textureAlignment)                     \
  X(texturePitchAlignment) X(surfaceAlignment) X(sharedMemPerMultiprocessor) X(sharedMemPerBlockOptin)         \
  X(reservedSharedMemPerBlock)
#define ARRAY_FIELDS(X)                                                                                         \
  X(maxThreadsDim) X(maxGridSize) X(maxTexture2D) X(maxTexture2DMipmap) X(maxTexture2DLinear)                   \
  X(maxTexture2DGather) X(maxTexture3D) X(maxTexture3DAlt) X(maxTexture1DLayered) X(maxTexture2DLayered)        \
  X(maxTextureCubemapLayered) X(maxSurface2D) X(maxSurface3D) X(maxSurface1DLayered) X(maxSurface2DLayered)     \
  X(maxSurfaceCubemapLayered)

static void print_device(int d) {
  cudaDeviceProp p;
  std::memset(&p, 0, sizeof p);
  MUST(cudaGetDeviceProperties(&p, d));
  std::printf("device %d name %s\n", d, p.name);
  std::printf("device %d uuid", d);
  for (char b : p.uuid.bytes) std::printf(" %02x", (unsigned char)b);
  std::printf("\n");
#define PRINT_INT(f) std::printf("device %d %s %d\n", d, #f, (int)p.f);
#define PRINT_SIZE(f) std::printf("device %d %s %zu\n", d, #f, (size_t)p.f);
#define PRINT_ARRAY(f)                                                               \
  do {                                                                               \
    std::printf("device %d %s", d, #f);                                              \
    for (size_t i = 0; i < sizeof p.f / sizeof p.f[0]; ++i) std::printf(" %d", p.f[i]); \
    std::printf("\n");                                                               \
  } while (0);
  INT_FIELDS(PRINT_INT)
  SIZE_FIELDS(PRINT_SIZE)
  ARRAY_FIELDS(PRINT_ARRAY)
  int reserved_nonzero = 0;
  for (int r : p.reserved) reserved_nonzero += r != 0;
  std::printf("device %d reserved nonzero %d\n", d, reserved_nonzero);
  // Every attribute CUDA 13.0 documents, and what cudaDeviceGetAttribute says of the rest.
  for (int a = 1; a < cudaDevAttrMax; ++a) {
    int v = -1;
    cudaError_t e = cudaDeviceGetAttribute(&v, (cudaDeviceAttr)a, d);
    if (e == cudaSuccess) std::printf("device %d attribute %d = %d\n", d, a, v);
    else std::printf("device %d attribute %d: error %d\n", d, a, (int)e);
  }
  (void)cudaGetLastError();
  char bus[32];
  MUST(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
  std::printf("device %d pci %s\n", d, bus);
  int back = -1;
  MUST(cudaDeviceGetByPCIBusId(&back, bus));
  std::printf("device %d by pci %d\n", d, back);
}

int main() {
  int runtime = 0, driver = -1, n = -1;
  MUST(cudaRuntimeGetVersion(&runtime));
  MUST(cudaDriverGetVersion(&driver));
  std::printf("runtime %d driver_positive %d\n", runtime, driver > 0);
  MUST(cudaGetDeviceCount(&n));
  std::printf("count %d\n", n);
  for (int d = 0; d < n; ++d) print_device(d);

  int cur = -1;
  MUST(cudaGetDevice(&cur));
  std::printf("current %d\n", cur);
  unsigned flags = 12345;
  MUST(cudaGetDeviceFlags(&flags));
  std::printf("flags default 0x%x\n", flags);
  MUST(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  MUST(cudaGetDeviceFlags(&flags));
  std::printf("flags after blocking sync 0x%x\n", flags);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      int can = -1;
      MUST(cudaDeviceCanAccessPeer(&can, a, b));
      std::printf("peer %d %d: %d\n", a, b, can);
    }
  cudaDeviceProp want;
  std::memset(&want, 0, sizeof want);
  want.major = 9;
  int chosen = -1;
  MUST(cudaChooseDevice(&chosen, &want));
  std::printf("chosen %d\n", chosen);
  size_t free_bytes = 0, total = 0;
  MUST(cudaMemGetInfo(&free_bytes, &total));
  std::printf("meminfo total %zu free<=total %d\n", total, free_bytes <= total);
  RC("sync", cudaDeviceSynchronize());

  // Bad arguments: the error, and that it became the last error.
  int v;
  cudaDeviceProp p;
  char bus[32];
  RC("set_device_invalid", cudaSetDevice(n));
  RC("last", cudaGetLastError());
  RC("set_device_negative", cudaSetDevice(-1));
  RC("properties_invalid", cudaGetDeviceProperties(&p, n));
  RC("properties_null", cudaGetDeviceProperties(nullptr, 0));
  RC("attribute_zero", cudaDeviceGetAttribute(&v, (cudaDeviceAttr)0, 0));
  RC("attribute_max", cudaDeviceGetAttribute(&v, cudaDevAttrMax, 0));
  RC("attribute_null", cudaDeviceGetAttribute(nullptr, cudaDevAttrMaxThreadsPerBlock, 0));
  RC("attribute_invalid_device", cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, n));
  RC("count_null", cudaGetDeviceCount(nullptr));
  RC("get_device_null", cudaGetDevice(nullptr));
  RC("driver_version_null", cudaDriverGetVersion(nullptr));
  RC("flags_invalid", cudaSetDeviceFlags(0x100));
  RC("flags_two_modes", cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield));
  RC("get_flags_null", cudaGetDeviceFlags(nullptr));
  RC("pci_invalid_device", cudaDeviceGetPCIBusId(bus, sizeof bus, n));
  RC("pci_null", cudaDeviceGetPCIBusId(nullptr, 13, 0));
  RC("by_pci_unknown", cudaDeviceGetByPCIBusId(&v, "7777:77:1f.0"));
  RC("by_pci_garbage", cudaDeviceGetByPCIBusId(&v, "not a bus id"));
  RC("peer_invalid", cudaDeviceCanAccessPeer(&v, 0, n));
  RC("meminfo_null", cudaMemGetInfo(nullptr, nullptr));
  RC("choose_null", cudaChooseDevice(&v, nullptr));
  RC("last", cudaGetLastError());
  RC("last_again", cudaGetLastError());
  RC("reset", cudaDeviceReset());
  std::printf("failures %d\n", failures);
  return failures != 0;
}
