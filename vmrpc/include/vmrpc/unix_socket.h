// Listening UNIX sockets that only the intended peers can ever reach, and a client-side
// check of who serves a socket. One implementation for the stub's VM sockets and its
// control socket: never the umask, never a window before the mode and group are set,
// never a live server's socket taken over.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "vmrpc/fd.h"

namespace vmrpc {

struct SocketAccess {
  mode_t mode = 0660;            // the socket file's permission bits
  std::optional<uid_t> owner;    // chown to this user (needs root); none: this process's
  std::optional<gid_t> group;    // chgrp to this group (root, or a member); none: this process's
};

struct ListeningSocket {
  UniqueFd fd;
  dev_t dev = 0;  // the socket file's identity, so that only it is ever removed
  ino_t ino = 0;
};

// Binds `path` and listens. The socket is bound inside a fresh 0700 directory beside the
// path, given its mode, owner and group, made to listen and only then renamed into place:
// nobody can connect before its permissions are right. A socket at `path` that a live
// process serves is never replaced (the error names its pid); a stale one (ECONNREFUSED)
// is. `what` names the socket in errors ("VM socket", "control socket").
ListeningSocket listen_unix_secure(const std::string& path, const SocketAccess& access, int backlog,
                                   const char* what);

// Removes `path` if it is still the socket `created` made (a successor may have renamed
// its own over it), or, with no identity known (a socket adopted from a predecessor), if
// nobody listens on it any more. Call after closing the listening fd.
void remove_socket_if_ours(const std::string& path, dev_t dev, ino_t ino);

// A user or group by name or number; errors say what to create or give.
uid_t resolve_user(const std::string& name_or_uid, const char* what);
gid_t resolve_group(const std::string& name_or_gid, const char* what);
// The group's gid if it exists (for defaults that apply only where it was installed).
std::optional<gid_t> find_group(const std::string& name);
std::optional<uid_t> find_user(const std::string& name);

}  // namespace vmrpc
