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
// sizes of 0; filter, convolution, pooling and dropout descriptors and their fp32 2-D NCHW
// routines (convolution forward, fused bias and activation, backward data, filter and bias, with
// groups; algorithm searches offering algorithms 0 and 1, 1 asking for a workspace; cudnnAddTensor;
// max and average pooling forward and backward; softmax forward and backward; dropout whose
// generator position is a counter in its states, in the client's memory); LRN, op-tensor and
// reduce-tensor descriptors and their fp32 routines (LRN across channels and divisive
// normalization forward and backward on 4-D NCHW, cudnnOpTensor's six operations with B
// broadcast, cudnnReduceTensor's nine with 32-bit flattened indices and a workspace of one float
// per output), cudnnSetTensor, ScaleTensor and TransformTensor; spatial transformer and CTC loss
// descriptors with the affine grid generator and bilinear sampler forward and backward (NCHW
// fp32) and CTC loss's costs and gradients (softmax normalization, alpha-beta in log space) on
// host or device arrays; RNN and RNN data descriptors and fp32 unidirectional RNN/LSTM/GRU
// forward and backward (see "recurrent networks" below).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
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

// ---- the legacy convolution path: filters, convolutions, pooling, softmax, dropout (fp32,
// 2-D NCHW; computed on the CPU over the fake device memory as batch normalization is)

struct FilterDesc {
  int dtype = -1, format = kNchw, nb = 0;
  int dims[8] = {};
};
struct ConvDesc {
  int nb = 0;  // spatial dimensions (0: not set)
  int pad[8] = {}, stride[8] = {}, dil[8] = {};
  int mode = 1, ctype = 0, math = 0, groups = 1, reorder = 0;
};
struct PoolDesc {
  int mode = 0, nan = 0, nb = 0;
  int win[8] = {}, pad[8] = {}, stride[8] = {};
};
struct DropoutDesc {
  float p = 0;
  uint64_t states = 0, bytes = 0, seed = 0;
  bool set = false;
};
std::set<FilterDesc*> g_filters;
std::set<ConvDesc*> g_convs;
std::set<PoolDesc*> g_pools;
std::set<DropoutDesc*> g_dropouts;
constexpr int kConvolution = 0, kCrossCorrelation = 1;
constexpr int kFwdAlgos = 8, kBwdDataAlgos = 6, kBwdFilterAlgos = 7;
constexpr size_t kDropoutStateBytes = 256;  // the fake's generator: a counter in the states

template <class T>
T* live_in(std::set<T*>& s, void* p) {
  return s.count(static_cast<T*>(p)) ? static_cast<T*>(p) : nullptr;
}
template <class T>
int create_in(std::set<T*>& s, void** out) {
  if (!out) return kBadParam;
  std::lock_guard l(g_mu);
  auto* t = new T;
  s.insert(t);
  *out = t;
  return kSuccess;
}
template <class T>
int destroy_in(std::set<T*>& s, void* p) {
  std::lock_guard l(g_mu);
  if (!p) return kSuccess;
  if (!s.erase(static_cast<T*>(p))) return kBadParam;
  delete static_cast<T*>(p);
  return kSuccess;
}
void put(void* out, int v) {
  if (out) std::memcpy(out, &v, 4);
}

int f_create_filter(void** out) { return create_in(g_filters, out); }
int f_destroy_filter(void* p) { return destroy_in(g_filters, p); }
int set_filter_locked(FilterDesc* f, int dtype, int format, int nb, const int* dims) {
  if (!f || nb < 3 || nb > 8 || !dims || dtype < 0 || dtype > 20 || (format != kNchw && format != kNhwc)) return kBadParam;
  for (int i = 0; i < nb; ++i)
    if (dims[i] <= 0) return fail(kBadParam, "filter dimensions must be positive");
  f->dtype = dtype, f->format = format, f->nb = nb;
  std::memcpy(f->dims, dims, 4 * size_t(nb));
  return kSuccess;
}
int f_set_filter_4d(void* p, int dtype, int format, int k, int c, int h, int w) {
  std::lock_guard l(g_mu);
  const int dims[4] = {k, c, h, w};
  return set_filter_locked(live_in(g_filters, p), dtype, format, 4, dims);
}
int f_set_filter_nd(void* p, int dtype, int format, int nb, void* dims) {
  std::lock_guard l(g_mu);
  return set_filter_locked(live_in(g_filters, p), dtype, format, nb, static_cast<int*>(dims));
}
int f_get_filter_4d(void* p, void* dt, void* fmt, void* k, void* c, void* h, void* w) {
  std::lock_guard l(g_mu);
  FilterDesc* f = live_in(g_filters, p);
  if (!f || f->nb != 4) return kBadParam;
  put(dt, f->dtype), put(fmt, f->format), put(k, f->dims[0]), put(c, f->dims[1]), put(h, f->dims[2]), put(w, f->dims[3]);
  return kSuccess;
}
int f_get_filter_nd(void* p, int requested, void* dt, void* fmt, void* nb, void* dims) {
  std::lock_guard l(g_mu);
  FilterDesc* f = live_in(g_filters, p);
  if (!f || requested < 0 || f->nb == 0) return kBadParam;
  put(dt, f->dtype), put(fmt, f->format), put(nb, f->nb);
  if (dims) std::memcpy(dims, f->dims, 4 * size_t(std::min(requested, f->nb)));
  return kSuccess;
}
int64_t filter_elems(const FilterDesc& f) {
  int64_t n = 1;
  for (int i = 0; i < f.nb; ++i) n *= f.dims[i];
  return n;
}
int f_filter_size(void* p, void* size) {
  std::lock_guard l(g_mu);
  FilterDesc* f = live_in(g_filters, p);
  if (!f || !size || f->dtype < 0) return kBadParam;
  const size_t bytes = size_t(filter_elems(*f)) * size_t(data_bytes(f->dtype));
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}

int f_create_conv(void** out) { return create_in(g_convs, out); }
int f_destroy_conv(void* p) { return destroy_in(g_convs, p); }
int set_conv_locked(ConvDesc* c, int nb, const int* pad, const int* stride, const int* dil, int mode, int ctype) {
  if (!c || nb < 1 || nb > 6 || !pad || !stride || !dil || (mode != kConvolution && mode != kCrossCorrelation))
    return kBadParam;
  for (int i = 0; i < nb; ++i)
    if (pad[i] < 0 || stride[i] <= 0 || dil[i] <= 0) return fail(kBadParam, "padding, strides and dilations");
  c->nb = nb, c->mode = mode, c->ctype = ctype;
  std::memcpy(c->pad, pad, 4 * size_t(nb));
  std::memcpy(c->stride, stride, 4 * size_t(nb));
  std::memcpy(c->dil, dil, 4 * size_t(nb));
  return kSuccess;
}
int f_set_conv_2d(void* p, int ph, int pw, int u, int v, int dh, int dw, int mode, int ctype) {
  std::lock_guard l(g_mu);
  const int pad[2] = {ph, pw}, st[2] = {u, v}, dil[2] = {dh, dw};
  return set_conv_locked(live_in(g_convs, p), 2, pad, st, dil, mode, ctype);
}
int f_set_conv_nd(void* p, int n, void* pad, void* st, void* dil, int mode, int ctype) {
  std::lock_guard l(g_mu);
  return set_conv_locked(live_in(g_convs, p), n, static_cast<int*>(pad), static_cast<int*>(st),
                         static_cast<int*>(dil), mode, ctype);
}
int f_conv_math(void* p, int math) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || math < 0 || math > 3) return kBadParam;
  c->math = math;
  return kSuccess;
}
int f_conv_groups(void* p, int groups) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || groups < 1) return kBadParam;
  c->groups = groups;
  return kSuccess;
}
int f_conv_reorder(void* p, int reorder) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || reorder < 0 || reorder > 1) return kBadParam;
  c->reorder = reorder;
  return kSuccess;
}
int f_get_conv_2d(void* p, void* ph, void* pw, void* u, void* v, void* dh, void* dw, void* mode, void* ctype) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || c->nb != 2) return kBadParam;
  put(ph, c->pad[0]), put(pw, c->pad[1]), put(u, c->stride[0]), put(v, c->stride[1]), put(dh, c->dil[0]);
  put(dw, c->dil[1]), put(mode, c->mode), put(ctype, c->ctype);
  return kSuccess;
}
int f_get_conv_nd(void* p, int requested, void* n, void* pad, void* st, void* dil, void* mode, void* ctype) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || requested < 0 || c->nb == 0) return kBadParam;
  const size_t k = 4 * size_t(std::min(requested, c->nb));
  put(n, c->nb), put(mode, c->mode), put(ctype, c->ctype);
  if (pad) std::memcpy(pad, c->pad, k);
  if (st) std::memcpy(st, c->stride, k);
  if (dil) std::memcpy(dil, c->dil, k);
  return kSuccess;
}
int f_get_conv_math(void* p, void* math) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || !math) return kBadParam;
  put(math, c->math);
  return kSuccess;
}
int f_get_conv_groups(void* p, void* groups) {
  std::lock_guard l(g_mu);
  ConvDesc* c = live_in(g_convs, p);
  if (!c || !groups) return kBadParam;
  put(groups, c->groups);
  return kSuccess;
}

// A 2-D convolution's operands, checked against each other (cuDNN's rules for the shapes).
struct Conv {
  const TensorDesc *x = nullptr, *y = nullptr;
  const FilterDesc* w = nullptr;
  const ConvDesc* c = nullptr;
  int N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, P = 0, Q = 0, G = 1;
  float wv(const float* w, int k, int c, int r, int s) const {
    if (this->c->mode == kConvolution) r = R - 1 - r, s = S - 1 - s;
    const int cg = C / G;
    return this->w->format == kNhwc ? w[((int64_t(k) * R + r) * S + s) * cg + c] : w[((int64_t(k) * cg + c) * R + r) * S + s];
  }
};
int out_dim(int in, int pad, int k, int dil, int stride) { return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1; }
// x, w and c give y's shape; y (when given) must have it.
int conv_setup(void* xd, void* wd, void* cd, void* yd, Conv* v) {
  v->x = tensor_desc(xd), v->w = live_in(g_filters, wd), v->c = live_in(g_convs, cd);
  v->y = yd ? tensor_desc(yd) : nullptr;
  if (!v->x || !v->w || !v->c || (yd && !v->y)) return kBadParam;
  if (v->x->nb != 4 || v->w->nb != 4 || v->c->nb != 2) return fail(kNotSupported, "the fake convolves 2-D NCHW");
  v->N = v->x->dims[0], v->C = v->x->dims[1], v->H = v->x->dims[2], v->W = v->x->dims[3];
  v->K = v->w->dims[0], v->R = v->w->dims[2], v->S = v->w->dims[3], v->G = v->c->groups;
  if (v->C % v->G || v->K % v->G || v->w->dims[1] != v->C / v->G)
    return fail(kBadParam, "the filter's channels do not match the input's (and the group count)");
  v->P = out_dim(v->H, v->c->pad[0], v->R, v->c->dil[0], v->c->stride[0]);
  v->Q = out_dim(v->W, v->c->pad[1], v->S, v->c->dil[1], v->c->stride[1]);
  if (v->P <= 0 || v->Q <= 0) return fail(kBadParam, "the filter is larger than the padded input");
  if (v->y && (v->y->nb != 4 || v->y->dims[0] != v->N || v->y->dims[1] != v->K || v->y->dims[2] != v->P ||
               v->y->dims[3] != v->Q))
    return fail(kBadParam, "the output tensor's shape is not the convolution's");
  return kSuccess;
}
int64_t off4(const TensorDesc& t, int64_t n, int64_t c, int64_t h, int64_t w) {
  return n * t.strides[0] + c * t.strides[1] + h * t.strides[2] + w * t.strides[3];
}
bool fp32_conv(const Conv& v) {
  return v.x->dtype == kDataFloat && v.w->dtype == kDataFloat && (!v.y || v.y->dtype == kDataFloat);
}
// Every (n, k, p, q) x (c, r, s) term of the convolution whose input position lies inside x.
template <class F>
void each_term(const Conv& v, F f) {
  const int cg = v.C / v.G, kg = v.K / v.G;
  for (int n = 0; n < v.N; ++n)
    for (int k = 0; k < v.K; ++k)
      for (int p = 0; p < v.P; ++p)
        for (int q = 0; q < v.Q; ++q)
          for (int c = 0; c < cg; ++c)
            for (int r = 0; r < v.R; ++r)
              for (int s = 0; s < v.S; ++s) {
                const int h = p * v.c->stride[0] - v.c->pad[0] + r * v.c->dil[0];
                const int w = q * v.c->stride[1] - v.c->pad[1] + s * v.c->dil[1];
                if (h < 0 || h >= v.H || w < 0 || w >= v.W) continue;
                f(n, k, p, q, (k / kg) * cg + c, c, r, s, h, w);
              }
}
int64_t filter_span(const Conv& v) { return filter_elems(*v.w); }

int f_out_dim_2d(void* cd, void* xd, void* wd, void* n, void* c, void* h, void* w) {
  std::lock_guard l(g_mu);
  Conv v;
  if (int s = conv_setup(xd, wd, cd, nullptr, &v)) return s;
  put(n, v.N), put(c, v.K), put(h, v.P), put(w, v.Q);
  return kSuccess;
}
int f_out_dim_nd(void* cd, void* xd, void* wd, int nb, void* dims) {
  std::lock_guard l(g_mu);
  Conv v;
  if (int s = conv_setup(xd, wd, cd, nullptr, &v)) return s;
  if (nb != 4 || !dims) return kBadParam;
  const int d[4] = {v.N, v.K, v.P, v.Q};
  std::memcpy(dims, d, sizeof d);
  return kSuccess;
}
int f_max_fwd(void* h, void* count) { return g_handles.count(static_cast<Handle*>(h)) ? (put(count, kFwdAlgos), kSuccess) : kBadParam; }
int f_max_bwd_data(void* h, void* count) {
  return g_handles.count(static_cast<Handle*>(h)) ? (put(count, kBwdDataAlgos), kSuccess) : kBadParam;
}
int f_max_bwd_filter(void* h, void* count) {
  return g_handles.count(static_cast<Handle*>(h)) ? (put(count, kBwdFilterAlgos), kSuccess) : kBadParam;
}
// An algorithm search's results (cudnnConvolution*AlgoPerf_t, 48 bytes): the fake's two
// algorithms, 0 then 1, no workspace, fp32 math.
struct Perf {
  int algo, status;
  float time;
  size_t memory;
  int determinism, math, reserved[3];
};
static_assert(sizeof(Perf) == 48);
int algo_results(void* h, Conv* v, void* xd, void* wd, void* cd, void* yd, int requested, void* returned, void* perf) {
  std::lock_guard l(g_mu);
  if (!g_handles.count(static_cast<Handle*>(h)) || !returned || requested < 1 || !perf) return kBadParam;
  if (int s = conv_setup(xd, wd, cd, yd, v)) return s;
  const int n = std::min(requested, 2);
  for (int i = 0; i < n; ++i) {
    const Perf p{i, kSuccess, 0.01f * float(i + 1), 0, 1, 0, {0, 0, 0}};
    std::memcpy(static_cast<std::byte*>(perf) + 48 * i, &p, 48);
  }
  put(returned, n);
  return kSuccess;
}
int f_fwd_algo_v7(void* h, void* xd, void* wd, void* cd, void* yd, int req, void* ret, void* perf) {
  Conv v;
  return algo_results(h, &v, xd, wd, cd, yd, req, ret, perf);
}
// The Ex searches run on the caller's buffers and workspace (device memory, checked here, as a
// GPU would fault on other memory): what the last was given (fake_cudnn_last_search).
FakeCudnnSearch g_last_search;
int find_ex(void* h, Conv* v, void* xd, void* wd, void* cd, void* yd, int req, void* ret, void* perf,
            std::initializer_list<void*> buffers, void* ws, size_t ws_bytes) {
  if (int s = algo_results(h, v, xd, wd, cd, yd, req, ret, perf)) return s;
  std::lock_guard l(g_mu);
  bool ok = true;
  fake_device_access([&](const FakeDeviceAt& at) {
    for (void* b : buffers) ok &= b && at(reinterpret_cast<uint64_t>(b), 1);
    ok &= !ws_bytes || (ws && at(reinterpret_cast<uint64_t>(ws), ws_bytes));
  });
  if (!ok) return kExecutionFailed;
  g_last_search = {reinterpret_cast<uint64_t>(*buffers.begin()), reinterpret_cast<uint64_t>(ws), ws_bytes};
  return kSuccess;
}
int f_fwd_find_ex(void* h, void* xd, void* x, void* wd, void* w, void* cd, void* yd, void* y, int req, void* ret,
                  void* perf, void* ws, size_t ws_bytes) {
  Conv v;
  return find_ex(h, &v, xd, wd, cd, yd, req, ret, perf, {x, w, y}, ws, ws_bytes);
}
// Backward data and filter: the descriptors in the order (w, dy, conv, dx) / (x, dy, conv, dw).
int f_bwd_data_algo(void* h, void* wd, void* dyd, void* cd, void* dxd, int req, void* ret, void* perf) {
  Conv v;
  return algo_results(h, &v, dxd, wd, cd, dyd, req, ret, perf);
}
int f_bwd_data_find_ex(void* h, void* wd, void* w, void* dyd, void* dy, void* cd, void* dxd, void* dx, int req, void* ret,
                       void* perf, void* ws, size_t ws_bytes) {
  Conv v;
  return find_ex(h, &v, dxd, wd, cd, dyd, req, ret, perf, {w, dy, dx}, ws, ws_bytes);
}
int f_bwd_filter_algo(void* h, void* xd, void* dyd, void* cd, void* dwd, int req, void* ret, void* perf) {
  Conv v;
  return algo_results(h, &v, xd, dwd, cd, dyd, req, ret, perf);
}
int f_bwd_filter_find_ex(void* h, void* xd, void* x, void* dyd, void* dy, void* cd, void* dwd, void* dw, int req,
                         void* ret, void* perf, void* ws, size_t ws_bytes) {
  Conv v;
  return find_ex(h, &v, xd, dwd, cd, dyd, req, ret, perf, {x, dy, dw}, ws, ws_bytes);
}
int workspace(void* h, void* xd, void* wd, void* cd, void* yd, int algo, int algos, void* size) {
  std::lock_guard l(g_mu);
  Conv v;
  if (!g_handles.count(static_cast<Handle*>(h)) || !size || algo < 0 || algo >= algos) return kBadParam;
  if (int s = conv_setup(xd, wd, cd, yd, &v)) return s;
  // Algorithm 1 of the fake asks for a workspace (as most of cuDNN's do): one float per output.
  const size_t bytes = algo == 1 ? size_t(v.N) * v.K * v.P * v.Q * 4 : 0;
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}
int f_fwd_ws_size(void* h, void* xd, void* wd, void* cd, void* yd, int algo, void* size) {
  return workspace(h, xd, wd, cd, yd, algo, kFwdAlgos, size);
}
int f_bwd_data_ws_size(void* h, void* wd, void* dyd, void* cd, void* dxd, int algo, void* size) {
  return workspace(h, dxd, wd, cd, dyd, algo, kBwdDataAlgos, size);
}
int f_bwd_filter_ws_size(void* h, void* xd, void* dyd, void* cd, void* dwd, int algo, void* size) {
  return workspace(h, xd, dwd, cd, dyd, algo, kBwdFilterAlgos, size);
}
// The workspace an algorithm needs must be given (cuDNN answers BAD_PARAM when it is short).
int check_workspace(const Conv& v, const FakeDeviceAt& at, int algo, void* ws, size_t bytes) {
  const size_t need = algo == 1 ? size_t(v.N) * v.K * v.P * v.Q * 4 : 0;
  if (bytes < need || (need && !ws)) return fail(kBadParam, "the workspace is smaller than the algorithm needs");
  if (need && !at(reinterpret_cast<uint64_t>(ws), need)) return kExecutionFailed;
  return kSuccess;
}
float blend(float alpha, float v, float beta, float old) { return alpha * v + (beta != 0 ? beta * old : 0.f); }

int f_conv_fwd(void* handle, void* alpha, void* xd, void* x, void* wd, void* w, void* cd, int algo, void* ws,
               size_t ws_bytes, void* beta, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    Conv v;
    if (int s = conv_setup(xd, wd, cd, yd, &v)) return s;
    if (!fp32_conv(v)) return fail(kNotSupported, "the fake convolves fp32");
    if (algo < 0 || algo >= kFwdAlgos) return kBadParam;
    if (int s = check_workspace(v, at, algo, ws, ws_bytes)) return s;
    float *px = fptr(at, x, span_of(*v.x)), *pw = fptr(at, w, filter_span(v)), *py = fptr(at, y, span_of(*v.y));
    if (!px || !pw || !py) return kExecutionFailed;
    std::vector<float> sum(size_t(v.N) * v.K * v.P * v.Q, 0.f);
    each_term(v, [&](int n, int k, int p, int q, int c, int cl, int r, int s, int h, int wi) {
      sum[((size_t(n) * v.K + k) * v.P + p) * v.Q + q] += px[off4(*v.x, n, c, h, wi)] * v.wv(pw, k, cl, r, s);
    });
    const float a = scalar(alpha), b = scalar(beta);
    for (int n = 0; n < v.N; ++n)
      for (int k = 0; k < v.K; ++k)
        for (int p = 0; p < v.P; ++p)
          for (int q = 0; q < v.Q; ++q) {
            float& o = py[off4(*v.y, n, k, p, q)];
            o = blend(a, sum[((size_t(n) * v.K + k) * v.P + p) * v.Q + q], b, o);
          }
    return kSuccess;
  });
}
float activate(const ActivationDesc& a, float v) {
  switch (a.mode) {
    case 0: return 1.f / (1.f + std::exp(-v));                    // SIGMOID
    case 1: return v > 0 ? v : 0.f;                               // RELU
    case 2: return std::tanh(v);                                  // TANH
    case 3: return std::min(v > 0 ? v : 0.f, float(a.coef));      // CLIPPED_RELU
    case 4: return v > 0 ? v : float(a.coef) * (std::exp(v) - 1);  // ELU
  }
  return v;  // IDENTITY
}
int f_conv_bias_act(void* handle, void* alpha1, void* xd, void* x, void* wd, void* w, void* cd, int algo, void* ws,
                    size_t ws_bytes, void* alpha2, void* zd, void* z, void* bd, void* bias, void* ad, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    Conv v;
    if (int s = conv_setup(xd, wd, cd, yd, &v)) return s;
    auto* act = static_cast<ActivationDesc*>(ad);
    const TensorDesc *z_d = tensor_desc(zd), *b_d = tensor_desc(bd);
    if (!g_activations.count(act) || !z_d || !b_d || z_d->nb != 4 || b_d->nb != 4 || b_d->dims[1] != v.K)
      return kBadParam;
    // cuDNN runs this fused form with IDENTITY only for IMPLICIT_PRECOMP_GEMM; the fake does not mind.
    if (!fp32_conv(v)) return fail(kNotSupported, "the fake convolves fp32");
    if (algo < 0 || algo >= kFwdAlgos) return kBadParam;
    if (int s = check_workspace(v, at, algo, ws, ws_bytes)) return s;
    float *px = fptr(at, x, span_of(*v.x)), *pw = fptr(at, w, filter_span(v)), *py = fptr(at, y, span_of(*v.y)),
          *pz = fptr(at, z, span_of(*z_d)), *pb = fptr(at, bias, span_of(*b_d));
    if (!px || !pw || !py || !pz || !pb) return kExecutionFailed;
    std::vector<float> sum(size_t(v.N) * v.K * v.P * v.Q, 0.f);
    each_term(v, [&](int n, int k, int p, int q, int c, int cl, int r, int s, int h, int wi) {
      sum[((size_t(n) * v.K + k) * v.P + p) * v.Q + q] += px[off4(*v.x, n, c, h, wi)] * v.wv(pw, k, cl, r, s);
    });
    const float a1 = scalar(alpha1), a2 = scalar(alpha2);
    for (int n = 0; n < v.N; ++n)
      for (int k = 0; k < v.K; ++k)
        for (int p = 0; p < v.P; ++p)
          for (int q = 0; q < v.Q; ++q) {
            const float t = a1 * sum[((size_t(n) * v.K + k) * v.P + p) * v.Q + q] +
                            (a2 != 0 ? a2 * pz[off4(*z_d, n, k, p, q)] : 0.f) + pb[off4(*b_d, 0, k, 0, 0)];
            py[off4(*v.y, n, k, p, q)] = activate(*act, t);
          }
    return kSuccess;
  });
}
int f_conv_bwd_data(void* handle, void* alpha, void* wd, void* w, void* dyd, void* dy, void* cd, int algo, void* ws,
                    size_t ws_bytes, void* beta, void* dxd, void* dx) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    Conv v;
    if (int s = conv_setup(dxd, wd, cd, dyd, &v)) return s;
    if (!fp32_conv(v)) return fail(kNotSupported, "the fake convolves fp32");
    if (algo < 0 || algo >= kBwdDataAlgos) return kBadParam;
    if (int s = check_workspace(v, at, algo, ws, ws_bytes)) return s;
    float *pdx = fptr(at, dx, span_of(*v.x)), *pw = fptr(at, w, filter_span(v)), *pdy = fptr(at, dy, span_of(*v.y));
    if (!pdx || !pw || !pdy) return kExecutionFailed;
    std::vector<float> sum(size_t(v.N) * v.C * v.H * v.W, 0.f);
    each_term(v, [&](int n, int k, int p, int q, int c, int cl, int r, int s, int h, int wi) {
      sum[((size_t(n) * v.C + c) * v.H + h) * v.W + wi] += pdy[off4(*v.y, n, k, p, q)] * v.wv(pw, k, cl, r, s);
    });
    const float a = scalar(alpha), b = scalar(beta);
    for (int n = 0; n < v.N; ++n)
      for (int c = 0; c < v.C; ++c)
        for (int h = 0; h < v.H; ++h)
          for (int wi = 0; wi < v.W; ++wi) {
            float& o = pdx[off4(*v.x, n, c, h, wi)];
            o = blend(a, sum[((size_t(n) * v.C + c) * v.H + h) * v.W + wi], b, o);
          }
    return kSuccess;
  });
}
int f_conv_bwd_filter(void* handle, void* alpha, void* xd, void* x, void* dyd, void* dy, void* cd, int algo, void* ws,
                      size_t ws_bytes, void* beta, void* dwd, void* dw) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    Conv v;
    if (int s = conv_setup(xd, dwd, cd, dyd, &v)) return s;
    if (!fp32_conv(v)) return fail(kNotSupported, "the fake convolves fp32");
    if (algo < 0 || algo >= kBwdFilterAlgos) return kBadParam;
    if (int s = check_workspace(v, at, algo, ws, ws_bytes)) return s;
    float *px = fptr(at, x, span_of(*v.x)), *pdw = fptr(at, dw, filter_span(v)), *pdy = fptr(at, dy, span_of(*v.y));
    if (!px || !pdw || !pdy) return kExecutionFailed;
    const int cg = v.C / v.G;
    std::vector<float> sum(size_t(v.K) * cg * v.R * v.S, 0.f);
    each_term(v, [&](int n, int k, int p, int q, int c, int cl, int r, int s, int h, int wi) {
      if (v.c->mode == kConvolution) r = v.R - 1 - r, s = v.S - 1 - s;  // the element wv read
      sum[((size_t(k) * cg + cl) * v.R + r) * v.S + s] += pdy[off4(*v.y, n, k, p, q)] * px[off4(*v.x, n, c, h, wi)];
    });
    const float a = scalar(alpha), b = scalar(beta);
    for (int k = 0; k < v.K; ++k)
      for (int c = 0; c < cg; ++c)
        for (int r = 0; r < v.R; ++r)
          for (int s = 0; s < v.S; ++s) {
            const size_t i = v.w->format == kNhwc ? ((size_t(k) * v.R + r) * v.S + s) * cg + c
                                                  : ((size_t(k) * cg + c) * v.R + r) * v.S + s;
            pdw[i] = blend(a, sum[((size_t(k) * cg + c) * v.R + r) * v.S + s], b, pdw[i]);
          }
    return kSuccess;
  });
}
// C = alpha * A + beta * C, A broadcast over C where its dimension is 1 (cudnnAddTensor,
// cudnnConvolutionBackwardBias's reverse).
int f_add_tensor(void* handle, void* alpha, void* ad, void* A, void* beta, void* cd, void* C) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    const TensorDesc *a_d = tensor_desc(ad), *c_d = tensor_desc(cd);
    if (!a_d || !c_d || a_d->nb != c_d->nb) return kBadParam;
    if (a_d->dtype != kDataFloat || c_d->dtype != kDataFloat) return fail(kNotSupported, "the fake adds fp32");
    for (int i = 0; i < a_d->nb; ++i)
      if (a_d->dims[i] != 1 && a_d->dims[i] != c_d->dims[i]) return fail(kBadParam, "A's shape does not broadcast to C's");
    float *pa = fptr(at, A, span_of(*a_d)), *pc = fptr(at, C, span_of(*c_d));
    if (!pa || !pc) return kExecutionFailed;
    const float al = scalar(alpha), be = scalar(beta);
    const auto cs = offsets_of(*c_d);
    std::vector<int> idx(size_t(c_d->nb), 0);
    for (size_t e = 0; e < cs.size(); ++e) {
      int64_t o = 0;
      for (int k = 0; k < a_d->nb; ++k) o += int64_t(a_d->dims[k] == 1 ? 0 : idx[size_t(k)]) * a_d->strides[k];
      pc[cs[e]] = blend(al, pa[o], be, pc[cs[e]]);
      for (int k = c_d->nb; k-- > 0;) {
        if (++idx[size_t(k)] < c_d->dims[k]) break;
        idx[size_t(k)] = 0;
      }
    }
    return kSuccess;
  });
}
int f_conv_bwd_bias(void* handle, void* alpha, void* dyd, void* dy, void* beta, void* dbd, void* db) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    const TensorDesc *y = tensor_desc(dyd), *b = tensor_desc(dbd);
    if (!y || !b || y->nb != 4 || b->nb != 4 || b->dims[1] != y->dims[1] || b->dims[0] != 1 || b->dims[2] != 1 ||
        b->dims[3] != 1)
      return kBadParam;
    float *pdy = fptr(at, dy, span_of(*y)), *pdb = fptr(at, db, span_of(*b));
    if (!pdy || !pdb) return kExecutionFailed;
    for (int k = 0; k < y->dims[1]; ++k) {
      float sum = 0;
      for (int n = 0; n < y->dims[0]; ++n)
        for (int p = 0; p < y->dims[2]; ++p)
          for (int q = 0; q < y->dims[3]; ++q) sum += pdy[off4(*y, n, k, p, q)];
      float& o = pdb[off4(*b, 0, k, 0, 0)];
      o = blend(scalar(alpha), sum, scalar(beta), o);
    }
    return kSuccess;
  });
}

// ---- pooling
int f_create_pool(void** out) { return create_in(g_pools, out); }
int f_destroy_pool(void* p) { return destroy_in(g_pools, p); }
int set_pool_locked(PoolDesc* d, int mode, int nan, int nb, const int* win, const int* pad, const int* st) {
  if (!d || mode < 0 || mode > 3 || nb < 1 || nb > 6 || !win || !pad || !st) return kBadParam;
  for (int i = 0; i < nb; ++i)
    if (win[i] <= 0 || pad[i] < 0 || st[i] <= 0) return fail(kBadParam, "window, padding and strides");
  d->mode = mode, d->nan = nan, d->nb = nb;
  std::memcpy(d->win, win, 4 * size_t(nb));
  std::memcpy(d->pad, pad, 4 * size_t(nb));
  std::memcpy(d->stride, st, 4 * size_t(nb));
  return kSuccess;
}
int f_set_pool_2d(void* p, int mode, int nan, int wh, int ww, int ph, int pw, int sh, int sw) {
  std::lock_guard l(g_mu);
  const int win[2] = {wh, ww}, pad[2] = {ph, pw}, st[2] = {sh, sw};
  return set_pool_locked(live_in(g_pools, p), mode, nan, 2, win, pad, st);
}
int f_set_pool_nd(void* p, int mode, int nan, int nb, void* win, void* pad, void* st) {
  std::lock_guard l(g_mu);
  return set_pool_locked(live_in(g_pools, p), mode, nan, nb, static_cast<int*>(win), static_cast<int*>(pad),
                         static_cast<int*>(st));
}
int f_get_pool_2d(void* p, void* mode, void* nan, void* wh, void* ww, void* ph, void* pw, void* sh, void* sw) {
  std::lock_guard l(g_mu);
  PoolDesc* d = live_in(g_pools, p);
  if (!d || d->nb != 2) return kBadParam;
  put(mode, d->mode), put(nan, d->nan), put(wh, d->win[0]), put(ww, d->win[1]), put(ph, d->pad[0]);
  put(pw, d->pad[1]), put(sh, d->stride[0]), put(sw, d->stride[1]);
  return kSuccess;
}
int f_get_pool_nd(void* p, int requested, void* mode, void* nan, void* nb, void* win, void* pad, void* st) {
  std::lock_guard l(g_mu);
  PoolDesc* d = live_in(g_pools, p);
  if (!d || requested < 0 || d->nb == 0) return kBadParam;
  const size_t k = 4 * size_t(std::min(requested, d->nb));
  put(mode, d->mode), put(nan, d->nan), put(nb, d->nb);
  if (win) std::memcpy(win, d->win, k);
  if (pad) std::memcpy(pad, d->pad, k);
  if (st) std::memcpy(st, d->stride, k);
  return kSuccess;
}
int pool_out(const PoolDesc& d, const TensorDesc& x, int i) {
  return (x.dims[2 + i] + 2 * d.pad[i] - d.win[i]) / d.stride[i] + 1;
}
int f_pool_out_2d(void* p, void* xd, void* n, void* c, void* h, void* w) {
  std::lock_guard l(g_mu);
  PoolDesc* d = live_in(g_pools, p);
  TensorDesc* x = tensor_desc(xd);
  if (!d || !x || d->nb != 2 || x->nb != 4) return kBadParam;
  put(n, x->dims[0]), put(c, x->dims[1]), put(h, pool_out(*d, *x, 0)), put(w, pool_out(*d, *x, 1));
  return kSuccess;
}
int f_pool_out_nd(void* p, void* xd, int nb, void* dims) {
  std::lock_guard l(g_mu);
  PoolDesc* d = live_in(g_pools, p);
  TensorDesc* x = tensor_desc(xd);
  if (!d || !x || d->nb != 2 || x->nb != 4 || nb != 4 || !dims) return kBadParam;
  const int o[4] = {x->dims[0], x->dims[1], pool_out(*d, *x, 0), pool_out(*d, *x, 1)};
  std::memcpy(dims, o, sizeof o);
  return kSuccess;
}
// Each output element's window over x: the positions inside x (and how many the average counts).
template <class F>
void each_window(const PoolDesc& d, const TensorDesc& x, const TensorDesc& y, F f) {
  for (int n = 0; n < y.dims[0]; ++n)
    for (int c = 0; c < y.dims[1]; ++c)
      for (int p = 0; p < y.dims[2]; ++p)
        for (int q = 0; q < y.dims[3]; ++q) {
          std::vector<int64_t> in;
          for (int r = 0; r < d.win[0]; ++r)
            for (int s = 0; s < d.win[1]; ++s) {
              const int h = p * d.stride[0] - d.pad[0] + r, w = q * d.stride[1] - d.pad[1] + s;
              if (h >= 0 && h < x.dims[2] && w >= 0 && w < x.dims[3]) in.push_back(off4(x, n, c, h, w));
            }
          const int count = d.mode == 1 ? d.win[0] * d.win[1] : int(in.size());  // 1: AVG counting padding
          f(off4(y, n, c, p, q), in, count);
        }
}
int pool_setup(void* p, void* xd, void* yd, PoolDesc** d, TensorDesc** x, TensorDesc** y) {
  *d = live_in(g_pools, p), *x = tensor_desc(xd), *y = tensor_desc(yd);
  if (!*d || !*x || !*y || (*d)->nb != 2 || (*x)->nb != 4 || (*y)->nb != 4) return kBadParam;
  if ((*x)->dtype != kDataFloat || (*y)->dtype != kDataFloat) return fail(kNotSupported, "the fake pools fp32");
  if ((*y)->dims[0] != (*x)->dims[0] || (*y)->dims[1] != (*x)->dims[1] || (*y)->dims[2] != pool_out(**d, **x, 0) ||
      (*y)->dims[3] != pool_out(**d, **x, 1))
    return fail(kBadParam, "the output tensor's shape is not the pooling's");
  return kSuccess;
}
bool is_max(const PoolDesc& d) { return d.mode == 0 || d.mode == 3; }
int f_pool_fwd(void* handle, void* p, void* alpha, void* xd, void* x, void* beta, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    PoolDesc* d;
    TensorDesc *xt, *yt;
    if (int s = pool_setup(p, xd, yd, &d, &xt, &yt)) return s;
    float *px = fptr(at, x, span_of(*xt)), *py = fptr(at, y, span_of(*yt));
    if (!px || !py) return kExecutionFailed;
    each_window(*d, *xt, *yt, [&](int64_t o, const std::vector<int64_t>& in, int count) {
      float v = is_max(*d) ? -INFINITY : 0.f;
      for (int64_t i : in) v = is_max(*d) ? std::max(v, px[i]) : v + px[i];
      if (!is_max(*d)) v /= float(std::max(count, 1));
      py[o] = blend(scalar(alpha), v, scalar(beta), py[o]);
    });
    return kSuccess;
  });
}
int f_pool_bwd(void* handle, void* p, void* alpha, void* yd, void* y, void* dyd, void* dy, void* xd, void* x,
               void* beta, void* dxd, void* dx) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    PoolDesc* d;
    TensorDesc *xt, *yt;
    if (int s = pool_setup(p, xd, yd, &d, &xt, &yt)) return s;
    TensorDesc *dyt = tensor_desc(dyd), *dxt = tensor_desc(dxd);
    if (!dyt || !dxt || dyt->nb != 4 || dxt->nb != 4) return kBadParam;
    float *px = fptr(at, x, span_of(*xt)), *pdy = fptr(at, dy, span_of(*dyt)), *pdx = fptr(at, dx, span_of(*dxt));
    if (!px || !pdy || !pdx || !fptr(at, y, span_of(*yt))) return kExecutionFailed;
    // dy and dx share y's and x's layouts here (as PyTorch passes them).
    std::vector<float> grad(size_t(span_of(*xt)), 0.f);
    each_window(*d, *xt, *yt, [&](int64_t o, const std::vector<int64_t>& in, int count) {
      if (in.empty()) return;
      if (is_max(*d)) {
        int64_t best = in[0];
        for (int64_t i : in)
          if (px[i] > px[best]) best = i;
        grad[size_t(best)] += pdy[o];
      } else {
        for (int64_t i : in) grad[size_t(i)] += pdy[o] / float(std::max(count, 1));
      }
    });
    for (int64_t o : offsets_of(*xt)) pdx[o] = blend(scalar(alpha), grad[size_t(o)], scalar(beta), pdx[o]);
    return kSuccess;
  });
}

// ---- softmax: over C*H*W of each sample (INSTANCE) or over C at each position (CHANNEL)
template <class F>
void each_softmax_group(const TensorDesc& t, int mode, F f) {
  const int N = t.dims[0], C = t.dims[1], H = t.nb == 4 ? t.dims[2] : 1, W = t.nb == 4 ? t.dims[3] : 1;
  std::vector<int64_t> g;
  auto off = [&](int n, int c, int h, int w) { return t.nb == 4 ? off4(t, n, c, h, w) : int64_t(n) * t.strides[0] + int64_t(c) * t.strides[1]; };
  for (int n = 0; n < N; ++n) {
    if (mode == 0) {
      g.clear();
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < H; ++h)
          for (int w = 0; w < W; ++w) g.push_back(off(n, c, h, w));
      f(g);
      continue;
    }
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) {
        g.clear();
        for (int c = 0; c < C; ++c) g.push_back(off(n, c, h, w));
        f(g);
      }
  }
}
int f_softmax_fwd(void* handle, int algo, int mode, void* alpha, void* xd, void* x, void* beta, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc *xt = tensor_desc(xd), *yt = tensor_desc(yd);
    if (!xt || !yt || (xt->nb != 4 && xt->nb != 2) || yt->nb != xt->nb || algo < 0 || algo > 2 || mode < 0 || mode > 1)
      return kBadParam;
    if (xt->dtype != kDataFloat) return fail(kNotSupported, "the fake computes fp32");
    float *px = fptr(at, x, span_of(*xt)), *py = fptr(at, y, span_of(*yt));
    if (!px || !py) return kExecutionFailed;
    // y shares x's layout here.
    each_softmax_group(*xt, mode, [&](const std::vector<int64_t>& g) {
      float m = algo == 0 ? 0.f : -INFINITY;  // FAST does not subtract the maximum
      for (int64_t o : g) m = algo == 0 ? m : std::max(m, px[o]);
      double sum = 0;
      for (int64_t o : g) sum += std::exp(double(px[o] - m));
      for (int64_t o : g) {
        const float v = algo == 2 ? float(double(px[o] - m) - std::log(sum)) : float(std::exp(double(px[o] - m)) / sum);
        py[o] = blend(scalar(alpha), v, scalar(beta), py[o]);
      }
    });
    return kSuccess;
  });
}
int f_softmax_bwd(void* handle, int algo, int mode, void* alpha, void* yd, void* y, void* dyd, void* dy, void* beta,
                  void* dxd, void* dx) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc *yt = tensor_desc(yd), *dyt = tensor_desc(dyd), *dxt = tensor_desc(dxd);
    if (!yt || !dyt || !dxt || (yt->nb != 4 && yt->nb != 2) || algo < 0 || algo > 2 || mode < 0 || mode > 1)
      return kBadParam;
    if (yt->dtype != kDataFloat) return fail(kNotSupported, "the fake computes fp32");
    float *py = fptr(at, y, span_of(*yt)), *pdy = fptr(at, dy, span_of(*dyt)), *pdx = fptr(at, dx, span_of(*dxt));
    if (!py || !pdy || !pdx) return kExecutionFailed;
    each_softmax_group(*yt, mode, [&](const std::vector<int64_t>& g) {
      double s = 0;
      for (int64_t o : g) s += algo == 2 ? pdy[o] : double(pdy[o]) * py[o];
      for (int64_t o : g) {
        const float v = algo == 2 ? float(pdy[o] - std::exp(double(py[o])) * s) : float(py[o] * (pdy[o] - s));
        pdx[o] = blend(scalar(alpha), v, scalar(beta), pdx[o]);
      }
    });
    return kSuccess;
  });
}

// ---- dropout: the generator's position is a counter in the states (device memory), so it
// moves on with each forward pass and comes back with the states' bytes
int f_create_dropout(void** out) { return create_in(g_dropouts, out); }
int f_destroy_dropout(void* p) { return destroy_in(g_dropouts, p); }
int f_dropout_states_size(void* h, void* size) {
  if (!g_handles.count(static_cast<Handle*>(h)) || !size) return kBadParam;
  std::memcpy(size, &kDropoutStateBytes, 8);
  return kSuccess;
}
int64_t elems_of(const TensorDesc& t) {
  int64_t n = 1;
  for (int i = 0; i < t.nb; ++i) n *= t.dims[i];
  return n;
}
int f_dropout_reserve_size(void* xd, void* size) {
  std::lock_guard l(g_mu);
  TensorDesc* x = tensor_desc(xd);
  if (!x || !size || x->dtype < 0) return kBadParam;
  const size_t bytes = size_t(elems_of(*x));  // one mask byte per element
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}
int dropout_set(void* p, void* handle, float prob, void* states, size_t bytes, unsigned long long seed, bool restore) {
  if (prob < 0 || prob >= 1) return kBadParam;
  auto work = [&](const FakeDeviceAt& at) {
    DropoutDesc* d = live_in(g_dropouts, p);
    if (!d) return kBadParam;
    if (states && bytes < kDropoutStateBytes) return fail(kBadParam, "states smaller than cudnnDropoutGetStatesSize");
    std::byte* s = states ? at(reinterpret_cast<uint64_t>(states), kDropoutStateBytes) : nullptr;
    if (states && !s) return kExecutionFailed;
    if (s && !restore) std::memset(s, 0, 8);  // the generator starts again (a kernel, natively)
    d->p = prob, d->states = reinterpret_cast<uint64_t>(states), d->bytes = bytes, d->seed = seed, d->set = true;
    return kSuccess;
  };
  if (restore) {  // no kernel: the states are as they were
    std::lock_guard l(g_mu);
    if (!g_handles.count(static_cast<Handle*>(handle))) return kBadParam;
    int status = kSuccess;
    fake_device_access([&](const FakeDeviceAt& at) { status = work(at); });
    return status;
  }
  return bn_run(handle, work);
}
int f_set_dropout(void* p, void* h, float prob, void* states, size_t bytes, unsigned long long seed) {
  return dropout_set(p, h, prob, states, bytes, seed, false);
}
int f_restore_dropout(void* p, void* h, float prob, void* states, size_t bytes, unsigned long long seed) {
  return dropout_set(p, h, prob, states, bytes, seed, true);
}
uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
int f_dropout_fwd(void* handle, void* p, void* xd, void* x, void* yd, void* y, void* reserve, size_t reserve_bytes) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    DropoutDesc* d = live_in(g_dropouts, p);
    TensorDesc *xt = tensor_desc(xd), *yt = tensor_desc(yd);
    if (!d || !xt || !yt || !d->set || !d->states || elems_of(*xt) != elems_of(*yt)) return kBadParam;
    if (xt->dtype != kDataFloat) return fail(kNotSupported, "the fake drops fp32");
    const int64_t n = elems_of(*xt);
    if (reserve_bytes < size_t(n)) return fail(kBadParam, "the reserve space is smaller than cudnnDropoutGetReserveSpaceSize");
    float *px = fptr(at, x, span_of(*xt)), *py = fptr(at, y, span_of(*yt));
    auto* mask = reinterpret_cast<uint8_t*>(at(reinterpret_cast<uint64_t>(reserve), size_t(n)));
    auto* state = at(d->states, kDropoutStateBytes);
    if (!px || !py || !mask || !state) return kExecutionFailed;
    uint64_t counter;
    std::memcpy(&counter, state, 8);
    const auto xs = offsets_of(*xt), ys = offsets_of(*yt);
    for (int64_t i = 0; i < n; ++i) {
      const double u = double(splitmix(d->seed ^ splitmix(counter++)) >> 11) * 0x1.0p-53;
      mask[i] = u >= d->p;
      py[ys[size_t(i)]] = mask[i] ? px[xs[size_t(i)]] / (1 - d->p) : 0.f;
    }
    std::memcpy(state, &counter, 8);
    return kSuccess;
  });
}
int f_dropout_bwd(void* handle, void* p, void* dyd, void* dy, void* dxd, void* dx, void* reserve, size_t reserve_bytes) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    DropoutDesc* d = live_in(g_dropouts, p);
    TensorDesc *yt = tensor_desc(dyd), *xt = tensor_desc(dxd);
    if (!d || !xt || !yt || !d->set || elems_of(*xt) != elems_of(*yt)) return kBadParam;
    const int64_t n = elems_of(*xt);
    if (reserve_bytes < size_t(n)) return kBadParam;
    float *pdy = fptr(at, dy, span_of(*yt)), *pdx = fptr(at, dx, span_of(*xt));
    auto* mask = reinterpret_cast<uint8_t*>(at(reinterpret_cast<uint64_t>(reserve), size_t(n)));
    if (!pdy || !pdx || !mask) return kExecutionFailed;
    const auto xs = offsets_of(*xt), ys = offsets_of(*yt);
    for (int64_t i = 0; i < n; ++i) pdx[xs[size_t(i)]] = mask[i] ? pdy[ys[size_t(i)]] / (1 - d->p) : 0.f;
    return kSuccess;
  });
}

int f_get_dropout(void* p, void* handle, void* prob, void* states, void* seed) {
  std::lock_guard l(g_mu);
  DropoutDesc* d = live_in(g_dropouts, p);
  if (!d || !g_handles.count(static_cast<Handle*>(handle)) || !prob || !states || !seed) return kBadParam;
  std::memcpy(prob, &d->p, 4);
  const void* s = reinterpret_cast<void*>(d->states);
  std::memcpy(states, &s, 8);
  std::memcpy(seed, &d->seed, 8);
  return kSuccess;
}

// ---- tensor operations over the index space (fp32): each element's offset by its own strides
// Calls f(index vector, element number) for every element of `t` in index order.
template <class F>
void each_index(const TensorDesc& t, F f) {
  std::vector<int> idx(size_t(t.nb), 0);
  const int64_t n = elems_of(t);
  for (int64_t e = 0; e < n; ++e) {
    f(idx, e);
    for (int k = t.nb; k-- > 0;) {
      if (++idx[size_t(k)] < t.dims[k]) break;
      idx[size_t(k)] = 0;
    }
  }
}
int64_t offset_at(const TensorDesc& t, const std::vector<int>& idx) {
  int64_t o = 0;
  for (int k = 0; k < t.nb; ++k) o += int64_t(t.dims[k] == 1 ? 0 : idx[size_t(k)]) * t.strides[k];
  return o;  // a dimension of 1 broadcasts
}
bool fp32_all(std::initializer_list<const TensorDesc*> ts) {
  for (const TensorDesc* t : ts)
    if (t && t->dtype != kDataFloat) return false;
  return true;
}
bool same_shape(const TensorDesc& a, const TensorDesc& b) {
  if (a.nb != b.nb) return false;
  for (int i = 0; i < a.nb; ++i)
    if (a.dims[i] != b.dims[i]) return false;
  return true;
}
// Whether `small`'s dimensions are each 1 or `big`'s (a broadcast or a reduction's output).
bool fits(const TensorDesc& small, const TensorDesc& big) {
  if (small.nb != big.nb) return false;
  for (int i = 0; i < big.nb; ++i)
    if (small.dims[i] != 1 && small.dims[i] != big.dims[i]) return false;
  return true;
}

int f_set_tensor(void* handle, void* yd, void* y, void* value) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc* t = tensor_desc(yd);
    if (!t || t->nb == 0 || !value) return kBadParam;
    if (!fp32_all({t})) return fail(kNotSupported, "the fake sets fp32");
    float* p = fptr(at, y, span_of(*t));
    if (!p) return kExecutionFailed;
    for (int64_t o : offsets_of(*t)) p[o] = scalar(value);
    return kSuccess;
  });
}
int f_scale_tensor(void* handle, void* yd, void* y, void* alpha) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc* t = tensor_desc(yd);
    if (!t || t->nb == 0 || !alpha) return kBadParam;
    if (!fp32_all({t})) return fail(kNotSupported, "the fake scales fp32");
    float* p = fptr(at, y, span_of(*t));
    if (!p) return kExecutionFailed;
    for (int64_t o : offsets_of(*t)) p[o] *= scalar(alpha);
    return kSuccess;
  });
}
// y = alpha * x + beta * y, element by element of the same index (each in its own layout).
int f_transform_tensor(void* handle, void* alpha, void* xd, void* x, void* beta, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc *xt = tensor_desc(xd), *yt = tensor_desc(yd);
    if (!xt || !yt || !same_shape(*xt, *yt)) return fail(kBadParam, "x and y must have the same dimensions");
    if (!fp32_all({xt, yt})) return fail(kNotSupported, "the fake transforms fp32");
    float *px = fptr(at, x, span_of(*xt)), *py = fptr(at, y, span_of(*yt));
    if (!px || !py) return kExecutionFailed;
    const auto xs = offsets_of(*xt), ys = offsets_of(*yt);
    for (size_t i = 0; i < xs.size(); ++i) py[ys[i]] = blend(scalar(alpha), px[xs[i]], scalar(beta), py[ys[i]]);
    return kSuccess;
  });
}

// ---- op-tensor: C = op(alpha1 * A, alpha2 * B) + beta * C (B broadcast by dimensions of 1)
struct OpTensorDesc {
  int op = 0, ctype = kDataFloat, nan = 0;
};
std::set<OpTensorDesc*> g_op_tensors;
int f_create_op_tensor(void** out) { return create_in(g_op_tensors, out); }
int f_destroy_op_tensor(void* p) { return destroy_in(g_op_tensors, p); }
int f_set_op_tensor(void* p, int op, int ctype, int nan) {
  std::lock_guard l(g_mu);
  OpTensorDesc* d = live_in(g_op_tensors, p);
  if (!d || op < 0 || op > 5 || ctype < 0 || ctype > 20 || nan < 0 || nan > 1) return kBadParam;
  d->op = op, d->ctype = ctype, d->nan = nan;
  return kSuccess;
}
int f_get_op_tensor(void* p, void* op, void* ctype, void* nan) {
  std::lock_guard l(g_mu);
  OpTensorDesc* d = live_in(g_op_tensors, p);
  if (!d) return kBadParam;
  put(op, d->op), put(ctype, d->ctype), put(nan, d->nan);
  return kSuccess;
}
int f_op_tensor(void* handle, void* desc, void* alpha1, void* ad, void* A, void* alpha2, void* bd, void* B, void* beta,
                void* cd, void* C) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    OpTensorDesc* d = live_in(g_op_tensors, desc);
    TensorDesc *at_ = tensor_desc(ad), *bt = tensor_desc(bd), *ct = tensor_desc(cd);
    const bool unary = d && (d->op == 4 || d->op == 5);  // SQRT, NOT: B is ignored
    if (!d || !at_ || !ct || (!unary && !bt)) return kBadParam;
    if (!same_shape(*at_, *ct) || (!unary && !fits(*bt, *ct))) return fail(kBadParam, "A must be C's shape, B broadcast to it");
    if (!fp32_all({at_, unary ? nullptr : bt, ct})) return fail(kNotSupported, "the fake operates on fp32");
    float *pa = fptr(at, A, span_of(*at_)), *pb = unary ? nullptr : fptr(at, B, span_of(*bt)), *pc = fptr(at, C, span_of(*ct));
    if (!pa || !pc || (!unary && !pb)) return kExecutionFailed;
    const float a1 = scalar(alpha1), a2 = scalar(alpha2), be = scalar(beta);
    each_index(*ct, [&](const std::vector<int>& idx, int64_t) {
      const float u = a1 * pa[offset_at(*at_, idx)], v = unary ? 0.f : a2 * pb[offset_at(*bt, idx)];
      float r = 0;
      switch (d->op) {
        case 0: r = u + v; break;
        case 1: r = u * v; break;
        case 2: r = std::min(u, v); break;
        case 3: r = std::max(u, v); break;
        case 4: r = std::sqrt(u); break;
        case 5: r = 1.f - u; break;
      }
      float& c = pc[offset_at(*ct, idx)];
      c = r + (be != 0 ? be * c : 0.f);
    });
    return kSuccess;
  });
}

// ---- reduce-tensor: C = reduce op(alpha * A) + beta * C over A's dimensions that are 1 in C;
// MIN, MAX and AMAX can give each output's flattened index within its reduced elements
struct ReduceDesc {
  int op = 0, ctype = kDataFloat, nan = 0, indices = 0, itype = 0;
};
std::set<ReduceDesc*> g_reduces;
constexpr int kReduceAdd = 0, kReduceMul = 1, kReduceMin = 2, kReduceMax = 3, kReduceAmax = 4, kReduceAvg = 5,
              kReduceNorm1 = 6, kReduceNorm2 = 7, kReduceMulNoZeros = 8;
int f_create_reduce(void** out) { return create_in(g_reduces, out); }
int f_destroy_reduce(void* p) { return destroy_in(g_reduces, p); }
int f_set_reduce(void* p, int op, int ctype, int nan, int indices, int itype) {
  std::lock_guard l(g_mu);
  ReduceDesc* d = live_in(g_reduces, p);
  if (!d || op < 0 || op > 8 || ctype < 0 || ctype > 20 || nan < 0 || nan > 1 || indices < 0 || indices > 1 ||
      itype < 0 || itype > 3)
    return kBadParam;
  d->op = op, d->ctype = ctype, d->nan = nan, d->indices = indices, d->itype = itype;
  return kSuccess;
}
int f_get_reduce(void* p, void* op, void* ctype, void* nan, void* indices, void* itype) {
  std::lock_guard l(g_mu);
  ReduceDesc* d = live_in(g_reduces, p);
  if (!d) return kBadParam;
  put(op, d->op), put(ctype, d->ctype), put(nan, d->nan), put(indices, d->indices), put(itype, d->itype);
  return kSuccess;
}
bool gives_indices(const ReduceDesc& d) {
  return d.indices == 1 && (d.op == kReduceMin || d.op == kReduceMax || d.op == kReduceAmax);
}
int reduce_sizes(void* handle, void* desc, void* ad, void* cd, ReduceDesc** d, TensorDesc** a, TensorDesc** c) {
  *d = live_in(g_reduces, desc), *a = tensor_desc(ad), *c = tensor_desc(cd);
  if (!g_handles.count(static_cast<Handle*>(handle)) || !*d || !*a || !*c) return kBadParam;
  if (!fits(**c, **a)) return fail(kBadParam, "C's dimensions must each be 1 or A's");
  return kSuccess;
}
int f_reduce_indices_size(void* handle, void* desc, void* ad, void* cd, void* size) {
  std::lock_guard l(g_mu);
  ReduceDesc* d;
  TensorDesc *a, *c;
  if (int s = reduce_sizes(handle, desc, ad, cd, &d, &a, &c)) return s;
  if (!size) return kBadParam;
  const size_t bytes = gives_indices(*d) ? size_t(elems_of(*c)) * 4 : 0;  // 32-bit indices
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}
// The fake's workspace: one float per output element (a partial result each), so the plumbing of
// a workspace is exercised.
int f_reduce_workspace_size(void* handle, void* desc, void* ad, void* cd, void* size) {
  std::lock_guard l(g_mu);
  ReduceDesc* d;
  TensorDesc *a, *c;
  if (int s = reduce_sizes(handle, desc, ad, cd, &d, &a, &c)) return s;
  if (!size) return kBadParam;
  const size_t bytes = size_t(elems_of(*c)) * 4;
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}
int f_reduce(void* handle, void* desc, void* indices, size_t indices_bytes, void* ws, size_t ws_bytes, void* alpha,
             void* ad, void* A, void* beta, void* cd, void* C) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    ReduceDesc* d;
    TensorDesc *a, *c;
    if (int s = reduce_sizes(handle, desc, ad, cd, &d, &a, &c)) return s;
    if (!fp32_all({a, c})) return fail(kNotSupported, "the fake reduces fp32");
    const size_t outs = size_t(elems_of(*c));
    if (ws_bytes < outs * 4) return fail(kBadParam, "the workspace is smaller than cudnnGetReductionWorkspaceSize");
    if (gives_indices(*d) && indices_bytes < outs * 4)
      return fail(kBadParam, "the indices are smaller than cudnnGetReductionIndicesSize");
    float *pa = fptr(at, A, span_of(*a)), *pc = fptr(at, C, span_of(*c)), *acc = fptr(at, ws, int64_t(outs));
    auto* pi = gives_indices(*d) ? reinterpret_cast<uint32_t*>(at(reinterpret_cast<uint64_t>(indices), outs * 4)) : nullptr;
    if (!pa || !pc || !acc || (gives_indices(*d) && !pi)) return kExecutionFailed;
    // Each output's elements in A's index order: the output's index in C (packed), and the
    // element's position among those it reduces (flattened over the reduced dimensions).
    std::vector<int64_t> count(outs, 0);
    std::vector<uint32_t> best(outs, 0);
    const float al = scalar(alpha);
    each_index(*a, [&](const std::vector<int>& idx, int64_t) {
      size_t o = 0;
      for (int k = 0; k < c->nb; ++k) o = o * size_t(c->dims[k]) + size_t(c->dims[k] == 1 ? 0 : idx[size_t(k)]);
      const float v = al * pa[offset_at(*a, idx)];
      const int64_t n = count[o]++;
      float& r = acc[o];
      switch (d->op) {
        case kReduceAdd: case kReduceAvg: r = n ? r + v : v; break;
        case kReduceMul: r = n ? r * v : v; break;
        case kReduceMulNoZeros: r = v == 0 ? (n ? r : 1.f) : (n ? r * v : v); break;
        case kReduceNorm1: r = n ? r + std::fabs(v) : std::fabs(v); break;
        case kReduceNorm2: r = n ? r + v * v : v * v; break;
        case kReduceMin: if (!n || v < r) r = v, best[o] = uint32_t(n); break;
        case kReduceMax: if (!n || v > r) r = v, best[o] = uint32_t(n); break;
        case kReduceAmax: if (!n || std::fabs(v) > r) r = std::fabs(v), best[o] = uint32_t(n); break;
      }
    });
    const float be = scalar(beta);
    size_t o = 0;
    each_index(*c, [&](const std::vector<int>& idx, int64_t) {
      float r = acc[o];
      if (d->op == kReduceAvg) r /= float(std::max<int64_t>(count[o], 1));
      if (d->op == kReduceNorm2) r = std::sqrt(r);
      float& out = pc[offset_at(*c, idx)];
      out = r + (be != 0 ? be * out : 0.f);
      if (pi) pi[o] = best[o];
      ++o;
    });
    return kSuccess;
  });
}

// ---- local response normalization (across channels) and divisive normalization (across a
// spatial window of lrnN per dimension), as cuDNN defines them: alpha divided by the window's
// size (lrnN; lrnN^spatial dimensions for divisive normalization)
struct LrnDesc {
  unsigned n = 5;
  double alpha = 1e-4, beta = 0.75, k = 2.0;  // cuDNN's defaults
};
std::set<LrnDesc*> g_lrns;
int f_create_lrn(void** out) { return create_in(g_lrns, out); }
int f_destroy_lrn(void* p) { return destroy_in(g_lrns, p); }
int f_set_lrn(void* p, unsigned n, double alpha, double beta, double k) {
  std::lock_guard l(g_mu);
  LrnDesc* d = live_in(g_lrns, p);
  if (!d || n < 1 || n > 16 || k < 1e-5 || beta < 0.01) return kBadParam;  // CUDNN_LRN_MIN_N.. (cudnn_ops.h)
  d->n = n, d->alpha = alpha, d->beta = beta, d->k = k;
  return kSuccess;
}
int f_get_lrn(void* p, void* n, void* alpha, void* beta, void* k) {
  std::lock_guard l(g_mu);
  LrnDesc* d = live_in(g_lrns, p);
  if (!d) return kBadParam;
  if (n) std::memcpy(n, &d->n, 4);
  if (alpha) std::memcpy(alpha, &d->alpha, 8);
  if (beta) std::memcpy(beta, &d->beta, 8);
  if (k) std::memcpy(k, &d->k, 8);
  return kSuccess;
}
// Each element's window in a packed 4-D NCHW tensor of dims `dm`: across channels (spatial
// false) or over an n x n spatial square, [center - (n-1)/2, center + n - 1 - (n-1)/2], clipped;
// `holders` gives the elements whose windows hold the element instead (the window reversed).
template <class F>
void each_in_window(const int* dm, const LrnDesc& d, bool spatial, bool holders, int n, int c, int h, int w, F f) {
  int behind = int(d.n - 1) / 2, ahead = int(d.n) - 1 - behind;
  if (holders) std::swap(behind, ahead);
  auto at = [&](int c2, int h2, int w2) { return ((int64_t(n) * dm[1] + c2) * dm[2] + h2) * dm[3] + w2; };
  if (!spatial) {
    for (int c2 = std::max(0, c - behind); c2 <= std::min(dm[1] - 1, c + ahead); ++c2) f(at(c2, h, w));
    return;
  }
  for (int h2 = std::max(0, h - behind); h2 <= std::min(dm[2] - 1, h + ahead); ++h2)
    for (int w2 = std::max(0, w - behind); w2 <= std::min(dm[3] - 1, w + ahead); ++w2) f(at(c, h2, w2));
}
template <class F>
void each_nchw(const int* dm, F f) {
  int64_t e = 0;
  for (int n = 0; n < dm[0]; ++n)
    for (int c = 0; c < dm[1]; ++c)
      for (int h = 0; h < dm[2]; ++h)
        for (int w = 0; w < dm[3]; ++w) f(n, c, h, w, e++);
}
double window_scale(const LrnDesc& d, bool spatial) { return d.alpha / (spatial ? double(d.n) * d.n : double(d.n)); }
// s = k + alpha / size * the sum of v^2 over each element's window (v packed NCHW).
std::vector<double> window_sums(const int* dm, const LrnDesc& d, bool spatial, const std::vector<double>& v) {
  std::vector<double> s(v.size());
  each_nchw(dm, [&](int n, int c, int h, int w, int64_t e) {
    double sum = 0;
    each_in_window(dm, d, spatial, false, n, c, h, w, [&](int64_t o) { sum += v[size_t(o)] * v[size_t(o)]; });
    s[size_t(e)] = d.k + window_scale(d, spatial) * sum;
  });
  return s;
}
// The gradient of y = v * s^-beta with respect to v given dy: dv_i = dy_i s_i^-beta -
// 2 beta scale v_i * (the sum over the windows j holding i of dy_j v_j s_j^(-beta-1)).
std::vector<double> window_grad(const int* dm, const LrnDesc& d, bool spatial, const std::vector<double>& v,
                                const std::vector<double>& dy) {
  const std::vector<double> s = window_sums(dm, d, spatial, v);
  std::vector<double> g(v.size());
  each_nchw(dm, [&](int n, int c, int h, int w, int64_t e) {
    double acc = 0;
    each_in_window(dm, d, spatial, true, n, c, h, w,
                   [&](int64_t j) { acc += dy[size_t(j)] * v[size_t(j)] * std::pow(s[size_t(j)], -d.beta - 1); });
    const size_t i = size_t(e);
    g[i] = dy[i] * std::pow(s[i], -d.beta) - 2 * d.beta * window_scale(d, spatial) * v[i] * acc;
  });
  return g;
}
// A 4-D fp32 tensor's elements in NCHW index order (its own strides), and back.
std::vector<double> gather(const TensorDesc& t, const float* p) {
  std::vector<double> v;
  for (int64_t o : offsets_of(t)) v.push_back(p ? p[o] : 0.0);
  return v;
}
void scatter_blend(const TensorDesc& t, float* p, float alpha, const std::vector<double>& v, float beta) {
  const auto os = offsets_of(t);
  for (size_t i = 0; i < os.size(); ++i) p[os[i]] = blend(alpha, float(v[i]), beta, p[os[i]]);
}
bool nchw4(std::initializer_list<const TensorDesc*> ts, const TensorDesc& like) {
  for (const TensorDesc* t : ts)
    if (!t || t->nb != 4 || !same_shape(*t, like) || t->dtype != kDataFloat) return false;
  return true;
}

int f_lrn_fwd(void* handle, void* desc, int mode, void* alpha, void* xd, void* x, void* beta, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    LrnDesc* d = live_in(g_lrns, desc);
    TensorDesc *xt = tensor_desc(xd), *yt = tensor_desc(yd);
    if (!d || mode != 0 || !xt || !yt) return kBadParam;
    if (!nchw4({xt, yt}, *xt)) return fail(kNotSupported, "the fake normalizes 4-D fp32 tensors of one shape");
    float *px = fptr(at, x, span_of(*xt)), *py = fptr(at, y, span_of(*yt));
    if (!px || !py) return kExecutionFailed;
    const std::vector<double> v = gather(*xt, px), s = window_sums(xt->dims, *d, false, v);
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] * std::pow(s[i], -d->beta);
    scatter_blend(*yt, py, scalar(alpha), out, scalar(beta));
    return kSuccess;
  });
}
int f_lrn_bwd(void* handle, void* desc, int mode, void* alpha, void* yd, void* y, void* dyd, void* dy, void* xd, void* x,
              void* beta, void* dxd, void* dx) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    LrnDesc* d = live_in(g_lrns, desc);
    TensorDesc *yt = tensor_desc(yd), *dyt = tensor_desc(dyd), *xt = tensor_desc(xd), *dxt = tensor_desc(dxd);
    if (!d || mode != 0 || !yt || !dyt || !xt || !dxt) return kBadParam;
    if (!nchw4({yt, dyt, xt, dxt}, *xt)) return fail(kNotSupported, "the fake normalizes 4-D fp32 tensors of one shape");
    float *px = fptr(at, x, span_of(*xt)), *pdy = fptr(at, dy, span_of(*dyt)), *pdx = fptr(at, dx, span_of(*dxt));
    if (!px || !pdy || !pdx || !fptr(at, y, span_of(*yt))) return kExecutionFailed;
    scatter_blend(*dxt, pdx, scalar(alpha), window_grad(xt->dims, *d, false, gather(*xt, px), gather(*dyt, pdy)),
                  scalar(beta));
    return kSuccess;
  });
}
// Divisive normalization with precomputed means: v = x - means (zero where means is NULL),
// y = v / (k + alpha / n^2 * the sum of v^2 over an n x n window)^beta; temp and temp2 are
// scratch (v and the sums here).
int f_divnorm_fwd(void* handle, void* desc, int mode, void* alpha, void* xd, void* x, void* means, void* temp,
                  void* temp2, void* beta, void* yd, void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    LrnDesc* d = live_in(g_lrns, desc);
    TensorDesc *xt = tensor_desc(xd), *yt = tensor_desc(yd);
    if (!d || mode != 0 || !xt || !yt || !temp || !temp2) return kBadParam;
    if (!nchw4({xt, yt}, *xt)) return fail(kNotSupported, "the fake normalizes 4-D fp32 tensors of one shape");
    float *px = fptr(at, x, span_of(*xt)), *pm = means ? fptr(at, means, span_of(*xt)) : nullptr,
          *pt = fptr(at, temp, span_of(*xt)), *pt2 = fptr(at, temp2, span_of(*xt)), *py = fptr(at, y, span_of(*yt));
    if (!px || (means && !pm) || !pt || !pt2 || !py) return kExecutionFailed;
    std::vector<double> v = gather(*xt, px);
    const std::vector<double> m = gather(*xt, pm);
    for (size_t i = 0; i < v.size(); ++i) v[i] -= m[i];
    const std::vector<double> s = window_sums(xt->dims, *d, true, v);
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] * std::pow(s[i], -d->beta);
    scatter_blend(*xt, pt, 1, v, 0);
    scatter_blend(*xt, pt2, 1, s, 0);
    scatter_blend(*yt, py, scalar(alpha), out, scalar(beta));
    return kSuccess;
  });
}
int f_divnorm_bwd(void* handle, void* desc, int mode, void* alpha, void* xd, void* x, void* means, void* dy, void* temp,
                  void* temp2, void* beta, void* dxd, void* dx, void* dmeans) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    LrnDesc* d = live_in(g_lrns, desc);
    TensorDesc *xt = tensor_desc(xd), *dxt = tensor_desc(dxd);
    if (!d || mode != 0 || !xt || !dxt || !temp || !temp2) return kBadParam;
    if (!nchw4({xt, dxt}, *xt)) return fail(kNotSupported, "the fake normalizes 4-D fp32 tensors of one shape");
    float *px = fptr(at, x, span_of(*xt)), *pm = means ? fptr(at, means, span_of(*xt)) : nullptr,
          *pdy = fptr(at, dy, span_of(*xt)), *pdx = fptr(at, dx, span_of(*dxt)),
          *pdm = dmeans ? fptr(at, dmeans, span_of(*dxt)) : nullptr;
    if (!px || (means && !pm) || !pdy || !pdx || (dmeans && !pdm) || !fptr(at, temp, span_of(*xt)) ||
        !fptr(at, temp2, span_of(*xt)))
      return kExecutionFailed;
    std::vector<double> v = gather(*xt, px);
    const std::vector<double> m = gather(*xt, pm);
    for (size_t i = 0; i < v.size(); ++i) v[i] -= m[i];
    std::vector<double> g = window_grad(xt->dims, *d, true, v, gather(*xt, pdy));
    scatter_blend(*dxt, pdx, scalar(alpha), g, scalar(beta));
    if (pdm) {  // the means enter as -x does
      for (double& e : g) e = -e;
      scatter_blend(*dxt, pdm, scalar(alpha), g, scalar(beta));
    }
    return kSuccess;
  });
}

// ---- the spatial transformer (cudnn_ops.h), as cuDNN documents it: a 2-D affine grid of
// [N, H, W] (x, y) points in [-1, 1] from N 2x3 matrices theta (x = -1 + 2 w / (W - 1), y alike),
// and a bilinear sampler of NCHW x at those points ((x + 1) (W_in - 1) / 2 in x's pixels), zero
// outside x; fp32
struct StDesc {
  int dtype = -1;  // -1: not set
  int dims[4] = {};
};
std::set<StDesc*> g_sts;
int f_create_st(void** out) { return create_in(g_sts, out); }
int f_destroy_st(void* p) { return destroy_in(g_sts, p); }
int f_set_st(void* p, int sampler, int dtype, int nb, void* dims) {
  std::lock_guard l(g_mu);
  StDesc* d = live_in(g_sts, p);
  if (!d || sampler != 0 || nb != 4 || !dims) return kBadParam;  // CUDNN_SAMPLER_BILINEAR, 2-D
  int dm[4];
  std::memcpy(dm, dims, sizeof dm);
  for (int v : dm)
    if (v <= 0) return kBadParam;
  d->dtype = dtype;
  std::memcpy(d->dims, dm, sizeof dm);
  return kSuccess;
}
// A set fp32 spatial transformer (kBadParam, kNotSupported or kSuccess in *status).
StDesc* st_ready(void* p, int* status) {
  StDesc* d = live_in(g_sts, p);
  *status = !d || d->dtype < 0 ? kBadParam : d->dtype != kDataFloat ? fail(kNotSupported, "the fake samples fp32") : kSuccess;
  return *status == kSuccess ? d : nullptr;
}
double grid_coord(int i, int n) { return n > 1 ? -1.0 + 2.0 * i / (n - 1) : -1.0; }

int f_st_grid_fwd(void* handle, void* desc, void* theta, void* grid) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    int status;
    StDesc* d = st_ready(desc, &status);
    if (!d) return status;
    const int N = d->dims[0], H = d->dims[2], W = d->dims[3];
    float *t = fptr(at, theta, int64_t(N) * 6), *g = fptr(at, grid, int64_t(N) * H * W * 2);
    if (!t || !g) return kExecutionFailed;
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          const double x = grid_coord(w, W), y = grid_coord(h, H);
          const float* m = t + 6 * n;
          float* out = g + ((int64_t(n) * H + h) * W + w) * 2;
          out[0] = float(m[0] * x + m[1] * y + m[2]);
          out[1] = float(m[3] * x + m[4] * y + m[5]);
        }
    return kSuccess;
  });
}
int f_st_grid_bwd(void* handle, void* desc, void* dgrid, void* dtheta) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    int status;
    StDesc* d = st_ready(desc, &status);
    if (!d) return status;
    const int N = d->dims[0], H = d->dims[2], W = d->dims[3];
    float *dg = fptr(at, dgrid, int64_t(N) * H * W * 2), *dt = fptr(at, dtheta, int64_t(N) * 6);
    if (!dg || !dt) return kExecutionFailed;
    for (int n = 0; n < N; ++n) {
      double acc[6] = {};
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          const double x = grid_coord(w, W), y = grid_coord(h, H);
          const float* in = dg + ((int64_t(n) * H + h) * W + w) * 2;
          const double in3[3] = {x, y, 1};
          for (int k = 0; k < 3; ++k) acc[k] += in[0] * in3[k], acc[3 + k] += in[1] * in3[k];
        }
      for (int k = 0; k < 6; ++k) dt[6 * n + k] = float(acc[k]);
    }
    return kSuccess;
  });
}
// The sampler's geometry: x [N, C, Hi, Wi] and y [N, C, H, W] (the transformer's dimensions).
struct Sampler {
  StDesc* st = nullptr;
  TensorDesc *x = nullptr, *y = nullptr;
  int64_t off(const TensorDesc& t, int n, int c, int h, int w) const {
    return int64_t(n) * t.strides[0] + int64_t(c) * t.strides[1] + int64_t(h) * t.strides[2] + int64_t(w) * t.strides[3];
  }
};
int sampler_setup(void* desc, void* xd, void* yd, Sampler* s) {
  int status;
  s->st = st_ready(desc, &status);
  if (!s->st) return status;
  s->x = tensor_desc(xd), s->y = tensor_desc(yd);
  if (!s->x || !s->y || s->x->nb != 4 || s->y->nb != 4) return kBadParam;
  if (s->x->dtype != kDataFloat || s->y->dtype != kDataFloat) return fail(kNotSupported, "the fake samples fp32");
  for (int i = 0; i < 4; ++i)
    if (s->y->dims[i] != s->st->dims[i]) return fail(kBadParam, "the output's dimensions are not the transformer's");
  if (s->x->dims[0] != s->y->dims[0] || s->x->dims[1] != s->y->dims[1]) return kBadParam;
  return kSuccess;
}
// Bilinear weights of grid point (gx, gy) in an Hi x Wi image: the four corners (zero outside).
struct Bilinear {
  int x0, y0;
  double wx, wy, sx, sy;  // the fractions, and d(pixel)/d(grid coordinate)
  Bilinear(double gx, double gy, int hi, int wi) {
    const double ix = (gx + 1) * (wi - 1) / 2, iy = (gy + 1) * (hi - 1) / 2;
    x0 = int(std::floor(ix)), y0 = int(std::floor(iy));
    wx = ix - x0, wy = iy - y0, sx = (wi - 1) / 2.0, sy = (hi - 1) / 2.0;
  }
};
int f_st_sampler_fwd(void* handle, void* desc, void* alpha, void* xd, void* x, void* grid, void* beta, void* yd,
                     void* y) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    Sampler s;
    if (int st = sampler_setup(desc, xd, yd, &s)) return st;
    const int N = s.y->dims[0], C = s.y->dims[1], H = s.y->dims[2], W = s.y->dims[3], Hi = s.x->dims[2],
              Wi = s.x->dims[3];
    float *px = fptr(at, x, span_of(*s.x)), *pg = fptr(at, grid, int64_t(N) * H * W * 2),
          *py = fptr(at, y, span_of(*s.y));
    if (!px || !pg || !py) return kExecutionFailed;
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          const float* g = pg + ((int64_t(n) * H + h) * W + w) * 2;
          const Bilinear b(g[0], g[1], Hi, Wi);
          for (int c = 0; c < C; ++c) {
            double v = 0;
            for (int dy = 0; dy < 2; ++dy)
              for (int dx = 0; dx < 2; ++dx) {
                const int xi = b.x0 + dx, yi = b.y0 + dy;
                if (xi < 0 || yi < 0 || xi >= Wi || yi >= Hi) continue;
                v += (dx ? b.wx : 1 - b.wx) * (dy ? b.wy : 1 - b.wy) * px[s.off(*s.x, n, c, yi, xi)];
              }
            float& out = py[s.off(*s.y, n, c, h, w)];
            out = blend(scalar(alpha), float(v), scalar(beta), out);
          }
        }
    return kSuccess;
  });
}
int f_st_sampler_bwd(void* handle, void* desc, void* alpha, void* xd, void* x, void* beta, void* dxd, void* dx,
                     void* alpha_dgrid, void* dyd, void* dy, void* grid, void* beta_dgrid, void* dgrid) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    Sampler s;
    if (int st = sampler_setup(desc, xd, dyd, &s)) return st;
    TensorDesc* dxt = tensor_desc(dxd);
    if (!dxt || !same_shape(*dxt, *s.x) || dxt->dtype != kDataFloat) return kBadParam;
    const int N = s.y->dims[0], C = s.y->dims[1], H = s.y->dims[2], W = s.y->dims[3], Hi = s.x->dims[2],
              Wi = s.x->dims[3];
    float *px = fptr(at, x, span_of(*s.x)), *pdx = fptr(at, dx, span_of(*dxt)), *pdy = fptr(at, dy, span_of(*s.y)),
          *pg = fptr(at, grid, int64_t(N) * H * W * 2), *pdg = fptr(at, dgrid, int64_t(N) * H * W * 2);
    if (!px || !pdx || !pdy || !pg || !pdg) return kExecutionFailed;
    std::vector<double> acc(offsets_of(*dxt).size(), 0.0);  // dx in NCHW index order
    auto index = [&](int n, int c, int h, int w) { return ((size_t(n) * C + c) * Hi + h) * Wi + w; };
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          const int64_t gi = ((int64_t(n) * H + h) * W + w) * 2;
          const Bilinear b(pg[gi], pg[gi + 1], Hi, Wi);
          double ggx = 0, ggy = 0;
          for (int c = 0; c < C; ++c) {
            const double g = pdy[s.off(*s.y, n, c, h, w)];
            for (int oy = 0; oy < 2; ++oy)
              for (int ox = 0; ox < 2; ++ox) {
                const int xi = b.x0 + ox, yi = b.y0 + oy;
                if (xi < 0 || yi < 0 || xi >= Wi || yi >= Hi) continue;
                const double fx = ox ? b.wx : 1 - b.wx, fy = oy ? b.wy : 1 - b.wy;
                const double v = px[s.off(*s.x, n, c, yi, xi)];
                acc[index(n, c, yi, xi)] += g * fx * fy;
                ggx += g * v * fy * (ox ? 1 : -1) * b.sx;
                ggy += g * v * fx * (oy ? 1 : -1) * b.sy;
              }
          }
          pdg[gi] = blend(scalar(alpha_dgrid), float(ggx), scalar(beta_dgrid), pdg[gi]);
          pdg[gi + 1] = blend(scalar(alpha_dgrid), float(ggy), scalar(beta_dgrid), pdg[gi + 1]);
        }
    scatter_blend(*dxt, pdx, scalar(alpha), acc, scalar(beta));
    return kSuccess;
  });
}

// ---- CTC loss (cudnn_adv.h): probabilities T x N x A taken as unnormalized (softmax applied,
// CUDNN_LOSS_NORMALIZATION_SOFTMAX), blank 0, labels concatenated; costs -log p(labels), the
// gradient with respect to the inputs softmax - the labels' posteriors (Graves' alpha-beta), zero
// past a sequence's input length and for a sequence no alignment fits (its cost infinite; left as
// it was under CUDNN_CTC_SKIP_OOB_GRADIENTS); fp32
struct CtcDesc {
  int ctype = 0, norm = 0, nan = 0, grad_mode = 0, max_label = 0;
};
std::set<CtcDesc*> g_ctcs;
constexpr int kNormSoftmax = 1, kSkipOobGradients = 1;
int f_create_ctc(void** out) { return create_in(g_ctcs, out); }
int f_destroy_ctc(void* p) { return destroy_in(g_ctcs, p); }
int ctc_set(void* p, int ctype, int norm, int nan, int grad_mode, int max_label) {
  std::lock_guard l(g_mu);
  CtcDesc* d = live_in(g_ctcs, p);
  if (!d || norm < 0 || norm > 1 || max_label < 0) return kBadParam;
  *d = CtcDesc{ctype, norm, nan, grad_mode, max_label};
  return kSuccess;
}
int f_set_ctc(void* p, int ctype) { return ctc_set(p, ctype, 0, 0, 0, 0); }
int f_set_ctc_ex(void* p, int ctype, int norm, int nan) { return ctc_set(p, ctype, norm, nan, 0, 0); }
int f_set_ctc_v8(void* p, int ctype, int norm, int nan, int max_label) { return ctc_set(p, ctype, norm, nan, 0, max_label); }
int f_set_ctc_v9(void* p, int ctype, int norm, int grad_mode, int max_label) {
  return ctc_set(p, ctype, norm, 0, grad_mode, max_label);
}
int ctc_get(void* p, void* ctype, void* norm, void* nan, void* grad_mode, void* max_label) {
  std::lock_guard l(g_mu);
  CtcDesc* d = live_in(g_ctcs, p);
  if (!d || !ctype) return kBadParam;
  put(ctype, d->ctype), put(norm, d->norm), put(nan, d->nan), put(grad_mode, d->grad_mode), put(max_label, d->max_label);
  return kSuccess;
}
int f_get_ctc(void* p, void* ctype) { return ctc_get(p, ctype, nullptr, nullptr, nullptr, nullptr); }
int f_get_ctc_ex(void* p, void* ctype, void* norm, void* nan) { return ctc_get(p, ctype, norm, nan, nullptr, nullptr); }
int f_get_ctc_v8(void* p, void* ctype, void* norm, void* nan, void* max_label) {
  return ctc_get(p, ctype, norm, nan, nullptr, max_label);
}
int f_get_ctc_v9(void* p, void* ctype, void* norm, void* grad_mode, void* max_label) {
  return ctc_get(p, ctype, norm, nullptr, grad_mode, max_label);
}
// The probabilities' descriptor (T x N x A fp32), the gradients' (its shape, or NULL) and the
// workspace the fake asks for (8 bytes per probability).
int ctc_shapes(void* pd, void* gd, void* cd, TensorDesc** p, TensorDesc** g, CtcDesc** c, size_t* workspace) {
  *p = tensor_desc(pd), *g = gd ? tensor_desc(gd) : nullptr, *c = live_in(g_ctcs, cd);
  if (!*p || (gd && !*g) || !*c || (*p)->nb != 3) return kBadParam;
  if (*g && !same_shape(**g, **p)) return kBadParam;
  if ((*p)->dtype != kDataFloat || (*g && (*g)->dtype != kDataFloat)) return fail(kNotSupported, "the fake computes fp32");
  *workspace = size_t(8) * size_t((*p)->dims[0]) * (*p)->dims[1] * (*p)->dims[2];
  return kSuccess;
}
int f_ctc_ws(void* handle, void* pd, void* gd, void*, void*, void*, int algo, void* cd, void* size) {
  std::lock_guard l(g_mu);
  TensorDesc *p, *g;
  CtcDesc* c;
  size_t ws = 0;
  if (!g_handles.count(static_cast<Handle*>(handle)) || !size || algo < 0 || algo > 1) return kBadParam;
  if (int st = ctc_shapes(pd, gd, cd, &p, &g, &c, &ws)) return st;
  std::memcpy(size, &ws, 8);
  return kSuccess;
}
int f_ctc_ws_v8(void* handle, int algo, void* cd, void* pd, void* gd, void* size) {
  return f_ctc_ws(handle, pd, gd, nullptr, nullptr, nullptr, algo, cd, size);
}
double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}
// One sequence: its cost, and its gradient (T x A, zero past its input length) into `grad`.
double ctc_sequence(const std::vector<double>& logits, int T, int A, int len, const int* labels, int L,
                    std::vector<double>* grad) {
  std::vector<double> lp(size_t(T) * A);  // log softmax
  for (int t = 0; t < T; ++t) {
    double m = -INFINITY;
    for (int k = 0; k < A; ++k) m = log_add(m, logits[size_t(t) * A + k]);
    for (int k = 0; k < A; ++k) lp[size_t(t) * A + k] = logits[size_t(t) * A + k] - m;
  }
  const int S = 2 * L + 1;
  auto lab = [&](int s) { return s % 2 ? labels[s / 2] : 0; };
  std::vector<double> la(size_t(len) * S, -INFINITY), lb(size_t(len) * S, -INFINITY);
  auto y = [&](int t, int s) { return lp[size_t(t) * A + lab(s)]; };
  if (len > 0) {
    la[0] = y(0, 0);
    if (S > 1) la[1] = y(0, 1);
    lb[size_t(len - 1) * S + S - 1] = y(len - 1, S - 1);
    if (S > 1) lb[size_t(len - 1) * S + S - 2] = y(len - 1, S - 2);
  }
  for (int t = 1; t < len; ++t)
    for (int s = 0; s < S; ++s) {
      double v = la[size_t(t - 1) * S + s];
      if (s >= 1) v = log_add(v, la[size_t(t - 1) * S + s - 1]);
      if (s >= 2 && lab(s) != 0 && lab(s) != lab(s - 2)) v = log_add(v, la[size_t(t - 1) * S + s - 2]);
      la[size_t(t) * S + s] = v + y(t, s);
    }
  for (int t = len - 2; t >= 0; --t)
    for (int s = 0; s < S; ++s) {
      double v = lb[size_t(t + 1) * S + s];
      if (s + 1 < S) v = log_add(v, lb[size_t(t + 1) * S + s + 1]);
      if (s + 2 < S && lab(s) != 0 && lab(s) != lab(s + 2)) v = log_add(v, lb[size_t(t + 1) * S + s + 2]);
      lb[size_t(t) * S + s] = v + y(t, s);
    }
  double logp = -INFINITY;
  if (len > 0) logp = log_add(la[size_t(len - 1) * S + S - 1], S > 1 ? la[size_t(len - 1) * S + S - 2] : -INFINITY);
  grad->assign(size_t(T) * A, 0.0);
  if (logp == -INFINITY) return INFINITY;
  for (int t = 0; t < len; ++t) {
    std::vector<double> post(size_t(A), -INFINITY);
    for (int s = 0; s < S; ++s)
      post[size_t(lab(s))] = log_add(post[size_t(lab(s))], la[size_t(t) * S + s] + lb[size_t(t) * S + s]);
    for (int k = 0; k < A; ++k)
      (*grad)[size_t(t) * A + k] = std::exp(lp[size_t(t) * A + k]) - std::exp(post[size_t(k)] - lp[size_t(t) * A + k] - logp);
  }
  return -logp;
}
int ctc_run(const FakeDeviceAt& at, TensorDesc* p, TensorDesc* g, CtcDesc* c, void* probs, const int* labels,
            const int* label_lengths, const int* input_lengths, void* costs, void* gradients, void* ws,
            size_t ws_bytes, size_t ws_needed) {
  if (c->norm != kNormSoftmax) return fail(kNotSupported, "the fake computes CUDNN_LOSS_NORMALIZATION_SOFTMAX");
  if (ws_bytes < ws_needed || (ws_needed && !ws)) return kBadParam;
  const int T = p->dims[0], N = p->dims[1], A = p->dims[2];
  float *pp = fptr(at, probs, span_of(*p)), *pc = fptr(at, costs, N), *pg = g && gradients ? fptr(at, gradients, span_of(*g)) : nullptr;
  if (!pp || !pc || (gradients && g && !pg)) return kExecutionFailed;
  int64_t first = 0;
  for (int n = 0; n < N; ++n) {
    if (label_lengths[n] < 0 || label_lengths[n] > 256 || input_lengths[n] < 0 || input_lengths[n] > T) return kBadParam;
    std::vector<double> logits(size_t(T) * A), grad;
    for (int t = 0; t < T; ++t)
      for (int k = 0; k < A; ++k)
        logits[size_t(t) * A + k] = pp[int64_t(t) * p->strides[0] + int64_t(n) * p->strides[1] + int64_t(k) * p->strides[2]];
    for (int i = 0; i < label_lengths[n]; ++i)
      if (labels[first + i] <= 0 || labels[first + i] >= A) return kBadParam;
    pc[n] = float(ctc_sequence(logits, T, A, input_lengths[n], labels + first, label_lengths[n], &grad));
    first += label_lengths[n];
    // CUDNN_CTC_SKIP_OOB_GRADIENTS (_v9): a sequence no alignment fits keeps its gradients as they were.
    const bool skip = std::isinf(pc[n]) && c->grad_mode == kSkipOobGradients;
    if (pg && !skip)
      for (int t = 0; t < T; ++t)
        for (int k = 0; k < A; ++k)
          pg[int64_t(t) * g->strides[0] + int64_t(n) * g->strides[1] + int64_t(k) * g->strides[2]] = float(grad[size_t(t) * A + k]);
  }
  return kSuccess;
}
int f_ctc(void* handle, void* pd, void* probs, void* labels, void* label_lengths, void* input_lengths, void* costs,
          void* gd, void* gradients, int algo, void* cd, void* ws, size_t ws_bytes) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc *p, *g;
    CtcDesc* c;
    size_t need = 0;
    if (algo < 0 || algo > 1 || !labels || !label_lengths || !input_lengths) return kBadParam;
    if (int st = ctc_shapes(pd, gd, cd, &p, &g, &c, &need)) return st;
    return ctc_run(at, p, g, c, probs, static_cast<const int*>(labels), static_cast<const int*>(label_lengths),
                   static_cast<const int*>(input_lengths), costs, gradients, ws, ws_bytes, need);
  });
}
int f_ctc_v8(void* handle, int algo, void* cd, void* pd, void* probs, void* labels, void* label_lengths,
             void* input_lengths, void* costs, void* gd, void* gradients, size_t ws_bytes, void* ws) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    TensorDesc *p, *g;
    CtcDesc* c;
    size_t need = 0;
    if (algo < 0 || algo > 1) return kBadParam;
    if (int st = ctc_shapes(pd, gd, cd, &p, &g, &c, &need)) return st;
    const int N = p->dims[1];
    // The arrays are device memory here: the label lengths say how many labels there are.
    auto* ll = reinterpret_cast<const int*>(label_lengths ? at(reinterpret_cast<uint64_t>(label_lengths), 4 * size_t(N)) : nullptr);
    auto* il = reinterpret_cast<const int*>(input_lengths ? at(reinterpret_cast<uint64_t>(input_lengths), 4 * size_t(N)) : nullptr);
    if (!ll || !il) return kExecutionFailed;
    size_t total = 0;
    for (int n = 0; n < N; ++n) {
      if (ll[n] < 0 || ll[n] > c->max_label) return kBadParam;  // _v8: at most the descriptor's longest label
      total += size_t(ll[n]);
    }
    auto* lab = reinterpret_cast<const int*>(labels ? at(reinterpret_cast<uint64_t>(labels), std::max<size_t>(4 * total, 4)) : nullptr);
    if (!lab) return kExecutionFailed;
    return ctc_run(at, p, g, c, probs, lab, ll, il, costs, gradients, ws, ws_bytes, need);
  });
}

// ---- recurrent networks (the v8 RNN API): RNN and RNN data descriptors, cuDNN's weight space
// layout, and fp32 forward (inference and training), backward data and backward weights of
// unidirectional RNN_RELU/RNN_TANH/LSTM/GRU networks of any depth with linear input and no
// projection, computed on the CPU by cuDNN's documented cell formulas (cudnnRNNMode_t).
// The reserve space holds, per layer, step and sequence, what the backward passes need (the
// layer's input, the gates, the states and the gates' gradients); the workspace is none.
// Dropout between layers (a probability above 0 with more than one layer), bidirectional
// networks, projections, skip input and other data types answer CUDNN_STATUS_NOT_SUPPORTED; the
// backward passes ignore LSTM cell clipping.

struct RnnDesc {
  bool set = false;
  int algo = 0, cell = 0, bias = 2, dir = 0, input = 0, dtype = 0, prec = 0, math = 0;
  int in = 0, hidden = 0, proj = 0, layers = 0;
  void* dropout = nullptr;
  unsigned aux = 0;
  int clip = 0, clip_nan = 0;
  double lclip = 0, rclip = 0;
};
struct RnnDataDesc {
  bool set = false;
  int dtype = 0, layout = 0, max_seq = 0, batch = 0, vec = 0;
  std::vector<int> lens;
  float fill = 0;
  bool has_fill = false;
};
std::set<RnnDesc*> g_rnns;
std::set<RnnDataDesc*> g_rnn_data;
constexpr int kRnnRelu = 0, kRnnTanh = 1, kLstm = 2, kGru = 3;
constexpr int kBiasNone = 0, kBiasInput = 1, kBiasDouble = 2, kBiasRecurrent = 3;
constexpr int kSeqMajorUnpacked = 0, kSeqMajorPacked = 1, kBatchMajorUnpacked = 2;
constexpr int kWgradAdd = 0, kWgradSet = 1;

int gates_of(int cell) { return cell == kLstm ? 4 : cell == kGru ? 3 : 1; }

int f_create_rnn(void** out) { return create_in(g_rnns, out); }
int f_destroy_rnn(void* p) { return destroy_in(g_rnns, p); }
int f_create_rnn_data(void** out) { return create_in(g_rnn_data, out); }
int f_destroy_rnn_data(void* p) { return destroy_in(g_rnn_data, p); }

int f_set_rnn_v8(void* p, int algo, int cell, int bias, int dir, int input, int dtype, int prec, int math, int in,
                 int hidden, int proj, int layers, void* dropout, unsigned aux) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!d || algo < 0 || algo > 3 || cell < 0 || cell > 3 || bias < 0 || bias > 3 || dir < 0 || dir > 1 || input < 0 ||
      input > 1 || (dtype != kDataFloat && dtype != kDataDouble && dtype != 2) || math < 0 || math > 3 || in <= 0 ||
      hidden <= 0 || layers <= 0 || proj <= 0 || proj > hidden || (proj != hidden && cell != kLstm) || aux > 1)
    return fail(kBadParam, "cudnnSetRNNDescriptor_v8: a setting out of range");
  DropoutDesc* drop = dropout ? live_in(g_dropouts, dropout) : nullptr;
  if (dropout && (!drop || !drop->set))  // "a previously created and initialized dropout descriptor"
    return fail(kBadParam, "cudnnSetRNNDescriptor_v8: not a dropout descriptor that is set");
  *d = RnnDesc{true, algo, cell, bias, dir, input, dtype, prec, math, in, hidden, proj, layers, dropout, aux};
  return kSuccess;
}
int f_get_rnn_v8(void* p, void* algo, void* cell, void* bias, void* dir, void* input, void* dtype, void* prec,
                 void* math, void* in, void* hidden, void* proj, void* layers, void* dropout, void* aux) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!d || !d->set) return fail(kBadParam, "cudnnGetRNNDescriptor_v8: not a set RNN descriptor");
  void* outs[] = {algo, cell, bias, dir, input, dtype, prec, math, in, hidden, proj, layers, dropout, aux};
  for (void* o : outs)
    if (!o) return kBadParam;
  put(algo, d->algo), put(cell, d->cell), put(bias, d->bias), put(dir, d->dir), put(input, d->input);
  put(dtype, d->dtype), put(prec, d->prec), put(math, d->math), put(in, d->in), put(hidden, d->hidden);
  put(proj, d->proj), put(layers, d->layers), put(aux, int(d->aux));
  std::memcpy(dropout, &d->dropout, 8);
  return kSuccess;
}
int f_rnn_set_clip_v8(void* p, int mode, int nan, double lclip, double rclip) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!d || !d->set || mode < 0 || mode > 1 || nan < 0 || nan > 1 || (mode == 1 && lclip > rclip))
    return fail(kBadParam, "cudnnRNNSetClip: a setting out of range");
  d->clip = mode, d->clip_nan = nan, d->lclip = lclip, d->rclip = rclip;
  return kSuccess;
}
int f_rnn_set_clip_v9(void* p, int mode, double lclip, double rclip) {
  return f_rnn_set_clip_v8(p, mode, 0, lclip, rclip);
}
int f_rnn_get_clip_v8(void* p, void* mode, void* nan, void* lclip, void* rclip) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!d || !d->set || !mode || !nan || !lclip || !rclip) return kBadParam;
  put(mode, d->clip), put(nan, d->clip_nan);
  std::memcpy(lclip, &d->lclip, 8);
  std::memcpy(rclip, &d->rclip, 8);
  return kSuccess;
}
int f_rnn_get_clip_v9(void* p, void* mode, void* lclip, void* rclip) {
  int nan = 0;
  return f_rnn_get_clip_v8(p, mode, &nan, lclip, rclip);
}
int f_build_rnn_dynamic(void* handle, void* p, int mini_batch) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!g_handles.count(static_cast<Handle*>(handle)) || !d || !d->set || mini_batch <= 0) return kBadParam;
  return kSuccess;  // the fake computes every algorithm the same way: nothing to build
}

int f_set_rnn_data(void* p, int dtype, int layout, int max_seq, int batch, int vec, void* lens, void* fill) {
  std::lock_guard l(g_mu);
  RnnDataDesc* d = live_in(g_rnn_data, p);
  if (!d || (dtype != kDataFloat && dtype != kDataDouble && dtype != 2) || layout < 0 || layout > 2 || max_seq <= 0 ||
      batch <= 0 || vec <= 0 || !lens)
    return fail(kBadParam, "cudnnSetRNNDataDescriptor: a setting out of range");
  std::vector<int> v(static_cast<size_t>(batch));
  std::memcpy(v.data(), lens, 4 * size_t(batch));
  for (size_t b = 0; b < v.size(); ++b) {
    if (v[b] < 0 || v[b] > max_seq) return fail(kBadParam, "cudnnSetRNNDataDescriptor: a sequence length out of range");
    if (layout == kSeqMajorPacked && b > 0 && v[b] > v[b - 1])
      return fail(kBadParam, "cudnnSetRNNDataDescriptor: packed sequences must be sorted longest first");
  }
  *d = RnnDataDesc{true, dtype, layout, max_seq, batch, vec, std::move(v), 0, fill != nullptr};
  if (fill) std::memcpy(&d->fill, fill, 4);
  return kSuccess;
}

int f_get_rnn_data(void* p, void* dtype, void* layout, void* max_seq, void* batch, void* vec, int requested, void* lens,
                   void* fill) {
  std::lock_guard l(g_mu);
  RnnDataDesc* d = live_in(g_rnn_data, p);
  if (!d || !d->set || !dtype || !layout || !max_seq || !batch || !vec || requested < 0 || (requested > 0 && !lens))
    return fail(kBadParam, "cudnnGetRNNDataDescriptor: not a set RNN data descriptor, or no room");
  put(dtype, d->dtype), put(layout, d->layout), put(max_seq, d->max_seq), put(batch, d->batch), put(vec, d->vec);
  if (lens) std::memcpy(lens, d->lens.data(), 4 * size_t(std::min(requested, d->batch)));
  if (fill) std::memcpy(fill, &d->fill, 4);
  return kSuccess;
}

// The weight space: per pseudo-layer, its matrices (linLayerID order: W for each gate, then R
// for each gate; hidden x input rows by columns, row-major), then its biases in the same order.
struct RnnWeights {
  int64_t total = 0;                                     // elements
  std::vector<int64_t> matrix, bias;                     // [pseudo * 2G + id]: element offset, -1 absent
  std::vector<int> cols;                                 // [pseudo * 2G + id]: the matrix's columns
};
RnnWeights weights_of(const RnnDesc& d) {
  const int g = gates_of(d.cell), dirs = d.dir + 1, n = 2 * g;
  RnnWeights w;
  w.matrix.assign(size_t(d.layers * dirs * n), -1);
  w.bias.assign(w.matrix.size(), -1);
  w.cols.assign(w.matrix.size(), 0);
  for (int pl = 0; pl < d.layers * dirs; ++pl) {
    const int layer = pl / dirs;
    const int in = layer == 0 ? d.in : d.proj * dirs;
    for (int id = 0; id < n; ++id) {
      const bool input_matrix = id < g;
      if (input_matrix && layer == 0 && d.input == 1) continue;  // skip input: no matrix
      const size_t k = size_t(pl * n + id);
      w.cols[k] = input_matrix ? in : d.proj;
      w.matrix[k] = w.total;
      w.total += int64_t(d.hidden) * w.cols[k];
    }
    for (int id = 0; id < n; ++id) {
      const bool input_bias = id < g;
      if (d.bias == kBiasNone || (d.bias == kBiasInput && !input_bias) || (d.bias == kBiasRecurrent && input_bias))
        continue;
      w.bias[size_t(pl * n + id)] = w.total;
      w.total += d.hidden;
    }
  }
  return w;
}
int f_rnn_weight_space_size(void* handle, void* p, void* size) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!g_handles.count(static_cast<Handle*>(handle)) || !d || !d->set || !size) return kBadParam;
  const size_t bytes = size_t(weights_of(*d).total) * size_t(data_bytes(d->dtype));
  std::memcpy(size, &bytes, 8);
  return kSuccess;
}
int f_rnn_weight_params(void* handle, void* p, int pseudo, size_t wsize, void* wspace, int id, void* md, void* maddr,
                        void* bd, void* baddr) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  if (!g_handles.count(static_cast<Handle*>(handle)) || !d || !d->set) return kBadParam;
  const RnnWeights w = weights_of(*d);
  const int n = 2 * gates_of(d->cell), es = data_bytes(d->dtype);
  if (pseudo < 0 || pseudo >= d->layers * (d->dir + 1) || id < 0 || id >= n || wsize < size_t(w.total) * size_t(es) ||
      !wspace)
    return fail(kBadParam, "cudnnGetRNNWeightParams: a pseudo-layer, linear layer or weight space out of range");
  TensorDesc *mt = tensor_desc(md), *bt = tensor_desc(bd);
  if ((md && !mt) || (bd && !bt)) return kBadParam;
  const size_t k = size_t(pseudo * n + id);
  auto at = [&](int64_t off) { return off < 0 ? nullptr : static_cast<char*>(wspace) + off * es; };
  if (maddr) {
    void* m = at(w.matrix[k]);
    std::memcpy(maddr, &m, 8);
  }
  if (baddr) {
    void* b = at(w.bias[k]);
    std::memcpy(baddr, &b, 8);
  }
  if (mt && w.matrix[k] >= 0) {
    const int dims[3] = {1, d->hidden, w.cols[k]}, strides[3] = {d->hidden * w.cols[k], w.cols[k], 1};
    set_nd_locked(mt, d->dtype, 3, dims, strides);
  }
  if (bt && w.bias[k] >= 0) {
    const int dims[3] = {1, d->hidden, 1}, strides[3] = {d->hidden, 1, 1};
    set_nd_locked(bt, d->dtype, 3, dims, strides);
  }
  return kSuccess;
}

// The fake's reserve space: per layer, step and sequence, a record of the layer's input (max of
// the input and hidden sizes), the G activated gates, one more vector (LSTM: tanh(c); GRU: the
// recurrent product of the new gate), c, h, and the gates' gradients by input and by recurrence.
struct RnnShape {
  const RnnDesc* d = nullptr;
  const RnnDataDesc* x = nullptr;
  int g = 0, h = 0, in = 0, wide = 0;
  int64_t record = 0;  // floats per (layer, step, sequence)
  int64_t reserve_floats() const { return int64_t(d->layers) * x->max_seq * x->batch * record; }
};
RnnShape rnn_shape(const RnnDesc& d, const RnnDataDesc& x) {
  RnnShape s;
  s.d = &d, s.x = &x, s.g = gates_of(d.cell), s.h = d.hidden, s.in = d.in, s.wide = std::max(d.in, d.hidden);
  s.record = s.wide + int64_t(s.g + 1) * s.h + 2 * s.h + 2 * int64_t(s.g) * s.h;
  return s;
}
int f_rnn_temp_sizes(void* handle, void* p, int mode, void* xd, void* ws, void* rs) {
  std::lock_guard l(g_mu);
  RnnDesc* d = live_in(g_rnns, p);
  RnnDataDesc* x = live_in(g_rnn_data, xd);
  if (!g_handles.count(static_cast<Handle*>(handle)) || !d || !d->set || !x || !x->set || mode < 0 || mode > 1 || !ws)
    return kBadParam;
  const size_t work = 0, reserve = mode == 1 ? size_t(rnn_shape(*d, *x).reserve_floats()) * 4 : 0;
  std::memcpy(ws, &work, 8);
  if (rs) std::memcpy(rs, &reserve, 8);
  return kSuccess;
}

// One call's operands checked against the descriptors: what the fake computes (see above).
struct RnnCall {
  RnnShape s;
  const RnnDataDesc* y = nullptr;
  RnnWeights w;
  int64_t state = 0;  // elements of hx/cx: layers x batch x hidden
};
// (cell_states: the call takes an LSTM's cDesc; cudnnRNNBackwardWeights_v8 takes none.)
int rnn_check(void* p, void* xd, void* yd, void* hd, void* cd, size_t wsize, RnnCall* c, bool cell_states = true) {
  RnnDesc* d = live_in(g_rnns, p);
  RnnDataDesc *x = live_in(g_rnn_data, xd), *y = live_in(g_rnn_data, yd);
  TensorDesc *ht = tensor_desc(hd), *ct = tensor_desc(cd);
  if (!d || !d->set || !x || !x->set || !y || !y->set || !ht || (cd && !ct) || (cell_states && d->cell == kLstm && !ct))
    return fail(kBadParam, "an RNN call: a descriptor that is not set");
  if (d->dtype != kDataFloat || d->prec != kDataFloat || x->dtype != kDataFloat || y->dtype != kDataFloat)
    return fail(kNotSupported, "the fake computes fp32 RNNs");
  if (d->dir != 0 || d->proj != d->hidden || d->input != 0)
    return fail(kNotSupported, "the fake computes unidirectional RNNs with linear input and no projection");
  if (d->dropout && !live_in(g_dropouts, d->dropout))
    return fail(kBadParam, "an RNN call: the RNN descriptor's dropout descriptor was destroyed");
  if (d->layers > 1 && d->dropout && static_cast<DropoutDesc*>(d->dropout)->p > 0)
    return fail(kNotSupported, "the fake applies no dropout between layers");
  if (x->vec != d->in || y->vec != d->hidden || x->batch != y->batch || x->max_seq != y->max_seq ||
      x->layout != y->layout || x->lens != y->lens)
    return fail(kBadParam, "an RNN call: x and y do not match the RNN descriptor or each other");
  for (TensorDesc* t : {ht, ct}) {
    if (!t) continue;
    if (t->dtype != kDataFloat || t->nb != 3 || t->dims[0] != d->layers || t->dims[1] != x->batch ||
        t->dims[2] != d->hidden || t->strides[2] != 1 || t->strides[1] != d->hidden ||
        t->strides[0] != x->batch * d->hidden)
      return fail(kBadParam, "an RNN call: hDesc/cDesc is not a packed {layers, batch, hidden} tensor");
  }
  c->s = rnn_shape(*d, *x);
  c->y = y;
  c->w = weights_of(*d);
  if (wsize < size_t(c->w.total) * 4) return fail(kBadParam, "an RNN call: the weight space is too small");
  c->state = int64_t(d->layers) * x->batch * d->hidden;
  return kSuccess;
}
// Where vector (t, b) of RNN data `x` is (in vectors), by its layout.
int64_t rnn_row(const RnnDataDesc& x, int t, int b) {
  if (x.layout == kSeqMajorUnpacked) return int64_t(t) * x.batch + b;
  if (x.layout == kBatchMajorUnpacked) return int64_t(b) * x.max_seq + t;
  int64_t row = 0;
  for (int u = 0; u < t; ++u)
    for (int len : x.lens) row += len > u;
  return row + b;
}
int64_t rnn_rows(const RnnDataDesc& x) {
  if (x.layout != kSeqMajorPacked) return int64_t(x.max_seq) * x.batch;
  int64_t n = 0;
  for (int len : x.lens) n += len;
  return n;
}
float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

// The parts of one reserve record.
struct RnnRecord {
  float *in, *act, *extra, *c, *h, *dw, *dr;
};
RnnRecord record_at(float* reserve, const RnnShape& s, int layer, int t, int b) {
  float* r = reserve + ((int64_t(layer) * s.x->max_seq + t) * s.x->batch + b) * s.record;
  RnnRecord q;
  q.in = r, q.act = r + s.wide, q.extra = q.act + int64_t(s.g) * s.h, q.c = q.extra + s.h, q.h = q.c + s.h;
  q.dw = q.h + s.h, q.dr = q.dw + int64_t(s.g) * s.h;
  return q;
}
// Matrix id's row j dotted with v (0 where the matrix is absent), and the bias (0 where absent).
float mat_dot(const float* w, const RnnWeights& rw, size_t k, int j, const float* v) {
  if (rw.matrix[k] < 0) return 0;
  const float* row = w + rw.matrix[k] + int64_t(j) * rw.cols[k];
  float acc = 0;
  for (int i = 0; i < rw.cols[k]; ++i) acc += row[i] * v[i];
  return acc;
}
float bias_of(const float* w, const RnnWeights& rw, size_t k, int j) { return rw.bias[k] < 0 ? 0 : w[rw.bias[k] + j]; }

int f_rnn_forward(void* handle, void* p, int mode, void*, void* xd, void* x, void* yd, void* y, void* hd, void* hx,
                  void* hy, void* cd, void* cx, void* cy, size_t wsize, void* wspace, size_t, void*, size_t rsize,
                  void* rspace) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    RnnCall c;
    if (int st = rnn_check(p, xd, yd, hd, cd, wsize, &c)) return st;
    if (mode < 0 || mode > 1) return kBadParam;
    const RnnShape& s = c.s;
    const RnnDesc& d = *s.d;
    const RnnDataDesc& xs = *s.x;
    const bool training = mode == 1;
    if (training && (!rspace || rsize < size_t(s.reserve_floats()) * 4))
      return fail(kBadParam, "cudnnRNNForward: training needs the reserve space cudnnGetRNNTempSpaceSizes gives");
    float *px = fptr(at, x, rnn_rows(xs) * s.in), *py = fptr(at, y, rnn_rows(xs) * s.h), *pw = fptr(at, wspace, c.w.total);
    float *phx = fptr(at, hx, c.state), *phy = fptr(at, hy, c.state), *pcx = fptr(at, cx, c.state),
          *pcy = fptr(at, cy, c.state);
    std::vector<float> scratch;
    float* pr = training ? fptr(at, rspace, s.reserve_floats()) : nullptr;
    if (!training) {
      scratch.resize(size_t(s.reserve_floats()));
      pr = scratch.data();
    }
    if (!px || !py || !pw || !pr || (hx && !phx) || (hy && !phy) || (cx && !pcx) || (cy && !pcy)) return kExecutionFailed;
    const int g = s.g, h = s.h, n = 2 * g, B = xs.batch;
    std::vector<float> hstate(static_cast<size_t>(h)), cstate(static_cast<size_t>(h));
    for (int layer = 0; layer < d.layers; ++layer) {
      const int in = layer == 0 ? s.in : h;
      for (int b = 0; b < B; ++b) {
        const int64_t st = (int64_t(layer) * B + b) * h;
        for (int j = 0; j < h; ++j) hstate[size_t(j)] = phx ? phx[st + j] : 0, cstate[size_t(j)] = pcx ? pcx[st + j] : 0;
        for (int t = 0; t < xs.lens[size_t(b)]; ++t) {
          RnnRecord r = record_at(pr, s, layer, t, b);
          const float* u = layer == 0 ? px + rnn_row(xs, t, b) * s.in : record_at(pr, s, layer - 1, t, b).h;
          std::memmove(r.in, u, size_t(in) * 4);
          const size_t k0 = size_t(layer * n);
          auto pre_w = [&](int gate, int j) { return mat_dot(pw, c.w, k0 + gate, j, r.in) + bias_of(pw, c.w, k0 + gate, j); };
          auto pre_r = [&](int gate, int j) {
            return mat_dot(pw, c.w, k0 + g + gate, j, hstate.data()) + bias_of(pw, c.w, k0 + g + gate, j);
          };
          for (int j = 0; j < h; ++j) {
            float* a = r.act;
            if (d.cell == kLstm) {
              a[j] = sigmoid(pre_w(0, j) + pre_r(0, j));
              a[h + j] = sigmoid(pre_w(1, j) + pre_r(1, j));
              a[2 * h + j] = std::tanh(pre_w(2, j) + pre_r(2, j));
              a[3 * h + j] = sigmoid(pre_w(3, j) + pre_r(3, j));
            } else if (d.cell == kGru) {
              a[j] = sigmoid(pre_w(0, j) + pre_r(0, j));
              a[h + j] = sigmoid(pre_w(1, j) + pre_r(1, j));
              r.extra[j] = pre_r(2, j);
              a[2 * h + j] = std::tanh(pre_w(2, j) + a[j] * r.extra[j]);
            } else {
              const float v = pre_w(0, j) + pre_r(0, j);
              a[j] = d.cell == kRnnTanh ? std::tanh(v) : std::max(v, 0.f);
            }
          }
          for (int j = 0; j < h; ++j) {
            const float* a = r.act;
            if (d.cell == kLstm) {
              float cn = a[h + j] * cstate[size_t(j)] + a[j] * a[2 * h + j];
              if (d.clip == 1) cn = float(std::clamp(double(cn), d.lclip, d.rclip));
              r.c[j] = cn;
              r.extra[j] = std::tanh(cn);
              r.h[j] = a[3 * h + j] * r.extra[j];
            } else if (d.cell == kGru) {
              r.h[j] = (1 - a[h + j]) * a[2 * h + j] + a[h + j] * hstate[size_t(j)];
            } else {
              r.h[j] = a[j];
            }
          }
          std::memcpy(hstate.data(), r.h, size_t(h) * 4);
          if (d.cell == kLstm) std::memcpy(cstate.data(), r.c, size_t(h) * 4);
        }
        for (int j = 0; j < h; ++j) {
          if (phy) phy[st + j] = hstate[size_t(j)];
          if (pcy && d.cell == kLstm) pcy[st + j] = cstate[size_t(j)];
        }
      }
    }
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < xs.max_seq; ++t) {
        if (xs.layout == kSeqMajorPacked && t >= xs.lens[size_t(b)]) continue;  // no such vector
        float* out = py + rnn_row(xs, t, b) * h;
        if (t < xs.lens[size_t(b)]) std::memcpy(out, record_at(pr, s, d.layers - 1, t, b).h, size_t(h) * 4);
        else if (c.y->has_fill) std::fill(out, out + h, c.y->fill);
      }
    return kSuccess;
  });
}

int f_rnn_backward_data(void* handle, void* p, void*, void* yd, void* y, void* dy, void* xd, void* dx, void* hd,
                        void* hx, void* dhy, void* dhx, void* cd, void* cx, void* dcy, void* dcx, size_t wsize,
                        void* wspace, size_t, void*, size_t rsize, void* rspace) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    RnnCall c;
    if (int st = rnn_check(p, xd, yd, hd, cd, wsize, &c)) return st;
    const RnnShape& s = c.s;
    const RnnDesc& d = *s.d;
    const RnnDataDesc& xs = *s.x;
    if (!rspace || rsize < size_t(s.reserve_floats()) * 4)
      return fail(kBadParam, "cudnnRNNBackwardData_v8: the reserve space of the training forward is needed");
    float *py = fptr(at, y, rnn_rows(xs) * s.h), *pdy = fptr(at, dy, rnn_rows(xs) * s.h),
          *pdx = fptr(at, dx, rnn_rows(xs) * s.in), *pw = fptr(at, wspace, c.w.total),
          *pr = fptr(at, rspace, s.reserve_floats());
    float *phx = fptr(at, hx, c.state), *pdhy = fptr(at, dhy, c.state), *pdhx = fptr(at, dhx, c.state),
          *pcx = fptr(at, cx, c.state), *pdcy = fptr(at, dcy, c.state), *pdcx = fptr(at, dcx, c.state);
    if (!py || !pdy || !pdx || !pw || !pr || (hx && !phx) || (dhy && !pdhy) || (dhx && !pdhx) || (cx && !pcx) ||
        (dcy && !pdcy) || (dcx && !pdcx))
      return kExecutionFailed;
    const int g = s.g, h = s.h, n = 2 * g, B = xs.batch, T = xs.max_seq;
    // The gradient reaching each layer's outputs: dy for the top layer, then the layer above's
    // gradient by its input.
    std::vector<float> dout(size_t(T) * B * h), din(size_t(T) * B * s.wide);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < xs.lens[size_t(b)]; ++t)
        std::memcpy(&dout[(size_t(t) * B + b) * h], pdy + rnn_row(xs, t, b) * h, size_t(h) * 4);
    const size_t hs = static_cast<size_t>(h);
    std::vector<float> dh(hs), dc(hs), dhn(hs), dcn(hs), zeros(hs);
    for (int layer = d.layers - 1; layer >= 0; --layer) {
      const int in = layer == 0 ? s.in : h;
      const size_t k0 = size_t(layer * n);
      std::fill(din.begin(), din.end(), 0.f);
      for (int b = 0; b < B; ++b) {
        const int64_t st = (int64_t(layer) * B + b) * h;
        for (int j = 0; j < h; ++j) dhn[size_t(j)] = pdhy ? pdhy[st + j] : 0, dcn[size_t(j)] = pdcy ? pdcy[st + j] : 0;
        for (int t = xs.lens[size_t(b)] - 1; t >= 0; --t) {
          RnnRecord r = record_at(pr, s, layer, t, b);
          const float* hprev = t > 0 ? record_at(pr, s, layer, t - 1, b).h : phx ? phx + st : zeros.data();
          const float* cprev = t > 0 ? record_at(pr, s, layer, t - 1, b).c : pcx ? pcx + st : zeros.data();
          const float* a = r.act;
          for (int j = 0; j < h; ++j) dh[size_t(j)] = dout[(size_t(t) * B + b) * h + j] + dhn[size_t(j)];
          std::vector<float> direct(size_t(h), 0.f);  // dh_prev not through R
          for (int j = 0; j < h; ++j) {
            const float e = dh[size_t(j)];
            if (d.cell == kLstm) {
              const float i = a[j], f = a[h + j], gg = a[2 * h + j], o = a[3 * h + j], tc = r.extra[j];
              const float dcv = dcn[size_t(j)] + e * o * (1 - tc * tc);
              r.dw[j] = dcv * gg * i * (1 - i);
              r.dw[h + j] = dcv * cprev[j] * f * (1 - f);
              r.dw[2 * h + j] = dcv * i * (1 - gg * gg);
              r.dw[3 * h + j] = e * tc * o * (1 - o);
              dc[size_t(j)] = dcv * f;
              for (int q = 0; q < 4; ++q) r.dr[q * h + j] = r.dw[q * h + j];
            } else if (d.cell == kGru) {
              const float rr = a[j], z = a[h + j], nn = a[2 * h + j];
              const float dn = e * (1 - z) * (1 - nn * nn);
              r.dw[2 * h + j] = dn;
              r.dr[2 * h + j] = dn * rr;
              r.dw[j] = r.dr[j] = dn * r.extra[j] * rr * (1 - rr);
              r.dw[h + j] = r.dr[h + j] = e * (hprev[j] - nn) * z * (1 - z);
              direct[size_t(j)] = e * z;
            } else {
              const float v = a[j];
              r.dw[j] = r.dr[j] = e * (d.cell == kRnnTanh ? 1 - v * v : v > 0 ? 1.f : 0.f);
            }
          }
          // dh_prev = direct + sum R_k^T dR_k; d_input = sum W_k^T dW_k.
          for (int j = 0; j < h; ++j) dhn[size_t(j)] = direct[size_t(j)];
          float* di = &din[(size_t(t) * B + b) * s.wide];
          for (int q = 0; q < g; ++q) {
            const size_t kw = k0 + q, kr = k0 + g + q;
            for (int j = 0; j < h; ++j) {
              if (c.w.matrix[kr] >= 0) {
                const float* row = pw + c.w.matrix[kr] + int64_t(j) * h;
                for (int i = 0; i < h; ++i) dhn[size_t(i)] += row[i] * r.dr[q * h + j];
              }
              if (c.w.matrix[kw] >= 0) {
                const float* row = pw + c.w.matrix[kw] + int64_t(j) * in;
                for (int i = 0; i < in; ++i) di[i] += row[i] * r.dw[q * h + j];
              }
            }
          }
          if (d.cell == kLstm) dcn = dc;
        }
        for (int j = 0; j < h; ++j) {
          if (pdhx) pdhx[st + j] = dhn[size_t(j)];
          if (pdcx && d.cell == kLstm) pdcx[st + j] = dcn[size_t(j)];
        }
      }
      if (layer > 0) {
        for (int b = 0; b < B; ++b)
          for (int t = 0; t < xs.lens[size_t(b)]; ++t)
            std::memcpy(&dout[(size_t(t) * B + b) * h], &din[(size_t(t) * B + b) * s.wide], size_t(h) * 4);
      } else {
        for (int b = 0; b < B; ++b)
          for (int t = 0; t < xs.lens[size_t(b)]; ++t)
            std::memcpy(pdx + rnn_row(xs, t, b) * s.in, &din[(size_t(t) * B + b) * s.wide], size_t(s.in) * 4);
      }
    }
    return kSuccess;
  });
}

int f_rnn_backward_weights(void* handle, void* p, int add, void*, void* xd, void* x, void* hd, void* hx, void* yd,
                           void* y, size_t wsize, void* dwspace, size_t, void*, size_t rsize, void* rspace) {
  return bn_run(handle, [&](const FakeDeviceAt& at) {
    RnnCall c;
    if (int st = rnn_check(p, xd, yd, hd, nullptr, wsize, &c, false)) return st;
    if (add != kWgradAdd && add != kWgradSet) return kBadParam;
    const RnnShape& s = c.s;
    const RnnDesc& d = *s.d;
    const RnnDataDesc& xs = *s.x;
    if (!rspace || rsize < size_t(s.reserve_floats()) * 4)
      return fail(kBadParam, "cudnnRNNBackwardWeights_v8: the reserve space of the backward data pass is needed");
    float *px = fptr(at, x, rnn_rows(xs) * s.in), *py = fptr(at, y, rnn_rows(xs) * s.h),
          *pdw = fptr(at, dwspace, c.w.total), *pr = fptr(at, rspace, s.reserve_floats()),
          *phx = fptr(at, hx, c.state);
    if (!px || !py || !pdw || !pr || (hx && !phx)) return kExecutionFailed;
    if (add == kWgradSet) std::fill(pdw, pdw + c.w.total, 0.f);
    const int g = s.g, h = s.h, n = 2 * g, B = xs.batch;
    std::vector<float> zeros(static_cast<size_t>(h));
    for (int layer = 0; layer < d.layers; ++layer) {
      const size_t k0 = size_t(layer * n);
      for (int b = 0; b < B; ++b) {
        const int64_t st = (int64_t(layer) * B + b) * h;
        for (int t = 0; t < xs.lens[size_t(b)]; ++t) {
          RnnRecord r = record_at(pr, s, layer, t, b);
          const float* hprev = t > 0 ? record_at(pr, s, layer, t - 1, b).h : phx ? phx + st : zeros.data();
          for (int q = 0; q < 2 * g; ++q) {
            const size_t k = k0 + q;
            const bool input = q < g;
            const float* grad = input ? r.dw + int64_t(q) * h : r.dr + int64_t(q - g) * h;
            const float* v = input ? r.in : hprev;
            if (c.w.matrix[k] >= 0)
              for (int j = 0; j < h; ++j) {
                float* row = pdw + c.w.matrix[k] + int64_t(j) * c.w.cols[k];
                for (int i = 0; i < c.w.cols[k]; ++i) row[i] += grad[j] * v[i];
              }
            if (c.w.bias[k] >= 0)
              for (int j = 0; j < h; ++j) pdw[c.w.bias[k] + j] += grad[j];
          }
        }
      }
    }
    return kSuccess;
  });
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
      {"cudnnCreateFilterDescriptor", reinterpret_cast<void*>(f_create_filter)},
      {"cudnnSetFilter4dDescriptor", reinterpret_cast<void*>(f_set_filter_4d)},
      {"cudnnSetFilterNdDescriptor", reinterpret_cast<void*>(f_set_filter_nd)},
      {"cudnnGetFilter4dDescriptor", reinterpret_cast<void*>(f_get_filter_4d)},
      {"cudnnGetFilterNdDescriptor", reinterpret_cast<void*>(f_get_filter_nd)},
      {"cudnnGetFilterSizeInBytes", reinterpret_cast<void*>(f_filter_size)},
      {"cudnnDestroyFilterDescriptor", reinterpret_cast<void*>(f_destroy_filter)},
      {"cudnnCreateConvolutionDescriptor", reinterpret_cast<void*>(f_create_conv)},
      {"cudnnSetConvolution2dDescriptor", reinterpret_cast<void*>(f_set_conv_2d)},
      {"cudnnSetConvolutionNdDescriptor", reinterpret_cast<void*>(f_set_conv_nd)},
      {"cudnnSetConvolutionMathType", reinterpret_cast<void*>(f_conv_math)},
      {"cudnnSetConvolutionGroupCount", reinterpret_cast<void*>(f_conv_groups)},
      {"cudnnSetConvolutionReorderType", reinterpret_cast<void*>(f_conv_reorder)},
      {"cudnnGetConvolution2dDescriptor", reinterpret_cast<void*>(f_get_conv_2d)},
      {"cudnnGetConvolutionNdDescriptor", reinterpret_cast<void*>(f_get_conv_nd)},
      {"cudnnGetConvolutionMathType", reinterpret_cast<void*>(f_get_conv_math)},
      {"cudnnGetConvolutionGroupCount", reinterpret_cast<void*>(f_get_conv_groups)},
      {"cudnnGetConvolution2dForwardOutputDim", reinterpret_cast<void*>(f_out_dim_2d)},
      {"cudnnGetConvolutionNdForwardOutputDim", reinterpret_cast<void*>(f_out_dim_nd)},
      {"cudnnDestroyConvolutionDescriptor", reinterpret_cast<void*>(f_destroy_conv)},
      {"cudnnGetConvolutionForwardAlgorithmMaxCount", reinterpret_cast<void*>(f_max_fwd)},
      {"cudnnGetConvolutionForwardAlgorithm_v7", reinterpret_cast<void*>(f_fwd_algo_v7)},
      {"cudnnFindConvolutionForwardAlgorithm", reinterpret_cast<void*>(f_fwd_algo_v7)},
      {"cudnnFindConvolutionForwardAlgorithmEx", reinterpret_cast<void*>(f_fwd_find_ex)},
      {"cudnnGetConvolutionForwardWorkspaceSize", reinterpret_cast<void*>(f_fwd_ws_size)},
      {"cudnnConvolutionForward", reinterpret_cast<void*>(f_conv_fwd)},
      {"cudnnConvolutionBiasActivationForward", reinterpret_cast<void*>(f_conv_bias_act)},
      {"cudnnGetConvolutionBackwardDataAlgorithmMaxCount", reinterpret_cast<void*>(f_max_bwd_data)},
      {"cudnnGetConvolutionBackwardDataAlgorithm_v7", reinterpret_cast<void*>(f_bwd_data_algo)},
      {"cudnnFindConvolutionBackwardDataAlgorithm", reinterpret_cast<void*>(f_bwd_data_algo)},
      {"cudnnFindConvolutionBackwardDataAlgorithmEx", reinterpret_cast<void*>(f_bwd_data_find_ex)},
      {"cudnnGetConvolutionBackwardDataWorkspaceSize", reinterpret_cast<void*>(f_bwd_data_ws_size)},
      {"cudnnConvolutionBackwardData", reinterpret_cast<void*>(f_conv_bwd_data)},
      {"cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", reinterpret_cast<void*>(f_max_bwd_filter)},
      {"cudnnGetConvolutionBackwardFilterAlgorithm_v7", reinterpret_cast<void*>(f_bwd_filter_algo)},
      {"cudnnFindConvolutionBackwardFilterAlgorithm", reinterpret_cast<void*>(f_bwd_filter_algo)},
      {"cudnnFindConvolutionBackwardFilterAlgorithmEx", reinterpret_cast<void*>(f_bwd_filter_find_ex)},
      {"cudnnGetConvolutionBackwardFilterWorkspaceSize", reinterpret_cast<void*>(f_bwd_filter_ws_size)},
      {"cudnnConvolutionBackwardFilter", reinterpret_cast<void*>(f_conv_bwd_filter)},
      {"cudnnConvolutionBackwardBias", reinterpret_cast<void*>(f_conv_bwd_bias)},
      {"cudnnAddTensor", reinterpret_cast<void*>(f_add_tensor)},
      {"cudnnCreatePoolingDescriptor", reinterpret_cast<void*>(f_create_pool)},
      {"cudnnSetPooling2dDescriptor", reinterpret_cast<void*>(f_set_pool_2d)},
      {"cudnnSetPoolingNdDescriptor", reinterpret_cast<void*>(f_set_pool_nd)},
      {"cudnnGetPooling2dDescriptor", reinterpret_cast<void*>(f_get_pool_2d)},
      {"cudnnGetPoolingNdDescriptor", reinterpret_cast<void*>(f_get_pool_nd)},
      {"cudnnGetPooling2dForwardOutputDim", reinterpret_cast<void*>(f_pool_out_2d)},
      {"cudnnGetPoolingNdForwardOutputDim", reinterpret_cast<void*>(f_pool_out_nd)},
      {"cudnnDestroyPoolingDescriptor", reinterpret_cast<void*>(f_destroy_pool)},
      {"cudnnPoolingForward", reinterpret_cast<void*>(f_pool_fwd)},
      {"cudnnPoolingBackward", reinterpret_cast<void*>(f_pool_bwd)},
      {"cudnnSoftmaxForward", reinterpret_cast<void*>(f_softmax_fwd)},
      {"cudnnSoftmaxBackward", reinterpret_cast<void*>(f_softmax_bwd)},
      {"cudnnCreateDropoutDescriptor", reinterpret_cast<void*>(f_create_dropout)},
      {"cudnnDestroyDropoutDescriptor", reinterpret_cast<void*>(f_destroy_dropout)},
      {"cudnnDropoutGetStatesSize", reinterpret_cast<void*>(f_dropout_states_size)},
      {"cudnnDropoutGetReserveSpaceSize", reinterpret_cast<void*>(f_dropout_reserve_size)},
      {"cudnnSetDropoutDescriptor", reinterpret_cast<void*>(f_set_dropout)},
      {"cudnnRestoreDropoutDescriptor", reinterpret_cast<void*>(f_restore_dropout)},
      {"cudnnDropoutForward", reinterpret_cast<void*>(f_dropout_fwd)},
      {"cudnnDropoutBackward", reinterpret_cast<void*>(f_dropout_bwd)},
      {"cudnnGetDropoutDescriptor", reinterpret_cast<void*>(f_get_dropout)},
      {"cudnnCreateLRNDescriptor", reinterpret_cast<void*>(f_create_lrn)},
      {"cudnnSetLRNDescriptor", reinterpret_cast<void*>(f_set_lrn)},
      {"cudnnGetLRNDescriptor", reinterpret_cast<void*>(f_get_lrn)},
      {"cudnnDestroyLRNDescriptor", reinterpret_cast<void*>(f_destroy_lrn)},
      {"cudnnLRNCrossChannelForward", reinterpret_cast<void*>(f_lrn_fwd)},
      {"cudnnLRNCrossChannelBackward", reinterpret_cast<void*>(f_lrn_bwd)},
      {"cudnnDivisiveNormalizationForward", reinterpret_cast<void*>(f_divnorm_fwd)},
      {"cudnnDivisiveNormalizationBackward", reinterpret_cast<void*>(f_divnorm_bwd)},
      {"cudnnCreateOpTensorDescriptor", reinterpret_cast<void*>(f_create_op_tensor)},
      {"cudnnSetOpTensorDescriptor", reinterpret_cast<void*>(f_set_op_tensor)},
      {"cudnnGetOpTensorDescriptor", reinterpret_cast<void*>(f_get_op_tensor)},
      {"cudnnDestroyOpTensorDescriptor", reinterpret_cast<void*>(f_destroy_op_tensor)},
      {"cudnnOpTensor", reinterpret_cast<void*>(f_op_tensor)},
      {"cudnnCreateReduceTensorDescriptor", reinterpret_cast<void*>(f_create_reduce)},
      {"cudnnSetReduceTensorDescriptor", reinterpret_cast<void*>(f_set_reduce)},
      {"cudnnGetReduceTensorDescriptor", reinterpret_cast<void*>(f_get_reduce)},
      {"cudnnDestroyReduceTensorDescriptor", reinterpret_cast<void*>(f_destroy_reduce)},
      {"cudnnGetReductionIndicesSize", reinterpret_cast<void*>(f_reduce_indices_size)},
      {"cudnnGetReductionWorkspaceSize", reinterpret_cast<void*>(f_reduce_workspace_size)},
      {"cudnnReduceTensor", reinterpret_cast<void*>(f_reduce)},
      {"cudnnSetTensor", reinterpret_cast<void*>(f_set_tensor)},
      {"cudnnScaleTensor", reinterpret_cast<void*>(f_scale_tensor)},
      {"cudnnTransformTensor", reinterpret_cast<void*>(f_transform_tensor)},
      {"cudnnCreateSpatialTransformerDescriptor", reinterpret_cast<void*>(f_create_st)},
      {"cudnnSetSpatialTransformerNdDescriptor", reinterpret_cast<void*>(f_set_st)},
      {"cudnnDestroySpatialTransformerDescriptor", reinterpret_cast<void*>(f_destroy_st)},
      {"cudnnSpatialTfGridGeneratorForward", reinterpret_cast<void*>(f_st_grid_fwd)},
      {"cudnnSpatialTfGridGeneratorBackward", reinterpret_cast<void*>(f_st_grid_bwd)},
      {"cudnnSpatialTfSamplerForward", reinterpret_cast<void*>(f_st_sampler_fwd)},
      {"cudnnSpatialTfSamplerBackward", reinterpret_cast<void*>(f_st_sampler_bwd)},
      {"cudnnCreateCTCLossDescriptor", reinterpret_cast<void*>(f_create_ctc)},
      {"cudnnSetCTCLossDescriptor", reinterpret_cast<void*>(f_set_ctc)},
      {"cudnnSetCTCLossDescriptorEx", reinterpret_cast<void*>(f_set_ctc_ex)},
      {"cudnnSetCTCLossDescriptor_v8", reinterpret_cast<void*>(f_set_ctc_v8)},
      {"cudnnSetCTCLossDescriptor_v9", reinterpret_cast<void*>(f_set_ctc_v9)},
      {"cudnnGetCTCLossDescriptor", reinterpret_cast<void*>(f_get_ctc)},
      {"cudnnGetCTCLossDescriptorEx", reinterpret_cast<void*>(f_get_ctc_ex)},
      {"cudnnGetCTCLossDescriptor_v8", reinterpret_cast<void*>(f_get_ctc_v8)},
      {"cudnnGetCTCLossDescriptor_v9", reinterpret_cast<void*>(f_get_ctc_v9)},
      {"cudnnDestroyCTCLossDescriptor", reinterpret_cast<void*>(f_destroy_ctc)},
      {"cudnnGetCTCLossWorkspaceSize", reinterpret_cast<void*>(f_ctc_ws)},
      {"cudnnGetCTCLossWorkspaceSize_v8", reinterpret_cast<void*>(f_ctc_ws_v8)},
      {"cudnnCTCLoss", reinterpret_cast<void*>(f_ctc)},
      {"cudnnCTCLoss_v8", reinterpret_cast<void*>(f_ctc_v8)},
      {"cudnnCreateRNNDescriptor", reinterpret_cast<void*>(f_create_rnn)},
      {"cudnnDestroyRNNDescriptor", reinterpret_cast<void*>(f_destroy_rnn)},
      {"cudnnSetRNNDescriptor_v8", reinterpret_cast<void*>(f_set_rnn_v8)},
      {"cudnnGetRNNDescriptor_v8", reinterpret_cast<void*>(f_get_rnn_v8)},
      {"cudnnGetRNNDataDescriptor", reinterpret_cast<void*>(f_get_rnn_data)},
      {"cudnnRNNSetClip_v8", reinterpret_cast<void*>(f_rnn_set_clip_v8)},
      {"cudnnRNNSetClip_v9", reinterpret_cast<void*>(f_rnn_set_clip_v9)},
      {"cudnnRNNGetClip_v8", reinterpret_cast<void*>(f_rnn_get_clip_v8)},
      {"cudnnRNNGetClip_v9", reinterpret_cast<void*>(f_rnn_get_clip_v9)},
      {"cudnnBuildRNNDynamic", reinterpret_cast<void*>(f_build_rnn_dynamic)},
      {"cudnnGetRNNTempSpaceSizes", reinterpret_cast<void*>(f_rnn_temp_sizes)},
      {"cudnnGetRNNWeightSpaceSize", reinterpret_cast<void*>(f_rnn_weight_space_size)},
      {"cudnnGetRNNWeightParams", reinterpret_cast<void*>(f_rnn_weight_params)},
      {"cudnnCreateRNNDataDescriptor", reinterpret_cast<void*>(f_create_rnn_data)},
      {"cudnnDestroyRNNDataDescriptor", reinterpret_cast<void*>(f_destroy_rnn_data)},
      {"cudnnSetRNNDataDescriptor", reinterpret_cast<void*>(f_set_rnn_data)},
      {"cudnnRNNForward", reinterpret_cast<void*>(f_rnn_forward)},
      {"cudnnRNNBackwardData_v8", reinterpret_cast<void*>(f_rnn_backward_data)},
      {"cudnnRNNBackwardWeights_v8", reinterpret_cast<void*>(f_rnn_backward_weights)},
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

FakeCudnnSearch fake_cudnn_last_search() {
  std::lock_guard l(g_mu);
  return g_last_search;
}

uint64_t fake_live_cudnn_objects() {
  std::lock_guard l(g_mu);
  return g_handles.size() + g_descs.size() + g_tensors.size() + g_activations.size() + g_filters.size() +
         g_convs.size() + g_pools.size() + g_dropouts.size() + g_lrns.size() + g_op_tensors.size() + g_reduces.size() +
         g_sts.size() + g_ctcs.size() + g_rnns.size() + g_rnn_data.size();
}

}  // namespace vmcuda::testing
