#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vmrpc/batch_writer.h"
#include "vmrpc/frame_decoder.h"

namespace vmrpc {
namespace {

using wire::ChannelStatus;

struct Stack {
  std::vector<std::byte> mem = std::vector<std::byte>(64 << 10);
  std::span<std::byte> span() { return mem; }
};

TEST(FrameDecoder, DecodesWhatTheWriterWrote) {
  Stack s;
  BatchWriter w(s.span());
  const char text[] = "hello";
  auto f1 = w.append(0x100, std::as_bytes(std::span(text)), 64);
  auto f2 = w.append(0x101, 0, 0);
  auto f3 = w.append(0x102, std::as_bytes(std::span(text, 3)), 7);
  ASSERT_TRUE(f1 && f2 && f3);
  const uint32_t bytes = w.finish();
  DecodedBatch b;
  decode_batch(s.span(), bytes, b);
  ASSERT_EQ(b.status, ChannelStatus::kOk) << b.error;
  ASSERT_EQ(b.frames.size(), 3u);
  EXPECT_EQ(b.frames[0].call_id, 0x100u);
  EXPECT_EQ(b.frames[0].arg_bytes, sizeof text);
  EXPECT_EQ(0, std::memcmp(b.args(b.frames[0]).data(), text, sizeof text));
  EXPECT_EQ(b.frames[0].reply_capacity, 64u);
  EXPECT_EQ(b.frames[0].reply_offset % 16, 0u);
  EXPECT_EQ(b.frames[1].arg_bytes, 0u);
  EXPECT_EQ(b.frames[2].reply_capacity, 7u);

  // Replies written by the host come back to the writer.
  std::memcpy(s.mem.data() + b.frames[0].reply_offset, "world", 5);
  write_frame_status(s.span(), b.frames[0].frame_offset, 7, 5);
  auto r = w.result(*f1);
  EXPECT_EQ(r.status, 7);
  ASSERT_EQ(r.reply.size(), 5u);
  EXPECT_EQ(0, std::memcmp(r.reply.data(), "world", 5));
}

TEST(FrameDecoder, CopiesArgumentsOutOnce) {
  Stack s;
  BatchWriter w(s.span());
  auto f = w.append(0x100, std::as_bytes(std::span("abcd", 4)), 0);
  ASSERT_TRUE(f);
  DecodedBatch b;
  decode_batch(s.span(), w.finish(), b);
  ASSERT_EQ(b.status, ChannelStatus::kOk);
  std::memcpy(w.args(*f), "XXXX", 4);  // the guest changes the frame after the host read it
  EXPECT_EQ(0, std::memcmp(b.args(b.frames[0]).data(), "abcd", 4));
}

TEST(FrameDecoder, RejectsRequestBytesOutOfRange) {
  Stack s;
  DecodedBatch b;
  decode_batch(s.span(), 0, b);
  EXPECT_EQ(b.status, ChannelStatus::kBadBatch);
  decode_batch(s.span(), 15, b);
  EXPECT_EQ(b.status, ChannelStatus::kBadBatch);
  decode_batch(s.span(), static_cast<uint32_t>(s.mem.size() + 16), b);
  EXPECT_EQ(b.status, ChannelStatus::kBadBatch);
  EXPECT_FALSE(b.error.empty());
}

TEST(FrameDecoder, RejectsFrameCountThatCannotFit) {
  Stack s;
  wire::BatchHeader bh{1000, 0, 0};
  std::memcpy(s.mem.data(), &bh, sizeof bh);
  DecodedBatch b;
  decode_batch(s.span(), 16 + 32, b);
  EXPECT_EQ(b.status, ChannelStatus::kBadBatch);
  EXPECT_TRUE(b.frames.empty());
}

TEST(FrameDecoder, RejectsLengthsThatWouldOverflowOrRunPastTheBatch) {
  for (uint32_t args : {0xffffffffu, 0xfffffff0u, 100u}) {
    Stack s;
    BatchWriter w(s.span());
    ASSERT_TRUE(w.append(0x100, 8, 8));
    ASSERT_TRUE(w.append(0x101, 8, 8));
    const uint32_t bytes = w.finish();
    // Corrupt the second frame's arg_bytes.
    wire::FrameHeader h;
    const uint32_t second = 16 + static_cast<uint32_t>(BatchWriter::frame_bytes(8, 8));
    std::memcpy(&h, s.mem.data() + second, sizeof h);
    h.arg_bytes = args;
    std::memcpy(s.mem.data() + second, &h, sizeof h);
    DecodedBatch b;
    decode_batch(s.span(), bytes, b);
    EXPECT_EQ(b.status, ChannelStatus::kBadFrame) << args;
    EXPECT_EQ(b.bad_frame, 1);
    EXPECT_EQ(b.bad_frame_offset, second);
    EXPECT_EQ(b.frames.size(), 1u);
  }
}

TEST(FrameDecoder, RejectsTrailingBytes) {
  Stack s;
  BatchWriter w(s.span());
  ASSERT_TRUE(w.append(0x100, 8, 8));
  DecodedBatch b;
  decode_batch(s.span(), w.finish() + 16, b);
  EXPECT_EQ(b.status, ChannelStatus::kBadBatch);
}

TEST(FrameDecoder, HonoursFrameLimit) {
  Stack s;
  BatchWriter w(s.span());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.append(0x100, 0, 0));
  DecodedBatch b;
  decode_batch(s.span(), w.finish(), b, DecodeLimits{5});
  EXPECT_EQ(b.status, ChannelStatus::kBadBatch);
}

TEST(BatchWriter, RefusesFramesThatDoNotFit) {
  std::vector<std::byte> mem(256);
  BatchWriter w(mem);
  EXPECT_TRUE(w.append(1, 100, 50));
  EXPECT_FALSE(w.append(1, 100, 50));
  EXPECT_FALSE(w.append(1, 0xffffffffu, 0xffffffffu));
  EXPECT_EQ(w.frame_count(), 1u);
}

}  // namespace
}  // namespace vmrpc
