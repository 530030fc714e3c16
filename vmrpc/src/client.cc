#include "vmrpc/client.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

#include "vmrpc/fd.h"
#include "vmrpc/ivshmem_protocol.h"
#include "vmrpc/knobs.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"

namespace vmrpc {

using wire::ChannelStatus;
using wire::SlotState;

namespace {
uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}
}  // namespace

// ------------------------------------------------------------------ ClientSlot

ClientSlot::ClientSlot(const RegionView& region, GuestDoorbell& doorbell, uint32_t slot)
    : region_(region), doorbell_(doorbell), slot_(slot), batch_(region.stack(slot)), heap_(region, slot + 1) {}

std::unique_ptr<ClientSlot> ClientSlot::claim(const RegionView& region, GuestDoorbell& doorbell, std::string* why) {
  const uint32_t n = region.layout().slot_count;
  for (uint32_t i = 0; i < n; ++i) {
    auto& ctl = region.control(i);
    uint32_t expected = static_cast<uint32_t>(SlotState::kFree);
    if (!ordering::compare_exchange(ctl.state, expected, static_cast<uint32_t>(SlotState::kClaimed))) continue;
    return adopt(region, doorbell, i, why);
  }
  if (why) *why = "all " + std::to_string(n) + " client slots of the region are in use; close other CUDA processes "
                 "of this VM or give it more slots (VMRPC_SLOTS on the host)";
  return nullptr;
}

std::unique_ptr<ClientSlot> ClientSlot::adopt(const RegionView& region, GuestDoorbell& doorbell, uint32_t slot,
                                              std::string* why) {
  auto& ctl = region.control(slot);
  ordering::store_relaxed(ctl.owner_tag, static_cast<uint32_t>(::getpid()));
  ordering::store_relaxed(ctl.guest_spin_ns, static_cast<uint64_t>(knobs::kGuestSpinNs.get()));
  std::unique_ptr<ClientSlot> s(new ClientSlot(region, doorbell, slot));
  if (!s->hello(why)) return nullptr;  // the destructor releases the slot
  return s;
}

bool ClientSlot::hello(std::string* why) {
  wire::HelloArgs a{wire::kAbiVersion, static_cast<uint32_t>(::getpid()), 0};
  auto r = call(static_cast<uint32_t>(wire::MessageId::kHello), std::as_bytes(std::span(&a, 1)),
                sizeof(wire::HelloReply));
  if (r.status == static_cast<int32_t>(ChannelStatus::kRefused)) {
    if (why) *why = "the host serves as many programs of this VM at once as it allows (vmcuda-stub --max-clients); "
                    "try again once another has ended";
    return false;
  }
  if (r.status != 0 || r.bytes.size() != sizeof(wire::HelloReply)) {
    if (why) *why = "the host did not accept the slot (status " + std::to_string(r.status) + ")";
    return false;
  }
  wire::HelloReply h;
  std::memcpy(&h, r.bytes.data(), sizeof h);
  if (h.abi_version != wire::kAbiVersion || h.slot_index != slot_) {
    if (why) *why = "the host answered Hello for ABI " + std::to_string(h.abi_version) + " slot " +
                    std::to_string(h.slot_index);
    return false;
  }
  host_epoch_ = h.host_epoch;
  return true;
}

ClientSlot::~ClientSlot() {
  if (in_flight_) wait();  // the host may still use our heap blocks
  heap_.free_all();
  auto& ctl = region_.control(slot_);
  ordering::store_release(ctl.state, static_cast<uint32_t>(SlotState::kClosing));
  ordering::full_fence();
  if (!lost_) doorbell_.ring(slot_);
}

ChannelStatus ClientSlot::flush() {
  if (auto st = submit(); st != ChannelStatus::kOk) return st;
  return wait();
}

ChannelStatus ClientSlot::submit() {
  if (lost_) return ChannelStatus::kTransportLost;
  auto& ctl = region_.control(slot_);
  if (const uint32_t hs = ordering::load_acquire(ctl.host_state);
      hs == static_cast<uint32_t>(wire::HostSlotState::kFailed)) {
    batch_.reset();
    return ChannelStatus::kHandlerFailed;  // the host's server of this slot died: nobody would answer
  } else if (hs == static_cast<uint32_t>(wire::HostSlotState::kStateLost)) {
    batch_.reset();
    return ChannelStatus::kStateLost;  // restored without its GPU state: nobody has it
  } else if (hs == static_cast<uint32_t>(wire::HostSlotState::kTimedOut)) {
    batch_.reset();
    return ChannelStatus::kLaunchTimeout;  // ended for running a kernel past the time limit
  } else if (hs == static_cast<uint32_t>(wire::HostSlotState::kRefused)) {
    batch_.reset();
    return ChannelStatus::kRefused;  // over the VM's limit of clients at once: release the slot
  }
  const uint32_t bytes = batch_.finish();
  ordering::store_relaxed(ctl.request_bytes, bytes);
  const uint64_t seq = ++seq_;
  ordering::store_release(ctl.request_seq, seq);  // frames and request_bytes before the sequence
  ordering::full_fence();                         // pairs with the host's fence before it sleeps
  if (ordering::load_relaxed(ctl.host_sleeping) ||
      ordering::load_relaxed(ctl.host_state) != static_cast<uint32_t>(wire::HostSlotState::kServing))
    doorbell_.ring(slot_);
  in_flight_ = true;
  return ChannelStatus::kOk;
}

ChannelStatus ClientSlot::wait() {
  if (!in_flight_) return lost_ ? ChannelStatus::kTransportLost : ChannelStatus::kOk;
  in_flight_ = false;
  const bool ok = wait_response(seq_);
  batch_.reset();
  if (!ok) {
    lost_ = true;
    return ChannelStatus::kTransportLost;
  }
  if (const int32_t late = ordering::load_relaxed(region_.control(slot_).late_status); late != 0 && late_ == 0)
    late_ = late;
  return static_cast<ChannelStatus>(ordering::load_relaxed(region_.control(slot_).batch_status));
}

bool ClientSlot::wait_response(uint64_t seq) {
  auto& ctl = region_.control(slot_);
  auto answered = [&] { return ordering::load_acquire(ctl.response_seq) == seq; };
  if (answered()) return true;
  const uint64_t start = now_ns();
  const uint64_t deadline = start + static_cast<uint64_t>(knobs::kGuestSpinNs.get());
  while (now_ns() < deadline) {
    if (answered()) return true;
    ordering::cpu_relax();
  }
  if (doorbell_.can_sleep()) {
    for (;;) {
      ordering::store_release(ctl.guest_sleeping, 1u);
      ordering::full_fence();  // pairs with the host's fence between response_seq and guest_sleeping
      if (answered()) break;
      if (!doorbell_.wait(slot_)) {
        ordering::store_relaxed(ctl.guest_sleeping, 0u);
        return answered();
      }
      // A wait slice passed (or a stray interrupt) without the answer: ring once more. A
      // host busy with the call ignores it; one that never heard the first ring (this VM
      // was saved and restored meanwhile, and its new host waits for the VM to show that
      // it runs) starts now.
      if (!answered()) doorbell_.ring(slot_);
    }
    ordering::store_relaxed(ctl.guest_sleeping, 0u);
    return true;
  }
  // No interrupts (e.g. BAR0 doorbell without a driver): keep polling, yield the CPU,
  // and check now and then that the host is still there.
  for (uint64_t i = 1;; ++i) {
    if (answered()) return true;
    if (i % 64 == 0) ::sched_yield();
    else ordering::cpu_relax();
    if (i % 65536 == 0 && !doorbell_.alive()) return answered();
  }
}

ClientSlot::Reply ClientSlot::call(uint32_t call_id, std::span<const std::byte> args, uint32_t reply_capacity) {
  auto f = batch_.append(call_id, args, reply_capacity);
  if (!f) {
    // No room behind what is queued: send that first.
    if (!batch_.empty()) {
      if (auto st = flush(); st != ChannelStatus::kOk) return {static_cast<int32_t>(st), {}};
    }
    f = batch_.append(call_id, args, reply_capacity);
    if (!f) return {static_cast<int32_t>(ChannelStatus::kBadFrame), {}};
  }
  if (auto st = flush(); st != ChannelStatus::kOk) return {static_cast<int32_t>(st), {}};
  auto r = batch_.result(*f);
  return {r.status, r.reply};
}

// --------------------------------------------------------------- LocalConnection

struct LocalConnection::State {
  UniqueFd sock;
  UniqueFd memfd;
  Mapping map;
  std::vector<UniqueFd> host_fds;  // ring the host
  std::vector<UniqueFd> own_fds;   // the host rings us
};

bool server_trusted(int fd, const std::string& path, std::optional<uid_t> service_uid, std::string* why) {
  ucred peer{};
  socklen_t length = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) < 0) {
    *why = "cannot tell who serves " + path + " (SO_PEERCRED: " + std::strerror(errno) + ")";
    return false;
  }
  if (peer.uid == 0 || peer.uid == ::geteuid() || peer.uid == ::getuid() || (service_uid && peer.uid == *service_uid))
    return true;
  *why = path + " is served by uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) +
         "), neither root, this user nor vmcuda's service user: it would receive this program's CUDA calls and "
         "data, so it is not used. Point VMCUDA_SOCKET at a stub of your own (vmcuda-run starts one in "
         "$XDG_RUNTIME_DIR) or ask who runs that one";
  return false;
}

std::unique_ptr<LocalConnection> LocalConnection::connect(const std::string& socket_path,
                                                          std::optional<uid_t> service_uid) {
  std::unique_ptr<LocalConnection> c(new LocalConnection);
  c->s_ = std::make_unique<State>();
  State& s = *c->s_;
  s.sock = ivshmem::connect_unix(socket_path);
  // Before anything is taken from it: another local user's socket at this path must never
  // receive this program's calls.
  if (std::string why; !server_trusted(s.sock.get(), socket_path, service_uid, &why))
    throw std::runtime_error("vmrpc: " + why);
  auto next = [&](int64_t& v, UniqueFd& fd) {
    if (!ivshmem::receive_message(s.sock.get(), v, fd))
      throw std::runtime_error("vmrpc: " + socket_path + " closed the connection during the handshake "
                               "(the stub may have refused it: see its log)");
  };
  int64_t v;
  UniqueFd fd;
  next(v, fd);
  if (v != ivshmem::kProtocolVersion)
    throw std::runtime_error("vmrpc: " + socket_path + " speaks ivshmem protocol " + std::to_string(v) + ", not 0");
  next(v, fd);
  if (v < 0 || v > 65535) throw std::runtime_error("vmrpc: bad peer id from " + socket_path);
  c->own_id_ = static_cast<uint32_t>(v);
  next(v, fd);
  if (v != ivshmem::kSharedMemoryId || !fd)
    throw std::runtime_error("vmrpc: " + socket_path + " sent no shared memory");
  s.memfd = std::move(fd);
  struct stat st{};
  if (::fstat(s.memfd.get(), &st) < 0) throw_errno("fstat shared memory");
  s.map = Mapping::map_shared(s.memfd.get(), static_cast<size_t>(st.st_size), "shared region");
  std::string why;
  auto layout = Layout::from_header(*reinterpret_cast<const wire::RegionHeader*>(s.map.data()),
                                    static_cast<uint64_t>(st.st_size), &why);
  if (!layout) throw std::runtime_error("vmrpc: " + why);
  // At the host's address when free, so that pointers into the heap mean the same on
  // both sides (region().same_address() says whether it worked).
  if (!map_at_host_address(s.memfd.get(), 0, *layout, s.map, &why))
    VMRPC_LOG(kInfo, "client", "region not at the host's address: " + why);
  const uint32_t n = layout->slot_count;
  while (s.host_fds.size() < n || s.own_fds.size() < n) {
    next(v, fd);
    if (!fd) continue;  // a peer left: not one we need
    if (v == c->own_id_) s.own_fds.push_back(std::move(fd));
    else if (v == layout->host_peer_id) s.host_fds.push_back(std::move(fd));
  }
  c->region_ = RegionView(s.map.data(), *layout);
  return c;
}

LocalConnection::~LocalConnection() = default;

void LocalConnection::ring(uint32_t slot) {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(s_->host_fds[slot].get(), &one, sizeof one);
}

bool LocalConnection::wait(uint32_t slot) {
  pollfd p[2] = {{s_->own_fds[slot].get(), POLLIN, 0}, {s_->sock.get(), POLLIN | POLLRDHUP, 0}};
  for (;;) {
    // Slices of a second, as the VM driver's waits: the caller looks again (and rings again).
    int rc = ::poll(p, 2, 1000);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return false;
    if (rc == 0) return true;
    if (p[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(p[0].fd, &v, sizeof v);
      return true;
    }
    if (p[1].revents && !alive()) return false;
    // A message from the server: the host peer leaving (its id without an fd) means
    // it is gone; anything else is nothing we need.
    if (p[1].revents & POLLIN) {
      int64_t v;
      UniqueFd fd;
      if (!ivshmem::receive_message(s_->sock.get(), v, fd)) return false;
      if (!fd && v == region_.layout().host_peer_id) {
        host_left_ = true;
        return false;
      }
    }
  }
}

bool LocalConnection::alive() {
  if (host_left_) return false;
  char c;
  ssize_t n = ::recv(s_->sock.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  return true;
}

}  // namespace vmrpc
