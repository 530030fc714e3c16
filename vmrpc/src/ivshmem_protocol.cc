#include "vmrpc/ivshmem_protocol.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>

namespace vmrpc::ivshmem {
namespace {
sockaddr_un make_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    throw std::runtime_error("socket path too long (max " + std::to_string(sizeof a.sun_path - 1) + "): " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}
}  // namespace

void send_message(int sock, int64_t value, int fd) {
  msghdr msg{};
  iovec iov{&value, sizeof value};  // x86-64 and arm64 are little-endian, as the protocol
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(sizeof value)) return;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("ivshmem: sendmsg to client");
    throw std::runtime_error("ivshmem: short sendmsg to client");
  }
}

bool receive_message(int sock, int64_t& value, UniqueFd& fd) {
  fd.reset();
  msghdr msg{};
  iovec iov{&value, sizeof value};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  while (n < 0 && errno == EINTR);
  if (n == 0) return false;
  if (n < 0) throw_errno("ivshmem: recvmsg from server");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int got;
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
      fd.reset(got);
    }
  }
  if (n != static_cast<ssize_t>(sizeof value)) throw std::runtime_error("ivshmem: truncated message from server");
  return true;
}

UniqueFd connect_unix(const std::string& path) {
  sockaddr_un a = make_addr(path);
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) throw_errno("socket(AF_UNIX)");
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0)
    throw_errno("connect " + path + " (is vmcuda-stub running and serving this socket?)");
  return s;
}

}  // namespace vmrpc::ivshmem
