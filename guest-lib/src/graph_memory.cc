// Graph memory (issue 11): cudaGraphAddMemAllocNode/MemFreeNode, cudaMallocAsync and
// cudaFreeAsync captured from a stream, cudaDeviceGraphMemTrim and the graph memory attributes.
//
// Why it is made this way: graph memory comes from the client's arena like every other
// allocation, so the VM's quota counts it and a suspend saves its bytes with the others. An
// alloc node gets its address at once (the host's Malloc; CUDA fixes the address when the node
// is made, for the graph's life) and the host's graph holds an empty node in its place, with
// the same dependencies; a free node is an empty node too. So the host sees only what it
// already checks and carries (arena allocations, empty nodes, frees): no wire call of its own,
// nothing new for graph_state.cc to save, and a guest can reach no other client's memory.
// What CUDA's graph allocator decides in API order is decided here, in the same order:
//  - an allocation is live from a launch of an executable graph holding its alloc node until a
//    launch holding a free node for it, cudaFree/cudaFreeAsync of it outside the graph, or the
//    next launch of an executable graph instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch;
//    a launch that would allocate a live allocation again fails with cudaErrorInvalidValue;
//  - once no graph or executable graph holds the alloc node and it is not live, its arena
//    memory stays reserved for graphs if a launch ever allocated it, as CUDA's graph allocator
//    keeps its memory: out of the program's reach, a later alloc node of the device takes it
//    again (a block at least as large), and cudaDeviceGraphMemTrim gives it back (the host's
//    Free, queued after the graphs' launches, which waits for them); an alloc node never
//    launched gives its memory back at once (CUDA maps no memory for it);
//    destroying a graph does not free a live allocation, as natively;
//  - cudaDeviceReset: the host's reset frees the device's allocations and destroys its graphs
//    and executable graphs; their memory records go, and the device's attributes start at 0.
// The graph memory attributes are this process's (one client) per device: "used" is the bytes
// of live allocations, "reserved" what the arena holds for graphs (alloc nodes' memory and
// what trim may give back).
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "graph.h"
#include "log.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {

namespace api = vmcuda::api;
using vgpu_db::Allocation;
using vgpu_db::AllocationMap;

namespace {

struct GraphAlloc {
  int device = 0;
  uint64_t bytes = 0;
  uint64_t block = 0;  // the arena block's size (a cached block taken again may be larger)
  cudaMemPoolProps props{};
  std::vector<cudaMemAccessDesc> access;
  uint64_t graph = 0;  // the graph holding the alloc node; 0 once it is destroyed
  uint64_t node = 0;
  std::set<uint64_t> execs;      // executable graphs instantiated with the alloc node
  std::set<uint64_t> freed_in;   // graphs holding a free node for it
  bool live = false;             // allocated by a launch, not freed since
  bool launched = false;         // allocated by a launch once: the graph allocator holds its memory
};

struct MemNode {
  uint64_t graph;
  bool alloc;
  uint64_t dptr;
};

struct ExecMem {
  uint64_t graph = 0;  // the graph it was instantiated from
  bool auto_free = false;
  std::vector<uint64_t> allocs, frees;
};

struct DeviceStats {
  uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0;
};

struct Registry {
  std::mutex mu;
  std::map<uint64_t, GraphAlloc> allocs;                // by address
  std::map<int, std::multimap<uint64_t, uint64_t>> cached;  // per device: block size -> address, held by nothing
  std::map<uint64_t, MemNode> nodes;                    // by node handle
  std::map<uint64_t, std::vector<uint64_t>> by_graph;   // graph -> its memory nodes
  std::map<uint64_t, ExecMem> execs;                    // executable graphs with memory nodes
  std::map<int, DeviceStats> stats;

  void set_live(GraphAlloc& a, bool live) {
    if (a.live == live) return;
    a.live = live;
    a.launched |= live;
    DeviceStats& s = stats[a.device];
    if (live) {
      s.used += a.bytes;
      s.used_high = std::max(s.used_high, s.used);
    } else {
      s.used -= a.bytes;
    }
  }
  // The allocation at `dptr` if nothing holds it any more: forgotten here. Its block stays
  // reserved for the device's next alloc nodes until cudaDeviceGraphMemTrim once a launch
  // allocated it (out of the program's reach meanwhile, as a freed allocation); one never
  // launched (a graph destroyed unlaunched, an invalidated capture) goes into *release, for the
  // caller to give back.
  void cache_if_unheld(uint64_t dptr, std::vector<uint64_t>* release) {
    auto it = allocs.find(dptr);
    if (it == allocs.end() || it->second.graph || !it->second.execs.empty() || it->second.live) return;
    const GraphAlloc& a = it->second;
    if (a.launched) {
      cached[a.device].emplace(a.block, dptr);
      AllocationMap::process().remove(dptr, Allocation::kDevice);
    } else {
      stats[a.device].reserved -= a.block;
      release->push_back(dptr);
    }
    allocs.erase(it);
  }
  bool is_cached(uint64_t dptr) const {
    for (const auto& [device, blocks] : cached)
      for (const auto& [block, p] : blocks)
        if (p == dptr) return true;
    return false;
  }
  // A cached block of `device` of at least `bytes` (the smallest), taken out and device memory
  // of the program again; 0 if none. Precondition: mu held.
  uint64_t take_cached(int device, uint64_t bytes, uint64_t* block) {
    auto& c = cached[device];
    auto it = c.lower_bound(bytes);
    if (it == c.end()) return 0;
    *block = it->first;
    const uint64_t p = it->second;
    c.erase(it);
    AllocationMap::process().add({p, *block, Allocation::kDevice, device, 0});
    return p;
  }
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: entry points may run at exit
  return *r;
}

uint64_t wire(const void* h) { return reinterpret_cast<uint64_t>(h); }

// The arena memory of blocks nothing holds any more goes back, after the work queued so far
// (the host's Free waits for the client's devices). Precondition: r's lock held.
void give_back(Remote& r, const std::vector<uint64_t>& dptrs) {
  for (uint64_t p : dptrs) {
    AllocationMap::process().remove(p, Allocation::kDevice);
    if (cudaError_t e = r.enqueue<api::Call::Free>({p}))
      VMCUDA_LOG(kWarn, "graph", "graph memory %#llx: the host's Free failed (%d)", static_cast<unsigned long long>(p), e);
  }
}

// Allocates `bytes` on `device` from the client's arena (the host's Malloc) and records it as
// device memory. Precondition: r's lock held.
cudaError_t arena_alloc(Remote& r, int device, uint64_t bytes, uint64_t* dptr) {
  int& td = Remote::thread_device();
  const int saved = td;
  td = device;
  const auto res = r.call<api::Call::Malloc>({bytes});
  td = saved;
  if (res.status) return static_cast<cudaError_t>(res.status);
  AllocationMap::process().add({res.reply.ptr, bytes, Allocation::kDevice, device, 0});
  *dptr = res.reply.ptr;
  return cudaSuccess;
}

// Adds an empty node standing for a memory node to `graph` after `deps` (guest-made handle in
// *node). Precondition: r's lock held.
cudaError_t empty_node(Remote& r, uint64_t graph, const uint64_t* deps, size_t count, uint64_t* node) {
  if (count > api::kMaxGraphDeps) return cudaErrorInvalidValue;
  std::vector<std::byte> tail(count * sizeof(uint64_t));
  if (count) std::memcpy(tail.data(), deps, tail.size());
  api::GraphNodeArgs a{};
  a.graph = graph;
  a.node = handles::next();
  a.type = api::kGraphNodeEmpty;
  a.dep_count = static_cast<uint32_t>(count);
  const auto res = r.call<api::Call::GraphAddNode>(a, tail);
  if (res.status) return static_cast<cudaError_t>(res.status);
  *node = a.node;
  return cudaSuccess;
}

// The checks of an alloc node's parameters (cudaGraphAddMemAllocNode's documentation).
cudaError_t check_alloc_params(const Remote& r, const cudaMemAllocNodeParams& p) {
  const int devices = r.handshake().device_count;
  if (p.bytesize == 0 || p.poolProps.allocType != cudaMemAllocationTypePinned ||
      p.poolProps.location.type != cudaMemLocationTypeDevice || p.poolProps.handleTypes != cudaMemHandleTypeNone)
    return cudaErrorInvalidValue;
  if (p.poolProps.location.id < 0 || p.poolProps.location.id >= devices) return cudaErrorInvalidDevice;
  if (p.accessDescCount > static_cast<size_t>(devices) || (p.accessDescCount && !p.accessDescs))
    return cudaErrorInvalidValue;
  for (size_t i = 0; i < p.accessDescCount; ++i) {
    const cudaMemAccessDesc& d = p.accessDescs[i];
    if (d.location.type != cudaMemLocationTypeDevice || d.location.id < 0 || d.location.id >= devices ||
        (d.flags != cudaMemAccessFlagsProtNone && d.flags != cudaMemAccessFlagsProtRead &&
         d.flags != cudaMemAccessFlagsProtReadWrite))
      return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// An alloc node in `graph` after `deps`: its memory from the arena, its empty node, its record.
// Precondition: r's lock held.
cudaError_t add_alloc(Remote& r, uint64_t graph, const uint64_t* deps, size_t count, const cudaMemAllocNodeParams& p,
                      uint64_t* node, uint64_t* dptr) {
  if (cudaError_t e = check_alloc_params(r, p)) return e;
  const int device = p.poolProps.location.id;
  auto& reg = registry();
  uint64_t block = 0;
  {
    std::lock_guard g(reg.mu);
    *dptr = reg.take_cached(device, p.bytesize, &block);
  }
  const bool fresh = *dptr == 0;
  if (fresh) {
    if (cudaError_t e = arena_alloc(r, device, p.bytesize, dptr)) return e;
    block = p.bytesize;
  }
  if (cudaError_t e = empty_node(r, graph, deps, count, node)) {
    if (fresh) {
      give_back(r, {*dptr});
    } else {
      std::lock_guard g(reg.mu);
      reg.cached[device].emplace(block, *dptr);  // reserved as it was
      AllocationMap::process().remove(*dptr, Allocation::kDevice);
    }
    return e;
  }
  std::lock_guard g(reg.mu);
  GraphAlloc a;
  a.device = device;
  a.bytes = p.bytesize;
  a.block = block;
  a.props = p.poolProps;
  a.access.assign(p.accessDescs, p.accessDescs + p.accessDescCount);
  a.graph = graph;
  a.node = *node;
  reg.allocs[*dptr] = std::move(a);
  reg.nodes[*node] = MemNode{graph, true, *dptr};
  reg.by_graph[graph].push_back(*node);
  if (fresh) {
    DeviceStats& s = reg.stats[device];
    s.reserved += block;
    s.reserved_high = std::max(s.reserved_high, s.reserved);
  }
  return cudaSuccess;
}

// A free node of `dptr` in `graph` after `deps`. Precondition: r's lock held.
cudaError_t add_free(Remote& r, uint64_t graph, const uint64_t* deps, size_t count, uint64_t dptr, uint64_t* node) {
  auto& reg = registry();
  {
    std::lock_guard g(reg.mu);
    const auto it = reg.allocs.find(dptr);
    // Not an address an alloc node gave (or one whose graph and executable graphs are gone).
    if (it == reg.allocs.end()) return cudaErrorInvalidValue;
    const GraphAlloc& a = it->second;
    // Freed twice in one graph; in the owning graph and another one (either order).
    if (a.freed_in.contains(graph)) return cudaErrorInvalidValue;
    if (!a.freed_in.empty() && (graph == a.graph || a.freed_in.contains(a.graph))) return cudaErrorInvalidValue;
  }
  if (cudaError_t e = empty_node(r, graph, deps, count, node)) return e;
  std::lock_guard g(reg.mu);
  const auto it = reg.allocs.find(dptr);
  if (it == reg.allocs.end()) return cudaErrorInvalidValue;  // gone meanwhile (another thread)
  it->second.freed_in.insert(graph);
  reg.nodes[*node] = MemNode{graph, false, dptr};
  reg.by_graph[graph].push_back(*node);
  return cudaSuccess;
}

cudaError_t deps_wire(const cudaGraphNode_t* deps, size_t count, std::vector<uint64_t>* out) {
  if (count && !deps) return cudaErrorInvalidValue;
  if (count > api::kMaxGraphDeps) return cudaErrorInvalidValue;
  out->resize(count);
  for (size_t i = 0; i < count; ++i) (*out)[i] = wire(deps[i]);
  return cudaSuccess;
}

// A memory node on a capturing stream: added to the capture's graph after the stream's
// current dependencies, which it then replaces (as cudaStreamGetCaptureInfo and
// cudaStreamUpdateCaptureDependencies let a program do). `alloc`: cudaMallocAsync's (size,
// device; address in *dptr), else cudaFreeAsync's of *dptr. Precondition: r's lock held.
cudaError_t capture_node(Remote& r, uint64_t stream, bool alloc, int device, size_t size, uint64_t* dptr) {
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  size_t count = 0;
  if (cudaError_t e = capture_dependencies(r, stream, &graph, &deps, &count)) return e;
  std::vector<uint64_t> d;
  if (cudaError_t e = deps_wire(deps, count, &d)) return e;
  uint64_t node = 0;
  if (alloc) {
    cudaMemAllocNodeParams p{};
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location = {cudaMemLocationTypeDevice, device};
    p.bytesize = size;
    if (cudaError_t e = add_alloc(r, wire(graph), d.data(), d.size(), p, &node, dptr)) return e;
  } else {
    if (cudaError_t e = add_free(r, wire(graph), d.data(), d.size(), *dptr, &node)) return e;
  }
  const api::CaptureDepsArgs a{stream, 1, /*set*/ 1, 0, 0};
  std::vector<std::byte> tail(sizeof node);
  std::memcpy(tail.data(), &node, sizeof node);
  return static_cast<cudaError_t>(r.call<api::Call::StreamUpdateCaptureDeps>(a, tail).status);
}

}  // namespace

// ---- what graph.cc, memory.cc and memory_pool.cc ask

bool graph_memory_in(uint64_t graph) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto it = reg.by_graph.find(graph);
  return it != reg.by_graph.end() && !it->second.empty();
}

bool graph_memory_node(uint64_t node, uint32_t* type) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto it = reg.nodes.find(node);
  if (it == reg.nodes.end()) return false;
  *type = it->second.alloc ? cudaGraphNodeTypeMemAlloc : cudaGraphNodeTypeMemFree;
  return true;
}

cudaError_t graph_memory_instantiate_check(uint64_t graph) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto it = reg.by_graph.find(graph);
  if (it == reg.by_graph.end()) return cudaSuccess;
  // "Only one instantiation of the graph may exist at any point in time."
  for (uint64_t n : it->second)
    if (const MemNode& m = reg.nodes.at(n); m.alloc && !reg.allocs.at(m.dptr).execs.empty())
      return cudaErrorNotSupported;
  for (const auto& [exec, x] : reg.execs)
    for (uint64_t n : it->second)
      if (const MemNode& m = reg.nodes.at(n); !m.alloc && std::find(x.frees.begin(), x.frees.end(), m.dptr) != x.frees.end())
        return cudaErrorNotSupported;
  return cudaSuccess;
}

void graph_memory_instantiated(uint64_t graph, uint64_t exec, unsigned long long flags) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto it = reg.by_graph.find(graph);
  if (it == reg.by_graph.end() || it->second.empty()) return;
  ExecMem x;
  x.graph = graph;
  x.auto_free = flags & cudaGraphInstantiateFlagAutoFreeOnLaunch;
  for (uint64_t n : it->second) {
    const MemNode& m = reg.nodes.at(n);
    if (m.alloc) {
      x.allocs.push_back(m.dptr);
      reg.allocs.at(m.dptr).execs.insert(exec);
    } else {
      x.frees.push_back(m.dptr);
    }
  }
  reg.execs[exec] = std::move(x);
}

bool graph_memory_update_allowed(uint64_t exec, uint64_t graph) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto x = reg.execs.find(exec);
  const auto n = reg.by_graph.find(graph);
  const bool graph_has = n != reg.by_graph.end() && !n->second.empty();
  if (x == reg.execs.end()) return !graph_has;
  return x->second.graph == graph;  // the same memory nodes; another graph's would be other allocations
}

cudaError_t graph_memory_launch(uint64_t exec) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto it = reg.execs.find(exec);
  if (it == reg.execs.end()) return cudaSuccess;
  const ExecMem& x = it->second;
  if (!x.auto_free)
    for (uint64_t p : x.allocs)
      if (reg.allocs.at(p).live) return cudaErrorInvalidValue;  // unfreed since a previous launch
  for (uint64_t p : x.allocs) reg.set_live(reg.allocs.at(p), true);
  for (uint64_t p : x.frees) {
    const auto a = reg.allocs.find(p);
    if (a == reg.allocs.end()) continue;
    reg.set_live(a->second, false);
    std::vector<uint64_t> never;  // launched: nothing goes back now
    reg.cache_if_unheld(p, &never);
  }
  return cudaSuccess;
}

void graph_memory_exec_destroyed(Remote& r, uint64_t exec) {
  std::vector<uint64_t> release;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    const auto it = reg.execs.find(exec);
    if (it == reg.execs.end()) return;
    for (uint64_t p : it->second.allocs) {
      reg.allocs.at(p).execs.erase(exec);
      reg.cache_if_unheld(p, &release);
    }
    reg.execs.erase(it);
  }
  give_back(r, release);
}

void graph_memory_graph_destroyed(Remote& r, uint64_t graph) {
  std::vector<uint64_t> release;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    const auto it = reg.by_graph.find(graph);
    if (it == reg.by_graph.end()) return;
    for (uint64_t n : it->second) {
      const MemNode m = reg.nodes.at(n);
      reg.nodes.erase(n);
      const auto a = reg.allocs.find(m.dptr);
      if (a == reg.allocs.end()) continue;
      if (m.alloc) {
        a->second.graph = 0;
        reg.cache_if_unheld(m.dptr, &release);
      } else {
        a->second.freed_in.erase(graph);
      }
    }
    reg.by_graph.erase(it);
  }
  give_back(r, release);
}

bool graph_memory_free(uint64_t ptr, cudaError_t* e) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  if (reg.allocs.empty() && reg.cached.empty()) return false;
  if (reg.is_cached(ptr)) {  // freed already; its block is the graph allocator's
    *e = cudaErrorInvalidValue;
    return true;
  }
  const auto it = reg.allocs.find(ptr);
  if (it == reg.allocs.end()) return false;
  GraphAlloc& a = it->second;
  // Freed in its own graph: never outside it; not allocated now: nothing to free.
  if ((a.graph && a.freed_in.contains(a.graph)) || !a.live) {
    *e = cudaErrorInvalidValue;
    return true;
  }
  reg.set_live(a, false);
  std::vector<uint64_t> never;  // live, so launched: nothing goes back now
  reg.cache_if_unheld(ptr, &never);
  *e = cudaSuccess;
  return true;
}

void graph_memory_device_reset(int device) {
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  std::set<uint64_t> gone;  // the device's allocations, which the host's reset freed
  for (auto it = reg.allocs.begin(); it != reg.allocs.end();) {
    if (it->second.device != device) {
      ++it;
      continue;
    }
    gone.insert(it->first);
    it = reg.allocs.erase(it);
  }
  std::erase_if(reg.nodes, [&](const auto& kv) { return gone.contains(kv.second.dptr); });
  for (auto& [graph, nodes] : reg.by_graph) std::erase_if(nodes, [&](uint64_t n) { return !reg.nodes.contains(n); });
  std::erase_if(reg.by_graph, [](const auto& kv) { return kv.second.empty(); });
  std::erase_if(reg.execs, [&](const auto& kv) {
    const ExecMem& x = kv.second;
    return std::any_of(x.allocs.begin(), x.allocs.end(), [&](uint64_t p) { return gone.contains(p); }) ||
           std::any_of(x.frees.begin(), x.frees.end(), [&](uint64_t p) { return gone.contains(p); });
  });
  reg.cached.erase(device);
  reg.stats.erase(device);  // a new context's attributes: all 0
}

cudaError_t graph_memory_capture_alloc(Remote& r, uint64_t stream, int device, size_t size, void** ptr) {
  uint64_t dptr = 0;
  if (cudaError_t e = capture_node(r, stream, true, device, size, &dptr)) return e;
  *ptr = reinterpret_cast<void*>(dptr);
  return cudaSuccess;
}

bool graph_memory_capture_free(Remote& r, uint64_t stream, uint64_t ptr, cudaError_t* e) {
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    if (!reg.allocs.contains(ptr)) return false;
  }
  *e = capture_node(r, stream, false, 0, 0, &ptr);
  return true;
}

}  // namespace vmcuda::guest

using namespace vmcuda::guest;

cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t* pDependencies, size_t numDependencies,
                                     cudaMemAllocNodeParams* nodeParams) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!pGraphNode || !graph || !nodeParams) return record(cudaErrorInvalidValue);
  if (!graph_known(wire(graph))) return record(cudaErrorInvalidValue);
  std::vector<uint64_t> deps;
  if (cudaError_t de = deps_wire(pDependencies, numDependencies, &deps)) return record(de);
  auto lock = r->lock();
  uint64_t node = 0, dptr = 0;
  if (cudaError_t ae = add_alloc(*r, wire(graph), deps.data(), deps.size(), *nodeParams, &node, &dptr))
    return record(ae);
  nodeParams->dptr = reinterpret_cast<void*>(dptr);
  *pGraphNode = reinterpret_cast<cudaGraphNode_t>(node);
  return cudaSuccess;
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                    size_t numDependencies, void* dptr) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (!pGraphNode || !graph || !dptr) return record(cudaErrorInvalidValue);
  if (!graph_known(wire(graph))) return record(cudaErrorInvalidValue);
  std::vector<uint64_t> deps;
  if (cudaError_t de = deps_wire(pDependencies, numDependencies, &deps)) return record(de);
  auto lock = r->lock();
  uint64_t node = 0;
  if (cudaError_t fe = add_free(*r, wire(graph), deps.data(), deps.size(), wire(dptr), &node)) return record(fe);
  *pGraphNode = reinterpret_cast<cudaGraphNode_t>(node);
  return cudaSuccess;
}

// The pool properties and access descriptors given back are the node's own (valid while it
// exists), as CUDA's.
cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node, cudaMemAllocNodeParams* params_out) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!node || !params_out) return record(cudaErrorInvalidValue);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto n = reg.nodes.find(wire(node));
  if (n == reg.nodes.end() || !n->second.alloc) return record(cudaErrorInvalidValue);
  const GraphAlloc& a = reg.allocs.at(n->second.dptr);
  params_out->poolProps = a.props;
  params_out->accessDescs = a.access.empty() ? nullptr : a.access.data();
  params_out->accessDescCount = a.access.size();
  params_out->bytesize = a.bytes;
  params_out->dptr = reinterpret_cast<void*>(n->second.dptr);
  return cudaSuccess;
}

cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr_out) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!node || !dptr_out) return record(cudaErrorInvalidValue);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const auto n = reg.nodes.find(wire(node));
  if (n == reg.nodes.end() || n->second.alloc) return record(cudaErrorInvalidValue);
  void* p = reinterpret_cast<void*>(n->second.dptr);
  std::memcpy(dptr_out, &p, sizeof p);
  return cudaSuccess;
}

namespace {
cudaError_t graph_mem_device(int device) {
  cudaError_t e;
  Remote* r = graph_enter(&e);
  if (!r) return e;
  if (device < 0 || device >= r->handshake().device_count) return record(cudaErrorInvalidDevice);
  return cudaSuccess;
}
}  // namespace

// What no graph, executable graph or live allocation holds goes back to the arena, and the
// device's reserved memory drops by it. An allocation's memory is held for its alloc node's
// life (its address is fixed there), so an executable graph that is not running keeps its
// memory too.
cudaError_t cudaDeviceGraphMemTrim(int device) {
  if (cudaError_t e = graph_mem_device(device)) return e;
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return record(e);
  std::vector<uint64_t> release;
  {
    auto& reg = registry();
    std::lock_guard g(reg.mu);
    for (const auto& [block, p] : reg.cached[device]) {
      release.push_back(p);
      reg.stats[device].reserved -= block;
    }
    reg.cached.erase(device);
  }
  auto lock = r->lock();
  give_back(*r, release);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attr, void* value) {
  if (cudaError_t e = graph_mem_device(device)) return e;
  if (!value) return record(cudaErrorInvalidValue);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  const DeviceStats s = reg.stats[device];
  uint64_t v;
  switch (attr) {
    case cudaGraphMemAttrUsedMemCurrent: v = s.used; break;
    case cudaGraphMemAttrUsedMemHigh: v = s.used_high; break;
    case cudaGraphMemAttrReservedMemCurrent: v = s.reserved; break;
    case cudaGraphMemAttrReservedMemHigh: v = s.reserved_high; break;
    default: return record(cudaErrorInvalidValue);
  }
  std::memcpy(value, &v, sizeof v);
  return cudaSuccess;
}

// Only the high watermarks may be set, and only to 0 (CUDA: "can only be reset to zero").
cudaError_t cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType attr, void* value) {
  if (cudaError_t e = graph_mem_device(device)) return e;
  if (!value) return record(cudaErrorInvalidValue);
  uint64_t v;
  std::memcpy(&v, value, sizeof v);
  if (v != 0) return record(cudaErrorInvalidValue);
  auto& reg = registry();
  std::lock_guard g(reg.mu);
  DeviceStats& s = reg.stats[device];
  switch (attr) {
    case cudaGraphMemAttrUsedMemHigh: s.used_high = 0; return cudaSuccess;
    case cudaGraphMemAttrReservedMemHigh: s.reserved_high = 0; return cudaSuccess;
    default: return record(cudaErrorInvalidValue);
  }
}
