// cuBLASLt calls (calls.def 0x2100-; api/libs/cublasLt.calls) through the wire to the stub on
// the test executor's fake libcublasLt.so.13 (tests/executor/fake_cublas.cc): descriptors and
// their attributes, the heuristic's algorithm bytes coming back and going to the matmul
// unchanged, a cuBLAS handle used as the cuBLASLt handle (PyTorch's way), the bias epilogue,
// hostile arguments and teardown.
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

TEST_F(CublasLtTest, SuspendIsRefusedWhileObjectsExist) {
  namespace cc = slot_control::cc;
  ASSERT_TRUE(slot_control::hold(stub));
  cc::Reply r = slot_control::control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cuBLASLt"), std::string::npos) << r.error;
  slot_control::release(stub);
  // The client runs on; once its objects are destroyed, the suspend goes ahead.
  for (uint64_t h : {la, lb, lc}) ASSERT_EQ(c.call<api::Call::cublasLtMatrixLayoutDestroy>({h}), 0);
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescDestroy>({desc}), 0);
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulPreferenceDestroy>({pref}), 0);
  ASSERT_EQ(c.call<api::Call::cublasLtDestroy>({lt}), 0);
  ASSERT_TRUE(slot_control::hold(stub));
  r = slot_control::control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  r = slot_control::control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  slot_control::release(stub);
  // The cuBLAS handle came back, and is a cuBLASLt handle still.
  ASSERT_EQ(c.call<api::Call::cublasLtMatmulDescCreate>({desc + 1, 68, 0}), 0);
  ASSERT_EQ(layout(la + 1, 2, 3), 0);
  ASSERT_EQ(layout(lb + 1, 3, 2), 0);
  ASSERT_EQ(layout(lc + 1, 2, 2), 0);
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({1, 1, 1, 1});
  api::cublasLtMatmul_Args m = matmul(blas, a, b, cm, 2.0f, 1.0f);
  m.computeDesc = desc + 1, m.Adesc = la + 1, m.Bdesc = lb + 1, m.Cdesc = m.Ddesc = lc + 1;
  ASSERT_EQ(c.call<api::Call::cublasLtMatmul>(m), 0);
  EXPECT_EQ(get(cm, 4), (std::vector<float>{23, 29, 17, 21}));
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
