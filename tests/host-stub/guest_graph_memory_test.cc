// Graph memory (guest-lib graph_memory.cc) against vmcuda-stub in this process, on the test
// executor: alloc and free nodes are empty nodes of the host's graph, their memory the client's
// arena (device memory the host counts: cudaMemGetInfo, refused beyond the device), reserved for
// graphs once neither a graph nor an executable graph holds the node and it is not live, until
// cudaDeviceGraphMemTrim (given back at once when no launch allocated it); CUDA's launch and
// free rules; the restrictions on graphs with memory nodes; the attributes; cudaDeviceReset.
#include <gtest/gtest.h>

#include <vector>

#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

// Counts the host's empty nodes (the memory nodes' stand-ins).
vmcuda::host::DriverApi g_real;
std::atomic<int> g_empty_nodes{0};

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(
    new vmcuda::host::test::GuestStubEnvironment({0}, [](vmcuda::host::DriverApi& api) {
      g_real = api;
      api.cuGraphAddEmptyNode = [](vmcuda::host::CUgraphNode* n, vmcuda::host::CUgraph g,
                                   const vmcuda::host::CUgraphNode* deps, size_t count) {
        g_empty_nodes.fetch_add(1);
        return g_real.cuGraphAddEmptyNode(n, g, deps, count);
      };
    }));

constexpr size_t kBytes = 1 << 20;

cudaMemAllocNodeParams params(size_t bytes, int device = 0) {
  cudaMemAllocNodeParams p{};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = device;
  p.bytesize = bytes;
  return p;
}

size_t free_bytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

uint64_t attr(cudaGraphMemAttributeType a) {
  uint64_t v = ~0ull;
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, a, &v), cudaSuccess);
  return v;
}

bool is_device_memory(const void* p) {
  cudaPointerAttributes pa{};
  const cudaError_t e = cudaPointerGetAttributes(&pa, p);
  (void)last_error();
  return e == cudaSuccess && pa.type == cudaMemoryTypeDevice;
}

class GuestGraphMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaStreamCreate(&s_), cudaSuccess);
    (void)last_error();
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamDestroy(s_), cudaSuccess);
    EXPECT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);  // each test starts with nothing reserved
  }
  cudaStream_t s_ = nullptr;
};

// The node's memory is the arena's from the node's creation (the host counts it) to the graph's
// destruction; the host's graph holds an empty node in its place.
TEST_F(GuestGraphMemory, AllocNodeIsArenaMemoryUntilItsGraphGoes) {
  const size_t before = free_bytes();
  const int empties = g_empty_nodes.load();
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaMemAllocNodeParams p = params(kBytes);
  cudaGraphNode_t alloc;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  ASSERT_NE(p.dptr, nullptr);
  EXPECT_EQ(g_empty_nodes.load(), empties + 1);
  EXPECT_LE(free_bytes() + kBytes, before);
  EXPECT_TRUE(is_device_memory(p.dptr));
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), 0u);  // not launched: not allocated
  cudaGraphNodeType t;
  ASSERT_EQ(cudaGraphNodeGetType(alloc, &t), cudaSuccess);
  EXPECT_EQ(t, cudaGraphNodeTypeMemAlloc);
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(g, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1u);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(free_bytes(), before);
  EXPECT_FALSE(is_device_memory(p.dptr));
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
}

// An alloc node beyond the device's memory (the VM's quota) fails when it is made; nothing is
// added to the graph.
TEST_F(GuestGraphMemory, AllocBeyondTheMemoryFailsAtCreation) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  cudaMemAllocNodeParams p = params(total * 2);
  cudaGraphNode_t alloc;
  EXPECT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaErrorMemoryAllocation);
  EXPECT_EQ(last_error(), cudaErrorMemoryAllocation);
  size_t count = 1;
  ASSERT_EQ(cudaGraphGetNodes(g, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0u);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
}

TEST_F(GuestGraphMemory, ParameterChecks) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaGraphNode_t n;
  cudaMemAllocNodeParams p = params(0);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p), cudaErrorInvalidValue);
  p = params(kBytes, 7);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p), cudaErrorInvalidDevice);
  p = params(kBytes);
  p.poolProps.allocType = cudaMemAllocationTypeManaged;
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p), cudaErrorInvalidValue);
  p = params(kBytes);
  p.poolProps.handleTypes = cudaMemHandleTypePosixFileDescriptor;  // IPC is not supported (CUDA)
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p), cudaErrorInvalidValue);
  p = params(kBytes);
  p.accessDescCount = 5;  // more than the devices
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p), cudaErrorInvalidValue);
  p = params(kBytes);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, reinterpret_cast<cudaGraph_t>(0x4242), nullptr, 0, &p),
            cudaErrorInvalidValue);  // no graph of this process
  const cudaGraphNode_t forged = reinterpret_cast<cudaGraphNode_t>(0x777777);
  EXPECT_EQ(cudaGraphAddMemAllocNode(&n, g, &forged, 1, &p), cudaErrorInvalidValue);  // the host refuses the node
  // The failed node's memory went back: nothing reserved.
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  void* plain;
  ASSERT_EQ(cudaMalloc(&plain, 64), cudaSuccess);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&n, g, nullptr, 0, plain), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&n, g, nullptr, 0, reinterpret_cast<void*>(0x1234)), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(plain), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  (void)last_error();
}

// A graph with its own free node: launched again and again; the memory is live only between
// the two nodes; it cannot be freed outside; the graph's restrictions.
TEST_F(GuestGraphMemory, AllocAndFreeInOneGraph) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaMemAllocNodeParams p = params(kBytes);
  cudaGraphNode_t alloc, set, freed, other;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  const cudaMemsetParams ms{p.dptr, 0, 7, 1, kBytes, 1};
  ASSERT_EQ(cudaGraphAddMemsetNode(&set, g, &alloc, 1, &ms), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemFreeNode(&freed, g, &set, 1, p.dptr), cudaSuccess);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&other, g, &freed, 1, p.dptr), cudaErrorInvalidValue);  // twice
  cudaGraph_t g2;
  ASSERT_EQ(cudaGraphCreate(&g2, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&other, g2, nullptr, 0, p.dptr), cudaErrorInvalidValue);  // freed in its own
  cudaGraph_t clone;
  EXPECT_EQ(cudaGraphClone(&clone, g), cudaErrorNotSupported);
  EXPECT_EQ(cudaGraphAddChildGraphNode(&other, g2, nullptr, 0, g), cudaErrorNotSupported);
  EXPECT_EQ(cudaGraphDestroyNode(freed), cudaErrorNotSupported);
  EXPECT_EQ(cudaGraphRemoveDependencies(g, &set, &freed, nullptr, 1), cudaErrorNotSupported);
  cudaGraphNodeType t;
  ASSERT_EQ(cudaGraphNodeGetType(freed, &t), cudaSuccess);
  EXPECT_EQ(t, cudaGraphNodeTypeMemFree);
  void* dptr = nullptr;
  ASSERT_EQ(cudaGraphMemFreeNodeGetParams(freed, &dptr), cudaSuccess);
  EXPECT_EQ(dptr, p.dptr);
  cudaMemAllocNodeParams got{};
  ASSERT_EQ(cudaGraphMemAllocNodeGetParams(alloc, &got), cudaSuccess);
  EXPECT_EQ(got.bytesize, kBytes);
  EXPECT_EQ(got.dptr, p.dptr);
  EXPECT_EQ(cudaGraphMemAllocNodeGetParams(freed, &got), cudaErrorInvalidValue);

  cudaGraphExec_t x, x2;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&x2, g, 0), cudaErrorNotSupported);  // one at a time
  for (int i = 0; i < 5; ++i) ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemHigh), kBytes);
  EXPECT_EQ(cudaFree(p.dptr), cudaErrorInvalidValue);  // its graph frees it
  // The graph goes, the executable graph still holds the node: the memory stays.
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_TRUE(is_device_memory(p.dptr));
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_FALSE(is_device_memory(p.dptr));
  ASSERT_EQ(cudaGraphDestroy(g2), cudaSuccess);
  (void)last_error();
}

// No free node: live after a launch until cudaFree/cudaFreeAsync, a relaunch meanwhile fails;
// AutoFreeOnLaunch relaunches; a live allocation outlives its graph.
TEST_F(GuestGraphMemory, LiveAllocationRules) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaMemAllocNodeParams p = params(kBytes);
  cudaGraphNode_t alloc;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  cudaGraphExec_t x;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  EXPECT_EQ(cudaFree(p.dptr), cudaErrorInvalidValue);  // not allocated yet
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), kBytes);
  EXPECT_EQ(cudaGraphLaunch(x, s_), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeAsync(p.dptr, s_), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_TRUE(is_device_memory(p.dptr));  // its address is the node's for the graph's life
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_TRUE(is_device_memory(p.dptr));  // live: the program frees it
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), kBytes);
  ASSERT_EQ(cudaFree(p.dptr), cudaSuccess);
  EXPECT_FALSE(is_device_memory(p.dptr));
  EXPECT_EQ(cudaFree(p.dptr), cudaErrorInvalidValue);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);  // the graph allocator's until a trim
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  (void)last_error();
}

// Memory a launch allocated stays reserved after its graphs are gone: a new alloc node takes it
// again (the same address, nothing more reserved), and a trim gives it back to the arena.
TEST_F(GuestGraphMemory, ReservedUntilTrim) {
  const size_t before = free_bytes();
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaMemAllocNodeParams p = params(kBytes);
  cudaGraphNode_t alloc, freed;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemFreeNode(&freed, g, &alloc, 1, p.dptr), cudaSuccess);
  cudaGraphExec_t x;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);
  EXPECT_LE(free_bytes() + kBytes, before);  // still the arena's
  EXPECT_FALSE(is_device_memory(p.dptr));    // but not the program's
  EXPECT_EQ(cudaFree(p.dptr), cudaErrorInvalidValue);

  cudaGraph_t g2;
  ASSERT_EQ(cudaGraphCreate(&g2, 0), cudaSuccess);
  cudaMemAllocNodeParams p2 = params(kBytes / 2);
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g2, nullptr, 0, &p2), cudaSuccess);
  EXPECT_EQ(p2.dptr, p.dptr);  // the reserved block, taken again
  EXPECT_TRUE(is_device_memory(p2.dptr));
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);
  EXPECT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);  // held by g2's node: it stays
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);
  ASSERT_EQ(cudaGraphDestroy(g2), cudaSuccess);  // never launched: back at once
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  EXPECT_EQ(free_bytes(), before);

  // A trim gives back what is reserved.
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  p = params(kBytes);
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemFreeNode(&freed, g, &alloc, 1, p.dptr), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);
  EXPECT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemHigh) >= kBytes, true);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);  // the host's Free waited for the launch
  EXPECT_EQ(free_bytes(), before);
  (void)last_error();
}

// Allocated in one graph, freed by another graph's free node.
TEST_F(GuestGraphMemory, FreedByAnotherGraph) {
  cudaGraph_t a, b;
  ASSERT_EQ(cudaGraphCreate(&a, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphCreate(&b, 0), cudaSuccess);
  cudaMemAllocNodeParams p = params(kBytes);
  cudaGraphNode_t alloc, freed, again;
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, a, nullptr, 0, &p), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemFreeNode(&freed, b, nullptr, 0, p.dptr), cudaSuccess);
  EXPECT_EQ(cudaGraphAddMemFreeNode(&again, a, &alloc, 1, p.dptr), cudaErrorInvalidValue);  // freed elsewhere
  cudaGraphExec_t xa, xb;
  ASSERT_EQ(cudaGraphInstantiate(&xa, a, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&xb, b, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(xa, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(xb, s_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(xa, s_), cudaSuccess);  // freed by b: allocated again
  ASSERT_EQ(cudaGraphExecDestroy(xa), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(a), cudaSuccess);
  EXPECT_TRUE(is_device_memory(p.dptr));  // live
  ASSERT_EQ(cudaGraphLaunch(xb, s_), cudaSuccess);  // frees it: nothing holds it now
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_FALSE(is_device_memory(p.dptr));
  ASSERT_EQ(cudaGraphExecDestroy(xb), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(b), cudaSuccess);
  (void)last_error();
}

// cudaMallocAsync and cudaFreeAsync on a capturing stream become alloc and free nodes (empty
// nodes on the host); the captured graph replays.
TEST_F(GuestGraphMemory, CapturedAllocAndFree) {
  const int empties = g_empty_nodes.load();
  ASSERT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMallocAsync(&d, kBytes, s_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 3, kBytes, s_), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(d, s_), cudaSuccess);
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamEndCapture(s_, &g), cudaSuccess);
  EXPECT_EQ(g_empty_nodes.load(), empties + 2);
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(g, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 3u);
  cudaGraphNode_t root;
  size_t roots = 1;
  ASSERT_EQ(cudaGraphGetRootNodes(g, &root, &roots), cudaSuccess);
  ASSERT_EQ(roots, 1u);
  cudaGraphNodeType t;
  ASSERT_EQ(cudaGraphNodeGetType(root, &t), cudaSuccess);
  EXPECT_EQ(t, cudaGraphNodeTypeMemAlloc);
  cudaGraphNode_t after;
  size_t n = 1;
  ASSERT_EQ(cudaGraphNodeGetDependentNodes(root, &after, nullptr, &n), cudaSuccess);
  ASSERT_EQ(n, 1u);
  ASSERT_EQ(cudaGraphNodeGetType(after, &t), cudaSuccess);
  EXPECT_EQ(t, cudaGraphNodeTypeMemset);
  cudaGraphExec_t x;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), 0u);
  ASSERT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_FALSE(is_device_memory(d));
  (void)last_error();
}

// A capture that is invalidated takes its alloc nodes' memory with it.
TEST_F(GuestGraphMemory, InvalidatedCaptureGivesTheMemoryBack) {
  ASSERT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* d = nullptr;
  ASSERT_EQ(cudaMallocAsync(&d, kBytes, s_), cudaSuccess);
  EXPECT_TRUE(is_device_memory(d));
  // A synchronizing call on the capturing stream invalidates it.
  EXPECT_NE(cudaStreamSynchronize(s_), cudaSuccess);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s_, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_FALSE(is_device_memory(d));
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  (void)last_error();
}

TEST_F(GuestGraphMemory, Attributes) {
  uint64_t zero = 0, five = 5, v = 0;
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemHigh), 0u);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemHigh), 0u);
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &five), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &zero), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, static_cast<cudaGraphMemAttributeType>(9), &v), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(3, cudaGraphMemAttrUsedMemCurrent, &v), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);
  EXPECT_EQ(cudaDeviceGraphMemTrim(-1), cudaErrorInvalidDevice);
  (void)last_error();
}

// cudaDeviceReset frees the device's graph memory, live or reserved, with its graphs: the
// attributes start at 0 and the arena has it all back.
TEST_F(GuestGraphMemory, DeviceResetFreesGraphMemory) {
  const size_t before = free_bytes();
  cudaGraph_t g, g2;
  cudaGraphNode_t alloc, alloc2, freed2;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaMemAllocNodeParams p = params(kBytes);
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  ASSERT_EQ(cudaGraphCreate(&g2, 0), cudaSuccess);
  cudaMemAllocNodeParams p2 = params(kBytes);
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc2, g2, nullptr, 0, &p2), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemFreeNode(&freed2, g2, &alloc2, 1, p2.dptr), cudaSuccess);
  cudaGraphExec_t x, x2;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&x2, g2, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s_), cudaSuccess);   // live
  ASSERT_EQ(cudaGraphLaunch(x2, s_), cudaSuccess);  // reserved once its graphs go
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(x2), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g2), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), kBytes);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 2 * kBytes);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);  // s_ goes too
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  EXPECT_EQ(attr(cudaGraphMemAttrUsedMemHigh), 0u);
  EXPECT_FALSE(is_device_memory(p.dptr));
  EXPECT_EQ(cudaFree(p.dptr), cudaErrorInvalidValue);
  EXPECT_EQ(free_bytes(), before);
  // New graph memory after the reset: its own records, whatever address the arena gives.
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  p = params(kBytes);
  ASSERT_EQ(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), kBytes);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(attr(cudaGraphMemAttrReservedMemCurrent), 0u);
  ASSERT_EQ(cudaStreamCreate(&s_), cudaSuccess);  // for TearDown
  (void)last_error();
}

}  // namespace
