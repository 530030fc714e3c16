// Every tuning knob of guest-lib, declared once: name, environment variable, default.
// One grep for VMCUDA_KNOB finds them all. A value is read from the environment the first
// time it is used (from any thread: racing first reads compute the same value); tests may
// override it with set().
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace vmcuda::guest::knobs {

class Knob {
 public:
  constexpr Knob(const char* env, int64_t def, const char* doc) : env_(env), def_(def), doc_(doc) {}
  int64_t get() const noexcept {
    if (!loaded_.load(std::memory_order_acquire)) {
      const char* s = std::getenv(env_);
      value_.store(s && *s ? std::strtoll(s, nullptr, 0) : def_, std::memory_order_relaxed);
      loaded_.store(true, std::memory_order_release);
    }
    return value_.load(std::memory_order_relaxed);
  }
  void set(int64_t v) const noexcept {
    value_.store(v, std::memory_order_relaxed);
    loaded_.store(true, std::memory_order_release);
  }
  const char* env() const noexcept { return env_; }
  const char* doc() const noexcept { return doc_; }
  int64_t default_value() const noexcept { return def_; }

 private:
  const char* env_;
  int64_t def_;
  const char* doc_;
  mutable std::atomic<int64_t> value_{0};
  mutable std::atomic<bool> loaded_{false};
};

#define VMCUDA_KNOB(name, env, def, doc) \
  inline const Knob name { env, def, doc }

VMCUDA_KNOB(kLogLevel, "VMCUDA_LOG", 1,
            "0 quiet; 1 warnings (each call not yet supported, once; bad fatbins); "
            "2 info; 3 debug (every registration and launch configuration)");

VMCUDA_KNOB(kInlineCopyBytes, "VMCUDA_INLINE_COPY_BYTES", 64 << 10,
            "copies up to this size travel inside the call frame; larger ones through the shared heap");
VMCUDA_KNOB(kInlineReadBytes, "VMCUDA_INLINE_READ_BYTES", 16 << 10,
            "device-to-host copies up to this size come back inside the reply; larger ones through a "
            "pinned heap chunk (the host's DMA into shared memory that is not pinned is slow)");
VMCUDA_KNOB(kCopyChunkBytes, "VMCUDA_COPY_CHUNK_BYTES", 8 << 20,
            "size of each of the two heap chunks a large pageable copy is pipelined through");

VMCUDA_KNOB(kCopyThreads, "VMCUDA_COPY_THREADS", 4,
            "threads (the caller included) that copy a large pageable buffer to or from the staging chunks");

VMCUDA_KNOB(kImageCache, "VMCUDA_IMAGE_CACHE", 1,
            "1: a module image is named by its SHA-256 first and crosses to the host only when the host's "
            "image cache lacks it (module_image.h; needs libcrypto.so.3 in the guest); 0: every image crosses");

#undef VMCUDA_KNOB

}  // namespace vmcuda::guest::knobs
