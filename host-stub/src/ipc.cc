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
  IpcToken t;
  if (CUresult e = ipc_export_memory(*o, nullptr, &t); e != CUDA_SUCCESS) return e;
  fill_handle(&r.handle, api::kIpcMemTag, t);
  return CUDA_SUCCESS;
}

CUresult Session::ipc_export_memory(const Object& o, const IpcToken* reuse, IpcToken* token) {
  int fd = -1;
  DeviceArena::Exported ex;
  if (CUresult e = arena_->export_fd(o.handle, &fd, &ex); e != CUDA_SUCCESS) {
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
  rec.bytes = o.as<AllocationObject>().bytes;
  if (reuse) {
    if (!limits_.ipc->republish(*reuse, rec, owned.get())) return CUDA_ERROR_INVALID_HANDLE;  // the table refused it
    *token = *reuse;
  } else if (!limits_.ipc->publish(rec, owned.get(), token)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  ipc_exports_[o.handle] = *token;
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
  vol_.add(ObjectKind::IpcMemory, device, r.ptr, vol_.context(device)->id,
           IpcMemoryObject{t, va, rec.bytes, 1, rec.mapping_bytes, rec.generation, true});
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
  IpcToken t;
  if (CUresult e = ipc_export_event(*ev, nullptr, &t); e != CUDA_SUCCESS) return e;
  fill_handle(&r.handle, api::kIpcEventTag, t);
  return CUDA_SUCCESS;
}

CUresult Session::ipc_export_event(const Object& ev, const IpcToken* reuse, IpcToken* token) {
  IpcRecord rec;
  rec.kind = IpcRecord::kEvent;
  rec.host_device = devices_[ev.device];
  rec.owner = ipc_owner_;
  auto put = [&](const std::shared_ptr<void>& local) {
    if (reuse) {
      if (!limits_.ipc->republish(*reuse, rec, -1, local)) return false;
      *token = *reuse;
      return true;
    }
    return local ? limits_.ipc->publish_local(rec, -1, local, token) : limits_.ipc->publish(rec, -1, token);
  };
  if (limits_.ipc->in_process()) {
    // Every client is in this process: importers use this very CUevent (ipc_registry.h
    // IpcSharedEvent), not the driver's IPC event, which does not work within a process.
    EventObject& owned = vol_.get(ev.id)->as<EventObject>();
    std::shared_ptr<IpcSharedEvent> shared = std::static_pointer_cast<IpcSharedEvent>(owned.shared);
    if (!shared) {
      if (ipc_keepers_.size() < devices_.size()) ipc_keepers_.resize(devices_.size());
      auto& keeper = ipc_keepers_[ev.device];
      if (!keeper) {
        keeper = std::make_shared<IpcContextKeeper>();
        keeper->api = &api_;
        keeper->ctx = contexts_[ev.device];
      }
      shared = std::make_shared<IpcSharedEvent>();
      shared->api = &api_;
      shared->event = owned.event;
      shared->host_device = rec.host_device;
      shared->context = keeper;
      owned.shared = shared;
    }
    if (!put(shared)) return reuse ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_SUPPORTED;
    ipc_event_exports_[ev.handle] = *token;
    return CUDA_SUCCESS;
  }
  const CUevent e = ev.as<EventObject>().event;
  if (CUresult err = on_device(ev.device, [&] { return api_.cuIpcGetEventHandle(&rec.event, e); });
      err != CUDA_SUCCESS)
    return err;
  if (!put(nullptr)) return reuse ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_SUPPORTED;
  ipc_event_exports_[ev.handle] = *token;
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
  opened.imported = true;
  opened.ipc_token = t;
  opened.ipc_generation = rec.generation;
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

unsigned Session::driver_event_flags(unsigned guest_flags) const {
  return limits_.ipc && limits_.ipc->in_process() ? guest_flags & ~unsigned(CU_EVENT_INTERPROCESS) : guest_flags;
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

void Session::ipc_park_export(uint64_t ptr) {
  if (auto it = ipc_exports_.find(ptr); it != ipc_exports_.end()) limits_.ipc->park(it->second, ipc_owner_);
}

void Session::ipc_park_event(uint64_t handle) {
  if (auto it = ipc_event_exports_.find(handle); it != ipc_event_exports_.end())
    limits_.ipc->park(it->second, ipc_owner_);
}

void Session::ipc_forget_all() {
  for (auto* m : {&ipc_exports_, &ipc_event_exports_}) {
    for (const auto& [key, token] : *m) limits_.ipc->revoke(token, ipc_owner_);
    m->clear();
  }
  ipc_forget_pools();
}

// Each import of other programs' memory and events, mapped or opened again where the table
// has it anew: after a resume (not mapped yet: the exporters republished it in the same
// resume of the VM) and in a client that ran on while its exporter was suspended and
// resumed (a suspend of the VM that failed and was undone). The memory goes back at the
// same address, the event behind the same handle; nothing of the client runs meanwhile
// (its slot is held).
bool Session::ipc_attach(std::string* why) {
  auto hexs = [](uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(b);
  };
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": " + w);
    make_current(current_);
    return false;
  };
  if (suspended_) return fail("the client is suspended");
  if (!limits_.ipc) return true;
  for (const auto& [ptr, id] : std::map<uint64_t, ObjectId>(vol_.of(ObjectKind::IpcMemory))) {
    Object* o = vol_.get(id);
    IpcMemoryObject& m = o->as<IpcMemoryObject>();
    const std::string what = "another program's memory opened at " + hexs(ptr);
    IpcRecord rec;
    vmrpc::UniqueFd fd;
    if (!limits_.ipc->lookup(m.token, &rec, &fd) || rec.kind != IpcRecord::kMemory) {
      if (m.mapped) continue;  // its exporter is suspended or gone: this client keeps its mapping
      return fail(what + " cannot be mapped again: its handle names nothing in the VM now (its exporting "
                         "program was not resumed with this one, ended, or the state is not this VM's)");
    }
    if (m.mapped && rec.generation == m.generation) continue;  // the same memory
    if (rec.mapping_bytes != m.mapping_bytes || rec.bytes != m.bytes || rec.offset != ptr - m.va ||
        rec.host_device != devices_[o->device])
      return fail(what + " cannot be mapped again: its exporter's allocation is now " + std::to_string(rec.bytes) +
                  " bytes at offset " + std::to_string(rec.offset) + " of " + std::to_string(rec.mapping_bytes) +
                  " on GPU " + std::to_string(rec.host_device) + ", where " + std::to_string(m.bytes) + " bytes at " +
                  std::to_string(ptr - m.va) + " of " + std::to_string(m.mapping_bytes) + " were opened");
    if (!context_of(o->device)) return fail(what + ": no context: " + describe(api_, ctx_error_));
    unsigned long long h = 0;
    CUresult e = on_device(o->device, [&] {
      return api_.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd.get())),
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    });
    if (e != CUDA_SUCCESS) return fail(what + " cannot be mapped again: importing it failed: " + describe(api_, e));
    e = on_device(o->device, [&] {
      if (m.mapped) {
        if (CUresult u = arena_->unmap_import(m.va, true); u != CUDA_SUCCESS) return u;
        m.mapped = false;
      }
      return arena_->map_import_at(rec.host_device, h, m.mapping_bytes, m.va);
    });
    if (e != CUDA_SUCCESS) {
      api_.cuMemRelease(h);
      return fail(what + " cannot be mapped again at " + hexs(m.va) + ": " + describe(api_, e));
    }
    m.mapped = true;
    m.generation = rec.generation;
  }
  for (const auto& [handle, id] : std::map<uint64_t, ObjectId>(vol_.of(ObjectKind::Event))) {
    Object* o = vol_.get(id);
    EventObject& ev = o->as<EventObject>();
    if (!ev.imported) continue;
    const std::string what = "interprocess event " + hexs(handle) + " (opened with cudaIpcOpenEventHandle)";
    IpcRecord rec;
    vmrpc::UniqueFd none;
    std::shared_ptr<void> local;
    const bool found = limits_.ipc->in_process() ? limits_.ipc->lookup_local(ev.ipc_token, &rec, &none, &local)
                                                 : limits_.ipc->lookup(ev.ipc_token, &rec, &none);
    if (!found || rec.kind != IpcRecord::kEvent) {
      if (ev.event) continue;  // its exporter is suspended or gone: kept as it is
      return fail(what + " cannot be opened again: its handle names nothing in the VM now (its exporting "
                         "program was not resumed with this one, ended, or the state is not this VM's)");
    }
    if (ev.event && rec.generation == ev.ipc_generation) continue;
    if (rec.host_device != devices_[o->device])
      return fail(what + " cannot be opened again: it is on GPU " + std::to_string(rec.host_device) + " now");
    if (!context_of(o->device)) return fail(what + ": no context: " + describe(api_, ctx_error_));
    CUevent opened = nullptr;
    if (local) {
      opened = static_cast<IpcSharedEvent*>(local.get())->event;
    } else if (CUresult e = on_device(o->device, [&] { return api_.cuIpcOpenEventHandle(&opened, rec.event); });
               e != CUDA_SUCCESS) {
      return fail(what + " cannot be opened again: " + describe(api_, e));
    }
    if (ev.shared) ev.shared.reset();  // the exporter's earlier event: its last holder destroys it
    else if (ev.event) on_device(o->device, [&] { return api_.cuEventDestroy_v2(ev.event); });
    ev.event = opened;
    ev.shared = std::move(local);
    ev.ipc_generation = rec.generation;
  }
  make_current(current_);
  return true;
}

}  // namespace vmcuda::host
