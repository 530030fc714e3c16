// Graph memory: an alloc node, kernel nodes writing it, a memcpy node out and a free node,
// launched several times; cudaMallocAsync/kernel/cudaFreeAsync captured from a stream and
// replayed; graph memory freed outside its graph (cudaFree, cudaFreeAsync) and with
// cudaGraphInstantiateFlagAutoFreeOnLaunch; the nodes' parameters; the graph memory
// attributes (only what is the same on every driver: no reserved sizes, which follow the
// driver's granularity); the documented misuse errors; the driver API's forms, reached through
// cudaGetDriverEntryPointByVersion (no -lcuda). Output is deterministic: it is
// compared with the native run's (tests/cuda/expected/graph_memory.out).
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      printf("FAIL: %s: %s (%d)\n", #call, cudaGetErrorName(e_), (int)e_);                              \
      fprintf(stderr, "FAIL: %s: %s (%d)\n", #call, cudaGetErrorName(e_), (int)e_);                     \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

constexpr int N = 4096;
constexpr size_t kBytes = N * sizeof(int);

// The same kernels as graphs.cu (the test executor knows them by name).
__global__ void g_add(int* p, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}
__global__ void g_scale(int* p, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= k;
}

static bool all_equal(const int* h, int v, const char* what) {
  for (int i = 0; i < N; ++i)
    if (h[i] != v) {
      printf("FAIL: %s[%d] = %d, expected %d\n", what, i, h[i], v);
      return false;
    }
  return true;
}

static unsigned long long attr(cudaGraphMemAttributeType a) {
  unsigned long long v = ~0ull;
  CHECK(cudaDeviceGetGraphMemAttribute(0, a, &v));
  return v;
}

static cudaMemAllocNodeParams alloc_params(size_t bytes) {
  cudaMemAllocNodeParams p{};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  return p;
}

static cudaGraphNode_t kernel_node(cudaGraph_t g, cudaGraphNode_t dep, void (*fn)(int*, int, int), int** p, int* v,
                                   int* n) {
  void* args[] = {p, v, n};
  cudaKernelNodeParams k{};
  k.func = reinterpret_cast<void*>(fn);
  k.gridDim = dim3((N + 255) / 256);
  k.blockDim = dim3(256);
  k.kernelParams = args;
  cudaGraphNode_t node;
  CHECK(cudaGraphAddKernelNode(&node, g, &dep, 1, &k));
  return node;
}

// An alloc node of kBytes with no dependencies; *d: the address CUDA gave it.
static cudaGraphNode_t alloc_node(cudaGraph_t g, int** d) {
  cudaMemAllocNodeParams ap = alloc_params(kBytes);
  cudaGraphNode_t node;
  CHECK(cudaGraphAddMemAllocNode(&node, g, nullptr, 0, &ap));
  *d = static_cast<int*>(ap.dptr);
  return node;
}

// A memset node zeroing the N ints at d, after dep.
static cudaGraphNode_t zero_node(cudaGraph_t g, cudaGraphNode_t dep, int* d) {
  cudaMemsetParams ms{};
  ms.dst = d;
  ms.value = 0;
  ms.elementSize = 4;
  ms.width = N;
  ms.height = 1;
  cudaGraphNode_t node;
  CHECK(cudaGraphAddMemsetNode(&node, g, &dep, 1, &ms));
  return node;
}

int main() {
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  int* host;
  CHECK(cudaMallocHost(&host, kBytes));
  int n = N;

  // ---- 1. alloc -> memset -> add 5 -> scale 3 -> memcpy out -> free, launched 3 times.
  {
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    int* d;
    cudaGraphNode_t alloc = alloc_node(g, &d);
    printf("alloc node: address given %s\n", d ? "yes" : "no");
    cudaGraphNode_t set = zero_node(g, alloc, d);
    int five = 5, three = 3;
    cudaGraphNode_t add = kernel_node(g, set, g_add, &d, &five, &n);
    cudaGraphNode_t scale = kernel_node(g, add, g_scale, &d, &three, &n);
    cudaGraphNode_t copy;
    CHECK(cudaGraphAddMemcpyNode1D(&copy, g, &scale, 1, host, d, kBytes, cudaMemcpyDeviceToHost));
    cudaGraphNode_t freed;
    CHECK(cudaGraphAddMemFreeNode(&freed, g, &copy, 1, d));

    cudaGraphNodeType t1, t2;
    CHECK(cudaGraphNodeGetType(alloc, &t1));
    CHECK(cudaGraphNodeGetType(freed, &t2));
    printf("node types: alloc %d, free %d\n", (int)t1, (int)t2);
    cudaMemAllocNodeParams got{};
    CHECK(cudaGraphMemAllocNodeGetParams(alloc, &got));
    printf("alloc params: bytesize %zu, same address %s, pinned %s, device %d\n", got.bytesize,
           got.dptr == d ? "yes" : "no", got.poolProps.allocType == cudaMemAllocationTypePinned ? "yes" : "no",
           got.poolProps.location.id);
    void* fp = nullptr;
    CHECK(cudaGraphMemFreeNodeGetParams(freed, &fp));
    printf("free params: same address %s\n", fp == d ? "yes" : "no");
    printf("alloc node as a free node: %s\n", cudaGetErrorName(cudaGraphMemFreeNodeGetParams(alloc, &fp)));
    cudaGetLastError();

    // Documented misuse of free nodes: twice in one graph, an address no alloc node gave.
    cudaGraphNode_t bad;
    printf("free twice in one graph: %s\n", cudaGetErrorName(cudaGraphAddMemFreeNode(&bad, g, &freed, 1, d)));
    cudaGetLastError();
    int* plain;
    CHECK(cudaMalloc(&plain, kBytes));
    printf("free node of cudaMalloc memory: %s\n", cudaGetErrorName(cudaGraphAddMemFreeNode(&bad, g, nullptr, 0, plain)));
    cudaGetLastError();
    CHECK(cudaFree(plain));
    // Freed in its own graph: never outside it.
    printf("cudaFree of memory its graph frees: %s\n", cudaGetErrorName(cudaFree(d)));
    cudaGetLastError();

    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < N; ++j) host[j] = -1;
      CHECK(cudaGraphLaunch(x, s));
      CHECK(cudaStreamSynchronize(s));
      ok = ok && all_equal(host, 15, "explicit graph");
    }
    printf("explicit graph: 3 launches %s\n", ok ? "correct" : "WRONG");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
  }

  // ---- 2. no free node: the allocation outlives the launch; freed with cudaFree, cudaFreeAsync.
  {
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    int* d;
    cudaGraphNode_t alloc = alloc_node(g, &d);
    cudaGraphNode_t set = zero_node(g, alloc, d);
    int seven = 7;
    kernel_node(g, set, g_add, &d, &seven, &n);
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    printf("cudaFree before any launch: %s\n", cudaGetErrorName(cudaFree(d)));
    cudaGetLastError();
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    printf("live: used >= bytes %s, reserved >= used %s\n",
           attr(cudaGraphMemAttrUsedMemCurrent) >= kBytes ? "yes" : "no",
           attr(cudaGraphMemAttrReservedMemCurrent) >= attr(cudaGraphMemAttrUsedMemCurrent) ? "yes" : "no");
    printf("relaunch while allocated: %s\n", cudaGetErrorName(cudaGraphLaunch(x, s)));
    cudaGetLastError();
    // Stream work after the graph reaches the allocation until it is freed.
    CHECK(cudaMemcpyAsync(host, d, kBytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    printf("read after the graph: %s\n", all_equal(host, 7, "after graph") ? "correct" : "WRONG");
    CHECK(cudaFree(d));
    printf("cudaFree twice: %s\n", cudaGetErrorName(cudaFree(d)));
    cudaGetLastError();
    CHECK(cudaGraphLaunch(x, s));  // allocated again
    CHECK(cudaMemcpyAsync(host, d, kBytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(d, s));
    CHECK(cudaStreamSynchronize(s));
    printf("relaunch after cudaFree, then cudaFreeAsync: %s\n", all_equal(host, 7, "relaunch") ? "correct" : "WRONG");
    // Live between a launch and a free, 100 times (a suspend may land anywhere in it).
    bool ok = true;
    for (int i = 0; i < 100; ++i) {
      CHECK(cudaGraphLaunch(x, s));
      CHECK(cudaStreamSynchronize(s));
      for (int j = 0; j < N; ++j) host[j] = -1;
      CHECK(cudaMemcpy(host, d, kBytes, cudaMemcpyDeviceToHost));
      ok = ok && all_equal(host, 7, "live loop");
      CHECK(i % 2 ? cudaFree(d) : cudaFreeAsync(d, s));
    }
    printf("launch, read, free: 100 times %s\n", ok ? "correct" : "WRONG");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
  }

  // ---- 3. cudaGraphInstantiateFlagAutoFreeOnLaunch; the graph destroyed while its memory is live.
  {
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    int* d;
    cudaGraphNode_t alloc = alloc_node(g, &d);
    cudaGraphNode_t set = zero_node(g, alloc, d);
    int two = 2;
    kernel_node(g, set, g_add, &d, &two, &n);
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    printf("auto-free: relaunch ok\n");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
    // Destroying the graph frees nothing live: the program frees it.
    CHECK(cudaMemcpy(host, d, kBytes, cudaMemcpyDeviceToHost));
    printf("live after its graph is gone: %s\n", all_equal(host, 2, "after destroy") ? "correct" : "WRONG");
    CHECK(cudaFree(d));
  }

  // ---- 4. captured: cudaMallocAsync, memset, kernel, copy out, cudaFreeAsync; replayed.
  {
    cudaGraph_t g;
    int* d = nullptr;
    int nine = 9;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d), kBytes, s));
    CHECK(cudaMemsetAsync(d, 0, kBytes, s));
    g_add<<<(N + 255) / 256, 256, 0, s>>>(d, nine, N);
    CHECK(cudaMemcpyAsync(host, d, kBytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(d, s));
    CHECK(cudaStreamEndCapture(s, &g));
    size_t count = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &count));
    cudaGraphNode_t root;
    size_t roots = 1;
    CHECK(cudaGraphGetRootNodes(g, &root, &roots));
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(root, &t));
    cudaMemAllocNodeParams got{};
    CHECK(cudaGraphMemAllocNodeGetParams(root, &got));
    printf("captured: %zu nodes, root type %d, bytesize %zu, same address %s\n", count, (int)t, got.bytesize,
           got.dptr == d ? "yes" : "no");
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    bool ok = true;
    for (int i = 0; i < 100; ++i) {
      for (int j = 0; j < N; ++j) host[j] = -1;
      CHECK(cudaGraphLaunch(x, s));
      CHECK(cudaStreamSynchronize(s));
      ok = ok && all_equal(host, 9, "captured graph");
    }
    printf("captured graph: 100 replays %s\n", ok ? "correct" : "WRONG");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
  }

  // ---- 5. the attributes with nothing live, after a trim.
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaDeviceGraphMemTrim(0));
  printf("after trim: used %llu\n", attr(cudaGraphMemAttrUsedMemCurrent));
  unsigned long long zero = 0, five = 5;
  CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
  CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero));
  printf("high watermark reset: used high %llu\n", attr(cudaGraphMemAttrUsedMemHigh));
  printf("set used high to 5: %s\n",
         cudaGetErrorName(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &five)));
  cudaGetLastError();
  printf("set used current: %s\n",
         cudaGetErrorName(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &zero)));
  cudaGetLastError();
  unsigned long long v;
  printf("attribute of device 99: %s\n",
         cudaGetErrorName(cudaDeviceGetGraphMemAttribute(99, cudaGraphMemAttrUsedMemCurrent, &v)));
  cudaGetLastError();
  printf("trim device 99: %s\n", cudaGetErrorName(cudaDeviceGraphMemTrim(99)));
  cudaGetLastError();

  // ---- 6. the driver API's forms.
  {
    void* fn[6] = {};
    const char* names[6] = {"cuGraphAddMemAllocNode", "cuGraphAddMemFreeNode", "cuGraphMemAllocNodeGetParams",
                            "cuGraphMemFreeNodeGetParams", "cuDeviceGetGraphMemAttribute", "cuDeviceGraphMemTrim"};
    for (int i = 0; i < 6; ++i) {
      cudaDriverEntryPointQueryResult q;
      CHECK(cudaGetDriverEntryPointByVersion(names[i], &fn[i], 12000, cudaEnableDefault, &q));
      if (q != cudaDriverEntryPointSuccess || !fn[i]) printf("FAIL: no %s\n", names[i]);
    }
    auto add_alloc = reinterpret_cast<CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                                   CUDA_MEM_ALLOC_NODE_PARAMS*)>(fn[0]);
    auto add_free = reinterpret_cast<CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUdeviceptr)>(fn[1]);
    auto alloc_params_of = reinterpret_cast<CUresult (*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS*)>(fn[2]);
    auto free_params_of = reinterpret_cast<CUresult (*)(CUgraphNode, CUdeviceptr*)>(fn[3]);
    auto get_attr = reinterpret_cast<CUresult (*)(CUdevice, CUgraphMem_attribute, void*)>(fn[4]);
    auto trim = reinterpret_cast<CUresult (*)(CUdevice)>(fn[5]);
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = kBytes;
    CUgraphNode alloc, freed;
    CUresult r1 = add_alloc(&alloc, reinterpret_cast<CUgraph>(g), nullptr, 0, &p);
    int* d = reinterpret_cast<int*>(p.dptr);
    cudaGraphNode_t set = zero_node(g, reinterpret_cast<cudaGraphNode_t>(alloc), d);
    int four = 4;
    cudaGraphNode_t add = kernel_node(g, set, g_add, &d, &four, &n);
    cudaGraphNode_t copy;
    CHECK(cudaGraphAddMemcpyNode1D(&copy, g, &add, 1, host, d, kBytes, cudaMemcpyDeviceToHost));
    CUresult r2 = add_free(&freed, reinterpret_cast<CUgraph>(g), reinterpret_cast<CUgraphNode*>(&copy), 1, p.dptr);
    CUDA_MEM_ALLOC_NODE_PARAMS got{};
    CUresult r3 = alloc_params_of(alloc, &got);
    CUdeviceptr fp = 0;
    CUresult r4 = free_params_of(freed, &fp);
    printf("driver: add alloc %d, add free %d, params %d/%d, bytesize %zu, same address %s/%s\n", (int)r1, (int)r2,
           (int)r3, (int)r4, got.bytesize, got.dptr == p.dptr ? "yes" : "no", fp == p.dptr ? "yes" : "no");
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    for (int j = 0; j < N; ++j) host[j] = -1;
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    printf("driver-built graph: %s\n", all_equal(host, 4, "driver graph") ? "correct" : "WRONG");
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
    cuuint64_t used = ~0ull;
    CUresult r5 = trim(0);
    CUresult r6 = get_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
    printf("driver: trim %d, used after trim %d %llu\n", (int)r5, (int)r6, (unsigned long long)used);
  }

  CHECK(cudaFreeHost(host));
  CHECK(cudaStreamDestroy(s));
  printf("last error: %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("done\n");
  return 0;
}
