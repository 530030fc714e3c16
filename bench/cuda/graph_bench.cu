// CUDA graph benchmark (issue 11 point 5), run natively and through vmcuda in one session on
// the GPU machine by scripts/gpu-bench.sh: launch rates of a 1-node and a 100-node graph, a
// captured stream of 1,000 small kernels replayed, and the same work launched directly.
// Prints one line per figure, "name value unit" (rates: higher is better; times: lower is).
// Every run checks its result (a wrong one exits 1). Built with nvcc -cudart shared.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void bump(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
constexpr int kElems = 256;
// Every element of d equals `want`, else exit 1.
static void expect(const int* d, int want, const char* what) {
  int h[kElems];
  check(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), "read back");
  for (int i = 0; i < kElems; ++i)
    if (h[i] != want) {
      std::fprintf(stderr, "%s: element %d is %d, expected %d\n", what, i, h[i], want);
      std::exit(1);
    }
}

// A graph of `nodes` bump kernels in a chain, by explicit construction.
static cudaGraphExec_t chain(int* d, int nodes) {
  cudaGraph_t g;
  check(cudaGraphCreate(&g, 0), "create");
  int n = kElems;
  void* args[] = {&d, &n};
  cudaKernelNodeParams p = {};
  p.func = (void*)bump;
  p.gridDim = dim3(1);
  p.blockDim = dim3(kElems);
  p.kernelParams = args;
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < nodes; ++i) {
    cudaGraphNode_t node;
    check(cudaGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &p), "add kernel node");
    prev = node;
  }
  cudaGraphExec_t x;
  check(cudaGraphInstantiate(&x, g, 0), "instantiate");
  check(cudaGraphDestroy(g), "destroy");
  return x;
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int* d;
  check(cudaMalloc(&d, kElems * sizeof(int)), "malloc");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");

  // 1-node and 100-node graphs: launches queued on one stream, one synchronize at the end.
  for (int nodes : {1, 100}) {
    const int launches = (quick ? 2000 : 20000) / (nodes == 1 ? 1 : 10);
    cudaGraphExec_t x = chain(d, nodes);
    check(cudaMemset(d, 0, kElems * sizeof(int)), "memset");
    check(cudaGraphLaunch(x, s), "warm-up");
    check(cudaStreamSynchronize(s), "warm-up sync");
    auto a = Clock::now();
    for (int i = 0; i < launches; ++i) cudaGraphLaunch(x, s);
    check(cudaStreamSynchronize(s), "graph launches");
    const double t = us(a, Clock::now());
    expect(d, nodes * (launches + 1), "graph launches");
    std::printf("graph_%dnode_launch_rate %.2f k/s\n", nodes, launches / t * 1e3);
    if (nodes == 100) std::printf("graph_100node_kernels_rate %.0f k/s\n", launches * 100.0 / t * 1e3);
    check(cudaGraphExecDestroy(x), "exec destroy");
  }
  // The 100-node graph's work launched directly: kernels/s.
  {
    const int rounds = quick ? 200 : 2000;
    check(cudaMemset(d, 0, kElems * sizeof(int)), "memset");
    auto a = Clock::now();
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 100; ++i) bump<<<1, kElems, 0, s>>>(d, kElems);
    check(cudaStreamSynchronize(s), "direct launches");
    const double t = us(a, Clock::now());
    expect(d, rounds * 100, "direct launches");
    std::printf("direct_kernels_rate %.0f k/s\n", rounds * 100.0 / t * 1e3);
  }

  // A stream of 1,000 small kernels captured, then replayed (launch + synchronize), against
  // the same 1,000 launched directly and synchronized.
  {
    const int reps = quick ? 10 : 100;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "begin capture");
    for (int i = 0; i < 1000; ++i) bump<<<1, kElems, 0, s>>>(d, kElems);
    cudaGraph_t g;
    check(cudaStreamEndCapture(s, &g), "end capture");
    cudaGraphExec_t x;
    check(cudaGraphInstantiate(&x, g, 0), "instantiate captured");
    check(cudaMemset(d, 0, kElems * sizeof(int)), "memset");
    check(cudaGraphLaunch(x, s), "warm-up replay");
    check(cudaStreamSynchronize(s), "warm-up replay sync");
    auto a = Clock::now();
    for (int r = 0; r < reps; ++r) {
      check(cudaGraphLaunch(x, s), "replay");
      check(cudaStreamSynchronize(s), "replay sync");
    }
    const double replay = us(a, Clock::now()) / reps;
    expect(d, 1000 * (reps + 1), "captured replay");
    a = Clock::now();
    for (int r = 0; r < reps; ++r) {
      for (int i = 0; i < 1000; ++i) bump<<<1, kElems, 0, s>>>(d, kElems);
      check(cudaStreamSynchronize(s), "direct sync");
    }
    const double direct = us(a, Clock::now()) / reps;
    expect(d, 1000 * (2 * reps + 1), "direct 1000");
    std::printf("captured_1000_kernels_replay %.1f us\n", replay);
    std::printf("direct_1000_kernels %.1f us\n", direct);
    check(cudaGraphExecDestroy(x), "exec destroy");
    check(cudaGraphDestroy(g), "graph destroy");
  }
  check(cudaStreamDestroy(s), "stream destroy");
  check(cudaFree(d), "free");
  return 0;
}
