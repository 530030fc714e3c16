// error area: error strings and the per-thread last error (docs/cuda-runtime-internals.md §7).
// All local: no call here needs the device, and none returns the sticky error.
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {
// NVIDIA's answer, for both the name and the string, to a value it does not know.
constexpr const char* kUnrecognized = "unrecognized error code";
}  // namespace

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
#define VMCUDA_CUDART_ERROR(name, value, string) \
  case name:                                     \
    return string;
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
  }
  return kUnrecognized;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define VMCUDA_CUDART_ERROR(name, value, string) \
  case name:                                     \
    return #name;
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
  }
  return kUnrecognized;
}

cudaError_t cudaGetLastError(void) { return vmcuda::guest::take_last_error(); }

cudaError_t cudaPeekAtLastError(void) { return vmcuda::guest::peek_last_error(); }
