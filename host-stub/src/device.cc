// Device management calls (calls.def, 0x1000).
#include <cstring>

#include "session.h"

namespace vmcuda::host {

int32_t Session::on_DeviceInfo(const api::Empty&, api::DeviceInfoReply& r, Request&) {
  // The guest sees the devices this stub serves: one for now (the stub's --device).
  r.device_count = 1;
  api_.cuDriverGetVersion(&r.driver_version);
  CUdevice dev;
  if (CUresult e = api_.cuDeviceGet(&dev, device_); e != CUDA_SUCCESS) return e;
  api_.cuDeviceGetName(r.name, sizeof r.name - 1, dev);
  size_t total = 0;
  api_.cuDeviceTotalMem_v2(&total, dev);
  r.total_mem = std::min<uint64_t>(total, limits_.memory_quota);
  api_.cuDeviceGetAttribute(&r.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  api_.cuDeviceGetAttribute(&r.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  return CUDA_SUCCESS;
}

int32_t Session::on_DeviceSynchronize(const api::Empty&, api::Empty&, Request&) {
  // TODO(perf): synchronous waits move to the GPU's working thread (events), so a
  // long kernel of one client never holds a thread the others need.
  return api_.cuCtxSynchronize();
}

}  // namespace vmcuda::host
