// vmcuda CUDA test program: execution and errors. <<<>>> launches of template kernels,
// cudaLaunchKernel with an argument array, a struct passed by value, launch
// configurations CUDA refuses, error names and strings, the per-thread last error
// (get resets it, peek keeps it, another thread does not see it). Checks its own results;
// prints one line per check and exits non-zero on any failure. Built with: nvcc -cudart shared.
#include <cstdio>
#include <thread>

template <class T>
__global__ void scale(T* p, T factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= factor;
}

struct Params {
  int a;
  double b;
  char c;
};

__global__ void struct_arg(Params p, long long* out) {
  out[0] = p.a;
  out[1] = static_cast<long long>(p.b * 2);
  out[2] = p.c;
}

static int failures = 0;
#define CHECK(cond, what)                                 \
  do {                                                    \
    bool ok_ = (cond);                                    \
    std::printf("%s: %s\n", ok_ ? "ok" : "FAILED", what); \
    if (!ok_) ++failures;                                 \
  } while (0)

static void show(const char* what, cudaError_t e) { std::printf("%s: %s\n", what, cudaGetErrorName(e)); }

int main() {
  const int n = 1000;
  int* di = nullptr;
  double* dd = nullptr;
  CHECK(cudaMalloc(&di, n * sizeof(int)) == cudaSuccess && cudaMalloc(&dd, n * sizeof(double)) == cudaSuccess,
        "cudaMalloc");
  int hi[n];
  double hd[n];
  for (int i = 0; i < n; ++i) hi[i] = i, hd[i] = i * 0.25;
  cudaMemcpy(di, hi, sizeof hi, cudaMemcpyHostToDevice);
  cudaMemcpy(dd, hd, sizeof hd, cudaMemcpyHostToDevice);

  // <<<>>> of two instantiations of one template.
  scale<int><<<(n + 127) / 128, 128>>>(di, 3, n);
  scale<double><<<(n + 127) / 128, 128>>>(dd, -2.0, n);
  CHECK(cudaGetLastError() == cudaSuccess, "template launches accepted");
  // cudaLaunchKernel with an argument array: the int instantiation again, times 5.
  int factor = 5, count = n;
  void* args[] = {&di, &factor, &count};
  CHECK(cudaLaunchKernel((const void*)scale<int>, dim3((n + 255) / 256), dim3(256), args, 0, nullptr) == cudaSuccess,
        "cudaLaunchKernel(scale<int>)");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
  cudaMemcpy(hi, di, sizeof hi, cudaMemcpyDeviceToHost);
  cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += hi[i] != i * 15 || hd[i] != i * -0.5;
  std::printf("int[999] = %d, double[999] = %g\n", hi[n - 1], hd[n - 1]);
  CHECK(bad == 0, "every element scaled");

  // A struct by value (padding inside: int, double, char).
  long long* dout = nullptr;
  cudaMalloc(&dout, 3 * sizeof(long long));
  Params p{-7, 21.25, 'z'};
  struct_arg<<<1, 1>>>(p, dout);
  long long out[3] = {};
  CHECK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess, "struct kernel ran");
  std::printf("struct_arg: %lld %lld %lld\n", out[0], out[1], out[2]);
  CHECK(out[0] == -7 && out[1] == 42 && out[2] == 'z', "struct argument intact");

  // Configurations CUDA refuses at the launch; the codes are printed.
  scale<int><<<1, 1025>>>(di, 1, n);
  show("1025 threads per block", cudaGetLastError());
  scale<int><<<dim3(1, 65536), 1>>>(di, 1, n);
  show("grid y 65536", cudaGetLastError());
  scale<int><<<1, dim3(1, 1, 65)>>>(di, 1, n);
  show("block z 65", cudaGetLastError());
  scale<int><<<1, 1, 1 << 20>>>(di, 1, n);
  show("1 MiB dynamic shared memory", cudaGetLastError());
  scale<int><<<0, 1>>>(di, 1, n);
  show("empty grid", cudaGetLastError());
  show("cudaLaunchKernel(nullptr)", cudaLaunchKernel(nullptr, dim3(1), dim3(1), args, 0, nullptr));
  show("then cudaGetLastError", cudaGetLastError());
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "refused launches leave the context usable");

  // Last error: peek keeps it, get returns and resets it; other threads do not see it.
  scale<int><<<1, 2048>>>(di, 1, n);
  show("peek", cudaPeekAtLastError());
  show("peek again", cudaPeekAtLastError());
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaGetLastError(); }).join();
  show("another thread's cudaGetLastError", other);
  show("get", cudaGetLastError());
  show("get again", cudaGetLastError());

  // Names and strings.
  const int codes[] = {0, 1, 2, 9, 98, 400, 700, 801, 12345};
  for (int c : codes)
    std::printf("%d: %s / %s\n", c, cudaGetErrorName(static_cast<cudaError_t>(c)),
                cudaGetErrorString(static_cast<cudaError_t>(c)));

  cudaFree(di);
  cudaFree(dd);
  cudaFree(dout);
  std::printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
