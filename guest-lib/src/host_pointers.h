// What this process knows about a pointer an app passes (from vgpu-db's allocation map),
// shared by the memory area's files: device memory (cudaMalloc, module globals) and pinned
// blocks of the shared heap (cudaMallocHost), which copies use without staging.
#pragma once

#include <cstdint>
#include <optional>

#include "vgpu_db/allocations.h"
#include "vmrpc/wire.h"

namespace vmcuda::guest {

inline uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Whether [p, p+n) lies in one device allocation of this process.
inline bool is_device(const void* p, uint64_t n) {
  auto a = vgpu_db::AllocationMap::process().find(addr(p), n);
  return a && a->is_device();
}

// [p, p+n) as a reference into the shared heap, when it lies in one pinned block.
inline std::optional<vmrpc::wire::HeapRef> pinned_range(const void* p, uint64_t n) {
  auto a = vgpu_db::AllocationMap::process().find(addr(p), n);
  if (!a || a->kind != vgpu_db::Allocation::kPinnedHost) return std::nullopt;
  return vmrpc::wire::HeapRef{a->heap_offset + (addr(p) - a->base), n};
}

}  // namespace vmcuda::guest
