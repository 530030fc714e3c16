#include "log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

#include "knobs.h"

namespace vmcuda::guest::log {

bool enabled(Level level) noexcept { return knobs::kLogLevel.get() >= level; }

void write(Level level, const char* subsystem, const char* format, ...) noexcept {
  char line[1024];
  int n = level == kWarn ? std::snprintf(line, sizeof line, "vmcuda: ")
                         : std::snprintf(line, sizeof line, "vmcuda: %s: ", subsystem);
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + n, sizeof line - n, format, args);
  va_end(args);
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

}  // namespace vmcuda::guest::log
