// vmcuda-stub's graphs (host-stub/src/graph.cc) on the test executor, through the wire:
// explicit graphs built, launched as one queued call each and torn down with the client;
// stream capture on the client's real streams; hostile inputs refused; a suspend refused
// while graphs exist, leaving the client running.
#include <atomic>
#include <chrono>
#include <thread>

#include "host-stub/stub_fixture.h"
#include "client_control.h"
#include "vmrpc/ordering.h"

namespace vmcuda::host::test {
namespace {

using namespace std::chrono_literals;
namespace cc = client_control;

constexpr uint64_t kGraph = 0x20000, kGraph2 = 0x20010, kExec = 0x20100, kStream = 0x20200, kCaptured = 0x20300;

std::vector<std::byte> handles(std::initializer_list<uint64_t> hs) {
  std::vector<std::byte> b(hs.size() * 8);
  size_t i = 0;
  for (uint64_t h : hs) std::memcpy(b.data() + 8 * i++, &h, 8);
  return b;
}
std::vector<std::byte> cat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A kernel node add_one(p, n) after `deps`.
int32_t add_kernel_node(Client& c, uint64_t graph, uint64_t node, uint64_t fn, uint64_t p, int n,
                        std::initializer_list<uint64_t> deps) {
  const auto tail = cat(handles(deps), Client::add_one_args(p, n));
  return c.call<api::Call::GraphAddKernelNode>(
      {graph, node, fn, {1, 1, 1}, {uint32_t(n), 1, 1}, 0, 12, uint32_t(deps.size()), 0}, nullptr, tail);
}

TEST(StubGraph, BuiltLaunchedManyTimesAsOneQueuedCallEachAndFreedWithTheClient) {
  Stub stub;
  {
    Client c(stub);
    const uint64_t fn = c.load_add_one();
    const uint64_t p = c.malloc(64);
    c.put(p, std::vector<int>(16, 0));
    ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
    // memset(p, 0) -> add_one -> add_one, the second after an empty node.
    ASSERT_EQ(c.call<api::Call::GraphAddMemsetNode>({kGraph, 0x30000, p, 0, 16, 1, 0, 4, 0, 0}), 0);
    ASSERT_EQ(add_kernel_node(c, kGraph, 0x30010, fn, p, 16, {0x30000}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30020, 0, api::kGraphNodeEmpty, 1}, nullptr, handles({0x30010})), 0);
    ASSERT_EQ(add_kernel_node(c, kGraph, 0x30030, fn, p, 16, {0x30020}), 0);
    api::GraphListReply list{};
    std::vector<std::byte> extra;
    ASSERT_EQ(c.call<api::Call::GraphGetNodes>({kGraph, 1, 8}, &list, {}, &extra, 64), 0);
    ASSERT_EQ(list.count, 1u);  // the memset
    uint64_t root = 0;
    std::memcpy(&root, extra.data(), 8);
    EXPECT_EQ(root, 0x30000u);
    ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
    const uint64_t before = tst::fake_graph_launches();
    std::vector<vmrpc::FrameRef> frames;
    for (int i = 0; i < 10; ++i) frames.push_back(c.queue<api::Call::GraphLaunch>({kExec, 0}));
    ASSERT_EQ(c.flush(), vmrpc::wire::ChannelStatus::kOk);
    for (auto f : frames) EXPECT_EQ(c.status(f), 0);
    EXPECT_EQ(tst::fake_graph_launches() - before, 10u);
    EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 2));
    EXPECT_EQ(tst::fake_live_graphs(), 1u);
    EXPECT_EQ(tst::fake_live_graph_execs(), 1u);
  }
  // The client went away: its graph and executable graph with it.
  for (int i = 0; i < 200 && (tst::fake_live_graphs() || tst::fake_live_graph_execs()); ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(tst::fake_live_graphs(), 0u);
  EXPECT_EQ(tst::fake_live_graph_execs(), 0u);
}

TEST(StubGraph, HostileNodesAreRefusedAndTheStubServesOn) {
  Stub stub;
  Client c(stub);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(64);
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph2, 0, 0}), 0);
  ASSERT_EQ(add_kernel_node(c, kGraph, 0x30000, fn, p, 16, {}), 0);
  const auto bad_args = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments);
  // Dependencies the frame does not hold.
  EXPECT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30010, 0, api::kGraphNodeEmpty, 3}, nullptr, handles({0x30000})),
            bad_args);
  // A node of another graph, an unknown node, a reused handle, a host-made handle.
  EXPECT_EQ(c.call<api::Call::GraphAddNode>({kGraph2, 0x30010, 0, api::kGraphNodeEmpty, 1}, nullptr, handles({0x30000})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30010, 0, api::kGraphNodeEmpty, 1}, nullptr, handles({0x999})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30000, 0, api::kGraphNodeEmpty, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddNode>({kGraph, api::kHostNodeHandle | 5, 0, api::kGraphNodeEmpty, 0}),
            CUDA_ERROR_INVALID_VALUE);
  // Kernel parameters outside the bytes sent.
  EXPECT_EQ(c.call<api::Call::GraphAddKernelNode>({kGraph, 0x30020, fn, {1, 1, 1}, {16, 1, 1}, 0, 4, 0, 0}, nullptr,
                                                  std::vector<std::byte>(4)),
            bad_args);
  // A memcpy node over memory that is not the client's, and from heap memory it did not pin.
  api::GraphMemcpyNodeArgs m{};
  m.graph = kGraph;
  m.node = 0x30030;
  m.src = {api::kGraphMemDevice, 0, p, {}, 0, 4096, 1, {0, 0, 0}};
  m.dst = {api::kGraphMemDevice, 0, p + 64, {}, 0, 4096, 1, {0, 0, 0}};
  m.extent[0] = 4096, m.extent[1] = 1, m.extent[2] = 1;
  EXPECT_EQ(c.call<api::Call::GraphAddMemcpyNode>(m), CUDA_ERROR_INVALID_VALUE);
  auto block = c.slot->heap().allocate(4096);
  ASSERT_TRUE(block);
  m.src = {api::kGraphMemHeap, 0, 0, block->ref(), 0, 64, 1, {0, 0, 0}};
  m.dst = {api::kGraphMemDevice, 0, p, {}, 0, 64, 1, {0, 0, 0}};
  m.extent[0] = 64;
  EXPECT_EQ(c.call<api::Call::GraphAddMemcpyNode>(m), CUDA_ERROR_INVALID_VALUE);
  // Pinned, it is taken; a region past the range is not.
  ASSERT_EQ(c.call<api::Call::PinHeap>({block->ref()}), 0);
  EXPECT_EQ(c.call<api::Call::GraphAddMemcpyNode>(m), 0);
  m.node = 0x30040;
  m.src.pos[0] = 4090;
  m.src.pitch = 8192;
  EXPECT_EQ(c.call<api::Call::GraphAddMemcpyNode>(m), CUDA_ERROR_INVALID_VALUE);
  // Too many edges, edges of the wrong length.
  EXPECT_EQ(c.call<api::Call::GraphAddDependencies>({kGraph, api::kMaxGraphDeps + 1, 0}), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphAddDependencies>({kGraph, 2, 0}, nullptr, handles({0x30000})), bad_args);
  // Unknown graphs and executable graphs.
  EXPECT_EQ(c.call<api::Call::GraphInstantiate>({kExec, 0x77777, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphLaunch>({0x77777, 0}), CUDA_ERROR_INVALID_VALUE);
  // Still serving.
  c.put(p, std::vector<int>(16, 1));
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 1));
}

TEST(StubGraph, CaptureOnTheRealStreamRecordsReplaysAndReportsTheDriversErrors) {
  Stub stub;
  Client c(stub);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(64);
  c.put(p, std::vector<int>(16, 0));
  ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream, 1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 0}), 0);
  api::CaptureInfoReply info{};
  ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &info), 0);
  EXPECT_EQ(info.status, 1u);
  EXPECT_NE(info.id, 0u);
  ASSERT_EQ(c.launch(fn, p, 16, kStream), 0);
  ASSERT_EQ(c.launch(fn, p, 16, kStream), 0);
  // Inline bytes do not outlive the call: refused on a capturing stream.
  const std::vector<int> v(4, 9);
  EXPECT_EQ(c.call<api::Call::CopyToDeviceInlineAsync>({p, kStream}, nullptr, std::as_bytes(std::span(v))),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 0));  // captured, not run
  ASSERT_EQ(c.call<api::Call::StreamEndCapture>({kStream, kCaptured}), 0);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kCaptured, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphLaunch>({kExec, kStream}), 0);
  ASSERT_EQ(c.call<api::Call::GraphLaunch>({kExec, kStream}), 0);
  ASSERT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), 0);
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 4));
  // A synchronize of a capturing stream: the driver refuses it and invalidates the capture.
  ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &info), 0);
  EXPECT_EQ(info.status, 2u);
  EXPECT_EQ(c.call<api::Call::StreamEndCapture>({kStream, kCaptured + 0x10}), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &info), 0);
  EXPECT_EQ(info.status, 0u);
  // The legacy stream cannot be captured.
  EXPECT_EQ(c.call<api::Call::StreamBeginCapture>({0, 0, 0}), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

TEST(StubGraph, AHostNodeAsksTheGuestForOneRunAtEveryLaunch) {
  Stub stub;
  Client c(stub);
  auto block = c.slot->heap().allocate(4 * sizeof(api::HostFuncEntry));
  ASSERT_TRUE(block);
  std::memset(block->data, 0, 4 * sizeof(api::HostFuncEntry));
  auto* entry = reinterpret_cast<api::HostFuncEntry*>(block->data) + 1;
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphAddHostNode>({kGraph, 0x30000, block->ref(), 1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::GraphAddHostNode>({kGraph, 0x30010, block->ref(), 4, 0}), 
            static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments));  // past the mailbox
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  // The guest's side: each time the gate is reached, one run, then done.
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0};
  std::thread guest([&] {
    uint32_t ran = 0;
    while (!stop.load()) {
      const uint32_t reached = vmrpc::ordering::load_acquire(entry->reached);
      for (; static_cast<int32_t>(reached - ran) > 0; ++ran) {
        runs.fetch_add(1);
        vmrpc::ordering::store_release(entry->done, ran + 1);
      }
      std::this_thread::sleep_for(50us);
    }
  });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.call<api::Call::GraphLaunch>({kExec, 0}), 0);
  EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  stop.store(true);
  guest.join();
  EXPECT_EQ(runs.load(), 3);
  EXPECT_EQ(entry->reached, 3u);
  EXPECT_EQ(entry->done, 3u);
}

TEST(StubGraph, WithGraphsASuspendIsRefusedAndTheClientRunsOn) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(64);
  c.put(p, std::vector<int>(16, 3));
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
  vmrpc::ServedSlot slot{};
  for (int i = 0; i < 200; ++i) {
    auto v = stub.endpoint.served_slots();
    if (!v.empty()) {
      slot = v.front();
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  std::string why;
  ASSERT_TRUE(stub.endpoint.hold_slot(slot.connection_id, slot.slot, 2000ms, &why)) << why;
  std::vector<std::byte> reply;
  ASSERT_TRUE(stub.endpoint.control_slot(slot.connection_id, slot.slot, cc::encode(cc::Request{cc::Op::kSuspend, {}}),
                                         &reply, [](std::span<const std::byte>) {}, &why))
      << why;
  cc::Reply r;
  ASSERT_TRUE(cc::decode(reply, &r));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("CUDA graphs"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  stub.endpoint.release_slot(slot.connection_id, slot.slot);
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 3));
  EXPECT_EQ(tst::fake_live_graphs(), 1u);
}

}  // namespace
}  // namespace vmcuda::host::test
