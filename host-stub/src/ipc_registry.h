// IPC between programs of one VM (calls.def 0x1a00; ipc.cc has the handlers): the VM's
// table of exported memory and events. A handle the guest holds is a random token; the
// table behind it lives in the VM's stub process only, so a token from another VM, a forged
// one or a revoked one (its allocation freed, its event destroyed, its exporter gone) names
// nothing. Memory travels as the exporter's POSIX fd of its physical memory, which the table
// keeps (a dup) until the export is revoked.
//
// Sessions reach the table through an IpcChannel: in the stub's process (`--isolation
// thread`, tests) directly; from a worker process (`--isolation process`) over a
// SOCK_SEQPACKET socket to the stub (kIpcFd), one request and one answer at a time, the fd
// travelling as SCM_RIGHTS. The stub serves each worker's socket on a thread of its own
// (serve_ipc_worker) and revokes what that worker exported when the socket closes (the
// worker ended, however).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "driver_api.h"
#include "vmrpc/fd.h"

namespace vmcuda::host {

// A worker's end of its IPC socket (vmrpc::spawn_worker_process extra fd).
inline constexpr int kIpcFd = 8;

using IpcToken = std::array<uint8_t, 16>;

// What an export is, as its exporter described it (plain bytes: it crosses the socket).
struct IpcRecord {
  enum Kind : uint32_t { kMemory = 1, kEvent = 2 };
  uint32_t kind = 0;
  int32_t host_device = 0;     // where the memory or event lives (host ordinal)
  uint64_t owner = 0;          // the exporting client (Session's random id)
  uint64_t mapping_bytes = 0;  // memory: the physical memory's size (what the fd holds)
  uint64_t offset = 0;         // memory: the allocation's offset in it
  uint64_t bytes = 0;          // memory: the allocation's size
  CUipcEventHandle event{};    // event: the driver's handle
};
static_assert(sizeof(IpcRecord) == 104);

// The table: in the VM's stub process only. Thread-safe.
class IpcRegistry {
 public:
  // Registers `rec` (with `fd` for memory) under a new random token.
  IpcToken publish(const IpcRecord& rec, vmrpc::UniqueFd fd);
  // The record and a dup of its fd (memory); false when the token names nothing.
  bool lookup(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd) const;
  // Forgets `token` if `owner` exported it (anyone else's revoke is ignored).
  void revoke(const IpcToken& token, uint64_t owner);
  // Forgets everything `owner` exported.
  void revoke_owner(uint64_t owner);
  size_t size() const;

 private:
  struct Entry {
    IpcRecord rec;
    vmrpc::UniqueFd fd;
  };
  mutable std::mutex mu_;
  std::map<IpcToken, Entry> entries_;
};

// How a Session reaches its VM's table.
class IpcChannel {
 public:
  virtual ~IpcChannel() = default;
  // False when the table cannot be reached (the stub went away): the call fails.
  virtual bool publish(const IpcRecord& rec, int fd, IpcToken* token) = 0;
  virtual bool lookup(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd) = 0;
  virtual void revoke(const IpcToken& token, uint64_t owner) = 0;
};

// In the stub's own process.
std::shared_ptr<IpcChannel> local_ipc_channel(std::shared_ptr<IpcRegistry> registry);
// In a worker: over the socket at `fd` (taken).
std::shared_ptr<IpcChannel> worker_ipc_channel(vmrpc::UniqueFd fd);
// The stub's side of one worker's socket: answers until it closes, then revokes what the
// worker's clients exported through it. Runs on a thread of its own.
void serve_ipc_worker(std::shared_ptr<IpcRegistry> registry, vmrpc::UniqueFd sock);

// A random id for a client (IpcRecord::owner), never 0.
uint64_t random_ipc_owner();

}  // namespace vmcuda::host
