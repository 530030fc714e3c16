// cuDNN in libcuda.so.1 (vmcuda's libcudnn.so.9 forwards each export here; README.md "cuDNN").
// The calls are listed in api/libs/cudnn.calls (wire structs, exports and stubs are generated
// by scripts/gen-cudnn.py); the handle and the backend API are written here, the legacy API's
// calls (tensor, activation, filter, convolution, pooling, dropout, LRN, op-tensor,
// reduce-tensor, spatial transformer and CTC loss descriptors, batch normalization, convolutions,
// pooling, softmax, dropout, LRN and divisive normalization, tensor operations and reductions,
// the spatial transformer, CTC loss on device arrays) are generated (CTC loss on host arrays is
// written here)
// (cudnn_guest.inc, included at the end: its helpers are this file's). The handle and the backend (graph) API's
// descriptors are guest objects with a wire handle from the streams' counter. Creation,
// attribute settings, destruction and cudnnBackendExecute are queued (an error the host finds
// in them comes back with a later call); cudnnCreate, cudnnBackendFinalize (but a variant
// pack's, which PyTorch makes at every convolution), GetAttribute and the versions wait.
// Attribute elements travel as cudnn_abi.h sizes them: descriptors and handles as their wire
// handles, device pointers as they are.
// Legacy descriptors are guest objects too (Kind::kLegacy, with their kind's tag); their
// creation, settings and destruction and the batch normalizations are queued; Get* calls wait.
// TODO(remoting): the rest of the legacy API (the v7 RNN calls, multi-head attention) and cudnnBackendPopulateCudaGraph/UpdateCudaGraph are generated stubs
// (CUDNN_STATUS_NOT_SUPPORTED, logged once); by-value tensors in a variant pack (a host pointer)
// are refused by the host; CUDNN_TYPE_HANDLE attributes cannot be read back.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "entry.h"
#include "log.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/api/calls.h"
#include "vmcuda/api/cudnn_abi.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest::cudnn {

extern const int kHeaderVersion[3];  // cudnn_version.h's (generated cudnn_table.cc)

void unsupported(const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.load(std::memory_order_relaxed) && !logged.exchange(true, std::memory_order_relaxed))
    VMCUDA_LOG(kWarn, "cudnn", "%s is not supported yet; it returns CUDNN_STATUS_NOT_SUPPORTED (3000)", name);
}

namespace {

namespace api = vmcuda::api;
using api::kCudnnBadParam;
using api::kCudnnBadParamNullPointer;
using api::kCudnnNotSupported;
using api::kCudnnSuccess;

enum class Kind { kHandle, kDescriptor, kLegacy };

struct Object {
  Kind kind;
  uint64_t wire = 0;
  int32_t type = 0;                    // descriptors: cudnnBackendDescriptorType_t; legacy: its kind's tag
  std::atomic<int32_t> data_type{0};   // legacy tensor descriptors: cudnnDataType_t as set (FLOAT first)
  std::atomic<void*> stream{nullptr};  // handles: the cudaStream_t the app set
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, std::unique_ptr<Object>> live;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

Object* find(const void* app, Kind k) {
  std::lock_guard l(registry().mu);
  auto it = registry().live.find(app);
  return it != registry().live.end() && it->second->kind == k ? it->second.get() : nullptr;
}

// The host's answer as the app's cudnnStatus_t.
int status_of(int32_t s, const char* call) {
  if (s == 0) return kCudnnSuccess;
  if (s < 0) {
    VMCUDA_LOG(kWarn, "cudnn", "%s: the host refused the call (channel status %d): vmcuda's guest library and "
               "vmcuda-stub do not match; update both", call, s);
    return api::kCudnnInternalError;
  }
  if (api::cudnn_is_status(s)) return s;
  // An error of earlier queued CUDA work came back with this call: the application's next
  // cudaGetLastError reports it; the cuDNN call could not run after it.
  record(static_cast<cudaError_t>(s));
  return api::kCudnnExecutionFailed;
}

// The connection (after the sticky error's check), or the status to return.
Remote* remote(int* status) {
  if (enter_device_call() != cudaSuccess) return *status = api::kCudnnExecutionFailed, nullptr;
  cudaError_t e;
  Remote* r = connected(&e);
  if (!r) *status = api::kCudnnNotInitialized;
  return r;
}

template <api::Call C>
int queue(const typename api::CallTraits<C>::Args& a, std::span<const std::byte> tail = {}) {
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  return status_of(r->enqueue<C>(a, tail), api::CallTraits<C>::kName);
}

// Runs call C now; up to `capacity` bytes of the reply's trailing bytes go to `out` (*got: how many).
template <api::Call C>
int wait(const typename api::CallTraits<C>::Args& a, typename api::CallTraits<C>::Reply* reply,
         std::span<const std::byte> tail = {}, void* out = nullptr, size_t capacity = 0, size_t* got = nullptr) {
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto lock = r->lock();
  const auto res = r->call<C>(a, tail, static_cast<uint32_t>(capacity));
  if (res.status != 0) return status_of(res.status, api::CallTraits<C>::kName);
  const size_t n = std::min(res.extra.size(), capacity);
  if (n && out) std::memcpy(out, res.extra.data(), n);
  if (got) *got = n;
  if (reply) *reply = res.reply;
  return kCudnnSuccess;
}

void too_large(const char* call, size_t bytes) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    VMCUDA_LOG(kWarn, "cudnn", "%s: %zu bytes of attribute elements are more than vmcuda carries (%zu); the call "
               "answers CUDNN_STATUS_NOT_SUPPORTED", call, bytes, api::kCudnnMaxAttributeBytes);
}

// The wire form of `count` elements of `type` at `elements`: descriptors and handles become wire
// handles (a value that is none of this process's: the status, as the library answers it).
int to_wire(int32_t type, const void* elements, int64_t count, std::vector<std::byte>* out) {
  const size_t size = api::cudnn_element_bytes(type);
  out->resize(size * size_t(count));
  if (count == 0) return kCudnnSuccess;
  if (type != api::kCudnnTypeBackendDescriptor && type != api::kCudnnTypeHandle) {
    std::memcpy(out->data(), elements, out->size());
    return kCudnnSuccess;
  }
  const Kind k = type == api::kCudnnTypeHandle ? Kind::kHandle : Kind::kDescriptor;
  for (int64_t i = 0; i < count; ++i) {
    const void* app;
    std::memcpy(&app, static_cast<const std::byte*>(elements) + i * 8, 8);
    const Object* o = find(app, k);
    if (!o) return app ? kCudnnBadParam : kCudnnBadParamNullPointer;
    std::memcpy(out->data() + i * 8, &o->wire, 8);
  }
  return kCudnnSuccess;
}

// ---- the legacy API's descriptors (the generated calls' helpers)

std::unique_ptr<Object> new_legacy(int32_t tag) {
  auto o = std::make_unique<Object>();
  o->kind = Kind::kLegacy;
  o->type = tag;
  o->wire = vmcuda::guest::handles::next();
  return o;
}
void* adopt(std::unique_ptr<Object> o) {
  std::lock_guard l(registry().mu);
  void* app = o.get();
  registry().live.emplace(app, std::move(o));
  return app;
}
const Object* find_legacy(const void* app, int32_t tag) {
  const Object* o = find(app, Kind::kLegacy);
  return o && o->type == tag ? o : nullptr;
}
// A legacy descriptor argument's wire handle (0 for NULL, which the library judges: optional
// descriptors are NULL); a value that is none of this process's descriptors of that kind is refused.
int legacy_wire(const void* app, int32_t tag, uint64_t* wire) {
  *wire = 0;
  if (!app) return kCudnnSuccess;
  const Object* o = find_legacy(app, tag);
  if (!o) return kCudnnBadParam;
  *wire = o->wire;
  return kCudnnSuccess;
}
// Removes the descriptor from this process's (its wire handle in *wire for the host's removal).
bool forget_legacy(void* app, int32_t tag, uint64_t* wire) {
  std::lock_guard l(registry().mu);
  auto it = registry().live.find(app);
  if (it == registry().live.end() || it->second->kind != Kind::kLegacy || it->second->type != tag) return false;
  *wire = it->second->wire;
  registry().live.erase(it);
  return true;
}
// A legacy descriptor the host answered (its wire handle in `wire`, 8 bytes; 0 for none) as this
// process's descriptor of kind `tag`, written to *out (NULL where it is none of this process's:
// the program destroyed it).
int answer_legacy(const uint8_t* wire, int32_t tag, void* out) {
  uint64_t w = 0;
  std::memcpy(&w, wire, 8);
  void* app = nullptr;
  if (w) {
    std::lock_guard l(registry().mu);
    for (const auto& [a, o] : registry().live)
      if (o->kind == Kind::kLegacy && o->type == tag && o->wire == w) app = const_cast<void*>(a);
  }
  std::memcpy(out, &app, sizeof app);
  return kCudnnSuccess;
}
void set_data_type(const void* tensor, int32_t data_type) {
  if (Object* o = const_cast<Object*>(find_legacy(tensor, 0))) o->data_type = data_type;
}
// The size of alpha/beta scalars of calls on tensor descriptor `x`: a double where its data are
// doubles (CUDNN_DATA_DOUBLE), else a float (cuDNN's rule for the legacy API's scaling factors).
size_t scalar_bytes(const void* x) {
  const Object* o = find_legacy(x, 0);
  return o && o->data_type == 1 ? 8 : 4;
}
// The bytes of one element of cudnnDataType_t `data_type` (at most 8; a float for one unknown),
// and of tensor descriptor `t`'s data type (cudnnSetTensor's value is one of y's type): as set (a
// float where the guest does not know it).
size_t data_type_bytes(int32_t data_type) {
  switch (data_type) {
    case 1: case 10: return 8;  // DOUBLE, INT64
    case 2: case 9: return 2;   // HALF, BFLOAT16
    case 3: case 6: case 11: case 12: case 13: case 15: case 16: case 17: case 18: return 1;  // a byte or less
    default: return 4;
  }
}
size_t element_bytes(const void* t) {
  const Object* o = find_legacy(t, 0);
  return data_type_bytes(o ? o->data_type.load() : 0);
}
std::vector<std::byte> concat(std::initializer_list<std::span<const std::byte>> parts) {
  std::vector<std::byte> out;
  for (auto p : parts)
    if (!p.empty()) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace
}  // namespace vmcuda::guest::cudnn

using namespace vmcuda::guest::cudnn;
namespace api = vmcuda::api;
using api::kCudnnBadParam;
using api::kCudnnBadParamNullPointer;
using api::kCudnnNotSupported;
using api::kCudnnSuccess;
using vmcuda::guest::Remote;

#define VMCUDA_CUDNN_API extern "C"

// ---- the handle

VMCUDA_CUDNN_API int cudnnCreate(void** handle) {
  if (!handle) return kCudnnBadParam;
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto o = std::make_unique<Object>();
  o->kind = Kind::kHandle;
  o->wire = vmcuda::guest::handles::next();
  api::cudnnCreate_Args a{};
  a.handle = o->wire;
  if (int s = wait<api::Call::cudnnCreate>(a, nullptr)) return s;  // the host's library may refuse
  std::lock_guard l(registry().mu);
  void* app = o.get();
  registry().live.emplace(app, std::move(o));
  *handle = app;
  return kCudnnSuccess;
}

VMCUDA_CUDNN_API int cudnnDestroy(void* handle) {
  api::cudnnDestroy_Args a{};
  {
    std::lock_guard l(registry().mu);
    if (!handle) return kCudnnSuccess;  // as NVIDIA's: nothing to do
    auto it = registry().live.find(handle);
    if (it == registry().live.end() || it->second->kind != Kind::kHandle) return kCudnnBadParam;
    a.handle = it->second->wire;
    registry().live.erase(it);
  }
  return queue<api::Call::cudnnDestroy>(a);
}

VMCUDA_CUDNN_API int cudnnSetStream(void* handle, cudaStream_t stream) {
  Object* o = find(handle, Kind::kHandle);
  if (!o) return kCudnnBadParam;
  api::cudnnSetStream_Args a{};
  a.handle = o->wire;
  if (vmcuda::guest::stream_wire_handle(stream, false, &a.streamId) != cudaSuccess) return kCudnnBadParam;
  o->stream = stream;
  return queue<api::Call::cudnnSetStream>(a);
}

VMCUDA_CUDNN_API int cudnnGetStream(void* handle, cudaStream_t* stream) {
  Object* o = find(handle, Kind::kHandle);
  if (!o || !stream) return kCudnnBadParam;
  *stream = static_cast<cudaStream_t>(o->stream.load());
  return kCudnnSuccess;
}

// ---- versions and errors

namespace {
// The host library's answer to a version call, asked once; cudnn_version.h's (or 0) when it
// cannot be asked.
template <api::Call C>
size_t host_version(std::atomic<size_t>& cache, size_t fallback) {
  if (size_t v = cache.load()) return v;
  typename api::CallTraits<C>::Reply reply{};
  if (wait<C>(api::Empty{}, &reply) != kCudnnSuccess) return fallback;
  size_t v;
  std::memcpy(&v, reply.ret, sizeof v);
  cache = v;
  return v;
}
size_t header_version() {
  return size_t(kHeaderVersion[0]) * 10000 + size_t(kHeaderVersion[1]) * 100 + size_t(kHeaderVersion[2]);
}
}  // namespace

VMCUDA_CUDNN_API size_t cudnnGetVersion(void) {
  static std::atomic<size_t> cache{0};
  return host_version<api::Call::cudnnGetVersion>(cache, header_version());
}
VMCUDA_CUDNN_API size_t cudnnGetCudartVersion(void) {
  static std::atomic<size_t> cache{0};
  int v = 0;
  cudaRuntimeGetVersion(&v);  // the toolkit's version: what a cuDNN built for it reports
  return host_version<api::Call::cudnnGetCudartVersion>(cache, size_t(v));
}
// The newest compute capability the library has kernels for (NVIDIA's cuDNN 9.19: 1210); the
// host's library answers for its kernels, but this is asked before any device work: the header's.
VMCUDA_CUDNN_API size_t cudnnGetMaxDeviceVersion(void) { return 1210; }
VMCUDA_CUDNN_API int cudnnGetProperty(int type, int* value) {
  // libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL of the version answered.
  if (!value || type < 0 || type > 2) return kCudnnBadParam;
  const size_t v = cudnnGetVersion();
  *value = int(type == 0 ? v / 10000 : type == 1 ? v / 100 % 100 : v % 100);
  return kCudnnSuccess;
}
// The sub-library checks: vmcuda's libcudnn.so.9 is one library, consistent with itself.
VMCUDA_CUDNN_API int cudnnGraphVersionCheck(void) { return kCudnnSuccess; }
VMCUDA_CUDNN_API int cudnnOpsVersionCheck(void) { return kCudnnSuccess; }
VMCUDA_CUDNN_API int cudnnCnnVersionCheck(void) { return kCudnnSuccess; }
VMCUDA_CUDNN_API int cudnnAdvVersionCheck(void) { return kCudnnSuccess; }

VMCUDA_CUDNN_API const char* cudnnGetErrorString(int status) {
  switch (status) {
#define X(value, name) \
  case value:          \
    return name;
#include "cudnn_status_names.inc"
#undef X
  }
  return "CUDNN_UNKNOWN_STATUS";
}

// The host library's message of the last failure of this client's calls (cuDNN keeps it per
// thread; the host runs one client's calls on its worker).
VMCUDA_CUDNN_API void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (!message || max_size == 0) return;
  message[0] = '\0';
  api::cudnnGetLastErrorString_Args a{};
  a.max_size = std::min<size_t>(max_size, 4096);
  size_t got = 0;
  if (wait<api::Call::cudnnGetLastErrorString>(a, nullptr, {}, message, a.max_size, &got) != kCudnnSuccess) return;
  message[std::min(got, max_size - 1)] = '\0';
}

// ---- the backend (graph) API

VMCUDA_CUDNN_API int cudnnBackendCreateDescriptor(int type, void** descriptor) {
  if (!descriptor) return kCudnnBadParamNullPointer;
  auto o = std::make_unique<Object>();
  o->kind = Kind::kDescriptor;
  o->type = type;
  o->wire = vmcuda::guest::handles::next();
  api::cudnnBackendCreateDescriptor_Args a{};
  a.descriptor = o->wire;
  a.descriptorType = type;
  // Queued: a type the host's library refuses comes back with the next call that waits. Types
  // beyond the header's are refused here, as the library answers them.
  if (type < 0 || type >= api::kCudnnDescriptorTypes) return api::kCudnnNotSupported;
  if (int s = queue<api::Call::cudnnBackendCreateDescriptor>(a)) return s;
  std::lock_guard l(registry().mu);
  void* app = o.get();
  registry().live.emplace(app, std::move(o));
  *descriptor = app;
  return kCudnnSuccess;
}

VMCUDA_CUDNN_API int cudnnBackendDestroyDescriptor(void* descriptor) {
  api::cudnnBackendDestroyDescriptor_Args a{};
  {
    std::lock_guard l(registry().mu);
    auto it = registry().live.find(descriptor);
    if (!descriptor) return kCudnnBadParamNullPointer;
    if (it == registry().live.end() || it->second->kind != Kind::kDescriptor) return kCudnnBadParam;
    a.descriptor = it->second->wire;
    registry().live.erase(it);
  }
  return queue<api::Call::cudnnBackendDestroyDescriptor>(a);
}

VMCUDA_CUDNN_API int cudnnBackendInitialize(void* descriptor) {
  const Object* o = find(descriptor, Kind::kDescriptor);
  if (!o) return descriptor ? kCudnnBadParam : kCudnnBadParamNullPointer;
  api::cudnnBackendInitialize_Args a{};
  a.descriptor = o->wire;
  return wait<api::Call::cudnnBackendInitialize>(a, nullptr);
}

VMCUDA_CUDNN_API int cudnnBackendFinalize(void* descriptor) {
  const Object* o = find(descriptor, Kind::kDescriptor);
  if (!o) return descriptor ? kCudnnBadParam : kCudnnBadParamNullPointer;
  api::cudnnBackendFinalize_Args a{};
  a.descriptor = o->wire;
  // A variant pack's finalization only checks what was set: queued with the execution that
  // follows it (its error, if any, comes back with a later call). Every other descriptor's
  // answer is what the application decides on (an engine configuration that does not finalize
  // is skipped): it waits.
  if (o->type == api::kCudnnVariantPackDescriptor) return queue<api::Call::cudnnBackendFinalize>(a);
  return wait<api::Call::cudnnBackendFinalize>(a, nullptr);
}

VMCUDA_CUDNN_API int cudnnBackendSetAttribute(void* descriptor, int name, int type, int64_t count,
                                              const void* elements) {
  const Object* o = find(descriptor, Kind::kDescriptor);
  if (!o) return descriptor ? kCudnnBadParam : kCudnnBadParamNullPointer;
  if (!elements || count < 0) return kCudnnBadParam;  // as NVIDIA's answers them
  const size_t size = api::cudnn_element_bytes(type);
  if (size == 0) return kCudnnNotSupported;
  if (size_t(count) > api::kCudnnMaxAttributeBytes / size) {
    too_large("cudnnBackendSetAttribute", size * size_t(count));
    return kCudnnNotSupported;
  }
  std::vector<std::byte> wire;
  if (int s = to_wire(type, elements, count, &wire)) return s;
  api::cudnnBackendSetAttribute_Args a{};
  a.descriptor = o->wire;
  a.attributeName = name;
  a.attributeType = type;
  a.elementCount = count;
  return queue<api::Call::cudnnBackendSetAttribute>(a, wire);
}

VMCUDA_CUDNN_API int cudnnBackendGetAttribute(void* const descriptor, int name, int type, int64_t requested,
                                              int64_t* count, void* elements) {
  const Object* o = find(descriptor, Kind::kDescriptor);
  if (!o) return descriptor ? kCudnnBadParam : kCudnnBadParamNullPointer;
  if (requested < 0) return kCudnnBadParam;
  const size_t size = api::cudnn_element_bytes(type);
  if (size == 0) return kCudnnNotSupported;
  if (type == api::kCudnnTypeHandle) {
    // A handle read back would need the host's handle mapped to this process's: not needed by
    // any user of the API vmcuda knows of.
    static std::atomic<bool> logged{false};
    unsupported("cudnnBackendGetAttribute of a CUDNN_TYPE_HANDLE attribute", logged);
    return kCudnnNotSupported;
  }
  if (!elements) requested = 0;  // a count query
  if (size_t(requested) > api::kCudnnMaxAttributeBytes / size) {
    too_large("cudnnBackendGetAttribute", size * size_t(requested));
    return kCudnnNotSupported;
  }
  api::cudnnBackendGetAttribute_Args a{};
  a.descriptor = o->wire;
  a.attributeName = name;
  a.attributeType = type;
  a.requestedElementCount = requested;
  // Descriptor elements: the app made them (cudnnBackendCreateDescriptor); the host fills its
  // objects behind their wire handles, so nothing comes back but the count.
  const bool descriptors = type == api::kCudnnTypeBackendDescriptor;
  std::vector<std::byte> tail;
  if (descriptors && requested > 0)
    if (int s = to_wire(type, elements, requested, &tail)) return s;
  api::cudnnBackendGetAttribute_Reply reply{};
  const size_t capacity = descriptors ? 0 : size * size_t(requested);
  size_t got = 0;
  if (int s = wait<api::Call::cudnnBackendGetAttribute>(a, &reply, tail, elements, capacity, &got)) return s;
  int64_t n;
  std::memcpy(&n, reply.elementCount, sizeof n);
  if (count) *count = n;
  return kCudnnSuccess;
}

VMCUDA_CUDNN_API int cudnnBackendExecute(void* handle, void* plan, void* pack) {
  const Object* h = find(handle, Kind::kHandle);
  if (!h) return kCudnnBadParam;
  const Object* p = find(plan, Kind::kDescriptor);
  const Object* v = find(pack, Kind::kDescriptor);
  if (!p || !v) return (plan && pack) ? kCudnnBadParam : kCudnnBadParamNullPointer;
  api::cudnnBackendExecute_Args a{};
  a.handle = h->wire;
  a.executionPlan = p->wire;
  a.variantPack = v->wire;
  return queue<api::Call::cudnnBackendExecute>(a);  // as a launch: its errors come with a later call
}

// ---- CTC loss with host arrays (cudnnCTCLoss, cudnnGetCTCLossWorkspaceSize): their length
// follows from the probabilities' batch (T x N x A) and the label lengths, so they are written
// here; the arrays go as trailing bytes: N label lengths, N input lengths, then the labels.

VMCUDA_CUDNN_API int cudnnGetTensorNdDescriptor(void* tensorDesc, int nbDimsRequested, void* dataType, void* nbDims,
                                                void* dimA, void* strideA);  // generated (cudnn_guest.inc)

namespace {
// The trailing bytes of a CTC call with host arrays, or the status to return (the host checks
// them again: lengths within cuDNN's limits, labels within the alphabet).
int ctc_host_tail(void* probsDesc, const int* labels, const int* label_lengths, const int* input_lengths,
                  std::vector<std::byte>* tail) {
  int type = 0, nb = 0, dims[8] = {}, strides[8] = {};
  if (!probsDesc) return kCudnnBadParam;
  if (int s = cudnnGetTensorNdDescriptor(probsDesc, 8, &type, &nb, dims, strides)) return s;
  if (nb != 3 || dims[1] <= 0) return kCudnnBadParam;  // probabilities are T x N x A
  if (!label_lengths || !input_lengths) return kCudnnBadParam;
  const size_t n = size_t(dims[1]);
  size_t total = 0;
  for (size_t b = 0; b < n; ++b) {
    // cuDNN's limits (a label at most 256 long), answered at the call as NVIDIA's library does.
    if (label_lengths[b] < 0 || label_lengths[b] > 256 || input_lengths[b] < 0 || input_lengths[b] > dims[0])
      return kCudnnBadParam;
    total += size_t(label_lengths[b]);
  }
  if (total > 0 && !labels) return kCudnnBadParam;
  const auto bytes = [](const int* p, size_t count) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(p), count * sizeof(int));
  };
  *tail = concat({bytes(label_lengths, n), bytes(input_lengths, n), bytes(labels, total)});
  return kCudnnSuccess;
}
}  // namespace

VMCUDA_CUDNN_API int cudnnGetCTCLossWorkspaceSize(void* handle, void* probsDesc, void* gradientsDesc, const int* labels,
                                                  const int* labelLengths, const int* inputLengths, int algo,
                                                  void* ctcLossDesc, size_t* sizeInBytes) {
  const Object* h = find(handle, Kind::kHandle);
  if (!h || !sizeInBytes) return kCudnnBadParam;
  api::cudnnGetCTCLossWorkspaceSize_Args a{};
  a.handle = h->wire;
  a.algo = algo;
  if (int s = legacy_wire(probsDesc, 0, &a.probsDesc)) return s;
  if (int s = legacy_wire(gradientsDesc, 0, &a.gradientsDesc)) return s;
  if (int s = legacy_wire(ctcLossDesc, 10, &a.ctcLossDesc)) return s;
  std::vector<std::byte> tail;
  if (int s = ctc_host_tail(probsDesc, labels, labelLengths, inputLengths, &tail)) return s;
  api::cudnnGetCTCLossWorkspaceSize_Reply reply{};
  if (int s = wait<api::Call::cudnnGetCTCLossWorkspaceSize>(a, &reply, tail)) return s;
  std::memcpy(sizeInBytes, reply.sizeInBytes, sizeof *sizeInBytes);
  return kCudnnSuccess;
}

VMCUDA_CUDNN_API int cudnnCTCLoss(void* handle, void* probsDesc, const void* probs, const int* hostLabels,
                                  const int* hostLabelLengths, const int* hostInputLengths, void* costs,
                                  void* gradientsDesc, void* gradients, int algo, void* ctcLossDesc, void* workspace,
                                  size_t workSpaceSizeInBytes) {
  const Object* h = find(handle, Kind::kHandle);
  if (!h) return kCudnnBadParam;
  api::cudnnCTCLoss_Args a{};
  a.handle = h->wire;
  a.probs = reinterpret_cast<uint64_t>(probs);
  a.costs = reinterpret_cast<uint64_t>(costs);
  a.gradients = reinterpret_cast<uint64_t>(gradients);
  a.algo = algo;
  a.workspace = reinterpret_cast<uint64_t>(workspace);
  a.workSpaceSizeInBytes = workSpaceSizeInBytes;
  if (int s = legacy_wire(probsDesc, 0, &a.probsDesc)) return s;
  if (int s = legacy_wire(gradientsDesc, 0, &a.gradientsDesc)) return s;
  if (int s = legacy_wire(ctcLossDesc, 10, &a.ctcLossDesc)) return s;
  std::vector<std::byte> tail;
  if (int s = ctc_host_tail(probsDesc, hostLabels, hostLabelLengths, hostInputLengths, &tail)) return s;
  return queue<api::Call::cudnnCTCLoss>(a, tail);  // as a launch: its errors come with a later call
}

// ---- the legacy API (generated: api/libs/cudnn.calls, scripts/gen-cudnn.py)

#include "cudnn_guest.inc"
