// libFuzzer target for what the host reads from a hostile guest: the frame decoder
// (decode_batch + write_frame_status), the region header check (Layout::from_header,
// with Layout::plan behind it) and heap references (RegionView::resolve).
//
// Built with clang -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt,
// `make fuzz`). Besides the sanitizers' own checks, every run checks the promises
// frame_decoder.h and region.h make, and aborts (a crash libFuzzer saves) when one
// does not hold. The input format is described in fuzz_input.h.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "vmrpc/batch_writer.h"
#include "vmrpc/frame_decoder.h"
#include "vmrpc/region.h"
#include "vmrpc/wire.h"

namespace vmrpc::fuzz {
namespace {

using wire::ChannelStatus;

[[noreturn]] void fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "frame_decoder_fuzz: invariant broken at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) ::vmrpc::fuzz::fail(__FILE__, __LINE__, #cond); \
  } while (0)

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads the input from the front; past the end it reads zeros.
struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  template <class T>
  T take() {
    uint8_t buf[sizeof(T)] = {};
    for (size_t i = 0; i < sizeof(T) && pos < size; ++i) buf[i] = data[pos++];
    return load<T>(buf);
  }
  bool more(size_t n) const { return size - pos >= n; }
};

uint64_t align16(uint64_t v) { return wire::align_up64(v, wire::kFrameAlign); }

// ------------------------------------------------------------------------ decode

// Checks one frame the decoder accepted against the untouched stack it came from.
// `expect_offset` is where this frame must start: right after the previous one.
void check_frame(std::span<const std::byte> stack, uint32_t request_bytes, const DecodedBatch& b,
                 const DecodedFrame& f, uint64_t expect_offset, uint64_t expect_args_offset) {
  FUZZ_CHECK(f.frame_offset == expect_offset);
  FUZZ_CHECK(f.frame_offset % wire::kFrameAlign == 0);
  FUZZ_CHECK(f.frame_offset >= sizeof(wire::BatchHeader));
  // The header, the arguments and the reply area all lie inside request_bytes, which
  // lies inside the stack.
  FUZZ_CHECK(uint64_t{f.frame_offset} + sizeof(wire::FrameHeader) <= request_bytes);
  FUZZ_CHECK(uint64_t{f.frame_offset} + sizeof(wire::FrameHeader) + f.arg_bytes <= f.reply_offset);
  FUZZ_CHECK(f.reply_offset == align16(uint64_t{f.frame_offset} + sizeof(wire::FrameHeader) + f.arg_bytes));
  FUZZ_CHECK(f.reply_offset % wire::kFrameAlign == 0);
  FUZZ_CHECK(uint64_t{f.reply_offset} + f.reply_capacity <= request_bytes);
  FUZZ_CHECK(align16(uint64_t{f.reply_offset} + f.reply_capacity) <= request_bytes);
  FUZZ_CHECK(request_bytes <= stack.size());
  // What was decoded is what the stack says.
  wire::FrameHeader h;
  std::memcpy(&h, stack.data() + f.frame_offset, sizeof h);
  FUZZ_CHECK(f.call_id == h.call_id);
  FUZZ_CHECK(f.flags == h.flags);
  FUZZ_CHECK(f.arg_bytes == h.arg_bytes);
  FUZZ_CHECK(f.reply_capacity == h.reply_capacity);
  // The private copy of the arguments: packed one after another, equal to the stack's.
  FUZZ_CHECK(f.args_offset == expect_args_offset);
  FUZZ_CHECK(uint64_t{f.args_offset} + f.arg_bytes <= b.copy.size());
  const auto args = b.args(f);
  FUZZ_CHECK(args.size() == f.arg_bytes);
  FUZZ_CHECK(f.arg_bytes == 0 ||
             std::memcmp(args.data(), stack.data() + f.frame_offset + sizeof(wire::FrameHeader), f.arg_bytes) == 0);
}

bool same_frames(const DecodedBatch& a, const DecodedBatch& b) {
  if (a.status != b.status || a.bad_frame != b.bad_frame || a.bad_frame_offset != b.bad_frame_offset ||
      a.error != b.error || a.copy != b.copy || a.frames.size() != b.frames.size())
    return false;
  for (size_t i = 0; i < a.frames.size(); ++i) {
    const auto &x = a.frames[i], &y = b.frames[i];
    if (x.call_id != y.call_id || x.flags != y.flags || x.frame_offset != y.frame_offset ||
        x.args_offset != y.args_offset || x.arg_bytes != y.arg_bytes || x.reply_offset != y.reply_offset ||
        x.reply_capacity != y.reply_capacity)
      return false;
  }
  return true;
}

// The host keeps one DecodedBatch per slot and reuses it for every batch: so does this,
// across inputs, to catch state left over from an earlier batch.
DecodedBatch& reused_batch() {
  static DecodedBatch* b = new DecodedBatch;
  return *b;
}

void fuzz_decode(const uint8_t* data, size_t size) {
  Reader in{data, size};
  const uint8_t sel = in.take<uint8_t>();
  uint32_t request_bytes = in.take<uint32_t>();
  // The stack: its own exact-size allocation, so any read or write past it is an
  // ASan report; writable, as the host's mapping is.
  const size_t n = in.size - in.pos;
  std::unique_ptr<std::byte[]> mem(new std::byte[n ? n : 1]);
  if (n) std::memcpy(mem.get(), in.data + in.pos, n);
  const std::span<std::byte> stack(mem.get(), n);
  if (sel & kSelRequestInRange) request_bytes = static_cast<uint32_t>(request_bytes % (uint64_t{n} + 17));
  DecodeLimits limits;
  if (const uint32_t k = (sel >> 4) & 7) limits.max_frames = k;

  DecodedBatch& b = reused_batch();
  decode_batch(stack, request_bytes, b, limits);
  {
    DecodedBatch fresh;
    decode_batch(stack, request_bytes, fresh, limits);
    FUZZ_CHECK(same_frames(b, fresh));  // nothing carried over from the previous input
  }

  // Status and its companions.
  FUZZ_CHECK(b.status == ChannelStatus::kOk || b.status == ChannelStatus::kBadBatch ||
             b.status == ChannelStatus::kBadFrame);
  const bool in_range = request_bytes >= sizeof(wire::BatchHeader) && request_bytes <= n;
  wire::BatchHeader bh{};
  if (in_range) std::memcpy(&bh, stack.data(), sizeof bh);
  if (!in_range) FUZZ_CHECK(b.status == ChannelStatus::kBadBatch);
  if (b.status == ChannelStatus::kOk) {
    FUZZ_CHECK(in_range);
    FUZZ_CHECK(b.error.empty());
    FUZZ_CHECK(b.bad_frame == -1 && b.bad_frame_offset == -1);
    FUZZ_CHECK(b.frames.size() == bh.frame_count);
    FUZZ_CHECK(bh.frame_count <= limits.max_frames);
  } else {
    FUZZ_CHECK(!b.error.empty());
    FUZZ_CHECK(b.frames.size() <= bh.frame_count);
    if (b.status == ChannelStatus::kBadFrame) {
      FUZZ_CHECK(b.bad_frame >= 0 && static_cast<size_t>(b.bad_frame) == b.frames.size());
      FUZZ_CHECK(b.frames.size() < bh.frame_count);
    } else if (b.bad_frame >= 0) {
      // Every frame decoded, but they do not end at request_bytes.
      FUZZ_CHECK(static_cast<uint32_t>(b.bad_frame) == bh.frame_count && b.frames.size() == bh.frame_count);
      FUZZ_CHECK(b.bad_frame_offset == -1);
    } else {
      FUZZ_CHECK(b.bad_frame == -1 && b.frames.empty() && b.bad_frame_offset == -1);
    }
  }

  // Every decoded frame (whatever the status): inside the stack and request_bytes,
  // one right after the other, with its arguments copied out exactly.
  uint64_t expect = sizeof(wire::BatchHeader), args_sum = 0;
  for (const auto& f : b.frames) {
    check_frame(stack, request_bytes, b, f, expect, args_sum);
    args_sum += f.arg_bytes;
    expect = align16(uint64_t{f.reply_offset} + f.reply_capacity);
  }
  FUZZ_CHECK(b.copy.size() == args_sum);
  if (b.status == ChannelStatus::kOk) FUZZ_CHECK(expect == request_bytes);
  if (b.bad_frame_offset >= 0) {
    // The broken frame's header is where the next frame would start, and inside.
    FUZZ_CHECK(static_cast<uint64_t>(b.bad_frame_offset) == expect);
    FUZZ_CHECK(static_cast<uint64_t>(b.bad_frame_offset) + sizeof(wire::FrameHeader) <= request_bytes);
  }

  // What the guest wrote agrees with what the host decoded: re-encoding the accepted
  // frames with the guest's BatchWriter gives the same offsets and request_bytes.
  if (b.status == ChannelStatus::kOk) {
    std::vector<std::byte> again(request_bytes);
    BatchWriter w(again);
    for (const auto& f : b.frames) {
      wire::FrameHeader h;
      std::memcpy(&h, stack.data() + f.frame_offset, sizeof h);
      auto r = w.append(f.call_id, f.arg_bytes, f.reply_capacity, f.flags, h.tag);
      FUZZ_CHECK(r && r->offset == f.frame_offset);
    }
    FUZZ_CHECK(w.finish() == request_bytes);
  }

  // The host's writes: a reply into each reply area, then status and reply length
  // into each decoded header (and the broken one's, as host_endpoint.cc does). Only
  // those bytes may change; ASan catches any write past the stack.
  std::vector<std::byte> before(stack.begin(), stack.end());
  std::vector<uint8_t> may_change(n, 0);
  const int32_t status = in.size ? static_cast<int32_t>(in.data[0]) - 128 : 0;
  for (const auto& f : b.frames) {
    if (b.status == ChannelStatus::kOk && f.reply_capacity) {
      auto reply = stack.subspan(f.reply_offset, f.reply_capacity);
      std::memset(reply.data(), 0xA5, reply.size());
      std::memset(may_change.data() + f.reply_offset, 1, f.reply_capacity);
    }
    write_frame_status(stack, f.frame_offset, status, f.reply_capacity);
    std::memset(may_change.data() + f.frame_offset + offsetof(wire::FrameHeader, status), 1, 8);
  }
  if (b.bad_frame_offset >= 0) {
    write_frame_status(stack, static_cast<uint32_t>(b.bad_frame_offset),
                       static_cast<int32_t>(ChannelStatus::kBadFrame), 0);
    std::memset(may_change.data() + b.bad_frame_offset + offsetof(wire::FrameHeader, status), 1, 8);
  }
  for (size_t i = 0; i < n; ++i)
    if (!may_change[i] && before[i] != stack[i]) fail(__FILE__, __LINE__, "a host write left its area");
  // Reply areas never cover a header or argument byte, so the writes above left every
  // frame as the guest wrote it, and the private copy still matches.
  for (const auto& f : b.frames) {
    // All of the header but status and reply_bytes (the host's two fields).
    FUZZ_CHECK(0 == std::memcmp(stack.data() + f.frame_offset, before.data() + f.frame_offset,
                                offsetof(wire::FrameHeader, status)));
    FUZZ_CHECK(0 == std::memcmp(stack.data() + f.frame_offset + offsetof(wire::FrameHeader, tag),
                                before.data() + f.frame_offset + offsetof(wire::FrameHeader, tag),
                                sizeof(uint64_t)));
    FUZZ_CHECK(f.arg_bytes == 0 || 0 == std::memcmp(b.args(f).data(),
                                                    stack.data() + f.frame_offset + sizeof(wire::FrameHeader),
                                                    f.arg_bytes));
  }

  // The guest reads the answers back where the host put them.
  if (b.status == ChannelStatus::kOk) {
    BatchWriter w(stack);
    for (const auto& f : b.frames) {
      auto r = w.result(FrameRef{f.frame_offset});
      FUZZ_CHECK(r.status == status);
      FUZZ_CHECK(r.reply.data() == stack.data() + f.reply_offset);
      FUZZ_CHECK(r.reply.size() == f.reply_capacity);
    }
  }
}

// ------------------------------------------------------------------------ layout

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

// What every accepted layout promises: parts in order, inside the region, no overlap.
void check_layout(const Layout& l) {
  FUZZ_CHECK(is_pow2(l.region_bytes) && l.region_bytes >= (1u << 20));
  FUZZ_CHECK(l.slot_count >= 1 && l.slot_count <= 2048);
  FUZZ_CHECK(l.slot_bytes >= 2 * wire::kPageBytes && l.slot_bytes % wire::kPageBytes == 0);
  FUZZ_CHECK(l.stack_bytes() >= wire::kPageBytes && l.stack_bytes() < l.slot_bytes);
  FUZZ_CHECK(is_pow2(l.heap_page_bytes) && l.heap_page_bytes >= 64);
  FUZZ_CHECK(l.heap_table_offset >= sizeof(wire::RegionHeader));
  FUZZ_CHECK(l.heap_table_offset % wire::kPageBytes == 0);
  FUZZ_CHECK(l.heap_bytes > 0 && l.heap_bytes % l.heap_page_bytes == 0);
  FUZZ_CHECK(l.heap_table_offset + l.heap_pages() * sizeof(wire::HeapPageOwner) <= l.slots_offset);
  FUZZ_CHECK(l.slots_offset % wire::kPageBytes == 0);
  FUZZ_CHECK(l.slot_offset(l.slot_count - 1) + l.slot_bytes == l.slot_offset(l.slot_count));
  FUZZ_CHECK(l.slot_offset(l.slot_count) <= l.heap_offset);
  FUZZ_CHECK(l.heap_offset % l.heap_page_bytes == 0 && l.heap_offset % wire::kPageBytes == 0);
  FUZZ_CHECK(l.heap_offset <= l.region_bytes && l.heap_bytes <= l.region_bytes - l.heap_offset);
}

bool same_layout(const Layout& a, const Layout& b) {
  return a.region_bytes == b.region_bytes && a.slot_count == b.slot_count && a.slot_bytes == b.slot_bytes &&
         a.slots_offset == b.slots_offset && a.heap_table_offset == b.heap_table_offset &&
         a.heap_offset == b.heap_offset && a.heap_bytes == b.heap_bytes && a.heap_page_bytes == b.heap_page_bytes &&
         a.host_peer_id == b.host_peer_id && a.guest_peer_id == b.guest_peer_id;
}

// resolve() returns a span exactly where the ref says, inside the heap, or nothing
// when the ref leaves the heap. Pointers are compared as addresses only.
void check_resolve(const RegionView& view, const wire::HeapRef& ref, bool touch) {
  const Layout& l = view.layout();
  const bool inside = ref.offset <= l.heap_bytes && ref.bytes <= l.heap_bytes - ref.offset;
  auto r = view.resolve(ref);
  FUZZ_CHECK(r.has_value() == inside);
  if (!r) return;
  const auto base = reinterpret_cast<uintptr_t>(view.base());
  const auto p = reinterpret_cast<uintptr_t>(r->data());
  FUZZ_CHECK(r->size() == ref.bytes);
  FUZZ_CHECK(p == base + l.heap_offset + ref.offset);
  FUZZ_CHECK(p >= base + l.heap_offset && p - (base + l.heap_offset) + r->size() <= l.heap_bytes);
  if (touch && !r->empty()) {
    // Through the span: inside the real mapping, or ASan reports it.
    volatile std::byte* q = r->data();
    q[0] = q[0];
    q[r->size() - 1] = q[r->size() - 1];
  }
}

void fuzz_header(const uint8_t* data, size_t size) {
  Reader in{data, size};
  const uint8_t sel = in.take<uint8_t>();
  auto h = in.take<wire::RegionHeader>();
  uint64_t mapped = in.take<uint64_t>();
  if (sel & kSelForceMagic) {
    h.magic = wire::kRegionMagic;
    h.abi_version = wire::kAbiVersion;
  }
  if (sel & kSelMappedFromHeader) mapped = h.region_bytes;

  // The guest's check of a header a (possibly broken or hostile) host wrote.
  std::string why;
  auto l = Layout::from_header(h, mapped, &why);
  if (!l) {
    FUZZ_CHECK(!why.empty());
  } else {
    check_layout(*l);
    FUZZ_CHECK(l->region_bytes == mapped);
    FUZZ_CHECK(l->slots_offset == h.slots_offset && l->heap_offset == h.heap_offset &&
               l->heap_bytes == h.heap_bytes && l->heap_table_offset == h.heap_table_offset);
    // Resolve refs against it (addresses only: this region is not mapped). The base
    // is a plain address far from 0 so no address computation can wrap.
    RegionView view(reinterpret_cast<std::byte*>(uintptr_t{1} << 44), *l);
    while (in.more(1)) check_resolve(view, in.take<wire::HeapRef>(), false);
  }

  // The host's side: a layout planned from the same fields survives the round trip.
  RegionConfig cfg{h.region_bytes, h.slot_count, h.slot_bytes, h.heap_page_bytes, h.host_peer_id, h.guest_peer_id};
  auto planned = Layout::plan(cfg, &why);
  if (!planned) {
    FUZZ_CHECK(!why.empty());
    FUZZ_CHECK(!l);  // from_header accepts only what plan() would lay out
    return;
  }
  check_layout(*planned);
  wire::RegionHeader written;
  std::memset(&written, 0xEE, sizeof written);
  planned->write_header(written, h.host_epoch);
  FUZZ_CHECK(written.header_bytes == sizeof(wire::RegionHeader) && written.host_epoch == h.host_epoch);
  auto back = Layout::from_header(written, planned->region_bytes, &why);
  FUZZ_CHECK(back && same_layout(*back, *planned));
  if (l) FUZZ_CHECK(same_layout(*l, *planned));
}

// ------------------------------------------------------------------------ heap

struct RealRegion {
  Layout layout;
  std::unique_ptr<std::byte[]> mem;
  RegionView view;
};

// Small real regions (exact-size allocations), planned once.
RealRegion& real_region(uint8_t choice) {
  static const RegionConfig cfgs[] = {
      {1ull << 20, 1, 8192, 64},
      {1ull << 20, 4, 16384, 4096},
      {2ull << 20, 2, 8192, 1u << 20},
      {32ull << 20, 2048, 8192, 4096},
  };
  static RealRegion* regions[4] = {};
  const size_t i = choice % 4;
  if (!regions[i]) {
    std::string why;
    auto l = Layout::plan(cfgs[i], &why);
    if (!l) fail(__FILE__, __LINE__, why.c_str());
    check_layout(*l);
    auto* r = new RealRegion{*l, std::unique_ptr<std::byte[]>(new std::byte[l->region_bytes]()), {}};
    r->view = RegionView(r->mem.get(), r->layout);
    regions[i] = r;
  }
  return *regions[i];
}

void fuzz_heap(const uint8_t* data, size_t size) {
  Reader in{data, size};
  in.take<uint8_t>();
  RealRegion& region = real_region(in.take<uint8_t>());
  const uint64_t heap = region.layout.heap_bytes;
  while (in.more(1)) {
    auto ref = in.take<wire::HeapRef>();
    check_resolve(region.view, ref, true);
    // Also the refs right at the heap's edges, built from the fuzzed ones.
    check_resolve(region.view, {heap - (ref.offset % (heap + 1)), ref.bytes}, true);
    check_resolve(region.view, {ref.offset, heap - ref.offset}, true);
  }
}

}  // namespace
}  // namespace vmrpc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vmrpc::fuzz;
  if (size == 0) return 0;
  switch (data[0] & 3) {
    case kDecode:
    case kDecode2:
      fuzz_decode(data, size);
      break;
    case kHeader:
      fuzz_header(data, size);
      break;
    case kHeap:
      fuzz_heap(data, size);
      break;
  }
  return 0;
}
