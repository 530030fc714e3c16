// The driver API's 3D copy (driver_array.cc), for cuMemcpy2D naming an array (driver.cc).
#pragma once

#include "vmcuda/cuda_driver_types.h"
#include "vmcuda/cudart_api.h"

extern "C" {
struct CUDA_MEMCPY3D_st {  // cuda.h's CUDA_MEMCPY3D (_v2)
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  int srcMemoryType;  // CUmemorytype
  const void* srcHost;
  CUdeviceptr srcDevice;
  struct CUarray_st* srcArray;
  void* reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  struct CUarray_st* dstArray;
  void* reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
};
static_assert(sizeof(CUDA_MEMCPY3D_st) == 200);
}

namespace vmcuda::guest {

// cuMemcpy3D[Async] of any memory types (a CUDA array on either side or both), made of the
// runtime's cudaMemcpy3D[Async]. The caller has entered a context call.
CUresult copy_3d_driver(const CUDA_MEMCPY3D_st* c, bool async, CUstream s);
// A CUDA_MEMCPY3D as the runtime's parameters (a graph's memcpy node): the same checks.
CUresult runtime_copy(const CUDA_MEMCPY3D_st* c, cudaMemcpy3DParms* p);
// The runtime's parameters back as a CUDA_MEMCPY3D, the memory sides that are no arrays of
// types src_type and dst_type (CUmemorytype: CU_MEMORYTYPE_UNIFIED where unknown).
void driver_copy(const cudaMemcpy3DParms& p, int src_type, int dst_type, CUDA_MEMCPY3D_st* c);

}  // namespace vmcuda::guest
