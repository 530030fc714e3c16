#include "program_log.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace vmcuda::guest::program_log {
namespace {

constexpr size_t kMaxMessageBytes = 1024;  // a longer message is cut

struct Message {
  unsigned seq;
  std::string text;  // without the newline
};

struct State {
  std::mutex mu;
  std::deque<Message> kept;  // oldest first
  size_t bytes = 0;          // of kept, newlines included
  unsigned next = 0;         // the next message's number (cudaLogIterator)
  std::map<uintptr_t, std::pair<Callback, void*>> callbacks;
  uintptr_t next_handle = 0x10;
  // Messages for the callbacks' thread, started at the first registration.
  std::deque<std::pair<Severity, std::string>> pending;
  std::condition_variable wake;
  bool deliverer = false;
};
State& state() {
  static State* s = new State;  // never destroyed: messages may come from atexit handlers
  return *s;
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// CUDA_LOG_FILE: NVIDIA's variable (CUDA Programming Guide, "Error Log Management"), read
// once: stdout, stderr or a file the messages are appended to.
void mirror(const std::string& line) {
  static const char* const where = std::getenv("CUDA_LOG_FILE");
  if (!where || !*where) return;
  const int saved_errno = errno;
  if (std::strcmp(where, "stdout") == 0) {
    write_all(STDOUT_FILENO, line.data(), line.size());
  } else if (std::strcmp(where, "stderr") == 0) {
    write_all(STDERR_FILENO, line.data(), line.size());
  } else if (const int fd = ::open(where, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644); fd >= 0) {
    write_all(fd, line.data(), line.size());
    ::close(fd);
  }
  errno = saved_errno;
}

[[noreturn]] void deliver_forever() {
  State& s = state();
  for (;;) {
    std::pair<Severity, std::string> m;
    std::vector<std::pair<Callback, void*>> to;
    {
      std::unique_lock g(s.mu);
      s.wake.wait(g, [&] { return !s.pending.empty(); });
      m = std::move(s.pending.front());
      s.pending.pop_front();
      for (const auto& [h, cb] : s.callbacks) to.push_back(cb);
    }
    for (const auto& [fn, data] : to) {
      std::string copy = m.second;  // the callback's to read (the type says char*)
      fn(data, static_cast<cudaLogLevel>(m.first), copy.data(), copy.size());
    }
  }
}

// The messages from `from` (all kept when null) as lines, and how many before them were
// overwritten. Precondition: s.mu held.
std::vector<std::string> lines_from(State& s, const unsigned* from, unsigned* overwritten) {
  const unsigned oldest = s.kept.empty() ? s.next : s.kept.front().seq;
  unsigned start = from ? *from : oldest;
  *overwritten = 0;
  if (static_cast<int>(start - oldest) < 0) {  // before the oldest kept: those between were overwritten
    *overwritten = oldest - start;
    start = oldest;
  }
  std::vector<std::string> out;
  for (const Message& m : s.kept)
    if (static_cast<int>(m.seq - start) >= 0) out.push_back(m.text + "\n");
  return out;
}

// A line of the dump's own (not a message of the log).
std::string notice(const char* what) { return std::string("[vmcuda][W] ") + what + "\n"; }

// What a dump from `iterator` writes: its messages as lines, after a notice of those overwritten
// (if any); *next is the iterator's value once they are dumped.
std::vector<std::string> dump_lines(const unsigned* iterator, unsigned* next) {
  State& s = state();
  std::unique_lock g(s.mu);
  unsigned overwritten;
  std::vector<std::string> lines = lines_from(s, iterator, &overwritten);
  *next = s.next;
  g.unlock();
  if (overwritten)
    lines.insert(lines.begin(), notice((std::to_string(overwritten) +
                                        " earlier messages were overwritten (the log keeps 25600 bytes)").c_str()));
  return lines;
}

}  // namespace

void add(Severity severity, const char* source, const char* entry, const char* text) noexcept {
  try {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    tm local{};
    ::localtime_r(&now.tv_sec, &local);
    char head[128];
    const int n = std::snprintf(head, sizeof head, "[%02d:%02d:%02d.%03ld][%ld][%s][%c]", local.tm_hour, local.tm_min,
                                local.tm_sec, now.tv_nsec / 1000000, static_cast<long>(::syscall(SYS_gettid)),
                                source ? source : "vmcuda", severity == kError ? 'E' : 'W');
    std::string line(head, n > 0 ? static_cast<size_t>(n) : 0);
    if (entry) line += std::string("[") + entry + "]";
    line += " ";
    line += text ? text : "";
    if (line.size() > kMaxMessageBytes) line.resize(kMaxMessageBytes);
    mirror(line + "\n");
    State& s = state();
    std::lock_guard g(s.mu);
    s.kept.push_back({s.next++, line});
    s.bytes += line.size() + 1;
    while (s.bytes > kCapacityBytes && !s.kept.empty()) {
      s.bytes -= s.kept.front().text.size() + 1;
      s.kept.pop_front();
    }
    if (!s.callbacks.empty()) {
      s.pending.emplace_back(severity, std::move(line));
      s.wake.notify_one();
    }
  } catch (...) {
    // Out of memory: the message is lost, the call it is about goes on.
  }
}

cudaError_t current(unsigned* iterator_out, unsigned flags) noexcept {
  // (flags are "reserved, must be 0", but NVIDIA's runtime accepts others: H100, driver 580.)
  (void)flags;
  if (!iterator_out) return cudaErrorInvalidValue;
  State& s = state();
  std::lock_guard g(s.mu);
  *iterator_out = s.next;
  return cudaSuccess;
}

cudaError_t dump_to_memory(unsigned* iterator, char* buffer, size_t* size, unsigned flags) noexcept {
  if (!buffer) {
    add(kError, "vmcuda", "cudaLogsDumpToMemory", "buffer cannot be NULL");
    return cudaErrorInvalidValue;
  }
  if (!size) {
    add(kError, "vmcuda", "cudaLogsDumpToMemory", "size cannot be NULL");
    return cudaErrorInvalidValue;
  }
  if (flags != 0) {
    add(kError, "vmcuda", "cudaLogsDumpToMemory", "flags must be 0");
    return cudaErrorInvalidValue;
  }
  try {
    unsigned next;
    std::vector<std::string> lines = dump_lines(iterator, &next);
    if (lines.empty()) {
      if (*size > 0) buffer[0] = '\0';
      *size = 0;
      if (iterator) *iterator = next;
      return cudaSuccess;
    }
    size_t total = 1;  // the NUL
    for (const auto& l : lines) total += l.size();
    std::string out;
    if (total <= *size) {
      for (const auto& l : lines) out += l;
    } else {
      // The newest that fit, after a line saying how many of how many.
      size_t kept = 0, bytes = 1;
      std::string head;
      while (kept < lines.size()) {
        const std::string& l = lines[lines.size() - 1 - kept];
        const std::string h = notice(("the buffer holds the newest " + std::to_string(kept + 1) + " of " +
                                      std::to_string(lines.size()) + " messages")
                                         .c_str());
        if (bytes + l.size() + h.size() > *size) break;
        bytes += l.size();
        head = h;
        ++kept;
      }
      if (kept == 0) {
        if (lines.back().size() + 1 > *size) {
          *size = 0;
          add(kError, "vmcuda", "cudaLogsDumpToMemory", "the buffer cannot hold the newest message");
          return cudaErrorInvalidValue;
        }
        kept = 1;  // room for the newest alone, not for the line about the others
      } else {
        out = head;
      }
      for (size_t i = lines.size() - kept; i < lines.size(); ++i) out += lines[i];
    }
    std::memcpy(buffer, out.data(), out.size());
    buffer[out.size()] = '\0';
    *size = out.size();
    if (iterator) *iterator = next;
    return cudaSuccess;
  } catch (...) {
    return cudaErrorMemoryAllocation;
  }
}

cudaError_t dump_to_file(unsigned* iterator, const char* path, unsigned flags) noexcept {
  if (!path) {
    add(kError, "vmcuda", "cudaLogsDumpToFile", "pathToFile cannot be NULL");
    return cudaErrorInvalidValue;
  }
  if (flags != 0) {
    add(kError, "vmcuda", "cudaLogsDumpToFile", "flags must be 0");
    return cudaErrorInvalidValue;
  }
  try {
    unsigned next;
    const std::vector<std::string> lines = dump_lines(iterator, &next);
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      add(kError, "vmcuda", "cudaLogsDumpToFile",
          (std::string("cannot open ") + path + ": " + std::strerror(errno)).c_str());
      return cudaErrorInvalidValue;
    }
    std::string out;
    for (const auto& l : lines) out += l;
    write_all(fd, out.data(), out.size());
    ::close(fd);
    if (iterator) *iterator = next;
    return cudaSuccess;
  } catch (...) {
    return cudaErrorMemoryAllocation;
  }
}

cudaError_t register_callback(Callback callback, void* data, void** handle_out) noexcept {
  if (!callback) return cudaErrorInvalidValue;
  try {
    State& s = state();
    std::lock_guard g(s.mu);
    if (!s.deliverer) {
      std::thread(deliver_forever).detach();
      s.deliverer = true;
    }
    const uintptr_t h = s.next_handle += 0x10;
    s.callbacks[h] = {callback, data};
    if (handle_out) *handle_out = reinterpret_cast<void*>(h);
    return cudaSuccess;
  } catch (...) {
    return cudaErrorMemoryAllocation;
  }
}

cudaError_t unregister_callback(void* handle) noexcept {
  State& s = state();
  std::lock_guard g(s.mu);
  return s.callbacks.erase(reinterpret_cast<uintptr_t>(handle)) ? cudaSuccess : cudaErrorInvalidValue;
}

void reset_for_testing() noexcept {
  State& s = state();
  std::lock_guard g(s.mu);
  s.kept.clear();
  s.bytes = 0;
  s.next = 0;
  s.callbacks.clear();
  s.pending.clear();
}

}  // namespace vmcuda::guest::program_log
