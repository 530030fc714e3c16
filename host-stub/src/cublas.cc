// cuBLAS calls (calls.def 0x2000-0x20ff; api/libs/cublas.calls): the library, the handles and
// their settings, and the scope every handler runs in (cublas.h). The BLAS calls' handlers are
// generated (scripts/gen-cublas.py). A handle is a VOL entry under its device's context,
// destroyed with the client; its stream is a guest stream handle, its workspace the client's
// device memory. Without the generated sources (no cublas_api.h at build time) only the
// teardown hooks below are built.
#include "session.h"
#include "vmrpc/log.h"

#ifdef VMCUDA_WITH_CUBLAS
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "cublas.h"
#endif

namespace vmcuda::host {

#ifndef VMCUDA_WITH_CUBLAS
CUresult Session::cublas_release(CublasHandleObject&) { return CUDA_SUCCESS; }
bool Session::cublas_recreate(CublasHandleObject&, int, std::string* why) {
  *why = "the state has cuBLAS handles, and this vmcuda-stub was built without cuBLAS";
  return false;
}
bool Session::restore_cublas_settings(std::string*) { return true; }
uint64_t Session::cublas_workspace_cost(int) const { return 0; }
#else

namespace {

// The library of each DriverApi (the process has one; tests install fakes), loaded once.
struct Loaded {
  std::unique_ptr<CublasApi> api;
  std::string why;
};

const CublasApi* load(const DriverApi& driver, std::string* why) {
  static std::mutex mu;
  static std::map<const DriverApi*, Loaded> loaded;
  std::lock_guard l(mu);
  auto [it, fresh] = loaded.try_emplace(&driver);
  if (fresh) {
    std::string w;
    void* lib = driver.open_library ? driver.open_library("libcublas.so.13", &w) : nullptr;
    if (lib && driver.library_symbol(lib, "__vmcuda_cublas_table")) {
      lib = nullptr;  // vmcuda's own guest library, found through a path meant for applications
      w = "the libcublas.so.13 found is vmcuda's guest library: remove vmcuda's library folder from "
          "vmcuda-stub's LD_LIBRARY_PATH";
    }
    if (lib) {
      auto api = std::make_unique<CublasApi>();
#define VMCUDA_CUBLAS_LOAD(name, type) \
  api->name = reinterpret_cast<std::type_identity_t<type>>(driver.library_symbol(lib, #name));
      VMCUDA_CUBLAS_FUNCTIONS(VMCUDA_CUBLAS_LOAD)
#undef VMCUDA_CUBLAS_LOAD
      if (api->cublasCreate_v2 && api->cublasDestroy_v2) {
        it->second.api = std::move(api);
        VMRPC_LOG(kInfo, "stub", "loaded libcublas.so.13 for the guests' cuBLAS calls");
      } else {
        w = "it lacks cublasCreate_v2";
      }
    }
    if (!it->second.api) {
      it->second.why = w;
      VMRPC_LOG(kWarn, "stub", "cannot load libcublas.so.13 (" + w + "): guests' cuBLAS calls answer "
                               "CUBLAS_STATUS_NOT_INITIALIZED; install CUDA 13's cuBLAS on this host "
                               "(package libcublas-13-0) where vmcuda-stub finds it");
    }
  }
  if (why) *why = it->second.why;
  return it->second.api.get();
}

// Whose handler named a pointer that is not the client's: logged for the first few calls of the process.
std::atomic<uint32_t> g_bad_pointers{0};
std::mutex g_missing_mu;
std::set<std::string> g_missing;  // entry points the host's library lacks (logged once each)

}  // namespace

const CublasApi* Session::cublas_library(int32_t* status) {
  if (!cublas_) cublas_ = load(api_, nullptr);
  if (!cublas_) *status = CUBLAS_STATUS_NOT_INITIALIZED;
  return cublas_;
}

// What a handle costs on the device, allocated by the library with cudaMalloc outside the
// client's arena. From Hopper (compute capability 9.0) on, measured on an H100 (driver 580,
// bench/cublas_cost_probe.cu): a second handle with its first SGEMM took 64 MiB (NVIDIA
// documents a 32 MiB cuBLAS workspace; cuBLASLt's comes with it). Before: NVIDIA's documented
// 4 MiB (cublasSetWorkspace), not measured here. VMCUDA_CUBLAS_WORKSPACE_BYTES sets another.
uint64_t Session::cublas_workspace_cost(int device) const {
  if (limits_.cublas_workspace_bytes >= 0) return static_cast<uint64_t>(limits_.cublas_workspace_bytes);
  int major = 0;
  if (static_cast<size_t>(device) >= devices_.size() ||
      api_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, devices_[device]) != CUDA_SUCCESS)
    major = 9;  // unknown: the larger size
  return major >= 9 ? 64ull << 20 : 4ull << 20;
}

CUresult Session::cublas_release(CublasHandleObject& h) {
  if (h.handle && cublas_) cublas_->cublasDestroy_v2(h.handle);
  h.handle = nullptr;
  // Its workspace goes back whichever way it goes (a resume charges it again).
  if (account_ && h.charged) account_->refund(h.charged);
  h.charged = 0;
  return CUDA_SUCCESS;  // a cuBLAS status is no CUresult: teardown goes on either way
}

bool Session::cublas_recreate(CublasHandleObject& h, int device, std::string* why) {
  int32_t status = CUBLAS_STATUS_SUCCESS;
  const CublasApi* lib = cublas_library(&status);
  std::string w;
  if (!lib) load(api_, &w);
  const uint64_t cost = cublas_workspace_cost(device);
  if (lib && account_ && cost && !account_->charge(cost)) {
    *why = "the VM's device memory quota has no room for a cuBLAS handle's workspace (" + std::to_string(cost >> 20) +
           " MiB)";
    return false;
  }
  h.charged = account_ && lib ? cost : 0;
  void* made = nullptr;
  int st = lib ? lib->cublasCreate_v2(&made) : status;
  if (st == CUBLAS_STATUS_SUCCESS && h.pointer_mode)
    st = lib->cublasSetPointerMode_v2 ? lib->cublasSetPointerMode_v2(made, h.pointer_mode) : CUBLAS_STATUS_NOT_SUPPORTED;
  if (st == CUBLAS_STATUS_SUCCESS && h.math_mode)
    st = lib->cublasSetMathMode ? lib->cublasSetMathMode(made, h.math_mode) : CUBLAS_STATUS_NOT_SUPPORTED;
  if (st != CUBLAS_STATUS_SUCCESS) {
    if (made) lib->cublasDestroy_v2(made);
    if (account_ && h.charged) account_->refund(h.charged);
    h.charged = 0;
    *why = "recreating a cuBLAS handle failed (status " + std::to_string(st) + ")" +
           (lib ? "" : ": no libcublas.so.13 on this host (" + w + ")");
    return false;
  }
  h.handle = made;
  return true;
}

bool Session::restore_cublas_settings(std::string* why) {
  for (const auto& [guest, id] : vol_.of(ObjectKind::CublasHandle)) {
    Object& o = *vol_.get(id);
    CublasHandleObject& h = o.as<CublasHandleObject>();
    make_current(o.device);
    int st = CUBLAS_STATUS_SUCCESS;
    if (h.stream) {
      const Object* s = vol_.find(ObjectKind::Stream, h.stream);
      if (!s || s->device != o.device) {
        *why = "a cuBLAS handle's stream is not in the state";
        return false;
      }
      st = cublas_->cublasSetStream_v2 ? cublas_->cublasSetStream_v2(h.handle, s->as<StreamObject>().stream)
                                       : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (st == CUBLAS_STATUS_SUCCESS && h.workspace) {
      if (!owns_range(h.workspace, h.workspace_bytes)) {
        *why = "a cuBLAS handle's workspace is not the client's memory in the state";
        return false;
      }
      st = cublas_->cublasSetWorkspace_v2
               ? cublas_->cublasSetWorkspace_v2(h.handle, reinterpret_cast<void*>(h.workspace), h.workspace_bytes)
               : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      *why = "restoring a cuBLAS handle's stream or workspace failed (status " + std::to_string(st) + ")";
      return false;
    }
  }
  make_current(current_);
  return true;
}

// ---- CublasScope

CublasScope::CublasScope(Session& s, uint64_t guest, const char* call) : s_(s), call_(call) {
  Object* o = s.vol_.find(ObjectKind::CublasHandle, guest);
  if (!o) {
    status_ = CUBLAS_STATUS_NOT_INITIALIZED;  // as the library answers a handle it did not make
    return;
  }
  lib = s.cublas_library(&status_);
  if (!lib) return;
  handle = &o->as<CublasHandleObject>();
  device_ = o->device;
  s.make_current(o->device);
  // A stream the app destroyed while the handle still names it: the library would use a
  // freed stream. Natively undefined; here the handle falls back to the default stream.
  if (handle->stream && !s.vol_.find(ObjectKind::Stream, handle->stream)) {
    lib->cublasSetStream_v2(handle->handle, nullptr);
    handle->stream = 0;
  }
}

CublasScope::~CublasScope() {
  if (s_.contexts_[s_.current_]) s_.make_current(s_.current_);
}

void CublasScope::launch(const vmrpc::CallContext& ctx) {
  CUstream stream = nullptr;  // no stream set: the context's NULL stream, as the library uses
  if (handle->stream) stream = s_.vol_.find(ObjectKind::Stream, handle->stream)->as<StreamObject>().stream;  // checked above
  s_.count_launch(device_, stream, ctx);
}

const void* CublasScope::scalar(const uint8_t (&field)[16], size_t bytes) const {
  if (bytes == 0 || bytes > sizeof field) return nullptr;
  if (handle->pointer_mode != CUBLAS_POINTER_MODE_DEVICE) return scalars_.keep(field, bytes);
  uint64_t ptr;
  std::memcpy(&ptr, field, sizeof ptr);
  return ptr && s_.owns_range(ptr, bytes) ? reinterpret_cast<const void*>(ptr) : nullptr;
}

void* CublasScope::result(uint64_t ptr, Request& req, size_t bytes) const {
  if (handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE)
    return ptr && s_.owns_range(ptr, bytes) ? reinterpret_cast<void*>(ptr) : nullptr;
  if (req.extra.size() < bytes) return nullptr;
  std::memset(req.extra.data(), 0, bytes);
  req.extra_bytes = static_cast<uint32_t>(bytes);
  return req.extra.data();
}

int32_t CublasScope::bad_pointer(const char* param) {
  if (g_bad_pointers.fetch_add(1, std::memory_order_relaxed) < 8)
    VMRPC_LOG(kWarn, "stub", s_.log_tag_ + ": " + call_ + ": " + param +
                                 " is not the client's device memory (nor, for a scalar or result, room for it); "
                                 "the call answers CUBLAS_STATUS_INVALID_VALUE");
  return status_ = CUBLAS_STATUS_INVALID_VALUE;
}

int32_t CublasScope::missing() {
  std::lock_guard l(g_missing_mu);
  if (g_missing.insert(call_).second)
    VMRPC_LOG(kWarn, "stub", std::string("the host's libcublas.so.13 has no ") + call_ +
                                 ": the call answers CUBLAS_STATUS_NOT_SUPPORTED");
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

// ---- handles and their settings (api/libs/cublas.calls `hand`)

int32_t Session::on_cublasCreate_v2(const api::cublasCreate_v2_Args& a, api::Empty&, Request&) {
  if (a.handle < api::kFirstGuestHandle || vol_.find(ObjectKind::CublasHandle, a.handle))
    return guest_fault("cublasCreate_v2: a handle that is not new");
  if (!charge_library_host(HostLibrary::kBlas)) return CUBLAS_STATUS_ALLOC_FAILED;
  int32_t status = CUBLAS_STATUS_SUCCESS;
  const CublasApi* lib = cublas_library(&status);
  if (!lib) return status;
  // The library's own workspace is the VM's (cublas_workspace_cost): no room, no handle, as a
  // native cublasCreate that cannot allocate it answers.
  const uint64_t cost = account_ ? cublas_workspace_cost(current_) : 0;
  if (cost && !account_->charge(cost)) {
    if (workspace_refusals_++ < 8)
      VMRPC_LOG(kWarn, "stub", log_tag_ + ": cublasCreate: the VM's device memory quota has no room for the handle's "
                                          "workspace (" + std::to_string(cost >> 20) +
                                          " MiB, VMCUDA_CUBLAS_WORKSPACE_BYTES); answered CUBLAS_STATUS_ALLOC_FAILED");
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  // In the client's context of the current device (Session::call made it current).
  void* h = nullptr;
  if (int st = lib->cublasCreate_v2(&h); st != CUBLAS_STATUS_SUCCESS) {
    if (cost) account_->refund(cost);
    return st;
  }
  CublasHandleObject made{h};
  made.charged = cost;
  vol_.add(ObjectKind::CublasHandle, current_, a.handle, vol_.context(current_)->id, std::move(made));
  return CUBLAS_STATUS_SUCCESS;
}

int32_t Session::on_cublasDestroy_v2(const api::cublasDestroy_v2_Args& a, api::Empty&, Request&) {
  Object* o = vol_.find(ObjectKind::CublasHandle, a.handle);
  if (!o) return CUBLAS_STATUS_NOT_INITIALIZED;
  int st = CUBLAS_STATUS_SUCCESS;
  CublasHandleObject& h = o->as<CublasHandleObject>();
  if (cublas_) {
    make_current(o->device);
    st = cublas_->cublasDestroy_v2(h.handle);
    make_current(current_);
  }
  h.handle = nullptr;
  cublas_release(h);  // its workspace's charge
  vol_.remove(o->id);
  return st;
}

int32_t Session::on_cublasSetStream_v2(const api::cublasSetStream_v2_Args& a, api::Empty&, Request&) {
  CublasScope c(*this, a.handle, "cublasSetStream_v2");
  if (!c.ok() || !c.has(c.lib->cublasSetStream_v2)) return c.status();
  CUstream s = nullptr;
  int device = -1;
  if (resolve_stream(a.streamId, &s, &device) != CUDA_SUCCESS) return CUBLAS_STATUS_INVALID_VALUE;
  // A special stream (legacy, per-thread) resolves to the current device's; the handle's own
  // device is what counts for a stream the app made.
  if (a.streamId >= api::kFirstGuestHandle && device != vol_.find(ObjectKind::CublasHandle, a.handle)->device)
    return CUBLAS_STATUS_INVALID_VALUE;
  const int st = c.lib->cublasSetStream_v2(c.handle->handle, s);
  if (st == CUBLAS_STATUS_SUCCESS) c.handle->stream = a.streamId >= api::kFirstGuestHandle ? a.streamId : 0;
  return st;
}

int32_t Session::on_cublasSetPointerMode_v2(const api::cublasSetPointerMode_v2_Args& a, api::Empty&, Request&) {
  CublasScope c(*this, a.handle, "cublasSetPointerMode_v2");
  if (!c.ok() || !c.has(c.lib->cublasSetPointerMode_v2)) return c.status();
  const int st = c.lib->cublasSetPointerMode_v2(c.handle->handle, a.mode);
  if (st == CUBLAS_STATUS_SUCCESS) c.handle->pointer_mode = a.mode;
  return st;
}

int32_t Session::on_cublasSetMathMode(const api::cublasSetMathMode_Args& a, api::Empty&, Request&) {
  CublasScope c(*this, a.handle, "cublasSetMathMode");
  if (!c.ok() || !c.has(c.lib->cublasSetMathMode)) return c.status();
  const int st = c.lib->cublasSetMathMode(c.handle->handle, a.mode);
  if (st == CUBLAS_STATUS_SUCCESS) c.handle->math_mode = a.mode;
  return st;
}

int32_t Session::on_cublasSetWorkspace_v2(const api::cublasSetWorkspace_v2_Args& a, api::Empty&, Request&) {
  CublasScope c(*this, a.handle, "cublasSetWorkspace_v2");
  if (!c.ok() || !c.has(c.lib->cublasSetWorkspace_v2)) return c.status();
  // The whole workspace must be the client's: the library writes all of it.
  if (a.workspace && !owns_range(a.workspace, a.workspaceSizeInBytes)) return c.bad_pointer("workspace");
  const int st = c.lib->cublasSetWorkspace_v2(c.handle->handle, reinterpret_cast<void*>(a.workspace),
                                              a.workspaceSizeInBytes);
  if (st == CUBLAS_STATUS_SUCCESS) {
    c.handle->workspace = a.workspace;
    c.handle->workspace_bytes = a.workspaceSizeInBytes;
  }
  return st;
}

// Exported by NVIDIA's libcublas.so.13 but in no header (gen-cublas.py UNDECLARED); NVIDIA's
// cuSOLVER sets it on its handle. Forwarded where the host's library has it; a library without
// it has no such mode, so the call is then a no-op that succeeds (logged once).
int32_t Session::on_cublasSetEnvironmentMode(const api::cublasSetEnvironmentMode_Args& a, api::Empty&, Request&) {
  CublasScope c(*this, a.handle, "cublasSetEnvironmentMode");
  if (!c.ok()) return c.status();
  if (a.mode != 0 && a.mode != 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (!c.lib->cublasSetEnvironmentMode) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true))
      VMRPC_LOG(kInfo, "stub", "the host's libcublas.so.13 has no cublasSetEnvironmentMode: the guests' calls of it "
                               "succeed and change nothing");
    return CUBLAS_STATUS_SUCCESS;
  }
  return c.lib->cublasSetEnvironmentMode(c.handle->handle, a.mode);
}

#endif  // VMCUDA_WITH_CUBLAS

}  // namespace vmcuda::host
