// stream area: streams with guest-made handles (stream_event.h). Creation, destruction and
// waits on events are queued (lazy RPC: their errors arrive with the next synchronizing
// call, as CUDA reports asynchronous errors); synchronize, query and priority are round
// trips that also send what is queued. Every call that needs the device returns the
// sticky error first (runtime_state.h).
//
// TODO(streams): the per-thread default stream (cudaStreamPerThread, and stream 0 in the
// _ptsz variants) is one host stream per process, not one per guest thread (host-stub
// stream.cc): more ordering than CUDA gives, never less.
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

// Handles are spaced like aligned pointers, far below any real heap address, and start
// well above the special streams.
constexpr uint64_t kHandleBase = 0x10000;
constexpr uint64_t kHandleStep = 0x10;

struct Registry {
  std::mutex mu;
  std::unordered_map<uint64_t, StreamInfo> streams;
  std::unordered_map<uint64_t, EventInfo> events;
};
Registry& registry() {
  // Never destroyed: entry points may run from atexit handlers and other libraries'
  // destructors after this file's static destructors would have.
  static Registry* r = new Registry;
  return *r;
}
std::atomic<uint64_t> g_next{kHandleBase};

}  // namespace

namespace handles {
uint64_t next() noexcept { return g_next.fetch_add(kHandleStep, std::memory_order_relaxed); }

bool add_stream(uint64_t h, StreamInfo info) noexcept {
  std::lock_guard l(registry().mu);
  try {
    return registry().streams.emplace(h, info).second;
  } catch (...) {
    return false;
  }
}
bool remove_stream(uint64_t h) noexcept {
  std::lock_guard l(registry().mu);
  return registry().streams.erase(h) != 0;
}
bool find_stream(uint64_t h, StreamInfo* info) noexcept {
  std::lock_guard l(registry().mu);
  auto it = registry().streams.find(h);
  if (it == registry().streams.end()) return false;
  if (info) *info = it->second;
  return true;
}
bool add_event(uint64_t h, EventInfo info) noexcept {
  std::lock_guard l(registry().mu);
  try {
    return registry().events.emplace(h, info).second;
  } catch (...) {
    return false;
  }
}
bool remove_event(uint64_t h) noexcept {
  std::lock_guard l(registry().mu);
  return registry().events.erase(h) != 0;
}
void forget_device(int device) noexcept {
  std::lock_guard l(registry().mu);
  std::erase_if(registry().streams, [device](const auto& kv) { return kv.second.device == device; });
  std::erase_if(registry().events, [device](const auto& kv) { return kv.second.device == device; });
}
bool find_event(uint64_t h, EventInfo* info) noexcept {
  std::lock_guard l(registry().mu);
  auto it = registry().events.find(h);
  if (it == registry().events.end()) return false;
  if (info) *info = it->second;
  return true;
}
}  // namespace handles

cudaError_t stream_wire_handle(cudaStream_t stream, bool per_thread_default, uint64_t* wire) noexcept {
  const auto h = reinterpret_cast<uintptr_t>(stream);
  if (h == 0) {
    *wire = per_thread_default ? api::kStreamPerThread : api::kStreamDefault;
    return cudaSuccess;
  }
  if (h == api::kStreamLegacy || h == api::kStreamPerThread) {
    *wire = h;
    return cudaSuccess;
  }
  if (!handles::find_stream(h, nullptr)) return cudaErrorInvalidResourceHandle;
  *wire = h;
  return cudaSuccess;
}

cudaError_t event_wire_handle(cudaEvent_t event, uint64_t* wire) noexcept {
  const auto h = reinterpret_cast<uintptr_t>(event);
  if (h == 0 || !handles::find_event(h, nullptr)) return cudaErrorInvalidResourceHandle;
  *wire = h;
  return cudaSuccess;
}

namespace {

// A round trip on one stream (synchronize, query): sends what is queued first.
template <api::Call C>
cudaError_t stream_round_trip(cudaStream_t stream, bool per_thread, bool not_ready_is_an_answer) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t wire;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &wire)) return record(e);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  const auto r = remote->template call<C>({wire});
  const auto status = static_cast<cudaError_t>(r.status);
  // "Not ready" is an answer, not an error: it does not become the last error.
  if (not_ready_is_an_answer && status == cudaErrorNotReady) return status;
  return record(status);
}

cudaError_t wait_event(cudaStream_t stream, cudaEvent_t event, unsigned int flags, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t s, ev;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &s)) return record(e);
  if (cudaError_t e = event_wire_handle(event, &ev)) return record(e);
  if (flags & ~unsigned{cudaEventWaitExternal}) return record(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  return record(remote->enqueue<api::Call::StreamWaitEvent>({s, ev, flags, 0}));
}

cudaError_t get_flags(cudaStream_t stream, unsigned int* flags, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  if (flags == nullptr) return record(cudaErrorInvalidValue);
  uint64_t wire;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &wire)) return record(e);
  StreamInfo info;
  // The special streams are blocking streams (flags 0); the others say what they were made with.
  *flags = handles::find_stream(wire, &info) ? info.flags : cudaStreamDefault;
  return cudaSuccess;
}

// The special streams are the current device's; the others the device they were made on.
cudaError_t get_device(cudaStream_t stream, int* device, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  if (device == nullptr) return record(cudaErrorInvalidValue);
  uint64_t wire;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &wire)) return record(e);
  StreamInfo info;
  *device = handles::find_stream(wire, &info) ? info.device : Remote::thread_device();
  return cudaSuccess;
}

cudaError_t get_priority(cudaStream_t stream, int* priority, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  if (priority == nullptr) return record(cudaErrorInvalidValue);
  uint64_t wire;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &wire)) return record(e);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  // The host knows the clamped value (the device's range); a round trip, as it is rare.
  const auto r = remote->call<api::Call::StreamGetPriority>({wire});
  if (r.status != 0) return record(static_cast<cudaError_t>(r.status));
  *priority = r.reply.priority;
  return cudaSuccess;
}

// Stream attributes: the value union's fields for the id, on the wire's terms (wire.h
// StreamAttributeValue). Ids that are launch attributes only, or that CUDA does not have,
// are cudaErrorInvalidValue, as the driver answers them.
bool is_stream_attribute(cudaLaunchAttributeID id) {
  switch (id) {
    case cudaLaunchAttributeAccessPolicyWindow:
    case cudaLaunchAttributeSynchronizationPolicy:
    case cudaLaunchAttributePriority:
    case cudaLaunchAttributeMemSyncDomainMap:
    case cudaLaunchAttributeMemSyncDomain:
      return true;
    default:
      return false;
  }
}

cudaError_t set_attribute(cudaStream_t stream, cudaLaunchAttributeID id, const cudaLaunchAttributeValue* value,
                          bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  if (value == nullptr || !is_stream_attribute(id)) return record(cudaErrorInvalidValue);
  api::StreamSetAttributeArgs a{};
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &a.stream)) return record(e);
  a.id = static_cast<uint32_t>(id);
  auto& w = a.value;
  switch (id) {
    case cudaLaunchAttributeAccessPolicyWindow: {
      const cudaAccessPolicyWindow& win = value->accessPolicyWindow;
      w.base_ptr = reinterpret_cast<uintptr_t>(win.base_ptr);
      w.num_bytes = win.num_bytes;
      w.hit_ratio = win.hitRatio;
      w.hit_prop = static_cast<uint32_t>(win.hitProp);
      w.miss_prop = static_cast<uint32_t>(win.missProp);
      break;
    }
    case cudaLaunchAttributeSynchronizationPolicy: w.value = static_cast<int32_t>(value->syncPolicy); break;
    case cudaLaunchAttributePriority: w.value = value->priority; break;
    case cudaLaunchAttributeMemSyncDomainMap:
      w.domain_default = value->memSyncDomainMap.default_;
      w.domain_remote = value->memSyncDomainMap.remote;
      break;
    case cudaLaunchAttributeMemSyncDomain: w.value = static_cast<int32_t>(value->memSyncDomain); break;
    default: break;
  }
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  // A round trip: a bad value (or a window over memory that is not the app's, which only
  // the host knows) is this call's error, as natively, not a later one.
  return record(static_cast<cudaError_t>(remote->call<api::Call::StreamSetAttribute>(a).status));
}

cudaError_t get_attribute(cudaStream_t stream, cudaLaunchAttributeID id, cudaLaunchAttributeValue* out,
                          bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  if (out == nullptr || !is_stream_attribute(id)) return record(cudaErrorInvalidValue);
  api::StreamGetAttributeArgs a{};
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &a.stream)) return record(e);
  a.id = static_cast<uint32_t>(id);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  const auto r = remote->call<api::Call::StreamGetAttribute>(a);
  if (r.status != 0) return record(static_cast<cudaError_t>(r.status));
  const api::StreamAttributeValue& w = r.reply;
  std::memset(out, 0, sizeof *out);
  switch (id) {
    case cudaLaunchAttributeAccessPolicyWindow:
      out->accessPolicyWindow.base_ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(w.base_ptr));
      out->accessPolicyWindow.num_bytes = w.num_bytes;
      out->accessPolicyWindow.hitRatio = w.hit_ratio;
      out->accessPolicyWindow.hitProp = static_cast<cudaAccessProperty>(w.hit_prop);
      out->accessPolicyWindow.missProp = static_cast<cudaAccessProperty>(w.miss_prop);
      break;
    case cudaLaunchAttributeSynchronizationPolicy: out->syncPolicy = static_cast<cudaSynchronizationPolicy>(w.value); break;
    case cudaLaunchAttributePriority: out->priority = w.value; break;
    case cudaLaunchAttributeMemSyncDomainMap:
      out->memSyncDomainMap.default_ = w.domain_default;
      out->memSyncDomainMap.remote = w.domain_remote;
      break;
    case cudaLaunchAttributeMemSyncDomain: out->memSyncDomain = static_cast<cudaLaunchMemSyncDomain>(w.value); break;
    default: break;
  }
  return cudaSuccess;
}

cudaError_t copy_attributes(cudaStream_t dst, cudaStream_t src, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  api::StreamCopyAttributesArgs a{};
  if (cudaError_t e = stream_wire_handle(dst, per_thread, &a.dst)) return record(e);
  if (cudaError_t e = stream_wire_handle(src, per_thread, &a.src)) return record(e);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  return record(remote->enqueue<api::Call::StreamCopyAttributes>(a));
}

}  // namespace
}  // namespace vmcuda::guest

using namespace vmcuda::guest;

cudaError_t cudaStreamSetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                   const cudaLaunchAttributeValue* value) {
  return set_attribute(hStream, attr, value, false);
}
cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                        const cudaLaunchAttributeValue* value) {
  return set_attribute(hStream, attr, value, true);
}
cudaError_t cudaStreamGetAttribute(cudaStream_t hStream, cudaLaunchAttributeID attr, cudaLaunchAttributeValue* value_out) {
  return get_attribute(hStream, attr, value_out, false);
}
cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t hStream, cudaLaunchAttributeID attr,
                                        cudaLaunchAttributeValue* value_out) {
  return get_attribute(hStream, attr, value_out, true);
}
cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src) { return copy_attributes(dst, src, false); }
cudaError_t cudaStreamCopyAttributes_ptsz(cudaStream_t dst, cudaStream_t src) { return copy_attributes(dst, src, true); }

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithPriority(pStream, 0, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return cudaStreamCreateWithPriority(pStream, flags, 0);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  if (cudaError_t e = enter_device_call()) return e;
  if (pStream == nullptr || (flags & ~unsigned{cudaStreamNonBlocking})) return record(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  const uint64_t h = handles::next();
  if (!handles::add_stream(h, {flags, priority, Remote::thread_device()})) return record(cudaErrorMemoryAllocation);
  {
    auto lock = remote->lock();
    if (cudaError_t e = remote->enqueue<vmcuda::api::Call::StreamCreate>({h, flags, priority})) {
      handles::remove_stream(h);
      return record(e);
    }
  }
  *pStream = reinterpret_cast<cudaStream_t>(h);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = enter_device_call()) return e;
  // The special streams are not the app's to destroy; nor are unknown handles.
  const auto h = reinterpret_cast<uintptr_t>(stream);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  if (!handles::remove_stream(h)) return record(cudaErrorInvalidResourceHandle);
  auto lock = remote->lock();
  // Returns at once, as CUDA's does: the host frees the stream when its work is done.
  return record(remote->enqueue<vmcuda::api::Call::StreamDestroy>({h}));
}

cudaError_t vmcuda::guest::finish_on_per_thread_stream(cudaError_t issued) noexcept {
  return issued != cudaSuccess ? issued : cudaStreamSynchronize(cudaStreamPerThread);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return stream_round_trip<vmcuda::api::Call::StreamSynchronize>(stream, false, false);
}
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  return stream_round_trip<vmcuda::api::Call::StreamSynchronize>(stream, true, false);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return stream_round_trip<vmcuda::api::Call::StreamQuery>(stream, false, true);
}
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) {
  return stream_round_trip<vmcuda::api::Call::StreamQuery>(stream, true, true);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return wait_event(stream, event, flags, false);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return wait_event(stream, event, flags, true);
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags) { return get_flags(hStream, flags, false); }
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int* flags) {
  return get_flags(hStream, flags, true);
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int* device) { return get_device(hStream, device, false); }
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int* device) { return get_device(hStream, device, true); }

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
  return get_priority(hStream, priority, false);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int* priority) {
  return get_priority(hStream, priority, true);
}

// TODO(vgpu-db): local, from the handshake, once the device properties carry the range.
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  const auto r = remote->call<vmcuda::api::Call::StreamPriorityRange>({});
  if (r.status != 0) return record(static_cast<cudaError_t>(r.status));
  // Either pointer may be NULL.
  if (leastPriority) *leastPriority = r.reply.least;
  if (greatestPriority) *greatestPriority = r.reply.greatest;
  return cudaSuccess;
}
