// vmcuda-stub's graphs (host-stub/src/graph.cc) on the test executor, through the wire:
// explicit graphs built, launched as one queued call each and torn down with the client;
// stream capture on the client's real streams; hostile inputs refused; graphs carried by a
// suspend and a state file (graph_state.cc), a suspend refused while a capture is open.
#include <atomic>
#include <functional>
#include <optional>
#include <chrono>
#include <thread>

#include "host-stub/slot_control.h"
#include "host-stub/stub_fixture.h"
#include "state_stream.h"
#include "client_control.h"
#include "vm_control.h"
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
    EXPECT_EQ(tst::fake_live_graphs(), 2u);  // the graph, and the executable graph's mirror (GraphExecObject)
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
  // A nonzero pad is the wire's (vmcuda's library sends 0): a guest fault; a mode or flags
  // out of range are the program's, answered as CUDA answers them.
  EXPECT_EQ(c.call<api::Call::GraphCreate>({0x20020, 0, 1}), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphCreate>({0x20020, 1, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 1}), bad_args);
  EXPECT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 7, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::CaptureMode>({0, 1}), bad_args);
  EXPECT_EQ(c.call<api::Call::CaptureMode>({7, 0}), CUDA_ERROR_INVALID_VALUE);
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

// Graphs of every node kind the stub makes (kernel, memset, memcpy device and pinned heap,
// host, event record and wait, child graph), a captured graph, executable graphs changed
// after instantiation (kernel node parameters, cudaGraphExecUpdate): launched, suspended to
// host memory and resumed, saved to a state file and restored, launched again: the same
// results as before, behind the same handles.
struct GraphWorkload {
  static constexpr uint64_t kChild = 0x20020, kClone = 0x20030, kExec2 = 0x20110, kExecCap = 0x20120;
  static constexpr uint64_t kEvent = 0x20400;
  uint64_t fn = 0, p = 0, q = 0;
  std::optional<vmrpc::HeapBlock> host, host2, mailbox;
  api::HostFuncEntry* entry = nullptr;
  uint64_t captured_node = 0;  // a host-made node handle of the captured graph

  static api::GraphMemcpySide device_side(uint64_t ptr) { return {api::kGraphMemDevice, 0, ptr, {}, 0, 64, 1, {0, 0, 0}}; }
  void build(Client& c) {
    fn = c.load_add_one();
    p = c.malloc(64);
    q = c.malloc(64);
    host = c.slot->heap().allocate(64);
    host2 = c.slot->heap().allocate(64);
    mailbox = c.slot->heap().allocate(4 * sizeof(api::HostFuncEntry));
    ASSERT_TRUE(host && host2 && mailbox);
    std::memset(mailbox->data, 0, 4 * sizeof(api::HostFuncEntry));
    entry = reinterpret_cast<api::HostFuncEntry*>(mailbox->data) + 2;
    ASSERT_EQ(c.call<api::Call::PinHeap>({host->ref()}), 0);
    ASSERT_EQ(c.call<api::Call::PinHeap>({host2->ref()}), 0);
    ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream, 1, 0}), 0);
    ASSERT_EQ(c.call<api::Call::EventCreate>({kEvent, 0}), 0);
    // memset p=1 -> add_one(p) -> record -> wait -> copy p to q -> copy q to host -> host node -> child: add_one(q).
    ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddMemsetNode>({kGraph, 0x30000, p, 0, 16, 1, 1, 4, 0, 0}), 0);
    ASSERT_EQ(add_kernel_node(c, kGraph, 0x30010, fn, p, 16, {0x30000}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30020, kEvent, api::kGraphNodeEventRecord, 1}, nullptr,
                                              handles({0x30010})),
              0);
    ASSERT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30025, kEvent, api::kGraphNodeWaitEvent, 1}, nullptr,
                                              handles({0x30020})),
              0);
    ASSERT_EQ(c.call<api::Call::GraphAddMemcpyNode>({kGraph, 0x30030, device_side(p), device_side(q), {64, 1, 1}, 1, 0},
                                                    nullptr, handles({0x30025})),
              0);
    const api::GraphMemcpySide heap_side{api::kGraphMemHeap, 0, 0, host->ref(), 0, 64, 1, {0, 0, 0}};
    ASSERT_EQ(c.call<api::Call::GraphAddMemcpyNode>({kGraph, 0x30040, device_side(q), heap_side, {64, 1, 1}, 1, 0},
                                                    nullptr, handles({0x30030})),
              0);
    ASSERT_EQ(c.call<api::Call::GraphAddHostNode>({kGraph, 0x30050, mailbox->ref(), 2, 1}, nullptr, handles({0x30040})), 0);
    ASSERT_EQ(c.call<api::Call::GraphCreate>({kChild, 0, 0}), 0);
    ASSERT_EQ(add_kernel_node(c, kChild, 0x31000, fn, q, 16, {}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddNode>({kGraph, 0x30060, kChild, api::kGraphNodeChild, 1}, nullptr,
                                              handles({0x30050})),
              0);
    // Executable graphs: one with a kernel node's parameters changed; one updated from a
    // clone, then changed.
    ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
    ASSERT_EQ(set_add_one(c, kExec, 0x30010, p, 8), 0);
    ASSERT_EQ(c.call<api::Call::GraphClone>({kClone, kGraph}), 0);
    ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec2, kGraph, 0}), 0);
    api::GraphExecUpdateReply up{};
    ASSERT_EQ(c.call<api::Call::GraphExecUpdate>({kExec2, kClone}, &up), 0);
    ASSERT_EQ(up.status, 0);
    ASSERT_EQ(set_add_one(c, kExec2, 0x30010, p, 4), 0);
    // Captured: add_one(q), then q to host2.
    ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 0}), 0);
    ASSERT_EQ(c.launch(fn, q, 16, kStream), 0);
    ASSERT_EQ(c.call<api::Call::CopyFromDeviceHeapAsync>({q, host2->ref(), kStream, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::StreamEndCapture>({kStream, kCaptured}), 0);
    ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExecCap, kCaptured, 0}), 0);
    api::GraphListReply list{};
    std::vector<std::byte> extra;
    ASSERT_EQ(c.call<api::Call::GraphGetNodes>({kCaptured, 0, 8}, &list, {}, &extra, 64), 0);
    ASSERT_EQ(list.count, 2u);
    std::memcpy(&captured_node, extra.data(), 8);
    ASSERT_TRUE(captured_node & api::kHostNodeHandle);
  }
  int32_t set_add_one(Client& c, uint64_t exec, uint64_t node, uint64_t ptr, int n) const {
    const auto args = Client::add_one_args(ptr, n);
    return c.call<api::Call::GraphExecKernelNodeSetParams>(
        {exec, node, fn, {1, 1, 1}, {16, 1, 1}, 0, uint32_t(args.size())}, nullptr, args);
  }
  // Every executable graph launched once from zeroed memory: what each leaves behind.
  std::vector<int> run(Client& c, uint64_t fn_handle) {
    std::vector<int> all;
    for (uint64_t x : {kExec, kExec2, kExecCap}) {
      c.put(p, std::vector<int>(16, 0));
      c.put(q, std::vector<int>(16, 0));
      std::memset(host->data, 0, 64);
      std::memset(host2->data, 0, 64);
      EXPECT_EQ(c.call<api::Call::GraphLaunch>({x, kStream}), 0);
      EXPECT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), 0);
      for (auto v : {c.get(p, 16), c.get(q, 16)}) all.insert(all.end(), v.begin(), v.end());
      for (auto* b : {&*host, &*host2}) {
        const int* i = reinterpret_cast<const int*>(b->data);
        all.insert(all.end(), i, i + 16);
      }
    }
    (void)fn_handle;
    return all;
  }
};

// The guest's side of a host node: each time a gate is reached, one run.
struct HostNodeGuest {
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0};
  std::thread t;
  explicit HostNodeGuest(api::HostFuncEntry* entry) {
    t = std::thread([this, entry] {
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
  }
  ~HostNodeGuest() {
    stop.store(true);
    t.join();
  }
};

// A stream capture another stream joined (through an event) is not carried by a suspend:
// vmcudactl suspend then lets the VM run on and asks again (nothing copied meanwhile) until
// the capture has ended, then goes through; a capture that outlasts the quiesce timeout
// refuses it, saying so.
constexpr uint64_t kStream2 = 0x20210, kForkEvent = 0x20410, kJoinEvent = 0x20420;
void begin_joined_capture(Client& c) {
  ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream2, 1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({kForkEvent, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({kJoinEvent, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({kForkEvent, kStream, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamWaitEvent>({kStream2, kForkEvent, 0, 0}), 0);  // joins the capture
}
int32_t end_joined_capture(Client& c, uint64_t graph) {
  if (int32_t e = c.call<api::Call::EventRecord>({kJoinEvent, kStream2, 0, 0})) return e;
  if (int32_t e = c.call<api::Call::StreamWaitEvent>({kStream, kJoinEvent, 0, 0})) return e;
  return c.call<api::Call::StreamEndCapture>({kStream, graph});
}

TEST(StubGraph, ASuspendWaitsForAJoinedStreamCaptureToEnd) {
  Stub stub;
  Client c(stub);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream, 1, 0}), 0);
  const uint64_t p = c.malloc(64);
  ASSERT_NO_FATAL_FAILURE(begin_joined_capture(c));
  std::string why;
  {
    VmControl vm(stub.endpoint, "capture", {"fake"}, std::chrono::milliseconds(300));
    std::vector<std::string> phases;
    EXPECT_FALSE(vm.suspend([&](const std::string& phase, uint64_t, uint64_t) { phases.push_back(phase); }, &why));
    EXPECT_NE(why.find("stream capture"), std::string::npos) << why;
    EXPECT_NE(why.find("other streams joined"), std::string::npos) << why;
    EXPECT_NE(why.find("of trying again"), std::string::npos) << why;
    ASSERT_FALSE(phases.empty());
    EXPECT_EQ(phases.front().rfind("waiting: ", 0), 0u) << phases.front();
    EXPECT_EQ(vm.status().state, "running");
  }
  VmControl vm(stub.endpoint, "capture", {"fake"}, std::chrono::seconds(10));
  std::thread ends([&] {
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(end_joined_capture(c, kCaptured), 0);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(vm.suspend({}, &why)) << why;
  ends.join();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);  // suspended: the memory is free
  ASSERT_TRUE(vm.resume({}, &why)) << why;
  EXPECT_EQ(c.call<api::Call::GraphDestroy>({kCaptured, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::Free>({p}), 0);
}

TEST(StubGraph, GraphsAndExecutableGraphsComeBackFromASuspendAndAStateFile) {
  const std::string path = ::testing::TempDir() + "vmcuda-graph-suspend.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  GraphWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  HostNodeGuest guest(w.entry);
  const std::vector<int> expected = w.run(c, w.fn);
  // What each graph did: p after add_one on its first 8 (kExec), first 4 (kExec2); q = p + 1
  // (the child); host = p; the captured graph: q + 1 copied to host2.
  ASSERT_EQ(expected.size(), 3u * 64);
  EXPECT_EQ(expected[0], 2);
  EXPECT_EQ(expected[8], 1);
  EXPECT_EQ(expected[16], 3);
  EXPECT_EQ(expected[32 + 7], 2);
  EXPECT_EQ(expected[64 + 4], 1);
  EXPECT_EQ(expected[128 + 48], 1);
  const int runs = guest.runs.load();
  EXPECT_EQ(runs, 2);
  const uint64_t graphs = tst::fake_live_graphs(), execs = tst::fake_live_graph_execs();

  // A stream capture open that another stream joined: refused, nothing changed.
  ASSERT_NO_FATAL_FAILURE(begin_joined_capture(c));
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("stream capture"), std::string::npos) << r.error;
  EXPECT_TRUE(r.retry);  // a window the program closes by itself
  r = slot_control::control(stub, cc::Op::kSuspendWindow);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.retry);
  EXPECT_NE(r.error.find("stream capture"), std::string::npos) << r.error;
  slot_control::release(stub);
  ASSERT_EQ(end_joined_capture(c, kCaptured + 0x10), 0);
  ASSERT_EQ(c.call<api::Call::GraphDestroy>({kCaptured + 0x10, 0, 0}), 0);
  for (uint64_t e : {kForkEvent, kJoinEvent}) ASSERT_EQ(c.call<api::Call::EventDestroy>({e}), 0);
  ASSERT_EQ(c.call<api::Call::StreamDestroy>({kStream2}), 0);

  // Suspended to host memory: no graph left on the GPU; resumed: the same results.
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_live_graphs(), 0u);
  EXPECT_EQ(tst::fake_live_graph_execs(), 0u);
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(tst::fake_live_graphs(), graphs);
  EXPECT_EQ(tst::fake_live_graph_execs(), execs);
  EXPECT_EQ(w.run(c, w.fn), expected);
  EXPECT_EQ(guest.runs.load(), 2 * runs);
  api::GraphNodeTypeReply type{};
  ASSERT_EQ(c.call<api::Call::GraphNodeGetType>({w.captured_node}, &type), 0);
  EXPECT_EQ(type.type, 0u);  // the captured kernel, behind the handle the host made for it

  // Saved to a file and restored from it: the same again.
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_live_graphs(), 0u);
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c, w.fn), expected);

  // Changed again after the resume (the executable graph now came from its mirror): followed.
  ASSERT_EQ(w.set_add_one(c, kExec, 0x30010, w.p, 16), 0);
  std::vector<int> changed = expected;
  for (int i = 8; i < 16; ++i) changed[i] = 2, changed[16 + i] = 3, changed[32 + i] = 2;
  EXPECT_EQ(w.run(c, w.fn), changed);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c, w.fn), changed);

  // Updated after the resume (the executable graph came from its mirror, so the driver pairs
  // the nodes by structure): followed, node for node.
  api::GraphExecUpdateReply up{};
  ASSERT_EQ(c.call<api::Call::GraphExecUpdate>({GraphWorkload::kExec2, GraphWorkload::kClone}, &up), 0);
  ASSERT_EQ(up.status, 0);
  std::vector<int> updated = changed;
  std::copy(changed.begin(), changed.begin() + 64, updated.begin() + 64);  // kExec2 now runs the clone's add_one(p, 16)
  EXPECT_EQ(w.run(c, w.fn), updated);
  // Changed and updated again with no suspend between: the driver still names the nodes by
  // the graph the resume instantiated from, which the first update replaced as the mirror.
  ASSERT_EQ(w.set_add_one(c, GraphWorkload::kExec2, 0x30010, w.p, 4), 0);
  std::vector<int> narrowed = updated;
  for (int i = 4; i < 16; ++i)  // add_one(p, 4): p, q and host lose the one added beyond 4
    for (int part : {0, 16, 32}) narrowed[64 + part + i] -= 1;
  EXPECT_EQ(w.run(c, w.fn), narrowed);
  ASSERT_EQ(c.call<api::Call::GraphExecUpdate>({GraphWorkload::kExec2, GraphWorkload::kClone}, &up), 0);
  ASSERT_EQ(up.status, 0);
  EXPECT_EQ(w.run(c, w.fn), updated);
  ASSERT_EQ(w.set_add_one(c, GraphWorkload::kExec2, 0x30010, w.p, 4), 0);
  EXPECT_EQ(w.run(c, w.fn), narrowed);
  ASSERT_EQ(c.call<api::Call::GraphExecUpdate>({GraphWorkload::kExec2, GraphWorkload::kClone}, &up), 0);
  EXPECT_EQ(w.run(c, w.fn), updated);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c, w.fn), updated);

  // An update from a graph whose nodes the host cannot pair with the mirror's (the same types,
  // other edges: the executor's driver takes it): the executable graph runs on; a suspend
  // is refused and says why.
  constexpr uint64_t kChain = 0x20500, kFork = 0x20510, kExec4 = 0x20520;
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kChain, 0, 0}), 0);
  ASSERT_EQ(add_kernel_node(c, kChain, 0x32000, w.fn, w.p, 16, {}), 0);
  ASSERT_EQ(add_kernel_node(c, kChain, 0x32010, w.fn, w.p, 16, {0x32000}), 0);
  ASSERT_EQ(add_kernel_node(c, kChain, 0x32020, w.fn, w.p, 16, {0x32010}), 0);
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kFork, 0, 0}), 0);
  ASSERT_EQ(add_kernel_node(c, kFork, 0x32100, w.fn, w.p, 16, {}), 0);
  ASSERT_EQ(add_kernel_node(c, kFork, 0x32110, w.fn, w.p, 16, {0x32100}), 0);
  ASSERT_EQ(add_kernel_node(c, kFork, 0x32120, w.fn, w.p, 16, {0x32100}), 0);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec4, kChain, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphExecUpdate>({kExec4, kFork}, &up), 0);
  ASSERT_EQ(up.status, 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cudaGraphExecUpdate"), std::string::npos) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(c.call<api::Call::GraphLaunch>({kExec4, kStream}), 0);
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), 0);
  // Once it is destroyed, the suspend goes ahead.
  ASSERT_EQ(c.call<api::Call::GraphExecDestroy>({kExec4}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c, w.fn), updated);
  state::remove_state_file(path);
}

// A state file's graph records are untrusted: damaged ones are refused with the reason, the
// client stays suspended, and the good file still restores.
TEST(StubGraph, AHostileGraphRecordInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-graph-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-graph-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  GraphWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  HostNodeGuest guest(w.entry);
  const std::vector<int> expected = w.run(c, w.fn);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // An object record: kind (1 byte), id, parent, device (4), handle (8); a graph's then its
  // node count (4), each node's type (4) and fields.
  constexpr size_t kBody = 29;
  const auto graph = static_cast<std::byte>(ObjectKind::Graph), node = static_cast<std::byte>(ObjectKind::GraphNode);
  auto handle_of = [](const std::vector<std::byte>& p) {
    uint64_t v;
    std::memcpy(&v, p.data() + 21, 8);
    return v;
  };
  auto u32_at = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  const slot_control::Forgery cases[] = {
      {"a node of an unknown type", [&](auto& p) { if (p[0] == graph && handle_of(p) == kGraph) u32_at(p, kBody + 4, 99); },
       "unknown type"},
      {"too many nodes", [&](auto& p) { if (p[0] == graph && handle_of(p) == kGraph) u32_at(p, kBody, 1u << 30); },
       "too many nodes"},
      {"an edge to a node it does not have",
       [&](auto& p) { if (p[0] == graph && handle_of(p) == GraphWorkload::kChild) {
           // The child graph: one kernel node, then its edge count (0): one edge 0 -> 5.
           const size_t end = p.size();
           u32_at(p, end - 4, 1);
           p.resize(end + 8);
           u32_at(p, end, 0);
           u32_at(p, end + 4, 5);
         } },
       "edge between nodes"},
      {"a cycle",
       [&](auto& p) { if (p[0] == graph && handle_of(p) == kGraph) {
           // Its nodes are a chain 0 -> 1 -> ... -> 7; its last edge (6 -> 7) made 6 -> 0.
           const size_t end = p.size();
           u32_at(p, end - 8, 6);
           u32_at(p, end - 4, 0);
         } },
       "cycle"},
      {"a node index beyond its graph's", [&](auto& p) { if (p[0] == node && handle_of(p) == 0x30060) u32_at(p, kBody, 500); },
       "beyond its graph's nodes"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_live_graphs(), 0u);
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  });
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c, w.fn), expected);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}


// One capture on kStream, carried or not across a suspend in its middle (`between`): a
// memset of p, add_one(p, 16), add_one(p, 8), p copied to q; then add_one(q, 4), q copied to
// pinned host memory, add_one(p, 16). Into a new graph, or (`into`) into the program's graph
// that already holds the memset (cudaStreamBeginCaptureToGraph after it).
struct CaptureWork {
  uint64_t fn = 0, p = 0, q = 0;
  std::optional<vmrpc::HeapBlock> host;
  void setup(Client& c) {
    fn = c.load_add_one();
    p = c.malloc(64);
    q = c.malloc(64);
    host = c.slot->heap().allocate(64);
    ASSERT_TRUE(host);
    ASSERT_EQ(c.call<api::Call::PinHeap>({host->ref()}), 0);
    ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream, 1, 0}), 0);
  }
  void capture(Client& c, uint64_t graph, bool into, const std::function<void()>& between) {
    if (into) {
      ASSERT_EQ(c.call<api::Call::GraphCreate>({graph, 0, 0}), 0);
      ASSERT_EQ(c.call<api::Call::GraphAddMemsetNode>({graph, graph + 0x10000, p, 0, 16, 1, 0, 4, 0, 0}), 0);
      ASSERT_EQ(c.call<api::Call::StreamBeginCaptureToGraph>({kStream, graph, 0, 1, 0, 0}, nullptr,
                                                             handles({graph + 0x10000})),
                0);
    } else {
      ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 0}), 0);
      ASSERT_EQ(c.call<api::Call::MemsetAsync>({p, 64, 0, 1, kStream}), 0);
    }
    ASSERT_EQ(c.launch(fn, p, 16, kStream), 0);
    ASSERT_EQ(c.launch(fn, p, 8, kStream), 0);
    ASSERT_EQ(c.call<api::Call::CopyDeviceToDeviceAsync>({q, p, 64, kStream}), 0);
    ASSERT_NO_FATAL_FAILURE(between());
    ASSERT_EQ(c.launch(fn, q, 4, kStream), 0);
    ASSERT_EQ(c.call<api::Call::CopyFromDeviceHeapAsync>({q, host->ref(), kStream, 0, 0}), 0);
    ASSERT_EQ(c.launch(fn, p, 16, kStream), 0);
    ASSERT_EQ(c.call<api::Call::StreamEndCapture>({kStream, graph}), 0);
  }
  // The graph instantiated and launched twice over other values: p, q and host after.
  std::vector<int> run(Client& c, uint64_t graph, uint64_t exec) {
    EXPECT_EQ(c.call<api::Call::GraphInstantiate>({exec, graph, 0}), 0);
    c.put(p, std::vector<int>(16, 7));
    c.put(q, std::vector<int>(16, 7));
    std::memset(host->data, 0xff, 64);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(c.call<api::Call::GraphLaunch>({exec, kStream}), 0);
    EXPECT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), 0);
    std::vector<int> all = c.get(p, 16);
    for (int v : c.get(q, 16)) all.push_back(v);
    const int* h = reinterpret_cast<const int*>(host->data);
    all.insert(all.end(), h, h + 16);
    return all;
  }
  static uint64_t node_count(Client& c, uint64_t graph) {
    api::GraphListReply list{};
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<api::Call::GraphGetNodes>({graph, 0, 0}, &list, {}, &extra, 64), 0);
    return list.count;
  }
};

// A capture open across vmcudactl suspend/resume and a save/restore is carried (the suspend
// does not wait for it): the capture goes on where it stood, keeps its id, and ends in the
// whole graph, which does what the same capture uninterrupted does.
TEST(StubGraph, AStreamCaptureOpenAcrossASuspendAndAStateFileEndsInTheWholeGraph) {
  const std::string path = ::testing::TempDir() + "vmcuda-capture-suspend.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  CaptureWork w;
  ASSERT_NO_FATAL_FAILURE(w.setup(c));
  // Uninterrupted, into a new graph and into the program's.
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kGraph, false, [] {}));
  const std::vector<int> expected = w.run(c, kGraph, kExec);
  ASSERT_EQ(expected.size(), 48u);
  EXPECT_EQ(expected[0], 3);       // p: memset 0, +1, +1 (first 8), +1
  EXPECT_EQ(expected[8], 2);
  EXPECT_EQ(expected[16], 3);      // q: p after the first half, +1 (first 4)
  EXPECT_EQ(expected[16 + 4], 2);
  EXPECT_EQ(expected[16 + 8], 1);
  EXPECT_EQ(expected[32 + 3], 3);  // host: q
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kGraph2, true, [] {}));
  EXPECT_EQ(w.run(c, kGraph2, kExec + 0x10), expected);
  const uint64_t nodes = CaptureWork::node_count(c, kGraph);
  EXPECT_EQ(nodes, 7u);

  // Suspended and resumed in the middle of the capture, as vmcudactl does (no waiting).
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kCaptured, false, [&] {
    api::CaptureInfoReply before{}, after{};
    ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &before), 0);
    ASSERT_EQ(before.status, 1u);
    std::string why;
    VmControl vm(stub.endpoint, "capture", {"fake"}, std::chrono::milliseconds(300));
    std::vector<std::string> phases;
    ASSERT_TRUE(vm.suspend([&](const std::string& phase, uint64_t, uint64_t) { phases.push_back(phase); }, &why)) << why;
    for (const auto& phase : phases) EXPECT_NE(phase.rfind("waiting: ", 0), 0u) << phase;
    EXPECT_EQ(tst::fake_live_graphs(), 0u);  // suspended: the capture's graph is in the state
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
    ASSERT_TRUE(vm.resume({}, &why)) << why;
    ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &after), 0);
    EXPECT_EQ(after.status, 1u);
    EXPECT_EQ(after.id, before.id);  // the id the program knows stays
  }));
  EXPECT_EQ(CaptureWork::node_count(c, kCaptured), nodes);
  EXPECT_EQ(w.run(c, kCaptured, kExec + 0x20), expected);

  // Saved to a state file and restored in the middle of a capture into the program's graph,
  // then suspended again (a capture carried twice) after more work.
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kCaptured + 0x10, true, [&] {
    api::CaptureInfoReply carried{};
    ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &carried), 0);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(tst::fake_live_graphs(), 0u);
    tst::fake_restart_capture_ids();  // restored as into a new process, whose driver counts from 1
    r = slot_control::control(stub, cc::Op::kRestore, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    // New captures beside the carried one never answer its id (the driver's ids pass it).
    constexpr uint64_t kOther = 0x20230;
    ASSERT_EQ(c.call<api::Call::StreamCreate>({kOther, 1, 0}), 0);
    for (uint64_t i = 0; i <= carried.id + 1; ++i) {
      ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kOther, 2, 0}), 0);
      api::CaptureInfoReply other{};
      ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kOther}, &other), 0);
      EXPECT_NE(other.id, carried.id) << "capture " << i << " after the restore";
      ASSERT_EQ(c.call<api::Call::StreamEndCapture>({kOther, kCaptured + 0x40 + i}), 0);
      ASSERT_EQ(c.call<api::Call::GraphDestroy>({kCaptured + 0x40 + i}), 0);
    }
    ASSERT_EQ(c.call<api::Call::StreamDestroy>({kOther}), 0);
    ASSERT_EQ(c.launch(w.fn, w.p, 1, kStream), 0);  // captured, not run: undone below
    ASSERT_EQ(c.launch(w.fn, w.p, 1, kStream), 0);
    ASSERT_TRUE(slot_control::hold(stub));
    r = slot_control::control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    r = slot_control::control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
  }));
  EXPECT_EQ(CaptureWork::node_count(c, kCaptured + 0x10), nodes + 2);
  std::vector<int> more = expected;
  more[0] += 2;  // p[0] two more (after the copy to q: q and host as before)
  EXPECT_EQ(w.run(c, kCaptured + 0x10, kExec + 0x30), more);
  state::remove_state_file(path);
}

// A save that fails after the capture was ended for it begins it again where it stood (the
// program captures on and gets the whole graph); a capture with an event recorded in it (a
// wait on that event could fork it later) is not carried: refused while it is open.
TEST(StubGraph, AFailedSaveLeavesTheCaptureOpenAndAnEventInItRefusesTheSuspend) {
  Stub stub;
  Client c(stub);
  CaptureWork w;
  ASSERT_NO_FATAL_FAILURE(w.setup(c));
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kGraph, false, [] {}));
  const std::vector<int> expected = w.run(c, kGraph, kExec);
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kCaptured, false, [&] {
    api::CaptureInfoReply before{}, after{};
    ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &before), 0);
    ASSERT_TRUE(slot_control::hold(stub));
    const cc::Reply r = slot_control::control(stub, cc::Op::kSave, "/nonexistent-dir/vmcuda/capture.state");
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.status.suspended);
    slot_control::release(stub);
    ASSERT_EQ(c.call<api::Call::StreamCaptureInfo>({kStream}, &after), 0);
    EXPECT_EQ(after.status, 1u);
    EXPECT_EQ(after.id, before.id);
  }));
  EXPECT_EQ(w.run(c, kCaptured, kExec + 0x10), expected);

  constexpr uint64_t kEvent = 0x20430;
  ASSERT_EQ(c.call<api::Call::EventCreate>({kEvent, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamBeginCapture>({kStream, 0, 0}), 0);
  ASSERT_EQ(c.launch(w.fn, w.p, 16, kStream), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({kEvent, kStream, 0, 0}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.retry);
  EXPECT_NE(r.error.find("an event recorded in it"), std::string::npos) << r.error;
  slot_control::release(stub);
  ASSERT_EQ(c.call<api::Call::StreamEndCapture>({kStream, kCaptured + 0x10}), 0);
  EXPECT_EQ(CaptureWork::node_count(c, kCaptured + 0x10), 1u);  // the kernel (a captured record adds no node)
  // Once it has ended, the suspend goes through.
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
}

// A state file's stream capture record is untrusted: a capture on a stream the client lacks,
// a mode out of range, a dependency beyond its graph's nodes, a graph the client lacks are
// refused naming the record; the good file still restores and the capture ends as it would.
TEST(StubGraph, AHostileStreamCaptureRecordInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-capture-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-capture-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  CaptureWork w;
  ASSERT_NO_FATAL_FAILURE(w.setup(c));
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kGraph, false, [] {}));
  const std::vector<int> expected = w.run(c, kGraph, kExec);
  ASSERT_NO_FATAL_FAILURE(w.capture(c, kCaptured, false, [&] {
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
    ASSERT_TRUE(r.ok) << r.error;
    // The record: count (4), then stream (8), device (4), mode (4), id (8), into (8), the
    // graph, its dependencies (count, then each index: the last is the copy's).
    auto u32_at = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
    auto u64_at = [](std::vector<std::byte>& p, size_t at, uint64_t v) { std::memcpy(p.data() + at, &v, 8); };
    constexpr uint32_t kCaptures = 10;  // suspend.cc kStreamCaptures
    struct Case {
      const char* what;
      std::function<void(std::vector<std::byte>&)> edit;
      const char* expect;
    };
    const Case cases[] = {
        {"a stream the client lacks", [&](auto& p) { u64_at(p, 4, 0x77777); }, "a stream the client lacks"},
        {"a per-thread stream it never used", [&](auto& p) { u64_at(p, 4, api::kStreamPerThread); },
         "a stream the client lacks"},
        {"a mode out of range", [&](auto& p) { u32_at(p, 16, 7); }, "capture mode out of range"},
        {"the global mode (the host begins none so)", [&](auto& p) { u32_at(p, 16, 0); }, "capture mode out of range"},
        {"a dependency beyond its graph's nodes", [&](auto& p) { u32_at(p, p.size() - 4, 1000); },
         "dependency beyond its graph's nodes"},
        {"into a graph the client lacks", [&](auto& p) { u64_at(p, 28, 0x99999); }, "a graph the client lacks"},
        {"two captures where one is", [&](auto& p) { u32_at(p, 0, 2); }, "bad stream capture record"},
    };
    for (const Case& k : cases) {
      SCOPED_TRACE(k.what);
      state::remove_state_file(bad);
      ASSERT_NO_FATAL_FAILURE(slot_control::rewrite_state(path, bad, k.edit, kCaptures));
      const cc::Reply reply = slot_control::control(stub, cc::Op::kRestore, bad);
      EXPECT_FALSE(reply.ok);
      EXPECT_NE(reply.error.find("bad stream capture record"), std::string::npos) << reply.error;
      EXPECT_NE(reply.error.find(k.expect), std::string::npos) << reply.error;
      EXPECT_TRUE(reply.status.suspended);
      EXPECT_EQ(tst::fake_live_graphs(), 0u);
      EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
    }
    r = slot_control::control(stub, cc::Op::kRestore, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
  }));
  EXPECT_EQ(w.run(c, kCaptured, kExec + 0x10), expected);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

}  // namespace
}  // namespace vmcuda::host::test
