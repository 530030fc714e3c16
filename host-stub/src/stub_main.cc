// vmcuda-stub's command line and life cycle: serves one vmrpc socket (one per VM, or the
// local transport), runs each client's CUDA calls on the driver in its own context.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <cstring>
#include <ctime>

#include "stub_main.h"
#include "control_server.h"
#include "crash_report.h"
#include "launch_timeout.h"
#include "vm_control.h"
#include "driver_api.h"
#include "fair_share.h"
#include "image_cache.h"
#include "mps.h"
#include "output.h"
#include "placement.h"
#include "policy.h"
#include "ipc_registry.h"
#include "vm_ledger.h"
#include "service_manager.h"
#include "session.h"
#include "vmrpc/host_endpoint.h"
#include "vmrpc/log.h"
#include "vmrpc/unix_socket.h"
#include "vmrpc/worker.h"

#include <unistd.h>

namespace vmcuda::host {

// The VM's host memory bound: --host-memory-quota-mib, else the policy's host_memory, else half
// the host's RAM divided by --gpu-share (the VMs of a GPU share the host too); ~0: none
// (--gpu-share 0).
static uint64_t vm_host_quota(uint64_t quota_mib, unsigned gpu_share, const std::optional<VmPolicy>& policy) {
  if (quota_mib) return quota_mib << 20;
  if (policy && policy->host_memory_bytes) return *policy->host_memory_bytes;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || gpu_share == 0) return ~0ull;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2 / gpu_share;
}

namespace {

// The VM's fair sharing and GPUs, for status (set once in stub_main before the control socket serves).
std::shared_ptr<FairShare> g_fair_share;
std::shared_ptr<ImageCache> g_image_cache;  // null: off
Placement* g_placement = nullptr;

// Per GPU: the VM's GPU time so far, its share of the GPU's time over the last seconds, its
// weight and how many VMs have work there now (fair_share.h); empty when fair sharing is off.
nlohmann::json gpu_time_json() {
  nlohmann::json list = nlohmann::json::array();
  if (!g_fair_share || !g_placement) return list;
  for (const GpuShare::Usage& u : g_fair_share->usage(g_placement->devices()))
    list.push_back({{"gpu", u.device},
                    {"busy_seconds", double(u.busy_ns) / 1e9},
                    {"share", u.share},
                    {"weight", u.weight},
                    {"vms_active", u.vms_active}});
  return list;
}

nlohmann::json image_cache_json() {
  if (!g_image_cache) return nullptr;
  const ImageCacheStats c = g_image_cache->stats();
  return {{"dir", g_image_cache->dir()},   {"entries", c.entries},     {"bytes", c.bytes},
          {"vm_entries", c.vm_entries},    {"vm_bytes", c.vm_bytes},   {"hits", c.hits},
          {"misses", c.misses},            {"stored", c.stored},       {"evicted", c.evicted},
          {"cap_bytes", c.cap_bytes},      {"vm_bound_bytes", c.vm_bound_bytes}};
}

nlohmann::json status_json(VmControl& vm) {
  const VmStatus s = vm.status();
  const VmControl::PolicyInfo policy = vm.policy_info();
  nlohmann::json clients = nlohmann::json::array();
  for (const auto& c : s.clients) {
    // Calls of each library remoted at its API (which copy of a library a framework used).
    nlohmann::json library_calls = nlohmann::json::object();
    for (size_t l = 0; l < kRemotedLibraries; ++l) library_calls[kLibraryNames[l]] = c.reply.status.library_calls[l];
    clients.push_back({{"connection", c.connection},
                       {"slot", c.reply.status.slot},
                       {"pid", c.reply.status.owner_tag},
                       {"worker_pid", c.worker_pid},
                       {"suspended", c.reply.status.suspended},
                       {"device_memory_bytes", c.reply.status.device_bytes},
                       {"allocated_bytes", c.reply.status.allocated_bytes},
                       {"objects", c.reply.status.objects},
                       {"program", c.reply.status.program},
                       {"launches", c.reply.status.launches},
                       // Charged to the VM's quota for its loaded modules (module.cc).
                       {"module_bytes", c.reply.status.module_bytes},
                       {"library_calls", library_calls}});
  }
  return {{"vm", s.vm},         {"state", s.state}, {"pid", ::getpid()}, {"clients", s.clients.size()},
          {"device_memory_bytes", s.device_bytes}, {"module_bytes", s.module_bytes},
          // The VM's quota (null: none) and what its programs hold of it, as the driver maps it.
          {"memory_quota_bytes", s.quota_bytes == ~0ull ? nlohmann::json(nullptr) : nlohmann::json(s.quota_bytes)},
          {"memory_charged_bytes", s.charged_bytes},
          // Host memory its programs pinned and its worker processes' own (vm_ledger.h kHost).
          {"host_memory_quota_bytes", s.host_quota_bytes == ~0ull ? nlohmann::json(nullptr) : nlohmann::json(s.host_quota_bytes)},
          {"host_memory_charged_bytes", s.host_charged_bytes}, {"gpus", vm.gpus()}, {"client_list", clients},
          // The policy file that applies (null: none), its profile and the VM's weight.
          {"policy", policy.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(policy.source)},
          {"profile", policy.profile}, {"weight", policy.weight},
          // Each GPU's time this VM used (fair_share.h): busy seconds, recent share (0..1).
          {"gpu_time", gpu_time_json()},
          // Module images the stub keeps once for all clients (image_cache.h); null: off.
          {"image_cache", image_cache_json()}};
}

// A VM operation as a control handler: progress lines while it runs, the status after.
template <class Op>
ControlServer::Handler vm_operation(VmControl& vm, Op op) {
  return [&vm, op](const nlohmann::json& request, Progress& progress) {
    std::string why;
    const auto report = [&](const std::string& phase, uint64_t done, uint64_t total) {
      progress.report(done, total, phase);
    };
    if (!op(request, report, &why)) throw std::runtime_error(why);
    return status_json(vm);
  };
}

std::string file_of(const nlohmann::json& request) {
  if (!request.contains("file") || !request["file"].is_string() || request["file"].get<std::string>().empty())
    throw std::runtime_error("the request names no \"file\"");
  const std::string f = request["file"].get<std::string>();
  if (f.front() != '/') throw std::runtime_error("\"file\" must be an absolute path (the stub has its own cwd)");
  return f;
}

// "devices": the GPUs a resume or restore moves the VM to (absent: where it is).
std::vector<int> devices_of(const nlohmann::json& request) {
  std::vector<int> d;
  if (!request.contains("devices")) return d;
  const auto& list = request["devices"];
  if (!list.is_array() || list.empty() || list.size() > 64)
    throw std::runtime_error("\"devices\" must be a list of GPU indexes");
  for (const auto& v : list) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 4096)
      throw std::runtime_error("\"devices\" must be a list of GPU indexes");
    d.push_back(v.get<int>());
  }
  return d;
}

// vmcudactl upgrade: the VM's clients saved (held where they are), then this process becomes
// the stub binary on disk again (exec in place: same pid, same systemd unit) and takes over
// the listening socket and the VM's connections (HostEndpoint::prepare_handover); QEMU and
// local clients never see a disconnection. The new process restores every client at once.
// If the exec fails, the clients are restored here.
struct Upgrade {
  vmrpc::HostEndpoint* endpoint = nullptr;
  std::string state_dir;  // the VM's (VmControl's)
  // The command line to execute again: the first one, with the VM's GPUs as they are now.
  std::function<std::vector<std::string>()> argv;
};

std::string executable_on_disk() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return {};
  std::string path(exe, static_cast<size_t>(n));
  // Replaced by a package upgrade: the new file has the old name.
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  return path;
}

void install_control_handlers(ControlServer& control, VmControl& vm, const Upgrade& upgrade,
                              std::function<std::string()> reload) {
  control.on("status", [&vm](const nlohmann::json&, Progress&) { return status_json(vm); });
  control.on("reload", [&vm, reload](const nlohmann::json&, Progress&) {
    const std::string message = reload();
    if (message.starts_with("policy not reloaded")) throw std::runtime_error(message);
    nlohmann::json r = status_json(vm);
    r["message"] = message;
    return r;
  });
  control.on("suspend", vm_operation(vm, [&vm](const nlohmann::json&, const VmControl::Progress& p, std::string* why) {
               return vm.suspend(p, why);
             }));
  control.on("resume", vm_operation(vm, [&vm](const nlohmann::json& r, const VmControl::Progress& p, std::string* why) {
               return vm.resume(p, why, devices_of(r));
             }));
  control.on("save", vm_operation(vm, [&vm](const nlohmann::json& r, const VmControl::Progress& p, std::string* why) {
               return vm.save(file_of(r), p, why);
             }));
  control.on("restore", vm_operation(vm, [&vm](const nlohmann::json& r, const VmControl::Progress& p, std::string* why) {
               return vm.restore(file_of(r), p, why, devices_of(r));
             }));
  control.on("upgrade", vm_operation(vm, [&vm, upgrade](const nlohmann::json&, const VmControl::Progress& p,
                                                          std::string* why) {
               if (upgrade.state_dir.empty())
                 throw std::runtime_error("this stub has no --state-dir: it has nowhere to keep its clients' state "
                                          "across the upgrade");
               const std::string exe = executable_on_disk();
               if (exe.empty() || ::access(exe.c_str(), X_OK) != 0)
                 throw std::runtime_error("cannot find this stub's executable to start again (" + exe + ")");
               const std::string dir = (std::filesystem::path(upgrade.state_dir) /
                                        ("upgrade-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr))))
                                           .string();
               // The new process brings every connection back at once; a program that opened
               // another connection's IPC memory comes back whole once its exporter is back
               // (VmControl::retry_awaiting_exporter).
               // Programs that connect from now on wait in the socket's backlog for the new process.
               vm.stop_accepting(std::chrono::seconds(2));
               if (!vm.save(dir, p, why)) {
                 vm.resume_accepting();
                 return false;
               }
               // After the answer is out: the new process image replaces this one.
               std::thread([&vm, upgrade, exe, dir] {
                 std::this_thread::sleep_for(std::chrono::milliseconds(300));
                 const std::string handover = upgrade.endpoint->prepare_handover();
                 ::setenv(vmrpc::HostEndpoint::kHandoverEnv, handover.c_str(), 1);
                 std::fprintf(stderr, "vmcuda-stub: upgrading: executing %s with the VM's connections (clients saved "
                              "in %s)\n", exe.c_str(), dir.c_str());
                 const std::vector<std::string> args = upgrade.argv();
                 std::vector<char*> argv;
                 for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
                 argv.push_back(nullptr);
                 ::execv(exe.c_str(), argv.data());
                 std::fprintf(stderr, "vmcuda-stub: upgrade failed: cannot execute %s: %s; resuming the clients here\n",
                              exe.c_str(), std::strerror(errno));
                 ::unsetenv(vmrpc::HostEndpoint::kHandoverEnv);
                 std::string err;
                 if (!vm.restore(dir, {}, &err)) std::fprintf(stderr, "vmcuda-stub: %s\n", err.c_str());
                 vm.resume_accepting();
               }).detach();
               return true;
             }));
}

// Whether this process may give a file to group `gid` (root, or a member).
bool in_group(gid_t gid) {
  if (::geteuid() == 0 || ::getegid() == gid) return true;
  gid_t groups[256];
  const int n = ::getgroups(256, groups);
  return std::find(groups, groups + std::max(n, 0), gid) != groups + std::max(n, 0);
}

// Where saved VMs are indexed (VmControl): the system's state directory for root (the unit's
// StateDirectory), the user's otherwise.
std::string default_state_dir() {
  // systemd's StateDirectory= (the unit runs the stub as its own user, vmcuda).
  if (const char* s = std::getenv("STATE_DIRECTORY"); s && *s == '/') return std::string(s).substr(0, std::string(s).find(':'));
  if (::geteuid() == 0) return "/var/lib/vmcuda";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x == '/') return std::string(x) + "/vmcuda";
  if (const char* h = std::getenv("HOME"); h && *h == '/') return std::string(h) + "/.local/state/vmcuda";
  return {};
}

// --on-stop keep: the clients saved into the state directory, then this process ends without
// closing anything: the service manager's fd store keeps the VM's connections, and the next
// stub process takes them over and restores each client when it next calls (as after
// vmcudactl upgrade). What cannot be saved is lost, with a clear error in the guest.
[[noreturn]] void keep_clients_and_exit(VmControl& vm, int sig) {
  std::fprintf(stderr, "vmcuda-stub: signal %d: saving the clients for the next stub process\n", sig);
  service_manager::stopping("saving the clients for the next stub process");
  // A program that connects now waits for the next process instead of being dropped mid-handshake.
  if (!vm.stop_accepting(std::chrono::seconds(2)))
    std::fprintf(stderr, "vmcuda-stub: a connection was still being accepted after 2 s; saving anyway\n");
  if (vm.state_dir().empty()) {
    std::fprintf(stderr, "vmcuda-stub: no --state-dir: the clients' GPU state is lost (the VM keeps its device)\n");
  } else {
    const std::string dir = (std::filesystem::path(vm.state_dir()) /
                             ("restart-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr))))
                                .string();
    std::string why, last_phase;
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = vm.save(dir, [&](const std::string& phase, uint64_t done, uint64_t total) {
      if (phase == last_phase) return;
      last_phase = phase;
      std::fprintf(stderr, "vmcuda-stub: %s (%llu of %llu bytes)\n", phase.c_str(), static_cast<unsigned long long>(done),
                   static_cast<unsigned long long>(total));
    }, &why);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (ok) std::fprintf(stderr, "vmcuda-stub: clients saved in %s (%.2f s); leaving the VM's connections to the "
                                 "service manager\n", dir.c_str(), s);
    else std::fprintf(stderr, "vmcuda-stub: saving the clients failed: %s; they lose their GPU state\n", why.c_str());
  }
  std::fflush(nullptr);
  // No destructor runs: they would tell the VM that the stub leaves. Workers end with us
  // (PR_SET_PDEATHSIG), their GPU memory with them.
  std::_Exit(0);
}

}  // namespace

// The VM's device memory quota: --memory-quota-mib, else the policy's memory (or fraction
// of the smallest of its GPUs), else that GPU's memory divided by --gpu-share; ~0: none.
uint64_t vm_quota(const DriverApi& api, const std::vector<int>& devices, uint64_t quota_mib, unsigned gpu_share,
                  const std::optional<VmPolicy>& policy) {
  if (quota_mib) return quota_mib << 20;
  if (policy && policy->memory_bytes) return *policy->memory_bytes;
  uint64_t smallest = ~0ull;
  for (int d : devices) {
    CUdevice dev;
    size_t total = 0;
    if (api.cuDeviceGet(&dev, d) == CUDA_SUCCESS && api.cuDeviceTotalMem_v2(&total, dev) == CUDA_SUCCESS)
      smallest = std::min<uint64_t>(smallest, total);
  }
  if (smallest == ~0ull) return ~0ull;
  if (policy && policy->memory_fraction) return static_cast<uint64_t>(static_cast<double>(smallest) * *policy->memory_fraction);
  return gpu_share > 0 ? smallest / gpu_share : ~0ull;
}

namespace {
std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", s);
  return b;
}
}  // namespace

// The soft limit on open files raised to the hard one. The CUDA driver holds a dozen or more
// descriptors per context, and with `--isolation thread` every client's contexts, regions and
// IPC descriptors share this one process: at the usual soft limit of 1024, some 35 programs
// made the driver and the IPC table fail with EMFILE (H100, 2026-11-27). The stub waits with
// epoll and io_uring, never select(), so descriptors above 1024 are safe.
static void raise_open_file_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

int stub_main(int argc, char** argv, const DriverApi* preset) {
  raise_open_file_limit();
  install_crash_report();
  // A worker (started by the stub itself for one client slot) gets the stub's own options
  // followed by the worker's (vmrpc/worker.h).
  const bool worker = vmrpc::is_worker_invocation(argc, argv);
  int stub_argc = argc;
  if (worker) {
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == vmrpc::kWorkerFlag) stub_argc = i;
    vmrpc::fix_worker_address_space(argv);
    // First of all, before the driver reserves address space: the region at the address
    // the guest shares with us (mapped pinned memory has one address on both sides).
    if (!vmrpc::map_worker_region(argc, argv)) return 2;
    // Before the driver loads too: this worker's stdout is its client's alone, so what the
    // driver writes there (kernel printf) is collected for the app (output.h). The stub's
    // own messages go to stderr.
    if (std::string why; !OutputCapture::install(1, &why))
      std::fprintf(stderr, "vmcuda-stub worker: %s; kernel printf output stays on the stub's stdout\n", why.c_str());
  }
  CLI::App app{"vmcuda-stub: serves CUDA to guests over vmrpc shared memory"};
  app.set_version_flag("--version", std::string("vmcuda-stub ") + VMCUDA_VERSION);
  app.option_defaults()->always_capture_default();  // --help shows every default
  std::string isolation = "process";
  std::string socket_path = "/run/vmcuda/local.sock";
  std::string devices_text = "0";
  uint64_t quota_mib = 0;
  vmrpc::RegionConfig region = vmrpc::RegionConfig::from_knobs();
  app.add_option("-s,--socket", socket_path, "UNIX socket to serve (one per VM; QEMU's ivshmem chardev connects here)");
  app.add_option("-d,--devices", devices_text,
                 "host CUDA devices this VM's programs use, guest device i the i-th (0,1), or auto[:N]: the N GPUs "
                 "of --gpu-pool that the fewest live VMs use (counted in --placement-dir)")
      ->capture_default_str();
  std::string gpu_pool_text, placement_dir;
  app.add_option("--gpu-pool", gpu_pool_text,
                 "the GPUs this stub may use, for --devices auto and for moving the VM (vmcudactl resume VM --devices "
                 "LIST); default: every GPU the driver shows");
  app.add_option("--placement-dir", placement_dir,
                 "where each VM's stub records its GPUs for auto placement (shared by the host's stubs; default: "
                 "placement/ beside the socket)");
  std::string socket_mode = "0660", socket_group, socket_owner;
  app.add_option("--socket-mode", socket_mode, "the VM socket's permission bits (octal), whatever the umask")
      ->capture_default_str();
  app.add_option("--socket-group", socket_group,
                 "the VM socket's group, name or gid: QEMU's (libvirt-qemu under libvirt); default: vmcuda where "
                 "that group exists and this process may give it (root or a member), else this process's group");
  app.add_option("--socket-owner", socket_owner, "the VM socket's owner, name or uid (needs root); default: this user");
  app.add_option("--memory-quota-mib", quota_mib,
                 "device memory of the whole VM (all its programs together) in MiB, counted as the driver maps it "
                 "(in 2 MiB pieces); 0: the smallest GPU's memory divided by --gpu-share");
  uint64_t host_quota_mib = 0;
  app.add_option("--host-memory-quota-mib", host_quota_mib,
                 "host memory the VM's programs may make the host hold, in MiB: the memory they pin (cudaMallocHost, "
                 "cudaHostRegister) and each worker process's own cost (VMCUDA_WORKER_HOST_BYTES); beyond it "
                 "cudaErrorMemoryAllocation. 0: half the host's RAM divided by --gpu-share");
  uint32_t max_clients = 64;
  app.add_option("--max-clients", max_clients,
                 "programs served at once for this VM, all its connections together (a worker process or thread "
                 "each; 0: no limit); one more gets cudaErrorDevicesUnavailable")
      ->capture_default_str();
  unsigned gpu_share = 1;
  app.add_option("--gpu-share", gpu_share,
                 "how many VMs share each GPU: without --memory-quota-mib, each VM may use 1/N of the GPU's memory "
                 "(0: no limit)")
      ->capture_default_str();
  StubLimits limits;
  app.add_option("--max-streams", limits.max_streams, "live streams per client")->capture_default_str();
  app.add_option("--max-events", limits.max_events, "live events per client")->capture_default_str();
  app.add_option("--slots", region.slot_count, "client slots per VM (= ivshmem vectors)")->check(CLI::Range(1, 2048));
  app.add_option("--region-bytes", region.region_bytes, "shared region size per VM (power of two)");
  app.add_option("--isolation", isolation,
                 "process: each client slot is served by a worker process of its own, so a client whose kernel "
                 "faults (which poisons every CUDA context of a process) cannot break others; thread: all in this "
                 "process (faster to start, no fault isolation)")
      ->check(CLI::IsMember({"process", "thread"}))
      ->capture_default_str();
  double kernel_time_limit_s = 0;
  app.add_option("--kernel-time-limit", kernel_time_limit_s,
                 "seconds a client's GPU work may stay unfinished (counted from its launch) before the client is "
                 "ended: its worker process is ended (which stops the kernel and frees its GPU memory) and its calls "
                 "get cudaErrorLaunchTimeout; 0: no limit. Needs --isolation process")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  std::string gpu_thread = "auto";
  app.add_option("--gpu-thread", gpu_thread,
                 "issue every client's non-blocking work (launches, async copies, event records) through one "
                 "working thread per GPU; waits stay on each client's thread. auto: on with --isolation thread "
                 "(where clients share the process), off with process (each worker is its client's own)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  std::string vm_name, control_socket, control_group, state_dir = default_state_dir();
  app.add_option("--vm", vm_name, "the VM's name in logs and vmcudactl (default: the socket's file name without .sock)");
  app.add_option("--control-socket", control_socket,
                 "vmcudactl's socket for this stub (default: the VM socket with .ctl for .sock; 'none': no control)");
  app.add_option("--control-group", control_group,
                 "group (name or gid) whose members may use the control socket, besides root and this stub's user");
  app.add_option("--state-dir", state_dir,
                 "where saved VMs are indexed, so that a restored VM image finds its GPU state (also in a new "
                 "stub process); '' : not indexed")
      ->capture_default_str();
  std::string on_stop = "auto";
  app.add_option("--on-stop", on_stop,
                 "on SIGTERM/SIGINT: close (every client loses its GPU state; QEMU sees the stub leave) or keep (save "
                 "the clients into --state-dir and leave the VM's connections to the service manager's fd store, so "
                 "the next stub process brings them back: systemctl restart). auto: keep under a service manager "
                 "($NOTIFY_SOCKET), else close")
      ->check(CLI::IsMember({"auto", "close", "keep"}))
      ->capture_default_str();
  uint32_t weight_opt = 0;
  app.add_option("--weight", weight_opt,
                 "the VM's share of GPU time against other VMs on the same GPU (1..1000; policy `weight`; default 1): "
                 "with weights 1 and 3, two VMs that both keep a GPU busy get a quarter and three quarters of it")
      ->check(CLI::Range(1, 1000));
  std::string fair_share_mode = "on";
  app.add_option("--fair-share", fair_share_mode,
                 "on: the VM's launches wait while it is ahead of its weighted share of a GPU that other VMs' stubs "
                 "(same --placement-dir) want too; off: the driver's own round robin between contexts")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  uint64_t image_cache_mib = ImageCache::kDefaultCapMiB, image_cache_vm_mib = 0;
  app.add_option("--image-cache-mib", image_cache_mib,
                 "module images kept once for all the VM's programs (each crosses from the guest once, and one copy "
                 "serves every client, worker processes included): the cache's size; 0: off (every program sends "
                 "and the stub keeps its own copy)")
      ->capture_default_str();
  app.add_option("--image-cache-vm-mib", image_cache_vm_mib,
                 "what one VM's images may take of a shared cache (--image-cache-scope host; default: all of it)");
  std::string image_cache_scope = "vm", image_cache_dir;
  app.add_option("--image-cache-scope", image_cache_scope,
                 "vm: the cache serves this VM alone; host: VMs of this host with the same setting share one (an "
                 "image one VM loaded then loads faster for another, which that VM can time: docs/security.md)")
      ->check(CLI::IsMember({"vm", "host"}))
      ->capture_default_str();
  app.add_option("--image-cache-dir", image_cache_dir,
                 "where the cache's files are (default: image-cache/vm-<VM> or image-cache/host beside the socket)");
  std::string gpu_sharing = "time", mps_control = "nvidia-cuda-mps-control";
  app.add_option("--gpu-sharing", gpu_sharing,
                 "how the VM's programs share each GPU: time (the driver gives each program's context the GPU in "
                 "turns of about 2 ms, so a program beside another's long kernel waits a turn per call) or mps (they "
                 "run at once, each in its own address space, through an MPS control daemon of this VM's own; a "
                 "fatal fault of one program then ends the VM's other programs on that GPU: docs/security.md)")
      ->check(CLI::IsMember({"time", "mps"}))
      ->capture_default_str();
  app.add_option("--mps-control", mps_control, "NVIDIA's MPS control daemon, for --gpu-sharing mps")
      ->capture_default_str();
  std::string policy_file = kDefaultPolicyFile;
  app.add_option("--policy", policy_file,
                 "per-VM policy (TOML: GPUs, memory quota, weight, isolation, profiles; docs/running.md); "
                 "options given here win over it; reloaded on SIGHUP and `vmcudactl reload`")
      ->capture_default_str();
  CLI11_PARSE(app, stub_argc, argv);
  if (vm_name.empty()) {
    const std::string base = std::filesystem::path(socket_path).filename().string();
    vm_name = base.size() > 5 && base.ends_with(".sock") ? base.substr(0, base.size() - 5) : base;
  }
  // The VM's policy, under the options given on the command line (workers get their GPUs,
  // quota and mode from the stub that starts them).
  std::optional<VmPolicy> policy;
  std::vector<std::string> policy_worker_args;
  if (!worker) {
    std::string why;
    policy = load_policy(policy_file, vm_name, app.count("--policy") > 0, &why);
    if (!why.empty()) {
      std::fprintf(stderr, "vmcuda-stub: %s\n", why.c_str());
      return 2;
    }
    if (policy) {
      if (policy->devices && !app.count("--devices")) devices_text = *policy->devices;
      if (policy->isolation && !app.count("--isolation")) isolation = *policy->isolation;
      if (policy->max_clients && !app.count("--max-clients")) max_clients = *policy->max_clients;
      if (policy->gpu_sharing && !app.count("--gpu-sharing")) gpu_sharing = *policy->gpu_sharing;
      if (policy->kernel_time_limit_s && !app.count("--kernel-time-limit")) {
        kernel_time_limit_s = *policy->kernel_time_limit_s;
        policy_worker_args = {"--kernel-time-limit", std::to_string(kernel_time_limit_s)};  // workers read no policy
      }
    }
  }
  const bool quota_given = app.count("--memory-quota-mib") > 0;
  // Every log line names the VM (and says whether a worker wrote it).
  vmrpc::log::set_origin("vmcuda-stub " + vm_name + (worker ? " worker" : ""));
  limits.gpu_threads = gpu_thread == "on" || (gpu_thread == "auto" && isolation == "thread");
  limits.shared_process = isolation == "thread";
  limits.context_bytes = static_cast<uint64_t>(std::max<int64_t>(0, vmrpc::knobs::kContextBytes.get()));
  limits.cublas_workspace_bytes = vmrpc::knobs::kCublasWorkspaceBytes.get();
  // A worker process's own host memory is the VM's; clients that are threads of this process
  // share its cost, which is the host's.
  if (worker) limits.worker_host_bytes = static_cast<uint64_t>(std::max<int64_t>(0, vmrpc::knobs::kWorkerHostBytes.get()));
  // So are the libraries it loads for its program (HostLibrary).
  for (size_t l = 0; worker && l < kHostLibraries; ++l)
    limits.library_host_bytes[l] =
        static_cast<uint64_t>(std::max<int64_t>(0, host_library_knob(static_cast<HostLibrary>(l)).get()));
  if (kernel_time_limit_s > 0 && isolation == "thread") {
    // One program's kernel can only be stopped by destroying its context or ending its
    // process; with threads, every program of the VM shares the process (and a context's
    // destruction waits for its kernels): the limit could not end one without the others.
    std::fprintf(stderr, "vmcuda-stub: --kernel-time-limit needs --isolation process: with --isolation thread a "
                 "kernel that runs too long cannot be stopped without ending every program of the VM\n");
    return 2;
  }
  if (kernel_time_limit_s > 0) {
    limits.kernel_time_limit =
        std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(static_cast<int64_t>(kernel_time_limit_s * 1000)));
    if (worker)
      limits.on_kernel_timeout = [kernel_time_limit_s, mps_control](const std::string& client, int64_t age_ms) {
        VMRPC_LOG(kWarn, "stub", client + ": GPU work issued " + std::to_string(age_ms) + " ms ago has not finished "
                                 "(--kernel-time-limit " + seconds_text(kernel_time_limit_s) + " s): ending its worker "
                                 "process, which stops the kernel; the program gets cudaErrorLaunchTimeout");
        // Under MPS the kernel runs in the VM's MPS server, which the end of this process
        // does not stop: it is ended through the daemon first (on this, the watchdog's
        // thread). Should that fail, the stub restarts the daemon once this process is gone.
        kernel_time_limit_expired().store(true, std::memory_order_release);  // before the work ends
        if (mps_client()) {
          std::string why;
          if (mps_terminate_client(mps_control, ::getpid(), &why))
            VMRPC_LOG(kWarn, "stub", client + ": its GPU work was ended through the VM's MPS daemon (terminate_client)");
          else
            VMRPC_LOG(kWarn, "stub", client + ": could not end its GPU work through the VM's MPS daemon (" + why +
                                     "); the stub restarts the daemon if its server keeps the work");
        }
        std::fflush(nullptr);
        ::_exit(vmrpc::kWorkerExitLaunchTimeout);  // like a kill: no destructor waits on the GPU
      };
  }

  if (gpu_sharing == "mps" && isolation == "thread") {
    // MPS counts a process as one client: with threads, all the VM's programs are the stub's
    // one, so after one program's fatal fault MPS would refuse the VM's new programs until
    // the stub restarted (it waits for the faulted clients to end; seen on an H100).
    std::fprintf(stderr, "vmcuda-stub: --gpu-sharing mps needs --isolation process: with --isolation thread every "
                 "program of the VM is one MPS client, and one program's fatal fault would keep MPS from serving "
                 "the VM's next programs until the stub restarted\n");
    return 2;
  }
  // Before the first CUDA call of this process, and before any worker starts (they inherit
  // where the VM's daemon is): MPS's clients are chosen when the driver starts.
  std::unique_ptr<MpsDaemon> mps;
  if (gpu_sharing == "mps" && !worker) {
    std::string why;
    mps = MpsDaemon::start(mps_control,
                           (std::filesystem::path(socket_path).parent_path() / ("mps-" + vm_name)).string(), &why);
    if (!mps) {
      std::fprintf(stderr, "vmcuda-stub: %s\n", why.c_str());
      return 3;
    }
  }

  DriverApi api;
  std::string why;
  if (preset) {
    api = *preset;
  } else if (!load_libcuda(api, &why)) {
    std::fprintf(stderr, "vmcuda-stub: %s\n", why.c_str());
    return 3;
  }
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "vmcuda-stub: cuInit failed: %s; is the GPU visible (nvidia-smi)?\n", describe(api, r).c_str());
    return 3;
  }
  int count = 0;
  api.cuDeviceGetCount(&count);
  // The GPUs this stub may use (with their models: a move keeps them), then the VM's.
  std::map<int, std::string> pool;
  {
    std::string why;
    std::vector<int> pool_list;
    if (gpu_pool_text.empty()) {
      for (int d = 0; d < count; ++d) pool_list.push_back(d);
    } else if (auto p = parse_placement(gpu_pool_text, &why); p && !p->devices.empty()) {
      pool_list = p->devices;
    } else {
      std::fprintf(stderr, "vmcuda-stub: --gpu-pool %s: give GPU indexes such as 0,1\n", gpu_pool_text.c_str());
      return 2;
    }
    for (int d : pool_list) {
      CUdevice dev;
      char name[256] = {};
      if (d >= count || api.cuDeviceGet(&dev, d) != CUDA_SUCCESS) {
        std::fprintf(stderr, "vmcuda-stub: GPU %d is named (--devices or --gpu-pool), but the driver sees %d device(s) "
                     "(0..%d)\n", d, count, count - 1);
        return 2;
      }
      size_t total = 0;
      api.cuDeviceGetName(name, sizeof name - 1, dev);
      api.cuDeviceTotalMem_v2(&total, dev);
      pool[d] = std::string(name) + " (" + std::to_string(total >> 20) + " MiB)";  // the model (as suspend.cc's)
    }
  }
  Placement placement(vm_name, pool);
  {
    std::string why;
    const auto request = parse_placement(devices_text, &why);
    if (placement_dir.empty())
      placement_dir = (std::filesystem::path(socket_path).parent_path() / "placement").string();
    if (!request || !placement.place(*request, worker ? std::string() : placement_dir, &why)) {
      std::fprintf(stderr, "vmcuda-stub: %s\n", why.c_str());
      return 2;
    }
  }
  const std::vector<int> devices = placement.devices();
  // Fair sharing by weight (fair_share.h): the tables live in the placement directory, which
  // the host's stubs share. Workers read the weight the stub writes there.
  auto weight_of = [&](const std::optional<VmPolicy>& p) -> uint32_t {
    if (app.count("--weight")) return weight_opt;
    return p && p->weight && *p->weight ? *p->weight : 1u;
  };
  if (fair_share_mode == "on") {
    limits.fair_share = std::make_shared<FairShare>(placement_dir, vm_name, worker ? 0u : weight_of(policy));
    if (!worker)
      for (int d : devices) limits.fair_share->gpu(d);  // the VM's entries, kept alive from now on
  }
  g_fair_share = limits.fair_share;
  g_placement = &placement;
  // IPC between the VM's programs (ipc_registry.h): the VM's table lives here; a worker
  // reaches it over its socket (fd kIpcFd), the stub's own sessions (thread mode) directly.
  std::shared_ptr<IpcRegistry> ipc_registry;
  if (worker) {
    struct stat st{};
    if (::fstat(kIpcFd, &st) == 0 && S_ISSOCK(st.st_mode)) {
      ::fcntl(kIpcFd, F_SETFD, FD_CLOEXEC);
      limits.ipc = worker_ipc_channel(vmrpc::UniqueFd(kIpcFd));
    }
  } else {
    ipc_registry = std::make_shared<IpcRegistry>();
    limits.ipc = local_ipc_channel(ipc_registry);
  }
  // The VM's ledger: made here, handed to each worker (fd kLedgerFd), so the VM's programs
  // count against one quota whichever process serves them.
  static constexpr int kLedgerFd = 7;
  try {
    if (worker) {
      std::string why;
      limits.ledger = VmLedger::attach(kLedgerFd, &why);
      if (!limits.ledger) {
        std::fprintf(stderr, "vmcuda-stub worker: %s\n", why.c_str());
        return 1;
      }
      ::close(kLedgerFd);  // attach() keeps its own (close-on-exec) copy
    } else {
      limits.ledger = VmLedger::create(vm_quota(api, devices, quota_given ? quota_mib : 0, gpu_share,
                                                quota_given ? std::nullopt : policy),
                                       vm_host_quota(host_quota_mib, gpu_share, policy));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vmcuda-stub: %s\n", e.what());
    return 1;
  }
  if (image_cache_mib > 0) {
    ImageCache::Options o;
    const auto scope = image_cache_scope == "host" ? ImageCache::Scope::kHost : ImageCache::Scope::kVm;
    o.dir = !image_cache_dir.empty()
                ? image_cache_dir
                : ImageCache::default_dir(std::filesystem::path(socket_path).parent_path().string(), vm_name, scope);
    o.vm = vm_name;
    o.cap_bytes = image_cache_mib << 20;
    o.vm_bound_bytes = image_cache_vm_mib ? image_cache_vm_mib << 20 : o.cap_bytes;
    std::string why;
    limits.image_cache = ImageCache::open(o, &why);
    if (!limits.image_cache)  // not fatal: images cross per program as without it
      std::fprintf(stderr, "vmcuda-stub: %s; module images are not cached (--image-cache-mib 0 turns it off)\n",
                   why.c_str());
    g_image_cache = limits.image_cache;
  }
  StubService service(api, limits, [&placement] { return placement.devices(); });
  if (worker) return vmrpc::run_worker(argc, argv, service);

  vmrpc::HostEndpointOptions options{socket_path, region, 64};
  options.max_clients = max_clients;
  try {
    size_t used = 0;
    const unsigned long mode = std::stoul(socket_mode, &used, 8);
    if (used != socket_mode.size() || mode > 07777) throw std::invalid_argument(socket_mode);
    options.socket_access.mode = static_cast<mode_t>(mode);
    if (!socket_owner.empty()) options.socket_access.owner = vmrpc::resolve_user(socket_owner, "VM socket");
    if (!socket_group.empty()) options.socket_access.group = vmrpc::resolve_group(socket_group, "VM socket");
    else if (auto vmcuda = vmrpc::find_group("vmcuda"); vmcuda && in_group(*vmcuda))
      options.socket_access.group = vmcuda;
  } catch (const std::invalid_argument&) {
    std::fprintf(stderr, "vmcuda-stub: --socket-mode %s is not an octal mode such as 0660\n", socket_mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vmcuda-stub: %s\n", e.what());
    return 2;
  }
  if (isolation == "process") {
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
      std::fprintf(stderr, "vmcuda-stub: cannot find its own executable (/proc/self/exe) to start workers\n");
      return 1;
    }
    const std::string self(exe, static_cast<size_t>(n));
    std::vector<std::string> args(argv + 1, argv + stub_argc);
    args.insert(args.end(), policy_worker_args.begin(), policy_worker_args.end());
    const int ledger_fd = limits.ledger->fd();
    // Each worker is told the VM's GPUs as they are when it starts (a move changes them).
    options.spawn_worker = [self, args, ledger_fd, &placement, ipc_registry](const vmrpc::WorkerSpec& spec) {
      // Each worker's own socket to the VM's IPC table, served by a thread here until the
      // worker ends (then what its clients exported is revoked).
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return -1;
      vmrpc::UniqueFd ours(pair[0]), theirs(pair[1]);
      const int pid = vmrpc::spawn_worker_process(self, with_devices(args, placement.devices()), spec,
                                                  {{ledger_fd, kLedgerFd}, {theirs.get(), kIpcFd}});
      if (pid > 0) std::thread(serve_ipc_worker, ipc_registry, std::move(ours)).detach();
      return pid;
    };
    // A worker that ended (a crash, a kill) leaves nothing charged to the VM.
    options.on_worker_exit = [ledger = limits.ledger, mps = mps.get()](int pid, int status) {
      ledger->reclaim(pid);
      // Its GPU work must not outlive it in the MPS server. A worker that returned from
      // serving destroyed its contexts (waiting for their work) before it exited.
      if (mps && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) mps->client_exited(pid);
    };
    // Under MPS a killed worker's kernel would run on in the server: its work is ended first.
    if (mps)
      options.end_worker = [mps = mps.get()](int pid, vmrpc::UniqueFd pidfd) { mps->end_client(pid, std::move(pidfd)); };
  }

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);  // reload the policy
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts: they inherit it
  // A region replaced by a saved VM image: its clients come back through the VM control
  // (made below, before the endpoint starts).
  std::atomic<VmControl*> vm_control{nullptr};
  options.on_region_restored = [&vm_control](const vmrpc::RestoredRegion& r) {
    if (VmControl* vm = vm_control.load()) vm->adopt_restored(r);
    else throw std::runtime_error("the stub is not ready for restored VMs yet");
  };
  // Under a service manager: the VM's connections live in its fd store too, and what it kept
  // from the stub process before this one (a restart, a crash) is taken over.
  if (service_manager::present()) {
    options.store_fd = service_manager::store_fd;
    options.unstore_fd = service_manager::unstore_fd;
  }
  if (!std::getenv(vmrpc::HostEndpoint::kHandoverEnv)) options.inherited_fds = service_manager::inherited_fds();
  const bool from_fd_store = !options.inherited_fds.empty();
  const bool keep_on_stop = on_stop == "keep" || (on_stop == "auto" && service_manager::present());
  try {
    vmrpc::HostEndpoint endpoint(options, service);
    // The control socket (vmcudactl): status, suspend, resume, save, restore.
    if (control_socket.empty())
      control_socket = socket_path.ends_with(".sock") ? socket_path.substr(0, socket_path.size() - 5) + ".ctl"
                                                      : socket_path + ".ctl";
    VmControl vm(endpoint, vm_name, placement.names(), std::chrono::seconds(10),
                 state_dir.empty() ? std::string() : (std::filesystem::path(state_dir) / vm_name).string());
    vm_control = &vm;
    vm.set_ledger(limits.ledger);
    vm.set_placement(&placement);
    // The policy again (SIGHUP, vmcudactl reload): the quota and weight change now; GPUs and
    // the isolation mode only with a restart. Returns what changed, for the log or vmcudactl.
    auto publish_policy = [&vm, &weight_of](const std::optional<VmPolicy>& p) {
      vm.set_policy_info({p ? p->source : std::string(), p ? p->profile : std::string(), weight_of(p)});
    };
    publish_policy(policy);
    std::mutex reload_mu;
    auto reload_policy = [&]() -> std::string {
      std::lock_guard l(reload_mu);
      std::string why;
      auto fresh = load_policy(policy_file, vm_name, false, &why);
      if (!why.empty()) return "policy not reloaded: " + why + "; the VM keeps its policy";
      std::vector<std::string> changed, later;
      const uint64_t quota = vm_quota(api, placement.devices(), quota_given ? quota_mib : 0, gpu_share,
                                      quota_given ? std::nullopt : fresh);
      if (quota != limits.ledger->limit()) {
        limits.ledger->set_limit(quota);
        changed.push_back("memory quota " + (quota == ~0ull ? std::string("none") : std::to_string(quota >> 20) + " MiB"));
      }
      const uint64_t host_quota = vm_host_quota(host_quota_mib, gpu_share, fresh);
      if (host_quota != limits.ledger->limit(VmLedger::kHost)) {
        limits.ledger->set_limit(host_quota, VmLedger::kHost);
        changed.push_back("host memory bound " +
                          (host_quota == ~0ull ? std::string("none") : std::to_string(host_quota >> 20) + " MiB"));
      }
      const uint32_t old_weight = weight_of(policy), weight = weight_of(fresh);
      if (weight != old_weight) changed.push_back("weight " + std::to_string(weight));
      if (limits.fair_share) limits.fair_share->set_weight(weight);  // at once, for every client
      // A key's value in a policy ("" : not set), to tell what changed.
      auto key = [](const std::optional<VmPolicy>& p, std::optional<std::string> VmPolicy::*k) {
        return p && ((*p).*k) ? *((*p).*k) : std::string();
      };
      if (!app.count("--devices") && key(policy, &VmPolicy::devices) != key(fresh, &VmPolicy::devices))
        later.push_back("GPUs");
      if (!app.count("--isolation") && key(policy, &VmPolicy::isolation) != key(fresh, &VmPolicy::isolation))
        later.push_back("isolation mode");
      if (!app.count("--max-clients") && (policy ? policy->max_clients : std::nullopt) != (fresh ? fresh->max_clients : std::nullopt))
        later.push_back("limit of programs at once");
      policy = fresh;
      publish_policy(policy);
      std::string msg = fresh ? "policy of " + vm_name + " reloaded from " + policy_file : "no policy file (" + policy_file + ")";
      msg += changed.empty() ? "; nothing changed now" : "; now: ";
      for (size_t i = 0; i < changed.size(); ++i) msg += (i ? ", " : "") + changed[i];
      if (!later.empty()) {
        msg += "; the new ";
        for (size_t i = 0; i < later.size(); ++i) msg += (i ? " and " : "") + later[i];
        msg += " apply when the stub restarts (systemctl restart vmcuda-stub@" + vm_name + ": programs keep running)";
      }
      VMRPC_LOG(kInfo, "stub", msg);
      return msg;
    };
    // Whatever way this scope ends, the endpoint (its restore thread uses vm) stops first.
    struct StopFirst {
      vmrpc::HostEndpoint& e;
      ~StopFirst() { e.stop(); }
    } stop_first{endpoint};
    endpoint.start();
    std::unique_ptr<ControlServer> control;
    if (control_socket != "none") {
      ControlServerOptions copts;
      copts.socket_path = control_socket;
      if (!control_group.empty()) copts.group = control_group;
      control = std::make_unique<ControlServer>(copts);
      const std::vector<std::string> first_args(argv, argv + argc);
      install_control_handlers(*control, vm, Upgrade{&endpoint, vm.state_dir(), [first_args, &placement] {
                                                        std::vector<std::string> a = with_devices(
                                                            {first_args.begin() + 1, first_args.end()}, placement.devices());
                                                        a.insert(a.begin(), first_args.front());
                                                        return a;
                                                      }},
                               reload_policy);
      control->start();
    }
    vm.remove_stale_handovers();
    const std::string list = device_list(devices);
    const std::string time_limit =
        kernel_time_limit_s > 0 ? ", kernel time limit " + seconds_text(kernel_time_limit_s) + " s" : "";
    // After a restart or a crash, whether the VM kept its device (the admin's first question).
    const std::string taken_over =
        from_fd_store ? "; the socket and " + std::to_string(endpoint.stats().connections_open) +
                            " connection(s) taken over from the service manager's fd store"
                      : "";
    std::fprintf(stderr, "vmcuda-stub: serving %s on device(s) %s via %s, %s per client%s%s%s%s\n", socket_path.c_str(),
                 list.c_str(), api.origin.c_str(), isolation == "process" ? "a worker process" : "a thread",
                 limits.gpu_threads ? ", work issued by one working thread per GPU" : "",
                 mps ? ", GPUs shared at once through the VM's MPS daemon" : "", time_limit.c_str(), taken_over.c_str());
    service_manager::ready("serving " + vm_name + " on " + socket_path);
    int sig = 0;
    while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP)
      std::fprintf(stderr, "vmcuda-stub: SIGHUP: %s\n", reload_policy().c_str());
    if (keep_on_stop) {
      if (control) control->stop();
      keep_clients_and_exit(vm, sig);
    }
    std::fprintf(stderr, "vmcuda-stub: signal %d, closing all clients\n", sig);
    service_manager::stopping("closing all clients");
    if (control) control->stop();
    endpoint.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vmcuda-stub: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace vmcuda::host
