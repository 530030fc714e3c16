#include "vgpu_db/allocations.h"

#include <iterator>
#include <mutex>

namespace vgpu_db {

AllocationMap& AllocationMap::process() {
  static auto* map = new AllocationMap;  // never destroyed: used from atexit handlers
  return *map;
}

void AllocationMap::add(const Allocation& a) {
  std::unique_lock l(mu_);
  by_base_[a.base] = a;
}

std::optional<Allocation> AllocationMap::remove(uint64_t base, Allocation::Kind kind) {
  std::unique_lock l(mu_);
  auto it = by_base_.find(base);
  if (it == by_base_.end() || it->second.kind != kind) return std::nullopt;
  Allocation a = it->second;
  by_base_.erase(it);
  return a;
}

size_t AllocationMap::remove_device(int device, Allocation::Kind kind) {
  std::unique_lock l(mu_);
  // Memory mapped by cuMemMap is not the context's: it outlives a reset, as on the host.
  return std::erase_if(by_base_, [&](const auto& kv) {
    return kv.second.device == device && kv.second.kind == kind && !(kv.second.flags & Allocation::kVmmMapping);
  });
}

std::optional<Allocation> AllocationMap::find(uint64_t ptr, uint64_t bytes) const {
  std::shared_lock l(mu_);
  auto it = by_base_.upper_bound(ptr);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  const Allocation& a = it->second;
  const uint64_t off = ptr - a.base;
  if (off >= a.bytes && !(off == 0 && a.bytes == 0)) return std::nullopt;
  if (bytes <= a.bytes - off) return a;
  if (a.kind != Allocation::kDevice || !(a.flags & Allocation::kVmmMapping)) return std::nullopt;
  // VMM mappings without a gap between them on one device: the range may span them.
  uint64_t end = a.base + a.bytes;
  for (auto next = std::next(it); bytes > end - ptr; ++next) {
    if (next == by_base_.end() || next->first != end || next->second.kind != Allocation::kDevice ||
        !(next->second.flags & Allocation::kVmmMapping) || next->second.device != a.device)
      return std::nullopt;
    end += next->second.bytes;
  }
  return a;
}

std::optional<Allocation> AllocationMap::first_overlap(uint64_t ptr, uint64_t bytes) const {
  std::shared_lock l(mu_);
  auto it = by_base_.upper_bound(ptr);
  if (it != by_base_.begin()) {
    auto prev = std::prev(it);
    if (ptr - prev->first < prev->second.bytes) return prev->second;  // holds ptr
  }
  if (it != by_base_.end() && it->first - ptr < bytes) return it->second;  // starts inside
  return std::nullopt;
}

}  // namespace vgpu_db
