// graph area: stream capture and CUDA graphs, built, instantiated and launched by the host's
// driver in this process's context (host-stub/src/graph.cc says how).
//
// Capture is the host driver's own: cudaStreamBeginCapture/EndCapture/IsCapturing/
// GetCaptureInfo are round trips on the real stream, and everything this library queues on
// a capturing stream (launches, async copies of device or pinned memory, memsets, event
// records and waits, host functions) is captured there, in order, with CUDA's errors
// (cudaMallocAsync/cudaFreeAsync become graph memory nodes: graph_memory.cc). What
// cannot be captured through vmcuda: copies of pageable host memory (the host sees only a
// staging copy that does not outlive the call): cudaErrorNotSupported (801), from the host
// at the next synchronizing call (docs/running.md).
//
// Graph, node and executable-graph handles are made here from the stream/event counter
// (stream_event.h) and checked by the host; nodes of captured or cloned graphs get handles
// from the host when listed. Building a graph is a round trip per call (CUDA reports its
// errors at once); a launch is one queued call (cudaGraphLaunch: kQueued | kIssues).
// Host nodes run their function here, at every launch (host_func.cc's persistent entries).
// Graph memory nodes (cudaGraphAddMemAllocNode, captured cudaMallocAsync) are graph_memory.cc's:
// empty nodes on the host, their memory the client's arena.
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph.h"
#include "host_pointers.h"
#include "log.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {

namespace api = vmcuda::api;

Remote* graph_enter(cudaError_t* e) {
  if ((*e = enter_device_call())) return nullptr;
  Remote* r = Remote::get(e);
  if (!r) record(*e);
  return r;
}

// The side's pointer and position go as given (the host checks the region they span, and
// cudaGraphMemcpyNodeGetParams gives them back): device memory of this process or pinned
// shared-heap memory; pageable memory and arrays are refused.
cudaError_t graph_memcpy_side(const cudaPitchedPtr& p, const cudaPos& pos, const cudaExtent& ext, cudaArray_t array,
                              api::GraphMemcpySide* s) {
  if (array) {
    VMCUDA_LOG(kWarn, "graph", "a graph memcpy node with a CUDA array is not supported yet (801)");
    return cudaErrorNotSupported;
  }
  if (!p.ptr) return cudaErrorInvalidValue;
  const uint64_t pitch = p.pitch ? p.pitch : ext.width;
  const uint64_t height = p.ysize ? p.ysize : ext.height;
  const auto start = reinterpret_cast<const std::byte*>(p.ptr);
  const uint64_t first = pos.z * pitch * height + pos.y * pitch + pos.x;
  // Bytes from p.ptr to the region's end.
  const uint64_t end = ext.width == 0 || ext.height == 0 || ext.depth == 0
                           ? first
                           : first + (ext.depth - 1) * pitch * height + (ext.height - 1) * pitch + ext.width;
  *s = api::GraphMemcpySide{};
  s->pitch = pitch;
  s->height = height;
  s->pos[0] = pos.x, s->pos[1] = pos.y, s->pos[2] = pos.z;
  if (is_device(start + first, end > first ? end - first : 1)) {
    s->kind = api::kGraphMemDevice;
    s->device = addr(start);
    return cudaSuccess;
  }
  if (auto ref = pinned_range(start, end ? end : 1)) {
    s->kind = api::kGraphMemHeap;
    s->heap = vmrpc::wire::HeapRef{ref->offset, end};
    return cudaSuccess;
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    VMCUDA_LOG(kWarn, "graph", "a graph memcpy node with pageable host memory is not supported (801): the host "
                               "reads it at every launch; use pinned memory (cudaMallocHost)");
  return cudaErrorNotSupported;
}

namespace {

// Captures this process began and has not ended (stream_capturing costs nothing while 0).
std::atomic<int> g_open_captures{0};

// Live graphs and executable graphs of this process: queued calls (launch, destroy) refuse
// a forged or destroyed handle at once.
struct Registry {
  std::mutex mu;
  std::unordered_set<uint64_t> graphs, execs;
  std::unordered_map<uint64_t, unsigned long long> exec_flags;  // as instantiated (cudaGraphExecGetFlags)
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: entry points may run at exit
  return *r;
}
void set_exec_flags(uint64_t exec, unsigned long long flags) {
  std::lock_guard l(registry().mu);
  registry().exec_flags[exec] = flags;
}
bool known(std::unordered_set<uint64_t> Registry::*set, uint64_t h) {
  std::lock_guard l(registry().mu);
  return (registry().*set).contains(h);
}
void remember(std::unordered_set<uint64_t> Registry::*set, uint64_t h) {
  std::lock_guard l(registry().mu);
  (registry().*set).insert(h);
}
bool forget(std::unordered_set<uint64_t> Registry::*set, uint64_t h) {
  std::lock_guard l(registry().mu);
  return (registry().*set).erase(h) != 0;
}

uint64_t wire(const void* h) { return reinterpret_cast<uint64_t>(h); }

}  // namespace

bool graph_known(uint64_t graph) { return known(&Registry::graphs, graph); }

namespace {

Remote* enter(cudaError_t* e) { return graph_enter(e); }

// Dependencies as wire handles, and a tail of them followed by `more`.
cudaError_t deps_tail(const cudaGraphNode_t* deps, size_t count, std::span<const std::byte> more,
                      std::vector<std::byte>* tail, uint32_t* dep_count) {
  if (count && !deps) return cudaErrorInvalidValue;
  if (count > api::kMaxGraphDeps) return cudaErrorInvalidValue;
  tail->resize(count * sizeof(uint64_t) + more.size());
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = wire(deps[i]);
    std::memcpy(tail->data() + i * sizeof h, &h, sizeof h);
  }
  if (!more.empty()) std::memcpy(tail->data() + count * sizeof(uint64_t), more.data(), more.size());
  *dep_count = static_cast<uint32_t>(count);
  return cudaSuccess;
}

// A node addition: makes the handle, sends the call, hands the handle out on success.
template <api::Call C, class F>
cudaError_t add_node(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count, F&& fill,
                     std::span<const std::byte> more = {}) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!out || !graph) return record(cudaErrorInvalidValue);
  thread_local std::vector<std::byte> tail;
  uint32_t dep_count;
  if (cudaError_t de = deps_tail(deps, count, more, &tail, &dep_count)) return record(de);
  typename api::CallTraits<C>::Args a{};
  a.graph = wire(graph);
  a.node = handles::next();
  a.dep_count = dep_count;
  auto lock = r->lock();
  if (cudaError_t fe = fill(*r, a)) return record(fe);
  const auto res = r->call<C>(a, tail);
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *out = reinterpret_cast<cudaGraphNode_t>(a.node);
  return cudaSuccess;
}

cudaError_t memcpy_node(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count,
                        const cudaMemcpy3DParms& p) {
  return add_node<api::Call::GraphAddMemcpyNode>(out, graph, deps, count, [&](Remote&, api::GraphMemcpyNodeArgs& a) {
    if (cudaError_t e = graph_memcpy_side(p.srcPtr, p.srcPos, p.extent, p.srcArray, &a.src)) return e;
    if (cudaError_t e = graph_memcpy_side(p.dstPtr, p.dstPos, p.extent, p.dstArray, &a.dst)) return e;
    a.extent[0] = p.extent.width, a.extent[1] = p.extent.height, a.extent[2] = p.extent.depth;
    return cudaSuccess;
  });
}

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode, bool per_thread) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  if (static_cast<unsigned>(mode) > cudaStreamCaptureModeRelaxed) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  const auto res = r->call<api::Call::StreamBeginCapture>({s, static_cast<uint32_t>(mode), 0});
  if (res.status == 0) g_open_captures.fetch_add(1);
  return record(static_cast<cudaError_t>(res.status));
}

// Captures into an existing graph (cudaStreamBeginCaptureToGraph): stream -> the graph they
// end in. r's lock held.
std::map<uint64_t, uint64_t>& captures_into() {
  static auto* m = new std::map<uint64_t, uint64_t>;
  return *m;
}

// Captures whose graph this process was given while they were open (capture_graph):
// capture id -> the graph's handle, which cudaStreamEndCapture then answers. r's lock held.
std::map<unsigned long long, uint64_t>& given_capture_graphs() {
  static auto* m = new std::map<unsigned long long, uint64_t>;
  return *m;
}

cudaError_t begin_capture_to_graph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                   const cudaGraphEdgeData* edges, size_t count, cudaStreamCaptureMode mode,
                                   bool per_thread) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  if (!graph || (count && !deps) || static_cast<unsigned>(mode) > cudaStreamCaptureModeRelaxed ||
      count > api::kMaxGraphDeps)
    return record(cudaErrorInvalidValue);
  // Edge data that is all zero is a plain dependency: sent only when some is not.
  bool plain = true;
  for (size_t i = 0; edges && i < count; ++i)
    plain = plain && edges[i].from_port == 0 && edges[i].to_port == 0 && edges[i].type == 0;
  thread_local std::vector<std::byte> tail;
  tail.resize(count * sizeof(uint64_t) + (plain ? 0 : count * sizeof(cudaGraphEdgeData)));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = wire(deps[i]);
    std::memcpy(tail.data() + i * sizeof h, &h, sizeof h);
  }
  if (!plain) std::memcpy(tail.data() + count * sizeof(uint64_t), edges, count * sizeof(cudaGraphEdgeData));
  auto lock = r->lock();
  const api::CaptureToGraphArgs a{s, wire(graph), static_cast<uint32_t>(mode), static_cast<uint32_t>(count),
                                  plain ? 0u : 1u, 0};
  const auto res = r->call<api::Call::StreamBeginCaptureToGraph>(a, tail);
  if (res.status == 0) {
    g_open_captures.fetch_add(1);
    captures_into()[s] = wire(graph);
  }
  return record(static_cast<cudaError_t>(res.status));
}

cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph, bool per_thread) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!graph) return record(cudaErrorInvalidValue);
  *graph = nullptr;
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  auto lock = r->lock();
  // A capture into the program's graph ends in it; one whose graph this process was given
  // (cudaStreamGetCaptureInfo) ends in that; else in a new graph.
  const auto into = captures_into().find(s);
  auto given = given_capture_graphs().end();
  if (into == captures_into().end() && !given_capture_graphs().empty()) {
    const auto info = r->call<api::Call::StreamCaptureInfo>({s});
    if (info.status == 0 && info.reply.status != cudaStreamCaptureStatusNone)
      given = given_capture_graphs().find(info.reply.id);
  }
  const uint64_t h = given != given_capture_graphs().end() ? given->second
                     : into != captures_into().end()       ? into->second
                                                           : handles::next();
  const auto res = r->call<api::Call::StreamEndCapture>({s, h});
  const auto status = static_cast<cudaError_t>(res.status);
  const bool ended = status == cudaSuccess || status == cudaErrorStreamCaptureInvalidated ||
                     status == cudaErrorStreamCaptureUnjoined;
  if (given != given_capture_graphs().end()) {
    if (!ended) return record(status);
    given_capture_graphs().erase(given);
    if (g_open_captures.load() > 0) g_open_captures.fetch_sub(1);
    if (status != cudaSuccess) {
      forget(&Registry::graphs, h);  // the driver dropped it with the capture
      graph_memory_graph_destroyed(*r, h);
      return record(status);
    }
    *graph = reinterpret_cast<cudaGraph_t>(h);
    return cudaSuccess;
  }
  if (into != captures_into().end()) {
    if (ended) captures_into().erase(into);
    if (ended && g_open_captures.load() > 0) g_open_captures.fetch_sub(1);
    if (status != cudaSuccess) return record(status);
    *graph = reinterpret_cast<cudaGraph_t>(h);
    return cudaSuccess;
  }
  // The capture ended (with a graph, or invalidated and dropped) unless it was not one.
  if ((status == cudaSuccess || status == cudaErrorStreamCaptureInvalidated ||
       status == cudaErrorStreamCaptureUnjoined) &&
      g_open_captures.load() > 0)
    g_open_captures.fetch_sub(1);
  if (status != cudaSuccess) return record(status);
  remember(&Registry::graphs, h);
  *graph = reinterpret_cast<cudaGraph_t>(h);
  return cudaSuccess;
}

// What cudaStreamGetCaptureInfo gives of a capture in progress: its graph (a handle of this
// process from then on, the graph the capture ends in) and the nodes the stream's next work
// will depend on (host-made handles of that graph's nodes) with their edge data. The arrays
// stay valid until the next call about the stream (kept per stream here). r's lock held.
cudaError_t capture_graph(Remote& r, uint64_t s, cudaGraph_t* graph, const cudaGraphNode_t** deps,
                          const cudaGraphEdgeData** edges, size_t* count) {
  struct Deps {
    std::vector<cudaGraphNode_t> nodes;
    std::vector<cudaGraphEdgeData> edges;
  };
  static auto* kept = new std::map<uint64_t, Deps>;  // by stream
  uint32_t capacity = 64;
  for (;;) {
    const uint64_t proposed = handles::next();
    const size_t entry = sizeof(uint64_t) + sizeof(cudaGraphEdgeData);
    const auto res = r.call<api::Call::StreamCaptureGraph>({s, proposed, capacity, 0}, {},
                                                           static_cast<uint32_t>(capacity * entry));
    if (res.status) return static_cast<cudaError_t>(res.status);
    const api::CaptureGraphReply& rep = res.reply;
    if (rep.status != cudaStreamCaptureStatusActive) return cudaErrorStreamCaptureInvalidated;  // ended meanwhile
    if (rep.graph == proposed) {
      given_capture_graphs()[rep.id] = proposed;
      remember(&Registry::graphs, proposed);
    }
    if (rep.count > capacity && rep.count <= api::kMaxGraphDeps) {
      capacity = static_cast<uint32_t>(rep.count);
      continue;  // more dependencies than asked for: once more with room for them all
    }
    const size_t n = std::min<uint64_t>(rep.count, capacity);
    const size_t want = n * (sizeof(uint64_t) + (rep.edges ? sizeof(cudaGraphEdgeData) : 0));
    if (rep.count > capacity || res.extra.size() != want || rep.edges > 1) return cudaErrorUnknown;  // a host bug
    if (rep.edges && !edges) return cudaErrorLossyQuery;  // edge data that the caller would lose
    Deps& d = (*kept)[s];
    d.nodes.resize(n);
    d.edges.assign(n, cudaGraphEdgeData{});
    for (size_t i = 0; i < n; ++i) {
      uint64_t h;
      std::memcpy(&h, res.extra.data() + i * sizeof h, sizeof h);
      d.nodes[i] = reinterpret_cast<cudaGraphNode_t>(h);
    }
    if (rep.edges) std::memcpy(d.edges.data(), res.extra.data() + n * sizeof(uint64_t), n * sizeof(cudaGraphEdgeData));
    if (graph) *graph = reinterpret_cast<cudaGraph_t>(rep.graph);
    if (deps) *deps = n ? d.nodes.data() : nullptr;
    if (edges) *edges = n ? d.edges.data() : nullptr;
    if (count) *count = n;
    return cudaSuccess;
  }
}

cudaError_t update_capture_deps(cudaStream_t stream, cudaGraphNode_t* deps, const cudaGraphEdgeData* edges,
                                size_t count, unsigned flags, bool per_thread) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  // cudaStreamAddCaptureDependencies (0) or cudaStreamSetCaptureDependencies (1).
  if (flags > 1 || (count && !deps) || count > api::kMaxGraphDeps) return record(cudaErrorInvalidValue);
  bool plain = true;
  for (size_t i = 0; edges && i < count; ++i)
    plain = plain && edges[i].from_port == 0 && edges[i].to_port == 0 && edges[i].type == 0;
  thread_local std::vector<std::byte> tail;
  tail.resize(count * sizeof(uint64_t) + (plain ? 0 : count * sizeof(cudaGraphEdgeData)));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = wire(deps[i]);
    std::memcpy(tail.data() + i * sizeof h, &h, sizeof h);
  }
  if (!plain) std::memcpy(tail.data() + count * sizeof(uint64_t), edges, count * sizeof(cudaGraphEdgeData));
  auto lock = r->lock();
  const api::CaptureDepsArgs a{s, static_cast<uint32_t>(count), flags, plain ? 0u : 1u, 0};
  return record(static_cast<cudaError_t>(r->call<api::Call::StreamUpdateCaptureDeps>(a, tail).status));
}

cudaError_t capture_info(cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id,
                         cudaGraph_t* graph, const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                         size_t* count, bool per_thread) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!status) return record(cudaErrorInvalidValue);
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  // No capture this process began is open: no stream is capturing (a stream joins a capture
  // only through an event recorded in one), so the answer needs no round trip. Frameworks
  // ask before many launches and allocations.
  if (g_open_captures.load(std::memory_order_relaxed) == 0) {
    *status = cudaStreamCaptureStatusNone;
    if (id) *id = 0;
    if (graph) *graph = nullptr;
    if (deps) *deps = nullptr;
    if (edges) *edges = nullptr;
    if (count) *count = 0;
    return cudaSuccess;
  }
  auto lock = r->lock();
  const auto res = r->call<api::Call::StreamCaptureInfo>({s});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *status = static_cast<cudaStreamCaptureStatus>(res.reply.status);
  if (id) *id = res.reply.id;
  if (res.reply.status == cudaStreamCaptureStatusActive && (graph || deps || edges || count))
    return record(capture_graph(*r, s, graph, deps, edges, count));
  if (graph) *graph = nullptr;
  if (deps) *deps = nullptr;
  if (edges) *edges = nullptr;
  if (count) *count = 0;
  return cudaSuccess;
}

cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t stream, bool per_thread, bool upload) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!exec || !known(&Registry::execs, wire(exec))) return record(cudaErrorInvalidValue);
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  auto lock = r->lock();
  // One queued call, whatever the graph holds: its error comes with the next synchronizing call.
  if (upload) return record(r->enqueue<api::Call::GraphUpload>({wire(exec), s}));
  if (cudaError_t me = graph_memory_launch(wire(exec))) return record(me);
  user_objects_launched(wire(exec), s);
  host_entries_launched(wire(exec), s);
  return record(r->enqueue<api::Call::GraphLaunch>({wire(exec), s}));
}

cudaError_t list_nodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count, bool roots) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!graph || !count) return record(cudaErrorInvalidValue);
  const size_t capacity = nodes ? std::min<size_t>(*count, api::kMaxGraphList) : 0;
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphGetNodes>({wire(graph), roots ? 1u : 0u, static_cast<uint32_t>(capacity)}, {},
                                                     static_cast<uint32_t>(capacity * sizeof(uint64_t)));
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  if (!nodes) {
    *count = res.reply.count;
    return cudaSuccess;
  }
  // As CUDA: up to *count filled, the rest of them NULL; *count becomes the number filled.
  const size_t n = std::min<size_t>(res.reply.count, capacity);
  if (res.extra.size() < n * sizeof(uint64_t)) return record(cudaErrorUnknown);
  for (size_t i = 0; i < *count; ++i) {
    uint64_t h = 0;
    if (i < n) std::memcpy(&h, res.extra.data() + i * sizeof h, sizeof h);
    nodes[i] = reinterpret_cast<cudaGraphNode_t>(h);
  }
  *count = std::min<size_t>(*count, res.reply.count);
  return cudaSuccess;
}

cudaError_t instantiate(cudaGraphExec_t* out, cudaGraph_t graph, unsigned long long flags) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!out || !graph) return record(cudaErrorInvalidValue);
  constexpr unsigned long long kUpload = 2, kDeviceLaunch = 4;
  if (flags & kDeviceLaunch) {
    VMCUDA_LOG(kWarn, "graph", "cudaGraphInstantiateFlagDeviceLaunch is not supported (801)");
    return record(cudaErrorNotSupported);
  }
  if (flags & kUpload) return record(cudaErrorInvalidValue);  // only cudaGraphInstantiateWithParams takes it
  if (cudaError_t me = graph_memory_instantiate_check(wire(graph))) return record(me);
  const uint64_t h = handles::next();
  host_entries_shared();  // before: the exec copies the graph's host node entries
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphInstantiate>({h, wire(graph), flags});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  remember(&Registry::execs, h);
  set_exec_flags(h, flags);
  graph_memory_instantiated(wire(graph), h, flags);
  user_objects_instantiated(wire(graph), h);
  *out = reinterpret_cast<cudaGraphExec_t>(h);
  return cudaSuccess;
}

}  // namespace

cudaError_t capture_dependencies(Remote& r, uint64_t stream, cudaGraph_t* graph, const cudaGraphNode_t** deps,
                                 size_t* count) {
  const cudaGraphEdgeData* edges = nullptr;
  if (cudaError_t e = capture_graph(r, stream, graph, deps, &edges, count)) return e;
  for (size_t i = 0; edges && i < *count; ++i)
    if (edges[i].from_port || edges[i].to_port || edges[i].type) {
      VMCUDA_LOG(kWarn, "graph", "stream-ordered allocation after a capture edge with ports or a type is not "
                                 "supported (801)");
      return cudaErrorNotSupported;
    }
  return cudaSuccess;
}

bool stream_capturing(Remote& r, uint64_t stream) {
  if (g_open_captures.load(std::memory_order_relaxed) == 0) return false;
  const auto res = r.call<api::Call::StreamCaptureInfo>({stream});
  VMCUDA_LOG(kDebug, "graph", "stream %#llx: capture status %u (call status %d)",
             static_cast<unsigned long long>(stream), res.reply.status, res.status);
  return res.status == 0 && res.reply.status != cudaStreamCaptureStatusNone;
}

}  // namespace vmcuda::guest

using namespace vmcuda::guest;
namespace api = vmcuda::api;

// ---- stream capture
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode, false);
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode, true);
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) { return end_capture(stream, pGraph, false); }
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph) {
  return end_capture(stream, pGraph, true);
}
cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t* dependencies,
                                                const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                                unsigned int flags) {
  return update_capture_deps(stream, dependencies, dependencyData, numDependencies, flags, false);
}
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream, cudaGraphNode_t* dependencies,
                                                     const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                                     unsigned int flags) {
  return update_capture_deps(stream, dependencies, dependencyData, numDependencies, flags, true);
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  return capture_info(stream, pCaptureStatus, nullptr, nullptr, nullptr, nullptr, nullptr, false);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  return capture_info(stream, pCaptureStatus, nullptr, nullptr, nullptr, nullptr, nullptr, true);
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                                     unsigned long long* id_out, cudaGraph_t* graph_out,
                                     const cudaGraphNode_t** dependencies_out, const cudaGraphEdgeData** edgeData_out,
                                     size_t* numDependencies_out) {
  return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                      numDependencies_out, false);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                                          unsigned long long* id_out, cudaGraph_t* graph_out,
                                          const cudaGraphNode_t** dependencies_out,
                                          const cudaGraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                      numDependencies_out, true);
}

// The calling thread's mode, kept here (per guest thread) and given to the host's thread,
// which runs every thread of this process: an approximation for programs whose threads use
// different modes at once (docs/running.md).
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  if (!mode || static_cast<unsigned>(*mode) > cudaStreamCaptureModeRelaxed) return record(cudaErrorInvalidValue);
  const cudaStreamCaptureMode want = *mode;
  *mode = current;
  if (want == current) return cudaSuccess;
  current = want;
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  auto lock = r->lock();
  return record(r->enqueue<api::Call::CaptureMode>({static_cast<uint32_t>(want), 0}));
}

// ---- graphs
cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!pGraph || flags) return record(cudaErrorInvalidValue);
  const uint64_t h = handles::next();
  auto lock = r->lock();
  if (auto res = r->call<api::Call::GraphCreate>({h, 0, 0}); res.status)
    return record(static_cast<cudaError_t>(res.status));
  remember(&Registry::graphs, h);
  *pGraph = reinterpret_cast<cudaGraph_t>(h);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!graph || !forget(&Registry::graphs, wire(graph))) return record(cudaErrorInvalidValue);
  user_objects_graph_destroyed(wire(graph));
  auto lock = r->lock();
  const cudaError_t de = r->enqueue<api::Call::GraphDestroy>({wire(graph), 0, 0});
  graph_memory_graph_destroyed(*r, wire(graph));  // after: the host's graph goes first
  return record(de);
}

cudaError_t cudaGraphClone(cudaGraph_t* pGraphClone, cudaGraph_t originalGraph) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!pGraphClone || !originalGraph) return record(cudaErrorInvalidValue);
  // "The graph cannot be cloned" when it holds memory nodes.
  if (graph_memory_in(wire(originalGraph))) return record(cudaErrorNotSupported);
  const uint64_t h = handles::next();
  host_entries_shared();
  auto lock = r->lock();
  if (auto res = r->call<api::Call::GraphClone>({h, wire(originalGraph)}); res.status)
    return record(static_cast<cudaError_t>(res.status));
  remember(&Registry::graphs, h);
  user_objects_graph_copied(wire(originalGraph), h);
  *pGraphClone = reinterpret_cast<cudaGraph_t>(h);
  return cudaSuccess;
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                   size_t numDependencies, const cudaKernelNodeParams* p) {
  if (!p) return record(cudaErrorInvalidValue);
  thread_local std::vector<std::byte> packed;
  uint64_t function = 0;
  // Packed first (the node's tail follows its dependencies): under the lock add_node takes.
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  HostKernel* k = nullptr;
  if (cudaError_t ke = graph_kernel_object(p->func, &k)) return record(ke);
  {
    auto lock = r->lock();
    if (cudaError_t pe = pack_kernel(*r, k, p->func, p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams,
                                     p->extra, &function, &packed))
      return record(pe);
  }
  return add_node<api::Call::GraphAddKernelNode>(
      pGraphNode, graph, pDependencies, numDependencies,
      [&](Remote&, api::GraphKernelNodeArgs& a) {
        a.function = function;
        a.grid[0] = p->gridDim.x, a.grid[1] = p->gridDim.y, a.grid[2] = p->gridDim.z;
        a.block[0] = p->blockDim.x, a.block[1] = p->blockDim.y, a.block[2] = p->blockDim.z;
        a.shared_bytes = p->sharedMemBytes;
        a.arg_bytes = static_cast<uint32_t>(packed.size());
        return cudaSuccess;
      },
      packed);
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                   size_t numDependencies, const cudaMemcpy3DParms* pCopyParams) {
  if (!pCopyParams) return record(cudaErrorInvalidValue);
  return memcpy_node(pGraphNode, graph, pDependencies, numDependencies, *pCopyParams);
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t* pDependencies, size_t numDependencies, void* dst,
                                     const void* src, size_t count, cudaMemcpyKind kind) {
  if (static_cast<unsigned>(kind) > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
  cudaMemcpy3DParms p{};
  p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
  p.dstPtr = cudaPitchedPtr{dst, count, count, 1};
  p.extent = cudaExtent{count, 1, 1};
  p.kind = kind;
  return memcpy_node(pGraphNode, graph, pDependencies, numDependencies, p);
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                   size_t numDependencies, const cudaMemsetParams* p) {
  if (!p) return record(cudaErrorInvalidValue);
  return add_node<api::Call::GraphAddMemsetNode>(pGraphNode, graph, pDependencies, numDependencies,
                                                 [&](Remote&, api::GraphMemsetNodeArgs& a) {
                                                   a.dst = addr(p->dst);
                                                   a.pitch = p->pitch;
                                                   a.width = p->width;
                                                   a.height = p->height;
                                                   a.value = p->value;
                                                   a.element_size = p->elementSize;
                                                   return cudaSuccess;
                                                 });
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                 size_t numDependencies, const cudaHostNodeParams* p) {
  if (!p || !p->fn) return record(cudaErrorInvalidValue);
  return add_node<api::Call::GraphAddHostNode>(pGraphNode, graph, pDependencies, numDependencies,
                                               [&](Remote& r, api::GraphHostNodeArgs& a) {
                                                 return persistent_host_entry(r, p->fn, p->userData, &a.mailbox,
                                                                              &a.index);
                                               });
}

namespace {
cudaError_t plain_node(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count,
                       uint32_t type, uint64_t object) {
  return add_node<api::Call::GraphAddNode>(out, graph, deps, count, [&](Remote&, api::GraphNodeArgs& a) {
    a.type = type;
    a.object = object;
    return cudaSuccess;
  });
}
}  // namespace

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                  size_t numDependencies) {
  return plain_node(pGraphNode, graph, pDependencies, numDependencies, api::kGraphNodeEmpty, 0);
}
cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                        const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                        cudaEvent_t event) {
  uint64_t ev;
  if (cudaError_t e = event_wire_handle(event, &ev)) return record(e);
  return plain_node(pGraphNode, graph, pDependencies, numDependencies, api::kGraphNodeEventRecord, ev);
}
cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                      const cudaGraphNode_t* pDependencies, size_t numDependencies, cudaEvent_t event) {
  uint64_t ev;
  if (cudaError_t e = event_wire_handle(event, &ev)) return record(e);
  return plain_node(pGraphNode, graph, pDependencies, numDependencies, api::kGraphNodeWaitEvent, ev);
}
cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                       cudaGraph_t childGraph) {
  if (!childGraph) return record(cudaErrorInvalidValue);
  // A graph with memory nodes is a child only if it moves into the parent (refused: graph_nodes.cc).
  if (graph_memory_in(wire(childGraph))) return record(cudaErrorNotSupported);
  host_entries_shared();  // the node's copy shares the child's host node entries
  const cudaError_t e = plain_node(pGraphNode, graph, pDependencies, numDependencies, api::kGraphNodeChild, wire(childGraph));
  // The node's copy of the child holds the child's user object references, as long as the
  // graph holding the node does.
  if (e == cudaSuccess) user_objects_graph_copied(wire(childGraph), wire(graph));
  return e;
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                     const cudaGraphEdgeData* edgeData, size_t numDependencies) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!graph || (numDependencies && (!from || !to)) || numDependencies > api::kMaxGraphDeps)
    return record(cudaErrorInvalidValue);
  if (edgeData)
    for (size_t i = 0; i < numDependencies; ++i) {
      const cudaGraphEdgeData& d = edgeData[i];
      if (d.from_port || d.to_port || d.type) {
        VMCUDA_LOG(kWarn, "graph", "graph edges with ports or types are not supported yet (801)");
        return record(cudaErrorNotSupported);
      }
    }
  std::vector<std::byte> tail(2 * numDependencies * sizeof(uint64_t));
  for (size_t i = 0; i < numDependencies; ++i) {
    const uint64_t f = wire(from[i]), t = wire(to[i]);
    std::memcpy(tail.data() + i * 8, &f, 8);
    std::memcpy(tail.data() + (numDependencies + i) * 8, &t, 8);
  }
  auto lock = r->lock();
  return record(static_cast<cudaError_t>(
      r->call<api::Call::GraphAddDependencies>({wire(graph), static_cast<uint32_t>(numDependencies), 0}, tail).status));
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes) {
  return list_nodes(graph, nodes, numNodes, false);
}
cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* pRootNodes, size_t* pNumRootNodes) {
  return list_nodes(graph, pRootNodes, pNumRootNodes, true);
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* pType) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!node || !pType) return record(cudaErrorInvalidValue);
  if (uint32_t t; graph_memory_node(wire(node), &t)) return *pType = static_cast<cudaGraphNodeType>(t), cudaSuccess;
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphNodeGetType>({wire(node)});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *pType = static_cast<cudaGraphNodeType>(res.reply.type);
  return cudaSuccess;
}

cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t* pNode, cudaGraphNode_t originalNode, cudaGraph_t clonedGraph) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!pNode || !originalNode || !clonedGraph) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphNodeFindInClone>({wire(originalNode), wire(clonedGraph)});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *pNode = reinterpret_cast<cudaGraphNode_t>(res.reply.node);
  return cudaSuccess;
}

// ---- executable graphs
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  return instantiate(pGraphExec, graph, flags);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  return instantiate(pGraphExec, graph, flags);
}

namespace {
// cudaGraphInstantiateWithParams: cudaGraphInstantiateWithFlags, then the upload the flags ask
// for on the stream given; the outcome in result_out (the failing node is not known here:
// errNode_out stays NULL, which CUDA also gives for cudaGraphInstantiateError).
cudaError_t instantiate_with_params(cudaGraphExec_t* out, cudaGraph_t graph, cudaGraphInstantiateParams* p,
                                    bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!p) return record(cudaErrorInvalidValue);
  constexpr unsigned long long kUpload = cudaGraphInstantiateFlagUpload;
  p->errNode_out = nullptr;
  p->result_out = cudaGraphInstantiateError;
  if (cudaError_t e = instantiate(out, graph, p->flags & ~kUpload)) return e;
  if (p->flags & kUpload) {
    if (cudaError_t e = graph_launch(*out, p->uploadStream, per_thread, true)) {
      // Not uploaded: no executable graph either, as when instantiation fails.
      const cudaError_t last = peek_last_error();
      (void)cudaGraphExecDestroy(*out);
      restore_runtime_thread_state(last, true);
      *out = nullptr;
      return e;
    }
  }
  set_exec_flags(wire(*out), p->flags);
  p->result_out = cudaGraphInstantiateSuccess;
  return cudaSuccess;
}
}  // namespace

// The flags it was instantiated with, kept here.
cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t graphExec, unsigned long long* flags) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!flags) return record(cudaErrorInvalidValue);
  std::lock_guard l(registry().mu);
  const auto it = registry().exec_flags.find(wire(graphExec));
  if (it == registry().exec_flags.end()) return record(cudaErrorInvalidValue);
  *flags = it->second;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams* instantiateParams) {
  return instantiate_with_params(pGraphExec, graph, instantiateParams, false);
}
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* instantiateParams) {
  return instantiate_with_params(pGraphExec, graph, instantiateParams, true);
}
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                          const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                          enum cudaStreamCaptureMode mode) {
  return begin_capture_to_graph(stream, graph, dependencies, dependencyData, numDependencies, mode, false);
}
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t* dependencies,
                                               const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                                               enum cudaStreamCaptureMode mode) {
  return begin_capture_to_graph(stream, graph, dependencies, dependencyData, numDependencies, mode, true);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return graph_launch(graphExec, stream, false, false);
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return graph_launch(graphExec, stream, true, false);
}
cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return graph_launch(graphExec, stream, false, true);
}
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return graph_launch(graphExec, stream, true, true);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!graphExec || !forget(&Registry::execs, wire(graphExec))) return record(cudaErrorInvalidValue);
  {
    std::lock_guard l(registry().mu);
    registry().exec_flags.erase(wire(graphExec));
  }
  cudaError_t de;
  {
    auto lock = r->lock();
    de = r->enqueue<api::Call::GraphExecDestroy>({wire(graphExec)});
    graph_memory_exec_destroyed(*r, wire(graphExec));
  }
  user_objects_exec_destroyed(wire(graphExec));  // after its launches' work (host functions queued after them)
  host_entries_exec_destroyed(wire(graphExec));  // likewise
  return record(de);
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const cudaKernelNodeParams* p) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!hGraphExec || !node || !p) return record(cudaErrorInvalidValue);
  thread_local std::vector<std::byte> packed;
  uint64_t function = 0;
  HostKernel* k = nullptr;
  if (cudaError_t ke = graph_kernel_object(p->func, &k)) return record(ke);
  auto lock = r->lock();
  if (cudaError_t pe = pack_kernel(*r, k, p->func, p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams, p->extra,
                                   &function, &packed))
    return record(pe);
  const api::GraphExecKernelArgs a{wire(hGraphExec),
                                   wire(node),
                                   function,
                                   {p->gridDim.x, p->gridDim.y, p->gridDim.z},
                                   {p->blockDim.x, p->blockDim.y, p->blockDim.z},
                                   p->sharedMemBytes,
                                   static_cast<uint32_t>(packed.size())};
  return record(static_cast<cudaError_t>(r->call<api::Call::GraphExecKernelNodeSetParams>(a, packed).status));
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph, cudaGraphExecUpdateResultInfo* resultInfo) {
  cudaError_t e;
  Remote* r = enter(&e);
  if (!r) return e;
  if (!hGraphExec || !hGraph || !resultInfo) return record(cudaErrorInvalidValue);
  if (!graph_memory_update_allowed(wire(hGraphExec), wire(hGraph))) {
    *resultInfo = cudaGraphExecUpdateResultInfo{cudaGraphExecUpdateErrorNotSupported, nullptr, nullptr};
    return record(cudaErrorGraphExecUpdateFailure);
  }
  host_entries_shared();
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphExecUpdate>({wire(hGraphExec), wire(hGraph)});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  if (res.reply.status == 0) {
    lock.unlock();
    host_entries_exec_updated(wire(hGraphExec));  // its host nodes are the graph's entries now
    lock.lock();
  }
  resultInfo->result = static_cast<cudaGraphExecUpdateResult>(res.reply.result);
  resultInfo->errorNode = reinterpret_cast<cudaGraphNode_t>(res.reply.error_node);
  resultInfo->errorFromNode = reinterpret_cast<cudaGraphNode_t>(res.reply.error_from_node);
  return record(static_cast<cudaError_t>(res.reply.status));
}
