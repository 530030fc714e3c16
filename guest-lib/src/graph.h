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
/// The user object calls of both APIs (cudaUserObject* and cuUserObject*, the graphs' retain
/// and release): cudaSuccess or cudaErrorInvalidValue, not recorded. Handles as the wire's.
cudaError_t user_object_create(uint64_t* out, void* ptr, cudaHostFn_t destroy, unsigned initial_refs, unsigned flags);
cudaError_t user_object_retain(uint64_t object, unsigned count);
cudaError_t user_object_release(uint64_t object, unsigned count);
cudaError_t graph_retain_user_object(uint64_t graph, uint64_t object, unsigned count, unsigned flags);
cudaError_t graph_release_user_object(uint64_t graph, uint64_t object, unsigned count);

/// Preconditions for all below: r's lock held.

/// Whether `stream` (a wire handle) is capturing now: asks the host only while a capture
/// this process began is open (none: false at no cost).
bool stream_capturing(Remote& r, uint64_t stream);

/// A mailbox entry for a graph host node that runs `fn(data)` each time the host's gate
/// reaches it (host_func.cc); freed by release_persistent_entry once no graph can reach it.
cudaError_t persistent_host_entry(Remote& r, cudaHostFn_t fn, void* data, vmrpc::wire::HeapRef* mailbox,
                                  uint32_t* index);

/// Gives the persistent entry at `entry_offset` back to the mailbox (a later entry may reuse
/// it; the host's gate of the entry is reused with it). Only when no graph node or executable
/// graph references it and no launch can still reach it. Needs no lock.
void release_persistent_entry(uint64_t entry_offset);
/// How many persistent entries exist (tests).
size_t persistent_entries_in_use();

/// Host node entries that SetParams made (graph_nodes.cc): graph.cc tells when graphs may share
/// them (instantiation, clones, child graph copies, updates), launches and destructions of
/// executable graphs. Each costs nothing until a host node's parameters are set.
void host_entries_shared();
void host_entries_launched(uint64_t exec, uint64_t stream);
void host_entries_exec_destroyed(uint64_t exec);
void host_entries_exec_updated(uint64_t exec);  // cudaGraphExecUpdate: its nodes are the graph's now

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

/// A capture's graph and the nodes the stream's next work depends on (cudaStreamGetCaptureInfo's
/// answer; the graph is this process's from then on). Precondition: r's lock held.
cudaError_t capture_dependencies(Remote& r, uint64_t stream, cudaGraph_t* graph, const cudaGraphNode_t** deps,
                                 size_t* count);

/// Graph memory (graph_memory.cc): alloc and free nodes are empty nodes on the host, their
/// memory the client's arena; what CUDA's graph allocator decides is decided there. Each costs
/// a look-up while the process has none.
bool graph_memory_in(uint64_t graph);                    // the graph holds memory nodes
bool graph_memory_node(uint64_t node, uint32_t* type);   // a memory node: its cudaGraphNodeType
cudaError_t graph_memory_instantiate_check(uint64_t graph);  // one executable graph at a time
void graph_memory_instantiated(uint64_t graph, uint64_t exec, unsigned long long flags);
/// cudaGraphExecUpdate(exec, graph): memory nodes are not updated (the host's graphs hold empty
/// nodes for them): only from the graph `exec` came from, or between graphs without any.
bool graph_memory_update_allowed(uint64_t exec, uint64_t graph);
/// A launch of `exec`: cudaErrorInvalidValue when it would allocate a live allocation again;
/// else the allocations it makes live and frees (their memory stays reserved for graphs).
cudaError_t graph_memory_launch(uint64_t exec);
/// Precondition for these two: r's lock held (memory never launched goes back at once).
void graph_memory_exec_destroyed(Remote& r, uint64_t exec);
void graph_memory_graph_destroyed(Remote& r, uint64_t graph);
/// cudaFree/cudaFreeAsync of `ptr` outside a capture: true when it is graph memory (*e the
/// answer).
bool graph_memory_free(uint64_t ptr, cudaError_t* e);
/// cudaDeviceReset of `device` (after the host's): its graph allocations, and the graphs and
/// executable graphs the host destroyed with them, are forgotten; its attributes start at 0.
void graph_memory_device_reset(int device);
/// cudaMallocAsync / cudaFreeAsync on a capturing stream (wire handle): an alloc or free node
/// of the capture. The free: true when `ptr` is graph memory (*e the answer). r's lock held.
cudaError_t graph_memory_capture_alloc(Remote& r, uint64_t stream, int device, size_t size, void** ptr);
bool graph_memory_capture_free(Remote& r, uint64_t stream, uint64_t ptr, cudaError_t* e);

}  // namespace vmcuda::guest
