// A vmrpc service for tests and benchmarks (stands in for vmcuda-stub's dispatcher).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "vmrpc/ordering.h"
#include "vmrpc/service.h"

namespace vmrpc::testing {

enum TestCall : uint32_t {
  kXorCopy = 0x100,     // XorCopyArgs: out[i] = in[i] ^ key, both in the heap
  kChecksum = 0x101,    // any inline bytes -> uint64 FNV-1a of them
  kSleepMs = 0x102,     // uint32 ms: the host is busy that long (a long call)
  kCallIndex = 0x103,   // -> uint64: how many calls this slot served before this one
  kFail = 0x104,        // -> returns the int32 status it is given
  kHeapChecksum = 0x105,// HeapRef -> uint64 FNV-1a of those heap bytes
  kHeapAddress = 0x106, // HeapRef -> uint64: where this host process sees those bytes
  kSetLate = 0x107,     // int32: sets the batch's SlotControl::late_status to it (answers 0)
  kHangOnClose = 0x108, // the slot's close() never returns (a kernel that never ends)
};

struct XorCopyArgs {
  wire::HeapRef in;
  wire::HeapRef out;
  uint8_t key;
  uint8_t pad[7];
};
static_assert(sizeof(XorCopyArgs) == 40);

inline uint64_t fnv1a(const std::byte* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

struct TestServiceCounters {
  std::atomic<uint64_t> opened{0};
  std::atomic<uint64_t> closed{0};
  std::atomic<uint64_t> calls{0};
};

class TestSlot : public SlotService {
 public:
  explicit TestSlot(TestServiceCounters& c) : c_(c) {}
  int32_t call(const CallContext& ctx, uint32_t id, std::span<const std::byte> args, std::span<std::byte> reply,
               uint32_t& reply_bytes) override {
    c_.calls++;
    const uint64_t index = served_++;
    auto put_u64 = [&](uint64_t v) -> int32_t {
      if (reply.size() < 8) return static_cast<int32_t>(wire::ChannelStatus::kReplyTooSmall);
      std::memcpy(reply.data(), &v, 8);
      reply_bytes = 8;
      return 0;
    };
    switch (id) {
      case kXorCopy: {
        XorCopyArgs a;
        if (args.size() != sizeof a) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&a, args.data(), sizeof a);
        auto in = ctx.heap(a.in);
        auto out = ctx.heap(a.out);
        if (!in || !out || in->size() != out->size()) return static_cast<int32_t>(wire::ChannelStatus::kBadHeapRef);
        const auto* src = reinterpret_cast<const uint8_t*>(in->data());
        auto* dst = reinterpret_cast<uint8_t*>(out->data());
        const uint64_t k8 = 0x0101010101010101ull * a.key;
        size_t i = 0, n = in->size();
        for (; i + 8 <= n; i += 8) {
          uint64_t v;
          std::memcpy(&v, src + i, 8);
          v ^= k8;
          std::memcpy(dst + i, &v, 8);
        }
        for (; i < n; ++i) dst[i] = src[i] ^ a.key;
        return 0;
      }
      case kChecksum:
        return put_u64(fnv1a(args.data(), args.size()));
      case kHeapChecksum: {
        wire::HeapRef r;
        if (args.size() != sizeof r) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&r, args.data(), sizeof r);
        auto b = ctx.heap(r);
        if (!b) return static_cast<int32_t>(wire::ChannelStatus::kBadHeapRef);
        return put_u64(fnv1a(b->data(), b->size()));
      }
      case kHeapAddress: {
        wire::HeapRef r;
        if (args.size() != sizeof r) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&r, args.data(), sizeof r);
        auto b = ctx.heap(r);
        if (!b) return static_cast<int32_t>(wire::ChannelStatus::kBadHeapRef);
        return put_u64(reinterpret_cast<uint64_t>(b->data()));
      }
      case kSleepMs: {
        uint32_t ms;
        if (args.size() != sizeof ms) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&ms, args.data(), sizeof ms);
        std::this_thread::sleep_for(std::chrono::milliseconds(ms > 60000 ? 60000 : ms));
        return 0;
      }
      case kCallIndex:
        return put_u64(index);
      case kSetLate: {
        int32_t st;
        if (args.size() != sizeof st) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&st, args.data(), sizeof st);
        ordering::store_relaxed(ctx.region.control(ctx.slot.slot).late_status, st);
        return 0;
      }
      case kHangOnClose:
        hang_on_close_ = true;
        return 0;
      case kFail: {
        int32_t st;
        if (args.size() != sizeof st) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&st, args.data(), sizeof st);
        return st;
      }
    }
    return static_cast<int32_t>(wire::ChannelStatus::kUnknownCall);
  }
  void close() override {
    c_.closed++;
    while (hang_on_close_) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

 private:
  TestServiceCounters& c_;
  bool hang_on_close_ = false;
  uint64_t served_ = 0;
};

class TestService : public Service {
 public:
  std::unique_ptr<SlotService> open(const SlotInfo&) override {
    counters.opened++;
    return std::make_unique<TestSlot>(counters);
  }
  TestServiceCounters counters;
};

}  // namespace vmrpc::testing
