// GPU sharing by MPS for one VM (`vmcuda-stub --gpu-sharing mps`, policy key gpu_sharing).
//
// Without it, the driver gives the contexts of different processes the GPU in turns (time
// slices of about 2 ms), so a program beside another program's long kernel waits a whole slice
// for each of its calls (docs/benchmarks.md: p99 2.4 ms instead of 40 µs). With NVIDIA's
// Multi-Process Service the VM's programs run on the GPU at once, each in its own address
// space, the way threads of one program do.
//
// Each VM gets an MPS control daemon of its own (its own pipe directory, beside the VM's
// socket), started by the stub before its first CUDA call and asked to quit when the stub
// ends: an MPS server never holds contexts of two VMs. What MPS gives up (docs/security.md):
// a fatal fault of one client (an illegal address) ends the work of every client of that
// server on that GPU, so one program of a VM can end the VM's other programs there.
//
// Ending a client (the kernel time limit, a closed program's teardown): under MPS the GPU
// context is the server's, so killing the client process does not stop its kernel (NVIDIA:
// ending a client with outstanding work by a signal leaves its server undefined; seen on an
// H100: the VM's next program got no context). So its work is ended first through the daemon
// (terminate_client, CUDA 11.5+, Volta and later), then the process, and then the stub makes
// sure that no server lists it any more; failing that, the VM's daemon is restarted (its
// servers killed), which ends the VM's other GPU work too, as a fatal fault under MPS does.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vmrpc/fd.h"

namespace vmcuda::host {

// Whether this process's CUDA goes to a VM's MPS daemon (MpsDaemon::start ran here or in the
// stub that started this worker).
bool mps_client();

// Whether `r` from making a context is MPS recovering from a fatal fault: it refuses new
// clients until every program the fault reached has ended (an ended worker, a program killed
// for the kernel time limit), then takes them again; worth waiting for.
bool mps_recovering(int r);
inline constexpr int kMpsRecoveryWaitMs = 10000;

// NVIDIA's control commands, written to the stdin of `control_exe` run as a client instance
// in the pipe directory of this process's CUDA_MPS_PIPE_DIRECTORY. Each blocks its caller
// (never the event loop's or a GPU's working thread) for at most its bound.
inline constexpr int kMpsCommandTimeoutMs = 5000;     // get_server_list, get_client_list, quit
inline constexpr int kMpsTerminateTimeoutMs = 10000;  // terminate_client returns once the server is done
// How long an ended client may stay listed by a server before the daemon is restarted.
inline constexpr int kMpsClientGoneWaitMs = 5000;
// `command`'s reply (its stdout), or nullopt with *why when it did not run or finish in time.
std::optional<std::string> mps_command(const std::string& control_exe, const std::string& command,
                                       std::chrono::milliseconds timeout, std::string* why);
// The servers that list `client` (get_server_list, then get_client_list of each); nullopt
// with *why when the daemon does not answer.
std::optional<std::vector<pid_t>> mps_servers_listing(const std::string& control_exe, pid_t client, std::string* why);
// Ends all outstanding GPU work of MPS client `client` on every server that lists it
// (terminate_client SERVER CLIENT, which answers 0 (driver 580) once its contexts are gone).
// True when none lists it or each answered 0 (or CUDA_SUCCESS); false with *why otherwise (an
// older daemon without the command, an error, no answer).
bool mps_terminate_client(const std::string& control_exe, pid_t client, std::string* why);

class MpsDaemon {
 public:
  // Points this process's CUDA, and the worker processes it starts, at the MPS daemon of
  // `dir` (made mode 0700 if missing; refused if it is a link or another user's), starting
  // `control_exe -f` there unless one already answers (after `vmcudactl upgrade` replaced this
  // process's image, the daemon is still its child). Call before the first CUDA call. nullptr
  // with *why saying what went wrong and what to do.
  static std::unique_ptr<MpsDaemon> start(const std::string& control_exe, const std::string& dir, std::string* why);
  ~MpsDaemon();  // asks the daemon to quit (its servers end with it); kills it if it does not

  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  const std::string& pipe_dir() const { return pipe_dir_; }

  // Worker `pid` is given up on (its program closed and it did not end, or its connection
  // went): its GPU work is ended through the daemon, then the process (SIGKILL by `pidfd`),
  // then client_exited's check follows once it has gone. Returns at once; the work runs on
  // the daemon's own thread (at most kMpsTerminateTimeoutMs before the kill).
  void end_client(pid_t pid, vmrpc::UniqueFd pidfd);
  // Worker `pid` has ended (reaped). Off the caller's thread: if a server still lists it
  // after kMpsClientGoneWaitMs (its kernel runs on in the server), terminate_client; if that
  // fails too, the daemon is restarted (the VM's other GPU work on its GPUs ends with it).
  void client_exited(pid_t pid);

 private:
  MpsDaemon(std::string control_exe, std::string pipe_dir, std::string log_dir,
            std::optional<std::string> visible_devices, pid_t pid);
  // Starts `control_exe -f` in an emptied pipe directory, with the stub's GPUs
  // (CUDA_VISIBLE_DEVICES as the stub was given it, unset: all), and waits until it answers;
  // its pid or -1 with *why.
  static pid_t launch(const std::string& control_exe, const std::string& pipe_dir, const std::string& log_dir,
                      const std::optional<std::string>& visible_devices, std::string* why);
  void quit(const std::vector<pid_t>& servers);  // `quit`; kills `servers` and the daemon if they stay
  void restart(pid_t client, const std::string& why);
  void keeper();  // the daemon's own thread: runs jobs_ in order
  void after_exit(pid_t pid);

  std::string control_exe_, pipe_dir_, log_dir_;
  std::optional<std::string> visible_devices_;
  pid_t pid_;  // the daemon we started, or -1 when we found it running (only the keeper changes it)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace vmcuda::host
