// vmcuda CUDA test program: stream capture into an existing graph (cudaStreamBeginCaptureToGraph,
// after one of its nodes) and cudaGraphInstantiateWithParams with an upload, as an application
// uses them; no kernels (memset, copy and host function nodes), so the output is the same
// natively, through vmcuda on the GPU and through vmcuda on the test executor.
#include <cstdio>
#include <cstring>

static int failures = 0;
static void expect(const char* what, cudaError_t got, cudaError_t want) {
  cudaError_t last = cudaGetLastError();
  std::printf("%s: %s (last error %s): %s\n", what, cudaGetErrorName(got), cudaGetErrorName(last),
              got == want ? "ok" : "MISMATCH");
  if (got != want) ++failures;
}
static void check(bool ok, const char* what) {
  std::printf("%s: %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}

static int g_runs = 0;
static void note(void* p) { ++*static_cast<int*>(p); }

int main() {
  const size_t bytes = 1 << 16;
  unsigned char* d = nullptr;
  unsigned char* h = nullptr;
  expect("cudaMalloc", cudaMalloc(&d, bytes), cudaSuccess);
  expect("cudaMallocHost", cudaMallocHost(&h, bytes), cudaSuccess);
  std::memset(h, 0xee, bytes);
  cudaStream_t s;
  expect("cudaStreamCreate", cudaStreamCreate(&s), cudaSuccess);

  std::printf("-- capture into an existing graph\n");
  cudaGraph_t g;
  expect("cudaGraphCreate", cudaGraphCreate(&g, 0), cudaSuccess);
  cudaMemsetParams m{};
  m.dst = d;
  m.value = 1;
  m.elementSize = 1;
  m.width = bytes;
  m.height = 1;
  cudaGraphNode_t first;
  expect("cudaGraphAddMemsetNode", cudaGraphAddMemsetNode(&first, g, nullptr, 0, &m), cudaSuccess);
  expect("cudaStreamBeginCaptureToGraph(after the memset node)",
         cudaStreamBeginCaptureToGraph(s, g, &first, nullptr, 1, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  expect("cudaStreamIsCapturing", cudaStreamIsCapturing(s, &st), cudaSuccess);
  check(st == cudaStreamCaptureStatusActive, "the stream is capturing");
  expect("cudaMemsetAsync (captured)", cudaMemsetAsync(d + bytes / 2, 7, bytes / 2, s), cudaSuccess);
  expect("cudaMemcpyAsync to pinned (captured)", cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
  expect("cudaLaunchHostFunc (captured)", cudaLaunchHostFunc(s, note, &g_runs), cudaSuccess);
  cudaGraph_t out = nullptr;
  expect("cudaStreamEndCapture", cudaStreamEndCapture(s, &out), cudaSuccess);
  check(out == g, "the capture ends in the same graph");
  size_t n = 0, roots = 0;
  expect("cudaGraphGetNodes", cudaGraphGetNodes(g, nullptr, &n), cudaSuccess);
  expect("cudaGraphGetRootNodes", cudaGraphGetRootNodes(g, nullptr, &roots), cudaSuccess);
  std::printf("nodes %zu, roots %zu\n", n, roots);
  check(g_runs == 0 && h[0] == 0xee, "nothing ran while capturing");

  std::printf("-- instantiate with parameters\n");
  cudaGraphInstantiateParams ip{};
  ip.flags = cudaGraphInstantiateFlagUpload;
  ip.uploadStream = s;
  ip.errNode_out = first;
  ip.result_out = cudaGraphInstantiateError;
  cudaGraphExec_t exec = nullptr;
  expect("cudaGraphInstantiateWithParams(Upload)", cudaGraphInstantiateWithParams(&exec, g, &ip), cudaSuccess);
  check(ip.result_out == cudaGraphInstantiateSuccess, "result_out is cudaGraphInstantiateSuccess");
  check(ip.errNode_out == nullptr, "errNode_out is NULL");
  for (int i = 0; i < 3; ++i) expect("cudaGraphLaunch", cudaGraphLaunch(exec, s), cudaSuccess);
  expect("cudaStreamSynchronize", cudaStreamSynchronize(s), cudaSuccess);
  bool right = true;
  for (size_t i = 0; i < bytes; ++i) right = right && h[i] == (i < bytes / 2 ? 1 : 7);
  check(right, "the memset node, then the captured memset and copy");
  std::printf("host function runs: %d\n", g_runs);
  ip = cudaGraphInstantiateParams{};
  cudaGraphExec_t plain = nullptr;
  expect("cudaGraphInstantiateWithParams(no flags)", cudaGraphInstantiateWithParams(&plain, g, &ip), cudaSuccess);
  check(ip.result_out == cudaGraphInstantiateSuccess, "result_out is cudaGraphInstantiateSuccess");
  expect("cudaGraphExecDestroy", cudaGraphExecDestroy(plain), cudaSuccess);

  std::printf("-- errors\n");
  cudaGraph_t other;
  expect("cudaGraphCreate(other)", cudaGraphCreate(&other, 0), cudaSuccess);
  expect("cudaStreamBeginCaptureToGraph(a node of another graph)",
         cudaStreamBeginCaptureToGraph(s, other, &first, nullptr, 1, cudaStreamCaptureModeGlobal),
         cudaErrorInvalidValue);
  expect("cudaStreamIsCapturing", cudaStreamIsCapturing(s, &st), cudaSuccess);
  check(st == cudaStreamCaptureStatusNone, "the stream is not capturing");
  expect("cudaGraphInstantiateWithParams(NULL parameters)", cudaGraphInstantiateWithParams(&plain, g, nullptr),
         cudaErrorInvalidValue);

  std::printf("-- capture into an empty graph\n");
  expect("cudaStreamBeginCaptureToGraph(no dependencies)",
         cudaStreamBeginCaptureToGraph(s, other, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed), cudaSuccess);
  expect("cudaLaunchHostFunc (captured)", cudaLaunchHostFunc(s, note, &g_runs), cudaSuccess);
  expect("cudaStreamEndCapture", cudaStreamEndCapture(s, &out), cudaSuccess);
  check(out == other, "the capture ends in that graph");
  expect("cudaGraphGetNodes", cudaGraphGetNodes(other, nullptr, &n), cudaSuccess);
  std::printf("nodes %zu\n", n);

  expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec), cudaSuccess);
  expect("cudaGraphDestroy", cudaGraphDestroy(g), cudaSuccess);
  expect("cudaGraphDestroy(other)", cudaGraphDestroy(other), cudaSuccess);
  expect("cudaStreamDestroy", cudaStreamDestroy(s), cudaSuccess);
  expect("cudaFreeHost", cudaFreeHost(h), cudaSuccess);
  expect("cudaFree", cudaFree(d), cudaSuccess);
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
