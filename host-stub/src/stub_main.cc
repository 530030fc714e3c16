// vmcuda-stub's command line and life cycle: serves one vmrpc socket (one per VM, or the
// local transport), runs each client's CUDA calls on the driver in its own context.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "stub_main.h"
#include "driver_api.h"
#include "session.h"
#include "vmrpc/host_endpoint.h"

namespace vmcuda::host {

int stub_main(int argc, char** argv, const DriverApi* preset) {
  CLI::App app{"vmcuda-stub: serves CUDA to guests over vmrpc shared memory"};
  std::string socket_path = "/run/vmcuda/local.sock";
  std::vector<int> devices{0};
  uint64_t quota_mib = 0;
  vmrpc::RegionConfig region = vmrpc::RegionConfig::from_knobs();
  app.add_option("-s,--socket", socket_path, "UNIX socket to serve (one per VM; QEMU's ivshmem chardev connects here)");
  app.add_option("-d,--devices", devices, "host CUDA devices this socket's clients use; guest device i is the i-th")
      ->check(CLI::NonNegativeNumber)
      ->delimiter(',');
  app.add_option("--memory-quota-mib", quota_mib, "device memory per client in MiB (0: no quota)");
  StubLimits limits;
  app.add_option("--max-streams", limits.max_streams, "live streams per client")->capture_default_str();
  app.add_option("--max-events", limits.max_events, "live events per client")->capture_default_str();
  app.add_option("--slots", region.slot_count, "client slots per VM (= ivshmem vectors)")->check(CLI::Range(1, 2048));
  app.add_option("--region-bytes", region.region_bytes, "shared region size per VM (power of two)");
  CLI11_PARSE(app, argc, argv);

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
  for (int d : devices)
    if (d >= count) {
      std::fprintf(stderr, "vmcuda-stub: --devices names %d, but the driver sees %d device(s) (0..%d)\n", d, count,
                   count - 1);
      return 2;
    }
  if (quota_mib) limits.memory_quota = quota_mib << 20;
  StubService service(api, limits, devices);

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts: they inherit it
  try {
    vmrpc::HostEndpoint endpoint({socket_path, region, 64}, service);
    endpoint.start();
    std::string list;
    for (int d : devices) list += (list.empty() ? "" : ",") + std::to_string(d);
    std::fprintf(stderr, "vmcuda-stub: serving %s on device(s) %s via %s\n", socket_path.c_str(), list.c_str(),
                 api.origin.c_str());
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "vmcuda-stub: signal %d, closing all clients\n", sig);
    endpoint.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vmcuda-stub: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace vmcuda::host
