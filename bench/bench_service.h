// The service behind vmrpc_bench: the test service plus two bench-only calls that
// move heap bytes into a host-private buffer (what the stub does before handing a
// chunk to the GPU) and checksum that buffer (so the bench can check every byte
// arrived).
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "support/test_service.h"
#include "vmrpc/service.h"

namespace vmrpc::bench {

enum BenchCall : uint32_t {
  kBulkCopyIn = 0x180,   // BulkCopyArgs: host buffer[dst_offset..] = heap bytes of `src`
  kBulkChecksum = 0x181, // BulkRange -> uint64 sum64() of host buffer[offset, offset+bytes)
};

// A checksum fast enough for hundreds of MiB (FNV-1a over 64-bit words; the tail bytes
// one by one). Not cryptographic: it only has to catch bytes that did not arrive.
inline uint64_t sum64(const std::byte* p, uint64_t n) {
  uint64_t h = 1469598103934665603ull, i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

struct BulkCopyArgs {
  wire::HeapRef src;
  uint64_t dst_offset;
  uint64_t reserved;
};
static_assert(sizeof(BulkCopyArgs) == 32);

struct BulkRange {
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(BulkRange) == 16);

// Host-private destination of the bulk test, shared by all slots of the service
// (each client thread writes disjoint ranges). Allocated and touched up front so that
// page faults are not measured.
class HostBuffer {
 public:
  explicit HostBuffer(uint64_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("bench: cannot map the host buffer");
    data_ = static_cast<std::byte*>(p);
    std::memset(data_, 0, bytes);
  }
  ~HostBuffer() { ::munmap(data_, bytes_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  std::byte* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::byte* data_;
  uint64_t bytes_;
};

class BenchSlot : public SlotService {
 public:
  BenchSlot(testing::TestServiceCounters& c, HostBuffer& buf) : test_(c), buf_(buf) {}
  int32_t call(const CallContext& ctx, uint32_t id, std::span<const std::byte> args, std::span<std::byte> reply,
               uint32_t& reply_bytes) override {
    switch (id) {
      case kBulkCopyIn: {
        BulkCopyArgs a;
        if (args.size() != sizeof a) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&a, args.data(), sizeof a);
        auto src = ctx.heap(a.src);
        if (!src) return static_cast<int32_t>(wire::ChannelStatus::kBadHeapRef);
        if (a.dst_offset > buf_.bytes() || src->size() > buf_.bytes() - a.dst_offset)
          return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(buf_.data() + a.dst_offset, src->data(), src->size());
        return 0;
      }
      case kBulkChecksum: {
        BulkRange r;
        if (args.size() != sizeof r) return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        std::memcpy(&r, args.data(), sizeof r);
        if (r.offset > buf_.bytes() || r.bytes > buf_.bytes() - r.offset)
          return static_cast<int32_t>(wire::ChannelStatus::kBadArguments);
        if (reply.size() < 8) return static_cast<int32_t>(wire::ChannelStatus::kReplyTooSmall);
        const uint64_t h = sum64(buf_.data() + r.offset, r.bytes);
        std::memcpy(reply.data(), &h, 8);
        reply_bytes = 8;
        return 0;
      }
    }
    return test_.call(ctx, id, args, reply, reply_bytes);
  }
  void close() override { test_.close(); }

 private:
  testing::TestSlot test_;
  HostBuffer& buf_;
};

class BenchService : public Service {
 public:
  explicit BenchService(uint64_t host_buffer_bytes) : buf_(host_buffer_bytes) {}
  std::unique_ptr<SlotService> open(const SlotInfo&) override {
    counters.opened++;
    return std::make_unique<BenchSlot>(counters, buf_);
  }
  testing::TestServiceCounters counters;

 private:
  HostBuffer buf_;
};

}  // namespace vmrpc::bench
