// guest-lib's cudaLaunchHostFunc and cudaStreamAddCallback end to end: the real guest code
// (host_func.cc's mailbox and callback thread, remote.cc, stream.cc, memory*.cc) against
// vmcuda-stub in this process, on the test executor. The process has one connection, so the
// tests share one client and one stub.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
using namespace std::chrono_literals;

vmcuda::host::test::Stub*& g_stub = vmcuda::host::test::g_guest_stub;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new vmcuda::host::test::GuestStubEnvironment);

void* device_malloc(size_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
  return p;
}

class GuestHostFunc : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  }
};

// A host function between copies: it sees what the copies before it left in pinned memory,
// and the copy after it takes what it wrote there.
struct Between {
  int* pinned_in;   // device results copied here before the function
  int* pinned_out;  // the function writes here; copied to the device after it
  int n;
  std::vector<int> seen;
  std::thread::id thread;
};

TEST_F(GuestHostFunc, RunsInStreamOrderBetweenCopies) {
  constexpr int n = 1024;
  void* d = device_malloc(n * sizeof(int));
  Between b{};
  b.n = n;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&b.pinned_in), n * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&b.pinned_out), n * sizeof(int)), cudaSuccess);
  std::vector<int> src(n);
  for (int i = 0; i < n; ++i) src[i] = i * 3;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, src.data(), n * sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b.pinned_in, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(
                s,
                [](void* p) {
                  auto* b = static_cast<Between*>(p);
                  b->thread = std::this_thread::get_id();
                  std::this_thread::sleep_for(20ms);  // the copy after it must still wait
                  b->seen.assign(b->pinned_in, b->pinned_in + b->n);
                  for (int i = 0; i < b->n; ++i) b->pinned_out[i] = b->pinned_in[i] + 1;
                },
                &b),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, b.pinned_out, n * sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  std::vector<int> back(n, -1);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(b.seen, src);
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], i * 3 + 1) << i;
  EXPECT_NE(b.thread, std::this_thread::get_id());  // the library's callback thread ran it
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(b.pinned_in), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(b.pinned_out), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(GuestHostFunc, RunsWithoutAnyFurtherCudaCall) {
  // The app waits for the function's effect without calling CUDA: the launch is not left
  // in the lazy queue.
  std::atomic<bool> ran{false};
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, [](void* p) { static_cast<std::atomic<bool>*>(p)->store(true); }, &ran),
            cudaSuccess);
  for (int i = 0; i < 5000 && !ran; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(ran.load());
}

struct Log {
  std::mutex mu;
  std::vector<int> order;
};
struct Tagged {
  Log* log;
  int tag;
};

TEST_F(GuestHostFunc, SeveralStreamsAndManyFunctionsEachRunOnceInOrder) {
  // More than one mailbox page of entries (256), reused as functions complete.
  constexpr int kStreams = 3, kPerStream = 300;
  cudaStream_t s[kStreams];
  for (auto& x : s) ASSERT_EQ(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking), cudaSuccess);
  Log log;
  std::vector<Tagged> tags;
  tags.reserve(kStreams * kPerStream);
  for (int i = 0; i < kPerStream; ++i)
    for (int k = 0; k < kStreams; ++k) {
      tags.push_back({&log, k * 10000 + i});
      ASSERT_EQ(cudaLaunchHostFunc(
                    s[k],
                    [](void* p) {
                      auto* t = static_cast<Tagged*>(p);
                      std::lock_guard l(t->log->mu);
                      t->log->order.push_back(t->tag);
                    },
                    &tags.back()),
                cudaSuccess);
    }
  for (auto& x : s) ASSERT_EQ(cudaStreamSynchronize(x), cudaSuccess);
  std::lock_guard l(log.mu);
  ASSERT_EQ(log.order.size(), size_t{kStreams * kPerStream});
  // Per stream, in launch order.
  int next[kStreams] = {};
  for (int tag : log.order) {
    const int k = tag / 10000;
    ASSERT_EQ(tag % 10000, next[k]++) << "stream " << k;
  }
  for (auto& x : s) EXPECT_EQ(cudaStreamDestroy(x), cudaSuccess);
}

struct CallbackSeen {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x1);
  cudaError_t status = cudaErrorUnknown;
  int calls = 0;
};

TEST_F(GuestHostFunc, StreamAddCallbackGetsItsStreamAndStatus) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  CallbackSeen seen;
  auto cb = [](cudaStream_t stream, cudaError_t status, void* p) {
    auto* c = static_cast<CallbackSeen*>(p);
    c->stream = stream;
    c->status = status;
    ++c->calls;
  };
  ASSERT_EQ(cudaStreamAddCallback(s, cb, &seen, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.stream, s);
  EXPECT_EQ(seen.status, cudaSuccess);
  // The default stream is passed as the app named it.
  ASSERT_EQ(cudaStreamAddCallback(nullptr, cb, &seen, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(seen.calls, 2);
  EXPECT_EQ(seen.stream, nullptr);
  // Argument errors, at the call (and as the last error).
  EXPECT_EQ(cudaStreamAddCallback(s, cb, &seen, 1), cudaErrorInvalidValue);
  EXPECT_EQ(vmcuda::guest::take_last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAddCallback(s, nullptr, &seen, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLaunchHostFunc(s, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(0x4321), [](void*) {}, nullptr),
            cudaErrorInvalidResourceHandle);
  vmcuda::guest::take_last_error();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamAddCallback(s, cb, &seen, 0), cudaErrorInvalidResourceHandle);  // destroyed
  vmcuda::guest::take_last_error();
  EXPECT_EQ(seen.calls, 2);
}

TEST_F(GuestHostFunc, AThreadInStreamSynchronizeDoesNotBlockTheFunction) {
  // The app thread that synchronizes holds the link while it waits; the function runs on
  // the callback thread, which never needs the link.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::atomic<int> stage{0};
  std::thread launcher([&] {
    EXPECT_EQ(cudaLaunchHostFunc(
                  s,
                  [](void* p) {
                    auto* st = static_cast<std::atomic<int>*>(p);
                    st->store(1);
                    std::this_thread::sleep_for(30ms);
                    st->store(2);
                  },
                  &stage),
              cudaSuccess);
  });
  while (stage.load() == 0) std::this_thread::yield();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);  // waits for the function
  EXPECT_EQ(stage.load(), 2);
  launcher.join();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
