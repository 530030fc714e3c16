// The client process of the two-process channel tests. It uses only the guest side
// of vmrpc (as guest-lib does) and checks every reply itself.
//
//   vmrpc_test_client SOCKET payload MAX_MIB   batched calls, payloads 1 B .. MAX_MIB MiB
//   vmrpc_test_client SOCKET hang MS           prints READY, then a call the host runs MS ms
//   vmrpc_test_client SOCKET loop MS           calls for MS milliseconds, all checked
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/test_service.h"
#include "vmrpc/client.h"

using namespace vmrpc;

namespace {
int fails = 0;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      std::fprintf(stderr, "client check failed: " __VA_ARGS__); \
      std::fprintf(stderr, "\n");                         \
      ++fails;                                            \
    }                                                     \
  } while (0)

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span(&v, 1));
}

uint64_t as_u64(std::span<const std::byte> b) {
  uint64_t v = 0;
  if (b.size() == 8) std::memcpy(&v, b.data(), 8);
  return v;
}

void payloads(ClientSlot& slot, uint64_t max_mib) {
  std::mt19937_64 rng(42);
  // Inline payloads, many per batch.
  for (uint32_t n : {0u, 1u, 3u, 64u, 1000u, 4096u, 40000u}) {
    std::vector<std::vector<std::byte>> data;
    std::vector<FrameRef> frames;
    for (int i = 0; i < 16; ++i) {
      std::vector<std::byte> d(n);
      for (auto& b : d) b = std::byte(rng());
      auto f = slot.batch().append(testing::kChecksum, d, 8);
      if (!f) break;  // stack full: send what fits
      frames.push_back(*f);
      data.push_back(std::move(d));
    }
    CHECK(slot.flush() == wire::ChannelStatus::kOk, "inline batch of %u-byte frames", n);
    for (size_t i = 0; i < frames.size(); ++i) {
      auto r = slot.result(frames[i]);
      CHECK(r.status == 0 && as_u64(r.reply) == testing::fnv1a(data[i].data(), n), "inline checksum %u/%zu", n, i);
    }
  }
  // Heap payloads: bytes to hundreds of MiB, transformed by the host, checked bit-exact.
  std::vector<uint64_t> sizes = {1, 15, 4096, 65537, 1 << 20, 16 << 20};
  if (max_mib > 16) sizes.push_back(max_mib << 20);
  for (uint64_t n : sizes) {
    auto in = slot.heap().allocate(n);
    auto out = slot.heap().allocate(n);
    CHECK(in && out, "heap allocation of 2 x %llu bytes", (unsigned long long)n);
    if (!in || !out) return;
    const uint64_t seed = rng();
    for (uint64_t i = 0; i + 8 <= n; i += 8) {
      uint64_t v = seed ^ (i * 0x9E3779B97F4A7C15ull);
      std::memcpy(in->data + i, &v, 8);
    }
    for (uint64_t i = n & ~7ull; i < n; ++i) in->data[i] = std::byte(i);
    // Two frames in one batch: transform, then checksum the result on the host.
    testing::XorCopyArgs a{in->ref(), out->ref(), 0xa5, {}};
    auto f1 = slot.batch().append(testing::kXorCopy, bytes_of(a), 0);
    wire::HeapRef r = out->ref();
    auto f2 = slot.batch().append(testing::kHeapChecksum, bytes_of(r), 8);
    CHECK(slot.flush() == wire::ChannelStatus::kOk, "heap batch");
    CHECK(slot.result(*f1).status == 0, "xor copy of %llu bytes", (unsigned long long)n);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (out->data[i] != (in->data[i] ^ std::byte{0xa5})) ++bad;
    CHECK(bad == 0, "%llu of %llu bytes differ", (unsigned long long)bad, (unsigned long long)n);
    auto cs = slot.result(*f2);
    CHECK(cs.status == 0 && as_u64(cs.reply) == testing::fnv1a(out->data, n), "host checksum of %llu bytes",
          (unsigned long long)n);
    slot.heap().free(in->offset);
    slot.heap().free(out->offset);
    std::printf("payload %llu bytes ok\n", (unsigned long long)n);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SOCKET payload|hang|loop N\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[2];
  const uint64_t n = std::strtoull(argv[3], nullptr, 0);
  try {
    auto conn = LocalConnection::connect(argv[1]);
    std::string why;
    auto slot = ClientSlot::claim(conn->region(), *conn, &why);
    if (!slot) {
      std::fprintf(stderr, "claim: %s\n", why.c_str());
      return 3;
    }
    if (mode == "payload") {
      payloads(*slot, n);
    } else if (mode == "hang") {
      std::printf("READY slot %u\n", slot->index());
      std::fflush(stdout);
      uint32_t ms = static_cast<uint32_t>(n);
      slot->call(testing::kSleepMs, bytes_of(ms), 0);
    } else if (mode == "loop") {
      auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(n);
      uint64_t calls = 0;
      while (std::chrono::steady_clock::now() < end) {
        uint64_t v[2] = {calls, ~calls};
        auto r = slot->call(testing::kChecksum, std::as_bytes(std::span(v)), 8);
        CHECK(r.status == 0 && as_u64(r.bytes) == testing::fnv1a(reinterpret_cast<std::byte*>(v), 16), "loop call");
        if (fails) break;
        ++calls;
      }
      std::printf("calls %llu\n", (unsigned long long)calls);
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client: %s\n", e.what());
    return 4;
  }
  return fails ? 1 : 0;
}
