// With rdc_other.cu: a -rdc=true program. Its two translation units are registered through
// one wrapper of version 2 that carries both relocatable fatbins.
#include <cstdio>

extern __device__ int counter;
__device__ void bump();
__global__ void kernel_main() { bump(); }
void launch_other();

int main() {
  kernel_main<<<1, 1>>>();
  std::printf("launch_main %d\n", static_cast<int>(cudaGetLastError()));
  launch_other();
  std::printf("launch_other %d\n", static_cast<int>(cudaGetLastError()));
  return 0;
}
