// module area: what nvcc's generated host code calls at start and exit
// (docs/cuda-runtime-internals.md §1): __cudaRegisterFatBinary and the registrations of a
// module's kernels and variables, recorded in the process's vgpu_db::ModuleRegistry;
// __cudaGetKernel; __cudaInitModule. All of it runs before main() or in atexit handlers, so
// none of it may fail loudly: anything unexpected is logged and the application goes on.
#include <atomic>
#include <cinttypes>
#include <string>

#include "host_objects.h"
#include "log.h"
#include "managed.h"
#include "runtime_state.h"
#include "vgpu_db/module_registry.h"
#include "vmcuda/cudart_api.h"

namespace {

using vgpu_db::Module;
using vgpu_db::RegisterStatus;
using vgpu_db::Variable;

vgpu_db::ModuleRegistry& registry() { return vgpu_db::ModuleRegistry::process(); }

// The module behind a handle from __cudaRegisterFatBinary, or nullptr (logged).
Module* module_of(void** handle, const char* call) {
  Module* m = registry().find_module(handle);
  if (m == nullptr)
    VMCUDA_LOG(kWarn, "module", "%s: %p is not a handle from __cudaRegisterFatBinary; ignored", call,
               static_cast<void*>(handle));
  return m;
}

const char* or_else(const char* a, const char* b) { return a != nullptr ? a : b != nullptr ? b : "(null)"; }

void log_module(const Module& m) {
  if (!m.valid) {
    VMCUDA_LOG(kWarn, "module", "__cudaRegisterFatBinary(%p): %s; the kernels of module %" PRIu64 " cannot be launched",
               m.wrapper, m.problem.c_str(), m.id);
    return;
  }
  auto check_entries = [&](const vgpu_db::Fatbin& f, const char* what) {
    if (!f.entries_problem.empty())
      VMCUDA_LOG(kWarn, "module", "module %" PRIu64 ": %s: inconsistent entry table (%s); kept as it is", m.id, what,
                 f.entries_problem.c_str());
    for (const auto& e : f.entries)
      if (e.kind != vgpu_db::FatbinEntry::kPtx && e.kind != vgpu_db::FatbinEntry::kElf)
        VMCUDA_LOG(kInfo, "module", "module %" PRIu64 ": %s: unknown entry kind %u at offset %" PRIu64 "; kept", m.id,
                   what, static_cast<unsigned>(e.kind), e.offset);
  };
  check_entries(m.image.fatbin, "fatbin");
  for (const auto& r : m.image.relocatables) check_entries(r, "relocatable fatbin");
  if (!vmcuda::guest::log::enabled(vmcuda::guest::log::kDebug)) return;
  std::string entries;
  for (const auto& e : m.image.fatbin.entries) entries += (entries.empty() ? "" : ", ") + e.describe();
  VMCUDA_LOG(kDebug, "module",
             "module %" PRIu64 ": fatbin wrapper version %d at %p: fatbin %p, %" PRIu64
             " bytes (%s), %zu relocatable fatbins",
             m.id, m.image.wrapper_version, m.wrapper, static_cast<const void*>(m.image.fatbin.data),
             m.image.fatbin.size, entries.c_str(), m.image.relocatables.size());
}

void add_variable(void** handle, const char* call, Variable::Kind kind, const void* host_address, const char* name,
                  size_t size, int ext, int global) {
  Module* m = module_of(handle, call);
  if (m == nullptr) return;
  RegisterStatus s = registry().add_variable(m, kind, host_address, name, size, ext, global);
  static const char* const kinds[] = {"variable", "constant", "managed variable", "host variable"};
  if (s == RegisterStatus::kOk)
    VMCUDA_LOG(kDebug, "module", "module %" PRIu64 ": %s %s, %zu bytes (host %p)", m->id, kinds[kind], name, size,
               host_address);
  else
    VMCUDA_LOG(kWarn, "module", "%s(%s, host %p): %s; ignored", call, or_else(name, nullptr), host_address,
               vgpu_db::describe(s));
}

cudaError_t get_kernel(cudaKernel_t* kernel, const void* host_fun) {
  if (kernel == nullptr) return vmcuda::guest::record(cudaErrorInvalidValue);
  const vgpu_db::Function* f = registry().find_function(host_fun);
  if (f == nullptr) return vmcuda::guest::record(cudaErrorInvalidDeviceFunction);
  // The registry entry is the handle: stable until the module is unregistered, and the
  // launch path resolves it with ModuleRegistry::function_from_kernel.
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<vgpu_db::Function*>(f));
  VMCUDA_LOG(kDebug, "module", "kernel %s (host %p): handle %p", f->name.c_str(), host_fun,
             static_cast<void*>(*kernel));
  return cudaSuccess;
}

}  // namespace

void** __cudaRegisterFatBinary(void* fatCubin) {
  Module* m = registry().add_module(fatCubin);
  if (m == nullptr) {
    VMCUDA_LOG(kWarn, "module", "__cudaRegisterFatBinary(%p): out of memory; its kernels cannot be launched", fatCubin);
    return nullptr;
  }
  log_module(*m);
  return reinterpret_cast<void**>(m);
}

void __cudaRegisterFatBinaryEnd(void** fatCubinHandle) {
  Module* m = module_of(fatCubinHandle, "__cudaRegisterFatBinaryEnd");
  if (m == nullptr) return;
  registry().end_registration(m);
  registry().with_module(m, [](const Module& mod) {
    size_t managed = 0;
    for (const auto& v : mod.variables) managed += v->kind == Variable::kManaged;
    VMCUDA_LOG(kDebug, "module", "module %" PRIu64 ": registered %zu functions, %zu variables (%zu managed)", mod.id,
               mod.functions.size(), mod.variables.size(), managed);
  });
  // Nothing is sent here: the fatbin travels to the host once per device, at the module's
  // first use (a launch, a symbol, a function attribute: host_objects.h), per DESIGN.md.
}

void __cudaUnregisterFatBinary(void** fatCubinHandle) {
  Module* m = module_of(fatCubinHandle, "__cudaUnregisterFatBinary");
  if (m == nullptr) return;
  uint64_t id = m->id;
  // What the host answered about the module goes, so that a module registered later at the
  // same address starts afresh. TODO(remoting): tell the host to unload it too.
  vmcuda::guest::forget_managed(m);
  vmcuda::guest::forget_module(m);
  registry().remove_module(m);
  VMCUDA_LOG(kDebug, "module", "module %" PRIu64 ": unregistered", id);
}

void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun, const char* deviceName,
                            int thread_limit, uint3* tid, uint3* bid, dim3* bDim, dim3* gDim, int* wSize) {
  // tid, bid, bDim, gDim and wSize are always null from nvcc.
  Module* m = module_of(fatCubinHandle, "__cudaRegisterFunction");
  if (m == nullptr) return;
  const char* name = or_else(deviceName, deviceFun);
  RegisterStatus s = registry().add_function(m, hostFun, deviceName ? deviceName : deviceFun, thread_limit);
  if (s == RegisterStatus::kOk)
    VMCUDA_LOG(kDebug, "module", "module %" PRIu64 ": function %s (host stub %p)", m->id, name,
               static_cast<const void*>(hostFun));
  else
    VMCUDA_LOG(kWarn, "module", "__cudaRegisterFunction(%s, host stub %p): %s; ignored", name,
               static_cast<const void*>(hostFun), vgpu_db::describe(s));
}

void __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress, const char* deviceName, int ext,
                       size_t size, int constant, int global) {
  // deviceAddress is the variable's name too (nvcc passes the same string).
  add_variable(fatCubinHandle, "__cudaRegisterVar", constant ? Variable::kConstant : Variable::kDevice, hostVar,
               deviceName ? deviceName : deviceAddress, size, ext, global);
}

void __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress, char* deviceAddress,
                              const char* deviceName, int ext, size_t size, int constant, int global) {
  add_variable(fatCubinHandle, "__cudaRegisterManagedVar", Variable::kManaged, hostVarPtrAddress,
               deviceName ? deviceName : deviceAddress, size, ext, global);
}

void __cudaRegisterHostVar(void** fatCubinHandle, const char* deviceName, char* hostVar, size_t size) {
  add_variable(fatCubinHandle, "__cudaRegisterHostVar", Variable::kHost, hostVar, deviceName, size, 0, 0);
}

void __cudaRegisterUnifiedTable(void** fatCubinHandle, void* table1, void* table2, void* table3, void* table4) {
  // Undocumented, and ordinary nvcc output never calls it.
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true))
    VMCUDA_LOG(kWarn, "module", "__cudaRegisterUnifiedTable is not supported yet; the table is ignored");
}

void* __cudaGetProcAddress(void) { return nullptr; }

// nvcc's host code calls this before each host access to a __managed__ variable until it
// returns nonzero; NVIDIA's returns 1 once the module is loaded and every managed
// variable's slot points at its storage, 0 when that fails (the slot stays NULL and the
// access that follows crashes, as it does with NVIDIA's library and no driver).
char __cudaInitModule(void** fatCubinHandle) {
  uint64_t id = 0;
  size_t unfilled = 0;
  std::string names;
  bool known = registry().with_module(fatCubinHandle, [&](const Module& m) {
    id = m.id;
    for (const auto& v : m.variables) {
      if (v->kind != Variable::kManaged || *v->managed_slot() != nullptr) continue;
      ++unfilled;
      names += (names.empty() ? "" : ", ") + v->name;
    }
  });
  if (!known) {
    VMCUDA_LOG(kWarn, "module", "__cudaInitModule: %p is not a handle from __cudaRegisterFatBinary",
               static_cast<void*>(fatCubinHandle));
    return 0;
  }
  if (unfilled == 0) return 1;
  // The module is loaded on the calling thread's device, which binds each managed variable
  // to its shadow in the shared heap and points its slot there (managed.h).
  const Module* m = registry().find_module(fatCubinHandle);
  const cudaError_t e = m ? vmcuda::guest::init_managed(*m) : cudaErrorInvalidResourceHandle;
  if (e == cudaSuccess) return 1;
  VMCUDA_LOG(kWarn, "module", "__cudaInitModule: the __managed__ variables of module %" PRIu64 " (%s): error %d", id,
             names.c_str(), static_cast<int>(e));
  vmcuda::guest::record(e);
  return 0;  // their slots stay NULL: the access that follows crashes, as with NVIDIA's library
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) { return get_kernel(kernel, hostFun); }

cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, const void* entryFuncAddr) {
  return get_kernel(kernelPtr, entryFuncAddr);
}

// The driver function of a kernel: the same registry handle as cudaGetKernel's, which the
// guest libcuda's launch and attribute calls take as a CUfunction (driver_module.cc resolve).
cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr, const void* symbolPtr) {
  if (functionPtr == nullptr) return vmcuda::guest::record(cudaErrorInvalidValue);
  cudaKernel_t k = nullptr;
  if (cudaError_t e = get_kernel(&k, symbolPtr)) return e;
  *functionPtr = reinterpret_cast<cudaFunction_t>(k);
  return cudaSuccess;
}
