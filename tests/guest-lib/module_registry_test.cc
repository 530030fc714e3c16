// vgpu-db's module registry: what __cudaRegister* record, the lookups __cudaGetKernel and
// the launch path use, and removal. Each test uses its own registry.
#include "vgpu_db/module_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "guest-lib/fatbin_builder.h"

namespace {

using vgpu_db::Function;
using vgpu_db::Module;
using vgpu_db::ModuleRegistry;
using vgpu_db::RegisterStatus;
using vgpu_db::Variable;

// Stand-ins for host stubs and host shadows: only their addresses matter.
char host_fun_a, host_fun_b, host_fun_c;
int dvar[4];
float cvar[16];
int* managed_slot;

TEST(ModuleRegistry, RecordsAModuleItsKernelsAndVariables) {
  ModuleRegistry r;
  auto bin = vmcuda_test::typical_fatbin();
  auto w = vmcuda_test::wrap(bin);
  Module* m = r.add_module(&w);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->valid) << m->problem;
  EXPECT_EQ(m->id, 1u);
  EXPECT_EQ(m->wrapper, &w);
  EXPECT_EQ(m->image.fatbin.size, 16u + 0x40 + 256 + 0x50 + 64);
  EXPECT_EQ(r.find_module(m), m);
  EXPECT_EQ(r.module_count(), 1u);

  EXPECT_EQ(r.add_function(m, &host_fun_a, "_Z3addPif1Scx", -1), RegisterStatus::kOk);
  EXPECT_EQ(r.add_function(m, &host_fun_b, "_Z2tkIiEvPT_S0_", -1), RegisterStatus::kOk);
  EXPECT_EQ(r.add_variable(m, Variable::kDevice, dvar, "dvar", sizeof dvar, 0, 0), RegisterStatus::kOk);
  EXPECT_EQ(r.add_variable(m, Variable::kConstant, cvar, "cvar", sizeof cvar, 0, 0), RegisterStatus::kOk);
  EXPECT_EQ(r.add_variable(m, Variable::kManaged, &managed_slot, "mvar", 4, 0, 0), RegisterStatus::kOk);
  EXPECT_FALSE(m->registration_complete);
  EXPECT_EQ(r.end_registration(m), RegisterStatus::kOk);
  EXPECT_TRUE(m->registration_complete);

  const Function* a = r.find_function(&host_fun_a);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "_Z3addPif1Scx");
  EXPECT_EQ(a->module, m);
  EXPECT_EQ(a->thread_limit, -1);
  EXPECT_EQ(r.find_function(&host_fun_c), nullptr);
  // The entry's address is the kernel handle.
  EXPECT_EQ(r.function_from_kernel(a), a);
  EXPECT_EQ(r.function_from_kernel(&host_fun_a), nullptr);

  const Variable* c = r.find_variable(cvar);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->kind, Variable::kConstant);
  EXPECT_EQ(c->size, 64u);
  EXPECT_EQ(c->managed_slot(), nullptr);
  const Variable* mv = r.find_variable(&managed_slot);
  ASSERT_NE(mv, nullptr);
  EXPECT_EQ(mv->managed_slot(), reinterpret_cast<void**>(&managed_slot));

  bool seen = r.with_module(m, [](const Module& mod) {
    EXPECT_EQ(mod.functions.size(), 2u);
    EXPECT_EQ(mod.variables.size(), 3u);
  });
  EXPECT_TRUE(seen);
}

TEST(ModuleRegistry, BadWrapperStillGetsAModule) {
  ModuleRegistry r;
  auto bin = vmcuda_test::typical_fatbin();
  auto w = vmcuda_test::wrap(bin);
  w.magic = 0x12345678;
  Module* m = r.add_module(&w);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->valid);
  EXPECT_NE(m->problem.find("0x12345678"), std::string::npos) << m->problem;
  EXPECT_EQ(r.add_function(m, &host_fun_a, "k", -1), RegisterStatus::kOk);

  Module* n = r.add_module(nullptr);
  ASSERT_NE(n, nullptr);
  EXPECT_FALSE(n->valid);
  EXPECT_EQ(n->id, m->id + 1);
}

TEST(ModuleRegistry, RejectsUnknownHandlesDuplicatesAndNulls) {
  ModuleRegistry r;
  auto bin = vmcuda_test::typical_fatbin();
  auto w = vmcuda_test::wrap(bin);
  Module* m = r.add_module(&w);
  Module stranger;

  EXPECT_EQ(r.find_module(&stranger), nullptr);
  EXPECT_EQ(r.find_module(nullptr), nullptr);
  EXPECT_EQ(r.add_function(&stranger, &host_fun_a, "k", -1), RegisterStatus::kUnknownModule);
  EXPECT_EQ(r.add_variable(&stranger, Variable::kDevice, dvar, "dvar", 16, 0, 0), RegisterStatus::kUnknownModule);
  EXPECT_EQ(r.end_registration(&stranger), RegisterStatus::kUnknownModule);
  EXPECT_EQ(r.remove_module(&stranger), RegisterStatus::kUnknownModule);
  EXPECT_FALSE(r.with_module(&stranger, [](const Module&) { ADD_FAILURE(); }));

  EXPECT_EQ(r.add_function(m, nullptr, "k", -1), RegisterStatus::kBadArgument);
  EXPECT_EQ(r.add_function(m, &host_fun_a, nullptr, -1), RegisterStatus::kBadArgument);
  EXPECT_EQ(r.add_variable(m, Variable::kDevice, nullptr, "v", 4, 0, 0), RegisterStatus::kBadArgument);

  // The first registration of a host address stays.
  EXPECT_EQ(r.add_function(m, &host_fun_a, "first", -1), RegisterStatus::kOk);
  EXPECT_EQ(r.add_function(m, &host_fun_a, "second", -1), RegisterStatus::kDuplicate);
  EXPECT_EQ(r.find_function(&host_fun_a)->name, "first");
  EXPECT_EQ(r.add_variable(m, Variable::kDevice, dvar, "dvar", 16, 0, 0), RegisterStatus::kOk);
  EXPECT_EQ(r.add_variable(m, Variable::kDevice, dvar, "again", 16, 0, 0), RegisterStatus::kDuplicate);
  r.with_module(m, [](const Module& mod) {
    EXPECT_EQ(mod.functions.size(), 1u);
    EXPECT_EQ(mod.variables.size(), 1u);
  });
}

TEST(ModuleRegistry, RemoveForgetsEverythingOfThatModuleOnly) {
  ModuleRegistry r;
  auto bin = vmcuda_test::typical_fatbin();
  auto w1 = vmcuda_test::wrap(bin);
  auto w2 = vmcuda_test::wrap(bin);
  Module* m1 = r.add_module(&w1);
  Module* m2 = r.add_module(&w2);
  r.add_function(m1, &host_fun_a, "a", -1);
  r.add_variable(m1, Variable::kDevice, dvar, "dvar", 16, 0, 0);
  r.add_function(m2, &host_fun_b, "b", -1);
  const Function* a = r.find_function(&host_fun_a);
  const Function* b = r.find_function(&host_fun_b);

  EXPECT_EQ(r.remove_module(m1), RegisterStatus::kOk);
  EXPECT_EQ(r.find_module(m1), nullptr);
  EXPECT_EQ(r.find_function(&host_fun_a), nullptr);
  EXPECT_EQ(r.function_from_kernel(a), nullptr);
  EXPECT_EQ(r.find_variable(dvar), nullptr);
  EXPECT_EQ(r.remove_module(m1), RegisterStatus::kUnknownModule);

  EXPECT_EQ(r.find_function(&host_fun_b), b);
  EXPECT_EQ(r.function_from_kernel(b), b);
  EXPECT_EQ(r.module_count(), 1u);

  // The addresses can be registered again (a library loaded again after dlclose).
  Module* m3 = r.add_module(&w1);
  EXPECT_EQ(r.add_function(m3, &host_fun_a, "a", -1), RegisterStatus::kOk);
}

TEST(ModuleRegistry, ConcurrentRegistrationAndLookup) {
  // Modules registered from several threads (dlopen in threads) while others look kernels up.
  ModuleRegistry r;
  auto bin = vmcuda_test::typical_fatbin();
  constexpr int kThreads = 4, kModules = 50, kFunctions = 8;
  static char funs[kThreads][kModules][kFunctions];
  std::vector<vmcuda_test::Wrapper> wrappers(kThreads * kModules, vmcuda_test::wrap(bin));
  std::atomic<bool> done{false};
  std::atomic<long> found{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (int t = 0; t < kThreads; ++t)
        if (const Function* f = r.find_function(&funs[t][kModules - 1][0])) found += r.function_from_kernel(f) == f;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int m = 0; m < kModules; ++m) {
        Module* mod = r.add_module(&wrappers[t * kModules + m]);
        for (int f = 0; f < kFunctions; ++f)
          EXPECT_EQ(r.add_function(mod, &funs[t][m][f], "k", -1), RegisterStatus::kOk);
        r.end_registration(mod);
        if (m % 2 == 0) r.remove_module(mod);
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(r.module_count(), static_cast<size_t>(kThreads * kModules / 2));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(r.find_function(&funs[t][0][0]), nullptr);  // module 0 was removed
    EXPECT_NE(r.find_function(&funs[t][1][0]), nullptr);
  }
}

}  // namespace
