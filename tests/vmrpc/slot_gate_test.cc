// SlotGate (vmrpc/slot_gate.h): the control path's hold at a call boundary and its tasks on
// the service thread, against a stand-in service loop (as serve_slot runs it). Also under
// TSan (make test-tsan).
#include "vmrpc/slot_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace vmrpc {
namespace {

using namespace std::chrono_literals;

// Waits (up to 10 s: sanitizer builds on a loaded machine) until `pred` holds.
template <class P>
bool eventually(P pred) {
  for (int i = 0; i < 10000 && !pred(); ++i) std::this_thread::sleep_for(1ms);
  return pred();
}

// A service thread: "batches" (counted) between call boundaries, where it serves the gate.
struct Loop {
  SlotGate gate;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> batches{0};
  std::thread::id id;
  std::thread t;
  Loop() {
    t = std::thread([this] {
      id = std::this_thread::get_id();
      while (!stop) {
        if (gate.wanted()) gate.serve([this] { return stop.load(); });
        batches.fetch_add(1);
        std::this_thread::sleep_for(100us);
      }
      gate.close();
    });
  }
  ~Loop() {
    stop = true;
    t.join();
  }
};

TEST(SlotGate, HoldStopsBatchesUntilRelease) {
  Loop l;
  ASSERT_TRUE(l.gate.hold(2s));
  EXPECT_TRUE(l.gate.held());
  const uint64_t at = l.batches.load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(l.batches.load(), at);  // parked: no batch while held
  l.gate.release();
  EXPECT_TRUE(eventually([&] { return l.batches.load() > at; }));
}

TEST(SlotGate, TasksRunOnTheServiceThreadHeldOrNot) {
  Loop l;
  std::thread::id ran;
  ASSERT_TRUE(l.gate.run([&] { ran = std::this_thread::get_id(); }, 2s));
  EXPECT_EQ(ran, l.id);
  ASSERT_TRUE(l.gate.hold(2s));
  int n = 0;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(l.gate.run([&] { ++n; }, 2s));
  EXPECT_EQ(n, 5);
  EXPECT_TRUE(l.gate.held());
  l.gate.release();
}

TEST(SlotGate, AClosedSlotRefusesAtOnce) {
  auto l = std::make_unique<Loop>();
  SlotGate& g = l->gate;
  l->stop = true;
  l->t.join();
  l->t = std::thread([] {});  // the destructor joins something
  EXPECT_FALSE(g.hold(50ms));
  EXPECT_FALSE(g.run([] {}, 50ms));
}

TEST(SlotGate, AHoldThatIsNotReachedInTimeTakesNothing) {
  SlotGate g;  // no service thread looks at it
  EXPECT_FALSE(g.hold(30ms));
  EXPECT_FALSE(g.wanted());
  EXPECT_FALSE(g.run([] {}, 30ms));  // withdrawn, never runs
  EXPECT_FALSE(g.wanted());
}

TEST(SlotGate, ARequestedHoldParksBeforeTheFirstBatch) {
  SlotGate g;
  g.request_hold();
  std::atomic<uint64_t> batches{0};
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop) {
      if (g.wanted()) g.serve([&] { return stop.load(); });
      batches.fetch_add(1);
      std::this_thread::sleep_for(100us);
    }
    g.close();
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(batches.load(), 0u);
  g.release();
  EXPECT_TRUE(eventually([&] { return batches.load() > 0; }));
  stop = true;
  t.join();

}

}  // namespace
}  // namespace vmrpc
