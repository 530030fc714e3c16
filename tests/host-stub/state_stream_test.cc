// The state stream (host-stub/src/state_stream.h): round trips through host memory and a
// file, and a reader that refuses every damaged, truncated, foreign or oversized stream.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "state_stream.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace vmcuda::host::state {
namespace {

namespace fs = std::filesystem;
constexpr size_t kMiB = size_t{1} << 20;

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// What a reader found: each record (blobs with their bytes) and how it ended.
struct Item {
  uint32_t type;
  uint64_t id;
  bool blob;
  std::vector<std::byte> bytes;
};
struct Parsed {
  std::vector<Item> items;
  bool ok = false;
  std::string why;
};

// kCopy: read_chunk; kView: read_chunk_view; kThreads: next_chunk, then copy_chunk on
// `threads` (the resume's ring: the chunks are verified on other threads, after the
// source went past them, and a failure goes back to it by reject()).
enum class ChunkMode { kCopy, kView, kThreads };

Parsed read_all(Source& src, ChunkMode mode = ChunkMode::kCopy, CopyThreads* threads = nullptr) {
  Parsed p;
  RecordHeader h;
  static std::vector<std::byte> buffer(kChunkBytes);  // once: the damage tests parse thousands of streams
  CopyThreads inline_threads(0);
  if (!threads) threads = &inline_threads;
  while (src.next(&h, &p.why)) {
    Item item{h.type, h.id, h.is_blob(), {}};
    if (!h.is_blob()) {
      if (!src.read_payload(&item.bytes, &p.why)) return p;
    } else if (mode == ChunkMode::kThreads) {
      struct Job {
        Source::Chunk chunk;
        size_t at = 0;
        uint64_t ticket = 0;
        bool ok = false;
        std::string why;
      };
      std::vector<std::unique_ptr<Job>> jobs;
      item.bytes.resize(size_t(h.payload_bytes));  // a blob's total is checked against the stream's size
      for (size_t at = 0;;) {
        auto j = std::make_unique<Job>();
        if (!src.next_chunk(&j->chunk, &p.why)) break;
        if (j->chunk.bytes == 0) break;
        j->at = at;
        at += j->chunk.bytes;
        Job* raw = j.get();
        std::span<std::byte> dest = std::span(item.bytes).subspan(raw->at, raw->chunk.bytes);
        j->ticket = threads->run([raw, dest, &src] { raw->ok = src.copy_chunk(raw->chunk, dest, &raw->why); });
        jobs.push_back(std::move(j));
      }
      for (auto& j : jobs) threads->wait(j->ticket);  // nothing may still write item.bytes
      if (!p.why.empty()) return p;
      for (auto& j : jobs)
        if (!j->ok) {
          src.reject(j->why);
          p.why = j->why;
          return p;
        }
    } else {
      for (;;) {
        std::span<const std::byte> chunk;
        if (mode == ChunkMode::kCopy) {
          size_t got = 0;
          if (!src.read_chunk(buffer, &got, &p.why)) return p;
          chunk = std::span(buffer).first(got);
        } else if (!src.read_chunk_view(&chunk, &p.why)) {
          return p;
        }
        if (chunk.empty()) break;
        item.bytes.insert(item.bytes.end(), chunk.begin(), chunk.end());
      }
      if (item.bytes.size() != h.payload_bytes) {
        p.why = "blob size differs from its header";
        return p;
      }
    }
    p.items.push_back(std::move(item));
  }
  p.ok = src.done() && p.why.empty();
  return p;
}

Parsed read_memory(std::span<const std::byte> bytes, Limits limits = {}) {
  MemorySource src(MemoryStream::borrow(bytes), limits);
  return read_all(src);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char templ[] = "/tmp/state_stream_test.XXXXXX";
    path = ::mkdtemp(templ);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const char* name) const { return (path / name).string(); }
};

void write_file(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

// The stream a state file's stripes hold, put together by the format (state_stream.h)
// without FileSource; empty where stripe 0 has no striped header.
std::vector<std::byte> read_set(const std::string& path) {
  const std::vector<std::byte> s0 = read_file(path);
  if (s0.size() < kStripeHeaderBytes) return {};
  uint32_t version = 0, count = 0;
  uint64_t unit = 0, bytes = 0;
  std::memcpy(&version, &s0[8], 4);
  std::memcpy(&count, &s0[20], 4);
  std::memcpy(&unit, &s0[24], 8);
  std::memcpy(&bytes, &s0[32], 8);
  if (version != 2 || count == 0 || count > 64 || unit == 0) return {};
  std::vector<std::vector<std::byte>> stripes{s0};
  for (unsigned k = 1; k < count; ++k) stripes.push_back(read_file(path + "." + std::to_string(k)));
  std::vector<std::byte> out(bytes);
  for (uint64_t i = 0; i * unit < bytes; ++i) {
    const auto& st = stripes[i % count];
    const uint64_t at = 4096 + i / count * unit, n = std::min(unit, bytes - i * unit);
    if (at + n > st.size()) return {};
    std::memcpy(out.data() + i * unit, st.data() + at, n);
  }
  return out;
}

Parsed read_path(const std::string& path, Limits limits = {}) {
  FileSource src(path, limits);
  return read_all(src);
}

// The contents the round trips carry: metadata records, a multi-chunk blob whose size is
// not a multiple of the chunk, an empty blob, an empty record.
struct Contents {
  std::vector<std::byte> metadata, big, small_blob;
  Contents() {
    ByteWriter w;
    w.put_string("kernel_module");
    w.put_u64(0x7f0000001000ull);
    w.put_i32(-3);
    metadata = w.take();
    big = random_bytes(40 * kMiB + 12345, 1);
    small_blob = random_bytes(777, 2);
  }
  // Writes through acquire/commit, partly filling some buffers (commit a prefix).
  void write(Sink& sink) const {
    ASSERT_TRUE(sink.put_record(1, 10, metadata)) << sink.error();
    ASSERT_TRUE(sink.begin_blob(2, 20, big.size())) << sink.error();
    size_t done = 0;
    bool half = false;
    while (done < big.size()) {
      size_t n = std::min(kChunkBytes, big.size() - done);
      std::span<std::byte> buf = sink.acquire(n);
      ASSERT_EQ(buf.size(), n) << sink.error();
      if (half) n = n / 2 + 1;  // commit only a prefix of the acquired buffer
      half = !half;
      std::memcpy(buf.data(), big.data() + done, n);
      ASSERT_TRUE(sink.commit(buf.first(n))) << sink.error();
      done += n;
    }
    ASSERT_TRUE(sink.end_blob()) << sink.error();
    ASSERT_TRUE(sink.put_record(3, 30, {})) << sink.error();
    ASSERT_TRUE(sink.put_blob(4, 40, {})) << sink.error();
    ASSERT_TRUE(sink.put_blob(5, 50, small_blob)) << sink.error();
  }
  void check(const Parsed& p) const {
    ASSERT_TRUE(p.ok) << p.why;
    ASSERT_EQ(p.items.size(), 5u);
    EXPECT_EQ(p.items[0].type, 1u);
    EXPECT_EQ(p.items[0].id, 10u);
    EXPECT_FALSE(p.items[0].blob);
    EXPECT_EQ(p.items[0].bytes, metadata);
    EXPECT_EQ(p.items[1].type, 2u);
    EXPECT_EQ(p.items[1].id, 20u);
    EXPECT_TRUE(p.items[1].blob);
    EXPECT_TRUE(p.items[1].bytes == big) << "the 40 MiB blob differs";
    EXPECT_EQ(p.items[2].type, 3u);
    EXPECT_TRUE(p.items[2].bytes.empty());
    EXPECT_TRUE(p.items[3].blob);
    EXPECT_TRUE(p.items[3].bytes.empty());
    EXPECT_EQ(p.items[4].bytes, small_blob);

    ByteReader r(p.items[0].bytes);
    std::string name;
    uint64_t address = 0;
    int32_t value = 0;
    EXPECT_TRUE(r.get_string(&name, 64) && r.get_u64(&address) && r.get_i32(&value) && r.expect_end()) << r.error();
    EXPECT_EQ(name, "kernel_module");
    EXPECT_EQ(address, 0x7f0000001000ull);
    EXPECT_EQ(value, -3);
  }
};

const Contents& contents() {
  static const Contents c;
  return c;
}

// A small stream with many chunks (4 KiB staging), for the damage tests.
std::vector<std::byte> small_stream() {
  SinkOptions o;
  o.staging_bytes = 4096;
  o.creator = "state_stream_test";
  MemorySink sink(o);
  sink.put_record(1, 1, as_bytes("object list"));
  sink.put_blob(2, 7, random_bytes(3 * 4096 + 100, 3));
  sink.put_record(3, 2, as_bytes("module image"));
  std::string why;
  EXPECT_TRUE(sink.finish(&why)) << why;
  return sink.take_stream()->flatten();
}

TEST(StateStream, MemoryRoundTrip) {
  uint64_t last_done = 0, calls = 0;
  SinkOptions o;
  o.creator = "vmcuda-stub test";
  o.expected_bytes = contents().big.size();
  o.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    EXPECT_EQ(total, contents().big.size());
    last_done = done;
    ++calls;
  };
  MemorySink sink(o);
  contents().write(sink);
  EXPECT_EQ(sink.take_stream(), nullptr) << "no stream before finish()";
  std::string why;
  ASSERT_TRUE(sink.finish(&why)) << why;
  std::shared_ptr<const MemoryStream> stream = sink.take_stream();
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->size(), sink.bytes_written());
  EXPECT_EQ(last_done, stream->size());
  EXPECT_GE(calls, 5u) << "progress comes at chunk granularity";

  for (ChunkMode mode : {ChunkMode::kCopy, ChunkMode::kView}) {
    uint64_t read_done = 0;
    MemorySource src(stream, {}, [&](uint64_t done, uint64_t total) {
      EXPECT_GE(done, read_done);
      EXPECT_EQ(total, stream->size());
      read_done = done;
    });
    contents().check(read_all(src, mode));
    EXPECT_EQ(src.creator(), "vmcuda-stub test");
    EXPECT_EQ(src.format_version(), kFormatVersion);
    EXPECT_EQ(read_done, stream->size());
  }
}

TEST(StateStream, MemoryChunksAreNotCopied) {
  // A restore from memory reads each chunk in the staging buffer it was filled in.
  MemorySink sink;
  ASSERT_TRUE(sink.begin_blob(1, 1, 100));
  std::span<std::byte> buf = sink.acquire(100);
  ASSERT_EQ(buf.size(), 100u);
  std::memset(buf.data(), 0x5a, 100);
  ASSERT_TRUE(sink.commit(buf));
  ASSERT_TRUE(sink.end_blob());
  std::string why;
  ASSERT_TRUE(sink.finish(&why)) << why;
  MemorySource src(sink.take_stream());
  RecordHeader h;
  ASSERT_TRUE(src.next(&h, &why)) << why;
  std::span<const std::byte> chunk;
  ASSERT_TRUE(src.read_chunk_view(&chunk, &why)) << why;
  EXPECT_EQ(chunk.data(), buf.data());
  EXPECT_EQ(chunk.size(), 100u);
}

// Two blobs, given as chunks the way a suspend gives them: commit_copy() from a two-slot
// ring (each slot reused once wait_copy returned) or acquire()/commit().
void write_two_blobs(Sink& sink, bool copies, const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  ASSERT_TRUE(sink.put_record(5, 1, as_bytes(std::string("before"))));
  for (const auto* blob : {&a, &b}) {
    ASSERT_TRUE(sink.begin_blob(9, blob->size(), blob->size()));
    std::vector<std::byte> ring(2 * 4 * kMiB);
    uint64_t tickets[2] = {};
    for (size_t off = 0, k = 0; off < blob->size(); ++k) {
      const size_t n = std::min(4 * kMiB, blob->size() - off);
      if (copies) {
        std::byte* slot = ring.data() + (k % 2) * 4 * kMiB;
        if (tickets[k % 2]) {
          ASSERT_TRUE(sink.wait_copy(tickets[k % 2])) << sink.error();
        }
        std::memcpy(slot, blob->data() + off, n);
        tickets[k % 2] = sink.commit_copy({slot, n});
        ASSERT_NE(tickets[k % 2], 0u) << sink.error();
      } else {
        std::span<std::byte> buf = sink.acquire(n);
        ASSERT_EQ(buf.size(), n);
        std::memcpy(buf.data(), blob->data() + off, n);
        ASSERT_TRUE(sink.commit(buf));
      }
      off += n;
    }
    ASSERT_TRUE(sink.end_blob()) << sink.error();
    ASSERT_TRUE(sink.put_record(5, 2, as_bytes(std::string("between"))));
  }
  ASSERT_TRUE(sink.put_record(5, 3, as_bytes(std::string("after"))));
  std::string why;
  ASSERT_TRUE(sink.finish(&why)) << why;
}

// commit_copy (a suspend's chunks from a pinned ring, copied and checksummed by several
// threads) writes the same stream, byte for byte, as acquire/commit; the source may be
// reused once wait_copy returns.
TEST(StateStream, ParallelCopiesWriteTheSameStream) {
  const std::vector<std::byte> a = random_bytes(37 * kMiB + 123, 7), b = random_bytes(3 * kMiB, 8);
  auto write = [&](Sink& sink, bool copies) { write_two_blobs(sink, copies, a, b); };
  MemorySink plain;
  write(plain, false);
  const std::vector<std::byte> want = plain.take_stream()->flatten();
  for (unsigned threads : {0u, 1u, 4u, 16u}) {
    SinkOptions o;
    o.copy_threads = threads;
    MemorySink sink(o);
    write(sink, true);
    EXPECT_EQ(sink.bytes_written(), want.size());
    EXPECT_TRUE(sink.take_stream()->flatten() == want) << threads << " copy threads wrote another stream";
  }
  // Misuse still fails with a reason.
  SinkOptions o;
  o.copy_threads = 2;
  MemorySink sink(o);
  std::vector<std::byte> x(16);
  EXPECT_EQ(sink.commit_copy(x), 0u);
  EXPECT_NE(sink.error().find("outside a blob"), std::string::npos) << sink.error();
}

// commit_copy() to a file: the copy threads write each chunk at its offset, with pwritev,
// through windows of a mapping (past whose address range pwritev takes over) or with
// O_DIRECT (whole blocks; the partial ones buffered): the same bytes as the in-order path,
// a file cut to the stream's end, and one that reads back.
TEST(StateStream, ParallelFileWritesMakeTheSameFile) {
  const std::vector<std::byte> a = random_bytes(37 * kMiB + 123, 17), b = random_bytes(3 * kMiB + 1, 18);
  MemorySink plain;
  write_two_blobs(plain, false, a, b);
  const std::vector<std::byte> want = plain.take_stream()->flatten();
  TempDir dir;
  using W = SinkOptions::FileWrites;
  struct Case {
    W writes;
    uint64_t expected;  // the mapping's address range: expected_bytes + 4 windows
    const char* what;
  } cases[] = {{W::kPwrite, 0, "pwritev"},
               {W::kMapped, 64 * kMiB, "mapped, every chunk in the range"},
               {W::kMapped, 0, "mapped, most chunks past the range"},
               {W::kDirect, 48 * kMiB, "direct, preallocated past the end"},
               {W::kDirect, 0, "direct, the file growing"}};
  const bool direct_here = [&] {
    FileSink probe(dir.file("probe.vmstate"), [] {
      SinkOptions o;
      o.file_writes = W::kDirect;
      return o;
    }());
    return std::string(probe.chunk_writes()) == "direct";
  }();
  for (const Case& c : cases)
    for (unsigned threads : {0u, 1u, 4u}) {
      SCOPED_TRACE(std::string(c.what) + ", " + std::to_string(threads) + " threads");
      const std::string path = dir.file("parallel.vmstate");
      SinkOptions o;
      o.copy_threads = threads;
      o.file_writes = c.writes;
      o.map_window_bytes = kMiB;  // many windows, mapped and unmapped as the chunks go
      o.expected_bytes = c.expected;
      uint64_t progress = 0;
      o.progress = [&](uint64_t done, uint64_t) { EXPECT_GE(done, progress); progress = done; };
      {
        FileSink sink(path, o);
        EXPECT_STREQ(sink.chunk_writes(), c.writes == W::kMapped                  ? "mapped"
                                          : c.writes == W::kDirect && direct_here ? "direct"
                                                                                  : "pwritev");
        write_two_blobs(sink, true, a, b);
        EXPECT_EQ(sink.bytes_written(), want.size());
        EXPECT_EQ(progress, want.size());
      }
      EXPECT_FALSE(fs::exists(path + ".partial"));
      EXPECT_TRUE(read_set(path) == want) << "another stream";
      Parsed p = read_path(path);
      ASSERT_TRUE(p.ok) << p.why;
      ASSERT_EQ(p.items.size(), 6u);
      EXPECT_TRUE(p.items[1].bytes == a);
    }
  // kAuto on tmpfs: one file mapped; stripes written with pwritev, each thread mostly into
  // a file of its own.
  struct statfs shm{};
  if (::statfs("/dev/shm", &shm) == 0 && shm.f_type == TMPFS_MAGIC && ::access("/dev/shm", W_OK) == 0)
    for (unsigned stripes : {1u, 2u}) {
      const std::string path = "/dev/shm/state_stream_test." + std::to_string(::getpid());
      SinkOptions o;
      o.copy_threads = 2;
      o.stripes = stripes;
      {
        FileSink sink(path, o);
        EXPECT_STREQ(sink.chunk_writes(), stripes == 1 ? "mapped" : "pwritev");
        write_two_blobs(sink, true, a, b);
      }
      EXPECT_TRUE(read_set(path) == want);
      EXPECT_EQ(fs::exists(path + ".1"), stripes == 2);
      remove_state_file(path);
      EXPECT_FALSE(fs::exists(path + ".1"));
      EXPECT_FALSE(fs::exists(path));
    }
  FileSink other(dir.file("auto.vmstate"));
  EXPECT_STREQ(other.chunk_writes(), direct_here ? "direct" : "pwritev") << "not tmpfs: " << dir.path;
}

// A tmpfs that fills up mid-save (a small one, mounted in a user namespace of a child
// process): every way of writing chunks stops with "no space left", and every stripe's
// .partial file goes. (A full tmpfs raises SIGBUS at a store into a mapping: the mapped writes allocate
// each page first.)
TEST(StateStream, AFullTmpfsMidSaveFailsCleanly) {
  for (auto writes : {SinkOptions::FileWrites::kMapped, SinkOptions::FileWrites::kDirect,
                      SinkOptions::FileWrites::kPwrite}) {
    TempDir dir;
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const uid_t uid = ::getuid();
      const gid_t gid = ::getgid();
      if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(77);
      auto put = [](const char* file, const std::string& text) {
        std::ofstream f(file);
        f << text;
        return bool(f.flush());
      };
      put("/proc/self/setgroups", "deny");
      if (!put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
          !put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
        ::_exit(77);
      if (::mount("tmpfs", dir.path.c_str(), "tmpfs", 0, "size=8m") != 0) ::_exit(77);
      const std::string path = dir.file("vm.vmstate");
      const std::vector<std::byte> big = random_bytes(24 * kMiB, 3);
      SinkOptions o;
      o.copy_threads = 3;  // 3 stripes
      o.file_writes = writes;
      std::string why;
      bool ok = true;
      {
        FileSink sink(path, o);
        ok = sink.begin_blob(9, 1, big.size());
        std::vector<uint64_t> tickets;
        for (size_t off = 0; ok && off < big.size(); off += 4 * kMiB) {
          const uint64_t t = sink.commit_copy(std::span(big).subspan(off, 4 * kMiB));
          ok = t != 0;
          tickets.push_back(t);
        }
        ok = ok && sink.end_blob();
        ok = sink.finish(&why) && ok;
        if (why.empty()) why = sink.error();
      }
      // Whichever stripe ran out; none of them is left, partial or not.
      const bool expected = !ok && why.find("no space left on device writing " + path) != std::string::npos &&
                            why.find(".partial (at byte offset ") != std::string::npos && fs::is_empty(dir.path);
      if (!expected) std::fprintf(stderr, "child: ok=%d why=%s\n", ok, why.c_str());
      ::umount(dir.path.c_str());
      ::_exit(expected ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount a small tmpfs in a user namespace here";
    EXPECT_EQ(WEXITSTATUS(status), 0) << int(writes);
  }
}

TEST(StateStream, FileRoundTripMatchesMemory) {
  TempDir dir;
  const std::string path = dir.file("client.vmstate");
  int allocs = 0, frees = 0;
  SinkOptions o;
  o.staging_buffers = 2;  // the ring wraps many times over the 40 MiB
  o.allocator.alloc = [&](size_t n) { ++allocs; return std::aligned_alloc(4096, (n + 4095) / 4096 * 4096); };
  o.allocator.free = [&](void* p) { ++frees; std::free(p); };
  uint64_t written = 0;
  o.progress = [&](uint64_t done, uint64_t) { EXPECT_GE(done, written); written = done; };
  {
    FileSink sink(path, o);
    contents().write(sink);
    EXPECT_FALSE(fs::exists(path)) << "the final name appears only at finish()";
    EXPECT_TRUE(fs::exists(path + ".partial"));
    std::string why;
    ASSERT_TRUE(sink.finish(&why)) << why;
    EXPECT_EQ(written, sink.bytes_written());
  }
  EXPECT_EQ(allocs, 2);
  EXPECT_EQ(frees, 2);
  EXPECT_FALSE(fs::exists(path + ".partial"));
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write)
      << "a state file holds guest memory: owner only";

  contents().check(read_path(path));
  FileSource view_src(path);
  contents().check(read_all(view_src, ChunkMode::kView));

  // The same records make the same bytes in memory.
  SinkOptions mo;
  mo.creator = o.creator;
  MemorySink memory(mo);
  contents().write(memory);
  std::string why;
  ASSERT_TRUE(memory.finish(&why)) << why;
  EXPECT_TRUE(memory.take_stream()->flatten() == read_set(path));
}

// A state file of S stripes: unit i of the stream in PATH.(i % S) (PATH for 0), every
// stripe of the size its header implies, and the stream read back whole, with any number
// of stripes, units of 8 KiB (chunks and records cross them everywhere) or 4 MiB, any way of
// writing chunks, inline or from several threads.
TEST(StateStream, StripedRoundTrip) {
  const std::vector<std::byte> a = random_bytes(9 * kMiB + 4097, 21), b = random_bytes(1 * kMiB + 3, 22);
  MemorySink plain;
  write_two_blobs(plain, false, a, b);
  const std::vector<std::byte> want = plain.take_stream()->flatten();
  TempDir dir;
  using W = SinkOptions::FileWrites;
  for (unsigned stripes : {1u, 3u, 8u})
    for (size_t unit : {size_t{8192}, kDefaultStripeUnit})
      for (W writes : {W::kPwrite, W::kMapped, W::kDirect})
        for (bool parallel : {false, true}) {
          SCOPED_TRACE(std::to_string(stripes) + " stripes of " + std::to_string(unit) + " bytes, writes " +
                       std::to_string(int(writes)) + (parallel ? ", 4 threads" : ", serial"));
          const std::string path = dir.file("striped.state");
          SinkOptions o;
          o.stripes = stripes;
          o.stripe_unit = unit;
          o.file_writes = writes;
          o.copy_threads = parallel ? 4 : 0;
          o.map_window_bytes = 64 << 10;
          o.expected_bytes = a.size();
          {
            FileSink sink(path, o);
            EXPECT_EQ(sink.stripes(), stripes);
            write_two_blobs(sink, parallel, a, b);
            EXPECT_EQ(sink.bytes_written(), want.size());
          }
          StripeLayout layout{kStripeHeaderBytes, unit, stripes};
          for (unsigned k = 0; k < stripes; ++k) {
            const std::string f = stripe_path(path, k);
            ASSERT_TRUE(fs::is_regular_file(f)) << f;
            EXPECT_FALSE(fs::exists(f + ".partial")) << f;
            EXPECT_EQ(fs::file_size(f), layout.file_bytes(k, want.size())) << f;
            EXPECT_EQ(fs::status(f).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write) << f;
          }
          EXPECT_FALSE(fs::exists(stripe_path(path, stripes)));
          EXPECT_TRUE(read_set(path) == want) << "another stream";
          for (bool threads : {false, true}) {
            FileSource src(path);
            CopyThreads pool(threads ? 3 : 0);
            Parsed p = read_all(src, threads ? ChunkMode::kThreads : ChunkMode::kCopy, &pool);
            ASSERT_TRUE(p.ok) << p.why;
            EXPECT_EQ(src.stripes(), stripes);
            ASSERT_EQ(p.items.size(), 6u);
            EXPECT_TRUE(p.items[1].bytes == a);
            EXPECT_TRUE(p.items[3].bytes == b);
          }
        }
  // A save with fewer stripes over one with more: the extra stripes of the old one go.
  SinkOptions o;
  o.stripes = 2;
  o.stripe_unit = 8192;
  {
    FileSink sink(dir.file("striped.state"), o);
    write_two_blobs(sink, false, a, b);
  }
  EXPECT_TRUE(fs::exists(dir.file("striped.state.1")));
  EXPECT_FALSE(fs::exists(dir.file("striped.state.2")));
  EXPECT_TRUE(read_path(dir.file("striped.state")).ok);
  remove_state_file(dir.file("striped.state"));
  EXPECT_TRUE(fs::is_empty(dir.path));
}

// Stripe 0's header with one field changed and its checksum (XXH3 of the 48 bytes before
// it) made right again: a forged header, as the fuzzer makes them.
void patch_stripe_header(const std::string& path, size_t at, uint64_t value, size_t n) {
  std::vector<std::byte> f = read_file(path);
  ASSERT_GE(f.size(), kStripeHeaderBytes);
  std::memcpy(&f[at], &value, n);
  const uint64_t sum = XXH3_64bits(f.data(), 48);
  std::memcpy(&f[48], &sum, 8);
  write_file(path, f);
}

// The reader takes a stripe set as hostile input: each way a set can be incomplete, mixed,
// swapped or forged is refused with a message naming the stripe, before any of the stream
// is read.
TEST(StateStream, ADamagedStripeSetIsRefused) {
  const std::vector<std::byte> a = random_bytes(3 * kMiB + 11, 31), b = random_bytes(5000, 32);
  TempDir dir;
  auto save = [&](const std::string& path) {
    SinkOptions o;
    o.stripes = 3;
    o.stripe_unit = 64 << 10;
    o.copy_threads = 2;
    FileSink sink(path, o);
    write_two_blobs(sink, true, a, b);
  };
  const std::string good = dir.file("good.state"), other = dir.file("other.state");
  save(good);
  save(other);
  ASSERT_TRUE(read_path(good).ok);
  const std::string path = dir.file("c.state");
  auto copy_good = [&] {
    remove_state_file(path);
    for (unsigned k = 0; k < 3; ++k) fs::copy_file(stripe_path(good, k), stripe_path(path, k));
  };
  auto refused = [&](const std::string& what, const std::string& expect) {
    SCOPED_TRACE(what);
    Parsed p = read_path(path);
    EXPECT_FALSE(p.ok);
    EXPECT_TRUE(p.items.empty()) << "nothing is read from a set that does not check out";
    EXPECT_NE(p.why.find(expect), std::string::npos) << p.why;
  };

  copy_good();
  fs::remove(path + ".2");
  refused("a missing stripe", "stripe 2 of 3: " + path + ".2 is missing");

  copy_good();
  fs::resize_file(path + ".1", fs::file_size(path + ".1") - 1);
  refused("a short stripe", path + ".1 has ");
  refused("a short stripe", ": truncated");

  copy_good();
  {
    std::ofstream f(path + ".2", std::ios::binary | std::ios::app);
    f << 'x';
  }
  refused("a longer stripe", ": bytes added");

  copy_good();
  fs::resize_file(path, fs::file_size(path) + 4096);
  refused("a longer stripe 0", ": bytes added");

  copy_good();
  fs::remove(path + ".1");
  fs::create_symlink(good + ".1", path + ".1");
  refused("a symlink", path + ".1 is a symbolic link: refused");
  fs::remove(path);
  fs::create_symlink(good, path);
  refused("stripe 0 a symlink", path + " is a symbolic link: refused");

  copy_good();
  fs::remove(path + ".1");
  ASSERT_EQ(::mkfifo((path + ".1").c_str(), 0600), 0);
  refused("a FIFO", path + ".1 is not a regular file: refused");
  fs::remove(path + ".1");
  fs::create_directory(path + ".1");
  refused("a directory", path + ".1 is not a regular file: refused");
  fs::remove(path + ".1");

  copy_good();
  fs::remove(path + ".1");
  fs::copy_file(other + ".1", path + ".1");
  refused("a stripe of another save", "a stripe of another save");

  copy_good();
  fs::remove(path + ".1");
  fs::copy_file(good + ".2", path + ".1");
  refused("stripes swapped", path + ".1 is stripe 2 of 3");

  copy_good();
  {
    std::vector<std::byte> f = read_file(path);
    f[40] ^= std::byte{1};  // the set id, checksum not fixed
    write_file(path, f);
  }
  refused("a header changed", "corrupt stripe header: checksum mismatch");

  copy_good();
  {
    std::vector<std::byte> f = read_file(path);
    f[8] = std::byte{3};
    write_file(path, f);
  }
  refused("another version", "state file format version 3; this vmcuda-stub reads versions 1 (a single file) and 2");

  copy_good();
  fs::resize_file(path, 100);
  refused("stripe 0 cut in its header", "truncated in its stripe header");

  copy_good();
  {
    std::vector<std::byte> f = read_file(path + ".2");
    f[kStripeHeaderBytes + 1000] ^= std::byte{4};  // data: found by the chunk's checksum
    write_file(path + ".2", f);
  }
  {
    Parsed p = read_path(path);
    EXPECT_FALSE(p.ok);
    EXPECT_NE(p.why.find("checksum mismatch"), std::string::npos) << p.why;
  }
}

// Counts, units and sizes out of range, in headers with a correct checksum.
TEST(StateStream, StripeHeaderFieldsOutOfRangeAreRefused) {
  TempDir dir;
  const std::string good = dir.file("good.state"), path = dir.file("s.state");
  SinkOptions o;
  o.stripes = 2;
  o.stripe_unit = 8192;
  {
    FileSink sink(good, o);
    ASSERT_TRUE(sink.put_blob(1, 1, random_bytes(20000, 5)));
    std::string why;
    ASSERT_TRUE(sink.finish(&why)) << why;
  }
  ASSERT_TRUE(read_path(good).ok);
  struct Case {
    size_t at, n;
    uint64_t value;
    const char* expect;
  } cases[] = {
      {20, 4, 0, "stripe 0 of 0 (1..64 stripes)"},
      {20, 4, 65, "stripe 0 of 65 (1..64 stripes)"},
      {20, 4, 0xFFFFFFFF, "(1..64 stripes)"},
      {16, 4, 1, "its header says stripe 1, not 0"},
      {16, 4, 7, "stripe 7 of 2"},
      {24, 8, 0, "a stripe unit of 0 bytes"},
      {24, 8, 1000, "a stripe unit of 1000 bytes"},
      {24, 8, uint64_t{1} << 40, "a stripe unit of 1099511627776 bytes"},
      {24, 8, 12288, "s.state has "},  // another unit: stripe 0's size no longer matches
      {12, 4, 8192, "8192 header bytes"},
      {32, 8, 20000, "s.state has "},
      {32, 8, ~uint64_t{0}, "corrupt stripe header: a stream of"},
      {32, 8, uint64_t{1} << 50, ": truncated"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    remove_state_file(path);
    fs::copy_file(good, path);
    fs::copy_file(good + ".1", path + ".1");
    patch_stripe_header(path, c.at, c.value, c.n);
    Parsed p = read_path(path);
    EXPECT_FALSE(p.ok);
    EXPECT_NE(p.why.find(c.expect), std::string::npos) << p.why;
  }
  // Through fds (the fuzzer's way): one given while the header names two.
  remove_state_file(path);
  fs::copy_file(good, path);
  FILE* f0 = std::fopen(path.c_str(), "rb");
  ASSERT_TRUE(f0);
  {
    const int fds[] = {fileno(f0)};
    FileSource src(fds, "fds");
    Parsed p = read_all(src);
    EXPECT_NE(p.why.find("stripe 1 of 2: stripe 1 is missing (1 given)"), std::string::npos) << p.why;
  }
  FILE* f1 = std::fopen((good + ".1").c_str(), "rb");
  ASSERT_TRUE(f1);
  {
    const int fds[] = {fileno(f0), fileno(f1), fileno(f1)};  // one more than named: not read
    FileSource src(fds, "fds");
    EXPECT_TRUE(read_all(src).ok);
  }
  std::fclose(f0);
  std::fclose(f1);
}

// Files of version 1 (one file, the bare stream, as written before stripes) are still read.
TEST(StateStream, AVersion1FileIsStillRead) {
  MemorySink sink;
  contents().write(sink);
  std::string why;
  ASSERT_TRUE(sink.finish(&why)) << why;
  TempDir dir;
  write_file(dir.file("old.state"), sink.take_stream()->flatten());
  FileSource src(dir.file("old.state"));
  contents().check(read_all(src));
  EXPECT_EQ(src.stripes(), 1u);
  EXPECT_EQ(src.format_version(), kFormatVersion);
}

TEST(StateStream, FileSinkOnFdWritesFromItsOffset) {
  TempDir dir;
  const std::string path = dir.file("fd.vmstate");
  FILE* f = std::fopen(path.c_str(), "w+");
  ASSERT_TRUE(f);
  ASSERT_EQ(::write(fileno(f), "prefix", 6), 6);
  {
    FileSink sink(fileno(f));
    ASSERT_TRUE(sink.put_record(1, 1, as_bytes("hello")));
    std::string why;
    ASSERT_TRUE(sink.finish(&why)) << why;
  }
  std::fclose(f);
  std::vector<std::byte> all = read_file(path);
  ASSERT_GT(all.size(), 6u);
  EXPECT_EQ(std::memcmp(all.data(), "prefix", 6), 0);
  Parsed p = read_memory(std::span(all).subspan(6));
  ASSERT_TRUE(p.ok) << p.why;
  ASSERT_EQ(p.items.size(), 1u);
}

TEST(StateStream, TruncatedStreamsAreRefused) {
  const std::vector<std::byte> full = small_stream();
  ASSERT_TRUE(read_memory(full).ok);
  TempDir dir;
  const std::string path = dir.file("cut.vmstate");
  std::vector<size_t> cuts = {0, 4, 8, 11, 12, 23, 24, 40, 60, 61, 100, 200, 4000, 8000};
  for (size_t back = 1; back <= 64; ++back) cuts.push_back(full.size() - back);
  for (size_t cut : cuts) {
    ASSERT_LT(cut, full.size());
    std::span<const std::byte> part = std::span(full).first(cut);
    Parsed m = read_memory(part);
    EXPECT_FALSE(m.ok) << "cut at " << cut;
    EXPECT_TRUE(m.why.find("truncated") != std::string::npos || m.why.find("not a vmcuda state file") != std::string::npos)
        << "cut at " << cut << ": " << m.why;
    write_file(path, part);
    Parsed f = read_path(path);
    EXPECT_FALSE(f.ok) << "cut at " << cut;
    EXPECT_NE(f.why.find(path), std::string::npos) << f.why;
  }
}

TEST(StateStream, EveryFlippedByteIsFound) {
  const std::vector<std::byte> good = small_stream();
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<std::byte> bad = good;
    bad[i] ^= std::byte{0x10};
    Parsed p = read_memory(bad);
    EXPECT_FALSE(p.ok) << "flip at byte " << i << " not found";
    EXPECT_FALSE(p.why.empty()) << "flip at byte " << i;
  }
}

TEST(StateStream, CorruptionMessagesNameRecordAndOffset) {
  std::vector<std::byte> s = small_stream();
  const size_t header_bytes = 24 + std::strlen("state_stream_test") + 8;
  // Record 0: "object list" (11 bytes); record 1: the blob header (8-byte payload); record 2:
  // the first chunk, whose payload starts after its 32-byte header.
  const size_t chunk0 = header_bytes + 32 + 11 + 32 + 8;
  std::vector<std::byte> bad = s;
  bad[chunk0 + 32 + 100] ^= std::byte{1};
  Parsed p = read_memory(bad);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.why.find("record 2 at byte offset " + std::to_string(chunk0)), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("checksum mismatch"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("chunk 0 of blob type 0x2 id 7"), std::string::npos) << p.why;

  bad = s;
  bad[30] ^= std::byte{1};  // the creator string
  p = read_memory(bad);
  EXPECT_NE(p.why.find("corrupt header"), std::string::npos) << p.why;

  bad = s;
  bad[s.size() - 1] ^= std::byte{1};  // the trailer's checksum over the records
  p = read_memory(bad);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.why.find("trailer"), std::string::npos) << p.why;

  // A chunk nobody reads is still verified: next() skips by reading.
  bad = s;
  bad[chunk0 + 32 + 100] ^= std::byte{1};
  MemorySource src(MemoryStream::borrow(bad));
  RecordHeader h;
  std::string why;
  while (src.next(&h, &why)) {
  }
  EXPECT_FALSE(src.done());
  EXPECT_NE(why.find("checksum mismatch"), std::string::npos) << why;
}

TEST(StateStream, ChunksVerifiedOnOtherThreads) {
  // The same records and bytes as read_chunk gives, from memory and from a file, chunks of
  // 16 MiB (acquire) and of 4 MiB (commit_copy), inline and on several threads.
  MemorySink sink;
  contents().write(sink);
  std::string why;
  ASSERT_TRUE(sink.finish(&why)) << why;
  auto stream = sink.take_stream();
  TempDir dir;
  write_file(dir.file("s"), stream->flatten());
  for (unsigned n : {0u, 1u, 5u}) {
    CopyThreads threads(n);
    MemorySource memory(stream);
    contents().check(read_all(memory, ChunkMode::kThreads, &threads));
    FileSource file(dir.file("s"));
    contents().check(read_all(file, ChunkMode::kThreads, &threads));
  }
}

TEST(StateStream, AFlippedByteIsFoundByTheChunksThread) {
  const std::vector<std::byte> good = small_stream();
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<std::byte> bad = good;
    bad[i] ^= std::byte{0x10};
    MemorySource src(MemoryStream::borrow(bad));
    Parsed p = read_all(src, ChunkMode::kThreads);
    EXPECT_FALSE(p.ok) << "flip at byte " << i << " not found";
    EXPECT_FALSE(p.why.empty()) << "flip at byte " << i;
  }
  // The message names the chunk, its record and offset, as the single-threaded reader's
  // does; the source fails from then on.
  std::vector<std::byte> bad = good;
  const size_t chunk0 = 24 + std::strlen("state_stream_test") + 8 + 32 + 11 + 32 + 8;
  bad[chunk0 + 32 + 100] ^= std::byte{1};
  CopyThreads threads(3);
  MemorySource src(MemoryStream::borrow(bad));
  Parsed p = read_all(src, ChunkMode::kThreads, &threads);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.why.find("state in host memory: record 2 at byte offset " + std::to_string(chunk0)), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("chunk 0 of blob type 0x2 id 7: checksum mismatch"), std::string::npos) << p.why;
  RecordHeader h;
  std::string why;
  EXPECT_FALSE(src.next(&h, &why));
  EXPECT_EQ(why, p.why);
  EXPECT_FALSE(src.done());
}

TEST(StateStream, CopyThreadsFinishInOrderAndRunInlineWithoutThreads) {
  for (unsigned n : {0u, 1u, 4u}) {
    CopyThreads threads(n);
    EXPECT_EQ(threads.size(), n);
    std::vector<int> done(64, 0);
    uint64_t last = 0;
    for (int i = 0; i < 64; ++i) {
      last = threads.run([&done, i] {
        if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // finish out of order
        done[i] = 1;
      });
      EXPECT_EQ(last, uint64_t(i + 1));
    }
    threads.wait(32);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(done[i], 1) << i;
    EXPECT_TRUE(threads.finished(32));
    threads.wait(last);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(done[i], 1) << i;
  }
}

TEST(StateStream, WrongMagicOrVersion) {
  std::vector<std::byte> s = small_stream();
  std::vector<std::byte> bad = s;
  bad[0] = std::byte{'X'};
  Parsed p = read_memory(bad);
  EXPECT_NE(p.why.find("not a vmcuda state file"), std::string::npos) << p.why;

  TempDir dir;
  write_file(dir.file("text"), as_bytes("hello, I am a text file of some length\n"));
  p = read_path(dir.file("text"));
  EXPECT_NE(p.why.find("not a vmcuda state file"), std::string::npos) << p.why;
  p = read_path(dir.file("missing"));
  EXPECT_NE(p.why.find("cannot open"), std::string::npos) << p.why;

  bad = s;
  bad[8] = std::byte{2};  // format version 2, little-endian
  p = read_memory(bad);
  EXPECT_NE(p.why.find("state file format version 2; this vmcuda-stub reads version 1"), std::string::npos) << p.why;
}

TEST(StateStream, LimitsAreEnforced) {
  const std::vector<std::byte> s = small_stream();
  Limits l;
  l.max_record_bytes = 11;  // "object list" fits, "module image" (12) does not
  Parsed p = read_memory(s, l);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.why.find("payload of 12 bytes is over this reader's limit of 11"), std::string::npos) << p.why;
  EXPECT_EQ(p.items.size(), 2u);

  l = {};
  l.max_records = 3;
  p = read_memory(s, l);
  EXPECT_NE(p.why.find("more records than this reader's limit of 3"), std::string::npos) << p.why;

  l = {};
  l.max_total_bytes = s.size() - 1;
  p = read_memory(s, l);
  EXPECT_NE(p.why.find("over this reader's limit of " + std::to_string(s.size() - 1)), std::string::npos) << p.why;

  // A record claiming more bytes than the stream has is refused before anything is allocated.
  std::vector<std::byte> bad = s;
  const size_t first_record = 24 + std::strlen("state_stream_test") + 8;
  bad[first_record + 16 + 7] = std::byte{0x7f};  // payload bytes ~ 2^63
  p = read_memory(bad);
  EXPECT_NE(p.why.find("over this reader's limit"), std::string::npos) << p.why;
}

TEST(StateStream, BytesAfterTheTrailerAreRefused) {
  std::vector<std::byte> s = small_stream();
  s.push_back(std::byte{0});
  Parsed p = read_memory(s);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.why.find("1 bytes after the trailer"), std::string::npos) << p.why;
}

TEST(StateStream, ChunkBufferTooSmall) {
  const std::vector<std::byte> s = small_stream();
  MemorySource src(MemoryStream::borrow(s));
  RecordHeader h;
  std::string why;
  ASSERT_TRUE(src.next(&h, &why));
  ASSERT_TRUE(src.next(&h, &why));
  ASSERT_TRUE(h.is_blob());
  std::vector<std::byte> small(100);
  size_t got = 0;
  EXPECT_FALSE(src.read_chunk(small, &got, &why));
  EXPECT_NE(why.find("does not fit the 100-byte buffer"), std::string::npos) << why;
}

TEST(StateStream, SinkMisuseFailsWithAReason) {
  MemorySink a;
  EXPECT_TRUE(a.acquire(10).empty());
  EXPECT_NE(a.error().find("outside a blob"), std::string::npos) << a.error();

  MemorySink b;
  EXPECT_FALSE(b.put_record(kChunkType, 0, {}));
  EXPECT_NE(b.error().find("reserved"), std::string::npos) << b.error();

  MemorySink c;
  ASSERT_TRUE(c.begin_blob(1, 1, 100));
  std::span<std::byte> buf = c.acquire(50);
  ASSERT_TRUE(c.commit(buf));
  EXPECT_FALSE(c.end_blob());
  EXPECT_NE(c.error().find("ended after 50 of its 100 bytes"), std::string::npos) << c.error();
  std::string why;
  EXPECT_FALSE(c.finish(&why));
  EXPECT_EQ(why, c.error()) << "finish() reports the first failure";

  MemorySink d;
  ASSERT_TRUE(d.begin_blob(1, 1, 100));
  EXPECT_TRUE(d.acquire(101).empty());
  EXPECT_NE(d.error().find("acquire(101)"), std::string::npos) << d.error();
}

// The file under the final name is only ever a complete stream.
TEST(StateStream, FailedSaveLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("vm.vmstate");
  {
    FileSink good(path);
    ASSERT_TRUE(good.put_record(1, 1, as_bytes("the good one")));
    std::string why;
    ASSERT_TRUE(good.finish(&why)) << why;
  }
  const std::vector<std::byte> before = read_file(path);

  {  // destroyed without finish()
    FileSink sink(path);
    ASSERT_TRUE(sink.put_blob(2, 2, contents().small_blob));
    EXPECT_TRUE(fs::exists(path + ".partial"));
  }
  EXPECT_FALSE(fs::exists(path + ".partial"));
  EXPECT_TRUE(read_file(path) == before);

  {  // fails (a short blob), then finish()
    FileSink sink(path);
    ASSERT_TRUE(sink.begin_blob(2, 2, 1000));
    std::string why;
    EXPECT_FALSE(sink.finish(&why));
    EXPECT_NE(why.find("inside blob"), std::string::npos) << why;
  }
  EXPECT_FALSE(fs::exists(path + ".partial"));
  EXPECT_TRUE(read_file(path) == before);

  {  // a directory that is not there
    FileSink sink(dir.file("no/such/dir/x.vmstate"));
    EXPECT_FALSE(sink.put_record(1, 1, {}));
    std::string why;
    EXPECT_FALSE(sink.finish(&why));
    EXPECT_NE(why.find("cannot create " + dir.file("no/such/dir/x.vmstate.partial")), std::string::npos) << why;
  }
  Parsed p = read_path(path);
  ASSERT_TRUE(p.ok) << p.why;
}

// A write that fails half way (the file size limit, as a full disk would) in a child process.
TEST(StateStream, WriteFailureMidwayRemovesThePartialFile) {
  TempDir dir;
  const std::string path = dir.file("vm.vmstate");
  write_file(path, as_bytes("previous good state"));
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
    rlimit lim{5 * kMiB, 5 * kMiB};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    std::string why;
    bool ok;
    {
      FileSink sink(path);
      sink.put_blob(2, 2, std::span(contents().big).first(20 * kMiB));
      ok = sink.finish(&why);
    }
    bool expected = !ok && why.find("cannot write " + path + ".partial at byte offset") != std::string::npos &&
                    why.find("File too large") != std::string::npos && !fs::exists(path + ".partial");
    if (!expected) std::fprintf(stderr, "child: ok=%d why=%s\n", ok, why.c_str());
    ::_exit(expected ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::vector<std::byte> after = read_file(path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(after.data()), after.size()), "previous good state");
}

// /dev/full answers every write with ENOSPC.
TEST(StateStream, NoSpaceLeftOnDevice) {
  FILE* full = std::fopen("/dev/full", "w");
  if (!full) GTEST_SKIP() << "no /dev/full here";
  std::string why;
  {
    FileSink sink(fileno(full));
    sink.put_blob(2, 2, contents().small_blob);
    EXPECT_FALSE(sink.finish(&why));
  }
  std::fclose(full);
  EXPECT_NE(why.find("no space left on device writing"), std::string::npos) << why;
}

TEST(ByteReader, RefusesOverLongLengthsAndTruncation) {
  ByteWriter w;
  w.put_u32(0xfffffff0u);  // a string "length" far past the end
  w.put_u8(1);
  std::vector<std::byte> bytes = w.take();
  {
    ByteReader r(bytes);
    std::string s = "x";
    EXPECT_FALSE(r.get_string(&s, 1 << 20));
    EXPECT_TRUE(s.empty());
    EXPECT_NE(r.error().find("offset 4: string length 4294967280 is over the limit of 1048576"), std::string::npos) << r.error();
    uint8_t v = 9;
    EXPECT_FALSE(r.get_u8(&v)) << "every get after a failure fails";
    EXPECT_EQ(v, 0);
  }
  {
    ByteReader r(bytes);
    std::vector<std::byte> b;
    EXPECT_FALSE(r.get_bytes(&b, ~size_t{0}));
    EXPECT_NE(r.error().find("runs past the end (1 bytes remain)"), std::string::npos) << r.error();
  }
  {
    ByteReader r{std::span(bytes).first(3)};
    uint64_t v = 7;
    EXPECT_FALSE(r.get_u64(&v));
    EXPECT_EQ(v, 0u);
    EXPECT_NE(r.error().find("offset 0: u64 needs 8 bytes, 3 remain"), std::string::npos) << r.error();
  }
  {
    ByteReader r(bytes);
    uint32_t v = 0;
    EXPECT_TRUE(r.get_u32(&v));
    EXPECT_FALSE(r.expect_end());
    EXPECT_NE(r.error().find("1 unread bytes"), std::string::npos) << r.error();
  }
}

TEST(ByteReader, RoundTrip) {
  ByteWriter w;
  w.put_u8(0xab);
  w.put_u32(0x01020304);
  w.put_u64(0x1122334455667788ull);
  w.put_i32(-7);
  w.put_bytes(as_bytes("raw"));
  w.put_string("");
  const uint8_t expected_prefix[] = {0xab, 0x04, 0x03, 0x02, 0x01};  // little-endian on the wire
  ASSERT_GE(w.bytes().size(), sizeof expected_prefix);
  EXPECT_EQ(std::memcmp(w.bytes().data(), expected_prefix, sizeof expected_prefix), 0);
  ByteReader r(w.bytes());
  uint8_t a;
  uint32_t b;
  uint64_t c;
  int32_t d;
  std::vector<std::byte> e;
  std::string f = "x";
  EXPECT_TRUE(r.get_u8(&a) && r.get_u32(&b) && r.get_u64(&c) && r.get_i32(&d) && r.get_bytes(&e, 3) &&
              r.get_string(&f, 0) && r.expect_end())
      << r.error();
  EXPECT_EQ(a, 0xab);
  EXPECT_EQ(b, 0x01020304u);
  EXPECT_EQ(c, 0x1122334455667788ull);
  EXPECT_EQ(d, -7);
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(f, "");
}

}  // namespace
}  // namespace vmcuda::host::state
