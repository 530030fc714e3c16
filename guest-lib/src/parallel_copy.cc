#include "parallel_copy.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "knobs.h"

namespace vmcuda::guest {
namespace {

constexpr size_t kMinPartBytes = 1 << 20;  // below this, threads cost more than they save

// Workers wait for a job, copy their part, report done. One job at a time (callers hold
// the Remote's lock while they copy, so there is no contention).
class CopyPool {
 public:
  explicit CopyPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { run(i); });
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  void copy(char* dst, const char* src, size_t bytes, int parts) {
    const size_t part = (bytes / parts + 63) & ~size_t{63};
    {
      std::lock_guard l(mu_);
      dst_ = dst;
      src_ = src;
      bytes_ = bytes;
      part_ = part;
      active_ = parts - 1;
      pending_ = parts - 1;
      ++generation_;
    }
    cv_.notify_all();
    std::memcpy(dst, src, std::min(part, bytes));  // the caller's part: the first
    std::unique_lock l(mu_);
    done_cv_.wait(l, [&] { return pending_ == 0; });
  }

 private:
  void run(int index) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= active_) continue;
      const size_t begin = part_ * (index + 1);
      const size_t end = std::min(bytes_, begin + part_);
      char* dst = dst_;
      const char* src = src_;
      l.unlock();
      if (begin < end) std::memcpy(dst + begin, src + begin, end - begin);
      l.lock();
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t bytes_ = 0, part_ = 0;
  int active_ = 0, pending_ = 0;
};

CopyPool* pool() {
  // Made on first large copy, never destroyed (its threads outlive static destructors).
  static CopyPool* p = [] {
    const int want = static_cast<int>(knobs::kCopyThreads.get());
    const int cpus = static_cast<int>(std::thread::hardware_concurrency());
    const int workers = std::max(0, std::min(want, cpus) - 1);
    return workers > 0 ? new CopyPool(workers) : nullptr;
  }();
  return p;
}

}  // namespace

void parallel_copy(void* dst, const void* src, size_t bytes) noexcept {
  CopyPool* p = bytes >= 2 * kMinPartBytes ? pool() : nullptr;
  if (!p) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const int parts = static_cast<int>(std::min<size_t>(p->workers() + 1, bytes / kMinPartBytes));
  p->copy(static_cast<char*>(dst), static_cast<const char*>(src), bytes, parts);
}

}  // namespace vmcuda::guest
