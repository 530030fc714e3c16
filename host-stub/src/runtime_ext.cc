// The rest of the runtime, part 3 (calls.def 0x1d00): the graph and dependencies of a stream
// capture in progress (cudaStreamGetCaptureInfo), changed by cudaStreamUpdateCaptureDependencies,
// and the kernels of a module (cuLibraryGetKernelCount / cuLibraryEnumerateKernels).
//
// A capture's graph is the driver's; the guest gets a handle for it (an entry borrowed from the
// driver: never destroyed through it) and host-made handles for its nodes, as for a captured
// graph's nodes listed after the capture (graph.cc node_handle). Nodes the program adds to that
// graph meanwhile (cudaGraphAddKernelNode and the rest) are entries under it as usual. At
// cudaStreamEndCapture the graph is the program's, under the same handle (graph.cc).
#include <cstring>
#include <string>
#include <vector>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

Object* Session::graph_entry(CUgraph g) {
  for (const auto& [handle, id] : vol_.of(ObjectKind::Graph))
    if (Object* o = vol_.get(id); o && o->as<GraphObject>().graph == g) return o;
  return nullptr;
}

int32_t Session::on_StreamCaptureGraph(const api::CaptureGraphArgs& a, api::CaptureGraphReply& r, Request& req) {
  if (a.pad || a.capacity > api::kMaxGraphDeps) return guest_fault("StreamCaptureGraph: capacity or padding");
  if (size_t{a.capacity} * (sizeof(uint64_t) + sizeof(CUgraphEdgeData)) > req.extra.size())
    return guest_fault("StreamCaptureGraph: a reply area too small", ChannelStatus::kReplyTooSmall);
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  unsigned long long id = 0;
  CUgraph g = nullptr;
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  size_t count = 0;
  if (CUresult e = on_device(device, [&] { return api_.cuStreamGetCaptureInfo_v3(s, &status, &id, &g, &deps, &edges, &count); });
      e != CUDA_SUCCESS)
    return e;
  r = api::CaptureGraphReply{static_cast<uint32_t>(status), 0, guest_capture_id(id), 0, 0};
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g) return CUDA_SUCCESS;  // the rest only of an active capture
  Object* graph = graph_entry(g);
  if (!graph) {
    if (a.graph < api::kFirstGuestHandle || vol_.find(ObjectKind::Graph, a.graph)) return CUDA_ERROR_INVALID_VALUE;
    graph = &vol_.add(ObjectKind::Graph, device, a.graph, vol_.context(device)->id, GraphObject{g, /*borrowed=*/true});
    capture_graphs_[id] = a.graph;
  }
  r.graph = graph->handle;
  r.count = count;
  const size_t n = std::min<size_t>(count, a.capacity);
  bool plain = true;
  for (size_t i = 0; edges && i < n; ++i)
    plain = plain && edges[i].from_port == 0 && edges[i].to_port == 0 && edges[i].type == 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = node_handle(*graph, deps[i]);
    std::memcpy(req.extra.data() + i * sizeof h, &h, sizeof h);
  }
  if (!plain) std::memcpy(req.extra.data() + n * sizeof(uint64_t), edges, n * sizeof(CUgraphEdgeData));
  r.edges = plain ? 0 : 1;
  req.extra_bytes = static_cast<uint32_t>(n * (sizeof(uint64_t) + (plain ? 0 : sizeof(CUgraphEdgeData))));
  return CUDA_SUCCESS;
}

int32_t Session::on_StreamUpdateCaptureDeps(const api::CaptureDepsArgs& a, api::Empty&, Request& req) {
  if (a.pad || a.edges > 1 || a.count > api::kMaxGraphDeps)
    return guest_fault("StreamUpdateCaptureDeps: dependency count, edges or padding");
  const size_t bytes = size_t{a.count} * (sizeof(uint64_t) + (a.edges ? sizeof(CUgraphEdgeData) : 0));
  if (req.tail.size() != bytes) return guest_fault("StreamUpdateCaptureDeps: dependency bytes of the wrong length");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  std::vector<CUgraphNode> deps;
  std::vector<CUgraphEdgeData> edges;
  if (a.count) {
    // The nodes must be of the capture's graph, which the guest can name only if it was given it.
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph g = nullptr;
    if (CUresult e = on_device(device, [&] {
          return api_.cuStreamGetCaptureInfo_v3(s, &status, nullptr, &g, nullptr, nullptr, nullptr);
        });
        e != CUDA_SUCCESS)
      return e;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
    const Object* graph = g ? graph_entry(g) : nullptr;
    if (!graph) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = graph_nodes(*graph, req.tail, a.count, &deps); e != CUDA_SUCCESS) return e;
    if (a.edges) {
      edges.resize(a.count);
      std::memcpy(edges.data(), req.tail.data() + a.count * sizeof(uint64_t), a.count * sizeof(CUgraphEdgeData));
    }
  }
  return on_device(device, [&] {
    return api_.cuStreamUpdateCaptureDependencies_v2(s, deps.empty() ? nullptr : deps.data(),
                                                     edges.empty() ? nullptr : edges.data(), deps.size(), a.flags);
  });
}

int32_t Session::on_ModuleKernelNames(const api::ModuleArgs& a, api::KernelNamesReply& r, Request& req) {
  const Object* mod = find_module_here(a.module);
  if (!mod) return CUDA_ERROR_INVALID_HANDLE;
  const CUmodule m = mod->as<ModuleObject>().module;
  unsigned count = 0;
  if (CUresult e = api_.cuModuleGetFunctionCount(&count, m); e != CUDA_SUCCESS) return e;
  std::vector<CUfunction> fns(count);
  if (count)
    if (CUresult e = api_.cuModuleEnumerateFunctions(fns.data(), count, m); e != CUDA_SUCCESS) return e;
  std::string names;
  for (CUfunction f : fns) {
    const char* name = nullptr;
    if (CUresult e = api_.cuFuncGetName(&name, f); e != CUDA_SUCCESS) return e;
    names.append(name ? name : "");
    names.push_back('\0');
    if (names.size() > api::kMaxKernelNameBytes) return CUDA_ERROR_OUT_OF_MEMORY;  // no module has so many
  }
  r.count = count;
  r.bytes = static_cast<uint32_t>(names.size());
  if (names.size() <= req.extra.size()) {
    std::memcpy(req.extra.data(), names.data(), names.size());
    req.extra_bytes = r.bytes;
  }
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
