// CPU and GPU atomics on the same managed memory at once (issue 11 point 5; the shape of NVIDIA's
// systemWideAtomics sample): a kernel adds to a few counters of cudaMallocManaged memory with
// system-scope atomics while the host thread adds to the same counters with its own atomics;
// both finish and the counters must hold every addition. Run natively and through vmcuda by
// scripts/gpu-bench.sh. Prints one line per figure, "name value unit" (times: lower is better);
// a wrong total exits 1. Built with nvcc -cudart shared.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr int kCounters = 8;

// Each thread adds 1 to counter (i % kCounters) `iters` times, system-wide (the CPU adds too).
__global__ void gpu_adds(unsigned long long* c, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < iters; ++k) atomicAdd_system(&c[(i + k) % kCounters], 1ull);
}

using Clock = std::chrono::steady_clock;
static double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int concurrent = 0;
  check(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0), "attribute");
  unsigned long long* c = nullptr;
  check(cudaMallocManaged(&c, kCounters * sizeof *c), "cudaMallocManaged");
  const int blocks = 64, threads = 128, iters = quick ? 64 : 512;
  const unsigned long long gpu_total = 1ull * blocks * threads * iters;
  const long long cpu_adds = quick ? 200000 : 2000000;

  for (int round = 0; round < 2; ++round) {  // round 0 warms up (module load, first touch)
    std::memset(c, 0, kCounters * sizeof *c);
    check(cudaDeviceSynchronize(), "sync");
    // GPU alone.
    auto a = Clock::now();
    gpu_adds<<<blocks, threads>>>(c, iters);
    check(cudaDeviceSynchronize(), "gpu alone");
    const double gpu_ms = ms(a, Clock::now());
    unsigned long long sum = 0;
    for (int i = 0; i < kCounters; ++i) sum += c[i];
    if (sum != gpu_total) {
      std::fprintf(stderr, "gpu alone: %llu additions, expected %llu\n", sum, gpu_total);
      return 1;
    }
    // CPU and GPU at once, where the device allows concurrent access (else one after the other).
    std::memset(c, 0, kCounters * sizeof *c);
    check(cudaDeviceSynchronize(), "sync");
    a = Clock::now();
    gpu_adds<<<blocks, threads>>>(c, iters);
    if (!concurrent) check(cudaDeviceSynchronize(), "gpu first");
    for (long long k = 0; k < cpu_adds; ++k)
      __atomic_fetch_add(&c[k % kCounters], 1ull, __ATOMIC_RELAXED);
    check(cudaDeviceSynchronize(), "cpu and gpu");
    const double both_ms = ms(a, Clock::now());
    sum = 0;
    for (int i = 0; i < kCounters; ++i) sum += c[i];
    if (sum != gpu_total + cpu_adds) {
      std::fprintf(stderr, "cpu and gpu: %llu additions, expected %llu\n", sum, gpu_total + cpu_adds);
      return 1;
    }
    if (round == 1) {
      std::printf("managed_gpu_atomics_time %.2f ms\n", gpu_ms);
      std::printf("managed_cpu_gpu_atomics_time %.2f ms\n", both_ms);
    }
  }
  check(cudaFree(c), "free");
  return 0;
}
