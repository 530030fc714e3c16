// The process's modules, as nvcc's generated host code registers them at start-up
// (docs/cuda-runtime-internals.md §1): one module per __cudaRegisterFatBinary, with its
// fatbin, its kernels (host stub address -> mangled name) and its variables
// (__device__, __constant__, __managed__, host). Answers __cudaGetKernel and, later, the
// launch and symbol calls locally; the remoting layer ships a module's fatbin to the host
// once and fills its managed variables' slots.
//
// Threading: registration calls for one module come from one thread at a time (a
// translation unit's constructor, or the -rdc link stub); different modules and all lookups
// may come from any thread. A Module, Function or Variable pointer stays valid until its
// module is removed (__cudaUnregisterFatBinary, at exit or dlclose of its image).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "vgpu_db/fatbin.h"

namespace vgpu_db {

struct Module;

/// A __global__ function. Its address is the cudaKernel_t that __cudaGetKernel hands out.
struct Function {
  const void* host_fun = nullptr;  ///< the host stub: what <<<>>> and cudaLaunchKernel(func, ...) pass
  std::string name;                ///< the mangled device name, for cuModuleGetFunction
  int thread_limit = -1;           ///< as registered (nvcc passes -1)
  Module* module = nullptr;
};

/// A variable a module registered.
struct Variable {
  enum Kind { kDevice, kConstant, kManaged, kHost };
  Kind kind = kDevice;
  /// kDevice, kConstant: the host shadow, which cudaMemcpyToSymbol and friends are given.
  /// kManaged: the slot (a void**) that __cudaInitModule must point at the managed storage.
  /// kHost: the host variable of __cudaRegisterHostVar.
  const void* host_address = nullptr;
  std::string name;  ///< for cuModuleGetGlobal
  size_t size = 0;
  int ext = 0;     ///< extern (as registered)
  int global = 0;  ///< as registered
  Module* module = nullptr;

  void** managed_slot() const {
    return kind == kManaged ? static_cast<void**>(const_cast<void*>(host_address)) : nullptr;
  }
};

/// One __cudaRegisterFatBinary. The handle the application holds is the Module's address.
struct Module {
  uint64_t id = 0;  ///< 1, 2, ... in registration order, for logs
  const void* wrapper = nullptr;
  bool valid = false;                  ///< the wrapper and fatbin(s) parsed
  std::string problem;                 ///< why not, when !valid
  FatbinImage image;                   ///< where the fatbin is (pointer and size, not a copy)
  bool registration_complete = false;  ///< __cudaRegisterFatBinaryEnd seen
  std::vector<std::unique_ptr<Function>> functions;
  std::vector<std::unique_ptr<Variable>> variables;
  // TODO(remoting): the host's handle for this module once it has loaded the fatbin, so that
  // the first launch or symbol access ships the fatbin once and later ones do not.
};

enum class RegisterStatus {
  kOk,
  kUnknownModule,  ///< not a handle that add_module returned, or already removed
  kDuplicate,      ///< the host address is registered already; the first registration stays
  kBadArgument,    ///< a null address or name
  kNoMemory,
};
const char* describe(RegisterStatus status);

class ModuleRegistry {
 public:
  ModuleRegistry() = default;
  ModuleRegistry(const ModuleRegistry&) = delete;
  ModuleRegistry& operator=(const ModuleRegistry&) = delete;

  /// The registry of this process. Never destroyed: the application's atexit handlers
  /// unregister modules after this library's static destructors may have run.
  static ModuleRegistry& process();

  /// Records a module for what __cudaRegisterFatBinary was given (a __fatBinC_Wrapper_t*).
  /// A wrapper that does not parse still gets a module, with valid == false and `problem`
  /// set, so the application's later registration calls are accepted and it fails when it
  /// uses a kernel, not at start. Returns nullptr only when out of memory.
  Module* add_module(const void* wrapper) noexcept;

  /// The module whose handle (address) is `handle`, or nullptr when it is no live module.
  Module* find_module(const void* handle) const noexcept;

  RegisterStatus add_function(Module* module, const void* host_fun, const char* name, int thread_limit) noexcept;
  RegisterStatus add_variable(Module* module, Variable::Kind kind, const void* host_address, const char* name,
                              size_t size, int ext, int global) noexcept;
  RegisterStatus end_registration(Module* module) noexcept;
  /// Forgets the module and everything it registered.
  RegisterStatus remove_module(Module* module) noexcept;

  /// The kernel registered for a host stub address, or nullptr.
  const Function* find_function(const void* host_fun) const noexcept;
  /// The kernel whose cudaKernel_t is `kernel`, or nullptr when that is no live handle.
  const Function* function_from_kernel(const void* kernel) const noexcept;
  /// The variable registered at a host address (for kManaged: its slot), or nullptr.
  const Variable* find_variable(const void* host_address) const noexcept;

  size_t module_count() const noexcept;

  /// Runs f(const Module&) under the registry's shared lock; false when `handle` is no live
  /// module. For reading a module consistently while other threads register others.
  template <typename F>
  bool with_module(const void* handle, F&& f) const {
    std::shared_lock lock(mutex_);
    auto it = modules_.find(handle);
    if (it == modules_.end()) return false;
    f(static_cast<const Module&>(*it->second));
    return true;
  }

 private:
  mutable std::shared_mutex mutex_;
  uint64_t next_id_ = 1;
  std::unordered_map<const void*, std::unique_ptr<Module>> modules_;
  std::unordered_map<const void*, Function*> functions_by_host_;
  std::unordered_set<const void*> kernels_;  // live Function addresses
  std::unordered_map<const void*, Variable*> variables_by_host_;
};

}  // namespace vgpu_db
