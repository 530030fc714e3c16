// Event calls (calls.def, 0x1600). Guest-made handles, as for streams (stream.cc): a
// per-client table guest handle -> CUevent, every handle checked.
#include <cmath>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

int32_t Session::on_EventCreate(const api::EventCreateArgs& a, api::Empty&, Request&) {
  if (a.handle < api::kFirstGuestHandle || find_event(a.handle)) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    return CUDA_ERROR_INVALID_VALUE;
  if (a.flags & CU_EVENT_INTERPROCESS) {
    // CUDA's own rule first, then ours: events are shared only between programs of one VM,
    // through its table (ipc.cc); without one, not at all.
    if (!(a.flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    if (!limits_.ipc) return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (vol_.count(ObjectKind::Event) >= limits_.max_events) {
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused an event: the client has " +
                                 std::to_string(vol_.count(ObjectKind::Event)) + " (the limit)");
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUevent e = nullptr;
  if (CUresult r = api_.cuEventCreate(&e, driver_event_flags(a.flags)); r != CUDA_SUCCESS) return r;
  vol_.add(ObjectKind::Event, current_, a.handle, vol_.context(current_)->id, EventObject{e, a.flags, false});
  return CUDA_SUCCESS;
}

int32_t Session::on_EventDestroy(const api::EventArgs& a, api::Empty&, Request&) {
  // Returns at once; a recorded event that has not completed is freed when it does.
  return destroy_entry(ObjectKind::Event, a.event, CUDA_ERROR_INVALID_HANDLE);
}

int32_t Session::on_EventRecord(const api::EventRecordArgs& a, api::Empty&, Request&) {
  Object* ev = vol_.find(ObjectKind::Event, a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  // cudaEventRecord fails when the event and the stream belong to different devices.
  if (device != ev->device) return CUDA_ERROR_INVALID_HANDLE;
  if (a.flags & ~CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  EventObject& eo = ev->as<EventObject>();
  // Another client's event opened within the process (ipc.cc): recorded through a stream of
  // its own context, the exporter's.
  if (ipc_borrowed_event(eo, ev->device)) return a.flags ? CUDA_ERROR_INVALID_HANDLE : ipc_record_borrowed(eo, s, device);
  eo.timing_lost = false;  // recorded anew: its timestamp is this process's own again
  eo.recorded = true;
  const CUevent e = eo.event;
  // Recorded into an open capture, the event could fork the capture onto another stream
  // later, which a capture carried across a suspend would not remember (graph.cc).
  if (captures_open_) {
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    on_device(device, [&] { return api_.cuStreamIsCapturing(s, &status); });
    if (status != CU_STREAM_CAPTURE_STATUS_NONE) capture_events_.insert(a.event);
    else capture_events_.erase(a.event);
  }
  return on_device(device, [&] {
    return a.flags ? api_.cuEventRecordWithFlags(e, s, a.flags) : api_.cuEventRecord(e, s);
  });
}

int32_t Session::on_EventSynchronize(const api::EventArgs& a, api::Empty&, Request& req) {
  const Object* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  // TODO(perf): as StreamSynchronize, on the GPU's working thread.
  const CUevent e = ev->as<EventObject>().event;
  return managed_after_sync(req.ctx, ev->device, on_device(ev->device, [&] { return api_.cuEventSynchronize(e); }));
}

int32_t Session::on_EventQuery(const api::EventArgs& a, api::Empty&, Request& req) {
  const Object* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  const CUevent e = ev->as<EventObject>().event;
  return managed_after_sync(req.ctx, ev->device, on_device(ev->device, [&] { return api_.cuEventQuery(e); }));  // NOT_READY while pending
}

int32_t Session::on_EventElapsedTime(const api::EventPairArgs& a, api::ElapsedTimeReply& r, Request&) {
  const Object* start = find_event(a.start);
  const Object* end = find_event(a.end);
  if (!start || !end) return CUDA_ERROR_INVALID_HANDLE;
  if (start->device != end->device) return CUDA_ERROR_INVALID_HANDLE;  // "will fail" across devices
  // Events recorded before a suspend keep their GPU time before it; the time the VM spent
  // suspended does not count (docs/snapshots.md). An event with no known time is refused as
  // CUDA refuses an event that was not recorded, never a made-up time.
  const EventObject &se = start->as<EventObject>(), &ee = end->as<EventObject>();
  if (se.timing_lost || ee.timing_lost) {
    // An event to itself: recorded before the suspend, it had completed (the suspend drained
    // everything), and no time passes between it and itself.
    if (a.start == a.end && se.recorded && !(se.flags & CU_EVENT_DISABLE_TIMING)) {
      r.milliseconds = 0.0f;
      return CUDA_SUCCESS;
    }
    // Each event's time after the device's resume mark (negative before it).
    const int device = start->device;
    auto at = [&](const EventObject& ev, double* t) -> CUresult {
      if (ev.flags & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
      if (ev.timing_lost) {
        if (std::isnan(ev.before_suspend_ms)) return CUDA_ERROR_INVALID_HANDLE;
        *t = -ev.before_suspend_ms;
        return CUDA_SUCCESS;
      }
      if (static_cast<size_t>(device) >= resume_marks_.size() || !resume_marks_[device])
        return CUDA_ERROR_INVALID_HANDLE;
      float ms = 0;
      const CUresult e = on_device(device, [&] { return api_.cuEventElapsedTime_v2(&ms, resume_marks_[device], ev.event); });
      *t = ms;
      return e;
    };
    double ts = 0, te = 0;
    if (CUresult e = at(se, &ts); e != CUDA_SUCCESS) return e;
    if (CUresult e = at(ee, &te); e != CUDA_SUCCESS) return e;
    r.milliseconds = static_cast<float>(te - ts);
    return CUDA_SUCCESS;
  }
  const CUevent s = start->as<EventObject>().event, e = end->as<EventObject>().event;
  // The driver answers CUDA_ERROR_INVALID_HANDLE for unrecorded or timing-disabled
  // events and CUDA_ERROR_NOT_READY for incomplete ones.
  return on_device(start->device, [&] { return api_.cuEventElapsedTime_v2(&r.milliseconds, s, e); });
}

}  // namespace vmcuda::host
