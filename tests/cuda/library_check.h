// What the test programs of NVIDIA's libraries share: a failed call prints its text and the
// name of its status, then ends the program (exit 1); device vectors up and down.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_STATUS(call, Status, success, name_of)                \
  do {                                                              \
    Status s_ = (call);                                             \
    if (s_ != (success)) {                                          \
      std::printf("%s failed: %s\n", #call, name_of(s_));           \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)
#define CUDA(call) CHECK_STATUS(call, cudaError_t, cudaSuccess, cudaGetErrorName)

template <class T>
static T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CUDA(cudaMalloc(&d, v.size() * sizeof(T)));
  CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
static std::vector<T> download(const T* d, size_t n) {
  std::vector<T> v(n);
  if (n) CUDA(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}
