// memory area, 3D half: cudaMalloc3D, cudaMemset3D[Async], cudaMemcpy3D[Async] on pitched
// memory (cudaPitchedPtr); a copy naming a CUDA array goes to arrays.cc.
//
// Made of the 2D calls (memory_2d.cc), not of a host cuMemcpy3D handler: a 3D region of
// pitched memory is `depth` 2D regions, pitch * ysize bytes apart, so the 2D wire calls, their
// host-side checks (Session::owns_2d) and their staging of pageable memory serve unchanged,
// and a hostile guest has no further call to abuse. The common case, whole slices
// (extent.height == ysize on both sides), is one 2D region of height * depth rows: one call.
// Only sub-volumes cost one (queued, for device memory) call per slice.
//
// Checks and their error codes are NVIDIA's, as seen on the H200 (tests/cuda/memory_2d_3d.cu's
// probes); every region is checked whole before the first slice is sent, so a bad copy
// does nothing.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <vector>

#include "arrays.h"
#include "host_pointers.h"
#include "log.h"
#include "memory_2d.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

// One side of a 3D copy or a memset: where its region starts and how far it reaches.
struct Side {
  std::byte* base;     // the byte at the position
  uint64_t pitch;      // between rows
  uint64_t slice;      // between slices: pitch * ysize
  uint64_t span;       // bytes from base to the region's last byte, inclusive
};

// The region of `e` at `pos` in `p`; false when its numbers overflow.
bool side_of(const cudaPitchedPtr& p, const cudaPos& pos, const cudaExtent& e, Side* out) {
  constexpr uint64_t kMax = ~0ull;
  const uint64_t pitch = p.pitch, ysize = p.ysize;
  if (ysize != 0 && pitch > kMax / ysize) return false;
  const uint64_t slice = pitch * ysize;
  // Offset of the position, and of the region's last row from its first.
  if (pos.z != 0 && pos.z > kMax / std::max<uint64_t>(slice, 1)) return false;
  if (pos.y != 0 && pos.y > kMax / std::max<uint64_t>(pitch, 1)) return false;
  const uint64_t oz = pos.z * slice, oy = pos.y * pitch;
  if (oz > kMax - oy || oz + oy > kMax - pos.x) return false;
  const uint64_t offset = oz + oy + pos.x;
  if (e.depth - 1 != 0 && e.depth - 1 > kMax / std::max<uint64_t>(slice, 1)) return false;
  if (e.height - 1 != 0 && e.height - 1 > kMax / std::max<uint64_t>(pitch, 1)) return false;
  const uint64_t lz = (e.depth - 1) * slice, ly = (e.height - 1) * pitch;
  if (lz > kMax - ly || lz + ly > kMax - e.width) return false;
  const uint64_t span = lz + ly + e.width;
  const uint64_t base = addr(p.ptr);
  if (offset > kMax - base || span > kMax - (base + offset)) return false;
  *out = {reinterpret_cast<std::byte*>(base + offset), pitch, slice, span};
  return true;
}

// Whether each slice's rows follow the previous slice's: then the region is one 2D region of
// height * depth rows.
bool whole_slices(const cudaExtent& e, const cudaPitchedPtr& p) { return e.depth == 1 || e.height == p.ysize; }

// A 3D copy naming an array (arrays.cc): the extent and the array side's position are in
// elements of the array, a pointer side's position in bytes, as CUDA defines them.
cudaError_t copy_3d_array(const cudaMemcpy3DParms& p, std::optional<uint64_t> stream) {
  const cudaExtent& e = p.extent;
  const bool from = p.srcArray != nullptr;
  const cudaArray_t arr = from ? p.srcArray : p.dstArray;
  const cudaPos& apos = from ? p.srcPos : p.dstPos;
  const uint64_t elem = array_element_bytes(arr);
  if (elem == 0) return cudaErrorInvalidResourceHandle;
  if (e.width > ~0ull / elem || apos.x > ~0ull / elem) return cudaErrorInvalidValue;
  const ArrayEnd a{arr, apos.x * elem, apos.y, apos.z};
  if (p.srcArray && p.dstArray) {
    const uint64_t delem = array_element_bytes(p.dstArray);
    if (delem == 0) return cudaErrorInvalidResourceHandle;
    if (p.dstPos.x > ~0ull / delem) return cudaErrorInvalidValue;
    return copy_array(a, {nullptr, p.dstArray, 0, 0, p.dstPos.x * delem, p.dstPos.y, p.dstPos.z}, e.width * elem,
                      e.height, e.depth, true, p.kind, stream);
  }
  const cudaPitchedPtr& mp = from ? p.dstPtr : p.srcPtr;
  const cudaPos& mpos = from ? p.dstPos : p.srcPos;
  if (!mp.ptr) return cudaErrorInvalidValue;
  if (e.width == 0 || e.height == 0 || e.depth == 0) return cudaSuccess;
  Side m;
  if (!side_of(mp, mpos, cudaExtent{e.width * elem, e.height, e.depth}, &m)) return cudaErrorInvalidValue;
  if (e.depth > 1 && mp.ysize == 0) return cudaErrorInvalidPitchValue;
  return copy_array(a, {m.base, nullptr, mp.pitch, mp.ysize, 0, 0, 0}, e.width * elem, e.height, e.depth, from, p.kind,
                    stream);
}

// Between two devices (cudaMemcpy3DPeer): the devices of each side.
struct Peer {
  int dst_device, src_device;
};

// `rows` rows of `width` bytes from one device to another, each a queued peer copy (the
// host's cuMemcpyPeer[Async]), or one when both sides' rows follow one another.
cudaError_t peer_rows(const Peer& peer, std::byte* dst, uint64_t dpitch, const std::byte* src, uint64_t spitch,
                      uint64_t width, uint64_t rows, std::optional<uint64_t> stream) {
  cudaError_t err;
  Remote* r = Remote::get(&err);
  if (!r) return err;
  auto lock = r->lock();
  const bool packed = dpitch == width && spitch == width;
  const uint64_t calls = packed ? 1 : rows, bytes = packed ? width * rows : width;
  for (uint64_t i = 0; i < calls; ++i) {
    const uint64_t d = addr(dst + i * dpitch), s = addr(src + i * spitch);
    const cudaError_t e =
        stream ? r->enqueue<api::Call::MemcpyPeerAsync>({d, s, bytes, peer.dst_device, peer.src_device, *stream})
               : r->enqueue<api::Call::MemcpyPeer>({d, s, bytes, peer.dst_device, peer.src_device});
    if (e) return e;
  }
  return cudaSuccess;
}

cudaError_t copy_3d(const cudaMemcpy3DParms* p, std::optional<uint64_t> stream, [[maybe_unused]] const char* name,
                    std::optional<Peer> peer = std::nullopt) {
  if (!p) return cudaErrorInvalidValue;
  // One source and one destination each (the API's rule), then arrays: not remoted yet.
  if ((p->srcArray && p->srcPtr.ptr) || (p->dstArray && p->dstPtr.ptr)) return cudaErrorInvalidValue;
  if (p->srcArray || p->dstArray) {
    if (peer) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        VMCUDA_LOG(kWarn, "memory", "cudaMemcpy3DPeer of a CUDA array between two devices is not supported; it returns "
                                    "cudaErrorNotSupported (801): copy through device memory of one of them");
      return cudaErrorNotSupported;
    }
    return copy_3d_array(*p, stream);
  }
  const cudaExtent& e = p->extent;
  if (e.width == 0 || e.height == 0 || e.depth == 0) return cudaSuccess;
  cudaMemcpyKind kind = p->kind;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  const cudaPitchedPtr &sp = p->srcPtr, &dp = p->dstPtr;
  if (!sp.ptr || !dp.ptr) return cudaErrorInvalidValue;
  // NVIDIA's runtime: a width beyond a pitch, or (for several slices) a height beyond a
  // slice, is a pitch error; a region past the end of a row or of a slice is a value error
  // (ysize 0 means no slice height: allowed for one slice).
  if (e.width > sp.pitch || e.width > dp.pitch) return cudaErrorInvalidPitchValue;
  if (e.depth > 1 && (e.height > sp.ysize || e.height > dp.ysize)) return cudaErrorInvalidPitchValue;
  if (p->srcPos.x > sp.pitch - e.width || p->dstPos.x > dp.pitch - e.width) return cudaErrorInvalidValue;
  if (sp.ysize != 0 && (e.height > sp.ysize || p->srcPos.y > sp.ysize - e.height)) return cudaErrorInvalidValue;
  if (dp.ysize != 0 && (e.height > dp.ysize || p->dstPos.y > dp.ysize - e.height)) return cudaErrorInvalidValue;
  Side src, dst;
  if (!side_of(sp, p->srcPos, e, &src) || !side_of(dp, p->dstPos, e, &dst)) return cudaErrorInvalidValue;
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: where each side is comes from this process's allocations; the
    // 2D copies below are told, so that every slice goes the same way.
    const bool d = is_device(dst.base, dst.span), s = is_device(src.base, src.span);
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  // The device sides must be this process's device memory, all of them, before any slice goes.
  if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && !is_device(dst.base, dst.span))
    return cudaErrorInvalidValue;
  if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) && !is_device(src.base, src.span))
    return cudaErrorInvalidValue;
  if (peer) {
    if (whole_slices(e, sp) && whole_slices(e, dp))
      return peer_rows(*peer, dst.base, dst.pitch, src.base, src.pitch, e.width, e.height * e.depth, stream);
    for (uint64_t z = 0; z < e.depth; ++z)
      if (cudaError_t r = peer_rows(*peer, dst.base + z * dst.slice, dst.pitch, src.base + z * src.slice, src.pitch,
                                    e.width, e.height, stream))
        return r;
    return cudaSuccess;
  }
  if (whole_slices(e, sp) && whole_slices(e, dp))
    return copy_2d(dst.base, dst.pitch, src.base, src.pitch, e.width, e.height * e.depth, kind, stream);
  for (uint64_t z = 0; z < e.depth; ++z)
    if (cudaError_t r = copy_2d(dst.base + z * dst.slice, dst.pitch, src.base + z * src.slice, src.pitch, e.width,
                                e.height, kind, stream))
      return r;
  return cudaSuccess;
}

cudaError_t memset_3d(const cudaPitchedPtr& p, int value, const cudaExtent& e, std::optional<uint64_t> stream) {
  if (e.width == 0 || e.height == 0 || e.depth == 0) return cudaSuccess;
  // All value errors for cudaMemset3D, even a height beyond ysize for one slice (as NVIDIA's).
  if (!p.ptr || e.width > p.pitch || e.height > p.ysize) return cudaErrorInvalidValue;
  Side d;
  // Device memory, or host memory the device reaches (memset_2d takes both).
  if (!side_of(p, cudaPos{0, 0, 0}, e, &d) || !(is_device(d.base, d.span) || is_memset_host_memory(d.base, d.span)))
    return cudaErrorInvalidValue;
  if (whole_slices(e, p)) return memset_2d(d.base, d.pitch, value, e.width, e.height * e.depth, stream);
  for (uint64_t z = 0; z < e.depth; ++z)
    if (cudaError_t r = memset_2d(d.base + z * d.slice, d.pitch, value, e.width, e.height, stream)) return r;
  return cudaSuccess;
}

cudaError_t wire_stream(cudaStream_t stream, bool per_thread, std::optional<uint64_t>* out) {
  uint64_t s;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &s)) return e;
  *out = s;
  return cudaSuccess;
}

}  // namespace
}  // namespace vmcuda::guest

using vmcuda::guest::record;

cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr, struct cudaExtent extent) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!pitchedDevPtr) return record(cudaErrorInvalidValue);
  // Nothing to allocate: a NULL pointer with pitch 0 and the extent's sizes (as NVIDIA's).
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) {
    *pitchedDevPtr = {nullptr, 0, extent.width, extent.height};
    return cudaSuccess;
  }
  // height * depth rows of pitched memory: slice z starts at row z * height.
  if (extent.height > ~size_t{0} / extent.depth) return record(cudaErrorMemoryAllocation);
  void* ptr = nullptr;
  size_t pitch = 0;
  if (cudaError_t e = cudaMallocPitch(&ptr, &pitch, extent.width, extent.height * extent.depth)) return e;
  *pitchedDevPtr = {ptr, pitch, extent.width, extent.height};
  return cudaSuccess;
}

cudaError_t cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  return record(vmcuda::guest::memset_3d(pitchedDevPtr, value, extent, std::nullopt));
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms* p) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  return record(vmcuda::guest::copy_3d(p, std::nullopt, "cudaMemcpy3D"));
}

cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent) {
  return vmcuda::guest::finish_on_per_thread_stream(cudaMemset3DAsync(pitchedDevPtr, value, extent, cudaStreamPerThread));
}
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms* p) {
  return vmcuda::guest::finish_on_per_thread_stream(cudaMemcpy3DAsync(p, cudaStreamPerThread));
}

namespace {

cudaError_t memset_3d_async(cudaPitchedPtr p, int value, cudaExtent extent, cudaStream_t stream, bool per_thread) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  std::optional<uint64_t> s;
  if (cudaError_t e = g::wire_stream(stream, per_thread, &s)) return record(e);
  return record(g::memset_3d(p, value, extent, s));
}

cudaError_t copy_3d_async(const cudaMemcpy3DParms* p, cudaStream_t stream, bool per_thread) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  std::optional<uint64_t> s;
  if (cudaError_t e = g::wire_stream(stream, per_thread, &s)) return record(e);
  return record(g::copy_3d(p, s, "cudaMemcpy3DAsync"));
}

}  // namespace

cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent,
                              cudaStream_t stream) {
  return memset_3d_async(pitchedDevPtr, value, extent, stream, false);
}
cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent,
                                   cudaStream_t stream) {
  return memset_3d_async(pitchedDevPtr, value, extent, stream, true);
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms* p, cudaStream_t stream) {
  return copy_3d_async(p, stream, false);
}
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms* p, cudaStream_t stream) {
  return copy_3d_async(p, stream, true);
}

// ---------------------------------------------------------------- 3D peer copies

// cudaMemcpy3DPeer[Async]: a 3D copy of device memory (or arrays) named with their devices.
// One device (the usual single-GPU case): cudaMemcpy3D[Async] of device memory. Two devices:
// the region's rows as peer copies (queued, ordered as cudaMemcpyPeer's); arrays between two
// devices are not offered (801). A device that is not one of the VM's: cudaErrorInvalidDevice.
namespace {
cudaError_t copy_3d_peer(const cudaMemcpy3DPeerParms* p, cudaStream_t stream, bool async, bool per_thread) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  std::optional<uint64_t> s;
  if (async)
    if (cudaError_t e = g::wire_stream(stream, per_thread, &s)) return record(e);
  if (!p) return record(cudaErrorInvalidValue);
  cudaError_t err;
  g::Remote* r = g::Remote::get(&err);
  if (!r) return record(err);
  const auto valid = [&](int d) { return d >= 0 && static_cast<size_t>(d) < r->devices().size(); };
  if (!valid(p->srcDevice) || !valid(p->dstDevice)) return record(cudaErrorInvalidDevice);
  const cudaMemcpy3DParms q{p->srcArray, p->srcPos, p->srcPtr, p->dstArray, p->dstPos, p->dstPtr, p->extent,
                            cudaMemcpyDeviceToDevice};
  std::optional<g::Peer> peer;
  if (p->srcDevice != p->dstDevice) peer = g::Peer{p->dstDevice, p->srcDevice};
  return record(g::copy_3d(&q, s, "cudaMemcpy3DPeer", peer));
}
}  // namespace

cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms* p) { return copy_3d_peer(p, nullptr, false, false); }
cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms* p) {
  return vmcuda::guest::finish_on_per_thread_stream(cudaMemcpy3DPeerAsync(p, cudaStreamPerThread));
}
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms* p, cudaStream_t stream) {
  return copy_3d_peer(p, stream, true, false);
}
cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms* p, cudaStream_t stream) {
  return copy_3d_peer(p, stream, true, true);
}

// ---------------------------------------------------------------- batched 3D copies

// cudaMemcpy3DBatchAsync (CUDA 12.8): every operation is checked first as CUDA documents
// (flags 0, not the legacy stream, a valid source access order and copy flags, no zero extent,
// a row length and layer height 0 or at least the extent's, arrays of one element size), so a
// bad batch copies nothing; then each is a cudaMemcpy3DAsync on the stream (pointer to pointer
// in bytes, else in elements of the array). A pageable host operand is read or written before
// the call returns (as cudaMemcpy3DAsync moves it), which every access order allows.
namespace {
bool operand_ok(const cudaMemcpy3DOperand& o, const cudaExtent& e, uint64_t* elem) {
  if (o.type == cudaMemcpyOperandTypePointer) {
    *elem = 0;
    return o.op.ptr.ptr && (o.op.ptr.rowLength == 0 || o.op.ptr.rowLength >= e.width) &&
           (o.op.ptr.layerHeight == 0 || o.op.ptr.layerHeight >= e.height);
  }
  if (o.type == cudaMemcpyOperandTypeArray) {
    *elem = vmcuda::guest::array_element_bytes(o.op.array.array);
    return *elem != 0;
  }
  return false;
}

// One side of the 3D copy: `elem` the bytes of an element (1 between pointers).
void side(const cudaMemcpy3DOperand& o, const cudaExtent& e, uint64_t elem, cudaArray_t* array, cudaPos* pos,
          cudaPitchedPtr* ptr) {
  if (o.type == cudaMemcpyOperandTypeArray) {
    *array = o.op.array.array;
    *pos = {o.op.array.offset.x, o.op.array.offset.y, o.op.array.offset.z};
    *ptr = {};
    return;
  }
  const uint64_t row = o.op.ptr.rowLength ? o.op.ptr.rowLength : e.width;
  *array = nullptr;
  *pos = {0, 0, 0};
  *ptr = {o.op.ptr.ptr, row * elem, e.width * elem, o.op.ptr.layerHeight ? o.op.ptr.layerHeight : e.height};
}

cudaError_t copy_3d_batch(size_t count, const cudaMemcpy3DBatchOp* ops, unsigned long long flags, cudaStream_t stream,
                          bool per_thread) {
  namespace g = vmcuda::guest;
  if (cudaError_t e = g::enter_device_call()) return e;
  if (count == 0 || !ops || flags != 0) return record(cudaErrorInvalidValue);
  if ((stream == nullptr && !per_thread) || stream == cudaStreamLegacy) return record(cudaErrorInvalidValue);
  std::optional<uint64_t> s;
  if (cudaError_t e = g::wire_stream(stream, per_thread, &s)) return record(e);
  std::vector<cudaMemcpy3DParms> copies(count);
  for (size_t i = 0; i < count; ++i) {
    const cudaMemcpy3DBatchOp& op = ops[i];
    uint32_t order;
    std::memcpy(&order, &op.srcAccessOrder, sizeof order);  // any value an app put there
    if (order < cudaMemcpySrcAccessOrderStream || order > cudaMemcpySrcAccessOrderAny ||
        (op.flags & ~unsigned{cudaMemcpyFlagPreferOverlapWithCompute}))
      return record(cudaErrorInvalidValue);
    const cudaExtent& e = op.extent;
    if (e.width == 0 || e.height == 0 || e.depth == 0) return record(cudaErrorInvalidValue);
    uint64_t se = 0, de = 0;
    if (!operand_ok(op.src, e, &se) || !operand_ok(op.dst, e, &de)) return record(cudaErrorInvalidValue);
    if (se && de && se != de) return record(cudaErrorInvalidValue);  // two arrays of other element sizes
    const uint64_t elem = se ? se : de ? de : 1;
    if (e.width > ~0ull / elem) return record(cudaErrorInvalidValue);
    cudaMemcpy3DParms& q = copies[i];
    q = {};
    side(op.src, e, se ? 1 : elem, &q.srcArray, &q.srcPos, &q.srcPtr);
    side(op.dst, e, de ? 1 : elem, &q.dstArray, &q.dstPos, &q.dstPtr);
    q.extent = e;
    q.kind = cudaMemcpyDefault;
  }
  for (const cudaMemcpy3DParms& q : copies)
    if (cudaError_t e = g::copy_3d(&q, s, "cudaMemcpy3DBatchAsync")) return record(e);
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp* opList, unsigned long long flags,
                                   cudaStream_t stream) {
  return copy_3d_batch(numOps, opList, flags, stream, false);
}
cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t numOps, struct cudaMemcpy3DBatchOp* opList, unsigned long long flags,
                                        cudaStream_t stream) {
  return copy_3d_batch(numOps, opList, flags, stream, true);
}
