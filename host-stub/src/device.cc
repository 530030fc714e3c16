// Device management calls (calls.def, 0x1000).
#include <algorithm>
#include <cstring>

#include "session.h"

namespace vmcuda::host {

int32_t Session::on_Handshake(const api::Empty&, api::HandshakeReply& r, Request&) {
  r.device_count = static_cast<int32_t>(devices_.size());
  api_.cuDriverGetVersion(&r.driver_version);
  r.memory_quota = limits_.memory_quota;
  return CUDA_SUCCESS;
}

int32_t Session::on_DeviceProperties(const api::DeviceArgs& a, api::DevicePropertiesReply& r, Request&) {
  if (a.device < 0 || static_cast<size_t>(a.device) >= devices_.size()) return CUDA_ERROR_INVALID_DEVICE;
  CUdevice dev;
  if (CUresult e = api_.cuDeviceGet(&dev, devices_[a.device]); e != CUDA_SUCCESS) return e;
  api_.cuDeviceGetName(r.name, sizeof r.name - 1, dev);
  api_.cuDeviceGetUuid_v2(r.uuid, dev);
  size_t total = 0;
  api_.cuDeviceTotalMem_v2(&total, dev);
  r.total_mem = std::min<uint64_t>(total, limits_.memory_quota);
  // Attribute numbers the driver does not know answer an error: leave those 0.
  for (uint32_t i = 1; i < api::kDeviceAttributeSlots; ++i)
    if (api_.cuDeviceGetAttribute(&r.attributes[i], static_cast<int>(i), dev) != CUDA_SUCCESS) r.attributes[i] = 0;
  return CUDA_SUCCESS;
}

int32_t Session::on_SetDevice(const api::DeviceArgs& a, api::Empty&, Request&) {
  if (a.device < 0 || static_cast<size_t>(a.device) >= devices_.size()) return CUDA_ERROR_INVALID_DEVICE;
  current_ = a.device;
  return CUDA_SUCCESS;
}

int32_t Session::on_MemGetInfo(const api::Empty&, api::MemInfoReply& r, Request&) {
  size_t free_bytes = 0, total = 0;
  if (CUresult e = api_.cuMemGetInfo_v2(&free_bytes, &total); e != CUDA_SUCCESS) return e;
  // Under a quota the client sees the quota as its device.
  if (limits_.memory_quota < total) {
    total = limits_.memory_quota;
    free_bytes = std::min<uint64_t>(free_bytes, limits_.memory_quota - allocated_);
  }
  r.free_bytes = free_bytes;
  r.total_bytes = total;
  return CUDA_SUCCESS;
}

int32_t Session::on_DeviceSynchronize(const api::Empty&, api::Empty&, Request&) {
  // TODO(perf): synchronous waits move to the GPU's working thread (events), so a
  // long kernel of one client never holds a thread the others need.
  return api_.cuCtxSynchronize();
}

}  // namespace vmcuda::host
