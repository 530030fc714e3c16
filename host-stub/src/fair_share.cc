#include "fair_share.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "vmrpc/log.h"

namespace vmcuda::host {

namespace fairshare {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr uint32_t kNoVm = ~0u;
bool stale(uint64_t alive, uint64_t now, uint64_t expiry) {
  // A time in the future (a damaged field, another clock) is as good as none.
  return alive == 0 || alive > now + 1000 * kMs || now - alive > expiry;
}
}  // namespace

uint32_t weight_of(const VmEntry& e) { return std::clamp<uint32_t>(e.weight.load(kRelaxed), 1, kMaxWeight); }

std::string name_of(const VmEntry& e) {
  char copy[sizeof e.name];
  std::memcpy(copy, e.name, sizeof copy);  // once: others may write it meanwhile
  return std::string(copy, strnlen(copy, sizeof copy));
}

void init(Table& t) {
  for (VmEntry& e : t.vm) {
    e.alive_ns.store(0, kRelaxed);
    e.vtime.store(0, kRelaxed);
    e.busy_ns.store(0, kRelaxed);
    e.demand_ns.store(0, kRelaxed);
    e.weight.store(1, kRelaxed);
    e.pid.store(0, kRelaxed);
    std::memset(e.name, 0, sizeof e.name);
  }
  for (Lane& l : t.lane) {
    l.alive_ns.store(0, kRelaxed);
    l.inflight_until_ns.store(0, kRelaxed);
    l.vm.store(kNoVm, kRelaxed);
    l.pid.store(0, kRelaxed);
  }
  t.vms = kVms;
  t.lanes = kLanes;
  std::atomic_thread_fence(std::memory_order_release);
  t.magic = kMagic;
}

bool valid_header(const Table& t) { return t.magic == kMagic && t.vms == kVms && t.lanes == kLanes; }

int claim_vm(Table& t, std::string_view name, uint32_t pid, uint64_t now) {
  name = name.substr(0, sizeof(VmEntry::name) - 1);
  for (uint32_t i = 0; i < kVms; ++i)
    if (name_of(t.vm[i]) == name) {
      t.vm[i].alive_ns.store(now, kRelaxed);
      t.vm[i].pid.store(pid, kRelaxed);
      return static_cast<int>(i);
    }
  for (uint32_t i = 0; i < kVms; ++i) {
    VmEntry& e = t.vm[i];
    if (e.name[0] != '\0' && !stale(e.alive_ns.load(kRelaxed), now, kEntryExpiry)) continue;
    e.vtime.store(0, kRelaxed);  // rejoin() lifts it to the others'
    e.busy_ns.store(0, kRelaxed);
    e.demand_ns.store(0, kRelaxed);
    e.weight.store(1, kRelaxed);
    e.pid.store(pid, kRelaxed);
    std::memset(e.name, 0, sizeof e.name);
    std::memcpy(e.name, name.data(), name.size());
    e.alive_ns.store(now, kRelaxed);
    return static_cast<int>(i);
  }
  return -1;
}

int claim_lane(Table& t, uint32_t vm, uint32_t pid, uint64_t now) {
  for (uint32_t i = 0; i < kLanes; ++i) {
    Lane& l = t.lane[i];
    if (l.vm.load(kRelaxed) < kVms && !stale(l.alive_ns.load(kRelaxed), now, kLaneExpiry)) continue;
    l.inflight_until_ns.store(0, kRelaxed);
    l.pid.store(pid, kRelaxed);
    l.alive_ns.store(now, kRelaxed);
    l.vm.store(vm, kRelaxed);
    return static_cast<int>(i);
  }
  return -1;
}

void free_lane(Table& t, int lane) {
  if (lane < 0 || static_cast<uint32_t>(lane) >= kLanes) return;
  t.lane[lane].inflight_until_ns.store(0, kRelaxed);
  t.lane[lane].vm.store(kNoVm, kRelaxed);
}

uint32_t lanes_in_flight(const Table& t, uint64_t now) {
  uint32_t n = 0;
  for (const Lane& l : t.lane) {
    const uint64_t until = l.inflight_until_ns.load(kRelaxed);
    if (l.vm.load(kRelaxed) < kVms && until > now && until - now <= 4 * kInflightTtl) ++n;
  }
  return n;
}

void charge(Table& t, uint32_t vm, uint64_t ns) {
  if (vm >= kVms || ns == 0) return;
  t.vm[vm].busy_ns.fetch_add(ns, kRelaxed);
  t.vm[vm].vtime.fetch_add(ns * kScale / weight_of(t.vm[vm]), kRelaxed);
}

void rejoin(Table& t, uint32_t vm, uint64_t now) {
  if (vm >= kVms) return;
  uint64_t least = ~0ull;
  for (uint32_t i = 0; i < kVms; ++i) {
    if (i == vm || t.vm[i].name[0] == '\0') continue;
    const uint64_t d = t.vm[i].demand_ns.load(kRelaxed);
    if (d > now || now - d > kProgressWindow) continue;
    least = std::min(least, t.vm[i].vtime.load(kRelaxed));
  }
  if (least == ~0ull || least < kMaxLag) return;
  const uint64_t floor = least - kMaxLag;
  uint64_t v = t.vm[vm].vtime.load(kRelaxed);
  while (v < floor && !t.vm[vm].vtime.compare_exchange_weak(v, floor, kRelaxed)) {
  }
}

bool Scheduler::ahead(const Table& t, uint32_t me, uint64_t now) {
  if (me >= kVms) return false;
  const uint64_t mine = t.vm[me].vtime.load(kRelaxed);
  bool behind = false;
  for (uint32_t i = 0; i < kVms; ++i) {
    if (i == me) continue;
    const VmEntry& e = t.vm[i];
    Peer& p = peers_[i];
    if (e.name[0] == '\0') {
      p = Peer{};
      continue;
    }
    const uint64_t v = e.vtime.load(kRelaxed);
    // Growth seen over a short look counts if it is plausible: a VM cannot use more than
    // the whole GPU (kScale per ns at weight 1; twice that, for clocks read at other times).
    if (p.seen_ns != 0 && now > p.seen_ns) {
      const uint64_t dt = now - p.seen_ns;
      if (dt <= kProgressWindow && v > p.vtime && v - p.vtime <= 2 * (dt + kTick) * kScale) p.grew_ns = now;
    }
    p.vtime = v;
    p.seen_ns = now;
    if (p.grew_ns == 0 || now - p.grew_ns > kProgressWindow) continue;  // idle, suspended, dead
    const uint64_t seen = std::max(v, mine > kMaxLag ? mine - kMaxLag : 0);
    if (seen + kSlack < mine) behind = true;  // keep looking: every peer's progress is tracked
  }
  return behind;
}

bool tick(Table& t, Scheduler& sched, uint32_t me, const std::vector<TickLane>& lanes, uint64_t prev, uint64_t now,
          bool waiting) {
  if (me >= kVms) return false;
  bool any = false;
  for (const TickLane& l : lanes) {
    if (l.index < 0 || static_cast<uint32_t>(l.index) >= kLanes) continue;
    t.lane[l.index].inflight_until_ns.store(l.in ? now + kInflightTtl : 0, kRelaxed);
    any = any || l.in;
  }
  const uint32_t n = std::max<uint32_t>(1, lanes_in_flight(t, now));
  uint64_t credit = 0;
  for (const TickLane& l : lanes) {
    if (!l.in && !l.was) continue;
    const uint64_t since = std::max(prev, l.since);
    uint64_t dt = now > since ? now - since : 0;
    if (!l.in) dt /= 2;  // it ended somewhere in the tick
    credit += dt / n;
  }
  charge(t, me, credit);
  if (any || waiting) {
    const uint64_t d = t.vm[me].demand_ns.load(kRelaxed);
    if (d > now || now - d > kProgressWindow) rejoin(t, me, now);  // back from idle
    t.vm[me].demand_ns.store(now, kRelaxed);
  }
  return sched.ahead(t, me, now);
}

}  // namespace fairshare

namespace {
uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
constexpr size_t kMaxMarkers = 32;  // streams a lane tracks at once
}  // namespace

// ---- Lane

GpuShare::Lane::~Lane() {
  {
    std::lock_guard l(share_.mu_);
    std::erase(share_.lanes_, this);
    fairshare::free_lane(*share_.table_, index_);
  }
  std::lock_guard l(mu_);
  for (const Marker& m : markers_) api_.cuEventDestroy_v2(m.event);
}

void GpuShare::Lane::note_stream(CUstream s) {
  last_stream_ = s;
  if (std::find(dirty_streams_.begin(), dirty_streams_.end(), s) == dirty_streams_.end()) dirty_streams_.push_back(s);
}

void GpuShare::Lane::mark_dirty() {
  since_ns_store_ = now_ns();
  dirty_.store(true, std::memory_order_seq_cst);
  if (share_.sleeping_.load(std::memory_order_seq_cst)) share_.wake();
}

void GpuShare::Lane::batch_done(bool captures_open) {
  if (dirty_streams_.empty()) return;
  bool covered = true;
  {
    std::lock_guard l(mu_);
    for (CUstream s : dirty_streams_) {
      int capture = CU_STREAM_CAPTURE_STATUS_NONE;
      if (captures_open && api_.cuStreamIsCapturing(s, &capture) == CUDA_SUCCESS &&
          capture != CU_STREAM_CAPTURE_STATUS_NONE)
        continue;  // its work before the capture goes uncounted (a rare, short undercount)
      auto it = std::find_if(markers_.begin(), markers_.end(), [&](const Marker& m) { return m.stream == s; });
      if (it == markers_.end()) {
        // A marker of a stream done with, else a new one.
        it = std::find_if(markers_.begin(), markers_.end(), [&](const Marker& m) {
          return !m.pending || api_.cuEventQuery(m.event) != CUDA_ERROR_NOT_READY;
        });
        if (it != markers_.end()) {
          it->stream = s;
        } else if (markers_.size() < kMaxMarkers) {
          CUevent e = nullptr;
          if (api_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
            covered = false;
            continue;
          }
          markers_.push_back({s, e, false});
          it = markers_.end() - 1;
        } else {
          covered = false;  // stays in flight until a later batch's markers
          continue;
        }
      }
      if (api_.cuEventRecord(it->event, s) == CUDA_SUCCESS) it->pending = true;
      else covered = false;
    }
  }
  if (!covered) return;
  dirty_streams_.clear();
  last_stream_ = reinterpret_cast<CUstream>(~uintptr_t{0});
  dirty_.store(false, std::memory_order_release);
}

void GpuShare::Lane::synced(bool all, CUstream stream) {
  if (!all) {
    if (dirty_streams_.size() != 1 || dirty_streams_[0] != stream) return;
    std::lock_guard l(mu_);
    for (const Marker& m : markers_)
      if (m.pending && m.stream != stream) return;  // other streams' work may still run
  }
  {
    std::lock_guard l(mu_);
    for (Marker& m : markers_) m.pending = false;
  }
  dirty_streams_.clear();
  last_stream_ = reinterpret_cast<CUstream>(~uintptr_t{0});
  dirty_.store(false, std::memory_order_release);
}

bool GpuShare::Lane::in_flight() {
  if (dirty_.load(std::memory_order_seq_cst)) return true;
  std::lock_guard l(mu_);
  bool any = false;
  for (Marker& m : markers_) {
    if (!m.pending) continue;
    if (!any) api_.cuCtxSetCurrent(ctx_);
    if (api_.cuEventQuery(m.event) == CUDA_ERROR_NOT_READY) {
      any = true;
      break;
    }
    m.pending = false;  // done (or failed: nothing runs any more)
  }
  return any;
}

// ---- GpuShare

GpuShare::GpuShare(int device, std::string vm, vmrpc::UniqueFd fd, vmrpc::Mapping map, uint32_t weight, int me)
    : device_(device), vm_(std::move(vm)), fd_(std::move(fd)), map_(std::move(map)),
      table_(reinterpret_cast<fairshare::Table*>(map_.data())), me_(me), weight_(weight) {
  thread_ = std::thread([this] { run(); });
}

GpuShare::~GpuShare() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  turn_cv_.notify_all();
  thread_.join();
}

void GpuShare::wake() {
  std::lock_guard l(mu_);
  cv_.notify_all();
}

std::unique_ptr<GpuShare::Lane> GpuShare::open_lane(const DriverApi& api, CUcontext ctx) {
  const int me = me_.load();
  if (me < 0) return nullptr;
  int index;
  {
    ::flock(fd_.get(), LOCK_EX);  // claims are made under the file's lock
    index = fairshare::claim_lane(*table_, static_cast<uint32_t>(me), static_cast<uint32_t>(::getpid()), now_ns());
    ::flock(fd_.get(), LOCK_UN);
  }
  if (index < 0) {
    VMRPC_LOG(kWarn, "stub", vm_ + ": GPU " + std::to_string(device_) + "'s fair-share table has no free lane (" +
                                 std::to_string(fairshare::kLanes) + " contexts): this program's GPU time is not counted");
    return nullptr;
  }
  std::unique_ptr<Lane> lane(new Lane(*this, api, ctx, index));
  std::lock_guard l(mu_);
  lanes_.push_back(lane.get());
  return lane;
}

void GpuShare::hold(const std::atomic<bool>* stop) {
  holds_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t deadline = now_ns() + fairshare::kMaxHold;
  std::unique_lock l(mu_);
  waiters_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_all();  // the sampler looks every tick while someone waits
  while (hold_.load(std::memory_order_relaxed) && !stop_ && !(stop && stop->load()) && now_ns() < deadline)
    turn_cv_.wait_for(l, std::chrono::milliseconds(1));
  waiters_.fetch_sub(1, std::memory_order_relaxed);
}

bool GpuShare::entry_ok() {
  const int me = me_.load();
  if (me >= 0 && fairshare::valid_header(*table_) && fairshare::name_of(table_->vm[me]) == vm_.substr(0, 63)) return true;
  // Reset or taken over (a damaged table, an entry that expired while this stub was stopped).
  ::flock(fd_.get(), LOCK_EX);
  if (!fairshare::valid_header(*table_)) fairshare::init(*table_);
  const int fresh = fairshare::claim_vm(*table_, vm_, static_cast<uint32_t>(::getpid()), now_ns());
  ::flock(fd_.get(), LOCK_UN);
  me_.store(fresh);
  return fresh >= 0;
}

void GpuShare::set_weight(uint32_t weight) {
  weight_.store(weight, std::memory_order_relaxed);
  const int me = me_.load();
  if (weight && me >= 0) table_->vm[me].weight.store(std::clamp<uint32_t>(weight, 1, fairshare::kMaxWeight));
}

GpuShare::Usage GpuShare::usage() {
  Usage u;
  u.device = device_;
  std::lock_guard l(mu_);
  const int me = me_.load();
  if (me < 0) return u;
  const uint64_t now = now_ns();
  u.busy_ns = table_->vm[me].busy_ns.load(std::memory_order_relaxed);
  u.weight = fairshare::weight_of(table_->vm[me]);
  u.share = last_share_;
  for (const fairshare::VmEntry& e : table_->vm) {
    const uint64_t d = e.demand_ns.load(std::memory_order_relaxed);
    if (e.name[0] != '\0' && d <= now && now - d < 1000 * fairshare::kMs) ++u.vms_active;
  }
  return u;
}

void GpuShare::run() {
  using namespace fairshare;
  uint64_t prev = now_ns(), heartbeat = 0;
  struct Sample {
    uint64_t at, busy;
  };
  std::vector<Sample> window;  // the share: GPU time over the last ~2 s
  std::unique_lock l(mu_);
  while (!stop_) {
    const uint64_t now = now_ns();
    const int me_i = me_.load();
    if (now - heartbeat >= 500 * kMs || me_i < 0) {
      heartbeat = now;
      l.unlock();
      const bool ok = entry_ok();
      l.lock();
      const int me = me_.load();
      if (ok && me >= 0) {
        table_->vm[me].alive_ns.store(now, std::memory_order_relaxed);
        if (const uint32_t w = weight_.load(std::memory_order_relaxed))
          table_->vm[me].weight.store(std::clamp<uint32_t>(w, 1, kMaxWeight), std::memory_order_relaxed);
        for (Lane* lane : lanes_) table_->lane[lane->index_].alive_ns.store(now, std::memory_order_relaxed);
        const uint64_t busy = table_->vm[me].busy_ns.load(std::memory_order_relaxed);
        window.push_back({now, busy});
        while (window.size() > 5) window.erase(window.begin());
        const Sample& first = window.front();
        if (now > first.at && busy >= first.busy)
          last_share_ = std::min(1.0, double(busy - first.busy) / double(now - first.at));
      }
    }
    const int me = me_.load();
    bool any = false;
    if (me >= 0) {
      std::vector<TickLane> ticks;
      ticks.reserve(lanes_.size());
      for (Lane* lane : lanes_) {
        const bool in = lane->in_flight();
        any = any || in;
        ticks.push_back({lane->index_, in, lane->was_in_flight_, lane->since_ns_store_.load(std::memory_order_relaxed)});
        lane->was_in_flight_ = in;
      }
      if (!lanes_.empty()) lanes_.front()->api_.cuCtxSetCurrent(nullptr);  // no client's context stays current here
      const bool waiting = waiters_.load(std::memory_order_relaxed) > 0;
      const bool ahead = tick(*table_, sched_, static_cast<uint32_t>(me), ticks, prev, now, waiting);
      hold_.store(ahead, std::memory_order_relaxed);
      if (!ahead) turn_cv_.notify_all();
      any = any || waiting;
    }
    prev = now;
    if (any) {
      cv_.wait_for(l, std::chrono::nanoseconds(kTick));
      continue;
    }
    // Idle: look again when a lane starts work or a holder waits (a launch checks this flag
    // after marking its lane: one of the two sees the other), else to keep the entry alive.
    sleeping_.store(true, std::memory_order_seq_cst);
    bool dirty = false;
    for (Lane* lane : lanes_) dirty = dirty || lane->dirty_.load(std::memory_order_seq_cst);
    if (!dirty && waiters_.load() == 0 && !stop_) cv_.wait_for(l, std::chrono::milliseconds(500));
    sleeping_.store(false, std::memory_order_relaxed);
    prev = now_ns();
  }
}

// ---- FairShare

GpuShare* FairShare::gpu(int device) {
  std::lock_guard l(mu_);
  if (auto it = gpus_.find(device); it != gpus_.end()) return it->second.get();
  if (failed_.contains(device)) return nullptr;
  const std::string file = path(device);
  auto fail = [&](const std::string& why) -> GpuShare* {
    failed_[device] = true;
    VMRPC_LOG(kWarn, "stub", vm_ + ": GPU " + std::to_string(device) + " is not shared by weight with other VMs: " +
                                 why + " (the placement directory, --placement-dir, must be the stubs' own)");
    return nullptr;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  vmrpc::UniqueFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0660));
  if (!fd) return fail("cannot open " + file + ": " + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail(file + " is not a regular file");
  if (st.st_uid != ::geteuid()) return fail(file + " belongs to another user (uid " + std::to_string(st.st_uid) + ")");
  if (st.st_mode & S_IWOTH) return fail(file + " is writable by every user");
  ::flock(fd.get(), LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() { ::flock(fd, LOCK_UN); }
  } unlock{fd.get()};
  const bool sized = static_cast<size_t>(st.st_size) == sizeof(fairshare::Table);
  if (!sized && ::ftruncate(fd.get(), sizeof(fairshare::Table)) != 0)
    return fail("cannot size " + file + ": " + std::strerror(errno));
  vmrpc::Mapping map;
  try {
    map = vmrpc::Mapping::map_shared(fd.get(), sizeof(fairshare::Table), "a GPU's fair-share table");
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  auto* table = reinterpret_cast<fairshare::Table*>(map.data());
  if (!sized || !fairshare::valid_header(*table)) {
    if (st.st_size != 0)
      VMRPC_LOG(kWarn, "stub", vm_ + ": " + file + " was damaged (size or header); made anew");
    fairshare::init(*table);
  }
  const int me = fairshare::claim_vm(*table, vm_, static_cast<uint32_t>(::getpid()), now_ns());
  if (me < 0) return fail(file + " has no free entry (" + std::to_string(fairshare::kVms) + " VMs on one GPU)");
  if (const uint32_t w = weight_.load()) table->vm[me].weight.store(std::clamp<uint32_t>(w, 1, fairshare::kMaxWeight));
  std::unique_ptr<GpuShare> share(new GpuShare(device, vm_, std::move(fd), std::move(map), weight_.load(), me));
  GpuShare* raw = share.get();
  gpus_[device] = std::move(share);
  return raw;
}

void FairShare::set_weight(uint32_t weight) {
  weight_.store(weight);
  std::lock_guard l(mu_);
  for (auto& [d, g] : gpus_) g->set_weight(weight);
}

std::vector<GpuShare::Usage> FairShare::usage(const std::vector<int>& devices) {
  std::vector<GpuShare::Usage> out;
  for (int d : devices)
    if (GpuShare* g = gpu(d)) out.push_back(g->usage());
  return out;
}

}  // namespace vmcuda::host
