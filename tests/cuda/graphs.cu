// CUDA graphs: a multi-stream sequence captured (events fork and join two streams, a host
// function inside), explicit construction with kernel, memset, memcpy (device and pinned
// host memory), host, empty and child graph nodes, an executable graph relaunched 100 times,
// an executable kernel node's parameters changed, cudaGraphExecUpdate (same and changed
// topology), and the capture errors a synchronize causes. Output is deterministic: it is
// compared with the native run's (tests/cuda/expected/graphs.out).
#include <cstdio>
#include <cstdlib>
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

constexpr int N = 1024;

__global__ void g_add(int* p, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}
__global__ void g_scale(int* p, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= k;
}
__global__ void g_sum2(const int* a, const int* b, int* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static int g_host_runs = 0;
static int g_host_seen = 0;
static void CUDART_CB count_run(void*) { ++g_host_runs; }
static void CUDART_CB see_value(void* p) {
  ++g_host_runs;
  g_host_seen = *static_cast<int*>(p);
}

// Whether every element of h is v (prints the first that is not).
static bool all_equal(const int* h, int v, const char* what) {
  for (int i = 0; i < N; ++i)
    if (h[i] != v) {
      printf("FAIL: %s[%d] = %d, expected %d\n", what, i, h[i], v);
      return false;
    }
  return true;
}

static const char* type_name(cudaGraphNodeType t) {
  switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "wait event";
    case cudaGraphNodeTypeEventRecord: return "event record";
    default: return "other";
  }
}

int main() {
  const dim3 grid(N / 256), block(256);
  int *d_a, *d_b, *d_c, *h;
  CHECK(cudaMalloc(&d_a, N * sizeof(int)));
  CHECK(cudaMalloc(&d_b, N * sizeof(int)));
  CHECK(cudaMalloc(&d_c, N * sizeof(int)));
  CHECK(cudaMallocHost(&h, N * sizeof(int)));
  for (int i = 0; i < N; ++i) h[i] = -1;
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

  // ---- 1. capture: s1 forks s2 through an event and joins it back.
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("capturing before: %d\n", (int)status);
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("capturing s1 after begin: %d\n", (int)status);
  CHECK(cudaMemsetAsync(d_a, 0, N * sizeof(int), s1));
  g_add<<<grid, block, 0, s1>>>(d_a, 1, N);  // a = 1
  CHECK(cudaEventRecord(fork, s1));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));
  CHECK(cudaStreamIsCapturing(s2, &status));
  printf("capturing s2 after the fork: %d\n", (int)status);
  CHECK(cudaMemsetAsync(d_b, 0, N * sizeof(int), s2));
  g_add<<<grid, block, 0, s2>>>(d_b, 10, N);  // b = 10
  g_scale<<<grid, block, 0, s2>>>(d_b, 3, N);  // b = 30
  g_scale<<<grid, block, 0, s1>>>(d_a, 2, N);  // a = 2
  CHECK(cudaEventRecord(join, s2));
  CHECK(cudaStreamWaitEvent(s1, join, 0));
  g_sum2<<<grid, block, 0, s1>>>(d_a, d_b, d_c, N);  // c = 32
  CHECK(cudaMemcpyAsync(h, d_c, N * sizeof(int), cudaMemcpyDeviceToHost, s1));
  CHECK(cudaLaunchHostFunc(s1, count_run, nullptr));
  cudaGraph_t captured;
  CHECK(cudaStreamEndCapture(s1, &captured));
  CHECK(cudaStreamIsCapturing(s2, &status));
  printf("capturing s2 after the end: %d\n", (int)status);
  printf("nothing ran during the capture: %s, host function runs %d\n", h[0] == -1 ? "yes" : "no", g_host_runs);
  size_t nodes = 0, roots = 0;
  CHECK(cudaGraphGetNodes(captured, nullptr, &nodes));
  CHECK(cudaGraphGetRootNodes(captured, nullptr, &roots));
  printf("captured graph: %zu nodes, %zu root\n", nodes, roots);
  cudaGraphExec_t captured_exec;
  CHECK(cudaGraphInstantiate(&captured_exec, captured, 0));
  bool ok = true;
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < N; ++i) h[i] = -1;
    CHECK(cudaGraphLaunch(captured_exec, s1));
    CHECK(cudaStreamSynchronize(s1));
    ok &= all_equal(h, 32, "captured c");
  }
  printf("%s: captured graph launched 3 times, c = %d, host function runs %d\n", ok ? "ok" : "FAIL", h[0], g_host_runs);

  // ---- 2. explicit construction: memset -> kernel -> memcpy -> child graph -> memcpy to
  // pinned memory -> host node; an empty node joins the kernel and the first copy.
  cudaGraph_t graph, child;
  CHECK(cudaGraphCreate(&graph, 0));
  CHECK(cudaGraphCreate(&child, 0));
  int n = N;
  int two = 2;
  void* child_args[] = {&d_b, &two, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)g_scale;
  kp.gridDim = grid;
  kp.blockDim = block;
  kp.kernelParams = child_args;
  cudaGraphNode_t child_scale;
  CHECK(cudaGraphAddKernelNode(&child_scale, child, nullptr, 0, &kp));  // b *= 2

  cudaMemsetParams mp = {};
  mp.dst = d_a;
  mp.value = 0;
  mp.elementSize = 4;
  mp.width = N;
  mp.height = 1;
  cudaGraphNode_t n_memset, n_add, n_copy, n_child, n_to_host, n_host, n_empty;
  CHECK(cudaGraphAddMemsetNode(&n_memset, graph, nullptr, 0, &mp));
  int five = 5;
  void* add_args[] = {&d_a, &five, &n};
  kp.func = (void*)g_add;
  kp.kernelParams = add_args;
  CHECK(cudaGraphAddKernelNode(&n_add, graph, &n_memset, 1, &kp));  // a = 5
  CHECK(cudaGraphAddMemcpyNode1D(&n_copy, graph, &n_add, 1, d_b, d_a, N * sizeof(int), cudaMemcpyDeviceToDevice));
  CHECK(cudaGraphAddEmptyNode(&n_empty, graph, nullptr, 0));
  cudaGraphNode_t empty_deps[] = {n_add, n_copy};
  CHECK(cudaGraphAddDependencies(graph, empty_deps, &n_empty, nullptr, 1));
  CHECK(cudaGraphAddDependencies(graph, &empty_deps[1], &n_empty, nullptr, 1));
  CHECK(cudaGraphAddChildGraphNode(&n_child, graph, &n_empty, 1, child));  // b = 10
  CHECK(cudaGraphAddMemcpyNode1D(&n_to_host, graph, &n_child, 1, h, d_b, N * sizeof(int), cudaMemcpyDeviceToHost));
  cudaHostNodeParams hp = {see_value, h};
  CHECK(cudaGraphAddHostNode(&n_host, graph, &n_to_host, 1, &hp));
  const cudaGraphNode_t added[] = {n_memset, n_add, n_copy, n_empty, n_child, n_to_host, n_host};
  printf("node types:");
  for (cudaGraphNode_t node : added) {
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(node, &t));
    printf(" %s", type_name(t));
  }
  printf("\n");
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(cudaGraphGetRootNodes(graph, nullptr, &roots));
  printf("explicit graph: %zu nodes, %zu root\n", nodes, roots);
  cudaGraphNode_t root = nullptr;
  roots = 1;
  CHECK(cudaGraphGetRootNodes(graph, &root, &roots));
  printf("its root is the memset node: %s\n", root == n_memset ? "yes" : "no");

  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  g_host_runs = 0;
  ok = true;
  for (int i = 0; i < N; ++i) h[i] = -1;
  for (int i = 0; i < 100; ++i) CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  ok &= all_equal(h, 10, "explicit b");
  printf("%s: explicit graph launched 100 times: b = %d, host node runs %d, it saw %d\n",
         ok && g_host_runs == 100 && g_host_seen == 10 ? "ok" : "FAIL", h[0], g_host_runs, g_host_seen);

  // A clone is independent of its original and finds its nodes.
  cudaGraph_t clone;
  CHECK(cudaGraphClone(&clone, graph));
  cudaGraphNode_t cloned_add;
  CHECK(cudaGraphNodeFindInClone(&cloned_add, n_add, clone));
  cudaGraphNodeType t;
  CHECK(cudaGraphNodeGetType(cloned_add, &t));
  CHECK(cudaGraphGetNodes(clone, nullptr, &nodes));
  printf("clone: %zu nodes, the add node's copy is a %s node\n", nodes, type_name(t));

  // ---- 3. an executable kernel node's parameters, then cudaGraphExecUpdate.
  int seven = 7;
  void* add7_args[] = {&d_a, &seven, &n};
  kp.func = (void*)g_add;
  kp.kernelParams = add7_args;
  CHECK(cudaGraphExecKernelNodeSetParams(exec, n_add, &kp));
  CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  printf("%s: after cudaGraphExecKernelNodeSetParams(add 7): b = %d\n", all_equal(h, 14, "updated b") ? "ok" : "FAIL",
         h[0]);
  // The clone, its add node changed to add 9, has the same topology: the update succeeds.
  int nine = 9;
  void* add9_args[] = {&d_a, &nine, &n};
  kp.kernelParams = add9_args;
  CHECK(cudaGraphExecKernelNodeSetParams(exec, n_add, &kp));
  cudaGraphExecUpdateResultInfo info;
  CHECK(cudaGraphExecUpdate(exec, clone, &info));
  printf("update from the clone: result %d\n", (int)info.result);
  CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  printf("%s: after the update: b = %d (the clone adds 5)\n", all_equal(h, 10, "b after update") ? "ok" : "FAIL", h[0]);
  // Another topology: refused.
  cudaGraphNode_t extra;
  CHECK(cudaGraphAddEmptyNode(&extra, clone, nullptr, 0));
  cudaError_t e = cudaGraphExecUpdate(exec, clone, &info);
  printf("update from a changed topology: %s, result %d\n", cudaGetErrorName(e), (int)info.result);
  cudaGetLastError();

  // ---- 4. capture errors: a synchronize of the capturing stream is refused and invalidates it.
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  g_add<<<grid, block, 0, s1>>>(d_a, 1, N);
  e = cudaStreamSynchronize(s1);
  printf("cudaStreamSynchronize while capturing: %s\n", cudaGetErrorName(e));
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("capture status after it: %d\n", (int)status);
  cudaGraph_t bad = (cudaGraph_t)0x1;
  e = cudaStreamEndCapture(s1, &bad);
  printf("cudaStreamEndCapture: %s, graph %s\n", cudaGetErrorName(e), bad == nullptr ? "NULL" : "set");
  cudaGetLastError();
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("capture status after the end: %d\n", (int)status);
  CHECK(cudaMemsetAsync(d_a, 0, N * sizeof(int), s1));
  g_add<<<grid, block, 0, s1>>>(d_a, 4, N);
  CHECK(cudaMemcpyAsync(h, d_a, N * sizeof(int), cudaMemcpyDeviceToHost, s1));
  CHECK(cudaStreamSynchronize(s1));
  printf("%s: the stream works after the failed capture: a = %d\n", all_equal(h, 4, "a") ? "ok" : "FAIL", h[0]);

  // ---- 5. a captured loop of 50 kernels, replayed twice.
  CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 50; ++i) g_add<<<grid, block, 0, s2>>>(d_c, 1, N);
  cudaGraph_t loop;
  CHECK(cudaStreamEndCapture(s2, &loop));
  cudaGraphExec_t loop_exec;
  CHECK(cudaGraphInstantiateWithFlags(&loop_exec, loop, 0));
  CHECK(cudaMemset(d_c, 0, N * sizeof(int)));
  CHECK(cudaGraphUpload(loop_exec, s2));
  CHECK(cudaGraphLaunch(loop_exec, s2));
  CHECK(cudaGraphLaunch(loop_exec, s2));
  CHECK(cudaMemcpyAsync(h, d_c, N * sizeof(int), cudaMemcpyDeviceToHost, s2));
  CHECK(cudaStreamSynchronize(s2));
  printf("%s: 50 captured kernels replayed twice: c = %d\n", all_equal(h, 100, "loop c") ? "ok" : "FAIL", h[0]);

  CHECK(cudaGraphExecDestroy(loop_exec));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphExecDestroy(captured_exec));
  CHECK(cudaGraphDestroy(loop));
  CHECK(cudaGraphDestroy(clone));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaGraphDestroy(child));
  CHECK(cudaGraphDestroy(captured));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_b));
  CHECK(cudaFree(d_c));
  printf("done\n");
  return 0;
}
