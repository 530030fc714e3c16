#include "vmrpc/unix_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace vmrpc {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

sockaddr_un unix_address(const std::string& path, const char* what) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty()) throw std::runtime_error(std::string("no ") + what + " path given");
  if (path.size() >= sizeof address.sun_path)
    throw std::runtime_error(std::string(what) + " path " + path + " is longer than " +
                             std::to_string(sizeof address.sun_path - 1) + " bytes; choose a shorter one");
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Removes the private directory the socket is bound in, whatever happens.
struct TemporaryDirectory {
  std::string path;
  std::string socket;
  ~TemporaryDirectory() {
    if (!socket.empty()) ::unlink(socket.c_str());
    if (!path.empty()) ::rmdir(path.c_str());
  }
};

template <typename Id>
bool parse_id(const std::string& text, Id* id) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *id);
  return ec == std::errc{} && end == text.data() + text.size();
}

// getpwnam_r / getgrnam_r with a growing buffer: nullopt when there is no such entry.
template <typename Entry, typename Lookup>
std::optional<Entry> look_up(const std::string& name, Lookup lookup, const char* kind) {
  std::vector<char> buffer(4096);
  for (;;) {
    Entry entry{};
    Entry* found = nullptr;
    const int err = lookup(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (err == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (err != 0) throw std::runtime_error(std::string("cannot look up ") + kind + " '" + name + "': " + errno_text(err));
    if (!found) return std::nullopt;
    return entry;
  }
}

}  // namespace

std::optional<gid_t> find_group(const std::string& name) {
  auto g = look_up<group>(name, ::getgrnam_r, "group");
  return g ? std::optional<gid_t>(g->gr_gid) : std::nullopt;
}

std::optional<uid_t> find_user(const std::string& name) {
  auto u = look_up<passwd>(name, ::getpwnam_r, "user");
  return u ? std::optional<uid_t>(u->pw_uid) : std::nullopt;
}

gid_t resolve_group(const std::string& name_or_gid, const char* what) {
  if (name_or_gid.empty()) throw std::runtime_error(std::string(what) + " group is empty; give a group name or gid");
  gid_t gid = 0;
  if (parse_id(name_or_gid, &gid)) return gid;
  if (auto found = find_group(name_or_gid)) return *found;
  throw std::runtime_error("group '" + name_or_gid + "' (for the " + what +
                           ") does not exist; create it (groupadd) or give a gid");
}

uid_t resolve_user(const std::string& name_or_uid, const char* what) {
  if (name_or_uid.empty()) throw std::runtime_error(std::string(what) + " owner is empty; give a user name or uid");
  uid_t uid = 0;
  if (parse_id(name_or_uid, &uid)) return uid;
  if (auto found = find_user(name_or_uid)) return *found;
  throw std::runtime_error("user '" + name_or_uid + "' (for the " + what +
                           ") does not exist; create it (useradd) or give a uid");
}

ListeningSocket listen_unix_secure(const std::string& path, const SocketAccess& access, int backlog,
                                   const char* what) {
  if (access.mode & ~07777u) throw std::runtime_error(std::string(what) + " mode has bits outside 07777");
  const sockaddr_un final_address = unix_address(path, what);
  const size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (path.back() == '/') throw std::runtime_error(std::string(what) + " path " + path + " names a directory");

  UniqueFd directory_fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!directory_fd)
    throw std::runtime_error("cannot open " + directory + ", the " + what + "'s directory: " + errno_text(errno) +
                             "; create it (the systemd unit does: RuntimeDirectory=vmcuda)");
  // Two stubs starting at once on one path: the second waits here, then finds the first live.
  // Released when directory_fd closes.
  if (::flock(directory_fd.get(), LOCK_EX) < 0)
    throw std::runtime_error("cannot lock " + directory + ": " + errno_text(errno));

  struct stat existing{};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode))
      throw std::runtime_error(path + " exists and is not a socket; not removing it: move it away or choose "
                               "another " + what + " path");
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) throw std::runtime_error("socket(AF_UNIX): " + errno_text(errno));
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&final_address), sizeof final_address) == 0) {
      ucred credentials{};
      socklen_t length = sizeof credentials;
      const std::string pid = ::getsockopt(probe.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0
                                  ? std::to_string(credentials.pid)
                                  : "unknown";
      throw std::runtime_error("another vmcuda-stub serves " + path + " (pid " + pid + "); stop it first or choose "
                               "another " + what + " path");
    }
    const int err = errno;
    if (err == EAGAIN)
      throw std::runtime_error("another process listens on " + path + " (its connection queue is full); stop it first");
    if (err != ECONNREFUSED && err != ENOENT)
      throw std::runtime_error("cannot tell whether " + path + " is in use: connect: " + errno_text(err));
    // ECONNREFUSED: nobody listens, a stale socket from a stub that died; the rename replaces it.
  }

  // Not a umask change: the umask is per process, and the stub has threads.
  TemporaryDirectory temporary;
  std::string pattern = directory + "/.vmcuda-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("cannot create a temporary directory in " + directory + ": " + errno_text(errno));
  temporary.path = pattern;
  const std::string temporary_socket = temporary.path + "/s";
  const sockaddr_un temporary_address = unix_address(temporary_socket, what);

  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) throw std::runtime_error("socket(AF_UNIX): " + errno_text(errno));
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&temporary_address), sizeof temporary_address) < 0)
    throw std::runtime_error("cannot bind a socket in " + temporary.path + ": " + errno_text(errno));
  temporary.socket = temporary_socket;
  if (::chmod(temporary_socket.c_str(), access.mode) < 0)
    throw std::runtime_error(std::string("cannot set the mode of the ") + what + ": " + errno_text(errno));
  if ((access.owner || access.group) &&
      ::chown(temporary_socket.c_str(), access.owner ? *access.owner : static_cast<uid_t>(-1),
              access.group ? *access.group : static_cast<gid_t>(-1)) < 0)
    throw std::runtime_error(std::string("cannot give the ") + what + " to " +
                             (access.owner ? "uid " + std::to_string(*access.owner) + " " : std::string()) +
                             (access.group ? "gid " + std::to_string(*access.group) : std::string()) + ": " +
                             errno_text(errno) + " (the stub must be root, or a member of that group)");
  if (::listen(listener.get(), backlog) < 0)
    throw std::runtime_error(std::string("listen on the ") + what + ": " + errno_text(errno));
  struct stat created{};
  if (::lstat(temporary_socket.c_str(), &created) < 0)
    throw std::runtime_error("stat " + temporary_socket + ": " + errno_text(errno));
  if (::rename(temporary_socket.c_str(), path.c_str()) < 0)
    throw std::runtime_error(std::string("cannot move the ") + what + " to " + path + ": " + errno_text(errno));
  temporary.socket.clear();  // renamed away; the directory is removed empty
  return ListeningSocket{std::move(listener), created.st_dev, created.st_ino};
}

void remove_socket_if_ours(const std::string& path, dev_t dev, ino_t ino) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  if (ino != 0) {
    if (st.st_dev == dev && st.st_ino == ino) ::unlink(path.c_str());
    return;
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) return;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (probe && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0 &&
      errno == ECONNREFUSED)
    ::unlink(path.c_str());
}

}  // namespace vmrpc
