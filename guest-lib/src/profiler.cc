// Profiler control (cuda_profiler_api.h). No profiler reaches into the guest: NVIDIA's tools
// attach to the host's driver, which profiles the VM's kernels there (docs/running.md). So
// these start and stop nothing and answer as NVIDIA's runtime does when no profiler is
// attached: cudaSuccess, after the usual start-up (the sticky error, the connection).
#include "entry.h"
#include "vmcuda/cudart_api.h"

namespace {
cudaError_t profiler_call() {
  cudaError_t err;
  return vmcuda::guest::device_call(&err) ? cudaSuccess : err;
}
}  // namespace

cudaError_t cudaProfilerStart(void) { return profiler_call(); }
cudaError_t cudaProfilerStop(void) { return profiler_call(); }
