#include "mps.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

// Runs `exe args...` with stdin from `stdin_fd` (-1: /dev/null) and stdout to the stub's stderr;
// returns its pid or -1.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args, int stdin_fd) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);  // what it prints goes to the stub's log
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
  const int rc = ::posix_spawnp(&pid, exe.c_str(), &fa, &attr, argv.data(), environ);
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

}  // namespace

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
  if (daemon_answers(pipe_dir)) {
    std::fprintf(stderr, "vmcuda-stub: GPU sharing by MPS: the VM's MPS control daemon answers already (%s); its "
                 "programs use it\n", pipe_dir.c_str());
    return std::unique_ptr<MpsDaemon>(new MpsDaemon(control_exe, pipe_dir, -1));
  }
  // What a daemon that died left there (its sockets) would stop a new one.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(pipe_dir, ec)) std::filesystem::remove_all(e.path(), ec);
  const pid_t pid = spawn(control_exe, {"-f"}, -1);
  if (pid < 0) {
    *why = "GPU sharing by MPS: cannot run " + control_exe + " (" + std::strerror(errno) +
           "); install NVIDIA's MPS (nvidia-cuda-mps-control, in the driver's utilities), give its path with "
           "--mps-control, or use --gpu-sharing time";
    return nullptr;
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
      return nullptr;
    }
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      *why = "GPU sharing by MPS: " + control_exe + " -f did not answer on " + pipe_dir +
             "/control within 10 s; its log:" + last_lines(log_dir + "/control.log", 5);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "vmcuda-stub: GPU sharing by MPS: started the VM's MPS control daemon (pid %d, %s; logs in %s)\n",
               static_cast<int>(pid), pipe_dir.c_str(), log_dir.c_str());
  return std::unique_ptr<MpsDaemon>(new MpsDaemon(control_exe, pipe_dir, pid));
}

MpsDaemon::~MpsDaemon() {
  // `quit` is the daemon's own way to stop (its servers with it); it reads commands on stdin
  // of a client instance in the same pipe directory (the environment says which).
  int p[2];
  if (::pipe2(p, O_CLOEXEC) == 0) {
    vmrpc::UniqueFd read_end(p[0]), write_end(p[1]);
    const pid_t client = spawn(control_exe_, {}, read_end.get());
    read_end.reset();
    if (client > 0) {
      static constexpr char kQuit[] = "quit\n";
      [[maybe_unused]] ssize_t n = ::write(write_end.get(), kQuit, sizeof kQuit - 1);
      write_end.reset();
      if (wait_until(client, Clock::now() + std::chrono::seconds(5)) == -1) {
        ::kill(client, SIGKILL);
        ::waitpid(client, nullptr, 0);
      }
    }
  }
  if (pid_ <= 0) return;
  if (wait_until(pid_, Clock::now() + std::chrono::seconds(5)) == -1) {
    VMRPC_LOG(kWarn, "stub", "GPU sharing by MPS: the VM's MPS control daemon did not quit within 5 s; killing it");
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

}  // namespace vmcuda::host
