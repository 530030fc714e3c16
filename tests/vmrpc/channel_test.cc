// The channel end to end inside one process: host endpoint thread + local clients.
#include <gtest/gtest.h>
#include <atomic>
#include <chrono>

#include <cstring>
#include <thread>
#include <vector>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/ordering.h"

namespace vmrpc {
namespace {

using testing::TestService;
using wire::ChannelStatus;

RegionConfig small_region() { return RegionConfig{16ull << 20, 4, 64 << 10, 4096}; }

struct Channel {
  TestService service;
  HostEndpoint host;
  explicit Channel(RegionConfig cfg = small_region())
      : host(HostEndpointOptions{testing::temp_socket_path("chan"), cfg, 8}, service) {
    host.start();
  }
};

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span(&v, 1));
}

uint64_t u64(std::span<const std::byte> b) {
  uint64_t v = 0;
  EXPECT_EQ(b.size(), 8u);
  if (b.size() == 8) std::memcpy(&v, b.data(), 8);
  return v;
}

// A stub that hands its VM to the next process (restart, upgrade) stops accepting first: a
// program that connects meanwhile waits in the socket's backlog instead of being dropped in
// the middle of its handshake, and is served once accepting resumes (here) or by the next
// process (the restart and upgrade tests).
TEST(Channel, StopAcceptingLeavesNewConnectionsWaitingInTheBacklog) {
  Channel ch;
  ASSERT_TRUE(ch.host.stop_accepting(std::chrono::seconds(2)));
  std::atomic<bool> connected{false};
  std::unique_ptr<LocalConnection> conn;
  std::thread client([&] {
    conn = LocalConnection::connect(ch.host.socket_path());
    connected = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(connected) << "accepted while accepting was stopped";
  EXPECT_EQ(ch.host.stats().connections_total, 0u);
  ch.host.resume_accepting();
  client.join();
  ASSERT_TRUE(connected);
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(slot->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
}

TEST(Channel, NopEchoAndServiceCalls) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(slot->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
  const char msg[] = "ping through shared memory";
  auto r = slot->call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(msg)), 64);
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.bytes.size(), sizeof msg);
  EXPECT_EQ(0, std::memcmp(r.bytes.data(), msg, sizeof msg));
  r = slot->call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(msg)), 4);
  EXPECT_EQ(r.status, static_cast<int32_t>(ChannelStatus::kReplyTooSmall));
  EXPECT_EQ(slot->call(0x999, {}, 0).status, static_cast<int32_t>(ChannelStatus::kUnknownCall));
  EXPECT_EQ(slot->call(50, {}, 0).status, static_cast<int32_t>(ChannelStatus::kUnknownCall));
  int32_t code = 700;
  EXPECT_EQ(slot->call(testing::kFail, bytes_of(code), 0).status, 700);
  EXPECT_EQ(ch.service.counters.opened.load(), 1u);
}

// SlotControl::late_status: what a service sets while serving a batch reaches the guest with
// that batch's answer, once; each batch starts with none.
TEST(Channel, LateStatusComesWithItsBatchOnce) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  EXPECT_EQ(slot->take_late_status(), 0);
  const int32_t late = 400;
  EXPECT_EQ(slot->call(testing::kSetLate, bytes_of(late), 0).status, 0);
  EXPECT_EQ(slot->take_late_status(), 400);
  EXPECT_EQ(slot->take_late_status(), 0);  // taken once
  EXPECT_EQ(slot->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
  EXPECT_EQ(slot->take_late_status(), 0);  // the next batch started without it
  // Two batches each with one before it is taken: the first is kept.
  const int32_t first = 700, second = 1;
  EXPECT_EQ(slot->call(testing::kSetLate, bytes_of(first), 0).status, 0);
  EXPECT_EQ(slot->call(testing::kSetLate, bytes_of(second), 0).status, 0);
  EXPECT_EQ(slot->take_late_status(), 700);
}

TEST(Channel, BatchedFramesRunInOrderAndAnswerInPlace) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot) << why;
  std::vector<FrameRef> frames;
  for (int i = 0; i < 500; ++i) {
    auto f = slot->batch().append(testing::kCallIndex, 0, 8);
    ASSERT_TRUE(f);
    frames.push_back(*f);
  }
  ASSERT_EQ(slot->flush(), ChannelStatus::kOk);
  for (int i = 0; i < 500; ++i) {
    auto r = slot->result(frames[i]);
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(u64(r.reply), static_cast<uint64_t>(i));
  }
}

TEST(Channel, SubmitThenWaitOverlapsGuestWorkWithTheCall) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot);
  uint32_t ms = 100;
  auto f = slot->batch().append(testing::kSleepMs, bytes_of(ms), 0);
  ASSERT_TRUE(f);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(slot->submit(), ChannelStatus::kOk);
  EXPECT_TRUE(slot->in_flight());
  // submit() returned at once: the host is still busy with the call.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_NE(ordering::load_acquire(conn->region().control(slot->index()).response_seq),
            ordering::load_acquire(conn->region().control(slot->index()).request_seq));
  ASSERT_EQ(slot->wait(), ChannelStatus::kOk);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  EXPECT_EQ(slot->result(*f).status, 0);
  EXPECT_FALSE(slot->in_flight());
  EXPECT_EQ(slot->wait(), ChannelStatus::kOk);  // nothing in flight: returns at once
}

TEST(Channel, SkipOnErrorFramesDoNotRunAfterAFailure) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot);
  int32_t code = 1;
  auto a = slot->batch().append(testing::kFail, bytes_of(code), 0);
  auto b = slot->batch().append(testing::kCallIndex, 0, 8, wire::kFrameSkipOnError);
  auto c = slot->batch().append(testing::kCallIndex, 0, 8);
  ASSERT_EQ(slot->flush(), ChannelStatus::kOk);
  EXPECT_EQ(slot->result(*a).status, 1);
  EXPECT_EQ(slot->result(*b).status, static_cast<int32_t>(ChannelStatus::kSkipped));
  EXPECT_EQ(slot->result(*c).status, 0);
}

TEST(Channel, HeapPayloadsAreTransformedBitExact) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot);
  for (uint64_t n : {1ull, 7ull, 4096ull, 100000ull, 3ull << 20}) {
    auto in = slot->heap().allocate(n);
    auto out = slot->heap().allocate(n);
    ASSERT_TRUE(in && out) << n;
    for (uint64_t i = 0; i < n; ++i) in->data[i] = std::byte(i * 131 + n);
    testing::XorCopyArgs a{in->ref(), out->ref(), 0x5a, {}};
    ASSERT_EQ(slot->call(testing::kXorCopy, bytes_of(a), 0).status, 0);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(out->data[i], std::byte(i * 131 + n) ^ std::byte{0x5a}) << i;
    slot->heap().free(in->offset);
    slot->heap().free(out->offset);
  }
}

TEST(Channel, HostRejectsRefsOutsideTheHeap) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot);
  const uint64_t H = conn->region().layout().heap_bytes;
  for (wire::HeapRef bad : {wire::HeapRef{H, 1}, wire::HeapRef{1, H}, wire::HeapRef{~0ull, 16}}) {
    testing::XorCopyArgs a{bad, {0, bad.bytes}, 1, {}};
    EXPECT_EQ(slot->call(testing::kXorCopy, bytes_of(a), 0).status,
              static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  }
  EXPECT_EQ(slot->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
}

TEST(Channel, MalformedBatchGetsAnErrorAndTheSlotKeepsWorking) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot);
  auto other = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(other);
  auto f0 = slot->batch().append(testing::kCallIndex, 0, 8);
  auto f1 = slot->batch().append(testing::kCallIndex, 0, 8);
  ASSERT_TRUE(f0 && f1);
  // Corrupt the second frame behind the writer's back (a hostile guest).
  auto stack = conn->region().stack(slot->index());
  wire::FrameHeader h;
  std::memcpy(&h, stack.data() + f1->offset, sizeof h);
  h.reply_capacity = 0x7fffffff;
  std::memcpy(stack.data() + f1->offset, &h, sizeof h);
  EXPECT_EQ(slot->flush(), ChannelStatus::kBadFrame);
  EXPECT_EQ(slot->result(*f0).status, static_cast<int32_t>(ChannelStatus::kNotProcessed));
  EXPECT_EQ(slot->result(*f1).status, static_cast<int32_t>(ChannelStatus::kBadFrame));
  // request_bytes beyond the stack.
  auto& ctl = conn->region().control(slot->index());
  (void)slot->batch().append(testing::kCallIndex, 0, 8);
  slot->batch().finish();
  // flush() writes request_bytes itself, so forge it with a raw request.
  ordering::store_relaxed(ctl.request_bytes, 0xfffffff0u);
  const uint64_t seq = ordering::load_relaxed(ctl.request_seq) + 1;
  ordering::store_release(ctl.request_seq, seq);
  ordering::full_fence();
  conn->ring(slot->index());
  while (ordering::load_acquire(ctl.response_seq) != seq) std::this_thread::yield();
  EXPECT_EQ(ordering::load_relaxed(ctl.batch_status), static_cast<int32_t>(ChannelStatus::kBadBatch));
  EXPECT_GE(ch.host.stats().bad_batches_total, 2u);
  // Both slots still serve. (The forged request bumped the sequence: resynchronise
  // by releasing that slot and claiming a fresh one.)
  EXPECT_EQ(other->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
}

TEST(Channel, ReleasedSlotIsFreedAndReusable) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  uint32_t index;
  {
    auto slot = ClientSlot::claim(conn->region(), *conn, &why);
    ASSERT_TRUE(slot);
    index = slot->index();
    ASSERT_TRUE(slot->heap().allocate(10000));
  }
  auto& ctl = conn->region().control(index);
  for (int i = 0; i < 2000 && ordering::load_acquire(ctl.state) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ordering::load_acquire(ctl.state), static_cast<uint32_t>(wire::SlotState::kFree));
  EXPECT_EQ(ch.service.counters.closed.load(), 1u);
  auto again = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(again) << why;
  EXPECT_EQ(again->index(), index);
  EXPECT_EQ(again->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
}

TEST(Channel, AllSlotsBusyIsAClearError) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  std::vector<std::unique_ptr<ClientSlot>> slots;
  for (int i = 0; i < 4; ++i) {
    slots.push_back(ClientSlot::claim(conn->region(), *conn, &why));
    ASSERT_TRUE(slots.back()) << why;
  }
  EXPECT_FALSE(ClientSlot::claim(conn->region(), *conn, &why));
  EXPECT_NE(why.find("in use"), std::string::npos);
}

TEST(Channel, ManyThreadsManySlotsConcurrently) {
  Channel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      std::string why;
      auto slot = ClientSlot::claim(conn->region(), *conn, &why);
      if (!slot) return void(failures++);
      for (uint64_t i = 0; i < 300; ++i) {
        uint64_t payload[4] = {i, uint64_t(t), i * i, ~i};
        auto r = slot->call(testing::kChecksum, std::as_bytes(std::span(payload)), 8);
        if (r.status != 0 || u64(r.bytes) != testing::fnv1a(reinterpret_cast<std::byte*>(payload), 32)) failures++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Channel, ClientSeesTransportLostWhenTheHostStops) {
  auto ch = std::make_unique<Channel>();
  auto conn = LocalConnection::connect(ch->host.socket_path());
  std::string why;
  auto slot = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(slot);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ch->host.stop();
  });
  uint32_t ms = 2000;  // the host is busy with this call when it stops
  auto r = slot->call(testing::kSleepMs, bytes_of(ms), 0);
  stopper.join();
  // The call may finish before the stop lands; either way a later call sees the loss.
  if (r.status == 0) r = slot->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0);
  EXPECT_EQ(r.status, static_cast<int32_t>(ChannelStatus::kTransportLost));
}

TEST(Channel, ConnectingWithoutAServerExplainsWhatToDo) {
  try {
    LocalConnection::connect("/tmp/vmrpc-test-nobody-here.sock");
    FAIL() << "connect should fail";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("vmcuda-stub"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vmrpc
