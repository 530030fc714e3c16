// Large memcpy on several threads: one thread cannot read and write memory as fast as the
// GPU's DMA, so pageable copies through the staging chunks would be limited by it.
#pragma once

#include <cstddef>

namespace vmcuda::guest {

// Copies `bytes` from `src` to `dst` (not overlapping), splitting large copies across a
// small pool of threads (knob VMCUDA_COPY_THREADS) and the caller.
void parallel_copy(void* dst, const void* src, size_t bytes) noexcept;

}  // namespace vmcuda::guest
