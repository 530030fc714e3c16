// Control of a served slot from another thread: hold the slot at a call boundary (the
// batch being served finishes; the guest's next batch waits in its slot, untouched) and
// run work on the slot's own service thread meanwhile, where the slot's service keeps its
// thread-bound state (a CUDA context). Used for suspend/resume and status (host-stub).
//
// The service thread calls serve() between batches; the control side calls hold(),
// run() and release(). A slot that ends (its guest released it, the endpoint stops)
// fails pending and later run()s: they never wait for a thread that is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace vmrpc {

class SlotGate {
 public:
  // `wake` makes a service thread that sleeps on the doorbell look at the gate (rings the
  // slot's doorbell eventfd).
  explicit SlotGate(std::function<void()> wake = {}) : wake_(std::move(wake)) {}
  SlotGate(const SlotGate&) = delete;
  SlotGate& operator=(const SlotGate&) = delete;

  // ---- control side (any thread but the service thread)
  // Stops the slot at the next call boundary and keeps it there until release(); returns
  // once the service thread is parked (true) or the slot ended / `timeout` passed (false:
  // then nothing is held).
  bool hold(std::chrono::milliseconds timeout);
  void release();
  // hold() without waiting: the service thread parks at its next call boundary (a slot
  // that starts while its VM is suspended parks before its first call).
  void request_hold();
  // Runs `task` on the service thread at a call boundary and returns once it ran (true),
  // or false when the slot ended first or `timeout` passed before it started (then it
  // never runs).
  bool run(const std::function<void()>& task, std::chrono::milliseconds timeout);
  bool held() const;

  // ---- service thread
  // Whether the control side wants the service thread (hold or a task): checked with the
  // slot's own "has work" test so that a sleeping server wakes for it.
  bool wanted() const;
  // At a call boundary: runs queued tasks and, while held, parks (tasks still run),
  // until released or `stopped()` says the slot must end (checked every few ms).
  void serve(const std::function<bool()>& stopped);
  // The slot ended: later hold()/run() fail at once; queued tasks are dropped.
  void close();

 private:
  struct Task {
    const std::function<void()>* fn;
    bool* done;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> wake_;
  std::deque<Task> tasks_;
  bool hold_requested_ = false;
  bool parked_ = false;
  bool closed_ = false;
  // (hold_requested_ || tasks queued), readable without the lock: the server's spin loop
  // tests it with each look at its slot.
  std::atomic<bool> wanted_{false};
  void update_wanted() { wanted_.store(hold_requested_ || !tasks_.empty(), std::memory_order_release); }
};

}  // namespace vmrpc
