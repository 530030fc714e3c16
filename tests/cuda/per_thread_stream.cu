// The per-thread default stream (nvcc --default-stream per-thread, which
// scripts/build-cuda-tests.sh gives programs named per_thread_*): every synchronous copy and
// memset becomes its _ptds form, launches and async calls their _ptsz form. Copies of every
// shape (1D, 2D, 3D, symbols, arrays) and memsets after kernels on the per-thread stream,
// from two threads at once. Prints what it sees (deterministic; compared with the native
// run) and the number of failed expectations.
#include <cuda_runtime.h>

#include <cstdio>
#include <thread>
#include <vector>

static int failures = 0;
static void expect(const char* what, cudaError_t got) {
  std::printf("%s: %s\n", what, cudaGetErrorName(got));
  if (got != cudaSuccess) ++failures;
}

__device__ int d_sym[64];

__global__ void fill(int* p, int n, int base) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + i;
}
__global__ void bump_sym(int v) {
  if (threadIdx.x < 64) d_sym[threadIdx.x] += v;
}

// Everything one thread does on its own per-thread stream; returns a checksum.
static long long work(int base) {
  const int n = 1 << 16;
  int* d = nullptr;
  cudaMalloc(&d, n * sizeof(int));
  fill<<<n / 256, 256>>>(d, n, base);
  std::vector<int> h(n);
  cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);  // cudaMemcpy_ptds, after the kernel
  long long sum = 0;
  for (int v : h) sum += v;
  cudaMemset(d, 0, 1024 * sizeof(int));  // cudaMemset_ptds
  cudaMemcpy(h.data(), d, 2048 * sizeof(int), cudaMemcpyDeviceToHost);
  sum += h[0] + h[1023] + h[1024];
  // 2D: 16 rows of 64 ints with a pitch.
  int* p2 = nullptr;
  size_t pitch = 0;
  cudaMallocPitch(&p2, &pitch, 64 * sizeof(int), 16);
  cudaMemset2D(p2, pitch, 1, 64 * sizeof(int), 16);  // cudaMemset2D_ptds
  std::vector<int> h2(64 * 16, 0);
  cudaMemcpy2D(h2.data(), 64 * sizeof(int), p2, pitch, 64 * sizeof(int), 16, cudaMemcpyDeviceToHost);
  sum += h2[0] + h2[64 * 16 - 1];
  // 3D: a 8x4x2 box.
  cudaPitchedPtr p3;
  cudaExtent ext = make_cudaExtent(8 * sizeof(int), 4, 2);
  cudaMalloc3D(&p3, ext);
  cudaMemset3D(p3, 2, ext);  // cudaMemset3D_ptds
  std::vector<int> h3(8 * 4 * 2, 0);
  cudaMemcpy3DParms c{};
  c.srcPtr = p3;
  c.dstPtr = make_cudaPitchedPtr(h3.data(), 8 * sizeof(int), 8, 4);
  c.extent = ext;
  c.kind = cudaMemcpyDeviceToHost;
  cudaMemcpy3D(&c);  // cudaMemcpy3D_ptds
  sum += h3[0] + h3[63];
  // An array, in and out.
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<int>();
  cudaArray_t arr;
  cudaMallocArray(&arr, &desc, 32, 4);
  std::vector<int> ha(32 * 4), hb(32 * 4, 0);
  for (int i = 0; i < 32 * 4; ++i) ha[i] = base * 2 + i;
  cudaMemcpy2DToArray(arr, 0, 0, ha.data(), 32 * sizeof(int), 32 * sizeof(int), 4, cudaMemcpyHostToDevice);
  cudaMemcpy2DFromArray(hb.data(), 32 * sizeof(int), arr, 0, 0, 32 * sizeof(int), 4, cudaMemcpyDeviceToHost);
  sum += hb[0] + hb[127];
  cudaFreeArray(arr);
  cudaFree(p3.ptr);
  cudaFree(p2);
  cudaFree(d);
  return sum;
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  expect("cudaFree(0)", cudaFree(nullptr));
  // Symbols: from the main thread.
  std::vector<int> s(64);
  for (int i = 0; i < 64; ++i) s[i] = i;
  expect("cudaMemcpyToSymbol", cudaMemcpyToSymbol(d_sym, s.data(), sizeof(int) * 64));  // _ptds
  bump_sym<<<1, 64>>>(100);
  expect("cudaMemcpyFromSymbol", cudaMemcpyFromSymbol(s.data(), d_sym, sizeof(int) * 64));  // _ptds
  std::printf("symbol after the kernel: %d %d\n", s[0], s[63]);
  if (s[0] != 100 || s[63] != 163) ++failures;
  long long a = 0, b = 0;
  std::thread ta([&] { a = work(10); }), tb([&] { b = work(20000); });
  ta.join();
  tb.join();
  std::printf("thread sums: %lld %lld\n", a, b);
  expect("cudaDeviceSynchronize", cudaDeviceSynchronize());
  expect("cudaGetLastError", cudaGetLastError());
  std::printf("failures: %d\n", failures);
  return failures == 0 ? 0 : 1;
}
