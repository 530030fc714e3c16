// Graphs across a suspend (graph_state.h; docs/snapshots.md): describe_graph() walks a graph
// with the driver (cuGraphGetNodes, cuGraphNodeGetType, each node's parameters,
// cuGraphGetEdges) into a GraphDesc, which the state carries; a resume reads it back as
// untrusted input (read_graph) and build_graph() makes the graph again node by node in the
// same order, with the same edges. What a node uses is checked again as at its creation:
// kernels by their function's parameter layout, copies and memsets within the client's
// memory and its shared heap, host nodes as persistent gates on their mailbox entries.
// Anything a suspend cannot describe exactly (a node type vmcuda does not make, CUDA arrays
// in a copy, edges with data) refuses the suspend with what it found; never a guess.
#include "graph_state.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

namespace {
constexpr uint32_t kSavedAttributeIds[] = {2 /* cooperative */, 4 /* cluster dimension */,
                                           5 /* cluster scheduling policy */, 8 /* priority */};

}  // namespace

bool carried_kernel_attribute(uint32_t id) {
  return std::find(std::begin(kSavedAttributeIds), std::end(kSavedAttributeIds), id) != std::end(kSavedAttributeIds);
}

void attribute_words(uint32_t id, const CUlaunchAttributeValue& v, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 0;
  switch (id) {
    case 2: out[0] = static_cast<uint32_t>(v.cooperative); break;
    case 4: out[0] = v.clusterDim.x, out[1] = v.clusterDim.y, out[2] = v.clusterDim.z; break;
    case 5: out[0] = static_cast<uint32_t>(v.clusterSchedulingPolicyPreference); break;
    case 8: out[0] = static_cast<uint32_t>(v.priority); break;
  }
}
CUlaunchAttributeValue attribute_value(const SavedKernelAttribute& a) {
  CUlaunchAttributeValue v{};
  switch (a.id) {
    case 2: v.cooperative = static_cast<int>(a.value[0]); break;
    case 4: v.clusterDim = {a.value[0], a.value[1], a.value[2]}; break;
    case 5: v.clusterSchedulingPolicyPreference = static_cast<int>(a.value[0]); break;
    case 8: v.priority = static_cast<int>(a.value[0]); break;
  }
  return v;
}

namespace {
void put_side(state::ByteWriter& w, CUmemorytype type, uint64_t address, size_t x, size_t y, size_t z, size_t pitch,
              size_t height) {
  w.put_u32(static_cast<uint32_t>(type));
  w.put_u64(address);
  for (uint64_t v : {uint64_t{x}, uint64_t{y}, uint64_t{z}, uint64_t{pitch}, uint64_t{height}}) w.put_u64(v);
}
bool get_side(state::ByteReader& r, CUmemorytype* type, uint64_t* address, size_t* x, size_t* y, size_t* z,
              size_t* pitch, size_t* height) {
  uint32_t t = 0;
  uint64_t v[5] = {};
  r.get_u32(&t);
  r.get_u64(address);
  for (uint64_t& e : v) r.get_u64(&e);
  *type = static_cast<CUmemorytype>(t);
  *x = v[0], *y = v[1], *z = v[2], *pitch = v[3], *height = v[4];
  return r.ok();
}
}  // namespace

bool copy_side_span(size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t width, size_t rows,
                    size_t depth, uint64_t* first, uint64_t* end) {
  using u128 = unsigned __int128;
  if (width == 0 || rows == 0 || depth == 0) return *first = *end = 0, true;
  // Rows wider than their pitch overlap; a single row needs no pitch (the driver may report
  // a 1D copy's as 0).
  if (width > pitch && (rows > 1 || depth > 1)) return false;
  const u128 slice = u128{pitch} * height;
  const u128 f = u128{z} * slice + u128{y} * pitch + x;
  const u128 e = (u128{z} + depth - 1) * slice + (u128{y} + rows - 1) * pitch + x + width;
  if (e > ~uint64_t{0}) return false;
  *first = static_cast<uint64_t>(f);
  *end = static_cast<uint64_t>(e);
  return true;
}

namespace {
GraphDesc normalized(const GraphDesc& g, const std::function<uint64_t(uint64_t)>& rename) {
  GraphDesc out = g;
  for (GraphNodeDesc& n : out.nodes) {
    if (n.type == kNodeKernel || n.type == kNodeWaitEvent || n.type == kNodeEventRecord) n.object = rename(n.object);
    if (n.type == kNodeChild && n.child) n.child = std::make_shared<GraphDesc>(normalized(*n.child, rename));
  }
  std::sort(out.edges.begin(), out.edges.end());
  return out;
}
}  // namespace

std::vector<std::byte> graph_fingerprint(const GraphDesc& g, const std::function<uint64_t(uint64_t)>& rename) {
  state::ByteWriter w;
  write_graph(normalized(g, rename), w);
  return w.take();
}

void write_graph(const GraphDesc& g, state::ByteWriter& w) {
  w.put_u32(static_cast<uint32_t>(g.nodes.size()));
  for (const GraphNodeDesc& n : g.nodes) {
    w.put_u32(n.type);
    switch (n.type) {
      case kNodeKernel:
        w.put_u64(n.object);
        for (uint32_t v : n.grid) w.put_u32(v);
        for (uint32_t v : n.block) w.put_u32(v);
        w.put_u32(n.shared);
        w.put_bytes(n.params);
        w.put_u32(static_cast<uint32_t>(n.attributes.size()));
        for (const auto& a : n.attributes) {
          w.put_u32(a.id);
          for (uint32_t v : a.value) w.put_u32(v);
        }
        break;
      case kNodeMemcpy: {
        const CUDA_MEMCPY3D& c = n.copy;
        put_side(w, c.srcMemoryType, c.srcMemoryType == CU_MEMORYTYPE_HOST ? reinterpret_cast<uint64_t>(c.srcHost) : c.srcDevice,
                 c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight);
        put_side(w, c.dstMemoryType, c.dstMemoryType == CU_MEMORYTYPE_HOST ? reinterpret_cast<uint64_t>(c.dstHost) : c.dstDevice,
                 c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight);
        w.put_u64(c.WidthInBytes);
        w.put_u64(c.Height);
        w.put_u64(c.Depth);
        break;
      }
      case kNodeMemset:
        w.put_u64(n.memset.dst);
        w.put_u64(n.memset.pitch);
        w.put_u32(n.memset.value);
        w.put_u32(n.memset.elementSize);
        w.put_u64(n.memset.width);
        w.put_u64(n.memset.height);
        break;
      case kNodeHost:
        w.put_u64(n.mailbox);
        break;
      case kNodeChild:
        write_graph(*n.child, w);
        break;
      case kNodeWaitEvent:
      case kNodeEventRecord:
        w.put_u64(n.object);
        break;
      default:  // empty
        break;
    }
  }
  w.put_u32(static_cast<uint32_t>(g.edges.size()));
  for (const auto& [from, to] : g.edges) {
    w.put_u32(from);
    w.put_u32(to);
  }
}

bool read_graph(state::ByteReader& r, GraphDesc* g, uint32_t* budget, std::string* why, int depth) {
  auto bad = [&](const std::string& w) { return *why = "a graph " + w, false; };
  if (depth > kMaxSavedGraphDepth) return bad("with child graphs nested too deep");
  uint32_t count = 0;
  if (!r.get_u32(&count)) return *why = r.error(), false;
  if (count > *budget) return bad("with too many nodes");
  *budget -= count;
  g->nodes.resize(count);
  for (GraphNodeDesc& n : g->nodes) {
    r.get_u32(&n.type);
    switch (n.type) {
      case kNodeKernel: {
        r.get_u64(&n.object);
        for (uint32_t& v : n.grid) r.get_u32(&v);
        for (uint32_t& v : n.block) r.get_u32(&v);
        r.get_u32(&n.shared);
        r.get_bytes(&n.params, 1u << 20);  // checked against its function's layout at the build
        uint32_t attrs = 0;
        r.get_u32(&attrs);
        if (r.ok() && attrs > std::size(kSavedAttributeIds)) return bad("kernel node with too many attributes");
        for (uint32_t i = 0; r.ok() && i < attrs; ++i) {
          SavedKernelAttribute a;
          r.get_u32(&a.id);
          for (uint32_t& v : a.value) r.get_u32(&v);
          if (r.ok() && std::find(std::begin(kSavedAttributeIds), std::end(kSavedAttributeIds), a.id) ==
                            std::end(kSavedAttributeIds))
            return bad("kernel node with an unknown attribute " + std::to_string(a.id));
          n.attributes.push_back(a);
        }
        break;
      }
      case kNodeMemcpy: {
        CUDA_MEMCPY3D& c = n.copy;
        uint64_t src = 0, dst = 0;
        get_side(r, &c.srcMemoryType, &src, &c.srcXInBytes, &c.srcY, &c.srcZ, &c.srcPitch, &c.srcHeight);
        get_side(r, &c.dstMemoryType, &dst, &c.dstXInBytes, &c.dstY, &c.dstZ, &c.dstPitch, &c.dstHeight);
        r.get_u64(&c.WidthInBytes);
        r.get_u64(&c.Height);
        r.get_u64(&c.Depth);
        if (!r.ok()) break;
        for (CUmemorytype t : {c.srcMemoryType, c.dstMemoryType})
          if (t != CU_MEMORYTYPE_HOST && t != CU_MEMORYTYPE_DEVICE) return bad("memcpy node of an unknown memory type");
        if (c.srcMemoryType == CU_MEMORYTYPE_HOST) c.srcHost = reinterpret_cast<const void*>(src);
        else c.srcDevice = src;
        if (c.dstMemoryType == CU_MEMORYTYPE_HOST) c.dstHost = reinterpret_cast<void*>(dst);
        else c.dstDevice = dst;
        uint64_t f, e;
        if (!copy_side_span(c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight, c.WidthInBytes, c.Height, c.Depth, &f, &e) ||
            !copy_side_span(c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight, c.WidthInBytes, c.Height, c.Depth, &f, &e))
          return bad("memcpy node whose region overflows");
        break;
      }
      case kNodeMemset: {
        auto& m = n.memset;
        uint64_t pitch = 0, width = 0, height = 0;
        r.get_u64(&m.dst);
        r.get_u64(&pitch);
        r.get_u32(&m.value);
        r.get_u32(&m.elementSize);
        r.get_u64(&width);
        r.get_u64(&height);
        m.pitch = pitch, m.width = width, m.height = height;
        if (r.ok() && ((m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) || m.width > (~0ull >> 2)))
          return bad("memset node of a bad size");
        break;
      }
      case kNodeHost:
        r.get_u64(&n.mailbox);
        break;
      case kNodeChild:
        n.child = std::make_shared<GraphDesc>();
        if (!r.ok()) break;
        if (!read_graph(r, n.child.get(), budget, why, depth + 1)) return false;
        break;
      case kNodeWaitEvent:
      case kNodeEventRecord:
        r.get_u64(&n.object);
        break;
      case kNodeEmpty:
        break;
      default:
        if (r.ok()) return bad("node of unknown type " + std::to_string(n.type));
    }
    if (!r.ok()) return *why = r.error(), false;
  }
  uint32_t edges = 0;
  if (!r.get_u32(&edges)) return *why = r.error(), false;
  if (edges > kMaxSavedGraphEdges || edges > r.remaining() / 8) return bad("with too many edges");
  std::vector<uint32_t> waiting(count, 0);
  std::vector<std::vector<uint32_t>> out(count);
  std::vector<std::pair<uint32_t, uint32_t>> sorted;
  for (uint32_t i = 0; i < edges; ++i) {
    uint32_t from = 0, to = 0;
    r.get_u32(&from);
    r.get_u32(&to);
    if (!r.ok()) return *why = r.error(), false;
    if (from >= count || to >= count || from == to) return bad("edge between nodes it does not have");
    g->edges.emplace_back(from, to);
    out[from].push_back(to);
    ++waiting[to];
  }
  sorted = g->edges;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return bad("with an edge twice");
  // No cycle: every node is reached by a topological walk.
  std::vector<uint32_t> ready;
  for (uint32_t i = 0; i < count; ++i)
    if (!waiting[i]) ready.push_back(i);
  for (size_t k = 0; k < ready.size(); ++k)
    for (uint32_t to : out[ready[k]])
      if (--waiting[to] == 0) ready.push_back(to);
  if (ready.size() != count) return bad("with a cycle");
  return true;
}

// ---- Session: to and from the driver

bool Session::describe_node(CUgraphNode node, GraphNodeDesc* out, CUgraph* child, std::string* why,
                            CUresult* driver) const {
  auto refuse = [&](const std::string& w) { return *why = "it has a graph " + w, false; };
  const std::span<std::byte> heap = region_ ? region_->heap() : std::span<std::byte>{};
  auto heap_offset = [&](const void* p, uint64_t first, uint64_t end, uint64_t* off) {
    const auto* b = static_cast<const std::byte*>(p);
    if (heap.empty() || b < heap.data() || b > heap.data() + heap.size()) return false;
    *off = static_cast<uint64_t>(b - heap.data());
    return end <= heap.size() - *off && first <= end;
  };
  GraphNodeDesc& n = *out;
  int type = -1;
  if (CUresult e = api_.cuGraphNodeGetType(node, &type); e != CUDA_SUCCESS) {
    if (driver) *driver = e;
    return refuse("node whose type the driver does not say (" + describe(api_, e) + ")");
  }
  n.type = static_cast<uint32_t>(type);
  CUresult e = CUDA_SUCCESS;
  switch (type) {
    case kNodeKernel: {
      CUDA_KERNEL_NODE_PARAMS_v2 p{};
      if ((e = api_.cuGraphKernelNodeGetParams_v2(node, &p)) != CUDA_SUCCESS) break;
      const Object* fo = nullptr;
      for (const auto& [h, id] : vol_.of(ObjectKind::Function))
        if (const Object* o = vol_.get(id); o->as<FunctionObject>().fn == p.func) fo = o;
      if (!fo || p.extra) return refuse("kernel node of a kernel the program did not load, or with packed parameters");
      const FunctionObject& f = fo->as<FunctionObject>();
      if (!f.params.empty() && !p.kernelParams) return refuse("kernel node without its parameters");
      size_t bytes = 0;
      for (const auto& pi : f.params) bytes = std::max<size_t>(bytes, size_t{pi.offset} + pi.size);
      n.params.assign(bytes, std::byte{0});
      for (size_t k = 0; k < f.params.size(); ++k)
        std::memcpy(n.params.data() + f.params[k].offset, p.kernelParams[k], f.params[k].size);
      n.object = fo->id;
      n.grid[0] = p.gridDimX, n.grid[1] = p.gridDimY, n.grid[2] = p.gridDimZ;
      n.block[0] = p.blockDimX, n.block[1] = p.blockDimY, n.block[2] = p.blockDimZ;
      n.shared = p.sharedMemBytes;
      // Launch attributes a captured cudaLaunchKernelEx set (the build sets those that differ).
      for (uint32_t id : kSavedAttributeIds) {
        CUlaunchAttributeValue v{};
        if (api_.cuGraphKernelNodeGetAttribute(node, static_cast<int>(id), &v) != CUDA_SUCCESS) continue;
        SavedKernelAttribute a{id};
        attribute_words(id, v, a.value);
        n.attributes.push_back(a);
      }
      break;
    }
    case kNodeMemcpy: {
      CUDA_MEMCPY3D& c = n.copy;
      if ((e = api_.cuGraphMemcpyNodeGetParams(node, &c)) != CUDA_SUCCESS) break;
      // A unified address (the driver may report a copy that way) is the shared heap's or
      // the client's device memory.
      auto unify = [&](CUmemorytype* t, const void** host, CUdeviceptr* dev) {
        if (*t != CU_MEMORYTYPE_UNIFIED) return;
        const auto* b = reinterpret_cast<const std::byte*>(*dev);
        const bool in_heap = !heap.empty() && b >= heap.data() && b < heap.data() + heap.size();
        *t = in_heap ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        if (in_heap) *host = b, *dev = 0;
      };
      unify(&c.srcMemoryType, &c.srcHost, &c.srcDevice);
      const void* dst_host = c.dstHost;
      unify(&c.dstMemoryType, &dst_host, &c.dstDevice);
      c.dstHost = const_cast<void*>(dst_host);
      auto side = [&](CUmemorytype t, const void* host, CUdeviceptr dev, CUarray arr, size_t lod, const void* reserved,
                      size_t x, size_t y, size_t z, size_t pitch, size_t height, uint64_t* address) {
        uint64_t f, en;
        if (arr || lod || reserved || (t != CU_MEMORYTYPE_HOST && t != CU_MEMORYTYPE_DEVICE) ||
            !copy_side_span(x, y, z, pitch, height, c.WidthInBytes, c.Height, c.Depth, &f, &en))
          return false;
        if (t == CU_MEMORYTYPE_DEVICE) {
          *address = dev;
          return en == f || (dev + f >= dev && owns_range(dev + f, en - f));
        }
        return heap_offset(host, f, en, address);
      };
      uint64_t src = 0, dst = 0;
      if (!side(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcArray, c.srcLOD, c.reserved0, c.srcXInBytes, c.srcY,
                c.srcZ, c.srcPitch, c.srcHeight, &src) ||
          !side(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstArray, c.dstLOD, c.reserved1, c.dstXInBytes, c.dstY,
                c.dstZ, c.dstPitch, c.dstHeight, &dst))
        return refuse("memcpy node with a CUDA array, or memory other than the program's device memory and "
                      "shared heap (freed since?)");
      if (c.srcMemoryType == CU_MEMORYTYPE_HOST) c.srcHost = reinterpret_cast<const void*>(src);
      if (c.dstMemoryType == CU_MEMORYTYPE_HOST) c.dstHost = reinterpret_cast<void*>(dst);
      break;
    }
    case kNodeMemset: {
      if ((e = api_.cuGraphMemsetNodeGetParams(node, &n.memset)) != CUDA_SUCCESS) break;
      // As the build checks it (else the resume would refuse what the suspend saved).
      const auto& m = n.memset;
      const uint64_t pitch = m.height <= 1 && m.pitch == 0 ? m.width * m.elementSize : m.pitch;
      if ((m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) || m.width > (~0ull >> 2) ||
          !owns_2d(m.dst, pitch, m.width * m.elementSize, m.height))
        return refuse("memset node on memory that is not the program's (freed since?)");
      break;
    }
    case kNodeHost: {
      CUDA_HOST_NODE_PARAMS p{};
      if ((e = api_.cuGraphHostNodeGetParams(node, &p)) != CUDA_SUCCESS) break;
      const HostFuncGate* gate = nullptr;
      for (const auto& gp : gates_)
        if (gp.get() == p.userData && gp->persistent) gate = gp.get();
      if (p.fn != host_func_gate_fn() || !gate ||
          !heap_offset(gate->entry, 0, sizeof(api::HostFuncEntry), &n.mailbox))
        return refuse("host node that is not one of the program's");
      break;
    }
    case kNodeChild:
      e = api_.cuGraphChildGraphNodeGetGraph(node, child);
      break;
    case kNodeEmpty:
      break;
    case kNodeWaitEvent:
    case kNodeEventRecord: {
      CUevent ev = nullptr;
      e = type == kNodeWaitEvent ? api_.cuGraphEventWaitNodeGetEvent(node, &ev)
                                 : api_.cuGraphEventRecordNodeGetEvent(node, &ev);
      if (e != CUDA_SUCCESS) break;
      for (const auto& [h, id] : vol_.of(ObjectKind::Event))
        if (vol_.get(id)->as<EventObject>().event == ev) n.object = id;
      if (!n.object) return refuse("event node whose event the program destroyed");
      break;
    }
    default:
      return refuse("node of type " + std::to_string(type) + ", which vmcuda does not save");
  }
  if (driver) *driver = e;
  if (e != CUDA_SUCCESS) return refuse("node of type " + std::to_string(type) + " whose parameters the driver does "
                                       "not give (" + describe(api_, e) + ")");
  return true;
}

bool Session::describe_graph(CUgraph g, GraphDesc* d, std::vector<CUgraphNode>* top, std::string* why, int depth) const {
  auto refuse = [&](const std::string& w) { return *why = "it has a graph " + w, false; };
  if (depth > kMaxSavedGraphDepth) return refuse("with child graphs nested too deep");
  std::vector<CUgraphNode> nodes;
  if (!list_graph_nodes(g, &nodes)) return refuse("whose nodes the driver does not list");
  std::map<CUgraphNode, uint32_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = static_cast<uint32_t>(i);
  d->nodes.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    GraphNodeDesc& n = d->nodes[i];
    CUgraph child = nullptr;
    if (!describe_node(nodes[i], &n, &child, why)) return false;
    if (n.type == kNodeChild) {
      n.child = std::make_shared<GraphDesc>();
      std::vector<CUgraphNode> unused;
      if (!describe_graph(child, n.child.get(), &unused, why, depth + 1)) return false;
    }
  }
  size_t edges = 0;
  if (CUresult e = api_.cuGraphGetEdges_v2(g, nullptr, nullptr, nullptr, &edges); e != CUDA_SUCCESS)
    return refuse("whose edges the driver does not list (" + describe(api_, e) + ")");
  std::vector<CUgraphNode> from(edges), to(edges);
  std::vector<CUgraphEdgeData> data(edges);
  if (edges)
    if (CUresult e = api_.cuGraphGetEdges_v2(g, from.data(), to.data(), data.data(), &edges); e != CUDA_SUCCESS)
      return refuse("whose edges the driver does not list (" + describe(api_, e) + ")");
  for (size_t k = 0; k < std::min(edges, from.size()); ++k) {
    const CUgraphEdgeData& ed = data[k];
    if (ed.from_port || ed.to_port || ed.type) return refuse("with a programmatic (port or type) edge");
    const auto f = index.find(from[k]), t = index.find(to[k]);
    if (f == index.end() || t == index.end()) return refuse("with an edge to a node it does not list");
    d->edges.emplace_back(f->second, t->second);
  }
  *top = std::move(nodes);
  return true;
}

bool Session::build_graph(const GraphDesc& d, int device, const std::map<uint64_t, ObjectId>& new_id,
                          const vmrpc::RegionView* region, CUgraph* out, std::vector<CUgraphNode>* top,
                          std::string* why) {
  *out = nullptr;
  CUgraph g = nullptr;
  if (CUresult e = api_.cuGraphCreate(&g, 0); e != CUDA_SUCCESS)
    return *why = "creating a graph failed: " + describe(api_, e), false;
  auto fail = [&](const std::string& w) {
    api_.cuGraphDestroy(g);
    return *why = w, false;
  };
  auto object = [&](uint64_t saved, ObjectKind kind) -> Object* {
    const auto it = new_id.find(saved);
    Object* o = it == new_id.end() ? nullptr : vol_.get(it->second);
    return o && o->kind == kind ? o : nullptr;  // the client's own (on any of its devices, as at its creation)
  };
  const std::span<std::byte> heap = region ? region->heap() : std::span<std::byte>{};
  auto host_at = [&](uint64_t off, uint64_t first, uint64_t end) -> std::byte* {
    if (heap.empty() || off > heap.size() || end > heap.size() - off || first > end) return nullptr;
    return heap.data() + off;
  };
  std::vector<CUgraphNode> nodes(d.nodes.size());
  for (size_t i = 0; i < d.nodes.size(); ++i) {
    const GraphNodeDesc& n = d.nodes[i];
    CUgraphNode& node = nodes[i];
    CUresult e = CUDA_SUCCESS;
    switch (n.type) {
      case kNodeKernel: {
        const Object* fo = object(n.object, ObjectKind::Function);
        if (!fo) return fail("a graph's kernel node names no kernel of the client");
        const FunctionObject& f = fo->as<FunctionObject>();
        size_t bytes = 0;
        for (const auto& pi : f.params) bytes = std::max<size_t>(bytes, size_t{pi.offset} + pi.size);
        if (n.params.size() != bytes) return fail("a graph's kernel node has parameters of the wrong size for " + f.name);
        std::vector<void*> pointers;
        for (const auto& pi : f.params) pointers.push_back(const_cast<std::byte*>(n.params.data()) + pi.offset);
        const CUDA_KERNEL_NODE_PARAMS_v2 p{f.fn,       n.grid[0], n.grid[1],       n.grid[2], n.block[0], n.block[1],
                                          n.block[2], n.shared,  pointers.data(), nullptr,   nullptr,    nullptr};
        e = api_.cuGraphAddKernelNode_v2(&node, g, nullptr, 0, &p);
        for (const SavedKernelAttribute& a : n.attributes) {
          if (e != CUDA_SUCCESS) break;
          CUlaunchAttributeValue now{};
          uint32_t words[3] = {1, 1, 1};
          if (api_.cuGraphKernelNodeGetAttribute(node, static_cast<int>(a.id), &now) == CUDA_SUCCESS)
            attribute_words(a.id, now, words);
          if (std::equal(std::begin(words), std::end(words), std::begin(a.value))) continue;
          const CUlaunchAttributeValue v = attribute_value(a);
          e = api_.cuGraphKernelNodeSetAttribute(node, static_cast<int>(a.id), &v);
        }
        break;
      }
      case kNodeMemcpy: {
        CUDA_MEMCPY3D c = n.copy;
        uint64_t f, en;
        copy_side_span(c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight, c.WidthInBytes, c.Height, c.Depth, &f, &en);
        if (c.srcMemoryType == CU_MEMORYTYPE_HOST) {
          if (!(c.srcHost = host_at(reinterpret_cast<uint64_t>(c.srcHost), f, en)))
            return fail("a graph's memcpy node reads host memory outside the shared heap");
        } else if (en > f && (c.srcDevice + f < c.srcDevice || !owns_range(c.srcDevice + f, en - f))) {
          return fail("a graph's memcpy node reads device memory that is not the client's");
        }
        copy_side_span(c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight, c.WidthInBytes, c.Height, c.Depth, &f, &en);
        if (c.dstMemoryType == CU_MEMORYTYPE_HOST) {
          if (!(c.dstHost = host_at(reinterpret_cast<uint64_t>(c.dstHost), f, en)))
            return fail("a graph's memcpy node writes host memory outside the shared heap");
        } else if (en > f && (c.dstDevice + f < c.dstDevice || !owns_range(c.dstDevice + f, en - f))) {
          return fail("a graph's memcpy node writes device memory that is not the client's");
        }
        e = api_.cuGraphAddMemcpyNode(&node, g, nullptr, 0, &c, contexts_[device]);
        break;
      }
      case kNodeMemset: {
        const auto& m = n.memset;
        const uint64_t pitch = m.height <= 1 && m.pitch == 0 ? m.width * m.elementSize : m.pitch;
        if (!owns_2d(m.dst, pitch, m.width * m.elementSize, m.height))
          return fail("a graph's memset node writes device memory that is not the client's");
        e = api_.cuGraphAddMemsetNode(&node, g, nullptr, 0, &m, contexts_[device]);
        break;
      }
      case kNodeHost: {
        constexpr size_t kEntry = sizeof(api::HostFuncEntry);
        std::byte* at = host_at(n.mailbox, 0, kEntry);
        if (!at || reinterpret_cast<uintptr_t>(at) % kEntry != 0)
          return fail("a graph's host node has a mailbox entry outside the shared heap or misaligned");
        HostFuncGate* gate =
            persistent_gate_at(reinterpret_cast<api::HostFuncEntry*>(at), &region->control(info_.slot).state, nullptr);
        if (!gate) return fail("the client has too many host functions for a graph's host node");
        const CUDA_HOST_NODE_PARAMS p{host_func_gate_fn(), gate};
        e = api_.cuGraphAddHostNode(&node, g, nullptr, 0, &p);
        break;
      }
      case kNodeChild: {
        CUgraph child = nullptr;
        std::vector<CUgraphNode> unused;
        if (!build_graph(*n.child, device, new_id, region, &child, &unused, why)) return fail(*why);
        e = api_.cuGraphAddChildGraphNode(&node, g, nullptr, 0, child);  // the driver embeds a copy
        api_.cuGraphDestroy(child);
        break;
      }
      case kNodeWaitEvent:
      case kNodeEventRecord: {
        const Object* ev = object(n.object, ObjectKind::Event);
        if (!ev) return fail("a graph's event node names no event of the client");
        e = n.type == kNodeWaitEvent ? api_.cuGraphAddEventWaitNode(&node, g, nullptr, 0, ev->as<EventObject>().event)
                                     : api_.cuGraphAddEventRecordNode(&node, g, nullptr, 0, ev->as<EventObject>().event);
        break;
      }
      default:
        e = api_.cuGraphAddEmptyNode(&node, g, nullptr, 0);
        break;
    }
    if (e != CUDA_SUCCESS)
      return fail("making a graph's node of type " + std::to_string(n.type) + " failed: " + describe(api_, e));
  }
  if (!d.edges.empty()) {
    std::vector<CUgraphNode> from, to;
    for (const auto& [f, t] : d.edges) {
      from.push_back(nodes.at(f));
      to.push_back(nodes.at(t));
    }
    if (CUresult e = api_.cuGraphAddDependencies_v2(g, from.data(), to.data(), nullptr, from.size()); e != CUDA_SUCCESS)
      return fail("adding a graph's edges failed: " + describe(api_, e));
  }
  *out = g;
  *top = std::move(nodes);
  return true;
}

}  // namespace vmcuda::host
