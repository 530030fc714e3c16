#include "vmrpc/host_endpoint.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "vmrpc/fd.h"
#include "vmrpc/frame_decoder.h"
#include "vmrpc/heap.h"
#include "vmrpc/ivshmem_protocol.h"
#include "vmrpc/knobs.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"
#include "vmrpc/slot_server.h"
#include "vmrpc/worker.h"
#include "vmrpc/worker_control.h"
#include <map>
#include <memory>

namespace vmrpc {

using wire::ChannelStatus;
using wire::SlotState;

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

UniqueFd make_eventfd() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
  if (!fd) throw_errno("eventfd");
  return fd;
}

void ring(int eventfd) {
  uint64_t one = 1;
  // EAGAIN only when the counter is saturated: the other side is awake anyway.
  [[maybe_unused]] ssize_t n = ::write(eventfd, &one, sizeof one);
}


}  // namespace

struct Connection;

// One io_uring operation in flight; lives as long as its owner.
struct Op {
  enum Kind { kAccept, kWake, kSocketPoll, kDoorbell, kWorkerExit, kTick } kind;
  Connection* conn = nullptr;
  uint32_t slot = 0;
  uint64_t buf = 0;
};

// What the control path reaches a served slot through (HostEndpoint::control_slot): the
// gate of its service thread (thread mode), or the control socket of its worker.
struct SlotControlHandle {
  ServedSlot info;
  std::shared_ptr<SlotGate> gate;  // thread mode
  SlotService* svc = nullptr;      // thread mode: set and cleared by the slot's service thread
  std::mutex svc_mu;               // guards svc against snapshots from other threads
  UniqueFd worker_fd;              // worker mode
  std::mutex worker_mu;            // one request at a time on the socket
};

// A connection handed over by the stub process before this one (exec in place, or a
// service manager's fd store).
struct HandedConnection {
  uint64_t id = 0;
  UniqueFd sock, memfd;
  std::vector<UniqueFd> host_rx, guest_rx;
};
struct Handover {
  UniqueFd listen;
  std::vector<HandedConnection> conns;
};

struct SlotRuntime {
  Op doorbell;                    // armed while no service thread or worker owns the eventfd
  std::thread thread;             // thread mode
  std::atomic<bool> stop{false};
  pid_t worker = -1;              // worker mode: the process serving the slot
  UniqueFd worker_pidfd;          // readable when it exits (polled by the loop)
  Op worker_exit;
  // When its program was first seen gone (the slot no longer claimed) while the worker
  // lives on; -1: killed for outliving it (check_worker_exits).
  int64_t program_left_ns = 0;
  // The region was replaced under the slot's service: it must leave the slot as it is.
  std::atomic<bool> region_replaced{false};
  // A slot of a restored region: what to do with it when its doorbell next completes
  // (adopt_restored_slot / lose_restored_slot ring it).
  enum Restore : int { kNone, kPending, kAdopt, kLose };
  std::atomic<int> restore{kNone};
  bool served() const { return thread.joinable() || worker > 0; }
};

struct Connection {
  uint64_t id = 0;
  uid_t uid = static_cast<uid_t>(-1);  // the peer's user (SO_PEERCRED) when it connected
  UniqueFd sock;
  UniqueFd memfd;
  Mapping map;
  RegionView view;
  std::vector<UniqueFd> host_rx;   // guest rings these (our peer's vectors)
  std::vector<UniqueFd> guest_rx;  // we ring these (the guest's vectors -> MSI-X)
  std::unique_ptr<SlotRuntime[]> slots;
  Op socket_poll;
  uint64_t image_token = 0;  // what we last wrote into the header (guarded by conns_mu_)
  // Its region was replaced by a saved image, whose clients are looked at once the VM runs.
  bool replaced = false;
  uint64_t replaced_token = 0;
  bool handed_over = false;  // replaced because a previous stub process handed it over
  int pending_ops = 0;
  bool dead = false;
  bool reaped = false;
  std::thread reaper;
};

class HostEndpoint::Impl {
 public:
  Impl(HostEndpointOptions o, Service& s) : opts_(std::move(o)), service_(s) {}

  void start();
  void stop();
  HostEndpointStats stats() const {
    std::lock_guard l(stats_mu_);
    return stats_;
  }
  const std::string& path() const { return opts_.socket_path; }

 private:
  struct Message {
    enum Kind { kSlotDone, kReaped } kind;
    Connection* conn;
    uint32_t slot;
  };

  void loop();
  void arm_accept();
  void arm_wake();
  void arm_socket_poll(Connection& c);
  void arm_doorbell(Connection& c, uint32_t slot);
  io_uring_sqe* sqe();
  void on_accept(int fd);
  void on_socket_event(Connection& c);
  void on_doorbell(Connection& c, uint32_t slot);
  bool start_worker(Connection& c, uint32_t slot, bool held);
  // Kills a worker that outlives its program by more than VMRPC_WORKER_EXIT_MS (a kernel
  // that never ends keeps its teardown in cuCtxSynchronize forever): its slot and GPU go back.
  void check_worker_exits(Connection& c);
  // Whether one more client may be served (HostEndpointOptions::max_clients); logs a refusal.
  bool admit_client(const Connection& c, uint32_t slot);
  // Whether a new connection of `uid` may be served (max_connections, the per-user count and
  // rate); logs a refusal (rate-limited, with a count). Counts it when admitted.
  bool admit_connection(uid_t uid);
  void count_user(Connection& c);    // a connection adopted or admitted: its user holds one more
  void uncount_user(Connection& c);
  void log_refusal(const std::string& what);
  void on_worker_exit(Connection& c, uint32_t slot);
  void end_worker(SlotRuntime& s);  // HostEndpointOptions::end_worker, or SIGKILL
  void on_messages();
  void teardown(Connection& c);
  void maybe_free(Connection* c);
  void post(Message m);
  void serve_slot(Connection* c, uint32_t slot, SlotControlHandle* control);
  void arm_tick();
  // After a slot's service ended: the loop watches its doorbell again. A restore decision
  // made meanwhile rang a doorbell the service may have swallowed: ring it once more.
  void watch_again(Connection& c, uint32_t slot) {
    if (c.replaced) {
      // A ring left over from stopping the service is not the VM's: drop it (the guest
      // library rings again while it waits).
      pollfd p{c.host_rx[slot].get(), POLLIN, 0};
      uint64_t v;
      if (::poll(&p, 1, 0) == 1) [[maybe_unused]] ssize_t n = ::read(p.fd, &v, sizeof v);
    }
    const int r = c.slots[slot].restore.load();
    if (r == SlotRuntime::kAdopt || r == SlotRuntime::kLose) ring(c.host_rx[slot].get());
    arm_doorbell(c, slot);
  }
  void check_region(Connection& c);
  void on_region_replaced(Connection& c, uint64_t token);
  void collect_restored(Connection& c);
  void adopt_handover(const std::string& description);
  void adopt_inherited(std::vector<NamedFd> fds);
  void listen_new();  // listen_ on opts_.socket_path (unix_socket.h)
  void adopt(Handover h);
  void store_fds(const Connection& c);
  void unstore_fds(const Connection& c);
  void restore_thread();

  HostEndpointOptions opts_;
  Service& service_;
  Layout layout_;
  io_uring ring_{};
  bool ring_ready_ = false;
  UniqueFd listen_;
  dev_t socket_dev_ = 0;  // the socket file listen_new() made; 0: adopted (unix_socket.h)
  ino_t socket_ino_ = 0;
  UniqueFd wake_;
  Op accept_op_{Op::kAccept};
  // stop_accepting(): requested by a control thread, done by the loop (accept cancelled, an
  // accept in progress finished with its handshake); resume_accepting() arms it again.
  std::atomic<bool> accept_pause_{false};
  bool accept_pause_seen_ = false;  // loop thread
  std::mutex pause_mu_;
  std::condition_variable pause_cv_;
  bool accept_quiet_ = false;  // guarded by pause_mu_
  void accept_stopped() {
    {
      std::lock_guard l(pause_mu_);
      accept_quiet_ = true;
    }
    pause_cv_.notify_all();
  }
  Op wake_op_{Op::kWake};
  bool accept_armed_ = false;
  Op tick_op_{Op::kTick};
  __kernel_timespec tick_ts_{};
  bool tick_armed_ = false;
  std::thread loop_thread_;
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;
  uint64_t epoch_ = 0;
  std::unordered_set<Connection*> conns_;

  std::mutex msg_mu_;
  std::deque<Message> messages_;

  // Restored regions waiting for on_region_restored, handled one at a time.
  std::mutex restore_mu_;
  std::condition_variable restore_cv_;
  std::deque<RestoredRegion> restores_;
  bool restore_stop_ = false;
  std::thread restore_thread_;

  // Served slots the control path may reach, by (connection, slot).
  mutable std::mutex control_mu_;
  std::map<std::pair<uint64_t, uint32_t>, std::shared_ptr<SlotControlHandle>> controls_;
  void add_control(std::shared_ptr<SlotControlHandle> h) {
    std::lock_guard l(control_mu_);
    controls_[{h->info.connection_id, h->info.slot}] = std::move(h);
  }
  void drop_control(uint64_t connection, uint32_t slot) {
    std::lock_guard l(control_mu_);
    controls_.erase({connection, slot});
  }

 public:
  std::atomic<bool> hold_new_{false};  // set_hold_new_slots
  // Held from reading hold_new_ to listing the new slot's control handle, and by
  // set_hold_new_slots: once that returns, a slot either is listed (the control side holds
  // it) or starts held. Without it a slot starting meanwhile ran unheld and unlisted, and a
  // save changed its region's image token under it (its session closed as if replaced).
  std::mutex new_slot_mu_;
  std::shared_ptr<SlotControlHandle> control_of(uint64_t connection, uint32_t slot) const {
    std::lock_guard l(control_mu_);
    auto it = controls_.find({connection, slot});
    return it == controls_.end() ? nullptr : it->second;
  }
  std::vector<ServedSlot> served() const {
    std::lock_guard l(control_mu_);
    std::vector<ServedSlot> v;
    for (const auto& [key, h] : controls_) v.push_back(h->info);
    return v;
  }
  // Live connections by id, for the control path (the loop adds and removes them). Also
  // guards each connection's image token and header writes of it.
  mutable std::mutex conns_mu_;
  std::map<uint64_t, Connection*> by_id_;
  bool set_token(uint64_t id, uint64_t token);
  uint64_t token_of(uint64_t id) const;
  std::string handover();
  bool stop_accepting(std::chrono::milliseconds timeout);  // HostEndpoint::stop_accepting
  void resume_accepting();
  bool adopt(uint64_t id, uint32_t slot, std::chrono::milliseconds timeout, std::string* why);
  void lose(uint64_t id, uint32_t slot);
 private:

  mutable std::mutex stats_mu_;
  HostEndpointStats stats_;

  // Per user on the socket (loop thread only): live connections and a token bucket of new
  // ones. An entry goes when its user holds nothing and its bucket is full again.
  struct UserConnections {
    uint32_t live = 0;
    double tokens = 0, last_s = 0;
  };
  std::map<uid_t, UserConnections> users_;
  // Refusals are logged once, then at most once per kRefusalLogS with how many there were.
  static constexpr double kRefusalLogS = 10;
  static constexpr int kHandshakeSendMs = 100;
  double refusal_logged_s_ = -1e9;
  uint64_t refusals_unlogged_ = 0;
};

// ---------------------------------------------------------------------------- loop

io_uring_sqe* HostEndpoint::Impl::sqe() {
  io_uring_sqe* s = io_uring_get_sqe(&ring_);
  if (!s) {
    io_uring_submit(&ring_);
    s = io_uring_get_sqe(&ring_);
  }
  if (!s) throw std::runtime_error("io_uring: submission queue full");
  return s;
}

void HostEndpoint::Impl::arm_accept() {
  auto* s = sqe();
  io_uring_prep_accept(s, listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
  io_uring_sqe_set_data(s, &accept_op_);
  accept_armed_ = true;
}

void HostEndpoint::Impl::arm_wake() {
  auto* s = sqe();
  io_uring_prep_read(s, wake_.get(), &wake_op_.buf, sizeof wake_op_.buf, 0);
  io_uring_sqe_set_data(s, &wake_op_);
}

void HostEndpoint::Impl::arm_socket_poll(Connection& c) {
  auto* s = sqe();
  io_uring_prep_poll_add(s, c.sock.get(), POLLIN | POLLRDHUP);
  io_uring_sqe_set_data(s, &c.socket_poll);
  ++c.pending_ops;
}

void HostEndpoint::Impl::arm_tick() {
  const int64_t ms = std::max<int64_t>(1, knobs::kRegionCheckMs.get());
  tick_ts_.tv_sec = ms / 1000;
  tick_ts_.tv_nsec = (ms % 1000) * 1000000;
  auto* s = sqe();
  io_uring_prep_timeout(s, &tick_ts_, 0, 0);
  io_uring_sqe_set_data(s, &tick_op_);
  tick_armed_ = true;
}

void HostEndpoint::Impl::arm_doorbell(Connection& c, uint32_t slot) {
  Op& op = c.slots[slot].doorbell;
  auto* s = sqe();
  io_uring_prep_read(s, c.host_rx[slot].get(), &op.buf, sizeof op.buf, 0);
  io_uring_sqe_set_data(s, &op);
  ++c.pending_ops;
}

void HostEndpoint::Impl::start() {
  std::string why;
  auto layout = Layout::plan(opts_.region, &why);
  if (!layout) throw std::runtime_error("vmrpc host endpoint: " + why);
  layout_ = *layout;
  epoch_ = now_ns();
  if (int rc = io_uring_queue_init(256, &ring_, 0); rc < 0) throw_errno("io_uring_queue_init", -rc);
  ring_ready_ = true;
  // Handed over by the stub process this one replaced (exec in place): its socket and
  // connections go on; nobody else (our workers) must take them for their own.
  const char* handed = std::getenv(HostEndpoint::kHandoverEnv);
  const std::string handover = handed ? handed : "";
  ::unsetenv(HostEndpoint::kHandoverEnv);
  wake_ = make_eventfd();
  if (!handover.empty()) adopt_handover(handover);
  else if (!opts_.inherited_fds.empty()) adopt_inherited(std::move(opts_.inherited_fds));
  else listen_new();
  if (opts_.store_fd) opts_.store_fd(kListenFdName, listen_.get());
  arm_accept();
  arm_wake();
  arm_tick();
  io_uring_submit(&ring_);
  restore_thread_ = std::thread([this] { restore_thread(); });
  VMRPC_LOG(kInfo, "host", "serving " + opts_.socket_path + ": " + std::to_string(layout_.slot_count) +
                               " slots, heap " + std::to_string(layout_.heap_bytes >> 20) + " MiB per connection");
  loop_thread_ = std::thread([this] { loop(); });
}

void HostEndpoint::Impl::stop() {
  if (!loop_thread_.joinable()) return;
  stopping_ = true;
  ring(wake_.get());
  loop_thread_.join();
  {
    std::lock_guard l(restore_mu_);
    restore_stop_ = true;
  }
  restore_cv_.notify_all();
  if (restore_thread_.joinable()) restore_thread_.join();
  if (ring_ready_) io_uring_queue_exit(&ring_);
  ring_ready_ = false;
  listen_.reset();
  // Not a successor's socket, and not one that the service manager's fd store keeps serving.
  remove_socket_if_ours(opts_.socket_path, socket_dev_, socket_ino_);
}

void HostEndpoint::Impl::listen_new() {
  ListeningSocket s = listen_unix_secure(opts_.socket_path, opts_.socket_access, 16, "VM socket");
  listen_ = std::move(s.fd);
  socket_dev_ = s.dev;
  socket_ino_ = s.ino;
}

void HostEndpoint::Impl::post(Message m) {
  {
    std::lock_guard l(msg_mu_);
    messages_.push_back(m);
  }
  ring(wake_.get());
}

void HostEndpoint::Impl::loop() {
  bool shutting_down = false;
  for (;;) {
    if (stopping_ && !shutting_down) {
      shutting_down = true;
      if (accept_armed_) {
        auto* s = sqe();
        io_uring_prep_cancel(s, &accept_op_, 0);
        io_uring_sqe_set_data(s, nullptr);
      }
      // Tell each peer that we leave (our id without an fd: QEMU drops our vectors),
      // then hang up; the socket polls complete and teardown follows from there.
      for (Connection* c : conns_) {
        try {
          ivshmem::send_message(c->sock.get(), layout_.host_peer_id);
        } catch (const std::exception&) {
          // The peer is gone already.
        }
        ::shutdown(c->sock.get(), SHUT_RDWR);
      }
    }
    if (!stopping_ && accept_pause_.load() != accept_pause_seen_) {
      accept_pause_seen_ = accept_pause_.load();
      if (accept_pause_seen_) {
        if (accept_armed_) {  // its completion (cancelled, or a connection to finish) says when
          auto* s = sqe();
          io_uring_prep_cancel(s, &accept_op_, 0);
          io_uring_sqe_set_data(s, nullptr);
        } else {
          accept_stopped();
        }
      } else if (!accept_armed_) {
        arm_accept();
      }
    }
    if (shutting_down && conns_.empty() && !accept_armed_) break;
    io_uring_submit_and_wait(&ring_, 1);
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      auto* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      if (!op) continue;  // a cancel's own completion
      switch (op->kind) {
        case Op::kAccept:
          accept_armed_ = false;
          if (res >= 0) on_accept(res);  // the whole handshake, its fds stored
          else if (res != -ECANCELED) VMRPC_LOG(kWarn, "host", std::string("accept failed: ") + std::strerror(-res));
          if (accept_pause_seen_) accept_stopped();
          else if (!stopping_) arm_accept();
          break;
        case Op::kWake:
          on_messages();
          arm_wake();
          break;
        case Op::kTick:
          tick_armed_ = false;
          for (Connection* c : conns_)
            if (!c->dead) {
              check_region(*c);
              check_worker_exits(*c);
            }
          if (!stopping_) arm_tick();
          break;
        case Op::kSocketPoll: {
          Connection* c = op->conn;
          --c->pending_ops;
          if (!c->dead) on_socket_event(*c);
          maybe_free(c);
          break;
        }
        case Op::kDoorbell: {
          Connection* c = op->conn;
          --c->pending_ops;
          if (!c->dead) on_doorbell(*c, op->slot);
          maybe_free(c);
          break;
        }
        case Op::kWorkerExit: {
          Connection* c = op->conn;
          --c->pending_ops;
          on_worker_exit(*c, op->slot);
          maybe_free(c);
          break;
        }
      }
    }
    io_uring_cq_advance(&ring_, seen);
  }
}

void HostEndpoint::Impl::on_messages() {
  std::deque<Message> batch;
  {
    std::lock_guard l(msg_mu_);
    batch.swap(messages_);
  }
  for (const Message& m : batch) {
    Connection* c = m.conn;
    if (m.kind == Message::kReaped) {
      c->reaped = true;
      maybe_free(c);
    } else if (!c->dead) {
      // The guest closed the slot: the thread has finished; the loop watches its doorbell again.
      SlotRuntime& s = c->slots[m.slot];
      if (s.thread.joinable()) s.thread.join();
      check_region(*c);  // a thread that left because the image token changed
      watch_again(*c, m.slot);
    }
  }
}

// ------------------------------------------------------------------ connections

namespace {
uid_t peer_uid(int sock) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return static_cast<uid_t>(-1);
  return cred.uid;
}
double now_s() { return static_cast<double>(now_ns()) * 1e-9; }
}  // namespace

void HostEndpoint::Impl::log_refusal(const std::string& what) {
  // Its own subsystem's limiter too, so that refusals cannot crowd out other warnings.
  const double now = now_s();
  if (now - refusal_logged_s_ < kRefusalLogS) {
    ++refusals_unlogged_;
    return;
  }
  const std::string before = refusals_unlogged_ ? " (" + std::to_string(refusals_unlogged_) +
                                                      " more refused in the last " +
                                                      std::to_string(static_cast<int>(kRefusalLogS)) + " s, not logged)"
                                                : "";
  refusal_logged_s_ = now;
  refusals_unlogged_ = 0;
  VMRPC_LOG(kWarn, "admission", what + before);
}

bool HostEndpoint::Impl::admit_connection(uid_t uid) {
  const double now = now_s();
  // Forget users that hold nothing and whose bucket has filled again (the table stays as
  // small as the set of users connected lately).
  const double cap = std::max<double>(1, opts_.max_connections_per_user);
  for (auto it = users_.begin(); it != users_.end();) {
    const bool full = opts_.connect_rate_per_user <= 0 ||
                      it->second.tokens + (now - it->second.last_s) * opts_.connect_rate_per_user >= cap;
    it = it->second.live == 0 && full ? users_.erase(it) : std::next(it);
  }
  std::string why;
  auto [it, fresh] = users_.try_emplace(uid);
  UserConnections& u = it->second;
  if (fresh) {
    u.tokens = cap;
    u.last_s = now;
  }
  if (opts_.connect_rate_per_user > 0) {
    u.tokens = std::min(cap, u.tokens + (now - u.last_s) * opts_.connect_rate_per_user);
    u.last_s = now;
  }
  if (conns_.size() >= opts_.max_connections) {
    why = "already " + std::to_string(conns_.size()) + " connections (at most " +
          std::to_string(opts_.max_connections) + " per socket)";
  } else if (opts_.max_connections_per_user > 0 && u.live >= opts_.max_connections_per_user) {
    why = "user " + std::to_string(uid) + " holds " + std::to_string(u.live) + " connections already (at most " +
          std::to_string(opts_.max_connections_per_user) + " per user: " + knobs::kMaxConnectionsPerUser.env() + ")";
  } else if (opts_.connect_rate_per_user > 0 && u.tokens < 1) {
    why = "user " + std::to_string(uid) + " connects faster than " +
          std::to_string(static_cast<long long>(opts_.connect_rate_per_user)) + " a second (" +
          knobs::kConnectRatePerUser.env() + ")";
  }
  if (!why.empty()) {
    {
      std::lock_guard l(stats_mu_);
      ++stats_.connections_refused_total;
    }
    log_refusal("refusing a connection on " + opts_.socket_path + ": " + why);
    return false;
  }
  if (opts_.connect_rate_per_user > 0) u.tokens -= 1;
  return true;
}

void HostEndpoint::Impl::count_user(Connection& c) {
  c.uid = peer_uid(c.sock.get());
  auto [it, fresh] = users_.try_emplace(c.uid);
  if (fresh) {
    it->second.tokens = std::max<double>(1, opts_.max_connections_per_user);
    it->second.last_s = now_s();
  }
  ++it->second.live;
}

void HostEndpoint::Impl::uncount_user(Connection& c) {
  auto it = users_.find(c.uid);
  if (it != users_.end() && it->second.live > 0) --it->second.live;
}

void HostEndpoint::Impl::on_accept(int fd) {
  UniqueFd sock(fd);
  // Refused before anything is made for it: a refusal costs an accept and a close.
  if (!admit_connection(peer_uid(sock.get()))) return;
  // The handshake below runs on this thread: a peer that does not read must not hold it. Its
  // messages (3 + 2 x slots, each a few hundred bytes of socket buffer with its fd) fit the
  // buffer at the default slot count, so they never wait; with many slots a send waits for
  // the peer at most kHandshakeSendMs, then the connection is dropped.
  {
    const int want = static_cast<int>(std::min<uint64_t>(64u << 20, (3 + 2ull * layout_.slot_count) * 1024));
    ::setsockopt(sock.get(), SOL_SOCKET, SO_SNDBUF, &want, sizeof want);  // best effort (net.core.wmem_max)
    timeval tv{0, kHandshakeSendMs * 1000};
    ::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  auto c = std::make_unique<Connection>();
  try {
    c->id = next_id_++;
    c->sock = std::move(sock);
    c->memfd = UniqueFd(::memfd_create("vmcuda-region", MFD_CLOEXEC));
    if (!c->memfd) throw_errno("memfd_create");
    if (::ftruncate(c->memfd.get(), static_cast<off_t>(layout_.region_bytes)) < 0) throw_errno("ftruncate region");
    c->map = Mapping::map_shared(c->memfd.get(), layout_.region_bytes, "region");
    // The address where the serving process maps the region, for guests that map it at
    // the same address: each worker maps it at a fixed one (its own address space), the
    // threads of this process serve it at this mapping (distinct per connection).
    Layout layout = layout_;
    layout.host_map_address = opts_.spawn_worker ? opts_.worker_map_address
                                                 : reinterpret_cast<uint64_t>(c->map.data());
    c->view = RegionView(c->map.data(), layout);
    layout.write_header(c->view.header(), epoch_);
    c->image_token = new_image_token();
    ordering::store_release(c->view.header().image_token, c->image_token);
    const uint32_t n = layout_.slot_count;
    c->slots = std::make_unique<SlotRuntime[]>(n);
    for (uint32_t i = 0; i < n; ++i) {
      c->host_rx.push_back(make_eventfd());
      c->guest_rx.push_back(make_eventfd());
      c->slots[i].doorbell = Op{Op::kDoorbell, c.get(), i, 0};
      c->slots[i].worker_exit = Op{Op::kWorkerExit, c.get(), i, 0};
    }
    c->socket_poll = Op{Op::kSocketPoll, c.get(), 0, 0};
    // The ivshmem-server handshake (QEMU reads it synchronously while creating the device).
    const int s = c->sock.get();
    ivshmem::send_message(s, ivshmem::kProtocolVersion);
    ivshmem::send_message(s, layout_.guest_peer_id);
    ivshmem::send_message(s, ivshmem::kSharedMemoryId, c->memfd.get());
    for (uint32_t i = 0; i < n; ++i) ivshmem::send_message(s, layout_.host_peer_id, c->host_rx[i].get());
    for (uint32_t i = 0; i < n; ++i) ivshmem::send_message(s, layout_.guest_peer_id, c->guest_rx[i].get());
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "host", std::string("connection setup failed: ") + e.what());
    return;
  }
  try {
    service_.connection_opened(c->id, c->view);
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "host", std::string("service refused a connection: ") + e.what());
    return;
  }
  Connection* raw = c.release();
  conns_.insert(raw);
  count_user(*raw);
  {
    std::lock_guard l(conns_mu_);
    by_id_[raw->id] = raw;
  }
  store_fds(*raw);
  arm_socket_poll(*raw);
  for (uint32_t i = 0; i < layout_.slot_count; ++i) arm_doorbell(*raw, i);
  {
    std::lock_guard l(stats_mu_);
    ++stats_.connections_open;
    ++stats_.connections_total;
  }
  VMRPC_LOG(kInfo, "host", "peer joined: connection " + std::to_string(raw->id));
}

void HostEndpoint::Impl::on_socket_event(Connection& c) {
  char buf[64];
  ssize_t n = ::recv(c.sock.get(), buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
    arm_socket_poll(c);  // clients have nothing to say in this protocol: ignore it
    return;
  }
  VMRPC_LOG(kInfo, "host", "peer left: connection " + std::to_string(c.id));
  teardown(c);
}

void HostEndpoint::Impl::teardown(Connection& c) {
  c.dead = true;
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < layout_.slot_count; ++i) {
    SlotRuntime& s = c.slots[i];
    s.stop = true;
    if (s.thread.joinable()) threads.push_back(std::move(s.thread));
    // A worker is killed: the OS (and the GPU driver) free all it had. Its exit
    // completes the loop's poll of its pidfd.
    if (s.worker > 0) end_worker(s);
    ring(c.host_rx[i].get());  // wakes the slot's thread, or completes the loop's read
  }
  Connection* cp = &c;
  c.reaper = std::thread([this, cp, ts = std::move(threads)]() mutable {
    for (auto& t : ts) t.join();
    post({Message::kReaped, cp, 0});
  });
}

void HostEndpoint::Impl::maybe_free(Connection* c) {
  if (!c->dead || !c->reaped || c->pending_ops > 0) return;
  if (c->reaper.joinable()) c->reaper.join();
  try {
    service_.connection_closed(c->id, c->view);
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "host", std::string("service failed closing a connection: ") + e.what());
  }
  unstore_fds(*c);
  uncount_user(*c);
  conns_.erase(c);
  {
    std::lock_guard l(conns_mu_);
    by_id_.erase(c->id);
  }
  {
    std::lock_guard l(stats_mu_);
    --stats_.connections_open;
  }
  delete c;
}

void HostEndpoint::Impl::on_doorbell(Connection& c, uint32_t slot) {
  // A restored image first: its slots are not new clients.
  check_region(c);
  if (c.replaced) collect_restored(c);
  auto& ctl = c.view.control(slot);
  SlotRuntime& rt = c.slots[slot];
  bool held = false;
  switch (rt.restore.load()) {
    case SlotRuntime::kPending:  // waiting for on_region_restored's decision
      arm_doorbell(c, slot);
      return;
    case SlotRuntime::kLose:
      rt.restore = SlotRuntime::kNone;
      fail_slot(c.view, slot, c.guest_rx[slot].get(), wire::HostSlotState::kStateLost);
      arm_doorbell(c, slot);
      return;
    case SlotRuntime::kAdopt:
      rt.restore = SlotRuntime::kNone;
      held = true;  // its state comes back before its next call
      break;
    default:
      break;
  }
  rt.region_replaced = false;
  const uint32_t state = ordering::load_acquire(ctl.state);
  if (state == static_cast<uint32_t>(SlotState::kClosing)) {
    // Released before a service thread attached (e.g. the guest driver claims a slot
    // in open() and releases it in close() even if the client never said Hello):
    // no service was opened; free its heap pages and hand the slot back.
    reset_slot(c.view, slot);
    arm_doorbell(c, slot);
    return;
  }
  if (state != static_cast<uint32_t>(SlotState::kClaimed)) {
    arm_doorbell(c, slot);  // a stray doorbell
    return;
  }
  if (const uint32_t hs = ordering::load_acquire(ctl.host_state);
      !held && (hs == static_cast<uint32_t>(wire::HostSlotState::kFailed) ||
                hs == static_cast<uint32_t>(wire::HostSlotState::kStateLost) ||
                hs == static_cast<uint32_t>(wire::HostSlotState::kTimedOut) ||
                hs == static_cast<uint32_t>(wire::HostSlotState::kRefused))) {
    // A slot whose server died or whose state is lost: answer a batch the guest sent as it
    // happened (it may have looked at host_state just before), keep watching.
    fail_slot(c.view, slot, c.guest_rx[slot].get(), static_cast<wire::HostSlotState>(hs));
    arm_doorbell(c, slot);
    return;
  }
  // A restored client was admitted before its VM was saved: it comes back whatever the count.
  if (!held && !admit_client(c, slot)) {
    // Until the guest releases the slot: it is not admitted again by ringing.
    fail_slot(c.view, slot, c.guest_rx[slot].get(), wire::HostSlotState::kRefused);
    arm_doorbell(c, slot);
    return;
  }
  if (opts_.spawn_worker) {
    if (!start_worker(c, slot, held)) {
      fail_slot(c.view, slot, c.guest_rx[slot].get());
      arm_doorbell(c, slot);
    }
    return;
  }
  SlotRuntime& s = c.slots[slot];
  s.stop = false;
  auto handle = std::make_shared<SlotControlHandle>();
  handle->info = {c.id, slot, ordering::load_relaxed(ctl.owner_tag), -1};
  const int doorbell = c.host_rx[slot].get();
  handle->gate = std::make_shared<SlotGate>([doorbell] { ring(doorbell); });
  {
    std::lock_guard l(new_slot_mu_);
    if (hold_new_ || held) handle->gate->request_hold();
    add_control(handle);
  }
  {
    std::lock_guard l(stats_mu_);  // counted here, on the loop thread, so admit_client() sees it at once
    ++stats_.slots_serving;
    ++stats_.slots_opened_total;
  }
  s.thread = std::thread([this, cp = &c, slot, handle] { serve_slot(cp, slot, handle.get()); });
}

void HostEndpoint::Impl::check_worker_exits(Connection& c) {
  const int64_t limit_ms = knobs::kWorkerExitMs.get();
  if (limit_ms <= 0) return;
  const int64_t now = static_cast<int64_t>(now_ns());
  for (uint32_t slot = 0; slot < layout_.slot_count; ++slot) {
    SlotRuntime& s = c.slots[slot];
    if (s.worker <= 0 || s.program_left_ns < 0) continue;
    if (ordering::load_acquire(c.view.control(slot).state) == static_cast<uint32_t>(SlotState::kClaimed)) {
      s.program_left_ns = 0;
      continue;
    }
    if (s.program_left_ns == 0) {
      s.program_left_ns = now;
      continue;
    }
    if (now - s.program_left_ns < limit_ms * 1000000) continue;
    VMRPC_LOG(kWarn, "host", "connection " + std::to_string(c.id) + " slot " + std::to_string(slot) + ": worker " +
                                 std::to_string(s.worker) + " did not end within " + std::to_string(limit_ms) +
                                 " ms after its program left (a kernel that never ends?); killed, so that its "
                                 "slot and GPU memory go back (VMRPC_WORKER_EXIT_MS)");
    end_worker(s);
    s.program_left_ns = -1;
  }
}

void HostEndpoint::Impl::end_worker(SlotRuntime& s) {
  if (opts_.end_worker && s.worker_pidfd) {
    UniqueFd dup(::fcntl(s.worker_pidfd.get(), F_DUPFD_CLOEXEC, 0));
    if (dup) {
      opts_.end_worker(s.worker, std::move(dup));
      return;
    }
  }
  ::kill(s.worker, SIGKILL);
}

bool HostEndpoint::Impl::admit_client(const Connection& c, uint32_t slot) {
  if (opts_.max_clients == 0) return true;
  uint64_t serving;
  {
    std::lock_guard l(stats_mu_);
    serving = stats_.slots_serving;
  }
  if (serving < opts_.max_clients) return true;
  {
    std::lock_guard l(stats_mu_);
    ++stats_.clients_refused_total;
  }
  log_refusal("connection " + std::to_string(c.id) + " slot " + std::to_string(slot) + " (guest pid " +
              std::to_string(ordering::load_relaxed(c.view.control(slot).owner_tag)) + "): a program refused: " +
              std::to_string(serving) + " are served already (at most " + std::to_string(opts_.max_clients) +
              " at once for this VM: vmcuda-stub --max-clients, policy key max_clients); it gets "
              "cudaErrorDevicesUnavailable");
  return false;
}

// ------------------------------------------------------------- restored regions

void HostEndpoint::Impl::check_region(Connection& c) {
  uint64_t token;
  {
    std::lock_guard l(conns_mu_);
    token = ordering::load_acquire(c.view.header().image_token);
    if (token == c.image_token) return;
    c.image_token = token;  // handled once
  }
  on_region_replaced(c, token);
}

// The region's bytes are becoming a saved image (QEMU loads a VM's state into it; the VM
// runs once all of it is loaded). Services still running on the old contents are stopped
// without touching the region; the image's clients are looked at when the VM first rings
// (collect_restored): only then is every page of it in place.
void HostEndpoint::Impl::on_region_replaced(Connection& c, uint64_t token) {
  for (uint32_t i = 0; i < layout_.slot_count; ++i) {
    SlotRuntime& s = c.slots[i];
    s.restore = SlotRuntime::kNone;
    if (!s.served()) continue;
    s.region_replaced = true;
    s.stop = true;
    if (s.worker > 0) ::kill(s.worker, SIGKILL);
    else ring(c.host_rx[i].get());  // wakes the thread
  }
  c.replaced = true;
  c.replaced_token = token;
  VMRPC_LOG(kInfo, "host", "connection " + std::to_string(c.id) +
                               ": the region is being replaced by a saved image (a VM restore or snapshot revert); "
                               "its clients are restored when the VM runs");
}

// The VM rang: the image is wholly loaded. A slot in the middle of a session is listed for
// on_region_restored, which brings its client's GPU state back or declares it lost; a slot
// that was closing is handed back; a free slot, or one claimed since (no reply yet), is an
// ordinary slot.
void HostEndpoint::Impl::collect_restored(Connection& c) {
  c.replaced = false;
  RestoredRegion r{c.id, c.replaced_token, {}, c.handed_over};
  c.handed_over = false;
  for (uint32_t i = 0; i < layout_.slot_count; ++i) {
    auto& ctl = c.view.control(i);
    SlotRuntime& s = c.slots[i];
    const uint32_t state = ordering::load_acquire(ctl.state);
    if (state == static_cast<uint32_t>(SlotState::kClaimed) && ordering::load_acquire(ctl.response_seq) != 0) {
      s.restore = SlotRuntime::kPending;
      r.slots.push_back(i);
    } else if (state == static_cast<uint32_t>(SlotState::kClosing) && !s.served()) {
      reset_slot(c.view, i);
    }
  }
  VMRPC_LOG(kInfo, "host", "connection " + std::to_string(c.id) + ": the restored VM runs; " +
                               std::to_string(r.slots.size()) + " client(s) in its image");
  {
    std::lock_guard l(restore_mu_);
    restores_.push_back(std::move(r));
  }
  restore_cv_.notify_all();
}

void HostEndpoint::Impl::restore_thread() {
  for (;;) {
    RestoredRegion r;
    {
      std::unique_lock l(restore_mu_);
      restore_cv_.wait(l, [&] { return restore_stop_ || !restores_.empty(); });
      if (restore_stop_) return;
      r = std::move(restores_.front());
      restores_.pop_front();
    }
    if (opts_.on_region_restored) {
      try {
        opts_.on_region_restored(r);
        continue;
      } catch (const std::exception& e) {
        VMRPC_LOG(kWarn, "host", std::string("restoring a region's clients failed: ") + e.what());
      }
    } else {
      VMRPC_LOG(kWarn, "host", "connection " + std::to_string(r.connection_id) +
                                   ": nothing here restores GPU state: its restored clients' calls fail");
    }
    for (uint32_t slot : r.slots) lose(r.connection_id, slot);
  }
}

bool HostEndpoint::Impl::set_token(uint64_t id, uint64_t token) {
  std::lock_guard l(conns_mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  it->second->image_token = token;
  ordering::store_release(it->second->view.header().image_token, token);
  return true;
}

uint64_t HostEndpoint::Impl::token_of(uint64_t id) const {
  std::lock_guard l(conns_mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? 0 : it->second->image_token;
}

bool HostEndpoint::Impl::adopt(uint64_t id, uint32_t slot, std::chrono::milliseconds timeout, std::string* why) {
  // The service of the replaced image may still be ending: wait for a new one.
  const auto old = control_of(id, slot);
  {
    std::lock_guard l(conns_mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end() || slot >= layout_.slot_count) {
      if (why) *why = "connection " + std::to_string(id) + " is gone";
      return false;
    }
    SlotRuntime& s = it->second->slots[slot];
    if (s.restore.load() != SlotRuntime::kPending) {
      if (why) *why = "slot " + std::to_string(slot) + " of connection " + std::to_string(id) + " is not being restored";
      return false;
    }
    s.restore = SlotRuntime::kAdopt;
    ring(it->second->host_rx[slot].get());  // the loop's read of it completes: on_doorbell starts it
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto h = control_of(id, slot); h && h != old) break;
    if (stopping_ || std::chrono::steady_clock::now() > deadline) {
      if (why) *why = "slot " + std::to_string(slot) + " of connection " + std::to_string(id) + " did not start";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void HostEndpoint::Impl::lose(uint64_t id, uint32_t slot) {
  std::lock_guard l(conns_mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || slot >= layout_.slot_count) return;
  SlotRuntime& s = it->second->slots[slot];
  int pending = SlotRuntime::kPending;
  if (!s.restore.compare_exchange_strong(pending, SlotRuntime::kLose)) return;
  VMRPC_LOG(kWarn, "host", "connection " + std::to_string(id) + " slot " + std::to_string(slot) +
                               ": restored without its client's GPU state; its calls fail");
  ring(it->second->host_rx[slot].get());
}

// ------------------------------------------------------------------ workers

bool HostEndpoint::Impl::start_worker(Connection& c, uint32_t slot, bool held) {
  auto& ctl = c.view.control(slot);
  SlotRuntime& s = c.slots[slot];
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
    VMRPC_LOG(kWarn, "host", std::string("cannot make a worker's control socket: ") + std::strerror(errno));
    return false;
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  WorkerSpec spec{c.memfd.get(), c.host_rx[slot].get(), c.guest_rx[slot].get(), slot, c.id,
                  ordering::load_relaxed(ctl.owner_tag), epoch_, opts_.region,
                  c.view.layout().host_map_address};
  spec.control_fd = theirs.get();
  std::unique_lock new_slot(new_slot_mu_);  // until the worker is listed
  spec.start_held = hold_new_ || held;
  pid_t pid = -1;
  try {
    pid = opts_.spawn_worker(spec);
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "host", std::string("cannot start a worker: ") + e.what());
  }
  if (pid <= 0) return false;
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    VMRPC_LOG(kWarn, "host", "pidfd_open of worker " + std::to_string(pid) + " failed; killing it");
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return false;
  }
  s.worker = pid;
  s.worker_pidfd = std::move(pidfd);
  auto handle = std::make_shared<SlotControlHandle>();
  handle->info = {c.id, slot, spec.owner_tag, pid};
  handle->worker_fd = std::move(ours);
  add_control(std::move(handle));
  new_slot.unlock();
  auto* e = sqe();
  io_uring_prep_poll_add(e, s.worker_pidfd.get(), POLLIN);
  io_uring_sqe_set_data(e, &s.worker_exit);
  ++c.pending_ops;
  std::lock_guard l(stats_mu_);
  ++stats_.slots_serving;
  ++stats_.slots_opened_total;
  return true;
}

void HostEndpoint::Impl::on_worker_exit(Connection& c, uint32_t slot) {
  SlotRuntime& s = c.slots[slot];
  int status = 0;
  ::waitpid(s.worker, &status, 0);
  const pid_t pid = s.worker;
  s.program_left_ns = 0;
  if (opts_.on_worker_exit) opts_.on_worker_exit(pid, status);
  s.worker = -1;
  s.worker_pidfd.reset();
  drop_control(c.id, slot);
  {
    std::lock_guard l(stats_mu_);
    --stats_.slots_serving;
    ++stats_.slots_closed_total;
  }
  if (c.dead) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitRegionReplaced) {
    check_region(c);  // it saw the image token change before the loop's next look
    s.region_replaced = true;
  }
  if (s.region_replaced) {
    // Stopped because a saved image replaced the region: the slot is the image's now.
    s.region_replaced = false;
    watch_again(c, slot);
    return;
  }
  auto& ctl = c.view.control(slot);
  const uint32_t state = ordering::load_acquire(ctl.state);
  const bool timed_out = WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitLaunchTimeout;
  if (timed_out)
    VMRPC_LOG(kWarn, "host", "connection " + std::to_string(c.id) + " slot " + std::to_string(slot) + ": worker " +
                                 std::to_string(pid) + " ended its client: a kernel ran past the kernel time limit; "
                                 "its GPU memory and contexts are gone, its calls get cudaErrorLaunchTimeout until "
                                 "it releases the slot");
  if (state == static_cast<uint32_t>(SlotState::kClaimed) && timed_out) {
    fail_slot(c.view, slot, c.guest_rx[slot].get(), wire::HostSlotState::kTimedOut);
  } else if (state == static_cast<uint32_t>(SlotState::kClaimed)) {
    // The worker died while its client lives (a crash, or killed): the client's CUDA
    // state is gone with it. Answer what it waits for; the slot stays refused until
    // the client releases it.
    VMRPC_LOG(kWarn, "host", "connection " + std::to_string(c.id) + " slot " + std::to_string(slot) + ": worker " +
                                 std::to_string(pid) + " ended (" +
                                 (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                      : "status " + std::to_string(WEXITSTATUS(status))) +
                                 ") while its client was connected");
    fail_slot(c.view, slot, c.guest_rx[slot].get());
  } else {
    reset_slot(c.view, slot);  // released: workers leave the hand-back to us
  }
  arm_doorbell(c, slot);
}

// ------------------------------------------------------------------------ handover

namespace {
void keep_across_exec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
}
void close_on_exec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}
}  // namespace

// "listen=FD" then one ";conn=ID,SOCK,MEMFD,RX0:RX1:...,TX0:TX1:..." per connection.
std::string HostEndpoint::Impl::handover() {
  std::lock_guard l(conns_mu_);
  keep_across_exec(listen_.get());
  std::string d = "listen=" + std::to_string(listen_.get());
  for (const auto& [id, c] : by_id_) {
    if (c->dead) continue;
    d += ";conn=" + std::to_string(id) + "," + std::to_string(c->sock.get()) + "," + std::to_string(c->memfd.get());
    for (const auto* list : {&c->host_rx, &c->guest_rx}) {
      d += ",";
      for (size_t i = 0; i < list->size(); ++i) {
        keep_across_exec((*list)[i].get());
        d += (i ? ":" : "") + std::to_string((*list)[i].get());
      }
    }
    keep_across_exec(c->sock.get());
    keep_across_exec(c->memfd.get());
  }
  return d;
}

namespace {

uint64_t parse_number(const std::string& s) {
  size_t used = 0;
  const unsigned long long v = std::stoull(s, &used);
  if (used != s.size() || s.empty() || s[0] == '-' || s[0] == '+') throw std::runtime_error("bad number '" + s + "'");
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t e = s.find(sep, at);
    out.push_back(s.substr(at, e == std::string::npos ? std::string::npos : e - at));
    if (e == std::string::npos) return out;
    at = e + 1;
  }
}

// HostEndpoint::kHandoverEnv's description (HostEndpoint::Impl::handover writes it).
Handover parse_handover(const std::string& description) {
  Handover h;
  auto parts = split(description, ';');
  if (parts.empty() || !parts[0].starts_with("listen="))
    throw std::runtime_error(std::string(HostEndpoint::kHandoverEnv) + " is not a handover description");
  h.listen = UniqueFd(static_cast<int>(parse_number(parts[0].substr(7))));
  for (size_t p = 1; p < parts.size(); ++p) {
    if (!parts[p].starts_with("conn=")) throw std::runtime_error("bad handover part '" + parts[p] + "'");
    const auto f = split(parts[p].substr(5), ',');
    if (f.size() != 5) throw std::runtime_error("bad handover connection '" + parts[p] + "'");
    HandedConnection c;
    c.id = parse_number(f[0]);
    c.sock = UniqueFd(static_cast<int>(parse_number(f[1])));
    c.memfd = UniqueFd(static_cast<int>(parse_number(f[2])));
    for (const auto& [text, list] : {std::pair{f[3], &c.host_rx}, std::pair{f[4], &c.guest_rx}})
      for (const auto& n : split(text, ':')) list->push_back(UniqueFd(static_cast<int>(parse_number(n))));
    h.conns.push_back(std::move(c));
  }
  return h;
}

// The fds a service manager kept, by fd_store_name(). Unknown names and connections that
// lost a part (systemd drops a socket whose peer hung up) are closed and left out.
Handover handover_from_named_fds(std::vector<NamedFd> fds, uint32_t slots) {
  Handover h;
  std::map<uint64_t, HandedConnection> conns;
  std::map<uint64_t, std::vector<int>> slot_seen;  // per connection: hrx/grx seen per slot (bits 1, 2)
  for (auto& nf : fds) {
    UniqueFd fd(nf.fd);
    if (nf.name == kListenFdName) {
      if (!h.listen) h.listen = std::move(fd);
      continue;
    }
    const auto dot = nf.name.find('.');
    uint64_t id = 0;
    std::string kind;
    try {
      if (nf.name.size() < 4 || nf.name[0] != 'c' || dot == std::string::npos) throw std::runtime_error("");
      id = parse_number(nf.name.substr(1, dot - 1));
      kind = nf.name.substr(dot + 1);
    } catch (const std::exception&) {
      VMRPC_LOG(kWarn, "host", "the service manager passed an fd named '" + nf.name + "' that is not ours; closing it");
      continue;
    }
    HandedConnection& c = conns[id];
    c.id = id;
    auto& seen = slot_seen[id];
    seen.resize(slots, 0);
    if (c.host_rx.empty()) c.host_rx.resize(slots), c.guest_rx.resize(slots);
    if (kind == "sock") {
      c.sock = std::move(fd);
    } else if (kind == "region") {
      c.memfd = std::move(fd);
    } else if ((kind.starts_with("hrx") || kind.starts_with("grx")) && kind.size() > 3) {
      uint64_t i = ~0ull;
      try {
        i = parse_number(kind.substr(3));
      } catch (const std::exception&) {
      }
      if (i >= slots) {
        VMRPC_LOG(kWarn, "host", "the service manager passed '" + nf.name + "', a slot this stub does not have; closing it");
        continue;
      }
      (kind[0] == 'h' ? c.host_rx : c.guest_rx)[i] = std::move(fd);
    } else {
      VMRPC_LOG(kWarn, "host", "the service manager passed an fd named '" + nf.name + "' that is not ours; closing it");
    }
  }
  for (auto& [id, c] : conns) {
    const bool whole = c.sock && c.memfd &&
                       std::all_of(c.host_rx.begin(), c.host_rx.end(), [](const UniqueFd& f) { return bool(f); }) &&
                       std::all_of(c.guest_rx.begin(), c.guest_rx.end(), [](const UniqueFd& f) { return bool(f); });
    if (!whole) {
      VMRPC_LOG(kInfo, "host", "connection " + std::to_string(id) + " kept by the service manager is incomplete " +
                                   (c.sock ? "(a part is missing)" : "(its peer left)") + "; dropping it");
      continue;
    }
    h.conns.push_back(std::move(c));
  }
  return h;
}
}  // namespace

std::string fd_store_name(uint64_t connection_id, const char* kind, int slot) {
  std::string n = "c" + std::to_string(connection_id) + "." + kind;
  if (slot >= 0) n += std::to_string(slot);
  return n;
}

void HostEndpoint::Impl::store_fds(const Connection& c) {
  if (!opts_.store_fd) return;
  opts_.store_fd(fd_store_name(c.id, "sock"), c.sock.get());
  opts_.store_fd(fd_store_name(c.id, "region"), c.memfd.get());
  for (size_t i = 0; i < c.host_rx.size(); ++i) opts_.store_fd(fd_store_name(c.id, "hrx", int(i)), c.host_rx[i].get());
  for (size_t i = 0; i < c.guest_rx.size(); ++i) opts_.store_fd(fd_store_name(c.id, "grx", int(i)), c.guest_rx[i].get());
}

void HostEndpoint::Impl::unstore_fds(const Connection& c) {
  if (!opts_.unstore_fd) return;
  opts_.unstore_fd(fd_store_name(c.id, "sock"));
  opts_.unstore_fd(fd_store_name(c.id, "region"));
  for (size_t i = 0; i < c.host_rx.size(); ++i) opts_.unstore_fd(fd_store_name(c.id, "hrx", int(i)));
  for (size_t i = 0; i < c.guest_rx.size(); ++i) opts_.unstore_fd(fd_store_name(c.id, "grx", int(i)));
}

void HostEndpoint::Impl::adopt_handover(const std::string& description) { adopt(parse_handover(description)); }

void HostEndpoint::Impl::adopt_inherited(std::vector<NamedFd> fds) {
  Handover h = handover_from_named_fds(std::move(fds), layout_.slot_count);
  if (!h.listen) {
    VMRPC_LOG(kWarn, "host", "the service manager kept no listening socket; listening on " + opts_.socket_path + " anew");
    listen_new();
    h.listen = std::move(listen_);
  }
  adopt(std::move(h));
}

void HostEndpoint::Impl::adopt(Handover h) {
  listen_ = std::move(h.listen);
  close_on_exec(listen_.get());
  uint64_t max_id = 0;
  for (auto& hc : h.conns) {
    auto c = std::make_unique<Connection>();
    c->id = hc.id;
    c->sock = std::move(hc.sock);
    c->memfd = std::move(hc.memfd);
    c->host_rx = std::move(hc.host_rx);
    c->guest_rx = std::move(hc.guest_rx);
    for (int fd : {c->sock.get(), c->memfd.get()}) close_on_exec(fd);
    for (const auto* list : {&c->host_rx, &c->guest_rx})
      for (const auto& fd : *list) close_on_exec(fd.get());
    const uint32_t n = layout_.slot_count;
    struct stat st{};
    if (c->host_rx.size() != n || c->guest_rx.size() != n || ::fstat(c->memfd.get(), &st) != 0 ||
        static_cast<uint64_t>(st.st_size) != layout_.region_bytes) {
      VMRPC_LOG(kWarn, "host", "connection " + std::to_string(c->id) +
                                   " handed over does not fit this stub's --slots/--region-bytes; "
                                   "dropping it (its VM loses the device)");
      continue;
    }
    c->map = Mapping::map_shared(c->memfd.get(), layout_.region_bytes, "region");
    Layout layout = layout_;
    layout.host_map_address = opts_.spawn_worker ? opts_.worker_map_address
                                                 : reinterpret_cast<uint64_t>(c->map.data());
    c->view = RegionView(c->map.data(), layout);
    c->slots = std::make_unique<SlotRuntime[]>(n);
    for (uint32_t i = 0; i < n; ++i) {
      c->slots[i].doorbell = Op{Op::kDoorbell, c.get(), i, 0};
      c->slots[i].worker_exit = Op{Op::kWorkerExit, c.get(), i, 0};
    }
    c->socket_poll = Op{Op::kSocketPoll, c.get(), 0, 0};
    // Its clients were saved by the stub before us (or are lost, if it crashed): like a
    // restored region's, but at once (below), not at the VM's next call.
    c->image_token = ordering::load_acquire(c->view.header().image_token);
    c->replaced = true;
    c->replaced_token = c->image_token;
    c->handed_over = true;
    try {
      service_.connection_opened(c->id, c->view);
    } catch (const std::exception& e) {
      VMRPC_LOG(kWarn, "host", std::string("service refused a handed-over connection: ") + e.what());
      continue;
    }
    max_id = std::max(max_id, c->id);
    Connection* raw = c.release();
    conns_.insert(raw);
    count_user(*raw);
    {
      std::lock_guard l(conns_mu_);
      by_id_[raw->id] = raw;
    }
    store_fds(*raw);
    arm_socket_poll(*raw);
    for (uint32_t i = 0; i < n; ++i) arm_doorbell(*raw, i);
    {
      std::lock_guard l(stats_mu_);
      ++stats_.connections_open;
      ++stats_.connections_total;
    }
    VMRPC_LOG(kInfo, "host", "connection " + std::to_string(raw->id) +
                                 " handed over by the previous stub process; its clients come back now");
    // Every connection's clients at once, whether or not their programs call: one that
    // opened another connection's IPC memory comes back whole only once that one's exporter
    // is back too (on_region_restored tries it again then), and an exporter whose program
    // idles would otherwise never come back. The region is live, not an image being loaded.
    collect_restored(*raw);
  }
  next_id_ = max_id + 1;
}

// ---------------------------------------------------------------- service thread

void HostEndpoint::Impl::serve_slot(Connection* c, uint32_t slot, SlotControlHandle* control) {
  auto& ctl = c->view.control(slot);
  SlotRuntime& rt = c->slots[slot];
  const SlotInfo info{c->id, slot, ordering::load_relaxed(ctl.owner_tag)};
  std::unique_ptr<SlotService> svc;
  try {
    svc = service_.open(info);
  } catch (const std::exception& e) {
    VMRPC_LOG(kWarn, "host", std::string("service refused slot: ") + e.what());
  }
  SlotServer server{c->view, slot, c->host_rx[slot].get(), c->guest_rx[slot].get(), info, epoch_, &rt.stop,
                    [this](const std::string&) {
                      std::lock_guard l(stats_mu_);
                      ++stats_.bad_batches_total;
                    }};
  server.region_replaced = &rt.region_replaced;
  {
    std::lock_guard l(control->svc_mu);
    control->svc = svc.get();
  }
  server.gate = control->gate.get();
  vmrpc::serve_slot(server, svc.get());
  {
    std::lock_guard l(control->svc_mu);
    control->svc = nullptr;
  }
  drop_control(c->id, slot);
  {
    std::lock_guard l(stats_mu_);
    --stats_.slots_serving;
    ++stats_.slots_closed_total;
  }
  post({Message::kSlotDone, c, slot});
}

// ------------------------------------------------------------------------ public

HostEndpoint::HostEndpoint(HostEndpointOptions options, Service& service)
    : impl_(std::make_unique<Impl>(std::move(options), service)) {}
HostEndpoint::~HostEndpoint() { stop(); }
void HostEndpoint::start() { impl_->start(); }
void HostEndpoint::stop() { impl_->stop(); }
HostEndpointStats HostEndpoint::stats() const { return impl_->stats(); }

std::vector<ServedSlot> HostEndpoint::served_slots() const { return impl_->served(); }

namespace {
std::string not_served(uint64_t connection, uint32_t slot) {
  return "connection " + std::to_string(connection) + " slot " + std::to_string(slot) + " is not being served";
}
// One request to a worker and its answer (progress messages on the way go to `progress`).
bool worker_request(SlotControlHandle& h, worker_control::Op op, std::span<const std::byte> payload,
                    std::vector<std::byte>* reply, const SlotService::Progress& progress, std::string* why) {
  std::lock_guard l(h.worker_mu);
  if (!worker_control::send(h.worker_fd.get(), op, payload)) {
    if (why) *why = "the worker (pid " + std::to_string(h.info.worker_pid) + ") is gone";
    return false;
  }
  worker_control::Op got;
  std::vector<std::byte> msg;
  while (worker_control::receive(h.worker_fd.get(), &got, &msg, -1)) {
    if (got == worker_control::Op::kProgress) {
      if (progress) progress(msg);
      continue;
    }
    if (got == worker_control::Op::kReply) {
      if (reply) *reply = std::move(msg);
      return true;
    }
    if (why) *why = std::string(reinterpret_cast<const char*>(msg.data()), msg.size());
    return false;
  }
  if (why) *why = "the worker (pid " + std::to_string(h.info.worker_pid) + ") ended during the request";
  return false;
}
}  // namespace

bool HostEndpoint::hold_slot(uint64_t connection_id, uint32_t slot, std::chrono::milliseconds timeout,
                             std::string* why) {
  auto h = impl_->control_of(connection_id, slot);
  if (!h) {
    if (why) *why = not_served(connection_id, slot);
    return false;
  }
  if (h->gate) {
    if (h->gate->hold(timeout)) return true;
    if (why) *why = "the client did not reach a call boundary in " + std::to_string(timeout.count()) + " ms";
    return false;
  }
  const uint64_t ms = static_cast<uint64_t>(timeout.count());
  return worker_request(*h, worker_control::Op::kHold, std::as_bytes(std::span(&ms, 1)), nullptr, {}, why);
}

void HostEndpoint::set_hold_new_slots(bool on) {
  std::lock_guard l(impl_->new_slot_mu_);
  impl_->hold_new_ = on;
}

void HostEndpoint::release_slot(uint64_t connection_id, uint32_t slot) {
  auto h = impl_->control_of(connection_id, slot);
  if (!h) return;
  if (h->gate)
    h->gate->release();
  else
    worker_request(*h, worker_control::Op::kRelease, {}, nullptr, {}, nullptr);
}

bool HostEndpoint::snapshot_slot(uint64_t connection_id, uint32_t slot, std::vector<std::byte>* reply,
                                 std::string* why) {
  auto h = impl_->control_of(connection_id, slot);
  if (!h) {
    if (why) *why = not_served(connection_id, slot);
    return false;
  }
  if (!h->gate) return worker_request(*h, worker_control::Op::kSnapshot, {}, reply, {}, why);
  std::lock_guard l(h->svc_mu);
  if (!h->svc) {
    if (why) *why = not_served(connection_id, slot);
    return false;
  }
  *reply = h->svc->snapshot();
  return true;
}

bool HostEndpoint::control_slot(uint64_t connection_id, uint32_t slot, std::span<const std::byte> request,
                                std::vector<std::byte>* reply, const SlotService::Progress& progress,
                                std::string* why) {
  auto h = impl_->control_of(connection_id, slot);
  if (!h) {
    if (why) *why = not_served(connection_id, slot);
    return false;
  }
  if (!h->gate) return worker_request(*h, worker_control::Op::kControl, request, reply, progress, why);
  // Thread mode: the service itself is reached through the task the gate runs.
  bool ran = false;
  std::vector<std::byte> answer;
  const auto task = [&] {
    if (!h->svc) return;
    answer = h->svc->control(request, progress);
    ran = true;
  };
  if (!h->gate->run(task, std::chrono::hours(24)) || !ran) {
    if (why) *why = "connection " + std::to_string(connection_id) + " slot " + std::to_string(slot) + " ended";
    return false;
  }
  if (reply) *reply = std::move(answer);
  return true;
}
const std::string& HostEndpoint::socket_path() const { return impl_->path(); }

// A region image token nobody can guess or repeat (never 0: that means "none").
uint64_t new_image_token() {
  uint64_t t = 0;
  while (t == 0)
    if (::getrandom(&t, sizeof t, 0) != sizeof t) t = now_ns() ^ (uint64_t(::getpid()) << 40);
  return t;
}
std::string HostEndpoint::prepare_handover() { return impl_->handover(); }

bool HostEndpoint::Impl::stop_accepting(std::chrono::milliseconds timeout) {
  {
    std::lock_guard l(pause_mu_);
    accept_quiet_ = false;
  }
  accept_pause_ = true;
  ring(wake_.get());
  std::unique_lock l(pause_mu_);
  return pause_cv_.wait_for(l, timeout, [&] { return accept_quiet_; });
}

void HostEndpoint::Impl::resume_accepting() {
  accept_pause_ = false;
  ring(wake_.get());
}

bool HostEndpoint::stop_accepting(std::chrono::milliseconds timeout) { return impl_->stop_accepting(timeout); }
void HostEndpoint::resume_accepting() { impl_->resume_accepting(); }

std::vector<uint64_t> HostEndpoint::connection_ids() const {
  std::lock_guard l(impl_->conns_mu_);
  std::vector<uint64_t> v;
  for (const auto& [id, c] : impl_->by_id_) v.push_back(id);
  return v;
}
bool HostEndpoint::set_image_token(uint64_t connection_id, uint64_t token) {
  return impl_->set_token(connection_id, token);
}
uint64_t HostEndpoint::image_token(uint64_t connection_id) const { return impl_->token_of(connection_id); }
bool HostEndpoint::adopt_restored_slot(uint64_t connection_id, uint32_t slot, std::chrono::milliseconds timeout,
                                       std::string* why) {
  return impl_->adopt(connection_id, slot, timeout, why);
}
void HostEndpoint::lose_restored_slot(uint64_t connection_id, uint32_t slot) { impl_->lose(connection_id, slot); }

}  // namespace vmrpc
