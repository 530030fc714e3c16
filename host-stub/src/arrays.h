// What arrays.cc and suspend.cc both need to know of a CUDA array.
#pragma once

#include <cstddef>
#include <cstdint>

#include "driver_api.h"

namespace vmcuda::host {

// Bytes of one element of `format` (CUarray_format) with `channels` channels, or 0 when
// either is not one vmcuda passes on.
uint64_t element_bytes(uint32_t format, uint32_t channels);
// A mipmapped array's level `level` (each level halves width, height and, unless layered or
// cubemap, depth, never below 1; zero sizes stay zero).
CUDA_ARRAY3D_DESCRIPTOR level_desc(const CUDA_ARRAY3D_DESCRIPTOR& d, uint32_t level);
// The texel bytes of an array (levels 0) or of every level of a mipmapped array: what the
// VM's quota pays and what a suspend saves; false when they overflow or the format is unknown.
bool array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d, uint32_t levels, uint64_t* bytes);
// Texture and surface object values a resume gives back (from 1, gaps filled with placeholders
// meanwhile): a bound on what a state file can make it create.
inline constexpr uint64_t kMaxTextureObjectValue = 1u << 20;
// The whole of `array` (described by `d`) from or into packed host bytes (synchronous, in the
// current context).
CUresult copy_array_contents(const DriverApi& api, CUarray array, const CUDA_ARRAY3D_DESCRIPTOR& d, std::byte* host,
                             bool to_array);

}  // namespace vmcuda::host
