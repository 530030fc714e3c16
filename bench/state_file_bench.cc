// state_file_bench: the state file's write and read paths without a GPU (docs/benchmarks.md,
// "Suspend and resume"). A save is host memory (standing in for the pinned ring the GPU
// copies device memory into) -> FileSink; a restore is FileSource -> host memory (standing
// in for the ring the GPU copies back from). Prints GB/s per directory:
//   save serial     acquire()/commit(): one thread copies (standing in for the synchronous
//                   DMA) and checksums, writes in order through one io_uring
//   save parallel   commit_copy() from the source with --threads copy threads, each chunk
//                   checksummed and written at its offset (the path vmcudactl save takes)
//   restore serial  read_chunk_view() on one thread, copied out
//   restore parallel next_chunk() + copy_chunk() on --threads threads (vmcudactl restore)
// usage: state_file_bench [--gib N] [--threads T] [--stripes S] [--writes auto|mapped|direct|pwrite]
//                         [--keep-cache] [DIR...]
//        (default: 2 GiB, half the cores (2..16) as the stub, a stripe per thread as the stub,
//        auto, /dev/shm and /var/tmp)
// The state file is a striped set (state_stream.h): --stripes 1 is one file, as before stripes.
// --writes: SinkOptions::file_writes for the parallel save (auto: what the stub does).
// A disk file's page cache is dropped before its restore (fsync, then FADV_DONTNEED), so the
// restore reads the disk; --keep-cache reads it from the cache.
#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "state_stream.h"

namespace state = vmcuda::host::state;
using clk = std::chrono::steady_clock;

namespace {

constexpr size_t kSlotBytes = size_t{4} << 20;  // the stub's ring slot (kRingSlotBytes)
constexpr uint32_t kData = 7;

struct Buffer {
  std::byte* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t bytes) : n(bytes) {
    p = static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    if (!p) {
      std::fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
      std::exit(1);
    }
  }
  ~Buffer() { std::free(p); }
  std::span<std::byte> span() const { return {p, n}; }
};

// Fills (and so faults in) `b` on several threads: not what is measured.
void fill(const Buffer& b, unsigned threads, uint64_t seed) {
  std::vector<std::thread> t;
  const size_t per = (b.n / threads + 4095) / 4096 * 4096;
  for (unsigned i = 0; i < threads; ++i)
    t.emplace_back([&, i] {
      const size_t from = std::min(b.n, i * per), to = std::min(b.n, from + per);
      uint64_t x = seed + from;
      for (size_t at = from; at + 8 <= to; at += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(b.p + at, &x, 8);
      }
    });
  for (auto& x : t) x.join();
}

double seconds_since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

bool on_tmpfs(const std::string& dir) {
  struct statfs fs{};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// A header record, the data as one blob, an end record: the shape of a suspended client.
state::SinkOptions::FileWrites g_writes = state::SinkOptions::FileWrites::kAuto;
unsigned g_stripes = 0;  // 0: one per copy thread, as the stub

bool save(const std::string& path, const Buffer& src, unsigned threads, bool parallel, std::string* how) {
  state::SinkOptions o;
  o.file_writes = g_writes;
  o.expected_bytes = src.n;
  o.copy_threads = parallel ? threads : 0;
  o.stripes = g_stripes ? g_stripes : threads;
  state::FileSink sink(path, o);
  *how = std::string(parallel ? sink.chunk_writes() : "io_uring in order") + ", " + std::to_string(sink.stripes()) +
         " stripes";
  std::vector<std::byte> meta(4096, std::byte{1});
  bool ok = sink.put_record(1, 0, meta) && sink.begin_blob(kData, 0, src.n);
  if (parallel) {
    // As the stub's RingCopier: 2 slots per thread, a slot reused once its copy is out.
    std::deque<uint64_t> tickets;
    for (size_t off = 0; ok && off < src.n; off += kSlotBytes) {
      if (tickets.size() >= 2 * size_t(threads)) {
        ok = sink.wait_copy(tickets.front());
        tickets.pop_front();
      }
      const uint64_t t = sink.commit_copy(src.span().subspan(off, std::min(kSlotBytes, src.n - off)));
      ok = ok && t != 0;
      tickets.push_back(t);
    }
  } else {
    for (size_t off = 0; ok && off < src.n;) {
      const size_t n = std::min(state::kChunkBytes, src.n - off);
      std::span<std::byte> buf = sink.acquire(n);
      ok = buf.size() == n;
      if (ok) std::memcpy(buf.data(), src.p + off, n);  // the synchronous DMA
      ok = ok && sink.commit(buf);
      off += n;
    }
  }
  ok = ok && sink.end_blob() && sink.put_record(2, 0, meta);
  std::string why;
  if (!sink.finish(&why)) {
    std::fprintf(stderr, "save to %s failed: %s\n", path.c_str(), why.empty() ? sink.error().c_str() : why.c_str());
    return false;
  }
  return ok;
}

bool restore(const std::string& path, const Buffer& dst, unsigned threads, bool parallel) {
  state::FileSource src(path);
  state::RecordHeader h;
  std::string why;
  std::vector<std::byte> payload;
  std::unique_ptr<state::CopyThreads> pool;
  if (parallel) pool = std::make_unique<state::CopyThreads>(threads);
  while (src.next(&h, &why)) {
    if (!h.is_blob()) {
      if (!src.read_payload(&payload, &why)) break;
      continue;
    }
    if (h.payload_bytes != dst.n) {
      std::fprintf(stderr, "%s: blob of %llu bytes, expected %zu\n", path.c_str(), (unsigned long long)h.payload_bytes,
                   dst.n);
      return false;
    }
    size_t off = 0;
    if (!parallel) {
      for (;;) {
        std::span<const std::byte> c;
        if (!src.read_chunk_view(&c, &why)) return std::fprintf(stderr, "%s\n", why.c_str()), false;
        if (c.empty()) break;
        std::memcpy(dst.p + off, c.data(), c.size());  // the copy to the ring
        off += c.size();
      }
      continue;
    }
    // As the stub's resume ring: up to 2 chunks per thread in flight, retired in order.
    struct Job {
      state::Source::Chunk c;
      uint64_t ticket = 0;
      bool ok = false;
      std::string why;
    };
    std::deque<std::unique_ptr<Job>> jobs;
    auto retire = [&] {
      Job& j = *jobs.front();
      pool->wait(j.ticket);
      if (!j.ok) {
        src.reject(j.why);
        std::fprintf(stderr, "%s\n", j.why.c_str());
        return false;
      }
      jobs.pop_front();
      return true;
    };
    for (;;) {
      auto j = std::make_unique<Job>();
      if (!src.next_chunk(&j->c, &why)) return std::fprintf(stderr, "%s\n", why.c_str()), false;
      if (j->c.bytes == 0) break;
      if (jobs.size() >= 2 * size_t(threads) && !retire()) return false;
      Job* p = j.get();
      const state::Source* s = &src;
      std::span<std::byte> dest = dst.span().subspan(off, p->c.bytes);
      p->ticket = pool->run([p, s, dest] { p->ok = s->copy_chunk(p->c, dest, &p->why); });
      jobs.push_back(std::move(j));
      off += p->c.bytes;
    }
    while (!jobs.empty())
      if (!retire()) return false;
  }
  if (!src.done()) {
    std::fprintf(stderr, "restore from %s failed: %s\n", path.c_str(), why.c_str());
    return false;
  }
  return true;
}

void drop_cache(const std::string& path) {
  for (unsigned k = 0; k < state::kMaxStripes; ++k) {
    int fd = ::open(state::stripe_path(path, k).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 2;
  unsigned threads = std::clamp(std::thread::hardware_concurrency() / 2, 2u, 16u);
  bool keep_cache = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gib" && i + 1 < argc) gib = std::atof(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = unsigned(std::atoi(argv[++i]));
    else if (a == "--keep-cache") keep_cache = true;
    else if (a == "--stripes" && i + 1 < argc) g_stripes = unsigned(std::atoi(argv[++i]));
    else if (a == "--writes" && i + 1 < argc) {
      using W = state::SinkOptions::FileWrites;
      const std::string w = argv[++i];
      g_writes = w == "mapped" ? W::kMapped : w == "direct" ? W::kDirect : w == "pwrite" ? W::kPwrite : W::kAuto;
    }
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr,
                   "usage: %s [--gib N] [--threads T] [--stripes S] [--writes auto|mapped|direct|pwrite] [--keep-cache] "
                   "[DIR...]\n",
                   argv[0]);
      return 2;
    } else dirs.push_back(a);
  }
  if (dirs.empty()) dirs = {"/dev/shm", "/var/tmp"};
  if (threads == 0) threads = 1;
  const size_t bytes = size_t(gib * double(size_t{1} << 30)) / 4096 * 4096;
  Buffer src(bytes), dst(bytes);
  fill(src, std::max(threads, 2u), 42);
  fill(dst, std::max(threads, 2u), 7);  // faulted in: the ring is
  std::printf("state_file_bench: %.2f GiB, %u copy threads, %u cores\n", gib, threads, std::thread::hardware_concurrency());
  int rc = 0;
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/state_file_bench." + std::to_string(::getpid());
    const bool tmpfs = on_tmpfs(dir);
    std::printf("%s (%s):\n", dir.c_str(), tmpfs ? "tmpfs" : "not tmpfs");
    for (bool parallel : {false, true}) {
      std::string how;
      auto t0 = clk::now();
      if (!save(path, src, threads, parallel, &how)) {
        rc = 1;
        continue;
      }
      const double ws = seconds_since(t0);
      std::printf("  save    %-8s %6.2f GB/s  (%.3f s, %s)\n", parallel ? "parallel" : "serial", bytes / ws / 1e9, ws,
                  how.c_str());
      if (!tmpfs && !keep_cache) drop_cache(path);
      std::memset(dst.p, 0, 4096);
      t0 = clk::now();
      if (!restore(path, dst, threads, parallel)) {
        rc = 1;
      } else {
        const double rs = seconds_since(t0);
        const bool same = std::memcmp(src.p, dst.p, bytes) == 0;
        std::printf("  restore %-8s %6.2f GB/s  (%.3f s%s)%s\n", parallel ? "parallel" : "serial", bytes / rs / 1e9, rs,
                    tmpfs || keep_cache ? "" : ", from disk", same ? "" : "  WRONG BYTES");
        if (!same) rc = 1;
      }
      state::remove_state_file(path);
    }
  }
  return rc;
}
