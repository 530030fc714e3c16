#include "vmrpc/slot_gate.h"

namespace vmrpc {

bool SlotGate::hold(std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (closed_) return false;
  hold_requested_ = true;
  update_wanted();
  l.unlock();
  if (wake_) wake_();
  l.lock();
  if (!cv_.wait_for(l, timeout, [&] { return parked_ || closed_; }) || closed_) {
    hold_requested_ = false;
    update_wanted();
    cv_.notify_all();
    return false;
  }
  return true;
}

void SlotGate::request_hold() {
  std::lock_guard l(mu_);
  if (closed_) return;
  hold_requested_ = true;
  update_wanted();
}

void SlotGate::release() {
  std::lock_guard l(mu_);
  hold_requested_ = false;
  update_wanted();
  cv_.notify_all();
}

bool SlotGate::held() const {
  std::lock_guard l(mu_);
  return hold_requested_ && parked_;
}

bool SlotGate::run(const std::function<void()>& task, std::chrono::milliseconds timeout) {
  bool done = false;
  std::unique_lock l(mu_);
  if (closed_) return false;
  tasks_.push_back({&task, &done});
  update_wanted();
  cv_.notify_all();
  l.unlock();
  if (wake_) wake_();
  l.lock();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done) return true;
    // Still queued (not started): it may be withdrawn. A started task is waited for.
    bool queued = false;
    for (const Task& t : tasks_) queued |= t.done == &done;
    if (queued && (closed_ || std::chrono::steady_clock::now() >= deadline)) {
      std::erase_if(tasks_, [&](const Task& t) { return t.done == &done; });
      update_wanted();
      return false;
    }
    if (!queued && closed_ && !done) return false;
    cv_.wait_until(l, queued ? deadline : std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  }
}

bool SlotGate::wanted() const { return wanted_.load(std::memory_order_acquire); }

void SlotGate::serve(const std::function<bool()>& stopped) {
  std::unique_lock l(mu_);
  for (;;) {
    while (!tasks_.empty()) {
      const Task t = tasks_.front();
      tasks_.pop_front();
      update_wanted();
      l.unlock();
      (*t.fn)();
      l.lock();
      *t.done = true;
      cv_.notify_all();
    }
    if (!hold_requested_) break;
    if (!parked_) {
      parked_ = true;
      cv_.notify_all();
    }
    if (stopped()) break;
    cv_.wait_for(l, std::chrono::milliseconds(20));
  }
  parked_ = false;
}

void SlotGate::close() {
  std::lock_guard l(mu_);
  closed_ = true;
  parked_ = false;
  tasks_.clear();
  hold_requested_ = false;
  update_wanted();
  cv_.notify_all();
}

}  // namespace vmrpc
