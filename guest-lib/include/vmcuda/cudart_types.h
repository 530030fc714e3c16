// The CUDA runtime types guest-lib needs, transcribed from CUDA 13.0's driver_types.h and
// vector_types.h so that the guest library builds without the toolkit. Only layout and
// values matter (they cross the C ABI of libcudart.so.13); the static_asserts below pin the
// sizes, and tests/guest-lib/abi_parity_test.cc checks every value, size and offset against
// NVIDIA's own headers where the toolkit is installed. Add a type here when an API area
// needs it, together with its parity check.
//
// Everything is declared in the global namespace with NVIDIA's spelling, so that an
// implementation reads like the documentation. A test that includes NVIDIA's headers too
// defines VMCUDA_CUDART_PARITY_NAMESPACE first, which moves all of this into that namespace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#ifdef VMCUDA_CUDART_PARITY_NAMESPACE
#define VMCUDA_CUDART_BEGIN namespace VMCUDA_CUDART_PARITY_NAMESPACE {
#define VMCUDA_CUDART_END }
#else
#define VMCUDA_CUDART_BEGIN
#define VMCUDA_CUDART_END
#endif

VMCUDA_CUDART_BEGIN

/// The runtime version this library reports (CUDART_VERSION of CUDA 13.0).
inline constexpr int kCudartVersion = 13000;

/// cudaError_t: every value NVIDIA's libcudart.so.13 names (generated list).
enum cudaError {
#define VMCUDA_CUDART_ERROR(name, value, string) name = value,
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
};
typedef enum cudaError cudaError_t;
static_assert(sizeof(cudaError_t) == 4);

/// vector_types.h: uint3 and dim3 (dim3's members default to 1, as NVIDIA's constructor does).
struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3() = default;
  constexpr dim3(unsigned int vx, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
static_assert(sizeof(uint3) == 12 && sizeof(dim3) == 12 && alignof(dim3) == 4);
// Passed by value in registers, as NVIDIA's (trivially copyable) dim3 is.
static_assert(std::is_trivially_copyable_v<dim3>);

/// driver_types.h: cudaChannelFormatKind and cudaChannelFormatDesc.
enum cudaChannelFormatKind {
  cudaChannelFormatKindSigned = 0,
  cudaChannelFormatKindUnsigned = 1,
  cudaChannelFormatKindFloat = 2,
  cudaChannelFormatKindNone = 3,
  cudaChannelFormatKindNV12 = 4,
  cudaChannelFormatKindUnsignedNormalized8X1 = 5,
  cudaChannelFormatKindUnsignedNormalized8X2 = 6,
  cudaChannelFormatKindUnsignedNormalized8X4 = 7,
  cudaChannelFormatKindUnsignedNormalized16X1 = 8,
  cudaChannelFormatKindUnsignedNormalized16X2 = 9,
  cudaChannelFormatKindUnsignedNormalized16X4 = 10,
  cudaChannelFormatKindSignedNormalized8X1 = 11,
  cudaChannelFormatKindSignedNormalized8X2 = 12,
  cudaChannelFormatKindSignedNormalized8X4 = 13,
  cudaChannelFormatKindSignedNormalized16X1 = 14,
  cudaChannelFormatKindSignedNormalized16X2 = 15,
  cudaChannelFormatKindSignedNormalized16X4 = 16,
  cudaChannelFormatKindUnsignedBlockCompressed1 = 17,
  cudaChannelFormatKindUnsignedBlockCompressed1SRGB = 18,
  cudaChannelFormatKindUnsignedBlockCompressed2 = 19,
  cudaChannelFormatKindUnsignedBlockCompressed2SRGB = 20,
  cudaChannelFormatKindUnsignedBlockCompressed3 = 21,
  cudaChannelFormatKindUnsignedBlockCompressed3SRGB = 22,
  cudaChannelFormatKindUnsignedBlockCompressed4 = 23,
  cudaChannelFormatKindSignedBlockCompressed4 = 24,
  cudaChannelFormatKindUnsignedBlockCompressed5 = 25,
  cudaChannelFormatKindSignedBlockCompressed5 = 26,
  cudaChannelFormatKindUnsignedBlockCompressed6H = 27,
  cudaChannelFormatKindSignedBlockCompressed6H = 28,
  cudaChannelFormatKindUnsignedBlockCompressed7 = 29,
  cudaChannelFormatKindUnsignedBlockCompressed7SRGB = 30,
  cudaChannelFormatKindUnsignedNormalized1010102 = 31,
};

struct cudaChannelFormatDesc {
  int x;
  int y;
  int z;
  int w;
  enum cudaChannelFormatKind f;
};
// 20 bytes: returned through a hidden pointer (SysV class MEMORY), like NVIDIA's.
static_assert(sizeof(cudaChannelFormatDesc) == 20 && offsetof(cudaChannelFormatDesc, f) == 16);

/// driver_types.h: cudaMemcpyKind.
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

/// Opaque handles. The guest library makes these up itself (virtual handles); only their
/// size (a pointer) is fixed by the ABI.
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUkern_st* cudaKernel_t;

VMCUDA_CUDART_END

/// driver_types.h: stream and event flags and the special streams. Macros, as NVIDIA's are
/// (so they are global even under VMCUDA_CUDART_PARITY_NAMESPACE); defined only where
/// NVIDIA's headers have not defined them already.
#ifndef cudaStreamDefault
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04
#define cudaEventRecordDefault 0x00
#define cudaEventRecordExternal 0x01
#define cudaEventWaitDefault 0x00
#define cudaEventWaitExternal 0x01
#endif
