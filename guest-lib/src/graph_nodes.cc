// Graph nodes after their creation (calls.def 0x1b00; host-stub/src/graph_nodes.cc): every
// node kind's parameters read and changed, in a graph or an executable graph; a node's
// dependencies and dependents, a graph's edges, removing edges and nodes; enabling nodes of
// an executable graph; kernel node attributes; a child graph node's graph;
// cudaGraphDebugDotPrint (written here from what the host lists); cudaStreamGetId.
//
// Each is a round trip (CUDA reports these errors at once). The host answers a node's
// parameters in its own terms, translated back here: a kernel by the host's function handle
// (the registered kernel's host stub, kernelParams pointing at a copy kept per node until
// its next get), pinned host memory by heap offset (this process's pointer), a host node by
// its mailbox entry (the function and data this process gave it).
#include <cstdio>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "graph.h"
#include "host_objects.h"
#include "host_pointers.h"
#include "log.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

namespace api = vmcuda::api;

uint64_t wire(const void* h) { return reinterpret_cast<uint64_t>(h); }
template <class T>
T handle_of(uint64_t h) {
  return reinterpret_cast<T>(static_cast<uintptr_t>(h));
}

constexpr uint32_t kMaxKernelParamBytes = 32768;  // CUDA's limit on a kernel's parameters (32764)

// cudaGraphKernelNodeGetParams' kernelParams: a copy of the values per node, valid until the
// node's next get (CUDA: until the node's parameters change).
struct ParamCopy {
  std::vector<std::byte> bytes;
  std::vector<void*> pointers;
};
std::mutex g_params_mu;
std::map<uint64_t, ParamCopy>& param_copies() {
  static auto* m = new std::map<uint64_t, ParamCopy>;  // never destroyed: entry points may run at exit
  return *m;
}

// The node's parameters as the host gives them (kernel: its parameter bytes in *args).
// Precondition: r's lock held.
cudaError_t get_params(Remote& r, cudaGraphNode_t node, api::GraphNodeParams* p, std::vector<std::byte>* args = nullptr) {
  if (!node) return cudaErrorInvalidValue;
  const auto res = r.call<api::Call::GraphNodeGetParams>({wire(node)}, {}, kMaxKernelParamBytes);
  if (res.status) return static_cast<cudaError_t>(res.status);
  *p = res.reply;
  if (args) {
    if (res.extra.size() < p->arg_bytes) return cudaErrorUnknown;
    args->assign(res.extra.begin(), res.extra.begin() + p->arg_bytes);
  }
  return cudaSuccess;
}

// A node's parameters for a getter (the app's `out` non-null, the node of `type`), under the
// client's lock, which *lock keeps held for the caller. Null with the error recorded in *e.
Remote* typed_params(cudaGraphNode_t node, const void* out, uint32_t type, api::GraphNodeParams* p,
                     std::unique_lock<std::mutex>* lock, cudaError_t* e) {
  Remote* r = graph_enter(e);
  if (!r) return nullptr;
  if (!node || !out) return *e = record(cudaErrorInvalidValue), nullptr;
  *lock = r->lock();
  if (cudaError_t ge = get_params(*r, node, p)) return *e = record(ge), nullptr;
  if (p->type != type) return *e = record(cudaErrorInvalidValue), nullptr;
  return r;
}

// A node's type, or the error (the node unknown: cudaErrorInvalidValue).
cudaError_t node_type(Remote& r, cudaGraphNode_t node, uint32_t* type) {
  if (!node) return cudaErrorInvalidValue;
  const auto res = r.call<api::Call::GraphNodeGetType>({wire(node)});
  if (res.status) return static_cast<cudaError_t>(res.status);
  *type = res.reply.type;
  return cudaSuccess;
}

// Sets `node`'s parameters (in executable graph `exec` unless 0). Precondition: r's lock held.
cudaError_t set_params(Remote& r, uint64_t exec, cudaGraphNode_t node, const api::GraphNodeParams& p,
                       std::span<const std::byte> tail = {}) {
  if (!node) return cudaErrorInvalidValue;
  api::GraphNodeSetArgs a{};
  a.exec = exec;
  a.node = wire(node);
  a.params = p;
  return static_cast<cudaError_t>(r.call<api::Call::GraphNodeSetParams>(a, tail).status);
}

// ---- each kind's parameters to and from the wire

// `object`: graph_kernel_object's answer for k->func (found before the lock was taken).
cudaError_t kernel_to_wire(Remote& r, HostKernel* object, const cudaKernelNodeParams* k, api::GraphNodeParams* p,
                           std::vector<std::byte>* packed) {
  if (!k) return cudaErrorInvalidValue;
  uint64_t function = 0;
  if (cudaError_t e = pack_kernel(r, object, k->func, k->gridDim, k->blockDim, k->sharedMemBytes, k->kernelParams,
                                  k->extra, &function, packed))
    return e;
  p->type = api::kGraphNodeKernel;
  p->object = function;
  p->grid[0] = k->gridDim.x, p->grid[1] = k->gridDim.y, p->grid[2] = k->gridDim.z;
  p->block[0] = k->blockDim.x, p->block[1] = k->blockDim.y, p->block[2] = k->blockDim.z;
  p->shared_bytes = k->sharedMemBytes;
  p->arg_bytes = static_cast<uint32_t>(packed->size());
  return cudaSuccess;
}

cudaError_t memcpy_to_wire(const cudaMemcpy3DParms* c, api::GraphNodeParams* p) {
  if (!c) return cudaErrorInvalidValue;
  if (static_cast<unsigned>(c->kind) > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  p->type = api::kGraphNodeMemcpy;
  if (cudaError_t e = graph_memcpy_side(c->srcPtr, c->srcPos, c->extent, c->srcArray, &p->src)) return e;
  if (cudaError_t e = graph_memcpy_side(c->dstPtr, c->dstPos, c->extent, c->dstArray, &p->dst)) return e;
  p->extent[0] = c->extent.width, p->extent[1] = c->extent.height, p->extent[2] = c->extent.depth;
  return cudaSuccess;
}

cudaMemcpy3DParms one_d(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  cudaMemcpy3DParms c{};
  c.srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
  c.dstPtr = cudaPitchedPtr{dst, count, count, 1};
  c.extent = cudaExtent{count, 1, 1};
  c.kind = kind;
  return c;
}

// A symbol's device address plus offset, checked against its size.
cudaError_t symbol_at(const void* symbol, size_t count, size_t offset, void** at) {
  void* base = nullptr;
  size_t size = 0;
  if (cudaError_t e = cudaGetSymbolAddress(&base, symbol)) return e;
  if (cudaError_t e = cudaGetSymbolSize(&size, symbol)) return e;
  if (offset > size || count > size - offset) return cudaErrorInvalidValue;
  *at = static_cast<std::byte*>(base) + offset;
  return cudaSuccess;
}

void memset_to_wire(const cudaMemsetParams& m, api::GraphNodeParams* p) {
  p->type = api::kGraphNodeMemset;
  p->memset_dst = addr(m.dst);
  p->memset_pitch = m.pitch;
  p->memset_width = m.width;
  p->memset_height = m.height;
  p->memset_value = m.value;
  p->memset_element_size = m.elementSize;
}

// ---- the entry points' shapes

// A setter of one kind's parameters: `fill` makes them (under the lock), `exec` 0 for the
// graph's node.
template <class F>
cudaError_t set_node(uint64_t exec, cudaGraphNode_t node, F&& fill) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!node) return record(cudaErrorInvalidValue);
  api::GraphNodeParams p{};
  thread_local std::vector<std::byte> tail;
  tail.clear();
  auto lock = r->lock();
  if (cudaError_t fe = fill(*r, &p, &tail)) return record(fe);
  return record(set_params(*r, exec, node, p, tail));
}

cudaError_t set_memcpy(uint64_t exec, cudaGraphNode_t node, const cudaMemcpy3DParms& c) {
  return set_node(exec, node, [&](Remote&, api::GraphNodeParams* p, std::vector<std::byte>*) { return memcpy_to_wire(&c, p); });
}

cudaError_t set_event(uint64_t exec, cudaGraphNode_t node, cudaEvent_t event, uint32_t type) {
  return set_node(exec, node, [&](Remote&, api::GraphNodeParams* p, std::vector<std::byte>*) {
    p->type = type;
    return event_wire_handle(event, &p->object);
  });
}

cudaError_t get_event(cudaGraphNode_t node, cudaEvent_t* out, uint32_t type) {
  cudaError_t e;
  std::unique_lock<std::mutex> lock;
  api::GraphNodeParams p;
  if (!typed_params(node, out, type, &p, &lock, &e)) return e;
  *out = handle_of<cudaEvent_t>(p.object);
  return cudaSuccess;
}

uint64_t exec_wire(cudaGraphExec_t x) { return wire(x); }

// A node's dependencies or dependents; a graph's edges: as cudaGraphGetNodes fills a list.
cudaError_t related(cudaGraphNode_t node, cudaGraphNode_t* out, cudaGraphEdgeData* edges, size_t* count, uint32_t which) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!node || !count) return record(cudaErrorInvalidValue);
  const size_t capacity = out ? std::min<size_t>(*count, api::kMaxGraphList) : 0;
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphNodeGetRelated>({wire(node), which, static_cast<uint32_t>(capacity)}, {},
                                                           static_cast<uint32_t>(capacity * sizeof(uint64_t)));
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  if (!out) {
    *count = res.reply.count;
    return cudaSuccess;
  }
  const size_t n = std::min<size_t>(res.reply.count, capacity);
  if (res.extra.size() < n * sizeof(uint64_t)) return record(cudaErrorUnknown);
  for (size_t i = 0; i < *count; ++i) {
    uint64_t h = 0;
    if (i < n) std::memcpy(&h, res.extra.data() + i * sizeof h, sizeof h);
    out[i] = handle_of<cudaGraphNode_t>(h);
    if (edges) edges[i] = cudaGraphEdgeData{};  // vmcuda makes only plain edges
  }
  *count = std::min<size_t>(*count, res.reply.count);
  return cudaSuccess;
}

// The graph's edges (from, to), all of them.
cudaError_t all_edges(Remote& r, cudaGraph_t graph, std::vector<uint64_t>* from, std::vector<uint64_t>* to) {
  uint32_t capacity = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const auto res = r.call<api::Call::GraphGetEdges>({wire(graph), 0, capacity}, {},
                                                      static_cast<uint32_t>(2 * size_t{capacity} * sizeof(uint64_t)));
    if (res.status) return static_cast<cudaError_t>(res.status);
    if (res.reply.count > api::kMaxGraphList) return cudaErrorNotSupported;  // more than one reply holds
    if (res.reply.count <= capacity) {
      const size_t n = res.reply.count;
      if (res.extra.size() < 2 * n * sizeof(uint64_t)) return cudaErrorUnknown;
      from->resize(n), to->resize(n);
      if (n) {
        std::memcpy(from->data(), res.extra.data(), n * sizeof(uint64_t));
        std::memcpy(to->data(), res.extra.data() + n * sizeof(uint64_t), n * sizeof(uint64_t));
      }
      return cudaSuccess;
    }
    capacity = static_cast<uint32_t>(res.reply.count);  // grown meanwhile by another thread: ask again
  }
  return cudaErrorUnknown;
}

}  // namespace
}  // namespace vmcuda::guest

using namespace vmcuda::guest;
namespace api = vmcuda::api;

// ---- kernel nodes
cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams* pNodeParams) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!node || !pNodeParams) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  api::GraphNodeParams p;
  std::vector<std::byte> args;
  if (cudaError_t ge = get_params(*r, node, &p, &args)) return record(ge);
  if (p.type != api::kGraphNodeKernel) return record(cudaErrorInvalidValue);
  const HostKernel* k = nullptr;
  const void* func = kernel_of_handle(p.object, &k);
  // A kernel of the driver API: its CUfunction (a CUkernel's node answers the CUfunction it
  // resolved to on this device).
  if (!func) func = driver_function_of_handle(p.object, &k);
  if (!func) {
    // Another device's kernel, or one whose module was unloaded.
    VMCUDA_LOG(kWarn, "graph", "cudaGraphKernelNodeGetParams of a kernel node whose kernel is neither a registered "
                               "kernel nor a loaded CUfunction of this device is not supported yet (801)");
    return record(cudaErrorNotSupported);
  }
  std::lock_guard l(g_params_mu);
  ParamCopy& copy = param_copies()[wire(node)];
  copy.bytes = std::move(args);
  copy.pointers.clear();
  for (const auto& pi : k->params) {
    if (size_t{pi.offset} + pi.size > copy.bytes.size()) return record(cudaErrorUnknown);
    copy.pointers.push_back(copy.bytes.data() + pi.offset);
  }
  pNodeParams->func = const_cast<void*>(func);
  pNodeParams->gridDim = dim3(p.grid[0], p.grid[1], p.grid[2]);
  pNodeParams->blockDim = dim3(p.block[0], p.block[1], p.block[2]);
  pNodeParams->sharedMemBytes = p.shared_bytes;
  pNodeParams->kernelParams = copy.pointers.empty() ? nullptr : copy.pointers.data();
  pNodeParams->extra = nullptr;
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const cudaKernelNodeParams* pNodeParams) {
  HostKernel* object = nullptr;
  if (pNodeParams)
    if (cudaError_t e = graph_kernel_object(pNodeParams->func, &object)) return record(e);
  return set_node(0, node, [&](Remote& r, api::GraphNodeParams* p, std::vector<std::byte>* tail) {
    return kernel_to_wire(r, object, pNodeParams, p, tail);
  });
}

namespace {
// The attributes vmcuda carries for kernel nodes (host graph_state.cc): cooperative, cluster
// dimension, its scheduling policy, priority; the others answer 801 (logged once).
bool carried_attribute(cudaLaunchAttributeID id) {
  switch (id) {
    case cudaLaunchAttributeCooperative:
    case cudaLaunchAttributeClusterDimension:
    case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    case cudaLaunchAttributePriority:
      return true;
    default:
      return false;
  }
}
cudaError_t attribute_refused(cudaLaunchAttributeID id) {
  if (static_cast<unsigned>(id) > cudaLaunchAttributeNvlinkUtilCentricScheduling) return cudaErrorInvalidValue;
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    VMCUDA_LOG(kWarn, "graph", "kernel node attribute %d is not supported yet (801); cooperative, cluster dimension, "
                               "cluster scheduling policy and priority are", static_cast<int>(id));
  return cudaErrorNotSupported;
}
}  // namespace

cudaError_t cudaGraphKernelNodeGetAttribute(cudaGraphNode_t hNode, cudaLaunchAttributeID attr,
                                            cudaLaunchAttributeValue* value_out) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!hNode || !value_out) return record(cudaErrorInvalidValue);
  if (!carried_attribute(attr)) return record(attribute_refused(attr));
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphKernelNodeAttribute>({wire(hNode), 0, api::kAttrGet, static_cast<uint32_t>(attr), {}});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  std::memset(value_out, 0, sizeof *value_out);
  switch (attr) {
    case cudaLaunchAttributeCooperative: value_out->cooperative = static_cast<int>(res.reply.value[0]); break;
    case cudaLaunchAttributeClusterDimension:
      value_out->clusterDim.x = res.reply.value[0], value_out->clusterDim.y = res.reply.value[1],
      value_out->clusterDim.z = res.reply.value[2];
      break;
    case cudaLaunchAttributeClusterSchedulingPolicyPreference:
      value_out->clusterSchedulingPolicyPreference = static_cast<cudaClusterSchedulingPolicy>(res.reply.value[0]);
      break;
    default: value_out->priority = static_cast<int>(res.reply.value[0]); break;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeSetAttribute(cudaGraphNode_t hNode, cudaLaunchAttributeID attr,
                                            const cudaLaunchAttributeValue* value) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!hNode || !value) return record(cudaErrorInvalidValue);
  if (!carried_attribute(attr)) return record(attribute_refused(attr));
  api::GraphKernelAttrArgs a{wire(hNode), 0, api::kAttrSet, static_cast<uint32_t>(attr), {}};
  switch (attr) {
    case cudaLaunchAttributeCooperative: a.value[0] = static_cast<uint32_t>(value->cooperative); break;
    case cudaLaunchAttributeClusterDimension:
      a.value[0] = value->clusterDim.x, a.value[1] = value->clusterDim.y, a.value[2] = value->clusterDim.z;
      break;
    case cudaLaunchAttributeClusterSchedulingPolicyPreference:
      a.value[0] = static_cast<uint32_t>(value->clusterSchedulingPolicyPreference);
      break;
    default: a.value[0] = static_cast<uint32_t>(value->priority); break;
  }
  auto lock = r->lock();
  return record(static_cast<cudaError_t>(r->call<api::Call::GraphKernelNodeAttribute>(a).status));
}

cudaError_t cudaGraphKernelNodeCopyAttributes(cudaGraphNode_t hDst, cudaGraphNode_t hSrc) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!hDst || !hSrc) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  return record(static_cast<cudaError_t>(
      r->call<api::Call::GraphKernelNodeAttribute>({wire(hDst), wire(hSrc), api::kAttrCopy, 0, {}}).status));
}

// ---- memcpy nodes
cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node, cudaMemcpy3DParms* pNodeParams) {
  cudaError_t e;
  std::unique_lock<std::mutex> lock;
  api::GraphNodeParams p;
  Remote* r = typed_params(node, pNodeParams, api::kGraphNodeMemcpy, &p, &lock, &e);
  if (!r) return e;
  const auto heap = r->slot().region().heap();
  auto side = [&](const api::GraphMemcpySide& s, cudaPitchedPtr* ptr, cudaPos* pos) -> bool {
    void* at;
    if (s.kind == api::kGraphMemHeap) {
      if (s.heap.offset > heap.size()) return false;
      at = heap.data() + s.heap.offset;
    } else {
      at = handle_of<void*>(s.device);
    }
    *ptr = cudaPitchedPtr{at, s.pitch, p.extent[0], s.height};
    *pos = cudaPos{s.pos[0], s.pos[1], s.pos[2]};
    return true;
  };
  cudaMemcpy3DParms c{};
  if (!side(p.src, &c.srcPtr, &c.srcPos) || !side(p.dst, &c.dstPtr, &c.dstPos)) return record(cudaErrorUnknown);
  c.extent = cudaExtent{p.extent[0], p.extent[1], p.extent[2]};
  c.kind = cudaMemcpyDefault;  // the memory types tell the direction
  *pNodeParams = c;
  return cudaSuccess;
}

cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node, const cudaMemcpy3DParms* pNodeParams) {
  if (!pNodeParams) return record(cudaErrorInvalidValue);
  return set_memcpy(0, node, *pNodeParams);
}
cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst, const void* src, size_t count,
                                           cudaMemcpyKind kind) {
  return set_memcpy(0, node, one_d(dst, src, count, kind));
}
cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node, const void* symbol, const void* src,
                                                 size_t count, size_t offset, cudaMemcpyKind kind) {
  void* at;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at)) return record(e);
  return set_memcpy(0, node, one_d(at, src, count, kind));
}
cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void* dst, const void* symbol, size_t count,
                                                   size_t offset, cudaMemcpyKind kind) {
  void* at;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at)) return record(e);
  return set_memcpy(0, node, one_d(dst, at, count, kind));
}
cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                           const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                           const void* symbol, const void* src, size_t count, size_t offset,
                                           cudaMemcpyKind kind) {
  void* at;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at)) return record(e);
  return cudaGraphAddMemcpyNode1D(pGraphNode, graph, pDependencies, numDependencies, at, src, count, kind);
}
cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                             const cudaGraphNode_t* pDependencies, size_t numDependencies, void* dst,
                                             const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind) {
  void* at;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at)) return record(e);
  return cudaGraphAddMemcpyNode1D(pGraphNode, graph, pDependencies, numDependencies, dst, at, count, kind);
}
cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const cudaMemcpy3DParms* pNodeParams) {
  if (!hGraphExec || !pNodeParams) return record(cudaErrorInvalidValue);
  return set_memcpy(exec_wire(hGraphExec), node, *pNodeParams);
}
cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t hGraphExec, cudaGraphNode_t node, void* dst,
                                               const void* src, size_t count, cudaMemcpyKind kind) {
  if (!hGraphExec) return record(cudaErrorInvalidValue);
  return set_memcpy(exec_wire(hGraphExec), node, one_d(dst, src, count, kind));
}
cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                     const void* symbol, const void* src, size_t count, size_t offset,
                                                     cudaMemcpyKind kind) {
  if (!hGraphExec) return record(cudaErrorInvalidValue);
  void* at;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at)) return record(e);
  return set_memcpy(exec_wire(hGraphExec), node, one_d(at, src, count, kind));
}
cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(cudaGraphExec_t hGraphExec, cudaGraphNode_t node, void* dst,
                                                       const void* symbol, size_t count, size_t offset,
                                                       cudaMemcpyKind kind) {
  if (!hGraphExec) return record(cudaErrorInvalidValue);
  void* at;
  if (cudaError_t e = symbol_at(symbol, count, offset, &at)) return record(e);
  return set_memcpy(exec_wire(hGraphExec), node, one_d(dst, at, count, kind));
}

// ---- memset nodes
cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, cudaMemsetParams* pNodeParams) {
  cudaError_t e;
  std::unique_lock<std::mutex> lock;
  api::GraphNodeParams p;
  if (!typed_params(node, pNodeParams, api::kGraphNodeMemset, &p, &lock, &e)) return e;
  *pNodeParams = cudaMemsetParams{handle_of<void*>(p.memset_dst), p.memset_pitch, p.memset_value,
                                  p.memset_element_size, p.memset_width, p.memset_height};
  return cudaSuccess;
}
cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node, const cudaMemsetParams* pNodeParams) {
  if (!pNodeParams) return record(cudaErrorInvalidValue);
  return set_node(0, node, [&](Remote&, api::GraphNodeParams* p, std::vector<std::byte>*) {
    memset_to_wire(*pNodeParams, p);
    return cudaSuccess;
  });
}
cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const cudaMemsetParams* pNodeParams) {
  if (!hGraphExec || !pNodeParams) return record(cudaErrorInvalidValue);
  return set_node(exec_wire(hGraphExec), node, [&](Remote&, api::GraphNodeParams* p, std::vector<std::byte>*) {
    memset_to_wire(*pNodeParams, p);
    return cudaSuccess;
  });
}

// ---- host nodes
cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, cudaHostNodeParams* pNodeParams) {
  cudaError_t e;
  std::unique_lock<std::mutex> lock;
  api::GraphNodeParams p;
  Remote* r = typed_params(node, pNodeParams, api::kGraphNodeHost, &p, &lock, &e);
  if (!r) return e;
  cudaHostFn_t fn = nullptr;
  void* data = nullptr;
  if (!persistent_host_function(*r, p.mailbox.offset, &fn, &data)) return record(cudaErrorUnknown);
  *pNodeParams = cudaHostNodeParams{fn, data};
  return cudaSuccess;
}
// A host node's new function is a new mailbox entry (the old one may still be reached: a
// graph instantiated, cloned or copied before, a launch still in flight). The entries
// SetParams made are tracked, so that each is given back once nothing can reach it, and a
// loop of SetParams does not grow the mailbox (nor the host's gates):
//  - an executable graph's node: its entry from an earlier ExecHostNodeSetParams is its own
//    (executable graphs are never copied); replaced, or the graph updated or destroyed, it
//    goes back after the work of the graph's launches so far (a host function on each stream
//    it was launched on, as user objects' references);
//  - a graph's node: its entry from an earlier HostNodeSetParams goes back at once when no
//    instantiation, clone, child graph copy or update happened since (`epoch`), else stays.
namespace {
struct HostEntries {
  std::mutex mu;
  uint64_t epoch = 0;                                         // bumped by host_entries_shared
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> of_exec;  // (exec, node) -> entry offset
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> of_node;  // graph node -> entry offset, epoch
  std::map<uint64_t, std::set<uint64_t>> launched_on;         // exec -> streams (execs in of_exec only)
};
HostEntries& host_entries() {
  static auto* h = new HostEntries;  // never destroyed: release callbacks may run at exit
  return *h;
}
std::atomic<bool> g_host_entries{false};  // no SetParams of a host node yet: the hooks cost nothing

struct ReleaseCountdown {
  std::atomic<int> left;
  std::vector<uint64_t> entries;
};
void count_down(void* p) {
  auto* c = static_cast<ReleaseCountdown*>(p);
  if (c->left.fetch_sub(1) != 1) return;
  for (uint64_t e : c->entries) release_persistent_entry(e);
  delete c;
}
// Gives `entries` (an executable graph's own) back after the work of its launches on `streams`.
void release_after(std::vector<uint64_t> entries, const std::set<uint64_t>& streams) {
  if (entries.empty()) return;
  if (streams.empty()) {
    for (uint64_t e : entries) release_persistent_entry(e);
    return;
  }
  auto* c = new ReleaseCountdown{{static_cast<int>(streams.size())}, std::move(entries)};
  const cudaError_t last = peek_last_error();
  const bool used = runtime_used_on_this_thread();
  for (uint64_t st : streams)
    if (cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(st), count_down, c) != cudaSuccess) count_down(c);
  restore_runtime_thread_state(last, used);  // the program's last error stays its own
}
// Every entry executable graph `exec` holds as its own goes back after its launches' work.
void retire_exec(uint64_t exec, bool destroyed) {
  HostEntries& h = host_entries();
  std::vector<uint64_t> entries;
  std::set<uint64_t> streams;
  {
    std::lock_guard l(h.mu);
    for (auto it = h.of_exec.lower_bound({exec, 0}); it != h.of_exec.end() && it->first.first == exec;) {
      entries.push_back(it->second);
      it = h.of_exec.erase(it);
    }
    auto s = h.launched_on.find(exec);
    if (s != h.launched_on.end()) {
      streams = s->second;
      if (destroyed) h.launched_on.erase(s);
    }
  }
  release_after(std::move(entries), streams);
}

cudaError_t host_params(uint64_t exec, cudaGraphNode_t node, const cudaHostNodeParams* h) {
  if (!h || !h->fn) return record(cudaErrorInvalidValue);
  g_host_entries.store(true, std::memory_order_release);
  uint64_t made = 0;
  bool made_one = false;
  const cudaError_t e = set_node(exec, node, [&](Remote& r, api::GraphNodeParams* p, std::vector<std::byte>*) {
    p->type = api::kGraphNodeHost;
    const cudaError_t pe = persistent_host_entry(r, h->fn, h->userData, &p->mailbox, &p->index);
    made = p->mailbox.offset + uint64_t{p->index} * sizeof(api::HostFuncEntry);
    made_one = pe == cudaSuccess;
    return pe;
  });
  if (!made_one) return e;
  if (e != cudaSuccess) {  // the host refused it: nothing references the new entry
    release_persistent_entry(made);
    return e;
  }
  HostEntries& he = host_entries();
  std::optional<uint64_t> old;
  std::set<uint64_t> streams;
  {
    std::lock_guard l(he.mu);
    if (exec) {
      auto [it, fresh] = he.of_exec.try_emplace({exec, wire(node)}, made);
      if (!fresh) old = std::exchange(it->second, made);
      if (old) streams = he.launched_on[exec];
      else he.launched_on.try_emplace(exec);
    } else {
      auto [it, fresh] = he.of_node.try_emplace(wire(node), made, he.epoch);
      if (!fresh) {
        // Still the node's alone (nothing copied the graph since): it goes now.
        if (it->second.second == he.epoch) release_persistent_entry(it->second.first);
        it->second = {made, he.epoch};
      }
    }
  }
  if (old) release_after({*old}, streams);
  return e;
}
}  // namespace

void vmcuda::guest::host_entries_shared() {
  if (!g_host_entries.load(std::memory_order_acquire)) return;
  std::lock_guard l(host_entries().mu);
  ++host_entries().epoch;
}
void vmcuda::guest::host_entries_launched(uint64_t exec, uint64_t stream) {
  if (!g_host_entries.load(std::memory_order_acquire)) return;
  HostEntries& h = host_entries();
  std::lock_guard l(h.mu);
  if (auto it = h.launched_on.find(exec); it != h.launched_on.end()) it->second.insert(stream);
}
void vmcuda::guest::host_entries_exec_destroyed(uint64_t exec) {
  if (g_host_entries.load(std::memory_order_acquire)) retire_exec(exec, true);
}
void vmcuda::guest::host_entries_exec_updated(uint64_t exec) {
  if (g_host_entries.load(std::memory_order_acquire)) retire_exec(exec, false);
}

cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const cudaHostNodeParams* pNodeParams) {
  return host_params(0, node, pNodeParams);
}
cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                           const cudaHostNodeParams* pNodeParams) {
  if (!hGraphExec) return record(cudaErrorInvalidValue);
  return host_params(exec_wire(hGraphExec), node, pNodeParams);
}

// ---- event nodes
cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event_out) {
  return get_event(node, event_out, api::kGraphNodeEventRecord);
}
cudaError_t cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  return set_event(0, node, event, api::kGraphNodeEventRecord);
}
cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event_out) {
  return get_event(node, event_out, api::kGraphNodeWaitEvent);
}
cudaError_t cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  return set_event(0, node, event, api::kGraphNodeWaitEvent);
}
cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode, cudaEvent_t event) {
  if (!hGraphExec) return record(cudaErrorInvalidValue);
  return set_event(exec_wire(hGraphExec), hNode, event, api::kGraphNodeEventRecord);
}
cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode, cudaEvent_t event) {
  if (!hGraphExec) return record(cudaErrorInvalidValue);
  return set_event(exec_wire(hGraphExec), hNode, event, api::kGraphNodeWaitEvent);
}

// ---- child graph nodes
cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* pGraph) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!node || !pGraph) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  // The node's own graph (a reference, not a copy: never destroyed by the program).
  const auto res = r->call<api::Call::GraphChildGraph>({wire(node), handles::next()});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *pGraph = handle_of<cudaGraph_t>(res.reply.graph);
  return cudaSuccess;
}
cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                 cudaGraph_t childGraph) {
  if (!hGraphExec || !childGraph) return record(cudaErrorInvalidValue);
  host_entries_shared();  // the executable graph copies the child's host node entries
  return set_node(exec_wire(hGraphExec), node, [&](Remote&, api::GraphNodeParams* p, std::vector<std::byte>*) {
    p->type = api::kGraphNodeChild;
    p->object = wire(childGraph);
    return cudaSuccess;
  });
}

// ---- kernel nodes of executable graphs: cudaGraphExecKernelNodeSetParams is graph.cc's.

// ---- relations, edges, nodes
cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* pDependencies,
                                         cudaGraphEdgeData* edgeData, size_t* pNumDependencies) {
  return related(node, pDependencies, edgeData, pNumDependencies, api::kGraphNodeDependencies);
}
cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* pDependentNodes,
                                           cudaGraphEdgeData* edgeData, size_t* pNumDependentNodes) {
  return related(node, pDependentNodes, edgeData, pNumDependentNodes, api::kGraphNodeDependents);
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* edgeData,
                              size_t* numEdges) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!graph || !numEdges || (!from != !to) || (edgeData && !from)) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  std::vector<uint64_t> f, t;
  if (cudaError_t ee = all_edges(*r, graph, &f, &t)) return record(ee);
  if (!from) {
    *numEdges = f.size();
    return cudaSuccess;
  }
  // As CUDA: up to *numEdges filled, the rest NULL; *numEdges becomes the number filled.
  for (size_t i = 0; i < *numEdges; ++i) {
    from[i] = handle_of<cudaGraphNode_t>(i < f.size() ? f[i] : 0);
    to[i] = handle_of<cudaGraphNode_t>(i < t.size() ? t[i] : 0);
    if (edgeData) edgeData[i] = cudaGraphEdgeData{};
  }
  *numEdges = std::min(*numEdges, f.size());
  return cudaSuccess;
}

cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                        const cudaGraphEdgeData* edgeData, size_t numDependencies) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!graph || (numDependencies && (!from || !to)) || numDependencies > api::kMaxGraphDeps)
    return record(cudaErrorInvalidValue);
  if (edgeData)
    for (size_t i = 0; i < numDependencies; ++i)
      if (edgeData[i].from_port || edgeData[i].to_port || edgeData[i].type)
        return record(cudaErrorInvalidValue);  // vmcuda makes no such edge: there is none to remove
  if (graph_memory_in(wire(graph))) return record(cudaErrorNotSupported);  // its edges cannot be deleted
  std::vector<std::byte> tail(2 * numDependencies * sizeof(uint64_t));
  for (size_t i = 0; i < numDependencies; ++i) {
    const uint64_t f = wire(from[i]), t = wire(to[i]);
    std::memcpy(tail.data() + i * 8, &f, 8);
    std::memcpy(tail.data() + (numDependencies + i) * 8, &t, 8);
  }
  auto lock = r->lock();
  return record(static_cast<cudaError_t>(
      r->call<api::Call::GraphRemoveDependencies>({wire(graph), static_cast<uint32_t>(numDependencies), 0}, tail).status));
}

cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!node) return record(cudaErrorInvalidValue);
  // "Nodes and edges of the graph cannot be deleted" once it holds memory nodes.
  if (uint32_t t; graph_memory_node(wire(node), &t)) return record(cudaErrorNotSupported);
  auto lock = r->lock();
  const cudaError_t de = static_cast<cudaError_t>(r->call<api::Call::GraphDestroyNode>({wire(node)}).status);
  if (de == cudaSuccess) {
    std::lock_guard l(g_params_mu);
    param_copies().erase(wire(node));
  }
  return record(de);
}

cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode, unsigned int* isEnabled) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!hGraphExec || !hNode || !isEnabled) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphNodeEnabled>({wire(hGraphExec), wire(hNode), 0, 0});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *isEnabled = res.reply.enabled;
  return cudaSuccess;
}
cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode, unsigned int isEnabled) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!hGraphExec || !hNode) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  return record(static_cast<cudaError_t>(
      r->call<api::Call::GraphNodeEnabled>({wire(hGraphExec), wire(hNode), 1, isEnabled ? 1u : 0u}).status));
}

// ---- cudaGraphDebugDotPrint: a DOT file of the graph's nodes (by type, with their handles)
// and edges, written here (the host's driver would write its file on the host). Not
// NVIDIA's layout: the flags' details (kernel parameters, handles, ...) are not written.
cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int flags) {
  (void)flags;
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!graph || !path) return record(cudaErrorInvalidValue);
  static const char* const kTypes[] = {"KERNEL", "MEMCPY", "MEMSET", "HOST", "GRAPH", "EMPTY", "WAIT_EVENT",
                                       "EVENT_RECORD", "EXT_SEMAS_SIGNAL", "EXT_SEMAS_WAIT", "MEM_ALLOC", "MEM_FREE",
                                       "BATCH_MEM_OP", "CONDITIONAL"};
  std::vector<uint64_t> from, to;
  std::vector<std::pair<uint64_t, uint32_t>> nodes;
  {
    auto lock = r->lock();
    const auto res = r->call<api::Call::GraphGetNodes>({wire(graph), 0, api::kMaxGraphList}, {},
                                                       api::kMaxGraphList * sizeof(uint64_t));
    if (res.status) return record(static_cast<cudaError_t>(res.status));
    const size_t n = std::min<size_t>(res.reply.count, res.extra.size() / sizeof(uint64_t));
    for (size_t i = 0; i < n; ++i) {
      uint64_t h;
      std::memcpy(&h, res.extra.data() + i * sizeof h, sizeof h);
      uint32_t type = ~0u;
      if (cudaError_t te = node_type(*r, handle_of<cudaGraphNode_t>(h), &type)) return record(te);
      nodes.emplace_back(h, type);
    }
    if (cudaError_t ee = all_edges(*r, graph, &from, &to)) return record(ee);
  }
  std::FILE* f = std::fopen(path, "w");
  if (!f) return record(cudaErrorOperatingSystem);
  std::fprintf(f, "digraph dot {\n  subgraph cluster_graph_%llx {\n    label=\"graph_%llx\";\n",
               static_cast<unsigned long long>(wire(graph)), static_cast<unsigned long long>(wire(graph)));
  for (const auto& [h, type] : nodes)
    std::fprintf(f, "    \"node_%llx\" [label=\"%s\\nnode_%llx\"];\n", static_cast<unsigned long long>(h),
                 type < std::size(kTypes) ? kTypes[type] : "UNKNOWN", static_cast<unsigned long long>(h));
  for (size_t i = 0; i < from.size(); ++i)
    std::fprintf(f, "    \"node_%llx\" -> \"node_%llx\";\n", static_cast<unsigned long long>(from[i]),
                 static_cast<unsigned long long>(to[i]));
  std::fprintf(f, "  }\n}\n");
  const bool ok = std::fclose(f) == 0;
  return record(ok ? cudaSuccess : cudaErrorOperatingSystem);
}

// ---- conditional nodes and the generic node parameters (cudaGraphNodeParams)
cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle* pHandle_out, cudaGraph_t graph,
                                             unsigned int defaultLaunchValue, unsigned int flags) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!pHandle_out || !graph) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  const auto res = r->call<api::Call::GraphConditionalHandle>({wire(graph), defaultLaunchValue, flags});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *pHandle_out = res.reply.handle;
  return cudaSuccess;
}

namespace {
// A conditional node's bodies, as CUDA hands them out: an array owned by the node.
std::map<uint64_t, std::vector<cudaGraph_t>>& conditional_bodies() {
  static auto* m = new std::map<uint64_t, std::vector<cudaGraph_t>>;  // never destroyed (entry points at exit)
  return *m;
}

cudaError_t add_conditional(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count,
                            cudaConditionalNodeParams& c) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!out || !graph || (count && !deps) || count > api::kMaxGraphDeps || c.size == 0 ||
      c.size > api::kMaxConditionalBodies)
    return record(cudaErrorInvalidValue);
  std::vector<cudaGraph_t> bodies(c.size);
  std::vector<std::byte> tail((count + c.size) * sizeof(uint64_t));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = wire(deps[i]);
    std::memcpy(tail.data() + i * sizeof h, &h, sizeof h);
  }
  for (size_t i = 0; i < c.size; ++i) {
    const uint64_t h = handles::next();
    bodies[i] = handle_of<cudaGraph_t>(h);
    std::memcpy(tail.data() + (count + i) * sizeof h, &h, sizeof h);
  }
  const uint64_t node = handles::next();
  auto lock = r->lock();
  const api::GraphConditionalNodeArgs a{wire(graph), node, c.handle, static_cast<uint32_t>(c.type), c.size,
                                        static_cast<uint32_t>(count), 0};
  if (cudaError_t ce = static_cast<cudaError_t>(r->call<api::Call::GraphAddConditionalNode>(a, tail).status))
    return record(ce);
  std::lock_guard l(g_params_mu);
  auto& kept = conditional_bodies()[node] = std::move(bodies);
  c.phGraph_out = kept.data();
  *out = handle_of<cudaGraphNode_t>(node);
  return cudaSuccess;
}

cudaError_t refused_node(const char* what) {
  VMCUDA_LOG(kWarn, "graph", "%s is not supported (801)", what);
  return record(cudaErrorNotSupported);
}
}  // namespace

cudaError_t cudaGraphAddNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                             const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                             cudaGraphNodeParams* p) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!p) return record(cudaErrorInvalidValue);
  if (dependencyData)
    for (size_t i = 0; i < numDependencies; ++i)
      if (dependencyData[i].from_port || dependencyData[i].to_port || dependencyData[i].type)
        return refused_node("a graph edge with ports or a type");
  const cudaGraphNode_t* deps = pDependencies;
  const size_t n = numDependencies;
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      const cudaKernelNodeParams k{p->kernel.func, p->kernel.gridDim, p->kernel.blockDim, p->kernel.sharedMemBytes,
                                   p->kernel.kernelParams, p->kernel.extra};
      return cudaGraphAddKernelNode(pGraphNode, graph, deps, n, &k);
    }
    case cudaGraphNodeTypeMemcpy:
      if (p->memcpy.flags) return record(cudaErrorInvalidValue);
      return cudaGraphAddMemcpyNode(pGraphNode, graph, deps, n, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
      const cudaMemsetParams m{p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                               p->memset.width, p->memset.height};
      return cudaGraphAddMemsetNode(pGraphNode, graph, deps, n, &m);
    }
    case cudaGraphNodeTypeHost: {
      const cudaHostNodeParams h{p->host.fn, p->host.userData};
      return cudaGraphAddHostNode(pGraphNode, graph, deps, n, &h);
    }
    case cudaGraphNodeTypeGraph:
      if (p->graph.ownership == cudaGraphChildGraphOwnershipMove)
        return refused_node("a child graph node that takes its graph (cudaGraphChildGraphOwnershipMove)");
      if (p->graph.ownership != cudaGraphChildGraphOwnershipClone) return record(cudaErrorInvalidValue);
      return cudaGraphAddChildGraphNode(pGraphNode, graph, deps, n, p->graph.graph);
    case cudaGraphNodeTypeEmpty:
      return cudaGraphAddEmptyNode(pGraphNode, graph, deps, n);
    case cudaGraphNodeTypeWaitEvent:
      return cudaGraphAddEventWaitNode(pGraphNode, graph, deps, n, p->eventWait.event);
    case cudaGraphNodeTypeEventRecord:
      return cudaGraphAddEventRecordNode(pGraphNode, graph, deps, n, p->eventRecord.event);
    case cudaGraphNodeTypeConditional:
      return add_conditional(pGraphNode, graph, deps, n, p->conditional);
    case cudaGraphNodeTypeMemAlloc: {
      cudaMemAllocNodeParams a{p->alloc.poolProps, p->alloc.accessDescs, p->alloc.accessDescCount, p->alloc.bytesize,
                               nullptr};
      const cudaError_t e = cudaGraphAddMemAllocNode(pGraphNode, graph, deps, n, &a);
      if (e == cudaSuccess) p->alloc.dptr = a.dptr;  // out, as cudaGraphAddMemAllocNode's
      return e;
    }
    case cudaGraphNodeTypeMemFree:
      return cudaGraphAddMemFreeNode(pGraphNode, graph, deps, n, p->free.dptr);
    case cudaGraphNodeTypeExtSemaphoreSignal:
    case cudaGraphNodeTypeExtSemaphoreWait:
      return refused_node("an external semaphore node (never in a VM)");
    default:
      return record(cudaErrorInvalidValue);
  }
}

namespace {
// cudaGraphNodeSetParams (exec 0) and cudaGraphExecNodeSetParams: the kind's own setter.
cudaError_t set_generic(cudaGraphExec_t exec, cudaGraphNode_t node, cudaGraphNodeParams* p) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!p) return record(cudaErrorInvalidValue);
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      const cudaKernelNodeParams k{p->kernel.func, p->kernel.gridDim, p->kernel.blockDim, p->kernel.sharedMemBytes,
                                   p->kernel.kernelParams, p->kernel.extra};
      return exec ? cudaGraphExecKernelNodeSetParams(exec, node, &k) : cudaGraphKernelNodeSetParams(node, &k);
    }
    case cudaGraphNodeTypeMemcpy:
      if (p->memcpy.flags) return record(cudaErrorInvalidValue);
      return exec ? cudaGraphExecMemcpyNodeSetParams(exec, node, &p->memcpy.copyParams)
                  : cudaGraphMemcpyNodeSetParams(node, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
      const cudaMemsetParams m{p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                               p->memset.width, p->memset.height};
      return exec ? cudaGraphExecMemsetNodeSetParams(exec, node, &m) : cudaGraphMemsetNodeSetParams(node, &m);
    }
    case cudaGraphNodeTypeHost: {
      const cudaHostNodeParams h{p->host.fn, p->host.userData};
      return exec ? cudaGraphExecHostNodeSetParams(exec, node, &h) : cudaGraphHostNodeSetParams(node, &h);
    }
    case cudaGraphNodeTypeGraph:
      if (!exec) return refused_node("cudaGraphNodeSetParams of a child graph node");
      return cudaGraphExecChildGraphNodeSetParams(exec, node, p->graph.graph);
    case cudaGraphNodeTypeWaitEvent:
      return exec ? cudaGraphExecEventWaitNodeSetEvent(exec, node, p->eventWait.event)
                  : cudaGraphEventWaitNodeSetEvent(node, p->eventWait.event);
    case cudaGraphNodeTypeEventRecord:
      return exec ? cudaGraphExecEventRecordNodeSetEvent(exec, node, p->eventRecord.event)
                  : cudaGraphEventRecordNodeSetEvent(node, p->eventRecord.event);
    default:
      return refused_node("changing the parameters of this node type");
  }
}
}  // namespace

cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node, cudaGraphNodeParams* nodeParams) {
  return set_generic(nullptr, node, nodeParams);
}
cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t graphExec, cudaGraphNode_t node, cudaGraphNodeParams* nodeParams) {
  if (!graphExec) return record(cudaErrorInvalidValue);
  return set_generic(graphExec, node, nodeParams);
}

// ---- streams
namespace {
cudaError_t stream_id(cudaStream_t stream, unsigned long long* id, bool per_thread) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!id) return record(cudaErrorInvalidValue);
  uint64_t s;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &s)) return record(se);
  auto lock = r->lock();
  const auto res = r->call<api::Call::StreamGetId>({s});
  if (res.status) return record(static_cast<cudaError_t>(res.status));
  *id = res.reply.id;
  return cudaSuccess;
}
}  // namespace
cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long* streamId) {
  return stream_id(hStream, streamId, false);
}
cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long* streamId) {
  return stream_id(hStream, streamId, true);
}
