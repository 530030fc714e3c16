// Per-VM policy from one file (default /etc/vmcuda/policy.toml, `--policy FILE`):
//
//   [defaults]                # every VM
//   profile = "quarter-h100"
//   [profiles.quarter-h100]   # named sets of the keys below
//   memory = "20G"            # the VM's device memory quota (or memory_fraction = 0.25:
//                             #   of the smallest of its GPUs)
//   weight = 1                # its share of GPU time against other VMs (1..1000)
//   [vm.web1]                 # one VM, by its name (--vm / the socket's name)
//   profile = "half-h100"
//   devices = "auto"          # as --devices: "0,1", "auto", "auto:2"
//   isolation = "process"     # or "thread"
//   kernel_time_limit = 30    # seconds a kernel may run (0: no limit; --kernel-time-limit)
//   max_clients = 16          # programs served at once (0: no limit; --max-clients)
//   gpu_sharing = "mps"       # or "time" (--gpu-sharing: the VM's programs on a GPU at once)
//   host_memory = "16G"       # host memory its programs pin and its worker processes cost
//                             #   (--host-memory-quota-mib)
//
// A VM's values: [defaults], then its profile (its own `profile`, else the default one), then
// its [vm.NAME] keys; an option given on vmcuda-stub's command line wins over all. Unknown
// keys, tables and profiles are errors that name the file and the key (a typo must not
// silently give a VM the defaults). Reloaded on SIGHUP and `vmcudactl reload VM`: the quota
// and weight change at once; GPUs and isolation need the stub restarted (the reload says so).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vmcuda::host {

inline constexpr const char* kDefaultPolicyFile = "/etc/vmcuda/policy.toml";

struct VmPolicy {
  std::optional<std::string> devices;
  std::optional<uint64_t> memory_bytes;
  std::optional<double> memory_fraction;
  std::optional<uint32_t> weight;
  std::optional<std::string> isolation;
  std::optional<double> kernel_time_limit_s;
  std::optional<uint32_t> max_clients;
  std::optional<std::string> gpu_sharing;
  std::optional<uint64_t> host_memory_bytes;
  std::string profile;  // the profile applied ("" : none)
  std::string source;   // "FILE" for logs and status
};

// The policy of `vm` in `file`. A missing file is no policy (nullopt, *why empty) unless
// `required`; a damaged one is nullopt with *why saying where.
std::optional<VmPolicy> load_policy(const std::string& file, const std::string& vm, bool required, std::string* why);

// "20G", "512M", "1T", "4096" (bytes; K/M/G/T are powers of 1024, "iB"/"B" may follow).
std::optional<uint64_t> parse_size(const std::string& text);

}  // namespace vmcuda::host
