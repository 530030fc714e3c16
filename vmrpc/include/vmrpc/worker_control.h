// The control path between the endpoint and a worker process (worker.h kWorkerControlFd):
// one SOCK_SEQPACKET message per request and answer, so that message boundaries come from
// the kernel. The endpoint sends one request at a time and reads interim kProgress messages
// until the kReply or kFailed that ends it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vmrpc/service.h"
#include "vmrpc/slot_gate.h"

namespace vmrpc::worker_control {

enum class Op : uint8_t {
  kHold = 1,   // payload: u64 timeout in ms; answer kReply (empty) or kFailed
  kRelease,    // answer kReply
  kControl,    // payload: the SlotService::control request; answer kProgress*, then kReply or kFailed
  kProgress,   // payload: a progress message
  kReply,      // payload: the answer
  kFailed,     // payload: why (text)
  kSnapshot,   // answer kReply with SlotService::snapshot(), at once (no call boundary)
};
inline constexpr size_t kMaxMessage = 192u << 10;  // below the default socket buffer

bool send(int fd, Op op, std::span<const std::byte> payload);
// One message; false on end of file, an error, or `timeout_ms` (< 0: none) without one.
bool receive(int fd, Op* op, std::vector<std::byte>* payload, int timeout_ms);

// The worker's side: answers requests from `fd` with `gate` and `svc` until the endpoint
// closes its end (run on a thread of its own).
void serve(int fd, SlotGate& gate, std::shared_ptr<SlotService> svc);

}  // namespace vmrpc::worker_control
