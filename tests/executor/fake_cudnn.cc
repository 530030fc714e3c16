// A fake libcudnn.so.9 for the test executor (fake_driver.h): the handle, and enough of the
// backend (graph) API to build and run graphs of pointwise operations on fp32 tensors (ADD, MUL,
// RELU_FWD, IDENTITY; broadcasting by dimensions of 1), computed on the CPU over the fake device
// memory. Descriptors keep their attributes as set (with their attribute type, checked where the
// fake reads them: CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE); Finalize checks what cuDNN's
// documentation requires of each kind the fake knows; a graph of any other operation finalizes
// no execution plan (CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN), as a library without an engine
// for it answers. Heuristics offer one engine configuration (engine 0).
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "executor/fake_driver.h"

namespace vmcuda::testing {
namespace {

constexpr int kSuccess = 0, kBadParam = 2000, kNullPointer = 2002, kNotFinalized = 2004,
              kAttributeType = 2010, kNotSupported = 3000, kGraphPattern = 3001, kExecutionFailed = 5000;
// cudnnBackendAttributeType_t
constexpr int kTHandle = 0, kTDataType = 1, kTBool = 2, kTInt64 = 3, kTFloat = 4, kTDouble = 5, kTVoidPtr = 6,
              kTHeurMode = 8, kTPointwiseMode = 14, kTDescriptor = 15;
// cudnnBackendDescriptorType_t
constexpr int kPointwise = 0, kEngine = 2, kEngineCfg = 3, kEngineHeur = 4, kPlan = 5, kOpPointwise = 13,
              kOpGraph = 15, kVariantPack = 16, kTensor = 17;
// cudnnBackendAttributeName_t
constexpr int kPwMode = 0, kPwMathPrec = 1, kHeurMode = 200, kHeurGraph = 201, kHeurResults = 202, kCfgEngine = 300,
              kPlanHandle = 400, kPlanCfg = 401, kPlanWorkspace = 402, kOpPwDesc = 750, kOpPwX = 751, kOpPwB = 752,
              kOpPwY = 753, kOpPwAlpha1 = 754, kOpPwAlpha2 = 755, kGraphHandle = 800, kGraphOps = 801,
              kTAlign = 900, kTDtype = 901, kTDims = 902, kTStrides = 903, kTUid = 906, kTVirtual = 907, kVpUids = 1000,
              kVpPointers = 1001, kVpWorkspace = 1003, kEngineGraph = 1300, kEngineIndex = 1301;
// cudnnPointwiseMode_t
constexpr int kAdd = 0, kMul = 1, kIdentity = 21, kReluFwd = 100;

struct Handle {
  void* stream = nullptr;
};

struct Attr {
  int type = 0;
  std::vector<std::byte> bytes;  // count * element size
  int64_t count = 0;
};

struct Desc {
  int type = 0;
  bool finalized = false;
  std::map<int, Attr> attrs;
  // An engine configuration handed out by the heuristics, or an engine: its graph.
  Desc* graph = nullptr;
};

std::mutex g_mu;
std::set<Handle*> g_handles;
std::set<Desc*> g_descs;
std::string g_last_error;

size_t element_bytes(int type) {
  switch (type) {
    case kTHandle: case kTInt64: case kTDouble: case kTVoidPtr: case kTDescriptor: return 8;
    case kTBool: case 24: return 1;
    case 26: return 16;
  }
  return type >= 0 && type <= 30 ? 4 : 0;
}

int fail(int status, const std::string& why) {
  g_last_error = why;
  return status;
}

Desc* live(void* d) { return g_descs.count(static_cast<Desc*>(d)) ? static_cast<Desc*>(d) : nullptr; }

// Attribute `name` of `d` as `count` elements of `type` (nullptr: absent or another type).
const Attr* attr(const Desc& d, int name, int type) {
  auto it = d.attrs.find(name);
  return it != d.attrs.end() && it->second.type == type ? &it->second : nullptr;
}
template <class T>
bool get1(const Desc& d, int name, int type, T* out) {
  const Attr* a = attr(d, name, type);
  if (!a || a->count < 1 || a->bytes.size() < sizeof(T)) return false;
  std::memcpy(out, a->bytes.data(), sizeof(T));
  return true;
}
std::vector<int64_t> ints(const Desc& d, int name) {
  const Attr* a = attr(d, name, kTInt64);
  std::vector<int64_t> v(a ? size_t(a->count) : 0);
  if (a) std::memcpy(v.data(), a->bytes.data(), v.size() * 8);
  return v;
}
std::vector<Desc*> descs(const Desc& d, int name) {
  const Attr* a = attr(d, name, kTDescriptor);
  std::vector<Desc*> v(a ? size_t(a->count) : 0);
  if (a) std::memcpy(v.data(), a->bytes.data(), v.size() * 8);
  return v;
}
Desc* desc1(const Desc& d, int name, int want_type) {
  auto v = descs(d, name);
  return v.size() == 1 && live(v[0]) && v[0]->type == want_type && v[0]->finalized ? v[0] : nullptr;
}

// ---- the handle

int f_create(void** h) {
  if (!h) return kBadParam;
  std::lock_guard l(g_mu);
  auto* p = new Handle;
  g_handles.insert(p);
  *h = p;
  return kSuccess;
}
int f_destroy(void* h) {
  std::lock_guard l(g_mu);
  if (!h) return kSuccess;
  if (!g_handles.erase(static_cast<Handle*>(h))) return kBadParam;
  delete static_cast<Handle*>(h);
  return kSuccess;
}
int f_set_stream(void* h, void* stream) {
  std::lock_guard l(g_mu);
  if (!g_handles.count(static_cast<Handle*>(h))) return kBadParam;
  static_cast<Handle*>(h)->stream = stream;
  return kSuccess;
}
size_t f_version() { return 91900; }
size_t f_cudart_version() { return 13000; }
void f_last_error(char* msg, size_t n) {
  std::lock_guard l(g_mu);
  if (!msg || !n) return;
  std::strncpy(msg, g_last_error.c_str(), n - 1);
  msg[n - 1] = '\0';
  g_last_error.clear();
}

// ---- descriptors

int f_create_desc(int type, void** out) {
  if (!out) return kNullPointer;
  if (type < 0 || type > 43) return fail(kNotSupported, "unknown descriptor type");
  std::lock_guard l(g_mu);
  auto* d = new Desc;
  d->type = type;
  g_descs.insert(d);
  *out = d;
  return kSuccess;
}
int f_destroy_desc(void* p) {
  std::lock_guard l(g_mu);
  if (!p) return kNullPointer;
  Desc* d = live(p);
  if (!d) return kBadParam;
  g_descs.erase(d);
  delete d;
  return kSuccess;
}
int f_set(void* p, int name, int type, long long count, void* elements) {
  std::lock_guard l(g_mu);
  if (!p) return kNullPointer;
  Desc* d = live(p);
  if (!d || !elements || count < 0) return kBadParam;
  if (d->finalized) return fail(kBadParam, "the descriptor is finalized");
  const size_t size = element_bytes(type);
  if (!size) return kNotSupported;
  if (type == kTDescriptor)
    for (long long i = 0; i < count; ++i) {
      void* e;
      std::memcpy(&e, static_cast<std::byte*>(elements) + 8 * i, 8);
      if (!live(e)) return fail(kBadParam, "an element is no descriptor");
    }
  if (type == kTHandle)
    for (long long i = 0; i < count; ++i) {
      void* e;
      std::memcpy(&e, static_cast<std::byte*>(elements) + 8 * i, 8);
      if (!g_handles.count(static_cast<Handle*>(e))) return fail(kBadParam, "an element is no handle");
    }
  Attr& a = d->attrs[name];
  a.type = type;
  a.count = count;
  a.bytes.assign(static_cast<std::byte*>(elements), static_cast<std::byte*>(elements) + size * size_t(count));
  return kSuccess;
}

bool tensor_ok(const Desc& t) {
  int32_t dt;
  int64_t uid, align;
  const auto dims = ints(t, kTDims), strides = ints(t, kTStrides);
  return get1(t, kTDtype, kTDataType, &dt) && get1(t, kTUid, kTInt64, &uid) && get1(t, kTAlign, kTInt64, &align) &&
         !dims.empty() && dims.size() == strides.size();
}

// Whether `g` (an operation graph) is one the fake's engine runs: pointwise operations on fp32.
bool runnable(const Desc& g) {
  for (Desc* op : descs(g, kGraphOps)) {
    if (!live(op) || op->type != kOpPointwise) return false;
    for (int t : {kOpPwX, kOpPwB, kOpPwY}) {
      Desc* td = desc1(*op, t, kTensor);
      int32_t dt = -1;
      if (td && (!get1(*td, kTDtype, kTDataType, &dt) || dt != 0)) return false;
    }
  }
  return true;
}

int finalize_locked(Desc& d) {
  switch (d.type) {
    case kTensor:
      if (!tensor_ok(d)) return fail(kBadParam, "tensor: data type, dimensions, strides, unique id and alignment");
      break;
    case kPointwise: {
      int32_t mode;
      if (!get1(d, kPwMode, kTPointwiseMode, &mode)) return fail(kBadParam, "pointwise: no mode");
      if (mode != kAdd && mode != kMul && mode != kIdentity && mode != kReluFwd) return fail(kNotSupported, "mode");
      break;
    }
    case kOpPointwise: {
      Desc* pw = desc1(d, kOpPwDesc, kPointwise);
      if (!pw || !desc1(d, kOpPwX, kTensor) || !desc1(d, kOpPwY, kTensor))
        return fail(kBadParam, "pointwise operation: descriptor, X and Y (finalized)");
      int32_t mode = kIdentity;
      get1(*pw, kPwMode, kTPointwiseMode, &mode);
      if ((mode == kAdd || mode == kMul) && !desc1(d, kOpPwB, kTensor)) return fail(kBadParam, "a binary mode needs B");
      break;
    }
    case kOpGraph: {
      void* h;
      const auto ops = descs(d, kGraphOps);
      if (!get1(d, kGraphHandle, kTHandle, &h) || ops.empty()) return fail(kBadParam, "graph: handle and operations");
      for (Desc* op : ops)
        if (!live(op) || !op->finalized) return fail(kNotFinalized, "graph: an operation is not finalized");
      break;
    }
    case kEngineHeur: {
      int32_t mode;
      if (!desc1(d, kHeurGraph, kOpGraph) || !get1(d, kHeurMode, kTHeurMode, &mode))
        return fail(kBadParam, "heuristics: graph and mode");
      break;
    }
    case kEngine: {
      int64_t index;
      d.graph = desc1(d, kEngineGraph, kOpGraph);
      if (!d.graph || !get1(d, kEngineIndex, kTInt64, &index)) return fail(kBadParam, "engine: graph and index");
      if (index != 0) return fail(kNotSupported, "the fake has engine 0 only");
      break;
    }
    case kEngineCfg: {
      Desc* e = desc1(d, kCfgEngine, kEngine);
      if (!e && !d.graph) return fail(kBadParam, "engine configuration: no engine");
      if (e) d.graph = e->graph;
      break;
    }
    case kPlan: {
      void* h;
      Desc* cfg = desc1(d, kPlanCfg, kEngineCfg);
      if (!cfg || !get1(d, kPlanHandle, kTHandle, &h)) return fail(kBadParam, "plan: handle and engine configuration");
      if (!cfg->graph || !live(cfg->graph) || !runnable(*cfg->graph))
        return fail(kGraphPattern, "the fake's engine runs fp32 pointwise graphs only");
      d.graph = cfg->graph;
      break;
    }
    case kVariantPack: {
      const Attr* ids = attr(d, kVpUids, kTInt64);
      const Attr* ptrs = attr(d, kVpPointers, kTVoidPtr);
      if (!ids || !ptrs || ids->count != ptrs->count) return fail(kBadParam, "variant pack: ids and pointers");
      break;
    }
    default:
      return fail(kNotSupported, "a descriptor type the fake does not know");
  }
  d.finalized = true;
  return kSuccess;
}

int f_finalize(void* p) {
  std::lock_guard l(g_mu);
  if (!p) return kNullPointer;
  Desc* d = live(p);
  if (!d) return kBadParam;
  if (d->finalized) return fail(kBadParam, "finalized twice");
  return finalize_locked(*d);
}

int f_get(void* p, int name, int type, long long requested, long long* count, void* elements) {
  std::lock_guard l(g_mu);
  if (!p) return kNullPointer;
  Desc* d = live(p);
  if (!d || !count || requested < 0) return kBadParam;
  if (!d->finalized) return fail(kNotFinalized, "get of a descriptor not finalized");
  if (d->type == kEngineHeur && name == kHeurResults) {
    if (type != kTDescriptor) return kAttributeType;
    *count = 1;  // one configuration: engine 0
    if (requested >= 1 && elements) {
      Desc* cfg;
      std::memcpy(&cfg, elements, 8);
      if (!live(cfg) || cfg->type != kEngineCfg) return fail(kBadParam, "results need engine configurations");
      cfg->graph = desc1(*d, kHeurGraph, kOpGraph);
      cfg->finalized = true;
    }
    return kSuccess;
  }
  if (d->type == kPlan && name == kPlanWorkspace) {
    if (type != kTInt64) return kAttributeType;
    *count = 1;
    if (requested >= 1 && elements) std::memset(elements, 0, 8);
    return kSuccess;
  }
  auto it = d->attrs.find(name);
  if (it == d->attrs.end()) return fail(kBadParam, "no such attribute set");
  if (it->second.type != type) return kAttributeType;
  *count = it->second.count;
  const size_t n = size_t(std::min<long long>(requested, it->second.count)) * element_bytes(type);
  if (elements && n) std::memcpy(elements, it->second.bytes.data(), n);
  return kSuccess;
}

// ---- execution: each pointwise operation in the graph's order, over the fake device memory

struct Tensor {
  std::vector<int64_t> dims, strides;
  float* data = nullptr;
};

float apply(int mode, float x, float b) {
  switch (mode) {
    case kAdd: return x + b;
    case kMul: return x * b;
    case kReluFwd: return x > 0 ? x : 0;
  }
  return x;  // IDENTITY
}

int f_execute(void* h, void* plan_p, void* pack_p) {
  std::unique_lock l(g_mu);
  if (!g_handles.count(static_cast<Handle*>(h))) return kBadParam;
  Desc* plan = live(plan_p);
  Desc* pack = live(pack_p);
  if (!plan || !pack || plan->type != kPlan || pack->type != kVariantPack) return kBadParam;
  if (!plan->finalized || !pack->finalized || !plan->graph || !live(plan->graph)) return kNotFinalized;
  const auto uids = ints(*pack, kVpUids);
  const Attr* pa = attr(*pack, kVpPointers, kTVoidPtr);
  std::map<int64_t, uint64_t> where;
  for (size_t i = 0; i < uids.size(); ++i) {
    uint64_t ptr;
    std::memcpy(&ptr, pa->bytes.data() + 8 * i, 8);
    where[uids[i]] = ptr;
  }
  const Desc graph = *plan->graph;
  void* stream = static_cast<Handle*>(h)->stream;
  int status = kSuccess;
  std::map<int64_t, std::vector<float>> virtuals;  // intermediate tensors (IS_VIRTUAL) by uid
  fake_device_access([&](const FakeDeviceAt& at) {
    for (Desc* op : descs(graph, kGraphOps)) {
      Desc* pw = live(op) ? desc1(*op, kOpPwDesc, kPointwise) : nullptr;
      if (!pw || !desc1(*op, kOpPwX, kTensor) || !desc1(*op, kOpPwY, kTensor)) {
        status = kBadParam;  // a descriptor the graph names was destroyed
        return;
      }
      int32_t mode = kIdentity;
      get1(*pw, kPwMode, kTPointwiseMode, &mode);
      float alpha1 = 1, alpha2 = 1;
      get1(*op, kOpPwAlpha1, kTFloat, &alpha1);
      get1(*op, kOpPwAlpha2, kTFloat, &alpha2);
      Tensor t[3];
      bool present[3] = {false, false, false};
      const int names[3] = {kOpPwX, kOpPwB, kOpPwY};
      for (int i = 0; i < 3; ++i) {
        Desc* td = desc1(*op, names[i], kTensor);
        if (!td) continue;
        present[i] = true;
        t[i].dims = ints(*td, kTDims);
        t[i].strides = ints(*td, kTStrides);
        int64_t uid = 0, elems = 1, span = 1;
        bool is_virtual = false;
        get1(*td, kTUid, kTInt64, &uid);
        get1(*td, kTVirtual, kTBool, &is_virtual);
        for (size_t k = 0; k < t[i].dims.size(); ++k) {
          elems *= t[i].dims[k];
          span += (t[i].dims[k] - 1) * t[i].strides[k];
        }
        if (is_virtual) {
          auto& v = virtuals[uid];
          v.resize(size_t(span));
          t[i].data = v.data();
        } else {
          auto it = where.find(uid);
          std::byte* b = it == where.end() ? nullptr : at(it->second, size_t(span) * 4);
          if (!b) {
            status = it == where.end() ? kBadParam : kExecutionFailed;  // no pointer / not device memory
            return;
          }
          t[i].data = reinterpret_cast<float*>(b);
        }
      }
      // Y's every element, from X and B at the same index (a dimension of 1 broadcasts).
      const auto& yd = t[2].dims;
      int64_t total = 1;
      for (int64_t n : yd) total *= n;
      std::vector<int64_t> idx(yd.size(), 0);
      for (int64_t e = 0; e < total; ++e) {
        auto offset = [&](const Tensor& s) {
          int64_t o = 0;
          for (size_t k = 0; k < idx.size() && k < s.dims.size(); ++k) o += (s.dims[k] == 1 ? 0 : idx[k]) * s.strides[k];
          return o;
        };
        const float x = alpha1 * t[0].data[offset(t[0])];
        const float b = present[1] ? alpha2 * t[1].data[offset(t[1])] : 0.f;
        t[2].data[offset(t[2])] = apply(mode, x, b);
        for (size_t k = yd.size(); k-- > 0;) {
          if (++idx[k] < yd[k]) break;
          idx[k] = 0;
        }
      }
    }
  });
  l.unlock();
  if (status == kSuccess && !fake_library_work(stream, false)) status = kBadParam;
  return status;
}

int g_cudnn_token;

const std::map<std::string, void*>& table() {
  static const std::map<std::string, void*> t = {
      {"cudnnCreate", reinterpret_cast<void*>(f_create)},
      {"cudnnDestroy", reinterpret_cast<void*>(f_destroy)},
      {"cudnnSetStream", reinterpret_cast<void*>(f_set_stream)},
      {"cudnnGetVersion", reinterpret_cast<void*>(f_version)},
      {"cudnnGetCudartVersion", reinterpret_cast<void*>(f_cudart_version)},
      {"cudnnGetLastErrorString", reinterpret_cast<void*>(f_last_error)},
      {"cudnnBackendCreateDescriptor", reinterpret_cast<void*>(f_create_desc)},
      {"cudnnBackendDestroyDescriptor", reinterpret_cast<void*>(f_destroy_desc)},
      {"cudnnBackendFinalize", reinterpret_cast<void*>(f_finalize)},
      {"cudnnBackendSetAttribute", reinterpret_cast<void*>(f_set)},
      {"cudnnBackendGetAttribute", reinterpret_cast<void*>(f_get)},
      {"cudnnBackendExecute", reinterpret_cast<void*>(f_execute)},
  };
  return t;
}

}  // namespace

void* fake_cudnn_library() { return &g_cudnn_token; }

void* fake_cudnn_symbol(void* library, const char* name) {
  if (library != &g_cudnn_token) return nullptr;
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

uint64_t fake_live_cudnn_objects() {
  std::lock_guard l(g_mu);
  return g_handles.size() + g_descs.size();
}

}  // namespace vmcuda::testing
