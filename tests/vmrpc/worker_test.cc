// Worker mode: each claimed slot is served by a process of its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/client.h"
#include "vmrpc/ordering.h"
#include "vmrpc/worker.h"

namespace vmrpc {
namespace {

using wire::ChannelStatus;

struct WorkerChannel {
  testing::TestService unused;  // the workers have their own
  std::atomic<int> last_pid{-1};
  std::atomic<int> spawned{0};
  // The pid of the n-th worker (1-based), once the spawner has recorded it.
  int wait_for_worker(int n) {
    for (int i = 0; i < 2000 && spawned < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return last_pid;
  }
  HostEndpoint host;
  explicit WorkerChannel(uint32_t slots = 4, std::function<void(int, UniqueFd)> end_worker = {},
                         std::function<void(int, int)> on_worker_exit = {})
      : host(options(slots, std::move(end_worker), std::move(on_worker_exit)), unused) {
    host.start();
  }
  HostEndpointOptions options(uint32_t slots, std::function<void(int, UniqueFd)> end_worker,
                              std::function<void(int, int)> on_worker_exit) {
    HostEndpointOptions o{testing::temp_socket_path("worker"), RegionConfig{16ull << 20, slots, 64 << 10, 4096}, 8,
                          [this](const WorkerSpec& spec) {
                            int pid = spawn_worker_process(VMRPC_TEST_WORKER, {}, spec);
                            last_pid = pid;
                            ++spawned;
                            return pid;
                          }};
    o.end_worker = std::move(end_worker);
    o.on_worker_exit = std::move(on_worker_exit);
    return o;
  }
};

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span(&v, 1));
}

TEST(Worker, EachSlotIsServedByItsOwnProcess) {
  WorkerChannel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto a = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(a) << why;
  const int pid_a = ch.wait_for_worker(1);
  auto b = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(b) << why;
  const int pid_b = ch.wait_for_worker(2);
  EXPECT_GT(pid_a, 0);
  EXPECT_NE(pid_a, pid_b);
  EXPECT_NE(pid_a, getpid());
  EXPECT_EQ(ch.unused.counters.opened.load(), 0u);  // nothing served in this process
  const char msg[] = "through a worker";
  auto r = a->call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(msg)), 64);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(0, std::memcmp(r.bytes.data(), msg, sizeof msg));
  auto in = a->heap().allocate(1 << 20), out = a->heap().allocate(1 << 20);
  ASSERT_TRUE(in && out);
  std::memset(in->data, 0x11, 1 << 20);
  testing::XorCopyArgs x{in->ref(), out->ref(), 0x22, {}};
  ASSERT_EQ(a->call(testing::kXorCopy, bytes_of(x), 0).status, 0);
  EXPECT_EQ(out->data[12345], std::byte{0x33});
  EXPECT_EQ(ch.host.stats().slots_serving, 2u);
  // Released: the worker hands the slot back and exits.
  const uint32_t index = a->index();
  a.reset();
  auto& ctl = conn->region().control(index);
  for (int i = 0; i < 1000 && (ordering::load_acquire(ctl.state) != 0 || ch.host.stats().slots_serving != 1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(ordering::load_acquire(ctl.state), 0u);
  EXPECT_EQ(ch.host.stats().slots_serving, 1u);
  EXPECT_EQ(kill(pid_a, 0), -1);  // gone
}

TEST(Worker, AWorkerThatDiesFailsOnlyItsOwnClient) {
  WorkerChannel ch;
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto victim = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(victim);
  const int victim_pid = ch.wait_for_worker(1);
  auto other = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(other);
  // The victim's worker is busy with a long call when it dies (as a GPU fault would
  // take a worker's CUDA contexts down).
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(victim_pid, SIGKILL);
  });
  uint32_t ms = 5000;
  auto r = victim->call(testing::kSleepMs, bytes_of(ms), 0);
  killer.join();
  EXPECT_EQ(r.status, static_cast<int32_t>(ChannelStatus::kHandlerFailed));
  EXPECT_EQ(victim->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status,
            static_cast<int32_t>(ChannelStatus::kHandlerFailed));  // failed from now on, at once
  EXPECT_EQ(other->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
  // Once the client releases it, the slot is free again and a new client gets a new worker.
  const uint32_t index = victim->index();
  victim.reset();
  auto& ctl = conn->region().control(index);
  for (int i = 0; i < 1000 && ordering::load_acquire(ctl.state) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(ordering::load_acquire(ctl.state), 0u);
  auto again = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(again) << why;
  EXPECT_EQ(again->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0);
}

TEST(Worker, ASlotReleasedAndClaimedAtOnceGetsAFreshWorker) {
  // The old worker must not hand the slot back before it is gone: a client claiming it in
  // between would be taken for the old worker's orphan and failed. One slot: every
  // round reuses it.
  WorkerChannel ch(1);
  auto conn = LocalConnection::connect(ch.host.socket_path());
  for (int i = 0; i < 30; ++i) {
    std::string why;
    std::unique_ptr<ClientSlot> s;
    // Claim the moment the slot is free (the race window is short).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!s && std::chrono::steady_clock::now() < deadline) {
      s = ClientSlot::claim(conn->region(), *conn, &why);
      // Busy is fine (the last client's slot is still being freed); refused is the bug.
      ASSERT_TRUE(s || why.find("in use") != std::string::npos) << "round " << i << ": " << why;
    }
    ASSERT_TRUE(s) << "round " << i << ": " << why;
    ASSERT_EQ(s->call(static_cast<uint32_t>(wire::MessageId::kNop), {}, 0).status, 0) << "round " << i;
  }
}

TEST(Worker, WorkersAreKilledWhenTheConnectionGoes) {
  WorkerChannel ch;
  // A client process claims a slot and dies without releasing it.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    auto conn = LocalConnection::connect(ch.host.socket_path());
    std::string why;
    auto s = ClientSlot::claim(conn->region(), *conn, &why);
    char ok = s ? 1 : 0;
    [[maybe_unused]] ssize_t n = write(fds[1], &ok, 1);
    pause();
  }
  char ok = 0;
  ASSERT_EQ(read(fds[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  const int pid = ch.wait_for_worker(1);
  EXPECT_EQ(kill(pid, 0), 0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  for (int i = 0; i < 1000 && (ch.host.stats().connections_open != 0 || kill(pid, 0) == 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(ch.host.stats().connections_open, 0u);
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(ch.host.stats().slots_serving, 0u);
}

// Finding 10.9: a client whose kernel never ends kept its worker (and slot, and GPU) forever
// once its program had left. The endpoint kills a worker that outlives its program.
TEST(Worker, AWorkerThatOutlivesItsProgramIsKilled) {
  knobs::kWorkerExitMs.set(300);
  WorkerChannel ch(1);
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto a = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(a) << why;
  ASSERT_EQ(a->call(testing::kHangOnClose, {}, 0).status, 0);
  const int pid = ch.wait_for_worker(1);
  ASSERT_GT(pid, 0);
  a.reset();  // the program leaves; its worker hangs in close()
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gone = ::kill(pid, 0) != 0;
  }
  EXPECT_TRUE(gone) << "worker " << pid << " still runs 5 s after its program left";
  // The slot is free for the next program.
  std::unique_ptr<ClientSlot> b;
  for (int i = 0; i < 200 && !b; ++i) {
    b = ClientSlot::claim(conn->region(), *conn, &why);
    if (!b) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->call(testing::kCallIndex, {}, 8).status, 0);
  knobs::kWorkerExitMs.set(knobs::kWorkerExitMs.default_value());
}

// A service whose GPU work outlives a worker process (MPS: the work must be ended through
// the daemon first) ends a worker given up on itself: the endpoint hands it the pid and a
// pidfd instead of killing, and reports the exit with its wait status.
TEST(Worker, AWorkerGivenUpOnIsEndedThroughTheServicesHook) {
  knobs::kWorkerExitMs.set(300);
  std::mutex mu;
  std::vector<int> handed;
  std::vector<std::pair<int, int>> exits;
  WorkerChannel ch(
      1,
      [&](int pid, UniqueFd pidfd) {
        {
          std::lock_guard l(mu);
          handed.push_back(pid);
        }
        // Later and off the loop thread, as the stub's MPS daemon thread does.
        std::thread([fd = std::make_shared<UniqueFd>(std::move(pidfd))] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          ::syscall(SYS_pidfd_send_signal, fd->get(), SIGKILL, nullptr, 0);
        }).detach();
      },
      [&](int pid, int status) {
        std::lock_guard l(mu);
        exits.emplace_back(pid, status);
      });
  auto conn = LocalConnection::connect(ch.host.socket_path());
  std::string why;
  auto a = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(a) << why;
  ASSERT_EQ(a->call(testing::kHangOnClose, {}, 0).status, 0);
  const int pid = ch.wait_for_worker(1);
  ASSERT_GT(pid, 0);
  a.reset();  // the program leaves; its worker hangs in close()
  bool reported = false;
  for (int i = 0; i < 500 && !reported; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard l(mu);
    reported = !exits.empty();
  }
  ASSERT_TRUE(reported) << "worker " << pid << " not ended 5 s after its program left";
  {
    std::lock_guard l(mu);
    EXPECT_EQ(handed, std::vector<int>{pid});
    EXPECT_EQ(exits[0].first, pid);
    EXPECT_TRUE(WIFSIGNALED(exits[0].second) && WTERMSIG(exits[0].second) == SIGKILL) << "status " << exits[0].second;
  }
  std::unique_ptr<ClientSlot> b;
  for (int i = 0; i < 200 && !b; ++i) {
    b = ClientSlot::claim(conn->region(), *conn, &why);
    if (!b) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->call(testing::kCallIndex, {}, 8).status, 0);
  knobs::kWorkerExitMs.set(knobs::kWorkerExitMs.default_value());
}

}  // namespace
}  // namespace vmrpc

