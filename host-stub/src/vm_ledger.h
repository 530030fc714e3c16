// What a VM's clients hold of the GPU and the host, counted once for the whole VM (issue 10:
// accounting per VM), each resource against one limit per VM:
// - kDevice: device memory as the driver maps it (the arena's physical mappings, at the
//   allocation granularity, not the bytes asked for), contexts, modules, library workspaces;
// - kHost: host memory the VM's programs make the host hold: memory they pinned (page-locked:
//   the kernel can neither swap nor move it) and each worker process's own cost.
//
// The stub process and its worker processes (--isolation process) share one ledger: a
// small memfd the stub creates and hands to each worker. Each client charges its own
// entry; the VM's use is the sum of the entries. A worker that dies mid-charge loses
// nothing for the VM: the stub reclaims every entry of its pid when it ends.
// Only stub processes map the ledger; the guest never sees it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "vmrpc/fd.h"

namespace vmcuda::host {

class VmLedger : public std::enable_shared_from_this<VmLedger> {
 public:
  static constexpr size_t kEntries = 512;  // clients at once in one VM (slots x connections)
  enum Resource : unsigned { kDevice = 0, kHost = 1, kResources = 2 };

  // A fresh ledger with `limit` bytes of device memory and `host_limit` of host memory (~0:
  // none). Throws std::system_error.
  static std::shared_ptr<VmLedger> create(uint64_t limit, uint64_t host_limit = ~0ull);
  // The ledger behind `fd` (a worker: the stub's). Null and why when it is not one.
  static std::shared_ptr<VmLedger> attach(int fd, std::string* why);
  ~VmLedger();

  int fd() const { return fd_.get(); }
  uint64_t limit(Resource r = kDevice) const { return shared_->limit[r].load(std::memory_order_relaxed); }
  uint64_t used(Resource r = kDevice) const;  // the VM's clients together
  // A new limit (policy reload): what is held stays; new charges see it.
  void set_limit(uint64_t limit, Resource r = kDevice) { shared_->limit[r].store(limit, std::memory_order_relaxed); }

  // One client's share. Not thread-safe (its session's thread uses it); gives everything
  // back when destroyed.
  class Account {
   public:
    ~Account();
    // Adds `bytes` unless the VM would exceed its limit.
    bool charge(uint64_t bytes, Resource r = kDevice);
    void refund(uint64_t bytes, Resource r = kDevice);
    uint64_t bytes(Resource r = kDevice) const;

   private:
    friend class VmLedger;
    Account(std::shared_ptr<VmLedger> ledger, size_t entry) : ledger_(std::move(ledger)), entry_(entry) {}
    std::shared_ptr<VmLedger> ledger_;
    size_t entry_;
  };
  // Null when every entry is taken (more clients than kEntries).
  std::unique_ptr<Account> open_account();
  // The stub: worker `pid` ended; its entries go back. Returns the device bytes reclaimed.
  uint64_t reclaim(pid_t pid);

 private:
  struct Entry {
    std::atomic<int32_t> pid;   // 0: free
    std::atomic<uint32_t> live;  // 1 while an Account holds it
    std::atomic<uint64_t> bytes[kResources];
  };
  struct Shared {
    uint64_t magic;
    std::atomic<uint64_t> limit[kResources];
    Entry entries[kEntries];
  };
  VmLedger(vmrpc::UniqueFd fd, vmrpc::Mapping map);
  vmrpc::UniqueFd fd_;
  vmrpc::Mapping map_;
  Shared* shared_;
};

}  // namespace vmcuda::host
