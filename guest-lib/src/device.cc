// device area: device, peer and version calls. Local ones answer from the vGPU database;
// the rest are remoted (TODO(remoting): cudaGetDeviceCount, cudaGetDeviceProperties, ...).
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return vmcuda::guest::record(cudaErrorInvalidValue);
  *runtimeVersion = kCudartVersion;
  return cudaSuccess;
}
