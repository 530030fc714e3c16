// libFuzzer target for the host endpoint's whole life (vmrpc/src/host_endpoint.cc, issue 10
// point 8): each input is a sequence of what guests (local connections, as QEMU's) and the
// control path do to one endpoint, in any order:
//   connect, disconnect (a process dying, mid-call or not), claim a slot, call (well-formed
//   batches, or left in flight), release, stray doorbells, garbage written into any control
//   word, the region header (its image token: a restore), the heap page table or the stack;
//   hold / release / hold-new-slots (suspend, resume), snapshots and control requests,
//   image token changes with restored slots adopted or lost, accept paused and resumed.
// The endpoint serves slots with threads and the test service (tests/support/test_service.h),
// with a limit of clients and connections low enough to be reached. Built with
// clang -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt, `make fuzz`).
//
// Besides the sanitizers' own checks, it aborts (a crash libFuzzer saves) when
//   - once every hold is released and every connection closed, connections or served slots
//     remain after 5 s (a leak, or a service thread that never ends), or a slot service was
//     opened and never closed;
//   - afterwards a new, well-behaved client is not served (an Echo call answered right);
//   - the endpoint's stop leaves file descriptors open that were not open before;
//   - anything takes longer than kWatchdogS (a deadlock: the watchdog aborts with the op).
// Every wait of the guest side is bounded, as a hostile guest's would be: a call whose slot
// was damaged or held may go unanswered without failing the input.
//
// Each input gets a fresh endpoint, so a crash replays from its input alone.
// ENDPOINT_FUZZ_TRACE=1 prints each operation.
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/test_service.h"
#include "vmrpc/batch_writer.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/knobs.h"
#include "vmrpc/ordering.h"

namespace {

using namespace vmrpc;
using wire::SlotState;

constexpr uint32_t kConns = 3;
constexpr uint32_t kSlots = 4;
constexpr int kMaxOps = 48;
constexpr int kWatchdogS = 20;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "endpoint_fuzz: invariant broken: %s\n", what);
  std::abort();
}

bool trace() {
  static const bool on = std::getenv("ENDPOINT_FUZZ_TRACE") != nullptr;
  return on;
}

// Aborts when one input takes longer than kWatchdogS (libFuzzer's -timeout would too, but
// this names the operation that hung).
class Watchdog {
 public:
  Watchdog() : thread_([this] { run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard l(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(const char* what) {
    std::lock_guard l(mu_);
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(kWatchdogS);
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard l(mu_);
    armed_ = false;
  }
  void set(const char* what) {
    std::lock_guard l(mu_);
    what_ = what;
  }

 private:
  void run() {
    std::unique_lock l(mu_);
    while (!quit_) {
      if (armed_ && std::chrono::steady_clock::now() > deadline_) {
        std::fprintf(stderr, "endpoint_fuzz: no progress for %d s in: %s (a deadlock)\n", kWatchdogS, what_);
        std::abort();
      }
      cv_.wait_for(l, std::chrono::milliseconds(200));
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false, armed_ = false;
  const char* what_ = "";
  std::chrono::steady_clock::time_point deadline_{};
  std::thread thread_;
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog;  // never destroyed: libFuzzer exits without unwinding
  return *w;
}

size_t open_fds() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  uint32_t u32() { return u8() | uint32_t(u8()) << 8 | uint32_t(u8()) << 16 | uint32_t(u8()) << 24; }
  uint64_t u64() { return u32() | uint64_t(u32()) << 32; }
  bool empty() const { return n == 0; }
};

// The guest side of one slot, driven raw (as a hostile guest may), not through ClientSlot.
struct GuestSlot {
  bool claimed = false;  // by us
  uint64_t seq = 0;
};
struct Guest {
  std::unique_ptr<LocalConnection> conn;
  GuestSlot slots[kSlots];
};

// A well-formed batch of 1..3 test calls in the slot's stack; returns request_bytes.
uint32_t write_batch(const RegionView& r, uint32_t slot, Input& in) {
  BatchWriter w(r.stack(slot));
  const int frames = 1 + in.u8() % 3;
  for (int i = 0; i < frames; ++i) {
    const uint8_t kind = in.u8() % 6;
    const uint8_t payload[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    std::optional<FrameRef> f;
    switch (kind) {
      case 0: f = w.append(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0); break;
      case 1: f = w.append(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(payload)), 32); break;
      case 2: f = w.append(testing::kChecksum, std::as_bytes(std::span(payload)), 8); break;
      case 3: {
        const int32_t st = static_cast<int32_t>(in.u8()) - 20;
        f = w.append(testing::kFail, std::as_bytes(std::span(&st, 1)), 0);
        break;
      }
      case 4: {
        const uint32_t ms = in.u8() % 3;
        f = w.append(testing::kSleepMs, std::as_bytes(std::span(&ms, 1)), 0);
        break;
      }
      default: f = w.append(testing::kCallIndex, {}, 8); break;
    }
    (void)f;
  }
  return w.finish();
}

bool wait_for(const std::function<bool()>& p, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!p()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

void run_one(Input in) {
  testing::TestService service;
  HostEndpointOptions o{"/tmp/vmrpc-endpoint-fuzz-" + std::to_string(::getpid()) + ".sock",
                        RegionConfig{4ull << 20, kSlots, 64 << 10, 4096}, kConns};
  o.max_clients = 3;  // below kConns x kSlots: refusals are reached
  o.max_connections_per_user = kConns;
  o.connect_rate_per_user = 0;  // the wall clock would make inputs replay differently
  HostEndpoint* hp = nullptr;
  // A restored region's slots: adopted (then released, as a resume does) or lost, by slot.
  o.on_region_restored = [&hp](const RestoredRegion& r) {
    for (uint32_t s : r.slots) {
      if ((s + (r.image_token & 1)) % 2 == 0 && hp->adopt_restored_slot(r.connection_id, s, std::chrono::milliseconds(200), nullptr))
        hp->release_slot(r.connection_id, s);
      else
        hp->lose_restored_slot(r.connection_id, s);
    }
  };
  watchdog().arm("start");
  const size_t fds_before = open_fds();
  auto host = std::make_unique<HostEndpoint>(o, service);
  hp = host.get();
  host->start();
  Guest guests[kConns];
  bool accepting = true;
  std::set<std::pair<uint64_t, uint32_t>> held;

  auto served = [&] { return host->served_slots(); };
  for (int op_index = 0; op_index < kMaxOps && !in.empty(); ++op_index) {
    const uint8_t op = in.u8() % 15;
    const uint32_t k = in.u8() % kConns;
    const uint32_t s = in.u8() % kSlots;
    Guest& g = guests[k];
    if (trace()) std::fprintf(stderr, "op %d conn %u slot %u\n", op, k, s);
    switch (op) {
      case 0:  // connect (never while accepts are paused: the handshake would wait for a resume)
        watchdog().set("connect");
        if (!g.conn && accepting) {
          try {
            g.conn = LocalConnection::connect(o.socket_path);
          } catch (const std::exception&) {
          }
          for (auto& gs : g.slots) gs = {};
        }
        break;
      case 1:  // the guest process dies (any state: mid-call, holding slots)
        watchdog().set("disconnect");
        g.conn.reset();
        break;
      case 2: {  // claim
        if (!g.conn) break;
        auto& ctl = g.conn->region().control(s);
        uint32_t expected = static_cast<uint32_t>(SlotState::kFree);
        if (ordering::compare_exchange(ctl.state, expected, static_cast<uint32_t>(SlotState::kClaimed))) {
          g.slots[s].claimed = true;
          g.slots[s].seq = ordering::load_acquire(ctl.response_seq);
          ordering::store_relaxed(ctl.owner_tag, in.u32());
        }
        g.conn->ring(s);
        break;
      }
      case 3: {  // a call: a well-formed batch; waited for (bounded) or left in flight
        if (!g.conn) break;
        watchdog().set("call");
        const RegionView& r = g.conn->region();
        auto& ctl = r.control(s);
        const uint32_t bytes = write_batch(r, s, in);
        ordering::store_relaxed(ctl.request_bytes, bytes);
        const uint64_t seq = ++g.slots[s].seq;
        ordering::store_release(ctl.request_seq, seq);
        ordering::full_fence();
        g.conn->ring(s);
        if (in.u8() & 1) wait_for([&] { return ordering::load_acquire(ctl.response_seq) == seq; }, 20);
        break;
      }
      case 4: {  // release
        if (!g.conn) break;
        ordering::store_release(g.conn->region().control(s).state, static_cast<uint32_t>(SlotState::kClosing));
        g.slots[s].claimed = false;
        g.conn->ring(s);
        break;
      }
      case 5: {  // garbage in a control word, the header, the page table or the stack
        if (!g.conn) break;
        const RegionView& r = g.conn->region();
        auto& ctl = r.control(s);
        const uint64_t v = in.u64();
        switch (in.u8() % 12) {
          case 0: ordering::store_release(ctl.state, static_cast<uint32_t>(v % 5)); break;
          case 1: ordering::store_release(ctl.state, static_cast<uint32_t>(v)); break;
          case 2: ordering::store_release(ctl.host_state, static_cast<uint32_t>(v % 7)); break;
          case 3: ordering::store_release(ctl.request_seq, v); break;
          case 4: ordering::store_release(ctl.response_seq, v); break;
          case 5: ordering::store_release(ctl.request_bytes, static_cast<uint32_t>(v)); break;
          case 6: ordering::store_release(ctl.guest_sleeping, static_cast<uint32_t>(v)); break;
          case 7: ordering::store_release(ctl.host_sleeping, static_cast<uint32_t>(v)); break;
          case 8: ordering::store_release(r.header().image_token, v); break;  // as a restored image
          case 9: {
            const uint64_t pages = r.layout().heap_bytes / r.layout().heap_page_bytes;
            ordering::store_release(r.heap_table()[v % pages], static_cast<uint32_t>(v >> 32));
            break;
          }
          case 10: {
            auto st = r.stack(s);
            const size_t at = (v >> 8) % (st.size() - 8);
            std::memcpy(st.data() + at, &v, 8);
            break;
          }
          default: ordering::store_release(ctl.late_status, static_cast<int32_t>(v)); break;
        }
        if (in.u8() & 1) g.conn->ring(s);
        break;
      }
      case 6:  // a stray doorbell
        if (g.conn) g.conn->ring(s);
        break;
      case 7: {  // hold a served slot (suspend)
        watchdog().set("hold_slot");
        auto v = served();
        if (v.empty()) break;
        const auto& x = v[in.u8() % v.size()];
        if (host->hold_slot(x.connection_id, x.slot, std::chrono::milliseconds(20), nullptr))
          held.insert({x.connection_id, x.slot});
        break;
      }
      case 8: {  // release a hold (resume)
        watchdog().set("release_slot");
        if (held.empty()) break;
        auto it = held.begin();
        std::advance(it, in.u8() % held.size());
        host->release_slot(it->first, it->second);
        held.erase(it);
        break;
      }
      case 9:  // new slots start held (a VM being suspended) / not
        host->set_hold_new_slots(in.u8() & 1);
        break;
      case 10: {  // status and control requests on a served slot
        watchdog().set("snapshot/control");
        auto v = served();
        if (v.empty()) break;
        const auto& x = v[in.u8() % v.size()];
        std::vector<std::byte> reply;
        host->snapshot_slot(x.connection_id, x.slot, &reply, nullptr);
        // A control request runs at the slot's call boundary: only on a held slot, whose
        // service is parked there (the control path always holds first).
        if (held.count({x.connection_id, x.slot})) {
          const std::byte req[4] = {};
          host->control_slot(x.connection_id, x.slot, req, &reply, {}, nullptr);
        }
        break;
      }
      case 11: {  // the control path changes an image token (a save) or restores slots
        watchdog().set("image token");
        auto ids = host->connection_ids();
        if (ids.empty()) break;
        const uint64_t id = ids[in.u8() % ids.size()];
        switch (in.u8() % 3) {
          case 0: host->set_image_token(id, new_image_token()); break;
          case 1: host->adopt_restored_slot(id, s, std::chrono::milliseconds(20), nullptr); break;
          default: host->lose_restored_slot(id, s); break;
        }
        break;
      }
      case 12:  // accepts paused (an upgrade) and resumed
        watchdog().set("accepting");
        if (accepting) {
          host->stop_accepting(std::chrono::milliseconds(200));
          accepting = false;
        } else {
          host->resume_accepting();
          accepting = true;
        }
        break;
      default:  // let the host's threads run
        std::this_thread::sleep_for(std::chrono::microseconds(100 * (in.u8() % 20)));
        break;
    }
  }

  // Everything let go: every hold released, accepts resumed, every guest gone.
  watchdog().set("closing every connection");
  host->set_hold_new_slots(false);
  for (const auto& [id, slot] : held) host->release_slot(id, slot);
  for (const auto& x : served()) host->release_slot(x.connection_id, x.slot);
  if (!accepting) host->resume_accepting();
  for (auto& g : guests) g.conn.reset();
  if (!wait_for([&] {
        const auto st = host->stats();
        return st.connections_open == 0 && st.slots_serving == 0;
      }, 5000)) {
    const auto st = host->stats();
    std::fprintf(stderr, "endpoint_fuzz: %llu connections and %llu served slots 5 s after all closed\n",
                 static_cast<unsigned long long>(st.connections_open), static_cast<unsigned long long>(st.slots_serving));
    fail("connections or slots leak once every guest has gone");
  }
  if (!wait_for([&] { return service.counters.opened.load() == service.counters.closed.load(); }, 2000))
    fail("a slot service was opened and never closed");

  // The endpoint still serves a well-behaved client.
  watchdog().set("a new client after it all");
  {
    auto conn = LocalConnection::connect(o.socket_path);
    std::string why;
    auto slot = ClientSlot::claim(conn->region(), *conn, &why);
    if (!slot) {
      std::fprintf(stderr, "endpoint_fuzz: %s\n", why.c_str());
      fail("a new client cannot claim a slot");
    }
    const char msg[] = "after it all";
    auto r = slot->call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(msg)), 32);
    if (r.status != 0 || r.bytes.size() != sizeof msg || std::memcmp(r.bytes.data(), msg, sizeof msg) != 0)
      fail("a new client's Echo is not answered right");
  }
  watchdog().set("stop");
  host.reset();
  if (open_fds() != fds_before) fail("file descriptors left open after the endpoint stopped");
  watchdog().disarm();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  knobs::kLogLevel.set(0);
  knobs::kHostSpinNs.set(0);   // the sleep and wake paths, every call
  knobs::kGuestSpinNs.set(0);
  knobs::kRegionCheckMs.set(5);
  knobs::kGuestSameAddress.set(0);
  watchdog();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run_one(Input{data, size});
  return 0;
}
