// The guest's record of its own memory: device allocations (cudaMalloc, cudaMallocPitch),
// pinned host blocks carved from the shared heap (cudaMallocHost), and the device storage
// of module variables once resolved (cudaGetSymbolAddress and friends: device memory the
// process may copy to and from, but not free). Used to check pointers locally
// (so copies and frees fail where CUDA fails them, without a round trip), to resolve
// cudaMemcpyDefault, and for cudaPointerGetAttributes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>

namespace vgpu_db {

struct Allocation {
  // kManaged: cudaMallocManaged, a pinned and mapped block of the shared heap at the same
  // address on both sides; kRegisteredHost: cudaHostRegister'ed app memory outside the heap.
  enum Kind { kDevice, kPinnedHost, kModuleGlobal, kManaged, kRegisteredHost };
  uint64_t base = 0;
  uint64_t bytes = 0;
  Kind kind = kDevice;
  int device = 0;
  uint64_t heap_offset = 0;  // kPinnedHost, kManaged: where in the shared heap
  unsigned flags = 0;        // kPinnedHost: cudaHostAlloc's; kRegisteredHost: cudaHostRegister's; kDevice: kVmmMapping
  // kDevice mapped by cuMemMap: a range may run on over such mappings that follow one another
  // on the same device (one reservation mapped chunk by chunk).
  static constexpr unsigned kVmmMapping = 1;

  // Device memory: a cudaMalloc'ed block or a module variable's storage.
  bool is_device() const { return kind == kDevice || kind == kModuleGlobal; }
};

class AllocationMap {
 public:
  static AllocationMap& process();

  void add(const Allocation& a);
  // Removes the allocation that starts at `base`; nothing when there is none.
  std::optional<Allocation> remove(uint64_t base, Allocation::Kind kind);
  // Removes every allocation of `kind` on `device` (cudaDeviceReset; VMM mappings stay);
  // returns how many.
  size_t remove_device(int device, Allocation::Kind kind);
  // The allocation that holds [ptr, ptr + bytes), if one does.
  std::optional<Allocation> find(uint64_t ptr, uint64_t bytes = 1) const;
  // The lowest allocation that shares a byte with [ptr, ptr + bytes), if any does.
  std::optional<Allocation> first_overlap(uint64_t ptr, uint64_t bytes) const;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, Allocation> by_base_;
};

}  // namespace vgpu_db
