#include "vmrpc/log.h"

#include <unistd.h>

#include <cstdio>

#include "vmrpc/knobs.h"

namespace vmrpc::log {

bool enabled(Level level) { return knobs::kLogLevel.get() >= level; }

void write(Level level, const char* subsystem, const std::string& message) {
  static const char* names[] = {"", "warning", "info", "debug"};
  std::fprintf(stderr, "vmrpc[%d] %s %s: %s\n", static_cast<int>(::getpid()), names[level], subsystem,
               message.c_str());
}

}  // namespace vmrpc::log
