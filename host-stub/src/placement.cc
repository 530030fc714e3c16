#include "placement.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>

#include "vmrpc/log.h"

namespace vmcuda::host {

namespace fs = std::filesystem;

namespace {
bool parse_int(std::string_view s, int* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size() && *v >= 0;
}
// The devices a <vm>.gpus file names ("0,1\n"); empty when damaged.
std::vector<int> parse_list(std::string_view s) {
  std::vector<int> out;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return out;
  for (size_t start = 0;;) {
    const size_t comma = s.find(',', start);
    int v = 0;
    if (!parse_int(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start), &v))
      return {};
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}
}  // namespace

std::optional<PlacementRequest> parse_placement(const std::string& text, std::string* why) {
  PlacementRequest r;
  if (text == "auto") {
    r.auto_count = 1;
    return r;
  }
  if (text.starts_with("auto:")) {
    if (!parse_int(std::string_view(text).substr(5), &r.auto_count) || r.auto_count < 1 || r.auto_count > 64) {
      *why = "--devices " + text + ": auto:N needs a GPU count N of 1 or more";
      return std::nullopt;
    }
    return r;
  }
  r.devices = parse_list(text);
  if (r.devices.empty()) {
    *why = "--devices " + text + ": give GPU indexes (0 or 0,1) or auto[:N]";
    return std::nullopt;
  }
  return r;
}

std::string device_list(const std::vector<int>& devices) {
  std::string s;
  for (int d : devices) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

std::vector<std::string> with_devices(const std::vector<std::string>& args, const std::vector<int>& devices) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-d" || a == "--devices") {
      ++i;  // and its value
      continue;
    }
    if (a.starts_with("--devices=") || (a.starts_with("-d") && !a.starts_with("--"))) continue;
    out.push_back(a);
  }
  out.push_back("--devices");
  out.push_back(device_list(devices));
  return out;
}

std::map<int, int> Placement::usage(const std::string& dir, const std::string& except_vm) {
  std::map<int, int> n;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".gpus") || name == except_vm + ".gpus") continue;
    vmrpc::UniqueFd fd(::open(e.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) continue;
    // Its stub holds the lock while it lives: one that can be taken is a dead stub's.
    if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
      ::flock(fd.get(), LOCK_UN);
      continue;
    }
    char buf[512];
    const ssize_t got = ::read(fd.get(), buf, sizeof buf - 1);
    if (got <= 0) continue;
    for (int d : parse_list(std::string_view(buf, static_cast<size_t>(got)))) ++n[d];
  }
  return n;
}

bool Placement::place(const PlacementRequest& request, const std::string& dir, std::string* why) {
  std::lock_guard l(mu_);
  vmrpc::UniqueFd dir_lock;
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    dir_lock = vmrpc::UniqueFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir_lock || ::flock(dir_lock.get(), LOCK_EX) != 0) {
      *why = "cannot use the placement directory " + dir + ": " + std::strerror(errno) +
             " (it must be writable by the stub's user; --placement-dir)";
      return false;
    }
  }
  std::vector<int> chosen = request.devices;
  if (chosen.empty()) {
    if (static_cast<size_t>(request.auto_count) > pool_.size()) {
      *why = "--devices auto:" + std::to_string(request.auto_count) + " asks for more GPUs than the " +
             std::to_string(pool_.size()) + " this stub may use (--gpu-pool)";
      return false;
    }
    const std::map<int, int> used = dir.empty() ? std::map<int, int>{} : usage(dir, vm_);
    std::vector<int> order;
    for (const auto& [d, name] : pool_) order.push_back(d);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const auto ua = used.find(a), ub = used.find(b);
      return (ua == used.end() ? 0 : ua->second) < (ub == used.end() ? 0 : ub->second);
    });
    chosen.assign(order.begin(), order.begin() + request.auto_count);
    std::sort(chosen.begin(), chosen.end());  // guest device order follows the host's
  }
  std::set<int> seen;
  for (int d : chosen) {
    if (!pool_.contains(d)) {
      *why = "--devices names GPU " + std::to_string(d) + ", which is not among the GPUs this stub may use (" +
             std::to_string(pool_.size()) + " in --gpu-pool)";
      return false;
    }
    if (!seen.insert(d).second) {
      *why = "--devices names GPU " + std::to_string(d) + " twice";
      return false;
    }
  }
  devices_ = chosen;
  dir_ = dir;
  record_locked();
  return true;
}

void Placement::record_locked() {
  if (dir_.empty()) return;
  const fs::path file = fs::path(dir_) / (vm_ + ".gpus");
  if (!record_fd_) {
    record_fd_ = vmrpc::UniqueFd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!record_fd_ || ::flock(record_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
      VMRPC_LOG(kWarn, "stub", vm_ + ": cannot record its GPUs in " + file.string() + " (" + std::strerror(errno) +
                                   "): auto placement of other VMs will not count this one");
      record_fd_.reset();
      return;
    }
  }
  const std::string text = device_list(devices_) + "\n";
  if (::ftruncate(record_fd_.get(), 0) != 0 || ::pwrite(record_fd_.get(), text.data(), text.size(), 0) < 0)
    VMRPC_LOG(kWarn, "stub", vm_ + ": cannot write " + file.string() + ": " + std::strerror(errno));
}

bool Placement::check_move(const std::vector<int>& to, std::string* why) const {
  std::lock_guard l(mu_);
  if (to.size() != devices_.size()) {
    *why = "the VM has " + std::to_string(devices_.size()) + " GPU(s); --devices names " + std::to_string(to.size());
    return false;
  }
  std::set<int> seen;
  for (size_t i = 0; i < to.size(); ++i) {
    const auto it = pool_.find(to[i]);
    if (it == pool_.end()) {
      *why = "GPU " + std::to_string(to[i]) + " is not among the GPUs this stub may use (--gpu-pool)";
      return false;
    }
    if (!seen.insert(to[i]).second) {
      *why = "--devices names GPU " + std::to_string(to[i]) + " twice";
      return false;
    }
    const std::string& was = pool_.at(devices_[i]);
    if (it->second != was) {
      *why = "GPU " + std::to_string(to[i]) + " is a " + it->second + "; the VM's device " + std::to_string(i) +
             " was a " + was + " (a resume needs the same model)";
      return false;
    }
  }
  return true;
}

void Placement::set(const std::vector<int>& devices) {
  std::lock_guard l(mu_);
  devices_ = devices;
  record_locked();
}

std::vector<int> Placement::devices() const {
  std::lock_guard l(mu_);
  return devices_;
}

std::vector<std::string> Placement::names() const {
  std::lock_guard l(mu_);
  std::vector<std::string> v;
  for (int d : devices_) v.push_back(std::to_string(d) + ": " + pool_.at(d));
  return v;
}

}  // namespace vmcuda::host
