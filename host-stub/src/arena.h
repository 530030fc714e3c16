// A client's device memory: a VMM arena (cuMemAddressReserve/cuMemCreate/cuMemMap) at an
// address range fixed per client, so that after a resume every device pointer can keep its
// value (DESIGN.md; cuda-runtime-internals.md §6: the driver honours a free hint and
// silently moves a taken one, so the result is always compared).
//
// One arena per Session, shared by all of the client's devices (VA is process-wide); the
// physical memory of an allocation lives on the device that allocates it.
//   - allocations >= kArenaOwnMappingMin get their own physical memory, rounded up to the
//     allocation granularity;
//   - smaller ones are carved, kArenaAlign-aligned like cudaMalloc, from shared chunks of
//     kArenaChunkBytes (or the granularity, if larger); a chunk is released when empty.
// VA inside the arena comes from a first-fit free list that coalesces.
//
// Not thread-safe: a Session's service thread alone uses its arena. Only the index
// registry (which arena ranges this process has handed out) is shared and locked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "driver_api.h"

namespace vmcuda::host {

// Knobs: where arenas live. Arena i of this process is [kArenaBase + i * kArenaStride,
// + kArenaStride). 0x500000000000 was honoured on the H200; index < kArenaMaxIndex keeps
// every arena below the host's mmap area (0x7f...).
inline constexpr uint64_t kArenaBase = 0x500000000000ull;
// 512 GiB of VA per client: PyTorch's expandable segments reserve about 1.125 times the GPU's
// memory per stream and pool kind, two of them on an H200 (141 GiB) ~318 GiB.
inline constexpr uint64_t kArenaStride = 512ull << 30;
inline constexpr unsigned kArenaMaxIndex = 64;
// Where Linux puts PIE programs and their heap (ELF_ET_DYN_BASE, 0x555555554000, plus up to
// 1 TiB of randomisation, the heap above): the stub's own, a new stub's after a restore and
// the guest program's (which reserves its client's range too) may lie anywhere in it, so no
// arena does. On the H100 a thread-mode stub with 22 clients found arena 21
// (0x554000000000) in its own heap.
inline constexpr uint64_t kArenaAvoidBegin = 0x550000000000ull, kArenaAvoidEnd = 0x570000000000ull;
inline constexpr uint64_t kArenaOwnMappingMin = 1ull << 20;  // own physical memory from 1 MiB
inline constexpr uint64_t kArenaChunkBytes = 2ull << 20;     // small allocations share these
inline constexpr uint64_t kArenaAlign = 512;  // cudaMalloc on the H200: small blocks 512 bytes apart, pitched bases 512-aligned

class DeviceArena {
 public:
  // Called before physical memory is unmapped and on every free (cudaFree synchronizes
  // natively): waits for everything of the client on every device it uses. The Session
  // gives one that synchronizes each of its contexts.
  using Synchronize = std::function<CUresult()>;

  // Claims the lowest free arena index of this process (no driver call); the VA is
  // reserved at the first allocate(). Without a free index, index() is -1 and allocate()
  // fails with CUDA_ERROR_OUT_OF_MEMORY.
  DeviceArena(const DriverApi& api, Synchronize synchronize);
  // Frees everything (unmap, release, address free) and hands the index back. Assumes
  // nothing of the client runs any more (Session::close synchronized it).
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  int index() const { return index_; }
  // The fixed range: [base(), base() + bytes()); bytes() is 0 without an index.
  uint64_t base() const { return index_ < 0 ? 0 : kArenaBase + static_cast<uint64_t>(index_) * kArenaStride; }
  uint64_t bytes() const { return index_ < 0 ? 0 : kArenaStride; }
  bool contains(uint64_t ptr) const { return index_ >= 0 && ptr >= base() && ptr - base() < bytes(); }

  // `bytes` (> 0) of device memory on host device ordinal `device` (a CUdevice), at a
  // kArenaAlign-aligned address inside the range. Errors: CUDA_ERROR_OUT_OF_MEMORY (range
  // or device full, no index, or the driver moved the reservation: `why`, if given, says
  // which), or the driver's error. The caller has a context current (any of the client's).
  CUresult allocate(int device, uint64_t bytes, uint64_t* ptr, std::string* why = nullptr);
  // Frees a pointer allocate() returned (exactly that pointer, else
  // CUDA_ERROR_INVALID_VALUE); synchronizes first.
  CUresult free(uint64_t ptr);
  // Grants (enable) or revokes RW access for host device ordinal `device` on every current
  // mapping and on every later one (peer access). A mapping's own device always keeps its
  // access. Returns the first driver error; a grant that fails is taken back (best effort)
  // and not applied to later mappings.
  CUresult set_peer_access(int device, bool enable);

  // ---- the guest's own virtual memory management (vmm.cc): ranges of this arena's VA the
  // guest reserved (cuMemAddressReserve) and physical memory it created (cuMemCreate), which
  // it maps into them itself. A suspend carries them (suspend.cc; adopt_guest at the resume).
  // `bytes` of VA (a multiple of `device`'s granularity) at a multiple of `alignment` (0 or a
  // power of two; at least the granularity), at `hint` when that range is free (a hint, as
  // CUDA's: elsewhere otherwise; an unaligned one is CUDA_ERROR_INVALID_VALUE, as the driver
  // answers). CUDA_ERROR_OUT_OF_MEMORY when the range is full.
  CUresult reserve_guest(int device, uint64_t bytes, uint64_t alignment, uint64_t hint, uint64_t* va,
                         std::string* why);
  void free_guest(uint64_t va, uint64_t bytes) { give_va(va, bytes); }
  // Physical memory on `device`, charged to the meter first (CUDA_ERROR_OUT_OF_MEMORY when
  // refused); release_guest_physical gives it back to the driver and the meter.
  CUresult create_guest_physical(int device, uint64_t bytes, CUmemGenericAllocationHandle* h);
  CUresult release_guest_physical(CUmemGenericAllocationHandle h, uint64_t bytes);
  // The driver's recommended granularity on `device` (what the arena's VA arithmetic uses).
  CUresult granularity_of(int device, uint64_t* g) { return granularity(device, g); }
  // ---- IPC (ipc.cc). Physical memory is made exportable as a POSIX fd where the device
  // supports it. export_fd: a new fd (the caller owns it) of the physical memory that holds
  // the allocation containing `ptr` (a whole chunk for a small one), and where the
  // allocation lies in it. CUDA_ERROR_INVALID_VALUE when `ptr` is in no allocation.
  struct Exported {
    uint64_t block = 0, block_bytes = 0;  // the allocation (its pointer) and its carved size
    uint64_t mapping_bytes = 0, offset = 0;  // the physical memory's size; the block's offset in it
    int device = 0;                          // host device ordinal
  };
  CUresult export_fd(uint64_t ptr, int* fd, Exported* what);
  // Maps `handle` (cuMemImportFromShareableHandle's, `bytes` long, on host device `device`)
  // at a fresh VA of this arena with the arena's access list; takes the handle (released at
  // unmap_import). Not charged to the VM: the exporter's mapping is.
  CUresult map_import(int device, unsigned long long handle, uint64_t bytes, uint64_t* va);
  // The same at `va`, which the caller holds out of the free VA: an import's range kept by
  // adopt_guest at a resume, or by unmap_import(keep_va) (suspend.cc, Session::ipc_attach).
  CUresult map_import_at(int device, unsigned long long handle, uint64_t bytes, uint64_t va);
  // Synchronizes, unmaps and releases what map_import mapped at `va`; with `keep_va` its
  // range stays out of the free VA (mapped again by map_import_at).
  CUresult unmap_import(uint64_t va, bool keep_va = false);
  size_t imports() const { return imports_.size(); }

  // ---- suspend/resume (suspend.cc). The physical memory goes and comes back; the layout
  // (every mapping's VA, size and device, every block, the free lists) stays, so every
  // pointer the guest holds keeps its value.
  struct MappingLayout {
    uint64_t va = 0, bytes = 0;
    int device = 0;  // host device ordinal (the Session translates it to and from guest indexes)
    bool chunk = false;
    std::map<uint64_t, uint64_t> free;  // chunks: free sub-ranges (offset -> bytes)
    uint64_t used = 0;
  };
  struct BlockLayout {
    uint64_t ptr = 0, bytes = 0, mapping = 0;
  };
  struct Layout {
    int index = -1;
    std::vector<MappingLayout> mappings;  // ascending VA
    std::vector<BlockLayout> blocks;      // ascending pointer
    std::vector<int> peers;
  };
  Layout layout() const;
  // Whether the physical memory is there (false between release_memory and restore_memory).
  bool holds_memory() const { return !released_; }
  // Unmaps and releases every mapping's physical memory and frees the reservation; the
  // layout stays. Assumes nothing of the client runs (the caller synchronized).
  CUresult release_memory();
  // Takes `layout` as its own (the arena holds no memory: fresh or released); claims
  // layout.index in this process. The layout is untrusted (a state file): false and `why`
  // when it is not one this arena could have made (outside the range, overlapping,
  // blocks outside their mapping, an index in use).
  bool adopt(const Layout& layout, std::string* why);
  // After adopt(), before restore_memory(): a guest reservation of the saved state, taken
  // out of the free VA again. False and `why` when [va, va + bytes) is not wholly free
  // (outside the arena, overlapping the arena's memory or another reservation).
  bool adopt_guest(uint64_t va, uint64_t bytes, std::string* why);
  // Reserves the range at its base again (when anything lies in it: memory or guest
  // reservations) and recreates every mapping on its device with the access it had; on
  // failure gives back what it made (still released) and says why.
  CUresult restore_memory(std::string* why);

  // Device memory is charged before the driver maps it (`delta` > 0: may refuse, then the
  // allocation fails with CUDA_ERROR_OUT_OF_MEMORY) and refunded when unmapped (< 0): the
  // VM's ledger (vm_ledger.h) counts what the driver really maps.
  using Meter = std::function<bool(int64_t delta)>;
  void set_meter(Meter meter) { meter_ = std::move(meter); }
  // release_memory() keeps the address range reserved (no memory in it) for restore_memory().
  // For clients that share the process (--isolation thread): the driver puts other contexts'
  // own allocations next to the ranges reserved so far, so a range given back while its client
  // is suspended was taken before its resume (H100, 2026-11-27: "the driver placed device
  // arena 1 at 0x510000000000 instead of 0x508000000000").
  void keep_range_while_released(bool keep) { keep_range_ = keep; }
  // Introspection (tests, logs).
  uint64_t physical_bytes() const { return physical_bytes_; }  // created with cuMemCreate
  size_t live_allocations() const { return blocks_.size(); }
  size_t mappings() const { return mappings_.size(); }
  // Bytes a request of `bytes` occupies in the arena (size rounding), 0 for 0.
  uint64_t footprint(int device, uint64_t bytes);

 private:
  struct Mapping {  // one cuMemCreate handle mapped at its VA
    unsigned long long handle;
    uint64_t bytes;
    int device;
    // Chunks only: free sub-ranges (offset -> bytes) and live sub-allocations.
    bool chunk = false;
    std::map<uint64_t, uint64_t> free;
    size_t used = 0;
  };
  struct Block {  // what allocate() returned
    uint64_t bytes;      // as carved (rounded)
    uint64_t mapping;    // VA of its Mapping
  };

  CUresult reserve(std::string* why);
  // cuMemCreate's properties for `device` (exportable where the device can).
  CUmemAllocationProp physical_prop(int device);
  // cuMemCreate with those properties; without the handle type if the driver refuses it.
  CUresult create_physical(int device, uint64_t bytes, unsigned long long* handle);
  CUresult granularity(int device, uint64_t* g);
  // VA from the arena's free list (first fit), multiples of the granularity.
  bool take_va(uint64_t bytes, uint64_t* va);
  void give_va(uint64_t va, uint64_t bytes);
  // Physical memory of `bytes` on `device`, mapped at a fresh VA with the access list.
  CUresult map_new(int device, uint64_t bytes, bool chunk, uint64_t* va);
  CUresult unmap(std::map<uint64_t, Mapping>::iterator it);
  CUresult apply_access(uint64_t va, uint64_t bytes, int owner);

  const DriverApi& api_;
  Synchronize synchronize_;
  int index_ = -1;
  bool reserved_ = false;
  std::map<int, uint64_t> granularity_;        // per device
  std::map<uint64_t, uint64_t> va_free_;       // arena VA: start -> bytes
  std::map<uint64_t, Mapping> mappings_;       // VA -> mapping (own or chunk)
  std::map<uint64_t, Block> blocks_;           // pointer -> block
  std::vector<int> peers_;                     // devices granted access everywhere
  std::map<uint64_t, Mapping> imports_;        // VA -> another client's memory (map_import)
  std::map<int, bool> posix_fd_;               // per device: exportable as a POSIX fd
  uint64_t physical_bytes_ = 0;
  Meter meter_;
  bool keep_range_ = false;
  bool released_ = false;  // release_memory() ran, restore_memory() not yet
};

}  // namespace vmcuda::host
