// vmcuda CUDA test program: the runtime calls that reach the driver and the registry rather
// than a CUDA area of their own. cudaGetDriverEntryPoint[ByVersion] (how CUB, Thrust and
// frameworks reach driver calls the runtime lacks), with every flag, a version too old and
// unknown names; a kernel launched through the entry point of cuLaunchKernel with the
// function from cudaGetFuncBySymbol; cudaFuncGetName; cudaProfilerStart/Stop. Prints one
// line per check, nothing that depends on the GPU model. Built with: nvcc -cudart shared.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_profiler_api.h>

#include <cstdio>
#include <cstring>
#include <vector>

__global__ void add_one(int* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static int failures = 0;
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "yes" : "no");
  if (!ok) ++failures;
}

static void entry(const char* symbol, unsigned long long flags, const unsigned* version) {
  void* fn = reinterpret_cast<void*>(1);
  cudaDriverEntryPointQueryResult status = static_cast<cudaDriverEntryPointQueryResult>(-1);
  const cudaError_t e = version ? cudaGetDriverEntryPointByVersion(symbol, &fn, *version, flags, &status)
                                : cudaGetDriverEntryPoint(symbol, &fn, flags, &status);
  std::printf("entry point %s (flags %llu, version %u): %s, status %d, %s\n", symbol, flags, version ? *version : 0,
              cudaGetErrorName(e), static_cast<int>(status), fn ? "a function" : "NULL");
}

int main() {
  const unsigned v13 = 13000, v11 = 11000, v2 = 2000;
  entry("cuLaunchKernel", cudaEnableDefault, nullptr);
  entry("cuLaunchKernel", cudaEnableLegacyStream, nullptr);
  entry("cuLaunchKernel", cudaEnablePerThreadDefaultStream, nullptr);
  entry("cuMemAllocAsync", cudaEnableDefault, &v13);
  entry("cuMemAllocAsync", cudaEnableDefault, &v11);
  entry("cuMemAlloc", cudaEnableDefault, &v2);
  entry("cuNoSuchFunction", cudaEnableDefault, nullptr);
  entry("cuNoSuchFunction", cudaEnableDefault, &v13);
  entry("cuInit", 4, nullptr);
  entry("cuInit", cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream, nullptr);
  {
    void* fn = reinterpret_cast<void*>(1);
    const cudaError_t e = cudaGetDriverEntryPoint("cuNoSuchFunction", &fn, cudaEnableDefault, nullptr);
    std::printf("entry point cuNoSuchFunction without a status: %s, %s\n", cudaGetErrorName(e), fn ? "a function" : "NULL");
    std::printf("last error after it: %s\n", cudaGetErrorName(cudaGetLastError()));
  }

  // A launch through the driver's cuLaunchKernel, found by the runtime, of the runtime's kernel.
  constexpr int kN = 4096;
  int* d = nullptr;
  check("cudaMalloc", cudaMalloc(&d, kN * sizeof(int)) == cudaSuccess);
  cudaMemset(d, 0, kN * sizeof(int));
  cudaFunction_t fn = nullptr;
  check("cudaGetFuncBySymbol", cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(add_one)) == cudaSuccess &&
                                   fn != nullptr);
  cudaFunction_t none = nullptr;
  int not_a_kernel = 0;
  std::printf("cudaGetFuncBySymbol(not a kernel): %s\n",
              cudaGetErrorName(cudaGetFuncBySymbol(&none, &not_a_kernel)));
  cudaGetLastError();
  PFN_cuLaunchKernel_v4000 launch = nullptr;
  cudaDriverEntryPointQueryResult status;
  check("cudaGetDriverEntryPoint(cuLaunchKernel)",
        cudaGetDriverEntryPoint("cuLaunchKernel", reinterpret_cast<void**>(&launch), cudaEnableDefault, &status) ==
                cudaSuccess &&
            launch != nullptr && status == cudaDriverEntryPointSuccess);
  int n = kN;
  void* params[] = {&d, &n};
  for (int i = 0; i < 3; ++i) {
    const CUresult r =
        launch(reinterpret_cast<CUfunction>(fn), kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
    std::printf("cuLaunchKernel through the entry point: %d\n", static_cast<int>(r));
    if (r != CUDA_SUCCESS) ++failures;
  }
  check("cudaDeviceSynchronize", cudaDeviceSynchronize() == cudaSuccess);
  std::vector<int> h(kN);
  cudaMemcpy(h.data(), d, kN * sizeof(int), cudaMemcpyDeviceToHost);
  bool all3 = true;
  for (int v : h) all3 = all3 && v == 3;
  check("every element is 3", all3);

  const char* name = nullptr;
  const cudaError_t ne = cudaFuncGetName(&name, reinterpret_cast<const void*>(add_one));
  std::printf("cudaFuncGetName: %s, %s\n", cudaGetErrorName(ne), name ? name : "(null)");
  std::printf("cudaFuncGetName(not a kernel): %s\n", cudaGetErrorName(cudaFuncGetName(&name, &not_a_kernel)));
  std::printf("cudaFuncGetName(NULL): %s\n",
              cudaGetErrorName(cudaFuncGetName(nullptr, reinterpret_cast<const void*>(add_one))));
  cudaGetLastError();

  std::printf("cudaProfilerStart: %s\n", cudaGetErrorName(cudaProfilerStart()));
  std::printf("cudaProfilerStop: %s\n", cudaGetErrorName(cudaProfilerStop()));
  cudaFree(d);
  std::printf("runtime_misc: %d failures\n", failures);
  return failures != 0;
}
