// The address hold a suspend keeps over the ranges its contexts gave back
// (host-stub/src/address_hold.h): what it covers, that it never replaces a mapping, and that
// the resume gets the hole back.
#include "address_hold.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace vmcuda::host {
namespace {

bool mapped(uint64_t begin, uint64_t end) {
  for (const AddressRange& r : current_mappings())
    if (r.begin <= begin && end <= r.end) return true;
  return false;
}

// Whether a fresh mapping could be placed exactly at `at` now.
bool free_at(uint64_t at, uint64_t bytes) {
  void* p = ::mmap(reinterpret_cast<void*>(at), bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                   -1, 0);
  if (p == MAP_FAILED) return false;
  ::munmap(p, bytes);
  return reinterpret_cast<uint64_t>(p) == at;
}

TEST(AddressHold, VanishedRanges) {
  const std::vector<AddressRange> before{{0x1000, 0x5000}, {0x8000, 0x9000}, {0x9000, 0xa000}, {0x10000, 0x20000}};
  const std::vector<AddressRange> after{{0x2000, 0x3000}, {0x10000, 0x11000}, {0x1f000, 0x30000}};
  const std::vector<AddressRange> want{{0x1000, 0x2000}, {0x3000, 0x5000}, {0x8000, 0xa000}, {0x11000, 0x1f000}};
  EXPECT_EQ(vanished_ranges(before, after), want);
  EXPECT_TRUE(vanished_ranges(before, before).empty());
  EXPECT_EQ(vanished_ranges(before, {}), (std::vector<AddressRange>{{0x1000, 0x5000}, {0x8000, 0xa000}, {0x10000, 0x20000}}));
}

TEST(AddressHold, FreeBelow) {
  const std::vector<AddressRange> maps{{0x1000, 0x2000}, {0x5000, 0x6000}, {0x9000, 0xa000}};
  EXPECT_EQ(free_below(maps, 0x5000, 0x10000), (AddressRange{0x2000, 0x5000}));  // down to the next mapping
  EXPECT_EQ(free_below(maps, 0x5000, 0x1000), (AddressRange{0x4000, 0x5000}));   // at most `bytes`
  EXPECT_EQ(free_below(maps, 0x1000, 0x10000), (AddressRange{0, 0x1000}));
  EXPECT_EQ(free_below({{0x4000, 0x5800}}, 0x5000, 0x1000), (AddressRange{0x5000, 0x5000}));  // none
}

TEST(AddressHold, LowestOfCluster) {
  EXPECT_EQ(lowest_of_cluster({}), 0u);
  const uint64_t mib = 1 << 20;
  // The heap grew (low), a thread stack 8 MiB below the context's big reservation, a small
  // mapping far below.
  const std::vector<AddressRange> added{{0x555555000000, 0x555555100000},
                                        {0x7ffd00000000, 0x7ffd00000000 + mib},
                                        {0x7ffdc57ff000, 0x7ffdc6000000},
                                        {0x7ffdc6000000, 0x7ffde6600000},
                                        {0x7ffde6600000, 0x7ffde6800000}};
  EXPECT_EQ(lowest_of_cluster(added), 0x7ffdc57ff000u);
}

TEST(AddressHold, AddKeepsWhatIsHeld) {
  const uint64_t bytes = 2 << 20;
  void* a = ::mmap(nullptr, 2 * bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(a, MAP_FAILED);
  const uint64_t at = reinterpret_cast<uint64_t>(a);
  ::munmap(a, 2 * bytes);
  AddressHold hold;
  hold.add({{at, at + bytes}});
  hold.add({{at + bytes, at + 2 * bytes}, {at + bytes, at + bytes}});  // an empty range is nothing
  EXPECT_EQ(hold.held_ranges(), 2u);
  EXPECT_FALSE(free_at(at, bytes));
  EXPECT_FALSE(free_at(at + bytes, bytes));
  hold.forget();
  EXPECT_TRUE(free_at(at, 2 * bytes));
  hold.hold_again();  // forgotten: nothing to hold again
  EXPECT_EQ(hold.held_ranges(), 0u);
}

TEST(AddressHold, KeepsTheHoleFreeUntilReleased) {
  const uint64_t bytes = 16 << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const uint64_t at = reinterpret_cast<uint64_t>(p);
  const auto before = current_mappings();
  ASSERT_TRUE(mapped(at, at + bytes));
  ::munmap(p, bytes);
  const auto hole = vanished_ranges(before, current_mappings());
  ASSERT_FALSE(hole.empty());

  AddressHold hold;
  hold.hold(hole);
  EXPECT_GE(hold.held_bytes(), bytes);
  EXPECT_TRUE(mapped(at, at + bytes));
  EXPECT_FALSE(free_at(at, bytes));
  // What the process maps meanwhile goes elsewhere.
  void* other = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(other, MAP_FAILED);
  const uint64_t o = reinterpret_cast<uint64_t>(other);
  EXPECT_TRUE(o + bytes <= at || at + bytes <= o);
  ::munmap(other, bytes);

  hold.release();
  EXPECT_EQ(hold.held_bytes(), 0u);
  EXPECT_TRUE(free_at(at, bytes));
  hold.hold_again();  // a failed resume covers it once more
  EXPECT_FALSE(free_at(at, bytes));
}

TEST(AddressHold, NeverReplacesAMapping) {
  const uint64_t bytes = 8 << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const uint64_t at = reinterpret_cast<uint64_t>(p);
  std::memset(p, 0x5a, bytes);
  {
    AddressHold hold;
    hold.hold({{at, at + bytes}});  // something took the range meanwhile: it stays that thing's
    EXPECT_EQ(hold.held_ranges(), 0u);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
  }
  EXPECT_EQ(static_cast<unsigned char*>(p)[0], 0x5a);  // the destructor unmapped nothing of it
  ::munmap(p, bytes);
}

TEST(AddressHold, DestructorGivesTheHoleBack) {
  const uint64_t bytes = 4 << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const uint64_t at = reinterpret_cast<uint64_t>(p);
  ::munmap(p, bytes);
  {
    AddressHold hold;
    hold.hold({{at, at + bytes}});
    EXPECT_FALSE(free_at(at, bytes));
  }
  EXPECT_TRUE(free_at(at, bytes));
}

}  // namespace
}  // namespace vmcuda::host
