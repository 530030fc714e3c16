// Host side of the channel: an ivshmem server on a UNIX socket (one per VM) that is
// also the peer guest doorbells reach, plus one service thread per claimed slot.
//
// Each connection (a QEMU, or a local process using the same protocol) gets its own
// region (memfd) with the connecting side as peer 0 (so QEMU can use master=on and be
// saved) and this endpoint as peer 1. Slot i uses vector i in both directions.
//
// The event loop (accepts, peers joining and leaving, doorbells of slots that have no
// service thread yet) runs on liburing in one thread. A slot's service thread, once
// started, waits on its own doorbell eventfd (spin, then sleep) until the slot closes.
#pragma once

#include <atomic>
#include <chrono>
#include <span>
#include <vector>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "vmrpc/knobs.h"
#include "vmrpc/region.h"
#include "vmrpc/service.h"
#include "vmrpc/unix_socket.h"

namespace vmrpc {

// What a worker process needs to serve one slot (its fds are this process's; the
// spawner passes them on, e.g. with posix_spawn file actions).
struct WorkerSpec {
  int memfd;          // the region
  int doorbell_fd;    // the slot's doorbell (the guest rings it)
  int notify_fd;      // the guest's vector (we ring it)
  uint32_t slot;
  uint64_t connection_id;
  uint32_t owner_tag;
  uint64_t host_epoch;
  RegionConfig region;
  uint64_t map_address;  // where the worker must map the region (RegionHeader::host_map_address; 0: anywhere)
  int control_fd = -1;   // the worker's end of the control socket (worker.h kWorkerControlFd)
  bool start_held = false;  // park before the first call (HostEndpoint::set_hold_new_slots)
};

// A file descriptor by name, as a service manager's fd store keeps it.
struct NamedFd {
  std::string name;
  int fd = -1;
};
// The fd store's names: "listen"; per connection ID "cID.sock", "cID.region" and, per slot
// i, "cID.hrxI" (the guest rings it) and "cID.grxI" (we ring it). kind: sock, region, hrx, grx.
std::string fd_store_name(uint64_t connection_id, const char* kind, int slot = -1);
inline constexpr const char* kListenFdName = "listen";

// A connection's region replaced by a saved image (HostEndpointOptions::on_region_restored).
struct RestoredRegion {
  uint64_t connection_id = 0;
  uint64_t image_token = 0;     // RegionHeader::image_token of the image
  std::vector<uint32_t> slots;  // slots whose client was in the middle of its session
  // Not a VM image: the connection was handed over by the stub process before this one
  // (vmcudactl upgrade, a restart or crash under a service manager).
  bool handed_over = false;
};

struct HostEndpointOptions {
  std::string socket_path;
  RegionConfig region = RegionConfig::from_knobs();
  uint32_t max_connections = 64;  // limit on untrusted input: each costs a region
  // When set, each claimed slot is served by a worker process this starts (returning its
  // pid, or -1) instead of a thread of this process: the worker runs serve_slot()
  // (slot_server.h). A client that breaks its worker (a GPU fault poisons every CUDA
  // context of a process) cannot break anyone else's. The endpoint watches the worker,
  // kills it when the connection goes, and frees the slot when it ends.
  std::function<int(const WorkerSpec&)> spawn_worker;
  // Worker mode: called on the loop thread once a worker has ended and been reaped (what it
  // held in shared accounting goes back), with its wait status.
  std::function<void(int pid, int status)> on_worker_exit;
  // Worker mode: ends a worker that is given up on (its connection went, or it outlived its
  // program by VMRPC_WORKER_EXIT_MS), for a service whose GPU work outlives the process (MPS:
  // the work must be ended first). Called on the loop thread, so it must not block: it owns
  // `pidfd` (a duplicate of the worker's) and must end the process soon, by pidfd_send_signal
  // (which never reaches another process). Unset: SIGKILL at once.
  std::function<void(int pid, UniqueFd pidfd)> end_worker;
  // Worker mode: the address every worker maps its region at, written into the header
  // (RegionHeader::host_map_address) so that guests can map it there too. Workers map it
  // before anything else, so it is free in them; 0: anywhere (no same-address mapping).
  uint64_t worker_map_address = static_cast<uint64_t>(knobs::kWorkerMapAddress.get());
  // Called on a thread of the endpoint's own (never the loop's) when a connection's region
  // was replaced by a saved image (its image token changed: a VM restore or a snapshot
  // revert). It must decide every listed slot: adopt_restored_slot() (then bring the
  // client's state back through control_slot() and release_slot()) or
  // lose_restored_slot(). Until then the slot's guest waits. Unset: every slot is lost.
  // Also called with no slot (an image with no client mid-session).
  std::function<void(const RestoredRegion&)> on_region_restored;
  // A service manager's file descriptor store (systemd: FDSTORE=1), so that the VM's
  // connections outlive this process (a restart, a crash): when set, the endpoint stores
  // its listening socket at start and every connection's socket, region and eventfds when
  // the connection opens (names: fd_store_name()), and unstores them when it closes.
  std::function<void(const std::string& name, int fd)> store_fd;
  std::function<void(const std::string& name)> unstore_fd;
  // What the service manager kept from the stub process before this one
  // (sd_listen_fds_with_names): start() adopts these instead of listening anew, like a
  // handover, and owns them (unknown names and incomplete connections are closed).
  std::vector<NamedFd> inherited_fds;
  // The socket file's mode, owner and group (QEMU's user must reach it; nobody else).
  SocketAccess socket_access;
  // Clients served at once, all connections together (a worker process or a thread each):
  // a guest that claims and releases slots fast cannot make the host start more. 0: no limit.
  uint32_t max_clients = 64;
  // Per user (the connecting process's uid): connections held at once, and new ones a second
  // after a burst of that many, so that one local user cannot take every connection nor keep
  // the event loop busy with handshakes. Beyond them a connection is closed at once.
  uint32_t max_connections_per_user = static_cast<uint32_t>(knobs::kMaxConnectionsPerUser.get());
  double connect_rate_per_user = static_cast<double>(knobs::kConnectRatePerUser.get());
};

// A slot being served (HostEndpoint::served_slots).
struct ServedSlot {
  uint64_t connection_id = 0;
  uint32_t slot = 0;
  uint32_t owner_tag = 0;  // guest-reported pid
  int worker_pid = -1;     // worker mode: the process serving it
};

struct HostEndpointStats {
  uint64_t connections_open = 0;     // live connections
  uint64_t connections_total = 0;
  uint64_t slots_serving = 0;        // slots with a service thread now
  uint64_t slots_opened_total = 0;
  uint64_t slots_closed_total = 0;   // by the guest or because its peer left
  uint64_t bad_batches_total = 0;
  uint64_t connections_refused_total = 0;  // over max_connections, per user, or too fast
  uint64_t clients_refused_total = 0;      // over max_clients
};

// A region image token nobody can guess or repeat (never 0: "none"); HostEndpoint::set_image_token.
uint64_t new_image_token();

class HostEndpoint {
 public:
  HostEndpoint(HostEndpointOptions options, Service& service);
  ~HostEndpoint();  // stops
  HostEndpoint(const HostEndpoint&) = delete;
  HostEndpoint& operator=(const HostEndpoint&) = delete;

  // Binds and listens (clients may connect once this returns), starts the loop.
  void start();
  // Closes every connection (their slots are closed) and joins all threads.
  void stop();

  HostEndpointStats stats() const;
  const std::string& socket_path() const;

  // ---- the control path (suspend/resume, status): any thread but the loop's.
  std::vector<ServedSlot> served_slots() const;
  // Holds a served slot at a call boundary (the batch being served finishes; the guest's
  // next one waits in its slot) until release_slot(). False (and why) when the slot is
  // not served or does not stop within `timeout`.
  bool hold_slot(uint64_t connection_id, uint32_t slot, std::chrono::milliseconds timeout, std::string* why);
  void release_slot(uint64_t connection_id, uint32_t slot);
  // While on, slots that start being served are held before their first call (a VM being
  // suspended: its new clients wait too); release_slot() lets each go.
  void set_hold_new_slots(bool on);
  // The slot service's snapshot() (status), without waiting for a call boundary.
  bool snapshot_slot(uint64_t connection_id, uint32_t slot, std::vector<std::byte>* reply, std::string* why);
  // Runs the slot service's control() with `request` on the slot's service thread (in its
  // worker process, in worker mode) and returns its reply; progress messages reach
  // `progress`. False (and why) when the slot is not served or ended meanwhile.
  bool control_slot(uint64_t connection_id, uint32_t slot, std::span<const std::byte> request,
                    std::vector<std::byte>* reply, const SlotService::Progress& progress, std::string* why);

  // ---- restored regions (README.md, "Restored regions"): any thread but the loop's.
  // Live connections, oldest first.
  std::vector<uint64_t> connection_ids() const;
  // Writes the region's image token (0 if the connection is gone) / reads it.
  bool set_image_token(uint64_t connection_id, uint64_t token);
  uint64_t image_token(uint64_t connection_id) const;
  // A slot listed in a RestoredRegion: starts serving it held (before its first call)
  // and returns once it is served (false and why when the connection went, or `timeout`).
  bool adopt_restored_slot(uint64_t connection_id, uint32_t slot, std::chrono::milliseconds timeout,
                           std::string* why);
  // A slot listed in a RestoredRegion whose client's GPU state is not here: its calls fail
  // with kStateLost (the guest library says what happened) until its guest releases it.
  void lose_restored_slot(uint64_t connection_id, uint32_t slot);

  // ---- handing over to a new stub process in place (vmcudactl upgrade). Makes the
  // listening socket and every connection's socket, region and eventfds survive exec() and
  // returns their description, for the environment variable kHandoverEnv of the process that
  // exec() starts: its endpoint's start() adopts them instead of listening anew, and treats
  // each region like a restored one (on_region_restored once its VM calls). Guests and QEMU
  // keep their connections. Any thread but the loop's; the endpoint stays usable (a failed
  // exec() changes nothing).
  static constexpr const char* kHandoverEnv = "VMRPC_HANDOVER";
  // Stops accepting connections, without closing the listening socket: new ones wait in its
  // backlog (for the next stub process, after a restart or an upgrade). Returns once no
  // accept is in progress (one that was finishes its handshake first), false after `timeout`.
  bool stop_accepting(std::chrono::milliseconds timeout);
  void resume_accepting();
  std::string prepare_handover();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vmrpc
