// guest-lib's side of the device arena (host-stub/src/arena.h): after the handshake the
// guest process holds the client's device range itself (remote.cc), so no host pointer of
// the guest can equal a device pointer. Linked into guest_stream_event_tests, whose
// environment starts the in-process stub.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>

#include "arena.h"
#include "remote.h"
#include "vmcuda/cudart_api.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace {

// Whether the page at `p` is already mapped in this process (MAP_FIXED_NOREPLACE refuses it).
bool page_taken(uint64_t p) {
  void* got = ::mmap(reinterpret_cast<void*>(p), 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                     -1, 0);
  if (got == MAP_FAILED) return errno == EEXIST;
  ::munmap(got, 4096);
  return false;
}

TEST(GuestArena, TheClientsDeviceRangeIsReservedInTheGuestProcess) {
  cudaError_t err = cudaSuccess;
  vmcuda::guest::Remote* r = vmcuda::guest::Remote::get(&err);
  ASSERT_NE(r, nullptr) << err;
  const auto& hs = r->handshake();
  ASSERT_NE(hs.arena_bytes, 0u);
  EXPECT_EQ((hs.arena_base - vmcuda::host::kArenaBase) % vmcuda::host::kArenaStride, 0u);
  EXPECT_EQ(hs.arena_bytes, vmcuda::host::kArenaStride);
  EXPECT_TRUE(page_taken(hs.arena_base));
  EXPECT_TRUE(page_taken(hs.arena_base + hs.arena_bytes - 4096));
  EXPECT_FALSE(page_taken(hs.arena_base + hs.arena_bytes + (1ull << 30)));  // only its own range
  // Device pointers lie inside it.
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 100), cudaSuccess);
  const auto p = reinterpret_cast<uint64_t>(d);
  EXPECT_TRUE(p >= hs.arena_base && p - hs.arena_base < hs.arena_bytes) << std::hex << p;
  void* big = nullptr;
  ASSERT_EQ(cudaMalloc(&big, 8 << 20), cudaSuccess);
  const auto q = reinterpret_cast<uint64_t>(big);
  EXPECT_TRUE(q >= hs.arena_base && q - hs.arena_base < hs.arena_bytes) << std::hex << q;
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(big), cudaSuccess);
}

}  // namespace
