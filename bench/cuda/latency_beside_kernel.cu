// Issue 10, finding 2: does one program's long kernel delay another program's small calls?
// scripts/gpu-latency-beside-long-kernel.sh runs two of these at once, natively and through
// vmcuda (--isolation process and thread, one VM), and compares the small client's latency.
//   latency_beside_kernel long SECONDS   one kernel of one thread that spins SECONDS on the GPU's
//                                        clock; prints READY once it is launched, DONE after
//                                        its synchronize
//   latency_beside_kernel small SECONDS  for SECONDS: a tiny kernel, then a synchronous 4 KiB
//                                        copy back into pageable memory (it waits for the
//                                        kernel), then a 4 KiB copy to the device; each
//                                        iteration is one sample. Prints
//                                        "samples N p50_us X p99_us Y max_us Z"
// Built with nvcc -cudart shared (the script builds it into .carry/gpu).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s: %s (%d)\n", #call, cudaGetErrorString(e_), int(e_));       \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_for(unsigned long long ns, int* done) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
  *done = 1;
}

__global__ void tiny(int* p) { p[threadIdx.x] += 1; }

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s long|small SECONDS\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[2]);
  if (std::strcmp(argv[1], "long") == 0) {
    int* done = nullptr;
    CHECK(cudaMalloc(&done, sizeof(int)));
    CHECK(cudaMemset(done, 0, sizeof(int)));
    CHECK(cudaDeviceSynchronize());
    spin_for<<<1, 1>>>(static_cast<unsigned long long>(seconds * 1e9), done);
    CHECK(cudaGetLastError());
    (void)cudaStreamQuery(0);  // issued, not only queued
    std::printf("READY\n");
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaDeviceSynchronize());
    int h = 0;
    CHECK(cudaMemcpy(&h, done, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("DONE %d after %.2f s\n", h,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return h == 1 ? 0 : 1;
  }
  constexpr size_t kBytes = 4096;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, kBytes));
  CHECK(cudaMemset(d, 0, kBytes));
  std::vector<char> host(kBytes, 1);  // pageable, as most programs' buffers
  // Warm up (module load, first-call costs), not counted.
  for (int i = 0; i < 50; ++i) {
    tiny<<<1, 32>>>(d);
    CHECK(cudaMemcpy(host.data(), d, kBytes, cudaMemcpyDeviceToHost));
  }
  std::vector<double> us;
  us.reserve(1 << 20);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const auto t0 = std::chrono::steady_clock::now();
    tiny<<<1, 32>>>(d);
    CHECK(cudaMemcpy(host.data(), d, kBytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(d, host.data(), kBytes, cudaMemcpyHostToDevice));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  if (us.empty()) return 1;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))]; };
  std::printf("samples %zu p50_us %.1f p99_us %.1f max_us %.1f\n", us.size(), at(0.50), at(0.99), us.back());
  return 0;
}
