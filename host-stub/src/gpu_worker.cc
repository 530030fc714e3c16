#include "gpu_worker.h"

#include <chrono>
#include <map>
#include <memory>

#include "vmrpc/ordering.h"

namespace vmcuda::host {

namespace {
// A task is usually a launch of a few microseconds: both sides spin this long before they
// sleep, so a stream of calls never pays a wake-up.
constexpr auto kSpin = std::chrono::microseconds(50);
}  // namespace

GpuWorker& GpuWorker::of(int device) {
  static std::mutex mu;
  // Never destroyed: service threads may still hand work over while the process exits.
  static auto* workers = new std::map<int, GpuWorker*>;
  std::lock_guard l(mu);
  GpuWorker*& w = (*workers)[device];
  if (!w) w = new GpuWorker;
  return *w;
}

GpuWorker::GpuWorker() {
  thread_ = std::thread([this] { loop(); });
  id_ = thread_.get_id();
  thread_.detach();
}

GpuWorker::~GpuWorker() = default;

void GpuWorker::enqueue(Task* t) {
  {
    std::lock_guard l(mu_);
    queue_.push_back(t);
    queued_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_one();
}

void GpuWorker::submit(Task& t) {
  enqueue(&t);
  const auto until = std::chrono::steady_clock::now() + kSpin;
  uint32_t s;
  for (uint32_t i = 0; (s = t.state.load(std::memory_order_acquire)) != 2; ++i) {
    if (s == 0 && (i & 63) == 0 && std::chrono::steady_clock::now() >= until) {
      t.state.wait(0, std::memory_order_acquire);  // futex: the worker notifies on 1
      continue;
    }
    vmrpc::ordering::cpu_relax();  // 1 -> 2 follows at once
  }
}

void GpuWorker::loop() {
  for (;;) {
    Task* t = nullptr;
    {
      std::unique_lock l(mu_);
      if (queue_.empty()) {
        // Spin a little (on the counter, without the lock) before sleeping: the next call
        // is usually near. One pause per look: a pause is ~40 ns on today's x86.
        l.unlock();
        const auto until = std::chrono::steady_clock::now() + kSpin;
        for (uint32_t i = 0; queued_.load(std::memory_order_acquire) == 0; ++i) {
          vmrpc::ordering::cpu_relax();
          if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) break;
        }
        l.lock();
        wake_.wait(l, [this] { return !queue_.empty() || stop_; });
      }
      if (stop_) return;
      t = queue_.front();
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    t->result = t->fn(t->arg);
    tasks_run_.fetch_add(1, std::memory_order_relaxed);
    if (t->release) {
      t->release(t);
      continue;
    }
    t->state.store(1, std::memory_order_release);
    t->state.notify_one();
    t->state.store(2, std::memory_order_release);
  }
}

}  // namespace vmcuda::host
