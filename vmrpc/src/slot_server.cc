#include "vmrpc/slot_server.h"

#include <time.h>
#include <unistd.h>

#include <cstring>

#include "vmrpc/frame_decoder.h"
#include "vmrpc/heap.h"
#include "vmrpc/knobs.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"

namespace vmrpc {

using wire::ChannelStatus;
using wire::SlotState;

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

void ring(int eventfd) {
  uint64_t one = 1;
  // EAGAIN only when the counter is saturated: the other side is awake anyway.
  [[maybe_unused]] ssize_t n = ::write(eventfd, &one, sizeof one);
}

void drain(int eventfd) {
  uint64_t v;
  ssize_t n;
  do n = ::read(eventfd, &v, sizeof v);
  while (n < 0 && errno == EINTR);
}

int32_t dispatch(const SlotServer& s, const CallContext& ctx, SlotService* svc, const DecodedFrame& f,
                 const DecodedBatch& batch, std::span<std::byte> reply, uint32_t& reply_bytes) {
  const auto args = batch.args(f);
  switch (static_cast<wire::MessageId>(f.call_id)) {
    case wire::MessageId::kNop:
      return 0;
    case wire::MessageId::kHello: {
      if (args.size() != sizeof(wire::HelloArgs)) return static_cast<int32_t>(ChannelStatus::kBadArguments);
      if (reply.size() < sizeof(wire::HelloReply)) return static_cast<int32_t>(ChannelStatus::kReplyTooSmall);
      wire::HelloReply r{wire::kAbiVersion, ctx.slot.slot, s.host_epoch};
      std::memcpy(reply.data(), &r, sizeof r);
      reply_bytes = sizeof r;
      return 0;
    }
    case wire::MessageId::kEcho:
      if (reply.size() < args.size()) return static_cast<int32_t>(ChannelStatus::kReplyTooSmall);
      if (!args.empty()) std::memcpy(reply.data(), args.data(), args.size());
      reply_bytes = static_cast<uint32_t>(args.size());
      return 0;
  }
  if (f.call_id < wire::kFirstServiceCall || !svc) return static_cast<int32_t>(ChannelStatus::kUnknownCall);
  try {
    return svc->call(ctx, f.call_id, args, reply, reply_bytes);
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "host", "call " + std::to_string(f.call_id) + " failed: " + e.what());
    reply_bytes = 0;
    return static_cast<int32_t>(ChannelStatus::kHandlerFailed);
  }
}

void run_batch(const SlotServer& s, SlotService* svc, DecodedBatch& batch) {
  auto& ctl = s.view.control(s.slot);
  const std::span<std::byte> stack = s.view.stack(s.slot);
  const uint32_t request_bytes = ordering::load_relaxed(ctl.request_bytes);  // copied out once
  ordering::store_relaxed(ctl.late_status, 0);  // the service may set it while it serves this batch
  decode_batch(stack, request_bytes, batch);
  if (batch.status != ChannelStatus::kOk) {
    VMRPC_LOG(kWarn, "host", "connection " + std::to_string(s.info.connection_id) + " slot " +
                                 std::to_string(s.slot) + ": rejected a batch: " + batch.error);
    if (s.on_bad_batch) s.on_bad_batch(batch.error);
    for (const auto& f : batch.frames)
      write_frame_status(stack, f.frame_offset, static_cast<int32_t>(ChannelStatus::kNotProcessed), 0);
    if (batch.bad_frame_offset >= 0)
      write_frame_status(stack, static_cast<uint32_t>(batch.bad_frame_offset),
                         static_cast<int32_t>(ChannelStatus::kBadFrame), 0);
    ordering::store_relaxed(ctl.batch_status, static_cast<int32_t>(batch.status));
    ordering::store_relaxed(ctl.frames_done, 0u);
    return;
  }
  const CallContext ctx{s.info, s.view, s.stop};
  bool failed = false;
  uint32_t done = 0;
  for (const auto& f : batch.frames) {
    uint32_t reply_bytes = 0;
    int32_t status;
    if (failed && (f.flags & wire::kFrameSkipOnError)) {
      status = static_cast<int32_t>(ChannelStatus::kSkipped);
    } else {
      status = dispatch(s, ctx, svc, f, batch, stack.subspan(f.reply_offset, f.reply_capacity), reply_bytes);
      if (reply_bytes > f.reply_capacity) reply_bytes = 0;  // our bug; never leak past the area
    }
    if (status != 0) failed = true;
    write_frame_status(stack, f.frame_offset, status, reply_bytes);
    ++done;
  }
  if (svc) {
    try {
      svc->batch_done();
    } catch (const std::exception& e) {
      VMRPC_LOG(kWarn, "host", std::string("after a batch: ") + e.what());
    }
  }
  ordering::store_relaxed(ctl.batch_status, static_cast<int32_t>(ChannelStatus::kOk));
  ordering::store_relaxed(ctl.frames_done, done);
}

}  // namespace

bool serve_slot(const SlotServer& s, SlotService* svc) {
  auto& ctl = s.view.control(s.slot);
  if (svc) svc->bind_region(s.view);
  // The region's image token: it changes under a running slot only when the region was
  // replaced by a saved image (the host changes it itself only while the slot is parked).
  auto& header_token = s.view.header().image_token;
  uint64_t token = ordering::load_acquire(header_token);
  bool replaced = s.region_replaced && s.region_replaced->load();
  ordering::store_release(ctl.host_state, static_cast<uint32_t>(svc ? wire::HostSlotState::kServing
                                                                     : wire::HostSlotState::kRefused));
  const uint64_t spin_ns = static_cast<uint64_t>(knobs::kHostSpinNs.get());
  // What was answered last: 0 for a new client; a restored one (its region is a saved
  // image) continues after the batch answered before the save.
  uint64_t last_done = ordering::load_acquire(ctl.response_seq);
  DecodedBatch batch;
  bool guest_closed = false;
  auto stopped = [&] { return s.stop && s.stop->load(); };
  auto has_work = [&] {
    return ordering::load_acquire(ctl.request_seq) != last_done ||
           ordering::load_acquire(ctl.state) != static_cast<uint32_t>(SlotState::kClaimed) || stopped() ||
           (s.gate && s.gate->wanted());
  };

  for (;;) {
    // Spin, then sleep on the doorbell.
    if (!has_work()) {
      const uint64_t deadline = now_ns() + spin_ns;
      while (!has_work() && now_ns() < deadline) ordering::cpu_relax();
      while (!has_work()) {
        ordering::store_release(ctl.host_sleeping, 1u);
        ordering::full_fence();  // pairs with the guest's fence between request_seq and host_sleeping
        if (has_work()) break;
        drain(s.doorbell_fd);
      }
      ordering::store_relaxed(ctl.host_sleeping, 0u);
    }
    // A call boundary: the control side's work (a suspend holds the slot here; the guest's
    // next batch waits in its slot until the hold ends).
    if (s.gate && s.gate->wanted()) {
      // Parked, the slot looks asleep: a guest that calls meanwhile rings, and so does one
      // whose region is saved now and restored later (a new host finds it waiting).
      ordering::store_release(ctl.host_sleeping, 1u);
      s.gate->serve(stopped);
      ordering::store_relaxed(ctl.host_sleeping, 0u);
      token = ordering::load_acquire(header_token);
    }
    if (stopped()) break;
    if (ordering::load_acquire(ctl.state) != static_cast<uint32_t>(SlotState::kClaimed)) {
      guest_closed = true;
      break;
    }
    const uint64_t seq = ordering::load_acquire(ctl.request_seq);
    if (seq == last_done) continue;
    if (ordering::load_acquire(header_token) != token) {
      // A saved image replaced the region (a snapshot reverted in place): this batch is the
      // image's, not this client's. Leave it to the host, which restores the image's client.
      replaced = true;
      break;
    }
    run_batch(s, svc, batch);
    last_done = seq;
    ordering::store_relaxed(ctl.served_batches, ordering::load_relaxed(ctl.served_batches) + 1);
    // Replies and statuses are written: publish, then ring only a sleeping guest.
    ordering::store_release(ctl.response_seq, seq);
    ordering::full_fence();  // pairs with the guest's fence between guest_sleeping and response_seq
    if (ordering::load_relaxed(ctl.guest_sleeping)) ring(s.notify_fd);
  }

  if (s.gate) s.gate->close();
  if (svc) {
    try {
      svc->close();
    } catch (const std::exception& e) {
      VMRPC_LOG(kWarn, "host", std::string("closing a slot failed: ") + e.what());
    }
  }
  // A slot whose region was replaced under it belongs to the restored image now: leave it.
  if (replaced || (s.region_replaced && s.region_replaced->load())) {
    if (s.left_for_replaced_region) *s.left_for_replaced_region = true;
    return false;
  }
  if (guest_closed && s.hand_back) reset_slot(s.view, s.slot);
  else if (s.hand_back) reclaim_heap_pages(s.view, s.slot + 1);
  return guest_closed;
}

void reset_slot(const RegionView& view, uint32_t slot) {
  auto& ctl = view.control(slot);
  reclaim_heap_pages(view, slot + 1);
  ordering::store_relaxed(ctl.request_seq, uint64_t{0});
  ordering::store_relaxed(ctl.response_seq, uint64_t{0});
  ordering::store_relaxed(ctl.request_bytes, 0u);
  ordering::store_relaxed(ctl.guest_sleeping, 0u);
  ordering::store_relaxed(ctl.host_state, static_cast<uint32_t>(wire::HostSlotState::kIdle));
  ordering::store_release(ctl.state, static_cast<uint32_t>(SlotState::kFree));
}

void fail_slot(const RegionView& view, uint32_t slot, int notify_fd, wire::HostSlotState why) {
  auto& ctl = view.control(slot);
  ordering::store_release(ctl.host_state, static_cast<uint32_t>(why));
  const uint64_t seq = ordering::load_acquire(ctl.request_seq);
  if (ordering::load_acquire(ctl.response_seq) != seq) {
    // A batch was in flight: answer it as failed so the guest does not wait forever.
    ordering::store_relaxed(ctl.batch_status, static_cast<int32_t>(why == wire::HostSlotState::kStateLost
                                                                      ? ChannelStatus::kStateLost
                                                                  : why == wire::HostSlotState::kTimedOut
                                                                      ? ChannelStatus::kLaunchTimeout
                                                                  : why == wire::HostSlotState::kRefused
                                                                      ? ChannelStatus::kRefused
                                                                      : ChannelStatus::kHandlerFailed));
    ordering::store_relaxed(ctl.frames_done, 0u);
    ordering::store_release(ctl.response_seq, seq);
  }
  ordering::full_fence();
  ring(notify_fd);
}

}  // namespace vmrpc
