// Fair sharing between VMs (host-stub/src/fair_share.h): the scheduler on a simulated GPU
// that time-slices the contexts with work round-robin, with a simulated clock: shares
// converge to the weights, a VM alone gets the whole GPU, an idle, dead or lying peer holds
// nobody back for long, a weight change applies at once; the shared table's claims, and a
// damaged or hostile table file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <random>

#include "fair_share.h"

namespace vmcuda::host {
namespace {

using namespace fairshare;

// A GPU and the stubs of a few VMs, each VM one context (lane) keeping up to `depth` of
// work queued while it is not held back. Every `kStep` the GPU runs the contexts with work
// round-robin (each dt / n); every kTick each VM's sampler ticks (fairshare::tick).
struct Sim {
  static constexpr uint64_t kStep = 100000;  // 100 us
  struct Vm {
    int entry = -1, lane = -1;
    Scheduler sched;
    bool saturating = true;
    bool alive = true;      // its sampler runs
    bool hold = false;
    uint64_t queued = 0;    // ns of work on the GPU
    bool was = false;
    uint64_t since = 0;
    uint64_t gpu_ns = 0;    // what the GPU really gave it
  };
  std::unique_ptr<Table> table = std::make_unique<Table>();
  std::vector<Vm> vms;
  uint64_t now = 1000 * kMs, last_tick = now;
  uint64_t depth = 3 * kMs;
  Sim() { init(*table); }
  int add(const std::string& name, uint32_t weight) {
    Vm v;
    v.entry = claim_vm(*table, name, 100 + static_cast<uint32_t>(vms.size()), now);
    table->vm[v.entry].weight.store(weight);
    v.lane = claim_lane(*table, static_cast<uint32_t>(v.entry), 100 + static_cast<uint32_t>(vms.size()), now);
    vms.push_back(std::move(v));
    return static_cast<int>(vms.size()) - 1;
  }
  void run(uint64_t ns) {
    for (uint64_t end = now + ns; now < end;) {
      for (Vm& v : vms)
        if (v.alive && v.saturating && !v.hold && v.queued < depth) {
          if (v.queued == 0) v.since = now;
          v.queued = depth;
        }
      uint32_t n = 0;
      for (const Vm& v : vms) n += v.queued > 0;
      for (Vm& v : vms)
        if (v.queued > 0) {
          const uint64_t got = std::min(v.queued, kStep / n);
          v.queued -= got;
          v.gpu_ns += got;
        }
      now += kStep;
      if (now - last_tick >= kTick) {
        for (Vm& v : vms) {
          if (!v.alive) continue;
          const bool in = v.queued > 0;
          v.hold = tick(*table, v.sched, static_cast<uint32_t>(v.entry), {{v.lane, in, v.was, v.since}}, last_tick, now,
                        v.hold);
          v.was = in;
        }
        last_tick = now;
      }
    }
  }
  // Each VM's share of the GPU time given over `ns` from now.
  std::vector<double> shares(uint64_t ns) {
    std::vector<uint64_t> before;
    for (const Vm& v : vms) before.push_back(v.gpu_ns);
    run(ns);
    std::vector<double> s;
    for (size_t i = 0; i < vms.size(); ++i) s.push_back(double(vms[i].gpu_ns - before[i]) / double(ns));
    return s;
  }
};

TEST(FairShareSim, WeightsOneAndThreeGiveAQuarterAndThreeQuarters) {
  Sim sim;
  sim.add("a", 1);
  sim.add("b", 3);
  sim.run(1000 * kMs);  // settles
  const auto s = sim.shares(20000 * kMs);
  EXPECT_NEAR(s[0], 0.25, 0.02);
  EXPECT_NEAR(s[1], 0.75, 0.02);
  EXPECT_GT(s[0] + s[1], 0.99);  // the GPU never idles while both want it
}

TEST(FairShareSim, ThreeVmsAndDeepQueues) {
  Sim sim;
  sim.depth = 20 * kMs;  // work already queued when a hold starts runs on
  sim.add("a", 1);
  sim.add("b", 1);
  sim.add("c", 2);
  sim.run(2000 * kMs);
  const auto s = sim.shares(20000 * kMs);
  EXPECT_NEAR(s[0], 0.25, 0.03);
  EXPECT_NEAR(s[1], 0.25, 0.03);
  EXPECT_NEAR(s[2], 0.50, 0.03);
  EXPECT_GT(s[0] + s[1] + s[2], 0.99);
}

TEST(FairShareSim, AVmAloneGetsTheWholeGpu) {
  Sim sim;
  sim.add("a", 1);
  const int b = sim.add("b", 1000);
  sim.vms[b].saturating = false;  // idle: its entry is there, it wants nothing
  const auto s = sim.shares(5000 * kMs);
  EXPECT_GT(s[0], 0.999);
  EXPECT_FALSE(sim.vms[0].hold);
}

TEST(FairShareSim, WorkConservingWhenThePeerStops) {
  Sim sim;
  sim.add("a", 1);
  const int b = sim.add("b", 3);
  sim.run(5000 * kMs);  // a is held back part of the time now
  sim.vms[b].saturating = false;
  sim.run(100 * kMs);  // b's queue drains; its virtual time stops growing
  const auto s = sim.shares(5000 * kMs);
  EXPECT_GT(s[0], 0.999);
  // Back: b gets at most kMaxLag of catch-up, then the weights again.
  sim.vms[b].saturating = true;
  sim.run(1000 * kMs);
  const auto again = sim.shares(10000 * kMs);
  EXPECT_NEAR(again[0], 0.25, 0.02);
}

TEST(FairShareSim, AReturningVmDoesNotClaimItsIdleTimeBack) {
  Sim sim;
  sim.add("a", 1);
  const int b = sim.add("b", 1);
  sim.vms[b].saturating = false;
  sim.run(10000 * kMs);  // a alone for 10 s
  sim.vms[b].saturating = true;
  // Over the next second b gets its half plus at most kMaxLag's worth, not 10 s.
  const auto s = sim.shares(1000 * kMs);
  EXPECT_LT(s[1], 0.5 + double(kMaxLag / kScale) / 1e9 + 0.05);
  EXPECT_GT(s[0], 0.3);
}

TEST(FairShareSim, AWeightChangeAppliesAtOnce) {
  Sim sim;
  sim.add("a", 1);
  const int b = sim.add("b", 3);
  sim.run(2000 * kMs);
  sim.table->vm[sim.vms[b].entry].weight.store(1);  // a policy reload
  sim.run(200 * kMs);
  const auto s = sim.shares(10000 * kMs);
  EXPECT_NEAR(s[0], 0.5, 0.02);
}

TEST(FairShareSim, ADeadPeerHoldsNobodyBack) {
  Sim sim;
  sim.add("a", 1);
  const int b = sim.add("b", 3);
  sim.run(3000 * kMs);
  // b's stub is killed (or stopped) with its lane in flight and its time behind a's.
  sim.vms[b].alive = false;
  sim.vms[b].queued = 0;
  sim.run(kProgressWindow + 5 * kTick);
  EXPECT_FALSE(sim.vms[0].hold);
  EXPECT_EQ(lanes_in_flight(*sim.table, sim.now), 1u);  // b's "in flight" expired
  const auto s = sim.shares(2000 * kMs);
  EXPECT_GT(s[0], 0.999);
}

TEST(FairShareTable, ClaimsByNameAndReusesExpiredEntries) {
  auto t = std::make_unique<Table>();
  init(*t);
  const uint64_t now = 5000 * kMs;
  const int a = claim_vm(*t, "web1", 10, now);
  const int b = claim_vm(*t, "web2", 11, now);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(claim_vm(*t, "web1", 12, now), a);  // a worker, a restarted stub: the same entry
  for (uint32_t i = 2; i < kVms; ++i) ASSERT_GE(claim_vm(*t, "vm" + std::to_string(i), 1, now), 0);
  EXPECT_EQ(claim_vm(*t, "one-too-many", 1, now), -1);
  // An entry nobody kept alive for kEntryExpiry is free for another VM.
  t->vm[b].alive_ns.store(now - kEntryExpiry - 1);
  EXPECT_EQ(claim_vm(*t, "late", 1, now), b);
  EXPECT_EQ(name_of(t->vm[b]), "late");
  EXPECT_EQ(t->vm[b].busy_ns.load(), 0u);
  // Lanes likewise.
  for (uint32_t i = 0; i < kLanes; ++i) ASSERT_GE(claim_lane(*t, static_cast<uint32_t>(a), 1, now), 0);
  EXPECT_EQ(claim_lane(*t, static_cast<uint32_t>(a), 1, now), -1);
  free_lane(*t, 7);
  EXPECT_EQ(claim_lane(*t, static_cast<uint32_t>(a), 1, now), 7);
}

TEST(FairShareTable, DamagedFieldsAreClamped) {
  auto t = std::make_unique<Table>();
  std::mt19937_64 rng(1234);  // deterministic garbage
  auto* bytes = reinterpret_cast<uint64_t*>(t.get());
  for (size_t i = 0; i < sizeof(Table) / 8; ++i) bytes[i] = rng();
  EXPECT_FALSE(valid_header(*t));
  const uint64_t now = 1000000 * kMs;
  // Whatever the fields hold: weights in range, names bounded, lanes "in flight" for ever
  // or for another VM index count for nothing beyond kInflightTtl.
  for (const VmEntry& e : t->vm) {
    EXPECT_GE(weight_of(e), 1u);
    EXPECT_LE(weight_of(e), kMaxWeight);
    EXPECT_LE(name_of(e).size(), sizeof e.name);
  }
  EXPECT_LE(lanes_in_flight(*t, now), kLanes);
  for (Lane& l : t->lane) l.inflight_until_ns.store(~0ull);
  EXPECT_EQ(lanes_in_flight(*t, now), 0u);
  // A scheduler and a tick on it do not fail; a garbage peer that does not progress holds
  // nobody back once kProgressWindow passed.
  Scheduler s;
  for (auto& e : t->vm) e.name[0] = 'x';
  const uint32_t me = 3;
  uint64_t at = now;
  for (int i = 0; i < 100; ++i, at += kTick) tick(*t, s, me, {{5, true, true, at - kTick}}, at - kTick, at, false);
  EXPECT_FALSE(s.ahead(*t, me, at));
  // A peer that claims to be far behind and progressing gets at most kMaxLag of catch-up.
  t->vm[me].vtime.store(1000 * kMaxLag);
  t->vm[7].vtime.store(0);
  Scheduler s2;
  EXPECT_FALSE(s2.ahead(*t, me, at));  // first look: no progress seen yet
  t->vm[7].vtime.store(kScale * kTick / 2);
  EXPECT_TRUE(s2.ahead(*t, me, at + kTick));
  // An implausible jump (more GPU time than the time passed) is no progress.
  Scheduler s3;
  s3.ahead(*t, me, at);
  t->vm[7].vtime.store(kScale * kTick * 1000);
  EXPECT_FALSE(s3.ahead(*t, me, at + kTick));
  // An entry index out of range is nobody's.
  charge(*t, kVms + 1, 1000);
  rejoin(*t, kVms, now);
  EXPECT_FALSE(s.ahead(*t, kVms, now));
}

// The table files: made with safe permissions, a damaged one made anew, one that is a
// link or writable by others refused.
struct Dir {
  std::string path;
  Dir() {
    char tmpl[] = "/tmp/vmcuda-fairshare-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

TEST(FairShareFiles, TwoVmsShareOneTable) {
  Dir d;
  FairShare a(d.path, "vm-a", 1), b(d.path, "vm-b", 3);
  GpuShare* ga = a.gpu(0);
  GpuShare* gb = b.gpu(0);
  ASSERT_TRUE(ga && gb);
  struct stat st{};
  ASSERT_EQ(::stat(a.path(0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777 & ~0660, 0u);
  EXPECT_EQ(static_cast<size_t>(st.st_size), sizeof(Table));
  const auto ua = a.usage({0}), ub = b.usage({0});
  ASSERT_EQ(ua.size(), 1u);
  EXPECT_EQ(ua[0].weight, 1u);
  EXPECT_EQ(ub[0].weight, 3u);
  b.set_weight(7);  // a reload
  EXPECT_EQ(b.usage({0})[0].weight, 7u);
  EXPECT_EQ(ua[0].busy_ns, 0u);
  EXPECT_FALSE(ga->holds());
}

TEST(FairShareFiles, ADamagedTableIsMadeAnew) {
  Dir d;
  FairShare probe(d.path, "x", 1);
  {
    std::ofstream f(probe.path(0));
    f << "not a table at all";
  }
  ::chmod(probe.path(0).c_str(), 0600);
  FairShare a(d.path, "vm-a", 2);
  ASSERT_NE(a.gpu(0), nullptr);
  EXPECT_EQ(a.usage({0})[0].weight, 2u);
  struct stat st{};
  ASSERT_EQ(::stat(a.path(0).c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), sizeof(Table));
}

TEST(FairShareFiles, LinksAndWorldWritableFilesAreRefused) {
  Dir d;
  FairShare a(d.path, "vm-a", 1);
  const std::string target = d.path + "/elsewhere";
  std::ofstream(target) << "";
  ASSERT_EQ(::symlink(target.c_str(), a.path(0).c_str()), 0);
  EXPECT_EQ(a.gpu(0), nullptr);  // said in the log; the VM is then not shared by weight
  FairShare b(d.path, "vm-b", 1);
  {
    const int fd = ::open(b.path(1).c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ::fchmod(fd, 0666);
    ::close(fd);
  }
  EXPECT_EQ(b.gpu(1), nullptr);
}

}  // namespace
}  // namespace vmcuda::host
