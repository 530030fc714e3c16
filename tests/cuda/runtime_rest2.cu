// The rest of the runtime, part 3: cudaLibraryGetKernelCount/EnumerateKernels, a capture's
// graph and dependencies from cudaStreamGetCaptureInfo changed by
// cudaStreamUpdateCaptureDependencies, cudaMemcpy3DPeer[Async], cudaMemcpy3DBatchAsync and the
// sparse / memory-requirement / plane queries of a (dense) CUDA array. Its module is
// runtime_rest2_kernels.cu (a fatbin embedded by scripts/build-cuda-tests.sh). Prints what it
// sees (deterministic; compared with the native run) and the number of failed expectations.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime_rest2_fatbin.h"  // runtime_rest2_fatbin[]

#include "runtime_check.h"

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash still shows how far it got
  expect("cudaFree(0)", cudaFree(nullptr));

  // ---- a library's kernels
  cudaLibrary_t lib = nullptr;
  expect("cudaLibraryLoadData", cudaLibraryLoadData(&lib, runtime_rest2_fatbin, nullptr, nullptr, 0, nullptr,
                                                    nullptr, 0));
  unsigned int count = 0;
  expect("cudaLibraryGetKernelCount", cudaLibraryGetKernelCount(&count, lib));
  std::printf("kernels in the library: %u\n", count);
  std::vector<cudaKernel_t> kernels(count > 0 ? count : 1, nullptr);
  expect("cudaLibraryEnumerateKernels", cudaLibraryEnumerateKernels(kernels.data(), count, lib));
  int found = 0;
  for (const char* name : {"_Z7add_onePii", "_Z9scale_addPiiii", "vecadd"}) {
    cudaKernel_t k = nullptr;
    expect(name, cudaLibraryGetKernel(&k, lib, name));
    found += std::count(kernels.begin(), kernels.end(), k) == 1;
  }
  std::printf("kernels enumerated that cudaLibraryGetKernel names: %d\n", found);
  cudaKernel_t first[2] = {nullptr, nullptr};
  expect("cudaLibraryEnumerateKernels of one", cudaLibraryEnumerateKernels(first, 1, lib));
  check("one kernel given", first[0] != nullptr && first[1] == nullptr);
  expect("cudaLibraryGetKernelCount with no output", cudaLibraryGetKernelCount(nullptr, lib), cudaErrorInvalidValue);
  cudaKernel_t add_one = nullptr;
  expect("cudaLibraryGetKernel add_one", cudaLibraryGetKernel(&add_one, lib, "_Z7add_onePii"));

  // ---- capture: the graph being captured and its dependencies, changed by the program
  const int n = 256;
  int *d = nullptr, *e = nullptr;
  expect("cudaMalloc d", cudaMalloc(&d, n * sizeof(int)));
  expect("cudaMalloc e", cudaMalloc(&e, n * sizeof(int)));
  cudaStream_t s;
  expect("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  expect("cudaStreamUpdateCaptureDependencies when not capturing",
         cudaStreamUpdateCaptureDependencies(s, nullptr, nullptr, 0, cudaStreamAddCaptureDependencies),
         cudaErrorIllegalState);
  expect("cudaStreamBeginCapture", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  expect("cudaMemsetAsync (captured)", cudaMemsetAsync(d, 0, n * sizeof(int), s));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  size_t ndeps = 0;
  expect("cudaStreamGetCaptureInfo", cudaStreamGetCaptureInfo(s, &status, nullptr, &graph, &deps, nullptr, &ndeps));
  std::printf("capture: status %d, graph given: %s, dependencies: %zu\n", static_cast<int>(status),
              graph ? "yes" : "no", ndeps);
  cudaGraphNodeType type = cudaGraphNodeTypeCount;
  if (ndeps == 1) expect("cudaGraphNodeGetType of the dependency", cudaGraphNodeGetType(deps[0], &type));
  std::printf("dependency type: %d\n", static_cast<int>(type));
  // A node of the program's after the captured memset: the first half of d = 5.
  cudaMemsetParams mp{};
  mp.dst = d;
  mp.value = 5;
  mp.elementSize = 4;
  mp.width = n / 2;
  mp.height = 1;
  cudaGraphNode_t added = nullptr;
  const cudaGraphNode_t after = ndeps == 1 ? deps[0] : nullptr;
  expect("cudaGraphAddMemsetNode to the capture's graph", cudaGraphAddMemsetNode(&added, graph, &after, 1, &mp));
  expect("cudaStreamUpdateCaptureDependencies with bad flags",
         cudaStreamUpdateCaptureDependencies(s, &added, nullptr, 1, 7), cudaErrorInvalidValue);
  expect("cudaStreamUpdateCaptureDependencies (set)",
         cudaStreamUpdateCaptureDependencies(s, &added, nullptr, 1, cudaStreamSetCaptureDependencies));
  expect("cudaStreamGetCaptureInfo again", cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &ndeps));
  check("the added node is the dependency", ndeps == 1 && deps[0] == added);
  // Then a kernel on the stream: every element + 1.
  int count_arg = n;
  void* args[] = {&d, &count_arg};
  expect("cudaLaunchKernel (captured)",
         cudaLaunchKernel(reinterpret_cast<const void*>(add_one), dim3(1), dim3(n), args, 0, s));
  // A root node of the program's (e = 7) added to the capture's dependencies with the kernel.
  cudaMemsetParams ep = mp;
  ep.dst = e;
  ep.value = 7;
  ep.width = n;
  cudaGraphNode_t root = nullptr;
  expect("cudaGraphAddMemsetNode (a root)", cudaGraphAddMemsetNode(&root, graph, nullptr, 0, &ep));
  expect("cudaStreamUpdateCaptureDependencies (add)",
         cudaStreamUpdateCaptureDependencies(s, &root, nullptr, 1, cudaStreamAddCaptureDependencies));
  expect("cudaStreamGetCaptureInfo a third time",
         cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &ndeps));
  std::printf("dependencies now: %zu\n", ndeps);
  // Copy e's first quarter over d's last quarter: after both.
  expect("cudaMemcpyAsync (captured)",
         cudaMemcpyAsync(d + 3 * n / 4, e, n / 4 * sizeof(int), cudaMemcpyDeviceToDevice, s));
  cudaGraph_t out = nullptr;
  expect("cudaStreamEndCapture", cudaStreamEndCapture(s, &out));
  check("the capture ended in the graph it gave", out == graph);
  size_t nodes = 0, edges = 0;
  expect("cudaGraphGetNodes", cudaGraphGetNodes(out, nullptr, &nodes));
  expect("cudaGraphGetEdges", cudaGraphGetEdges(out, nullptr, nullptr, nullptr, &edges));
  std::printf("graph: %zu nodes, %zu edges\n", nodes, edges);
  cudaGraphExec_t exec = nullptr;
  expect("cudaGraphInstantiate", cudaGraphInstantiate(&exec, out, 0));
  expect("cudaGraphLaunch", cudaGraphLaunch(exec, s));
  expect("cudaStreamSynchronize", cudaStreamSynchronize(s));
  std::vector<int> h(n);
  expect("cudaMemcpy out", cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  std::printf("d: %d %d %d %d %d\n", h[0], h[n / 2 - 1], h[n / 2], h[3 * n / 4 - 1], h[3 * n / 4]);
  check("the graph ran in the order set", h[0] == 6 && h[n / 2] == 1 && h[3 * n / 4] == 7);
  expect("cudaStreamUpdateCaptureDependencies after the capture",
         cudaStreamUpdateCaptureDependencies(s, &added, nullptr, 1, 0), cudaErrorIllegalState);
  expect("cudaGraphExecDestroy", cudaGraphExecDestroy(exec));
  expect("cudaGraphDestroy", cudaGraphDestroy(out));

  // ---- 3D peer copies on one device
  const cudaExtent whole = make_cudaExtent(16, 4, 2);
  cudaPitchedPtr a, b;
  expect("cudaMalloc3D a", cudaMalloc3D(&a, whole));
  expect("cudaMalloc3D b", cudaMalloc3D(&b, whole));
  std::vector<unsigned char> src(16 * 4 * 2), got(16 * 4 * 2);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i);
  cudaMemcpy3DParms up{};
  up.srcPtr = make_cudaPitchedPtr(src.data(), 16, 16, 4);
  up.dstPtr = a;
  up.extent = whole;
  up.kind = cudaMemcpyHostToDevice;
  expect("cudaMemcpy3D in", cudaMemcpy3D(&up));
  expect("cudaMemset3D b", cudaMemset3D(b, 0, whole));
  cudaMemcpy3DPeerParms p{};
  p.srcPtr = a;
  p.srcPos = make_cudaPos(4, 1, 0);
  p.srcDevice = 0;
  p.dstPtr = b;
  p.dstPos = make_cudaPos(0, 2, 0);
  p.dstDevice = 0;
  p.extent = make_cudaExtent(8, 2, 2);
  expect("cudaMemcpy3DPeer", cudaMemcpy3DPeer(&p));
  cudaMemcpy3DParms down{};
  down.srcPtr = b;
  down.dstPtr = make_cudaPitchedPtr(got.data(), 16, 16, 4);
  down.extent = whole;
  down.kind = cudaMemcpyDeviceToHost;
  expect("cudaMemcpy3D out", cudaMemcpy3D(&down));
  std::printf("peer copy: %d %d %d %d\n", got[0], got[2 * 16], got[2 * 16 + 7], got[64 + 3 * 16 + 7]);
  p.dstPos = make_cudaPos(8, 0, 0);
  expect("cudaMemcpy3DPeerAsync", cudaMemcpy3DPeerAsync(&p, s));
  expect("cudaStreamSynchronize", cudaStreamSynchronize(s));
  expect("cudaMemcpy3D out again", cudaMemcpy3D(&down));
  std::printf("peer copy async: %d %d\n", got[8], got[64 + 16 + 15]);
  p.dstDevice = 99;
  expect("cudaMemcpy3DPeer to no such device", cudaMemcpy3DPeer(&p), cudaErrorInvalidDevice);

  // ---- batched 3D copies
  const size_t W = 8, H = 3, D = 2, row = 10;
  std::vector<unsigned char> host(row * H * D), back(W * H * D, 0);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(100 + i);
  unsigned char *dev = nullptr, *dev2 = nullptr;
  expect("cudaMalloc dev", cudaMalloc(&dev, W * H * D));
  expect("cudaMalloc dev2", cudaMalloc(&dev2, W * H * D));
  expect("cudaMemset dev2", cudaMemset(dev2, 0, W * H * D));
  cudaArray_t arr = nullptr;
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc<unsigned char>();
  expect("cudaMalloc3DArray", cudaMalloc3DArray(&arr, &desc, make_cudaExtent(W, H, D)));
  cudaMemcpy3DBatchOp ops[2] = {};
  ops[0].src.type = cudaMemcpyOperandTypePointer;
  ops[0].src.op.ptr.ptr = host.data();
  ops[0].src.op.ptr.rowLength = row;
  ops[0].dst.type = cudaMemcpyOperandTypePointer;
  ops[0].dst.op.ptr.ptr = dev;
  ops[0].extent = make_cudaExtent(W, H, D);
  ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  expect("cudaMemcpy3DBatchAsync of pageable memory", cudaMemcpy3DBatchAsync(1, ops, 0, s));
  expect("cudaStreamSynchronize", cudaStreamSynchronize(s));
  ops[0].src.op.ptr.ptr = dev;
  ops[0].src.op.ptr.rowLength = 0;
  ops[0].dst.type = cudaMemcpyOperandTypeArray;
  ops[0].dst.op.array.array = arr;
  ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  expect("cudaMemcpy3DBatchAsync into the array", cudaMemcpy3DBatchAsync(1, ops, 0, s));
  ops[1].src.type = cudaMemcpyOperandTypeArray;
  ops[1].src.op.array.array = arr;
  ops[1].src.op.array.offset.y = 1;
  ops[1].dst.type = cudaMemcpyOperandTypePointer;
  ops[1].dst.op.ptr.ptr = dev2;
  ops[1].dst.op.ptr.layerHeight = H;
  ops[1].extent = make_cudaExtent(W, H - 1, D);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  expect("cudaMemcpy3DBatchAsync out of the array", cudaMemcpy3DBatchAsync(1, ops + 1, 0, s));
  expect("cudaStreamSynchronize", cudaStreamSynchronize(s));
  expect("cudaMemcpy back", cudaMemcpy(back.data(), dev2, back.size(), cudaMemcpyDeviceToHost));
  std::printf("batch 3D: %d %d %d %d\n", back[0], back[7], back[W * H], back[W * H + W + 7]);
  check("rows moved as asked", back[0] == host[row] && back[W * H + W + 7] == host[row * H + 2 * row + 7]);
  expect("cudaMemcpy3DBatchAsync with flags", cudaMemcpy3DBatchAsync(2, ops, 1, s), cudaErrorInvalidValue);
  expect("cudaMemcpy3DBatchAsync on the NULL stream", cudaMemcpy3DBatchAsync(2, ops, 0, nullptr),
         cudaErrorInvalidValue);
  ops[1].extent.depth = 0;
  expect("cudaMemcpy3DBatchAsync of a zero extent", cudaMemcpy3DBatchAsync(2, ops, 0, s), cudaErrorInvalidValue);

  // ---- a dense array's sparse, memory-requirement and plane queries
  cudaArraySparseProperties sparse{};
  cudaArrayMemoryRequirements req{};
  cudaArray_t plane = nullptr;
  expect("cudaArrayGetSparseProperties of a dense array", cudaArrayGetSparseProperties(&sparse, arr),
         cudaErrorInvalidValue);
  expect("cudaArrayGetMemoryRequirements of an array not deferred", cudaArrayGetMemoryRequirements(&req, arr, 0),
         cudaErrorInvalidValue);
  expect("cudaArrayGetPlane of a single-plane array", cudaArrayGetPlane(&plane, arr, 0), cudaErrorInvalidValue);
  cudaMipmappedArray_t mip = nullptr;
  expect("cudaMallocMipmappedArray", cudaMallocMipmappedArray(&mip, &desc, make_cudaExtent(16, 16, 0), 2));
  expect("cudaMipmappedArrayGetSparseProperties of a dense one", cudaMipmappedArrayGetSparseProperties(&sparse, mip),
         cudaErrorInvalidValue);
  expect("cudaMipmappedArrayGetMemoryRequirements of one not deferred",
         cudaMipmappedArrayGetMemoryRequirements(&req, mip, 0), cudaErrorInvalidValue);

  expect("cudaFreeMipmappedArray", cudaFreeMipmappedArray(mip));
  expect("cudaFreeArray", cudaFreeArray(arr));
  expect("cudaStreamDestroy", cudaStreamDestroy(s));
  expect("cudaLibraryUnload", cudaLibraryUnload(lib));
  cudaFree(a.ptr);
  cudaFree(b.ptr);
  cudaFree(dev);
  cudaFree(dev2);
  cudaFree(d);
  cudaFree(e);
  std::printf("failures: %d\n", failures);
  return failures == 0 ? 0 : 1;
}
