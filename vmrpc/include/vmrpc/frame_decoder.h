// Host side: decode a batch of call frames from a slot's RPC stack.
//
// The stack is shared with a hostile guest that may change it while we read. So every
// header and argument byte is copied out exactly once into a private buffer, and all
// checks and all later use work on that copy. Offsets of the reply areas are computed
// from the checked copy, so writing replies can never leave the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmrpc/wire.h"

namespace vmrpc {

struct DecodedFrame {
  uint32_t call_id = 0;
  uint32_t flags = 0;
  uint32_t frame_offset = 0;    // of the FrameHeader, in the stack
  uint32_t args_offset = 0;     // in the private copy
  uint32_t arg_bytes = 0;
  uint32_t reply_offset = 0;    // in the stack
  uint32_t reply_capacity = 0;
};

struct DecodedBatch {
  wire::ChannelStatus status = wire::ChannelStatus::kOk;
  std::vector<DecodedFrame> frames;  // frames that were decoded (all of them when ok)
  // When status != kOk: index of the broken frame (== frames.size()), or -1 if the
  // batch header itself was broken.
  int32_t bad_frame = -1;
  int64_t bad_frame_offset = -1;     // its header's offset in the stack, if it is inside
  std::string error;                 // what was wrong, for the log
  std::vector<std::byte> copy;       // private copy of headers and arguments

  std::span<const std::byte> args(const DecodedFrame& f) const {
    return {copy.data() + f.args_offset, f.arg_bytes};
  }
};

// Named limits on untrusted input (they exist for security reasons).
struct DecodeLimits {
  uint32_t max_frames = 65536;
};

// Decodes `request_bytes` (already copied out of the control page) of `stack`.
// Never reads outside `stack`; never trusts anything it reads twice.
void decode_batch(std::span<const std::byte> stack, uint32_t request_bytes, DecodedBatch& out,
                  const DecodeLimits& limits = {});

// Writes a frame's status and reply length into the shared stack (host side). The
// frame offset comes from a DecodedFrame, so it is known to be inside the stack.
void write_frame_status(std::span<std::byte> stack, uint32_t frame_offset, int32_t status,
                        uint32_t reply_bytes);

}  // namespace vmrpc
