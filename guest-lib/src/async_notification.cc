// Async notifications (cudaDeviceRegisterAsyncNotification / Unregister, CUDA 12.4; the
// driver's cuDevice{Register,Unregister}AsyncNotification). The one kind CUDA defines is
// cudaAsyncNotificationTypeOverBudget: "the process has exceeded its device memory budget".
// In a VM the budget is what the VM may use of the device: its memory quota (vmcuda-stub
// --memory-quota-mib / policy), else the device. The host never lets a program past it (the
// allocation is refused), so the notification comes when an allocation is refused because it
// would have gone past it (cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync and the
// driver's forms): bytesOverBudget is what the allocation asked beyond what the VM had left.
// The host driver's own notifications are the stub process's (its budget is not the VM's) and
// are not forwarded.
//
// Callbacks run in this process on a thread of the library's, one at a time, as CUDA allows
// ("in an undefined order and may be serialized"); a callback that registers or unregisters
// gets cudaErrorNotPermitted, as CUDA documents.
#include "async_notification.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "entry.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

using vmcuda::guest::Remote;
using vmcuda::guest::record;
namespace api = vmcuda::api;

namespace {

struct Registration {
  int device;
  cudaAsyncCallback callback;
  void* data;
};
struct Pending {
  uintptr_t handle;
  Registration to;
  cudaAsyncNotificationInfo_t info;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Registration> registered;
  uintptr_t next = 0x20;
  std::deque<Pending> pending;
  std::condition_variable wake;
  bool deliverer = false;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

thread_local bool t_in_callback = false;

[[noreturn]] void deliver_forever() {
  Registry& reg = registry();
  t_in_callback = true;  // this thread runs callbacks only
  for (;;) {
    Pending p;
    {
      std::unique_lock g(reg.mu);
      reg.wake.wait(g, [&] { return !reg.pending.empty(); });
      p = reg.pending.front();
      reg.pending.pop_front();
      // Unregistered since it was queued: not delivered.
      if (!reg.registered.count(p.handle)) continue;
    }
    p.to.callback(&p.info, p.to.data, reinterpret_cast<cudaAsyncCallbackHandle_t>(p.handle));
  }
}

bool valid_device(const Remote& r, int device) { return device >= 0 && device < r.handshake().device_count; }

}  // namespace

cudaError_t cudaDeviceRegisterAsyncNotification(int device, cudaAsyncCallback callbackFunc, void* userData,
                                                cudaAsyncCallbackHandle_t* callback) {
  if (t_in_callback) return record(cudaErrorNotPermitted);
  cudaError_t e;
  Remote* r = vmcuda::guest::device_call(&e);
  if (!r) return e;
  if (!valid_device(*r, device)) return record(cudaErrorInvalidDevice);
  if (!callbackFunc || !callback) return record(cudaErrorInvalidValue);
  Registry& reg = registry();
  std::lock_guard g(reg.mu);
  if (!reg.deliverer) {
    std::thread(deliver_forever).detach();
    reg.deliverer = true;
  }
  const uintptr_t h = reg.next += 0x20;
  reg.registered[h] = {device, callbackFunc, userData};
  *callback = reinterpret_cast<cudaAsyncCallbackHandle_t>(h);
  return cudaSuccess;
}

cudaError_t cudaDeviceUnregisterAsyncNotification(int device, cudaAsyncCallbackHandle_t callback) {
  if (t_in_callback) return record(cudaErrorNotPermitted);
  cudaError_t e;
  Remote* r = vmcuda::guest::device_call(&e);
  if (!r) return e;
  if (!valid_device(*r, device)) return record(cudaErrorInvalidDevice);
  Registry& reg = registry();
  std::lock_guard g(reg.mu);
  auto it = reg.registered.find(reinterpret_cast<uintptr_t>(callback));
  // Another device's registration is not this device's to remove.
  if (it == reg.registered.end() || it->second.device != device) return record(cudaErrorInvalidValue);
  reg.registered.erase(it);
  return cudaSuccess;
}

namespace vmcuda::guest {
void note_refused_allocation(Remote& r, int device, uint64_t bytes) noexcept {
  Registry& reg = registry();
  {
    std::lock_guard g(reg.mu);
    bool any = false;
    for (const auto& [h, to] : reg.registered) any |= to.device == device;
    if (!any) return;
  }
  const auto info = r.call<api::Call::MemGetInfo>({});
  if (info.status != cudaSuccess || bytes <= info.reply.free_bytes) return;  // refused for another reason
  cudaAsyncNotificationInfo_t n{};
  n.type = cudaAsyncNotificationTypeOverBudget;
  n.info.overBudget.bytesOverBudget = bytes - info.reply.free_bytes;
  std::lock_guard g(reg.mu);
  for (const auto& [h, to] : reg.registered)
    if (to.device == device) reg.pending.push_back({h, to, n});
  reg.wake.notify_one();
}
}  // namespace vmcuda::guest
