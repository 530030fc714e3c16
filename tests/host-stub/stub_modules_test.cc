// Loaded modules and the VM's memory quota (host-stub/src/module.cc load_module_charged): each
// module is charged its image (kept on the host) and its variables at their sizes; a load the
// quota cannot hold is CUDA_ERROR_OUT_OF_MEMORY with nothing loaded; ModuleUnload, the client's
// end and a suspend pay it back (cudaDeviceReset keeps modules); a resume charges it again, and
// one the quota no longer holds fails with the client kept suspended and the VM's other
// programs untouched.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "client_control.h"
#include "host-stub/slot_control.h"
#include "host-stub/stub_fixture.h"
#include "vm_ledger.h"

namespace vmcuda::host::test {
namespace {

namespace cc = client_control;
using namespace std::chrono_literals;

constexpr int32_t kOutOfMemory = 2, kInvalidHandle = 400;
constexpr uint64_t kPad = 64;  // module.cc kImagePad: the padded copy is what the stub keeps

// A fake module image of `bytes` bytes whose text declares two of the executor's variables
// (fake_kernels.cc: d_big 32768 bytes, vmcuda_test_global 256), as PTX would.
std::string image_text(size_t bytes) {
  std::string s = std::string(tst::kFakeModuleMagic) + "\n.global .align 4 .b8 d_big[32768];\n" +
                  ".visible .global .align 4 .b8 " + tst::kTestGlobal + "[256];\n";
  s.resize(bytes, ' ');
  return s;
}
constexpr uint64_t kVariables = 32768 + tst::kTestGlobalBytes;

// ModuleLoad of `text`; the status, and the handle in *handle.
int32_t load(Client& c, const std::string& text, uint64_t* handle = nullptr) {
  auto block = c.slot->heap().allocate(text.size());
  EXPECT_TRUE(block);
  if (!block) return -1;
  std::memcpy(block->data, text.data(), text.size());
  api::HandleReply r{};
  const int32_t st = c.call<api::Call::ModuleLoad>({block->ref()}, &r);
  c.slot->heap().free(block->offset);
  if (handle) *handle = r.handle;
  return st;
}

// Until `f` holds (the stub ends a closed client on its own thread).
template <class F>
bool eventually(F f) {
  for (int i = 0; i < 400; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

TEST(StubModules, TheVmsQuotaPaysForModulesAndGetsThemBack) {
  constexpr size_t kImage = 60000;
  constexpr uint64_t kCost = kImage + kPad + kVariables;
  constexpr uint64_t kQuota = 1ull << 20;
  StubLimits limits;
  limits.ledger = VmLedger::create(kQuota);
  Stub stub(limits);
  Client c(stub);
  const std::string text = image_text(kImage);
  const uint64_t modules_before = tst::fake_live_modules();
  // Load until refused: as many as the quota holds, each charged exactly its cost.
  std::vector<uint64_t> handles;
  int32_t st = 0;
  for (int i = 0; i < 64; ++i) {
    uint64_t h = 0;
    if ((st = load(c, text, &h)) != 0) break;
    handles.push_back(h);
  }
  EXPECT_EQ(st, kOutOfMemory);
  ASSERT_EQ(handles.size(), kQuota / kCost);
  EXPECT_EQ(limits.ledger->used(), handles.size() * kCost);
  EXPECT_EQ(tst::fake_live_modules(), modules_before + handles.size());  // the refused one is not loaded
  // The stub serves on, and the modules work.
  const std::string name = tst::kTestGlobal;
  api::GlobalReply g{};
  EXPECT_EQ(c.call<api::Call::ModuleGetGlobal>({handles[0], uint32_t(name.size()), 0}, &g, std::as_bytes(std::span(name))), 0);
  // Unloaded: paid back, its handle (and what was found in it) gone, and another load fits.
  ASSERT_EQ(c.call<api::Call::ModuleUnload>({handles.back()}), 0);
  EXPECT_EQ(limits.ledger->used(), (handles.size() - 1) * kCost);
  EXPECT_EQ(tst::fake_live_modules(), modules_before + handles.size() - 1);
  EXPECT_EQ(c.call<api::Call::ModuleUnload>({handles.back()}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::ModuleGetGlobal>({handles.back(), uint32_t(name.size()), 0}, &g,
                                               std::as_bytes(std::span(name))),
            kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::ModuleUnload>({0xdead}), kInvalidHandle);
  uint64_t again = 0;
  ASSERT_EQ(load(c, text, &again), 0);
  EXPECT_NE(again, handles.back());  // handles are never reused
  EXPECT_EQ(limits.ledger->used(), handles.size() * kCost);
  // cudaDeviceReset keeps modules (device.cc: the guest's runtime keeps its module handles),
  // and their charge with them; unloading each pays everything back.
  ASSERT_EQ(c.call<api::Call::DeviceReset>({}), 0);
  EXPECT_EQ(limits.ledger->used(), handles.size() * kCost);
  handles.back() = again;
  for (uint64_t h : handles) ASSERT_EQ(c.call<api::Call::ModuleUnload>({h}), 0);
  EXPECT_EQ(limits.ledger->used(), 0u);
  EXPECT_EQ(tst::fake_live_modules(), modules_before);
  // An image that fits while its variables do not: refused, nothing held.
  limits.ledger->set_limit(kImage + kPad + kVariables / 2);
  EXPECT_EQ(load(c, text, nullptr), kOutOfMemory);
  EXPECT_EQ(limits.ledger->used(), 0u);
  EXPECT_EQ(tst::fake_live_modules(), modules_before);
  limits.ledger->set_limit(kQuota);
  // A client that ends without unloading pays everything back.
  ASSERT_EQ(load(c, text, nullptr), 0);
  ASSERT_EQ(load(c, text, nullptr), 0);
  EXPECT_EQ(limits.ledger->used(), 2 * kCost);
  c.slot.reset();
  c.conn.reset();
  EXPECT_TRUE(eventually([&] { return limits.ledger->used() == 0; })) << limits.ledger->used();
  EXPECT_TRUE(eventually([&] { return tst::fake_live_modules() == modules_before; }));
}

TEST(StubModules, TwoClientsOfOneVmShareTheQuota) {
  constexpr size_t kImage = 100000;
  constexpr uint64_t kCost = kImage + kPad + kVariables;
  StubLimits limits;
  limits.ledger = VmLedger::create(3 * kCost);
  Stub stub(limits);
  Client a(stub), b(stub);
  const std::string text = image_text(kImage);
  ASSERT_EQ(load(a, text), 0);
  ASSERT_EQ(load(a, text), 0);
  ASSERT_EQ(load(b, text), 0);
  EXPECT_EQ(load(b, text), kOutOfMemory);  // the VM's, not each client's
  EXPECT_EQ(limits.ledger->used(), 3 * kCost);
}

TEST(StubModules, AModuleStaysWhileTheProgramHoldsAGraph) {
  StubLimits limits;
  limits.ledger = VmLedger::create(1ull << 30);
  Stub stub(limits);
  Client c(stub);
  uint64_t mod = 0;
  ASSERT_EQ(load(c, image_text(4096), &mod), 0);
  const uint64_t charged = limits.ledger->used();
  const uint64_t graph = api::kFirstGuestHandle + 100;
  ASSERT_EQ(c.call<api::Call::GraphCreate>({graph, 0, 0}), 0);
  // Its kernel nodes may name the module's code: refused, the module kept (and charged).
  EXPECT_EQ(c.call<api::Call::ModuleUnload>({mod}), 800 /* CUDA_ERROR_NOT_PERMITTED */);
  EXPECT_EQ(limits.ledger->used(), charged);
  ASSERT_EQ(c.call<api::Call::GraphDestroy>({graph, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::ModuleUnload>({mod}), 0);
  EXPECT_EQ(limits.ledger->used(), 0u);
}

using namespace slot_control;

TEST(StubModules, AResumeChargesThemAgainOrFailsCleanly) {
  constexpr size_t kImage = 50000;
  constexpr uint64_t kCost = kImage + kPad + kVariables;
  StubLimits limits;
  limits.ledger = VmLedger::create(8 * kCost + (4u << 20));
  // Two stubs of one VM (as its worker processes are): the client to suspend, and another
  // program of the VM that runs on while the resume fails.
  Stub stub(limits), other_stub(limits);
  Client c(stub), other(other_stub);
  const std::string text = image_text(kImage);
  uint64_t mod = 0;
  ASSERT_EQ(load(c, text, &mod), 0);
  ASSERT_EQ(load(c, text), 0);
  const uint64_t fn = other.load_add_one();  // a module of its own (the 64-byte test image)
  const uint64_t p = other.malloc(4096);      // and device memory (the arena's 2 MiB)
  const uint64_t others = limits.ledger->used() - 2 * kCost;
  EXPECT_GE(others, 64 + kPad + (2u << 20));
  cc::Reply r = control(stub, cc::Op::kStatus);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status.module_bytes, 2 * kCost);
  // Suspended: no module is loaded, none is charged.
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(limits.ledger->used(), others);
  EXPECT_EQ(r.status.module_bytes, 0u);
  // Resumed: charged again, the same amount.
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(limits.ledger->used(), others + 2 * kCost);
  EXPECT_EQ(r.status.module_bytes, 2 * kCost);
  // Suspended again; meanwhile the quota shrank so that one of its modules no longer fits.
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  limits.ledger->set_limit(others + kCost + kCost / 2);
  r = control(stub, cc::Op::kResume);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("quota"), std::string::npos) << r.error;
  EXPECT_TRUE(r.status.suspended);
  EXPECT_EQ(limits.ledger->used(), others);  // what the failed attempt charged went back
  // The VM's other program is untouched and works.
  other.put(p, std::vector<int>(16, 1));
  EXPECT_EQ(other.launch(fn, p, 16, 0), 0);
  EXPECT_EQ(other.get(p, 16), std::vector<int>(16, 2));
  // Room again: the retry resumes it, charged as before, its modules usable.
  limits.ledger->set_limit(8 * kCost + (4u << 20));
  const uint64_t before_retry = limits.ledger->used();
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(limits.ledger->used(), before_retry + 2 * kCost);
  const std::string name = tst::kTestGlobal;
  api::GlobalReply g{};
  EXPECT_EQ(c.call<api::Call::ModuleGetGlobal>({mod, uint32_t(name.size()), 0}, &g, std::as_bytes(std::span(name))), 0);
  ASSERT_EQ(c.call<api::Call::ModuleUnload>({mod}), 0);
  EXPECT_EQ(limits.ledger->used(), before_retry + kCost);
}

}  // namespace
}  // namespace vmcuda::host::test
