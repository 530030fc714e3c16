// Guest side: the shared-heap allocator for bulk data (vCUDA's VMRPC_malloc/free).
//
// The heap is split into pages; each page has an owner word in the region's heap
// table (0 = free, else slot index + 1), claimed with CAS so that all processes of a
// VM can allocate from one heap without a lock that a dying process could leave held.
// A process keeps its own record of what it allocated and never trusts the shared
// table for that. The host never trusts the table either: it checks every HeapRef
// against the heap's bounds, and only writes the table to reclaim a dead slot's pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "vmrpc/region.h"
#include "vmrpc/wire.h"

namespace vmrpc {

struct HeapBlock {
  std::byte* data = nullptr;
  uint64_t offset = 0;  // from heap start: what goes into a HeapRef
  uint64_t bytes = 0;   // as asked

  wire::HeapRef ref() const { return {offset, bytes}; }
  wire::HeapRef ref(uint64_t at, uint64_t len) const { return {offset + at, len}; }
};

class HeapAllocator {
 public:
  // `owner` is the slot index + 1 of the caller (what the host reclaims by).
  HeapAllocator(const RegionView& region, uint32_t owner) : region_(region), owner_(owner) {}
  ~HeapAllocator();  // frees what is still allocated
  HeapAllocator(const HeapAllocator&) = delete;
  HeapAllocator& operator=(const HeapAllocator&) = delete;

  // VMRPC_malloc: nothing when no run of free pages is large enough.
  std::optional<HeapBlock> allocate(uint64_t bytes);
  // VMRPC_free: `offset` must be one this allocator returned.
  bool free(uint64_t offset);
  void free_all();

  uint64_t allocated_pages() const;

 private:
  bool try_claim(uint64_t first, uint64_t n, uint64_t* failed_at);
  void release(uint64_t first, uint64_t n);

  RegionView region_;
  uint32_t owner_;
  mutable std::mutex mu_;
  uint64_t next_fit_ = 0;
  std::map<uint64_t, uint64_t> blocks_;  // first page -> pages
};

// Host side: give back every heap page owned by `owner` (a slot that went away).
void reclaim_heap_pages(const RegionView& region, uint32_t owner);

}  // namespace vmrpc
