// memory area: allocations, copies, memsets, pinned host memory, channel descriptors.
//
// Copies: small ones travel inside the call frame; large pageable ones are pipelined
// through two heap chunks (the guest fills chunk i+1 while the host DMAs chunk i); memory
// from cudaMallocHost is carved from the shared heap, which the host has pinned, so
// copies from and to it are zero-copy. Device pointers are checked against this
// process's own allocations first, so a bad copy fails here, at once, as in CUDA.
//
// Mapped and managed memory: the host maps the shared region at a fixed address and this
// process maps it at the same one when it can (vmrpc RegionView::same_address), so under
// unified addressing a heap block's pointer is its device pointer on both sides, as CUDA
// programs expect of cudaHostAlloc memory. cudaMallocManaged is such a block too: zero-copy
// memory the GPU reads over the bus, coherent, never migrated. Memory the app registers
// (cudaHostRegister) lies outside the region: the host's GPU cannot reach it, so it is
// recorded (pointer attributes, flags, the CUDA errors of double registration) and copied
// through staging, but never mapped.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "async_notification.h"
#include "host_pointers.h"
#include "knobs.h"
#include "log.h"
#include "managed_advice.h"
#include "parallel_copy.h"
#include "pinned_heap.h"
#include "entry.h"
#include "graph.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;
using vmcuda::guest::Remote;
using vmcuda::guest::device_call;
using vmcuda::guest::addr;
using vmcuda::guest::is_device;
using vmcuda::guest::is_managed;
using vmcuda::guest::is_memset_host_memory;
using vmcuda::guest::pinned_range;
using vmcuda::guest::record;
using vmcuda::guest::pinned_heap_block;
using vmcuda::guest::free_heap_block;
namespace api = vmcuda::api;

namespace vmcuda::guest {
std::optional<vmrpc::HeapBlock> pinned_heap_block(Remote& r, size_t size, const char* call, cudaError_t* error) {
  auto b = r.slot().heap().allocate(size);
  if (!b) {
    VMCUDA_LOG(kWarn, "memory", "%s of %zu bytes: the shared heap is full; give the VM a larger region "
                                "(vmcuda-stub --region-bytes)", call, size);
    *error = cudaErrorMemoryAllocation;
    return std::nullopt;
  }
  // The host pins the block (only what is used gets pinned).
  if (auto pin = r.call<api::Call::PinHeap>({b->ref()}); pin.status != cudaSuccess) {
    r.slot().heap().free(b->offset);
    *error = static_cast<cudaError_t>(pin.status) == cudaErrorHostMemoryAlreadyRegistered
                 ? cudaErrorMemoryAllocation
                 : static_cast<cudaError_t>(pin.status);
    return std::nullopt;
  }
  return b;
}

cudaError_t free_heap_block(Remote& r, const Allocation& a) {
  r.enqueue<api::Call::UnpinHeap>({vmrpc::wire::HeapRef{a.heap_offset, a.bytes ? a.bytes : 1}});
  cudaError_t f = r.flush();
  r.slot().heap().free(a.heap_offset);
  return f;
}

}  // namespace vmcuda::guest

namespace {

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

// Logs `message` once per `said` flag (warning level).
void warn_once(std::atomic<bool>& said, const char* message) {
  if (!said.exchange(true)) VMCUDA_LOG(kWarn, "memory", "%s", message);
}

// Precondition: r's lock held. The device address of heap block `a`'s byte `p`: `p` itself
// when this process maps the region at the host's address (unified addressing), else the
// address the host's driver gives the bytes (cuMemHostGetDevicePointer).
cudaError_t heap_device_pointer(Remote& r, const Allocation& a, const void* p, void** out) {
  if (r.slot().region().same_address()) {
    *out = const_cast<void*>(p);
    return cudaSuccess;
  }
  auto res = r.call<api::Call::HostGetDevicePointer>({vmrpc::wire::HeapRef{a.heap_offset + (addr(p) - a.base), 1}});
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  *out = reinterpret_cast<void*>(res.reply.ptr);
  return cudaSuccess;
}

// Precondition: r's lock held. Waits until the device is idle: managed memory is host
// memory that kernels may still be writing, so host-side accesses that CUDA orders after
// earlier work wait for it (cudaDeviceSynchronize's errors are the call's).
cudaError_t wait_device(Remote& r) {
  return static_cast<cudaError_t>(r.call<api::Call::DeviceSynchronize>({}).status);
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
  if (res.status == cudaErrorMemoryAllocation) vmcuda::guest::note_refused_allocation(*r, Remote::thread_device(), size);
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
  if (cudaError_t f; vmcuda::guest::release_pool_import(devPtr, &f)) return record(f);
  if (cudaError_t f; vmcuda::guest::release_host_pool_allocation(devPtr, nullptr, &f)) return record(f);
  if (auto m = AllocationMap::process().remove(addr(devPtr), Allocation::kManaged)) {
    auto lock = r->lock();
    // cudaFree synchronizes: no kernel may still use the block when the heap hands it out again.
    cudaError_t s = wait_device(*r);
    vmcuda::guest::ManagedAdvice::process().forget(m->base, m->bytes);
    cudaError_t f = free_heap_block(*r, *m);
    return record(s != cudaSuccess ? s : f);
  }
  // Memory mapped by cuMemMap is not cudaMalloc's: cuMemUnmap gives it back.
  if (auto a = AllocationMap::process().find(addr(devPtr));
      a && a->base == addr(devPtr) && (a->flags & Allocation::kVmmMapping))
    return record(cudaErrorInvalidValue);
  // Graph memory (graph_memory.cc): freed outside its graph, its address kept while a graph holds it.
  if (cudaError_t g; vmcuda::guest::graph_memory_free(addr(devPtr), &g)) return record(g);
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
  // Managed memory is host memory the device reaches too, valid on either side of any
  // copy: where each side really is decides, as for cudaMemcpyDefault.
  const bool managed = is_managed(dst, count) || is_managed(src, count);
  if (kind == cudaMemcpyDefault || (managed && kind >= cudaMemcpyHostToHost && kind < cudaMemcpyDefault)) {
    // Unified addressing: where each side is comes from this process's allocations.
    const bool d = is_device(dst, count), s = is_device(src, count);
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  auto lock = r->lock();
  switch (kind) {
    case cudaMemcpyHostToHost:
      // Synchronous with respect to the device; managed memory may still be in a kernel's hands.
      if (cudaError_t f = managed ? wait_device(*r) : r->flush()) return record(f);
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
  if (is_memset_host_memory(devPtr, count)) {
    // Host memory (managed, pinned, registered): set here, once the work ordered before it
    // (kernels using it) is done; CUDA's memset of pinned or managed memory is fully
    // synchronous too.
    auto lock = r->lock();
    if (cudaError_t f = wait_device(*r)) return record(f);
    std::memset(devPtr, value, count);
    return cudaSuccess;
  }
  if (!is_device(devPtr, count)) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  return record(r->enqueue<api::Call::Memset>({addr(devPtr), count, static_cast<uint32_t>(value), 0}));
}

cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  return vmcuda::guest::finish_on_per_thread_stream(cudaMemcpyAsync(dst, src, count, kind, cudaStreamPerThread));
}
cudaError_t cudaMemset_ptds(void* devPtr, int value, size_t count) {
  return vmcuda::guest::finish_on_per_thread_stream(cudaMemsetAsync(devPtr, value, count, cudaStreamPerThread));
}

// Pinned host memory is a block of the shared heap, pinned by the host (portable and
// device-mapped: under unified addressing every pinned allocation is mapped, as CUDA's
// are), so copies from and to it are DMA with no staging copy.
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  if (!pHost) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (flags & ~unsigned{cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined})
    return *pHost = nullptr, record(cudaErrorInvalidValue);
  if (size == 0) return *pHost = nullptr, cudaSuccess;  // as CUDA: no memory, no error
  auto lock = r->lock();
  if ((flags & cudaHostAllocMapped) && !r->slot().region().same_address()) {
    static std::atomic<bool> said{false};
    warn_once(said, "the shared region is not at vmcuda-stub's address in this process: kernels must use the "
                    "pointer cudaHostGetDevicePointer returns for cudaHostAllocMapped memory, not the host pointer "
                    "(VMRPC_LOG=2 says why the addresses differ)");
  }
  auto b = pinned_heap_block(*r, size, "cudaHostAlloc", &e);
  if (!b) return record(e);
  Allocation a{addr(b->data), size, Allocation::kPinnedHost, Remote::thread_device(), b->offset};
  a.flags = flags;
  AllocationMap::process().add(a);
  *pHost = b->data;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  // A host memory pool's allocation is the pool's: cudaFree / cudaFreeAsync free it.
  if (vmcuda::guest::is_host_pool_allocation(ptr)) return record(cudaErrorInvalidValue);
  auto a = AllocationMap::process().remove(addr(ptr), Allocation::kPinnedHost);
  if (!a) return record(cudaErrorInvalidValue);
  auto lock = r->lock();
  // Copies that use the block may still be queued: they go first, then the unpin.
  return record(free_heap_block(*r, *a));
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  if (!pDevice) return record(cudaErrorInvalidValue);
  *pDevice = nullptr;
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (flags != 0) return record(cudaErrorInvalidValue);
  auto a = AllocationMap::process().find(addr(pHost));
  if (a && a->kind == Allocation::kPinnedHost) {
    auto lock = r->lock();
    return record(heap_device_pointer(*r, *a, pHost, pDevice));
  }
  if (a && a->kind == Allocation::kRegisteredHost) {
    static std::atomic<bool> said{false};
    warn_once(said, "cudaHostGetDevicePointer: memory registered with cudaHostRegister stays in this process, "
                    "where the host's GPU cannot reach it; allocate memory kernels use with "
                    "cudaHostAlloc(cudaHostAllocMapped) instead (cudaErrorNotSupported)");
    return record(cudaErrorNotSupported);
  }
  return record(cudaErrorInvalidValue);  // pageable, device or managed memory, as CUDA
}

// What CUDA reports under unified addressing (measured on the H200): every pinned
// allocation is mapped, so cudaHostAllocMapped is always set and cudaHostAllocPortable never
// for cudaHostAlloc memory; registered memory keeps cudaHostRegisterPortable; managed
// memory reads cudaHostAllocMapped.
cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!pFlags) return record(cudaErrorInvalidValue);
  auto a = AllocationMap::process().find(addr(pHost));
  if (!a) return record(cudaErrorInvalidValue);
  switch (a->kind) {
    case Allocation::kPinnedHost:
      *pFlags = cudaHostAllocMapped | (a->flags & cudaHostAllocWriteCombined);
      return cudaSuccess;
    case Allocation::kRegisteredHost:
      *pFlags = cudaHostAllocMapped | (a->flags & cudaHostRegisterPortable);
      return cudaSuccess;
    case Allocation::kManaged:
      *pFlags = cudaHostAllocMapped;
      return cudaSuccess;
    default:
      return record(cudaErrorInvalidValue);
  }
}

// Memory outside the shared region: recorded, so that CUDA's answers and errors hold
// (pointer attributes, flags, 712 for a second registration, 713 for an unknown one);
// copies from and to it are staged as pageable ones are. The host's GPU cannot reach it,
// so it is never device-mapped: cudaHostRegisterMapped and I/O memory are refused.
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  constexpr unsigned kKnown =
      cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  if (!ptr || size == 0 || (flags & ~kKnown)) return record(cudaErrorInvalidValue);
  if (addr(ptr) + size < addr(ptr)) return record(cudaErrorInvalidValue);
  if (auto o = AllocationMap::process().first_overlap(addr(ptr), size))
    // Another registration: CUDA's 712. Pinned, managed or device memory: invalid, as CUDA.
    return record(o->kind == Allocation::kRegisteredHost ? cudaErrorHostMemoryAlreadyRegistered
                                                          : cudaErrorInvalidValue);
  const std::byte* heap = r->slot().region().heap().data();
  const uint64_t heap_bytes = r->slot().region().heap().size();
  if (addr(ptr) < addr(heap) + heap_bytes && addr(heap) < addr(ptr) + size) return record(cudaErrorInvalidValue);
  if (flags & (cudaHostRegisterMapped | cudaHostRegisterIoMemory)) {
    static std::atomic<bool> said{false};
    warn_once(said, "cudaHostRegister with cudaHostRegisterMapped or cudaHostRegisterIoMemory: the memory stays in "
                    "this process, where the host's GPU cannot reach it; allocate memory kernels use with "
                    "cudaHostAlloc(cudaHostAllocMapped) instead (cudaErrorNotSupported)");
    return record(cudaErrorNotSupported);
  }
  Allocation a{addr(ptr), size, Allocation::kRegisteredHost, Remote::thread_device(), 0};
  a.flags = flags;
  AllocationMap::process().add(a);
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!ptr) return record(cudaErrorInvalidValue);
  if (AllocationMap::process().remove(addr(ptr), Allocation::kRegisteredHost)) return cudaSuccess;
  // Inside a registered range but not its start: CUDA says invalid value, not 713.
  auto a = AllocationMap::process().find(addr(ptr));
  return record(a && a->kind == Allocation::kRegisteredHost ? cudaErrorInvalidValue
                                                            : cudaErrorHostMemoryNotRegistered);
}

// Managed memory is a pinned, device-mapped block of the shared heap at the same address
// in this process and in the host's: host and device use one pointer, both coherent
// (zero-copy: the GPU reads it over the bus; nothing migrates, so prefetches and advice
// have nothing to do). Without the same address there is no such pointer: not supported.
cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  if (!devPtr) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) return record(cudaErrorInvalidValue);
  if (size == 0) return *devPtr = nullptr, cudaSuccess;  // as CUDA
  auto lock = r->lock();
  if (!r->slot().region().same_address()) {
    static std::atomic<bool> said{false};
    warn_once(said, "cudaMallocManaged is not supported in this process: managed memory is shared-region memory at "
                    "the same address here and in vmcuda-stub, and the region could not be mapped at the stub's "
                    "address (VMRPC_LOG=2 says why); it returns cudaErrorNotSupported");
    return record(cudaErrorNotSupported);
  }
  auto b = pinned_heap_block(*r, size, "cudaMallocManaged", &e);
  if (!b) return record(e);
  AllocationMap::process().add({addr(b->data), size, Allocation::kManaged, Remote::thread_device(), b->offset});
  *devPtr = b->data;
  return cudaSuccess;
}

namespace {
// The checks CUDA makes of a prefetch or an advice (measured on the H200): managed memory
// only, a known location type, an existing device. Accessed-by advice names a device or
// the host only (CUDA's documentation).
cudaError_t check_managed_hint(const void* p, size_t count, const cudaMemLocation& location, Remote& r,
                               bool device_or_host = false) {
  if (!is_managed(p, count ? count : 1)) return cudaErrorInvalidValue;
  switch (location.type) {
    case cudaMemLocationTypeDevice:
      return location.id >= 0 && location.id < r.handshake().device_count ? cudaSuccess : cudaErrorInvalidDevice;
    case cudaMemLocationTypeHost:
      return cudaSuccess;
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent:
      return device_or_host ? cudaErrorInvalidValue : cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}

// The host NUMA node closest to the calling thread's CPU, for HostNumaCurrent (CUDA records
// the node itself: the range queries answer HostNuma and its id).
cudaMemLocation resolve_numa_current(cudaMemLocation l) {
  if (l.type != cudaMemLocationTypeHostNumaCurrent) return l;
  unsigned cpu = 0, node = 0;
  if (getcpu(&cpu, &node) != 0) node = 0;
  return {cudaMemLocationTypeHostNuma, static_cast<int>(node)};
}
}  // namespace

// Checked and recorded (cudaMemRangeGetAttribute answers the last location asked for, as
// CUDA does), then nothing to do: managed memory here never migrates (see cudaMallocManaged).
cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, struct cudaMemLocation location, unsigned int flags,
                                 cudaStream_t) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (flags != 0) return record(cudaErrorInvalidValue);
  if (cudaError_t c = check_managed_hint(devPtr, count, location, *r)) return record(c);
  vmcuda::guest::ManagedAdvice::process().prefetched(addr(devPtr), count, resolve_numa_current(location));
  return cudaSuccess;
}

cudaError_t cudaMemPrefetchAsync_ptsz(const void* devPtr, size_t count, struct cudaMemLocation location,
                                      unsigned int flags, cudaStream_t stream) {
  return cudaMemPrefetchAsync(devPtr, count, location, flags, stream);
}

// Checked and recorded for cudaMemRangeGetAttribute; it changes nothing else here (nothing migrates).
cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy) return record(cudaErrorInvalidValue);
  // Read-mostly and unset-preferred advice name no location (CUDA ignores it).
  const bool no_location = advice == cudaMemAdviseSetReadMostly || advice == cudaMemAdviseUnsetReadMostly ||
                           advice == cudaMemAdviseUnsetPreferredLocation;
  const bool accessed_by = advice == cudaMemAdviseSetAccessedBy || advice == cudaMemAdviseUnsetAccessedBy;
  if (no_location) {
    if (!is_managed(devPtr, count ? count : 1)) return record(cudaErrorInvalidValue);
  } else if (cudaError_t c = check_managed_hint(devPtr, count, location, *r, accessed_by)) {
    return record(c);
  }
  if (!no_location && location.type == cudaMemLocationTypeDevice &&
      location.id >= vmcuda::guest::ManagedAdvice::kMaxDevices)
    return record(cudaErrorInvalidDevice);
  vmcuda::guest::ManagedAdvice::process().advise(addr(devPtr), count, advice, resolve_numa_current(location));
  return cudaSuccess;
}

// Answered from this process's allocation map, with no round trip (docs §7): device memory
// (cudaMalloc, cudaMallocPitch, a module variable's storage), pinned host memory
// (cudaMallocHost; one round trip for its device address when the region is not at the
// host's address), managed and registered memory, and any other pointer as unregistered
// host memory (CUDA 11 and later: cudaMemoryTypeUnregistered and cudaSuccess).
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
    attributes->hostPointer = const_cast<void*>(ptr);
    // Mapped, as all pinned memory under unified addressing: the same pointer when the
    // region is at the host's address (no round trip), else the host driver's.
    cudaError_t e;
    Remote* r = Remote::get(&e);
    if (r) {
      auto lock = r->lock();
      if (heap_device_pointer(*r, *a, ptr, &attributes->devicePointer) != cudaSuccess) attributes->devicePointer = nullptr;
    }
  } else if (a && a->kind == Allocation::kManaged) {
    attributes->type = cudaMemoryTypeManaged;
    attributes->device = a->device;
    attributes->devicePointer = const_cast<void*>(ptr);
    attributes->hostPointer = const_cast<void*>(ptr);
  } else if (a && a->kind == Allocation::kRegisteredHost) {
    // Host memory, as CUDA says, but not device-mapped (cudaHostRegister above): no
    // device address, NULL as the field's documentation has it for unmapped memory.
    attributes->type = cudaMemoryTypeHost;
    attributes->device = a->device;
    attributes->hostPointer = const_cast<void*>(ptr);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = cudaInvalidDeviceId;
    attributes->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}
