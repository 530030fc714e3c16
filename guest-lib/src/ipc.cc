// IPC area: cudaIpc* between programs of one VM (calls.def 0x1a00; the host's ipc.cc). The
// handles are opaque bytes the host made; they travel between the programs however the
// programs like (a pipe, a file). An opened pointer is device memory of this process until
// its last close: recorded in the allocation map so that copies and kernels take it.
#include <cstring>
#include <map>
#include <mutex>

#include "entry.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;

// How many times each opened pointer is open here (the host counts too; this keeps the
// allocation map's entry until the last close).
std::mutex g_open_mu;
std::map<uint64_t, unsigned> g_opens;

uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

}  // namespace
}  // namespace vmcuda::guest

using namespace vmcuda::guest;

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  return plain_call<vmcuda::api::Call::IpcGetMemHandle>(
      {addr(devPtr)}, [&](const auto& r) { std::memcpy(handle->reserved, &r.handle, sizeof r.handle); },
      handle == nullptr || devPtr == nullptr);
}

cudaError_t cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  vmcuda::api::IpcOpenMemArgs a{};
  std::memcpy(&a.handle, handle.reserved, sizeof a.handle);
  a.flags = flags;
  return plain_call<vmcuda::api::Call::IpcOpenMemHandle>(
      a,
      [&](const vmcuda::api::IpcOpenMemReply& r) {
        {
          std::lock_guard l(g_open_mu);
          if (g_opens[r.ptr]++ == 0)
            AllocationMap::process().add({r.ptr, r.bytes, Allocation::kDevice, r.device, 0});
        }
        *devPtr = reinterpret_cast<void*>(r.ptr);
      },
      devPtr == nullptr);
}

cudaError_t cudaIpcCloseMemHandle(void* devPtr) {
  const cudaError_t e = plain_call<vmcuda::api::Call::IpcCloseMemHandle>({addr(devPtr)});
  if (e == cudaSuccess) {
    std::lock_guard l(g_open_mu);
    auto it = g_opens.find(addr(devPtr));
    if (it != g_opens.end() && --it->second == 0) {
      AllocationMap::process().remove(addr(devPtr), Allocation::kDevice);
      g_opens.erase(it);
    }
  }
  return e;
}

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  uint64_t ev = 0;
  const bool bad = handle == nullptr;
  if (!bad)
    if (cudaError_t e = event_wire_handle(event, &ev)) {
      if (cudaError_t s = enter_device_call()) return s;
      return record(e);
    }
  return plain_call<vmcuda::api::Call::IpcGetEventHandle>(
      {ev}, [&](const auto& r) { std::memcpy(handle->reserved, &r.handle, sizeof r.handle); }, bad);
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!event) return record(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  Remote* remote = connected(&err);
  if (!remote) return record(err);
  const uint64_t h = handles::next();
  constexpr unsigned kFlags = cudaEventInterprocess | cudaEventDisableTiming;
  if (!handles::add_event(h, {kFlags, Remote::thread_device()})) return record(cudaErrorMemoryAllocation);
  vmcuda::api::IpcOpenEventArgs a{};
  std::memcpy(&a.handle, handle.reserved, sizeof a.handle);
  a.event = h;
  auto lock = remote->lock();
  const auto res = remote->call<vmcuda::api::Call::IpcOpenEventHandle>(a);
  handles::remove_event(h);
  if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
  handles::add_event(h, {kFlags, res.reply.device});  // on the device the host opened it on
  *event = reinterpret_cast<cudaEvent_t>(h);
  return cudaSuccess;
}
