// vmcuda CUDA test program: a stream capture held open a while (as torch.cuda.graph holds one
// while the model runs), kernels and copies captured across the pause, then the graph launched.
// tests/cuda/suspend_resume_test.sh suspends and resumes programs at random moments: one that
// lands while the capture is open carries it (docs/snapshots.md), and the output is the same
// as natively, where nothing interrupts it.
#include <chrono>
#include <cstdio>
#include <thread>

static int failures = 0;
static void expect(const char* what, cudaError_t got) {
  if (got == cudaSuccess) return;
  std::printf("%s: %s: MISMATCH\n", what, cudaGetErrorName(got));
  ++failures;
}
static void check(bool ok, const char* what) {
  std::printf("%s: %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}

// a[i] += v for the first n (the test executor knows it by this name: tests/executor/fake_kernels.cc).
__global__ void g_add(int* a, int v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += v;
}

int main() {
  const int n = 1 << 12, rounds = 10;
  int *p = nullptr, *q = nullptr, *h = nullptr;
  expect("cudaMalloc", cudaMalloc(&p, n * sizeof(int)));
  expect("cudaMalloc", cudaMalloc(&q, n * sizeof(int)));
  expect("cudaMallocHost", cudaMallocHost(&h, n * sizeof(int)));
  cudaStream_t s;
  expect("cudaStreamCreate", cudaStreamCreate(&s));
  expect("cudaStreamBeginCapture", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0, id_after = 0;
  expect("cudaStreamGetCaptureInfo", cudaStreamGetCaptureInfo(s, &status, &id));
  expect("cudaMemsetAsync", cudaMemsetAsync(p, 0, n * sizeof(int), s));
  for (int round = 0; round < rounds; ++round) {
    g_add<<<n / 256, 256, 0, s>>>(p, round + 1, n);
    expect("g_add", cudaGetLastError());
    expect("cudaMemcpyAsync", cudaMemcpyAsync(q, p, n * sizeof(int), cudaMemcpyDeviceToDevice, s));
    g_add<<<n / 512, 256, 0, s>>>(q, 1000, n / 2);
    expect("g_add", cudaGetLastError());
    std::this_thread::sleep_for(std::chrono::milliseconds(40));  // the capture stays open
  }
  expect("cudaMemcpyAsync", cudaMemcpyAsync(h, q, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  expect("cudaStreamGetCaptureInfo", cudaStreamGetCaptureInfo(s, &status, &id_after));
  check(status == cudaStreamCaptureStatusActive, "the capture is still open after the pauses");
  check(id_after == id && id != 0, "the capture keeps its id");
  cudaGraph_t g = nullptr;
  expect("cudaStreamEndCapture", cudaStreamEndCapture(s, &g));
  size_t nodes = 0, roots = 0;
  expect("cudaGraphGetNodes", cudaGraphGetNodes(g, nullptr, &nodes));
  expect("cudaGraphGetRootNodes", cudaGraphGetRootNodes(g, nullptr, &roots));
  std::printf("captured graph: %zu nodes, %zu root\n", nodes, roots);
  cudaGraphExec_t x = nullptr;
  expect("cudaGraphInstantiate", cudaGraphInstantiate(&x, g, 0));
  for (int launch = 0; launch < 2; ++launch) {
    for (int i = 0; i < n; ++i) h[i] = -1;
    expect("cudaGraphLaunch", cudaGraphLaunch(x, s));
    expect("cudaStreamSynchronize", cudaStreamSynchronize(s));
    long long sum = 0;
    for (int i = 0; i < n; ++i) sum += h[i];
    std::printf("launch %d: h[0] %d, h[%d] %d, h[%d] %d, sum %lld\n", launch, h[0], n / 2 - 1, h[n / 2 - 1], n / 2,
                h[n / 2], sum);
  }
  const int want_low = rounds * (rounds + 1) / 2 + 1000, want_high = rounds * (rounds + 1) / 2;
  check(h[0] == want_low && h[n - 1] == want_high, "the graph does what the captured work does");
  expect("cudaGraphExecDestroy", cudaGraphExecDestroy(x));
  expect("cudaGraphDestroy", cudaGraphDestroy(g));
  expect("cudaStreamDestroy", cudaStreamDestroy(s));
  expect("cudaFree", cudaFree(p));
  expect("cudaFree", cudaFree(q));
  expect("cudaFreeHost", cudaFreeHost(h));
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
