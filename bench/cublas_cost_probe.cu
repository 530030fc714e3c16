// What a cuBLAS handle costs in device memory (docs/security.md: the VM is charged
// VMCUDA_CUBLAS_WORKSPACE_BYTES per handle, by default NVIDIA's documented workspace size for the
// GPU's architecture). Reads cuMemGetInfo's free memory around cublasCreate, a first SGEMM on the
// default stream, a SGEMM on a second stream, a second handle and cublasDestroy. NVIDIA's
// libcublas.so.13 is loaded with dlopen (LD_LIBRARY_PATH), so no toolkit headers are needed.
//   cublas_cost_probe [DEVICE]
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

using Create = int (*)(void**);
using Destroy = int (*)(void*);
using SetStream = int (*)(void*, CUstream);
using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                      const float*, float*, int);

static long long free_now() {
  size_t f = 0, t = 0;
  cuMemGetInfo(&f, &t);
  return static_cast<long long>(f);
}

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  void* lib = dlopen("libcublas.so.13", RTLD_NOW);
  if (!lib) {
    std::printf("cublas_cost_probe: %s\n", dlerror());
    return 1;
  }
  auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "cublasDestroy_v2"));
  auto set_stream = reinterpret_cast<SetStream>(dlsym(lib, "cublasSetStream_v2"));
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cublasSgemm_v2"));
  if (!create || !destroy || !set_stream || !sgemm) return 2;
  CUdevice dev;
  CUcontext ctx;
  int major = 0, minor = 0;
  // The primary context: the one the library's runtime uses.
  if (cuInit(0) || cuDeviceGet(&dev, device) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  constexpr int n = 512;
  CUdeviceptr a;
  if (cuMemAlloc(&a, size_t{n} * n * 4 * 3)) return 4;
  const float* A = reinterpret_cast<const float*>(a);
  const float* B = A + n * n;
  float* C = const_cast<float*>(B) + n * n;
  const float one = 1, zero = 0;
  CUstream second;
  cuStreamCreate(&second, CU_STREAM_NON_BLOCKING);
  cuCtxSynchronize();
  const long long base = free_now();
  void* h = nullptr;
  if (create(&h)) return 5;
  cuCtxSynchronize();
  const long long created = free_now();
  sgemm(h, 0, 0, n, n, n, &one, A, n, B, n, &zero, C, n);
  cuCtxSynchronize();
  const long long first = free_now();
  set_stream(h, second);
  sgemm(h, 0, 0, n, n, n, &one, A, n, B, n, &zero, C, n);
  cuCtxSynchronize();
  const long long streamed = free_now();
  void* h2 = nullptr;
  if (create(&h2)) return 6;
  sgemm(h2, 0, 0, n, n, n, &one, A, n, B, n, &zero, C, n);
  cuCtxSynchronize();
  const long long two = free_now();
  destroy(h2);
  destroy(h);
  cuCtxSynchronize();
  const long long gone = free_now();
  auto mib = [](long long b) { return b / 1048576.0; };
  std::printf("device %d (compute capability %d.%d): cublasCreate %.1f MiB, its first SGEMM %.1f MiB more, on a "
              "second stream %.1f MiB more, a second handle with a SGEMM %.1f MiB more; after both were destroyed "
              "%.1f MiB still held (vmcuda charges %d MiB per handle by default)\n",
              device, major, minor, mib(base - created), mib(created - first), mib(first - streamed),
              mib(streamed - two), mib(base - gone), major >= 9 ? 32 : 4);
  return 0;
}
