#include "vmrpc/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "vmrpc/knobs.h"

namespace vmrpc::log {

bool enabled(Level level) { return knobs::kLogLevel.get() >= level; }

RateLimiter::Verdict RateLimiter::admit(double now_s) {
  Verdict v;
  if (rate_per_s_ <= 0) return v;  // unlimited
  if (!started_) {
    started_ = true;
    tokens_ = burst_;
    last_s_ = now_s;
  }
  tokens_ = std::min(burst_, tokens_ + (now_s - last_s_) * rate_per_s_);
  last_s_ = now_s;
  if (tokens_ < 1) {
    ++suppressed_;
    v.admit = false;
    return v;
  }
  tokens_ -= 1;
  v.suppressed_before = suppressed_;
  suppressed_ = 0;
  return v;
}

namespace {
std::string& origin() {
  static std::string o = "vmrpc";
  return o;
}
// journald reads a "<N>" prefix as the line's priority (sd-daemon.h's SD_WARNING etc.).
const char* priority_prefix(Level level) {
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  if (!journal) return "";
  switch (level) {
    case kWarn: return "<4>";
    case kInfo: return "<6>";
    default: return "<7>";
  }
}
}  // namespace

void set_origin(const std::string& o) { origin() = o; }

void write(Level level, const char* subsystem, const std::string& message) {
  static const char* names[] = {"", "warning", "info", "debug"};
  const char* prefix = priority_prefix(level);
  const int pid = static_cast<int>(::getpid());
  if (level == kWarn) {
    // Warnings are what a guest can provoke at the default level: a flood of them is cut to
    // a rate per subsystem, and the next line that passes says how many were dropped.
    static std::mutex mu;
    static std::map<std::string, RateLimiter> limiters;
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    RateLimiter::Verdict v;
    {
      std::lock_guard l(mu);
      auto [it, fresh] = limiters.try_emplace(subsystem, static_cast<double>(knobs::kLogWarnRate.get()),
                                              static_cast<double>(knobs::kLogWarnBurst.get()));
      v = it->second.admit(now);
    }
    if (!v.admit) return;
    if (v.suppressed_before)
      std::fprintf(stderr, "%s%s[%d] warning %s: %llu similar lines suppressed (more than %lld a second; %s)\n",
                   prefix, origin().c_str(), pid, subsystem, static_cast<unsigned long long>(v.suppressed_before),
                   static_cast<long long>(knobs::kLogWarnRate.get()), knobs::kLogWarnRate.env());
  }
  std::fprintf(stderr, "%s%s[%d] %s %s: %s\n", prefix, origin().c_str(), pid, names[level], subsystem,
               message.c_str());
}

}  // namespace vmrpc::log
