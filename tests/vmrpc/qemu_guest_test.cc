// A real QEMU is the peer: boot a tiny guest with an ivshmem-doorbell device connected
// to the vmrpc host endpoint; a static program in the guest talks to us through BAR2
// and the BAR0 doorbell (tests/guest/vmrpc_guest_probe.cc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/host_endpoint.h"

namespace vmrpc {
namespace {

int sh(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

TEST(QemuGuest, GuestClaimsASlotAndTheHostAnswersThroughIvshmem) {
  if (sh("command -v qemu-system-x86_64 >/dev/null") != 0 || sh("test -x /bin/busybox") != 0)
    GTEST_SKIP() << "qemu-system-x86_64 or busybox-static missing: run scripts/install-deps.sh";
  const std::string src = VMCUDA_SOURCE_DIR, out = VMCUDA_GUEST_DIR;
  ASSERT_EQ(sh(src + "/scripts/guest/fetch-kernel.sh " + out + "/kernel"), 0) << "fetching the guest kernel failed";
  const std::string initrd = out + "/vmrpc-probe.cpio.gz";
  ASSERT_EQ(sh(src + "/scripts/guest/build-initramfs.sh " + initrd + " --init-script " + src +
               "/tests/guest/vmrpc_guest_test.sh --add " + src +
               "/scripts/guest/find-ivshmem.sh:/bin/find-ivshmem.sh --add " VMRPC_GUEST_PROBE
               ":/bin/vmrpc_guest_probe"),
            0);

  testing::TestService service;
  // 16 MiB region, 4 slots = 4 vectors.
  HostEndpoint host({testing::temp_socket_path("qemu"), RegionConfig{16ull << 20, 4, 64 << 10, 4096}, 2}, service);
  host.start();
  const std::string log = out + "/vmrpc-probe.log";
  const int rc = sh(src + "/scripts/guest/boot.sh --kernel " + out + "/kernel/vmlinux --initrd " + initrd +
                    " --ivshmem-socket " + host.socket_path() + " --vectors 4 --timeout 240 --log " + log +
                    " >/dev/null");
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(rc, 0) << "guest log:\n" << text;
  EXPECT_NE(text.find("VMRPC-GUEST-OK"), std::string::npos) << text;
  EXPECT_EQ(service.counters.opened.load(), 1u);
  EXPECT_GE(service.counters.calls.load(), 2u);  // XorCopy + HeapChecksum (+ channel calls)
  // QEMU exited: its connection (and the slot) are gone.
  for (int i = 0; i < 300 && host.stats().connections_open != 0; ++i) usleep(10000);
  EXPECT_EQ(host.stats().connections_open, 0u);
  EXPECT_EQ(host.stats().connections_total, 1u);
  EXPECT_EQ(service.counters.closed.load(), 1u);
}

}  // namespace
}  // namespace vmrpc
