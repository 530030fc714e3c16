// Two real processes over the socket: this test process hosts the endpoint, the
// client program (tests/vmrpc/test_client_main.cc) runs as a child.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/host_endpoint.h"

namespace vmrpc {
namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;  // the child's stdout
};

Child spawn(const std::string& socket, const char* mode, uint64_t n) {
  int p[2];
  if (pipe(p) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    std::string arg = std::to_string(n);
    execl(VMRPC_TEST_CLIENT, VMRPC_TEST_CLIENT, socket.c_str(), mode, arg.c_str(), nullptr);
    _exit(127);
  }
  close(p[1]);
  return {pid, p[0]};
}

int wait_exit(const Child& c) {
  int st = 0;
  waitpid(c.pid, &st, 0);
  close(c.out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string read_line(int fd) {
  std::string s;
  char ch;
  while (read(fd, &ch, 1) == 1 && ch != '\n') s += ch;
  return s;
}

uint64_t max_payload_mib() {
  const char* e = std::getenv("VMRPC_TEST_MAX_PAYLOAD_MIB");
  return e ? std::strtoull(e, nullptr, 0) : 320;
}

TEST(TwoProcess, BatchedCallsWithPayloadsFromBytesToHundredsOfMiB) {
  testing::TestService service;
  const uint64_t mib = max_payload_mib();
  uint64_t region = 64ull << 20;
  while (region < 2 * (mib << 20) + (64ull << 20)) region <<= 1;
  HostEndpoint host({testing::temp_socket_path("2p"), RegionConfig{region, 8, 1 << 20, 4096}, 8}, service);
  host.start();
  auto c = spawn(host.socket_path(), "payload", mib);
  EXPECT_EQ(wait_exit(c), 0);
  EXPECT_GE(service.counters.calls.load(), 10u);
}

TEST(TwoProcess, KilledClientMidCallFreesItsSlotAndOthersGoOn) {
  testing::TestService service;
  HostEndpoint host({testing::temp_socket_path("kill"), RegionConfig{16ull << 20, 4, 64 << 10, 4096}, 8}, service);
  host.start();
  auto victim = spawn(host.socket_path(), "hang", 3000);
  ASSERT_EQ(read_line(victim.out).rfind("READY", 0), 0u);
  auto survivor = spawn(host.socket_path(), "loop", 1500);
  for (int i = 0; i < 1000 && host.stats().slots_serving < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(host.stats().connections_open, 2u);
  EXPECT_EQ(host.stats().slots_serving, 2u);
  kill(victim.pid, SIGKILL);
  EXPECT_EQ(wait_exit(victim), 128 + SIGKILL);
  // The victim's connection and slot go away once its call returns; the survivor is
  // served all along.
  EXPECT_EQ(wait_exit(survivor), 0);
  for (int i = 0; i < 500 && (host.stats().connections_open != 0 || service.counters.closed != 2); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto st = host.stats();
  EXPECT_EQ(st.connections_open, 0u);
  EXPECT_EQ(st.slots_serving, 0u);
  EXPECT_EQ(st.slots_closed_total, 2u);
  EXPECT_EQ(service.counters.opened.load(), 2u);
  EXPECT_EQ(service.counters.closed.load(), 2u);  // the victim's resources were freed too
}

}  // namespace
}  // namespace vmrpc
