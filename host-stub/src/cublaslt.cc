// cuBLASLt calls (calls.def 0x2100-0x21ff; api/libs/cublasLt.calls), all hand-written here:
// the host's libcublasLt.so.13 (loaded after libcublas.so.13, so that it is the copy NVIDIA's
// cuBLAS itself uses), handles and descriptors as VOL entries under the context that was current
// at their creation (destroyed with the client), their attributes (values as bytes; the device
// pointers among them checked to be the client's memory), the heuristic query and the matmul.
// A guest cuBLAS handle is a cuBLASLt handle too: NVIDIA's cublasHandle_t is one (PyTorch
// casts it), so the host passes the real cuBLAS handle. The algorithm calls (ids, init, check,
// capabilities, config) pass the algorithm's 64 bytes as they came. A suspend carries the
// objects: each one's creation arguments and the attributes set on it are kept
// (CublasLtObject) and saved, and a resume makes the object again and sets them again
// (cublaslt_recreate, restore_cublaslt_attributes).
#include "session.h"
#include "vmrpc/log.h"

#ifdef VMCUDA_WITH_CUBLAS
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include "aligned_scalars.h"
#include "cublas.h"
#include "cublasLt_host_api.h"
#include "vmcuda/api/cublaslt_abi.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CUBLAS
CUresult Session::cublaslt_release(CublasLtObject&) { return CUDA_SUCCESS; }
bool Session::cublaslt_recreate(CublasLtObject&, uint64_t, std::string* why) {
  *why = "the state has cuBLASLt objects, and this vmcuda-stub was built without cuBLAS";
  return false;
}
bool Session::restore_cublaslt_attributes(std::string*) { return true; }
#else

// The entry points of libcublasLt.so.13 the calls use (generated list; ABI types).
struct CublasLtApi {
#define VMCUDA_CUBLASLT_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUBLASLT_FUNCTIONS(VMCUDA_CUBLASLT_DECLARE)
#undef VMCUDA_CUBLASLT_DECLARE
};

namespace {

using What = CublasLtObject::What;

const CublasLtApi* load(const DriverApi& driver) {
  static std::mutex mu;
  static std::map<const DriverApi*, std::unique_ptr<CublasLtApi>> loaded;
  std::lock_guard l(mu);
  auto [it, fresh] = loaded.try_emplace(&driver);
  if (fresh) {
    std::string w;
    void* lib = driver.open_library ? driver.open_library("libcublasLt.so.13", &w) : nullptr;
    if (lib && driver.library_symbol(lib, "__vmcuda_cublasLt_table")) {
      lib = nullptr;
      w = "the libcublasLt.so.13 found is vmcuda's guest library: remove vmcuda's library folder from "
          "vmcuda-stub's LD_LIBRARY_PATH";
    }
    if (lib) {
      auto api = std::make_unique<CublasLtApi>();
#define VMCUDA_CUBLASLT_LOAD(name, type) \
  api->name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
      VMCUDA_CUBLASLT_FUNCTIONS(VMCUDA_CUBLASLT_LOAD)
#undef VMCUDA_CUBLASLT_LOAD
      if (api->cublasLtCreate && api->cublasLtDestroy && api->cublasLtMatmul) it->second = std::move(api);
      else w = "it lacks cublasLtCreate or cublasLtMatmul";
    }
    if (it->second) {
      VMRPC_LOG(kInfo, "stub", "loaded libcublasLt.so.13 for the guests' cuBLASLt calls");
    } else {
      VMRPC_LOG(kWarn, "stub", "cannot load libcublasLt.so.13 (" + w + "): guests' cuBLASLt calls answer "
                               "CUBLAS_STATUS_NOT_INITIALIZED; install CUDA 13's cuBLAS on this host "
                               "(package libcublas-13-0) where vmcuda-stub finds it");
    }
  }
  return it->second.get();
}

std::atomic<uint32_t> g_complaints{0};
std::mutex g_attr_mu;
std::set<std::pair<int, int32_t>> g_unsupported_attrs;  // (what, attribute) logged once each

int32_t bad(const std::string& tag, const char* call, const char* what) {
  if (g_complaints.fetch_add(1, std::memory_order_relaxed) < 8)
    VMRPC_LOG(kWarn, "stub", tag + ": " + call + ": " + what + "; the call answers CUBLAS_STATUS_INVALID_VALUE");
  return CUBLAS_STATUS_INVALID_VALUE;
}

// Whether vmcuda forwards attribute `attr` of a `what` (api/cublaslt_abi.h): plain values and
// the device pointers it checks; a later attribute could be a host object of the guest's.
bool forwarded(What what, int32_t attr) {
  const bool known = what == What::kMatmulDesc ? api::lt_desc_attribute_forwarded(attr)
                     : what == What::kLayout   ? api::lt_layout_attribute_forwarded(attr)
                                               : api::lt_preference_attribute_forwarded(attr);
  if (known) return true;
  std::lock_guard l(g_attr_mu);
  if (g_unsupported_attrs.insert({what, attr}).second)
    VMRPC_LOG(kWarn, "stub", "cuBLASLt attribute " + std::to_string(attr) + " of a " +
                                 (what == What::kMatmulDesc ? "matmul descriptor" : what == What::kLayout ? "matrix layout"
                                                                                                         : "preference") +
                                 " is not supported by vmcuda; the call answers CUBLAS_STATUS_NOT_SUPPORTED");
  return false;
}

// An attribute value's bytes, aligned for the library.
struct AttrBuf {
  uint64_t words[api::kLtMaxAttributeBytes / 8]{};
  void* data() { return words; }
};

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

const char* what_name(What what) {
  switch (what) {
    case What::kHandle: return "cuBLASLt handle";
    case What::kMatmulDesc: return "matmul descriptor";
    case What::kLayout: return "matrix layout";
    case What::kPreference: return "matmul preference";
  }
  return "cuBLASLt object";
}

// An attribute the library took: kept for a resume (the last value, moved to the end), and for
// a matmul descriptor what alpha, beta and the pointer checks follow from.
void note_attribute(CublasLtObject& o, int32_t attr, std::span<const std::byte> value) {
  std::erase_if(o.attributes, [&](const auto& a) { return a.first == attr; });
  o.attributes.emplace_back(attr, std::vector<std::byte>(value.begin(), value.end()));
  if (o.what != What::kMatmulDesc) return;
  if (api::lt_desc_attribute_is_pointer(attr) && value.size() == sizeof(uint64_t)) {
    uint64_t p;
    std::memcpy(&p, value.data(), sizeof p);
    o.pointers[attr] = p;
  }
  int32_t v;
  if (value.size() == sizeof v) {
    std::memcpy(&v, value.data(), sizeof v);
    if (attr == api::kLtDescScaleType) o.scale_type = v;
    if (attr == api::kLtDescPointerMode) o.pointer_mode = v;
  }
}

}  // namespace

const CublasLtApi* Session::cublaslt_library(int32_t* status) {
  if (!cublaslt_) {
    // NVIDIA's libcublas.so.13 first: its libcublasLt.so.13 is then the one loaded here, so a
    // cuBLAS handle given as a cuBLASLt handle belongs to the same library.
    int32_t ignored = CUBLAS_STATUS_SUCCESS;
    cublas_library(&ignored);
    cublaslt_ = load(api_);
  }
  if (!cublaslt_) *status = CUBLAS_STATUS_NOT_INITIALIZED;
  return cublaslt_;
}

CUresult Session::cublaslt_release(CublasLtObject& o) {
  if (o.ptr && cublaslt_) {
    switch (o.what) {
      case What::kHandle: cublaslt_->cublasLtDestroy(o.ptr); break;
      case What::kMatmulDesc: cublaslt_->cublasLtMatmulDescDestroy(o.ptr); break;
      case What::kLayout: cublaslt_->cublasLtMatrixLayoutDestroy(o.ptr); break;
      case What::kPreference: cublaslt_->cublasLtMatmulPreferenceDestroy(o.ptr); break;
    }
  }
  o.ptr = nullptr;
  return CUDA_SUCCESS;  // a cuBLAS status is no CUresult: teardown goes on either way
}

void* Session::cublaslt_handle(uint64_t guest, int* device) {
  if (Object* o = vol_.find(ObjectKind::CublasLt, guest); o && o->as<CublasLtObject>().what == What::kHandle) {
    *device = o->device;
    return o->as<CublasLtObject>().ptr;
  }
  if (Object* o = vol_.find(ObjectKind::CublasHandle, guest)) {
    *device = o->device;
    return o->as<CublasHandleObject>().handle;
  }
  return nullptr;
}

namespace {

// The guest's object of kind `what`, or nullptr.
CublasLtObject* lt_object(ObjectList& vol, uint64_t guest, What what) {
  Object* o = vol.find(ObjectKind::CublasLt, guest);
  return o && o->as<CublasLtObject>().what == what ? &o->as<CublasLtObject>() : nullptr;
}

}  // namespace

// ---- creation and destruction: the guest made the handle; the library makes the object.

#define VMCUDA_LT_LIBRARY()                                \
  int32_t status_ = CUBLAS_STATUS_SUCCESS;                 \
  const CublasLtApi* lib = cublaslt_library(&status_);     \
  if (!lib) return status_;

int32_t Session::on_cublasLtCreate(const api::cublasLtCreate_Args& a, api::Empty&, Request&) {
  if (a.lightHandle < api::kFirstGuestHandle || vol_.find(ObjectKind::CublasLt, a.lightHandle))
    return guest_fault("cublasLtCreate: a handle that is not new");
  if (!charge_library_host(HostLibrary::kBlas)) return CUBLAS_STATUS_ALLOC_FAILED;
  VMCUDA_LT_LIBRARY();
  void* h = nullptr;
  if (int st = lib->cublasLtCreate(&h); st != CUBLAS_STATUS_SUCCESS) return st;
  CublasLtObject o;
  o.ptr = h;
  o.what = What::kHandle;
  vol_.add(ObjectKind::CublasLt, current_, a.lightHandle, vol_.context(current_)->id, std::move(o));
  return CUBLAS_STATUS_SUCCESS;
}

#define VMCUDA_LT_CREATE(call, field, what_, ...)                                                  \
  if (a.field < api::kFirstGuestHandle || vol_.find(ObjectKind::CublasLt, a.field))                \
    return guest_fault(#call ": a handle that is not new");                                        \
  VMCUDA_LT_LIBRARY();                                                                             \
  void* made = nullptr;                                                                            \
  if (int st = lib->call(&made __VA_OPT__(, ) __VA_ARGS__); st != CUBLAS_STATUS_SUCCESS) return st; \
  CublasLtObject o;                                                                                \
  o.ptr = made;                                                                                    \
  o.what = what_;

int32_t Session::on_cublasLtMatmulDescCreate(const api::cublasLtMatmulDescCreate_Args& a, api::Empty&, Request&) {
  VMCUDA_LT_CREATE(cublasLtMatmulDescCreate, matmulDesc, What::kMatmulDesc, a.computeType, a.scaleType);
  o.compute_type = a.computeType;
  o.data_type = a.scaleType;
  o.scale_type = a.scaleType;
  vol_.add(ObjectKind::CublasLt, current_, a.matmulDesc, vol_.context(current_)->id, std::move(o));
  return CUBLAS_STATUS_SUCCESS;
}

int32_t Session::on_cublasLtMatrixLayoutCreate(const api::cublasLtMatrixLayoutCreate_Args& a, api::Empty&, Request&) {
  VMCUDA_LT_CREATE(cublasLtMatrixLayoutCreate, matLayout, What::kLayout, a.type, a.rows, a.cols, a.ld);
  o.data_type = a.type;
  o.rows = a.rows;
  o.cols = a.cols;
  o.ld = a.ld;
  vol_.add(ObjectKind::CublasLt, current_, a.matLayout, vol_.context(current_)->id, std::move(o));
  return CUBLAS_STATUS_SUCCESS;
}

int32_t Session::on_cublasLtMatmulPreferenceCreate(const api::cublasLtMatmulPreferenceCreate_Args& a, api::Empty&,
                                                   Request&) {
  VMCUDA_LT_CREATE(cublasLtMatmulPreferenceCreate, pref, What::kPreference);
  vol_.add(ObjectKind::CublasLt, current_, a.pref, vol_.context(current_)->id, std::move(o));
  return CUBLAS_STATUS_SUCCESS;
}
#undef VMCUDA_LT_CREATE

#define VMCUDA_LT_DESTROY(field, what_)                                                     \
  Object* obj = vol_.find(ObjectKind::CublasLt, a.field);                                  \
  if (!obj || obj->as<CublasLtObject>().what != what_)                                     \
    return what_ == What::kHandle ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_INVALID_VALUE; \
  make_current(obj->device);                                                               \
  cublaslt_release(obj->as<CublasLtObject>());                                             \
  make_current(current_);                                                                  \
  vol_.remove(obj->id);                                                                    \
  return CUBLAS_STATUS_SUCCESS;

int32_t Session::on_cublasLtDestroy(const api::cublasLtDestroy_Args& a, api::Empty&, Request&) {
  VMCUDA_LT_DESTROY(lightHandle, What::kHandle)
}
int32_t Session::on_cublasLtMatmulDescDestroy(const api::cublasLtMatmulDescDestroy_Args& a, api::Empty&, Request&) {
  VMCUDA_LT_DESTROY(matmulDesc, What::kMatmulDesc)
}
int32_t Session::on_cublasLtMatrixLayoutDestroy(const api::cublasLtMatrixLayoutDestroy_Args& a, api::Empty&, Request&) {
  VMCUDA_LT_DESTROY(matLayout, What::kLayout)
}
int32_t Session::on_cublasLtMatmulPreferenceDestroy(const api::cublasLtMatmulPreferenceDestroy_Args& a, api::Empty&,
                                                    Request&) {
  VMCUDA_LT_DESTROY(pref, What::kPreference)
}
#undef VMCUDA_LT_DESTROY

// ---- a resume (suspend.cc)

bool Session::cublaslt_recreate(CublasLtObject& o, uint64_t guest, std::string* why) {
  int32_t status = CUBLAS_STATUS_SUCCESS;
  const CublasLtApi* lib = cublaslt_library(&status);
  if (!lib) {
    *why = std::string("the state has a ") + what_name(o.what) + " (" + hex(guest) +
           "), and this host has no usable libcublasLt.so.13 (install CUDA 13's cuBLAS, package libcublas-13-0)";
    return false;
  }
  // Attributes (and so what follows from them) come back with restore_cublaslt_attributes.
  o.scale_type = o.data_type;
  o.pointer_mode = 0;
  o.pointers.clear();
  void* made = nullptr;
  int st = CUBLAS_STATUS_SUCCESS;
  switch (o.what) {
    case What::kHandle: st = lib->cublasLtCreate(&made); break;
    case What::kMatmulDesc: st = lib->cublasLtMatmulDescCreate(&made, o.compute_type, o.data_type); break;
    case What::kLayout: st = lib->cublasLtMatrixLayoutCreate(&made, o.data_type, o.rows, o.cols, o.ld); break;
    case What::kPreference: st = lib->cublasLtMatmulPreferenceCreate(&made); break;
  }
  if (st != CUBLAS_STATUS_SUCCESS) {
    *why = std::string("making ") + what_name(o.what) + " " + hex(guest) +
           " again failed (cuBLASLt status " + std::to_string(st) + ")";
    return false;
  }
  o.ptr = made;
  return true;
}

bool Session::restore_cublaslt_attributes(std::string* why) {
  for (const auto& [guest, id] : vol_.of(ObjectKind::CublasLt)) {
    Object& obj = *vol_.get(id);
    CublasLtObject& o = obj.as<CublasLtObject>();
    const auto saved = std::move(o.attributes);
    o.attributes.clear();
    make_current(obj.device);
    for (const auto& [attr, value] : saved) {
      const std::string which = std::string(what_name(o.what)) + " " + hex(guest) + "'s attribute " +
                                std::to_string(attr);
      // As the guest's set is checked (on_cublasLt*SetAttribute): an attribute vmcuda forwards,
      // a device pointer the client's memory.
      const bool known = o.what == What::kMatmulDesc ? api::lt_desc_attribute_forwarded(attr)
                         : o.what == What::kLayout   ? api::lt_layout_attribute_forwarded(attr)
                         : o.what == What::kPreference ? api::lt_preference_attribute_forwarded(attr)
                                                       : false;
      if (!known || value.empty() || value.size() > api::kLtMaxAttributeBytes) {
        *why = which + " is not one vmcuda sets";
        return false;
      }
      if (o.what == What::kMatmulDesc && api::lt_desc_attribute_is_pointer(attr)) {
        uint64_t p = 0;
        if (value.size() == sizeof p) std::memcpy(&p, value.data(), sizeof p);
        // Within the client's own arena also when freed since it was set (a dangling pointer, as
        // a native program may keep in a descriptor it does not use again): it can reach only
        // this client's memory, and refusing it would leave a suspended client no resume.
        if (value.size() != sizeof p || (p && !owns_range(p, 1) && !(arena_ && arena_->contains(p)))) {
          *why = which + " is not a pointer into the client's device memory";
          return false;
        }
      }
      AttrBuf buf;
      std::memcpy(buf.data(), value.data(), value.size());
      int st = CUBLAS_STATUS_NOT_SUPPORTED;
      switch (o.what) {
        case What::kMatmulDesc: st = cublaslt_->cublasLtMatmulDescSetAttribute(o.ptr, attr, buf.data(), value.size()); break;
        case What::kLayout: st = cublaslt_->cublasLtMatrixLayoutSetAttribute(o.ptr, attr, buf.data(), value.size()); break;
        case What::kPreference:
          st = cublaslt_->cublasLtMatmulPreferenceSetAttribute(o.ptr, attr, buf.data(), value.size());
          break;
        case What::kHandle: break;  // never (not known above)
      }
      if (st != CUBLAS_STATUS_SUCCESS) {
        *why = "setting " + which + " again failed (cuBLASLt status " + std::to_string(st) + ")";
        return false;
      }
      note_attribute(o, attr, value);
    }
  }
  make_current(current_);
  return true;
}

// ---- attributes: the value's bytes follow the Args (set) or come back in the reply (get).

#define VMCUDA_LT_SET(call, field, what_)                                                               \
  CublasLtObject* o = lt_object(vol_, a.field, what_);                                                  \
  if (!o) return CUBLAS_STATUS_INVALID_VALUE;                                                           \
  if (req.tail.size() != a.sizeInBytes || a.sizeInBytes == 0 || a.sizeInBytes > api::kLtMaxAttributeBytes) \
    return guest_fault(#call ": the value's bytes do not match its size");                             \
  if (!forwarded(what_, a.attr)) return CUBLAS_STATUS_NOT_SUPPORTED;                                    \
  VMCUDA_LT_LIBRARY();                                                                                  \
  AttrBuf buf;                                                                                          \
  std::memcpy(buf.data(), req.tail.data(), a.sizeInBytes);

int32_t Session::on_cublasLtMatmulDescSetAttribute(const api::cublasLtMatmulDescSetAttribute_Args& a, api::Empty&,
                                                   Request& req) {
  VMCUDA_LT_SET(cublasLtMatmulDescSetAttribute, matmulDesc, What::kMatmulDesc);
  const bool pointer = api::lt_desc_attribute_is_pointer(a.attr);
  if (pointer) {
    if (a.sizeInBytes != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;  // as the library answers it
    if (buf.words[0] && !owns_range(buf.words[0], 1))
      return bad(log_tag_, "cublasLtMatmulDescSetAttribute", "a pointer attribute is not the client's device memory");
  }
  const int st = lib->cublasLtMatmulDescSetAttribute(o->ptr, a.attr, buf.data(), a.sizeInBytes);
  if (st == CUBLAS_STATUS_SUCCESS) note_attribute(*o, a.attr, req.tail);
  return st;
}

int32_t Session::on_cublasLtMatrixLayoutSetAttribute(const api::cublasLtMatrixLayoutSetAttribute_Args& a, api::Empty&,
                                                     Request& req) {
  VMCUDA_LT_SET(cublasLtMatrixLayoutSetAttribute, matLayout, What::kLayout);
  const int st = lib->cublasLtMatrixLayoutSetAttribute(o->ptr, a.attr, buf.data(), a.sizeInBytes);
  if (st == CUBLAS_STATUS_SUCCESS) note_attribute(*o, a.attr, req.tail);
  return st;
}

int32_t Session::on_cublasLtMatmulPreferenceSetAttribute(const api::cublasLtMatmulPreferenceSetAttribute_Args& a,
                                                         api::Empty&, Request& req) {
  VMCUDA_LT_SET(cublasLtMatmulPreferenceSetAttribute, pref, What::kPreference);
  const int st = lib->cublasLtMatmulPreferenceSetAttribute(o->ptr, a.attr, buf.data(), a.sizeInBytes);
  if (st == CUBLAS_STATUS_SUCCESS) note_attribute(*o, a.attr, req.tail);
  return st;
}
#undef VMCUDA_LT_SET

#define VMCUDA_LT_GET(call, field, what_)                                                     \
  CublasLtObject* o = lt_object(vol_, a.field, what_);                                        \
  if (!o) return CUBLAS_STATUS_INVALID_VALUE;                                                 \
  if (a.sizeInBytes > api::kLtMaxAttributeBytes || a.sizeInBytes > req.extra.size())          \
    return CUBLAS_STATUS_INVALID_VALUE;                                                       \
  if (!forwarded(what_, a.attr)) return CUBLAS_STATUS_NOT_SUPPORTED;                          \
  VMCUDA_LT_LIBRARY();                                                                        \
  AttrBuf buf;                                                                                \
  size_t written = 0;                                                                         \
  const int st = lib->call(o->ptr, a.attr, a.sizeInBytes ? buf.data() : nullptr, a.sizeInBytes, &written); \
  if (st != CUBLAS_STATUS_SUCCESS) return st;                                                 \
  const size_t n = std::min<size_t>(written, a.sizeInBytes);                                  \
  std::memcpy(req.extra.data(), buf.data(), n);                                               \
  req.extra_bytes = static_cast<uint32_t>(n);                                                 \
  std::memcpy(r.sizeWritten, &written, sizeof written);                                       \
  return st;

int32_t Session::on_cublasLtMatmulDescGetAttribute(const api::cublasLtMatmulDescGetAttribute_Args& a,
                                                   api::cublasLtMatmulDescGetAttribute_Reply& r, Request& req) {
  VMCUDA_LT_GET(cublasLtMatmulDescGetAttribute, matmulDesc, What::kMatmulDesc)
}
int32_t Session::on_cublasLtMatrixLayoutGetAttribute(const api::cublasLtMatrixLayoutGetAttribute_Args& a,
                                                     api::cublasLtMatrixLayoutGetAttribute_Reply& r, Request& req) {
  VMCUDA_LT_GET(cublasLtMatrixLayoutGetAttribute, matLayout, What::kLayout)
}
int32_t Session::on_cublasLtMatmulPreferenceGetAttribute(const api::cublasLtMatmulPreferenceGetAttribute_Args& a,
                                                         api::cublasLtMatmulPreferenceGetAttribute_Reply& r,
                                                         Request& req) {
  VMCUDA_LT_GET(cublasLtMatmulPreferenceGetAttribute, pref, What::kPreference)
}
#undef VMCUDA_LT_GET

// ---- heuristics and the matmul, in the handle's device's context

int32_t Session::on_cublasLtMatmulAlgoGetHeuristic(const api::cublasLtMatmulAlgoGetHeuristic_Args& a,
                                                   api::cublasLtMatmulAlgoGetHeuristic_Reply& r, Request& req) {
  int device = -1;
  void* handle = cublaslt_handle(a.lightHandle, &device);
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  CublasLtObject* op = lt_object(vol_, a.operationDesc, What::kMatmulDesc);
  CublasLtObject* pref = lt_object(vol_, a.preference, What::kPreference);
  CublasLtObject* layouts[4] = {lt_object(vol_, a.Adesc, What::kLayout), lt_object(vol_, a.Bdesc, What::kLayout),
                                lt_object(vol_, a.Cdesc, What::kLayout), lt_object(vol_, a.Ddesc, What::kLayout)};
  if (!op || !pref || !layouts[0] || !layouts[1] || !layouts[2] || !layouts[3]) return CUBLAS_STATUS_INVALID_VALUE;
  const int n = a.requestedAlgoCount;
  if (n <= 0 || n > api::kLtMaxHeuristicResults || req.extra.size() < size_t(n) * api::kLtHeuristicResultBytes)
    return CUBLAS_STATUS_INVALID_VALUE;
  VMCUDA_LT_LIBRARY();
  std::vector<uint64_t> results(size_t(n) * api::kLtHeuristicResultBytes / 8);
  int returned = 0;
  make_current(device);
  const int st = lib->cublasLtMatmulAlgoGetHeuristic(handle, op->ptr, layouts[0]->ptr, layouts[1]->ptr,
                                                     layouts[2]->ptr, layouts[3]->ptr, pref->ptr, n, results.data(),
                                                     &returned);
  make_current(current_);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  returned = std::clamp(returned, 0, n);
  std::memcpy(req.extra.data(), results.data(), size_t(returned) * api::kLtHeuristicResultBytes);
  req.extra_bytes = static_cast<uint32_t>(size_t(returned) * api::kLtHeuristicResultBytes);
  std::memcpy(r.returnAlgoCount, &returned, sizeof returned);
  return st;
}

int32_t Session::on_cublasLtMatmul(const api::cublasLtMatmul_Args& a, api::Empty&, Request& req) {
  static constexpr const char* kCall = "cublasLtMatmul";
  int device = -1;
  void* handle = cublaslt_handle(a.lightHandle, &device);
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  CublasLtObject* op = lt_object(vol_, a.computeDesc, What::kMatmulDesc);
  CublasLtObject* layouts[4] = {lt_object(vol_, a.Adesc, What::kLayout), lt_object(vol_, a.Bdesc, What::kLayout),
                                lt_object(vol_, a.Cdesc, What::kLayout), lt_object(vol_, a.Ddesc, What::kLayout)};
  if (!op || !layouts[0] || !layouts[1] || !layouts[2] || !layouts[3]) return CUBLAS_STATUS_INVALID_VALUE;
  VMCUDA_LT_LIBRARY();
  // alpha and beta as this side's record of the descriptor says (never as the guest claims).
  const size_t bytes = api::lt_scalar_bytes(op->scale_type);
  if (bytes == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  AlignedScalars host_scalars;
  auto scalar = [&](const uint8_t (&field)[16], bool on_device) -> const void* {
    if (!on_device) return host_scalars.keep(field, sizeof field);
    uint64_t p;
    std::memcpy(&p, field, sizeof p);
    return p && owns_range(p, bytes) ? reinterpret_cast<const void*>(p) : nullptr;
  };
  const void* alpha = scalar(a.alpha, api::lt_alpha_on_device(op->pointer_mode));
  const void* beta = scalar(a.beta, api::lt_beta_on_device(op->pointer_mode));
  if (!alpha || !beta) return bad(log_tag_, kCall, "alpha or beta is not the client's device memory");
  for (uint64_t p : {a.A, a.B, a.C, a.D})
    if (p && !owns_range(p, 1)) return bad(log_tag_, kCall, "a matrix is not the client's device memory");
  for (const auto& [attr, p] : op->pointers)
    if (p && !owns_range(p, 1)) return bad(log_tag_, kCall, "a pointer attribute is no longer the client's memory");
  if (a.workspaceSizeInBytes && (!a.workspace || !owns_range(a.workspace, a.workspaceSizeInBytes)))
    return bad(log_tag_, kCall, "the workspace is not the client's device memory");
  CUstream stream = nullptr;
  int stream_device = -1;
  if (resolve_stream(a.stream, &stream, &stream_device) != CUDA_SUCCESS) return CUBLAS_STATUS_INVALID_VALUE;
  if (a.stream >= api::kFirstGuestHandle && stream_device != device) return CUBLAS_STATUS_INVALID_VALUE;
  uint64_t algo[api::kLtAlgoBytes / 8];
  std::memcpy(algo, a.algo, sizeof algo);
  make_current(device);
  count_launch(device, stream, req.ctx);  // kLaunches: fair sharing, the kernel time limit
  const int st = lib->cublasLtMatmul(handle, op->ptr, const_cast<void*>(alpha), reinterpret_cast<void*>(a.A),
                                     layouts[0]->ptr, reinterpret_cast<void*>(a.B), layouts[1]->ptr,
                                     const_cast<void*>(beta), reinterpret_cast<void*>(a.C), layouts[2]->ptr,
                                     reinterpret_cast<void*>(a.D), layouts[3]->ptr, a.has_algo ? algo : nullptr,
                                     reinterpret_cast<void*>(a.workspace), a.workspaceSizeInBytes, stream);
  make_current(current_);
  return st;
}
// ---- algorithms (0x2110-): ids, init and check with the handle's device current; the
// capability and config calls work on the algorithm's 64 bytes alone (no handle: the library
// reads and writes only those bytes), so no context is made current for them.

namespace {
// An algorithm's bytes, aligned for the library (the wire's are bytes at any offset).
struct AlgoBuf {
  uint64_t words[api::kLtAlgoBytes / 8]{};
  explicit AlgoBuf(const uint8_t (&bytes)[api::kLtAlgoBytes]) { std::memcpy(words, bytes, sizeof words); }
};
}  // namespace

int32_t Session::on_cublasLtMatmulAlgoGetIds(const api::cublasLtMatmulAlgoGetIds_Args& a,
                                             api::cublasLtMatmulAlgoGetIds_Reply& r, Request& req) {
  int device = -1;
  void* handle = cublaslt_handle(a.lightHandle, &device);
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int n = a.requestedAlgoCount;
  if (n <= 0 || n > api::kLtMaxAlgoIds || req.extra.size() < size_t(n) * sizeof(int32_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  VMCUDA_LT_LIBRARY();
  if (!lib->cublasLtMatmulAlgoGetIds) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<int32_t> ids(size_t(n), 0);
  int returned = 0;
  make_current(device);
  const int st = lib->cublasLtMatmulAlgoGetIds(handle, a.computeType, a.scaleType, a.Atype, a.Btype, a.Ctype,
                                               a.Dtype, n, ids.data(), &returned);
  make_current(current_);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  returned = std::clamp(returned, 0, n);
  std::memcpy(req.extra.data(), ids.data(), size_t(returned) * sizeof(int32_t));
  req.extra_bytes = static_cast<uint32_t>(size_t(returned) * sizeof(int32_t));
  std::memcpy(r.returnAlgoCount, &returned, sizeof returned);
  return st;
}

int32_t Session::on_cublasLtMatmulAlgoInit(const api::cublasLtMatmulAlgoInit_Args& a,
                                           api::cublasLtMatmulAlgoInit_Reply& r, Request&) {
  int device = -1;
  void* handle = cublaslt_handle(a.lightHandle, &device);
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  VMCUDA_LT_LIBRARY();
  if (!lib->cublasLtMatmulAlgoInit) return CUBLAS_STATUS_NOT_SUPPORTED;
  uint64_t algo[api::kLtAlgoBytes / 8]{};
  make_current(device);
  const int st = lib->cublasLtMatmulAlgoInit(handle, a.computeType, a.scaleType, a.Atype, a.Btype, a.Ctype, a.Dtype,
                                             a.algoId, algo);
  make_current(current_);
  if (st == CUBLAS_STATUS_SUCCESS) std::memcpy(r.algo, algo, sizeof algo);
  return st;
}

int32_t Session::on_cublasLtMatmulAlgoCheck(const api::cublasLtMatmulAlgoCheck_Args& a,
                                            api::cublasLtMatmulAlgoCheck_Reply& r, Request&) {
  int device = -1;
  void* handle = cublaslt_handle(a.lightHandle, &device);
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  CublasLtObject* op = lt_object(vol_, a.operationDesc, What::kMatmulDesc);
  CublasLtObject* layouts[4] = {lt_object(vol_, a.Adesc, What::kLayout), lt_object(vol_, a.Bdesc, What::kLayout),
                                lt_object(vol_, a.Cdesc, What::kLayout), lt_object(vol_, a.Ddesc, What::kLayout)};
  if (!op || !layouts[0] || !layouts[1] || !layouts[2] || !layouts[3] || !a.has_algo)
    return CUBLAS_STATUS_INVALID_VALUE;
  VMCUDA_LT_LIBRARY();
  if (!lib->cublasLtMatmulAlgoCheck) return CUBLAS_STATUS_NOT_SUPPORTED;
  AlgoBuf algo(a.algo);
  uint64_t result[api::kLtHeuristicResultBytes / 8]{};
  make_current(device);
  const int st = lib->cublasLtMatmulAlgoCheck(handle, op->ptr, layouts[0]->ptr, layouts[1]->ptr, layouts[2]->ptr,
                                              layouts[3]->ptr, algo.words, result);
  make_current(current_);
  if (st == CUBLAS_STATUS_SUCCESS) std::memcpy(r.result, result, sizeof result);
  return st;
}

int32_t Session::on_cublasLtMatmulAlgoCapGetAttribute(const api::cublasLtMatmulAlgoCapGetAttribute_Args& a,
                                                      api::cublasLtMatmulAlgoCapGetAttribute_Reply& r,
                                                      Request& req) {
  if (!a.has_algo || a.sizeInBytes > api::kLtMaxCapabilityBytes || a.sizeInBytes > req.extra.size())
    return CUBLAS_STATUS_INVALID_VALUE;
  VMCUDA_LT_LIBRARY();
  if (!lib->cublasLtMatmulAlgoCapGetAttribute) return CUBLAS_STATUS_NOT_SUPPORTED;
  AlgoBuf algo(a.algo);
  std::vector<uint64_t> buf(api::kLtMaxCapabilityBytes / 8, 0);
  size_t written = 0;
  const int st =
      lib->cublasLtMatmulAlgoCapGetAttribute(algo.words, a.attr, a.sizeInBytes ? buf.data() : nullptr, a.sizeInBytes,
                                             &written);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const size_t n = std::min<size_t>(written, a.sizeInBytes);
  std::memcpy(req.extra.data(), buf.data(), n);
  req.extra_bytes = static_cast<uint32_t>(n);
  std::memcpy(r.sizeWritten, &written, sizeof written);
  return st;
}

int32_t Session::on_cublasLtMatmulAlgoConfigSetAttribute(const api::cublasLtMatmulAlgoConfigSetAttribute_Args& a,
                                                         api::cublasLtMatmulAlgoConfigSetAttribute_Reply& r,
                                                         Request& req) {
  if (req.tail.size() != a.sizeInBytes || a.sizeInBytes == 0 || a.sizeInBytes > api::kLtMaxAttributeBytes)
    return guest_fault("cublasLtMatmulAlgoConfigSetAttribute: the value's bytes do not match its size");
  VMCUDA_LT_LIBRARY();
  if (!lib->cublasLtMatmulAlgoConfigSetAttribute) return CUBLAS_STATUS_NOT_SUPPORTED;
  AlgoBuf algo(a.algo);
  AttrBuf buf;
  std::memcpy(buf.data(), req.tail.data(), a.sizeInBytes);
  const int st = lib->cublasLtMatmulAlgoConfigSetAttribute(algo.words, a.attr, buf.data(), a.sizeInBytes);
  if (st == CUBLAS_STATUS_SUCCESS) std::memcpy(r.algo, algo.words, sizeof algo.words);
  return st;
}

int32_t Session::on_cublasLtMatmulAlgoConfigGetAttribute(const api::cublasLtMatmulAlgoConfigGetAttribute_Args& a,
                                                         api::cublasLtMatmulAlgoConfigGetAttribute_Reply& r,
                                                         Request& req) {
  if (!a.has_algo || a.sizeInBytes > api::kLtMaxAttributeBytes || a.sizeInBytes > req.extra.size())
    return CUBLAS_STATUS_INVALID_VALUE;
  VMCUDA_LT_LIBRARY();
  if (!lib->cublasLtMatmulAlgoConfigGetAttribute) return CUBLAS_STATUS_NOT_SUPPORTED;
  AlgoBuf algo(a.algo);
  AttrBuf buf;
  size_t written = 0;
  const int st = lib->cublasLtMatmulAlgoConfigGetAttribute(algo.words, a.attr, a.sizeInBytes ? buf.data() : nullptr,
                                                           a.sizeInBytes, &written);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const size_t n = std::min<size_t>(written, a.sizeInBytes);
  std::memcpy(req.extra.data(), buf.data(), n);
  req.extra_bytes = static_cast<uint32_t>(n);
  std::memcpy(r.sizeWritten, &written, sizeof written);
  return st;
}
#undef VMCUDA_LT_LIBRARY

#endif  // VMCUDA_WITH_CUBLAS

}  // namespace vmcuda::host
