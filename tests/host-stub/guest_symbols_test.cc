// guest-lib's module variables, pitched memory and 2D copies, pointer attributes, function
// attributes and occupancy end to end: the real guest code (symbol.cc, memory_2d.cc,
// memory.cc, function.cc, host_objects.cc, module.cc, launch.cc, remote.cc) against
// vmcuda-stub in this process, on the test executor, over the local transport. A module is
// registered as nvcc's host code registers one; the driver's entry points are counted, to
// check that what the host answered once is answered locally afterwards. The process has
// one connection, so the tests share one client and one stub (and the guest's tables: each
// test measures what its own calls add).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include "guest-lib/fatbin_builder.h"
#include "host-stub/guest_stub_env.h"
#include "knobs.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace api = vmcuda::api;
namespace host = vmcuda::host;
namespace knobs = vmcuda::guest::knobs;
namespace tst = vmcuda::testing;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

// ---- the driver's entry points, counted
host::DriverApi g_fake;  // the executor's own
std::atomic<int> n_module_load{0}, n_get_global{0}, n_func_get_attribute{0}, n_func_set_attribute{0},
    n_occupancy{0};
host::CUresult count_module_load(host::CUmodule* m, const void* image) {
  ++n_module_load;
  return g_fake.cuModuleLoadData(m, image);
}
host::CUresult count_get_global(host::CUdeviceptr* p, size_t* b, host::CUmodule m, const char* name) {
  ++n_get_global;
  return g_fake.cuModuleGetGlobal_v2(p, b, m, name);
}
host::CUresult count_func_get_attribute(int* v, int attr, host::CUfunction f) {
  ++n_func_get_attribute;
  return g_fake.cuFuncGetAttribute(v, attr, f);
}
host::CUresult count_func_set_attribute(host::CUfunction f, int attr, int v) {
  ++n_func_set_attribute;
  return g_fake.cuFuncSetAttribute(f, attr, v);
}
host::CUresult count_occupancy(int* n, host::CUfunction f, int b, size_t s) {
  ++n_occupancy;
  return g_fake.cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, b, s);
}
host::CUresult count_occupancy_flags(int* n, host::CUfunction f, int b, size_t s, unsigned flags) {
  ++n_occupancy;
  return g_fake.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, b, s, flags);
}

host::test::Stub*& g_stub = host::test::g_guest_stub;

// One stub for the whole program, its driver table counting the calls guest-lib should
// make once.
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new host::test::GuestStubEnvironment(
    {0}, [](host::DriverApi& api) {
      g_fake = api;
      api.cuModuleLoadData = count_module_load;
      api.cuModuleGetGlobal_v2 = count_get_global;
      api.cuFuncGetAttribute = count_func_get_attribute;
      api.cuFuncSetAttribute = count_func_set_attribute;
      api.cuOccupancyMaxActiveBlocksPerMultiprocessor = count_occupancy;
      api.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = count_occupancy_flags;
    }));

// ---- a module as nvcc's host code registers it: one kernel (the executor's add_one), a
// __device__ variable and a __constant__ one the executor knows, and one it does not.
char add_one_stub;                      // the kernel's host stub (only its address matters)
unsigned char test_global[256];         // the host shadows
int d_table[8];
int not_in_module;
int not_a_symbol;

std::vector<uint64_t> make_fatbin() {
  vmcuda_test::FatbinBuilder b;
  b.entry(vmcuda_test::EntrySpec{});
  return b.build();
}
struct Image {
  std::vector<uint64_t> fatbin = make_fatbin();
  vmcuda_test::Wrapper wrapper;
  Image() { wrapper.data = reinterpret_cast<const unsigned long long*>(fatbin.data()); }
};

void** register_module(Image& image, void* global_shadow, bool with_kernel) {
  void** h = __cudaRegisterFatBinary(&image.wrapper);
  if (with_kernel)
    __cudaRegisterFunction(h, &add_one_stub, const_cast<char*>(tst::kAddOneKernel), tst::kAddOneKernel, -1, nullptr,
                           nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterVar(h, static_cast<char*>(global_shadow), const_cast<char*>(tst::kTestGlobal), tst::kTestGlobal, 0,
                    tst::kTestGlobalBytes, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
  return h;
}

class Guest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static Image image;
    static bool done = false;
    if (done) return;
    done = true;
    void** h = register_module(image, test_global, true);
    __cudaRegisterVar(h, reinterpret_cast<char*>(d_table), const_cast<char*>("d_table"), "d_table", 0, sizeof d_table,
                      1, 0);
    __cudaRegisterVar(h, reinterpret_cast<char*>(&not_in_module), const_cast<char*>("not_in_module"), "not_in_module",
                      0, sizeof not_in_module, 0, 0);
  }
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // nothing left over
    (void)last_error();
  }
};
using GuestSymbols = Guest;
using GuestPitch = Guest;
using GuestFunctions = Guest;
using GuestPointers = Guest;

Remote& remote() {
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);
  EXPECT_NE(r, nullptr) << "no stub: error " << err;
  return *r;
}
uint32_t queued_frames() {
  auto& r = remote();
  auto lock = r.lock();
  return r.slot().batch().frame_count();
}

// ---------------------------------------------------------------- module variables

TEST_F(GuestSymbols, ResolvedOnceThenAnsweredLocally) {
  size_t size = 0;
  ASSERT_EQ(cudaGetSymbolSize(&size, test_global), cudaSuccess);
  EXPECT_EQ(size, tst::kTestGlobalBytes);
  const int gets = n_get_global, loads = n_module_load;
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&a, test_global), cudaSuccess);
  ASSERT_EQ(cudaGetSymbolAddress(&b, test_global), cudaSuccess);
  EXPECT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  ASSERT_EQ(cudaGetSymbolSize(&size, test_global), cudaSuccess);
  // Copies through the symbol and through its address.
  unsigned char buf[256], back[256];
  ASSERT_EQ(cudaMemcpyFromSymbol(buf, test_global, sizeof buf), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back, a, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(buf, back, sizeof buf), 0);
  const int v[4] = {10, 20, 30, 40};
  ASSERT_EQ(cudaMemcpyToSymbol(test_global, v, sizeof v, 32), cudaSuccess);
  int w[4] = {0};
  ASSERT_EQ(cudaMemcpyFromSymbol(w, test_global, sizeof w, 32), cudaSuccess);
  EXPECT_EQ(std::memcmp(v, w, sizeof v), 0);
  // A kernel of the same module, given the variable's address: the module is not shipped again.
  ASSERT_EQ(cudaMemset(a, 0, 64 * sizeof(int)), cudaSuccess);
  int n = 64;
  void* args[] = {&a, &n};
  ASSERT_EQ(cudaLaunchKernel(&add_one_stub, dim3(1), dim3(64), args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromSymbol(w, test_global, sizeof w), cudaSuccess);
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(w[3], 1);
  EXPECT_EQ(n_get_global, gets);
  EXPECT_EQ(n_module_load, loads);
  // The __constant__ one: its own variable, the same module.
  ASSERT_EQ(cudaGetSymbolSize(&size, d_table), cudaSuccess);
  EXPECT_EQ(size, sizeof d_table);
  int t[8];
  ASSERT_EQ(cudaMemcpyFromSymbol(t, d_table, sizeof t), cudaSuccess);
  EXPECT_EQ(t[0], 1);
  EXPECT_EQ(t[7], 8);
  EXPECT_EQ(n_module_load, loads);
}

TEST_F(GuestSymbols, TheVariablesStorageIsDeviceMemoryButNotTheAppsToFree) {
  void* a = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&a, test_global), cudaSuccess);
  cudaPointerAttributes pa;
  ASSERT_EQ(cudaPointerGetAttributes(&pa, static_cast<char*>(a) + 8), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeDevice);
  EXPECT_EQ(pa.device, 0);
  EXPECT_EQ(pa.devicePointer, static_cast<char*>(a) + 8);
  EXPECT_EQ(pa.hostPointer, nullptr);
  EXPECT_EQ(cudaFree(a), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  unsigned char buf[16];
  EXPECT_EQ(cudaMemcpy(buf, a, sizeof buf, cudaMemcpyDefault), cudaSuccess);  // still there
  // Every copy kind a symbol copy allows, and streams.
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  const std::vector<unsigned char> pattern = [] {
    std::vector<unsigned char> p(256);
    std::iota(p.begin(), p.end(), static_cast<unsigned char>(100));
    return p;
  }();
  ASSERT_EQ(cudaMemcpy(d, pattern.data(), 256, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyToSymbol(test_global, d, 256, 0, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyToSymbol(test_global, pattern.data(), 16, 240, cudaMemcpyDefault), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, 256), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromSymbol(d, test_global, 256, 0, cudaMemcpyDeviceToDevice), cudaSuccess);
  std::vector<unsigned char> got(256);
  ASSERT_EQ(cudaMemcpyFromSymbol(got.data(), test_global, 256, 0, cudaMemcpyDefault), cudaSuccess);
  for (int i = 0; i < 240; ++i) EXPECT_EQ(got[i], pattern[i]) << i;
  for (int i = 240; i < 256; ++i) EXPECT_EQ(got[i], pattern[i - 240]) << i;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  unsigned char* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 256), cudaSuccess);
  std::memset(pinned, 0, 256);
  const unsigned char x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_EQ(cudaMemcpyToSymbolAsync(test_global, x, sizeof x, 8, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromSymbolAsync(pinned, test_global, 16, 0, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyToSymbolAsync_ptsz(test_global, x, 4, 0, cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromSymbolAsync_ptsz(pinned + 16, test_global, 4, 0, cudaMemcpyDeviceToHost, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(std::memcmp(pinned + 8, x, 8), 0);
  EXPECT_EQ(std::memcmp(pinned + 16, x, 4), 0);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(GuestSymbols, ErrorsAtOnce) {
  unsigned char h[512] = {0};
  void* p = nullptr;
  size_t size = 0;
  // Not a symbol, or registered but absent from the module's code.
  for (const void* bad : {static_cast<const void*>(&not_a_symbol), static_cast<const void*>(&not_in_module),
                          static_cast<const void*>(nullptr)}) {
    EXPECT_EQ(cudaGetSymbolAddress(&p, bad), cudaErrorInvalidSymbol);
    EXPECT_EQ(cudaGetSymbolSize(&size, bad), cudaErrorInvalidSymbol);
    EXPECT_EQ(cudaMemcpyToSymbol(bad, h, 4, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);
    EXPECT_EQ(cudaMemcpyFromSymbol(h, bad, 4, 0, cudaMemcpyDeviceToHost), cudaErrorInvalidSymbol);
    EXPECT_EQ(last_error(), cudaErrorInvalidSymbol);
    EXPECT_EQ(last_error(), cudaSuccess);
  }
  // Past the variable's end.
  EXPECT_EQ(cudaMemcpyToSymbol(test_global, h, 257, 0, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToSymbol(test_global, h, 1, 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyFromSymbol(h, test_global, 8, ~size_t{0}, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToSymbolAsync(test_global, h, 16, 250, cudaMemcpyHostToDevice, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToSymbol(test_global, h, 0, 256, cudaMemcpyHostToDevice), cudaSuccess);  // nothing, at the end
  // Directions a symbol copy does not allow.
  for (auto kind : {cudaMemcpyDeviceToHost, cudaMemcpyHostToHost, static_cast<cudaMemcpyKind>(7)})
    EXPECT_EQ(cudaMemcpyToSymbol(test_global, h, 4, 0, kind), cudaErrorInvalidMemcpyDirection);
  for (auto kind : {cudaMemcpyHostToDevice, cudaMemcpyHostToHost, static_cast<cudaMemcpyKind>(5)})
    EXPECT_EQ(cudaMemcpyFromSymbol(h, test_global, 4, 0, kind), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpyFromSymbolAsync(h, test_global, 4, 0, cudaMemcpyHostToDevice, nullptr),
            cudaErrorInvalidMemcpyDirection);
  // Null outputs.
  EXPECT_EQ(cudaGetSymbolAddress(nullptr, test_global), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetSymbolSize(nullptr, test_global), cudaErrorInvalidValue);
  // A device-to-device copy from memory that is not device memory.
  EXPECT_EQ(cudaMemcpyToSymbol(test_global, h, 4, 0, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // nothing bad was queued
}

TEST_F(GuestSymbols, UnregisteringAModuleForgetsWhatTheHostAnswered) {
  static unsigned char shadow[256];
  Image image;
  void** h = register_module(image, shadow, false);
  void* first = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&first, test_global), cudaSuccess);
  const int gets = n_get_global, loads = n_module_load;
  void* a = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&a, shadow), cudaSuccess);
  EXPECT_EQ(n_get_global, gets + 1);
  EXPECT_EQ(n_module_load, loads + 1);  // a module of its own, shipped on first use
  EXPECT_NE(a, first);
  ASSERT_TRUE(vgpu_db::AllocationMap::process().find(reinterpret_cast<uint64_t>(a)));
  __cudaUnregisterFatBinary(h);
  EXPECT_FALSE(vgpu_db::AllocationMap::process().find(reinterpret_cast<uint64_t>(a)));
  EXPECT_EQ(cudaGetSymbolAddress(&a, shadow), cudaErrorInvalidSymbol);
  (void)last_error();
  // Registered again (at the same shadow): asked afresh.
  Image again;
  h = register_module(again, shadow, false);
  ASSERT_EQ(cudaGetSymbolAddress(&a, shadow), cudaSuccess);
  EXPECT_EQ(n_get_global, gets + 2);
  EXPECT_EQ(n_module_load, loads + 2);
  __cudaUnregisterFatBinary(h);
}

// ---------------------------------------------------------------- pitched memory, 2D copies

// Host image of `height` rows of `width` bytes, `pitch` apart: byte (x, y) = x * 7 + y + seed;
// padding `pad`.
std::vector<unsigned char> host_image(size_t pitch, size_t width, size_t height, int seed, unsigned char pad) {
  std::vector<unsigned char> v(pitch * height, pad);
  for (size_t y = 0; y < height; ++y)
    for (size_t x = 0; x < width; ++x) v[y * pitch + x] = static_cast<unsigned char>(x * 7 + y + seed);
  return v;
}

// Host to device (from `src`, pitch spitch) and back (into `dst`, pitch dpitch), through a
// pitched allocation and a device-to-device copy.
void round_trip(unsigned char* src, size_t spitch, unsigned char* dst, size_t dpitch, size_t width, size_t height) {
  void *p = nullptr, *q = nullptr;
  size_t pp = 0, qp = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pp, width, height), cudaSuccess);
  ASSERT_EQ(cudaMallocPitch(&q, &qp, width + 1, height), cudaSuccess);
  EXPECT_GE(pp, width);
  EXPECT_EQ(pp % 512, 0u);
  ASSERT_EQ(cudaMemcpy2D(p, pp, src, spitch, width, height, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2D(q, qp, p, pp, width, height, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2D(dst, dpitch, q, qp, width, height, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaFree(q), cudaSuccess);
}

void check_round_trip(size_t width, size_t height, const char* what) {
  SCOPED_TRACE(what);
  const size_t spitch = width + 24, dpitch = width + 40;
  auto src = host_image(spitch, width, height, 3, 0xa5);
  std::vector<unsigned char> dst(dpitch * height, 0x5a);
  round_trip(src.data(), spitch, dst.data(), dpitch, width, height);
  EXPECT_EQ(dst, host_image(dpitch, width, height, 3, 0x5a));
  // Packed host rows (pitch == width) too.
  auto packed_src = host_image(width, width, height, 4, 0);
  std::vector<unsigned char> packed_dst(width * height, 0);
  round_trip(packed_src.data(), width, packed_dst.data(), width, width, height);
  EXPECT_EQ(packed_dst, packed_src);
}

TEST_F(GuestPitch, EveryPathOfTheHostSide) {
  check_round_trip(100, 30, "inline: packed into the frame and the reply");
  knobs::kInlineCopyBytes.set(0);
  knobs::kInlineReadBytes.set(0);
  check_round_trip(100, 30, "staged: one heap chunk");
  knobs::kCopyChunkBytes.set(64 << 10);
  check_round_trip(1000, 300, "staged: whole rows, several heap chunks");
  check_round_trip(100 << 10, 3, "rows larger than a chunk: one 1D copy a row");
  knobs::kInlineCopyBytes.set(knobs::kInlineCopyBytes.default_value());
  knobs::kInlineReadBytes.set(knobs::kInlineReadBytes.default_value());
  knobs::kCopyChunkBytes.set(knobs::kCopyChunkBytes.default_value());
  // Pinned memory: straight from and into the heap, with the application's pitch.
  const size_t width = 300, height = 40, pitch = 512;
  unsigned char *src = nullptr, *dst = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&src), pitch * height), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&dst), pitch * height), cudaSuccess);
  auto img = host_image(pitch, width, height, 9, 0x11);
  std::memcpy(src, img.data(), img.size());
  std::memset(dst, 0x11, pitch * height);
  round_trip(src, pitch, dst, pitch, width, height);
  EXPECT_EQ(std::memcmp(dst, img.data(), img.size()), 0);
  // Host to host, and cudaMemcpyDefault finding each side.
  std::vector<unsigned char> hh(pitch * height, 0x11);
  ASSERT_EQ(cudaMemcpy2D(hh.data(), pitch, src, pitch, width, height, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(std::memcmp(hh.data(), img.data(), img.size()), 0);
  ASSERT_EQ(cudaFreeHost(src), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(dst), cudaSuccess);
}

TEST_F(GuestPitch, Memset2DAndDeviceCopiesAreQueued) {
  void* p = nullptr;
  size_t pitch = 0;
  const size_t width = 64, height = 8;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, width, height), cudaSuccess);
  ASSERT_EQ(cudaMemset2D(p, pitch, 0x01, width, height), cudaSuccess);
  const uint32_t before = queued_frames();
  ASSERT_EQ(cudaMemset2D(static_cast<char*>(p) + pitch + 8, pitch, 0x7f, 16, 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2D(static_cast<char*>(p) + 32, pitch, p, pitch, 8, height, cudaMemcpyDeviceToDevice),
            cudaSuccess);
  EXPECT_EQ(queued_frames(), before + 2);
  std::vector<unsigned char> out(width * height);
  ASSERT_EQ(cudaMemcpy2D(out.data(), width, p, pitch, width, height, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t y = 0; y < height; ++y)
    for (size_t x = 0; x < width; ++x) {
      const size_t src_x = x >= 32 && x < 40 ? x - 32 : x;  // the copied columns
      const bool set = y >= 1 && y < 3 && src_x >= 8 && src_x < 24;
      EXPECT_EQ(out[y * width + x], set ? 0x7f : 0x01) << x << "," << y;
    }
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(GuestPitch, ErrorsAtOnce) {
  void* p = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, 100, 10), cudaSuccess);
  unsigned char h[4096];
  EXPECT_EQ(cudaMemcpy2D(p, 64, h, 128, 100, 2, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2D(h, 128, p, 64, 100, 2, cudaMemcpyDeviceToHost), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2D(h, 128, p, pitch, 100, 2, static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy2D(p, pitch, h, 100, 100, 11, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // one row past
  EXPECT_EQ(cudaMemcpy2D(h, 100, h + 1000, 100, 100, 2, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // not device
  EXPECT_EQ(cudaMemcpy2D(p, pitch, nullptr, 100, 100, 2, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2D(p, pitch, h, 100, 100, 0, cudaMemcpyHostToDevice), cudaSuccess);  // nothing
  EXPECT_EQ(cudaMemset2D(p, pitch, 0, 100, 11), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2D(p, 64, 0, 100, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2D(h, 128, 0, 100, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocPitch(&p, nullptr, 100, 10), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocPitch(nullptr, &pitch, 100, 10), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  void* z = &pitch;
  size_t zp = 7;
  EXPECT_EQ(cudaMallocPitch(&z, &zp, 0, 10), cudaSuccess);
  EXPECT_EQ(z, nullptr);
  EXPECT_EQ(zp, 0u);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // nothing bad was queued
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// ---------------------------------------------------------------- function attributes

TEST_F(GuestFunctions, AttributesAndOccupancyAreAskedOnce) {
  cudaFuncAttributes fa;
  std::memset(&fa, 0x5a, sizeof fa);
  ASSERT_EQ(cudaFuncGetAttributes(&fa, &add_one_stub), cudaSuccess);
  const int asked = n_func_get_attribute;
  EXPECT_EQ(fa.maxThreadsPerBlock, 1024);
  EXPECT_EQ(fa.sharedSizeBytes, 0u);
  EXPECT_EQ(fa.numRegs, 16);
  EXPECT_EQ(fa.ptxVersion, 90);
  EXPECT_EQ(fa.binaryVersion, 90);
  EXPECT_EQ(fa.reserved[0], 0);
  // A cudaKernel_t names the same kernel.
  cudaKernel_t k = nullptr;
  ASSERT_EQ(cudaGetKernel(&k, &add_one_stub), cudaSuccess);
  cudaFuncAttributes fb;
  ASSERT_EQ(cudaFuncGetAttributes(&fb, k), cudaSuccess);
  EXPECT_EQ(std::memcmp(&fa, &fb, sizeof fa), 0);
  EXPECT_EQ(n_func_get_attribute, asked);
  int blocks = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &add_one_stub, 128, 0), cudaSuccess);
  EXPECT_EQ(blocks, 16);
  const int occ = n_occupancy;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &add_one_stub, 128, 0), cudaSuccess);
  EXPECT_EQ(n_occupancy, occ);
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, &add_one_stub, 128, 0,
                                                                   cudaOccupancyDisableCachingOverride),
            cudaSuccess);
  EXPECT_EQ(n_occupancy, occ + 1);  // other flags: another question
}

TEST_F(GuestFunctions, SetAttributeIsCheckedHereAndQueued) {
  cudaFuncAttributes fa;
  ASSERT_EQ(cudaFuncGetAttributes(&fa, &add_one_stub), cudaSuccess);
  int blocks = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &add_one_stub, 256, 60 << 10), cudaSuccess);
  EXPECT_EQ(blocks, 0);  // more than the kernel may use yet
  const int asked = n_func_get_attribute, sets = n_func_set_attribute, occ = n_occupancy;
  const uint32_t before = queued_frames();
  ASSERT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10), cudaSuccess);
  EXPECT_EQ(queued_frames(), before + 1);
  EXPECT_EQ(n_func_set_attribute, sets);  // not sent yet
  ASSERT_EQ(cudaFuncGetAttributes(&fa, &add_one_stub), cudaSuccess);
  EXPECT_EQ(fa.maxDynamicSharedSizeBytes, 100 << 10);  // known here at once
  EXPECT_EQ(n_func_get_attribute, asked);
  // The occupancy answers are asked again (the attribute changes them).
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &add_one_stub, 256, 60 << 10), cudaSuccess);
  EXPECT_EQ(blocks, 3);
  EXPECT_EQ(n_occupancy, occ + 1);
  EXPECT_EQ(n_func_set_attribute, sets + 1);  // went with the occupancy question
  // A launch that needs it.
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  int n = 4;
  void* args[] = {&d, &n};
  ASSERT_EQ(cudaLaunchKernel(&add_one_stub, dim3(1), dim3(4), args, 100 << 10, nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  // Refused at once: values the driver refuses, attributes that are not settable, no kernel.
  const int optin = 232448;  // the executor's opt-in maximum
  EXPECT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeMaxDynamicSharedMemorySize, -1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributePreferredSharedMemoryCarveout, 101),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(&add_one_stub, static_cast<cudaFuncAttribute>(3), 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeMax, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(&not_a_symbol, cudaFuncAttributeMaxDynamicSharedMemorySize, 0),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(last_error(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFuncGetAttributes(&fa, &not_a_symbol), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFuncGetAttributes(nullptr, &add_one_stub), cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &not_a_symbol, 256, 0),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, &add_one_stub, 256, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, &add_one_stub, 256, 0, 2),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncGetAttributes(&fa, &add_one_stub), cudaSuccess);
  EXPECT_EQ(fa.maxDynamicSharedSizeBytes, 100 << 10);  // the refused ones changed nothing
  // The cluster attributes go to the driver; what it says then comes from it.
  ASSERT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeRequiredClusterWidth, 2), cudaSuccess);
  ASSERT_EQ(cudaFuncGetAttributes(&fa, &add_one_stub), cudaSuccess);
  EXPECT_EQ(fa.requiredClusterWidth, 2);
  // Back to the default, for the other tests.
  ASSERT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 << 10), cudaSuccess);
  ASSERT_EQ(cudaFuncSetAttribute(&add_one_stub, cudaFuncAttributeRequiredClusterWidth, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// ---------------------------------------------------------------- pointer attributes

TEST_F(GuestPointers, AnsweredFromTheAllocationMap) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  cudaPointerAttributes pa;
  std::memset(&pa, 0x5a, sizeof pa);
  ASSERT_EQ(cudaPointerGetAttributes(&pa, static_cast<char*>(d) + 4095), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeDevice);
  EXPECT_EQ(pa.device, 0);
  EXPECT_EQ(pa.devicePointer, static_cast<char*>(d) + 4095);
  EXPECT_EQ(pa.hostPointer, nullptr);
  EXPECT_EQ(pa.reserved[7], 0);
  ASSERT_EQ(cudaPointerGetAttributes(&pa, static_cast<char*>(d) + 4096), cudaSuccess);  // one past: not it
  EXPECT_EQ(pa.type, cudaMemoryTypeUnregistered);
  void* h = nullptr;
  ASSERT_EQ(cudaMallocHost(&h, 100), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&pa, static_cast<char*>(h) + 10), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeHost);
  EXPECT_EQ(pa.device, 0);
  EXPECT_EQ(pa.hostPointer, static_cast<char*>(h) + 10);
  // Mapped into the device's address space (the shared heap): the same pointer when guest
  // and host map the heap at one address, as UVA reports it natively; here, with both in one
  // process, the host's, as cudaHostGetDevicePointer gives it.
  void* dp = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&dp, h, 0), cudaSuccess);
  EXPECT_NE(dp, nullptr);
  EXPECT_EQ(pa.devicePointer, static_cast<char*>(dp) + 10);
  int local = 0;
  ASSERT_EQ(cudaPointerGetAttributes(&pa, &local), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(pa.device, cudaInvalidDeviceId);
  EXPECT_EQ(pa.devicePointer, nullptr);
  EXPECT_EQ(pa.hostPointer, &local);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, d), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeHost(h), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&pa, d), cudaSuccess);  // freed
  EXPECT_EQ(pa.type, cudaMemoryTypeUnregistered);
}

}  // namespace
