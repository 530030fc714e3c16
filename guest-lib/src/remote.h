// The process's link to vmcuda-stub: one connection, one slot, the lazy call queue.
//
// Lazy RPC (vCUDA §4.3.2): batchable calls (launches, async copies, frees, ...) are
// appended to the slot's RPC stack and sent with the next synchronizing call, or when
// the stack is full. An error of a queued call is kept and returned by the next
// synchronizing call, as CUDA reports asynchronous errors.
//
// A full stack is submitted without waiting: the host runs that batch while the app goes
// on queueing into a private buffer of the same layout, which moves into the stack once
// the host has answered (settle()). So a stream of launches costs max(guest, host) per
// launch, not their sum.
//
// Transport, chosen once at the first CUDA call; the vmrpc code above it is the same:
//  1. VMCUDA_DEVICE=/dev/vmcudaN: that device of the guest kernel driver
//     (ivshmem-driver/; vmrpc::DriverDevice, the slot the driver claimed in open());
//  2. VMCUDA_SOCKET=PATH: the local transport (a process on the host or in a container);
//  3. /dev/vmcuda0 when it exists (inside a VM with the driver loaded);
//  4. the local transport on the default socket /run/vmcuda/local.sock.
// An explicit choice (1, 2) that fails is reported, never replaced by another transport.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmcuda/api/remote.h"
#include "vmcuda/cudart_types.h"
#include "vmrpc/client.h"

namespace vmcuda::guest {

// A CUresult or channel status from the host as the cudaError_t the app sees.
cudaError_t to_cuda_error(int32_t status, const char* call) noexcept;

class Remote {
 public:
  // The connected instance, connecting on first use; nothing (and `*error`) when no
  // host can be reached: the message that says why and what to do is logged once.
  static Remote* get(cudaError_t* error) noexcept;
  // Whether a connection was made (by either API), without making one: natively the runtime
  // initializes the driver (cuInit) when it starts, so the driver API counts as initialized
  // once the runtime has connected (driver_state.cc).
  static bool started() noexcept { return started_.load(std::memory_order_acquire); }

  // Every use of the slot holds this.
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mu_); }

  // Precondition: lock() held. Queues a batchable call.
  template <api::Call C>
  cudaError_t enqueue(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail = {});

  // Precondition: lock() held. Runs a call now, together with what is queued; the
  // call's own error, else the first error of the queued calls. Kernel printf output the
  // host collected meanwhile is written to stdout before it returns (output.cc).
  template <api::Call C>
  api::RemoteResult<C> call(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail = {},
                            uint32_t extra_capacity = 0);

  // Precondition: lock() held. A query on the side that needs no context (libnvidia-ml.so.1):
  // runs now, together with what is queued, whose errors stay deferred for the application's
  // next synchronizing CUDA call (a query must not take them).
  template <api::Call C>
  api::RemoteResult<C> query(const typename api::CallTraits<C>::Args& args) {
    static_assert((api::CallTraits<C>::kFlags & api::kNoContext) != 0, "a query needs no context");
    return exchange<C>(args, {}, 0);
  }

  // Precondition: lock() held. Sends what is queued; returns the first queued error.
  cudaError_t flush();

  vmrpc::ClientSlot& slot() { return *slot_; }

  // The calling thread's device (cudaSetDevice/cudaGetDevice); calls run on it: the
  // host is told when the thread that calls differs from the last one's device.
  static int& thread_device() {
    thread_local int device = 0;
    return device;
  }
  const api::HandshakeReply& handshake() const { return handshake_; }
  const std::vector<api::DevicePropertiesReply>& devices() const { return devices_; }

 private:
  Remote() = default;
  static inline std::atomic<bool> started_{false};
  bool connect(cudaError_t* error);
  // After a flush: statuses of the queued frames; remembers the first error.
  void collect_queued();
  // After a batch: the host's late status (SlotControl::late_status), as a queued error.
  void collect_late();
  // Sends what is queued and collects its errors (kept for the next synchronizing call).
  void send_queue();
  // Submits the stack's batch without waiting for it (after settle()); later queued calls
  // go to spill_ until the next settle().
  void submit_queue();
  // Waits for a batch submit_queue() sent, collects its errors and moves the calls queued
  // meanwhile into the stack. Every use of the stack other than enqueue() settles first.
  void settle();
  // Where enqueue() appends: the stack, or the private buffer while a batch is in flight.
  vmrpc::BatchWriter& queue_batch() { return in_flight_ ? *spill_batch_ : slot_->batch(); }
  cudaError_t take_deferred();
  // call() without taking the queued calls' errors (they stay deferred) or the output hooks.
  template <api::Call C>
  api::RemoteResult<C> exchange(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail,
                                uint32_t extra_capacity);

  // Kernel printf output (output.cc): a ring in the shared heap (wire.h OutputRingHeader),
  // registered at the first call that needs the client's context (registering makes one),
  // read after every call (one load when nothing is new) and at exit.
  template <api::Call C>
  static constexpr bool kOutputHooks =
      (api::CallTraits<C>::kFlags & api::kNoContext) == 0 && C != api::Call::OutputRing;
  void start_output();
  void poll_output();
  static void output_at_exit();
  bool output_started_ = false;
  api::OutputRingHeader* output_ring_ = nullptr;  // nullptr: none (the host keeps the output)
  vmrpc::wire::HeapRef output_ref_{};
  uint64_t output_read_ = 0;
  uint64_t output_dropped_ = 0;

  // Opens the slot through /dev/vmcudaN (`device`) or the socket `socket`; false (and the
  // reason logged, `*error` set) when it cannot.
  bool open_device(const std::string& device, bool explicit_choice, cudaError_t* error);
  bool open_socket(const std::string& socket, bool explicit_choice, cudaError_t* error);

  std::mutex mu_;
  // The transport (vmrpc::DriverDevice or vmrpc::LocalConnection): it must outlive slot_
  // (declared first, destroyed last; a DriverDevice releases the slot when destroyed).
  std::unique_ptr<vmrpc::GuestDoorbell> transport_;
  std::unique_ptr<vmrpc::ClientSlot> slot_;
  api::HandshakeReply handshake_{};
  std::vector<api::DevicePropertiesReply> devices_;
  struct Queued {
    vmrpc::FrameRef frame;
    uint32_t call;
  };
  std::vector<Queued> queued_;         // in the stack's batch
  std::vector<Queued> in_flight_queued_;  // in the batch the host is running
  std::vector<Queued> spill_queued_;     // in spill_batch_
  std::vector<std::byte> spill_;
  std::optional<vmrpc::BatchWriter> spill_batch_;
  bool in_flight_ = false;
  cudaError_t deferred_ = cudaSuccess;
  int host_device_ = 0;  // the device the host runs this client's calls on

  template <api::Call C>
  void sync_device() {
    if constexpr ((api::CallTraits<C>::kFlags & api::kNoContext) == 0) {
      if (thread_device() != host_device_) {
        host_device_ = thread_device();
        enqueue<api::Call::SetDevice>({host_device_, 0});
      }
    }
  }
};

// ---------------------------------------------------------------- templates

template <api::Call C>
cudaError_t Remote::enqueue(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail) {
  static_assert(api::CallTraits<C>::kBatchable, "only batchable calls may be queued");
  sync_device<C>();
  using A = typename api::CallTraits<C>::Args;
  constexpr size_t kA = std::is_empty_v<A> ? 0 : sizeof(A);
  auto f = queue_batch().append(static_cast<uint32_t>(C), static_cast<uint32_t>(kA + tail.size()), 0);
  if (!f) {
    submit_queue();
    f = queue_batch().append(static_cast<uint32_t>(C), static_cast<uint32_t>(kA + tail.size()), 0);
    if (!f) return cudaErrorInvalidValue;  // larger than a whole RPC stack: callers split big data
  }
  auto& batch = queue_batch();
  if constexpr (kA != 0) std::memcpy(batch.args(*f), &args, kA);
  if (!tail.empty()) std::memcpy(batch.args(*f) + kA, tail.data(), tail.size());
  (in_flight_ ? spill_queued_ : queued_).push_back({*f, static_cast<uint32_t>(C)});
  return cudaSuccess;
}

template <api::Call C>
api::RemoteResult<C> Remote::call(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail,
                                  uint32_t extra_capacity) {
  if constexpr (kOutputHooks<C>)
    if (!output_started_) start_output();
  auto r = exchange<C>(args, tail, extra_capacity);
  if (r.status == 0) r.status = take_deferred();
  // Even after an error: the output of kernels before a fault is shown natively too.
  if constexpr (kOutputHooks<C>)
    if (output_ring_) poll_output();
  return r;
}

template <api::Call C>
api::RemoteResult<C> Remote::exchange(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail,
                                      uint32_t extra_capacity) {
  sync_device<C>();
  using A = typename api::CallTraits<C>::Args;
  using R = typename api::CallTraits<C>::Reply;
  constexpr size_t kA = std::is_empty_v<A> ? 0 : sizeof(A);
  constexpr size_t kR = std::is_empty_v<R> ? 0 : sizeof(R);
  settle();
  // The queued frames' replies must be read before another batch reuses the stack.
  if (!slot_->batch().fits(static_cast<uint32_t>(kA + tail.size()), static_cast<uint32_t>(kR + extra_capacity)))
    send_queue();
  auto r = api::remote<C>(*slot_, args, tail, extra_capacity);
  collect_queued();
  if (r.status < 0) r.status = to_cuda_error(r.status, api::CallTraits<C>::kName);
  return r;
}

}  // namespace vmcuda::guest
