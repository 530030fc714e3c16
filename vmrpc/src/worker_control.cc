#include "vmrpc/worker_control.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace vmrpc::worker_control {

bool send(int fd, Op op, std::span<const std::byte> payload) {
  if (payload.size() + 1 > kMaxMessage) payload = payload.first(kMaxMessage - 1);
  std::vector<std::byte> msg(payload.size() + 1);
  msg[0] = static_cast<std::byte>(op);
  if (!payload.empty()) std::memcpy(msg.data() + 1, payload.data(), payload.size());
  ssize_t n;
  do n = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(msg.size());
}

bool receive(int fd, Op* op, std::vector<std::byte>* payload, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  std::vector<std::byte> buf(kMaxMessage);
  ssize_t n;
  do n = ::recv(fd, buf.data(), buf.size(), 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  *op = static_cast<Op>(buf[0]);
  payload->assign(buf.begin() + 1, buf.begin() + n);
  return true;
}

namespace {
std::span<const std::byte> text(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
}  // namespace

void serve(int fd, SlotGate& gate, std::shared_ptr<SlotService> svc) {
  Op op;
  std::vector<std::byte> payload;
  while (receive(fd, &op, &payload, -1)) {
    switch (op) {
      case Op::kHold: {
        uint64_t ms = 0;
        if (payload.size() == sizeof ms) std::memcpy(&ms, payload.data(), sizeof ms);
        if (gate.hold(std::chrono::milliseconds(ms)))
          send(fd, Op::kReply, {});
        else
          send(fd, Op::kFailed, text("the client did not reach a call boundary in " + std::to_string(ms) + " ms"));
        break;
      }
      case Op::kRelease:
        gate.release();
        send(fd, Op::kReply, {});
        break;
      case Op::kControl: {
        if (!svc) {
          send(fd, Op::kFailed, text("the slot has no service"));
          break;
        }
        std::vector<std::byte> reply;
        const auto progress = [&](std::span<const std::byte> m) { send(fd, Op::kProgress, m); };
        // No time limit once it runs: a long suspend is waited for.
        SlotService* s = svc.get();
        if (gate.run([&] { reply = s->control(payload, progress); }, std::chrono::hours(24)))
          send(fd, Op::kReply, reply);
        else
          send(fd, Op::kFailed, text("the slot ended"));
        break;
      }
      case Op::kSnapshot:
        send(fd, Op::kReply, svc ? svc->snapshot() : std::vector<std::byte>{});
        break;
      default:
        send(fd, Op::kFailed, text("unknown control request"));
    }
  }
}

}  // namespace vmrpc::worker_control
