// vmcuda test program for the kernel time limit (issue 10 point 6): a kernel that never
// ends (it spins on a flag nothing sets). The test executor runs it as a kernel whose
// stream never completes (tests/executor/fake_kernels.cc, kFakeNeverEnds).
//   endless_kernel timeout [HOLD_FILE]  launch it, then synchronize: under vmcuda-stub
//     --kernel-time-limit the synchronize returns cudaErrorLaunchTimeout (702), sticky as
//     natively; with HOLD_FILE, the program then keeps its slot until that file exists.
//   endless_kernel leave  launch it and exit without synchronizing.
// The codes are printed; tests/security/kernel_time_limit_test.sh checks them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

__global__ void spin_forever(volatile int* flag) {
  while (*flag == 0) {
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "timeout";
  int* flag = nullptr;
  void* big = nullptr;
  std::printf("malloc=%d\n", cudaMalloc(&flag, sizeof(int)));
  std::printf("memset=%d\n", cudaMemset(flag, 0, sizeof(int)));
  std::printf("malloc_big=%d\n", cudaMalloc(&big, 256 << 20));  // held by the client until it ends
  std::printf("sync_before=%d\n", cudaDeviceSynchronize());
  spin_forever<<<1, 1>>>(flag);
  std::printf("launch=%d\n", cudaGetLastError());
  std::printf("query=%d\n", cudaStreamQuery(0));  // 600: not ready
  std::fflush(stdout);
  if (std::strcmp(mode, "leave") == 0) return 0;
  std::printf("sync=%d\n", cudaDeviceSynchronize());
  std::printf("get=%d\n", cudaGetLastError());
  void* p = nullptr;
  std::printf("malloc_after=%d\n", cudaMalloc(&p, 16));
  std::printf("sync_again=%d\n", cudaDeviceSynchronize());
  std::printf("name=%s\n", cudaGetErrorName(cudaErrorLaunchTimeout));
  std::fflush(stdout);
  if (argc > 2) {
    struct stat st;
    for (int i = 0; i < 2400 && ::stat(argv[2], &st) != 0; ++i) ::usleep(50000);
  }
  return 0;
}
