// vmcuda CUDA test program: device limits, cache and shared memory configuration, peer
// access on one GPU, and cudaDeviceReset. Prints NVIDIA's answers ("probe" lines: values
// and error names) and one line per check ("ok"/"MISMATCH"), and exits non-zero on any
// mismatch; the output is the same natively on a GPU, through vmcuda on the GPU, and
// through vmcuda on the test executor. Runs on the first device only (the GPU machine has
// one): copies between two devices are checked on the executor (tests/host-stub).
#include <cstdio>
#include <vector>

// The shared memory bank size calls are deprecated; their answers are what is probed.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// The executor knows this kernel by its mangled name (_Z7add_onePii).
__global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static int failures = 0;
static void probe(const char* what, cudaError_t e) { std::printf("probe %s = %s\n", what, cudaGetErrorName(e)); }
static void value(const char* what, long long v) { std::printf("probe   %s = %lld\n", what, v); }
static void check(const char* what, bool ok) {
  std::printf("%s %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}

static const char* limit_name(int l) {
  static const char* names[] = {"StackSize", "PrintfFifoSize", "MallocHeapSize", "DevRuntimeSyncDepth",
                                "DevRuntimePendingLaunchCount", "MaxL2FetchGranularity", "PersistingL2CacheSize"};
  return l >= 0 && l < 7 ? names[l] : "limit 7";
}

static void limits() {
  for (int l = 0; l < 8; ++l) {
    size_t v = 12345;
    char what[96];
    std::snprintf(what, sizeof what, "DeviceGetLimit(%s)", limit_name(l));
    probe(what, cudaDeviceGetLimit(&v, static_cast<cudaLimit>(l)));
    value("value", static_cast<long long>(v));
  }
  probe("GetLastError", cudaGetLastError());
  probe("DeviceGetLimit(NULL, StackSize)", cudaDeviceGetLimit(nullptr, cudaLimitStackSize));
  probe("GetLastError", cudaGetLastError());
  const std::pair<cudaLimit, size_t> sets[] = {{cudaLimitStackSize, 2048},
                                               {cudaLimitPrintfFifoSize, 2 << 20},
                                               {cudaLimitMallocHeapSize, 16 << 20},
                                               {cudaLimitMaxL2FetchGranularity, 32},
                                               {cudaLimitDevRuntimePendingLaunchCount, 4096}};
  for (auto [l, want] : sets) {
    char what[96];
    std::snprintf(what, sizeof what, "DeviceSetLimit(%s, %zu)", limit_name(l), want);
    const cudaError_t e = cudaDeviceSetLimit(l, want);
    probe(what, e);
    size_t v = 0;
    cudaDeviceGetLimit(&v, l);
    value("now", static_cast<long long>(v));
    std::snprintf(what, sizeof what, "limit %s set and read back", limit_name(l));
    check(what, e == cudaSuccess && v >= want);
  }
  probe("DeviceSetLimit(DevRuntimeSyncDepth, 4)", cudaDeviceSetLimit(cudaLimitDevRuntimeSyncDepth, 4));
  probe("DeviceSetLimit(limit 7, 1)", cudaDeviceSetLimit(static_cast<cudaLimit>(7), 1));
  probe("GetLastError", cudaGetLastError());
}

static void cache_config() {
  cudaFuncCache c = cudaFuncCachePreferEqual;
  probe("DeviceGetCacheConfig", cudaDeviceGetCacheConfig(&c));
  value("config", c);
  probe("DeviceSetCacheConfig(PreferShared)", cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
  probe("DeviceGetCacheConfig", cudaDeviceGetCacheConfig(&c));
  value("config", c);
  probe("DeviceSetCacheConfig(7)", cudaDeviceSetCacheConfig(static_cast<cudaFuncCache>(7)));
  probe("GetLastError", cudaGetLastError());
  probe("DeviceGetCacheConfig(NULL)", cudaDeviceGetCacheConfig(nullptr));
  probe("FuncSetCacheConfig(add_one, PreferL1)", cudaFuncSetCacheConfig(add_one, cudaFuncCachePreferL1));
  static int not_a_kernel;
  probe("FuncSetCacheConfig(host pointer)", cudaFuncSetCacheConfig(&not_a_kernel, cudaFuncCachePreferL1));
  probe("FuncSetCacheConfig(add_one, 7)", cudaFuncSetCacheConfig(add_one, static_cast<cudaFuncCache>(7)));
  probe("GetLastError", cudaGetLastError());
  probe("DeviceSetCacheConfig(PreferNone)", cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));

  cudaSharedMemConfig s = cudaSharedMemBankSizeDefault;
  probe("DeviceGetSharedMemConfig", cudaDeviceGetSharedMemConfig(&s));
  value("config", s);
  probe("DeviceSetSharedMemConfig(EightByte)", cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte));
  probe("DeviceGetSharedMemConfig", cudaDeviceGetSharedMemConfig(&s));
  value("config", s);
  probe("DeviceSetSharedMemConfig(3)", cudaDeviceSetSharedMemConfig(static_cast<cudaSharedMemConfig>(3)));
  probe("FuncSetSharedMemConfig(add_one, FourByte)",
        cudaFuncSetSharedMemConfig(add_one, cudaSharedMemBankSizeFourByte));
  probe("GetLastError", cudaGetLastError());
}

static void peer() {
  int can = 7;
  probe("DeviceCanAccessPeer(0, 0)", cudaDeviceCanAccessPeer(&can, 0, 0));
  value("can", can);
  probe("DeviceCanAccessPeer(0, 1)", cudaDeviceCanAccessPeer(&can, 0, 1));
  probe("DeviceCanAccessPeer(NULL)", cudaDeviceCanAccessPeer(nullptr, 0, 0));
  probe("DeviceEnablePeerAccess(0, 0)", cudaDeviceEnablePeerAccess(0, 0));
  probe("DeviceEnablePeerAccess(0, 1)", cudaDeviceEnablePeerAccess(0, 1));
  probe("DeviceEnablePeerAccess(1, 0)", cudaDeviceEnablePeerAccess(1, 0));
  probe("DeviceDisablePeerAccess(0)", cudaDeviceDisablePeerAccess(0));
  probe("DeviceDisablePeerAccess(1)", cudaDeviceDisablePeerAccess(1));
  probe("GetLastError", cudaGetLastError());
  int v = 7;
  probe("DeviceGetP2PAttribute(AccessSupported, 0, 0)",
        cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 0));
  probe("GetLastError", cudaGetLastError());

  // cudaMemcpyPeer on one device (allowed), synchronous and on a stream.
  const int n = 4096;
  std::vector<int> in(n), out(n, -1);
  for (int i = 0; i < n; ++i) in[i] = i * 7 + 1;
  int *a = nullptr, *b = nullptr;
  cudaMalloc(&a, n * sizeof(int));
  cudaMalloc(&b, n * sizeof(int));
  cudaMemcpy(a, in.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(b, 0, n * sizeof(int));
  probe("MemcpyPeer(b, 0, a, 0)", cudaMemcpyPeer(b, 0, a, 0, n * sizeof(int)));
  cudaMemcpy(out.data(), b, n * sizeof(int), cudaMemcpyDeviceToHost);
  check("MemcpyPeer same device", out == in);
  cudaStream_t s;
  cudaStreamCreate(&s);
  add_one<<<(n + 255) / 256, 256, 0, s>>>(b, n);
  probe("MemcpyPeerAsync(a, 0, b, 0, s)", cudaMemcpyPeerAsync(a, 0, b, 0, n * sizeof(int), s));
  cudaStreamSynchronize(s);
  cudaMemcpy(out.data(), a, n * sizeof(int), cudaMemcpyDeviceToHost);
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && out[i] == in[i] + 1;
  check("MemcpyPeerAsync after a kernel on the stream", ok);
  probe("MemcpyPeer(b, 1, a, 0)", cudaMemcpyPeer(b, 1, a, 0, n * sizeof(int)));
  probe("MemcpyPeer(b, 0, a, 0, 0 bytes)", cudaMemcpyPeer(b, 0, a, 0, 0));
  probe("GetLastError", cudaGetLastError());
  probe("DeviceSynchronize", cudaDeviceSynchronize());
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
}

static void reset() {
  int* p = nullptr;
  cudaMalloc(&p, 1 << 20);
  cudaMemset(p, 0, 1 << 20);
  cudaDeviceSetLimit(cudaLimitStackSize, 4096);
  probe("DeviceReset", cudaDeviceReset());
  size_t v = 0;
  probe("DeviceGetLimit(StackSize) after reset", cudaDeviceGetLimit(&v, cudaLimitStackSize));
  value("value", static_cast<long long>(v));
  probe("Free(old pointer)", cudaFree(p));
  probe("GetLastError", cudaGetLastError());
  // The device works on: a fresh allocation, a copy and a kernel.
  const int n = 1000;
  std::vector<int> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = 3 * i;
  int* q = nullptr;
  probe("Malloc after reset", cudaMalloc(&q, n * sizeof(int)));
  cudaMemcpy(q, in.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  add_one<<<(n + 127) / 128, 128>>>(q, n);
  probe("launch after reset", cudaGetLastError());
  probe("Memcpy back", cudaMemcpy(out.data(), q, n * sizeof(int), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && out[i] == in[i] + 1;
  check("kernel and copies after reset", ok);
  probe("Free(new pointer)", cudaFree(q));
  probe("DeviceReset again", cudaDeviceReset());
}

int main() {
  int count = 0;
  probe("GetDeviceCount", cudaGetDeviceCount(&count));
  if (count < 1) return 1;
  limits();
  cache_config();
  peer();
  reset();
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
