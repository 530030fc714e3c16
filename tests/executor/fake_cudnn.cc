// A fake libcudnn.so.9 for the test executor (fake_driver.h): the handle, and enough of the
// backend (graph) API to build and run graphs of pointwise operations on fp32 tensors (ADD, MUL,
// RELU_FWD, IDENTITY; broadcasting by dimensions of 1) or one fp32 2-D convolution forward
// (cross-correlation or convolution, any padding, stride and dilation; Y = alpha * conv + beta * Y),
// computed on the CPU over the fake device memory. Descriptors keep their attributes as set (with their attribute type, checked where the
// fake reads them: CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE); Finalize checks what cuDNN's
// documentation requires of each kind the fake knows; a graph of any other operation finalizes
// no execution plan (CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN), as a library without an engine
// for it answers. Heuristics offer one engine configuration (engine 0).
// The legacy API: tensor descriptors (4-D and N-D, NCHW/NHWC, strides), activation descriptors
// (kept, not applied), cudnnDeriveBNTensorDescriptor and fp32 batch normalization (spatial and
// per-activation; forward training with running averages and saved statistics, inference and
// backward, alpha/beta blending; the Ex forms without fused activation), workspace and reserve
// sizes of 0.
#include <cmath>
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
              kTConvMode = 7, kTHeurMode = 8, kTPointwiseMode = 14, kTDescriptor = 15;
// cudnnBackendDescriptorType_t
constexpr int kPointwise = 0, kConv = 1, kEngine = 2, kEngineCfg = 3, kEngineHeur = 4, kPlan = 5, kOpConvFwd = 10,
              kOpPointwise = 13, kOpGraph = 15, kVariantPack = 16, kTensor = 17;
// cudnnBackendAttributeName_t
constexpr int kPwMode = 0, kPwMathPrec = 1, kConvCompType = 100, kConvMode = 101, kConvDilations = 102,
              kConvStrides = 103, kConvPostPad = 104, kConvPrePad = 105, kConvSpatialDims = 106, kOpConvAlpha = 700,
              kOpConvBeta = 701, kOpConvDesc = 702, kOpConvW = 703, kOpConvX = 704, kOpConvY = 705, kHeurMode = 200, kHeurGraph = 201, kHeurResults = 202, kCfgEngine = 300,
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

bool fp32(const Desc* t) {
  int32_t dt = -1;
  return t && get1(*t, kTDtype, kTDataType, &dt) && dt == 0;
}

// A convolution's geometry (2-D, NCHW by the tensors' strides), read from its finalized parts.
struct ConvShape {
  std::vector<int64_t> x, w, y;  // dims
  int64_t pre[2], post[2], stride[2], dilation[2];
  bool cross = true;  // CUDNN_CROSS_CORRELATION (else CUDNN_CONVOLUTION: the filter flipped)
};
bool conv_shape(const Desc& op, ConvShape* s) {
  Desc* cd = desc1(op, kOpConvDesc, kConv);
  Desc *x = desc1(op, kOpConvX, kTensor), *w = desc1(op, kOpConvW, kTensor), *y = desc1(op, kOpConvY, kTensor);
  if (!cd || !x || !w || !y) return false;
  s->x = ints(*x, kTDims), s->w = ints(*w, kTDims), s->y = ints(*y, kTDims);
  const auto pre = ints(*cd, kConvPrePad), post = ints(*cd, kConvPostPad), st = ints(*cd, kConvStrides),
             dil = ints(*cd, kConvDilations);
  int32_t mode = 1;
  get1(*cd, kConvMode, kTConvMode, &mode);
  s->cross = mode == 1;
  if (s->x.size() != 4 || s->w.size() != 4 || s->y.size() != 4 || pre.size() != 2 || post.size() != 2 ||
      st.size() != 2 || dil.size() != 2)
    return false;
  for (int i = 0; i < 2; ++i) {
    s->pre[i] = pre[i], s->post[i] = post[i], s->stride[i] = st[i], s->dilation[i] = dil[i];
    if (st[i] < 1 || dil[i] < 1 || pre[i] < 0 || post[i] < 0) return false;
    const int64_t extent = s->x[2 + i] + pre[i] + post[i] - dil[i] * (s->w[2 + i] - 1) - 1;
    if (extent < 0 || s->y[2 + i] != extent / st[i] + 1) return false;
  }
  return s->x[0] == s->y[0] && s->x[1] == s->w[1] && s->w[0] == s->y[1];
}

// Whether `g` (an operation graph) is one the fake's engine runs: one fp32 convolution forward,
// or pointwise operations on fp32.
bool runnable(const Desc& g) {
  const auto ops = descs(g, kGraphOps);
  if (ops.size() == 1 && live(ops[0]) && ops[0]->type == kOpConvFwd)
    return fp32(desc1(*ops[0], kOpConvX, kTensor)) && fp32(desc1(*ops[0], kOpConvW, kTensor)) &&
           fp32(desc1(*ops[0], kOpConvY, kTensor));
  for (Desc* op : ops) {
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
    case kConv: {
      int32_t comp, mode;
      int64_t dims;
      if (!get1(d, kConvCompType, kTDataType, &comp) || !get1(d, kConvMode, kTConvMode, &mode) ||
          !get1(d, kConvSpatialDims, kTInt64, &dims))
        return fail(kBadParam, "convolution: compute type, mode and spatial dimensions");
      for (int a : {kConvDilations, kConvStrides, kConvPrePad, kConvPostPad})
        if (int64_t(ints(d, a).size()) != dims) return fail(kBadParam, "convolution: one value per spatial dimension");
      break;
    }
    case kOpConvFwd: {
      ConvShape shape;
      if (!desc1(d, kOpConvDesc, kConv) || !desc1(d, kOpConvX, kTensor) || !desc1(d, kOpConvW, kTensor) ||
          !desc1(d, kOpConvY, kTensor))
        return fail(kBadParam, "convolution forward: descriptor, X, W and Y (finalized)");
      if (!conv_shape(d, &shape)) return fail(kBadParam, "convolution forward: the fake runs 2-D NCHW shapes that agree");
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
        return fail(kGraphPattern, "the fake's engine runs an fp32 convolution forward or fp32 pointwise graphs only");
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

// Y = alpha * conv(X, W) + beta * Y over the fake device memory (the tensors' own strides).
int run_conv(const Desc& op, const std::map<int64_t, uint64_t>& where, const FakeDeviceAt& at) {
  ConvShape s;
  if (!conv_shape(op, &s)) return kBadParam;  // a descriptor the graph names was destroyed
  float alpha = 1, beta = 0;
  get1(op, kOpConvAlpha, kTFloat, &alpha);
  get1(op, kOpConvBeta, kTFloat, &beta);
  float* data[3];
  std::vector<int64_t> strides[3];
  const int names[3] = {kOpConvX, kOpConvW, kOpConvY};
  for (int i = 0; i < 3; ++i) {
    const Desc* td = desc1(op, names[i], kTensor);
    const auto dims = ints(*td, kTDims);
    strides[i] = ints(*td, kTStrides);
    int64_t uid = 0, span = 1;
    get1(*td, kTUid, kTInt64, &uid);
    for (size_t k = 0; k < dims.size(); ++k) span += (dims[k] - 1) * strides[i][k];
    auto it = where.find(uid);
    std::byte* b = it == where.end() ? nullptr : at(it->second, size_t(span) * 4);
    if (!b) return it == where.end() ? kBadParam : kExecutionFailed;  // no pointer / not device memory
    data[i] = reinterpret_cast<float*>(b);
  }
  auto at4 = [&](int t, int64_t a, int64_t b, int64_t c, int64_t d) -> float& {
    const auto& st = strides[t];
    return data[t][a * st[0] + b * st[1] + c * st[2] + d * st[3]];
  };
  const int64_t N = s.x[0], C = s.x[1], H = s.x[2], W = s.x[3], K = s.w[0], R = s.w[2], S = s.w[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t p = 0; p < s.y[2]; ++p)
        for (int64_t q = 0; q < s.y[3]; ++q) {
          float sum = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t t = 0; t < S; ++t) {
                const int64_t h = p * s.stride[0] - s.pre[0] + r * s.dilation[0];
                const int64_t w = q * s.stride[1] - s.pre[1] + t * s.dilation[1];
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                const float f = s.cross ? at4(1, k, c, r, t) : at4(1, k, c, R - 1 - r, S - 1 - t);
                sum += at4(0, n, c, h, w) * f;
              }
          float& y = at4(2, n, k, p, q);
          y = alpha * sum + (beta != 0 ? beta * y : 0.f);
        }
  return kSuccess;
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
  const auto ops = descs(graph, kGraphOps);
  if (ops.size() == 1 && live(ops[0]) && ops[0]->type == kOpConvFwd) {
    fake_device_access([&](const FakeDeviceAt& at) { status = run_conv(*ops[0], where, at); });
    l.unlock();
    if (status == kSuccess && !fake_library_work(stream, false)) status = kBadParam;
    return status;
  }
  fake_device_access([&](const FakeDeviceAt& at) {
    for (Desc* op : ops) {
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

// ---- the legacy API

struct TensorDesc {
  int dtype = -1;  // -1: not set
  int nb = 0;
  int dims[8] = {}, strides[8] = {};
};
struct ActivationDesc {
  int mode = 0, nan = 0;
  double coef = 0;
};
std::set<TensorDesc*> g_tensors;
std::set<ActivationDesc*> g_activations;
constexpr int kDataFloat = 0, kDataDouble = 1, kNchw = 0, kNhwc = 1, kPerActivation = 0;

TensorDesc* tensor_desc(void* p) {
  auto* t = static_cast<TensorDesc*>(p);
  return g_tensors.count(t) ? t : nullptr;
}
int data_bytes(int dtype) { return dtype == kDataDouble ? 8 : dtype == kDataFloat ? 4 : 2; }

int f_create_tensor(void** out) {
  if (!out) return kBadParam;
  std::lock_guard l(g_mu);
  auto* t = new TensorDesc;
  g_tensors.insert(t);
  *out = t;
  return kSuccess;
}
int f_destroy_tensor(void* p) {
  std::lock_guard l(g_mu);
  if (!p) return kSuccess;
  if (!g_tensors.erase(static_cast<TensorDesc*>(p))) return kBadParam;
  delete static_cast<TensorDesc*>(p);
  return kSuccess;
}
int set_nd_locked(TensorDesc* t, int dtype, int nb, const int* dims, const int* strides) {
  if (!t || nb < 1 || nb > 8 || !dims || !strides || dtype < 0 || dtype > 20) return kBadParam;
  for (int i = 0; i < nb; ++i)
    if (dims[i] <= 0 || strides[i] <= 0) return fail(kBadParam, "dimensions and strides must be positive");
  t->dtype = dtype;
  t->nb = nb;
  std::memcpy(t->dims, dims, 4 * size_t(nb));
  std::memcpy(t->strides, strides, 4 * size_t(nb));
  return kSuccess;
}
// Packed strides of `dims` in `format` (NHWC: the channel dimension innermost).
void packed(int format, int nb, const int* dims, int* strides) {
  if (format == kNhwc && nb >= 3) {
    int s = 1;
    strides[1] = s, s *= dims[1];
    for (int i = nb - 1; i >= 2; --i) strides[i] = s, s *= dims[i];
    strides[0] = s;
    return;
  }
  int s = 1;
  for (int i = nb - 1; i >= 0; --i) strides[i] = s, s *= dims[i];
}
int f_set_4d(void* p, int format, int dtype, int n, int c, int h, int w) {
  std::lock_guard l(g_mu);
  if (format != kNchw && format != kNhwc) return kBadParam;
  const int dims[4] = {n, c, h, w};
  int strides[4];
  packed(format, 4, dims, strides);
  return set_nd_locked(tensor_desc(p), dtype, 4, dims, strides);
}
int f_set_4d_ex(void* p, int dtype, int n, int c, int h, int w, int ns, int cs, int hs, int ws) {
  std::lock_guard l(g_mu);
  const int dims[4] = {n, c, h, w}, strides[4] = {ns, cs, hs, ws};
  return set_nd_locked(tensor_desc(p), dtype, 4, dims, strides);
}
int f_set_nd(void* p, int dtype, int nb, void* dims, void* strides) {
  std::lock_guard l(g_mu);
  return set_nd_locked(tensor_desc(p), dtype, nb, static_cast<int*>(dims), static_cast<int*>(strides));
}
int f_set_nd_ex(void* p, int format, int dtype, int nb, void* dims) {
  std::lock_guard l(g_mu);
  if ((format != kNchw && format != kNhwc) || nb < 1 || nb > 8 || !dims) return kBadParam;
  int strides[8];
  packed(format, nb, static_cast<int*>(dims), strides);
  return set_nd_locked(tensor_desc(p), dtype, nb, static_cast<int*>(dims), strides);
}
int f_get_4d(void* p, void* dt, void* n, void* c, void* h, void* w, void* ns, void* cs, void* hs, void* ws) {
  std::lock_guard l(g_mu);
  TensorDesc* t = tensor_desc(p);
  if (!t || t->nb != 4) return kBadParam;
  void* out[10] = {dt, n, c, h, w, ns, cs, hs, ws};
  const int v[9] = {t->dtype, t->dims[0], t->dims[1], t->dims[2], t->dims[3],
                    t->strides[0], t->strides[1], t->strides[2], t->strides[3]};
  for (int i = 0; i < 9; ++i)
    if (out[i]) std::memcpy(out[i], &v[i], 4);
  return kSuccess;
}
int f_get_nd(void* p, int requested, void* dt, void* nb, void* dims, void* strides) {
  std::lock_guard l(g_mu);
  TensorDesc* t = tensor_desc(p);
  if (!t || requested < 0 || !dt || !nb) return kBadParam;
  std::memcpy(dt, &t->dtype, 4);
  std::memcpy(nb, &t->nb, 4);
  const int n = std::min(requested, t->nb);
  if (dims) std::memcpy(dims, t->dims, 4 * size_t(n));
  if (strides) std::memcpy(strides, t->strides, 4 * size_t(n));
  return kSuccess;
}
int64_t span_of(const TensorDesc& t) {
  int64_t span = 1;
  for (int i = 0; i < t.nb; ++i) span += int64_t(t.dims[i] - 1) * t.strides[i];
  return span;
}
int f_size(void* p, void* size) {
  std::lock_guard l(g_mu);
  TensorDesc* t = tensor_desc(p);
  if (!t || !size || t->dtype < 0) return kBadParam;
  const size_t bytes = size_t(span_of(*t)) * size_t(data_bytes(t->dtype));
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}
int f_derive_bn(void* derived, void* x, int mode) {
  std::lock_guard l(g_mu);
  TensorDesc *d = tensor_desc(derived), *t = tensor_desc(x);
  if (!d || !t || t->dtype < 0 || t->nb < 4 || mode < 0 || mode > 2) return kBadParam;
  int dims[8];
  for (int i = 0; i < t->nb; ++i) dims[i] = i == 1 || (mode == kPerActivation && i > 1) ? t->dims[i] : 1;
  int strides[8];
  packed(kNchw, t->nb, dims, strides);
  return set_nd_locked(d, t->dtype == kDataDouble ? kDataDouble : kDataFloat, t->nb, dims, strides);
}
int f_create_activation(void** out) {
  if (!out) return kBadParam;
  std::lock_guard l(g_mu);
  auto* a = new ActivationDesc;
  g_activations.insert(a);
  *out = a;
  return kSuccess;
}
int f_set_activation(void* p, int mode, int nan, double coef) {
  std::lock_guard l(g_mu);
  auto* a = static_cast<ActivationDesc*>(p);
  if (!g_activations.count(a) || mode < 0 || mode > 6) return kBadParam;
  a->mode = mode, a->nan = nan, a->coef = coef;
  return kSuccess;
}
int f_destroy_activation(void* p) {
  std::lock_guard l(g_mu);
  if (!p) return kSuccess;
  if (!g_activations.erase(static_cast<ActivationDesc*>(p))) return kBadParam;
  delete static_cast<ActivationDesc*>(p);
  return kSuccess;
}
int f_zero_size(void* size) {
  if (!size) return kBadParam;
  std::memset(size, 0, 8);
  return kSuccess;
}
int f_fwd_ws(void*, int, int, void*, void*, void*, void*, void*, void* size) { return f_zero_size(size); }
int f_bwd_ws(void*, int, int, void*, void*, void*, void*, void*, void*, void*, void* size) { return f_zero_size(size); }
int f_reserve(void*, int, int, void*, void*, void* size) { return f_zero_size(size); }

// One batch normalization's tensors over the fake device memory: fp32 only, x's shape (N, C,
// spatial...) and the per-channel (or per-activation) parameter tensor's.
struct BnCall {
  const TensorDesc *x = nullptr, *p = nullptr;
  int mode = 1;
  int64_t groups = 0, per_group = 0;  // parameters, and elements each normalizes over
  std::vector<int64_t> offsets;        // x's element offsets, group by group
};
// The element offsets of `t` in index order (its own strides).
std::vector<int64_t> offsets_of(const TensorDesc& t) {
  int64_t total = 1;
  for (int i = 0; i < t.nb; ++i) total *= t.dims[i];
  std::vector<int64_t> out(static_cast<size_t>(total));
  std::vector<int> idx(size_t(t.nb), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t o = 0;
    for (int k = 0; k < t.nb; ++k) o += int64_t(idx[k]) * t.strides[k];
    out[size_t(e)] = o;
    for (int k = t.nb; k-- > 0;) {
      if (++idx[k] < t.dims[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}
int bn_setup(void* xd, void* pd, int mode, BnCall* c) {
  c->x = tensor_desc(xd), c->p = tensor_desc(pd), c->mode = mode;
  if (!c->x || !c->p || c->x->nb < 4 || c->p->nb != c->x->nb || mode < 0 || mode > 2) return kBadParam;
  if (c->x->dtype != kDataFloat || c->p->dtype != kDataFloat) return fail(kNotSupported, "the fake normalizes fp32");
  const TensorDesc& x = *c->x;
  int64_t inner = 1;
  for (int i = 2; i < x.nb; ++i) inner *= x.dims[i];
  c->groups = mode == kPerActivation ? x.dims[1] * inner : x.dims[1];
  c->per_group = mode == kPerActivation ? x.dims[0] : x.dims[0] * inner;
  for (int i = 0; i < x.nb; ++i) {
    const int want = i == 1 || (mode == kPerActivation && i > 1) ? x.dims[i] : 1;
    if (c->p->dims[i] != want) return fail(kBadParam, "the parameter tensor's shape does not match the mode");
  }
  // x's offsets, grouped: n-major order regrouped by channel (and position, per activation).
  const auto all = offsets_of(x);
  c->offsets.resize(all.size());
  const int64_t n_stride_count = x.dims[1] * inner;  // elements per sample in index order
  for (int64_t e = 0; e < int64_t(all.size()); ++e) {
    const int64_t n = e / n_stride_count, rest = e % n_stride_count, ch = rest / inner, pos = rest % inner;
    const int64_t g = mode == kPerActivation ? rest : ch;
    const int64_t k = mode == kPerActivation ? n : n * inner + pos;
    c->offsets[size_t(g * c->per_group + k)] = all[size_t(e)];
  }
  return kSuccess;
}
float* fptr(const FakeDeviceAt& at, void* p, int64_t elems) {
  return p ? reinterpret_cast<float*>(at(reinterpret_cast<uint64_t>(p), size_t(elems) * 4)) : nullptr;
}
float scalar(const void* p) {
  float v = 0;
  if (p) std::memcpy(&v, p, 4);
  return v;
}
// Runs `body` with the fake device memory, then as a kernel on the handle's stream.
template <class F>
int bn_run(void* handle, F body) {
  std::unique_lock l(g_mu);
  if (!g_handles.count(static_cast<Handle*>(handle))) return kBadParam;
  void* stream = static_cast<Handle*>(handle)->stream;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) { status = body(at); });
  l.unlock();
  if (status == kSuccess && !fake_library_work(stream, false)) status = kBadParam;
  return status;
}

int bn_forward_training(void* handle, int mode, void* alpha, void* beta, void* xd, void* x, void* yd, void* y,
                        void* pd, void* scale, void* bias, double factor, void* run_mean, void* run_var, double eps,
                        void* save_mean, void* save_inv) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    BnCall c;
    if (int s = bn_setup(xd, pd, mode, &c)) return s;
    TensorDesc* ydesc = tensor_desc(yd);
    if (!ydesc || ydesc->nb != c.x->nb || eps < 0) return kBadParam;
    const int64_t span = span_of(*c.x);
    float *px = fptr(at, x, span), *py = fptr(at, y, span), *ps = fptr(at, scale, c.groups),
          *pb = fptr(at, bias, c.groups), *rm = fptr(at, run_mean, c.groups), *rv = fptr(at, run_var, c.groups),
          *sm = fptr(at, save_mean, c.groups), *si = fptr(at, save_inv, c.groups);
    if (!px || !py || !ps || !pb || (run_mean && !rm) || (run_var && !rv) || (save_mean && !sm) || (save_inv && !si))
      return kExecutionFailed;
    const float a = scalar(alpha), b = scalar(beta);
    const int64_t m = c.per_group;
    for (int64_t g = 0; g < c.groups; ++g) {
      const int64_t* off = &c.offsets[size_t(g * m)];
      double mean = 0, var = 0;
      for (int64_t k = 0; k < m; ++k) mean += px[off[k]];
      mean /= double(m);
      for (int64_t k = 0; k < m; ++k) var += (px[off[k]] - mean) * (px[off[k]] - mean);
      var /= double(m);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t k = 0; k < m; ++k) {
        const float v = float(ps[g] * (px[off[k]] - mean) * inv + pb[g]);
        py[off[k]] = a * v + (b != 0 ? b * py[off[k]] : 0.f);  // y and x share the layout here
      }
      // cuDNN keeps the unbiased variance in the running average.
      if (rm) rm[g] = float(factor * mean + (1 - factor) * rm[g]);
      if (rv) rv[g] = float(factor * (m > 1 ? var * double(m) / double(m - 1) : var) + (1 - factor) * rv[g]);
      if (sm) sm[g] = float(mean);
      if (si) si[g] = float(inv);
    }
    return kSuccess;
  });
}
int f_bn_fwd_training(void* handle, int mode, void* alpha, void* beta, void* xd, void* x, void* yd, void* y, void* pd,
                      void* scale, void* bias, double factor, void* run_mean, void* run_var, double eps,
                      void* save_mean, void* save_inv) {
  return bn_forward_training(handle, mode, alpha, beta, xd, x, yd, y, pd, scale, bias, factor, run_mean, run_var, eps,
                             save_mean, save_inv);
}
int f_bn_fwd_training_ex(void* handle, int mode, int ops, void* alpha, void* beta, void* xd, void* x, void*, void*,
                         void* yd, void* y, void* pd, void* scale, void* bias, double factor, void* run_mean,
                         void* run_var, double eps, void* save_mean, void* save_inv, void*, void*, size_t, void*,
                         size_t) {
  if (ops != 0) return fail(kNotSupported, "the fake normalizes without a fused activation");
  return bn_forward_training(handle, mode, alpha, beta, xd, x, yd, y, pd, scale, bias, factor, run_mean, run_var, eps,
                             save_mean, save_inv);
}
int f_bn_fwd_inference(void* handle, int mode, void* alpha, void* beta, void* xd, void* x, void* yd, void* y, void* pd,
                       void* scale, void* bias, void* est_mean, void* est_var, double eps) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    BnCall c;
    if (int s = bn_setup(xd, pd, mode, &c)) return s;
    if (!tensor_desc(yd)) return kBadParam;
    const int64_t span = span_of(*c.x);
    float *px = fptr(at, x, span), *py = fptr(at, y, span), *ps = fptr(at, scale, c.groups),
          *pb = fptr(at, bias, c.groups), *em = fptr(at, est_mean, c.groups), *ev = fptr(at, est_var, c.groups);
    if (!px || !py || !ps || !pb || !em || !ev) return kExecutionFailed;
    const float a = scalar(alpha), b = scalar(beta);
    for (int64_t g = 0; g < c.groups; ++g) {
      const double inv = 1.0 / std::sqrt(double(ev[g]) + eps);
      for (int64_t k = 0; k < c.per_group; ++k) {
        const int64_t o = c.offsets[size_t(g * c.per_group + k)];
        const float v = float(ps[g] * (px[o] - em[g]) * inv + pb[g]);
        py[o] = a * v + (b != 0 ? b * py[o] : 0.f);
      }
    }
    return kSuccess;
  });
}
int bn_backward(void* handle, int mode, void* ad, void* bd, void* ap, void* bp, void* xd, void* x, void* dy, void* dx,
                void* pd, void* scale, void* dscale, void* dbias, double eps, void* saved_mean, void* saved_inv) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    BnCall c;
    if (int s = bn_setup(xd, pd, mode, &c)) return s;
    const int64_t span = span_of(*c.x);
    float *px = fptr(at, x, span), *pdy = fptr(at, dy, span), *pdx = fptr(at, dx, span),
          *ps = fptr(at, scale, c.groups), *pds = fptr(at, dscale, c.groups), *pdb = fptr(at, dbias, c.groups),
          *sm = fptr(at, saved_mean, c.groups), *si = fptr(at, saved_inv, c.groups);
    if (!px || !pdy || !pdx || !ps || !pds || !pdb || (saved_mean && !sm) || (saved_inv && !si)) return kExecutionFailed;
    const float a_d = scalar(ad), b_d = scalar(bd), a_p = scalar(ap), b_p = scalar(bp);
    const int64_t m = c.per_group;
    for (int64_t g = 0; g < c.groups; ++g) {
      const int64_t* off = &c.offsets[size_t(g * m)];
      double mean = 0, inv = 0;
      if (sm && si) {
        mean = sm[g], inv = si[g];
      } else {
        double var = 0;
        for (int64_t k = 0; k < m; ++k) mean += px[off[k]];
        mean /= double(m);
        for (int64_t k = 0; k < m; ++k) var += (px[off[k]] - mean) * (px[off[k]] - mean);
        inv = 1.0 / std::sqrt(var / double(m) + eps);
      }
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t k = 0; k < m; ++k) {
        sum_dy += pdy[off[k]];
        sum_dy_xhat += pdy[off[k]] * (px[off[k]] - mean) * inv;
      }
      for (int64_t k = 0; k < m; ++k) {
        const double xhat = (px[off[k]] - mean) * inv;
        const float v = float(ps[g] * inv / double(m) * (double(m) * pdy[off[k]] - sum_dy - xhat * sum_dy_xhat));
        pdx[off[k]] = a_d * v + (b_d != 0 ? b_d * pdx[off[k]] : 0.f);
      }
      pds[g] = a_p * float(sum_dy_xhat) + (b_p != 0 ? b_p * pds[g] : 0.f);
      pdb[g] = a_p * float(sum_dy) + (b_p != 0 ? b_p * pdb[g] : 0.f);
    }
    return kSuccess;
  });
}
int f_bn_backward(void* handle, int mode, void* ad, void* bd, void* ap, void* bp, void* xd, void* x, void*, void* dy,
                  void*, void* dx, void* pd, void* scale, void* dscale, void* dbias, double eps, void* saved_mean,
                  void* saved_inv) {
  return bn_backward(handle, mode, ad, bd, ap, bp, xd, x, dy, dx, pd, scale, dscale, dbias, eps, saved_mean, saved_inv);
}
int f_bn_backward_ex(void* handle, int mode, int ops, void* ad, void* bd, void* ap, void* bp, void* xd, void* x, void*,
                     void*, void*, void* dy, void*, void*, void*, void* dx, void* pd, void* scale, void*, void* dscale,
                     void* dbias, double eps, void* saved_mean, void* saved_inv, void*, void*, size_t, void*, size_t) {
  if (ops != 0) return fail(kNotSupported, "the fake normalizes without a fused activation");
  return bn_backward(handle, mode, ad, bd, ap, bp, xd, x, dy, dx, pd, scale, dscale, dbias, eps, saved_mean, saved_inv);
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
      {"cudnnCreateTensorDescriptor", reinterpret_cast<void*>(f_create_tensor)},
      {"cudnnSetTensor4dDescriptor", reinterpret_cast<void*>(f_set_4d)},
      {"cudnnSetTensor4dDescriptorEx", reinterpret_cast<void*>(f_set_4d_ex)},
      {"cudnnSetTensorNdDescriptor", reinterpret_cast<void*>(f_set_nd)},
      {"cudnnSetTensorNdDescriptorEx", reinterpret_cast<void*>(f_set_nd_ex)},
      {"cudnnGetTensor4dDescriptor", reinterpret_cast<void*>(f_get_4d)},
      {"cudnnGetTensorNdDescriptor", reinterpret_cast<void*>(f_get_nd)},
      {"cudnnGetTensorSizeInBytes", reinterpret_cast<void*>(f_size)},
      {"cudnnDestroyTensorDescriptor", reinterpret_cast<void*>(f_destroy_tensor)},
      {"cudnnDeriveBNTensorDescriptor", reinterpret_cast<void*>(f_derive_bn)},
      {"cudnnCreateActivationDescriptor", reinterpret_cast<void*>(f_create_activation)},
      {"cudnnSetActivationDescriptor", reinterpret_cast<void*>(f_set_activation)},
      {"cudnnDestroyActivationDescriptor", reinterpret_cast<void*>(f_destroy_activation)},
      {"cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize", reinterpret_cast<void*>(f_fwd_ws)},
      {"cudnnGetBatchNormalizationBackwardExWorkspaceSize", reinterpret_cast<void*>(f_bwd_ws)},
      {"cudnnGetBatchNormalizationTrainingExReserveSpaceSize", reinterpret_cast<void*>(f_reserve)},
      {"cudnnBatchNormalizationForwardTraining", reinterpret_cast<void*>(f_bn_fwd_training)},
      {"cudnnBatchNormalizationForwardTrainingEx", reinterpret_cast<void*>(f_bn_fwd_training_ex)},
      {"cudnnBatchNormalizationForwardInference", reinterpret_cast<void*>(f_bn_fwd_inference)},
      {"cudnnBatchNormalizationBackward", reinterpret_cast<void*>(f_bn_backward)},
      {"cudnnBatchNormalizationBackwardEx", reinterpret_cast<void*>(f_bn_backward_ex)},
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
  return g_handles.size() + g_descs.size() + g_tensors.size() + g_activations.size();
}

}  // namespace vmcuda::testing
