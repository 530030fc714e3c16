// Writes the seed corpus of frame_decoder_fuzz into a folder: well-formed batches
// written by the guest's BatchWriter (and a few broken ones), headers the host's
// Layout writes, and heap references at the heap's edges. The seeds are generated
// from the code rather than checked in, so they follow the wire format when it moves.
//
//   frame_decoder_fuzz_seeds DIR
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "vmrpc/batch_writer.h"
#include "vmrpc/region.h"
#include "vmrpc/wire.h"

namespace {

using namespace vmrpc;
using Bytes = std::vector<uint8_t>;

std::string g_dir;
int g_written = 0;

template <class T>
void put(Bytes& b, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof v);
}

void save(const std::string& name, const Bytes& b) {
  const std::string path = g_dir + "/seed-" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  ++g_written;
}

// A decode input: selector, request_bytes, then the stack (`slack` bytes past the batch).
void save_decode(const std::string& name, const std::vector<std::byte>& stack, uint32_t request_bytes,
                 uint8_t sel = fuzz::kDecode) {
  Bytes b;
  put(b, sel);
  put(b, request_bytes);
  for (std::byte x : stack) b.push_back(static_cast<uint8_t>(x));
  save(name, b);
}

struct Batch {
  std::vector<std::byte> stack;
  BatchWriter w;
  explicit Batch(size_t bytes) : stack(bytes), w(stack) {}
  void fill_args(FrameRef f, uint32_t n, uint8_t seed) {
    for (uint32_t i = 0; i < n; ++i) w.args(f)[i] = std::byte(seed + i * 7);
  }
};

void decode_seeds() {
  {  // no frames
    Batch b(64);
    save_decode("empty-batch", b.stack, b.w.finish());
  }
  {  // the channel's own calls
    Batch b(512);
    b.w.append(static_cast<uint32_t>(wire::MessageId::kNop), 0, 0);
    wire::HelloArgs h{wire::kAbiVersion, 1234, 0};
    b.w.append(static_cast<uint32_t>(wire::MessageId::kHello), std::as_bytes(std::span(&h, 1)),
               sizeof(wire::HelloReply));
    const char text[] = "ping through shared memory";
    b.w.append(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(text)), 64);
    save_decode("channel-calls", b.stack, b.w.finish());
  }
  {  // service calls, odd sizes, skip-on-error flags, tags
    Batch b(2048);
    for (uint32_t i = 0; i < 6; ++i) {
      auto f = b.w.append(wire::kFirstServiceCall + i, i * 13 + 1, i * 5, i % 2 ? wire::kFrameSkipOnError : 0,
                          0x1000 + i);
      b.fill_args(*f, i * 13 + 1, static_cast<uint8_t>(i));
    }
    const uint32_t bytes = b.w.finish();
    save_decode("service-calls", b.stack, bytes);
    save_decode("service-calls-in-range", b.stack, bytes, fuzz::kDecode | fuzz::kSelRequestInRange);
    save_decode("service-calls-limit-3", b.stack, bytes, fuzz::kDecode | (3 << 4));
    save_decode("service-calls-trailing", b.stack, bytes + 16);
    save_decode("service-calls-short", b.stack, bytes - 16);
  }
  {  // many small frames
    Batch b(8192);
    for (uint32_t i = 0; i < 120; ++i) b.w.append(0x103, 0, 8);
    save_decode("many-frames", b.stack, b.w.finish());
  }
  {  // large arguments and reply
    Batch b(20000);
    auto f = b.w.append(0x101, 12000, 4096);
    b.fill_args(*f, 12000, 9);
    save_decode("large-frame", b.stack, b.w.finish());
  }
  {  // a hostile guest: lengths that run past the batch, a count that cannot fit
    Batch b(512);
    b.w.append(0x103, 0, 8);
    auto f = b.w.append(0x103, 0, 8);
    const uint32_t bytes = b.w.finish();
    wire::FrameHeader h;
    std::memcpy(&h, b.stack.data() + f->offset, sizeof h);
    h.reply_capacity = 0x7fffffff;
    std::memcpy(b.stack.data() + f->offset, &h, sizeof h);
    save_decode("bad-reply-capacity", b.stack, bytes);
    h.reply_capacity = 8;
    h.arg_bytes = 0xfffffff0u;
    std::memcpy(b.stack.data() + f->offset, &h, sizeof h);
    save_decode("bad-arg-bytes", b.stack, bytes);
    wire::BatchHeader bh{1000, 0, 0};
    std::memcpy(b.stack.data(), &bh, sizeof bh);
    save_decode("bad-frame-count", b.stack, bytes);
    save_decode("request-past-stack", b.stack, 0xfffffff0u);
  }
}

void save_header(const std::string& name, const wire::RegionHeader& h, uint64_t mapped, uint8_t sel,
                 const std::vector<wire::HeapRef>& refs) {
  Bytes b;
  put(b, sel);
  put(b, h);
  put(b, mapped);
  for (const auto& r : refs) put(b, r);
  save(name, b);
}

std::vector<wire::HeapRef> edge_refs(uint64_t heap) {
  return {{0, 0}, {0, 1}, {heap - 1, 1}, {heap, 0}, {heap, 1}, {1, heap}, {0, heap}, {~0ull, 16}, {16, ~0ull}};
}

void header_seeds() {
  const RegionConfig cfgs[] = {
      {1ull << 20, 1, 8192, 64},
      {16ull << 20, 4, 64 << 10, 4096},
      {256ull << 20, 16, 1 << 20, 4096},
      {64ull << 20, 2048, 8192, 1u << 21},
      {1ull << 40, 2048, 1 << 20, 1u << 31},
  };
  int i = 0;
  for (const auto& c : cfgs) {
    std::string why;
    auto l = Layout::plan(c, &why);
    if (!l) {
      std::fprintf(stderr, "seed layout %d: %s\n", i, why.c_str());
      std::exit(1);
    }
    wire::RegionHeader h{};
    l->write_header(h, 0x1234 + i);
    const std::string n = "header-" + std::to_string(i);
    save_header(n, h, l->region_bytes, fuzz::kHeader, edge_refs(l->heap_bytes));
    save_header(n + "-forced", h, 0, fuzz::kHeader | fuzz::kSelForceMagic | fuzz::kSelMappedFromHeader, {});
    auto bad = h;
    bad.heap_offset += 4096;
    save_header(n + "-moved-heap", bad, l->region_bytes, fuzz::kHeader, {});
    ++i;
  }
}

void heap_seeds() {
  // The heap sizes of the target's regions are found by the target itself: refs at
  // 0, 1, and all-ones edges, plus offsets that the target mirrors at the heap's end.
  for (uint8_t choice = 0; choice < 4; ++choice) {
    Bytes b;
    put(b, static_cast<uint8_t>(fuzz::kHeap));
    put(b, choice);
    for (const auto& r : std::vector<wire::HeapRef>{{0, 0}, {0, 1}, {1, 0}, {4096, 4096}, {~0ull, 1}, {1, ~0ull}})
      put(b, r);
    save("heap-" + std::to_string(choice), b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  decode_seeds();
  header_seeds();
  heap_seeds();
  std::printf("frame_decoder_fuzz_seeds: wrote %d seeds to %s\n", g_written, g_dir.c_str());
  return 0;
}
