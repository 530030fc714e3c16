// cuBLASLt in libcuda.so.1 (vmcuda's libcublasLt.so.13 forwards each export here; README.md
// "cuBLASLt"). The calls are listed in api/libs/cublasLt.calls (wire structs and exports are
// generated); all are written here. Handles, matmul descriptors, matrix layouts and
// preferences are guest objects with a wire handle from the streams' counter: their creation,
// attribute settings and destruction are queued, as the matmul is; the heuristic query and the
// attribute getters wait for the host. A cuBLAS handle of vmcuda's libcublas.so.13 is also a
// cuBLASLt handle (PyTorch casts its cublasHandle_t), as NVIDIA's is.
//
// The heuristic's answers are cached here: PyTorch makes new descriptors, layouts and a
// preference for every GEMM and asks the same question for every GEMM of a shape. So the key is
// what the objects say, not which objects they are: the handle, each object's creation
// arguments and every attribute set on it (in order of attribute number, the last value of
// each), and the requested count. Changing an attribute changes the key (a new round trip);
// destroying a handle drops its answers; destroyed descriptors leave answers that a
// descriptor saying the same things finds again (the library's answer depends on nothing else).
// The algorithm calls (ids, init, check, capabilities, config) all wait: cublasLtMatmulAlgo_t's
// layout is not documented, so even its config is read and written by the host's library.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cublas.h"
#include "stream_event.h"
#include "vmcuda/api/cublaslt_abi.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest::cublaslt {
namespace {

using namespace vmcuda::guest::cublas;

enum class Kind { kHandle, kMatmulDesc, kLayout, kPreference };

struct Object {
  Kind kind;
  uint64_t wire = 0;
  // Matmul descriptors: what says how alpha and beta travel (CUBLASLT_MATMUL_DESC_SCALE_TYPE,
  // _POINTER_MODE), as the app set them.
  std::atomic<int32_t> scale_type{0};
  std::atomic<int32_t> pointer_mode{0};
  // What the object says, for the heuristic cache's key (under the registry's lock): its
  // creation arguments and the last value set for each attribute.
  std::string created;
  std::map<int32_t, std::string> attributes;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, std::unique_ptr<Object>> live;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

template <class T>
void append(std::string* s, const T& v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The heuristic's answers (the results' bytes as the host's library wrote them), by question.
struct HeuristicCache {
  static constexpr size_t kMaxEntries = 4096;  // beyond this, the cache starts over
  std::mutex mu;
  std::unordered_map<std::string, std::string> answers;
};
HeuristicCache& heuristic_cache() {
  static HeuristicCache* c = new HeuristicCache;  // never destroyed, as the registry
  return *c;
}



// The live object of kind `k` the app's value names, or nullptr.
Object* find(const void* app, Kind k) {
  std::lock_guard l(registry().mu);
  auto it = registry().live.find(app);
  return it != registry().live.end() && it->second->kind == k ? it->second.get() : nullptr;
}

// A cuBLASLt handle's wire handle: one of ours, or a cuBLAS handle of vmcuda's libcublas.so.13.
int handle_wire(const void* app, uint64_t* wire) {
  if (const Object* o = find(app, Kind::kHandle)) {
    *wire = o->wire;
    return kSuccess;
  }
  Handle* h;
  if (int s = enter(static_cast<cublasHandle_t>(const_cast<void*>(app)), &h)) return s;
  *wire = h->wire;
  return kSuccess;
}

int desc_wire(const void* app, Kind k, uint64_t* wire) {
  const Object* o = find(app, k);
  if (!o) return kInvalidValue;
  *wire = o->wire;
  return kSuccess;
}

std::span<const std::byte> bytes_of(const void* p, size_t n) { return {static_cast<const std::byte*>(p), n}; }

template <api::Call C>
int queue_tail(const typename api::CallTraits<C>::Args& a, std::span<const std::byte> tail) {
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  return status_of(r->enqueue<C>(a, tail), api::CallTraits<C>::kName);
}

// Runs call C now; up to `capacity` bytes of the reply's trailing bytes go to `out` (*got: how many).
template <api::Call C>
int wait_for(const typename api::CallTraits<C>::Args& a, typename api::CallTraits<C>::Reply* reply, void* out,
             size_t capacity, size_t* got) {
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  const auto res = r->call<C>(a, {}, static_cast<uint32_t>(capacity));
  if (res.status != 0) return status_of(res.status, api::CallTraits<C>::kName);
  const size_t n = std::min(res.extra.size(), capacity);
  if (n) std::memcpy(out, res.extra.data(), n);
  if (got) *got = n;
  *reply = res.reply;
  return kSuccess;
}

// A new object of kind k: its wire handle in the Args' `field`, the creation queued (or, for a
// call that is not queued, waited for), the object registered only if that went well.
template <api::Call C, class A>
int create(void** out, Kind k, A a, uint64_t A::*field, std::string created = {}) {
  if (!out) return kInvalidValue;
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto o = std::make_unique<Object>();
  o->kind = k;
  o->created = std::move(created);
  o->wire = vmcuda::guest::handles::next();
  a.*field = o->wire;
  {
    auto lock = r->lock();
    if constexpr (!api::CallTraits<C>::kBatchable) {
      const auto res = r->call<C>(a);
      if (res.status != 0) return status_of(res.status, api::CallTraits<C>::kName);
    } else if (int s = status_of(r->enqueue<C>(a), api::CallTraits<C>::kName)) {
      return s;
    }
  }
  std::lock_guard l(registry().mu);
  void* app = o.get();
  registry().live.emplace(app, std::move(o));
  *out = app;
  return kSuccess;
}

// Forgets the object and queues its destruction on the host.
template <api::Call C, class A>
int destroy(const void* app, Kind k, uint64_t A::*field) {
  A a{};
  {
    std::lock_guard l(registry().mu);
    auto it = registry().live.find(app);
    // NVIDIA's destroy calls accept NULL (nothing to do); a value that is not a live object of
    // this kind is the app's mistake.
    if (!app) return kSuccess;
    if (it == registry().live.end() || it->second->kind != k) return k == Kind::kHandle ? kNotInitialized : kInvalidValue;
    a.*field = it->second->wire;
    registry().live.erase(it);
  }
  if (k == Kind::kHandle) forget_handle(a.*field);
  return queue_tail<C>(a, {});
}

template <api::Call C, class A>
int set_attribute(const void* app, Kind k, uint64_t A::*field, int32_t attr, const void* buf, size_t bytes) {
  Object* o = find(app, k);
  if (!o) return kInvalidValue;
  if (!buf || bytes == 0 || bytes > api::kLtMaxAttributeBytes) return kInvalidValue;
  if (k == Kind::kMatmulDesc && bytes == sizeof(int32_t)) {
    int32_t v;
    std::memcpy(&v, buf, sizeof v);
    if (attr == api::kLtDescScaleType) o->scale_type = v;
    if (attr == api::kLtDescPointerMode) {
      if (!api::lt_pointer_mode_valid(v)) return kInvalidValue;
      o->pointer_mode = v;
    }
  }
  {
    std::lock_guard l(registry().mu);
    std::string& v = o->attributes[attr];
    v.assign(static_cast<const char*>(buf), bytes);
  }
  A a{};
  a.*field = o->wire;
  a.attr = attr;
  a.sizeInBytes = bytes;
  return queue_tail<C>(a, bytes_of(buf, bytes));
}

template <api::Call C, class A>
int get_attribute(const void* app, Kind k, uint64_t A::*field, int32_t attr, void* buf, size_t bytes,
                  size_t* written) {
  const Object* o = find(app, k);
  if (!o) return kInvalidValue;
  // cuBLASLt's own checks: a size query needs sizeWritten, a read needs buf.
  if ((bytes == 0 && !written) || (bytes != 0 && !buf)) return kInvalidValue;
  if (bytes > api::kLtMaxAttributeBytes) return kInvalidValue;  // no attribute is this large
  A a{};
  a.*field = o->wire;
  a.attr = attr;
  a.sizeInBytes = bytes;
  typename api::CallTraits<C>::Reply reply{};
  size_t got = 0;
  if (int s = wait_for<C>(a, &reply, buf, bytes, &got)) return s;
  if (written) std::memcpy(written, reply.sizeWritten, sizeof *written);
  return kSuccess;
}

}  // namespace

// The answers given for handle `wire` (its key's first 8 bytes) go.
void forget_handle(uint64_t wire) noexcept {
  HeuristicCache& c = heuristic_cache();
  std::lock_guard l(c.mu);
  std::erase_if(c.answers, [&](const auto& e) {
    uint64_t w;
    std::memcpy(&w, e.first.data(), sizeof w);
    return w == wire;
  });
}
}  // namespace vmcuda::guest::cublaslt

using namespace vmcuda::guest::cublaslt;
using namespace vmcuda::guest::cublas;
namespace api = vmcuda::api;

#define VMCUDA_CUBLASLT_API extern "C"

// ---- handles

VMCUDA_CUBLASLT_API int cublasLtCreate(void** handle) {
  return create<api::Call::cublasLtCreate>(handle, Kind::kHandle, api::cublasLtCreate_Args{},
                                           &api::cublasLtCreate_Args::lightHandle);
}
VMCUDA_CUBLASLT_API int cublasLtDestroy(void* handle) {
  if (!handle) return kNotInitialized;
  return destroy<api::Call::cublasLtDestroy>(handle, Kind::kHandle, &api::cublasLtDestroy_Args::lightHandle);
}

// ---- matmul descriptors

VMCUDA_CUBLASLT_API int cublasLtMatmulDescCreate(void** desc, int compute_type, int scale_type) {
  api::cublasLtMatmulDescCreate_Args a{};
  a.computeType = compute_type;
  a.scaleType = scale_type;
  std::string created;
  append(&created, compute_type);
  append(&created, scale_type);
  const int s = create<api::Call::cublasLtMatmulDescCreate>(
      desc, Kind::kMatmulDesc, a, &api::cublasLtMatmulDescCreate_Args::matmulDesc, std::move(created));
  if (s == kSuccess) find(*desc, Kind::kMatmulDesc)->scale_type = scale_type;
  return s;
}
VMCUDA_CUBLASLT_API int cublasLtMatmulDescDestroy(void* desc) {
  return destroy<api::Call::cublasLtMatmulDescDestroy>(desc, Kind::kMatmulDesc,
                                                       &api::cublasLtMatmulDescDestroy_Args::matmulDesc);
}
VMCUDA_CUBLASLT_API int cublasLtMatmulDescSetAttribute(void* desc, int attr, const void* buf, size_t bytes) {
  return set_attribute<api::Call::cublasLtMatmulDescSetAttribute>(
      desc, Kind::kMatmulDesc, &api::cublasLtMatmulDescSetAttribute_Args::matmulDesc, attr, buf, bytes);
}
VMCUDA_CUBLASLT_API int cublasLtMatmulDescGetAttribute(void* desc, int attr, void* buf, size_t bytes, size_t* written) {
  return get_attribute<api::Call::cublasLtMatmulDescGetAttribute>(
      desc, Kind::kMatmulDesc, &api::cublasLtMatmulDescGetAttribute_Args::matmulDesc, attr, buf, bytes, written);
}

// ---- matrix layouts

VMCUDA_CUBLASLT_API int cublasLtMatrixLayoutCreate(void** layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  api::cublasLtMatrixLayoutCreate_Args a{};
  a.type = type;
  a.rows = rows;
  a.cols = cols;
  a.ld = ld;
  std::string created;
  append(&created, type);
  append(&created, rows);
  append(&created, cols);
  append(&created, ld);
  return create<api::Call::cublasLtMatrixLayoutCreate>(layout, Kind::kLayout, a,
                                                       &api::cublasLtMatrixLayoutCreate_Args::matLayout,
                                                       std::move(created));
}
VMCUDA_CUBLASLT_API int cublasLtMatrixLayoutDestroy(void* layout) {
  return destroy<api::Call::cublasLtMatrixLayoutDestroy>(layout, Kind::kLayout,
                                                         &api::cublasLtMatrixLayoutDestroy_Args::matLayout);
}
VMCUDA_CUBLASLT_API int cublasLtMatrixLayoutSetAttribute(void* layout, int attr, const void* buf, size_t bytes) {
  return set_attribute<api::Call::cublasLtMatrixLayoutSetAttribute>(
      layout, Kind::kLayout, &api::cublasLtMatrixLayoutSetAttribute_Args::matLayout, attr, buf, bytes);
}
VMCUDA_CUBLASLT_API int cublasLtMatrixLayoutGetAttribute(void* layout, int attr, void* buf, size_t bytes,
                                                        size_t* written) {
  return get_attribute<api::Call::cublasLtMatrixLayoutGetAttribute>(
      layout, Kind::kLayout, &api::cublasLtMatrixLayoutGetAttribute_Args::matLayout, attr, buf, bytes, written);
}

// ---- preferences

VMCUDA_CUBLASLT_API int cublasLtMatmulPreferenceCreate(void** pref) {
  return create<api::Call::cublasLtMatmulPreferenceCreate>(pref, Kind::kPreference,
                                                           api::cublasLtMatmulPreferenceCreate_Args{},
                                                           &api::cublasLtMatmulPreferenceCreate_Args::pref);
}
VMCUDA_CUBLASLT_API int cublasLtMatmulPreferenceDestroy(void* pref) {
  return destroy<api::Call::cublasLtMatmulPreferenceDestroy>(pref, Kind::kPreference,
                                                             &api::cublasLtMatmulPreferenceDestroy_Args::pref);
}
VMCUDA_CUBLASLT_API int cublasLtMatmulPreferenceSetAttribute(void* pref, int attr, const void* buf, size_t bytes) {
  return set_attribute<api::Call::cublasLtMatmulPreferenceSetAttribute>(
      pref, Kind::kPreference, &api::cublasLtMatmulPreferenceSetAttribute_Args::pref, attr, buf, bytes);
}
VMCUDA_CUBLASLT_API int cublasLtMatmulPreferenceGetAttribute(void* pref, int attr, void* buf, size_t bytes,
                                                            size_t* written) {
  return get_attribute<api::Call::cublasLtMatmulPreferenceGetAttribute>(
      pref, Kind::kPreference, &api::cublasLtMatmulPreferenceGetAttribute_Args::pref, attr, buf, bytes, written);
}

// ---- heuristics and the matmul

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoGetHeuristic(void* handle, void* op, void* adesc, void* bdesc, void* cdesc,
                                                      void* ddesc, void* pref, int requested, void* results,
                                                      int* returned) {
  api::cublasLtMatmulAlgoGetHeuristic_Args a{};
  if (int s = handle_wire(handle, &a.lightHandle)) return s;
  if (int s = desc_wire(op, Kind::kMatmulDesc, &a.operationDesc)) return s;
  for (auto [app, field] : {std::pair{adesc, &a.Adesc}, {bdesc, &a.Bdesc}, {cdesc, &a.Cdesc}, {ddesc, &a.Ddesc}})
    if (int s = desc_wire(app, Kind::kLayout, field)) return s;
  if (int s = desc_wire(pref, Kind::kPreference, &a.preference)) return s;
  if (requested <= 0 || !results || !returned) return kInvalidValue;
  a.requestedAlgoCount = std::min(requested, api::kLtMaxHeuristicResults);
  // The question (see the top of this file): the handle, the count, what each object says.
  std::string key;
  append(&key, a.lightHandle);
  append(&key, a.requestedAlgoCount);
  {
    std::lock_guard l(registry().mu);
    for (const void* app : {op, adesc, bdesc, cdesc, ddesc, pref}) {
      auto it = registry().live.find(app);
      if (it == registry().live.end()) return kInvalidValue;  // destroyed meanwhile
      const Object& o = *it->second;
      append(&key, static_cast<uint32_t>(o.created.size()));
      key += o.created;
      append(&key, static_cast<uint32_t>(o.attributes.size()));
      for (const auto& [attr, value] : o.attributes) {
        append(&key, attr);
        append(&key, static_cast<uint32_t>(value.size()));
        key += value;
      }
    }
  }
  HeuristicCache& cache = heuristic_cache();
  {
    std::lock_guard l(cache.mu);
    if (auto it = cache.answers.find(key); it != cache.answers.end()) {
      std::memcpy(results, it->second.data(), it->second.size());
      *returned = static_cast<int>(it->second.size() / api::kLtHeuristicResultBytes);
      return kSuccess;
    }
  }
  api::cublasLtMatmulAlgoGetHeuristic_Reply reply{};
  const size_t capacity = size_t(a.requestedAlgoCount) * api::kLtHeuristicResultBytes;
  size_t got = 0;
  if (int s = wait_for<api::Call::cublasLtMatmulAlgoGetHeuristic>(a, &reply, results, capacity, &got)) return s;
  int n;
  std::memcpy(&n, reply.returnAlgoCount, sizeof n);
  *returned = std::clamp<int>(n, 0, static_cast<int>(got / api::kLtHeuristicResultBytes));
  std::lock_guard l(cache.mu);
  if (cache.answers.size() >= HeuristicCache::kMaxEntries) cache.answers.clear();
  cache.answers[std::move(key)].assign(static_cast<const char*>(results),
                                       size_t(*returned) * api::kLtHeuristicResultBytes);
  return kSuccess;
}

VMCUDA_CUBLASLT_API int cublasLtMatmul(void* handle, void* op, const void* alpha, const void* A, void* adesc,
                                       const void* B, void* bdesc, const void* beta, const void* C, void* cdesc,
                                       void* D, void* ddesc, const void* algo, void* workspace, size_t workspace_bytes,
                                       cudaStream_t stream) {
  api::cublasLtMatmul_Args a{};
  if (int s = handle_wire(handle, &a.lightHandle)) return s;
  const Object* desc = find(op, Kind::kMatmulDesc);
  if (!desc) return kInvalidValue;
  a.computeDesc = desc->wire;
  for (auto [app, field] : {std::pair{adesc, &a.Adesc}, {bdesc, &a.Bdesc}, {cdesc, &a.Cdesc}, {ddesc, &a.Ddesc}})
    if (int s = desc_wire(app, Kind::kLayout, field)) return s;
  // alpha and beta as the descriptor says: values of its scale type, or device pointers.
  const int32_t mode = desc->pointer_mode;
  const size_t bytes = api::lt_scalar_bytes(desc->scale_type);
  if (bytes == 0) return kNotSupported;
  if (!alpha || (!beta && mode != 3)) return kInvalidValue;  // mode 3: beta is zero, not read
  auto put = [&](const void* v, bool on_device, uint8_t (&field)[16]) {
    if (on_device) {
      const uint64_t p = device_pointer(v);
      std::memcpy(field, &p, sizeof p);
    } else if (v) {
      std::memcpy(field, v, bytes);
    }
  };
  put(alpha, api::lt_alpha_on_device(mode), a.alpha);
  if (mode != 3) put(beta, api::lt_beta_on_device(mode), a.beta);
  a.A = device_pointer(A);
  a.B = device_pointer(B);
  a.C = device_pointer(C);
  a.D = device_pointer(D);
  if (algo) {
    std::memcpy(a.algo, algo, api::kLtAlgoBytes);
    a.has_algo = 1;
  }
  a.workspace = device_pointer(workspace);
  a.workspaceSizeInBytes = workspace_bytes;
  if (vmcuda::guest::stream_wire_handle(stream, false, &a.stream) != cudaSuccess) return kInvalidValue;
  return queue_tail<api::Call::cublasLtMatmul>(a, {});
}

// ---- algorithms: each a round trip (the host's library reads and writes the 64 bytes)

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoGetIds(void* handle, int compute, int scale, int atype, int btype, int ctype,
                                                int dtype, int requested, int* ids, int* returned) {
  api::cublasLtMatmulAlgoGetIds_Args a{};
  if (int s = handle_wire(handle, &a.lightHandle)) return s;
  if (requested <= 0 || !ids || !returned) return kInvalidValue;
  a.computeType = compute, a.scaleType = scale, a.Atype = atype, a.Btype = btype, a.Ctype = ctype, a.Dtype = dtype;
  a.requestedAlgoCount = std::min(requested, api::kLtMaxAlgoIds);
  api::cublasLtMatmulAlgoGetIds_Reply reply{};
  size_t got = 0;
  if (int s = wait_for<api::Call::cublasLtMatmulAlgoGetIds>(a, &reply, ids, size_t(a.requestedAlgoCount) * sizeof(int),
                                                            &got))
    return s;
  int n;
  std::memcpy(&n, reply.returnAlgoCount, sizeof n);
  *returned = std::clamp<int>(n, 0, static_cast<int>(got / sizeof(int)));
  return kSuccess;
}

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoInit(void* handle, int compute, int scale, int atype, int btype, int ctype,
                                              int dtype, int id, void* algo) {
  api::cublasLtMatmulAlgoInit_Args a{};
  if (int s = handle_wire(handle, &a.lightHandle)) return s;
  if (!algo) return kInvalidValue;
  a.computeType = compute, a.scaleType = scale, a.Atype = atype, a.Btype = btype, a.Ctype = ctype, a.Dtype = dtype;
  a.algoId = id;
  api::cublasLtMatmulAlgoInit_Reply reply{};
  if (int s = wait_for<api::Call::cublasLtMatmulAlgoInit>(a, &reply, nullptr, 0, nullptr)) return s;
  std::memcpy(algo, reply.algo, api::kLtAlgoBytes);
  return kSuccess;
}

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoCheck(void* handle, void* op, void* adesc, void* bdesc, void* cdesc,
                                               void* ddesc, const void* algo, void* result) {
  api::cublasLtMatmulAlgoCheck_Args a{};
  if (int s = handle_wire(handle, &a.lightHandle)) return s;
  if (int s = desc_wire(op, Kind::kMatmulDesc, &a.operationDesc)) return s;
  for (auto [app, field] : {std::pair{adesc, &a.Adesc}, {bdesc, &a.Bdesc}, {cdesc, &a.Cdesc}, {ddesc, &a.Ddesc}})
    if (int s = desc_wire(app, Kind::kLayout, field)) return s;
  if (!algo || !result) return kInvalidValue;
  std::memcpy(a.algo, algo, api::kLtAlgoBytes);  // may point into *result: read before it is written
  a.has_algo = 1;
  api::cublasLtMatmulAlgoCheck_Reply reply{};
  if (int s = wait_for<api::Call::cublasLtMatmulAlgoCheck>(a, &reply, nullptr, 0, nullptr)) return s;
  // "algo field is never updated": the rest of the result is the host's answer.
  std::memcpy(static_cast<std::byte*>(result) + api::kLtAlgoBytes, reply.result + api::kLtAlgoBytes,
              api::kLtHeuristicResultBytes - api::kLtAlgoBytes);
  return kSuccess;
}

namespace {
// The capability and config getters: a size query (bytes 0) needs `written`, a read needs buf.
template <api::Call C>
int algo_get(const void* algo, int attr, void* buf, size_t bytes, size_t* written, size_t limit) {
  if (!algo || (bytes == 0 && !written) || (bytes != 0 && !buf)) return kInvalidValue;
  if (bytes > limit) bytes = limit;  // no attribute is this large: the host's library answers the size it has
  typename api::CallTraits<C>::Args a{};
  std::memcpy(a.algo, algo, api::kLtAlgoBytes);
  a.has_algo = 1;
  a.attr = attr;
  a.sizeInBytes = bytes;
  typename api::CallTraits<C>::Reply reply{};
  size_t got = 0;
  if (int s = wait_for<C>(a, &reply, buf, bytes, &got)) return s;
  if (written) std::memcpy(written, reply.sizeWritten, sizeof *written);
  return kSuccess;
}
}  // namespace

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoCapGetAttribute(const void* algo, int attr, void* buf, size_t bytes,
                                                         size_t* written) {
  return algo_get<api::Call::cublasLtMatmulAlgoCapGetAttribute>(algo, attr, buf, bytes, written,
                                                                api::kLtMaxCapabilityBytes);
}

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoConfigGetAttribute(const void* algo, int attr, void* buf, size_t bytes,
                                                            size_t* written) {
  return algo_get<api::Call::cublasLtMatmulAlgoConfigGetAttribute>(algo, attr, buf, bytes, written,
                                                                   api::kLtMaxAttributeBytes);
}

VMCUDA_CUBLASLT_API int cublasLtMatmulAlgoConfigSetAttribute(void* algo, int attr, const void* buf, size_t bytes) {
  if (!algo || !buf || bytes == 0 || bytes > api::kLtMaxAttributeBytes) return kInvalidValue;
  api::cublasLtMatmulAlgoConfigSetAttribute_Args a{};
  std::memcpy(a.algo, algo, api::kLtAlgoBytes);
  a.attr = attr;
  a.sizeInBytes = bytes;
  int status;
  vmcuda::guest::Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  const auto res = r->call<api::Call::cublasLtMatmulAlgoConfigSetAttribute>(a, bytes_of(buf, bytes));
  if (res.status != 0) return status_of(res.status, "cublasLtMatmulAlgoConfigSetAttribute");
  std::memcpy(algo, res.reply.algo, api::kLtAlgoBytes);
  return kSuccess;
}

// ---- answered here

VMCUDA_CUBLASLT_API size_t cublasLtGetVersion(void) {
  return size_t(kVersion[0]) * 10000 + size_t(kVersion[1]) * 100 + size_t(kVersion[2]);
}
VMCUDA_CUBLASLT_API size_t cublasLtGetCudartVersion(void) {
  int v = 0;
  cudaRuntimeGetVersion(&v);  // the runtime's (vmcuda's answers the toolkit's version)
  return size_t(v);
}
VMCUDA_CUBLASLT_API int cublasLtGetProperty(int type, int* value) {
  if (!value || type < 0 || type > 2) return kInvalidValue;  // libraryPropertyType: MAJOR, MINOR, PATCH
  *value = kVersion[type];
  return kSuccess;
}
extern "C" const char* cublasGetStatusName(int status);
extern "C" const char* cublasGetStatusString(int status);
VMCUDA_CUBLASLT_API const char* cublasLtGetStatusName(int status) { return cublasGetStatusName(status); }
VMCUDA_CUBLASLT_API const char* cublasLtGetStatusString(int status) { return cublasGetStatusString(status); }
