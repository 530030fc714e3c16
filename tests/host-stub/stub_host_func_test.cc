// vmcuda-stub's host function gates (calls.def LaunchHostFunc, host-stub/src/host_func.cc)
// through the generic path, on the test executor: the test plays the guest's callback thread
// on the mailbox entries. The executor runs a gate at once on the slot's service thread, so a
// batch with a LaunchHostFunc is answered only once the "guest" has marked it done.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "host-stub/stub_fixture.h"
#include "vmrpc/ordering.h"

namespace vmcuda::host {
namespace {

using test::Client;
using test::Stub;
using vmrpc::wire::ChannelStatus;
namespace tst = vmcuda::testing;
namespace ordering = vmrpc::ordering;

constexpr uint32_t kEntries = 8;

struct Mailbox {
  vmrpc::HeapBlock block;
  explicit Mailbox(Client& c) {
    auto b = c.slot->heap().allocate(kEntries * sizeof(api::HostFuncEntry));
    EXPECT_TRUE(b);
    block = *b;
    std::memset(block.data, 0, block.bytes);
  }
  api::HostFuncEntry& at(uint32_t i) { return reinterpret_cast<api::HostFuncEntry*>(block.data)[i]; }
};

// Plays the guest's callback thread for one entry: waits until the host reached `generation`,
// then (after `delay`) marks it done. `seen_*` say what the host published.
struct Guest {
  std::atomic<bool> reached{false};
  std::atomic<bool> done_written{false};
  int32_t status = -100;
  uint32_t order = 0;
  std::thread thread;
  Guest(api::HostFuncEntry& e, uint32_t generation, std::chrono::milliseconds delay) {
    thread = std::thread([&e, generation, delay, this] {
      while (ordering::load_acquire(e.reached) != generation) std::this_thread::yield();
      status = ordering::load_relaxed(e.status);
      order = ordering::load_relaxed(e.order);
      reached = true;
      std::this_thread::sleep_for(delay);
      done_written = true;
      ordering::store_release(e.done, generation);
    });
  }
  ~Guest() { thread.join(); }
};

TEST(StubHostFunc, TheBatchWaitsForTheGuestToRunTheFunction) {
  Stub s;
  Client c(s);
  Mailbox m(c);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x100, 0, 0}), 0);
  {
    Guest g(m.at(3), 1, std::chrono::milliseconds(50));
    auto f = c.queue<api::Call::LaunchHostFunc>({0x100, m.block.ref(), 3, 1, 0, 0});
    ASSERT_EQ(c.flush(), ChannelStatus::kOk);
    EXPECT_EQ(c.status(f), 0);
    EXPECT_TRUE(g.done_written.load());
    EXPECT_TRUE(g.reached.load());
    EXPECT_EQ(g.status, 0);
    EXPECT_EQ(g.order, 1u);
  }
  // The same entry again (generation 2), as a callback on the legacy default stream.
  {
    Guest g(m.at(3), 2, std::chrono::milliseconds(0));
    EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({api::kStreamLegacy, m.block.ref(), 3, 2, api::kHostFuncCallback, 0}),
              0);
    EXPECT_TRUE(g.done_written.load());
    EXPECT_EQ(g.status, 0);  // the stream's status: no error
    EXPECT_EQ(g.order, 2u);  // reached second
  }
}

TEST(StubHostFunc, ALateGateIsNotStuckBehindANewerUseOfItsEntry) {
  Stub s;
  Client c(s);
  Mailbox m(c);
  // The guest already ran generation 5 (done 6 > 5): the gate passes at once.
  ordering::store_release(m.at(0).done, 6u);
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, m.block.ref(), 0, 5, 0, 0}), 0);
  EXPECT_EQ(m.at(0).reached, 5u);
  // Wrapping generations compare as serial numbers.
  ordering::store_release(m.at(1).done, 2u);
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, m.block.ref(), 1, 0xfffffffeu, 0, 0}), 0);
}

TEST(StubHostFunc, HostileArgumentsAreRefused) {
  Stub s;
  Client c(s);
  Mailbox m(c);
  const auto ref = m.block.ref();
  const int32_t bad_args = static_cast<int32_t>(ChannelStatus::kBadArguments);
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, ref, kEntries, 1, 0, 0}), bad_args);   // past the mailbox
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, ref, ~0u, 1, 0, 0}), bad_args);
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, ref, 0, 1, 4, 0}), bad_args);          // unknown flag
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>(
                {0, ref, 0, 1, api::kHostFuncPersistent | api::kHostFuncCallback, 0}),
            bad_args);  // a graph's host node is no callback
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, m.block.ref(8, 16), 0, 1, 0, 0}), bad_args);  // misaligned
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, m.block.ref(0, 20), 0, 1, 0, 0}), bad_args);  // part of an entry
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, {~0ull - 8, 16}, 0, 1, 0, 0}),
            static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  EXPECT_EQ(m.at(0).reached, 0u);  // none of these touched the mailbox
  // An unknown stream: refused, and the entry says so (the guest drops the function).
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0x999, ref, 2, 7, 0, 0}), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(m.at(2).reached, 7u);
  EXPECT_EQ(m.at(2).status, -1);
}

TEST(StubHostFunc, PerClientLimitOfWaitingGates) {
  StubLimits limits;
  limits.max_host_funcs = 0;  // every gate counts against it while it waits
  Stub s(limits);
  Client c(s);
  Mailbox m(c);
  EXPECT_EQ(c.call<api::Call::LaunchHostFunc>({0, m.block.ref(), 1, 4, 0, 0}), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(m.at(1).reached, 4u);
  EXPECT_EQ(m.at(1).status, -1);
}

TEST(StubHostFunc, AGuestThatNeverAnswersAndReleasesItsSlotLeavesTheStubServing) {
  Stub s;
  auto c = std::make_unique<Client>(s);
  Mailbox m(*c);
  ASSERT_EQ(c->call<api::Call::StreamCreate>({0x100, 0, 0}), 0);
  const uint64_t contexts = tst::fake_live_contexts();
  ASSERT_EQ(contexts, 1u);
  c->queue<api::Call::LaunchHostFunc>({0x100, m.block.ref(), 0, 1, 0, 0});
  ASSERT_EQ(c->slot->submit(), ChannelStatus::kOk);
  // The gate is reached and waits for a guest that never marks it done...
  for (int i = 0; i < 2000 && ordering::load_acquire(m.at(0).reached) != 1u; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(m.at(0).reached, 1u);
  // ...while another client is served.
  {
    Client other(s);
    EXPECT_NE(other.malloc(256), 0u);
  }
  // The process goes away: the guest driver releases its slot (as /dev/vmcuda's release
  // does for a process that died). The gate stops waiting, the session closes.
  auto& ctl = c->slot->region().control(c->slot->index());
  ordering::store_release(ctl.state, static_cast<uint32_t>(vmrpc::wire::SlotState::kClosing));
  // The "process" is gone: nothing of it waits for the answer (the stub resets the slot
  // right after answering), and its slot object is left as a dead process leaves it.
  c->slot.release();
  c->conn.release();
  for (int i = 0; i < 2000 && tst::fake_live_contexts() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(tst::fake_live_contexts(), 0u);
  EXPECT_EQ(tst::fake_live_streams(), 0u);
  Client after(s);
  EXPECT_NE(after.malloc(256), 0u);
}

}  // namespace
}  // namespace vmcuda::host
