// Guest side: write a batch of call frames into a slot's RPC stack, read the replies
// the host wrote in place. Knows nothing of notification (see client.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "vmrpc/wire.h"

namespace vmrpc {

// A frame in the current batch (its offset in the stack).
struct FrameRef {
  uint32_t offset = 0;
};

struct FrameResult {
  int32_t status = 0;               // wire::ChannelStatus (<0) or the service's code
  std::span<const std::byte> reply;  // bounded by the frame's reply capacity
};

class BatchWriter {
 public:
  explicit BatchWriter(std::span<std::byte> stack) : stack_(stack) { reset(); }

  void reset() {
    pos_ = sizeof(wire::BatchHeader);
    count_ = 0;
  }
  uint32_t frame_count() const { return count_; }
  uint32_t bytes() const { return pos_; }
  bool empty() const { return count_ == 0; }
  uint32_t capacity() const { return static_cast<uint32_t>(stack_.size()); }

  // Bytes a frame with these sizes takes in the stack.
  static uint64_t frame_bytes(uint32_t arg_bytes, uint32_t reply_capacity) {
    return wire::align_up64(sizeof(wire::FrameHeader) + uint64_t{arg_bytes}, wire::kFrameAlign) +
           wire::align_up64(reply_capacity, wire::kFrameAlign);
  }
  bool fits(uint32_t arg_bytes, uint32_t reply_capacity) const {
    return pos_ + frame_bytes(arg_bytes, reply_capacity) <= stack_.size();
  }

  // Appends a frame and returns it, or nothing when the stack has no room (flush first).
  // Its argument bytes are written through args(); they start zeroed-out only if you do.
  std::optional<FrameRef> append(uint32_t call_id, uint32_t arg_bytes, uint32_t reply_capacity,
                                 uint32_t flags = 0, uint64_t tag = 0) {
    if (!fits(arg_bytes, reply_capacity)) return std::nullopt;
    wire::FrameHeader h{call_id, flags, arg_bytes, reply_capacity, 0, 0, tag};
    std::memcpy(stack_.data() + pos_, &h, sizeof h);
    FrameRef r{pos_};
    pos_ += static_cast<uint32_t>(frame_bytes(arg_bytes, reply_capacity));
    ++count_;
    return r;
  }
  std::optional<FrameRef> append(uint32_t call_id, std::span<const std::byte> args, uint32_t reply_capacity,
                                 uint32_t flags = 0) {
    auto r = append(call_id, static_cast<uint32_t>(args.size()), reply_capacity, flags);
    if (r && !args.empty()) std::memcpy(this->args(*r), args.data(), args.size());
    return r;
  }

  std::byte* args(FrameRef f) const { return stack_.data() + f.offset + sizeof(wire::FrameHeader); }

  // Takes over the frames `other` (a writer of another buffer of at least this layout)
  // has appended, at the same offsets, so FrameRefs into `other` name them here. For a
  // guest that fills a private buffer while the host runs the stack's batch.
  bool adopt(const BatchWriter& other) {
    if (other.pos_ > stack_.size()) return false;
    std::memcpy(stack_.data() + sizeof(wire::BatchHeader), other.stack_.data() + sizeof(wire::BatchHeader),
                other.pos_ - sizeof(wire::BatchHeader));
    pos_ = other.pos_;
    count_ = other.count_;
    return true;
  }

  // Writes the batch header; returns request_bytes for the control page.
  uint32_t finish() {
    wire::BatchHeader bh{count_, 0, 0};
    std::memcpy(stack_.data(), &bh, sizeof bh);
    return pos_;
  }

  // After the host answered: the frame's status and reply.
  FrameResult result(FrameRef f) const {
    wire::FrameHeader h;
    std::memcpy(&h, stack_.data() + f.offset, sizeof h);
    const uint64_t reply_off =
        wire::align_up64(f.offset + sizeof(wire::FrameHeader) + uint64_t{h.arg_bytes}, wire::kFrameAlign);
    const uint32_t n = h.reply_bytes <= h.reply_capacity ? h.reply_bytes : h.reply_capacity;
    return {h.status, {stack_.data() + reply_off, n}};
  }

 private:
  std::span<std::byte> stack_;
  uint32_t pos_ = 0;
  uint32_t count_ = 0;
};

}  // namespace vmrpc
