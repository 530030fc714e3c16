// The guest kernel driver against a real QEMU: boot a tiny guest with an
// ivshmem-doorbell device connected to the vmrpc host endpoint, load vmcuda.ko
// (ivshmem-driver/), and run tests/guest/driver_guest_probe.cc through /dev/vmcuda0
// with sleeping waits only (MSI-X must arrive), a client killed mid-call, bad ioctls,
// EBUSY, and a PCI unplug/rescan under an open file. The host side checks what its
// service saw and that the guest kernel printed no oops.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "guest/driver_test_calls.h"
#include "support/temp_socket.h"
#include "support/test_service.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/ordering.h"

namespace vmrpc {
namespace {

int sh(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// TestService plus kDriverHostView, and a record of which owner's slots were closed
// while the guest could still ask (i.e. closed by the guest, not by the VM leaving).
class DriverTestService : public Service {
 public:
  struct Close {
    uint32_t slot;
    uint32_t owner_tag;
    uint64_t views_before;  // host views answered before this close
  };

  std::unique_ptr<SlotService> open(const SlotInfo& info) override {
    return std::make_unique<Slot>(*this, info, inner_.open(info));
  }
  const testing::TestServiceCounters& counters() const { return inner_.counters; }
  std::vector<Close> closes() {
    std::lock_guard l(mu_);
    return closes_;
  }
  uint64_t views() {
    std::lock_guard l(mu_);
    return views_;
  }
  testing::DriverHostView last_view() {
    std::lock_guard l(mu_);
    return last_view_;
  }

 private:
  class Slot : public SlotService {
   public:
    Slot(DriverTestService& s, const SlotInfo& info, std::unique_ptr<SlotService> inner)
        : s_(s), info_(info), inner_(std::move(inner)) {}
    int32_t call(const CallContext& ctx, uint32_t id, std::span<const std::byte> args, std::span<std::byte> reply,
                 uint32_t& reply_bytes) override {
      if (id != testing::kDriverHostView) return inner_->call(ctx, id, args, reply, reply_bytes);
      testing::DriverHostView v{};
      if (reply.size() < sizeof v) return static_cast<int32_t>(wire::ChannelStatus::kReplyTooSmall);
      v.opened = s_.inner_.counters.opened.load();
      v.closed = s_.inner_.counters.closed.load();
      v.slot_count = std::min(ctx.region.layout().slot_count, testing::kDriverViewMaxSlots);
      v.asking_slot = info_.slot;
      for (uint32_t i = 0; i < v.slot_count; ++i) {
        v.state[i] = ordering::load_acquire(ctx.region.control(i).state);
        v.owner_tag[i] = ordering::load_relaxed(ctx.region.control(i).owner_tag);
      }
      std::memcpy(reply.data(), &v, sizeof v);
      reply_bytes = sizeof v;
      std::lock_guard l(s_.mu_);
      ++s_.views_;
      s_.last_view_ = v;
      return 0;
    }
    void close() override {
      {
        std::lock_guard l(s_.mu_);
        s_.closes_.push_back({info_.slot, info_.owner_tag, s_.views_});
      }
      inner_->close();
    }

   private:
    DriverTestService& s_;
    SlotInfo info_;
    std::unique_ptr<SlotService> inner_;
  };

  testing::TestService inner_;
  std::mutex mu_;
  std::vector<Close> closes_;
  uint64_t views_ = 0;
  testing::DriverHostView last_view_{};
};

TEST(QemuDriver, DevVmcudaSlotsSleepOnMsixAndAreFreedWhenTheirProcessDies) {
  if (sh("command -v qemu-system-x86_64 >/dev/null") != 0 || sh("test -x /bin/busybox") != 0)
    GTEST_SKIP() << "qemu-system-x86_64 or busybox-static missing: run scripts/install-deps.sh";
  const std::string src = VMCUDA_SOURCE_DIR, out = VMCUDA_GUEST_DIR;
  ASSERT_EQ(sh(src + "/scripts/guest/fetch-kernel.sh " + out + "/kernel"), 0) << "fetching the guest kernel failed";
  std::string kver = read_file(out + "/kernel/kernel-version");
  while (!kver.empty() && (kver.back() == '\n' || kver.back() == ' ')) kver.pop_back();
  ASSERT_FALSE(kver.empty());
  // VMCUDA_GUEST_MODULE_DIR: test a vmcuda.ko built elsewhere (e.g. by DKMS) instead.
  const char* moddir_env = std::getenv("VMCUDA_GUEST_MODULE_DIR");
  std::string moddir = moddir_env && *moddir_env ? moddir_env : out + "/driver/modules";
  if (!moddir_env || !*moddir_env) {
    const int brc = sh(src + "/ivshmem-driver/build-guest-module.sh " + out + "/driver " + kver);
    if (brc == 77) GTEST_SKIP() << "linux-headers-" << kver << " not installed: run ivshmem-driver/install-headers.sh";
    ASSERT_EQ(brc, 0) << "building vmcuda.ko failed";
  }
  ASSERT_EQ(sh("test -f " + moddir + "/vmcuda.ko"), 0) << "no vmcuda.ko in " << moddir;
  const std::string initrd = out + "/driver-probe.cpio.gz";
  ASSERT_EQ(sh(src + "/scripts/guest/build-initramfs.sh " + initrd + " --init-script " + src +
               "/tests/guest/driver_guest_test.sh --add " + src +
               "/scripts/guest/find-ivshmem.sh:/bin/find-ivshmem.sh --add " DRIVER_GUEST_PROBE
               ":/bin/driver_guest_probe --modules " + moddir + " 2>/dev/null"),
            0);

  DriverTestService service;
  // 16 MiB region, 4 slots = 4 vectors.
  HostEndpoint host({testing::temp_socket_path("qdrv"), RegionConfig{16ull << 20, 4, 64 << 10, 4096}, 2}, service);
  host.start();
  const std::string log = out + "/driver-probe.log";
  const int rc = sh(src + "/scripts/guest/boot.sh --kernel " + out + "/kernel/vmlinux --initrd " + initrd +
                    " --ivshmem-socket " + host.socket_path() + " --vectors 4 --timeout 240 --log " + log +
                    // Poison and check the slab: a use-after-free in the driver prints "BUG".
                    " --append 'slub_debug=FZP,kmalloc-*'" +
                    " >/dev/null 2>&1");
  const std::string text = read_file(log);
  EXPECT_EQ(rc, 0) << "guest log:\n" << text;
  EXPECT_NE(text.find("DRIVER-GUEST-OK"), std::string::npos) << text;
  EXPECT_NE(text.find("DRIVER-UNPLUG-OK"), std::string::npos) << text;
  // open() of a region without the vmrpc magic was refused with a clear line.
  EXPECT_NE(text.find("shared memory has no vmrpc header"), std::string::npos) << text;
  EXPECT_NE(text.find("is the vmcuda host stub serving"), std::string::npos) << text;
  std::smatch m;
  EXPECT_FALSE(std::regex_search(text, m, std::regex("Oops|(^|[^A-Za-z])BUG[: ]|Call Trace|WARNING:")))
      << "kernel complained: " << m.str() << "\n" << text;

  // The killed child's slot was closed by the guest (its driver), while the guest
  // could still ask the host about it, not when the VM went away.
  ASSERT_TRUE(std::regex_search(text, m, std::regex("DRIVER-KILLED-CHILD pid=([0-9]+) slot=([0-9]+)"))) << text;
  const uint32_t pid = std::stoul(m[1]), slot = std::stoul(m[2]);
  const auto closes = service.closes();
  bool seen = false;
  for (const auto& c : closes)
    if (c.owner_tag == pid && c.slot == slot && c.views_before < service.views()) seen = true;
  EXPECT_TRUE(seen) << "no close of slot " << slot << " owned by pid " << pid << " before the guest's last query";
  // At the guest's last query every slot but the asking one was Free in the region.
  const auto v = service.last_view();
  EXPECT_EQ(v.slot_count, 4u);
  for (uint32_t i = 0; i < v.slot_count; ++i)
    EXPECT_EQ(v.state[i], i == v.asking_slot ? 1u : 0u) << "slot " << i << " at the guest's last query";

  // QEMU exited: the connection is gone and every slot the service opened is closed.
  for (int i = 0; i < 300 && host.stats().connections_open != 0; ++i) usleep(10000);
  const auto st = host.stats();
  EXPECT_EQ(st.connections_open, 0u);
  EXPECT_EQ(st.connections_total, 1u);
  EXPECT_EQ(st.slots_serving, 0u);
  EXPECT_EQ(service.counters().closed.load(), service.counters().opened.load());
  EXPECT_GE(service.counters().opened.load(), 8u);  // 2 + bad-args + EBUSY fill + child + last + unplug
  EXPECT_EQ(st.bad_batches_total, 0u);
}

}  // namespace
}  // namespace vmrpc
