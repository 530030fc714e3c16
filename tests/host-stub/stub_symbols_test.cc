// vmcuda-stub's module variables, pitched memory and 2D copies, and function attributes
// and occupancy (calls.def 0x1310, 0x1120, 0x1410), through the generic call path on the
// test executor: what each call answers, and what a client may not do with them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "host-stub/stub_fixture.h"

namespace vmcuda::host {
namespace {

using test::Client;
using test::Stub;
using vmrpc::wire::ChannelStatus;
namespace tst = vmcuda::testing;

constexpr int32_t kBadArguments = static_cast<int32_t>(ChannelStatus::kBadArguments);

// Ships a fake module; returns its handle.
uint64_t load_module(Client& c) {
  auto image = c.slot->heap().allocate(64);
  EXPECT_TRUE(image);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
  api::HandleReply mod{};
  EXPECT_EQ(c.call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
  c.slot->heap().free(image->offset);
  return mod.handle;
}

int32_t get_global(Client& c, uint64_t module, const std::string& name, api::GlobalReply* r) {
  return c.call<api::Call::ModuleGetGlobal>({module, uint32_t(name.size()), 0}, r, std::as_bytes(std::span(name)));
}

std::vector<std::byte> read(Client& c, uint64_t src, size_t n, int32_t* status = nullptr) {
  std::vector<std::byte> out;
  int32_t st = c.call<api::Call::CopyFromDeviceInline>({src, n}, nullptr, {}, &out, static_cast<uint32_t>(n));
  if (status) *status = st;
  return out;
}

// ---------------------------------------------------------------- module variables

TEST(StubSymbols, AGlobalIsFoundByNameAndCopiesMayNameIt) {
  Stub s;
  Client c(s);
  const uint64_t mod = load_module(c);
  api::GlobalReply g{};
  ASSERT_EQ(get_global(c, mod, tst::kTestGlobal, &g), 0);
  ASSERT_NE(g.ptr, 0u);
  EXPECT_EQ(g.bytes, tst::kTestGlobalBytes);
  // Its initial contents (the executor's: 0, 1, ..., 255).
  auto bytes = read(c, g.ptr, g.bytes);
  ASSERT_EQ(bytes.size(), g.bytes);
  for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], std::byte(i));
  // Asked again: the same variable.
  api::GlobalReply again{};
  ASSERT_EQ(get_global(c, mod, tst::kTestGlobal, &again), 0);
  EXPECT_EQ(again.ptr, g.ptr);
  // Every copy and memset may name its bytes, and only its bytes.
  c.put(g.ptr + 16, {7, 8, 9});
  EXPECT_EQ(c.get(g.ptr + 16, 3), (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(c.call<api::Call::Memset>({g.ptr, 8, 0xee, 0}), 0);
  const uint64_t p = c.malloc(4096);
  EXPECT_EQ(c.call<api::Call::CopyDeviceToDevice>({p, g.ptr, g.bytes}), 0);
  EXPECT_EQ(c.call<api::Call::CopyDeviceToDevice>({g.ptr + 128, p + 16, 128}), 0);
  EXPECT_EQ(c.call<api::Call::MemsetAsync>({g.ptr, g.bytes, 0, 0, api::kStreamDefault}), 0);
  EXPECT_EQ(c.call<api::Call::Memset>({g.ptr, g.bytes + 1, 0, 0}), CUDA_ERROR_INVALID_VALUE);  // one past
  EXPECT_EQ(c.call<api::Call::CopyDeviceToDevice>({p, g.ptr + 1, g.bytes}), CUDA_ERROR_INVALID_VALUE);
  // A kernel may be given its address.
  const uint64_t fn = c.load_add_one();
  ASSERT_EQ(c.launch(fn, g.ptr, 64, api::kStreamDefault), 0);
  EXPECT_EQ(c.get(g.ptr, 64), std::vector<int>(64, 1));
}

TEST(StubSymbols, AGlobalIsNeverFreedByTheClient) {
  Stub s;
  {
    Client c(s);
    const uint64_t mod = load_module(c);
    api::GlobalReply g{};
    ASSERT_EQ(get_global(c, mod, tst::kTestGlobal, &g), 0);
    EXPECT_EQ(c.call<api::Call::Free>({g.ptr}), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(c.call<api::Call::Free>({g.ptr + 4}), CUDA_ERROR_INVALID_VALUE);
    int32_t st = -1;
    read(c, g.ptr, 4, &st);
    EXPECT_EQ(st, 0);  // still there
  }
  // The client went: its module, and the variable with it, are gone.
  for (int i = 0; i < 500 && tst::fake_live_modules() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tst::fake_live_modules(), 0u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

TEST(StubSymbols, BadRequests) {
  Stub s;
  Client c(s);
  const uint64_t mod = load_module(c);
  api::GlobalReply g{};
  EXPECT_EQ(get_global(c, mod, "no_such_variable", &g), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(get_global(c, 0, tst::kTestGlobal, &g), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(get_global(c, mod + 1, tst::kTestGlobal, &g), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(get_global(c, ~0ull, tst::kTestGlobal, &g), CUDA_ERROR_INVALID_HANDLE);
  const std::string with_nul("vmcuda_test_global\0x", 20);
  EXPECT_EQ(get_global(c, mod, with_nul, &g), kBadArguments);
  EXPECT_EQ(get_global(c, mod, "", &g), kBadArguments);
  // name_bytes that does not match the bytes sent.
  const std::string name = tst::kTestGlobal;
  EXPECT_EQ(c.call<api::Call::ModuleGetGlobal>({mod, uint32_t(name.size() + 1), 0}, &g, std::as_bytes(std::span(name))),
            kBadArguments);
  EXPECT_EQ(c.call<api::Call::ModuleGetGlobal>({mod, 1u << 20, 0}, &g, std::as_bytes(std::span(name))), kBadArguments);
}

TEST(StubSymbols, OneClientCannotReachAnothersGlobals) {
  Stub s;
  Client a(s), b(s);
  const uint64_t mod_a = load_module(a);
  api::GlobalReply ga{};
  ASSERT_EQ(get_global(a, mod_a, tst::kTestGlobal, &ga), 0);
  int32_t st = 0;
  read(b, ga.ptr, 16, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(b.call<api::Call::Memset>({ga.ptr, 16, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(get_global(b, mod_a, tst::kTestGlobal, nullptr), CUDA_ERROR_INVALID_HANDLE);  // a's module handle
  // b's own copy of the same module has its own variable.
  const uint64_t mod_b = load_module(b);
  api::GlobalReply gb{};
  ASSERT_EQ(get_global(b, mod_b, tst::kTestGlobal, &gb), 0);
  EXPECT_NE(gb.ptr, ga.ptr);
  EXPECT_EQ(b.call<api::Call::CopyDeviceToDevice>({gb.ptr, ga.ptr, 16}), CUDA_ERROR_INVALID_VALUE);
}

TEST(StubSymbols, AModuleBelongsToTheDeviceItWasLoadedOn) {
  Stub s({}, {0, 1});
  Client c(s);
  const uint64_t mod0 = load_module(c);
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  api::GlobalReply g{};
  EXPECT_EQ(get_global(c, mod0, tst::kTestGlobal, &g), CUDA_ERROR_INVALID_HANDLE);
  const uint64_t mod1 = load_module(c);
  ASSERT_EQ(get_global(c, mod1, tst::kTestGlobal, &g), 0);
  ASSERT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
  api::GlobalReply g0{};
  ASSERT_EQ(get_global(c, mod0, tst::kTestGlobal, &g0), 0);
  EXPECT_NE(g0.ptr, g.ptr);
}

// ---------------------------------------------------------------- pitched memory, 2D copies

TEST(StubPitch, MallocPitchAndTheQuota) {
  StubLimits limits;
  limits.ledger = vmcuda::host::VmLedger::create(4 << 20);
  Stub s(limits);
  Client c(s);
  api::PitchReply r{};
  ASSERT_EQ(c.call<api::Call::MallocPitch>({100, 10, 4, 0}, &r), 0);
  EXPECT_NE(r.ptr, 0u);
  EXPECT_EQ(r.pitch, 512u);  // the executor's texture alignment
  // The whole pitched block is the client's (and its chunk counts against the VM's quota).
  EXPECT_EQ(c.call<api::Call::Memset>({r.ptr, 512 * 10, 1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::Memset>({r.ptr, 512 * 10 + 1, 1, 0}), CUDA_ERROR_INVALID_VALUE);
  api::MemInfoReply m{};
  ASSERT_EQ(c.call<api::Call::MemGetInfo>({}, &m), 0);
  EXPECT_EQ(m.free_bytes, (4u << 20) - (2u << 20));  // a 2 MiB chunk, as the driver maps it
  // Zero-sized: nothing, no error; bad element sizes; more than the quota (after padding).
  api::PitchReply z{};
  EXPECT_EQ(c.call<api::Call::MallocPitch>({0, 10, 4, 0}, &z), 0);
  EXPECT_EQ(z.ptr, 0u);
  EXPECT_EQ(c.call<api::Call::MallocPitch>({100, 10, 3, 0}, &z), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::MallocPitch>({100, 10, 32, 0}, &z), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::MallocPitch>({4, 4300, 4, 0}, &z), CUDA_ERROR_OUT_OF_MEMORY);  // 17 KiB asked, 2.1 MiB padded, 4 MiB mapped
  EXPECT_EQ(c.call<api::Call::MallocPitch>({~0ull, ~0ull, 4, 0}, &z), CUDA_ERROR_OUT_OF_MEMORY);
  // The refused ones were given back: one arena chunk (host-stub/src/arena.h) holds it.
  EXPECT_EQ(tst::fake_allocated_bytes(), host::kArenaChunkBytes);
  EXPECT_EQ(c.call<api::Call::Free>({r.ptr}), 0);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

// A host image of h rows of w bytes, `pitch` apart: byte (x, y) = x + 3 * y + seed.
std::vector<std::byte> image(uint64_t pitch, uint64_t w, uint64_t h, int seed) {
  std::vector<std::byte> v(pitch * h, std::byte{0xcc});
  for (uint64_t y = 0; y < h; ++y)
    for (uint64_t x = 0; x < w; ++x) v[y * pitch + x] = std::byte(x + 3 * y + seed);
  return v;
}
std::vector<std::byte> packed(uint64_t w, uint64_t h, int seed) { return image(w, w, h, seed); }

TEST(StubPitch, Copies2DInEveryDirection) {
  Stub s;
  Client c(s);
  api::PitchReply a{}, b{};
  const uint64_t w = 100, h = 20;
  ASSERT_EQ(c.call<api::Call::MallocPitch>({w, h, 4, 0}, &a), 0);
  ASSERT_EQ(c.call<api::Call::MallocPitch>({w + 50, h, 4, 0}, &b), 0);
  // Inline both ways.
  const auto in = packed(w, h, 1);
  ASSERT_EQ(c.call<api::Call::Copy2DToDeviceInline>({a.ptr, a.pitch, w, h}, nullptr, in), 0);
  std::vector<std::byte> out;
  ASSERT_EQ(c.call<api::Call::Copy2DFromDeviceInline>({a.ptr, a.pitch, w, h}, nullptr, {}, &out, w * h), 0);
  EXPECT_EQ(out, in);
  // Device to device, into another pitch and an offset column.
  ASSERT_EQ(c.call<api::Call::Copy2DDeviceToDevice>({b.ptr + 50, b.pitch, a.ptr, a.pitch, w, h}), 0);
  ASSERT_EQ(c.call<api::Call::Copy2DFromDeviceInline>({b.ptr + 50, b.pitch, w, h}, nullptr, {}, &out, w * h), 0);
  EXPECT_EQ(out, in);
  // Through the heap with the host's own pitch.
  const uint64_t hp = 128;
  auto host = c.slot->heap().allocate(hp * h);
  ASSERT_TRUE(host);
  const auto img = image(hp, w, h, 9);
  std::memcpy(host->data, img.data(), img.size());
  ASSERT_EQ(c.call<api::Call::Copy2DToDeviceHeap>({a.ptr, a.pitch, w, h, host->ref(), hp}), 0);
  std::memset(host->data, 0xcc, hp * h);
  ASSERT_EQ(c.call<api::Call::Copy2DFromDeviceHeap>({a.ptr, a.pitch, w, h, host->ref(), hp}), 0);
  EXPECT_EQ(0, std::memcmp(host->data, img.data(), img.size()));  // padding untouched too
  // A rectangle set, read back.
  ASSERT_EQ(c.call<api::Call::Memset2D>({a.ptr + 10, a.pitch, 20, 5, 0x7f, 0}), 0);
  ASSERT_EQ(c.call<api::Call::Copy2DFromDeviceInline>({a.ptr, a.pitch, w, h}, nullptr, {}, &out, w * h), 0);
  for (uint64_t y = 0; y < h; ++y)
    for (uint64_t x = 0; x < w; ++x)
      EXPECT_EQ(out[y * w + x], x >= 10 && x < 30 && y < 5 ? std::byte{0x7f} : img[y * hp + x]) << x << "," << y;
  // Zero-sized regions are no-ops.
  EXPECT_EQ(c.call<api::Call::Memset2D>({a.ptr, a.pitch, 0, 5, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::Copy2DDeviceToDevice>({b.ptr, b.pitch, a.ptr, a.pitch, w, 0}), 0);
}

TEST(StubPitch, RegionsMustBeTheClientsEveryRow) {
  Stub s;
  Client c(s), other(s);
  api::PitchReply a{};
  const uint64_t w = 100, h = 20;
  ASSERT_EQ(c.call<api::Call::MallocPitch>({w, h, 4, 0}, &a), 0);
  const auto in = packed(w, h, 1);
  // One row too many, a width past the pitch, overflowing sizes.
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInline>({a.ptr + a.pitch, a.pitch, w, h}, nullptr, in),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::Memset2D>({a.ptr, a.pitch, w, h + 1, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::Memset2D>({a.ptr, 64, w, 2, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::Memset2D>({a.ptr, 1ull << 63, 1, 3, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::Copy2DDeviceToDevice>({a.ptr, a.pitch, a.ptr + 1, a.pitch, a.pitch, h}),
            CUDA_ERROR_INVALID_VALUE);
  // Packed bytes that do not match the region, or whose size overflows.
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInline>({a.ptr, a.pitch, w, h - 1}, nullptr, in), kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceInline>({a.ptr, a.pitch, 1ull << 33, 1ull << 33}, nullptr, in),
            kBadArguments);
  std::vector<std::byte> out;
  EXPECT_EQ(c.call<api::Call::Copy2DFromDeviceInline>({a.ptr, a.pitch, w, h}, nullptr, {}, &out, w * h - 1),
            static_cast<int32_t>(ChannelStatus::kReplyTooSmall));
  // Heap ranges too small for the host pitch, or not in the heap.
  auto host = c.slot->heap().allocate(4096);
  ASSERT_TRUE(host);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceHeap>({a.ptr, a.pitch, w, h, host->ref(0, 1000), 100}), kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DToDeviceHeap>({a.ptr, a.pitch, w, 2, host->ref(0, 1000), 99}), kBadArguments);
  EXPECT_EQ(c.call<api::Call::Copy2DFromDeviceHeap>({a.ptr, a.pitch, w, 2, {~0ull, 200}, 100}),
            static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  // Another client's memory.
  EXPECT_EQ(other.call<api::Call::Memset2D>({a.ptr, a.pitch, w, 1, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(other.call<api::Call::Copy2DFromDeviceInline>({a.ptr, a.pitch, w, 1}, nullptr, {}, &out, w),
            CUDA_ERROR_INVALID_VALUE);
  api::PitchReply o{};
  ASSERT_EQ(other.call<api::Call::MallocPitch>({w, h, 4, 0}, &o), 0);
  EXPECT_EQ(other.call<api::Call::Copy2DDeviceToDevice>({o.ptr, o.pitch, a.ptr, a.pitch, w, h}),
            CUDA_ERROR_INVALID_VALUE);
}

// ---------------------------------------------------------------- function attributes

TEST(StubFunctions, AttributesAreTheDriversAndSettable) {
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  api::FuncAttributesReply a{};
  ASSERT_EQ(c.call<api::Call::FuncGetAttributes>({fn}, &a), 0);
  EXPECT_EQ(a.values[0], 1024);   // max threads per block
  EXPECT_EQ(a.values[1], 0);      // static shared memory
  EXPECT_EQ(a.values[4], 16);     // registers (the executor's default)
  EXPECT_EQ(a.values[5], 90);     // PTX version
  EXPECT_EQ(a.values[6], 90);     // binary version
  EXPECT_EQ(a.values[8], 49152);  // max dynamic shared memory: the per-block maximum by default
  EXPECT_EQ(a.values[9], -1);     // no carveout preference
  // More dynamic shared memory than the default: refused at launch until the attribute allows it.
  const uint64_t p = c.malloc(4096);
  auto packed_args = Client::add_one_args(p, 4);
  api::LaunchArgs la{fn, {1, 1, 1}, {4, 1, 1}, 64 << 10, 12, 0};
  EXPECT_EQ(c.call<api::Call::LaunchKernel>(la, nullptr, packed_args), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(c.call<api::Call::FuncSetAttribute>({fn, 8, 64 << 10}), 0);
  ASSERT_EQ(c.call<api::Call::FuncGetAttributes>({fn}, &a), 0);
  EXPECT_EQ(a.values[8], 64 << 10);
  EXPECT_EQ(c.call<api::Call::LaunchKernel>(la, nullptr, packed_args), 0);
  ASSERT_EQ(c.call<api::Call::FuncSetAttribute>({fn, 9, 50}), 0);
  ASSERT_EQ(c.call<api::Call::FuncGetAttributes>({fn}, &a), 0);
  EXPECT_EQ(a.values[9], 50);
  // Values and attributes the driver refuses; attributes that are not settable.
  EXPECT_EQ(c.call<api::Call::FuncSetAttribute>({fn, 8, 1 << 20}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::FuncSetAttribute>({fn, 8, -1}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::FuncSetAttribute>({fn, 9, 101}), CUDA_ERROR_INVALID_VALUE);
  for (int32_t attr : {0, 1, 4, 7, 16, -1, 1 << 30})
    EXPECT_EQ(c.call<api::Call::FuncSetAttribute>({fn, attr, 0}), CUDA_ERROR_INVALID_VALUE) << attr;
  ASSERT_EQ(c.call<api::Call::FuncGetAttributes>({fn}, &a), 0);
  EXPECT_EQ(a.values[8], 64 << 10);  // unchanged by the refused ones
}

TEST(StubFunctions, Occupancy) {
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  api::OccupancyReply r{};
  // 2048 threads, 32 blocks, 64 Ki registers and 228 KiB of shared memory a multiprocessor.
  ASSERT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn, 256, 0, 0}, &r), 0);
  EXPECT_EQ(r.blocks, 8);
  ASSERT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn, 32, 0, 0}, &r), 0);
  EXPECT_EQ(r.blocks, 32);
  ASSERT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn, 1024, 1, 0}, &r), 0);  // with a flag
  EXPECT_EQ(r.blocks, 2);
  ASSERT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn, 256, 0, 40 << 10}, &r), 0);
  EXPECT_EQ(r.blocks, 5);  // 228 KiB / (40 KiB + 1 KiB reserved)
  EXPECT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn, 256, 2, 0}, &r), CUDA_ERROR_INVALID_VALUE);
  // The shared memory a block may have: 228 KiB among 4 blocks less 1 KiB reserved each,
  // up to the kernel's dynamic maximum (48 KiB here); none when the threads do not fit.
  api::OccupancySharedReply sh{};
  ASSERT_EQ(c.call<api::Call::OccupancyAvailableSharedMemory>({fn, 8, 256}, &sh), 0);
  EXPECT_EQ(sh.bytes, (228u << 10) / 8 - 1024);
  ASSERT_EQ(c.call<api::Call::OccupancyAvailableSharedMemory>({fn, 2, 256}, &sh), 0);
  EXPECT_EQ(sh.bytes, 48u << 10);
  ASSERT_EQ(c.call<api::Call::OccupancyAvailableSharedMemory>({fn, 4, 1024}, &sh), 0);
  EXPECT_EQ(sh.bytes, 0u);
  EXPECT_EQ(c.call<api::Call::OccupancyAvailableSharedMemory>({fn, 0, 256}, &sh), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::OccupancyAvailableSharedMemory>({fn + 999, 4, 256}, &sh), CUDA_ERROR_INVALID_HANDLE);
  // Clusters at once: 8 blocks of 256 threads a multiprocessor, 132 of them, in clusters of 2.
  const api::LaunchAttribute cluster{api::kLaunchAttrClusterDimension, {2, 1, 1}, 0};
  const auto attr_bytes = std::as_bytes(std::span(&cluster, 1));
  ASSERT_EQ(c.call<api::Call::OccupancyMaxActiveClusters>({fn, {64, 1, 1}, {256, 1, 1}, 0, 0, 0, 1, 0}, &r, attr_bytes), 0);
  EXPECT_EQ(r.blocks, 8 * 132 / 2);
  ASSERT_EQ(c.call<api::Call::OccupancyMaxActiveClusters>({fn, {64, 1, 1}, {256, 1, 1}, 0, 0, 0, 0, 0}, &r), 0);
  EXPECT_EQ(r.blocks, 8 * 132);
  const api::LaunchAttribute bad{api::kLaunchAttrClusterDimension, {0, 1, 1}, 0};
  EXPECT_EQ(c.call<api::Call::OccupancyMaxActiveClusters>({fn, {64, 1, 1}, {256, 1, 1}, 0, 0, 0, 1, 0}, &r,
                                                          std::as_bytes(std::span(&bad, 1))),
            CUDA_ERROR_INVALID_VALUE);
  // A hostile guest: attributes that are not there, parameters, a stream.
  EXPECT_NE(c.call<api::Call::OccupancyMaxActiveClusters>({fn, {64, 1, 1}, {256, 1, 1}, 0, 0, 0, 2, 0}, &r, attr_bytes), 0);
  EXPECT_NE(c.call<api::Call::OccupancyMaxActiveClusters>({fn, {64, 1, 1}, {256, 1, 1}, 0, 8, 0, 0, 0}, &r), 0);
  EXPECT_NE(c.call<api::Call::OccupancyMaxActiveClusters>({fn, {64, 1, 1}, {256, 1, 1}, 0, 0, 7, 0, 0}, &r), 0);
}

TEST(StubFunctions, HandlesAreCheckedAndRunOnTheirDevice) {
  Stub s({}, {0, 1});
  Client c(s), other(s);
  const uint64_t fn0 = c.load_add_one();
  api::FuncAttributesReply a{};
  api::OccupancyReply r{};
  for (uint64_t forged : {uint64_t{0}, fn0 + 1, ~uint64_t{0}}) {
    EXPECT_EQ(c.call<api::Call::FuncGetAttributes>({forged}, &a), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(c.call<api::Call::FuncSetAttribute>({forged, 8, 0}), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({forged, 256, 0, 0}, &r), CUDA_ERROR_INVALID_HANDLE);
  }
  EXPECT_EQ(other.call<api::Call::FuncGetAttributes>({fn0}, &a), CUDA_ERROR_INVALID_HANDLE);  // c's handle
  // A kernel loaded on device 0 is asked about in device 0's context while device 1 is current.
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::FuncGetAttributes>({fn0}, &a), 0);
  EXPECT_EQ(c.call<api::Call::FuncSetAttribute>({fn0, 8, 1024}), 0);
  EXPECT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn0, 128, 0, 0}, &r), 0);
  EXPECT_EQ(r.blocks, 16);
}

TEST(StubFunctions, SetAttributeIsQueuedWithTheLaunchThatNeedsIt) {
  // What the guest's lazy queue sends: the attribute, then a launch that needs it.
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(4096);
  const auto packed_args = Client::add_one_args(p, 4);
  auto f_set = c.queue<api::Call::FuncSetAttribute>({fn, 8, 100 << 10});
  auto f_launch = c.queue<api::Call::LaunchKernel>({fn, {1, 1, 1}, {4, 1, 1}, 100 << 10, 12, 0}, packed_args);
  auto f_bad = c.queue<api::Call::FuncSetAttribute>({fn, 8, 1 << 30});
  ASSERT_EQ(c.flush(), ChannelStatus::kOk);
  EXPECT_EQ(c.status(f_set), 0);
  EXPECT_EQ(c.status(f_launch), 0);
  EXPECT_EQ(c.status(f_bad), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.get(p, 4), std::vector<int>(4, 1));
}

// Memsets of 16- and 32-bit elements (cuMemsetD16/D32): whole aligned elements of the
// client's memory; a malformed element size is the guest's fault and the stub serves on.
TEST(StubMemset, ElementsOfTwoAndFourBytes) {
  Stub s;
  Client c(s);
  const uint64_t p = c.malloc(64);
  ASSERT_EQ(c.call<api::Call::Memset>({p, 64, 0x01020304u, 4}), 0);
  for (int v : c.get(p, 16)) EXPECT_EQ(v, 0x01020304);
  ASSERT_EQ(c.call<api::Call::MemsetAsync>({p, 32, 0xbeefu, 2, api::kStreamDefault}), 0);
  const auto got = c.get(p, 16);
  EXPECT_EQ(got[0], static_cast<int>(0xbeefbeefu));
  EXPECT_EQ(got[7], static_cast<int>(0xbeefbeefu));
  EXPECT_EQ(got[8], 0x01020304);
  EXPECT_EQ(c.call<api::Call::Memset>({p + 2, 8, 7, 4}), CUDA_ERROR_INVALID_VALUE);   // misaligned
  EXPECT_EQ(c.call<api::Call::Memset>({p, 6, 7, 4}), CUDA_ERROR_INVALID_VALUE);       // not whole elements
  EXPECT_EQ(c.call<api::Call::Memset>({p, 68, 7, 4}), CUDA_ERROR_INVALID_VALUE);      // past the allocation
  EXPECT_NE(c.call<api::Call::MemsetAsync>({p, 8, 7, 3, api::kStreamDefault}), 0);   // no such width
  ASSERT_EQ(c.call<api::Call::Memset>({p, 64, 0x7f, 0}), 0);                         // bytes, as before
  for (int v : c.get(p, 16)) EXPECT_EQ(v, 0x7f7f7f7f);
}

// 2D memsets of 16- and 32-bit elements (cuMemsetD2D16/32 of device memory): rows of whole,
// aligned elements; the bytes between the rows stay.
TEST(StubMemset, TwoDimensionalElementsOfTwoAndFourBytes) {
  Stub s;
  Client c(s);
  const uint64_t p = c.malloc(256);  // 4 rows, 64 bytes apart
  ASSERT_EQ(c.call<api::Call::Memset>({p, 256, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::Memset2D>({p, 64, 16, 4, 0x01020304u, 4}), 0);
  auto got = c.get(p, 64);
  for (int row = 0; row < 4; ++row) {
    EXPECT_EQ(got[row * 16 + 3], 0x01020304) << row;
    EXPECT_EQ(got[row * 16 + 4], 0) << row;
  }
  ASSERT_EQ(c.call<api::Call::Memset2DAsync>({p + 16, 64, 8, 2, 0xbeefu, 2, api::kStreamDefault}), 0);
  got = c.get(p, 64);
  EXPECT_EQ(got[4], static_cast<int>(0xbeefbeefu));
  EXPECT_EQ(got[16 + 5], static_cast<int>(0xbeefbeefu));
  EXPECT_EQ(got[16 + 6], 0);
  EXPECT_EQ(got[32 + 4], 0);
  EXPECT_EQ(c.call<api::Call::Memset2D>({p + 2, 64, 8, 2, 7, 4}), CUDA_ERROR_INVALID_VALUE);  // misaligned
  EXPECT_EQ(c.call<api::Call::Memset2D>({p, 62, 8, 2, 7, 4}), CUDA_ERROR_INVALID_VALUE);      // a pitch of no whole elements
  EXPECT_EQ(c.call<api::Call::Memset2D>({p, 64, 6, 2, 7, 4}), CUDA_ERROR_INVALID_VALUE);      // rows of no whole elements
  EXPECT_EQ(c.call<api::Call::Memset2D>({p, 64, 16, 5, 7, 4}), CUDA_ERROR_INVALID_VALUE);     // past the allocation
  EXPECT_NE(c.call<api::Call::Memset2DAsync>({p, 64, 8, 2, 7, 3, api::kStreamDefault}), 0);  // no such width
  ASSERT_EQ(c.call<api::Call::Memset2D>({p, 64, 64, 4, 0x7f, 0}), 0);  // bytes, as before
  for (int v : c.get(p, 64)) EXPECT_EQ(v, 0x7f7f7f7f);
}

}  // namespace
}  // namespace vmcuda::host
