// cuDNN calls (calls.def 0x2600-; api/libs/cudnn.calls) through the wire to the stub on the test
// executor's fake libcudnn.so.9 (tests/executor/fake_cudnn.cc): a pointwise graph built,
// planned through the heuristics (configurations the guest made, filled by the library) and
// executed on the client's memory; hostile arguments; suspend and resume, save and restore
// (and hostile state records); the legacy API's descriptors and routines, recurrent networks
// among them; teardown.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "host-stub/slot_control.h"
#include "arena.h"
#include "stub_fixture.h"
#include "vmcuda/api/cudnn_abi.h"

namespace vmcuda::host::test {
namespace {

// cudnn_graph.h values the tests use.
constexpr int32_t kTHandle = 0, kTDataType = 1, kTBool = 2, kTInt64 = 3, kTVoidPtr = 6, kTHeurMode = 8,
                  kTPointwiseMode = 14, kTDescriptor = 15;
constexpr int32_t kPointwise = 0, kEngineCfg = 3, kEngineHeur = 4, kPlan = 5, kOpPointwise = 13, kOpGraph = 15,
                  kVariantPack = 16, kTensor = 17;
constexpr int32_t kPwMode = 0, kHeurMode = 200, kHeurGraph = 201, kHeurResults = 202, kPlanHandle = 400,
                  kPlanCfg = 401, kOpPwDesc = 750, kOpPwX = 751, kOpPwB = 752, kOpPwY = 753, kGraphHandle = 800,
                  kGraphOps = 801, kTAlign = 900, kTDtype = 901, kTDims = 902, kTStrides = 903, kTUid = 906,
                  kTVirtual = 907, kVpUids = 1000, kVpPointers = 1001;

struct CudnnTest : ::testing::Test {
  Stub stub;
  Client c{stub};
  uint64_t handle = 0x9000, next = 0x9100;

  void SetUp() override { ASSERT_EQ(c.call<api::Call::cudnnCreate>({handle}), 0); }

  uint64_t make(int32_t type) {
    const uint64_t d = next++;
    api::cudnnBackendCreateDescriptor_Args a{};
    a.descriptor = d;
    a.descriptorType = type;
    EXPECT_EQ(c.call<api::Call::cudnnBackendCreateDescriptor>(a), 0);
    return d;
  }
  template <class T>
  int32_t set(uint64_t d, int32_t name, int32_t type, std::vector<T> v) {
    api::cudnnBackendSetAttribute_Args a{};
    a.descriptor = d;
    a.attributeName = name;
    a.attributeType = type;
    a.elementCount = static_cast<int64_t>(v.size());
    return c.call<api::Call::cudnnBackendSetAttribute>(a, nullptr, std::as_bytes(std::span(v)));
  }
  int32_t finalize(uint64_t d) { return c.call<api::Call::cudnnBackendFinalize>({d}); }
  uint64_t tensor(int64_t uid, std::vector<int64_t> dims, bool is_virtual) {
    std::vector<int64_t> strides(dims.size());
    int64_t s = 1;
    for (size_t i = dims.size(); i-- > 0;) strides[i] = s, s *= dims[i];
    const uint64_t t = make(kTensor);
    EXPECT_EQ(set<int32_t>(t, kTDtype, kTDataType, {0}), 0);
    EXPECT_EQ(set(t, kTDims, kTInt64, dims), 0);
    EXPECT_EQ(set(t, kTStrides, kTInt64, strides), 0);
    EXPECT_EQ(set<int64_t>(t, kTUid, kTInt64, {uid}), 0);
    EXPECT_EQ(set<int64_t>(t, kTAlign, kTInt64, {16}), 0);
    EXPECT_EQ(set<uint8_t>(t, kTVirtual, kTBool, {is_virtual}), 0);
    EXPECT_EQ(finalize(t), 0);
    return t;
  }
  uint64_t op(int32_t mode, uint64_t x, uint64_t b, uint64_t y) {
    const uint64_t pw = make(kPointwise);
    EXPECT_EQ(set<int32_t>(pw, kPwMode, kTPointwiseMode, {mode}), 0);
    EXPECT_EQ(finalize(pw), 0);
    const uint64_t o = make(kOpPointwise);
    EXPECT_EQ(set<uint64_t>(o, kOpPwDesc, kTDescriptor, {pw}), 0);
    EXPECT_EQ(set<uint64_t>(o, kOpPwX, kTDescriptor, {x}), 0);
    if (b) {
      EXPECT_EQ(set<uint64_t>(o, kOpPwB, kTDescriptor, {b}), 0);
    }
    EXPECT_EQ(set<uint64_t>(o, kOpPwY, kTDescriptor, {y}), 0);
    EXPECT_EQ(finalize(o), 0);
    return o;
  }
  int32_t get(uint64_t d, int32_t name, int32_t type, int64_t requested, int64_t* count,
              std::span<const std::byte> tail = {}, std::vector<std::byte>* extra = nullptr, uint32_t room = 0) {
    api::cudnnBackendGetAttribute_Args a{};
    a.descriptor = d;
    a.attributeName = name;
    a.attributeType = type;
    a.requestedElementCount = requested;
    api::cudnnBackendGetAttribute_Reply r{};
    const int32_t s = c.call<api::Call::cudnnBackendGetAttribute>(a, &r, tail, extra, room);
    if (count) std::memcpy(count, r.elementCount, 8);
    return s;
  }
  uint64_t floats(const std::vector<float>& v) {
    const uint64_t p = c.malloc(v.size() * 4);
    EXPECT_EQ(c.call<api::Call::CopyToDeviceInline>({p}, nullptr, std::as_bytes(std::span(v))), 0);
    return p;
  }
  std::vector<float> read(uint64_t p, size_t n) {
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<api::Call::CopyFromDeviceInline>({p, n * 4}, nullptr, {}, &extra, uint32_t(n * 4)), 0);
    std::vector<float> v(n);
    std::memcpy(v.data(), extra.data(), std::min(extra.size(), n * 4));
    return v;
  }

  // Y = relu(X + B) over 1x2x1x3 tensors (B 1x2x1x1): the graph, its plan through the heuristics.
  uint64_t graph = 0, plan = 0, heur = 0, cfg = 0;
  void build() {
    const uint64_t x = tensor(1, {1, 2, 1, 3}, false), b = tensor(2, {1, 2, 1, 1}, false),
                   t = tensor(3, {1, 2, 1, 3}, true), y = tensor(4, {1, 2, 1, 3}, false);
    const uint64_t ops[2] = {op(0, x, b, t), op(100, t, 0, y)};  // ADD, RELU_FWD
    graph = make(kOpGraph);
    ASSERT_EQ(set<uint64_t>(graph, kGraphOps, kTDescriptor, {ops[0], ops[1]}), 0);
    ASSERT_EQ(set<uint64_t>(graph, kGraphHandle, kTHandle, {handle}), 0);
    ASSERT_EQ(finalize(graph), 0);
    heur = make(kEngineHeur);
    ASSERT_EQ(set<uint64_t>(heur, kHeurGraph, kTDescriptor, {graph}), 0);
    ASSERT_EQ(set<int32_t>(heur, kHeurMode, kTHeurMode, {3}), 0);
    ASSERT_EQ(finalize(heur), 0);
    int64_t n = 0;
    ASSERT_EQ(get(heur, kHeurResults, kTDescriptor, 0, &n), 0);
    ASSERT_EQ(n, 1);
    cfg = make(kEngineCfg);
    ASSERT_EQ(get(heur, kHeurResults, kTDescriptor, 1, &n, std::as_bytes(std::span(&cfg, 1))), 0);
    plan = make(kPlan);
    ASSERT_EQ(set<uint64_t>(plan, kPlanHandle, kTHandle, {handle}), 0);
    ASSERT_EQ(set<uint64_t>(plan, kPlanCfg, kTDescriptor, {cfg}), 0);
    ASSERT_EQ(finalize(plan), 0);
  }
  uint64_t pack(std::vector<uint64_t> pointers) {
    const uint64_t v = make(kVariantPack);
    EXPECT_EQ(set<int64_t>(v, kVpUids, kTInt64, {1, 2, 4}), 0);
    EXPECT_EQ(set(v, kVpPointers, kTVoidPtr, pointers), 0);
    EXPECT_EQ(finalize(v), 0);
    return v;
  }
};

TEST_F(CudnnTest, PointwiseGraphRunsOnTheClientsMemory) {
  build();
  const uint64_t x = floats({-1, 0, 2, 3, -5, 1}), b = floats({0.5f, 1}), y = floats({9, 9, 9, 9, 9, 9});
  EXPECT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, pack({x, b, y})}), 0);
  EXPECT_EQ(read(y, 6), (std::vector<float>{0, 0.5f, 2.5f, 4, 0, 2}));
  int64_t n = 0;  // the library's answer to a plain attribute comes back
  std::vector<std::byte> extra;
  ASSERT_EQ(get(x - x + 0x9100, kTDims, kTInt64, 4, &n, {}, &extra, 32), 0);  // the first tensor made
  ASSERT_EQ(n, 4);
  ASSERT_EQ(extra.size(), 32u);
  int64_t dims[4];
  std::memcpy(dims, extra.data(), 32);
  EXPECT_EQ(dims[3], 3);
}

TEST_F(CudnnTest, HostileArguments) {
  build();
  const uint64_t x = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 1}), y = floats({0, 0, 0, 0, 0, 0});
  const uint64_t t = make(kTensor);
  // Elements whose bytes do not match their count: refused as the guest's fault.
  api::cudnnBackendSetAttribute_Args a{};
  a.descriptor = t, a.attributeName = kTDims, a.attributeType = kTInt64, a.elementCount = 4;
  const std::byte eight[8]{};
  EXPECT_LT(c.call<api::Call::cudnnBackendSetAttribute>(a, nullptr, eight), 0);
  a.elementCount = -1;
  EXPECT_LT(c.call<api::Call::cudnnBackendSetAttribute>(a, nullptr, {}), 0);
  // A type vmcuda does not know; descriptors and handles that are none of the client's (or of
  // the other kind); a pointer that is not the client's memory.
  EXPECT_EQ(set<int32_t>(t, kTDims, 99, {1}), api::kCudnnNotSupported);
  EXPECT_EQ(set<uint64_t>(t, kOpPwX, kTDescriptor, {0xdead}), api::kCudnnBadParam);
  EXPECT_EQ(set<uint64_t>(t, kOpPwX, kTDescriptor, {handle}), api::kCudnnBadParam);
  EXPECT_EQ(set<uint64_t>(t, kGraphHandle, kTHandle, {t}), api::kCudnnBadParam);
  const uint64_t v = make(kVariantPack);
  EXPECT_EQ(set<uint64_t>(v, kVpPointers, kTVoidPtr, {x, 0xdead0000, y}), api::kCudnnBadParam);
  // Reads: a count beyond what one call carries; room smaller than asked; descriptors short.
  int64_t n = 0;
  EXPECT_LT(get(graph, kTDims, kTInt64, int64_t(api::kCudnnMaxAttributeBytes), &n), 0);
  EXPECT_LT(get(graph, kTDims, kTInt64, 4, &n, {}, nullptr, 8), 0);
  EXPECT_LT(get(graph, kGraphOps, kTDescriptor, 2, &n, std::as_bytes(std::span(&v, 1))), 0);
  // Handles that are not new.
  EXPECT_LT(c.call<api::Call::cudnnCreate>({handle}), 0);
  EXPECT_LT(c.call<api::Call::cudnnBackendCreateDescriptor>({t, kTensor}), 0);
  // Execution with memory freed after the variant pack was made: refused, not run.
  const uint64_t gone = floats({0, 0, 0, 0, 0, 0});
  const uint64_t p = pack({x, b, gone});
  ASSERT_EQ(c.call<api::Call::Free>({gone}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, p}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnBackendExecute>({plan, plan, p}), api::kCudnnBadParam);  // no handle
  // The stub keeps serving.
  EXPECT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, pack({x, b, y})}), 0);
  EXPECT_EQ(read(y, 6), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  // Destroyed: gone.
  EXPECT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({plan}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({plan}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({handle}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnDestroy>({handle}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroy>({handle}), api::kCudnnBadParam);
}

namespace cc = slot_control::cc;

// Suspend and resume (or save and restore): every handle and descriptor comes back behind the
// same guest handle, made again from its recorded steps in the client's order (the engine
// configuration filled from the heuristics' results among them), the plan finalized again.
TEST_F(CudnnTest, APointwiseGraphExecutesTheSameAfterSuspendAndResume) {
  build();
  const uint64_t x = floats({-1, 0, 2, 3, -5, 1}), b = floats({0.5f, 1}), y = floats({9, 9, 9, 9, 9, 9});
  const uint64_t before = pack({x, b, y});
  const std::vector<float> want{0, 0.5f, 2.5f, 4, 0, 2};
  ASSERT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, before}), 0);
  ASSERT_EQ(read(y, 6), want);
  const uint64_t stream = api::kFirstGuestHandle + 0x500;
  ASSERT_EQ(c.call<api::Call::StreamCreate>({stream, 1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::cudnnSetStream>({handle, stream}), 0);
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn." + std::to_string(::getpid()) + ".state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    const uint64_t objects = tst::fake_live_cudnn_objects();
    state::remove_state_file(path);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_LT(tst::fake_live_cudnn_objects(), objects);  // released with the client's GPU state
    r = slot_control::control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    EXPECT_EQ(tst::fake_live_cudnn_objects(), objects);
    // The variant pack made before and one made now: the same results.
    const std::vector<float> nines(6, 9.f);
    ASSERT_EQ(c.call<api::Call::CopyToDeviceInline>({y}, nullptr, std::as_bytes(std::span(nines))), 0);
    ASSERT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, before}), 0);
    EXPECT_EQ(read(y, 6), want);
    const uint64_t y2 = floats({7, 7, 7, 7, 7, 7});
    ASSERT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, pack({x, b, y2})}), 0);
    EXPECT_EQ(read(y2, 6), want);
    // The attributes read as the library has them.
    int64_t n = 0;
    std::vector<std::byte> extra;
    ASSERT_EQ(get(0x9100, kTDims, kTInt64, 4, &n, {}, &extra, 32), 0);  // the first tensor made
    ASSERT_EQ(n, 4);
  }
  state::remove_state_file(path);
}

uint64_t objects(Stub& stub) { return slot_control::control(stub, cc::Op::kStatus).status.objects; }

// PyTorch (cudnn_frontend) destroys the heuristics, and may destroy the engine configuration,
// once the plan is made: they are kept as retired descriptors (their steps) while the plan
// lives, made again by a resume to make the plan from, and dropped with the plan.
TEST_F(CudnnTest, DescriptorsDestroyedAfterAPlanWasMadeFromThemAreCarriedForIt) {
  build();
  ASSERT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({heur}), 0);
  ASSERT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({cfg}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({cfg}), api::kCudnnBadParam);  // gone for the guest
  EXPECT_EQ(finalize(cfg), api::kCudnnBadParam);
  const uint64_t x = floats({-1, 0, 2, 3, -5, 1}), b = floats({0.5f, 1}), y = floats({9, 9, 9, 9, 9, 9});
  const std::vector<float> want{0, 0.5f, 2.5f, 4, 0, 2};
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  ASSERT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, pack({x, b, y})}), 0);
  EXPECT_EQ(read(y, 6), want);
  // The guest may make new descriptors behind the handles it destroyed.
  api::cudnnBackendCreateDescriptor_Args a{};
  a.descriptor = heur, a.descriptorType = kTensor;
  ASSERT_EQ(c.call<api::Call::cudnnBackendCreateDescriptor>(a), 0);
  // Without the plan nothing needs them: they go with it.
  const uint64_t with_plan = objects(stub);
  ASSERT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({plan}), 0);
  EXPECT_EQ(objects(stub), with_plan - 3);  // the plan, the configuration, the heuristics
}

// A cuDNN handle the program destroyed while its descriptors still name it cannot be carried:
// the suspend is refused, saying so, and the client runs on.
TEST_F(CudnnTest, AHandleDestroyedWhileDescriptorsNameItRefusesTheSuspend) {
  build();
  ASSERT_EQ(c.call<api::Call::cudnnDestroy>({handle}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("from a handle the program has destroyed"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  slot_control::release(stub);
  for (uint64_t d : {plan, graph, heur, cfg}) ASSERT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({d}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
}

// cuDNN records in a state file are the guest's to forge: an unknown descriptor type or step,
// elements that do not match their count, a reference to an object not in the state, a
// handle with steps are refused; the client stays suspended and the good file restores.
TEST_F(CudnnTest, HostileCudnnRecordsInAStateFileAreRefused) {
  build();
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-good." + std::to_string(::getpid()) + ".state";
  const std::string bad = path + ".bad";
  state::remove_state_file(path);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // The object record: kind, id, parent, device, handle (29 bytes), then whether it is a
  // handle (1), its type (4), legacy kind (4), stream (8), step count (4) and each step: seq (8),
  // op (1), name (4), type (4), count (8), elements (a u32 length, the bytes).
  constexpr size_t kIsHandle = 29, kType = 30, kCount = 46, kFirstStep = 50;
  const auto dnn = static_cast<std::byte>(ObjectKind::Cudnn);
  auto i32_at = [](const std::vector<std::byte>& p, size_t at) {
    int32_t v;
    std::memcpy(&v, p.data() + at, 4);
    return v;
  };
  auto put32 = [](std::vector<std::byte>& p, size_t at, int32_t v) { std::memcpy(p.data() + at, &v, 4); };
  // Where the first kSet step of attribute type `type` begins (0: none).
  auto find_set = [&](const std::vector<std::byte>& p, int32_t type) -> size_t {
    if (p[0] != dnn || p[kIsHandle] != std::byte{0}) return 0;
    size_t at = kFirstStep;
    for (int32_t i = 0, n = i32_at(p, kCount); i < n && at + 29 <= p.size(); ++i) {
      const uint32_t len = static_cast<uint32_t>(i32_at(p, at + 25));
      if (p[at + 8] == std::byte{1} && i32_at(p, at + 13) == type) return at;
      at += 29 + len;
    }
    return 0;
  };
  bool once = false;
  const slot_control::Forgery cases[] = {
      {"a descriptor type beyond cuDNN's",
       [&](auto& p) { if (p[0] == dnn && p[kIsHandle] == std::byte{0}) put32(p, kType, 99); }, "unknown type"},
      {"a handle with steps", [&](auto& p) { if (p[0] == dnn && p[kIsHandle] == std::byte{1}) put32(p, kCount, 1); },
       "handle with a descriptor's data"},
      {"an unknown step",
       [&](auto& p) { if (size_t at = find_set(p, kTInt64)) p[at + 8] = std::byte{9}; }, "unknown step"},
      {"an attribute of an unknown type", [&](auto& p) { if (size_t at = find_set(p, kTInt64)) put32(p, at + 13, 99); },
       "unknown type"},
      {"elements that do not match their count",
       [&](auto& p) { if (size_t at = find_set(p, kTInt64)) p[at + 17] = std::byte{7}; }, "do not match"},
      {"a descriptor that is not in the state",
       [&](auto& p) {
         if (size_t at = find_set(p, kTDescriptor); at && !once) {
           once = true;
           const uint64_t none = 0xdead;
           std::memcpy(p.data() + at + 29, &none, 8);
         }
       },
       "not in the state"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    once = false;  // the next case edits the first match again
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  });
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  const uint64_t x = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 1}), y = floats({0, 0, 0, 0, 0, 0});
  ASSERT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, pack({x, b, y})}), 0);
  EXPECT_EQ(read(y, 6), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// Y = conv(X, W): X 1x1x3x3, W 2x1x2x2, no padding, stride 1 (Y 1x2x2x2), through the heuristics'
// configuration, on the client's memory; alpha 2 scales the result.
TEST_F(CudnnTest, ConvolutionForwardRunsOnTheClientsMemory) {
  constexpr int32_t kConv = 1, kOpConvFwd = 10, kTConvMode = 7, kTFloat = 4;
  const uint64_t x = tensor(1, {1, 1, 3, 3}, false), w = tensor(2, {2, 1, 2, 2}, false), y = tensor(3, {1, 2, 2, 2}, false);
  const uint64_t conv = make(kConv);
  ASSERT_EQ(set<int32_t>(conv, 100, kTDataType, {0}), 0);   // COMP_TYPE float
  ASSERT_EQ(set<int32_t>(conv, 101, kTConvMode, {1}), 0);   // CROSS_CORRELATION
  ASSERT_EQ(set<int64_t>(conv, 106, kTInt64, {2}), 0);      // SPATIAL_DIMS
  ASSERT_EQ(set<int64_t>(conv, 102, kTInt64, {1, 1}), 0);   // DILATIONS
  ASSERT_EQ(set<int64_t>(conv, 103, kTInt64, {1, 1}), 0);   // FILTER_STRIDES
  ASSERT_EQ(set<int64_t>(conv, 104, kTInt64, {0, 0}), 0);   // POST_PADDINGS
  ASSERT_EQ(set<int64_t>(conv, 105, kTInt64, {0, 0}), 0);   // PRE_PADDINGS
  ASSERT_EQ(finalize(conv), 0);
  const uint64_t op = make(kOpConvFwd);
  ASSERT_EQ(set<uint64_t>(op, 704, kTDescriptor, {x}), 0);
  ASSERT_EQ(set<uint64_t>(op, 703, kTDescriptor, {w}), 0);
  ASSERT_EQ(set<uint64_t>(op, 705, kTDescriptor, {y}), 0);
  ASSERT_EQ(set<uint64_t>(op, 702, kTDescriptor, {conv}), 0);
  ASSERT_EQ(set<float>(op, 700, kTFloat, {2.0f}), 0);
  ASSERT_EQ(set<float>(op, 701, kTFloat, {0.0f}), 0);
  ASSERT_EQ(finalize(op), 0);
  graph = make(kOpGraph);
  ASSERT_EQ(set<uint64_t>(graph, kGraphOps, kTDescriptor, {op}), 0);
  ASSERT_EQ(set<uint64_t>(graph, kGraphHandle, kTHandle, {handle}), 0);
  ASSERT_EQ(finalize(graph), 0);
  const uint64_t heur = make(kEngineHeur);
  ASSERT_EQ(set<uint64_t>(heur, kHeurGraph, kTDescriptor, {graph}), 0);
  ASSERT_EQ(set<int32_t>(heur, kHeurMode, kTHeurMode, {0}), 0);
  ASSERT_EQ(finalize(heur), 0);
  int64_t n = 0;
  const uint64_t cfg = make(kEngineCfg);
  ASSERT_EQ(get(heur, kHeurResults, kTDescriptor, 1, &n, std::as_bytes(std::span(&cfg, 1))), 0);
  plan = make(kPlan);
  ASSERT_EQ(set<uint64_t>(plan, kPlanHandle, kTHandle, {handle}), 0);
  ASSERT_EQ(set<uint64_t>(plan, kPlanCfg, kTDescriptor, {cfg}), 0);
  ASSERT_EQ(finalize(plan), 0);
  const uint64_t dx = floats({1, 2, 3, 4, 5, 6, 7, 8, 9}), dw = floats({1, 0, 0, 1, 0, 1, -1, 0}),
                 dy = floats(std::vector<float>(8, 7));
  const uint64_t v = make(kVariantPack);
  ASSERT_EQ(set<int64_t>(v, kVpUids, kTInt64, {1, 2, 3}), 0);
  ASSERT_EQ(set<uint64_t>(v, kVpPointers, kTVoidPtr, {dx, dw, dy}), 0);
  ASSERT_EQ(finalize(v), 0);
  ASSERT_EQ(c.call<api::Call::cudnnBackendExecute>({handle, plan, v}), 0);
  // Filter 0: x[i][j] + x[i+1][j+1]; filter 1: x[i][j+1] - x[i+1][j]; doubled.
  EXPECT_EQ(read(dy, 8), (std::vector<float>{12, 16, 24, 28, -4, -4, -4, -4}));
}

// The legacy API: guest-made tensor descriptors, batch normalization (spatial) forward training
// and backward through the wire, computed by the executor's fake; then hostile arguments.
struct CudnnLegacyTest : CudnnTest {
  uint64_t tensor_nd(std::vector<int32_t> dims) {
    const uint64_t t = next++;
    EXPECT_EQ(c.call<api::Call::cudnnCreateTensorDescriptor>({t}), 0);
    std::vector<int32_t> strides(dims.size());
    int32_t s = 1;
    for (size_t i = dims.size(); i-- > 0;) strides[i] = s, s *= dims[i];
    std::vector<int32_t> tail = dims;
    tail.insert(tail.end(), strides.begin(), strides.end());
    api::cudnnSetTensorNdDescriptor_Args a{};
    a.tensorDesc = t, a.dataType = 0, a.nbDims = int32_t(dims.size());
    EXPECT_EQ(c.call<api::Call::cudnnSetTensorNdDescriptor>(a, nullptr, std::as_bytes(std::span(tail))), 0);
    return t;
  }
};

TEST_F(CudnnLegacyTest, BatchNormalizationRunsOnTheClientsMemory) {
  const uint64_t xd = tensor_nd({2, 2, 1, 2});  // N 2, C 2, 1x2: channel 0 {1,3,5,7}, channel 1 {2,2,4,4}
  // Read back: the dimensions and strides as set.
  api::cudnnGetTensorNdDescriptor_Args g{};
  g.tensorDesc = xd, g.nbDimsRequested = 4;
  api::cudnnGetTensorNdDescriptor_Reply gr{};
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::cudnnGetTensorNdDescriptor>(g, &gr, {}, &extra, 32), 0);
  int32_t nb = 0, dims[8] = {};
  std::memcpy(&nb, gr.nbDims, 4);
  ASSERT_EQ(extra.size(), 32u);
  std::memcpy(dims, extra.data(), 32);
  EXPECT_EQ(nb, 4);
  EXPECT_EQ(std::vector<int32_t>(dims, dims + 8), (std::vector<int32_t>{2, 2, 1, 2, 4, 2, 2, 1}));
  const uint64_t pd = next++;
  ASSERT_EQ(c.call<api::Call::cudnnCreateTensorDescriptor>({pd}), 0);
  ASSERT_EQ(c.call<api::Call::cudnnDeriveBNTensorDescriptor>({pd, xd, 1}), 0);  // SPATIAL
  const uint64_t x = floats({1, 3, 2, 2, 5, 7, 4, 4}), y = floats(std::vector<float>(8, 0)),
                 scale = floats({2, 1}), bias = floats({0, 10}), rmean = floats({0, 0}), rvar = floats({1, 1}),
                 smean = floats({0, 0}), sinv = floats({0, 0});
  api::cudnnBatchNormalizationForwardTraining_Args f{};
  const float one = 1, zero = 0;
  f.handle = handle, f.mode = 1;
  std::memcpy(f.alpha, &one, 4);
  std::memcpy(f.beta, &zero, 4);
  f.xDesc = xd, f.x = x, f.yDesc = xd, f.y = y, f.bnScaleBiasMeanVarDesc = pd, f.bnScale = scale, f.bnBias = bias;
  f.exponentialAverageFactor = 1.0, f.resultRunningMean = rmean, f.resultRunningVariance = rvar, f.epsilon = 0;
  f.resultSaveMean = smean, f.resultSaveInvVariance = sinv;
  ASSERT_EQ(c.call<api::Call::cudnnBatchNormalizationForwardTraining>(f), 0);
  // Channel 0: mean 4, variance 5 (biased; 20/3 unbiased); channel 1: mean 3, variance 1.
  const std::vector<float> out = read(y, 8);
  const float k = 2 / std::sqrt(5.0f);
  const std::vector<float> want = {-3 * k, -1 * k, 9, 9, 1 * k, 3 * k, 11, 11};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], want[i], 1e-5) << i;
  EXPECT_EQ(read(smean, 2), (std::vector<float>{4, 3}));
  EXPECT_NEAR(read(rvar, 2)[0], 20.0f / 3, 1e-5);
  EXPECT_NEAR(read(sinv, 2)[1], 1.0f, 1e-6);
  // Backward with dy = 1 everywhere: dbias = 4 per channel, dscale = 0, dx = 0.
  const uint64_t dy = floats(std::vector<float>(8, 1)), dx = floats(std::vector<float>(8, 5)),
                 dscale = floats({9, 9}), dbias = floats({9, 9});
  api::cudnnBatchNormalizationBackward_Args b{};
  b.handle = handle, b.mode = 1;
  for (auto* s : {b.alphaDataDiff, b.alphaParamDiff}) std::memcpy(s, &one, 4);
  for (auto* s : {b.betaDataDiff, b.betaParamDiff}) std::memcpy(s, &zero, 4);
  b.xDesc = xd, b.x = x, b.dyDesc = xd, b.dy = dy, b.dxDesc = xd, b.dx = dx, b.dBnScaleBiasDesc = pd;
  b.bnScale = scale, b.dBnScaleResult = dscale, b.dBnBiasResult = dbias, b.epsilon = 0, b.savedMean = smean;
  b.savedInvVariance = sinv;
  ASSERT_EQ(c.call<api::Call::cudnnBatchNormalizationBackward>(b), 0);
  EXPECT_EQ(read(dbias, 2), (std::vector<float>{4, 4}));
  for (float v : read(dx, 8)) EXPECT_NEAR(v, 0, 1e-6);
  ASSERT_EQ(c.call<api::Call::cudnnDestroyTensorDescriptor>({pd}), 0);
  ASSERT_EQ(c.call<api::Call::cudnnDestroyTensorDescriptor>({xd}), 0);
}

TEST_F(CudnnLegacyTest, HostileArguments) {
  const uint64_t xd = tensor_nd({1, 2, 2, 2});
  api::cudnnSetTensorNdDescriptor_Args a{};
  a.tensorDesc = xd, a.dataType = 0, a.nbDims = 4;
  const int32_t four[4] = {1, 1, 1, 1};
  EXPECT_LT(c.call<api::Call::cudnnSetTensorNdDescriptor>(a, nullptr, std::as_bytes(std::span(four))), 0);  // no strides
  a.nbDims = 9;
  const int32_t many[18] = {};
  EXPECT_LT(c.call<api::Call::cudnnSetTensorNdDescriptor>(a, nullptr, std::as_bytes(std::span(many))), 0);
  a.nbDims = -1;
  EXPECT_LT(c.call<api::Call::cudnnSetTensorNdDescriptor>(a, nullptr, {}), 0);
  // More elements asked back than cuDNN has dimensions; room short of what is asked.
  api::cudnnGetTensorNdDescriptor_Args g{};
  g.tensorDesc = xd, g.nbDimsRequested = 1000;
  api::cudnnGetTensorNdDescriptor_Reply gr{};
  EXPECT_LT(c.call<api::Call::cudnnGetTensorNdDescriptor>(g, &gr, {}, nullptr, 64), 0);
  g.nbDimsRequested = 4;
  EXPECT_LT(c.call<api::Call::cudnnGetTensorNdDescriptor>(g, &gr, {}, nullptr, 8), 0);
  // A backend descriptor or a handle where a tensor descriptor goes, and the other way round.
  const uint64_t backend = make(kTensor);
  EXPECT_EQ(c.call<api::Call::cudnnDeriveBNTensorDescriptor>({backend, xd, 1}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnDeriveBNTensorDescriptor>({xd, handle, 1}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnBackendDestroyDescriptor>({xd}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyActivationDescriptor>({xd}), api::kCudnnBadParam);
  EXPECT_LT(c.call<api::Call::cudnnCreateTensorDescriptor>({xd}), 0);  // not new
  // Memory that is not the client's.
  api::cudnnBatchNormalizationForwardInference_Args f{};
  f.handle = handle, f.mode = 1, f.xDesc = xd, f.x = 0xdead0000, f.yDesc = xd, f.y = 0xdead0000;
  EXPECT_EQ(c.call<api::Call::cudnnBatchNormalizationForwardInference>(f), api::kCudnnBadParam);
  // Memory of the client's that ends before the tensor does (8 floats described, 2 allocated).
  const uint64_t small = floats({1, 2}), big = floats(std::vector<float>(8, 1));
  f.x = small, f.y = big;
  EXPECT_EQ(c.call<api::Call::cudnnBatchNormalizationForwardInference>(f), api::kCudnnBadParam);
  f.x = big, f.y = small;
  EXPECT_EQ(c.call<api::Call::cudnnBatchNormalizationForwardInference>(f), api::kCudnnBadParam);
  // The stub keeps serving; destroyed twice: the second is refused.
  EXPECT_EQ(c.call<api::Call::cudnnDestroyTensorDescriptor>({xd}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyTensorDescriptor>({xd}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyTensorDescriptor>({0}), 0);  // NULL: nothing to do
}

// The legacy convolution path: filter and convolution descriptors, the algorithm search, the
// workspace size and a convolution forward (Y = 2 * conv(X, W), X 1x1x3x3, W 2x1x2x2), then
// backward data, filter and bias, computed by the executor's fake on the client's memory.
struct CudnnConvTest : CudnnLegacyTest {
  uint64_t xd = 0, wd = 0, cd = 0, yd = 0;
  uint64_t filter(int32_t k, int32_t ch, int32_t h, int32_t w) {
    const uint64_t f = next++;
    EXPECT_EQ(c.call<api::Call::cudnnCreateFilterDescriptor>({f}), 0);
    api::cudnnSetFilter4dDescriptor_Args a{};
    a.filterDesc = f, a.dataType = 0, a.format = 0, a.k = k, a.c = ch, a.h = h, a.w = w;
    EXPECT_EQ(c.call<api::Call::cudnnSetFilter4dDescriptor>(a), 0);
    return f;
  }
  uint64_t conv2d(int32_t pad, int32_t stride) {
    const uint64_t d = next++;
    EXPECT_EQ(c.call<api::Call::cudnnCreateConvolutionDescriptor>({d}), 0);
    api::cudnnSetConvolution2dDescriptor_Args a{};
    a.convDesc = d, a.pad_h = pad, a.pad_w = pad, a.u = stride, a.v = stride, a.dilation_h = 1, a.dilation_w = 1;
    a.mode = 1, a.computeType = 0;  // CROSS_CORRELATION, float
    EXPECT_EQ(c.call<api::Call::cudnnSetConvolution2dDescriptor>(a), 0);
    api::cudnnSetConvolutionMathType_Args m{};
    m.convDesc = d, m.mathType = 3;  // CUDNN_FMA_MATH
    EXPECT_EQ(c.call<api::Call::cudnnSetConvolutionMathType>(m), 0);
    return d;
  }
  static void scalars(uint8_t* alpha, float a, uint8_t* beta, float b) {
    std::memcpy(alpha, &a, 4);
    std::memcpy(beta, &b, 4);
  }
  void make_conv() {
    xd = tensor_nd({1, 1, 3, 3});
    wd = filter(2, 1, 2, 2);
    cd = conv2d(0, 1);
    yd = tensor_nd({1, 2, 2, 2});
  }
  int32_t forward(uint64_t x, uint64_t w, uint64_t y, int32_t algo = 0, uint64_t ws = 0, uint64_t ws_bytes = 0) {
    api::cudnnConvolutionForward_Args f{};
    f.handle = handle, f.xDesc = xd, f.x = x, f.wDesc = wd, f.w = w, f.convDesc = cd, f.algo = algo;
    f.workSpace = ws, f.workSpaceSizeInBytes = ws_bytes, f.yDesc = yd, f.y = y;
    scalars(f.alpha, 2, f.beta, 0);
    return c.call<api::Call::cudnnConvolutionForward>(f);
  }
};

TEST_F(CudnnConvTest, AConvolutionRunsForwardAndBackwardOnTheClientsMemory) {
  make_conv();
  // The output's shape, the descriptors read back.
  api::cudnnGetConvolution2dForwardOutputDim_Reply od{};
  ASSERT_EQ(c.call<api::Call::cudnnGetConvolution2dForwardOutputDim>({cd, xd, wd}, &od), 0);
  int32_t dims[4];
  std::memcpy(&dims[0], od.n, 4), std::memcpy(&dims[1], od.c, 4), std::memcpy(&dims[2], od.h, 4);
  std::memcpy(&dims[3], od.w, 4);
  EXPECT_EQ(std::vector<int32_t>(dims, dims + 4), (std::vector<int32_t>{1, 2, 2, 2}));
  api::cudnnGetConvolutionMathType_Reply mr{};
  ASSERT_EQ(c.call<api::Call::cudnnGetConvolutionMathType>({cd}, &mr), 0);
  EXPECT_EQ(mr.mathType[0], 3);
  // The algorithm search: up to CUDNN_DIM_MAX results come back, the count the library gave.
  api::cudnnGetConvolutionForwardAlgorithm_v7_Args q{};
  q.handle = handle, q.srcDesc = xd, q.filterDesc = wd, q.convDesc = cd, q.destDesc = yd, q.requestedAlgoCount = 8;
  api::cudnnGetConvolutionForwardAlgorithm_v7_Reply qr{};
  std::vector<std::byte> perf;
  ASSERT_EQ(c.call<api::Call::cudnnGetConvolutionForwardAlgorithm_v7>(q, &qr, {}, &perf, 8 * 48), 0);
  int32_t returned = 0, algo1 = -1;
  std::memcpy(&returned, qr.returnedAlgoCount, 4);
  ASSERT_EQ(returned, 2);
  ASSERT_GE(perf.size(), 2u * 48);
  std::memcpy(&algo1, perf.data() + 48, 4);
  EXPECT_EQ(algo1, 1);
  api::cudnnGetConvolutionForwardWorkspaceSize_Args wq{};
  wq.handle = handle, wq.xDesc = xd, wq.wDesc = wd, wq.convDesc = cd, wq.yDesc = yd, wq.algo = 1;
  api::cudnnGetConvolutionForwardWorkspaceSize_Reply wr{};
  ASSERT_EQ(c.call<api::Call::cudnnGetConvolutionForwardWorkspaceSize>(wq, &wr), 0);
  uint64_t ws_bytes = 0;
  std::memcpy(&ws_bytes, wr.sizeInBytes, 8);
  ASSERT_EQ(ws_bytes, 8u * 4);
  const uint64_t x = floats({1, 2, 3, 4, 5, 6, 7, 8, 9}), w = floats({1, 0, 0, 1, 0, 1, -1, 0}),
                 y = floats(std::vector<float>(8, 7)), ws = c.malloc(ws_bytes);
  // Filter 0: x[i][j] + x[i+1][j+1]; filter 1: x[i][j+1] - x[i+1][j]; doubled.
  const std::vector<float> want{12, 16, 24, 28, -4, -4, -4, -4};
  ASSERT_EQ(forward(x, w, y), 0);
  EXPECT_EQ(read(y, 8), want);
  EXPECT_EQ(forward(x, w, y, 1, ws, ws_bytes - 4), api::kCudnnBadParam);  // the workspace is short
  ASSERT_EQ(forward(x, w, floats(std::vector<float>(8, 0)), 1, ws, ws_bytes), 0);
  // Backward data: dx = conv^T(dy, W) with dy = 1: each x position gets the sum of the filter
  // taps that reached it. Backward filter: dw[k][r][s] = sum of x over the window's positions.
  const uint64_t dy = floats(std::vector<float>(8, 1)), dx = floats(std::vector<float>(9, 5)),
                 dw = floats(std::vector<float>(8, 5)), db = floats({5, 5});
  api::cudnnConvolutionBackwardData_Args bd{};
  bd.handle = handle, bd.wDesc = wd, bd.w = w, bd.dyDesc = yd, bd.dy = dy, bd.convDesc = cd, bd.dxDesc = xd, bd.dx = dx;
  scalars(bd.alpha, 1, bd.beta, 0);
  ASSERT_EQ(c.call<api::Call::cudnnConvolutionBackwardData>(bd), 0);
  EXPECT_EQ(read(dx, 9), (std::vector<float>{1, 2, 1, 0, 2, 2, -1, 0, 1}));
  api::cudnnConvolutionBackwardFilter_Args bf{};
  bf.handle = handle, bf.xDesc = xd, bf.x = x, bf.dyDesc = yd, bf.dy = dy, bf.convDesc = cd, bf.dwDesc = wd, bf.dw = dw;
  scalars(bf.alpha, 1, bf.beta, 0);
  ASSERT_EQ(c.call<api::Call::cudnnConvolutionBackwardFilter>(bf), 0);
  EXPECT_EQ(read(dw, 8), (std::vector<float>{12, 16, 24, 28, 12, 16, 24, 28}));
  const uint64_t bias_d = tensor_nd({1, 2, 1, 1});
  api::cudnnConvolutionBackwardBias_Args bb{};
  bb.handle = handle, bb.dyDesc = yd, bb.dy = y, bb.dbDesc = bias_d, bb.db = db;
  scalars(bb.alpha, 1, bb.beta, 1);
  ASSERT_EQ(c.call<api::Call::cudnnConvolutionBackwardBias>(bb), 0);
  EXPECT_EQ(read(db, 2), (std::vector<float>{5 + 80, 5 - 16}));
  // cudnnAddTensor: the bias broadcast over y.
  api::cudnnAddTensor_Args at{};
  at.handle = handle, at.aDesc = bias_d, at.A = floats({1, -1}), at.cDesc = yd, at.C = y;
  scalars(at.alpha, 1, at.beta, 1);
  ASSERT_EQ(c.call<api::Call::cudnnAddTensor>(at), 0);
  EXPECT_EQ(read(y, 8), (std::vector<float>{13, 17, 25, 29, -5, -5, -5, -5}));
}

// cudnnFind*Algorithm (without Ex) lets NVIDIA's library allocate its buffers and workspace
// outside the client's arena: the stub runs the Ex form on memory it takes from the arena (the
// workspace the hungriest algorithm asks: the fake's algorithm 1, one float per output) and frees
// it after the call.
TEST_F(CudnnConvTest, AlgorithmSearchesUseTheClientsArena) {
  make_conv();
  const uint64_t mine = c.malloc(64);  // the client's arena
  auto same_arena = [&](uint64_t p) { return p >= kArenaBase && (p - kArenaBase) / kArenaStride == (mine - kArenaBase) / kArenaStride; };
  const uint64_t before = tst::fake_allocated_bytes();
  auto search = [&]<api::Call C>(auto a) {
    a.handle = handle, a.convDesc = cd, a.requestedAlgoCount = 8;
    typename api::CallTraits<C>::Reply r{};
    std::vector<std::byte> perf;
    EXPECT_EQ(c.call<C>(a, &r, {}, &perf, 8 * 48), 0);
    int32_t returned = 0;
    std::memcpy(&returned, r.returnedAlgoCount, 4);
    EXPECT_EQ(returned, 2);
    const tst::FakeCudnnSearch got = tst::fake_cudnn_last_search();
    EXPECT_TRUE(same_arena(got.first_buffer)) << std::hex << got.first_buffer;
    EXPECT_TRUE(same_arena(got.workspace)) << std::hex << got.workspace;
    EXPECT_EQ(got.workspace_bytes, 2u * 2 * 2 * 4);
    EXPECT_EQ(tst::fake_allocated_bytes(), before);  // freed after the call
  };
  api::cudnnFindConvolutionForwardAlgorithm_Args f{};
  f.xDesc = xd, f.wDesc = wd, f.yDesc = yd;
  search.operator()<api::Call::cudnnFindConvolutionForwardAlgorithm>(f);
  api::cudnnFindConvolutionBackwardDataAlgorithm_Args d{};
  d.wDesc = wd, d.dyDesc = yd, d.dxDesc = xd;
  search.operator()<api::Call::cudnnFindConvolutionBackwardDataAlgorithm>(d);
  api::cudnnFindConvolutionBackwardFilterAlgorithm_Args w{};
  w.xDesc = xd, w.dyDesc = yd, w.dwDesc = wd;
  search.operator()<api::Call::cudnnFindConvolutionBackwardFilterAlgorithm>(w);
}

TEST_F(CudnnConvTest, HostileArguments) {
  make_conv();
  const uint64_t x = floats(std::vector<float>(9, 1)), y = floats(std::vector<float>(8, 0));
  // The filter's memory shorter than the filter (8 floats), a tensor where a filter goes.
  EXPECT_EQ(forward(x, floats({1, 2}), y), api::kCudnnBadParam);
  api::cudnnConvolutionForward_Args f{};
  f.handle = handle, f.xDesc = xd, f.x = x, f.wDesc = xd, f.w = x, f.convDesc = cd, f.yDesc = yd, f.y = y;
  EXPECT_EQ(c.call<api::Call::cudnnConvolutionForward>(f), api::kCudnnBadParam);
  f.wDesc = wd, f.convDesc = wd;  // a filter where the convolution goes
  EXPECT_EQ(c.call<api::Call::cudnnConvolutionForward>(f), api::kCudnnBadParam);
  // Arrays longer than CUDNN_DIM_MAX, or not as long as they say.
  api::cudnnSetConvolutionNdDescriptor_Args nd{};
  nd.convDesc = cd, nd.arrayLength = 9;
  const int32_t many[27] = {};
  EXPECT_LT(c.call<api::Call::cudnnSetConvolutionNdDescriptor>(nd, nullptr, std::as_bytes(std::span(many))), 0);
  nd.arrayLength = 2;
  EXPECT_LT(c.call<api::Call::cudnnSetConvolutionNdDescriptor>(nd, nullptr, std::as_bytes(std::span(many, 4))), 0);
  // More algorithm results asked for than cuDNN has, or room for fewer than asked.
  api::cudnnGetConvolutionForwardAlgorithm_v7_Args q{};
  q.handle = handle, q.srcDesc = xd, q.filterDesc = wd, q.convDesc = cd, q.destDesc = yd, q.requestedAlgoCount = 1000;
  api::cudnnGetConvolutionForwardAlgorithm_v7_Reply qr{};
  EXPECT_LT(c.call<api::Call::cudnnGetConvolutionForwardAlgorithm_v7>(q, &qr, {}, nullptr, 64 * 48), 0);
  q.requestedAlgoCount = 4;
  EXPECT_LT(c.call<api::Call::cudnnGetConvolutionForwardAlgorithm_v7>(q, &qr, {}, nullptr, 48), 0);
  // Dropout states that are not the client's memory.
  const uint64_t dd = next++;
  ASSERT_EQ(c.call<api::Call::cudnnCreateDropoutDescriptor>({dd}), 0);
  api::cudnnSetDropoutDescriptor_Args sd{};
  sd.dropoutDesc = dd, sd.handle = handle, sd.dropout = 0.5f, sd.states = 0xdead0000, sd.stateSizeInBytes = 256;
  EXPECT_EQ(c.call<api::Call::cudnnSetDropoutDescriptor>(sd), api::kCudnnBadParam);
  // The stub keeps serving.
  EXPECT_EQ(forward(x, floats(std::vector<float>(8, 1)), y), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyFilterDescriptor>({wd}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyFilterDescriptor>({wd}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyConvolutionDescriptor>({xd}), api::kCudnnBadParam);
}

// Every legacy descriptor kind is carried by a suspend (and a save): made again behind the same
// guest handle and set again with the calls' recorded arguments; a tensor derived from another
// that is gone since comes back as it was derived; a dropout descriptor comes back restored from
// its states (the client's memory), so its generator goes on where it stood.
struct CudnnLegacySuspendTest : CudnnConvTest {
  uint64_t pd = 0, ad = 0, dd = 0, states = 0;
  void make_all() {
    make_conv();
    const uint64_t from = tensor_nd({2, 3, 1, 1});
    pd = next++;
    ASSERT_EQ(c.call<api::Call::cudnnCreateTensorDescriptor>({pd}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnDeriveBNTensorDescriptor>({pd, from, 1}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnDestroyTensorDescriptor>({from}), 0);
    api::cudnnSetConvolutionGroupCount_Args g{};
    g.convDesc = cd, g.groupCount = 1;
    ASSERT_EQ(c.call<api::Call::cudnnSetConvolutionGroupCount>(g), 0);
    ad = next++;
    ASSERT_EQ(c.call<api::Call::cudnnCreatePoolingDescriptor>({ad}), 0);
    api::cudnnSetPooling2dDescriptor_Args pa{};
    pa.poolingDesc = ad, pa.mode = 0, pa.windowHeight = 2, pa.windowWidth = 2, pa.verticalStride = 1;
    pa.horizontalStride = 1;
    ASSERT_EQ(c.call<api::Call::cudnnSetPooling2dDescriptor>(pa), 0);
    pa.windowWidth = 3;  // set again: the last setting counts
    ASSERT_EQ(c.call<api::Call::cudnnSetPooling2dDescriptor>(pa), 0);
    dd = next++;
    ASSERT_EQ(c.call<api::Call::cudnnCreateDropoutDescriptor>({dd}), 0);
    api::cudnnDropoutGetStatesSize_Reply sz{};
    ASSERT_EQ(c.call<api::Call::cudnnDropoutGetStatesSize>({handle}, &sz), 0);
    uint64_t bytes = 0;
    std::memcpy(&bytes, sz.sizeInBytes, 8);
    states = c.malloc(bytes);
    api::cudnnSetDropoutDescriptor_Args sd{};
    sd.dropoutDesc = dd, sd.handle = handle, sd.dropout = 0.5f, sd.states = states, sd.stateSizeInBytes = bytes;
    sd.seed = 1234;
    ASSERT_EQ(c.call<api::Call::cudnnSetDropoutDescriptor>(sd), 0);
  }
  std::vector<float> drop(uint64_t x, uint64_t y, uint64_t reserve) {
    api::cudnnDropoutForward_Args f{};
    f.handle = handle, f.dropoutDesc = dd, f.xdesc = yd, f.x = x, f.ydesc = yd, f.y = y, f.reserveSpace = reserve;
    f.reserveSpaceSizeInBytes = 8;
    EXPECT_EQ(c.call<api::Call::cudnnDropoutForward>(f), 0);
    return read(y, 8);
  }
};

TEST_F(CudnnLegacySuspendTest, EveryLegacyDescriptorIsCarried) {
  make_all();
  const uint64_t x = floats({1, 2, 3, 4, 5, 6, 7, 8, 9}), w = floats({1, 0, 0, 1, 0, 1, -1, 0}),
                 y = floats(std::vector<float>(8, 0)), ones = floats(std::vector<float>(8, 1)),
                 dropped = floats(std::vector<float>(8, 0)), reserve = c.malloc(8);
  const std::vector<float> first = drop(ones, dropped, reserve);
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-legacy." + std::to_string(::getpid()) + ".state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    const uint64_t live = tst::fake_live_cudnn_objects();
    state::remove_state_file(path);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_LT(tst::fake_live_cudnn_objects(), live);
    r = slot_control::control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    EXPECT_EQ(tst::fake_live_cudnn_objects(), live);
    // The convolution computes as before.
    ASSERT_EQ(forward(x, w, y), 0);
    EXPECT_EQ(read(y, 8), (std::vector<float>{12, 16, 24, 28, -4, -4, -4, -4}));
    // Each descriptor reads as it was set.
    api::cudnnGetConvolutionMathType_Reply mr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetConvolutionMathType>({cd}, &mr), 0);
    EXPECT_EQ(mr.mathType[0], 3);
    api::cudnnGetFilter4dDescriptor_Reply fr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetFilter4dDescriptor>({wd}, &fr), 0);
    EXPECT_EQ(fr.k[0], 2);
    EXPECT_EQ(fr.h[0], 2);
    api::cudnnGetTensorNdDescriptor_Args g{};
    g.tensorDesc = pd, g.nbDimsRequested = 4;
    api::cudnnGetTensorNdDescriptor_Reply gr{};
    std::vector<std::byte> extra;
    ASSERT_EQ(c.call<api::Call::cudnnGetTensorNdDescriptor>(g, &gr, {}, &extra, 32), 0);
    int32_t dims[4];
    std::memcpy(dims, extra.data(), 16);
    EXPECT_EQ(std::vector<int32_t>(dims, dims + 4), (std::vector<int32_t>{1, 3, 1, 1}));  // derived, spatial
    api::cudnnGetPooling2dDescriptor_Reply pr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetPooling2dDescriptor>({ad}, &pr), 0);
    EXPECT_EQ(pr.windowWidth[0], 3);
    // The dropout generator went on: not the first pass's mask again (a new setting would
    // have started it over).
    EXPECT_NE(drop(ones, dropped, reserve), first);
  }
  state::remove_state_file(path);
}

// The tensor operations' descriptors (LRN, op-tensor, reduce-tensor: legacy kinds 6-8) are carried
// as the others: read back as set after a suspend and a save; the operations then run on the
// client's memory (a reduction with its indices and workspace); a workspace or an output that is
// not the client's memory is refused, and cudnnGetDropoutDescriptor answers the states' pointer.
TEST_F(CudnnLegacySuspendTest, TensorOperationDescriptorsAreCarried) {
  make_all();
  const uint64_t lrn = next++, op = next++, red = next++;
  ASSERT_EQ(c.call<api::Call::cudnnCreateLRNDescriptor>({lrn}), 0);
  api::cudnnSetLRNDescriptor_Args ls{};
  ls.normDesc = lrn, ls.lrnN = 3, ls.lrnAlpha = 0.5, ls.lrnBeta = 0.75, ls.lrnK = 1.5;
  ASSERT_EQ(c.call<api::Call::cudnnSetLRNDescriptor>(ls), 0);
  ASSERT_EQ(c.call<api::Call::cudnnCreateOpTensorDescriptor>({op}), 0);
  ASSERT_EQ(c.call<api::Call::cudnnSetOpTensorDescriptor>({op, 1, 0, 0}), 0);  // MUL, float
  ASSERT_EQ(c.call<api::Call::cudnnCreateReduceTensorDescriptor>({red}), 0);
  ASSERT_EQ(c.call<api::Call::cudnnSetReduceTensorDescriptor>({red, 3, 0, 0, 1, 0}), 0);  // MAX, flattened indices
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-ops." + std::to_string(::getpid()) + ".state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    state::remove_state_file(path);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    r = slot_control::control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    api::cudnnGetLRNDescriptor_Reply lr{};
    api::cudnnGetLRNDescriptor_Args lq{};
    lq.normDesc = lrn, lq.lrnN_wanted = 1, lq.lrnAlpha_wanted = 1, lq.lrnBeta_wanted = 1, lq.lrnK_wanted = 1;
    ASSERT_EQ(c.call<api::Call::cudnnGetLRNDescriptor>(lq, &lr), 0);
    uint32_t n = 0;
    double alpha = 0, k = 0;
    std::memcpy(&n, lr.lrnN, 4), std::memcpy(&alpha, lr.lrnAlpha, 8), std::memcpy(&k, lr.lrnK, 8);
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(alpha, 0.5);
    EXPECT_EQ(k, 1.5);
    api::cudnnGetOpTensorDescriptor_Reply opr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetOpTensorDescriptor>({op}, &opr), 0);
    EXPECT_EQ(opr.opTensorOp[0], 1);
    api::cudnnGetReduceTensorDescriptor_Reply rr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetReduceTensorDescriptor>({red}, &rr), 0);
    EXPECT_EQ(rr.reduceTensorOp[0], 3);
    EXPECT_EQ(rr.reduceTensorIndices[0], 1);
  }
  state::remove_state_file(path);
  // C = (2 * A) * (1 * B), B per channel.
  const uint64_t ad4 = tensor_nd({1, 2, 1, 2}), bd4 = tensor_nd({1, 2, 1, 1});
  const uint64_t A = floats({1, 2, 3, 4}), B = floats({10, -1}), C = floats({0, 0, 0, 0});
  api::cudnnOpTensor_Args ot{};
  ot.handle = handle, ot.opTensorDesc = op, ot.aDesc = ad4, ot.A = A, ot.bDesc = bd4, ot.B = B, ot.cDesc = ad4, ot.C = C;
  scalars(ot.alpha1, 2, ot.beta, 0);
  scalars(ot.alpha2, 1, ot.beta, 0);
  ASSERT_EQ(c.call<api::Call::cudnnOpTensor>(ot), 0);
  EXPECT_EQ(read(C, 4), (std::vector<float>{20, 40, -6, -8}));
  ot.C = 0xdead0000;  // not the client's memory
  EXPECT_EQ(c.call<api::Call::cudnnOpTensor>(ot), api::kCudnnBadParam);
  // The maximum over W of a 1x1x2x3 tensor, with each maximum's position.
  const uint64_t in = tensor_nd({1, 1, 2, 3}), out = tensor_nd({1, 1, 2, 1});
  api::cudnnGetReductionWorkspaceSize_Reply wr{};
  ASSERT_EQ(c.call<api::Call::cudnnGetReductionWorkspaceSize>({handle, red, in, out}, &wr), 0);
  api::cudnnGetReductionIndicesSize_Reply ir{};
  ASSERT_EQ(c.call<api::Call::cudnnGetReductionIndicesSize>({handle, red, in, out}, &ir), 0);
  uint64_t ws_bytes = 0, idx_bytes = 0;
  std::memcpy(&ws_bytes, wr.sizeInBytes, 8), std::memcpy(&idx_bytes, ir.sizeInBytes, 8);
  ASSERT_EQ(idx_bytes, 8u);  // two 32-bit indices
  ASSERT_GT(ws_bytes, 0u);
  const uint64_t data = floats({1, 7, 3, 9, -2, 4}), maxima = floats({0, 0}), idx = c.malloc(idx_bytes),
                 ws = c.malloc(ws_bytes);
  api::cudnnReduceTensor_Args rt{};
  rt.handle = handle, rt.reduceTensorDesc = red, rt.indices = idx, rt.indicesSizeInBytes = idx_bytes;
  rt.workspace = ws, rt.workspaceSizeInBytes = ws_bytes, rt.aDesc = in, rt.A = data, rt.cDesc = out, rt.C = maxima;
  scalars(rt.alpha, 1, rt.beta, 0);
  ASSERT_EQ(c.call<api::Call::cudnnReduceTensor>(rt), 0);
  EXPECT_EQ(read(maxima, 2), (std::vector<float>{7, 9}));
  const std::vector<float> got_idx = read(idx, 2);
  uint32_t where[2];
  std::memcpy(where, got_idx.data(), 8);
  EXPECT_EQ(where[0], 1u);
  EXPECT_EQ(where[1], 0u);
  rt.workspace = 0xdead0000;
  EXPECT_EQ(c.call<api::Call::cudnnReduceTensor>(rt), api::kCudnnBadParam);
  rt.workspace = ws, rt.workspaceSizeInBytes = ws_bytes + (1u << 20);  // beyond the allocation
  EXPECT_EQ(c.call<api::Call::cudnnReduceTensor>(rt), api::kCudnnBadParam);
  // The dropout descriptor's settings read back: its states are the client's pointer.
  api::cudnnGetDropoutDescriptor_Reply dr{};
  ASSERT_EQ(c.call<api::Call::cudnnGetDropoutDescriptor>({dd, handle}, &dr), 0);
  uint64_t got_states = 0, seed = 0;
  std::memcpy(&got_states, dr.states, 8), std::memcpy(&seed, dr.seed, 8);
  EXPECT_EQ(got_states, states);
  EXPECT_EQ(seed, 1234u);
  // Destroyed, each kind is refused as another's and then gone.
  EXPECT_EQ(c.call<api::Call::cudnnDestroyOpTensorDescriptor>({lrn}), api::kCudnnBadParam);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyLRNDescriptor>({lrn}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyOpTensorDescriptor>({op}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyReduceTensorDescriptor>({red}), 0);
  EXPECT_EQ(c.call<api::Call::cudnnDestroyReduceTensorDescriptor>({red}), api::kCudnnBadParam);
}

// A dropout descriptor set with a handle the program destroyed since is restored with another
// of the client's handles at the resume, or, when it has none left, with a temporary one made
// for it (and destroyed after); its generator goes on where it stood either way.
TEST_F(CudnnLegacySuspendTest, ADropoutDescriptorWhoseHandleIsGoneIsRestoredWithAnother) {
  make_all();
  const uint64_t x = floats(std::vector<float>(8, 1)), y = floats(std::vector<float>(8, 0)), reserve = c.malloc(8);
  const std::vector<float> first = drop(x, y, reserve);
  const uint64_t other = 0x9f00;
  ASSERT_EQ(c.call<api::Call::cudnnCreate>({other}), 0);
  api::cudnnRestoreDropoutDescriptor_Args rd{};
  rd.dropoutDesc = dd, rd.handle = other, rd.dropout = 0.5f, rd.states = states, rd.stateSizeInBytes = 256;
  ASSERT_EQ(c.call<api::Call::cudnnRestoreDropoutDescriptor>(rd), 0);
  ASSERT_EQ(c.call<api::Call::cudnnDestroy>({other}), 0);
  const uint64_t live = tst::fake_live_cudnn_objects();
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(tst::fake_live_cudnn_objects(), live);
  const std::vector<float> second = drop(x, y, reserve);
  EXPECT_NE(second, first) << "the generator started over";
  // No handle left at all: a temporary one restores it, and goes.
  ASSERT_EQ(c.call<api::Call::cudnnDestroy>({handle}), 0);
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-dropout." + std::to_string(::getpid()) + ".state";
  state::remove_state_file(path);
  const uint64_t without = tst::fake_live_cudnn_objects();
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ(tst::fake_live_cudnn_objects(), without) << "the temporary handle stayed";
  handle = 0x9f10;
  ASSERT_EQ(c.call<api::Call::cudnnCreate>({handle}), 0);
  const std::vector<float> third = drop(x, y, reserve);
  EXPECT_NE(third, first);
  EXPECT_NE(third, second);
  state::remove_state_file(path);
}

// Legacy records in a state file are the guest's to forge: an unknown kind, a backend step, a
// setting of another kind's call, of the wrong size, or naming another descriptor are refused;
// the client stays suspended and the good file restores.
TEST_F(CudnnLegacySuspendTest, HostileLegacyRecordsInAStateFileAreRefused) {
  make_all();
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-lgood." + std::to_string(::getpid()) + ".state";
  const std::string bad = path + ".bad";
  state::remove_state_file(path);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // The object record (HostileCudnnRecordsInAStateFileAreRefused): its legacy kind at 34, the
  // step count at 46, the first step at 50 (op at +8, name at +13... see there).
  constexpr size_t kIsHandle = 29, kLegacy = 34, kCount = 46, kStep = 50;
  const auto dnn = static_cast<std::byte>(ObjectKind::Cudnn);
  auto i32_at = [](const std::vector<std::byte>& p, size_t at) {
    int32_t v;
    std::memcpy(&v, p.data() + at, 4);
    return v;
  };
  auto put32 = [](std::vector<std::byte>& p, size_t at, int32_t v) { std::memcpy(p.data() + at, &v, 4); };
  // A legacy descriptor of kind `kind` with a step.
  auto legacy = [&](const std::vector<std::byte>& p, int32_t kind) {
    return p[0] == dnn && p[kIsHandle] == std::byte{0} && p.size() > kStep + 29 && i32_at(p, kLegacy) == kind &&
           i32_at(p, kCount) > 0;
  };
  const int32_t conv2d = static_cast<int32_t>(api::Call::cudnnSetConvolution2dDescriptor);
  const slot_control::Forgery cases[] = {
      {"an unknown kind", [&](auto& p) { if (legacy(p, 2)) put32(p, kLegacy, 99); }, "unknown kind"},
      {"a backend step", [&](auto& p) { if (legacy(p, 2)) p[kStep + 8] = std::byte{1}; }, "backend step"},
      {"another kind's setting", [&](auto& p) { if (legacy(p, 0)) put32(p, kStep + 9, conv2d); }, "another kind"},
      {"a setting of the wrong size",
       [&](auto& p) { if (legacy(p, 3)) put32(p, kStep + 17, 12); }, "do not match its call"},
      {"a setting naming another descriptor",
       [&](auto& p) { if (legacy(p, 4)) p[kStep + 29] = std::byte{0x55}; }, "another descriptor"},
      {"a backend descriptor with a legacy setting",
       [&](auto& p) { if (legacy(p, 5)) put32(p, kLegacy, -1); }, "legacy descriptor's setting"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  });
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  const uint64_t x = floats({1, 2, 3, 4, 5, 6, 7, 8, 9}), w = floats({1, 0, 0, 1, 0, 1, -1, 0}),
                 y = floats(std::vector<float>(8, 0));
  ASSERT_EQ(forward(x, w, y), 0);
  EXPECT_EQ(read(y, 8), (std::vector<float>{12, 16, 24, 28, -4, -4, -4, -4}));
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// The spatial transformer and CTC loss (legacy kinds 9 and 10): a transformer's theta and grid
// are checked against its dimensions (N 2x3 matrices, an N x H x W grid of pairs), CTC loss's
// host arrays against the probabilities' shape (lengths within cuDNN's limits, labels within the
// alphabet, the bytes matching the lengths); both descriptors are carried across a suspend and a
// save, and forged settings of them in a state file are refused.
TEST_F(CudnnLegacySuspendTest, SpatialTransformerAndCtcLossDescriptors) {
  make_all();
  const uint64_t st = next++, ctc = next++;
  ASSERT_EQ(c.call<api::Call::cudnnCreateSpatialTransformerDescriptor>({st}), 0);
  const int32_t dims[4] = {1, 1, 2, 3};
  api::cudnnSetSpatialTransformerNdDescriptor_Args ss{};
  ss.stDesc = st, ss.samplerType = 0, ss.dataType = 0, ss.nbDims = 4;
  ASSERT_EQ(c.call<api::Call::cudnnSetSpatialTransformerNdDescriptor>(ss, nullptr, std::as_bytes(std::span(dims))), 0);
  ASSERT_EQ(c.call<api::Call::cudnnCreateCTCLossDescriptor>({ctc}), 0);
  api::cudnnSetCTCLossDescriptor_v9_Args cs{};
  cs.ctcLossDesc = ctc, cs.compType = 0, cs.normMode = 1, cs.ctcGradMode = 1, cs.maxLabelLength = 7;
  ASSERT_EQ(c.call<api::Call::cudnnSetCTCLossDescriptor_v9>(cs), 0);
  const uint64_t theta = floats({1, 0, 0, 0, 1, 0}), grid = floats(std::vector<float>(12, 0));
  auto generate = [&](uint64_t t, uint64_t g) {
    api::cudnnSpatialTfGridGeneratorForward_Args a{};
    a.handle = handle, a.stDesc = st, a.theta = t, a.grid = g;
    return c.call<api::Call::cudnnSpatialTfGridGeneratorForward>(a);
  };
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-stctc." + std::to_string(::getpid()) + ".state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    state::remove_state_file(path);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    r = slot_control::control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    // The identity's grid over 2 x 3 points: x in {-1, 0, 1}, y in {-1, 1}.
    ASSERT_EQ(generate(theta, grid), 0);
    EXPECT_EQ(read(grid, 12), (std::vector<float>{-1, -1, 0, -1, 1, -1, -1, 1, 0, 1, 1, 1}));
    api::cudnnGetCTCLossDescriptor_v9_Reply cr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetCTCLossDescriptor_v9>({ctc}, &cr), 0);
    EXPECT_EQ(cr.normMode[0], 1);
    EXPECT_EQ(cr.ctcGradMode[0], 1);
    EXPECT_EQ(cr.maxLabelLength[0], 7);
  }
  // theta and the grid reach as far as the transformer's dimensions say.
  EXPECT_EQ(generate(floats({1, 0, 0, 0}), grid), api::kCudnnBadParam);
  EXPECT_EQ(generate(theta, floats(std::vector<float>(11, 0))), api::kCudnnBadParam);
  EXPECT_EQ(generate(0xdead0000, grid), api::kCudnnBadParam);

  // CTC loss over T 1, N 1, A 2 with inputs (0, 0) and label 1: p = 1/2, cost log 2, gradient
  // softmax - posterior = (1/2, -1/2).
  api::cudnnSetCTCLossDescriptorEx_Args ce{};
  ce.ctcLossDesc = ctc, ce.compType = 0, ce.normMode = 1, ce.gradMode = 0;
  ASSERT_EQ(c.call<api::Call::cudnnSetCTCLossDescriptorEx>(ce), 0);
  const uint64_t pd = tensor_nd({1, 1, 2});
  const uint64_t probs = floats({0, 0}), costs = floats({0}), grads = floats({9, 9});
  auto tail = [](std::vector<int32_t> v) { return v; };
  api::cudnnGetCTCLossWorkspaceSize_Args wa{};
  wa.handle = handle, wa.probsDesc = pd, wa.gradientsDesc = pd, wa.ctcLossDesc = ctc, wa.algo = 0;
  api::cudnnGetCTCLossWorkspaceSize_Reply wr{};
  const std::vector<int32_t> good = tail({1, 1, 1});  // label length, input length, label
  ASSERT_EQ(c.call<api::Call::cudnnGetCTCLossWorkspaceSize>(wa, &wr, std::as_bytes(std::span(good))), 0);
  uint64_t ws_bytes = 0;
  std::memcpy(&ws_bytes, wr.sizeInBytes, 8);
  const uint64_t ws = c.malloc(std::max<uint64_t>(ws_bytes, 1));
  api::cudnnCTCLoss_Args la{};
  la.handle = handle, la.probsDesc = pd, la.probs = probs, la.costs = costs, la.gradientsDesc = pd, la.gradients = grads;
  la.algo = 0, la.ctcLossDesc = ctc, la.workspace = ws, la.workSpaceSizeInBytes = ws_bytes;
  auto loss = [&](const std::vector<int32_t>& t) {
    return c.call<api::Call::cudnnCTCLoss>(la, nullptr, std::as_bytes(std::span(t)));
  };
  ASSERT_EQ(loss(good), 0);
  EXPECT_NEAR(read(costs, 1)[0], std::log(2.0f), 1e-6);
  const std::vector<float> g = read(grads, 2);
  EXPECT_NEAR(g[0], 0.5f, 1e-6);
  EXPECT_NEAR(g[1], -0.5f, 1e-6);
  // Labels 1 1 need three time steps (a blank between): no alignment in one. Its cost is
  // infinite, its gradient zero, or (CUDNN_CTC_SKIP_OOB_GRADIENTS) left as it was.
  ASSERT_EQ(loss({2, 1, 1, 1}), 0);
  EXPECT_TRUE(std::isinf(read(costs, 1)[0]));
  EXPECT_EQ(read(grads, 2), (std::vector<float>{0, 0}));
  cs.ctcGradMode = 1;
  ASSERT_EQ(c.call<api::Call::cudnnSetCTCLossDescriptor_v9>(cs), 0);
  const uint64_t kept = floats({7, 8});
  la.gradients = kept;
  ASSERT_EQ(loss({2, 1, 1, 1}), 0);
  EXPECT_EQ(read(kept, 2), (std::vector<float>{7, 8}));
  la.gradients = grads;
  EXPECT_EQ(loss({300, 1, 1}), api::kCudnnBadParam);  // longer than cuDNN's longest label
  EXPECT_EQ(loss({1, 2, 1}), api::kCudnnBadParam);    // more time steps than the probabilities have
  EXPECT_EQ(loss({1, 1, 2}), api::kCudnnBadParam);    // a label outside the alphabet
  EXPECT_LT(loss({1, 1}), 0);                         // fewer labels than the lengths say
  EXPECT_LT(loss({1, 1, 1, 1}), 0);                   // more
  EXPECT_LT(loss({1}), 0);                            // not even the lengths
  la.costs = 0xdead0000;
  EXPECT_EQ(loss(good), api::kCudnnBadParam);
  la.costs = costs, la.workSpaceSizeInBytes = ws_bytes + (1u << 20);  // beyond the workspace
  EXPECT_EQ(loss(good), api::kCudnnBadParam);
  // cudnnCTCLoss_v8's per-sequence arrays reach one int per sequence.
  api::cudnnCTCLoss_v8_Args v8{};
  v8.handle = handle, v8.algo = 0, v8.ctcLossDesc = ctc, v8.probsDesc = pd, v8.probs = probs, v8.labels = 0xdead0000;
  v8.labelLengths = c.malloc(4), v8.inputLengths = c.malloc(4), v8.costs = costs, v8.gradientsDesc = pd;
  v8.gradients = grads, v8.workSpaceSizeInBytes = ws_bytes, v8.workspace = ws;
  EXPECT_EQ(c.call<api::Call::cudnnCTCLoss_v8>(v8), api::kCudnnBadParam);  // labels not the client's

  // Forged settings of both kinds in a state file.
  state::remove_state_file(path);
  const std::string bad = path + ".bad";
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  constexpr size_t kIsHandle = 29, kLegacy = 34, kCount = 46, kStep = 50;  // as HostileLegacyRecords...
  const auto dnn = static_cast<std::byte>(ObjectKind::Cudnn);
  auto i32_at = [](const std::vector<std::byte>& p, size_t at) {
    int32_t v;
    std::memcpy(&v, p.data() + at, 4);
    return v;
  };
  auto put32 = [](std::vector<std::byte>& p, size_t at, int32_t v) { std::memcpy(p.data() + at, &v, 4); };
  auto legacy = [&](const std::vector<std::byte>& p, int32_t kind) {
    return p[0] == dnn && p[kIsHandle] == std::byte{0} && p.size() > kStep + 29 && i32_at(p, kLegacy) == kind &&
           i32_at(p, kCount) > 0;
  };
  const int32_t lrn = static_cast<int32_t>(api::Call::cudnnSetLRNDescriptor);
  const slot_control::Forgery cases[] = {
      {"a transformer set by another kind's call", [&](auto& p) { if (legacy(p, 9)) put32(p, kStep + 9, lrn); },
       "another kind"},
      {"a transformer's setting of the wrong size", [&](auto& p) { if (legacy(p, 9)) put32(p, kStep + 17, 8); },
       "do not match its call"},
      {"a CTC loss setting naming another descriptor",
       [&](auto& p) { if (legacy(p, 10)) p[kStep + 29] = std::byte{0x55}; }, "another descriptor"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {});
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  ASSERT_EQ(generate(theta, grid), 0);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// Recurrent networks (the v8 RNN API, calls 0x2690-): a one-layer LSTM's descriptors (RNN, RNN
// data with their sequence lengths and padding symbol, the dropout descriptor it names, set again
// after it, the matrix shape cudnnGetRNNWeightParams set, clipping) carried across a suspend and
// a save: the network computes the same after; hostile arguments; an RNN descriptor whose
// dropout descriptor the program destroyed refuses the suspend.
struct CudnnRnnTest : CudnnLegacySuspendTest {
  static constexpr int32_t T = 3, B = 2, I = 3, H = 2;
  uint64_t rnn = 0, xdd = 0, ydd = 0, hd = 0, md = 0, bd = 0, w = 0, wbytes = 0;
  uint64_t data(int32_t vec) {
    const uint64_t d = next++;
    EXPECT_EQ(c.call<api::Call::cudnnCreateRNNDataDescriptor>({d}), 0);
    api::cudnnSetRNNDataDescriptor_Args a{};
    a.rnnDataDesc = d, a.dataType = 0, a.layout = 0, a.maxSeqLength = T, a.batchSize = B, a.vectorSize = vec;
    const float fill = -1;
    std::memcpy(a.paddingFill, &fill, 4);
    a.paddingFill_given = 1;
    const int32_t lengths[B] = {3, 2};
    EXPECT_EQ(c.call<api::Call::cudnnSetRNNDataDescriptor>(a, nullptr, std::as_bytes(std::span(lengths))), 0);
    return d;
  }
  void make_rnn() {
    make_all();  // dd: a dropout descriptor (not applied to one layer)
    rnn = next++;
    ASSERT_EQ(c.call<api::Call::cudnnCreateRNNDescriptor>({rnn}), 0);
    api::cudnnSetRNNDescriptor_v8_Args s{};
    s.rnnDesc = rnn, s.algo = 0, s.cellMode = 2, s.biasMode = 2, s.dirMode = 0, s.inputMode = 0, s.dataType = 0;
    s.mathPrec = 0, s.mathType = 0, s.inputSize = I, s.hiddenSize = H, s.projSize = H, s.numLayers = 1;
    s.dropoutDesc = dd, s.auxFlags = 1;
    ASSERT_EQ(c.call<api::Call::cudnnSetRNNDescriptor_v8>(s), 0);
    xdd = data(I);
    ydd = data(H);
    hd = tensor_nd({1, B, H});
    api::cudnnGetRNNWeightSpaceSize_Reply wr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetRNNWeightSpaceSize>({handle, rnn}, &wr), 0);
    std::memcpy(&wbytes, wr.weightSpaceSize, 8);
    ASSERT_EQ(wbytes, uint64_t(4 * (4 * (H * I + H * H) + 8 * H)));  // every matrix and bias, fp32
    std::vector<float> v(wbytes / 4);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 7) - 3) * 0.1f;
    w = floats(v);
    md = next++;
    bd = next++;
    ASSERT_EQ(c.call<api::Call::cudnnCreateTensorDescriptor>({md}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateTensorDescriptor>({bd}), 0);
  }
  std::vector<float> rnn_forward(uint64_t x, uint64_t y) {
    api::cudnnRNNForward_Args f{};
    f.handle = handle, f.rnnDesc = rnn, f.fwdMode = 0, f.xDesc = xdd, f.x = x, f.yDesc = ydd, f.y = y, f.hDesc = hd;
    f.cDesc = hd, f.weightSpaceSize = wbytes, f.weightSpace = w;
    EXPECT_EQ(c.call<api::Call::cudnnRNNForward>(f), 0);
    return read(y, size_t(T) * B * H);
  }
  std::vector<int32_t> shape(uint64_t t) {
    api::cudnnGetTensorNdDescriptor_Args g{};
    g.tensorDesc = t, g.nbDimsRequested = 3;
    api::cudnnGetTensorNdDescriptor_Reply gr{};
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<api::Call::cudnnGetTensorNdDescriptor>(g, &gr, {}, &extra, 24), 0);
    std::vector<int32_t> dims(3);
    std::memcpy(dims.data(), extra.data(), std::min<size_t>(extra.size(), 12));
    return dims;
  }
};

TEST_F(CudnnRnnTest, RnnDescriptorsAreCarried) {
  make_rnn();
  api::cudnnGetRNNWeightParams_Args p{};
  p.handle = handle, p.rnnDesc = rnn, p.pseudoLayer = 0, p.weightSpaceSize = wbytes, p.weightSpace = w;
  p.linLayerID = 5, p.mDesc = md, p.bDesc = bd;  // the forget gate's recurrent matrix: H x H
  p.mAddr_wanted = 1, p.bAddr_wanted = 1;
  api::cudnnGetRNNWeightParams_Reply pr{};
  ASSERT_EQ(c.call<api::Call::cudnnGetRNNWeightParams>(p, &pr), 0);
  uint64_t m = 0, b = 0;
  std::memcpy(&m, pr.mAddr, 8);
  std::memcpy(&b, pr.bAddr, 8);
  EXPECT_TRUE(m > w && m < w + wbytes && b > m && b < w + wbytes);
  EXPECT_EQ(shape(md), (std::vector<int32_t>{1, H, H}));
  // The bias alone, as PyTorch asks (matrix descriptor and address NULL): the library gets NULL
  // for the matrix's address too, and answers the same bias.
  api::cudnnGetRNNWeightParams_Args bias_only = p;
  bias_only.mDesc = 0, bias_only.mAddr_wanted = 0;
  api::cudnnGetRNNWeightParams_Reply br{};
  ASSERT_EQ(c.call<api::Call::cudnnGetRNNWeightParams>(bias_only, &br), 0);
  uint64_t m2 = 0, b2 = 0;
  std::memcpy(&m2, br.mAddr, 8);
  std::memcpy(&b2, br.bAddr, 8);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(m2, 0u) << "an address the app did not ask for is not written";
  api::cudnnRNNSetClip_v9_Args clip{};
  clip.rnnDesc = rnn, clip.clipMode = 1, clip.lclip = -2, clip.rclip = 3;
  ASSERT_EQ(c.call<api::Call::cudnnRNNSetClip_v9>(clip), 0);
  // The dropout descriptor set again after the RNN descriptor: a resume still restores it first.
  api::cudnnSetDropoutDescriptor_Args sd{};
  sd.dropoutDesc = dd, sd.handle = handle, sd.dropout = 0.25f, sd.states = states, sd.stateSizeInBytes = 256;
  sd.seed = 99;
  ASSERT_EQ(c.call<api::Call::cudnnSetDropoutDescriptor>(sd), 0);
  std::vector<float> xv(size_t(T) * B * I);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i % 5) - 2) * 0.3f;
  const uint64_t x = floats(xv), y = floats(std::vector<float>(size_t(T) * B * H, 0));
  const std::vector<float> first = rnn_forward(x, y);
  EXPECT_EQ(first[size_t(2 * B + 1) * H], -1.f) << "the padding symbol fills the second sequence's third step";
  const std::string path = ::testing::TempDir() + "vmcuda-cudnn-rnn." + std::to_string(::getpid()) + ".state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    const uint64_t live = tst::fake_live_cudnn_objects();
    state::remove_state_file(path);
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    r = slot_control::control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    EXPECT_EQ(tst::fake_live_cudnn_objects(), live);
    EXPECT_EQ(rnn_forward(x, floats(std::vector<float>(size_t(T) * B * H, 0))), first);
    EXPECT_EQ(shape(md), (std::vector<int32_t>{1, H, H}));
    api::cudnnRNNGetClip_v9_Reply cr{};
    ASSERT_EQ(c.call<api::Call::cudnnRNNGetClip_v9>({rnn}, &cr), 0);
    double lo = 0, hi = 0;
    std::memcpy(&lo, cr.lclip, 8);
    std::memcpy(&hi, cr.rclip, 8);
    EXPECT_EQ(cr.clipMode[0], 1);
    EXPECT_EQ(lo, -2);
    EXPECT_EQ(hi, 3);
    // Read back: the dropout descriptor it names answered as the client's handle of it, the
    // sequence lengths (as many as asked, at most the batch) and the padding symbol.
    api::cudnnGetRNNDescriptor_v8_Reply rr{};
    ASSERT_EQ(c.call<api::Call::cudnnGetRNNDescriptor_v8>({rnn}, &rr), 0);
    uint64_t named = 0;
    std::memcpy(&named, rr.dropoutDesc, 8);
    EXPECT_EQ(named, dd);
    EXPECT_EQ(rr.cellMode[0], 2);
    EXPECT_EQ(rr.hiddenSize[0], H);
    EXPECT_EQ(rr.auxFlags[0], 1);
    api::cudnnGetRNNDataDescriptor_Args ga{};
    ga.rnnDataDesc = ydd, ga.arrayLengthRequested = 8;
    api::cudnnGetRNNDataDescriptor_Reply gr{};
    std::vector<std::byte> lengths;
    ASSERT_EQ(c.call<api::Call::cudnnGetRNNDataDescriptor>(ga, &gr, {}, &lengths, 32), 0);
    int32_t got[2] = {};
    ASSERT_GE(lengths.size(), 8u);
    std::memcpy(got, lengths.data(), 8);
    EXPECT_EQ(std::vector<int32_t>(got, got + 2), (std::vector<int32_t>{3, 2}));
    float fill = 0;
    std::memcpy(&fill, gr.paddingFill, 4);
    EXPECT_EQ(fill, -1.f);
    EXPECT_EQ(gr.vectorSize[0], H);
  }
  state::remove_state_file(path);
}

TEST_F(CudnnRnnTest, HostileArguments) {
  make_rnn();
  // Sequence lengths that do not match the batch, or more sequences than vmcuda carries.
  api::cudnnSetRNNDataDescriptor_Args a{};
  a.rnnDataDesc = xdd, a.dataType = 0, a.layout = 0, a.maxSeqLength = T, a.batchSize = B, a.vectorSize = I;
  const int32_t one[1] = {3};
  EXPECT_LT(c.call<api::Call::cudnnSetRNNDataDescriptor>(a, nullptr, std::as_bytes(std::span(one))), 0);
  a.batchSize = 16001;
  const std::vector<int32_t> many(16001, 1);
  EXPECT_LT(c.call<api::Call::cudnnSetRNNDataDescriptor>(a, nullptr, std::as_bytes(std::span(many))), 0);
  // The wrong kind of descriptor.
  api::cudnnGetRNNWeightSpaceSize_Reply wr{};
  EXPECT_EQ(c.call<api::Call::cudnnGetRNNWeightSpaceSize>({handle, xdd}, &wr), api::kCudnnBadParam);
  // Memory that is not the client's, or ends before the sequences or the weight space do.
  const uint64_t x = floats(std::vector<float>(size_t(T) * B * I, 0.5f)), small = floats({1, 2});
  api::cudnnRNNForward_Args f{};
  f.handle = handle, f.rnnDesc = rnn, f.fwdMode = 0, f.xDesc = xdd, f.x = 0xdead0000, f.yDesc = ydd;
  f.y = floats(std::vector<float>(size_t(T) * B * H)), f.hDesc = hd, f.cDesc = hd, f.weightSpaceSize = wbytes;
  f.weightSpace = w;
  EXPECT_EQ(c.call<api::Call::cudnnRNNForward>(f), api::kCudnnBadParam);
  f.x = small;
  EXPECT_EQ(c.call<api::Call::cudnnRNNForward>(f), api::kCudnnBadParam);
  f.x = x, f.weightSpaceSize = wbytes + 4096;
  EXPECT_EQ(c.call<api::Call::cudnnRNNForward>(f), api::kCudnnBadParam);
  f.weightSpaceSize = wbytes, f.devSeqLengths = 0xdead0000;
  EXPECT_EQ(c.call<api::Call::cudnnRNNForward>(f), api::kCudnnBadParam);
  f.devSeqLengths = 0;
  EXPECT_EQ(c.call<api::Call::cudnnRNNForward>(f), 0);  // the stub keeps serving
  // More sequence lengths asked back than vmcuda carries, or more than there is room for.
  api::cudnnGetRNNDataDescriptor_Args ga{};
  ga.rnnDataDesc = xdd, ga.arrayLengthRequested = 16001;
  api::cudnnGetRNNDataDescriptor_Reply gr{};
  EXPECT_LT(c.call<api::Call::cudnnGetRNNDataDescriptor>(ga, &gr, {}, nullptr, 64), 0);
  ga.arrayLengthRequested = 64;
  EXPECT_LT(c.call<api::Call::cudnnGetRNNDataDescriptor>(ga, &gr, {}, nullptr, 8), 0);
}

TEST_F(CudnnRnnTest, AnRnnDescriptorWhoseDropoutDescriptorIsGoneRefusesTheSuspend) {
  make_rnn();
  ASSERT_EQ(c.call<api::Call::cudnnDestroyDropoutDescriptor>({dd}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("dropout descriptor the program has destroyed"), std::string::npos) << r.error;
  slot_control::release(stub);
  ASSERT_EQ(c.call<api::Call::cudnnDestroyRNNDescriptor>({rnn}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
}

TEST(CudnnTeardown, TheClientsObjectsGoWithIt) {
  Stub stub;
  const uint64_t before = tst::fake_live_cudnn_objects();
  {
    Client c{stub};
    ASSERT_EQ(c.call<api::Call::cudnnCreate>({0x9000}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnBackendCreateDescriptor>({0x9010, kTensor}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnBackendCreateDescriptor>({0x9020, kOpGraph}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateTensorDescriptor>({0x9030}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateActivationDescriptor>({0x9040}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateFilterDescriptor>({0x9050}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateConvolutionDescriptor>({0x9060}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreatePoolingDescriptor>({0x9070}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateDropoutDescriptor>({0x9080}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateLRNDescriptor>({0x9090}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateOpTensorDescriptor>({0x90a0}), 0);
    ASSERT_EQ(c.call<api::Call::cudnnCreateReduceTensorDescriptor>({0x90b0}), 0);
    EXPECT_EQ(tst::fake_live_cudnn_objects(), before + 12);
  }
  for (int i = 0; i < 200 && tst::fake_live_cudnn_objects() != before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(tst::fake_live_cudnn_objects(), before);
}

}  // namespace
}  // namespace vmcuda::host::test
