// cuBLASLt calls (calls.def 0x2100-; api/libs/cublasLt.calls) through the wire to the stub on
// the test executor's fake libcublasLt.so.13 (tests/executor/fake_cublas.cc): descriptors and
// their attributes, the heuristic's algorithm bytes coming back and going to the matmul
// unchanged, a cuBLAS handle used as the cuBLASLt handle (PyTorch's way), the bias epilogue,
// hostile arguments, teardown, and the objects carried across a suspend or a save (with
// forged state records refused).
#include <chrono>
#include <thread>

#include "host-stub/slot_control.h"
#include "stub_fixture.h"
#include "vmcuda/api/cublaslt_abi.h"

namespace vmcuda::host::test {
namespace {

constexpr int32_t kNotInitialized = 1, kInvalidValue = 7, kNotSupported = 15;
// cublasLt.h attribute numbers the tests set.
constexpr int32_t kDescPointerMode = 2, kDescTransA = 3, kDescEpilogue = 7, kDescBias = 8;
constexpr int32_t kLayoutRows = 2, kPrefMaxWorkspace = 1;

struct CublasLtTest : ::testing::Test {
  Stub stub;
  Client c{stub};
  uint64_t lt = 0x8000, blas = 0x8010, desc = 0x8020, la = 0x8030, lb = 0x8040, lc = 0x8050, pref = 0x8060;

  void SetUp() override {
    ASSERT_EQ(c.call<api::Call::cublasLtCreate>({lt}), 0);
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({blas}), 0);
    ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescCreate>({desc, 68, 0}), 0);  // COMPUTE_32F, R_32F scale
    ASSERT_EQ(layout(la, 2, 3), 0);  // A 2x3
    ASSERT_EQ(layout(lb, 3, 2), 0);  // B 3x2
    ASSERT_EQ(layout(lc, 2, 2), 0);  // C = D 2x2
    ASSERT_EQ(c.call<api::Call::cublasLtMatmulPreferenceCreate>({pref}), 0);
  }
  int32_t layout(uint64_t h, uint64_t rows, uint64_t cols) {
    api::cublasLtMatrixLayoutCreate_Args a{};
    a.matLayout = h;
    a.type = 0;
    a.rows = rows;
    a.cols = cols;
    a.ld = static_cast<int64_t>(rows);
    return c.call<api::Call::cublasLtMatrixLayoutCreate>(a);
  }
  template <api::Call C, class T>
  int32_t set(uint64_t h, int32_t attr, T v) {
    typename api::CallTraits<C>::Args a{};
    std::memcpy(static_cast<void*>(&a), &h, sizeof h);  // the descriptor is each Args' first field
    a.attr = attr;
    a.sizeInBytes = sizeof v;
    return c.call<C>(a, nullptr, std::as_bytes(std::span(&v, 1)));
  }
  uint64_t floats(const std::vector<float>& v) {
    const uint64_t p = c.malloc(v.size() * 4);
    EXPECT_EQ(c.call<api::Call::CopyToDeviceInline>({p}, nullptr, std::as_bytes(std::span(v))), 0);
    return p;
  }
  std::vector<float> get(uint64_t p, size_t n) {
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<api::Call::CopyFromDeviceInline>({p, n * 4}, nullptr, {}, &extra, uint32_t(n * 4)), 0);
    std::vector<float> v(n);
    std::memcpy(v.data(), extra.data(), std::min(extra.size(), n * 4));
    return v;
  }
  // The heuristic's first result's bytes (the algorithm first), via `handle`.
  std::vector<std::byte> heuristic(uint64_t handle, int32_t* status = nullptr) {
    api::cublasLtMatmulAlgoGetHeuristic_Args h{};
    h.lightHandle = handle;
    h.operationDesc = desc;
    h.Adesc = la, h.Bdesc = lb, h.Cdesc = lc, h.Ddesc = lc;
    h.preference = pref;
    h.requestedAlgoCount = 1;
    api::cublasLtMatmulAlgoGetHeuristic_Reply r{};
    std::vector<std::byte> extra;
    const int32_t s = c.call<api::Call::cublasLtMatmulAlgoGetHeuristic>(h, &r, {}, &extra,
                                                                        api::kLtHeuristicResultBytes);
    if (status) *status = s;
    int n;
    std::memcpy(&n, r.returnAlgoCount, sizeof n);
    EXPECT_EQ(s == 0 ? 1 : 0, n);
    return extra;
  }
  api::cublasLtMatmul_Args matmul(uint64_t handle, uint64_t a, uint64_t b, uint64_t cm, float alpha, float beta) {
    api::cublasLtMatmul_Args m{};
    m.lightHandle = handle;
    m.computeDesc = desc;
    std::memcpy(m.alpha, &alpha, 4);
    std::memcpy(m.beta, &beta, 4);
    m.A = a, m.Adesc = la, m.B = b, m.Bdesc = lb, m.C = cm, m.Cdesc = lc, m.D = cm, m.Ddesc = lc;
    return m;
  }
};

TEST_F(CublasLtTest, MatmulThroughTheHeuristicsAlgorithm) {
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({1, 1, 1, 1});
  const uint64_t limit = 1 << 20;
  ASSERT_EQ(set<api::Call::cublasLtMatmulPreferenceSetAttribute>(pref, kPrefMaxWorkspace, limit), 0);
  const auto result = heuristic(lt);
  ASSERT_EQ(result.size(), api::kLtHeuristicResultBytes);
  auto m = matmul(lt, a, b, cm, 2.0f, 1.0f);
  std::memcpy(m.algo, result.data(), api::kLtAlgoBytes);
  m.has_algo = 1;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmul>(m), 0);
  EXPECT_EQ(get(cm, 4), (std::vector<float>{23, 29, 17, 21}));  // 2 A B + C (as the cuBLAS test)
  // An algorithm's bytes changed on the way are the library's to refuse.
  m.algo[0] ^= 1;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), kInvalidValue);
}

TEST_F(CublasLtTest, CublasHandleIsALtHandleAndBiasEpilogue) {
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({0, 0, 0, 0});
  const uint64_t bias = floats({100, 200});
  ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescEpilogue, int32_t{4}), 0);  // BIAS
  ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescBias, bias), 0);
  EXPECT_EQ(heuristic(blas).size(), api::kLtHeuristicResultBytes);
  ASSERT_EQ(c.call<api::Call::cublasLtMatmul>(matmul(blas, a, b, cm, 1.0f, 0.0f)), 0);
  EXPECT_EQ(get(cm, 4), (std::vector<float>{111, 214, 108, 210}));
  // Getters: a size query, then the value; the bias pointer as it was set.
  api::cublasLtMatmulDescGetAttribute_Args g{};
  g.matmulDesc = desc;
  g.attr = kDescBias;
  api::cublasLtMatmulDescGetAttribute_Reply r{};
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescGetAttribute>(g, &r, {}, &extra, 0), 0);
  uint64_t written;
  std::memcpy(&written, r.sizeWritten, 8);
  EXPECT_EQ(written, 8u);
  g.sizeInBytes = 8;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescGetAttribute>(g, &r, {}, &extra, 8), 0);
  ASSERT_EQ(extra.size(), 8u);
  uint64_t got;
  std::memcpy(&got, extra.data(), 8);
  EXPECT_EQ(got, bias);
}

TEST_F(CublasLtTest, DevicePointerModeTakesScalarsFromDeviceMemory) {
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({1, 1, 1, 1});
  const uint64_t scalars = floats({2, 1});
  ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescPointerMode, int32_t{1}), 0);
  auto m = matmul(lt, a, b, cm, 0, 0);
  const uint64_t alpha = scalars, beta = scalars + 4;
  std::memcpy(m.alpha, &alpha, 8);
  std::memcpy(m.beta, &beta, 8);
  ASSERT_EQ(c.call<api::Call::cublasLtMatmul>(m), 0);
  EXPECT_EQ(get(cm, 4), (std::vector<float>{23, 29, 17, 21}));
  // A device scalar that is not the client's memory.
  const uint64_t elsewhere = 0xdead0000;
  std::memcpy(m.alpha, &elsewhere, 8);
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), kInvalidValue);
}

// The algorithm calls (0x2110-): ids, init, check, capabilities and config on the algorithm's
// 64 bytes as the fake library lays them out, and a matmul through an algorithm made this way.
TEST_F(CublasLtTest, AlgorithmCalls) {
  // Ids for fp32 (COMPUTE_32F, R_32F everywhere): the fake's two; room for one gives one.
  api::cublasLtMatmulAlgoGetIds_Args ids{};
  ids.lightHandle = lt;
  ids.computeType = 68;
  ids.requestedAlgoCount = 8;
  api::cublasLtMatmulAlgoGetIds_Reply idr{};
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetIds>(ids, &idr, {}, &extra, 8 * 4), 0);
  int n;
  std::memcpy(&n, idr.returnAlgoCount, sizeof n);
  ASSERT_EQ(n, 2);
  ASSERT_EQ(extra.size(), 8u);
  int32_t got_ids[2];
  std::memcpy(got_ids, extra.data(), 8);
  EXPECT_EQ(got_ids[0], 0);
  EXPECT_EQ(got_ids[1], 1);
  ids.requestedAlgoCount = 1;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetIds>(ids, &idr, {}, &extra, 4), 0);
  std::memcpy(&n, idr.returnAlgoCount, sizeof n);
  EXPECT_EQ(n, 1);
  // Through the cuBLAS handle too (PyTorch's way); unknown handle.
  ids.lightHandle = blas;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetIds>(ids, &idr, {}, &extra, 4), 0);
  ids.lightHandle = 0x8ff0;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetIds>(ids, &idr, {}, &extra, 4), kNotInitialized);

  // Init id 1; an id the library does not know.
  api::cublasLtMatmulAlgoInit_Args in{};
  in.lightHandle = lt;
  in.computeType = 68;
  in.algoId = 1;
  api::cublasLtMatmulAlgoInit_Reply algo{};
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoInit>(in, &algo), 0);
  in.algoId = 7;
  api::cublasLtMatmulAlgoInit_Reply unused{};
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoInit>(in, &unused), kInvalidValue);

  // Config: the id reads back; split-k set (the algorithm's bytes change and come back), read back.
  auto config_get = [&](const uint8_t (&bytes)[64], int32_t attr, int32_t* value) {
    api::cublasLtMatmulAlgoConfigGetAttribute_Args g{};
    std::memcpy(g.algo, bytes, 64);
    g.has_algo = 1;
    g.attr = attr;
    g.sizeInBytes = 4;
    api::cublasLtMatmulAlgoConfigGetAttribute_Reply r{};
    std::vector<std::byte> v;
    const int32_t s = c.call<api::Call::cublasLtMatmulAlgoConfigGetAttribute>(g, &r, {}, &v, 4);
    if (s == 0 && v.size() == 4) std::memcpy(value, v.data(), 4);
    return s;
  };
  int32_t value = -1;
  ASSERT_EQ(config_get(algo.algo, 0, &value), 0);  // CUBLASLT_ALGO_CONFIG_ID
  EXPECT_EQ(value, 1);
  api::cublasLtMatmulAlgoConfigSetAttribute_Args cs{};
  std::memcpy(cs.algo, algo.algo, 64);
  cs.attr = 2;  // CUBLASLT_ALGO_CONFIG_SPLITK_NUM
  cs.sizeInBytes = 4;
  const int32_t splitk = 3;
  api::cublasLtMatmulAlgoConfigSetAttribute_Reply changed{};
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoConfigSetAttribute>(cs, &changed,
                                                                    std::as_bytes(std::span(&splitk, 1))), 0);
  EXPECT_NE(std::memcmp(changed.algo, algo.algo, 64), 0);
  ASSERT_EQ(config_get(changed.algo, 2, &value), 0);
  EXPECT_EQ(value, 3);
  cs.attr = 0;  // read-only: the library refuses it
  api::cublasLtMatmulAlgoConfigSetAttribute_Reply refused{};
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoConfigSetAttribute>(cs, &refused,
                                                                    std::as_bytes(std::span(&splitk, 1))),
            kInvalidValue);

  // Capabilities: an array's size, then the array; a scalar.
  api::cublasLtMatmulAlgoCapGetAttribute_Args cap{};
  std::memcpy(cap.algo, algo.algo, 64);
  cap.has_algo = 1;
  cap.attr = 6;  // CUBLASLT_ALGO_CAP_TILE_IDS
  api::cublasLtMatmulAlgoCapGetAttribute_Reply cr{};
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoCapGetAttribute>(cap, &cr, {}, &extra, 0), 0);
  uint64_t written;
  std::memcpy(&written, cr.sizeWritten, 8);
  EXPECT_EQ(written, 12u);
  cap.sizeInBytes = 64;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoCapGetAttribute>(cap, &cr, {}, &extra, 64), 0);
  ASSERT_EQ(extra.size(), 12u);
  uint32_t tiles[3];
  std::memcpy(tiles, extra.data(), 12);
  EXPECT_EQ(tiles[0], 15u);
  EXPECT_EQ(tiles[2], 20u);

  // Check: with split-k 3 the fake asks for workspace; the problem's k is 3.
  api::cublasLtMatmulAlgoCheck_Args ck{};
  ck.lightHandle = lt, ck.operationDesc = desc, ck.Adesc = la, ck.Bdesc = lb, ck.Cdesc = lc, ck.Ddesc = lc;
  std::memcpy(ck.algo, changed.algo, 64);
  ck.has_algo = 1;
  api::cublasLtMatmulAlgoCheck_Reply result{};
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulAlgoCheck>(ck, &result), 0);
  uint64_t workspace;
  std::memcpy(&workspace, result.result + 64, 8);
  EXPECT_EQ(workspace, 2u * 2 * 4 * 3);
  ck.Adesc = desc;  // a matmul descriptor where a layout belongs
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoCheck>(ck, &result), kInvalidValue);

  // The matmul through the algorithm Init made.
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({1, 1, 1, 1});
  auto m = matmul(lt, a, b, cm, 2.0f, 1.0f);
  std::memcpy(m.algo, algo.algo, 64);
  m.has_algo = 1;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmul>(m), 0);
  EXPECT_EQ(get(cm, 4), (std::vector<float>{23, 29, 17, 21}));

  // Hostile: sizes beyond the limits, a value whose bytes do not match its size, no algorithm.
  ids.lightHandle = lt;
  ids.requestedAlgoCount = api::kLtMaxAlgoIds + 1;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetIds>(ids, &idr, {}, &extra, 0), kInvalidValue);
  ids.requestedAlgoCount = 4;  // room for fewer ids than asked
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetIds>(ids, &idr, {}, &extra, 4), kInvalidValue);
  cap.sizeInBytes = api::kLtMaxCapabilityBytes + 1;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoCapGetAttribute>(cap, &cr, {}, &extra, 8192), kInvalidValue);
  cap.sizeInBytes = 64;  // more than the reply has room for
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoCapGetAttribute>(cap, &cr, {}, &extra, 8), kInvalidValue);
  cap.has_algo = 0;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoCapGetAttribute>(cap, &cr, {}, &extra, 64), kInvalidValue);
  cs.attr = 2;
  cs.sizeInBytes = 8;
  EXPECT_LT(c.call<api::Call::cublasLtMatmulAlgoConfigSetAttribute>(cs, &refused,
                                                                    std::as_bytes(std::span(&splitk, 1))), 0);
  // Bytes the library does not recognize as an algorithm.
  uint8_t garbage[64];
  std::memset(garbage, 0x5a, sizeof garbage);
  EXPECT_EQ(config_get(garbage, 0, &value), kInvalidValue);
  // The stub keeps serving.
  ASSERT_EQ(config_get(algo.algo, 0, &value), 0);
}

TEST_F(CublasLtTest, HostileArguments) {
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({1, 1, 1, 1});
  // Handles and descriptors never made, or of another kind.
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(matmul(0x8ff0, a, b, cm, 1, 0)), kNotInitialized);
  auto m = matmul(lt, a, b, cm, 1, 0);
  m.Adesc = desc;  // a matmul descriptor where a layout belongs
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), kInvalidValue);
  // Memory that is not the client's: a matrix, the workspace, a pointer attribute.
  m = matmul(lt, a, 0xdead0000, cm, 1, 0);
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), kInvalidValue);
  m = matmul(lt, a, b, cm, 1, 0);
  m.workspace = a, m.workspaceSizeInBytes = 1 << 20;  // beyond a's 24 bytes
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), kInvalidValue);
  EXPECT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescBias, uint64_t{0xdead0000}), kInvalidValue);
  // An attribute vmcuda does not forward (the emulation descriptor: a host object).
  EXPECT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, 38, uint64_t{0x1234}), kNotSupported);
  EXPECT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, 29, uint64_t{0x1234}), kNotSupported);  // CUDA 12's counters
  EXPECT_EQ(set<api::Call::cublasLtMatmulPreferenceSetAttribute>(pref, 2, uint32_t{0}), kNotSupported);
  // A value whose bytes do not match its size; a heuristic asking for too many results.
  api::cublasLtMatrixLayoutSetAttribute_Args s{};
  s.matLayout = la;
  s.attr = kLayoutRows;
  s.sizeInBytes = 8;
  const std::byte four[4]{};
  EXPECT_LT(c.call<api::Call::cublasLtMatrixLayoutSetAttribute>(s, nullptr, four), 0);
  api::cublasLtMatmulAlgoGetHeuristic_Args h{};
  h.lightHandle = lt, h.operationDesc = desc, h.Adesc = la, h.Bdesc = lb, h.Cdesc = lc, h.Ddesc = lc;
  h.preference = pref;
  h.requestedAlgoCount = api::kLtMaxHeuristicResults + 1;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetHeuristic>(h, nullptr, {}, nullptr, 0), kInvalidValue);
  h.requestedAlgoCount = 2;  // room for fewer results than asked
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulAlgoGetHeuristic>(h, nullptr, {}, nullptr, 96), kInvalidValue);
  // A handle that is not new.
  EXPECT_LT(c.call<api::Call::cublasLtCreate>({lt}), 0);
  EXPECT_LT(c.call<api::Call::cublasLtMatmulDescCreate>({la, 68, 0}), 0);
  // The stub keeps serving; transposed A through a layout of its shape.
  ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescTransA, int32_t{1}), 0);
  ASSERT_EQ(layout(0x8070, 3, 2), 0);
  m = matmul(lt, a, b, cm, 1, 0);
  m.Adesc = 0x8070;
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), 0);
  // A^T with A^T 3x2 = [1 4; 2 5; 3 6]... as column-major data {1,2,3,4,5,6}: A = [1 2 3; 4 5 6]
  EXPECT_EQ(get(cm, 4), (std::vector<float>{7, 16, 5, 11}));
  // Destroyed: gone.
  EXPECT_EQ(c.call<api::Call::cublasLtMatmulDescDestroy>({desc}), 0);
  EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), kInvalidValue);
  EXPECT_EQ(c.call<api::Call::cublasLtDestroy>({lt}), 0);
  EXPECT_EQ(c.call<api::Call::cublasLtDestroy>({lt}), kNotInitialized);
  EXPECT_EQ(c.call<api::Call::cublasLtDestroy>({blas}), kNotInitialized);  // a cuBLAS handle is destroyed as one
}

// A descriptor, layouts and a preference whose attributes differ from what they were made
// with (one set twice: its last value counts), used for a matmul, then the client suspended
// (the library's objects released) and resumed, or saved and restored: the same guest handles
// name objects with the same attributes, and the same matmul (the heuristic's algorithm kept
// by the guest) gives the same result.
struct CublasLtSuspendTest : CublasLtTest {
  uint64_t a = 0, b = 0, cm = 0, bias = 0;
  std::vector<std::byte> algo;
  uint64_t before = 0;  // the fake's live cuBLASLt objects of other tests
  void SetUp() override {
    before = tst::fake_live_cublaslt_objects();
    CublasLtTest::SetUp();
    a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({0, 0, 0, 0});
    bias = floats({100, 200});
    ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescTransA, int32_t{1}), 0);
    ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescEpilogue, int32_t{4}), 0);  // BIAS
    ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescBias, bias), 0);
    ASSERT_EQ(set<api::Call::cublasLtMatmulDescSetAttribute>(desc, kDescTransA, int32_t{0}), 0);  // set again
    // A made 3x2 with ld 3, then made 2x3 with ld 2 by its attributes.
    ASSERT_EQ(c.call<api::Call::cublasLtMatrixLayoutDestroy>({la}), 0);
    ASSERT_EQ(layout(la, 3, 2), 0);
    ASSERT_EQ(set<api::Call::cublasLtMatrixLayoutSetAttribute>(la, kLayoutRows, uint64_t{2}), 0);
    ASSERT_EQ(set<api::Call::cublasLtMatrixLayoutSetAttribute>(la, kLayoutRows + 1, uint64_t{3}), 0);
    ASSERT_EQ(set<api::Call::cublasLtMatrixLayoutSetAttribute>(la, kLayoutLd, int64_t{2}), 0);
    ASSERT_EQ(set<api::Call::cublasLtMatmulPreferenceSetAttribute>(pref, kPrefMaxWorkspace, uint64_t{1} << 20), 0);
    algo = heuristic(lt);
    ASSERT_EQ(algo.size(), api::kLtHeuristicResultBytes);
  }
  // D = A B + bias through the heuristic's algorithm (`handle`: the cuBLASLt or cuBLAS one).
  std::vector<float> run(uint64_t handle) {
    const std::vector<float> zeros(4);
    EXPECT_EQ(c.call<api::Call::CopyToDeviceInline>({cm}, nullptr, std::as_bytes(std::span(zeros))), 0);
    auto m = matmul(handle, a, b, cm, 1.0f, 0.0f);
    std::memcpy(m.algo, algo.data(), api::kLtAlgoBytes);
    m.has_algo = 1;
    EXPECT_EQ(c.call<api::Call::cublasLtMatmul>(m), 0);
    return get(cm, 4);
  }
  template <api::Call C, class T>
  T attribute(uint64_t h, int32_t attr) {
    typename api::CallTraits<C>::Args g{};
    std::memcpy(static_cast<void*>(&g), &h, sizeof h);
    g.attr = attr;
    g.sizeInBytes = sizeof(T);
    typename api::CallTraits<C>::Reply r{};
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<C>(g, &r, {}, &extra, sizeof(T)), 0);
    T v{};
    if (extra.size() == sizeof v) std::memcpy(&v, extra.data(), sizeof v);
    return v;
  }
  void expect_attributes() {
    EXPECT_EQ((attribute<api::Call::cublasLtMatmulDescGetAttribute, int32_t>(desc, kDescTransA)), 0);
    EXPECT_EQ((attribute<api::Call::cublasLtMatmulDescGetAttribute, int32_t>(desc, kDescEpilogue)), 4);
    EXPECT_EQ((attribute<api::Call::cublasLtMatmulDescGetAttribute, uint64_t>(desc, kDescBias)), bias);
    EXPECT_EQ((attribute<api::Call::cublasLtMatrixLayoutGetAttribute, uint64_t>(la, kLayoutRows)), 2u);
    EXPECT_EQ((attribute<api::Call::cublasLtMatrixLayoutGetAttribute, int64_t>(la, kLayoutLd)), 2);
    EXPECT_EQ((attribute<api::Call::cublasLtMatmulPreferenceGetAttribute, uint64_t>(pref, kPrefMaxWorkspace)), 1u << 20);
  }
  static constexpr int32_t kLayoutLd = 4;
  const std::vector<float> expected{111, 214, 108, 210};  // A B + bias
};

TEST_F(CublasLtSuspendTest, ObjectsComeBackWithTheirAttributesAfterAResume) {
  namespace cc = slot_control::cc;
  ASSERT_EQ(run(lt), expected);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(slot_control::hold(stub));
    cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(tst::fake_live_cublaslt_objects(), before);  // released with the client's GPU state
    r = slot_control::control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    slot_control::release(stub);
    EXPECT_EQ(tst::fake_live_cublaslt_objects(), before + 6);  // handle, descriptor, 3 layouts, preference
    expect_attributes();
    EXPECT_EQ(run(lt), expected);
    EXPECT_EQ(run(blas), expected);  // the cuBLAS handle is a cuBLASLt handle still
    EXPECT_EQ(heuristic(lt), algo);
  }
  // Destroyed after the resume: gone, and the handles are free again.
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescDestroy>({desc}), 0);
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescCreate>({desc, 68, 0}), 0);
}

TEST_F(CublasLtSuspendTest, SavedToAFileAndRestored) {
  namespace cc = slot_control::cc;
  const std::string path = ::testing::TempDir() + "vmcuda-cublaslt-test.state";
  state::remove_state_file(path);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_live_cublaslt_objects(), before);
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  expect_attributes();
  EXPECT_EQ(run(lt), expected);
  state::remove_state_file(path);
}

// The bias freed after it was set (a native program may leave a descriptor pointing at memory
// it freed and not use it again): the suspended client still resumes, its pointer kept.
TEST_F(CublasLtSuspendTest, ABiasFreedAfterItWasSetStillResumes) {
  namespace cc = slot_control::cc;
  ASSERT_EQ(c.call<api::Call::Free>({bias}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  EXPECT_EQ((attribute<api::Call::cublasLtMatmulDescGetAttribute, uint64_t>(desc, kDescBias)), bias);
}

// Forged cuBLASLt records in a state file: each refused with a message naming what is wrong,
// nothing of the library's left made, the client still suspended; the good file restores.
TEST_F(CublasLtSuspendTest, HostileRecordsInAStateFileAreRefused) {
  namespace cc = slot_control::cc;
  const std::string path = ::testing::TempDir() + "vmcuda-cublaslt-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-cublaslt-bad.state";
  state::remove_state_file(path);
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // An object record: kind (1 byte), id, parent, device (4), handle; then for cuBLASLt: what
  // (i32), compute type, data type (i32 each), rows, cols, ld (u64 each), the attributes'
  // count (u32), each attribute (i32, then its value: a u32 length and the bytes). The
  // descriptor's attributes, oldest first: epilogue (4 bytes), bias (8), transA (4).
  constexpr size_t kHandle = 21, kWhat = 29, kCount = 65, kFirst = 69, kSecond = 81, kSecondValue = 89;
  const auto lt_kind = static_cast<std::byte>(ObjectKind::CublasLt);
  auto is = [&](const std::vector<std::byte>& p, uint64_t handle) {
    uint64_t h;
    std::memcpy(&h, p.data() + kHandle, 8);
    return p[0] == lt_kind && h == handle;
  };
  auto i32_at = [](std::vector<std::byte>& p, size_t at, int32_t v) { std::memcpy(p.data() + at, &v, 4); };
  const slot_control::Forgery cases[] = {
      {"an unknown kind of object", [&](auto& p) { if (is(p, pref)) i32_at(p, kWhat, 9); }, "unknown cuBLASLt object"},
      {"a handle the guest cannot make", [&](auto& p) { if (is(p, lt)) std::memset(p.data() + kHandle, 0, 8); },
       "cannot have made"},
      {"a handle with attributes", [&](auto& p) { if (is(p, lt)) i32_at(p, kCount, 1); }, "too many attributes"},
      {"too many attributes", [&](auto& p) { if (is(p, desc)) i32_at(p, kCount, 100000); }, "too many attributes"},
      {"an attribute twice", [&](auto& p) { if (is(p, desc)) i32_at(p, kSecond, kDescEpilogue); }, "attribute 7 twice"},
      {"an attribute vmcuda does not forward", [&](auto& p) { if (is(p, desc)) i32_at(p, kFirst, 38); },
       "attribute 38 is not one vmcuda sets"},
      {"a bias that is not the client's memory",
       [&](auto& p) { if (is(p, desc)) { const uint64_t v = 0xdead0000; std::memcpy(p.data() + kSecondValue, &v, 8); } },
       "not a pointer into the client's device memory"},
      {"an attribute the library refuses", [&](auto& p) { if (is(p, la)) i32_at(p, kFirst, 7); },  // the fake knows 0-6
       "attribute 7 again failed (cuBLASLt status 7)"},
  };
  slot_control::expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_live_cublaslt_objects(), before);
  });
  r = slot_control::control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  expect_attributes();
  EXPECT_EQ(run(lt), expected);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

TEST(CublasLtTeardown, TheClientsObjectsGoWithIt) {
  Stub stub;
  const uint64_t before = tst::fake_live_cublaslt_objects();
  {
    Client c{stub};
    ASSERT_EQ(c.call<api::Call::cublasLtCreate>({0x8000}), 0);
    ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescCreate>({0x8010, 68, 0}), 0);
    ASSERT_EQ(c.call<api::Call::cublasLtMatmulPreferenceCreate>({0x8020}), 0);
    EXPECT_EQ(tst::fake_live_cublaslt_objects(), before + 3);
  }
  for (int i = 0; i < 200 && tst::fake_live_cublaslt_objects() != before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(tst::fake_live_cublaslt_objects(), before);
}

}  // namespace
}  // namespace vmcuda::host::test
