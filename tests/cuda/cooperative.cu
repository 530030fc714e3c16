// vmcuda CUDA test program: cooperative launches and launch attributes. A reduction that
// needs a grid-wide barrier (cooperative_groups::this_grid().sync(), no -rdc needed since
// CUDA 11), launched with cudaLaunchCooperativeKernel on a grid sized by the occupancy
// calculator; several grid barriers in one kernel; cudaLaunchKernelExC with the cooperative,
// priority, cluster dimension and cluster scheduling policy attributes; a cooperative grid
// one block larger than can be co-resident (cudaErrorCooperativeLaunchTooLarge, at the
// launch, by both entry points); an unknown attribute id. Prints nothing that depends on
// the GPU model (occupancy, SM count). Checks its own results; prints one line per check
// and exits non-zero on any failure. Built with: nvcc -cudart shared.
#include <cooperative_groups.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

constexpr int kBlock = 256;  // grid_sum's block reduction needs exactly this

// *out = the sum of in[0, n): per-block partial sums, a grid barrier, then block 0 adds the
// partials.
__global__ void grid_sum(const int* in, int n, int* partial, int* out) {
  cg::grid_group grid = cg::this_grid();
  __shared__ int s[kBlock];
  int sum = 0;
  for (unsigned long long i = grid.thread_rank(); i < static_cast<unsigned long long>(n); i += grid.size())
    sum += in[i];
  s[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
    *out = total;
  }
}

// `rounds` rounds, each reading what every thread wrote in the one before (a grid barrier
// between): round r writes dst[i] = src[(i + 1) % n] + 1, alternating a -> b, b -> a.
__global__ void grid_rounds(int* a, int* b, int n, int rounds) {
  cg::grid_group grid = cg::this_grid();
  for (int r = 0; r < rounds; ++r) {
    const int* src = r % 2 ? b : a;
    int* dst = r % 2 ? a : b;
    for (unsigned long long i = grid.thread_rank(); i < static_cast<unsigned long long>(n); i += grid.size())
      dst[i] = src[(i + 1) % n] + 1;
    grid.sync();
  }
}

// p[i] += by, i < n
__global__ void coop_bump(int* p, int n, int by) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += by;
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
  int dev = 0, coop = 0, sms = 0;
  cudaGetDevice(&dev);
  CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) == cudaSuccess, "cudaDevAttrCooperativeLaunch");
  std::printf("cooperative launch supported: %d\n", coop);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaFuncAttributes fa{};
  CHECK(cudaFuncGetAttributes(&fa, (const void*)grid_sum) == cudaSuccess && fa.maxThreadsPerBlock >= kBlock &&
            fa.sharedSizeBytes == kBlock * sizeof(int),
        "cudaFuncGetAttributes(grid_sum)");
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void*)grid_sum, kBlock, 0) == cudaSuccess &&
            per_sm > 0,
        "occupancy of grid_sum");
  const int max_blocks = per_sm * sms;  // every block co-resident: the most a cooperative grid may have

  // The reduction, on the largest cooperative grid.
  const int n = 1 << 20;
  std::vector<int> h(n);
  long long expect = 0;
  for (int i = 0; i < n; ++i) h[i] = i % 11 - 5 + (i % 1000 == 0 ? 1000 : 0), expect += h[i];
  int *in = nullptr, *partial = nullptr, *out = nullptr;
  cudaMalloc(&in, n * sizeof(int));
  cudaMalloc(&partial, (max_blocks + 1) * sizeof(int));
  cudaMalloc(&out, sizeof(int));
  cudaMemcpy(in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  int nn = n;
  void* sum_args[] = {&in, &nn, &partial, &out};
  CHECK(cudaLaunchCooperativeKernel((const void*)grid_sum, dim3(max_blocks), dim3(kBlock), sum_args, 0, nullptr) ==
            cudaSuccess,
        "cudaLaunchCooperativeKernel(grid_sum), every block co-resident");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
  int total = 0;
  cudaMemcpy(&total, out, sizeof total, cudaMemcpyDeviceToHost);
  std::printf("grid_sum = %d (expected %lld)\n", total, expect);
  CHECK(total == expect, "grid-wide reduction");

  // Many barriers in one kernel, on a small cooperative grid and a stream of its own.
  const int m = 5000, rounds = 7;
  std::vector<int> ha(m);
  for (int i = 0; i < m; ++i) ha[i] = 3 * i;
  int *a = nullptr, *b = nullptr;
  cudaMalloc(&a, m * sizeof(int));
  cudaMalloc(&b, m * sizeof(int));
  cudaMemcpy(a, ha.data(), m * sizeof(int), cudaMemcpyHostToDevice);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int mm = m, rr = rounds;
  void* round_args[] = {&a, &b, &mm, &rr};
  CHECK(cudaLaunchCooperativeKernel((const void*)grid_rounds, dim3(sms), dim3(128), round_args, 0, s) == cudaSuccess,
        "cudaLaunchCooperativeKernel(grid_rounds) on a stream");
  CHECK(cudaStreamSynchronize(s) == cudaSuccess, "stream synchronize");
  std::vector<int> hb(m);
  cudaMemcpy(hb.data(), rounds % 2 ? b : a, m * sizeof(int), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < m; ++i) bad += hb[i] != 3 * ((i + rounds) % m) + rounds;
  std::printf("grid_rounds: [0] = %d, [%d] = %d\n", hb[0], m - 1, hb[m - 1]);
  CHECK(bad == 0, "seven grid barriers");

  // One block more than can be co-resident: refused at the launch, and the last error.
  cudaMemset(out, 0, sizeof(int));
  show("cooperative grid of max + 1 blocks",
       cudaLaunchCooperativeKernel((const void*)grid_sum, dim3(max_blocks + 1), dim3(kBlock), sum_args, 0, nullptr));
  show("then cudaGetLastError", cudaGetLastError());
  show("then cudaGetLastError again", cudaGetLastError());
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "the refused launch leaves the context usable");
  cudaMemcpy(&total, out, sizeof total, cudaMemcpyDeviceToHost);
  CHECK(total == 0, "the refused launch did not run");

  // cudaLaunchKernelExC with the cooperative attribute.
  cudaLaunchAttribute attr[2] = {};
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(max_blocks);
  cfg.blockDim = dim3(kBlock);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelExC(&cfg, (const void*)grid_sum, sum_args) == cudaSuccess,
        "cudaLaunchKernelExC(grid_sum, cooperative)");
  CHECK(cudaStreamSynchronize(s) == cudaSuccess, "stream synchronize");
  cudaMemcpy(&total, out, sizeof total, cudaMemcpyDeviceToHost);
  CHECK(total == expect, "grid-wide reduction through cudaLaunchKernelExC");
  cfg.gridDim = dim3(max_blocks + 1);
  show("cudaLaunchKernelExC, cooperative, max + 1 blocks", cudaLaunchKernelExC(&cfg, (const void*)grid_sum, sum_args));
  show("then cudaGetLastError", cudaGetLastError());

  // The priority attribute (the device's greatest priority) and an ignored entry.
  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  const int k = 1000;
  std::vector<int> hk(k);
  for (int i = 0; i < k; ++i) hk[i] = i;
  int* p = nullptr;
  cudaMalloc(&p, k * sizeof(int));
  cudaMemcpy(p, hk.data(), k * sizeof(int), cudaMemcpyHostToDevice);
  int kk = k, by = 10;
  void* bump_args[] = {&p, &kk, &by};
  attr[0].id = cudaLaunchAttributeIgnore;
  attr[1].id = cudaLaunchAttributePriority;
  attr[1].val.priority = greatest;
  cfg.gridDim = dim3((k + 127) / 128);
  cfg.blockDim = dim3(128);
  cfg.stream = nullptr;
  cfg.numAttrs = 2;
  CHECK(cudaLaunchKernelExC(&cfg, (const void*)coop_bump, bump_args) == cudaSuccess,
        "cudaLaunchKernelExC(coop_bump, priority)");

  // Clusters of 2 blocks, spread over the SMs.
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attr[1].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
  cfg.gridDim = dim3(8);
  by = 5;
  CHECK(cudaLaunchKernelExC(&cfg, (const void*)coop_bump, bump_args) == cudaSuccess,
        "cudaLaunchKernelExC(coop_bump, cluster 2x1x1, spread)");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
  cudaMemcpy(hk.data(), p, k * sizeof(int), cudaMemcpyDeviceToHost);
  bad = 0;
  for (int i = 0; i < k; ++i) bad += hk[i] != i + 15;
  std::printf("coop_bump: [0] = %d, [%d] = %d\n", hk[0], k - 1, hk[k - 1]);
  CHECK(bad == 0, "both attribute launches ran");

  // No attributes at all: a plain launch.
  cfg.numAttrs = 0;
  cfg.attrs = nullptr;
  by = 1;
  CHECK(cudaLaunchKernelExC(&cfg, (const void*)coop_bump, bump_args) == cudaSuccess,
        "cudaLaunchKernelExC(coop_bump), no attributes");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
  cudaMemcpy(hk.data(), p, sizeof(int), cudaMemcpyDeviceToHost);
  CHECK(hk[0] == 16, "the launch without attributes ran");

  // An attribute id that CUDA does not know.
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const int unknown_id = 99;
  std::memcpy(&attr[0].id, &unknown_id, sizeof unknown_id);
  show("cudaLaunchKernelExC, attribute id 99", cudaLaunchKernelExC(&cfg, (const void*)coop_bump, bump_args));
  show("then cudaGetLastError", cudaGetLastError());
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");

  cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(partial);
  cudaFree(out);
  cudaFree(a);
  cudaFree(b);
  cudaFree(p);
  std::printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
