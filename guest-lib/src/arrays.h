// The array copies of arrays.cc, for cudaMemcpy3D[Async] naming an array (memory_3d.cc).
#pragma once

#include <cstdint>
#include <optional>

#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

// One side of a copy that is an array: the cudaArray_t and where in it (x in bytes).
struct ArrayEnd {
  const void* array;
  uint64_t x, y, z;
};
// The other side: memory at `ptr` (rows `pitch` bytes apart, slices `rows` rows apart), or
// (ptr null) the array `other_array` at (x in bytes, y, z).
struct MemEnd {
  void* ptr;
  const void* other_array;
  uint64_t pitch, rows;
  uint64_t x, y, z;
};

// A copy of `w` bytes x `h` rows x `d` slices between an array and memory or another array;
// `from`: the array is the source. Every check of the public calls, not recorded as the last
// error. `stream`: a wire stream handle (async), or nothing (synchronous).
// Precondition: Remote::lock() not held.
cudaError_t copy_array(const ArrayEnd& array, const MemEnd& other, uint64_t w, uint64_t h, uint64_t d, bool from,
                       cudaMemcpyKind kind, std::optional<uint64_t> stream);

// cudaDeviceReset of `device`: its arrays, texture and surface objects are gone (the host
// freed them).
void forget_arrays(int device);

// The bytes of one element of the array `a`, or 0 when `a` is no array of this process.
uint64_t array_element_bytes(const void* a);

}  // namespace vmcuda::guest
