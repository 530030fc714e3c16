#include "vmrpc/worker.h"

#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "vmrpc/fd.h"
#include "vmrpc/knobs.h"
#include "vmrpc/log.h"
#include "vmrpc/slot_server.h"
#include "vmrpc/worker_control.h"
#include <fcntl.h>

#include <algorithm>

extern char** environ;

namespace vmrpc {

int spawn_worker_process(const std::string& exe, const std::vector<std::string>& args, const WorkerSpec& spec,
                         const std::vector<std::pair<int, int>>& extra_fds) {
  std::vector<std::string> all{exe};
  all.insert(all.end(), args.begin(), args.end());
  const std::vector<std::string> worker_args = {
      kWorkerFlag,
      std::to_string(spec.slot),
      std::to_string(spec.connection_id),
      std::to_string(spec.owner_tag),
      std::to_string(spec.host_epoch),
      std::to_string(spec.region.region_bytes),
      std::to_string(spec.region.slot_count),
      std::to_string(spec.region.slot_bytes),
      std::to_string(spec.region.heap_page_bytes),
      std::to_string(spec.region.host_peer_id),
      std::to_string(spec.region.guest_peer_id),
      std::to_string(spec.map_address),
      spec.start_held ? "held" : "run"};
  all.insert(all.end(), worker_args.begin(), worker_args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // dup2 clears close-on-exec on the target; everything else of ours is close-on-exec. Each
  // source goes through a copy numbered above every target first: a source that is itself
  // a target number (fds inherited from a previous stub process take low numbers) would
  // otherwise be overwritten before it is read.
  std::vector<std::pair<int, int>> moves = {{spec.memfd, kWorkerMemfd},
                                            {spec.doorbell_fd, kWorkerDoorbellFd},
                                            {spec.notify_fd, kWorkerNotifyFd}};
  if (spec.control_fd >= 0) moves.push_back({spec.control_fd, kWorkerControlFd});
  moves.insert(moves.end(), extra_fds.begin(), extra_fds.end());
  int highest_target = 0;
  for (const auto& m : moves) highest_target = std::max(highest_target, m.second);
  std::vector<UniqueFd> copies;
  for (auto& m : moves) {
    copies.emplace_back(::fcntl(m.first, F_DUPFD_CLOEXEC, highest_target + 1));
    if (!copies.back()) {
      const int err = errno;
      posix_spawn_file_actions_destroy(&fa);
      errno = err;
      return -1;
    }
    posix_spawn_file_actions_adddup2(&fa, copies.back().get(), m.second);
  }
  // The worker starts with no signal blocked (the endpoint's process may block some).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

bool is_worker_invocation(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], kWorkerFlag) == 0) return true;
  return false;
}

namespace {
// The region as map_worker_region() mapped it, for run_worker().
Mapping& worker_mapping() {
  static Mapping m;
  return m;
}
// The argument after kWorkerFlag at `i` (1-based); 0 when absent.
uint64_t worker_arg(int argc, char** argv, int i) {
  int at = 1;
  while (at < argc && std::strcmp(argv[at], kWorkerFlag) != 0) ++at;
  return at + i < argc ? std::strtoull(argv[at + i], nullptr, 10) : 0;
}
// The text of the argument after kWorkerFlag at `i` (1-based); empty when absent.
std::string worker_arg_text(int argc, char** argv, int i) {
  int at = 1;
  while (at < argc && std::strcmp(argv[at], kWorkerFlag) != 0) ++at;
  return at + i < argc ? argv[at + i] : "";
}
}  // namespace

bool map_worker_region(int argc, char** argv) {
  if (worker_mapping()) return true;
  const uint64_t bytes = worker_arg(argc, argv, 5), at = worker_arg(argc, argv, 11);
  struct stat st{};
  if (bytes == 0 || ::fstat(kWorkerMemfd, &st) < 0 || static_cast<uint64_t>(st.st_size) != bytes) {
    std::fprintf(stderr, "vmrpc worker: fd %d is not a region of %llu bytes\n", kWorkerMemfd,
                 static_cast<unsigned long long>(bytes));
    return false;
  }
  if (at == 0) {
    worker_mapping() = Mapping::map_shared(kWorkerMemfd, bytes, "worker region");
    return true;
  }
  // The guest maps the region at this address too (it read it from the header): only
  // there may this worker serve it, or the pointers they share would name other bytes.
  void* p = ::mmap(reinterpret_cast<void*>(at), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
                   kWorkerMemfd, 0);
  if (p == MAP_FAILED || reinterpret_cast<uint64_t>(p) != at) {
    const int err = p == MAP_FAILED ? errno : EEXIST;
    if (p != MAP_FAILED) ::munmap(p, bytes);
    std::fprintf(stderr, "vmrpc worker: cannot map the region at 0x%llx (%s); choose another address with "
                 "VMRPC_WORKER_MAP_ADDRESS\n", static_cast<unsigned long long>(at), std::strerror(err));
    return false;
  }
  worker_mapping() = Mapping(p, bytes);
  return true;
}

void fix_worker_address_space(char** argv) {
  if (knobs::kWorkerAslr.get() == 1) return;
  // One malloc arena: a thread's first allocation would otherwise reserve 64 MiB in the
  // area where the driver reserves its own ranges, and move them (seen on the H100: a
  // control request's buffer moved every module variable by 96 MiB).
  ::mallopt(M_ARENA_MAX, 1);
  // No cache of finished threads' stacks: the driver's threads end with their context, and
  // a stack glibc kept would stay right below where the context was, leaving a resume's
  // context too little room there (seen on the H100: module variables 448 MiB lower).
  constexpr const char* kNoStackCache = "glibc.pthread.stack_cache_size=0";
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const bool stack_cache_off = tunables && std::strstr(tunables, kNoStackCache);
  if (!stack_cache_off) {
    const std::string t = tunables && *tunables ? std::string(tunables) + ":" + kNoStackCache : kNoStackCache;
    ::setenv("GLIBC_TUNABLES", t.c_str(), 1);
  }
  const int current = ::personality(0xffffffff);
  if (current == -1) return;
  const bool randomized = !(current & ADDR_NO_RANDOMIZE);
  if (randomized && ::personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE) == -1) return;
  if (!randomized && stack_cache_off) return;
  ::execv("/proc/self/exe", argv);  // its fds (region, doorbells, control) stay open
  std::fprintf(stderr, "vmrpc worker: cannot re-execute without address randomization (%s); module variables "
               "of its client may not come back in place after a restore into a new stub\n", std::strerror(errno));
}

int run_worker(int argc, char** argv, Service& service) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no worker outlives the endpoint
  int at = 1;
  while (at < argc && std::strcmp(argv[at], kWorkerFlag) != 0) ++at;
  if (argc - at < 11) {
    std::fprintf(stderr, "vmrpc worker: expected 10 or 11 arguments after %s\n", kWorkerFlag);
    return 2;
  }
  auto u = [&](int i) { return std::strtoull(argv[at + i], nullptr, 10); };
  const uint32_t slot = static_cast<uint32_t>(u(1));
  SlotInfo info{u(2), slot, static_cast<uint32_t>(u(3))};
  const uint64_t epoch = u(4);
  RegionConfig cfg{u(5), static_cast<uint32_t>(u(6)), static_cast<uint32_t>(u(7)), static_cast<uint32_t>(u(8)),
                   static_cast<uint32_t>(u(9)), static_cast<uint32_t>(u(10))};
  std::string why;
  auto layout = Layout::plan(cfg, &why);
  struct stat st{};
  if (!layout || ::fstat(kWorkerMemfd, &st) < 0 || static_cast<uint64_t>(st.st_size) != cfg.region_bytes ||
      slot >= layout->slot_count) {
    std::fprintf(stderr, "vmrpc worker: the region does not match the arguments %s\n", why.c_str());
    return 2;
  }
  if (!map_worker_region(argc, argv)) return 2;
  Mapping map = std::move(worker_mapping());
  layout->host_map_address = worker_arg(argc, argv, 11);
  RegionView view(map.data(), *layout);
  // Shared with the control thread, which may still ask it for a snapshot until the process
  // exits.
  std::shared_ptr<SlotService> svc;
  try {
    svc = service.open(info);
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "worker", std::string("service refused slot: ") + e.what());
  }
  SlotServer server{view, slot, kWorkerDoorbellFd, kWorkerNotifyFd, info, epoch, nullptr, nullptr};
  server.hand_back = false;  // the endpoint frees the slot once this process is gone
  // The control path (suspend/resume), when the endpoint gave one: a thread of its own
  // answers it; it ends with the process.
  // The gate outlives this function (never freed): the control thread may still look at
  // it (closed: it refuses everything) until the process exits.
  if (::fcntl(kWorkerControlFd, F_GETFD) >= 0) {
    auto* gate = new SlotGate([] {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(kWorkerDoorbellFd, &one, sizeof one);
    });
    server.gate = gate;
    if (worker_arg_text(argc, argv, 12) == "held") gate->request_hold();
    std::thread([gate, svc] { worker_control::serve(kWorkerControlFd, *gate, svc); }).detach();
  }
  bool replaced = false;
  server.left_for_replaced_region = &replaced;
  serve_slot(server, svc.get());
  svc.reset();
  return replaced ? kWorkerExitRegionReplaced : 0;
}

}  // namespace vmrpc
