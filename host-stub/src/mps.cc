#include "mps.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "vmrpc/fd.h"
#include "vmrpc/log.h"

extern char** environ;

namespace vmcuda::host {
namespace {

using Clock = std::chrono::steady_clock;

// A private directory of this user: made 0700 if missing; a link, a non-directory or another
// user's is refused (another local user could otherwise point the VM's programs at a daemon
// of theirs, or read its logs).
bool own_private_dir(const std::string& path, std::string* why) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot make " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    *why = path + " is not a directory of this user (a link, a file or another user's); remove it";
    return false;
  }
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0) {
    *why = "cannot make " + path + " private: " + std::strerror(errno);
    return false;
  }
  return true;
}

// Whether an MPS control daemon answers on the pipe directory's control socket.
bool daemon_answers(const std::string& pipe_dir) {
  const std::string path = pipe_dir + "/control";
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // NVIDIA does not document the socket's type (a stream socket's connect failed on the H100
  // while the daemon served): whichever type it is, a connect succeeds.
  for (int type : {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM}) {
    vmrpc::UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (fd && ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return true;
  }
  return false;
}

// Runs `exe args...` with stdin from `stdin_fd` (-1: /dev/null) and stdout to `stdout_fd` (-1:
// the stub's stderr), in this process's environment with `visible_devices` as its
// CUDA_VISIBLE_DEVICES when given; returns its pid or -1.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args, int stdin_fd, int stdout_fd = -1,
            const std::optional<std::string>& visible_devices = std::nullopt) {
  std::vector<std::string> env_own;
  std::vector<char*> env;
  if (visible_devices) {
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.push_back(*e);
    env_own.push_back("CUDA_VISIBLE_DEVICES=" + *visible_devices);
    env.push_back(env_own.back().data());
    env.push_back(nullptr);
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, stdout_fd >= 0 ? stdout_fd : 2, 1);  // else what it prints goes to the stub's log
  // Nothing else of the stub's: the VM's connections (from the service manager's fd store)
  // must close when the stub ends, not live on in the daemon.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // The stub blocks SIGTERM/SIGINT/SIGHUP in all its threads (sigwait); the daemon must not
  // inherit that, or it could not be stopped.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, exe.c_str(), &fa, &attr, argv.data(), visible_devices ? env.data() : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

// Waits for `pid` until `deadline`; its wait status, or -1 if it is still running then.
int wait_until(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;  // not our child (any more): nothing to wait for
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string last_lines(const std::string& file, size_t n) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += "\n  " + lines[i];
  return out;
}

// The process ids in a reply of get_server_list or get_client_list (one a line).
std::vector<pid_t> pids_in(const std::string& reply) {
  std::vector<pid_t> pids;
  std::istringstream in(reply);
  for (std::string word; in >> word;)
    if (word.size() <= 9 && word.find_first_not_of("0123456789") == std::string::npos)
      pids.push_back(static_cast<pid_t>(std::stol(word)));
  return pids;
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text.empty() ? "nothing" : text;
}

// The parent process id and name of `pid` (/proc), for making sure a process is the daemon's.
bool proc_parent_and_name(pid_t pid, pid_t* parent, std::string* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 > stat.size()) return false;
  *name = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  long ppid = 0;
  rest >> state >> ppid;
  *parent = static_cast<pid_t>(ppid);
  return true;
}

}  // namespace

std::optional<std::string> mps_command(const std::string& control_exe, const std::string& command,
                                       std::chrono::milliseconds timeout, std::string* why) {
  const auto deadline = Clock::now() + timeout;
  // Its stdin is a pipe that holds the command before it starts (as `echo COMMAND |` would;
  // written while the read end is ours, so the write can neither block nor raise SIGPIPE);
  // its stdout, another pipe.
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  vmrpc::UniqueFd in_theirs(in[0]), in_ours(in[1]);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  vmrpc::UniqueFd out_ours(out[0]), out_theirs(out[1]);
  const std::string line = command + "\n";
  if (::write(in_ours.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    *why = std::string("cannot write the command: ") + std::strerror(errno);
    return std::nullopt;
  }
  in_ours.reset();  // the end of its input: it answers and exits
  const pid_t pid = spawn(control_exe, {}, in_theirs.get(), out_theirs.get());
  if (pid < 0) {
    *why = "cannot run " + control_exe + ": " + std::strerror(errno);
    return std::nullopt;
  }
  in_theirs.reset();
  out_theirs.reset();
  std::string reply;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{out_ours.get(), POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(out_ours.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // its end of the output: done
    if (reply.size() < (64u << 10)) reply.append(buf, static_cast<size_t>(n));
  }
  const int status = wait_until(pid, deadline);
  if (status == -1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    *why = "`" + command + "` to " + control_exe + " got no answer within " + std::to_string(timeout.count()) + " ms";
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = "`" + command + "` to " + control_exe + " ended with " +
           (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                              : "signal " + std::to_string(WTERMSIG(status))) +
           ", answering " + one_line(reply);
    return std::nullopt;
  }
  return reply;
}

std::optional<std::vector<pid_t>> mps_servers_listing(const std::string& control_exe, pid_t client, std::string* why) {
  const auto servers = mps_command(control_exe, "get_server_list", std::chrono::milliseconds(kMpsCommandTimeoutMs), why);
  if (!servers) return std::nullopt;
  std::vector<pid_t> listing;
  for (pid_t server : pids_in(*servers)) {
    const auto clients = mps_command(control_exe, "get_client_list " + std::to_string(server),
                                     std::chrono::milliseconds(kMpsCommandTimeoutMs), why);
    if (!clients) return std::nullopt;
    for (pid_t c : pids_in(*clients))
      if (c == client) listing.push_back(server);
  }
  return listing;
}

bool mps_terminate_client(const std::string& control_exe, pid_t client, std::string* why) {
  const auto servers = mps_servers_listing(control_exe, client, why);
  if (!servers) return false;
  for (pid_t server : *servers) {
    const std::string command = "terminate_client " + std::to_string(server) + " " + std::to_string(client);
    const auto reply = mps_command(control_exe, command, std::chrono::milliseconds(kMpsTerminateTimeoutMs), why);
    if (!reply) return false;
    // NVIDIA's daemon (driver 580, H100) answers 0; CUDA_SUCCESS is accepted too.
    if (one_line(*reply) != "0" && reply->find("CUDA_SUCCESS") == std::string::npos) {
      *why = "`" + command + "` answered " + one_line(*reply) +
             " (terminate_client needs CUDA 11.5 or later and a Volta or later GPU)";
      return false;
    }
  }
  return true;
}

bool mps_client() { return std::getenv("CUDA_MPS_PIPE_DIRECTORY") != nullptr; }

bool mps_recovering(int r) {
  // Seen on an H100 (driver 580) while the server recovered: CUDA_ERROR_ILLEGAL_ADDRESS (700)
  // after another client's fault, CUDA_ERROR_LAUNCH_FAILED (719) after a client was killed in
  // a kernel; and what NVIDIA documents for it: 806 (RPC failure), 807 (server not ready),
  // 810 (client terminated).
  return r == 700 || r == 719 || r == 806 || r == 807 || r == 810;
}

std::unique_ptr<MpsDaemon> MpsDaemon::start(const std::string& control_exe, const std::string& dir, std::string* why) {
  const std::string pipe_dir = dir + "/pipe", log_dir = dir + "/log";
  for (const auto& d : {dir, pipe_dir, log_dir})
    if (!own_private_dir(d, why)) return nullptr;
  // Every CUDA client of this process and of the workers it starts (they inherit the
  // environment) goes to this VM's daemon, never to the host's default one.
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir.c_str(), 1);
  ::setenv("CUDA_MPS_LOG_DIRECTORY", log_dir.c_str(), 1);
  // The daemon's server numbers the GPUs it was given (CUDA_VISIBLE_DEVICES) from 0, and a
  // client that names them again gets an error: its clients see what the server shows, which
  // is what this process saw so far.
  struct DropVisibleDevices {
    ~DropVisibleDevices() { ::unsetenv("CUDA_VISIBLE_DEVICES"); }
  } drop_visible_devices;
  // A daemon started again later (MpsDaemon::restart) must get the same GPUs.
  std::optional<std::string> visible_devices;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) visible_devices = v;
  if (daemon_answers(pipe_dir)) {
    std::fprintf(stderr, "vmcuda-stub: GPU sharing by MPS: the VM's MPS control daemon answers already (%s); its "
                 "programs use it\n", pipe_dir.c_str());
    return std::unique_ptr<MpsDaemon>(new MpsDaemon(control_exe, pipe_dir, log_dir, visible_devices, -1));
  }
  const pid_t pid = launch(control_exe, pipe_dir, log_dir, visible_devices, why);
  if (pid < 0) return nullptr;
  std::fprintf(stderr, "vmcuda-stub: GPU sharing by MPS: started the VM's MPS control daemon (pid %d, %s; logs in %s)\n",
               static_cast<int>(pid), pipe_dir.c_str(), log_dir.c_str());
  return std::unique_ptr<MpsDaemon>(new MpsDaemon(control_exe, pipe_dir, log_dir, visible_devices, pid));
}

pid_t MpsDaemon::launch(const std::string& control_exe, const std::string& pipe_dir, const std::string& log_dir,
                        const std::optional<std::string>& visible_devices, std::string* why) {
  // What a daemon that died left there (its sockets) would stop a new one.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(pipe_dir, ec)) std::filesystem::remove_all(e.path(), ec);
  const pid_t pid = spawn(control_exe, {"-f"}, -1, -1, visible_devices);
  if (pid < 0) {
    *why = "GPU sharing by MPS: cannot run " + control_exe + " (" + std::strerror(errno) +
           "); install NVIDIA's MPS (nvidia-cuda-mps-control, in the driver's utilities), give its path with "
           "--mps-control, or use --gpu-sharing time";
    return -1;
  }
  // Ours is up once it answers, or once its control socket is there (the pipe directory was
  // emptied above, so the socket is the new daemon's).
  auto up = [&] {
    struct stat st{};
    return daemon_answers(pipe_dir) ||
           (::lstat((pipe_dir + "/control").c_str(), &st) == 0 && S_ISSOCK(st.st_mode));
  };
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!up()) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      *why = "GPU sharing by MPS: " + control_exe + " -f ended (" +
             (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                : "signal " + std::to_string(WTERMSIG(status))) +
             ") before it answered on " + pipe_dir + "/control; its log:" + last_lines(log_dir + "/control.log", 5);
      return -1;
    }
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      *why = "GPU sharing by MPS: " + control_exe + " -f did not answer on " + pipe_dir +
             "/control within 10 s; its log:" + last_lines(log_dir + "/control.log", 5);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pid;
}

MpsDaemon::MpsDaemon(std::string control_exe, std::string pipe_dir, std::string log_dir,
                     std::optional<std::string> visible_devices, pid_t pid)
    : control_exe_(std::move(control_exe)),
      pipe_dir_(std::move(pipe_dir)),
      log_dir_(std::move(log_dir)),
      visible_devices_(std::move(visible_devices)),
      pid_(pid) {
  thread_ = std::thread([this] { keeper(); });
}

MpsDaemon::~MpsDaemon() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // what is queued still runs (a worker given up on is still killed), bounded
  quit({});
}

void MpsDaemon::keeper() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    l.unlock();
    job();
    l.lock();
  }
}

void MpsDaemon::end_client(pid_t pid, vmrpc::UniqueFd pidfd) {
  auto fd = std::make_shared<vmrpc::UniqueFd>(std::move(pidfd));
  std::lock_guard l(mu_);
  jobs_.push_back([this, pid, fd] {
    // NVIDIA: a client ended by a signal while its GPU work is outstanding leaves its server
    // undefined; terminate_client ends that work first.
    std::string why;
    if (!mps_terminate_client(control_exe_, pid, &why))
      VMRPC_LOG(kWarn, "stub", "GPU sharing by MPS: could not end the GPU work of worker " + std::to_string(pid) +
                                   " through the VM's MPS daemon (" + why + "); killing it all the same");
    ::syscall(SYS_pidfd_send_signal, fd->get(), SIGKILL, nullptr, 0);  // the pidfd: never another process
  });
  cv_.notify_all();
}

void MpsDaemon::client_exited(pid_t pid) {
  std::lock_guard l(mu_);
  jobs_.push_back([this, pid] { after_exit(pid); });
  cv_.notify_all();
}

void MpsDaemon::after_exit(pid_t pid) {
  {
    std::lock_guard l(mu_);
    if (stop_) return;  // the daemon quits with the stub
  }
  std::string why;
  // Whether no server lists `pid` within `wait` (false: still listed, or no answer: *why).
  auto let_go_within = [&](std::chrono::milliseconds wait) {
    const auto deadline = Clock::now() + wait;
    for (;;) {
      const auto servers = mps_servers_listing(control_exe_, pid, &why);
      if (servers && servers->empty()) return true;
      if (!servers) return false;
      if (Clock::now() >= deadline) {
        why = "its server still lists it " + std::to_string(wait.count()) + " ms after it ended";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  };
  if (let_go_within(std::chrono::milliseconds(kMpsClientGoneWaitMs))) return;
  // Its work runs on in the server (a worker killed in a kernel, or one whose own
  // terminate_client failed): try once more from here.
  std::string first = why;
  if (mps_terminate_client(control_exe_, pid, &why) && let_go_within(std::chrono::milliseconds(kMpsClientGoneWaitMs))) {
    VMRPC_LOG(kWarn, "stub", "GPU sharing by MPS: worker " + std::to_string(pid) + " had ended, but " + first +
                                 "; its GPU work was ended by terminate_client");
    return;
  }
  restart(pid, first == why ? why : first + "; " + why);
}

void MpsDaemon::restart(pid_t client, const std::string& why) {
  VMRPC_LOG(kWarn, "stub", "GPU sharing by MPS: worker " + std::to_string(client) +
                               " has ended but the VM's MPS server keeps its GPU work (" + why +
                               "); restarting the VM's MPS daemon and its servers: the VM's other programs on its GPUs "
                               "lose their GPU work too (their calls fail), as after a fatal fault under MPS");
  std::string ignored;
  const auto servers = mps_command(control_exe_, "get_server_list", std::chrono::milliseconds(kMpsCommandTimeoutMs),
                                   &ignored);
  quit(servers ? pids_in(*servers) : std::vector<pid_t>{});
  std::string failed;
  const pid_t pid = launch(control_exe_, pipe_dir_, log_dir_, visible_devices_, &failed);
  {
    std::lock_guard l(mu_);
    pid_ = pid;
  }
  if (pid < 0)
    VMRPC_LOG(kWarn, "stub", failed + "; the VM's programs get no GPU until the stub is restarted");
  else
    VMRPC_LOG(kWarn, "stub", "GPU sharing by MPS: the VM's MPS control daemon started again (pid " +
                                 std::to_string(pid) + ")");
}

void MpsDaemon::quit(const std::vector<pid_t>& servers) {
  // A server that keeps a client's endless kernel would keep `quit` waiting for it: it is
  // killed first, which destroys its contexts (and their kernels). Only the daemon's own.
  for (pid_t server : servers) {
    pid_t parent = 0;
    std::string name;
    if (!proc_parent_and_name(server, &parent, &name)) continue;
    if (server == pid_ || (pid_ > 0 && parent == pid_) || name.starts_with("nvidia-cuda-mps"))
      ::kill(server, SIGKILL);
  }
  // `quit` is the daemon's own way to stop (its servers with it); it reads commands on stdin
  // of a client instance in the same pipe directory (the environment says which).
  std::string ignored;
  mps_command(control_exe_, "quit", std::chrono::milliseconds(kMpsCommandTimeoutMs), &ignored);
  if (pid_ <= 0) return;
  if (wait_until(pid_, Clock::now() + std::chrono::seconds(5)) == -1) {
    VMRPC_LOG(kWarn, "stub", "GPU sharing by MPS: the VM's MPS control daemon did not quit within 5 s; killing it");
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

}  // namespace vmcuda::host
