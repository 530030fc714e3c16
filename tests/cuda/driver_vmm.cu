// The driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess, ...) as PyTorch's expandable segments use it: reserve a large range, map
// physical chunks into it as the segment grows, use the memory with copies, memsets and
// kernels, then unmap and release. Built with -lcuda. Prints what it sees (deterministic;
// compared with the native run) and the number of failed expectations.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

constexpr int kChunks = 3;
static int failures = 0;

static const char* name_of(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unnamed)";
}
static void expect(const char* what, CUresult got, CUresult want = CUDA_SUCCESS) {
  std::printf("%s: %s\n", what, name_of(got));
  if (got != want) {
    std::printf("  FAIL: expected %s\n", name_of(want));
    ++failures;
  }
}
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "yes" : "no");
  if (!ok) ++failures;
}

__global__ void g_add(int* a, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += v;
}

int main() {
  expect("cuInit", cuInit(0));
  CUdevice dev;
  expect("cuDeviceGet", cuDeviceGet(&dev, 0));
  CUcontext ctx;
  expect("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
  expect("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
  int vmm = 0;
  expect("cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)",
         cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  check("virtual memory management supported", vmm == 1);

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gmin = 0, g = 0;
  expect("cuMemGetAllocationGranularity(minimum)",
         cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  expect("cuMemGetAllocationGranularity(recommended)",
         cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  check("granularity a power of two, recommended >= minimum", g && !(g & (g - 1)) && gmin && g >= gmin && g % gmin == 0);
  const size_t ints = g / sizeof(int);

  // ---- reserve big, grow chunk by chunk
  CUdeviceptr base = 0;
  expect("cuMemAddressReserve(64 granules)", cuMemAddressReserve(&base, 64 * g, 0, 0, 0));
  check("reservation aligned to the granularity", base && base % g == 0);
  std::vector<CUmemGenericAllocationHandle> h(kChunks);
  CUmemAccessDesc rw = {};
  rw.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  rw.location.id = dev;
  rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int i = 0; i < kChunks; ++i) {
    expect("cuMemCreate(1 granule)", cuMemCreate(&h[i], g, &prop, 0));
    expect("cuMemMap", cuMemMap(base + i * g, g, 0, h[i], 0));
    expect("cuMemSetAccess(read-write)", cuMemSetAccess(base + i * g, g, &rw, 1));
  }

  // ---- the mapped memory is device memory: copies, memsets, kernels
  std::vector<int> host(ints);
  for (size_t i = 0; i < ints; ++i) host[i] = static_cast<int>(i);
  const CUdeviceptr c1 = base + g;
  expect("cuMemcpyHtoD into chunk 1", cuMemcpyHtoD(c1, host.data(), g));
  CUfunction f_add;
  check("cudaGetFuncBySymbol(g_add)", cudaGetFuncBySymbol(&f_add, (const void*)g_add) == cudaSuccess);
  int n = static_cast<int>(ints), seven = 7;
  void* args[] = {(void*)&c1, &seven, &n};
  expect("cuLaunchKernel g_add on chunk 1", cuLaunchKernel(f_add, n / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  expect("cuCtxSynchronize", cuCtxSynchronize());
  std::vector<int> back(ints);
  expect("cuMemcpyDtoH from chunk 1", cuMemcpyDtoH(back.data(), c1, g));
  bool ok = true;
  for (size_t i = 0; i < ints; ++i) ok = ok && back[i] == static_cast<int>(i) + 7;
  check("chunk 1 holds i + 7", ok);
  expect("cuMemsetD32 on chunk 2", cuMemsetD32(base + 2 * g, 0x5a5a5a5a, ints));
  expect("cuMemcpyDtoD chunk 1 -> chunk 0", cuMemcpyDtoD(base, c1, g));
  expect("cuMemcpyDtoH from chunk 0", cuMemcpyDtoH(back.data(), base, g));
  check("chunk 0 is a copy of chunk 1", back[0] == 7 && back[ints - 1] == static_cast<int>(ints - 1) + 7);
  int tail = 0;
  expect("cuMemcpyDtoH last int of chunk 2", cuMemcpyDtoH(&tail, base + 3 * g - sizeof(int), sizeof(int)));
  check("chunk 2 memset", tail == 0x5a5a5a5a);

  // A range across two chunks that follow one another is one range of device memory (a
  // block of an expandable segment may lie across the chunks it grew by).
  int across[4] = {11, 12, 13, 14}, across_back[4] = {};
  expect("cuMemcpyHtoD across chunks 1 and 2", cuMemcpyHtoD(base + 2 * g - 8, across, sizeof across));
  expect("cuMemcpyDtoH across chunks 1 and 2", cuMemcpyDtoH(across_back, base + 2 * g - 8, sizeof across_back));
  check("the same bytes back", across_back[0] == 11 && across_back[1] == 12 && across_back[2] == 13 && across_back[3] == 14);
  expect("cuMemcpyDtoH first int of chunk 2", cuMemcpyDtoH(&tail, base + 2 * g, sizeof(int)));
  check("chunk 2 starts with the third", tail == 13);
  expect("cuMemsetD32 on chunk 2 again", cuMemsetD32(base + 2 * g, 0x5a5a5a5a, ints));

  // ---- what the driver says of it
  unsigned mt = 0;
  expect("cuPointerGetAttribute(MEMORY_TYPE)", cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, c1 + 64));
  check("device memory", mt == CU_MEMORYTYPE_DEVICE);
  int ordinal = -1;
  expect("cuPointerGetAttribute(DEVICE_ORDINAL)",
         cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, c1 + 64));
  check("on device 0", ordinal == dev);
  unsigned long long flags = 0;
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  expect("cuMemGetAccess", cuMemGetAccess(&flags, &loc, c1));
  check("read-write", flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemAllocationProp got = {};
  expect("cuMemGetAllocationPropertiesFromHandle", cuMemGetAllocationPropertiesFromHandle(&got, h[1]));
  check("pinned on device 0", got.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
                                  got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == dev);
  CUmemGenericAllocationHandle again = 0;
  expect("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle(&again, (void*)(c1 + 100)));
  check("the same handle", again == h[1]);
  expect("cuMemRelease (the retained reference)", cuMemRelease(again));

  // ---- a hint is a hint (the driver on the H100 placed this one elsewhere; vmcuda takes a
  // free one): only that the reservation is made is checked
  CUdeviceptr hinted = 0;
  expect("cuMemAddressReserve(hint after the first)", cuMemAddressReserve(&hinted, 4 * g, 0, base + 128 * g, 0));
  expect("cuMemAddressFree(hinted)", cuMemAddressFree(hinted, 4 * g));

  // ---- what the driver refuses
  CUmemGenericAllocationHandle bad = 0;
  expect("cuMemCreate(not whole granules)", cuMemCreate(&bad, g + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  expect("cuMemMap(unaligned address)", cuMemMap(base + 10 * g + 4096, g, 0, h[0], 0), CUDA_ERROR_INVALID_VALUE);
  // Reserved, nothing mapped: the driver answers success (H100, driver 580).
  expect("cuMemUnmap(nothing mapped there)", cuMemUnmap(base + 20 * g, g), CUDA_SUCCESS);

  // ---- shrink: release while mapped (the memory stays until unmapped), unmap, free
  for (int i = 0; i < kChunks; ++i) expect("cuMemRelease", cuMemRelease(h[i]));
  expect("cuMemcpyDtoH after release, still mapped", cuMemcpyDtoH(&tail, base + 3 * g - sizeof(int), sizeof(int)));
  check("still the memset's value", tail == 0x5a5a5a5a);
  expect("cuMemUnmap(all chunks)", cuMemUnmap(base, kChunks * g));
  expect("cuMemAddressFree", cuMemAddressFree(base, 64 * g));

  std::printf("failures: %d\n", failures);
  return failures == 0 ? 0 : 1;
}
