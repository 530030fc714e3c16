#include "fake_driver.h"
#include "fake_kernels.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <memory>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <thread>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <cctype>
#include <tuple>
#include <vector>

namespace vmcuda::testing {
using namespace host;

namespace {
CUresult f_mem_info(size_t*, size_t*);
constexpr CUresult CUDA_ERROR_INVALID_CLUSTER_SIZE = 912;
// Streams and events are records: the fake runs all work at once, in call order, but it
// keeps what the driver checks (the context each belongs to, flags, recorded or not) and
// a clock that work advances, so that event timing is exact. While "hold completion" is
// on, work leaves its stream busy (cuStreamQuery: not ready) and events recorded after it
// pending, until something synchronizes them.
struct FakeStream {
  CUcontext ctx;
  unsigned flags;
  int priority;
  uint64_t id = 0;
  bool busy = false;
  bool endless = false;  // a kernel that never ends runs on it (kFakeNeverEnds)
  // Stream capture (cuStreamBeginCapture): work issued while capturing becomes nodes of
  // `capture` after the stream's frontier instead of running. 0 none, 1 active, 2 invalidated.
  int capture_status = 0;
  CUgraph capture = nullptr;
  bool capture_origin = false;  // began it (else joined it through an event)
  bool capture_into = false;    // into the program's graph (cuStreamBeginCaptureToGraph): never destroyed here
  uint64_t capture_id = 0;
  std::vector<CUgraphNode> frontier;
  // Stream attributes (cuStreamSetAttribute) other than the priority (above), by id: the
  // ones set, the driver's defaults for the rest (stream_attribute_default).
  std::map<int, CUlaunchAttributeValue> attributes;
};
struct FakeEvent {
  CUcontext ctx;
  unsigned flags;
  uint64_t recorded_on = 0;  // FakeStream::id
  bool recorded = false;
  bool done = true;
  double time_ms = 0;
  // Recorded on a capturing stream: the capture and its nodes at that point (a stream that
  // waits on it joins the capture after them).
  CUgraph capture = nullptr;
  std::vector<CUgraphNode> capture_nodes;
};
// ---- graphs. A node is its work, replayed on a stream at each launch in topological order
// (the fake runs all work at once): a kernel keeps its parameters' bytes; other work is a
// closure over its arguments; a child graph node owns a copy of its graph.
struct FakeNode {
  CUgraph graph = nullptr;
  int type = 5;  // CUgraphNodeType
  std::vector<CUgraphNode> deps;
  CUgraphNode origin = nullptr;  // in a clone: the node it copies
  CUfunction fn = nullptr;
  unsigned grid[3] = {}, block[3] = {}, shared = 0;
  std::vector<std::vector<std::byte>> params;
  std::function<CUresult(CUstream)> op;
  CUgraph child = nullptr;
  // What the driver answers about the node (cuGraph*NodeGetParams, ...GetEvent, kernel
  // node attributes): the work `op` does, described.
  CUDA_MEMCPY3D copy{};
  CUDA_MEMSET_NODE_PARAMS memset{};
  CUDA_HOST_NODE_PARAMS host{};
  CUevent event = nullptr;
  std::map<int, CUlaunchAttributeValue> attrs;
  std::vector<void*> param_ptrs;  // kernelParams handed out by cuGraphKernelNodeGetParams
  bool disabled = false;          // in an executable graph: cuGraphNodeSetEnabled(0) skips it
  // A conditional node (type 13): its handle (fake_kernels.h), if/while/switch, its bodies.
  uint64_t cond = 0;
  int cond_type = 0;
  std::vector<CUgraph> bodies;
};
// A plain copy's description (one row) and a memset's, for captured work. Lock held or not.
CUDA_MEMCPY3D linear_copy(CUmemorytype dst_type, void* dst_host, CUdeviceptr dst, CUmemorytype src_type,
                          const void* src_host, CUdeviceptr src, size_t n) {
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = src_type, c.srcHost = src_host, c.srcDevice = src, c.srcPitch = n, c.srcHeight = 1;
  c.dstMemoryType = dst_type, c.dstHost = dst_host, c.dstDevice = dst, c.dstPitch = n, c.dstHeight = 1;
  c.WidthInBytes = n, c.Height = 1, c.Depth = 1;
  return c;
}
CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr d, size_t pitch, unsigned value, unsigned elem, size_t width,
                                      size_t height) {
  return CUDA_MEMSET_NODE_PARAMS{d, pitch, value, elem, width, height};
}
struct FakeGraphData {
  std::vector<CUgraphNode> nodes;  // in creation order
};
// An executable graph: its nodes flattened (child graphs inlined) in topological order, each
// with the node of the instantiated graph it came from.
struct FakeExec {
  CUcontext ctx = nullptr;
  std::vector<std::pair<CUgraphNode, FakeNode>> order;
};
// A loaded module: the context it was loaded in and its variables' storage (made on first
// use: the executor cannot read a fatbin's variables, so every module has each of
// fake_globals', fake_kernels.cc).
// Where its variables live: as measured on the H100 (tests/gpu/module_data_probe), the
// driver places a module's data in a module heap at addresses that repeat when the same
// modules are loaded in the same order into a fresh context (and differ for another
// order): here, the lowest free kModuleSlot of the heap, each variable at a fixed offset
// (its place in the executor's table).
struct FakeModule {
  CUcontext ctx;
  std::map<std::string, uint64_t> globals;  // name -> device address
  uint64_t data = 0;                        // its slot in the module heap
  // Its kernels (cuModuleGetFunctionCount / EnumerateFunctions): the executor's kernels whose
  // code the image names (an ELF section ".text.NAME" or a PTX ".entry NAME").
  std::vector<const FakeKernel*> kernels;
};
constexpr uint64_t kModuleHeap = 0x7e0000000000ull, kModuleSlot = 1ull << 20;
// A kernel of a loaded module (cuModuleGetFunction): the CPU kernel and its settable
// attributes (cuFuncSetAttribute), indexed by CUfunction_attribute.
struct FakeFunction {
  const FakeKernel* kernel;
  CUmodule module;
  int attrs[CU_FUNC_ATTRIBUTE_MAX];
};
// Device bytes: owned, or (VMM memory exported as a POSIX fd: IPC between a VM's programs)
// a shared mapping of a memfd that each process importing it maps too, so that worker
// processes of one stub see the same bytes as two processes on one GPU do.
struct FakeShm {
  void* addr = nullptr;
  size_t bytes = 0;
  int fd = -1;
  ~FakeShm() {
    if (addr) ::munmap(addr, bytes);
    if (fd >= 0) ::close(fd);
  }
};
class FakeBytes {
 public:
  std::byte* data() { return shm_ ? static_cast<std::byte*>(shm_->addr) + off_ : own_.data(); }
  const std::byte* data() const { return shm_ ? static_cast<const std::byte*>(shm_->addr) + off_ : own_.data(); }
  size_t size() const { return shm_ ? (len_ ? len_ : shm_->bytes) : own_.size(); }
  void resize(size_t n) { own_.resize(n); }
  void assign(size_t n, std::byte v) { own_.assign(n, v); }
  std::byte* begin() { return data(); }
  std::byte* end() { return data() + size(); }
  const std::shared_ptr<FakeShm>& shm() const { return shm_; }
  // From now on the bytes are `shm`'s (the current ones copied there first by the caller).
  void share(std::shared_ptr<FakeShm> shm) {
    shm_ = std::move(shm);
    own_ = {};
    off_ = len_ = 0;
  }
  // `len` bytes of `shm` from `off` (a second mapping of VMM memory, or one at an offset).
  void view(std::shared_ptr<FakeShm> shm, size_t off, size_t len) {
    share(std::move(shm));
    off_ = off;
    len_ = len;
  }

 private:
  std::vector<std::byte> own_;
  std::shared_ptr<FakeShm> shm_;
  size_t off_ = 0, len_ = 0;
};
// VMM physical memory (cuMemCreate) and its mappings (cuMemMap). Its first whole mapping
// holds its bytes (mapped_at); any other mapping (a second one, or part of it at an offset,
// as a guest's cuMemMap may make) is a view of them, which first moves them into a memfd as
// an export does.
struct FakePhys {
  uint64_t bytes;
  int device;
  FakeBytes data;  // while not mapped whole
  bool exportable = false;  // made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
  uint64_t mapped_at = 0;
  unsigned views = 0;           // mappings that are views
  bool released = false;        // cuMemRelease while mapped: freed at the last unmap
};
struct FakeMap {
  uint64_t handle;
  unsigned access = 0;  // bit d: device d may read and write (cuMemSetAccess)
  uint64_t bytes = 0;
  bool view = false;
};
// CUDA arrays (cuArray3DCreate; a mipmapped array's levels are arrays of it), texture and
// surface objects: descriptors as the driver keeps them, texels in host memory, row after
// row, slice (or layer) after slice.
struct FakeArray {
  CUcontext ctx;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  uint64_t elem;  // bytes per element
  std::vector<std::byte> data;
  CUmipmappedArray parent = nullptr;  // a level of it
  uint64_t row() const { return desc.Width * elem; }
  uint64_t rows() const { return std::max<uint64_t>(desc.Height, 1); }
  uint64_t slices() const { return std::max<uint64_t>(desc.Depth, 1); }
};
struct FakeMipmap {
  CUcontext ctx;
  std::vector<CUarray> levels;
};
struct FakeTexObject {
  CUcontext ctx;
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  // Made through a resource view: a mipmapped array's is sampled from its first level.
  bool view = false;
  uint32_t first_level = 0;
};
struct FakeGpu {
  std::mutex mu;
  std::map<CUarray, FakeArray> arrays;
  std::map<CUmipmappedArray, FakeMipmap> mipmaps;
  // Texture and surface objects by (context, value). Values as driver 580 hands them out
  // (bench/texobj_value_probe.cu on the H100): per context, from 1, textures and surfaces
  // from one counter, the lowest free value first (object_value_locked).
  std::map<std::pair<CUcontext, uint64_t>, FakeTexObject> textures;
  std::map<std::pair<CUcontext, uint64_t>, FakeTexObject> surfaces;
  uint64_t next_ptr = 0x7f0000000000ull;
  std::map<uint64_t, FakeBytes> mem;
  std::set<uint64_t> global_ptrs;  // the parts of mem that are module variables
  std::set<CUcontext> contexts;
  std::map<CUmodule, FakeModule> modules;
  std::map<CUfunction, FakeFunction> functions;
  std::map<CUstream, FakeStream> streams;
  std::map<std::pair<CUcontext, CUstream>, FakeStream> special_streams;  // NULL, legacy, per-thread
  std::map<CUevent, FakeEvent> events;
  double clock_ms = 0;
  bool hold = false;
  // fake_defer_async_htod: host-to-device copies not yet done, in issue order; the host
  // bytes are read when they run.
  struct DeferredCopy {
    uint64_t stream = 0;  // FakeStream::id
    CUdeviceptr dst = 0;
    const void* src = nullptr;
    size_t bytes = 0;
  };
  bool defer_htod = false;
  std::vector<DeferredCopy> deferred;
  uintptr_t next_handle = 0x1000;
  // VMM (cuMemAddressReserve/cuMemCreate/cuMemMap): reserved ranges (start -> bytes),
  // physical allocations (handle -> FakePhys) and mappings (VA -> FakeMap). A mapped
  // handle's bytes live in `mem` at its VA, so copies, memsets and kernels find them.
  std::map<uint64_t, uint64_t> reservations;
  std::map<uint64_t, struct FakePhys> phys;
  std::map<uint64_t, struct FakeMap> maps;
  uint64_t next_va = 0x302000000ull;  // where moved reservations go (the H200 gave 0x302000000)
  bool move_hints = false;            // fake_move_reservations
  std::map<CUgraph, FakeGraphData> graphs;
  std::map<CUgraphNode, FakeNode> nodes;
  std::map<CUgraphExec, FakeExec> execs;
  uint64_t next_capture_id = 0;
  uint64_t graph_launches = 0;
};
FakeGpu& gpu() {
  static FakeGpu g;
  return g;
}

// The bytes at [p, p+n) if one allocation holds them.
std::byte* find_mapped_host(uint64_t p, size_t n);
int asking_device();
// The device that reaches memory now: a kernel's, each side's of a peer copy; else (-1) the
// calling thread's current context's, as the driver checks a VMM mapping's access.
thread_local int t_asking = -1;
std::byte* find(uint64_t p, size_t n) {
  if (std::byte* h = find_mapped_host(p, n)) return h;  // host memory registered with DEVICEMAP
  auto& g = gpu();
  auto it = g.mem.upper_bound(p);
  if (it == g.mem.begin()) return nullptr;
  --it;
  const uint64_t off = p - it->first;
  if (off > it->second.size() || n > it->second.size() - off) return nullptr;
  // A VMM mapping is accessible from the devices cuMemSetAccess named (from any of them
  // where no context asks).
  if (auto m = g.maps.find(it->first); m != g.maps.end()) {
    const int d = asking_device();
    if (d < 0 ? m->second.access == 0 : !(m->second.access & (1u << d))) return nullptr;
  }
  return it->second.data() + off;
}

// New device memory of n bytes (zeros). Lock held.
uint64_t alloc_locked(size_t n) {
  auto& g = gpu();
  const uint64_t p = g.next_ptr;
  g.next_ptr += (n + 0xfffff) & ~0xfffffull;
  if (n == 0) g.next_ptr += 0x100000;
  g.mem[p].resize(n);
  return p;
}

// The device address of module m's variable `name` (made on first use, with its initial
// bytes), or 0 when the executor knows no such variable. Lock held.
uint64_t global_locked(FakeModule& m, const char* name) {
  const FakeGlobal* v = find_fake_global(name);
  if (!v) return 0;
  auto [it, created] = m.globals.try_emplace(name, 0);
  if (created) {
    it->second = m.data + fake_global_offset(v);
    auto& bytes = gpu().mem[it->second];
    bytes.assign(v->bytes, std::byte{0});
    std::copy_n(v->init.begin(), std::min(v->init.size(), bytes.size()), bytes.begin());
    gpu().global_ptrs.insert(it->second);
  }
  return it->second;
}

// Unloads a module: its functions and its variables' storage go. Lock held.
void unload_locked(std::map<CUmodule, FakeModule>::iterator it) {
  auto& g = gpu();
  for (auto& [name, p] : it->second.globals) {
    g.mem.erase(p);
    g.global_ptrs.erase(p);
  }
  std::erase_if(g.functions, [m = it->first](const auto& kv) { return kv.second.module == m; });
  g.modules.erase(it);
}

// The calling thread's current context (cuCtxSetCurrent), as the driver keeps it.
thread_local CUcontext t_ctx = nullptr;

bool special(CUstream s) { return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

// Runs the deferred host-to-device copies of stream `id` (0: of every stream). Lock held.
void run_deferred(uint64_t id) {
  auto& d = gpu().deferred;
  auto keep = d.begin();
  for (auto it = d.begin(); it != d.end(); ++it) {
    if (id && it->stream != id) {
      *keep++ = *it;
      continue;
    }
    if (std::byte* p = find(it->dst, it->bytes)) std::memcpy(p, it->src, it->bytes);
  }
  d.erase(keep, d.end());
}
// The stream `s` names for work issued now, or nothing: a stream that does not exist or
// belongs to a context other than the current one is CUDA_ERROR_INVALID_HANDLE. Lock held.
// What was deferred on it runs first (a stream is in order), unless `in_order` is false
// (a deferred copy joining the queue).
FakeStream* stream_for_work(CUstream s, bool in_order = true) {
  FakeStream* st = nullptr;
  auto& g = gpu();
  if (!t_ctx || !g.contexts.contains(t_ctx)) return nullptr;
  if (special(s)) {
    // The NULL stream is the legacy default stream (the driver API without _ptsz): one stream.
    if (s == nullptr) s = CU_STREAM_LEGACY;
    auto [it, created] = g.special_streams.try_emplace({t_ctx, s}, FakeStream{t_ctx, 0, 0});
    if (created) it->second.id = g.next_handle++;
    st = &it->second;
  } else {
    auto it = g.streams.find(s);
    if (it == g.streams.end() || it->second.ctx != t_ctx) return nullptr;
    st = &it->second;
  }
  if (in_order && !g.deferred.empty()) run_deferred(st->id);
  return st;
}
// Work of `ms` on `st` has run. Lock held.
void did_work(FakeStream* st, double ms) {
  gpu().clock_ms += ms;
  if (gpu().hold) st->busy = true;
}
// Stream capture: `n` becomes a node of st's capture after its frontier (the stream's last
// captured work), and the new frontier. A capture invalidated by an earlier error refuses it.
// Lock held.
CUresult capture_locked(FakeStream* st, FakeNode n) {
  if (st->capture_status == 2) return 901;  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
  auto& g = gpu();
  const auto h = reinterpret_cast<CUgraphNode>(g.next_handle++);
  n.graph = st->capture;
  n.deps = st->frontier;
  g.nodes[h] = std::move(n);
  g.graphs[st->capture].nodes.push_back(h);
  st->frontier = {h};
  return CUDA_SUCCESS;
}
// Every stream in capture `c` (origin and joined). Lock held.
template <class F>
void for_capture_streams(CUgraph c, F&& f) {
  for (auto& [s, st] : gpu().streams)
    if (st.capture == c) f(st);
  for (auto& [k, st] : gpu().special_streams)
    if (st.capture == c) f(st);
}
void destroy_graph_locked(CUgraph graph);
// A capture whose origin stream (or context) goes away: every stream leaves it and its
// graph goes. Lock held.
void drop_capture_locked(CUgraph c) {
  bool into = false;
  for_capture_streams(c, [&](FakeStream& o) {
    into |= o.capture_into;
    o.capture_status = 0;
    o.capture = nullptr;
    o.capture_origin = false;
    o.capture_into = false;
    o.frontier.clear();
  });
  for (auto& [e, ev] : gpu().events)
    if (ev.capture == c) ev.capture = nullptr;
  if (!into) destroy_graph_locked(c);  // a capture into the program's graph leaves it
}
// A call that may not run during a capture (a synchronization) invalidates it. Lock held.
CUresult invalidate_capture_locked(FakeStream* st) {
  for_capture_streams(st->capture, [](FakeStream& o) { o.capture_status = 2; });
  return 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
}
// Kernels that never end (kFakeNeverEnds): waits on their streams block on this until the
// context is destroyed. Lock held by the callers of these.
std::condition_variable g_endless_cv;
bool endless_in_locked(CUcontext c) {
  auto& g = gpu();
  for (auto& [s, st] : g.streams)
    if (st.ctx == c && st.endless) return true;
  for (auto& [k, st] : g.special_streams)
    if (k.first == c && st.endless) return true;
  return false;
}
constexpr double kLaunchMs = 1.0;  // each launch takes 1 ms of fake GPU time
constexpr double kCopyMs = 0.5;    // each async copy or memset, 0.5 ms

CUresult f_init(unsigned) { return CUDA_SUCCESS; }
CUresult f_version(int* v) { return *v = 13000, CUDA_SUCCESS; }
CUresult f_count(int* n) { return *n = 2, CUDA_SUCCESS; }
CUresult f_get(CUdevice* d, int i) { return i == 0 || i == 1 ? (*d = i, CUDA_SUCCESS) : 101; }
// After an illegal address, every context of the process fails.
bool& gpu_poisoned() {
  static bool p = false;
  return p;
}

// The device the executor pretends to be: its own small identity, or (for the CUDA test
// programs, whose output is compared with native runs) the profile recorded from the GPU
// machine's device (device_profile.inc).
struct Profile {
  std::string name = "vmcuda test executor";
  uint64_t total_mem = 1ull << 30;
  unsigned char uuid[16];
  std::map<int, int> attributes;
  bool recorded = false;
};
Profile& profile() {
  static Profile p;
  return p;
}
void load_recorded_profile(Profile& p) {
#if __has_include("executor/device_profile.inc")
  p.recorded = true;
  p.attributes.clear();
#define VMCUDA_PROFILE_NAME(n) p.name = n;
#define VMCUDA_PROFILE_TOTAL_MEM(m) p.total_mem = m;
#define VMCUDA_PROFILE_UUID(...)            \
  {                                         \
    const unsigned char u[] = {__VA_ARGS__}; \
    std::memcpy(p.uuid, u, 16);             \
  }
#define VMCUDA_PROFILE_ATTR(i, v) p.attributes[i] = v;
#include "executor/device_profile.inc"
#undef VMCUDA_PROFILE_NAME
#undef VMCUDA_PROFILE_TOTAL_MEM
#undef VMCUDA_PROFILE_UUID
#undef VMCUDA_PROFILE_ATTR
#endif
}

CUresult f_name(char* s, int len, CUdevice) {
  if (profile().recorded) {
    std::strncpy(s, profile().name.c_str(), len);
    return CUDA_SUCCESS;
  }
  std::strncpy(s, "vmcuda test executor", len);
  return CUDA_SUCCESS;
}
CUresult f_total(size_t* b, CUdevice) { return *b = profile().total_mem, CUDA_SUCCESS; }
CUresult f_attr(int* v, int attr, CUdevice) {
  if (attr <= 0 || attr >= 148) return CUDA_ERROR_INVALID_VALUE;
  if (profile().recorded) {
    auto it = profile().attributes.find(attr);
    *v = it == profile().attributes.end() ? 0 : it->second;
    return CUDA_SUCCESS;
  }
  // An H100-like device: the limits launches are checked against, compute capability 9.0.
  switch (attr) {
    case 1: *v = 1024; break;                     // max threads per block
    case 2: case 3: *v = 1024; break;             // max block dim x, y
    case 4: *v = 64; break;                       // max block dim z
    case 5: *v = 2147483647; break;               // max grid dim x
    case 6: case 7: *v = 65535; break;            // max grid dim y, z
    case 8: *v = 49152; break;                    // shared memory per block
    case 10: *v = 32; break;                      // warp size
    case 12: *v = 65536; break;                   // registers per block
    case 14: *v = 512; break;                     // texture alignment (cuMemAllocPitch's pitch)
    case 16: *v = 132; break;                     // multiprocessors
    case 39: *v = 2048; break;                    // threads per multiprocessor
    case 75: *v = 9; break;                       // compute capability
    case 81: *v = 233472; break;                  // shared memory per multiprocessor
    case 82: *v = 65536; break;                   // registers per multiprocessor
    case 95: *v = 1; break;                       // cooperative launches
    case 97: *v = 232448; break;                  // shared memory per block, opt-in
    case 102: *v = 1; break;                      // POSIX fd handles (cuMemExportToShareableHandle)
    case 106: *v = 32; break;                     // blocks per multiprocessor
    case 111: *v = 1024; break;                   // shared memory reserved per block
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
// Per context: its device, limits (CUlimit 0..6, the H200's defaults), cache
// configuration and the contexts it has peer access to. Under gpu().mu.
struct FakeCtxState {
  CUdevice device = 0;
  size_t limits[7] = {1024, 8650752, 8388608, 2, 2048, 64, 11796480};  // as the H200 reads them
  int cache_config = 0;  // CU_FUNC_CACHE_PREFER_NONE
  std::set<CUcontext> peers;
  std::string printf_fifo;  // kernels' printf output not yet written (device_printf)
};
std::map<CUcontext, FakeCtxState>& ctx_state() {
  static std::map<CUcontext, FakeCtxState> s;
  return s;
}
int asking_device() {
  if (t_asking >= 0) return t_asking;
  auto it = ctx_state().find(t_ctx);
  return it == ctx_state().end() ? -1 : static_cast<int>(it->second.device);
}
// Memory of `p` as `device` reaches it. Lock held.
std::byte* find_from(int device, uint64_t p, size_t n) {
  const int before = t_asking;
  t_asking = device;
  std::byte* r = find(p, n);
  t_asking = before;
  return r;
}
// As the driver at a synchronizing call: context c's kernel printf output goes to this
// process's stdout, through stdio (not flushed). Lock held.
void flush_printf_locked(CUcontext c) {
  auto it = ctx_state().find(c);
  if (it == ctx_state().end() || it->second.printf_fifo.empty()) return;
  std::fwrite(it->second.printf_fifo.data(), 1, it->second.printf_fifo.size(), stdout);
  it->second.printf_fifo.clear();
}
CUresult f_ctx_create(CUcontext* c, void*, unsigned, CUdevice dev) {
  if (gpu_poisoned()) return 700;
  std::lock_guard l(gpu().mu);
  *c = reinterpret_cast<CUcontext>(gpu().next_handle++);
  gpu().contexts.insert(*c);
  ctx_state()[*c] = FakeCtxState{dev};
  t_ctx = *c;  // a new context is made current, as cuCtxCreate does
  return CUDA_SUCCESS;
}
CUresult f_ctx_destroy(CUcontext c) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!g.contexts.erase(c)) return 201;
  flush_printf_locked(c);
  ctx_state().erase(c);  // and peer access from and to it
  for (auto& [other, st] : ctx_state()) st.peers.erase(c);
  // The context's streams, events and modules go with it.
  for (auto it = g.modules.begin(); it != g.modules.end();) {
    auto next = std::next(it);
    if (it->second.ctx == c) unload_locked(it);
    it = next;
  }
  std::vector<CUgraph> captures;
  for (auto& [s, st] : g.streams)
    if (st.ctx == c && st.capture_origin) captures.push_back(st.capture);
  for (auto& [k, st] : g.special_streams)
    if (k.first == c && st.capture_origin) captures.push_back(st.capture);
  for (CUgraph cap : captures) drop_capture_locked(cap);
  std::erase_if(g.streams, [c](const auto& kv) { return kv.second.ctx == c; });
  std::erase_if(g.special_streams, [c](const auto& kv) { return kv.first.first == c; });
  std::erase_if(g.events, [c](const auto& kv) { return kv.second.ctx == c; });
  std::erase_if(g.execs, [c](const auto& kv) { return kv.second.ctx == c; });
  std::erase_if(g.arrays, [c](const auto& kv) { return kv.second.ctx == c; });
  std::erase_if(g.mipmaps, [c](const auto& kv) { return kv.second.ctx == c; });
  std::erase_if(g.textures, [c](const auto& kv) { return kv.second.ctx == c; });
  std::erase_if(g.surfaces, [c](const auto& kv) { return kv.second.ctx == c; });
  if (t_ctx == c) t_ctx = nullptr;
  g_endless_cv.notify_all();  // a kernel that never ended went with its context
  return CUDA_SUCCESS;
}
CUresult f_ctx_set(CUcontext c) {
  t_ctx = c;
  return CUDA_SUCCESS;
}
// Test hooks: a hook cuCtxSynchronize runs first (outside the fake's lock: it may block),
// and the thread of the last launch.
std::mutex g_hook_mu;
std::function<void()> g_sync_hook;
std::atomic<std::thread::id> g_last_launch_thread{};
std::atomic<std::thread::id> g_last_async_copy_thread{};  // host <-> device, on a stream

CUresult f_sync() {
  std::function<void()> hook;
  {
    std::lock_guard h(g_hook_mu);
    hook = g_sync_hook;
  }
  if (hook) hook();
  auto& g = gpu();
  std::unique_lock l(g.mu);
  g_endless_cv.wait(l, [] { return !endless_in_locked(t_ctx); });
  if (!t_ctx || !g.contexts.contains(t_ctx)) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  if (gpu_poisoned()) return 700;  // a sticky error: every synchronize reports it
  for (auto& [s, st] : g.streams)
    if (st.ctx == t_ctx && st.capture_status) return invalidate_capture_locked(&st);
  run_deferred(0);
  for (auto& [s, st] : g.streams)
    if (st.ctx == t_ctx) st.busy = false;
  for (auto& [k, st] : g.special_streams)
    if (k.first == t_ctx) st.busy = false;
  for (auto& [e, ev] : g.events)
    if (ev.ctx == t_ctx) ev.done = true;
  flush_printf_locked(t_ctx);
  return CUDA_SUCCESS;
}
CUresult f_alloc(CUdeviceptr* p, size_t n) {
  if (gpu_poisoned()) return 700;
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (n > (1ull << 30)) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = alloc_locked(n);
  return CUDA_SUCCESS;
}
CUresult f_free(CUdeviceptr p) {
  std::lock_guard l(gpu().mu);
  if (gpu().global_ptrs.contains(p)) return CUDA_ERROR_INVALID_VALUE;  // a module's: freed with it
  if (gpu().maps.contains(p)) return CUDA_ERROR_INVALID_VALUE;  // VMM memory: cuMemUnmap
  return gpu().mem.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
// ---- virtual memory management, with the real driver's rules as far as the arena uses
// them: 2 MiB granularity, flags 0, a hint honoured when free and aligned (else another
// address, or INVALID_VALUE when unaligned), mappings inside one reservation.
constexpr uint64_t kVmmGranularity = 2ull << 20;
bool valid_prop(const CUmemAllocationProp* prop) {
  return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
         (prop->location.id == 0 || prop->location.id == 1) &&
         (prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0;
}
CUresult f_granularity(size_t* g, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags) {
  if (!g || !valid_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
  *g = kVmmGranularity;
  return CUDA_SUCCESS;
}
// Whether [p, p+n) overlaps a reservation or other device memory. Lock held.
bool va_taken_locked(uint64_t p, uint64_t n) {
  auto& g = gpu();
  auto overlaps = [&](const auto& ranges, auto size_of) {
    auto it = ranges.lower_bound(p + n);
    if (it == ranges.begin()) return false;
    --it;
    return it->first + size_of(it->second) > p;
  };
  return overlaps(g.reservations, [](uint64_t b) { return b; }) ||
         overlaps(g.mem, [](const FakeBytes& v) { return std::max<uint64_t>(v.size(), 1); });
}
CUresult f_address_reserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                           unsigned long long flags) {
  if (!ptr || size == 0 || size % kVmmGranularity || flags) return CUDA_ERROR_INVALID_VALUE;
  if (alignment && (alignment & (alignment - 1))) return CUDA_ERROR_INVALID_VALUE;
  if (addr % kVmmGranularity || (alignment && addr % alignment)) return CUDA_ERROR_INVALID_VALUE;
  auto& g = gpu();
  std::lock_guard l(g.mu);
  uint64_t p = addr;
  if (!addr || g.move_hints || addr + size < addr || va_taken_locked(addr, size)) {
    // As the driver does with a hint in use: success, somewhere else.
    const uint64_t a = std::max<uint64_t>(alignment, kVmmGranularity);
    do {
      p = (g.next_va + a - 1) / a * a;
      g.next_va = p + size;
    } while (va_taken_locked(p, size));
  }
  g.reservations[p] = size;
  *ptr = p;
  return CUDA_SUCCESS;
}
CUresult f_address_free(CUdeviceptr ptr, size_t size) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.reservations.find(ptr);
  if (it == g.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  // Still mapped inside: refused, so that a leak shows.
  if (auto m = g.maps.lower_bound(ptr); m != g.maps.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  g.reservations.erase(it);
  return CUDA_SUCCESS;
}
CUresult f_mem_create(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* prop,
                      unsigned long long flags) {
  if (gpu_poisoned()) return 700;
  if (!h || !valid_prop(prop) || flags || size == 0 || size % kVmmGranularity) return CUDA_ERROR_INVALID_VALUE;
  auto& g = gpu();
  std::lock_guard l(g.mu);
  uint64_t on_device = 0;
  for (auto& [handle, ph] : g.phys)
    if (ph.device == prop->location.id) on_device += ph.bytes;
  if (size > profile().total_mem || on_device > profile().total_mem - size) return CUDA_ERROR_OUT_OF_MEMORY;
  *h = g.next_handle++;
  FakePhys& ph = g.phys[*h];
  ph.bytes = size;
  ph.device = prop->location.id;
  ph.exportable = prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  ph.data.resize(size);
  return CUDA_SUCCESS;
}
// The memfd of an exported handle: a page of header (kFakeShmMagic, device, bytes), then the
// bytes.
constexpr uint64_t kFakeShmMagic = 0x6d6873656b6166ull;  // "fakeshm"
constexpr size_t kFakeShmHeader = 4096;
std::shared_ptr<FakeShm> map_shm(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, kFakeShmHeader);
  if (p == MAP_FAILED) return nullptr;
  auto shm = std::make_shared<FakeShm>();
  shm->addr = p;
  shm->bytes = bytes;
  return shm;
}
// The bytes of `ph` (`bytes`, where they are now) moved into a memfd that importers and
// views map too, unless they are there already.
bool share_phys(const FakePhys& ph, FakeBytes& bytes) {
  if (bytes.shm()) return true;
  const int fd = ::memfd_create("vmcuda-fake-vmm", MFD_CLOEXEC);
  if (fd < 0) return false;
  const uint64_t header[3] = {kFakeShmMagic, static_cast<uint64_t>(ph.device), ph.bytes};
  if (::ftruncate(fd, static_cast<off_t>(kFakeShmHeader + ph.bytes)) != 0 ||
      ::pwrite(fd, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) {
    ::close(fd);
    return false;
  }
  auto shm = map_shm(fd, ph.bytes);
  if (!shm) {
    ::close(fd);
    return false;
  }
  shm->fd = fd;
  std::memcpy(shm->addr, bytes.data(), ph.bytes);
  bytes.share(std::move(shm));
  return true;
}
CUresult f_mem_export(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                      unsigned long long flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.phys.find(h);
  if (!out || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || flags) return CUDA_ERROR_INVALID_VALUE;
  if (it == g.phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  FakePhys& ph = it->second;
  if (!ph.exportable) return CUDA_ERROR_INVALID_VALUE;  // not made with that handle type
  FakeBytes& bytes = ph.mapped_at ? g.mem.at(ph.mapped_at) : ph.data;
  if (!share_phys(ph, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  const int copy = ::fcntl(bytes.shm()->fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(out) = copy;
  return CUDA_SUCCESS;
}
CUresult f_mem_import(CUmemGenericAllocationHandle* h, void* os, CUmemAllocationHandleType type) {
  if (!h || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os));
  uint64_t header[3] = {};
  if (::pread(fd, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) || header[0] != kFakeShmMagic ||
      header[1] > 1 || header[2] == 0 || header[2] % kVmmGranularity)
    return CUDA_ERROR_INVALID_VALUE;
  auto shm = map_shm(fd, header[2]);
  if (!shm) return CUDA_ERROR_INVALID_VALUE;
  shm->fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // a later export of the import hands this out
  auto& g = gpu();
  std::lock_guard l(g.mu);
  *h = g.next_handle++;
  FakePhys& ph = g.phys[*h];
  ph.bytes = header[2];
  ph.device = static_cast<int>(header[1]);
  ph.exportable = true;
  ph.data.share(std::move(shm));
  return CUDA_SUCCESS;
}
CUresult f_mem_release(CUmemGenericAllocationHandle h) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.phys.find(h);
  if (it == g.phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.mapped_at || it->second.views)
    it->second.released = true;
  else
    g.phys.erase(it);
  return CUDA_SUCCESS;
}
CUresult f_mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                   unsigned long long flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.phys.find(h);
  if (it == g.phys.end() || it->second.released) return CUDA_ERROR_INVALID_HANDLE;
  FakePhys& ph = it->second;
  if (flags || ptr % kVmmGranularity || offset % kVmmGranularity || size == 0 || size % kVmmGranularity)
    return CUDA_ERROR_INVALID_VALUE;
  if (offset > ph.bytes || size > ph.bytes - offset) return CUDA_ERROR_INVALID_VALUE;
  // Inside one reservation, over nothing mapped.
  auto r = g.reservations.upper_bound(ptr);
  if (r == g.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (ptr - r->first >= r->second || size > r->second - (ptr - r->first)) return CUDA_ERROR_INVALID_VALUE;
  if (auto m = g.mem.lower_bound(ptr); m != g.mem.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (auto m = g.mem.lower_bound(ptr); m != g.mem.begin() && std::prev(m)->first + std::prev(m)->second.size() > ptr)
    return CUDA_ERROR_INVALID_VALUE;
  if (offset == 0 && size == ph.bytes && !ph.mapped_at) {
    g.mem[ptr] = std::move(ph.data);
    ph.data = {};
    ph.mapped_at = ptr;
    g.maps[ptr] = FakeMap{h, 0, size, false};
    return CUDA_SUCCESS;
  }
  FakeBytes& bytes = ph.mapped_at ? g.mem.at(ph.mapped_at) : ph.data;
  if (!share_phys(ph, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  FakeBytes v;
  v.view(bytes.shm(), offset, size);
  g.mem[ptr] = std::move(v);
  ++ph.views;
  g.maps[ptr] = FakeMap{h, 0, size, true};
  return CUDA_SUCCESS;
}
CUresult f_mem_unmap(CUdeviceptr ptr, size_t size) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  // Whole contiguous mappings only, at least one.
  auto first = g.maps.find(ptr);
  if (first == g.maps.end()) return CUDA_ERROR_INVALID_VALUE;
  auto last = first;
  uint64_t end = ptr;
  for (; last != g.maps.end() && last->first == end && end - ptr < size; ++last) end += last->second.bytes;
  if (end - ptr != size) return CUDA_ERROR_INVALID_VALUE;
  for (auto m = first; m != last;) {
    auto ph = g.phys.find(m->second.handle);
    auto data = g.mem.find(m->first);
    if (m->second.view) {
      --ph->second.views;
    } else {
      ph->second.data = std::move(data->second);
      ph->second.mapped_at = 0;
    }
    g.mem.erase(data);
    if (ph->second.released && !ph->second.mapped_at && !ph->second.views) g.phys.erase(ph);
    m = g.maps.erase(m);
  }
  return CUDA_SUCCESS;
}
CUresult f_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (desc[i].location.id != 0 && desc[i].location.id != 1) return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  auto& g = gpu();
  std::lock_guard l(g.mu);
  // The range must be mapped throughout (whole mappings, contiguous).
  auto first = g.maps.find(ptr);
  if (first == g.maps.end()) return CUDA_ERROR_INVALID_VALUE;
  auto last = first;
  uint64_t end = ptr;
  for (; last != g.maps.end() && last->first == end && end - ptr < size; ++last) end += last->second.bytes;
  if (end - ptr != size) return CUDA_ERROR_INVALID_VALUE;
  for (auto m = first; m != last; ++m)
    for (size_t i = 0; i < count; ++i) {
      const unsigned bit = 1u << desc[i].location.id;
      m->second.access = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? m->second.access & ~bit : m->second.access | bit;
    }
  return CUDA_SUCCESS;
}
// The pieces of [p, p+n) as device memory, as the driver's unified VA has them: one block,
// or VMM mappings that follow one another without a gap (each piece checked by find); every
// piece, or false when one is missing. Lock held.
template <class F>
bool for_each_piece(uint64_t p, size_t n, F f) {
  if (std::byte* whole = find(p, n)) return f(whole, size_t{0}, n), true;
  auto& g = gpu();
  std::vector<std::pair<std::byte*, size_t>> pieces;
  for (size_t done = 0; done < n;) {
    auto m = g.maps.upper_bound(p + done);
    if (m == g.maps.begin()) return false;
    --m;
    auto mem = g.mem.find(m->first);
    if (mem == g.mem.end()) return false;
    const uint64_t off = p + done - m->first;
    if (off >= mem->second.size()) return false;
    const size_t k = std::min<size_t>(n - done, mem->second.size() - off);
    std::byte* at = find(p + done, k);
    if (!at) return false;
    pieces.emplace_back(at, k);
    done += k;
  }
  size_t off = 0;
  for (auto [at, k] : pieces) f(at, off, k), off += k;
  return true;
}
CUresult f_htod(CUdeviceptr d, const void* s, size_t n) {
  std::lock_guard l(gpu().mu);
  const auto* src = static_cast<const std::byte*>(s);
  if (!for_each_piece(d, n, [&](std::byte* at, size_t off, size_t k) { std::memcpy(at, src + off, k); }))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult f_dtoh(void* d, CUdeviceptr s, size_t n) {
  std::lock_guard l(gpu().mu);
  auto* dst = static_cast<std::byte*>(d);
  if (!for_each_piece(s, n, [&](std::byte* at, size_t off, size_t k) { std::memcpy(dst + off, at, k); }))
    return CUDA_ERROR_INVALID_VALUE;
  flush_printf_locked(t_ctx);  // a synchronous copy
  return CUDA_SUCCESS;
}
CUresult f_dtod(CUdeviceptr d, CUdeviceptr s, size_t n) {
  std::lock_guard l(gpu().mu);
  std::byte *pd = find(d, n), *ps = find(s, n);
  if (!pd || !ps) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(pd, ps, n);
  return CUDA_SUCCESS;
}
CUresult f_memset(CUdeviceptr d, unsigned char v, size_t n) {
  std::lock_guard l(gpu().mu);
  std::byte* p = find(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, v, n);
  return CUDA_SUCCESS;
}
// The executor's kernels an image names (FakeModule::kernels): a fatbin's bytes (its header
// says how many), or a text image's up to its NUL.
std::vector<const FakeKernel*> kernels_named_in(const void* image, bool fatbin) {
  const auto* b = static_cast<const char*>(image);
  size_t n;
  if (fatbin) {
    uint16_t header;
    uint64_t fat;
    std::memcpy(&header, b + 6, 2);
    std::memcpy(&fat, b + 8, 8);
    n = header + fat;
  } else {
    n = std::strlen(b);
  }
  const std::string_view bytes(b, n);
  std::vector<const FakeKernel*> out;
  for (const FakeKernel& k : all_fake_kernels()) {
    for (const std::string& mark : {std::string(".text.") + k.name, std::string(".entry ") + k.name}) {
      bool found = false;
      for (size_t at = bytes.find(mark); at != std::string_view::npos; at = bytes.find(mark, at + 1)) {
        const size_t end = at + mark.size();
        const char next = end < bytes.size() ? bytes[end] : '\0';
        if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_' && next != '$') {
          found = true;
          break;
        }
      }
      if (found) {
        out.push_back(&k);
        break;
      }
    }
  }
  return out;
}
CUresult f_mod_load(CUmodule* m, const void* image) {
  // The executor's own test images, or real fatbins (nvcc's, as the CUDA test programs ship them).
  uint32_t magic;
  std::memcpy(&magic, image, 4);
  // Byte by byte, stopping at the first difference: the driver is not told the image's
  // size, so a short image that is not ours must not be read past its end.
  auto is_fake = [image] {
    const auto* p = static_cast<const char*>(image);
    for (size_t i = 0; i + 1 < sizeof kFakeModuleMagic; ++i)
      if (p[i] != kFakeModuleMagic[i]) return false;
    return true;
  };
  if (magic != 0xBA55ED50u && !is_fake())
    return 200;  // INVALID_IMAGE
  std::lock_guard l(gpu().mu);
  *m = reinterpret_cast<CUmodule>(gpu().next_handle++);
  std::set<uint64_t> taken;
  for (const auto& [h, mod] : gpu().modules) taken.insert(mod.data);
  uint64_t data = kModuleHeap;
  while (taken.contains(data)) data += kModuleSlot;
  gpu().modules[*m] = FakeModule{t_ctx, {}, data, kernels_named_in(image, magic == 0xBA55ED50u)};
  return CUDA_SUCCESS;
}
CUresult f_mod_unload(CUmodule m) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().modules.find(m);
  if (it == gpu().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  unload_locked(it);
  return CUDA_SUCCESS;
}
// A device attribute of the device the executor presents, or `fallback` where it has none.
int dev_attr(int attr, int fallback) {
  int v = 0;
  return f_attr(&v, attr, 0) == CUDA_SUCCESS && v > 0 ? v : fallback;
}
// A CUfunction is a key of FakeGpu::functions. Lock held.
FakeFunction* function_of(CUfunction f) {
  auto it = gpu().functions.find(f);
  return it == gpu().functions.end() ? nullptr : &it->second;
}
CUresult f_get_function(CUfunction* f, CUmodule m, const char* name) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!g.modules.contains(m)) return CUDA_ERROR_INVALID_HANDLE;
  const FakeKernel* k = find_fake_kernel(name);
  if (!k) return CUDA_ERROR_NOT_FOUND;
  for (auto& [handle, fn] : g.functions)  // the same kernel of the same module: the same handle
    if (fn.module == m && fn.kernel == k) return *f = handle, CUDA_SUCCESS;
  *f = reinterpret_cast<CUfunction>(g.next_handle++);
  FakeFunction fn{k, m, {}};
  // The settable attributes' defaults (cuda.h): the dynamic shared memory a launch may use
  // is the per-block maximum less the kernel's static shared memory; no carveout preference.
  fn.attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = std::max(0, dev_attr(8, 49152) - k->shared_bytes);
  fn.attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
  g.functions[*f] = fn;
  return CUDA_SUCCESS;
}
CUresult f_function_count(unsigned* count, CUmodule m) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().modules.find(m);
  if (it == gpu().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<unsigned>(it->second.kernels.size());
  return CUDA_SUCCESS;
}
CUresult f_get_function(CUfunction* f, CUmodule m, const char* name);
CUresult f_enumerate_functions(CUfunction* fns, unsigned n, CUmodule m) {
  std::vector<const FakeKernel*> kernels;
  {
    std::lock_guard l(gpu().mu);
    auto it = gpu().modules.find(m);
    if (it == gpu().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
    if (!fns) return CUDA_ERROR_INVALID_VALUE;
    kernels = it->second.kernels;
  }
  for (size_t i = 0; i < kernels.size() && i < n; ++i)
    if (CUresult e = f_get_function(&fns[i], m, kernels[i]->name); e != CUDA_SUCCESS) return e;
  return CUDA_SUCCESS;
}
CUresult f_func_name(const char** name, CUfunction f) {
  std::lock_guard l(gpu().mu);
  const FakeFunction* fn = function_of(f);
  if (!name || !fn) return CUDA_ERROR_INVALID_VALUE;
  *name = fn->kernel->name;
  return CUDA_SUCCESS;
}
CUresult f_param_info(CUfunction f, size_t i, size_t* off, size_t* size) {
  std::lock_guard l(gpu().mu);
  const FakeFunction* fn = function_of(f);
  if (!fn || i >= fn->kernel->params.size()) return CUDA_ERROR_INVALID_VALUE;
  *off = fn->kernel->params[i].first;
  *size = fn->kernel->params[i].second;
  return CUDA_SUCCESS;
}
int occupancy_locked(const FakeFunction& fn, int block_size, size_t dynamic_shared);
// A kernel's view of a texture or surface object of context `c` (below). Lock held.
bool texture_view_locked(CUcontext c, uint64_t value, FakeTexture* out);
bool surface_view_locked(CUcontext c, uint64_t value, FakeSurface* out);
FakeLaunchInfo g_last_launch_info;  // under gpu().mu
// A launch's checks and its run, as the driver makes them. Lock held.
CUresult launch_locked(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream stream, void** params, const FakeLaunchInfo& info) {
  FakeFunction* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  // The device's grid and block dimension limits, as the driver checks them (bx * by * bz
  // above wraps for huge values: each dimension on its own too).
  if (gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64) return CUDA_ERROR_INVALID_VALUE;
  // More dynamic shared memory than the kernel's attribute allows (cuFuncSetAttribute).
  if (shared > static_cast<unsigned>(fn->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]))
    return CUDA_ERROR_INVALID_VALUE;
  FakeStream* st = stream_for_work(stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (info.cooperative) {
    // Every block co-resident: at most the occupancy calculator's blocks per multiprocessor
    // times the multiprocessors (what cudaOccupancyMaxActiveBlocksPerMultiprocessor tells
    // programs to size a cooperative grid by).
    if (dev_attr(95, 0) == 0) return CUDA_ERROR_NOT_SUPPORTED;
    const uint64_t most = uint64_t(occupancy_locked(*fn, static_cast<int>(bx * by * bz), shared)) * dev_attr(16, 132);
    if (uint64_t{gx} * gy * gz > most) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  if (st->capture_status) {
    FakeNode n;
    n.type = 0;
    n.fn = f;
    n.grid[0] = gx, n.grid[1] = gy, n.grid[2] = gz, n.block[0] = bx, n.block[1] = by, n.block[2] = bz;
    n.shared = shared;
    for (size_t i = 0; i < fn->kernel->params.size(); ++i) {
      const auto* p = static_cast<const std::byte*>(params[i]);
      n.params.emplace_back(p, p + fn->kernel->params[i].second);
    }
    return capture_locked(st, std::move(n));
  }
  g_last_launch_info = info;
  did_work(st, kLaunchMs);
  FakeModule& mod = gpu().modules.at(fn->module);
  FakeCtxState& cs = ctx_state()[mod.ctx];
  FakeLaunch launch{uint64_t{gx} * gy * gz * bx * by * bz,
                          {gx, gy, gz},
                          {bx, by, bz},
                          shared,
                          [](uint64_t p, size_t n) { return find(p, n); },
                          [&mod](const char* name) -> std::byte* {
                            const uint64_t p = global_locked(mod, name);
                            return p ? find(p, find_fake_global(name)->bytes) : nullptr;
                          },
                          &cs.printf_fifo,
                          cs.limits[1],  // CU_LIMIT_PRINTF_FIFO_SIZE
                          info.cooperative};
  launch.texture = [c = mod.ctx](uint64_t v, FakeTexture* t) { return texture_view_locked(c, v, t); };
  launch.surface = [c = mod.ctx](uint64_t v, FakeSurface* t) { return surface_view_locked(c, v, t); };
  t_asking = static_cast<int>(cs.device);  // the kernel's device reaches memory
  const int r = fn->kernel->run(params, launch);
  t_asking = -1;
  // As on the H200 (tests/gpu/context_fault_probe.cc): an illegal address poisons every
  // context of the process, new ones included.
  if (r == 700) gpu_poisoned() = true;
  if (r == kFakeNeverEnds) {
    st->busy = st->endless = true;  // waits on it last until its context goes
    return CUDA_SUCCESS;
  }
  return r;
}
CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  unsigned shared, CUstream stream, void** params, void**) {
  g_last_launch_thread.store(std::this_thread::get_id());
  std::lock_guard l(gpu().mu);
  return launch_locked(f, gx, gy, gz, bx, by, bz, shared, stream, params, FakeLaunchInfo{});
}
CUresult f_launch_cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned shared, CUstream stream, void** params) {
  g_last_launch_thread.store(std::this_thread::get_id());
  std::lock_guard l(gpu().mu);
  FakeLaunchInfo info;
  info.cooperative = true;
  return launch_locked(f, gx, gy, gz, bx, by, bz, shared, stream, params, info);
}
// The attributes the fake knows (those vmcuda forwards); others are refused as an old driver
// would (CUDA_ERROR_INVALID_VALUE).
CUresult f_launch_ex(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  g_last_launch_thread.store(std::this_thread::get_id());
  if (!c || extra) return CUDA_ERROR_INVALID_VALUE;
  if (c->numAttrs && !c->attrs) return CUDA_ERROR_INVALID_VALUE;
  FakeLaunchInfo info;
  info.ex = true;
  info.attributes = c->numAttrs;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    const CUlaunchAttribute& a = c->attrs[i];
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_IGNORE:
        break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        info.cooperative = a.value.cooperative != 0;
        break;
      case CU_LAUNCH_ATTRIBUTE_PRIORITY:  // clamped to the range, 0 (least) to -5 (greatest)
        info.priority = std::clamp(a.value.priority, -5, 0);
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
        const unsigned x = a.value.clusterDim.x, y = a.value.clusterDim.y, z = a.value.clusterDim.z;
        // Each divides the grid; at most 8 blocks (the portable cluster size).
        if (!x || !y || !z || c->gridDimX % x || c->gridDimY % y || c->gridDimZ % z || uint64_t{x} * y * z > 8)
          return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        info.cluster[0] = x, info.cluster[1] = y, info.cluster[2] = z;
        break;
      }
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        if (a.value.clusterSchedulingPolicyPreference < 0 || a.value.clusterSchedulingPolicyPreference > 2)
          return CUDA_ERROR_INVALID_VALUE;
        info.cluster_policy = a.value.clusterSchedulingPolicyPreference;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        info.programmatic_serialization = a.value.programmaticStreamSerializationAllowed != 0;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  std::lock_guard l(gpu().mu);
  return launch_locked(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                       c->sharedMemBytes, c->hStream, params, info);
}
// ---- module variables, function attributes, occupancy
CUresult f_get_global(CUdeviceptr* ptr, size_t* bytes, CUmodule m, const char* name) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.modules.find(m);
  if (it == g.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t p = global_locked(it->second, name);
  if (!p) return CUDA_ERROR_NOT_FOUND;
  if (ptr) *ptr = p;
  if (bytes) *bytes = find_fake_global(name)->bytes;
  return CUDA_SUCCESS;
}
// What the stub asks of a pointer: whether a module variable is managed memory (a
// library's __managed__ variable, cuLibraryGetManaged). Other attributes are not faked.
CUresult f_pointer_attribute(void* data, int attr, CUdeviceptr p) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  if (attr != CU_POINTER_ATTRIBUTE_IS_MANAGED) return CUDA_ERROR_NOT_SUPPORTED;
  unsigned int managed = 0;
  for (const auto& [handle, m] : g.modules)
    for (const auto& [name, ptr] : m.globals)
      if (ptr == p) managed = find_fake_global(name.c_str())->managed;
  *static_cast<unsigned int*>(data) = managed;
  return CUDA_SUCCESS;
}
CUresult f_func_get_attribute(int* v, int attr, CUfunction f) {
  std::lock_guard l(gpu().mu);
  const FakeFunction* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  const FakeKernel& k = *fn->kernel;
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: {
      // As many threads as its registers allow, in whole warps, at most the device's maximum.
      const int per_warp = (k.num_regs * 32 + 255) / 256 * 256;
      *v = std::min(dev_attr(1, 1024), per_warp ? dev_attr(12, 65536) / per_warp * 32 : 1024);
      return CUDA_SUCCESS;
    }
    case 1: *v = k.shared_bytes; return CUDA_SUCCESS;
    case 2: *v = k.const_bytes; return CUDA_SUCCESS;
    case 3: *v = k.local_bytes; return CUDA_SUCCESS;
    case 4: *v = k.num_regs; return CUDA_SUCCESS;
    case 5: case 6: *v = 90; return CUDA_SUCCESS;  // PTX and binary version: the programs' sm_90
    case 7: *v = 0; return CUDA_SUCCESS;           // cache mode CA
    default:
      if (attr < 0 || attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
      *v = fn->attrs[attr];
      return CUDA_SUCCESS;
  }
}
CUresult f_func_set_attribute(CUfunction f, int attr, int value) {
  std::lock_guard l(gpu().mu);
  FakeFunction* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      // Up to the opt-in maximum less the static shared memory (cuda.h).
      if (value < 0 || value > dev_attr(97, 232448) - fn->kernel->shared_bytes) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
      break;
    default:
      if (attr < 10 || attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  }
  fn->attrs[attr] = value;
  return CUDA_SUCCESS;
}
// The occupancy calculator's arithmetic: the fewest blocks that the threads, the blocks,
// the registers and the shared memory of a multiprocessor each allow.
int occupancy_locked(const FakeFunction& fn, int block_size, size_t dynamic_shared) {
  if (block_size <= 0 || block_size > dev_attr(1, 1024) ||
      dynamic_shared > static_cast<size_t>(fn.attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]))
    return 0;
  const int warp = dev_attr(10, 32);
  const int warps = (block_size + warp - 1) / warp;
  int n = std::min(dev_attr(39, 2048) / (warps * warp), dev_attr(106, 32));
  const int regs_per_warp = (fn.kernel->num_regs * warp + 255) / 256 * 256;
  if (regs_per_warp) n = std::min(n, dev_attr(82, 65536) / regs_per_warp / warps);
  const uint64_t shared = dynamic_shared + fn.kernel->shared_bytes + dev_attr(111, 1024);
  return static_cast<int>(std::min<uint64_t>(n, dev_attr(81, 233472) / shared));
}
CUresult f_occupancy_flags(int* blocks, CUfunction f, int block_size, size_t dynamic_shared, unsigned flags) {
  std::lock_guard l(gpu().mu);
  const FakeFunction* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!blocks || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  *blocks = occupancy_locked(*fn, block_size, dynamic_shared);
  return CUDA_SUCCESS;
}
// What a block may take with `n` blocks per multiprocessor: the multiprocessor's shared
// memory shared among them, less each block's reserve and static shared memory, up to the
// kernel's dynamic maximum; 0 when the blocks' threads do not fit.
CUresult f_occupancy_shared(size_t* bytes, CUfunction f, int n, int block_size) {
  std::lock_guard l(gpu().mu);
  const FakeFunction* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!bytes || n <= 0 || block_size <= 0 || block_size > dev_attr(1, 1024)) return CUDA_ERROR_INVALID_VALUE;
  *bytes = 0;
  if (static_cast<int64_t>(n) * block_size > dev_attr(39, 2048)) return CUDA_SUCCESS;
  const int64_t per_block = dev_attr(81, 233472) / n - dev_attr(111, 1024) - fn->kernel->shared_bytes;
  *bytes = static_cast<size_t>(std::clamp<int64_t>(per_block, 0, fn->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]));
  return CUDA_SUCCESS;
}
// Clusters at once: the blocks a multiprocessor holds, over all of them, in clusters of the
// configuration's size (1 without a cluster attribute).
CUresult f_occupancy_clusters(int* clusters, CUfunction f, const CUlaunchConfig* c) {
  std::lock_guard l(gpu().mu);
  const FakeFunction* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!clusters || !c) return CUDA_ERROR_INVALID_VALUE;
  unsigned size = 1;
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      size = c->attrs[i].value.clusterDim.x * c->attrs[i].value.clusterDim.y * c->attrs[i].value.clusterDim.z;
  if (size == 0 || size > 16) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  const int per_sm = occupancy_locked(*fn, static_cast<int>(c->blockDimX * c->blockDimY * c->blockDimZ), c->sharedMemBytes);
  *clusters = per_sm * dev_attr(16, 132) / static_cast<int>(size);
  return CUDA_SUCCESS;
}
CUresult f_occupancy(int* blocks, CUfunction f, int block_size, size_t dynamic_shared) {
  return f_occupancy_flags(blocks, f, block_size, dynamic_shared, 0);
}
// ---- pitched memory and 2D copies
CUresult f_alloc_pitch(CUdeviceptr* p, size_t* pitch, size_t width, size_t height, unsigned element_bytes) {
  if (!p || !pitch || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_bytes != 4 && element_bytes != 8 && element_bytes != 16) return CUDA_ERROR_INVALID_VALUE;
  const size_t align = static_cast<size_t>(dev_attr(14, 512));  // the texture alignment
  const size_t pt = (width + align - 1) / align * align;
  if (height > (1ull << 30) / pt) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  *p = alloc_locked(pt * height);
  *pitch = pt;
  return CUDA_SUCCESS;
}
// One row of one side of a 2D copy, or nullptr when it is not valid memory. Lock held.
std::byte* row_of(CUmemorytype type, const void* host, CUdeviceptr device, size_t x, size_t y, size_t pitch,
                  size_t width, size_t row) {
  const uint64_t off = (y + row) * pitch + x;
  if (type == CU_MEMORYTYPE_HOST) return static_cast<std::byte*>(const_cast<void*>(host)) + off;
  if (type == CU_MEMORYTYPE_DEVICE) return find(device + off, width);
  return nullptr;  // arrays and unified memory: not in the executor
}
CUresult copy_2d(const CUDA_MEMCPY2D* c, bool synchronous) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  for (size_t y = 0; y < c->Height; ++y) {
    const std::byte* s = row_of(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcPitch,
                                c->WidthInBytes, y);
    std::byte* d = row_of(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstPitch,
                          c->WidthInBytes, y);
    if (!s || !d) return CUDA_ERROR_INVALID_VALUE;
    std::memmove(d, s, c->WidthInBytes);
  }
  if (synchronous) flush_printf_locked(t_ctx);
  return CUDA_SUCCESS;
}
CUresult f_memcpy_2d(const CUDA_MEMCPY2D* c) { return copy_2d(c, true); }
CUresult f_memset_2d(CUdeviceptr dst, size_t pitch, unsigned char v, size_t width, size_t height) {
  if (width > pitch) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  for (size_t y = 0; y < height; ++y) {
    std::byte* d = find(dst + y * pitch, width);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    std::memset(d, v, width);
  }
  return CUDA_SUCCESS;
}
// The async 2D calls: stream work (checked, timed), then the synchronous copy or memset.
CUresult f_memcpy_2d_async(const CUDA_MEMCPY2D* c, CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status && c) {
      FakeNode n;
      n.type = 1;
      n.op = [copy = *c](CUstream rs) { return f_memcpy_2d_async(&copy, rs); };
      n.copy.srcXInBytes = c->srcXInBytes, n.copy.srcY = c->srcY, n.copy.srcMemoryType = c->srcMemoryType;
      n.copy.srcHost = c->srcHost, n.copy.srcDevice = c->srcDevice, n.copy.srcArray = c->srcArray;
      n.copy.srcPitch = c->srcPitch, n.copy.srcHeight = c->Height;
      n.copy.dstXInBytes = c->dstXInBytes, n.copy.dstY = c->dstY, n.copy.dstMemoryType = c->dstMemoryType;
      n.copy.dstHost = c->dstHost, n.copy.dstDevice = c->dstDevice, n.copy.dstArray = c->dstArray;
      n.copy.dstPitch = c->dstPitch, n.copy.dstHeight = c->Height;
      n.copy.WidthInBytes = c->WidthInBytes, n.copy.Height = c->Height, n.copy.Depth = 1;
      return capture_locked(st, std::move(n));
    }
    did_work(st, kCopyMs);
  }
  return copy_2d(c, false);
}
CUresult f_memset_2d_async(CUdeviceptr dst, size_t pitch, unsigned char v, size_t width, size_t height,
                           CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode n;
      n.type = 2;
      n.op = [=](CUstream rs) { return f_memset_2d_async(dst, pitch, v, width, height, rs); };
      n.memset = memset_params(dst, pitch, v, 1, width, height);
      return capture_locked(st, std::move(n));
    }
    did_work(st, kCopyMs);
  }
  return f_memset_2d(dst, pitch, v, width, height);
}
// cuMemsetD2D16/32Async: rows of `width` elements of `elem` bytes, `pitch` bytes apart, aligned.
CUresult f_memset_2d_wide(CUdeviceptr dst, size_t pitch, uint32_t v, unsigned elem, size_t width, size_t height) {
  if (dst % elem || pitch % elem || width > pitch / elem) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  for (size_t y = 0; y < height; ++y) {
    std::byte* d = find(dst + y * pitch, width * elem);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < width; ++i) std::memcpy(d + i * elem, &v, elem);
  }
  return CUDA_SUCCESS;
}
CUresult f_memset_2d_wide_async(CUdeviceptr dst, size_t pitch, uint32_t v, unsigned elem, size_t width, size_t height,
                                CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode n;
      n.type = 2;
      n.op = [=](CUstream rs) { return f_memset_2d_wide_async(dst, pitch, v, elem, width, height, rs); };
      n.memset = memset_params(dst, pitch, v, elem, width, height);
      return capture_locked(st, std::move(n));
    }
    did_work(st, kCopyMs);
  }
  return f_memset_2d_wide(dst, pitch, v, elem, width, height);
}
// ---- arrays, 3D copies, texture and surface objects
uint64_t format_bytes(int format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
  }
  return 0;
}
// What cuArray3DCreate checks: a known format, 1, 2 or 4 channels, known flags, sizes within
// the device's limits (16384 here), a layered array's layers in Depth, a cubemap's square
// faces in 6 (layered: a multiple of 6) slices; a 1D array (Height 0) cannot be 3D.
CUresult check_array_desc(const CUDA_ARRAY3D_DESCRIPTOR* d, uint64_t* elem) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t fb = format_bytes(d->Format);
  if (!fb || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4)) return CUDA_ERROR_INVALID_VALUE;
  if (d->Flags & ~(kArray3DLayered | kArray3DSurfaceLdst | kArray3DCubemap | kArray3DTextureGather))
    return CUDA_ERROR_INVALID_VALUE;
  if (d->Width == 0 || d->Width > 16384 || d->Height > 16384 || d->Depth > 16384) return CUDA_ERROR_INVALID_VALUE;
  if (d->Flags & kArray3DCubemap) {
    if (d->Width != d->Height || d->Depth == 0 || d->Depth % 6 || (!(d->Flags & kArray3DLayered) && d->Depth != 6))
      return CUDA_ERROR_INVALID_VALUE;
  } else if (d->Flags & kArray3DLayered) {
    if (d->Depth == 0) return CUDA_ERROR_INVALID_VALUE;
  } else if (d->Height == 0 && d->Depth != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *elem = fb * d->NumChannels;
  // More than the fake's device memory (1 GiB an array): out of memory, as on a GPU.
  if (d->Width * std::max<size_t>(d->Height, 1) * std::max<size_t>(d->Depth, 1) * *elem > (1ull << 30))
    return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}
// A new array in the current context. Lock held.
CUarray add_array_locked(const CUDA_ARRAY3D_DESCRIPTOR& d, uint64_t elem, CUmipmappedArray parent) {
  auto& g = gpu();
  auto a = reinterpret_cast<CUarray>(g.next_handle++);
  FakeArray fa{t_ctx, d, elem, {}, parent};
  fa.data.resize(fa.row() * fa.rows() * fa.slices());
  g.arrays.emplace(a, std::move(fa));
  return a;
}
CUresult f_array_create(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  uint64_t elem;
  if (CUresult e = check_array_desc(d, &elem); e != CUDA_SUCCESS) return e;
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  if (!t_ctx || !gpu().contexts.contains(t_ctx)) return 201;
  *a = add_array_locked(*d, elem, nullptr);
  return CUDA_SUCCESS;
}
CUresult f_array_destroy(CUarray a) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().arrays.find(a);
  if (it == gpu().arrays.end() || it->second.parent) return CUDA_ERROR_INVALID_HANDLE;
  gpu().arrays.erase(it);
  return CUDA_SUCCESS;
}
CUresult f_mipmap_create(CUmipmappedArray* m, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
  uint64_t elem;
  if (CUresult e = check_array_desc(d, &elem); e != CUDA_SUCCESS) return e;
  if (!m || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  if (!t_ctx || !gpu().contexts.contains(t_ctx)) return 201;
  auto& g = gpu();
  *m = reinterpret_cast<CUmipmappedArray>(g.next_handle++);
  FakeMipmap mm{t_ctx, {}};
  CUDA_ARRAY3D_DESCRIPTOR ld = *d;
  const bool layers = d->Flags & (kArray3DLayered | kArray3DCubemap);
  for (unsigned i = 0; i < levels; ++i) {
    mm.levels.push_back(add_array_locked(ld, elem, *m));
    ld.Width = std::max<size_t>(1, ld.Width / 2);
    if (ld.Height) ld.Height = std::max<size_t>(1, ld.Height / 2);
    if (ld.Depth && !layers) ld.Depth = std::max<size_t>(1, ld.Depth / 2);
  }
  g.mipmaps.emplace(*m, std::move(mm));
  return CUDA_SUCCESS;
}
CUresult f_mipmap_level(CUarray* a, CUmipmappedArray m, unsigned level) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().mipmaps.find(m);
  if (it == gpu().mipmaps.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!a || level >= it->second.levels.size()) return CUDA_ERROR_INVALID_VALUE;
  *a = it->second.levels[level];
  return CUDA_SUCCESS;
}
CUresult f_mipmap_destroy(CUmipmappedArray m) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().mipmaps.find(m);
  if (it == gpu().mipmaps.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (CUarray a : it->second.levels) gpu().arrays.erase(a);
  gpu().mipmaps.erase(it);
  return CUDA_SUCCESS;
}
// Row `y` of slice `z` of one side of a 3D copy, `width` bytes from its x; nullptr when
// that is not valid memory of its kind. Lock held.
std::byte* row3d(CUmemorytype type, const void* host, CUdeviceptr device, CUarray array, size_t x, size_t y, size_t z,
                 size_t pitch, size_t height, size_t width) {
  if (type == CU_MEMORYTYPE_ARRAY) {
    auto it = gpu().arrays.find(array);
    if (it == gpu().arrays.end()) return nullptr;
    const FakeArray& a = it->second;
    if (x % a.elem || width % a.elem || x > a.row() || width > a.row() - x || y >= a.rows() || z >= a.slices())
      return nullptr;
    return const_cast<std::byte*>(a.data.data()) + (z * a.rows() + y) * a.row() + x;
  }
  const uint64_t off = (z * height + y) * pitch + x;
  if (type == CU_MEMORYTYPE_HOST) return static_cast<std::byte*>(const_cast<void*>(host)) + off;
  if (type == CU_MEMORYTYPE_DEVICE) return find(device + off, width);
  return nullptr;
}
CUresult copy_3d(const CUDA_MEMCPY3D* c, bool synchronous) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  // Memory sides: rows no longer than their pitch, slices no higher than their height.
  for (auto [type, pitch, height] : {std::tuple{c->srcMemoryType, c->srcPitch, c->srcHeight},
                                     std::tuple{c->dstMemoryType, c->dstPitch, c->dstHeight}})
    if (type != CU_MEMORYTYPE_ARRAY && (c->WidthInBytes > pitch || (c->Depth > 1 && c->Height > height)))
      return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  // Every row checked before the first byte moves.
  for (int pass = 0; pass < 2; ++pass)
    for (size_t z = 0; z < c->Depth; ++z)
      for (size_t y = 0; y < c->Height; ++y) {
        std::byte* s = row3d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY + y,
                             c->srcZ + z, c->srcPitch, c->srcHeight, c->WidthInBytes);
        std::byte* d = row3d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY + y,
                             c->dstZ + z, c->dstPitch, c->dstHeight, c->WidthInBytes);
        if (!s || !d) return CUDA_ERROR_INVALID_VALUE;
        if (pass == 1) std::memmove(d, s, c->WidthInBytes);
      }
  if (synchronous) flush_printf_locked(t_ctx);
  return CUDA_SUCCESS;
}
CUresult f_memcpy_3d(const CUDA_MEMCPY3D* c) { return copy_3d(c, true); }
CUresult f_memcpy_3d_async(const CUDA_MEMCPY3D* c, CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    did_work(st, kCopyMs);
  }
  return copy_3d(c, false);
}
// What cuTexObjectCreate / cuSurfObjectCreate check of a resource. Lock held.
CUresult check_resource_locked(const CUDA_RESOURCE_DESC* r) {
  if (!r || r->flags) return CUDA_ERROR_INVALID_VALUE;
  switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
      return gpu().arrays.contains(r->res.array.hArray) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      return gpu().mipmaps.contains(r->res.mipmap.hMipmappedArray) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_LINEAR: {
      const auto& l = r->res.linear;
      if (!format_bytes(l.format) || (l.numChannels != 1 && l.numChannels != 2 && l.numChannels != 4)) return CUDA_ERROR_INVALID_VALUE;
      return l.devPtr % 256 == 0 && find(l.devPtr, l.sizeInBytes) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
      const auto& p = r->res.pitch2D;
      const uint64_t elem = format_bytes(p.format) * p.numChannels;
      if (!elem || p.width == 0 || p.height == 0 || p.width * elem > p.pitchInBytes || p.pitchInBytes % 32) return CUDA_ERROR_INVALID_VALUE;
      return find(p.devPtr, p.pitchInBytes * (p.height - 1) + p.width * elem) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}
// The value a new texture or surface object of context `c` gets: its lowest free one. Lock held.
uint64_t object_value_locked(CUcontext c) {
  for (uint64_t v = 1;; ++v)
    if (!gpu().textures.contains({c, v}) && !gpu().surfaces.contains({c, v})) return v;
}
CUresult f_tex_create(CUtexObject* t, const CUDA_RESOURCE_DESC* r, const CUDA_TEXTURE_DESC* d,
                      const CUDA_RESOURCE_VIEW_DESC* view) {
  if (!t || !d) return CUDA_ERROR_INVALID_VALUE;
  // A view: of an array or mipmapped array, its levels in order (the executor samples the whole resource).
  if (view && (!r || (r->resType != CU_RESOURCE_TYPE_ARRAY && r->resType != CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) ||
               view->firstMipmapLevel > view->lastMipmapLevel || view->firstLayer > view->lastLayer ||
               (r->resType == CU_RESOURCE_TYPE_ARRAY && view->lastMipmapLevel != 0)))
    return CUDA_ERROR_INVALID_VALUE;
  for (int m : d->addressMode)
    if (m < 0 || m > 3) return CUDA_ERROR_INVALID_VALUE;
  if (d->filterMode < 0 || d->filterMode > 1) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  if (!t_ctx || !gpu().contexts.contains(t_ctx)) return 201;
  if (CUresult e = check_resource_locked(r); e != CUDA_SUCCESS) return e;
  // A view's levels are levels the mipmapped array has.
  if (view && r->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY &&
      view->lastMipmapLevel >= gpu().mipmaps.at(r->res.mipmap.hMipmappedArray).levels.size())
    return CUDA_ERROR_INVALID_VALUE;
  *t = object_value_locked(t_ctx);
  gpu().textures[{t_ctx, *t}] = FakeTexObject{t_ctx, *r, *d, view != nullptr, view ? view->firstMipmapLevel : 0};
  return CUDA_SUCCESS;
}
CUresult f_tex_destroy(CUtexObject t) {
  std::lock_guard l(gpu().mu);
  return gpu().textures.erase({t_ctx, t}) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;  // the current context's
}
CUresult f_surf_create(CUsurfObject* s, const CUDA_RESOURCE_DESC* r) {
  if (!s || !r || r->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  if (!t_ctx || !gpu().contexts.contains(t_ctx)) return 201;
  if (CUresult e = check_resource_locked(r); e != CUDA_SUCCESS) return e;
  // An array without CUDA_ARRAY3D_SURFACE_LDST is taken, as driver 580 does (seen on the H100).
  *s = object_value_locked(t_ctx);
  gpu().surfaces[{t_ctx, *s}] = FakeTexObject{t_ctx, *r, {}};
  return CUDA_SUCCESS;
}
CUresult f_surf_destroy(CUsurfObject s) {
  std::lock_guard l(gpu().mu);
  return gpu().surfaces.erase({t_ctx, s}) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
// A kernel's view of texture object `value` of context `c`. Lock held.
bool texture_view_locked(CUcontext c, uint64_t value, FakeTexture* out) {
  auto it = gpu().textures.find({c, value});
  if (it == gpu().textures.end()) return false;
  const CUDA_RESOURCE_DESC& r = it->second.res;
  const CUDA_TEXTURE_DESC& d = it->second.tex;
  FakeTexture t;
  for (int i = 0; i < 3; ++i) t.address[i] = d.addressMode[i];
  t.filter = d.filterMode;
  t.read_as_integer = d.flags & kTrsfReadAsInteger;
  t.normalized = d.flags & kTrsfNormalizedCoordinates;
  for (int i = 0; i < 4; ++i) t.border[i] = d.borderColor[i];
  switch (r.resType) {
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
    case CU_RESOURCE_TYPE_ARRAY: {
      // A mipmapped texture fetched without a level: its base level (0, or its view's first).
      CUarray h = r.res.array.hArray;
      if (r.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) {
        const auto m = gpu().mipmaps.find(r.res.mipmap.hMipmappedArray);
        if (m == gpu().mipmaps.end() || it->second.first_level >= m->second.levels.size()) return false;  // freed since
        h = m->second.levels[it->second.first_level];
      }
      auto a = gpu().arrays.find(h);
      if (a == gpu().arrays.end()) return false;  // freed since
      const FakeArray& fa = a->second;
      t.data = fa.data.data();
      t.pitch = fa.row();
      t.slice = fa.row() * fa.rows();
      t.width = fa.desc.Width, t.height = fa.desc.Height, t.depth = fa.desc.Depth;
      t.format = fa.desc.Format;
      t.channels = fa.desc.NumChannels;
      break;
    }
    case CU_RESOURCE_TYPE_LINEAR: {
      const uint64_t elem = format_bytes(r.res.linear.format) * r.res.linear.numChannels;
      t.data = find(r.res.linear.devPtr, r.res.linear.sizeInBytes);
      if (!t.data) return false;
      t.width = r.res.linear.sizeInBytes / elem;
      t.pitch = r.res.linear.sizeInBytes;
      t.format = r.res.linear.format;
      t.channels = r.res.linear.numChannels;
      break;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
      const auto& p = r.res.pitch2D;
      t.data = find(p.devPtr, p.pitchInBytes * p.height);
      if (!t.data) return false;
      t.width = p.width, t.height = p.height, t.pitch = p.pitchInBytes;
      t.format = p.format;
      t.channels = p.numChannels;
      break;
    }
  }
  *out = t;
  return true;
}
bool surface_view_locked(CUcontext c, uint64_t value, FakeSurface* out) {
  auto it = gpu().surfaces.find({c, value});
  if (it == gpu().surfaces.end()) return false;
  auto a = gpu().arrays.find(it->second.res.res.array.hArray);
  if (a == gpu().arrays.end()) return false;
  FakeArray& fa = a->second;
  *out = FakeSurface{fa.data.data(), fa.row(), fa.row() * fa.rows(), fa.row(), fa.rows(), fa.desc.Depth};
  return true;
}
CUresult f_uuid(unsigned char* u, CUdevice) {
  if (profile().recorded) {
    std::memcpy(u, profile().uuid, 16);
    return CUDA_SUCCESS;
  }
  std::memset(u, 0xab, 16);
  return CUDA_SUCCESS;
}
CUresult f_mem_info(size_t* free_bytes, size_t* total) {
  *total = profile().total_mem;
  *free_bytes = *total - fake_allocated_bytes();
  return CUDA_SUCCESS;
}
CUresult f_primary(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(0x5e);
  return CUDA_SUCCESS;
}
// Registered host ranges (cuMemHostRegister): start -> {bytes, flags}. Lock held.
struct PinnedRange {
  uint64_t bytes;
  unsigned flags;
};
std::map<uint64_t, PinnedRange>& pinned() {
  static std::map<uint64_t, PinnedRange> p;
  return p;
}
// Host memory registered with DEVICEMAP is device memory at the same address (unified
// addressing, canUseHostPointerForRegisteredMem): kernels and copies reach it. Lock held.
std::byte* find_mapped_host(uint64_t p, size_t n) {
  auto it = pinned().upper_bound(p);
  if (it == pinned().begin()) return nullptr;
  --it;
  const uint64_t off = p - it->first;
  if (!(it->second.flags & CU_MEMHOSTREGISTER_DEVICEMAP) || off >= it->second.bytes || n > it->second.bytes - off)
    return nullptr;
  return reinterpret_cast<std::byte*>(p);
}
CUresult f_register(void* p, size_t n, unsigned flags) {
  std::lock_guard l(gpu().mu);
  if (!p || n == 0) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  auto next = pinned().lower_bound(a);
  if (next != pinned().end() && next->first < a + n) return 712;  // HOST_MEMORY_ALREADY_REGISTERED
  if (next != pinned().begin() && std::prev(next)->first + std::prev(next)->second.bytes > a) return 712;
  pinned()[a] = {n, flags};
  return CUDA_SUCCESS;
}
CUresult f_unregister(void* p) {
  std::lock_guard l(gpu().mu);
  return pinned().erase(reinterpret_cast<uint64_t>(p)) ? CUDA_SUCCESS : 713;
}
CUresult f_host_device_pointer(CUdeviceptr* d, void* p, unsigned flags) {
  std::lock_guard l(gpu().mu);
  if (flags != 0 || !find_mapped_host(reinterpret_cast<uint64_t>(p), 1)) return CUDA_ERROR_INVALID_VALUE;
  *d = reinterpret_cast<uint64_t>(p);
  return CUDA_SUCCESS;
}
// ---- streams and events
CUresult f_priority_range(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return CUDA_SUCCESS;
}
CUresult f_stream_create(CUstream* s, unsigned flags, int priority) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!t_ctx || !g.contexts.contains(t_ctx)) return 201;
  if (flags & ~CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  *s = reinterpret_cast<CUstream>(g.next_handle++);
  g.streams[*s] = FakeStream{t_ctx, flags, std::clamp(priority, -5, 0), g.next_handle++};  // clamped, as the driver does
  return CUDA_SUCCESS;
}
CUresult f_stream_destroy(CUstream s) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.streams.find(s);
  if (it == g.streams.end() || it->second.ctx != t_ctx) return CUDA_ERROR_INVALID_HANDLE;
  run_deferred(it->second.id);  // its work completes first
  if (it->second.capture_origin) drop_capture_locked(it->second.capture);  // the capture ends with it
  g.streams.erase(it);
  return CUDA_SUCCESS;
}
CUresult f_stream_sync(CUstream s) {
  std::unique_lock l(gpu().mu);
  g_endless_cv.wait(l, [s] {
    FakeStream* st = stream_for_work(s);
    return !st || !st->endless;
  });
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture_status) return invalidate_capture_locked(st);
  st->busy = false;
  for (auto& [e, ev] : gpu().events)  // what was recorded on it is complete too
    if (ev.recorded_on == st->id) ev.done = true;
  flush_printf_locked(st->ctx);
  return CUDA_SUCCESS;
}
CUresult f_stream_query(CUstream s) {
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture_status) return invalidate_capture_locked(st);
  return st->busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
CUresult f_stream_wait_event(CUstream s, CUevent e, unsigned flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (!g.events.contains(e)) return CUDA_ERROR_INVALID_HANDLE;  // any context's event will do
  if (flags & ~CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  // But not an interprocess event made by another context of this process: the real driver
  // (580, H100) dies of SIGSEGV there (tests/gpu/interprocess_event_probe.c, 2026-11-27). So does the fake,
  // so that no test passes here what crashes on a GPU.
  if (const FakeEvent& made = g.events.at(e); (made.flags & CU_EVENT_INTERPROCESS) && made.ctx != st->ctx) {
    std::fprintf(stderr, "fake driver: cuStreamWaitEvent on another context's CU_EVENT_INTERPROCESS event "
                         "(the real driver crashes here)\n");
    std::abort();
  }
  // An event recorded in a capture that is still open: the stream joins it after the
  // event's nodes (or, already in it, depends on them too).
  const FakeEvent& ev = g.events.at(e);
  bool open = false;
  if (ev.capture) for_capture_streams(ev.capture, [&](FakeStream& o) { open |= o.capture_origin; });
  if (open) {
    if (!st->capture_status) {
      st->capture_status = 1;
      st->capture = ev.capture;
      st->capture_origin = false;
      st->frontier = ev.capture_nodes;
      for_capture_streams(ev.capture, [&](FakeStream& o) {  // the capture's id, as its origin's
        if (o.capture_origin) st->capture_id = o.capture_id;
      });
    } else if (st->capture == ev.capture) {
      for (CUgraphNode n : ev.capture_nodes)
        if (std::find(st->frontier.begin(), st->frontier.end(), n) == st->frontier.end()) st->frontier.push_back(n);
    } else {
      return 905;  // CUDA_ERROR_STREAM_CAPTURE_ISOLATION: two captures may not be merged
    }
  }
  return CUDA_SUCCESS;
}
CUresult f_stream_priority(CUstream s, int* priority) {
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  *priority = st->priority;
  return CUDA_SUCCESS;
}
// Stream attributes, checked as the driver documents them (cuda.h CUstreamAttrID).
CUlaunchAttributeValue stream_attribute_default(int id) {
  CUlaunchAttributeValue v;
  std::memset(&v, 0, sizeof v);
  // A stream never given a policy answers -1 (driver 580 on the H100), not CU_SYNC_POLICY_AUTO.
  if (id == CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY) v.syncPolicy = -1;
  if (id == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP) v.memSyncDomainMap.remote = 1;  // default -> 0, remote -> 1
  return v;
}
bool stream_attribute_id(int id) {
  return id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW || id == CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY ||
         id == CU_LAUNCH_ATTRIBUTE_PRIORITY || id == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP ||
         id == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
}
CUresult f_stream_set_attribute(CUstream s, int id, const CUlaunchAttributeValue* v) {
  if (!v || !stream_attribute_id(id)) return CUDA_ERROR_INVALID_VALUE;
  const int max_window = dev_attr(109, 134217728);    // CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE
  const int domains = dev_attr(126, 4);               // CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(s, false);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const auto& w = v->accessPolicyWindow;
      if (w.num_bytes > static_cast<size_t>(max_window) || !(w.hitRatio >= 0.0f && w.hitRatio <= 1.0f) ||
          w.missProp < 0 || w.missProp > 1)  // any hitProp, as driver 580
        return CUDA_ERROR_INVALID_VALUE;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      if (v->syncPolicy < 1 || v->syncPolicy > 4) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      st->priority = std::clamp(v->priority, -5, 0);  // clamped to the range, as at creation
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      if (v->memSyncDomainMap.default_ >= domains || v->memSyncDomainMap.remote >= domains)
        return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      if (v->memSyncDomain < 0 || v->memSyncDomain > 1) return CUDA_ERROR_INVALID_VALUE;
      break;
  }
  st->attributes[id] = *v;
  return CUDA_SUCCESS;
}
CUresult f_stream_get_attribute(CUstream s, int id, CUlaunchAttributeValue* v) {
  if (!v || !stream_attribute_id(id)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(s, false);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (id == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
    std::memset(v, 0, sizeof *v);
    v->priority = st->priority;
    return CUDA_SUCCESS;
  }
  auto it = st->attributes.find(id);
  *v = it == st->attributes.end() ? stream_attribute_default(id) : it->second;
  return CUDA_SUCCESS;
}
CUresult f_stream_copy_attributes(CUstream dst, CUstream src) {
  std::lock_guard l(gpu().mu);
  FakeStream* from = stream_for_work(src, false);
  FakeStream* to = stream_for_work(dst, false);
  if (!from || !to) return CUDA_ERROR_INVALID_HANDLE;
  to->attributes = from->attributes;
  to->priority = from->priority;  // copied too (driver 580 on the H100)
  return CUDA_SUCCESS;
}
// Host functions run at once, like all the fake's work, on the caller's thread and without
// the lock: the stub's gate blocks there until its guest has run the function. After a
// fault both fail, as every call does in a context with an error.
CUresult f_launch_host_func(CUstream s, CUhostFn fn, void* data) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(s);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (fn && st->capture_status) {
      FakeNode n;
      n.type = 3;
      n.op = [fn, data](CUstream) {
        if (gpu_poisoned()) return 700;
        fn(data);
        return 0;
      };
      n.host = CUDA_HOST_NODE_PARAMS{fn, data};
      return capture_locked(st, std::move(n));
    }
  }
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  if (gpu_poisoned()) return 700;
  fn(data);
  return CUDA_SUCCESS;
}
CUresult f_stream_add_callback(CUstream s, CUstreamCallback cb, void* data, unsigned flags) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(s);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) return invalidate_capture_locked(st);  // not capturable (cuLaunchHostFunc is)
  }
  if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (gpu_poisoned()) return 700;
  cb(s, CUDA_SUCCESS, data);
  return CUDA_SUCCESS;
}
CUresult f_event_create(CUevent* e, unsigned flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!t_ctx || !g.contexts.contains(t_ctx)) return 201;
  if (flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(g.next_handle++);
  g.events[*e] = FakeEvent{t_ctx, flags};
  return CUDA_SUCCESS;
}
// IPC events: the handle names the exporting process and event; an opened event is a new
// event of the caller's context, complete at once (the fake runs all work when issued; a
// record in another process is not seen).
constexpr uint64_t kFakeIpcEventMagic = 0x6576656370696b66ull;
CUresult f_ipc_get_event(CUipcEventHandle* h, CUevent e) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.events.find(e);
  if (!h || it == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!(it->second.flags & CU_EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t words[3] = {kFakeIpcEventMagic, static_cast<uint64_t>(::getpid()), reinterpret_cast<uint64_t>(e)};
  std::memset(h, 0, sizeof *h);
  std::memcpy(h->reserved, words, sizeof words);
  return CUDA_SUCCESS;
}
CUresult f_ipc_open_event(CUevent* e, CUipcEventHandle h) {
  uint64_t words[3];
  std::memcpy(words, h.reserved, sizeof words);
  if (!e || words[0] != kFakeIpcEventMagic) return CUDA_ERROR_INVALID_VALUE;
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!t_ctx || !g.contexts.contains(t_ctx)) return 201;
  *e = reinterpret_cast<CUevent>(g.next_handle++);
  g.events[*e] = FakeEvent{t_ctx, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING};
  return CUDA_SUCCESS;
}
CUresult f_event_destroy(CUevent e) {
  std::lock_guard l(gpu().mu);
  return gpu().events.erase(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult f_event_record_flags(CUevent e, CUstream s, unsigned flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.events.find(e);
  FakeStream* st = stream_for_work(s, false);  // a mark in the stream: the copies before it stay queued
  if (it == g.events.end() || !st || it->second.ctx != t_ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  if (st->capture_status) {
    // In a capture: a point other streams may join at, no node (nor a real record).
    if (st->capture_status == 2) return 901;
    it->second.capture = st->capture;
    it->second.capture_nodes = st->frontier;
    return CUDA_SUCCESS;
  }
  it->second.capture = nullptr;
  it->second.recorded = true;
  it->second.recorded_on = st->id;
  it->second.done = !st->busy;
  it->second.time_ms = g.clock_ms;
  return CUDA_SUCCESS;
}
CUresult f_event_record(CUevent e, CUstream s) { return f_event_record_flags(e, s, 0); }
// Waiting on (or querying) an event recorded in a capture that is still open is not
// allowed: the driver refuses it and invalidates that capture. Lock held.
CUresult refuse_captured_event_locked(const FakeEvent& ev) {
  if (!ev.capture) return CUDA_SUCCESS;
  bool open = false;
  for_capture_streams(ev.capture, [&](FakeStream& o) { open |= o.capture_origin && o.capture_status != 0; });
  if (!open) return CUDA_SUCCESS;
  for_capture_streams(ev.capture, [](FakeStream& o) { o.capture_status = 2; });
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}
CUresult f_event_sync(CUevent e) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().events.find(e);
  if (it == gpu().events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = refuse_captured_event_locked(it->second)) return r;
  if (it->second.recorded) run_deferred(it->second.recorded_on);
  it->second.done = true;
  flush_printf_locked(it->second.ctx);
  return CUDA_SUCCESS;
}
CUresult f_event_query(CUevent e) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().events.find(e);
  if (it == gpu().events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = refuse_captured_event_locked(it->second)) return r;
  if (it->second.recorded && it->second.done) run_deferred(it->second.recorded_on);
  return it->second.done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult f_event_elapsed(float* ms, CUevent a, CUevent b) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto ia = g.events.find(a), ib = g.events.find(b);
  if (ia == g.events.end() || ib == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const FakeEvent &ea = ia->second, &eb = ib->second;
  if (ea.ctx != eb.ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea.recorded || !eb.recorded) return CUDA_ERROR_INVALID_HANDLE;
  if ((ea.flags | eb.flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea.done || !eb.done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(eb.time_ms - ea.time_ms);
  return CUDA_SUCCESS;
}
CUresult f_htod_async(CUdeviceptr d, const void* s, size_t n, CUstream stream) {
  g_last_async_copy_thread.store(std::this_thread::get_id());
  {
    auto& g = gpu();
    std::lock_guard l(g.mu);
    FakeStream* st = stream_for_work(stream, !g.defer_htod);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode node;
      node.type = 1;
      node.op = [=](CUstream rs) { return f_htod_async(d, s, n, rs); };
      node.copy = linear_copy(CU_MEMORYTYPE_DEVICE, nullptr, d, CU_MEMORYTYPE_HOST, s, 0, n);
      return capture_locked(st, std::move(node));
    }
    did_work(st, kCopyMs);
    if (g.defer_htod) {
      if (!find(d, n)) return CUDA_ERROR_INVALID_VALUE;
      g.deferred.push_back({st->id, d, s, n});
      return CUDA_SUCCESS;
    }
  }
  return f_htod(d, s, n);
}
CUresult f_dtoh_async(void* d, CUdeviceptr s, size_t n, CUstream stream) {
  g_last_async_copy_thread.store(std::this_thread::get_id());
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode node;
      node.type = 1;
      node.op = [=](CUstream rs) { return f_dtoh_async(d, s, n, rs); };
      node.copy = linear_copy(CU_MEMORYTYPE_HOST, d, 0, CU_MEMORYTYPE_DEVICE, nullptr, s, n);
      return capture_locked(st, std::move(node));
    }
    did_work(st, kCopyMs);
  }
  return f_dtoh(d, s, n);
}
CUresult f_dtod_async(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode node;
      node.type = 1;
      node.op = [=](CUstream rs) { return f_dtod_async(d, s, n, rs); };
      node.copy = linear_copy(CU_MEMORYTYPE_DEVICE, nullptr, d, CU_MEMORYTYPE_DEVICE, nullptr, s, n);
      return capture_locked(st, std::move(node));
    }
    did_work(st, kCopyMs);
  }
  return f_dtod(d, s, n);
}
// cuMemsetD16/D32: `n` elements of `width` bytes, aligned.
CUresult f_memset_wide(CUdeviceptr d, uint32_t v, size_t n, unsigned width) {
  if (d % width) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  std::byte* p = find(d, n * width);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) std::memcpy(p + i * width, &v, width);
  return CUDA_SUCCESS;
}
CUresult f_memset_wide_async(CUdeviceptr d, uint32_t v, size_t n, unsigned width, CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode node;
      node.type = 2;
      node.op = [=](CUstream rs) { return f_memset_wide_async(d, v, n, width, rs); };
      node.memset = memset_params(d, 0, v, width, n, 1);
      return capture_locked(st, std::move(node));
    }
    did_work(st, kCopyMs);
  }
  return f_memset_wide(d, v, n, width);
}
CUresult f_memset_async(CUdeviceptr d, unsigned char v, size_t n, CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {
      FakeNode node;
      node.type = 2;
      node.op = [=](CUstream rs) { return f_memset_async(d, v, n, rs); };
      node.memset = memset_params(d, 0, v, 1, n, 1);
      return capture_locked(st, std::move(node));
    }
    did_work(st, kCopyMs);
  }
  return f_memset(d, v, n);
}

// ---- limits, cache configuration, peer access. The fake's device has compute capability
// 9.0: no device-runtime synchronize depth there (cuda_runtime_api.h: unsupported limit).
// Its two devices can reach each other; a device and itself cannot (invalid device).
FakeCtxState* current_state() {
  if (!t_ctx) return nullptr;
  auto it = ctx_state().find(t_ctx);
  return it == ctx_state().end() ? nullptr : &it->second;
}
CUresult f_ctx_get_limit(size_t* v, int limit) {
  std::lock_guard l(gpu().mu);
  FakeCtxState* st = current_state();
  if (!st) return 201;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (limit == 7) return *v = 232448, CUDA_SUCCESS;  // CU_LIMIT_SHMEM_SIZE, as the H200 reads it
  if (limit < 0 || limit > 6 || limit == 3) return 215;  // CUDA_ERROR_UNSUPPORTED_LIMIT
  *v = st->limits[limit];
  return CUDA_SUCCESS;
}
CUresult f_ctx_set_limit(int limit, size_t v) {
  std::lock_guard l(gpu().mu);
  FakeCtxState* st = current_state();
  if (!st) return 201;
  if (limit == 7) return 800;  // CU_LIMIT_SHMEM_SIZE: CUDA_ERROR_NOT_PERMITTED, as on the H200
  if (limit < 0 || limit > 6 || limit == 3) return 215;
  if (limit == 5) v = std::min<size_t>(v, 128);  // the L2 fetch granularity is a hint, clamped
  st->limits[limit] = v;
  return CUDA_SUCCESS;
}
CUresult f_ctx_get_cache_config(int* c) {
  std::lock_guard l(gpu().mu);
  FakeCtxState* st = current_state();
  if (!st) return 201;
  *c = st->cache_config;
  return CUDA_SUCCESS;
}
CUresult f_ctx_set_cache_config(int c) {
  std::lock_guard l(gpu().mu);
  FakeCtxState* st = current_state();
  if (!st) return 201;
  if (c < 0 || c > 3) return CUDA_ERROR_INVALID_VALUE;
  st->cache_config = c;
  return CUDA_SUCCESS;
}
CUresult f_func_set_cache_config(CUfunction f, int c) {
  std::lock_guard l(gpu().mu);
  if (!function_of(f)) return CUDA_ERROR_INVALID_HANDLE;
  return c < 0 || c > 3 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult f_can_access_peer(int* can, CUdevice dev, CUdevice peer) {
  if (dev < 0 || dev > 1 || peer < 0 || peer > 1) return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer;
  return CUDA_SUCCESS;
}
CUresult f_enable_peer(CUcontext peer, unsigned flags) {
  std::lock_guard l(gpu().mu);
  FakeCtxState* st = current_state();
  auto p = ctx_state().find(peer);
  if (!st || p == ctx_state().end()) return 201;
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (p->second.device == st->device) return CUDA_ERROR_INVALID_DEVICE;
  if (!st->peers.insert(peer).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}
CUresult f_disable_peer(CUcontext peer) {
  std::lock_guard l(gpu().mu);
  FakeCtxState* st = current_state();
  if (!st || !ctx_state().contains(peer)) return 201;
  return st->peers.erase(peer) ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}
CUresult f_p2p_attribute(int* v, int attr, CUdevice src, CUdevice dst) {
  if (src < 0 || src > 1 || dst < 0 || dst > 1 || src == dst) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case 1: *v = 0; return CUDA_SUCCESS;  // performance rank
    case 2: case 3: case 4: *v = 1; return CUDA_SUCCESS;  // access, native atomics, arrays
    case 5: *v = 0; return CUDA_SUCCESS;  // only partial atomics
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
// CUDA 12-13 device queries, with an H100's kind of answers (device_ext.cc's calls).
CUresult f_texture_1d_width(size_t* w, int format, unsigned channels, CUdevice dev) {
  if (dev < 0 || dev > 1) return CUDA_ERROR_INVALID_DEVICE;
  const bool known = (format >= 0x01 && format <= 0x03) || (format >= 0x08 && format <= 0x0a) || format == 0x10 ||
                     format == 0x20;
  if (!w || !known || (channels != 1 && channels != 2 && channels != 4)) return CUDA_ERROR_INVALID_VALUE;
  *w = size_t{1} << 28;  // cudaDevAttrMaxTexture1DLinearWidth
  return CUDA_SUCCESS;
}
// Integer operations: 32- and 64-bit scalars, signed and unsigned; float operations: 32-bit.
CUresult atomic_caps(unsigned* caps, const int* ops, unsigned count, bool p2p) {
  if (!caps || !ops || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    if (ops[i] < 0 || ops[i] > 12) return CUDA_ERROR_INVALID_VALUE;
    caps[i] = ops[i] >= 10 ? (1u << 3 | 1u << 4) : (1u << 0 | 1u << 1 | 1u << 3 | 1u << 4);  // cudaAtomicCapability*
    if (p2p && ops[i] >= 10) caps[i] = 0;
  }
  return CUDA_SUCCESS;
}
CUresult f_host_atomic_caps(unsigned* caps, const int* ops, unsigned count, CUdevice dev) {
  if (dev < 0 || dev > 1) return CUDA_ERROR_INVALID_DEVICE;
  return atomic_caps(caps, ops, count, false);
}
CUresult f_p2p_atomic_caps(unsigned* caps, const int* ops, unsigned count, CUdevice src, CUdevice dst) {
  if (src < 0 || src > 1 || dst < 0 || dst > 1 || src == dst) return CUDA_ERROR_INVALID_DEVICE;
  return atomic_caps(caps, ops, count, true);
}
CUresult f_reset_persisting_l2() {
  std::lock_guard l(gpu().mu);
  return t_ctx && gpu().contexts.contains(t_ctx) ? CUDA_SUCCESS : CUresult{201};
}
CUresult f_flush_rdma(int target, int scope) {
  if (target != 0 || (scope != 100 && scope != 200)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult f_cluster_size(int* size, CUfunction f, const CUlaunchConfig* c) {
  std::lock_guard l(gpu().mu);
  if (!function_of(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (!size || !c) return CUDA_ERROR_INVALID_VALUE;
  *size = 8;  // the portable cluster size limit
  return CUDA_SUCCESS;
}
// Each side as its own context's device reaches it. Lock held.
CUresult peer_copy_locked(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  if (!ctx_state().contains(dc) || !ctx_state().contains(sc)) return 201;
  std::byte* pd = find_from(static_cast<int>(ctx_state()[dc].device), d, n);
  std::byte* ps = find_from(static_cast<int>(ctx_state()[sc].device), s, n);
  if (!pd || !ps) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(pd, ps, n);
  return CUDA_SUCCESS;
}
CUresult f_memcpy_peer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  std::lock_guard l(gpu().mu);
  return peer_copy_locked(d, dc, s, sc, n);
}
CUresult f_memcpy_peer_async(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream stream) {
  {
    std::lock_guard l(gpu().mu);
    if (!ctx_state().contains(dc) || !ctx_state().contains(sc)) return 201;
    FakeStream* st = stream_for_work(stream);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    did_work(st, kCopyMs);
    return peer_copy_locked(d, dc, s, sc, n);
  }
}

// ---- stream capture and graphs, as the driver keeps them (see FakeNode).
thread_local int t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
CUresult f_begin_capture(CUstream s, int mode) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  // The legacy stream synchronizes with every blocking stream: it cannot be captured.
  if (s == nullptr || s == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (st->capture_status) return CUDA_ERROR_ILLEGAL_STATE;  // already capturing
  const auto graph = reinterpret_cast<CUgraph>(g.next_handle++);
  g.graphs[graph] = {};
  st->capture_status = 1;
  st->capture = graph;
  st->capture_origin = true;
  st->capture_id = ++g.next_capture_id;
  st->frontier.clear();
  return CUDA_SUCCESS;
}
// Into an existing graph, after `deps` of its nodes (plain edges only: the executor has no ports).
CUresult f_begin_capture_to_graph(CUstream s, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                                  size_t count, int mode) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (s == nullptr || s == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (st->capture_status) return CUDA_ERROR_ILLEGAL_STATE;
  if (!g.graphs.contains(graph) || (count && !deps)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> frontier;
  for (size_t i = 0; i < count; ++i) {
    auto n = g.nodes.find(deps[i]);
    if (n == g.nodes.end() || n->second.graph != graph) return CUDA_ERROR_INVALID_VALUE;
    if (edges && (edges[i].from_port || edges[i].to_port || edges[i].type)) return CUDA_ERROR_NOT_SUPPORTED;
    frontier.push_back(deps[i]);
  }
  st->capture_status = 1;
  st->capture = graph;
  st->capture_origin = true;
  st->capture_into = true;
  st->capture_id = ++g.next_capture_id;
  st->frontier = std::move(frontier);
  return CUDA_SUCCESS;
}
// The nodes `from` reaches going up its dependencies (itself included). Lock held.
void ancestors_locked(CUgraphNode from, std::set<CUgraphNode>* out) {
  if (!out->insert(from).second) return;
  for (CUgraphNode d : gpu().nodes.at(from).deps) ancestors_locked(d, out);
}
void destroy_graph_locked(CUgraph graph);
CUresult f_end_capture(CUstream s, CUgraph* out) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  *out = nullptr;
  if (!st->capture_status) return CUDA_ERROR_ILLEGAL_STATE;
  if (!st->capture_origin) return 903;  // CUDA_ERROR_STREAM_CAPTURE_UNMATCHED
  const CUgraph graph = st->capture;
  const bool into = st->capture_into;
  CUresult r = st->capture_status == 2 ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  // Every stream that joined must have been joined back: its last work before the origin's.
  std::set<CUgraphNode> joined;
  for (CUgraphNode n : st->frontier) ancestors_locked(n, &joined);
  for_capture_streams(graph, [&](FakeStream& o) {
    if (&o != st && r == CUDA_SUCCESS)
      for (CUgraphNode n : o.frontier)
        if (!joined.contains(n)) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    o.capture_status = 0;
    o.capture = nullptr;
    o.capture_origin = false;
    o.capture_into = false;
    o.frontier.clear();
  });
  for (auto& [e, ev] : g.events)
    if (ev.capture == graph) ev.capture = nullptr;
  if (r != CUDA_SUCCESS) {
    if (!into) destroy_graph_locked(graph);  // the program's own graph stays
    return r;
  }
  *out = graph;
  return CUDA_SUCCESS;
}
CUresult f_is_capturing(CUstream s, int* status) {
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  *status = st->capture_status;
  return CUDA_SUCCESS;
}
CUresult f_capture_info(CUstream s, int* status, unsigned long long* id, CUgraph* graph, const CUgraphNode** deps,
                        const CUgraphEdgeData** edges, size_t* count) {
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  *status = st->capture_status;
  if (id) *id = st->capture_status ? st->capture_id : 0;
  if (graph) *graph = st->capture;
  if (deps) *deps = st->frontier.data();
  if (edges) *edges = nullptr;
  if (count) *count = st->frontier.size();
  return CUDA_SUCCESS;
}
// flags: CU_STREAM_ADD_CAPTURE_DEPENDENCIES (0) or CU_STREAM_SET_CAPTURE_DEPENDENCIES (1); the
// nodes must be of the capture's graph (plain edges only: the executor has no ports).
CUresult f_update_capture_deps(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* edges, size_t count,
                               unsigned flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  FakeStream* st = stream_for_work(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (flags > 1 || (count && !deps)) return CUDA_ERROR_INVALID_VALUE;
  if (!st->capture_status) return CUDA_ERROR_ILLEGAL_STATE;
  if (st->capture_status == 2) return 901;  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
  for (size_t i = 0; i < count; ++i) {
    auto n = g.nodes.find(deps[i]);
    if (n == g.nodes.end() || n->second.graph != st->capture) return CUDA_ERROR_INVALID_VALUE;
    if (edges && (edges[i].from_port || edges[i].to_port || edges[i].type)) return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (flags == 1) st->frontier.clear();
  for (size_t i = 0; i < count; ++i)
    if (std::find(st->frontier.begin(), st->frontier.end(), deps[i]) == st->frontier.end())
      st->frontier.push_back(deps[i]);
  return CUDA_SUCCESS;
}
CUresult f_exchange_capture_mode(int* mode) {
  if (!mode || *mode < 0 || *mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

CUresult f_graph_create(CUgraph* out, unsigned flags) {
  if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
  auto& g = gpu();
  std::lock_guard l(g.mu);
  *out = reinterpret_cast<CUgraph>(g.next_handle++);
  g.graphs[*out] = {};
  return CUDA_SUCCESS;
}
void destroy_graph_locked(CUgraph graph) {
  auto& g = gpu();
  auto it = g.graphs.find(graph);
  if (it == g.graphs.end()) return;
  for (CUgraphNode n : it->second.nodes) {
    if (CUgraph child = g.nodes.at(n).child) destroy_graph_locked(child);
    for (CUgraph body : g.nodes.at(n).bodies) destroy_graph_locked(body);
    g.nodes.erase(n);
  }
  g.graphs.erase(graph);
}
CUresult f_graph_destroy(CUgraph graph) {
  std::lock_guard l(gpu().mu);
  if (!gpu().graphs.contains(graph)) return CUDA_ERROR_INVALID_VALUE;
  destroy_graph_locked(graph);
  return CUDA_SUCCESS;
}
// A copy of `graph` whose nodes name the ones they copy (FakeNode::origin). Lock held.
CUgraph clone_locked(CUgraph graph) {
  auto& g = gpu();
  const auto copy = reinterpret_cast<CUgraph>(g.next_handle++);
  std::map<CUgraphNode, CUgraphNode> map;
  std::vector<CUgraphNode> originals = g.graphs.at(graph).nodes;
  g.graphs[copy] = {};
  for (CUgraphNode n : originals) {
    FakeNode c = g.nodes.at(n);
    const auto h = reinterpret_cast<CUgraphNode>(g.next_handle++);
    map[n] = h;
    c.graph = copy;
    c.origin = n;
    for (CUgraphNode& d : c.deps) d = map.at(d);  // dependencies come first (creation order)
    if (c.child) c.child = clone_locked(c.child);
    for (CUgraph& b : c.bodies) b = clone_locked(b);  // (CUDA refuses to clone these; a child node's copy)
    g.nodes[h] = std::move(c);
    g.graphs[copy].nodes.push_back(h);
  }
  return copy;
}
CUresult f_graph_clone(CUgraph* out, CUgraph graph) {
  std::lock_guard l(gpu().mu);
  if (!out || !gpu().graphs.contains(graph)) return CUDA_ERROR_INVALID_VALUE;
  *out = clone_locked(graph);
  return CUDA_SUCCESS;
}
// A new node of `graph` after `deps` (each a node of that graph). Lock held.
CUresult add_node_locked(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count, FakeNode n) {
  auto& g = gpu();
  if (!out || !g.graphs.contains(graph) || (count && !deps)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    auto it = g.nodes.find(deps[i]);
    if (it == g.nodes.end() || it->second.graph != graph) return CUDA_ERROR_INVALID_VALUE;
    n.deps.push_back(deps[i]);
  }
  n.graph = graph;
  *out = reinterpret_cast<CUgraphNode>(g.next_handle++);
  g.nodes[*out] = std::move(n);
  g.graphs[graph].nodes.push_back(*out);
  return CUDA_SUCCESS;
}
// A kernel node's payload from the driver's parameters, checked as a launch's. Lock held.
CUresult kernel_node_locked(const CUDA_KERNEL_NODE_PARAMS_v2* p, FakeNode* n) {
  if (!p || p->extra || p->kern || p->ctx) return CUDA_ERROR_INVALID_VALUE;
  FakeFunction* fn = function_of(p->func);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!p->gridDimX || !p->gridDimY || !p->gridDimZ || !p->blockDimX || !p->blockDimY || !p->blockDimZ ||
      p->blockDimX * p->blockDimY * p->blockDimZ > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (!fn->kernel->params.empty() && !p->kernelParams) return CUDA_ERROR_INVALID_VALUE;
  n->type = 0;
  n->fn = p->func;
  n->grid[0] = p->gridDimX, n->grid[1] = p->gridDimY, n->grid[2] = p->gridDimZ;
  n->block[0] = p->blockDimX, n->block[1] = p->blockDimY, n->block[2] = p->blockDimZ;
  n->shared = p->sharedMemBytes;
  n->params.clear();
  for (size_t i = 0; i < fn->kernel->params.size(); ++i) {
    const auto* b = static_cast<const std::byte*>(p->kernelParams[i]);
    n->params.emplace_back(b, b + fn->kernel->params[i].second);
  }
  return CUDA_SUCCESS;
}
CUresult f_add_kernel_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count,
                           const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  std::lock_guard l(gpu().mu);
  FakeNode n;
  if (CUresult e = kernel_node_locked(p, &n); e != CUDA_SUCCESS) return e;
  return add_node_locked(out, graph, deps, count, std::move(n));
}
// One side of a 3D copy at (x, y, z) of a row: host or device memory. Lock held.
std::byte* side_row(CUmemorytype type, const void* host, CUdeviceptr dev, size_t x, size_t y, size_t z, size_t pitch,
                    size_t height, size_t width, size_t row, size_t slice) {
  const uint64_t off = ((z + slice) * height + y + row) * pitch + x;
  if (type == CU_MEMORYTYPE_HOST) return static_cast<std::byte*>(const_cast<void*>(host)) + off;
  if (type == CU_MEMORYTYPE_DEVICE) return find(dev + off, width);
  return nullptr;
}
CUresult copy_3d(const CUDA_MEMCPY3D& c, CUstream stream) {
  std::lock_guard l(gpu().mu);
  if (gpu_poisoned()) return 700;
  FakeStream* st = stream_for_work(stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  did_work(st, kCopyMs);
  for (size_t z = 0; z < c.Depth; ++z)
    for (size_t y = 0; y < c.Height; ++y) {
      const std::byte* s = side_row(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch,
                                    c.srcHeight, c.WidthInBytes, y, z);
      std::byte* d = side_row(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch,
                              c.dstHeight, c.WidthInBytes, y, z);
      if (!s || !d) return CUDA_ERROR_INVALID_VALUE;
      std::memmove(d, s, c.WidthInBytes);
    }
  return CUDA_SUCCESS;
}
bool memory_type_ok(CUmemorytype t) { return t == CU_MEMORYTYPE_HOST || t == CU_MEMORYTYPE_DEVICE; }
void set_memcpy_locked(FakeNode* n, const CUDA_MEMCPY3D& c) {
  n->type = 1;
  n->op = [copy = c](CUstream s) { return copy_3d(copy, s); };
  n->copy = c;
}
CUresult f_add_memcpy_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count,
                           const CUDA_MEMCPY3D* c, CUcontext) {
  if (!c || !memory_type_ok(c->srcMemoryType) || !memory_type_ok(c->dstMemoryType)) return CUDA_ERROR_INVALID_VALUE;
  if (c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  FakeNode n;
  n.type = 1;
  set_memcpy_locked(&n, *c);
  return add_node_locked(out, graph, deps, count, std::move(n));
}
void set_memset_locked(FakeNode* n, const CUDA_MEMSET_NODE_PARAMS& p) {
  n->type = 2;
  n->memset = p;
  n->op = [m = p](CUstream s) -> CUresult {
    std::lock_guard l(gpu().mu);
    if (gpu_poisoned()) return 700;
    FakeStream* st = stream_for_work(s);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    did_work(st, kCopyMs);
    for (size_t y = 0; y < std::max<size_t>(m.height, 1); ++y) {
      std::byte* d = find(m.dst + y * m.pitch, m.width * m.elementSize);
      if (!d) return CUDA_ERROR_INVALID_VALUE;
      for (size_t i = 0; i < m.width; ++i) std::memcpy(d + i * m.elementSize, &m.value, m.elementSize);
    }
    return CUDA_SUCCESS;
  };
}
void set_host_locked(FakeNode* n, const CUDA_HOST_NODE_PARAMS& p) {
  n->type = 3;
  n->host = p;
  n->op = [fn = p.fn, data = p.userData](CUstream) {
    if (gpu_poisoned()) return 700;
    fn(data);  // on the launching thread, as the fake's host functions run
    return 0;
  };
}
CUresult f_add_memset_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count,
                           const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return CUDA_ERROR_INVALID_VALUE;
  if (p->height > 1 && p->pitch < p->width * p->elementSize) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  FakeNode n;
  set_memset_locked(&n, *p);
  return add_node_locked(out, graph, deps, count, std::move(n));
}
CUresult f_add_host_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count,
                         const CUDA_HOST_NODE_PARAMS* p) {
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(gpu().mu);
  FakeNode n;
  set_host_locked(&n, *p);
  return add_node_locked(out, graph, deps, count, std::move(n));
}
CUresult f_add_empty_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count) {
  std::lock_guard l(gpu().mu);
  return add_node_locked(out, graph, deps, count, FakeNode{});
}
CUresult add_event_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count, CUevent e, bool record) {
  std::lock_guard l(gpu().mu);
  if (!gpu().events.contains(e)) return CUDA_ERROR_INVALID_VALUE;
  FakeNode n;
  n.type = record ? 7 : 6;
  n.event = e;
  if (record) n.op = [e](CUstream s) { return f_event_record(e, s); };
  return add_node_locked(out, graph, deps, count, std::move(n));
}
CUresult f_add_event_record_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count, CUevent e) {
  return add_event_node(out, graph, deps, count, e, true);
}
CUresult f_add_event_wait_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count, CUevent e) {
  return add_event_node(out, graph, deps, count, e, false);  // the event's work ran already (the fake runs at once)
}
CUresult f_add_child_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t count, CUgraph child) {
  std::lock_guard l(gpu().mu);
  if (!gpu().graphs.contains(child)) return CUDA_ERROR_INVALID_VALUE;
  FakeNode n;
  n.type = 4;
  const CUgraph copy = clone_locked(child);  // the node's own copy
  n.child = copy;
  if (CUresult e = add_node_locked(out, graph, deps, count, std::move(n)); e != CUDA_SUCCESS) {
    destroy_graph_locked(copy);
    return e;
  }
  return CUDA_SUCCESS;
}
CUresult f_add_dependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* edges,
                            size_t count) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!g.graphs.contains(graph) || edges || (count && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    auto f = g.nodes.find(from[i]), t = g.nodes.find(to[i]);
    if (f == g.nodes.end() || t == g.nodes.end() || f->second.graph != graph || t->second.graph != graph ||
        from[i] == to[i])
      return CUDA_ERROR_INVALID_VALUE;
    auto& deps = t->second.deps;
    if (std::find(deps.begin(), deps.end(), from[i]) != deps.end()) return CUDA_ERROR_INVALID_VALUE;  // already an edge
    deps.push_back(from[i]);
  }
  return CUDA_SUCCESS;
}
CUresult list_nodes(CUgraph graph, CUgraphNode* out, size_t* count, bool roots) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.graphs.find(graph);
  if (it == g.graphs.end() || !count) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> list;
  for (CUgraphNode n : it->second.nodes)
    if (!roots || g.nodes.at(n).deps.empty()) list.push_back(n);
  if (out) {
    for (size_t i = 0; i < *count; ++i) out[i] = i < list.size() ? list[i] : nullptr;
    *count = std::min(*count, list.size());
  } else {
    *count = list.size();
  }
  return CUDA_SUCCESS;
}
CUresult f_get_nodes(CUgraph graph, CUgraphNode* out, size_t* count) { return list_nodes(graph, out, count, false); }
CUresult f_get_root_nodes(CUgraph graph, CUgraphNode* out, size_t* count) { return list_nodes(graph, out, count, true); }
CUresult f_node_type(CUgraphNode n, int* type) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().nodes.find(n);
  if (it == gpu().nodes.end() || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = it->second.type;
  return CUDA_SUCCESS;
}
// Introspection: what each node holds, and the graph's edges (a node's dependencies, in
// node order).
FakeNode* node_of_type_locked(CUgraphNode n, int type) {
  auto it = gpu().nodes.find(n);
  return it == gpu().nodes.end() || it->second.type != type ? nullptr : &it->second;
}
CUresult f_get_edges(CUgraph graph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data, size_t* count) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.graphs.find(graph);
  if (it == g.graphs.end() || !count) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::pair<CUgraphNode, CUgraphNode>> edges;
  for (CUgraphNode n : it->second.nodes)
    for (CUgraphNode d : g.nodes.at(n).deps) edges.emplace_back(d, n);
  if (!from && !to) return *count = edges.size(), CUDA_SUCCESS;
  if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < *count; ++i) {
    from[i] = i < edges.size() ? edges[i].first : nullptr;
    to[i] = i < edges.size() ? edges[i].second : nullptr;
    if (data) data[i] = CUgraphEdgeData{};
  }
  *count = std::min(*count, edges.size());
  return CUDA_SUCCESS;
}
CUresult f_kernel_node_get(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v2* p) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 0);
  if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
  n->param_ptrs.clear();
  for (auto& b : n->params) n->param_ptrs.push_back(b.data());
  *p = CUDA_KERNEL_NODE_PARAMS_v2{n->fn,       n->grid[0], n->grid[1],           n->grid[2], n->block[0], n->block[1],
                                  n->block[2], n->shared,  n->param_ptrs.data(), nullptr,    nullptr,     nullptr};
  return CUDA_SUCCESS;
}
CUresult f_kernel_node_set(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 0);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  FakeNode updated;
  if (CUresult e = kernel_node_locked(p, &updated); e != CUDA_SUCCESS) return e;
  n->fn = updated.fn;
  std::copy(std::begin(updated.grid), std::end(updated.grid), n->grid);
  std::copy(std::begin(updated.block), std::end(updated.block), n->block);
  n->shared = updated.shared;
  n->params = std::move(updated.params);
  return CUDA_SUCCESS;
}
CUresult f_kernel_node_get_attribute(CUgraphNode node, int id, CUlaunchAttributeValue* v) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 0);
  if (!n || !v) return CUDA_ERROR_INVALID_VALUE;
  auto it = n->attrs.find(id);
  *v = it == n->attrs.end() ? CUlaunchAttributeValue{} : it->second;
  return CUDA_SUCCESS;
}
CUresult f_kernel_node_set_attribute(CUgraphNode node, int id, const CUlaunchAttributeValue* v) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 0);
  if (!n || !v) return CUDA_ERROR_INVALID_VALUE;
  n->attrs[id] = *v;
  return CUDA_SUCCESS;
}
CUresult f_memcpy_node_get(CUgraphNode node, CUDA_MEMCPY3D* c) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 1);
  if (!n || !c) return CUDA_ERROR_INVALID_VALUE;
  *c = n->copy;
  return CUDA_SUCCESS;
}
CUresult f_memset_node_get(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* m) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 2);
  if (!n || !m) return CUDA_ERROR_INVALID_VALUE;
  *m = n->memset;
  return CUDA_SUCCESS;
}
CUresult f_host_node_get(CUgraphNode node, CUDA_HOST_NODE_PARAMS* h) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 3);
  if (!n || !h) return CUDA_ERROR_INVALID_VALUE;
  *h = n->host;
  return CUDA_SUCCESS;
}
CUresult f_child_graph_get(CUgraphNode node, CUgraph* out) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 4);
  if (!n || !out || !n->child) return CUDA_ERROR_INVALID_VALUE;  // (a captured graph launch has none here)
  *out = n->child;
  return CUDA_SUCCESS;
}
CUresult event_node_get(CUgraphNode node, CUevent* out, int type) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, type);
  if (!n || !out) return CUDA_ERROR_INVALID_VALUE;
  *out = n->event;
  return CUDA_SUCCESS;
}
CUresult f_event_record_node_get(CUgraphNode node, CUevent* out) { return event_node_get(node, out, 7); }
CUresult f_event_wait_node_get(CUgraphNode node, CUevent* out) { return event_node_get(node, out, 6); }
// Changing nodes after their creation, in a graph or in an executable graph (whose copies
// of a node name it as their origin).
CUresult f_memcpy_node_set(CUgraphNode node, const CUDA_MEMCPY3D* c) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 1);
  if (!n || !c || !memory_type_ok(c->srcMemoryType) || !memory_type_ok(c->dstMemoryType)) return CUDA_ERROR_INVALID_VALUE;
  set_memcpy_locked(n, *c);
  return CUDA_SUCCESS;
}
CUresult f_memset_node_set(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 2);
  if (!n || !p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return CUDA_ERROR_INVALID_VALUE;
  set_memset_locked(n, *p);
  return CUDA_SUCCESS;
}
CUresult f_host_node_set(CUgraphNode node, const CUDA_HOST_NODE_PARAMS* p) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, 3);
  if (!n || !p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  set_host_locked(n, *p);
  return CUDA_SUCCESS;
}
CUresult event_node_set(CUgraphNode node, CUevent e, int type) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = node_of_type_locked(node, type);
  if (!n || !gpu().events.contains(e)) return CUDA_ERROR_INVALID_VALUE;
  n->event = e;
  if (type == 7) n->op = [e](CUstream s) { return f_event_record(e, s); };
  return CUDA_SUCCESS;
}
CUresult f_event_record_node_set(CUgraphNode node, CUevent e) { return event_node_set(node, e, 7); }
CUresult f_event_wait_node_set(CUgraphNode node, CUevent e) { return event_node_set(node, e, 6); }
// The executable graph's copy of `node` (not of a child graph). Lock held.
FakeNode* exec_node_locked(CUgraphExec exec, CUgraphNode node, int type) {
  auto it = gpu().execs.find(exec);
  if (it == gpu().execs.end()) return nullptr;
  FakeNode* found = nullptr;
  size_t copies = 0;
  for (auto& [origin, n] : it->second.order)
    if (origin == node) ++copies, found = &n;
  return copies == 1 && found->type == type ? found : nullptr;
}
CUresult f_exec_memcpy_set(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* c, CUcontext) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = exec_node_locked(exec, node, 1);
  if (!n || !c || !memory_type_ok(c->srcMemoryType) || !memory_type_ok(c->dstMemoryType)) return CUDA_ERROR_INVALID_VALUE;
  set_memcpy_locked(n, *c);
  return CUDA_SUCCESS;
}
CUresult f_exec_memset_set(CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = exec_node_locked(exec, node, 2);
  if (!n || !p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return CUDA_ERROR_INVALID_VALUE;
  set_memset_locked(n, *p);
  return CUDA_SUCCESS;
}
CUresult f_exec_host_set(CUgraphExec exec, CUgraphNode node, const CUDA_HOST_NODE_PARAMS* p) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = exec_node_locked(exec, node, 3);
  if (!n || !p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  set_host_locked(n, *p);
  return CUDA_SUCCESS;
}
CUresult exec_event_set(CUgraphExec exec, CUgraphNode node, CUevent e, int type) {
  std::lock_guard l(gpu().mu);
  FakeNode* n = exec_node_locked(exec, node, type);
  if (!n || !gpu().events.contains(e)) return CUDA_ERROR_INVALID_VALUE;
  n->event = e;
  if (type == 7) n->op = [e](CUstream s) { return f_event_record(e, s); };
  return CUDA_SUCCESS;
}
CUresult f_exec_event_record_set(CUgraphExec x, CUgraphNode n, CUevent e) { return exec_event_set(x, n, e, 7); }
CUresult f_exec_event_wait_set(CUgraphExec x, CUgraphNode n, CUevent e) { return exec_event_set(x, n, e, 6); }
bool flatten_locked(CUgraph graph, CUgraphNode top, std::vector<std::pair<CUgraphNode, FakeNode>>* out);
// The child's nodes replace the node's inlined ones (the same topology: as many, same types).
CUresult f_exec_child_set(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.execs.find(exec);
  if (it == g.execs.end() || !g.graphs.contains(child)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::pair<CUgraphNode, FakeNode>> inlined;
  if (!flatten_locked(child, node, &inlined)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<FakeNode*> old;
  for (auto& [origin, n] : it->second.order)
    if (origin == node) old.push_back(&n);
  if (old.size() != inlined.size()) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  for (size_t i = 0; i < old.size(); ++i)
    if (old[i]->type != inlined[i].second.type) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  for (size_t i = 0; i < old.size(); ++i) *old[i] = inlined[i].second;
  return CUDA_SUCCESS;
}
CUresult f_node_set_enabled(CUgraphExec exec, CUgraphNode node, unsigned enabled) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.execs.find(exec);
  if (it == g.execs.end()) return CUDA_ERROR_INVALID_VALUE;
  bool any = false;
  for (auto& [origin, n] : it->second.order)
    if (origin == node) {
      if (n.type != 0 && n.type != 1 && n.type != 2) return CUDA_ERROR_INVALID_VALUE;  // kernel, memcpy, memset only
      n.disabled = !enabled, any = true;
    }
  return any ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult f_node_get_enabled(CUgraphExec exec, CUgraphNode node, unsigned* enabled) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.execs.find(exec);
  if (it == g.execs.end() || !enabled) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [origin, n] : it->second.order)
    if (origin == node) {
      if (n.type != 0 && n.type != 1 && n.type != 2) return CUDA_ERROR_INVALID_VALUE;
      return *enabled = !n.disabled, CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult related_nodes(CUgraphNode node, CUgraphNode* out, CUgraphEdgeData* data, size_t* count, bool dependents) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.nodes.find(node);
  if (it == g.nodes.end() || !count) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> list;
  if (!dependents) {
    list = it->second.deps;
  } else {
    for (CUgraphNode n : g.graphs.at(it->second.graph).nodes) {
      const auto& deps = g.nodes.at(n).deps;
      if (std::find(deps.begin(), deps.end(), node) != deps.end()) list.push_back(n);
    }
  }
  if (!out) return *count = list.size(), CUDA_SUCCESS;
  for (size_t i = 0; i < *count; ++i) {
    out[i] = i < list.size() ? list[i] : nullptr;
    if (data) data[i] = CUgraphEdgeData{};
  }
  *count = std::min(*count, list.size());
  return CUDA_SUCCESS;
}
CUresult f_node_dependencies(CUgraphNode n, CUgraphNode* out, CUgraphEdgeData* d, size_t* c) {
  return related_nodes(n, out, d, c, false);
}
CUresult f_node_dependents(CUgraphNode n, CUgraphNode* out, CUgraphEdgeData* d, size_t* c) {
  return related_nodes(n, out, d, c, true);
}
CUresult f_remove_dependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* edges,
                               size_t count) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!g.graphs.contains(graph) || edges || (count && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {  // all checked first: nothing removed on an error
    auto t = g.nodes.find(to[i]);
    if (t == g.nodes.end() || t->second.graph != graph) return CUDA_ERROR_INVALID_VALUE;
    auto& deps = t->second.deps;
    if (std::find(deps.begin(), deps.end(), from[i]) == deps.end()) return CUDA_ERROR_INVALID_VALUE;  // no such edge
  }
  for (size_t i = 0; i < count; ++i) {
    auto& deps = g.nodes.at(to[i]).deps;
    deps.erase(std::find(deps.begin(), deps.end(), from[i]));
  }
  return CUDA_SUCCESS;
}
CUresult f_destroy_node(CUgraphNode node) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.nodes.find(node);
  if (it == g.nodes.end()) return CUDA_ERROR_INVALID_VALUE;
  auto& list = g.graphs.at(it->second.graph).nodes;
  list.erase(std::find(list.begin(), list.end(), node));
  for (CUgraphNode n : list) std::erase(g.nodes.at(n).deps, node);
  if (CUgraph child = it->second.child) destroy_graph_locked(child);
  for (CUgraph body : it->second.bodies) destroy_graph_locked(body);
  g.nodes.erase(node);
  return CUDA_SUCCESS;
}
CUresult f_kernel_node_copy_attributes(CUgraphNode dst, CUgraphNode src) {
  std::lock_guard l(gpu().mu);
  FakeNode* d = node_of_type_locked(dst, 0);
  FakeNode* s = node_of_type_locked(src, 0);
  if (!d || !s) return CUDA_ERROR_INVALID_VALUE;
  d->attrs = s->attrs;
  return CUDA_SUCCESS;
}
CUresult f_conditional_handle_create(unsigned long long* out, CUgraph graph, CUcontext, unsigned def, unsigned flags) {
  std::lock_guard l(gpu().mu);
  if (!out || !gpu().graphs.contains(graph) || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
  *out = fake_conditional_create(def, flags);
  return CUDA_SUCCESS;
}
// cuGraphAddNode: conditional nodes only (the stub adds the others with their own calls).
CUresult f_add_node(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* data, size_t count,
                    CUgraphNodeParams* p) {
  if (!p || data) return CUDA_ERROR_INVALID_VALUE;
  if (p->type != 13) return CUDA_ERROR_NOT_SUPPORTED;
  CUDA_CONDITIONAL_NODE_PARAMS& c = p->conditional;
  if (!fake_conditional_known(c.handle) || c.type < 0 || c.type > 2 || c.size == 0 ||
      (c.type == 0 && c.size > 2) || (c.type == 1 && c.size != 1))
    return CUDA_ERROR_INVALID_VALUE;
  auto& g = gpu();
  std::lock_guard l(g.mu);
  FakeNode n;
  n.type = 13;
  n.cond = c.handle;
  n.cond_type = c.type;
  for (unsigned i = 0; i < c.size; ++i) {
    const auto body = reinterpret_cast<CUgraph>(g.next_handle++);
    g.graphs[body] = {};
    n.bodies.push_back(body);
  }
  const std::vector<CUgraph> bodies = n.bodies;
  if (CUresult e = add_node_locked(out, graph, deps, count, std::move(n)); e != CUDA_SUCCESS) {
    for (CUgraph b : bodies) destroy_graph_locked(b);
    return e;
  }
  // As the driver: phGraph_out is an output, pointed at an array the node owns (what the
  // caller's pointer held is ignored; on the H100 a stub that read its own array got none).
  c.phGraph_out = g.nodes[*out].bodies.data();
  return CUDA_SUCCESS;
}
CUresult f_stream_get_id(CUstream stream, unsigned long long* id) {
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(stream);
  if (!st || !id) return CUDA_ERROR_INVALID_HANDLE;
  *id = st->id;
  return CUDA_SUCCESS;
}
CUresult f_find_in_clone(CUgraphNode* out, CUgraphNode original, CUgraph clone) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.graphs.find(clone);
  if (!out || it == g.graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  for (CUgraphNode n : it->second.nodes)
    if (g.nodes.at(n).origin == original) return *out = n, CUDA_SUCCESS;
  return CUDA_ERROR_INVALID_VALUE;
}
// `graph`'s nodes in topological order, child graphs inlined (a child's nodes after the
// child node's dependencies, before its dependents), each with the node it came from at the
// top level. False for a cycle. Lock held.
bool flatten_locked(CUgraph graph, CUgraphNode top, std::vector<std::pair<CUgraphNode, FakeNode>>* out) {
  auto& g = gpu();
  const auto& nodes = g.graphs.at(graph).nodes;
  std::map<CUgraphNode, size_t> waiting;
  for (CUgraphNode n : nodes) waiting[n] = g.nodes.at(n).deps.size();
  std::vector<CUgraphNode> ready;
  for (CUgraphNode n : nodes)
    if (waiting[n] == 0) ready.push_back(n);
  size_t done = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    const CUgraphNode n = ready[i];
    const FakeNode& node = g.nodes.at(n);
    if (node.child) {
      if (!flatten_locked(node.child, top ? top : n, out)) return false;
    } else {
      out->emplace_back(top ? top : n, node);
    }
    ++done;
    for (CUgraphNode m : nodes) {
      const auto& deps = g.nodes.at(m).deps;
      if (std::find(deps.begin(), deps.end(), n) != deps.end() && --waiting[m] == 0) ready.push_back(m);
    }
  }
  return done == nodes.size();
}
CUresult f_instantiate(CUgraphExec* out, CUgraph graph, unsigned long long flags) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!out || !g.graphs.contains(graph) || (flags & ~9ull)) return CUDA_ERROR_INVALID_VALUE;
  if (!t_ctx || !g.contexts.contains(t_ctx)) return 201;
  FakeExec x;
  x.ctx = t_ctx;
  if (!flatten_locked(graph, nullptr, &x.order)) return CUDA_ERROR_INVALID_VALUE;  // a cycle
  *out = reinterpret_cast<CUgraphExec>(g.next_handle++);
  g.execs[*out] = std::move(x);
  return CUDA_SUCCESS;
}
CUresult replay(const std::vector<std::pair<CUgraphNode, FakeNode>>& order, CUstream stream);
// A conditional node at a launch: its body chosen by the handle's value now (while: again
// and again until the value is 0).
CUresult run_conditional(const FakeNode& n, CUstream stream) {
  for (int round = 0; round < 1000000; ++round) {
    const unsigned v = fake_conditional_value(n.cond);
    CUgraph body = nullptr;
    if (n.cond_type == 0) body = v ? n.bodies[0] : n.bodies.size() > 1 ? n.bodies[1] : nullptr;
    else if (n.cond_type == 1) body = v ? n.bodies[0] : nullptr;
    else body = v < n.bodies.size() ? n.bodies[v] : nullptr;
    if (!body) return CUDA_SUCCESS;
    std::vector<std::pair<CUgraphNode, FakeNode>> order;
    {
      std::lock_guard l(gpu().mu);
      if (!gpu().graphs.contains(body) || !flatten_locked(body, nullptr, &order)) return CUDA_ERROR_INVALID_VALUE;
    }
    if (CUresult r = replay(order, stream); r != CUDA_SUCCESS) return r;
    if (n.cond_type != 1) return CUDA_SUCCESS;
  }
  return 702;  // CUDA_ERROR_LAUNCH_TIMEOUT: a loop that does not end
}
// Runs an executable graph's nodes on `stream`, in order, without the lock (each takes it).
CUresult replay(const std::vector<std::pair<CUgraphNode, FakeNode>>& order, CUstream stream) {
  for (const auto& [origin, n] : order) {
    if (n.disabled) continue;
    if (n.type == 13) {
      if (CUresult r = run_conditional(n, stream); r != CUDA_SUCCESS) return r;
      continue;
    }
    CUresult r = CUDA_SUCCESS;
    if (n.type == 0) {
      std::vector<void*> ptrs;
      for (const auto& p : n.params) ptrs.push_back(const_cast<std::byte*>(p.data()));
      r = f_launch(n.fn, n.grid[0], n.grid[1], n.grid[2], n.block[0], n.block[1], n.block[2], n.shared, stream,
                   ptrs.data(), nullptr);
    } else if (n.op) {
      r = n.op(stream);
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}
CUresult f_graph_launch(CUgraphExec exec, CUstream stream) {
  std::vector<std::pair<CUgraphNode, FakeNode>> order;
  {
    auto& g = gpu();
    std::lock_guard l(g.mu);
    auto it = g.execs.find(exec);
    if (it == g.execs.end()) return CUDA_ERROR_INVALID_VALUE;
    FakeStream* st = stream_for_work(stream);
    if (!st || it->second.ctx != t_ctx) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capture_status) {  // captured as one node that replays the graph
      FakeNode n;
      n.type = 4;
      n.op = [order = it->second.order](CUstream s) { return replay(order, s); };
      return capture_locked(st, std::move(n));
    }
    ++g.graph_launches;
    order = it->second.order;
  }
  fake_conditionals_to_default();
  return replay(order, stream);
}
CUresult f_graph_upload(CUgraphExec exec, CUstream stream) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (!g.execs.contains(exec)) return CUDA_ERROR_INVALID_VALUE;
  return stream_for_work(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult f_exec_destroy(CUgraphExec exec) {
  std::lock_guard l(gpu().mu);
  return gpu().execs.erase(exec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult f_exec_kernel_params(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.execs.find(exec);
  if (it == g.execs.end()) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [origin, n] : it->second.order)
    if (origin == node && n.type == 0) {
      FakeNode updated;
      if (CUresult e = kernel_node_locked(p, &updated); e != CUDA_SUCCESS) return e;
      updated.deps = n.deps;
      n = std::move(updated);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;  // not a kernel node of the graph it was made from
}
CUresult f_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  auto it = g.execs.find(exec);
  if (it == g.execs.end() || !g.graphs.contains(graph) || !info) return CUDA_ERROR_INVALID_VALUE;
  *info = {};
  std::vector<std::pair<CUgraphNode, FakeNode>> order;
  if (!flatten_locked(graph, nullptr, &order)) return CUDA_ERROR_INVALID_VALUE;
  auto& old = it->second.order;
  // The same topology: as many nodes, of the same types, with as many dependencies each.
  for (size_t i = 0; i < std::max(old.size(), order.size()); ++i)
    if (i >= old.size() || i >= order.size() || old[i].second.type != order[i].second.type ||
        old[i].second.deps.size() != order[i].second.deps.size()) {
      info->result = 2;  // CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
  for (size_t i = 0; i < old.size(); ++i) old[i].second = order[i].second;  // the origins stay
  return CUDA_SUCCESS;
}

CUresult f_error_name(CUresult r, const char** s) {
  *s = r == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR (test executor)";
  return CUDA_SUCCESS;
}
}  // namespace

void install_fake_driver(DriverApi& api, bool recorded_profile) {
  profile() = Profile{};
  if (recorded_profile) load_recorded_profile(profile());
  {
    auto& g = gpu();
    std::lock_guard l(g.mu);
    g.mem.clear();
    g.global_ptrs.clear();
    g.contexts.clear();
    ctx_state().clear();
    g.modules.clear();
    g.functions.clear();
    g.streams.clear();
    g.special_streams.clear();
    g.events.clear();
    g.clock_ms = 0;
    g.hold = false;
    g.defer_htod = false;
    g.deferred.clear();
    g.reservations.clear();
    g.phys.clear();
    g.maps.clear();
    g.arrays.clear();
    g.mipmaps.clear();
    g.textures.clear();
    g.surfaces.clear();
    g.next_va = 0x302000000ull;
    g.move_hints = false;
    g.graphs.clear();
    g.nodes.clear();
    g.execs.clear();
    g.graph_launches = 0;
    g_last_launch_info = {};
  }
  api.cuInit = f_init;
  api.cuDriverGetVersion = f_version;
  api.cuDeviceGetCount = f_count;
  api.cuDeviceGet = f_get;
  api.cuDeviceGetName = f_name;
  api.cuDeviceTotalMem_v2 = f_total;
  api.cuDeviceGetAttribute = f_attr;
  api.cuCtxCreate_v4 = f_ctx_create;
  api.cuCtxDestroy_v2 = f_ctx_destroy;
  api.cuCtxSetCurrent = f_ctx_set;
  api.cuCtxSynchronize = f_sync;
  api.cuMemAlloc_v2 = f_alloc;
  api.cuMemFree_v2 = f_free;
  api.cuMemAddressReserve = f_address_reserve;
  api.cuMemAddressFree = f_address_free;
  api.cuMemCreate = f_mem_create;
  api.cuMemRelease = f_mem_release;
  api.cuMemMap = f_mem_map;
  api.cuMemExportToShareableHandle = f_mem_export;
  api.cuMemImportFromShareableHandle = f_mem_import;
  api.cuIpcGetEventHandle = f_ipc_get_event;
  api.cuIpcOpenEventHandle = f_ipc_open_event;
  api.cuMemUnmap = f_mem_unmap;
  api.cuMemSetAccess = f_mem_set_access;
  api.cuMemGetAllocationGranularity = f_granularity;
  api.cuMemcpyHtoD_v2 = f_htod;
  api.cuMemcpyDtoH_v2 = f_dtoh;
  api.cuMemcpyDtoD_v2 = f_dtod;
  api.cuMemsetD8_v2 = f_memset;
  api.cuModuleLoadData = f_mod_load;
  api.cuModuleUnload = f_mod_unload;
  api.cuModuleGetFunction = f_get_function;
  api.cuFuncGetParamInfo = f_param_info;
  api.cuModuleGetFunctionCount = f_function_count;
  api.cuModuleEnumerateFunctions = f_enumerate_functions;
  api.cuFuncGetName = f_func_name;
  api.cuStreamUpdateCaptureDependencies_v2 = f_update_capture_deps;
  api.cuLaunchKernel = f_launch;
  api.cuLaunchCooperativeKernel = f_launch_cooperative;
  api.cuLaunchKernelEx = f_launch_ex;
  api.cuGetErrorName = f_error_name;
  api.cuDeviceGetUuid_v2 = f_uuid;
  api.cuMemGetInfo_v2 = f_mem_info;
  api.cuDevicePrimaryCtxRetain = f_primary;
  api.cuMemHostRegister_v2 = f_register;
  api.cuMemHostUnregister = f_unregister;
  api.cuMemHostGetDevicePointer_v2 = f_host_device_pointer;
  api.cuCtxGetStreamPriorityRange = f_priority_range;
  api.cuStreamCreateWithPriority = f_stream_create;
  api.cuStreamDestroy_v2 = f_stream_destroy;
  api.cuStreamSynchronize = f_stream_sync;
  api.cuStreamQuery = f_stream_query;
  api.cuStreamWaitEvent = f_stream_wait_event;
  api.cuStreamGetPriority = f_stream_priority;
  api.cuStreamSetAttribute = f_stream_set_attribute;
  api.cuStreamGetAttribute = f_stream_get_attribute;
  api.cuStreamCopyAttributes = f_stream_copy_attributes;
  api.cuLaunchHostFunc = f_launch_host_func;
  api.cuStreamAddCallback = f_stream_add_callback;
  api.cuEventCreate = f_event_create;
  api.cuEventDestroy_v2 = f_event_destroy;
  api.cuEventRecord = f_event_record;
  api.cuEventRecordWithFlags = f_event_record_flags;
  api.cuEventSynchronize = f_event_sync;
  api.cuEventQuery = f_event_query;
  api.cuEventElapsedTime_v2 = f_event_elapsed;
  api.cuMemcpyHtoDAsync_v2 = f_htod_async;
  api.cuMemcpyDtoHAsync_v2 = f_dtoh_async;
  api.cuMemcpyDtoDAsync_v2 = f_dtod_async;
  api.cuMemsetD8Async = f_memset_async;
  api.cuMemsetD16_v2 = [](CUdeviceptr d, unsigned short v, size_t n) { return f_memset_wide(d, v, n, 2); };
  api.cuMemsetD32_v2 = [](CUdeviceptr d, unsigned v, size_t n) { return f_memset_wide(d, v, n, 4); };
  api.cuMemsetD16Async = [](CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
    return f_memset_wide_async(d, v, n, 2, s);
  };
  api.cuMemsetD32Async = [](CUdeviceptr d, unsigned v, size_t n, CUstream s) {
    return f_memset_wide_async(d, v, n, 4, s);
  };
  api.cuModuleGetGlobal_v2 = f_get_global;
  api.cuPointerGetAttribute = f_pointer_attribute;
  api.cuMemAllocPitch_v2 = f_alloc_pitch;
  api.cuMemcpy2D_v2 = f_memcpy_2d;
  api.cuMemsetD2D8_v2 = f_memset_2d;
  api.cuMemcpy2DAsync_v2 = f_memcpy_2d_async;
  api.cuMemsetD2D8Async = f_memset_2d_async;
  api.cuMemsetD2D16_v2 = [](CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h) {
    return f_memset_2d_wide(d, pitch, v, 2, w, h);
  };
  api.cuMemsetD2D32_v2 = [](CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h) {
    return f_memset_2d_wide(d, pitch, v, 4, w, h);
  };
  api.cuMemsetD2D16Async = [](CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s) {
    return f_memset_2d_wide_async(d, pitch, v, 2, w, h, s);
  };
  api.cuMemsetD2D32Async = [](CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h, CUstream s) {
    return f_memset_2d_wide_async(d, pitch, v, 4, w, h, s);
  };
  api.cuFuncGetAttribute = f_func_get_attribute;
  api.cuFuncSetAttribute = f_func_set_attribute;
  api.cuOccupancyMaxActiveBlocksPerMultiprocessor = f_occupancy;
  api.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = f_occupancy_flags;
  api.cuOccupancyAvailableDynamicSMemPerBlock = f_occupancy_shared;
  api.cuOccupancyMaxActiveClusters = f_occupancy_clusters;
  api.cuOccupancyMaxPotentialClusterSize = f_cluster_size;
  api.cuDeviceGetTexture1DLinearMaxWidth = f_texture_1d_width;
  api.cuDeviceGetHostAtomicCapabilities = f_host_atomic_caps;
  api.cuDeviceGetP2PAtomicCapabilities = f_p2p_atomic_caps;
  api.cuCtxResetPersistingL2Cache = f_reset_persisting_l2;
  api.cuFlushGPUDirectRDMAWrites = f_flush_rdma;
  api.cuArray3DCreate_v2 = f_array_create;
  api.cuArrayDestroy = f_array_destroy;
  api.cuMipmappedArrayCreate = f_mipmap_create;
  api.cuMipmappedArrayGetLevel = f_mipmap_level;
  api.cuMipmappedArrayDestroy = f_mipmap_destroy;
  api.cuMemcpy3D_v2 = f_memcpy_3d;
  api.cuMemcpy3DAsync_v2 = f_memcpy_3d_async;
  api.cuTexObjectCreate = f_tex_create;
  api.cuTexObjectDestroy = f_tex_destroy;
  api.cuSurfObjectCreate = f_surf_create;
  api.cuSurfObjectDestroy = f_surf_destroy;
  api.cuCtxGetLimit = f_ctx_get_limit;
  api.cuCtxSetLimit = f_ctx_set_limit;
  api.cuCtxGetCacheConfig = f_ctx_get_cache_config;
  api.cuCtxSetCacheConfig = f_ctx_set_cache_config;
  api.cuFuncSetCacheConfig = f_func_set_cache_config;
  api.cuDeviceCanAccessPeer = f_can_access_peer;
  api.cuCtxEnablePeerAccess = f_enable_peer;
  api.cuCtxDisablePeerAccess = f_disable_peer;
  api.cuDeviceGetP2PAttribute = f_p2p_attribute;
  api.cuMemcpyPeer = f_memcpy_peer;
  api.cuMemcpyPeerAsync = f_memcpy_peer_async;
  api.cuStreamBeginCapture_v2 = f_begin_capture;
  api.cuStreamBeginCaptureToGraph = f_begin_capture_to_graph;
  api.cuStreamEndCapture = f_end_capture;
  api.cuStreamIsCapturing = f_is_capturing;
  api.cuStreamGetCaptureInfo_v3 = f_capture_info;
  api.cuThreadExchangeStreamCaptureMode = f_exchange_capture_mode;
  api.cuGraphCreate = f_graph_create;
  api.cuGraphDestroy = f_graph_destroy;
  api.cuGraphClone = f_graph_clone;
  api.cuGraphAddKernelNode_v2 = f_add_kernel_node;
  api.cuGraphAddMemcpyNode = f_add_memcpy_node;
  api.cuGraphAddMemsetNode = f_add_memset_node;
  api.cuGraphAddHostNode = f_add_host_node;
  api.cuGraphAddEmptyNode = f_add_empty_node;
  api.cuGraphAddEventRecordNode = f_add_event_record_node;
  api.cuGraphAddEventWaitNode = f_add_event_wait_node;
  api.cuGraphAddChildGraphNode = f_add_child_node;
  api.cuGraphAddDependencies_v2 = f_add_dependencies;
  api.cuGraphGetNodes = f_get_nodes;
  api.cuGraphGetRootNodes = f_get_root_nodes;
  api.cuGraphNodeGetType = f_node_type;
  api.cuGraphNodeFindInClone = f_find_in_clone;
  api.cuGraphInstantiateWithFlags = f_instantiate;
  api.cuGraphLaunch = f_graph_launch;
  api.cuGraphUpload = f_graph_upload;
  api.cuGraphExecDestroy = f_exec_destroy;
  api.cuGraphExecKernelNodeSetParams_v2 = f_exec_kernel_params;
  api.cuGraphExecUpdate_v2 = f_exec_update;
  api.cuGraphGetEdges_v2 = f_get_edges;
  api.cuGraphKernelNodeGetParams_v2 = f_kernel_node_get;
  api.cuGraphKernelNodeSetParams_v2 = f_kernel_node_set;
  api.cuGraphKernelNodeGetAttribute = f_kernel_node_get_attribute;
  api.cuGraphKernelNodeSetAttribute = f_kernel_node_set_attribute;
  api.cuGraphMemcpyNodeGetParams = f_memcpy_node_get;
  api.cuGraphMemsetNodeGetParams = f_memset_node_get;
  api.cuGraphHostNodeGetParams = f_host_node_get;
  api.cuGraphChildGraphNodeGetGraph = f_child_graph_get;
  api.cuGraphEventRecordNodeGetEvent = f_event_record_node_get;
  api.cuGraphEventWaitNodeGetEvent = f_event_wait_node_get;
  api.cuGraphMemcpyNodeSetParams = f_memcpy_node_set;
  api.cuGraphMemsetNodeSetParams = f_memset_node_set;
  api.cuGraphHostNodeSetParams = f_host_node_set;
  api.cuGraphEventRecordNodeSetEvent = f_event_record_node_set;
  api.cuGraphEventWaitNodeSetEvent = f_event_wait_node_set;
  api.cuGraphExecMemcpyNodeSetParams = f_exec_memcpy_set;
  api.cuGraphExecMemsetNodeSetParams = f_exec_memset_set;
  api.cuGraphExecHostNodeSetParams = f_exec_host_set;
  api.cuGraphExecChildGraphNodeSetParams = f_exec_child_set;
  api.cuGraphExecEventRecordNodeSetEvent = f_exec_event_record_set;
  api.cuGraphExecEventWaitNodeSetEvent = f_exec_event_wait_set;
  api.cuGraphNodeSetEnabled = f_node_set_enabled;
  api.cuGraphNodeGetEnabled = f_node_get_enabled;
  api.cuGraphNodeGetDependencies_v2 = f_node_dependencies;
  api.cuGraphNodeGetDependentNodes_v2 = f_node_dependents;
  api.cuGraphRemoveDependencies_v2 = f_remove_dependencies;
  api.cuGraphDestroyNode = f_destroy_node;
  api.cuGraphKernelNodeCopyAttributes = f_kernel_node_copy_attributes;
  api.cuStreamGetId = f_stream_get_id;
  api.cuGraphConditionalHandleCreate = f_conditional_handle_create;
  api.cuGraphAddNode_v2 = f_add_node;
  api.origin = "vmcuda test executor (no GPU)";
  api.open_library = fake_open_library;  // NVIDIA's libraries, faked (fake_cublas.cc)
  api.library_symbol = fake_library_symbol;
}

uint64_t fake_allocated_bytes() {
  std::lock_guard l(gpu().mu);
  uint64_t s = 0;
  for (auto& [p, v] : gpu().mem)
    if (!gpu().maps.contains(p)) s += v.size();  // mapped VMM memory: counted below
  for (auto& [h, ph] : gpu().phys) s += ph.bytes;
  for (auto& [h, a] : gpu().arrays) s += a.data.size();
  return s;
}
void fake_move_reservations(bool on) {
  std::lock_guard l(gpu().mu);
  gpu().move_hints = on;
}
unsigned fake_vmm_access(uint64_t va) {
  std::lock_guard l(gpu().mu);
  auto it = gpu().maps.find(va);
  return it == gpu().maps.end() ? 0 : it->second.access;
}
uint64_t fake_live_reservations() {
  std::lock_guard l(gpu().mu);
  return gpu().reservations.size();
}
uint64_t fake_vmm_mappings() {
  std::lock_guard l(gpu().mu);
  return gpu().maps.size();
}
uint64_t fake_live_contexts() {
  std::lock_guard l(gpu().mu);
  return gpu().contexts.size();
}
uint64_t fake_pinned_ranges() {
  std::lock_guard l(gpu().mu);
  return pinned().size();
}
uint64_t fake_live_modules() {
  std::lock_guard l(gpu().mu);
  return gpu().modules.size();
}

}  // namespace vmcuda::testing

namespace vmcuda::testing {
uint64_t fake_live_streams() {
  std::lock_guard l(gpu().mu);
  return gpu().streams.size();
}
uint64_t fake_live_events() {
  std::lock_guard l(gpu().mu);
  return gpu().events.size();
}
void fake_on_synchronize(std::function<void()> hook) {
  std::lock_guard h(g_hook_mu);
  g_sync_hook = std::move(hook);
}
std::thread::id fake_last_launch_thread() { return g_last_launch_thread.load(); }
std::thread::id fake_last_async_copy_thread() { return g_last_async_copy_thread.load(); }
FakeLaunchInfo fake_last_launch() {
  std::lock_guard l(gpu().mu);
  return g_last_launch_info;
}

bool fake_library_work(void* stream, bool never_ends) {
  std::lock_guard l(gpu().mu);
  FakeStream* st = stream_for_work(static_cast<CUstream>(stream));
  if (!st) return false;
  did_work(st, kLaunchMs);
  if (never_ends) st->busy = st->endless = true;  // waits on it last until its context goes
  return true;
}
void fake_hold_completion(bool on) {
  std::lock_guard l(gpu().mu);
  gpu().hold = on;
}
void fake_defer_async_htod(bool on) {
  std::lock_guard l(gpu().mu);
  gpu().defer_htod = on;
  if (!on) run_deferred(0);
}
void fake_clear_fault() { gpu_poisoned() = false; }
}  // namespace vmcuda::testing

namespace vmcuda::testing {
uint64_t fake_live_graphs() {
  std::lock_guard l(gpu().mu);
  return gpu().graphs.size();
}
void fake_restart_capture_ids() {
  std::lock_guard l(gpu().mu);
  gpu().next_capture_id = 0;
}
uint64_t fake_live_graph_execs() {
  std::lock_guard l(gpu().mu);
  return gpu().execs.size();
}
uint64_t fake_graph_launches() {
  std::lock_guard l(gpu().mu);
  return gpu().graph_launches;
}
}  // namespace vmcuda::testing

namespace vmcuda::testing {
void fake_device_access(const std::function<void(const FakeDeviceAt& at)>& f) {
  std::lock_guard l(gpu().mu);
  f([](uint64_t p, size_t n) { return find(p, n); });
}
}  // namespace vmcuda::testing
