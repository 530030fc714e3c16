// The size of a cuBLAS alpha/beta whose type a compute type gives (cublasGemmEx and its
// batched forms): what both sides copy in pointer mode host. One place for guest and host.
#pragma once

#include <cstddef>

namespace vmcuda::api {

// cublasComputeType_t (cublas_api.h), or the cudaDataType older programs pass as the compute
// type (CUDA_R_16F 2, CUDA_R_32F 0, CUDA_R_64F 1, CUDA_R_32I 10, CUDA_C_32F 4, CUDA_C_64F 5).
// 0: unknown (the call answers CUBLAS_STATUS_NOT_SUPPORTED). TODO(remoting): a 32F compute
// type with complex matrices takes a cuComplex scalar; vmcuda copies 4 bytes of it.
constexpr size_t cublas_scalar_bytes(int compute_type) {
  switch (compute_type) {
    case 64: case 65: case 2:                     // CUBLAS_COMPUTE_16F[_PEDANTIC]: __half
      return 2;
    case 68: case 69: case 74: case 75: case 77: case 78: case 0:  // CUBLAS_COMPUTE_32F*: float
    case 72: case 73: case 10:                    // CUBLAS_COMPUTE_32I[_PEDANTIC]: int
      return 4;
    case 70: case 71: case 79: case 1:            // CUBLAS_COMPUTE_64F*: double
    case 4:                                       // CUDA_C_32F: cuComplex
      return 8;
    case 5:                                       // CUDA_C_64F: cuDoubleComplex
      return 16;
    default:
      return 0;
  }
}

}  // namespace vmcuda::api
