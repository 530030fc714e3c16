// Event calls (calls.def, 0x1600). Guest-made handles, as for streams (stream.cc): a
// per-client table guest handle -> CUevent, every handle checked.
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

const Session::Event* Session::find_event(uint64_t handle) const {
  auto it = events_.find(handle);
  return it == events_.end() ? nullptr : &it->second;
}

int32_t Session::on_EventCreate(const api::EventCreateArgs& a, api::Empty&, Request&) {
  if (a.handle < api::kFirstGuestHandle || events_.contains(a.handle)) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    return CUDA_ERROR_INVALID_VALUE;
  if (a.flags & CU_EVENT_INTERPROCESS) {
    // CUDA's own rule first, then ours: events are not shared between processes (nor VMs).
    if (!(a.flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (events_.size() >= limits_.max_events) {
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused an event: the client has " + std::to_string(events_.size()) +
                                 " (the limit)");
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUevent e = nullptr;
  if (CUresult r = api_.cuEventCreate(&e, a.flags); r != CUDA_SUCCESS) return r;
  events_[a.handle] = {e, current_, a.flags};
  return CUDA_SUCCESS;
}

int32_t Session::on_EventDestroy(const api::EventArgs& a, api::Empty&, Request&) {
  auto it = events_.find(a.event);
  if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  const Event ev = it->second;
  events_.erase(it);
  // Returns at once; a recorded event that has not completed is freed when it does.
  return on_device(ev.device, [&] { return api_.cuEventDestroy_v2(ev.event); });
}

int32_t Session::on_EventRecord(const api::EventRecordArgs& a, api::Empty&, Request&) {
  const Event* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  // cudaEventRecord fails when the event and the stream belong to different devices.
  if (device != ev->device) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  const CUevent e = ev->event;
  return on_device(device, [&] {
    return a.flags ? api_.cuEventRecordWithFlags(e, s, a.flags) : api_.cuEventRecord(e, s);
  });
}

int32_t Session::on_EventSynchronize(const api::EventArgs& a, api::Empty&, Request& req) {
  const Event* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  // TODO(perf): as StreamSynchronize, on the GPU's working thread.
  const CUevent e = ev->event;
  return output_after_sync(
      managed_after_sync(req.ctx, ev->device, on_device(ev->device, [&] { return api_.cuEventSynchronize(e); })));
}

int32_t Session::on_EventQuery(const api::EventArgs& a, api::Empty&, Request& req) {
  const Event* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  const CUevent e = ev->event;
  return managed_after_sync(req.ctx, ev->device, on_device(ev->device, [&] { return api_.cuEventQuery(e); }));  // NOT_READY while pending
}

int32_t Session::on_EventElapsedTime(const api::EventPairArgs& a, api::ElapsedTimeReply& r, Request&) {
  const Event* start = find_event(a.start);
  const Event* end = find_event(a.end);
  if (!start || !end) return CUDA_ERROR_INVALID_HANDLE;
  if (start->device != end->device) return CUDA_ERROR_INVALID_HANDLE;  // "will fail" across devices
  const CUevent s = start->event, e = end->event;
  // The driver answers CUDA_ERROR_INVALID_HANDLE for unrecorded or timing-disabled
  // events and CUDA_ERROR_NOT_READY for incomplete ones.
  return on_device(start->device, [&] { return api_.cuEventElapsedTime_v2(&r.milliseconds, s, e); });
}

}  // namespace vmcuda::host
