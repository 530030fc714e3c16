// Logging filtered by level (knob VMRPC_LOG) and tagged by subsystem.
#pragma once

#include <string>

namespace vmrpc::log {

enum Level { kWarn = 1, kInfo = 2, kDebug = 3 };

bool enabled(Level level);
void write(Level level, const char* subsystem, const std::string& message);

}  // namespace vmrpc::log

#define VMRPC_LOG(level, subsystem, ...)                                       \
  do {                                                                         \
    if (::vmrpc::log::enabled(::vmrpc::log::level))                            \
      ::vmrpc::log::write(::vmrpc::log::level, subsystem, __VA_ARGS__);        \
  } while (0)
