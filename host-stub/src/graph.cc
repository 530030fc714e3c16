// CUDA graphs (calls.def 0x1700): stream capture and explicit graphs, built, instantiated
// and launched by the host's driver in the client's context.
//
// Stream capture is the driver's own: StreamBeginCapture starts cuStreamBeginCapture on the
// client's real stream, and every launch, async copy, memset, event record and wait and host
// function the guest then queues on it (or on streams that join the capture through events)
// reaches the driver as usual and is captured with CUDA's exact semantics, errors included
// (cudaErrorStreamCaptureUnsupported/Invalidated/Unjoined come from the driver). Three
// things keep it exact here:
//  - while the client has a capture open, nothing is handed to the GPU's working thread
//    (session.cc): captured work is issued in order on the thread that began the capture;
//  - copies whose host bytes live only for the call (inline frames, staging the guest reuses:
//    pageable memory in the guest) are refused on a capturing stream (refuse_in_capture):
//    a graph reads its host memory at every launch, and only pinned shared-heap memory
//    (cudaMallocHost) outlives the call;
//  - host functions on a capturing stream come as persistent gates (host_func.cc), which
//    run the guest's function at every launch of the graph.
// The guest's capture modes map onto the stub's thread: global and thread-local captures
// begin thread-local here (a global one would stop the unsafe calls of every client of the
// stub process, and this thread serves only this client), relaxed stays relaxed.
//
// Explicit graphs: guest-made handles for graphs, nodes and executable graphs, each an entry
// of the VOL (Graph under the context, its GraphNodes under it, GraphExec under the context;
// teardown destroys them with the client). Kernel nodes carry packed parameters checked as a
// launch's; memcpy nodes reach only the client's device memory and its pinned shared-heap
// memory; host nodes are persistent gates. Graph memory nodes (cudaGraphAddMemAllocNode, a
// captured cudaMallocAsync) are empty nodes here: their memory is the client's arena (the
// guest's Malloc when the node is made), so the quota counts it, and which allocation is live
// is the guest's to decide (guest-lib/src/graph_memory.cc).
//
// A suspend carries graphs and executable graphs (graph_state.cc): each graph is described by
// walking it with the driver and built again at the resume, behind the same handles. An
// executable graph keeps a mirror graph that follows every change made to it (GraphExecObject);
// a change it cannot follow refuses the suspend (graphs_block_suspend). An open stream capture
// is carried when one stream alone captures (below: "open captures across a suspend"); one
// other streams joined refuses it until it ends.
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "graph_state.h"
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

std::string Session::graphs_block_suspend() {
  if (std::string c = captures_block_suspend(); !c.empty()) return c;
  for (const auto& [id, handles] : conditional_handles_)
    if (!handles.empty() && vol_.get(id))
      return "graph " + std::to_string(vol_.get(id)->handle) + " has conditional handles "
             "(cudaGraphConditionalHandleCreate), which a suspend cannot carry yet; nothing was changed and the "
             "program runs on";
  // A child graph node's graph is carried (the resume finds it in the node built again); a
  // conditional node's body is not (nor is its node: graph_state.cc).
  for (const auto& [handle, id] : vol_.of(ObjectKind::Graph)) {
    const Object* g = vol_.get(id);
    if (!g->as<GraphObject>().borrowed) continue;
    const Object* owner = vol_.get(g->parent);
    int type = -1;
    if (owner && owner->kind == ObjectKind::GraphNode &&
        api_.cuGraphNodeGetType(owner->as<GraphNodeObject>().node, &type) == CUDA_SUCCESS && type == kNodeChild)
      continue;
    return "the program holds graph " + std::to_string(handle) + ", a body of a conditional node, which a suspend "
           "cannot carry yet; nothing was changed and the program runs on";
  }
  for (const auto& [handle, id] : vol_.of(ObjectKind::GraphExec)) {
    const GraphExecObject& x = vol_.get(id)->as<GraphExecObject>();
    if (!x.unmirrored.empty())
      return "executable graph " + std::to_string(handle) + " " + x.unmirrored +
             ", which a suspend cannot carry; nothing was changed and the program runs on";
  }
  return {};
}

bool Session::capturing(CUstream stream) const {
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  return api_.cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult Session::refuse_in_capture(CUstream s, int device, const char* what) {
  if (captures_open_ == 0) return CUDA_SUCCESS;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  on_device(device, [&] { return api_.cuStreamIsCapturing(s, &status); });
  if (status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_SUCCESS;
  if (!said_capture_copy_)
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused " + what + " on a capturing stream with cudaErrorNotSupported (801): a "
                                 "graph reads its host memory at every launch; use pinned memory (cudaMallocHost)");
  said_capture_copy_ = true;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ---- stream capture

int32_t Session::on_StreamBeginCapture(const api::CaptureBeginArgs& a, api::Empty&, Request&) {
  // The pad is the wire's (our library sends 0); a mode is the program's.
  if (a.pad) return guest_fault("StreamBeginCapture: a nonzero pad");
  if (a.mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  const int mode = a.mode == CU_STREAM_CAPTURE_MODE_RELAXED ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                           : CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  // Nothing of the client may be on the working thread when the capture begins.
  const CUresult e = on_device(device, [&] { return api_.cuStreamBeginCapture_v2(s, mode); });
  if (e == CUDA_SUCCESS) {
    ++captures_open_;
    open_captures_[a.stream] = {mode, device};
  }
  return e;
}

int32_t Session::on_StreamBeginCaptureToGraph(const api::CaptureToGraphArgs& a, api::Empty&, Request& req) {
  if (a.mode > CU_STREAM_CAPTURE_MODE_RELAXED || a.pad || a.edges > 1 || a.count > api::kMaxGraphDeps)
    return guest_fault("StreamBeginCaptureToGraph: mode, flags or dependency count");
  const size_t bytes = size_t{a.count} * (sizeof(uint64_t) + (a.edges ? sizeof(CUgraphEdgeData) : 0));
  if (req.tail.size() != bytes) return guest_fault("StreamBeginCaptureToGraph: dependency bytes of the wrong length");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph || graph->device != device) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> deps;
  if (CUresult e = graph_nodes(*graph, req.tail, a.count, &deps); e != CUDA_SUCCESS) return e;
  std::vector<CUgraphEdgeData> edges(a.edges ? a.count : 0);
  if (a.edges && a.count)
    std::memcpy(edges.data(), req.tail.data() + a.count * sizeof(uint64_t), a.count * sizeof(CUgraphEdgeData));
  const int mode = a.mode == CU_STREAM_CAPTURE_MODE_RELAXED ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                           : CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  const CUresult e = on_device(device, [&] {
    return api_.cuStreamBeginCaptureToGraph(s, graph->as<GraphObject>().graph, deps.empty() ? nullptr : deps.data(),
                                            edges.empty() ? nullptr : edges.data(), deps.size(), mode);
  });
  if (e == CUDA_SUCCESS) {
    ++captures_open_;
    capture_into_[a.stream] = a.graph;
    open_captures_[a.stream] = {mode, device};
  }
  return e;
}

int32_t Session::on_StreamEndCapture(const api::CaptureEndArgs& a, api::Empty&, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  // A capture into an existing graph ends in that graph (the guest names it), else in a new one.
  const auto into = capture_into_.find(a.stream);
  // A capture whose graph the guest was given (runtime_ext.cc) ends in it, under that handle.
  auto given = capture_graphs_.end();
  if (into == capture_into_.end() && !capture_graphs_.empty()) {
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (on_device(device, [&] { return api_.cuStreamGetCaptureInfo_v3(s, &status, &id, nullptr, nullptr, nullptr, nullptr); }) ==
            CUDA_SUCCESS &&
        status != CU_STREAM_CAPTURE_STATUS_NONE)
      given = capture_graphs_.find(id);
  }
  if (given != capture_graphs_.end() ? a.graph != given->second
      : into != capture_into_.end()  ? a.graph != into->second
                                     : a.graph < api::kFirstGuestHandle || vol_.find(ObjectKind::Graph, a.graph))
    return CUDA_ERROR_INVALID_VALUE;
  CUgraph g = nullptr;
  unsigned long long driver_id = 0;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!capture_ids_.empty())
    on_device(device, [&] { return api_.cuStreamGetCaptureInfo_v3(s, &status, &driver_id, nullptr, nullptr, nullptr, nullptr); });
  const CUresult e = on_device(device, [&] { return api_.cuStreamEndCapture(s, &g); });
  // The capture ended unless the stream was not capturing (or is not its origin).
  const bool ended = e == CUDA_SUCCESS || e == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || e == CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  if (captures_open_ && ended) --captures_open_;
  if (captures_open_ == 0) capture_events_.clear();
  if (ended) {
    open_captures_.erase(a.stream);
    capture_ids_.erase(driver_id);
    // A capture a resume began into a graph of the host's: ended in it, that graph is the
    // program's now (below); else the host's to destroy (a capture into a graph keeps it).
    if (const auto carried = carried_capture_graphs_.find(a.stream); carried != carried_capture_graphs_.end()) {
      if (e != CUDA_SUCCESS || g != carried->second) api_.cuGraphDestroy(carried->second);
      carried_capture_graphs_.erase(carried);
    }
  }
  if (given != capture_graphs_.end()) {
    if (!ended) return e;
    const uint64_t handle = given->second;
    capture_graphs_.erase(given);
    Object* o = vol_.find(ObjectKind::Graph, handle);
    if (e == CUDA_SUCCESS && o && o->as<GraphObject>().graph == g) {
      o->as<GraphObject>().borrowed = false;  // the program's graph from now on
      return e;
    }
    // The driver dropped the graph with the capture: its entry goes (borrowed: nothing destroyed).
    if (o) destroy_entry(ObjectKind::Graph, handle, CUDA_SUCCESS);
    if (e == CUDA_SUCCESS && g) vol_.add(ObjectKind::Graph, device, handle, vol_.context(device)->id, GraphObject{g});
    return e;
  }
  if (into != capture_into_.end()) {
    if (ended) capture_into_.erase(into);
    return e;
  }
  if (e == CUDA_SUCCESS && g) vol_.add(ObjectKind::Graph, device, a.graph, vol_.context(device)->id, GraphObject{g});
  return e;
}

int32_t Session::on_StreamCaptureInfo(const api::StreamArgs& a, api::CaptureInfoReply& r, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  int status = 0;
  unsigned long long id = 0;
  const CUresult e = on_device(device, [&] {
    return api_.cuStreamGetCaptureInfo_v3(s, &status, &id, nullptr, nullptr, nullptr, nullptr);
  });
  if (e != CUDA_SUCCESS) {
    // The status alone, as cuStreamIsCapturing says it (its id unknown: 0).
    if (!said_capture_info_)
      VMRPC_LOG(kInfo, "stub", log_tag_ + ": cuStreamGetCaptureInfo answered " + std::to_string(e) +
                                   "; the capture status comes from cuStreamIsCapturing");
    said_capture_info_ = true;
    status = CU_STREAM_CAPTURE_STATUS_NONE;
    id = 0;
    if (CUresult e2 = on_device(device, [&] { return api_.cuStreamIsCapturing(s, &status); }); e2 != CUDA_SUCCESS)
      return e2;
  }
  r.status = static_cast<uint32_t>(status);
  r.id = guest_capture_id(id);
  return CUDA_SUCCESS;
}

int32_t Session::on_CaptureMode(const api::CaptureModeArgs& a, api::Empty&, Request&) {
  if (a.pad) return guest_fault("CaptureMode: a nonzero pad");
  if (a.mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  int mode = static_cast<int>(a.mode);
  return api_.cuThreadExchangeStreamCaptureMode(&mode);
}

// ---- open captures across a suspend. A capture one stream began and no other joined is
// carried: the suspend ends it (cuStreamEndCapture), describes the graph it built so far with
// the graphs' machinery (graph_state.cc) and the stream's dependencies in it as node indexes,
// and the resume builds that graph again and begins capturing into it after the same nodes
// (cuStreamBeginCaptureToGraph) in the same mode, so that the program's later
// cudaStreamEndCapture gives the whole graph. Anything else waits for the capture to end.

const Object* Session::capture_stream(uint64_t handle, int device) const {
  const Object* o = handle == api::kStreamPerThread ? vol_.find(ObjectKind::PerThreadStream, static_cast<uint64_t>(device))
                                                    : vol_.find(ObjectKind::Stream, handle);
  return o && o->device == device ? o : nullptr;
}

unsigned long long Session::guest_capture_id(unsigned long long driver_id) const {
  const auto it = capture_ids_.find(driver_id);
  return it == capture_ids_.end() ? driver_id + capture_id_floor_ : it->second;
}

std::string Session::captures_block_suspend() {
  if (captures_open_ == 0) return {};
  auto refuse = [&](const std::string& what) {
    make_current(current_);
    return "the program has " + std::to_string(captures_open_) + " stream capture(s) open, " + what +
           ", which a suspend cannot carry; nothing was changed and the program runs on (suspend it again once the "
           "capture has ended)";
  };
  if (!capture_graphs_.empty()) return refuse("one whose graph it was given (cudaStreamGetCaptureInfo)");
  // How many of the client's streams are in each capture (by the driver's id).
  std::map<unsigned long long, size_t> streams_in;
  for (ObjectKind k : {ObjectKind::Stream, ObjectKind::PerThreadStream})
    for (const auto& [handle, id] : vol_.of(k)) {
      const Object* o = vol_.get(id);
      int status = CU_STREAM_CAPTURE_STATUS_NONE;
      unsigned long long capture = 0;
      make_current(o->device);
      if (api_.cuStreamGetCaptureInfo_v3(o->as<StreamObject>().stream, &status, &capture, nullptr, nullptr, nullptr,
                                         nullptr) != CUDA_SUCCESS)
        return refuse("one on a stream whose capture the driver does not describe");
      if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return refuse("one the program's own calls invalidated (its cudaStreamEndCapture will say so)");
      if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE) ++streams_in[capture];
    }
  if (open_captures_.size() != captures_open_ || streams_in.size() != captures_open_)
    return refuse("one the host cannot tell apart from the others");
  for (const auto& [handle, open] : open_captures_) {
    const Object* o = capture_stream(handle, open.device);
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long capture = 0;
    const CUgraphEdgeData* edges = nullptr;
    const CUgraphNode* deps = nullptr;
    size_t count = 0;
    CUgraph graph = nullptr;
    if (!o) return refuse("one on a stream the program destroyed");
    make_current(open.device);
    if (api_.cuStreamGetCaptureInfo_v3(o->as<StreamObject>().stream, &status, &capture, &graph, &deps, &edges, &count) !=
            CUDA_SUCCESS ||
        status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph)
      return refuse("one the host cannot tell apart from the others");
    if (streams_in[capture] != 1)
      return refuse("one that other streams joined (through events: " + std::to_string(streams_in[capture]) +
                    " streams capture into one graph)");
    for (size_t i = 0; edges && i < count; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type)
        return refuse("one whose stream depends on its nodes through programmatic (port or type) edges");
  }
  if (!capture_events_.empty())
    return refuse("one with an event recorded in it (cudaEventRecord: a wait on that event would fork the capture "
                  "onto another stream)");
  make_current(current_);
  return {};
}

bool Session::end_captures(std::string* why) {
  if (!ended_captures_.empty() || open_captures_.empty()) return true;  // ended already (client_control), or none
  for (const auto& [handle, open] : open_captures_) {
    const Object* o = capture_stream(handle, open.device);
    EndedCapture c{handle, open.device, o ? o->as<StreamObject>().stream : nullptr, open.mode};
    const auto into = capture_into_.find(handle);
    c.into = into == capture_into_.end() ? 0 : into->second;
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    const CUgraphNode* deps = nullptr;
    size_t count = 0;
    make_current(open.device);
    CUresult e = o ? api_.cuStreamGetCaptureInfo_v3(c.cu_stream, &status, &id, nullptr, &deps, nullptr, &count)
                   : CUDA_ERROR_INVALID_HANDLE;
    if (e == CUDA_SUCCESS) {
      c.id = guest_capture_id(id);
      c.deps.assign(deps, deps + count);  // the driver's array lives until the stream's next call
      e = api_.cuStreamEndCapture(c.cu_stream, &c.graph);
    }
    if (e != CUDA_SUCCESS || !c.graph) {
      *why = "ending stream capture on stream " + std::to_string(handle) + " for the suspend failed (" +
             describe(api_, e) + "); nothing was changed and the program runs on";
      // One the failed end did end (invalidated) is no longer open: forgotten, so the count of
      // open captures stays the driver's (else every later suspend would wait for it).
      int still = CU_STREAM_CAPTURE_STATUS_NONE;
      if (o && api_.cuStreamIsCapturing(c.cu_stream, &still) == CUDA_SUCCESS && still == CU_STREAM_CAPTURE_STATUS_NONE) {
        open_captures_.erase(handle);
        --captures_open_;
      }
      begin_ended_captures();  // those ended before it, each counted open again
      return false;
    }
    capture_ids_.erase(id);
    // A graph a resume built for it is this capture's again (the suspend destroys it).
    carried_capture_graphs_.erase(handle);
    ended_captures_.push_back(std::move(c));
    --captures_open_;  // per capture: a failure after it begins it again and counts it again
  }
  open_captures_.clear();
  make_current(current_);
  return true;
}

void Session::begin_ended_captures() {
  if (ended_captures_.empty()) return;  // (after a suspend that went through: no context to make current)
  for (const EndedCapture& c : ended_captures_) {
    make_current(c.device);
    const CUresult e = api_.cuStreamBeginCaptureToGraph(c.cu_stream, c.graph, c.deps.empty() ? nullptr : c.deps.data(),
                                                       nullptr, c.deps.size(), c.mode);
    if (e != CUDA_SUCCESS) {
      // Natively it would still be open: the program's cudaStreamEndCapture will fail.
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": a suspend that failed could not begin stream capture on stream " +
                                    std::to_string(c.stream) + " again (" + describe(api_, e) + "); it is lost");
      if (!c.into) api_.cuGraphDestroy(c.graph);
      capture_into_.erase(c.stream);
      continue;
    }
    ++captures_open_;
    open_captures_[c.stream] = {c.mode, c.device};
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    if (api_.cuStreamGetCaptureInfo_v3(c.cu_stream, &status, &id, nullptr, nullptr, nullptr, nullptr) == CUDA_SUCCESS)
      capture_ids_[id] = c.id;
    if (!c.into) carried_capture_graphs_[c.stream] = c.graph;
  }
  ended_captures_.clear();
  make_current(current_);
}

// ---- graphs

int32_t Session::on_GraphCreate(const api::GraphArgs& a, api::Empty&, Request&) {
  if (a.graph < api::kFirstGuestHandle || vol_.find(ObjectKind::Graph, a.graph)) return CUDA_ERROR_INVALID_VALUE;
  if (a.pad) return guest_fault("GraphCreate: a nonzero pad");
  if (a.flags) return CUDA_ERROR_INVALID_VALUE;  // cudaGraphCreate: flags must be 0
  CUgraph g = nullptr;
  if (CUresult e = api_.cuGraphCreate(&g, 0); e != CUDA_SUCCESS) return e;
  vol_.add(ObjectKind::Graph, current_, a.graph, vol_.context(current_)->id, GraphObject{g});
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphDestroy(const api::GraphArgs& a, api::Empty&, Request&) {
  return destroy_entry(ObjectKind::Graph, a.graph, CUDA_ERROR_INVALID_VALUE);
}

int32_t Session::on_GraphClone(const api::GraphCloneArgs& a, api::Empty&, Request&) {
  const Object* o = vol_.find(ObjectKind::Graph, a.original);
  if (!o) return CUDA_ERROR_INVALID_VALUE;
  if (a.clone < api::kFirstGuestHandle || vol_.find(ObjectKind::Graph, a.clone)) return CUDA_ERROR_INVALID_VALUE;
  CUgraph g = nullptr;
  const int device = o->device;
  if (CUresult e = api_.cuGraphClone(&g, o->as<GraphObject>().graph); e != CUDA_SUCCESS) return e;
  vol_.add(ObjectKind::Graph, device, a.clone, vol_.context(device)->id, GraphObject{g});
  return CUDA_SUCCESS;
}

CUresult Session::graph_nodes(const Object& graph, std::span<const std::byte> handles, size_t count,
                              std::vector<CUgraphNode>* out) const {
  out->clear();
  for (size_t i = 0; i < count; ++i) {
    uint64_t h;
    std::memcpy(&h, handles.data() + i * sizeof h, sizeof h);
    const Object* n = vol_.find(ObjectKind::GraphNode, h);
    if (!n || n->parent != graph.id) return CUDA_ERROR_INVALID_VALUE;  // not a node of this graph
    out->push_back(n->as<GraphNodeObject>().node);
  }
  return CUDA_SUCCESS;
}

uint64_t Session::node_handle(Object& graph, CUgraphNode node) {
  for (ObjectId c : graph.children)
    if (const Object* n = vol_.get(c); n && n->as<GraphNodeObject>().node == node) return n->handle;
  const uint64_t h = api::kHostNodeHandle | ++next_host_node_;
  vol_.add(ObjectKind::GraphNode, graph.device, h, graph.id, GraphNodeObject{node});
  return h;
}

namespace {
// The graph a node addition names and its dependencies (dep_count handles at the tail's
// start), checked: CUDA_SUCCESS or the error to return.
struct NodeTarget {
  Object* graph = nullptr;
  std::vector<CUgraphNode> deps;
};
}  // namespace

#define VMCUDA_NODE_TARGET(target, args, tail_rest)                                                       \
  NodeTarget target;                                                                                      \
  std::span<const std::byte> tail_rest;                                                                   \
  {                                                                                                       \
    if ((args).dep_count > api::kMaxGraphDeps) return guest_fault("graph node: too many dependencies");   \
    const size_t dep_bytes = size_t{(args).dep_count} * sizeof(uint64_t);                                 \
    if (req.tail.size() < dep_bytes) return guest_fault("graph node: dependencies outside the bytes sent"); \
    target.graph = vol_.find(ObjectKind::Graph, (args).graph);                                            \
    if (!target.graph) return CUDA_ERROR_INVALID_VALUE;                                                   \
    if (!new_node_handle((args).node)) return CUDA_ERROR_INVALID_VALUE;                                   \
    if (CUresult e = graph_nodes(*target.graph, req.tail, (args).dep_count, &target.deps); e)             \
      return e;                                                                                           \
    tail_rest = req.tail.subspan(dep_bytes);                                                              \
  }

int32_t Session::kernel_node_params(uint64_t function, std::span<const std::byte> packed, const uint32_t grid[3],
                                    const uint32_t block[3], uint32_t shared, CUDA_KERNEL_NODE_PARAMS_v2* p) {
  const Object* fo = find_function(function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  if (fo->device != current_) return CUDART_ERROR_INVALID_DEVICE_FUNCTION;
  const FunctionObject& f = fo->as<FunctionObject>();
  thread_local std::vector<void*> pointers;
  pointers.resize(f.params.size());
  auto* base = const_cast<std::byte*>(packed.data());
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (uint64_t{f.params[i].offset} + f.params[i].size > packed.size())
      return guest_fault("graph kernel node: a parameter outside the bytes sent");
    pointers[i] = base + f.params[i].offset;
  }
  // The driver copies the parameters' values before it returns.
  *p = CUDA_KERNEL_NODE_PARAMS_v2{f.fn,     grid[0], grid[1],         grid[2], block[0], block[1],
                                  block[2], shared,  pointers.data(), nullptr, nullptr,  nullptr};
  output_possible_ = true;
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphAddKernelNode(const api::GraphKernelNodeArgs& a, api::Empty&, Request& req) {
  VMCUDA_NODE_TARGET(t, a, packed);
  if (a.pad || a.arg_bytes != packed.size()) return guest_fault("GraphAddKernelNode: parameter bytes of the wrong length");
  CUDA_KERNEL_NODE_PARAMS_v2 p;
  if (int32_t e = kernel_node_params(a.function, packed, a.grid, a.block, a.shared_bytes, &p)) return e;
  CUgraphNode n = nullptr;
  const CUresult e = api_.cuGraphAddKernelNode_v2(&n, t.graph->as<GraphObject>().graph, t.deps.data(), t.deps.size(), &p);
  if (e == CUDA_SUCCESS) vol_.add(ObjectKind::GraphNode, t.graph->device, a.node, t.graph->id, GraphNodeObject{n});
  return e;
}

namespace {
// The bytes a memcpy side's region spans from its start address: the first byte is at
// z*pitch*height + y*pitch + x, the last row ends width bytes after its start. False when
// that overflows.
bool side_span(const api::GraphMemcpySide& s, const uint64_t extent[3], uint64_t* first, uint64_t* end) {
  using u128 = unsigned __int128;
  if (extent[0] == 0 || extent[1] == 0 || extent[2] == 0) return *first = *end = 0, true;
  const u128 slice = u128{s.pitch} * s.height;
  const u128 f = u128{s.pos[2]} * slice + u128{s.pos[1]} * s.pitch + s.pos[0];
  const u128 e = (u128{s.pos[2]} + extent[2] - 1) * slice + (u128{s.pos[1]} + extent[1] - 1) * s.pitch + s.pos[0] +
                 extent[0];
  if (e > ~uint64_t{0}) return false;
  *first = static_cast<uint64_t>(f);
  *end = static_cast<uint64_t>(e);
  return true;
}
}  // namespace

int32_t Session::memcpy_node_params(const api::GraphMemcpySide& src, const api::GraphMemcpySide& dst,
                                    const uint64_t extent[3], Request& req, CUDA_MEMCPY3D* out) {
  CUDA_MEMCPY3D c{};
  // Each side checked: the whole region inside one allocation of the client, or inside a
  // shared-heap block it pinned (whose host address stays valid for the session).
  auto side = [&](const api::GraphMemcpySide& s, bool is_src) -> int32_t {
    uint64_t first, end;
    if (s.pad || !side_span(s, extent, &first, &end)) return guest_fault("graph memcpy node: a region whose size overflows");
    if (extent[0] > s.pitch) return CUDA_ERROR_INVALID_VALUE;  // rows wider than their pitch
    CUmemorytype type;
    const void* host = nullptr;
    CUdeviceptr dev = 0;
    if (s.kind == api::kGraphMemDevice) {
      if (end > first && (s.device + first < s.device || !owns_range(s.device + first, end - first)))
        return CUDA_ERROR_INVALID_VALUE;
      type = CU_MEMORYTYPE_DEVICE;
      dev = s.device;
    } else if (s.kind == api::kGraphMemHeap) {
      auto range = req.ctx.heap(s.heap);
      if (!range) return guest_fault("graph memcpy node: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
      if (!heap_pinned(s.heap.offset, s.heap.bytes)) return CUDA_ERROR_INVALID_VALUE;  // not the client's pinned memory
      if (s.heap_offset > range->size() || end > range->size() - s.heap_offset) return CUDA_ERROR_INVALID_VALUE;
      type = CU_MEMORYTYPE_HOST;
      host = range->data() + s.heap_offset;
    } else {
      return guest_fault("graph memcpy node: an unknown memory kind");
    }
    if (is_src) {
      c.srcXInBytes = s.pos[0], c.srcY = s.pos[1], c.srcZ = s.pos[2];
      c.srcMemoryType = type, c.srcHost = host, c.srcDevice = dev, c.srcPitch = s.pitch, c.srcHeight = s.height;
    } else {
      c.dstXInBytes = s.pos[0], c.dstY = s.pos[1], c.dstZ = s.pos[2];
      c.dstMemoryType = type, c.dstHost = const_cast<void*>(host), c.dstDevice = dev, c.dstPitch = s.pitch,
      c.dstHeight = s.height;
    }
    return 0;
  };
  if (int32_t e = side(src, true)) return e;
  if (int32_t e = side(dst, false)) return e;
  c.WidthInBytes = extent[0], c.Height = extent[1], c.Depth = extent[2];
  *out = c;
  return CUDA_SUCCESS;
}

int32_t Session::memset_node_params(uint64_t dst, uint64_t pitch, uint64_t width, uint64_t height, uint32_t value,
                                    uint32_t element_size, CUDA_MEMSET_NODE_PARAMS* out) const {
  if (element_size != 1 && element_size != 2 && element_size != 4) return CUDA_ERROR_INVALID_VALUE;
  if (width > (~0ull / element_size)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t row_pitch = height <= 1 && pitch == 0 ? width * element_size : pitch;
  if (!owns_2d(dst, row_pitch, width * element_size, height)) return CUDA_ERROR_INVALID_VALUE;
  *out = CUDA_MEMSET_NODE_PARAMS{dst, pitch, value, element_size, width, height};
  return CUDA_SUCCESS;
}

int32_t Session::host_node_params(const vmrpc::wire::HeapRef& mailbox_ref, uint32_t index, Request& req,
                                  CUDA_HOST_NODE_PARAMS* out) {
  auto mailbox = req.ctx.heap(mailbox_ref);
  if (!mailbox) return guest_fault("graph host node: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  constexpr size_t kEntry = sizeof(api::HostFuncEntry);
  if (reinterpret_cast<uintptr_t>(mailbox->data()) % kEntry != 0 || mailbox->size() % kEntry != 0 ||
      index >= mailbox->size() / kEntry)
    return guest_fault("graph host node: a mailbox entry out of range or misaligned");
  HostFuncGate* g = persistent_gate(reinterpret_cast<api::HostFuncEntry*>(mailbox->data()) + index, req);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = CUDA_HOST_NODE_PARAMS{host_func_gate_fn(), g};
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphAddMemcpyNode(const api::GraphMemcpyNodeArgs& a, api::Empty&, Request& req) {
  VMCUDA_NODE_TARGET(t, a, rest);
  if (!rest.empty() || a.pad) return guest_fault("GraphAddMemcpyNode: bytes after the dependencies");
  CUDA_MEMCPY3D c;
  if (int32_t e = memcpy_node_params(a.src, a.dst, a.extent, req, &c)) return e;
  CUgraphNode n = nullptr;
  const CUresult e = api_.cuGraphAddMemcpyNode(&n, t.graph->as<GraphObject>().graph, t.deps.data(), t.deps.size(), &c,
                                               contexts_[current_]);
  if (e == CUDA_SUCCESS) vol_.add(ObjectKind::GraphNode, t.graph->device, a.node, t.graph->id, GraphNodeObject{n});
  return e;
}

int32_t Session::on_GraphAddMemsetNode(const api::GraphMemsetNodeArgs& a, api::Empty&, Request& req) {
  VMCUDA_NODE_TARGET(t, a, rest);
  if (!rest.empty() || a.pad) return guest_fault("GraphAddMemsetNode: bytes after the dependencies");
  CUDA_MEMSET_NODE_PARAMS p;
  if (int32_t e = memset_node_params(a.dst, a.pitch, a.width, a.height, a.value, a.element_size, &p)) return e;
  CUgraphNode n = nullptr;
  const CUresult e = api_.cuGraphAddMemsetNode(&n, t.graph->as<GraphObject>().graph, t.deps.data(), t.deps.size(), &p,
                                               contexts_[current_]);
  if (e == CUDA_SUCCESS) vol_.add(ObjectKind::GraphNode, t.graph->device, a.node, t.graph->id, GraphNodeObject{n});
  return e;
}

int32_t Session::on_GraphAddHostNode(const api::GraphHostNodeArgs& a, api::Empty&, Request& req) {
  VMCUDA_NODE_TARGET(t, a, rest);
  if (!rest.empty()) return guest_fault("GraphAddHostNode: bytes after the dependencies");
  CUDA_HOST_NODE_PARAMS p;
  if (int32_t e = host_node_params(a.mailbox, a.index, req, &p)) return e;
  CUgraphNode n = nullptr;
  const CUresult e = api_.cuGraphAddHostNode(&n, t.graph->as<GraphObject>().graph, t.deps.data(), t.deps.size(), &p);
  if (e == CUDA_SUCCESS) vol_.add(ObjectKind::GraphNode, t.graph->device, a.node, t.graph->id, GraphNodeObject{n});
  return e;
}

int32_t Session::on_GraphAddNode(const api::GraphNodeArgs& a, api::Empty&, Request& req) {
  VMCUDA_NODE_TARGET(t, a, rest);
  if (!rest.empty()) return guest_fault("GraphAddNode: bytes after the dependencies");
  const CUgraph g = t.graph->as<GraphObject>().graph;
  CUgraphNode n = nullptr;
  CUresult e;
  switch (a.type) {
    case api::kGraphNodeEmpty:
      if (a.object) return CUDA_ERROR_INVALID_VALUE;
      e = api_.cuGraphAddEmptyNode(&n, g, t.deps.data(), t.deps.size());
      break;
    case api::kGraphNodeEventRecord:
    case api::kGraphNodeWaitEvent: {
      const Object* ev = find_event(a.object);
      if (!ev) return CUDA_ERROR_INVALID_HANDLE;
      const CUevent event = ev->as<EventObject>().event;
      e = a.type == api::kGraphNodeEventRecord ? api_.cuGraphAddEventRecordNode(&n, g, t.deps.data(), t.deps.size(), event)
                                               : api_.cuGraphAddEventWaitNode(&n, g, t.deps.data(), t.deps.size(), event);
      break;
    }
    case api::kGraphNodeChild: {
      const Object* child = vol_.find(ObjectKind::Graph, a.object);
      if (!child || child == t.graph) return CUDA_ERROR_INVALID_VALUE;
      // The driver embeds a copy of the child: later changes to it do not reach this node.
      e = api_.cuGraphAddChildGraphNode(&n, g, t.deps.data(), t.deps.size(), child->as<GraphObject>().graph);
      break;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (e == CUDA_SUCCESS) vol_.add(ObjectKind::GraphNode, t.graph->device, a.node, t.graph->id, GraphNodeObject{n});
  return e;
}
#undef VMCUDA_NODE_TARGET

int32_t Session::on_GraphAddDependencies(const api::GraphEdgesArgs& a, api::Empty&, Request& req) {
  if (a.count > api::kMaxGraphDeps || a.pad) return guest_fault("GraphAddDependencies: too many edges");
  const size_t bytes = size_t{a.count} * sizeof(uint64_t);
  if (req.tail.size() != 2 * bytes) return guest_fault("GraphAddDependencies: edges of the wrong length");
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> from, to;
  if (CUresult e = graph_nodes(*graph, req.tail, a.count, &from); e) return e;
  if (CUresult e = graph_nodes(*graph, req.tail.subspan(bytes), a.count, &to); e) return e;
  return api_.cuGraphAddDependencies_v2(graph->as<GraphObject>().graph, from.data(), to.data(), nullptr, a.count);
}

int32_t Session::on_GraphGetNodes(const api::GraphListArgs& a, api::GraphListReply& r, Request& req) {
  if (a.roots > 1 || a.capacity > api::kMaxGraphList) return guest_fault("GraphGetNodes: bad arguments");
  if (size_t{a.capacity} * sizeof(uint64_t) > req.extra.size())
    return guest_fault("GraphGetNodes: a reply area too small", ChannelStatus::kReplyTooSmall);
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  const CUgraph g = graph->as<GraphObject>().graph;
  auto list = a.roots ? api_.cuGraphGetRootNodes : api_.cuGraphGetNodes;
  size_t count = 0;
  if (CUresult e = list(g, nullptr, &count); e != CUDA_SUCCESS) return e;
  std::vector<CUgraphNode> nodes(count);
  if (count)
    if (CUresult e = list(g, nodes.data(), &count); e != CUDA_SUCCESS) return e;
  r.count = count;
  const size_t n = std::min<size_t>(count, a.capacity);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = node_handle(*graph, nodes[i]);
    std::memcpy(req.extra.data() + i * sizeof h, &h, sizeof h);
  }
  req.extra_bytes = static_cast<uint32_t>(n * sizeof(uint64_t));
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphNodeGetType(const api::GraphNodeRefArgs& a, api::GraphNodeTypeReply& r, Request&) {
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  int type = 0;
  const CUresult e = api_.cuGraphNodeGetType(n->as<GraphNodeObject>().node, &type);
  r.type = static_cast<uint32_t>(type);
  return e;
}

int32_t Session::on_GraphNodeFindInClone(const api::GraphFindInCloneArgs& a, api::GraphNodeRefArgs& r, Request&) {
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  Object* clone = vol_.find(ObjectKind::Graph, a.clone);
  if (!n || !clone) return CUDA_ERROR_INVALID_VALUE;
  CUgraphNode found = nullptr;
  if (CUresult e = api_.cuGraphNodeFindInClone(&found, n->as<GraphNodeObject>().node, clone->as<GraphObject>().graph);
      e != CUDA_SUCCESS)
    return e;
  r.node = node_handle(*clone, found);
  return CUDA_SUCCESS;
}

// ---- executable graphs

bool Session::list_graph_nodes(CUgraph g, std::vector<CUgraphNode>* out) const {
  size_t count = 0;
  out->clear();
  if (api_.cuGraphGetNodes(g, nullptr, &count) != CUDA_SUCCESS) return false;
  out->resize(count);
  if (count && api_.cuGraphGetNodes(g, out->data(), &count) != CUDA_SUCCESS) return false;
  out->resize(count);
  return true;
}

// After cudaGraphExecUpdate(exec, graph) succeeded: the executable graph's nodes now have the
// parameters of the graph's nodes they were paired with. The mirror becomes a clone of that
// graph, its nodes matched through the driver's pairing, which the host knows
//  - where the driver pairs by clone relationship: the graph is the one the executable graph
//    came from, or a clone of it (cudaGraphClone), found with cuGraphNodeFindInClone;
//  - else where the driver pairs by structure (graphs that are not clones of each other, as
//    after a resume, where the executable graph came from the mirror): when the graph's nodes
//    in creation order have the mirror's types and edges node for node, the n-th with the n-th.
// Otherwise the mirror cannot follow, and a later suspend is refused.
bool Session::graph_shape(CUgraph g, std::vector<CUgraphNode>* nodes, std::vector<int>* types,
                          std::set<std::pair<size_t, size_t>>* edges) const {
  if (!list_graph_nodes(g, nodes)) return false;
  std::map<CUgraphNode, size_t> index;
  types->clear();
  for (size_t i = 0; i < nodes->size(); ++i) {
    index[(*nodes)[i]] = i;
    int t = -1;
    if (api_.cuGraphNodeGetType((*nodes)[i], &t) != CUDA_SUCCESS) return false;
    types->push_back(t);
  }
  size_t n = 0;
  if (api_.cuGraphGetEdges_v2(g, nullptr, nullptr, nullptr, &n) != CUDA_SUCCESS) return false;
  std::vector<CUgraphNode> from(n), to(n);
  std::vector<CUgraphEdgeData> data(n);
  if (n && api_.cuGraphGetEdges_v2(g, from.data(), to.data(), data.data(), &n) != CUDA_SUCCESS) return false;
  edges->clear();
  for (size_t k = 0; k < std::min(n, from.size()); ++k) {
    const auto f = index.find(from[k]), t = index.find(to[k]);
    if (f == index.end() || t == index.end()) return false;
    edges->emplace(f->second, t->second);
  }
  return true;
}

void Session::mirror_update(GraphExecObject& exec, const Object& graph) {
  const CUgraph g = graph.as<GraphObject>().graph;
  auto refuse = [&] {
    exec.unmirrored = "was updated (cudaGraphExecUpdate) from a graph whose nodes the host cannot pair with its own";
  };
  CUgraph mirror = nullptr;
  if (!exec.mirror || api_.cuGraphClone(&mirror, g) != CUDA_SUCCESS) return refuse();
  std::map<std::pair<ObjectId, CUgraphNode>, CUgraphNode> nodes;
  // By clone relationship.
  if (!exec.from_mirror) {
    for (const auto& [key, old] : exec.nodes) {
      if (!vol_.get(key.first)) break;  // its graph is gone (and its nodes with it)
      CUgraphNode paired = key.first == graph.id ? key.second : nullptr;
      if (!paired && (api_.cuGraphNodeFindInClone(&paired, key.second, g) != CUDA_SUCCESS || !paired)) break;
      CUgraphNode m = nullptr;
      if (api_.cuGraphNodeFindInClone(&m, paired, mirror) != CUDA_SUCCESS || !m) break;
      nodes[key] = m;
    }
  }
  // By structure, node for node.
  if (nodes.size() != exec.nodes.size()) {
    nodes.clear();
    std::vector<CUgraphNode> mine, theirs;
    std::vector<int> my_types, their_types;
    std::set<std::pair<size_t, size_t>> my_edges, their_edges;
    if (graph_shape(exec.mirror, &mine, &my_types, &my_edges) && graph_shape(g, &theirs, &their_types, &their_edges) &&
        my_types == their_types && my_edges == their_edges) {
      std::map<CUgraphNode, size_t> at;
      for (size_t i = 0; i < mine.size(); ++i) at[mine[i]] = i;
      for (const auto& [key, old] : exec.nodes) {
        const auto i = at.find(old);
        CUgraphNode m = nullptr;
        if (i == at.end() || api_.cuGraphNodeFindInClone(&m, theirs[i->second], mirror) != CUDA_SUCCESS || !m) break;
        nodes[key] = m;
      }
    }
  }
  if (nodes.size() != exec.nodes.size()) {
    api_.cuGraphDestroy(mirror);
    return refuse();
  }
  // Which nodes are disabled after the update, as the driver answers (by the node it knows),
  // now by the new mirror's matching nodes; as before where the driver cannot say.
  std::set<CUgraphNode> disabled;
  for (const auto& [key, old] : exec.nodes) {
    unsigned enabled = 1;
    const CUgraphNode driver_node = !exec.from_mirror ? key.second : exec.origin ? exec.origin_nodes.at(key) : old;
    const bool known = (exec.from_mirror || vol_.get(key.first)) &&  // (a node of a destroyed graph: not asked)
                       api_.cuGraphNodeGetEnabled(exec.exec, driver_node, &enabled) == CUDA_SUCCESS;
    if (known ? !enabled : exec.disabled.contains(old)) disabled.insert(nodes.at(key));
  }
  // The graph a resume instantiated from stays: the driver names the nodes by it.
  if (exec.from_mirror && !exec.origin) {
    exec.origin = exec.mirror;
    exec.origin_nodes = exec.nodes;
  } else {
    api_.cuGraphDestroy(exec.mirror);
  }
  exec.mirror = mirror;
  exec.nodes = std::move(nodes);
  exec.disabled = std::move(disabled);
}

int32_t Session::on_GraphInstantiate(const api::GraphInstantiateArgs& a, api::Empty&, Request&) {
  const Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  if (a.exec < api::kFirstGuestHandle || vol_.find(ObjectKind::GraphExec, a.exec)) return CUDA_ERROR_INVALID_VALUE;
  // Auto-free concerns graph memory, which the guest keeps (the host's graph holds empty
  // nodes: the flag changes nothing here); device launch is not offered; upload needs a
  // stream (cudaGraphInstantiateWithParams).
  constexpr uint64_t kUseNodePriority = 8;
  if (a.flags & ~(uint64_t{1} | kUseNodePriority)) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExec x = nullptr;
  const int device = graph->device;
  const CUgraph g = graph->as<GraphObject>().graph;
  if (CUresult e = on_device(device, [&] { return api_.cuGraphInstantiateWithFlags(&x, g, a.flags); });
      e != CUDA_SUCCESS)
    return e;
  GraphExecObject exec{x};
  exec.flags = a.flags;
  // The mirror a suspend saves (GraphExecObject): a clone, its nodes matched to the graph's.
  if (api_.cuGraphClone(&exec.mirror, g) != CUDA_SUCCESS) {
    exec.mirror = nullptr;
    exec.unmirrored = "could not be copied for a suspend (cuGraphClone failed)";
  } else {
    std::vector<CUgraphNode> nodes;
    if (!list_graph_nodes(g, &nodes)) exec.unmirrored = "could not be copied for a suspend (cuGraphGetNodes failed)";
    for (CUgraphNode n : nodes) {
      CUgraphNode m = nullptr;
      if (api_.cuGraphNodeFindInClone(&m, n, exec.mirror) == CUDA_SUCCESS && m) exec.nodes[{graph->id, n}] = m;
      else exec.unmirrored = "could not be copied for a suspend (cuGraphNodeFindInClone failed)";
    }
  }
  vol_.add(ObjectKind::GraphExec, device, a.exec, vol_.context(device)->id, std::move(exec));
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphLaunch(const api::GraphLaunchArgs& a, api::Empty&, Request& req) {
  const Object* x = vol_.find(ObjectKind::GraphExec, a.exec);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  output_possible_ = true;
  count_launch(device, s, req.ctx);  // counted and held back as a kernel launch is
  const CUgraphExec exec = x->as<GraphExecObject>().exec;
  return on_device(device, [&] {
    // The guest's writes to __managed__ variables first, as before a kernel launch: still one
    // call for the whole graph, however many kernel nodes read them.
    if (CUresult e = managed_before_launch(req.ctx, device, s); e != CUDA_SUCCESS) return e;
    return api_.cuGraphLaunch(exec, s);
  });
}

int32_t Session::on_GraphUpload(const api::GraphLaunchArgs& a, api::Empty&, Request&) {
  const Object* x = vol_.find(ObjectKind::GraphExec, a.exec);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  const CUgraphExec exec = x->as<GraphExecObject>().exec;
  return on_device(device, [&] { return api_.cuGraphUpload(exec, s); });
}

int32_t Session::on_GraphExecDestroy(const api::GraphExecArgs& a, api::Empty&, Request&) {
  return destroy_entry(ObjectKind::GraphExec, a.exec, CUDA_ERROR_INVALID_VALUE);
}

int32_t Session::on_GraphExecKernelNodeSetParams(const api::GraphExecKernelArgs& a, api::Empty&, Request& req) {
  if (a.arg_bytes != req.tail.size()) return guest_fault("GraphExecKernelNodeSetParams: parameter bytes of the wrong length");
  Object* x = vol_.find(ObjectKind::GraphExec, a.exec);
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!x || !n) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS_v2 p;
  if (int32_t e = kernel_node_params(a.function, req.tail, a.grid, a.block, a.shared_bytes, &p)) return e;
  GraphExecObject& exec = x->as<GraphExecObject>();
  CUgraphNode target, mirrored;
  if (int32_t e = exec_node(exec, *n, &target, &mirrored)) return e;
  const CUresult e = api_.cuGraphExecKernelNodeSetParams_v2(exec.exec, target, &p);
  if (e == CUDA_SUCCESS && (!mirrored || api_.cuGraphKernelNodeSetParams_v2(mirrored, &p) != CUDA_SUCCESS))
    exec.unmirrored = "had kernel node parameters changed that its copy for a suspend could not follow";
  return e;
}

int32_t Session::on_GraphExecUpdate(const api::GraphExecUpdateArgs& a, api::GraphExecUpdateReply& r, Request&) {
  Object* x = vol_.find(ObjectKind::GraphExec, a.exec);
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!x || !graph) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExecUpdateResultInfo info{};
  const CUresult e = api_.cuGraphExecUpdate_v2(x->as<GraphExecObject>().exec, graph->as<GraphObject>().graph, &info);
  if (e == CUDA_SUCCESS) mirror_update(x->as<GraphExecObject>(), *graph);
  r.result = static_cast<uint32_t>(info.result);
  // The nodes it names are the graph's (the update's source).
  r.error_node = info.errorNode ? node_handle(*graph, info.errorNode) : 0;
  r.error_from_node = info.errorFromNode ? node_handle(*graph, info.errorFromNode) : 0;
  r.status = e;
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
