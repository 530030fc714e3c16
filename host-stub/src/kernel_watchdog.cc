#include "kernel_watchdog.h"

#include <time.h>

#include <algorithm>

namespace vmcuda::host {

// The probe's state: its thread waits here for a request, then for every context of the
// client. Shared, because that thread may be stuck in the driver when the watchdog goes.
struct KernelWatchdog::Probe {
  const DriverApi* api;
  std::mutex mu;
  std::condition_variable cv;
  bool requested = false;
  bool stop = false;
  std::atomic<bool> in_flight{false};
  std::mutex ctx_mu;  // held by the probe while it waits on the contexts
  std::vector<CUcontext> contexts;
};

int64_t KernelWatchdog::now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

KernelWatchdog::KernelWatchdog(const DriverApi& api, std::chrono::milliseconds limit,
                               std::function<void(int64_t)> on_timeout)
    : api_(api), limit_(limit), on_timeout_(std::move(on_timeout)), clock_(now_ns()) {
  probe_ = std::make_shared<Probe>();
  probe_->api = &api_;
  std::thread([p = probe_] {
    for (;;) {
      {
        std::unique_lock l(p->mu);
        p->cv.wait(l, [&] { return p->stop || p->requested; });
        if (p->stop) return;
        p->requested = false;
      }
      {
        std::lock_guard c(p->ctx_mu);
        for (CUcontext ctx : p->contexts)
          if (p->api->cuCtxSetCurrent(ctx) == CUDA_SUCCESS) p->api->cuCtxSynchronize();  // an error: done too
        p->api->cuCtxSetCurrent(nullptr);
      }
      p->in_flight.store(false, std::memory_order_release);
    }
  }).detach();
  thread_ = std::thread([this] { run(); });
}

KernelWatchdog::~KernelWatchdog() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  {
    std::lock_guard l(probe_->mu);
    probe_->stop = true;
  }
  probe_->cv.notify_all();
}

void KernelWatchdog::add_context(CUcontext ctx) {
  std::lock_guard c(probe_->ctx_mu);
  probe_->contexts.push_back(ctx);
}

void KernelWatchdog::remove_context(CUcontext ctx) {
  std::lock_guard c(probe_->ctx_mu);
  std::erase(probe_->contexts, ctx);
}

void KernelWatchdog::run() {
  const int64_t limit_ns = std::chrono::nanoseconds(limit_).count();
  const auto tick = std::clamp<std::chrono::milliseconds>(limit_ / 8, std::chrono::milliseconds(10),
                                                          std::chrono::milliseconds(250));
  bool probing = false;
  int64_t probe_start = 0;
  uint64_t launches_at_probe = 0;
  std::unique_lock l(mu_);
  while (!cv_.wait_for(l, tick, [this] { return stop_; })) {
    const int64_t now = now_ns();
    clock_.store(now, std::memory_order_relaxed);
    if (probing && !probe_->in_flight.load(std::memory_order_acquire)) {
      // Everything issued before probe_start is done.
      probing = false;
      int64_t b = busy_since_.load(std::memory_order_relaxed);
      if (launches_.load(std::memory_order_relaxed) == launches_at_probe) {
        busy_since_.compare_exchange_strong(b, 0, std::memory_order_relaxed);
        // A launch that came just now saw the old value and left it: count it from here.
        if (launches_.load(std::memory_order_relaxed) != launches_at_probe) {
          int64_t zero = 0;
          busy_since_.compare_exchange_strong(zero, probe_start, std::memory_order_relaxed);
        }
      } else if (b != 0 && b < probe_start) {
        busy_since_.compare_exchange_strong(b, probe_start, std::memory_order_relaxed);
      }
    }
    const int64_t since = busy_since_.load(std::memory_order_relaxed);
    if (since == 0) continue;
    const int64_t age = now - since;
    if (probing) {
      if (age > limit_ns) {
        l.unlock();
        on_timeout_(age / 1000000);
        l.lock();
        // The client is being ended; look no more.
        cv_.wait(l, [this] { return stop_; });
        return;
      }
      continue;
    }
    if (age >= limit_ns / 2) {
      probing = true;
      probe_start = now;
      launches_at_probe = launches_.load(std::memory_order_relaxed);
      probe_->in_flight.store(true, std::memory_order_relaxed);
      {
        std::lock_guard p(probe_->mu);
        probe_->requested = true;
      }
      probe_->cv.notify_all();
    }
  }
}

}  // namespace vmcuda::host
