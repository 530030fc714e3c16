// The working thread per GPU (host-stub/src/gpu_worker.h), with clients as threads of one
// stub (--isolation thread): launches and async work go through it, waits stay on each
// client's service thread, so one client blocked in a wait holds up no other client's work.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "gpu_worker.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test {
namespace {

TEST(GpuWorker, RunsTasksInOrderOnOneThreadAndReturnsTheirResults) {
  GpuWorker& w = GpuWorker::of(7);
  EXPECT_EQ(&w, &GpuWorker::of(7));
  EXPECT_NE(&w, &GpuWorker::of(8));
  std::vector<int> order;
  std::thread::id seen;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(w.run([&] {
      order.push_back(i);
      seen = std::this_thread::get_id();
      return i * 3;
    }),
              i * 3);
  EXPECT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(seen, w.thread_id());
  EXPECT_NE(seen, std::this_thread::get_id());
}

TEST(GpuWorker, ManyServiceThreadsAtOnce) {
  GpuWorker& w = GpuWorker::of(9);
  std::atomic<int> sum{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) sum += w.run([&] { return t; });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(sum.load(), 2000 * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7));
}

TEST(GpuWorkingThread, LaunchesGoThroughItWhileAnotherClientWaits) {
  StubLimits limits;
  limits.gpu_threads = true;
  Stub s(limits);
  Client a(s), b(s);
  const uint64_t pa = a.malloc(64), pb = b.malloc(64);
  const uint64_t fa = a.load_add_one(), fb = b.load_add_one();
  a.put(pa, std::vector<int>(16, 1));
  b.put(pb, std::vector<int>(16, 10));
  ASSERT_EQ(a.launch(fa, pa, 16, 0), 0);  // answered at once, issued by the working thread
  EXPECT_EQ(a.get(pa, 16), std::vector<int>(16, 2));  // a synchronous call runs after it
  EXPECT_EQ(tst::fake_last_launch_thread(), GpuWorker::of(0).thread_id());

  // Client a's next cudaDeviceSynchronize blocks inside the driver until released.
  std::mutex m;
  std::condition_variable cv;
  bool waiting = false, release = false;
  std::atomic<bool> armed{true};
  tst::fake_on_synchronize([&] {
    if (!armed.exchange(false)) return;
    std::unique_lock l(m);
    waiting = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });
  });
  auto a_sync = std::async(std::launch::async, [&] { return a.call<api::Call::DeviceSynchronize>({}); });
  {
    std::unique_lock l(m);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return waiting; }));
  }
  // While a waits, b's launches are issued by the working thread and complete.
  const uint64_t before = GpuWorker::of(0).tasks_run();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(b.launch(fb, pb, 16, 0), 0);
  EXPECT_EQ(b.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(GpuWorker::of(0).tasks_run(), before + 5);
  EXPECT_EQ(tst::fake_last_launch_thread(), GpuWorker::of(0).thread_id());
  EXPECT_EQ(b.get(pb, 16), std::vector<int>(16, 15));
  EXPECT_EQ(a_sync.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);  // a still waits
  {
    std::lock_guard l(m);
    release = true;
  }
  cv.notify_all();
  EXPECT_EQ(a_sync.get(), 0);
  EXPECT_EQ(a.get(pa, 16), std::vector<int>(16, 2));
  tst::fake_on_synchronize(nullptr);
}

TEST(GpuWorkingThread, AnErrorOfHandedOverWorkComesWithALaterBatch) {
  StubLimits limits;
  limits.gpu_threads = true;
  Stub s(limits);
  Client c(s);
  const uint64_t p = c.malloc(64);
  const uint64_t f = c.load_add_one();
  c.put(p, std::vector<int>(16, 0));
  // Queued as the guest's lazy queue does: a launch of a function handle that does not
  // exist, then a good one. Both are answered 0 at once: the working thread runs them.
  const auto bad = Client::add_one_args(p, 16);
  EXPECT_EQ(c.call<api::Call::LaunchKernel>({f + 100, {1, 1, 1}, {16, 1, 1}, 0, 12, 0}, nullptr, bad), 0);
  EXPECT_EQ(c.launch(f, p, 16, 0), 0);
  EXPECT_EQ(c.slot->take_late_status(), 0);
  // The next call that is not handed over waits for them and reports the first error in
  // its batch's late status; its own answer is its own.
  EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(c.slot->take_late_status(), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(c.slot->take_late_status(), 0);  // taken once
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 1));  // the good launch ran, in order
  EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(c.slot->take_late_status(), 0);  // reported once
}

// Issue 10, finding 2: an async copy between device memory and heap memory the client did
// not pin is pageable for the driver, which copies it behind the stream's earlier work: it
// stays on the client's service thread, so it cannot hold the GPU's working thread (and
// every other client) behind one client's long kernel. Pinned heap memory: a real DMA,
// issued by the working thread.
TEST(GpuWorkingThread, PageableHeapCopiesStayOffTheWorkingThread) {
  StubLimits limits;
  limits.gpu_threads = true;
  Stub s(limits);
  Client c(s);
  const uint64_t d = c.malloc(4096);
  c.put(d, std::vector<int>(16, 7));
  auto pageable = c.slot->heap().allocate(4096);
  auto pinned = c.slot->heap().allocate(4096);
  ASSERT_TRUE(pageable && pinned);
  ASSERT_EQ(c.call<api::Call::PinHeap>({pinned->ref()}), 0);
  ASSERT_EQ(c.call<api::Call::CopyFromDeviceHeapAsync>({d, pageable->ref(0, 64), 0, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_NE(tst::fake_last_async_copy_thread(), GpuWorker::of(0).thread_id());
  ASSERT_EQ(c.call<api::Call::CopyToDeviceHeapAsync>({d, pageable->ref(0, 64), 0, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_NE(tst::fake_last_async_copy_thread(), GpuWorker::of(0).thread_id());
  ASSERT_EQ(c.call<api::Call::CopyFromDeviceHeapAsync>({d, pinned->ref(0, 64), 0, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(tst::fake_last_async_copy_thread(), GpuWorker::of(0).thread_id());
  int copied[16] = {};
  std::memcpy(copied, pinned->data, sizeof copied);
  EXPECT_EQ(copied[3], 7);  // the copy happened, wherever it ran
  std::memcpy(copied, pageable->data, sizeof copied);
  EXPECT_EQ(copied[15], 7);
}

TEST(GpuWorkingThread, OffByDefaultInTheSession) {
  Stub s;  // StubLimits{}: gpu_threads off
  Client a(s);
  const uint64_t p = a.malloc(64);
  const uint64_t f = a.load_add_one();
  ASSERT_EQ(a.launch(f, p, 16, 0), 0);
  EXPECT_NE(tst::fake_last_launch_thread(), GpuWorker::of(0).thread_id());
}

}  // namespace
}  // namespace vmcuda::host::test
