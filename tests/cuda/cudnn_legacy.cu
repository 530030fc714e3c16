// cuDNN's legacy convolution path through vmcuda's libcudnn.so.9 (issue 12 point 3), as programs
// and PyTorch's fallbacks call it: filter and convolution descriptors (4-D and N-D, math type,
// group count), the output's shape, the algorithm searches (cudnnGet*_v7, cudnnFind*(Ex)) and
// workspace sizes, convolution forward (grouped, padded), backward data, filter and bias, the fused
// convolution + bias + ReLU, cudnnAddTensor, max and average pooling forward and backward, softmax
// forward and backward, and dropout with its states in the program's device memory. Each result is
// checked against a CPU reference and printed as ok/WRONG with a few values rounded, so the output
// is the same natively, through vmcuda and on the test executor (which computes in fp32 on the CPU).
// Inputs are small integers and the math type FMA (no TF32), so the convolutions are exact. Also
// run by tests/cuda/suspend_resume_test.sh, suspended at a random point: the descriptors, dropout
// states included, are carried. Built with nvcc -cudart shared -lcudnn (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "library_check.h"

#define DNN(call) CHECK_STATUS(call, cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

namespace {

bool all_ok = true;

void report(const char* what, bool ok, const char* extra = "") {
  all_ok = all_ok && ok;
  std::printf("%s: %s%s\n", what, ok ? "ok" : "WRONG", extra);
}

float* device_copy(const std::vector<float>& v) {
  float* d;
  CUDA(cudaMalloc(&d, v.size() * sizeof(float)));
  CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}
std::vector<float> host_copy(const float* d, size_t n) {
  std::vector<float> v(n);
  // The handle's stream is non-blocking: a copy on the default stream does not wait for it.
  CUDA(cudaDeviceSynchronize());
  CUDA(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
bool near(const std::vector<float>& a, const std::vector<float>& b, float tol = 1e-4f) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= tol * std::max(1.0f, std::fabs(b[i])))) return false;
  return true;
}
double checksum(const std::vector<float>& v) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += std::nearbyint(double(v[i]) * 1000.0) / 1000.0 * double((i % 7) + 1);
  return s;
}

cudnnTensorDescriptor_t tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t t;
  DNN(cudnnCreateTensorDescriptor(&t));
  DNN(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  return t;
}

// The geometry of a 2-D NCHW cross-correlation with groups (what cuDNN computes).
struct Geo {
  int N, C, H, W, K, R, S, pad, stride, groups, P, Q;
  size_t nx() const { return size_t(N) * C * H * W; }
  size_t nw() const { return size_t(K) * (C / groups) * R * S; }
  size_t ny() const { return size_t(N) * K * P * Q; }
  // Calls f(x index, w index, y index) for every term of the sum.
  template <class F>
  void each(F f) const {
    const int cg = C / groups, kg = K / groups;
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q)
            for (int c = 0; c < cg; ++c)
              for (int r = 0; r < R; ++r)
                for (int s = 0; s < S; ++s) {
                  const int h = p * stride - pad + r, w = q * stride - pad + s, ci = (k / kg) * cg + c;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  f(((size_t(n) * C + ci) * H + h) * W + w, ((size_t(k) * cg + c) * R + r) * S + s,
                    ((size_t(n) * K + k) * P + p) * Q + q);
                }
  }
};

// The algorithm a cudnnGet*_v7 search offers first that succeeded: the program's choice.
template <class Perf>
int first_ok(const Perf* perf, int n) {
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return int(perf[i].algo);
  return -1;
}

void convolutions(cudnnHandle_t handle) {
  // x 2x4x6x6, w 6x2x3x3 in 2 groups, padding 1, stride 1: y 2x6x6x6.
  Geo g{2, 4, 6, 6, 6, 3, 3, 1, 1, 2, 0, 0};
  cudnnTensorDescriptor_t xd = tensor(g.N, g.C, g.H, g.W);
  cudnnFilterDescriptor_t wd;
  DNN(cudnnCreateFilterDescriptor(&wd));
  const int wdims[4] = {g.K, g.C / g.groups, g.R, g.S};
  DNN(cudnnSetFilterNdDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wdims));
  cudnnDataType_t dt;
  cudnnTensorFormat_t fmt;
  int nb = 0, got[8] = {};
  DNN(cudnnGetFilterNdDescriptor(wd, 4, &dt, &fmt, &nb, got));
  std::printf("filter: %s %s, %d dimensions %d %d %d %d\n", dt == CUDNN_DATA_FLOAT ? "float" : "OTHER",
              fmt == CUDNN_TENSOR_NCHW ? "NCHW" : "OTHER", nb, got[0], got[1], got[2], got[3]);
  cudnnConvolutionDescriptor_t cd;
  DNN(cudnnCreateConvolutionDescriptor(&cd));
  DNN(cudnnSetConvolution2dDescriptor(cd, g.pad, g.pad, g.stride, g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT));
  DNN(cudnnSetConvolutionGroupCount(cd, g.groups));
  DNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  int groups = 0, len = 0, pad[8], stride[8], dil[8];
  cudnnMathType_t math;
  cudnnConvolutionMode_t mode;
  DNN(cudnnGetConvolutionGroupCount(cd, &groups));
  DNN(cudnnGetConvolutionMathType(cd, &math));
  DNN(cudnnGetConvolutionNdDescriptor(cd, 2, &len, pad, stride, dil, &mode, &dt));
  std::printf("convolution: %d groups, %s math, %d spatial dimensions, padding %d %d, strides %d %d, dilations %d %d, %s\n",
              groups, math == CUDNN_FMA_MATH ? "FMA" : "OTHER", len, pad[0], pad[1], stride[0], stride[1], dil[0],
              dil[1], mode == CUDNN_CROSS_CORRELATION ? "cross-correlation" : "OTHER");
  int n, c, h, w;
  DNN(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &h, &w));
  int ydims[4] = {};
  DNN(cudnnGetConvolutionNdForwardOutputDim(cd, xd, wd, 4, ydims));
  std::printf("output: %d %d %d %d (N-D: %d %d %d %d)\n", n, c, h, w, ydims[0], ydims[1], ydims[2], ydims[3]);
  g.P = h, g.Q = w;
  cudnnTensorDescriptor_t yd = tensor(n, c, h, w);

  std::vector<float> hx(g.nx()), hw(g.nw()), hdy(g.ny());
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = float(int((i * 7) % 9) - 4);
  for (size_t i = 0; i < hw.size(); ++i) hw[i] = float(int((i * 5) % 7) - 3);
  for (size_t i = 0; i < hdy.size(); ++i) hdy[i] = float(int((i * 3) % 5) - 2);
  float *x = device_copy(hx), *wt = device_copy(hw), *dy = device_copy(hdy);
  float *y = device_copy(std::vector<float>(g.ny(), 0.f)), *dx = device_copy(std::vector<float>(g.nx(), 0.f)),
        *dw = device_copy(std::vector<float>(g.nw(), 0.f));
  std::vector<float> ry(g.ny(), 0.f), rdx(g.nx(), 0.f), rdw(g.nw(), 0.f);
  g.each([&](size_t xi, size_t wi, size_t yi) {
    ry[yi] += hx[xi] * hw[wi];
    rdx[xi] += hdy[yi] * hw[wi];
    rdw[wi] += hdy[yi] * hx[xi];
  });

  // Forward: the searches, the workspace of the algorithm chosen, the convolution.
  int max = 0, returned = 0;
  DNN(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fperf(size_t(std::max(max, 1)));
  DNN(cudnnGetConvolutionForwardAlgorithm_v7(handle, xd, wd, cd, yd, max, &returned, fperf.data()));
  const int falgo = first_ok(fperf.data(), returned);
  report("forward algorithm search (v7)", max >= 1 && returned >= 1 && falgo >= 0);
  DNN(cudnnFindConvolutionForwardAlgorithm(handle, xd, wd, cd, yd, max, &returned, fperf.data()));
  report("forward algorithm search (find)", returned >= 1 && first_ok(fperf.data(), returned) >= 0);
  size_t ws_bytes = 0;
  DNN(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, cudnnConvolutionFwdAlgo_t(falgo), &ws_bytes));
  void* ws = nullptr;
  if (ws_bytes) CUDA(cudaMalloc(&ws, ws_bytes));
  DNN(cudnnFindConvolutionForwardAlgorithmEx(handle, xd, x, wd, wt, cd, yd, y, max, &returned, fperf.data(), ws,
                                              ws_bytes));
  report("forward algorithm search (find with buffers)", returned >= 1);
  const float one = 1, zero = 0;
  DNN(cudnnConvolutionForward(handle, &one, xd, x, wd, wt, cd, cudnnConvolutionFwdAlgo_t(falgo), ws, ws_bytes, &zero,
                              yd, y));
  std::vector<float> got_y = host_copy(y, g.ny());
  char buf[128];
  std::snprintf(buf, sizeof buf, ", checksum %.3f", checksum(got_y));
  report("convolution forward (2 groups, padding 1) matches the CPU", near(got_y, ry), buf);
  if (ws) CUDA(cudaFree(ws));

  // Backward data.
  DNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> dperf(size_t(std::max(max, 1)));
  DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, wd, yd, cd, xd, max, &returned, dperf.data()));
  const int dalgo = first_ok(dperf.data(), returned);
  report("backward data algorithm search (v7)", returned >= 1 && dalgo >= 0);
  DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, wd, yd, cd, xd, cudnnConvolutionBwdDataAlgo_t(dalgo),
                                                   &ws_bytes));
  ws = nullptr;
  if (ws_bytes) CUDA(cudaMalloc(&ws, ws_bytes));
  DNN(cudnnConvolutionBackwardData(handle, &one, wd, wt, yd, dy, cd, cudnnConvolutionBwdDataAlgo_t(dalgo), ws,
                                   ws_bytes, &zero, xd, dx));
  std::vector<float> got_dx = host_copy(dx, g.nx());
  std::snprintf(buf, sizeof buf, ", checksum %.3f", checksum(got_dx));
  report("convolution backward data matches the CPU", near(got_dx, rdx), buf);
  if (ws) CUDA(cudaFree(ws));

  // Backward filter.
  DNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> wperf(size_t(std::max(max, 1)));
  DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, xd, yd, cd, wd, max, &returned, wperf.data()));
  const int walgo = first_ok(wperf.data(), returned);
  report("backward filter algorithm search (v7)", returned >= 1 && walgo >= 0);
  DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, xd, yd, cd, wd, cudnnConvolutionBwdFilterAlgo_t(walgo),
                                                     &ws_bytes));
  ws = nullptr;
  if (ws_bytes) CUDA(cudaMalloc(&ws, ws_bytes));
  DNN(cudnnConvolutionBackwardFilter(handle, &one, xd, x, yd, dy, cd, cudnnConvolutionBwdFilterAlgo_t(walgo), ws,
                                     ws_bytes, &zero, wd, dw));
  std::vector<float> got_dw = host_copy(dw, g.nw());
  std::snprintf(buf, sizeof buf, ", checksum %.3f", checksum(got_dw));
  report("convolution backward filter matches the CPU", near(got_dw, rdw), buf);
  if (ws) CUDA(cudaFree(ws));

  // Backward bias: the sum of dy over N, H and W per channel, added to what db held (beta 1).
  cudnnTensorDescriptor_t bd = tensor(1, g.K, 1, 1);
  std::vector<float> hb(size_t(g.K)), rdb(size_t(g.K));
  for (int k = 0; k < g.K; ++k) hb[size_t(k)] = rdb[size_t(k)] = float(k);
  for (size_t i = 0; i < g.ny(); ++i) rdb[(i / (size_t(g.P) * g.Q)) % size_t(g.K)] += hdy[i];
  float* db = device_copy(hb);
  DNN(cudnnConvolutionBackwardBias(handle, &one, yd, dy, &one, bd, db));
  const std::vector<float> got_db = host_copy(db, size_t(g.K));
  std::snprintf(buf, sizeof buf, " (%.0f %.0f %.0f)", got_db[0], got_db[1], got_db[2]);
  report("convolution backward bias matches the CPU", near(got_db, rdb), buf);

  // cudnnAddTensor: the bias broadcast over y (y += b).
  DNN(cudnnAddTensor(handle, &one, bd, db, &one, yd, y));
  std::vector<float> ry2 = ry;
  for (size_t i = 0; i < ry2.size(); ++i) ry2[i] += rdb[(i / (size_t(g.P) * g.Q)) % size_t(g.K)];
  report("add tensor (bias broadcast) matches the CPU", near(host_copy(y, g.ny()), ry2));

  // The fused form: relu(conv(x, w2) + z + bias) with IMPLICIT_PRECOMP_GEMM (which cuDNN runs it
  // with), one group: w2 3x4x3x3.
  Geo f{2, 4, 6, 6, 3, 3, 3, 1, 1, 1, 6, 6};
  cudnnFilterDescriptor_t w2d;
  DNN(cudnnCreateFilterDescriptor(&w2d));
  DNN(cudnnSetFilter4dDescriptor(w2d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, f.K, f.C, f.R, f.S));
  cudnnConvolutionDescriptor_t c2d;
  DNN(cudnnCreateConvolutionDescriptor(&c2d));
  DNN(cudnnSetConvolution2dDescriptor(c2d, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DNN(cudnnSetConvolutionMathType(c2d, CUDNN_FMA_MATH));
  cudnnTensorDescriptor_t zd = tensor(f.N, f.K, f.P, f.Q), b2d = tensor(1, f.K, 1, 1);
  cudnnActivationDescriptor_t act;
  DNN(cudnnCreateActivationDescriptor(&act));
  DNN(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  std::vector<float> hw2(f.nw()), hz(f.ny()), hb2{1, -2, 0.5f};
  for (size_t i = 0; i < hw2.size(); ++i) hw2[i] = float(int((i * 3) % 5) - 2);
  for (size_t i = 0; i < hz.size(); ++i) hz[i] = float(int(i % 3) - 1);
  std::vector<float> rf(f.ny(), 0.f);
  f.each([&](size_t xi, size_t wi, size_t yi) { rf[yi] += hx[xi] * hw2[wi]; });
  for (size_t i = 0; i < rf.size(); ++i) rf[i] = std::max(0.f, rf[i] + hz[i] + hb2[(i / 36) % 3]);
  float *w2 = device_copy(hw2), *z = device_copy(hz), *b2 = device_copy(hb2),
        *y2 = device_copy(std::vector<float>(f.ny(), 0.f));
  const cudnnConvolutionFwdAlgo_t fused = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  DNN(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, w2d, c2d, zd, fused, &ws_bytes));
  ws = nullptr;
  if (ws_bytes) CUDA(cudaMalloc(&ws, ws_bytes));
  DNN(cudnnConvolutionBiasActivationForward(handle, &one, xd, x, w2d, w2, c2d, fused, ws, ws_bytes, &one, zd, z, b2d,
                                            b2, act, zd, y2));
  const std::vector<float> got_y2 = host_copy(y2, f.ny());
  std::snprintf(buf, sizeof buf, ", checksum %.3f", checksum(got_y2));
  report("convolution + bias + relu matches the CPU", near(got_y2, rf), buf);
  if (ws) CUDA(cudaFree(ws));

  for (float* p : {x, wt, dy, y, dx, dw, db, w2, z, b2, y2}) CUDA(cudaFree(p));
  for (auto t : {xd, yd, bd, zd, b2d}) DNN(cudnnDestroyTensorDescriptor(t));
  DNN(cudnnDestroyFilterDescriptor(wd));
  DNN(cudnnDestroyFilterDescriptor(w2d));
  DNN(cudnnDestroyConvolutionDescriptor(cd));
  DNN(cudnnDestroyConvolutionDescriptor(c2d));
  DNN(cudnnDestroyActivationDescriptor(act));
}

// Max pooling 2x2 stride 2 and average pooling 3x3 padding 1 stride 1 (padding not counted),
// forward; max pooling backward. x 1x2x4x4 with distinct values in every window.
void pooling(cudnnHandle_t handle) {
  const int N = 1, C = 2, H = 4, W = 4;
  cudnnTensorDescriptor_t xd = tensor(N, C, H, W);
  std::vector<float> hx(size_t(N) * C * H * W);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = float((i * 31) % 97);
  float* x = device_copy(hx);
  const float one = 1, zero = 0;

  cudnnPoolingDescriptor_t maxd;
  DNN(cudnnCreatePoolingDescriptor(&maxd));
  DNN(cudnnSetPooling2dDescriptor(maxd, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
  cudnnPoolingMode_t mode;
  cudnnNanPropagation_t nan;
  int nb = 0, win[8], pad[8], st[8];
  DNN(cudnnGetPoolingNdDescriptor(maxd, 2, &mode, &nan, &nb, win, pad, st));
  int n, c, h, w;
  DNN(cudnnGetPooling2dForwardOutputDim(maxd, xd, &n, &c, &h, &w));
  std::printf("max pooling: %s, window %d %d, strides %d %d; output %d %d %d %d\n",
              mode == CUDNN_POOLING_MAX ? "max" : "OTHER", win[0], win[1], st[0], st[1], n, c, h, w);
  cudnnTensorDescriptor_t yd = tensor(n, c, h, w);
  const size_t ny = size_t(n) * c * h * w;
  float* y = device_copy(std::vector<float>(ny, 0.f));
  DNN(cudnnPoolingForward(handle, maxd, &one, xd, x, &zero, yd, y));
  std::vector<float> ry(ny), rdx(hx.size(), 0.f), hdy(ny);
  for (size_t i = 0; i < ny; ++i) hdy[i] = float(int(i % 4) + 1);
  for (int cc = 0; cc < C; ++cc)
    for (int p = 0; p < h; ++p)
      for (int q = 0; q < w; ++q) {
        size_t best = 0;
        float m = -1e30f;
        for (int r = 0; r < 2; ++r)
          for (int s = 0; s < 2; ++s) {
            const size_t i = (size_t(cc) * H + 2 * p + r) * W + 2 * q + s;
            if (hx[i] > m) m = hx[i], best = i;
          }
        const size_t o = (size_t(cc) * h + p) * w + q;
        ry[o] = m;
        rdx[best] += hdy[o];
      }
  const std::vector<float> got_y = host_copy(y, ny);
  char buf[96];
  std::snprintf(buf, sizeof buf, " (%.0f %.0f %.0f %.0f)", got_y[0], got_y[1], got_y[2], got_y[3]);
  report("max pooling forward matches the CPU", near(got_y, ry), buf);
  float *dy = device_copy(hdy), *dx = device_copy(std::vector<float>(hx.size(), 0.f));
  DNN(cudnnPoolingBackward(handle, maxd, &one, yd, y, yd, dy, xd, x, &zero, xd, dx));
  report("max pooling backward matches the CPU", near(host_copy(dx, hx.size()), rdx));

  cudnnPoolingDescriptor_t avgd;
  DNN(cudnnCreatePoolingDescriptor(&avgd));
  const int aw[2] = {3, 3}, ap[2] = {1, 1}, as[2] = {1, 1};
  DNN(cudnnSetPoolingNdDescriptor(avgd, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, CUDNN_NOT_PROPAGATE_NAN, 2, aw,
                                  ap, as));
  int odims[4] = {};
  DNN(cudnnGetPoolingNdForwardOutputDim(avgd, xd, 4, odims));
  std::printf("average pooling: output %d %d %d %d\n", odims[0], odims[1], odims[2], odims[3]);
  float* ya = device_copy(std::vector<float>(hx.size(), 0.f));
  DNN(cudnnPoolingForward(handle, avgd, &one, xd, x, &zero, xd, ya));
  std::vector<float> ra(hx.size());
  for (int cc = 0; cc < C; ++cc)
    for (int p = 0; p < H; ++p)
      for (int q = 0; q < W; ++q) {
        float s = 0;
        int count = 0;
        for (int r = -1; r <= 1; ++r)
          for (int t = -1; t <= 1; ++t)
            if (p + r >= 0 && p + r < H && q + t >= 0 && q + t < W) s += hx[(size_t(cc) * H + p + r) * W + q + t], ++count;
        ra[(size_t(cc) * H + p) * W + q] = s / float(count);
      }
  const std::vector<float> got_a = host_copy(ya, hx.size());
  std::snprintf(buf, sizeof buf, ", checksum %.3f", checksum(got_a));
  report("average pooling forward matches the CPU", near(got_a, ra), buf);

  for (float* p : {x, y, dy, dx, ya}) CUDA(cudaFree(p));
  DNN(cudnnDestroyPoolingDescriptor(maxd));
  DNN(cudnnDestroyPoolingDescriptor(avgd));
  DNN(cudnnDestroyTensorDescriptor(xd));
  DNN(cudnnDestroyTensorDescriptor(yd));
}

// Softmax over the channels at each position (ACCURATE and LOG), forward and backward.
void softmax(cudnnHandle_t handle) {
  const int N = 2, C = 5, H = 2, W = 3, HW = H * W;
  cudnnTensorDescriptor_t d = tensor(N, C, H, W);
  const size_t total = size_t(N) * C * HW;
  std::vector<float> hx(total), hdy(total);
  for (size_t i = 0; i < total; ++i) hx[i] = float(int((i * 7) % 11) - 5) * 0.5f, hdy[i] = float(int(i % 3) - 1);
  std::vector<float> rs(total), rl(total), rds(total), rdl(total);
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < HW; ++p) {
      auto at = [&](int c) { return (size_t(n) * C + c) * HW + p; };
      double m = -1e30, sum = 0, dot = 0, dsum = 0;
      for (int c = 0; c < C; ++c) m = std::max(m, double(hx[at(c)]));
      for (int c = 0; c < C; ++c) sum += std::exp(double(hx[at(c)]) - m);
      for (int c = 0; c < C; ++c) {
        rs[at(c)] = float(std::exp(double(hx[at(c)]) - m) / sum);
        rl[at(c)] = float(double(hx[at(c)]) - m - std::log(sum));
        dot += double(hdy[at(c)]) * rs[at(c)];
        dsum += hdy[at(c)];
      }
      for (int c = 0; c < C; ++c) {
        rds[at(c)] = float(rs[at(c)] * (hdy[at(c)] - dot));
        rdl[at(c)] = float(hdy[at(c)] - std::exp(double(rl[at(c)])) * dsum);
      }
    }
  float *x = device_copy(hx), *dy = device_copy(hdy), *y = device_copy(std::vector<float>(total, 0.f)),
        *dx = device_copy(std::vector<float>(total, 0.f));
  const float one = 1, zero = 0;
  char buf[96];
  DNN(cudnnSoftmaxForward(handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d, x, &zero, d, y));
  const std::vector<float> got = host_copy(y, total);
  std::snprintf(buf, sizeof buf, " (%.3f %.3f %.3f)", got[0], got[6], got[12]);
  report("softmax forward matches the CPU", near(got, rs), buf);
  DNN(cudnnSoftmaxBackward(handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d, y, d, dy, &zero, d, dx));
  report("softmax backward matches the CPU", near(host_copy(dx, total), rds));
  DNN(cudnnSoftmaxForward(handle, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d, x, &zero, d, y));
  report("log softmax forward matches the CPU", near(host_copy(y, total), rl));
  DNN(cudnnSoftmaxBackward(handle, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d, y, d, dy, &zero, d, dx));
  report("log softmax backward matches the CPU", near(host_copy(dx, total), rdl));
  for (float* p : {x, dy, y, dx}) CUDA(cudaFree(p));
  DNN(cudnnDestroyTensorDescriptor(d));
}

// Dropout (p = 0.5) of 4096 ones: each output is 0 or 2, about half kept; a second pass draws
// another mask (the generator's position lives in the states, the program's memory; restored
// with a handle destroyed since, it goes on); backward
// lets through exactly the gradients the forward pass kept.
void dropout(cudnnHandle_t handle) {
  const int n = 4096;
  cudnnTensorDescriptor_t d = tensor(1, 1, 1, n);
  size_t states_bytes = 0, reserve_bytes = 0;
  DNN(cudnnDropoutGetStatesSize(handle, &states_bytes));
  DNN(cudnnDropoutGetReserveSpaceSize(d, &reserve_bytes));
  report("dropout states and reserve sizes", states_bytes > 0 && reserve_bytes > 0);
  void *states, *reserve;
  CUDA(cudaMalloc(&states, states_bytes));
  CUDA(cudaMalloc(&reserve, reserve_bytes));
  cudnnDropoutDescriptor_t dd;
  DNN(cudnnCreateDropoutDescriptor(&dd));
  DNN(cudnnSetDropoutDescriptor(dd, handle, 0.5f, states, states_bytes, 2024));
  float *x = device_copy(std::vector<float>(n, 1.f)), *y = device_copy(std::vector<float>(n, 7.f)),
        *dx = device_copy(std::vector<float>(n, 7.f));
  DNN(cudnnDropoutForward(handle, dd, d, x, d, y, reserve, reserve_bytes));
  const std::vector<float> first = host_copy(y, n);
  int kept = 0;
  bool values = true;
  for (float v : first) {
    kept += v != 0;
    values = values && (v == 0 || v == 2);
  }
  report("dropout forward: every element dropped or doubled", values);
  report("dropout forward: between 40% and 60% kept", kept > n * 2 / 5 && kept < n * 3 / 5);
  DNN(cudnnDropoutBackward(handle, dd, d, x, d, dx, reserve, reserve_bytes));
  report("dropout backward lets through what forward kept", host_copy(dx, n) == first);
  // Restored with another handle, destroyed since (the descriptor keeps none): it goes on where
  // it stood, also across a suspend meanwhile (tests/cuda/suspend_resume_test.sh).
  cudnnHandle_t other;
  DNN(cudnnCreate(&other));
  DNN(cudnnRestoreDropoutDescriptor(dd, other, 0.5f, states, states_bytes, 2024));
  DNN(cudnnDestroy(other));
  for (int i = 0; i < 20; ++i) DNN(cudnnDropoutForward(handle, dd, d, x, d, y, reserve, reserve_bytes));
  DNN(cudnnDropoutForward(handle, dd, d, x, d, y, reserve, reserve_bytes));
  report("dropout: a second pass draws another mask", host_copy(y, n) != first);
  for (float* p : {x, y, dx}) CUDA(cudaFree(p));
  CUDA(cudaFree(states));
  CUDA(cudaFree(reserve));
  DNN(cudnnDestroyDropoutDescriptor(dd));
  DNN(cudnnDestroyTensorDescriptor(d));
}

}  // namespace

int main() {
  cudnnHandle_t handle;
  DNN(cudnnCreate(&handle));
  cudaStream_t stream;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DNN(cudnnSetStream(handle, stream));
  // (No setting the library refuses here: vmcuda queues descriptor settings, so a refusal
  // comes back with a later call, not with the setting itself: guest-lib/README.md.)
  convolutions(handle);
  pooling(handle);
  softmax(handle);
  dropout(handle);
  DNN(cudnnDestroy(handle));
  CUDA(cudaStreamDestroy(stream));
  std::printf("done\n");
  return all_ok ? 0 : 1;
}
