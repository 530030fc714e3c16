// The virtual object list (VOL) of one client: every object the client owns on the host is
// one entry, with its kind, the handle the guest names it by, the driver's handle, its
// parent and its children, and what recreating it needs (DESIGN.md, Suspend/resume).
//
// Parents: a device's context is the parent of what lives in it (allocations, modules,
// streams, events, limits, cache settings, peer access); a module is the parent of its
// functions, globals and managed variables; a graph is the parent of its nodes; host
// registrations are roots (portable). Ids
// grow with creation, so id order is creation order: teardown walks children before
// parents, newest first; suspend walks parents before children, oldest first, so that
// a restore can recreate each entry after its parent.
//
// Not thread-safe: the session's service thread (or, while the slot is paused, the thread
// the control path runs on) alone uses it.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "driver_api.h"
#include "image_cache.h"
#include "vmcuda/api/wire.h"

namespace vmcuda::host {

enum class ObjectKind : uint8_t {
  Context = 1,       // handle: guest device index
  Allocation,        // handle: device pointer (arena)
  Module,            // handle: guest module handle
  Function,          // handle: guest function handle
  Global,            // handle: device pointer of a __device__/__constant__ variable
  ManagedVar,        // handle: guest managed variable handle
  Stream,            // handle: guest stream handle
  Event,             // handle: guest event handle
  HostRegistration,  // handle: shared heap offset of a pinned range
  Limit,             // handle: CUlimit
  CacheConfig,       // handle: 0 (one per context)
  PeerAccess,        // handle: the peer's guest device index
  Graph,             // handle: guest graph handle (parent: the context)
  GraphNode,         // handle: guest node handle, or a host-made one (api::kHostNodeHandle); parent: its graph
  GraphExec,         // handle: guest executable graph handle (parent: the context)
  Array,             // handle: made by the host (ArrayCreate, MipmappedArrayGetLevel)
  MipmappedArray,    // handle: made by the host (ArrayCreate with levels)
  TexObject,         // handle: the driver's CUtexObject (kernels are given it)
  SurfObject,        // handle: the driver's CUsurfObject
  CublasHandle,      // handle: guest cuBLAS handle (parent: the context; host-stub/src/cublas.cc)
  VmmReservation,    // handle: its first address (cuMemAddressReserve; a root: VA is process-wide)
  VmmAllocation,     // handle: made by the host (cuMemCreate); parent: its device's context
  VmmMapping,        // handle: its first address (cuMemMap); parent: its reservation
  IpcMemory,         // handle: the pointer cudaIpcOpenMemHandle returned (another client's memory)
  CublasLt,          // handle: guest cuBLASLt handle or descriptor (parent: the context; host-stub/src/cublaslt.cc)
  CufftPlan,         // handle: guest cuFFT plan handle (parent: the context; host-stub/src/cufft.cc)
  CurandGenerator,   // handle: guest cuRAND generator handle (parent: the context; host-stub/src/curand.cc)
  Cudnn,             // handle: guest cuDNN handle or backend descriptor (parent: the context; host-stub/src/cudnn.cc)
  Cusparse,          // handle: guest cuSPARSE handle or descriptor (parent: the context; host-stub/src/cusparse.cc)
  Cusolver,          // handle: guest cuSOLVER handle or parameters (parent: the context; host-stub/src/cusolver.cc)
  PerThreadStream,   // handle: guest device index; the client's stream for cudaStreamPerThread there (stream.cc)
  NullStream,        // handle: guest device index; what the guest set on the context's NULL stream there (stream.cc)
};
inline constexpr unsigned kObjectKinds = 33;  // one past the last kind
std::string_view kind_name(ObjectKind k);

using ObjectId = uint64_t;  // 0: none

// What each kind keeps. Driver handles are null while the client is suspended.
struct ContextObject {
  CUcontext ctx = nullptr;
};
struct AllocationObject {
  uint64_t bytes = 0;  // as asked (the quota's count)
};
struct ModuleObject {
  CUmodule module = nullptr;
  // The checked, padded image the driver loaded (for a reload, a suspend): the stub's own
  // copy or a cache file's mapping, shared by the modules loaded from it (image_cache.h).
  std::shared_ptr<const ImageBytes> image;
  uint64_t charged = 0;          // charged to the VM for it (module.cc; not saved: recomputed)
};
struct FunctionObject {
  CUfunction fn = nullptr;
  std::string name;
  std::vector<api::ParamInfo> params;
  std::map<int32_t, int32_t> attributes;  // what the client set (cudaFuncSetAttribute)
  int32_t cache_config = -1;              // cudaFuncSetCacheConfig; -1: never set
};
struct GlobalObject {
  uint64_t bytes = 0;
  std::string name;  // to find it again in a reloaded module
};
struct ManagedVarObject {
  CUdeviceptr ptr = 0;
  vmrpc::wire::HeapRef shadow{};
  std::vector<std::byte> last;
  std::string name;
};
// Also a PerThreadStream's (flags and priority 0): what the guest set on it is carried too; and
// a NullStream's, whose stream is the driver's NULL stream (nullptr, never destroyed): only the
// attributes set on it, which the context keeps and a suspend would lose with it.
struct StreamObject {
  CUstream stream = nullptr;
  uint32_t flags = 0;
  int32_t priority = 0;
  // The attributes the guest set (by CUstreamAttrID), checked: a resume sets them again.
  std::map<uint32_t, api::StreamAttributeValue> attributes;
};
struct EventObject {
  CUevent event = nullptr;
  uint32_t flags = 0;
  // Recreated by a resume and not recorded since: its timestamp did not survive, so
  // cudaEventElapsedTime on it is refused (docs/snapshots.md).
  bool timing_lost = false;
  // Recorded at least once (saved with it): an event recorded before a suspend has
  // completed, so its elapsed time to itself is still known (0).
  bool recorded = false;
  // timing_lost with a known time: how many ms of GPU time lay between its record and the
  // suspend, which is the moment of the resume (Session's resume mark) in GPU time: the
  // time the VM spent suspended is not counted. NaN: unknown (not recorded, no timing).
  double before_suspend_ms = std::numeric_limits<double>::quiet_NaN();
  // `--isolation thread`, an interprocess event exported or opened within the process
  // (ipc.h IpcSharedEvent): it owns `event`, which goes with its last holder.
  std::shared_ptr<void> shared;
  // Opened with cudaIpcOpenEventHandle: the token it came from (saved: a resume opens it
  // again, Session::ipc_attach) and the table's generation of the event it opened.
  bool imported = false;
  std::array<uint8_t, 16> ipc_token{};
  uint64_t ipc_generation = 0;
};
// In a saved event's flags: it had been recorded (EventObject::recorded). Not a CUevent flag.
inline constexpr uint32_t kSavedEventRecorded = 1u << 31;
struct HostRegistrationObject {
  void* host = nullptr;  // in this process's mapping of the region
  uint64_t bytes = 0;
  uint64_t charged = 0;  // to the VM's host memory bound while pinned (host_memory.cc; not saved)
};
struct LimitObject {
  uint64_t value = 0;         // what the client set (the driver's reading of it)
  uint64_t default_value = 0; // before the client's first set: what a reset puts back
  uint64_t charged = 0;       // device memory charged to the VM for it (not saved: recomputed)
};
struct CacheConfigObject {
  int32_t value = 0;
  int32_t default_value = 0;
};
struct PeerAccessObject {};
// Graphs (graph.cc): driver handles. A suspend describes each graph by walking it with the
// driver and a resume builds it again (graph_state.cc).
struct GraphObject {
  CUgraph graph = nullptr;
  // The embedded graph of a child graph node (cudaGraphChildGraphNodeGetGraph), under that
  // node's entry: the node owns it (never destroyed through this entry); a resume takes it
  // from the node it built again. (Also a conditional node's body, which a suspend refuses:
  // graphs_block_suspend; and a capture's graph while the capture is open.)
  bool borrowed = false;
};
struct GraphNodeObject {
  CUgraphNode node = nullptr;  // freed with its graph
};
// An executable graph. The driver cannot be asked an executable graph's node parameters, so
// `mirror` is a graph of the host's (a clone of the graph it was instantiated from) kept
// equal to it: every change made to the executable graph (kernel node parameters,
// cudaGraphExecUpdate) is made to the mirror too; a suspend saves the mirror and a resume
// instantiates the executable graph from it with `flags`.
struct GraphExecObject {
  CUgraphExec exec = nullptr;
  CUgraph mirror = nullptr;
  uint64_t flags = 0;
  // The nodes of the graph it was instantiated from (by that graph's object id, as the guest
  // names them when it changes the executable graph) -> the mirror's matching node.
  std::map<std::pair<ObjectId, CUgraphNode>, CUgraphNode> nodes;
  // Instantiated by a resume from the mirror: the driver knows the executable graph's nodes
  // by the mirror's nodes (else by those of the guest's graph).
  bool from_mirror = false;
  // Such a one updated since (cudaGraphExecUpdate): the driver still knows its nodes by the
  // graph it was instantiated from, which the update made a mirror no longer; kept here, with
  // its nodes by the same keys as `nodes`, until the executable graph is destroyed.
  CUgraph origin = nullptr;
  std::map<std::pair<ObjectId, CUgraphNode>, CUgraphNode> origin_nodes;
  // Non-empty: a change the mirror could not follow (why); a suspend is refused.
  std::string unmirrored;
  // Its nodes disabled now (cudaGraphNodeSetEnabled), as the mirror's matching nodes: a graph
  // cannot hold that, so a suspend saves them beside the mirror and a resume disables them
  // again in the executable graph it instantiates.
  std::set<CUgraphNode> disabled;
};
// A CUDA array or mipmapped array: its descriptor (what a resume recreates it from) and the
// device bytes charged to the VM for it. A level of a mipmapped array is an Array child of
// it (level >= 0) that the driver frees with its parent; it is charged nothing itself.
struct ArrayObject {
  CUarray array = nullptr;              // Array
  CUmipmappedArray mipmap = nullptr;    // MipmappedArray
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  uint32_t levels = 0;                  // MipmappedArray: how many
  int32_t level = -1;                   // a mipmapped array's level (Array child)
  uint64_t charged = 0;
};
// A texture or surface object; its handle is the driver's value, which kernels are given and
// may keep. What made it is kept for a resume, which recreates it with the same value
// (arrays.cc, recreate_texture_objects; docs/snapshots.md).
struct TexObject {
  CUtexObject value = 0;
  api::TextureCreateArgs spec{};  // as checked at its creation (handle: the array's guest handle, or the address)
  ObjectId resource = 0;          // the Array / MipmappedArray entry it reads (0: device memory)
  // Made through a resource view (TextureCreateView): the view, which a resume makes it with again.
  std::optional<CUDA_RESOURCE_VIEW_DESC> view;
};
struct SurfObject {
  CUsurfObject value = 0;
  ObjectId resource = 0;  // the Array entry it reads and writes
};

// A cuBLAS handle of the real library (cublasHandle_t) and the settings the guest gave it.
struct CublasHandleObject {
  void* handle = nullptr;
  int32_t pointer_mode = 0;  // cublasPointerMode_t: which scalars are device pointers
  int32_t math_mode = 0;     // cublasMath_t
  uint64_t stream = 0;       // guest stream handle (0: the default stream)
  uint64_t workspace = 0;    // device pointer of the client's (0: the library's own)
  uint64_t workspace_bytes = 0;
  uint64_t charged = 0;      // the library's own workspace, charged to the VM (cublas.cc; not saved)
};

// A cuBLASLt handle, matmul descriptor, matrix layout or preference of the real library, and
// what the guest made it with and set on it (cublaslt.cc): a suspend saves that, and a resume
// makes the object again and sets its attributes again, in the order they were last set.
struct CublasLtObject {
  enum What : int32_t { kHandle, kMatmulDesc, kLayout, kPreference };
  void* ptr = nullptr;  // the library's cublasLtHandle_t / descriptor
  What what = kHandle;
  // Its creation's arguments: matmul descriptors (compute_type, data_type: the scale type),
  // layouts (data_type, rows, cols, ld).
  int32_t compute_type = 0;
  int32_t data_type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  // Every attribute the guest set, its value's bytes as last set, oldest first (a set again
  // moves it to the end).
  std::vector<std::pair<int32_t, std::vector<std::byte>>> attributes;
  // Matmul descriptors, from the above (cublaslt.cc note_attribute): what alpha and beta are.
  int32_t scale_type = 0;    // CUBLASLT_MATMUL_DESC_SCALE_TYPE
  int32_t pointer_mode = 0;  // CUBLASLT_MATMUL_DESC_POINTER_MODE
  std::map<int32_t, uint64_t> pointers;  // device pointer attributes set (bias, aux, scales), checked at each matmul
};

// A cuFFT plan (cufftHandle) and a cuRAND generator (curandGenerator_t) of the real libraries,
// with the guest stream each was given (0: the default stream). A plan keeps the calls that
// made it (cufft.cc: a resume replays them, then sets its work area and stream again); a
// generator keeps the calls that brought it where it stands in its sequence (curand.h
// CurandTraits::record; a resume replays them into a scratch buffer, then sets its stream).
struct CufftPlanObject {
  int plan = -1;
  uint64_t stream = 0;
  uint64_t work_area = 0;  // the client's device memory (0: the library's own)
  // (call number, its wire arguments) in the order they ran; `overflow`: more than the log
  // keeps (a suspend is refused).
  std::vector<std::pair<uint32_t, std::vector<std::byte>>> made_by;
  bool overflow = false;
};
// Bounds of a generator's log (curand.h CurandTraits::record): its steps, and the bytes a
// resume generates again (2^32 floats; ~0.1 s on an H100).
inline constexpr size_t kCurandMaxSteps = 256;
inline constexpr uint64_t kCurandMaxReplayBytes = uint64_t{16} << 30;
struct CurandStep {
  uint32_t call = 0;             // api::Call
  std::vector<std::byte> args;   // its wire arguments
  uint64_t repeat = 1;           // the same call with the same arguments, this many times in a row
};
struct CurandGeneratorObject {
  void* generator = nullptr;
  uint64_t stream = 0;
  // Its creation first, then settings and generations in the order they ran, collapsed
  // (CurandTraits::record); `replay_bytes`: what replaying them generates; `overflow`: more
  // steps than the log keeps (a suspend is refused).
  std::vector<CurandStep> made_by;
  uint64_t replay_bytes = 0;
  bool overflow = false;
};

// A cuDNN handle, backend descriptor or legacy descriptor (tensor, activation, filter,
// convolution, pooling, dropout) of the real library (cudnn.cc), and what the guest did
// to a descriptor (set attributes, finalized it, filled other descriptors from it; a legacy
// descriptor's settings), in the
// client's order across all its descriptors: a resume makes every object again, then replays
// those steps in that order, behind the same guest handles.
struct CudnnStep {
  // kLegacy: a legacy descriptor's setting (Session::cudnn_note_legacy).
  enum Op : uint8_t { kSet = 1, kFinalize, kFill, kInitialize, kLegacy };
  uint64_t seq = 0;   // the client's order of cuDNN steps (Session::cudnn_seq_)
  uint8_t op = kSet;
  int32_t name = 0;   // kSet, kFill: the attribute; kLegacy: the call's number (calls.def)
  int32_t type = 0;   // kSet: its cudnnBackendAttributeType_t (kFill: always a descriptor)
  int64_t count = 0;  // kSet: elements; kFill: the count asked for; kLegacy: the Args' bytes
  // kSet: the elements as the guest sent them (descriptors and handles as guest handles);
  // kFill: the guest's descriptors the library filled (cudnnBackendGetAttribute);
  // kLegacy: the call's Args, then its trailing bytes (dimension arrays).
  std::vector<std::byte> elements;
};
// Bounds of a descriptor's steps (an attribute set again before a finalize replaces itself).
inline constexpr size_t kCudnnMaxSteps = 1024;
struct CudnnObject {
  void* ptr = nullptr;   // the library's cudnnHandle_t / cudnnBackendDescriptor_t
  bool handle = false;   // a cudnnHandle_t (else a descriptor)
  int32_t type = 0;      // descriptors: cudnnBackendDescriptorType_t
  int32_t legacy = -1;   // a legacy API descriptor: its kind (gen-cudnn.py LEGACY_DESCRIPTORS); -1: none
  uint64_t stream = 0;   // handles: the guest stream set (0: the default stream)
  std::map<int32_t, std::vector<uint64_t>> pointers;  // device pointer attributes set, checked at each execution
  std::vector<CudnnStep> steps;  // descriptors: what a resume replays
  bool overflow = false;         // more steps than kCudnnMaxSteps (a suspend is refused)
  // A descriptor the program destroyed that descriptors it keeps were made from (a plan's
  // heuristics): its steps stay, behind a handle of its own (kCudnnRetiredHandle), for a resume
  // to make it again, replay them and destroy it; no library object meanwhile.
  bool retired = false;
};
inline constexpr uint64_t kCudnnRetiredHandle = uint64_t{1} << 63;  // | a count

// One call a resume replays to bring a cuSPARSE or cuSOLVER object back (api/libs/LIB.calls:
// `replay` and `replace` calls): its place in the client's order across the library's
// objects, its number and its wire arguments (guest handles and device pointers keep their
// values across a resume, so the same arguments make the same object).
struct NvobjStep {
  uint64_t seq = 0;
  uint32_t call = 0;
  std::vector<std::byte> args;
};
// What a recorded step names (generated: LibTraits::step_info): the object it is recorded on,
// the type it makes (-1: none; the object's creation), the stream it sets (0: none), the other
// objects and the device memory (pointers, 0: none) it names: these must still be the
// client's for a resume to replay it.
struct NvobjStepInfo {
  uint64_t target = 0;
  int makes = -1;
  uint64_t stream = 0;
  std::vector<uint64_t> others;
  std::vector<uint64_t> memory;
  // A call marked notcarried (api/libs/LIB.calls): why a resume could not replay it, the object
  // it is recorded on in words, and the call that destroys one; nullptr for a call that is carried.
  const char* not_carried = nullptr;
  const char* object = nullptr;
  const char* destroyed_by = nullptr;
};
inline constexpr size_t kNvobjMaxSteps = 64;  // per object; beyond: a suspend is refused
inline constexpr size_t kNvobjMaxStepBytes = 1024;  // the largest wire arguments of a recorded call

// A cuSPARSE or cuSOLVER object of the real library (nvobj.h): a handle (type 0) or a
// descriptor / parameters object (the library's other types, api/libs/LIB.calls). Carried by
// a suspend as the calls that made and set it (steps: its creation first), replayed in the
// client's order at the resume once memory is back (nvobj.cc).
struct NvobjObject {
  void* ptr = nullptr;       // the library's object
  int32_t type = 0;          // 0: the handle
  int32_t pointer_mode = 0;  // handles: cuSPARSE's pointer mode (1: scalars are device pointers)
  uint64_t stream = 0;       // handles: the guest stream set (0: the default stream)
  std::vector<NvobjStep> steps;
  bool overflow = false;     // more steps than kNvobjMaxSteps (a suspend is refused)
  // A factorization's info (api/libs/cusparse.calls: factor) whose zero pivot the program has
  // not read yet: the library keeps it, a resume could not make it again (a suspend is refused).
  bool pivot_unread = false;
};

// Virtual memory management (vmm.cc). A mapping is a child of its reservation and names its
// allocation; an allocation lives while the guest holds a reference (cuMemCreate,
// cuMemRetainAllocationHandle; cuMemRelease drops one) or a mapping of it exists, as the
// driver's. Carried by a suspend (suspend.cc): each allocation's bytes once, whatever maps it.
struct VmmReservationObject {
  uint64_t bytes = 0;
};
struct VmmAllocationObject {
  CUmemGenericAllocationHandle handle = 0;  // the driver's
  uint64_t bytes = 0;                       // charged to the VM (a multiple of the granularity)
  uint32_t refs = 1;                        // the guest's references; 0: only mappings keep it
  uint32_t maps = 0;                        // VmmMapping entries naming it
};
struct VmmMappingObject {
  uint64_t bytes = 0;
  uint64_t offset = 0;            // into the allocation
  ObjectId allocation = 0;
  bool mapped = true;             // false once the teardown unmapped it
  std::map<int, uint32_t> access; // guest device -> CUmemAccess_flags, as cuMemSetAccess set it
};

// Another client's memory mapped here by cudaIpcOpenMemHandle (ipc.cc): the arena's import
// mapping at `va` (the exporter's physical memory), the allocation at handle = va + offset.
// A suspend saves where it is and its token (not its bytes: the exporter's state has them);
// the resume maps it again at the same address (Session::ipc_attach).
struct IpcMemoryObject {
  std::array<uint8_t, 16> token{};
  uint64_t va = 0;
  uint64_t bytes = 0;  // the exporter's allocation
  uint32_t opens = 1;  // cudaIpcOpenMemHandle of the same handle counts; the last close unmaps
  // The exporter's physical memory as mapped at `va` (the handle lies `handle - va` into it),
  // and the table's generation of it (a resume of the exporter makes it anew: mapped again).
  uint64_t mapping_bytes = 0;
  uint64_t generation = 0;
  // Between a resume and Session::ipc_attach (the exporter may come back later in the same
  // resume of the VM), and while suspended: its VA is held, nothing is mapped.
  bool mapped = true;
};

using ObjectData = std::variant<ContextObject, AllocationObject, ModuleObject, FunctionObject, GlobalObject,
                                ManagedVarObject, StreamObject, EventObject, HostRegistrationObject, LimitObject,
                                CacheConfigObject, PeerAccessObject, GraphObject, GraphNodeObject, GraphExecObject,
                                ArrayObject, TexObject, SurfObject, CublasHandleObject, VmmReservationObject,
                                VmmAllocationObject, VmmMappingObject, IpcMemoryObject, CublasLtObject,
                                CufftPlanObject, CurandGeneratorObject, CudnnObject, NvobjObject>;

struct Object {
  ObjectId id = 0;
  ObjectKind kind{};
  int device = -1;      // guest device index (-1: none)
  uint64_t handle = 0;  // as the guest names it (see ObjectKind)
  ObjectId parent = 0;
  std::vector<ObjectId> children;  // in creation order
  ObjectData data;

  template <class T>
  T& as() { return std::get<T>(data); }
  template <class T>
  const T& as() const { return std::get<T>(data); }
};

class ObjectList {
 public:
  // Adds an entry under `parent` (0: a root). The (kind, handle) pair must be new:
  // find() first. Returns the new entry (stable until it is removed).
  Object& add(ObjectKind kind, int device, uint64_t handle, ObjectId parent, ObjectData data);
  // Removes `id` and everything below it (the caller has released their driver objects).
  void remove(ObjectId id);
  void clear();

  Object* get(ObjectId id);
  const Object* get(ObjectId id) const;
  Object* find(ObjectKind kind, uint64_t handle);
  const Object* find(ObjectKind kind, uint64_t handle) const;
  // The Allocation, Global, VmmMapping or IpcMemory whose bytes contain [ptr, ptr + bytes), or
  // nullptr. A range may run on over VMM mappings that follow one another without a gap on the
  // same device (one reservation mapped chunk by chunk, as PyTorch's expandable segments do):
  // the first is returned.
  const Object* find_range(uint64_t ptr, uint64_t bytes) const;
  // A device's context entry (its children are the device's objects), or nullptr.
  Object* context(int device) { return find(ObjectKind::Context, static_cast<uint64_t>(device)); }

  size_t size() const { return objects_.size(); }
  size_t count(ObjectKind kind) const { return index_[static_cast<unsigned>(kind)].size(); }
  // Entries of one kind by handle (ascending).
  const std::map<uint64_t, ObjectId>& of(ObjectKind kind) const { return index_[static_cast<unsigned>(kind)]; }

  // Parents before children, oldest first (the order a restore recreates them in).
  void walk_parents_first(const std::function<void(Object&)>& f);
  // Children before parents, newest first (the order teardown releases them in). Under
  // `root` only (itself last) when given.
  void walk_children_first(const std::function<void(Object&)>& f, ObjectId root = 0);

  // Guest handles the host makes (modules, functions, managed variables): the next one.
  uint64_t next_handle(ObjectKind kind) { return ++last_handle_[static_cast<unsigned>(kind)]; }
  uint64_t last_handle(ObjectKind kind) const { return last_handle_[static_cast<unsigned>(kind)]; }
  void set_last_handle(ObjectKind kind, uint64_t v) { last_handle_[static_cast<unsigned>(kind)] = v; }

 private:
  void walk_down(Object& o, const std::function<void(Object&)>& f);
  void walk_up(Object& o, const std::function<void(Object&)>& f);

  std::map<ObjectId, Object> objects_;  // id order = creation order
  std::map<uint64_t, ObjectId> index_[kObjectKinds];
  uint64_t last_handle_[kObjectKinds] = {};
  ObjectId last_id_ = 0;
};

}  // namespace vmcuda::host
