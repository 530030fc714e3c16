// vmcuda CUDA test program: a kernel that writes to an illegal address. CUDA reports
// the error at the next synchronizing call and then makes it sticky: every later call
// that needs the device returns it (docs/cuda-runtime-internals.md §7). The codes are
// printed, so the output compared with a native run shows any difference.
#include <cstdio>

__global__ void fault(int* p) { *p = 1; }

int main() {
  int* d = nullptr;
  std::printf("malloc_before=%d\n", cudaMalloc(&d, 16));
  fault<<<1, 1>>>(reinterpret_cast<int*>(0x10));
  std::printf("launch=%d\n", cudaGetLastError());
  std::printf("sync=%d\n", cudaDeviceSynchronize());
  int g1 = cudaGetLastError(), g2 = cudaGetLastError();
  std::printf("get=%d get=%d\n", g1, g2);
  int* e = nullptr;
  std::printf("malloc_after=%d\n", cudaMalloc(&e, 16));
  int s = cudaDeviceSynchronize(), p = cudaPeekAtLastError();
  std::printf("sync=%d peek=%d\n", s, p);
  int h = 0;
  std::printf("memcpy=%d\n", cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  std::printf("error=%s %s\n", cudaGetErrorName(cudaErrorIllegalAddress), cudaGetErrorString(cudaErrorIllegalAddress));
  return 0;
}
