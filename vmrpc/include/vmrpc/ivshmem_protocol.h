// QEMU's ivshmem-server protocol on a UNIX socket (docs/specs/ivshmem-spec.rst):
// one-way, server to client, each message an 8-byte little-endian signed integer,
// some carrying one fd (SCM_RIGHTS). See ../shared/docs/ivshmem.md.
#pragma once

#include <cstdint>
#include <string>

#include "vmrpc/fd.h"

namespace vmrpc::ivshmem {

inline constexpr int64_t kProtocolVersion = 0;
inline constexpr int64_t kSharedMemoryId = -1;  // sent with the shared memory fd

// Sends one message (with `fd` attached when >= 0). Throws on failure.
void send_message(int sock, int64_t value, int fd = -1);

// Receives one message; `fd` is reset to the attached fd, if any. Returns false on EOF.
// Throws on a socket error or a truncated message.
bool receive_message(int sock, int64_t& value, UniqueFd& fd);

// A connection to the UNIX socket at `path` (listening sockets: unix_socket.h).
UniqueFd connect_unix(const std::string& path);

}  // namespace vmrpc::ivshmem
