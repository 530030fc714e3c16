#include "session.h"

#include "launch_timeout.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "gpu_worker.h"
#include "ipc_registry.h"
#include "mps.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;


Session::Session(const DriverApi& api, const StubLimits& limits, std::vector<int> devices,
                 const vmrpc::SlotInfo& info)
    : api_(api), limits_(limits), devices_(std::move(devices)), info_(info), contexts_(devices_.size(), nullptr) {
  log_tag_ = "client " + std::to_string(info.connection_id) + "/" + std::to_string(info.slot) + " (pid " +
             std::to_string(info.owner_tag) + ")";
  if (limits_.ledger) account_ = limits_.ledger->open_account();
  if (limits_.ipc) ipc_owner_ = random_ipc_owner();
  // Sized once (a move keeps the count): the GPU's working thread may open a lane.
  lanes_.resize(devices_.size());
  lane_failed_.resize(devices_.size(), 0);
  arena_ = make_arena();
  if (limits_.kernel_time_limit.count() > 0 && limits_.on_kernel_timeout)
    watchdog_ = std::make_unique<KernelWatchdog>(api_, limits_.kernel_time_limit,
                                                 [tag = log_tag_, f = limits_.on_kernel_timeout](int64_t age_ms) {
                                                   f(tag, age_ms);
                                                 });
}

std::unique_ptr<DeviceArena> Session::make_arena() {
  auto arena = std::make_unique<DeviceArena>(api_, [this] { return synchronize_all(); });
  arena->keep_range_while_released(limits_.shared_process);
  if (limits_.ledger)
    arena->set_meter([this](int64_t delta) {
      if (!account_) return false;  // more clients than the ledger has entries
      if (delta < 0) {
        account_->refund(static_cast<uint64_t>(-delta));
        return true;
      }
      if (account_->charge(static_cast<uint64_t>(delta))) return true;
      if (!quota_warned_) {
        quota_warned_ = true;
        VMRPC_LOG(kWarn, "stub", log_tag_ + ": the VM's device memory quota (" +
                                     std::to_string(limits_.ledger->limit() >> 20) + " MiB) is used up; its " +
                                     "programs get cudaErrorMemoryAllocation (vmcuda-stub --memory-quota-mib)");
      }
      return false;
    });
  return arena;
}

uint64_t Session::memory_quota() const { return limits_.ledger ? limits_.ledger->limit() : ~0ull; }

uint64_t Session::quota_left() const {
  if (!limits_.ledger) return ~0ull;
  const uint64_t limit = limits_.ledger->limit(), used = limits_.ledger->used();
  return used >= limit ? 0 : limit - used;
}

CUresult Session::synchronize_all() {
  CUresult first = CUDA_SUCCESS;
  for (size_t d = 0; d < contexts_.size(); ++d)
    if (contexts_[d]) {
      make_current(static_cast<int>(d));
      if (CUresult r = api_.cuCtxSynchronize(); r != CUDA_SUCCESS && first == CUDA_SUCCESS) first = r;
    }
  if (contexts_[current_]) make_current(current_);
  return first;
}

Session::~Session() { close(); }

void Session::make_current(int device) {
  if (bound_ == device) return;
  // The slot's service thread runs this client alone: its context stays current here.
  api_.cuCtxSetCurrent(contexts_[device]);
  bound_ = device;
}

bool Session::ensure_context() {
  if (!contexts_[current_]) {
    // The worker process's own host memory (the driver's, from its first context on) is the
    // VM's: no room in its host memory bound, no context (cudaErrorMemoryAllocation), and the
    // programs already served keep theirs. Charged once; given back with the client.
    if (!worker_charged_ && limits_.worker_host_bytes) {
      if (!charge_host(limits_.worker_host_bytes, "a worker process (VMCUDA_WORKER_HOST_BYTES)")) {
        ctx_error_ = CUDA_ERROR_OUT_OF_MEMORY;
        return false;
      }
      worker_charged_ = true;
    }
    CUdevice dev;
    CUcontext ctx = nullptr;
    // The context's own device memory is the VM's too: no room in its quota, no context
    // (natively: a GPU without room for one).
    if (limits_.context_bytes && account_ && !account_->charge(limits_.context_bytes)) {
      ctx_error_ = CUDA_ERROR_OUT_OF_MEMORY;
      if (!said_no_context_room_)
        VMRPC_LOG(kWarn, "stub", log_tag_ + ": no room in the VM's device memory quota for a CUDA context (" +
                                     std::to_string(limits_.context_bytes >> 20) + " MiB)");
      said_no_context_room_ = true;
      return false;
    }
    CUresult r = api_.cuDeviceGet(&dev, devices_[current_]);
    {
      // A resume needs its context where this one goes, alignment slack included: fence it
      // (address_hold.h).
      std::lock_guard l(context_layout_mu());
      const std::vector<AddressRange> before = current_mappings();
      if (r == CUDA_SUCCESS) r = api_.cuCtxCreate_v4(&ctx, nullptr, 0, dev);
      // Under MPS a new program waits, at most kMpsRecoveryWaitMs, for the server to take
      // clients again after a fault that ended others (mps.h); only this client's thread waits.
      for (int waited = 0; r != CUDA_SUCCESS && mps_client() && mps_recovering(r) && waited < kMpsRecoveryWaitMs;
           waited += 100) {
        if (waited == 0)
          VMRPC_LOG(kWarn, "stub", log_tag_ + ": the VM's MPS server does not take new programs yet (" +
                                       describe(api_, r) + "): it recovers from a fault; waiting");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        r = api_.cuCtxCreate_v4(&ctx, nullptr, 0, dev);
      }
      if (r == CUDA_SUCCESS) {
        const std::vector<AddressRange> after = current_mappings(), added = vanished_ranges(after, before);
        if (const uint64_t low = lowest_of_cluster(added); low)
          context_fence_.add({free_below(after, low, kContextFenceBytes)});
      }
    }
    if (r != CUDA_SUCCESS) {
      if (limits_.context_bytes && account_) account_->refund(limits_.context_bytes);
      ctx_error_ = r;
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": cannot create a CUDA context on device " +
                                   std::to_string(devices_[current_]) + ": " + describe(api_, r));
      return false;
    }
    contexts_[current_] = ctx;
    if (watchdog_) watchdog_->add_context(ctx);
    if (Object* o = vol_.context(current_))
      o->as<ContextObject>().ctx = ctx;  // a resume recreating it
    else
      vol_.add(ObjectKind::Context, current_, static_cast<uint64_t>(current_), 0, ContextObject{ctx});
    bound_ = -1;
  }
  make_current(current_);
  return true;
}

void Session::add_allocation(uint64_t ptr, uint64_t bytes) {
  vol_.add(ObjectKind::Allocation, current_, ptr, vol_.context(current_)->id, AllocationObject{bytes});
  allocated_ += bytes;
  publish_status();
}

void Session::publish_status() {
  // The arena's memory and the arrays' (outside it; charged to the VM as they are made).
  uint64_t arrays = 0;
  for (ObjectKind k : {ObjectKind::Array, ObjectKind::MipmappedArray})
    for (const auto& [handle, id] : vol_.of(k)) arrays += vol_.get(id)->as<ArrayObject>().charged;
  published_device_bytes_.store((arena_ ? arena_->physical_bytes() : 0) + arrays, std::memory_order_relaxed);
  published_allocated_.store(allocated_, std::memory_order_relaxed);
  published_module_bytes_.store(module_bytes_, std::memory_order_relaxed);
  published_objects_.store(vol_.size(), std::memory_order_relaxed);
  published_suspended_.store(suspended_, std::memory_order_relaxed);
  std::lock_guard l(published_mu_);
  published_devices_ = devices_;
}

namespace {
// Destroys a driver handle once (`destroy` on it unless null) and nulls it.
template <class H, class F>
CUresult destroy_once(H& handle, F destroy) {
  const CUresult e = handle ? destroy(handle) : CUDA_SUCCESS;
  handle = nullptr;
  return e;
}
}  // namespace

CUresult Session::destroy_entry(ObjectKind kind, uint64_t handle, int32_t unknown) {
  Object* o = vol_.find(kind, handle);
  if (!o) return unknown;
  const CUresult e = release(*o, Release::kClose);
  vol_.remove(o->id);
  make_current(current_);
  return e;
}

CUresult Session::release(Object& o, Release how) {
  if (o.device >= 0 && contexts_[o.device]) make_current(o.device);
  switch (o.kind) {
    case ObjectKind::Context: {
      CUcontext& c = o.as<ContextObject>().ctx;
      if (how == Release::kReset || !c) return CUDA_SUCCESS;  // a reset keeps the context
      // The stub's own stream for managed pulls lives in it too.
      if (static_cast<size_t>(o.device) < managed_streams_.size() && managed_streams_[o.device]) {
        api_.cuStreamDestroy_v2(managed_streams_[o.device]);
        managed_streams_[o.device] = nullptr;
      }
      if (watchdog_) watchdog_->remove_context(c);  // no probe waits on it any more
      drop_lane(o.device);  // its markers live in the context
      CUresult e = CUDA_SUCCESS;
      if (static_cast<size_t>(o.device) < ipc_keepers_.size() && ipc_keepers_[o.device]) {
        // It holds interprocess events other clients of the process may still use (ipc.cc):
        // the last holder destroys it.
        ipc_keepers_[o.device]->orphaned = true;
        ipc_keepers_[o.device].reset();
      } else {
        e = api_.cuCtxDestroy_v2(c);
      }
      c = nullptr;
      contexts_[o.device] = nullptr;
      if (limits_.context_bytes && account_) account_->refund(limits_.context_bytes);
      if (static_cast<size_t>(o.device) < resume_marks_.size()) resume_marks_[o.device] = nullptr;  // went with it
      bound_ = -1;
      return e;
    }
    case ObjectKind::Allocation:
      // No new opens of it (ipc.cc); a suspend keeps its token for the resume to republish.
      if (how == Release::kSuspend) ipc_park_export(o.handle);
      else ipc_forget_export(o.handle);
      // Closing or suspending: the arena gives back its memory wholesale afterwards (close)
      // or keeps the layout for the resume (suspend). A reset frees it as cudaFree would.
      if (how == Release::kReset && arena_) {
        allocated_ -= o.as<AllocationObject>().bytes;
        return arena_->free(o.handle);
      }
      return CUDA_SUCCESS;
    case ObjectKind::Module: {
      // Its charge goes back whichever way it goes (a resume charges it again).
      ModuleObject& m = o.as<ModuleObject>();
      if (account_ && m.charged) account_->refund(m.charged);
      module_bytes_ -= std::min(module_bytes_, m.charged);
      m.charged = 0;
      return destroy_once(m.module, api_.cuModuleUnload);
    }
    case ObjectKind::Function:
    case ObjectKind::Global:
    case ObjectKind::ManagedVar:
      return CUDA_SUCCESS;  // the driver frees them with their module
    case ObjectKind::Stream:
    case ObjectKind::PerThreadStream:
      return destroy_once(o.as<StreamObject>().stream, api_.cuStreamDestroy_v2);
    case ObjectKind::NullStream: {
      // The driver's, never destroyed. A reset gives it a new stream's attributes, as the new
      // context of a native cudaDeviceReset has (the stub keeps its context).
      if (how != Release::kReset) return CUDA_SUCCESS;
      CUstream fresh = nullptr;
      CUresult e = api_.cuStreamCreateWithPriority(&fresh, 0, 0);
      if (e == CUDA_SUCCESS) e = api_.cuStreamCopyAttributes(nullptr, fresh);
      destroy_once(fresh, api_.cuStreamDestroy_v2);
      return e;
    }
    case ObjectKind::Event: {
      if (how == Release::kSuspend) ipc_park_event(o.handle);
      else ipc_forget_event(o.handle);
      EventObject& ev = o.as<EventObject>();
      if (ev.shared) {  // shared within the process (ipc.cc): its last holder destroys it
        ev.shared.reset();
        ev.event = nullptr;
        return CUDA_SUCCESS;
      }
      return destroy_once(ev.event, api_.cuEventDestroy_v2);
    }
    case ObjectKind::IpcMemory: {
      // Unmapped whichever way it goes (a suspend saved where it was: the resume maps it
      // again, Session::ipc_attach).
      IpcMemoryObject& m = o.as<IpcMemoryObject>();
      const CUresult e = m.mapped && m.va && arena_ ? arena_->unmap_import(m.va) : CUDA_SUCCESS;
      m.mapped = false;
      return e;
    }
    case ObjectKind::HostRegistration: {  // portable: any context
      // Its charge goes back whichever way it goes (a resume pins and charges it again).
      HostRegistrationObject& hr = o.as<HostRegistrationObject>();
      if (account_ && hr.charged) account_->refund(hr.charged, VmLedger::kHost);
      hr.charged = 0;
      return destroy_once(hr.host, api_.cuMemHostUnregister);
    }
    case ObjectKind::Limit:
      // Goes with a destroyed context; a reset puts the value from before back. Either way
      // its memory goes back to the VM.
      charge_limit(o.as<LimitObject>().charged, 0);
      o.as<LimitObject>().charged = 0;
      return how == Release::kReset ? api_.cuCtxSetLimit(static_cast<int>(o.handle & 0xffffffffu),
                                                         o.as<LimitObject>().default_value)
                                    : CUDA_SUCCESS;
    case ObjectKind::CacheConfig:
      return how == Release::kReset ? api_.cuCtxSetCacheConfig(o.as<CacheConfigObject>().default_value)
                                    : CUDA_SUCCESS;
    case ObjectKind::GraphNode:
      return CUDA_SUCCESS;  // goes with its graph
    case ObjectKind::Graph:
      if (o.as<GraphObject>().borrowed) return CUDA_SUCCESS;  // its child graph node's
      return destroy_once(o.as<GraphObject>().graph, api_.cuGraphDestroy);
    case ObjectKind::GraphExec: {
      GraphExecObject& x = o.as<GraphExecObject>();
      const CUresult e = destroy_once(x.exec, api_.cuGraphExecDestroy);
      destroy_once(x.mirror, api_.cuGraphDestroy);
      destroy_once(x.origin, api_.cuGraphDestroy);
      x.nodes.clear();
      x.origin_nodes.clear();
      return e;
    }
    case ObjectKind::Array:
    case ObjectKind::MipmappedArray: {
      // The quota gets its bytes back whichever way it goes (a suspend charges them again
      // at the resume); a mipmapped array's levels go with it.
      ArrayObject& arr = o.as<ArrayObject>();
      if (account_ && arr.charged) account_->refund(arr.charged);
      arr.charged = 0;
      if (arr.level >= 0) return arr.array = nullptr, CUDA_SUCCESS;
      return o.kind == ObjectKind::Array ? destroy_once(arr.array, api_.cuArrayDestroy)
                                         : destroy_once(arr.mipmap, api_.cuMipmappedArrayDestroy);
    }
    case ObjectKind::TexObject: {
      CUtexObject& t = o.as<TexObject>().value;
      const CUresult e = t ? api_.cuTexObjectDestroy(t) : CUDA_SUCCESS;
      t = 0;
      return e;
    }
    case ObjectKind::SurfObject: {
      CUsurfObject& t = o.as<SurfObject>().value;
      const CUresult e = t ? api_.cuSurfObjectDestroy(t) : CUDA_SUCCESS;
      t = 0;
      return e;
    }
    case ObjectKind::CublasHandle:
      return cublas_release(o.as<CublasHandleObject>());
    case ObjectKind::CublasLt:
      return cublaslt_release(o.as<CublasLtObject>());
    case ObjectKind::CufftPlan:
      return cufft_release(o.as<CufftPlanObject>());
    case ObjectKind::CurandGenerator:
      return curand_release(o.as<CurandGeneratorObject>());
    case ObjectKind::Cudnn:
      return cudnn_release(o.as<CudnnObject>());
    case ObjectKind::Cusparse:
      return cusparse_release(o.as<NvobjObject>());
    case ObjectKind::Cusolver:
      return cusolver_release(o.as<NvobjObject>());
    case ObjectKind::VmmReservation:
      if (arena_) arena_->free_guest(o.handle, o.as<VmmReservationObject>().bytes);
      return CUDA_SUCCESS;
    case ObjectKind::VmmMapping:
      return vmm_unmap(o);
    case ObjectKind::VmmAllocation: {
      auto& v = o.as<VmmAllocationObject>();
      const CUresult e = v.handle && arena_ ? arena_->release_guest_physical(v.handle, v.bytes) : CUDA_SUCCESS;
      v.handle = 0;
      return e;
    }
    case ObjectKind::PeerAccess:
      if (how == Release::kReset) {
        // Both directions of a pair go (set_peer_access also takes the arena's grant back).
        const int peer = static_cast<int>(o.handle & 0xffffffffu);
        return set_peer_access(o.device, peer, false);
      }
      return CUDA_SUCCESS;
  }
  return CUDA_SUCCESS;
}

void Session::release_all(Release how) {
  vmm_unmap_all();  // before any allocation or context goes, whatever the walk's order
  vol_.walk_children_first([&](Object& o) { release(o, how); });
  vol_.clear();
  // Captures went with their streams; a graph a resume built for one is the host's.
  for (const auto& [stream, graph] : carried_capture_graphs_) api_.cuGraphDestroy(graph);
  carried_capture_graphs_.clear();
  open_captures_.clear();
  capture_into_.clear();
  capture_ids_.clear();
  capture_events_.clear();
  captures_open_ = 0;
  for (CUcontext& c : contexts_) c = nullptr;
  resume_marks_.clear();  // they went with their contexts
  managed_streams_.clear();
  managed_dirty_.clear();
  allocated_ = 0;
  bound_ = -1;
}

void Session::open_lane_slow(CUstream stream, const vmrpc::CallContext& ctx) {
  if (lanes_.size() < devices_.size()) {
    lanes_.resize(devices_.size());
    lane_failed_.resize(devices_.size(), 0);
  }
  if (lane_failed_[current_] || !contexts_[current_]) return;
  if (GpuShare* g = limits_.fair_share->gpu(devices_[current_])) lanes_[current_] = g->open_lane(api_, contexts_[current_]);
  if (!lanes_[current_]) {
    lane_failed_[current_] = 1;  // not counted (said in the log once per GPU)
    return;
  }
  fair_launch(stream, ctx);
}

void Session::drop_lane(int device) {
  if (static_cast<size_t>(device) >= lanes_.size()) return;
  lanes_[device].reset();
  lane_failed_[device] = 0;
}

void Session::batch_done() {
  if (!launched_in_batch_ || !limits_.fair_share) return;
  launched_in_batch_ = false;
  const bool captures = captures_open_ != 0;
  for (size_t d = 0; d < lanes_.size(); ++d) {
    if (!contexts_[d]) continue;
    if (limits_.gpu_threads) {
      // The launches ran (or will) on the GPU's working thread, which also opens the lanes:
      // the markers go after them there.
      posted_.fetch_add(1, std::memory_order_relaxed);
      GpuWorker::of(devices_[d]).post([this, d, captures] {
        if (lanes_[d]) {
          api_.cuCtxSetCurrent(contexts_[d]);
          bound_ = static_cast<int>(d);
          lanes_[d]->batch_done(captures);
        }
        if (posted_.fetch_sub(1, std::memory_order_release) == 1) posted_.notify_all();
      });
    } else if (lanes_[d]) {
      make_current(static_cast<int>(d));
      lanes_[d]->batch_done(captures);
    }
  }
  if (!limits_.gpu_threads && contexts_[current_]) make_current(current_);
}

void Session::close() {
  const size_t freed = vol_.count(ObjectKind::Allocation), mods = vol_.count(ObjectKind::Module),
               streams = vol_.count(ObjectKind::Stream), events = vol_.count(ObjectKind::Event);
  const uint64_t bytes = allocated_;
  // Host functions' gates stop waiting for a guest that is gone (host_func.cc), so that the
  // synchronize below ends.
  closing_.store(true);
  drain_posted(nullptr);  // after closing_: a host function gate handed over gives up
  // Nothing of the client may still run when its memory (and the connection's heap,
  // which async copies may be reading or writing) goes away.
  synchronize_all();
  // Children before parents: events, streams, modules (their functions and variables),
  // host registrations, then each context; the arena's memory (every allocation) after
  // the walk: unmapped, released, its range and index given back, so a later session may
  // take the same range.
  vol_.walk_children_first([&](Object& o) {
    if (o.kind != ObjectKind::Context) release(o, Release::kClose);
  });
  if (limits_.ipc) ipc_forget_all();  // with a suspended client's parked tokens
  arena_.reset();
  release_all(Release::kClose);  // the contexts
  pitches_.clear();
  free_gates(true);  // the driver calls no gate of a destroyed context
  publish_status();
  if (freed || mods || streams || events)
    VMRPC_LOG(kInfo, "stub", log_tag_ + ": closed; freed " + std::to_string(freed) + " allocations (" +
                                 std::to_string(bytes) + " bytes), " + std::to_string(mods) + " modules, " +
                                 std::to_string(streams) + " streams and " + std::to_string(events) + " events");
  // Which libraries the program used through vmcuda (a framework's own copies would show none).
  std::string libraries;
  for (size_t l = 0; l < kRemotedLibraries; ++l)
    if (const uint64_t n = library_calls_[l].load(std::memory_order_relaxed))
      libraries += std::string(libraries.empty() ? "" : ", ") + kLibraryNames[l] + " " + std::to_string(n);
  if (!libraries.empty()) VMRPC_LOG(kInfo, "stub", log_tag_ + ": library calls served: " + libraries);
}

bool Session::owns_2d(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height) const {
  if (width > pitch) return false;
  if (height == 0 || width == 0) return true;
  // pitch * (height - 1) + width, refused when it overflows.
  if (pitch != 0 && height - 1 > (~0ull - width) / pitch) return false;
  return owns_range(ptr, pitch * (height - 1) + width);
}

// The calls that only issue work and never wait for the GPU: with working threads per GPU
// (gpu_worker.h) they run there. Heap copies the guest waits for (kHeapCopyWait), heap copies
// from or into memory this client has not pinned (the driver copies pageable memory
// synchronously, behind the stream's earlier work: on the working thread that would stall
// every client of the GPU behind one's long kernel: issue 10, finding 2), inline async
// copies (pageable bytes too) and everything that synchronizes stay on the client's service
// thread.
bool Session::issues_only(api::Call c, std::span<const std::byte> args) const {
  const uint32_t flags = api::call_flags(static_cast<uint32_t>(c));
  if (flags & api::kIssues) return true;
  if ((flags & api::kIssuesIfPinned) == 0) return false;
  static_assert(std::is_same_v<api::CallTraits<api::Call::CopyToDeviceHeapAsync>::Args, api::CopyHeapAsyncArgs> &&
                std::is_same_v<api::CallTraits<api::Call::CopyFromDeviceHeapAsync>::Args, api::CopyHeapAsyncArgs>);
  api::CopyHeapAsyncArgs a{};
  if (args.size() != sizeof a) return false;  // the handler refuses it on the service thread
  std::memcpy(&a, args.data(), sizeof a);
  return (a.flags & api::kHeapCopyWait) == 0 && heap_pinned(a.host.offset, a.host.bytes);
}

// Whether [offset, offset+bytes) of the shared heap lies in one block this client pinned.
bool Session::heap_pinned(uint64_t offset, uint64_t bytes) const {
  const auto& pinned = vol_.of(ObjectKind::HostRegistration);
  auto it = pinned.upper_bound(offset);
  if (it == pinned.begin()) return false;
  --it;
  const uint64_t off = offset - it->first, size = vol_.get(it->second)->as<HostRegistrationObject>().bytes;
  return off < size && bytes <= size - off;
}

int32_t Session::call(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
                      std::span<std::byte> reply, uint32_t& reply_bytes) {
  region_ = &ctx.region;
  if (suspended_) {
    // The slot is held while suspended; a call can only come from a guest that was let go
    // without its state (a failed resume): a defined error, never another context.
    if (!said_suspended_) VMRPC_LOG(kWarn, "stub", log_tag_ + ": calls while the client is suspended are refused");
    said_suspended_ = true;
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  // Calls that need no context answer even when the device cannot make one.
  const auto c = static_cast<api::Call>(call_id);
  if (api::call_flags(call_id) & api::kLaunches) launched_in_batch_ = true;
  if (const int lib = remoted_library_of(call_id); lib >= 0 &&
      library_calls_[lib].fetch_add(1, std::memory_order_relaxed) == 0)
    // Once per library and program (a worker may end by SIGKILL, before any closing line):
    // which copy of a library a framework really used.
    VMRPC_LOG(kInfo, "stub", log_tag_ + ": serving the program's " + kLibraryNames[lib] + " calls at the library's API");  // batch_done() records what it left pending
  // Work that only issues goes to the GPU's working thread and is answered at once: the
  // guest queued it anyway (lazy RPC), so its error, if any, comes with a later batch
  // (SlotControl::late_status), as a queued call's does. Until the working thread ran it,
  // this thread touches nothing of the session but the hand-over.
  if (limits_.gpu_threads && captures_open_ == 0 && issues_only(c, args) && contexts_[current_]) {
    post_to_gpu(ctx, call_id, args);
    reply_bytes = 0;
    return 0;
  }
  drain_posted(&ctx);  // everything else runs after what was handed over, as the app ordered it
  if ((api::call_flags(call_id) & api::kNoContext) == 0 && !ensure_context()) return ctx_error_;
  const int32_t status = dispatch(ctx, call_id, args, reply, reply_bytes);
  return kernel_time_limit_expired().load(std::memory_order_acquire) ? static_cast<int32_t>(ChannelStatus::kLaunchTimeout) : status;
}

int32_t Session::guest_fault(const char* what, ChannelStatus status) {
  constexpr uint32_t kLogged = 8;
  const uint32_t n = guest_faults_.fetch_add(1, std::memory_order_relaxed);
  if (n < kLogged)
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused a malformed call (" + what + ")" +
                                 (n + 1 == kLogged ? "; further ones are not logged" : ""));
  return static_cast<int32_t>(status);
}

void Session::post_to_gpu(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args) {
  posted_.fetch_add(1, std::memory_order_relaxed);
  const int device = current_;
  GpuWorker::of(devices_[device]).post(
      [this, ctx, call_id, device, bytes = std::vector<std::byte>(args.begin(), args.end())] {
        // The working thread serves every client of the GPU: this one's context, each time.
        api_.cuCtxSetCurrent(contexts_[device]);
        bound_ = device;
        std::byte reply[64];  // issue-only calls answer nothing (Empty)
        uint32_t reply_bytes = 0;
        const int32_t status = dispatch(ctx, call_id, bytes, reply, reply_bytes);
        if (status != 0) {
          int32_t none = 0;
          posted_error_.compare_exchange_strong(none, status);
        }
        if (posted_.fetch_sub(1, std::memory_order_release) == 1) posted_.notify_all();
      });
}

void Session::drain_posted(const vmrpc::CallContext* ctx) {
  if (posted_.load(std::memory_order_acquire) == 0 && posted_error_.load(std::memory_order_relaxed) == 0) return;
  // A launch takes the working thread a few microseconds: spin that long before sleeping.
  for (uint32_t i = 0; i < 4096 && posted_.load(std::memory_order_acquire) != 0; ++i) vmrpc::ordering::cpu_relax();
  for (uint32_t n; (n = posted_.load(std::memory_order_acquire)) != 0;) posted_.wait(n, std::memory_order_acquire);
  bound_ = -1;  // the working thread bound its own thread: this one sets its context again
  int32_t error = posted_error_.exchange(0);
  if (error != 0 && kernel_time_limit_expired().load(std::memory_order_acquire)) error = static_cast<int32_t>(ChannelStatus::kLaunchTimeout);
  if (error != 0 && ctx) {
    auto& late = ctx->region.control(ctx->slot.slot).late_status;
    if (vmrpc::ordering::load_relaxed(late) == 0) vmrpc::ordering::store_relaxed(late, error);
  }
}

int32_t Session::dispatch(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
                          std::span<std::byte> reply, uint32_t& reply_bytes) {
  switch (static_cast<api::Call>(call_id)) {
#define VMCUDA_CALL(number, name, A, R, flags)                                                       \
  case api::Call::name: {                                                                            \
    using Traits = api::CallTraits<api::Call::name>;                                                 \
    api::A a{};                                                                                      \
    constexpr size_t kArgBytes = std::is_empty_v<api::A> ? 0 : sizeof(api::A);                       \
    constexpr size_t kReplyBytes = std::is_empty_v<api::R> ? 0 : sizeof(api::R);                     \
    if (args.size() < kArgBytes || ((Traits::kFlags & api::kTail) == 0 && args.size() != kArgBytes)) \
      return guest_fault(#name ": arguments of the wrong size");                                     \
    if (reply.size() < kReplyBytes)                                                                  \
      return guest_fault(#name ": a reply area too small for its reply", ChannelStatus::kReplyTooSmall); \
    if constexpr (kArgBytes) std::memcpy(&a, args.data(), kArgBytes);                                \
    api::R r{};                                                                                      \
    Request req{args.subspan(kArgBytes), reply.subspan(kReplyBytes), 0, ctx};                        \
    int32_t status = on_##name(a, r, req);                                                           \
    if constexpr ((Traits::kFlags & api::kSyncs) != 0)                                               \
      status = output_after_sync(status, api::Call::name == api::Call::DeviceSynchronize &&           \
                                             contexts_.size() == 1); /* others may still print */    \
    if constexpr (kReplyBytes) std::memcpy(reply.data(), &r, kReplyBytes);                           \
    reply_bytes = static_cast<uint32_t>(kReplyBytes + req.extra_bytes);                              \
    return status;                                                                                   \
  }
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
  }
  return guest_fault("a call number this stub does not know (a guest library of another version?)",
                     ChannelStatus::kUnknownCall);
}

}  // namespace vmcuda::host
