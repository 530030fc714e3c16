// IPC between programs of one VM (calls.def 0x1a00; ipc_registry.h has the VM's table).
// Memory: the exporter's physical memory (the arena's mapping holding the allocation: a
// whole 2 MiB chunk for a small allocation, as natively an IPC mapping covers the whole
// underlying allocation) goes to the table as a POSIX fd; an importer maps it into its own
// arena, so its pointer passes every ownership check (an IpcMemory entry) until closed.
// The exporter's cudaFree stops new opens; the importers' mappings keep the memory alive
// until they close (natively undefined; here the bytes stay valid). Events: the driver's
// own IPC event handle behind a token.
#include <cstring>

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
  const CUevent e = eo.event;
  if (CUresult err = on_device(ev->device, [&] { return api_.cuIpcGetEventHandle(&rec.event, e); });
      err != CUDA_SUCCESS)
    return err;
  IpcToken t;
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
  if (!limits_.ipc->lookup(t, &rec, &none) || rec.kind != IpcRecord::kEvent) return CUDA_ERROR_INVALID_HANDLE;
  if (rec.owner == ipc_owner_) return CUDA_ERROR_INVALID_CONTEXT;
  const int device = guest_device_of(devices_, current_, rec.host_device);
  if (device < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (vol_.count(ObjectKind::Event) >= limits_.max_events) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!context_of(device)) return ctx_error_;
  CUevent e = nullptr;
  if (CUresult err = on_device(device, [&] { return api_.cuIpcOpenEventHandle(&e, rec.event); }); err != CUDA_SUCCESS)
    return err;
  vol_.add(ObjectKind::Event, device, a.event, vol_.context(device)->id,
           EventObject{e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, false});
  r.device = device;
  return CUDA_SUCCESS;
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

std::string Session::ipc_blocks_suspend() const {
  size_t events = 0;
  for (const auto& [h, id] : vol_.of(ObjectKind::Event))
    if (vol_.get(id)->as<EventObject>().flags & CU_EVENT_INTERPROCESS) ++events;
  const size_t open = vol_.count(ObjectKind::IpcMemory), exported = ipc_exports_.size();
  if (!open && !exported && !events) return {};
  return "the program shares GPU memory or events with other programs of the VM (cudaIpc*: " +
         std::to_string(exported) + " allocations exported, " + std::to_string(open) + " opened, " +
         std::to_string(events) + " interprocess events), which a suspend does not carry yet; suspend the VM "
         "when they are closed, or end the program";
}

}  // namespace vmcuda::host
