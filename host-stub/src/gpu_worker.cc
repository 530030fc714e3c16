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

void GpuWorker::submit(Task& t) {
  {
    std::lock_guard l(mu_);
    queue_.push_back(&t);
  }
  wake_.notify_one();
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (t.done.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until)
    vmrpc::ordering::cpu_relax();
  std::unique_lock l(t.m);
  t.cv.wait(l, [&] { return t.done.load(std::memory_order_acquire) != 0; });
}

void GpuWorker::loop() {
  for (;;) {
    Task* t = nullptr;
    {
      std::unique_lock l(mu_);
      if (queue_.empty()) {
        // Spin a little (without the lock) before sleeping: the next call is usually near.
        l.unlock();
        const auto until = std::chrono::steady_clock::now() + kSpin;
        for (;;) {
          {
            std::lock_guard g(mu_);
            if (!queue_.empty()) break;
          }
          if (std::chrono::steady_clock::now() >= until) break;
          for (int i = 0; i < 64; ++i) vmrpc::ordering::cpu_relax();
        }
        l.lock();
        wake_.wait(l, [this] { return !queue_.empty() || stop_; });
      }
      if (stop_) return;
      t = queue_.front();
      queue_.pop_front();
    }
    const int32_t result = t->fn(t->arg);
    tasks_run_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard g(t->m);
    t->result = result;
    t->done.store(1, std::memory_order_release);
    t->cv.notify_one();
  }
}

}  // namespace vmcuda::host
