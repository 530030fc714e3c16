// Finding 10.1: can one program of a VM reach another program's device memory with a kernel?
//   isolation_probe owner DIR     fills 1 MiB with a secret, writes its address to DIR/ptr,
//                                 waits until DIR/done exists, then checks its secret is intact
//   isolation_probe intruder DIR  launches a kernel that copies from the owner's address into
//                                 its own memory and reports what came back
// Lines: "owner: ..." / "intruder: kernel <error name>, <N> secret words" (tests/security/
// isolation_test.sh judges them).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

constexpr int kWords = (1 << 20) / 4;
constexpr int kSecret = 0x5ec2e7;

// y[i] = y[i] * a + x[i]: with a = 0, a copy of x (the executor knows it as tests/cuda/multi_gpu's).
__global__ void mg_mix(const int* x, int* y, int n, int a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * a + x[i];
}
__global__ void mg_fill(int* p, int n, int seed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = seed + 7 * i;
}

static bool exists(const std::string& f) { return std::ifstream(f).good(); }

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s owner|intruder DIR\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  int* mine = nullptr;
  if (cudaMalloc(&mine, kWords * sizeof(int)) != cudaSuccess) {
    std::printf("%s: cudaMalloc failed\n", mode.c_str());
    return 1;
  }
  if (mode == "owner") {
    mg_fill<<<(kWords + 255) / 256, 256>>>(mine, kWords, kSecret);  // secret + 7 i
    cudaDeviceSynchronize();
    std::ofstream(dir + "/ptr.tmp") << reinterpret_cast<uintptr_t>(mine) << "\n";
    std::rename((dir + "/ptr.tmp").c_str(), (dir + "/ptr").c_str());
    for (int i = 0; i < 600 && !exists(dir + "/done"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<int> h(kWords);
    const cudaError_t e = cudaMemcpy(h.data(), mine, kWords * sizeof(int), cudaMemcpyDeviceToHost);
    int intact = 0;
    for (int i = 0; i < kWords; ++i) intact += h[i] == kSecret + 7 * i;
    std::printf("owner: %s, %d of %d secret words intact\n", cudaGetErrorName(e), intact, kWords);
    return 0;
  }
  uintptr_t theirs = 0;
  for (int i = 0; i < 600 && !exists(dir + "/ptr"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::ifstream(dir + "/ptr") >> theirs;
  cudaMemset(mine, 0, kWords * sizeof(int));
  // Their address, in a kernel's parameters: never checked against anything but the
  // device's page tables (this process's, with --isolation process).
  mg_mix<<<(kWords + 255) / 256, 256>>>(reinterpret_cast<const int*>(theirs), mine, kWords, 0);
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaGetLastError();
  std::vector<int> h(kWords, 0);
  cudaMemcpy(h.data(), mine, kWords * sizeof(int), cudaMemcpyDeviceToHost);
  int secret = 0;
  for (int i = 0; i < kWords; ++i) secret += h[i] == kSecret + 7 * i;
  std::printf("intruder: kernel %s, %d secret words\n", cudaGetErrorName(e), secret);
  std::ofstream(dir + "/done") << "1\n";
  return 0;
}
