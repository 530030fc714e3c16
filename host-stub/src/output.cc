// Kernel printf output (calls.def 0x1008 OutputRing; output.h says how it flows).
#include "output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "session.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;
namespace ordering = vmrpc::ordering;

namespace {
std::mutex g_capture_mu;
std::atomic<OutputCapture*> g_capture{nullptr};
}  // namespace

// ---------------------------------------------------------------- OutputCapture

bool OutputCapture::install(int fd, std::string* why) {
  std::lock_guard l(g_capture_mu);
  if (g_capture.load()) return true;
  auto fail = [&](const char* what) {
    if (why) *why = std::string("cannot capture fd ") + std::to_string(fd) + ": " + what + ": " + std::strerror(errno);
    return false;
  };
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return fail("pipe2");
  // Larger than the default 64 KiB where allowed: fewer wake-ups of the thread. Best effort.
  ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  const int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int saved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (stop < 0 || saved < 0 || ::fcntl(p[0], F_SETFL, O_NONBLOCK) != 0 || ::dup2(p[1], fd) < 0) {
    const int err = errno;
    for (int f : {p[0], p[1], stop, saved})
      if (f >= 0) ::close(f);
    errno = err;
    return fail("setting up the pipe");
  }
  ::close(p[1]);  // `fd` is the only write end: the thread sees EOF once it is put back
  auto* c = new OutputCapture(fd, saved, p[0], stop);
  g_capture.store(c);
  return true;
}

OutputCapture* OutputCapture::get() { return g_capture.load(std::memory_order_acquire); }

void OutputCapture::uninstall() {
  std::lock_guard l(g_capture_mu);
  delete g_capture.exchange(nullptr);
}

OutputCapture::OutputCapture(int fd, int saved, int read_end, int stop)
    : fd_(fd), saved_(saved), read_end_(read_end), stop_(stop) {
  thread_ = std::thread([this] { loop(); });
}

OutputCapture::~OutputCapture() {
  std::fflush(stdout);
  ::dup2(saved_, fd_);  // closes the pipe's write end
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_, &one, sizeof one);
  thread_.join();
  for (int f : {saved_, read_end_, stop_}) ::close(f);
}

void OutputCapture::loop() {
  pollfd fds[2] = {{read_end_, POLLIN, 0}, {stop_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (fds[0].revents) {
      std::lock_guard l(mu_);
      read_locked();
      if (eof_) return;
    }
  }
}

void OutputCapture::read_locked() {
  char chunk[16384];
  while (!eof_) {
    const ssize_t n = ::read(read_end_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof_ = n == 0;
      return;
    }
    // Compact before growing: the buffer's bound is on bytes not yet handed over.
    if (head_ && buffer_.size() + static_cast<size_t>(n) > buffer_.capacity()) {
      buffer_.erase(0, head_);
      head_ = 0;
    }
    const size_t room = kBufferBytes - std::min(kBufferBytes, buffer_.size() - head_);
    const size_t keep = std::min(room, static_cast<size_t>(n));
    buffer_.append(chunk, keep);
    dropped_ += static_cast<size_t>(n) - keep;
  }
}

uint64_t OutputCapture::drain(const std::function<size_t(std::span<const std::byte>)>& put) {
  std::fflush(stdout);
  std::lock_guard l(mu_);
  read_locked();
  while (head_ < buffer_.size()) {
    const size_t n = put(std::as_bytes(std::span(buffer_).subspan(head_)));
    if (n == 0) break;
    head_ += n;
  }
  if (head_ == buffer_.size()) {
    buffer_.clear();
    head_ = 0;
  }
  return buffer_.size() - head_;
}

uint64_t OutputCapture::dropped() const {
  std::lock_guard l(mu_);
  return dropped_;
}

// ---------------------------------------------------------------- OutputRing

size_t OutputRing::put(std::span<const std::byte> bytes) {
  const uint64_t read = ordering::load_acquire(header->read_pos);  // the guest is done with what lies before it
  if (read > written || written - read > capacity) {
    if (!warned)
      VMRPC_LOG(kWarn, "stub", "the guest's printf output ring reads position " + std::to_string(read) +
                                   " with " + std::to_string(written) + " written: ignored until it is sane");
    warned = true;
    return 0;
  }
  const uint64_t n = std::min<uint64_t>(capacity - (written - read), bytes.size());
  const uint64_t at = written % capacity, first = std::min(n, capacity - at);
  std::memcpy(data + at, bytes.data(), first);
  std::memcpy(data, bytes.data() + first, n - first);
  written += n;
  return n;
}

void OutputRing::publish(uint64_t pending, uint64_t dropped) {
  ordering::store_relaxed(header->pending, pending);
  ordering::store_relaxed(header->dropped, dropped);
  ordering::store_release(header->write_pos, written);  // after the data
}

bool OutputRing::owned() const {
  for (uint64_t i = 0; i < pages; ++i)
    if (ordering::load_relaxed(owners[i]) != owner) return false;
  return true;
}

// ---------------------------------------------------------------- Session

int32_t Session::on_ClientInfo(const api::Empty&, api::Empty&, Request& req) {
  // Untrusted: kept printable and short, for status tables and logs.
  std::string name;
  for (std::byte b : req.tail.first(std::min<size_t>(req.tail.size(), api::kMaxProgramName))) {
    const char c = static_cast<char>(b);
    name += c >= 0x20 && c < 0x7f ? c : '?';
  }
  std::lock_guard l(published_mu_);
  program_ = std::move(name);
  return CUDA_SUCCESS;
}

int32_t Session::on_OutputRing(const api::OutputRingArgs& a, api::OutputRingReply& reply, Request& req) {
  OutputCapture* capture = OutputCapture::get();
  if (!capture) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMRPC_LOG(kWarn, "stub", "kernel printf output of clients goes to this stub's stdout (they share its "
                               "process: --isolation thread), not to the applications'");
    reply.captured = 0;
    return CUDA_SUCCESS;
  }
  if (a.ring.offset != output_.ref.offset || a.ring.bytes != output_.ref.bytes || !output_.header) {
    auto span = req.ctx.heap(a.ring);
    if (!span) return guest_fault("OutputRing: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
    constexpr uint64_t kHeader = sizeof(api::OutputRingHeader);
    const uint64_t page = req.ctx.region.layout().heap_page_bytes;
    if (a.ring.bytes < kHeader + api::kOutputRingMinData || a.ring.bytes > api::kOutputRingMaxBytes ||
        reinterpret_cast<uintptr_t>(span->data()) % 64 != 0 || page == 0)
      return guest_fault("OutputRing: a ring of a bad size or alignment");
    OutputRing ring;
    ring.ref = a.ring;
    ring.header = reinterpret_cast<api::OutputRingHeader*>(span->data());
    ring.data = span->data() + kHeader;
    ring.capacity = a.ring.bytes - kHeader;
    const uint64_t first = a.ring.offset / page;
    ring.owners = req.ctx.region.heap_table() + first;
    ring.pages = (a.ring.offset + a.ring.bytes - 1) / page - first + 1;
    ring.owner = req.ctx.slot.slot + 1;
    if (!ring.owned()) return guest_fault("OutputRing: a ring in heap pages that are not the client's");  // not this client's heap block
    output_ = ring;
  }
  reply.captured = 1;
  output_drain();
  return CUDA_SUCCESS;
}

void Session::output_drain() {
  OutputCapture* capture = OutputCapture::get();
  if (!capture || !output_.header) return;
  if (!output_.owned()) {
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": the printf output ring is no longer the client's heap block: "
                                        "kernel printf output is kept on the host until it registers another");
    output_ = OutputRing{};
    return;
  }
  const uint64_t pending = capture->drain([this](std::span<const std::byte> b) { return output_.put(b); });
  output_.publish(pending, capture->dropped());
}

}  // namespace vmcuda::host
