#include "client_control.h"

#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <map>
#include <thread>
#include <mutex>
#include <atomic>

#include "state_stream.h"
#include "vmrpc/knobs.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

namespace client_control {

namespace testing {
std::function<std::shared_ptr<const state::MemoryStream>(const std::shared_ptr<const state::MemoryStream>&)>
    resume_state_override;
}  // namespace testing

std::vector<std::byte> encode(const Request& r) {
  state::ByteWriter w;
  w.put_u32(static_cast<uint32_t>(r.op));
  w.put_string(r.path);
  w.put_u32(static_cast<uint32_t>(r.devices.size()));
  for (int d : r.devices) w.put_i32(d);
  return w.take();
}

bool decode(std::span<const std::byte> bytes, Request* r) {
  state::ByteReader rd(bytes);
  uint32_t op = 0;
  rd.get_u32(&op);
  rd.get_string(&r->path, 4096);
  uint32_t n = 0;
  rd.get_u32(&n);
  if (n > 64) return false;
  r->devices.assign(n, 0);
  for (int& d : r->devices) rd.get_i32(&d);
  rd.expect_end();
  r->op = static_cast<Op>(op);
  return rd.ok() && op >= 1 && op <= static_cast<uint32_t>(Op::kSuspendWindow);
}

std::vector<std::byte> encode(const Reply& r) {
  state::ByteWriter w;
  w.put_u8(r.ok);
  w.put_string(r.error);
  w.put_u8(r.retry);
  w.put_u32(r.status.slot);
  w.put_u32(r.status.owner_tag);
  w.put_u8(r.status.suspended);
  w.put_u64(r.status.device_bytes);
  w.put_u64(r.status.allocated_bytes);
  w.put_u64(r.status.objects);
  w.put_u32(static_cast<uint32_t>(r.status.devices.size()));
  for (int d : r.status.devices) w.put_i32(d);
  w.put_string(r.status.program);
  w.put_u64(r.status.launches);
  w.put_u64(r.status.module_bytes);
  w.put_u32(static_cast<uint32_t>(r.status.library_calls.size()));
  for (uint64_t n : r.status.library_calls) w.put_u64(n);
  w.put_u64(r.state_bytes);
  uint64_t us = static_cast<uint64_t>(r.seconds * 1e6);
  w.put_u64(us);
  return w.take();
}

bool decode(std::span<const std::byte> bytes, Reply* r) {
  state::ByteReader rd(bytes);
  uint8_t ok = 0, suspended = 0, retry = 0;
  uint32_t n = 0;
  rd.get_u8(&ok);
  rd.get_string(&r->error, 1 << 16);
  rd.get_u8(&retry);
  rd.get_u32(&r->status.slot);
  rd.get_u32(&r->status.owner_tag);
  rd.get_u8(&suspended);
  rd.get_u64(&r->status.device_bytes);
  rd.get_u64(&r->status.allocated_bytes);
  rd.get_u64(&r->status.objects);
  rd.get_u32(&n);
  for (uint32_t i = 0; rd.ok() && i < n && i < 64; ++i) {
    int32_t d = 0;
    rd.get_i32(&d);
    r->status.devices.push_back(d);
  }
  rd.get_string(&r->status.program, 256);
  rd.get_u64(&r->status.launches);
  rd.get_u64(&r->status.module_bytes);
  rd.get_u32(&n);
  if (n != r->status.library_calls.size()) return false;  // the two processes are one build
  for (uint64_t& calls : r->status.library_calls) rd.get_u64(&calls);
  rd.get_u64(&r->state_bytes);
  uint64_t us = 0;
  rd.get_u64(&us);
  rd.expect_end();
  r->ok = ok;
  r->retry = retry;
  r->status.suspended = suspended;
  r->seconds = static_cast<double>(us) / 1e6;
  return rd.ok();
}

std::vector<std::byte> encode(const Progress& p) {
  state::ByteWriter w;
  w.put_string(p.phase);
  w.put_u64(p.done);
  w.put_u64(p.total);
  return w.take();
}

bool decode(std::span<const std::byte> bytes, Progress* p) {
  state::ByteReader rd(bytes);
  rd.get_string(&p->phase, 256);
  rd.get_u64(&p->done);
  rd.get_u64(&p->total);
  rd.expect_end();
  return rd.ok();
}

}  // namespace client_control

// Staging buffers a suspend copies device memory into: page-locked while the copy runs, so
// the GPU writes them at full speed (55 GB/s on the H100, against 11 GB/s into pageable
// memory), and unpinned before the client's contexts go (pinning belongs to a context);
// the memory itself stays, as the suspended state, until the stream is dropped. Carved
// from large slabs (transparent huge pages, one registration each): pinning costs per
// page and per call, not per byte copied.
namespace {
// Where staging slabs go: low in the address space, away from the top-down area where the
// driver reserves a context's own address ranges (module data among them). A host mapping
// there would move the module data of a context created after it, and a resume needs it
// where it was (measured on the H100: a 64 MiB slab mapped there moved it by 512 MiB).
constexpr uint64_t kSlabArea = 0x200000000000ull, kSlabAreaBytes = 0x100000000000ull;
std::atomic<uint64_t> g_next_slab{kSlabArea};

void* map_slab(uint64_t bytes) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    const uint64_t at = g_next_slab.fetch_add(bytes);
    if (at + bytes > kSlabArea + kSlabAreaBytes) g_next_slab = kSlabArea;  // wrap: freed slabs left room
    void* p = ::mmap(reinterpret_cast<void*>(at), bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED) return p;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
}  // namespace

// What pinning costs the VM: page-locked host memory is charged to its host memory bound
// (Session::charge_host) while pinned, like the program's own, and refunded when unpinned.
struct PinCharge {
  std::function<bool(uint64_t)> charge;  // false: no room (nothing charged)
  std::function<void(uint64_t)> refund;
};

class PinnedStaging : public std::enable_shared_from_this<PinnedStaging> {
 public:
  // `pinned`: whether slabs are pinned as they are made (the stream's buffers are what the
  // GPU copies into) or not (a suspend to host memory copies through ring() instead). A slab
  // the VM's bound has no room for stays unpinned (slower copies); a ring is not made then
  // (ring_refused()).
  PinnedStaging(const DriverApi& api, uint64_t expected_bytes, bool pinned = true, PinCharge charge = {})
      : api_(api),
        slab_bytes_(std::clamp<uint64_t>(expected_bytes + (expected_bytes >> 4) + (64ull << 20), 64ull << 20,
                                         1ull << 30)),
        pinning_(pinned),
        charge_(std::move(charge)) {}
  ~PinnedStaging() {
    drop_ring();
    for (auto& [start, slab] : slabs_) {
      if (slab.pinned) unpin(reinterpret_cast<void*>(start), slab.bytes);
      ::munmap(reinterpret_cast<void*>(start), slab.bytes);
    }
  }

  void* alloc(size_t bytes) {
    std::lock_guard l(mu_);
    bytes = (bytes + 4095) & ~size_t{4095};
    if (!current_ || slabs_[current_].used + bytes > slabs_[current_].bytes) {
      const uint64_t n = std::max<uint64_t>(slab_bytes_, bytes);
      const auto t0 = std::chrono::steady_clock::now();
      void* p = map_slab(n);
      if (!p) return nullptr;
      ::madvise(p, n, MADV_HUGEPAGE);  // a hint: fewer faults and pins
      Slab slab{n};
      slab.pinned = pinning_ && pin(p, n);
      pin_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      pinned_bytes_ += slab.pinned ? n : 0;
      current_ = reinterpret_cast<uint64_t>(p);
      slabs_[current_] = slab;
    }
    Slab& s = slabs_[current_];
    void* p = reinterpret_cast<std::byte*>(current_) + s.used;
    s.used += bytes;
    ++s.live;
    return p;
  }
  void free(void* p) {
    std::lock_guard l(mu_);
    auto it = slabs_.upper_bound(reinterpret_cast<uint64_t>(p));
    if (it == slabs_.begin()) return;
    --it;
    if (--it->second.live > 0 || it->first == current_) return;
    if (it->second.pinned) unpin(reinterpret_cast<void*>(it->first), it->second.bytes);
    ::munmap(reinterpret_cast<void*>(it->first), it->second.bytes);
    slabs_.erase(it);
  }
  // Unpins all (a suspend, before the contexts go: the state stays unpinned; a resume copies
  // it back through a ring) or pins them again.
  void set_pinned(bool on) {
    std::lock_guard l(mu_);
    pinning_ = on;
    for (auto& [start, slab] : slabs_) {
      if (slab.pinned == on) continue;
      void* p = reinterpret_cast<void*>(start);
      slab.pinned = on ? pin(p, slab.bytes) : (unpin(p, slab.bytes), false);
    }
  }
  // A pinned ring of `bytes` for Session::suspend (empty when it cannot be pinned); it goes
  // with drop_ring(), before the contexts do.
  std::span<std::byte> ring(size_t bytes) {
    std::lock_guard l(mu_);
    if (ring_.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      void* p = map_slab(bytes);
      if (!p) return {};
      ::madvise(p, bytes, MADV_HUGEPAGE);
      if (charge_.charge && !charge_.charge(bytes)) {
        ring_refused_ = true;
        ::munmap(p, bytes);
        return {};
      }
      if (api_.cuMemHostRegister_v2(p, bytes, CU_MEMHOSTREGISTER_PORTABLE) != CUDA_SUCCESS) {
        if (charge_.refund) charge_.refund(bytes);
        ::munmap(p, bytes);
        return {};
      }
      ring_ = {static_cast<std::byte*>(p), bytes};
      pin_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      pinned_bytes_ += bytes;
    }
    return ring_;
  }
  void drop_ring() {
    std::lock_guard l(mu_);
    if (ring_.empty()) return;
    unpin(ring_.data(), ring_.size());
    ::munmap(ring_.data(), ring_.size());
    ring_ = {};
  }
  // Time spent mapping and pinning slabs in alloc() (a part of the device memory phase).
  std::string pin_summary() {
    std::lock_guard l(mu_);
    char b[96];
    std::snprintf(b, sizeof b, "%llu MiB of staging mapped and pinned in %.0f ms",
                  static_cast<unsigned long long>(pinned_bytes_ >> 20), pin_seconds_ * 1000);
    return b;
  }
  // Whether ring() made none because the VM's host memory bound had no room for it.
  bool ring_refused() {
    std::lock_guard l(mu_);
    return ring_refused_;
  }
  state::StagingAllocator allocator() {
    auto self = shared_from_this();
    return {[self](size_t n) { return self->alloc(n); }, [self](void* p) { self->free(p); }};
  }

 private:
  struct Slab {
    uint64_t bytes = 0, used = 0, live = 0;
    bool pinned = false;
  };
  const DriverApi& api_;
  const uint64_t slab_bytes_;
  std::mutex mu_;
  std::map<uint64_t, Slab> slabs_;
  uint64_t current_ = 0;
  bool pinning_ = true;
  // Pins [p, p + bytes) if the VM's bound has room; unpins and refunds (mu_ held).
  bool pin(void* p, uint64_t bytes) {
    if (charge_.charge && !charge_.charge(bytes)) return false;
    if (api_.cuMemHostRegister_v2(p, bytes, CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS) return true;
    if (charge_.refund) charge_.refund(bytes);
    return false;
  }
  void unpin(void* p, uint64_t bytes) {
    api_.cuMemHostUnregister(p);
    if (charge_.refund) charge_.refund(bytes);
  }
  PinCharge charge_;
  bool ring_refused_ = false;
  std::span<std::byte> ring_;
  double pin_seconds_ = 0;
  uint64_t pinned_bytes_ = 0;
};

namespace {
// Copy threads of a suspend to or resume from host memory (and a restore from a file).
int64_t copy_threads() {
  const int64_t threads = vmrpc::knobs::kSuspendCopyThreads.get();
  return threads > 0 ? threads : std::clamp<int64_t>(std::thread::hardware_concurrency(), 2, 16);
}
}  // namespace

PinCharge Session::pin_charge() {
  if (!account_) return {};
  return {[this](uint64_t bytes) { return account_->charge(bytes, VmLedger::kHost); },
          [this](uint64_t bytes) { account_->refund(bytes, VmLedger::kHost); }};
}

std::string Session::host_bound_summary() const {
  if (!limits_.ledger) return "no bound";
  const uint64_t limit = limits_.ledger->limit(VmLedger::kHost), used = limits_.ledger->used(VmLedger::kHost);
  return std::to_string(limit >> 20) + " MiB, " + std::to_string((limit - std::min(limit, used)) >> 20) + " MiB left";
}

std::vector<std::byte> Session::control(std::span<const std::byte> request, const Progress& progress) {
  namespace cc = client_control;
  using cc::Op;
  using clock = std::chrono::steady_clock;
  cc::Request req;
  cc::Reply reply;
  const auto t0 = clock::now();
  auto finish = [&]() {
    reply.status = status();
    reply.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return cc::encode(reply);
  };
  if (!cc::decode(request, &req)) {
    reply.error = "malformed control request";
    return finish();
  }
  // Progress at chunk granularity, at most ~20 messages a second.
  auto last = clock::now() - std::chrono::seconds(1);
  auto report = [&](const char* phase) {
    return [&, phase](uint64_t done, uint64_t total) {
      const auto now = clock::now();
      if (!progress || (now - last < std::chrono::milliseconds(50) && done != total)) return;
      last = now;
      progress(cc::encode(cc::Progress{phase, done, total}));
    };
  };
  std::string why;
  switch (req.op) {
    case Op::kStatus:
      reply.ok = true;
      break;
    case Op::kSuspend:
    case Op::kSave: {
      if (suspended_) {
        reply.error = "already suspended";
        break;
      }
      // Before anything below: pinning the staging is an unsafe call for a stream capture this
      // thread has open (the driver invalidates it): a capture that cannot be carried refuses
      // the suspend, one that can is ended here (suspend() carries it; a suspend that fails
      // begins it again where it was).
      if (const std::string g = graphs_block_suspend(); !g.empty()) {
        VMRPC_LOG(kWarn, "stub", log_tag_ + ": suspend failed, the client runs on: " + g);
        reply.error = g;
        reply.retry = suspend_window_open();
        break;
      }
      if (!end_captures(&why)) {
        VMRPC_LOG(kWarn, "stub", log_tag_ + ": suspend failed, the client runs on: " + why);
        reply.error = why;
        break;
      }
      struct BeginAgain {
        Session* s;
        ~BeginAgain() { s->begin_ended_captures(); }  // nothing left to begin after a suspend
      } begin_again{this};
      state::SinkOptions opts;
      opts.expected_bytes = arena_ ? arena_->physical_bytes() : 0;
      opts.progress = report(req.op == Op::kSave ? "save" : "suspend");
      // The GPU copies into a small pinned ring, and several threads checksum it and copy it
      // out (Sink::commit_copy): to host memory into the state's buffers, which stay
      // unpinned; to a file each chunk at its offset, in parallel (FileSink: through a mapping
      // on tmpfs, whose write() admits one writer at a time). The file sink's few staging
      // buffers (small records; a client on several GPUs copies straight into them) are pinned.
      const bool to_memory = req.op == Op::kSuspend;
      const int64_t threads = copy_threads();
      const uint64_t pinned_bytes = to_memory ? 0 : opts.staging_buffers * (opts.staging_bytes + 4096);
      auto staging = std::make_shared<PinnedStaging>(api_, to_memory ? opts.expected_bytes : pinned_bytes, !to_memory,
                                                     pin_charge());
      opts.allocator = staging->allocator();
      std::span<std::byte> ring;
      std::unique_ptr<state::Sink> sink;
      state::MemorySink* memory = nullptr;
      // A file: striped over one file per copy thread (or VMCUDA_STATE_STRIPES).
      opts.stripes = static_cast<unsigned>(std::clamp<int64_t>(
          vmrpc::knobs::kStateStripes.get() > 0 ? vmrpc::knobs::kStateStripes.get() : threads, 1, state::kMaxStripes));
      if (threads > 1) {
        opts.copy_threads = static_cast<unsigned>(threads);
        const size_t ring_bytes = static_cast<size_t>(threads) * 2 * kRingSlotBytes;
        ring = staging->ring(ring_bytes);
        if (staging->ring_refused()) {
          // Pinned host memory like the program's own: a suspend the VM's bound has no room for
          // is refused before anything is touched.
          reply.error = "the suspend's pinned staging ring (" + std::to_string(ring_bytes >> 20) + " MiB, " +
                        std::to_string(threads) + " copy threads) does not fit the VM's host memory bound (" +
                        host_bound_summary() + "); the program runs on. Raise vmcuda-stub "
                        "--host-memory-quota-mib, or suspend with fewer copy threads (VMCUDA_SUSPEND_THREADS)";
          VMRPC_LOG(kWarn, "stub", log_tag_ + ": suspend refused: " + reply.error);
          break;
        }
      }
      if (to_memory) {
        auto m = std::make_unique<state::MemorySink>(opts);
        memory = m.get();
        sink = std::move(m);
      } else {
        auto f = std::make_unique<state::FileSink>(req.path, opts);
        VMRPC_LOG(kInfo, "stub", log_tag_ + ": saving to " + req.path + " (" + std::to_string(threads) +
                                     " copy threads, " + std::to_string(f->stripes()) + " stripes, chunks " +
                                     f->chunk_writes() + ")");
        sink = std::move(f);
      }
      // suspend() finishes the sink (a file: flushed, synced, renamed into place) before it
      // releases anything: a save that fails leaves the client running.
      if (!suspend(*sink, &why, [&] { staging->drop_ring(); staging->set_pinned(false); }, ring)) {
        reply.error = why;
        reply.retry = suspend_window_open();
        break;
      }
      reply.state_bytes = sink->bytes_written();
      VMRPC_LOG(kInfo, "stub", log_tag_ + ": " + staging->pin_summary());
      if (memory) {
        suspended_state_ = memory->take_stream();
        suspended_staging_ = staging;
        suspended_file_.clear();
      } else {
        suspended_state_.reset();
        suspended_file_ = req.path;
      }
      reply.ok = true;
      break;
    }
    case Op::kSuspendWindow:
      reply.ok = !suspend_window_open();
      if (!reply.ok) {
        reply.retry = true;
        reply.error = graphs_block_suspend();
        if (reply.error.empty()) reply.error = nvobj_blocks_suspend();
      }
      break;
    case Op::kIpcAttach:
      if (suspended_) {
        reply.error = "suspended";
        break;
      }
      reply.ok = ipc_attach(&why);
      if (!reply.ok) reply.error = why;
      break;
    case Op::kResume:
    case Op::kRestore: {
      if (!suspended_ && req.op == Op::kResume) {
        reply.error = "not suspended";
        break;
      }
      if (!suspended_ && vol_.size() != 0) {
        reply.error = "the client is running; a state file is restored into a new client only";
        break;
      }
      // A move: the same number of devices (the state names each one's model, which resume()
      // compares with the new GPU's). Kept only if the resume succeeds.
      const std::vector<int> devices_before = devices_;
      if (!req.devices.empty()) {
        if (req.devices.size() != devices_.size()) {
          reply.error = "the client has " + std::to_string(devices_.size()) + " GPU(s), the move names " +
                        std::to_string(req.devices.size());
          break;
        }
        devices_ = req.devices;
      }
      const auto progress_fn = report(req.op == Op::kRestore ? "restore" : "resume");
      auto open_source = [&]() -> std::unique_ptr<state::Source> {
        if (req.op == Op::kRestore) return std::make_unique<state::FileSource>(req.path, state::Limits{}, progress_fn);
        if (suspended_state_) {
          auto state = suspended_state_;
          if (cc::testing::resume_state_override) state = cc::testing::resume_state_override(state);
          return std::make_unique<state::MemorySource>(state, state::Limits{}, progress_fn);
        }
        if (!suspended_file_.empty())
          return std::make_unique<state::FileSource>(suspended_file_, state::Limits{}, progress_fn);
        return nullptr;
      };
      auto source = open_source();
      if (!source) {
        reply.error = "no saved state to resume from";
        break;
      }
      // The state's buffers (or the file) stay as they are: copy threads verify its chunks
      // and copy them into a small pinned ring the GPU copies to the device from (the
      // suspend's ring in reverse), pinned once the contexts and modules exist.
      const int64_t threads = copy_threads();
      // (A ring the VM's host memory bound has no room for is not made: the copy goes without.)
      auto ring_staging = std::make_shared<PinnedStaging>(api_, 0, false, pin_charge());
      ResumeCopy copy;
      copy.ring = [&] {
        const size_t slots = std::clamp<size_t>(static_cast<size_t>(threads) * 2, kResumeRingSlots, kMaxRingSlots);
        return ring_staging->ring(slots * kRingSlotBytes);
      };
      copy.drop_ring = [&] { ring_staging->drop_ring(); };
      copy.threads = static_cast<unsigned>(threads);
      copy.stacks = ring_staging->allocator();
      bool ok = resume(*source, region_, &why, copy, true);
      if (!ok && module_data_moved()) {
        // Once more with the memory first (resume's comment says why): nothing pinned before
        // the modules, so no ring.
        source = open_source();
        std::string again;
        ok = source && resume(*source, region_, &again, {}, false);
        if (!ok) why += "; with the memory first: " + again;
      }
      if (!ok) {
        devices_ = devices_before;
        reply.error = why;
        break;
      }
      suspended_state_.reset();
      suspended_staging_.reset();
      suspended_file_.clear();
      reply.ok = true;
      break;
    }
  }
  return finish();
}

}  // namespace vmcuda::host
