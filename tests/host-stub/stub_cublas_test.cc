// cuBLAS calls (calls.def 0x2000-; generated from cublas_api.h by scripts/gen-cublas.py) through
// the wire to the stub on the test executor, whose fake libcublas.so.13 computes on the CPU
// (tests/executor/fake_cublas.cc): the numbers that come back, the handle's settings as the
// library received them, and hostile arguments.
#include <chrono>
#include <cmath>
#include <thread>

#include <stdlib.h>

#include <filesystem>

#include "fair_share.h"
#include "stub_fixture.h"

namespace vmcuda::host::test {
namespace {

constexpr int32_t kNotInitialized = 1, kInvalidValue = 7, kNotSupported = 15;

struct CublasTest : ::testing::Test {
  Stub stub;
  Client c{stub};
  uint64_t handle = 0x7000;

  void SetUp() override { ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({handle}), 0); }

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
  template <class T>
  static void put_scalar(uint8_t (&field)[16], T v) {
    std::memcpy(field, &v, sizeof v);
  }
};

TEST_F(CublasTest, SgemmWithHostScalarsComputesOnTheDevice) {
  // A 2x3 (column-major), B 3x2: C = 2 A B + 1 C.
  const uint64_t a = floats({1, 2, 3, 4, 5, 6}), b = floats({1, 0, 2, 0, 1, 1}), cm = floats({1, 1, 1, 1});
  api::cublasSgemm_v2_Args g{};
  g.handle = handle;
  g.transa = g.transb = 0;
  g.m = 2, g.n = 2, g.k = 3;
  put_scalar(g.alpha, 2.0f);
  put_scalar(g.beta, 1.0f);
  g.A = a, g.lda = 2, g.B = b, g.ldb = 3, g.C = cm, g.ldc = 2;
  ASSERT_EQ(c.call<api::Call::cublasSgemm_v2>(g), 0);
  // A B = [1*1+3*0+5*2, 2*1+4*0+6*2; 1*0+3*1+5*1, 2*0+4*1+6*1] = [11 14; 8 10] (columns).
  EXPECT_EQ(get(cm, 4), (std::vector<float>{23, 29, 17, 21}));
}

TEST_F(CublasTest, GemmExBf16InputsFp32Output) {
  // bf16 of 1, 2, 3, 4 is the float's upper half.
  auto bf16 = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<uint16_t>(bits >> 16);
  };
  std::vector<uint16_t> a16 = {bf16(1), bf16(2), bf16(3), bf16(4)};  // 2x2
  const uint64_t a = c.malloc(8);
  ASSERT_EQ(c.call<api::Call::CopyToDeviceInline>({a}, nullptr, std::as_bytes(std::span(a16))), 0);
  const uint64_t cm = floats({0, 0, 0, 0});
  api::cublasGemmEx_Args g{};
  g.handle = handle;
  g.m = g.n = g.k = 2;
  put_scalar(g.alpha, 1.0f);
  put_scalar(g.beta, 0.0f);
  g.A = a, g.Atype = 14, g.lda = 2, g.B = a, g.Btype = 14, g.ldb = 2;
  g.C = cm, g.Ctype = 0, g.ldc = 2;
  g.computeType = 68;  // CUBLAS_COMPUTE_32F
  ASSERT_EQ(c.call<api::Call::cublasGemmEx>(g), 0);
  EXPECT_EQ(get(cm, 4), (std::vector<float>{7, 10, 15, 22}));
  // A compute type with no known scalar size is refused, never read past the scalar.
  g.computeType = 1234;
  EXPECT_EQ(c.call<api::Call::cublasGemmEx>(g), kInvalidValue);
}

TEST_F(CublasTest, DotResultInTheReplyOrInDeviceMemoryPerPointerMode) {
  const uint64_t x = floats({1, 2, 3}), y = floats({4, 5, 6});
  api::cublasSdot_v2_Args d{};
  d.handle = handle, d.n = 3, d.x = x, d.incx = 1, d.y = y, d.incy = 1;
  std::vector<std::byte> extra;
  ASSERT_EQ(c.call<api::Call::cublasSdot_v2>(d, nullptr, {}, &extra, 16), 0);
  ASSERT_GE(extra.size(), 4u);
  float r;
  std::memcpy(&r, extra.data(), 4);
  EXPECT_EQ(r, 32.0f);
  // No room for the result in pointer mode host: refused, nothing written.
  EXPECT_EQ(c.call<api::Call::cublasSdot_v2>(d), kInvalidValue);

  // Pointer mode device: the call is queued, the result lands in device memory.
  const uint64_t out = floats({0});
  c.queue<api::Call::cublasSetPointerMode_v2>({handle, 1});
  d.result = out;
  const auto f = c.queue<api::Call::cublasSdot_v2>(d);
  ASSERT_EQ(c.flush(), vmrpc::wire::ChannelStatus::kOk);
  EXPECT_EQ(c.status(f), 0);
  EXPECT_EQ(get(out, 1)[0], 32.0f);
  EXPECT_EQ(tst::fake_cublas_last_settings().pointer_mode, 1);
  // Device scalars: alpha in device memory.
  const uint64_t alpha = floats({-1});
  api::cublasSaxpy_v2_Args s{};
  s.handle = handle, s.n = 3, s.x = x, s.incx = 1, s.y = y, s.incy = 1;
  put_scalar(s.alpha, alpha);
  ASSERT_EQ(c.call<api::Call::cublasSaxpy_v2>(s), 0);
  EXPECT_EQ(get(y, 3), (std::vector<float>{3, 3, 3}));
  // ... and one that is not the client's memory is refused.
  put_scalar(s.alpha, uint64_t{0x1234});
  EXPECT_EQ(c.call<api::Call::cublasSaxpy_v2>(s), kInvalidValue);
  d.result = 0x1234;
  EXPECT_EQ(c.call<api::Call::cublasSdot_v2>(d), kInvalidValue);
}

TEST_F(CublasTest, SettingsReachTheLibrary) {
  const uint64_t ws = c.malloc(1 << 16);
  ASSERT_EQ(c.call<api::Call::cublasSetWorkspace_v2>({handle, ws, 1 << 16}), 0);
  ASSERT_EQ(c.call<api::Call::cublasSetMathMode>({handle, 3}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x9000, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::cublasSetStream_v2>({handle, 0x9000}), 0);
  auto s = tst::fake_cublas_last_settings();
  EXPECT_EQ(s.workspace, ws);
  EXPECT_EQ(s.workspace_bytes, 1u << 16);
  EXPECT_EQ(s.math_mode, 3);
  EXPECT_NE(s.stream, nullptr);
  // A workspace larger than the allocation, or a stream that does not exist: refused.
  EXPECT_EQ(c.call<api::Call::cublasSetWorkspace_v2>({handle, ws, 1 << 20}), kInvalidValue);
  EXPECT_EQ(c.call<api::Call::cublasSetStream_v2>({handle, 0x9010}), kInvalidValue);
  // The app destroys the stream the handle uses: the next call runs on the default stream
  // rather than on a freed one.
  ASSERT_EQ(c.call<api::Call::StreamDestroy>({0x9000}), 0);
  const uint64_t x = floats({1});
  api::cublasSscal_v2_Args sc{};
  sc.handle = handle, sc.n = 1, sc.x = x, sc.incx = 1;
  put_scalar(sc.alpha, 5.0f);
  ASSERT_EQ(c.call<api::Call::cublasSscal_v2>(sc), 0);
  EXPECT_EQ(tst::fake_cublas_last_settings().stream, nullptr);
  EXPECT_EQ(get(x, 1)[0], 5.0f);
}

TEST_F(CublasTest, HostileArguments) {
  api::cublasSgemm_v2_Args g{};
  g.handle = 0x7010;  // never created
  EXPECT_EQ(c.call<api::Call::cublasSgemm_v2>(g), kNotInitialized);
  // A device pointer that is not the client's.
  const uint64_t m = floats({1, 2, 3, 4});
  g.handle = handle;
  g.m = g.n = g.k = 1;
  g.lda = g.ldb = g.ldc = 1;
  g.A = m, g.B = 0xdead0000, g.C = m;
  EXPECT_EQ(c.call<api::Call::cublasSgemm_v2>(g), kInvalidValue);
  // Arguments of the wrong size (a tail after a call that has none).
  const std::byte junk[8]{};
  EXPECT_LT(c.call<api::Call::cublasSgemm_v2>(g, nullptr, junk), 0);
  // A handle that is not new, or below the guest's first.
  EXPECT_LT(c.call<api::Call::cublasCreate_v2>({handle}), 0);
  EXPECT_LT(c.call<api::Call::cublasCreate_v2>({1}), 0);
  // An entry point the host's library lacks (the fake has no Dgemm).
  api::cublasDgemm_v2_Args dg{};
  dg.handle = handle;
  EXPECT_EQ(c.call<api::Call::cublasDgemm_v2>(dg), kNotSupported);
  // The stub keeps serving.
  g.B = m;
  EXPECT_EQ(c.call<api::Call::cublasSgemm_v2>(g), 0);
  // Destroyed: the handle is gone.
  EXPECT_EQ(c.call<api::Call::cublasDestroy_v2>({handle}), 0);
  EXPECT_EQ(c.call<api::Call::cublasSgemm_v2>(g), kNotInitialized);
  EXPECT_EQ(c.call<api::Call::cublasDestroy_v2>({handle}), kNotInitialized);
}

TEST(CublasTeardown, TheClientsHandlesGoWithIt) {
  Stub stub;
  {
    Client c{stub};
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({0x7000}), 0);
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({0x7010}), 0);
    EXPECT_EQ(tst::fake_live_cublas_handles(), 2u);
  }
  // The slot closes when the client goes; the session releases what it held.
  for (int i = 0; i < 200 && tst::fake_live_cublas_handles() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(tst::fake_live_cublas_handles(), 0u);
}


// A GEMM runs kernels: fair sharing counts it as GPU work of the VM (kLaunches), as it counts
// a kernel launch. Before, a VM whose work was all cuBLAS was never charged GPU time, so it was
// never held back for its peers.
TEST(CublasFairShare, AGemmIsTheVmsGpuTime) {
  char dir[] = "/tmp/vmcuda-cublas-fair-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  struct Cleanup {
    const char* dir;
    ~Cleanup() {
      tst::fake_hold_completion(false);
      std::filesystem::remove_all(dir);
    }
  } cleanup{dir};
  StubLimits limits;
  limits.fair_share = std::make_shared<FairShare>(dir, "vm-a", 1);
  {
    Stub stub(limits);
    Client c(stub);
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({0x7000}), 0);
    const uint64_t m = c.malloc(4096);
    api::cublasSgemm_v2_Args g{};
    g.handle = 0x7000;
    g.m = g.n = g.k = 2;
    const float one = 1.0f, zero = 0.0f;
    std::memcpy(g.alpha, &one, sizeof one);
    std::memcpy(g.beta, &zero, sizeof zero);
    g.A = g.B = g.C = m;
    g.lda = g.ldb = g.ldc = 2;
    tst::fake_hold_completion(true);  // the GEMM stays on the GPU until a synchronize
    ASSERT_EQ(c.call<api::Call::cublasSgemm_v2>(g), 0);
    uint64_t busy = 0;
    for (int i = 0; i < 200 && busy == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      busy = limits.fair_share->usage({0})[0].busy_ns;
    }
    EXPECT_GT(busy, 0u) << "the GEMM in flight was charged no GPU time";
    tst::fake_hold_completion(false);
    EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  }
}

}  // namespace
}  // namespace vmcuda::host::test
