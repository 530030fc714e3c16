#include "vmrpc/region.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "vmrpc/fd.h"
#include "vmrpc/knobs.h"

namespace vmrpc {
namespace {
bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
bool fail(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return false;
}
}  // namespace

RegionConfig RegionConfig::from_knobs() {
  return RegionConfig{static_cast<uint64_t>(knobs::kRegionBytes.get()),
                      static_cast<uint32_t>(knobs::kSlotCount.get()),
                      static_cast<uint32_t>(knobs::kSlotBytes.get()),
                      static_cast<uint32_t>(knobs::kHeapPageBytes.get())};
}

std::optional<Layout> Layout::plan(const RegionConfig& cfg, std::string* why) {
  using wire::kPageBytes;
  if (!is_pow2(cfg.region_bytes) || cfg.region_bytes < (1u << 20)) {
    fail(why, "region size must be a power of two of at least 1 MiB (QEMU requires a power of two); got " +
                  std::to_string(cfg.region_bytes));
    return std::nullopt;
  }
  if (cfg.slot_count == 0 || cfg.slot_count > 2048) {
    fail(why, "slot count must be 1..2048 (one MSI-X vector per slot); got " + std::to_string(cfg.slot_count));
    return std::nullopt;
  }
  if (cfg.slot_bytes < 2 * kPageBytes || cfg.slot_bytes % kPageBytes) {
    fail(why, "slot size must be a multiple of 4096 and at least 8192; got " + std::to_string(cfg.slot_bytes));
    return std::nullopt;
  }
  if (!is_pow2(cfg.heap_page_bytes) || cfg.heap_page_bytes < 64) {
    fail(why, "heap page size must be a power of two >= 64; got " + std::to_string(cfg.heap_page_bytes));
    return std::nullopt;
  }
  Layout l;
  l.region_bytes = cfg.region_bytes;
  l.slot_count = cfg.slot_count;
  l.slot_bytes = cfg.slot_bytes;
  l.heap_page_bytes = cfg.heap_page_bytes;
  l.host_peer_id = cfg.host_peer_id;
  l.guest_peer_id = cfg.guest_peer_id;
  const uint64_t after_header = kPageBytes;
  const uint64_t slots_bytes = uint64_t{cfg.slot_count} * cfg.slot_bytes;
  if (after_header + slots_bytes >= cfg.region_bytes) {
    fail(why, "the slots (" + std::to_string(slots_bytes) + " bytes) do not fit a region of " +
                  std::to_string(cfg.region_bytes) + " bytes; use fewer or smaller slots or a larger region");
    return std::nullopt;
  }
  // Heap pages and their table share what is left: pages * (page + 4) <= rest, with the
  // table rounded to a page and the heap aligned to 2 MiB when the region allows (huge pages).
  const uint64_t rest = cfg.region_bytes - after_header - slots_bytes;
  uint64_t pages = rest / (cfg.heap_page_bytes + sizeof(wire::HeapPageOwner));
  for (;;) {
    if (pages == 0) {
      fail(why, "no room left for the shared heap; use a larger region");
      return std::nullopt;
    }
    const uint64_t table = wire::align_up64(pages * sizeof(wire::HeapPageOwner), kPageBytes);
    uint64_t heap_off = after_header + table + slots_bytes;
    const uint64_t align = cfg.region_bytes >= (64u << 20) ? (2u << 20) : kPageBytes;
    heap_off = wire::align_up64(heap_off, std::max<uint64_t>(align, cfg.heap_page_bytes));
    if (heap_off + pages * cfg.heap_page_bytes <= cfg.region_bytes) {
      l.heap_table_offset = after_header;
      l.slots_offset = after_header + table;
      l.heap_offset = heap_off;
      l.heap_bytes = pages * cfg.heap_page_bytes;
      return l;
    }
    --pages;
  }
}

std::optional<Layout> Layout::from_header(const wire::RegionHeader& src, uint64_t mapped_bytes,
                                          std::string* why) {
  wire::RegionHeader h;
  std::memcpy(&h, &src, sizeof h);  // one copy, then checks on the copy
  if (h.magic != wire::kRegionMagic) {
    fail(why, "shared region has no vmrpc header (bad magic): is the host stub serving this device?");
    return std::nullopt;
  }
  if (h.abi_version != wire::kAbiVersion) {
    fail(why, "vmrpc ABI mismatch: host speaks " + std::to_string(h.abi_version) + ", this library " +
                  std::to_string(wire::kAbiVersion) + "; install matching guest and host versions");
    return std::nullopt;
  }
  if (h.region_bytes != mapped_bytes) {
    fail(why, "region header says " + std::to_string(h.region_bytes) + " bytes but " +
                  std::to_string(mapped_bytes) + " are mapped");
    return std::nullopt;
  }
  RegionConfig cfg{h.region_bytes, h.slot_count, h.slot_bytes, h.heap_page_bytes, h.host_peer_id,
                   h.guest_peer_id};
  auto l = plan(cfg, why);
  if (!l) return std::nullopt;
  if (l->slots_offset != h.slots_offset || l->heap_offset != h.heap_offset || l->heap_bytes != h.heap_bytes ||
      l->heap_table_offset != h.heap_table_offset) {
    fail(why, "region header layout does not match this library's layout rules");
    return std::nullopt;
  }
  // Only a hint for where to map: an unaligned one is ignored (no same-address mapping).
  l->host_map_address = h.host_map_address % wire::kPageBytes ? 0 : h.host_map_address;
  return l;
}

void Layout::write_header(wire::RegionHeader& h, uint64_t host_epoch) const {
  wire::RegionHeader n{};
  n.magic = wire::kRegionMagic;
  n.abi_version = wire::kAbiVersion;
  n.header_bytes = sizeof(wire::RegionHeader);
  n.region_bytes = region_bytes;
  n.slot_count = slot_count;
  n.slot_bytes = slot_bytes;
  n.slots_offset = slots_offset;
  n.heap_table_offset = heap_table_offset;
  n.heap_offset = heap_offset;
  n.heap_bytes = heap_bytes;
  n.heap_page_bytes = heap_page_bytes;
  n.host_peer_id = host_peer_id;
  n.guest_peer_id = guest_peer_id;
  n.host_epoch = host_epoch;
  n.host_map_address = host_map_address;
  std::memcpy(&h, &n, sizeof n);
}

bool map_at_host_address(int fd, off_t offset, const Layout& layout, Mapping& map, std::string* why) {
  const uint64_t want = layout.host_map_address;
  if (want == 0) return fail(why, "the host maps the region at no fixed address");
  if (reinterpret_cast<uint64_t>(map.data()) == want) return true;
  if (knobs::kGuestSameAddress.get() == 0) return fail(why, "VMRPC_SAME_ADDRESS=0");
  if (want + layout.region_bytes < want) return fail(why, "the host's address range wraps around");
  void* p = ::mmap(reinterpret_cast<void*>(want), layout.region_bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED_NOREPLACE, fd, offset);
  if (p == MAP_FAILED) {
    const int err = errno;
    return fail(why, std::string("the host's address is not free here (") + std::strerror(err) + ")");
  }
  if (reinterpret_cast<uint64_t>(p) != want) {
    // A kernel older than 4.17 takes MAP_FIXED_NOREPLACE for a hint and maps elsewhere.
    ::munmap(p, layout.region_bytes);
    return fail(why, "the host's address is not free here");
  }
  map = Mapping(p, layout.region_bytes);  // unmaps the first mapping
  return true;
}

std::optional<std::span<std::byte>> RegionView::resolve(const wire::HeapRef& ref) const {
  const uint64_t off = ref.offset, len = ref.bytes;
  if (off > layout_.heap_bytes || len > layout_.heap_bytes - off) return std::nullopt;
  return std::span<std::byte>(base_ + layout_.heap_offset + off, len);
}

}  // namespace vmrpc
