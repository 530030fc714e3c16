// vmcuda CUDA test program: host functions (cudaLaunchHostFunc, cudaStreamAddCallback) as an
// ordinary application uses them (nvcc -cudart shared): in stream order between kernels and
// copies, on several streams, with the callback's status, running without any further CUDA
// call, and a process that exits with one still pending. Prints NVIDIA's answers at the edges
// ("probe" lines) and one line per check; exits non-zero on any failure. The output is the
// same natively on a GPU and through vmcuda (the functions run in the application's process,
// vmcuda's on its own callback thread).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

// p[i] = p[i] * mul + add for i < n (tests/executor/fake_kernels.cc has its CPU twin).
__global__ void scale_add(int* p, int mul, int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * mul + add;
}

static int failures = 0;
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}
static void probe(const char* what, cudaError_t e) { std::printf("probe %s = %s\n", what, cudaGetErrorName(e)); }

static void nop(void*) {}
static void nop_callback(cudaStream_t, cudaError_t, void*) {}

// Reads the device results copied before it, writes what the copy after it takes.
struct Between {
  const int* in;
  int* out;
  int n;
  bool saw_results;
};
static void between(void* p) {
  auto* b = static_cast<Between*>(p);
  b->saw_results = true;
  for (int i = 0; i < b->n; ++i) {
    if (b->in[i] != 2 * i + 1) b->saw_results = false;
    b->out[i] = b->in[i] + 1000;
  }
}

struct CallbackSeen {
  cudaStream_t stream;
  cudaError_t status;
  int calls;
};
static void callback(cudaStream_t s, cudaError_t status, void* p) {
  auto* c = static_cast<CallbackSeen*>(p);
  c->stream = s;
  c->status = status;
  ++c->calls;
}

// One stream's sequence of functions: each checks it runs after the previous one.
struct Seq {
  int expected;
  int ran;
  bool in_order;
};
struct SeqStep {
  Seq* seq;
  int index;
};
static void step(void* p) {
  auto* s = static_cast<SeqStep*>(p);
  if (s->seq->expected != s->index) s->seq->in_order = false;
  s->seq->expected = s->index + 1;
  ++s->seq->ran;
}

int main() {
  probe("LaunchHostFunc(NULL fn)", cudaLaunchHostFunc(0, nullptr, nullptr));
  probe("GetLastError", cudaGetLastError());
  probe("StreamAddCallback(NULL callback)", cudaStreamAddCallback(0, nullptr, nullptr, 0));
  probe("StreamAddCallback(flags 1)", cudaStreamAddCallback(0, nop_callback, nullptr, 1));
  probe("GetLastError", cudaGetLastError());
  probe("LaunchHostFunc(0)", cudaLaunchHostFunc(0, nop, nullptr));
  probe("LaunchHostFunc(Legacy)", cudaLaunchHostFunc(cudaStreamLegacy, nop, nullptr));
  probe("LaunchHostFunc(PerThread)", cudaLaunchHostFunc(cudaStreamPerThread, nop, nullptr));
  probe("DeviceSynchronize", cudaDeviceSynchronize());

  // Kernel, copy to pinned memory, host function, copy from pinned memory, kernel.
  const int n = 1000;
  int *d = nullptr, *in = nullptr, *out = nullptr;
  cudaMalloc(&d, n * sizeof(int));
  cudaMallocHost(&in, n * sizeof(int));
  cudaMallocHost(&out, n * sizeof(int));
  std::vector<int> src(n), result(n, -1);
  for (int i = 0; i < n; ++i) src[i] = i;
  cudaStream_t s;
  cudaStreamCreate(&s);
  Between b{in, out, n, false};
  cudaMemcpyAsync(d, src.data(), n * sizeof(int), cudaMemcpyHostToDevice, s);
  scale_add<<<(n + 255) / 256, 256, 0, s>>>(d, 2, 1, n);
  cudaMemcpyAsync(in, d, n * sizeof(int), cudaMemcpyDeviceToHost, s);
  cudaError_t e = cudaLaunchHostFunc(s, between, &b);
  std::printf("LaunchHostFunc between copies: %s\n", cudaGetErrorName(e));
  cudaMemcpyAsync(d, out, n * sizeof(int), cudaMemcpyHostToDevice, s);
  scale_add<<<(n + 255) / 256, 256, 0, s>>>(d, 1, -1, n);
  cudaMemcpyAsync(result.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s);
  std::printf("StreamSynchronize: %s\n", cudaGetErrorName(cudaStreamSynchronize(s)));
  check("host function saw the kernel's results", b.saw_results);
  bool after = true;
  for (int i = 0; i < n; ++i) after = after && result[i] == 2 * i + 1000;
  check("the copy after it took what it wrote", after);
  std::printf("result[0] %d result[%d] %d\n", result[0], n - 1, result[n - 1]);

  // A stream callback: the stream and the status.
  CallbackSeen seen{nullptr, cudaErrorUnknown, 0};
  scale_add<<<1, 32, 0, s>>>(d, 1, 0, 32);
  e = cudaStreamAddCallback(s, callback, &seen, 0);
  std::printf("StreamAddCallback: %s\n", cudaGetErrorName(e));
  cudaStreamSynchronize(s);
  std::printf("callback calls %d status %s\n", seen.calls, cudaGetErrorName(seen.status));
  check("callback got its stream", seen.stream == s);

  // Several streams, many functions each, interleaved with kernels.
  const int kStreams = 4, kSteps = 100;
  cudaStream_t ss[kStreams];
  Seq seqs[kStreams];
  std::vector<SeqStep> steps;
  steps.reserve(kStreams * kSteps);
  for (int k = 0; k < kStreams; ++k) {
    cudaStreamCreateWithFlags(&ss[k], cudaStreamNonBlocking);
    seqs[k] = {0, 0, true};
  }
  bool launched = true;
  for (int i = 0; i < kSteps; ++i)
    for (int k = 0; k < kStreams; ++k) {
      scale_add<<<1, 32, 0, ss[k]>>>(d + 32 * k, 1, 1, 32);
      steps.push_back({&seqs[k], i});
      launched = launched && cudaLaunchHostFunc(ss[k], step, &steps.back()) == cudaSuccess;
    }
  check("all launched", launched);
  for (int k = 0; k < kStreams; ++k) cudaStreamSynchronize(ss[k]);
  for (int k = 0; k < kStreams; ++k) {
    std::printf("stream %d: %d functions ran, in order: %s\n", k, seqs[k].ran, seqs[k].in_order ? "yes" : "no");
    if (seqs[k].ran != kSteps || !seqs[k].in_order) ++failures;
  }

  // A host function runs when its stream reaches it, even when the application makes no
  // further CUDA call (it waits here for the function's effect without any).
  static std::atomic<int> flag{0};
  cudaLaunchHostFunc(s, [](void*) { flag.store(1); }, nullptr);
  for (int i = 0; i < 10000 && flag.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  check("ran without any further CUDA call", flag.load() == 1);
  std::printf("GetLastError: %s\n", cudaGetErrorName(cudaGetLastError()));

  // Exits with a host function still queued behind work (not synchronized): the process
  // must still end.
  for (int i = 0; i < 20; ++i) scale_add<<<(n + 255) / 256, 256, 0, s>>>(d, 1, 1, n);
  cudaLaunchHostFunc(s, nop, nullptr);
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
