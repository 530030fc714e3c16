// cuDNN facts both sides use (guest-lib/src/cudnn.cc, host-stub/src/cudnn.cc): statuses, the
// backend API's attribute types and the size of one element of each (cudnn_graph.h
// cudnnBackendAttributeType_t; the C type of each is in NVIDIA's backend documentation, not in
// the header), and the descriptor types and attributes the remoting treats specially.
// tests/guest-lib/cudnn_abi_test.cc checks them against cudnn_graph.h where it is installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vmcuda::api {

// cudnnStatus_t (cudnn_graph.h). cuDNN's statuses are 1000 and up: never a CUDA error's number.
inline constexpr int32_t kCudnnSuccess = 0;
inline constexpr int32_t kCudnnNotInitialized = 1001;
inline constexpr int32_t kCudnnBadParam = 2000;
inline constexpr int32_t kCudnnBadParamNullPointer = 2002;
inline constexpr int32_t kCudnnBadParamNotFinalized = 2004;
inline constexpr int32_t kCudnnBadParamAttributeType = 2010;
inline constexpr int32_t kCudnnBadParamDescriptorType = 2012;
inline constexpr int32_t kCudnnNotSupported = 3000;
inline constexpr int32_t kCudnnInternalError = 4000;
inline constexpr int32_t kCudnnHostAllocationFailed = 4003;  // CUDNN_STATUS_ALLOC_FAILED's value
inline constexpr int32_t kCudnnDeviceAllocationFailed = 4004;  // CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
inline constexpr int32_t kCudnnExecutionFailed = 5000;
inline constexpr bool cudnn_is_status(int32_t s) { return s == 0 || (s >= 1000 && s < 6000); }

// cudnnBackendAttributeType_t values with a meaning of their own on the wire.
inline constexpr int32_t kCudnnTypeHandle = 0;              // a cudnnHandle_t: translated
inline constexpr int32_t kCudnnTypeVoidPtr = 6;             // a device pointer: passed as it is
inline constexpr int32_t kCudnnTypeBackendDescriptor = 15;  // a descriptor: translated
inline constexpr int32_t kCudnnTypeChar = 24;

// Bytes of one element of attribute type `type`; 0 for a type vmcuda does not know (a newer
// header's), which both sides refuse with CUDNN_STATUS_NOT_SUPPORTED.
inline constexpr size_t cudnn_element_bytes(int32_t type) {
  switch (type) {
    case 0:  // CUDNN_TYPE_HANDLE (cudnnHandle_t)
    case 3:  // INT64
    case 5:  // DOUBLE
    case 6:  // VOID_PTR
    case 15:  // BACKEND_DESCRIPTOR (cudnnBackendDescriptor_t)
      return 8;
    case 2:  // BOOLEAN (bool)
    case 24:  // CHAR
      return 1;
    case 26:  // FRACTION (cudnnFraction_t: two int64_t)
      return 16;
    case 4:  // FLOAT
    case 23:  // INT32
    case 1: case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 14: case 16: case 17: case 18:
    case 19: case 20: case 21: case 22: case 25: case 27: case 28: case 29: case 30:
      return 4;  // enums: cudnnDataType_t, modes, notes, names...
  }
  return 0;
}

// cudnnBackendDescriptorType_t values.
inline constexpr int32_t kCudnnVariantPackDescriptor = 16;  // CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
inline constexpr int32_t kCudnnDescriptorTypes = 44;        // one past CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR

// The most bytes of elements one attribute call carries (a variant pack of many tensors, a JSON
// string); more is refused with CUDNN_STATUS_NOT_SUPPORTED (logged).
inline constexpr size_t kCudnnMaxAttributeBytes = 64 << 10;

}  // namespace vmcuda::api
