// __managed__ variables: the host code reads and writes them directly (nvcc wraps each
// access in __cudaInitModule), kernels change them, and every CUDA sync point makes the
// two agree: device, stream and event synchronization, a stream query, a synchronous copy,
// symbol copies. Two launches without a sync in between both count; graph launches (explicit
// and captured) synchronize them as kernel launches do. Deterministic output:
// each check prints its value and ok/MISMATCH.
#include <cstdio>

#include <cuda_runtime.h>

__managed__ int m_counter = 7;
__managed__ float m_values[8] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f};

// Every thread adds `by` to the counter.
__global__ void managed_bump(int by) { atomicAdd(&m_counter, by); }

// values[i] = values[i] * f + counter, for i < n.
__global__ void managed_scale(float f, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) m_values[i] = m_values[i] * f + static_cast<float>(m_counter);
}

static int failures = 0;

static void check(const char* what, long long got, long long want) {
  printf("%s: %lld %s\n", what, got, got == want ? "ok" : "MISMATCH");
  failures += got != want;
}
static void checkf(const char* what, float got, float want) {
  printf("%s: %.2f %s\n", what, got, got == want ? "ok" : "MISMATCH");
  failures += got != want;
}
static void status(const char* what, cudaError_t e) {
  printf("%s: %s\n", what, cudaGetErrorName(e));
  failures += e != cudaSuccess;
}

int main() {
  // The initial values, as the module defines them.
  check("initial counter", m_counter, 7);
  checkf("initial values[3]", m_values[3], 3.5f);

  // A host write, then two launches without a sync in between: both increments count.
  m_counter = 10;
  managed_bump<<<1, 4>>>(1);
  managed_bump<<<2, 2>>>(2);
  status("device synchronize", cudaDeviceSynchronize());
  check("counter after two launches", m_counter, 22);

  // A kernel reads what the host wrote and writes what the host reads after a stream sync.
  m_values[0] = 2.0f;
  managed_scale<<<1, 8>>>(3.0f, 8);
  status("stream synchronize", cudaStreamSynchronize(0));
  const float want[8] = {28.0f, 26.5f, 29.5f, 32.5f, 35.5f, 38.5f, 41.5f, 44.5f};
  for (int i = 0; i < 8; ++i) {
    char what[32];
    snprintf(what, sizeof what, "values[%d]", i);
    checkf(what, m_values[i], want[i]);
  }

  // A host write followed by a sync without a launch stays.
  m_counter = 50;
  status("device synchronize", cudaDeviceSynchronize());
  check("host write kept", m_counter, 50);

  // Symbols: the copies see and change what the host code sees.
  int c = 0;
  status("cudaMemcpyFromSymbol", cudaMemcpyFromSymbol(&c, m_counter, sizeof c));
  check("from symbol", c, 50);
  const int hundred = 100;
  status("cudaMemcpyToSymbol", cudaMemcpyToSymbol(m_counter, &hundred, sizeof hundred));
  check("counter after to symbol", m_counter, 100);
  void* p = nullptr;
  status("cudaGetSymbolAddress", cudaGetSymbolAddress(&p, m_counter));
  check("symbol address is the host's", p == static_cast<void*>(&m_counter), 1);
  size_t size = 0;
  status("cudaGetSymbolSize", cudaGetSymbolSize(&size, m_values));
  check("values size", static_cast<long long>(size), 32);
  const float tail[2] = {-1.0f, -2.0f};
  status("cudaMemcpyToSymbol at an offset", cudaMemcpyToSymbol(m_values, tail, sizeof tail, 6 * sizeof(float)));
  checkf("values[5]", m_values[5], 38.5f);
  checkf("values[6]", m_values[6], -1.0f);
  checkf("values[7]", m_values[7], -2.0f);

  // A stream and an event.
  cudaStream_t s;
  cudaEvent_t ev;
  status("stream create", cudaStreamCreate(&s));
  status("event create", cudaEventCreate(&ev));
  managed_bump<<<1, 5, 0, s>>>(1);
  status("event record", cudaEventRecord(ev, s));
  status("event synchronize", cudaEventSynchronize(ev));
  check("counter after event synchronize", m_counter, 105);

  // An asynchronous symbol copy, ordered before a launch on the same stream.
  const int one = 1;
  status("cudaMemcpyToSymbolAsync", cudaMemcpyToSymbolAsync(m_counter, &one, sizeof one, 0, cudaMemcpyHostToDevice, s));
  managed_bump<<<1, 3, 0, s>>>(1);
  status("stream synchronize", cudaStreamSynchronize(s));
  check("counter after async copy and launch", m_counter, 4);

  // A query that finds the work done.
  managed_bump<<<1, 1, 0, s>>>(10);
  cudaError_t q;
  while ((q = cudaStreamQuery(s)) == cudaErrorNotReady) {
  }
  status("stream query", q);
  check("counter after stream query", m_counter, 14);

  // A synchronous copy to the host waits for the launch before it.
  int* d = nullptr;
  status("cudaMalloc", cudaMalloc(&d, sizeof(int)));
  status("cudaMemset", cudaMemset(d, 0, sizeof(int)));
  managed_bump<<<1, 2>>>(3);
  int x = -1;
  status("cudaMemcpy to host", cudaMemcpy(&x, d, sizeof x, cudaMemcpyDeviceToHost));
  check("counter after a synchronous copy", m_counter, 20);

  // Graphs: a launch of an instantiated graph synchronizes the variables as a kernel launch
  // does (the host's writes reach its kernels, theirs reach the host at the next sync).
  cudaGraph_t g;
  status("graph create", cudaGraphCreate(&g, 0));
  int by = 1;
  void* args[] = {&by};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(managed_bump);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(4);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  status("graph kernel node", cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp));
  cudaGraphExec_t gx;
  status("graph instantiate", cudaGraphInstantiate(&gx, g, 0));
  m_counter = 30;
  status("graph launch", cudaGraphLaunch(gx, s));
  status("stream synchronize", cudaStreamSynchronize(s));
  check("counter after a graph launch", m_counter, 34);
  m_counter = 100;
  status("graph launch", cudaGraphLaunch(gx, s));
  status("graph launch", cudaGraphLaunch(gx, s));
  status("device synchronize", cudaDeviceSynchronize());
  check("counter after two graph launches", m_counter, 108);

  // A captured graph: a host write made before the capture is not replayed by its launches.
  m_counter = 1;
  cudaGraph_t cg;
  status("begin capture", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  managed_bump<<<1, 2, 0, s>>>(5);
  managed_scale<<<1, 8, 0, s>>>(1.0f, 2);
  status("end capture", cudaStreamEndCapture(s, &cg));
  cudaGraphExec_t cgx;
  status("captured graph instantiate", cudaGraphInstantiate(&cgx, cg, 0));
  status("stream synchronize", cudaStreamSynchronize(s));
  check("counter after the capture", m_counter, 1);
  m_counter = 40;
  m_values[0] = 0.0f;
  m_values[1] = 1.0f;
  status("captured graph launch", cudaGraphLaunch(cgx, s));
  status("captured graph launch", cudaGraphLaunch(cgx, s));
  status("stream synchronize", cudaStreamSynchronize(s));
  check("counter after two captured graph launches", m_counter, 60);
  checkf("values[0] after them", m_values[0], 110.0f);  // 0 + 50, + 60
  checkf("values[1] after them", m_values[1], 111.0f);  // 1 + 50, + 60
  status("graph exec destroy", cudaGraphExecDestroy(gx));
  status("graph exec destroy", cudaGraphExecDestroy(cgx));
  status("graph destroy", cudaGraphDestroy(g));
  status("graph destroy", cudaGraphDestroy(cg));

  status("cudaFree", cudaFree(d));
  status("event destroy", cudaEventDestroy(ev));
  status("stream destroy", cudaStreamDestroy(s));
  printf("%s\n", failures ? "FAILED" : "all ok");
  return failures ? 1 : 0;
}
