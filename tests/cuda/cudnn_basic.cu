// cuDNN through vmcuda's libcudnn.so.9 (issue 12 point 3): the handle and its stream, versions,
// error strings, and the backend (graph) API as PyTorch's cuDNN frontend drives it: tensor,
// pointwise and operation descriptors, an operation graph Y = relu(X + B) (B broadcast per
// channel, the sum a virtual tensor), engine heuristics whose configurations are descriptors the
// program made (filled by the library), an execution plan, its workspace, a variant pack and
// cudnnBackendExecute on the handle's stream. Inputs are small integers, so every output is
// exact: the same natively, through vmcuda and on the test executor. Built with nvcc -cudart
// shared -lcudnn (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA(call)                                                 \
  do {                                                             \
    cudaError_t e_ = (call);                                       \
    if (e_ != cudaSuccess) {                                       \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(e_)); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)
#define DNN(call)                                                     \
  do {                                                                \
    cudnnStatus_t s_ = (call);                                        \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                 \
      std::printf("%s failed: %s\n", #call, cudnnGetErrorString(s_)); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

namespace {

cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  DNN(cudnnBackendCreateDescriptor(type, &d));
  return d;
}

void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
         const void* v) {
  DNN(cudnnBackendSetAttribute(d, name, type, n, v));
}

// A packed NCHW fp32 tensor of `dims`, unique id `uid`.
cudnnBackendDescriptor_t tensor(int64_t uid, std::vector<int64_t> dims, bool is_virtual) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i];
  }
  cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  cudnnDataType_t dt = CUDNN_DATA_FLOAT;
  int64_t align = 16;
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, int64_t(dims.size()), dims.data());
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, int64_t(strides.size()), strides.data());
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  bool v = is_virtual;
  set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  DNN(cudnnBackendFinalize(t));
  return t;
}

// The operation, and in *pw its pointwise descriptor (destroyed after the graph).
cudnnBackendDescriptor_t pointwise_op(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                                      cudnnBackendDescriptor_t* pw_out) {
  cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  DNN(cudnnBackendFinalize(pw));
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  DNN(cudnnBackendFinalize(op));
  *pw_out = pw;
  return op;
}

}  // namespace

int main() {
  int major = 0;
  DNN(cudnnGetProperty(MAJOR_VERSION, &major));
  std::printf("cuDNN major version %d (cudnnGetVersion / 10000 = %zu)\n", major, cudnnGetVersion() / 10000);
  std::printf("status names: %s %s %s\n", cudnnGetErrorString(CUDNN_STATUS_SUCCESS),
              cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED));

  // The library's own answers to arguments it refuses (as NVIDIA's cuDNN 9 gives them).
  {
    int64_t one = 1;
    cudaStream_t none;
    int v;
    std::printf("refused: create %s, destroy NULL %s, set stream %s, get stream %s, property %s\n",
                cudnnGetErrorString(cudnnCreate(nullptr)), cudnnGetErrorString(cudnnDestroy(nullptr)),
                cudnnGetErrorString(cudnnSetStream(nullptr, nullptr)), cudnnGetErrorString(cudnnGetStream(nullptr, &none)),
                cudnnGetErrorString(cudnnGetProperty(PATCH_LEVEL, nullptr)));
    std::printf("refused: set on NULL %s, finalize NULL %s, destroy NULL %s, get property 3 %s\n",
                cudnnGetErrorString(cudnnBackendSetAttribute(nullptr, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &one)),
                cudnnGetErrorString(cudnnBackendFinalize(nullptr)), cudnnGetErrorString(cudnnBackendDestroyDescriptor(nullptr)),
                cudnnGetErrorString(cudnnGetProperty(libraryPropertyType(3), &v)));
    cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    std::printf("refused: no elements %s, a negative count %s\n",
                cudnnGetErrorString(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, nullptr)),
                cudnnGetErrorString(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, -1, &one)));
    DNN(cudnnBackendDestroyDescriptor(d));
  }

  cudnnHandle_t handle;
  DNN(cudnnCreate(&handle));
  cudaStream_t stream, got = nullptr;
  CUDA(cudaStreamCreate(&stream));
  DNN(cudnnSetStream(handle, stream));
  DNN(cudnnGetStream(handle, &got));
  std::printf("handle: stream %s\n", got == stream ? "kept" : "LOST");

  // Y = relu(X + B): X 1x2x3x4, B 1x2x1x1 (a bias per channel).
  const int64_t kX = 1, kB = 2, kT = 3, kY = 4;
  cudnnBackendDescriptor_t x = tensor(kX, {1, 2, 3, 4}, false), b = tensor(kB, {1, 2, 1, 1}, false),
                           t = tensor(kT, {1, 2, 3, 4}, true), y = tensor(kY, {1, 2, 3, 4}, false);
  int64_t count = 0, dims[8] = {};
  DNN(cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 8, &count, dims));
  std::printf("tensor X: %lld dimensions %lld %lld %lld %lld\n", (long long)count, (long long)dims[0],
              (long long)dims[1], (long long)dims[2], (long long)dims[3]);
  cudnnBackendDescriptor_t pws[2];
  cudnnBackendDescriptor_t ops[2] = {pointwise_op(CUDNN_POINTWISE_ADD, x, b, t, &pws[0]),
                                     pointwise_op(CUDNN_POINTWISE_RELU_FWD, t, nullptr, y, &pws[1])};
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, ops);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  DNN(cudnnBackendFinalize(graph));

  // Heuristics: the configurations come back into descriptors the program made; the first whose
  // plan finalizes runs the graph (mode A, then the fallback list).
  cudnnBackendDescriptor_t plan = nullptr;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) {
      cudnnBackendDestroyDescriptor(heur);
      continue;
    }
    int64_t n = 0;
    DNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
    std::vector<cudnnBackendDescriptor_t> cfgs(size_t(n > 8 ? 8 : n));
    for (auto& c : cfgs) c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t filled = 0;
    if (!cfgs.empty())
      DNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                   int64_t(cfgs.size()), &filled, cfgs.data()));
    for (int64_t i = 0; i < filled && i < int64_t(cfgs.size()) && !plan; ++i) {
      cudnnBackendDescriptor_t p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      set(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
      if (cudnnBackendFinalize(p) == CUDNN_STATUS_SUCCESS) plan = p;
      else cudnnBackendDestroyDescriptor(p);
    }
    for (auto c : cfgs) DNN(cudnnBackendDestroyDescriptor(c));
    DNN(cudnnBackendDestroyDescriptor(heur));
    if (plan) break;
  }
  if (!plan) {
    std::printf("no engine configuration finalized a plan for relu(X + B)\n");
    return 1;
  }
  std::printf("plan: finalized\n");
  int64_t workspace_bytes = -1;
  DNN(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                               &workspace_bytes));
  std::printf("plan: workspace size %s\n", workspace_bytes >= 0 ? "known" : "MISSING");

  std::vector<float> hx(24), hb = {-3.0f, 2.0f}, hy(24, -1.0f);
  for (int i = 0; i < 24; ++i) hx[i] = float(i % 7) - 2.0f;
  float *dx, *db, *dy;
  void* workspace = nullptr;
  CUDA(cudaMalloc(&dx, 24 * sizeof(float)));
  CUDA(cudaMalloc(&db, 2 * sizeof(float)));
  CUDA(cudaMalloc(&dy, 24 * sizeof(float)));
  if (workspace_bytes > 0) CUDA(cudaMalloc(&workspace, size_t(workspace_bytes)));
  CUDA(cudaMemcpy(dx, hx.data(), 24 * sizeof(float), cudaMemcpyHostToDevice));
  CUDA(cudaMemcpy(db, hb.data(), 2 * sizeof(float), cudaMemcpyHostToDevice));
  CUDA(cudaMemset(dy, 0xff, 24 * sizeof(float)));

  // The variant pack is made for each execution, as PyTorch does.
  for (int round = 0; round < 2; ++round) {
    cudnnBackendDescriptor_t pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    int64_t uids[3] = {kX, kB, kY};
    void* ptrs[3] = {dx, db, dy};
    set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    DNN(cudnnBackendFinalize(pack));
    DNN(cudnnBackendExecute(handle, plan, pack));
    DNN(cudnnBackendDestroyDescriptor(pack));
    if (round == 0) hb = {1.0f, -1.0f};
    CUDA(cudaMemcpyAsync(db, hb.data(), 2 * sizeof(float), cudaMemcpyHostToDevice, stream));
    CUDA(cudaStreamSynchronize(stream));
    CUDA(cudaMemcpy(hy.data(), dy, 24 * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("round %d: Y =", round);
    for (float v : hy) std::printf(" %g", v);
    std::printf("\n");
  }

  for (auto op : ops) DNN(cudnnBackendDestroyDescriptor(op));
  for (auto pw : pws) DNN(cudnnBackendDestroyDescriptor(pw));
  for (auto d : {graph, plan, x, b, t, y}) DNN(cudnnBackendDestroyDescriptor(d));
  DNN(cudnnDestroy(handle));
  CUDA(cudaFree(dx));
  CUDA(cudaFree(db));
  CUDA(cudaFree(dy));
  if (workspace) CUDA(cudaFree(workspace));
  CUDA(cudaStreamDestroy(stream));
  std::printf("done\n");
  return 0;
}
