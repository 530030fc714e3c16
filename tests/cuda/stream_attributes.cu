// vmcuda CUDA test program: stream attributes (cudaStreamSetAttribute, cudaStreamGetAttribute,
// cudaStreamCopyAttributes and the driver's cuStream*Attribute* reached through
// cudaGetDriverEntryPointByVersion), as an application that tunes L2 persistence uses them.
// Prints NVIDIA's answers ("probe" lines: error codes and values read back) and one line per
// check, and exits non-zero on any failure; the output is the same natively on a GPU,
// through vmcuda on the GPU, and through vmcuda on the test executor.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

// The executor knows this kernel by its mangled name (_Z7add_onePii).
__global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static int failures = 0;
static void probe(const char* what, int value) { std::printf("probe %s = %d\n", what, value); }
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) ++failures;
}

static const int* g_buf = nullptr;

static void print_value(const char* stream, cudaStreamAttrID id, const cudaStreamAttrValue& v) {
  switch (id) {
    case cudaStreamAttributeAccessPolicyWindow: {
      const auto& w = v.accessPolicyWindow;
      const char* base = w.base_ptr == nullptr ? "null" : w.base_ptr == g_buf ? "buf" : "other";
      std::printf("  %s window: base %s, bytes %zu, hitRatio %.3f, hitProp %d, missProp %d\n", stream, base,
                  w.num_bytes, w.hitRatio, int(w.hitProp), int(w.missProp));
      break;
    }
    case cudaStreamAttributeSynchronizationPolicy: std::printf("  %s syncPolicy %d\n", stream, int(v.syncPolicy)); break;
    case cudaStreamAttributePriority: std::printf("  %s priority %d\n", stream, v.priority); break;
    case cudaStreamAttributeMemSyncDomainMap:
      std::printf("  %s memSyncDomainMap default %d remote %d\n", stream, v.memSyncDomainMap.default_,
                  v.memSyncDomainMap.remote);
      break;
    case cudaStreamAttributeMemSyncDomain: std::printf("  %s memSyncDomain %d\n", stream, int(v.memSyncDomain)); break;
    default: break;
  }
}

static const cudaStreamAttrID kIds[] = {cudaStreamAttributeAccessPolicyWindow, cudaStreamAttributeSynchronizationPolicy,
                                        cudaStreamAttributePriority, cudaStreamAttributeMemSyncDomainMap,
                                        cudaStreamAttributeMemSyncDomain};

static void show_all(const char* name, cudaStream_t s) {
  for (cudaStreamAttrID id : kIds) {
    cudaStreamAttrValue v;
    std::memset(&v, 0x5a, sizeof v);
    char what[96];
    std::snprintf(what, sizeof what, "GetAttribute(%s, %d)", name, int(id));
    const cudaError_t e = cudaStreamGetAttribute(s, id, &v);
    probe(what, e);
    if (e == cudaSuccess) print_value(name, id, v);
  }
}

static cudaError_t set_window(cudaStream_t s, const void* base, size_t bytes, float ratio, cudaAccessProperty hit,
                              cudaAccessProperty miss) {
  cudaStreamAttrValue v;
  std::memset(&v, 0, sizeof v);
  v.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  v.accessPolicyWindow.num_bytes = bytes;
  v.accessPolicyWindow.hitRatio = ratio;
  v.accessPolicyWindow.hitProp = hit;
  v.accessPolicyWindow.missProp = miss;
  return cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a crash: the native run shows where
  int max_window = 0, domains = 0, least = 0, greatest = 0;
  cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, 0);
  cudaDeviceGetAttribute(&domains, cudaDevAttrMemSyncDomainCount, 0);
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  check("device has an access policy window", max_window > 0);
  probe("MemSyncDomainCount", domains);
  probe("priority least", least);
  probe("priority greatest", greatest);

  const int n = 1 << 20;
  int* buf = nullptr;
  check("cudaMalloc", cudaMalloc(&buf, n * sizeof(int)) == cudaSuccess);
  g_buf = buf;
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[i] = i % 1000;
  cudaMemcpy(buf, host.data(), n * sizeof(int), cudaMemcpyHostToDevice);

  cudaStream_t s1, s2;
  cudaStreamCreate(&s1);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);

  std::printf("-- defaults\n");
  show_all("s1", s1);
  show_all("null", 0);

  std::printf("-- set on s1\n");
  const size_t window = size_t(n) * sizeof(int) < size_t(max_window) ? size_t(n) * sizeof(int) : size_t(max_window);
  probe("SetAttribute(window)", set_window(s1, buf, window, 0.6f, cudaAccessPropertyPersisting,
                                           cudaAccessPropertyStreaming));
  cudaStreamAttrValue v;
  std::memset(&v, 0, sizeof v);
  v.syncPolicy = cudaSyncPolicyBlockingSync;
  probe("SetAttribute(syncPolicy BlockingSync)", cudaStreamSetAttribute(s1, cudaStreamAttributeSynchronizationPolicy, &v));
  std::memset(&v, 0, sizeof v);
  v.priority = greatest;
  probe("SetAttribute(priority greatest)", cudaStreamSetAttribute(s1, cudaStreamAttributePriority, &v));
  std::memset(&v, 0, sizeof v);
  v.memSyncDomainMap.default_ = 1;
  v.memSyncDomainMap.remote = 0;
  probe("SetAttribute(memSyncDomainMap 1,0)", cudaStreamSetAttribute(s1, cudaStreamAttributeMemSyncDomainMap, &v));
  std::memset(&v, 0, sizeof v);
  v.memSyncDomain = cudaLaunchMemSyncDomainRemote;
  probe("SetAttribute(memSyncDomain Remote)", cudaStreamSetAttribute(s1, cudaStreamAttributeMemSyncDomain, &v));
  probe("GetLastError", cudaGetLastError());
  show_all("s1", s1);
  int prio = 99;
  probe("StreamGetPriority(s1)", cudaStreamGetPriority(s1, &prio));
  probe("  priority", prio);

  // Work on the stream with the window runs as ever.
  add_one<<<(n + 255) / 256, 256, 0, s1>>>(buf, n);
  add_one<<<(n + 255) / 256, 256, 0, s1>>>(buf, n);
  probe("StreamSynchronize(s1)", cudaStreamSynchronize(s1));
  std::vector<int> back(n);
  cudaMemcpy(back.data(), buf, n * sizeof(int), cudaMemcpyDeviceToHost);
  bool same = true;
  for (int i = 0; i < n; ++i) same &= back[i] == host[i] + 2;
  check("kernels on a stream with an access policy window", same);

  std::printf("-- copy s1 -> s2\n");
  probe("StreamCopyAttributes(s2, s1)", cudaStreamCopyAttributes(s2, s1));
  show_all("s2", s2);
  // The window reset on s1 (0 bytes) leaves s2's copy as it was.
  probe("SetAttribute(s1 window 0 bytes)", set_window(s1, nullptr, 0, 0.0f, cudaAccessPropertyNormal,
                                                       cudaAccessPropertyNormal));
  std::memset(&v, 0x5a, sizeof v);
  probe("GetAttribute(s1 window)", cudaStreamGetAttribute(s1, cudaStreamAttributeAccessPolicyWindow, &v));
  print_value("s1", cudaStreamAttributeAccessPolicyWindow, v);
  std::memset(&v, 0x5a, sizeof v);
  probe("GetAttribute(s2 window)", cudaStreamGetAttribute(s2, cudaStreamAttributeAccessPolicyWindow, &v));
  print_value("s2", cudaStreamAttributeAccessPolicyWindow, v);

  std::printf("-- bad values (s2 keeps what it had)\n");
  probe("window hitRatio 1.5", set_window(s2, buf, 4096, 1.5f, cudaAccessPropertyPersisting, cudaAccessPropertyNormal));
  probe("window hitRatio -0.5", set_window(s2, buf, 4096, -0.5f, cudaAccessPropertyPersisting, cudaAccessPropertyNormal));
  probe("window hitProp 7", set_window(s2, buf, 4096, 0.5f, cudaAccessProperty(7), cudaAccessPropertyNormal));
  probe("window missProp Persisting",
        set_window(s2, buf, 4096, 0.5f, cudaAccessPropertyPersisting, cudaAccessPropertyPersisting));
  probe("window bytes max+1",
        set_window(s2, buf, size_t(max_window) + 1, 0.5f, cudaAccessPropertyPersisting, cudaAccessPropertyNormal));
  probe("GetLastError", cudaGetLastError());
  std::memset(&v, 0, sizeof v);
  v.syncPolicy = cudaSynchronizationPolicy(0);
  probe("syncPolicy 0", cudaStreamSetAttribute(s2, cudaStreamAttributeSynchronizationPolicy, &v));
  v.syncPolicy = cudaSynchronizationPolicy(5);
  probe("syncPolicy 5", cudaStreamSetAttribute(s2, cudaStreamAttributeSynchronizationPolicy, &v));
  std::memset(&v, 0, sizeof v);
  v.memSyncDomain = cudaLaunchMemSyncDomain(2);
  probe("memSyncDomain 2", cudaStreamSetAttribute(s2, cudaStreamAttributeMemSyncDomain, &v));
  std::memset(&v, 0, sizeof v);
  v.memSyncDomainMap.remote = (unsigned char)domains;
  probe("memSyncDomainMap remote = count", cudaStreamSetAttribute(s2, cudaStreamAttributeMemSyncDomainMap, &v));
  std::memset(&v, 0, sizeof v);
  probe("SetAttribute(Cooperative)", cudaStreamSetAttribute(s2, cudaLaunchAttributeCooperative, &v));
  probe("GetAttribute(ClusterDimension)", cudaStreamGetAttribute(s2, cudaLaunchAttributeClusterDimension, &v));
  probe("GetAttribute(99)", cudaStreamGetAttribute(s2, cudaStreamAttrID(99), &v));
  // (A NULL value is not probed: NVIDIA's runtime 13.0 dereferences it; the process dies.)
  probe("GetLastError", cudaGetLastError());
  show_all("s2", s2);

  std::printf("-- special streams\n");
  std::memset(&v, 0, sizeof v);
  v.syncPolicy = cudaSyncPolicyYield;
  probe("SetAttribute(PerThread, syncPolicy Yield)",
        cudaStreamSetAttribute(cudaStreamPerThread, cudaStreamAttributeSynchronizationPolicy, &v));
  std::memset(&v, 0x5a, sizeof v);
  probe("GetAttribute(PerThread, syncPolicy)",
        cudaStreamGetAttribute(cudaStreamPerThread, cudaStreamAttributeSynchronizationPolicy, &v));
  print_value("perthread", cudaStreamAttributeSynchronizationPolicy, v);
  probe("StreamCopyAttributes(s1, PerThread)", cudaStreamCopyAttributes(s1, cudaStreamPerThread));
  std::memset(&v, 0x5a, sizeof v);
  probe("GetAttribute(s1, syncPolicy)", cudaStreamGetAttribute(s1, cudaStreamAttributeSynchronizationPolicy, &v));
  print_value("s1", cudaStreamAttributeSynchronizationPolicy, v);
  // The NULL stream (0 and cudaStreamLegacy are one stream): what is set on it stays, also
  // across a suspend (read again at the end).
  std::memset(&v, 0, sizeof v);
  v.syncPolicy = cudaSyncPolicySpin;
  probe("SetAttribute(0, syncPolicy Spin)", cudaStreamSetAttribute(0, cudaStreamAttributeSynchronizationPolicy, &v));
  std::memset(&v, 0x5a, sizeof v);
  probe("GetAttribute(Legacy, syncPolicy)",
        cudaStreamGetAttribute(cudaStreamLegacy, cudaStreamAttributeSynchronizationPolicy, &v));
  print_value("legacy", cudaStreamAttributeSynchronizationPolicy, v);

  std::printf("-- driver API\n");
  using SetFn = CUresult (*)(CUstream, CUstreamAttrID, const CUstreamAttrValue*);
  using GetFn = CUresult (*)(CUstream, CUstreamAttrID, CUstreamAttrValue*);
  using CopyFn = CUresult (*)(CUstream, CUstream);
  void* set_p = nullptr;
  void* get_p = nullptr;
  void* copy_p = nullptr;
  cudaDriverEntryPointQueryResult q;
  probe("entry cuStreamSetAttribute",
        cudaGetDriverEntryPointByVersion("cuStreamSetAttribute", &set_p, 12000, cudaEnableDefault, &q));
  probe("entry cuStreamGetAttribute",
        cudaGetDriverEntryPointByVersion("cuStreamGetAttribute", &get_p, 12000, cudaEnableDefault, &q));
  probe("entry cuStreamCopyAttributes",
        cudaGetDriverEntryPointByVersion("cuStreamCopyAttributes", &copy_p, 12000, cudaEnableDefault, &q));
  if (set_p && get_p && copy_p) {
    CUstreamAttrValue cv;
    std::memset(&cv, 0, sizeof cv);
    cv.syncPolicy = CU_SYNC_POLICY_SPIN;
    probe("cuStreamSetAttribute(s2, syncPolicy Spin)",
          reinterpret_cast<SetFn>(set_p)((CUstream)s2, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &cv));
    std::memset(&cv, 0, sizeof cv);
    probe("cuStreamGetAttribute(s2, syncPolicy)",
          reinterpret_cast<GetFn>(get_p)((CUstream)s2, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &cv));
    probe("  syncPolicy", int(cv.syncPolicy));
    cv.accessPolicyWindow.hitRatio = 3.0f;
    probe("cuStreamSetAttribute(s2, window hitRatio 3)",
          reinterpret_cast<SetFn>(set_p)((CUstream)s2, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &cv));
    probe("cuStreamCopyAttributes(s1, s2)", reinterpret_cast<CopyFn>(copy_p)((CUstream)s1, (CUstream)s2));
    std::memset(&cv, 0, sizeof cv);
    probe("cuStreamGetAttribute(s1, syncPolicy)",
          reinterpret_cast<GetFn>(get_p)((CUstream)s1, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &cv));
    probe("  syncPolicy", int(cv.syncPolicy));
  }

  std::memset(&v, 0x5a, sizeof v);
  probe("GetAttribute(0, syncPolicy)", cudaStreamGetAttribute(0, cudaStreamAttributeSynchronizationPolicy, &v));
  print_value("NULL", cudaStreamAttributeSynchronizationPolicy, v);

  probe("StreamDestroy(s1)", cudaStreamDestroy(s1));
  probe("StreamDestroy(s2)", cudaStreamDestroy(s2));
  probe("Free", cudaFree(buf));
  probe("DeviceSynchronize", cudaDeviceSynchronize());
  std::printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
