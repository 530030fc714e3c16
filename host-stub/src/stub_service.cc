// vmcuda-stub's per-connection work: the shared heap pinned with the driver.
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

StubService::~StubService() {
  if (!registered_heaps_.empty() && bind_service_context())
    for (auto& [id, p] : registered_heaps_) api_.cuMemHostUnregister(p);
}

bool StubService::bind_service_context() {
  if (!service_ctx_) {
    CUdevice dev;
    CUresult r = api_.cuDeviceGet(&dev, devices_.at(0));
    if (r == CUDA_SUCCESS) r = api_.cuDevicePrimaryCtxRetain(&service_ctx_, dev);
    if (r != CUDA_SUCCESS) {
      VMRPC_LOG(kWarn, "stub", "no service context: " + describe(api_, r));
      service_ctx_ = nullptr;
      return false;
    }
  }
  return api_.cuCtxSetCurrent(service_ctx_) == CUDA_SUCCESS;
}

void StubService::connection_opened(uint64_t id, const vmrpc::RegionView& region) {
  auto heap = region.heap();
  if (!bind_service_context()) return;
  // Portable: pinned for every client context; device-mapped: for cudaHostAllocMapped.
  CUresult r = api_.cuMemHostRegister_v2(heap.data(), heap.size(),
                                         CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    VMRPC_LOG(kWarn, "stub", "connection " + std::to_string(id) + ": cannot pin the shared heap (" +
                                 std::to_string(heap.size() >> 20) + " MiB): " + describe(api_, r) +
                                 "; copies fall back to pageable speed (raise RLIMIT_MEMLOCK?)");
    return;
  }
  registered_heaps_[id] = heap.data();
}

void StubService::connection_closed(uint64_t id, const vmrpc::RegionView&) {
  auto it = registered_heaps_.find(id);
  if (it == registered_heaps_.end()) return;
  if (bind_service_context()) api_.cuMemHostUnregister(it->second);
  registered_heaps_.erase(it);
}

}  // namespace vmcuda::host
