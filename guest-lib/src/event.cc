// event area: events with guest-made handles (stream_event.h). Creation, recording and
// destruction are queued (lazy RPC); synchronize, query and elapsed time are round trips
// that also send what is queued. The elapsed time is measured by the host's driver.
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream, unsigned int flags, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t ev, s;
  if (cudaError_t e = event_wire_handle(event, &ev)) return record(e);
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &s)) return record(e);
  if (flags & ~unsigned{cudaEventRecordExternal}) return record(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  // An event and a stream of different devices: refused at once, as CUDA does (the host
  // checks it too, but a queued call's error would come with the next synchronizing one).
  // The special streams are the calling thread's current device's.
  EventInfo event_info;
  StreamInfo stream_info;
  const int stream_device = handles::find_stream(s, &stream_info) ? stream_info.device : Remote::thread_device();
  if (handles::find_event(ev, &event_info) && event_info.device != stream_device)
    return record(cudaErrorInvalidResourceHandle);
  auto lock = remote->lock();
  if (cudaError_t e = remote->enqueue<api::Call::EventRecord>({ev, s, flags, 0})) return record(e);
  // An interprocess event may be waited for by another program at once (it learns of the
  // record through its own channel, a pipe): the record must have reached the GPU by then,
  // as natively, so it is not left in the lazy queue.
  if (event_info.flags & cudaEventInterprocess) return record(remote->flush());
  return cudaSuccess;
}

// A round trip on one event: sends what is queued first.
template <api::Call C>
cudaError_t event_round_trip(cudaEvent_t event, bool not_ready_is_an_answer) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t ev;
  if (cudaError_t e = event_wire_handle(event, &ev)) return record(e);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  const auto status = static_cast<cudaError_t>(remote->call<C>({ev}).status);
  // "Not ready" is an answer, not an error: it does not become the last error.
  if (not_ready_is_an_answer && status == cudaErrorNotReady) return status;
  return record(status);
}

}  // namespace
}  // namespace vmcuda::guest

using namespace vmcuda::guest;

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (cudaError_t e = enter_device_call()) return e;
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnown)) return record(cudaErrorInvalidValue);
  // CUDA: an interprocess event must have timing disabled (shared with programs of this VM
  // through cudaIpcGetEventHandle).
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return record(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  const uint64_t h = handles::next();
  if (!handles::add_event(h, {flags, Remote::thread_device()})) return record(cudaErrorMemoryAllocation);
  {
    auto lock = remote->lock();
    if (cudaError_t e = remote->enqueue<vmcuda::api::Call::EventCreate>({h, flags, 0})) {
      handles::remove_event(h);
      return record(e);
    }
  }
  *event = reinterpret_cast<cudaEvent_t>(h);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) { return record_event(event, stream, 0, false); }
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  return record_event(event, stream, 0, true);
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  return record_event(event, stream, flags, false);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  return record_event(event, stream, flags, true);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event_round_trip<vmcuda::api::Call::EventQuery>(event, true);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event_round_trip<vmcuda::api::Call::EventSynchronize>(event, false);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  const auto h = reinterpret_cast<uintptr_t>(event);
  if (h == 0 || !handles::remove_event(h)) return record(cudaErrorInvalidResourceHandle);
  auto lock = remote->lock();
  // Returns at once, as CUDA's does: a pending event is freed by the host when it completes.
  return record(remote->enqueue<vmcuda::api::Call::EventDestroy>({h}));
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t e = enter_device_call()) return e;
  if (ms == nullptr) return record(cudaErrorInvalidValue);
  uint64_t s, e;
  if (cudaError_t r = event_wire_handle(start, &s)) return record(r);
  if (cudaError_t r = event_wire_handle(end, &e)) return record(r);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  const auto r = remote->call<vmcuda::api::Call::EventElapsedTime>({s, e});
  const auto status = static_cast<cudaError_t>(r.status);
  if (status == cudaErrorNotReady) return status;  // an answer, as for cudaEventQuery
  if (status != cudaSuccess) return record(status);
  *ms = r.reply.milliseconds;
  return cudaSuccess;
}
