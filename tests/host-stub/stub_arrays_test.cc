// CUDA arrays, texture and surface objects in vmcuda-stub (host-stub/src/arrays.cc, calls.def
// 0x1800) through the generic path on the test executor: the VM's quota pays for arrays, and
// what a hostile guest sends (regions outside an array, lengths that do not match, unknown
// handles and flags) is refused with a clear status while the stub keeps serving.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "host-stub/stub_fixture.h"
#include "vm_ledger.h"

namespace vmcuda::host::test {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint32_t kFloat = 0x20, kSignedInt32 = 0x0a;
constexpr int32_t kBadArguments = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments);

uint64_t create(Client& c, api::ArrayCreateArgs a, int32_t* status = nullptr) {
  api::HandleReply r{};
  const int32_t st = c.call<api::Call::ArrayCreate>(a, &r);
  if (status) *status = st;
  else EXPECT_EQ(st, 0);
  return r.handle;
}

api::ArrayCopyArgs region(uint64_t array, uint64_t w, uint64_t h, uint64_t d = 1) {
  api::ArrayCopyArgs a{};
  a.array = array, a.width = w, a.height = h, a.depth = d;
  return a;
}

TEST(StubArrays, TheVmsQuotaPaysForArraysAndGetsItBack) {
  StubLimits limits;
  limits.ledger = VmLedger::create(4 * kMiB);
  Stub stub(limits);
  Client c(stub);
  const uint64_t a = create(c, {1024, 512, 0, kFloat, 1, 0, 0});  // 2 MiB
  EXPECT_EQ(limits.ledger->used(), 2 * kMiB);
  // A mipmapped array pays for every level: 512x512 floats and its 9 smaller levels > 1 MiB.
  int32_t st = 0;
  const uint64_t m = create(c, {512, 512, 0, kFloat, 1, 0, 10}, &st);
  ASSERT_EQ(st, 0);
  EXPECT_GT(limits.ledger->used(), 3 * kMiB);
  // No room for another 1 MiB: out of memory, nothing charged.
  const uint64_t before = limits.ledger->used();
  create(c, {512, 512, 0, kFloat, 1, 0, 0}, &st);
  EXPECT_EQ(st, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
  EXPECT_EQ(limits.ledger->used(), before);
  // Freed: paid back.
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({m, 1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({a, 0, 0}), 0);
  EXPECT_EQ(limits.ledger->used(), 0u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  // cudaDeviceReset frees arrays and their textures, and pays them back.
  const uint64_t r = create(c, {256, 256, 0, kFloat, 4, 0, 0});
  api::TextureCreateArgs t{};
  t.resource = api::kTexResourceArray, t.handle = r;
  api::HandleReply tex{};
  ASSERT_EQ(c.call<api::Call::TextureCreate>(t, &tex), 0);
  EXPECT_EQ(limits.ledger->used(), 1 * kMiB);
  ASSERT_EQ(c.call<api::Call::DeviceReset>({}), 0);
  EXPECT_EQ(limits.ledger->used(), 0u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(c.call<api::Call::TextureDestroy>({tex.handle}), 1);
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({r, 0, 0}), 1);
  // An array the client never freed goes back when it closes.
  create(c, {256, 256, 0, kFloat, 4, 0, 0});
  EXPECT_EQ(limits.ledger->used(), 1 * kMiB);
}

TEST(StubArrays, AHostileGuestIsRefusedAndTheStubServesOn) {
  Stub stub;
  Client c(stub);
  const uint64_t a = create(c, {8, 4, 0, kSignedInt32, 1, 0, 0});  // 32 bytes a row
  std::vector<int> v(32, 7);
  const auto bytes = std::as_bytes(std::span(v));
  // Regions outside the array: past a row, past the rows, past the slices, partial elements.
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(region(a, 32, 4), nullptr, bytes), 0);
  auto past_row = region(a, 32, 1);
  past_row.x = 4;
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(past_row, nullptr, bytes.first(32)), 1);
  auto past_rows = region(a, 4, 2);
  past_rows.y = 3;
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(past_rows, nullptr, bytes.first(8)), 1);
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(region(a, 4, 1, 2), nullptr, bytes.first(8)), 1);
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(region(a, 6, 1), nullptr, bytes.first(6)), 1);
  // Lengths that do not match, overflowing sizes, unknown flags: the guest's fault.
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(region(a, 32, 4), nullptr, bytes.first(64)), kBadArguments);
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(region(a, 1ull << 40, 1ull << 40), nullptr, bytes), kBadArguments);
  auto flags = region(a, 4, 1);
  flags.flags = 1u << 20;
  EXPECT_EQ(c.call<api::Call::ArrayCopyDevice>(flags), kBadArguments);
  // A heap range not in the heap; a memory side whose pitch is smaller than its rows.
  auto heap = region(a, 32, 4);
  heap.host = {~0ull - 8, 64};
  heap.pitch = 32, heap.rows = 4;
  EXPECT_EQ(c.call<api::Call::ArrayCopyHeap>(heap),
            static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadHeapRef));
  auto dev = region(a, 32, 4);
  dev.flags = api::kArrayCopyFromArray;
  dev.other = c.malloc(4096);
  dev.pitch = 16, dev.rows = 4;
  EXPECT_EQ(c.call<api::Call::ArrayCopyDevice>(dev), kBadArguments);
  // Device memory that is not the client's; an array handle it was never given.
  dev.pitch = 32;
  EXPECT_EQ(c.call<api::Call::ArrayCopyDevice>(dev), 0);
  dev.other = 0x7000'0000'0000ull;
  EXPECT_EQ(c.call<api::Call::ArrayCopyDevice>(dev), 1);
  EXPECT_EQ(c.call<api::Call::ArrayCopyToInline>(region(a + 1000, 32, 4), nullptr, bytes), 1);
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({a + 1000, 0, 0}), 1);
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({a, 7, 0}), kBadArguments);
  // Bad descriptors: unknown format, 3 channels, unknown flags, a cubemap of unequal faces.
  int32_t st = 0;
  create(c, {8, 8, 0, 0x77, 1, 0, 0}, &st);
  EXPECT_EQ(st, 1);
  create(c, {8, 8, 0, kFloat, 3, 0, 0}, &st);
  EXPECT_EQ(st, 1);
  create(c, {8, 8, 0, kFloat, 1, 0x1000, 0}, &st);
  EXPECT_EQ(st, 1);
  create(c, {8, 4, 6, kFloat, 1, 4 /* cubemap */, 0}, &st);
  EXPECT_EQ(st, 1);
  // Textures and surfaces: unknown resources, values and modes; no surface without its flag.
  api::TextureCreateArgs t{};
  api::HandleReply r{};
  t.resource = 9;
  EXPECT_EQ(c.call<api::Call::TextureCreate>(t, &r), 1);
  t.resource = api::kTexResourceArray, t.handle = a, t.filter_mode = 5;
  EXPECT_EQ(c.call<api::Call::TextureCreate>(t, &r), 1);
  t.filter_mode = 0, t.resource = api::kTexResourcePitch2D, t.handle = dev.other, t.format = kFloat, t.channels = 1;
  EXPECT_EQ(c.call<api::Call::TextureCreate>(t, &r), 1);
  EXPECT_EQ(c.call<api::Call::TextureDestroy>({12345}), 1);
  EXPECT_EQ(c.call<api::Call::SurfaceCreate>({a, 1, 0}, &r), 1);  // a surface on a mipmapped array
  EXPECT_EQ(c.call<api::Call::SurfaceCreate>({a + 999, 0, 0}, &r), 1);  // no such array
  // The stub serves on: the array's texels are as written.
  std::vector<std::byte> extra;
  auto back = region(a, 32, 4);
  back.flags = api::kArrayCopyFromArray;
  ASSERT_EQ(c.call<api::Call::ArrayCopyFromInline>(back, nullptr, {}, &extra, 128), 0);
  ASSERT_EQ(extra.size(), 128u);
  EXPECT_EQ(std::memcmp(extra.data(), v.data(), 128), 0);
}

}  // namespace
}  // namespace vmcuda::host::test
