#include "driver_state.h"

#include <memory>
#include <mutex>
#include <vector>

#include "log.h"
#include "remote.h"
#include "runtime_state.h"

namespace vmcuda::guest {
namespace {

std::atomic<bool> g_initialized{false};

// Each thread's context stack; the top is its current context.
std::vector<CUcontext>& stack() {
  thread_local std::vector<CUcontext> s;
  return s;
}

struct Contexts {
  std::mutex mu;
  std::vector<std::unique_ptr<CUctx_st>> primary;  // one per device, made at first use
  std::vector<std::unique_ptr<CUctx_st>> created;  // cuCtxCreate's, kept (stale handles stay refusable)
};
Contexts& contexts() {
  static auto* c = new Contexts;  // never destroyed: used until the very end of the process
  return *c;
}

bool is_known_cu_result(int v) {
  switch (v) {
#define VMCUDA_CU_ERROR(name, value, string) case value:
#include "vmcuda/cuda_errors.inc"
#undef VMCUDA_CU_ERROR
      return true;
    default:
      return false;
  }
}

}  // namespace

int unsupported_driver_call(const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.load(std::memory_order_relaxed) && !logged.exchange(true, std::memory_order_relaxed))
    VMCUDA_LOG(kWarn, "api", "%s is not supported yet; it returns CUDA_ERROR_NOT_SUPPORTED (801)", name);
  return cu::kNotSupported;
}

CUresult to_cu_result(cudaError_t e) noexcept {
  switch (e) {
    // The runtime's own argument codes: the driver says "invalid value".
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidHostPointer:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorMissingConfiguration:
      return cu::kInvalidValue;
    case cudaErrorInvalidSymbol:
      return cu::kNotFound;
    case cudaErrorInvalidDeviceFunction:
      return cu::kInvalidHandle;
    case cudaErrorInsufficientDriver:
      return 803;  // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
    default:
      break;
  }
  const int v = static_cast<int>(e);
  return is_known_cu_result(v) ? v : cu::kUnknown;
}

KeepRuntimeLastError::KeepRuntimeLastError() noexcept
    : saved_(peek_last_error()), runtime_used_(runtime_used_on_this_thread()) {}
KeepRuntimeLastError::~KeepRuntimeLastError() { restore_runtime_thread_state(saved_, runtime_used_); }

bool driver_initialized() noexcept { return g_initialized.load(std::memory_order_acquire) || Remote::started(); }

void mark_driver_initialized() noexcept { g_initialized.store(true, std::memory_order_release); }

CUresult enter_driver_call() noexcept {
  if (!driver_initialized()) return cu::kNotInitialized;
  if (cudaError_t s = sticky_error()) return to_cu_result(s);
  return cu::kSuccess;
}

CUcontext primary_context(int device) noexcept {
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r || device < 0 || device >= static_cast<int>(r->devices().size())) return nullptr;
  auto& c = contexts();
  std::lock_guard l(c.mu);
  if (c.primary.size() < r->devices().size()) c.primary.resize(r->devices().size());
  auto& p = c.primary[device];
  if (!p) {
    p = std::make_unique<CUctx_st>();
    p->device = device;
    p->primary = true;
  }
  return p.get();
}

CUcontext current_context() noexcept {
  auto& s = stack();
  if (!s.empty()) return s.back();
  // NVIDIA's runtime makes its device's primary context current on every thread it runs on.
  if (runtime_used_on_this_thread()) return primary_context(Remote::thread_device());
  return nullptr;
}

bool valid_context(CUcontext ctx) noexcept {
  if (!ctx) return false;
  auto& c = contexts();
  std::lock_guard l(c.mu);
  for (const auto& p : c.primary)
    if (p.get() == ctx) return true;
  for (const auto& p : c.created)
    if (p.get() == ctx) return p->alive.load();
  return false;
}

CUcontext make_context(int device, unsigned flags) noexcept {
  auto& c = contexts();
  std::lock_guard l(c.mu);
  try {
    auto p = std::make_unique<CUctx_st>();
    p->device = device;
    p->flags = flags;
    c.created.push_back(std::move(p));
    return c.created.back().get();
  } catch (...) {
    return nullptr;
  }
}

void destroy_context(CUcontext ctx) noexcept {
  ctx->alive.store(false);
  // Natively a destroyed context is no thread's current one any more; other threads' stacks
  // are theirs (their next call with it fails: enter_context_call checks it is alive).
  auto& s = stack();
  std::erase(s, ctx);
}

void set_current_context(CUcontext ctx) noexcept {
  auto& s = stack();
  if (!ctx) {
    if (!s.empty()) s.pop_back();
  } else if (s.empty()) {
    s.push_back(ctx);
  } else {
    s.back() = ctx;
  }
  if (ctx) Remote::thread_device() = ctx->device;
}

void push_context(CUcontext ctx) noexcept {
  stack().push_back(ctx);
  Remote::thread_device() = ctx->device;
}

CUcontext pop_context() noexcept {
  auto& s = stack();
  if (s.empty()) return nullptr;
  CUcontext top = s.back();
  s.pop_back();
  if (!s.empty()) Remote::thread_device() = s.back()->device;
  return top;
}

CUresult enter_context_call(CUcontext* out) noexcept {
  if (CUresult e = enter_driver_call()) return e;
  CUcontext ctx = current_context();
  if (!ctx) return cu::kInvalidContext;
  if (!ctx->primary && !ctx->alive.load()) return cu::kContextIsDestroyed;
  Remote::thread_device() = ctx->device;
  if (out) *out = ctx;
  return cu::kSuccess;
}

}  // namespace vmcuda::guest
