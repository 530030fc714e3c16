// CUDA arrays, texture and surface objects (calls.def, 0x1800): cuArray3DCreate,
// cuMipmappedArrayCreate/GetLevel, cuMemcpy3D[Async] with an array on one side,
// cuTexObjectCreate, cuSurfObjectCreate. Arrays are VOL entries named by handles this side
// makes; their device memory lies outside the arena, so the VM's quota is charged for it here
// (the bytes its texels take, computed from the descriptor). Every region a copy names must
// lie inside its array, and the other side inside the frame, the heap range, one of the
// client's allocations, or another of its arrays.
#include "arrays.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "session.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

uint64_t element_bytes(uint32_t format, uint32_t channels) {
  if (channels != 1 && channels != 2 && channels != 4) return 0;
  switch (static_cast<int>(format)) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return channels;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2ull * channels;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4ull * channels;
  }
  return 0;
}

namespace {
constexpr unsigned kKnownArrayFlags = kArray3DLayered | kArray3DSurfaceLdst | kArray3DCubemap | kArray3DTextureGather;
constexpr uint64_t kMaxArrayDim = 1ull << 20;  // limit on untrusted input: beyond every device's texture limits
uint64_t halve(uint64_t v) { return v > 1 ? v / 2 : v; }
// a * b, false on overflow.
bool mul(uint64_t a, uint64_t b, uint64_t* out) {
  if (b != 0 && a > ~0ull / b) return false;
  *out = a * b;
  return true;
}
}  // namespace

CUDA_ARRAY3D_DESCRIPTOR level_desc(const CUDA_ARRAY3D_DESCRIPTOR& d, uint32_t level) {
  CUDA_ARRAY3D_DESCRIPTOR l = d;
  for (uint32_t i = 0; i < level; ++i) {
    l.Width = halve(l.Width);
    l.Height = halve(l.Height);
    if (!(d.Flags & (kArray3DLayered | kArray3DCubemap))) l.Depth = halve(l.Depth);
  }
  return l;
}

bool array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, uint32_t levels, uint64_t* out) {
  const uint64_t elem = element_bytes(static_cast<uint32_t>(d.Format), d.NumChannels);
  if (!elem) return false;
  uint64_t total = 0;
  for (uint32_t l = 0; l < std::max<uint32_t>(levels, 1); ++l) {
    const CUDA_ARRAY3D_DESCRIPTOR ld = level_desc(d, l);
    uint64_t n;
    if (!mul(ld.Width, std::max<uint64_t>(ld.Height, 1), &n) || !mul(n, std::max<uint64_t>(ld.Depth, 1), &n) ||
        !mul(n, elem, &n) || n > ~0ull - total)
      return false;
    total += n;
  }
  *out = total;
  return true;
}

CUresult copy_array_contents(const DriverApi& api, CUarray array, const CUDA_ARRAY3D_DESCRIPTOR& d, std::byte* host,
                             bool to_array) {
  const uint64_t row = d.Width * element_bytes(static_cast<uint32_t>(d.Format), d.NumChannels);
  CUDA_MEMCPY3D c{};
  c.WidthInBytes = row;
  c.Height = std::max<size_t>(d.Height, 1);
  c.Depth = std::max<size_t>(d.Depth, 1);
  if (to_array) {
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host, c.srcPitch = row, c.srcHeight = c.Height;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = array;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = array;
    c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstPitch = row, c.dstHeight = c.Height;
  }
  return api.cuMemcpy3D_v2(&c);
}

int32_t Session::on_ArrayCreate(const api::ArrayCreateArgs& a, api::HandleReply& r, Request&) {
  const uint64_t elem = element_bytes(a.format, a.channels);
  if (elem == 0) return CUDA_ERROR_INVALID_VALUE;
  if (a.flags & ~kKnownArrayFlags) return CUDA_ERROR_INVALID_VALUE;  // sparse, deferred mapping, ...: not remoted
  if (a.width == 0 || a.width > kMaxArrayDim || a.height > kMaxArrayDim || a.depth > kMaxArrayDim)
    return CUDA_ERROR_INVALID_VALUE;
  if (a.levels > 32) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR desc{a.width, a.height, a.depth, static_cast<int>(a.format), a.channels, a.flags};
  // What the VM's quota pays: every level's texels.
  uint64_t bytes = 0;
  if (!array_bytes(desc, a.levels, &bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (bytes > memory_quota()) return CUDA_ERROR_OUT_OF_MEMORY;
  if (account_ && !account_->charge(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  ArrayObject o;
  o.desc = desc;
  o.levels = a.levels;
  o.charged = bytes;
  const CUresult e = a.levels ? api_.cuMipmappedArrayCreate(&o.mipmap, &desc, a.levels)
                              : api_.cuArray3DCreate_v2(&o.array, &desc);
  if (e != CUDA_SUCCESS) {
    if (account_) account_->refund(bytes);
    return e;
  }
  const ObjectKind kind = a.levels ? ObjectKind::MipmappedArray : ObjectKind::Array;
  r.handle = vol_.next_handle(kind);
  vol_.add(kind, current_, r.handle, vol_.context(current_)->id, std::move(o));
  publish_status();
  return CUDA_SUCCESS;
}

int32_t Session::on_ArrayDestroy(const api::ArrayArgs& a, api::Empty&, Request&) {
  if (a.mipmapped > 1) return guest_fault("ArrayDestroy: unknown kind");
  const ObjectKind kind = a.mipmapped ? ObjectKind::MipmappedArray : ObjectKind::Array;
  Object* o = vol_.find(kind, a.array);
  // A level of a mipmapped array goes with it only.
  if (!o || o->as<ArrayObject>().level >= 0) return CUDA_ERROR_INVALID_VALUE;
  const CUresult e = destroy_entry(kind, a.array, CUDA_ERROR_INVALID_VALUE);
  publish_status();
  return e;
}

int32_t Session::on_MipmappedArrayGetLevel(const api::ArrayLevelArgs& a, api::HandleReply& r, Request&) {
  Object* m = vol_.find(ObjectKind::MipmappedArray, a.mipmapped_array);
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  const ArrayObject& mo = m->as<ArrayObject>();
  if (a.level >= mo.levels) return CUDA_ERROR_INVALID_VALUE;
  for (ObjectId c : m->children)  // asked before: the same handle
    if (const Object* l = vol_.get(c); l && l->kind == ObjectKind::Array && l->as<ArrayObject>().level == int32_t(a.level))
      return r.handle = l->handle, CUDA_SUCCESS;
  ArrayObject lo;
  lo.level = static_cast<int32_t>(a.level);
  lo.desc = level_desc(mo.desc, a.level);
  const CUresult e = on_device(m->device, [&] { return api_.cuMipmappedArrayGetLevel(&lo.array, mo.mipmap, a.level); });
  if (e != CUDA_SUCCESS) return e;
  r.handle = vol_.next_handle(ObjectKind::Array);
  vol_.add(ObjectKind::Array, m->device, r.handle, m->id, std::move(lo));
  return CUDA_SUCCESS;
}

// The array `handle` and whether the region of `a` (at x, y, z) lies inside it.
const Object* Session::array_region(uint64_t handle, uint64_t x, uint64_t y, uint64_t z, const api::ArrayCopyArgs& a) const {
  const Object* o = vol_.find(ObjectKind::Array, handle);
  if (!o) return nullptr;
  const CUDA_ARRAY3D_DESCRIPTOR& d = o->as<ArrayObject>().desc;
  const uint64_t elem = element_bytes(static_cast<uint32_t>(d.Format), d.NumChannels);
  const uint64_t width = d.Width * elem, height = std::max<uint64_t>(d.Height, 1), depth = std::max<uint64_t>(d.Depth, 1);
  if (x > width || a.width > width - x || y > height || a.height > height - y || z > depth || a.depth > depth - z)
    return nullptr;
  if (x % elem || a.width % elem) return nullptr;  // whole elements only
  return o;
}

// Every array copy: the checks, then cuMemcpy3D (in the array's context) or cuMemcpy3DAsync
// on the guest's stream. `host`: the host side's bytes (inline or heap), else the other side
// is device memory or (kArrayCopyOtherArray) an array.
int32_t Session::array_copy(const api::ArrayCopyArgs& a, std::byte* host, uint64_t host_bytes, bool wait) {
  const bool from = a.flags & api::kArrayCopyFromArray;
  const Object* arr = array_region(a.array, a.x, a.y, a.z, a);
  if (!arr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D c{};
  c.WidthInBytes = a.width;
  c.Height = a.height;
  c.Depth = a.depth;
  // The array's side.
  if (from) c.srcXInBytes = a.x, c.srcY = a.y, c.srcZ = a.z;
  else c.dstXInBytes = a.x, c.dstY = a.y, c.dstZ = a.z;
  (from ? c.srcMemoryType : c.dstMemoryType) = CU_MEMORYTYPE_ARRAY;
  (from ? c.srcArray : c.dstArray) = arr->as<ArrayObject>().array;
  // The other side.
  CUmemorytype& type = from ? c.dstMemoryType : c.srcMemoryType;
  if (a.flags & api::kArrayCopyOtherArray) {
    const Object* other = array_region(a.other, a.other_x, a.other_y, a.other_z, a);
    if (!other || other->device != arr->device) return CUDA_ERROR_INVALID_VALUE;
    if (from) c.dstXInBytes = a.other_x, c.dstY = a.other_y, c.dstZ = a.other_z;
    else c.srcXInBytes = a.other_x, c.srcY = a.other_y, c.srcZ = a.other_z;
    type = CU_MEMORYTYPE_ARRAY;
    (from ? c.dstArray : c.srcArray) = other->as<ArrayObject>().array;
  } else {
    if (a.width > a.pitch || (a.depth > 1 && a.height > a.rows)) return guest_fault("ArrayCopy: a pitch or slice height smaller than the region");
    // Bytes from the memory side's start to its region's last byte.
    uint64_t slice, last_row, span;
    if (!mul(a.pitch, a.rows, &slice) || !mul(slice, a.depth - 1, &span) || !mul(a.pitch, a.height - 1, &last_row) ||
        span > ~0ull - last_row || span + last_row > ~0ull - a.width)
      return guest_fault("ArrayCopy: a region whose size overflows");
    span += last_row + a.width;
    (from ? c.dstPitch : c.srcPitch) = a.pitch;
    (from ? c.dstHeight : c.srcHeight) = a.rows;
    if (host) {
      if (span > host_bytes) return guest_fault("ArrayCopy: the host rows do not fit the bytes sent");
      type = CU_MEMORYTYPE_HOST;
      if (from) c.dstHost = host;
      else c.srcHost = host;
    } else {
      if (owner_of(a.other, span) != arr->device) return CUDA_ERROR_INVALID_VALUE;
      type = CU_MEMORYTYPE_DEVICE;
      (from ? c.dstDevice : c.srcDevice) = a.other;
    }
  }
  if (!(a.flags & api::kArrayCopyAsync))
    return on_device(arr->device, [&] { return api_.cuMemcpy3D_v2(&c); });
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
  if (device != arr->device) return CUDA_ERROR_INVALID_VALUE;  // a stream of another device
  return on_device(device, [&] {
    CUresult r = api_.cuMemcpy3DAsync_v2(&c, s);
    return r == CUDA_SUCCESS && wait ? api_.cuStreamSynchronize(s) : r;
  });
}

namespace {
// The packed bytes of a region (width * height * depth), or false when that overflows.
bool packed(const api::ArrayCopyArgs& a, uint64_t* bytes) {
  uint64_t n;
  return mul(a.width, a.height, &n) && mul(n, a.depth, bytes);
}
constexpr uint32_t kKnownCopyFlags =
    api::kHeapCopyWait | api::kArrayCopyFromArray | api::kArrayCopyAsync | api::kArrayCopyOtherArray;
}  // namespace

int32_t Session::on_ArrayCopyToInline(const api::ArrayCopyArgs& a, api::Empty&, Request& req) {
  uint64_t bytes;
  if (a.flags & ~(api::kArrayCopyAsync)) return guest_fault("ArrayCopyToInline: unknown flags");
  if (!packed(a, &bytes) || bytes != req.tail.size())
    return guest_fault("ArrayCopyToInline: a region that does not match the bytes sent");
  if (bytes == 0) return CUDA_SUCCESS;
  api::ArrayCopyArgs p = a;
  p.pitch = a.width, p.rows = a.height;
  // `tail` is the decoder's private copy: the driver stages it before an async copy returns.
  return array_copy(p, const_cast<std::byte*>(req.tail.data()), req.tail.size(), false);
}

int32_t Session::on_ArrayCopyFromInline(const api::ArrayCopyArgs& a, api::Empty&, Request& req) {
  uint64_t bytes;
  if (a.flags & ~(api::kArrayCopyAsync | api::kArrayCopyFromArray) || !(a.flags & api::kArrayCopyFromArray))
    return guest_fault("ArrayCopyFromInline: unknown flags");
  if (!packed(a, &bytes)) return guest_fault("ArrayCopyFromInline: a region whose size overflows");
  if (bytes > req.extra.size()) return guest_fault("ArrayCopyFromInline: a reply area too small for the data", ChannelStatus::kReplyTooSmall);
  if (bytes == 0) return CUDA_SUCCESS;
  api::ArrayCopyArgs p = a;
  p.pitch = a.width, p.rows = a.height;
  const CUresult e = array_copy(p, req.extra.data(), req.extra.size(), true);  // in the reply: waits
  if (e == CUDA_SUCCESS) req.extra_bytes = static_cast<uint32_t>(bytes);
  return e;
}

int32_t Session::on_ArrayCopyHeap(const api::ArrayCopyArgs& a, api::Empty&, Request& req) {
  if (a.flags & ~kKnownCopyFlags || a.flags & api::kArrayCopyOtherArray) return guest_fault("ArrayCopyHeap: unknown flags");
  auto host = req.ctx.heap(a.host);
  if (!host) return guest_fault("ArrayCopyHeap: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  if (a.width == 0 || a.height == 0 || a.depth == 0) return CUDA_SUCCESS;
  return array_copy(a, host->data(), host->size(), a.flags & api::kHeapCopyWait);
}

int32_t Session::on_ArrayCopyDevice(const api::ArrayCopyArgs& a, api::Empty&, Request&) {
  if (a.flags & ~kKnownCopyFlags || a.flags & api::kHeapCopyWait) return guest_fault("ArrayCopyDevice: unknown flags");
  if (a.width == 0 || a.height == 0 || a.depth == 0) return CUDA_SUCCESS;
  return array_copy(a, nullptr, 0, false);
}

// What texture `a` reads and how (the checks of cudaCreateTextureObject's arguments), the
// guest device it is on and, for an array, its VOL entry (`resource`; 0 for device memory).
CUresult Session::texture_descs(const api::TextureCreateArgs& a, CUDA_RESOURCE_DESC* res, CUDA_TEXTURE_DESC* tex,
                                int* device, ObjectId* resource) const {
  *res = {};
  *tex = {};
  *resource = 0;
  switch (a.resource) {
    case api::kTexResourceArray:
    case api::kTexResourceMipmap: {
      const bool mip = a.resource == api::kTexResourceMipmap;
      const Object* o = vol_.find(mip ? ObjectKind::MipmappedArray : ObjectKind::Array, a.handle);
      if (!o) return CUDA_ERROR_INVALID_VALUE;
      *device = o->device;
      *resource = o->id;
      res->resType = mip ? CU_RESOURCE_TYPE_MIPMAPPED_ARRAY : CU_RESOURCE_TYPE_ARRAY;
      if (mip) res->res.mipmap.hMipmappedArray = o->as<ArrayObject>().mipmap;
      else res->res.array.hArray = o->as<ArrayObject>().array;
      break;
    }
    case api::kTexResourceLinear: {
      if (!element_bytes(a.format, a.channels)) return CUDA_ERROR_INVALID_VALUE;
      if ((*device = owner_of(a.handle, a.bytes)) < 0) return CUDA_ERROR_INVALID_VALUE;
      res->resType = CU_RESOURCE_TYPE_LINEAR;
      res->res.linear = {a.handle, static_cast<int>(a.format), a.channels, a.bytes};
      break;
    }
    case api::kTexResourcePitch2D: {
      const uint64_t elem = element_bytes(a.format, a.channels);
      uint64_t row;
      if (!elem || a.width == 0 || a.height == 0 || !mul(a.width, elem, &row) || !owns_2d(a.handle, a.pitch, row, a.height))
        return CUDA_ERROR_INVALID_VALUE;
      if ((*device = owner_of(a.handle, row)) < 0) return CUDA_ERROR_INVALID_VALUE;
      res->resType = CU_RESOURCE_TYPE_PITCH2D;
      res->res.pitch2D.devPtr = a.handle;
      res->res.pitch2D.format = static_cast<int>(a.format);
      res->res.pitch2D.numChannels = a.channels;
      res->res.pitch2D.width = a.width;
      res->res.pitch2D.height = a.height;
      res->res.pitch2D.pitchInBytes = a.pitch;
      break;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  constexpr unsigned kKnownTexFlags = kTrsfReadAsInteger | kTrsfNormalizedCoordinates | kTrsfSrgb |
                                      kTrsfDisableTrilinearOptimization | kTrsfSeamlessCubemap;
  if (a.filter_mode > 1 || a.mipmap_filter_mode > 1 || (a.tex_flags & ~kKnownTexFlags)) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 3; ++i) {
    if (a.address_mode[i] > 3) return CUDA_ERROR_INVALID_VALUE;
    tex->addressMode[i] = static_cast<int>(a.address_mode[i]);
  }
  tex->filterMode = static_cast<int>(a.filter_mode);
  tex->flags = a.tex_flags;
  tex->maxAnisotropy = a.max_anisotropy;
  tex->mipmapFilterMode = static_cast<int>(a.mipmap_filter_mode);
  tex->mipmapLevelBias = a.mipmap_level_bias;
  tex->minMipmapLevelClamp = a.min_mipmap_level_clamp;
  tex->maxMipmapLevelClamp = a.max_mipmap_level_clamp;
  for (int i = 0; i < 4; ++i) tex->borderColor[i] = a.border_color[i];
  return CUDA_SUCCESS;
}

// What surface on array `handle` writes: the array (not a mipmapped one: a surface binds one
// level of it), its device and VOL entry.
CUresult Session::surface_resource(uint64_t handle, CUDA_RESOURCE_DESC* res, int* device, ObjectId* resource) const {
  const Object* o = vol_.find(ObjectKind::Array, handle);
  if (!o) return CUDA_ERROR_INVALID_VALUE;
  *res = {};
  res->resType = CU_RESOURCE_TYPE_ARRAY;
  res->res.array.hArray = o->as<ArrayObject>().array;
  *device = o->device;
  *resource = o->id;
  return CUDA_SUCCESS;
}

int32_t Session::on_TextureCreate(const api::TextureCreateArgs& a, api::HandleReply& r, Request&) {
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  int device = current_;
  ObjectId resource = 0;
  if (CUresult e = texture_descs(a, &res, &tex, &device, &resource); e != CUDA_SUCCESS) return e;
  CUtexObject t = 0;
  if (CUresult e = on_device(device, [&] { return api_.cuTexObjectCreate(&t, &res, &tex, nullptr); }); e != CUDA_SUCCESS)
    return e;
  if (vol_.find(ObjectKind::TexObject, t)) return CUDA_ERROR_INVALID_VALUE;  // the driver reused a live value: cannot be
  vol_.add(ObjectKind::TexObject, device, t, vol_.context(device)->id, TexObject{t, a, resource});
  r.handle = t;
  return CUDA_SUCCESS;
}

// Views read arrays and mipmapped arrays only; the driver checks the rest (levels, layers, format).
int32_t Session::on_TextureCreateView(const api::TextureViewArgs& a, api::HandleReply& r, Request&) {
  if (a.pad != 0) return guest_fault("TextureCreateView: padding not zero");
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  int device = current_;
  ObjectId resource = 0;
  if (CUresult e = texture_descs(a.tex, &res, &tex, &device, &resource); e != CUDA_SUCCESS) return e;
  if (!resource) return CUDA_ERROR_INVALID_VALUE;  // linear or pitch-2D memory: no view
  CUDA_RESOURCE_VIEW_DESC view{};
  view.format = static_cast<int>(a.format);
  view.width = a.width, view.height = a.height, view.depth = a.depth;
  view.firstMipmapLevel = a.first_mipmap_level, view.lastMipmapLevel = a.last_mipmap_level;
  view.firstLayer = a.first_layer, view.lastLayer = a.last_layer;
  CUtexObject t = 0;
  if (CUresult e = on_device(device, [&] { return api_.cuTexObjectCreate(&t, &res, &tex, &view); }); e != CUDA_SUCCESS)
    return e;
  if (vol_.find(ObjectKind::TexObject, t)) return CUDA_ERROR_INVALID_VALUE;
  vol_.add(ObjectKind::TexObject, device, t, vol_.context(device)->id, TexObject{t, a.tex, resource, view});
  r.handle = t;
  return CUDA_SUCCESS;
}

int32_t Session::on_TextureDestroy(const api::ObjectValueArgs& a, api::Empty&, Request&) {
  return destroy_entry(ObjectKind::TexObject, a.value, CUDA_ERROR_INVALID_VALUE);
}

int32_t Session::on_SurfaceCreate(const api::ArrayArgs& a, api::HandleReply& r, Request&) {
  if (a.mipmapped) return CUDA_ERROR_INVALID_VALUE;  // a surface binds one array (a level of a mipmapped one)
  CUDA_RESOURCE_DESC res;
  int device = 0;
  ObjectId resource = 0;
  if (CUresult e = surface_resource(a.array, &res, &device, &resource); e != CUDA_SUCCESS) return e;
  CUsurfObject s = 0;
  if (CUresult e = on_device(device, [&] { return api_.cuSurfObjectCreate(&s, &res); }); e != CUDA_SUCCESS) return e;
  if (vol_.find(ObjectKind::SurfObject, s)) return CUDA_ERROR_INVALID_VALUE;
  vol_.add(ObjectKind::SurfObject, device, s, vol_.context(device)->id, SurfObject{s, resource});
  r.handle = s;
  return CUDA_SUCCESS;
}

int32_t Session::on_SurfaceDestroy(const api::ObjectValueArgs& a, api::Empty&, Request&) {
  return destroy_entry(ObjectKind::SurfObject, a.value, CUDA_ERROR_INVALID_VALUE);
}

// ---- Texture and surface objects across a suspend (docs/snapshots.md, "Texture and surface
// objects"). Kernels are given the driver's value and may keep it anywhere, so a resume must
// give each object its old value, and no driver call takes one. What the driver does (driver
// 580 on the H100, bench/texobj_value_probe.cu): values are small integers per context, from
// 1, textures and surfaces from one counter, the lowest free one first, and they repeat in a
// fresh context. So a resume creates a context's objects in ascending order of value; a
// value below the wanted one (an object the program had destroyed) is kept as a placeholder
// until all are made, then destroyed. Every value is checked: a driver that hands out values
// otherwise fails the resume, never gives a program another object's value.

namespace {
std::string object_name(ObjectKind k, uint64_t value) {
  return std::string(k == ObjectKind::TexObject ? "texture object " : "surface object ") + std::to_string(value);
}
}  // namespace

std::string Session::texture_objects_block_suspend() const {
  for (ObjectKind k : {ObjectKind::TexObject, ObjectKind::SurfObject})
    for (const auto& [value, id] : vol_.of(k)) {
      const Object* o = vol_.get(id);
      // What it reads must still be there to make it again.
      CUDA_RESOURCE_DESC res;
      CUDA_TEXTURE_DESC tex;
      int device = -1;
      ObjectId resource = 0, was = 0;
      CUresult e;
      if (k == ObjectKind::TexObject) {
        was = o->as<TexObject>().resource;
        e = texture_descs(o->as<TexObject>().spec, &res, &tex, &device, &resource);
      } else {
        was = o->as<SurfObject>().resource;
        const Object* a = vol_.get(was);
        e = a ? surface_resource(a->handle, &res, &device, &resource) : CUDA_ERROR_INVALID_VALUE;
      }
      if (e != CUDA_SUCCESS || resource != was || device != o->device)
        return "the program holds " + object_name(k, value) +
               ", whose CUDA array or device memory it has freed, so a resume could not make it again; nothing was "
               "changed and the program runs on (suspend it once it has destroyed that object)";
      if (value == 0 || value > kMaxTextureObjectValue)
        return "the program holds " + object_name(k, value) + ", a value beyond those a resume can give back (" +
               std::to_string(kMaxTextureObjectValue) + "); nothing was changed and the program runs on";
    }
  return {};
}

bool Session::recreate_texture_objects(std::vector<SavedTextureObject> saved, const std::map<uint64_t, ObjectId>& new_id,
                                       std::string* why) {
  std::sort(saved.begin(), saved.end(),
            [](const auto& a, const auto& b) { return std::tie(a.device, a.value) < std::tie(b.device, b.value); });
  struct Placeholder {
    ObjectKind kind;
    int device;
    uint64_t value;
  };
  std::vector<Placeholder> placeholders;
  auto destroy = [&](ObjectKind k, int device, uint64_t v) {
    on_device(device, [&] { return k == ObjectKind::TexObject ? api_.cuTexObjectDestroy(v) : api_.cuSurfObjectDestroy(v); });
  };
  // The placeholders go whichever way this ends; what was made goes with the VOL on failure.
  struct Drop {
    std::function<void()> f;
    ~Drop() { f(); }
  } drop{[&] {
    for (const Placeholder& p : placeholders) destroy(p.kind, p.device, p.value);
  }};
  for (size_t i = 0; i < saved.size(); ++i) {
    const SavedTextureObject& s = saved[i];
    const bool is_tex = s.kind == ObjectKind::TexObject;
    const std::string name = object_name(s.kind, s.value);
    if (s.value == 0 || s.value > kMaxTextureObjectValue)
      return *why = name + ": a value a resume cannot give back", false;
    if ((i && saved[i - 1].device == s.device && saved[i - 1].value == s.value) || vol_.find(s.kind, s.value))
      return *why = "two texture or surface objects with value " + std::to_string(s.value), false;
    // Its resource: the array recreated for the saved one (behind the same handle), or the
    // same device memory.
    const ObjectId saved_resource = is_tex ? std::get<TexObject>(s.data).resource : std::get<SurfObject>(s.data).resource;
    ObjectId res_id = 0;
    if (saved_resource) {
      auto it = new_id.find(saved_resource);
      if (it == new_id.end() || !vol_.get(it->second)) return *why = name + ": its CUDA array is not in the state", false;
      res_id = it->second;
    }
    api::TextureCreateArgs spec = is_tex ? std::get<TexObject>(s.data).spec : api::TextureCreateArgs{};
    const std::optional<CUDA_RESOURCE_VIEW_DESC> view = is_tex ? std::get<TexObject>(s.data).view : std::nullopt;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    int device = -1;
    ObjectId found = 0;
    CUresult e = CUDA_ERROR_INVALID_VALUE;
    if (is_tex) {
      e = texture_descs(spec, &res, &tex, &device, &found);
    } else if (res_id) {
      e = surface_resource(vol_.get(res_id)->handle, &res, &device, &found);
    }
    if (e != CUDA_SUCCESS)
      return *why = name + ": its description is not one vmcuda takes, or the device memory it reads is not the "
                           "client's",
             false;
    if (found != res_id || device != s.device)
      return *why = name + ": what it reads is not what the state names, or on another device", false;
    // Made until the driver hands out its value; values below it are gaps (objects the
    // program destroyed), held as placeholders meanwhile.
    for (;;) {
      uint64_t v = 0;
      e = on_device(device, [&] {
        if (is_tex) {
          CUtexObject t = 0;
          const CUresult r = api_.cuTexObjectCreate(&t, &res, &tex, view ? &*view : nullptr);
          v = t;
          return r;
        }
        CUsurfObject t = 0;
        const CUresult r = api_.cuSurfObjectCreate(&t, &res);
        v = t;
        return r;
      });
      if (e != CUDA_SUCCESS) return *why = "creating " + name + " again failed: " + describe(api_, e), false;
      if (v == s.value) break;
      if (v < s.value && v != 0) {
        placeholders.push_back({s.kind, device, v});
        continue;
      }
      destroy(s.kind, device, v);
      return *why = name + " came back as " + std::to_string(v) +
                    ": this driver does not hand out texture and surface object values as vmcuda expects, so the "
                    "program's copies of the value cannot be kept (docs/snapshots.md)",
             false;
    }
    vol_.add(s.kind, device, s.value, vol_.context(device)->id,
             is_tex ? ObjectData(TexObject{s.value, spec, res_id, view}) : ObjectData(SurfObject{s.value, res_id}));
  }
  return true;
}

}  // namespace vmcuda::host
