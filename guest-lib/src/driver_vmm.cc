// The driver's virtual memory management (calls.def 0x1140; host-stub/src/vmm.cc):
// cuMemGetAllocationGranularity, cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap,
// cuMemSetAccess/GetAccess, cuMemRetainAllocationHandle, cuMemGetAllocationPropertiesFromHandle
// (PyTorch's expandable segments). Pinned device memory of the client's own devices only;
// what vmcuda cannot give (other allocation kinds, host locations, shareable handles other
// than a POSIX file descriptor requested and never exported, compression) answers
// CUDA_ERROR_NOT_SUPPORTED with a log line naming it. Mapped ranges are recorded as the
// process's device memory (vgpu_db::AllocationMap, kVmmMapping), so copies, memsets and
// pointer attributes treat them as cudaMalloc's.
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "driver_state.h"
#include "entry.h"
#include "log.h"
#include "remote.h"
#include "vgpu_db/allocations.h"

#define CU_API extern "C" __attribute__((visibility("default")))

using namespace vmcuda::guest;
namespace cu = vmcuda::cu;
namespace api = vmcuda::api;
using vgpu_db::Allocation;
using vgpu_db::AllocationMap;

namespace {

// Logs each distinct refusal once (VMCUDA_LOG >= 1) and returns CUDA_ERROR_NOT_SUPPORTED.
CUresult refuse(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> said;
  {
    std::lock_guard l(mu);
    if (!said.insert(what).second) return cu::kNotSupported;
  }
  VMCUDA_LOG(kWarn, "vmm", "%s is not supported by vmcuda; it returns CUDA_ERROR_NOT_SUPPORTED (801)", what.c_str());
  return cu::kNotSupported;
}

// The handle types each allocation was asked for (cuMemGetAllocationPropertiesFromHandle
// answers them back); the host knows size and device.
std::mutex g_props_mu;
std::map<CUmemGenericAllocationHandle, CUmemAllocationProp> g_props;

// A round trip whose failure is this driver call's CUresult (the runtime's last error stays).
template <api::Call C, class OnReply = IgnoreReply>
CUresult vmm_call(const typename api::CallTraits<C>::Args& args, OnReply on_reply = {}) {
  KeepRuntimeLastError keep;
  return to_cu_result(plain_call<C>(args, on_reply));
}

// What of `prop` vmcuda can serve: CUDA_SUCCESS, or the error (refusals logged).
CUresult check_prop(const CUmemAllocationProp* prop, const char* call, bool creating) {
  if (!prop) return cu::kInvalidValue;
  if (prop->type != cu::kMemAllocationTypePinned) {
    if (prop->type == 0) return cu::kInvalidValue;  // CU_MEM_ALLOCATION_TYPE_INVALID
    return refuse(std::string(call) + " with allocation type " + std::to_string(prop->type) +
                  " (only CU_MEM_ALLOCATION_TYPE_PINNED)");
  }
  if (prop->location.type != cu::kMemLocationTypeDevice)
    return refuse(std::string(call) + " at location type " + std::to_string(prop->location.type) +
                  " (only CU_MEM_LOCATION_TYPE_DEVICE: the VM's own GPUs)");
  if (!creating) return cu::kSuccess;
  // A POSIX file descriptor may be requested (PyTorch asks for one by default, for IPC it may
  // never use): the allocation is made, and only an export is refused.
  const int types = prop->requestedHandleTypes;
  if (types & ~cu::kMemHandleTypePosixFd)
    return refuse(std::string(call) + " with shareable handle types 0x" +
                  [&] {
                    char b[16];
                    std::snprintf(b, sizeof b, "%x", static_cast<unsigned>(types));
                    return std::string(b);
                  }() +
                  " (fabric and Win32 handles cannot leave the VM)");
  if (prop->allocFlags.compressionType) return refuse(std::string(call) + " of compressible memory");
  if (prop->allocFlags.usage) return refuse(std::string(call) + " with usage flags " + std::to_string(prop->allocFlags.usage));
  return cu::kSuccess;
}

}  // namespace

CU_API CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop, int option) {
  VMCUDA_ENTER(enter_driver_call());
  if (!granularity) return cu::kInvalidValue;
  if (option != cu::kMemGranularityMinimum && option != cu::kMemGranularityRecommended) return cu::kInvalidValue;
  if (CUresult e = check_prop(prop, "cuMemGetAllocationGranularity", false)) return e;
  return vmm_call<api::Call::VmmGranularity>({prop->location.id, static_cast<uint32_t>(option)},
                                             [&](const api::VmmValueReply& r) { *granularity = r.value; });
}

CU_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags) {
  VMCUDA_ENTER(enter_driver_call());
  if (!ptr || size == 0 || flags || (alignment & (alignment - 1))) return cu::kInvalidValue;
  return vmm_call<api::Call::VmmAddressReserve>({size, alignment, addr, flags},
                                                [&](const api::PtrReply& r) { *ptr = r.ptr; });
}

CU_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  VMCUDA_ENTER(enter_driver_call());
  if (!ptr || size == 0) return cu::kInvalidValue;
  return vmm_call<api::Call::VmmAddressFree>({ptr, size});
}

CU_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                            unsigned long long flags) {
  VMCUDA_ENTER(enter_driver_call());
  if (!handle || size == 0 || flags) return cu::kInvalidValue;
  if (CUresult e = check_prop(prop, "cuMemCreate", true)) return e;
  CUmemGenericAllocationHandle h = 0;
  const CUresult e = vmm_call<api::Call::VmmCreate>({size, prop->location.id, 0},
                                                    [&](const api::VmmValueReply& r) { h = r.value; });
  if (e) return e;
  {
    std::lock_guard l(g_props_mu);
    g_props[h] = *prop;
  }
  *handle = h;
  return cu::kSuccess;
}

CU_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VMCUDA_ENTER(enter_driver_call());
  // The properties stay known while a mapping may still name the allocation (the host frees
  // it with its last mapping); a handle value is never reused by the host.
  return vmm_call<api::Call::VmmRelease>({handle});
}

CU_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
  VMCUDA_ENTER(enter_driver_call());
  if (!ptr || size == 0 || flags) return cu::kInvalidValue;
  uint64_t device = 0;
  const CUresult e = vmm_call<api::Call::VmmMap>({ptr, size, offset, handle, flags},
                                                 [&](const api::VmmValueReply& r) { device = r.value; });
  if (e) return e;
  Allocation a;
  a.base = ptr;
  a.bytes = size;
  a.kind = Allocation::kDevice;
  a.device = static_cast<int>(device);
  a.flags = Allocation::kVmmMapping;
  AllocationMap::process().add(a);
  return cu::kSuccess;
}

CU_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  VMCUDA_ENTER(enter_driver_call());
  if (!ptr || size == 0) return cu::kInvalidValue;
  if (CUresult e = vmm_call<api::Call::VmmUnmap>({ptr, size})) return e;
  // The host unmapped whole mappings from ptr on: forget them here.
  for (uint64_t p = ptr; p - ptr < size;) {
    auto a = AllocationMap::process().find(p);
    if (!a || !(a->flags & Allocation::kVmmMapping)) break;
    AllocationMap::process().remove(a->base, Allocation::kDevice);
    p = a->base + a->bytes;
  }
  return cu::kSuccess;
}

CU_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  VMCUDA_ENTER(enter_driver_call());
  if (!ptr || size == 0 || !desc || count == 0) return cu::kInvalidValue;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != cu::kMemLocationTypeDevice)
      return refuse("cuMemSetAccess for location type " + std::to_string(desc[i].location.type) +
                    " (only the VM's GPUs: CU_MEM_LOCATION_TYPE_DEVICE)");
    if (desc[i].flags != cu::kMemAccessNone && desc[i].flags != cu::kMemAccessRead &&
        desc[i].flags != cu::kMemAccessReadWrite)
      return cu::kInvalidValue;
  }
  for (size_t i = 0; i < count; ++i)
    if (CUresult e = vmm_call<api::Call::VmmSetAccess>(
            {ptr, size, desc[i].location.id, static_cast<uint32_t>(desc[i].flags)}))
      return e;
  return cu::kSuccess;
}

CU_API CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  VMCUDA_ENTER(enter_driver_call());
  if (!flags || !location) return cu::kInvalidValue;
  if (location->type != cu::kMemLocationTypeDevice)
    return refuse("cuMemGetAccess for location type " + std::to_string(location->type));
  return vmm_call<api::Call::VmmGetAccess>({ptr, 0, location->id, 0},
                                           [&](const api::VmmValueReply& r) { *flags = r.value; });
}

CU_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  VMCUDA_ENTER(enter_driver_call());
  if (!handle || !addr) return cu::kInvalidValue;
  return vmm_call<api::Call::VmmRetainHandle>({reinterpret_cast<uintptr_t>(addr)},
                                              [&](const api::VmmValueReply& r) { *handle = r.value; });
}

CU_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  VMCUDA_ENTER(enter_driver_call());
  if (!prop) return cu::kInvalidValue;
  api::VmmPropertiesReply got{};
  if (CUresult e = vmm_call<api::Call::VmmProperties>({handle}, [&](const api::VmmPropertiesReply& r) { got = r; }))
    return e;
  CUmemAllocationProp p{};
  {
    std::lock_guard l(g_props_mu);
    if (auto it = g_props.find(handle); it != g_props.end()) p = it->second;
  }
  p.type = cu::kMemAllocationTypePinned;
  p.location = {cu::kMemLocationTypeDevice, got.device};
  *prop = p;
  return cu::kSuccess;
}

CU_API CUresult cuMemExportToShareableHandle(void*, CUmemGenericAllocationHandle, int type, unsigned long long) {
  VMCUDA_ENTER(enter_driver_call());
  return refuse("cuMemExportToShareableHandle (handle type " + std::to_string(type) +
                "): device memory cannot be shared with another process through vmcuda");
}

CU_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle*, void*, int type) {
  VMCUDA_ENTER(enter_driver_call());
  return refuse("cuMemImportFromShareableHandle (handle type " + std::to_string(type) +
                "): device memory cannot be shared with another process through vmcuda");
}
