#include "vgpu_db/module_registry.h"

#include <new>

namespace vgpu_db {

const char* describe(RegisterStatus status) {
  switch (status) {
    case RegisterStatus::kOk:
      return "ok";
    case RegisterStatus::kUnknownModule:
      return "unknown module handle";
    case RegisterStatus::kDuplicate:
      return "address registered already";
    case RegisterStatus::kBadArgument:
      return "null address or name";
    case RegisterStatus::kNoMemory:
      return "out of memory";
  }
  return "?";
}

ModuleRegistry& ModuleRegistry::process() {
  static ModuleRegistry* registry = new ModuleRegistry;  // never destroyed, see the header
  return *registry;
}

Module* ModuleRegistry::add_module(const void* wrapper) noexcept {
  try {
    auto module = std::make_unique<Module>();
    module->wrapper = wrapper;
    module->valid = parse_fatbin_wrapper(wrapper, &module->image, &module->problem);
    std::unique_lock lock(mutex_);
    module->id = next_id_++;
    Module* m = module.get();
    modules_.emplace(m, std::move(module));
    return m;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

Module* ModuleRegistry::find_module(const void* handle) const noexcept {
  std::shared_lock lock(mutex_);
  auto it = modules_.find(handle);
  return it == modules_.end() ? nullptr : it->second.get();
}

RegisterStatus ModuleRegistry::add_function(Module* module, const void* host_fun, const char* name,
                                            int thread_limit) noexcept {
  if (host_fun == nullptr || name == nullptr) return RegisterStatus::kBadArgument;
  try {
    auto f = std::make_unique<Function>();
    f->host_fun = host_fun;
    f->name = name;
    f->thread_limit = thread_limit;
    f->module = module;
    std::unique_lock lock(mutex_);
    if (!modules_.contains(module)) return RegisterStatus::kUnknownModule;
    if (functions_by_host_.contains(host_fun)) return RegisterStatus::kDuplicate;
    module->functions.reserve(module->functions.size() + 1);  // so push_back cannot throw
    auto by_host = functions_by_host_.emplace(host_fun, f.get()).first;
    try {
      kernels_.insert(f.get());
    } catch (...) {
      functions_by_host_.erase(by_host);
      throw;
    }
    module->functions.push_back(std::move(f));
    return RegisterStatus::kOk;
  } catch (const std::bad_alloc&) {
    return RegisterStatus::kNoMemory;
  }
}

RegisterStatus ModuleRegistry::add_variable(Module* module, Variable::Kind kind, const void* host_address,
                                            const char* name, size_t size, int ext, int global) noexcept {
  if (host_address == nullptr || name == nullptr) return RegisterStatus::kBadArgument;
  try {
    auto v = std::make_unique<Variable>();
    v->kind = kind;
    v->host_address = host_address;
    v->name = name;
    v->size = size;
    v->ext = ext;
    v->global = global;
    v->module = module;
    std::unique_lock lock(mutex_);
    if (!modules_.contains(module)) return RegisterStatus::kUnknownModule;
    if (variables_by_host_.contains(host_address)) return RegisterStatus::kDuplicate;
    module->variables.reserve(module->variables.size() + 1);  // so push_back cannot throw
    variables_by_host_.emplace(host_address, v.get());
    module->variables.push_back(std::move(v));
    return RegisterStatus::kOk;
  } catch (const std::bad_alloc&) {
    return RegisterStatus::kNoMemory;
  }
}

RegisterStatus ModuleRegistry::end_registration(Module* module) noexcept {
  std::unique_lock lock(mutex_);
  if (!modules_.contains(module)) return RegisterStatus::kUnknownModule;
  module->registration_complete = true;
  return RegisterStatus::kOk;
}

RegisterStatus ModuleRegistry::remove_module(Module* module) noexcept {
  std::unique_ptr<Module> doomed;  // destroyed after the lock is released
  {
    std::unique_lock lock(mutex_);
    auto it = modules_.find(module);
    if (it == modules_.end()) return RegisterStatus::kUnknownModule;
    for (const auto& f : module->functions) {
      auto by_host = functions_by_host_.find(f->host_fun);
      if (by_host != functions_by_host_.end() && by_host->second == f.get()) functions_by_host_.erase(by_host);
      kernels_.erase(f.get());
    }
    for (const auto& v : module->variables) {
      auto by_host = variables_by_host_.find(v->host_address);
      if (by_host != variables_by_host_.end() && by_host->second == v.get()) variables_by_host_.erase(by_host);
    }
    doomed = std::move(it->second);
    modules_.erase(it);
  }
  return RegisterStatus::kOk;
}

const Function* ModuleRegistry::find_function(const void* host_fun) const noexcept {
  std::shared_lock lock(mutex_);
  auto it = functions_by_host_.find(host_fun);
  return it == functions_by_host_.end() ? nullptr : it->second;
}

const Function* ModuleRegistry::function_from_kernel(const void* kernel) const noexcept {
  std::shared_lock lock(mutex_);
  return kernels_.contains(kernel) ? static_cast<const Function*>(kernel) : nullptr;
}

const Variable* ModuleRegistry::find_variable(const void* host_address) const noexcept {
  std::shared_lock lock(mutex_);
  auto it = variables_by_host_.find(host_address);
  return it == variables_by_host_.end() ? nullptr : it->second;
}

size_t ModuleRegistry::module_count() const noexcept {
  std::shared_lock lock(mutex_);
  return modules_.size();
}

}  // namespace vgpu_db
