// Driver-API launch rate (issue 12 point 8), run natively and through vmcuda in one session
// on the GPU machine by scripts/gpu-bench.sh. Built the default way (NVIDIA's runtime linked
// statically), so through vmcuda every call reaches vmcuda's guest libcuda.so.1: the kernel
// is launched with cuLaunchKernel on a CUfunction from cudaGetFuncBySymbol. Prints
// "name value unit" lines.
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void empty_kernel() {}
__global__ void add_one(int* p) { *p += 1; }

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static void check(CUresult e, const char* what) {
  if (e != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(e, &s);
    std::fprintf(stderr, "%s: %s\n", what, s ? s : "?");
    std::exit(1);
  }
}
static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int launches = quick ? 20000 : 200000;
  check(cudaFree(nullptr), "init");
  cudaFunction_t rf = nullptr, rf_add = nullptr;
  check(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(empty_kernel)), "cudaGetFuncBySymbol");
  check(cudaGetFuncBySymbol(&rf_add, reinterpret_cast<const void*>(add_one)), "cudaGetFuncBySymbol");
  CUfunction f = reinterpret_cast<CUfunction>(rf), f_add = reinterpret_cast<CUfunction>(rf_add);
  CUstream s;
  check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), "warm-up");
  check(cuStreamSynchronize(s), "sync");
  auto a = Clock::now();
  for (int i = 0; i < launches; ++i) cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr);
  check(cuStreamSynchronize(s), "launches");
  std::printf("driver_empty_launch_rate %.0f k/s\n", launches / us(a, Clock::now()) * 1e3);

  // With one pointer parameter (the common case), and a check that every launch ran.
  CUdeviceptr d;
  check(cuMemAlloc(&d, sizeof(int)), "cuMemAlloc");
  check(cuMemsetD32(d, 0, 1), "cuMemsetD32");
  void* params[] = {&d};
  a = Clock::now();
  for (int i = 0; i < launches; ++i) cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
  check(cuStreamSynchronize(s), "launches");
  const double rate = launches / us(a, Clock::now()) * 1e3;
  int got = 0;
  check(cuMemcpyDtoH(&got, d, sizeof got), "cuMemcpyDtoH");
  if (got != launches) {
    std::fprintf(stderr, "driver_param_launch_rate: %d of %d launches ran\n", got, launches);
    return 1;
  }
  std::printf("driver_param_launch_rate %.0f k/s\n", rate);
  cuMemFree(d);
  cuStreamDestroy(s);
  return 0;
}
