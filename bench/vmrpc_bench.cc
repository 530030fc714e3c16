// vmrpc_bench: the vmrpc channel between two processes of this machine, with native
// references measured in the same run.
//
//   vmrpc_bench [--quick] [--pin=apart|same|none] [--only=ref,latency,batch,bulk]
//               [--calls=N] [--bulk-mib=N]
//
// Every vmrpc measurement runs in a fresh pair of processes: the parent (this process)
// forks a client child first, and only then starts a vmrpc::HostEndpoint serving
// BenchService (never fork with threads running); the child connects over the socket
// with vmrpc::LocalConnection (the local transport: memfd + eventfds, as QEMU gets
// them) and drives ClientSlots. The child prints its own table rows and leaves the
// numbers the summary needs in a shared page. The spin knobs are set per phase: the
// host's in the parent before start(), the guest's in the child before claiming.
//
// Pinning (--pin, default apart): the host process (all its threads) on CPU 0, the
// client process on CPU 1; "same": both on CPU 0; "none": the scheduler decides.
// The references (pipe, socketpair, shared-memory spin ping-pong) use the same pinning.
//
// Exits 1 if any call or check fails, 2 on bad usage.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_service.h"
#include "support/test_service.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/knobs.h"
#include "vmrpc/ordering.h"

using namespace vmrpc;

namespace {

// ------------------------------------------------------------------ options

enum class Pin { kApart, kSame, kNone };

// The CPUs this process may use (at start), and the two the pinning uses.
cpu_set_t allowed_cpus;
int cpu_a = 0, cpu_b = 1;
bool can_pin = false;

std::string pin_name(Pin p) {
  if (!can_pin && p != Pin::kNone) return "unpinned (fewer than 2 CPUs)";
  switch (p) {
    case Pin::kApart: return "host CPU" + std::to_string(cpu_a) + ", client CPU" + std::to_string(cpu_b);
    case Pin::kSame: return "both on CPU" + std::to_string(cpu_a);
    case Pin::kNone: return "unpinned";
  }
  return "?";
}

struct Options {
  bool quick = false;
  Pin pin = Pin::kApart;
  bool ref = true, latency = true, batch = true, bulk = true;
  uint64_t calls = 100000;           // timed round trips per latency row
  uint64_t bulk_bytes = 512ull << 20;  // bytes moved per bulk measurement
  uint64_t bulk_buffer = 128ull << 20;  // private source / destination buffers (> L3)
  double batch_seconds = 0.4;        // per measurement of a batched row
  int reps = 3;                      // batched and bulk measurements per row (median, range)
  std::vector<uint64_t> chunks = {256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20};
};

Options opt;
int64_t default_host_spin = 0, default_guest_spin = 0;

// What children report to the parent for the summary (a MAP_SHARED page made
// before the first fork).
struct BulkBest {
  double ratio = -1, gbs = -1, native = -1;
  uint64_t chunk = 0;
};

struct Shared {
  double spin_p50_us = -1, sleep_p50_us = -1, sleep_same_p50_us = -1;
  BulkBest bulk[2][2];  // [spinning, sleeping][2 threads × call, 1 thread × submit/wait]
};
Shared* shared = nullptr;

// ------------------------------------------------------------------ helpers

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

void init_cpus() {
  CPU_ZERO(&allowed_cpus);
  if (sched_getaffinity(0, sizeof allowed_cpus, &allowed_cpus) != 0) return;
  std::vector<int> cpus;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &allowed_cpus)) cpus.push_back(i);
  if (cpus.size() < 2) return;
  cpu_a = cpus[0];
  cpu_b = cpus[1];
  can_pin = true;
}

// cpu < 0: every CPU the process was allowed at start.
void pin_to(int cpu) {
  cpu_set_t set = allowed_cpus;
  if (cpu >= 0 && can_pin) {
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
}
int host_cpu(Pin p) { return p == Pin::kNone ? -1 : cpu_a; }
int client_cpu(Pin p) { return p == Pin::kNone ? -1 : p == Pin::kSame ? cpu_a : cpu_b; }

struct Stats {
  double p50, p99, p999, mean;  // µs
};
Stats stats_of(std::vector<uint64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  const size_t n = ns.size();
  auto at = [&](double q) { return ns[std::min(n - 1, static_cast<size_t>(q * n))] / 1000.0; };
  double sum = 0;
  for (auto v : ns) sum += v;
  return {at(0.50), at(0.99), at(0.999), sum / n / 1000.0};
}

// Median and range of repeated measurements.
struct Spread {
  double med, lo, hi;
  // "med (lo–hi)" scaled by `k`; only the median when there was one measurement.
  std::string str(double k, const char* fmt) const {
    char a[32], b[32], c[32], out[112];
    std::snprintf(a, sizeof a, fmt, med * k);
    if (lo == hi) return a;
    std::snprintf(b, sizeof b, fmt, lo * k);
    std::snprintf(c, sizeof c, fmt, hi * k);
    std::snprintf(out, sizeof out, "%s (%s–%s)", a, b, c);
    return out;
  }
};
Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

void latency_row(const char* what, const std::string& config, Stats s) {
  std::printf("| %s | %s | %.2f | %.2f | %.2f | %.2f |\n", what, config.c_str(), s.p50, s.p99, s.p999, s.mean);
  std::fflush(stdout);
}

std::string spin_config(int64_t host_ns, int64_t guest_ns, Pin pin) {
  char b[160];
  std::snprintf(b, sizeof b, "host spin %" PRId64 " µs, guest spin %" PRId64 " µs, %s", host_ns / 1000,
                guest_ns / 1000, pin_name(pin).c_str());
  return b;
}

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span(&v, 1));
}

std::byte* map_buffer(uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  std::memset(p, 0, bytes);  // fault it in now
  return static_cast<std::byte*>(p);
}

std::string read_file_line(const char* path, const char* key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (!key) return line;
    if (line.rfind(key, 0) == 0) {
      auto c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  }
  return "?";
}

int wait_child(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// How busy the machine was with other work while a section ran: CPU time of all
// processes (/proc/stat) minus this bench's own (getrusage of itself and its waited-for
// children), and the hypervisor's steal time. Benchmarks on a shared machine are only
// worth what this says.
struct CpuSnapshot {
  double busy = 0, steal = 0, own = 0, wall = 0;  // seconds
  static CpuSnapshot take() {
    CpuSnapshot c;
    std::ifstream f("/proc/stat");
    std::string cpu;
    uint64_t v[10] = {};
    f >> cpu;
    for (auto& x : v) f >> x;
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    c.busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz;  // user nice system irq softirq
    c.steal = v[7] / hz;
    for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
      rusage r{};
      getrusage(who, &r);
      c.own += r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
    }
    c.wall = now_ns() / 1e9;
    return c;
  }
};

void print_load(const CpuSnapshot& a) {
  const CpuSnapshot b = CpuSnapshot::take();
  const double wall = b.wall - a.wall, other = std::max(0.0, (b.busy - a.busy) - (b.own - a.own));
  const int n = static_cast<int>(std::thread::hardware_concurrency());
  const double other_pct = 100 * other / (wall * n), steal_pct = 100 * (b.steal - a.steal) / (wall * n);
  std::printf("\n(section took %.1f s; other processes used %.0f%% of the machine's %d CPUs, hypervisor steal "
              "%.0f%%%s)\n",
              wall, other_pct, n, steal_pct,
              other_pct > 5 || steal_pct > 5 ? " — NOT a quiet machine: numbers disturbed" : "");
  std::fflush(stdout);
}

// ------------------------------------------------------------------ references

uint64_t ref_iterations() { return opt.calls; }

// 1-byte ping-pong over two fds (pipe pair or a socketpair), parent times it.
bool byte_ping_pong(const char* what, bool use_socket, Pin pin) {
  int to_child[2], to_parent[2];
  if (use_socket) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    to_child[0] = sv[1];  // child reads and writes sv[1]
    to_child[1] = sv[0];
    to_parent[0] = sv[0];
    to_parent[1] = sv[1];
  } else {
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(to_parent, O_CLOEXEC) != 0) return false;
  }
  const uint64_t warm = ref_iterations() / 20 + 100, n = ref_iterations();
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    pin_to(client_cpu(pin));
    if (!use_socket) {
      close(to_child[1]);
      close(to_parent[0]);
    } else {
      close(to_child[1]);
    }
    char c;
    while (read(to_child[0], &c, 1) == 1)
      if (write(to_parent[1], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  if (!use_socket) {
    close(to_child[0]);
    close(to_parent[1]);
  } else {
    close(to_child[0]);
  }
  pin_to(host_cpu(pin));
  std::vector<uint64_t> lat(n);
  bool ok = true;
  char c = 'x';
  for (uint64_t i = 0; i < warm + n && ok; ++i) {
    const uint64_t t0 = now_ns();
    ok = write(to_child[1], &c, 1) == 1 && read(to_parent[0], &c, 1) == 1;
    if (i >= warm) lat[i - warm] = now_ns() - t0;
  }
  close(to_child[1]);
  if (!use_socket) close(to_parent[0]);
  ok = wait_child(pid) == 0 && ok;
  if (!ok) {
    std::fprintf(stderr, "%s ping-pong failed\n", what);
    return false;
  }
  latency_row(what, "1-byte ping-pong, " + pin_name(pin), stats_of(lat));
  return true;
}

// Two processes spinning on one shared cache line: the floor of any spinning channel.
bool shm_ping_pong(Pin pin) {
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  auto* word = static_cast<uint64_t*>(p);
  const uint64_t warm = ref_iterations() / 20 + 100, n = ref_iterations();
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    pin_to(client_cpu(pin));
    for (uint64_t i = 0; i < warm + n; ++i) {
      const uint64_t want = 2 * i + 1;
      // On one CPU the other process must run: yield instead of spinning out a slice.
      while (ordering::load_acquire(*word) != want) {
        if (pin == Pin::kSame) sched_yield();
        else ordering::cpu_relax();
      }
      ordering::store_release(*word, want + 1);
    }
    _exit(0);
  }
  pin_to(host_cpu(pin));
  std::vector<uint64_t> lat(n);
  for (uint64_t i = 0; i < warm + n; ++i) {
    const uint64_t t0 = now_ns();
    ordering::store_release(*word, 2 * i + 1);
    while (ordering::load_acquire(*word) != 2 * i + 2) {
      if (pin == Pin::kSame) sched_yield();
      else ordering::cpu_relax();
    }
    if (i >= warm) lat[i - warm] = now_ns() - t0;
  }
  const bool ok = wait_child(pid) == 0;
  ::munmap(p, 4096);
  if (ok) latency_row("shared-memory spin ping-pong", "one cache line, " + pin_name(pin),
                      stats_of(lat));
  return ok;
}

// ------------------------------------------------------------------ vmrpc phases

struct Phase {
  int64_t host_spin_ns;
  int64_t guest_spin_ns;
  Pin pin;
  uint64_t host_buffer = 4096;  // BenchService's private buffer (the bulk test's destination)
};

using ClientFn = std::function<bool(LocalConnection&)>;

std::string socket_path() {
  static int n = 0;
  return "/tmp/vmrpc-bench-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
}

// Forks the client, then starts a host endpoint for it; returns whether the client
// finished with every check passed.
bool run_phase(const Phase& ph, const ClientFn& client) {
  int ctl[2];
  if (pipe2(ctl, O_CLOEXEC) != 0) return false;
  const std::string path = socket_path();
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(ctl[1]);
    pin_to(client_cpu(ph.pin));
    knobs::kGuestSpinNs.set(ph.guest_spin_ns);
    char go;
    if (read(ctl[0], &go, 1) != 1) _exit(1);  // the host did not start
    bool ok = false;
    try {
      auto conn = LocalConnection::connect(path);
      ok = client(*conn);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "client: %s\n", e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(ok ? 0 : 1);
  }
  close(ctl[0]);
  // Only now, in the parent, do threads start; they inherit this affinity.
  pin_to(host_cpu(ph.pin));
  knobs::kHostSpinNs.set(ph.host_spin_ns);
  bool ok = false;
  try {
    // 64 MiB region: 4 slots of 256 KiB, heap for two 8 MiB chunks and more.
    bench::BenchService service(ph.host_buffer);
    HostEndpoint host(HostEndpointOptions{path, RegionConfig{64ull << 20, 4, 256 << 10, 4096}, 4}, service);
    host.start();
    const char go = 'g';
    if (write(ctl[1], &go, 1) != 1) throw std::runtime_error("cannot start the client");
    close(ctl[1]);
    ctl[1] = -1;
    ok = wait_child(pid) == 0;
    host.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host: %s\n", e.what());
    if (ctl[1] >= 0) close(ctl[1]);
    wait_child(pid);
  }
  if (!ok) std::fprintf(stderr, "vmrpc_bench: a phase failed (see above)\n");
  return ok;
}

std::unique_ptr<ClientSlot> claim(LocalConnection& conn) {
  std::string why;
  auto s = ClientSlot::claim(conn.region(), conn, &why);
  if (!s) std::fprintf(stderr, "client: cannot claim a slot: %s\n", why.c_str());
  return s;
}

constexpr uint32_t kNopId = static_cast<uint32_t>(wire::MessageId::kNop);

// Null call round trip: ClientSlot::call(kNop) timed one by one.
bool null_calls(LocalConnection& conn, const char* what, const std::string& config, Stats* out) {
  auto slot = claim(conn);
  if (!slot) return false;
  const uint64_t warm = opt.calls / 20 + 100, n = opt.calls;
  std::vector<uint64_t> lat(n);
  for (uint64_t i = 0; i < warm + n; ++i) {
    const uint64_t t0 = now_ns();
    const auto r = slot->call(kNopId, {}, 0);
    const uint64_t t1 = now_ns();
    if (r.status != 0) {
      std::fprintf(stderr, "client: kNop call %" PRIu64 " failed with status %d\n", i, r.status);
      return false;
    }
    if (i >= warm) lat[i - warm] = t1 - t0;
  }
  *out = stats_of(lat);
  latency_row(what, config, *out);
  return true;
}

// Frames per second with B frames per flush.
bool batched(LocalConnection& conn, const std::string& config) {
  auto slot = claim(conn);
  if (!slot) return false;
  uint64_t expect_index = 0;  // kCallIndex answers how many service calls the slot served
  std::vector<FrameRef> frames;
  for (uint32_t id : {kNopId, static_cast<uint32_t>(testing::kCallIndex)}) {
    const bool is_index = id != kNopId;
    for (uint32_t b : {1u, 64u, 256u}) {
      frames.resize(b);
      auto one_batch = [&]() -> bool {
        for (uint32_t k = 0; k < b; ++k) {
          auto f = slot->batch().append(id, 0, is_index ? 8 : 0);
          if (!f) {
            std::fprintf(stderr, "client: the RPC stack cannot hold %u frames\n", b);
            return false;
          }
          frames[k] = *f;
        }
        if (auto st = slot->flush(); st != wire::ChannelStatus::kOk) {
          std::fprintf(stderr, "client: batch failed with %d\n", static_cast<int>(st));
          return false;
        }
        for (uint32_t k = 0; k < b; ++k) {
          const auto r = slot->result(frames[k]);
          if (r.status != 0) {
            std::fprintf(stderr, "client: frame %u failed with %d\n", k, r.status);
            return false;
          }
          if (is_index) {
            uint64_t v = ~0ull;
            if (r.reply.size() == 8) std::memcpy(&v, r.reply.data(), 8);
            if (v != expect_index++) {
              std::fprintf(stderr, "client: kCallIndex answered %" PRIu64 ", expected %" PRIu64 "\n", v,
                           expect_index - 1);
              return false;
            }
          }
        }
        return true;
      };
      for (int w = 0; w < 200; ++w)
        if (!one_batch()) return false;
      const uint64_t budget = static_cast<uint64_t>(opt.batch_seconds * 1e9);
      std::vector<double> rates;
      for (int rep = 0; rep < opt.reps; ++rep) {
        uint64_t total = 0;
        const uint64_t t0 = now_ns();
        uint64_t t1 = t0;
        for (uint64_t it = 0;; ++it) {
          if (!one_batch()) return false;
          total += b;
          if ((it & 15) == 15 && (t1 = now_ns()) - t0 >= budget) break;
        }
        rates.push_back(total / ((t1 - t0) / 1e9));
      }
      const Spread r = spread(rates);
      std::printf("| %u | %s | %s | %s | %.0f |\n", b, is_index ? "kCallIndex (service, 8-byte reply)" : "kNop",
                  config.c_str(), r.str(1e-6, "%.2f").c_str(), 1e9 / r.med);
      std::fflush(stdout);
    }
  }
  return true;
}

uint64_t fnv_of(const std::byte* p, uint64_t n) { return bench::sum64(p, n); }

void fill_pattern(std::byte* p, uint64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
}

// Asks the host for the checksum of its buffer and compares it with the source.
bool host_buffer_matches(ClientSlot& slot, const std::byte* src, uint64_t S, const char* what, uint64_t C) {
  bench::BulkRange range{0, S};
  const auto r = slot.call(bench::kBulkChecksum, bytes_of(range), 8);
  uint64_t host_sum = 0;
  if (r.status == 0 && r.bytes.size() == 8) std::memcpy(&host_sum, r.bytes.data(), 8);
  if (r.status != 0 || host_sum != fnv_of(src, S)) {
    std::fprintf(stderr, "client: %s, chunk %" PRIu64 ": the host buffer does not match the source (status %d)\n",
                 what, C, r.status);
    return false;
  }
  return true;
}

// Heap bulk throughput: the client moves the bytes of a private buffer into a private
// buffer of the host through heap chunks, pipelined so that the client fills chunk i+1
// while the host copies chunk i out. Two ways:
//  - "2 threads": the public API. Two slots, each driven by its own client thread
//    (fill chunk, ClientSlot::call(kBulkCopyIn), repeat); while one thread waits for
//    its call the other fills. Both threads share the client's CPU(s); the host serves
//    each slot on its own service thread.
//  - "1 thread, submit/wait": one client thread, one slot, two chunks: submit the call
//    for chunk i (ClientSlot::submit), fill chunk i+1, then ClientSlot::wait for i.
// Each chunk size also measures native single-thread memcpy over the same buffers and
// pieces, and after each run checks (checksum) that the host's buffer equals the source.
bool bulk(LocalConnection& conn, const std::string& config, BulkBest* best, BulkBest* best_sw) {
  auto a = claim(conn), b = claim(conn), c = claim(conn);
  if (!a || !b || !c) return false;
  ClientSlot* slots[2] = {a.get(), b.get()};
  const uint64_t S = opt.bulk_buffer;
  std::byte* src = map_buffer(S);
  std::byte* ndst = map_buffer(S);
  std::printf("\n| chunk | native memcpy GB/s | vmrpc, 2 threads × ClientSlot::call GB/s | vs native | "
              "vmrpc, 1 thread × submit/wait GB/s | vs native |\n|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  bool ok = true;
  for (uint64_t C : opt.chunks) {
    if (S % (2 * C) != 0) continue;
    const uint64_t T = std::max<uint64_t>(opt.bulk_bytes / S, 1) * S;  // whole passes over the buffer
    const uint64_t pieces_per_pass = S / C;
    std::optional<HeapBlock> blk[2] = {slots[0]->heap().allocate(C), slots[1]->heap().allocate(C)};
    std::optional<HeapBlock> ab[2] = {c->heap().allocate(C), c->heap().allocate(C)};
    if (!blk[0] || !blk[1] || !ab[0] || !ab[1]) {
      std::fprintf(stderr, "client: heap allocation of %" PRIu64 " bytes failed\n", C);
      return false;
    }
    for (auto* h : {&blk[0], &blk[1], &ab[0], &ab[1]}) std::memset((*h)->data, 0, C);  // fault in

    // Native: one thread, private to private, the same buffers and pieces.
    auto native = [&](uint64_t total) {
      for (uint64_t done = 0; done < total; done += C) {
        const uint64_t off = done % S;
        std::memcpy(ndst + off, src + off, C);
      }
    };
    // 2 threads, public API.
    std::atomic<bool> failed{false};
    auto run2 = [&](uint64_t total) -> bool {
      const uint64_t pieces = total / C;
      auto worker = [&](int k) {
        for (uint64_t i = k; i < pieces && !failed.load(std::memory_order_relaxed); i += 2) {
          const uint64_t off = (i % pieces_per_pass) * C;
          std::memcpy(blk[k]->data, src + off, C);
          bench::BulkCopyArgs args{blk[k]->ref(), off, 0};
          const auto r = slots[k]->call(bench::kBulkCopyIn, bytes_of(args), 0);
          if (r.status != 0) {
            std::fprintf(stderr, "client: kBulkCopyIn failed with %d\n", r.status);
            failed = true;
          }
        }
      };
      std::thread t1(worker, 1);
      worker(0);
      t1.join();
      return !failed;
    };
    // 1 thread, submit/wait: chunk i in flight while chunk i+1 is filled.
    auto run1 = [&](uint64_t total) -> bool {
      const uint64_t pieces = total / C;
      std::optional<FrameRef> in_flight;
      auto finish = [&]() -> bool {
        const auto bst = c->wait();
        const int32_t st = bst == wire::ChannelStatus::kOk ? c->result(*in_flight).status : static_cast<int32_t>(bst);
        in_flight.reset();
        if (st != 0) std::fprintf(stderr, "client: kBulkCopyIn (submit/wait) failed with %d\n", st);
        return st == 0;
      };
      for (uint64_t i = 0; i < pieces; ++i) {
        const uint64_t off = (i % pieces_per_pass) * C;
        std::memcpy(ab[i & 1]->data, src + off, C);  // the host may be copying ab[(i-1)&1] now
        if (in_flight && !finish()) return false;
        bench::BulkCopyArgs args{ab[i & 1]->ref(), off, 0};
        in_flight = c->batch().append(bench::kBulkCopyIn, bytes_of(args), 0);
        if (!in_flight) return false;
        if (auto st = c->submit(); st != wire::ChannelStatus::kOk) {
          std::fprintf(stderr, "client: submit failed with %d\n", static_cast<int>(st));
          return false;
        }
      }
      return !in_flight || finish();
    };

    std::vector<double> gn, g2, g1;
    for (int rep = 0; rep < opt.reps; ++rep) {
      // Fresh content before each way, so that each checksum proves its own run.
      fill_pattern(src, S, C * 16 + rep * 4 + 0);
      native(S);  // warm-up pass (all three ways get one)
      uint64_t t0 = now_ns();
      native(T);
      gn.push_back(T / double(now_ns() - t0));
      if (std::memcmp(ndst, src, S) != 0) {
        std::fprintf(stderr, "client: native copy mismatch\n");
        return false;
      }
      fill_pattern(src, S, C * 16 + rep * 4 + 1);
      if (!run2(S)) return false;
      t0 = now_ns();
      if (!run2(T)) return false;
      g2.push_back(T / double(now_ns() - t0));
      ok = host_buffer_matches(*slots[0], src, S, "2 threads", C) && ok;
      fill_pattern(src, S, C * 16 + rep * 4 + 2);
      if (!run1(S)) return false;
      t0 = now_ns();
      if (!run1(T)) return false;
      g1.push_back(T / double(now_ns() - t0));
      ok = host_buffer_matches(*slots[0], src, S, "1 thread submit/wait", C) && ok;
    }
    slots[0]->heap().free(blk[0]->offset);
    slots[1]->heap().free(blk[1]->offset);
    c->heap().free(ab[0]->offset);
    c->heap().free(ab[1]->offset);

    const Spread n = spread(gn), v2 = spread(g2), v1 = spread(g1);
    std::printf("| %" PRIu64 " KiB | %s | %s | %.0f%% | %s | %.0f%% |\n", C >> 10, n.str(1, "%.2f").c_str(),
                v2.str(1, "%.2f").c_str(), 100 * v2.med / n.med, v1.str(1, "%.2f").c_str(), 100 * v1.med / n.med);
    std::fflush(stdout);
    if (v2.med > best->gbs) *best = {v2.med / n.med, v2.med, n.med, C};
    if (v1.med > best_sw->gbs) *best_sw = {v1.med / n.med, v1.med, n.med, C};
  }
  std::printf("\n(%s; each measurement moves %" PRIu64 " MiB through a %" PRIu64
              " MiB private buffer on each side; median (min–max) of %d, the three ways interleaved; "
              "vs native = ratio of medians; GB = 1e9 bytes)\n",
              config.c_str(), std::max<uint64_t>(opt.bulk_bytes / S, 1) * S >> 20, S >> 20, opt.reps);
  std::fflush(stdout);
  ::munmap(src, S);
  ::munmap(ndst, S);
  return ok;
}

bool parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* k) -> const char* {
      const size_t n = std::strlen(k);
      return a.compare(0, n, k) == 0 ? argv[i] + n : nullptr;
    };
    if (a == "--quick") {
      opt.quick = true;
      opt.calls = 10000;
      opt.bulk_bytes = 32ull << 20;
      opt.bulk_buffer = 16ull << 20;
      opt.batch_seconds = 0.05;
      opt.reps = 1;
      opt.chunks = {256 << 10, 1 << 20, 4 << 20};
    } else if (const char* v = val("--pin=")) {
      std::string s = v;
      if (s == "apart") opt.pin = Pin::kApart;
      else if (s == "same") opt.pin = Pin::kSame;
      else if (s == "none") opt.pin = Pin::kNone;
      else return false;
    } else if (const char* v = val("--only=")) {
      opt.ref = opt.latency = opt.batch = opt.bulk = false;
      std::string list = v;
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, end - at);
        if (name == "ref") opt.ref = true;
        else if (name == "latency") opt.latency = true;
        else if (name == "batch") opt.batch = true;
        else if (name == "bulk") opt.bulk = true;
        else return false;
        at = end + 1;
      }
    } else if (const char* v = val("--calls=")) {
      opt.calls = std::strtoull(v, nullptr, 0);
      if (opt.calls == 0) return false;
    } else if (const char* v = val("--bulk-mib=")) {
      opt.bulk_bytes = std::strtoull(v, nullptr, 0) << 20;
      if (opt.bulk_bytes == 0) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse(argc, argv)) {
    std::fprintf(stderr,
                 "usage: %s [--quick] [--pin=apart|same|none] [--only=ref,latency,batch,bulk] [--calls=N] "
                 "[--bulk-mib=N]\n",
                 argv[0]);
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  init_cpus();
  default_host_spin = knobs::kHostSpinNs.get();    // the environment's, or the default
  default_guest_spin = knobs::kGuestSpinNs.get();
  void* page = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 1;
  shared = new (page) Shared;

  {
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
    char date[64] = "?";
    const time_t t = time(nullptr);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
    utsname u{};
    uname(&u);
    std::printf("# vmrpc_bench%s\n\ncommand: `%s`  \ndate: %s  \nmachine: %u CPUs, %s, %s %s, clocksource %s  \n"
                "pinning: %s  \nknobs: VMRPC_HOST_SPIN_NS=%" PRId64 " VMRPC_GUEST_SPIN_NS=%" PRId64
                " (spinning rows; sleeping rows set both to 0)\n",
                opt.quick ? " (--quick: smoke run, small counts)" : "", cmd.c_str(), date,
                std::thread::hardware_concurrency(), read_file_line("/proc/cpuinfo", "model name").c_str(), u.sysname,
                u.release,
                read_file_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", nullptr).c_str(),
                pin_name(opt.pin).c_str(), default_host_spin, default_guest_spin);
  }

  bool ok = true;
  const std::string spin_cfg = spin_config(default_host_spin, default_guest_spin, opt.pin);
  const std::string sleep_cfg = spin_config(0, 0, opt.pin);

  CpuSnapshot section = CpuSnapshot::take();
  if (opt.ref || opt.latency) {
    std::printf("\n## Round trips between two processes (%" PRIu64 " timed each)\n\n"
                "| round trip | configuration | p50 µs | p99 µs | p99.9 µs | mean µs |\n|---|---|---|---|---|---|\n",
                opt.calls);
    std::fflush(stdout);
  }
  if (opt.ref) {
    ok = shm_ping_pong(opt.pin) && ok;
    ok = byte_ping_pong("pipe", false, opt.pin) && ok;
    ok = byte_ping_pong("UNIX socketpair", true, opt.pin) && ok;
  }
  auto latency_phase = [&](int64_t host_ns, int64_t guest_ns, Pin pin, const char* what, double* p50) {
    ok = run_phase({host_ns, guest_ns, pin}, [&](LocalConnection& c) {
      Stats s;
      if (!null_calls(c, what, spin_config(host_ns, guest_ns, pin), &s)) return false;
      if (p50) *p50 = s.p50;
      return true;
    }) && ok;
  };
  if (opt.latency) {
    latency_phase(default_host_spin, default_guest_spin, opt.pin, "vmrpc null call (kNop), spinning",
                  &shared->spin_p50_us);
    latency_phase(0, 0, opt.pin, "vmrpc null call (kNop), sleeping", &shared->sleep_p50_us);
    latency_phase(default_host_spin, 0, opt.pin, "vmrpc null call (kNop), host spins, guest sleeps", nullptr);
  }
  // The sleeping path without a cross-CPU wake-up: both processes on one CPU.
  if (opt.pin != Pin::kSame) {
    if (opt.ref) ok = byte_ping_pong("pipe", false, Pin::kSame) && ok;
    if (opt.latency)
      latency_phase(0, 0, Pin::kSame, "vmrpc null call (kNop), sleeping", &shared->sleep_same_p50_us);
  }
  if (opt.ref || opt.latency) print_load(section);
  if (opt.batch) {
    section = CpuSnapshot::take();
    std::printf("\n## Batched calls (frames per flush; median (min–max) of %d runs of %.1f s)\n\n"
                "| frames per flush | call | configuration | M calls/s | ns per call (median) |\n|---|---|---|---|---|\n",
                opt.reps, opt.batch_seconds);
    std::fflush(stdout);
    ok = run_phase({default_host_spin, default_guest_spin, opt.pin},
                   [&](LocalConnection& c) { return batched(c, spin_cfg); }) && ok;
    ok = run_phase({0, 0, opt.pin}, [&](LocalConnection& c) { return batched(c, sleep_cfg); }) && ok;
    print_load(section);
  }
  if (opt.bulk) {
    for (int sleep = 0; sleep < 2; ++sleep) {
      section = CpuSnapshot::take();
      std::printf("\n## Heap bulk throughput, %s (client private buffer -> heap chunk -> host private buffer)\n",
                  sleep ? "sleeping" : "spinning");
      const Phase ph = sleep ? Phase{0, 0, opt.pin, opt.bulk_buffer}
                             : Phase{default_host_spin, default_guest_spin, opt.pin, opt.bulk_buffer};
      ok = run_phase(ph, [&](LocalConnection& c) {
        return bulk(c, sleep ? sleep_cfg : spin_cfg, &shared->bulk[sleep][0], &shared->bulk[sleep][1]);
      }) && ok;
      print_load(section);
    }
  }

  std::printf("\n## Targets\n\n| target | measured | met |\n|---|---|---|\n");
  auto yes = [](bool b) { return b ? "yes" : "**no**"; };
  if (opt.latency) {
    std::printf("| null call p50 ≤ 2 µs, spinning | %.2f µs (%s) | %s |\n", shared->spin_p50_us, pin_name(opt.pin).c_str(),
                yes(shared->spin_p50_us >= 0 && shared->spin_p50_us <= 2.0));
    std::printf("| null call p50 ≤ 15 µs, sleeping | %.2f µs (%s) | %s |\n", shared->sleep_p50_us,
                pin_name(opt.pin).c_str(), yes(shared->sleep_p50_us >= 0 && shared->sleep_p50_us <= 15.0));
    if (shared->sleep_same_p50_us >= 0)
      std::printf("| null call p50 ≤ 15 µs, sleeping | %.2f µs (%s) | %s |\n", shared->sleep_same_p50_us,
                  pin_name(Pin::kSame).c_str(), yes(shared->sleep_same_p50_us <= 15.0));
  }
  if (opt.bulk) {
    for (int sleep = 0; sleep < 2; ++sleep)
      for (int way = 0; way < 2; ++way) {
        const BulkBest& r = shared->bulk[sleep][way];
        std::printf("| heap throughput ≥ 70%% of memcpy, %s, %s | best %.2f GB/s at %" PRIu64
                    " KiB = %.0f%% of %.2f GB/s | %s |\n",
                    sleep ? "sleeping" : "spinning", way ? "1 thread × submit/wait" : "2 threads × call",
                    r.gbs, r.chunk >> 10, 100 * r.ratio, r.native, yes(r.ratio >= 0.7));
      }
  }
  std::printf("\n%s\n", ok ? "all calls and checks passed" : "FAILED: some call or check failed (see stderr)");
  return ok ? 0 : 1;
}
