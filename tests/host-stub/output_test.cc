// Kernel printf output (calls.def OutputRing, host-stub/src/output.h, guest-lib/src/output.cc)
// on the test executor. The stub runs in this process with its output capture on a spare fd
// (a worker captures its stdout); the tests write there what the driver would write.
//  - StubOutput: the host's side through the generic path, the test playing the guest on
//    the ring: wraparound, a full ring, a hostile read_pos, the host's bounded buffer.
//  - GuestOutput: guest-lib's real code in a child process (the app), whose stdout the test
//    reads: order among the app's own lines, more than a ring at once, output at exit.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "host-stub/stub_fixture.h"
#include "output.h"
#include "remote.h"
#include "vmrpc/ordering.h"

namespace vmcuda::host {
namespace {

using test::Client;
using test::Stub;
using vmrpc::wire::ChannelStatus;
namespace ordering = vmrpc::ordering;

constexpr uint64_t kHeader = sizeof(api::OutputRingHeader);

// kernel_print's kernels: client -> (function, buffer), per test.
std::map<Client*, std::pair<uint64_t, uint64_t>> g_kernels;
void write_all(int fd, const std::string& s) {
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::write(fd, s.data() + at, s.size() - at);
    ASSERT_GT(n, 0);
    at += static_cast<size_t>(n);
  }
}

std::string pattern(size_t n, size_t seed = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i + seed) % 26);
  return s;
}

// A stub with the capture on `fd` (a spare fd standing in for a worker's stdout).
class OutputFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    g_kernels.clear();
    fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string why;
    ASSERT_TRUE(OutputCapture::install(fd, &why)) << why;
    stub = std::make_unique<Stub>();
  }
  void TearDown() override {
    stub.reset();
    OutputCapture::uninstall();
    ::close(fd);
  }
  int fd = -1;
  std::unique_ptr<Stub> stub;
};

// The test as the guest: a ring of `data` bytes at the start of a block with guard bytes after.
struct Ring {
  vmrpc::HeapBlock block;
  uint64_t data_bytes;
  std::string seen;  // what the "guest" read so far
  Ring(Client& c, uint64_t data, uint64_t guard = 0) : data_bytes(data) {
    auto b = c.slot->heap().allocate(kHeader + data + guard);
    EXPECT_TRUE(b);
    block = *b;
    std::memset(block.data, 0, kHeader);
    std::memset(block.data + kHeader, 0x5a, data + guard);
  }
  vmrpc::wire::HeapRef ref() const { return block.ref(0, kHeader + data_bytes); }
  api::OutputRingHeader& h() { return *reinterpret_cast<api::OutputRingHeader*>(block.data); }
  const char* data() const { return reinterpret_cast<const char*>(block.data + kHeader); }
  uint64_t write_pos() { return ordering::load_acquire(h().write_pos); }
  // Reads everything new and marks it read.
  void consume() {
    const uint64_t w = write_pos(), r = ordering::load_relaxed(h().read_pos);
    for (uint64_t p = r; p < w; ++p) seen += data()[p % data_bytes];
    ordering::store_release(h().read_pos, w);
  }
  bool guard_intact(uint64_t guard) const {
    for (uint64_t i = 0; i < guard; ++i)
      if (block.data[kHeader + data_bytes + i] != std::byte{0x5a}) return false;
    return true;
  }
};

int32_t register_ring(Client& c, vmrpc::wire::HeapRef ref, uint32_t* captured = nullptr) {
  api::OutputRingReply reply{};
  const int32_t st = c.call<api::Call::OutputRing>({ref}, &reply);
  if (captured) *captured = reply.captured;
  return st;
}
int32_t sync(Client& c) { return c.call<api::Call::DeviceSynchronize>({}); }

// What a kernel prints: a launch, then the bytes the driver would write to the worker's
// stdout (here the captured fd). The stub drains only when a kernel ran since its last
// device-wide synchronize (an idle synchronize reads no pipe).
void kernel_print(Client& c, int fd, const std::string& s) {
  auto it = g_kernels.find(&c);
  if (it == g_kernels.end()) it = g_kernels.emplace(&c, std::pair{c.load_add_one(), c.malloc(4)}).first;
  EXPECT_EQ(c.launch(it->second.first, it->second.second, 1, 0), 0);
  write_all(fd, s);
}

TEST(StubOutputNoCapture, ThreadModeKeepsTheOutputOnTheStub) {
  ASSERT_EQ(OutputCapture::get(), nullptr);
  Stub s;
  Client c(s);
  Ring ring(c, 256);
  uint32_t captured = 7;
  EXPECT_EQ(register_ring(c, ring.ref(), &captured), 0);
  EXPECT_EQ(captured, 0u);  // the guest frees its ring
  EXPECT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 0u);
}

TEST_F(OutputFixture, RegistrationIsChecked) {
  Client c(*stub);
  Ring ring(c, 4096);
  uint32_t captured = 0;
  // Outside the heap (and wrapping around), too small, not 64-byte aligned.
  EXPECT_EQ(register_ring(c, {~0ull - 8, 4096}), static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  EXPECT_EQ(register_ring(c, {ring.block.offset, ~0ull - 8}), static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  EXPECT_EQ(register_ring(c, ring.block.ref(0, kHeader + api::kOutputRingMinData - 1)),
            static_cast<int32_t>(ChannelStatus::kBadArguments));
  EXPECT_EQ(register_ring(c, ring.block.ref(8, 1024)), static_cast<int32_t>(ChannelStatus::kBadArguments));
  // Heap pages that are not this client's (free ones after its block).
  EXPECT_EQ(register_ring(c, {ring.block.offset + (1u << 20), 4096}),
            static_cast<int32_t>(ChannelStatus::kBadArguments));
  EXPECT_EQ(register_ring(c, ring.ref(), &captured), 0);
  EXPECT_EQ(captured, 1u);
}

TEST_F(OutputFixture, OutputReachesTheRingAtSynchronizingCallsOnly) {
  Client c(*stub);
  Ring ring(c, 256);
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  kernel_print(c, fd, "hello from a kernel\n");
  // Not a synchronizing call: nothing moves.
  api::MemInfoReply info{};
  EXPECT_EQ(c.call<api::Call::MemGetInfo>({}, &info), 0);
  EXPECT_EQ(ring.write_pos(), 0u);
  EXPECT_EQ(sync(c), 0);
  ring.consume();
  EXPECT_EQ(ring.seen, "hello from a kernel\n");
  EXPECT_EQ(ordering::load_relaxed(ring.h().pending), 0u);
  // A stream synchronize and a synchronous copy device -> host drain too.
  kernel_print(c, fd, "two\n");
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({api::kStreamLegacy}), 0);
  const uint64_t p = c.malloc(16);
  kernel_print(c, fd, "three\n");
  int32_t st = -1;
  c.get(p, 4, &st);
  EXPECT_EQ(st, 0);
  ring.consume();
  EXPECT_EQ(ring.seen, "hello from a kernel\ntwo\nthree\n");
}

TEST_F(OutputFixture, RingWrapsAround) {
  Client c(*stub);
  Ring ring(c, 256, 512);
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  const std::string a = pattern(200), b = pattern(150, 7), d = pattern(256, 3);
  kernel_print(c, fd, a);
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 200u);
  EXPECT_EQ(std::string(ring.data(), 200), a);
  ring.consume();
  kernel_print(c, fd, b);  // 56 bytes at the end, 94 at the start
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 350u);
  EXPECT_EQ(std::string(ring.data() + 200, 56), b.substr(0, 56));
  EXPECT_EQ(std::string(ring.data(), 94), b.substr(56));
  ring.consume();
  kernel_print(c, fd, d);  // exactly the capacity
  ASSERT_EQ(sync(c), 0);
  ring.consume();
  EXPECT_EQ(ring.seen, a + b + d);
  EXPECT_TRUE(ring.guard_intact(512));
}

TEST_F(OutputFixture, AFullRingKeepsTheRestOnTheHost) {
  Client c(*stub);
  Ring ring(c, 256, 512);
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  const std::string all = pattern(1000);
  kernel_print(c, fd, all);
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 256u);
  EXPECT_EQ(ordering::load_relaxed(ring.h().pending), 744u);
  // The guest has read nothing: another synchronize writes nothing more.
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 256u);
  // The guest reads, then asks for the rest (OutputRing on the same ring), round by round.
  for (int round = 0; round < 10 && ring.seen.size() < all.size(); ++round) {
    ring.consume();
    ASSERT_EQ(register_ring(c, ring.ref()), 0);
  }
  ring.consume();
  EXPECT_EQ(ring.seen, all);
  EXPECT_EQ(ordering::load_relaxed(ring.h().pending), 0u);
  EXPECT_EQ(ordering::load_relaxed(ring.h().dropped), 0u);
  EXPECT_TRUE(ring.guard_intact(512));
}

TEST_F(OutputFixture, AHostileReadPosNeverMakesTheHostWriteOutsideTheRing) {
  Client c(*stub);
  Ring ring(c, 256, 1024);
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  kernel_print(c, fd, pattern(300));
  ASSERT_EQ(sync(c), 0);  // 256 in the ring, 44 pending
  ring.consume();         // read_pos 256
  const std::string before(ring.data(), 256);
  // Ahead of what was written, far ahead, and further behind than the capacity.
  for (uint64_t bad : {257ull, ~0ull, 1ull << 40}) {
    ordering::store_release(ring.h().read_pos, bad);
    ASSERT_EQ(register_ring(c, ring.ref()), 0);
    EXPECT_EQ(ring.write_pos(), 256u) << bad;
    EXPECT_EQ(std::string(ring.data(), 256), before) << bad;
    EXPECT_TRUE(ring.guard_intact(1024)) << bad;
  }
  // Sane again: of 300 more, the 44 pending and 212 new bytes fill the ring.
  ordering::store_release(ring.h().read_pos, uint64_t{256});
  kernel_print(c, fd, pattern(300, 1));
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 512u);
  ordering::store_release(ring.h().read_pos, uint64_t{0});  // behind by more than the capacity
  kernel_print(c, fd, "x");
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 512u);
  EXPECT_TRUE(ring.guard_intact(1024));
  ring.seen.clear();
  ordering::store_release(ring.h().read_pos, uint64_t{512});
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  ring.consume();
  EXPECT_EQ(ring.seen, pattern(300, 1).substr(212) + "x");
}

TEST_F(OutputFixture, TheHostsBufferIsBoundedAndCountsWhatItDrops) {
  Client c(*stub);
  Ring ring(c, 4096);
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  // The capture's thread empties the pipe while the "driver" writes more than its buffer.
  kernel_print(c, fd, pattern(OutputCapture::kBufferBytes + 1000));
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ordering::load_relaxed(ring.h().dropped), 1000u);
  EXPECT_EQ(ordering::load_relaxed(ring.h().pending), OutputCapture::kBufferBytes - 4096);
  ring.consume();
  EXPECT_EQ(ring.seen, pattern(4096));
}

TEST_F(OutputFixture, ARingGivenBackIsNoLongerWritten) {
  Client c(*stub);
  Ring ring(c, 256);
  ASSERT_EQ(register_ring(c, ring.ref()), 0);
  c.slot->heap().free(ring.block.offset);  // its pages may be another process's now
  kernel_print(c, fd, "late\n");
  ASSERT_EQ(sync(c), 0);
  EXPECT_EQ(ring.write_pos(), 0u);
}

// ---- guest-lib's side, in a child process playing the app.

struct AppRun {
  int status = -1;
  std::string out;
};

// Forks the app: `body` runs with VMCUDA_SOCKET set and the child's stdout into a pipe this
// test reads; the child ends with exit(body()) (atexit handlers run).
AppRun run_app(Stub& s, const std::function<int()>& body) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  std::fflush(stdout);  // nothing of ours is written twice
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::close(p[0]);
    ::close(p[1]);
    ::setenv("VMCUDA_SOCKET", s.endpoint.socket_path().c_str(), 1);
    std::exit(body());
  }
  ::close(p[1]);
  AppRun run;
  char buf[65536];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    run.out.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  ::waitpid(pid, &run.status, 0);
  return run;
}

// cudaDeviceSynchronize's remote part (guest-lib/src/device.cc).
int app_sync() {
  guest::Remote* r = guest::Remote::get(nullptr);
  if (!r) return 90;
  auto l = r->lock();
  return r->call<api::Call::DeviceSynchronize>({}).status;
}

// A first call that needs a context (so the ring is registered) but no device-wide
// synchronize, after which the stub would expect output only from new launches.
int app_connect() {
  guest::Remote* r = guest::Remote::get(nullptr);
  if (!r) return 90;
  auto l = r->lock();
  return r->call<api::Call::MemGetInfo>({}).status;
}

TEST_F(OutputFixture, GuestWritesKernelOutputAmongItsOwnLines) {
  const int out_fd = fd;
  const AppRun run = run_app(*stub, [out_fd] {
    if (app_connect() != 0) return 91;  // connected; the ring is registered
    std::printf("host: before\n");  // buffered (stdout is a pipe), as the kernel's lines will be
    if (::write(out_fd, "kernel: one\nkernel: two\n", 24) != 24) return 92;
    const int st = app_sync();
    std::printf("host: after %d\n", st);
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(run.out, "host: before\nkernel: one\nkernel: two\nhost: after 0\n");
}

TEST_F(OutputFixture, GuestGetsMoreThanItsRingAtOneSynchronize) {
  const int out_fd = fd;
  const std::string big = pattern(300 << 10);  // the guest's ring holds 64 KiB
  const AppRun run = run_app(*stub, [out_fd, &big] {
    if (app_connect() != 0) return 91;
    for (size_t at = 0; at < big.size();) {
      const ssize_t n = ::write(out_fd, big.data() + at, big.size() - at);
      if (n <= 0) return 92;
      at += static_cast<size_t>(n);
    }
    const int st = app_sync();
    std::printf("|after %d\n", st);
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(run.out.size(), big.size() + 9);
  EXPECT_TRUE(run.out == big + "|after 0\n");
}

TEST_F(OutputFixture, GuestWritesWhatIsLeftAtExit) {
  const int out_fd = fd;
  // What the driver wrote without a synchronizing call (natively: at a later launch's start).
  const AppRun run = run_app(*stub, [out_fd] {
    if (app_sync() != 0) return 91;
    std::printf("host: last line\n");
    if (::write(out_fd, "kernel: at exit\n", 16) != 16) return 92;
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
  EXPECT_EQ(run.out, "host: last line\nkernel: at exit\n");
}

}  // namespace
}  // namespace vmcuda::host
