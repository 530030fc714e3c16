#include "vmrpc/frame_decoder.h"

#include <cstring>

namespace vmrpc {

using wire::BatchHeader;
using wire::ChannelStatus;
using wire::FrameHeader;

namespace {
// Copies len bytes at off of the shared stack once; caller has checked the bounds.
void copy_out(std::span<const std::byte> stack, uint64_t off, void* dst, uint64_t len) {
  std::memcpy(dst, stack.data() + off, len);
}
}  // namespace

void decode_batch(std::span<const std::byte> stack, uint32_t request_bytes, DecodedBatch& out,
                  const DecodeLimits& limits) {
  out.status = ChannelStatus::kOk;
  out.frames.clear();
  out.bad_frame = -1;
  out.bad_frame_offset = -1;
  out.error.clear();
  out.copy.clear();

  const uint64_t end = request_bytes;
  if (end < sizeof(BatchHeader) || end > stack.size()) {
    out.status = ChannelStatus::kBadBatch;
    out.error = "request_bytes " + std::to_string(end) + " outside 16.." + std::to_string(stack.size());
    return;
  }
  BatchHeader bh;
  copy_out(stack, 0, &bh, sizeof bh);
  const uint64_t max_by_size = (end - sizeof(BatchHeader)) / sizeof(FrameHeader);
  if (bh.frame_count > max_by_size || bh.frame_count > limits.max_frames) {
    out.status = ChannelStatus::kBadBatch;
    out.error = "frame_count " + std::to_string(bh.frame_count) + " cannot fit " + std::to_string(end) + " bytes";
    return;
  }
  out.frames.reserve(bh.frame_count);
  // Arguments are at most `end` bytes in all, so this never reallocates below.
  out.copy.reserve(end);

  uint64_t pos = sizeof(BatchHeader);
  for (uint32_t i = 0; i < bh.frame_count; ++i) {
    auto broken = [&](std::string why) {
      out.status = ChannelStatus::kBadFrame;
      out.bad_frame = static_cast<int32_t>(i);
      if (end - pos >= sizeof(FrameHeader)) out.bad_frame_offset = static_cast<int64_t>(pos);
      out.error = "frame " + std::to_string(i) + " at offset " + std::to_string(pos) + ": " + why;
    };
    if (end - pos < sizeof(FrameHeader)) return broken("header runs past request_bytes");
    FrameHeader fh;
    copy_out(stack, pos, &fh, sizeof fh);
    // 64-bit arithmetic: 32-bit lengths from the guest cannot overflow it.
    const uint64_t args_start = pos + sizeof(FrameHeader);
    const uint64_t args_end = args_start + fh.arg_bytes;
    const uint64_t reply_start = wire::align_up64(args_end, wire::kFrameAlign);
    const uint64_t reply_end = wire::align_up64(reply_start + fh.reply_capacity, wire::kFrameAlign);
    if (reply_end > end) {
      return broken("arg_bytes " + std::to_string(fh.arg_bytes) + " + reply_capacity " +
                    std::to_string(fh.reply_capacity) + " run past request_bytes " + std::to_string(end));
    }
    DecodedFrame f;
    f.call_id = fh.call_id;
    f.flags = fh.flags;
    f.frame_offset = static_cast<uint32_t>(pos);
    f.args_offset = static_cast<uint32_t>(out.copy.size());
    f.arg_bytes = fh.arg_bytes;
    f.reply_offset = static_cast<uint32_t>(reply_start);
    f.reply_capacity = fh.reply_capacity;
    out.copy.resize(out.copy.size() + fh.arg_bytes);
    if (fh.arg_bytes) copy_out(stack, args_start, out.copy.data() + f.args_offset, fh.arg_bytes);
    out.frames.push_back(f);
    pos = reply_end;
  }
  if (pos != end) {
    out.status = ChannelStatus::kBadBatch;
    out.bad_frame = static_cast<int32_t>(bh.frame_count);
    out.error = "frames end at " + std::to_string(pos) + " but request_bytes is " + std::to_string(end);
  }
}

void write_frame_status(std::span<std::byte> stack, uint32_t frame_offset, int32_t status, uint32_t reply_bytes) {
  // offsetof(FrameHeader, status) == 16, reply_bytes follows; both inside the checked frame.
  std::memcpy(stack.data() + frame_offset + offsetof(FrameHeader, status), &status, sizeof status);
  std::memcpy(stack.data() + frame_offset + offsetof(FrameHeader, reply_bytes), &reply_bytes, sizeof reply_bytes);
}

}  // namespace vmrpc
