// Virtual memory management (calls.def, 0x1140): cuMemAddressReserve/Free, cuMemCreate/Release,
// cuMemMap/Unmap, cuMemSetAccess/GetAccess, cuMemRetainAllocationHandle,
// cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationGranularity (PyTorch's expandable
// segments: reserve big, map chunks as the segment grows).
//
// The guest's reservations are ranges of its arena's VA (arena.h: fixed per client), so every
// address it sees is its own and could keep its value across a resume; its physical
// allocations are host-made handles charged to the VM's quota as the driver maps them. Mapped
// ranges are the client's device memory for every other call (ObjectList::find_range).
// A suspend carries them (suspend.cc): reservations re-taken at the same addresses of the
// re-created arena, each physical allocation's bytes saved once through a whole mapping of
// its own (vmm_map_whole), mappings and access applied again, references kept.
#include <iterator>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

namespace {
bool valid_access_flags(uint32_t f) {
  return f == CU_MEM_ACCESS_FLAGS_PROT_NONE || f == CU_MEM_ACCESS_FLAGS_PROT_READ ||
         f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}
}  // namespace

// The guest's own mappings of an allocation may be partial, twice, read-only or none: a
// suspend's and a resume's copies go through a whole mapping at free VA of the arena,
// read-write for the allocation's device (whose context is current).
CUresult Session::vmm_map_whole(const Object& alloc, uint64_t* va, std::string* why) {
  const auto& v = alloc.as<VmmAllocationObject>();
  const int device = devices_[alloc.device];
  *va = 0;
  uint64_t at = 0;
  std::string w;
  CUresult e = arena_ ? arena_->reserve_guest(device, v.bytes, 0, 0, &at, &w) : CUDA_ERROR_OUT_OF_MEMORY;
  if (e != CUDA_SUCCESS) {
    *why = "no room in the client's address range to copy physical allocation " + std::to_string(alloc.handle) +
           (w.empty() ? "" : ": " + w) + " (" + describe(api_, e) + ")";
    return e;
  }
  e = api_.cuMemMap(at, v.bytes, 0, v.handle, 0);
  if (e == CUDA_SUCCESS) {
    const CUmemAccessDesc d{{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    e = api_.cuMemSetAccess(at, v.bytes, &d, 1);
    if (e != CUDA_SUCCESS) api_.cuMemUnmap(at, v.bytes);
  }
  if (e != CUDA_SUCCESS) {
    arena_->free_guest(at, v.bytes);
    *why = "mapping physical allocation " + std::to_string(alloc.handle) + " (" + std::to_string(v.bytes >> 20) +
           " MiB) to copy it failed: " + describe(api_, e);
    return e;
  }
  *va = at;
  return CUDA_SUCCESS;
}

void Session::vmm_unmap_whole(uint64_t va, uint64_t bytes) {
  if (!va) return;
  // A copy from pageable memory returns once its bytes are staged, before the DMA lands, and
  // cuMemUnmap does not wait for it: unmapping at once faulted the copy on the H100 (the next
  // call answered CUDA_ERROR_LAUNCH_FAILED).
  api_.cuCtxSynchronize();
  api_.cuMemUnmap(va, bytes);
  if (arena_) arena_->free_guest(va, bytes);
}

Object* Session::vmm_allocation(uint64_t handle) {
  Object* o = vol_.find(ObjectKind::VmmAllocation, handle);
  return o && o->as<VmmAllocationObject>().refs ? o : nullptr;
}

// The mappings that cover [ptr, ptr + bytes) exactly, whole and without a gap; false if none do.
bool Session::vmm_whole_mappings(uint64_t ptr, uint64_t bytes, std::vector<ObjectId>* out) const {
  const auto& maps = vol_.of(ObjectKind::VmmMapping);
  auto it = maps.find(ptr);
  uint64_t end = ptr;
  out->clear();
  while (it != maps.end() && it->first == end && end - ptr < bytes) {
    const Object* m = vol_.get(it->second);
    end += m->as<VmmMappingObject>().bytes;
    out->push_back(m->id);
    ++it;
  }
  return !out->empty() && end - ptr == bytes;
}

// After a reference or a mapping went: the driver's memory goes with the last of them.
CUresult Session::vmm_drop_if_unused(ObjectId id) {
  Object* a = vol_.get(id);
  if (!a) return CUDA_SUCCESS;
  auto& v = a->as<VmmAllocationObject>();
  if (v.refs || v.maps) return CUDA_SUCCESS;
  const CUresult e = v.handle && arena_ ? arena_->release_guest_physical(v.handle, v.bytes) : CUDA_SUCCESS;
  v.handle = 0;
  vol_.remove(id);
  publish_status();
  return e;
}

CUresult Session::vmm_unmap(Object& m) {
  auto& v = m.as<VmmMappingObject>();
  if (!v.mapped) return CUDA_SUCCESS;
  v.mapped = false;
  const CUresult e = api_.cuMemUnmap(m.handle, v.bytes);
  if (Object* a = vol_.get(v.allocation)) --a->as<VmmAllocationObject>().maps;
  return e;
}

// Teardown (release_all): every mapping first, whatever the VOL walk's order, so that each
// allocation's driver memory can go when its entry does.
void Session::vmm_unmap_all() {
  std::vector<ObjectId> ids;
  for (const auto& [va, id] : vol_.of(ObjectKind::VmmMapping)) ids.push_back(id);
  for (ObjectId id : ids) vmm_unmap(*vol_.get(id));
}

int32_t Session::on_VmmGranularity(const api::VmmGranularityArgs& a, api::VmmValueReply& r, Request&) {
  if (!valid_device(a.device)) return CUDA_ERROR_INVALID_DEVICE;
  if (a.option > 1) return CUDA_ERROR_INVALID_VALUE;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, devices_[a.device]};
  size_t g = 0;
  const CUresult e =
      api_.cuMemGetAllocationGranularity(&g, &prop, static_cast<CUmemAllocationGranularity_flags>(a.option));
  r.value = g;
  return e;
}

int32_t Session::on_VmmAddressReserve(const api::VmmReserveArgs& a, api::PtrReply& r, Request&) {
  if (!arena_) return CUDA_ERROR_OUT_OF_MEMORY;
  if (a.flags || a.bytes == 0 || (a.alignment & (a.alignment - 1))) return CUDA_ERROR_INVALID_VALUE;
  std::string why;
  uint64_t va = 0;
  const CUresult e = arena_->reserve_guest(devices_[current_], a.bytes, a.alignment, a.addr, &va, &why);
  if (e != CUDA_SUCCESS) {
    if (!why.empty() && !arena_warned_) {
      arena_warned_ = true;
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": device memory unavailable: " + why);
    }
    return e;
  }
  vol_.add(ObjectKind::VmmReservation, current_, va, 0, VmmReservationObject{a.bytes});
  r.ptr = va;
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmAddressFree(const api::VmmRangeArgs& a, api::Empty&, Request&) {
  Object* o = vol_.find(ObjectKind::VmmReservation, a.ptr);
  if (!o || o->as<VmmReservationObject>().bytes != a.bytes || !arena_) return CUDA_ERROR_INVALID_VALUE;
  // Still mapped inside: refused (unmap first), as the driver refuses it.
  if (!o->children.empty()) return CUDA_ERROR_INVALID_VALUE;
  arena_->free_guest(a.ptr, a.bytes);
  vol_.remove(o->id);
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmCreate(const api::VmmCreateArgs& a, api::VmmValueReply& r, Request&) {
  if (!valid_device(a.device)) return CUDA_ERROR_INVALID_DEVICE;
  if (a.flags || a.bytes == 0 || !arena_) return CUDA_ERROR_INVALID_VALUE;
  uint64_t g = 0;
  if (CUresult e = arena_->granularity_of(devices_[a.device], &g); e != CUDA_SUCCESS) return e;
  if (a.bytes % g) return CUDA_ERROR_INVALID_VALUE;  // the driver's rule: whole granules
  if (a.bytes > memory_quota()) return CUDA_ERROR_OUT_OF_MEMORY;
  CUcontext ctx = context_of(a.device);
  if (!ctx) return ctx_error_;
  CUmemGenericAllocationHandle h = 0;
  if (CUresult e = arena_->create_guest_physical(devices_[a.device], a.bytes, &h); e != CUDA_SUCCESS) {
    if (e == CUDA_ERROR_OUT_OF_MEMORY && !quota_warned_) {
      quota_warned_ = true;
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": cuMemCreate of " + std::to_string(a.bytes >> 20) +
                                   " MiB refused: over the VM's device memory quota or the GPU's memory");
    }
    return e;
  }
  const uint64_t handle = vol_.next_handle(ObjectKind::VmmAllocation);
  VmmAllocationObject v;
  v.handle = h;
  v.bytes = a.bytes;
  vol_.add(ObjectKind::VmmAllocation, a.device, handle, vol_.context(a.device)->id, v);
  r.value = handle;
  publish_status();
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmRelease(const api::VmmHandleArgs& a, api::Empty&, Request&) {
  Object* o = vmm_allocation(a.handle);
  if (!o) return CUDA_ERROR_INVALID_VALUE;
  --o->as<VmmAllocationObject>().refs;
  return vmm_drop_if_unused(o->id);
}

// The reply is the allocation's guest device (the guest records the range as its memory).
int32_t Session::on_VmmMap(const api::VmmMapArgs& a, api::VmmValueReply& reply, Request&) {
  Object* alloc = vmm_allocation(a.handle);
  if (!alloc) return CUDA_ERROR_INVALID_HANDLE;
  auto& av = alloc->as<VmmAllocationObject>();
  if (a.flags || a.bytes == 0 || !arena_) return CUDA_ERROR_INVALID_VALUE;
  uint64_t g = 0;
  if (CUresult e = arena_->granularity_of(devices_[alloc->device], &g); e != CUDA_SUCCESS) return e;
  if (a.ptr % g || a.bytes % g || a.offset % g) return CUDA_ERROR_INVALID_VALUE;
  if (a.offset > av.bytes || a.bytes > av.bytes - a.offset) return CUDA_ERROR_INVALID_VALUE;
  // Inside one of the client's reservations...
  const auto& res = vol_.of(ObjectKind::VmmReservation);
  auto r = res.upper_bound(a.ptr);
  if (r == res.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  const uint64_t rbytes = vol_.get(r->second)->as<VmmReservationObject>().bytes;
  if (a.ptr - r->first >= rbytes || a.bytes > rbytes - (a.ptr - r->first)) return CUDA_ERROR_INVALID_VALUE;
  // ...over nothing mapped.
  const auto& maps = vol_.of(ObjectKind::VmmMapping);
  if (auto m = maps.lower_bound(a.ptr); m != maps.end() && m->first - a.ptr < a.bytes) return CUDA_ERROR_INVALID_VALUE;
  if (auto m = maps.lower_bound(a.ptr); m != maps.begin()) {
    --m;
    if (a.ptr - m->first < vol_.get(m->second)->as<VmmMappingObject>().bytes) return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult e = api_.cuMemMap(a.ptr, a.bytes, a.offset, av.handle, 0); e != CUDA_SUCCESS) return e;
  ++av.maps;
  VmmMappingObject mv;
  mv.bytes = a.bytes;
  mv.offset = a.offset;
  mv.allocation = alloc->id;
  vol_.add(ObjectKind::VmmMapping, alloc->device, a.ptr, r->second, std::move(mv));
  reply.value = static_cast<uint64_t>(alloc->device);
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmUnmap(const api::VmmRangeArgs& a, api::Empty&, Request&) {
  std::vector<ObjectId> ids;
  if (!vmm_whole_mappings(a.ptr, a.bytes, &ids)) {
    // A range of one of the client's reservations with nothing mapped in it: the driver
    // answers success (seen on the H100, driver 580); any other range is invalid.
    const auto& maps = vol_.of(ObjectKind::VmmMapping);
    auto m = maps.lower_bound(a.ptr);
    const bool none_mapped = a.bytes && (m == maps.end() || m->first >= a.ptr + a.bytes) &&
                             (m == maps.begin() || [&] {
                               const auto prev = std::prev(m);
                               return prev->first + vol_.get(prev->second)->as<VmmMappingObject>().bytes <= a.ptr;
                             }());
    const auto& res = vol_.of(ObjectKind::VmmReservation);
    auto r = res.upper_bound(a.ptr);
    const bool reserved = r != res.begin() && [&] {
      const auto at = std::prev(r);
      const uint64_t rb = vol_.get(at->second)->as<VmmReservationObject>().bytes;
      return a.ptr - at->first <= rb && a.bytes <= rb - (a.ptr - at->first);
    }();
    return none_mapped && reserved ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  CUresult first = CUDA_SUCCESS;
  for (ObjectId id : ids) {
    Object* m = vol_.get(id);
    const ObjectId alloc = m->as<VmmMappingObject>().allocation;
    if (CUresult e = vmm_unmap(*m); e != CUDA_SUCCESS && first == CUDA_SUCCESS) first = e;
    vol_.remove(id);
    if (CUresult e = vmm_drop_if_unused(alloc); e != CUDA_SUCCESS && first == CUDA_SUCCESS) first = e;
  }
  return first;
}

int32_t Session::on_VmmSetAccess(const api::VmmAccessArgs& a, api::Empty&, Request&) {
  // Only the client's own devices (a foreign GPU is not a device it has).
  if (!valid_device(a.device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!valid_access_flags(a.flags)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<ObjectId> ids;
  if (!vmm_whole_mappings(a.ptr, a.bytes, &ids)) return CUDA_ERROR_INVALID_VALUE;
  const CUmemAccessDesc d{{CU_MEM_LOCATION_TYPE_DEVICE, devices_[a.device]}, static_cast<CUmemAccess_flags>(a.flags)};
  if (CUresult e = api_.cuMemSetAccess(a.ptr, a.bytes, &d, 1); e != CUDA_SUCCESS) return e;
  for (ObjectId id : ids) vol_.get(id)->as<VmmMappingObject>().access[a.device] = a.flags;
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmGetAccess(const api::VmmAccessArgs& a, api::VmmValueReply& r, Request&) {
  if (!valid_device(a.device)) return CUDA_ERROR_INVALID_DEVICE;
  const Object* m = vol_.find_range(a.ptr, 1);
  if (!m || m->kind != ObjectKind::VmmMapping) return CUDA_ERROR_INVALID_VALUE;
  const auto& acc = m->as<VmmMappingObject>().access;
  auto it = acc.find(a.device);
  r.value = it == acc.end() ? static_cast<uint32_t>(CU_MEM_ACCESS_FLAGS_PROT_NONE) : it->second;
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmRetainHandle(const api::PtrArgs& a, api::VmmValueReply& r, Request&) {
  const Object* m = vol_.find_range(a.ptr, 1);
  if (!m || m->kind != ObjectKind::VmmMapping) return CUDA_ERROR_INVALID_VALUE;
  Object* alloc = vol_.get(m->as<VmmMappingObject>().allocation);
  if (!alloc) return CUDA_ERROR_INVALID_VALUE;
  ++alloc->as<VmmAllocationObject>().refs;
  r.value = alloc->handle;
  return CUDA_SUCCESS;
}

int32_t Session::on_VmmProperties(const api::VmmHandleArgs& a, api::VmmPropertiesReply& r, Request&) {
  const Object* o = vmm_allocation(a.handle);
  if (!o) return CUDA_ERROR_INVALID_VALUE;
  r.bytes = o->as<VmmAllocationObject>().bytes;
  r.device = o->device;
  return CUDA_SUCCESS;
}

}  // namespace vmcuda::host
