// Fair sharing of a GPU between VMs by their policy weights (issue 13 point 5; docs/running.md
// "Fair sharing"). Without MPS the driver time-slices the contexts of different processes
// round-robin, whatever they are; so the stubs of the VMs on a GPU cooperate:
//
// - Measuring: each client's context on a GPU is a lane. A lane is in flight from its first
//   launch until a marker event, recorded after the last launch of each batch (one
//   cuEventRecord per batch that leaves work pending; none when the batch ended in a
//   synchronize), is complete. A sampler thread per (process, GPU) looks every
//   millisecond while a lane is in flight and charges the lane's VM dt / n of GPU time,
//   n being the lanes of all VMs in flight on that GPU then (the driver's round robin gives
//   each context with work an equal slice). No call of the launch path waits for anything.
// - Publishing: a small table per physical GPU, <placement dir>/gpuN.share-v1 (mapped by
//   every stub and worker process of every VM on that GPU; mode 0660, the stubs' user):
//   per VM its weight, its GPU time (busy) and its virtual time (busy / weight); per lane
//   whether it is in flight now. Every field read from it is clamped: another stub may be
//   buggy, and the file outlives its writers.
// - Deciding (stride scheduling on virtual time): a VM whose virtual time is more than a
//   slack ahead of another VM's that is progressing (its virtual time grew within the
//   last 50 ms: it has work on the GPU) holds its next launch back, sleeping in steps of
//   at most a millisecond, until it is no longer ahead. Work-conserving: a VM alone, or
//   whose peers are idle, suspended or dead (their time stops growing), never waits. A
//   peer's lag counts at most kMaxLag (a VM back from idle gets that much catch-up, not
//   its whole idle time). One hold lasts at most kMaxHold, whatever the table says.
//   Holding delays the client's service thread only: its calls keep their order and
//   errors.
// - The weight (policy `weight`, 1..1000; 0 or missing: 1) is written by the VM's stub into
//   the table and read by its workers every tick: a reload applies at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "driver_api.h"
#include "vmrpc/fd.h"

namespace vmcuda::host {

namespace fairshare {

inline constexpr uint64_t kMagic = 0x31762d6572616873ull;  // "share-v1"
inline constexpr uint32_t kVms = 64;     // VMs on one GPU at once
inline constexpr uint32_t kLanes = 256;  // contexts on one GPU at once (all VMs)
inline constexpr uint32_t kMaxWeight = 1000;
// Virtual time: GPU ns * kScale / weight (u64: 36 years of one GPU at weight 1).
inline constexpr uint64_t kScale = 16;
inline constexpr uint64_t kMs = 1000000;
inline constexpr uint64_t kTick = 1 * kMs;               // the sampler's period while busy
inline constexpr uint64_t kSlack = 2 * kMs * kScale;      // ahead by more than this: hold
inline constexpr uint64_t kMaxLag = 50 * kMs * kScale;    // a peer counts at most this far behind
inline constexpr uint64_t kProgressWindow = 50 * kMs;     // a peer progressed within: competing
inline constexpr uint64_t kInflightTtl = 5 * kMs;         // a lane's "in flight" lasts this long
inline constexpr uint64_t kMaxHold = 500 * kMs;           // one hold at most
inline constexpr uint64_t kEntryExpiry = 60ull * 1000 * kMs;  // a VM entry nobody kept alive: free
inline constexpr uint64_t kLaneExpiry = 10ull * 1000 * kMs;   // a lane nobody kept alive: free

struct VmEntry {
  std::atomic<uint64_t> alive_ns;   // refreshed by the VM's processes (CLOCK_MONOTONIC)
  std::atomic<uint64_t> vtime;      // busy * kScale / weight, summed as charged
  std::atomic<uint64_t> busy_ns;    // GPU time used (estimated as above)
  std::atomic<uint64_t> demand_ns;  // last time it had work in flight or held work back
  std::atomic<uint32_t> weight;
  std::atomic<uint32_t> pid;        // who claimed it (diagnostics)
  char name[64];                    // the VM's name, NUL-terminated (read: bounded)
};
struct Lane {
  std::atomic<uint64_t> alive_ns;
  std::atomic<uint64_t> inflight_until_ns;  // in flight while now < this
  std::atomic<uint32_t> vm;                 // its VmEntry; kVms or more: free
  std::atomic<uint32_t> pid;
};
struct Table {
  uint64_t magic;
  uint32_t vms, lanes;
  VmEntry vm[kVms];
  Lane lane[kLanes];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the table is shared between processes");

// The pure parts, on a table and a clock given (unit tests drive them with simulated time).
uint32_t weight_of(const VmEntry& e);  // clamped to 1..kMaxWeight
std::string name_of(const VmEntry& e);  // bounded
void init(Table& t);
bool valid_header(const Table& t);
// The entry of VM `name` (found, else a free or expired one claimed), or -1 when full.
int claim_vm(Table& t, std::string_view name, uint32_t pid, uint64_t now);
// A free or expired lane for VM `vm`, or -1.
int claim_lane(Table& t, uint32_t vm, uint32_t pid, uint64_t now);
void free_lane(Table& t, int lane);
// Lanes in flight now (fields clamped: a lane in flight "for ever" counts for nothing).
uint32_t lanes_in_flight(const Table& t, uint64_t now);
// Charges `ns` of GPU time to VM `vm` at its weight.
void charge(Table& t, uint32_t vm, uint64_t ns);
// A VM coming back from idle: its virtual time is lifted to kMaxLag behind the least of the
// VMs progressing (so it does not claim its whole idle time back).
void rejoin(Table& t, uint32_t vm, uint64_t now);

// One VM's view of its peers on one GPU: whether it is ahead of one that is progressing.
class Scheduler {
 public:
  bool ahead(const Table& t, uint32_t me, uint64_t now);

 private:
  struct Peer {
    uint64_t vtime = 0;
    uint64_t grew_ns = 0;  // when its virtual time last grew (plausibly), as seen here
    uint64_t seen_ns = 0;
  };
  Peer peers_[kVms];
};

// One lane of this process at a sampler tick.
struct TickLane {
  int index;       // in the table
  bool in;         // in flight now
  bool was;        // in flight at the last tick
  uint64_t since;  // when it last went from idle to busy
};
// One tick of VM `me`'s sampler (the last at `prev`): publishes its lanes, charges the VM
// each in-flight lane's dt / (lanes in flight on the GPU), keeps its demand (`waiting`: a
// launch is held back) and returns whether it is ahead now (its launches should wait).
bool tick(Table& t, Scheduler& sched, uint32_t me, const std::vector<TickLane>& lanes, uint64_t prev, uint64_t now,
          bool waiting);

}  // namespace fairshare

class FairShare;

// One GPU's table as mapped by this process, with its sampler.
class GpuShare {
 public:
  // One client's context on this GPU. Its launch path calls launched() and batch_done()
  // (on the thread that issues its work); the sampler reads it.
  class Lane {
   public:
    ~Lane();
    // After a launch on `stream` (hot path: relaxed atomics; a lock only when the lane was idle).
    void launched(CUstream stream) {
      if (stream != last_stream_) note_stream(stream);
      if (!dirty_.load(std::memory_order_relaxed)) mark_dirty();
    }
    // The end of a batch of calls: markers after what is pending. With `captures_open`,
    // streams that are capturing get none: an event recorded there would become part of the
    // graph, and the sampler's query of it would invalidate the app's capture.
    void batch_done(bool captures_open);
    // A synchronize returned: everything (all) or `stream`'s work is done.
    void synced(bool all, CUstream stream);
    GpuShare& share() { return share_; }

   private:
    friend class GpuShare;
    Lane(GpuShare& share, const DriverApi& api, CUcontext ctx, int index) : share_(share), api_(api), ctx_(ctx), index_(index) {}
    void note_stream(CUstream s);
    void mark_dirty();
    bool in_flight();  // the sampler (mu_ held by it)
    GpuShare& share_;
    const DriverApi& api_;
    CUcontext ctx_;
    int index_;  // in the table
    // The issuing thread's: streams launched on since the last batch end.
    CUstream last_stream_ = reinterpret_cast<CUstream>(~uintptr_t{0});
    std::vector<CUstream> dirty_streams_;
    std::atomic<bool> dirty_{false};  // launches no marker covers yet
    std::mutex mu_;                   // markers_: the issuing thread records, the sampler queries
    struct Marker {
      CUstream stream;
      CUevent event;
      bool pending;  // recorded and not yet seen complete
    };
    std::vector<Marker> markers_;
    std::atomic<uint64_t> since_ns_store_{0};  // when it last went from idle to busy
    bool was_in_flight_ = false;              // sampler's
  };

  ~GpuShare();
  // A lane for a client's context (null when the table is full or unusable).
  std::unique_ptr<Lane> open_lane(const DriverApi& api, CUcontext ctx);
  // Before a launch: waits while this VM is ahead of a peer that has work (bounded).
  void maybe_hold(const std::atomic<bool>* stop) {
    if (hold_.load(std::memory_order_relaxed)) hold(stop);
  }
  int device() const { return device_; }
  // Status: the VM's GPU time so far, its share of the GPU's time recently, its weight,
  // and how many VMs have work on the GPU now.
  struct Usage {
    int device = 0;
    uint64_t busy_ns = 0;
    double share = 0;
    uint32_t weight = 1;
    uint32_t vms_active = 0;
  };
  Usage usage();
  void set_weight(uint32_t weight);
  uint64_t holds() const { return holds_.load(std::memory_order_relaxed); }

 private:
  friend class FairShare;
  GpuShare(int device, std::string vm, vmrpc::UniqueFd fd, vmrpc::Mapping map, uint32_t weight, int me);
  void hold(const std::atomic<bool>* stop);
  void run();
  bool entry_ok();  // re-finds the VM's entry when the table was reset
  void wake();
  const int device_;
  const std::string vm_;
  vmrpc::UniqueFd fd_;
  vmrpc::Mapping map_;
  fairshare::Table* table_;
  std::atomic<int> me_{-1};
  std::atomic<uint32_t> weight_;  // what this process writes (the stub's; workers: 0, read only)
  fairshare::Scheduler sched_;
  std::atomic<bool> hold_{false};
  std::atomic<uint32_t> waiters_{0};
  std::atomic<uint64_t> holds_{0};
  std::mutex mu_;
  std::condition_variable cv_;       // the sampler sleeps here
  std::condition_variable turn_cv_;  // holders wait here
  std::atomic<bool> sleeping_{false};
  bool stop_ = false;
  std::vector<Lane*> lanes_;
  // usage(): the share over the last interval.
  uint64_t last_busy_ = 0, last_at_ = 0;
  double last_share_ = 0;
  std::thread thread_;
};

// This process's tables, one per GPU the VM uses, opened on first use.
class FairShare {
 public:
  // `dir`: where the tables live (the placement directory); `vm`: the VM's name; `weight`:
  // 0 in worker processes (they read the stub's), else the VM's.
  FairShare(std::string dir, std::string vm, uint32_t weight) : dir_(std::move(dir)), vm_(std::move(vm)), weight_(weight) {}
  // The table of host GPU `device` (null, said once in the log, when it cannot be used).
  GpuShare* gpu(int device);
  void set_weight(uint32_t weight);
  uint32_t weight() const { return weight_.load(std::memory_order_relaxed); }
  std::vector<GpuShare::Usage> usage(const std::vector<int>& devices);
  // The table's path for `device`.
  std::string path(int device) const { return dir_ + "/gpu" + std::to_string(device) + ".share-v1"; }

 private:
  std::string dir_, vm_;
  std::atomic<uint32_t> weight_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<GpuShare>> gpus_;
  std::map<int, bool> failed_;
};

}  // namespace vmcuda::host
