// 2D async copies and memsets and 3D pitched memory: the real guest code (memory_2d.cc,
// memory_3d.cc, memory_async.cc, stream.cc, remote.cc's lazy queue) against vmcuda-stub in
// this process, on the test executor, over the local transport; and the new wire calls
// (calls.def 0x1127-0x112c) straight at the stub from a second client, as a hostile guest
// would send them. One stub for the program (a second would reset the executor's memory).
// Error codes expected here are NVIDIA's, as tests/cuda/memory_2d_3d.cu's probes saw them
// on the H200.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <vector>

#include "host-stub/guest_stub_env.h"
#include "knobs.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace api = vmcuda::api;
namespace knobs = vmcuda::guest::knobs;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

vmcuda::host::test::Stub*& g_stub = vmcuda::host::test::g_guest_stub;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new vmcuda::host::test::GuestStubEnvironment);

uint32_t queued_frames() {
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);
  EXPECT_NE(r, nullptr);
  auto lock = r->lock();
  return r->slot().batch().frame_count();
}

// Device memory the guest believes it has but the host never gave it: the guest's checks
// pass, the host's refuse.
struct GhostAllocation {
  static constexpr uint64_t kBase = 0xdead0000;
  GhostAllocation() { vgpu_db::AllocationMap::process().add({kBase, 1 << 16, vgpu_db::Allocation::kDevice, 0, 0}); }
  ~GhostAllocation() { vgpu_db::AllocationMap::process().remove(kBase, vgpu_db::Allocation::kDevice); }
  void* ptr() const { return reinterpret_cast<void*>(kBase); }
};

unsigned char pat(size_t x, size_t y, size_t z, unsigned seed) {
  return static_cast<unsigned char>((x * 7 + y * 13 + z * 29 + seed * 31) & 0xff);
}
void fill(unsigned char* p, size_t pitch, size_t rows, unsigned seed) {
  for (size_t y = 0; y < rows; ++y)
    for (size_t x = 0; x < pitch; ++x) p[y * pitch + x] = pat(x, y, 0, seed);
}
// Whether the `width` bytes of each row agree.
bool same_2d(const unsigned char* a, size_t ap, const unsigned char* b, size_t bp, size_t width, size_t height) {
  for (size_t y = 0; y < height; ++y)
    if (std::memcmp(a + y * ap, b + y * bp, width) != 0) return false;
  return true;
}

class Guest2DAsync : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    (void)last_error();
  }
  void TearDown() override {
    knobs::kInlineCopyBytes.set(knobs::kInlineCopyBytes.default_value());
    knobs::kInlineReadBytes.set(knobs::kInlineReadBytes.default_value());
    knobs::kCopyChunkBytes.set(knobs::kCopyChunkBytes.default_value());
  }
};
using Guest3D = Guest2DAsync;

// HtoD, DtoD, DtoH with cudaMemcpy2DAsync on a stream; pageable results are there when the
// call returns, pinned ones once the stream is synchronized.
void async_round_trip(size_t width, size_t height, bool pinned) {
  const size_t spitch = width + 24, dpitch = width + 40;
  std::vector<unsigned char> src_v, dst_v;
  unsigned char *src, *dst;
  if (pinned) {
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&src), spitch * height), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&dst), dpitch * height), cudaSuccess);
  } else {
    src_v.resize(spitch * height);
    dst_v.resize(dpitch * height);
    src = src_v.data();
    dst = dst_v.data();
  }
  fill(src, spitch, height, 1);
  std::memset(dst, 0x5a, dpitch * height);
  void *a = nullptr, *b = nullptr;
  size_t ap = 0, bp = 0;
  ASSERT_EQ(cudaMallocPitch(&a, &ap, width, height), cudaSuccess);
  ASSERT_EQ(cudaMallocPitch(&b, &bp, width + 1, height), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(a, ap, src, spitch, width, height, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(b, bp, a, ap, width, height, cudaMemcpyDeviceToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(dst, dpitch, b, bp, width, height, cudaMemcpyDeviceToHost, s), cudaSuccess);
  if (pinned) {
    EXPECT_GE(queued_frames(), 3u);  // all three queued: nothing has run yet
    EXPECT_FALSE(same_2d(dst, dpitch, src, spitch, width, height));
  } else {
    EXPECT_TRUE(same_2d(dst, dpitch, src, spitch, width, height));
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(same_2d(dst, dpitch, src, spitch, width, height));
  for (size_t y = 0; y < height; ++y)
    for (size_t x = width; x < dpitch; ++x) ASSERT_EQ(dst[y * dpitch + x], 0x5a) << "padding written";
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
  if (pinned) {
    ASSERT_EQ(cudaFreeHost(src), cudaSuccess);
    ASSERT_EQ(cudaFreeHost(dst), cudaSuccess);
  }
}

TEST_F(Guest2DAsync, EveryPathOfTheHostSide) {
  {
    SCOPED_TRACE("inline: packed into a queued frame, and the reply");
    async_round_trip(100, 30, false);
  }
  {
    SCOPED_TRACE("pinned: queued, straight from and into the heap");
    async_round_trip(300, 40, true);
  }
  knobs::kInlineCopyBytes.set(0);
  knobs::kInlineReadBytes.set(0);
  {
    SCOPED_TRACE("staged: one heap chunk");
    async_round_trip(100, 30, false);
  }
  knobs::kCopyChunkBytes.set(64 << 10);
  {
    SCOPED_TRACE("staged: whole rows, several heap chunks");
    async_round_trip(1000, 300, false);
  }
  {
    SCOPED_TRACE("rows larger than a chunk: one 1D async copy a row");
    async_round_trip(100 << 10, 3, false);
  }
}

TEST_F(Guest2DAsync, SmallHostToDeviceAndDeviceSidesAreQueued) {
  void* p = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, 64, 8), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  std::vector<unsigned char> h(64 * 8, 3);
  const uint32_t before = queued_frames();
  ASSERT_EQ(cudaMemset2DAsync(p, pitch, 0x01, 64, 8, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(p, pitch, h.data(), 64, 16, 4, cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(static_cast<char*>(p) + 32, pitch, p, pitch, 8, 8, cudaMemcpyDeviceToDevice, nullptr),
            cudaSuccess);
  EXPECT_EQ(queued_frames(), before + 3);
  h.assign(h.size(), 0);  // the inline copy holds its own bytes
  std::vector<unsigned char> out(64 * 8);
  ASSERT_EQ(cudaMemcpy2DAsync(out.data(), 64, p, pitch, 64, 8, cudaMemcpyDefault, nullptr), cudaSuccess);
  EXPECT_EQ(queued_frames(), 0u);  // the read sent them
  for (size_t y = 0; y < 8; ++y)
    for (size_t x = 0; x < 64; ++x) {
      const size_t sx = x >= 32 && x < 40 ? x - 32 : x;  // the copied columns
      EXPECT_EQ(out[y * 64 + x], sx < 16 && y < 4 ? 3 : 1) << x << "," << y;
    }
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(Guest2DAsync, HostToHostRunsAfterTheStream) {
  std::vector<unsigned char> a(50 * 20), b(64 * 20, 0x33);
  fill(a.data(), 50, 20, 3);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DAsync(b.data(), 64, a.data(), 50, 40, 20, cudaMemcpyHostToHost, s), cudaSuccess);
  EXPECT_TRUE(same_2d(b.data(), 64, a.data(), 50, 40, 20));
  EXPECT_EQ(b[40], 0x33);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(Guest2DAsync, ErrorsAtOnceAsNvidias) {
  void* p = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, 100, 10), cudaSuccess);
  EXPECT_EQ(pitch, 512u);
  unsigned char h[8192];
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaMemcpy2DAsync(p, 64, h, 128, 100, 2, cudaMemcpyHostToDevice, s), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2DAsync(h, 128, p, 64, 100, 2, cudaMemcpyDeviceToHost, s), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2DAsync(h, 128, p, pitch, 100, 2, static_cast<cudaMemcpyKind>(7), s),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy2DAsync(h, 128, p, pitch, 100, 0, static_cast<cudaMemcpyKind>(7), s), cudaSuccess);
  EXPECT_EQ(cudaMemcpy2DAsync(p, pitch, h, 100, 100, 11, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(p, pitch, nullptr, 100, 100, 2, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(h, 128, h + 4096, 128, 100, 2, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(p, pitch, h, 128, 100, 2, cudaMemcpyDeviceToDevice, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(p, 64, 0, 100, 2, s), cudaErrorInvalidValue);  // not a pitch error, for a memset
  EXPECT_EQ(cudaMemset2DAsync(p, pitch, 0, 100, 11, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(h, 128, 0, 100, 2, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(p, pitch, 0, 100, 0, s), cudaSuccess);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  // A destroyed stream: the stream's error, at once.
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaMemset2DAsync(p, pitch, 0, 100, 2, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemcpy2DAsync(p, pitch, h, 128, 100, 2, cudaMemcpyHostToDevice, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // nothing bad was queued
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(Guest2DAsync, TheHostRefusesWhatItNeverGave) {
  GhostAllocation ghost;
  // Queued: the host's refusal comes with the next synchronizing call.
  EXPECT_EQ(cudaMemset2DAsync(ghost.ptr(), 256, 0, 100, 4, nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaErrorInvalidValue);
  unsigned char h[400];
  // A pageable read is a round trip: refused at once.
  EXPECT_EQ(cudaMemcpy2DAsync(h, 100, ghost.ptr(), 256, 100, 4, cudaMemcpyDeviceToHost, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

// ---------------------------------------------------------------- 3D

cudaMemcpy3DParms parms(cudaPitchedPtr dst, cudaPos dpos, cudaPitchedPtr src, cudaPos spos, cudaExtent e,
                        cudaMemcpyKind kind) {
  cudaMemcpy3DParms p{};
  p.dstPtr = dst;
  p.dstPos = dpos;
  p.srcPtr = src;
  p.srcPos = spos;
  p.extent = e;
  p.kind = kind;
  return p;
}
cudaError_t copy3d(const cudaMemcpy3DParms& p) { return cudaMemcpy3D(&p); }
cudaError_t copy3d_async(const cudaMemcpy3DParms& p, cudaStream_t s) { return cudaMemcpy3DAsync(&p, s); }
void model_copy3d(unsigned char* dst, size_t dpitch, size_t dys, cudaPos dpos, const unsigned char* src, size_t spitch,
                  size_t sys, cudaPos spos, cudaExtent e) {
  for (size_t z = 0; z < e.depth; ++z)
    for (size_t y = 0; y < e.height; ++y)
      std::memmove(dst + ((dpos.z + z) * dys + dpos.y + y) * dpitch + dpos.x,
                   src + ((spos.z + z) * sys + spos.y + y) * spitch + spos.x, e.width);
}

TEST_F(Guest3D, Malloc3DIsPitchedRowsOfEverySlice) {
  cudaPitchedPtr v{};
  ASSERT_EQ(cudaMalloc3D(&v, {100, 10, 3}), cudaSuccess);
  EXPECT_NE(v.ptr, nullptr);
  EXPECT_EQ(v.pitch, 512u);
  EXPECT_EQ(v.xsize, 100u);
  EXPECT_EQ(v.ysize, 10u);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, static_cast<char*>(v.ptr) + 512 * 29 + 99), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);  // the last byte of the last slice is in it
  ASSERT_EQ(cudaFree(v.ptr), cudaSuccess);
  // Nothing to allocate: NULL, pitch 0, the extent's sizes.
  cudaPitchedPtr z{&v, 9, 9, 9};
  ASSERT_EQ(cudaMalloc3D(&z, {0, 4, 4}), cudaSuccess);
  EXPECT_EQ(z.ptr, nullptr);
  EXPECT_EQ(z.pitch, 0u);
  EXPECT_EQ(z.xsize, 0u);
  EXPECT_EQ(z.ysize, 4u);
  ASSERT_EQ(cudaMalloc3D(&z, {100, 4, 0}), cudaSuccess);
  EXPECT_EQ(z.ptr, nullptr);
  EXPECT_EQ(z.xsize, 100u);
  EXPECT_EQ(cudaMalloc3D(nullptr, {100, 4, 4}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc3D(&z, {100, ~size_t{0} / 2, 4}), cudaErrorMemoryAllocation);
}

TEST_F(Guest3D, CopiesAndMemsetsWithPositionsMatchAModel) {
  const cudaExtent ea{300, 20, 5}, eb{290, 18, 6};
  cudaPitchedPtr va{}, vb{};
  ASSERT_EQ(cudaMalloc3D(&va, ea), cudaSuccess);
  ASSERT_EQ(cudaMalloc3D(&vb, eb), cudaSuccess);
  // Models of both volumes, pitch for pitch: new memory is zeros on the executor, and a
  // memset of the xsize bytes of each row leaves the rest of the pitch alone.
  std::vector<unsigned char> ma(va.pitch * va.ysize * ea.depth, 0), mb(vb.pitch * vb.ysize * eb.depth, 0);
  for (size_t r = 0; r < va.ysize * ea.depth; ++r) std::memset(&ma[r * va.pitch], 0x11, ea.width);
  for (size_t r = 0; r < vb.ysize * eb.depth; ++r) std::memset(&mb[r * vb.pitch], 0x22, eb.width);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemset3D(va, 0x11, ea), cudaSuccess);
  ASSERT_EQ(cudaMemset3DAsync(vb, 0x22, eb, s), cudaSuccess);
  // A sub-volume memset: one queued 2D memset per slice.
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaPitchedPtr sub = va;
  sub.ptr = static_cast<char*>(va.ptr) + (1 * va.ysize + 2) * va.pitch + 3;
  ASSERT_EQ(cudaMemset3DAsync(sub, 0x99, {150, 10, 3}, s), cudaSuccess);
  EXPECT_EQ(queued_frames(), 3u);
  for (size_t z = 0; z < 3; ++z)
    for (size_t y = 0; y < 10; ++y) std::memset(&ma[((1 + z) * va.ysize + 2 + y) * va.pitch + 3], 0x99, 150);
  // Host to device at positions, from a pageable host volume with its own pitch and ysize.
  const size_t hp = 313, hys = 23, hd = 4;
  std::vector<unsigned char> host(hp * hys * hd);
  fill(host.data(), hp, hys * hd, 4);
  {
    const cudaPos sp{5, 1, 1}, dp{7, 3, 2};
    const cudaExtent e{280, 15, 3};
    ASSERT_EQ(copy3d_async(parms(va, dp, {host.data(), hp, 300, hys}, sp, e, cudaMemcpyHostToDevice), s),
              cudaSuccess);
    model_copy3d(ma.data(), va.pitch, va.ysize, dp, host.data(), hp, hys, sp, e);
  }
  // Device to device, a window.
  {
    const cudaPos sp{10, 4, 0}, dp{2, 1, 3};
    const cudaExtent e{240, 12, 3};
    ASSERT_EQ(copy3d(parms(vb, dp, va, sp, e, cudaMemcpyDeviceToDevice)), cudaSuccess);
    model_copy3d(mb.data(), vb.pitch, vb.ysize, dp, ma.data(), va.pitch, va.ysize, sp, e);
  }
  // Whole slices: one 2D copy of height * depth rows.
  {
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const cudaExtent e{eb.width, eb.height, 2};
    ASSERT_EQ(copy3d_async(parms(vb, {0, 0, 4}, vb, {0, 0, 0}, e, cudaMemcpyDefault), s), cudaSuccess);
    EXPECT_EQ(queued_frames(), 1u);
    model_copy3d(mb.data(), vb.pitch, vb.ysize, {0, 0, 4}, mb.data(), vb.pitch, vb.ysize, {0, 0, 0}, e);
  }
  // Everything back, pageable (synchronous) and pinned (async).
  std::vector<unsigned char> ra(va.pitch * va.ysize * ea.depth);
  ASSERT_EQ(copy3d(parms({ra.data(), va.pitch, 300, va.ysize}, {}, va, {}, {va.pitch, va.ysize, ea.depth},
                                cudaMemcpyDeviceToHost)),
            cudaSuccess);
  EXPECT_EQ(ra, ma);
  unsigned char* rb = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&rb), mb.size()), cudaSuccess);
  ASSERT_EQ(copy3d_async(parms({rb, vb.pitch, 290, vb.ysize}, {}, vb, {}, {vb.pitch, vb.ysize, eb.depth},
                                     cudaMemcpyDefault),
                              s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(std::memcmp(rb, mb.data(), mb.size()), 0);
  // A window into pageable host memory with ysize 0 (one slice needs none).
  std::vector<unsigned char> w(40 * 7, 0), mw(40 * 7, 0);
  ASSERT_EQ(copy3d(parms({w.data(), 40, 40, 0}, {}, va, {260, 13, 4}, {40, 7, 1}, cudaMemcpyDeviceToHost)),
            cudaSuccess);
  model_copy3d(mw.data(), 40, 7, {}, ma.data(), va.pitch, va.ysize, {260, 13, 4}, {40, 7, 1});
  EXPECT_EQ(w, mw);
  ASSERT_EQ(cudaFreeHost(rb), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFree(va.ptr), cudaSuccess);
  ASSERT_EQ(cudaFree(vb.ptr), cudaSuccess);
}

TEST_F(Guest3D, ErrorsAsNvidias) {
  cudaPitchedPtr v{};
  ASSERT_EQ(cudaMalloc3D(&v, {100, 10, 3}), cudaSuccess);
  static unsigned char h[1 << 16];
  const cudaMemcpy3DParms p = parms(v, {}, {h, 128, 100, 10}, {}, {100, 10, 3}, cudaMemcpyHostToDevice);
  EXPECT_EQ(cudaMemcpy3D(&p), cudaSuccess);
  EXPECT_EQ(cudaMemcpy3D(nullptr), cudaErrorInvalidValue);
  auto with = [&](auto change) {
    cudaMemcpy3DParms q = p;
    change(q);
    return cudaMemcpy3D(&q);
  };
  EXPECT_EQ(with([](auto& q) { q.kind = static_cast<cudaMemcpyKind>(7); }), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(with([](auto& q) { q.extent = {0, 10, 3}; }), cudaSuccess);
  EXPECT_EQ(with([](auto& q) { q.extent = {100, 10, 0}; }), cudaSuccess);
  EXPECT_EQ(with([](auto& q) { q.srcPtr.pitch = 64; }), cudaErrorInvalidPitchValue);
  EXPECT_EQ(with([](auto& q) { q.dstPtr.pitch = 64; }), cudaErrorInvalidPitchValue);
  EXPECT_EQ(with([](auto& q) { q.extent.depth = 4; }), cudaErrorInvalidValue);  // one slice past
  EXPECT_EQ(with([](auto& q) { q.srcPtr.ptr = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.extent.height = 11; }), cudaErrorInvalidPitchValue);
  EXPECT_EQ(with([](auto& q) { q.dstPtr.ysize = 5, q.extent = {100, 5, 2}; }), cudaSuccess);
  EXPECT_EQ(with([](auto& q) { q.dstPtr.ysize = 5, q.extent = {100, 6, 1}; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.dstPtr.ysize = 5, q.extent = {100, 6, 2}; }), cudaErrorInvalidPitchValue);
  EXPECT_EQ(with([](auto& q) { q.srcPtr.ysize = 5, q.extent = {100, 6, 1}; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.dstPos = {0, 9, 0}, q.extent = {100, 2, 1}; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.srcPos = {0, 9, 0}, q.extent = {100, 2, 2}; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.srcPtr.ysize = 0, q.dstPtr.ysize = 0, q.extent = {100, 1, 1}; }), cudaSuccess);
  EXPECT_EQ(with([](auto& q) { q.srcPos = {40, 0, 0}; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.dstPos = {420, 0, 0}; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.kind = cudaMemcpyDeviceToHost; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](auto& q) { q.srcPos = {0, 0, ~size_t{0} / 4}; }), cudaErrorInvalidValue);  // overflows
  // Arrays (arrays.cc): one this process never made is an invalid handle; naming an array and
  // a pointer on one side is the API's error.
  auto* array = reinterpret_cast<cudaArray_t>(0x1000);
  EXPECT_EQ(with([&](auto& q) { q.srcPtr = {}, q.srcArray = array; }), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(with([&](auto& q) { q.dstArray = array; }), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy3DAsync(nullptr, nullptr), cudaErrorInvalidValue);
  // Memsets: all value errors.
  EXPECT_EQ(cudaMemset3D({v.ptr, 64, 100, 10}, 0, {100, 2, 2}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D(v, 0, {100, 10, 4}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D(v, 0, {100, 10, 0}), cudaSuccess);
  EXPECT_EQ(cudaMemset3D({nullptr, v.pitch, 100, 10}, 0, {100, 2, 2}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D(v, 0, {100, 11, 1}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D({v.ptr, v.pitch, 100, 0}, 0, {100, 1, 1}), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D({static_cast<char*>(v.ptr) + 450, v.pitch, 100, 10}, 0, {100, 1, 1}), cudaSuccess);
  EXPECT_EQ(cudaMemset3DAsync(v, 0, {100, 10, 4}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // nothing bad was queued
  ASSERT_EQ(cudaFree(v.ptr), cudaSuccess);
}

TEST_F(Guest3D, ABadSliceSendsNothing) {
  // The whole region is checked before the first slice goes: a sub-volume whose last slice
  // leaves the allocation leaves the first ones untouched.
  cudaPitchedPtr v{};
  ASSERT_EQ(cudaMalloc3D(&v, {64, 8, 3}), cudaSuccess);
  ASSERT_EQ(cudaMemset3D(v, 0x44, {64, 8, 3}), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  cudaPitchedPtr shifted = v;
  shifted.ptr = static_cast<char*>(v.ptr) + 5 * v.pitch;  // its third slice ends one row past
  EXPECT_EQ(cudaMemset3D(shifted, 0x55, {64, 4, 3}), cudaErrorInvalidValue);
  EXPECT_EQ(queued_frames(), 0u);
  std::vector<unsigned char> out(64 * 8 * 3);
  ASSERT_EQ(copy3d(parms({out.data(), 64, 64, 8}, {}, v, {}, {64, 8, 3}, cudaMemcpyDeviceToHost)), cudaSuccess);
  EXPECT_EQ(out, std::vector<unsigned char>(out.size(), 0x44));
  ASSERT_EQ(cudaFree(v.ptr), cudaSuccess);
}

// ---------------------------------------------------------------- the wire calls, hostile

using vmcuda::host::test::Client;
constexpr int32_t kBadArguments = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments);
constexpr int32_t kInvalidValue = 1, kInvalidHandle = 400;

TEST(Stub2DAsync, EveryCallChecksItsRegionsAndStream) {
  Client c(*g_stub);
  api::PitchReply a{}, b{};
  const uint64_t w = 100, h = 20;
  ASSERT_EQ(c.call<api::Call::MallocPitch>({w, h, 4, 0}, &a), 0);
  ASSERT_EQ(c.call<api::Call::MallocPitch>({w, h, 4, 0}, &b), 0);
  std::vector<std::byte> in(w * h);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::byte(i * 3);
  // Round trip through every call: inline up, device to device, a memset, heap down.
  ASSERT_EQ(c.call<api::Call::Copy2DToDeviceInlineAsync>({a.ptr, a.pitch, w, h, 0}, nullptr, in), 0);
  ASSERT_EQ(c.call<api::Call::Copy2DDeviceToDeviceAsync>({b.ptr, b.pitch, a.ptr, a.pitch, w, h, 0}), 0);
  ASSERT_EQ(c.call<api::Call::Memset2DAsync>({b.ptr, b.pitch, 10, 2, 0xee, 0, 0}), 0);
  std::vector<std::byte> out;
  ASSERT_EQ(c.call<api::Call::Copy2DFromDeviceInlineAsync>({b.ptr, b.pitch, w, h, 0}, nullptr, {}, &out, w * h), 0);
  ASSERT_EQ(out.size(), w * h);
  for (size_t y = 0; y < h; ++y)
    for (size_t x = 0; x < w; ++x) ASSERT_EQ(out[y * w + x], x < 10 && y < 2 ? std::byte{0xee} : in[y * w + x]);
  auto host = c.slot->heap().allocate(128 * h);
  ASSERT_TRUE(host);
  ASSERT_EQ(c.call<api::Call::Copy2DFromDeviceHeapAsync>({a.ptr, a.pitch, w, h, host->ref(), 128, 0,
                                                           api::kHeapCopyWait, 0}),
            0);
  for (size_t y = 0; y < h; ++y) ASSERT_EQ(std::memcmp(host->data + y * 128, &in[y * w], w), 0);
  ASSERT_EQ(c.call<api::Call::Copy2DToDeviceHeapAsync>({b.ptr, b.pitch, w, h, host->ref(), 128, 0, 0, 0}), 0);

  // What a hostile guest may send instead.
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInlineAsync>({a.ptr, a.pitch, w, h - 1, 0}, nullptr, in), kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInlineAsync>({a.ptr, a.pitch, 1ull << 33, 1ull << 33, 0}, nullptr, in),
            kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInlineAsync>({a.ptr + a.pitch, a.pitch, w, h, 0}, nullptr, in),
            kInvalidValue);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInlineAsync>({a.ptr, a.pitch, w, h, 0x777}, nullptr, in), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::Copy2DFromDeviceInlineAsync>({a.ptr, a.pitch, w, h, 0}, nullptr, {}, &out, w * h - 1),
            static_cast<int32_t>(vmrpc::wire::ChannelStatus::kReplyTooSmall));
  EXPECT_EQ(c.call<api::Call::Copy2DFromDeviceInlineAsync>({a.ptr, 64, w, 2, 0}, nullptr, {}, &out, w * 2),
            kInvalidValue);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceHeapAsync>({a.ptr, a.pitch, w, h, host->ref(0, 1000), 100, 0, 0, 0}),
            kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceHeapAsync>({a.ptr, a.pitch, w, 2, host->ref(0, 1000), 99, 0, 0, 0}),
            kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceHeapAsync>({a.ptr, a.pitch, w, 2, host->ref(), 128, 0, 2, 0}),
            kBadArguments);  // an unknown flag
  EXPECT_EQ(c.call<api::Call::Copy2DFromDeviceHeapAsync>({a.ptr, a.pitch, w, 2, {~0ull, 200}, 100, 0, 0, 0}),
            static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadHeapRef));
  EXPECT_EQ(c.call<api::Call::Copy2DFromDeviceHeapAsync>({a.ptr, a.pitch, w, h + 1, host->ref(), w, 0, 0, 0}),
            kInvalidValue);
  EXPECT_EQ(c.call<api::Call::Copy2DDeviceToDeviceAsync>({a.ptr, a.pitch, b.ptr + 1, b.pitch, b.pitch, h, 0}),
            kInvalidValue);
  EXPECT_EQ(c.call<api::Call::Copy2DDeviceToDeviceAsync>({a.ptr, a.pitch, b.ptr, b.pitch, w, h, 0x777}),
            kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::Memset2DAsync>({a.ptr, a.pitch, w, h + 1, 0, 0, 0}), kInvalidValue);
  EXPECT_EQ(c.call<api::Call::Memset2DAsync>({a.ptr, 1ull << 63, 1, 3, 0, 0, 0}), kInvalidValue);
  EXPECT_EQ(c.call<api::Call::Memset2DAsync>({a.ptr, a.pitch, w, h, 0, 0, 0x777}), kInvalidHandle);
  // Another client's memory is not this one's.
  Client other(*g_stub);
  EXPECT_EQ(other.call<api::Call::Memset2DAsync>({a.ptr, a.pitch, w, h, 0, 0, 0}), kInvalidValue);
  EXPECT_EQ(other.call<api::Call::Copy2DDeviceToDeviceAsync>({a.ptr, a.pitch, b.ptr, b.pitch, w, h, 0}),
            kInvalidValue);
  c.slot->heap().free(host->offset);
}

}  // namespace
