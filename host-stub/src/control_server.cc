// The stub's control socket (control_server.h): creation without a window in which anyone
// else could connect, peer admission, and the newline-delimited JSON request loop.
#include "control_server.h"

#include "vmrpc/unix_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59  // Linux 4.13; older libc headers lack the name
#endif

namespace vmcuda::host {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return std::strerror(err); }

// Handlers' messages and phases may hold any bytes: never let dump() throw on bad UTF-8.
std::string to_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

json error_reply(const std::string& message) { return json{{"ok", false}, {"error", message}}; }

// Blocking send of a whole line (the socket has SO_SNDTIMEO); false once the peer is gone.
bool send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// For refusals from the accept thread: one small line into an empty buffer, never waiting.
void send_refusal(int fd, const std::string& message) {
  std::string line = to_line(error_reply(message));
  (void)!::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path)
    throw std::runtime_error("control socket path " + path + " is longer than " +
                             std::to_string(sizeof address.sun_path - 1) + " bytes; choose a shorter one");
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

std::string strip_json_exception_prefix(const char* what) {
  // "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
  std::string_view text = what;
  if (text.starts_with("[json.exception.")) {
    size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return std::string(text);
}

class ConnectionProgress final : public Progress {
 public:
  explicit ConnectionProgress(int fd) : fd_(fd) {}

  void report(uint64_t done_bytes, uint64_t total_bytes, std::string_view phase) override {
    std::lock_guard lock(mutex_);
    if (broken_) return;
    const auto now = Clock::now();
    const bool phase_changed = !sent_any_ || phase != last_phase_;
    const bool finished = done_bytes >= total_bytes && done_bytes != last_done_;
    if (!phase_changed && !finished && now - last_sent_ < std::chrono::milliseconds(100)) return;
    json line = {{"progress", {{"phase", phase}, {"done", done_bytes}, {"total", total_bytes}}}};
    if (!send_all(fd_, to_line(line))) broken_ = true;  // the operation goes on without a watcher
    sent_any_ = true;
    last_sent_ = now;
    last_phase_ = phase;
    last_done_ = done_bytes;
  }

 private:
  std::mutex mutex_;  // a handler may report from its own worker threads
  int fd_;
  bool broken_ = false;
  bool sent_any_ = false;
  Clock::time_point last_sent_{};
  std::string last_phase_;
  uint64_t last_done_ = ~uint64_t{0};
};

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

std::string describe_peer(const PeerCredentials& peer) {
  return "uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ")";
}

}  // namespace

struct ControlServer::Connection {
  vmrpc::UniqueFd fd;
  PeerCredentials peer;
  std::thread thread;
  std::atomic<bool> finished{false};
};

bool control_peer_allowed(const PeerCredentials& peer, uid_t own_uid, std::optional<gid_t> group,
                          const std::vector<uid_t>& allowed_uids) {
  if (peer.uid == 0 || peer.uid == own_uid) return true;
  if (std::find(allowed_uids.begin(), allowed_uids.end(), peer.uid) != allowed_uids.end()) return true;
  if (!group) return false;
  if (peer.gid == *group) return true;
  return std::find(peer.groups.begin(), peer.groups.end(), *group) != peer.groups.end();
}

std::optional<std::vector<gid_t>> parse_proc_status_groups(std::string_view status_text) {
  std::istringstream in{std::string(status_text)};
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("Groups:")) continue;
    std::vector<gid_t> groups;
    std::istringstream fields(line.substr(7));
    for (std::string field; fields >> field;) {
      gid_t gid = 0;
      auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), gid);
      if (ec != std::errc{} || end != field.data() + field.size()) return std::nullopt;
      groups.push_back(gid);
    }
    return groups;
  }
  return std::nullopt;
}

ControlServer::ControlServer(ControlServerOptions options) : options_(std::move(options)), own_uid_(::geteuid()) {
  if (options_.socket_path.empty()) throw std::runtime_error("no control socket path given");
  if (options_.mode & ~07777u) throw std::runtime_error("control socket mode has bits outside 07777");
  if (options_.max_connections == 0) options_.max_connections = 1;
  if (options_.group) group_ = vmrpc::resolve_group(*options_.group, "control socket");
  (void)unix_address(options_.socket_path);  // too long a path fails here, before anything exists
}

ControlServer::~ControlServer() {
  stop();
  // Only our own socket: a successor may already have renamed its socket over the path.
  if (created_) vmrpc::remove_socket_if_ours(options_.socket_path, created_dev_, created_ino_);
}

void ControlServer::on(const std::string& op, Handler handler) {
  std::lock_guard lock(handlers_mutex_);
  handlers_[op] = std::move(handler);
}

void ControlServer::start() {
  std::lock_guard lifecycle(lifecycle_mutex_);
  if (listen_fd_ || stopping_) throw std::logic_error("ControlServer::start called twice");
  const std::string& path = options_.socket_path;
  vmrpc::SocketAccess access;
  access.mode = options_.mode;
  access.group = group_;
  vmrpc::ListeningSocket listener = vmrpc::listen_unix_secure(path, access, 64, "control socket");
  created_ = true;
  created_dev_ = listener.dev;
  created_ino_ = listener.ino;

  vmrpc::UniqueFd stop_event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_event) throw std::runtime_error("eventfd: " + errno_text(errno));
  listen_fd_ = std::move(listener.fd);
  stop_event_ = std::move(stop_event);
  accept_thread_ = std::thread([this] { accept_loop(); });
}

void ControlServer::stop() {
  std::lock_guard lifecycle(lifecycle_mutex_);
  stopping_ = true;
  if (stop_event_) {
    uint64_t one = 1;
    (void)!::write(stop_event_.get(), &one, sizeof one);  // stays readable: wakes every poller
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Connection>> connections;
  {
    std::lock_guard lock(connections_mutex_);
    connections.swap(connections_);
  }
  for (auto& connection : connections)
    if (connection->thread.joinable()) connection->thread.join();
  listen_fd_.reset();
}

void ControlServer::reap_finished_connections() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(connections_mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if ((*it)->finished) finished.splice(finished.end(), connections_, it);
      it = next;
    }
  }
  for (auto& connection : finished)
    if (connection->thread.joinable()) connection->thread.join();
}

bool ControlServer::peer_allowed(int fd, PeerCredentials& peer) const {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) < 0) return false;
  peer.pid = credentials.pid;
  peer.uid = credentials.uid;
  peer.gid = credentials.gid;
  if (control_peer_allowed(peer, own_uid_, std::nullopt, options_.allowed_uids)) return true;
  if (!group_) return false;
  // Supplementary groups as they were at connect time (SO_PEERGROUPS); else from /proc,
  // checking that the pid still belongs to the same uid.
  std::vector<gid_t> groups(64);
  socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  int result = ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes);
  if (result < 0 && errno == ERANGE) {
    groups.resize(bytes / sizeof(gid_t));
    result = ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes);
  }
  if (result == 0) {
    groups.resize(bytes / sizeof(gid_t));
    peer.groups = std::move(groups);
  } else {
    std::ifstream status("/proc/" + std::to_string(peer.pid) + "/status");
    std::stringstream text;
    text << status.rdbuf();
    const std::string content = text.str();
    const std::string uid_prefix = "\nUid:\t" + std::to_string(peer.uid) + "\t";
    if (content.find(uid_prefix) == std::string::npos) return false;  // gone, or another process now
    if (auto parsed = parse_proc_status_groups(content)) peer.groups = std::move(*parsed);
  }
  return control_peer_allowed(peer, own_uid_, group_, options_.allowed_uids);
}

void ControlServer::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {stop_event_.get(), POLLIN, 0}};
    int ready = ::poll(fds, 2, 1000);
    reap_finished_connections();
    if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "vmcuda-stub: control socket %s: poll: %s\n", options_.socket_path.c_str(),
                   errno_text(errno).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (ready <= 0 || (fds[1].revents & POLLIN)) continue;
    if (!(fds[0].revents & POLLIN)) continue;
    vmrpc::UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EMFILE || errno == ENFILE) {  // out of fds: don't spin on a readable listener
        std::fprintf(stderr, "vmcuda-stub: control socket %s: accept: %s\n", options_.socket_path.c_str(),
                     errno_text(errno).c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    PeerCredentials peer;
    if (!peer_allowed(fd.get(), peer)) {
      send_refusal(fd.get(), describe_peer(peer) + " may not use this control socket; run vmcudactl as root" +
                                 (options_.group ? " or as a member of group " + *options_.group : std::string()));
      continue;
    }
    if (active_connections_ >= options_.max_connections) {
      send_refusal(fd.get(), "too many control connections (" + std::to_string(options_.max_connections) +
                                 ") at once; try again when one has finished");
      continue;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = std::move(fd);
    connection->peer = peer;
    Connection* raw = connection.get();
    ++active_connections_;
    try {
      raw->thread = std::thread([this, raw] {
        serve(*raw);
        raw->fd.reset();  // the client sees EOF now, not at reaping
        --active_connections_;
        raw->finished = true;
      });
    } catch (const std::system_error& e) {
      --active_connections_;
      send_refusal(raw->fd.get(), std::string("the stub cannot start a thread for this connection: ") + e.what());
      continue;
    }
    std::lock_guard lock(connections_mutex_);
    connections_.push_back(std::move(connection));
  }
}

void ControlServer::serve(Connection& connection) {
  const int fd = connection.fd.get();
  timeval send_timeout{};
  send_timeout.tv_sec = options_.write_timeout.count() / 1000;
  send_timeout.tv_usec = (options_.write_timeout.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);

  ConnectionProgress progress(fd);
  std::string pending;
  auto deadline = Clock::now() + options_.read_timeout;
  bool peer_closed = false;
  for (;;) {
    size_t newline = pending.find('\n');
    if (newline == std::string::npos && peer_closed && !pending.empty()) newline = pending.size();  // last line
    if (newline != std::string::npos) {
      if (newline > options_.max_line_bytes) break;  // the size check below replies
      std::string line = pending.substr(0, newline);
      pending.erase(0, std::min(newline + 1, pending.size()));
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (!send_all(fd, to_line(handle_line(line, progress)))) return;
      deadline = Clock::now() + options_.read_timeout;
      continue;
    }
    if (peer_closed || stopping_) return;
    if (pending.size() > options_.max_line_bytes) break;

    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      send_all(fd, to_line(error_reply("no request within " + seconds_text(options_.read_timeout) +
                                       "; closing the connection")));
      return;
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_event_.get(), POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) return;
    if (ready <= 0) continue;
    if (fds[1].revents & POLLIN) return;
    char buffer[4096];
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    if (n == 0) {
      peer_closed = true;
      continue;
    }
    pending.append(buffer, static_cast<size_t>(n));
  }
  // A line over the limit: no way to find the next request reliably, so close.
  send_all(fd, to_line(error_reply("request line longer than " + std::to_string(options_.max_line_bytes) +
                                   " bytes; closing the connection")));
  // Closing with unread input would reset the connection, and the client could lose the
  // reply: read and drop what the client still sends, for a moment.
  ::shutdown(fd, SHUT_WR);
  const auto drain_until = Clock::now() + std::chrono::milliseconds(500);
  for (size_t drained = 0; drained < (4u << 20) && Clock::now() < drain_until;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_event_.get(), POLLIN, 0}};
    const int ready = ::poll(fds, 2, 100);
    if ((ready < 0 && errno != EINTR) || (fds[1].revents & POLLIN)) break;
    if (ready <= 0) continue;
    char buffer[4096];
    ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
    if (n > 0) drained += static_cast<size_t>(n);
  }
}

nlohmann::json ControlServer::handle_line(std::string_view line, Progress& progress) {
  json request;
  try {
    request = json::parse(line);
  } catch (const json::exception& e) {
    return error_reply("malformed request, expected one JSON object per line such as {\"op\":\"status\"}: " +
                       strip_json_exception_prefix(e.what()));
  }
  if (!request.is_object() || !request.contains("op") || !request["op"].is_string())
    return error_reply("request has no \"op\" string; expected one JSON object per line such as {\"op\":\"status\"}");
  const std::string op = request["op"].get<std::string>();

  Handler handler;
  std::string known;
  {
    std::lock_guard lock(handlers_mutex_);
    if (auto it = handlers_.find(op); it != handlers_.end()) handler = it->second;
    for (const auto& [name, unused] : handlers_) known += (known.empty() ? "" : ", ") + name;
  }
  if (!handler) return error_reply("unknown op \"" + op + "\"; this stub knows: " + (known.empty() ? "none" : known));

  try {
    return json{{"ok", true}, {"result", handler(request, progress)}};
  } catch (const std::exception& e) {
    std::string message = e.what();
    return error_reply(message.empty() ? op + " failed" : message);
  } catch (...) {
    return error_reply(op + " failed with an unexpected error in the stub; see its log (journalctl)");
  }
}

}  // namespace vmcuda::host
