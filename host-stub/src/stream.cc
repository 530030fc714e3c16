// Stream calls (calls.def, 0x1500). The guest makes the handles (so that creation can be
// queued); each client has its own table guest handle -> CUstream, and every handle it
// names is checked against that table: a forged or stale handle is
// CUDA_ERROR_INVALID_HANDLE (cudaErrorInvalidResourceHandle), never a driver object of
// another client.
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

CUresult Session::resolve_stream(uint64_t handle, CUstream* stream, int* device) const {
  switch (handle) {
    case api::kStreamDefault:
      *stream = nullptr;  // the context's NULL stream: the legacy default stream
      *device = current_;
      return CUDA_SUCCESS;
    case api::kStreamLegacy:
      *stream = CU_STREAM_LEGACY;
      *device = current_;
      return CUDA_SUCCESS;
    case api::kStreamPerThread:
      // TODO(streams): one per-thread default stream per guest thread. All of a client's
      // calls run on its slot's service thread, so CU_STREAM_PER_THREAD is one stream per
      // guest process: ordered like the guest's threads' streams together (more ordering
      // than CUDA gives, never less).
      *stream = CU_STREAM_PER_THREAD;
      *device = current_;
      return CUDA_SUCCESS;
    default: {
      const Object* o = vol_.find(ObjectKind::Stream, handle);
      if (!o) return CUDA_ERROR_INVALID_HANDLE;
      *stream = o->as<StreamObject>().stream;
      *device = o->device;
      return CUDA_SUCCESS;
    }
  }
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

int32_t Session::on_StreamGetPriority(const api::StreamArgs& a, api::StreamPriorityReply& r, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  // The clamped priority the driver keeps (the guest knows the flags itself).
  return on_device(device, [&] { return api_.cuStreamGetPriority(s, &r.priority); });
}

int32_t Session::on_StreamPriorityRange(const api::Empty&, api::StreamPriorityRangeReply& r, Request&) {
  return api_.cuCtxGetStreamPriorityRange(&r.least, &r.greatest);
}

}  // namespace vmcuda::host
