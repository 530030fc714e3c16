// The rest of the runtime, part 3 (calls.def 0x1d00), against an in-process stub on the test
// executor: a capture's graph and dependencies (cudaStreamGetCaptureInfo) changed by
// cudaStreamUpdateCaptureDependencies, cudaMemcpy3DPeer[Async], cudaMemcpy3DBatchAsync, and the
// sparse / memory-requirement queries of (dense) arrays.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;

// Two devices, for 3D peer copies between them.
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new vmcuda::host::test::GuestStubEnvironment({0, 1}));

class GuestRuntimeExt : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(Remote::get(nullptr), nullptr); }
  void TearDown() override { (void)vmcuda::guest::take_last_error(); }
};

cudaPitchedPtr pitched(void* p, size_t pitch, size_t xsize, size_t ysize) { return {p, pitch, xsize, ysize}; }
cudaExtent extent(size_t w, size_t h, size_t d) { return {w, h, d}; }
cudaPos pos(size_t x, size_t y, size_t z) { return {x, y, z}; }

std::vector<unsigned char> read_back(const void* d, size_t n) {
  std::vector<unsigned char> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// The documented pattern: ask the capture for its graph and dependencies, add a node to that
// graph after them, make it the capture's only dependency, capture on; the capture ends in
// that graph, and a launch runs the three in that order.
TEST_F(GuestRuntimeExt, CaptureDependenciesUpdatedWithANodeAddedToTheCapturesGraph) {
  constexpr size_t kBytes = 64;
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, kBytes), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);

  // Not capturing: cudaErrorIllegalState, as CUDA documents.
  EXPECT_EQ(cudaStreamUpdateCaptureDependencies(s, nullptr, nullptr, 0, cudaStreamAddCaptureDependencies),
            cudaErrorIllegalState);

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 1, kBytes, s), cudaSuccess);  // all 1
  cudaStreamCaptureStatus status;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &status, &id, &graph, &deps, &edges, &count), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_NE(id, 0u);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(count, 1u);
  ASSERT_NE(deps, nullptr);
  cudaGraphNodeType type;
  ASSERT_EQ(cudaGraphNodeGetType(deps[0], &type), cudaSuccess);
  EXPECT_EQ(type, cudaGraphNodeTypeMemset);
  // Asked again: the same graph and node handles.
  cudaGraph_t again = nullptr;
  const cudaGraphNode_t* deps2 = nullptr;
  size_t count2 = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &status, nullptr, &again, &deps2, nullptr, &count2), cudaSuccess);
  EXPECT_EQ(again, graph);
  ASSERT_EQ(count2, 1u);
  const cudaGraphNode_t first = deps2[0];

  // A node of the program's, after the captured memset: bytes [0, 32) = 2.
  cudaMemsetParams mp{};
  mp.dst = d;
  mp.value = 2;
  mp.elementSize = 1;
  mp.width = kBytes / 2;
  mp.height = 1;
  cudaGraphNode_t added = nullptr;
  ASSERT_EQ(cudaGraphAddMemsetNode(&added, graph, &first, 1, &mp), cudaSuccess);
  // Bad flags, a node of another graph, NULL nodes: refused.
  EXPECT_EQ(cudaStreamUpdateCaptureDependencies(s, &added, nullptr, 1, 7), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamUpdateCaptureDependencies(s, nullptr, nullptr, 1, 0), cudaErrorInvalidValue);
  cudaGraph_t other;
  ASSERT_EQ(cudaGraphCreate(&other, 0), cudaSuccess);
  cudaGraphNode_t stranger;
  ASSERT_EQ(cudaGraphAddEmptyNode(&stranger, other, nullptr, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamUpdateCaptureDependencies(s, &stranger, nullptr, 1, cudaStreamAddCaptureDependencies),
            cudaErrorInvalidValue);
  // The capture's next work depends on the added node only.
  ASSERT_EQ(cudaStreamUpdateCaptureDependencies(s, &added, nullptr, 1, cudaStreamSetCaptureDependencies),
            cudaSuccess);
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &count), cudaSuccess);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(deps[0], added);
  ASSERT_EQ(cudaMemsetAsync(d, 3, kBytes / 4, s), cudaSuccess);  // bytes [0, 16) = 3
  cudaGraph_t out = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &out), cudaSuccess);
  EXPECT_EQ(out, graph);  // the capture ends in the graph it gave
  size_t n = 0;
  ASSERT_EQ(cudaGraphGetNodes(out, nullptr, &n), cudaSuccess);
  EXPECT_EQ(n, 3u);
  size_t edge_count = 0;
  ASSERT_EQ(cudaGraphGetEdges(out, nullptr, nullptr, nullptr, &edge_count), cudaSuccess);
  EXPECT_EQ(edge_count, 2u);  // a chain: captured, added, captured

  ASSERT_EQ(cudaMemset(d, 0, kBytes), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, out, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const auto h = read_back(d, kBytes);
  for (size_t i = 0; i < kBytes; ++i) EXPECT_EQ(h[i], i < 16 ? 3 : i < 32 ? 2 : 1) << i;

  // After the capture: the graph is the program's (destroyed once); updating is illegal again.
  EXPECT_EQ(cudaStreamUpdateCaptureDependencies(s, &added, nullptr, 1, 0), cudaErrorIllegalState);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(out), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(other), cudaSuccess);

  // A capture whose graph was given and then invalidated: the graph is gone with it.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 1, kBytes, s), cudaSuccess);
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &status, nullptr, &graph, nullptr, nullptr, nullptr), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_NE(cudaStreamSynchronize(s), cudaSuccess);  // not allowed in a capture: invalidates it
  out = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &out), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &n), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// cudaMemcpy3DPeer on one device is cudaMemcpy3D of device memory; another device id is refused.
TEST_F(GuestRuntimeExt, Memcpy3DPeerOnOneDevice) {
  const cudaExtent whole{16, 4, 2};
  cudaPitchedPtr a, b;
  ASSERT_EQ(cudaMalloc3D(&a, whole), cudaSuccess);
  ASSERT_EQ(cudaMalloc3D(&b, whole), cudaSuccess);
  std::vector<unsigned char> src(whole.width * whole.height * whole.depth);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i);
  cudaMemcpy3DParms up{};
  up.srcPtr = pitched(src.data(), whole.width, whole.width, whole.height);
  up.dstPtr = a;
  up.extent = whole;
  up.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&up), cudaSuccess);
  ASSERT_EQ(cudaMemset3D(b, 0, whole), cudaSuccess);

  // A sub-volume: 8 x 2 x 2 from (4, 1, 0) to (0, 2, 0).
  cudaMemcpy3DPeerParms p{};
  p.srcPtr = a;
  p.srcPos = pos(4, 1, 0);
  p.srcDevice = 0;
  p.dstPtr = b;
  p.dstPos = pos(0, 2, 0);
  p.dstDevice = 0;
  p.extent = extent(8, 2, 2);
  ASSERT_EQ(cudaMemcpy3DPeer(&p), cudaSuccess);
  std::vector<unsigned char> got(src.size());
  cudaMemcpy3DParms down{};
  down.srcPtr = b;
  down.dstPtr = pitched(got.data(), whole.width, whole.width, whole.height);
  down.extent = whole;
  down.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3D(&down), cudaSuccess);
  for (size_t z = 0; z < 2; ++z)
    for (size_t y = 0; y < 4; ++y)
      for (size_t x = 0; x < 16; ++x) {
        const bool in = y >= 2 && x < 8;
        const unsigned char want = in ? src[z * 64 + (y - 1) * 16 + x + 4] : 0;
        EXPECT_EQ(got[z * 64 + y * 16 + x], want) << x << "," << y << "," << z;
      }
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  p.dstPos = pos(0, 0, 0);
  ASSERT_EQ(cudaMemcpy3DPeerAsync(&p, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(read_back(b.ptr, 1)[0], src[16 + 4]);
  // Errors: no parameters, a device that is not one of the VM's, host memory.
  EXPECT_EQ(cudaMemcpy3DPeer(nullptr), cudaErrorInvalidValue);
  p.dstDevice = 2;
  EXPECT_EQ(cudaMemcpy3DPeer(&p), cudaErrorInvalidDevice);
  p.dstDevice = -1;
  EXPECT_EQ(cudaMemcpy3DPeerAsync(&p, s), cudaErrorInvalidDevice);
  p.dstDevice = 0;
  p.srcPtr = pitched(src.data(), whole.width, whole.width, whole.height);
  EXPECT_EQ(cudaMemcpy3DPeer(&p), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(a.ptr), cudaSuccess);
  ASSERT_EQ(cudaFree(b.ptr), cudaSuccess);
}

// Between two devices: the region's rows as peer copies (queued, synchronous form and async).
TEST_F(GuestRuntimeExt, Memcpy3DPeerBetweenTwoDevices) {
  const cudaExtent whole = extent(16, 4, 2);
  cudaPitchedPtr a, b;
  ASSERT_EQ(cudaMalloc3D(&a, whole), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc3D(&b, whole), cudaSuccess);
  ASSERT_EQ(cudaMemset3D(b, 0, whole), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::vector<unsigned char> src(16 * 4 * 2), got(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(200 - i);
  cudaMemcpy3DParms up{};
  up.srcPtr = pitched(src.data(), 16, 16, 4);
  up.dstPtr = a;
  up.extent = whole;
  up.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&up), cudaSuccess);
  cudaMemcpy3DPeerParms p{};
  p.srcPtr = a;
  p.srcPos = pos(1, 0, 0);
  p.srcDevice = 0;
  p.dstPtr = b;
  p.dstPos = pos(0, 1, 1);
  p.dstDevice = 1;
  p.extent = extent(10, 3, 1);
  ASSERT_EQ(cudaMemcpy3DPeer(&p), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy3DParms down{};
  down.srcPtr = b;
  down.dstPtr = pitched(got.data(), 16, 16, 4);
  down.extent = whole;
  down.kind = cudaMemcpyDeviceToHost;
  ASSERT_EQ(cudaMemcpy3D(&down), cudaSuccess);
  for (size_t z = 0; z < 2; ++z)
    for (size_t y = 0; y < 4; ++y)
      for (size_t x = 0; x < 16; ++x) {
        const bool in = z == 1 && y >= 1 && x < 10;
        EXPECT_EQ(got[z * 64 + y * 16 + x], in ? src[(y - 1) * 16 + x + 1] : 0) << x << "," << y << "," << z;
      }
  // Async on a stream of device 1: the whole volume.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  p.srcPos = pos(0, 0, 0);
  p.dstPos = pos(0, 0, 0);
  p.extent = whole;
  ASSERT_EQ(cudaMemcpy3DPeerAsync(&p, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy3D(&down), cudaSuccess);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], src[i]) << i;
  // Arrays between two devices are not offered.
  cudaArray_t arr;
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  ASSERT_EQ(cudaMallocArray(&arr, &desc, 16, 4, 0), cudaSuccess);
  p.dstPtr = {};
  p.dstArray = arr;
  p.extent = extent(16, 4, 1);
  EXPECT_EQ(cudaMemcpy3DPeer(&p), cudaErrorNotSupported);
  ASSERT_EQ(cudaFreeArray(arr), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(b.ptr), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(a.ptr), cudaSuccess);
}

// A batch of 3D copies: pageable host memory to device memory with a row length, device to an
// array and back; the whole batch is checked before anything is copied.
TEST_F(GuestRuntimeExt, Memcpy3DBatchAsync) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  constexpr size_t W = 8, H = 3, D = 2, kRow = 10;  // host rows are 10 bytes apart
  std::vector<unsigned char> host(kRow * H * D);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(100 + i);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, W * H * D), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev, 0, W * H * D), cudaSuccess);
  cudaArray_t arr;
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  ASSERT_EQ(cudaMalloc3DArray(&arr, &desc, extent(W, H, D), 0), cudaSuccess);
  void* back = nullptr;
  ASSERT_EQ(cudaMalloc(&back, W * H * D), cudaSuccess);

  cudaMemcpy3DBatchOp ops[2] = {};
  ops[0].src.type = cudaMemcpyOperandTypePointer;
  ops[0].src.op.ptr.ptr = host.data();
  ops[0].src.op.ptr.rowLength = kRow;
  ops[0].dst.type = cudaMemcpyOperandTypePointer;
  ops[0].dst.op.ptr.ptr = dev;
  ops[0].extent = extent(W, H, D);
  ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  ASSERT_EQ(cudaMemcpy3DBatchAsync(1, ops, 0, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  // Then the device bytes into the array and the array into `back`, in one batch.
  ops[0].src.op.ptr.ptr = dev;
  ops[0].src.op.ptr.rowLength = 0;
  ops[0].dst.type = cudaMemcpyOperandTypeArray;
  ops[0].dst.op.array.array = arr;
  ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  ops[1].src.type = cudaMemcpyOperandTypeArray;
  ops[1].src.op.array.array = arr;
  ops[1].src.op.array.offset = {0, 1, 0};  // rows 1 and 2 of each layer
  ops[1].dst.type = cudaMemcpyOperandTypePointer;
  ops[1].dst.op.ptr.ptr = back;
  ops[1].dst.op.ptr.layerHeight = H;
  ops[1].extent = extent(W, H - 1, D);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  ASSERT_EQ(cudaMemcpy3DBatchAsync(2, ops, 0, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const auto d = read_back(dev, W * H * D);
  for (size_t z = 0; z < D; ++z)
    for (size_t y = 0; y < H; ++y)
      for (size_t x = 0; x < W; ++x) EXPECT_EQ(d[(z * H + y) * W + x], host[(z * H + y) * kRow + x]);
  const auto b = read_back(back, W * H * D);
  for (size_t z = 0; z < D; ++z)
    for (size_t y = 0; y + 1 < H; ++y)
      for (size_t x = 0; x < W; ++x) EXPECT_EQ(b[(z * H + y) * W + x], d[(z * H + y + 1) * W + x]);

  // Checked as CUDA documents: flags, the legacy stream, an access order, a zero extent, a
  // row length below the width; nothing of a bad batch is copied.
  ASSERT_EQ(cudaMemset(back, 0, W * H * D), cudaSuccess);
  EXPECT_EQ(cudaMemcpy3DBatchAsync(2, ops, 1, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy3DBatchAsync(2, ops, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy3DBatchAsync(0, ops, 0, s), cudaErrorInvalidValue);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
  EXPECT_EQ(cudaMemcpy3DBatchAsync(2, ops, 0, s), cudaErrorInvalidValue);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderAny;
  ops[1].extent.depth = 0;
  EXPECT_EQ(cudaMemcpy3DBatchAsync(2, ops, 0, s), cudaErrorInvalidValue);
  ops[1].extent.depth = D;
  ops[0].src.op.ptr.rowLength = W - 1;
  EXPECT_EQ(cudaMemcpy3DBatchAsync(2, ops, 0, s), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (unsigned char c : read_back(back, W * H * D)) EXPECT_EQ(c, 0);
  ASSERT_EQ(cudaFreeArray(arr), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  ASSERT_EQ(cudaFree(back), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Arrays here are dense: the sparse and deferred-mapping queries answer as CUDA does for one.
TEST_F(GuestRuntimeExt, ArrayQueriesOfDenseArrays) {
  cudaArray_t arr;
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
  ASSERT_EQ(cudaMallocArray(&arr, &desc, 16, 16, 0), cudaSuccess);
  cudaMipmappedArray_t mip;
  ASSERT_EQ(cudaMallocMipmappedArray(&mip, &desc, extent(16, 16, 0), 3, 0), cudaSuccess);
  cudaArraySparseProperties sp{};
  cudaArrayMemoryRequirements mr{};
  EXPECT_EQ(cudaArrayGetSparseProperties(&sp, arr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMipmappedArrayGetSparseProperties(&sp, mip), cudaErrorInvalidValue);
  EXPECT_EQ(cudaArrayGetMemoryRequirements(&mr, arr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMipmappedArrayGetMemoryRequirements(&mr, mip, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaArrayGetMemoryRequirements(&mr, arr, 5), cudaErrorInvalidDevice);
  cudaArray_t plane = nullptr;
  EXPECT_EQ(cudaArrayGetPlane(&plane, arr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaArrayGetSparseProperties(nullptr, arr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaArrayGetSparseProperties(&sp, reinterpret_cast<cudaArray_t>(&sp)), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMipmappedArrayGetMemoryRequirements(&mr, reinterpret_cast<cudaMipmappedArray_t>(&mr), 0),
            cudaErrorInvalidResourceHandle);
  // Sparse arrays are not made at all.
  cudaArray_t sparse;
  EXPECT_EQ(cudaMalloc3DArray(&sparse, &desc, extent(64, 64, 0), cudaArraySparse), cudaErrorNotSupported);
  ASSERT_EQ(cudaFreeArray(arr), cudaSuccess);
  ASSERT_EQ(cudaFreeMipmappedArray(mip), cudaSuccess);
}

}  // namespace
