// driver API: modules, libraries and kernels, functions and launches (cuda.h). A module is
// loaded on the host at cuModuleLoadData (synchronously: a bad image fails there, as
// natively), on the current context's device, through the runtime's wire calls
// (ModuleLoad, ModuleGetFunction, ModuleGetGlobal). Launches are queued exactly as the
// runtime's (launch.cc): the arguments are packed by the kernel's parameter layout into one
// LaunchKernel frame of the lazy queue. A library (cuLibraryLoadData) keeps its image and is
// loaded as a module on each device at the first use of one of its kernels there.
//
// cuModuleUnload and cuLibraryUnload unload on the host too (ModuleUnload): what the VM's
// memory quota was charged for the module comes back. Known gaps: JIT options of
// cuModuleLoadDataEx/cuLibraryLoadData are ignored (no logs are written back).
#include <algorithm>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_set>
#include <fstream>
#include <iterator>
#include <vector>

#include "driver_state.h"
#include "host_objects.h"
#include "log.h"
#include "module_image.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

#define CU_API extern "C" __attribute__((visibility("default")))

using namespace vmcuda::guest;
namespace cu = vmcuda::cu;
namespace api = vmcuda::api;

struct CUmod_st {
  uint64_t host = 0;  // the host's module handle
  int device = 0;
  bool of_library = false;  // a library's (cuLibraryGetModule): cuLibraryUnload unloads it
  std::map<std::string, std::unique_ptr<CUfunc_st>> functions;  // by name, made once
};
struct CUfunc_st {
  CUmod_st* module = nullptr;
  std::string name;
  HostKernel kernel;  // the host's handle, parameter layout, attributes (host_objects.h)
};
// A library's __managed__ variable (cuLibraryGetManaged): one shadow in the shared heap, what
// the program's CPU reads and writes, bound on the host to the variable of the library's
// module on each device the library is used on (host-stub/src/managed.cc keeps them coherent
// at launches and synchronizing calls, as for a registered module's variables).
struct LibraryManaged {
  vmrpc::HeapBlock shadow;
  std::set<int> devices;  // where it is bound
};
struct CUlib_st {
  std::vector<std::byte> image;
  std::map<int, CUmod_st*> modules;  // per device, loaded at first use
  std::map<std::string, std::unique_ptr<CUkern_st>> kernels;
  std::map<std::string, LibraryManaged> managed;  // by name, under library_managed_mu()
};
struct CUkern_st {
  CUlib_st* library = nullptr;
  std::string name;
};

namespace {

// The live objects: a handle the app passes is looked up here before use, so a stale or
// forged one is CUDA_ERROR_INVALID_HANDLE, not a crash. Objects are never freed (a stale
// handle stays refusable); unload only forgets them.
struct Objects {
  std::mutex mu;
  std::vector<std::unique_ptr<CUmod_st>> all_modules;
  std::vector<std::unique_ptr<CUlib_st>> all_libraries;
  std::unordered_set<const void*> modules, functions, libraries, kernels;
};
Objects& objects() {
  static auto* o = new Objects;
  return *o;
}
template <class T>
bool live(const std::unordered_set<const void*>& set, T* p) {
  return p && set.contains(static_cast<const void*>(p));
}

// How many bytes the image at `p` spans (cuModuleLoadData is not told): a fatbin by its
// header, an ELF cubin by its section and program header tables and sections, else PTX text
// up to its NUL. 0 when it is no image at all (too small to tell).
size_t image_size(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint32_t magic;
  std::memcpy(&magic, b, 4);
  if (magic == 0x466243B1u) {  // a fatbin wrapper (__fatBinC_Wrapper_t): its data is the fatbin
    const void* data;
    std::memcpy(&data, b + 8, sizeof data);
    return data ? image_size(data) : 0;
  }
  if (magic == 0xBA55ED50u) {
    uint16_t header;
    uint64_t fat;
    std::memcpy(&header, b + 6, 2);
    std::memcpy(&fat, b + 8, 8);
    return header + fat;
  }
  if (std::memcmp(b, "\x7f" "ELF", 4) == 0 && b[4] == 2) {
    uint64_t phoff, shoff;
    uint16_t phentsize, phnum, shentsize, shnum;
    std::memcpy(&phoff, b + 0x20, 8);
    std::memcpy(&shoff, b + 0x28, 8);
    std::memcpy(&phentsize, b + 0x36, 2);
    std::memcpy(&phnum, b + 0x38, 2);
    std::memcpy(&shentsize, b + 0x3a, 2);
    std::memcpy(&shnum, b + 0x3c, 2);
    uint64_t end = std::max<uint64_t>(64, std::max(phoff + uint64_t{phentsize} * phnum, shoff + uint64_t{shentsize} * shnum));
    for (uint16_t i = 0; i < shnum && shentsize >= 64; ++i) {
      const unsigned char* sh = b + shoff + uint64_t{i} * shentsize;
      uint32_t type;
      uint64_t off, size;
      std::memcpy(&type, sh + 4, 4);
      std::memcpy(&off, sh + 0x18, 8);
      std::memcpy(&size, sh + 0x20, 8);
      if (type != 8) end = std::max(end, off + size);  // SHT_NOBITS takes no file bytes
    }
    return end;
  }
  return std::strlen(reinterpret_cast<const char*>(b)) + 1;  // PTX
}

// The image where it was (wrapper: its fatbin).
const void* image_start(const void* p) {
  uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic != 0x466243B1u) return p;
  const void* data;
  std::memcpy(&data, static_cast<const char*>(p) + 8, sizeof data);
  return data;
}

// Loads `bytes` on the calling thread's device. Precondition: r locked.
CUresult load_on_host(Remote& r, std::span<const std::byte> bytes, uint64_t* handle) {
  // The program's buffer may hold other bytes at the next load: hashed each time.
  const ModuleLoadResult res = load_module_image(r, bytes, /*stable=*/false);
  if (res.heap_full) return cu::kOutOfMemory;
  if (res.status != 0) return to_cu_result(static_cast<cudaError_t>(res.status));
  *handle = res.handle;
  return cu::kSuccess;
}

// Unloads host module `host` (cuModuleUnload, cuLibraryUnload): the VM's quota gets back
// what it was charged for it. The host refuses while the program holds a graph.
CUresult unload_on_host(uint64_t host) {
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return to_cu_result(e);
  auto lock = r->lock();
  auto res = r->call<api::Call::ModuleUnload>({host});
  return res.status == 0 ? cu::kSuccess : to_cu_result(static_cast<cudaError_t>(res.status));
}

CUresult new_module(std::span<const std::byte> bytes, CUmod_st** out) {
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return to_cu_result(e);
  auto m = std::make_unique<CUmod_st>();
  m->device = Remote::thread_device();
  {
    auto lock = r->lock();
    if (CUresult ce = load_on_host(*r, bytes, &m->host)) return ce;
  }
  auto& o = objects();
  std::lock_guard l(o.mu);
  o.modules.insert(m.get());
  *out = m.get();
  o.all_modules.push_back(std::move(m));
  return cu::kSuccess;
}

CUresult load_image(CUmodule* out, const void* image) {
  if (CUresult e = enter_context_call()) return e;
  if (!out || !image) return cu::kInvalidValue;
  const void* start = image_start(image);
  if (!start) return cu::kInvalidImage;
  const size_t n = image_size(start);
  if (n == 0) return cu::kInvalidImage;
  KeepRuntimeLastError keep;
  CUmod_st* m = nullptr;
  if (CUresult e = new_module({static_cast<const std::byte*>(start), n}, &m)) return e;
  *out = m;
  return cu::kSuccess;
}

// The function `name` of module `m` (made once). Precondition: none held.
CUresult module_function(CUmod_st* m, const char* name, CUfunc_st** out) {
  auto& o = objects();
  {
    std::lock_guard l(o.mu);
    if (auto it = m->functions.find(name); it != m->functions.end()) return *out = it->second.get(), cu::kSuccess;
  }
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return to_cu_result(e);
  auto f = std::make_unique<CUfunc_st>();
  f->module = m;
  f->name = name;
  {
    auto lock = r->lock();
    const int saved = Remote::thread_device();
    Remote::thread_device() = m->device;  // the module's device, whatever is current
    auto res = r->call<api::Call::ModuleGetFunction>({m->host, static_cast<uint32_t>(f->name.size()), 0},
                                                    std::as_bytes(std::span(f->name)),
                                                    api::kMaxKernelParams * sizeof(api::ParamInfo));
    Remote::thread_device() = saved;
    if (res.status != 0) return to_cu_result(static_cast<cudaError_t>(res.status));
    f->kernel.handle = res.reply.function;
    f->kernel.params.resize(std::min<size_t>(res.reply.param_count, res.extra.size() / sizeof(api::ParamInfo)));
    std::memcpy(f->kernel.params.data(), res.extra.data(), f->kernel.params.size() * sizeof(api::ParamInfo));
    for (const auto& p : f->kernel.params) f->kernel.arg_bytes = std::max(f->kernel.arg_bytes, p.offset + p.size);
  }
  std::lock_guard l(o.mu);
  auto [it, fresh] = m->functions.emplace(f->name, std::move(f));
  o.functions.insert(it->second.get());
  *out = it->second.get();
  return cu::kSuccess;
}

// `m`, just loaded for `lib` on `dev`, becomes its module there, unless another thread's
// load got there first: then that one, and `m` is unloaded again.
CUmod_st* adopt_library_module(CUlib_st& lib, int dev, CUmod_st* m) {
  CUmod_st* kept = nullptr;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    m->of_library = true;
    auto [it, added] = lib.modules.try_emplace(dev, m);
    if (added) return m;
    o.modules.erase(m);
    kept = it->second;
  }
  unload_on_host(m->host);
  return kept;
}

// Held while a library's managed variables are found or bound (cuLibraryGetManaged, a
// library's first use on another device, cuLibraryUnload), so that a variable gets one
// shadow. Recursive: cuLibraryGetManaged loads the library's module, which binds. Taken
// before objects().mu and the channel's lock.
std::recursive_mutex& library_managed_mu() {
  static auto* mu = new std::recursive_mutex;
  return *mu;
}

// Binds `shadow` to managed variable `name` of library module `m` (ManagedVarBind). `keep`:
// the shadow is bound on another device already and keeps its bytes, which the next launch
// here gives to this device's variable; else the shadow gets the variable's initial value.
// `*bound`: whether the host bound it (then it may write the shadow, even when the status is an
// earlier queued call's error). Precondition: library_managed_mu() held.
CUresult bind_library_managed(CUmod_st& m, const std::string& name, const vmrpc::HeapBlock& shadow, bool keep,
                              bool* bound) {
  *bound = false;
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return to_cu_result(e);
  auto lock = r->lock();
  const int saved = Remote::thread_device();
  Remote::thread_device() = m.device;
  const uint32_t flags = api::kManagedBindOnlyManaged | (keep ? api::kManagedBindKeep : 0u);
  auto res = r->call<api::Call::ManagedVarBind>({m.host, shadow.ref(), static_cast<uint32_t>(name.size()), flags},
                                                std::as_bytes(std::span(name)));
  Remote::thread_device() = saved;
  if (res.reply.var == 0) return res.status == 0 ? cu::kUnknown : to_cu_result(static_cast<cudaError_t>(res.status));
  *bound = true;
  // Symbol copies may name the variable's device storage (as a module global's).
  vgpu_db::AllocationMap::process().add({res.reply.ptr, res.reply.bytes, vgpu_db::Allocation::kModuleGlobal, m.device, 0});
  return res.status == 0 ? cu::kSuccess : to_cu_result(static_cast<cudaError_t>(res.status));
}

// A library kernel as a function of the calling thread's device (loading the library there).
// The library's module on the calling thread's device, loaded there at its first use; the
// managed variables the program asked for are bound there too (one variable for every device,
// as natively).
CUresult library_module(CUlib_st& library, CUmod_st** out) {
  const int dev = Remote::thread_device();
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (auto it = library.modules.find(dev); it != library.modules.end()) return *out = it->second, cu::kSuccess;
  }
  std::lock_guard managed(library_managed_mu());
  CUmod_st* m = nullptr;
  if (CUresult e = new_module(library.image, &m)) return e;
  *out = adopt_library_module(library, dev, m);
  for (auto& [name, v] : library.managed) {
    if (v.devices.contains(dev)) continue;
    bool bound = false;
    const CUresult e = bind_library_managed(**out, name, v.shadow, /*keep=*/true, &bound);
    if (bound) v.devices.insert(dev);
    if (e != cu::kSuccess) return e;
  }
  return cu::kSuccess;
}

CUresult kernel_function(CUkern_st* k, CUfunc_st** out) {
  CUmod_st* m = nullptr;
  if (CUresult e = library_module(*k->library, &m)) return e;
  return module_function(m, k->name.c_str(), out);
}

// What cuLaunchKernel may be given: a CUfunction, a CUkernel (CUDA 12), or the runtime's
// cudaKernel_t / kernel host stub (the same objects natively). The kernel on the calling
// thread's device; nullptr when `f` is none of them.
// A CUfunction or CUkernel of this library; nothing when `f` is neither.
std::optional<CUresult> resolve_driver_object(CUfunction f, HostKernel** out) {
  bool is_function, is_kernel;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    is_function = live(o.functions, f);
    is_kernel = live(o.kernels, reinterpret_cast<CUkernel>(f));
  }
  if (is_function) {
    if (f->module->device != Remote::thread_device()) return cu::kInvalidHandle;  // another context's
    *out = &f->kernel;
    return cu::kSuccess;
  }
  if (is_kernel) {
    CUfunc_st* fn = nullptr;
    if (CUresult e = kernel_function(reinterpret_cast<CUkernel>(f), &fn)) return e;
    *out = &fn->kernel;
    return cu::kSuccess;
  }
  return std::nullopt;
}

CUresult resolve(CUfunction f, HostKernel** out) {
  if (auto r = resolve_driver_object(f, out)) return *r;
  if (const vgpu_db::Function* rf = find_kernel(f)) {
    cudaError_t e;
    Remote* r = Remote::get(&e);
    if (!r) return to_cu_result(e);
    auto lock = r->lock();
    return to_cu_result(host_kernel(*r, *rf, out));
  }
  return cu::kInvalidHandle;
}

}  // namespace

// The runtime given a driver object (cudaLaunchKernel or cudaFuncGetAttributes of a
// cudaKernel_t from cudaLibraryGetKernel, or of a CUfunction), as NVIDIA's runtime takes it.
cudaError_t vmcuda::guest::driver_kernel(const void* f, HostKernel** out) noexcept {
  auto r = resolve_driver_object(static_cast<CUfunction>(const_cast<void*>(f)), out);
  // CUresult and cudaError_t share these values (invalid handle 400, not found 500, ...).
  return r ? static_cast<cudaError_t>(*r) : cudaErrorInvalidDeviceFunction;
}

// The live CUfunction on the calling thread's device whose host handle is `handle` (a graph
// kernel node made through the driver API), or nullptr. Functions of several modules may
// share a handle only if the host reused one, which it does not while they are loaded.
const void* vmcuda::guest::driver_function_of_handle(uint64_t handle, const HostKernel** k) noexcept {
  auto& o = objects();
  std::lock_guard l(o.mu);
  const int device = Remote::thread_device();
  for (const auto& m : o.all_modules) {
    if (!live(o.modules, m.get()) || m->device != device) continue;
    for (const auto& [name, f] : m->functions)
      if (f->kernel.handle == handle && live(o.functions, f.get())) return *k = &f->kernel, f.get();
  }
  return nullptr;
}

namespace {

CUresult function_attributes(Remote& r, HostKernel& k) {
  const api::FuncAttributesReply* unused = nullptr;
  return to_cu_result(kernel_attributes(r, k, &unused));
}

// A kernel call with the Remote locked: `f` resolved (a CUfunction, CUkernel or runtime
// handle) on the calling thread's device.
template <typename F>
CUresult with_kernel(CUfunction f, F&& body) {
  if (CUresult e = enter_context_call()) return e;
  KeepRuntimeLastError keep;
  HostKernel* k = nullptr;
  if (CUresult e = resolve(f, &k)) return e;
  cudaError_t re;
  Remote* r = Remote::get(&re);
  if (!r) return to_cu_result(re);
  auto lock = r->lock();
  return to_cu_result(body(*r, *k));
}

// The cuKernel* calls name a device; the kernel is loaded there on the calling thread's
// context (the runtime passes the current device).
CUresult kernel_on(CUkernel kernel, CUdevice dev, CUfunction* f) {
  if (CUresult e = enter_context_call()) return e;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.kernels, kernel)) return cu::kInvalidHandle;
  }
  if (dev != Remote::thread_device()) {
    VMCUDA_LOG(kWarn, "api",
               "cuKernel* for device %d while device %d is current is not supported; it returns "
               "CUDA_ERROR_NOT_SUPPORTED (801): make that device's context current first",
               static_cast<int>(dev), Remote::thread_device());
    return cu::kNotSupported;
  }
  *f = reinterpret_cast<CUfunction>(kernel);
  return cu::kSuccess;
}

// `attrs`: cuLaunchKernelEx's (already on the wire's terms; `ex` sends them as a LaunchKernelEx).
CUresult launch(CUfunction f, dim3 grid, dim3 block, unsigned shared, CUstream stream, void** params, void** extra,
                bool per_thread, bool ex = false, const std::vector<api::LaunchAttribute>& attrs = {}) {
  if (CUresult e = enter_context_call()) return e;
  KeepRuntimeLastError keep;
  uint64_t wire_stream = 0;
  if (cudaError_t se = stream_wire_handle(stream, per_thread, &wire_stream)) return to_cu_result(se);
  HostKernel* k = nullptr;
  if (CUresult e = resolve(f, &k)) return e;
  cudaError_t re;
  Remote* r = Remote::get(&re);
  if (!r) return to_cu_result(re);
  if (cudaError_t c = check_launch_configuration(*r, grid, block)) return to_cu_result(c);
  // The arguments: kernelParams (one pointer per parameter) or `extra`'s packed buffer.
  const void* buffer = nullptr;
  size_t buffer_bytes = 0;
  bool have_size = false;
  for (void** e = extra; e && *e != cu::kLaunchParamEnd; e += 2) {
    if (*e == cu::kLaunchParamBufferPointer) buffer = e[1];
    else if (*e == cu::kLaunchParamBufferSize) have_size = true, buffer_bytes = e[1] ? *static_cast<size_t*>(e[1]) : 0;
    else return cu::kInvalidValue;  // an option this driver does not know
  }
  if (params && buffer) return cu::kInvalidValue;  // both forms at once
  if (buffer && !have_size) return cu::kInvalidValue;
  // A buffer larger than the kernel's parameters NVIDIA's driver 580 refuses so; a smaller
  // one it takes (seen on an H100: 24 and 16 bytes for 20 bytes of parameters). The bytes
  // past a smaller buffer are zeros here, never read from the app's memory.
  if (buffer && buffer_bytes > k->arg_bytes) return cu::kLaunchOutOfResources;
  if (!params && !buffer && !k->params.empty()) return cu::kInvalidValue;
  auto lock = r->lock();
  if (shared > 0) {
    if (CUresult e = function_attributes(*r, *k)) return e;
    constexpr int kMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if (shared > static_cast<unsigned>(std::max(0, k->attributes->values[kMaxDynamicSharedSizeBytes])))
      return cu::kInvalidValue;
  }
  thread_local std::vector<std::byte> packed;
  const size_t attr_bytes = ex ? attrs.size() * sizeof(api::LaunchAttribute) : 0;
  packed.assign(attr_bytes + k->arg_bytes, std::byte{0});
  if (attr_bytes) std::memcpy(packed.data(), attrs.data(), attr_bytes);
  if (buffer) {
    std::memcpy(packed.data() + attr_bytes, buffer, buffer_bytes);
  } else {
    for (size_t i = 0; i < k->params.size(); ++i) {
      if (!params[i]) return cu::kInvalidValue;
      std::memcpy(packed.data() + attr_bytes + k->params[i].offset, params[i], k->params[i].size);
    }
  }
  if (ex) {
    api::LaunchExArgs la{k->handle, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, shared, k->arg_bytes,
                         wire_stream, static_cast<uint32_t>(attrs.size()), 0};
    return to_cu_result(r->enqueue<api::Call::LaunchKernelEx>(la, packed));
  }
  api::LaunchArgs la{k->handle, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, shared, k->arg_bytes,
                     wire_stream};
  // Queued: the kernel's own errors come with the next synchronizing call, as in CUDA.
  return to_cu_result(r->enqueue<api::Call::LaunchKernel>(la, packed));
}

}  // namespace

// ------------------------------------------------------------------ modules

CU_API CUresult cuModuleLoadData(CUmodule* module, const void* image) { return load_image(module, image); }
// A cubin, fatbin or PTX file, read here (the file is the guest's) and loaded as its bytes.
CU_API CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (CUresult e = enter_context_call()) return e;
  if (!module || !path) return cu::kInvalidValue;
  std::ifstream in(path, std::ios::binary);
  if (!in) return cu::kFileNotFound;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.push_back('\0');  // PTX is text: the loader reads it to its end
  return load_image(module, bytes.data());
}
CU_API CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, CUjit_option*, void**) {
  return load_image(module, image);
}
CU_API CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) { return load_image(module, fatCubin); }

// CU_MODULE_EAGER_LOADING (1) or CU_MODULE_LAZY_LOADING (2), from CUDA_MODULE_LOADING as
// natively (lazy by default since CUDA 12.2). vmcuda loads the runtime's modules on the host at
// first use either way; the answer tells NVIDIA's runtime which of its paths to take.
CU_API CUresult cuModuleGetLoadingMode(int* mode) {
  if (CUresult e = enter_driver_call()) return e;
  if (!mode) return cu::kInvalidValue;
  const char* env = std::getenv("CUDA_MODULE_LOADING");
  *mode = env && std::strcmp(env, "EAGER") == 0 ? 1 : 2;
  return cu::kSuccess;
}

CU_API CUresult cuModuleUnload(CUmodule m) {
  if (CUresult e = enter_driver_call()) return e;
  auto& o = objects();
  {
    std::lock_guard l(o.mu);
    if (!live(o.modules, m)) return cu::kInvalidHandle;
    if (m->of_library) return cu::kNotPermitted;  // as natively: cuLibraryUnload unloads it
  }
  // The host first: it may keep the module (while the program holds graphs), and then so
  // does the guest.
  if (CUresult e = unload_on_host(m->host)) return e;
  std::lock_guard l(o.mu);
  o.modules.erase(m);
  for (auto& [name, f] : m->functions) o.functions.erase(f.get());
  return cu::kSuccess;
}

CU_API CUresult cuModuleGetFunction(CUfunction* out, CUmodule m, const char* name) {
  if (CUresult e = enter_context_call()) return e;
  if (!out || !name) return cu::kInvalidValue;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.modules, m)) return cu::kInvalidHandle;
  }
  KeepRuntimeLastError keep;
  return module_function(m, name, out);
}

CU_API CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule m, const char* name) {
  if (CUresult e = enter_context_call()) return e;
  if (!name || (!dptr && !bytes)) return cu::kInvalidValue;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.modules, m)) return cu::kInvalidHandle;
  }
  cudaError_t e;
  Remote* r = Remote::get(&e);
  if (!r) return to_cu_result(e);
  const std::string n(name);
  api::GlobalReply g{};
  {
    auto lock = r->lock();
    const int saved = Remote::thread_device();
    Remote::thread_device() = m->device;
    auto res = r->call<api::Call::ModuleGetGlobal>({m->host, static_cast<uint32_t>(n.size()), 0},
                                                  std::as_bytes(std::span(n)));
    Remote::thread_device() = saved;
    if (res.status != 0) return to_cu_result(static_cast<cudaError_t>(res.status));
    g = res.reply;
  }
  // Copies may name it (as the runtime's symbols: host_objects.cc).
  vgpu_db::AllocationMap::process().add({g.ptr, g.bytes, vgpu_db::Allocation::kModuleGlobal, m->device, 0});
  if (dptr) *dptr = g.ptr;
  if (bytes) *bytes = g.bytes;
  return cu::kSuccess;
}

// ------------------------------------------------------------------ libraries and kernels

CU_API CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned int,
                                  CUlibraryOption*, void**, unsigned int) {
  if (CUresult e = enter_driver_call()) return e;
  if (!library || !code) return cu::kInvalidValue;
  const void* start = image_start(code);
  const size_t n = start ? image_size(start) : 0;
  if (n == 0) return cu::kInvalidImage;
  auto lib = std::make_unique<CUlib_st>();
  const auto* b = static_cast<const std::byte*>(start);
  lib->image.assign(b, b + n);
  auto& o = objects();
  std::lock_guard l(o.mu);
  o.libraries.insert(lib.get());
  *library = lib.get();
  o.all_libraries.push_back(std::move(lib));
  return cu::kSuccess;
}

// The file's bytes as cuLibraryLoadData's image.
CU_API CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jo, void** jv,
                                      unsigned int jn, CUlibraryOption* lo, void** lv, unsigned int ln) {
  if (CUresult e = enter_driver_call()) return e;
  if (!library || !fileName) return cu::kInvalidValue;
  std::ifstream in(fileName, std::ios::binary);
  if (!in) return cu::kFileNotFound;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return cu::kInvalidImage;
  bytes.resize(bytes.size() + 64, 0);  // an image read to its own end (PTX text: to a NUL)
  return cuLibraryLoadData(library, bytes.data(), jo, jv, jn, lo, lv, ln);
}

CU_API CUresult cuLibraryUnload(CUlibrary library) {
  if (CUresult e = enter_driver_call()) return e;
  std::lock_guard managed(library_managed_mu());
  std::vector<uint64_t> hosts;  // its module on each device it was used on
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.libraries, library)) return cu::kInvalidHandle;
    o.libraries.erase(library);
    for (auto& [name, k] : library->kernels) o.kernels.erase(k.get());
    for (auto& [device, m] : library->modules) {
      o.modules.erase(m);
      for (auto& [name, f] : m->functions) o.functions.erase(f.get());
      hosts.push_back(m->host);
    }
  }
  CUresult first = cu::kSuccess;
  for (uint64_t h : hosts)
    if (CUresult e = unload_on_host(h); e != cu::kSuccess && first == cu::kSuccess) first = e;
  // The managed variables went with the host's modules: their shadows go back to the heap.
  // A module the host kept (the program holds graphs) still writes its shadows: they stay.
  if (first == cu::kSuccess && !library->managed.empty()) {
    cudaError_t e;
    if (Remote* r = Remote::get(&e)) {
      auto lock = r->lock();
      for (auto& [name, v] : library->managed) r->slot().heap().free(v.shadow.offset);
    }
    library->managed.clear();
  }
  return first;
}

CU_API CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (CUresult e = enter_driver_call()) return e;
  if (!kernel || !name) return cu::kInvalidValue;
  auto& o = objects();
  std::lock_guard l(o.mu);
  if (!live(o.libraries, library)) return cu::kInvalidHandle;
  // Natively the name is checked against the library's code here; the host tells at the
  // first use on a device (CUDA_ERROR_NOT_FOUND then).
  auto& k = library->kernels[name];
  if (!k) {
    k = std::make_unique<CUkern_st>();
    k->library = library;
    k->name = name;
    o.kernels.insert(k.get());
  }
  *kernel = k.get();
  return cu::kSuccess;
}

CU_API CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
  if (CUresult e = enter_context_call()) return e;
  if (!module) return cu::kInvalidValue;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.libraries, library)) return cu::kInvalidHandle;
  }
  KeepRuntimeLastError keep;
  return library_module(*library, module);
}

// The library's module on the current context's device (loaded there at first use), then
// as cuModuleGetGlobal: NVIDIA's runtime finds its __device__ variables this way.
CU_API CUresult cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library, const char* name) {
  CUmodule m = nullptr;
  if (CUresult e = cuLibraryGetModule(&m, library)) return e;
  return cuModuleGetGlobal_v2(dptr, bytes, m, name);
}

// The library's __managed__ variable `name`: its shadow in the shared heap, the same each
// time, made and bound on the current context's device at the first call (the variable's
// initial value in it). A name that is no managed variable of the library (a __device__ one
// too) is CUDA_ERROR_NOT_FOUND, as natively.
CU_API CUresult cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes, CUlibrary library, const char* name) {
  if (CUresult e = enter_context_call()) return e;
  if (!name || (!dptr && !bytes)) return cu::kInvalidValue;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    // A library unloaded (or never loaded): not found, as NVIDIA's answers (seen on the H100).
    if (!live(o.libraries, library)) return cu::kNotFound;
  }
  KeepRuntimeLastError keep;
  std::lock_guard managed(library_managed_mu());
  CUmod_st* m = nullptr;
  if (CUresult e = library_module(*library, &m)) return e;  // binds the known ones on this device
  auto answer = [&](const vmrpc::HeapBlock& shadow) {
    if (dptr) *dptr = reinterpret_cast<CUdeviceptr>(shadow.data);
    if (bytes) *bytes = shadow.bytes;
    return cu::kSuccess;
  };
  const std::string n(name);
  if (auto it = library->managed.find(n); it != library->managed.end()) return answer(it->second.shadow);
  size_t size = 0;  // the host's answer for any global of the module; the bind checks it is managed
  if (CUresult e = cuModuleGetGlobal_v2(nullptr, &size, m, name)) return e;
  if (size == 0) return cu::kNotFound;
  cudaError_t re;
  Remote* r = Remote::get(&re);
  if (!r) return to_cu_result(re);
  std::optional<vmrpc::HeapBlock> shadow;
  {
    auto lock = r->lock();
    shadow = r->slot().heap().allocate(size);
  }
  if (!shadow) {
    VMCUDA_LOG(kWarn, "managed", "a library's __managed__ %s (%zu bytes): the shared heap is full; give the VM a "
                                 "larger region (vmcuda-stub --region-bytes)", name, size);
    return cu::kOutOfMemory;
  }
  bool bound = false;
  const CUresult e = bind_library_managed(*m, n, *shadow, /*keep=*/false, &bound);
  if (!bound) {
    auto lock = r->lock();
    r->slot().heap().free(shadow->offset);
    return e;
  }
  library->managed[n] = {*shadow, {m->device}};
  if (e != cu::kSuccess) return e;  // an earlier queued call's error; the variable is bound
  return answer(*shadow);
}

namespace {
// The names of the kernels of `library` (its module on the current context's device, loaded
// there now if it was not: the host's driver lists them).
CUresult library_kernel_names(CUlibrary library, std::vector<std::string>* names) {
  if (CUresult e = enter_context_call()) return e;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.libraries, library)) return cu::kInvalidHandle;
  }
  KeepRuntimeLastError keep;
  CUmod_st* m = nullptr;
  if (CUresult e = library_module(*library, &m)) return e;
  cudaError_t re;
  Remote* r = Remote::get(&re);
  if (!r) return to_cu_result(re);
  auto lock = r->lock();
  uint32_t room = 4096;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int saved = Remote::thread_device();
    Remote::thread_device() = m->device;
    auto res = r->call<api::Call::ModuleKernelNames>({m->host}, {}, room);
    Remote::thread_device() = saved;
    if (res.status != 0) return to_cu_result(static_cast<cudaError_t>(res.status));
    if (res.reply.bytes > room) {  // more names than the room asked for: once more with enough
      if (res.reply.bytes > api::kMaxKernelNameBytes) return cu::kUnknown;
      room = res.reply.bytes;
      continue;
    }
    if (res.extra.size() != res.reply.bytes) return cu::kUnknown;  // a host bug
    names->clear();
    const char* p = reinterpret_cast<const char*>(res.extra.data());
    const char* end = p + res.extra.size();
    while (p < end) {
      const char* nul = static_cast<const char*>(std::memchr(p, '\0', end - p));
      if (!nul) return cu::kUnknown;
      names->emplace_back(p, nul);
      p = nul + 1;
    }
    if (names->size() != res.reply.count) return cu::kUnknown;
    return cu::kSuccess;
  }
  return cu::kUnknown;
}
}  // namespace

CU_API CUresult cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  if (CUresult e = enter_driver_call()) return e;
  if (!count) return cu::kInvalidValue;
  std::vector<std::string> names;
  if (CUresult e = library_kernel_names(lib, &names)) return e;
  *count = static_cast<unsigned>(names.size());
  return cu::kSuccess;
}

// At most numKernels of the library's kernels, as cuLibraryGetKernel makes them (the same
// handle for a name each time).
CU_API CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels, CUlibrary lib) {
  if (CUresult e = enter_driver_call()) return e;
  if (!kernels) return cu::kInvalidValue;
  std::vector<std::string> names;
  if (CUresult e = library_kernel_names(lib, &names)) return e;
  const size_t n = std::min<size_t>(names.size(), numKernels);
  for (size_t i = 0; i < n; ++i)
    if (CUresult e = cuLibraryGetKernel(&kernels[i], lib, names[i].c_str())) return e;
  return cu::kSuccess;
}

CU_API CUresult cuKernelGetFunction(CUfunction* out, CUkernel kernel) {
  if (CUresult e = enter_context_call()) return e;
  if (!out) return cu::kInvalidValue;
  {
    auto& o = objects();
    std::lock_guard l(o.mu);
    if (!live(o.kernels, kernel)) return cu::kInvalidHandle;
  }
  KeepRuntimeLastError keep;
  return kernel_function(kernel, out);
}

CU_API CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  if (CUresult e = enter_driver_call()) return e;
  if (!name) return cu::kInvalidValue;
  auto& o = objects();
  std::lock_guard l(o.mu);
  if (!live(o.kernels, kernel)) return cu::kInvalidHandle;
  *name = kernel->name.c_str();
  return cu::kSuccess;
}

// ------------------------------------------------------------------ functions and launches

CU_API CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction f) {
  if (CUresult e = enter_context_call()) return e;
  if (!value) return cu::kInvalidValue;
  if (attribute < 0 || attribute >= static_cast<int>(api::kFuncAttributeSlots)) return cu::kInvalidValue;
  KeepRuntimeLastError keep;
  HostKernel* k = nullptr;
  if (CUresult e = resolve(f, &k)) return e;
  cudaError_t re;
  Remote* r = Remote::get(&re);
  if (!r) return to_cu_result(re);
  auto lock = r->lock();
  if (CUresult e = function_attributes(*r, *k)) return e;
  *value = k->attributes->values[attribute];
  return cu::kSuccess;
}

CU_API CUresult cuFuncSetAttribute(CUfunction f, int attribute, int value) {
  return with_kernel(f, [&](Remote& r, HostKernel& k) { return set_kernel_attribute(r, k, attribute, value); });
}

// CUfunc_cache == cudaFuncCache (0-3).
CU_API CUresult cuFuncSetCacheConfig(CUfunction f, int config) {
  return with_kernel(f, [&](Remote& r, HostKernel& k) {
    if (static_cast<unsigned>(config) > 3) return cudaErrorInvalidValue;
    return r.enqueue<api::Call::FuncSetCacheConfig>({k.handle, config, 0});
  });
}

CU_API CUresult cuKernelGetAttribute(int* value, int attribute, CUkernel kernel, CUdevice dev) {
  CUfunction f = nullptr;
  if (CUresult e = kernel_on(kernel, dev, &f)) return e;
  return cuFuncGetAttribute(value, attribute, f);
}
CU_API CUresult cuKernelSetAttribute(int attribute, int value, CUkernel kernel, CUdevice dev) {
  CUfunction f = nullptr;
  if (CUresult e = kernel_on(kernel, dev, &f)) return e;
  return cuFuncSetAttribute(f, attribute, value);
}
CU_API CUresult cuKernelSetCacheConfig(CUkernel kernel, int config, CUdevice dev) {
  CUfunction f = nullptr;
  if (CUresult e = kernel_on(kernel, dev, &f)) return e;
  return cuFuncSetCacheConfig(f, config);
}

CU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction f, int block_size,
                                                                     size_t shared, unsigned flags) {
  if (!blocks) return cu::kInvalidValue;
  return with_kernel(f, [&](Remote& r, HostKernel& k) {
    return kernel_occupancy(r, k, block_size, shared, flags, blocks);
  });
}
CU_API CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t* bytes, CUfunction f, int blocks, int block_size) {
  if (!bytes) return cu::kInvalidValue;
  return with_kernel(f, [&](Remote& r, HostKernel& k) { return kernel_available_shared(r, k, blocks, block_size, bytes); });
}
// CUlaunchConfig as cuda.h has it: cudaLaunchConfig_t's fields but a 4-byte shared size
// (the 4 bytes after it are padding), so it is copied field by field; CUlaunchAttribute is
// cudaLaunchAttribute (same ids, same 72 bytes).
struct DriverLaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  cudaLaunchAttribute* attrs;
  unsigned attr_count;
};
static_assert(sizeof(DriverLaunchConfig) == 56 && offsetof(DriverLaunchConfig, stream) == 32 &&
              offsetof(DriverLaunchConfig, attrs) == 40 && offsetof(DriverLaunchConfig, attr_count) == 48);
static_assert(sizeof(cudaLaunchAttribute) == 72);

namespace {
CUresult driver_attributes(const DriverLaunchConfig* c, std::vector<api::LaunchAttribute>* out) {
  if (!c) return cu::kInvalidValue;
  cudaLaunchConfig_t rc{};
  rc.attrs = c->attrs;
  rc.numAttrs = c->attr_count;
  bool cooperative = false;
  return to_cu_result(translate_attributes(rc, out, &cooperative));
}
CUresult launch_ex(const DriverLaunchConfig* c, CUfunction f, void** params, void** extra, bool per_thread) {
  thread_local std::vector<api::LaunchAttribute> attrs;
  if (CUresult e = driver_attributes(c, &attrs)) return e;
  return launch(f, dim3{c->grid_x, c->grid_y, c->grid_z}, dim3{c->block_x, c->block_y, c->block_z}, c->shared_bytes,
                c->stream, params, extra, per_thread, true, attrs);
}
}  // namespace

CU_API CUresult cuLaunchKernelEx(const DriverLaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launch_ex(config, f, params, extra, false);
}
CU_API CUresult cuLaunchKernelEx_ptsz(const DriverLaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launch_ex(config, f, params, extra, true);
}

CU_API CUresult cuOccupancyMaxActiveClusters(int* clusters, CUfunction f, const DriverLaunchConfig* config) {
  if (!clusters) return cu::kInvalidValue;
  std::vector<api::LaunchAttribute> attrs;
  if (CUresult e = driver_attributes(config, &attrs)) return e;
  return with_kernel(f, [&](Remote& r, HostKernel& k) {
    return kernel_max_clusters(r, k, dim3{config->grid_x, config->grid_y, config->grid_z},
                               dim3{config->block_x, config->block_y, config->block_z}, config->shared_bytes, attrs,
                               clusters);
  });
}

CU_API CUresult cuOccupancyMaxPotentialClusterSize(int* size, CUfunction f, const DriverLaunchConfig* config) {
  if (!size) return cu::kInvalidValue;
  std::vector<api::LaunchAttribute> attrs;
  if (CUresult e = driver_attributes(config, &attrs)) return e;
  return with_kernel(f, [&](Remote& r, HostKernel& k) {
    return kernel_max_cluster_size(r, k, dim3{config->grid_x, config->grid_y, config->grid_z},
                                   dim3{config->block_x, config->block_y, config->block_z}, config->shared_bytes,
                                   attrs, size);
  });
}

CU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction f, int block_size, size_t shared) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size, shared, 0);
}

CU_API CUresult cuFuncGetName(const char** name, CUfunction f) {
  if (CUresult e = enter_driver_call()) return e;
  if (!name) return cu::kInvalidValue;
  auto& o = objects();
  std::lock_guard l(o.mu);
  if (!live(o.functions, f)) return cu::kInvalidHandle;
  *name = f->name.c_str();
  return cu::kSuccess;
}

CU_API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  if (CUresult e = enter_context_call()) return e;
  KeepRuntimeLastError keep;
  HostKernel* k = nullptr;
  if (CUresult e = resolve(f, &k)) return e;
  if (index >= k->params.size()) return cu::kInvalidValue;  // natively too: how callers count them
  if (offset) *offset = k->params[index].offset;
  if (size) *size = k->params[index].size;
  return cu::kSuccess;
}

CU_API CUresult cuFuncGetModule(CUmodule* module, CUfunction f) {
  if (CUresult e = enter_driver_call()) return e;
  if (!module) return cu::kInvalidValue;
  auto& o = objects();
  std::lock_guard l(o.mu);
  if (!live(o.functions, f)) return cu::kInvalidHandle;
  *module = f->module;
  return cu::kSuccess;
}

CU_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launch(f, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, stream, params, extra, false);
}
CU_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launch(f, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, stream, params, extra, true);
}
