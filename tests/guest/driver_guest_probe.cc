// Runs inside the test VM (static) with the vmcuda driver loaded: exercises
// /dev/vmcudaN against the vmrpc host endpoint (tests/vmrpc/qemu_driver_test.cc).
//
//   driver_guest_probe main DEV          slots, sleeping waits on MSI-X, poll, spinning,
//                                        bad ioctls, EBUSY, a client killed mid-call;
//                                        prints DRIVER-GUEST-OK
//   driver_guest_probe unplug DEV SYSFS  removes the PCI device under an open file,
//                                        rescans, uses the new device; prints
//                                        DRIVER-UNPLUG-OK
//
// Meant to run with VMRPC_GUEST_SPIN_NS=0, so that every reply is waited for by
// sleeping on the slot's MSI-X vector.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "guest/driver_test_calls.h"
#include "support/test_service.h"
#include "uapi/vmcuda.h"
#include "vmrpc/driver_doorbell.h"
#include "vmrpc/knobs.h"
#include "vmrpc/ordering.h"

using namespace vmrpc;

namespace {

[[noreturn]] void die(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "guest: FAIL: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(nullptr);
  std::exit(code);
}

#define CHECK(cond, code, ...) \
  do {                         \
    if (!(cond)) die(code, __VA_ARGS__); \
  } while (0)

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

uint32_t slot_state(const RegionView& r, uint32_t slot) { return ordering::load_acquire(r.control(slot).state); }

// Waits until every slot except those in `keep` is Free (the host freed them).
bool wait_all_free(const RegionView& r, std::vector<uint32_t> keep, uint64_t timeout_ms) {
  const uint64_t end = now_ms() + timeout_ms;
  for (;;) {
    bool all = true;
    for (uint32_t i = 0; i < r.layout().slot_count; ++i) {
      bool kept = false;
      for (uint32_t k : keep) kept |= k == i;
      if (!kept && slot_state(r, i) != static_cast<uint32_t>(wire::SlotState::kFree)) all = false;
    }
    if (all) return true;
    if (now_ms() > end) return false;
    usleep(2000);
  }
}

uint64_t owned_heap_pages(const RegionView& r, uint32_t slot) {
  uint64_t n = 0;
  for (uint64_t p = 0; p < r.layout().heap_pages(); ++p)
    if (ordering::load_relaxed(r.heap_table()[p]) == slot + 1) ++n;
  return n;
}

void echo(ClientSlot& s, const std::string& what) {
  auto r = s.call(static_cast<uint32_t>(wire::MessageId::kEcho), std::as_bytes(std::span(what.data(), what.size())),
                  256);
  CHECK(r.status == 0 && r.bytes.size() == what.size() && std::memcmp(r.bytes.data(), what.data(), what.size()) == 0,
        5, "echo on slot %u failed (status %d)", s.index(), r.status);
}

void xor_copy(ClientSlot& s, uint64_t n, uint8_t key) {
  auto in = s.heap().allocate(n), out = s.heap().allocate(n);
  CHECK(in && out, 6, "heap allocation of 2 x %llu bytes failed", (unsigned long long)n);
  for (uint64_t i = 0; i < n; ++i) in->data[i] = std::byte(uint8_t(i * 7 + s.index()));
  testing::XorCopyArgs a{in->ref(), out->ref(), key, {}};
  auto f1 = s.batch().append(testing::kXorCopy, std::as_bytes(std::span(&a, 1)), 0);
  wire::HeapRef ref = out->ref();
  auto f2 = s.batch().append(testing::kHeapChecksum, std::as_bytes(std::span(&ref, 1)), 8);
  CHECK(f1 && f2, 7, "batch append failed");
  CHECK(s.flush() == wire::ChannelStatus::kOk && s.result(*f1).status == 0 && s.result(*f2).status == 0, 7,
        "XorCopy batch on slot %u failed", s.index());
  for (uint64_t i = 0; i < n; ++i)
    CHECK(out->data[i] == (std::byte(uint8_t(i * 7 + s.index())) ^ std::byte{key}), 8, "heap byte %llu differs",
          (unsigned long long)i);
  uint64_t sum;
  std::memcpy(&sum, s.result(*f2).reply.data(), 8);
  CHECK(sum == testing::fnv1a(out->data, n), 9, "heap checksum differs");
  s.heap().free(in->offset);
  s.heap().free(out->offset);
}

testing::DriverHostView host_view(ClientSlot& s) {
  auto r = s.call(testing::kDriverHostView, {}, sizeof(testing::DriverHostView));
  CHECK(r.status == 0 && r.bytes.size() == sizeof(testing::DriverHostView), 11, "host view call failed (status %d)",
        r.status);
  testing::DriverHostView v;
  std::memcpy(&v, r.bytes.data(), sizeof v);
  return v;
}

std::unique_ptr<ClientSlot> adopt(DriverDevice& d) {
  std::string why;
  auto s = ClientSlot::adopt(d.region(), d, d.slot(), &why);
  CHECK(s != nullptr, 4, "adopt slot %u: %s", d.slot(), why.c_str());
  return s;
}

void on_alarm(int) {}

// Errno of an ioctl that must fail.
int ioctl_errno(int fd, unsigned long cmd, void* arg) {
  errno = 0;
  int rc = ::ioctl(fd, cmd, arg);
  return rc < 0 ? errno : 0;
}

void bad_arguments(const std::string& dev, uint64_t region_bytes) {
  UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
  CHECK(fd, 20, "open %s: %s", dev.c_str(), std::strerror(errno));
  const int f = fd.get();
  struct {
    unsigned long cmd;
    void* arg;
    int want;
    const char* what;
  } cases[] = {
      {_IO(VMCUDA_IOC_MAGIC, 0x7f), nullptr, ENOTTY, "unknown number"},
      {_IOWR(VMCUDA_IOC_MAGIC, 0x04, uint64_t), nullptr, ENOTTY, "unknown number with a size"},
      {_IOR(VMCUDA_IOC_MAGIC, 0x01, uint32_t), nullptr, EINVAL, "INFO with the wrong size"},
      {_IOR(VMCUDA_IOC_MAGIC, 0x01, char[4096]), nullptr, EINVAL, "INFO with a huge size"},
      {_IOW(VMCUDA_IOC_MAGIC, 0x03, vmcuda_wait), nullptr, EINVAL, "WAIT with the wrong direction"},
      {_IOWR(VMCUDA_IOC_MAGIC, 0x02, uint64_t), nullptr, EINVAL, "RING with an argument size"},
      {TCGETS, nullptr, ENOTTY, "a tty ioctl"},
      {_IOR('V', 0x01, vmcuda_info), nullptr, ENOTTY, "another driver's magic"},
      {VMCUDA_IOC_INFO, nullptr, EFAULT, "INFO to NULL"},
      {VMCUDA_IOC_INFO, reinterpret_cast<void*>(1), EFAULT, "INFO to address 1"},
      {VMCUDA_IOC_INFO, reinterpret_cast<void*>(0xffffffff81000000ull), EFAULT, "INFO to a kernel address"},
      {VMCUDA_IOC_WAIT, nullptr, EFAULT, "WAIT from NULL"},
      {VMCUDA_IOC_WAIT, reinterpret_cast<void*>(0xffff888000000000ull), EFAULT, "WAIT from a kernel address"},
  };
  for (auto& c : cases) {
    int e = ioctl_errno(f, c.cmd, c.arg);
    CHECK(e == c.want, 21, "ioctl %s: errno %d (%s), want %d", c.what, e, std::strerror(e), c.want);
  }
  // Sweep: every direction and a range of sizes for the first 16 numbers of our magic.
  // Only the exact INFO and RING commands may succeed (WAIT is left out: it sleeps).
  {
    alignas(16) static unsigned char buf[8192];
    const unsigned sizes[] = {0, 1, 4, 8, 16, 23, 24, 25, 63, 64, 65, 4095, 8191};
    unsigned calls = 0;
    for (unsigned nr = 0; nr < 16; ++nr)
      for (unsigned dir = 0; dir < 4; ++dir)
        for (unsigned size : sizes) {
          const unsigned long cmd = _IOC(dir, VMCUDA_IOC_MAGIC, nr, size);
          if (cmd == VMCUDA_IOC_WAIT) continue;
          std::memset(buf, 0xa5, sizeof buf);
          const int e = ioctl_errno(f, cmd, buf);
          ++calls;
          if (cmd == VMCUDA_IOC_INFO || cmd == VMCUDA_IOC_RING) {
            CHECK(e == 0, 21, "ioctl %#lx failed: %s", cmd, std::strerror(e));
          } else {
            CHECK(e == EINVAL || e == ENOTTY, 21, "ioctl %#lx: errno %d (%s), want EINVAL or ENOTTY", cmd, e,
                  std::strerror(e));
          }
        }
    CHECK(calls > 800, 21, "sweep ran only %u calls", calls);
  }
  vmcuda_wait w{0, 0, 1, 0};
  CHECK(ioctl_errno(f, VMCUDA_IOC_WAIT, &w) == EINVAL, 22, "WAIT with flags != 0 accepted");
  w = {0, 0, 0, 7};
  CHECK(ioctl_errno(f, VMCUDA_IOC_WAIT, &w) == EINVAL, 22, "WAIT with reserved != 0 accepted");
  // Nobody rings this fresh slot: a short wait times out, a 0 wait does not sleep.
  w = {0, 0, 0, 0};
  CHECK(ioctl_errno(f, VMCUDA_IOC_WAIT, &w) == ETIMEDOUT, 23, "WAIT(0) without an interrupt did not time out");
  w = {20000000, 0, 0, 0};
  uint64_t t0 = now_ms();
  CHECK(ioctl_errno(f, VMCUDA_IOC_WAIT, &w) == ETIMEDOUT, 23, "WAIT(20 ms) did not time out");
  CHECK(now_ms() - t0 >= 15, 23, "WAIT(20 ms) returned after %llu ms", (unsigned long long)(now_ms() - t0));
  pollfd p{f, POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0, 23, "poll reports an event nobody sent (revents %#x)", p.revents);
  // A signal ends a sleep with EINTR (not restarted).
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval it{};
  it.it_value.tv_usec = 50000;
  setitimer(ITIMER_REAL, &it, nullptr);
  w = {VMCUDA_WAIT_FOREVER, 0, 0, 0};
  CHECK(ioctl_errno(f, VMCUDA_IOC_WAIT, &w) == EINTR, 24, "WAIT(forever) was not interrupted by SIGALRM");
  signal(SIGALRM, SIG_DFL);
  // read/write/lseek are not supported.
  char b[8];
  CHECK(::read(f, b, sizeof b) < 0, 25, "read succeeded");
  CHECK(::write(f, b, sizeof b) < 0, 25, "write succeeded");
  CHECK(::lseek(f, 0, SEEK_SET) < 0 && errno == ESPIPE, 25, "lseek did not fail with ESPIPE");
  // mmap: shared only, within BAR2.
  const size_t pg = 4096, len = region_bytes;
  auto map_errno = [&](size_t l, int flags, off_t off) {
    void* m = ::mmap(nullptr, l, PROT_READ | PROT_WRITE, flags, f, off);
    if (m == MAP_FAILED) return errno;
    ::munmap(m, l);
    return 0;
  };
  CHECK(map_errno(len, MAP_PRIVATE, 0) == EINVAL, 26, "private mapping accepted");
  CHECK(map_errno(len + pg, MAP_SHARED, 0) == EINVAL, 26, "mapping larger than BAR2 accepted");
  CHECK(map_errno(pg, MAP_SHARED, off_t(len)) == EINVAL, 26, "mapping at the end of BAR2 accepted");
  CHECK(map_errno(2 * pg, MAP_SHARED, off_t(len - pg)) == EINVAL, 26, "mapping across the end of BAR2 accepted");
  CHECK(map_errno(pg, MAP_SHARED, off_t(1) << 50) == EINVAL, 26, "mapping at a huge offset accepted");
  CHECK(map_errno(len - pg, MAP_SHARED, off_t(pg)) == 0, 26, "mapping at an offset inside BAR2 refused");
  // Many rings of our own slot are harmless.
  for (int i = 0; i < 100; ++i) CHECK(::ioctl(f, VMCUDA_IOC_RING) == 0, 27, "RING failed: %s", std::strerror(errno));
  std::printf("guest: bad ioctl / mmap / read / signal checks passed\n");
}

int run_main(const std::string& dev) {
  CHECK(knobs::kGuestSpinNs.get() == 0, 2, "run with VMRPC_GUEST_SPIN_NS=0 (replies must be waited for by sleeping)");
  // ---- two files, two slots
  auto a = DriverDevice::open(dev);
  auto b = DriverDevice::open(dev);
  const auto& ia = a->info();
  const auto& l = a->region().layout();
  std::printf("guest: driver v%u, region %llu MiB, %u slots, %u vectors, IVPosition %u, host peer %u; slots %u and %u\n",
              ia.version, (unsigned long long)(ia.region_bytes >> 20), ia.slot_count, ia.vectors, ia.iv_position,
              ia.host_peer_id, a->slot(), b->slot());
  CHECK(a->slot() != b->slot(), 3, "two opens got the same slot %u", a->slot());
  CHECK(ia.iv_position == l.guest_peer_id, 3, "IVPosition %u, region says %u", ia.iv_position, l.guest_peer_id);
  CHECK(ia.slot_count <= testing::kDriverViewMaxSlots, 3, "test wants <= %u slots", testing::kDriverViewMaxSlots);
  CHECK(slot_state(a->region(), a->slot()) == 1 && slot_state(a->region(), b->slot()) == 1, 3,
        "slots are not Claimed after open");
  CHECK(ordering::load_relaxed(a->region().control(a->slot()).owner_tag) == uint32_t(getpid()), 3,
        "owner_tag is not our pid");
  auto sa = adopt(*a);
  auto sb = adopt(*b);
  // ---- sleeping round trips: each reply is waited for on MSI-X
  for (int i = 0; i < 20; ++i) {
    echo(*sa, "slot a, call " + std::to_string(i));
    echo(*sb, "slot b, call " + std::to_string(i));
  }
  xor_copy(*sa, 1 << 20, 0x3c);
  xor_copy(*sb, 256 << 10, 0xa5);
  CHECK(a->stats().wakeups > 0 && b->stats().wakeups > 0, 10, "no MSI-X wake-ups (a %llu, b %llu)",
        (unsigned long long)a->stats().wakeups, (unsigned long long)b->stats().wakeups);
  CHECK(a->stats().timeouts == 0 && b->stats().timeouts == 0, 10, "waits timed out (a %llu, b %llu)",
        (unsigned long long)a->stats().timeouts, (unsigned long long)b->stats().timeouts);
  std::printf("guest: sleeping round trips ok: slot %u %llu waits %llu wake-ups, slot %u %llu waits %llu wake-ups\n",
              a->slot(), (unsigned long long)a->stats().waits, (unsigned long long)a->stats().wakeups, b->slot(),
              (unsigned long long)b->stats().waits, (unsigned long long)b->stats().wakeups);
  // ---- poll() instead of the WAIT ioctl
  b->set_wait_mode(DriverDevice::WaitMode::kPoll);
  const uint64_t w0 = b->stats().wakeups;
  for (int i = 0; i < 10; ++i) echo(*sb, "polled " + std::to_string(i));
  xor_copy(*sb, 64 << 10, 0x11);
  CHECK(b->stats().wakeups > w0 && b->stats().timeouts == 0, 12, "poll mode: %llu wake-ups, %llu timeouts",
        (unsigned long long)(b->stats().wakeups - w0), (unsigned long long)b->stats().timeouts);
  b->set_wait_mode(DriverDevice::WaitMode::kIoctl);
  std::printf("guest: poll() wake-ups ok (%llu)\n", (unsigned long long)(b->stats().wakeups - w0));
  // ---- spinning on the mapping (no sleep at all), and CAS on it from user space
  knobs::kGuestSpinNs.set(2000000000);
  const uint64_t waits0 = a->stats().waits;
  for (int i = 0; i < 10; ++i) echo(*sa, "spun " + std::to_string(i));
  CHECK(a->stats().waits == waits0, 13, "spinning client slept %llu times",
        (unsigned long long)(a->stats().waits - waits0));
  knobs::kGuestSpinNs.set(0);
  {
    auto blk = sa->heap().allocate(4096);
    CHECK(blk.has_value(), 13, "heap allocation failed");
    auto* word = reinterpret_cast<uint64_t*>(blk->data);
    *word = 41;
    uint64_t expect = 41;
    CHECK(ordering::compare_exchange(*word, expect, uint64_t{42}) && *word == 42, 13, "CAS on the mapping failed");
    expect = 41;
    CHECK(!ordering::compare_exchange(*word, expect, uint64_t{43}) && expect == 42, 13, "failing CAS misbehaved");
    std::atomic_ref<uint64_t> ar(*word);
    std::thread t([&] { for (int i = 0; i < 10000; ++i) ar.fetch_add(1); });
    for (int i = 0; i < 10000; ++i) ar.fetch_add(1);
    t.join();
    CHECK(ar.load() == 20042, 13, "atomic adds on the mapping lost updates (%llu)", (unsigned long long)ar.load());
    sa->heap().free(blk->offset);
  }
  std::printf("guest: spinning and CAS on the mapped region ok\n");
  // ---- bad arguments on a third file (claims and frees a slot without Hello)
  bad_arguments(dev, ia.region_bytes);
  CHECK(wait_all_free(a->region(), {a->slot(), b->slot()}, 10000), 28,
        "a slot closed without Hello was not freed by the host");
  // ---- open() checks the region header (the host never reads it back: safe to poke)
  {
    auto& h = a->region().header();
    auto refused = [&](const char* what) {
      errno = 0;
      UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
      CHECK(!fd && errno == ENODEV, 14, "open with %s: %s, want ENODEV", what, fd ? "success" : std::strerror(errno));
    };
    const uint64_t magic = h.magic;
    h.magic = 0;
    refused("no magic");
    h.magic = magic;
    const uint32_t abi = h.abi_version;
    h.abi_version = abi + 1;
    refused("another ABI version");
    h.abi_version = abi;
    const uint32_t slots = h.slot_count;
    h.slot_count = 100000;
    refused("a slot count past the region");
    h.slot_count = slots;
    const uint64_t off = h.slots_offset;
    h.slots_offset = h.region_bytes - 4096;
    refused("slots past the end of the region");
    h.slots_offset = off;
    UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
    CHECK(fd, 14, "open after restoring the header: %s", std::strerror(errno));
    std::printf("guest: open() refuses bad region headers\n");
  }
  // ---- open/close churn without Hello: every slot must come back
  {
    int busy = 0;
    for (int i = 0; i < 200; ++i) {
      UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
      if (!fd) {
        CHECK(errno == EBUSY, 28, "churn open: %s", std::strerror(errno));
        ++busy;
        usleep(1000);
      }
    }
    CHECK(wait_all_free(a->region(), {a->slot(), b->slot()}, 10000), 28,
          "slots opened and closed at once were not all freed (states %u %u %u %u)", slot_state(a->region(), 0),
          slot_state(a->region(), 1), slot_state(a->region(), 2), slot_state(a->region(), 3));
    std::printf("guest: 200 open/close without Hello: all slots freed (%d EBUSY on the way)\n", busy);
  }
  // ---- every slot taken: EBUSY, then all freed again
  {
    std::vector<UniqueFd> fds;
    for (;;) {
      UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
      if (!fd) {
        CHECK(errno == EBUSY, 29, "open with no free slot: %s, want EBUSY", std::strerror(errno));
        break;
      }
      fds.push_back(std::move(fd));
      CHECK(fds.size() <= ia.slot_count, 29, "more opens than slots");
    }
    CHECK(fds.size() + 2 == std::min(ia.slot_count, ia.vectors), 29, "%zu opens before EBUSY, want %u", fds.size(),
          std::min(ia.slot_count, ia.vectors) - 2);
    std::printf("guest: %zu more opens, then EBUSY\n", fds.size());
  }
  CHECK(wait_all_free(a->region(), {a->slot(), b->slot()}, 10000), 29, "slots were not freed after close");
  // ---- a client killed in the middle of a call
  const uint64_t closed0 = host_view(*sa).closed;
  int pfd[2];
  CHECK(::pipe(pfd) == 0, 30, "pipe");
  const pid_t child = ::fork();
  CHECK(child >= 0, 30, "fork");
  if (child == 0) {
    ::close(pfd[0]);
    // sa/sb are the parent's slots: never destroyed here (that would close them in
    // shared memory); the child leaves by _exit or death only.
    auto d = DriverDevice::open(dev);
    auto s = adopt(*d);
    auto blk = s->heap().allocate(64 << 10);  // heap pages the host must reclaim
    if (!blk) _exit(31);
    std::memset(blk->data, 0x5a, 64 << 10);
    uint32_t slot = d->slot();
    if (::write(pfd[1], &slot, sizeof slot) != sizeof slot) _exit(32);
    uint32_t ms = 1200;
    auto r = s->call(testing::kSleepMs, std::as_bytes(std::span(&ms, 1)), 0);
    _exit(r.status == 0 ? 33 : 34);  // never reached: killed while sleeping on the reply
  }
  ::close(pfd[1]);
  uint32_t cslot = ~0u;
  CHECK(::read(pfd[0], &cslot, sizeof cslot) == sizeof cslot, 35, "child did not report its slot");
  ::close(pfd[0]);
  usleep(300000);  // the child sleeps in WAIT, the host in kSleepMs
  CHECK(slot_state(a->region(), cslot) == 1, 35, "child's slot %u not Claimed (%u)", cslot,
        slot_state(a->region(), cslot));
  CHECK(owned_heap_pages(a->region(), cslot) == 16, 35, "child owns %llu heap pages, want 16",
        (unsigned long long)owned_heap_pages(a->region(), cslot));
  ::kill(child, SIGKILL);
  int st = 0;
  CHECK(::waitpid(child, &st, 0) == child && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, 36,
        "child did not die of SIGKILL (status %#x)", st);
  const uint32_t after = slot_state(a->region(), cslot);
  CHECK(after == 2 || after == 0, 36, "child's slot %u is %u after its death, want Closing (2) or Free", cslot, after);
  const uint64_t t0 = now_ms();
  CHECK(wait_all_free(a->region(), {a->slot(), b->slot()}, 15000), 37, "killed child's slot %u not freed (state %u)",
        cslot, slot_state(a->region(), cslot));
  CHECK(owned_heap_pages(a->region(), cslot) == 0, 37, "killed child's heap pages not reclaimed");
  auto v = host_view(*sa);
  CHECK(v.closed == closed0 + 1, 38, "host closed %llu slots during the kill test, want 1",
        (unsigned long long)(v.closed - closed0));
  std::printf("DRIVER-KILLED-CHILD pid=%d slot=%u state-after-death=%u freed-after=%llums\n", int(child), cslot,
              after, (unsigned long long)(now_ms() - t0));
  // the survivors still work
  echo(*sa, "after the kill a");
  echo(*sb, "after the kill b");
  // ---- close everything; a fresh client sees all other slots Free on both sides
  sb.reset();
  b.reset();
  sa.reset();
  a.reset();
  auto e = DriverDevice::open(dev);
  auto se = adopt(*e);
  CHECK(wait_all_free(e->region(), {e->slot()}, 10000), 39, "slots not freed after close");
  v = host_view(*se);
  for (uint32_t i = 0; i < v.slot_count; ++i)
    CHECK(i == e->slot() ? v.state[i] == 1 : v.state[i] == 0, 39, "host sees slot %u in state %u", i, v.state[i]);
  CHECK(v.opened == v.closed + 1, 39, "host opened %llu slots, closed %llu", (unsigned long long)v.opened,
        (unsigned long long)v.closed);
  std::printf("guest: host opened %llu slots and closed %llu; %llu wake-ups on the last slot\n",
              (unsigned long long)v.opened, (unsigned long long)v.closed, (unsigned long long)e->stats().wakeups);
  se.reset();
  e.reset();
  std::printf("DRIVER-GUEST-OK\n");
  return 0;
}

// Remove the PCI device while a file is open, mapped and waiting; rescan; use the new one.
int run_unplug(const std::string& dev, const std::string& sysfs) {
  auto d = DriverDevice::open(dev);
  auto s = adopt(*d);
  echo(*s, "before unplug");
  std::atomic<int> wait_errno{-1};
  std::thread waiter([&] {
    vmcuda_wait w{VMCUDA_WAIT_FOREVER, 0, 0, 0};
    // Take whatever is pending first, then sleep for good.
    w.timeout_ns = 0;
    ::ioctl(d->fd(), VMCUDA_IOC_WAIT, &w);
    w.timeout_ns = VMCUDA_WAIT_FOREVER;
    int rc = ::ioctl(d->fd(), VMCUDA_IOC_WAIT, &w);
    wait_errno = rc < 0 ? errno : 0;
  });
  usleep(100000);
  {
    UniqueFd rm(::open((sysfs + "/remove").c_str(), O_WRONLY));
    CHECK(rm, 50, "open %s/remove: %s", sysfs.c_str(), std::strerror(errno));
    CHECK(::write(rm.get(), "1", 1) == 1, 50, "remove: %s", std::strerror(errno));
  }
  waiter.join();
  CHECK(wait_errno == ENODEV, 51, "a waiter saw errno %d after remove, want ENODEV", wait_errno.load());
  CHECK(::ioctl(d->fd(), VMCUDA_IOC_RING) < 0 && errno == ENODEV, 51, "RING after remove: %s", std::strerror(errno));
  vmcuda_info info{};
  CHECK(::ioctl(d->fd(), VMCUDA_IOC_INFO, &info) < 0 && errno == ENODEV, 51, "INFO after remove did not fail");
  pollfd p{d->fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)), 51, "poll after remove: revents %#x", p.revents);
  // The old mapping is gone: touching it is SIGBUS (in a child, to survive it).
  const pid_t c = ::fork();
  if (c == 0) {
    volatile uint32_t x = ordering::load_relaxed(d->region().control(0).state);
    (void)x;
    _exit(0);
  }
  int st = 0;
  ::waitpid(c, &st, 0);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, 52, "touching the removed region: status %#x, want SIGBUS", st);
  // A client of a removed device must not touch the region again (SIGBUS): leak the
  // ClientSlot instead of running its destructor, which writes the slot's state.
  (void)s.release();
  d.reset();  // unmaps and closes: release() of a removed device touches nothing
  {
    UniqueFd rs(::open("/sys/bus/pci/rescan", O_WRONLY));
    CHECK(rs && ::write(rs.get(), "1", 1) == 1, 53, "rescan: %s", std::strerror(errno));
  }
  std::unique_ptr<DriverDevice> d2;
  for (int i = 0; i < 200 && !d2; ++i) {
    try {
      d2 = DriverDevice::open(dev);
    } catch (const std::exception&) {
      usleep(10000);
    }
  }
  CHECK(d2 != nullptr, 54, "%s did not come back after rescan", dev.c_str());
  auto s2 = adopt(*d2);
  echo(*s2, "after rescan");
  xor_copy(*s2, 64 << 10, 0x77);
  std::printf("DRIVER-UNPLUG-OK slot %u after rescan, %llu wake-ups\n", d2->slot(),
              (unsigned long long)d2->stats().wakeups);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "main" && argc == 3) return run_main(argv[2]);
    if (mode == "unplug" && argc == 4) return run_unplug(argv[2], argv[3]);
  } catch (const std::exception& e) {
    die(40, "%s", e.what());
  }
  std::fprintf(stderr, "usage: %s main DEV | unplug DEV SYSFS_DIR\n", argv[0]);
  return 2;
}
