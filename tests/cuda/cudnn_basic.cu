// cuDNN through vmcuda's libcudnn.so.9 (issue 12 point 3): the handle and its stream, versions,
// error strings, arguments the library refuses, and the backend (graph) API as PyTorch's cuDNN
// frontend drives it for a convolution: tensor, convolution and operation descriptors, an
// operation graph Y = conv(X, W) (NCHW fp32, X 1x2x5x5, W 3x2x3x3, padding 1, stride 1), engine
// heuristics (mode A) whose configurations are descriptors the program made (filled by the
// library), the first configuration whose execution plan finalizes, its workspace, a variant pack
// made for each execution and cudnnBackendExecute on the handle's stream, checked against a CPU
// convolution. Then the legacy API's batch normalization (forward training, backward, inference)
// on legacy tensor descriptors, as PyTorch's BatchNorm2d calls it. Inputs are small integers (exact in fp32 and TF32 alike), so the sums are exact:
// the same natively, through vmcuda and on the test executor. No pointwise-only graph: NVIDIA's
// cuDNN 9 has no engine for one (it finalizes no plan), and a fused conv+bias+relu needs runtime
// compilation whose availability differs between machines. Built with nvcc -cudart shared
// -lcudnn (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "library_check.h"

#define DNN(call) CHECK_STATUS(call, cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

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

// A CPU cross-correlation (what cuDNN's CUDNN_CROSS_CORRELATION computes), NCHW, padding `pad`.
std::vector<float> cpu_conv(const std::vector<float>& x, const std::vector<float>& w, int c, int h, int wd, int k,
                            int r, int s, int pad) {
  std::vector<float> y(size_t(k) * h * wd, 0.0f);
  for (int ko = 0; ko < k; ++ko)
    for (int i = 0; i < h; ++i)
      for (int j = 0; j < wd; ++j) {
        float sum = 0.0f;
        for (int ci = 0; ci < c; ++ci)
          for (int u = 0; u < r; ++u)
            for (int v = 0; v < s; ++v) {
              const int ii = i + u - pad, jj = j + v - pad;
              if (ii >= 0 && ii < h && jj >= 0 && jj < wd)
                sum += x[(size_t(ci) * h + ii) * wd + jj] * w[((size_t(ko) * c + ci) * r + u) * s + v];
            }
        y[(size_t(ko) * h + i) * wd + j] = sum;
      }
  return y;
}

float* device_copy(const std::vector<float>& v) {
  float* d;
  CUDA(cudaMalloc(&d, v.size() * sizeof(float)));
  CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}
std::vector<float> host_copy(const float* d, size_t n) {
  std::vector<float> v(n);
  CUDA(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
bool near(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) < 1e-4f)) return false;
  return a.size() == b.size();
}

// The legacy API's batch normalization as PyTorch calls it (cudnn_ops.h): tensor descriptors set
// with cudnnSetTensorNdDescriptor, the derived per-channel descriptor, forward training and
// backward in their Ex forms with their workspace and reserve sizes, and inference. x 2x2x1x4
// (spatial mode: 8 values per channel, its mean plus or minus 2, so the statistics are exact).
bool batch_norm(cudnnHandle_t handle, cudaStream_t stream) {
  const int N = 2, C = 2, W = 4, M = N * W;
  const int dims[4] = {N, C, 1, W}, strides[4] = {C * W, W, W, 1};
  cudnnTensorDescriptor_t xd, pd;
  DNN(cudnnCreateTensorDescriptor(&xd));
  DNN(cudnnSetTensorNdDescriptor(xd, CUDNN_DATA_FLOAT, 4, dims, strides));
  cudnnDataType_t dt;
  int nb = 0, got_dims[8] = {}, got_strides[8] = {};
  DNN(cudnnGetTensorNdDescriptor(xd, 8, &dt, &nb, got_dims, got_strides));
  std::printf("legacy tensor descriptor: %s, %d dimensions %d %d %d %d, strides %d %d %d %d\n",
              dt == CUDNN_DATA_FLOAT ? "float" : "OTHER", nb, got_dims[0], got_dims[1], got_dims[2], got_dims[3],
              got_strides[0], got_strides[1], got_strides[2], got_strides[3]);
  DNN(cudnnCreateTensorDescriptor(&pd));
  DNN(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL));
  DNN(cudnnGetTensorNdDescriptor(pd, 8, &dt, &nb, got_dims, got_strides));
  std::printf("derived descriptor: %d dimensions %d %d %d %d\n", nb, got_dims[0], got_dims[1], got_dims[2], got_dims[3]);

  const float mean[2] = {1.0f, -3.0f}, scale[2] = {1.5f, -0.5f}, bias[2] = {0.25f, 2.0f};
  std::vector<float> hx(N * C * W), hdy(N * C * W), sgn(N * C * W);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int w = 0; w < W; ++w) {
        const int i = (n * C + c) * W + w;
        sgn[i] = (n * W + w) % 2 ? 1.0f : -1.0f;
        hx[i] = mean[c] + 2.0f * sgn[i];
        hdy[i] = float(((n * W + w) * 3 + c) % 5) - 2.0f;
      }
  float *x = device_copy(hx), *y = device_copy(std::vector<float>(hx.size(), 0.0f)),
        *sc = device_copy({scale[0], scale[1]}), *bi = device_copy({bias[0], bias[1]}),
        *rmean = device_copy({0, 0}), *rvar = device_copy({1, 1}), *smean = device_copy({0, 0}),
        *sinv = device_copy({0, 0}), *dy = device_copy(hdy), *dx = device_copy(std::vector<float>(hx.size(), 0.0f)),
        *dsc = device_copy({0, 0}), *dbi = device_copy({0, 0});
  size_t ws = 0, bws = 0, reserve = 0;
  DNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN,
                                                               xd, nullptr, xd, pd, nullptr, &ws));
  DNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, xd,
                                                        nullptr, xd, nullptr, xd, pd, nullptr, &bws));
  DNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN,
                                                           nullptr, xd, &reserve));
  void *workspace = nullptr, *reserved = nullptr;
  if (std::max(ws, bws)) CUDA(cudaMalloc(&workspace, std::max(ws, bws)));
  if (reserve) CUDA(cudaMalloc(&reserved, reserve));
  const float one = 1.0f, zero = 0.0f;
  DNN(cudnnBatchNormalizationForwardTrainingEx(handle, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, &one, &zero,
                                               xd, x, nullptr, nullptr, xd, y, pd, sc, bi, 1.0, rmean, rvar, 0.0, smean,
                                               sinv, nullptr, workspace, ws, reserved, reserve));
  DNN(cudnnBatchNormalizationBackwardEx(handle, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one,
                                        &zero, xd, x, nullptr, nullptr, xd, dy, nullptr, nullptr, xd, dx, pd, sc, bi,
                                        dsc, dbi, 0.0, smean, sinv, nullptr, workspace, bws, reserved, reserve));
  CUDA(cudaStreamSynchronize(stream));

  // The CPU's: y = scale * (x - mean) / 2 + bias; the running variance is the unbiased one.
  std::vector<float> ry(hx.size()), rdx(hx.size());
  float rdsc[2] = {0, 0}, rdbi[2] = {0, 0};
  for (size_t i = 0; i < hx.size(); ++i) {
    const int c = int(i / W) % C;
    ry[i] = scale[c] * sgn[i] + bias[c];
    rdbi[c] += hdy[i];
    rdsc[c] += hdy[i] * sgn[i];
  }
  for (size_t i = 0; i < hx.size(); ++i) {
    const int c = int(i / W) % C;
    rdx[i] = scale[c] * 0.5f / float(M) * (float(M) * hdy[i] - rdbi[c] - sgn[i] * rdsc[c]);
  }
  const std::vector<float> gy = host_copy(y, hx.size()), gdx = host_copy(dx, hx.size()), gsm = host_copy(smean, 2),
                           gsi = host_copy(sinv, 2), grm = host_copy(rmean, 2), grv = host_copy(rvar, 2),
                           gdsc = host_copy(dsc, 2), gdbi = host_copy(dbi, 2);
  const float unbiased = 4.0f * float(M) / float(M - 1);
  const bool fwd_ok = near(gy, ry) && near(gsm, {mean[0], mean[1]}) && near(gsi, {0.5f, 0.5f}) &&
                      near(grm, {mean[0], mean[1]}) && near(grv, {unbiased, unbiased});
  const bool bwd_ok = near(gdx, rdx) && near(gdsc, {rdsc[0], rdsc[1]}) && near(gdbi, {rdbi[0], rdbi[1]});
  std::printf("batch norm forward training: %s (saved mean %.3f %.3f, inverse deviation %.3f %.3f, running variance "
              "%.3f %.3f)\n", fwd_ok ? "matches the CPU" : "WRONG", gsm[0], gsm[1], gsi[0], gsi[1], grv[0], grv[1]);
  std::printf("batch norm backward: %s (scale gradient %.3f %.3f, bias gradient %.3f %.3f)\n",
              bwd_ok ? "matches the CPU" : "WRONG", gdsc[0], gdsc[1], gdbi[0], gdbi[1]);

  // Inference with the running statistics: (x - mean) / sqrt(unbiased variance).
  DNN(cudnnBatchNormalizationForwardInference(handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x, xd, y, pd, sc, bi,
                                              rmean, rvar, 0.0));
  CUDA(cudaStreamSynchronize(stream));
  const std::vector<float> gi = host_copy(y, hx.size());
  std::vector<float> ri(hx.size());
  for (size_t i = 0; i < hx.size(); ++i) {
    const int c = int(i / W) % C;
    ri[i] = scale[c] * 2.0f * sgn[i] / std::sqrt(unbiased) + bias[c];
  }
  const bool inf_ok = near(gi, ri);
  std::printf("batch norm inference: %s\n", inf_ok ? "matches the CPU" : "WRONG");

  for (float* p : {x, y, sc, bi, rmean, rvar, smean, sinv, dy, dx, dsc, dbi}) CUDA(cudaFree(p));
  if (workspace) CUDA(cudaFree(workspace));
  if (reserved) CUDA(cudaFree(reserved));
  DNN(cudnnDestroyTensorDescriptor(pd));
  DNN(cudnnDestroyTensorDescriptor(xd));
  return fwd_ok && bwd_ok && inf_ok;
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

  // Y = conv(X, W): X 1x2x5x5, W 3x2x3x3, padding 1, stride 1, Y 1x3x5x5.
  const int C = 2, H = 5, Wd = 5, K = 3, R = 3, S = 3;
  const int64_t kX = 1, kW = 2, kY = 3;
  cudnnBackendDescriptor_t x = tensor(kX, {1, C, H, Wd}, false), w = tensor(kW, {K, C, R, S}, false),
                           y = tensor(kY, {1, K, H, Wd}, false);
  int64_t count = 0, dims[8] = {};
  DNN(cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 8, &count, dims));
  std::printf("tensor X: %lld dimensions %lld %lld %lld %lld\n", (long long)count, (long long)dims[0],
              (long long)dims[1], (long long)dims[2], (long long)dims[3]);

  cudnnBackendDescriptor_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  {
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t spatial = 2, ones[2] = {1, 1}, pads[2] = {1, 1};
    set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
    set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones);
    set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, ones);
    set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    DNN(cudnnBackendFinalize(conv));
  }
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  {
    float alpha = 1.0f, beta = 0.0f;
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    DNN(cudnnBackendFinalize(op));
  }
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  DNN(cudnnBackendFinalize(graph));

  // Heuristics (mode A): the configurations come back into descriptors the program made; the
  // first whose plan finalizes runs the graph. How many there are differs between libraries and
  // GPUs: not printed.
  cudnnBackendDescriptor_t plan = nullptr;
  {
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    DNN(cudnnBackendFinalize(heur));
    int64_t n = 0;
    DNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
    std::printf("heuristics: %s\n", n > 0 ? "engine configurations offered" : "NONE");
    std::vector<cudnnBackendDescriptor_t> cfgs(size_t(n > 16 ? 16 : n));
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
  }
  if (!plan) {
    std::printf("no engine configuration finalized a plan for conv(X, W)\n");
    return 1;
  }
  std::printf("plan: finalized\n");
  int64_t workspace_bytes = -1;
  DNN(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                               &workspace_bytes));
  std::printf("plan: workspace size %s\n", workspace_bytes >= 0 ? "known" : "MISSING");

  const size_t nx = size_t(C) * H * Wd, nw = size_t(K) * C * R * S, ny = size_t(K) * H * Wd;
  std::vector<float> hx(nx), hw(nw), hy(ny);
  for (size_t i = 0; i < nw; ++i) hw[i] = float(int(i % 5) - 2);
  float *dx, *dw, *dy;
  void* workspace = nullptr;
  CUDA(cudaMalloc(&dx, nx * sizeof(float)));
  CUDA(cudaMalloc(&dw, nw * sizeof(float)));
  CUDA(cudaMalloc(&dy, ny * sizeof(float)));
  if (workspace_bytes > 0) CUDA(cudaMalloc(&workspace, size_t(workspace_bytes)));
  CUDA(cudaMemcpy(dw, hw.data(), nw * sizeof(float), cudaMemcpyHostToDevice));

  // Two executions with different inputs; the variant pack is made for each, as PyTorch does.
  bool all_ok = true;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < nx; ++i) hx[i] = float(int((i * (round + 3)) % 7) - 3);
    CUDA(cudaMemcpyAsync(dx, hx.data(), nx * sizeof(float), cudaMemcpyHostToDevice, stream));
    CUDA(cudaMemsetAsync(dy, 0xff, ny * sizeof(float), stream));  // NaNs: an unwritten output shows
    cudnnBackendDescriptor_t pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    int64_t uids[3] = {kX, kW, kY};
    void* ptrs[3] = {dx, dw, dy};
    set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    DNN(cudnnBackendFinalize(pack));
    DNN(cudnnBackendExecute(handle, plan, pack));
    DNN(cudnnBackendDestroyDescriptor(pack));
    CUDA(cudaMemcpyAsync(hy.data(), dy, ny * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA(cudaStreamSynchronize(stream));
    const std::vector<float> ref = cpu_conv(hx, hw, C, H, Wd, K, R, S, 1);
    double err = 0.0, sum = 0.0;
    for (size_t i = 0; i < ny; ++i) {
      const double d = std::fabs(double(hy[i]) - double(ref[i]));
      err = d > err || d != d ? d : err;  // a NaN (unwritten) counts as an error
      // Each value to 1e-3 first: an engine whose transform rounds (Winograd, FFT) is off by
      // some 1e-6, and the checksum must not depend on which engine the heuristics picked.
      sum += std::nearbyint(double(hy[i]) * 1000.0) / 1000.0 * double((i % 11) + 1);
    }
    const bool ok = err < 1e-4;
    all_ok = all_ok && ok;
    std::printf("round %d: conv forward executed, max abs error vs the CPU < 1e-4: %s, checksum %.3f\n", round,
                ok ? "ok" : "WRONG", sum);
  }

  for (auto d : {graph, plan, op, conv, x, w, y}) DNN(cudnnBackendDestroyDescriptor(d));
  all_ok = batch_norm(handle, stream) && all_ok;
  DNN(cudnnDestroy(handle));
  CUDA(cudaFree(dx));
  CUDA(cudaFree(dw));
  CUDA(cudaFree(dy));
  if (workspace) CUDA(cudaFree(workspace));
  CUDA(cudaStreamDestroy(stream));
  std::printf("done\n");
  return all_ok ? 0 : 1;
}
