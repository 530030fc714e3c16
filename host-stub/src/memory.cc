// Memory calls (calls.def, 0x1100). Every device range a client names must lie inside
// one of its own allocations: with unified addressing the driver would otherwise copy
// to or from another client's memory.
#include <cstring>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

// Device memory comes from the client's arena (arena.h): fixed addresses per client, so
// they can survive a resume. The VM's quota counts what the arena maps (vm_ledger.h).
CUresult Session::arena_allocate(uint64_t bytes, uint64_t* ptr) {
  if (!arena_) return CUDA_ERROR_OUT_OF_MEMORY;  // closed
  std::string why;
  const CUresult e = arena_->allocate(devices_[current_], bytes, ptr, &why);
  if (e != CUDA_SUCCESS && !why.empty() && !arena_warned_) {
    arena_warned_ = true;
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": device memory unavailable: " + why);
  }
  return e;
}

int32_t Session::on_Malloc(const api::MallocArgs& a, api::PtrReply& r, Request&) {
  if (a.bytes == 0) {
    r.ptr = 0;
    return CUDA_SUCCESS;
  }
  if (a.bytes > memory_quota()) return CUDA_ERROR_OUT_OF_MEMORY;  // can never fit; else the arena's meter decides
  uint64_t p = 0;
  if (CUresult e = arena_allocate(a.bytes, &p); e != CUDA_SUCCESS) return e;
  add_allocation(p, a.bytes);
  r.ptr = p;
  return CUDA_SUCCESS;
}

int32_t Session::on_Free(const api::PtrArgs& a, api::Empty&, Request&) {
  if (a.ptr == 0) return CUDA_SUCCESS;
  // Only what Malloc/MallocPitch returned (not module globals, not interior pointers).
  const Object* o = vol_.find(ObjectKind::Allocation, a.ptr);
  if (!o || !arena_) return CUDA_ERROR_INVALID_VALUE;
  ipc_forget_export(a.ptr);  // no new opens; those open keep the memory (ipc.cc)
  // Synchronizes the client's devices first, as cudaFree does.
  const CUresult e = arena_->free(a.ptr);
  allocated_ -= o->as<AllocationObject>().bytes;
  vol_.remove(o->id);
  publish_status();
  return e;
}

int32_t Session::on_CopyToDeviceInline(const api::CopyToDeviceInlineArgs& a, api::Empty&, Request& req) {
  const int owner = owner_of(a.dst, req.tail.size());
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (req.tail.empty()) return CUDA_SUCCESS;
  return on_owner(owner,
                  [&] { return api_.cuMemcpyHtoD_v2(a.dst, req.tail.data(), req.tail.size()); });
}

int32_t Session::on_CopyFromDeviceInline(const api::CopyFromDeviceInlineArgs& a, api::Empty&, Request& req) {
  if (a.bytes > req.extra.size()) return guest_fault("CopyFromDeviceInline: a reply area too small for the data", ChannelStatus::kReplyTooSmall);
  const int owner = owner_of(a.src, a.bytes);
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  // Straight into the shared reply area (the host never reads it back).
  CUresult e = managed_after_sync(req.ctx, current_, on_owner(owner, [&] {
    return api_.cuMemcpyDtoH_v2(req.extra.data(), a.src, a.bytes);
  }));
  if (e == CUDA_SUCCESS) req.extra_bytes = static_cast<uint32_t>(a.bytes);
  return e;
}

int32_t Session::on_CopyToDeviceHeap(const api::CopyHeapArgs& a, api::Empty&, Request& req) {
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("CopyToDeviceHeap: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  const int owner = owner_of(a.device, host->size());
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (host->empty()) return CUDA_SUCCESS;
  return on_owner(owner,
                  [&] { return api_.cuMemcpyHtoD_v2(a.device, host->data(), host->size()); });
}

int32_t Session::on_CopyFromDeviceHeap(const api::CopyHeapArgs& a, api::Empty&, Request& req) {
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("CopyFromDeviceHeap: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  const int owner = owner_of(a.device, host->size());
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (host->empty()) return CUDA_SUCCESS;
  return managed_after_sync(req.ctx, current_, on_owner(owner, [&] {
    return api_.cuMemcpyDtoH_v2(host->data(), a.device, host->size());
  }));
}

int32_t Session::on_CopyDeviceToDevice(const api::CopyDeviceArgs& a, api::Empty&, Request&) {
  const int dst = owner_of(a.dst, a.bytes), src = owner_of(a.src, a.bytes);
  if (dst < 0 || src < 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  if (foreign(dst, src)) {
    // Between two GPUs (cudaMemcpy with unified addressing): a peer copy, ordered after the
    // work of both.
    CUcontext dc = context_of(dst), sc = context_of(src);
    if (!dc || !sc) return ctx_error_;
    return api_.cuMemcpyPeer(a.dst, dc, a.src, sc, a.bytes);
  }
  return on_owner(dst, [&] { return api_.cuMemcpyDtoD_v2(a.dst, a.src, a.bytes); });
}

// The memset on `s` (nullptr: synchronous) with the width the call asked.
CUresult Session::memset_on(CUdeviceptr dst, uint32_t value, uint64_t bytes, unsigned width, CUstream s, bool async) {
  const size_t n = bytes / width;
  switch (width) {
    case 2:
      return async ? api_.cuMemsetD16Async(dst, static_cast<unsigned short>(value), n, s)
                   : api_.cuMemsetD16_v2(dst, static_cast<unsigned short>(value), n);
    case 4:
      return async ? api_.cuMemsetD32Async(dst, value, n, s) : api_.cuMemsetD32_v2(dst, value, n);
    default:
      return async ? api_.cuMemsetD8Async(dst, static_cast<unsigned char>(value), n, s)
                   : api_.cuMemsetD8_v2(dst, static_cast<unsigned char>(value), n);
  }
}

int32_t Session::on_Memset(const api::MemsetArgs& a, api::Empty&, Request&) {
  const unsigned width = memset_width(a.element_bytes);
  if (!width) return guest_fault("Memset: an element size other than 1, 2 or 4");
  const int owner = owner_of(a.dst, a.bytes);
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes % width || a.dst % width) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  return on_owner(owner, [&] { return memset_on(a.dst, a.value, a.bytes, width, nullptr, false); });
}

}  // namespace vmcuda::host

// ---- async variants: ordered on the guest's stream (stream.cc resolves and checks it).
namespace vmcuda::host {

int32_t Session::on_CopyToDeviceInlineAsync(const api::CopyToDeviceInlineAsyncArgs& a, api::Empty&, Request& req) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (CUresult e = refuse_in_capture(s, device, "cudaMemcpyAsync from pageable memory"); e != CUDA_SUCCESS) return e;
  const int owner = owner_of(a.dst, req.tail.size());
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (req.tail.empty()) return CUDA_SUCCESS;
  if (foreign(owner, device))
    return after_stream_on_owner(owner, device, s,
                                 [&] { return api_.cuMemcpyHtoD_v2(a.dst, req.tail.data(), req.tail.size()); });
  // `tail` is the decoder's private (pageable) copy: the driver stages it before
  // returning, so it may be reused once this returns, while the copy runs on.
  return on_device(device, [&] { return api_.cuMemcpyHtoDAsync_v2(a.dst, req.tail.data(), req.tail.size(), s); });
}

int32_t Session::on_CopyFromDeviceInlineAsync(const api::CopyFromDeviceInlineAsyncArgs& a, api::Empty&,
                                              Request& req) {
  if (a.bytes > req.extra.size()) return guest_fault("CopyFromDeviceInlineAsync: a reply area too small for the data", ChannelStatus::kReplyTooSmall);
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (CUresult e = refuse_in_capture(s, device, "cudaMemcpyAsync into pageable memory"); e != CUDA_SUCCESS) return e;
  const int owner = owner_of(a.src, a.bytes);
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  // The bytes must be in the reply before it goes: wait for the copy (and so for the
  // stream's earlier work, which it is ordered after).
  CUresult e = foreign(owner, device) ? after_stream_on_owner(owner, device, s, [&] {
    return api_.cuMemcpyDtoH_v2(req.extra.data(), a.src, a.bytes);
  }) : on_device(device, [&] {
    CUresult r = api_.cuMemcpyDtoHAsync_v2(req.extra.data(), a.src, a.bytes, s);
    return r == CUDA_SUCCESS ? api_.cuStreamSynchronize(s) : r;
  });
  if (e == CUDA_SUCCESS) req.extra_bytes = static_cast<uint32_t>(a.bytes);
  return e;
}

// Both directions of an async copy between device memory and the shared heap.
int32_t Session::heap_copy_async(const api::CopyHeapAsyncArgs& a, Request& req, bool to_device) {
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("heap_copy_async: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  if (a.flags & ~api::kHeapCopyWait) return guest_fault("heap_copy_async: unknown flags");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (a.flags & api::kHeapCopyWait)
    if (CUresult e = refuse_in_capture(s, device, "cudaMemcpyAsync of pageable memory"); e != CUDA_SUCCESS) return e;
  const int owner = owner_of(a.device, host->size());
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (host->empty()) return CUDA_SUCCESS;
  if (foreign(owner, device))
    return after_stream_on_owner(owner, device, s, [&] {
      return to_device ? api_.cuMemcpyHtoD_v2(a.device, host->data(), host->size())
                       : api_.cuMemcpyDtoH_v2(host->data(), a.device, host->size());
    });
  // From or into a pinned block (PinHeap: cudaMallocHost memory) a true DMA on the
  // stream; with unpinned heap the driver stages it before returning.
  return on_device(device, [&] {
    CUresult r = to_device ? api_.cuMemcpyHtoDAsync_v2(a.device, host->data(), host->size(), s)
                           : api_.cuMemcpyDtoHAsync_v2(host->data(), a.device, host->size(), s);
    return r == CUDA_SUCCESS && (a.flags & api::kHeapCopyWait) ? api_.cuStreamSynchronize(s) : r;
  });
}

int32_t Session::on_CopyToDeviceHeapAsync(const api::CopyHeapAsyncArgs& a, api::Empty&, Request& req) {
  return heap_copy_async(a, req, true);
}

int32_t Session::on_CopyFromDeviceHeapAsync(const api::CopyHeapAsyncArgs& a, api::Empty&, Request& req) {
  return heap_copy_async(a, req, false);
}

int32_t Session::on_CopyDeviceToDeviceAsync(const api::CopyDeviceAsyncArgs& a, api::Empty&, Request&) {
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  const int dst = owner_of(a.dst, a.bytes), src = owner_of(a.src, a.bytes);
  if (dst < 0 || src < 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  if (foreign(dst, src)) {  // between two GPUs: a peer copy on the stream
    CUcontext dc = context_of(dst), sc = context_of(src);
    if (!dc || !sc) return ctx_error_;
    return on_device(device, [&] { return api_.cuMemcpyPeerAsync(a.dst, dc, a.src, sc, a.bytes, s); });
  }
  if (foreign(dst, device))
    return after_stream_on_owner(dst, device, s, [&] { return api_.cuMemcpyDtoD_v2(a.dst, a.src, a.bytes); });
  return on_device(device, [&] { return api_.cuMemcpyDtoDAsync_v2(a.dst, a.src, a.bytes, s); });
}

int32_t Session::on_MemsetAsync(const api::MemsetAsyncArgs& a, api::Empty&, Request&) {
  const unsigned width = memset_width(a.element_bytes);
  if (!width) return guest_fault("MemsetAsync: an element size other than 1, 2 or 4");
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  const int owner = owner_of(a.dst, a.bytes);
  if (owner < 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes % width || a.dst % width) return CUDA_ERROR_INVALID_VALUE;
  if (a.bytes == 0) return CUDA_SUCCESS;
  if (foreign(owner, device))
    return after_stream_on_owner(owner, device, s,
                                 [&] { return memset_on(a.dst, a.value, a.bytes, width, nullptr, false); });
  return on_device(device, [&] { return memset_on(a.dst, a.value, a.bytes, width, s, true); });
}

// Pinned heap memory (cudaMallocHost, cudaMallocManaged) is mapped for the device: the
// memset runs there, on the stream, at the address the host's driver gives the bytes. One
// row of the 2D form below.
int32_t Session::on_MemsetHeapAsync(const api::MemsetHeapAsyncArgs& a, api::Empty& none, Request& req) {
  api::MemsetHeap2DAsyncArgs row{};
  row.dst = a.dst, row.pitch = a.dst.bytes, row.width = a.dst.bytes, row.height = 1;
  row.value = a.value, row.element_bytes = a.element_bytes, row.stream = a.stream;
  return on_MemsetHeap2DAsync(row, none, req);
}

// The 2D form: rows of `width` bytes, `pitch` apart, all inside the heap range named.
int32_t Session::on_MemsetHeap2DAsync(const api::MemsetHeap2DAsyncArgs& a, api::Empty&, Request& req) {
  const unsigned width = memset_width(a.element_bytes);
  if (!width) return guest_fault("MemsetHeap(2D)Async: an element size other than 1, 2 or 4");
  auto range = req.ctx.heap(a.dst);
  if (!range) return guest_fault("MemsetHeap(2D)Async: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (!heap_pinned(a.dst.offset, a.dst.bytes)) return CUDA_ERROR_INVALID_VALUE;  // not memory the device reaches
  if (a.width == 0 || a.height == 0) return CUDA_SUCCESS;
  // The last row ends inside the range: pitch * (height - 1) + width <= bytes, without overflow.
  if (a.width > a.pitch || a.width > a.dst.bytes || a.height - 1 > (a.dst.bytes - a.width) / a.pitch)
    return CUDA_ERROR_INVALID_VALUE;
  return on_device(device, [&] {
    CUdeviceptr d = 0;
    if (CUresult e = api_.cuMemHostGetDevicePointer_v2(&d, range->data(), 0); e != CUDA_SUCCESS) return e;
    return memset_2d_on(d, a.pitch, a.value, a.width, a.height, width, s, true);
  });
}

CUresult Session::memset_2d_on(CUdeviceptr dst, uint64_t pitch, uint32_t value, uint64_t width, uint64_t height,
                               unsigned element, CUstream s, bool async) {
  if (dst % element || pitch % element || width % element) return CUDA_ERROR_INVALID_VALUE;
  const size_t n = width / element;  // elements per row
  switch (element) {
    case 2:
      return async ? api_.cuMemsetD2D16Async(dst, pitch, static_cast<unsigned short>(value), n, height, s)
                   : api_.cuMemsetD2D16_v2(dst, pitch, static_cast<unsigned short>(value), n, height);
    case 4:
      return async ? api_.cuMemsetD2D32Async(dst, pitch, value, n, height, s)
                   : api_.cuMemsetD2D32_v2(dst, pitch, value, n, height);
    default:
      return async ? api_.cuMemsetD2D8Async(dst, pitch, static_cast<unsigned char>(value), n, height, s)
                   : api_.cuMemsetD2D8_v2(dst, pitch, static_cast<unsigned char>(value), n, height);
  }
}

}  // namespace vmcuda::host
