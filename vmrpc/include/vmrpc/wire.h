// vmrpc wire ABI: the byte layout of the shared region, shared by guest and host.
//
// Everything here is fixed-width, little-endian, explicitly padded and checked with
// static_assert. Numbers never move: add new ones, never renumber. Nothing in this
// file has behaviour; the logic that reads it lives in region.h, frame_decoder.h,
// batch_writer.h. The host never trusts any of these fields: it copies each one out
// once and checks it before use (see frame_decoder.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vmrpc::wire {

// "VMRPC" + ABI major in the low byte. A guest that sees another magic stops.
inline constexpr uint64_t kRegionMagic = 0x564d52504300'0001ULL;
inline constexpr uint32_t kAbiVersion = 1;

inline constexpr uint32_t kPageBytes = 4096;
inline constexpr uint32_t kFrameAlign = 16;

// Region layout: [header page][heap page table][slot 0]...[slot N-1][heap]
// All offsets are from the start of the region.
struct RegionHeader {
  uint64_t magic;              // kRegionMagic
  uint32_t abi_version;        // kAbiVersion
  uint32_t header_bytes;       // sizeof(RegionHeader)
  uint64_t region_bytes;       // whole region (a power of two for QEMU)
  uint32_t slot_count;         // == MSI-X vectors: slot i uses vector i both ways
  uint32_t slot_bytes;         // control page + RPC stack
  uint64_t slots_offset;
  uint64_t heap_table_offset;  // one HeapPageOwner word per heap page
  uint64_t heap_offset;
  uint64_t heap_bytes;
  uint32_t heap_page_bytes;
  uint32_t host_peer_id;       // ivshmem peer id of the host stub (doorbell target)
  uint32_t guest_peer_id;      // ivshmem peer id the region's guest was given (0)
  uint32_t reserved0;
  uint64_t host_epoch;         // changes each time a host endpoint (re)initialises
  // Where the host process that serves this region's slots maps it (0: not fixed). A
  // guest that maps the region at the same address shares pointers into it with the host
  // (mapped pinned memory under unified addressing): see README.md, "Same address".
  uint64_t host_map_address;
  // Names this image of the region for the host (guests ignore it): written by the host
  // when the connection starts, when the VM's GPU state is saved (the saved state names
  // it) and when the VM runs on again. A token that changes under the host means the
  // region was replaced by a saved image (a VM restore, a snapshot revert): see README.md,
  // "Restored regions".
  uint64_t image_token;
  uint8_t reserved[40];
};
static_assert(sizeof(RegionHeader) == 144);
static_assert(offsetof(RegionHeader, host_map_address) == 88);
static_assert(offsetof(RegionHeader, slot_count) == 24);
static_assert(offsetof(RegionHeader, heap_page_bytes) == 64);
static_assert(offsetof(RegionHeader, host_epoch) == 80);
static_assert(offsetof(RegionHeader, image_token) == 96);

// Slot life cycle, in SlotControl::state.
//   Free -> Claimed      guest (CAS), then rings the slot's doorbell
//   Claimed -> Closing   guest, when it is done (or its driver, when it died)
//   Closing -> Free      host, after it freed what the client owned
// The host also forces Free when the whole connection goes away.
enum class SlotState : uint32_t {
  kFree = 0,
  kClaimed = 1,
  kClosing = 2,
};

// What the host reports in SlotControl::host_state.
enum class HostSlotState : uint32_t {
  kIdle = 0,     // no service thread attached
  kServing = 1,  // a service thread owns the slot
  kRefused = 2,  // host refused the slot (its limit of clients served at once, a policy): calls fail with kRefused; release the slot
  kFailed = 3,   // the slot's server died (its worker crashed): calls fail; release the slot
  // The region was restored from a saved image (VM restore, snapshot revert) and the host
  // has no GPU state for this slot's client (the VM was saved without it): calls fail
  // with kStateLost; release the slot.
  kStateLost = 4,
  // The slot's client ran a kernel longer than the VM's kernel time limit (vmcuda-stub
  // --kernel-time-limit): its server was ended to stop it. Calls fail with kLaunchTimeout;
  // release the slot.
  kTimedOut = 5,
};

// One control page per slot. Guest-written and host-written fields sit on separate
// cache lines so the two sides do not false-share while spinning.
struct SlotControl {
  // --- cache line 0: written by the guest ---
  uint32_t state;           // SlotState
  uint32_t guest_sleeping;  // 1: guest waits for an interrupt, host must ring it
  uint64_t request_seq;     // guest bumps after a batch is fully written
  uint32_t request_bytes;   // length of the batch at the start of the RPC stack
  uint32_t owner_tag;       // guest's pid or driver id: diagnostics only
  uint64_t guest_spin_ns;   // informational
  uint8_t guest_pad[32];
  // --- cache line 1: written by the host ---
  uint64_t response_seq;    // host sets it to request_seq once all replies are in place
  uint32_t host_sleeping;   // 1: host waits for the doorbell, guest must ring it
  uint32_t host_state;      // HostSlotState
  int32_t batch_status;     // ChannelStatus of the whole batch (kOk if decoded)
  uint32_t frames_done;     // frames the host answered in the last batch
  uint64_t served_batches;  // statistics
  // The first error of work the service accepted in an earlier batch (answering 0) and ran
  // after it answered; 0: none. Reset when a batch starts, set while it is served: the
  // guest reads it with the batch's replies and reports it like a queued call's error.
  int32_t late_status;
  uint8_t host_pad[28];
  uint8_t page_pad[kPageBytes - 128];
};
static_assert(sizeof(SlotControl) == kPageBytes);
static_assert(offsetof(SlotControl, request_seq) == 8);
static_assert(offsetof(SlotControl, response_seq) == 64);
static_assert(offsetof(SlotControl, batch_status) == 80);
static_assert(offsetof(SlotControl, late_status) == 96);

// Start of the RPC stack (right after the control page).
struct BatchHeader {
  uint32_t frame_count;
  uint32_t flags;           // reserved, 0
  uint64_t reserved;
};
static_assert(sizeof(BatchHeader) == 16);

// A call frame: header, argument bytes (padded to 16), reply area (padded to 16).
// The host writes status, reply_bytes and the reply area in place.
struct FrameHeader {
  uint32_t call_id;         // a MessageId, or a service's call number
  uint32_t flags;           // FrameFlags
  uint32_t arg_bytes;
  uint32_t reply_capacity;
  int32_t status;           // host-written: ChannelStatus (<0) or the service's code (>=0)
  uint32_t reply_bytes;     // host-written: <= reply_capacity
  uint64_t tag;             // guest cookie, never read by the host
};
static_assert(sizeof(FrameHeader) == 32);
static_assert(offsetof(FrameHeader, status) == 16);

enum FrameFlags : uint32_t {
  kFrameNone = 0,
  // The frame was written but must not run if an earlier frame of the batch failed.
  kFrameSkipOnError = 1u << 0,
};

// A reference to bytes in the shared heap: offset from heap start, length.
struct HeapRef {
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(HeapRef) == 16);

// Owner word of one heap page: 0 free, else (slot index + 1). Written by guests with
// CAS; the host only writes it to reclaim the pages of a slot it frees.
using HeapPageOwner = uint32_t;

// Message numbers of the channel itself. Services use ids >= kFirstServiceCall.
// Explicit values: never renumber.
enum class MessageId : uint32_t {
  kNop = 1,        // empty call, empty reply: the null round trip
  kHello = 2,      // HelloArgs -> HelloReply: ABI check when a slot is opened
  kEcho = 3,       // reply = args (reply_capacity >= arg_bytes)
};
inline constexpr uint32_t kFirstServiceCall = 0x100;

struct HelloArgs {
  uint32_t abi_version;
  uint32_t guest_pid;
  uint64_t reserved;
};
static_assert(sizeof(HelloArgs) == 16);

struct HelloReply {
  uint32_t abi_version;
  uint32_t slot_index;
  uint64_t host_epoch;
};
static_assert(sizeof(HelloReply) == 16);

// Frame status values below zero belong to the channel; zero and above belong to
// the service (for vmcuda: a cudaError_t). Explicit values: never renumber.
enum class ChannelStatus : int32_t {
  kOk = 0,
  kUnknownCall = -1,      // no handler for call_id
  kBadFrame = -2,         // lengths or alignment of this frame are wrong
  kNotProcessed = -3,     // an earlier frame broke the batch; this one did not run
  kBadHeapRef = -4,       // a HeapRef points outside the heap
  kReplyTooSmall = -5,    // the reply does not fit reply_capacity
  kBadArguments = -6,     // argument bytes have the wrong size or content
  kBadBatch = -7,         // batch header or request_bytes out of range
  kHandlerFailed = -8,    // the host failed for a reason of its own
  kSkipped = -9,          // kFrameSkipOnError and an earlier frame failed
  kTransportLost = -10,   // guest side only: the host endpoint went away
  kStateLost = -11,       // the host has no GPU state for this client (HostSlotState::kStateLost)
  kLaunchTimeout = -12,   // the client's kernel ran past the time limit; its server was ended (HostSlotState::kTimedOut)
  kRefused = -13,         // the host serves as many clients of this VM as it allows (HostSlotState::kRefused)
};

inline constexpr uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) & ~(a - 1); }
inline constexpr uint64_t align_up64(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

}  // namespace vmrpc::wire
