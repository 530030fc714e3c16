#include "vm_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

namespace vmcuda::host {
namespace {
constexpr uint64_t kMagic = 0x3276'6c6d'7667'6c6dull;  // "mlgvmlv2": two resources
}

VmLedger::VmLedger(vmrpc::UniqueFd fd, vmrpc::Mapping map)
    : fd_(std::move(fd)), map_(std::move(map)), shared_(reinterpret_cast<Shared*>(map_.data())) {}

VmLedger::~VmLedger() = default;

std::shared_ptr<VmLedger> VmLedger::create(uint64_t limit, uint64_t host_limit) {
  vmrpc::UniqueFd made(::memfd_create("vmcuda-ledger", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!made) vmrpc::throw_errno("memfd_create (the VM's ledger)");
  // Above the fd numbers a worker's slot takes (vmrpc/worker.h), so handing it over never
  // collides with them.
  vmrpc::UniqueFd fd(::fcntl(made.get(), F_DUPFD_CLOEXEC, 64));
  if (!fd) vmrpc::throw_errno("fcntl F_DUPFD (the VM's ledger)");
  if (::ftruncate(fd.get(), sizeof(Shared)) < 0) vmrpc::throw_errno("ftruncate (the VM's ledger)");
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  auto map = vmrpc::Mapping::map_shared(fd.get(), sizeof(Shared), "the VM's ledger");
  auto* s = new (map.data()) Shared{};  // zeroed memfd: atomics start at 0
  s->limit[kDevice].store(limit, std::memory_order_relaxed);
  s->limit[kHost].store(host_limit, std::memory_order_relaxed);
  s->magic = kMagic;
  return std::shared_ptr<VmLedger>(new VmLedger(std::move(fd), std::move(map)));
}

std::shared_ptr<VmLedger> VmLedger::attach(int fd, std::string* why) {
  struct stat st{};
  if (::fstat(fd, &st) < 0 || static_cast<size_t>(st.st_size) != sizeof(Shared)) {
    *why = "fd " + std::to_string(fd) + " is not the VM's ledger (size)";
    return nullptr;
  }
  vmrpc::UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own) {
    *why = "cannot duplicate the ledger's fd";
    return nullptr;
  }
  auto map = vmrpc::Mapping::map_shared(own.get(), sizeof(Shared), "the VM's ledger");
  if (reinterpret_cast<const Shared*>(map.data())->magic != kMagic) {
    *why = "fd " + std::to_string(fd) + " is not the VM's ledger (magic)";
    return nullptr;
  }
  return std::shared_ptr<VmLedger>(new VmLedger(std::move(own), std::move(map)));
}

uint64_t VmLedger::used(Resource r) const {
  uint64_t sum = 0;
  for (const Entry& e : shared_->entries) sum += e.bytes[r].load(std::memory_order_acquire);
  return sum;
}

std::unique_ptr<VmLedger::Account> VmLedger::open_account() {
  const int32_t pid = static_cast<int32_t>(::getpid());
  for (size_t i = 0; i < kEntries; ++i) {
    Entry& e = shared_->entries[i];
    uint32_t free = 0;
    // `live` is the claim; the pid says whose process to reclaim it from.
    if (e.live.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) {
      for (auto& b : e.bytes) b.store(0, std::memory_order_relaxed);
      e.pid.store(pid, std::memory_order_release);
      return std::unique_ptr<Account>(new Account(shared_from_this(), i));
    }
  }
  return nullptr;
}

uint64_t VmLedger::reclaim(pid_t pid) {
  uint64_t back = 0;
  for (Entry& e : shared_->entries) {
    if (e.live.load(std::memory_order_acquire) && e.pid.load(std::memory_order_acquire) == pid) {
      back += e.bytes[kDevice].exchange(0, std::memory_order_acq_rel);
      e.bytes[kHost].store(0, std::memory_order_release);
      e.pid.store(0, std::memory_order_relaxed);
      e.live.store(0, std::memory_order_release);
    }
  }
  return back;
}

VmLedger::Account::~Account() {
  Entry& e = ledger_->shared_->entries[entry_];
  for (auto& b : e.bytes) b.store(0, std::memory_order_release);
  e.pid.store(0, std::memory_order_relaxed);
  e.live.store(0, std::memory_order_release);
}

bool VmLedger::Account::charge(uint64_t bytes, Resource r) {
  std::atomic<uint64_t>& mine = ledger_->shared_->entries[entry_].bytes[r];
  // Optimistic: add, then look at the sum. Two clients charging at once may both be
  // refused near the limit, never both admitted beyond it.
  mine.fetch_add(bytes, std::memory_order_acq_rel);
  const uint64_t limit = ledger_->limit(r);
  const uint64_t used = ledger_->used(r);
  if (used > limit || used < bytes) {
    mine.fetch_sub(bytes, std::memory_order_acq_rel);
    return false;
  }
  return true;
}

void VmLedger::Account::refund(uint64_t bytes, Resource r) {
  std::atomic<uint64_t>& mine = ledger_->shared_->entries[entry_].bytes[r];
  const uint64_t now = mine.load(std::memory_order_relaxed);
  mine.fetch_sub(bytes > now ? now : bytes, std::memory_order_acq_rel);
}

uint64_t VmLedger::Account::bytes(Resource r) const {
  return ledger_->shared_->entries[entry_].bytes[r].load(std::memory_order_relaxed);
}

}  // namespace vmcuda::host
