// The shared region's layout: computed by the host from its configuration, read and
// checked by a guest from the header. The host never reads the header back: it keeps
// its own Layout and uses only that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <sys/types.h>

#include "vmrpc/wire.h"

namespace vmrpc {

struct RegionConfig {
  uint64_t region_bytes;     // power of two
  uint32_t slot_count;       // 1..2048 (QEMU's vector limit)
  uint32_t slot_bytes;       // multiple of the page size, >= 2 pages
  uint32_t heap_page_bytes;  // power of two, >= 64
  uint32_t host_peer_id = 1;
  uint32_t guest_peer_id = 0;

  // From the knobs (environment) with their defaults.
  static RegionConfig from_knobs();
};

struct Layout {
  uint64_t region_bytes = 0;
  uint32_t slot_count = 0;
  uint32_t slot_bytes = 0;
  uint64_t slots_offset = 0;
  uint64_t heap_table_offset = 0;
  uint64_t heap_offset = 0;
  uint64_t heap_bytes = 0;
  uint32_t heap_page_bytes = 0;
  uint32_t host_peer_id = 0;
  uint32_t guest_peer_id = 0;
  // Where the serving host process maps the region (RegionHeader::host_map_address; 0:
  // not fixed). Per connection, so plan() leaves it 0 and the endpoint sets it.
  uint64_t host_map_address = 0;

  uint64_t heap_pages() const { return heap_page_bytes ? heap_bytes / heap_page_bytes : 0; }
  uint32_t stack_bytes() const { return slot_bytes - wire::kPageBytes; }
  uint64_t slot_offset(uint32_t i) const { return slots_offset + uint64_t{i} * slot_bytes; }

  // Host side: lay out a region for `cfg`, or explain why it cannot be done.
  static std::optional<Layout> plan(const RegionConfig& cfg, std::string* why);
  // Guest side: read the header the host wrote and check that it describes a region
  // of `mapped_bytes` this build understands.
  static std::optional<Layout> from_header(const wire::RegionHeader& h, uint64_t mapped_bytes,
                                           std::string* why);
  void write_header(wire::RegionHeader& h, uint64_t host_epoch) const;
};

// Typed views of one mapped region (either side). Does not own the memory.
class RegionView {
 public:
  RegionView() = default;
  RegionView(std::byte* base, const Layout& layout) : base_(base), layout_(layout) {}

  const Layout& layout() const { return layout_; }
  std::byte* base() const { return base_; }
  // Whether this mapping is at the host's address (RegionHeader::host_map_address): then a
  // pointer into the region means the same bytes on both sides.
  bool same_address() const {
    return layout_.host_map_address != 0 && reinterpret_cast<uint64_t>(base_) == layout_.host_map_address;
  }
  wire::RegionHeader& header() const { return *reinterpret_cast<wire::RegionHeader*>(base_); }
  wire::SlotControl& control(uint32_t slot) const {
    return *reinterpret_cast<wire::SlotControl*>(base_ + layout_.slot_offset(slot));
  }
  std::span<std::byte> stack(uint32_t slot) const {
    return {base_ + layout_.slot_offset(slot) + wire::kPageBytes, layout_.stack_bytes()};
  }
  std::span<std::byte> heap() const { return {base_ + layout_.heap_offset, layout_.heap_bytes}; }
  wire::HeapPageOwner* heap_table() const {
    return reinterpret_cast<wire::HeapPageOwner*>(base_ + layout_.heap_table_offset);
  }

  // Host side: bytes `ref` names in the heap, or nothing if it points outside.
  std::optional<std::span<std::byte>> resolve(const wire::HeapRef& ref) const;

 private:
  std::byte* base_ = nullptr;
  Layout layout_{};
};

class Mapping;

// Guest side: `map` holds the whole region of `fd` (at `offset`), its header checked into
// `layout`. When the header names a host address and `map` is not there yet, maps the
// region again at that address if it is free (MAP_FIXED_NOREPLACE; knob
// VMRPC_SAME_ADDRESS=0 turns this off) and replaces `map` with it; otherwise keeps `map`
// and says why in `*why`. Returns whether `map` is now at the host's address.
bool map_at_host_address(int fd, off_t offset, const Layout& layout, Mapping& map, std::string* why);

}  // namespace vmrpc
