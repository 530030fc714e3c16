// What this process knows about a pointer an app passes (from vgpu-db's allocation map),
// shared by the memory area's files: device memory (cudaMalloc, module globals) and pinned
// blocks of the shared heap (cudaMallocHost, cudaMallocManaged), which copies use without
// staging.
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

// Whether [p, p+n) lies in one block of managed memory (cudaMallocManaged: shared heap
// memory at the same address on both sides, which host and device both reach).
inline bool is_managed(const void* p, uint64_t n) {
  auto a = vgpu_db::AllocationMap::process().find(addr(p), n);
  return a && a->kind == vgpu_db::Allocation::kManaged;
}

// Whether [p, p+n) lies in one block of host memory that CUDA's memsets may name, as under
// unified addressing the device reaches it: pinned (cudaMallocHost, cudaHostAlloc), managed
// or registered (cudaHostRegister) memory.
inline bool is_memset_host_memory(const void* p, uint64_t n) {
  auto a = vgpu_db::AllocationMap::process().find(addr(p), n);
  return a && (a->kind == vgpu_db::Allocation::kPinnedHost || a->kind == vgpu_db::Allocation::kManaged ||
               a->kind == vgpu_db::Allocation::kRegisteredHost);
}

// [p, p+n) as a reference into the shared heap, when it lies in one pinned block (of
// cudaMallocHost or cudaMallocManaged).
inline std::optional<vmrpc::wire::HeapRef> pinned_range(const void* p, uint64_t n) {
  auto a = vgpu_db::AllocationMap::process().find(addr(p), n);
  if (!a || (a->kind != vgpu_db::Allocation::kPinnedHost && a->kind != vgpu_db::Allocation::kManaged))
    return std::nullopt;
  return vmrpc::wire::HeapRef{a->heap_offset + (addr(p) - a->base), n};
}

}  // namespace vmcuda::guest
