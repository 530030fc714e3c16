// Graph nodes after their creation: every kind's parameters read back and changed in the
// graph (kernel, memcpy, memset, host, event record), the same in an executable graph
// (cudaGraphExec*NodeSetParams, a child graph swapped), nodes disabled and enabled, a node's
// dependencies and dependents, the graph's edges, an edge removed, a node destroyed, clone
// and find-in-clone, a child node's graph, kernel node attributes, cudaStreamGetId,
// cudaGraphDebugDotPrint; user objects (references of the program, of graphs, clones and
// executable graphs; each destructor runs once the last goes). Output is deterministic: it
// is compared with the native run's (tests/cuda/expected/graph_nodes.out).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <unistd.h>

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

// The same kernels as graphs.cu (the test executor knows them by name).
__global__ void g_add(int* p, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}
__global__ void g_scale(int* p, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= k;
}

// One step of a while loop: the condition stays set while the counter is above 0.
__global__ void g_countdown(int* counter, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    const int c = --*counter;
    cudaGraphSetConditional(h, c > 0 ? 1 : 0);
  }
}

static int g_runs_a = 0, g_runs_b = 0;
static std::atomic<int> g_destroyed_a{0}, g_destroyed_b{0}, g_destroyed_c{0};
static void CUDART_CB destroy_count(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }
// The count once it reaches `want`, or what it is after 10 s.
static int wait_for(const std::atomic<int>& count, int want) {
  for (int i = 0; i < 1000 && count.load() < want; ++i) usleep(10000);
  return count.load();
}
static void CUDART_CB run_a(void*) { ++g_runs_a; }
static void CUDART_CB run_b(void*) { ++g_runs_b; }

// The first element, after checking every element is the same (prints the first that is not).
static int uniform(const int* h, const char* what) {
  for (int i = 1; i < N; ++i)
    if (h[i] != h[0]) {
      printf("FAIL: %s[%d] = %d, but [0] = %d\n", what, i, h[i], h[0]);
      exit(1);
    }
  return h[0];
}

static const char* yes(bool b) { return b ? "yes" : "no"; }

int main() {
  const dim3 grid(N / 256), block(256);
  int *d_a, *d_b, *h, *h2;
  CHECK(cudaMalloc(&d_a, N * sizeof(int)));
  CHECK(cudaMalloc(&d_b, N * sizeof(int)));
  CHECK(cudaMallocHost(&h, N * sizeof(int)));
  CHECK(cudaMallocHost(&h2, N * sizeof(int)));
  cudaStream_t s, s2;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev1, ev2;
  CHECK(cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));

  // memset(d_a, 1) -> add(d_a, 2) -> copy d_a to h -> host(run_a) -> record(ev1), and a
  // child graph (scale d_b by 2) after the memset, an empty node after the record.
  cudaGraph_t g, child;
  CHECK(cudaGraphCreate(&g, 0));
  CHECK(cudaGraphCreate(&child, 0));
  cudaGraphNode_t n_memset, n_add, n_copy, n_host, n_record, n_child, n_empty, n_scale;
  cudaMemsetParams ms = {};
  ms.dst = d_a, ms.value = 1, ms.elementSize = 4, ms.width = N, ms.height = 1;
  CHECK(cudaGraphAddMemsetNode(&n_memset, g, nullptr, 0, &ms));
  int v = 2, n = N;
  void* add_args[] = {&d_a, &v, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)g_add, kp.gridDim = grid, kp.blockDim = block, kp.kernelParams = add_args;
  CHECK(cudaGraphAddKernelNode(&n_add, g, &n_memset, 1, &kp));
  CHECK(cudaGraphAddMemcpyNode1D(&n_copy, g, &n_add, 1, h, d_a, N * sizeof(int), cudaMemcpyDeviceToHost));
  cudaHostNodeParams hp = {run_a, &g_runs_a};
  CHECK(cudaGraphAddHostNode(&n_host, g, &n_copy, 1, &hp));
  CHECK(cudaGraphAddEventRecordNode(&n_record, g, &n_host, 1, ev1));
  int k = 2;
  void* scale_args[] = {&d_b, &k, &n};
  cudaKernelNodeParams sp = {};
  sp.func = (void*)g_scale, sp.gridDim = grid, sp.blockDim = block, sp.kernelParams = scale_args;
  CHECK(cudaGraphAddKernelNode(&n_scale, child, nullptr, 0, &sp));
  CHECK(cudaGraphAddChildGraphNode(&n_child, g, &n_memset, 1, child));
  CHECK(cudaGraphAddEmptyNode(&n_empty, g, &n_record, 1));

  // ---- parameters read back
  cudaKernelNodeParams kg = {};
  CHECK(cudaGraphKernelNodeGetParams(n_add, &kg));
  printf("kernel: func is g_add %s, grid %u block %u shared %u, args %d %d, pointer arg is d_a %s\n",
         yes(kg.func == (void*)g_add), kg.gridDim.x, kg.blockDim.x, kg.sharedMemBytes, *(int*)kg.kernelParams[1],
         *(int*)kg.kernelParams[2], yes(*(int**)kg.kernelParams[0] == d_a));
  cudaMemsetParams mg = {};
  CHECK(cudaGraphMemsetNodeGetParams(n_memset, &mg));
  printf("memset: dst is d_a %s, value %u, element %u, width %zu, height %zu\n", yes(mg.dst == d_a), mg.value,
         mg.elementSize, mg.width, mg.height);
  cudaMemcpy3DParms cg = {};
  CHECK(cudaGraphMemcpyNodeGetParams(n_copy, &cg));
  printf("memcpy: src is d_a %s, dst is h %s, extent %zu x %zu x %zu\n", yes(cg.srcPtr.ptr == d_a),
         yes(cg.dstPtr.ptr == h), cg.extent.width, cg.extent.height, cg.extent.depth);
  cudaHostNodeParams hg = {};
  CHECK(cudaGraphHostNodeGetParams(n_host, &hg));
  printf("host: fn is run_a %s, data %s\n", yes(hg.fn == run_a), yes(hg.userData == &g_runs_a));
  cudaEvent_t eg = nullptr;
  CHECK(cudaGraphEventRecordNodeGetEvent(n_record, &eg));
  printf("event record: ev1 %s\n", yes(eg == ev1));
  // A child node's own graph (in a graph of its own, soon destroyed: while the program
  // holds such a graph, vmcuda refuses a suspend).
  cudaGraphNodeType t;
  cudaGraph_t holder, embedded;
  cudaGraphNode_t n_held;
  CHECK(cudaGraphCreate(&holder, 0));
  CHECK(cudaGraphAddChildGraphNode(&n_held, holder, nullptr, 0, child));
  CHECK(cudaGraphChildGraphNodeGetGraph(n_held, &embedded));
  size_t count = 0;
  CHECK(cudaGraphGetNodes(embedded, nullptr, &count));
  cudaGraphNode_t inner;
  size_t one = 1;
  CHECK(cudaGraphGetNodes(embedded, &inner, &one));
  CHECK(cudaGraphNodeGetType(inner, &t));
  printf("child graph: %zu node(s), the first a kernel %s, not the graph given %s\n", count,
         yes(t == cudaGraphNodeTypeKernel), yes(embedded != child));
  CHECK(cudaGraphDestroy(holder));
  // Wrong kinds are refused.
  printf("memset params of a kernel node: %s\n", cudaGetErrorName(cudaGraphMemsetNodeGetParams(n_add, &mg)));
  cudaGetLastError();

  // ---- relations and edges
  cudaGraphNode_t list[8];
  size_t deps = 8, dependents = 8, edges = 0;
  CHECK(cudaGraphNodeGetDependencies(n_add, list, nullptr, &deps));
  printf("add's dependencies: %zu, the memset %s\n", deps, yes(deps == 1 && list[0] == n_memset));
  CHECK(cudaGraphNodeGetDependentNodes(n_memset, list, nullptr, &dependents));
  bool has_add = false, has_child = false;
  for (size_t i = 0; i < dependents; ++i) has_add |= list[i] == n_add, has_child |= list[i] == n_child;
  printf("memset's dependents: %zu (add %s, child %s)\n", dependents, yes(has_add), yes(has_child));
  CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  printf("edges: %zu\n", edges);
  CHECK(cudaGraphRemoveDependencies(g, &n_record, &n_empty, nullptr, 1));
  CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  printf("edges after removing record->empty: %zu\n", edges);
  printf("removing it again: %s\n", cudaGetErrorName(cudaGraphRemoveDependencies(g, &n_record, &n_empty, nullptr, 1)));
  cudaGetLastError();
  CHECK(cudaGraphDestroyNode(n_empty));
  CHECK(cudaGraphGetNodes(g, nullptr, &count));
  printf("nodes after destroying the empty node: %zu\n", count);

  // ---- parameters changed in the graph: add 3, memset 4, host run_b, record ev2
  v = 3;
  CHECK(cudaGraphKernelNodeSetParams(n_add, &kp));
  ms.value = 4;
  CHECK(cudaGraphMemsetNodeSetParams(n_memset, &ms));
  cudaHostNodeParams hb = {run_b, &g_runs_b};
  CHECK(cudaGraphHostNodeSetParams(n_host, &hb));
  CHECK(cudaGraphEventRecordNodeSetEvent(n_record, ev2));
  CHECK(cudaGraphKernelNodeGetParams(n_add, &kg));
  CHECK(cudaGraphMemsetNodeGetParams(n_memset, &mg));
  CHECK(cudaGraphHostNodeGetParams(n_host, &hg));
  CHECK(cudaGraphEventRecordNodeGetEvent(n_record, &eg));
  printf("after set: add %d, memset %u, host fn is run_b %s, record ev2 %s\n", *(int*)kg.kernelParams[1], mg.value,
         yes(hg.fn == run_b), yes(eg == ev2));

  // ---- kernel node attributes
  cudaLaunchAttributeValue av = {};
  av.priority = -1;  // within the H100's range of priorities [-5, 0]
  CHECK(cudaGraphKernelNodeSetAttribute(n_add, cudaLaunchAttributePriority, &av));
  cudaLaunchAttributeValue ag = {};
  CHECK(cudaGraphKernelNodeGetAttribute(n_add, cudaLaunchAttributePriority, &ag));
  cudaGraphNode_t n_add2;
  CHECK(cudaGraphAddKernelNode(&n_add2, child, nullptr, 0, &kp));
  CHECK(cudaGraphKernelNodeCopyAttributes(n_add2, n_add));
  cudaLaunchAttributeValue ac = {};
  CHECK(cudaGraphKernelNodeGetAttribute(n_add2, cudaLaunchAttributePriority, &ac));
  printf("priority: set %d, copied %d\n", ag.priority, ac.priority);
  CHECK(cudaGraphDestroyNode(n_add2));

  // ---- instantiated and launched: d_a = 4 + 3
  CHECK(cudaMemset(d_b, 0, N * sizeof(int)));
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  printf("launch 1: h = %d, run_a %d run_b %d, ev2 %s\n", uniform(h, "h"), g_runs_a, g_runs_b,
         cudaGetErrorName(cudaEventQuery(ev2)));

  // ---- parameters changed in the executable graph: memset 10, add 5, copy into h2,
  // host run_a, record ev1; the graph itself keeps its own.
  ms.value = 10;
  CHECK(cudaGraphExecMemsetNodeSetParams(x, n_memset, &ms));
  v = 5;
  CHECK(cudaGraphExecKernelNodeSetParams(x, n_add, &kp));
  CHECK(cudaGraphExecMemcpyNodeSetParams1D(x, n_copy, h2, d_a, N * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaGraphExecHostNodeSetParams(x, n_host, &hp));
  CHECK(cudaGraphExecEventRecordNodeSetEvent(x, n_record, ev1));
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  printf("launch 2: h2 = %d, h = %d, run_a %d run_b %d\n", uniform(h2, "h2"), uniform(h, "h"), g_runs_a, g_runs_b);
  CHECK(cudaGraphMemsetNodeGetParams(n_memset, &mg));
  printf("the graph's memset still %u\n", mg.value);

  // ---- a node disabled: the add does not run (d_a = 10), then enabled again (15)
  unsigned enabled = 9;
  CHECK(cudaGraphNodeSetEnabled(x, n_add, 0));
  CHECK(cudaGraphNodeGetEnabled(x, n_add, &enabled));
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  printf("add disabled (enabled %u): h2 = %d\n", enabled, uniform(h2, "h2"));
  // Launched again and again while disabled, so that a suspend landing meanwhile carries the
  // disabled node (tests/cuda/suspend_resume_test.sh): each launch still skips the add.
  for (int i = 0; i < 100; ++i) {
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphNodeGetEnabled(x, n_add, &enabled));
    if (uniform(h2, "h2") != 10 || enabled != 0) {
      printf("FAIL: launch %d with the add disabled: h2 = %d, enabled %u\n", i, h2[0], enabled);
      return 1;
    }
  }
  CHECK(cudaGraphNodeSetEnabled(x, n_add, 1));
  CHECK(cudaGraphNodeGetEnabled(x, n_add, &enabled));
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  printf("add enabled (enabled %u): h2 = %d\n", enabled, uniform(h2, "h2"));

  // ---- the child graph swapped for one that scales by 3: d_b = 1 * 3 after a memset to 1
  cudaGraph_t child3;
  CHECK(cudaGraphCreate(&child3, 0));
  k = 3;
  cudaGraphNode_t n_scale3;
  CHECK(cudaGraphAddKernelNode(&n_scale3, child3, nullptr, 0, &sp));
  // (In an executable graph of its own, instantiated just before: vmcuda cannot carry the
  // swap of one a resume made, and refuses a suspend while it lives.)
  cudaGraphExec_t x2;
  CHECK(cudaGraphInstantiate(&x2, g, 0));
  CHECK(cudaGraphExecChildGraphNodeSetParams(x2, n_child, child3));
  for (int i = 0; i < N; ++i) h[i] = 1;
  CHECK(cudaMemcpy(d_b, h, N * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaGraphLaunch(x2, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGraphExecDestroy(x2));
  CHECK(cudaMemcpy(h, d_b, N * sizeof(int), cudaMemcpyDeviceToHost));
  printf("child swapped: d_b = %d\n", uniform(h, "d_b"));

  // ---- clone and find: the clone's add node has the graph's parameters
  cudaGraph_t clone;
  CHECK(cudaGraphClone(&clone, g));
  cudaGraphNode_t found;
  CHECK(cudaGraphNodeFindInClone(&found, n_add, clone));
  CHECK(cudaGraphKernelNodeGetParams(found, &kg));
  CHECK(cudaGraphNodeGetType(found, &t));
  printf("clone: found a kernel %s, add %d, not the original %s\n", yes(t == cudaGraphNodeTypeKernel),
         *(int*)kg.kernelParams[1], yes(found != n_add));
  v = 6;
  CHECK(cudaGraphKernelNodeSetParams(found, &kp));
  CHECK(cudaGraphKernelNodeGetParams(n_add, &kg));
  printf("the original keeps add %d\n", *(int*)kg.kernelParams[1]);
  CHECK(cudaGraphDestroy(clone));

  // ---- stream ids
  unsigned long long id1 = 0, id1b = 0, id2 = 0;
  CHECK(cudaStreamGetId(s, &id1));
  CHECK(cudaStreamGetId(s, &id1b));
  CHECK(cudaStreamGetId(s2, &id2));
  printf("stream ids: stable %s, distinct %s\n", yes(id1 == id1b), yes(id1 != id2));

  // ---- a DOT file of the graph
  char path[] = "/tmp/graph_nodes_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return printf("FAIL: mkstemp\n"), 1;
  close(fd);
  CHECK(cudaGraphDebugDotPrint(g, path, 0));
  FILE* f = fopen(path, "r");
  char line[256] = {};
  const bool has_digraph = f && fgets(line, sizeof line, f) && strstr(line, "digraph");
  if (f) fclose(f);
  unlink(path);
  printf("dot file: starts with a digraph %s\n", yes(has_digraph));

  // ---- conditional nodes: d_a = 0, then if (1) += 1; if (0) += 100 else += 10; while the
  // counter (3) counts down: += 1000. Twice: the handles take their default at each launch.
  {
    cudaGraph_t cg;
    CHECK(cudaGraphCreate(&cg, 0));
    cudaGraphConditionalHandle h_if, h_else, h_while;
    CHECK(cudaGraphConditionalHandleCreate(&h_if, cg, 1, cudaGraphCondAssignDefault));
    CHECK(cudaGraphConditionalHandleCreate(&h_else, cg, 0, cudaGraphCondAssignDefault));
    CHECK(cudaGraphConditionalHandleCreate(&h_while, cg, 1, cudaGraphCondAssignDefault));
    cudaGraphNode_t c_zero, c_counter, c_if, c_else, c_while, c_body[3];
    cudaMemsetParams zero = {};
    zero.dst = d_a, zero.value = 0, zero.elementSize = 4, zero.width = N, zero.height = 1;
    CHECK(cudaGraphAddMemsetNode(&c_zero, cg, nullptr, 0, &zero));
    cudaMemsetParams three = {};
    three.dst = d_b, three.value = 3, three.elementSize = 4, three.width = 1, three.height = 1;
    CHECK(cudaGraphAddMemsetNode(&c_counter, cg, &c_zero, 1, &three));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h_if, cp.conditional.type = cudaGraphCondTypeIf, cp.conditional.size = 1;
    CHECK(cudaGraphAddNode(&c_if, cg, &c_counter, nullptr, 1, &cp));
    cudaGraph_t if_body = cp.conditional.phGraph_out[0];
    int add = 1;
    void* cadd_args[] = {&d_a, &add, &n};
    cudaKernelNodeParams ck = {};
    ck.func = (void*)g_add, ck.gridDim = grid, ck.blockDim = block, ck.kernelParams = cadd_args;
    CHECK(cudaGraphAddKernelNode(&c_body[0], if_body, nullptr, 0, &ck));
    cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h_else, cp.conditional.type = cudaGraphCondTypeIf, cp.conditional.size = 2;
    CHECK(cudaGraphAddNode(&c_else, cg, &c_if, nullptr, 1, &cp));
    cudaGraph_t then_body = cp.conditional.phGraph_out[0], else_body = cp.conditional.phGraph_out[1];
    add = 100;
    CHECK(cudaGraphAddKernelNode(&c_body[1], then_body, nullptr, 0, &ck));
    add = 10;
    CHECK(cudaGraphAddKernelNode(&c_body[2], else_body, nullptr, 0, &ck));
    cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h_while, cp.conditional.type = cudaGraphCondTypeWhile, cp.conditional.size = 1;
    CHECK(cudaGraphAddNode(&c_while, cg, &c_else, nullptr, 1, &cp));
    cudaGraph_t while_body = cp.conditional.phGraph_out[0];
    add = 1000;
    cudaGraphNode_t w_add, w_count;
    CHECK(cudaGraphAddKernelNode(&w_add, while_body, nullptr, 0, &ck));
    void* count_args[] = {&d_b, &h_while};
    cudaKernelNodeParams cc = {};
    cc.func = (void*)g_countdown, cc.gridDim = dim3(1), cc.blockDim = dim3(1), cc.kernelParams = count_args;
    CHECK(cudaGraphAddKernelNode(&w_count, while_body, &w_add, 1, &cc));
    CHECK(cudaGraphNodeGetType(c_while, &t));
    printf("conditional nodes: type conditional %s, bodies distinct %s\n", yes(t == cudaGraphNodeTypeConditional),
           yes(then_body != else_body && if_body != while_body));
    cudaGraphExec_t cx;
    CHECK(cudaGraphInstantiate(&cx, cg, 0));
    for (int round = 0; round < 2; ++round) {
      CHECK(cudaGraphLaunch(cx, s));
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaMemcpy(h, d_a, N * sizeof(int), cudaMemcpyDeviceToHost));
      int counter = -1;
      CHECK(cudaMemcpy(&counter, d_b, sizeof counter, cudaMemcpyDeviceToHost));
      printf("conditional launch %d: d_a = %d, counter %d\n", round + 1, uniform(h, "d_a"), counter);
    }
    CHECK(cudaGraphExecDestroy(cx));
    CHECK(cudaGraphDestroy(cg));
  }

  // ---- user objects: each destructor runs once, when the last reference goes (on CUDA's
  // thread, soon after: waited for here up to 10 s).
  cudaUserObject_t uo, uo2;
  CHECK(cudaUserObjectCreate(&uo, &g_destroyed_a, destroy_count, 1, cudaUserObjectNoDestructorSync));
  CHECK(cudaUserObjectCreate(&uo2, &g_destroyed_b, destroy_count, 2, cudaUserObjectNoDestructorSync));
  CHECK(cudaUserObjectRetain(uo2, 1));
  CHECK(cudaUserObjectRelease(uo2, 2));
  printf("user object: 1 reference left, destroyed %d\n", g_destroyed_b.load());
  CHECK(cudaUserObjectRelease(uo2, 1));
  printf("user object: last reference released, destroyed %d\n", wait_for(g_destroyed_b, 1));
  // A graph takes the program's reference (moved); its clone and its executable graph hold
  // their own: destroyed after all three are gone.
  cudaGraph_t ug, uclone;
  CHECK(cudaGraphCreate(&ug, 0));
  cudaGraphNode_t un;
  v = 1;
  CHECK(cudaGraphAddKernelNode(&un, ug, nullptr, 0, &kp));
  CHECK(cudaGraphRetainUserObject(ug, uo, 1, cudaGraphUserObjectMove));
  CHECK(cudaGraphClone(&uclone, ug));
  cudaGraphExec_t ux;
  CHECK(cudaGraphInstantiate(&ux, ug, 0));
  CHECK(cudaGraphLaunch(ux, s));
  CHECK(cudaGraphDestroy(ug));
  CHECK(cudaGraphDestroy(uclone));
  CHECK(cudaStreamSynchronize(s));
  usleep(100000);
  printf("graph and clone destroyed, the executable graph holds it: destroyed %d\n", g_destroyed_a.load());
  CHECK(cudaGraphExecDestroy(ux));
  CHECK(cudaStreamSynchronize(s));
  printf("executable graph destroyed: destroyed %d\n", wait_for(g_destroyed_a, 1));
  // A graph gives back only the references it holds.
  cudaUserObject_t uo3;
  CHECK(cudaUserObjectCreate(&uo3, &g_destroyed_c, destroy_count, 1, cudaUserObjectNoDestructorSync));
  CHECK(cudaGraphCreate(&ug, 0));
  CHECK(cudaGraphRetainUserObject(ug, uo3, 2, 0));
  CHECK(cudaGraphReleaseUserObject(ug, uo3, 2));
  CHECK(cudaUserObjectRelease(uo3, 1));
  printf("released by the graph and the program: destroyed %d\n", wait_for(g_destroyed_c, 1));
  CHECK(cudaGraphDestroy(ug));

  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(child3));
  CHECK(cudaGraphDestroy(child));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(ev1));
  CHECK(cudaEventDestroy(ev2));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaFreeHost(h));
  CHECK(cudaFreeHost(h2));
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_b));
  printf("done\n");
  return 0;
}
