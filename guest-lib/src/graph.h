// What the graph area (graph.cc) shares with the launch and host function areas.
#pragma once

#include <cstdint>
#include <vector>

#include "remote.h"
#include "vmcuda/cudart_types.h"
#include "vmrpc/wire.h"

namespace vmcuda::guest {

/// Preconditions for all: r's lock held.

/// Whether `stream` (a wire handle) is capturing now: asks the host only while a capture
/// this process began is open (none: false at no cost).
bool stream_capturing(Remote& r, uint64_t stream);

/// A mailbox entry for a graph host node that runs `fn(data)` each time the host's gate
/// reaches it (host_func.cc); never freed.
cudaError_t persistent_host_entry(Remote& r, cudaHostFn_t fn, void* data, vmrpc::wire::HeapRef* mailbox,
                                  uint32_t* index);

/// A kernel launch's configuration checked and its arguments packed as a launch's
/// (launch.cc): the host's function handle and the packed parameters.
cudaError_t pack_kernel(Remote& r, const void* func, dim3 grid, dim3 block, size_t shared, void** args,
                        uint64_t* function, std::vector<std::byte>* packed);

}  // namespace vmcuda::guest
