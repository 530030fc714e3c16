// Graph nodes after their creation (calls.def 0x1b00): parameters of every node kind, read
// (describe_node, the suspend's own description of a node, graph_state.cc) and changed in a
// graph or in an executable graph; a node's relations and a graph's edges; destroying nodes
// and edges; enabling nodes of an executable graph; kernel node launch attributes; the
// embedded graph of a child graph node; cudaStreamGetId.
//
// What a setter gets is checked as at the node's creation (graph.cc's *_node_params): a
// kernel by its function's parameter layout, copies and memsets within the client's memory
// and pinned heap, host nodes as persistent gates. A change to an executable graph is made
// to its mirror too (GraphExecObject), so a suspend carries it; a change the mirror cannot
// hold (a child graph swapped) is remembered and refuses a later suspend; disabled nodes are
// kept beside it (GraphExecObject::disabled).
#include <algorithm>
#include <cstring>
#include <vector>

#include "graph_state.h"
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

int32_t Session::exec_node(const GraphExecObject& exec, const Object& node, CUgraphNode* target,
                           CUgraphNode* mirrored) const {
  const auto m = exec.nodes.find({node.parent, node.as<GraphNodeObject>().node});
  *mirrored = m == exec.nodes.end() ? nullptr : m->second;
  // Instantiated from the mirror (a resume): the driver knows the node by the mirror's.
  if (exec.from_mirror && !*mirrored) return CUDA_ERROR_INVALID_VALUE;  // not a node of the graph it came from
  *target = !exec.from_mirror ? node.as<GraphNodeObject>().node
            : exec.origin     ? exec.origin_nodes.at(m->first)
                              : *mirrored;
  return CUDA_SUCCESS;
}

// A graph's child node cannot be given another graph, so the mirror's is replaced by a new
// one embedding `child`, with the same edges. Only while the driver knows the executable
// graph's nodes by the program's graph (not after a resume, where they are the mirror's).
CUresult Session::replace_mirror_child(GraphExecObject& exec, CUgraphNode old, CUgraph child) {
  auto list = [&](auto fn, std::vector<CUgraphNode>* out) {
    size_t n = 0;
    if (CUresult e = fn(old, nullptr, nullptr, &n); e != CUDA_SUCCESS) return e;
    out->resize(n);
    return n ? fn(old, out->data(), nullptr, &n) : CUDA_SUCCESS;
  };
  std::vector<CUgraphNode> deps, dependents;
  if (CUresult e = list(api_.cuGraphNodeGetDependencies_v2, &deps); e != CUDA_SUCCESS) return e;
  if (CUresult e = list(api_.cuGraphNodeGetDependentNodes_v2, &dependents); e != CUDA_SUCCESS) return e;
  CUgraphNode fresh = nullptr;
  if (CUresult e = api_.cuGraphAddChildGraphNode(&fresh, exec.mirror, deps.data(), deps.size(), child); e != CUDA_SUCCESS)
    return e;
  const std::vector<CUgraphNode> from(dependents.size(), fresh);
  if (CUresult e = api_.cuGraphAddDependencies_v2(exec.mirror, from.data(), dependents.data(), nullptr, from.size());
      e != CUDA_SUCCESS) {
    api_.cuGraphDestroyNode(fresh);
    return e;
  }
  if (CUresult e = api_.cuGraphDestroyNode(old); e != CUDA_SUCCESS) return e;
  for (auto& [key, m] : exec.nodes)
    if (m == old) m = fresh;
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphNodeGetParams(const api::GraphNodeRefArgs& a, api::GraphNodeParams& r, Request& req) {
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  GraphNodeDesc d;
  CUgraph child = nullptr;
  std::string why;
  CUresult driver = CUDA_SUCCESS;
  if (!describe_node(n->as<GraphNodeObject>().node, &d, &child, &why, &driver)) {
    if (driver != CUDA_SUCCESS) return driver;
    VMRPC_LOG(kInfo, "stub", log_tag_ + ": a graph node's parameters cannot be given to the guest (801): " + why);
    return CUDA_ERROR_NOT_SUPPORTED;  // e.g. a captured copy of a CUDA array
  }
  r = api::GraphNodeParams{};
  r.type = d.type;
  switch (d.type) {
    case kNodeKernel: {
      r.object = vol_.get(d.object)->handle;
      std::memcpy(r.grid, d.grid, sizeof r.grid);
      std::memcpy(r.block, d.block, sizeof r.block);
      r.shared_bytes = d.shared;
      if (d.params.size() > req.extra.size())
        return guest_fault("GraphNodeGetParams: a reply area too small for the kernel's parameters",
                           ChannelStatus::kReplyTooSmall);
      if (!d.params.empty()) std::memcpy(req.extra.data(), d.params.data(), d.params.size());
      req.extra_bytes = static_cast<uint32_t>(d.params.size());
      r.arg_bytes = static_cast<uint32_t>(d.params.size());
      break;
    }
    case kNodeMemcpy: {
      const CUDA_MEMCPY3D& c = d.copy;  // a host side's address is its heap offset
      auto side = [](CUmemorytype t, const void* host, CUdeviceptr dev, size_t x, size_t y, size_t z, size_t pitch,
                     size_t height, api::GraphMemcpySide* s) {
        *s = api::GraphMemcpySide{};
        if (t == CU_MEMORYTYPE_HOST) {
          s->kind = api::kGraphMemHeap;
          s->heap = vmrpc::wire::HeapRef{reinterpret_cast<uint64_t>(host), 0};
        } else {
          s->kind = api::kGraphMemDevice;
          s->device = dev;
        }
        s->pitch = pitch, s->height = height;
        s->pos[0] = x, s->pos[1] = y, s->pos[2] = z;
      };
      side(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight, &r.src);
      side(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight, &r.dst);
      r.extent[0] = c.WidthInBytes, r.extent[1] = c.Height, r.extent[2] = c.Depth;
      break;
    }
    case kNodeMemset:
      r.memset_dst = d.memset.dst;
      r.memset_pitch = d.memset.pitch;
      r.memset_width = d.memset.width;
      r.memset_height = d.memset.height;
      r.memset_value = d.memset.value;
      r.memset_element_size = d.memset.elementSize;
      break;
    case kNodeHost:
      r.mailbox = vmrpc::wire::HeapRef{d.mailbox, 0};  // the entry's offset: the guest knows its function
      break;
    case kNodeWaitEvent:
    case kNodeEventRecord:
      r.object = vol_.get(d.object)->handle;
      break;
    default:  // empty, child graph (GraphChildGraph names its graph)
      break;
  }
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphNodeSetParams(const api::GraphNodeSetArgs& a, api::Empty&, Request& req) {
  const api::GraphNodeParams& p = a.params;
  if (p.arg_bytes != req.tail.size()) return guest_fault("GraphNodeSetParams: parameter bytes of the wrong length");
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  const CUgraphNode node = n->as<GraphNodeObject>().node;
  int type = -1;
  if (CUresult e = api_.cuGraphNodeGetType(node, &type); e != CUDA_SUCCESS) return e;
  if (p.type != static_cast<uint32_t>(type)) return CUDA_ERROR_INVALID_VALUE;  // parameters of another kind of node
  GraphExecObject* exec = nullptr;
  CUgraphNode target = node, mirrored = nullptr;
  if (a.exec) {
    Object* x = vol_.find(ObjectKind::GraphExec, a.exec);
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    exec = &x->as<GraphExecObject>();
    if (int32_t e = exec_node(*exec, *n, &target, &mirrored)) return e;
  }
  const CUcontext ctx = contexts_[n->device];
  // The change in the graph or the executable graph, then in the executable graph's mirror.
  CUresult e = CUDA_SUCCESS, m = CUDA_ERROR_NOT_SUPPORTED;
  switch (type) {
    case kNodeKernel: {
      CUDA_KERNEL_NODE_PARAMS_v2 k;
      if (int32_t ke = kernel_node_params(p.object, req.tail, p.grid, p.block, p.shared_bytes, &k)) return ke;
      e = exec ? api_.cuGraphExecKernelNodeSetParams_v2(exec->exec, target, &k) : api_.cuGraphKernelNodeSetParams_v2(node, &k);
      if (e == CUDA_SUCCESS && exec && mirrored) m = api_.cuGraphKernelNodeSetParams_v2(mirrored, &k);
      break;
    }
    case kNodeMemcpy: {
      if (!req.tail.empty()) return guest_fault("GraphNodeSetParams: bytes after a memcpy node's parameters");
      CUDA_MEMCPY3D c;
      if (int32_t ce = memcpy_node_params(p.src, p.dst, p.extent, req, &c)) return ce;
      e = exec ? api_.cuGraphExecMemcpyNodeSetParams(exec->exec, target, &c, ctx) : api_.cuGraphMemcpyNodeSetParams(node, &c);
      if (e == CUDA_SUCCESS && exec && mirrored) m = api_.cuGraphMemcpyNodeSetParams(mirrored, &c);
      break;
    }
    case kNodeMemset: {
      if (!req.tail.empty()) return guest_fault("GraphNodeSetParams: bytes after a memset node's parameters");
      CUDA_MEMSET_NODE_PARAMS s;
      if (int32_t se = memset_node_params(p.memset_dst, p.memset_pitch, p.memset_width, p.memset_height, p.memset_value,
                                          p.memset_element_size, &s))
        return se;
      e = exec ? api_.cuGraphExecMemsetNodeSetParams(exec->exec, target, &s, ctx) : api_.cuGraphMemsetNodeSetParams(node, &s);
      if (e == CUDA_SUCCESS && exec && mirrored) m = api_.cuGraphMemsetNodeSetParams(mirrored, &s);
      break;
    }
    case kNodeHost: {
      if (!req.tail.empty()) return guest_fault("GraphNodeSetParams: bytes after a host node's parameters");
      CUDA_HOST_NODE_PARAMS h;
      if (int32_t he = host_node_params(p.mailbox, p.index, req, &h)) return he;
      e = exec ? api_.cuGraphExecHostNodeSetParams(exec->exec, target, &h) : api_.cuGraphHostNodeSetParams(node, &h);
      if (e == CUDA_SUCCESS && exec && mirrored) m = api_.cuGraphHostNodeSetParams(mirrored, &h);
      break;
    }
    case kNodeWaitEvent:
    case kNodeEventRecord: {
      if (!req.tail.empty()) return guest_fault("GraphNodeSetParams: bytes after an event node's parameters");
      const Object* ev = find_event(p.object);
      if (!ev) return CUDA_ERROR_INVALID_HANDLE;
      const CUevent event = ev->as<EventObject>().event;
      const bool record = type == kNodeEventRecord;
      if (exec)
        e = record ? api_.cuGraphExecEventRecordNodeSetEvent(exec->exec, target, event)
                   : api_.cuGraphExecEventWaitNodeSetEvent(exec->exec, target, event);
      else
        e = record ? api_.cuGraphEventRecordNodeSetEvent(node, event) : api_.cuGraphEventWaitNodeSetEvent(node, event);
      if (e == CUDA_SUCCESS && exec && mirrored)
        m = record ? api_.cuGraphEventRecordNodeSetEvent(mirrored, event) : api_.cuGraphEventWaitNodeSetEvent(mirrored, event);
      break;
    }
    case kNodeChild: {
      // Only an executable graph's child node takes another graph (cudaGraphExecChildGraphNodeSetParams).
      if (!req.tail.empty()) return guest_fault("GraphNodeSetParams: bytes after a child graph node's parameters");
      if (!exec) return CUDA_ERROR_INVALID_VALUE;
      const Object* g = vol_.find(ObjectKind::Graph, p.object);
      if (!g) return CUDA_ERROR_INVALID_VALUE;
      e = api_.cuGraphExecChildGraphNodeSetParams(exec->exec, target, g->as<GraphObject>().graph);
      if (e == CUDA_SUCCESS && mirrored && !exec->from_mirror)
        m = replace_mirror_child(*exec, mirrored, g->as<GraphObject>().graph);
      break;
    }
    default:  // empty nodes have no parameters
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (e == CUDA_SUCCESS && exec && m != CUDA_SUCCESS)
    exec->unmirrored = type == kNodeChild && exec->from_mirror
                           ? "had its child graph node given another graph after a resume "
                             "(cudaGraphExecChildGraphNodeSetParams)"
                           : "had node parameters changed (type " + std::to_string(type) +
                                 ") that its copy for a suspend could not follow";
  return e;
}

int32_t Session::on_GraphNodeGetRelated(const api::GraphNodeListArgs& a, api::GraphListReply& r, Request& req) {
  if (a.which > api::kGraphNodeDependents || a.capacity > api::kMaxGraphList)
    return guest_fault("GraphNodeGetRelated: bad arguments");
  if (size_t{a.capacity} * sizeof(uint64_t) > req.extra.size())
    return guest_fault("GraphNodeGetRelated: a reply area too small", ChannelStatus::kReplyTooSmall);
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  Object* graph = n ? vol_.get(n->parent) : nullptr;
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  const CUgraphNode node = n->as<GraphNodeObject>().node;
  auto list = a.which == api::kGraphNodeDependents ? api_.cuGraphNodeGetDependentNodes_v2 : api_.cuGraphNodeGetDependencies_v2;
  size_t count = 0;
  if (CUresult e = list(node, nullptr, nullptr, &count); e != CUDA_SUCCESS) return e;
  std::vector<CUgraphNode> nodes(count);
  if (count)
    if (CUresult e = list(node, nodes.data(), nullptr, &count); e != CUDA_SUCCESS) return e;
  r.count = count;
  const size_t k = std::min<size_t>({count, a.capacity, nodes.size()});
  for (size_t i = 0; i < k; ++i) {
    const uint64_t h = node_handle(*graph, nodes[i]);
    std::memcpy(req.extra.data() + i * sizeof h, &h, sizeof h);
  }
  req.extra_bytes = static_cast<uint32_t>(k * sizeof(uint64_t));
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphGetEdges(const api::GraphListArgs& a, api::GraphListReply& r, Request& req) {
  if (a.roots || a.capacity > api::kMaxGraphList) return guest_fault("GraphGetEdges: bad arguments");
  if (2 * size_t{a.capacity} * sizeof(uint64_t) > req.extra.size())
    return guest_fault("GraphGetEdges: a reply area too small", ChannelStatus::kReplyTooSmall);
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  const CUgraph g = graph->as<GraphObject>().graph;
  size_t count = 0;
  if (CUresult e = api_.cuGraphGetEdges_v2(g, nullptr, nullptr, nullptr, &count); e != CUDA_SUCCESS) return e;
  std::vector<CUgraphNode> from(count), to(count);
  std::vector<CUgraphEdgeData> data(count);
  if (count)
    if (CUresult e = api_.cuGraphGetEdges_v2(g, from.data(), to.data(), data.data(), &count); e != CUDA_SUCCESS)
      return e;
  r.count = count;
  const size_t k = std::min<size_t>({count, a.capacity, from.size()});
  for (size_t i = 0; i < k; ++i) {
    const uint64_t f = node_handle(*graph, from[i]), t = node_handle(*graph, to[i]);
    std::memcpy(req.extra.data() + i * sizeof f, &f, sizeof f);
    std::memcpy(req.extra.data() + (k + i) * sizeof t, &t, sizeof t);
  }
  req.extra_bytes = static_cast<uint32_t>(2 * k * sizeof(uint64_t));
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphRemoveDependencies(const api::GraphEdgesArgs& a, api::Empty&, Request& req) {
  if (a.count > api::kMaxGraphDeps || a.pad) return guest_fault("GraphRemoveDependencies: too many edges");
  const size_t bytes = size_t{a.count} * sizeof(uint64_t);
  if (req.tail.size() != 2 * bytes) return guest_fault("GraphRemoveDependencies: edges of the wrong length");
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> from, to;
  if (CUresult e = graph_nodes(*graph, req.tail, a.count, &from); e) return e;
  if (CUresult e = graph_nodes(*graph, req.tail.subspan(bytes), a.count, &to); e) return e;
  return api_.cuGraphRemoveDependencies_v2(graph->as<GraphObject>().graph, from.data(), to.data(), nullptr, a.count);
}

int32_t Session::on_GraphDestroyNode(const api::GraphNodeRefArgs& a, api::Empty&, Request&) {
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  const CUgraphNode node = n->as<GraphNodeObject>().node;
  const ObjectId graph = n->parent;
  if (CUresult e = api_.cuGraphDestroyNode(node); e != CUDA_SUCCESS) return e;
  // Executable graphs made from its graph forget it: the driver may give its address to a
  // later node, which they never had.
  for (const auto& [handle, id] : vol_.of(ObjectKind::GraphExec)) vol_.get(id)->as<GraphExecObject>().nodes.erase({graph, node});
  return destroy_entry(ObjectKind::GraphNode, a.node, CUDA_ERROR_INVALID_VALUE);  // its entry (and a borrowed child graph's)
}

int32_t Session::on_GraphNodeEnabled(const api::GraphNodeEnableArgs& a, api::GraphNodeEnableReply& r, Request&) {
  if (a.set > 1) return guest_fault("GraphNodeEnabled: bad arguments");
  Object* x = vol_.find(ObjectKind::GraphExec, a.exec);
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!x || !n) return CUDA_ERROR_INVALID_VALUE;
  GraphExecObject& exec = x->as<GraphExecObject>();
  CUgraphNode target, mirrored;
  if (int32_t e = exec_node(exec, *n, &target, &mirrored)) return e;
  if (!a.set) {
    unsigned enabled = 0;
    const CUresult e = api_.cuGraphNodeGetEnabled(exec.exec, target, &enabled);
    r.enabled = enabled;
    return e;
  }
  if (a.enabled > 1) return CUDA_ERROR_INVALID_VALUE;
  const CUresult e = api_.cuGraphNodeSetEnabled(exec.exec, target, a.enabled);
  // A graph has no disabled nodes: kept beside the mirror, by its node (a suspend saves them).
  if (e == CUDA_SUCCESS) {
    if (!mirrored) {
      if (!a.enabled) exec.unmirrored = "has a node disabled that its copy for a suspend does not have";
    } else if (a.enabled) {
      exec.disabled.erase(mirrored);
    } else {
      exec.disabled.insert(mirrored);
    }
  }
  return e;
}

int32_t Session::on_GraphChildGraph(const api::GraphChildArgs& a, api::GraphChildReply& r, Request&) {
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  CUgraph child = nullptr;
  if (CUresult e = api_.cuGraphChildGraphNodeGetGraph(n->as<GraphNodeObject>().node, &child); e != CUDA_SUCCESS) return e;
  for (const ObjectId c : n->children)
    if (const Object* o = vol_.get(c); o && o->kind == ObjectKind::Graph && o->as<GraphObject>().graph == child)
      return r.graph = o->handle, CUDA_SUCCESS;
  if (a.graph < api::kFirstGuestHandle || vol_.find(ObjectKind::Graph, a.graph)) return CUDA_ERROR_INVALID_VALUE;
  vol_.add(ObjectKind::Graph, n->device, a.graph, n->id, GraphObject{child, true});
  r.graph = a.graph;
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphKernelNodeAttribute(const api::GraphKernelAttrArgs& a, api::GraphKernelAttrReply& r, Request&) {
  if (a.op > api::kAttrCopy) return guest_fault("GraphKernelNodeAttribute: bad operation");
  const Object* n = vol_.find(ObjectKind::GraphNode, a.node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  const CUgraphNode node = n->as<GraphNodeObject>().node;
  if (a.op == api::kAttrCopy) {
    const Object* src = vol_.find(ObjectKind::GraphNode, a.source);
    if (!src) return CUDA_ERROR_INVALID_VALUE;
    return api_.cuGraphKernelNodeCopyAttributes(node, src->as<GraphNodeObject>().node);
  }
  // Only the attributes a suspend carries (graph_state.cc); the guest refuses the others.
  if (!carried_kernel_attribute(a.id)) return CUDA_ERROR_NOT_SUPPORTED;
  if (a.op == api::kAttrGet) {
    CUlaunchAttributeValue v{};
    if (CUresult e = api_.cuGraphKernelNodeGetAttribute(node, static_cast<int>(a.id), &v); e != CUDA_SUCCESS) return e;
    r = api::GraphKernelAttrReply{};
    attribute_words(a.id, v, r.value);
    return CUDA_SUCCESS;
  }
  SavedKernelAttribute s{a.id};
  std::memcpy(s.value, a.value, sizeof s.value);
  const CUlaunchAttributeValue v = attribute_value(s);
  return api_.cuGraphKernelNodeSetAttribute(node, static_cast<int>(a.id), &v);
}

// ---- conditional nodes. The handle is the driver's value (kernels give it to
// cudaGraphSetConditional); a node may name only a handle its graph made. The bodies are the
// node's own graphs, named by the guest's handles (borrowed, as a child node's graph).
int32_t Session::on_GraphConditionalHandle(const api::GraphCondHandleArgs& a, api::GraphCondHandleReply& r, Request&) {
  const Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  if (a.flags & ~1u) return CUDA_ERROR_INVALID_VALUE;  // cudaGraphCondAssignDefault is the only flag
  unsigned long long h = 0;
  if (CUresult e = api_.cuGraphConditionalHandleCreate(&h, graph->as<GraphObject>().graph, contexts_[graph->device],
                                                      a.default_value, a.flags);
      e != CUDA_SUCCESS)
    return e;
  conditional_handles_[graph->id].insert(h);
  r.handle = h;
  return CUDA_SUCCESS;
}

int32_t Session::on_GraphAddConditionalNode(const api::GraphConditionalNodeArgs& a, api::Empty&, Request& req) {
  if (a.dep_count > api::kMaxGraphDeps || a.size > api::kMaxConditionalBodies || a.pad)
    return guest_fault("GraphAddConditionalNode: too many dependencies or bodies");
  const size_t dep_bytes = size_t{a.dep_count} * sizeof(uint64_t);
  if (req.tail.size() != dep_bytes + size_t{a.size} * sizeof(uint64_t))
    return guest_fault("GraphAddConditionalNode: handles of the wrong length");
  Object* graph = vol_.find(ObjectKind::Graph, a.graph);
  if (!graph || !new_node_handle(a.node)) return CUDA_ERROR_INVALID_VALUE;
  const auto handles = conditional_handles_.find(graph->id);
  if (handles == conditional_handles_.end() || !handles->second.contains(a.handle)) return CUDA_ERROR_INVALID_VALUE;
  if (a.type > 2 || a.size == 0 || (a.type == 0 && a.size > 2) || (a.type == 1 && a.size != 1))
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<uint64_t> bodies(a.size);
  std::memcpy(bodies.data(), req.tail.data() + dep_bytes, bodies.size() * sizeof(uint64_t));
  for (size_t i = 0; i < bodies.size(); ++i)
    if (bodies[i] < api::kFirstGuestHandle || (bodies[i] & api::kHostNodeHandle) || vol_.find(ObjectKind::Graph, bodies[i]) ||
        std::find(bodies.begin(), bodies.begin() + i, bodies[i]) != bodies.begin() + i)
      return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> deps;
  if (CUresult e = graph_nodes(*graph, req.tail, a.dep_count, &deps); e) return e;
  CUgraphNodeParams p{};
  p.type = api::kGraphNodeConditional;
  // phGraph_out is the driver's output: it points it at the bodies, an array the node owns.
  p.conditional = CUDA_CONDITIONAL_NODE_PARAMS{a.handle, static_cast<int>(a.type), a.size, nullptr,
                                               contexts_[graph->device]};
  CUgraphNode n = nullptr;
  const CUresult e =
      api_.cuGraphAddNode_v2(&n, graph->as<GraphObject>().graph, deps.data(), nullptr, deps.size(), &p);
  if (e != CUDA_SUCCESS) return e;
  const ObjectId node = vol_.add(ObjectKind::GraphNode, graph->device, a.node, graph->id, GraphNodeObject{n}).id;
  for (size_t i = 0; i < bodies.size(); ++i)
    vol_.add(ObjectKind::Graph, graph->device, bodies[i], node, GraphObject{p.conditional.phGraph_out[i], true});
  return CUDA_SUCCESS;
}

int32_t Session::on_StreamGetId(const api::StreamArgs& a, api::StreamIdReply& r, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  unsigned long long id = 0;
  const CUresult e = on_device(device, [&] { return api_.cuStreamGetId(s, &id); });
  r.id = id;
  return e;
}

}  // namespace vmcuda::host
