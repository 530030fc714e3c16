// Runtime calls of the CUDA 12/13 era that programs and libraries reach for: the library
// management API (cudaLibraryLoadData/LoadFromFile/GetKernel/GetGlobal/Unload,
// cudaKernelSetAttributeForDevice, launching a cudaKernel_t with cudaLaunchKernel),
// cudaFuncGetParamInfo, cudaGetExportTable, cudaSetValidDevices, cudaStreamGetDevice,
// cudaMemGetDefaultMemPool/GetMemPool/SetMemPool and cudaMemcpyBatchAsync. Its module is
// runtime_library_kernels.cu (a fatbin embedded by scripts/build-cuda-tests.sh). Prints what
// it sees (deterministic; compared with the native run) and the number of failed expectations.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime_check.h"           // expect, check, failures
#include "runtime_library_fatbin.h"  // runtime_library_fatbin[]

static void answer(const char* what, cudaError_t got) {
  std::printf("%s: %s\n", what, cudaGetErrorName(got));
  cudaGetLastError();
}

__global__ void with_params(char c, double d, int* p, short s) {
  if (p) *p = c + static_cast<int>(d) + s;
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash still shows how far it got
  expect("cudaFree(0)", cudaFree(nullptr));

  // ---- library management
  cudaLibrary_t lib = nullptr;
  expect("cudaLibraryLoadData", cudaLibraryLoadData(&lib, runtime_library_fatbin, nullptr, nullptr, 0, nullptr,
                                                    nullptr, 0));
  cudaKernel_t add_one = nullptr, scale_add = nullptr, missing = nullptr;
  expect("cudaLibraryGetKernel add_one", cudaLibraryGetKernel(&add_one, lib, "_Z7add_onePii"));
  expect("cudaLibraryGetKernel scale_add", cudaLibraryGetKernel(&scale_add, lib, "_Z9scale_addPiiii"));
  answer("cudaLibraryGetKernel of no such kernel", cudaLibraryGetKernel(&missing, lib, "no_such_kernel"));
  const int n = 256;
  int* d = nullptr;
  expect("cudaMalloc", cudaMalloc(&d, n * sizeof(int)));
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i;
  expect("cudaMemcpy in", cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  int count = n, mul = 3, add = 4;
  void* args1[] = {&d, &count};
  expect("cudaLaunchKernel of a cudaKernel_t", cudaLaunchKernel(reinterpret_cast<const void*>(add_one), dim3(1),
                                                                 dim3(n), args1, 0, nullptr));
  void* args2[] = {&d, &mul, &add, &count};
  expect("cudaLaunchKernel of another", cudaLaunchKernel(reinterpret_cast<const void*>(scale_add), dim3(1), dim3(n),
                                                           args2, 0, nullptr));
  expect("cudaMemcpy out", cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  std::printf("after add_one, scale_add: %d %d %d\n", h[0], h[1], h[n - 1]);
  check("launches ran", h[0] == 7 && h[n - 1] == (n - 1 + 1) * 3 + 4);
  void* table = nullptr;
  size_t table_bytes = 0;
  expect("cudaLibraryGetGlobal d_table", cudaLibraryGetGlobal(&table, &table_bytes, lib, "d_table"));
  int t[8] = {};
  expect("cudaMemcpy from the global", cudaMemcpy(t, table, sizeof t, cudaMemcpyDeviceToHost));
  std::printf("d_table: %zu bytes, %d %d .. %d\n", table_bytes, t[0], t[1], t[7]);
  answer("cudaLibraryGetGlobal of no such variable", cudaLibraryGetGlobal(&table, &table_bytes, lib, "nothing"));
  expect("cudaKernelSetAttributeForDevice max dynamic shared memory",
         cudaKernelSetAttributeForDevice(add_one, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024, 0));
  cudaFuncAttributes fa{};
  expect("cudaFuncGetAttributes of the cudaKernel_t",
         cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(add_one)));
  std::printf("maxDynamicSharedSizeBytes: %d\n", fa.maxDynamicSharedSizeBytes);
  expect("cudaLibraryUnload", cudaLibraryUnload(lib));

  // The same module from a file.
  char path[] = "/tmp/vmcuda-runtime-library-XXXXXX";
  const int fd = mkstemp(path);
  FILE* f = fdopen(fd, "wb");
  std::fwrite(runtime_library_fatbin, 1, sizeof runtime_library_fatbin, f);
  std::fclose(f);
  cudaLibrary_t lib2 = nullptr;
  expect("cudaLibraryLoadFromFile", cudaLibraryLoadFromFile(&lib2, path, nullptr, nullptr, 0, nullptr, nullptr, 0));
  std::remove(path);
  cudaKernel_t vecadd = nullptr;
  expect("cudaLibraryGetKernel vecadd", cudaLibraryGetKernel(&vecadd, lib2, "vecadd"));
  expect("cudaLibraryUnload from file", cudaLibraryUnload(lib2));
  cudaLibrary_t none = nullptr;
  answer("cudaLibraryLoadFromFile of a missing file",
         cudaLibraryLoadFromFile(&none, "/nonexistent/vmcuda.fatbin", nullptr, nullptr, 0, nullptr, nullptr, 0));

  // ---- kernel parameters
  for (size_t i = 0; i < 5; ++i) {
    size_t off = 0, size = 0;
    const cudaError_t e = cudaFuncGetParamInfo(reinterpret_cast<const void*>(with_params), i, &off, &size);
    if (e == cudaSuccess) std::printf("param %zu: offset %zu size %zu\n", i, off, size);
    else answer("cudaFuncGetParamInfo past the last parameter", e);
  }

  // ---- devices and streams
  int valid[] = {0};
  expect("cudaSetValidDevices", cudaSetValidDevices(valid, 1));
  int bad[] = {99};
  answer("cudaSetValidDevices with no such device", cudaSetValidDevices(bad, 1));
  cudaStream_t s;
  expect("cudaStreamCreate", cudaStreamCreate(&s));
  int dev = -1;
  expect("cudaStreamGetDevice", cudaStreamGetDevice(s, &dev));
  std::printf("stream's device: %d\n", dev);
  expect("cudaStreamGetDevice of the default stream", cudaStreamGetDevice(nullptr, &dev));
  const void* export_table = nullptr;
  cudaUUID_t unknown{};
  std::memset(&unknown, 0x5a, sizeof unknown);
  answer("cudaGetExportTable of an unknown table", cudaGetExportTable(&export_table, &unknown));

  // ---- memory pools by location
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = 0;
  cudaMemPool_t by_location = nullptr, by_device = nullptr, current = nullptr;
  expect("cudaMemGetDefaultMemPool", cudaMemGetDefaultMemPool(&by_location, &loc, cudaMemAllocationTypePinned));
  expect("cudaDeviceGetDefaultMemPool", cudaDeviceGetDefaultMemPool(&by_device, 0));
  check("the same pool", by_location == by_device);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location = loc;
  cudaMemPool_t mine = nullptr;
  expect("cudaMemPoolCreate", cudaMemPoolCreate(&mine, &props));
  expect("cudaMemSetMemPool", cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, mine));
  expect("cudaMemGetMemPool", cudaMemGetMemPool(&current, &loc, cudaMemAllocationTypePinned));
  check("the current pool is the one set", current == mine);
  expect("cudaDeviceGetMemPool", cudaDeviceGetMemPool(&current, 0));
  check("the device sees it too", current == mine);
  expect("cudaMemSetMemPool back", cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, by_device));
  expect("cudaMemPoolDestroy", cudaMemPoolDestroy(mine));
  cudaMemLocation bad_loc{};
  bad_loc.type = cudaMemLocationTypeDevice;
  bad_loc.id = 99;
  answer("cudaMemGetDefaultMemPool of no such device",
         cudaMemGetDefaultMemPool(&by_location, &bad_loc, cudaMemAllocationTypePinned));

  // ---- batched copies
  int *a = nullptr, *b = nullptr;
  expect("cudaMalloc a", cudaMalloc(&a, 4096));
  expect("cudaMalloc b", cudaMalloc(&b, 4096));
  int* pinned = nullptr;
  expect("cudaMallocHost", cudaMallocHost(&pinned, 4096));
  for (int i = 0; i < 1024; ++i) pinned[i] = 1000 + i;
  std::vector<int> back(1024, 0);
  void* dsts[] = {a, b, back.data()};
  const void* srcs[] = {pinned, a, b};
  size_t sizes[] = {4096, 2048, 4096};
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_idx = 0;
  expect("cudaMemsetAsync b", cudaMemsetAsync(b, 0, 4096, s));
  expect("cudaMemcpyBatchAsync", cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &attr_idx, 1, s));
  expect("cudaStreamSynchronize", cudaStreamSynchronize(s));
  std::printf("batch: %d %d %d %d\n", back[0], back[511], back[512], back[1023]);
  check("batch in order", back[0] == 1000 && back[511] == 1511 && back[512] == 0);
  answer("cudaMemcpyBatchAsync on the legacy stream", cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &attr_idx, 1,
                                                                            nullptr));
  answer("cudaMemcpyBatchAsync of no copies", cudaMemcpyBatchAsync(dsts, srcs, sizes, 0, &attr, &attr_idx, 1, s));
  cudaMemcpyAttributes bad_attr = attr;
  bad_attr.srcAccessOrder = static_cast<cudaMemcpySrcAccessOrder>(77);
  answer("cudaMemcpyBatchAsync with a bad access order",
         cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &bad_attr, &attr_idx, 1, s));
  expect("cudaStreamDestroy", cudaStreamDestroy(s));
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFreeHost(pinned);
  std::printf("failures: %d\n", failures);
  return failures == 0 ? 0 : 1;
}
