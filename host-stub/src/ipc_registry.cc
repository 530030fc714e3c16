#include "ipc_registry.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <set>
#include <vector>

#include "vmrpc/log.h"

namespace vmcuda::host {

namespace {

void random_bytes(void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    const ssize_t got = ::getrandom(b, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      vmrpc::throw_errno("getrandom (IPC token)");
    }
    b += got;
    n -= static_cast<size_t>(got);
  }
}

// One message of the worker <-> stub protocol (a request or its answer).
struct Message {
  enum Op : uint32_t { kPublish = 1, kLookup, kRevoke, kAnswer, kPark, kRepublish, kKnown };
  uint32_t op = 0;
  uint32_t ok = 0;  // answers: 1 found / done
  IpcToken token{};
  IpcRecord rec{};
};

bool send_message(int sock, const Message& m, int fd) {
  msghdr msg{};
  iovec iov{const_cast<Message*>(&m), sizeof m};
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
  ssize_t n;
  do n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof m);
}

// False on end of file, an error or a message of the wrong size (the peer is then dropped).
bool receive_message(int sock, Message* m, vmrpc::UniqueFd* fd) {
  fd->reset();
  msghdr msg{};
  iovec iov{m, sizeof *m};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int got;
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
      fd->reset(got);
    }
  return n == static_cast<ssize_t>(sizeof *m) && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
}

class LocalChannel : public IpcChannel {
 public:
  explicit LocalChannel(std::shared_ptr<IpcRegistry> r) : registry_(std::move(r)) {}
  bool publish(const IpcRecord& rec, int fd, IpcToken* token) override { return publish_local(rec, fd, nullptr, token); }
  bool lookup(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd) override {
    return registry_->lookup(token, rec, fd);
  }
  bool in_process() const override { return true; }
  bool publish_local(const IpcRecord& rec, int fd, std::shared_ptr<void> local, IpcToken* token) override {
    vmrpc::UniqueFd copy(fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1);
    if (fd >= 0 && !copy) return false;
    *token = registry_->publish(rec, std::move(copy), std::move(local));
    return true;
  }
  bool lookup_local(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd, std::shared_ptr<void>* local) override {
    return registry_->lookup(token, rec, fd, local);
  }
  void revoke(const IpcToken& token, uint64_t owner) override { registry_->revoke(token, owner); }
  void park(const IpcToken& token, uint64_t owner) override { registry_->park(token, owner); }
  bool republish(const IpcToken& token, const IpcRecord& rec, int fd, std::shared_ptr<void> local) override {
    vmrpc::UniqueFd copy(fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1);
    if (fd >= 0 && !copy) return false;
    return registry_->republish(token, rec, std::move(copy), std::move(local));
  }
  bool known(const IpcToken& token) override { return registry_->known(token); }

 private:
  std::shared_ptr<IpcRegistry> registry_;
};

class WorkerChannel : public IpcChannel {
 public:
  explicit WorkerChannel(vmrpc::UniqueFd fd) : fd_(std::move(fd)) {}
  bool publish(const IpcRecord& rec, int fd, IpcToken* token) override {
    Message m;
    m.op = Message::kPublish;
    m.rec = rec;
    Message a;
    vmrpc::UniqueFd none;
    if (!ask(m, fd, &a, &none) || !a.ok) return false;
    *token = a.token;
    return true;
  }
  bool lookup(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd) override {
    Message m;
    m.op = Message::kLookup;
    m.token = token;
    Message a;
    if (!ask(m, -1, &a, fd) || !a.ok) return false;
    *rec = a.rec;
    return a.rec.kind != IpcRecord::kMemory || *fd;
  }
  void revoke(const IpcToken& token, uint64_t owner) override {
    Message m;
    m.op = Message::kRevoke;
    m.token = token;
    m.rec.owner = owner;
    Message a;
    vmrpc::UniqueFd none;
    ask(m, -1, &a, &none);
  }
  void park(const IpcToken& token, uint64_t owner) override {
    Message m;
    m.op = Message::kPark;
    m.token = token;
    m.rec.owner = owner;
    Message a;
    vmrpc::UniqueFd none;
    ask(m, -1, &a, &none);
  }
  bool republish(const IpcToken& token, const IpcRecord& rec, int fd, std::shared_ptr<void>) override {
    Message m;
    m.op = Message::kRepublish;
    m.token = token;
    m.rec = rec;
    Message a;
    vmrpc::UniqueFd none;
    return ask(m, fd, &a, &none) && a.ok;
  }
  bool known(const IpcToken& token) override {
    Message m;
    m.op = Message::kKnown;
    m.token = token;
    Message a;
    vmrpc::UniqueFd none;
    return ask(m, -1, &a, &none) && a.ok;
  }

 private:
  bool ask(const Message& m, int fd, Message* answer, vmrpc::UniqueFd* got) {
    std::lock_guard l(mu_);  // one request at a time (thread mode never uses this channel)
    return send_message(fd_.get(), m, fd) && receive_message(fd_.get(), answer, got) && answer->op == Message::kAnswer;
  }
  std::mutex mu_;
  vmrpc::UniqueFd fd_;
};

}  // namespace

IpcToken IpcRegistry::publish(const IpcRecord& rec, vmrpc::UniqueFd fd, std::shared_ptr<void> local) {
  IpcToken t;
  std::lock_guard l(mu_);
  do random_bytes(t.data(), t.size());
  while (entries_.count(t));
  entries_[t] = Entry{rec, std::move(fd), std::move(local)};
  entries_[t].rec.generation = ++generation_;
  return t;
}

bool IpcRegistry::lookup(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd, std::shared_ptr<void>* local) const {
  std::lock_guard l(mu_);
  auto it = entries_.find(token);
  if (it == entries_.end() || it->second.parked) return false;
  *rec = it->second.rec;
  if (local) *local = it->second.local;
  fd->reset();
  if (it->second.fd) {
    fd->reset(::fcntl(it->second.fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!*fd) {
      VMRPC_LOG(kWarn, "ipc", std::string("cannot pass an IPC memory handle on: ") + std::strerror(errno) +
                                  (errno == EMFILE ? " (the stub's open-file limit, LimitNOFILE=, is too low)" : ""));
      return false;
    }
  }
  return true;
}

void IpcRegistry::revoke(const IpcToken& token, uint64_t owner) {
  std::shared_ptr<void> last;  // an in-process object may make driver calls as it goes: not under the lock
  std::lock_guard l(mu_);
  if (auto it = entries_.find(token); it != entries_.end() && it->second.rec.owner == owner) {
    last = std::move(it->second.local);
    entries_.erase(it);
  }
}

void IpcRegistry::park(const IpcToken& token, uint64_t owner) {
  std::shared_ptr<void> last;
  std::lock_guard l(mu_);
  if (auto it = entries_.find(token); it != entries_.end() && it->second.rec.owner == owner) {
    it->second.parked = true;
    it->second.fd.reset();  // the memory can go: nothing of the table holds it
    last = std::move(it->second.local);
  }
}

bool IpcRegistry::republish(const IpcToken& token, const IpcRecord& rec, vmrpc::UniqueFd fd,
                            std::shared_ptr<void> local) {
  std::shared_ptr<void> last;
  std::lock_guard l(mu_);
  auto it = entries_.find(token);
  if (it != entries_.end() && !it->second.parked && it->second.rec.owner != rec.owner) return false;
  Entry& e = entries_[token];
  last = std::move(e.local);
  e.rec = rec;
  e.rec.generation = ++generation_;
  e.fd = std::move(fd);
  e.local = std::move(local);
  e.parked = false;
  return true;
}

void IpcRegistry::revoke_owner(uint64_t owner) {
  std::vector<std::shared_ptr<void>> last;
  std::lock_guard l(mu_);
  std::erase_if(entries_, [&](auto& e) {
    if (e.second.rec.owner != owner) return false;
    last.push_back(std::move(e.second.local));
    return true;
  });
}

bool IpcRegistry::known(const IpcToken& token) const {
  std::lock_guard l(mu_);
  return entries_.contains(token);
}

size_t IpcRegistry::size() const {
  std::lock_guard l(mu_);
  return entries_.size();
}

std::shared_ptr<IpcChannel> local_ipc_channel(std::shared_ptr<IpcRegistry> registry) {
  return std::make_shared<LocalChannel>(std::move(registry));
}

std::shared_ptr<IpcChannel> worker_ipc_channel(vmrpc::UniqueFd fd) {
  return std::make_shared<WorkerChannel>(std::move(fd));
}

void serve_ipc_worker(std::shared_ptr<IpcRegistry> registry, vmrpc::UniqueFd sock) {
  // The owners this worker published for: a worker is trusted stub code, but it may die at
  // any point, and then its exports must go.
  std::set<uint64_t> owners;
  Message m;
  vmrpc::UniqueFd fd;
  while (receive_message(sock.get(), &m, &fd)) {
    Message a;
    a.op = Message::kAnswer;
    vmrpc::UniqueFd out;
    switch (m.op) {
      case Message::kPublish:
        if ((m.rec.kind == IpcRecord::kMemory) == static_cast<bool>(fd) && m.rec.owner) {
          owners.insert(m.rec.owner);
          a.token = registry->publish(m.rec, std::move(fd));
          a.ok = 1;
        }
        break;
      case Message::kLookup:
        a.ok = registry->lookup(m.token, &a.rec, &out) ? 1 : 0;
        break;
      case Message::kRevoke:
        registry->revoke(m.token, m.rec.owner);
        a.ok = 1;
        break;
      case Message::kPark:
        registry->park(m.token, m.rec.owner);
        a.ok = 1;
        break;
      case Message::kKnown:
        a.ok = registry->known(m.token) ? 1 : 0;
        break;
      case Message::kRepublish:
        if ((m.rec.kind == IpcRecord::kMemory) == static_cast<bool>(fd) && m.rec.owner &&
            registry->republish(m.token, m.rec, std::move(fd))) {
          owners.insert(m.rec.owner);
          a.ok = 1;
        }
        break;
      default:
        break;
    }
    if (!send_message(sock.get(), a, out.get())) break;
  }
  for (uint64_t o : owners) registry->revoke_owner(o);
}

IpcContextKeeper::~IpcContextKeeper() {
  if (orphaned && ctx) api->cuCtxDestroy_v2(ctx);
}

IpcSharedEvent::~IpcSharedEvent() {
  if (event) api->cuEventDestroy_v2(event);  // before its context (the keeper) may go
}

uint64_t random_ipc_owner() {
  uint64_t v = 0;
  while (v == 0) random_bytes(&v, sizeof v);
  return v;
}

}  // namespace vmcuda::host
