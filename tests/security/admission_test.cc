// Finding 10.6: what one tenant or one local user can make a VM's stub take in clients and
// connections. Programs served at once are bounded per VM (--max-clients, policy key
// max_clients); one more is refused with a clear status, costs no worker process, and leaves
// the programs already served alone; a freed place serves again. Connections are bounded per
// user, in number and in rate, so that one local user cannot take all of a socket's.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/ordering.h"
#include "vmrpc/worker.h"

namespace vmrpc {
namespace {

using wire::ChannelStatus;

template <class Pred>
bool eventually(Pred p, int ms = 5000) {
  for (int i = 0; i < ms / 5; ++i) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return p();
}

bool echo_works(ClientSlot& s) {
  const char msg[] = "still served";
  auto r = s.call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(msg)), 64);
  return r.status == 0 && r.bytes.size() >= sizeof msg && std::memcmp(r.bytes.data(), msg, sizeof msg) == 0;
}

// With worker processes (--isolation process): a guest that claims slot after slot beyond
// the limit gets kRefused (the guest library: cudaErrorDevicesUnavailable) every time, and
// the stub starts no process for any of them.
TEST(SecurityClients, BeyondTheLimitAProgramIsRefusedAndCostsNoProcess) {
  testing::TestService unused;
  std::atomic<int> spawned{0};
  HostEndpointOptions o{testing::temp_socket_path("admission"), RegionConfig{16ull << 20, 8, 64 << 10, 4096}, 8,
                        [&](const WorkerSpec& spec) {
                          ++spawned;
                          return spawn_worker_process(VMRPC_TEST_WORKER, {}, spec);
                        }};
  o.max_clients = 2;
  HostEndpoint host(o, unused);
  host.start();
  auto conn = LocalConnection::connect(host.socket_path());
  std::string why;
  auto a = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(a) << why;
  auto b = ClientSlot::claim(conn->region(), *conn, &why);
  ASSERT_TRUE(b) << why;
  ASSERT_TRUE(eventually([&] { return spawned == 2; }));
  // Over and over, as a hostile guest would: each refused, none costs a process.
  for (int i = 0; i < 20; ++i) {
    why.clear();
    EXPECT_FALSE(ClientSlot::claim(conn->region(), *conn, &why));
    EXPECT_NE(why.find("--max-clients"), std::string::npos) << why;
  }
  // A guest that ignores the refusal and rings again and again with a batch (a slot it
  // claims by hand): each answered kRefused, still no process.
  {
    auto& ctl = conn->region().control(2);
    // The refused claims above hand their slots back as they go; the host frees each on its
    // own loop, so slot 2 may still be closing for a moment.
    ASSERT_TRUE(eventually([&] {
      uint32_t expected = uint32_t(wire::SlotState::kFree);
      return ordering::compare_exchange(ctl.state, expected, uint32_t(wire::SlotState::kClaimed));
    }));
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      ordering::store_relaxed(ctl.request_bytes, 0u);
      ordering::store_release(ctl.request_seq, seq);
      conn->ring(2);
      ASSERT_TRUE(eventually([&] { return ordering::load_acquire(ctl.response_seq) == seq; })) << seq;
      EXPECT_EQ(ordering::load_relaxed(ctl.batch_status), static_cast<int32_t>(ChannelStatus::kRefused));
      EXPECT_EQ(ordering::load_acquire(ctl.host_state), uint32_t(wire::HostSlotState::kRefused));
    }
    ordering::store_release(ctl.state, uint32_t(wire::SlotState::kClosing));  // released: handed back
    conn->ring(2);
    ASSERT_TRUE(eventually([&] { return ordering::load_acquire(ctl.state) == uint32_t(wire::SlotState::kFree); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(spawned.load(), 2);
  EXPECT_GE(host.stats().clients_refused_total, 20u);
  // The programs served before are not touched.
  EXPECT_TRUE(echo_works(*a));
  EXPECT_TRUE(echo_works(*b));
  // One leaves: its place serves a new program (a new process), the other goes on.
  a.reset();
  std::unique_ptr<ClientSlot> c;
  ASSERT_TRUE(eventually([&] { return (c = ClientSlot::claim(conn->region(), *conn, &why)) != nullptr; })) << why;
  EXPECT_TRUE(echo_works(*c));
  EXPECT_TRUE(echo_works(*b));
  EXPECT_EQ(spawned.load(), 3);
}

// One user holds at most max_connections_per_user connections of a socket; the next is
// closed before anything is made for it, and one closed makes room again.
TEST(SecurityConnections, OneUserCannotHoldEveryConnection) {
  testing::TestService service;
  HostEndpointOptions o{testing::temp_socket_path("conns"), RegionConfig{16ull << 20, 4, 64 << 10, 4096}, 64};
  o.max_connections_per_user = 3;
  o.connect_rate_per_user = 0;
  HostEndpoint host(o, service);
  host.start();
  std::vector<std::unique_ptr<LocalConnection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(LocalConnection::connect(host.socket_path()));
  try {
    LocalConnection::connect(host.socket_path());
    ADD_FAILURE() << "a fourth connection of the same user was served";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
  EXPECT_EQ(host.stats().connections_open, 3u);
  EXPECT_GE(host.stats().connections_refused_total, 1u);
  // Those held still work.
  std::string why;
  auto s = ClientSlot::claim(held[0]->region(), *held[0], &why);
  ASSERT_TRUE(s) << why;
  EXPECT_TRUE(echo_works(*s));
  s.reset();
  held.pop_back();
  ASSERT_TRUE(eventually([&] { return host.stats().connections_open == 2; }));
  EXPECT_NO_THROW(held.push_back(LocalConnection::connect(host.socket_path())));

  // Another user is not held back by this one's count (needs root to be another user).
  if (::geteuid() != 0) GTEST_SKIP() << "another user's connection needs root";
  ASSERT_EQ(::chmod(host.socket_path().c_str(), 0666), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
    try {
      auto other = LocalConnection::connect(host.socket_path());
      _exit(0);
    } catch (...) {
      _exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "another user was refused: " << status;
}

// Connecting faster than the rate (after a burst) is refused at once; after a pause the
// same user is served again.
TEST(SecurityConnections, ConnectingTooFastIsRefusedThenServedAgain) {
  testing::TestService service;
  HostEndpointOptions o{testing::temp_socket_path("rate"), RegionConfig{16ull << 20, 4, 64 << 10, 4096}, 64};
  o.max_connections_per_user = 4;  // also the burst
  o.connect_rate_per_user = 5;
  HostEndpoint host(o, service);
  host.start();
  int served = 0, refused = 0;
  for (int i = 0; i < 12; ++i) {
    try {
      auto c = LocalConnection::connect(host.socket_path());
      ++served;
    } catch (const std::exception&) {
      ++refused;
    }
    // Closed before the next: only the rate can refuse it, not the count.
    ASSERT_TRUE(eventually([&] { return host.stats().connections_open == 0; }));
  }
  // 4 at once, then 5 a second: the loop above takes well under a second on any machine.
  EXPECT_GE(served, 4);
  EXPECT_LE(served, 10);
  EXPECT_GE(refused, 2);
  EXPECT_EQ(host.stats().connections_refused_total, static_cast<uint64_t>(refused));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_NO_THROW(LocalConnection::connect(host.socket_path()));
}

}  // namespace
}  // namespace vmrpc
