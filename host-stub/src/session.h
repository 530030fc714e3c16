// One client (a guest process's slot) on the host: its CUDA context and its virtual
// object list (VOL): allocations, modules, functions, module globals, streams, events. Everything here is freed when the
// client closes its slot or dies. Handlers live in one file per CUDA area.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "address_hold.h"
#include "arena.h"
#include "kernel_watchdog.h"
#include "driver_api.h"
#include "fair_share.h"
#include "object_list.h"
#include "output.h"

#include "state_stream.h"
#include "vm_ledger.h"
#include "vmcuda/api/calls.h"
#include "vmrpc/knobs.h"
#include "vmrpc/service.h"

namespace vmcuda::host {

struct GraphDesc;  // graph_state.h
struct GraphNodeDesc;

// The slots of the pinned rings device memory goes through (suspend.cc RingCopier); a
// resume's ring has at least kResumeRingSlots (two of the stream's largest chunks).
inline constexpr size_t kRingSlotBytes = size_t{4} << 20;
inline constexpr size_t kResumeRingSlots = 2 * state::kChunkBytes / kRingSlotBytes;
inline constexpr size_t kMaxRingSlots = 64;  // what a ring uses at most

// How Session::resume copies device memory back: `threads` threads (0 or 1: the resume's
// own) read the stream's chunks, verify their checksums and copy them into a small pinned
// ring whose slots go to the device by asynchronous copies (state::Source::copy_chunk, the
// suspend's ring in reverse). Without a ring (or from a source that cannot be read by
// several threads) each chunk is verified and copied synchronously from where it lies.
struct ResumeCopy {
  std::function<std::span<std::byte>()> ring;  // pins it: called once the contexts (and modules) exist
  std::function<void()> drop_ring;             // unpins it: once the memory is in or the attempt failed
  unsigned threads = 0;
  state::StagingAllocator stacks;  // the threads' stacks (state::CopyThreads)
};

// NVIDIA's libraries a worker process loads for its client's calls at their API: each adds its
// own host memory to the worker once loaded (measured: vmrpc/knobs.h).
enum class HostLibrary : uint8_t { kBlas, kSparse, kSolver, kDnn, kFft, kRand };
inline constexpr size_t kHostLibraries = 6;
// The knob that says what library `l` costs (VMCUDA_BLAS_HOST_BYTES and kin; host_memory.cc).
const vmrpc::knobs::Knob& host_library_knob(HostLibrary l);

struct StubLimits {
  // The VM's device memory, all its clients together, as the driver maps it (vm_ledger.h);
  // null: not counted (tests), no limit.
  std::shared_ptr<class VmLedger> ledger;
  uint64_t max_module_bytes = 1ull << 30;  // limit on untrusted input: a fatbin
  uint32_t max_name_bytes = 4096;          // a kernel's mangled name
  uint32_t max_streams = 4096;             // live streams per client (guest-made handles)
  uint32_t max_events = 1u << 18;          // live events per client
  // Issue non-blocking work through one working thread per GPU (gpu_worker.h): for clients
  // that are threads of one process (--isolation thread).
  bool gpu_threads = false;
  // Every client is a thread of this one process (--isolation thread): a suspended client's
  // arena keeps its address range reserved (arena.h keep_range_while_released).
  bool shared_process = false;
  uint32_t max_host_funcs = 1u << 16;      // host functions queued and not yet run, per client
  // The kernel time limit (vmcuda-stub --kernel-time-limit; kernel_watchdog.h): a client
  // whose oldest outstanding GPU work is older than this is ended by on_kernel_timeout
  // (in a worker process: the process exits, kWorkerExitLaunchTimeout). 0 or no callback: off.
  std::chrono::milliseconds kernel_time_limit{0};
  std::function<void(const std::string& client, int64_t age_ms)> on_kernel_timeout;
  // Fair sharing of each GPU with other VMs by weight (fair_share.h); null: off.
  std::shared_ptr<FairShare> fair_share;
  // Device memory a CUDA context takes besides its allocations (VMCUDA_CONTEXT_BYTES;
  // bench/context_cost_probe.cu), charged to the VM for each context a client makes.
  uint64_t context_bytes = 0;
  // Device memory each cuBLAS handle's own workspace takes (VMCUDA_CUBLAS_WORKSPACE_BYTES),
  // charged to the VM while the handle lives; negative: NVIDIA's size for the GPU (cublas.cc).
  int64_t cublas_workspace_bytes = -1;
  // Host memory a worker process costs besides what its program pins (VMCUDA_WORKER_HOST_BYTES:
  // its resident memory, mostly the CUDA driver's), charged to the VM's host memory bound with
  // the program's first context; 0: none (clients that are threads of the stub).
  uint64_t worker_host_bytes = 0;
  // Host memory each of NVIDIA's libraries adds to a worker once loaded (VMCUDA_BLAS_HOST_BYTES and
  // kin: host_library_knob), charged with the worker's first object of that library
  // (Session::charge_library_host); 0: none (clients that are threads of the stub).
  std::array<uint64_t, kHostLibraries> library_host_bytes{};
  // Module images shared by the stub's clients (image_cache.h; vmcuda-stub --image-cache-*);
  // null: off (every client sends and keeps its own copy).
  std::shared_ptr<class ImageCache> image_cache;
  // The VM's IPC table (ipc_registry.h): cudaIpc* between the VM's programs; null: IPC
  // answers cudaErrorNotSupported.
  std::shared_ptr<class IpcChannel> ipc;
};

// Per-call view for handlers: trailing argument bytes and room for trailing reply bytes.
struct Request {
  std::span<const std::byte> tail;
  std::span<std::byte> extra;
  uint32_t extra_bytes = 0;
  const vmrpc::CallContext& ctx;
};

// A host function's gate on a stream (host_func.cc): the driver calls it when the stream
// reaches it; it publishes that in the guest's mailbox entry and holds the stream until the
// guest has run the function, the client has released its slot, or the session closes.
struct HostFuncGate {
  api::HostFuncEntry* entry;        // shared heap: the guest may write it at any time
  uint32_t* slot_state;             // the slot's SlotControl::state (guest-written; only read)
  const std::atomic<bool>* closing;
  const std::atomic<bool>* endpoint_stop;  // the endpoint stops serving the slot (may be null)
  std::atomic<uint32_t>* reached;   // the session's count of reached gates
  uint32_t generation;
  std::atomic<int> phase{0};        // 0 queued, 1 running, 2 finished
  // A graph's host node (graph.cc): reached at every launch of the graphs that hold it, so it
  // never finishes; lives until the session closes. Its entry counts: `reached` the times the
  // graph reached it, `done` the runs the guest finished (HostFuncEntry, wire.h).
  bool persistent = false;
};

// The function every host function gate and graph host node hands the driver (host_func.cc).
CUhostFn host_func_gate_fn();

// The libraries remoted at their API and their call areas (api/include/vmcuda/api/library_areas.def),
// as status and logs name them.
inline constexpr const char* kLibraryNames[] = {
#define VMCUDA_REMOTED_LIBRARY(name, ...) #name,
#include "vmcuda/api/library_areas.def"
#undef VMCUDA_REMOTED_LIBRARY
};
inline constexpr size_t kRemotedLibraries = std::size(kLibraryNames);
// The library of each call area (call_id >> 8), or -1.
inline constexpr std::array<int8_t, 256> kLibraryOfArea = [] {
  std::array<int8_t, 256> of{};
  of.fill(-1);
  int8_t lib = 0;
#define VMCUDA_REMOTED_LIBRARY(name, ...)    \
  for (const int area : {__VA_ARGS__}) of[area] = lib; \
  ++lib;
#include "vmcuda/api/library_areas.def"
#undef VMCUDA_REMOTED_LIBRARY
  return of;
}();
// The library call `call_id` belongs to, or -1 for the runtime's and driver's own calls.
constexpr int remoted_library_of(uint32_t call_id) {
  const uint32_t area = call_id >> 8;
  return area < kLibraryOfArea.size() ? kLibraryOfArea[area] : -1;
}

// What `vmcudactl status` shows of one client.
struct ClientStatus {
  uint32_t slot = 0;
  uint32_t owner_tag = 0;     // the guest process's pid
  bool suspended = false;
  uint64_t device_bytes = 0;  // device memory the client holds now (the arena's physical memory)
  uint64_t allocated_bytes = 0;
  uint64_t objects = 0;
  std::vector<int> devices;
  std::string program;        // what the guest says its program is (ClientInfo), cleaned
  uint64_t launches = 0;      // kernels launched so far
  uint64_t module_bytes = 0;  // charged to the VM for its loaded modules (module.cc)
  // Calls of each library remoted at its API (kLibraryNames), so far: which copy of a library a
  // framework really used shows here.
  std::array<uint64_t, kRemotedLibraries> library_calls{};
};

class Session : public vmrpc::SlotService {
 public:
  // `devices`: the host device ordinals this client may use; guest device i is devices[i].
  Session(const DriverApi& api, const StubLimits& limits, std::vector<int> devices, const vmrpc::SlotInfo& info);
  ~Session() override;

  int32_t call(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
               std::span<std::byte> reply, uint32_t& reply_bytes) override;
  void close() override;
  // The end of a batch: markers after the GPU work it left pending (fair_share.h).
  void batch_done() override;
  // The control path (suspend.cc, control.cc): runs on the slot's service thread while the
  // slot is held at a call boundary.
  std::vector<std::byte> control(std::span<const std::byte> request, const Progress& progress) override;
  void bind_region(const vmrpc::RegionView& region) override { region_ = &region; }
  // Writes the client's state to `out`, then releases its GPU objects, memory and contexts.
  // On failure nothing was released and the client runs on (false, why).
  // `before_release` runs once everything is written, before the first driver object goes
  // (it unpins the sink's staging buffers while their context lives). `ring`: pinned host
  // memory (a few MiB per copy thread of the sink's) device memory is copied through, into
  // the sink's buffers by its threads (Sink::commit_copy); empty: straight into them.
  bool suspend(state::Sink& out, std::string* why, const std::function<void()>& before_release = {},
               std::span<std::byte> ring = {});
  // Recreates the client from a state `in` (suspend's output, or a state file: untrusted).
  // `region`: the shared region, for pinned heap ranges. On failure nothing is left of the
  // attempt and the client stays suspended (false, why).
  bool resume(state::Source& in, const vmrpc::RegionView* region, std::string* why, const ResumeCopy& copy = {},
              bool modules_first = true);
  // The last resume failed because a module's variables came back at other addresses.
  bool module_data_moved() const { return module_data_moved_; }
  bool suspended() const { return suspended_; }
  // After the resume of every client of the VM (exporters republished their memory, events
  // and pools under their tokens: resume()): maps what this client had opened of other
  // programs' memory again at the same addresses and opens their events again behind the
  // same handles; in a client that ran on, what was made anew since it opened it (ipc.cc).
  // False and `why` naming the handle when one cannot be (the caller suspends it again).
  bool ipc_attach(std::string* why);
  ClientStatus status() const;
  // The status as last published (any thread; client_control's Reply encoding).
  std::vector<std::byte> snapshot() const override;
  // Runs one call's handler (call() decides on which thread).
  int32_t dispatch(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
                   std::span<std::byte> reply, uint32_t& reply_bytes);
  // With GPU working threads: hands an issue-only call over (a copy of its bytes) and
  // returns; drain_posted() waits until all handed over ran and reports the first error of
  // them in the batch being served (`ctx`; none at close).
  void post_to_gpu(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args);
  void drain_posted(const vmrpc::CallContext* ctx);
  std::atomic<uint32_t> posted_{0};
  std::atomic<int32_t> posted_error_{0};

  // Handlers, one per call of calls.def: a plain call's from its line in plain_calls.def
  // (plain_calls.cc), any other's hand-written in its area's file (device.cc, memory.cc,
  // memory_2d.cc, module.cc, symbol.cc, launch.cc, function.cc, stream.cc, event.cc, ...).
#define VMCUDA_CALL(number, name, A, R, flags) int32_t on_##name(const api::A& args, api::R& reply, Request& req);
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL

 private:
  // Composite VOL handles of the per-device settings (object_list.h: one handle per kind).
  static uint64_t limit_key(int device, int limit) { return (uint64_t(uint32_t(device)) << 32) | uint32_t(limit); }
  static uint64_t peer_key(int device, int peer) { return (uint64_t(uint32_t(device)) << 32) | uint32_t(peer); }
  // A guest stream handle (api::kStream*, or one it created) as the driver's stream, and
  // the device it belongs to (the current one for the special streams). Unknown handles:
  // CUDA_ERROR_INVALID_HANDLE.
  // The per-thread stream is made at its first use (a PerThreadStream entry).
  CUresult resolve_stream(uint64_t handle, CUstream* stream, int* device);
  // What the object list keeps of a stream the guest names, resolved on `device`: its Stream,
  // PerThreadStream or NullStream entry's (the last made here at its first use); nullptr when
  // there is none.
  StreamObject* stream_record(uint64_t handle, int device);
  // Sets one checked stream attribute (stream.cc), for the guest and at a resume.
  CUresult apply_stream_attribute(CUstream s, uint32_t id, const api::StreamAttributeValue& w);
  // The client's entries by guest handle, or nullptr (forged, stale, another client's).
  const Object* find_event(uint64_t handle) const { return vol_.find(ObjectKind::Event, handle); }
  const Object* find_function(uint64_t handle) const { return vol_.find(ObjectKind::Function, handle); }
  // A module of the current device (functions and variables are looked up there), or nullptr.
  const Object* find_module_here(uint64_t handle) const {
    const Object* m = vol_.find(ObjectKind::Module, handle);
    return m && m->device == current_ ? m : nullptr;
  }
  // The cluster occupancy queries' common checks (launch.cc).
  template <class Query>
  int32_t cluster_query(const char* what, const api::LaunchExArgs& a, Request& req, Query&& query);
  // A plain call's handler (plain_calls.def): the guest's fault if Args has nonzero padding
  // (`malformed` says which call), then each word's field checked and translated in the driver's
  // parameter order (the first error is the answer), the driver function called (in the
  // context of the first stream, event or function named, else the current one) and its
  // out() values copied into the Reply. Defined in plain_calls.cc, its only user.
  template <class A, class R, class... P, class... S>
  int32_t forward_plain(const char* malformed, CUresult (*DriverApi::*fn)(P...), const A& a, R& r, S... words);
  // Runs `f` with `device`'s context current, then makes the current device's current again.
  template <class F>
  CUresult on_device(int device, F&& f) {
    make_current(device);
    const CUresult r = f();
    make_current(current_);
    return r;
  }
  // The one idiom for a call the guest got wrong (lengths that do not match, unknown flags,
  // a heap range not its own): `what` ("Call: reason") is logged for the first few of a
  // client, then counted; the guest gets `status`, which its library reports as a vmcuda
  // bug or version mismatch. Thread-safe: launches run on the GPU's working thread too.
  int32_t guest_fault(const char* what,
                      vmrpc::wire::ChannelStatus status = vmrpc::wire::ChannelStatus::kBadArguments);
  std::atomic<uint32_t> guest_faults_{0};
  bool said_capture_info_ = false;
  // ---- IPC (ipc.cc). This client's id in the VM's table, what it exported (allocation
  // pointer or guest event handle -> token); an export goes when its allocation or event does.
  uint64_t ipc_owner_ = 0;
  std::map<uint64_t, std::array<uint8_t, 16>> ipc_exports_, ipc_event_exports_;
  bool said_ipc_ = false;
  // Per device (`--isolation thread`): made at the first in-process event export; a context
  // with one destroys itself with the last holder of its shared events (ipc_registry.h).
  std::vector<std::shared_ptr<struct IpcContextKeeper>> ipc_keepers_;
  // Memory pools exported (guest pool handle -> token, device); revoked at MemPoolForget
  // and at the end.
  struct PoolExport {
    std::array<uint8_t, 16> token;
    int device;
  };
  static constexpr size_t kMaxPoolExports = 4096;
  std::map<uint64_t, PoolExport> ipc_pool_exports_;
  void ipc_forget_pools();
  // An event of another client of the process opened here (`--isolation thread`), which lives
  // in that client's context.
  bool ipc_borrowed_event(const EventObject& e, int device) const;
  // The flags the driver's event gets for the guest's: with every client in this process an
  // interprocess event is shared as itself (ipc.cc), never through the driver's IPC, and the
  // driver (580, H100) crashes when a stream of another context waits on an event made with
  // CU_EVENT_INTERPROCESS; so there the driver's event is an ordinary one.
  unsigned driver_event_flags(unsigned guest_flags) const;
  CUresult ipc_record_borrowed(const EventObject& e, CUstream stream, int device);
  void ipc_forget_export(uint64_t ptr);
  void ipc_forget_event(uint64_t handle);
  // A suspend: the export's table entry stays under its token, holding nothing (ipc_registry.h).
  void ipc_park_export(uint64_t ptr);
  void ipc_park_event(uint64_t handle);
  bool ipc_republish(std::span<const std::byte> state_record, std::string* why);  // suspend.cc
  // At the end of a client (a suspended one keeps its parked tokens until then).
  void ipc_forget_all();
  // Exports `alloc` (an Allocation) or `event` (an interprocess Event): under a new token,
  // or under `*reuse` again (a resume). The table refusing: CUDA_ERROR_NOT_SUPPORTED, or
  // CUDA_ERROR_INVALID_HANDLE for `*reuse` (it names another client's live export).
  CUresult ipc_export_memory(const Object& alloc, const std::array<uint8_t, 16>* reuse,
                             std::array<uint8_t, 16>* token);
  CUresult ipc_export_event(const Object& event, const std::array<uint8_t, 16>* reuse,
                            std::array<uint8_t, 16>* token);
  // ---- graphs (graph.cc).
  // Why a suspend is refused now (empty: it is not): a graph or capture it cannot carry.
  std::string graphs_block_suspend();
  // ---- open stream captures across a suspend (graph.cc; docs/snapshots.md).
  // Why the open captures cannot be carried (empty: they can, or none is open): a capture
  // other streams joined, one the program's calls invalidated, one whose graph the guest was
  // given (cudaStreamGetCaptureInfo), one with edge data.
  std::string captures_block_suspend();
  // A capture a suspend ended (cuStreamEndCapture) to carry it: what beginning it again into
  // its graph after the same nodes (cuStreamBeginCaptureToGraph) needs.
  struct EndedCapture {
    uint64_t stream = 0;  // the guest's stream handle
    int device = 0;
    CUstream cu_stream = nullptr;
    int mode = 0;                 // the host's (thread-local or relaxed: on_StreamBeginCapture)
    unsigned long long id = 0;    // the id the guest knows (guest_capture_id)
    uint64_t into = 0;            // the guest's graph it captures into (capture_into_), else 0
    CUgraph graph = nullptr;      // the graph it built so far (the host's own where `into` is 0)
    std::vector<CUgraphNode> deps;  // the stream's dependencies in it
  };
  // The client's stream a capture names (guest handle, guest device), or nullptr: a stream
  // the guest made there, or its per-thread stream of that device.
  const Object* capture_stream(uint64_t handle, int device) const;
  // Ends every open capture (false and why if the driver refuses one: those ended begin again).
  bool end_captures(std::string* why);
  // The captures end_captures() ended, begun again where they were (a suspend that failed).
  void begin_ended_captures();
  std::vector<EndedCapture> ended_captures_;
  // The id a capture has for the guest: the one it had before a suspend where it was carried.
  unsigned long long guest_capture_id(unsigned long long driver_id) const;
  // ---- cuBLAS (cublas.cc; the generated handlers use CublasScope, cublas.h).
  friend class CublasScope;
  // The host's libcublas.so.13, loaded at the first cuBLAS call of any client (the stub starts
  // without it); nullptr and *status (CUBLAS_STATUS_NOT_INITIALIZED, logged once) without one.
  const struct CublasApi* cublas_library(int32_t* status);
  const struct CublasApi* cublas_ = nullptr;
  uint32_t workspace_refusals_ = 0;  // cublasCreate refused for the quota (logged 8 times)
  // Host memory (vm_ledger.h kHost): charges `bytes` to the VM's host memory bound; false (the
  // caller answers CUDA_ERROR_OUT_OF_MEMORY), logged 8 times per client, when it has no room.
  bool charge_host(uint64_t bytes, const char* what);
  // Charging and refunding pinned staging (client_control.cc PinnedStaging) to the VM's host
  // memory bound; and that bound, as a user reads it.
  struct PinCharge pin_charge();
  std::string host_bound_summary() const;
  uint32_t host_refusals_ = 0;
  bool worker_charged_ = false;  // this worker process's own host cost (StubLimits::worker_host_bytes)
  // NVIDIA's library `l` in this worker: its host cost (StubLimits::library_host_bytes) charged
  // once, with the first object; false when the VM's host memory bound has no room (the caller
  // answers the library's allocation-failed status).
  bool charge_library_host(HostLibrary l);
  std::array<bool, kHostLibraries> library_host_charged_{};
  // Destroys a handle of the real library (teardown); the handle's context is current.
  CUresult cublas_release(CublasHandleObject& h);
  // A resume (suspend.cc): a new handle of the library for `h` with its pointer and math
  // modes, in the current context; then, once every object is back, each handle's stream and
  // workspace. False and why when the library or a setting cannot be had.
  bool cublas_recreate(CublasHandleObject& h, int device, std::string* why);
  // What a handle of the library costs the VM on guest device `device`: its own workspace
  // (StubLimits::cublas_workspace_bytes, else NVIDIA's size for the GPU's architecture).
  uint64_t cublas_workspace_cost(int device) const;
  bool restore_cublas_settings(std::string* why);
  // ---- cuBLASLt (cublaslt.cc): the host's libcublasLt.so.13, loaded as libcublas.so.13 is.
  const struct CublasLtApi* cublaslt_library(int32_t* status);
  const struct CublasLtApi* cublaslt_ = nullptr;
  CUresult cublaslt_release(CublasLtObject& o);
  // A resume (suspend.cc): the library's object for `o` made again from its creation's
  // arguments, in the current context; then, once every object is back (the device memory
  // its pointer attributes name too), each object's attributes set again, checked as the
  // guest's sets are. False and why (naming the object) when that cannot be done.
  bool cublaslt_recreate(CublasLtObject& o, uint64_t guest, std::string* why);
  bool restore_cublaslt_attributes(std::string* why);
  // The real cublasLtHandle_t a guest handle names: a cuBLASLt handle, or a cuBLAS handle (as
  // NVIDIA's, a cublasHandle_t is a cublasLtHandle_t); its device in *device. nullptr if none.
  void* cublaslt_handle(uint64_t guest, int* device);
  // ---- cuFFT and cuRAND (cufft.cc, curand.cc; the generated handlers use NvlibScope, nvlib.h).
  template <class Traits>
  friend class NvlibScope;
  // Destroys a plan / generator of the real library (teardown); its context is current.
  CUresult cufft_release(CufftPlanObject& p);
  CUresult curand_release(CurandGeneratorObject& g);
  // Why a suspend is refused now (empty: it is not): a plan or generator whose log of calls
  // overflowed, or a generator whose replay would generate too much.
  std::string nvlib_block_suspend() const;
  // A resume: the plan made again by replaying the calls that made it, in the current context;
  // then, once every object is back, each plan's work area and stream. False and why when the
  // library or a call fails.
  bool cufft_recreate(CufftPlanObject& p, std::string* why);
  // Whether a state file's recorded call is one that makes or configures a plan, of its size.
  static bool cufft_replayable_call(uint32_t call, size_t bytes);
  bool restore_cufft_settings(std::string* why);
  // A resume: the generator made again and brought back where it stood by replaying its
  // steps (generating into a scratch buffer), in the current context; then, once every object
  // is back, each generator's stream. False and why when the library or a call fails.
  bool curand_recreate(CurandGeneratorObject& g, std::string* why);
  bool restore_curand_settings(std::string* why);
  // Whether a state file's recorded step is one a generator replays, of its size; the device
  // bytes replaying it writes once (UINT64_MAX: none such).
  static uint64_t curand_step_bytes(uint32_t call, std::span<const std::byte> args);
  // ---- cuDNN (cudnn.cc): the host's libcudnn.so.9, loaded at the first cuDNN call.
  const struct CudnnApi* cudnn_library(int32_t* status);
  const struct CudnnApi* cudnn_ = nullptr;
  CUresult cudnn_release(CudnnObject& o);
  // The stream a cuDNN handle runs on (a stream the app destroyed meanwhile: the default stream).
  CUstream cudnn_stream(CudnnObject& handle);
  uint64_t cudnn_seq_ = 0;  // the next CudnnStep::seq
  uint64_t cudnn_retired_ = 0;  // the next retired descriptor's handle (| kCudnnRetiredHandle)
  // A descriptor the program destroyed: kept as a retired one (CudnnObject::retired) for the
  // descriptors made from it; then every retired one no kept descriptor needs is dropped.
  void cudnn_retire(ObjectId id);
  void cudnn_collect();
  // Why a suspend is refused now (empty: it is not): a descriptor with more steps than are
  // recorded, or whose attributes name an object the program destroyed.
  std::string cudnn_blocks_suspend() const;
  std::string cudnn_legacy_blocks_suspend(const CudnnObject& d) const;  // its part for a legacy descriptor
  // A resume: the handle or descriptor made again (in the current context); then, once every
  // object is back, every descriptor's steps replayed in the client's order and each handle's
  // stream set. False and why when the library or a step fails.
  bool cudnn_recreate(CudnnObject& o, std::string* why);
  bool restore_cudnn(std::string* why);
  // Whether a state file's cuDNN step is well formed (what a resume may replay); why not.
  static bool cudnn_step_valid(const CudnnStep& s, std::string* why);
  // Legacy descriptors (tensor, filter, convolution, ...): a setting that succeeded, kept with
  // descriptor `d` (CudnnStep::kLegacy: the call's Args and trailing bytes) for a resume to
  // replay; the same call again replaces it. cudnnDeriveBNTensorDescriptor is kept as the
  // cudnnSetTensorNdDescriptor of what it derived, so it needs no other descriptor.
  void cudnn_note_legacy(CudnnObject& d, uint32_t call, const void* args, size_t args_bytes,
                         std::span<const std::byte> tail);
  // A legacy descriptor of kind `tag` the library answered (its pointer at `out`, 8 bytes),
  // replaced by the client's guest handle of it (0 where it is none of the client's).
  void cudnn_answer_guest_handle(uint8_t* out, int32_t tag);
  // A tensor descriptor (guest handle `guest`) the library set (cudnnGetRNNWeightParams): kept as
  // the cudnnSetTensorNdDescriptor of its shape as read back; one with no shape comes back unset.
  void cudnn_note_filled_tensor(CudnnObject& d, uint64_t guest);
  // A resume: step `s` of legacy descriptor `guest` replayed through the call's own handler (which
  // checks it as it checks a guest's call; a dropout descriptor's setting replays as
  // cudnnRestoreDropoutDescriptor: its states are back with the client's memory).
  int32_t cudnn_replay_legacy(uint64_t guest, const CudnnStep& s);
  bool cudnn_replaying_ = false;  // while a resume replays: the handlers do not record again
  // cudnnFind*Algorithm run as its Ex form on buffers and a workspace of the client's arena
  // (`call`: which search; the rest its arguments, with the library's objects).
  int32_t cudnn_find_in_arena(int device, api::Call call, void* handle, void* d1, void* d2, void* conv, void* d3,
                              int requested, void* returned, void* perf);
  // Whether a state file's legacy descriptor (kind d.legacy, guest handle `guest`) and its steps
  // are well formed: each a recorded setting of that kind, of its size, naming that descriptor.
  static bool cudnn_legacy_valid(const CudnnObject& d, uint64_t guest, std::string* why);
  // ---- cuSPARSE and cuSOLVER (cusparse.cc, cusolver.cc; the generated handlers use
  // NvobjScope, nvobj.h). Destroys an object of the real library (teardown).
  template <class Traits>
  friend class NvobjScope;
  friend struct CusparseTraits;
  friend struct CusolverTraits;
  CUresult cusparse_release(NvobjObject& o);
  CUresult cusolver_release(NvobjObject& o);
  // Why a suspend is refused now (empty: it is not): an object with more steps than are
  // recorded, or whose steps name an object the program destroyed (nvobj.cc).
  std::string nvobj_blocks_suspend() const;
  // Whether the program is in a window that blocks a suspend and that it closes by itself
  // (a stream capture open, a factorization's zero pivot not read yet): a suspend refused now
  // is worth asking again soon (client_control::Reply::retry).
  bool suspend_window_open();
  uint64_t nvobj_seq_ = 0;  // the next NvobjStep::seq
  // A recorded step of a library's object (kind Cusparse or Cusolver): what it names (false:
  // no step a resume replays); the step run again through its handler (the library's status).
  static bool nvobj_step_info(ObjectKind kind, uint32_t call, std::span<const std::byte> args, NvobjStepInfo* out);
  static int nvobj_types(ObjectKind kind);  // the library's object types (0: not built in)
  int32_t nvobj_replay(ObjectKind kind, uint32_t call, std::span<const std::byte> args);
  // Captures this client began (StreamBeginCapture) and has not ended: while any is open,
  // nothing is handed to the GPU's working thread (captured work is issued in order on this
  // thread, where the capture began) and copies whose host bytes do not outlive the call are
  // refused on capturing streams.
  uint32_t captures_open_ = 0;
  // Captures into an existing graph (StreamBeginCaptureToGraph): guest stream -> guest graph.
  std::map<uint64_t, uint64_t> capture_into_;
  // Captures whose graph the guest was given while they were open (cudaStreamGetCaptureInfo,
  // runtime_ext.cc): capture id -> the graph's guest handle, an entry borrowed from the driver
  // until the capture ends in it (cudaStreamEndCapture gives the program that graph).
  std::map<unsigned long long, uint64_t> capture_graphs_;
  // Each open capture this client began, by guest stream: its mode here and device (a suspend
  // carries both).
  struct OpenCapture {
    int mode = 0;
    int device = 0;
  };
  std::map<uint64_t, OpenCapture> open_captures_;
  // Captures carried across a suspend: the driver's id now -> the one the guest knows.
  std::map<unsigned long long, unsigned long long> capture_ids_;
  // Other captures' ids are answered above every carried one (guest_capture_id): after a
  // restore into a new process the driver counts from 1 again, and a new capture must not
  // answer the id of a carried one still open (PyTorch keys its graph pools by it).
  unsigned long long capture_id_floor_ = 0;
  // A carried capture that was not into a graph of the program's: the graph the resume built
  // and captures into, the host's until cudaStreamEndCapture gives it to the program
  // (by guest stream).
  std::map<uint64_t, CUgraph> carried_capture_graphs_;
  // Events last recorded on a capturing stream while captures are open (on_EventRecord):
  // a wait on one would fork its capture, so such a capture is not carried.
  std::set<uint64_t> capture_events_;
  // The graph entry of a driver graph, or nullptr.
  Object* graph_entry(CUgraph g);
  // CUDA_SUCCESS, or CUDA_ERROR_NOT_SUPPORTED (logged once) when `s` is capturing: `what`'s
  // host bytes are the call's own (inline, or staging the guest reuses), which a graph
  // could not read at its launches. Costs nothing while no capture is open.
  CUresult refuse_in_capture(CUstream s, int device, const char* what);
  bool said_capture_copy_ = false;
  // The driver's nodes for `count` node handles of graph `graph` in `handles` (untrusted
  // bytes); CUDA_ERROR_INVALID_VALUE when one is not a node of that graph.
  CUresult graph_nodes(const Object& graph, std::span<const std::byte> handles, size_t count,
                       std::vector<CUgraphNode>* out) const;
  // The guest's handle of `node` of graph `graph`, made (kHostNodeHandle) on first use.
  uint64_t node_handle(Object& graph, CUgraphNode node);
  // Suspend and resume of graphs (graph_state.cc): a graph described by walking it with the
  // driver (`top`: its nodes in the description's order; false and why when it holds
  // something a suspend cannot describe exactly), and built again on guest device `device`
  // from a description read from a state (objects named by saved ids, mapped by `new_id`).
  bool describe_graph(CUgraph g, GraphDesc* d, std::vector<CUgraphNode>* top, std::string* why, int depth = 0) const;
  // One node described (its child graph, if one, in `child`, not described): also what
  // cudaGraph*NodeGetParams answer (graph_nodes.cc). `driver`: the driver's error, if one.
  bool describe_node(CUgraphNode node, GraphNodeDesc* out, CUgraph* child, std::string* why,
                     CUresult* driver = nullptr) const;
  bool build_graph(const GraphDesc& d, int device, const std::map<uint64_t, ObjectId>& new_id,
                   const vmrpc::RegionView* region, CUgraph* out, std::vector<CUgraphNode>* top, std::string* why);
  // A graph's nodes (cuGraphGetNodes), false if the driver refused.
  bool list_graph_nodes(CUgraph g, std::vector<CUgraphNode>* out) const;
  // A graph's nodes in creation order, their types and its edges as index pairs.
  bool graph_shape(CUgraph g, std::vector<CUgraphNode>* nodes, std::vector<int>* types,
                   std::set<std::pair<size_t, size_t>>* edges) const;
  // An executable graph's mirror after a successful cudaGraphExecUpdate from `graph`.
  void mirror_update(GraphExecObject& exec, const Object& graph);
  uint64_t next_host_node_ = 0;
  // The conditional handles each graph made (by its object id): a node may name only those.
  std::map<ObjectId, std::set<uint64_t>> conditional_handles_;
  // A new node entry under `graph` for the guest's handle `handle` (checked new and >= kFirstGuestHandle).
  bool new_node_handle(uint64_t handle) const {
    return handle >= api::kFirstGuestHandle && (handle & api::kHostNodeHandle) == 0 &&
           !vol_.find(ObjectKind::GraphNode, handle);
  }
  // A kernel's parameters for a node or an exec update (launch.cc's checks, no stream).
  int32_t kernel_node_params(uint64_t function, std::span<const std::byte> packed, const uint32_t grid[3],
                             const uint32_t block[3], uint32_t shared, CUDA_KERNEL_NODE_PARAMS_v2* p);
  // A node's driver parameters from the guest's, checked as at the node's creation (graph.cc).
  int32_t memcpy_node_params(const api::GraphMemcpySide& src, const api::GraphMemcpySide& dst,
                             const uint64_t extent[3], Request& req, CUDA_MEMCPY3D* out);
  int32_t memset_node_params(uint64_t dst, uint64_t pitch, uint64_t width, uint64_t height, uint32_t value,
                             uint32_t element_size, CUDA_MEMSET_NODE_PARAMS* out) const;
  int32_t host_node_params(const vmrpc::wire::HeapRef& mailbox, uint32_t index, Request& req,
                           CUDA_HOST_NODE_PARAMS* out);
  // The driver's node for guest node `node` in executable graph `exec` (the mirror's after a
  // resume) and the mirror's node (nullptr: none), or CUDA_ERROR_INVALID_VALUE.
  int32_t exec_node(const GraphExecObject& exec, const Object& node, CUgraphNode* target, CUgraphNode* mirrored) const;
  // The mirror's child graph node `old` replaced by one embedding `child` (same edges).
  CUresult replace_mirror_child(GraphExecObject& exec, CUgraphNode old, CUgraph child);
  // A host function gate the driver may run many times (graph host nodes and host
  // functions captured into graphs), or nullptr when the client has too many.
  HostFuncGate* persistent_gate(api::HostFuncEntry* entry, const Request& req);
  HostFuncGate* persistent_gate_at(api::HostFuncEntry* entry, uint32_t* slot_state, const std::atomic<bool>* stop);

  // ---- virtual memory management (vmm.cc).
  // A suspend's or resume's copies of a physical allocation (a VmmAllocation entry with its
  // driver handle): mapped whole at free VA of the arena, read-write for its device; `va`
  // for vmm_unmap_whole, which takes it away again (0: nothing to do).
  CUresult vmm_map_whole(const Object& alloc, uint64_t* va, std::string* why);
  void vmm_unmap_whole(uint64_t va, uint64_t bytes);
  // A physical allocation the guest holds a reference to, by its handle, or nullptr.
  Object* vmm_allocation(uint64_t handle);
  // The mappings that cover [ptr, ptr + bytes) exactly (whole, no gap); false when none do.
  bool vmm_whole_mappings(uint64_t ptr, uint64_t bytes, std::vector<ObjectId>* out) const;
  // Releases allocation `id`'s driver memory and entry once neither a reference nor a mapping is left.
  CUresult vmm_drop_if_unused(ObjectId id);
  // Unmaps a VmmMapping entry (once; the entry stays).
  CUresult vmm_unmap(Object& mapping);
  void vmm_unmap_all();

  // Creates the current device's context on first use and makes it current.
  bool ensure_context();
  void make_current(int device);
  // Device memory (memory.cc): `bytes` from the client's arena on the current device;
  // logs once why the arena cannot serve (its range taken, no index).
  std::unique_ptr<DeviceArena> make_arena();  // metered by the VM's ledger
  uint64_t memory_quota() const;               // the VM's limit (~0: none)
  uint64_t quota_left() const;                 // what the VM has left of it
  CUresult arena_allocate(uint64_t bytes, uint64_t* ptr);
  // Records an allocation the arena made in the VOL and the quota's count.
  void add_allocation(uint64_t ptr, uint64_t bytes);
  // Waits for everything of the client on each of its devices (the arena's Synchronize).
  CUresult synchronize_all();
  // Whether [ptr, ptr+bytes) lies inside one allocation or one module global of this client.
  int32_t heap_copy_async(const api::CopyHeapAsyncArgs& a, Request& req, bool to_device);
  CUresult memset_on(CUdeviceptr dst, uint32_t value, uint64_t bytes, unsigned width, CUstream s, bool async);
  // Rows of `width` bytes, `pitch` apart, of `element`-byte elements (memset_width's), on `s`
  // (async) or synchronous: cuMemsetD2D8/16/32, the current device's. Alignment is checked.
  CUresult memset_2d_on(CUdeviceptr dst, uint64_t pitch, uint32_t value, uint64_t width, uint64_t height,
                        unsigned element, CUstream s, bool async);
  // A memset's element size: 1 (0 on the wire), 2 or 4; else 0 (a malformed call). The
  // region must hold whole, aligned elements (CUDA_ERROR_INVALID_VALUE otherwise, as the
  // driver answers a misaligned cuMemsetD32).
  static unsigned memset_width(uint32_t element_bytes) {
    return element_bytes <= 1 ? 1 : element_bytes == 2 || element_bytes == 4 ? element_bytes : 0;
  }
  // Same for async 2D copies (memory_2d.cc).
  int32_t heap_copy_2d_async(const api::Copy2DHeapAsyncArgs& a, Request& req, bool to_device);
  bool owns_range(uint64_t ptr, uint64_t bytes) const { return vol_.find_range(ptr, bytes) != nullptr; }
  // The guest device whose memory [ptr, ptr+bytes) is (the client's allocation or module
  // variable there), or -1 when it is none of the client's (one lookup: it is owns_range too).
  int owner_of(uint64_t ptr, uint64_t bytes) const {
    const Object* o = vol_.find_range(ptr, bytes);
    return o ? o->device : -1;
  }
  // A synchronous copy or memset of `owner`'s memory runs in its context: arena memory is
  // mapped for its own device (for others only with peer access), where cudaMemcpy reaches
  // any device's memory. After the current device's work, as on its legacy stream.
  template <class F>
  CUresult on_owner(int owner, F&& f) {
    if (owner < 0 || owner == current_ || devices_[owner] == devices_[current_]) return f();
    if (CUresult e = api_.cuCtxSynchronize(); e != CUDA_SUCCESS) return e;
    return on_device(owner, f);
  }
  // Whether work issued on a stream of `device` touches another GPU's memory (`owner`'s):
  // then the stream's work goes first and the operation runs synchronously in the owner's
  // context (the stream's context cannot reach it without peer access).
  bool foreign(int owner, int device) const {
    return owner >= 0 && owner != device && devices_[owner] != devices_[device];
  }
  template <class F>
  CUresult after_stream_on_owner(int owner, int device, CUstream s, F&& f) {
    if (CUresult e = on_device(device, [&] { return api_.cuStreamSynchronize(s); }); e != CUDA_SUCCESS) return e;
    return on_device(owner, f);
  }
  // Arrays (arrays.cc): the array `handle` if the copy's region at (x, y, z) lies inside it,
  // and one copy between an array and its other side (`host`: inline or heap bytes).
  const Object* array_region(uint64_t handle, uint64_t x, uint64_t y, uint64_t z, const api::ArrayCopyArgs& a) const;
  int32_t array_copy(const api::ArrayCopyArgs& a, std::byte* host, uint64_t host_bytes, bool wait);
  // Texture and surface objects (arrays.cc): what one reads and how, checked as at its
  // creation; why a suspend cannot carry them now (empty: it can); and the resume's
  // recreation of them with their old values (`data`'s resource: the saved array's id,
  // mapped through `new_id`).
  CUresult texture_descs(const api::TextureCreateArgs& a, CUDA_RESOURCE_DESC* res, CUDA_TEXTURE_DESC* tex, int* device,
                         ObjectId* resource) const;
  CUresult surface_resource(uint64_t handle, CUDA_RESOURCE_DESC* res, int* device, ObjectId* resource) const;
  std::string texture_objects_block_suspend() const;
  struct SavedTextureObject {
    ObjectKind kind;
    int device;
    uint64_t value;
    ObjectData data;
  };
  bool recreate_texture_objects(std::vector<SavedTextureObject> saved, const std::map<uint64_t, ObjectId>& new_id,
                                std::string* why);
  // Same for a 2D region: `height` rows of `width` bytes, `pitch` bytes apart (pitch >= width).
  bool owns_2d(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height) const;
  // Device settings and peer access (device.cc, peer.cc). The context of guest device
  // `device`, created on first use (nullptr, and ctx_error_, when it cannot be); the
  // current device's context stays current.
  CUcontext context_of(int device);
  bool valid_device(int device) const { return device >= 0 && static_cast<size_t>(device) < devices_.size(); }
  // Turns off peer access from and to guest device `device` (a reset: its context's
  // mappings go, as when CUDA destroys the context).
  void drop_peer_access(int device);
  CUresult set_peer_access(int device, int peer, bool enable);
  bool has_peer_access(int device) const;  // to any peer

  // Suspended (suspend.cc): no GPU object exists; the state is in suspended_state_ (host
  // memory) or in the file at suspended_file_.
  bool suspended_ = false;
  const vmrpc::RegionView* region_ = nullptr;  // the connection's region (set by the first call)
  bool said_suspended_ = false;
  bool module_data_moved_ = false;
  // Free address space kept below each of the client's contexts (kContextFenceBytes), and
  // the ranges the suspended client's contexts gave back, kept free for its resume.
  AddressHold context_fence_, context_hole_;
  // What snapshot() reads from other threads: published after each change of the memory
  // the client holds and at suspend, resume and close.
  std::atomic<uint64_t> published_device_bytes_{0}, published_allocated_{0}, published_objects_{0},
      published_module_bytes_{0};
  std::atomic<bool> published_suspended_{false};
  std::atomic<uint64_t> launches_{0};
  std::array<std::atomic<uint64_t>, kRemotedLibraries> library_calls_{};  // ClientStatus::library_calls
  // Read by the control side (snapshot) while the service thread changes them.
  mutable std::mutex published_mu_;
  std::vector<int> published_devices_;
  std::string program_;
  void publish_status();
  uint64_t suspended_memory_ = 0;  // device memory bytes saved
  std::shared_ptr<const state::MemoryStream> suspended_state_;
  std::shared_ptr<class PinnedStaging> suspended_staging_;  // where suspended_state_'s memory lies
  std::string suspended_file_;
  std::string device_model(int guest_device) const;

  // Teardown (session.cc): how the VOL walk releases each entry.
  enum class Release {
    kClose,    // the client is gone: everything goes, the arena's memory wholesale
    kReset,    // cudaDeviceReset: one device's objects, each the way the app's call would free it
    kSuspend,  // the state was saved: driver objects go, the arena keeps its layout
  };
  // Releases `o`'s driver object (children first: the walk's order). Returns the first error.
  CUresult release(Object& o, Release how);
  // A guest's destroy call (cudaStreamDestroy, cudaEventDestroy, unpin): the entry of that
  // kind and handle released and removed; `unknown` when there is none.
  CUresult destroy_entry(ObjectKind kind, uint64_t handle, int32_t unknown);
  // Releases everything (close, suspend); the VOL is cleared.
  void release_all(Release how);

  const DriverApi& api_;
  StubLimits limits_;
  std::vector<int> devices_;
  vmrpc::SlotInfo info_;
  int current_ = 0;                           // guest device index (cudaSetDevice)
  int bound_ = -1;                            // whose context is current on this thread
  // The virtual object list: everything the client owns (object_list.h).
  ObjectList vol_;
  // The Context entries' driver handles per guest device, for the hot path (make_current):
  // set and cleared only with those entries.
  std::vector<CUcontext> contexts_;
  // Per device, an event recorded as the client came back from a suspend: GPU time 0 for the
  // events recorded before it (EventObject::before_suspend_ms). Goes with its context.
  std::vector<CUevent> resume_marks_;
  bool said_no_context_room_ = false;
  std::map<ObjectId, double> event_times_before_suspend();  // suspend.cc
  // Work for the GPU's working thread (session.cc).
  bool issues_only(api::Call c, std::span<const std::byte> args) const;
  bool heap_pinned(uint64_t offset, uint64_t bytes) const;
  // Device limits' device memory, charged to the VM (device.cc).
  uint64_t limit_cost(int device, int limit, uint64_t value, uint64_t default_value) const;
  bool charge_limit(uint64_t was, uint64_t now);
  // Lists loaded module `m` in the current context (module.cc).
  int32_t list_module(ModuleObject m, uint64_t& handle);
  // A saved module image (a resume), from the cache where it is one (module.cc).
  std::shared_ptr<const ImageBytes> saved_module_image(std::vector<std::byte> saved);
  // Loads `m.image` (checked and padded) as a module of the current context, charging the VM
  // for it (module.cc: the image kept here and the module's variables); CUDA_ERROR_OUT_OF_MEMORY,
  // nothing loaded, when the quota has no room. A load and a resume's reload share it.
  CUresult load_module_charged(ModuleObject& m);
  uint64_t module_bytes_ = 0;  // what this client's loaded modules are charged (status)
  uint32_t module_refusals_ = 0;  // module loads the quota refused (the first few are logged)
  bool said_unload_with_graphs_ = false;
  CUresult ctx_error_ = CUDA_SUCCESS;
  uint64_t allocated_ = 0;  // the Allocation entries' bytes (the quota's count)
  // Where Allocation entries come from (arena.h): made with the session (its index, so the
  // handshake can name the range), the VA reserved at the first allocation; freed on close.
  // This client's share of the VM's ledger; declared before arena_, which charges it to
  // its last unmap.
  std::unique_ptr<VmLedger::Account> account_;
  std::unique_ptr<DeviceArena> arena_;
  bool arena_warned_ = false;
  bool quota_warned_ = false;
  // cuMemAllocPitch's pitch per (host device, width, element bytes), learnt once (a cache of
  // the driver's answers, not the client's state).
  std::map<std::tuple<int, uint64_t, uint32_t>, uint64_t> pitches_;
  // __managed__ variables (managed.cc) are ManagedVar entries, each bound to a shadow in the
  // shared heap. The hooks below cost nothing while there are none.
  std::vector<CUstream> managed_streams_;   // per guest device: the pulls' own stream (the stub's)
  std::vector<char> managed_dirty_;         // per guest device: work since the last full pull
  // Hooks of the other areas (one line each). Before a launch (a kernel's or a graph's) on
  // `stream` of `device`, whose context is current: the guest's writes to the shadows reach
  // the variables, ordered on the stream. Nothing on a capturing stream: the graph's launch
  // pushes them (a push captured would write stale bytes at every launch of the graph).
  CUresult managed_before_launch(const vmrpc::CallContext& ctx, int device, CUstream stream);
  // A launch's kernel, stream (of the current device) and parameter pointers into `packed`
  // (launch.cc), checked; the managed variables pushed. CUDA_SUCCESS or the error to return.
  int32_t launch_setup(uint64_t function, uint64_t stream_handle, std::span<const std::byte> packed,
                       const vmrpc::CallContext& ctx, CUfunction* fn, CUstream* stream, void*** params);
  // After a call that waited for work of `device` (`r`: its result, returned): the
  // variables' values reach the shadows. `all`: every stream of the device (cudaDeviceSynchronize).
  CUresult managed_after_sync(const vmrpc::CallContext& ctx, int device, CUresult r, bool all = false);
  CUresult managed_push(const vmrpc::CallContext& ctx, ManagedVarObject& v, CUstream stream);
  CUresult managed_pull(const vmrpc::CallContext& ctx, ManagedVarObject& v, CUstream stream);
  std::string log_tag_;
  // The kernel time limit (kernel_watchdog.h), when set: told of each launch and context.
  std::unique_ptr<KernelWatchdog> watchdog_;
  void note_launch() noexcept {
    if (watchdog_) watchdog_->on_launch();
  }
  // Fair sharing (fair_share.h): per guest device, this client's lane on its GPU (made at
  // the first launch there; goes with the context). Before a launch on `stream`: held back
  // while the VM is ahead of its share, then counted as in flight.
  std::vector<std::unique_ptr<GpuShare::Lane>> lanes_;
  std::vector<char> lane_failed_;
  bool launched_in_batch_ = false;  // the service thread's: a launch came in this batch
  void fair_launch(CUstream stream, const vmrpc::CallContext& ctx) {
    if (captures_open_ && capturing(stream)) return;  // a graph node: nothing runs now
    if (static_cast<size_t>(current_) < lanes_.size() && lanes_[current_]) {
      lanes_[current_]->share().maybe_hold(ctx.stop);
      lanes_[current_]->launched(stream);
    } else if (limits_.fair_share) {
      open_lane_slow(stream, ctx);
    }
  }
  void open_lane_slow(CUstream stream, const vmrpc::CallContext& ctx);
  // Before a call that runs kernels (kLaunches in calls.def: launches, graphs, library routines)
  // issues them on `stream` of guest device `device`: counted for status, the kernel time limit
  // and fair sharing (held back here while the VM is ahead of its share; the lanes are the
  // current device's, so work of another device counts for the limit only, as a graph's does).
  void count_launch(int device, CUstream stream, const vmrpc::CallContext& ctx) {
    launches_.fetch_add(1, std::memory_order_relaxed);  // status: kernels/s
    note_launch();
    if (device == current_) fair_launch(stream, ctx);
  }
  bool capturing(CUstream stream) const;  // in the current context
  void drop_lane(int device);
  // A synchronize of the current context (all) or of `stream` on `device` succeeded.
  void fair_synced(int device, bool all, CUstream stream) {
    if (static_cast<size_t>(device) < lanes_.size() && lanes_[device]) lanes_[device]->synced(all, stream);
  }
  // Host functions (host_func.cc): gates the driver runs on its own thread, each waiting
  // for the guest to run its function. Freed once run, or at close (after the contexts).
  std::vector<std::unique_ptr<HostFuncGate>> gates_;
  // The persistent gates by entry: a guest entry given back and reused by another host node
  // gets the same gate (its nodes hold only that), so SetParams loops do not grow gates_.
  std::unordered_map<const api::HostFuncEntry*, HostFuncGate*> persistent_gates_;
  size_t reap_gates_at_ = 64;
  std::atomic<bool> closing_{false};     // close() began: gates stop waiting for the guest
  std::atomic<uint32_t> gates_reached_{0};  // HostFuncEntry::order
  void free_gates(bool all);
  // Kernel printf output (output.cc): the guest's ring (OutputRing). After a synchronizing
  // call (kSyncs in calls.def; `r`: its result, returned) what the driver wrote to this worker's stdout goes into
  // it; nothing happens while no ring is registered (or none is captured: thread mode).
  OutputRing output_;
  // Only kernels print: after a device-wide synchronize with no launch since, there is
  // nothing to drain, so an idle synchronize pays no read of the pipe.
  bool output_possible_ = true;
  void output_drain();
  CUresult output_after_sync(CUresult r, bool device_wide = false) {
    if (output_.header && output_possible_) {
      output_drain();
      if (device_wide && r == CUDA_SUCCESS) output_possible_ = false;
    }
    return r;
  }
};

// The vmrpc service of vmcuda-stub: one Session per claimed slot.
class StubService : public vmrpc::Service {
 public:
  // `devices`: the VM's GPUs as each new client starts (placement.h: a move changes them).
  StubService(const DriverApi& api, StubLimits limits, std::function<std::vector<int>()> devices)
      : api_(api), limits_(limits), devices_(std::move(devices)) {}
  std::unique_ptr<vmrpc::SlotService> open(const vmrpc::SlotInfo& info) override {
    return std::make_unique<Session>(api_, limits_, devices_(), info);
  }

 private:
  const DriverApi& api_;
  StubLimits limits_;
  std::function<std::vector<int>()> devices_;
};

}  // namespace vmcuda::host
