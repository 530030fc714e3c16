// Two-GPU benchmarks (scripts/gpu-multi-check.sh --bench runs them natively and through
// vmcuda with the same arguments). Each figure is one line "name value unit".
//   multi_gpu_bench p2p [MIB]      copies between devices 0 and 1 (default 256 MiB):
//       bandwidth of cudaMemcpyPeerAsync 0->1, 1->0 and both at once (two streams), with
//       peer access enabled and disabled (staged by the driver); latency of small peer
//       copies: one 4-byte copy + cudaStreamSynchronize (p50, p99), and the per-copy cost of
//       1000 4-byte copies issued back to back (one synchronize).
//   multi_gpu_bench compute DEV N  N launches of a fixed compute-bound kernel (FMA chains,
//       ~ms each) on device DEV, synchronizing every 20; prints compute_s (wall time of the
//       N launches after a warm-up) and gflops. Two processes at once, one per GPU, give
//       the "two clients on two GPUs" figures.
// Wall-clock timing on the host (what an application sees, vmcuda's round trips included).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr int kChain = 4;
__global__ void fma_chains(float* out, int iters, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float x[kChain];
  for (int c = 0; c < kChain; ++c) x[c] = i * 1e-6f + c;
  for (int k = 0; k < iters; ++k)
#pragma unroll
    for (int c = 0; c < kChain; ++c) x[c] = fmaf(x[c], a, b);
  float s = 0;
  for (int c = 0; c < kChain; ++c) s += x[c];
  out[i] = s;  // keeps the work
}

int compute(int dev, int n) {
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const int block = 256, grid = prop.multiProcessorCount * 8, iters = 1 << 16;
  float* out = nullptr;
  check(cudaMalloc(&out, sizeof(float) * grid * block), "cudaMalloc");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int i = 0; i < 5; ++i) fma_chains<<<grid, block, 0, s>>>(out, iters, 0.999999f, 1e-7f);
  check(cudaStreamSynchronize(s), "warm-up");
  const double t = now_s();
  for (int i = 0; i < n; ++i) {
    fma_chains<<<grid, block, 0, s>>>(out, iters, 0.999999f, 1e-7f);
    if (i % 20 == 19) check(cudaStreamSynchronize(s), "sync");
  }
  check(cudaStreamSynchronize(s), "sync");
  check(cudaGetLastError(), "launch");
  const double dt = now_s() - t;
  const double flops = 2.0 * kChain * iters * double(grid) * block * n;
  std::printf("compute_s %.4f s\n", dt);
  std::printf("gflops %.1f GFLOP/s\n", flops / dt * 1e-9);
  cudaFree(out);
  cudaStreamDestroy(s);
  return 0;
}

// Bandwidth of `reps` copies of `bytes` on each of the given (dst, src) directions at once.
double bandwidth(int* buf[2], size_t bytes, cudaStream_t st[2], bool dir01, bool dir10, int reps) {
  auto issue = [&] {
    // 0->1 on device 0's stream, 1->0 on device 1's.
    if (dir01) check(cudaMemcpyPeerAsync(buf[1], 1, buf[0], 0, bytes, st[0]), "cudaMemcpyPeerAsync 0->1");
    if (dir10) check(cudaMemcpyPeerAsync(buf[0] + bytes / sizeof(int), 0, buf[1] + bytes / sizeof(int), 1, bytes,
                                         st[1]), "cudaMemcpyPeerAsync 1->0");
  };
  issue();  // warm-up
  check(cudaStreamSynchronize(st[0]), "sync");
  check(cudaStreamSynchronize(st[1]), "sync");
  const double t = now_s();
  for (int r = 0; r < reps; ++r) issue();
  check(cudaStreamSynchronize(st[0]), "sync");
  check(cudaStreamSynchronize(st[1]), "sync");
  const double dt = now_s() - t;
  return double(bytes) * reps * ((dir01 ? 1 : 0) + (dir10 ? 1 : 0)) / dt * 1e-9;
}

int p2p(size_t mib) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 2) {
    std::fprintf(stderr, "needs 2 devices, found %d\n", count);
    return 1;
  }
  const size_t bytes = mib << 20;
  int* buf[2];
  int* tiny[2];
  cudaStream_t st[2];
  for (int d = 0; d < 2; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    // Twice the size: the two directions of a bidirectional run use different halves.
    check(cudaMalloc(&buf[d], 2 * bytes), "cudaMalloc");
    check(cudaMemset(buf[d], d + 1, 2 * bytes), "cudaMemset");
    check(cudaMalloc(&tiny[d], 4096), "cudaMalloc");
    check(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  int can01 = 0, can10 = 0;
  check(cudaDeviceCanAccessPeer(&can01, 0, 1), "cudaDeviceCanAccessPeer");
  check(cudaDeviceCanAccessPeer(&can10, 1, 0), "cudaDeviceCanAccessPeer");
  const int reps = std::max<int>(2, int(4096 / mib));  // ~4 GiB a figure
  std::printf("p2p_copy_mib %zu MiB\n", mib);
  for (int peer = 0; peer < 2; ++peer) {
    const bool on = peer == 1;
    if (on) {
      if (!can01 || !can10) {
        std::printf("p2p_access_supported 0 -\n");
        break;
      }
      check(cudaSetDevice(0), "cudaSetDevice");
      check(cudaDeviceEnablePeerAccess(1, 0), "cudaDeviceEnablePeerAccess");
      check(cudaSetDevice(1), "cudaSetDevice");
      check(cudaDeviceEnablePeerAccess(0, 0), "cudaDeviceEnablePeerAccess");
      check(cudaSetDevice(0), "cudaSetDevice");
    }
    const char* tag = on ? "p2p_on" : "p2p_off";
    std::printf("bw_0to1_%s %.2f GB/s\n", tag, bandwidth(buf, bytes, st, true, false, reps));
    std::printf("bw_1to0_%s %.2f GB/s\n", tag, bandwidth(buf, bytes, st, false, true, reps));
    std::printf("bw_bidir_%s %.2f GB/s\n", tag, bandwidth(buf, bytes, st, true, true, reps));

    // Latency: one 4-byte peer copy and its synchronize.
    std::vector<double> lat;
    for (int i = 0; i < 2000; ++i) {
      const double t = now_s();
      check(cudaMemcpyPeerAsync(tiny[1], 1, tiny[0], 0, 4, st[0]), "cudaMemcpyPeerAsync small");
      check(cudaStreamSynchronize(st[0]), "sync");
      if (i >= 100) lat.push_back((now_s() - t) * 1e6);
    }
    std::sort(lat.begin(), lat.end());
    std::printf("lat_sync_p50_%s %.2f us\n", tag, lat[lat.size() / 2]);
    std::printf("lat_sync_p99_%s %.2f us\n", tag, lat[lat.size() * 99 / 100]);
    // Back to back: the per-copy cost of a stream of small copies.
    const int k = 1000;
    const double t = now_s();
    for (int i = 0; i < k; ++i)
      check(cudaMemcpyPeerAsync(tiny[1] + (i % 512), 1, tiny[0] + (i % 512), 0, 4, st[0]), "small");
    check(cudaStreamSynchronize(st[0]), "sync");
    std::printf("lat_pipelined_%s %.2f us\n", tag, (now_s() - t) * 1e6 / k);
  }
  for (int d = 0; d < 2; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    cudaFree(buf[d]);
    cudaFree(tiny[d]);
    cudaStreamDestroy(st[d]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "p2p") == 0) return p2p(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256);
  if (argc >= 4 && std::strcmp(argv[1], "compute") == 0) return compute(std::atoi(argv[2]), std::atoi(argv[3]));
  std::fprintf(stderr, "usage: %s p2p [MIB] | compute DEV N\n", argv[0]);
  return 2;
}
