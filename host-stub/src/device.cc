// Device management calls (calls.def, 0x1000): properties, the current device, memory
// information, limits and cache configuration of the client's context, reset.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <cstring>
#include <vector>

#include "session.h"

namespace vmcuda::host {

int32_t Session::on_Handshake(const api::Empty&, api::HandshakeReply& r, Request&) {
  r.device_count = static_cast<int32_t>(devices_.size());
  api_.cuDriverGetVersion(&r.driver_version);
  r.memory_quota = memory_quota();
  r.arena_base = arena_ ? arena_->base() : 0;
  r.arena_bytes = arena_ ? arena_->bytes() : 0;
  return CUDA_SUCCESS;
}

int32_t Session::on_DeviceProperties(const api::DeviceArgs& a, api::DevicePropertiesReply& r, Request&) {
  if (a.device < 0 || static_cast<size_t>(a.device) >= devices_.size()) return CUDA_ERROR_INVALID_DEVICE;
  CUdevice dev;
  if (CUresult e = api_.cuDeviceGet(&dev, devices_[a.device]); e != CUDA_SUCCESS) return e;
  api_.cuDeviceGetName(r.name, sizeof r.name - 1, dev);
  api_.cuDeviceGetUuid_v2(r.uuid, dev);
  size_t total = 0;
  api_.cuDeviceTotalMem_v2(&total, dev);
  r.total_mem = std::min<uint64_t>(total, memory_quota());
  // Attribute numbers the driver does not know answer an error: leave those 0.
  for (uint32_t i = 1; i < api::kDeviceAttributeSlots; ++i)
    if (api_.cuDeviceGetAttribute(&r.attributes[i], static_cast<int>(i), dev) != CUDA_SUCCESS) r.attributes[i] = 0;
  return CUDA_SUCCESS;
}

int32_t Session::on_SetDevice(const api::DeviceArgs& a, api::Empty&, Request&) {
  if (a.device < 0 || static_cast<size_t>(a.device) >= devices_.size()) return CUDA_ERROR_INVALID_DEVICE;
  current_ = a.device;
  return CUDA_SUCCESS;
}

int32_t Session::on_MemGetInfo(const api::Empty&, api::MemInfoReply& r, Request&) {
  size_t free_bytes = 0, total = 0;
  if (CUresult e = api_.cuMemGetInfo_v2(&free_bytes, &total); e != CUDA_SUCCESS) return e;
  // Under a quota the client sees the VM's quota as its device, and what the VM's programs
  // together have left of it as free.
  if (memory_quota() < total) total = memory_quota();
  free_bytes = std::min<uint64_t>(free_bytes, quota_left());
  r.free_bytes = free_bytes;
  r.total_bytes = total;
  return CUDA_SUCCESS;
}

namespace {
// The host's NVIDIA kernel module version ("580.65.06"), which NVIDIA's NVML reports as the
// driver version; "" where there is none (the test executor). Read once: it cannot change
// while the stub runs (a new module means a restarted driver, and a restarted stub).
const std::string& host_driver_version() {
  static const std::string v = [] {
    std::string s;
    if (FILE* f = std::fopen("/sys/module/nvidia/version", "r")) {
      char line[api::kNvmlDriverVersionBytes] = {};
      if (std::fgets(line, sizeof line, f)) s = line;
      std::fclose(f);
    }
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (char c : s)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) return std::string();
    return s;
  }();
  return v;
}
}  // namespace

int32_t Session::on_NvmlDeviceInfo(const api::DeviceArgs& a, api::NvmlDeviceInfoReply& r, Request&) {
  if (a.device < 0 || static_cast<size_t>(a.device) >= devices_.size()) return CUDA_ERROR_INVALID_DEVICE;
  CUdevice dev;
  if (CUresult e = api_.cuDeviceGet(&dev, devices_[a.device]); e != CUDA_SUCCESS) return e;
  size_t device_total = 0;
  if (CUresult e = api_.cuDeviceTotalMem_v2(&device_total, dev); e != CUDA_SUCCESS) return e;
  r.total_bytes = std::min<uint64_t>(device_total, memory_quota());
  uint64_t free_bytes = device_total;
  if (contexts_[a.device]) {
    // The client's own context there: the driver's free memory, as MemGetInfo answers it.
    make_current(a.device);
    size_t f = 0, t = 0;
    if (api_.cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS) {
      free_bytes = f;
      r.flags |= api::kNvmlMemoryFromContext;
    }
  } else if (limits_.ledger) {
    // No context of this client there, and none is made for a query (its memory would be the
    // VM's): the device less what the VM's programs hold (other VMs' use is not seen).
    free_bytes = device_total - std::min<uint64_t>(device_total, limits_.ledger->used());
  }
  r.free_bytes = std::min<uint64_t>({free_bytes, quota_left(), r.total_bytes});
  if (limits_.fair_share)
    if (GpuShare* g = limits_.fair_share->gpu(devices_[a.device])) {
      const double share = g->usage().share;  // 0..1 over the sampler's last ~2 s
      r.gpu_percent = static_cast<uint32_t>(std::clamp(share * 100.0 + 0.5, 0.0, 100.0));
      r.flags |= api::kNvmlUtilizationMeasured;
    }
  const std::string& v = host_driver_version();
  std::memcpy(r.driver_version, v.data(), std::min<size_t>(v.size(), sizeof r.driver_version - 1));
  return CUDA_SUCCESS;
}

int32_t Session::on_DeviceSynchronize(const api::Empty&, api::Empty&, Request& req) {
  // TODO(perf): synchronous waits move to the GPU's working thread (events), so a
  // long kernel of one client never holds a thread the others need.
  const CUresult r = api_.cuCtxSynchronize();
  if (r == CUDA_SUCCESS) fair_synced(current_, true, nullptr);  // nothing of it is in flight (fair_share.h)
  return managed_after_sync(req.ctx, current_, r, true);
}

// ---- limits (cudaLimit == CUlimit 0..6) and cache configuration, of the client's context
// on the current device. What the client changes is remembered so that DeviceReset puts it back.

// Any limit number goes to the driver, which knows which it has (NVIDIA's runtime passes
// them on too: limit 7, CU_LIMIT_SHMEM_SIZE, reads 232448 on the H200 and refuses a set
// with CUDA_ERROR_NOT_PERMITTED).
namespace {
constexpr int kLimitStackSize = 0, kLimitPrintfFifoSize = 1, kLimitMallocHeapSize = 2;
constexpr int kAttrMultiprocessors = 16, kAttrThreadsPerMultiprocessor = 39;
}  // namespace

// Device memory the driver reserves for a limit set to `value` beyond its default (the
// stack: per resident thread of the whole device), charged to the VM's quota.
uint64_t Session::limit_cost(int device, int limit, uint64_t value, uint64_t default_value) const {
  if (limit != kLimitStackSize && limit != kLimitPrintfFifoSize && limit != kLimitMallocHeapSize) return 0;
  const uint64_t growth = value > default_value ? value - default_value : 0;
  if (limit != kLimitStackSize || !growth) return growth;
  CUdevice dev;
  int sms = 0, threads = 0;
  if (api_.cuDeviceGet(&dev, devices_[device]) == CUDA_SUCCESS) {
    api_.cuDeviceGetAttribute(&sms, kAttrMultiprocessors, dev);
    api_.cuDeviceGetAttribute(&threads, kAttrThreadsPerMultiprocessor, dev);
  }
  const uint64_t resident = static_cast<uint64_t>(std::max(sms, 1)) * static_cast<uint64_t>(std::max(threads, 1));
  return growth > ~0ull / resident ? ~0ull : growth * resident;
}

// Charges (or refunds) the VM's ledger for a limit's cost going from `was` to `now`; false
// when the quota has no room.
bool Session::charge_limit(uint64_t was, uint64_t now) {
  if (!account_ || now == was) return true;
  if (now < was) {
    account_->refund(was - now);
    return true;
  }
  return account_->charge(now - was);
}

int32_t Session::on_DeviceSetLimit(const api::SetLimitArgs& a, api::LimitReply& r, Request&) {
  size_t before = 0;
  Object* entry = vol_.find(ObjectKind::Limit, limit_key(current_, a.limit));
  if (!entry && api_.cuCtxGetLimit(&before, a.limit) != CUDA_SUCCESS) before = 0;
  const uint64_t default_value = entry ? entry->as<LimitObject>().default_value : before;
  const uint64_t charged = entry ? entry->as<LimitObject>().charged : 0;
  // The driver reserves device memory for the stack, the printf FIFO and the device heap
  // outside any allocation: the VM's quota pays for what goes beyond the defaults.
  const uint64_t asked = limit_cost(current_, a.limit, a.value, default_value);
  if (!charge_limit(charged, asked)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult e = api_.cuCtxSetLimit(a.limit, a.value); e != CUDA_SUCCESS) {
    charge_limit(asked, charged);
    return e;
  }
  if (!entry)
    entry = &vol_.add(ObjectKind::Limit, current_, limit_key(current_, a.limit), vol_.context(current_)->id,
                      LimitObject{a.value, before});
  // What the driver made of the request (rounded, clamped): the guest caches it, and a
  // resume sets it again; the charge follows it.
  size_t v = 0;
  const CUresult e = api_.cuCtxGetLimit(&v, a.limit);
  LimitObject& lim = entry->as<LimitObject>();
  lim.value = e == CUDA_SUCCESS ? v : a.value;
  const uint64_t cost = limit_cost(current_, a.limit, lim.value, lim.default_value);
  if (!charge_limit(asked, cost)) {  // rounded up past the quota: the default back
    api_.cuCtxSetLimit(a.limit, lim.default_value);
    lim.value = lim.default_value;
    charge_limit(asked, 0);
    lim.charged = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  lim.charged = cost;
  r.value = v;
  return e;
}

int32_t Session::on_DeviceSetCacheConfig(const api::CacheConfigArgs& a, api::Empty&, Request&) {
  if (a.config < 0 || a.config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  int before = 0;
  Object* entry = vol_.find(ObjectKind::CacheConfig, static_cast<uint64_t>(current_));
  if (!entry && api_.cuCtxGetCacheConfig(&before) != CUDA_SUCCESS) before = 0;
  if (CUresult e = api_.cuCtxSetCacheConfig(a.config); e != CUDA_SUCCESS) return e;
  if (!entry)
    entry = &vol_.add(ObjectKind::CacheConfig, current_, static_cast<uint64_t>(current_), vol_.context(current_)->id,
                      CacheConfigObject{a.config, before});
  entry->as<CacheConfigObject>().value = a.config;
  return CUDA_SUCCESS;
}

int32_t Session::on_FuncSetCacheConfig(const api::FuncCacheConfigArgs& a, api::Empty&, Request&) {
  Object* fo = vol_.find(ObjectKind::Function, a.function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  if (a.config < 0 || a.config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject& f = fo->as<FunctionObject>();
  const CUresult e = on_device(fo->device, [&] { return api_.cuFuncSetCacheConfig(f.fn, a.config); });
  if (e == CUDA_SUCCESS) f.cache_config = a.config;
  return e;
}

// cudaDeviceReset of the current device: its work finishes, then the client's events,
// streams, allocations, arrays, texture and surface objects on it are freed, its limits and cache configuration go back to
// what they were, and peer access from and to it ends, as when CUDA destroys the primary
// context. The context itself stays, and with it the modules (NVIDIA's runtime reloads
// them invisibly after a reset; here their handles simply stay valid) and the module
// variables' storage, which keeps its contents. Returns the synchronization's error (the
// guest drops all but the sticky ones).
int32_t Session::on_DeviceReset(const api::Empty&, api::Empty&, Request&) {
  const int d = current_;
  const CUresult sync = api_.cuCtxSynchronize();
  // The device's objects that a destroyed context would take (its modules stay), each
  // released as the app's own call would (allocations through the arena, as cudaFree).
  // Peer access to this device from the others' contexts goes too (drop_peer_access).
  drop_peer_access(d);
  if (Object* ctx = vol_.context(d)) {
    std::vector<ObjectId> gone;
    vol_.walk_children_first(
        [&](Object& o) {
          switch (o.kind) {
            case ObjectKind::Event:
            case ObjectKind::Stream:
            case ObjectKind::PerThreadStream:  // made anew, with no attributes, at its next use
            case ObjectKind::NullStream:  // its attributes a new stream's
            case ObjectKind::Allocation:
            case ObjectKind::Limit:
            case ObjectKind::CacheConfig:
            case ObjectKind::Graph:  // and their nodes, and the executable graphs: the context's
            case ObjectKind::GraphNode:
            case ObjectKind::GraphExec:
            case ObjectKind::Array:
            case ObjectKind::MipmappedArray:
            case ObjectKind::TexObject:
            case ObjectKind::SurfObject:
            case ObjectKind::IpcMemory:  // a reset unmaps what the context opened
              release(o, Release::kReset);
              gone.push_back(o.id);
              break;
            default:
              break;
          }
        },
        ctx->id);
    for (ObjectId id : gone)
      if (vol_.get(id)) vol_.remove(id);  // a graph's nodes went with it
  }
  // Its captures went with their streams; a graph a resume built for one is the host's.
  for (auto it = open_captures_.begin(); it != open_captures_.end();) {
    if (it->second.device != d) {
      ++it;
      continue;
    }
    if (const auto g = carried_capture_graphs_.find(it->first); g != carried_capture_graphs_.end()) {
      api_.cuGraphDestroy(g->second);
      carried_capture_graphs_.erase(g);
    }
    capture_into_.erase(it->first);
    if (captures_open_) --captures_open_;
    it = open_captures_.erase(it);
  }
  if (devices_.size() == 1) captures_open_ = 0;  // their streams are gone
  if (captures_open_ == 0) capture_events_.clear();
  make_current(current_);
  publish_status();
  return sync;  // kSyncs: printf output is collected (natively a reset destroys the context, which flushes it)
}

}  // namespace vmcuda::host
