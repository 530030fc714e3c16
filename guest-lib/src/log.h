// guest-lib's log: one line per message on stderr, "vmcuda: " first, filtered by level
// (knob VMCUDA_LOG) and tagged by subsystem above the warning level. Safe to call from
// library constructors and from any thread (one write(2) per line, no stdio state).
#pragma once

namespace vmcuda::guest::log {

enum Level { kWarn = 1, kInfo = 2, kDebug = 3 };

bool enabled(Level level) noexcept;

/// printf-style. Warnings read "vmcuda: <message>"; info and debug lines read
/// "vmcuda: <subsystem>: <message>". Lines longer than 1 KiB are cut. A warning also goes to
/// the program's error log (program_log.h: cudaLogsDumpToMemory and kin), whatever the level.
void write(Level level, const char* subsystem, const char* format, ...) noexcept __attribute__((format(printf, 3, 4)));

/// The same on stderr only (a message the caller puts into the program's log itself).
void console(Level level, const char* subsystem, const char* format, ...) noexcept __attribute__((format(printf, 3, 4)));

}  // namespace vmcuda::guest::log

#define VMCUDA_LOG(level, subsystem, ...)                                               \
  do {                                                                                  \
    if (::vmcuda::guest::log::level == ::vmcuda::guest::log::kWarn ||                    \
        ::vmcuda::guest::log::enabled(::vmcuda::guest::log::level))                     \
      ::vmcuda::guest::log::write(::vmcuda::guest::log::level, subsystem, __VA_ARGS__); \
  } while (0)
