// driver API: stream capture and graphs (cuda.h's cuStream*Capture*, cuGraph*), on the
// runtime's graph area (graph.cc: calls.def 0x1700). A CUgraph, CUgraphNode and
// CUgraphExec are the runtime's cudaGraph_t, cudaGraphNode_t and cudaGraphExec_t, as a
// CUstream is a cudaStream_t, so NVIDIA's own runtime (which frameworks load) and vmcuda's
// share them. The enums (capture mode and status, node types, update results) have the same
// values in both APIs. Kernel and memcpy nodes built through the driver API
// (CUDA_KERNEL_NODE_PARAMS names a CUfunction; CUDA_MEMCPY3D a context) are not offered
// yet: their stubs return CUDA_ERROR_NOT_SUPPORTED and say so once; captured launches and
// copies are.
#include <cstddef>

#include "driver_state.h"
#include "vmcuda/cudart_api.h"

#define CU_API extern "C" __attribute__((visibility("default")))

using namespace vmcuda::guest;

namespace {

cudaStream_t rt(CUstream s) { return reinterpret_cast<cudaStream_t>(s); }

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
