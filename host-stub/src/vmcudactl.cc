// vmcudactl: the administrator's command for running vmcuda-stub daemons. Talks to a stub's
// control socket (<run-dir>/<VM>.ctl; protocol in control_server.h).
//
// Exit status: 0 success; 1 the stub replied with an error; 2 usage error; 3 the stub
// cannot be reached (no socket, nobody listening, died mid-operation, untrusted owner);
// 4 libvirt failed (domain-save, domain-snapshot: no connection, no such domain, the save or
// snapshot failed; the VM's GPU state was resumed).
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef VMCUDACTL_LIBVIRT
#include <dlfcn.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#endif

#include "control_server.h"  // kMaxControlLineBytes, the protocol
#include "vmrpc/fd.h"

#ifndef VMCUDA_VERSION
#define VMCUDA_VERSION "unknown"
#endif

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kExitErrorReply = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnreachable = 3;
constexpr auto kStatusTimeout = std::chrono::seconds(5);

// The stub could not be reached, or went away before replying.
struct Unreachable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The stub replied {"ok":false,...}, or something that is not the protocol.
struct ErrorReply : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(int err) {
  const char* name = ::strerrordesc_np(err);
  const char* symbol = ::strerrorname_np(err);
  return std::string(name ? name : "unknown error") + (symbol ? std::string(" (") + symbol + ")" : "");
}

std::string hint_for(const std::string& vm) {
  return "is vmcuda-stub@" + vm + " running? (systemctl status vmcuda-stub@" + vm + ")";
}

// ---- progress on stderr --------------------------------------------------------------

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

std::string format_rate(double bytes_per_second) {
  char text[32];
  if (bytes_per_second >= 1e9)
    std::snprintf(text, sizeof text, "%.2f GB/s", bytes_per_second / 1e9);
  else
    std::snprintf(text, sizeof text, "%.1f MB/s", bytes_per_second / 1e6);
  return text;
}

std::string format_duration(double seconds) {
  char text[32];
  const auto whole = static_cast<long>(std::ceil(seconds));
  if (whole < 60)
    std::snprintf(text, sizeof text, "%ld s", whole);
  else if (whole < 3600)
    std::snprintf(text, sizeof text, "%ld:%02ld", whole / 60, whole % 60);
  else
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", whole / 3600, whole / 60 % 60, whole % 60);
  return text;
}

// One line updated in place on a terminal; otherwise a line every few seconds (logs).
class ProgressDisplay {
 public:
  ProgressDisplay() : terminal_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressDisplay() { finish(); }

  void update(const std::string& phase, uint64_t done, uint64_t total) {
    const auto now = Clock::now();
    const bool new_phase = phase != phase_;
    if (new_phase) {
      if (!terminal_ && shown_) last_print_ = {};  // a new phase gets its own line at once
      phase_ = phase;
      phase_start_ = now;
      done_at_phase_start_ = done;
    }
    std::string text = phase + ": " + format_bytes(done);
    if (total > 0) {
      char percent[16];
      std::snprintf(percent, sizeof percent, " (%.0f%%)", 100.0 * static_cast<double>(std::min(done, total)) /
                                                            static_cast<double>(total));
      text += " / " + format_bytes(total) + percent;
    }
    const double elapsed = std::chrono::duration<double>(now - phase_start_).count();
    if (elapsed > 0.2 && done > done_at_phase_start_) {
      const double rate = static_cast<double>(done - done_at_phase_start_) / elapsed;
      text += ", " + format_rate(rate);
      if (total > done) text += ", " + format_duration(static_cast<double>(total - done) / rate) + " left";
    }
    if (terminal_) {
      std::fprintf(stderr, "\r\033[K%s", text.c_str());
      std::fflush(stderr);
      shown_ = true;
    } else if (!shown_ || new_phase || now - last_print_ >= std::chrono::seconds(3)) {
      std::fprintf(stderr, "%s\n", text.c_str());
      shown_ = true;
      last_print_ = now;
    }
  }

  void finish() {
    if (terminal_ && shown_) std::fputc('\n', stderr);
    shown_ = false;
  }

 private:
  bool terminal_;
  bool shown_ = false;
  std::string phase_;
  Clock::time_point phase_start_{};
  Clock::time_point last_print_{};
  uint64_t done_at_phase_start_ = 0;
};

// ---- one request on a control socket -------------------------------------------------

struct Target {
  std::string vm;      // for messages and the hint
  std::string socket;  // control socket path
};

class ControlConnection {
 public:
  explicit ControlConnection(const Target& target) : target_(target) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (target.socket.size() >= sizeof address.sun_path)
      throw Unreachable("control socket path " + target.socket + " is too long (" +
                        std::to_string(sizeof address.sun_path - 1) + " bytes at most)");
    std::memcpy(address.sun_path, target.socket.c_str(), target.socket.size() + 1);
    // Non-blocking: a stub whose queue is full answers EAGAIN instead of hanging us.
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_) throw Unreachable("socket(AF_UNIX): " + errno_text(errno));
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0)
      throw Unreachable("cannot reach " + target.socket + ": " + errno_text(errno) + "; " + hint_for(target.vm));
    check_stub_identity();
  }

  // Sends `request`, shows progress lines, returns the result of {"ok":true}.
  json call(const json& request, std::optional<Clock::duration> timeout, bool show_progress) {
    const auto deadline = timeout ? std::optional(Clock::now() + *timeout) : std::nullopt;
    send_line(request.dump() + "\n", deadline);
    ProgressDisplay display;
    for (;;) {
      const std::string line = read_line(deadline);
      json reply;
      try {
        reply = json::parse(line);
      } catch (const json::exception&) {
        throw ErrorReply("the stub at " + target_.socket + " sent a line that is not JSON: " + line.substr(0, 200));
      }
      if (reply.is_object() && reply.contains("progress")) {
        const json& p = reply["progress"];
        if (show_progress && p.is_object())
          display.update(p.value("phase", std::string("working")), p.value("done", uint64_t{0}),
                         p.value("total", uint64_t{0}));
        continue;
      }
      display.finish();
      if (!reply.is_object() || !reply.contains("ok") || !reply["ok"].is_boolean())
        throw ErrorReply("the stub at " + target_.socket + " sent an unexpected line: " + line.substr(0, 200));
      if (!reply["ok"].get<bool>()) {
        const json& error = reply.contains("error") ? reply["error"] : json();
        throw ErrorReply(error.is_string() ? error.get<std::string>() : "failed (the stub gave no reason)");
      }
      return reply.contains("result") ? reply["result"] : json();
    }
  }

 private:
  // Sockets have owners (DESIGN.md, Security): only trust a listener run by root, by us, or
  // by the owner of the socket's directory (the stub's runtime directory).
  void check_stub_identity() {
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) < 0)
      throw Unreachable("cannot tell who serves " + target_.socket + ": " + errno_text(errno));
    if (credentials.uid == 0 || credentials.uid == ::geteuid()) return;
    const std::string directory = std::filesystem::path(target_.socket).parent_path().string();
    struct stat st{};
    if (::stat(directory.empty() ? "." : directory.c_str(), &st) == 0 && st.st_uid == credentials.uid) return;
    throw Unreachable(target_.socket + " is served by uid " + std::to_string(credentials.uid) + " (pid " +
                      std::to_string(credentials.pid) + "), who is neither root, you, nor the owner of " +
                      directory + "; not trusting it");
  }

  int wait_ms(const std::optional<Clock::time_point>& deadline) const {
    if (!deadline) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(left, 0));
  }

  void send_line(const std::string& line, const std::optional<Clock::time_point>& deadline) {
    size_t sent = 0;
    while (sent < line.size()) {
      ssize_t n = ::send(fd_.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        pollfd pfd{fd_.get(), POLLOUT, 0};
        if (::poll(&pfd, 1, wait_ms(deadline)) == 0) throw Unreachable(target_.socket + ": the stub is not answering");
        continue;
      }
      // A refusal (not allowed, too many connections) closes at once: its line is still to be read.
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return;
      throw Unreachable("cannot send to " + target_.socket + ": " + errno_text(errno) + "; " + hint_for(target_.vm));
    }
  }

  std::string read_line(const std::optional<Clock::time_point>& deadline) {
    for (;;) {
      if (size_t newline = pending_.find('\n'); newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        return line;
      }
      if (pending_.size() > 16 * vmcuda::host::kMaxControlLineBytes)
        throw ErrorReply("the stub at " + target_.socket + " sent an overlong line");
      pollfd pfd{fd_.get(), POLLIN, 0};
      int ready = ::poll(&pfd, 1, wait_ms(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) throw Unreachable(target_.socket + ": the stub is not answering");
      char buffer[8192];
      ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0)
        throw Unreachable("lost the connection to " + target_.socket + ": " + errno_text(errno) + "; " +
                          hint_for(target_.vm));
      if (n == 0)
        throw Unreachable("the stub at " + target_.socket +
                          " closed the connection without replying; did it exit? (journalctl -u vmcuda-stub@" +
                          target_.vm + ")");
      pending_.append(buffer, static_cast<size_t>(n));
    }
  }

  Target target_;
  vmrpc::UniqueFd fd_;
  std::string pending_;
};

// ---- status ----------------------------------------------------------------------------

struct StatusRow {
  Target target;
  std::optional<json> status;
  std::string error;  // when there is no status
};

std::string cell_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "-";
  return value.dump();
}

std::string gpus_text(const json& gpus) {
  if (!gpus.is_array()) return cell_text(gpus);
  std::string text;
  for (const json& gpu : gpus) {
    std::string one;
    if (gpu.is_object())
      one = (gpu.contains("index") ? cell_text(gpu["index"]) + ": " : "") + cell_text(gpu.value("name", json()));
    else
      one = cell_text(gpu);
    text += (text.empty() ? "" : ", ") + one;
  }
  return text.empty() ? "-" : text;
}

// Columns padded; `right` says which hold numbers.
void print_table(const std::vector<std::vector<std::string>>& cells, const std::vector<bool>& right) {
  std::vector<size_t> widths(cells.empty() ? 0 : cells.front().size(), 0);
  for (const auto& line : cells)
    for (size_t i = 0; i < line.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      const std::string pad(widths[i] - line[i].size(), ' ');
      if (i == line.size() - 1) text += right[i] ? pad + line[i] : line[i];
      else text += (right[i] ? pad + line[i] : line[i] + pad) + "  ";
    }
    std::printf("%s\n", text.c_str());
  }
}

// The VM's share of each GPU's time recently ("25%"; "0:25% 1:3%" with several GPUs) and its
// GPU time so far in seconds (all GPUs), from status' gpu_time (fair_share.h); "-" without.
std::pair<std::string, std::string> gpu_time_text(const json& s) {
  if (!s.contains("gpu_time") || !s["gpu_time"].is_array() || s["gpu_time"].empty()) return {"-", "-"};
  const json& list = s["gpu_time"];
  std::string share;
  double busy = 0;
  for (const json& g : list) {
    if (!g.is_object()) continue;
    char t[48];
    const double pct = 100.0 * (g.contains("share") && g["share"].is_number() ? g["share"].get<double>() : 0.0);
    if (list.size() == 1) std::snprintf(t, sizeof t, "%.0f%%", pct);
    else std::snprintf(t, sizeof t, "%s:%.0f%%", cell_text(g.value("gpu", json())).c_str(), pct);
    share += (share.empty() ? "" : " ") + std::string(t);
    if (g.contains("busy_seconds") && g["busy_seconds"].is_number()) busy += g["busy_seconds"].get<double>();
  }
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", busy);
  return {share.empty() ? "-" : share, b};
}

void print_status_table(const std::vector<StatusRow>& rows) {
  std::vector<std::vector<std::string>> cells{
      {"VM", "STATE", "CLIENTS", "MEMORY MiB", "QUOTA MiB", "WEIGHT", "GPU SHARE", "GPU BUSY s", "GPUS"}};
  for (const StatusRow& row : rows) {
    if (!row.status) {
      cells.push_back({row.target.vm, "not answering", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    const json& s = *row.status;
    std::string memory = "-";
    if (s.contains("device_memory_bytes") && s["device_memory_bytes"].is_number()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.0f", s["device_memory_bytes"].get<double>() / (1024.0 * 1024.0));
      memory = text;
    }
    std::string quota = "none";
    if (s.contains("memory_quota_bytes") && s["memory_quota_bytes"].is_number()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.0f", s["memory_quota_bytes"].get<double>() / (1024.0 * 1024.0));
      quota = text;
    } else if (!s.contains("memory_quota_bytes")) {
      quota = "-";  // a stub from before quotas were the VM's
    }
    const auto [share, busy] = gpu_time_text(s);
    cells.push_back({row.target.vm, s.contains("state") ? cell_text(s["state"]) : "-",
                     s.contains("clients") ? cell_text(s["clients"]) : "-", memory, quota,
                     s.contains("weight") ? cell_text(s["weight"]) : "-", share, busy,
                     s.contains("gpus") ? gpus_text(s["gpus"]) : "-"});
  }
  print_table(cells, {false, false, true, true, true, true, true, true, false});  // numbers to the right
}

StatusRow query_status(const Target& target) {
  StatusRow row{target, std::nullopt, ""};
  try {
    ControlConnection connection(target);
    row.status = connection.call(json{{"op", "status"}}, kStatusTimeout, false);
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

// Every <run-dir>/*.ctl socket, sorted by VM name.
std::vector<Target> control_sockets_in(const std::string& run_dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> directory(::opendir(run_dir.c_str()), ::closedir);
  if (!directory)
    throw Unreachable("cannot read " + run_dir + ": " + errno_text(errno) +
                      "; is any vmcuda-stub running? (systemctl list-units 'vmcuda-stub@*')");
  std::vector<Target> targets;
  while (dirent* entry = ::readdir(directory.get())) {
    const std::string name = entry->d_name;
    if (name.size() <= 4 || !name.ends_with(".ctl") || name.starts_with(".")) continue;
    const std::string path = run_dir + "/" + name;
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    targets.push_back({name.substr(0, name.size() - 4), path});
  }
  std::sort(targets.begin(), targets.end(), [](const Target& a, const Target& b) { return a.vm < b.vm; });
  return targets;
}


double number_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}
std::string mib_text(double bytes) {
  char t[32];
  std::snprintf(t, sizeof t, "%.0f", bytes / (1024.0 * 1024.0));
  return t;
}

// One VM's programs: pid (the guest's), program, state, device memory, what its modules are
// charged to the VM's quota (KiB: modules are small), kernels launched and,
// given an earlier status `before` taken `seconds` ago, kernels per second.
void print_clients(const std::string& vm, const json& s, const json* before, double seconds) {
  if (!s.contains("client_list") || !s["client_list"].is_array() || s["client_list"].empty()) return;
  std::map<std::pair<uint64_t, uint64_t>, double> launches_before;
  if (before && before->contains("client_list") && (*before)["client_list"].is_array())
    for (const auto& c : (*before)["client_list"])
      launches_before[{static_cast<uint64_t>(number_at(c, "connection")), static_cast<uint64_t>(number_at(c, "slot"))}] =
          number_at(c, "launches");
  std::vector<std::vector<std::string>> cells{{"VM", "PID", "PROGRAM", "STATE", "MEMORY MiB", "MODULES KiB", "KERNELS", "KERNELS/S"}};
  for (const auto& c : s["client_list"]) {
    const std::pair<uint64_t, uint64_t> key{static_cast<uint64_t>(number_at(c, "connection")),
                                            static_cast<uint64_t>(number_at(c, "slot"))};
    std::string rate = "-";
    if (auto it = launches_before.find(key); it != launches_before.end() && seconds > 0) {
      char t[32];
      std::snprintf(t, sizeof t, "%.0f", std::max(0.0, number_at(c, "launches") - it->second) / seconds);
      rate = t;
    }
    const std::string program = c.contains("program") && c["program"].is_string() && !c["program"].get<std::string>().empty()
                                    ? c["program"].get<std::string>()
                                    : "?";
    char launches[32], modules[32];
    std::snprintf(launches, sizeof launches, "%.0f", number_at(c, "launches"));
    std::snprintf(modules, sizeof modules, "%.0f", std::ceil(number_at(c, "module_bytes") / 1024.0));
    cells.push_back({vm, cell_text(c.value("pid", json())), program,
                     c.value("suspended", false) ? "suspended" : "running", mib_text(number_at(c, "device_memory_bytes")),
                     modules, launches, rate});
  }
  std::printf("\n");
  print_table(cells, {false, true, false, false, true, true, true, true});
}

// Prometheus' text format (node-exporter's textfile collector takes it as is): each family's
// HELP and TYPE, then all its samples together.
std::string metrics_text(const std::vector<StatusRow>& rows) {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    std::string samples;
  };
  std::vector<Family> families{
      {"vmcuda_vm_up", "gauge", "1 when the VM's stub answers", {}},
      {"vmcuda_vm_clients", "gauge", "CUDA programs the VM runs", {}},
      {"vmcuda_vm_device_memory_bytes", "gauge", "device memory the VM's programs hold, as the driver maps it", {}},
      {"vmcuda_vm_memory_quota_bytes", "gauge", "the VM's device memory quota (absent: none)", {}},
      {"vmcuda_vm_suspended", "gauge", "1 while the VM is suspended or saved", {}},
      {"vmcuda_vm_weight", "gauge", "the VM's share weight (policy)", {}},
      {"vmcuda_client_device_memory_bytes", "gauge", "device memory one program holds", {}},
      {"vmcuda_client_kernels_total", "counter", "kernels one program launched", {}},
      {"vmcuda_vm_gpu_busy_seconds_total", "counter", "GPU time the VM's programs used on one GPU (fair sharing's count)", {}},
      {"vmcuda_vm_gpu_time_share", "gauge", "the VM's share of one GPU's time over the last seconds (0..1)", {}},
      {"vmcuda_vm_module_bytes", "gauge", "what the VM's loaded modules are charged to its memory quota", {}},
      {"vmcuda_client_module_bytes", "gauge", "what one program's loaded modules are charged to the VM's memory quota", {}},
      // The module image cache (image_cache.h): the whole directory (a shared one: all its VMs').
      {"vmcuda_image_cache_entries", "gauge", "module images in the VM's image cache", {}},
      {"vmcuda_image_cache_bytes", "gauge", "bytes of the image cache's files", {}},
      {"vmcuda_image_cache_vm_bytes", "gauge", "bytes of the image cache's files this VM added", {}},
      {"vmcuda_image_cache_hits_total", "counter", "module loads served from the image cache (no image crossed)", {}},
      {"vmcuda_image_cache_misses_total", "counter", "module loads the image cache could not serve (the image crossed)", {}},
      {"vmcuda_image_cache_evictions_total", "counter", "image cache files removed for its bounds", {}},
      {"vmcuda_client_library_calls_total", "counter",
       "calls of one library remoted at its API (cuBLAS, cuDNN...) one program made", {}},
  };
  auto label = [](const std::string& v) {
    std::string e;
    for (char c : v) e += c == '"' || c == '\\' ? std::string("\\") + c : c == '\n' ? std::string("\\n") : std::string(1, c);
    return e;
  };
  auto add = [&](size_t family, const std::string& labels, double v) {
    char t[64];
    std::snprintf(t, sizeof t, "%.17g", v);
    families[family].samples += std::string(families[family].name) + "{" + labels + "} " + t + "\n";
  };
  for (const auto& r : rows) {
    const std::string vm = "vm=\"" + label(r.target.vm) + "\"";
    add(0, vm, r.status ? 1 : 0);
    if (!r.status) continue;
    const json& s = *r.status;
    add(1, vm, number_at(s, "clients"));
    add(2, vm, number_at(s, "device_memory_bytes"));
    if (s.contains("memory_quota_bytes") && s["memory_quota_bytes"].is_number()) add(3, vm, number_at(s, "memory_quota_bytes"));
    const std::string state = s.contains("state") && s["state"].is_string() ? s["state"].get<std::string>() : "";
    add(4, vm, state == "suspended" || state == "saved" ? 1 : 0);
    add(5, vm, s.contains("weight") ? number_at(s, "weight") : 1);
    add(10, vm, number_at(s, "module_bytes"));
    if (s.contains("image_cache") && s["image_cache"].is_object()) {
      const json& ic = s["image_cache"];
      add(12, vm, number_at(ic, "entries"));
      add(13, vm, number_at(ic, "bytes"));
      add(14, vm, number_at(ic, "vm_bytes"));
      add(15, vm, number_at(ic, "hits"));
      add(16, vm, number_at(ic, "misses"));
      add(17, vm, number_at(ic, "evicted"));
    }
    if (s.contains("gpu_time") && s["gpu_time"].is_array())
      for (const auto& g : s["gpu_time"]) {
        const std::string labels = vm + ",gpu=\"" + cell_text(g.value("gpu", json())) + "\"";
        add(8, labels, number_at(g, "busy_seconds"));
        add(9, labels, number_at(g, "share"));
      }
    if (!s.contains("client_list") || !s["client_list"].is_array()) continue;
    for (const auto& c : s["client_list"]) {
      const std::string labels = vm + ",pid=\"" + cell_text(c.value("pid", json())) + "\",program=\"" +
                                 label(c.value("program", std::string())) + "\"";
      add(6, labels, number_at(c, "device_memory_bytes"));
      add(7, labels, number_at(c, "launches"));
      add(11, labels, number_at(c, "module_bytes"));
      if (c.contains("library_calls") && c["library_calls"].is_object())
        for (const auto& [library, calls] : c["library_calls"].items())
          if (calls.is_number() && calls.get<double>() > 0)
            add(18, labels + ",library=\"" + label(library) + "\"", calls.get<double>());
    }
  }
  std::string out;
  for (const Family& f : families)
    out += std::string("# HELP ") + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.type + "\n" + f.samples;
  return out;
}

std::vector<StatusRow> query_all(const std::vector<Target>& targets) {
  // All at once: a hung stub costs its timeout once, not once per VM after it.
  std::vector<std::future<StatusRow>> pending;
  for (const Target& target : targets) pending.push_back(std::async(std::launch::async, query_status, target));
  std::vector<StatusRow> rows;
  for (auto& future : pending) rows.push_back(future.get());
  return rows;
}

int status_all(const std::string& run_dir, bool json_output) {
  const std::vector<Target> targets = control_sockets_in(run_dir);
  if (targets.empty()) {
    if (json_output) std::printf("[]\n");
    std::fprintf(stderr, "vmcudactl: no control sockets (*.ctl) in %s; no vmcuda-stub is running\n", run_dir.c_str());
    return 0;
  }
  const std::vector<StatusRow> rows = query_all(targets);

  if (json_output) {
    json all = json::array();
    for (const StatusRow& row : rows) {
      json entry{{"vm", row.target.vm}, {"socket", row.target.socket}};
      if (row.status)
        entry["status"] = *row.status;
      else
        entry["error"] = row.error;
      all.push_back(entry);
    }
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    print_status_table(rows);
  }
  for (const StatusRow& row : rows)
    if (!row.status) std::fprintf(stderr, "vmcudactl: %s: not answering: %s\n", row.target.vm.c_str(), row.error.c_str());
  return 0;
}

// ---- the command line ------------------------------------------------------------------

bool valid_vm_name(const std::string& vm) {
  return !vm.empty() && vm != "." && vm != ".." && vm.find('/') == std::string::npos &&
         vm.find('\0') == std::string::npos;
}

std::string absolute_path(const std::string& file) {
  return std::filesystem::absolute(std::filesystem::path(file)).lexically_normal().string();
}

std::string past_tense(const std::string& op) {
  if (op == "suspend") return "suspended";
  if (op == "resume") return "resumed";
  if (op == "save") return "saved";
  if (op == "restore") return "restored";
  if (op == "upgrade") return "upgraded";
  if (op == "reload") return "reloaded";
  return op + " done";
}


// ---- libvirt: a whole VM saved or snapshotted with its GPU state, in one command --------
//
// `domain-save DOMAIN FILE` / `domain-snapshot DOMAIN NAME`: the stub serving the domain's
// vmcuda device (found from the domain's <shmem><server path='X.sock'/>: its control socket is
// X.ctl) saves the VM's GPU state into a directory and writes a new image token into the region
// (VmControl::save); then libvirt saves the domain (virDomainSave) or takes an internal
// snapshot of it (virDomainSnapshotCreateXML), which carry the region and so the token. A
// plain `virsh restore` / `virsh snapshot-revert` later brings the GPU state back: the stub
// finds it by the token (docs/snapshots.md). If the libvirt step fails, the GPU state is
// resumed and the VM runs on as before; after a snapshot it is resumed too (the VM keeps
// running).

constexpr int kExitLibvirt = 4;

// libvirt failed (no connection, no such domain, the save or snapshot failed).
struct LibvirtError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) { interrupted = true; }

struct DomainRequest {
  bool snapshot = false;
  std::string uri;          // --connect; "" : libvirt's default (as virsh)
  std::string domain;       // name, UUID or id
  std::string target;       // the save file, or the snapshot's name
  std::string description;  // snapshot
  std::string gpu_state;    // directory for the GPU state ("" : the default)
  std::string socket;       // the stub's control socket ("" : from the domain XML)
};

#ifdef VMCUDACTL_LIBVIRT

// libvirt's C API, loaded when a domain command runs: vmcudactl itself runs on hosts
// without libvirt (a stub serving plain QEMU, a GPU machine).
#define VMCUDACTL_LIBVIRT_FUNCTIONS(X) \
  X(virConnectClose) \
  X(virConnectGetURI) \
  X(virConnectOpen) \
  X(virDomainAbortJob) \
  X(virDomainFree) \
  X(virDomainGetJobInfo) \
  X(virDomainGetName) \
  X(virDomainGetState) \
  X(virDomainGetXMLDesc) \
  X(virDomainIsActive) \
  X(virDomainLookupByID) \
  X(virDomainLookupByName) \
  X(virDomainLookupByUUIDString) \
  X(virDomainSave) \
  X(virDomainSnapshotCreateXML) \
  X(virDomainSnapshotFree) \
  X(virGetLastErrorMessage) \
  X(virSetErrorFunc) \

struct LibvirtApi {
#define VMCUDACTL_LIBVIRT_POINTER(f) decltype(&::f) f = nullptr;
  VMCUDACTL_LIBVIRT_FUNCTIONS(VMCUDACTL_LIBVIRT_POINTER)
#undef VMCUDACTL_LIBVIRT_POINTER
};

// The loaded API; throws with what to install when libvirt is not there.
const LibvirtApi& libvirt() {
  static const LibvirtApi* api = [] () -> const LibvirtApi* {
    void* lib = ::dlopen("libvirt.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    auto* a = new LibvirtApi;
#define VMCUDACTL_LIBVIRT_RESOLVE(f) a->f = reinterpret_cast<decltype(&::f)>(::dlsym(lib, #f)); if (!a->f) return nullptr;
    VMCUDACTL_LIBVIRT_FUNCTIONS(VMCUDACTL_LIBVIRT_RESOLVE)
#undef VMCUDACTL_LIBVIRT_RESOLVE
    return a;
  }();
  if (!api)
    throw std::runtime_error("this command needs libvirt's library (libvirt.so.0): install it (apt-get install "
                             "libvirt0) or use vmcudactl save and virsh save in turn (docs/snapshots.md)");
  return *api;
}

std::string xml_unescape(std::string text) {
  static const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities)
    for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += std::strlen(to))
      text.replace(at, std::strlen(from), to);
  return text;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\'': out += "&apos;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The server sockets of the domain's ivshmem-doorbell devices, as libvirt writes its XML.
std::vector<std::string> vmcuda_sockets_of(const std::string& domain_xml) {
  static const std::regex shmem("<shmem\\b[^>]*>([\\s\\S]*?)</shmem>");
  static const std::regex doorbell("<model\\s+type=['\"]ivshmem-doorbell['\"]");
  static const std::regex server("<server\\b[^>]*\\bpath=(['\"])([^'\"]*)\\1");
  std::vector<std::string> sockets;
  for (auto it = std::sregex_iterator(domain_xml.begin(), domain_xml.end(), shmem); it != std::sregex_iterator(); ++it) {
    const std::string body = (*it)[1].str();
    std::smatch path;
    if (std::regex_search(body, doorbell) && std::regex_search(body, path, server))
      sockets.push_back(xml_unescape(path[2].str()));
  }
  return sockets;
}

// The stub's default control socket for a VM socket (stub_main.cc: .sock -> .ctl).
std::string control_socket_for(const std::string& vm_socket) {
  return vm_socket.ends_with(".sock") ? vm_socket.substr(0, vm_socket.size() - 5) + ".ctl" : vm_socket + ".ctl";
}

std::string libvirt_error() {
  const char* message = libvirt().virGetLastErrorMessage();
  return message && *message ? message : "unknown libvirt error";
}

struct LibvirtConnection {
  virConnectPtr conn = nullptr;
  virDomainPtr dom = nullptr;
  ~LibvirtConnection() {
    if (dom) libvirt().virDomainFree(dom);
    if (conn) libvirt().virConnectClose(conn);
  }
};

const char* domain_state_name(int state) {
  switch (state) {
    case VIR_DOMAIN_RUNNING: return "running";
    case VIR_DOMAIN_BLOCKED: return "blocked";
    case VIR_DOMAIN_PAUSED: return "paused";
    case VIR_DOMAIN_SHUTDOWN: return "being shut down";
    case VIR_DOMAIN_SHUTOFF: return "shut off";
    case VIR_DOMAIN_CRASHED: return "crashed";
    case VIR_DOMAIN_PMSUSPENDED: return "suspended by guest power management";
    default: return "in no known state";
  }
}

// Shows libvirt's progress of the domain's job (memory written to the file) and turns ^C into
// an abort of that job, which libvirt undoes (the VM runs on).
class JobWatcher {
 public:
  JobWatcher(virDomainPtr dom, std::string phase) : dom_(dom), phase_(std::move(phase)) {
    thread_ = std::thread([this] { run(); });
  }
  ~JobWatcher() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    ProgressDisplay display;
    bool aborted = false;
    std::unique_lock l(mu_);
    while (!cv_.wait_for(l, std::chrono::milliseconds(500), [&] { return stop_; })) {
      if (interrupted && !aborted) {
        aborted = true;
        display.finish();
        std::fprintf(stderr, "vmcudactl: interrupted: aborting the libvirt job\n");
        libvirt().virDomainAbortJob(dom_);
      }
      virDomainJobInfo info{};
      if (libvirt().virDomainGetJobInfo(dom_, &info) == 0 && info.type != VIR_DOMAIN_JOB_NONE && info.dataTotal > 0)
        display.update(phase_, info.dataProcessed, info.dataTotal);
    }
  }
  virDomainPtr dom_;
  std::string phase_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// After libvirt saved the domain (its QEMU gone): waits until the stub has let go of the VM's
// connection, then resumes the (now empty) saved VM so that the stub serves new clients again.
bool release_saved(const Target& target, std::string* why) {
  try {
    for (int i = 0; i < 50; ++i) {
      ControlConnection connection(target);
      const json status = connection.call(json{{"op", "status"}}, kStatusTimeout, false);
      if (!status.is_object() || status.value("clients", 0) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ControlConnection connection(target);
    connection.call(json{{"op", "resume"}}, std::nullopt, false);
    return true;
  } catch (const ErrorReply& e) {
    if (std::string(e.what()).find("not suspended") != std::string::npos) return true;  // already let go
    *why = e.what();
    return false;
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
}

int domain_command(const DomainRequest& req) {
  const char* what = req.snapshot ? "domain-snapshot" : "domain-save";
  libvirt().virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});  // errors are reported here, once
  LibvirtConnection lv;
  lv.conn = libvirt().virConnectOpen(req.uri.empty() ? nullptr : req.uri.c_str());
  if (!lv.conn)
    throw LibvirtError("cannot connect to libvirt" + (req.uri.empty() ? std::string() : " at " + req.uri) + ": " +
                       libvirt_error() + " (is libvirtd running? as root, or give --connect qemu:///system)");
  lv.dom = libvirt().virDomainLookupByName(lv.conn, req.domain.c_str());
  if (!lv.dom) lv.dom = libvirt().virDomainLookupByUUIDString(lv.conn, req.domain.c_str());
  if (!lv.dom && !req.domain.empty() && req.domain.find_first_not_of("0123456789") == std::string::npos)
    lv.dom = libvirt().virDomainLookupByID(lv.conn, std::atoi(req.domain.c_str()));
  if (!lv.dom) {
    char* uri = libvirt().virConnectGetURI(lv.conn);
    const std::string where = uri ? uri : "libvirt";
    std::free(uri);
    throw LibvirtError("no domain '" + req.domain + "' at " + where + " (virsh list --all)");
  }
  const std::string domain = libvirt().virDomainGetName(lv.dom) ? libvirt().virDomainGetName(lv.dom) : req.domain;
  int state = 0, reason = 0;
  if (libvirt().virDomainGetState(lv.dom, &state, &reason, 0) < 0)
    throw LibvirtError(domain + ": cannot get its state: " + libvirt_error());
  if (state != VIR_DOMAIN_RUNNING && state != VIR_DOMAIN_PAUSED && state != VIR_DOMAIN_BLOCKED)
    throw LibvirtError(domain + " is " + domain_state_name(state) + ", not running: there is nothing to " +
                       (req.snapshot ? "snapshot with GPU state (virsh snapshot-create-as works for it alone)"
                                     : "save"));

  // The stub: the domain's vmcuda device names its socket.
  Target target;
  if (!req.socket.empty()) {
    target.socket = req.socket;
  } else {
    char* xml = libvirt().virDomainGetXMLDesc(lv.dom, 0);
    if (!xml) throw LibvirtError(domain + ": cannot read its XML: " + libvirt_error());
    const std::vector<std::string> sockets = vmcuda_sockets_of(xml);
    std::free(xml);
    if (sockets.empty())
      throw LibvirtError(domain + " has no vmcuda device (a <shmem> with model ivshmem-doorbell and a <server>): "
                         "it has no GPU state; use virsh " + (req.snapshot ? "snapshot-create-as" : "save") +
                         " directly");
    if (sockets.size() > 1) {
      std::string list;
      for (const auto& s : sockets) list += (list.empty() ? "" : ", ") + s;
      throw LibvirtError(domain + " has " + std::to_string(sockets.size()) + " vmcuda devices (" + list +
                         "); vmcudactl " + what + " handles a domain with one");
    }
    target.socket = control_socket_for(sockets.front());
  }
  target.vm = std::filesystem::path(target.socket).stem().string();
  if (!valid_vm_name(target.vm)) throw Unreachable("'" + target.socket + "' does not name a VM's control socket");

  std::string gpu_dir = req.gpu_state;
  std::string file;  // domain-save: the VM image
  if (!req.snapshot) {
    file = absolute_path(req.target);
    if (gpu_dir.empty()) gpu_dir = file + ".gpu";
  } else if (gpu_dir.empty()) {
    gpu_dir = "/var/lib/vmcuda/" + target.vm + "/snapshots/" + domain + "/" + req.target;
  }
  gpu_dir = absolute_path(gpu_dir);

  const auto started = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };

  // 1. The GPU state out (the VM's programs wait in their calls meanwhile).
  std::fprintf(stderr, "vmcudactl: %s: [1/2] saving the GPU state of VM %s (%s) into %s\n", domain.c_str(),
               target.vm.c_str(), target.socket.c_str(), gpu_dir.c_str());
  json saved;
  {
    ControlConnection connection(target);
    saved = connection.call(json{{"op", "save"}, {"file", gpu_dir}}, std::nullopt, true);
  }
  const auto clients = saved.is_object() && saved.contains("clients") ? saved["clients"] : json();
  std::fprintf(stderr, "vmcudactl: %s: GPU state saved (%s client(s)) in %.1f s\n", domain.c_str(),
               cell_text(clients).c_str(), seconds_since(started));

  // Brings the GPU state back (the VM keeps running); false with *why when it cannot.
  auto resume_gpu = [&](std::string* why) {
    try {
      ControlConnection connection(target);
      connection.call(json{{"op", "resume"}}, std::nullopt, true);
      return true;
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
  };
  auto undo = [&](const std::string& failure) -> LibvirtError {
    std::fprintf(stderr, "vmcudactl: %s: %s\n", domain.c_str(), failure.c_str());
    std::fprintf(stderr, "vmcudactl: %s: resuming the GPU state\n", domain.c_str());
    std::string why;
    if (!resume_gpu(&why))
      return LibvirtError(failure + "; and the GPU state could not be resumed: " + why +
                          " (the VM's CUDA programs wait; fix the cause, then vmcudactl resume " + target.vm + ")");
    const bool active = libvirt().virDomainIsActive(lv.dom) == 1;
    return LibvirtError(failure + (active ? "; the GPU state is resumed and the VM runs on as before"
                                          : "; the domain is no longer running") +
                        " (" + gpu_dir + " is not needed: remove it)");
  };
  if (interrupted) throw undo("interrupted");

  // 2. libvirt saves the domain, or snapshots it.
  const auto libvirt_started = Clock::now();
  if (!req.snapshot) {
    std::fprintf(stderr, "vmcudactl: %s: [2/2] saving the domain with libvirt into %s (as virsh save)\n",
                 domain.c_str(), file.c_str());
    int rc;
    {
      JobWatcher watch(lv.dom, "VM memory");
      rc = libvirt().virDomainSave(lv.dom, file.c_str());
    }
    if (rc < 0) {
      std::string failure = "libvirt could not save the domain: " + libvirt_error();
      if (failure.find("peer mode") != std::string::npos)
        failure += " (the vmcuda device runs without master=on: make the domain's <emulator> qemu-config/qemu-vmcuda, "
                   "docs/attaching-a-vm.md)";
      throw undo(failure);
    }
    // The stub still holds the VM as saved (new clients wait for a resume) until it is told
    // otherwise: a VM saved without clients and restored into this stub would find no adopted
    // client that ends the hold, and its new programs would wait for ever. Once QEMU's
    // connection is gone, a resume forgets the saved clients (their state stays in the
    // directory, indexed by the image token) and lets new clients run.
    std::string why;
    if (!release_saved(target, &why))
      std::fprintf(stderr,
                   "vmcudactl: %s: warning: the stub still holds the saved VM (%s); if programs of the restored VM "
                   "wait, run: vmcudactl resume %s\n",
                   domain.c_str(), why.c_str(), target.vm.c_str());
    std::printf("%s: saved to %s in %.1f s (libvirt %.1f s), its GPU state in %s; restore it with: virsh restore %s "
                "(the stub finds the GPU state by itself)\n",
                domain.c_str(), file.c_str(), seconds_since(started), seconds_since(libvirt_started), gpu_dir.c_str(),
                file.c_str());
    return 0;
  }

  std::fprintf(stderr, "vmcudactl: %s: [2/2] taking snapshot %s with libvirt (as virsh snapshot-create-as)\n",
               domain.c_str(), req.target.c_str());
  const std::string description =
      (req.description.empty() ? std::string() : req.description + "; ") + "vmcuda GPU state: " + gpu_dir;
  const std::string snapshot_xml = "<domainsnapshot><name>" + xml_escape(req.target) + "</name><description>" +
                                   xml_escape(description) + "</description></domainsnapshot>";
  virDomainSnapshotPtr snapshot;
  {
    JobWatcher watch(lv.dom, "VM memory");
    snapshot = libvirt().virDomainSnapshotCreateXML(lv.dom, snapshot_xml.c_str(), 0);
  }
  if (!snapshot) {
    std::string failure = "libvirt could not take the snapshot: " + libvirt_error();
    if (failure.find("peer mode") != std::string::npos)
      failure += " (the vmcuda device runs without master=on: make the domain's <emulator> qemu-config/qemu-vmcuda, "
                 "docs/attaching-a-vm.md)";
    throw undo(failure);
  }
  libvirt().virDomainSnapshotFree(snapshot);
  const double libvirt_seconds = seconds_since(libvirt_started);
  std::fprintf(stderr, "vmcudactl: %s: snapshot %s taken in %.1f s; resuming the GPU state\n", domain.c_str(),
               req.target.c_str(), libvirt_seconds);
  std::string why;
  if (!resume_gpu(&why))
    throw ErrorReply("snapshot " + req.target + " was taken (its GPU state is in " + gpu_dir +
                     "), but the GPU state could not be resumed: " + why +
                     "; the VM's CUDA programs wait: fix the cause, then vmcudactl resume " + target.vm);
  std::printf("%s: snapshot %s taken in %.1f s (libvirt %.1f s), its GPU state in %s (keep it as long as the "
              "snapshot); revert with: virsh snapshot-revert %s %s (the stub finds the GPU state by itself)\n",
              domain.c_str(), req.target.c_str(), seconds_since(started), libvirt_seconds, gpu_dir.c_str(),
              domain.c_str(), req.target.c_str());
  return 0;
}

#else

int domain_command(const DomainRequest& req) {
  throw LibvirtError(std::string("this vmcudactl was built without libvirt, so ") +
                     (req.snapshot ? "domain-snapshot" : "domain-save") +
                     " is not available: install libvirt-dev (scripts/install-deps.sh) and rebuild; or do it in two "
                     "steps: vmcudactl save VM DIR, then virsh " +
                     (req.snapshot ? "snapshot-create-as DOMAIN NAME, then vmcudactl resume VM" : "save DOMAIN FILE"));
}

#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vmcudactl: controls running vmcuda-stub daemons (one per VM) through their control sockets, "
      "<run-dir>/<VM>.ctl.\n"
      "Exit status: 0 success, 1 the stub reported an error, 2 usage error, 3 the stub cannot be reached, "
      "4 libvirt failed (domain-save, domain-snapshot; the GPU state was resumed and the VM runs on).\n"
      "FILE paths are made absolute here; they are opened by the stub, as its user and in its sandbox "
      "(the systemd unit has PrivateTmp=yes: /tmp is not the stub's /tmp)."};
  app.set_version_flag("--version", std::string("vmcudactl ") + VMCUDA_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // the global options also after the subcommand: `status --json`

  const char* env_run_dir = std::getenv("VMCUDA_RUN_DIR");
  std::string run_dir = env_run_dir && *env_run_dir ? env_run_dir : "/run/vmcuda";
  std::string socket;
  bool json_output = false;
  app.add_option("--run-dir", run_dir,
                 "directory of the stubs' control sockets (default: $VMCUDA_RUN_DIR, else /run/vmcuda)");
  app.add_option("--socket", socket, "talk to this control socket instead of <run-dir>/<VM>.ctl (VM may be omitted)");
  app.add_flag("--json", json_output, "print the stub's result as JSON (status: the raw results)");

  std::string vm;
  std::string file;
  std::string restore_vm;
  auto* status = app.add_subcommand("status", "state, clients, device memory and GPUs of one VM's stub, or of all");
  status->add_option("VM", vm, "the VM (default: every <run-dir>/*.ctl; unreachable ones show as \"not answering\")");
  auto* suspend = app.add_subcommand("suspend", "quiesce the VM's CUDA clients and save their GPU state to host memory");
  suspend->add_option("VM", vm, "the VM (required unless --socket)");
  auto* resume = app.add_subcommand("resume", "restore a suspended VM's GPU state and let its clients run");
  resume->add_option("VM", vm, "the VM (required unless --socket)");
  std::vector<int> move_to;
  const char* move_help =
      "move the VM to these GPUs (guest device i on the i-th): as many as it has, of the same models, among the "
      "stub's --gpu-pool; its programs continue there with every pointer unchanged";
  resume->add_option("--devices", move_to, move_help)->delimiter(',')->check(CLI::NonNegativeNumber);
  auto* save = app.add_subcommand("save", "suspend the VM's CUDA clients and write their GPU state to FILE");
  save->add_option("VM", vm, "the VM (omit with --socket)");
  save->add_option("FILE", file, "the state file to write");
  auto* restore = app.add_subcommand(
      "restore",
      "load GPU state from FILE into a stub (the stub reads which VM it belongs to from the file); "
      "--vm VM (or --socket) names the stub, which is required: vmcudactl does not guess");
  restore->add_option("FILE", file, "the state file written by `vmcudactl save`")->required();
  restore->add_option("--vm", restore_vm, "the VM whose stub loads the state (required unless --socket)");
  restore->add_option("--devices", move_to, move_help)->delimiter(',')->check(CLI::NonNegativeNumber);
  auto* upgrade = app.add_subcommand("upgrade", "hand the VM over to a new vmcuda-stub binary without stopping it");
  upgrade->add_option("VM", vm, "the VM (required unless --socket)");
  double interval = 2;
  int count = 0;
  auto* top = app.add_subcommand("top", "status of every VM (or one) and its programs, refreshed, with kernels per second");
  top->add_option("VM", vm, "only this VM");
  top->add_option("-n,--interval", interval, "seconds between refreshes")->check(CLI::Range(0.1, 3600.0))->capture_default_str();
  top->add_option("--count", count, "refreshes before it ends (0: until interrupted)")->check(CLI::NonNegativeNumber);
  std::string textfile;
  auto* metrics = app.add_subcommand(
      "metrics", "every VM's figures (or one's) in Prometheus' text format, for a scraper or node-exporter's textfile "
                 "collector");
  metrics->add_option("VM", vm, "only this VM");
  metrics->add_option("--textfile", textfile,
                      "write them to FILE (replaced whole, for node-exporter's --collector.textfile.directory)");
  auto* reload = app.add_subcommand(
      "reload", "read the VM's policy file again (as SIGHUP): a new memory quota and weight apply at once");
  reload->add_option("VM", vm, "the VM (required unless --socket)");

  // A whole libvirt domain with its GPU state, in one command (docs/snapshots.md).
  DomainRequest domain_request;
  const char* gpu_state_help =
      "directory for the GPU state (written by the stub, as its user; default: see above). Keep it as long as the "
      "saved VM or snapshot: the stub finds it again by the image token the VM carries";
  const char* connect_help = "libvirt URI, as virsh -c (default: libvirt's default, qemu:///system for root)";
  auto* domain_save = app.add_subcommand(
      "domain-save",
      "save a running libvirt domain to FILE with its GPU state: the stub saves the GPU state (as `save`), then "
      "libvirt saves the domain (as `virsh save`). Restore with a plain `virsh restore FILE`, also into a new stub. "
      "If libvirt fails, the GPU state is resumed and the VM runs on. The stub is the one serving the domain's "
      "<shmem><server path='X.sock'/> (control socket X.ctl; --socket for another). GPU state default: FILE.gpu");
  domain_save->add_option("DOMAIN", domain_request.domain, "the libvirt domain (name, UUID or id)")->required();
  domain_save->add_option("FILE", domain_request.target, "the file libvirt saves the VM into")->required();
  domain_save->add_option("--gpu-state", domain_request.gpu_state, gpu_state_help);
  domain_save->add_option("-c,--connect", domain_request.uri, connect_help);
  auto* domain_snapshot = app.add_subcommand(
      "domain-snapshot",
      "take an internal libvirt snapshot NAME of a running domain with its GPU state: the stub saves the GPU state "
      "(as `save`), libvirt snapshots the domain (as `virsh snapshot-create-as DOMAIN NAME`; needs qcow2 disks), "
      "and the GPU state is resumed: the VM runs on. Revert with a plain `virsh snapshot-revert DOMAIN NAME`. "
      "GPU state default: /var/lib/vmcuda/VM/snapshots/DOMAIN/NAME (VM: the stub's name)");
  domain_snapshot->add_option("DOMAIN", domain_request.domain, "the libvirt domain (name, UUID or id)")->required();
  domain_snapshot->add_option("NAME", domain_request.target, "the snapshot's name")->required();
  domain_snapshot->add_option("--description", domain_request.description, "the snapshot's description");
  domain_snapshot->add_option("--gpu-state", domain_request.gpu_state, gpu_state_help);
  domain_snapshot->add_option("-c,--connect", domain_request.uri, connect_help);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, version or the error
    return code == 0 ? 0 : kExitUsage;
  }
  auto usage_error = [&](const std::string& message) {
    std::fprintf(stderr, "vmcudactl: %s\nRun with --help for more information.\n", message.c_str());
    return kExitUsage;
  };

  CLI::App* command = app.get_subcommands().front();
  const std::string op = command->get_name();

  if (command == domain_save || command == domain_snapshot) {
    domain_request.snapshot = command == domain_snapshot;
    domain_request.socket = socket;
    // ^C: between the steps the GPU state is resumed; during libvirt's job, the job is aborted
    // (libvirt lets the VM run on) and then the GPU state is resumed.
    struct sigaction action{};
    action.sa_handler = on_interrupt;
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    const std::string name = domain_request.domain;
    try {
      return domain_command(domain_request);
    } catch (const Unreachable& e) {
      std::fprintf(stderr, "vmcudactl: %s\nvmcudactl: %s: nothing was saved\n", e.what(), name.c_str());
      return kExitUnreachable;
    } catch (const LibvirtError& e) {
      std::fprintf(stderr, "vmcudactl: %s: %s\n", name.c_str(), e.what());
      return kExitLibvirt;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vmcudactl: %s: %s\n", name.c_str(), e.what());
      return kExitErrorReply;
    }
  }
  if (command == save && !socket.empty() && file.empty()) std::swap(vm, file);  // `--socket S save FILE`
  if (command == restore) vm = restore_vm;
  if (command == save && file.empty()) return usage_error("save needs VM and FILE: vmcudactl save VM FILE");

  if (command == top || command == metrics) {
    std::vector<Target> targets;
    try {
      if (!socket.empty()) targets.push_back({vm.empty() ? std::filesystem::path(socket).stem().string() : vm, socket});
      else if (!vm.empty()) targets.push_back({vm, run_dir + "/" + vm + ".ctl"});
      else targets = control_sockets_in(run_dir);
    } catch (const Unreachable& e) {
      std::fprintf(stderr, "vmcudactl: %s\n", e.what());
      return kExitUnreachable;
    }
    if (command == metrics) {
      const std::string text = metrics_text(query_all(targets));
      if (textfile.empty()) {
        std::fputs(text.c_str(), stdout);
        return 0;
      }
      const std::string tmp = textfile + ".tmp";
      std::FILE* f = std::fopen(tmp.c_str(), "w");
      if (!f || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0 || std::rename(tmp.c_str(), textfile.c_str()) != 0) {
        std::fprintf(stderr, "vmcudactl: cannot write %s: %s\n", textfile.c_str(), errno_text(errno).c_str());
        return kExitErrorReply;
      }
      return 0;
    }
    std::map<std::string, json> before;
    auto when = Clock::now();
    bool answered = true;
    for (int i = 0; count == 0 || i < count; ++i) {
      if (i) std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      const auto now = Clock::now();
      const double seconds = std::chrono::duration<double>(now - when).count();
      when = now;
      const std::vector<StatusRow> rows = query_all(targets);
      if (::isatty(STDOUT_FILENO)) std::printf("\033[H\033[2J");
      print_status_table(rows);
      answered = true;
      for (const StatusRow& row : rows) {
        if (!row.status) {
          answered = false;
          continue;
        }
        auto it = before.find(row.target.vm);
        print_clients(row.target.vm, *row.status, it == before.end() ? nullptr : &it->second, seconds);
        before[row.target.vm] = *row.status;
      }
      std::fflush(stdout);
    }
    // A VM named that does not answer is an error (for scripts); of all VMs, the table says.
    if (!answered && !vm.empty()) {
      std::fprintf(stderr, "vmcudactl: %s: not answering (is vmcuda-stub@%s running?)\n", vm.c_str(), vm.c_str());
      return kExitUnreachable;
    }
    return 0;
  }
  if (command == status && vm.empty() && socket.empty()) {
    try {
      return status_all(run_dir, json_output);
    } catch (const Unreachable& e) {
      std::fprintf(stderr, "vmcudactl: %s\n", e.what());
      return kExitUnreachable;
    }
  }

  Target target;
  if (!socket.empty()) {
    target.socket = socket;
    target.vm = vm.empty() ? std::filesystem::path(socket).stem().string() : vm;
  } else {
    if (vm.empty())
      return usage_error(op + " needs " + (command == restore ? std::string("--vm VM") : std::string("a VM")) +
                         " (or --socket PATH)");
    target.socket = run_dir + "/" + vm + ".ctl";
    target.vm = vm;
  }
  if (!valid_vm_name(target.vm)) return usage_error("'" + target.vm + "' is not a VM name");

  json request{{"op", op}};
  if (!file.empty()) request["file"] = absolute_path(file);
  if (!move_to.empty()) request["devices"] = move_to;

  const auto started = Clock::now();
  try {
    ControlConnection connection(target);
    // Status is quick or the stub is stuck; the others may copy gigabytes, so no limit (^C leaves
    // the operation running in the stub).
    const std::optional<Clock::duration> timeout =
        command == status ? std::optional<Clock::duration>(kStatusTimeout) : std::nullopt;
    json result = connection.call(request, timeout, command != status);
    if (command == status) {
      if (json_output)
        std::printf("%s\n", result.dump(2).c_str());
      else
        print_status_table({StatusRow{target, result, ""}});
      if (!json_output) print_clients(target.vm, result, nullptr, 0);
      return 0;
    }
    if (json_output) {
      std::printf("%s\n", result.dump(2).c_str());
      return 0;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    std::string message = target.vm + ": " + past_tense(op);
    if (command == save) message += " to " + request["file"].get<std::string>();
    if (command == restore) message += " from " + request["file"].get<std::string>();
    char took[32];
    std::snprintf(took, sizeof took, " in %.1f s", seconds);
    message += took;
    if (result.is_object() && result.contains("message") && result["message"].is_string())
      message += ": " + result["message"].get<std::string>();
    std::printf("%s\n", message.c_str());
    return 0;
  } catch (const Unreachable& e) {
    std::fprintf(stderr, "vmcudactl: %s\n", e.what());
    return kExitUnreachable;
  } catch (const ErrorReply& e) {
    std::fprintf(stderr, "vmcudactl: %s: %s\n", target.vm.c_str(), e.what());
    return kExitErrorReply;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vmcudactl: %s: %s\n", target.vm.c_str(), e.what());
    return kExitErrorReply;
  }
}
