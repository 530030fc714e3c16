// memory area, pitched half: cudaMallocPitch, cudaMemcpy2D and cudaMemset2D. The host
// does the 2D work (cuMemAllocPitch, cuMemcpy2D, cuMemsetD2D8); the guest moves the host
// side of a copy as memory.cc does for 1D copies:
//  - pinned memory (cudaMallocHost, a block of the shared heap): the host copies straight
//    from or into it, with the application's pitch;
//  - small pageable regions: packed (rows back to back) into the call's frame, or its reply;
//  - large pageable regions: packed, whole rows at a time, through a heap chunk; a row larger
//    than the chunk goes alone, as a 1D copy (cudaMemcpy's pipelined path).
// Device regions are checked against this process's allocations first (every row inside
// one allocation or module variable), so a bad copy fails here, at once.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "host_pointers.h"
#include "knobs.h"
#include "parallel_copy.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;

constexpr uint64_t kMinChunk = 64 << 10;

// Bytes `height` rows of `width` bytes, `pitch` apart, span (pitch >= width, height > 0);
// false when that overflows.
bool span_of(uint64_t pitch, uint64_t width, uint64_t height, uint64_t* span) {
  if (height - 1 > (~0ull - width) / std::max<uint64_t>(pitch, 1)) return false;
  *span = pitch * (height - 1) + width;
  return true;
}

// Largest packed region that travels in a frame (or comes back in a reply).
uint64_t inline_limit(Remote& r, const knobs::Knob& knob) {
  const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(0, knob.get()));
  return std::min<uint64_t>(k, r.slot().batch().capacity() / 4);
}

// A staging chunk of at most `want` bytes: the chunk knob, halved while the heap is short.
std::optional<vmrpc::HeapBlock> staging_chunk(Remote& r, uint64_t want) {
  uint64_t n = std::min<uint64_t>(want, std::max<int64_t>(kMinChunk, knobs::kCopyChunkBytes.get()));
  for (;;) {
    if (auto b = r.slot().heap().allocate(n)) return b;
    if (n <= kMinChunk) return std::nullopt;
    n /= 2;
  }
}

// Rows [y0, y0 + rows) of a pitched host region, packed into `out`.
void pack(std::byte* out, const std::byte* src, uint64_t pitch, uint64_t width, uint64_t y0, uint64_t rows) {
  if (pitch == width) return parallel_copy(out, src + y0 * pitch, rows * width);
  for (uint64_t y = 0; y < rows; ++y) std::memcpy(out + y * width, src + (y0 + y) * pitch, width);
}
void unpack(std::byte* dst, const std::byte* in, uint64_t pitch, uint64_t width, uint64_t y0, uint64_t rows) {
  if (pitch == width) return parallel_copy(dst + y0 * pitch, in, rows * width);
  for (uint64_t y = 0; y < rows; ++y) std::memcpy(dst + (y0 + y) * pitch, in + y * width, width);
}

// One 1D copy per row, for rows larger than a staging chunk. Precondition: no lock held
// (cudaMemcpy takes the Remote's).
cudaError_t row_by_row(std::byte* dst, uint64_t dpitch, const std::byte* src, uint64_t spitch, uint64_t width,
                       uint64_t height, cudaMemcpyKind kind) {
  for (uint64_t y = 0; y < height; ++y)
    if (cudaError_t e = cudaMemcpy(dst + y * dpitch, src + y * spitch, width, kind)) return e;
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
  if (packed <= inline_limit(r, knobs::kInlineCopyBytes)) {
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
  if (packed <= inline_limit(r, knobs::kInlineReadBytes)) {
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

}  // namespace
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
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  if (width == 0 || height == 0) return cudaSuccess;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
  if (width > dpitch || width > spitch) return record(cudaErrorInvalidPitchValue);
  if (!dst || !src) return record(cudaErrorInvalidValue);
  uint64_t dspan, sspan;
  if (!g::span_of(dpitch, width, height, &dspan) || !g::span_of(spitch, width, height, &sspan))
    return record(cudaErrorInvalidValue);
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: where each side is comes from this process's allocations.
    const bool d = g::is_device(dst, dspan), s = g::is_device(src, sspan);
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  // The device sides must be this process's device memory, every row of them.
  if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && !g::is_device(dst, dspan))
    return record(cudaErrorInvalidValue);
  if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) && !g::is_device(src, sspan))
    return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  switch (kind) {
    case cudaMemcpyHostToHost:
      if (cudaError_t f = r->flush()) return record(f);  // synchronous with respect to the device
      for (uint64_t y = 0; y < height; ++y) std::memmove(d + y * dpitch, s + y * spitch, width);
      return cudaSuccess;
    case cudaMemcpyHostToDevice:
      return record(g::to_device(*r, lock, g::addr(dst), dpitch, s, spitch, width, height));
    case cudaMemcpyDeviceToHost:
      return record(g::to_host(*r, lock, d, dpitch, g::addr(src), spitch, width, height));
    case cudaMemcpyDeviceToDevice:
      return record(r->enqueue<api::Call::Copy2DDeviceToDevice>({g::addr(dst), dpitch, g::addr(src), spitch, width, height}));
    default:
      return record(cudaErrorInvalidMemcpyDirection);
  }
}

cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  cudaError_t e = cudaSuccess;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  if (width == 0 || height == 0) return cudaSuccess;
  uint64_t span;
  if (width > pitch || !g::span_of(pitch, width, height, &span) || !g::is_device(devPtr, span))
    return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  return record(r->enqueue<api::Call::Memset2D>({g::addr(devPtr), pitch, width, height, static_cast<uint32_t>(value), 0}));
}
