// What the graph area (graph.cc) shares with the launch and host function areas.
#pragma once

#include <cstdint>
#include <vector>

#include "remote.h"
#include "vmcuda/api/wire.h"
#include "vmcuda/cudart_types.h"
#include "vmrpc/wire.h"

namespace vmcuda::guest {
struct HostKernel;  // host_objects.h

/// The Remote for a graph call that needs the device, or nullptr and the error to return
/// (recorded).
Remote* graph_enter(cudaError_t* e);

/// One side of a memcpy node as the wire carries it, checked: device memory of this process
/// or pinned shared-heap memory (pageable memory and arrays: cudaErrorNotSupported, logged).
cudaError_t graph_memcpy_side(const cudaPitchedPtr& p, const cudaPos& pos, const cudaExtent& ext, cudaArray_t array,
                              api::GraphMemcpySide* s);

/// Whether `graph` is one of this process's live graphs (made, captured or cloned by it).
bool graph_known(uint64_t graph);

/// User objects' references (user_objects.cc) follow graphs: `to` gets `from`'s (a clone, a
/// child graph node's copy); a destroyed graph gives its back; an executable graph gets its
/// graph's, and gives them back once the work of its launches (on the streams named) is done.
/// Each costs nothing until the process makes a user object.
void user_objects_graph_copied(uint64_t from, uint64_t to);
void user_objects_graph_destroyed(uint64_t graph);
void user_objects_instantiated(uint64_t graph, uint64_t exec);
void user_objects_launched(uint64_t exec, uint64_t stream);
void user_objects_exec_destroyed(uint64_t exec);

/// Preconditions for all below: r's lock held.

/// Whether `stream` (a wire handle) is capturing now: asks the host only while a capture
/// this process began is open (none: false at no cost).
bool stream_capturing(Remote& r, uint64_t stream);

/// A mailbox entry for a graph host node that runs `fn(data)` each time the host's gate
/// reaches it (host_func.cc); never freed.
cudaError_t persistent_host_entry(Remote& r, cudaHostFn_t fn, void* data, vmrpc::wire::HeapRef* mailbox,
                                  uint32_t* index);

/// The function and data of the persistent entry at `entry_offset` in the shared heap (a
/// graph host node's, as the host names it); false when it is none of this process's.
bool persistent_host_function(Remote& r, uint64_t entry_offset, cudaHostFn_t* fn, void** data);

/// A kernel node's kernel given as a driver object (CUfunction, CUkernel, cudaKernel_t): its
/// HostKernel in *k (nullptr for a registered kernel's host stub). Call without the client's
/// lock (a CUkernel's module may load).
cudaError_t graph_kernel_object(const void* func, HostKernel** k);
/// A kernel launch's configuration checked and its arguments packed as a launch's
/// (launch.cc): the host's function handle and the packed parameters. `k`: what
/// graph_kernel_object found (else `func` is a registered kernel); `extra` is cuLaunchKernel's
/// (nullptr: `args`). Precondition: r's lock held.
cudaError_t pack_kernel(Remote& r, HostKernel* k, const void* func, dim3 grid, dim3 block, size_t shared, void** args,
                        void** extra, uint64_t* function, std::vector<std::byte>* packed);

}  // namespace vmcuda::guest
