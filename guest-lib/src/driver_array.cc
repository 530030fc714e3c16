// driver API: CUDA arrays, mipmapped arrays, copies that name arrays (cuMemcpy2D/3D and
// cuMemcpyHtoA and its kin) and texture and surface objects (cuda.h). Made of the runtime's
// arrays area (arrays.cc, memory_3d.cc): a CUarray is a cudaArray_t, a CUtexObject a
// cudaTextureObject_t, so each works with either API, as natively. The driver's descriptors
// are translated here; what the runtime checks is checked once, there.
//
// Not remoted (801, logged once by the generated stubs): the CUDA 3.x forms without _v2
// (32-bit sizes), sparse arrays and array memory requirements, planes of multi-planar
// formats, resource views (the runtime's answer: 801).
#include <algorithm>
#include <cstring>

#include "arrays.h"
#include "driver_array.h"
#include "driver_state.h"
#include "log.h"
#include "vmcuda/cudart_api.h"

#define CU_API extern "C" __attribute__((visibility("default")))

using namespace vmcuda::guest;
namespace cu = vmcuda::cu;

extern "C" {
typedef struct CUarray_st* CUarray;
typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef unsigned long long CUtexObject;
typedef unsigned long long CUsurfObject;

struct CUDA_ARRAY_DESCRIPTOR_st {  // cuda.h's CUDA_ARRAY_DESCRIPTOR (_v2)
  size_t Width, Height;
  int Format;  // CUarray_format
  unsigned NumChannels;
};
static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR_st) == 24);
struct CUDA_ARRAY3D_DESCRIPTOR_st {  // cuda.h's CUDA_ARRAY3D_DESCRIPTOR (_v2)
  size_t Width, Height, Depth;
  int Format;
  unsigned NumChannels, Flags;
};
static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR_st) == 40);
struct CUDA_RESOURCE_DESC_st {  // cuda.h's CUDA_RESOURCE_DESC
  int resType;                  // CUresourcetype == cudaResourceType
  union {
    struct { CUarray hArray; } array;
    struct { CUmipmappedArray hMipmappedArray; } mipmap;
    struct { CUdeviceptr devPtr; int format; unsigned numChannels; size_t sizeInBytes; } linear;
    struct { CUdeviceptr devPtr; int format; unsigned numChannels; size_t width, height, pitchInBytes; } pitch2D;
    struct { int reserved[32]; } reserved;
  } res;
  unsigned flags;
};
static_assert(sizeof(CUDA_RESOURCE_DESC_st) == 144 && offsetof(CUDA_RESOURCE_DESC_st, flags) == 136);
struct CUDA_TEXTURE_DESC_st {  // cuda.h's CUDA_TEXTURE_DESC
  int addressMode[3];          // CUaddress_mode == cudaTextureAddressMode
  int filterMode;              // CUfilter_mode == cudaTextureFilterMode
  unsigned flags;              // CU_TRSF_*
  unsigned maxAnisotropy;
  int mipmapFilterMode;
  float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
  float borderColor[4];
  int reserved[12];
};
static_assert(sizeof(CUDA_TEXTURE_DESC_st) == 104);
}

namespace {

enum : int { kMemHost = 1, kMemDevice = 2, kMemArray = 3, kMemUnified = 4 };
// CU_TRSF_* (cuda.h).
enum : unsigned {
  kReadAsInteger = 0x01,
  kNormalizedCoordinates = 0x02,
  kSrgb = 0x10,
  kDisableTrilinearOptimization = 0x20,
  kSeamlessCubemap = 0x40,
};

void* dptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
cudaArray_t rt(CUarray a) { return reinterpret_cast<cudaArray_t>(a); }

// CUarray_format and a channel count as the runtime's channel descriptor. The formats the
// runtime's arrays area offers; the driver's other formats (normalized, block-compressed,
// video) answer 801, and a value cuda.h does not define CUDA_ERROR_INVALID_VALUE.
CUresult channel_desc(int format, unsigned channels, cudaChannelFormatDesc* d) {
  int bits;
  cudaChannelFormatKind kind;
  switch (format) {
    case 0x01: bits = 8, kind = cudaChannelFormatKindUnsigned; break;
    case 0x02: bits = 16, kind = cudaChannelFormatKindUnsigned; break;
    case 0x03: bits = 32, kind = cudaChannelFormatKindUnsigned; break;
    case 0x08: bits = 8, kind = cudaChannelFormatKindSigned; break;
    case 0x09: bits = 16, kind = cudaChannelFormatKindSigned; break;
    case 0x0a: bits = 32, kind = cudaChannelFormatKindSigned; break;
    case 0x10: bits = 16, kind = cudaChannelFormatKindFloat; break;
    case 0x20: bits = 32, kind = cudaChannelFormatKindFloat; break;
    default: {
      const bool defined = (format >= 0x50 && format <= 0x5f) || (format >= 0x91 && format <= 0xcb);
      if (!defined) return cu::kInvalidValue;
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        VMCUDA_LOG(kWarn, "driver", "CUDA arrays and textures of format 0x%x (normalized, block-compressed or video "
                   "formats) are not remoted; they return CUDA_ERROR_NOT_SUPPORTED (801)", format);
      return cu::kNotSupported;
    }
  }
  if (channels != 1 && channels != 2 && channels != 4) return cu::kInvalidValue;
  *d = cudaChannelFormatDesc{bits, channels >= 2 ? bits : 0, channels == 4 ? bits : 0, channels == 4 ? bits : 0, kind};
  return cu::kSuccess;
}

// The inverse: the runtime's descriptor of an array of this process as CUarray_format.
void driver_format(const cudaChannelFormatDesc& d, int* format, unsigned* channels) {
  *channels = d.w ? 4 : d.y ? 2 : 1;
  switch (d.f) {
    case cudaChannelFormatKindUnsigned: *format = d.x == 8 ? 0x01 : d.x == 16 ? 0x02 : 0x03; break;
    case cudaChannelFormatKindSigned: *format = d.x == 8 ? 0x08 : d.x == 16 ? 0x09 : 0x0a; break;
    default: *format = d.x == 16 ? 0x10 : 0x20; break;
  }
}

CUresult array_info(CUarray a, cudaChannelFormatDesc* d, cudaExtent* e, unsigned* flags) {
  if (!a) return cu::kInvalidHandle;
  KeepRuntimeLastError keep;
  return to_cu_result(cudaArrayGetInfo(d, e, flags, rt(a)));
}

// The bytes of one row of `a` (its width times its element), or 0 when it is no array.
size_t row_bytes(CUarray a) {
  cudaChannelFormatDesc d{};
  cudaExtent e{};
  unsigned flags = 0;
  if (array_info(a, &d, &e, &flags) != cu::kSuccess) return 0;
  return e.width * array_element_bytes(a);
}

cudaMemcpyKind kind_of(int src_type, int dst_type) {
  auto device_side = [](int t) { return t == kMemDevice || t == kMemArray; };
  if (src_type == kMemUnified || dst_type == kMemUnified) return cudaMemcpyDefault;
  static constexpr cudaMemcpyKind kinds[2][2] = {{cudaMemcpyHostToHost, cudaMemcpyHostToDevice},
                                                 {cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice}};
  return kinds[device_side(src_type)][device_side(dst_type)];
}

// One side of a CUDA_MEMCPY3D as the runtime's: an array at (x in elements, y, z), or
// memory as a pitched pointer at (x in bytes, y, z).
CUresult side_3d(int type, const void* host, CUdeviceptr device, CUarray array, size_t x, size_t y, size_t z,
                 size_t lod, size_t pitch, size_t height, const CUDA_MEMCPY3D_st& c, cudaArray_t* out_array,
                 cudaPitchedPtr* ptr, cudaPos* pos, size_t* elem) {
  if (lod != 0) return cu::kInvalidValue;  // "must be 0" (cuda.h)
  *elem = 0;
  switch (type) {
    case kMemArray: {
      *elem = array_element_bytes(array);
      if (*elem == 0) return cu::kInvalidHandle;
      if (x % *elem) return cu::kInvalidValue;
      *out_array = rt(array);
      *pos = cudaPos{x / *elem, y, z};
      return cu::kSuccess;
    }
    case kMemHost:
    case kMemDevice:
    case kMemUnified: {
      void* p = type == kMemHost ? const_cast<void*>(host) : dptr(device);
      if (!p) return cu::kInvalidValue;
      // One row (and one slice) needs no pitch (height): the driver takes 0 there.
      if (pitch == 0 && c.Height <= 1 && c.Depth <= 1) pitch = c.WidthInBytes;
      if (height == 0 && c.Depth <= 1) height = c.Height;
      *ptr = cudaPitchedPtr{p, pitch, c.WidthInBytes, height};
      *pos = cudaPos{x, y, z};
      return cu::kSuccess;
    }
    default:
      return cu::kInvalidValue;
  }
}

// _ptsz: the null stream is the per-thread default stream.
CUstream per_thread(CUstream s) { return s ? s : reinterpret_cast<CUstream>(cudaStreamPerThread); }

}  // namespace

namespace vmcuda::guest {

CUresult copy_3d_driver(const CUDA_MEMCPY3D_st* c, bool async, CUstream s) {
  cudaMemcpy3DParms p{};
  if (CUresult e = runtime_copy(c, &p)) return e;
  KeepRuntimeLastError keep;
  return to_cu_result(async ? cudaMemcpy3DAsync(&p, s) : cudaMemcpy3D(&p));
}

CUresult runtime_copy(const CUDA_MEMCPY3D_st* c, cudaMemcpy3DParms* out) {
  if (!c) return cu::kInvalidValue;
  cudaMemcpy3DParms& p = *out;
  p = cudaMemcpy3DParms{};
  size_t src_elem = 0, dst_elem = 0;
  if (CUresult e = side_3d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
                           c->srcZ, c->srcLOD, c->srcPitch, c->srcHeight, *c, &p.srcArray, &p.srcPtr, &p.srcPos,
                           &src_elem))
    return e;
  if (CUresult e = side_3d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY,
                           c->dstZ, c->dstLOD, c->dstPitch, c->dstHeight, *c, &p.dstArray, &p.dstPtr, &p.dstPos,
                           &dst_elem))
    return e;
  // With an array on either side the runtime counts the width in that array's elements.
  const size_t elem = src_elem ? src_elem : dst_elem;
  if (elem && c->WidthInBytes % elem) return cu::kInvalidValue;
  p.extent = cudaExtent{elem ? c->WidthInBytes / elem : c->WidthInBytes, c->Height, c->Depth};
  p.kind = kind_of(c->srcMemoryType, c->dstMemoryType);
  return cu::kSuccess;
}

void driver_copy(const cudaMemcpy3DParms& p, int src_type, int dst_type, CUDA_MEMCPY3D_st* c) {
  *c = CUDA_MEMCPY3D_st{};
  const size_t src_elem = p.srcArray ? array_element_bytes(reinterpret_cast<CUarray>(p.srcArray)) : 0;
  const size_t dst_elem = p.dstArray ? array_element_bytes(reinterpret_cast<CUarray>(p.dstArray)) : 0;
  const size_t elem = src_elem ? src_elem : dst_elem ? dst_elem : 1;
  auto side = [&](cudaArray_t array, const cudaPitchedPtr& ptr, const cudaPos& pos, size_t array_elem, int type,
                  int* mem_type, const void** host, CUdeviceptr* device, CUarray* arr, size_t* x, size_t* y, size_t* z,
                  size_t* pitch, size_t* height) {
    *y = pos.y, *z = pos.z;
    if (array) {
      *mem_type = kMemArray;
      *arr = reinterpret_cast<CUarray>(array);
      *x = pos.x * array_elem;
      return;
    }
    *mem_type = type;
    if (type == kMemHost) *host = ptr.ptr;
    else *device = reinterpret_cast<CUdeviceptr>(ptr.ptr);
    *x = pos.x, *pitch = ptr.pitch, *height = ptr.ysize;
  };
  const void* dst_host = nullptr;
  side(p.srcArray, p.srcPtr, p.srcPos, src_elem, src_type, &c->srcMemoryType, &c->srcHost, &c->srcDevice,
       &c->srcArray, &c->srcXInBytes, &c->srcY, &c->srcZ, &c->srcPitch, &c->srcHeight);
  side(p.dstArray, p.dstPtr, p.dstPos, dst_elem, dst_type, &c->dstMemoryType, &dst_host, &c->dstDevice, &c->dstArray,
       &c->dstXInBytes, &c->dstY, &c->dstZ, &c->dstPitch, &c->dstHeight);
  c->dstHost = const_cast<void*>(dst_host);
  c->WidthInBytes = p.extent.width * elem;
  c->Height = p.extent.height;
  c->Depth = p.extent.depth;
}

}  // namespace vmcuda::guest

// ------------------------------------------------------------------ arrays

CU_API CUresult cuArrayCreate_v2(CUarray* out, const CUDA_ARRAY_DESCRIPTOR_st* d) {
  VMCUDA_ENTER(enter_context_call());
  if (!out || !d || d->Width == 0) return cu::kInvalidValue;
  cudaChannelFormatDesc cd;
  VMCUDA_ENTER(channel_desc(d->Format, d->NumChannels, &cd));
  VMCUDA_DRIVER_RUNTIME(cudaMallocArray(reinterpret_cast<cudaArray_t*>(out), &cd, d->Width, d->Height, 0));
}

namespace {
// CUDA_ARRAY3D_* flags have the values of cudaArray* flags, which the runtime checks, except
// the driver's own: a depth texture (0x10) changes what fetches return and is not remoted;
// a color attachment (0x20) or video encode/decode array (0x100) is an ordinary array to
// CUDA code, so the flag is dropped (NVIDIA's runtime passes cudaMallocArray's undefined
// flag bits on, and 0x100 is one of these).
CUresult array_flags(unsigned flags, unsigned* out) {
  constexpr unsigned kDepthTexture = 0x10, kColorAttachment = 0x20, kVideoEncodeDecode = 0x100;
  if (flags & kDepthTexture) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMCUDA_LOG(kWarn, "driver", "CUDA arrays with CUDA_ARRAY3D_DEPTH_TEXTURE are not remoted; they return "
                 "CUDA_ERROR_NOT_SUPPORTED (801)");
    return cu::kNotSupported;
  }
  *out = flags & ~(kColorAttachment | kVideoEncodeDecode);
  return cu::kSuccess;
}
}  // namespace

CU_API CUresult cuArray3DCreate_v2(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR_st* d) {
  VMCUDA_ENTER(enter_context_call());
  if (!out || !d || d->Width == 0) return cu::kInvalidValue;
  cudaChannelFormatDesc cd;
  VMCUDA_ENTER(channel_desc(d->Format, d->NumChannels, &cd));
  unsigned flags;
  VMCUDA_ENTER(array_flags(d->Flags, &flags));
  VMCUDA_DRIVER_RUNTIME(cudaMalloc3DArray(reinterpret_cast<cudaArray_t*>(out), &cd,
                                          cudaExtent{d->Width, d->Height, d->Depth}, flags));
}

CU_API CUresult cuArrayDestroy(CUarray a) {
  VMCUDA_ENTER(enter_context_call());
  if (!a) return cu::kInvalidHandle;
  VMCUDA_DRIVER_RUNTIME(cudaFreeArray(rt(a)));
}

CU_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR_st* out, CUarray a) {
  VMCUDA_ENTER(enter_context_call());
  if (!out) return cu::kInvalidValue;
  cudaChannelFormatDesc d{};
  cudaExtent e{};
  unsigned flags = 0;
  VMCUDA_ENTER(array_info(a, &d, &e, &flags));
  out->Width = e.width;
  out->Height = e.height;
  driver_format(d, &out->Format, &out->NumChannels);
  return cu::kSuccess;
}

CU_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR_st* out, CUarray a) {
  VMCUDA_ENTER(enter_context_call());
  if (!out) return cu::kInvalidValue;
  cudaChannelFormatDesc d{};
  cudaExtent e{};
  unsigned flags = 0;
  VMCUDA_ENTER(array_info(a, &d, &e, &flags));
  out->Width = e.width;
  out->Height = e.height;
  out->Depth = e.depth;
  out->Flags = flags;
  driver_format(d, &out->Format, &out->NumChannels);
  return cu::kSuccess;
}

CU_API CUresult cuMipmappedArrayCreate(CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR_st* d, unsigned levels) {
  VMCUDA_ENTER(enter_context_call());
  if (!out || !d || d->Width == 0) return cu::kInvalidValue;
  cudaChannelFormatDesc cd;
  VMCUDA_ENTER(channel_desc(d->Format, d->NumChannels, &cd));
  unsigned flags;
  VMCUDA_ENTER(array_flags(d->Flags, &flags));
  VMCUDA_DRIVER_RUNTIME(cudaMallocMipmappedArray(reinterpret_cast<cudaMipmappedArray_t*>(out), &cd,
                                                 cudaExtent{d->Width, d->Height, d->Depth}, levels, flags));
}

CU_API CUresult cuMipmappedArrayGetLevel(CUarray* out, CUmipmappedArray m, unsigned level) {
  VMCUDA_ENTER(enter_context_call());
  if (!m) return cu::kInvalidHandle;
  VMCUDA_DRIVER_RUNTIME(cudaGetMipmappedArrayLevel(reinterpret_cast<cudaArray_t*>(out),
                                                   reinterpret_cast<cudaMipmappedArray_const_t>(m), level));
}

CU_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray m) {
  VMCUDA_ENTER(enter_context_call());
  if (!m) return cu::kInvalidHandle;
  VMCUDA_DRIVER_RUNTIME(cudaFreeMipmappedArray(reinterpret_cast<cudaMipmappedArray_t>(m)));
}

// Sparse, deferred-mapping and multi-planar arrays are never made (arrays.cc): these answer
// CUDA_ERROR_INVALID_VALUE for every array, as the runtime's forms do. CUDA_ARRAY_SPARSE_PROPERTIES
// and CUDA_ARRAY_MEMORY_REQUIREMENTS are the runtime's structs, field for field.
CU_API CUresult cuArrayGetSparseProperties(cudaArraySparseProperties* out, CUarray a) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaArrayGetSparseProperties(out, rt(a)));
}
CU_API CUresult cuMipmappedArrayGetSparseProperties(cudaArraySparseProperties* out, CUmipmappedArray m) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMipmappedArrayGetSparseProperties(out, reinterpret_cast<cudaMipmappedArray_t>(m)));
}
CU_API CUresult cuArrayGetMemoryRequirements(cudaArrayMemoryRequirements* out, CUarray a, CUdevice dev) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaArrayGetMemoryRequirements(out, rt(a), dev));
}
CU_API CUresult cuMipmappedArrayGetMemoryRequirements(cudaArrayMemoryRequirements* out, CUmipmappedArray m,
                                                      CUdevice dev) {
  VMCUDA_DRIVER_IN_CONTEXT(
      cudaMipmappedArrayGetMemoryRequirements(out, reinterpret_cast<cudaMipmappedArray_t>(m), dev));
}
CU_API CUresult cuArrayGetPlane(CUarray* plane, CUarray a, unsigned idx) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaArrayGetPlane(reinterpret_cast<cudaArray_t*>(plane), rt(a), idx));
}

// ------------------------------------------------------------------ copies naming arrays
// cuMemcpy?toA / Ato?: a byte offset into the array, rows one after the other (the runtime's
// cudaMemcpyToArray and kin take the offset as a column and a row).

namespace {

CUresult to_array(CUarray dst, size_t offset, const void* src, size_t bytes, cudaMemcpyKind kind, bool async,
                  CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  const size_t row = row_bytes(dst);
  if (row == 0) return cu::kInvalidHandle;
  KeepRuntimeLastError keep;
  return to_cu_result(async ? cudaMemcpyToArrayAsync(rt(dst), offset % row, offset / row, src, bytes, kind, s)
                            : cudaMemcpyToArray(rt(dst), offset % row, offset / row, src, bytes, kind));
}

CUresult from_array(void* dst, CUarray src, size_t offset, size_t bytes, cudaMemcpyKind kind, bool async, CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  const size_t row = row_bytes(src);
  if (row == 0) return cu::kInvalidHandle;
  KeepRuntimeLastError keep;
  return to_cu_result(async ? cudaMemcpyFromArrayAsync(dst, rt(src), offset % row, offset / row, bytes, kind, s)
                            : cudaMemcpyFromArray(dst, rt(src), offset % row, offset / row, bytes, kind));
}

CUresult array_to_array(CUarray dst, size_t dst_offset, CUarray src, size_t src_offset, size_t bytes) {
  VMCUDA_ENTER(enter_context_call());
  const size_t drow = row_bytes(dst), srow = row_bytes(src);
  if (drow == 0 || srow == 0) return cu::kInvalidHandle;
  KeepRuntimeLastError keep;
  return to_cu_result(cudaMemcpyArrayToArray(rt(dst), dst_offset % drow, dst_offset / drow, rt(src), src_offset % srow,
                                             src_offset / srow, bytes, cudaMemcpyDeviceToDevice));
}

}  // namespace

// The _ptds forms: synchronous copies, ordered here with the legacy default stream, which
// waits for at least as much as the per-thread one (the same bytes arrive).
#define VMCUDA_WITH_PTDS(ret, name, params, args) \
  CU_API ret name params { return name##_impl args; } \
  CU_API ret name##_ptds params { return name##_impl args; }

namespace {
CUresult cuMemcpyHtoA_v2_impl(CUarray dst, size_t off, const void* src, size_t n) {
  return to_array(dst, off, src, n, cudaMemcpyHostToDevice, false, nullptr);
}
CUresult cuMemcpyAtoH_v2_impl(void* dst, CUarray src, size_t off, size_t n) {
  return from_array(dst, src, off, n, cudaMemcpyDeviceToHost, false, nullptr);
}
CUresult cuMemcpyDtoA_v2_impl(CUarray dst, size_t off, CUdeviceptr src, size_t n) {
  return to_array(dst, off, dptr(src), n, cudaMemcpyDeviceToDevice, false, nullptr);
}
CUresult cuMemcpyAtoD_v2_impl(CUdeviceptr dst, CUarray src, size_t off, size_t n) {
  return from_array(dptr(dst), src, off, n, cudaMemcpyDeviceToDevice, false, nullptr);
}
CUresult cuMemcpyAtoA_v2_impl(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) {
  return array_to_array(dst, doff, src, soff, n);
}
CUresult cuMemcpy3D_v2_impl(const CUDA_MEMCPY3D_st* c) {
  VMCUDA_ENTER(enter_context_call());
  return copy_3d_driver(c, false, nullptr);
}
}  // namespace

VMCUDA_WITH_PTDS(CUresult, cuMemcpyHtoA_v2, (CUarray dst, size_t off, const void* src, size_t n), (dst, off, src, n))
VMCUDA_WITH_PTDS(CUresult, cuMemcpyAtoH_v2, (void* dst, CUarray src, size_t off, size_t n), (dst, src, off, n))
VMCUDA_WITH_PTDS(CUresult, cuMemcpyDtoA_v2, (CUarray dst, size_t off, CUdeviceptr src, size_t n), (dst, off, src, n))
VMCUDA_WITH_PTDS(CUresult, cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t off, size_t n), (dst, src, off, n))
VMCUDA_WITH_PTDS(CUresult, cuMemcpyAtoA_v2, (CUarray dst, size_t doff, CUarray src, size_t soff, size_t n),
                 (dst, doff, src, soff, n))
VMCUDA_WITH_PTDS(CUresult, cuMemcpy3D_v2, (const CUDA_MEMCPY3D_st* c), (c))
#undef VMCUDA_WITH_PTDS

CU_API CUresult cuMemcpyHtoAAsync_v2(CUarray dst, size_t off, const void* src, size_t n, CUstream s) {
  return to_array(dst, off, src, n, cudaMemcpyHostToDevice, true, s);
}
CU_API CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dst, size_t off, const void* src, size_t n, CUstream s) {
  return to_array(dst, off, src, n, cudaMemcpyHostToDevice, true, per_thread(s));
}
CU_API CUresult cuMemcpyAtoHAsync_v2(void* dst, CUarray src, size_t off, size_t n, CUstream s) {
  return from_array(dst, src, off, n, cudaMemcpyDeviceToHost, true, s);
}
CU_API CUresult cuMemcpyAtoHAsync_v2_ptsz(void* dst, CUarray src, size_t off, size_t n, CUstream s) {
  return from_array(dst, src, off, n, cudaMemcpyDeviceToHost, true, per_thread(s));
}
CU_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D_st* c, CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  return copy_3d_driver(c, true, s);
}
CU_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D_st* c, CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  return copy_3d_driver(c, true, per_thread(s));
}

// cuMemcpy3DPeer[Async]: CUDA_MEMCPY3D_PEER is CUDA_MEMCPY3D with the source's and the
// destination's contexts where CUDA_MEMCPY3D has reserved0 and reserved1 (NULL: the current
// one). Contexts of one device: cuMemcpy3D; of two: the runtime's cudaMemcpy3DPeer.
extern "C" CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx);
namespace {
CUresult copy_3d_peer_driver(const CUDA_MEMCPY3D_st* c, bool async, CUstream s) {
  VMCUDA_ENTER(enter_context_call());
  if (!c) return cu::kInvalidValue;
  CUdevice src_dev = 0, dst_dev = 0;
  VMCUDA_ENTER(cuCtxGetDevice_v2(&src_dev, static_cast<CUcontext>(c->reserved0)));
  VMCUDA_ENTER(cuCtxGetDevice_v2(&dst_dev, static_cast<CUcontext>(c->reserved1)));
  CUDA_MEMCPY3D_st plain = *c;
  plain.reserved0 = plain.reserved1 = nullptr;
  if (src_dev == dst_dev) return copy_3d_driver(&plain, async, s);
  cudaMemcpy3DParms p{};
  VMCUDA_ENTER(runtime_copy(&plain, &p));
  const cudaMemcpy3DPeerParms q{p.srcArray, p.srcPos, p.srcPtr, src_dev, p.dstArray, p.dstPos, p.dstPtr, dst_dev,
                                p.extent};
  KeepRuntimeLastError keep;
  return to_cu_result(async ? cudaMemcpy3DPeerAsync(&q, s) : cudaMemcpy3DPeer(&q));
}
}  // namespace
CU_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_st* c) { return copy_3d_peer_driver(c, false, nullptr); }
CU_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_st* c) { return copy_3d_peer_driver(c, false, nullptr); }
CU_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_st* c, CUstream s) { return copy_3d_peer_driver(c, true, s); }
CU_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_st* c, CUstream s) {
  return copy_3d_peer_driver(c, true, per_thread(s));
}

// Batched copies (CUDA 12.8): the runtime's (same structs: CUmemcpyAttributes is
// cudaMemcpyAttributes, CUDA_MEMCPY3D_BATCH_OP cudaMemcpy3DBatchOp, a CUdeviceptr a pointer).
// The 12.8 forms' failIdx: the whole batch is checked before any copy, so a failure is never one
// copy's: ~0, as CUDA says for an error not specific to a copy.
namespace {
CUresult fail_index(CUresult e, size_t* fail_idx) {
  if (e != cu::kSuccess && fail_idx) *fail_idx = ~size_t{0};
  return e;
}
}  // namespace
CU_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                      cudaMemcpyAttributes* attrs, size_t* idxs, size_t n, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemcpyBatchAsync(reinterpret_cast<void* const*>(dsts),
                                                reinterpret_cast<const void* const*>(srcs), sizes, count, attrs,
                                                idxs, n, s));
}
CU_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                           cudaMemcpyAttributes* attrs, size_t* idxs, size_t n, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemcpyBatchAsync_ptsz(reinterpret_cast<void* const*>(dsts),
                                                     reinterpret_cast<const void* const*>(srcs), sizes, count, attrs,
                                                     idxs, n, s));
}
CU_API CUresult cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                   cudaMemcpyAttributes* attrs, size_t* idxs, size_t n, size_t* fail_idx, CUstream s) {
  return fail_index(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, count, attrs, idxs, n, s), fail_idx);
}
CU_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                        cudaMemcpyAttributes* attrs, size_t* idxs, size_t n, size_t* fail_idx,
                                        CUstream s) {
  return fail_index(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, count, attrs, idxs, n, s), fail_idx);
}
CU_API CUresult cuMemcpy3DBatchAsync_v2(size_t n, cudaMemcpy3DBatchOp* ops, unsigned long long flags, CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemcpy3DBatchAsync(n, ops, flags, s));
}
CU_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, cudaMemcpy3DBatchOp* ops, unsigned long long flags,
                                             CUstream s) {
  VMCUDA_DRIVER_IN_CONTEXT(cudaMemcpy3DBatchAsync_ptsz(n, ops, flags, s));
}
CU_API CUresult cuMemcpy3DBatchAsync(size_t n, cudaMemcpy3DBatchOp* ops, size_t* fail_idx, unsigned long long flags,
                                     CUstream s) {
  return fail_index(cuMemcpy3DBatchAsync_v2(n, ops, flags, s), fail_idx);
}
CU_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t n, cudaMemcpy3DBatchOp* ops, size_t* fail_idx,
                                          unsigned long long flags, CUstream s) {
  return fail_index(cuMemcpy3DBatchAsync_v2_ptsz(n, ops, flags, s), fail_idx);
}

// ------------------------------------------------------------------ texture and surface objects

namespace {

CUresult runtime_resource(const CUDA_RESOURCE_DESC_st& d, cudaResourceDesc* r) {
  *r = cudaResourceDesc{};
  r->resType = static_cast<cudaResourceType>(d.resType);
  r->flags = d.flags;
  switch (d.resType) {
    case cudaResourceTypeArray: r->res.array.array = rt(d.res.array.hArray); return cu::kSuccess;
    case cudaResourceTypeMipmappedArray:
      r->res.mipmap.mipmap = reinterpret_cast<cudaMipmappedArray_t>(d.res.mipmap.hMipmappedArray);
      return cu::kSuccess;
    case cudaResourceTypeLinear:
      r->res.linear.devPtr = dptr(d.res.linear.devPtr);
      r->res.linear.sizeInBytes = d.res.linear.sizeInBytes;
      return channel_desc(d.res.linear.format, d.res.linear.numChannels, &r->res.linear.desc);
    case cudaResourceTypePitch2D:
      r->res.pitch2D.devPtr = dptr(d.res.pitch2D.devPtr);
      r->res.pitch2D.width = d.res.pitch2D.width;
      r->res.pitch2D.height = d.res.pitch2D.height;
      r->res.pitch2D.pitchInBytes = d.res.pitch2D.pitchInBytes;
      return channel_desc(d.res.pitch2D.format, d.res.pitch2D.numChannels, &r->res.pitch2D.desc);
    default: return cu::kInvalidValue;
  }
}

void driver_resource(const cudaResourceDesc& r, CUDA_RESOURCE_DESC_st* d) {
  *d = CUDA_RESOURCE_DESC_st{};
  d->resType = r.resType;
  d->flags = r.flags;
  switch (r.resType) {
    case cudaResourceTypeArray: d->res.array.hArray = reinterpret_cast<CUarray>(r.res.array.array); break;
    case cudaResourceTypeMipmappedArray:
      d->res.mipmap.hMipmappedArray = reinterpret_cast<CUmipmappedArray>(r.res.mipmap.mipmap);
      break;
    case cudaResourceTypeLinear:
      d->res.linear.devPtr = reinterpret_cast<uintptr_t>(r.res.linear.devPtr);
      d->res.linear.sizeInBytes = r.res.linear.sizeInBytes;
      driver_format(r.res.linear.desc, &d->res.linear.format, &d->res.linear.numChannels);
      break;
    case cudaResourceTypePitch2D:
      d->res.pitch2D.devPtr = reinterpret_cast<uintptr_t>(r.res.pitch2D.devPtr);
      d->res.pitch2D.width = r.res.pitch2D.width;
      d->res.pitch2D.height = r.res.pitch2D.height;
      d->res.pitch2D.pitchInBytes = r.res.pitch2D.pitchInBytes;
      driver_format(r.res.pitch2D.desc, &d->res.pitch2D.format, &d->res.pitch2D.numChannels);
      break;
  }
}

// The runtime's read mode is the driver's CU_TRSF_READ_AS_INTEGER flag: the runtime turns
// cudaReadModeElementType into that flag and nothing else, so every CU_TRSF_* round-trips.
cudaTextureDesc runtime_texture(const CUDA_TEXTURE_DESC_st& d) {
  cudaTextureDesc t{};
  for (int i = 0; i < 3; ++i) t.addressMode[i] = static_cast<cudaTextureAddressMode>(d.addressMode[i]);
  t.filterMode = static_cast<cudaTextureFilterMode>(d.filterMode);
  t.readMode = (d.flags & kReadAsInteger) ? cudaReadModeElementType : cudaReadModeNormalizedFloat;
  t.sRGB = (d.flags & kSrgb) != 0;
  std::memcpy(t.borderColor, d.borderColor, sizeof t.borderColor);
  t.normalizedCoords = (d.flags & kNormalizedCoordinates) != 0;
  t.maxAnisotropy = d.maxAnisotropy;
  t.mipmapFilterMode = static_cast<cudaTextureFilterMode>(d.mipmapFilterMode);
  t.mipmapLevelBias = d.mipmapLevelBias;
  t.minMipmapLevelClamp = d.minMipmapLevelClamp;
  t.maxMipmapLevelClamp = d.maxMipmapLevelClamp;
  t.disableTrilinearOptimization = (d.flags & kDisableTrilinearOptimization) != 0;
  t.seamlessCubemap = (d.flags & kSeamlessCubemap) != 0;
  return t;
}

void driver_texture(const cudaTextureDesc& t, CUDA_TEXTURE_DESC_st* d) {
  *d = CUDA_TEXTURE_DESC_st{};
  for (int i = 0; i < 3; ++i) d->addressMode[i] = t.addressMode[i];
  d->filterMode = t.filterMode;
  d->flags = (t.readMode == cudaReadModeElementType ? kReadAsInteger : 0u) |
             (t.normalizedCoords ? kNormalizedCoordinates : 0u) | (t.sRGB ? kSrgb : 0u) |
             (t.disableTrilinearOptimization ? kDisableTrilinearOptimization : 0u) |
             (t.seamlessCubemap ? kSeamlessCubemap : 0u);
  d->maxAnisotropy = t.maxAnisotropy;
  d->mipmapFilterMode = t.mipmapFilterMode;
  d->mipmapLevelBias = t.mipmapLevelBias;
  d->minMipmapLevelClamp = t.minMipmapLevelClamp;
  d->maxMipmapLevelClamp = t.maxMipmapLevelClamp;
  std::memcpy(d->borderColor, t.borderColor, sizeof d->borderColor);
}

}  // namespace

CU_API CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t* width, int format, unsigned channels, CUdevice dev) {
  VMCUDA_ENTER(enter_driver_call());
  cudaChannelFormatDesc d{};
  if (CUresult e = channel_desc(format, channels, &d)) return e;
  VMCUDA_DRIVER_RUNTIME(cudaDeviceGetTexture1DLinearMaxWidth(width, &d, dev));
}

CU_API CUresult cuTexObjectCreate(CUtexObject* out, const CUDA_RESOURCE_DESC_st* res, const CUDA_TEXTURE_DESC_st* tex,
                                  const cudaResourceViewDesc* view) {
  VMCUDA_ENTER(enter_context_call());
  if (!out || !res || !tex) return cu::kInvalidValue;
  cudaResourceDesc r;
  VMCUDA_ENTER(runtime_resource(*res, &r));
  const cudaTextureDesc t = runtime_texture(*tex);
  // CUDA_RESOURCE_VIEW_DESC has cudaResourceViewDesc's layout.
  VMCUDA_DRIVER_RUNTIME(cudaCreateTextureObject(out, &r, &t, view));
}

CU_API CUresult cuTexObjectDestroy(CUtexObject t) { VMCUDA_DRIVER_IN_CONTEXT(cudaDestroyTextureObject(t)); }

namespace {
// A descriptor getter: the runtime's answer in the driver's form.
template <class RuntimeDesc, class DriverDesc, class Get, class Convert>
CUresult get_descriptor(DriverDesc* out, Get get, Convert convert) {
  VMCUDA_ENTER(enter_context_call());
  if (!out) return cu::kInvalidValue;
  RuntimeDesc r{};
  {
    KeepRuntimeLastError keep;
    if (cudaError_t e = get(&r)) return to_cu_result(e);
  }
  convert(r, out);
  return cu::kSuccess;
}
}  // namespace

CU_API CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC_st* out, CUtexObject t) {
  return get_descriptor<cudaResourceDesc>(out, [t](cudaResourceDesc* r) { return cudaGetTextureObjectResourceDesc(r, t); },
                                          driver_resource);
}

// CUDA_RESOURCE_VIEW_DESC has cudaResourceViewDesc's layout.
CU_API CUresult cuTexObjectGetResourceViewDesc(cudaResourceViewDesc* out, CUtexObject t) {
  VMCUDA_DRIVER_CALL(cudaGetTextureObjectResourceViewDesc(out, t));
}

CU_API CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC_st* out, CUtexObject t) {
  return get_descriptor<cudaTextureDesc>(out, [t](cudaTextureDesc* d) { return cudaGetTextureObjectTextureDesc(d, t); },
                                         driver_texture);
}

CU_API CUresult cuSurfObjectCreate(CUsurfObject* out, const CUDA_RESOURCE_DESC_st* res) {
  VMCUDA_ENTER(enter_context_call());
  if (!out || !res) return cu::kInvalidValue;
  cudaResourceDesc r;
  VMCUDA_ENTER(runtime_resource(*res, &r));
  VMCUDA_DRIVER_RUNTIME(cudaCreateSurfaceObject(out, &r));
}

CU_API CUresult cuSurfObjectDestroy(CUsurfObject s) { VMCUDA_DRIVER_IN_CONTEXT(cudaDestroySurfaceObject(s)); }

CU_API CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC_st* out, CUsurfObject s) {
  return get_descriptor<cudaResourceDesc>(out, [s](cudaResourceDesc* r) { return cudaGetSurfaceObjectResourceDesc(r, s); },
                                          driver_resource);
}
