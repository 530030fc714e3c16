// The 2D copy and memset paths of memory_2d.cc, for the 3D calls (memory_3d.cc), which are
// made of them slice by slice.
#pragma once

#include <cstdint>
#include <optional>

#include "remote.h"
#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

// Largest packed region that travels in a frame (`reply`: that comes back in a reply).
uint64_t inline_limit(Remote& r, bool reply);
// A staging chunk of the shared heap of at most `want` bytes: the chunk knob, halved while
// the heap is short; nothing when not even the smallest fits.
std::optional<vmrpc::HeapBlock> staging_chunk(Remote& r, uint64_t want);

// Bytes that `height` rows of `width` bytes, `pitch` apart, span (pitch >= width,
// height > 0); false when that overflows.
bool span_of(uint64_t pitch, uint64_t width, uint64_t height, uint64_t* span);

// cudaMemcpy2D (no stream) or cudaMemcpy2DAsync on a wire stream handle: every check of
// the public calls, not recorded as the last error. Precondition: Remote::lock() not held.
cudaError_t copy_2d(void* dst, uint64_t dpitch, const void* src, uint64_t spitch, uint64_t width, uint64_t height,
                    cudaMemcpyKind kind, std::optional<uint64_t> stream);
// cudaMemset2D or cudaMemset2DAsync, likewise.
cudaError_t memset_2d(void* dst, uint64_t pitch, int value, uint64_t width, uint64_t height,
                      std::optional<uint64_t> stream);

}  // namespace vmcuda::guest
