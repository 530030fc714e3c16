// vmcudactl: the administrator's command for running vmcuda-stub daemons. Talks to a stub's
// control socket (<run-dir>/<VM>.ctl; protocol in control_server.h).
//
// Exit status: 0 success; 1 the stub replied with an error; 2 usage error; 3 the stub
// cannot be reached (no socket, nobody listening, died mid-operation, untrusted owner).
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

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

void print_status_table(const std::vector<StatusRow>& rows) {
  std::vector<std::vector<std::string>> cells{{"VM", "STATE", "CLIENTS", "MEMORY MiB", "GPUS"}};
  for (const StatusRow& row : rows) {
    if (!row.status) {
      cells.push_back({row.target.vm, "not answering", "-", "-", "-"});
      continue;
    }
    const json& s = *row.status;
    std::string memory = "-";
    if (s.contains("device_memory_bytes") && s["device_memory_bytes"].is_number()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.0f", s["device_memory_bytes"].get<double>() / (1024.0 * 1024.0));
      memory = text;
    }
    cells.push_back({row.target.vm, s.contains("state") ? cell_text(s["state"]) : "-",
                     s.contains("clients") ? cell_text(s["clients"]) : "-", memory,
                     s.contains("gpus") ? gpus_text(s["gpus"]) : "-"});
  }
  std::vector<size_t> widths(5, 0);
  for (const auto& line : cells)
    for (size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      const bool right = i == 2 || i == 3;  // numbers
      const std::string pad(widths[i] - line[i].size(), ' ');
      if (i == line.size() - 1)
        text += line[i];
      else
        text += (right ? pad + line[i] : line[i] + pad) + "  ";
    }
    std::printf("%s\n", text.c_str());
  }
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

int status_all(const std::string& run_dir, bool json_output) {
  const std::vector<Target> targets = control_sockets_in(run_dir);
  if (targets.empty()) {
    if (json_output) std::printf("[]\n");
    std::fprintf(stderr, "vmcudactl: no control sockets (*.ctl) in %s; no vmcuda-stub is running\n", run_dir.c_str());
    return 0;
  }
  // All at once: a hung stub costs its timeout once, not once per VM after it.
  std::vector<std::future<StatusRow>> pending;
  for (const Target& target : targets) pending.push_back(std::async(std::launch::async, query_status, target));
  std::vector<StatusRow> rows;
  for (auto& future : pending) rows.push_back(future.get());

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
  return op + " done";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vmcudactl: controls running vmcuda-stub daemons (one per VM) through their control sockets, "
      "<run-dir>/<VM>.ctl.\n"
      "Exit status: 0 success, 1 the stub reported an error, 2 usage error, 3 the stub cannot be reached.\n"
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
  auto* save = app.add_subcommand("save", "suspend the VM's CUDA clients and write their GPU state to FILE");
  save->add_option("VM", vm, "the VM (omit with --socket)");
  save->add_option("FILE", file, "the state file to write");
  auto* restore = app.add_subcommand(
      "restore",
      "load GPU state from FILE into a stub (the stub reads which VM it belongs to from the file); "
      "--vm VM (or --socket) names the stub, which is required: vmcudactl does not guess");
  restore->add_option("FILE", file, "the state file written by `vmcudactl save`")->required();
  restore->add_option("--vm", restore_vm, "the VM whose stub loads the state (required unless --socket)");
  auto* upgrade = app.add_subcommand("upgrade", "hand the VM over to a new vmcuda-stub binary without stopping it");
  upgrade->add_option("VM", vm, "the VM (required unless --socket)");

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
  if (command == save && !socket.empty() && file.empty()) std::swap(vm, file);  // `--socket S save FILE`
  if (command == restore) vm = restore_vm;
  if (command == save && file.empty()) return usage_error("save needs VM and FILE: vmcudactl save VM FILE");

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
