// Several clients on one GPU (scripts/gpu-clients.sh runs it natively and through vmcuda
// with the same arguments, as separate processes):
//   clients_bench hog MS      one kernel that spins for MS ms, then synchronizes
//   clients_bench probe N     N cudaMemGetInfo calls (a host round trip through vmcuda);
//                             prints "probe_p50_us X" and "probe_p99_us X"
//   clients_bench work N      N launches of a fixed ~1 ms kernel, each synchronized;
//                             prints "work_s X" (wall time of this process)
// "probe while another client waits in a hog" shows that one client's long wait does not
// hold up another client's calls; "work" from 8 processes at once gives the aggregate.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void saxpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + y[i];
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s hog MS | probe N | work N\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[2]);
  if (std::strcmp(argv[1], "hog") == 0) {
    int khz = 0;
    check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate");
    spin<<<1, 1>>>(static_cast<long long>(khz) * n);
    check(cudaDeviceSynchronize(), "hog");
    return 0;
  }
  if (std::strcmp(argv[1], "probe") == 0) {
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "warm-up");
    std::vector<double> us;
    us.reserve(n);
    for (long i = 0; i < n; ++i) {
      const double t = now_s();
      check(cudaMemGetInfo(&free_bytes, &total), "probe");
      us.push_back((now_s() - t) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::printf("probe_p50_us %.2f\nprobe_p99_us %.2f\n", us[us.size() / 2], us[us.size() * 99 / 100]);
    return 0;
  }
  if (std::strcmp(argv[1], "work") == 0) {
    const int elems = 1 << 24;
    float *x = nullptr, *y = nullptr;
    check(cudaMalloc(&x, elems * sizeof(float)), "malloc");
    check(cudaMalloc(&y, elems * sizeof(float)), "malloc");
    check(cudaMemset(x, 0, elems * sizeof(float)), "memset");
    check(cudaMemset(y, 0, elems * sizeof(float)), "memset");
    check(cudaDeviceSynchronize(), "setup");
    const double t = now_s();
    for (long i = 0; i < n; ++i) {
      saxpy<<<1024, 256>>>(y, x, 2.0f, elems);
      check(cudaDeviceSynchronize(), "work");
    }
    std::printf("work_s %.4f\n", now_s() - t);
    cudaFree(x);
    cudaFree(y);
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
