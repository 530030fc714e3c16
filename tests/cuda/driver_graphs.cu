// Stream capture and graphs through the driver API (cuStreamBeginCapture_v2,
// cuStreamGetCaptureInfo_v3, cuGraph*, user objects: cuUserObject*, cuGraphRetain/ReleaseUserObject), beside the runtime's on the same streams and graphs,
// as frameworks mix them (PyTorch's CUDA graphs go through NVIDIA's runtime, which calls
// these). Built with -lcuda, shared and static runtime. Prints what it sees (deterministic;
// compared with the native run) and the number of failed expectations.
#include <cuda.h>
#include <cuda_runtime.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <vector>

constexpr int N = 1 << 14;
static int failures = 0;
static int host_runs = 0;

static const char* name_of(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unnamed)";
}
static void expect(const char* what, CUresult got, CUresult want = CUDA_SUCCESS) {
  std::printf("%s: %s\n", what, name_of(got));
  if (got != want) {
    std::printf("  FAIL: expected %s\n", name_of(want));
    ++failures;
  }
}
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "yes" : "no");
  if (!ok) ++failures;
}

__global__ void g_add(int* a, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += v;
}
__global__ void g_scale(int* a, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] *= v;
}
static void CUDA_CB count_run(void*) { ++host_runs; }
// A user object's destructor (CUDA runs it on a thread of its own, soon after the last
// reference goes: waited for here up to 10 s).
static std::atomic<int> g_destroyed{0};
static void CUDA_CB count_destroyed(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }
static int destroyed_after_wait(int want) {
  for (int i = 0; i < 1000 && g_destroyed.load() < want; ++i) usleep(10000);
  return g_destroyed.load();
}

static bool all(const std::vector<int>& h, int v) {
  for (int x : h)
    if (x != v) return false;
  return true;
}

int main() {
  expect("cuInit", cuInit(0));
  CUdevice dev;
  expect("cuDeviceGet", cuDeviceGet(&dev, 0));
  CUcontext ctx;
  expect("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
  expect("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
  CUfunction f_add, f_scale;
  check("cudaGetFuncBySymbol(add)", cudaGetFuncBySymbol(&f_add, (const void*)g_add) == cudaSuccess);
  check("cudaGetFuncBySymbol(scale)", cudaGetFuncBySymbol(&f_scale, (const void*)g_scale) == cudaSuccess);
  CUdeviceptr d;
  expect("cuMemAlloc", cuMemAlloc(&d, N * sizeof(int)));
  CUstream s;
  expect("cuStreamCreate", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<int> h(N);

  // ---- capture through the driver API
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  expect("cuStreamIsCapturing before", cuStreamIsCapturing(s, &st));
  check("not capturing", st == CU_STREAM_CAPTURE_STATUS_NONE);
  expect("cuStreamBeginCapture_v2(thread local)", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  expect("cuStreamIsCapturing during", cuStreamIsCapturing(s, &st));
  check("capturing", st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cudaStreamCaptureStatus rst = cudaStreamCaptureStatusNone;
  check("the runtime sees the same capture",
        cudaStreamIsCapturing((cudaStream_t)s, &rst) == cudaSuccess && rst == cudaStreamCaptureStatusActive);
  expect("cuMemsetD8Async (captured)", cuMemsetD8Async(d, 0, N * sizeof(int), s));
  int n = N, four = 4, two = 2;
  void* add_args[] = {&d, &four, &n};
  void* scale_args[] = {&d, &two, &n};
  expect("cuLaunchKernel add (captured)", cuLaunchKernel(f_add, N / 256, 1, 1, 256, 1, 1, 0, s, add_args, nullptr));
  expect("cuLaunchKernel scale (captured)", cuLaunchKernel(f_scale, N / 256, 1, 1, 256, 1, 1, 0, s, scale_args, nullptr));
  expect("cuLaunchHostFunc (captured)", cuLaunchHostFunc(s, count_run, nullptr));
  cuuint64_t id = 0;
  expect("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo(s, &st, &id, nullptr, nullptr, nullptr, nullptr));
  check("capture info: active, an id", st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0);
  CUgraph g = nullptr;
  expect("cuStreamEndCapture", cuStreamEndCapture(s, &g));
  check("nothing ran during the capture", host_runs == 0);
  size_t nodes = 0;
  expect("cuGraphGetNodes", cuGraphGetNodes(g, nullptr, &nodes));
  std::printf("captured nodes: %zu\n", nodes);
  CUgraphExec x = nullptr;
  expect("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags(&x, g, 0));
  bool ok = true;
  for (int round = 0; round < 3; ++round) {
    expect("cuGraphLaunch", cuGraphLaunch(x, s));
    expect("cuStreamSynchronize", cuStreamSynchronize(s));
    expect("cuMemcpyDtoH", cuMemcpyDtoH(h.data(), d, N * sizeof(int)));
    ok &= all(h, 8);
  }
  check("each launch gives (0 + 4) * 2 = 8", ok);
  std::printf("host function runs: %d\n", host_runs);
  CUgraph none = nullptr;
  expect("cuStreamEndCapture when not capturing", cuStreamEndCapture(s, &none), CUDA_ERROR_ILLEGAL_STATE);

  // ---- the capture mode of a thread
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  expect("cuThreadExchangeStreamCaptureMode(relaxed)", cuThreadExchangeStreamCaptureMode(&mode));
  std::printf("previous mode: %d\n", (int)mode);
  expect("cuThreadExchangeStreamCaptureMode(back)", cuThreadExchangeStreamCaptureMode(&mode));
  std::printf("mode given back: %d\n", (int)mode);

  // ---- explicit graph: memset -> child graph (the captured one) -> host node
  CUgraph e = nullptr;
  expect("cuGraphCreate", cuGraphCreate(&e, 0));
  CUDA_MEMSET_NODE_PARAMS mp = {};
  mp.dst = d;
  mp.value = 5;
  mp.elementSize = 4;
  mp.width = N;
  mp.height = 1;
  CUgraphNode n_set, n_child, n_host, n_empty;
  expect("cuGraphAddMemsetNode", cuGraphAddMemsetNode(&n_set, e, nullptr, 0, &mp, ctx));
  expect("cuGraphAddChildGraphNode", cuGraphAddChildGraphNode(&n_child, e, &n_set, 1, g));
  CUDA_HOST_NODE_PARAMS hp = {count_run, nullptr};
  expect("cuGraphAddHostNode", cuGraphAddHostNode(&n_host, e, &n_child, 1, &hp));
  expect("cuGraphAddEmptyNode", cuGraphAddEmptyNode(&n_empty, e, nullptr, 0));
  expect("cuGraphAddDependencies", cuGraphAddDependencies(e, &n_host, &n_empty, nullptr, 1));
  CUgraphNodeType t;
  expect("cuGraphNodeGetType(child)", cuGraphNodeGetType(n_child, &t));
  check("a child graph node", t == CU_GRAPH_NODE_TYPE_GRAPH);
  size_t roots = 0;
  expect("cuGraphGetRootNodes", cuGraphGetRootNodes(e, nullptr, &roots));
  std::printf("explicit graph roots: %zu\n", roots);
  CUgraphExec ex = nullptr;
  expect("cuGraphInstantiateWithFlags(explicit)", cuGraphInstantiateWithFlags(&ex, e, 0));
  expect("cuGraphUpload", cuGraphUpload(ex, s));
  expect("cuGraphLaunch(explicit)", cuGraphLaunch(ex, s));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  expect("cuMemcpyDtoH", cuMemcpyDtoH(h.data(), d, N * sizeof(int)));
  check("memset 5, then (0 + 4) * 2 = 8 (the child graph sets it again)", all(h, 8));
  std::printf("host function runs: %d\n", host_runs);

  // ---- the runtime launches a graph the driver made, and the driver one the runtime made
  check("cudaGraphLaunch of a CUgraphExec", cudaGraphLaunch((cudaGraphExec_t)x, (cudaStream_t)s) == cudaSuccess);
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  expect("cuMemcpyDtoH", cuMemcpyDtoH(h.data(), d, N * sizeof(int)));
  check("(0 + 4) * 2 = 8 again", all(h, 8));

  // ---- user objects: each destructor runs once, when the last reference goes; a graph's
  // executable graph holds its own until the work of its launches is done
  CUuserObject uo = nullptr, uo2 = nullptr, bad = nullptr;
  expect("cuUserObjectCreate without CU_USER_OBJECT_NO_DESTRUCTOR_SYNC",
         cuUserObjectCreate(&bad, &g_destroyed, count_destroyed, 1, 0), CUDA_ERROR_INVALID_VALUE);
  expect("cuUserObjectCreate", cuUserObjectCreate(&uo, &g_destroyed, count_destroyed, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  expect("cuUserObjectRetain", cuUserObjectRetain(uo, 1));
  expect("cuUserObjectRelease(2)", cuUserObjectRelease(uo, 2));
  std::printf("user object: 1 reference left, destroyed %d\n", g_destroyed.load());
  CUgraph ug = nullptr;
  CUgraphNode un;
  expect("cuGraphCreate", cuGraphCreate(&ug, 0));
  expect("cuGraphAddHostNode", cuGraphAddHostNode(&un, ug, nullptr, 0, &hp));
  expect("cuGraphRetainUserObject(move)", cuGraphRetainUserObject(ug, uo, 1, CU_GRAPH_USER_OBJECT_MOVE));
  CUgraphExec ux = nullptr;
  expect("cuGraphInstantiateWithFlags(user object)", cuGraphInstantiateWithFlags(&ux, ug, 0));
  expect("cuGraphLaunch(user object)", cuGraphLaunch(ux, s));
  expect("cuGraphDestroy", cuGraphDestroy(ug));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  usleep(100000);
  std::printf("graph destroyed, the executable graph holds it: destroyed %d\n", g_destroyed.load());
  expect("cuGraphExecDestroy", cuGraphExecDestroy(ux));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  std::printf("executable graph destroyed: destroyed %d\n", destroyed_after_wait(1));
  // A graph's own references (not moved), given back by the graph, then the program's.
  expect("cuUserObjectCreate", cuUserObjectCreate(&uo2, &g_destroyed, count_destroyed, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  expect("cuGraphCreate", cuGraphCreate(&ug, 0));
  expect("cuGraphRetainUserObject(2)", cuGraphRetainUserObject(ug, uo2, 2, 0));
  expect("cuGraphReleaseUserObject(2)", cuGraphReleaseUserObject(ug, uo2, 2));
  usleep(100000);
  std::printf("released by the graph, the program holds it: destroyed %d\n", g_destroyed.load());
  expect("cuUserObjectRelease(1)", cuUserObjectRelease(uo2, 1));
  std::printf("released by the program: destroyed %d\n", destroyed_after_wait(2));
  expect("cuGraphDestroy", cuGraphDestroy(ug));
  std::printf("host function runs: %d\n", host_runs);

  expect("cuGraphExecDestroy", cuGraphExecDestroy(ex));
  expect("cuGraphExecDestroy", cuGraphExecDestroy(x));
  expect("cuGraphDestroy", cuGraphDestroy(e));
  expect("cuGraphDestroy", cuGraphDestroy(g));
  expect("cuStreamDestroy", cuStreamDestroy(s));
  expect("cuMemFree", cuMemFree(d));
  std::printf("failures: %d\n", failures);
  return failures ? 1 : 0;
}
