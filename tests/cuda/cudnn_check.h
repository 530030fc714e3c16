// What the cuDNN test programs (cudnn_ops, cudnn_st_ctc) share: the status check, the ok/WRONG
// report and its summary flag, a tolerance compare against the CPU's doubles, small values of
// both signs, and a 4-D float tensor descriptor.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "library_check.h"

#define DNN(call) CHECK_STATUS(call, cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)

namespace {

bool all_ok = true;
void report(const char* what, bool ok) {
  all_ok = all_ok && ok;
  std::printf("%s: %s\n", what, ok ? "ok" : "WRONG");
}
bool near(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-4) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])))) return false;
  return true;
}
// Small values of both signs, different for each `salt`.
std::vector<float> values(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int((i * 7 + size_t(salt) * 3) % 11) - 5) * 0.25f;
  return v;
}
cudnnTensorDescriptor_t tensor(int n, int c, int h, int w, cudnnTensorFormat_t f = CUDNN_TENSOR_NCHW) {
  cudnnTensorDescriptor_t t;
  DNN(cudnnCreateTensorDescriptor(&t));
  DNN(cudnnSetTensor4dDescriptor(t, f, CUDNN_DATA_FLOAT, n, c, h, w));
  return t;
}

}  // namespace
