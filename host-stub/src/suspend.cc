// Suspend and resume of one client (DESIGN.md, Suspend/resume; docs/snapshots.md). The
// slot is held at a call boundary (vmrpc SlotGate) while these run on its service thread.
//
// suspend(): everything of the client is drained, then written to a state stream (host
// memory or a state file): a header (the devices it used and where it stood), the arena's
// layout, every VOL entry parents first (what recreating it needs, module images
// included), each arena mapping's bytes, each module variable's bytes, each array's texels
// and each VMM physical allocation's bytes (once, whatever maps it). Only once all
// of that is written are the driver objects, the device memory and the contexts released:
// a suspend that fails leaves the client running as before.
//
// resume(): reads such a stream (untrusted when it comes from a file: every field is
// checked) and recreates the client: contexts on its devices (the same GPUs, or others of
// the same model), the arena at the same addresses (every device pointer keeps its
// value), memory contents, modules, functions, variables, streams, events, registrations,
// limits, peer access, arrays, the guest's VMM reservations, physical allocations and
// mappings (at the same addresses, offsets and access), cuBLAS, cuBLASLt, cuFFT, cuRAND,
// cuDNN, cuSPARSE and cuSOLVER objects, behind
// the same guest handles, and texture and surface objects with their old values (arrays.cc).
// A resume that fails releases what it
// made and stays suspended; the stream is left as it was, for a retry.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "client_control.h"
#include "module_symbols.h"
#include "graph_state.h"
#include "ipc_registry.h"
#include "arrays.h"
#include "session.h"
#include "state_stream.h"
#include "vmcuda/api/cublaslt_abi.h"
#include "vmcuda/api/cudnn_abi.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

namespace {

// Record types of a client's state (state_stream.h carries them).
enum RecordType : uint32_t {
  kClientHeader = 1,
  kArenaLayout = 2,
  kObjectRecord = 3,
  kMappingData = 4,  // blob, id = the mapping's VA
  kGlobalData = 5,   // id = the variable's device pointer
  kClientEnd = 6,    // ends one client's records (several clients may share a file)
  kArrayData = 7,    // blob, id = the array's object id: its texels (every level), packed
  kVmmData = 8,      // blob, id = a physical allocation's (VmmAllocation) object id: its bytes
  kIpcExports = 9,   // what the client exported to other programs of the VM, under which tokens
  kStreamCaptures = 10,  // the stream captures it had open (graph.cc): each begun again at the resume
};
// 2: events carry their time before the suspend; 3: streams carry the attributes set on them;
// 4: graphs, their nodes and executable graphs (graph_state.h); 5: virtual memory objects
// (reservations, physical allocations with their bytes, mappings with their access) and the
// header's last physical allocation handle; 6: cuFFT plans (the calls that made each);
// 7: cuBLASLt objects with their attributes; 8: cuRAND generators (the steps that brought each
// where it stands) and cuDNN handles and backend descriptors (their creation, attributes and
// finalization); 9: IPC between the VM's programs (the memory and events a client opened of
// others', with their tokens; its exports, kIpcExports)
// 10: cuSPARSE and cuSOLVER objects (the calls that made and set each, NvobjStep)
// 11: cuDNN's legacy descriptors (each object's legacy kind, and a legacy descriptor's
// settings as the calls' arguments)
// 12: the per-thread streams with the attributes set on them (PerThreadStream entries)
// 13: the attributes set on the NULL stream (NullStream entries), an executable graph's disabled
// nodes, a texture object's resource view
// 14: cuDNN's LRN, op-tensor and reduce-tensor descriptors (legacy kinds 6-8, their settings)
// 15: cuDNN's spatial transformer and CTC loss descriptors (legacy kinds 9 and 10, their settings)
// 16: cuSPARSE's bsric02, bsrsv2, bsrsm2 and prune info objects (object types 11-14, their
// analyses and NnzByPercentage as recorded calls, some numbered in cuSPARSE's second area 0x27)
// 17: cuDNN's RNN and RNN data descriptors (legacy kinds 11-12, their settings; dropout
// descriptors' settings replayed first)
// 18: open stream captures (kStreamCaptures: each capture's stream, mode, id, graph and the
// stream's dependencies in it)
constexpr uint32_t kClientStateVersion = 18;
// A kStreamCaptures record: count (u32), then each capture's stream (u64, the guest's handle),
// device (i32), mode (u32: thread-local or relaxed), id (u64, the guest's), the program's graph
// it captures into (u64; 0: its own graph follows, as write_graph writes it), its
// dependencies (u32 count, then each a u32 node index of that graph).
constexpr uint32_t kMaxSavedCaptures = 4096;
// A kIpcExports entry: kind (u8), what (u64: allocation pointer, event or pool handle),
// device (i32: a pool's), token (16 bytes).
constexpr size_t kSavedIpcExportBytes = 1 + 8 + 4 + 16;
enum SavedIpcExport : uint8_t { kIpcExportMemory = 1, kIpcExportEvent = 2, kIpcExportPool = 3 };

void put_token(state::ByteWriter& w, const std::array<uint8_t, 16>& t) {
  uint64_t v[2];
  std::memcpy(v, t.data(), sizeof v);
  w.put_u64(v[0]);
  w.put_u64(v[1]);
}
bool get_token(state::ByteReader& r, std::array<uint8_t, 16>* t) {
  uint64_t v[2] = {};
  r.get_u64(&v[0]);
  if (!r.get_u64(&v[1])) return false;
  std::memcpy(t->data(), v, sizeof v);
  return true;
}
// A saved mapping's access list names each of the client's devices at most once; a saved
// allocation's references are what a program could hold (cuMemRetainAllocationHandle).
constexpr uint32_t kMaxSavedVmmRefs = 1u << 30;
// CUstreamAttrID has 5 stream attributes: a saved stream names at most that many.
constexpr uint32_t kMaxSavedStreamAttributes = 5;
// CU_RES_VIEW_FORMAT_UNSIGNED_BC7, the last CUresourceViewFormat (cuda.h 13.0).
constexpr uint32_t kLastResourceViewFormat = 0x22;
// cublasLt.h (13.0) has fewer than 40 attributes of any one kind of object.
constexpr uint32_t kMaxSavedLtAttributes = 64;

std::span<const std::byte> as_bytes(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

// What identifies a GPU model for a resume elsewhere: its name and memory size.
std::string Session::device_model(int guest_device) const {
  CUdevice dev;
  char name[256] = {};
  size_t total = 0;
  if (api_.cuDeviceGet(&dev, devices_[guest_device]) != CUDA_SUCCESS) return "?";
  api_.cuDeviceGetName(name, sizeof name - 1, dev);
  api_.cuDeviceTotalMem_v2(&total, dev);
  return std::string(name) + " (" + std::to_string(total >> 20) + " MiB)";
}

std::vector<std::byte> Session::snapshot() const {
  client_control::Reply r;
  r.ok = true;
  r.status.slot = info_.slot;
  r.status.owner_tag = info_.owner_tag;
  r.status.suspended = published_suspended_.load(std::memory_order_relaxed);
  r.status.device_bytes = published_device_bytes_.load(std::memory_order_relaxed);
  r.status.allocated_bytes = published_allocated_.load(std::memory_order_relaxed);
  r.status.objects = published_objects_.load(std::memory_order_relaxed);
  r.status.launches = launches_.load(std::memory_order_relaxed);
  r.status.module_bytes = published_module_bytes_.load(std::memory_order_relaxed);
  for (size_t l = 0; l < kRemotedLibraries; ++l) r.status.library_calls[l] = library_calls_[l].load(std::memory_order_relaxed);
  {
    std::lock_guard l(published_mu_);
    r.status.devices = published_devices_;
    r.status.program = program_;
  }
  return client_control::encode(r);
}

ClientStatus Session::status() const {
  ClientStatus s;
  s.slot = info_.slot;
  s.owner_tag = info_.owner_tag;
  s.suspended = suspended_;
  s.device_bytes = arena_ ? arena_->physical_bytes() : 0;  // none while suspended
  s.allocated_bytes = allocated_;
  s.objects = vol_.size();
  s.devices = devices_;
  s.launches = launches_.load(std::memory_order_relaxed);
  s.module_bytes = module_bytes_;
  for (size_t l = 0; l < kRemotedLibraries; ++l) s.library_calls[l] = library_calls_[l].load(std::memory_order_relaxed);
  std::lock_guard l(published_mu_);
  s.program = program_;
  return s;
}

namespace {
// One recorded cuDNN step of a state file's object record, as the suspend wrote it (a legacy
// descriptor's setting or a backend descriptor's step; the caller checks it).
CudnnStep read_cudnn_step(state::ByteReader& r) {
  CudnnStep step;
  uint64_t count = 0;
  r.get_u64(&step.seq);
  r.get_u8(&step.op);
  r.get_i32(&step.name);
  r.get_i32(&step.type);
  r.get_u64(&count);
  r.get_bytes(&step.elements, api::kCudnnMaxAttributeBytes);
  step.count = static_cast<int64_t>(count);
  return step;
}

// Where a suspend's or resume's time goes, for its log line: "quiesce 3, memory 40 (26.8 GB/s), ..." ms.
class Phases {
 public:
  using clock = std::chrono::steady_clock;
  // Ends the phase running since the last mark (or the start) as `name`.
  void mark(const char* name, uint64_t bytes = 0) {
    const auto now = clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    char b[96];
    if (bytes && s > 0)
      std::snprintf(b, sizeof b, "%s%s %.0f (%.1f GB/s)", text_.empty() ? "" : ", ", name, s * 1000, bytes / s / 1e9);
    else
      std::snprintf(b, sizeof b, "%s%s %.0f", text_.empty() ? "" : ", ", name, s * 1000);
    text_ += b;
  }
  std::string text() const { return text_ + " ms"; }

 private:
  clock::time_point last_ = clock::now();
  std::string text_;
};

// Device memory through a pinned ring of kSlotBytes slots, both ways, with asynchronous
// copies on a stream of its own and an event per slot that says when the GPU is done with
// it. The GPU reads and writes pinned memory at full speed (55 GB/s on the H100) and the
// host-side work runs on several cores, where pinning every byte of the state or
// checksumming it on one core ran at 3-5 GB/s (bench/staging_probe.cu).
//   suspend, copy(): device-to-host copies into the slots, several in flight, while the
//     sink's threads copy earlier slots out into its buffers and checksum them
//     (Sink::commit_copy).
//   resume, fill() and finish(): copy threads (state::CopyThreads) read the stream's chunks,
//     verify their checksums and copy them into slots (Source::copy_chunk); each slot then
//     goes to the device by a host-to-device copy, in stream order, and is reused once its
//     event completed. Only verified bytes reach the device; a chunk that fails stops it.
// Its stream and events are one context's: drop() before switching devices or releasing it.
class RingCopier {
 public:
  static constexpr size_t kSlotBytes = kRingSlotBytes;
  // The slots a resume needs: two of the largest chunks (a chunk takes adjacent slots).
  static constexpr size_t kFillSlots = kResumeRingSlots;
  RingCopier(const DriverApi& api, std::span<std::byte> ring, state::CopyThreads* threads = nullptr)
      : api_(api), ring_(ring), threads_(threads) {
    slots_ = std::min<size_t>(ring.size() / kSlotBytes, kMaxSlots);
  }
  ~RingCopier() {
    abort();
    drop();
  }
  bool usable() const { return slots_ >= 2; }
  bool usable_for_fill() const { return threads_ && slots_ >= kFillSlots; }
  // The guest device whose context its stream and events are of (-1: none yet).
  int device() const { return ready_ ? device_ : -1; }

  // One mapping (the current context's) as the open blob's chunks.
  bool copy(state::Sink& out, CUdeviceptr va, uint64_t bytes, std::string* why) {
    if (!ready_ && !prepare(-1, "the suspend's", why)) return false;
    const uint64_t chunks = (bytes + kSlotBytes - 1) / kSlotBytes;
    const uint64_t lag = std::max<uint64_t>(1, slots_ / 4);  // copies in flight on the GPU
    auto size_of = [&](uint64_t k) { return static_cast<size_t>(std::min<uint64_t>(kSlotBytes, bytes - k * kSlotBytes)); };
    auto hand_over = [&](uint64_t k) {  // chunk k's copy arrived: to the sink's threads
      const size_t s = k % slots_;
      if (CUresult e = api_.cuEventSynchronize(events_[s]); e != CUDA_SUCCESS)
        return *why = "copying device memory at " + hex(va + k * kSlotBytes) + " failed: " + describe(api_, e), false;
      tickets_[s] = out.commit_copy(std::span<const std::byte>(ring_.data() + s * kSlotBytes, size_of(k)));
      return tickets_[s] != 0 || (*why = out.error(), false);
    };
    for (uint64_t k = 0; k < chunks; ++k) {
      const size_t s = k % slots_;
      // The slot's last chunk must be out of it first.
      if (tickets_[s] && !out.wait_copy(tickets_[s])) return *why = out.error(), false;
      tickets_[s] = 0;
      CUresult e = api_.cuMemcpyDtoHAsync_v2(ring_.data() + s * kSlotBytes, va + k * kSlotBytes, size_of(k), stream_);
      if (e == CUDA_SUCCESS) e = api_.cuEventRecord(events_[s], stream_);
      if (e != CUDA_SUCCESS)
        return *why = "copying device memory at " + hex(va + k * kSlotBytes) + " failed: " + describe(api_, e), false;
      if (k >= lag && !hand_over(k - lag)) return false;
    }
    for (uint64_t k = chunks > lag ? chunks - lag : 0; k < chunks; ++k)
      if (!hand_over(k)) return false;
    return true;
  }

  // The open blob of `in` (the contents of the mapping at `va`, `bytes`, on guest device
  // `device`, whose context is current) to the device: queued, read and verified by the
  // threads; finish() says when it is all there. Mappings follow each other without a
  // pause; a new device needs finish() and drop() first.
  bool fill(state::Source& in, int device, CUdeviceptr va, uint64_t bytes, std::string* why) {
    if (!ready_ && !prepare(device, "the resume's", why)) return false;
    if (device != device_) return *why = "the resume's copy ring is on another device", false;
    for (uint64_t off = 0;;) {
      state::Source::Chunk c;
      if (!in.next_chunk(&c, why)) return false;
      if (c.bytes == 0) return off == bytes || (*why = "the contents of the mapping at " + hex(va) + " are too short", false);
      if (c.bytes > bytes - off) return *why = "the contents of the mapping at " + hex(va) + " are too long", false;
      const size_t need = (c.bytes + kSlotBytes - 1) / kSlotBytes;  // adjacent: the ring's tail is skipped
      if (next_slot_ + need > slots_) next_slot_ = 0;
      for (size_t s = next_slot_; s < next_slot_ + need; ++s)
        if (!free_slot(in, s, why)) return false;
      auto job = std::make_unique<FillJob>();
      job->seq = ++jobs_started_;
      job->slot = next_slot_;
      job->slots = need;
      job->dst = va + off;
      job->chunk = c;
      for (size_t s = next_slot_; s < next_slot_ + need; ++s) slot_job_[s] = job->seq;
      FillJob* j = job.get();
      const state::Source* src = &in;
      const std::span<std::byte> dest = ring_.subspan(next_slot_ * kSlotBytes, c.bytes);
      jobs_.push_back(std::move(job));
      j->ticket = threads_->run([j, src, dest] { j->ok = src->copy_chunk(j->chunk, dest, &j->error); });
      next_slot_ = (next_slot_ + need) % slots_;
      off += c.bytes;
      // Chunks the threads are done with go to the GPU at once.
      while (!jobs_.empty() && threads_->finished(jobs_.front()->ticket))
        if (!retire(in, why)) return false;
    }
  }
  // Every chunk fill() queued verified and on the device.
  bool finish(state::Source& in, std::string* why) {
    while (!jobs_.empty())
      if (!retire(in, why)) return false;
    if (!ready_) return true;
    std::fill(std::begin(pending_), std::end(pending_), false);
    if (CUresult e = api_.cuStreamSynchronize(stream_); e != CUDA_SUCCESS)
      return *why = "writing device memory failed: " + describe(api_, e), false;
    return true;
  }
  // After a failure: no thread and no GPU copy uses the ring any more (errors ignored).
  void abort() {
    for (auto& j : jobs_) threads_->wait(j->ticket);
    jobs_.clear();
    if (ready_) api_.cuStreamSynchronize(stream_);
    std::fill(std::begin(pending_), std::end(pending_), false);
  }
  // Before the context goes (copies complete: after copy(), finish() or abort()).
  void drop() {
    for (size_t s = 0; s < slots_; ++s)
      if (events_[s]) api_.cuEventDestroy_v2(std::exchange(events_[s], nullptr));
    if (stream_) api_.cuStreamDestroy_v2(std::exchange(stream_, nullptr));
    ready_ = false;
  }

 private:
  static constexpr size_t kMaxSlots = kMaxRingSlots;
  struct FillJob {
    uint64_t seq = 0, ticket = 0;
    size_t slot = 0, slots = 0;
    CUdeviceptr dst = 0;
    state::Source::Chunk chunk;
    bool ok = false;  // the threads' result, read once the ticket finished
    std::string error;
  };
  bool prepare(int device, const char* whose, std::string* why) {
    CUresult e = api_.cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, 0);
    for (size_t s = 0; s < slots_ && e == CUDA_SUCCESS; ++s) e = api_.cuEventCreate(&events_[s], CU_EVENT_DISABLE_TIMING);
    if (e != CUDA_SUCCESS) {
      drop();
      return *why = std::string("cannot create ") + whose + " copy stream: " + describe(api_, e), false;
    }
    device_ = device;
    ready_ = true;
    return true;
  }
  // The oldest chunk fill() queued: verified (else the source is rejected) and sent to the
  // device from its slots, whose events then say when they are free again.
  bool retire(state::Source& in, std::string* why) {
    FillJob& j = *jobs_.front();
    threads_->wait(j.ticket);
    if (!j.ok) {
      in.reject(j.error);
      return *why = j.error, false;
    }
    CUresult e = api_.cuMemcpyHtoDAsync_v2(j.dst, ring_.data() + j.slot * kSlotBytes, j.chunk.bytes, stream_);
    for (size_t s = j.slot; s < j.slot + j.slots && e == CUDA_SUCCESS; ++s) {
      e = api_.cuEventRecord(events_[s], stream_);
      pending_[s] = e == CUDA_SUCCESS;
      slot_dst_[s] = j.dst;
    }
    if (e != CUDA_SUCCESS) return *why = "writing device memory at " + hex(j.dst) + " failed: " + describe(api_, e), false;
    jobs_.pop_front();
    ++jobs_retired_;
    return true;
  }
  // Slot s for the next chunk: its last chunk sent, and its copy to the device complete.
  bool free_slot(state::Source& in, size_t s, std::string* why) {
    while (jobs_retired_ < slot_job_[s])
      if (!retire(in, why)) return false;
    if (pending_[s]) {
      pending_[s] = false;
      if (CUresult e = api_.cuEventSynchronize(events_[s]); e != CUDA_SUCCESS)
        return *why = "writing device memory at " + hex(slot_dst_[s]) + " failed: " + describe(api_, e), false;
    }
    return true;
  }

  const DriverApi& api_;
  std::span<std::byte> ring_;
  state::CopyThreads* threads_;
  size_t slots_ = 0;
  bool ready_ = false;
  int device_ = -1;
  CUstream stream_ = nullptr;
  CUevent events_[kMaxSlots] = {};
  uint64_t tickets_[kMaxSlots] = {};  // copy(): the sink's copy out of each slot
  // fill(): the chunks queued (oldest first), the last one each slot held, its events.
  std::deque<std::unique_ptr<FillJob>> jobs_;
  uint64_t jobs_started_ = 0, jobs_retired_ = 0;
  size_t next_slot_ = 0;
  uint64_t slot_job_[kMaxSlots] = {};
  bool pending_[kMaxSlots] = {};
  CUdeviceptr slot_dst_[kMaxSlots] = {};
};
}  // namespace

// Each timed event's GPU time before now (the suspend), in ms, by object id: measured to an
// event recorded now for one recorded since the last resume, its earlier time plus the time
// since that resume for one recorded before it. Events with no known time are left out.
std::map<ObjectId, double> Session::event_times_before_suspend() {
  std::map<ObjectId, double> times;
  for (size_t d = 0; d < contexts_.size(); ++d) {
    if (!contexts_[d]) continue;
    make_current(static_cast<int>(d));
    CUevent now = nullptr;
    if (api_.cuEventCreate(&now, 0u /* CU_EVENT_DEFAULT */) != CUDA_SUCCESS) continue;
    if (api_.cuEventRecord(now, nullptr) == CUDA_SUCCESS && api_.cuEventSynchronize(now) == CUDA_SUCCESS) {
      float since_resume = -1;
      if (d < resume_marks_.size() && resume_marks_[d] &&
          api_.cuEventElapsedTime_v2(&since_resume, resume_marks_[d], now) != CUDA_SUCCESS)
        since_resume = -1;
      for (const auto& [handle, id] : vol_.of(ObjectKind::Event)) {
        const Object* o = vol_.get(id);
        const EventObject& ev = o->as<EventObject>();
        if (o->device != static_cast<int>(d) || (ev.flags & CU_EVENT_DISABLE_TIMING) || !ev.recorded) continue;
        float ms = 0;
        if (!ev.timing_lost) {
          if (api_.cuEventElapsedTime_v2(&ms, ev.event, now) == CUDA_SUCCESS && ms >= 0) times[id] = ms;
        } else if (!std::isnan(ev.before_suspend_ms) && since_resume >= 0) {
          times[id] = ev.before_suspend_ms + since_resume;
        }
      }
    }
    api_.cuEventDestroy_v2(now);
  }
  make_current(current_);
  return times;
}

bool Session::suspend(state::Sink& out, std::string* why, const std::function<void()>& before_release,
                      std::span<std::byte> ring) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Phases phases;
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": suspend failed, the client runs on: " + w);
    make_current(current_);
    return false;
  };
  if (suspended_) return fail("the client is already suspended");
  // An open capture that cannot be carried (a synchronize would also invalidate it) or an
  // executable graph whose changes its mirror could not follow: refused before anything is
  // touched. Captures that can be are ended (client_control ended them already, before it
  // pinned its staging), begun again where they were if the suspend fails.
  if (const std::string g = graphs_block_suspend(); !g.empty()) return fail(g);
  // Begun again here only if ended here: captures client_control ended are begun again by it,
  // after it unpinned its staging (an unpin would invalidate a capture begun again before).
  struct BeginAgain {
    Session* s;
    bool ended_here;
    ~BeginAgain() {
      if (ended_here) s->begin_ended_captures();  // none left after a suspend that went through
    }
  } begin_again{this, ended_captures_.empty()};
  if (std::string w; !end_captures(&w)) return fail(w);
  // Every graph and executable graph (its mirror) described now, so that one the suspend
  // cannot carry refuses it before anything is touched (graph_state.cc).
  struct Described {
    GraphDesc desc;
    std::vector<CUgraphNode> nodes;  // in the description's order
  };
  std::map<ObjectId, Described> graphs;
  for (ObjectKind k : {ObjectKind::Graph, ObjectKind::GraphExec})
    for (const auto& [handle, id] : vol_.of(k)) {
      const Object* o = vol_.get(id);
      make_current(o->device);
      Described& d = graphs[id];
      const CUgraph g = k == ObjectKind::Graph ? o->as<GraphObject>().graph : o->as<GraphExecObject>().mirror;
      std::string w;
      if (!describe_graph(g, &d.desc, &d.nodes, &w))
        return fail(std::string(k == ObjectKind::Graph ? "graph " : "executable graph ") + std::to_string(handle) +
                    " cannot be saved: " + w + "; nothing was changed and the program runs on");
    }
  // The graphs of the captures ended above that are not the program's own graphs.
  std::vector<Described> capture_graphs(ended_captures_.size());
  for (size_t i = 0; i < ended_captures_.size(); ++i) {
    const EndedCapture& c = ended_captures_[i];
    make_current(c.device);
    std::string w;
    if (!c.into && !describe_graph(c.graph, &capture_graphs[i].desc, &capture_graphs[i].nodes, &w))
      return fail("the graph of the stream capture open on stream " + std::to_string(c.stream) + " cannot be saved: " + w +
                  "; nothing was changed and the program runs on");
  }
  make_current(current_);
  auto node_index = [&](ObjectId graph, CUgraphNode n) -> int64_t {
    const auto it = graphs.find(graph);
    if (it == graphs.end()) return -1;
    const auto& v = it->second.nodes;
    const auto at = std::find(v.begin(), v.end(), n);
    return at == v.end() ? -1 : at - v.begin();
  };
  // Texture and surface objects are carried with their values (arrays.cc), unless what one
  // reads is gone: refused then, before anything is touched.
  if (const std::string t = texture_objects_block_suspend(); !t.empty()) return fail(t);
  // IPC with other programs of the VM (ipc.cc) is carried: exports keep their tokens
  // (parked in the VM's table while suspended), imports are saved as where they are mapped
  // and which token they came from; the exporter's memory is saved once, with its own. An
  // import whose exporter freed it or ended (natively still readable) has nobody to make it
  // again at the resume: refused, naming it, before anything is touched.
  if (limits_.ipc) {
    std::vector<std::string> orphans;
    // (One not mapped or opened again since a resume, whose exporter did not come back, is
    // carried as it was: suspended again, it waits for its exporter.)
    for (const auto& [ptr, id] : vol_.of(ObjectKind::IpcMemory))
      if (const auto& m = vol_.get(id)->as<IpcMemoryObject>(); m.mapped && !limits_.ipc->known(m.token))
        orphans.push_back("memory opened at " + hex(ptr));
    for (const auto& [handle, id] : vol_.of(ObjectKind::Event))
      if (const auto& e = vol_.get(id)->as<EventObject>(); e.imported && e.event && !limits_.ipc->known(e.ipc_token))
        orphans.push_back("interprocess event " + hex(handle));
    if (!orphans.empty()) {
      std::string list;
      for (const auto& o : orphans) list += (list.empty() ? "" : ", ") + o;
      return fail("the program holds another program's " + list +
                  ", which that program freed, destroyed or ended with: a resume could not make it again. "
                  "Suspend once it is closed (cudaIpcCloseMemHandle, cudaEventDestroy); nothing was changed");
    }
  }
  // A cuFFT plan or cuRAND generator whose record overflowed (nvlib.cc): refused.
  if (const std::string t = nvlib_block_suspend(); !t.empty()) return fail(t);
  // A cuDNN descriptor a resume could not make again (cudnn.cc): refused.
  if (const std::string t = cudnn_blocks_suspend(); !t.empty()) return fail(t);
  // Nor a cuSPARSE or cuSOLVER object whose recorded calls a resume could not replay (nvobj.cc).
  if (const std::string t = nvobj_blocks_suspend(); !t.empty()) return fail(t);
  // Quiesce: what was handed to the GPU's working thread, then every stream of every device.
  drain_posted(nullptr);
  if (CUresult e = synchronize_all(); e != CUDA_SUCCESS)
    return fail("the client's GPU work failed (" + describe(api_, e) + "); its state cannot be saved");
  phases.mark("quiesce");
  const std::map<ObjectId, double> event_times = event_times_before_suspend();

  // Every variable of every module, also those the program never named from host code
  // (they join the VOL as the ones it named did).
  for (const auto& [handle, id] : std::map<uint64_t, ObjectId>(vol_.of(ObjectKind::Module))) {
    Object* mod = vol_.get(id);
    const ModuleSymbols symbols = module_data_symbols(mod->as<ModuleObject>().image->span());
    if (symbols.skipped_entries)
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": module " + std::to_string(handle) + " has " +
                                   std::to_string(symbols.skipped_entries) +
                                   " compressed entries: only the variables the program named are saved");
    make_current(mod->device);
    for (const std::string& name : symbols.names) {
      CUdeviceptr ptr = 0;
      size_t bytes = 0;
      if (api_.cuModuleGetGlobal_v2(&ptr, &bytes, mod->as<ModuleObject>().module, name.c_str()) != CUDA_SUCCESS)
        continue;  // not a variable of the code the driver loaded for this device
      if (!vol_.find(ObjectKind::Global, ptr))
        vol_.add(ObjectKind::Global, mod->device, ptr, mod->id, GlobalObject{bytes, name});
    }
  }
  // Header: the devices (the model each must have at the resume), where the client stood.
  {
    state::ByteWriter w;
    w.put_u32(kClientStateVersion);
    w.put_u32(info_.slot);
    w.put_u32(info_.owner_tag);
    w.put_u32(static_cast<uint32_t>(devices_.size()));
    for (size_t d = 0; d < devices_.size(); ++d) w.put_string(device_model(static_cast<int>(d)));
    w.put_i32(current_);
    w.put_u64(allocated_);
    for (ObjectKind k : {ObjectKind::Module, ObjectKind::Function, ObjectKind::ManagedVar, ObjectKind::VmmAllocation})
      w.put_u64(vol_.last_handle(k));
    if (!out.put_record(kClientHeader, info_.slot, w.bytes())) return fail(out.error());
  }
  // The arena's layout, devices as guest indexes.
  const DeviceArena::Layout layout = arena_ ? arena_->layout() : DeviceArena::Layout{};
  auto guest_index = [&](int host_device) {
    for (size_t d = 0; d < devices_.size(); ++d)
      if (devices_[d] == host_device) return static_cast<int>(d);
    return 0;
  };
  {
    state::ByteWriter w;
    w.put_i32(layout.index);
    w.put_u32(static_cast<uint32_t>(layout.mappings.size()));
    for (const auto& m : layout.mappings) {
      w.put_u64(m.va);
      w.put_u64(m.bytes);
      w.put_i32(guest_index(m.device));
      w.put_u8(m.chunk);
      w.put_u32(static_cast<uint32_t>(m.free.size()));
      for (const auto& [off, n] : m.free) {
        w.put_u64(off);
        w.put_u64(n);
      }
    }
    w.put_u32(static_cast<uint32_t>(layout.blocks.size()));
    for (const auto& b : layout.blocks) {
      w.put_u64(b.ptr);
      w.put_u64(b.bytes);
      w.put_u64(b.mapping);
    }
    w.put_u32(static_cast<uint32_t>(layout.peers.size()));
    for (int p : layout.peers) w.put_i32(guest_index(p));
    if (!out.put_record(kArenaLayout, 0, w.bytes())) return fail(out.error());
  }
  // The object list, parents first.
  bool ok = true;
  std::string walk_error;
  vol_.walk_parents_first([&](Object& o) {
    if (!ok) return;
    state::ByteWriter w;
    w.put_u8(static_cast<uint8_t>(o.kind));
    w.put_u64(o.id);
    w.put_u64(o.parent);
    w.put_i32(o.device);
    w.put_u64(o.handle);
    switch (o.kind) {
      case ObjectKind::Context:
      case ObjectKind::PeerAccess:
        break;
      case ObjectKind::Allocation:
        w.put_u64(o.as<AllocationObject>().bytes);
        break;
      case ObjectKind::Module:
        // The image itself, also when it came from the cache: the state restores on a stub
        // without it.
        w.put_bytes(o.as<ModuleObject>().image->span());
        break;
      case ObjectKind::Function: {
        const auto& f = o.as<FunctionObject>();
        w.put_string(f.name);
        w.put_u32(static_cast<uint32_t>(f.params.size()));
        for (const auto& p : f.params) {
          w.put_u32(p.offset);
          w.put_u32(p.size);
        }
        w.put_u32(static_cast<uint32_t>(f.attributes.size()));
        for (const auto& [a, v] : f.attributes) {
          w.put_i32(a);
          w.put_i32(v);
        }
        w.put_i32(f.cache_config);
        break;
      }
      case ObjectKind::Global:
        w.put_u64(o.as<GlobalObject>().bytes);
        w.put_string(o.as<GlobalObject>().name);
        break;
      case ObjectKind::ManagedVar: {
        const auto& v = o.as<ManagedVarObject>();
        w.put_u64(v.shadow.offset);
        w.put_u64(v.shadow.bytes);
        w.put_bytes(as_bytes(v.last));
        w.put_string(v.name);
        break;
      }
      case ObjectKind::Stream:
      case ObjectKind::PerThreadStream:
      case ObjectKind::NullStream: {
        const auto& st = o.as<StreamObject>();
        w.put_u32(st.flags);
        w.put_i32(st.priority);
        w.put_u32(static_cast<uint32_t>(st.attributes.size()));
        for (const auto& [id, v] : st.attributes) {
          w.put_u32(id);
          w.put_u64(v.base_ptr);
          w.put_u64(v.num_bytes);
          w.put_u32(std::bit_cast<uint32_t>(v.hit_ratio));
          w.put_u32(v.hit_prop);
          w.put_u32(v.miss_prop);
          w.put_i32(v.value);
          w.put_u32(v.domain_default | uint32_t{v.domain_remote} << 8);
        }
        break;
      }
      case ObjectKind::Event: {
        w.put_u32(o.as<EventObject>().flags | (o.as<EventObject>().recorded ? kSavedEventRecorded : 0));
        const auto t = event_times.find(o.id);
        w.put_u64(std::bit_cast<uint64_t>(t == event_times.end() ? std::numeric_limits<double>::quiet_NaN() : t->second));
        // Opened from another program (cudaIpcOpenEventHandle): the token to open again.
        w.put_u8(o.as<EventObject>().imported ? 1 : 0);
        put_token(w, o.as<EventObject>().ipc_token);
        break;
      }
      case ObjectKind::HostRegistration:
        w.put_u64(o.as<HostRegistrationObject>().bytes);
        break;
      case ObjectKind::Limit:
        w.put_u64(o.as<LimitObject>().value);
        w.put_u64(o.as<LimitObject>().default_value);
        break;
      case ObjectKind::CacheConfig:
        w.put_i32(o.as<CacheConfigObject>().value);
        w.put_i32(o.as<CacheConfigObject>().default_value);
        break;
      case ObjectKind::Graph:
        write_graph(graphs.at(o.id).desc, w);
        break;
      case ObjectKind::GraphNode: {
        // Its place among its graph's nodes.
        const int64_t i = node_index(o.parent, o.as<GraphNodeObject>().node);
        if (i < 0) {
          walk_error = "graph node " + hex(o.handle) + " is not among its graph's nodes";
          ok = false;
          return;
        }
        w.put_u32(static_cast<uint32_t>(i));
        break;
      }
      case ObjectKind::GraphExec: {
        // Its flags, its mirror, and which of the mirror's nodes each node of the graph it
        // came from names (those of graphs still there).
        const auto& x = o.as<GraphExecObject>();
        w.put_u64(x.flags);
        write_graph(graphs.at(o.id).desc, w);
        std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> pairs;
        for (const auto& [key, m] : x.nodes) {
          const int64_t from = node_index(key.first, key.second), to = node_index(o.id, m);
          if (from >= 0 && to >= 0) pairs.emplace_back(key.first, static_cast<uint32_t>(from), static_cast<uint32_t>(to));
        }
        w.put_u32(static_cast<uint32_t>(pairs.size()));
        for (const auto& [g, from, to] : pairs) {
          w.put_u64(g);
          w.put_u32(from);
          w.put_u32(to);
        }
        // Its disabled nodes (cudaGraphNodeSetEnabled), by their place among the mirror's.
        w.put_u32(static_cast<uint32_t>(x.disabled.size()));
        for (CUgraphNode n : x.disabled) {
          const int64_t i = node_index(o.id, n);
          if (i < 0) {
            walk_error = "a disabled node of executable graph " + hex(o.handle) + " is not among its graph's nodes";
            ok = false;
            return;
          }
          w.put_u32(static_cast<uint32_t>(i));
        }
        break;
      }
      case ObjectKind::CublasHandle: {
        // Its settings (cublas.cc): a resume makes a new handle of the library with them.
        const auto& c = o.as<CublasHandleObject>();
        w.put_i32(c.pointer_mode);
        w.put_i32(c.math_mode);
        w.put_u64(c.stream);
        w.put_u64(c.workspace);
        w.put_u64(c.workspace_bytes);
        break;
      }
      case ObjectKind::VmmReservation:  // its first address is the handle
        w.put_u64(o.as<VmmReservationObject>().bytes);
        break;
      case ObjectKind::VmmAllocation:  // its bytes follow as a blob of their own (kVmmData)
        w.put_u64(o.as<VmmAllocationObject>().bytes);
        w.put_u32(o.as<VmmAllocationObject>().refs);
        break;
      case ObjectKind::VmmMapping: {  // its reservation is its parent
        const auto& m = o.as<VmmMappingObject>();
        w.put_u64(m.bytes);
        w.put_u64(m.offset);
        w.put_u64(m.allocation);
        w.put_u32(static_cast<uint32_t>(m.access.size()));
        for (const auto& [d, flags] : m.access) {
          w.put_i32(d);
          w.put_u32(flags);
        }
        break;
      }
      case ObjectKind::IpcMemory: {
        // Where it is mapped and which token it came from; its bytes are its exporter's.
        const auto& m = o.as<IpcMemoryObject>();
        put_token(w, m.token);
        w.put_u64(m.va);
        w.put_u64(m.mapping_bytes);
        w.put_u64(m.bytes);
        w.put_u32(m.opens);
        break;
      }
      case ObjectKind::CublasLt: {
        // What made it and every attribute set on it (cublaslt.cc): a resume makes it again.
        const auto& l = o.as<CublasLtObject>();
        w.put_i32(l.what);
        w.put_i32(l.compute_type);
        w.put_i32(l.data_type);
        w.put_u64(l.rows);
        w.put_u64(l.cols);
        w.put_u64(static_cast<uint64_t>(l.ld));
        w.put_u32(static_cast<uint32_t>(l.attributes.size()));
        for (const auto& [attr, value] : l.attributes) {
          w.put_i32(attr);
          w.put_bytes(std::span<const std::byte>(value));
        }
        break;
      }
      case ObjectKind::CufftPlan: {
        // The calls that made it and its settings (cufft.cc): a resume replays them.
        const auto& p = o.as<CufftPlanObject>();
        w.put_u64(p.stream);
        w.put_u64(p.work_area);
        w.put_u32(static_cast<uint32_t>(p.made_by.size()));
        for (const auto& [call, args] : p.made_by) {
          w.put_u32(call);
          w.put_bytes(args);
        }
        break;
      }
      case ObjectKind::CurandGenerator: {
        // The steps that brought it where it stands (curand.h): a resume replays them.
        const auto& g = o.as<CurandGeneratorObject>();
        w.put_u64(g.stream);
        w.put_u32(static_cast<uint32_t>(g.made_by.size()));
        for (const CurandStep& step : g.made_by) {
          w.put_u32(step.call);
          w.put_u64(step.repeat);
          w.put_bytes(step.args);
        }
        break;
      }
      case ObjectKind::Cudnn: {
        // What it is and the steps that made it (cudnn.cc): a resume makes it and replays them.
        const auto& d = o.as<CudnnObject>();
        w.put_u8(d.retired ? 2 : d.handle ? 1 : 0);  // a descriptor, a handle, a retired descriptor
        w.put_i32(d.type);
        w.put_i32(d.legacy);  // a legacy descriptor's kind (-1: a handle or backend descriptor)
        w.put_u64(d.stream);
        w.put_u32(static_cast<uint32_t>(d.steps.size()));
        for (const CudnnStep& step : d.steps) {
          w.put_u64(step.seq);
          w.put_u8(step.op);
          w.put_i32(step.name);
          w.put_i32(step.type);
          w.put_u64(static_cast<uint64_t>(step.count));
          w.put_bytes(step.elements);
        }
        break;
      }
      case ObjectKind::Cusparse:
      case ObjectKind::Cusolver: {
        // The calls that made and set it (nvobj.cc): a resume replays them in the client's
        // order. A stream the program destroyed since it set it is left out: the handle runs
        // on the default stream then (NvobjScope::object), as it will after the resume.
        const auto& d = o.as<NvobjObject>();
        std::vector<const NvobjStep*> steps;
        for (const NvobjStep& step : d.steps) {
          NvobjStepInfo info;
          if (nvobj_step_info(o.kind, step.call, step.args, &info) && info.stream >= api::kFirstGuestHandle &&
              !vol_.find(ObjectKind::Stream, info.stream))
            continue;
          steps.push_back(&step);
        }
        w.put_i32(d.type);
        w.put_u32(static_cast<uint32_t>(steps.size()));
        for (const NvobjStep* step : steps) {
          w.put_u64(step->seq);
          w.put_u32(step->call);
          w.put_bytes(step->args);
        }
        break;
      }
      case ObjectKind::Array:
      case ObjectKind::MipmappedArray: {
        // The descriptor (the texels follow as a blob of their own, kArrayData).
        const auto& a = o.as<ArrayObject>();
        w.put_u64(a.desc.Width);
        w.put_u64(a.desc.Height);
        w.put_u64(a.desc.Depth);
        w.put_u32(static_cast<uint32_t>(a.desc.Format));
        w.put_u32(a.desc.NumChannels);
        w.put_u32(a.desc.Flags);
        w.put_u32(a.levels);
        w.put_i32(a.level);
        break;
      }
      case ObjectKind::TexObject: {
        // Its array's id (0: device memory) and its description; its value is the handle.
        const auto& t = o.as<TexObject>();
        w.put_u64(t.resource);
        w.put_bytes(std::as_bytes(std::span(&t.spec, 1)));
        // Its resource view, if it was made through one.
        w.put_u8(t.view ? 1 : 0);
        if (t.view) {
          w.put_u32(static_cast<uint32_t>(t.view->format));
          w.put_u64(t.view->width);
          w.put_u64(t.view->height);
          w.put_u64(t.view->depth);
          w.put_u32(t.view->firstMipmapLevel);
          w.put_u32(t.view->lastMipmapLevel);
          w.put_u32(t.view->firstLayer);
          w.put_u32(t.view->lastLayer);
        }
        break;
      }
      case ObjectKind::SurfObject:
        w.put_u64(o.as<SurfObject>().resource);
        break;
    }
    ok = out.put_record(kObjectRecord, o.id, w.bytes());
  });
  if (!ok) return fail(walk_error.empty() ? out.error() : walk_error);
  phases.mark("objects");
  // Device memory: each mapping whole (a chunk's free bytes too: they are few), copied from
  // the device straight into the sink's staging buffers.
  uint64_t memory_bytes = 0;
  // Through the ring when the memory is on one device (its stream and events are that
  // context's); several devices copy straight into the sink's buffers.
  const bool one_device = std::all_of(layout.mappings.begin(), layout.mappings.end(), [&](const auto& m) {
    return m.device == layout.mappings.front().device;
  });
  RingCopier copier(api_, one_device ? ring : std::span<std::byte>{});
  for (const auto& m : layout.mappings) {
    make_current(guest_index(m.device));
    if (!out.begin_blob(kMappingData, m.va, m.bytes)) return fail(out.error());
    if (copier.usable()) {
      if (std::string err; !copier.copy(out, m.va, m.bytes, &err)) return fail(err);
      if (!out.end_blob()) return fail(out.error());
      memory_bytes += m.bytes;
      continue;
    }
    for (uint64_t off = 0; off < m.bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(m.bytes - off, state::kChunkBytes));
      std::span<std::byte> buf = out.acquire(n);
      if (buf.size() < n) return fail(out.error());
      if (CUresult e = api_.cuMemcpyDtoH_v2(buf.data(), m.va + off, n); e != CUDA_SUCCESS)
        return fail("copying device memory at " + hex(m.va + off) + " failed: " + describe(api_, e));
      if (!out.commit(buf.first(n))) return fail(out.error());
      off += n;
    }
    if (!out.end_blob()) return fail(out.error());
    memory_bytes += m.bytes;
  }
  phases.mark("device memory", memory_bytes);
  // Module variables (__device__, __constant__, __managed__): their bytes, by device pointer.
  for (const auto& [ptr, id] : vol_.of(ObjectKind::Global)) {
    const Object* g = vol_.get(id);
    std::vector<std::byte> bytes(g->as<GlobalObject>().bytes);
    make_current(g->device);
    if (!bytes.empty())
      if (CUresult e = api_.cuMemcpyDtoH_v2(bytes.data(), ptr, bytes.size()); e != CUDA_SUCCESS)
        return fail("copying module variable " + g->as<GlobalObject>().name + " failed: " + describe(api_, e));
    if (!out.put_record(kGlobalData, ptr, as_bytes(bytes))) return fail(out.error());
  }
  // Arrays' texels (every level of a mipmapped array; a level's are its parent's), read with
  // cuMemcpy3D: the contexts are idle (quiesced above).
  for (ObjectKind k : {ObjectKind::Array, ObjectKind::MipmappedArray})
    for (const auto& [handle, id] : vol_.of(k)) {
      const Object* o = vol_.get(id);
      const auto& a = o->as<ArrayObject>();
      if (a.level >= 0) continue;
      uint64_t bytes = 0;
      if (!array_bytes(a.desc, a.levels, &bytes)) return fail("an array of an unknown format");
      std::vector<std::byte> texels(bytes);
      make_current(o->device);
      std::byte* at = texels.data();
      for (uint32_t l = 0; l < std::max<uint32_t>(a.levels, 1); ++l) {
        CUarray arr = a.array;
        if (k == ObjectKind::MipmappedArray)
          if (CUresult e = api_.cuMipmappedArrayGetLevel(&arr, a.mipmap, l); e != CUDA_SUCCESS)
            return fail("finding a mipmapped array's level failed: " + describe(api_, e));
        const CUDA_ARRAY3D_DESCRIPTOR ld = level_desc(a.desc, l);
        if (CUresult e = copy_array_contents(api_, arr, ld, at, false); e != CUDA_SUCCESS)
          return fail("reading a CUDA array failed: " + describe(api_, e));
        uint64_t n = 0;
        array_bytes(ld, 0, &n);
        at += n;
      }
      if (!out.put_blob(kArrayData, o->id, texels)) return fail(out.error());
    }
  // Each physical allocation's bytes once (however many times, or whether at all, the guest
  // mapped it), through a whole mapping of its own.
  uint64_t vmm_bytes = 0;
  for (const auto& [handle, id] : vol_.of(ObjectKind::VmmAllocation)) {
    const Object* a = vol_.get(id);
    const uint64_t bytes = a->as<VmmAllocationObject>().bytes;
    make_current(a->device);
    std::string err;
    uint64_t va = 0;
    if (vmm_map_whole(*a, &va, &err) != CUDA_SUCCESS) return fail(err);
    struct Unmap {
      Session* s;
      uint64_t va, bytes;
      ~Unmap() { s->vmm_unmap_whole(va, bytes); }
    } unmap{this, va, bytes};
    if (!out.begin_blob(kVmmData, a->id, bytes)) return fail(out.error());
    for (uint64_t off = 0; off < bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - off, state::kChunkBytes));
      std::span<std::byte> buf = out.acquire(n);
      if (buf.size() < n) return fail(out.error());
      if (CUresult e = api_.cuMemcpyDtoH_v2(buf.data(), va + off, n); e != CUDA_SUCCESS)
        return fail("copying physical allocation " + std::to_string(handle) + " failed: " + describe(api_, e));
      if (!out.commit(buf.first(n))) return fail(out.error());
      off += n;
    }
    if (!out.end_blob()) return fail(out.error());
    vmm_bytes += bytes;
  }
  memory_bytes += vmm_bytes;
  // Its exports to other programs of the VM: the resume republishes each under its token.
  if (!ipc_exports_.empty() || !ipc_event_exports_.empty() || !ipc_pool_exports_.empty()) {
    state::ByteWriter w;
    w.put_u32(static_cast<uint32_t>(ipc_exports_.size() + ipc_event_exports_.size() + ipc_pool_exports_.size()));
    auto put = [&](uint8_t kind, uint64_t what, int32_t device, const std::array<uint8_t, 16>& token) {
      w.put_u8(kind);
      w.put_u64(what);
      w.put_i32(device);
      put_token(w, token);
    };
    for (const auto& [ptr, token] : ipc_exports_) put(kIpcExportMemory, ptr, 0, token);
    for (const auto& [handle, token] : ipc_event_exports_) put(kIpcExportEvent, handle, 0, token);
    for (const auto& [pool, e] : ipc_pool_exports_) put(kIpcExportPool, pool, e.device, e.token);
    if (!out.put_record(kIpcExports, 0, w.bytes())) return fail(out.error());
  }
  // The open captures (kMaxSavedCaptures' comment).
  if (!ended_captures_.empty()) {
    state::ByteWriter w;
    w.put_u32(static_cast<uint32_t>(ended_captures_.size()));
    for (size_t i = 0; i < ended_captures_.size(); ++i) {
      const EndedCapture& c = ended_captures_[i];
      w.put_u64(c.stream);
      w.put_i32(c.device);
      w.put_u32(static_cast<uint32_t>(c.mode));
      w.put_u64(c.id);
      w.put_u64(c.into);
      const Object* into = c.into ? vol_.find(ObjectKind::Graph, c.into) : nullptr;
      if (c.into && !into) return fail("the graph stream " + std::to_string(c.stream) + " captures into is gone");
      if (!c.into) write_graph(capture_graphs[i].desc, w);
      w.put_u32(static_cast<uint32_t>(c.deps.size()));
      for (CUgraphNode n : c.deps) {
        int64_t at = -1;
        if (into) {
          at = node_index(into->id, n);
        } else {
          const auto& v = capture_graphs[i].nodes;
          if (const auto it = std::find(v.begin(), v.end(), n); it != v.end()) at = it - v.begin();
        }
        if (at < 0) return fail("a dependency of the stream capture on stream " + std::to_string(c.stream) +
                                " is not among its graph's nodes");
        w.put_u32(static_cast<uint32_t>(at));
      }
    }
    if (!out.put_record(kStreamCaptures, 0, w.bytes())) return fail(out.error());
  }
  if (!out.put_record(kClientEnd, info_.slot, {})) return fail(out.error());
  if (std::string err; !out.finish(&err)) return fail(err);
  copier.drop();
  phases.mark("variables and finish");
  if (before_release) before_release();
  phases.mark("unpin");
  // Everything is out: release it. Children first; the arena keeps its layout (the resume
  // reads it from the stream anyway).
  const size_t objects = vol_.size();
  {
    // One client at a time, so that the hole is this client's alone (several share the
    // process with --isolation thread).
    std::lock_guard l(context_layout_mu());
    const std::vector<AddressRange> mapped = current_mappings();
    vmm_unmap_all();  // the guest's mappings before their allocations and reservations go
    vol_.walk_children_first([&](Object& o) {
      if (o.kind != ObjectKind::Context) release(o, Release::kSuspend);
    });
    if (arena_) arena_->release_memory();
    release_all(Release::kSuspend);  // the contexts
    // A thread started and joined lets glibc unmap the stacks of the driver's threads that
    // ended detached (workers keep no stack cache: vmrpc/src/worker.cc), so they are part
    // of the hole too.
    std::thread([] {}).join();
    context_fence_.forget();  // part of the hole now
    context_hole_.hold(vanished_ranges(mapped, current_mappings()));
  }
  free_gates(true);
  // The captures' own graphs went into the state; nothing is captured any more.
  for (const EndedCapture& c : ended_captures_)
    if (!c.into) api_.cuGraphDestroy(c.graph);
  ended_captures_.clear();
  capture_into_.clear();
  capture_ids_.clear();
  suspended_ = true;
  suspended_memory_ = memory_bytes;
  publish_status();
  phases.mark("release");
  const double s = std::chrono::duration<double>(clock::now() - t0).count();
  VMRPC_LOG(kInfo, "stub", log_tag_ + ": suspended: " + std::to_string(objects) + " objects, " +
                               std::to_string(memory_bytes >> 20) + " MiB of device memory in " +
                               std::to_string(static_cast<int>(s * 1000)) + " ms (" + phases.text() +
                               "; holding " + context_hole_.describe() + " of address space for the resume)");
  return true;
}

bool Session::resume(state::Source& in, const vmrpc::RegionView* region, std::string* why, const ResumeCopy& copy,
                     bool modules_first) {
  module_data_moved_ = false;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Phases phases;
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": resume failed, the client stays suspended: " + w);
    // Give back whatever was made; the arena's layout goes too (the stream has it).
    vmm_unmap_all();
    vol_.walk_children_first([&](Object& o) {
      if (o.kind != ObjectKind::Context) release(o, Release::kSuspend);
    });
    if (arena_) arena_->release_memory();
    {
      std::lock_guard l(context_layout_mu());
      release_all(Release::kSuspend);
      context_fence_.forget();
      context_hole_.hold_again();  // for the next try
    }
    free_gates(true);  // graph host nodes' gates (no context is left to call them)
    return false;
  };
  if (!suspended_ && vol_.size() != 0) return fail("the client is not suspended");
  std::string err;
  state::RecordHeader h{};
  auto next = [&](uint32_t type) {
    if (!in.next(&h, &err)) return false;
    if (h.type != type) {
      err = "record " + std::to_string(h.index) + " at byte " + std::to_string(h.offset) + " has type " +
            std::to_string(h.type) + " where type " + std::to_string(type) + " was expected";
      return false;
    }
    return true;
  };
  std::vector<std::byte> payload;
  // Header.
  if (!next(kClientHeader) || !in.read_payload(&payload, &err)) return fail(err.empty() ? "no client state" : err);
  int current = 0;
  uint64_t allocated = 0, last_handles[4] = {};
  {
    state::ByteReader r(payload);
    uint32_t version = 0, slot = 0, owner = 0, count = 0;
    r.get_u32(&version);
    if (r.ok() && version != kClientStateVersion)
      return fail("client state version " + std::to_string(version) + " (written by " +
                  (version < kClientStateVersion ? "an older" : "a newer or another") +
                  " vmcuda-stub); this vmcuda-stub reads version " + std::to_string(kClientStateVersion) +
                  " only: restore it with the vmcuda-stub that saved it");
    r.get_u32(&slot);
    r.get_u32(&owner);
    r.get_u32(&count);
    if (r.ok() && count != devices_.size())
      return fail("the state is of a client with " + std::to_string(count) + " GPU(s); this stub gives its clients " +
                  std::to_string(devices_.size()) + " (--devices)");
    for (uint32_t d = 0; r.ok() && d < count; ++d) {
      std::string model;
      r.get_string(&model, 512);
      if (r.ok() && model != device_model(static_cast<int>(d)))
        return fail("GPU " + std::to_string(d) + " of the saved client was a " + model + "; here it is a " +
                    device_model(static_cast<int>(d)) + " (a resume needs the same model)");
    }
    r.get_i32(&current);
    r.get_u64(&allocated);
    for (uint64_t& v : last_handles) r.get_u64(&v);
    r.expect_end();
    if (!r.ok()) return fail("bad client header: " + r.error());
    if (!valid_device(current)) return fail("bad client header: current device " + std::to_string(current));
  }
  // Arena layout.
  if (!next(kArenaLayout) || !in.read_payload(&payload, &err)) return fail(err);
  DeviceArena::Layout layout;
  {
    state::ByteReader r(payload);
    uint32_t n = 0;
    r.get_i32(&layout.index);
    r.get_u32(&n);
    for (uint32_t i = 0; r.ok() && i < n; ++i) {
      if (r.remaining() < 29) return fail("bad device memory layout: more mappings than its bytes hold");
      DeviceArena::MappingLayout m;
      int32_t device = 0;
      uint8_t chunk = 0;
      uint32_t frees = 0;
      r.get_u64(&m.va);
      r.get_u64(&m.bytes);
      r.get_i32(&device);
      r.get_u8(&chunk);
      r.get_u32(&frees);
      if (!r.ok()) break;
      if (!valid_device(device)) return fail("bad device memory layout: device " + std::to_string(device));
      m.device = devices_[device];
      m.chunk = chunk != 0;
      for (uint32_t f = 0; r.ok() && f < frees; ++f) {
        uint64_t off = 0, bytes = 0;
        r.get_u64(&off);
        r.get_u64(&bytes);
        if (r.ok()) m.free[off] = bytes;
      }
      layout.mappings.push_back(std::move(m));
    }
    r.get_u32(&n);
    for (uint32_t i = 0; r.ok() && i < n && r.remaining() >= 24; ++i) {
      DeviceArena::BlockLayout b;
      r.get_u64(&b.ptr);
      r.get_u64(&b.bytes);
      r.get_u64(&b.mapping);
      layout.blocks.push_back(b);
    }
    if (r.ok() && layout.blocks.size() != n) return fail("bad device memory layout: more blocks than its bytes hold");
    r.get_u32(&n);
    for (uint32_t i = 0; r.ok() && i < n && i < devices_.size(); ++i) {
      int32_t p = 0;
      r.get_i32(&p);
      if (r.ok() && !valid_device(p)) return fail("bad device memory layout: peer " + std::to_string(p));
      if (r.ok()) layout.peers.push_back(devices_[p]);
    }
    r.expect_end();
    if (!r.ok()) return fail("bad device memory layout: " + r.error());
  }
  if (!arena_) arena_ = make_arena();
  if (!arena_->adopt(layout, &err)) return fail(err);

  // Objects (parents first): read them all, then recreate contexts, memory, the rest.
  struct Saved {
    ObjectKind kind;
    uint64_t id, parent;
    int device;
    uint64_t handle;
    ObjectData data;
    std::shared_ptr<GraphDesc> graph;  // Graph, GraphExec (its mirror)
    uint32_t node_index = 0;           // GraphNode: its place among its graph's nodes
    std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> pairs;  // GraphExec: GraphExecObject::nodes
    std::vector<uint32_t> disabled;    // GraphExec: its disabled nodes, by place in its mirror
  };
  std::vector<Saved> saved;
  std::map<uint64_t, size_t> saved_by_id;
  std::set<uint64_t> child_graph_nodes;  // the nodes whose graph the state holds (Graph under GraphNode)

  for (;;) {
    if (!in.next(&h, &err)) return fail(err.empty() ? "the state ends early" : err);
    if (h.type != kObjectRecord) break;
    if (!in.read_payload(&payload, &err)) return fail(err);
    state::ByteReader r(payload);
    Saved s{};
    uint8_t kind = 0;
    int32_t device = 0;
    r.get_u8(&kind);
    r.get_u64(&s.id);
    r.get_u64(&s.parent);
    r.get_i32(&device);
    r.get_u64(&s.handle);
    s.kind = static_cast<ObjectKind>(kind);
    s.device = device;
    auto bad = [&](const std::string& w) {
      return fail("bad object record " + std::to_string(h.index) + " (" + std::string(kind_name(s.kind)) + "): " + w);
    };
    if (!r.ok()) return bad(r.error());
    if (kind < static_cast<uint8_t>(ObjectKind::Context) || kind >= kObjectKinds) return bad("unknown kind");
    if (s.kind == ObjectKind::HostRegistration ? device != -1 : !valid_device(device)) return bad("bad device");
    if (saved_by_id.contains(s.id) || s.id == 0) return bad("duplicate id");
    // Parents come first; each kind has its own parent kind.
    const Saved* parent = nullptr;
    if (s.parent) {
      auto it = saved_by_id.find(s.parent);
      if (it == saved_by_id.end()) return bad("its parent comes later or not at all");
      parent = &saved[it->second];
    }
    ObjectKind want = ObjectKind::Context;
    switch (s.kind) {
      case ObjectKind::Context:
      case ObjectKind::HostRegistration:
      case ObjectKind::VmmReservation:  // VA is process-wide
        if (parent) return bad("has a parent");
        break;
      case ObjectKind::VmmMapping:  // in its reservation, which any device's call made
        if (!parent || parent->kind != ObjectKind::VmmReservation) return bad("wrong parent");
        break;
      case ObjectKind::Graph:  // under its context; a child graph node's graph (cudaGraphChildGraphNodeGetGraph) under its node
        want = parent && parent->kind == ObjectKind::GraphNode ? ObjectKind::GraphNode : ObjectKind::Context;
        if (!parent || parent->kind != want || parent->device != s.device) return bad("wrong parent");
        break;
      case ObjectKind::Array:  // a mipmapped array's level: under it (checked with its record)
        if (parent && parent->kind == ObjectKind::MipmappedArray) want = ObjectKind::MipmappedArray;
        [[fallthrough]];
      case ObjectKind::GraphNode:
      case ObjectKind::Function:
      case ObjectKind::Global:
      case ObjectKind::ManagedVar:
        if (s.kind == ObjectKind::GraphNode) want = ObjectKind::Graph;
        else if (s.kind != ObjectKind::Array) want = ObjectKind::Module;
        [[fallthrough]];
      default:
        if (!parent || parent->kind != want || parent->device != s.device) return bad("wrong parent");
    }
    switch (s.kind) {
      case ObjectKind::Context:
        if (s.handle != static_cast<uint64_t>(device)) return bad("handle is not its device");
        s.data = ContextObject{};
        break;
      case ObjectKind::PeerAccess:
        if ((s.handle >> 32) != static_cast<uint32_t>(device) || !valid_device(static_cast<int>(s.handle & 0xffffffffu)))
          return bad("bad peer");
        s.data = PeerAccessObject{};
        break;
      case ObjectKind::Allocation: {
        AllocationObject a;
        r.get_u64(&a.bytes);
        s.data = a;
        break;
      }
      case ObjectKind::Module: {
        ModuleObject m;
        std::vector<std::byte> image;
        r.get_bytes(&image, limits_.max_module_bytes + 4096);
        m.image = saved_module_image(std::move(image));
        s.data = std::move(m);
        break;
      }
      case ObjectKind::Function: {
        FunctionObject f;
        uint32_t n = 0;
        r.get_string(&f.name, limits_.max_name_bytes);
        r.get_u32(&n);
        if (n > api::kMaxKernelParams) return bad("too many parameters");
        for (uint32_t i = 0; r.ok() && i < n; ++i) {
          api::ParamInfo p{};
          r.get_u32(&p.offset);
          r.get_u32(&p.size);
          f.params.push_back(p);
        }
        r.get_u32(&n);
        if (n > 64) return bad("too many attributes");
        for (uint32_t i = 0; r.ok() && i < n; ++i) {
          int32_t a = 0, v = 0;
          r.get_i32(&a);
          r.get_i32(&v);
          f.attributes[a] = v;
        }
        r.get_i32(&f.cache_config);
        s.data = std::move(f);
        break;
      }
      case ObjectKind::Global: {
        GlobalObject g;
        r.get_u64(&g.bytes);
        r.get_string(&g.name, limits_.max_name_bytes);
        s.data = std::move(g);
        break;
      }
      case ObjectKind::ManagedVar: {
        ManagedVarObject v;
        r.get_u64(&v.shadow.offset);
        r.get_u64(&v.shadow.bytes);
        r.get_bytes(&v.last, 1u << 30);
        r.get_string(&v.name, limits_.max_name_bytes);
        if (r.ok() && v.last.size() != v.shadow.bytes) return bad("its shadow and its value differ in size");
        s.data = std::move(v);
        break;
      }
      case ObjectKind::Stream:
      case ObjectKind::PerThreadStream:
      case ObjectKind::NullStream: {
        StreamObject st;
        r.get_u32(&st.flags);
        r.get_i32(&st.priority);
        if (r.ok() && (st.flags & ~CU_STREAM_NON_BLOCKING)) return bad("bad flags");
        if (r.ok() && s.kind != ObjectKind::Stream &&
            (s.handle != static_cast<uint64_t>(device) || st.flags != 0 || st.priority != 0))
          return bad(s.kind == ObjectKind::NullStream ? "not a device's NULL stream" : "not a device's per-thread stream");
        uint32_t count = 0;
        r.get_u32(&count);
        if (r.ok() && count > kMaxSavedStreamAttributes) return bad("too many attributes");
        for (uint32_t i = 0; r.ok() && i < count; ++i) {
          uint32_t id = 0, ratio = 0, domains = 0;
          api::StreamAttributeValue v{};
          r.get_u32(&id);
          r.get_u64(&v.base_ptr);
          r.get_u64(&v.num_bytes);
          r.get_u32(&ratio);
          r.get_u32(&v.hit_prop);
          r.get_u32(&v.miss_prop);
          r.get_i32(&v.value);
          r.get_u32(&domains);
          if (domains > 0xffff) return bad("bad attribute");
          v.hit_ratio = std::bit_cast<float>(ratio);
          v.domain_default = static_cast<uint8_t>(domains);
          v.domain_remote = static_cast<uint8_t>(domains >> 8);
          // Values are checked again when set at the resume (apply_stream_attribute).
          if (r.ok() && !st.attributes.emplace(id, v).second) return bad("an attribute twice");
        }
        s.data = st;
        break;
      }
      case ObjectKind::Event: {
        EventObject e;
        r.get_u32(&e.flags);
        e.recorded = e.flags & kSavedEventRecorded;
        e.flags &= ~kSavedEventRecorded;
        if (r.ok() && (e.flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
          return bad("bad flags");
        // An interprocess event has no timing (CUDA's rule, as EventCreate checks).
        if (r.ok() && (e.flags & CU_EVENT_INTERPROCESS) && !(e.flags & CU_EVENT_DISABLE_TIMING))
          return bad("an interprocess event with timing");
        uint64_t bits = 0;
        r.get_u64(&bits);
        e.before_suspend_ms = std::bit_cast<double>(bits);
        uint8_t imported = 0;
        r.get_u8(&imported);
        get_token(r, &e.ipc_token);
        if (r.ok() && imported > 1) return bad("bad IPC mark");
        e.imported = imported == 1;
        if (r.ok() && e.imported && e.flags != (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING))
          return bad("an event opened from another program without its flags");
        // Unknown (NaN), or a time a suspend measured: never negative, never absurd.
        if (r.ok() && !std::isnan(e.before_suspend_ms) &&
            !(e.before_suspend_ms >= 0 && e.before_suspend_ms < 1e12 && e.recorded))
          return bad("bad time before the suspend");
        e.timing_lost = true;
        s.data = e;
        break;
      }
      case ObjectKind::HostRegistration: {
        HostRegistrationObject hr;
        r.get_u64(&hr.bytes);
        s.data = hr;
        break;
      }
      case ObjectKind::Limit: {
        LimitObject l;
        r.get_u64(&l.value);
        r.get_u64(&l.default_value);
        if ((s.handle >> 32) != static_cast<uint32_t>(device)) return bad("bad key");
        s.data = l;
        break;
      }
      case ObjectKind::CacheConfig: {
        CacheConfigObject c;
        r.get_i32(&c.value);
        r.get_i32(&c.default_value);
        if (s.handle != static_cast<uint64_t>(device)) return bad("bad key");
        s.data = c;
        break;
      }
      case ObjectKind::Array:
      case ObjectKind::MipmappedArray: {
        ArrayObject a;
        uint32_t format = 0;
        r.get_u64(&a.desc.Width);
        r.get_u64(&a.desc.Height);
        r.get_u64(&a.desc.Depth);
        r.get_u32(&format);
        r.get_u32(&a.desc.NumChannels);
        r.get_u32(&a.desc.Flags);
        r.get_u32(&a.levels);
        r.get_i32(&a.level);
        a.desc.Format = static_cast<int>(format);
        if (!r.ok()) break;
        uint64_t bytes = 0;
        const bool level = s.kind == ObjectKind::Array && a.level >= 0;
        if (!array_bytes(a.desc, a.levels, &bytes) || (s.kind == ObjectKind::MipmappedArray) != (a.levels > 0) ||
            a.levels > 32 || a.level < -1 || (level && (!parent || parent->kind != ObjectKind::MipmappedArray)))
          return bad("an inconsistent array");
        if (level) {
          // The level's descriptor follows from its parent's.
          const auto& pa = std::get<ArrayObject>(parent->data);
          if (static_cast<uint32_t>(a.level) >= pa.levels) return bad("a level beyond its mipmapped array's");
          a.desc = level_desc(pa.desc, static_cast<uint32_t>(a.level));
        } else {
          a.charged = bytes;  // what the resume charges
        }
        s.data = a;
        break;
      }
      case ObjectKind::TexObject:
      case ObjectKind::SurfObject: {
        // What it reads: an array of the client earlier in the list, on its device, behind
        // the handle its description names; or device memory (checked when it is made).
        uint64_t resource = 0;
        r.get_u64(&resource);
        api::TextureCreateArgs spec{};
        const bool tex = s.kind == ObjectKind::TexObject;
        if (tex) {
          std::vector<std::byte> b;
          r.get_bytes(&b, sizeof spec);
          if (r.ok() && b.size() != sizeof spec) return bad("a texture description of the wrong size");
          if (r.ok()) std::memcpy(&spec, b.data(), sizeof spec);
        }
        std::optional<CUDA_RESOURCE_VIEW_DESC> view;
        uint8_t has_view = 0;
        if (tex) r.get_u8(&has_view);
        if (r.ok() && has_view > 1) return bad("a resource view flag that is neither 0 nor 1");
        if (has_view) {
          CUDA_RESOURCE_VIEW_DESC v{};
          uint32_t format = 0;
          r.get_u32(&format);
          r.get_u64(&v.width);
          r.get_u64(&v.height);
          r.get_u64(&v.depth);
          r.get_u32(&v.firstMipmapLevel);
          r.get_u32(&v.lastMipmapLevel);
          r.get_u32(&v.firstLayer);
          r.get_u32(&v.lastLayer);
          // The driver checks the rest against the array when the object is made again.
          if (r.ok() && format > kLastResourceViewFormat) return bad("a resource view of an unknown format");
          v.format = static_cast<int>(format);
          view = v;
        }
        if (!r.ok()) break;
        if (view && spec.resource != api::kTexResourceArray && spec.resource != api::kTexResourceMipmap)
          return bad("a resource view of device memory (views are of CUDA arrays)");
        if (s.handle == 0 || s.handle > kMaxTextureObjectValue)
          return bad("a value (" + std::to_string(s.handle) + ") a resume cannot give back (1 to " +
                     std::to_string(kMaxTextureObjectValue) + ")");
        const bool on_array = !tex || spec.resource == api::kTexResourceArray || spec.resource == api::kTexResourceMipmap;
        if (on_array) {
          auto it = saved_by_id.find(resource);
          if (it == saved_by_id.end()) return bad("its CUDA array comes later or not at all");
          const Saved& a = saved[it->second];
          const ObjectKind want = tex && spec.resource == api::kTexResourceMipmap ? ObjectKind::MipmappedArray : ObjectKind::Array;
          if (a.kind != want || a.device != s.device || (tex && a.handle != spec.handle))
            return bad("its CUDA array is not the one it names");
        } else if (resource != 0 || (spec.resource != api::kTexResourceLinear && spec.resource != api::kTexResourcePitch2D)) {
          return bad("an unknown resource");
        }
        if (tex) s.data = TexObject{0, spec, resource, view};
        else s.data = SurfObject{0, resource};
        break;
      }
      case ObjectKind::Graph:
      case ObjectKind::GraphExec: {
        // Its structure checked here (graph_state.cc); what its nodes use, when it is built.
        const bool exec = s.kind == ObjectKind::GraphExec;
        uint64_t flags = 0;
        if (exec && r.get_u64(&flags) && (flags & ~uint64_t{9})) return bad("unknown instantiation flags");
        if (!exec && s.handle < api::kFirstGuestHandle) return bad("a handle the guest cannot have made");
        if (!r.ok()) break;
        s.graph = std::make_shared<GraphDesc>();
        uint32_t budget = kMaxSavedGraphNodes;
        if (std::string w; !read_graph(r, s.graph.get(), &budget, &w)) return bad(r.ok() ? w : r.error());
        if (!exec) {
          // A child graph node's graph is the node's own: what the resume builds for the node,
          // so it is what the node's description holds (once per node).
          if (parent && parent->kind == ObjectKind::GraphNode) {
            const Saved& owner = saved[saved_by_id.at(parent->parent)];
            const GraphNodeDesc& n = owner.graph->nodes.at(parent->node_index);
            auto same = [](uint64_t id) { return id; };
            if (n.type != kNodeChild || !n.child || graph_fingerprint(*n.child, same) != graph_fingerprint(*s.graph, same))
              return bad("the graph of a node that is not a child graph node, or not the graph that node holds");
            if (!child_graph_nodes.insert(s.parent).second) return bad("a second graph of one child graph node");
          }
          s.data = GraphObject{nullptr, parent && parent->kind == ObjectKind::GraphNode};
          break;
        }
        if (s.handle < api::kFirstGuestHandle) return bad("a handle the guest cannot have made");
        uint32_t count = 0;
        r.get_u32(&count);
        if (r.ok() && count > s.graph->nodes.size()) return bad("more matched nodes than its graph has");
        for (uint32_t i = 0; r.ok() && i < count; ++i) {
          uint64_t g = 0;
          uint32_t from = 0, to = 0;
          r.get_u64(&g);
          r.get_u32(&from);
          r.get_u32(&to);
          if (!r.ok()) break;
          const auto it = saved_by_id.find(g);
          const Saved* graph = it == saved_by_id.end() ? nullptr : &saved[it->second];
          if (!graph || graph->kind != ObjectKind::Graph || graph->device != s.device ||
              from >= graph->graph->nodes.size() || to >= s.graph->nodes.size())
            return bad("a matched node of no graph of the state");
          s.pairs.emplace_back(g, from, to);
        }
        uint32_t disabled = 0;
        r.get_u32(&disabled);
        if (r.ok() && disabled > s.graph->nodes.size()) return bad("more disabled nodes than its graph has");
        for (uint32_t i = 0; r.ok() && i < disabled; ++i) {
          uint32_t at = 0;
          if (!r.get_u32(&at)) break;
          if (at >= s.graph->nodes.size() || std::ranges::find(s.disabled, at) != s.disabled.end())
            return bad("a disabled node beyond its graph's nodes, or named twice");
          s.disabled.push_back(at);
        }
        GraphExecObject x;
        x.flags = flags;
        s.data = std::move(x);
        break;
      }
      case ObjectKind::GraphNode: {
        r.get_u32(&s.node_index);
        if (r.ok() && s.node_index >= parent->graph->nodes.size()) return bad("beyond its graph's nodes");
        s.data = GraphNodeObject{};
        break;
      }
      case ObjectKind::CublasHandle: {
        CublasHandleObject c;
        r.get_i32(&c.pointer_mode);
        r.get_i32(&c.math_mode);
        r.get_u64(&c.stream);
        r.get_u64(&c.workspace);
        r.get_u64(&c.workspace_bytes);
        // What the guest could have set (its stream and workspace are checked once the
        // objects they name are back: restore_cublas_settings).
        if (r.ok() && (c.pointer_mode < 0 || c.pointer_mode > 1 || (c.math_mode & ~16) < 0 || (c.math_mode & ~16) > 3))
          return bad("bad settings");
        if (r.ok() && (s.handle < api::kFirstGuestHandle || (c.stream && c.stream < api::kFirstGuestHandle)))
          return bad("bad handle");
        s.data = c;
        break;
      }
      // Their sizes and places (granularity, inside the arena and their reservation, no
      // overlap, inside their allocation) once every record is read: check_vmm below.
      case ObjectKind::VmmReservation: {
        VmmReservationObject v;
        r.get_u64(&v.bytes);
        s.data = v;
        break;
      }
      case ObjectKind::VmmAllocation: {
        VmmAllocationObject v;
        r.get_u64(&v.bytes);
        r.get_u32(&v.refs);
        if (r.ok() && v.refs > kMaxSavedVmmRefs) return bad("more references than a program can hold");
        if (r.ok() && (s.handle == 0 || s.handle > last_handles[3])) return bad("a handle beyond the saved counter");
        v.maps = 0;  // counted from the mappings below
        s.data = v;
        break;
      }
      case ObjectKind::VmmMapping: {
        VmmMappingObject m;
        uint32_t count = 0;
        r.get_u64(&m.bytes);
        r.get_u64(&m.offset);
        r.get_u64(&m.allocation);  // the saved id: resolved by check_vmm
        r.get_u32(&count);
        if (r.ok() && count > devices_.size()) return bad("an access list longer than the client's devices");
        for (uint32_t i = 0; r.ok() && i < count; ++i) {
          int32_t d = 0;
          uint32_t flags = 0;
          r.get_i32(&d);
          r.get_u32(&flags);
          if (!r.ok()) break;
          if (!valid_device(d)) return bad("access for device " + std::to_string(d));
          if (flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
              flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return bad("unknown access flags " + std::to_string(flags));
          if (!m.access.emplace(d, flags).second) return bad("access for one device twice");
        }
        s.data = std::move(m);
        break;
      }
      case ObjectKind::IpcMemory: {
        // Another program's memory mapped here: checked against the arena below (its range
        // held) and against the table's record at ipc_attach (sizes, offset, GPU).
        IpcMemoryObject m;
        get_token(r, &m.token);
        r.get_u64(&m.va);
        r.get_u64(&m.mapping_bytes);
        r.get_u64(&m.bytes);
        r.get_u32(&m.opens);
        m.mapped = false;
        if (r.ok() && (m.opens == 0 || m.bytes == 0 || m.mapping_bytes == 0 || s.handle < m.va ||
                       s.handle - m.va > m.mapping_bytes || m.bytes > m.mapping_bytes - (s.handle - m.va)))
          return bad("memory opened at " + hex(s.handle) + " does not lie in its mapping at " + hex(m.va) + " of " +
                     std::to_string(m.mapping_bytes) + " bytes");
        s.data = m;
        break;
      }
      case ObjectKind::CublasLt: {
        // Its creation's arguments and attributes are the library's to check when the resume
        // makes and sets them; here what it is and that its attributes are few, sized, once.
        CublasLtObject l;
        int32_t what = -1;
        uint64_t ld = 0;
        uint32_t count = 0;
        r.get_i32(&what);
        r.get_i32(&l.compute_type);
        r.get_i32(&l.data_type);
        r.get_u64(&l.rows);
        r.get_u64(&l.cols);
        r.get_u64(&ld);
        r.get_u32(&count);
        if (!r.ok()) break;
        if (what < CublasLtObject::kHandle || what > CublasLtObject::kPreference) return bad("an unknown cuBLASLt object");
        l.what = static_cast<CublasLtObject::What>(what);
        l.ld = static_cast<int64_t>(ld);
        if (s.handle < api::kFirstGuestHandle) return bad("a handle the guest cannot have made");
        if (count > kMaxSavedLtAttributes || (l.what == CublasLtObject::kHandle && count != 0))
          return bad("too many attributes");
        for (uint32_t i = 0; r.ok() && i < count; ++i) {
          int32_t attr = 0;
          std::vector<std::byte> value;
          r.get_i32(&attr);
          r.get_bytes(&value, api::kLtMaxAttributeBytes);
          if (!r.ok()) break;
          if (value.empty()) return bad("attribute " + std::to_string(attr) + " without a value");
          for (const auto& [a, v] : l.attributes)
            if (a == attr) return bad("attribute " + std::to_string(attr) + " twice");
          l.attributes.emplace_back(attr, std::move(value));
        }
        s.data = std::move(l);
        break;
      }
      case ObjectKind::CufftPlan: {
        CufftPlanObject p;
        uint32_t n = 0;
        r.get_u64(&p.stream);
        r.get_u64(&p.work_area);
        r.get_u32(&n);
        // What the guest could have made: its own handles, a short log of calls cuFFT replays.
        if (r.ok() && (s.handle < api::kFirstGuestHandle || (p.stream && p.stream < api::kFirstGuestHandle) || n > 16))
          return bad("bad plan");
        for (uint32_t i = 0; r.ok() && i < n; ++i) {
          uint32_t call = 0;
          std::vector<std::byte> args;
          r.get_u32(&call);
          r.get_bytes(&args, 4096);
          if (r.ok() && !cufft_replayable_call(call, args.size())) return bad("a call that does not make a plan");
          p.made_by.emplace_back(call, std::move(args));
        }
        s.data = std::move(p);
        break;
      }
      case ObjectKind::CurandGenerator: {
        // What the guest could have made: its own handles, a log of at most kCurandMaxSteps
        // steps cuRAND replays, its creation first, generating at most kCurandMaxReplayBytes.
        CurandGeneratorObject g;
        uint32_t n = 0;
        r.get_u64(&g.stream);
        r.get_u32(&n);
        if (r.ok() && (s.handle < api::kFirstGuestHandle || (g.stream && g.stream < api::kFirstGuestHandle) ||
                       n == 0 || n > kCurandMaxSteps))
          return bad("bad generator");
        for (uint32_t i = 0; r.ok() && i < n; ++i) {
          CurandStep step;
          r.get_u32(&step.call);
          r.get_u64(&step.repeat);
          r.get_bytes(&step.args, 4096);
          if (!r.ok()) break;
          const uint64_t bytes = curand_step_bytes(step.call, step.args);
          if (bytes == UINT64_MAX) return bad("a step that is not a cuRAND call a generator replays");
          if (step.repeat == 0 || (bytes && step.repeat > kCurandMaxReplayBytes / bytes))
            return bad("a step repeated too often");
          g.replay_bytes += bytes * step.repeat;  // each term is bounded: no overflow
          if (g.replay_bytes > kCurandMaxReplayBytes) return bad("more to generate again than a resume does");
          g.made_by.push_back(std::move(step));
        }
        s.data = std::move(g);
        break;
      }
      case ObjectKind::Cudnn: {
        // A handle, or a descriptor of a known type with at most kCudnnMaxSteps well-formed
        // steps; what the steps name is checked when they are replayed (restore_cudnn).
        CudnnObject d;
        uint8_t handle = 0;
        uint32_t n = 0;
        r.get_u8(&handle);
        r.get_i32(&d.type);
        r.get_i32(&d.legacy);
        r.get_u64(&d.stream);
        r.get_u32(&n);
        if (!r.ok()) break;
        d.handle = handle == 1;
        d.retired = handle == 2;
        if (handle > 2 || s.handle < api::kFirstGuestHandle || d.retired != ((s.handle & kCudnnRetiredHandle) != 0))
          return bad("bad cuDNN object");
        if (d.legacy != -1) {
          // A legacy descriptor: its settings, each a call of its kind naming it (cudnn.cc).
          if (n > kCudnnMaxSteps) return bad("too many steps");
          for (uint32_t i = 0; r.ok() && i < n; ++i) {
            d.steps.push_back(read_cudnn_step(r));
          }
          if (!r.ok()) break;
          std::string w;
          if (!cudnn_legacy_valid(d, s.handle, &w)) return bad(w);
          s.data = std::move(d);
          break;
        }
        if (d.handle ? (d.type != 0 || n != 0 || (d.stream && d.stream < api::kFirstGuestHandle))
                     : (d.type < 0 || d.type >= api::kCudnnDescriptorTypes || d.stream != 0))
          return bad(d.handle ? "a cuDNN handle with a descriptor's data" : "a descriptor of an unknown type");
        if (n > kCudnnMaxSteps) return bad("too many steps");
        for (uint32_t i = 0; r.ok() && i < n; ++i) {
          CudnnStep step = read_cudnn_step(r);
          if (!r.ok()) break;
          std::string w;
          if (!cudnn_step_valid(step, &w)) return bad(w);
          d.steps.push_back(std::move(step));
        }
        s.data = std::move(d);
        break;
      }
      case ObjectKind::Cusparse:
      case ObjectKind::Cusolver: {
        // An object of a known type, its creation (of that type, for this handle) first, then
        // at most kNvobjMaxSteps - 1 calls recorded on it, each a call the library's objects
        // replay with arguments of its size, in the client's order. What the steps name is
        // checked when they are replayed: through the handlers, as the guest's calls are.
        NvobjObject d;
        uint32_t n = 0;
        r.get_i32(&d.type);
        r.get_u32(&n);
        if (!r.ok()) break;
        if (s.handle < api::kFirstGuestHandle || d.type < 0 || d.type >= nvobj_types(s.kind))
          return bad("an object of an unknown type (or of a library this vmcuda-stub was built without)");
        if (n == 0 || n > kNvobjMaxSteps) return bad("no creation or too many steps");
        for (uint32_t i = 0; r.ok() && i < n; ++i) {
          NvobjStep step;
          r.get_u64(&step.seq);
          r.get_u32(&step.call);
          r.get_bytes(&step.args, kNvobjMaxStepBytes);
          if (!r.ok()) break;
          NvobjStepInfo info;
          if (!nvobj_step_info(s.kind, step.call, step.args, &info))
            return bad("a step that is not a call the library's objects replay");
          if (info.not_carried) return bad(std::string("a step a resume could not replay: ") + info.not_carried);
          if (info.target != s.handle) return bad("a step recorded on another object");
          if (i == 0 ? info.makes != d.type : info.makes >= 0)
            return bad("not the object's creation first (and only first)");
          if (i > 0 && step.seq <= d.steps.back().seq) return bad("steps out of order");
          d.steps.push_back(std::move(step));
        }
        s.data = std::move(d);
        break;
      }
    }
    r.expect_end();
    if (!r.ok()) return bad(r.error());
    if (saved.size() >= (1u << 22)) return bad("too many objects");
    saved_by_id[s.id] = saved.size();
    saved.push_back(std::move(s));
  }

  // Contexts first (the arena maps memory on their devices).
  std::map<uint64_t, ObjectId> new_id;  // saved id -> new VOL id
  {
    // Into the hole the suspend kept free (address_hold.h).
    std::unique_lock l(context_layout_mu());
    context_hole_.release();
    for (const Saved& s : saved) {
      if (s.kind != ObjectKind::Context) continue;
      if (vol_.context(s.device)) {
        l.unlock();
        return fail("two contexts for device " + std::to_string(s.device));
      }
      current_ = s.device;
      if (!ensure_context()) {
        l.unlock();
        return fail("cannot create a CUDA context on device " + std::to_string(devices_[s.device]) + ": " +
                    describe(api_, ctx_error_));
      }
      new_id[s.id] = vol_.context(s.device)->id;
    }
  }
  current_ = current;
  for (size_t d = 0; d < contexts_.size(); ++d)
    if (contexts_[d]) {
      make_current(static_cast<int>(d));
      break;
    }
  // Virtual memory objects, checked as a whole before anything of them is made: sizes and
  // places in whole granules of their device, reservations inside the arena clear of its
  // memory and of each other (taken out of its free VA now, before the arena is reserved
  // again), mappings inside their reservation and their allocation without overlapping, and
  // every allocation referenced or mapped.
  std::map<uint64_t, size_t> vmm_maps;  // saved allocation id -> its mappings
  {
    std::map<int, uint64_t> granularity;
    auto gran = [&](int device, uint64_t* g) {
      if (auto it = granularity.find(device); it != granularity.end()) return *g = it->second, true;
      if (arena_->granularity_of(devices_[device], g) != CUDA_SUCCESS || *g == 0) return false;
      granularity[device] = *g;
      return true;
    };
    auto bad_vmm = [&](const Saved& s, const std::string& w) {
      return fail("bad " + std::string(kind_name(s.kind)) + " record at " + hex(s.handle) + ": " + w);
    };
    std::map<uint64_t, const Saved*> mappings;  // by VA
    for (const Saved& s : saved) {
      uint64_t g = 0;
      if (s.kind != ObjectKind::VmmReservation && s.kind != ObjectKind::VmmAllocation && s.kind != ObjectKind::VmmMapping)
        continue;
      if (!gran(s.device, &g)) return bad_vmm(s, "no allocation granularity for device " + std::to_string(s.device));
      if (s.kind == ObjectKind::VmmReservation) {
        const uint64_t bytes = std::get<VmmReservationObject>(s.data).bytes;
        if (bytes == 0 || bytes % g || s.handle % g)
          return bad_vmm(s, std::to_string(bytes) + " bytes, not whole granules of " + std::to_string(g));
        if (!arena_->adopt_guest(s.handle, bytes, &err)) return fail(err);
      } else if (s.kind == ObjectKind::VmmAllocation) {
        const uint64_t bytes = std::get<VmmAllocationObject>(s.data).bytes;
        if (bytes == 0 || bytes % g)
          return bad_vmm(s, std::to_string(bytes) + " bytes, not whole granules of " + std::to_string(g));
      } else {
        const auto& m = std::get<VmmMappingObject>(s.data);
        const auto a = saved_by_id.find(m.allocation);
        if (a == saved_by_id.end() || saved[a->second].kind != ObjectKind::VmmAllocation)
          return bad_vmm(s, "it maps no physical allocation of the state");
        const Saved& alloc = saved[a->second];
        if (alloc.device != s.device) return bad_vmm(s, "not on its physical allocation's device");
        const uint64_t abytes = std::get<VmmAllocationObject>(alloc.data).bytes;
        if (m.bytes == 0 || m.bytes % g || m.offset % g || s.handle % g)
          return bad_vmm(s, "address, size or offset not whole granules of " + std::to_string(g));
        if (m.offset > abytes || m.bytes > abytes - m.offset)
          return bad_vmm(s, "offset " + std::to_string(m.offset) + " and " + std::to_string(m.bytes) +
                                " bytes run past its physical allocation of " + std::to_string(abytes));
        const Saved& res = saved[saved_by_id.at(s.parent)];
        const uint64_t rbytes = std::get<VmmReservationObject>(res.data).bytes;
        if (s.handle < res.handle || s.handle - res.handle >= rbytes || m.bytes > rbytes - (s.handle - res.handle))
          return bad_vmm(s, "it lies outside its reservation");
        const auto placed = mappings.emplace(s.handle, &s);
        const auto at = placed.first, next = std::next(placed.first);
        const bool over_prev = at != mappings.begin() && s.handle - std::prev(at)->first <
                                                             std::get<VmmMappingObject>(std::prev(at)->second->data).bytes;
        if (!placed.second || over_prev || (next != mappings.end() && next->first - s.handle < m.bytes))
          return bad_vmm(s, "it overlaps another mapping");
        ++vmm_maps[m.allocation];
      }
    }
    for (const Saved& s : saved)
      if (s.kind == ObjectKind::VmmAllocation && std::get<VmmAllocationObject>(s.data).refs == 0 && !vmm_maps[s.id])
        return bad_vmm(s, "neither referenced nor mapped (it would have been freed)");
    // Other programs' memory opened here: its range held in the arena (clear of its memory
    // and of everything above), mapped again at ipc_attach once its exporter is back.
    for (const Saved& s : saved) {
      if (s.kind != ObjectKind::IpcMemory) continue;
      const auto& m = std::get<IpcMemoryObject>(s.data);
      uint64_t g = 0;
      if (!gran(s.device, &g)) return bad_vmm(s, "no allocation granularity for device " + std::to_string(s.device));
      if (m.va % g || m.mapping_bytes % g)
        return bad_vmm(s, "its mapping at " + hex(m.va) + " is not whole granules of " + std::to_string(g));
      if (!arena_->adopt_guest(m.va, m.mapping_bytes, &err))
        return fail("another program's memory opened at " + hex(s.handle) + ": " + err);
    }
  }
  // Device memory: the arena at its addresses, then the mappings' blobs, in order.
  uint64_t memory_bytes = 0;
  auto restore_memory = [&]() -> bool {
    phases.mark("objects");
    // Through the pinned ring (pinned only now: host memory pinned before the modules are
    // loaded moves their data, see below), filled by the copy threads.
    std::span<std::byte> ring;
    if (copy.ring && in.concurrent_reads()) {
      ring = copy.ring();
      phases.mark("ring");
    }
    std::optional<state::CopyThreads> threads;
    if (!ring.empty()) threads.emplace(copy.threads > 1 ? copy.threads : 0, copy.stacks);
    RingCopier copier(api_, ring, threads ? &*threads : nullptr);
    // On failure: no thread nor GPU copy uses the ring, its stream and events go while their
    // context lives, then the ring is unpinned, then fail() releases the contexts.
    auto give_up = [&](const std::string& w) {
      copier.abort();
      copier.drop();
      threads.reset();
      if (!ring.empty() && copy.drop_ring) copy.drop_ring();
      return fail(w);
    };
    // Also with no memory at all: the arena takes allocations again.
    if (CUresult e = arena_->restore_memory(&err); e != CUDA_SUCCESS) return give_up(err);
    phases.mark("map");
    for (const auto& m : layout.mappings) {
      if (h.type != kMappingData || !h.is_blob() || h.id != m.va || h.payload_bytes != m.bytes)
        return give_up("record " + std::to_string(h.index) + " is not the contents of the mapping at " + hex(m.va));
      // Through the ring in the mapping's own context; where none of the client's contexts is
      // on its GPU (a state from a file names any device), synchronous copies from one made
      // there: arena memory is mapped for its own device, not necessarily for the current one.
      int device = -1;
      for (size_t d = 0; d < devices_.size() && device < 0; ++d)
        if (devices_[d] == m.device && d < contexts_.size() && contexts_[d]) device = static_cast<int>(d);
      int owner = device;
      for (size_t d = 0; d < devices_.size() && owner < 0; ++d)
        if (devices_[d] == m.device && context_of(static_cast<int>(d))) owner = static_cast<int>(d);
      if (copier.usable_for_fill() && device >= 0) {
        if (copier.device() != -1 && copier.device() != device) {
          // Its stream and events are the other context's.
          if (!copier.finish(in, &err)) return give_up(err);
          copier.drop();
        }
        make_current(device);
        if (!copier.fill(in, device, m.va, m.bytes, &err)) return give_up(err);
      } else {
        if (owner >= 0) make_current(owner);
        for (uint64_t off = 0;;) {
          std::span<const std::byte> chunk;
          if (!in.read_chunk_view(&chunk, &err)) return give_up(err);
          if (chunk.empty()) break;
          if (chunk.size() > m.bytes - off) return give_up("the contents of the mapping at " + hex(m.va) + " are too long");
          if (CUresult e = api_.cuMemcpyHtoD_v2(m.va + off, chunk.data(), chunk.size()); e != CUDA_SUCCESS)
            return give_up("writing device memory at " + hex(m.va + off) + " failed: " + describe(api_, e));
          off += chunk.size();
        }
        make_current(current_);
      }
      memory_bytes += m.bytes;
      if (!in.next(&h, &err)) return give_up(err.empty() ? "the state ends early" : err);
    }
    if (!copier.finish(in, &err)) return give_up(err);
    copier.drop();
    threads.reset();
    phases.mark("device memory", memory_bytes);
    if (!ring.empty()) {
      if (copy.drop_ring) copy.drop_ring();
      phases.mark("unpin");
    }
    return true;
  };
  // The rest, parents first (the saved order).
  std::vector<SavedTextureObject> textures;  // made last, in order of value (arrays.cc)
  auto recreate_objects = [&]() -> bool {
  for (const Saved& s : saved) {
    if (s.kind == ObjectKind::Context || s.kind == ObjectKind::PeerAccess) continue;
    if (s.kind == ObjectKind::TexObject || s.kind == ObjectKind::SurfObject) {
      textures.push_back({s.kind, s.device, s.handle, s.data});
      continue;
    }
    // Graphs last (below): their nodes use objects made after them; virtual memory once the
    // arena is back (below).
    if (s.kind == ObjectKind::Graph || s.kind == ObjectKind::GraphNode || s.kind == ObjectKind::GraphExec) continue;
    if (s.kind == ObjectKind::VmmReservation || s.kind == ObjectKind::VmmAllocation || s.kind == ObjectKind::VmmMapping)
      continue;
    // cuSPARSE and cuSOLVER objects: their steps replayed once memory is back (below).
    if (s.kind == ObjectKind::Cusparse || s.kind == ObjectKind::Cusolver) continue;
    const ObjectId parent = s.parent ? new_id.at(s.parent) : 0;
    if (vol_.find(s.kind, s.handle)) return fail("two " + std::string(kind_name(s.kind)) + "s with handle " + hex(s.handle));
    if (s.device >= 0) make_current(s.device);
    ObjectData data = s.data;
    CUresult e = CUDA_SUCCESS;
    std::string what;
    switch (s.kind) {
      case ObjectKind::Allocation: {
        // Must be one of the arena's blocks (the layout was checked; this ties the two).
        bool found = false;
        for (const auto& b : layout.blocks) found |= b.ptr == s.handle;
        if (!found) return fail("allocation " + hex(s.handle) + " is not in the device memory layout");
        break;
      }
      case ObjectKind::Module: {
        auto& m = std::get<ModuleObject>(data);
        if (!m.image || m.image->size() == 0) return fail("a module without an image");
        // Charged to the VM again, as at its first load: a quota without room for it now
        // (the VM's other programs took it meanwhile, or a smaller quota) fails the resume.
        e = load_module_charged(m);
        what = e == CUDA_ERROR_OUT_OF_MEMORY ? "charging a module to the VM's device memory quota" : "loading a module";
        break;
      }
      case ObjectKind::Function: {
        auto& f = std::get<FunctionObject>(data);
        const CUmodule mod = vol_.get(parent)->as<ModuleObject>().module;
        e = api_.cuModuleGetFunction(&f.fn, mod, f.name.c_str());
        what = "finding kernel " + f.name;
        // Its parameter layout must be the one the guest packs by.
        for (size_t i = 0; e == CUDA_SUCCESS && i <= f.params.size(); ++i) {
          size_t off = 0, size = 0;
          const CUresult pe = api_.cuFuncGetParamInfo(f.fn, i, &off, &size);
          if (i == f.params.size() ? pe == CUDA_SUCCESS
                                   : pe != CUDA_SUCCESS || off != f.params[i].offset || size != f.params[i].size)
            return fail("kernel " + f.name + " has another parameter layout here");
        }
        for (const auto& [a, v] : f.attributes)
          if (e == CUDA_SUCCESS) e = api_.cuFuncSetAttribute(f.fn, a, v);
        if (e == CUDA_SUCCESS && f.cache_config >= 0) e = api_.cuFuncSetCacheConfig(f.fn, f.cache_config);
        break;
      }
      case ObjectKind::Global: {
        auto& g = std::get<GlobalObject>(data);
        CUdeviceptr ptr = 0;
        size_t bytes = 0;
        e = api_.cuModuleGetGlobal_v2(&ptr, &bytes, vol_.get(parent)->as<ModuleObject>().module, g.name.c_str());
        what = "finding module variable " + g.name;
        // Guest code holds its address: it must come back where it was.
        if (e == CUDA_SUCCESS && (ptr != s.handle || bytes != g.bytes)) {
          module_data_moved_ = true;
          const uint64_t lo = std::min<uint64_t>(ptr, s.handle), hi = std::max<uint64_t>(ptr, s.handle);
          VMRPC_LOG(kInfo, "stub", log_tag_ + ": module data moved; mappings around it now:\n" +
                                       mappings_between(lo - std::min<uint64_t>(lo, 1ull << 30), hi + (1ull << 30)));
          return fail("module variable " + g.name + " is at " + hex(ptr) + " after reloading its module, not at " +
                      hex(s.handle) + " (the driver placed the module elsewhere)");
        }
        break;
      }
      case ObjectKind::ManagedVar: {
        auto& v = std::get<ManagedVarObject>(data);
        size_t bytes = 0;
        e = api_.cuModuleGetGlobal_v2(&v.ptr, &bytes, vol_.get(parent)->as<ModuleObject>().module, v.name.c_str());
        what = "finding managed variable " + v.name;
        if (e == CUDA_SUCCESS && bytes != v.last.size()) return fail("managed variable " + v.name + " changed size");
        managed_dirty_.resize(devices_.size(), 0);
        managed_streams_.resize(devices_.size(), nullptr);
        managed_dirty_[s.device] = 1;
        break;
      }
      case ObjectKind::Stream:
      case ObjectKind::PerThreadStream:
      case ObjectKind::NullStream: {
        auto& st = std::get<StreamObject>(data);
        // The NULL stream is the new context's own: only its attributes are set again.
        e = s.kind == ObjectKind::NullStream ? CUDA_SUCCESS
                                             : api_.cuStreamCreateWithPriority(&st.stream, st.flags, st.priority);
        what = "creating a stream";
        for (const auto& [id, v] : st.attributes) {
          if (e != CUDA_SUCCESS) break;
          e = apply_stream_attribute(st.stream, id, v);
          what = "setting attribute " + std::to_string(id) + " of " + std::string(kind_name(s.kind)) + " " + hex(s.handle);
        }
        break;
      }
      case ObjectKind::Event: {
        auto& ev = std::get<EventObject>(data);
        if (ev.imported) break;  // another program's: opened again at ipc_attach
        e = api_.cuEventCreate(&ev.event, driver_event_flags(ev.flags));
        what = "creating an event";
        break;
      }
      case ObjectKind::HostRegistration: {
        auto& hr = std::get<HostRegistrationObject>(data);
        auto range = region ? region->resolve({s.handle, hr.bytes}) : std::nullopt;
        if (!range || range->empty())
          return fail("pinned host memory at heap offset " + hex(s.handle) + " is outside the shared region");
        if (!charge_host(hr.bytes, "pinning host memory again at a resume"))
          return fail("the VM's host memory bound has no room for the client's pinned memory (" +
                      std::to_string(hr.bytes >> 20) + " MiB)");
        hr.charged = account_ ? hr.bytes : 0;
        hr.host = range->data();
        e = api_.cuMemHostRegister_v2(hr.host, hr.bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
        what = "pinning shared heap memory";
        if (e != CUDA_SUCCESS) {
          hr.host = nullptr;
          if (hr.charged) account_->refund(hr.charged, VmLedger::kHost);  // not in the VOL: undone here
          hr.charged = 0;
        }
        break;
      }
      case ObjectKind::Limit: {
        auto& lim = std::get<LimitObject>(data);
        const int limit = static_cast<int>(s.handle & 0xffffffffu);
        lim.charged = limit_cost(s.device, limit, lim.value, lim.default_value);
        if (!charge_limit(0, lim.charged))
          return fail("the VM's device memory quota has no room for limit " + std::to_string(limit) + " (" +
                      std::to_string(lim.charged >> 20) + " MiB)");
        e = api_.cuCtxSetLimit(limit, lim.value);
        what = "setting limit " + std::to_string(limit);
        break;
      }
      case ObjectKind::CacheConfig:
        e = api_.cuCtxSetCacheConfig(std::get<CacheConfigObject>(data).value);
        what = "setting the cache configuration";
        break;
      case ObjectKind::CufftPlan: {
        // The plan made again by the calls that made it; its stream and work area once every
        // object is back (restore_cufft_settings).
        std::string w;
        if (!cufft_recreate(std::get<CufftPlanObject>(data), &w)) return fail(w);
        break;
      }
      case ObjectKind::Cudnn: {
        // Made again; its steps, in the client's order across descriptors, and a handle's
        // stream once every object is back (restore_cudnn).
        std::string w;
        if (!cudnn_recreate(std::get<CudnnObject>(data), &w)) return fail(w);
        break;
      }
      case ObjectKind::CurandGenerator: {
        // Made again and brought back where it stood; its stream once every object is back
        // (restore_curand_settings).
        std::string w;
        if (!curand_recreate(std::get<CurandGeneratorObject>(data), &w)) return fail(w);
        break;
      }
      case ObjectKind::CublasHandle: {
        // A new handle of the library with the same pointer and math modes; its stream and
        // workspace once every object is back (restore_cublas_settings).
        std::string w;
        if (!cublas_recreate(std::get<CublasHandleObject>(data), s.device, &w)) return fail(w);
        break;
      }
      case ObjectKind::CublasLt: {
        // Made again from its creation's arguments; its attributes once every object (and the
        // memory its pointer attributes name) is back (restore_cublaslt_attributes).
        std::string w;
        if (!cublaslt_recreate(std::get<CublasLtObject>(data), s.handle, &w)) return fail(w);
        break;
      }
      case ObjectKind::Array:
      case ObjectKind::MipmappedArray: {
        // The same descriptor, charged to the VM again, then its texels back.
        auto& a = std::get<ArrayObject>(data);
        if (a.level >= 0) {
          e = api_.cuMipmappedArrayGetLevel(&a.array, vol_.get(parent)->as<ArrayObject>().mipmap,
                                            static_cast<unsigned>(a.level));
          what = "finding a mipmapped array's level";
          break;
        }
        if (account_ && !account_->charge(a.charged))
          return fail("the VM's device memory quota has no room for a CUDA array (" + std::to_string(a.charged >> 20) +
                      " MiB)");
        e = s.kind == ObjectKind::Array ? api_.cuArray3DCreate_v2(&a.array, &a.desc)
                                        : api_.cuMipmappedArrayCreate(&a.mipmap, &a.desc, a.levels);
        what = "creating a CUDA array";
        if (e != CUDA_SUCCESS && account_) account_->refund(a.charged);  // not in the VOL: undone here
        break;
      }
      default:
        break;
    }
    if (e != CUDA_SUCCESS) {
      if (s.kind == ObjectKind::Limit) charge_limit(std::get<LimitObject>(data).charged, 0);  // not in the VOL yet
      return fail(what + " failed: " + describe(api_, e));
    }
    new_id[s.id] = vol_.add(s.kind, s.device, s.handle, parent, std::move(data)).id;
  }
    return true;
  };
  // The driver places module data itself, and where depends on what the context holds
  // already: loaded again in their order into a fresh context, modules find the addresses
  // they had (measured on the H100), but host memory pinned before them (the state's own
  // staging) moves them. So modules (and everything else) first, then the memory; a retry
  // (modules_first false) puts the memory first, unpinned.
  if (modules_first) {
    if (!recreate_objects() || !restore_memory()) return false;
  } else {
    if (!restore_memory() || !recreate_objects()) return false;
  }
  // Virtual memory (checked above): the reservations at their addresses (the arena is
  // reserved again), the physical allocations with their references (their bytes follow,
  // kVmmData), the mappings at their offsets with their access. Before the graphs and
  // texture objects, which may name mapped memory. Kind by kind: a reservation made before
  // the context came first in the walk, with its mappings.
  for (ObjectKind kind : {ObjectKind::VmmReservation, ObjectKind::VmmAllocation, ObjectKind::VmmMapping})
  for (const Saved& s : saved) {
    if (s.kind != kind) continue;
    if (vol_.find(s.kind, s.handle)) return fail("two " + std::string(kind_name(s.kind)) + "s with handle " + hex(s.handle));
    make_current(s.device);
    ObjectData data = s.data;
    if (s.kind == ObjectKind::VmmAllocation) {
      auto& v = std::get<VmmAllocationObject>(data);
      if (CUresult e = arena_->create_guest_physical(devices_[s.device], v.bytes, &v.handle); e != CUDA_SUCCESS)
        return fail("cannot recreate physical allocation " + std::to_string(s.handle) + " of " +
                    std::to_string(v.bytes >> 20) + " MiB on device " + std::to_string(s.device) + ": " +
                    (e == CUDA_ERROR_OUT_OF_MEMORY ? "over the VM's device memory quota or the GPU's memory"
                                                   : describe(api_, e)));
    } else if (s.kind == ObjectKind::VmmMapping) {
      auto& m = std::get<VmmMappingObject>(data);
      Object* alloc = vol_.get(new_id.at(m.allocation));
      auto& av = alloc->as<VmmAllocationObject>();
      if (CUresult e = api_.cuMemMap(s.handle, m.bytes, m.offset, av.handle, 0); e != CUDA_SUCCESS)
        return fail("cannot map physical allocation " + std::to_string(alloc->handle) + " at " + hex(s.handle) +
                    " again: " + describe(api_, e));
      ++av.maps;
      m.allocation = alloc->id;
      m.mapped = true;
      const auto access = m.access;
      vol_.add(s.kind, s.device, s.handle, new_id.at(s.parent), std::move(data));  // unmapped by fail() from here
      for (const auto& [d, flags] : access) {
        const CUmemAccessDesc desc{{CU_MEM_LOCATION_TYPE_DEVICE, devices_[d]}, static_cast<CUmemAccess_flags>(flags)};
        if (CUresult e = api_.cuMemSetAccess(s.handle, std::get<VmmMappingObject>(s.data).bytes, &desc, 1);
            e != CUDA_SUCCESS)
          return fail("setting the access of device " + std::to_string(d) + " to the mapping at " + hex(s.handle) +
                      " failed: " + describe(api_, e));
      }
      new_id[s.id] = vol_.find(s.kind, s.handle)->id;
      continue;
    }
    new_id[s.id] = vol_.add(s.kind, s.device, s.handle, s.parent ? new_id.at(s.parent) : 0, std::move(data)).id;
  }
  make_current(current_);
  // Graphs, built again node by node (graph_state.cc), their nodes' handles, and executable
  // graphs instantiated from their mirrors.
  std::map<uint64_t, std::vector<CUgraphNode>> built;  // saved id -> its nodes, in order
  {
    uint64_t host_nodes = 0;
    for (const Saved& s : saved) {
      if (s.kind != ObjectKind::Graph && s.kind != ObjectKind::GraphNode && s.kind != ObjectKind::GraphExec) continue;
      if (vol_.find(s.kind, s.handle)) return fail("two " + std::string(kind_name(s.kind)) + "s with handle " + hex(s.handle));
      make_current(s.device);
      const ObjectId parent = new_id.at(s.parent);
      ObjectData data = s.data;
      if (s.kind == ObjectKind::GraphNode) {
        std::get<GraphNodeObject>(data).node = built.at(s.parent).at(s.node_index);
        if (s.handle & api::kHostNodeHandle) host_nodes = std::max(host_nodes, s.handle & ~api::kHostNodeHandle);
      } else if (s.kind == ObjectKind::Graph && std::get<GraphObject>(data).borrowed) {
        // A child graph node's graph: the one the driver embedded in the node just built, its
        // nodes in the order the program's handles name them, which describing it again must
        // show as saved (else a handle could name another node).
        const CUgraphNode owner = vol_.get(parent)->as<GraphNodeObject>().node;
        CUgraph g = nullptr;
        GraphDesc again;
        std::vector<CUgraphNode> nodes;
        std::string w;
        auto renamed = [&](uint64_t id) {
          const auto it = new_id.find(id);
          return it == new_id.end() ? uint64_t{0} : it->second;
        };
        if (CUresult e = api_.cuGraphChildGraphNodeGetGraph(owner, &g); e != CUDA_SUCCESS)
          return fail("graph " + hex(s.handle) + " of a child graph node: " + describe(api_, e));
        if (!describe_graph(g, &again, &nodes, &w) ||
            graph_fingerprint(again, [](uint64_t id) { return id; }) != graph_fingerprint(*s.graph, renamed))
          return fail("graph " + hex(s.handle) + " of a child graph node did not come back as it was saved" +
                      (w.empty() ? "" : ": " + w));
        std::get<GraphObject>(data).graph = g;
        built[s.id] = std::move(nodes);
      } else {
        CUgraph g = nullptr;
        std::vector<CUgraphNode> nodes;
        if (!build_graph(*s.graph, s.device, new_id, region, &g, &nodes, &err))
          return fail(std::string(kind_name(s.kind)) + " " + hex(s.handle) + ": " + err);
        if (s.kind == ObjectKind::Graph) {
          std::get<GraphObject>(data).graph = g;
        } else {
          auto& x = std::get<GraphExecObject>(data);
          x.mirror = g;
          x.from_mirror = true;
          if (CUresult e = api_.cuGraphInstantiateWithFlags(&x.exec, g, x.flags); e != CUDA_SUCCESS) {
            api_.cuGraphDestroy(g);
            return fail("instantiating executable graph " + hex(s.handle) + " failed: " + describe(api_, e));
          }
          for (const auto& [graph, from, to] : s.pairs)
            x.nodes[{new_id.at(graph), built.at(graph).at(from)}] = nodes.at(to);
          // Its nodes disabled again (the driver refuses a node of a kind that cannot be).
          for (uint32_t at : s.disabled) {
            if (CUresult e = api_.cuGraphNodeSetEnabled(x.exec, nodes.at(at), 0); e != CUDA_SUCCESS) {
              api_.cuGraphExecDestroy(x.exec);
              api_.cuGraphDestroy(g);
              return fail("disabling node " + std::to_string(at) + " of executable graph " + hex(s.handle) +
                          " again failed: " + describe(api_, e));
            }
            x.disabled.insert(nodes.at(at));
          }
        }
        built[s.id] = std::move(nodes);
      }
      new_id[s.id] = vol_.add(s.kind, s.device, s.handle, parent, std::move(data)).id;
    }
    next_host_node_ = std::max(next_host_node_, host_nodes);
    make_current(current_);
  }
  if (!recreate_texture_objects(std::move(textures), new_id, &err)) return fail(err);
  if (!restore_cublas_settings(&err)) return fail(err);
  if (!restore_cufft_settings(&err)) return fail(err);
  if (!restore_curand_settings(&err)) return fail(err);
  if (!restore_cublaslt_attributes(&err)) return fail(err);
  if (!restore_cudnn(&err)) return fail(err);
  allocated_ = allocated;
  // Module variables' bytes.
  while (h.type == kGlobalData) {
    const Object* g = vol_.find(ObjectKind::Global, h.id);
    if (!g) return fail("contents of an unknown module variable at " + hex(h.id));
    if (!in.read_payload(&payload, &err)) return fail(err);
    if (payload.size() != g->as<GlobalObject>().bytes) return fail("module variable contents of the wrong size");
    make_current(g->device);
    if (!payload.empty())
      if (CUresult e = api_.cuMemcpyHtoD_v2(h.id, payload.data(), payload.size()); e != CUDA_SUCCESS)
        return fail("writing module variable " + g->as<GlobalObject>().name + " failed: " + describe(api_, e));
    if (!in.next(&h, &err)) return fail(err.empty() ? "the state ends early" : err);
  }
  // Arrays' texels, into the arrays recreated above (every array of the state has them).
  std::set<ObjectId> filled;
  std::vector<std::byte> texels;
  while (h.type == kArrayData) {
    auto it = new_id.find(h.id);
    Object* o = it == new_id.end() ? nullptr : vol_.get(it->second);
    if (!o || (o->kind != ObjectKind::Array && o->kind != ObjectKind::MipmappedArray) ||
        o->as<ArrayObject>().level >= 0 || !h.is_blob() || !filled.insert(o->id).second)
      return fail("record " + std::to_string(h.index) + " is the contents of no array of the state (or of one twice)");
    const ArrayObject& a = o->as<ArrayObject>();
    uint64_t bytes = 0;
    array_bytes(a.desc, a.levels, &bytes);  // checked with its record
    if (h.payload_bytes != bytes) return fail("an array's contents of the wrong size");
    texels.resize(bytes);
    for (uint64_t off = 0;;) {
      std::span<const std::byte> chunk;
      if (!in.read_chunk_view(&chunk, &err)) return fail(err);
      if (chunk.empty()) break;
      if (chunk.size() > bytes - off) return fail("an array's contents are too long");
      std::memcpy(texels.data() + off, chunk.data(), chunk.size());
      off += chunk.size();
    }
    make_current(o->device);
    std::byte* at = texels.data();
    for (uint32_t l = 0; l < std::max<uint32_t>(a.levels, 1); ++l) {
      CUarray arr = a.array;
      if (o->kind == ObjectKind::MipmappedArray)
        if (CUresult e = api_.cuMipmappedArrayGetLevel(&arr, a.mipmap, l); e != CUDA_SUCCESS)
          return fail("finding a mipmapped array's level failed: " + describe(api_, e));
      const CUDA_ARRAY3D_DESCRIPTOR ld = level_desc(a.desc, l);
      if (CUresult e = copy_array_contents(api_, arr, ld, at, true); e != CUDA_SUCCESS)
        return fail("writing a CUDA array failed: " + describe(api_, e));
      uint64_t n = 0;
      array_bytes(ld, 0, &n);
      at += n;
    }
    if (!in.next(&h, &err)) return fail(err.empty() ? "the state ends early" : err);
  }
  size_t arrays = 0;
  for (ObjectKind k : {ObjectKind::Array, ObjectKind::MipmappedArray})
    for (const auto& [handle, id] : vol_.of(k)) arrays += vol_.get(id)->as<ArrayObject>().level < 0;
  if (filled.size() != arrays)
    return fail("the state lacks the contents of " + std::to_string(arrays - filled.size()) + " array(s)");
  // Physical allocations' bytes, each once, through a whole mapping of its own.
  std::set<ObjectId> vmm_filled;
  while (h.type == kVmmData) {
    auto it = new_id.find(h.id);
    Object* o = it == new_id.end() ? nullptr : vol_.get(it->second);
    if (!o || o->kind != ObjectKind::VmmAllocation || !h.is_blob() || !vmm_filled.insert(o->id).second)
      return fail("record " + std::to_string(h.index) + " is the contents of no physical allocation of the state (or of one twice)");
    const uint64_t bytes = o->as<VmmAllocationObject>().bytes;
    if (h.payload_bytes != bytes) return fail("a physical allocation's contents of the wrong size");
    make_current(o->device);
    uint64_t va = 0;
    if (vmm_map_whole(*o, &va, &err) != CUDA_SUCCESS) return fail(err);
    // The copy's mapping goes before fail() releases the rest (the arena's range with it).
    auto give_up = [&](const std::string& w) {
      vmm_unmap_whole(va, bytes);
      return fail(w);
    };
    for (uint64_t off = 0;;) {
      std::span<const std::byte> chunk;
      if (!in.read_chunk_view(&chunk, &err)) return give_up(err);
      if (chunk.empty()) {
        if (off != bytes) return give_up("the contents of physical allocation " + std::to_string(o->handle) + " are too short");
        break;
      }
      if (chunk.size() > bytes - off)
        return give_up("the contents of physical allocation " + std::to_string(o->handle) + " are too long");
      if (CUresult e = api_.cuMemcpyHtoD_v2(va + off, chunk.data(), chunk.size()); e != CUDA_SUCCESS)
        return give_up("writing physical allocation " + std::to_string(o->handle) + " failed: " + describe(api_, e));
      off += chunk.size();
    }
    // The last pageable copy may still be in flight: its fault is this allocation's.
    if (CUresult e = api_.cuCtxSynchronize(); e != CUDA_SUCCESS)
      return give_up("writing physical allocation " + std::to_string(o->handle) + " failed: " + describe(api_, e));
    vmm_unmap_whole(va, bytes);
    memory_bytes += bytes;
    if (!in.next(&h, &err)) return fail(err.empty() ? "the state ends early" : err);
  }
  make_current(current_);
  if (vmm_filled.size() != vol_.count(ObjectKind::VmmAllocation))
    return fail("the state lacks the contents of " + std::to_string(vol_.count(ObjectKind::VmmAllocation) - vmm_filled.size()) +
                " physical allocation(s)");
  // What the client exported to other programs of the VM, under the same tokens again (the
  // importers map and open them at their ipc_attach, after every client's resume).
  if (h.type == kIpcExports) {
    if (!in.read_payload(&payload, &err)) return fail(err);
    if (std::string w; !ipc_republish(payload, &w)) return fail(w);
    if (!in.next(&h, &err)) return fail(err.empty() ? "the state ends early" : err);
  }
  // The stream captures it had open (untrusted: checked here, begun last).
  struct SavedCapture {
    uint64_t stream = 0;
    int device = 0;
    uint32_t mode = 0;
    uint64_t id = 0;
    uint64_t into = 0;                      // the program's graph it captures into (its nodes), or
    const std::vector<CUgraphNode>* into_nodes = nullptr;
    GraphDesc graph;                        // its own
    std::vector<uint32_t> deps;
  };
  std::vector<SavedCapture> captures;
  if (h.type == kStreamCaptures) {
    if (!in.read_payload(&payload, &err)) return fail(err);
    state::ByteReader r(payload);
    auto bad = [&](const std::string& w) { return fail("bad stream capture record " + std::to_string(h.index) + ": " + w); };
    uint32_t count = 0;
    r.get_u32(&count);
    if (r.ok() && (count == 0 || count > kMaxSavedCaptures || count > r.remaining() / 32)) return bad("too many captures");
    uint32_t budget = kMaxSavedGraphNodes;
    std::set<uint64_t> streams, ids, graphs;
    for (uint32_t i = 0; r.ok() && i < count; ++i) {
      SavedCapture& c = captures.emplace_back();
      int32_t device = 0;
      r.get_u64(&c.stream);
      r.get_i32(&device);
      r.get_u32(&c.mode);
      r.get_u64(&c.id);
      r.get_u64(&c.into);
      if (!r.ok()) break;
      c.device = device;
      if (!valid_device(device) || !capture_stream(c.stream, device))
        return bad("a capture on a stream the client lacks (" + hex(c.stream) + " on device " + std::to_string(device) + ")");
      if (!streams.insert(c.stream).second) return bad("two captures on stream " + hex(c.stream));
      // The host begins captures thread-local or relaxed (on_StreamBeginCapture).
      if (c.mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c.mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return bad("a capture mode out of range (" + std::to_string(c.mode) + ")");
      if (c.id == 0 || !ids.insert(c.id).second) return bad("a capture id of 0 or twice");
      size_t nodes = 0;
      if (c.into) {
        const Object* g = vol_.find(ObjectKind::Graph, c.into);
        if (!g || g->device != c.device || g->as<GraphObject>().borrowed || !graphs.insert(c.into).second)
          return bad("a capture into a graph the client lacks (or into one twice)");
        for (const Saved& s : saved)
          if (s.kind == ObjectKind::Graph && s.handle == c.into) c.into_nodes = &built.at(s.id);
        if (!c.into_nodes) return bad("a capture into a graph the state does not hold");
        nodes = c.into_nodes->size();
      } else {
        if (std::string w; !read_graph(r, &c.graph, &budget, &w)) return bad(r.ok() ? w : r.error());
        nodes = c.graph.nodes.size();
      }
      uint32_t deps = 0;
      r.get_u32(&deps);
      if (r.ok() && (deps > api::kMaxGraphDeps || deps > nodes)) return bad("too many dependencies");
      for (uint32_t k = 0; r.ok() && k < deps; ++k) {
        uint32_t at = 0;
        r.get_u32(&at);
        if (r.ok() && (at >= nodes || std::ranges::find(c.deps, at) != c.deps.end()))
          return bad("a dependency beyond its graph's nodes, or named twice");
        c.deps.push_back(at);
      }
    }
    r.expect_end();
    if (!r.ok()) return bad(r.error());
    if (!in.next(&h, &err)) return fail(err.empty() ? "the state ends early" : err);
  }
  if (h.type != kClientEnd) return fail("record " + std::to_string(h.index) + " is not the end of the client's state");
  // Peer access last: both contexts exist now.
  for (const Saved& s : saved) {
    if (s.kind != ObjectKind::PeerAccess) continue;
    const int peer = static_cast<int>(s.handle & 0xffffffffu);
    if (!vol_.context(peer) && !context_of(peer)) return fail("cannot recreate peer access: " + describe(api_, ctx_error_));
    if (vol_.find(ObjectKind::PeerAccess, s.handle)) return fail("duplicate peer access");
    // The arena's grants came with its layout; the contexts' access is made anew (a pool's
    // grant, device == peer, is the arena's only).
    CUcontext peer_ctx = contexts_[peer];
    make_current(s.device);
    if (CUresult e = peer == s.device ? CUDA_SUCCESS : api_.cuCtxEnablePeerAccess(peer_ctx, 0); e != CUDA_SUCCESS)
      return fail("enabling peer access from device " + std::to_string(s.device) + " to " + std::to_string(peer) +
                  " failed: " + describe(api_, e));
    vol_.add(ObjectKind::PeerAccess, s.device, s.handle, vol_.context(s.device)->id, PeerAccessObject{});
  }
  // cuSPARSE and cuSOLVER objects: every recorded step, in the client's order across them, run
  // again through its handler (which checks it as a guest's call and records it anew), now that
  // device memory is back (an analysis reads the matrix); then each context waits for what
  // they ran.
  {
    struct At {
      uint64_t seq;
      const Saved* s;
      const NvobjStep* step;
    };
    std::vector<At> order;
    std::set<std::pair<ObjectKind, uint64_t>> handles;
    for (const Saved& s : saved) {
      if (s.kind != ObjectKind::Cusparse && s.kind != ObjectKind::Cusolver) continue;
      if (!handles.insert({s.kind, s.handle}).second) return fail("two cuSPARSE or cuSOLVER objects with handle " + hex(s.handle));
      for (const NvobjStep& step : std::get<NvobjObject>(s.data).steps) order.push_back({step.seq, &s, &step});
    }
    std::ranges::sort(order, {}, &At::seq);
    std::set<int> ran_on;
    const int current = current_;
    for (size_t i = 0; i < order.size(); ++i) {
      const At& at = order[i];
      if (i > 0 && at.seq == order[i - 1].seq) return fail("two cuSPARSE or cuSOLVER steps in the same place");
      // Made in its device's context (the handlers use the current one); set in its handle's.
      current_ = at.s->device;
      make_current(at.s->device);
      ran_on.insert(at.s->device);
      const int32_t st = nvobj_replay(at.s->kind, at.step->call, at.step->args);
      if (st != 0) {
        current_ = current;
        return fail(std::string("replaying ") + api::call_name(at.step->call) + " for the " +
                    (at.s->kind == ObjectKind::Cusparse ? "cuSPARSE" : "cuSOLVER") + " object " + hex(at.s->handle) +
                    " failed with status " + std::to_string(st));
      }
    }
    current_ = current;
    for (int d : ran_on) {
      make_current(d);
      if (CUresult e = api_.cuCtxSynchronize(); e != CUDA_SUCCESS)
        return fail("replaying the cuSPARSE and cuSOLVER calls on device " + std::to_string(d) + " failed: " + describe(api_, e));
    }
    make_current(current_);
  }
  // A stream's access policy window names the client's own memory (StreamSetAttribute checks
  // it so): one a state file names otherwise is refused, now that all of that memory is back.
  for (ObjectKind k : {ObjectKind::Stream, ObjectKind::PerThreadStream, ObjectKind::NullStream})
    for (const auto& [handle, id] : vol_.of(k))
      for (const auto& [attr, v] : vol_.get(id)->as<StreamObject>().attributes)
        if (attr == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW && v.num_bytes && owner_of(v.base_ptr, v.num_bytes) < 0)
          return fail("the access policy window of " + std::string(kind_name(k)) + " " + hex(handle) +
                      " covers memory that is not the client's");
  vol_.set_last_handle(ObjectKind::Module, last_handles[0]);
  vol_.set_last_handle(ObjectKind::Function, last_handles[1]);
  vol_.set_last_handle(ObjectKind::ManagedVar, last_handles[2]);
  vol_.set_last_handle(ObjectKind::VmmAllocation, last_handles[3]);  // each kept handle was checked against it
  // Arrays' handles: past the highest kept (a freed one's handle may come again; the guest
  // forgot it when it freed it).
  for (ObjectKind k : {ObjectKind::Array, ObjectKind::MipmappedArray})
    if (!vol_.of(k).empty()) vol_.set_last_handle(k, std::max(vol_.last_handle(k), vol_.of(k).rbegin()->first));
  for (ObjectKind k : {ObjectKind::Module, ObjectKind::Function, ObjectKind::ManagedVar})
    if (!vol_.of(k).empty() && vol_.of(k).rbegin()->first > vol_.last_handle(k))
      return fail("a " + std::string(kind_name(k)) + " handle beyond the saved counter");
  if (!contexts_[current_]) {
    if (!ensure_context()) return fail("cannot create a CUDA context: " + describe(api_, ctx_error_));
  }
  // GPU time 0 of the events recorded before the suspend, on each device, before any of the
  // client's work.
  resume_marks_.assign(contexts_.size(), nullptr);
  for (size_t d = 0; d < contexts_.size(); ++d) {
    if (!contexts_[d]) continue;
    make_current(static_cast<int>(d));
    CUevent mark = nullptr;
    if (api_.cuEventCreate(&mark, 0u /* CU_EVENT_DEFAULT */) == CUDA_SUCCESS && api_.cuEventRecord(mark, nullptr) == CUDA_SUCCESS)
      resume_marks_[d] = mark;
    else if (mark)
      api_.cuEventDestroy_v2(mark);
  }
  // The open captures, begun again into their graphs after the same nodes, last: nothing of
  // the resume's own may be captured (or invalidate them: the marks above are on the legacy
  // stream).
  for (const SavedCapture& c : captures) {
    make_current(c.device);
    CUgraph g = nullptr;
    std::vector<CUgraphNode> nodes;
    if (c.into) {
      g = vol_.find(ObjectKind::Graph, c.into)->as<GraphObject>().graph;
      nodes = *c.into_nodes;
    } else {
      if (!build_graph(c.graph, c.device, new_id, region, &g, &nodes, &err))
        return fail("the graph of the stream capture on stream " + hex(c.stream) + ": " + err);
      carried_capture_graphs_[c.stream] = g;  // the host's until the program ends the capture
    }
    std::vector<CUgraphNode> deps;
    for (uint32_t at : c.deps) deps.push_back(nodes.at(at));
    const CUstream s = capture_stream(c.stream, c.device)->as<StreamObject>().stream;
    if (CUresult e = api_.cuStreamBeginCaptureToGraph(s, g, deps.empty() ? nullptr : deps.data(), nullptr, deps.size(),
                                                      static_cast<int>(c.mode));
        e != CUDA_SUCCESS)
      return fail("beginning the stream capture on stream " + hex(c.stream) + " again failed: " + describe(api_, e));
    ++captures_open_;
    open_captures_[c.stream] = {static_cast<int>(c.mode), c.device};
    if (c.into) capture_into_[c.stream] = c.into;
    // The id the program knows stays (cudaStreamGetCaptureInfo).
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (CUresult e = api_.cuStreamGetCaptureInfo_v3(s, &status, &id, nullptr, nullptr, nullptr, nullptr); e != CUDA_SUCCESS)
      return fail("the stream capture on stream " + hex(c.stream) + " begun again is not described: " + describe(api_, e));
    capture_ids_[id] = c.id;
    capture_id_floor_ = std::max<unsigned long long>(capture_id_floor_, c.id);
  }
  make_current(current_);
  closing_.store(false);
  output_possible_ = true;
  suspended_ = false;
  suspended_memory_ = 0;
  publish_status();
  phases.mark("the rest");
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  VMRPC_LOG(kInfo, "stub", log_tag_ + ": resumed: " + std::to_string(vol_.size()) + " objects, " +
                               std::to_string(memory_bytes >> 20) + " MiB of device memory in " +
                               std::to_string(static_cast<int>(secs * 1000)) + " ms (" + phases.text() + ")");
  return true;
}

// A state's kIpcExports record (untrusted): each export checked against the client just
// recreated, then published under its token again. The export maps are this state's from
// here on (a failure below parks what was republished: resume's fail releases them).
bool Session::ipc_republish(std::span<const std::byte> payload, std::string* why) {
  auto bad = [&](const std::string& w) {
    *why = "bad IPC export record: " + w;
    return false;
  };
  state::ByteReader r(payload);
  uint32_t n = 0;
  r.get_u32(&n);
  if (!r.ok() || r.remaining() != static_cast<uint64_t>(n) * kSavedIpcExportBytes)
    return bad("its size does not match its " + std::to_string(n) + " entries");
  if (!limits_.ipc) {
    *why = "the client shared memory, events or pools with other programs of its VM, and this stub has no IPC "
           "table (it runs without IPC between programs)";
    return false;
  }
  struct Entry {
    uint8_t kind;
    uint64_t what;
    int32_t device;
    std::array<uint8_t, 16> token;
  };
  std::vector<Entry> entries(n);
  std::set<std::array<uint8_t, 16>> tokens;
  size_t pools = 0;
  for (Entry& e : entries) {
    r.get_u8(&e.kind);
    r.get_u64(&e.what);
    r.get_i32(&e.device);
    get_token(r, &e.token);
    if (!r.ok()) return bad(r.error());
    if (!tokens.insert(e.token).second) return bad("a token twice");
    switch (e.kind) {
      case kIpcExportMemory: {
        const Object* o = vol_.find(ObjectKind::Allocation, e.what);
        if (!o) return bad("exported allocation " + hex(e.what) + " is not an allocation of the client");
        break;
      }
      case kIpcExportEvent: {
        const Object* o = vol_.find(ObjectKind::Event, e.what);
        if (!o || !(o->as<EventObject>().flags & CU_EVENT_INTERPROCESS) || o->as<EventObject>().imported)
          return bad("exported event " + hex(e.what) + " is not an interprocess event of the client");
        break;
      }
      case kIpcExportPool:
        if (e.what == 0 || !valid_device(e.device)) return bad("exported pool " + hex(e.what) + " on a bad device");
        if (++pools > kMaxPoolExports) return bad("too many exported pools");
        break;
      default:
        return bad("unknown kind " + std::to_string(e.kind));
    }
  }
  for (const Entry& e : entries) {
    CUresult res = CUDA_SUCCESS;
    std::array<uint8_t, 16> token{};
    std::string what;
    switch (e.kind) {
      case kIpcExportMemory:
        what = "allocation " + hex(e.what) + " (exported with cudaIpcGetMemHandle)";
        res = ipc_export_memory(*vol_.find(ObjectKind::Allocation, e.what), &e.token, &token);
        break;
      case kIpcExportEvent:
        what = "interprocess event " + hex(e.what) + " (exported with cudaIpcGetEventHandle)";
        res = ipc_export_event(*vol_.find(ObjectKind::Event, e.what), &e.token, &token);
        break;
      case kIpcExportPool: {
        what = "memory pool " + hex(e.what) + " (exported with cudaMemPoolExportToShareableHandle)";
        IpcRecord rec;
        rec.kind = IpcRecord::kPool;
        rec.host_device = devices_[e.device];
        rec.owner = ipc_owner_;
        if (!limits_.ipc->republish(e.token, rec, -1)) res = CUDA_ERROR_INVALID_HANDLE;
        else ipc_pool_exports_[e.what] = PoolExport{e.token, e.device};
        break;
      }
    }
    if (res != CUDA_SUCCESS) {
      *why = what + " cannot be shared again under its handle: " +
             (res == CUDA_ERROR_INVALID_HANDLE ? std::string("the VM's table refused it (its handle names another "
                                                             "program's export: a state of another VM or a forged one)")
              : res == CUDA_ERROR_NOT_SUPPORTED ? std::string("the GPU or driver does not share memory by POSIX file "
                                                             "descriptor here")
                                                : describe(api_, res));
      return false;
    }
  }
  return true;
}

}  // namespace vmcuda::host
