// A graph as a suspend saves it and a resume builds it again (graph_state.cc): its nodes in
// the driver's order (cuGraphGetNodes) with what recreating each needs, and its edges as
// pairs of node indexes. Objects a node uses (its kernel's function, its event) are named
// by their VOL object ids; host memory by its offset in the shared heap.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "driver_api.h"
#include "state_stream.h"

namespace vmcuda::host {

// CUgraphNodeType values a saved graph may hold (others are refused by the suspend).
enum GraphNodeType : uint32_t {
  kNodeKernel = 0,
  kNodeMemcpy = 1,
  kNodeMemset = 2,
  kNodeHost = 3,
  kNodeChild = 4,
  kNodeEmpty = 5,
  kNodeWaitEvent = 6,
  kNodeEventRecord = 7,
};

struct GraphDesc;
struct SavedKernelAttribute {
  uint32_t id = 0;    // CUlaunchAttributeID: cooperative, cluster dimension, its policy, priority
  uint32_t value[3] = {};
};
struct GraphNodeDesc {
  uint32_t type = kNodeEmpty;
  uint64_t object = 0;  // kernel: its function's object id; event nodes: the event's
  uint32_t grid[3] = {}, block[3] = {}, shared = 0;
  std::vector<std::byte> params;  // kernel: its parameters' bytes, at the function's offsets
  std::vector<SavedKernelAttribute> attributes;
  CUDA_MEMCPY3D copy{};           // memcpy: a host side's srcHost/dstHost is its heap offset
  CUDA_MEMSET_NODE_PARAMS memset{};
  uint64_t mailbox = 0;           // host: the heap offset of its HostFuncEntry
  std::shared_ptr<GraphDesc> child;
};
struct GraphDesc {
  std::vector<GraphNodeDesc> nodes;
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // from, to (node indexes)
};

// Limits on what a state may describe (a state file is untrusted).
inline constexpr uint32_t kMaxSavedGraphNodes = 1u << 16;  // in one graph and its children together
inline constexpr uint32_t kMaxSavedGraphEdges = 1u << 20;
inline constexpr int kMaxSavedGraphDepth = 16;             // child graphs within child graphs

// Kernel node launch attributes a suspend carries (and graph_nodes.cc offers): cooperative,
// cluster dimension, its scheduling policy, priority; a value as three words and back.
bool carried_kernel_attribute(uint32_t id);
void attribute_words(uint32_t id, const CUlaunchAttributeValue& v, uint32_t out[3]);
CUlaunchAttributeValue attribute_value(const SavedKernelAttribute& a);

void write_graph(const GraphDesc& g, state::ByteWriter& w);
// `g` as write_graph writes it, with its kernels' and events' object ids through `rename` and
// its edges in order: a graph as saved and as described again after a resume (where the
// driver may list edges otherwise and objects have new ids) compare equal.
std::vector<std::byte> graph_fingerprint(const GraphDesc& g, const std::function<uint64_t(uint64_t)>& rename);
// Reads and checks one graph's structure: known node types, fields in range, edges between
// nodes of the graph, no edge twice, no cycle. `budget`: the nodes still allowed. On failure
// false and why.
bool read_graph(state::ByteReader& r, GraphDesc* g, uint32_t* budget, std::string* why, int depth = 0);
// Whether a memcpy node's side lies within [0, limit) from its base (false on overflow):
// the first byte and one past the last it touches.
bool copy_side_span(size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t width, size_t rows,
                    size_t depth, uint64_t* first, uint64_t* end);

}  // namespace vmcuda::host
