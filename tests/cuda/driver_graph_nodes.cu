// Kernel, memcpy and memset graph nodes through the driver API alone (cuda.h): kernels from
// cuModuleLoadData (a CUfunction) and cuLibraryLoadData (a CUkernel, CUDA_KERNEL_NODE_PARAMS_v2's
// kern), arguments as kernelParams and as `extra`'s buffer, a CUDA_MEMCPY3D node back to
// pinned host memory, reading node parameters back, updating them in the executable graph and in
// the graph, and the same nodes through cuGraphAddNode. Built with -lcuda (no runtime call).
// Prints what it sees (deterministic; compared with the native run) and its failed expectations.
#include <cuda.h>

#include <cstddef>
#include <cstdio>
#include <cstring>

#include "driver_graph_nodes_fatbin.h"  // driver_graph_nodes_fatbin: driver_graph_nodes_kernels.cu

constexpr int N = 4096;
constexpr unsigned kBlock = 256;
static int failures = 0;

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
static bool all(const int* h, int v) {
  for (int i = 0; i < N; ++i)
    if (h[i] != v) return false;
  return true;
}

static CUDA_KERNEL_NODE_PARAMS kernel(CUfunction f, CUkernel k, void** params, void** extra) {
  CUDA_KERNEL_NODE_PARAMS p;
  std::memset(&p, 0, sizeof p);
  p.func = f;
  p.kern = k;
  p.gridDimX = N / kBlock, p.gridDimY = 1, p.gridDimZ = 1;
  p.blockDimX = kBlock, p.blockDimY = 1, p.blockDimZ = 1;
  p.kernelParams = params;
  p.extra = extra;
  return p;
}
static CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr d, unsigned value) {
  CUDA_MEMSET_NODE_PARAMS m;
  std::memset(&m, 0, sizeof m);
  m.dst = d, m.value = value, m.elementSize = 4, m.width = N, m.height = 1;
  return m;
}
static CUDA_MEMCPY3D to_host(int* h, CUdeviceptr d) {
  CUDA_MEMCPY3D c;
  std::memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = d;
  c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = h;
  c.WidthInBytes = N * sizeof(int), c.Height = 1, c.Depth = 1;
  return c;
}

int main() {
  expect("cuInit", cuInit(0));
  CUdevice dev;
  expect("cuDeviceGet", cuDeviceGet(&dev, 0));
  CUcontext ctx;
  expect("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
  expect("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
  CUmodule mod;
  expect("cuModuleLoadData", cuModuleLoadData(&mod, driver_graph_nodes_fatbin));
  CUfunction f_add;
  expect("cuModuleGetFunction(add_one)", cuModuleGetFunction(&f_add, mod, "_Z7add_onePii"));
  CUlibrary lib;
  expect("cuLibraryLoadData", cuLibraryLoadData(&lib, driver_graph_nodes_fatbin, nullptr, nullptr, 0, nullptr,
                                                nullptr, 0));
  CUkernel k_scale;
  expect("cuLibraryGetKernel(scale_add)", cuLibraryGetKernel(&k_scale, lib, "_Z9scale_addPiiii"));
  CUdeviceptr d;
  expect("cuMemAlloc", cuMemAlloc(&d, N * sizeof(int)));
  int *h = nullptr, *h2 = nullptr;
  expect("cuMemAllocHost", cuMemAllocHost(reinterpret_cast<void**>(&h), N * sizeof(int)));
  expect("cuMemAllocHost (second)", cuMemAllocHost(reinterpret_cast<void**>(&h2), N * sizeof(int)));
  CUstream s;
  expect("cuStreamCreate", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  // memset 5 -> add_one (CUfunction, kernelParams) -> scale_add (CUkernel, extra: *3 + 1) -> copy to h.
  CUgraph g;
  expect("cuGraphCreate", cuGraphCreate(&g, 0));
  CUgraphNode n_set, n_add, n_scale, n_copy;
  CUDA_MEMSET_NODE_PARAMS ms = memset_params(d, 5);
  expect("cuGraphAddMemsetNode", cuGraphAddMemsetNode(&n_set, g, nullptr, 0, &ms, ctx));
  int n = N;
  void* add_args[] = {&d, &n};
  CUDA_KERNEL_NODE_PARAMS kp = kernel(f_add, nullptr, add_args, nullptr);
  expect("cuGraphAddKernelNode (CUfunction)", cuGraphAddKernelNode(&n_add, g, &n_set, 1, &kp));
  struct Args {
    CUdeviceptr p;
    int mul, add, n;
  } buffer = {d, 3, 1, N};
  size_t buffer_bytes = offsetof(Args, n) + sizeof(int);  // the parameters' 20 bytes, not the struct's padded 24
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &buffer_bytes,
                   CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS sp = kernel(nullptr, k_scale, nullptr, extra);
  expect("cuGraphAddKernelNode (CUkernel, extra)", cuGraphAddKernelNode(&n_scale, g, &n_add, 1, &sp));
  CUDA_MEMCPY3D cp = to_host(h, d);
  expect("cuGraphAddMemcpyNode", cuGraphAddMemcpyNode(&n_copy, g, &n_scale, 1, &cp, ctx));
  size_t count = 0;
  expect("cuGraphGetNodes", cuGraphGetNodes(g, nullptr, &count));
  std::printf("nodes: %zu\n", count);
  CUgraphNodeType type;
  expect("cuGraphNodeGetType(copy)", cuGraphNodeGetType(n_copy, &type));
  check("the copy node is a memcpy node", type == CU_GRAPH_NODE_TYPE_MEMCPY);

  // Parameters read back.
  CUDA_KERNEL_NODE_PARAMS got;
  std::memset(&got, 0, sizeof got);
  expect("cuGraphKernelNodeGetParams(add)", cuGraphKernelNodeGetParams(n_add, &got));
  check("  its function is add_one's", got.func == f_add);
  check("  grid and block as given", got.gridDimX == N / kBlock && got.blockDimX == kBlock && got.gridDimY == 1);
  check("  its n argument", got.kernelParams && *static_cast<int*>(got.kernelParams[1]) == N);
  CUDA_MEMCPY3D gc;
  std::memset(&gc, 0, sizeof gc);
  expect("cuGraphMemcpyNodeGetParams", cuGraphMemcpyNodeGetParams(n_copy, &gc));
  check("  device to host, the whole buffer", gc.srcMemoryType == CU_MEMORYTYPE_DEVICE && gc.srcDevice == d &&
                                                   gc.dstMemoryType == CU_MEMORYTYPE_HOST && gc.dstHost == h &&
                                                   gc.WidthInBytes == N * sizeof(int) && gc.Height == 1);
  CUDA_MEMSET_NODE_PARAMS gm;
  expect("cuGraphMemsetNodeGetParams", cuGraphMemsetNodeGetParams(n_set, &gm));
  check("  value 5", gm.value == 5 && gm.width == N);

  CUgraphExec exec;
  expect("cuGraphInstantiate", cuGraphInstantiate(&exec, g, 0));
  expect("cuGraphLaunch", cuGraphLaunch(exec, s));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  std::printf("h[0] %d h[N-1] %d\n", h[0], h[N - 1]);
  check("(5 + 1) * 3 + 1 everywhere", all(h, 19));

  // The executable graph's parameters: scale *2 + 0 (kernelParams now), memset 7, copy to h2.
  int mul = 2, add = 0;
  void* scale_args[] = {&d, &mul, &add, &n};
  CUDA_KERNEL_NODE_PARAMS sp2 = kernel(nullptr, k_scale, scale_args, nullptr);
  expect("cuGraphExecKernelNodeSetParams", cuGraphExecKernelNodeSetParams(exec, n_scale, &sp2));
  CUDA_MEMSET_NODE_PARAMS ms7 = memset_params(d, 7);
  expect("cuGraphExecMemsetNodeSetParams", cuGraphExecMemsetNodeSetParams(exec, n_set, &ms7, ctx));
  CUDA_MEMCPY3D cp2 = to_host(h2, d);
  expect("cuGraphExecMemcpyNodeSetParams", cuGraphExecMemcpyNodeSetParams(exec, n_copy, &cp2, ctx));
  expect("cuGraphLaunch (updated)", cuGraphLaunch(exec, s));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  check("h2: (7 + 1) * 2 everywhere", all(h2, 16));
  check("h kept the first run's", all(h, 19));

  // The graph's own parameters (a new instance sees them; the first keeps its own).
  CUDA_KERNEL_NODE_PARAMS sp3 = kernel(nullptr, k_scale, scale_args, nullptr);
  mul = 10, add = 4;
  expect("cuGraphKernelNodeSetParams", cuGraphKernelNodeSetParams(n_scale, &sp3));
  CUDA_MEMCPY3D cp3 = to_host(h, d);
  expect("cuGraphMemcpyNodeSetParams", cuGraphMemcpyNodeSetParams(n_copy, &cp3));
  std::memset(&got, 0, sizeof got);
  expect("cuGraphKernelNodeGetParams(scale)", cuGraphKernelNodeGetParams(n_scale, &got));
  check("  its mul and add arguments", got.kernelParams && *static_cast<int*>(got.kernelParams[1]) == 10 &&
                                         *static_cast<int*>(got.kernelParams[2]) == 4);
  CUgraphExec exec2;
  expect("cuGraphInstantiate (second)", cuGraphInstantiate(&exec2, g, 0));
  expect("cuGraphLaunch (second)", cuGraphLaunch(exec2, s));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  check("h: (5 + 1) * 10 + 4 everywhere", all(h, 64));
  expect("cuGraphLaunch (first again)", cuGraphLaunch(exec, s));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  check("h2: the first instance's parameters, (7 + 1) * 2", all(h2, 16));

  // The same three kinds through cuGraphAddNode: memset 2 -> add_one -> copy to h2.
  CUgraph g2;
  expect("cuGraphCreate (cuGraphAddNode)", cuGraphCreate(&g2, 0));
  CUgraphNodeParams np;
  std::memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_MEMSET;
  np.memset.dst = d, np.memset.value = 2, np.memset.elementSize = 4, np.memset.width = N, np.memset.height = 1;
  np.memset.ctx = ctx;
  CUgraphNode a_set, a_add, a_copy;
  expect("cuGraphAddNode(memset)", cuGraphAddNode(&a_set, g2, nullptr, nullptr, 0, &np));
  std::memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  np.kernel.func = f_add;
  np.kernel.gridDimX = N / kBlock, np.kernel.gridDimY = 1, np.kernel.gridDimZ = 1;
  np.kernel.blockDimX = kBlock, np.kernel.blockDimY = 1, np.kernel.blockDimZ = 1;
  np.kernel.kernelParams = add_args;
  expect("cuGraphAddNode(kernel)", cuGraphAddNode(&a_add, g2, &a_set, nullptr, 1, &np));
  std::memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  np.memcpy.copyCtx = ctx;
  np.memcpy.copyParams = to_host(h2, d);
  expect("cuGraphAddNode(memcpy)", cuGraphAddNode(&a_copy, g2, &a_add, nullptr, 1, &np));
  CUgraphExec exec3;
  expect("cuGraphInstantiate (cuGraphAddNode)", cuGraphInstantiate(&exec3, g2, 0));
  expect("cuGraphLaunch (cuGraphAddNode)", cuGraphLaunch(exec3, s));
  expect("cuStreamSynchronize", cuStreamSynchronize(s));
  check("h2: 2 + 1 everywhere", all(h2, 3));

  expect("cuGraphExecDestroy", cuGraphExecDestroy(exec3));
  expect("cuGraphExecDestroy", cuGraphExecDestroy(exec2));
  expect("cuGraphExecDestroy", cuGraphExecDestroy(exec));
  expect("cuGraphDestroy", cuGraphDestroy(g2));
  expect("cuGraphDestroy", cuGraphDestroy(g));
  expect("cuStreamDestroy", cuStreamDestroy(s));
  expect("cuMemFreeHost", cuMemFreeHost(h2));
  expect("cuMemFreeHost", cuMemFreeHost(h));
  expect("cuMemFree", cuMemFree(d));
  expect("cuLibraryUnload", cuLibraryUnload(lib));
  expect("cuModuleUnload", cuModuleUnload(mod));
  std::printf("failures: %d\n", failures);
  return failures ? 1 : 0;
}
