// What guest and host agree on for cuSPARSE's and cuSOLVER's calls (scripts/gen-nvobj.py): the
// bytes of a scalar (alpha, beta) of a cudaDataType, copied by value in host pointer mode.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vmcuda::api {

// Bytes of one value of cudaDataType `t` (library_types.h), 0 for a type not known here. At most
// 16 (a double complex): the wire's scalar field.
constexpr size_t data_type_bytes(int32_t t) {
  switch (t) {
    case 3: case 8: case 16: case 17: case 18: case 19: case 28: case 29: case 30: case 31: case 32: case 33:
      return 1;  // 8-bit integers, 4-bit integers (a byte each), fp8/fp6/fp4
    case 2: case 14: case 7: case 9: case 20: case 22:
      return 2;  // R_16F, R_16BF, C_8I, C_8U, R_16I, R_16U
    case 0: case 6: case 15: case 10: case 12: case 21: case 23:
      return 4;  // R_32F, C_16F, C_16BF, R_32I, R_32U, C_16I, C_16U
    case 1: case 4: case 11: case 13: case 24: case 26:
      return 8;  // R_64F, C_32F, C_32I, C_32U, R_64I, R_64U
    case 5: case 25: case 27:
      return 16;  // C_64F, C_64I, C_64U
  }
  return 0;
}

}  // namespace vmcuda::api
