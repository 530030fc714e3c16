#include "object_list.h"

#include <algorithm>

namespace vmcuda::host {

std::string_view kind_name(ObjectKind k) {
  switch (k) {
    case ObjectKind::Context: return "context";
    case ObjectKind::Allocation: return "allocation";
    case ObjectKind::Module: return "module";
    case ObjectKind::Function: return "function";
    case ObjectKind::Global: return "global";
    case ObjectKind::ManagedVar: return "managed variable";
    case ObjectKind::Stream: return "stream";
    case ObjectKind::Event: return "event";
    case ObjectKind::HostRegistration: return "host registration";
    case ObjectKind::Limit: return "limit";
    case ObjectKind::CacheConfig: return "cache configuration";
    case ObjectKind::PeerAccess: return "peer access";
    case ObjectKind::Graph: return "graph";
    case ObjectKind::GraphNode: return "graph node";
    case ObjectKind::GraphExec: return "executable graph";
    case ObjectKind::Array: return "array";
    case ObjectKind::MipmappedArray: return "mipmapped array";
    case ObjectKind::TexObject: return "texture object";
    case ObjectKind::SurfObject: return "surface object";
    case ObjectKind::CublasHandle: return "cuBLAS handle";
    case ObjectKind::CufftPlan: return "cuFFT plan";
    case ObjectKind::CurandGenerator: return "cuRAND generator";
    case ObjectKind::VmmReservation: return "virtual address reservation";
    case ObjectKind::VmmAllocation: return "physical allocation";
    case ObjectKind::VmmMapping: return "virtual memory mapping";
    case ObjectKind::IpcMemory: return "IPC memory";
    case ObjectKind::CublasLt: return "cuBLASLt handle or descriptor";
    case ObjectKind::Cudnn: return "cuDNN handle or descriptor";
    case ObjectKind::Cusparse: return "cuSPARSE handle or descriptor";
    case ObjectKind::Cusolver: return "cuSOLVER handle or parameters";
    case ObjectKind::PerThreadStream: return "per-thread stream";
    case ObjectKind::NullStream: return "NULL stream";
  }
  return "unknown";
}

Object& ObjectList::add(ObjectKind kind, int device, uint64_t handle, ObjectId parent, ObjectData data) {
  const ObjectId id = ++last_id_;
  Object& o = objects_[id];
  o.id = id;
  o.kind = kind;
  o.device = device;
  o.handle = handle;
  o.parent = parent;
  o.data = std::move(data);
  index_[static_cast<unsigned>(kind)][handle] = id;
  if (Object* p = get(parent)) p->children.push_back(id);
  return o;
}

void ObjectList::remove(ObjectId id) {
  Object* o = get(id);
  if (!o) return;
  for (ObjectId c : std::vector<ObjectId>(o->children)) remove(c);
  o = get(id);
  if (Object* p = get(o->parent)) std::erase(p->children, id);
  auto& idx = index_[static_cast<unsigned>(o->kind)];
  if (auto it = idx.find(o->handle); it != idx.end() && it->second == id) idx.erase(it);
  objects_.erase(id);
}

void ObjectList::clear() {
  objects_.clear();
  for (auto& idx : index_) idx.clear();
  for (auto& h : last_handle_) h = 0;
}

Object* ObjectList::get(ObjectId id) {
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : &it->second;
}
const Object* ObjectList::get(ObjectId id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : &it->second;
}

Object* ObjectList::find(ObjectKind kind, uint64_t handle) {
  auto& idx = index_[static_cast<unsigned>(kind)];
  auto it = idx.find(handle);
  return it == idx.end() ? nullptr : get(it->second);
}
const Object* ObjectList::find(ObjectKind kind, uint64_t handle) const {
  auto& idx = index_[static_cast<unsigned>(kind)];
  auto it = idx.find(handle);
  return it == idx.end() ? nullptr : get(it->second);
}

const Object* ObjectList::find_range(uint64_t ptr, uint64_t bytes) const {
  for (ObjectKind kind : {ObjectKind::Allocation, ObjectKind::Global, ObjectKind::IpcMemory}) {
    const auto& idx = index_[static_cast<unsigned>(kind)];
    auto it = idx.upper_bound(ptr);
    if (it == idx.begin()) continue;
    --it;
    const Object* o = get(it->second);
    const uint64_t size = kind == ObjectKind::Allocation ? o->as<AllocationObject>().bytes
                          : kind == ObjectKind::Global   ? o->as<GlobalObject>().bytes
                                                         : o->as<IpcMemoryObject>().bytes;
    const uint64_t off = ptr - it->first;
    if (off <= size && bytes <= size - off) return o;
  }
  const auto& maps = index_[static_cast<unsigned>(ObjectKind::VmmMapping)];
  auto it = maps.upper_bound(ptr);
  if (it == maps.begin()) return nullptr;
  --it;
  const Object* first = get(it->second);
  uint64_t end = it->first + first->as<VmmMappingObject>().bytes;  // of the contiguous run so far
  if (ptr >= end) return nullptr;
  // Bounded by the mappings there are: each step needs a new one starting at `end`.
  while (bytes > end - ptr) {
    ++it;
    if (it == maps.end() || it->first != end) return nullptr;
    const Object* next = get(it->second);
    if (next->device != first->device) return nullptr;
    end += next->as<VmmMappingObject>().bytes;
  }
  return first;
}

void ObjectList::walk_down(Object& o, const std::function<void(Object&)>& f) {
  const ObjectId id = o.id;
  f(o);
  Object* self = get(id);
  if (!self) return;
  for (ObjectId c : std::vector<ObjectId>(self->children))
    if (Object* child = get(c)) walk_down(*child, f);
}

void ObjectList::walk_up(Object& o, const std::function<void(Object&)>& f) {
  std::vector<ObjectId> children(o.children);
  for (auto it = children.rbegin(); it != children.rend(); ++it)
    if (Object* child = get(*it)) walk_up(*child, f);
  if (Object* self = get(o.id)) f(*self);
}

void ObjectList::walk_parents_first(const std::function<void(Object&)>& f) {
  std::vector<ObjectId> roots;
  for (auto& [id, o] : objects_)
    if (o.parent == 0) roots.push_back(id);
  for (ObjectId r : roots)
    if (Object* o = get(r)) walk_down(*o, f);
}

void ObjectList::walk_children_first(const std::function<void(Object&)>& f, ObjectId root) {
  if (root) {
    if (Object* o = get(root)) walk_up(*o, f);
    return;
  }
  std::vector<ObjectId> roots;
  for (auto& [id, o] : objects_)
    if (o.parent == 0) roots.push_back(id);
  for (auto it = roots.rbegin(); it != roots.rend(); ++it)
    if (Object* o = get(*it)) walk_up(*o, f);
}

}  // namespace vmcuda::host
