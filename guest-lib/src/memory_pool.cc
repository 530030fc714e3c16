// Stream-ordered allocation (cudaMallocAsync family) and memory pools, with no wire calls of
// their own. An allocation is made at once, as cudaMalloc's (the host's Malloc, from the
// client's arena): memory usable before its place in the stream is a correct
// implementation of "usable from that point on". cudaFreeAsync queues the host's Free,
// which synchronizes the client's devices before it unmaps: the memory goes after the
// stream's earlier work, a stronger ordering than CUDA's, and correct.
//
// Pools are guest-made handles (never dereferenced, checked against the registry below):
// a default pool per device, made at first use, plus cudaMemPoolCreate's. They hold no
// memory of their own (nothing is cached for reuse), so their attributes are kept here:
// the release threshold and reuse flags as set, the used memory as what this process has
// allocated through the pool and not yet freed with cudaFreeAsync; reserved = used.
//
// Pool IPC between programs of one VM (calls.def 0x1a10): a pool created with
// cudaMemHandleTypePosixFileDescriptor exports as a token of the VM's table (MemPoolExport).
// The program gets a real file descriptor, as natively, to pass over a unix socket or keep
// across fork: a sealed memfd holding kPoolFdMagic and the token; the importer's library
// reads the token back (the descriptor means nothing outside the VM: the token is only in
// its stub's table). A pointer's export data holds the pool's token and the allocation's IPC
// memory token; importing opens it as cudaIpcOpenMemHandle does, and the importer's
// cudaFree/cudaFreeAsync of it closes it.
//
// Pools of host memory (cudaMemLocationTypeHost / HostNuma; CUDA 12.6+): an allocation is a
// pinned block of the shared heap, as cudaHostAlloc(cudaHostAllocMapped)'s (pinned and
// device-mapped by the host, charged to the VM's host memory bound, carried across a suspend
// as every pinned block is; the pool itself is this registry's, the guest's). The pointer is
// the device's too when the region is at the host's address (as natively, one address for
// both); the memory is the region's, wherever the VM's memory lies: a HostNuma pool's node is
// checked against this machine's nodes and recorded, not enforced. Every device reaches it
// (the host maps heap blocks for all of them); cudaMemPoolGetAccess answers what the
// program granted, as CUDA's pools do (the host CPU read-write, devices none until granted).
// cudaFreeAsync waits for the stream before the block goes back to the heap, where the
// next allocation could take it: stronger ordering than CUDA's, and correct.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "async_notification.h"
#include "entry.h"
#include "graph.h"
#include "log.h"
#include "pinned_heap.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

using vgpu_db::Allocation;
using vgpu_db::AllocationMap;
using vmcuda::guest::Remote;
using vmcuda::guest::device_call;
using vmcuda::guest::record;
namespace api = vmcuda::api;

namespace {

struct Pool {
  int device = 0;
  bool is_default = false;
  size_t max_size = 0;  // 0: no limit but the device's
  uint64_t release_threshold = 0;
  int reuse[3] = {1, 1, 1};  // cudaMemPoolReuse*: attributes 1..3, enabled by default
  uint64_t used = 0, used_high = 0, reserved_high = 0;
  bool managed = false;  // cudaMemAllocationTypeManaged: created, but allocations are not remoted
  // Host memory (cudaMemLocationTypeHost or HostNuma, `numa` its node): device is -1.
  cudaMemLocationType location = cudaMemLocationTypeDevice;
  int numa = 0;
  bool host() const { return location != cudaMemLocationTypeDevice; }
  std::map<int, cudaMemAccessFlags> access;  // other devices' access (cudaMemPoolSetAccess)
  unsigned handle_types = 0;  // cudaMemPoolProps::handleTypes: exportable when not none
  bool imported = false;      // cudaMemPoolImportFromShareableHandle's: no allocations of its own
  bool exported = false;      // the host has a token for it (`token`): forgotten at destroy
  api::IpcHandle token{};     // exported or imported: the pool's token in the VM's table
};

struct Allocated {
  uint64_t pool;
  uint64_t bytes;
  bool host = false;  // a host pool's: a pinned heap block (kPinnedHost), not device memory
};

// A host location's key in the registry: (type, node), the node 0 for cudaMemLocationTypeHost.
using HostLocation = std::pair<int, int>;

// Every pool and pool allocation of this process; its own lock (callers may hold Remote's).
struct Registry {
  std::mutex mu;
  uint64_t next = 0x7f00'0000'0000;  // handle values: aligned like pointers, never 0
  std::unordered_map<uint64_t, Pool> pools;
  std::map<int, uint64_t> default_pool, current_pool;
  std::map<HostLocation, uint64_t> host_default_pool, host_current_pool;
  std::unordered_map<uint64_t, Allocated> allocations;  // by device pointer
  // cudaMemPoolImportPointer's pointers: how many imports each (one cudaFree closes one).
  std::unordered_map<uint64_t, unsigned> imported;
  // Per device: how many pools let it in. The host grants a device the client's whole
  // arena (all pools' memory) while any does; asked at the first grant and after the last.
  std::map<int, int> grants;

  // Precondition: mu held.
  uint64_t default_of(int device) {
    auto [it, made] = default_pool.try_emplace(device, 0);
    if (made) {
      it->second = next += 0x100;
      pools[it->second] = Pool{.device = device, .is_default = true};
    }
    return it->second;
  }
  uint64_t current_of(int device) {
    auto it = current_pool.find(device);
    return it != current_pool.end() ? it->second : default_of(device);
  }
  uint64_t host_default_of(HostLocation l) {
    auto [it, made] = host_default_pool.try_emplace(l, 0);
    if (made) {
      it->second = next += 0x100;
      pools[it->second] = Pool{.device = -1, .is_default = true,
                               .location = static_cast<cudaMemLocationType>(l.first), .numa = l.second};
    }
    return it->second;
  }
  uint64_t host_current_of(HostLocation l) {
    auto it = host_current_pool.find(l);
    return it != host_current_pool.end() ? it->second : host_default_of(l);
  }
  Pool* find(cudaMemPool_t p) {
    auto it = pools.find(reinterpret_cast<uint64_t>(p));
    return it == pools.end() ? nullptr : &it->second;
  }
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

void warn_once(std::atomic<bool>& said, const char* message) {
  if (!said.exchange(true)) VMCUDA_LOG(kWarn, "memory", "%s", message);
}

bool valid_device(const Remote& r, int device) { return device >= 0 && device < r.handshake().device_count; }

// The device whose memory `stream` allocates from: its own, or the calling thread's for
// the special streams.
cudaError_t stream_device(cudaStream_t stream, bool per_thread, int* device) {
  uint64_t wire;
  if (cudaError_t e = vmcuda::guest::stream_wire_handle(stream, per_thread, &wire)) return e;
  vmcuda::guest::StreamInfo info;
  *device = vmcuda::guest::handles::find_stream(wire, &info) ? info.device : Remote::thread_device();
  return cudaSuccess;
}

// Records `size` bytes at `ptr` as pool `pool_handle`'s (its used memory and high marks).
void count_allocation(uint64_t ptr, size_t size, uint64_t pool_handle, bool host) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  reg.allocations[ptr] = {pool_handle, size, host};
  if (Pool* p = reg.find(reinterpret_cast<cudaMemPool_t>(pool_handle))) {
    p->used += size;
    p->used_high = std::max(p->used_high, p->used);
    p->reserved_high = std::max(p->reserved_high, p->used);
  }
}

// A host pool's allocation: a pinned, device-mapped block of the shared heap (see the top).
cudaError_t host_pool_allocate(Remote& r, void** ptr, size_t size, uint64_t pool_handle) {
  auto lock = r.lock();
  if (!r.slot().region().same_address()) {
    static std::atomic<bool> said{false};
    warn_once(said, "the shared region is not at vmcuda-stub's address in this process: kernels must use the "
                    "pointer cudaHostGetDevicePointer returns for a host memory pool's allocations, not the "
                    "pointer itself (VMRPC_LOG=2 says why the addresses differ)");
  }
  cudaError_t e;
  auto b = vmcuda::guest::pinned_heap_block(r, size, "cudaMallocFromPoolAsync (a pool of host memory)", &e);
  if (!b) return e;
  Allocation a{reinterpret_cast<uint64_t>(b->data), size, Allocation::kPinnedHost, Remote::thread_device(),
               b->offset};
  a.flags = cudaHostAllocMapped;
  AllocationMap::process().add(a);
  count_allocation(a.base, size, pool_handle, true);
  *ptr = b->data;
  return cudaSuccess;
}

// Allocates `size` bytes on `pool`'s device through the host's Malloc and records them as
// device memory (pointer attributes, cudaMemcpyDefault, cudaFree) and as the pool's.
cudaError_t pool_allocate(Remote& r, void** ptr, size_t size, uint64_t pool_handle) {
  int device;
  bool host;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    Pool* p = reg.find(reinterpret_cast<cudaMemPool_t>(pool_handle));
    if (!p || p->imported) return cudaErrorInvalidValue;  // an imported pool allocates nothing (CUDA)
    if (p->managed) {
      static std::atomic<bool> said{false};
      warn_once(said, "cudaMallocFromPoolAsync: allocations from a managed-memory pool are not supported "
                      "(cudaErrorNotSupported); use cudaMallocManaged or a device pool");
      return cudaErrorNotSupported;
    }
    if (p->max_size && p->used + size > p->max_size) return cudaErrorMemoryAllocation;
    device = p->device;
    host = p->host();
  }
  if (host) return host_pool_allocate(r, ptr, size, pool_handle);
  auto lock = r.lock();
  // Calls run on the thread's device: the pool's, for this one call.
  int& td = Remote::thread_device();
  const int saved = td;
  td = device;
  auto res = r.call<api::Call::Malloc>({size});
  if (res.status == cudaErrorMemoryAllocation) vmcuda::guest::note_refused_allocation(r, device, size);
  td = saved;
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  AllocationMap::process().add({res.reply.ptr, size, Allocation::kDevice, device, 0});
  count_allocation(res.reply.ptr, size, pool_handle, false);
  *ptr = reinterpret_cast<void*>(res.reply.ptr);
  return cudaSuccess;
}

bool is_host_pool(cudaMemPool_t pool) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const Pool* p = pool ? reg.find(pool) : nullptr;
  return p && p->host();
}

cudaError_t malloc_async(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream, bool per_thread) {
  if (!ptr) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  int device;
  if (cudaError_t s = stream_device(stream, per_thread, &device)) return record(s);
  // A zero size succeeds with NULL, as NVIDIA's runtime answers on the H200.
  if (size == 0) return *ptr = nullptr, cudaSuccess;
  // On a capturing stream: an alloc node of the capture's graph (graph_memory.cc).
  uint64_t s;
  if (cudaError_t se = vmcuda::guest::stream_wire_handle(stream, per_thread, &s)) return record(se);
  {
    auto lock = r->lock();
    if (vmcuda::guest::stream_capturing(*r, s)) {
      if (is_host_pool(pool)) {
        // A graph's memory nodes here are device memory (graph_memory.cc).
        static std::atomic<bool> said{false};
        warn_once(said, "cudaMallocFromPoolAsync: capturing an allocation from a pool of host memory is not "
                        "supported (cudaErrorNotSupported); allocate it before the capture");
        return record(cudaErrorNotSupported);
      }
      return record(vmcuda::guest::graph_memory_capture_alloc(*r, s, device, size, ptr));
    }
  }
  uint64_t handle = reinterpret_cast<uint64_t>(pool);
  if (!pool) {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    handle = reg.current_of(device);
  }
  return record(pool_allocate(*r, ptr, size, handle));
}

cudaError_t free_async(void* ptr, cudaStream_t stream, bool per_thread) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  int device;
  if (cudaError_t s = stream_device(stream, per_thread, &device)) return record(s);
  const uint64_t a = reinterpret_cast<uint64_t>(ptr);
  // Any device allocation may be freed here (cudaMalloc's too, as CUDA allows); NULL is
  // nothing to do (as on the H200), an unknown pointer the invalid value the header lists.
  if (!ptr) return cudaSuccess;
  if (cudaError_t f; vmcuda::guest::release_pool_import(ptr, &f)) return record(f);
  // Graph memory: a free node of a capture, or freed outside its graph (graph_memory.cc).
  uint64_t s;
  if (cudaError_t se = vmcuda::guest::stream_wire_handle(stream, per_thread, &s)) return record(se);
  {
    auto lock = r->lock();
    if (cudaError_t f; vmcuda::guest::stream_capturing(*r, s) && vmcuda::guest::graph_memory_capture_free(*r, s, a, &f))
      return record(f);
  }
  if (cudaError_t g; vmcuda::guest::graph_memory_free(a, &g)) return record(g);
  if (cudaError_t h; vmcuda::guest::release_host_pool_allocation(ptr, &s, &h)) return record(h);
  if (!AllocationMap::process().remove(a, Allocation::kDevice)) return record(cudaErrorInvalidValue);
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    if (auto it = reg.allocations.find(a); it != reg.allocations.end()) {
      if (auto p = reg.pools.find(it->second.pool); p != reg.pools.end()) p->second.used -= it->second.bytes;
      reg.allocations.erase(it);
    }
  }
  auto lock = r->lock();
  return record(r->enqueue<api::Call::Free>({a}));
}

}  // namespace

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  return malloc_async(devPtr, size, nullptr, hStream, false);
}
cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
  return malloc_async(devPtr, size, nullptr, hStream, true);
}
cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  if (!memPool) return record(cudaErrorInvalidValue);
  return malloc_async(ptr, size, memPool, stream, false);
}
cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  if (!memPool) return record(cudaErrorInvalidValue);
  return malloc_async(ptr, size, memPool, stream, true);
}
cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) { return free_async(devPtr, hStream, false); }
cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) { return free_async(devPtr, hStream, true); }

namespace {
// cudaDeviceGetDefaultMemPool / cudaDeviceGetMemPool: the device's default or current pool.
cudaError_t device_pool(cudaMemPool_t* memPool, int device, bool current) {
  if (!memPool) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!valid_device(*r, device)) return record(cudaErrorInvalidDevice);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  *memPool = reinterpret_cast<cudaMemPool_t>(current ? reg.current_of(device) : reg.default_of(device));
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  return device_pool(memPool, device, false);
}
cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* memPool, int device) { return device_pool(memPool, device, true); }

// By location (CUDA 13): a device's pinned pools are the device calls'; a host location's
// (cudaMemLocationTypeHost, id ignored, or HostNuma with a node of this machine) are this
// registry's host pools, a default one per location made at first use.
namespace {
// Whether NUMA node `node` exists here (a machine without NUMA information has node 0 only).
bool numa_node_exists(int node) {
  if (node < 0) return false;
  if (::access("/sys/devices/system/node", F_OK) != 0) return node == 0;
  const std::string path = "/sys/devices/system/node/node" + std::to_string(node);
  return ::access(path.c_str(), F_OK) == 0;
}

// A pinned pool's location: a device (*device) or a host location (*host, *device = -1).
cudaError_t resolve_location(const cudaMemLocation* location, cudaMemAllocationType type, int* device,
                             HostLocation* host) {
  if (!location || type != cudaMemAllocationTypePinned) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  *device = -1;
  switch (location->type) {
    case cudaMemLocationTypeDevice:
      if (!valid_device(*r, location->id)) return record(cudaErrorInvalidValue);
      *device = location->id;
      return cudaSuccess;
    case cudaMemLocationTypeHost:
      *host = {cudaMemLocationTypeHost, 0};
      return cudaSuccess;
    case cudaMemLocationTypeHostNuma:
      if (!numa_node_exists(location->id)) return record(cudaErrorInvalidValue);
      *host = {cudaMemLocationTypeHostNuma, location->id};
      return cudaSuccess;
    default:  // HostNumaCurrent included: not a location a pool has
      return record(cudaErrorInvalidValue);
  }
}

cudaError_t location_pool(cudaMemPool_t* memPool, const cudaMemLocation* location, cudaMemAllocationType type,
                          bool current) {
  int device;
  HostLocation host;
  if (cudaError_t e = resolve_location(location, type, &device, &host)) return e;
  if (device >= 0) return device_pool(memPool, device, current);
  if (!memPool) return record(cudaErrorInvalidValue);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  *memPool = reinterpret_cast<cudaMemPool_t>(current ? reg.host_current_of(host) : reg.host_default_of(host));
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* memPool, struct cudaMemLocation* location,
                                     enum cudaMemAllocationType type) {
  return location_pool(memPool, location, type, false);
}
cudaError_t cudaMemGetMemPool(cudaMemPool_t* memPool, struct cudaMemLocation* location, enum cudaMemAllocationType type) {
  return location_pool(memPool, location, type, true);
}
cudaError_t cudaMemSetMemPool(struct cudaMemLocation* location, enum cudaMemAllocationType type,
                              cudaMemPool_t memPool) {
  int device;
  HostLocation host;
  if (cudaError_t e = resolve_location(location, type, &device, &host)) return e;
  if (device >= 0) return cudaDeviceSetMemPool(device, memPool);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  Pool* p = reg.find(memPool);
  // The pool's location must be the one named (CUDA: "must match those of the pool").
  if (!p || !p->host() || HostLocation{p->location, p->numa} != host) return record(cudaErrorInvalidValue);
  reg.host_current_pool[host] = reinterpret_cast<uint64_t>(memPool);
  return cudaSuccess;
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!valid_device(*r, device)) return record(cudaErrorInvalidDevice);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  Pool* p = reg.find(memPool);
  // A pool serves its own device only; an imported one allocates nothing.
  if (!p || p->device != device || p->imported) return record(cudaErrorInvalidValue);
  reg.current_pool[device] = reinterpret_cast<uint64_t>(memPool);
  return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const struct cudaMemPoolProps* poolProps) {
  if (!memPool || !poolProps) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  // Pinned and managed pools are created (NVIDIA's runtime accepts both on the H200).
  if (poolProps->allocType != cudaMemAllocationTypePinned && poolProps->allocType != cudaMemAllocationTypeManaged)
    return record(cudaErrorInvalidValue);
  if (poolProps->handleTypes & ~(cudaMemHandleTypePosixFileDescriptor | cudaMemHandleTypeFabric))
    return record(cudaErrorInvalidValue);  // Win32 handles on Linux
  switch (poolProps->location.type) {
    case cudaMemLocationTypeDevice:
      // A device that does not exist: invalid value (not invalid device), as on the H200.
      if (!valid_device(*r, poolProps->location.id)) return record(cudaErrorInvalidValue);
      break;
    case cudaMemLocationTypeHost:  // id ignored; never IPC capable (CUDA: handleTypes must be 0)
      if (poolProps->handleTypes != cudaMemHandleTypeNone) return record(cudaErrorInvalidValue);
      break;
    case cudaMemLocationTypeHostNuma:
      if (!numa_node_exists(poolProps->location.id)) return record(cudaErrorInvalidValue);
      if (poolProps->handleTypes != cudaMemHandleTypeNone) {
        // Its blocks are the shared heap's, which another program of the VM cannot map.
        static std::atomic<bool> said{false};
        warn_once(said, "cudaMemPoolCreate: a pool of host memory that exports (handleTypes) is not supported "
                        "(cudaErrorNotSupported); create it with cudaMemHandleTypeNone");
        return record(cudaErrorNotSupported);
      }
      break;
    default:
      return record(cudaErrorInvalidValue);
  }
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const uint64_t h = reg.next += 0x100;
  const bool host = poolProps->location.type != cudaMemLocationTypeDevice;
  reg.pools[h] = Pool{.device = host ? -1 : poolProps->location.id, .max_size = poolProps->maxSize,
                      .managed = poolProps->allocType == cudaMemAllocationTypeManaged,
                      .location = poolProps->location.type,
                      .numa = poolProps->location.type == cudaMemLocationTypeHostNuma ? poolProps->location.id : 0,
                      .handle_types = static_cast<unsigned>(poolProps->handleTypes)};
  *memPool = reinterpret_cast<cudaMemPool_t>(h);
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  bool forget = false;
  int device;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    Pool* p = reg.find(memPool);
    if (!p || p->is_default) return record(cudaErrorInvalidValue);  // default pools live on
    // Its allocations stay valid until freed (the memory is the host's, not the pool's);
    // a device whose current pool this was goes back to its default.
    device = p->device;
    forget = p->exported;
    const uint64_t h = reinterpret_cast<uint64_t>(memPool);
    if (auto it = reg.current_pool.find(device); it != reg.current_pool.end() && it->second == h)
      reg.current_pool.erase(it);
    if (p->host())
      if (auto it = reg.host_current_pool.find({p->location, p->numa}); it != reg.host_current_pool.end() && it->second == h)
        reg.host_current_pool.erase(it);
    reg.pools.erase(h);
  }
  // An exported pool's descriptors name nothing any more: no new imports (those made stay).
  if (forget) {
    cudaError_t e;
    if (Remote* r = vmcuda::guest::connected(&e)) {
      auto lock = r->lock();
      r->call<api::Call::MemPoolForget>({reinterpret_cast<uint64_t>(memPool), device, 0});
    }
  }
  return cudaSuccess;
}

// Nothing cached to release: the memory of freed allocations went back at cudaFreeAsync.
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  return reg.find(memPool) ? cudaSuccess : record(cudaErrorInvalidValue);
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  Pool* p = reg.find(memPool);
  if (!p || !value) return record(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
      p->reuse[attr - 1] = *static_cast<const int*>(value) != 0;
      return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold:
      std::memcpy(&p->release_threshold, value, sizeof(uint64_t));
      return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh: {
      // Only a reset (to the current value) is allowed: "illegal to set a non-zero value".
      uint64_t v;
      std::memcpy(&v, value, sizeof v);
      if (v != 0) return record(cudaErrorInvalidValue);
      (attr == cudaMemPoolAttrUsedMemHigh ? p->used_high : p->reserved_high) = p->used;
      return cudaSuccess;
    }
    default:  // the current values are read-only
      return record(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  Pool* p = reg.find(memPool);
  if (!p || !value) return record(cudaErrorInvalidValue);
  uint64_t v;
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
      std::memcpy(value, &p->reuse[attr - 1], sizeof(int));
      return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold: v = p->release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent: v = p->used; break;
    case cudaMemPoolAttrReservedMemHigh: v = p->reserved_high; break;
    case cudaMemPoolAttrUsedMemHigh: v = p->used_high; break;
    default:
      return record(cudaErrorInvalidValue);
  }
  std::memcpy(value, &v, sizeof v);
  return cudaSuccess;
}

// A pool's memory is read-write from its own device, which cannot be changed. Other
// devices get in through the host (MemPoolAccess): every pool allocation is arena memory,
// so a device let into one pool reaches them all (and read access is read-write): more
// than CUDA grants, within the one process's own memory.
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc* descList, size_t count) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  int device;
  bool host;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    Pool* p = reg.find(memPool);
    if (!p || (count && !descList)) return record(cudaErrorInvalidValue);
    device = p->device;
    host = p->host();
  }
  for (size_t i = 0; i < count; ++i) {
    const cudaMemAccessDesc& d = descList[i];
    if (d.location.type != cudaMemLocationTypeDevice) return record(cudaErrorInvalidValue);
    if (!valid_device(*r, d.location.id)) return record(cudaErrorInvalidDevice);
    if (d.flags != cudaMemAccessFlagsProtNone && d.flags != cudaMemAccessFlagsProtRead &&
        d.flags != cudaMemAccessFlagsProtReadWrite)
      return record(cudaErrorInvalidValue);
    // Lowering the pool's own device's access: invalid device, as on the H200.
    if (d.location.id == device && d.flags != cudaMemAccessFlagsProtReadWrite) return record(cudaErrorInvalidDevice);
  }
  for (size_t i = 0; i < count; ++i) {
    const cudaMemAccessDesc& d = descList[i];
    const int accessor = d.location.id;
    if (accessor == device) continue;
    const bool want = d.flags != cudaMemAccessFlagsProtNone;
    if (host) {  // heap blocks are mapped for every device already: only recorded
      auto& reg = registry();
      std::lock_guard g(reg.mu);
      if (Pool* p = reg.find(memPool)) p->access[accessor] = d.flags;
      continue;
    }
    bool had, ask;
    {
      auto& reg = registry();
      std::lock_guard g(reg.mu);
      Pool* p = reg.find(memPool);
      if (!p) return record(cudaErrorInvalidValue);  // destroyed meanwhile
      auto it = p->access.find(accessor);
      had = it != p->access.end() && it->second != cudaMemAccessFlagsProtNone;
      ask = want ? !had : had && reg.grants[accessor] == 1;
    }
    if (want || ask) {  // every grant asks (the host checks that the devices reach each other)
      auto lock = r->lock();
      const auto res = r->call<api::Call::MemPoolAccess>({device, accessor, want ? 1u : 0u, 0});
      if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
    }
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    Pool* p = reg.find(memPool);
    if (!p) continue;
    if (want != had) reg.grants[accessor] += want ? 1 : -1;
    p->access[accessor] = d.flags;
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags* flags, cudaMemPool_t memPool,
                                 struct cudaMemLocation* location) {
  if (!flags || !location) return record(cudaErrorInvalidValue);
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  Pool* p = reg.find(memPool);
  if (!p) return record(cudaErrorInvalidValue);
  switch (location->type) {
    case cudaMemLocationTypeDevice:
      if (!valid_device(*r, location->id)) return record(cudaErrorInvalidValue);  // as on the H200
      if (location->id == p->device) {
        *flags = cudaMemAccessFlagsProtReadWrite;
      } else {
        auto it = p->access.find(location->id);
        *flags = it == p->access.end() ? cudaMemAccessFlagsProtNone : it->second;
      }
      return cudaSuccess;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
      // Device memory is not the CPU's; a host pool's is, read-write (CUDA: "accessible from
      // the host CPU" by default).
      *flags = p->host() ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
      return cudaSuccess;
    default:
      return record(cudaErrorInvalidValue);
  }
}

// ---- pool IPC (0x1a10; see the top of this file).
namespace {

constexpr uint64_t kPoolFdMagic = 0x4c4f4f5061637576ull;  // "vucaPOOL": what our descriptors hold first
struct PoolFdContents {
  uint64_t magic;
  api::IpcHandle token;
};

// The pool's token, asked of the host at its first export. Precondition: reg.mu not held.
cudaError_t pool_token(Remote& r, cudaMemPool_t memPool, api::IpcHandle* token) {
  int device;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    Pool* p = reg.find(memPool);
    if (!p || p->imported) return cudaErrorInvalidValue;
    // Exportable only when created so (CUDA: "an IPC capable mempool").
    if (!(p->handle_types & cudaMemHandleTypePosixFileDescriptor)) return cudaErrorInvalidValue;
    if (p->exported) return *token = p->token, cudaSuccess;
    device = p->device;
  }
  auto lock = r.lock();
  const auto res = r.call<api::Call::MemPoolExport>({reinterpret_cast<uint64_t>(memPool), device, 0});
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  Pool* p = reg.find(memPool);
  if (!p) return cudaErrorInvalidValue;  // destroyed meanwhile
  p->exported = true;
  p->token = res.reply.handle;
  *token = p->token;
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemPoolExportToShareableHandle(void* shareableHandle, cudaMemPool_t memPool,
                                               enum cudaMemAllocationHandleType handleType, unsigned int flags) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!shareableHandle || flags) return record(cudaErrorInvalidValue);
  if (handleType == cudaMemHandleTypeFabric) {
    // Fabric handles cross nodes through IMEX: never from a VM.
    static std::atomic<bool> said{false};
    warn_once(said, "cudaMemPoolExportToShareableHandle: fabric handles are not supported in a VM "
                    "(cudaErrorNotSupported); use cudaMemHandleTypePosixFileDescriptor");
    return record(cudaErrorNotSupported);
  }
  if (handleType != cudaMemHandleTypePosixFileDescriptor) return record(cudaErrorInvalidValue);
  PoolFdContents c{kPoolFdMagic, {}};
  if (cudaError_t t = pool_token(*r, memPool, &c.token)) return record(t);
  // A descriptor of its own, as natively; sealed so that what it names cannot change.
  const int fd = ::memfd_create("vmcuda-mempool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return record(cudaErrorMemoryAllocation);
  if (::pwrite(fd, &c, sizeof c, 0) != static_cast<ssize_t>(sizeof c) ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    ::close(fd);
    return record(cudaErrorMemoryAllocation);
  }
  std::memcpy(shareableHandle, &fd, sizeof fd);
  return cudaSuccess;
}

cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t* memPool, void* shareableHandle,
                                                 enum cudaMemAllocationHandleType handleType, unsigned int flags) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!memPool || flags || handleType != cudaMemHandleTypePosixFileDescriptor) return record(cudaErrorInvalidValue);
  // The descriptor is passed by value in the pointer, as natively.
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(shareableHandle));
  PoolFdContents c{};
  if (fd < 0 || ::pread(fd, &c, sizeof c, 0) != static_cast<ssize_t>(sizeof c) || c.magic != kPoolFdMagic)
    return record(cudaErrorInvalidValue);  // not a pool's descriptor
  api::MemPoolImportArgs a{c.token};
  auto lock = r->lock();
  const auto res = r->call<api::Call::MemPoolImport>(a);
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const uint64_t h = reg.next += 0x100;
  reg.pools[h] = Pool{.device = res.reply.device, .handle_types = cudaMemHandleTypePosixFileDescriptor,
                      .imported = true, .token = c.token};
  *memPool = reinterpret_cast<cudaMemPool_t>(h);
  return cudaSuccess;
}

cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData* exportData, void* ptr) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!exportData || !ptr) return record(cudaErrorInvalidValue);
  uint64_t pool;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    auto it = reg.allocations.find(reinterpret_cast<uint64_t>(ptr));
    if (it == reg.allocations.end()) return record(cudaErrorInvalidValue);  // not a pool allocation of ours
    pool = it->second.pool;
  }
  api::PoolPtrExport x{};
  x.tag = api::kIpcPoolPtrTag;
  api::IpcHandle pool_handle{};
  if (cudaError_t t = pool_token(*r, reinterpret_cast<cudaMemPool_t>(pool), &pool_handle)) return record(t);
  std::memcpy(x.pool, pool_handle.token, sizeof x.pool);
  auto lock = r->lock();
  const auto res = r->call<api::Call::IpcGetMemHandle>({reinterpret_cast<uint64_t>(ptr)});
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  std::memcpy(x.memory, res.reply.handle.token, sizeof x.memory);
  static_assert(sizeof x == sizeof exportData->reserved);
  std::memcpy(exportData->reserved, &x, sizeof x);
  return cudaSuccess;
}

cudaError_t cudaMemPoolImportPointer(void** ptr, cudaMemPool_t memPool, struct cudaMemPoolPtrExportData* exportData) {
  cudaError_t e;
  Remote* r = device_call(&e);
  if (!r) return e;
  if (!ptr || !exportData) return record(cudaErrorInvalidValue);
  api::PoolPtrExport x;
  std::memcpy(&x, exportData->reserved, sizeof x);
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    Pool* p = reg.find(memPool);
    // The pointer must be of the pool it is imported through.
    if (!p || !p->imported || x.tag != api::kIpcPoolPtrTag || std::memcmp(x.pool, p->token.token, sizeof x.pool) != 0)
      return record(cudaErrorInvalidValue);
  }
  api::IpcOpenMemArgs a{};
  a.handle.tag = api::kIpcMemTag;
  std::memcpy(a.handle.token, x.memory, sizeof a.handle.token);
  auto lock = r->lock();
  const auto res = r->call<api::Call::IpcOpenMemHandle>(a);
  // Freed by its exporter, or never of this VM: the data names nothing.
  if (res.status == cudaErrorInvalidResourceHandle) return record(cudaErrorInvalidValue);
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  const uint64_t got = res.reply.ptr;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    // Imported twice: the host counted it, and one cudaFree closes one.
    if (reg.imported[got]++ == 0) AllocationMap::process().add({got, res.reply.bytes, Allocation::kDevice, res.reply.device, 0});
  }
  *ptr = reinterpret_cast<void*>(got);
  return cudaSuccess;
}

namespace vmcuda::guest {
bool is_host_pool_allocation(const void* ptr) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  auto it = reg.allocations.find(reinterpret_cast<uint64_t>(ptr));
  return it != reg.allocations.end() && it->second.host;
}

bool release_host_pool_allocation(void* ptr, const uint64_t* stream, cudaError_t* status) {
  const uint64_t a = reinterpret_cast<uint64_t>(ptr);
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    auto it = reg.allocations.find(a);
    if (it == reg.allocations.end() || !it->second.host) return false;
    if (auto p = reg.pools.find(it->second.pool); p != reg.pools.end()) p->second.used -= it->second.bytes;
    reg.allocations.erase(it);
  }
  auto block = AllocationMap::process().remove(a, Allocation::kPinnedHost);
  cudaError_t e;
  Remote* r = connected(&e);
  if (!r) return *status = e, true;
  if (!block) return *status = cudaErrorInvalidValue, true;
  auto lock = r->lock();
  // The stream's work before the free may still use the block (cudaFree: the device's).
  const auto wait = stream ? r->call<api::Call::StreamSynchronize>({*stream}).status
                           : r->call<api::Call::DeviceSynchronize>({}).status;
  const cudaError_t f = free_heap_block(*r, *block);
  *status = wait != cudaSuccess ? static_cast<cudaError_t>(wait) : f;
  return true;
}

bool release_pool_import(void* ptr, cudaError_t* status) {
  const uint64_t a = reinterpret_cast<uint64_t>(ptr);
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    auto it = reg.imported.find(a);
    if (it == reg.imported.end()) return false;
    if (--it->second == 0) {
      reg.imported.erase(it);
      AllocationMap::process().remove(a, Allocation::kDevice);
    }
  }
  cudaError_t e;
  Remote* r = connected(&e);
  if (!r) return *status = e, true;
  auto lock = r->lock();
  // Closed as cudaIpcCloseMemHandle closes (it waits for the program's work as cudaFree does).
  const auto res = r->call<api::Call::IpcCloseMemHandle>({a});
  *status = static_cast<cudaError_t>(res.status);
  return true;
}
}  // namespace vmcuda::guest
