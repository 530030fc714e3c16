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
// cudaMemset2D or cudaMemset2DAsync, likewise: device memory, or pinned, managed or
// registered host memory (memset_2d_host). `element`: 1, or 2 or 4 (the driver's
// cuMemsetD2D16/32: `value`'s low bytes repeated; `width` and `pitch` in bytes).
cudaError_t memset_2d(void* dst, uint64_t pitch, int value, uint64_t width, uint64_t height,
                      std::optional<uint64_t> stream, unsigned element = 1);
// A 2D memset of pinned, managed or registered host memory (as under unified addressing):
// `height` rows of `width` bytes in `element`-byte elements, on a wire stream, or fully
// synchronous without one, as CUDA makes memsets of such memory; cudaErrorInvalidValue for
// other memory. Precondition: Remote::lock() not held.
cudaError_t memset_2d_host(void* dst, uint64_t pitch, uint32_t value, unsigned element, uint64_t width, uint64_t height,
                           std::optional<uint64_t> stream);
// The driver's cuMemsetD2D8/16/32[Async] (`async`: on `stream`, else the legacy stream), any
// memory memset_2d takes: enters the runtime's device call first. Not recorded as the last error.
cudaError_t memset_2d_elements(void* dst, uint64_t pitch, uint32_t value, unsigned element, uint64_t width,
                               uint64_t height, cudaStream_t stream, bool async);

}  // namespace vmcuda::guest
