// The input format of frame_decoder_fuzz, shared by the fuzz target and the seed
// generator so the seeds always match what the target reads.
//
// Byte 0 is a selector; its low two bits pick what the rest of the input means:
//
//   0, 1  decode   [sel][u32 request_bytes][stack bytes ...]
//                  The stack bytes are a slot's RPC stack (exactly that many bytes,
//                  writable, as the host maps them). sel bit 7 set: request_bytes is
//                  taken modulo (stack size + 17), so it is mostly inside the stack
//                  (and sometimes just past it). sel bits 4..6 = k != 0: the decoder
//                  runs with DecodeLimits{max_frames = k}.
//   2      header [sel][RegionHeader, 144 bytes][u64 mapped_bytes][HeapRef ...]
//                  Layout::from_header on that header (zero-filled when short). sel bit
//                  7 set: magic and ABI version are forced right; bit 6 set:
//                  mapped_bytes is the header's own region_bytes. The same fields also
//                  go through Layout::plan and a write_header/from_header round trip.
//                  The HeapRefs are resolved against a view of the accepted layout.
//   3      heap   [sel][u8 region choice][HeapRef ...]
//                  RegionView::resolve against a real, mapped (exact-size) region
//                  whose bytes the resolved spans are then touched through.
//
// All integers are little-endian (the wire ABI's own byte order).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vmrpc::fuzz {

enum Target : uint8_t { kDecode = 0, kDecode2 = 1, kHeader = 2, kHeap = 3 };

inline constexpr uint8_t kSelRequestInRange = 0x80;  // decode: request_bytes %= stack + 17
inline constexpr uint8_t kSelForceMagic = 0x80;      // header: magic and ABI forced
inline constexpr uint8_t kSelMappedFromHeader = 0x40;  // header: mapped = region_bytes

inline constexpr size_t kDecodePrefix = 1 + 4;
inline constexpr size_t kHeaderPrefix = 1 + 144 + 8;
inline constexpr size_t kHeapPrefix = 1 + 1;

}  // namespace vmrpc::fuzz
