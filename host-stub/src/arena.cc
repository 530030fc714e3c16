#include "arena.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "vmrpc/knobs.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

namespace {

// Which arena indexes this process has handed out (thread mode: many sessions).
std::mutex g_index_mu;
std::vector<bool> g_index_used(kArenaMaxIndex, false);

// Whether arena i may be used at all (arena.h: kArenaAvoidBegin).
bool usable_index(unsigned i) {
  const uint64_t begin = kArenaBase + uint64_t{i} * kArenaStride;
  return begin + kArenaStride <= kArenaAvoidBegin || begin >= kArenaAvoidEnd;
}

int claim_index() {
  std::lock_guard l(g_index_mu);
  for (unsigned i = 0; i < kArenaMaxIndex; ++i)
    if (usable_index(i) && !g_index_used[i]) {
      g_index_used[i] = true;
      return static_cast<int>(i);
    }
  return -1;
}

// Claims exactly `i` (a restore keeps its arena's addresses); false when it is taken.
bool claim_exact_index(int i) {
  if (i < 0 || static_cast<unsigned>(i) >= kArenaMaxIndex || !usable_index(static_cast<unsigned>(i))) return false;
  std::lock_guard l(g_index_mu);
  if (g_index_used[static_cast<unsigned>(i)]) return false;
  g_index_used[static_cast<unsigned>(i)] = true;
  return true;
}

void release_index(int i) {
  if (i < 0) return;
  std::lock_guard l(g_index_mu);
  g_index_used[static_cast<unsigned>(i)] = false;
}

// First fit in a free list (start -> bytes): the lowest range of at least `bytes`, taken
// from its start (which keeps every range's alignment).
bool take_first_fit(std::map<uint64_t, uint64_t>& free, uint64_t bytes, uint64_t* at) {
  for (auto it = free.begin(); it != free.end(); ++it) {
    if (it->second < bytes) continue;
    *at = it->first;
    const uint64_t rest = it->second - bytes;
    free.erase(it);
    if (rest) free.emplace(*at + bytes, rest);
    return true;
  }
  return false;
}

// Returns [at, at+bytes) to a free list, merged with its neighbours.
void give_coalescing(std::map<uint64_t, uint64_t>& free, uint64_t at, uint64_t bytes) {
  auto next = free.lower_bound(at);
  if (next != free.end() && at + bytes == next->first) {
    bytes += next->second;
    next = free.erase(next);
  }
  if (next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      prev->second += bytes;
      return;
    }
  }
  free.emplace(at, bytes);
}

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

CUmemAccessDesc rw(int device, bool enable = true) {
  return CUmemAccessDesc{{CU_MEM_LOCATION_TYPE_DEVICE, device},
                         enable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE};
}

}  // namespace

DeviceArena::DeviceArena(const DriverApi& api, Synchronize synchronize)
    : api_(api), synchronize_(std::move(synchronize)), index_(claim_index()) {}

DeviceArena::~DeviceArena() {
  while (!imports_.empty()) unmap_import(imports_.begin()->first);
  if (released_) mappings_.clear();  // nothing mapped: the layout alone
  while (!mappings_.empty()) unmap(mappings_.begin());
  blocks_.clear();
  if (reserved_) api_.cuMemAddressFree(base(), bytes());
  release_index(index_);
}

CUresult DeviceArena::reserve(std::string* why) {
  // With every client in one process (`--isolation thread`) the driver places clients' own
  // allocations (a library's workspace, a reservation without a hint) next to the arenas
  // reserved so far, where the next index lies (H100, 2026-11-27). An arena no pointer refers
  // to yet (never reserved, nothing restored) moves to the next free index instead; one with
  // pointers keeps its place or fails.
  const bool movable = !released_ && !reserved_;
  const int first = index_;
  std::vector<int> passed;  // indexes whose range the driver holds, claimed while trying
  CUdeviceptr got = 0;
  CUresult r = api_.cuMemAddressReserve(&got, bytes(), 0, base(), 0);
  while (r == CUDA_SUCCESS && got != base() && movable) {
    const int next = claim_index();
    if (next < 0) break;
    api_.cuMemAddressFree(got, bytes());
    passed.push_back(index_);
    index_ = next;
    got = 0;
    r = api_.cuMemAddressReserve(&got, bytes(), 0, base(), 0);
  }
  if (r != CUDA_SUCCESS || got != base()) {  // back to the arena's own index, to try again later
    for (int i : passed)
      if (i != first) release_index(i);
    if (index_ != first) release_index(index_);
    index_ = first;
  } else {
    for (int i : passed) release_index(i);
  }
  if (r != CUDA_SUCCESS) {
    if (why) *why = "cannot reserve the device arena at " + hex(base()) + ": " + describe(api_, r);
    return r;
  }
  if (got != base()) {
    // The hint was taken (another reservation, or the driver's own mappings in this
    // process): pointers would not keep their value across a resume, so refuse.
    api_.cuMemAddressFree(got, bytes());
    if (why)
      *why = "the driver placed device arena " + std::to_string(index_) + " at " + hex(got) + " instead of " +
             hex(base()) + " (that range is in use in this process)";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  reserved_ = true;
  va_free_.clear();
  va_free_.emplace(base(), bytes());
  return CUDA_SUCCESS;
}

CUresult DeviceArena::granularity(int device, uint64_t* g) {
  if (auto it = granularity_.find(device); it != granularity_.end()) return *g = it->second, CUDA_SUCCESS;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
  size_t value = 0;
  if (CUresult r = api_.cuMemGetAllocationGranularity(&value, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      r != CUDA_SUCCESS)
    return r;
  // A power of two that divides the stride (2 MiB on the H200); anything else would break
  // the VA arithmetic, so refuse it rather than misalign.
  if (value == 0 || (value & (value - 1)) || kArenaStride % value) return CUDA_ERROR_NOT_SUPPORTED;
  granularity_[device] = value;
  *g = value;
  return CUDA_SUCCESS;
}

uint64_t DeviceArena::footprint(int device, uint64_t bytes) {
  if (bytes == 0) return 0;
  if (bytes < kArenaOwnMappingMin) return round_up(bytes, kArenaAlign);
  uint64_t g = kArenaChunkBytes;
  granularity(device, &g);
  return round_up(bytes, g);
}

bool DeviceArena::take_va(uint64_t bytes, uint64_t* va) { return take_first_fit(va_free_, bytes, va); }

void DeviceArena::give_va(uint64_t va, uint64_t bytes) { give_coalescing(va_free_, va, bytes); }

CUresult DeviceArena::apply_access(uint64_t va, uint64_t bytes, int owner) {
  std::vector<CUmemAccessDesc> desc{rw(owner)};
  for (int p : peers_)
    if (p != owner) desc.push_back(rw(p));
  return api_.cuMemSetAccess(va, bytes, desc.data(), desc.size());
}

CUmemAllocationProp DeviceArena::physical_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
  // Exportable as a POSIX fd where the device can (IPC between a VM's programs, ipc.cc):
  // the handle type only allows cuMemExportToShareableHandle later, nothing else changes.
  auto it = posix_fd_.find(device);
  if (it == posix_fd_.end()) {
    int v = 0;
    if (vmrpc::knobs::kExportableMemory.get() == 0 || api_.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device) !=
        CUDA_SUCCESS)
      v = 0;
    it = posix_fd_.emplace(device, v != 0).first;
  }
  if (it->second) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

CUresult DeviceArena::create_physical(int device, uint64_t bytes, unsigned long long* handle) {
  CUmemAllocationProp prop = physical_prop(device);
  CUresult r = api_.cuMemCreate(handle, bytes, &prop, 0);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY && prop.requestedHandleTypes) {
    // The device said it could, yet the driver refuses exportable memory: memory comes
    // first, IPC goes (cudaIpcGetMemHandle then answers cudaErrorNotSupported).
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    r = api_.cuMemCreate(handle, bytes, &prop, 0);
    if (r == CUDA_SUCCESS) {
      posix_fd_[device] = false;
      VMRPC_LOG(kWarn, "stub", "device " + std::to_string(device) +
                                   ": the driver refused exportable device memory; IPC between programs is off there");
    }
  }
  return r;
}

CUresult DeviceArena::export_fd(uint64_t ptr, int* fd, Exported* what) {
  auto b = blocks_.upper_bound(ptr);
  if (b == blocks_.begin()) return CUDA_ERROR_INVALID_VALUE;
  --b;
  if (ptr - b->first >= b->second.bytes) return CUDA_ERROR_INVALID_VALUE;
  if (released_) return CUDA_ERROR_ILLEGAL_STATE;
  const Mapping& m = mappings_.at(b->second.mapping);
  int out = -1;
  if (CUresult r = api_.cuMemExportToShareableHandle(&out, m.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      r != CUDA_SUCCESS)
    return r;
  *fd = out;
  what->block = b->first;
  what->block_bytes = b->second.bytes;
  what->mapping_bytes = m.bytes;
  what->offset = b->first - b->second.mapping;
  what->device = m.device;
  return CUDA_SUCCESS;
}

CUresult DeviceArena::map_import(int device, unsigned long long handle, uint64_t bytes, uint64_t* va) {
  if (released_) return CUDA_ERROR_ILLEGAL_STATE;
  if (index_ < 0 || bytes == 0 || bytes > kArenaStride) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!reserved_)
    if (CUresult r = reserve(nullptr); r != CUDA_SUCCESS) return r;
  uint64_t g = 0;
  if (CUresult r = granularity(device, &g); r != CUDA_SUCCESS) return r;
  if (bytes % g) return CUDA_ERROR_INVALID_VALUE;
  if (!take_va(bytes, va)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = api_.cuMemMap(*va, bytes, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    r = apply_access(*va, bytes, device);
    if (r != CUDA_SUCCESS) api_.cuMemUnmap(*va, bytes);
  }
  if (r != CUDA_SUCCESS) {
    give_va(*va, bytes);
    return r;
  }
  imports_[*va] = Mapping{handle, bytes, device};
  return CUDA_SUCCESS;
}

CUresult DeviceArena::map_import_at(int device, unsigned long long handle, uint64_t bytes, uint64_t va) {
  if (released_ || !reserved_) return CUDA_ERROR_ILLEGAL_STATE;
  if (bytes == 0 || !contains(va) || va - base() > this->bytes() - bytes) return CUDA_ERROR_INVALID_VALUE;
  if (imports_.contains(va)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t g = 0;
  if (CUresult r = granularity(device, &g); r != CUDA_SUCCESS) return r;
  if (bytes % g || va % g) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = api_.cuMemMap(va, bytes, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    r = apply_access(va, bytes, device);
    if (r != CUDA_SUCCESS) api_.cuMemUnmap(va, bytes);
  }
  if (r != CUDA_SUCCESS) return r;
  imports_[va] = Mapping{handle, bytes, device};
  return CUDA_SUCCESS;
}

CUresult DeviceArena::unmap_import(uint64_t va, bool keep_va) {
  auto it = imports_.find(va);
  if (it == imports_.end()) return CUDA_ERROR_INVALID_VALUE;
  // Nothing of this client may still use it (cudaIpcCloseMemHandle waits as cudaFree does).
  const CUresult sync = synchronize_ ? synchronize_() : CUDA_SUCCESS;
  CUresult r = api_.cuMemUnmap(va, it->second.bytes);
  const CUresult r2 = api_.cuMemRelease(it->second.handle);
  if (r == CUDA_SUCCESS) r = r2;
  if (!keep_va) give_va(va, it->second.bytes);
  imports_.erase(it);
  return sync != CUDA_SUCCESS ? sync : r;
}

CUresult DeviceArena::map_new(int device, uint64_t bytes, bool chunk, uint64_t* va) {
  if (!take_va(bytes, va)) return CUDA_ERROR_OUT_OF_MEMORY;  // the arena's range is full
  if (meter_ && !meter_(static_cast<int64_t>(bytes))) {
    give_va(*va, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;  // the VM's memory quota
  }
  CUmemGenericAllocationHandle h = 0;
  CUresult r = create_physical(device, bytes, &h);
  if (r != CUDA_SUCCESS) {
    give_va(*va, bytes);
    if (meter_) meter_(-static_cast<int64_t>(bytes));
    return r;
  }
  r = api_.cuMemMap(*va, bytes, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    r = apply_access(*va, bytes, device);
    if (r != CUDA_SUCCESS) api_.cuMemUnmap(*va, bytes);
  }
  if (r != CUDA_SUCCESS) {
    api_.cuMemRelease(h);
    give_va(*va, bytes);
    if (meter_) meter_(-static_cast<int64_t>(bytes));
    return r;
  }
  Mapping& m = mappings_[*va];
  m.handle = h;
  m.bytes = bytes;
  m.device = device;
  m.chunk = chunk;
  if (chunk) m.free.emplace(0, bytes);
  physical_bytes_ += bytes;
  return CUDA_SUCCESS;
}

CUresult DeviceArena::unmap(std::map<uint64_t, Mapping>::iterator it) {
  const uint64_t va = it->first;
  const Mapping& m = it->second;
  CUresult r = api_.cuMemUnmap(va, m.bytes);
  const CUresult r2 = api_.cuMemRelease(m.handle);
  if (r == CUDA_SUCCESS) r = r2;
  give_va(va, m.bytes);
  physical_bytes_ -= m.bytes;
  if (meter_) meter_(-static_cast<int64_t>(m.bytes));
  mappings_.erase(it);
  return r;
}

CUresult DeviceArena::allocate(int device, uint64_t bytes, uint64_t* ptr, std::string* why) {
  if (bytes == 0 || !ptr) return CUDA_ERROR_INVALID_VALUE;
  if (released_) return CUDA_ERROR_ILLEGAL_STATE;  // suspended: nothing may be allocated
  if (index_ < 0) {
    if (why) *why = "no free device arena index in this process (at most " + std::to_string(kArenaMaxIndex) + ")";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (bytes > kArenaStride) return CUDA_ERROR_OUT_OF_MEMORY;  // more than the range (and no overflow below)
  if (!reserved_)
    if (CUresult r = reserve(why); r != CUDA_SUCCESS) return r;
  uint64_t g = 0;
  if (CUresult r = granularity(device, &g); r != CUDA_SUCCESS) return r;

  if (bytes >= kArenaOwnMappingMin) {
    const uint64_t size = round_up(bytes, g);
    uint64_t va = 0;
    if (CUresult r = map_new(device, size, false, &va); r != CUDA_SUCCESS) return r;
    blocks_[va] = Block{size, va};
    *ptr = va;
    return CUDA_SUCCESS;
  }

  // Small: first fit in this device's chunks (in address order), else a new chunk.
  const uint64_t size = round_up(bytes, kArenaAlign);
  uint64_t off = 0;
  auto chunk = mappings_.end();
  for (auto it = mappings_.begin(); it != mappings_.end(); ++it)
    if (it->second.chunk && it->second.device == device && take_first_fit(it->second.free, size, &off)) {
      chunk = it;
      break;
    }
  if (chunk == mappings_.end()) {
    uint64_t va = 0;
    if (CUresult r = map_new(device, std::max(kArenaChunkBytes, g), true, &va); r != CUDA_SUCCESS) return r;
    chunk = mappings_.find(va);
    take_first_fit(chunk->second.free, size, &off);
  }
  ++chunk->second.used;
  *ptr = chunk->first + off;
  blocks_[*ptr] = Block{size, chunk->first};
  return CUDA_SUCCESS;
}

CUresult DeviceArena::free(uint64_t ptr) {
  auto b = blocks_.find(ptr);
  if (b == blocks_.end()) return CUDA_ERROR_INVALID_VALUE;  // not a pointer allocate() returned
  // As cudaFree: nothing of the client may still use the memory. Memory that a dead
  // context might still touch is freed all the same (nothing runs there any more).
  const CUresult sync = synchronize_ ? synchronize_() : CUDA_SUCCESS;
  const Block block = b->second;
  blocks_.erase(b);
  auto m = mappings_.find(block.mapping);
  CUresult r = CUDA_SUCCESS;
  if (!m->second.chunk) {
    r = unmap(m);
  } else {
    give_coalescing(m->second.free, ptr - m->first, block.bytes);
    if (--m->second.used == 0) r = unmap(m);  // an empty chunk gives its memory back
  }
  return sync != CUDA_SUCCESS ? sync : r;
}

CUresult DeviceArena::set_peer_access(int device, bool enable) {
  auto it = std::find(peers_.begin(), peers_.end(), device);
  if (enable && it == peers_.end()) peers_.push_back(device);
  if (!enable && it != peers_.end()) peers_.erase(it);
  CUresult first = CUDA_SUCCESS;
  for (auto* maps : {&mappings_, &imports_}) {
    for (auto& [va, m] : *maps) {
      if (m.device == device) continue;  // its own device keeps its access
      const CUmemAccessDesc d = rw(device, enable);
      if (CUresult r = api_.cuMemSetAccess(va, m.bytes, &d, 1); r != CUDA_SUCCESS && first == CUDA_SUCCESS) first = r;
    }
  }
  if (enable && first != CUDA_SUCCESS) {
    // Not granted: take back what was, and keep it out of later mappings (whose access
    // would fail with it).
    peers_.erase(std::find(peers_.begin(), peers_.end(), device));
    const CUmemAccessDesc none = rw(device, false);
    for (auto& [va, m] : mappings_)
      if (m.device != device) api_.cuMemSetAccess(va, m.bytes, &none, 1);
  }
  return first;
}

// ---------------------------------------------------------------- the guest's VMM

CUresult DeviceArena::reserve_guest(int device, uint64_t bytes, uint64_t alignment, uint64_t hint, uint64_t* va,
                                    std::string* why) {
  if (released_) return CUDA_ERROR_ILLEGAL_STATE;
  if (index_ < 0) {
    if (why) *why = "no free device arena index in this process (at most " + std::to_string(kArenaMaxIndex) + ")";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!reserved_)
    if (CUresult r = reserve(why); r != CUDA_SUCCESS) return r;
  uint64_t g = 0;
  if (CUresult r = granularity(device, &g); r != CUDA_SUCCESS) return r;
  if (bytes == 0 || bytes % g || (alignment & (alignment - 1))) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > kArenaStride) return CUDA_ERROR_OUT_OF_MEMORY;
  // As the driver: a hint must be aligned like the range (else CUDA_ERROR_INVALID_VALUE); an
  // aligned one that is taken is only a hint.
  if (hint % g || (alignment && hint % alignment)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t align = std::max(alignment, g);
  auto take = [&](std::map<uint64_t, uint64_t>::iterator it, uint64_t at) {
    const uint64_t start = it->first, size = it->second;
    va_free_.erase(it);
    if (at > start) va_free_.emplace(start, at - start);
    if (start + size > at + bytes) va_free_.emplace(at + bytes, start + size - at - bytes);
    *va = at;
  };
  if (hint) {
    auto it = va_free_.upper_bound(hint);
    if (it != va_free_.begin()) {
      --it;
      if (hint - it->first < it->second && bytes <= it->second - (hint - it->first)) return take(it, hint), CUDA_SUCCESS;
    }
  }
  for (auto it = va_free_.begin(); it != va_free_.end(); ++it) {
    const uint64_t at = round_up(it->first, align);
    if (at - it->first < it->second && bytes <= it->second - (at - it->first)) return take(it, at), CUDA_SUCCESS;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult DeviceArena::create_guest_physical(int device, uint64_t bytes, CUmemGenericAllocationHandle* h) {
  if (released_) return CUDA_ERROR_ILLEGAL_STATE;
  if (meter_ && !meter_(static_cast<int64_t>(bytes))) return CUDA_ERROR_OUT_OF_MEMORY;  // the VM's quota
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
  const CUresult r = api_.cuMemCreate(h, bytes, &prop, 0);
  if (r != CUDA_SUCCESS) {
    if (meter_) meter_(-static_cast<int64_t>(bytes));
    return r;
  }
  physical_bytes_ += bytes;
  return CUDA_SUCCESS;
}

CUresult DeviceArena::release_guest_physical(CUmemGenericAllocationHandle h, uint64_t bytes) {
  const CUresult r = api_.cuMemRelease(h);
  physical_bytes_ -= bytes;
  if (meter_) meter_(-static_cast<int64_t>(bytes));
  return r;
}

// ---------------------------------------------------------------- suspend/resume

DeviceArena::Layout DeviceArena::layout() const {
  Layout l;
  l.index = index_;
  for (const auto& [va, m] : mappings_) l.mappings.push_back({va, m.bytes, m.device, m.chunk, m.free, m.used});
  for (const auto& [ptr, b] : blocks_) l.blocks.push_back({ptr, b.bytes, b.mapping});
  l.peers = peers_;
  return l;
}

CUresult DeviceArena::release_memory() {
  if (released_) return CUDA_SUCCESS;
  CUresult first = CUDA_SUCCESS;
  for (auto& [va, m] : mappings_) {
    CUresult r = api_.cuMemUnmap(va, m.bytes);
    if (const CUresult r2 = api_.cuMemRelease(m.handle); r == CUDA_SUCCESS) r = r2;
    if (r != CUDA_SUCCESS && first == CUDA_SUCCESS) first = r;
    m.handle = 0;
  }
  if (reserved_) api_.cuMemAddressFree(base(), bytes());
  reserved_ = false;
  if (meter_) meter_(-static_cast<int64_t>(physical_bytes_));
  physical_bytes_ = 0;
  released_ = true;
  return first;
}

bool DeviceArena::adopt(const Layout& l, std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = "device memory layout: " + w;
    return false;
  };
  if (!released_ && !mappings_.empty()) return fail("the arena still holds memory");
  if (l.index != index_) {
    if (!claim_exact_index(l.index))
      return fail("arena " + std::to_string(l.index) + " (device addresses from " +
                  hex(kArenaBase + static_cast<uint64_t>(std::max(l.index, 0)) * kArenaStride) +
                  ") is in use by another client of this stub, or out of range");
    release_index(index_);
    index_ = l.index;
  }
  // Everything below is checked before anything is taken over.
  std::map<uint64_t, Mapping> mappings;
  for (const MappingLayout& m : l.mappings) {
    if (m.bytes == 0 || m.bytes % kArenaAlign || m.va < base() || m.va - base() > bytes() - m.bytes ||
        m.va % kArenaAlign)
      return fail("a mapping at " + hex(m.va) + " of " + std::to_string(m.bytes) + " bytes lies outside arena " +
                  std::to_string(index_));
    if (!mappings.empty()) {
      const auto& [pva, pm] = *mappings.rbegin();
      if (m.va < pva + pm.bytes) return fail("mappings overlap or are out of order at " + hex(m.va));
    }
    Mapping mm;
    mm.bytes = m.bytes;
    mm.device = m.device;
    mm.chunk = m.chunk;
    if (m.chunk) {
      uint64_t end = 0;
      for (const auto& [off, n] : m.free) {
        if (off < end || n == 0 || off > m.bytes || n > m.bytes - off) return fail("a chunk's free list is invalid");
        end = off + n;
      }
      mm.free = m.free;
    } else if (!m.free.empty()) {
      return fail("a mapping of its own has a free list");
    }
    mappings.emplace(m.va, std::move(mm));
  }
  std::map<uint64_t, Block> blocks;
  std::map<uint64_t, uint64_t> used;
  for (const BlockLayout& b : l.blocks) {
    auto m = mappings.find(b.mapping);
    if (m == mappings.end() || b.bytes == 0 || b.ptr < b.mapping || b.ptr - b.mapping > m->second.bytes - std::min(b.bytes, m->second.bytes) ||
        b.bytes > m->second.bytes || (!blocks.empty() && b.ptr < blocks.rbegin()->first + blocks.rbegin()->second.bytes))
      return fail("a block at " + hex(b.ptr) + " does not lie in its mapping");
    if (!m->second.chunk && (b.ptr != b.mapping || b.bytes != m->second.bytes))
      return fail("a mapping of its own at " + hex(b.mapping) + " does not hold exactly its block");
    blocks[b.ptr] = Block{b.bytes, b.mapping};
    ++used[b.mapping];
  }
  for (auto& [va, m] : mappings) {
    if (!m.chunk && used[va] != 1) return fail("a mapping of its own at " + hex(va) + " holds no block");
    if (m.chunk && used[va] == 0) return fail("an empty chunk at " + hex(va) + " (empty chunks are released)");
    m.used = used[va];
  }
  mappings_ = std::move(mappings);
  blocks_ = std::move(blocks);
  peers_ = l.peers;
  va_free_.clear();
  uint64_t at = base();
  for (const auto& [va, m] : mappings_) {
    if (va > at) va_free_.emplace(at, va - at);
    at = va + m.bytes;
  }
  if (at < base() + bytes()) va_free_.emplace(at, base() + bytes() - at);
  reserved_ = false;
  released_ = true;
  physical_bytes_ = 0;
  return true;
}

bool DeviceArena::adopt_guest(uint64_t va, uint64_t bytes, std::string* why) {
  if (!released_) return *why = "the arena holds memory", false;
  auto it = va_free_.upper_bound(va);
  if (bytes == 0 || it == va_free_.begin() || (--it, va - it->first >= it->second) ||
      bytes > it->second - (va - it->first)) {
    *why = "device memory layout: a virtual address reservation at " + hex(va) + " of " + std::to_string(bytes) +
           " bytes lies outside arena " + std::to_string(index_) + " or overlaps its memory or another reservation";
    return false;
  }
  const uint64_t start = it->first, size = it->second;
  va_free_.erase(it);
  if (va > start) va_free_.emplace(start, va - start);
  if (start + size > va + bytes) va_free_.emplace(va + bytes, start + size - va - bytes);
  return true;
}

CUresult DeviceArena::restore_memory(std::string* why) {
  if (!released_) return CUDA_SUCCESS;
  if (index_ < 0) {
    if (why) *why = "no device arena index";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Memory, or the guest's reservations (holes in the free list).
  const bool any = !mappings_.empty() || va_free_.size() != 1 || va_free_.begin()->first != base() ||
                   va_free_.begin()->second != bytes();
  if (any && !reserved_) {
    // reserve() resets the free list: keep the adopted one.
    const auto free = va_free_;
    if (CUresult r = reserve(why); r != CUDA_SUCCESS) return r;
    va_free_ = free;
  }
  uint64_t total = 0;
  for (const auto& [va, m] : mappings_) total += m.bytes;
  if (meter_ && !meter_(static_cast<int64_t>(total))) {
    if (why) *why = std::to_string(total >> 20) + " MiB of device memory is over what the VM's memory quota has left";
    if (reserved_) api_.cuMemAddressFree(base(), bytes());
    reserved_ = false;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = CUDA_SUCCESS;
  auto made = mappings_.begin();
  for (; made != mappings_.end(); ++made) {
    Mapping& m = made->second;
    r = create_physical(m.device, m.bytes, &m.handle);
    if (r != CUDA_SUCCESS) break;
    r = api_.cuMemMap(made->first, m.bytes, 0, m.handle, 0);
    if (r == CUDA_SUCCESS) {
      r = apply_access(made->first, m.bytes, m.device);
      if (r != CUDA_SUCCESS) api_.cuMemUnmap(made->first, m.bytes);
    }
    if (r != CUDA_SUCCESS) {
      api_.cuMemRelease(m.handle);
      m.handle = 0;
      break;
    }
    physical_bytes_ += m.bytes;
  }
  if (r != CUDA_SUCCESS) {
    if (why)
      *why = "cannot recreate " + std::to_string(made->second.bytes) + " bytes of device memory at " + hex(made->first) +
             " on device " + std::to_string(made->second.device) + ": " + describe(api_, r);
    for (auto it = mappings_.begin(); it != made; ++it) {
      api_.cuMemUnmap(it->first, it->second.bytes);
      api_.cuMemRelease(it->second.handle);
      it->second.handle = 0;
    }
    if (reserved_) api_.cuMemAddressFree(base(), bytes());
    reserved_ = false;
    physical_bytes_ = 0;
    if (meter_) meter_(-static_cast<int64_t>(total));
    return r;
  }
  released_ = false;
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
