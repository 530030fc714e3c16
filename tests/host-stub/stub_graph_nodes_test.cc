// vmcuda-stub's graph node calls (host-stub/src/graph_nodes.cc, calls.def 0x1b00) on the
// test executor, through the wire: node parameters read back and changed in a graph and in
// an executable graph (whose suspend mirror follows), relations and edges, edges and nodes
// removed, nodes disabled (carried by a suspend and a save), a child node's graph (carried
// too), kernel node
// attributes, cudaStreamGetId; hostile inputs refused while the stub serves on.
#include <cstring>

#include "host-stub/slot_control.h"
#include "host-stub/stub_fixture.h"
#include "client_control.h"

namespace vmcuda::host::test {
namespace {

namespace cc = client_control;

constexpr uint64_t kGraph = 0x20000, kChild = 0x20010, kExec = 0x20100, kStream = 0x20200, kStream2 = 0x20210;
constexpr uint64_t kMemset = 0x30000, kAdd = 0x30010, kEmpty = 0x30020, kChildNode = 0x30030, kChildAdd = 0x31000;

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
uint64_t handle_at(const std::vector<std::byte>& b, size_t i) {
  uint64_t h = 0;
  std::memcpy(&h, b.data() + 8 * i, 8);
  return h;
}

// memset(p, value) -> add_one(p) -> empty, and a child graph node (add_one(q)) after the memset.
struct Workload {
  uint64_t fn = 0, p = 0, q = 0;
  void build(Client& c) {
    fn = c.load_add_one();
    p = c.malloc(64);
    q = c.malloc(64);
    c.put(q, std::vector<int>(16, 0));
    ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream, 1, 0}), 0);
    ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddMemsetNode>({kGraph, kMemset, p, 0, 16, 1, 1, 4, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddKernelNode>({kGraph, kAdd, fn, {1, 1, 1}, {16, 1, 1}, 0, 12, 1, 0}, nullptr,
                                                    cat(handles({kMemset}), Client::add_one_args(p, 16))),
              0);
    ASSERT_EQ(c.call<api::Call::GraphAddNode>({kGraph, kEmpty, 0, api::kGraphNodeEmpty, 1}, nullptr, handles({kAdd})), 0);
    ASSERT_EQ(c.call<api::Call::GraphCreate>({kChild, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::GraphAddKernelNode>({kChild, kChildAdd, fn, {1, 1, 1}, {16, 1, 1}, 0, 12, 0, 0}, nullptr,
                                                    Client::add_one_args(q, 16)),
              0);
    ASSERT_EQ(c.call<api::Call::GraphAddNode>({kGraph, kChildNode, kChild, api::kGraphNodeChild, 1}, nullptr,
                                              handles({kMemset})),
              0);
  }
  // Launches `exec` once and gives p.
  std::vector<int> run(Client& c, uint64_t exec = kExec) {
    EXPECT_EQ(c.call<api::Call::GraphLaunch>({exec, kStream}), 0);
    EXPECT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), 0);
    return c.get(p, 16);
  }
};

api::GraphNodeParams memset_params(uint64_t dst, uint32_t value) {
  api::GraphNodeParams m{};
  m.type = api::kGraphNodeMemset;
  m.memset_dst = dst, m.memset_width = 16, m.memset_height = 1, m.memset_value = value, m.memset_element_size = 4;
  return m;
}

TEST(StubGraphNodes, ParametersReadBackAndChangedInTheGraphAndInTheExecutableGraph) {
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  // Read back: the kernel by its function handle and its parameters' bytes.
  api::GraphNodeParams got{};
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::GraphNodeGetParams>({kAdd}, &got, {}, &extra, 32768), 0);
  EXPECT_EQ(got.type, api::kGraphNodeKernel);
  EXPECT_EQ(got.object, w.fn);
  EXPECT_EQ(got.block[0], 16u);
  ASSERT_EQ(got.arg_bytes, 12u);
  EXPECT_EQ(extra, Client::add_one_args(w.p, 16));
  ASSERT_EQ(c.call<api::Call::GraphNodeGetParams>({kMemset}, &got), 0);
  EXPECT_EQ(got.type, api::kGraphNodeMemset);
  EXPECT_EQ(got.memset_dst, w.p);
  EXPECT_EQ(got.memset_value, 1u);
  EXPECT_EQ(got.memset_width, 16u);
  EXPECT_EQ(got.memset_element_size, 4u);

  // Changed in the graph: memset 5; then instantiated: 5 + 1.
  api::GraphNodeSetArgs set{0, kMemset, memset_params(w.p, 5)};
  ASSERT_EQ(c.call<api::Call::GraphNodeSetParams>(set), 0);
  ASSERT_EQ(c.call<api::Call::GraphNodeGetParams>({kMemset}, &got), 0);
  EXPECT_EQ(got.memset_value, 5u);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 6));

  // Changed in the executable graph only: memset 20, and the kernel's on q.
  set = {kExec, kMemset, memset_params(w.p, 20)};
  ASSERT_EQ(c.call<api::Call::GraphNodeSetParams>(set), 0);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 21));
  ASSERT_EQ(c.call<api::Call::GraphNodeGetParams>({kMemset}, &got), 0);
  EXPECT_EQ(got.memset_value, 5u);  // the graph keeps its own

  // The mirror followed: a suspend carries the change.
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 21));
  // After the resume the driver knows the executable graph by its mirror's nodes: still settable.
  set = {kExec, kMemset, memset_params(w.p, 30)};
  ASSERT_EQ(c.call<api::Call::GraphNodeSetParams>(set), 0);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 31));
}

TEST(StubGraphNodes, RelationsEdgesRemovalAndDestroyedNodes) {
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  api::GraphListReply list{};
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::GraphNodeGetRelated>({kMemset, api::kGraphNodeDependents, 8}, &list, {}, &extra, 64), 0);
  ASSERT_EQ(list.count, 2u);
  EXPECT_EQ(handle_at(extra, 0) + handle_at(extra, 1), kAdd + kChildNode);
  ASSERT_EQ(c.call<api::Call::GraphNodeGetRelated>({kEmpty, api::kGraphNodeDependencies, 8}, &list, {}, &extra, 64), 0);
  ASSERT_EQ(list.count, 1u);
  EXPECT_EQ(handle_at(extra, 0), kAdd);
  ASSERT_EQ(c.call<api::Call::GraphGetEdges>({kGraph, 0, 8}, &list, {}, &extra, 128), 0);
  ASSERT_EQ(list.count, 3u);
  // from[3] then to[3].
  EXPECT_EQ(extra.size(), 6u * 8);
  ASSERT_EQ(c.call<api::Call::GraphRemoveDependencies>({kGraph, 1, 0}, nullptr, handles({kAdd, kEmpty})), 0);
  EXPECT_EQ(c.call<api::Call::GraphRemoveDependencies>({kGraph, 1, 0}, nullptr, handles({kAdd, kEmpty})),
            CUDA_ERROR_INVALID_VALUE);  // no such edge now
  ASSERT_EQ(c.call<api::Call::GraphGetEdges>({kGraph, 0, 0}, &list), 0);
  EXPECT_EQ(list.count, 2u);
  ASSERT_EQ(c.call<api::Call::GraphDestroyNode>({kEmpty}), 0);
  EXPECT_EQ(c.call<api::Call::GraphDestroyNode>({kEmpty}), CUDA_ERROR_INVALID_VALUE);  // its handle went with it
  ASSERT_EQ(c.call<api::Call::GraphGetNodes>({kGraph, 0, 0}, &list), 0);
  EXPECT_EQ(list.count, 3u);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 2));
}

// A disabled node stays disabled across a suspend and a save (the resume disables it again in
// the executable graph it instantiates), and can be enabled and disabled again after.
TEST(StubGraphNodes, ADisabledNodeStaysDisabledAcrossASuspendAndASave) {
  const std::string path = ::testing::TempDir() + "vmcuda-disabled-node.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  auto enabled = [&] {
    api::GraphNodeEnableReply en{};
    EXPECT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 0, 0}, &en), 0);
    return en.enabled;
  };
  ASSERT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 1, 0}), 0);
  EXPECT_EQ(enabled(), 0u);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 1));  // the memset only
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(enabled(), 0u);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 1)) << "the kernel node ran after the resume";
  // Enabled after the resume (the driver knows the node by the mirror's now), then disabled again.
  ASSERT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 1, 1}), 0);
  EXPECT_EQ(enabled(), 1u);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 2));
  ASSERT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 1, 0}), 0);
  // Saved and restored (a second instantiation from the mirror), still disabled.
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(enabled(), 0u);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 1));
  ASSERT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 1, 1}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(enabled(), 1u);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 2));
  state::remove_state_file(path);
}

// An executable graph's disabled nodes in a state file are untrusted: too many, one beyond its
// graph, one named twice, or one the driver cannot disable are refused; the good file restores.
TEST(StubGraphNodes, ForgedDisabledNodesInAStateFileAreRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-disabled-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-disabled-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 1, 0}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // The executable graph's record ends with its disabled nodes: their count (1) and the place
  // of the one among its mirror's nodes.
  const auto exec = static_cast<std::byte>(ObjectKind::GraphExec);
  auto is_exec = [&](const std::vector<std::byte>& p) {
    uint64_t h;
    std::memcpy(&h, p.data() + 21, 8);
    return p[0] == exec && h == kExec;
  };
  auto u32_at = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  auto u32_of = [](const std::vector<std::byte>& p, size_t at) {
    uint32_t v;
    std::memcpy(&v, p.data() + at, 4);
    return v;
  };
  const slot_control::Forgery cases[] = {
      {"more disabled nodes than the graph has", [&](auto& p) { if (is_exec(p)) u32_at(p, p.size() - 8, 1u << 20); },
       "more disabled nodes"},
      {"a disabled node beyond the graph", [&](auto& p) { if (is_exec(p)) u32_at(p, p.size() - 4, 4); },
       "beyond its graph's nodes, or named twice"},
      {"a disabled node named twice",
       [&](auto& p) {
         if (!is_exec(p)) return;
         const uint32_t at = u32_of(p, p.size() - 4);
         u32_at(p, p.size() - 8, 2);
         p.resize(p.size() + 4);
         u32_at(p, p.size() - 4, at);
       },
       "named twice"},
      {"every node of the graph disabled (the child graph node and the empty one cannot be)",
       [&](auto& p) {
         if (!is_exec(p)) return;
         p.resize(p.size() - 4);
         u32_at(p, p.size() - 4, 4);
         for (uint32_t i = 0; i < 4; ++i) {
           p.resize(p.size() + 4);
           u32_at(p, p.size() - 4, i);
         }
       },
       "again failed"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_live_graphs(), 0u);
  });
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  api::GraphNodeEnableReply en{};
  ASSERT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 0, 0}, &en), 0);
  EXPECT_EQ(en.enabled, 0u);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 1));
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// A child graph node's graph in a state file is checked against its node: under a node that
// is not a child graph node, or unlike the graph its node holds, it is refused.
TEST(StubGraphNodes, AForgedChildNodesGraphInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-child-graph-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-child-graph-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  constexpr uint64_t kEmbedded = 0x20700;
  api::GraphChildReply child{};
  ASSERT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kEmbedded}, &child), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // An object record: kind (1 byte), id, parent, device (4), handle (8); a graph's then its
  // node count (4) and each node's type (4) and fields.
  const auto graph = static_cast<std::byte>(ObjectKind::Graph), node = static_cast<std::byte>(ObjectKind::GraphNode);
  auto u64_of = [](const std::vector<std::byte>& p, size_t at) {
    uint64_t v;
    std::memcpy(&v, p.data() + at, 8);
    return v;
  };
  auto memset_id = std::make_shared<uint64_t>(0);
  const slot_control::Forgery cases[] = {
      {"under a memset node",
       [&, memset_id](auto& p) {
         if (p[0] == node && u64_of(p, 21) == kMemset) *memset_id = u64_of(p, 1);
         if (p[0] == graph && u64_of(p, 21) == kEmbedded) std::memcpy(p.data() + 9, memset_id.get(), 8);
       },
       "not a child graph node"},
      {"a graph unlike its node's (one node more)",
       [&](auto& p) {
         if (p[0] != graph || u64_of(p, 21) != kEmbedded) return;
         // Its one kernel node, then its edges (none): an empty node appended before them.
         uint32_t count;
         std::memcpy(&count, p.data() + 29, 4);
         ++count;
         std::memcpy(p.data() + 29, &count, 4);
         const uint32_t empty = 5;
         p.insert(p.end() - 4, reinterpret_cast<const std::byte*>(&empty), reinterpret_cast<const std::byte*>(&empty) + 4);
       },
       "not the graph that node holds"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_live_graphs(), 0u);
  });
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  ASSERT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kEmbedded + 0x20}, &child), 0);
  EXPECT_EQ(child.graph, kEmbedded);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

TEST(StubGraphNodes, AChildNodesGraphHasOneHandleAndIsNeverDestroyedThroughIt) {
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  constexpr uint64_t kEmbedded = 0x20700;
  api::GraphChildReply child{};
  ASSERT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kEmbedded}, &child), 0);
  EXPECT_EQ(child.graph, kEmbedded);
  ASSERT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kEmbedded + 0x10}, &child), 0);
  EXPECT_EQ(child.graph, kEmbedded);  // the same graph: the same handle
  api::GraphListReply list{};
  ASSERT_EQ(c.call<api::Call::GraphGetNodes>({kEmbedded, 0, 0}, &list), 0);
  EXPECT_EQ(list.count, 1u);
  const uint64_t graphs = tst::fake_live_graphs();
  ASSERT_EQ(c.call<api::Call::GraphDestroy>({kEmbedded, 0, 0}), 0);  // the entry only (the guest refuses it first)
  EXPECT_EQ(tst::fake_live_graphs(), graphs);
  // While the program holds it, a suspend and a save carry it: the same handle for the graph
  // the node holds after the resume, its nodes behind their handles (one the program added
  // through it too), in the node's graph.
  ASSERT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kEmbedded}, &child), 0);
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::GraphGetNodes>({kEmbedded, 0, 4}, &list, {}, &extra, 32), 0);
  ASSERT_EQ(list.count, 1u);
  const uint64_t inner = handle_at(extra, 0);
  constexpr uint64_t kInnerEmpty = 0x31200;
  ASSERT_EQ(c.call<api::Call::GraphAddNode>({kEmbedded, kInnerEmpty, 0, api::kGraphNodeEmpty, 1}, nullptr, handles({inner})), 0);
  const std::string path = ::testing::TempDir() + "vmcuda-child-graph.state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    state::remove_state_file(path);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    r = slot_control::control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    ASSERT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kEmbedded + 0x20}, &child), 0);
    EXPECT_EQ(child.graph, kEmbedded) << "the node's graph has another handle";
    ASSERT_EQ(c.call<api::Call::GraphGetNodes>({kEmbedded, 0, 4}, &list, {}, &extra, 32), 0);
    ASSERT_EQ(list.count, 2u);
    EXPECT_EQ(handle_at(extra, 0) + handle_at(extra, 1), inner + kInnerEmpty);
    api::GraphNodeParams got{};
    std::vector<std::byte> args;
    ASSERT_EQ(c.call<api::Call::GraphNodeGetParams>({inner}, &got, {}, &args, 32768), 0);
    EXPECT_EQ(got.type, api::kGraphNodeKernel);
    EXPECT_EQ(args, Client::add_one_args(w.q, 16));
    ASSERT_EQ(c.call<api::Call::GraphNodeGetRelated>({kInnerEmpty, api::kGraphNodeDependencies, 8}, &list, {}, &extra, 64), 0);
    ASSERT_EQ(list.count, 1u);
    EXPECT_EQ(handle_at(extra, 0), inner);
  }
  state::remove_state_file(path);
  ASSERT_EQ(c.call<api::Call::GraphDestroyNode>({kInnerEmpty}), 0);  // the child graph's shape as it was
  ASSERT_EQ(c.call<api::Call::GraphDestroy>({kEmbedded, 0, 0}), 0);
  cc::Reply r;

  // An executable graph's child node takes another graph of the same shape (add_one on p
  // instead of q), and its mirror follows: a suspend carries it.
  constexpr uint64_t kChild2 = 0x20020;
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kChild2, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphAddKernelNode>({kChild2, 0x31100, w.fn, {1, 1, 1}, {16, 1, 1}, 0, 12, 0, 0}, nullptr,
                                                  Client::add_one_args(w.p, 16)),
            0);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 2));
  api::GraphNodeSetArgs set{kExec, kChildNode, {}};
  set.params.type = api::kGraphNodeChild;
  set.params.object = kChild2;
  ASSERT_EQ(c.call<api::Call::GraphNodeSetParams>(set), 0);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 3));
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(w.run(c), std::vector<int>(16, 3));
  set.exec = 0;  // a graph's child node keeps its graph
  EXPECT_EQ(c.call<api::Call::GraphNodeSetParams>(set), CUDA_ERROR_INVALID_VALUE);
}

TEST(StubGraphNodes, KernelNodeAttributesAndStreamIds) {
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  api::GraphKernelAttrReply v{};
  ASSERT_EQ(c.call<api::Call::GraphKernelNodeAttribute>({kAdd, 0, api::kAttrSet, 8, {3, 0, 0, 0}}), 0);
  ASSERT_EQ(c.call<api::Call::GraphKernelNodeAttribute>({kAdd, 0, api::kAttrGet, 8, {}}, &v), 0);
  EXPECT_EQ(v.value[0], 3u);
  ASSERT_EQ(c.call<api::Call::GraphKernelNodeAttribute>({kChildAdd, kAdd, api::kAttrCopy, 0, {}}), 0);
  ASSERT_EQ(c.call<api::Call::GraphKernelNodeAttribute>({kChildAdd, 0, api::kAttrGet, 8, {}}, &v), 0);
  EXPECT_EQ(v.value[0], 3u);
  // An attribute a suspend could not carry (access policy window): refused.
  EXPECT_EQ(c.call<api::Call::GraphKernelNodeAttribute>({kAdd, 0, api::kAttrSet, 1, {}}), CUDA_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream2, 1, 0}), 0);
  api::StreamIdReply a{}, b{}, a2{};
  ASSERT_EQ(c.call<api::Call::StreamGetId>({kStream}, &a), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetId>({kStream2}, &b), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetId>({kStream}, &a2), 0);
  EXPECT_EQ(a.id, a2.id);
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(c.call<api::Call::StreamGetId>({0x99999}, &a), CUDA_ERROR_INVALID_HANDLE);
}

TEST(StubGraphNodes, ConditionalNodesRunTheirBodiesByTheHandlesValue) {
  Stub stub;
  Client c(stub);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(64);
  c.put(p, std::vector<int>(16, 0));
  ASSERT_EQ(c.call<api::Call::StreamCreate>({kStream, 1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kGraph, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphCreate>({kChild, 0, 0}), 0);
  api::GraphCondHandleReply on{}, off{}, other{};
  ASSERT_EQ(c.call<api::Call::GraphConditionalHandle>({kGraph, 1, 1}, &on), 0);
  ASSERT_EQ(c.call<api::Call::GraphConditionalHandle>({kGraph, 0, 1}, &off), 0);
  ASSERT_EQ(c.call<api::Call::GraphConditionalHandle>({kChild, 1, 0}, &other), 0);
  constexpr uint64_t kIf = 0x30100, kIfElse = 0x30110, kBody = 0x20800, kThen = 0x20810, kElse = 0x20820;
  // if (on) add_one; if (off) add_one x2 else add_one x3 (by dependencies in the body: 1 + 3 = 4).
  ASSERT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, kIf, on.handle, 0, 1, 0, 0}, nullptr, handles({kBody})), 0);
  ASSERT_EQ(c.call<api::Call::GraphAddKernelNode>({kBody, 0x31000, fn, {1, 1, 1}, {16, 1, 1}, 0, 12, 0, 0}, nullptr,
                                                  Client::add_one_args(p, 16)),
            0);
  ASSERT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, kIfElse, off.handle, 0, 2, 1, 0}, nullptr,
                                                       handles({kIf, kThen, kElse})),
            0);
  for (uint64_t node : {0x31100, 0x31110})
    ASSERT_EQ(c.call<api::Call::GraphAddKernelNode>({kThen, node, fn, {1, 1, 1}, {16, 1, 1}, 0, 12, 0, 0}, nullptr,
                                                    Client::add_one_args(p, 16)),
              0);
  for (uint64_t node : {0x31200, 0x31210, 0x31220})
    ASSERT_EQ(c.call<api::Call::GraphAddKernelNode>({kElse, node, fn, {1, 1, 1}, {16, 1, 1}, 0, 12, 0, 0}, nullptr,
                                                    Client::add_one_args(p, 16)),
              0);
  ASSERT_EQ(c.call<api::Call::GraphInstantiate>({kExec, kGraph, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphLaunch>({kExec, kStream}), 0);
  ASSERT_EQ(c.call<api::Call::StreamSynchronize>({kStream}), 0);
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 4));

  // Refused: another graph's handle, sizes the type does not take, bodies' handles that are
  // not new, handles of the wrong length, too many bodies.
  const auto bad_args = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments);
  EXPECT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, 0x30200, other.handle, 0, 1, 0, 0}, nullptr,
                                                       handles({0x20900})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, 0x30200, on.handle, 1, 2, 0, 0}, nullptr,
                                                       handles({0x20900, 0x20910})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, 0x30200, on.handle, 0, 1, 0, 0}, nullptr, handles({kBody})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, 0x30200, on.handle, 2, 2, 0, 0}, nullptr,
                                                       handles({0x20900, 0x20900})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, 0x30200, on.handle, 0, 2, 0, 0}, nullptr, handles({0x20900})),
            bad_args);
  EXPECT_EQ(c.call<api::Call::GraphAddConditionalNode>({kGraph, 0x30200, on.handle, 2, api::kMaxConditionalBodies + 1, 0, 0}),
            bad_args);
  EXPECT_EQ(c.call<api::Call::GraphConditionalHandle>({kGraph, 0, 2}), CUDA_ERROR_INVALID_VALUE);

  // A graph with conditional nodes is not carried by a suspend: refused, it runs on.
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cudaGraphConditionalHandleCreate"), std::string::npos) << r.error;
  EXPECT_FALSE(r.retry);  // no window the program closes by itself: vmcudactl does not wait for it
  EXPECT_TRUE(slot_control::control(stub, cc::Op::kSuspendWindow).ok);
  slot_control::release(stub);
  ASSERT_EQ(c.call<api::Call::GraphExecDestroy>({kExec}), 0);
  ASSERT_EQ(c.call<api::Call::GraphDestroy>({kGraph, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::GraphDestroy>({kChild, 0, 0}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
}

TEST(StubGraphNodes, HostileArgumentsAreRefusedAndTheStubServesOn) {
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  const auto bad_args = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments);
  // Parameter bytes that do not match what the frame holds; parameters of another kind.
  api::GraphNodeSetArgs set{0, kAdd, {}};
  set.params.type = api::kGraphNodeKernel;
  set.params.object = w.fn;
  set.params.arg_bytes = 64;
  EXPECT_EQ(c.call<api::Call::GraphNodeSetParams>(set, nullptr, Client::add_one_args(w.p, 16)), bad_args);
  set.params = memset_params(w.p, 1);
  EXPECT_EQ(c.call<api::Call::GraphNodeSetParams>(set), CUDA_ERROR_INVALID_VALUE);
  // A memset over memory that is not the client's; a kernel node over a p it does not own is
  // the kernel's business, as at the node's creation.
  set = {0, kMemset, memset_params(w.p + (1u << 30), 1)};
  EXPECT_EQ(c.call<api::Call::GraphNodeSetParams>(set), CUDA_ERROR_INVALID_VALUE);
  // Unknown nodes and executable graphs; lists larger than allowed or than the reply area.
  set = {0x77777, kMemset, memset_params(w.p, 1)};
  EXPECT_EQ(c.call<api::Call::GraphNodeSetParams>(set), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphNodeGetParams>({0x77777}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphNodeGetRelated>({kAdd, 2, 0}), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphNodeGetRelated>({kAdd, 0, api::kMaxGraphList + 1}), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphGetEdges>({kGraph, 0, 8}, nullptr, {}, nullptr, 8),
            static_cast<int32_t>(vmrpc::wire::ChannelStatus::kReplyTooSmall));
  EXPECT_EQ(c.call<api::Call::GraphRemoveDependencies>({kGraph, 2, 0}, nullptr, handles({kAdd})), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 2, 0}), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphNodeEnabled>({kExec, kAdd, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::GraphKernelNodeAttribute>({kAdd, 0, 7, 8, {}}), bad_args);
  EXPECT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, 2}), CUDA_ERROR_INVALID_VALUE);  // not a guest-made handle
  EXPECT_EQ(c.call<api::Call::GraphChildGraph>({kChildNode, kGraph}), CUDA_ERROR_INVALID_VALUE);  // taken
  // Still serving.
  c.put(w.p, std::vector<int>(16, 7));
  EXPECT_EQ(c.get(w.p, 16), std::vector<int>(16, 7));
}

}  // namespace
}  // namespace vmcuda::host::test
