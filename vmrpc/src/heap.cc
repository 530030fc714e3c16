#include "vmrpc/heap.h"

#include "vmrpc/ordering.h"

namespace vmrpc {

HeapAllocator::~HeapAllocator() { free_all(); }

bool HeapAllocator::try_claim(uint64_t first, uint64_t n, uint64_t* failed_at) {
  auto* table = region_.heap_table();
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t expected = 0;
    if (!ordering::compare_exchange(table[first + i], expected, owner_)) {
      release(first, i);
      *failed_at = first + i;
      return false;
    }
  }
  return true;
}

void HeapAllocator::release(uint64_t first, uint64_t n) {
  auto* table = region_.heap_table();
  for (uint64_t i = 0; i < n; ++i) ordering::store_release(table[first + i], uint32_t{0});
}

std::optional<HeapBlock> HeapAllocator::allocate(uint64_t bytes) {
  const auto& l = region_.layout();
  const uint64_t page = l.heap_page_bytes;
  const uint64_t total = l.heap_pages();
  if (bytes == 0) bytes = 1;
  if (bytes > l.heap_bytes) return std::nullopt;
  const uint64_t n = (bytes + page - 1) / page;
  std::lock_guard lock(mu_);
  auto* table = region_.heap_table();
  // Next fit over at most two passes (from the hint to the end, then from 0).
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t start = pass == 0 ? next_fit_ : 0;
    const uint64_t stop = pass == 0 ? total : std::min(next_fit_ + n, total);
    uint64_t run = 0;
    for (uint64_t p = start; p < stop; ++p) {
      if (ordering::load_relaxed(table[p]) != 0) {
        run = 0;
        start = p + 1;
        continue;
      }
      if (++run < n) continue;
      uint64_t failed = 0;
      if (try_claim(start, n, &failed)) {
        blocks_[start] = n;
        next_fit_ = start + n < total ? start + n : 0;
        return HeapBlock{region_.heap().data() + start * page, start * page, bytes};
      }
      // Someone else took a page meanwhile: go on after it.
      p = failed;
      run = 0;
      start = failed + 1;
    }
  }
  return std::nullopt;
}

bool HeapAllocator::free(uint64_t offset) {
  const uint64_t page = region_.layout().heap_page_bytes;
  if (offset % page) return false;
  std::lock_guard lock(mu_);
  auto it = blocks_.find(offset / page);
  if (it == blocks_.end()) return false;
  release(it->first, it->second);
  blocks_.erase(it);
  return true;
}

void HeapAllocator::free_all() {
  std::lock_guard lock(mu_);
  for (auto& [first, n] : blocks_) release(first, n);
  blocks_.clear();
}

uint64_t HeapAllocator::allocated_pages() const {
  std::lock_guard lock(mu_);
  uint64_t s = 0;
  for (auto& [first, n] : blocks_) s += n;
  return s;
}

void reclaim_heap_pages(const RegionView& region, uint32_t owner) {
  auto* table = region.heap_table();
  const uint64_t total = region.layout().heap_pages();
  for (uint64_t p = 0; p < total; ++p) {
    uint32_t expected = owner;
    ordering::compare_exchange(table[p], expected, uint32_t{0});
  }
}

}  // namespace vmrpc
