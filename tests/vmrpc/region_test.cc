#include <gtest/gtest.h>

#include <vector>

#include "vmrpc/region.h"

namespace vmrpc {
namespace {

RegionConfig cfg(uint64_t region, uint32_t slots = 16, uint32_t slot_bytes = 64 << 10) {
  return RegionConfig{region, slots, slot_bytes, 4096};
}

TEST(Layout, PlansNonOverlappingAlignedParts) {
  std::string why;
  auto l = Layout::plan(cfg(256ull << 20), &why);
  ASSERT_TRUE(l) << why;
  EXPECT_EQ(l->heap_table_offset, wire::kPageBytes);
  EXPECT_GE(l->slots_offset, l->heap_table_offset + l->heap_pages() * 4);
  EXPECT_GE(l->heap_offset, l->slot_offset(l->slot_count));
  EXPECT_EQ(l->heap_offset % (2u << 20), 0u);
  EXPECT_LE(l->heap_offset + l->heap_bytes, l->region_bytes);
  EXPECT_GT(l->heap_bytes, 200ull << 20);
}

TEST(Layout, RejectsBadConfigsWithReasons) {
  std::string why;
  EXPECT_FALSE(Layout::plan(cfg(3ull << 20), &why));
  EXPECT_NE(why.find("power of two"), std::string::npos);
  EXPECT_FALSE(Layout::plan(cfg(1 << 20, 0), &why));
  EXPECT_FALSE(Layout::plan(cfg(1 << 20, 4096), &why));
  EXPECT_FALSE(Layout::plan(cfg(1 << 20, 16, 5000), &why));
  EXPECT_FALSE(Layout::plan(cfg(1 << 20, 16, 1 << 20), &why));  // slots do not fit
  EXPECT_NE(why.find("do not fit"), std::string::npos);
}

TEST(Layout, GuestReadsBackWhatTheHostWrote) {
  std::string why;
  auto l = Layout::plan(cfg(16ull << 20, 8), &why);
  ASSERT_TRUE(l);
  wire::RegionHeader h{};
  l->write_header(h, 42);
  auto g = Layout::from_header(h, 16ull << 20, &why);
  ASSERT_TRUE(g) << why;
  EXPECT_EQ(g->heap_offset, l->heap_offset);
  EXPECT_EQ(g->slot_count, 8u);

  auto bad = h;
  bad.magic ^= 1;
  EXPECT_FALSE(Layout::from_header(bad, 16ull << 20, &why));
  bad = h;
  bad.abi_version = 99;
  EXPECT_FALSE(Layout::from_header(bad, 16ull << 20, &why));
  EXPECT_NE(why.find("ABI"), std::string::npos);
  EXPECT_FALSE(Layout::from_header(h, 32ull << 20, &why));  // wrong mapped size
  bad = h;
  bad.heap_offset += 4096;
  EXPECT_FALSE(Layout::from_header(bad, 16ull << 20, &why));
}

TEST(RegionView, ResolveRejectsEveryOutOfBoundsRef) {
  std::string why;
  auto l = Layout::plan(cfg(16ull << 20, 4), &why);
  ASSERT_TRUE(l);
  std::vector<std::byte> mem(l->region_bytes);
  RegionView v(mem.data(), *l);
  const uint64_t H = l->heap_bytes;
  EXPECT_TRUE(v.resolve({0, H}));
  EXPECT_TRUE(v.resolve({H, 0}));
  EXPECT_TRUE(v.resolve({H - 1, 1}));
  EXPECT_FALSE(v.resolve({H - 1, 2}));
  EXPECT_FALSE(v.resolve({H + 1, 0}));
  EXPECT_FALSE(v.resolve({1, UINT64_MAX}));
  EXPECT_FALSE(v.resolve({UINT64_MAX, 2}));
  auto s = v.resolve({4096, 10});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->data(), mem.data() + l->heap_offset + 4096);
}

}  // namespace
}  // namespace vmrpc
