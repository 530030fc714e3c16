// Pitched memory and 2D copies (calls.def, 0x1120): cuMemAllocPitch, cuMemcpy2D and
// cuMemsetD2D8. As for the 1D calls (memory.cc), every device region a client names must
// lie inside one of its own allocations or module globals, here all rows of it; and the
// host side of a copy must lie inside the frame or the heap range it came with.
#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

namespace {

// width * height, or false when it overflows.
bool packed_bytes(uint64_t width, uint64_t height, uint64_t* bytes) {
  if (height != 0 && width > ~0ull / height) return false;
  *bytes = width * height;
  return true;
}

// Bytes a host region of `height` rows of `width` bytes, `pitch` apart, spans; false when
// the pitch is too small or the span overflows.
bool host_span(uint64_t pitch, uint64_t width, uint64_t height, uint64_t* span) {
  if (width > pitch) return false;
  if (height == 0) return *span = 0, true;
  if (pitch != 0 && height - 1 > (~0ull - width) / pitch) return false;
  *span = pitch * (height - 1) + width;
  return true;
}

CUDA_MEMCPY2D device_to_device(uint64_t dst, uint64_t dst_pitch, uint64_t src, uint64_t src_pitch, uint64_t width,
                               uint64_t height) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.srcPitch = src_pitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = dst_pitch;
  c.WidthInBytes = width;
  c.Height = height;
  return c;
}
CUDA_MEMCPY2D host_to_device(uint64_t dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch, uint64_t width,
                             uint64_t height) {
  CUDA_MEMCPY2D c = device_to_device(dst, dst_pitch, 0, src_pitch, width, height);
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = src;
  return c;
}
CUDA_MEMCPY2D device_to_host(void* dst, uint64_t dst_pitch, uint64_t src, uint64_t src_pitch, uint64_t width,
                             uint64_t height) {
  CUDA_MEMCPY2D c = device_to_device(0, dst_pitch, src, src_pitch, width, height);
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = dst;
  return c;
}

}  // namespace

namespace {
constexpr size_t kMaxCachedPitches = 1024;  // pitches learnt per client (finding 10.10: unbounded)
}  // namespace

int32_t Session::on_MallocPitch(const api::MallocPitchArgs& a, api::PitchReply& r, Request&) {
  if (a.element_bytes != 4 && a.element_bytes != 8 && a.element_bytes != 16) return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) {
    r.ptr = 0;
    r.pitch = 0;
    return CUDA_SUCCESS;
  }
  uint64_t least;
  if (!packed_bytes(a.width, a.height, &least) || least > memory_quota())  // can never fit
    return CUDA_ERROR_OUT_OF_MEMORY;
  // The driver's pitch for this width (learnt once with a one-row cuMemAllocPitch), so
  // pitches are the native ones; the memory itself comes from the arena.
  const auto key = std::make_tuple(devices_[current_], a.width, a.element_bytes);
  auto known = pitches_.find(key);
  if (known == pitches_.end()) {
    CUdeviceptr probe = 0;
    size_t pitch = 0;
    if (CUresult e = api_.cuMemAllocPitch_v2(&probe, &pitch, a.width, 1, a.element_bytes); e != CUDA_SUCCESS)
      return e;
    api_.cuMemFree_v2(probe);
    if (pitch < a.width) return CUDA_ERROR_INVALID_VALUE;  // not what the driver promises
    if (pitches_.size() >= kMaxCachedPitches) pitches_.clear();  // a guest's every width: bounded
    known = pitches_.emplace(key, pitch).first;
  }
  const uint64_t pitch = known->second;
  // The pitch decides what the allocation holds (and what the quota counts).
  uint64_t bytes;
  if (!packed_bytes(pitch, a.height, &bytes)) return CUDA_ERROR_OUT_OF_MEMORY;  // the arena's meter: the quota
  uint64_t p = 0;
  if (CUresult e = arena_allocate(bytes, &p); e != CUDA_SUCCESS) return e;
  add_allocation(p, bytes);
  r.ptr = p;
  r.pitch = pitch;
  return CUDA_SUCCESS;
}

int32_t Session::on_Copy2DToDeviceInline(const api::Copy2DInlineArgs& a, api::Empty&, Request& req) {
  uint64_t bytes;
  if (!packed_bytes(a.width, a.height, &bytes) || bytes != req.tail.size())
    return guest_fault("Copy2DToDeviceInline: a width/height that does not match the bytes sent");
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY2D c = host_to_device(a.device, a.device_pitch, req.tail.data(), a.width, a.width, a.height);
  return api_.cuMemcpy2D_v2(&c);
}

int32_t Session::on_Copy2DFromDeviceInline(const api::Copy2DInlineArgs& a, api::Empty&, Request& req) {
  uint64_t bytes;
  if (!packed_bytes(a.width, a.height, &bytes)) return guest_fault("Copy2DFromDeviceInline: the host rows do not fit the heap range");
  if (bytes > req.extra.size()) return guest_fault("Copy2DFromDeviceInline: a reply area too small for the data", ChannelStatus::kReplyTooSmall);
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  // Packed, straight into the shared reply area.
  const CUDA_MEMCPY2D c = device_to_host(req.extra.data(), a.width, a.device, a.device_pitch, a.width, a.height);
  CUresult e = api_.cuMemcpy2D_v2(&c);
  if (e == CUDA_SUCCESS) req.extra_bytes = static_cast<uint32_t>(bytes);
  return e;
}

int32_t Session::on_Copy2DToDeviceHeap(const api::Copy2DHeapArgs& a, api::Empty&, Request& req) {
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("Copy2DToDeviceHeap: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  uint64_t span;
  if (!host_span(a.host_pitch, a.width, a.height, &span) || span > host->size())
    return guest_fault("Copy2DToDeviceHeap: the host rows do not fit the heap range");
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY2D c = host_to_device(a.device, a.device_pitch, host->data(), a.host_pitch, a.width, a.height);
  return api_.cuMemcpy2D_v2(&c);
}

int32_t Session::on_Copy2DFromDeviceHeap(const api::Copy2DHeapArgs& a, api::Empty&, Request& req) {
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("Copy2DFromDeviceHeap: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  uint64_t span;
  if (!host_span(a.host_pitch, a.width, a.height, &span) || span > host->size())
    return guest_fault("Copy2DFromDeviceHeap: a width/height that does not match the bytes sent");
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY2D c = device_to_host(host->data(), a.host_pitch, a.device, a.device_pitch, a.width, a.height);
  return api_.cuMemcpy2D_v2(&c);
}

int32_t Session::on_Copy2DDeviceToDevice(const api::Copy2DDeviceArgs& a, api::Empty&, Request&) {
  if (!owns_2d(a.dst, a.dst_pitch, a.width, a.height) || !owns_2d(a.src, a.src_pitch, a.width, a.height))
    return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY2D c = device_to_device(a.dst, a.dst_pitch, a.src, a.src_pitch, a.width, a.height);
  return api_.cuMemcpy2D_v2(&c);
}

int32_t Session::on_Memset2D(const api::Memset2DArgs& a, api::Empty&, Request&) {
  const unsigned element = memset_width(a.element_bytes);
  if (!element) return guest_fault("Memset2D: an element size other than 1, 2 or 4");
  if (!owns_2d(a.dst, a.pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  return memset_2d_on(a.dst, a.pitch, a.value, a.width, a.height, element, nullptr, false);
}

}  // namespace vmcuda::host

// ---- async variants (0x1127): the same checks, ordered on the guest's stream (stream.cc
// resolves and checks it), run on the stream's device.
namespace vmcuda::host {

int32_t Session::on_Copy2DToDeviceInlineAsync(const api::Copy2DInlineAsyncArgs& a, api::Empty&, Request& req) {
  uint64_t bytes;
  if (!packed_bytes(a.width, a.height, &bytes) || bytes != req.tail.size())
    return guest_fault("Copy2DToDeviceInlineAsync: a width/height whose size overflows");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (CUresult e = refuse_in_capture(s, device, "cudaMemcpy2DAsync from pageable memory"); e != CUDA_SUCCESS) return e;
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  // `tail` is the decoder's private (pageable) copy: the driver stages it before returning.
  const CUDA_MEMCPY2D c = host_to_device(a.device, a.device_pitch, req.tail.data(), a.width, a.width, a.height);
  return on_device(device, [&] { return api_.cuMemcpy2DAsync_v2(&c, s); });
}

int32_t Session::on_Copy2DFromDeviceInlineAsync(const api::Copy2DInlineAsyncArgs& a, api::Empty&, Request& req) {
  uint64_t bytes;
  if (!packed_bytes(a.width, a.height, &bytes)) return guest_fault("Copy2DFromDeviceInlineAsync: a width/height whose size overflows");
  if (bytes > req.extra.size()) return guest_fault("Copy2DFromDeviceInlineAsync: a reply area too small for the data", ChannelStatus::kReplyTooSmall);
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (CUresult e = refuse_in_capture(s, device, "cudaMemcpy2DAsync into pageable memory"); e != CUDA_SUCCESS) return e;
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  // The bytes must be in the reply before it goes: wait for the copy (and so for the
  // stream's earlier work).
  const CUDA_MEMCPY2D c = device_to_host(req.extra.data(), a.width, a.device, a.device_pitch, a.width, a.height);
  CUresult e = on_device(device, [&] {
    CUresult r = api_.cuMemcpy2DAsync_v2(&c, s);
    return r == CUDA_SUCCESS ? api_.cuStreamSynchronize(s) : r;
  });
  if (e == CUDA_SUCCESS) req.extra_bytes = static_cast<uint32_t>(bytes);
  return e;
}

// Both directions of an async 2D copy between device memory and the shared heap: a true
// DMA from or into a pinned block (the app's cudaMallocHost memory); with kHeapCopyWait
// (staging the guest reuses at once) the reply waits for the copy.
int32_t Session::heap_copy_2d_async(const api::Copy2DHeapAsyncArgs& a, Request& req, bool to_device) {
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("heap_copy_2d_async: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  if (a.flags & ~api::kHeapCopyWait) return guest_fault("heap_copy_2d_async: unknown flags");
  uint64_t span;
  if (!host_span(a.host_pitch, a.width, a.height, &span) || span > host->size())
    return guest_fault("heap_copy_2d_async: the host rows do not fit the heap range");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (a.flags & api::kHeapCopyWait)
    if (CUresult e = refuse_in_capture(s, device, "cudaMemcpy2DAsync of pageable memory"); e != CUDA_SUCCESS) return e;
  if (!owns_2d(a.device, a.device_pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY2D c =
      to_device ? host_to_device(a.device, a.device_pitch, host->data(), a.host_pitch, a.width, a.height)
                : device_to_host(host->data(), a.host_pitch, a.device, a.device_pitch, a.width, a.height);
  return on_device(device, [&] {
    CUresult r = api_.cuMemcpy2DAsync_v2(&c, s);
    return r == CUDA_SUCCESS && (a.flags & api::kHeapCopyWait) ? api_.cuStreamSynchronize(s) : r;
  });
}

int32_t Session::on_Copy2DToDeviceHeapAsync(const api::Copy2DHeapAsyncArgs& a, api::Empty&, Request& req) {
  return heap_copy_2d_async(a, req, true);
}

int32_t Session::on_Copy2DFromDeviceHeapAsync(const api::Copy2DHeapAsyncArgs& a, api::Empty&, Request& req) {
  return heap_copy_2d_async(a, req, false);
}

int32_t Session::on_Copy2DDeviceToDeviceAsync(const api::Copy2DDeviceAsyncArgs& a, api::Empty&, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (!owns_2d(a.dst, a.dst_pitch, a.width, a.height) || !owns_2d(a.src, a.src_pitch, a.width, a.height))
    return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY2D c = device_to_device(a.dst, a.dst_pitch, a.src, a.src_pitch, a.width, a.height);
  return on_device(device, [&] { return api_.cuMemcpy2DAsync_v2(&c, s); });
}

int32_t Session::on_Memset2DAsync(const api::Memset2DAsyncArgs& a, api::Empty&, Request&) {
  const unsigned element = memset_width(a.element_bytes);
  if (!element) return guest_fault("Memset2DAsync: an element size other than 1, 2 or 4");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (!owns_2d(a.dst, a.pitch, a.width, a.height)) return CUDA_ERROR_INVALID_VALUE;
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  return on_device(device, [&] { return memset_2d_on(a.dst, a.pitch, a.value, a.width, a.height, element, s, true); });
}

}  // namespace vmcuda::host
