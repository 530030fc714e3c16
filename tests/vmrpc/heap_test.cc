#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "vmrpc/heap.h"

namespace vmrpc {
namespace {

struct Fixture {
  Layout layout;
  std::vector<std::byte> mem;
  RegionView view;
  Fixture() {
    std::string why;
    layout = *Layout::plan(RegionConfig{4ull << 20, 2, 8192, 4096}, &why);
    mem.resize(layout.region_bytes);
    view = RegionView(mem.data(), layout);
  }
};

TEST(Heap, AllocatesDisjointPageAlignedBlocksAndFreesThem) {
  Fixture f;
  HeapAllocator h(f.view, 1);
  auto a = h.allocate(1);
  auto b = h.allocate(5000);
  auto c = h.allocate(4096);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->offset % 4096, 0u);
  EXPECT_EQ(b->offset, a->offset + 4096);
  EXPECT_EQ(c->offset, b->offset + 8192);
  EXPECT_EQ(h.allocated_pages(), 4u);
  EXPECT_EQ(f.view.heap_table()[a->offset / 4096], 1u);
  EXPECT_TRUE(h.free(b->offset));
  EXPECT_FALSE(h.free(b->offset));  // double free is refused
  EXPECT_FALSE(h.free(b->offset + 1));
  EXPECT_EQ(f.view.heap_table()[b->offset / 4096], 0u);
  EXPECT_EQ(h.allocated_pages(), 2u);
}

TEST(Heap, ExhaustionReturnsNothingAndFreeingMakesRoom) {
  Fixture f;
  HeapAllocator h(f.view, 1);
  const uint64_t pages = f.layout.heap_pages();
  EXPECT_FALSE(h.allocate(f.layout.heap_bytes + 1));
  auto all = h.allocate(f.layout.heap_bytes);
  ASSERT_TRUE(all);
  EXPECT_FALSE(h.allocate(1));
  EXPECT_TRUE(h.free(all->offset));
  std::vector<HeapBlock> v;
  for (uint64_t i = 0; i < pages; ++i) {
    auto b = h.allocate(4096);
    ASSERT_TRUE(b) << i;
    v.push_back(*b);
  }
  EXPECT_FALSE(h.allocate(1));
  // Free every other page: a 2-page block cannot fit, a 1-page one can.
  for (size_t i = 0; i < v.size(); i += 2) h.free(v[i].offset);
  EXPECT_FALSE(h.allocate(8192));
  EXPECT_TRUE(h.allocate(4096));
}

TEST(Heap, TwoOwnersNeverShareAPage) {
  Fixture f;
  HeapAllocator a(f.view, 1), b(f.view, 2);
  std::vector<HeapBlock> ba, bb;
  std::thread ta([&] {
    for (int i = 0; i < 2000; ++i)
      if (auto x = a.allocate(4096 * (1 + i % 3))) ba.push_back(*x);
      else if (!ba.empty()) a.free(ba.back().offset), ba.pop_back();
  });
  std::thread tb([&] {
    for (int i = 0; i < 2000; ++i)
      if (auto x = b.allocate(4096 * (1 + i % 2))) bb.push_back(*x);
      else if (!bb.empty()) b.free(bb.back().offset), bb.pop_back();
  });
  ta.join();
  tb.join();
  std::set<uint64_t> pages;
  for (auto* v : {&ba, &bb})
    for (auto& blk : *v)
      for (uint64_t p = blk.offset / 4096; p < (blk.offset + blk.bytes + 4095) / 4096; ++p)
        EXPECT_TRUE(pages.insert(p).second) << "page " << p << " handed out twice";
  for (auto& blk : ba) EXPECT_EQ(f.view.heap_table()[blk.offset / 4096], 1u);
  for (auto& blk : bb) EXPECT_EQ(f.view.heap_table()[blk.offset / 4096], 2u);
}

TEST(Heap, HostReclaimsOnlyTheDeadOwnersPages) {
  Fixture f;
  HeapAllocator a(f.view, 1), b(f.view, 2);
  auto x = a.allocate(3 * 4096);
  auto y = b.allocate(2 * 4096);
  ASSERT_TRUE(x && y);
  reclaim_heap_pages(f.view, 1);
  EXPECT_EQ(f.view.heap_table()[x->offset / 4096], 0u);
  EXPECT_EQ(f.view.heap_table()[y->offset / 4096], 2u);
}

}  // namespace
}  // namespace vmrpc
