// IPC between programs of one VM (calls.def 0x1a00; ipc_registry.h has the VM's table).
// Memory: the exporter's physical memory (the arena's mapping holding the allocation: a
// whole 2 MiB chunk for a small allocation, as natively an IPC mapping covers the whole
// underlying allocation) goes to the table as a POSIX fd; an importer maps it into its own
// arena, so its pointer passes every ownership check (an IpcMemory entry) until closed.
// The exporter's cudaFree stops new opens; the importers' mappings keep the memory alive
// until they close (natively undefined; here the bytes stay valid). Events: the driver's
// own IPC event handle behind a token; with every client in one process (`--isolation
// thread`) the exporter's CUevent itself, shared (ipc_registry.h IpcSharedEvent).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ipc_registry.h"
#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

namespace {

void fill_handle(api::IpcHandle* h, uint64_t tag, const IpcToken& t) {
  std::memset(h, 0, sizeof *h);
  h->tag = tag;
  std::memcpy(h->token, t.data(), t.size());
}

bool token_of(const api::IpcHandle& h, uint64_t tag, IpcToken* t) {
  if (h.tag != tag) return false;
  std::memcpy(t->data(), h.token, t->size());
  return true;
}

}  // namespace

// The guest device whose GPU is host ordinal `host` (the current one first), or -1.
static int guest_device_of(const std::vector<int>& devices, int current, int host) {
  if (static_cast<size_t>(current) < devices.size() && devices[current] == host) return current;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == host) return static_cast<int>(i);
  return -1;
}

int32_t Session::on_IpcGetMemHandle(const api::PtrArgs& a, api::IpcHandleReply& r, Request&) {
  if (!limits_.ipc || !arena_) return CUDA_ERROR_NOT_SUPPORTED;
  // cudaIpcGetMemHandle takes a pointer into one of the client's own allocations (not a
  // module variable, not memory it opened from another program).
  const Object* o = vol_.find_range(a.ptr, 1);
  if (!o || o->kind != ObjectKind::Allocation) return CUDA_ERROR_INVALID_VALUE;
  if (auto it = ipc_exports_.find(o->handle); it != ipc_exports_.end()) {
    fill_handle(&r.handle, api::kIpcMemTag, it->second);  // the same handle each time
    return CUDA_SUCCESS;
  }
  int fd = -1;
  DeviceArena::Exported ex;
  if (CUresult e = arena_->export_fd(o->handle, &fd, &ex); e != CUDA_SUCCESS) {
    if (!said_ipc_) {
      said_ipc_ = true;
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": cannot export device memory for IPC: " + describe(api_, e) +
                                   " (the GPU or driver does not share memory by POSIX file descriptor)");
    }
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  vmrpc::UniqueFd owned(fd);
  IpcRecord rec;
  rec.kind = IpcRecord::kMemory;
  rec.host_device = ex.device;
  rec.owner = ipc_owner_;
  rec.mapping_bytes = ex.mapping_bytes;
  rec.offset = ex.offset;
  rec.bytes = o->as<AllocationObject>().bytes;
  IpcToken t;
  if (!limits_.ipc->publish(rec, owned.get(), &t)) return CUDA_ERROR_NOT_SUPPORTED;
  ipc_exports_[o->handle] = t;
  fill_handle(&r.handle, api::kIpcMemTag, t);
  return CUDA_SUCCESS;
}

int32_t Session::on_IpcOpenMemHandle(const api::IpcOpenMemArgs& a, api::IpcOpenMemReply& r, Request&) {
  if (!limits_.ipc || !arena_) return CUDA_ERROR_NOT_SUPPORTED;
  if (a.flags & ~1u) return CUDA_ERROR_INVALID_VALUE;  // only cudaIpcMemLazyEnablePeerAccess
  IpcToken t;
  if (!token_of(a.handle, api::kIpcMemTag, &t)) return CUDA_ERROR_INVALID_HANDLE;
  // Opened here already: counted, the same pointer (CUDA's rule for one context).
  for (const auto& [ptr, id] : vol_.of(ObjectKind::IpcMemory)) {
    IpcMemoryObject& m = vol_.get(id)->as<IpcMemoryObject>();
    if (m.token == t) {
      if (m.opens == UINT32_MAX) return CUDA_ERROR_INVALID_VALUE;
      ++m.opens;
      r.ptr = ptr;
      r.bytes = m.bytes;
      r.device = vol_.get(id)->device;
      return CUDA_SUCCESS;
    }
  }
  IpcRecord rec;
  vmrpc::UniqueFd fd;
  if (!limits_.ipc->lookup(t, &rec, &fd) || rec.kind != IpcRecord::kMemory)
    return CUDA_ERROR_INVALID_HANDLE;  // forged, another VM's, or its allocation freed
  if (rec.owner == ipc_owner_) return CUDA_ERROR_INVALID_CONTEXT;  // a process cannot open its own handle
  if (rec.mapping_bytes == 0 || rec.offset > rec.mapping_bytes || rec.bytes > rec.mapping_bytes - rec.offset)
    return CUDA_ERROR_INVALID_HANDLE;
  const int device = guest_device_of(devices_, current_, rec.host_device);
  if (device < 0) return CUDA_ERROR_INVALID_DEVICE;  // memory of a GPU this client does not use
  if (!context_of(device)) return ctx_error_;
  unsigned long long h = 0;
  CUresult e = on_device(device, [&] {
    return api_.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd.get())),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  });
  if (e != CUDA_SUCCESS) return CUDA_ERROR_MAP_FAILED;
  uint64_t va = 0;
  e = on_device(device, [&] { return arena_->map_import(rec.host_device, h, rec.mapping_bytes, &va); });
  if (e != CUDA_SUCCESS) {
    api_.cuMemRelease(h);
    return e == CUDA_ERROR_OUT_OF_MEMORY ? e : CUDA_ERROR_MAP_FAILED;
  }
  r.ptr = va + rec.offset;
  r.bytes = rec.bytes;
  r.device = device;
  vol_.add(ObjectKind::IpcMemory, device, r.ptr, vol_.context(device)->id, IpcMemoryObject{t, va, rec.bytes, 1});
  publish_status();
  return CUDA_SUCCESS;
}

int32_t Session::on_IpcCloseMemHandle(const api::PtrArgs& a, api::Empty&, Request&) {
  Object* o = vol_.find(ObjectKind::IpcMemory, a.ptr);
  if (!o) return CUDA_ERROR_INVALID_VALUE;  // not a pointer cudaIpcOpenMemHandle returned
  if (--o->as<IpcMemoryObject>().opens > 0) return CUDA_SUCCESS;
  const int32_t e = destroy_entry(ObjectKind::IpcMemory, a.ptr, CUDA_ERROR_INVALID_VALUE);
  publish_status();
  return e;
}

int32_t Session::on_IpcGetEventHandle(const api::EventArgs& a, api::IpcHandleReply& r, Request&) {
  if (!limits_.ipc) return CUDA_ERROR_NOT_SUPPORTED;
  const Object* ev = find_event(a.event);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  const EventObject& eo = ev->as<EventObject>();
  if (!(eo.flags & CU_EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_HANDLE;  // CUDA's rule
  if (auto it = ipc_event_exports_.find(a.event); it != ipc_event_exports_.end()) {
    fill_handle(&r.handle, api::kIpcEventTag, it->second);
    return CUDA_SUCCESS;
  }
  IpcRecord rec;
  rec.kind = IpcRecord::kEvent;
  rec.host_device = devices_[ev->device];
  rec.owner = ipc_owner_;
  IpcToken t;
  if (limits_.ipc->in_process()) {
    // Every client is in this process: importers use this very CUevent (ipc_registry.h
    // IpcSharedEvent), not the driver's IPC event, which does not work within a process.
    EventObject& owned = vol_.get(ev->id)->as<EventObject>();
    std::shared_ptr<IpcSharedEvent> shared = std::static_pointer_cast<IpcSharedEvent>(owned.shared);
    if (!shared) {
      if (ipc_keepers_.size() < devices_.size()) ipc_keepers_.resize(devices_.size());
      auto& keeper = ipc_keepers_[ev->device];
      if (!keeper) {
        keeper = std::make_shared<IpcContextKeeper>();
        keeper->api = &api_;
        keeper->ctx = contexts_[ev->device];
      }
      shared = std::make_shared<IpcSharedEvent>();
      shared->api = &api_;
      shared->event = owned.event;
      shared->host_device = rec.host_device;
      shared->context = keeper;
      owned.shared = shared;
    }
    if (!limits_.ipc->publish_local(rec, -1, shared, &t)) return CUDA_ERROR_NOT_SUPPORTED;
    ipc_event_exports_[a.event] = t;
    fill_handle(&r.handle, api::kIpcEventTag, t);
    return CUDA_SUCCESS;
  }
  const CUevent e = eo.event;
  if (CUresult err = on_device(ev->device, [&] { return api_.cuIpcGetEventHandle(&rec.event, e); });
      err != CUDA_SUCCESS)
    return err;
  if (!limits_.ipc->publish(rec, -1, &t)) return CUDA_ERROR_NOT_SUPPORTED;
  ipc_event_exports_[a.event] = t;
  fill_handle(&r.handle, api::kIpcEventTag, t);
  return CUDA_SUCCESS;
}

int32_t Session::on_IpcOpenEventHandle(const api::IpcOpenEventArgs& a, api::DeviceReply& r, Request&) {
  if (!limits_.ipc) return CUDA_ERROR_NOT_SUPPORTED;
  if (a.event < api::kFirstGuestHandle || find_event(a.event)) return guest_fault("IpcOpenEventHandle: bad event handle");
  IpcToken t;
  if (!token_of(a.handle, api::kIpcEventTag, &t)) return CUDA_ERROR_INVALID_HANDLE;
  IpcRecord rec;
  vmrpc::UniqueFd none;
  std::shared_ptr<void> local;
  const bool found = limits_.ipc->in_process() ? limits_.ipc->lookup_local(t, &rec, &none, &local)
                                               : limits_.ipc->lookup(t, &rec, &none);
  if (!found || rec.kind != IpcRecord::kEvent) return CUDA_ERROR_INVALID_HANDLE;
  if (rec.owner == ipc_owner_) return CUDA_ERROR_INVALID_CONTEXT;
  const int device = guest_device_of(devices_, current_, rec.host_device);
  if (device < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (vol_.count(ObjectKind::Event) >= limits_.max_events) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!context_of(device)) return ctx_error_;
  EventObject opened{nullptr, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, false};
  if (local) {
    // The exporter's own CUevent (same process): it follows the exporter's records.
    opened.event = static_cast<IpcSharedEvent*>(local.get())->event;
    opened.shared = std::move(local);
  } else if (CUresult err = on_device(device, [&] { return api_.cuIpcOpenEventHandle(&opened.event, rec.event); });
             err != CUDA_SUCCESS) {
    return err;
  }
  vol_.add(ObjectKind::Event, device, a.event, vol_.context(device)->id, std::move(opened));
  r.device = device;
  return CUDA_SUCCESS;
}

// ---- memory pools (0x1a10). A pool is the guest's (memory_pool.cc keeps it); its export
// is a token naming the exporter and the pool's GPU, so that an importer of the VM learns
// where the pool is and nobody outside the VM names it. Its pointers travel as IPC memory.
int32_t Session::on_MemPoolExport(const api::MemPoolExportArgs& a, api::IpcHandleReply& r, Request&) {
  if (!limits_.ipc) return CUDA_ERROR_NOT_SUPPORTED;
  if (a.pool == 0 || a.device < 0 || static_cast<size_t>(a.device) >= devices_.size())
    return CUDA_ERROR_INVALID_VALUE;
  if (auto it = ipc_pool_exports_.find(a.pool); it != ipc_pool_exports_.end()) {
    if (it->second.device != a.device) return CUDA_ERROR_INVALID_VALUE;  // a pool stays on its device
    fill_handle(&r.handle, api::kIpcPoolTag, it->second.token);
    return CUDA_SUCCESS;
  }
  // Pool handles are the guest's to make: a bound on the table entries one client adds.
  if (ipc_pool_exports_.size() >= kMaxPoolExports) return CUDA_ERROR_OUT_OF_MEMORY;
  IpcRecord rec;
  rec.kind = IpcRecord::kPool;
  rec.host_device = devices_[a.device];
  rec.owner = ipc_owner_;
  IpcToken t;
  if (!limits_.ipc->publish(rec, -1, &t)) return CUDA_ERROR_NOT_SUPPORTED;
  ipc_pool_exports_[a.pool] = PoolExport{t, a.device};
  fill_handle(&r.handle, api::kIpcPoolTag, t);
  return CUDA_SUCCESS;
}

int32_t Session::on_MemPoolImport(const api::MemPoolImportArgs& a, api::DeviceReply& r, Request&) {
  if (!limits_.ipc) return CUDA_ERROR_NOT_SUPPORTED;
  // A descriptor that names no pool of this VM (forged, another VM's, its pool destroyed or
  // its program ended) is an invalid value, as a descriptor of something else is natively.
  IpcToken t;
  if (!token_of(a.handle, api::kIpcPoolTag, &t)) return CUDA_ERROR_INVALID_VALUE;
  IpcRecord rec;
  vmrpc::UniqueFd none;
  if (!limits_.ipc->lookup(t, &rec, &none) || rec.kind != IpcRecord::kPool) return CUDA_ERROR_INVALID_VALUE;
  if (rec.owner == ipc_owner_) return CUDA_ERROR_INVALID_VALUE;  // its own pool: use it as it is
  const int device = guest_device_of(devices_, current_, rec.host_device);
  if (device < 0) return CUDA_ERROR_INVALID_DEVICE;  // a GPU this client does not use
  r.device = device;
  return CUDA_SUCCESS;
}

int32_t Session::on_MemPoolForget(const api::MemPoolExportArgs& a, api::Empty&, Request&) {
  auto it = ipc_pool_exports_.find(a.pool);
  if (it == ipc_pool_exports_.end()) return CUDA_SUCCESS;  // never exported: nothing to forget
  limits_.ipc->revoke(it->second.token, ipc_owner_);
  ipc_pool_exports_.erase(it);
  return CUDA_SUCCESS;
}

bool Session::ipc_borrowed_event(const EventObject& e, int device) const {
  if (!e.shared) return false;
  const auto* shared = static_cast<const IpcSharedEvent*>(e.shared.get());
  return static_cast<size_t>(device) >= contexts_.size() || shared->context->ctx != contexts_[device];
}

// The importer's record of a borrowed event: a mark on its stream, which a stream of the
// exporter's context waits for before it records the event. Ordered after every earlier
// importer record too (one bridge stream per context): it may complete later than
// natively, never earlier.
CUresult Session::ipc_record_borrowed(const EventObject& e, CUstream stream, int device) {
  auto* shared = static_cast<IpcSharedEvent*>(e.shared.get());
  IpcContextKeeper& k = *shared->context;
  CUevent mark = nullptr;
  make_current(device);
  CUresult r = api_.cuEventCreate(&mark, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = api_.cuEventRecord(mark, stream);
  if (r == CUDA_SUCCESS) {
    std::lock_guard l(k.mu);
    bound_ = -1;  // another client's context is current here until make_current below
    r = api_.cuCtxSetCurrent(k.ctx);
    if (r == CUDA_SUCCESS && !k.bridge) r = api_.cuStreamCreateWithPriority(&k.bridge, CU_STREAM_NON_BLOCKING, 0);
    if (r == CUDA_SUCCESS) r = api_.cuStreamWaitEvent(k.bridge, mark, 0);
    if (r == CUDA_SUCCESS) r = api_.cuEventRecord(shared->event, k.bridge);
  }
  make_current(device);
  if (mark) api_.cuEventDestroy_v2(mark);  // released by the driver once it completed
  make_current(current_);
  return r;
}

void Session::ipc_forget_pools() {
  for (const auto& [pool, e] : ipc_pool_exports_) limits_.ipc->revoke(e.token, ipc_owner_);
  ipc_pool_exports_.clear();
}

void Session::ipc_forget_export(uint64_t ptr) {
  if (ipc_exports_.empty()) return;
  auto it = ipc_exports_.find(ptr);
  if (it == ipc_exports_.end()) return;
  limits_.ipc->revoke(it->second, ipc_owner_);
  ipc_exports_.erase(it);
}

void Session::ipc_forget_event(uint64_t handle) {
  if (ipc_event_exports_.empty()) return;
  auto it = ipc_event_exports_.find(handle);
  if (it == ipc_event_exports_.end()) return;
  limits_.ipc->revoke(it->second, ipc_owner_);
  ipc_event_exports_.erase(it);
}

// A suspend gives the client's device memory and events back to the driver and makes them
// anew at the resume: memory shared with another program of the VM would have to be given
// back and made again under that program's mappings, in step with it, which is not done yet.
// So it is refused, naming the first handle of each kind and why.
std::string Session::ipc_blocks_suspend() const {
  std::vector<std::string> held;
  auto hexs = [](uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(b);
  };
  auto more = [](size_t n) { return n > 1 ? " (and " + std::to_string(n - 1) + " more)" : std::string(); };
  if (!ipc_exports_.empty())
    held.push_back("allocation " + hexs(ipc_exports_.begin()->first) + more(ipc_exports_.size()) +
                   " exported with cudaIpcGetMemHandle (other programs may map its memory, which a suspend "
                   "would free and make anew under them)");
  if (const auto& open = vol_.of(ObjectKind::IpcMemory); !open.empty())
    held.push_back("another program's memory opened at " + hexs(open.begin()->first) + more(open.size()) +
                   " with cudaIpcOpenMemHandle or cudaMemPoolImportPointer (it belongs to that program, whose "
                   "suspend would free it under this one)");
  std::vector<uint64_t> events;
  for (const auto& [h, id] : vol_.of(ObjectKind::Event))
    if (vol_.get(id)->as<EventObject>().flags & CU_EVENT_INTERPROCESS) events.push_back(h);
  if (!events.empty())
    held.push_back("interprocess event " + hexs(events.front()) + more(events.size()) +
                   " (cudaEventInterprocess: shared through the driver's IPC event handle, which a resume "
                   "cannot make again behind the handle other programs hold)");
  if (!ipc_pool_exports_.empty())
    held.push_back("memory pool " + hexs(ipc_pool_exports_.begin()->first) + more(ipc_pool_exports_.size()) +
                   " exported with cudaMemPoolExportToShareableHandle");
  if (held.empty()) return {};
  std::string why = "the program shares GPU memory or events with other programs of the VM, which a suspend does "
                    "not carry yet: ";
  for (size_t i = 0; i < held.size(); ++i) why += (i ? "; " : "") + held[i];
  return why + ". Suspend the VM once they are closed (cudaIpcCloseMemHandle, cudaEventDestroy, "
               "cudaMemPoolDestroy, cudaFree), or end the program";
}

}  // namespace vmcuda::host
