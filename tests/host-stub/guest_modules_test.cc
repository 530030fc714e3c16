// guest-lib's cuModuleUnload and cuLibraryUnload reach the host (ModuleUnload, calls.def
// 0x1302) and give the VM's quota back what the module was charged: the built libcuda.so.1,
// loaded with dlopen, against vmcuda-stub in this process on the test executor.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "host-stub/guest_libcuda.h"
#include "host-stub/stub_fixture.h"
#include "image_cache.h"
#include "vm_ledger.h"

namespace vmcuda::host::test {
namespace {

using Result = int;
using Handle = void*;


TEST(GuestModules, UnloadGivesTheVmsQuotaBack) {
  ASSERT_NE(libcuda(), nullptr) << dlerror();
  StubLimits limits;
  limits.ledger = VmLedger::create(1ull << 30);
  // The image cache (image_cache.h): the library's module below is the same image, so it
  // loads from the host's copy, charged the same.
  char dir[] = "/tmp/vmcuda-guest-modules-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  std::string why;
  limits.image_cache = ImageCache::open({std::string(dir) + "/cache", "vm", 1 << 20, 1 << 20}, &why);
  ASSERT_TRUE(limits.image_cache) << why;
  Stub stub(limits);
  setenv("VMCUDA_SOCKET", stub.endpoint.socket_path().c_str(), 1);

  ASSERT_EQ(fn<Result (*)(unsigned)>("cuInit")(0), 0);
  Handle primary = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, int)>("cuDevicePrimaryCtxRetain")(&primary, 0), 0);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuCtxSetCurrent")(primary), 0);
  const uint64_t base = limits.ledger->used();  // the context (nothing on the executor)

  // A module: its image (with the stub's padding) and the variable it declares.
  const std::string image = std::string(tst::kFakeModuleMagic) + "\n.global .align 4 .b8 " + tst::kTestGlobal + "[256];\n";
  const uint64_t cost = image.size() + 1 /* its NUL: PTX text */ + 64 + tst::kTestGlobalBytes;
  const uint64_t modules = tst::fake_live_modules();
  Handle mod = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, const void*)>("cuModuleLoadData")(&mod, image.c_str()), 0);
  EXPECT_EQ(limits.ledger->used(), base + cost);
  auto unload = fn<Result (*)(Handle)>("cuModuleUnload");
  ASSERT_EQ(unload(mod), 0);
  EXPECT_EQ(limits.ledger->used(), base);
  EXPECT_EQ(tst::fake_live_modules(), modules);
  EXPECT_EQ(unload(mod), 400);  // CUDA_ERROR_INVALID_HANDLE

  // A library: loaded on the host at its first use on a device, unloaded with it; its
  // module is not the program's to unload (CUDA_ERROR_NOT_PERMITTED, as natively).
  Handle lib = nullptr, libmod = nullptr;
  using LoadLibrary = Result (*)(Handle*, const void*, void*, void**, unsigned, void*, void**, unsigned);
  ASSERT_EQ(fn<LoadLibrary>("cuLibraryLoadData")(&lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), 0);
  EXPECT_EQ(limits.ledger->used(), base);
  ASSERT_EQ(fn<Result (*)(Handle*, Handle)>("cuLibraryGetModule")(&libmod, lib), 0);
  EXPECT_EQ(limits.ledger->used(), base + cost);
  // The guest named it by its hash and the host had it: its bytes crossed once in all.
  EXPECT_EQ(limits.image_cache->stats().stored, 1u);
  EXPECT_EQ(limits.image_cache->stats().hits, 1u);
  EXPECT_EQ(limits.image_cache->stats().misses, 1u);
  EXPECT_EQ(unload(libmod), 800);
  EXPECT_EQ(limits.ledger->used(), base + cost);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuLibraryUnload")(lib), 0);
  EXPECT_EQ(limits.ledger->used(), base);
  EXPECT_EQ(tst::fake_live_modules(), modules);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vmcuda::host::test
