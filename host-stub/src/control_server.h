// The control channel between an administrator (vmcudactl) and one running vmcuda-stub.
//
// Transport: a UNIX stream socket per stub, e.g. /run/vmcuda/<vm>.ctl next to the VM's
// socket. Only uid 0, the stub's own uid, ControlServerOptions::allowed_uids and members
// of ControlServerOptions::group (primary or supplementary) may talk to it.
//
// Protocol: newline-delimited JSON (UTF-8), one request object per line, at most
// kMaxControlLineBytes a line; several requests on one connection are served in order.
//   client -> stub   {"op":"status"}
//                    {"op":"suspend"}   {"op":"resume"}   {"op":"upgrade"}
//                    {"op":"save","file":"/absolute/path"}
//                    {"op":"restore","file":"/absolute/path"}
//   stub -> client   zero or more progress lines, then exactly one reply line:
//                    {"progress":{"phase":"saving device memory","done":1048576,"total":4194304}}
//                    {"ok":true,"result":<what the op's handler returned; null if nothing>}
//                    {"ok":false,"error":"<what went wrong and what to do>"}
// Malformed JSON, a request without a string "op", an unknown op or a handler that throws
// get an ok:false reply and the connection stays open. An oversized line, an idle
// connection (no request within read_timeout), a peer that is not allowed and a connection
// over max_connections get one ok:false line and are closed.
// A client that disconnects does not cancel an operation that has started.
//
// The "status" result (filled by the stub, shown by `vmcudactl status`):
//   {"vm":"vm1", "state":"running"|"suspended"|"suspending"|"resuming"|...,
//    "pid":1234, "clients":2, "device_memory_bytes":1073741824,
//    "gpus":["0: NVIDIA H100 80GB HBM3", ...]}   (extra fields are shown by --json only)
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "vmrpc/fd.h"

namespace vmcuda::host {

inline constexpr size_t kMaxControlLineBytes = 64 * 1024;

struct ControlServerOptions {
  std::string socket_path;                 // e.g. /run/vmcuda/vm1.ctl; its directory must exist
  mode_t mode = 0660;                      // the socket's permission bits
  std::optional<std::string> group;        // the socket's group and the peers it admits: name or gid
  std::vector<uid_t> allowed_uids;         // admitted besides uid 0 and the stub's own uid
  size_t max_connections = 16;             // connections served at once; more are refused
  std::chrono::milliseconds read_timeout{30000};  // an idle connection is closed after this
  std::chrono::milliseconds write_timeout{10000}; // a client that stops reading is dropped
  size_t max_line_bytes = kMaxControlLineBytes;
};

// Who is on the other end of a connection (SO_PEERCRED, plus supplementary groups).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
};

// The admission rule, pure: uid 0, `own_uid`, any of `allowed_uids`, or a peer whose primary
// or supplementary group is `group`.
bool control_peer_allowed(const PeerCredentials& peer, uid_t own_uid, std::optional<gid_t> group,
                          const std::vector<uid_t>& allowed_uids);

// The gids on the "Groups:" line of a /proc/<pid>/status text; nullopt if there is none.
std::optional<std::vector<gid_t>> parse_proc_status_groups(std::string_view status_text);

// Handed to a handler: sends progress lines to the client while the operation runs.
class Progress {
 public:
  virtual ~Progress() = default;
  // Rate-limited to ~10 lines a second; a change of phase and done == total always go out.
  // Never throws: a client that went away just stops getting them.
  virtual void report(uint64_t done_bytes, uint64_t total_bytes, std::string_view phase) = 0;
};

class ControlServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request, Progress& progress)>;

  // Checks the options (resolves the group); creates nothing until start().
  explicit ControlServer(ControlServerOptions options);
  // Stops, and removes the socket if the path still is the one this server created.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Registers (or replaces) the handler of `op`; allowed before and after start().
  // Handlers run on connection threads, possibly several at once: they do their own locking.
  void on(const std::string& op, Handler handler);

  // Creates the socket (temporary name in a private directory beside it, mode and group
  // set, renamed over the path) and starts serving. Throws std::runtime_error with a
  // message for the user: another live stub serves the path, the path is not a socket, ...
  void start();
  // Stops accepting, wakes idle connections, waits for running handlers to return and
  // joins every thread. Idempotent.
  void stop();

  const std::string& socket_path() const { return options_.socket_path; }
  size_t active_connections() const { return active_connections_.load(); }

 private:
  struct Connection;
  void accept_loop();
  void serve(Connection& connection);
  void reap_finished_connections();
  nlohmann::json handle_line(std::string_view line, Progress& progress);
  bool peer_allowed(int fd, PeerCredentials& peer) const;

  ControlServerOptions options_;
  std::optional<gid_t> group_;
  uid_t own_uid_;
  vmrpc::UniqueFd listen_fd_;
  vmrpc::UniqueFd stop_event_;  // eventfd: readable once stop() begins
  dev_t created_dev_ = 0;       // identity of the socket file we created, so that the
  ino_t created_ino_ = 0;       // destructor never unlinks a successor's socket
  bool created_ = false;

  std::mutex handlers_mutex_;
  std::map<std::string, Handler, std::less<>> handlers_;

  std::mutex connections_mutex_;
  std::list<std::unique_ptr<Connection>> connections_;
  std::atomic<size_t> active_connections_{0};
  std::atomic<bool> stopping_{false};
  std::mutex lifecycle_mutex_;  // start() and stop() from several threads
  std::thread accept_thread_;
};

}  // namespace vmcuda::host
