// Host values (alpha, beta...) a call hands NVIDIA's libraries, copied where every scalar type's
// alignment holds. Inside a request they are only 8-byte aligned, and a cuDoubleComplex is
// 16-byte aligned: cuSPARSE's Z routines load it with aligned instructions, and reading it in
// place crashed the host on the H100 (cusparseZbsrxmv, Zcsrgeam2). One per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vmcuda::host {

class AlignedScalars {
 public:
  static constexpr size_t kMax = 4;     // scalars one call hands a library
  static constexpr size_t kBytes = 16;  // the largest: cuDoubleComplex
  // A copy of `bytes` (at most kBytes) of `value`, 16-byte aligned; nullptr beyond kMax.
  const void* keep(const void* value, size_t bytes) {
    if (used_ == kMax || bytes > kBytes) return nullptr;
    return std::memcpy(slots_[used_++], value, bytes);
  }

 private:
  alignas(16) uint8_t slots_[kMax][kBytes]{};
  size_t used_ = 0;
};

}  // namespace vmcuda::host
