// Kernel printf output (calls.def OutputRing; host-stub/src/output.h). The driver writes a
// kernel's printf() to the stdout of the process that owns the context, at synchronizing
// calls. That process is the client's worker on the host: the host collects what it
// writes and, after each synchronizing call, puts it into this ring, and we write it to the
// app's stdout before the call returns, as the driver would have during the call.
//
// Through stdio's stdout (fwrite, then fflush as the driver's output shows at once): the
// driver writes with the process's own stdio, so the app's buffered printf()s before the
// synchronize come out before the kernel's lines, and later ones after, pipe or terminal.
//
// At exit we ask the host once more for what the driver wrote without a synchronizing call
// (natively the driver also writes it at the start of a later launch). As natively, what
// sits in the device FIFO unsynchronized at exit is not shown: CUDA's programming guide
// says the buffer is not flushed when the program exits.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "log.h"
#include "remote.h"
#include "vmrpc/ordering.h"

namespace vmcuda::guest {

namespace ordering = vmrpc::ordering;

namespace {
// Fits a burst of lines; more waits on the host and comes in further rounds (pending).
constexpr uint64_t kRingBytes = 64u << 10;
// Rounds per call: the host buffers at most 1 MiB (OutputCapture::kBufferBytes).
constexpr int kMaxRounds = 64;
constexpr uint64_t kHeader = sizeof(api::OutputRingHeader);
}  // namespace

void Remote::start_output() {
  output_started_ = true;
  auto block = slot_->heap().allocate(kRingBytes);
  if (!block) {
    VMCUDA_LOG(kWarn, "output", "the shared heap is full: kernel printf output stays on the host");
    return;
  }
  std::memset(block->data, 0, kHeader);
  auto r = exchange<api::Call::OutputRing>({block->ref()}, {}, 0);
  if (r.status != 0 || !r.reply.captured) {
    // Thread isolation (the stub's stdout has it) or an older stub.
    if (r.status != 0) VMCUDA_LOG(kInfo, "output", "the host refused the printf output ring (%d)", r.status);
    slot_->heap().free(block->offset);
    return;
  }
  output_ring_ = reinterpret_cast<api::OutputRingHeader*>(block->data);
  output_ref_ = block->ref();
  std::atexit(output_at_exit);
  poll_output();  // what the driver wrote before (nothing, usually)
}

void Remote::poll_output() {
  api::OutputRingHeader* h = output_ring_;
  const std::byte* data = reinterpret_cast<const std::byte*>(h) + kHeader;
  const uint64_t capacity = output_ref_.bytes - kHeader;
  for (int round = 0;; ++round) {
    const uint64_t w = ordering::load_acquire(h->write_pos);  // the data before it is written
    if (w != output_read_) {
      // More than the ring holds (never, from a sane host): the newest capacity bytes.
      const uint64_t from = w - output_read_ > capacity ? w - capacity : output_read_;
      const uint64_t n = w - from, at = from % capacity, first = std::min(n, capacity - at);
      std::fwrite(data + at, 1, first, stdout);
      std::fwrite(data, 1, n - first, stdout);
      std::fflush(stdout);
      output_read_ = w;
      ordering::store_release(h->read_pos, w);  // after reading: the host may overwrite it now
    }
    if (const uint64_t d = ordering::load_relaxed(h->dropped); d != output_dropped_) {
      VMCUDA_LOG(kWarn, "output", "%llu bytes of kernel printf output were lost: the host's buffer was full",
                 static_cast<unsigned long long>(d - output_dropped_));
      output_dropped_ = d;
    }
    if (ordering::load_relaxed(h->pending) == 0 || round + 1 >= kMaxRounds) return;
    // The rest waits on the host: ask for it now, so that it comes out before the call returns.
    if (exchange<api::Call::OutputRing>({output_ref_}, {}, 0).status != 0) return;
  }
}

void Remote::output_at_exit() {
  Remote* r = Remote::get(nullptr);  // connected: this was registered after the connection
  if (!r || !r->output_ring_) return;
  // A thread that holds the slot (one waiting on a long kernel) may never let go while the
  // process exits: give up after a while rather than hang the exit.
  std::unique_lock l(r->mu_, std::defer_lock);
  for (int i = 0; !l.try_lock(); ++i) {
    if (i == 1000) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (r->exchange<api::Call::OutputRing>({r->output_ref_}, {}, 0).status != 0) return;
  r->poll_output();
}

}  // namespace vmcuda::guest
