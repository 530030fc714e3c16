// Pinned blocks of the shared heap (memory.cc): cudaHostAlloc's memory, and the allocations of
// memory pools of host memory (memory_pool.cc). The host pins each block (portable,
// device-mapped) and charges it to the VM's host memory bound.
#pragma once

#include <cstddef>
#include <optional>

#include "remote.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

// Precondition: r's lock held. A pinned heap block of `size` bytes (> 0), registered with
// the host's driver (portable, device-mapped); nothing and the error otherwise (`call` names
// the CUDA call in the log line of a full heap).
std::optional<vmrpc::HeapBlock> pinned_heap_block(Remote& r, size_t size, const char* call, cudaError_t* error);

// Precondition: r's lock held. Unpins heap block `a` (after the queued calls that may use
// it) and gives it back to the heap.
cudaError_t free_heap_block(Remote& r, const vgpu_db::Allocation& a);

}  // namespace vmcuda::guest
