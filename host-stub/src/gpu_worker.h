// The working thread of a GPU (DESIGN.md, vCUDA's one-to-many model): when the clients of a
// stub are threads of one process (`--isolation thread`), every client's non-blocking work
// on that GPU — launches, async copies and memsets, event records, stream waits, host
// functions — is issued by this one thread, in arrival order. Waits (synchronize, queries,
// synchronous copies, frees) stay on the client's own service thread, so the working thread
// never blocks on one client's wait, and one place sees all work going to a GPU (where a
// fair-share policy between clients belongs).
//
// With `--isolation process` (the default) each client already has a process of its own —
// an illegal address poisons every CUDA context of a process on the H200
// (tests/gpu/context_fault_probe.cc) — and there the worker process's thread is its
// client's working thread; a shared one per GPU would need a shared process.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <type_traits>

namespace vmcuda::host {

class GpuWorker {
 public:
  // The working thread of host device `device` in this process, started on first use.
  static GpuWorker& of(int device);

  // Runs `f` on the working thread and returns its result; the calling (service) thread
  // waits for it. `f` must not block on the GPU.
  template <class F>
  int32_t run(F&& f) {
    Task t;
    t.fn = [](void* p) { return (*static_cast<std::remove_reference_t<F>*>(p))(); };
    t.arg = &f;
    submit(t);
    return t.result;
  }

  // Hands `f` (void()) to the working thread and returns at once; tasks run in the order they
  // were handed over (run() and post() alike). The caller keeps its own count to wait for.
  template <class F>
  void post(F&& f) {
    auto* t = new Posted<std::decay_t<F>>(std::forward<F>(f));
    enqueue(t);
  }

  // Tasks run so far (tests: the work did go through the working thread).
  uint64_t tasks_run() const { return tasks_run_.load(std::memory_order_relaxed); }
  std::thread::id thread_id() const { return id_; }

  GpuWorker(const GpuWorker&) = delete;
  GpuWorker& operator=(const GpuWorker&) = delete;

 private:
  struct Task {
    int32_t (*fn)(void*) = nullptr;
    void* arg = nullptr;
    int32_t result = 0;
    // 0 queued, 1 done (result written), 2 released: the worker touches the task no more,
    // so the waiter (which returns only on 2) may free it.
    std::atomic<uint32_t> state{0};
    // Posted tasks: the worker deletes them after running instead of answering.
    void (*release)(Task*) = nullptr;
  };
  template <class F>
  struct Posted : Task {
    F body;
    explicit Posted(F&& f) : body(std::move(f)) {
      fn = [](void* p) {
        static_cast<Posted*>(p)->body();
        return int32_t{0};
      };
      arg = this;
      release = [](Task* t) { delete static_cast<Posted*>(t); };
    }
  };
  void enqueue(Task* t);

  GpuWorker();
  ~GpuWorker();
  void submit(Task& t);
  void loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Task*> queue_;
  std::atomic<uint32_t> queued_{0};  // queue_.size(), for spinning without the lock
  bool stop_ = false;
  std::atomic<uint64_t> tasks_run_{0};
  std::thread thread_;
  std::thread::id id_;
};

}  // namespace vmcuda::host
