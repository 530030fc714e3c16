// Kernel printf output (calls.def OutputRing). The driver collects a kernel's printf() in a
// device FIFO and writes it to the stdout of the process that owns the context at
// synchronizing calls. Under `--isolation process` that process is the client's worker:
// OutputCapture turns the worker's stdout into a pipe before the driver loads, and after each
// synchronizing call the client's session moves what arrived into the guest's ring
// (OutputRing, wire.h OutputRingHeader), which guest-lib writes to the app's stdout.
// Under `--isolation thread` clients share the stub's stdout: their output stays there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "vmcuda/api/wire.h"

namespace vmcuda::host {

// What this process writes to one fd (stdout in a worker), collected. A thread of its own
// empties the pipe as it fills, into a bounded buffer, so that the driver never blocks on a
// full pipe (the printf FIFO holds 1 MiB by default, more than a pipe); what does not fit
// the buffer is dropped and counted. Process-wide: one per process.
class OutputCapture {
 public:
  static constexpr size_t kBufferBytes = 1u << 20;

  // Makes `fd` the write end of a pipe this capture reads; false (and `*why`) when it cannot.
  static bool install(int fd, std::string* why);
  // The installed capture, or nullptr.
  static OutputCapture* get();
  // Puts the fd back as it was and stops the thread (tests).
  static void uninstall();

  // fflush(stdout) (the driver may write through stdio), reads what the pipe holds, then
  // offers the buffered bytes, oldest first, to `put`, which returns how many it took (0:
  // no room). Returns the bytes still buffered.
  uint64_t drain(const std::function<size_t(std::span<const std::byte>)>& put);
  uint64_t dropped() const;

  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;
  ~OutputCapture();

 private:
  OutputCapture(int fd, int saved, int read_end, int stop);
  void read_locked();  // everything the pipe holds now; mu_ held
  void loop();

  const int fd_, saved_, read_end_, stop_;
  mutable std::mutex mu_;
  std::string buffer_;
  size_t head_ = 0;  // buffer_[head_...] not yet handed over
  uint64_t dropped_ = 0;
  bool eof_ = false;
  std::thread thread_;
};

// A client's registered ring (session.h). Everything it writes lies in [data, data +
// capacity), whatever the guest writes into the header.
struct OutputRing {
  vmrpc::wire::HeapRef ref{};
  api::OutputRingHeader* header = nullptr;  // nullptr: none registered
  std::byte* data = nullptr;
  uint64_t capacity = 0;
  uint64_t written = 0;  // the host's own write position (the header's is never read back)
  // The heap table's owner words of the ring's pages: the ring is written only while they
  // all name this client's slot (a block it freed may be another process's by then).
  uint32_t* owners = nullptr;
  uint64_t pages = 0;
  uint32_t owner = 0;
  bool warned = false;  // a bad read_pos was logged

  // Copies as much of `bytes` as the guest has room for into the data (not yet published);
  // returns the count. A read_pos outside [written - capacity, written] means no room.
  size_t put(std::span<const std::byte> bytes);
  // Publishes what put() wrote (write_pos, with release) with `pending` and `dropped`.
  void publish(uint64_t pending, uint64_t dropped);
  bool owned() const;
};

}  // namespace vmcuda::host
