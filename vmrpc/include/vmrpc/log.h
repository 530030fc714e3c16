// Logging filtered by level (knob VMRPC_LOG), tagged by subsystem, warnings rate-limited.
#pragma once

#include <cstdint>
#include <string>

namespace vmrpc::log {

enum Level { kWarn = 1, kInfo = 2, kDebug = 3 };

bool enabled(Level level);
// Warnings pass a rate limit per subsystem (knobs VMRPC_LOG_WARN_RATE, _BURST): a guest
// that provokes one per call cannot fill the journal; the next line that passes says how
// many were suppressed. Under systemd (JOURNAL_STREAM) lines carry journald's priority.
void write(Level level, const char* subsystem, const std::string& message);
// Who writes: "vmrpc" until set, e.g. "vmcuda-stub vm1" (the VM's name on every line).
// Call before the threads that log start.
void set_origin(const std::string& origin);

// A token bucket: `burst` lines at once, then `rate_per_s` a second (<= 0: no limit).
class RateLimiter {
 public:
  RateLimiter(double rate_per_s, double burst) : rate_per_s_(rate_per_s), burst_(burst < 1 ? 1 : burst) {}
  struct Verdict {
    bool admit = true;
    uint64_t suppressed_before = 0;  // lines refused since the last admitted one
  };
  Verdict admit(double now_s);

 private:
  double rate_per_s_, burst_;
  double tokens_ = 0, last_s_ = 0;
  bool started_ = false;
  uint64_t suppressed_ = 0;
};

}  // namespace vmrpc::log

#define VMRPC_LOG(level, subsystem, ...)                                       \
  do {                                                                         \
    if (::vmrpc::log::enabled(::vmrpc::log::level))                            \
      ::vmrpc::log::write(::vmrpc::log::level, subsystem, __VA_ARGS__);        \
  } while (0)
