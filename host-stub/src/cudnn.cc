// cuDNN calls (calls.def 0x2600-0x26ff; api/libs/cudnn.calls): the handle and the backend API
// hand-written here, the legacy API's calls generated (cudnn_host.inc, included at the end) but
// CTC loss on host arrays (cudnnCTCLoss, cudnnGetCTCLossWorkspaceSize: ctc_host_arrays). The
// host's libcudnn.so.9 (loaded at the first call), handles and descriptors as VOL entries
// under the context that was current at their creation (destroyed with the client), attribute
// elements translated (descriptors and handles: the guest's handles to the library's; device
// pointers checked to be the client's memory, and again at each execution) and the execution,
// counted as a launch. Carried by a suspend as what made them: each descriptor's steps (its
// attributes as set, its finalization, the descriptors filled from it; a legacy descriptor's
// settings, as the calls' arguments), replayed by a resume in the client's order behind the same
// guest handles (CudnnStep).
// TODO(remoting): a by-value tensor's data pointer in a variant pack is a host pointer of the
// guest's (cuDNN's attention scale): refused as memory that is not the client's.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "session.h"
#include "vmcuda/api/cudnn_abi.h"
#include "vmrpc/log.h"

#ifdef VMCUDA_WITH_CUDNN
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "cudnn_host_api.h"
#include "vmcuda/api/cudnn_abi.h"
#endif

namespace vmcuda::host {

namespace {
// The guest handles a step names (descriptors, or cuDNN handles: *handles), as 8-byte elements.
std::vector<uint64_t> step_references(const CudnnStep& s, bool* handles) {
  *handles = s.op == CudnnStep::kSet && s.type == api::kCudnnTypeHandle;
  const bool refs = s.op == CudnnStep::kFill || (s.op == CudnnStep::kSet && (s.type == api::kCudnnTypeHandle ||
                                                                               s.type == api::kCudnnTypeBackendDescriptor));
  std::vector<uint64_t> v;
  if (!refs) return v;
  v.resize(s.elements.size() / 8);
  std::memcpy(v.data(), s.elements.data(), v.size() * 8);
  return v;
}
}  // namespace

std::string Session::cudnn_blocks_suspend() const {
  for (const auto& [guest, id] : vol_.of(ObjectKind::Cudnn)) {
    const auto& o = vol_.get(id)->as<CudnnObject>();
    if (o.legacy >= 0) {
      if (const std::string t = cudnn_legacy_blocks_suspend(o); !t.empty()) return t;
      continue;
    }
    if (o.overflow)
      return "a cuDNN backend descriptor was given more attributes than a suspend records (" +
             std::to_string(kCudnnMaxSteps) + "); suspend when the program has destroyed it "
             "(cudnnBackendDestroyDescriptor), or end the program";
    for (const CudnnStep& step : o.steps) {
      bool handles = false;
      for (uint64_t ref : step_references(step, &handles)) {
        const Object* r = vol_.find(ObjectKind::Cudnn, ref);
        if (!r || r->as<CudnnObject>().handle != handles)
          return std::string("a cuDNN backend descriptor was made from a ") + (handles ? "handle" : "descriptor") +
                 " the program has destroyed since, which a resume could not make it from again; suspend when the "
                 "program has destroyed the descriptors made from it (or keeps what they name), or end the program";
      }
    }
  }
  return {};
}

bool Session::cudnn_step_valid(const CudnnStep& s, std::string* why) {
  auto no = [&](const char* w) { return *why = w, false; };
  switch (s.op) {
    case CudnnStep::kSet: {
      const size_t size = api::cudnn_element_bytes(s.type);
      if (size == 0) return no("an attribute of an unknown type");
      if (s.count < 0 || size_t(s.count) > api::kCudnnMaxAttributeBytes / size ||
          s.elements.size() != size * size_t(s.count))
        return no("an attribute whose bytes do not match its count");
      return true;
    }
    case CudnnStep::kFill:
      if (s.type != api::kCudnnTypeBackendDescriptor || s.count < 0 ||
          size_t(s.count) > api::kCudnnMaxAttributeBytes / 8 || s.elements.size() != 8 * size_t(s.count))
        return no("descriptors filled from another that do not match their count");
      return true;
    case CudnnStep::kFinalize:
    case CudnnStep::kInitialize:
      if (!s.elements.empty() || s.count != 0) return no("a finalization with elements");
      return true;
    case CudnnStep::kLegacy:
      return no("a legacy descriptor's setting on another object");  // cudnn_legacy_valid's
  }
  return no("an unknown step");
}

#ifndef VMCUDA_WITH_CUDNN
CUresult Session::cudnn_release(CudnnObject&) { return CUDA_SUCCESS; }
std::string Session::cudnn_legacy_blocks_suspend(const CudnnObject&) const { return {}; }
bool Session::cudnn_legacy_valid(const CudnnObject&, uint64_t, std::string* why) {
  *why = "the state has cuDNN legacy descriptors, and this vmcuda-stub was built without cuDNN";
  return false;
}
bool Session::cudnn_recreate(CudnnObject&, std::string* why) {
  *why = "the state has cuDNN objects, and this vmcuda-stub was built without cuDNN";
  return false;
}
bool Session::restore_cudnn(std::string*) { return true; }
#else

// The entry points of libcudnn.so.9 the calls use (generated list; ABI types).
struct CudnnApi {
#define VMCUDA_CUDNN_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUDNN_FUNCTIONS(VMCUDA_CUDNN_DECLARE)
#undef VMCUDA_CUDNN_DECLARE
};

namespace {

using api::kCudnnBadParam;
using api::kCudnnBadParamNullPointer;
using api::kCudnnNotSupported;
using api::kCudnnSuccess;

const CudnnApi* load(const DriverApi& driver) {
  static std::mutex mu;
  static std::map<const DriverApi*, std::unique_ptr<CudnnApi>> loaded;
  std::lock_guard l(mu);
  auto [it, fresh] = loaded.try_emplace(&driver);
  if (fresh) {
    std::string w;
    void* lib = driver.open_library ? driver.open_library("libcudnn.so.9", &w) : nullptr;
    if (lib && driver.library_symbol(lib, "__vmcuda_cudnn_table")) {
      lib = nullptr;
      w = "the libcudnn.so.9 found is vmcuda's guest library: remove vmcuda's library folder from vmcuda-stub's "
          "LD_LIBRARY_PATH";
    }
    if (lib) {
      auto api = std::make_unique<CudnnApi>();
#define VMCUDA_CUDNN_LOAD(name, type) \
  api->name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
      VMCUDA_CUDNN_FUNCTIONS(VMCUDA_CUDNN_LOAD)
#undef VMCUDA_CUDNN_LOAD
      if (api->cudnnCreate && api->cudnnDestroy && api->cudnnBackendCreateDescriptor &&
          api->cudnnBackendDestroyDescriptor && api->cudnnBackendSetAttribute && api->cudnnBackendExecute)
        it->second = std::move(api);
      else
        w = "it lacks cudnnCreate or the backend API";
    }
    if (it->second) {
      VMRPC_LOG(kInfo, "stub", "loaded libcudnn.so.9 for the guests' cuDNN calls");
    } else {
      VMRPC_LOG(kWarn, "stub", "cannot load libcudnn.so.9 (" + w + "): guests' cuDNN calls answer "
                               "CUDNN_STATUS_NOT_INITIALIZED; install cuDNN 9 for CUDA 13 on this host (package "
                               "libcudnn9-cuda-13, or a wheel's nvidia/cudnn/lib in VMCUDA_HOST_LIBDIR)");
    }
  }
  return it->second.get();
}

std::atomic<uint32_t> g_complaints{0};

int32_t bad(const std::string& tag, const char* call, const char* what) {
  if (g_complaints.fetch_add(1, std::memory_order_relaxed) < 8)
    VMRPC_LOG(kWarn, "stub", tag + ": " + call + ": " + what + "; the call answers CUDNN_STATUS_BAD_PARAM");
  return kCudnnBadParam;
}

// Notes a step the guest took on descriptor `d` (it succeeded), for a resume to replay. An
// attribute set again, with only other attributes set since, replaces its earlier value.
void record(CudnnObject& d, uint64_t* seq, CudnnStep step) {
  if (d.overflow) return;
  if (step.op == CudnnStep::kSet)
    for (size_t i = d.steps.size(); i-- > 0 && d.steps[i].op == CudnnStep::kSet;)
      if (d.steps[i].name == step.name) {
        d.steps.erase(d.steps.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
  if (d.steps.size() >= kCudnnMaxSteps) {
    d.overflow = true;
    d.steps.clear();
    return;
  }
  step.seq = (*seq)++;
  d.steps.push_back(std::move(step));
}

// The client's handle (handle), backend descriptor (legacy -1) or legacy descriptor of kind
// `legacy` named `guest` (a retired one only for `retired_ok`: a resume); nullptr when it is
// none of these.
CudnnObject* cudnn_object(ObjectList& vol, uint64_t guest, bool handle, int* device = nullptr, int32_t legacy = -1,
                          bool retired_ok = false) {
  Object* o = vol.find(ObjectKind::Cudnn, guest);
  if (!o || o->as<CudnnObject>().handle != handle || (o->as<CudnnObject>().retired && !retired_ok) ||
      (!handle && o->as<CudnnObject>().legacy != legacy))
    return nullptr;
  if (device) *device = o->device;
  return &o->as<CudnnObject>();
}

// Elements in the library's form: at most kCudnnMaxAttributeBytes, 8-byte aligned.
struct Elements {
  std::vector<uint64_t> words;
  void* data() { return words.empty() ? nullptr : words.data(); }
};

}  // namespace

const CudnnApi* Session::cudnn_library(int32_t* status) {
  if (!cudnn_) cudnn_ = load(api_);
  if (!cudnn_) *status = api::kCudnnNotInitialized;
  return cudnn_;
}

CUresult Session::cudnn_release(CudnnObject& o) {
  if (o.ptr && cudnn_) {
    if (o.handle) {
      cudnn_->cudnnDestroy(o.ptr);
    } else if (o.legacy < 0) {
      cudnn_->cudnnBackendDestroyDescriptor(o.ptr);
    } else {
      switch (o.legacy) {
#define VMCUDA_CUDNN_DESTROY(tag, name) \
  case tag:                             \
    if (cudnn_->name) cudnn_->name(o.ptr); \
    break;
        VMCUDA_CUDNN_LEGACY_DESTROY(VMCUDA_CUDNN_DESTROY)
#undef VMCUDA_CUDNN_DESTROY
      }
    }
  }
  o.ptr = nullptr;
  return CUDA_SUCCESS;  // a cuDNN status is no CUresult: teardown goes on either way
}

#define VMCUDA_CUDNN_LIBRARY()                           \
  int32_t status_ = kCudnnSuccess;                       \
  const CudnnApi* lib = cudnn_library(&status_);         \
  if (!lib) return status_;

// ---- the handle

int32_t Session::on_cudnnCreate(const api::cudnnCreate_Args& a, api::Empty&, Request&) {
  if (a.handle < api::kFirstGuestHandle || vol_.find(ObjectKind::Cudnn, a.handle))
    return guest_fault("cudnnCreate: a handle that is not new");
  if (!charge_library_host(HostLibrary::kDnn)) return api::kCudnnHostAllocationFailed;
  VMCUDA_CUDNN_LIBRARY();
  void* h = nullptr;
  if (int st = lib->cudnnCreate(&h); st != kCudnnSuccess) return st;
  CudnnObject o;
  o.ptr = h;
  o.handle = true;
  vol_.add(ObjectKind::Cudnn, current_, a.handle, vol_.context(current_)->id, std::move(o));
  return kCudnnSuccess;
}

int32_t Session::on_cudnnDestroy(const api::cudnnDestroy_Args& a, api::Empty&, Request&) {
  Object* obj = vol_.find(ObjectKind::Cudnn, a.handle);
  if (!obj || !obj->as<CudnnObject>().handle) return kCudnnBadParam;
  make_current(obj->device);
  cudnn_release(obj->as<CudnnObject>());
  make_current(current_);
  vol_.remove(obj->id);
  return kCudnnSuccess;
}

int32_t Session::on_cudnnSetStream(const api::cudnnSetStream_Args& a, api::Empty&, Request&) {
  int device = -1;
  CudnnObject* h = cudnn_object(vol_, a.handle, true, &device);
  if (!h) return kCudnnBadParam;
  CUstream stream = nullptr;
  int stream_device = -1;
  if (resolve_stream(a.streamId, &stream, &stream_device) != CUDA_SUCCESS) return kCudnnBadParam;
  if (a.streamId >= api::kFirstGuestHandle && stream_device != device) return api::kCudnnBadParam;
  VMCUDA_CUDNN_LIBRARY();
  if (!lib->cudnnSetStream) return kCudnnNotSupported;
  make_current(device);
  const int st = lib->cudnnSetStream(h->ptr, stream);
  make_current(current_);
  if (st == kCudnnSuccess) h->stream = a.streamId;
  return st;
}

// ---- versions and the last error

int32_t Session::on_cudnnGetVersion(const api::Empty&, api::cudnnGetVersion_Reply& r, Request&) {
  VMCUDA_CUDNN_LIBRARY();
  const size_t v = lib->cudnnGetVersion ? lib->cudnnGetVersion() : 0;
  std::memcpy(r.ret, &v, sizeof v);
  return v ? kCudnnSuccess : kCudnnNotSupported;
}

int32_t Session::on_cudnnGetCudartVersion(const api::Empty&, api::cudnnGetCudartVersion_Reply& r, Request&) {
  VMCUDA_CUDNN_LIBRARY();
  const size_t v = lib->cudnnGetCudartVersion ? lib->cudnnGetCudartVersion() : 0;
  std::memcpy(r.ret, &v, sizeof v);
  return v ? kCudnnSuccess : kCudnnNotSupported;
}

int32_t Session::on_cudnnGetLastErrorString(const api::cudnnGetLastErrorString_Args& a, api::Empty&, Request& req) {
  VMCUDA_CUDNN_LIBRARY();
  const size_t n = std::min<size_t>({a.max_size, req.extra.size(), 4096});
  if (n == 0 || !lib->cudnnGetLastErrorString) return kCudnnSuccess;
  std::vector<char> msg(n, '\0');
  lib->cudnnGetLastErrorString(msg.data(), n);
  msg[n - 1] = '\0';
  const size_t len = std::strlen(msg.data()) + 1;
  std::memcpy(req.extra.data(), msg.data(), len);
  req.extra_bytes = static_cast<uint32_t>(len);
  return kCudnnSuccess;
}

// ---- backend descriptors

int32_t Session::on_cudnnBackendCreateDescriptor(const api::cudnnBackendCreateDescriptor_Args& a, api::Empty&,
                                                 Request&) {
  if (a.descriptor < api::kFirstGuestHandle || vol_.find(ObjectKind::Cudnn, a.descriptor))
    return guest_fault("cudnnBackendCreateDescriptor: a handle that is not new");
  VMCUDA_CUDNN_LIBRARY();
  void* d = nullptr;
  if (int st = lib->cudnnBackendCreateDescriptor(a.descriptorType, &d); st != kCudnnSuccess) return st;
  CudnnObject o;
  o.ptr = d;
  o.type = a.descriptorType;
  vol_.add(ObjectKind::Cudnn, current_, a.descriptor, vol_.context(current_)->id, std::move(o));
  return kCudnnSuccess;
}

int32_t Session::on_cudnnBackendDestroyDescriptor(const api::cudnnBackendDestroyDescriptor_Args& a, api::Empty&,
                                                  Request&) {
  Object* obj = vol_.find(ObjectKind::Cudnn, a.descriptor);
  if (!obj || obj->as<CudnnObject>().handle || obj->as<CudnnObject>().retired || obj->as<CudnnObject>().legacy >= 0)
    return kCudnnBadParam;
  cudnn_release(obj->as<CudnnObject>());
  // Nothing is made from a variant pack (the common case: one per execution).
  if (obj->as<CudnnObject>().type == api::kCudnnVariantPackDescriptor) vol_.remove(obj->id);
  else cudnn_retire(obj->id);
  return kCudnnSuccess;
}

int32_t Session::on_cudnnBackendInitialize(const api::cudnnBackendInitialize_Args& a, api::Empty&, Request&) {
  CudnnObject* d = cudnn_object(vol_, a.descriptor, false);
  if (!d) return kCudnnBadParam;
  VMCUDA_CUDNN_LIBRARY();
  const int st = lib->cudnnBackendInitialize ? lib->cudnnBackendInitialize(d->ptr) : kCudnnNotSupported;
  if (st == kCudnnSuccess) record(*d, &cudnn_seq_, {.op = CudnnStep::kInitialize});
  return st;
}

int32_t Session::on_cudnnBackendFinalize(const api::cudnnBackendFinalize_Args& a, api::Empty&, Request&) {
  int device = -1;
  CudnnObject* d = cudnn_object(vol_, a.descriptor, false, &device);
  if (!d) return kCudnnBadParam;
  VMCUDA_CUDNN_LIBRARY();
  if (!lib->cudnnBackendFinalize) return kCudnnNotSupported;
  // An execution plan compiles its kernels here: in the context of the descriptor's device.
  make_current(device);
  const int st = lib->cudnnBackendFinalize(d->ptr);
  make_current(current_);
  if (st == kCudnnSuccess) record(*d, &cudnn_seq_, {.op = CudnnStep::kFinalize});
  return st;
}

int32_t Session::on_cudnnBackendSetAttribute(const api::cudnnBackendSetAttribute_Args& a, api::Empty&, Request& req) {
  static constexpr const char* kCall = "cudnnBackendSetAttribute";
  CudnnObject* d = cudnn_object(vol_, a.descriptor, false);
  if (!d) return kCudnnBadParam;
  const size_t size = api::cudnn_element_bytes(a.attributeType);
  if (size == 0) return kCudnnNotSupported;
  if (a.elementCount < 0 || size_t(a.elementCount) > api::kCudnnMaxAttributeBytes / size ||
      req.tail.size() != size * size_t(a.elementCount))
    return guest_fault("cudnnBackendSetAttribute: the elements' bytes do not match their count");
  Elements e;
  e.words.resize((req.tail.size() + 7) / 8 + 1);  // never empty: the library refuses NULL
  std::memcpy(e.words.data(), req.tail.data(), req.tail.size());
  const size_t n = size_t(a.elementCount);
  if (a.attributeType == api::kCudnnTypeBackendDescriptor || a.attributeType == api::kCudnnTypeHandle) {
    const bool handles = a.attributeType == api::kCudnnTypeHandle;
    for (size_t i = 0; i < n; ++i) {
      CudnnObject* o = cudnn_object(vol_, e.words[i], handles);
      if (!o) return bad(log_tag_, kCall, handles ? "an element is not the client's cuDNN handle"
                                                  : "an element is not the client's backend descriptor");
      e.words[i] = reinterpret_cast<uint64_t>(o->ptr);
    }
  } else if (a.attributeType == api::kCudnnTypeVoidPtr) {
    // Device pointers (a variant pack's data pointers, workspace, intermediates): the client's
    // memory, checked again at each execution (it may be freed meanwhile).
    for (size_t i = 0; i < n; ++i)
      if (e.words[i] && !owns_range(e.words[i], 1))
        return bad(log_tag_, kCall, "a pointer element is not the client's device memory");
    d->pointers[a.attributeName].assign(e.words.begin(), e.words.begin() + n);
  }
  VMCUDA_CUDNN_LIBRARY();
  const int st = lib->cudnnBackendSetAttribute(d->ptr, a.attributeName, a.attributeType, a.elementCount, e.data());
  if (st == kCudnnSuccess)
    record(*d, &cudnn_seq_,
           {.op = CudnnStep::kSet, .name = a.attributeName, .type = a.attributeType, .count = a.elementCount,
            .elements = std::vector<std::byte>(req.tail.begin(), req.tail.end())});
  return st;
}

int32_t Session::on_cudnnBackendGetAttribute(const api::cudnnBackendGetAttribute_Args& a,
                                             api::cudnnBackendGetAttribute_Reply& r, Request& req) {
  static constexpr const char* kCall = "cudnnBackendGetAttribute";
  int device = -1;
  CudnnObject* d = cudnn_object(vol_, a.descriptor, false, &device);
  if (!d) return kCudnnBadParam;
  const size_t size = api::cudnn_element_bytes(a.attributeType);
  if (size == 0 || a.attributeType == api::kCudnnTypeHandle) return kCudnnNotSupported;
  if (a.requestedElementCount < 0 || size_t(a.requestedElementCount) > api::kCudnnMaxAttributeBytes / size)
    return guest_fault("cudnnBackendGetAttribute: a count out of range");
  const size_t n = size_t(a.requestedElementCount);
  const bool descriptors = a.attributeType == api::kCudnnTypeBackendDescriptor;
  Elements e;
  if (descriptors) {
    // The guest's descriptors that the library fills (the app made them, as the API requires).
    if (req.tail.size() != (n ? 8 * n : 0)) return guest_fault("cudnnBackendGetAttribute: descriptor elements");
    e.words.resize(n);
    for (size_t i = 0; i < n; ++i) {
      uint64_t guest;
      std::memcpy(&guest, req.tail.data() + 8 * i, 8);
      CudnnObject* o = cudnn_object(vol_, guest, false);
      if (!o) return bad(log_tag_, kCall, "an element is not the client's backend descriptor");
      e.words[i] = reinterpret_cast<uint64_t>(o->ptr);
    }
  } else {
    if (!req.tail.empty() || req.extra.size() < size * n) return guest_fault("cudnnBackendGetAttribute: room");
    e.words.resize((size * n + 7) / 8);
  }
  VMCUDA_CUDNN_LIBRARY();
  if (!lib->cudnnBackendGetAttribute) return kCudnnNotSupported;
  int64_t count = 0;
  make_current(device);
  const int st = lib->cudnnBackendGetAttribute(d->ptr, a.attributeName, a.attributeType, a.requestedElementCount,
                                               &count, n ? e.data() : nullptr);
  make_current(current_);
  if (st != kCudnnSuccess) return st;
  // The guest's descriptors the library filled (an engine configuration from the heuristics'
  // results): a resume fills them again the same way.
  if (descriptors && n)
    record(*d, &cudnn_seq_,
           {.op = CudnnStep::kFill, .name = a.attributeName, .type = a.attributeType, .count = a.requestedElementCount,
            .elements = std::vector<std::byte>(req.tail.begin(), req.tail.end())});
  std::memcpy(r.elementCount, &count, sizeof count);
  if (!descriptors && n) {
    const size_t bytes = size * std::min<size_t>(n, size_t(std::max<int64_t>(count, 0)));
    std::memcpy(req.extra.data(), e.words.data(), bytes);
    req.extra_bytes = static_cast<uint32_t>(bytes);
  }
  return st;
}

CUstream Session::cudnn_stream(CudnnObject& h) {
  // A stream the app destroyed while the handle still names it: the library would use a freed
  // stream. Natively undefined; here the handle falls back to the default stream.
  if (h.stream && !vol_.find(ObjectKind::Stream, h.stream)) {
    if (cudnn_ && cudnn_->cudnnSetStream) cudnn_->cudnnSetStream(h.ptr, nullptr);
    h.stream = 0;
  }
  CUstream stream = nullptr;
  int stream_device = -1;
  if (h.stream) resolve_stream(h.stream, &stream, &stream_device);
  return stream;
}

int32_t Session::on_cudnnBackendExecute(const api::cudnnBackendExecute_Args& a, api::Empty&, Request& req) {
  static constexpr const char* kCall = "cudnnBackendExecute";
  int device = -1;
  CudnnObject* h = cudnn_object(vol_, a.handle, true, &device);
  CudnnObject* plan = cudnn_object(vol_, a.executionPlan, false);
  CudnnObject* pack = cudnn_object(vol_, a.variantPack, false);
  if (!h || !plan || !pack) return kCudnnBadParam;
  for (const auto& [attr, pointers] : pack->pointers)
    for (uint64_t p : pointers)
      if (p && !owns_range(p, 1)) return bad(log_tag_, kCall, "a variant pack's pointer is no longer the client's memory");
  VMCUDA_CUDNN_LIBRARY();
  make_current(device);
  count_launch(device, cudnn_stream(*h), req.ctx);  // kLaunches: fair sharing, the kernel time limit
  const int st = lib->cudnnBackendExecute(h->ptr, plan->ptr, pack->ptr);
  make_current(current_);
  return st;
}
// ---- the legacy API (generated: api/libs/cudnn.calls, scripts/gen-cudnn.py)

namespace {
// The bytes a tensor of legacy descriptor `t` spans (the library's answer; 1 where it has none,
// as for a descriptor not set yet, which the call itself then refuses): a device pointer
// argument must be the client's memory that far.
uint64_t tensor_bytes_of(const CudnnApi* lib, const CudnnObject* t) {
  size_t bytes = 0;
  if (t && lib->cudnnGetTensorSizeInBytes && lib->cudnnGetTensorSizeInBytes(t->ptr, &bytes) == kCudnnSuccess && bytes)
    return bytes;
  return 1;
}
constexpr uint32_t call_number(api::Call c) { return static_cast<uint32_t>(c); }
// The most dimensions of a legacy descriptor (CUDNN_DIM_MAX), and the most trailing bytes one of
// its settings carries (cudnnSetConvolutionNdDescriptor's three arrays).
constexpr int32_t kLegacyMaxDims = 8;
constexpr size_t kLegacyMaxTail = std::max<size_t>(3 * kLegacyMaxDims * 4, VMCUDA_CUDNN_LEGACY_MAX_TAIL);
// An RNN data descriptor's setting as recorded (no call into the library: a guest's call is
// checked before it runs): its arguments and sequence lengths; nullptr where it is not set.
const CudnnStep* rnn_data_setting(const CudnnObject* d, api::cudnnSetRNNDataDescriptor_Args* shape) {
  if (!d) return nullptr;
  for (auto s = d->steps.rbegin(); s != d->steps.rend(); ++s)
    if (s->op == CudnnStep::kLegacy && s->name == int32_t(call_number(api::Call::cudnnSetRNNDataDescriptor)) &&
        s->elements.size() >= sizeof *shape) {
      std::memcpy(shape, s->elements.data(), sizeof *shape);
      return &*s;
    }
  return nullptr;
}
// The bytes the sequences of RNN data descriptor `d` span: maxSeqLength x batchSize vectors, or
// (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED) one per step of each sequence; 1 where it is not set,
// which the call itself then refuses.
uint64_t rnn_data_bytes(const CudnnObject* d) {
  api::cudnnSetRNNDataDescriptor_Args a{};
  const CudnnStep* s = rnn_data_setting(d, &a);
  if (!s || a.maxSeqLength < 1 || a.batchSize < 1 || a.vectorSize < 1) return 1;
  const uint64_t element = a.dataType == 1 ? 8 : (a.dataType == 2 || a.dataType == 9) ? 2 : a.dataType == 0 ? 4 : 1;
  uint64_t vectors = uint64_t(a.maxSeqLength) * uint64_t(a.batchSize);
  if (a.layout == 1 && s->elements.size() >= sizeof a + 4 * size_t(a.batchSize)) {
    vectors = 0;
    for (int32_t i = 0; i < a.batchSize; ++i) {
      int32_t n = 0;
      std::memcpy(&n, s->elements.data() + sizeof a + 4 * size_t(i), 4);
      vectors += uint64_t(std::clamp(n, 0, a.maxSeqLength));
    }
  }
  return std::max<uint64_t>(vectors * uint64_t(a.vectorSize) * element, 1);
}
// Its sequences (batchSize; 1 where it is not set).
uint64_t rnn_data_batch(const CudnnObject* d) {
  api::cudnnSetRNNDataDescriptor_Args a{};
  return rnn_data_setting(d, &a) && a.batchSize > 0 ? uint64_t(a.batchSize) : 1;
}
// The bytes a filter of legacy descriptor `f` spans (as tensor_bytes_of).
uint64_t filter_bytes_of(const CudnnApi* lib, const CudnnObject* f) {
  size_t bytes = 0;
  if (f && lib->cudnnGetFilterSizeInBytes && lib->cudnnGetFilterSizeInBytes(f->ptr, &bytes) == kCudnnSuccess && bytes)
    return bytes;
  return 1;
}
}  // namespace
// ---- cudnnFind*Algorithm (api/libs/cudnn.calls `arena`): NVIDIA's search allocates its own
// buffers and workspace with cudaMalloc, memory outside the client's arena that its quota does
// not see; the Ex form searches on buffers the caller gives, so the stub gives memory of the
// client's arena (metered by the VM's ledger, as the client's own) and frees it after.

namespace {
// Device memory of the client's arena for one call: freed (after the client's work: the arena's
// free synchronizes) when it goes; none where the arena has no room (ptr 0).
struct ArenaScratch {
  DeviceArena* arena = nullptr;
  uint64_t ptr = 0, bytes = 0;
  ArenaScratch(DeviceArena* a, int device, uint64_t want) : arena(a) {
    if (a && want && a->allocate(device, want, &ptr) == CUDA_SUCCESS) bytes = want;
    else ptr = 0;
  }
  ~ArenaScratch() {
    if (ptr) arena->free(ptr);
  }
  ArenaScratch(const ArenaScratch&) = delete;
  ArenaScratch& operator=(const ArenaScratch&) = delete;
  void* get() const { return reinterpret_cast<void*>(ptr); }
};
// The bytes of descriptor `d`: a tensor's or a filter's (0 where the library cannot say).
uint64_t desc_bytes(const CudnnApi* lib, void* d, bool filter) {
  size_t bytes = 0;
  auto size = filter ? lib->cudnnGetFilterSizeInBytes : lib->cudnnGetTensorSizeInBytes;
  return d && size && size(d, &bytes) == kCudnnSuccess ? bytes : 0;
}
}  // namespace

int32_t Session::cudnn_find_in_arena(int device, api::Call call, void* handle, void* d1, void* d2, void* conv, void* d3,
                                     int requested, void* returned, void* perf) {
  const CudnnApi* lib = cudnn_;
  // The three searches share their shapes: (handle, d1, d2, conv, d3, ...) and the Ex form's
  // (handle, d1, buffer, d2, buffer, conv, d3, buffer, ..., workspace, bytes).
  decltype(lib->cudnnFindConvolutionForwardAlgorithmEx) ex = nullptr;
  decltype(lib->cudnnGetConvolutionForwardWorkspaceSize) workspace_size = nullptr;
  decltype(lib->cudnnGetConvolutionForwardAlgorithmMaxCount) max_count = nullptr;
  bool filter[3] = {};  // which of d1, d2, d3 is a filter
  switch (call) {
    case api::Call::cudnnFindConvolutionForwardAlgorithm:  // x, w, y
      ex = lib->cudnnFindConvolutionForwardAlgorithmEx, workspace_size = lib->cudnnGetConvolutionForwardWorkspaceSize;
      max_count = lib->cudnnGetConvolutionForwardAlgorithmMaxCount, filter[1] = true;
      break;
    case api::Call::cudnnFindConvolutionBackwardDataAlgorithm:  // w, dy, dx
      ex = lib->cudnnFindConvolutionBackwardDataAlgorithmEx;
      workspace_size = lib->cudnnGetConvolutionBackwardDataWorkspaceSize;
      max_count = lib->cudnnGetConvolutionBackwardDataAlgorithmMaxCount, filter[0] = true;
      break;
    case api::Call::cudnnFindConvolutionBackwardFilterAlgorithm:  // x, dy, dw
      ex = lib->cudnnFindConvolutionBackwardFilterAlgorithmEx;
      workspace_size = lib->cudnnGetConvolutionBackwardFilterWorkspaceSize;
      max_count = lib->cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, filter[2] = true;
      break;
    default:
      return kCudnnNotSupported;
  }
  if (!ex || !workspace_size || !max_count) return kCudnnNotSupported;
  DeviceArena* arena = arena_.get();
  const int host_device = devices_[device];
  const ArenaScratch b1(arena, host_device, desc_bytes(lib, d1, filter[0])),
      b2(arena, host_device, desc_bytes(lib, d2, filter[1])), b3(arena, host_device, desc_bytes(lib, d3, filter[2]));
  if ((d1 && !b1.ptr) || (d2 && !b2.ptr) || (d3 && !b3.ptr)) return api::kCudnnDeviceAllocationFailed;  // the quota (or the arena) has no room
  // The workspace: as much as the hungriest algorithm asks, as NVIDIA's search gives each (an
  // algorithm whose workspace does not fit the quota is reported failed, as the Ex form does).
  int algorithms = 0;
  uint64_t want = 0;
  if (max_count(handle, &algorithms) == kCudnnSuccess)
    for (int algo = 0; algo < algorithms; ++algo) {
      size_t bytes = 0;
      if (workspace_size(handle, d1, d2, conv, d3, algo, &bytes) == kCudnnSuccess) want = std::max<uint64_t>(want, bytes);
    }
  const ArenaScratch workspace(arena, host_device, std::min(want, quota_left()));
  return ex(handle, d1, b1.get(), d2, b2.get(), conv, d3, b3.get(), requested, returned, perf, workspace.get(),
            workspace.bytes);
}

// ---- the spatial transformer and CTC loss (api/libs/cudnn.calls `extent`): how far their
// device pointers reach, from their descriptors

namespace {
// The bytes of one element of cudnnDataType_t `type` (those the spatial transformer and CTC loss take).
uint64_t data_type_bytes(int32_t type) {
  switch (type) {
    case 1: return 8;         // DOUBLE
    case 2: case 9: return 2; // HALF, BFLOAT16
    default: return 4;        // FLOAT (and what the library refuses anyway)
  }
}
// A spatial transformer's setting as recorded (its data type and [N, C, H, W]); false where it
// has none the host can use (the library refuses such a descriptor's calls itself).
bool st_setting(const CudnnObject* d, int32_t* type, int32_t dims[4]) {
  if (!d) return false;
  for (const CudnnStep& s : d->steps) {
    if (s.op != CudnnStep::kLegacy ||
        s.name != static_cast<int32_t>(call_number(api::Call::cudnnSetSpatialTransformerNdDescriptor)))
      continue;
    api::cudnnSetSpatialTransformerNdDescriptor_Args a{};
    if (s.elements.size() < sizeof a) return false;
    std::memcpy(&a, s.elements.data(), sizeof a);
    if (a.nbDims != 4 || s.elements.size() < sizeof a + 16) return false;
    std::memcpy(dims, s.elements.data() + sizeof a, 16);
    for (int i = 0; i < 4; ++i)
      if (dims[i] <= 0) return false;
    *type = a.dataType;
    return true;
  }
  return false;
}
// theta: N 2x3 matrices; the grid: N x H x W (x, y) pairs (cudnn_ops.h).
uint64_t st_theta_bytes(const CudnnObject* d) {
  int32_t type = 0, dims[4] = {};
  return st_setting(d, &type, dims) ? uint64_t(dims[0]) * 6 * data_type_bytes(type) : 1;
}
uint64_t st_grid_bytes(const CudnnObject* d) {
  int32_t type = 0, dims[4] = {};
  return st_setting(d, &type, dims) ? uint64_t(dims[0]) * dims[2] * dims[3] * 2 * data_type_bytes(type) : 1;
}
// CTC loss's probabilities: T x N x A (3 dimensions); false where the descriptor is none such.
bool ctc_probs_shape(const CudnnApi* lib, const CudnnObject* probs, int32_t* type, int32_t dims[3]) {
  int32_t nb = 0, all[kLegacyMaxDims] = {}, strides[kLegacyMaxDims] = {};
  if (!probs || !lib->cudnnGetTensorNdDescriptor ||
      lib->cudnnGetTensorNdDescriptor(probs->ptr, kLegacyMaxDims, type, &nb, all, strides) != kCudnnSuccess || nb != 3)
    return false;
  std::memcpy(dims, all, 12);
  return dims[0] > 0 && dims[1] > 0 && dims[2] > 0;
}
// One int per sequence of the batch (label and input lengths), one cost per sequence.
uint64_t ctc_batch_ints_of(const CudnnApi* lib, const CudnnObject* probs) {
  int32_t type = 0, dims[3] = {};
  return ctc_probs_shape(lib, probs, &type, dims) ? uint64_t(dims[1]) * 4 : 1;
}
uint64_t ctc_costs_bytes_of(const CudnnApi* lib, const CudnnObject* probs) {
  int32_t type = 0, dims[3] = {};
  return ctc_probs_shape(lib, probs, &type, dims) ? uint64_t(dims[1]) * data_type_bytes(type) : 1;
}
// cuDNN's longest label (cudnn_adv.h: "label lengths ... <= 256").
constexpr int32_t kCtcMaxLabelLength = 256;
// cudnnCTCLoss's and cudnnGetCTCLossWorkspaceSize's host arrays, from the call's trailing bytes:
// N label lengths, N input lengths, then the labels they add up to (api/libs/cudnn.calls).
struct CtcHostArrays {
  std::vector<int32_t> label_lengths, input_lengths, labels;
  const char* fault = nullptr;  // trailing bytes that do not match the call (a guest fault)
};
// The arrays checked against probabilities descriptor `probs` (lengths within cuDNN's limits and
// the tensor's time steps, labels within its alphabet): kCudnnSuccess, or the status with *why.
int32_t ctc_host_arrays(const CudnnApi* lib, const CudnnObject* probs, std::span<const std::byte> tail,
                        CtcHostArrays* out, const char** why) {
  int32_t type = 0, dims[3] = {};
  if (!ctc_probs_shape(lib, probs, &type, dims)) return *why = "probsDesc is no 3-dimensional tensor (T, N, A)", kCudnnBadParam;
  const size_t n = size_t(dims[1]);
  if (tail.size() < 8 * n) return out->fault = "fewer lengths than the batch has sequences", kCudnnBadParam;
  out->label_lengths.resize(n);
  out->input_lengths.resize(n);
  std::memcpy(out->label_lengths.data(), tail.data(), 4 * n);
  std::memcpy(out->input_lengths.data(), tail.data() + 4 * n, 4 * n);
  uint64_t labels = 0;
  for (size_t b = 0; b < n; ++b) {
    // The library reads as many labels as the lengths say and indexes the probabilities by the
    // input lengths and labels: out of range, it would read past the app's memory.
    if (out->label_lengths[b] < 0 || out->label_lengths[b] > kCtcMaxLabelLength)
      return *why = "a label length is negative or above 256 (cuDNN's longest label)", kCudnnBadParam;
    if (out->input_lengths[b] < 0 || out->input_lengths[b] > dims[0])
      return *why = "an input length is negative or longer than probsDesc's time steps", kCudnnBadParam;
    labels += uint64_t(out->label_lengths[b]);
  }
  if (tail.size() != 8 * n + 4 * labels) return out->fault = "the labels' bytes do not match the label lengths", kCudnnBadParam;
  out->labels.resize(labels + 1);  // never empty: the library is given a pointer
  std::memcpy(out->labels.data(), tail.data() + 8 * n, 4 * labels);
  for (uint64_t i = 0; i < labels; ++i)
    if (out->labels[i] < 0 || out->labels[i] >= dims[2])
      return *why = "a label is outside the alphabet (probsDesc's third dimension)", kCudnnBadParam;
  return kCudnnSuccess;
}

// What cudnnGetCTCLossWorkspaceSize and cudnnCTCLoss (the host-array forms) both take: the
// handle (its device), the probabilities', gradients' and CTC loss descriptors, and the host
// arrays after the Args. kCudnnSuccess; else the status, with *why to log (nullptr: a handle
// that is not the client's, answered without a line) or c->arrays.fault (a guest fault).
struct CtcCall {
  int device = -1;
  CudnnObject *handle = nullptr, *probs = nullptr, *grads = nullptr, *ctc = nullptr;
  CtcHostArrays arrays;
};
template <class Args>
int32_t ctc_call(const CudnnApi* lib, ObjectList& vol, const Args& a, int current, std::span<const std::byte> tail,
                 CtcCall* c, const char** why) {
  c->device = current;
  *why = nullptr;
  c->handle = cudnn_object(vol, a.handle, true, &c->device);
  if (!c->handle) return kCudnnBadParam;
  c->probs = a.probsDesc ? cudnn_object(vol, a.probsDesc, false, nullptr, 0) : nullptr;
  c->grads = a.gradientsDesc ? cudnn_object(vol, a.gradientsDesc, false, nullptr, 0) : nullptr;
  c->ctc = a.ctcLossDesc ? cudnn_object(vol, a.ctcLossDesc, false, nullptr, 10) : nullptr;
  if ((a.probsDesc && !c->probs) || (a.gradientsDesc && !c->grads) || (a.ctcLossDesc && !c->ctc))
    return *why = "a descriptor is not the client's of its kind", kCudnnBadParam;
  return ctc_host_arrays(lib, c->probs, tail, &c->arrays, why);
}
}  // namespace

int32_t Session::on_cudnnGetCTCLossWorkspaceSize(const api::cudnnGetCTCLossWorkspaceSize_Args& a,
                                                 api::cudnnGetCTCLossWorkspaceSize_Reply& r, Request& req) {
  static constexpr const char* kCall = "cudnnGetCTCLossWorkspaceSize";
  VMCUDA_CUDNN_LIBRARY();
  if (!lib->cudnnGetCTCLossWorkspaceSize) return kCudnnNotSupported;
  CtcCall c;
  const char* why = nullptr;
  if (int32_t st = ctc_call(lib, vol_, a, current_, req.tail, &c, &why); st != kCudnnSuccess)
    return c.arrays.fault ? guest_fault((std::string(kCall) + ": " + c.arrays.fault).c_str())
           : why          ? bad(log_tag_, kCall, why)
                          : st;
  make_current(c.device);
  size_t bytes = 0;
  const int st = lib->cudnnGetCTCLossWorkspaceSize(
      c.handle->ptr, c.probs->ptr, c.grads ? c.grads->ptr : nullptr, c.arrays.labels.data(),
      c.arrays.label_lengths.data(), c.arrays.input_lengths.data(), a.algo, c.ctc ? c.ctc->ptr : nullptr, &bytes);
  make_current(current_);
  std::memcpy(r.sizeInBytes, &bytes, 8);
  return st;
}

int32_t Session::on_cudnnCTCLoss(const api::cudnnCTCLoss_Args& a, api::Empty&, Request& req) {
  static constexpr const char* kCall = "cudnnCTCLoss";
  VMCUDA_CUDNN_LIBRARY();
  if (!lib->cudnnCTCLoss) return kCudnnNotSupported;
  CtcCall c;
  const char* why = nullptr;
  if (int32_t st = ctc_call(lib, vol_, a, current_, req.tail, &c, &why); st != kCudnnSuccess)
    return c.arrays.fault ? guest_fault((std::string(kCall) + ": " + c.arrays.fault).c_str())
           : why          ? bad(log_tag_, kCall, why)
                          : st;
  CudnnObject *h = c.handle, *probs = c.probs, *grads = c.grads, *ctc = c.ctc;
  CtcHostArrays& arrays = c.arrays;
  const int device = c.device;
  if (a.probs && !owns_range(a.probs, tensor_bytes_of(lib, probs)))
    return bad(log_tag_, kCall, "probs is not the client's device memory (or ends beyond it)");
  if (a.costs && !owns_range(a.costs, ctc_costs_bytes_of(lib, probs)))
    return bad(log_tag_, kCall, "costs is not the client's device memory (or ends beyond it)");
  if (a.gradients && !owns_range(a.gradients, tensor_bytes_of(lib, grads ? grads : probs)))
    return bad(log_tag_, kCall, "gradients is not the client's device memory (or ends beyond it)");
  if (a.workspace && !owns_range(a.workspace, std::max<uint64_t>(a.workSpaceSizeInBytes, 1)))
    return bad(log_tag_, kCall, "workspace is not the client's device memory (or ends beyond it)");
  make_current(device);
  count_launch(device, cudnn_stream(*h), req.ctx);  // kLaunches: fair sharing, the kernel time limit
  const int st = lib->cudnnCTCLoss(h->ptr, probs->ptr, reinterpret_cast<void*>(a.probs), arrays.labels.data(),
                                   arrays.label_lengths.data(), arrays.input_lengths.data(),
                                   reinterpret_cast<void*>(a.costs), grads ? grads->ptr : nullptr,
                                   reinterpret_cast<void*>(a.gradients), a.algo, ctc ? ctc->ptr : nullptr,
                                   reinterpret_cast<void*>(a.workspace), a.workSpaceSizeInBytes);
  make_current(current_);
  return st;
}

#define tensor_bytes(t) tensor_bytes_of(lib, t)
#define filter_bytes(f) filter_bytes_of(lib, f)
#define ctc_batch_ints(t) ctc_batch_ints_of(lib, t)
#define ctc_costs_bytes(t) ctc_costs_bytes_of(lib, t)

#include "cudnn_host.inc"
#undef ctc_costs_bytes
#undef ctc_batch_ints
#undef filter_bytes
#undef tensor_bytes
#undef VMCUDA_CUDNN_LIBRARY

// ---- legacy descriptors across a suspend: their settings, replayed through their handlers

void Session::cudnn_note_legacy(CudnnObject& d, uint32_t call, const void* args, size_t args_bytes,
                                std::span<const std::byte> tail) {
  if (cudnn_replaying_) return;
  CudnnStep step{.op = CudnnStep::kLegacy, .name = static_cast<int32_t>(call), .count = int64_t(args_bytes)};
  const auto* in = static_cast<const std::byte*>(args);
  step.elements.assign(in, in + args_bytes);
  step.elements.insert(step.elements.end(), tail.begin(), tail.end());
  if (call == call_number(api::Call::cudnnDeriveBNTensorDescriptor)) {
    // What it derived, kept as a setting of its own: the descriptor it came from may be gone
    // by the suspend (the library keeps no link either).
    api::cudnnDeriveBNTensorDescriptor_Args from{};
    std::memcpy(&from, args, sizeof from);
    api::cudnnSetTensorNdDescriptor_Args set{};
    set.tensorDesc = from.derivedBnDesc;
    int32_t dims[kLegacyMaxDims] = {}, strides[kLegacyMaxDims] = {};
    if (!cudnn_->cudnnGetTensorNdDescriptor ||
        cudnn_->cudnnGetTensorNdDescriptor(d.ptr, kLegacyMaxDims, &set.dataType, &set.nbDims, dims, strides) !=
            kCudnnSuccess ||
        set.nbDims < 1 || set.nbDims > kLegacyMaxDims) {
      d.overflow = true;  // a suspend is refused (cudnn_legacy_blocks_suspend)
      return;
    }
    const size_t n = size_t(set.nbDims) * 4;
    step.name = static_cast<int32_t>(call_number(api::Call::cudnnSetTensorNdDescriptor));
    step.count = sizeof set;
    step.elements.resize(sizeof set + 2 * n);
    std::memcpy(step.elements.data(), &set, sizeof set);
    std::memcpy(step.elements.data() + sizeof set, dims, n);
    std::memcpy(step.elements.data() + sizeof set + n, strides, n);
  }
  d.overflow = false;
  // A setting replaces an earlier one by the same call (a call sets the same fields each time),
  // so a descriptor keeps at most one step per call.
  std::erase_if(d.steps, [&](const CudnnStep& s) { return s.op == CudnnStep::kLegacy && s.name == step.name; });
  step.seq = cudnn_seq_++;
  d.steps.push_back(std::move(step));
}

void Session::cudnn_answer_guest_handle(uint8_t* out, int32_t tag) {
  void* ptr = nullptr;
  std::memcpy(&ptr, out, sizeof ptr);
  uint64_t guest = 0;
  if (ptr)
    for (const auto& [g, id] : vol_.of(ObjectKind::Cudnn)) {
      const CudnnObject& o = vol_.get(id)->as<CudnnObject>();
      if (!o.handle && !o.retired && o.legacy == tag && o.ptr == ptr) guest = g;
    }
  std::memcpy(out, &guest, sizeof guest);  // never the library's pointer: 0 where none is the client's
}

void Session::cudnn_note_filled_tensor(CudnnObject& d, uint64_t guest) {
  if (cudnn_replaying_) return;
  int32_t type = 0, nb = 0, dims[kLegacyMaxDims] = {}, strides[kLegacyMaxDims] = {};
  const bool shaped = cudnn_->cudnnGetTensorNdDescriptor &&
                      cudnn_->cudnnGetTensorNdDescriptor(d.ptr, kLegacyMaxDims, &type, &nb, dims, strides) ==
                          kCudnnSuccess &&
                      nb >= 1 && nb <= kLegacyMaxDims &&
                      std::all_of(dims, dims + nb, [](int32_t v) { return v > 0; }) &&
                      std::all_of(strides, strides + nb, [](int32_t v) { return v > 0; });
  if (!shaped) {
    // No shape a setting could make (an absent bias): the descriptor comes back unset.
    std::erase_if(d.steps, [](const CudnnStep& s) { return s.op == CudnnStep::kLegacy; });
    d.overflow = false;
    return;
  }
  // Recorded as cudnnDeriveBNTensorDescriptor's result is: its shape read back, set by
  // cudnnSetTensorNdDescriptor.
  api::cudnnDeriveBNTensorDescriptor_Args from{};
  from.derivedBnDesc = guest;
  cudnn_note_legacy(d, call_number(api::Call::cudnnDeriveBNTensorDescriptor), &from, sizeof from, {});
}

namespace {
constexpr int32_t kDropoutTag = 5;  // gen-cudnn.py LEGACY_DESCRIPTORS
// A dropout descriptor's setting: the cuDNN handle it names (false: the step is another call's).
bool dropout_handle(const CudnnStep& s, uint64_t* handle, uint64_t* states, uint64_t* bytes) {
  auto take = [&]<class A>(std::type_identity<A>) {
    A a{};
    if (s.elements.size() < sizeof a) return false;
    std::memcpy(&a, s.elements.data(), sizeof a);
    *handle = a.handle, *states = a.states, *bytes = a.stateSizeInBytes;
    return true;
  };
  if (s.name == static_cast<int32_t>(call_number(api::Call::cudnnSetDropoutDescriptor)))
    return take(std::type_identity<api::cudnnSetDropoutDescriptor_Args>{});
  if (s.name == static_cast<int32_t>(call_number(api::Call::cudnnRestoreDropoutDescriptor)))
    return take(std::type_identity<api::cudnnRestoreDropoutDescriptor_Args>{});
  return false;
}
}  // namespace

std::string Session::cudnn_legacy_blocks_suspend(const CudnnObject& d) const {
  if (d.overflow)
    return "a cuDNN tensor descriptor set by cudnnDeriveBNTensorDescriptor could not be read back (the library "
           "answered no cudnnGetTensorNdDescriptor), so a resume could not make it again; suspend when the program "
           "has destroyed it, or end the program";
  // (A handle the program destroyed since is no matter: the resume restores the descriptor
  // with another, cudnn_replay_legacy.)
  for (const CudnnStep& step : d.steps) {
    api::cudnnSetRNNDescriptor_v8_Args rnn{};
    if (step.name == static_cast<int32_t>(call_number(api::Call::cudnnSetRNNDescriptor_v8)) &&
        step.elements.size() >= sizeof rnn) {
      std::memcpy(&rnn, step.elements.data(), sizeof rnn);
      const Object* dropout = rnn.dropoutDesc ? vol_.find(ObjectKind::Cudnn, rnn.dropoutDesc) : nullptr;
      if (rnn.dropoutDesc && (!dropout || dropout->as<CudnnObject>().legacy != kDropoutTag))
        return "a cuDNN RNN descriptor names a dropout descriptor the program has destroyed since, which a resume "
               "could not set it with again; suspend when the program has destroyed the RNN descriptor too (or "
               "keeps the dropout descriptor), or end the program";
    }
    uint64_t handle = 0, states = 0, bytes = 0;
    if (!dropout_handle(step, &handle, &states, &bytes)) continue;
    if (states && !owns_range(states, std::max<uint64_t>(bytes, 1)))
      return "a cuDNN dropout descriptor's states are memory the program has freed since, which a resume restores "
             "it from; suspend while the memory exists, or end the program";
  }
  return {};
}

bool Session::cudnn_legacy_valid(const CudnnObject& d, uint64_t guest, std::string* why) {
  auto no = [&](const std::string& w) { return *why = w, false; };
  bool known = false;
#define VMCUDA_CUDNN_KIND(tag, name) known |= d.legacy == (tag);
  VMCUDA_CUDNN_LEGACY_CREATE(VMCUDA_CUDNN_KIND)
#undef VMCUDA_CUDNN_KIND
  if (!known) return no("a legacy descriptor of an unknown kind");
  if (d.handle || d.retired || d.type != 0 || d.stream != 0 || d.overflow)
    return no("a legacy descriptor with a handle's or a backend descriptor's data");
  if (d.steps.size() > kCudnnMaxSteps) return no("too many steps");
  for (const CudnnStep& s : d.steps) {
    if (s.op != CudnnStep::kLegacy || s.type != 0) return no("a backend step on a legacy descriptor");
    bool ok = false;
    std::string w = "a setting by a call that sets no legacy descriptor";
    auto check = [&]<class A>(std::type_identity<A>, uint64_t A::* field, int32_t tag) {
      A a{};
      if (tag != d.legacy) return w = "a setting of another kind of descriptor", false;
      if (s.count != int64_t(sizeof a) || s.elements.size() < sizeof a || s.elements.size() - sizeof a > kLegacyMaxTail)
        return w = "a setting whose bytes do not match its call", false;
      std::memcpy(&a, s.elements.data(), sizeof a);
      if (a.*field != guest) return w = "a setting of another descriptor", false;
      return true;
    };
#define VMCUDA_CUDNN_CHECK(call, field, tag)                              \
  if (s.name == static_cast<int32_t>(call_number(api::Call::call)))       \
    ok = check(std::type_identity<api::call##_Args>{}, &api::call##_Args::field, tag);
    VMCUDA_CUDNN_LEGACY_RECORDS(VMCUDA_CUDNN_CHECK)
#undef VMCUDA_CUDNN_CHECK
    if (!ok) return no(w);
  }
  return true;
}

int32_t Session::cudnn_replay_legacy(uint64_t guest, const CudnnStep& s) {
  const vmrpc::RegionView no_region;
  const vmrpc::CallContext ctx{info_, region_ ? *region_ : no_region};
  const std::span<const std::byte> all(s.elements);
  cudnn_replaying_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{cudnn_replaying_};
  api::Empty r;
  // A dropout descriptor's setting names the cuDNN handle it was made with, which the program
  // may have destroyed since; the descriptor keeps none (cudnnGetDropoutDescriptor and
  // cudnnDropoutForward are given one), and restoring it launches nothing, so another of the
  // client's handles on its device restores it as well, or a temporary one made for it.
  struct Temporary {
    Session& s;
    ObjectId id = 0;
    ~Temporary() {
      if (Object* o = s.vol_.get(id)) {
        s.cudnn_release(o->as<CudnnObject>());
        s.vol_.remove(id);
      }
    }
  } temporary{*this};
  auto live_handle = [&](uint64_t named) -> uint64_t {
    const Object* d = vol_.find(ObjectKind::Cudnn, guest);
    if (!d) return named;
    auto usable = [&](const Object* h) {
      return h && h->device == d->device && h->as<CudnnObject>().handle && h->as<CudnnObject>().ptr;
    };
    if (usable(vol_.find(ObjectKind::Cudnn, named))) return named;
    for (const auto& [g, id] : vol_.of(ObjectKind::Cudnn))
      if (usable(vol_.get(id))) return g;
    void* made = nullptr;
    if (!cudnn_ || cudnn_->cudnnCreate(&made) != kCudnnSuccess) return named;  // the replay answers why
    CudnnObject h;
    h.ptr = made;
    h.handle = true;
    uint64_t key;
    do key = kCudnnRetiredHandle | cudnn_retired_++;
    while (vol_.find(ObjectKind::Cudnn, key));
    temporary.id = vol_.add(ObjectKind::Cudnn, d->device, key, vol_.context(d->device)->id, std::move(h)).id;
    return key;
  };
  auto replay = [&]<class A>(A& a, uint64_t A::* field, auto handler) -> int32_t {
    if (s.count != int64_t(sizeof a) || all.size() < sizeof a) return kCudnnBadParam;  // checked when read
    std::memcpy(&a, all.data(), sizeof a);
    if (a.*field != guest) return kCudnnBadParam;
    if constexpr (std::is_same_v<A, api::cudnnSetDropoutDescriptor_Args> ||
                  std::is_same_v<A, api::cudnnRestoreDropoutDescriptor_Args>)
      a.handle = live_handle(a.handle);
    Request req{all.subspan(sizeof a), {}, 0, ctx};
    if constexpr (std::is_same_v<A, api::cudnnSetDropoutDescriptor_Args>) {
      // Its states came back with the client's memory: restored, not made again (which would
      // start the random sequence anew).
      api::cudnnRestoreDropoutDescriptor_Args b{};
      b.dropoutDesc = a.dropoutDesc, b.handle = a.handle, b.dropout = a.dropout, b.states = a.states;
      b.stateSizeInBytes = a.stateSizeInBytes, b.seed = a.seed;
      (void)handler;
      return on_cudnnRestoreDropoutDescriptor(b, r, req);
    } else {
      return (this->*handler)(a, r, req);
    }
  };
#define VMCUDA_CUDNN_REPLAY(call, field, tag)                                  \
  if (s.name == static_cast<int32_t>(call_number(api::Call::call))) {          \
    api::call##_Args a{};                                                      \
    return replay(a, &api::call##_Args::field, &Session::on_##call);           \
  }
  VMCUDA_CUDNN_LEGACY_RECORDS(VMCUDA_CUDNN_REPLAY)
#undef VMCUDA_CUDNN_REPLAY
  return kCudnnNotSupported;
}

void Session::cudnn_retire(ObjectId id) {
  Object* obj = vol_.get(id);
  const uint64_t guest = obj->handle;
  const int device = obj->device;
  const ObjectId parent = obj->parent;
  CudnnObject d = std::move(obj->as<CudnnObject>());
  vol_.remove(id);
  d.ptr = nullptr;
  d.pointers.clear();
  d.retired = true;
  uint64_t key;
  do key = kCudnnRetiredHandle | cudnn_retired_++;
  while (vol_.find(ObjectKind::Cudnn, key));
  // What names it names the retired one now (the guest may make a new descriptor behind its handle).
  for (const auto& [h, other] : vol_.of(ObjectKind::Cudnn))
    for (CudnnStep& step : vol_.get(other)->as<CudnnObject>().steps) {
      bool handles = false;
      const std::vector<uint64_t> refs = step_references(step, &handles);
      for (size_t i = 0; i < refs.size(); ++i)
        if (!handles && refs[i] == guest) std::memcpy(step.elements.data() + 8 * i, &key, 8);
    }
  vol_.add(ObjectKind::Cudnn, device, key, parent, std::move(d));
  cudnn_collect();
}

void Session::cudnn_collect() {
  // What each descriptor needs: what its attributes name, the descriptor it was filled from,
  // and (for that one) the descriptors it filled.
  std::map<uint64_t, std::vector<uint64_t>> needs;
  std::vector<uint64_t> todo;
  for (const auto& [h, id] : vol_.of(ObjectKind::Cudnn)) {
    const CudnnObject& d = vol_.get(id)->as<CudnnObject>();
    if (!d.retired) todo.push_back(h);
    for (const CudnnStep& step : d.steps) {
      bool handles = false;
      for (uint64_t ref : step_references(step, &handles)) {
        if (handles) continue;
        needs[h].push_back(ref);
        // A descriptor filled from another needs it; the other's replay fills it (so needs it) too.
        if (step.op == CudnnStep::kFill) needs[ref].push_back(h);
      }
    }
  }
  std::set<uint64_t> kept(todo.begin(), todo.end());
  while (!todo.empty()) {
    const uint64_t h = todo.back();
    todo.pop_back();
    for (uint64_t n : needs[h])
      if (kept.insert(n).second) todo.push_back(n);
  }
  std::vector<ObjectId> gone;
  for (const auto& [h, id] : vol_.of(ObjectKind::Cudnn))
    if (vol_.get(id)->as<CudnnObject>().retired && !kept.contains(h)) gone.push_back(id);
  for (ObjectId id : gone) vol_.remove(id);
}

bool Session::cudnn_recreate(CudnnObject& o, std::string* why) {
  int32_t status = kCudnnSuccess;
  const CudnnApi* lib = cudnn_library(&status);
  if (!lib) {
    *why = "a cuDNN object cannot be made again: no usable libcudnn.so.9 on this host";
    return false;
  }
  o.ptr = nullptr;
  o.pointers.clear();  // set again with the steps (restore_cudnn)
  int st = kCudnnNotSupported;
  if (o.legacy >= 0) {
    switch (o.legacy) {
#define VMCUDA_CUDNN_CREATE(tag, name) \
  case tag:                            \
    if (lib->name) st = lib->name(&o.ptr); \
    break;
      VMCUDA_CUDNN_LEGACY_CREATE(VMCUDA_CUDNN_CREATE)
#undef VMCUDA_CUDNN_CREATE
    }
  } else {
    st = o.handle ? lib->cudnnCreate(&o.ptr) : lib->cudnnBackendCreateDescriptor(o.type, &o.ptr);
  }
  if (st != kCudnnSuccess) {
    o.ptr = nullptr;
    *why = std::string("making a cuDNN ") +
           (o.handle ? "handle"
            : o.legacy >= 0 ? "legacy descriptor of kind " + std::to_string(o.legacy)
                            : "descriptor of type " + std::to_string(o.type)) +
           " again failed (cudnnStatus_t " + std::to_string(st) + ")";
    return false;
  }
  return true;
}

bool Session::restore_cudnn(std::string* why) {
  struct At {
    bool later;  // false: a dropout descriptor's setting, which the RNN descriptors naming it need
    uint64_t seq;
    ObjectId id;
    size_t step;
  };
  std::vector<At> order;
  for (const auto& [guest, id] : vol_.of(ObjectKind::Cudnn)) {
    const CudnnObject& o = vol_.get(id)->as<CudnnObject>();
    for (size_t i = 0; i < o.steps.size(); ++i) order.push_back({o.legacy != kDropoutTag, o.steps[i].seq, id, i});
  }
  const auto handles = vol_.of(ObjectKind::Cudnn);
  if (handles.empty()) return true;
  int32_t status = kCudnnSuccess;
  const CudnnApi* lib = cudnn_library(&status);
  if (!lib) return *why = "cuDNN objects cannot be restored: no usable libcudnn.so.9 on this host", false;
  // In the client's order, dropout descriptors first: an RNN descriptor's setting may come
  // before its dropout descriptor's latest (one setting is kept per call).
  std::ranges::stable_sort(order,
                           [](const At& x, const At& y) { return std::tie(x.later, x.seq) < std::tie(y.later, y.seq); });
  auto fail = [&](const std::string& w) {
    make_current(current_);
    *why = "restoring cuDNN descriptors failed: " + w;
    return false;
  };
  for (const At& at : order) {
    Object& obj = *vol_.get(at.id);
    CudnnObject& d = obj.as<CudnnObject>();
    const CudnnStep& step = d.steps[at.step];
    bool want_handles = false;
    const std::vector<uint64_t> refs = step_references(step, &want_handles);
    std::vector<uint64_t> words((step.elements.size() + 7) / 8 + 1);  // never empty: the library refuses NULL
    std::memcpy(words.data(), step.elements.data(), step.elements.size());
    for (size_t i = 0; i < refs.size(); ++i) {
      CudnnObject* r = cudnn_object(vol_, refs[i], want_handles, nullptr, -1, true);
      if (!r) return fail("a step names a cuDNN object that is not in the state");
      words[i] = reinterpret_cast<uint64_t>(r->ptr);
    }
    make_current(obj.device);
    int st = kCudnnNotSupported;
    switch (step.op) {
      case CudnnStep::kSet:
        if (step.type == api::kCudnnTypeVoidPtr)  // checked at each execution, as when set
          d.pointers[step.name].assign(words.begin(), words.begin() + step.count);
        st = lib->cudnnBackendSetAttribute(d.ptr, step.name, step.type, step.count, words.data());
        break;
      case CudnnStep::kFinalize:
        if (lib->cudnnBackendFinalize) st = lib->cudnnBackendFinalize(d.ptr);
        break;
      case CudnnStep::kInitialize:
        if (lib->cudnnBackendInitialize) st = lib->cudnnBackendInitialize(d.ptr);
        break;
      case CudnnStep::kFill: {
        int64_t got = 0;
        if (lib->cudnnBackendGetAttribute)
          st = lib->cudnnBackendGetAttribute(d.ptr, step.name, step.type, step.count, &got, words.data());
        break;
      }
      case CudnnStep::kLegacy:
        st = cudnn_replay_legacy(obj.handle, step);
        break;
    }
    if (st != kCudnnSuccess)
      return fail("step " + std::to_string(at.seq) + " (" +
                  (step.op == CudnnStep::kLegacy ? "call " + std::to_string(step.name) + " on a legacy descriptor"
                                                 : "attribute " + std::to_string(step.name)) +
                  ") answered cudnnStatus_t " + std::to_string(st));
    cudnn_seq_ = std::max(cudnn_seq_, step.seq + 1);
  }
  // Retired descriptors served their purpose: destroyed, as the program destroyed them.
  for (const auto& [guest, id] : handles)
    if (CudnnObject& d = vol_.get(id)->as<CudnnObject>(); d.retired) {
      make_current(vol_.get(id)->device);
      cudnn_release(d);
    }
  // Each handle's stream, now that every stream is back.
  for (const auto& [guest, id] : handles) {
    Object& obj = *vol_.get(id);
    CudnnObject& h = obj.as<CudnnObject>();
    if (!h.handle || !h.stream) continue;
    const Object* s = vol_.find(ObjectKind::Stream, h.stream);
    if (!s || s->device != obj.device) return fail("a cuDNN handle's stream is not in the state");
    make_current(obj.device);
    const int st = lib->cudnnSetStream ? lib->cudnnSetStream(h.ptr, s->as<StreamObject>().stream) : kCudnnNotSupported;
    if (st != kCudnnSuccess) return fail("setting a handle's stream answered cudnnStatus_t " + std::to_string(st));
  }
  make_current(current_);
  return true;
}

#endif  // VMCUDA_WITH_CUDNN

}  // namespace vmcuda::host
