// arrays and textures area: CUDA arrays (cudaMallocArray, cudaMalloc3DArray, layered and
// cubemap ones), mipmapped arrays, copies to and from them (cudaMemcpy2DToArray and the rest,
// cudaMemcpy3D naming an array: memory_3d.cc calls copy_3d_array), texture and surface
// objects. The host makes the arrays (calls.def 0x1800) and names them by handles, which are
// the cudaArray_t / cudaMipmappedArray_t values the app sees; texture and surface objects are
// the host driver's own values, since kernels on the real GPU receive them.
//
// This process keeps what it made (descriptor, extent, flags; a texture's descriptors), so the
// queries are local and every copy is checked against its array before it is sent. The host
// side of a copy moves as memory_2d.cc moves it: pinned memory straight from the heap, small
// pageable regions packed into the frame (or the reply), larger ones through heap chunks.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <vector>

#include "arrays.h"
#include "entry.h"
#include "host_pointers.h"
#include "log.h"
#include "memory_2d.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

// CUarray_format values (cuda.h).
constexpr uint32_t kU8 = 0x01, kU16 = 0x02, kU32 = 0x03, kS8 = 0x08, kS16 = 0x09, kS32 = 0x0a, kHalf = 0x10,
                   kFloat = 0x20;

struct ArrayInfo {
  cudaChannelFormatDesc desc{};
  cudaExtent extent{};  // as the descriptor holds it: height 0 for 1D, depth 0 unless 3D/layered/cubemap
  unsigned flags = 0;
  uint64_t elem = 0;    // bytes per element
  bool level = false;   // a mipmapped array's level (freed with it)
  int device = 0;       // where it lives (cudaDeviceReset frees it)
};
struct MipmapInfo {
  ArrayInfo base;
  unsigned levels = 0;
  std::map<unsigned, uint64_t> level_handles;
};

struct Registry {
  std::mutex mu;
  std::map<uint64_t, ArrayInfo> arrays;
  std::map<uint64_t, MipmapInfo> mipmaps;
  struct Texture {
    cudaResourceDesc res;
    cudaTextureDesc tex;
    int device;
    std::optional<cudaResourceViewDesc> view;  // made through a resource view
  };
  std::map<uint64_t, Texture> textures;
  std::map<uint64_t, std::pair<cudaResourceDesc, int>> surfaces;  // and its device
  // Arrays freed (host handles are never reused): a second free answers as NVIDIA's does.
  std::set<uint64_t> freed_arrays;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: atexit order
  return *r;
}

uint64_t handle_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The driver's format and channel count of a channel descriptor: 1, 2 or 4 channels of one
// size (x; x, y; x, y, z, w). cudaErrorInvalidChannelDescriptor otherwise.
cudaError_t format_of(const cudaChannelFormatDesc& d, uint32_t* format, uint32_t* channels, uint64_t* elem) {
  const int bits = d.x;
  if (d.x <= 0 || d.y < 0 || d.z < 0 || d.w < 0) return cudaErrorInvalidChannelDescriptor;
  if (d.y == 0 && d.z == 0 && d.w == 0) *channels = 1;
  else if (d.y == bits && d.z == 0 && d.w == 0) *channels = 2;
  else if (d.y == bits && d.z == bits && d.w == bits) *channels = 4;
  else return cudaErrorInvalidChannelDescriptor;
  switch (d.f) {
    case cudaChannelFormatKindSigned:
      *format = bits == 8 ? kS8 : bits == 16 ? kS16 : bits == 32 ? kS32 : 0;
      break;
    case cudaChannelFormatKindUnsigned:
      *format = bits == 8 ? kU8 : bits == 16 ? kU16 : bits == 32 ? kU32 : 0;
      break;
    case cudaChannelFormatKindFloat:
      *format = bits == 16 ? kHalf : bits == 32 ? kFloat : 0;
      break;
    case cudaChannelFormatKindNone:
      return cudaErrorInvalidChannelDescriptor;
    default:
      return cudaErrorNotSupported;  // NV12, normalized and block-compressed formats: not remoted
  }
  if (*format == 0) return cudaErrorInvalidChannelDescriptor;
  *elem = static_cast<uint64_t>(bits / 8) * *channels;
  return cudaSuccess;
}

void warn_once(std::atomic<bool>& said, const char* what) {
  if (!said.exchange(true)) VMCUDA_LOG(kWarn, "arrays", "%s", what);
}

// Makes an array or mipmapped array on the host. `levels` 0: an array.
cudaError_t create(const cudaChannelFormatDesc* desc, cudaExtent e, unsigned flags, unsigned levels, uint64_t* handle,
                   ArrayInfo* info) {
  cudaError_t err;
  Remote* r = device_call(&err);
  if (!r) return err;
  if (!desc) return record(cudaErrorInvalidValue);
  uint32_t format = 0, channels = 0;
  uint64_t elem = 0;
  if (cudaError_t f = format_of(*desc, &format, &channels, &elem)) return record(f);
  if (flags & (cudaArraySparse | cudaArrayDeferredMapping)) {
    static std::atomic<bool> said{false};
    warn_once(said, "sparse and deferred-mapping CUDA arrays are not supported; they return cudaErrorNotSupported (801)");
    return record(cudaErrorNotSupported);
  }
  auto lock = r->lock();
  auto res = r->call<api::Call::ArrayCreate>({e.width, e.height, e.depth, format, channels, flags, levels});
  if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
  *handle = res.reply.handle;
  *info = ArrayInfo{*desc, e, flags, elem, false, Remote::thread_device()};
  return cudaSuccess;
}

bool valid_kind(cudaMemcpyKind k) { return k >= cudaMemcpyHostToHost && k <= cudaMemcpyDefault; }

// ---- copies

// The array side of a copy.
struct ArraySide {
  uint64_t handle;
  ArrayInfo info;
  uint64_t x, y, z;  // x in bytes
};

// The array `a` (a cudaArray_t), or nothing.
std::optional<ArrayInfo> find_array(const void* a) {
  auto& reg = registry();
  std::lock_guard l(reg.mu);
  auto it = reg.arrays.find(handle_of(a));
  if (it == reg.arrays.end()) return std::nullopt;
  return it->second;
}

// Whether a region of width bytes x height x depth at (x, y, z) lies in the array.
bool inside(const ArraySide& s, uint64_t w, uint64_t h, uint64_t d) {
  const uint64_t W = s.info.extent.width * s.info.elem, H = std::max<uint64_t>(s.info.extent.height, 1),
                 D = std::max<uint64_t>(s.info.extent.depth, 1);
  return s.x <= W && w <= W - s.x && s.y <= H && h <= H - s.y && s.z <= D && d <= D - s.z;
}

// A region of memory: `depth` slices of `height` rows of `width` bytes, rows `pitch` apart,
// slices `rows` rows apart.
struct MemSide {
  std::byte* ptr;
  uint64_t pitch, rows;
};

bool span_3d(const MemSide& m, uint64_t w, uint64_t h, uint64_t d, uint64_t* span) {
  uint64_t slice;
  if (m.rows != 0 && m.pitch > ~0ull / m.rows) return false;
  slice = m.pitch * m.rows;
  if (d - 1 != 0 && slice != 0 && d - 1 > ~0ull / slice) return false;
  uint64_t s2;
  if (!span_of(m.pitch, w, h, &s2)) return false;
  const uint64_t lz = (d - 1) * slice;
  if (lz > ~0ull - s2) return false;
  *span = lz + s2;
  return true;
}

// Packs slice rows [y0, y0 + rows) of slice z of `m` into `out`, or back.
void pack_rows(std::byte* out, const MemSide& m, uint64_t x0, uint64_t w, uint64_t z, uint64_t y0, uint64_t rows) {
  for (uint64_t y = 0; y < rows; ++y) std::memcpy(out + y * w, m.ptr + (z * m.rows + y0 + y) * m.pitch + x0, w);
}
void unpack_rows(const MemSide& m, const std::byte* in, uint64_t x0, uint64_t w, uint64_t z, uint64_t y0, uint64_t rows) {
  for (uint64_t y = 0; y < rows; ++y) std::memcpy(m.ptr + (z * m.rows + y0 + y) * m.pitch + x0, in + y * w, w);
}

api::ArrayCopyArgs args_of(const ArraySide& a, uint64_t w, uint64_t h, uint64_t d, bool from,
                           std::optional<uint64_t> stream) {
  api::ArrayCopyArgs c{};
  c.array = a.handle;
  c.x = a.x, c.y = a.y, c.z = a.z;
  c.width = w, c.height = h, c.depth = d;
  c.flags = (from ? api::kArrayCopyFromArray : 0) | (stream ? api::kArrayCopyAsync : 0);
  c.stream = stream.value_or(0);
  return c;
}

// Host memory <-> array through staging: one piece of at most a chunk at a time (whole rows,
// or parts of a row when one row is larger than a chunk).
cudaError_t staged(Remote& r, const ArraySide& a, const MemSide& m, uint64_t w, uint64_t h, uint64_t d, bool from,
                   std::optional<uint64_t> stream) {
  auto chunk = staging_chunk(r, w * h);
  if (!chunk) return cudaErrorMemoryAllocation;
  const uint64_t elem = a.info.elem;
  const uint64_t piece = std::max<uint64_t>(elem, std::min<uint64_t>(w, chunk->bytes / elem * elem));  // bytes of a row at once
  const uint64_t rows_per = std::max<uint64_t>(1, chunk->bytes / w);
  cudaError_t result = cudaSuccess;
  for (uint64_t z = 0; z < d && result == cudaSuccess; ++z)
    for (uint64_t y = 0; y < h && result == cudaSuccess; y += (piece < w ? 1 : rows_per))
      for (uint64_t x = 0; x < w && result == cudaSuccess; x += piece) {
        const uint64_t pw = std::min(piece, w - x), rows = piece < w ? 1 : std::min(rows_per, h - y);
        ArraySide part = a;
        part.x += x, part.y += y, part.z += z;
        api::ArrayCopyArgs c = args_of(part, pw, rows, 1, from, stream);
        c.host = chunk->ref(0, pw * rows);
        c.pitch = pw, c.rows = rows;
        if (stream) c.flags |= api::kHeapCopyWait;  // the chunk is reused at once
        if (!from) pack_rows(chunk->data, m, x, pw, z, y, rows);
        result = static_cast<cudaError_t>(r.call<api::Call::ArrayCopyHeap>(c).status);
        if (from && result == cudaSuccess) unpack_rows(m, chunk->data, x, pw, z, y, rows);
      }
  r.slot().heap().free(chunk->offset);
  return result;
}

}  // namespace

cudaError_t copy_array(const ArrayEnd& array_end, const MemEnd& mem, uint64_t w, uint64_t h, uint64_t d, bool from,
                       cudaMemcpyKind kind, std::optional<uint64_t> stream) {
  cudaError_t err;
  Remote* r = Remote::get(&err);
  if (!r) return err;
  auto info = find_array(array_end.array);
  if (!info) return cudaErrorInvalidResourceHandle;
  if (!valid_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  const ArraySide a{handle_of(array_end.array), *info, array_end.x, array_end.y, array_end.z};
  if (w == 0 || h == 0 || d == 0) return cudaSuccess;
  if (!inside(a, w, h, d) || a.x % a.info.elem || w % a.info.elem) return cudaErrorInvalidValue;
  // Array to array.
  if (mem.other_array) {
    auto oi = find_array(mem.other_array);
    if (!oi) return cudaErrorInvalidResourceHandle;
    const ArraySide o{handle_of(mem.other_array), *oi, mem.x, mem.y, mem.z};
    if (!inside(o, w, h, d) || o.x % o.info.elem) return cudaErrorInvalidValue;
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    api::ArrayCopyArgs c = args_of(a, w, h, d, from, stream);
    c.flags |= api::kArrayCopyOtherArray;
    c.other = o.handle;
    c.other_x = o.x, c.other_y = o.y, c.other_z = o.z;
    auto lock = r->lock();
    return r->enqueue<api::Call::ArrayCopyDevice>(c);
  }
  const MemSide m{static_cast<std::byte*>(mem.ptr), mem.pitch, mem.rows};
  if (!m.ptr) return cudaErrorInvalidValue;
  if (w > m.pitch || (d > 1 && h > m.rows)) return cudaErrorInvalidPitchValue;
  uint64_t span;
  if (!span_3d(m, w, h, d, &span)) return cudaErrorInvalidValue;
  const bool device = is_device(m.ptr, span);
  // The direction must agree with where the memory is (cudaMemcpyDefault: wherever it is).
  const bool says_device = from ? kind == cudaMemcpyDeviceToDevice : kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyHostToHost) return cudaErrorInvalidMemcpyDirection;
  if (from ? kind == cudaMemcpyHostToDevice : kind == cudaMemcpyDeviceToHost) return cudaErrorInvalidMemcpyDirection;
  if (says_device && !device) return cudaErrorInvalidValue;
  auto lock = r->lock();
  api::ArrayCopyArgs c = args_of(a, w, h, d, from, stream);
  if (device) {  // wherever the kind says it is (unified addressing, as CUDA)
    c.other = reinterpret_cast<uint64_t>(m.ptr);
    c.pitch = m.pitch, c.rows = m.rows;
    return r->enqueue<api::Call::ArrayCopyDevice>(c);
  }
  // Host memory: pinned, straight from the heap (async: queued; the app keeps it until the
  // stream is synchronized, as with CUDA).
  if (auto ref = pinned_range(m.ptr, span)) {
    c.host = *ref;
    c.pitch = m.pitch, c.rows = m.rows;
    if (stream) return r->enqueue<api::Call::ArrayCopyHeap>(c);
    return static_cast<cudaError_t>(r->call<api::Call::ArrayCopyHeap>(c).status);
  }
  const uint64_t packed = w * h * d;  // <= span
  if (!from && packed <= inline_limit(*r, false)) {
    thread_local std::vector<std::byte> buf;
    buf.resize(packed);
    for (uint64_t z = 0; z < d; ++z) pack_rows(buf.data() + z * w * h, m, 0, w, z, 0, h);
    return r->enqueue<api::Call::ArrayCopyToInline>(c, buf);
  }
  if (from && packed <= inline_limit(*r, true)) {
    auto res = r->call<api::Call::ArrayCopyFromInline>(c, {}, static_cast<uint32_t>(packed));
    if (res.status != 0) return static_cast<cudaError_t>(res.status);
    if (res.extra.size() < packed) return cudaErrorUnknown;  // a host bug
    for (uint64_t z = 0; z < d; ++z) unpack_rows(m, res.extra.data() + z * w * h, 0, w, z, 0, h);
    return cudaSuccess;
  }
  // Round trips from here: an error of a queued call is this call's answer.
  const cudaError_t earlier = r->flush();
  const cudaError_t e = staged(*r, a, m, w, h, d, from, stream);
  return earlier != cudaSuccess ? earlier : e;
}

void forget_arrays(int device) {
  auto& reg = registry();
  std::lock_guard l(reg.mu);
  std::erase_if(reg.arrays, [device](const auto& kv) { return kv.second.device == device; });
  std::erase_if(reg.mipmaps, [device](const auto& kv) { return kv.second.base.device == device; });
  std::erase_if(reg.textures, [device](const auto& kv) { return kv.second.device == device; });
  std::erase_if(reg.surfaces, [device](const auto& kv) { return kv.second.second == device; });
}

uint64_t array_element_bytes(const void* a) {
  auto info = find_array(a);
  return info ? info->elem : 0;
}

}  // namespace vmcuda::guest

using vmcuda::guest::record;
namespace g = vmcuda::guest;

// ---------------------------------------------------------------- device query

// The widest 1D texture of linear memory with this element format: the host driver's answer
// (it depends on the element size and the GPU).
cudaError_t cudaDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements, const struct cudaChannelFormatDesc* fmtDesc,
                                                 int device) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (!maxWidthInElements || !fmtDesc) return record(cudaErrorInvalidValue);
  if (device < 0 || static_cast<size_t>(device) >= r->devices().size()) return record(cudaErrorInvalidDevice);
  uint32_t format = 0, channels = 0;
  uint64_t elem = 0;
  if (cudaError_t e = g::format_of(*fmtDesc, &format, &channels, &elem)) return record(e);
  auto lock = r->lock();
  const auto res = r->call<vmcuda::api::Call::Texture1DLinearMaxWidth>({device, format, channels, 0});
  if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
  *maxWidthInElements = res.reply.width;
  return cudaSuccess;
}

// ---------------------------------------------------------------- arrays

cudaError_t cudaMallocArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc, size_t width, size_t height,
                            unsigned int flags) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!array) return record(cudaErrorInvalidValue);
  // A 1D or 2D array: no layers, no cubemap (cudaMalloc3DArray's). Bits CUDA does not
  // define are ignored, as NVIDIA's 13.0 runtime does (0x100 succeeds on the H100).
  if (flags & (cudaArrayLayered | cudaArrayCubemap)) return record(cudaErrorInvalidValue);
  flags &= cudaArraySurfaceLoadStore | cudaArrayTextureGather | cudaArraySparse | cudaArrayDeferredMapping;
  if (width == 0) return record(cudaErrorInvalidValue);
  uint64_t h;
  g::ArrayInfo info;
  if (cudaError_t e = g::create(desc, cudaExtent{width, height, 0}, flags, 0, &h, &info)) return e;
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  reg.arrays[h] = info;
  *array = reinterpret_cast<cudaArray_t>(h);
  return cudaSuccess;
}

cudaError_t cudaMalloc3DArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc, struct cudaExtent extent,
                              unsigned int flags) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!array) return record(cudaErrorInvalidValue);
  if (flags & ~(cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayCubemap | cudaArrayTextureGather |
                cudaArraySparse | cudaArrayDeferredMapping))
    return record(cudaErrorInvalidValue);
  if (extent.width == 0) return record(cudaErrorInvalidValue);
  uint64_t h;
  g::ArrayInfo info;
  if (cudaError_t e = g::create(desc, extent, flags, 0, &h, &info)) return e;
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  reg.arrays[h] = info;
  *array = reinterpret_cast<cudaArray_t>(h);
  return cudaSuccess;
}

cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* mipmappedArray, const struct cudaChannelFormatDesc* desc,
                                     struct cudaExtent extent, unsigned int numLevels, unsigned int flags) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!mipmappedArray || extent.width == 0) return record(cudaErrorInvalidValue);
  if (flags & ~(cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayCubemap | cudaArrayTextureGather |
                cudaArraySparse | cudaArrayDeferredMapping))
    return record(cudaErrorInvalidValue);
  // Clamped to [1, 1 + floor(log2(max(width, height, depth)))], as documented.
  const bool layers = flags & (cudaArrayLayered | cudaArrayCubemap);
  uint64_t largest = std::max<uint64_t>(extent.width, extent.height);
  if (!layers) largest = std::max<uint64_t>(largest, extent.depth);
  unsigned most = 1;
  while (largest >>= 1) ++most;
  const unsigned levels = std::clamp(numLevels, 1u, most);
  uint64_t h;
  g::ArrayInfo info;
  if (cudaError_t e = g::create(desc, extent, flags, levels, &h, &info)) return e;
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  reg.mipmaps[h] = g::MipmapInfo{info, levels, {}};
  *mipmappedArray = reinterpret_cast<cudaMipmappedArray_t>(h);
  return cudaSuccess;
}

cudaError_t cudaGetMipmappedArrayLevel(cudaArray_t* levelArray, cudaMipmappedArray_const_t mipmappedArray,
                                       unsigned int level) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (!levelArray) return record(cudaErrorInvalidValue);
  auto& reg = g::registry();
  const uint64_t mh = g::handle_of(mipmappedArray);
  g::ArrayInfo base;
  {
    std::lock_guard l(reg.mu);
    auto it = reg.mipmaps.find(mh);
    if (it == reg.mipmaps.end()) return record(cudaErrorInvalidResourceHandle);
    if (level >= it->second.levels) return record(cudaErrorInvalidValue);
    if (auto lv = it->second.level_handles.find(level); lv != it->second.level_handles.end())
      return *levelArray = reinterpret_cast<cudaArray_t>(lv->second), cudaSuccess;
    base = it->second.base;
  }
  auto lock = r->lock();
  auto res = r->call<vmcuda::api::Call::MipmappedArrayGetLevel>({mh, level, 0});
  if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
  // Each level halves the sizes (never below 1); layers stay.
  g::ArrayInfo li = base;
  li.level = true;
  const bool layers = base.flags & (cudaArrayLayered | cudaArrayCubemap);
  for (unsigned i = 0; i < level; ++i) {
    li.extent.width = std::max<size_t>(1, li.extent.width / 2);
    if (li.extent.height) li.extent.height = std::max<size_t>(1, li.extent.height / 2);
    if (li.extent.depth && !layers) li.extent.depth = std::max<size_t>(1, li.extent.depth / 2);
  }
  std::lock_guard l(reg.mu);
  reg.arrays[res.reply.handle] = li;
  if (auto it = reg.mipmaps.find(mh); it != reg.mipmaps.end()) it->second.level_handles[level] = res.reply.handle;
  *levelArray = reinterpret_cast<cudaArray_t>(res.reply.handle);
  return cudaSuccess;
}

namespace {
cudaError_t free_array(uint64_t h, bool mipmapped) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (h == 0) return cudaSuccess;
  auto& reg = g::registry();
  {
    std::lock_guard l(reg.mu);
    if (mipmapped) {
      auto it = reg.mipmaps.find(h);
      if (it == reg.mipmaps.end()) return record(cudaErrorInvalidResourceHandle);
      for (auto& [lv, ah] : it->second.level_handles) reg.arrays.erase(ah);
      reg.mipmaps.erase(it);
    } else {
      auto it = reg.arrays.find(h);
      // A second free: NVIDIA's 13.0 runtime answers cudaErrorContextIsDestroyed (seen on the H100).
      if (it == reg.arrays.end())
        return record(reg.freed_arrays.contains(h) ? cudaErrorContextIsDestroyed : cudaErrorInvalidResourceHandle);
      if (it->second.level) return record(cudaErrorInvalidValue);  // freed with its mipmapped array
      reg.arrays.erase(it);
      if (reg.freed_arrays.size() >= 65536) reg.freed_arrays.clear();  // bounded; only the answer changes
      reg.freed_arrays.insert(h);
    }
  }
  auto lock = r->lock();
  return record(r->enqueue<vmcuda::api::Call::ArrayDestroy>({h, mipmapped ? 1u : 0u, 0}));
}
}  // namespace

cudaError_t cudaFreeArray(cudaArray_t array) { return free_array(g::handle_of(array), false); }
cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray) {
  return free_array(g::handle_of(mipmappedArray), true);
}

cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc* desc, struct cudaExtent* extent, unsigned int* flags,
                             cudaArray_t array) {
  if (cudaError_t e = g::enter_device_call()) return e;
  auto info = g::find_array(array);
  if (!info) return record(cudaErrorInvalidResourceHandle);
  if (desc) *desc = info->desc;
  if (extent) *extent = info->extent;
  if (flags) *flags = info->flags;
  return cudaSuccess;
}

cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!desc) return record(cudaErrorInvalidValue);
  auto info = g::find_array(array);
  if (!info) return record(cudaErrorInvalidResourceHandle);
  *desc = info->desc;
  return cudaSuccess;
}

// ---------------------------------------------------------------- copies

namespace {

// `stream`: nothing for the synchronous calls; else the cudaStream_t (per_thread: _ptsz).
cudaError_t copy(const g::ArrayEnd& a, const g::MemEnd& m, size_t w, size_t h, bool from, cudaMemcpyKind kind,
                 std::optional<cudaStream_t> stream, bool per_thread = false) {
  if (cudaError_t e = g::enter_device_call()) return e;
  std::optional<uint64_t> s;
  if (stream) {
    uint64_t wire;
    if (cudaError_t e = g::stream_wire_handle(*stream, per_thread, &wire)) return record(e);
    s = wire;
  }
  return record(g::copy_array(a, m, w, h, 1, from, kind, s));
}

// A 1D count of bytes from (wOffset, hOffset) of an array (the deprecated cudaMemcpyToArray
// family): whole rows after a first partial one, as CUDA copies it; each piece is a 2D copy.
cudaError_t copy_linear(const void* array, size_t wOffset, size_t hOffset, void* mem, size_t count, bool from,
                        cudaMemcpyKind kind, std::optional<cudaStream_t> stream, bool per_thread = false) {
  if (cudaError_t e = g::enter_device_call()) return e;
  auto info = g::find_array(array);
  if (!info) return record(cudaErrorInvalidResourceHandle);
  const uint64_t row = info->extent.width * info->elem;
  if (wOffset > row) return record(cudaErrorInvalidValue);
  auto* p = static_cast<std::byte*>(mem);
  uint64_t x = wOffset, y = hOffset, left = count;
  while (left > 0) {
    const uint64_t n = std::min<uint64_t>(left, row - x);
    if (cudaError_t e = copy({const_cast<void*>(array), x, y, 0}, {p, nullptr, n, 1, 0, 0, 0}, n, 1, from, kind, stream,
                             per_thread))
      return e;
    p += n, left -= n, x = 0, ++y;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                size_t width, size_t height, enum cudaMemcpyKind kind) {
  return copy({dst, wOffset, hOffset, 0}, {const_cast<void*>(src), nullptr, spitch, height, 0, 0, 0}, width, height,
              false, kind, std::nullopt);
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy({dst, wOffset, hOffset, 0}, {const_cast<void*>(src), nullptr, spitch, height, 0, 0, 0}, width, height,
              false, kind, stream);
}
cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                          size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return copy({dst, wOffset, hOffset, 0}, {const_cast<void*>(src), nullptr, spitch, height, 0, 0, 0}, width, height,
              false, kind, stream, true);
}
cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                  size_t width, size_t height, enum cudaMemcpyKind kind) {
  return copy({src, wOffset, hOffset, 0}, {dst, nullptr, dpitch, height, 0, 0, 0}, width, height, true, kind,
              std::nullopt);
}
cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                       size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy({src, wOffset, hOffset, 0}, {dst, nullptr, dpitch, height, 0, 0, 0}, width, height, true, kind, stream);
}
cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                            size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  return copy({src, wOffset, hOffset, 0}, {dst, nullptr, dpitch, height, 0, 0, 0}, width, height, true, kind, stream,
              true);
}
cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
                                     size_t wOffsetSrc, size_t hOffsetSrc, size_t width, size_t height,
                                     enum cudaMemcpyKind kind) {
  // The source is "the array side" (from), the destination the other array.
  return copy({src, wOffsetSrc, hOffsetSrc, 0}, {nullptr, dst, 0, 0, wOffsetDst, hOffsetDst, 0}, width, height, true,
              kind, std::nullopt);
}
cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t count,
                              enum cudaMemcpyKind kind) {
  return copy_linear(dst, wOffset, hOffset, const_cast<void*>(src), count, false, kind, std::nullopt);
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_linear(dst, wOffset, hOffset, const_cast<void*>(src), count, false, kind, stream);
}
cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                enum cudaMemcpyKind kind) {
  return copy_linear(src, wOffset, hOffset, dst, count, true, kind, std::nullopt);
}
cudaError_t cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                     enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_linear(src, wOffset, hOffset, dst, count, true, kind, stream);
}
namespace {
// cudaMemcpyArrayToArray, ordered on `stream` (nothing: the legacy default stream, waited for).
cudaError_t array_to_array(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
                           size_t wOffsetSrc, size_t hOffsetSrc, size_t count, cudaMemcpyKind kind,
                           std::optional<cudaStream_t> stream) {
  // Within one row of each (the common use); longer spans go row by row of the source.
  if (cudaError_t e = g::enter_device_call()) return e;
  auto si = g::find_array(src), di = g::find_array(dst);
  if (!si || !di) return record(cudaErrorInvalidResourceHandle);
  const uint64_t srow = si->extent.width * si->elem, drow = di->extent.width * di->elem;
  if (wOffsetSrc > srow || wOffsetDst > drow) return record(cudaErrorInvalidValue);
  uint64_t sx = wOffsetSrc, sy = hOffsetSrc, dx = wOffsetDst, dy = hOffsetDst, left = count;
  while (left > 0) {
    const uint64_t n = std::min({left, srow - sx, drow - dx});
    if (n == 0) return record(cudaErrorInvalidValue);
    if (cudaError_t e = copy({src, sx, sy, 0}, {nullptr, dst, 0, 0, dx, dy, 0}, n, 1, true, kind, stream)) return e;
    left -= n;
    sx += n, dx += n;
    if (sx == srow) sx = 0, ++sy;
    if (dx == drow) dx = 0, ++dy;
  }
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
                                   size_t wOffsetSrc, size_t hOffsetSrc, size_t count, enum cudaMemcpyKind kind) {
  return array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, std::nullopt);
}

// The per-thread default stream's forms (nvcc --default-stream per-thread).
cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t count,
                                        enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_linear(dst, wOffset, hOffset, const_cast<void*>(src), count, false, kind, stream, true);
}
cudaError_t cudaMemcpyFromArrayAsync_ptsz(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                          size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_linear(src, wOffset, hOffset, dst, count, true, kind, stream, true);
}
cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind) {
  return g::finish_on_per_thread_stream(
      cudaMemcpy2DToArrayAsync(dst, wOffset, hOffset, src, spitch, width, height, kind, cudaStreamPerThread));
}
cudaError_t cudaMemcpy2DFromArray_ptds(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                       size_t width, size_t height, enum cudaMemcpyKind kind) {
  return g::finish_on_per_thread_stream(
      cudaMemcpy2DFromArrayAsync(dst, dpitch, src, wOffset, hOffset, width, height, kind, cudaStreamPerThread));
}
cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
                                          size_t wOffsetSrc, size_t hOffsetSrc, size_t width, size_t height,
                                          enum cudaMemcpyKind kind) {
  return g::finish_on_per_thread_stream(copy({src, wOffsetSrc, hOffsetSrc, 0},
                                             {nullptr, dst, 0, 0, wOffsetDst, hOffsetDst, 0}, width, height, true,
                                             kind, cudaStreamPerThread));
}
cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src, size_t count,
                                   enum cudaMemcpyKind kind) {
  return g::finish_on_per_thread_stream(
      cudaMemcpyToArrayAsync(dst, wOffset, hOffset, src, count, kind, cudaStreamPerThread));
}
cudaError_t cudaMemcpyFromArray_ptds(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                     enum cudaMemcpyKind kind) {
  return g::finish_on_per_thread_stream(
      cudaMemcpyFromArrayAsync(dst, src, wOffset, hOffset, count, kind, cudaStreamPerThread));
}
cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,
                                        size_t wOffsetSrc, size_t hOffsetSrc, size_t count,
                                        enum cudaMemcpyKind kind) {
  return g::finish_on_per_thread_stream(
      array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, cudaStreamPerThread));
}

// ---------------------------------------------------------------- texture and surface objects

namespace {

// The wire form of a resource; cudaErrorInvalidValue (or the format's error) when it is wrong.
cudaError_t resource_args(const cudaResourceDesc& r, vmcuda::api::TextureCreateArgs* a) {
  namespace api = vmcuda::api;
  if (r.flags != 0) return cudaErrorInvalidValue;
  auto& reg = g::registry();
  switch (r.resType) {
    case cudaResourceTypeArray: {
      std::lock_guard l(reg.mu);
      if (!reg.arrays.contains(g::handle_of(r.res.array.array))) return cudaErrorInvalidResourceHandle;
      a->resource = api::kTexResourceArray;
      a->handle = g::handle_of(r.res.array.array);
      return cudaSuccess;
    }
    case cudaResourceTypeMipmappedArray: {
      std::lock_guard l(reg.mu);
      if (!reg.mipmaps.contains(g::handle_of(r.res.mipmap.mipmap))) return cudaErrorInvalidResourceHandle;
      a->resource = api::kTexResourceMipmap;
      a->handle = g::handle_of(r.res.mipmap.mipmap);
      return cudaSuccess;
    }
    case cudaResourceTypeLinear:
    case cudaResourceTypePitch2D: {
      const bool linear = r.resType == cudaResourceTypeLinear;
      const cudaChannelFormatDesc& d = linear ? r.res.linear.desc : r.res.pitch2D.desc;
      uint64_t elem;
      if (cudaError_t e = g::format_of(d, &a->format, &a->channels, &elem)) return e;
      a->resource = linear ? api::kTexResourceLinear : api::kTexResourcePitch2D;
      a->handle = g::handle_of(linear ? r.res.linear.devPtr : r.res.pitch2D.devPtr);
      if (!a->handle) return cudaErrorInvalidValue;
      if (linear) {
        a->bytes = r.res.linear.sizeInBytes;
      } else {
        a->width = r.res.pitch2D.width;
        a->height = r.res.pitch2D.height;
        a->pitch = r.res.pitch2D.pitchInBytes;
      }
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t cudaCreateTextureObject(cudaTextureObject_t* pTexObject, const struct cudaResourceDesc* pResDesc,
                                    const struct cudaTextureDesc* pTexDesc,
                                    const struct cudaResourceViewDesc* pResViewDesc) {
  namespace api = vmcuda::api;
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (!pTexObject || !pResDesc) return record(cudaErrorInvalidValue);
  api::TextureCreateArgs a{};
  if (cudaError_t e = resource_args(*pResDesc, &a)) return record(e);
  // No texture descriptor: NVIDIA's 13.0 runtime answers an invalid handle (seen on the H100).
  if (!pTexDesc) return record(cudaErrorInvalidResourceHandle);
  // A view: of an array or mipmapped array only (the host driver checks its levels, layers and
  // format against the resource).
  if (pResViewDesc && pResDesc->resType != cudaResourceTypeArray && pResDesc->resType != cudaResourceTypeMipmappedArray)
    return record(cudaErrorInvalidValue);
  const cudaTextureDesc& t = *pTexDesc;
  for (int i = 0; i < 3; ++i) {
    if (t.addressMode[i] < cudaAddressModeWrap || t.addressMode[i] > cudaAddressModeBorder)
      return record(cudaErrorInvalidValue);
    a.address_mode[i] = static_cast<uint32_t>(t.addressMode[i]);
  }
  if ((t.filterMode != cudaFilterModePoint && t.filterMode != cudaFilterModeLinear) ||
      (t.mipmapFilterMode != cudaFilterModePoint && t.mipmapFilterMode != cudaFilterModeLinear) ||
      (t.readMode != cudaReadModeElementType && t.readMode != cudaReadModeNormalizedFloat))
    return record(cudaErrorInvalidValue);
  a.filter_mode = static_cast<uint32_t>(t.filterMode);
  a.mipmap_filter_mode = static_cast<uint32_t>(t.mipmapFilterMode);
  // CU_TRSF_*: element-type reads of integer texels stay integers; the rest as asked.
  a.tex_flags = (t.readMode == cudaReadModeElementType ? 0x01u : 0u) | (t.normalizedCoords ? 0x02u : 0u) |
                (t.sRGB ? 0x10u : 0u) | (t.disableTrilinearOptimization ? 0x20u : 0u) |
                (t.seamlessCubemap ? 0x40u : 0u);
  a.max_anisotropy = t.maxAnisotropy;
  a.mipmap_level_bias = t.mipmapLevelBias;
  a.min_mipmap_level_clamp = t.minMipmapLevelClamp;
  a.max_mipmap_level_clamp = t.maxMipmapLevelClamp;
  std::memcpy(a.border_color, t.borderColor, sizeof a.border_color);
  auto lock = r->lock();
  struct {
    int32_t status = 0;
    api::HandleReply reply{};
  } res;
  if (pResViewDesc) {
    const cudaResourceViewDesc& v = *pResViewDesc;
    api::TextureViewArgs va{a,           static_cast<uint32_t>(v.format), v.firstMipmapLevel, v.lastMipmapLevel,
                            v.firstLayer, v.lastLayer,                    0,                  v.width,
                            v.height,     v.depth};
    auto vr = r->call<api::Call::TextureCreateView>(va);
    res.status = vr.status, res.reply = vr.reply;
  } else {
    auto tr = r->call<api::Call::TextureCreate>(a);
    res.status = tr.status, res.reply = tr.reply;
  }
  if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  reg.textures[res.reply.handle] = {*pResDesc, *pTexDesc, g::Remote::thread_device(),
                                    pResViewDesc ? std::optional(*pResViewDesc) : std::nullopt};
  *pTexObject = res.reply.handle;
  return cudaSuccess;
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (texObject == 0) return cudaSuccess;
  {
    auto& reg = g::registry();
    std::lock_guard l(reg.mu);
    if (!reg.textures.erase(texObject)) return record(cudaErrorInvalidValue);
  }
  auto lock = r->lock();
  return record(r->enqueue<vmcuda::api::Call::TextureDestroy>({texObject}));
}

cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc* pResDesc, cudaTextureObject_t texObject) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!pResDesc) return record(cudaErrorInvalidValue);
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  auto it = reg.textures.find(texObject);
  if (it == reg.textures.end()) return record(cudaErrorInvalidValue);
  *pResDesc = it->second.res;
  return cudaSuccess;
}

// The view it was made with; none: cudaErrorInvalidValue, as CUDA documents.
cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc* pResViewDesc,
                                                 cudaTextureObject_t texObject) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!pResViewDesc) return record(cudaErrorInvalidValue);
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  auto it = reg.textures.find(texObject);
  if (it == reg.textures.end() || !it->second.view) return record(cudaErrorInvalidValue);
  *pResViewDesc = *it->second.view;
  return cudaSuccess;
}

cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc* pTexDesc, cudaTextureObject_t texObject) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!pTexDesc) return record(cudaErrorInvalidValue);
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  auto it = reg.textures.find(texObject);
  if (it == reg.textures.end()) return record(cudaErrorInvalidValue);
  *pTexDesc = it->second.tex;
  return cudaSuccess;
}

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* pSurfObject, const struct cudaResourceDesc* pResDesc) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (!pSurfObject || !pResDesc) return record(cudaErrorInvalidValue);
  if (pResDesc->resType != cudaResourceTypeArray) return record(cudaErrorInvalidValue);
  const uint64_t h = g::handle_of(pResDesc->res.array.array);
  auto info = g::find_array(pResDesc->res.array.array);
  if (!info) return record(cudaErrorInvalidResourceHandle);
  // An array made without cudaArraySurfaceLoadStore is not refused: NVIDIA's 13.0 runtime
  // and the driver take it (seen on the H100); what a kernel's surface access then does is the GPU's.
  auto lock = r->lock();
  auto res = r->call<vmcuda::api::Call::SurfaceCreate>({h, 0, 0});
  if (res.status != 0) return record(static_cast<cudaError_t>(res.status));
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  reg.surfaces[res.reply.handle] = {*pResDesc, g::Remote::thread_device()};
  *pSurfObject = res.reply.handle;
  return cudaSuccess;
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (surfObject == 0) return cudaSuccess;
  {
    auto& reg = g::registry();
    std::lock_guard l(reg.mu);
    if (!reg.surfaces.erase(surfObject)) return record(cudaErrorInvalidValue);
  }
  auto lock = r->lock();
  return record(r->enqueue<vmcuda::api::Call::SurfaceDestroy>({surfObject}));
}

cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc* pResDesc, cudaSurfaceObject_t surfObject) {
  if (cudaError_t e = g::enter_device_call()) return e;
  if (!pResDesc) return record(cudaErrorInvalidValue);
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  auto it = reg.surfaces.find(surfObject);
  if (it == reg.surfaces.end()) return record(cudaErrorInvalidValue);
  *pResDesc = it->second.first;
  return cudaSuccess;
}

// ---------------------------------------------------------------- sparse and deferred-mapping queries

// vmcuda makes only dense arrays (cudaArraySparse and cudaArrayDeferredMapping are refused at
// creation: an array is memory of the VM's arena, never mapped by the program), so these
// answer as CUDA answers for a dense array: cudaErrorInvalidValue ("not allocated with flag
// cudaArraySparse / cudaArrayDeferredMapping"), after the handle and arguments are checked.
// Nor is there a multi-planar format (NV12 is refused), so no array has planes.
namespace {
enum class Kind { kArray, kMipmap };
cudaError_t dense_query(const void* out, const void* handle, Kind kind, const int* device) {
  cudaError_t err;
  g::Remote* r = g::device_call(&err);
  if (!r) return err;
  if (!out) return record(cudaErrorInvalidValue);
  if (device && (*device < 0 || static_cast<size_t>(*device) >= r->devices().size()))
    return record(cudaErrorInvalidDevice);
  auto& reg = g::registry();
  std::lock_guard l(reg.mu);
  const uint64_t h = g::handle_of(handle);
  const bool known = kind == Kind::kArray ? reg.arrays.contains(h) : reg.mipmaps.contains(h);
  if (!known) return record(cudaErrorInvalidResourceHandle);
  return record(cudaErrorInvalidValue);
}
}  // namespace

cudaError_t cudaArrayGetSparseProperties(struct cudaArraySparseProperties* sparseProperties, cudaArray_t array) {
  return dense_query(sparseProperties, array, Kind::kArray, nullptr);
}
cudaError_t cudaMipmappedArrayGetSparseProperties(struct cudaArraySparseProperties* sparseProperties,
                                                  cudaMipmappedArray_t mipmap) {
  return dense_query(sparseProperties, mipmap, Kind::kMipmap, nullptr);
}
cudaError_t cudaArrayGetMemoryRequirements(struct cudaArrayMemoryRequirements* memoryRequirements, cudaArray_t array,
                                           int device) {
  return dense_query(memoryRequirements, array, Kind::kArray, &device);
}
cudaError_t cudaMipmappedArrayGetMemoryRequirements(struct cudaArrayMemoryRequirements* memoryRequirements,
                                                    cudaMipmappedArray_t mipmap, int device) {
  return dense_query(memoryRequirements, mipmap, Kind::kMipmap, &device);
}
cudaError_t cudaArrayGetPlane(cudaArray_t* pPlaneArray, cudaArray_t hArray, unsigned int) {
  return dense_query(pPlaneArray, hArray, Kind::kArray, nullptr);
}
