#include "host_objects.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <span>

#include "log.h"
#include "managed.h"
#include "module_image.h"
#include "vgpu_db/allocations.h"

namespace vmcuda::guest {
namespace {

// Keyed by the registry's object and the guest device.
template <class K, class V>
using PerDevice = std::map<std::pair<const K*, int>, V>;

struct Tables {
  std::mutex mu;  // a leaf lock: held only while a table is read or changed
  PerDevice<vgpu_db::Module, uint64_t> modules;  // the host's module handle
  PerDevice<vgpu_db::Function, HostKernel> kernels;
  PerDevice<vgpu_db::Variable, HostGlobal> globals;
};
Tables& tables() {
  static auto* t = new Tables;  // never destroyed: used from atexit handlers
  return *t;
}

}  // namespace

// The driver API's objects live in libcuda.so.1's driver areas (driver_module.cc), whose
// strong definition replaces this one there; the runtime areas alone (in-process tests)
// know none.
__attribute__((weak)) cudaError_t driver_kernel(const void*, HostKernel**) noexcept {
  return cudaErrorInvalidDeviceFunction;
}

const vgpu_db::Function* find_kernel(const void* func) noexcept {
  auto& registry = vgpu_db::ModuleRegistry::process();
  const vgpu_db::Function* f = registry.find_function(func);
  return f ? f : registry.function_from_kernel(func);
}

const void* kernel_of_handle(uint64_t handle, const HostKernel** k) noexcept {
  auto& t = tables();
  std::lock_guard l(t.mu);
  const int device = Remote::thread_device();
  for (const auto& [key, kernel] : t.kernels)
    if (key.second == device && kernel.handle == handle) return *k = &kernel, key.first->host_fun;
  return nullptr;
}

cudaError_t load_module(Remote& r, const vgpu_db::Module& m, uint64_t* handle) {
  const auto key = std::make_pair(&m, Remote::thread_device());
  auto& t = tables();
  {
    std::lock_guard l(t.mu);
    if (auto it = t.modules.find(key); it != t.modules.end()) return *handle = it->second, cudaSuccess;
  }
  if (!m.valid) {
    VMCUDA_LOG(kWarn, "module", "module %llu cannot be loaded: %s", static_cast<unsigned long long>(m.id),
               m.problem.c_str());
    return cudaErrorInvalidKernelImage;
  }
  const auto& fb = m.image.fatbin;
  // A registered fatbin stays where it is for the module's life: hashed once.
  const ModuleLoadResult res =
      load_module_image(r, std::span(reinterpret_cast<const std::byte*>(fb.data), fb.size), /*stable=*/true);
  if (res.heap_full) return cudaErrorMemoryAllocation;
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  {
    std::lock_guard l(t.mu);
    t.modules[key] = res.handle;
  }
  *handle = res.handle;
  return bind_managed(r, m, res.handle);  // its __managed__ variables, wherever it is loaded
}

cudaError_t host_kernel(Remote& r, const vgpu_db::Function& f, HostKernel** out) {
  const auto key = std::make_pair(&f, Remote::thread_device());
  auto& t = tables();
  {
    std::lock_guard l(t.mu);
    if (auto it = t.kernels.find(key); it != t.kernels.end()) return *out = &it->second, cudaSuccess;
  }
  uint64_t module = 0;
  if (cudaError_t e = load_module(r, *f.module, &module)) return e;
  auto res = r.call<api::Call::ModuleGetFunction>({module, static_cast<uint32_t>(f.name.size()), 0},
                                                 std::as_bytes(std::span(f.name)),
                                                 api::kMaxKernelParams * sizeof(api::ParamInfo));
  if (res.status != cudaSuccess)
    return res.status == 500 ? cudaErrorInvalidDeviceFunction : static_cast<cudaError_t>(res.status);
  HostKernel k;
  k.handle = res.reply.function;
  k.params.resize(std::min<size_t>(res.reply.param_count, res.extra.size() / sizeof(api::ParamInfo)));
  std::memcpy(k.params.data(), res.extra.data(), k.params.size() * sizeof(api::ParamInfo));
  for (const auto& p : k.params) k.arg_bytes = std::max(k.arg_bytes, p.offset + p.size);
  std::lock_guard l(t.mu);
  *out = &(t.kernels[key] = std::move(k));
  return cudaSuccess;
}

cudaError_t host_global(Remote& r, const vgpu_db::Variable& v, HostGlobal* out) {
  const int device = Remote::thread_device();
  const auto key = std::make_pair(&v, device);
  auto& t = tables();
  {
    std::lock_guard l(t.mu);
    if (auto it = t.globals.find(key); it != t.globals.end()) return *out = it->second, cudaSuccess;
  }
  uint64_t module = 0;
  if (cudaError_t e = load_module(r, *v.module, &module)) return e;
  auto res = r.call<api::Call::ModuleGetGlobal>({module, static_cast<uint32_t>(v.name.size()), 0},
                                               std::as_bytes(std::span(v.name)));
  // Registered, but not in the module's code for this device.
  if (res.status == 500) return cudaErrorInvalidSymbol;
  if (res.status != cudaSuccess) return static_cast<cudaError_t>(res.status);
  const HostGlobal g{res.reply.ptr, res.reply.bytes};
  vgpu_db::AllocationMap::process().add({g.ptr, g.bytes, vgpu_db::Allocation::kModuleGlobal, device, 0});
  std::lock_guard l(t.mu);
  t.globals[key] = g;
  *out = g;
  return cudaSuccess;
}

void forget_module(const vgpu_db::Module* m) noexcept {
  auto& t = tables();
  std::lock_guard l(t.mu);
  std::erase_if(t.modules, [m](const auto& kv) { return kv.first.first == m; });
  std::erase_if(t.kernels, [m](const auto& kv) { return kv.first.first->module == m; });
  for (auto it = t.globals.begin(); it != t.globals.end();) {
    if (it->first.first->module == m) {
      vgpu_db::AllocationMap::process().remove(it->second.ptr, vgpu_db::Allocation::kModuleGlobal);
      it = t.globals.erase(it);
    } else {
      ++it;
    }
  }
}

// Without the driver API's areas (in-process tests of the runtime alone) there are no driver
// functions; libcuda.so.1 links driver_module.cc's definition, which takes precedence.
__attribute__((weak)) const void* driver_function_of_handle(uint64_t, const HostKernel**) noexcept { return nullptr; }

}  // namespace vmcuda::guest
