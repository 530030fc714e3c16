// A CUDA program holding N GiB of device memory that keeps working while vmcuda suspends
// and resumes it (scripts/gpu-suspend-bench.sh): fills its memory with a pattern, prints
// READY, then runs a tiny kernel + synchronize in a loop for S seconds, recording the longest
// gap between two iterations (the pause the program sees), then checks every byte of its
// memory and a __device__ counter. Built with nvcc -cudart shared; runs unmodified natively
// or through vmcuda.
//   suspend_bench GIB SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

__device__ unsigned long long g_ticks;

__global__ void fill(unsigned* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = unsigned(i * 2654435761u) ^ 0x5bd1e995u;
}
__global__ void verify(const unsigned* p, size_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    local += p[i] != (unsigned(i * 2654435761u) ^ 0x5bd1e995u);
  if (local) atomicAdd(bad, local);
}
__global__ void tick() { g_ticks += 1; }

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));                          \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

// `suspend_bench copy GIB`: the native copy rates of this machine for GIB GiB (the
// reference the suspend and resume rates are compared with).
int copy_rates(size_t gib) {
  const size_t bytes = gib << 30;
  void *d = nullptr, *pinned = nullptr;
  CHECK(cudaMalloc(&d, bytes));
  CHECK(cudaMallocHost(&pinned, bytes));
  char* pageable = static_cast<char*>(std::malloc(bytes));
  for (size_t i = 0; i < bytes; i += 4096) pageable[i] = 1;
  CHECK(cudaMemset(d, 1, bytes));
  auto rate = [&](void* dst, const void* src, cudaMemcpyKind kind) {
    const auto t0 = std::chrono::steady_clock::now();
    cudaMemcpy(dst, src, bytes, kind);
    return bytes / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
  };
  std::printf("native %zu GiB: DtoH pinned %.1f GB/s, DtoH pageable %.1f GB/s, HtoD pinned %.1f GB/s, "
              "HtoD pageable %.1f GB/s\n",
              gib, rate(pinned, d, cudaMemcpyDeviceToHost), rate(pageable, d, cudaMemcpyDeviceToHost),
              rate(d, pinned, cudaMemcpyHostToDevice), rate(d, pageable, cudaMemcpyHostToDevice));
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "copy") return copy_rates(std::strtoull(argv[2], nullptr, 10));
  const size_t gib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 10;
  const size_t bytes = gib << 30, n = bytes / 4;
  unsigned* d = nullptr;
  unsigned long long* bad = nullptr;
  CHECK(cudaMalloc(&d, bytes));
  CHECK(cudaMalloc(&bad, sizeof *bad));
  CHECK(cudaMemset(bad, 0, sizeof *bad));
  fill<<<1024, 256>>>(d, n);
  CHECK(cudaDeviceSynchronize());
  std::printf("READY %zu GiB at %p\n", gib, static_cast<void*>(d));
  std::fflush(stdout);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto last = start;
  double longest = 0;
  unsigned long long iterations = 0;
  while (std::chrono::duration<double>(clock::now() - start).count() < seconds) {
    tick<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
    ++iterations;
    const auto now = clock::now();
    longest = std::max(longest, std::chrono::duration<double>(now - last).count());
    last = now;
  }
  verify<<<1024, 256>>>(d, n, bad);
  unsigned long long errors = 0, ticks = 0;
  CHECK(cudaMemcpy(&errors, bad, sizeof errors, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpyFromSymbol(&ticks, g_ticks, sizeof ticks));
  std::printf("iterations %llu ticks %llu wrong words %llu longest pause %.3f s\n", iterations, ticks, errors, longest);
  return errors == 0 && ticks == iterations ? 0 : 1;
}
