#include "log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

#include "knobs.h"
#include "program_log.h"

namespace vmcuda::guest::log {

bool enabled(Level level) noexcept { return knobs::kLogLevel.get() >= level; }

namespace {
void vconsole(Level level, const char* subsystem, const char* format, va_list args) noexcept {
  char line[1024];
  int n = level == kWarn ? std::snprintf(line, sizeof line, "vmcuda: ")
                         : std::snprintf(line, sizeof line, "vmcuda: %s: ", subsystem);
  int m = std::vsnprintf(line + n, sizeof line - n, format, args);
  size_t len = m < 0 ? n : static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  int saved_errno = errno;  // the application may be about to read errno
  for (size_t off = 0; off < len;) {
    ssize_t w = ::write(STDERR_FILENO, line + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  errno = saved_errno;
}
}  // namespace

void write(Level level, const char* subsystem, const char* format, ...) noexcept {
  va_list args;
  if (level == kWarn) {
    // A warning is about this program's calls: its error log keeps it (program_log.h),
    // whatever the console's level.
    char message[1024];
    va_start(args, format);
    std::vsnprintf(message, sizeof message, format, args);
    va_end(args);
    program_log::add(program_log::kWarning, "vmcuda", nullptr, message);
  }
  if (!enabled(level)) return;
  va_start(args, format);
  vconsole(level, subsystem, format, args);
  va_end(args);
}

void console(Level level, const char* subsystem, const char* format, ...) noexcept {
  if (!enabled(level)) return;
  va_list args;
  va_start(args, format);
  vconsole(level, subsystem, format, args);
  va_end(args);
}

}  // namespace vmcuda::guest::log
