// memory area: allocations, copies, memsets, pinned host memory, channel descriptors.
//
// Copies: small ones travel inside the call frame; large pageable ones are pipelined
// through two heap chunks (the guest fills chunk i+1 while the host DMAs chunk i); memory
// from cudaMallocHost is carved from the shared heap, which the host has pinned, so
// copies from and to it are zero-copy. Device pointers are checked against this
// process's own allocations first, so a bad copy fails here, at once, as in CUDA.
#include <algorithm>
#include <cstring>

#include "host_pointers.h"
#include "knobs.h"
#include "log.h"
#include "parallel_copy.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;
using vmcuda::guest::Remote;
using vmcuda::guest::addr;
using vmcuda::guest::is_device;
using vmcuda::guest::pinned_range;
using vmcuda::guest::record;
namespace api = vmcuda::api;

namespace {

// Connects (first use) and checks for a sticky error.
Remote* device_call(cudaError_t* error) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return *error = e, nullptr;
  Remote* r = Remote::get(error);
  if (!r) record(*error);
  return r;
}

// Two heap chunks per process for pipelined pageable copies, made on first use.
struct Staging {
  std::optional<vmrpc::HeapBlock> chunk[2];
};
// Precondition: r's lock held.
Staging& staging(Remote& r) {
  static Staging s;
  const uint64_t bytes = static_cast<uint64_t>(vmcuda::guest::knobs::kCopyChunkBytes.get());
  for (auto& c : s.chunk) {
    if (c) continue;
    c = r.slot().heap().allocate(bytes);
    // Pinned, so the host's DMA reads it directly; unpinned staging still works, slower.
    if (c && r.call<api::Call::PinHeap>({c->ref()}).status != 0)
      VMCUDA_LOG(kWarn, "memory", "the host could not pin copy staging: large pageable copies run slower");
  }
  return s;
}

// Precondition: r's lock held.
cudaError_t copy_to_device(Remote& r, uint64_t dst, const void* src, uint64_t n) {
  if (auto ref = pinned_range(src, n)) return static_cast<cudaError_t>(r.call<api::Call::CopyToDeviceHeap>({dst, *ref}).status);
  const uint64_t inline_max = static_cast<uint64_t>(vmcuda::guest::knobs::kInlineCopyBytes.get());
  if (n <= inline_max) {
    // The bytes are in the frame: the copy may wait in the queue (CUDA returns once a
    // pageable source has been staged, too).
    return r.enqueue<api::Call::CopyToDeviceInline>({dst}, {static_cast<const std::byte*>(src), n});
  }
  Staging& st = staging(r);
  if (!st.chunk[0] || !st.chunk[1]) return cudaErrorMemoryAllocation;
  if (cudaError_t e = r.flush(); e != cudaSuccess) return e;
  auto& slot = r.slot();
  const uint64_t chunk = st.chunk[0]->bytes;
  cudaError_t result = cudaSuccess;
  vmrpc::FrameRef in_flight{};
  bool busy = false;
  for (uint64_t off = 0, i = 0; off < n; off += chunk, ++i) {
    const uint64_t len = std::min(chunk, n - off);
    vmrpc::HeapBlock& b = *st.chunk[i % 2];
    vmcuda::guest::parallel_copy(b.data, static_cast<const std::byte*>(src) + off, len);  // while the host DMAs the other chunk
    if (busy) {
      if (slot.wait() != vmrpc::wire::ChannelStatus::kOk) return cudaErrorDevicesUnavailable;
      if (int32_t s = slot.result(in_flight).status; s != 0 && result == cudaSuccess)
        result = vmcuda::guest::to_cuda_error(s, "CopyToDeviceHeap");
    }
    api::CopyHeapArgs a{dst + off, b.ref(0, len)};
    in_flight = *slot.batch().append(static_cast<uint32_t>(api::Call::CopyToDeviceHeap), std::as_bytes(std::span(&a, 1)), 0);
    if (slot.submit() != vmrpc::wire::ChannelStatus::kOk) return cudaErrorDevicesUnavailable;
    busy = true;
  }
  if (busy) {
    if (slot.wait() != vmrpc::wire::ChannelStatus::kOk) return cudaErrorDevicesUnavailable;
    if (int32_t s = slot.result(in_flight).status; s != 0 && result == cudaSuccess)
      result = vmcuda::guest::to_cuda_error(s, "CopyToDeviceHeap");
  }
  return result;
}

// Precondition: r's lock held.
cudaError_t copy_from_device(Remote& r, void* dst, uint64_t src, uint64_t n) {
  if (auto ref = pinned_range(dst, n)) return static_cast<cudaError_t>(r.call<api::Call::CopyFromDeviceHeap>({src, *ref}).status);
  const uint64_t inline_max = static_cast<uint64_t>(vmcuda::guest::knobs::kInlineReadBytes.get());
  if (n <= inline_max) {
    auto res = r.call<api::Call::CopyFromDeviceInline>({src, n}, {}, static_cast<uint32_t>(n));
    if (res.status == cudaSuccess) std::memcpy(dst, res.extra.data(), std::min<uint64_t>(n, res.extra.size()));
    return static_cast<cudaError_t>(res.status);
  }
  Staging& st = staging(r);
  if (!st.chunk[0] || !st.chunk[1]) return cudaErrorMemoryAllocation;
  if (cudaError_t e = r.flush(); e != cudaSuccess) return e;
  auto& slot = r.slot();
  const uint64_t chunk = st.chunk[0]->bytes;
  auto submit = [&](uint64_t i) -> std::optional<vmrpc::FrameRef> {
    const uint64_t off = i * chunk;
    api::CopyHeapArgs a{src + off, st.chunk[i % 2]->ref(0, std::min(chunk, n - off))};
    auto f = slot.batch().append(static_cast<uint32_t>(api::Call::CopyFromDeviceHeap), std::as_bytes(std::span(&a, 1)), 0);
    if (!f || slot.submit() != vmrpc::wire::ChannelStatus::kOk) return std::nullopt;
    return f;
  };
  const uint64_t chunks = (n + chunk - 1) / chunk;
  auto f = submit(0);
  if (!f) return cudaErrorDevicesUnavailable;
  for (uint64_t i = 0; i < chunks; ++i) {
    if (slot.wait() != vmrpc::wire::ChannelStatus::kOk) return cudaErrorDevicesUnavailable;
    if (int32_t s = slot.result(*f).status; s != 0) return vmcuda::guest::to_cuda_error(s, "CopyFromDeviceHeap");
    // Start the next chunk's DMA, then copy this one out while it runs.
    if (i + 1 < chunks && !(f = submit(i + 1))) return cudaErrorDevicesUnavailable;
    const uint64_t off = i * chunk;
    vmcuda::guest::parallel_copy(static_cast<std::byte*>(dst) + off, st.chunk[i % 2]->data, std::min(chunk, n - off));
  }
  return cudaSuccess;
}

}  // namespace

// Pure data: NVIDIA's checks nothing either (cudaCreateChannelDesc<T>() in the headers
// calls this with the sizes of T's members).
struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (!devPtr) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (size == 0) return *devPtr = nullptr, cudaSuccess;
  auto lock = r->lock();
  // Synchronous: an out-of-memory must be reported here.
  auto res = r->call<api::Call::Malloc>({size});
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  AllocationMap::process().add({res.reply.ptr, size, Allocation::kDevice, Remote::thread_device(), 0});
  *devPtr = reinterpret_cast<void*>(res.reply.ptr);
  return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!devPtr) return cudaSuccess;
  if (!AllocationMap::process().remove(addr(devPtr), Allocation::kDevice)) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  return record(r->enqueue<api::Call::Free>({addr(devPtr)}));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return record(cudaErrorInvalidValue);
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: where each side is comes from this process's allocations.
    const bool d = is_device(dst, count), s = is_device(src, count);
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  auto lock = r->lock();
  switch (kind) {
    case cudaMemcpyHostToHost:
      if (cudaError_t f = r->flush()) return record(f);  // synchronous with respect to the device
      std::memmove(dst, src, count);
      return cudaSuccess;
    case cudaMemcpyHostToDevice:
      if (!is_device(dst, count)) return record(cudaErrorInvalidValue);
      return record(copy_to_device(*r, addr(dst), src, count));
    case cudaMemcpyDeviceToHost:
      if (!is_device(src, count)) return record(cudaErrorInvalidValue);
      return record(copy_from_device(*r, dst, addr(src), count));
    case cudaMemcpyDeviceToDevice:
      if (!is_device(dst, count) || !is_device(src, count)) return record(cudaErrorInvalidValue);
      return record(r->enqueue<api::Call::CopyDeviceToDevice>({addr(dst), addr(src), count}));
    default:
      return record(cudaErrorInvalidMemcpyDirection);
  }
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (count == 0) return cudaSuccess;
  if (!is_device(devPtr, count)) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  return record(r->enqueue<api::Call::Memset>({addr(devPtr), count, static_cast<uint32_t>(value), 0}));
}

// Pinned host memory is a block of the shared heap: the host pinned the heap when the
// process connected, so copies from and to it are DMA with no staging copy.
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  if (!pHost) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (flags & 0x02u) {  // cudaHostAllocMapped
    // TODO(remoting): the device-side address of the heap (cuMemHostGetDevicePointer).
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMCUDA_LOG(kWarn, "memory", "cudaHostAllocMapped is not supported yet: the memory is pinned but has no device "
                                  "address (cudaHostGetDevicePointer fails)");
  }
  auto lock = r->lock();
  auto b = r->slot().heap().allocate(size ? size : 1);
  if (!b) {
    VMCUDA_LOG(kWarn, "memory", "cudaHostAlloc of %zu bytes: the shared heap is full; give the VM a larger region "
                                "(vmcuda-stub --region-bytes)", size);
    return record(cudaErrorMemoryAllocation);
  }
  // The host pins the block (only what is used gets pinned).
  if (auto pin = r->call<api::Call::PinHeap>({b->ref()}); pin.status != cudaSuccess) {
    r->slot().heap().free(b->offset);
    return record(static_cast<cudaError_t>(pin.status) == cudaErrorHostMemoryAlreadyRegistered
                      ? cudaErrorMemoryAllocation
                      : static_cast<cudaError_t>(pin.status));
  }
  AllocationMap::process().add({addr(b->data), size, Allocation::kPinnedHost, Remote::thread_device(), b->offset});
  *pHost = b->data;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  auto a = AllocationMap::process().remove(addr(ptr), Allocation::kPinnedHost);
  if (!a) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  // Copies that use the block may still be queued: they go first, then the unpin.
  r->enqueue<api::Call::UnpinHeap>({vmrpc::wire::HeapRef{a->heap_offset, a->bytes ? a->bytes : 1}});
  cudaError_t f = r->flush();
  r->slot().heap().free(a->heap_offset);
  return record(f);
}

// Answered from this process's allocation map, with no round trip (docs §7): device memory
// (cudaMalloc, cudaMallocPitch, a module variable's storage), pinned host memory
// (cudaMallocHost), and any other pointer as unregistered host memory (CUDA 11 and later:
// cudaMemoryTypeUnregistered and cudaSuccess).
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!attributes) return record(cudaErrorInvalidValue);
  *attributes = cudaPointerAttributes{};
  auto a = AllocationMap::process().find(addr(ptr));
  if (a && a->is_device()) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = a->device;
    attributes->devicePointer = const_cast<void*>(ptr);
  } else if (a && a->kind == Allocation::kPinnedHost) {
    attributes->type = cudaMemoryTypeHost;
    attributes->device = a->device;
    // TODO(remoting): mapped pinned memory (cudaHostAllocMapped) has no device address yet,
    // so no device may dereference it: NULL, as the field's documentation says.
    attributes->devicePointer = nullptr;
    attributes->hostPointer = const_cast<void*>(ptr);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = cudaInvalidDeviceId;
    attributes->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}
