// Graph host nodes whose parameters change (cudaGraphHostNodeSetParams,
// cudaGraphExecHostNodeSetParams) against an in-process stub on the test executor: each new
// function is a new mailbox entry, and the entries nothing can reach any more go back (guest
// graph_nodes.cc) with their host gates reused (host-stub host_func.cc), so a loop of SetParams
// does not grow either; the functions still run as set, in order.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "graph.h"
#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;

// The host's gates, as the driver sees them: the distinct userData of host node parameters.
std::mutex g_mu;
std::set<void*> g_gates;
vmcuda::host::DriverApi g_real;
void note(const vmcuda::host::CUDA_HOST_NODE_PARAMS* p) {
  std::lock_guard l(g_mu);
  if (p) g_gates.insert(p->userData);
}
size_t gates() {
  std::lock_guard l(g_mu);
  return g_gates.size();
}

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(
    new vmcuda::host::test::GuestStubEnvironment({0}, [](vmcuda::host::DriverApi& api) {
      g_real = api;
      api.cuGraphHostNodeSetParams = [](vmcuda::host::CUgraphNode n, const vmcuda::host::CUDA_HOST_NODE_PARAMS* p) {
        note(p);
        return g_real.cuGraphHostNodeSetParams(n, p);
      };
      api.cuGraphExecHostNodeSetParams = [](vmcuda::host::CUgraphExec e, vmcuda::host::CUgraphNode n,
                                            const vmcuda::host::CUDA_HOST_NODE_PARAMS* p) {
        note(p);
        return g_real.cuGraphExecHostNodeSetParams(e, n, p);
      };
    }));

std::atomic<int> g_runs[4];
std::vector<int> g_order;
void count(void* p) {
  const int i = static_cast<int>(reinterpret_cast<intptr_t>(p));
  g_runs[i].fetch_add(1);
  g_order.push_back(i);
}
void* tag(int i) { return reinterpret_cast<void*>(static_cast<intptr_t>(i)); }

class GuestGraphHost : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    for (auto& r : g_runs) r = 0;
    g_order.clear();
  }
};

TEST_F(GuestGraphHost, ExecSetParamsInALoopReusesEntriesAndRunsEachAsSet) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaGraphNode_t node;
  const cudaHostNodeParams first{count, tag(0)};
  ASSERT_EQ(cudaGraphAddHostNode(&node, g, nullptr, 0, &first), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const size_t entries = vmcuda::guest::persistent_entries_in_use();
  const size_t host_gates = gates();
  constexpr int kLoops = 3000;
  std::vector<int> want;
  for (int i = 0; i < kLoops; ++i) {
    const int which = (i * 7 + 1) % 4;
    const cudaHostNodeParams p{count, tag(which)};
    ASSERT_EQ(cudaGraphExecHostNodeSetParams(exec, node, &p), cudaSuccess) << i;
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    want.push_back(which);
    if (i % 500 == 499) ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(g_order, want);  // each launch ran the function its SetParams gave, in order
  // A handful of entries in flight at most, not one per SetParams.
  EXPECT_LE(vmcuda::guest::persistent_entries_in_use(), entries + 8);
  EXPECT_LE(gates(), host_gates + 8);
  // The graph's own node still runs its first function.
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  g_order.clear();
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(g_order, std::vector<int>{0});
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)vmcuda::guest::take_last_error();
}

TEST_F(GuestGraphHost, GraphSetParamsInALoopReusesEntriesUntilTheGraphIsShared) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaGraphNode_t node;
  const cudaHostNodeParams first{count, tag(0)};
  ASSERT_EQ(cudaGraphAddHostNode(&node, g, nullptr, 0, &first), cudaSuccess);
  const size_t entries = vmcuda::guest::persistent_entries_in_use();
  for (int i = 0; i < 2000; ++i) {
    const cudaHostNodeParams p{count, tag(1 + i % 3)};
    ASSERT_EQ(cudaGraphHostNodeSetParams(node, &p), cudaSuccess) << i;
  }
  EXPECT_LE(vmcuda::guest::persistent_entries_in_use(), entries + 1);
  // Instantiated: the executable graph holds the node's entry, which a later SetParams must
  // not give back; the executable graph still runs the function it was made with.
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  const cudaHostNodeParams later{count, tag(3)};
  ASSERT_EQ(cudaGraphHostNodeSetParams(node, &later), cudaSuccess);
  ASSERT_EQ(cudaGraphHostNodeSetParams(node, &later), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(g_order, std::vector<int>{1 + 1999 % 3});
  cudaHostNodeParams got{};
  ASSERT_EQ(cudaGraphHostNodeGetParams(node, &got), cudaSuccess);
  EXPECT_EQ(got.userData, tag(3));
  // A refused SetParams (not a host node) keeps no entry.
  cudaGraphNode_t empty;
  ASSERT_EQ(cudaGraphAddEmptyNode(&empty, g, nullptr, 0), cudaSuccess);
  const size_t before = vmcuda::guest::persistent_entries_in_use();
  EXPECT_NE(cudaGraphHostNodeSetParams(empty, &later), cudaSuccess);
  EXPECT_EQ(vmcuda::guest::persistent_entries_in_use(), before);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)vmcuda::guest::take_last_error();
}

}  // namespace

namespace {

// cudaStreamBeginCaptureToGraph: the capture's work becomes nodes of the program's graph after
// the dependencies named, and cudaStreamEndCapture hands back that same graph.
TEST_F(GuestGraphHost, CaptureIntoAnExistingGraphAfterItsNodes) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaGraphNode_t first;
  const cudaHostNodeParams p0{count, tag(0)};
  ASSERT_EQ(cudaGraphAddHostNode(&first, g, nullptr, 0, &p0), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCaptureToGraph(s, g, &first, nullptr, 1, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus st;
  ASSERT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
  EXPECT_EQ(st, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaLaunchHostFunc(s, count, tag(1)), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, count, tag(2)), cudaSuccess);
  cudaGraph_t out = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &out), cudaSuccess);
  EXPECT_EQ(out, g);  // the same graph, now with three nodes in a chain
  size_t n = 0;
  ASSERT_EQ(cudaGraphGetNodes(g, nullptr, &n), cudaSuccess);
  EXPECT_EQ(n, 3u);
  size_t roots = 0;
  ASSERT_EQ(cudaGraphGetRootNodes(g, nullptr, &roots), cudaSuccess);
  EXPECT_EQ(roots, 1u);

  // Instantiated with parameters: uploaded on the stream given, the result said.
  cudaGraphInstantiateParams ip{};
  ip.flags = cudaGraphInstantiateFlagUpload;
  ip.uploadStream = s;
  ip.result_out = cudaGraphInstantiateConditionalHandleUnused;
  ip.errNode_out = first;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithParams(&exec, g, &ip), cudaSuccess);
  EXPECT_EQ(ip.result_out, cudaGraphInstantiateSuccess);
  EXPECT_EQ(ip.errNode_out, nullptr);
  unsigned long long flags = 0;
  ASSERT_EQ(cudaGraphExecGetFlags(exec, &flags), cudaSuccess);
  EXPECT_EQ(flags, static_cast<unsigned long long>(cudaGraphInstantiateFlagUpload));
  EXPECT_EQ(cudaGraphExecGetFlags(exec, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecGetFlags(reinterpret_cast<cudaGraphExec_t>(&flags), &flags), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(g_order, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);

  // Errors: a dependency of another graph, no graph, a bad mode, bad flags, no parameters.
  cudaGraph_t other;
  ASSERT_EQ(cudaGraphCreate(&other, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCaptureToGraph(s, other, &first, nullptr, 1, cudaStreamCaptureModeGlobal),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
  EXPECT_EQ(st, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaStreamBeginCaptureToGraph(s, nullptr, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 1, cudaStreamCaptureModeGlobal),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, static_cast<cudaStreamCaptureMode>(9)),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphInstantiateWithParams(&exec, g, nullptr), cudaErrorInvalidValue);
  ip = {};
  ip.flags = cudaGraphInstantiateFlagDeviceLaunch;
  EXPECT_EQ(cudaGraphInstantiateWithParams(&exec, g, &ip), cudaErrorNotSupported);
  EXPECT_EQ(ip.result_out, cudaGraphInstantiateError);

  // Into an empty graph with no dependencies: a capture that ends in it; the graph stays after
  // an invalidated capture (it is the program's).
  ASSERT_EQ(cudaStreamBeginCaptureToGraph(s, other, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, count, tag(3)), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &out), cudaSuccess);
  EXPECT_EQ(out, other);
  ASSERT_EQ(cudaGraphGetNodes(other, nullptr, &n), cudaSuccess);
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(cudaGraphDestroy(other), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)vmcuda::guest::take_last_error();
}

}  // namespace
