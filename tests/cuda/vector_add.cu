// vmcuda CUDA test program: memory, copies in every direction, a kernel launch,
// synchronize, pinned memory, errors. Checks its own results; prints one line per check
// and exits non-zero on any failure. Built with: nvcc -cudart shared.
#include <cstdio>
#include <cstring>
#include <vector>

__global__ void vecadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static int failures = 0;
#define CHECK(cond, what)                                             \
  do {                                                                \
    bool ok_ = (cond);                                                \
    std::printf("%s: %s\n", ok_ ? "ok" : "FAILED", what);             \
    if (!ok_) ++failures;                                             \
  } while (0)

static bool run(int n, bool pinned) {
  const size_t bytes = n * sizeof(float);
  float *a, *b, *c;
  if (pinned) {
    cudaMallocHost(&a, bytes);
    cudaMallocHost(&b, bytes);
    cudaMallocHost(&c, bytes);
  } else {
    a = new float[n];
    b = new float[n];
    c = new float[n];
  }
  for (int i = 0; i < n; ++i) a[i] = i * 0.5f, b[i] = 1000.0f - i, c[i] = -1;
  float *da, *db, *dc;
  bool ok = cudaMalloc(&da, bytes) == cudaSuccess && cudaMalloc(&db, bytes) == cudaSuccess &&
            cudaMalloc(&dc, bytes) == cudaSuccess;
  ok = ok && cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  ok = ok && cudaMemcpy(db, b, bytes, cudaMemcpyDefault) == cudaSuccess;
  ok = ok && cudaMemset(dc, 0, bytes) == cudaSuccess;
  vecadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  ok = ok && cudaGetLastError() == cudaSuccess;
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  ok = ok && cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += c[i] != a[i] + b[i];
  // Device to device, then back through cudaMemcpyDefault.
  ok = ok && cudaMemcpy(da, dc, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
  std::memset(c, 0, bytes);
  ok = ok && cudaMemcpy(c, da, bytes, cudaMemcpyDefault) == cudaSuccess;
  for (int i = 0; i < n; ++i) bad += c[i] != a[i] + b[i];
  ok = ok && cudaFree(da) == cudaSuccess && cudaFree(db) == cudaSuccess && cudaFree(dc) == cudaSuccess;
  if (pinned) {
    cudaFreeHost(a);
    cudaFreeHost(b);
    cudaFreeHost(c);
  } else {
    delete[] a;
    delete[] b;
    delete[] c;
  }
  return ok && bad == 0;
}

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count) == cudaSuccess && count >= 1, "cudaGetDeviceCount >= 1");
  CHECK(run(1000, false), "vecadd 1000 elements, pageable (inline copies)");
  CHECK(run(5 << 20, false), "vecadd 5M elements, pageable (pipelined heap copies)");
  CHECK(run(1 << 20, true), "vecadd 1M elements, pinned (zero-copy heap)");
  // Errors CUDA reports at once.
  float* d = nullptr;
  CHECK(cudaMalloc(&d, 1024) == cudaSuccess, "cudaMalloc 1 KiB");
  float h[4];
  CHECK(cudaMemcpy(h, d + 1000, 4096, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
        "copy past an allocation: cudaErrorInvalidValue");
  CHECK(cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess,
        "last error set once, then reset");
  CHECK(cudaMemcpy(h, d, 16, (cudaMemcpyKind)7) == cudaErrorInvalidMemcpyDirection, "bad copy kind: 21");
  cudaGetLastError();
  // Launch configurations CUDA refuses at once: the codes are printed, so the output
  // compared with a native run shows any difference.
  struct Config {
    const char* what;
    dim3 grid, block;
  } configs[] = {
      {"<<<1, 2048>>>", dim3(1), dim3(2048)},
      {"<<<0, 32>>>", dim3(0), dim3(32)},
      {"<<<1, 0>>>", dim3(1), dim3(0)},
      {"<<<1, (1,1,65)>>>", dim3(1), dim3(1, 1, 65)},
      {"<<<(1,65536), 1>>>", dim3(1, 65536), dim3(1)},
  };
  for (const auto& c : configs) {
    vecadd<<<c.grid, c.block>>>(d, d, d, 4);
    int peek = cudaPeekAtLastError(), get1 = cudaGetLastError(), get2 = cudaGetLastError();
    std::printf("launch %s: peek=%d get=%d get=%d\n", c.what, peek, get1, get2);
    if (peek == 0 || get1 != peek || get2 != 0) ++failures;
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize after the refused launch");
  CHECK(cudaFree(d) == cudaSuccess, "cudaFree");
  CHECK(cudaFree(d) == cudaErrorInvalidValue, "double cudaFree: cudaErrorInvalidValue");
  cudaGetLastError();
  std::printf("%s\n", failures ? "VECTOR_ADD FAILED" : "VECTOR_ADD PASSED");
  return failures ? 1 : 0;
}
