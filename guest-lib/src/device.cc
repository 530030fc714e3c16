// device area: device, peer and version calls (docs/cuda-runtime-internals.md §7).
//
// Local: everything a device query answers comes from the vGPU database that the
// handshake fills (Remote::devices(), Remote::handshake()): count, properties, attributes,
// PCI ids, driver version, the thread's device. No round trip.
// Remoted: cudaDeviceSynchronize and cudaMemGetInfo (synchronous: they send the lazy queue
// and return its deferred errors first); limits (cached per device once the host has
// answered), cache configuration (cudaFuncSetCacheConfig with the kernel's host handle,
// host_objects.h); cudaDeviceReset (see there). The deprecated shared memory bank calls
// are local: every device CUDA 13 supports has a fixed 4-byte bank size. Peer access is
// peer.cc's.
//
// Errors follow runtime_state.h: every failure becomes the thread's last error; the calls
// that use the device (set, synchronize, memory info, flags, reset) return the sticky
// error first. Pure queries of the database ignore it: NVIDIA answers those from the
// driver's device records without the (broken) context. Without a host, every call
// returns why (cudaErrorNoDevice) before it looks at its arguments, as NVIDIA's returns
// its initialization error (cudaErrorInsufficientDriver where there is no driver);
// cudaDriverGetVersion is the exception, there as here.
//
// Checked against NVIDIA's library on an H200 (CUDA 13.0): tests/cuda/device_query.cu
// prints the same natively and through vmcuda (every field, attribute, flag and error
// code), and tests/gpu/device_props_check.cu finds NVIDIA's cudaDeviceProp equal, field
// for field, to what fill_device_prop makes of the driver's attributes.
//
// Elsewhere: cudaDeviceGetStreamPriorityRange is the stream area's (stream.cc, a round
// trip: no CUdevice_attribute carries the range, which the driver gives per context).
//
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "arrays.h"
#include "device_props.h"
#include "graph.h"
#include "host_objects.h"
#include "log.h"
#include "entry.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

int device_count(const Remote& r) noexcept { return static_cast<int>(r.devices().size()); }

const api::DevicePropertiesReply* find_device(const Remote& r, int device) noexcept {
  if (device < 0 || device >= device_count(r)) return nullptr;
  return &r.devices()[static_cast<size_t>(device)];
}

int attribute(const api::DevicePropertiesReply& d, cu::DeviceAttribute a) noexcept { return d.attributes[a]; }

// ---- device flags (cudaSetDeviceFlags / cudaGetDeviceFlags / cudaInitDevice).
// NVIDIA keeps them with each device's primary context, process-wide. Here they are
// remembered only: the host owns the context (its scheduling mode is the host's business,
// and how a guest thread waits for a reply is vmrpc's), and mapped pinned memory is
// always on. cudaDeviceMapHost is implicit for the runtime, and cudaGetDeviceFlags
// reports it, as NVIDIA's does.
struct DeviceFlags {
  std::mutex mu;
  std::map<int, unsigned> flags;
};
DeviceFlags& device_flags() {
  static DeviceFlags* f = new DeviceFlags;  // never destroyed: usable from atexit handlers
  return *f;
}
constexpr unsigned kDefaultDeviceFlags = cudaDeviceMapHost;

bool valid_device_flags(unsigned flags) noexcept {
  if (flags & ~unsigned{cudaDeviceMask}) return false;
  switch (flags & cudaDeviceScheduleMask) {  // at most one scheduling mode
    case cudaDeviceScheduleAuto:
    case cudaDeviceScheduleSpin:
    case cudaDeviceScheduleYield:
    case cudaDeviceScheduleBlockingSync:
      return true;
    default:
      return false;
  }
}
bool store_device_flags(int device, unsigned flags) noexcept {
  std::lock_guard l(device_flags().mu);
  try {
    device_flags().flags[device] = flags | cudaDeviceMapHost;
    return true;
  } catch (...) {
    return false;
  }
}
void forget_device_flags(int device) noexcept {
  std::lock_guard l(device_flags().mu);
  device_flags().flags.erase(device);
}
unsigned load_device_flags(int device) noexcept {
  std::lock_guard l(device_flags().mu);
  auto it = device_flags().flags.find(device);
  return it == device_flags().flags.end() ? kDefaultDeviceFlags : it->second;
}

// ---- limits: what the host answered (a get, or the value a set left), per device and
// cudaLimit, so that frequent queries stay local. Only this process changes its contexts'
// limits; a set or a reset drops the entry.
struct LimitCache {
  std::mutex mu;
  std::map<std::pair<int, int>, size_t> values;
};
LimitCache& limit_cache() {
  static LimitCache* c = new LimitCache;  // never destroyed: usable from atexit handlers
  return *c;
}
bool cached_limit(int device, int limit, size_t* value) noexcept {
  std::lock_guard l(limit_cache().mu);
  auto it = limit_cache().values.find({device, limit});
  if (it == limit_cache().values.end()) return false;
  *value = it->second;
  return true;
}
void cache_limit(int device, int limit, const size_t* value) noexcept {
  std::lock_guard l(limit_cache().mu);
  try {
    if (value)
      limit_cache().values[{device, limit}] = *value;
    else
      limit_cache().values.erase({device, limit});
  } catch (...) {
  }
}
void forget_limits(int device) noexcept {
  std::lock_guard l(limit_cache().mu);
  std::erase_if(limit_cache().values, [device](const auto& kv) { return kv.first.first == device; });
}

// The kernel `func` names, loaded on the calling thread's device (r's lock held). An
// unknown pointer is an invalid resource handle, as for cudaFuncSetAttribute (function.cc).
cudaError_t kernel_handle(Remote& r, const void* func, uint64_t* handle) {
  const vgpu_db::Function* f = find_kernel(func);
  if (!f) return cudaErrorInvalidResourceHandle;
  HostKernel* k = nullptr;
  if (cudaError_t e = host_kernel(r, *f, &k)) return e;
  *handle = k->handle;
  return cudaSuccess;
}

// ---- PCI bus ids: "[domain]:[bus]:[device].[function]" in hexadecimal, as
// cuDeviceGetPCIBusId writes it (upper-case digits, 12 characters and the NUL, function 0).
constexpr int kPciBusIdBytes = 13;

// One hexadecimal field of [begin, end): all of it, at least one digit (leading zeros as
// many as given: NVIDIA takes a 9-digit domain and a 4-digit device).
bool parse_hex(const char* begin, const char* end, unsigned long long* value) {
  while (begin != end && *begin == '0' && end - begin > 1) ++begin;
  if (begin == end || end - begin > 16) return false;
  unsigned long long v = 0;
  for (const char* c = begin; c != end; ++c) {
    int digit;
    if (*c >= '0' && *c <= '9') digit = *c - '0';
    else if (*c >= 'a' && *c <= 'f') digit = *c - 'a' + 10;
    else if (*c >= 'A' && *c <= 'F') digit = *c - 'A' + 10;
    else return false;
    v = v * 16 + static_cast<unsigned long long>(digit);
  }
  *value = v;
  return true;
}

struct PciAddress {
  unsigned long long domain = 0, bus = 0, device = 0, function = 0;
};
// The forms cudaDeviceGetByPCIBusId accepts: domain:bus:device.function,
// domain:bus:device, bus:device.function (the domain is then 0); nvidia-smi's 8-digit
// domain ("00000000:3B:00.0") is one of them. Leading blanks are skipped, as NVIDIA's
// does; anything else that is not a field is an invalid value (NVIDIA's also takes some
// trailing junk, "0000:00:06.0x"; vmcuda does not).
bool parse_pci_bus_id(const char* s, PciAddress* out) {
  while (*s == ' ' || *s == '\t') ++s;
  const char* colon1 = std::strchr(s, ':');
  if (!colon1) return false;
  const char* colon2 = std::strchr(colon1 + 1, ':');
  const char* end = s + std::strlen(s);
  const char* dot = std::strchr(s, '.');
  if (dot && (dot < (colon2 ? colon2 : colon1) || std::strchr(dot + 1, '.') || std::strchr(dot + 1, ':')))
    return false;
  PciAddress a;
  if (dot && !parse_hex(dot + 1, end, &a.function)) return false;
  const char* dev_end = dot ? dot : end;
  if (colon2) {
    if (!parse_hex(s, colon1, &a.domain) || !parse_hex(colon1 + 1, colon2, &a.bus) ||
        !parse_hex(colon2 + 1, dev_end, &a.device))
      return false;
  } else {
    if (!dot) return false;  // bus:device needs its function (NVIDIA: invalid value)
    if (!parse_hex(s, colon1, &a.bus) || !parse_hex(colon1 + 1, dev_end, &a.device)) return false;
  }
  *out = a;
  return true;
}

// cudaChooseDevice: how well device `d` matches `want`. NVIDIA does not document its
// measure; this one counts the criteria that `want` sets (fields left 0 or empty ask
// nothing) and that the device meets: the name, compute capability at least
// major.minor, at least as much memory, as many multiprocessors, threads per block.
int match_score(const api::DevicePropertiesReply& d, const cudaDeviceProp& want) {
  int score = 0;
  if (want.name[0] != '\0' && std::strncmp(d.name, want.name, sizeof want.name) == 0) score += 8;
  const int major = attribute(d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  if ((want.major || want.minor) && (major > want.major || (major == want.major && minor >= want.minor))) score += 4;
  if (want.totalGlobalMem && d.total_mem >= want.totalGlobalMem) score += 2;
  if (want.multiProcessorCount &&
      attribute(d, cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) >= want.multiProcessorCount)
    score += 1;
  if (want.maxThreadsPerBlock &&
      attribute(d, cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) >= want.maxThreadsPerBlock)
    score += 1;
  return score;
}

}  // namespace
}  // namespace vmcuda::guest

using namespace vmcuda::guest;
namespace api = vmcuda::api;

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return record(cudaErrorInvalidValue);
  *runtimeVersion = kCudartVersion;
  return cudaSuccess;
}

// No host (no stub at VMCUDA_SOCKET, no /dev/vmcuda0): NVIDIA's answer without a GPU, the
// reason (cudaErrorNoDevice), with the message saying what to do logged once, and 0
// devices (NVIDIA's leaves *count as it was when there is no driver at all; 0 is safer for
// a caller that ignores the error).
cudaError_t cudaGetDeviceCount(int* count) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) {
    if (count) *count = 0;
    return record(err);
  }
  if (count == nullptr) return record(cudaErrorInvalidValue);
  *count = device_count(*r);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (device == nullptr) return record(cudaErrorInvalidValue);
  *device = Remote::thread_device();
  return cudaSuccess;
}

// The host hears of it with the thread's next remoted call (Remote::sync_device): setting
// a device is local, as it is cheap with NVIDIA's library once the context exists.
cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (!find_device(*r, device)) return record(cudaErrorInvalidDevice);
  Remote::thread_device() = device;
  return cudaSuccess;
}

// Validates and records the device flags; the host's context exists already (it is made
// when the client connects), so there is nothing else to initialize. Bits of `flags` other
// than cudaInitDeviceFlagsAreValid are ignored, as NVIDIA's ignores them.
cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (!find_device(*r, device)) return record(cudaErrorInvalidDevice);
  if (flags & cudaInitDeviceFlagsAreValid) {
    if (!valid_device_flags(deviceFlags)) return record(cudaErrorInvalidValue);
    if (!store_device_flags(device, deviceFlags)) return record(cudaErrorMemoryAllocation);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (prop == nullptr) return record(cudaErrorInvalidValue);
  const api::DevicePropertiesReply* d = find_device(*r, device);
  if (!d) return record(cudaErrorInvalidDevice);
  fill_device_prop(*d, prop);
  return cudaSuccess;
}

// Any attribute number CUDA 13.0 knows (1 .. cudaDevAttrMax-1), the ones cudaDeviceAttr
// calls reserved included (the driver answers them). 0 where the host's driver has none.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (value == nullptr) return record(cudaErrorInvalidValue);
  const api::DevicePropertiesReply* d = find_device(*r, device);
  if (!d) return record(cudaErrorInvalidDevice);
  const int a = static_cast<int>(attr);
  if (a < 1 || a >= static_cast<int>(cudaDevAttrMax)) return record(cudaErrorInvalidValue);
  *value = d->attributes[a];
  return cudaSuccess;
}

// The host driver's version. Documented: "If no driver is installed, then 0 is returned
// as the driver version" with cudaSuccess; no host is vmcuda's "no driver".
cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return record(cudaErrorInvalidValue);
  cudaError_t err;
  Remote* r = connected(&err);
  *driverVersion = r ? r->handshake().driver_version : 0;
  return cudaSuccess;
}

cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp* prop) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (device == nullptr || prop == nullptr) return record(cudaErrorInvalidValue);
  if (device_count(*r) == 0) return record(cudaErrorNoDevice);
  int best = 0, best_score = -1;
  for (int i = 0; i < device_count(*r); ++i) {
    const int s = match_score(r->devices()[static_cast<size_t>(i)], *prop);
    if (s > best_score) best = i, best_score = s;  // ties: the lowest ordinal
  }
  *device = best;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pciBusId) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (device == nullptr || pciBusId == nullptr) return record(cudaErrorInvalidValue);
  PciAddress want;
  if (!parse_pci_bus_id(pciBusId, &want)) return record(cudaErrorInvalidValue);
  // A CUDA device is a PCI function 0; another function names no device (NVIDIA: invalid device).
  for (int i = 0; i < device_count(*r) && want.function == 0; ++i) {
    const auto& d = r->devices()[static_cast<size_t>(i)];
    const auto id = [&d](cu::DeviceAttribute a) { return static_cast<unsigned long long>(attribute(d, a)); };
    if (id(cu::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) == want.domain && id(cu::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) == want.bus &&
        id(cu::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) == want.device) {
      *device = i;
      return cudaSuccess;
    }
  }
  return record(cudaErrorInvalidDevice);
}

// The host's PCI address of the GPU behind the device (the guest sees no PCI device of
// its own for it). A buffer shorter than 13 bytes gets as much as fits, NUL-terminated,
// and cudaErrorInvalidValue, as NVIDIA's does.
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (pciBusId == nullptr || len <= 0) return record(cudaErrorInvalidValue);
  const api::DevicePropertiesReply* d = find_device(*r, device);
  if (!d) return record(cudaErrorInvalidDevice);
  std::snprintf(pciBusId, static_cast<size_t>(len), "%04X:%02X:%02X.0",
                static_cast<unsigned>(attribute(*d, cu::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)),
                static_cast<unsigned>(attribute(*d, cu::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)),
                static_cast<unsigned>(attribute(*d, cu::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)));
  return len < kPciBusIdBytes ? record(cudaErrorInvalidValue) : cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (!valid_device_flags(flags)) return record(cudaErrorInvalidValue);
  if (!store_device_flags(Remote::thread_device(), flags)) return record(cudaErrorMemoryAllocation);
  return cudaSuccess;
}

// The devices to try in order when a context is made implicitly: vmcuda's runtime makes the
// current device's (device 0 unless cudaSetDevice said otherwise), as NVIDIA's does when
// the list starts with it. The list is checked (every entry a device, none twice) and kept.
cudaError_t cudaSetValidDevices(int* device_arr, int len) {
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (len < 0 || (len > 0 && !device_arr)) return record(cudaErrorInvalidValue);
  Remote* r = Remote::get(&err);
  if (!r) return record(err);
  std::vector<bool> seen(static_cast<size_t>(device_count(*r)), false);
  for (int i = 0; i < len; ++i) {
    if (device_arr[i] < 0 || device_arr[i] >= device_count(*r)) return record(cudaErrorInvalidDevice);
    if (seen[static_cast<size_t>(device_arr[i])]) return record(cudaErrorInvalidValue);
    seen[static_cast<size_t>(device_arr[i])] = true;
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (flags == nullptr) return record(cudaErrorInvalidValue);
  *flags = load_device_flags(Remote::thread_device());
  return cudaSuccess;
}

// Sends the lazy queue and waits for the device: the first error of the queued calls
// (launches, async copies, ...) comes back here, as CUDA reports asynchronous errors.
cudaError_t cudaDeviceSynchronize(void) { return plain_call<api::Call::DeviceSynchronize>({}); }

// Free and total bytes of the current device as the host sees them for this client (under
// a memory quota, the quota is the device). Either pointer may be NULL: NVIDIA's returns
// cudaSuccess for cudaMemGetInfo(NULL, NULL) (seen on an H200, CUDA 13.0).
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  return plain_call<api::Call::MemGetInfo>({}, [&](const api::MemInfoReply& m) {
    if (free) *free = static_cast<size_t>(m.free_bytes);
    if (total) *total = static_cast<size_t>(m.total_bytes);
  });
}

// ---- limits and cache configuration of the current device (the client's context on the host).

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  const int device = Remote::thread_device();
  auto lock = r->lock();
  // Synchronous: the driver may refuse (memory for the reservation, a limit the device
  // does not have) or round the value, which the reply says.
  const auto res = r->call<api::Call::DeviceSetLimit>({uint64_t{value}, static_cast<int32_t>(limit), 0});
  if (res.status != cudaSuccess) {
    cache_limit(device, limit, nullptr);
    return record(static_cast<cudaError_t>(res.status));
  }
  const size_t now = static_cast<size_t>(res.reply.value);
  cache_limit(device, limit, &now);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* pValue, enum cudaLimit limit) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  if (pValue == nullptr) return record(cudaErrorInvalidValue);
  const int device = Remote::thread_device();
  if (cached_limit(device, limit, pValue)) return cudaSuccess;
  auto lock = r->lock();
  const auto res = r->call<api::Call::DeviceGetLimit>({static_cast<int32_t>(limit), 0});
  if (res.status != cudaSuccess) return record(static_cast<cudaError_t>(res.status));
  *pValue = static_cast<size_t>(res.reply.value);
  cache_limit(device, limit, pValue);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* pCacheConfig) {
  return plain_call<api::Call::DeviceGetCacheConfig>(
      {}, [&](const api::CacheConfigReply& c) { *pCacheConfig = static_cast<cudaFuncCache>(c.config); },
      pCacheConfig == nullptr);
}

// A preference: checked here, queued (the driver refuses nothing else).
cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  return plain_call<api::Call::DeviceSetCacheConfig>({static_cast<int32_t>(cacheConfig), 0}, {},
                                                     static_cast<unsigned>(cacheConfig) > cudaFuncCachePreferEqual);
}

cudaError_t cudaFuncSetCacheConfig(const void* func, enum cudaFuncCache cacheConfig) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  auto lock = r->lock();
  uint64_t handle = 0;
  if (cudaError_t e = kernel_handle(*r, func, &handle)) return record(e);
  if (static_cast<unsigned>(cacheConfig) > cudaFuncCachePreferEqual) return record(cudaErrorInvalidValue);
  return record(r->enqueue<api::Call::FuncSetCacheConfig>({handle, static_cast<int32_t>(cacheConfig), 0}));
}

// Deprecated bank size calls. Every device CUDA 13 supports (compute capability 7.5 and
// up) has 4-byte banks that cannot be changed: a set "does nothing on devices with fixed
// shared memory bank size" and a get "returns the fixed bank size of the hardware"
// (cuda_runtime_api.h). No host call needed.
cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig* pConfig) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (pConfig == nullptr) return record(cudaErrorInvalidValue);
  *pConfig = cudaSharedMemBankSizeFourByte;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (static_cast<unsigned>(config) > cudaSharedMemBankSizeEightByte) return record(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaFuncSetSharedMemConfig(const void* func, enum cudaSharedMemConfig config) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  if (!connected(&err)) return record(err);
  if (!find_kernel(func)) return record(cudaErrorInvalidResourceHandle);
  if (static_cast<unsigned>(config) > cudaSharedMemBankSizeEightByte) return record(cudaErrorInvalidValue);
  return cudaSuccess;
}

// Destroys what this process has on the current device, as NVIDIA's does by destroying
// the device's primary context: the host (host-stub device.cc) waits for the device's
// work, frees this client's allocations, streams and events there, puts its limits and
// cache configuration back and ends peer access from and to it; here the records of those
// allocations, streams and events go (a later use is an invalid value / invalid resource
// handle at once), as do the cached limits and the device flags (NVIDIA's
// cudaGetDeviceFlags reads 0 right after a reset, until the device is used again;
// vmcuda's reads cudaDeviceMapHost at once).
// Differs from NVIDIA's: modules stay loaded on the host (NVIDIA's runtime reloads them
// invisibly), so __device__ variables keep their contents and kernels their attributes
// (cudaFuncSetAttribute, cudaFuncSetCacheConfig); pinned host memory (cudaMallocHost)
// stays valid. The errors of the discarded work are dropped, as a reset drops them;
// sticky errors and a lost connection are not (a reset does not repair those either:
// driver_types.h says the process must be relaunched).
cudaError_t cudaDeviceReset(void) {
  if (cudaError_t e = enter_device_call()) return e;
  cudaError_t err;
  Remote* r = connected(&err);
  if (!r) return record(err);
  const int device = Remote::thread_device();
  cudaError_t status;
  {
    auto lock = r->lock();
    status = static_cast<cudaError_t>(r->call<api::Call::DeviceReset>({}).status);
    vgpu_db::AllocationMap::process().remove_device(device, vgpu_db::Allocation::kDevice);
    handles::forget_device(device);
    forget_limits(device);
    forget_arrays(device);
  }
  graph_memory_device_reset(device);  // the host's reset freed its graph memory too
  forget_device_flags(device);  // the device's flags go with its context
  if (is_sticky(status) || status == cudaErrorDevicesUnavailable || status == cudaErrorUnknown) return record(status);
  return cudaSuccess;
}
