// vmcuda's transcription of the cuda.h (CUDA 13.0) types that guest-lib's driver API areas
// use, so that building needs no toolkit. Handles that the runtime shares are the same
// objects (CUstream == cudaStream_t, CUevent == cudaEvent_t, CUdeviceptr == a device void*),
// as natively.
#pragma once

#include <cstddef>

#include "vmcuda/cudart_types.h"

extern "C" {
typedef int CUresult;  // enum cudaError_enum; values: vmcuda/cuda_errors.inc
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long cuuint64_t;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUlib_st* CUlibrary;
typedef struct CUkern_st* CUkernel;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUipcEventHandle_st {
  char reserved[64];
} CUipcEventHandle;
typedef struct CUipcMemHandle_st {
  char reserved[64];
} CUipcMemHandle;
typedef struct CUuuid_st CUuuid;
typedef int CUjit_option;
typedef int CUlibraryOption;
typedef int CUdriverProcAddressQueryResult;

struct CUdevprop {
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int sharedMemPerBlock;
  int totalConstantMemory;
  int SIMDWidth;
  int memPitch;
  int regsPerBlock;
  int clockRate;
  int textureAlign;
};
static_assert(sizeof(CUdevprop) == 56);

// Virtual memory management (cuda.h, CUDA 13.0).
typedef unsigned long long CUmemGenericAllocationHandle;
struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;
};
struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
static_assert(sizeof(CUmemAllocationProp) == 32);
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
};
static_assert(sizeof(CUmemAccessDesc) == 12);
}

namespace vmcuda::cu {
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kInvalidValue = 1;
inline constexpr CUresult kOutOfMemory = 2;
inline constexpr CUresult kNotInitialized = 3;
inline constexpr CUresult kDeinitialized = 4;
inline constexpr CUresult kNoDevice = 100;
inline constexpr CUresult kInvalidDevice = 101;
inline constexpr CUresult kInvalidImage = 200;
inline constexpr CUresult kFileNotFound = 301;
inline constexpr CUresult kInvalidContext = 201;
inline constexpr CUresult kContextAlreadyCurrent = 202;
inline constexpr CUresult kContextIsDestroyed = 709;
inline constexpr CUresult kInvalidHandle = 400;
inline constexpr CUresult kNotFound = 500;
inline constexpr CUresult kNotReady = 600;
inline constexpr CUresult kPrimaryContextActive = 708;
inline constexpr CUresult kLaunchOutOfResources = 701;
inline constexpr CUresult kNotSupported = 801;
inline constexpr CUresult kNotPermitted = 800;
inline constexpr CUresult kUnknown = 999;

// CUpointer_attribute
inline constexpr int kPointerContext = 1, kPointerMemoryType = 2, kPointerDevicePointer = 3,
                     kPointerHostPointer = 4, kPointerSyncMemops = 6, kPointerBufferId = 7, kPointerIsManaged = 8,
                     kPointerDeviceOrdinal = 9, kPointerRangeStart = 11, kPointerRangeSize = 12, kPointerMapped = 13;
// CUmemorytype
inline constexpr unsigned kMemoryTypeHost = 1, kMemoryTypeDevice = 2, kMemoryTypeUnified = 4;
// Virtual memory management: CUmemAllocationType, CUmemLocationType, CUmemAllocationHandleType,
// CUmemAccess_flags, CUmemAllocationGranularity_flags
inline constexpr int kMemAllocationTypePinned = 1;
inline constexpr int kMemLocationTypeDevice = 1;
inline constexpr int kMemHandleTypeNone = 0, kMemHandleTypePosixFd = 1, kMemHandleTypeWin32 = 2,
                     kMemHandleTypeWin32Kmt = 4, kMemHandleTypeFabric = 8;
inline constexpr int kMemAccessNone = 0, kMemAccessRead = 1, kMemAccessReadWrite = 3;
inline constexpr int kMemGranularityMinimum = 0, kMemGranularityRecommended = 1;
// cuGetProcAddress flags and statuses
inline constexpr cuuint64_t kProcLegacyStream = 1, kProcPerThreadStream = 2;
inline constexpr int kProcSuccess = 0, kProcSymbolNotFound = 1, kProcVersionNotSufficient = 2;
// cuLaunchKernel's `extra`
inline void* const kLaunchParamEnd = nullptr;
inline void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(1);
inline void* const kLaunchParamBufferSize = reinterpret_cast<void*>(2);
}  // namespace vmcuda::cu
