// guest-lib's cuBLASLt heuristic cache (guest-lib/src/cublaslt.cc) through vmcuda's
// libcublasLt.so.13 (dlopen), against vmcuda-stub in this process on the test executor, whose
// fake libcublasLt.so.13 counts the heuristic queries that reach it: the same question asked
// again costs no round trip, also through new objects that say the same (PyTorch makes new
// descriptors for every GEMM); a changed attribute, another count or another handle asks again;
// errors are not cached. Also the algorithm calls through the guest's entry points.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "executor/fake_driver.h"
#include "host-stub/stub_fixture.h"

namespace {

vmcuda::host::test::Stub* g_stub = nullptr;

class StubEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_stub = new vmcuda::host::test::Stub(vmcuda::host::StubLimits{}, {0});
    setenv("VMCUDA_SOCKET", g_stub->endpoint.socket_path().c_str(), 1);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new StubEnvironment);

void* lt() {
  static void* h = dlopen(VMCUDA_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
  return h;
}
template <class F>
F fn(const char* name) {
  void* p = dlsym(lt(), name);
  EXPECT_NE(p, nullptr) << name;
  return reinterpret_cast<F>(p);
}
#define LT(name, ...) fn<int (*)(__VA_ARGS__)>(#name)

constexpr int kCompute32F = 68, kR32F = 0;
constexpr int kDescEpilogue = 7, kPrefMaxWorkspace = 1;
constexpr size_t kResultBytes = 96;

struct Problem {
  void *handle = nullptr, *desc = nullptr, *a = nullptr, *b = nullptr, *c = nullptr, *pref = nullptr;
  explicit Problem(void* h, uint64_t workspace = 1 << 20) : handle(h) {
    EXPECT_EQ(LT(cublasLtMatmulDescCreate, void**, int, int)(&desc, kCompute32F, kR32F), 0);
    auto layout = LT(cublasLtMatrixLayoutCreate, void**, int, uint64_t, uint64_t, int64_t);
    EXPECT_EQ(layout(&a, kR32F, 2, 3, 2), 0);
    EXPECT_EQ(layout(&b, kR32F, 3, 2, 3), 0);
    EXPECT_EQ(layout(&c, kR32F, 2, 2, 2), 0);
    EXPECT_EQ(LT(cublasLtMatmulPreferenceCreate, void**)(&pref), 0);
    EXPECT_EQ(set_pref(workspace), 0);
  }
  ~Problem() {
    LT(cublasLtMatmulPreferenceDestroy, void*)(pref);
    for (void* l : {a, b, c}) LT(cublasLtMatrixLayoutDestroy, void*)(l);
    LT(cublasLtMatmulDescDestroy, void*)(desc);
  }
  int set_pref(uint64_t workspace) {
    return LT(cublasLtMatmulPreferenceSetAttribute, void*, int, const void*, size_t)(pref, kPrefMaxWorkspace,
                                                                                     &workspace, sizeof workspace);
  }
  // The heuristic's answer: status, count and the results' bytes.
  int heuristic(int requested, int* returned, std::vector<uint8_t>* results) {
    results->assign(size_t(requested) * kResultBytes, 0);
    return LT(cublasLtMatmulAlgoGetHeuristic, void*, void*, void*, void*, void*, void*, void*, int, void*, int*)(
        handle, desc, a, b, c, c, pref, requested, results->data(), returned);
  }
};

uint64_t queries() { return vmcuda::testing::fake_cublaslt_heuristic_calls(); }

TEST(CublasLtCache, RepeatedQuestionsCostOneRoundTrip) {
  ASSERT_NE(lt(), nullptr) << dlerror();
  void* handle = nullptr;
  ASSERT_EQ(LT(cublasLtCreate, void**)(&handle), 0);
  const uint64_t before = queries();
  std::vector<uint8_t> first, again;
  int n = 0;
  {
    Problem p(handle);
    ASSERT_EQ(p.heuristic(1, &n, &first), 0);
    ASSERT_EQ(n, 1);
    EXPECT_EQ(queries(), before + 1);
    for (int i = 0; i < 10; ++i) {
      n = 0;
      ASSERT_EQ(p.heuristic(1, &n, &again), 0);
      EXPECT_EQ(n, 1);
      EXPECT_EQ(again, first);
    }
    EXPECT_EQ(queries(), before + 1) << "the same question crossed again";
  }
  // New objects saying the same things (PyTorch's way): answered here too.
  {
    Problem p(handle);
    ASSERT_EQ(p.heuristic(1, &n, &again), 0);
    EXPECT_EQ(again, first);
    EXPECT_EQ(queries(), before + 1);
    // A changed attribute is a new question, once; setting it back is the first one again.
    ASSERT_EQ(p.set_pref(4 << 20), 0);
    ASSERT_EQ(p.heuristic(1, &n, &again), 0);
    ASSERT_EQ(p.heuristic(1, &n, &again), 0);
    EXPECT_EQ(queries(), before + 2);
    ASSERT_EQ(p.set_pref(1 << 20), 0);
    ASSERT_EQ(p.heuristic(1, &n, &again), 0);
    EXPECT_EQ(queries(), before + 2);
    // The descriptor's attribute (epilogue DEFAULT, the library's default: still a new question).
    const int32_t epilogue = 1;
    ASSERT_EQ(LT(cublasLtMatmulDescSetAttribute, void*, int, const void*, size_t)(p.desc, kDescEpilogue, &epilogue,
                                                                                  sizeof epilogue),
              0);
    ASSERT_EQ(p.heuristic(1, &n, &again), 0);
    EXPECT_EQ(queries(), before + 3);
    // Another requested count.
    ASSERT_EQ(p.heuristic(4, &n, &again), 0);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(queries(), before + 4);
  }
  // Another handle asks for itself; a destroyed handle's answers are gone with it.
  void* other = nullptr;
  ASSERT_EQ(LT(cublasLtCreate, void**)(&other), 0);
  {
    Problem p(other);
    ASSERT_EQ(p.heuristic(1, &n, &again), 0);
    EXPECT_EQ(again, first);
    EXPECT_EQ(queries(), before + 5);
  }
  ASSERT_EQ(LT(cublasLtDestroy, void*)(other), 0);
  ASSERT_EQ(LT(cublasLtDestroy, void*)(handle), 0);
}

TEST(CublasLtCache, ErrorsAreNotCached) {
  void* handle = nullptr;
  ASSERT_EQ(LT(cublasLtCreate, void**)(&handle), 0);
  {
    Problem p(handle);
    // C's rows do not match A's: the library's INVALID_VALUE, asked each time.
    auto layout = LT(cublasLtMatrixLayoutCreate, void**, int, uint64_t, uint64_t, int64_t);
    LT(cublasLtMatrixLayoutDestroy, void*)(p.c);
    ASSERT_EQ(layout(&p.c, kR32F, 5, 2, 5), 0);
    const uint64_t before = queries();
    std::vector<uint8_t> r;
    int n = -1;
    EXPECT_EQ(p.heuristic(1, &n, &r), 7);  // CUBLAS_STATUS_INVALID_VALUE
    EXPECT_EQ(p.heuristic(1, &n, &r), 7);
    EXPECT_EQ(queries(), before + 2);
  }
  ASSERT_EQ(LT(cublasLtDestroy, void*)(handle), 0);
}

// The algorithm calls through the guest's entry points, each a round trip.
TEST(CublasLtAlgo, IdsInitConfigCapabilitiesCheck) {
  void* handle = nullptr;
  ASSERT_EQ(LT(cublasLtCreate, void**)(&handle), 0);
  int ids[8] = {}, n = 0;
  ASSERT_EQ(LT(cublasLtMatmulAlgoGetIds, void*, int, int, int, int, int, int, int, int*, int*)(
                handle, kCompute32F, kR32F, kR32F, kR32F, kR32F, kR32F, 8, ids, &n),
            0);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(ids[1], 1);
  uint64_t algo[8] = {};
  ASSERT_EQ(LT(cublasLtMatmulAlgoInit, void*, int, int, int, int, int, int, int, void*)(
                handle, kCompute32F, kR32F, kR32F, kR32F, kR32F, kR32F, ids[1], algo),
            0);
  int32_t id = -1;
  size_t written = 0;
  auto config_get = LT(cublasLtMatmulAlgoConfigGetAttribute, const void*, int, void*, size_t, size_t*);
  ASSERT_EQ(config_get(algo, 0, &id, sizeof id, &written), 0);
  EXPECT_EQ(id, 1);
  EXPECT_EQ(written, 4u);
  const int32_t splitk = 2;
  ASSERT_EQ(LT(cublasLtMatmulAlgoConfigSetAttribute, void*, int, const void*, size_t)(algo, 2, &splitk, sizeof splitk),
            0);
  int32_t got = 0;
  ASSERT_EQ(config_get(algo, 2, &got, sizeof got, nullptr), 0);
  EXPECT_EQ(got, 2);
  EXPECT_EQ(config_get(algo, 0, nullptr, 0, nullptr), 7);  // a size query needs sizeWritten
  auto cap = LT(cublasLtMatmulAlgoCapGetAttribute, const void*, int, void*, size_t, size_t*);
  ASSERT_EQ(cap(algo, 6, nullptr, 0, &written), 0);  // CUBLASLT_ALGO_CAP_TILE_IDS: its size
  EXPECT_EQ(written, 12u);
  uint32_t tiles[16] = {};
  ASSERT_EQ(cap(algo, 6, tiles, sizeof tiles, &written), 0);
  EXPECT_EQ(written, 12u);
  EXPECT_EQ(tiles[1], 18u);
  {
    Problem p(handle);
    uint8_t result[kResultBytes];
    std::memset(result, 0xee, sizeof result);
    ASSERT_EQ(LT(cublasLtMatmulAlgoCheck, void*, void*, void*, void*, void*, void*, const void*, void*)(
                  handle, p.desc, p.a, p.b, p.c, p.c, algo, result),
              0);
    uint64_t workspace = 0;
    std::memcpy(&workspace, result + 64, 8);
    EXPECT_EQ(workspace, 2u * 2 * 4 * 2);
    EXPECT_EQ(result[0], 0xee) << "the result's algorithm is never written";
  }
  ASSERT_EQ(LT(cublasLtDestroy, void*)(handle), 0);
}

}  // namespace
