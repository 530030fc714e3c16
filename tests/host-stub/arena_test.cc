// The device arena (host-stub/src/arena.h) on the test executor's VMM: fixed addresses per
// client, sub-allocation, physical memory released, peer access; and the stub's sessions
// allocating from it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "arena.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host {
namespace {

using test::Client;
using test::Stub;
namespace tst = vmcuda::testing;

constexpr uint64_t kMiB = 1ull << 20;

// An arena on a freshly installed executor, counting its synchronizations.
struct ArenaTest : ::testing::Test {
  DriverApi api;
  int syncs = 0;
  std::unique_ptr<DeviceArena> arena;
  void SetUp() override {
    tst::install_fake_driver(api);
    arena = std::make_unique<DeviceArena>(api, [this] { return ++syncs, CUDA_SUCCESS; });
  }
  uint64_t alloc(uint64_t bytes, int device = 0) {
    uint64_t p = 0;
    EXPECT_EQ(arena->allocate(device, bytes, &p), CUDA_SUCCESS) << bytes;
    return p;
  }
};

TEST_F(ArenaTest, AddressesStartAtTheFixedBaseAndNothingIsReservedBeforeTheFirstAllocation) {
  ASSERT_EQ(arena->index(), 0);
  EXPECT_EQ(arena->base(), kArenaBase);
  EXPECT_EQ(arena->bytes(), kArenaStride);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  const uint64_t a = alloc(100);
  EXPECT_EQ(a, kArenaBase);
  EXPECT_EQ(tst::fake_live_reservations(), 1u);
  EXPECT_TRUE(arena->contains(a));
  EXPECT_FALSE(arena->contains(kArenaBase + kArenaStride));
  EXPECT_FALSE(arena->contains(kArenaBase - 1));
}

TEST_F(ArenaTest, SmallAllocationsAre512AlignedAndPackedInOneChunk) {
  // 512 bytes apart, as cudaMalloc's small blocks are on the H200.
  const uint64_t a = alloc(1), b = alloc(100), c = alloc(512), d = alloc(513), e = alloc(kArenaOwnMappingMin - 1);
  EXPECT_EQ(a, kArenaBase);
  EXPECT_EQ(b, kArenaBase + 512);
  EXPECT_EQ(c, kArenaBase + 1024);
  EXPECT_EQ(d, kArenaBase + 1536);
  EXPECT_EQ(e, kArenaBase + 2560);
  for (uint64_t p : {a, b, c, d, e}) EXPECT_EQ(p % kArenaAlign, 0u);
  EXPECT_EQ(arena->mappings(), 1u);
  EXPECT_EQ(arena->physical_bytes(), kArenaChunkBytes);
  EXPECT_EQ(tst::fake_allocated_bytes(), kArenaChunkBytes);
  // A full chunk: the next small one starts a second.
  const uint64_t f = alloc(kArenaOwnMappingMin - 1);
  EXPECT_EQ(f, kArenaBase + kArenaChunkBytes);
  EXPECT_EQ(arena->mappings(), 2u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 2 * kArenaChunkBytes);
  // A hole in the first chunk is refilled first (first fit).
  EXPECT_EQ(arena->free(b), CUDA_SUCCESS);
  EXPECT_EQ(alloc(200), b);
}

TEST_F(ArenaTest, AChunkIsReleasedWhenItsLastAllocationIsFreed) {
  std::vector<uint64_t> ps;
  for (int i = 0; i < 4; ++i) ps.push_back(alloc(512 * 1024));  // exactly one chunk
  const uint64_t other = alloc(4096);                           // a second chunk
  EXPECT_EQ(arena->physical_bytes(), 2 * kArenaChunkBytes);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(arena->free(ps[i]), CUDA_SUCCESS);
  EXPECT_EQ(tst::fake_allocated_bytes(), 2 * kArenaChunkBytes);  // one still used
  EXPECT_EQ(arena->free(ps[3]), CUDA_SUCCESS);
  EXPECT_EQ(tst::fake_allocated_bytes(), kArenaChunkBytes);
  EXPECT_EQ(tst::fake_vmm_mappings(), 1u);
  // Its range is free again: the next mapping takes it.
  EXPECT_EQ(alloc(2 * kMiB), kArenaBase);
  EXPECT_EQ(arena->free(other), CUDA_SUCCESS);
  EXPECT_EQ(syncs, 5);  // every free synchronized, as cudaFree does
}

TEST_F(ArenaTest, LargeAllocationsGetTheirOwnMemoryRoundedToTheGranularity) {
  const uint64_t a = alloc(kArenaOwnMappingMin);  // 1 MiB: its own, 2 MiB
  const uint64_t b = alloc(3 * kMiB + 1);         // 4 MiB
  const uint64_t c = alloc(100);                  // a chunk after them
  EXPECT_EQ(a, kArenaBase);
  EXPECT_EQ(b, kArenaBase + 2 * kMiB);
  EXPECT_EQ(c, kArenaBase + 6 * kMiB);
  EXPECT_EQ(arena->footprint(0, 3 * kMiB + 1), 4 * kMiB);
  EXPECT_EQ(arena->footprint(0, 100), kArenaAlign);
  EXPECT_EQ(arena->mappings(), 3u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 8 * kMiB);
  // Freed neighbours coalesce: 6 MiB fits where a and b were.
  EXPECT_EQ(arena->free(a), CUDA_SUCCESS);
  EXPECT_EQ(arena->free(b), CUDA_SUCCESS);
  EXPECT_EQ(tst::fake_allocated_bytes(), 2 * kMiB);
  EXPECT_EQ(alloc(6 * kMiB), kArenaBase);
  // More than the device (the executor's 1 GiB) or the range: out of memory, nothing kept.
  uint64_t p = 0;
  EXPECT_EQ(arena->allocate(0, 2ull << 30, &p), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(arena->allocate(0, kArenaStride + 1, &p), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(arena->allocate(0, ~0ull, &p), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(tst::fake_allocated_bytes(), 8 * kMiB);
  EXPECT_EQ(arena->allocate(0, 0, &p), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ArenaTest, FreeKnowsExactlyThePointersItReturned) {
  const uint64_t small = alloc(1000), large = alloc(4 * kMiB);
  EXPECT_EQ(arena->free(small + 256), CUDA_ERROR_INVALID_VALUE);  // interior, same chunk
  EXPECT_EQ(arena->free(large + 256), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(arena->free(kArenaBase + kArenaChunkBytes - 256), CUDA_ERROR_INVALID_VALUE);  // free part of a chunk
  EXPECT_EQ(arena->free(0x1234), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(arena->live_allocations(), 2u);
  EXPECT_EQ(arena->free(small), CUDA_SUCCESS);
  EXPECT_EQ(arena->free(small), CUDA_ERROR_INVALID_VALUE);  // twice
  EXPECT_EQ(arena->free(large), CUDA_SUCCESS);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

TEST_F(ArenaTest, TheDestructorFreesEverything) {
  alloc(100);
  alloc(5 * kMiB);
  alloc(300, 1);  // on the other device: a chunk of its own
  EXPECT_EQ(arena->mappings(), 3u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 2 * kMiB + 6 * kMiB + 2 * kMiB);
  arena.reset();
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
}

TEST_F(ArenaTest, EachArenaOfTheProcessHasItsOwnIndexAndRange) {
  auto second = std::make_unique<DeviceArena>(api, nullptr);
  EXPECT_EQ(second->index(), 1);
  EXPECT_EQ(second->base(), kArenaBase + kArenaStride);
  uint64_t p = 0;
  ASSERT_EQ(second->allocate(0, 100, &p), CUDA_SUCCESS);
  EXPECT_EQ(p, kArenaBase + kArenaStride);
  EXPECT_EQ(alloc(100), kArenaBase);
  // The lowest free index is handed out again.
  arena.reset();
  DeviceArena third(api, nullptr);
  EXPECT_EQ(third.index(), 0);
}

// No arena lies where Linux puts PIE programs and their heap (the stub's, a restoring stub's,
// the guest program's): claiming every index skips that window, and a state naming an arena
// there cannot claim it.
TEST_F(ArenaTest, NoArenaLiesWhereProgramsAndTheirHeapGo) {
  std::vector<std::unique_ptr<DeviceArena>> all;
  for (;;) {
    auto a = std::make_unique<DeviceArena>(api, nullptr);
    if (a->index() < 0) break;
    all.push_back(std::move(a));
  }
  ASSERT_GT(all.size(), 50u);
  for (const auto& a : all) {
    const uint64_t end = a->base() + a->bytes();
    EXPECT_TRUE(end <= kArenaAvoidBegin || a->base() >= kArenaAvoidEnd) << "arena " << a->index();
  }
  EXPECT_LT(all.size() + 1, size_t{kArenaMaxIndex});  // this fixture's arena, and the window
  DeviceArena::Layout l;
  l.index = static_cast<int>((0x555555554000ull - kArenaBase) / kArenaStride);
  all.pop_back();
  DeviceArena spare(api, nullptr);
  std::string why;
  EXPECT_FALSE(spare.adopt(l, &why));
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
}

TEST_F(ArenaTest, AMovedReservationIsRefusedClearly) {
  tst::fake_move_reservations(true);  // the driver places it elsewhere
  uint64_t p = 0;
  std::string why;
  EXPECT_EQ(arena->allocate(0, 100, &p, &why), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(why.find("instead of 0x500000000000"), std::string::npos) << why;
  EXPECT_EQ(tst::fake_live_reservations(), 0u);  // the moved range was given back
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  // Once the range is free, the same arena works.
  tst::fake_move_reservations(false);
  EXPECT_EQ(alloc(100), kArenaBase);
}

TEST_F(ArenaTest, AFreshArenaWhoseRangeIsTakenMovesToTheNextIndex) {
  // Something else of the process holds the hint (here: another reservation; on the H100 the
  // driver's own allocations for other clients of a thread-mode stub). No pointer of the
  // arena exists yet, so it moves to the next free index.
  CUdeviceptr other = 0;
  ASSERT_EQ(api.cuMemAddressReserve(&other, kArenaChunkBytes, 0, kArenaBase + kArenaChunkBytes, 0), CUDA_SUCCESS);
  ASSERT_EQ(other, kArenaBase + kArenaChunkBytes);
  EXPECT_EQ(alloc(100), kArenaBase + kArenaStride);
  // Index 0 is free again for an arena made later (it tries, and moves on while it is taken).
  DeviceArena second(api, [] { return CUDA_SUCCESS; });
  uint64_t p = 0;
  std::string why;
  ASSERT_EQ(second.allocate(0, 100, &p, &why), CUDA_SUCCESS) << why;
  EXPECT_EQ(p, kArenaBase + 2 * kArenaStride);
  ASSERT_EQ(second.free(p), CUDA_SUCCESS);
  EXPECT_EQ(api.cuMemAddressFree(other, kArenaChunkBytes), CUDA_SUCCESS);
}

TEST_F(ArenaTest, PeerAccessAppliesToCurrentAndLaterMappings) {
  const uint64_t a = alloc(100), b = alloc(3 * kMiB), c = alloc(100, 1);
  EXPECT_EQ(tst::fake_vmm_access(a), 1u);  // its own device only
  EXPECT_EQ(tst::fake_vmm_access(b), 1u);
  EXPECT_EQ(tst::fake_vmm_access(c & ~(kArenaChunkBytes - 1)), 2u);
  EXPECT_EQ(arena->set_peer_access(1, true), CUDA_SUCCESS);
  EXPECT_EQ(tst::fake_vmm_access(a), 3u);
  EXPECT_EQ(tst::fake_vmm_access(b), 3u);
  EXPECT_EQ(tst::fake_vmm_access(c & ~(kArenaChunkBytes - 1)), 2u);
  const uint64_t d = alloc(8 * kMiB);  // later
  EXPECT_EQ(tst::fake_vmm_access(d), 3u);
  EXPECT_EQ(arena->set_peer_access(1, false), CUDA_SUCCESS);
  EXPECT_EQ(tst::fake_vmm_access(a), 1u);
  EXPECT_EQ(tst::fake_vmm_access(d), 1u);
  EXPECT_EQ(tst::fake_vmm_access(c & ~(kArenaChunkBytes - 1)), 2u);  // device 1 keeps its own memory
  EXPECT_EQ(tst::fake_vmm_access(alloc(4 * kMiB)), 1u);
  // A device the driver does not know: the driver's error, nothing granted.
  EXPECT_EQ(arena->set_peer_access(7, true), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(arena->set_peer_access(7, false), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(tst::fake_vmm_access(a), 1u);
  EXPECT_EQ(tst::fake_vmm_access(alloc(4 * kMiB)), 1u);  // not kept for later ones either
}

// ---------------------------------------------------------------- the stub's sessions

// Waits until the endpoint has closed `n` slots in all.
void wait_closed(Stub& s, uint64_t n) {
  for (int i = 0; i < 2000 && s.endpoint.stats().slots_closed_total < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(s.endpoint.stats().slots_closed_total, n);
}

TEST(StubArena, AClientsPointersAreTheSameInItsNextSession) {
  Stub s;
  std::vector<uint64_t> first;
  {
    Client c(s);
    api::HandshakeReply hs{};
    ASSERT_EQ(c.call<api::Call::Handshake>({}, &hs), 0);
    EXPECT_EQ(hs.arena_base, kArenaBase);
    EXPECT_EQ(hs.arena_bytes, kArenaStride);
    first = {c.malloc(100), c.malloc(3 * kMiB), c.malloc(4096)};
    EXPECT_EQ(first[0], kArenaBase);
    EXPECT_EQ(first[1], kArenaBase + kArenaChunkBytes);
    EXPECT_EQ(first[2], kArenaBase + kArenaAlign);
  }
  wait_closed(s, 1);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  // The same calls in a new session (as after a resume) give the same pointers.
  Client c(s);
  EXPECT_EQ((std::vector<uint64_t>{c.malloc(100), c.malloc(3 * kMiB), c.malloc(4096)}), first);
}

TEST(StubArena, ClientsOfOneProcessGetDistinctRanges) {
  Stub s;
  Client a(s), b(s);
  const uint64_t pa = a.malloc(64), pb = b.malloc(64);
  EXPECT_NE(pa, pb);
  EXPECT_EQ(std::min(pa, pb), kArenaBase);
  EXPECT_EQ(std::max(pa, pb), kArenaBase + kArenaStride);
  // Neither may name the other's memory.
  EXPECT_EQ(a.call<api::Call::Memset>({pb, 64, 1, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(b.call<api::Call::Free>({pa}), CUDA_ERROR_INVALID_VALUE);
}

TEST(StubArena, CopiesMemsetsAndKernelsWorkOnArenaMemory) {
  Stub s;
  Client c(s);
  const uint64_t small = c.malloc(64 * 4), large = c.malloc(2 * kMiB);
  std::vector<int> v(64);
  for (int i = 0; i < 64; ++i) v[i] = i;
  c.put(small, v);
  const uint64_t fn = c.load_add_one();
  ASSERT_EQ(c.launch(fn, small, 64, api::kStreamLegacy), 0);
  auto back = c.get(small, 64);
  ASSERT_EQ(back.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[i], i + 1);
  ASSERT_EQ(c.call<api::Call::Memset>({large, 2 * kMiB, 0x01, 0}), 0);
  ASSERT_EQ(c.call<api::Call::CopyDeviceToDevice>({large + kMiB, small, 64 * 4}), 0);
  back = c.get(large + kMiB - 4, 3);
  EXPECT_EQ(back, (std::vector<int>{0x01010101, 1, 2}));
  // Past the end of an allocation is refused even inside its chunk.
  EXPECT_EQ(c.call<api::Call::Memset>({small, 64 * 4 + 1, 0, 0}), CUDA_ERROR_INVALID_VALUE);
}

TEST(StubArena, QuotaFreeAndPitch) {
  StubLimits limits;
  limits.ledger = vmcuda::host::VmLedger::create(4 * kMiB);
  Stub s(limits);
  Client c(s);
  api::PtrReply r{};
  const uint64_t p = c.malloc(512 * 1024);
  // Finding 10.3: the quota counted the bytes asked for; it counts what the driver maps.
  api::MemInfoReply m{};
  ASSERT_EQ(c.call<api::Call::MemGetInfo>({}, &m), 0);
  EXPECT_EQ(m.free_bytes, 2 * kMiB);  // the 512 KiB sit in a 2 MiB chunk
  EXPECT_EQ(c.call<api::Call::Malloc>({3 * kMiB}, &r), CUDA_ERROR_OUT_OF_MEMORY);  // its own 4 MiB mapping
  EXPECT_EQ(c.call<api::Call::Free>({p + 256}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::Free>({p}), 0);
  EXPECT_EQ(c.call<api::Call::Free>({p}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  // Pitched memory: the driver's pitch (the executor's 512), the memory from the arena,
  // the driver's probe allocation given back.
  api::PitchReply pr{};
  ASSERT_EQ(c.call<api::Call::MallocPitch>({100, 10, 4, 0}, &pr), 0);
  EXPECT_EQ(pr.pitch, 512u);
  EXPECT_EQ(pr.ptr, kArenaBase);
  api::PitchReply pr2{};
  ASSERT_EQ(c.call<api::Call::MallocPitch>({100, 20, 4, 0}, &pr2), 0);
  EXPECT_EQ(pr2.pitch, 512u);
  EXPECT_EQ(pr2.ptr, kArenaBase + 5120);
  EXPECT_EQ(tst::fake_allocated_bytes(), kArenaChunkBytes);
  EXPECT_EQ(c.call<api::Call::Free>({pr.ptr}), 0);
  EXPECT_EQ(c.call<api::Call::Free>({pr2.ptr}), 0);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

TEST(StubArena, AMovedReservationFailsAllocationsNotTheSession) {
  Stub s;
  tst::fake_move_reservations(true);
  Client c(s);
  api::PtrReply r{};
  EXPECT_EQ(c.call<api::Call::Malloc>({100}, &r), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(c.call<api::Call::Malloc>({4 * kMiB}, &r), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  api::MemInfoReply m{};
  EXPECT_EQ(c.call<api::Call::MemGetInfo>({}, &m), 0);
  tst::fake_move_reservations(false);
  EXPECT_EQ(c.malloc(100), kArenaBase);
}

TEST(StubArena, AClientThatDiesLeaksNoPhysicalMemory) {
  Stub s;
  pid_t pid = fork();
  if (pid == 0) {
    Client c(s);
    const bool ok = c.malloc(100) == kArenaBase && c.malloc(3 * kMiB) != 0 && c.malloc(512 * 1024) != 0;
    _exit(ok ? 0 : 1);  // no Free: the stub must release all of it
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  wait_closed(s, 1);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  // And its range is free for the next client.
  Client c(s);
  EXPECT_EQ(c.malloc(100), kArenaBase);
}

}  // namespace
}  // namespace vmcuda::host
