// Stream calls (calls.def, 0x1500). The guest makes the handles (so that creation can be
// queued); each client has its own table guest handle -> CUstream, and every handle it
// names is checked against that table: a forged or stale handle is
// CUDA_ERROR_INVALID_HANDLE (cudaErrorInvalidResourceHandle), never a driver object of
// another client.
#include <algorithm>
#include <cstring>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {
namespace {

// CUaccessProperty, CUsynchronizationPolicy and CUlaunchMemSyncDomain's ranges (cuda.h).
constexpr uint32_t kAccessPropertyMax = 2;    // normal, streaming, persisting
constexpr uint32_t kAccessPropertyStreaming = 1;
constexpr int32_t kSyncPolicyFirst = 1, kSyncPolicyLast = 4;  // auto, spin, yield, blocking sync
constexpr int32_t kMemSyncDomainRemote = 1;
// CUstreamAttrID: the attributes a stream has (and a copy replaces).
constexpr uint32_t kStreamAttributeIds[] = {CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
                                            CU_LAUNCH_ATTRIBUTE_PRIORITY, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
                                            CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN};

// What a new stream reads (tests/cuda/expected/stream_attributes.out, "-- defaults"): no
// window, a policy never set (-1), domain 0, map default -> 0 and remote -> 1. A resume's new
// stream has these already; setting them could even fail (a GPU with one domain). The
// priority is not among them: a stream's own is kept whatever it is.
bool as_new_stream(uint32_t id, const CUlaunchAttributeValue& v) {
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: return v.accessPolicyWindow.num_bytes == 0;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: return v.syncPolicy < kSyncPolicyFirst;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      return v.memSyncDomainMap.default_ == 0 && v.memSyncDomainMap.remote == kMemSyncDomainRemote;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: return v.memSyncDomain == 0;
    default: return false;
  }
}

// The wire's fields of one stream attribute into the driver's union, checked (a bad value
// is the guest's cudaErrorInvalidValue, as the driver would answer; the driver checks
// again, against the device). Only the id's fields are read.
CUresult to_driver(uint32_t id, const api::StreamAttributeValue& w, CUlaunchAttributeValue* v) {
  std::memset(v, 0, sizeof *v);
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      // !(x >= 0 && x <= 1) also refuses NaN. The hit property is not checked: driver 580
      // takes any value and gives it back (seen on the H100: 7); it only names a cache policy.
      if (!(w.hit_ratio >= 0.0f && w.hit_ratio <= 1.0f) || w.hit_prop > INT32_MAX ||
          w.miss_prop > kAccessPropertyStreaming)  // a miss is normal or streaming, never persisting
        return CUDA_ERROR_INVALID_VALUE;
      auto& win = v->accessPolicyWindow;
      win.base_ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(w.base_ptr));
      win.num_bytes = w.num_bytes;
      win.hitRatio = w.hit_ratio;
      win.hitProp = static_cast<int>(w.hit_prop);
      win.missProp = static_cast<int>(w.miss_prop);
      return CUDA_SUCCESS;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      if (w.value < kSyncPolicyFirst || w.value > kSyncPolicyLast) return CUDA_ERROR_INVALID_VALUE;
      v->syncPolicy = w.value;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      v->priority = w.value;  // the driver clamps it to the device's range
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      v->memSyncDomainMap.default_ = w.domain_default;  // the driver checks them against the device's count
      v->memSyncDomainMap.remote = w.domain_remote;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      if (w.value < 0 || w.value > kMemSyncDomainRemote) return CUDA_ERROR_INVALID_VALUE;
      v->memSyncDomain = w.value;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // not a stream attribute CUDA has
  }
}

api::StreamAttributeValue from_driver(uint32_t id, const CUlaunchAttributeValue& v) {
  api::StreamAttributeValue w{};
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      w.base_ptr = reinterpret_cast<uintptr_t>(v.accessPolicyWindow.base_ptr);
      w.num_bytes = v.accessPolicyWindow.num_bytes;
      w.hit_ratio = v.accessPolicyWindow.hitRatio;
      w.hit_prop = static_cast<uint32_t>(v.accessPolicyWindow.hitProp);
      w.miss_prop = static_cast<uint32_t>(v.accessPolicyWindow.missProp);
      break;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: w.value = v.syncPolicy; break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: w.value = v.priority; break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      w.domain_default = v.memSyncDomainMap.default_;
      w.domain_remote = v.memSyncDomainMap.remote;
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: w.value = v.memSyncDomain; break;
    default: break;
  }
  return w;
}

}  // namespace

CUresult Session::apply_stream_attribute(CUstream s, uint32_t id, const api::StreamAttributeValue& w) {
  CUlaunchAttributeValue v;
  if (CUresult e = to_driver(id, w, &v); e != CUDA_SUCCESS) return e;
  return api_.cuStreamSetAttribute(s, static_cast<int>(id), &v);
}

CUresult Session::resolve_stream(uint64_t handle, CUstream* stream, int* device) {
  switch (handle) {
    case api::kStreamDefault:
      *stream = nullptr;  // the context's NULL stream: the legacy default stream
      *device = current_;
      return CUDA_SUCCESS;
    case api::kStreamLegacy:
      *stream = CU_STREAM_LEGACY;
      *device = current_;
      return CUDA_SUCCESS;
    case api::kStreamPerThread: {
      // One stream of the client's own per device, never the driver's CU_STREAM_PER_THREAD:
      // that one is the calling host thread's, and a client's calls run on two threads (its
      // service thread, and the GPU's working thread for work that only issues), so a copy
      // could overtake a kernel before it on the "same" stream. Blocking, as a per-thread
      // default stream is against the legacy one (flags 0). One per guest process, not per guest
      // thread: more ordering than CUDA gives, never less. An entry of the object list, so
      // that what the guest sets on it is carried by a suspend like any stream's.
      *device = current_;
      if (Object* o = vol_.find(ObjectKind::PerThreadStream, static_cast<uint64_t>(current_)))
        return *stream = o->as<StreamObject>().stream, CUDA_SUCCESS;
      const Object* ctx = vol_.context(current_);
      if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
      CUstream s = nullptr;
      if (CUresult e = api_.cuStreamCreateWithPriority(&s, 0, 0); e != CUDA_SUCCESS) return e;
      vol_.add(ObjectKind::PerThreadStream, current_, static_cast<uint64_t>(current_), ctx->id, StreamObject{s, 0, 0});
      *stream = s;
      return CUDA_SUCCESS;
    }
    default: {
      const Object* o = vol_.find(ObjectKind::Stream, handle);
      if (!o) return CUDA_ERROR_INVALID_HANDLE;
      *stream = o->as<StreamObject>().stream;
      *device = o->device;
      return CUDA_SUCCESS;
    }
  }
}

StreamObject* Session::stream_record(uint64_t handle, int device) {
  if (handle == api::kStreamDefault || handle == api::kStreamLegacy) {
    // The context's NULL stream (stream 0 and cudaStreamLegacy are the same stream): an entry
    // made at the first attribute set on it, so that a suspend carries its attributes.
    if (Object* o = vol_.find(ObjectKind::NullStream, static_cast<uint64_t>(device))) return &o->as<StreamObject>();
    const Object* ctx = vol_.context(device);
    if (!ctx) return nullptr;
    return &vol_.add(ObjectKind::NullStream, device, static_cast<uint64_t>(device), ctx->id, StreamObject{}).as<StreamObject>();
  }
  Object* o = handle == api::kStreamPerThread ? vol_.find(ObjectKind::PerThreadStream, static_cast<uint64_t>(device))
                                              : vol_.find(ObjectKind::Stream, handle);
  return o ? &o->as<StreamObject>() : nullptr;
}

int32_t Session::on_StreamCreate(const api::StreamCreateArgs& a, api::Empty&, Request&) {
  if (a.handle < api::kFirstGuestHandle || vol_.find(ObjectKind::Stream, a.handle)) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  if (vol_.count(ObjectKind::Stream) >= limits_.max_streams) {
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused a stream: the client has " + std::to_string(vol_.count(ObjectKind::Stream)) +
                                 " (the limit)");
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUstream s = nullptr;
  // The driver clamps the priority to the device's range, as cudaStreamCreateWithPriority does.
  if (CUresult e = api_.cuStreamCreateWithPriority(&s, a.flags, a.priority); e != CUDA_SUCCESS) return e;
  vol_.add(ObjectKind::Stream, current_, a.handle, vol_.context(current_)->id, StreamObject{s, a.flags, a.priority});
  return CUDA_SUCCESS;
}

int32_t Session::on_StreamDestroy(const api::StreamArgs& a, api::Empty&, Request&) {
  // The special streams are not the app's to destroy (cudaErrorInvalidResourceHandle).
  // Returns at once; the driver frees the stream when its work is done.
  return destroy_entry(ObjectKind::Stream, a.stream, CUDA_ERROR_INVALID_HANDLE);
}

int32_t Session::on_StreamSynchronize(const api::StreamArgs& a, api::Empty&, Request& req) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  // TODO(perf): synchronous waits move to the GPU's working thread (events), as for
  // DeviceSynchronize.
  const CUresult r = on_device(device, [&] { return api_.cuStreamSynchronize(s); });
  if (r == CUDA_SUCCESS) fair_synced(device, false, s);  // fair_share.h
  return managed_after_sync(req.ctx, device, r);
}

int32_t Session::on_StreamQuery(const api::StreamArgs& a, api::Empty&, Request& req) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  return managed_after_sync(req.ctx, device, on_device(device, [&] { return api_.cuStreamQuery(s); }));  // NOT_READY while busy
}

int32_t Session::on_StreamWaitEvent(const api::StreamWaitEventArgs& a, api::Empty&, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  const Object* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  // Allowed across devices (the stream waits on another device's event).
  const CUevent e = ev->as<EventObject>().event;
  return on_device(device, [&] { return api_.cuStreamWaitEvent(s, e, a.flags); });
}

int32_t Session::on_StreamSetAttribute(const api::StreamSetAttributeArgs& a, api::Empty&, Request&) {
  if (a.pad != 0 || std::any_of(std::begin(a.value.pad), std::end(a.value.pad), [](uint8_t b) { return b != 0; }))
    return guest_fault("StreamSetAttribute: padding not zero");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  // A window names device memory: only the client's own (a window over another client's
  // memory would steer the L2 for it). An empty window (num_bytes 0) resets the policy.
  api::StreamAttributeValue w = a.value;
  if (a.id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) {
    if (w.num_bytes == 0) w.base_ptr = 0;
    else if (owner_of(w.base_ptr, w.num_bytes) < 0) return CUDA_ERROR_INVALID_VALUE;
  }
  const CUresult r = on_device(device, [&] { return apply_stream_attribute(s, a.id, w); });
  // Kept with the stream, to be set again after a resume (suspend.cc); the NULL stream's too
  // (a NullStream entry: the context keeps them, and a suspend releases the context).
  if (r == CUDA_SUCCESS)
    if (StreamObject* st = stream_record(a.stream, device)) st->attributes[a.id] = w;
  return r;
}

int32_t Session::on_StreamGetAttribute(const api::StreamGetAttributeArgs& a, api::StreamAttributeValue& r, Request&) {
  if (a.pad != 0) return guest_fault("StreamGetAttribute: padding not zero");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  api::StreamAttributeValue probe{};
  probe.value = kSyncPolicyFirst;  // any valid value: only the id is checked here
  CUlaunchAttributeValue v;
  if (CUresult e = to_driver(a.id, probe, &v); e != CUDA_SUCCESS) return e;
  std::memset(&v, 0, sizeof v);
  if (CUresult e = on_device(device, [&] { return api_.cuStreamGetAttribute(s, static_cast<int>(a.id), &v); });
      e != CUDA_SUCCESS)
    return e;
  r = from_driver(a.id, v);
  return CUDA_SUCCESS;
}

int32_t Session::on_StreamCopyAttributes(const api::StreamCopyAttributesArgs& a, api::Empty&, Request&) {
  CUstream dst, src;
  int dst_device, src_device;
  if (CUresult e = resolve_stream(a.dst, &dst, &dst_device); e != CUDA_SUCCESS) return e;
  if (CUresult e = resolve_stream(a.src, &src, &src_device); e != CUDA_SUCCESS) return e;
  const CUresult r = on_device(dst_device, [&] { return api_.cuStreamCopyAttributes(dst, src); });
  if (r != CUDA_SUCCESS) return r;
  // What a resume sets again: the destination's attributes as the driver has them now, read
  // back (the copy replaced all of them, the priority too, from whichever stream, the NULL
  // stream included, whose settings the stub may not know), less those a new stream has.
  StreamObject* d = stream_record(a.dst, dst_device);
  if (!d) return CUDA_SUCCESS;
  return on_device(dst_device, [&]() -> CUresult {
    std::map<uint32_t, api::StreamAttributeValue> now;
    for (uint32_t id : kStreamAttributeIds) {
      CUlaunchAttributeValue v;
      std::memset(&v, 0, sizeof v);
      if (CUresult e = api_.cuStreamGetAttribute(dst, static_cast<int>(id), &v); e != CUDA_SUCCESS) return e;
      if (!as_new_stream(id, v)) now[id] = from_driver(id, v);
    }
    d->attributes = std::move(now);
    return CUDA_SUCCESS;
  });
}

}  // namespace vmcuda::host
