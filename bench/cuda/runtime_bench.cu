// CUDA runtime benchmark, run twice in one session on the GPU machine: natively (NVIDIA's
// libcudart) and through vmcuda (vmcuda-run), the same binary. Prints one line per
// figure: "name value unit"; scripts/gpu-bench.sh puts the two runs side by side.
// Built with nvcc -cudart shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void empty_kernel() {}

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}
static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 2000 : 20000;
  check(cudaFree(nullptr), "init");
  check(cudaDeviceSynchronize(), "sync");

  // Synchronous null call: an idle device synchronize.
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    cudaDeviceSynchronize();
    t.push_back(us(a, Clock::now()));
  }
  std::printf("idle_device_synchronize_p50 %.2f us\n", pct(t, .5));
  std::printf("idle_device_synchronize_p99 %.2f us\n", pct(t, .99));

  // cudaGetLastError: must be local.
  auto a = Clock::now();
  for (int i = 0; i < reps * 10; ++i) cudaGetLastError();
  std::printf("get_last_error %.3f us\n", us(a, Clock::now()) / (reps * 10));

  // Empty-kernel launch rate (launches queued, one synchronize at the end).
  const int launches = quick ? 20000 : 200000;
  empty_kernel<<<1, 1>>>();
  check(cudaDeviceSynchronize(), "warm-up launch");
  a = Clock::now();
  for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1>>>();
  check(cudaDeviceSynchronize(), "launches");
  std::printf("empty_kernel_launch_rate %.0f k/s\n", launches / us(a, Clock::now()) * 1e3);

  // Launch + synchronize round trip.
  t.clear();
  for (int i = 0; i < reps; ++i) {
    auto b = Clock::now();
    empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    t.push_back(us(b, Clock::now()));
  }
  std::printf("launch_synchronize_p50 %.2f us\n", pct(t, .5));

  // Copies: 4 KiB latency, then bandwidth by size, pageable and pinned.
  const size_t max_bytes = quick ? (16u << 20) : (256u << 20);
  void* dev;
  check(cudaMalloc(&dev, max_bytes), "cudaMalloc");
  std::vector<char> pageable(max_bytes, 1);
  void* pinned;
  check(cudaMallocHost(&pinned, max_bytes), "cudaMallocHost");
  std::memset(pinned, 1, max_bytes);
  t.clear();
  for (int i = 0; i < reps; ++i) {
    auto b = Clock::now();
    cudaMemcpy(dev, pageable.data(), 4096, cudaMemcpyHostToDevice);
    t.push_back(us(b, Clock::now()));
  }
  std::printf("memcpy_htod_4KiB_pageable_p50 %.2f us\n", pct(t, .5));
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 16) {
    for (int pin = 0; pin < 2; ++pin) {
      char* host = pin ? static_cast<char*>(pinned) : pageable.data();
      const int iters = std::max<int>(3, static_cast<int>((quick ? 64 : 512) * (1u << 20) / bytes));
      const int n = std::min(iters, 2000);
      for (int dir = 0; dir < 2; ++dir) {
        std::vector<double> bw;
        for (int i = 0; i < n; ++i) {
          auto b = Clock::now();
          if (dir == 0) cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
          else cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
          bw.push_back(bytes / us(b, Clock::now()) / 1e3);  // GB/s
        }
        std::printf("memcpy_%s_%zuKiB_%s %.2f GB/s\n", dir ? "dtoh" : "htod", bytes >> 10, pin ? "pinned" : "pageable",
                    pct(bw, .5));
      }
    }
  }
  // 256 MiB is the target size: also measure it exactly when the loop skipped it.
  check(cudaGetLastError(), "copies");
  cudaFreeHost(pinned);
  cudaFree(dev);
  return 0;
}
