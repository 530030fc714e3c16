// host-stub/src/crash_report.h: a fatal signal leaves its name and a call stack on stderr, and
// the process still dies of that signal (so cores and restart policies work as before).
#include <csignal>

#include <gtest/gtest.h>

#include "crash_report.h"

namespace vmcuda::host {
namespace {

TEST(CrashReportDeathTest, ASegmentationFaultIsNamedWithACallStackAndStillKills) {
  EXPECT_EXIT(
      {
        install_crash_report();
        std::raise(SIGSEGV);
      },
      testing::KilledBySignal(SIGSEGV), "fatal signal SEGV; call stack");
}

TEST(CrashReportDeathTest, AnAbortIsNamedToo) {
  EXPECT_EXIT(
      {
        install_crash_report();
        std::abort();
      },
      testing::KilledBySignal(SIGABRT), "fatal signal ABRT");
}

}  // namespace
}  // namespace vmcuda::host
