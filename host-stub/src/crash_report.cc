#include "crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <cstdlib>

namespace vmcuda::host {
namespace {

constexpr std::array kFatalSignals{SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void write_text(const char* text) { (void)!::write(STDERR_FILENO, text, ::strlen(text)); }

// Async-signal-safe but for backtrace(), whose first call may allocate: install_crash_report
// makes that first call.
void on_fatal_signal(int sig) {
  char line[96] = "vmcuda-stub: fatal signal ";
  const char* name = ::sigabbrev_np(sig);
  ::strncat(line, name ? name : "?", 16);
  ::strncat(line, "; call stack (addr2line -e <binary> -f -C <offset>):\n", sizeof(line) - ::strlen(line) - 1);
  write_text(line);
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_crash_report() {
  void* warm[1];
  (void)::backtrace(warm, 1);
  // Its own stack, so a stack overflow is reported too.
  static std::array<char, 64 * 1024> alt_stack;
  stack_t ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  ::sigaltstack(&ss, nullptr);
  struct sigaction action{};
  action.sa_handler = on_fatal_signal;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  ::sigemptyset(&action.sa_mask);
  for (int sig : kFatalSignals) ::sigaction(sig, &action, nullptr);
}

}  // namespace vmcuda::host
