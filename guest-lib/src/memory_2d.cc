// memory area, pitched half: cudaMallocPitch, cudaMemcpy2D[Async] and cudaMemset2D[Async].
// The host does the 2D work (cuMemAllocPitch, cuMemcpy2D[Async], cuMemsetD2D8[Async]); the
// guest moves the host side of a copy as memory.cc and memory_async.cc do for 1D copies:
//  - pinned memory (cudaMallocHost, a block of the shared heap): the host copies straight
//    from or into it, with the application's pitch (async: queued, a true DMA on the stream);
//  - small pageable regions: packed (rows back to back) into the call's frame (queued), or
//    its reply;
//  - large pageable regions: packed, whole rows at a time, through a heap chunk; a row larger
//    than the chunk goes alone, as a 1D copy (cudaMemcpy[Async]'s paths). Async copies wait
//    for each chunk (kHeapCopyWait), as CUDA does for pageable memory.
// Device regions are checked against this process's allocations first (every row inside
// one allocation or module variable), so a bad copy fails here, at once.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "host_objects.h"
#include "host_pointers.h"
#include "memory_2d.h"
#include "knobs.h"
#include "parallel_copy.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {

bool span_of(uint64_t pitch, uint64_t width, uint64_t height, uint64_t* span) {
  if (height - 1 > (~0ull - width) / std::max<uint64_t>(pitch, 1)) return false;
  *span = pitch * (height - 1) + width;
  return true;
}

namespace {
constexpr uint64_t kMinChunk = 64 << 10;
}  // namespace

uint64_t inline_limit(Remote& r, bool reply) {
  const knobs::Knob& knob = reply ? knobs::kInlineReadBytes : knobs::kInlineCopyBytes;
  const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(0, knob.get()));
  return std::min<uint64_t>(k, r.slot().batch().capacity() / 4);
}

std::optional<vmrpc::HeapBlock> staging_chunk(Remote& r, uint64_t want) {
  uint64_t n = std::min<uint64_t>(want, std::max<int64_t>(kMinChunk, knobs::kCopyChunkBytes.get()));
  for (;;) {
    if (auto b = r.slot().heap().allocate(n)) return b;
    if (n <= kMinChunk) return std::nullopt;
    n /= 2;
  }
}

namespace {

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;

// Rows [y0, y0 + rows) of a pitched host region, packed into `out`.
void pack(std::byte* out, const std::byte* src, uint64_t pitch, uint64_t width, uint64_t y0, uint64_t rows) {
  if (pitch == width) return parallel_copy(out, src + y0 * pitch, rows * width);
  for (uint64_t y = 0; y < rows; ++y) std::memcpy(out + y * width, src + (y0 + y) * pitch, width);
}
void unpack(std::byte* dst, const std::byte* in, uint64_t pitch, uint64_t width, uint64_t y0, uint64_t rows) {
  if (pitch == width) return parallel_copy(dst + y0 * pitch, in, rows * width);
  for (uint64_t y = 0; y < rows; ++y) std::memcpy(dst + (y0 + y) * pitch, in + y * width, width);
}

// One 1D copy per row, for rows larger than a staging chunk: cudaMemcpy, or cudaMemcpyAsync
// on `stream` (a wire handle is the cudaStream_t value). Precondition: no lock held
// (cudaMemcpy takes the Remote's).
cudaError_t row_by_row(std::byte* dst, uint64_t dpitch, const std::byte* src, uint64_t spitch, uint64_t width,
                       uint64_t height, cudaMemcpyKind kind, std::optional<uint64_t> stream = std::nullopt) {
  for (uint64_t y = 0; y < height; ++y) {
    const cudaError_t e =
        stream ? cudaMemcpyAsync(dst + y * dpitch, src + y * spitch, width, kind, reinterpret_cast<cudaStream_t>(*stream))
               : cudaMemcpy(dst + y * dpitch, src + y * spitch, width, kind);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Host to device. Precondition: `lock` holds r's lock (released for row_by_row).
cudaError_t to_device(Remote& r, std::unique_lock<std::mutex>& lock, uint64_t dst, uint64_t dpitch,
                      const std::byte* src, uint64_t spitch, uint64_t width, uint64_t height) {
  uint64_t span;
  if (!span_of(spitch, width, height, &span)) return cudaErrorInvalidValue;
  if (auto ref = pinned_range(src, span))
    return static_cast<cudaError_t>(
        r.call<api::Call::Copy2DToDeviceHeap>({dst, dpitch, width, height, *ref, spitch}).status);
  const uint64_t packed = width * height;  // <= span: no overflow
  if (packed <= inline_limit(r, false)) {
    // The bytes are in the frame: the copy may wait in the queue (CUDA returns once a
    // pageable source has been staged, too).
    thread_local std::vector<std::byte> buf;
    buf.resize(packed);
    pack(buf.data(), src, spitch, width, 0, height);
    return r.enqueue<api::Call::Copy2DToDeviceInline>({dst, dpitch, width, height}, buf);
  }
  auto chunk = staging_chunk(r, packed);
  if (!chunk) return cudaErrorMemoryAllocation;
  const uint64_t rows_per_chunk = chunk->bytes / width;
  if (rows_per_chunk == 0) {
    r.slot().heap().free(chunk->offset);
    lock.unlock();
    return row_by_row(reinterpret_cast<std::byte*>(dst), dpitch, src, spitch, width, height, cudaMemcpyHostToDevice);
  }
  cudaError_t result = cudaSuccess;
  for (uint64_t y = 0; y < height && result == cudaSuccess; y += rows_per_chunk) {
    const uint64_t rows = std::min(rows_per_chunk, height - y);
    pack(chunk->data, src, spitch, width, y, rows);
    result = static_cast<cudaError_t>(
        r.call<api::Call::Copy2DToDeviceHeap>({dst + y * dpitch, dpitch, width, rows, chunk->ref(0, rows * width), width})
            .status);
  }
  r.slot().heap().free(chunk->offset);
  return result;
}

// Device to host. Precondition: `lock` holds r's lock (released for row_by_row).
cudaError_t to_host(Remote& r, std::unique_lock<std::mutex>& lock, std::byte* dst, uint64_t dpitch, uint64_t src,
                    uint64_t spitch, uint64_t width, uint64_t height) {
  uint64_t span;
  if (!span_of(dpitch, width, height, &span)) return cudaErrorInvalidValue;
  if (auto ref = pinned_range(dst, span))
    return static_cast<cudaError_t>(
        r.call<api::Call::Copy2DFromDeviceHeap>({src, spitch, width, height, *ref, dpitch}).status);
  const uint64_t packed = width * height;
  if (packed <= inline_limit(r, true)) {
    auto res = r.call<api::Call::Copy2DFromDeviceInline>({src, spitch, width, height}, {}, static_cast<uint32_t>(packed));
    if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
    if (res.extra.size() < packed) return cudaErrorUnknown;  // a host bug
    unpack(dst, res.extra.data(), dpitch, width, 0, height);
    return cudaSuccess;
  }
  auto chunk = staging_chunk(r, packed);
  if (!chunk) return cudaErrorMemoryAllocation;
  const uint64_t rows_per_chunk = chunk->bytes / width;
  if (rows_per_chunk == 0) {
    r.slot().heap().free(chunk->offset);
    lock.unlock();
    return row_by_row(dst, dpitch, reinterpret_cast<const std::byte*>(src), spitch, width, height,
                      cudaMemcpyDeviceToHost);
  }
  cudaError_t result = cudaSuccess;
  for (uint64_t y = 0; y < height && result == cudaSuccess; y += rows_per_chunk) {
    const uint64_t rows = std::min(rows_per_chunk, height - y);
    result = static_cast<cudaError_t>(
        r.call<api::Call::Copy2DFromDeviceHeap>({src + y * spitch, spitch, width, rows, chunk->ref(0, rows * width), width})
            .status);
    if (result == cudaSuccess) unpack(dst, chunk->data, dpitch, width, y, rows);
  }
  r.slot().heap().free(chunk->offset);
  return result;
}


// ---- async: as above, on wire stream `s`. Precondition: `lock` holds r's lock (released
// for row_by_row).

// Host to device. Pinned and small pageable regions are queued; larger pageable ones are
// staged chunk by chunk, each in the device's hands (kHeapCopyWait) before the next.
cudaError_t to_device_async(Remote& r, std::unique_lock<std::mutex>& lock, uint64_t dst, uint64_t dpitch,
                            const std::byte* src, uint64_t spitch, uint64_t width, uint64_t height, uint64_t s) {
  uint64_t span;
  if (!span_of(spitch, width, height, &span)) return cudaErrorInvalidValue;
  if (auto ref = pinned_range(src, span))
    return r.enqueue<api::Call::Copy2DToDeviceHeapAsync>({dst, dpitch, width, height, *ref, spitch, s, 0, 0});
  const uint64_t packed = width * height;
  if (packed <= inline_limit(r, false)) {
    thread_local std::vector<std::byte> buf;
    buf.resize(packed);
    pack(buf.data(), src, spitch, width, 0, height);
    return r.enqueue<api::Call::Copy2DToDeviceInlineAsync>({dst, dpitch, width, height, s}, buf);
  }
  // Round trips from here: an error of a queued call is this call's answer, but it does
  // not cut the copy short (as memory_async.cc).
  const cudaError_t earlier = r.flush();
  auto chunk = staging_chunk(r, packed);
  if (!chunk) return earlier != cudaSuccess ? earlier : cudaErrorMemoryAllocation;
  const uint64_t rows_per_chunk = chunk->bytes / width;
  cudaError_t result = cudaSuccess;
  if (rows_per_chunk == 0) {
    r.slot().heap().free(chunk->offset);
    lock.unlock();
    result = row_by_row(reinterpret_cast<std::byte*>(dst), dpitch, src, spitch, width, height, cudaMemcpyHostToDevice, s);
    return earlier != cudaSuccess ? earlier : result;
  }
  for (uint64_t y = 0; y < height && result == cudaSuccess; y += rows_per_chunk) {
    const uint64_t rows = std::min(rows_per_chunk, height - y);
    pack(chunk->data, src, spitch, width, y, rows);
    result = static_cast<cudaError_t>(
        r.call<api::Call::Copy2DToDeviceHeapAsync>(
             {dst + y * dpitch, dpitch, width, rows, chunk->ref(0, rows * width), width, s, api::kHeapCopyWait, 0})
            .status);
  }
  r.slot().heap().free(chunk->offset);
  return earlier != cudaSuccess ? earlier : result;
}

// Device to host. Into pinned memory queued (the bytes are there once the stream has run
// it); into pageable memory the bytes are there when the call returns, as CUDA promises.
cudaError_t to_host_async(Remote& r, std::unique_lock<std::mutex>& lock, std::byte* dst, uint64_t dpitch,
                          uint64_t src, uint64_t spitch, uint64_t width, uint64_t height, uint64_t s) {
  uint64_t span;
  if (!span_of(dpitch, width, height, &span)) return cudaErrorInvalidValue;
  if (auto ref = pinned_range(dst, span))
    return r.enqueue<api::Call::Copy2DFromDeviceHeapAsync>({src, spitch, width, height, *ref, dpitch, s, 0, 0});
  const cudaError_t earlier = r.flush();
  const uint64_t packed = width * height;
  if (packed <= inline_limit(r, true)) {
    auto res = r.call<api::Call::Copy2DFromDeviceInlineAsync>({src, spitch, width, height, s}, {},
                                                              static_cast<uint32_t>(packed));
    cudaError_t e = static_cast<cudaError_t>(res.status);
    if (e == cudaSuccess && res.extra.size() < packed) e = cudaErrorUnknown;  // a host bug
    if (e == cudaSuccess) unpack(dst, res.extra.data(), dpitch, width, 0, height);
    return earlier != cudaSuccess ? earlier : e;
  }
  auto chunk = staging_chunk(r, packed);
  if (!chunk) return earlier != cudaSuccess ? earlier : cudaErrorMemoryAllocation;
  const uint64_t rows_per_chunk = chunk->bytes / width;
  cudaError_t result = cudaSuccess;
  if (rows_per_chunk == 0) {
    r.slot().heap().free(chunk->offset);
    lock.unlock();
    result = row_by_row(dst, dpitch, reinterpret_cast<const std::byte*>(src), spitch, width, height,
                        cudaMemcpyDeviceToHost, s);
    return earlier != cudaSuccess ? earlier : result;
  }
  for (uint64_t y = 0; y < height && result == cudaSuccess; y += rows_per_chunk) {
    const uint64_t rows = std::min(rows_per_chunk, height - y);
    result = static_cast<cudaError_t>(
        r.call<api::Call::Copy2DFromDeviceHeapAsync>(
             {src + y * spitch, spitch, width, rows, chunk->ref(0, rows * width), width, s, api::kHeapCopyWait, 0})
            .status);
    if (result == cudaSuccess) unpack(dst, chunk->data, dpitch, width, y, rows);
  }
  r.slot().heap().free(chunk->offset);
  return earlier != cudaSuccess ? earlier : result;
}

}  // namespace

cudaError_t copy_2d(void* dst, uint64_t dpitch, const void* src, uint64_t spitch, uint64_t width, uint64_t height,
                    cudaMemcpyKind kind, std::optional<uint64_t> stream) {
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return e;
  // Nothing to copy: success before anything is checked (as NVIDIA's, seen on the H200).
  if (width == 0 || height == 0) return cudaSuccess;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (!dst || !src) return cudaErrorInvalidValue;
  uint64_t dspan, sspan;
  if (!span_of(dpitch, width, height, &dspan) || !span_of(spitch, width, height, &sspan))
    return cudaErrorInvalidValue;
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: where each side is comes from this process's allocations.
    const bool d = is_device(dst, dspan), s = is_device(src, sspan);
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  // The device sides must be this process's device memory, every row of them.
  if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && !is_device(dst, dspan))
    return cudaErrorInvalidValue;
  if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) && !is_device(src, sspan))
    return cudaErrorInvalidValue;
  auto lock = r->lock();
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  switch (kind) {
    case cudaMemcpyHostToHost: {
      // Synchronous for the host: after the device's queued work (the stream's, async).
      const cudaError_t earlier = r->flush();
      const cudaError_t f =
          stream ? static_cast<cudaError_t>(r->call<api::Call::StreamSynchronize>({*stream}).status) : cudaSuccess;
      if (f == cudaSuccess)
        for (uint64_t y = 0; y < height; ++y) std::memmove(d + y * dpitch, s + y * spitch, width);
      return earlier != cudaSuccess ? earlier : f;
    }
    case cudaMemcpyHostToDevice:
      return stream ? to_device_async(*r, lock, addr(dst), dpitch, s, spitch, width, height, *stream)
                    : to_device(*r, lock, addr(dst), dpitch, s, spitch, width, height);
    case cudaMemcpyDeviceToHost:
      return stream ? to_host_async(*r, lock, d, dpitch, addr(src), spitch, width, height, *stream)
                    : to_host(*r, lock, d, dpitch, addr(src), spitch, width, height);
    case cudaMemcpyDeviceToDevice:
      return stream ? r->enqueue<api::Call::Copy2DDeviceToDeviceAsync>(
                          {addr(dst), dpitch, addr(src), spitch, width, height, *stream})
                    : r->enqueue<api::Call::Copy2DDeviceToDevice>({addr(dst), dpitch, addr(src), spitch, width, height});
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
}

cudaError_t memset_2d(void* dst, uint64_t pitch, int value, uint64_t width, uint64_t height,
                      std::optional<uint64_t> stream, unsigned element) {
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  // width > pitch is cudaErrorInvalidValue here, not InvalidPitchValue (seen on the H200).
  uint64_t span;
  if (width > pitch || !span_of(pitch, width, height, &span)) return cudaErrorInvalidValue;
  // Whole, aligned elements (the driver's cuMemsetD2D16/32 answer at once).
  if (addr(dst) % element || pitch % element || width % element) return cudaErrorInvalidValue;
  const auto v = static_cast<uint32_t>(value);
  if (!is_device(dst, span)) return memset_2d_host(dst, pitch, v, element, width, height, stream);
  auto lock = r->lock();
  const uint32_t wire_element = element == 1 ? 0 : element;
  return stream ? r->enqueue<api::Call::Memset2DAsync>({addr(dst), pitch, width, height, v, wire_element, *stream})
                : r->enqueue<api::Call::Memset2D>({addr(dst), pitch, width, height, v, wire_element});
}

cudaError_t memset_2d_host(void* dst, uint64_t pitch, uint32_t value, unsigned element, uint64_t width, uint64_t height,
                           std::optional<uint64_t> stream) {
  if (cudaError_t e = memset_host_2d_async(dst, pitch, value, element, width, height, stream.value_or(0))) return e;
  // Synchronous: CUDA makes a memset of pinned or managed memory fully synchronous.
  return stream ? cudaSuccess : cudaStreamSynchronize(nullptr);
}

cudaError_t memset_2d_elements(void* dst, uint64_t pitch, uint32_t value, unsigned element, uint64_t width,
                               uint64_t height, cudaStream_t stream, bool async) {
  if (cudaError_t e = enter_device_call()) return e;
  std::optional<uint64_t> s;
  if (async) {
    uint64_t wire = 0;
    if (cudaError_t e = stream_wire_handle(stream, false, &wire)) return e;
    s = wire;
  }
  return memset_2d(dst, pitch, static_cast<int>(value), width, height, s, element);
}

}  // namespace vmcuda::guest

using vmcuda::guest::record;
using vmcuda::guest::Remote;
namespace api = vmcuda::api;

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!devPtr || !pitch) return record(cudaErrorInvalidValue);
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  if (width == 0 || height == 0) {  // as cudaMalloc(0): no memory, no error
    *devPtr = nullptr;
    *pitch = 0;
    return cudaSuccess;
  }
  auto lock = r->lock();
  // Synchronous: an out-of-memory must be reported here. Rows aligned for 4-byte accesses
  // and more (the pitch is the driver's: the device's texture alignment).
  auto res = r->call<api::Call::MallocPitch>({width, height, 4, 0});
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  vgpu_db::AllocationMap::process().add(
      {res.reply.ptr, res.reply.pitch * height, vgpu_db::Allocation::kDevice, Remote::thread_device(), 0});
  *devPtr = reinterpret_cast<void*>(res.reply.ptr);
  *pitch = res.reply.pitch;
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  return record(vmcuda::guest::copy_2d(dst, dpitch, src, spitch, width, height, kind, std::nullopt));
}

cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  return record(vmcuda::guest::memset_2d(devPtr, pitch, value, width, height, std::nullopt));
}

cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind) {
  return vmcuda::guest::finish_on_per_thread_stream(
      cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, cudaStreamPerThread));
}
cudaError_t cudaMemset2D_ptds(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  return vmcuda::guest::finish_on_per_thread_stream(
      cudaMemset2DAsync(devPtr, pitch, value, width, height, cudaStreamPerThread));
}

namespace {

cudaError_t copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                          cudaMemcpyKind kind, cudaStream_t stream, bool per_thread) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  uint64_t s;
  if (cudaError_t e = g::stream_wire_handle(stream, per_thread, &s)) return record(e);
  return record(g::copy_2d(dst, dpitch, src, spitch, width, height, kind, s));
}

cudaError_t memset_2d_async(void* devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream,
                            bool per_thread) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  uint64_t s;
  if (cudaError_t e = g::stream_wire_handle(stream, per_thread, &s)) return record(e);
  return record(g::memset_2d(devPtr, pitch, value, width, height, s));
}

}  // namespace

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_2d_async(dst, dpitch, src, spitch, width, height, kind, stream, false);
}
cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_2d_async(dst, dpitch, src, spitch, width, height, kind, stream, true);
}
cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  return memset_2d_async(devPtr, pitch, value, width, height, stream, false);
}
cudaError_t cudaMemset2DAsync_ptsz(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                                   cudaStream_t stream) {
  return memset_2d_async(devPtr, pitch, value, width, height, stream, true);
}
