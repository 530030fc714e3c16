// cuBLASLt facts both sides need (cublasLt.h, CUDA 13), in one place: the size of alpha/beta
// for a scale type, which of them the pointer mode makes device pointers, which descriptor
// attributes carry device pointers, and the heuristic result's size. The wire structs are
// generated (scripts/gen-cublas.py --lib cublasLt).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vmcuda::api {

// cublasLtMatmulHeuristicResult_t: cublasLtMatmulAlgo_t (8 x uint64_t), size_t workspaceSize,
// cublasStatus_t state, float wavesCount, int reserved[4]. Its algo travels as these bytes.
inline constexpr size_t kLtAlgoBytes = 64;
inline constexpr size_t kLtHeuristicResultBytes = 96;
// At most this many heuristic results per call (PyTorch asks for 1; a request for more gets
// this many at most, as a library with fewer candidates would answer).
inline constexpr int kLtMaxHeuristicResults = 64;
// An attribute value crosses as bytes: at most this many (cuBLASLt's are 4 or 8 bytes).
inline constexpr size_t kLtMaxAttributeBytes = 256;
// An algorithm capability may be an array (CUBLASLT_ALGO_CAP_TILE_IDS, _STAGES_IDS: uint32_t
// per tile or stage; CUDA 13 knows fewer than 200 of each): at most this many bytes cross.
inline constexpr size_t kLtMaxCapabilityBytes = 4096;
// cublasLtMatmulAlgoGetIds: at most this many ids per call (CUDA 13 has a few dozen).
inline constexpr int kLtMaxAlgoIds = 1024;

// cublasLtMatmulDescAttributes_t values the remoting looks at.
inline constexpr int32_t kLtDescScaleType = 1, kLtDescPointerMode = 2;
// The attributes vmcuda forwards: those cublasLt.h (13.0) declares, plain values or device
// pointers (below). Any other (CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR 38, a host object;
// numbers another release gave or will give a meaning) is not supported: its value could be
// a host pointer the host's library would follow.
constexpr bool lt_desc_attribute_forwarded(int32_t attr) {  // CUBLASLT_MATMUL_DESC_*
  return (attr >= 0 && attr <= 8) || (attr >= 10 && attr <= 15) || (attr >= 17 && attr <= 26) ||
         (attr >= 31 && attr <= 37);
}
constexpr bool lt_layout_attribute_forwarded(int32_t attr) { return attr >= 0 && attr <= 8; }  // CUBLASLT_MATRIX_LAYOUT_*
constexpr bool lt_preference_attribute_forwarded(int32_t attr) {  // CUBLASLT_MATMUL_PREF_*
  return attr == 0 || attr == 1 || attr == 3 || (attr >= 5 && attr <= 9) || attr == 12;
}

// Matmul descriptor attributes whose value is a device pointer (bias, epilogue aux, the fp8
// scale and amax pointers): passed as they are, checked to be the client's memory.
constexpr bool lt_desc_attribute_is_pointer(int32_t attr) {
  switch (attr) {
    case 8: case 11: case 17: case 18: case 19: case 20: case 21: case 23: case 24: case 36:
      return true;
  }
  return false;
}

// cublasLtPointerMode_t: HOST 0 (both host values), DEVICE 1 and DEVICE_VECTOR 2 (both device
// pointers), ALPHA_DEVICE_VECTOR_BETA_ZERO 3 and ALPHA_DEVICE_VECTOR_BETA_HOST 4 (alpha a
// device vector, beta a host value).
constexpr bool lt_pointer_mode_valid(int32_t m) { return m >= 0 && m <= 4; }
constexpr bool lt_alpha_on_device(int32_t mode) { return mode != 0; }
constexpr bool lt_beta_on_device(int32_t mode) { return mode == 1 || mode == 2; }

// The size of alpha/beta for a scale type (cudaDataType_t); 0: one vmcuda does not know.
constexpr size_t lt_scalar_bytes(int32_t scale_type) {
  switch (scale_type) {
    case 0: case 10: return 4;   // CUDA_R_32F, CUDA_R_32I
    case 1: case 4: return 8;    // CUDA_R_64F, CUDA_C_32F
    case 2: case 14: return 2;   // CUDA_R_16F, CUDA_R_16BF
    case 5: return 16;           // CUDA_C_64F
    case 3: case 8: return 1;    // CUDA_R_8I, CUDA_R_8U
  }
  return 0;
}

}  // namespace vmcuda::api
