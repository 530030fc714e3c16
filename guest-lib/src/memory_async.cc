// memory area, asynchronous half: cudaMemcpyAsync and cudaMemsetAsync on a stream
// (docs/cuda-runtime-internals.md §7). Device pointers are checked against this process's
// allocations first (vgpu_db::AllocationMap), so a bad copy fails here, at once, as the
// synchronous ones do (memory.cc).
//  - host to device, up to VMCUDA_INLINE_COPY_BYTES: the bytes are copied into the call's
//    frame now, so the call is queued (lazy RPC) and the app may reuse its buffer at once;
//  - host to device from pinned memory (cudaMallocHost: a block of the shared heap, which
//    the host has pinned): queued, a true DMA on the stream;
//  - larger host to device from pageable memory: staged through shared-heap chunks, each
//    copied before the call returns (the guest waits, as CUDA does for pageable memory);
//  - device to host: the data must be there when the call returns (pageable memory), so
//    it is a round trip; inline when small, through heap chunks when large. Into pinned
//    memory it is queued: the bytes arrive when the stream's work completes;
//  - device to device and memsets: queued.
// An error the host finds in a queued call is returned by the next synchronizing call.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

#include "host_objects.h"
#include "host_pointers.h"
#include "knobs.h"
#include "log.h"
#include "parallel_copy.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;

constexpr uint64_t kMinChunk = 64 << 10;

// Largest copy that travels in a frame: the knob, but at most a quarter of the RPC stack.
uint64_t inline_limit(Remote& r) {
  const uint64_t knob = static_cast<uint64_t>(std::max<int64_t>(0, knobs::kInlineCopyBytes.get()));
  return std::min<uint64_t>(knob, r.slot().batch().capacity() / 4);
}

// A staging chunk of at most `want` bytes: the chunk knob, halved while the heap is short.
// TODO(perf): share memory.cc's two pipelined chunks (fill chunk i+1 while the host
// copies chunk i) once its staging takes a stream.
std::optional<vmrpc::HeapBlock> staging_chunk(Remote& r, uint64_t want) {
  uint64_t n = std::min<uint64_t>(want, std::max<int64_t>(kMinChunk, knobs::kCopyChunkBytes.get()));
  for (;;) {
    if (auto b = r.slot().heap().allocate(n)) return b;
    if (n <= kMinChunk) return std::nullopt;
    n /= 2;
  }
}

// Precondition for all below: Remote::lock() held.

// Pageable host memory to the device, chunk by chunk through the heap; each chunk is in
// device memory (or staged by the host's driver) when its call returns.
cudaError_t staged_to_device(Remote& r, uint64_t dst, const std::byte* src, uint64_t count, uint64_t stream) {
  auto chunk = staging_chunk(r, count);
  if (!chunk) {
    // No heap to spare: inline frames, queued (each holds its own copy of the bytes).
    const uint64_t step = std::max<uint64_t>(1, inline_limit(r));
    for (uint64_t off = 0; off < count; off += step) {
      const uint64_t n = std::min(step, count - off);
      if (cudaError_t e = r.enqueue<api::Call::CopyToDeviceInlineAsync>({dst + off, stream}, {src + off, n})) return e;
    }
    return cudaSuccess;
  }
  cudaError_t result = cudaSuccess;
  for (uint64_t off = 0; off < count && result == cudaSuccess; off += chunk->bytes) {
    const uint64_t n = std::min(chunk->bytes, count - off);
    vmcuda::guest::parallel_copy(chunk->data, src + off, n);
    result = static_cast<cudaError_t>(
        r.call<api::Call::CopyToDeviceHeapAsync>({dst + off, chunk->ref(0, n), stream, api::kHeapCopyWait, 0}).status);
  }
  r.slot().heap().free(chunk->offset);
  return result;
}

// Device memory to pageable host memory: here when the call returns.
cudaError_t to_host(Remote& r, std::byte* dst, uint64_t src, uint64_t count, uint64_t stream) {
  const uint64_t limit = inline_limit(r);
  auto chunk = count <= limit ? std::nullopt : staging_chunk(r, count);
  cudaError_t result = cudaSuccess;
  if (!chunk) {
    // Small, or no heap to spare: the bytes come back in the replies.
    const uint64_t step = std::max<uint64_t>(1, limit);
    for (uint64_t off = 0; off < count && result == cudaSuccess; off += step) {
      const uint64_t n = std::min(step, count - off);
      auto res = r.call<api::Call::CopyFromDeviceInlineAsync>({src + off, n, stream}, {}, static_cast<uint32_t>(n));
      result = static_cast<cudaError_t>(res.status);
      if (result == cudaSuccess && res.extra.size() < n) result = cudaErrorUnknown;  // a host bug
      if (result == cudaSuccess) std::memcpy(dst + off, res.extra.data(), n);
    }
    return result;
  }
  for (uint64_t off = 0; off < count && result == cudaSuccess; off += chunk->bytes) {
    const uint64_t n = std::min(chunk->bytes, count - off);
    result = static_cast<cudaError_t>(
        r.call<api::Call::CopyFromDeviceHeapAsync>({src + off, chunk->ref(0, n), stream, api::kHeapCopyWait, 0})
            .status);
    if (result == cudaSuccess) vmcuda::guest::parallel_copy(dst + off, chunk->data, n);
  }
  r.slot().heap().free(chunk->offset);
  return result;
}

cudaError_t copy_async(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                       bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t s;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &s)) return record(e);
  if (count == 0) return cudaSuccess;  // before the kind is checked, as NVIDIA's (seen on the H200)
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
  if (dst == nullptr || src == nullptr) return record(cudaErrorInvalidValue);
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: where each side is comes from this process's allocations.
    const bool d = is_device(dst, count), sd = is_device(src, count);
    kind = d ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  // The device side must be this process's device memory, as CUDA checks at once.
  if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && !is_device(dst, count))
    return record(cudaErrorInvalidValue);
  if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) && !is_device(src, count))
    return record(cudaErrorInvalidValue);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  const auto dst_dev = reinterpret_cast<uint64_t>(dst), src_dev = reinterpret_cast<uint64_t>(src);
  switch (kind) {
    case cudaMemcpyHostToDevice: {
      if (auto ref = pinned_range(src, count))
        return record(remote->enqueue<api::Call::CopyToDeviceHeapAsync>({dst_dev, *ref, s, 0, 0}));
      const auto* bytes = static_cast<const std::byte*>(src);
      if (count <= inline_limit(*remote))
        return record(remote->enqueue<api::Call::CopyToDeviceInlineAsync>({dst_dev, s}, {bytes, count}));
      // Round trips from here: an error of a queued call is this call's answer, but it
      // does not cut the copy short.
      const cudaError_t earlier = remote->flush();
      const cudaError_t e = staged_to_device(*remote, dst_dev, bytes, count, s);
      return record(earlier != cudaSuccess ? earlier : e);
    }
    case cudaMemcpyDeviceToHost: {
      if (auto ref = pinned_range(dst, count))
        return record(remote->enqueue<api::Call::CopyFromDeviceHeapAsync>({src_dev, *ref, s, 0, 0}));
      const cudaError_t earlier = remote->flush();
      const cudaError_t e = to_host(*remote, static_cast<std::byte*>(dst), src_dev, count, s);
      return record(earlier != cudaSuccess ? earlier : e);
    }
    case cudaMemcpyDeviceToDevice:
      return record(remote->enqueue<api::Call::CopyDeviceToDeviceAsync>({dst_dev, src_dev, count, s}));
    case cudaMemcpyHostToHost: {
      // In stream order: after the stream's earlier work, synchronously for the host.
      const cudaError_t earlier = remote->flush();
      const cudaError_t e = static_cast<cudaError_t>(remote->call<api::Call::StreamSynchronize>({s}).status);
      if (e == cudaSuccess) std::memmove(dst, src, count);
      return record(earlier != cudaSuccess ? earlier : e);
    }
    default:
      return record(cudaErrorInvalidMemcpyDirection);
  }
}

}  // namespace

// A memset of host memory on wire stream `s`, `width`-byte elements. Pinned heap memory
// (cudaMallocHost, cudaHostAlloc, cudaMallocManaged), which the host has mapped for the
// device: set by the device on the stream (MemsetHeapAsync), as natively the device sets the
// pinned pointer. Registered memory (cudaHostRegister) stays in this process, out of the
// device's reach: set here in stream order, once the stream's earlier work is done. A 1D
// memset is one row (MemsetHeapAsync); 2D and 3D ones are rows (MemsetHeap2DAsync).
cudaError_t memset_host_async(void* p, uint32_t value, unsigned width, uint64_t bytes, uint64_t s) {
  return memset_host_2d_async(p, bytes, value, width, bytes, 1, s);
}

// The 2D form (cudaMemset2D/3D, cuMemsetD2D*): `height` rows of `width` bytes, `pitch` apart.
cudaError_t memset_host_2d_async(void* p, uint64_t pitch, uint32_t value, unsigned element, uint64_t width,
                                 uint64_t height, uint64_t s) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch || height - 1 > (~uint64_t{0} - width) / pitch) return cudaErrorInvalidValue;
  const uint64_t span = pitch * (height - 1) + width;
  if (!is_memset_host_memory(p, span)) return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return err;
  auto lock = remote->lock();
  const uint32_t wire_element = element == 1 ? 0u : element;
  if (auto ref = pinned_range(p, span))
    return height == 1 ? remote->enqueue<api::Call::MemsetHeapAsync>({*ref, value, wire_element, s})
                       : remote->enqueue<api::Call::MemsetHeap2DAsync>({*ref, pitch, width, height, value, wire_element, s});
  if (addr(p) % element || pitch % element || width % element) return cudaErrorInvalidValue;
  const cudaError_t earlier = remote->flush();
  const cudaError_t e = static_cast<cudaError_t>(remote->call<api::Call::StreamSynchronize>({s}).status);
  if (e == cudaSuccess)
    for (uint64_t y = 0; y < height; ++y) {
      std::byte* row = static_cast<std::byte*>(p) + y * pitch;
      for (uint64_t i = 0; i < width; i += element) std::memcpy(row + i, &value, element);
    }
  return earlier != cudaSuccess ? earlier : e;
}

namespace {

cudaError_t memset_async(void* devPtr, int value, size_t count, cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t s;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &s)) return record(e);
  if (count == 0) return cudaSuccess;
  if (!is_device(devPtr, count)) return record(memset_host_async(devPtr, static_cast<uint32_t>(value), 1, count, s));
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  auto lock = remote->lock();
  return record(remote->enqueue<api::Call::MemsetAsync>(
      {reinterpret_cast<uint64_t>(devPtr), count, static_cast<uint32_t>(value), 0, s}));
}

}  // namespace

cudaError_t memset_elements(uint64_t dst, uint32_t value, unsigned width, uint64_t bytes, cudaStream_t stream,
                            bool per_thread, bool async) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t s = 0;
  if (async || per_thread)
    if (cudaError_t e = stream_wire_handle(stream, per_thread, &s)) return e;
  if (bytes == 0) return cudaSuccess;
  if (!is_device(reinterpret_cast<void*>(dst), bytes)) {  // host memory: fully synchronous unless async
    if (cudaError_t e = memset_host_async(reinterpret_cast<void*>(dst), value, width, bytes, s)) return e;
    return async ? cudaSuccess : per_thread ? cudaStreamSynchronize_ptsz(nullptr) : cudaStreamSynchronize(nullptr);
  }
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return err;
  {
    auto lock = remote->lock();
    if (!async && !per_thread)
      return remote->enqueue<api::Call::Memset>({dst, bytes, value, width});
    if (cudaError_t e = remote->enqueue<api::Call::MemsetAsync>({dst, bytes, value, width, s})) return e;
  }
  return async ? cudaSuccess : cudaStreamSynchronize_ptsz(nullptr);
}

}  // namespace vmcuda::guest

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return vmcuda::guest::copy_async(dst, src, count, kind, stream, false);
}
cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream) {
  return vmcuda::guest::copy_async(dst, src, count, kind, stream, true);
}
// A batch of copies (CUDA 12.8): checked as NVIDIA's runtime checks it (seen on the H100:
// no copies, the legacy default stream, an unknown access order: cudaErrorInvalidValue),
// then each copy in order on the stream, its kind told by the addresses. Each is a copy as
// cudaMemcpyAsync makes it, which reads pageable sources during the call: every access order
// (stream, during the call, any) holds. The location hints name where managed memory should
// be (advice) and are not needed for a correct copy.
namespace {
using vmcuda::guest::record;
cudaError_t copy_batch(void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,
                       const cudaMemcpyAttributes* attrs, const size_t* attrsIdxs, size_t numAttrs,
                       cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrsIdxs || numAttrs == 0 || numAttrs > count ||
      attrsIdxs[0] != 0)
    return record(cudaErrorInvalidValue);
  if ((stream == nullptr && !per_thread) || stream == cudaStreamLegacy) return record(cudaErrorInvalidValue);
  for (size_t a = 0; a < numAttrs; ++a) {
    if (a > 0 && (attrsIdxs[a] <= attrsIdxs[a - 1] || attrsIdxs[a] >= count)) return record(cudaErrorInvalidValue);
    uint32_t order;
    std::memcpy(&order, &attrs[a].srcAccessOrder, sizeof order);  // any value an app put there
    if (order < cudaMemcpySrcAccessOrderStream || order > cudaMemcpySrcAccessOrderAny ||
        (attrs[a].flags & ~unsigned{cudaMemcpyFlagPreferOverlapWithCompute}))
      return record(cudaErrorInvalidValue);
  }
  for (size_t i = 0; i < count; ++i)
    if (cudaError_t e = vmcuda::guest::copy_async(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, stream, per_thread))
      return e;
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,
                                 struct cudaMemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                 cudaStream_t stream) {
  return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, false);
}
cudaError_t cudaMemcpyBatchAsync_ptsz(void* const* dsts, const void* const* srcs, const size_t* sizes, size_t count,
                                      struct cudaMemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs,
                                      cudaStream_t stream) {
  return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, true);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return vmcuda::guest::memset_async(devPtr, value, count, stream, false);
}
cudaError_t cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return vmcuda::guest::memset_async(devPtr, value, count, stream, true);
}
