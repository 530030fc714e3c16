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
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace vmcuda::host {

// Whether this process's CUDA goes to a VM's MPS daemon (MpsDaemon::start ran here or in the
// stub that started this worker).
bool mps_client();

// Whether `r` from making a context is MPS recovering from a fatal fault: it refuses new
// clients until every program the fault reached has ended (an ended worker, a program killed
// for the kernel time limit), then takes them again; worth waiting for.
bool mps_recovering(int r);
inline constexpr int kMpsRecoveryWaitMs = 10000;

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
  bool started_here() const { return pid_ > 0; }

 private:
  MpsDaemon(std::string control_exe, std::string pipe_dir, pid_t pid)
      : control_exe_(std::move(control_exe)), pipe_dir_(std::move(pipe_dir)), pid_(pid) {}
  std::string control_exe_, pipe_dir_;
  pid_t pid_;  // the daemon we started, or -1 when we found it running
};

}  // namespace vmcuda::host
