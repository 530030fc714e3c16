// libFuzzer target for the state stream reader (host-stub/src/state_stream.h): a state file
// comes from disk and may be damaged or hostile. The input is the file's bytes; it is read to
// the end through the one parser: from memory (MemorySource, chunks in place, copied, and in
// the resume's two steps) and from a memfd (FileSource, pread: copied and in two steps). Every payload is also decoded with
// ByteReader. Besides ASan/UBSan and leaks, the two readers must agree, and a stream read
// to its trailer must have delivered exactly the bytes its blobs announced.
//
// An input that starts with "VMSTRIPE" describes a striped state file instead (state_stream.h):
// a byte n (1 + n % 8 files), then per file a u32 length and that many bytes (cut at the
// input's end); file k is stripe k, read by FileSource from memfds, copied and in two steps,
// and both must agree. The set may claim any count, unit and size: a stripe missing, too
// short or too long, of another set, or a header out of range must be refused before any
// read past a stripe's end (ASan sees the reads; a short pread is an error).
//
// Built with -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (tests/fuzz/CMakeLists.txt): the
// parser then computes checksums but does not stop at a mismatch, so that the fuzzer gets
// past them; state_stream_test covers mismatches. Seeds: state_file_fuzz_seeds.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "state_stream.h"

namespace vmcuda::host::state {
namespace {

[[noreturn]] void broken(int line, const char* what) {
  std::fprintf(stderr, "state_file_fuzz: invariant broken at line %d: %s\n", line, what);
  std::abort();
}
#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) broken(__LINE__, #cond); \
  } while (0)

struct Outcome {
  bool done = false;
  uint64_t records = 0;
  uint64_t bytes = 0;  // payload and blob bytes delivered
};

void decode_metadata(std::span<const std::byte> payload) {
  ByteReader r(payload);
  uint8_t a;
  uint32_t b;
  uint64_t c;
  int32_t d;
  std::string s;
  std::vector<std::byte> v;
  while (r.ok() && r.remaining() > 0) {
    size_t before = r.offset();
    r.get_u8(&a) && r.get_string(&s, 4096) && r.get_u32(&b) && r.get_bytes(&v, 1 << 16) && r.get_u64(&c) &&
        r.get_i32(&d);
    FUZZ_CHECK(r.offset() <= payload.size());
    FUZZ_CHECK(r.ok() ? r.offset() > before : !r.error().empty());
  }
  r.expect_end();
}

// How a blob's chunks are read: in place (read_chunk_view), copied (read_chunk), or in two
// steps as the resume's ring reads them (next_chunk, then copy_chunk, rejected on failure).
enum class Chunks { kView, kCopy, kSplit };

Outcome read_all(Source& src, Chunks mode) {
  const bool copy_chunks = mode != Chunks::kView;
  static std::vector<std::byte> chunk_buffer(kChunkBytes);
  Outcome out;
  RecordHeader h;
  std::string why;
  std::vector<std::byte> payload;
  while (src.next(&h, &why)) {
    FUZZ_CHECK(why.empty());
    ++out.records;
    if (!h.is_blob()) {
      if (h.index % 3 == 2) continue;  // left unread: next() skips it, verifying
      if (!src.read_payload(&payload, &why)) break;
      FUZZ_CHECK(payload.size() == h.payload_bytes);
      out.bytes += payload.size();
      decode_metadata(payload);
      continue;
    }
    if (h.index % 3 == 2) continue;  // a blob left unread
    uint64_t got_total = 0;
    for (;;) {
      size_t got = 0;
      std::span<const std::byte> chunk;
      bool ok;
      if (mode == Chunks::kSplit) {
        Source::Chunk c;
        ok = src.next_chunk(&c, &why);
        if (ok && c.bytes > 0) {
          FUZZ_CHECK(c.bytes <= kChunkBytes);
          ok = src.copy_chunk(c, chunk_buffer, &why);
          if (!ok) src.reject(why);
        }
        got = c.bytes;
      } else {
        ok = copy_chunks ? src.read_chunk(chunk_buffer, &got, &why) : src.read_chunk_view(&chunk, &why);
      }
      if (!ok) break;
      if (copy_chunks) chunk = std::span<const std::byte>(chunk_buffer).first(got);
      if (chunk.empty()) break;
      FUZZ_CHECK(chunk.size() <= kChunkBytes);
      got_total += chunk.size();
      decode_metadata(chunk.first(std::min<size_t>(chunk.size(), 64)));
    }
    if (!why.empty()) break;
    FUZZ_CHECK(got_total == h.payload_bytes);
    out.bytes += got_total;
  }
  out.done = src.done();
  FUZZ_CHECK(out.done == why.empty());
  // A failed reader stays failed, with the same reason.
  std::string again;
  FUZZ_CHECK(!src.next(&h, &again) && again == why);
  return out;
}

int memfd(unsigned k = 0) {
  static int fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  if (fds[k] < 0) fds[k] = ::memfd_create("state_file_fuzz", MFD_CLOEXEC);
  if (fds[k] < 0) broken(__LINE__, "memfd_create failed");
  return fds[k];
}

void fill(int fd, std::span<const std::byte> bytes) {
  FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  FUZZ_CHECK(bytes.empty() || ::pwrite(fd, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size()));
}

constexpr char kStripedInput[8] = {'V', 'M', 'S', 'T', 'R', 'I', 'P', 'E'};

// A striped set described by the input (above).
void read_striped(std::span<const std::byte> in, const Limits& limits) {
  in = in.subspan(sizeof kStripedInput);
  if (in.empty()) return;
  const unsigned n = 1 + unsigned(in[0]) % 8;
  in = in.subspan(1);
  int fds[8];
  for (unsigned k = 0; k < n; ++k) {
    uint32_t len = 0;
    if (in.size() >= 4) {
      std::memcpy(&len, in.data(), 4);
      in = in.subspan(4);
    }
    const size_t take = std::min<size_t>(len, in.size());
    fds[k] = memfd(k);
    fill(fds[k], in.first(take));
    in = in.subspan(take);
  }
  FileSource copied({fds, n}, "fuzz set", limits);
  Outcome a = read_all(copied, Chunks::kCopy);
  FileSource split({fds, n}, "fuzz set", limits);
  Outcome b = read_all(split, Chunks::kSplit);
  FUZZ_CHECK(copied.stripes() == split.stripes() && copied.stripes() <= n);
  FUZZ_CHECK(a.done == b.done && a.records == b.records && a.bytes == b.bytes);
}

}  // namespace
}  // namespace vmcuda::host::state

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vmcuda::host::state;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Limits limits;
  limits.max_record_bytes = 4096;  // some inputs hit the limits
  limits.max_records = 64;

  if (size >= sizeof kStripedInput && std::memcmp(data, kStripedInput, sizeof kStripedInput) == 0) {
    read_striped(bytes, limits);
    return 0;
  }

  MemorySource in_place(MemoryStream::borrow(bytes), limits);
  Outcome a = read_all(in_place, Chunks::kView);
  MemorySource copied(MemoryStream::borrow(bytes), limits);
  Outcome b = read_all(copied, Chunks::kCopy);
  MemorySource split(MemoryStream::borrow(bytes), limits);
  Outcome d = read_all(split, Chunks::kSplit);

  int fd = memfd();
  fill(fd, bytes);
  FileSource file(fd, "fuzz input", limits);
  Outcome c = read_all(file, Chunks::kCopy);
  FileSource file_split(fd, "fuzz input", limits);
  Outcome e = read_all(file_split, Chunks::kSplit);

  FUZZ_CHECK(a.done == b.done && b.done == c.done && c.done == d.done && d.done == e.done);
  FUZZ_CHECK(a.records == b.records && b.records == c.records && c.records == d.records && d.records == e.records);
  FUZZ_CHECK(a.bytes == b.bytes && b.bytes == c.bytes && c.bytes == d.bytes && d.bytes == e.bytes);
  return 0;
}
