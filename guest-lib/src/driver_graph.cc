// driver API: stream capture and graphs (cuda.h's cuStream*Capture*, cuGraph*), on the
// runtime's graph area (graph.cc: calls.def 0x1700). A CUgraph, CUgraphNode and
// CUgraphExec are the runtime's cudaGraph_t, cudaGraphNode_t and cudaGraphExec_t, as a
// CUstream is a cudaStream_t, so NVIDIA's own runtime (which frameworks load) and vmcuda's
// share them. The enums (capture mode and status, node types, update results) have the same
// values in both APIs. Kernel, memcpy and memset nodes built through the driver API are
// translated: CUDA_KERNEL_NODE_PARAMS names a CUfunction or CUkernel (the runtime's graphs
// take driver objects as NVIDIA's do, graph_kernel_object), CUDA_MEMCPY3D is the driver's copy
// (driver_array.cc translates it, as for cuMemcpy3D), and their contexts must be the current
// one (the one whose memory and modules vmcuda knows on that thread).
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "driver_array.h"
#include "driver_state.h"
#include "graph.h"
#include "log.h"
#include "vmcuda/cudart_api.h"

#define CU_API extern "C" __attribute__((visibility("default")))

using namespace vmcuda::guest;

namespace {

cudaStream_t rt(CUstream s) { return reinterpret_cast<cudaStream_t>(s); }

// cuda.h's CUDA_KERNEL_NODE_PARAMS_v2 (and _v3, the same; _v1 is its first ten fields).
struct DriverKernelParams {
  CUfunction func;
  unsigned grid[3], block[3], shared_bytes;
  void** params;
  void** extra;
  CUkernel kern;  // used when func is NULL
  CUcontext ctx;  // ignored when func is set; NULL: the current context
};
static_assert(sizeof(DriverKernelParams) == 72 && offsetof(DriverKernelParams, extra) == 48);
constexpr size_t kKernelParamsV1Bytes = offsetof(DriverKernelParams, kern);
// cuda.h's CUDA_MEMCPY_NODE_PARAMS (cuGraphAddNode's memcpy).
struct DriverMemcpyNodeParams {
  int flags, reserved;
  CUcontext ctx;
  CUDA_MEMCPY3D_st copy;
};
static_assert(sizeof(DriverMemcpyNodeParams) == 216);
// cuda.h's CUDA_MEMSET_NODE_PARAMS_v2: the runtime's cudaMemsetParams and the node's context.
struct DriverMemsetParams {
  cudaMemsetParams params;
  CUcontext ctx;
};
static_assert(sizeof(DriverMemsetParams) == 48);

// A node's context: NULL or the current one (CUDA_ERROR_INVALID_CONTEXT otherwise).
CUresult check_context(CUcontext ctx) {
  CUcontext current = nullptr;
  if (CUresult e = vmcuda::guest::enter_context_call(&current)) return e;
  return ctx && ctx != current ? vmcuda::cu::kInvalidContext : vmcuda::cu::kSuccess;
}

// The driver's kernel node parameters as the runtime's (`bytes`: the struct version's size).
CUresult runtime_kernel(const DriverKernelParams* d, size_t bytes, cudaKernelNodeParams* k) {
  if (!d) return vmcuda::cu::kInvalidValue;
  DriverKernelParams p{};
  std::memcpy(&p, d, bytes);
  const void* func = p.func ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
  if (!func) return vmcuda::cu::kInvalidValue;
  if (!p.func)
    if (CUresult e = check_context(p.ctx)) return e;
  *k = cudaKernelNodeParams{const_cast<void*>(func), dim3(p.grid[0], p.grid[1], p.grid[2]),
                            dim3(p.block[0], p.block[1], p.block[2]), p.shared_bytes, p.params, p.extra};
  return vmcuda::cu::kSuccess;
}

// The memory types each driver-made memcpy node was given, for its getter (the runtime keeps
// pointers and a direction only). A node made by the runtime answers CU_MEMORYTYPE_UNIFIED.
std::mutex g_copy_types_mu;
std::map<cudaGraphNode_t, std::pair<int, int>>& copy_types() {
  static auto* m = new std::map<cudaGraphNode_t, std::pair<int, int>>;  // entry points may run at exit
  return *m;
}
void remember_copy_types(cudaGraphNode_t node, const CUDA_MEMCPY3D_st& c) {
  std::lock_guard l(g_copy_types_mu);
  copy_types()[node] = {c.srcMemoryType, c.dstMemoryType};
}

// CU_STREAM_CAPTURE_MODE_GLOBAL: what the first cuStreamBeginCapture (no mode argument) did.
constexpr auto kGlobalMode = cudaStreamCaptureModeGlobal;

}  // namespace

// ---- stream capture
CU_API CUresult cuStreamBeginCapture(CUstream s) { VMCUDA_DRIVER_IN_CONTEXT(cudaStreamBeginCapture(rt(s), kGlobalMode)); }
CU_API CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamBeginCapture_ptsz(rt(s), kGlobalMode));
}
CU_API CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamBeginCapture(rt(s), static_cast<cudaStreamCaptureMode>(mode)));
}
CU_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamBeginCapture_ptsz(rt(s), static_cast<cudaStreamCaptureMode>(mode)));
}
CU_API CUresult cuStreamEndCapture(CUstream s, cudaGraph_t* graph) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamEndCapture(rt(s), graph));
}
CU_API CUresult cuStreamEndCapture_ptsz(CUstream s, cudaGraph_t* graph) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamEndCapture_ptsz(rt(s), graph));
}
CU_API CUresult cuStreamIsCapturing(CUstream s, cudaStreamCaptureStatus* status) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamIsCapturing(rt(s), status));
}
CU_API CUresult cuStreamIsCapturing_ptsz(CUstream s, cudaStreamCaptureStatus* status) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamIsCapturing_ptsz(rt(s), status));
}
// v1: status and id; v2: and the graph and its dependencies; v3: and their edge data.
CU_API CUresult cuStreamGetCaptureInfo(CUstream s, cudaStreamCaptureStatus* status, unsigned long long* id) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetCaptureInfo(rt(s), status, id, nullptr, nullptr, nullptr, nullptr));
}
CU_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, cudaStreamCaptureStatus* status, unsigned long long* id) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetCaptureInfo_ptsz(rt(s), status, id, nullptr, nullptr, nullptr, nullptr));
}
CU_API CUresult cuStreamGetCaptureInfo_v2(CUstream s, cudaStreamCaptureStatus* status, unsigned long long* id,
                                          cudaGraph_t* graph, const cudaGraphNode_t** deps, size_t* num_deps) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetCaptureInfo(rt(s), status, id, graph, deps, nullptr, num_deps));
}
CU_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, cudaStreamCaptureStatus* status, unsigned long long* id,
                                               cudaGraph_t* graph, const cudaGraphNode_t** deps, size_t* num_deps) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetCaptureInfo_ptsz(rt(s), status, id, graph, deps, nullptr, num_deps));
}
CU_API CUresult cuStreamGetCaptureInfo_v3(CUstream s, cudaStreamCaptureStatus* status, unsigned long long* id,
                                          cudaGraph_t* graph, const cudaGraphNode_t** deps,
                                          const cudaGraphEdgeData** edges, size_t* num_deps) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetCaptureInfo(rt(s), status, id, graph, deps, edges, num_deps));
}
CU_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, cudaStreamCaptureStatus* status, unsigned long long* id,
                                               cudaGraph_t* graph, const cudaGraphNode_t** deps,
                                               const cudaGraphEdgeData** edges, size_t* num_deps) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetCaptureInfo_ptsz(rt(s), status, id, graph, deps, edges, num_deps));
}
// The capture's next dependencies (v2: with edge data), as the runtime's.
CU_API CUresult cuStreamUpdateCaptureDependencies(CUstream s, cudaGraphNode_t* deps, size_t count, unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamUpdateCaptureDependencies(rt(s), deps, nullptr, count, flags));
}
CU_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream s, cudaGraphNode_t* deps, size_t count,
                                                       unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamUpdateCaptureDependencies_ptsz(rt(s), deps, nullptr, count, flags));
}
CU_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream s, cudaGraphNode_t* deps,
                                                     const cudaGraphEdgeData* edges, size_t count, unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamUpdateCaptureDependencies(rt(s), deps, edges, count, flags));
}
CU_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, cudaGraphNode_t* deps,
                                                          const cudaGraphEdgeData* edges, size_t count,
                                                          unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamUpdateCaptureDependencies_ptsz(rt(s), deps, edges, count, flags));
}
// Needs no context, as natively (a thread's mode).
CU_API CUresult cuThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  KeepRuntimeLastError keep;
  return to_cu_result(cudaThreadExchangeStreamCaptureMode(mode));
}

// ---- graphs
CU_API CUresult cuGraphCreate(cudaGraph_t* graph, unsigned flags) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphCreate(graph, flags)); }
CU_API CUresult cuGraphDestroy(cudaGraph_t graph) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphDestroy(graph)); }
CU_API CUresult cuGraphClone(cudaGraph_t* clone, cudaGraph_t graph) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphClone(clone, graph)); }
CU_API CUresult cuGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphGetNodes(graph, nodes, count));
}
CU_API CUresult cuGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphGetRootNodes(graph, nodes, count));
}
CU_API CUresult cuGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeGetType(node, type));
}
CU_API CUresult cuGraphNodeFindInClone(cudaGraphNode_t* found, cudaGraphNode_t original, cudaGraph_t clone) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeFindInClone(found, original, clone));
}
CU_API CUresult cuGraphAddEmptyNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddEmptyNode(node, graph, deps, n));
}
CU_API CUresult cuGraphAddChildGraphNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                         size_t n, cudaGraph_t child) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddChildGraphNode(node, graph, deps, n, child));
}
CU_API CUresult cuGraphAddEventRecordNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                          size_t n, CUevent event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddEventRecordNode(node, graph, deps, n, reinterpret_cast<cudaEvent_t>(event)));
}
CU_API CUresult cuGraphAddEventWaitNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                        size_t n, CUevent event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddEventWaitNode(node, graph, deps, n, reinterpret_cast<cudaEvent_t>(event)));
}
// CUDA_HOST_NODE_PARAMS == cudaHostNodeParams; CUDA_MEMSET_NODE_PARAMS == cudaMemsetParams
// (a CUdeviceptr where the runtime has a pointer); the context is the current one's.
CU_API CUresult cuGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                                   const cudaHostNodeParams* params) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddHostNode(node, graph, deps, n, params));
}
CU_API CUresult cuGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                                     const cudaMemsetParams* params, CUcontext ctx) {
  CUcontext current = nullptr;
  if (CUresult e = enter_context_call(&current)) return e;
  if (ctx && ctx != current) return 201;  // CUDA_ERROR_INVALID_CONTEXT: only the current one's memory
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddMemsetNode(node, graph, deps, n, params));
}
CU_API CUresult cuGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                       size_t n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddDependencies(graph, from, to, nullptr, n));
}
CU_API CUresult cuGraphAddDependencies_v2(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                          const cudaGraphEdgeData* edges, size_t n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddDependencies(graph, from, to, edges, n));
}

// ---- executable graphs
CU_API CUresult cuGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphInstantiateWithFlags(exec, graph, flags));
}
CU_API CUresult cuGraphExecGetFlags(cudaGraphExec_t exec, unsigned long long* flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecGetFlags(exec, flags));
}
// CUDA_GRAPH_INSTANTIATE_PARAMS == cudaGraphInstantiateParams (layout, flags and results).
CU_API CUresult cuGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t graph, cudaGraphInstantiateParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphInstantiateWithParams(exec, graph, p));
}
CU_API CUresult cuGraphInstantiateWithParams_ptsz(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                  cudaGraphInstantiateParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphInstantiateWithParams_ptsz(exec, graph, p));
}
// CUgraphEdgeData == cudaGraphEdgeData, CUstreamCaptureMode == cudaStreamCaptureMode.
CU_API CUresult cuStreamBeginCaptureToGraph(CUstream s, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                            const cudaGraphEdgeData* edges, size_t count, int mode) {
  VMCUDA_DRIVER_IN_CONTEXT(
      cudaStreamBeginCaptureToGraph(rt(s), graph, deps, edges, count, static_cast<cudaStreamCaptureMode>(mode)));
}
CU_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                                 const cudaGraphEdgeData* edges, size_t count, int mode) {
  VMCUDA_DRIVER_IN_CONTEXT(
      cudaStreamBeginCaptureToGraph_ptsz(rt(s), graph, deps, edges, count, static_cast<cudaStreamCaptureMode>(mode)));
}
// The CUDA 10-11 form: (exec, graph, error node, log buffer, its size).
CU_API CUresult cuGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, cudaGraphNode_t* error_node, char* log,
                                   size_t log_bytes) {
  if (error_node) *error_node = nullptr;
  if (log && log_bytes) log[0] = '\0';
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphInstantiateWithFlags(exec, graph, 0));
}
CU_API CUresult cuGraphInstantiate_v2(cudaGraphExec_t* exec, cudaGraph_t graph, cudaGraphNode_t* error_node,
                                      char* log, size_t log_bytes) {
  return cuGraphInstantiate(exec, graph, error_node, log, log_bytes);
}
CU_API CUresult cuGraphLaunch(cudaGraphExec_t exec, CUstream s) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphLaunch(exec, rt(s))); }
CU_API CUresult cuGraphLaunch_ptsz(cudaGraphExec_t exec, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphLaunch_ptsz(exec, rt(s)));
}
CU_API CUresult cuGraphUpload(cudaGraphExec_t exec, CUstream s) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphUpload(exec, rt(s))); }
CU_API CUresult cuGraphUpload_ptsz(cudaGraphExec_t exec, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphUpload_ptsz(exec, rt(s)));
}
CU_API CUresult cuGraphExecDestroy(cudaGraphExec_t exec) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecDestroy(exec)); }
// CUgraphExecUpdateResultInfo == cudaGraphExecUpdateResultInfo.
CU_API CUresult cuGraphExecUpdate_v2(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecUpdate(exec, graph, info));
}

// ---- nodes after their creation (graph_nodes.cc), where the driver's parameters are the
// runtime's: memset (CUdeviceptr for a pointer), host, event and child graph nodes,
// relations, edges, enabling, kernel node attributes (CUlaunchAttributeValue ==
// cudaLaunchAttributeValue). Kernel and memcpy node parameters: below, translated.
CU_API CUresult cuGraphMemsetNodeGetParams(cudaGraphNode_t node, cudaMemsetParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphMemsetNodeGetParams(node, p));
}
CU_API CUresult cuGraphMemsetNodeSetParams(cudaGraphNode_t node, const cudaMemsetParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphMemsetNodeSetParams(node, p));
}
CU_API CUresult cuGraphExecMemsetNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, const cudaMemsetParams* p,
                                               CUcontext ctx) {
  CUcontext current = nullptr;
  if (CUresult e = enter_context_call(&current)) return e;
  if (ctx && ctx != current) return 201;  // CUDA_ERROR_INVALID_CONTEXT: only the current one's memory
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecMemsetNodeSetParams(exec, node, p));
}
CU_API CUresult cuGraphHostNodeGetParams(cudaGraphNode_t node, cudaHostNodeParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphHostNodeGetParams(node, p));
}
CU_API CUresult cuGraphHostNodeSetParams(cudaGraphNode_t node, const cudaHostNodeParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphHostNodeSetParams(node, p));
}
CU_API CUresult cuGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, const cudaHostNodeParams* p) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecHostNodeSetParams(exec, node, p));
}
CU_API CUresult cuGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphEventRecordNodeGetEvent(node, event));
}
CU_API CUresult cuGraphEventRecordNodeSetEvent(cudaGraphNode_t node, CUevent event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphEventRecordNodeSetEvent(node, reinterpret_cast<cudaEvent_t>(event)));
}
CU_API CUresult cuGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphEventWaitNodeGetEvent(node, event));
}
CU_API CUresult cuGraphEventWaitNodeSetEvent(cudaGraphNode_t node, CUevent event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphEventWaitNodeSetEvent(node, reinterpret_cast<cudaEvent_t>(event)));
}
CU_API CUresult cuGraphExecEventRecordNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node, CUevent event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecEventRecordNodeSetEvent(exec, node, reinterpret_cast<cudaEvent_t>(event)));
}
CU_API CUresult cuGraphExecEventWaitNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node, CUevent event) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecEventWaitNodeSetEvent(exec, node, reinterpret_cast<cudaEvent_t>(event)));
}
CU_API CUresult cuGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* graph) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphChildGraphNodeGetGraph(node, graph));
}
CU_API CUresult cuGraphExecChildGraphNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, cudaGraph_t child) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphExecChildGraphNodeSetParams(exec, node, child));
}
CU_API CUresult cuGraphKernelNodeGetAttribute(cudaGraphNode_t node, cudaLaunchAttributeID id,
                                              cudaLaunchAttributeValue* value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphKernelNodeGetAttribute(node, id, value));
}
CU_API CUresult cuGraphKernelNodeSetAttribute(cudaGraphNode_t node, cudaLaunchAttributeID id,
                                              const cudaLaunchAttributeValue* value) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphKernelNodeSetAttribute(node, id, value));
}
CU_API CUresult cuGraphKernelNodeCopyAttributes(cudaGraphNode_t dst, cudaGraphNode_t src) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphKernelNodeCopyAttributes(dst, src));
}
// v1 (CUDA 12.0's): no edge data.
CU_API CUresult cuGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps, size_t* n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeGetDependencies(node, deps, nullptr, n));
}
CU_API CUresult cuGraphNodeGetDependencies_v2(cudaGraphNode_t node, cudaGraphNode_t* deps, cudaGraphEdgeData* edges,
                                              size_t* n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeGetDependencies(node, deps, edges, n));
}
CU_API CUresult cuGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* deps, size_t* n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeGetDependentNodes(node, deps, nullptr, n));
}
CU_API CUresult cuGraphNodeGetDependentNodes_v2(cudaGraphNode_t node, cudaGraphNode_t* deps, cudaGraphEdgeData* edges,
                                                size_t* n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeGetDependentNodes(node, deps, edges, n));
}
CU_API CUresult cuGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to, size_t* n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphGetEdges(graph, from, to, nullptr, n));
}
CU_API CUresult cuGraphGetEdges_v2(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                                   cudaGraphEdgeData* edges, size_t* n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphGetEdges(graph, from, to, edges, n));
}
CU_API CUresult cuGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                          size_t n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphRemoveDependencies(graph, from, to, nullptr, n));
}
CU_API CUresult cuGraphRemoveDependencies_v2(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                             const cudaGraphEdgeData* edges, size_t n) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphRemoveDependencies(graph, from, to, edges, n));
}
CU_API CUresult cuGraphDestroyNode(cudaGraphNode_t node) { VMCUDA_DRIVER_IN_CONTEXT(cudaGraphDestroyNode(node)); }
CU_API CUresult cuGraphNodeGetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node, unsigned* enabled) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeGetEnabled(exec, node, enabled));
}
CU_API CUresult cuGraphNodeSetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node, unsigned enabled) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphNodeSetEnabled(exec, node, enabled));
}
CU_API CUresult cuGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned flags) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphDebugDotPrint(graph, path, flags));
}
CU_API CUresult cuStreamGetId(CUstream s, unsigned long long* id) { VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetId(rt(s), id)); }
CU_API CUresult cuStreamGetId_ptsz(CUstream s, unsigned long long* id) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaStreamGetId_ptsz(rt(s), id));
}

// ---- kernel and memcpy nodes of the driver API
CU_API CUresult cuGraphAddKernelNode_v2(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                        size_t n, const DriverKernelParams* params) {
  VMCUDA_ENTER(enter_context_call());
  cudaKernelNodeParams k;
  VMCUDA_ENTER(runtime_kernel(params, sizeof *params, &k));
  VMCUDA_DRIVER_RUNTIME(cudaGraphAddKernelNode(node, graph, deps, n, &k));
}
CU_API CUresult cuGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                                     const DriverKernelParams* params) {  // CUDA_KERNEL_NODE_PARAMS_v1
  VMCUDA_ENTER(enter_context_call());
  cudaKernelNodeParams k;
  VMCUDA_ENTER(runtime_kernel(params, kKernelParamsV1Bytes, &k));
  VMCUDA_DRIVER_RUNTIME(cudaGraphAddKernelNode(node, graph, deps, n, &k));
}
CU_API CUresult cuGraphKernelNodeSetParams_v2(cudaGraphNode_t node, const DriverKernelParams* params) {
  VMCUDA_ENTER(enter_context_call());
  cudaKernelNodeParams k;
  VMCUDA_ENTER(runtime_kernel(params, sizeof *params, &k));
  VMCUDA_DRIVER_RUNTIME(cudaGraphKernelNodeSetParams(node, &k));
}
CU_API CUresult cuGraphKernelNodeSetParams(cudaGraphNode_t node, const DriverKernelParams* params) {
  VMCUDA_ENTER(enter_context_call());
  cudaKernelNodeParams k;
  VMCUDA_ENTER(runtime_kernel(params, kKernelParamsV1Bytes, &k));
  VMCUDA_DRIVER_RUNTIME(cudaGraphKernelNodeSetParams(node, &k));
}
CU_API CUresult cuGraphExecKernelNodeSetParams_v2(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                  const DriverKernelParams* params) {
  VMCUDA_ENTER(enter_context_call());
  cudaKernelNodeParams k;
  VMCUDA_ENTER(runtime_kernel(params, sizeof *params, &k));
  VMCUDA_DRIVER_RUNTIME(cudaGraphExecKernelNodeSetParams(exec, node, &k));
}
CU_API CUresult cuGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                               const DriverKernelParams* params) {
  VMCUDA_ENTER(enter_context_call());
  cudaKernelNodeParams k;
  VMCUDA_ENTER(runtime_kernel(params, kKernelParamsV1Bytes, &k));
  VMCUDA_DRIVER_RUNTIME(cudaGraphExecKernelNodeSetParams(exec, node, &k));
}
namespace {
// The node's kernel parameters in the driver's terms (`bytes`: the caller's struct version).
// The kernel is a CUfunction (a registered <<<>>> kernel's node answers its host stub, which
// cuLaunchKernel and these calls accept as well); the parameter pointers stay valid until the
// node's next get, as the runtime's.
CUresult kernel_params(cudaGraphNode_t node, DriverKernelParams* out, size_t bytes) {
  CUcontext current = nullptr;
  VMCUDA_ENTER(enter_context_call(&current));
  if (!out) return vmcuda::cu::kInvalidValue;
  cudaKernelNodeParams k{};
  {
    KeepRuntimeLastError keep;
    VMCUDA_ENTER(to_cu_result(cudaGraphKernelNodeGetParams(node, &k)));
  }
  DriverKernelParams d{};
  d.func = static_cast<CUfunction>(k.func);
  d.grid[0] = k.gridDim.x, d.grid[1] = k.gridDim.y, d.grid[2] = k.gridDim.z;
  d.block[0] = k.blockDim.x, d.block[1] = k.blockDim.y, d.block[2] = k.blockDim.z;
  d.shared_bytes = k.sharedMemBytes;
  d.params = k.kernelParams;
  d.extra = k.extra;
  d.ctx = current;
  std::memcpy(out, &d, bytes);
  return vmcuda::cu::kSuccess;
}
}  // namespace
CU_API CUresult cuGraphKernelNodeGetParams_v2(cudaGraphNode_t node, DriverKernelParams* params) {
  return kernel_params(node, params, sizeof *params);
}
CU_API CUresult cuGraphKernelNodeGetParams(cudaGraphNode_t node, DriverKernelParams* params) {
  return kernel_params(node, params, kKernelParamsV1Bytes);
}

CU_API CUresult cuGraphAddMemcpyNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                                     const CUDA_MEMCPY3D_st* copy, CUcontext ctx) {
  VMCUDA_ENTER(check_context(ctx));
  cudaMemcpy3DParms p;
  VMCUDA_ENTER(runtime_copy(copy, &p));
  KeepRuntimeLastError keep;
  VMCUDA_ENTER(to_cu_result(cudaGraphAddMemcpyNode(node, graph, deps, n, &p)));
  remember_copy_types(*node, *copy);
  return vmcuda::cu::kSuccess;
}
CU_API CUresult cuGraphMemcpyNodeSetParams(cudaGraphNode_t node, const CUDA_MEMCPY3D_st* copy) {
  VMCUDA_ENTER(enter_context_call());
  cudaMemcpy3DParms p;
  VMCUDA_ENTER(runtime_copy(copy, &p));
  KeepRuntimeLastError keep;
  VMCUDA_ENTER(to_cu_result(cudaGraphMemcpyNodeSetParams(node, &p)));
  remember_copy_types(node, *copy);
  return vmcuda::cu::kSuccess;
}
CU_API CUresult cuGraphExecMemcpyNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                               const CUDA_MEMCPY3D_st* copy, CUcontext ctx) {
  VMCUDA_ENTER(check_context(ctx));
  cudaMemcpy3DParms p;
  VMCUDA_ENTER(runtime_copy(copy, &p));
  VMCUDA_DRIVER_RUNTIME(cudaGraphExecMemcpyNodeSetParams(exec, node, &p));
}
CU_API CUresult cuGraphMemcpyNodeGetParams(cudaGraphNode_t node, CUDA_MEMCPY3D_st* copy) {
  VMCUDA_ENTER(enter_context_call());
  if (!copy) return vmcuda::cu::kInvalidValue;
  cudaMemcpy3DParms p{};
  {
    KeepRuntimeLastError keep;
    VMCUDA_ENTER(to_cu_result(cudaGraphMemcpyNodeGetParams(node, &p)));
  }
  constexpr int kUnified = 4;  // CU_MEMORYTYPE_UNIFIED: any pointer
  std::pair<int, int> types{kUnified, kUnified};
  {
    std::lock_guard l(g_copy_types_mu);
    if (auto it = copy_types().find(node); it != copy_types().end()) types = it->second;
  }
  driver_copy(p, types.first, types.second, copy);
  return vmcuda::cu::kSuccess;
}

// Conditional nodes and cuGraphAddNode. CUgraphNodeParams has cudaGraphNodeParams' layout
// (type, then the kind's parameters at offset 16); where a kind's driver parameters differ from
// the runtime's (a kernel's CUfunction or CUkernel and context, a memcpy's CUDA_MEMCPY3D and
// context, a memset's context) they are translated. Conditional, empty, event, host and child
// graph nodes pass as they are (a conditional node's context: the current one).
CU_API CUresult cuGraphConditionalHandleCreate(cudaGraphConditionalHandle* handle, cudaGraph_t graph, CUcontext ctx,
                                               unsigned default_value, unsigned flags) {
  CUcontext current = nullptr;
  if (CUresult e = enter_context_call(&current)) return e;
  if (ctx && ctx != current) return vmcuda::cu::kInvalidContext;  // only the current one's graphs
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphConditionalHandleCreate(handle, graph, default_value, flags));
}
namespace {
// The driver's node parameters as the runtime's, in *out (for kernel, memcpy and memset nodes a
// translation; the other kinds are copied). *copy: the memcpy's driver form, else nullptr.
CUresult runtime_node_params(const cudaGraphNodeParams* params, cudaGraphNodeParams* out,
                             const CUDA_MEMCPY3D_st** copy) {
  CUcontext current = nullptr;
  if (CUresult e = enter_context_call(&current)) return e;
  if (!params) return vmcuda::cu::kInvalidValue;
  *copy = nullptr;
  std::memcpy(static_cast<void*>(out), params, sizeof *out);
  const std::byte* body = reinterpret_cast<const std::byte*>(params) + offsetof(cudaGraphNodeParams, kernel);
  switch (params->type) {
    case cudaGraphNodeTypeKernel: {
      DriverKernelParams d;
      std::memcpy(&d, body, sizeof d);
      cudaKernelNodeParams k;
      if (CUresult e = runtime_kernel(&d, sizeof d, &k)) return e;
      std::memset(static_cast<void*>(out->reserved1), 0, sizeof(out->reserved1));
      out->kernel = cudaKernelNodeParamsV2{k.func, k.gridDim, k.blockDim, k.sharedMemBytes, k.kernelParams, k.extra};
      return vmcuda::cu::kSuccess;
    }
    case cudaGraphNodeTypeMemcpy: {
      const auto* d = reinterpret_cast<const DriverMemcpyNodeParams*>(body);
      if (d->flags || d->reserved) return vmcuda::cu::kInvalidValue;  // "must be zero"
      if (d->ctx && d->ctx != current) return vmcuda::cu::kInvalidContext;
      std::memset(static_cast<void*>(out->reserved1), 0, sizeof(out->reserved1));
      if (CUresult e = runtime_copy(&d->copy, &out->memcpy.copyParams)) return e;
      *copy = &d->copy;
      return vmcuda::cu::kSuccess;
    }
    case cudaGraphNodeTypeMemset: {
      const auto* d = reinterpret_cast<const DriverMemsetParams*>(body);
      if (d->ctx && d->ctx != current) return vmcuda::cu::kInvalidContext;
      std::memset(static_cast<void*>(out->reserved1), 0, sizeof(out->reserved1));
      out->memset = cudaMemsetParamsV2{d->params.dst, d->params.pitch, d->params.value, d->params.elementSize,
                                       d->params.width, d->params.height};
      return vmcuda::cu::kSuccess;
    }
    case cudaGraphNodeTypeConditional: {
      // CUDA_CONDITIONAL_NODE_PARAMS: the runtime's fields, then the node's context.
      CUcontext ctx = nullptr;
      std::memcpy(&ctx, reinterpret_cast<const std::byte*>(&params->conditional) + sizeof(cudaConditionalNodeParams),
                  sizeof ctx);
      if (ctx && ctx != current) return vmcuda::cu::kInvalidContext;
      return vmcuda::cu::kSuccess;
    }
    case cudaGraphNodeTypeMemAlloc:  // CUDA_MEM_ALLOC_NODE_PARAMS_v2: the runtime's layout
    case cudaGraphNodeTypeMemFree:   // CUDA_MEM_FREE_NODE_PARAMS: a CUdeviceptr
    case cudaGraphNodeTypeEmpty:
    case cudaGraphNodeTypeWaitEvent:
    case cudaGraphNodeTypeEventRecord:
    case cudaGraphNodeTypeHost:
    case cudaGraphNodeTypeGraph:
      return vmcuda::cu::kSuccess;
    default: {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        VMCUDA_LOG(kWarn, "api", "cuGraphAddNode/cuGraphNodeSetParams of node type %d is not supported yet; it returns "
                                 "CUDA_ERROR_NOT_SUPPORTED (801): use the node type's own cuGraphAdd*Node",
                   static_cast<int>(params->type));
      return vmcuda::cu::kNotSupported;
    }
  }
}
// Room for one cudaGraphNodeParams (its union's members have constructors: no default one).
struct NodeParams {
  alignas(cudaGraphNodeParams) unsigned char bytes[sizeof(cudaGraphNodeParams)]{};
  cudaGraphNodeParams* get() { return reinterpret_cast<cudaGraphNodeParams*>(bytes); }
};
CUresult add_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, const cudaGraphEdgeData* edges,
                  size_t n, cudaGraphNodeParams* params) {
  NodeParams storage;
  cudaGraphNodeParams& p = *storage.get();
  const CUDA_MEMCPY3D_st* copy = nullptr;
  VMCUDA_ENTER(runtime_node_params(params, &p, &copy));
  KeepRuntimeLastError keep;
  VMCUDA_ENTER(to_cu_result(cudaGraphAddNode(node, graph, deps, edges, n, &p)));
  if (copy) remember_copy_types(*node, *copy);
  if (p.type == cudaGraphNodeTypeMemAlloc) params->alloc.dptr = p.alloc.dptr;  // out
  return vmcuda::cu::kSuccess;
}
CUresult set_node_params(cudaGraphExec_t exec, cudaGraphNode_t node, cudaGraphNodeParams* params) {
  NodeParams storage;
  cudaGraphNodeParams& p = *storage.get();
  const CUDA_MEMCPY3D_st* copy = nullptr;
  VMCUDA_ENTER(runtime_node_params(params, &p, &copy));
  KeepRuntimeLastError keep;
  VMCUDA_ENTER(to_cu_result(exec ? cudaGraphExecNodeSetParams(exec, node, &p) : cudaGraphNodeSetParams(node, &p)));
  if (copy && !exec) remember_copy_types(node, *copy);
  return vmcuda::cu::kSuccess;
}
}  // namespace
CU_API CUresult cuGraphAddNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                               cudaGraphNodeParams* params) {
  return add_node(node, graph, deps, nullptr, n, params);
}
CU_API CUresult cuGraphAddNode_v2(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                  const cudaGraphEdgeData* edges, size_t n, cudaGraphNodeParams* params) {
  return add_node(node, graph, deps, edges, n, params);
}
CU_API CUresult cuGraphNodeSetParams(cudaGraphNode_t node, cudaGraphNodeParams* params) {
  return set_node_params(nullptr, node, params);
}
CU_API CUresult cuGraphExecNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, cudaGraphNodeParams* params) {
  if (!exec) {
    VMCUDA_ENTER(enter_context_call());
    return vmcuda::cu::kInvalidValue;
  }
  return set_node_params(exec, node, params);
}

// ---- graph memory (graph_memory.cc): CUDA_MEM_ALLOC_NODE_PARAMS is the runtime's
// cudaMemAllocNodeParams (CUmemPoolProps, CUmemAccessDesc, a CUdeviceptr: the same layouts), a
// CUdevice is the runtime's device ordinal.
CU_API CUresult cuGraphAddMemAllocNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                                       cudaMemAllocNodeParams* params) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddMemAllocNode(node, graph, deps, n, params));
}
CU_API CUresult cuGraphAddMemFreeNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n,
                                      CUdeviceptr dptr) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphAddMemFreeNode(node, graph, deps, n, reinterpret_cast<void*>(dptr)));
}
CU_API CUresult cuGraphMemAllocNodeGetParams(cudaGraphNode_t node, cudaMemAllocNodeParams* params) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphMemAllocNodeGetParams(node, params));
}
CU_API CUresult cuGraphMemFreeNodeGetParams(cudaGraphNode_t node, CUdeviceptr* dptr) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaGraphMemFreeNodeGetParams(node, dptr));
}
CU_API CUresult cuDeviceGraphMemTrim(CUdevice device) { VMCUDA_DRIVER_CALL(cudaDeviceGraphMemTrim(device)); }
CU_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, cudaGraphMemAttributeType attr, void* value) {
  VMCUDA_DRIVER_CALL(cudaDeviceGetGraphMemAttribute(device, attr, value));
}
CU_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, cudaGraphMemAttributeType attr, void* value) {
  VMCUDA_DRIVER_CALL(cudaDeviceSetGraphMemAttribute(device, attr, value));
}

// ---- user objects (user_objects.cc): the runtime's objects and code, counted in this process;
// the destructor (a CUhostFn, as cudaHostFn_t) runs on the library's own thread once the last
// reference goes, an executable graph's after the work of its launches. Flags and their
// values are the runtime's (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, CU_GRAPH_USER_OBJECT_MOVE).
// They need no context, as the driver's do not.
namespace {
uint64_t user_handle(const void* p) { return reinterpret_cast<uint64_t>(p); }
}  // namespace
CU_API CUresult cuUserObjectCreate(cudaUserObject_t* object_out, void* ptr, cudaHostFn_t destroy, unsigned initial_refs,
                                   unsigned flags) {
  VMCUDA_ENTER(enter_driver_call());
  uint64_t h = 0;
  if (cudaError_t e = user_object_create(object_out ? &h : nullptr, ptr, destroy, initial_refs, flags))
    return to_cu_result(e);
  *object_out = reinterpret_cast<cudaUserObject_t>(h);
  return vmcuda::cu::kSuccess;
}
CU_API CUresult cuUserObjectRetain(cudaUserObject_t object, unsigned count) {
  VMCUDA_ENTER(enter_driver_call());
  return to_cu_result(user_object_retain(user_handle(object), count));
}
CU_API CUresult cuUserObjectRelease(cudaUserObject_t object, unsigned count) {
  VMCUDA_ENTER(enter_driver_call());
  return to_cu_result(user_object_release(user_handle(object), count));
}
CU_API CUresult cuGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned count, unsigned flags) {
  VMCUDA_ENTER(enter_driver_call());
  return to_cu_result(graph_retain_user_object(user_handle(graph), user_handle(object), count, flags));
}
CU_API CUresult cuGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned count) {
  VMCUDA_ENTER(enter_driver_call());
  return to_cu_result(graph_release_user_object(user_handle(graph), user_handle(object), count));
}
