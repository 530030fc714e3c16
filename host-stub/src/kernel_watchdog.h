// The kernel time limit (vmcuda-stub --kernel-time-limit, issue 10 point 6): notices a
// client whose oldest GPU work not known to be finished has been out longer than the limit.
//
// How it knows (one watchdog per client, so per worker process with --isolation process):
// - Each launch calls on_launch(): relaxed loads and stores only (no lock, no system call):
//   it bumps a launch count and, when no work is outstanding, records the time (a clock
//   the watchdog's thread keeps, in steps of its tick) as the start of the oldest work.
// - The watchdog's thread looks every tick (limit / 8, 10 to 250 ms). Once the oldest work
//   is half the limit old, it probes: a thread of its own waits for every context of the
//   client (cuCtxSynchronize, the contexts made current there). When the probe returns,
//   everything issued before it started is done: with no launch since, nothing is
//   outstanding; else the oldest work is no older than the probe's start. A client that
//   launched and then did not synchronize for a long time is therefore never ended for it.
// - A probe that has not returned once the oldest work is older than the limit: a kernel
//   (or the queue of work before it) has run past the limit: on_timeout() ends the client.
//   In a worker process that ends the process (exit status kWorkerExitLaunchTimeout): the
//   only way to stop a running kernel is to destroy its context, which the driver does
//   when the process goes; the stub then fails the client's calls with
//   cudaErrorLaunchTimeout and reclaims its memory. Under MPS the contexts are the MPS
//   server's and outlive the process: on_timeout ends the client's work through the VM's
//   daemon first (mps.h).
// The limit counts from when the work was issued, not from when the GPU started it: work
// queued behind other work of the same client counts its wait. Choose a limit well above
// the longest kernel plus the longest queue a program keeps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "driver_api.h"

namespace vmcuda::host {

class KernelWatchdog {
 public:
  // `on_timeout(age_ms)` runs on the watchdog's thread, at most once; it is expected to end
  // the client (the process). Starts the watchdog's thread.
  KernelWatchdog(const DriverApi& api, std::chrono::milliseconds limit, std::function<void(int64_t)> on_timeout);
  // Stops the thread. A probe still waiting on the GPU is left to end with the process.
  ~KernelWatchdog();
  KernelWatchdog(const KernelWatchdog&) = delete;
  KernelWatchdog& operator=(const KernelWatchdog&) = delete;

  // A launch was issued (any thread). The hot path: relaxed atomics only.
  void on_launch() noexcept {
    launches_.store(launches_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (busy_since_.load(std::memory_order_relaxed) == 0)
      busy_since_.store(clock_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  // The client's contexts, for the probe: add when made, remove before destroying one (waits
  // while a probe uses it).
  void add_context(CUcontext ctx);
  void remove_context(CUcontext ctx);

  std::chrono::milliseconds limit() const { return limit_; }

 private:
  struct Probe;  // shared with the probe thread, which may outlive this object
  void run();
  static int64_t now_ns();

  const DriverApi& api_;
  const std::chrono::milliseconds limit_;
  std::function<void(int64_t)> on_timeout_;
  std::atomic<int64_t> clock_;           // now_ns() as of the last tick
  std::atomic<int64_t> busy_since_{0};   // start of the oldest work not known finished; 0: none
  std::atomic<uint64_t> launches_{0};
  std::shared_ptr<Probe> probe_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace vmcuda::host
