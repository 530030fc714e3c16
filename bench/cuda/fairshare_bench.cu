// A program that keeps the GPU busy, for fair sharing between VMs (scripts/gpu-fairshare-bench.sh
// runs it natively and through two stubs with weights 1 and 3):
//   fairshare_bench START END [KERNEL_US]
// START, END: wall-clock times (seconds since the epoch, as `date +%s.%N`). It launches
// kernels that spin on every SM for KERNEL_US microseconds (default 500), 8 at a time then
// synchronizes, from before START until END, and prints the kernels that completed between
// START and END ("kernels N"), that window ("window_s S") and their rate ("rate R").
// Several copies given the same window compare their shares of the GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "fairshare_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s START END [KERNEL_US]\n", argv[0]);
    return 2;
  }
  const double start = std::atof(argv[1]), end = std::atof(argv[2]);
  const double kernel_us = argc > 3 ? std::atof(argv[3]) : 500;
  int khz = 0, sms = 0;
  check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const long long cycles = static_cast<long long>(khz * kernel_us / 1000.0);
  constexpr int kBatch = 8;
  long long kernels = 0;
  double first = 0, last = 0;
  for (;;) {
    for (int i = 0; i < kBatch; ++i) spin<<<sms * 4, 128>>>(cycles);
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "synchronize");
    const double now = wall_s();
    if (now > start && now <= end) {
      if (!first) first = now;
      kernels += kBatch;
      last = now;
    }
    if (now > end) break;
  }
  const double window = end - start;
  std::printf("kernels %lld\nwindow_s %.3f\nrate %.1f\nfirst_s %.3f\nlast_s %.3f\n", kernels, window,
              kernels / window, first ? first - start : -1.0, last ? end - last : -1.0);
  return 0;
}
