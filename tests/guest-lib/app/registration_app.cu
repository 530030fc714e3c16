// An ordinary CUDA program, built by nvcc_app_test.sh with `nvcc -cudart shared` against
// NVIDIA's libcudart.so and run against guest-lib's: kernels (one a template, one taking a
// struct by value), __device__, __constant__ and __managed__ variables, the calls guest-lib
// answers locally, and calls it does not support yet. Prints one "key values" line per check.
#include <cstdio>

struct Params {
  char bytes[24];
};

__device__ int dvar[4];
__constant__ float cvar[16];
__managed__ int mvar;  // registered; never touched on the host (that needs the remoting)

__global__ void add(int* a, float f, Params p, char c, long l) {
  a[threadIdx.x] +=
      static_cast<int>(f) + p.bytes[0] + c + static_cast<int>(l) + dvar[0] + static_cast<int>(cvar[1]) + mvar;
}
template <typename T>
__global__ void fill(T* a, T v) {
  a[threadIdx.x] = v;
}
__global__ void empty() {}

int main() {
  int version = 0;
  cudaError_t e = cudaRuntimeGetVersion(&version);
  std::printf("runtime_version %d %d\n", static_cast<int>(e), version);
  std::printf("error_string %s\n", cudaGetErrorString(cudaErrorInvalidValue));
  std::printf("error_name %s\n", cudaGetErrorName(cudaErrorNotSupported));
  std::printf("last_error_initial %d\n", static_cast<int>(cudaGetLastError()));

  void* p = nullptr;
  std::printf("malloc %d\n", static_cast<int>(cudaMalloc(&p, 256)));
  std::printf("malloc_again %d\n", static_cast<int>(cudaMalloc(&p, 256)));
  std::printf("peek %d\n", static_cast<int>(cudaPeekAtLastError()));
  std::printf("get %d\n", static_cast<int>(cudaGetLastError()));
  std::printf("get_again %d\n", static_cast<int>(cudaGetLastError()));

  // push -> __cudaGetKernel -> pop -> __cudaLaunchKernel (not supported yet): the launch
  // error arrives through cudaGetLastError, as with NVIDIA's library.
  add<<<2, 64>>>(static_cast<int*>(p), 1.0f, Params{}, 'x', 3);
  std::printf("launch_add %d\n", static_cast<int>(cudaGetLastError()));
  fill<int><<<dim3(1, 2, 3), dim3(4, 5), 16>>>(static_cast<int*>(p), 7);
  std::printf("launch_fill %d\n", static_cast<int>(cudaGetLastError()));
  empty<<<1, 1>>>();
  std::printf("launch_empty %d\n", static_cast<int>(cudaGetLastError()));

  cudaChannelFormatDesc d = cudaCreateChannelDesc<float4>();
  std::printf("channel %d %d %d %d %d\n", d.x, d.y, d.z, d.w, static_cast<int>(d.f));
  std::printf("sync %d\n", static_cast<int>(cudaDeviceSynchronize()));
  return 0;
}
