// IPC between programs of one VM (calls.def 0x1a00; ipc.cc has the handlers): the VM's
// table of exported memory and events. A handle the guest holds is a random token; the
// table behind it lives in the VM's stub process only, so a token from another VM, a forged
// one or a revoked one (its allocation freed, its event destroyed, its exporter gone) names
// nothing. Memory travels as the exporter's POSIX fd of its physical memory, which the table
// keeps (a dup) until the export is revoked.
//
// Sessions reach the table through an IpcChannel: in the stub's process (`--isolation
// thread`, tests) directly, where an export may also carry an in-process object (`local`:
// what the exporter shares without the driver's IPC, which the driver does not do within
// one process: ipc.cc); from a worker process (`--isolation process`) over a
// SOCK_SEQPACKET socket to the stub (kIpcFd), one request and one answer at a time, the fd
// travelling as SCM_RIGHTS. The stub serves each worker's socket on a thread of its own
// (serve_ipc_worker) and revokes what that worker exported when the socket closes (the
// worker ended, however).
//
// Suspend/resume (suspend.cc): a suspended exporter parks its tokens (the entry stays, its
// fd and in-process object go, so the memory can be freed; nothing opens a parked token);
// its resume publishes the memory or event made anew under the same token again
// (republish), which bumps the entry's generation, and the importers map or open it again
// (Session::ipc_attach). Across a save and a restore into a new stub process the tokens come
// from the state files: republish takes a token the table does not know too.
#pragma once

#include <array>
#include <atomic>
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
  enum Kind : uint32_t { kMemory = 1, kEvent = 2, kPool = 3 };  // kPool: a memory pool (guest-made)
  uint32_t kind = 0;
  int32_t host_device = 0;     // where the memory or event lives (host ordinal)
  uint64_t owner = 0;          // the exporting client (Session's random id)
  uint64_t mapping_bytes = 0;  // memory: the physical memory's size (what the fd holds)
  uint64_t offset = 0;         // memory: the allocation's offset in it
  uint64_t bytes = 0;          // memory: the allocation's size
  CUipcEventHandle event{};    // event: the driver's handle
  // Bumped by each republish: an importer that mapped or opened an older generation maps
  // or opens it again (the exporter's memory or event was made anew by a resume).
  uint64_t generation = 0;
};
static_assert(sizeof(IpcRecord) == 112);

// The table: in the VM's stub process only. Thread-safe.
class IpcRegistry {
 public:
  // Registers `rec` (with `fd` for memory, `local` for an in-process share) under a new
  // random token.
  IpcToken publish(const IpcRecord& rec, vmrpc::UniqueFd fd, std::shared_ptr<void> local = nullptr);
  // The record, a dup of its fd (memory) and its in-process object (if asked); false when
  // the token names nothing.
  bool lookup(const IpcToken& token, IpcRecord* rec, vmrpc::UniqueFd* fd, std::shared_ptr<void>* local = nullptr) const;
  // Forgets `token` if `owner` exported it (anyone else's revoke is ignored).
  void revoke(const IpcToken& token, uint64_t owner);
  // Suspend: `owner`'s entry stays under `token` but holds nothing (its fd and in-process
  // object go); lookups fail until it is republished.
  void park(const IpcToken& token, uint64_t owner);
  // Resume: `rec` (with `fd`, `local`) under `token` again: a parked entry, one of `owner`'s
  // own, or a token the table does not know (a restore into a new stub process). False when
  // the token names another client's live export (a forged or mixed-up state).
  bool republish(const IpcToken& token, const IpcRecord& rec, vmrpc::UniqueFd fd, std::shared_ptr<void> local = nullptr);
  // Forgets everything `owner` exported.
  void revoke_owner(uint64_t owner);
  size_t size() const;
  // Whether `token` names an export, live or parked (a suspend checks its imports with it).
  bool known(const IpcToken& token) const;

 private:
  struct Entry {
    IpcRecord rec;
    vmrpc::UniqueFd fd;
    std::shared_ptr<void> local;
    bool parked = false;
  };
  uint64_t generation_ = 0;  // the last one given (under mu_)
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
  // IpcRegistry::park and republish (`local`: in-process channels only).
  virtual void park(const IpcToken& token, uint64_t owner) = 0;
  virtual bool republish(const IpcToken& token, const IpcRecord& rec, int fd, std::shared_ptr<void> local = nullptr) = 0;
  virtual bool known(const IpcToken& token) = 0;
  // Whether every client of the table is in this process (`--isolation thread`): exports may
  // then carry an in-process object, which an importer gets back from lookup_local.
  virtual bool in_process() const { return false; }
  virtual bool publish_local(const IpcRecord&, int, std::shared_ptr<void>, IpcToken*) { return false; }
  virtual bool lookup_local(const IpcToken&, IpcRecord*, vmrpc::UniqueFd*, std::shared_ptr<void>*) { return false; }
};

// In the stub's own process.
std::shared_ptr<IpcChannel> local_ipc_channel(std::shared_ptr<IpcRegistry> registry);
// In a worker: over the socket at `fd` (taken).
std::shared_ptr<IpcChannel> worker_ipc_channel(vmrpc::UniqueFd fd);
// The stub's side of one worker's socket: answers until it closes, then revokes what the
// worker's clients exported through it. Runs on a thread of its own.
void serve_ipc_worker(std::shared_ptr<IpcRegistry> registry, vmrpc::UniqueFd sock);

// `--isolation thread`: an interprocess event shared within the process. The driver does not
// open an IPC event in the process that made it (on the H100 the opened event did not follow
// the exporter's records), so an importer of the same process uses the exporter's CUevent
// itself; the last holder (exporter, table, importers) destroys it. Its context is the
// exporter's, which stays until then even when the exporter ends (IpcContextKeeper); an
// importer's record goes through a stream of that context (the driver records an event only
// on a stream of its own context). CUDA
// leaves using an event after its exporter destroyed it undefined; here it stays a valid
// event, never a dangling one in the process that serves every program of the VM.
struct IpcContextKeeper {
  const DriverApi* api = nullptr;
  CUcontext ctx = nullptr;
  std::atomic<bool> orphaned{false};  // its client has gone: the last holder destroys ctx
  // Importers' records (Session::ipc_record_borrowed): a stream of ctx, made at the first,
  // that waits for the importer's stream and then records (goes with ctx).
  std::mutex mu;
  CUstream bridge = nullptr;
  ~IpcContextKeeper();
};
struct IpcSharedEvent {
  const DriverApi* api = nullptr;
  CUevent event = nullptr;
  int host_device = 0;
  std::shared_ptr<IpcContextKeeper> context;
  ~IpcSharedEvent();
};

// A random id for a client (IpcRecord::owner), never 0.
uint64_t random_ipc_owner();

}  // namespace vmcuda::host
