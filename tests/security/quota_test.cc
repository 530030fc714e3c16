// Finding 10.3 and issue 13's per-client quota, as a hostile tenant would try them on the
// test executor: the quota counts what the driver maps, and it is the VM's, whatever the
// number of its programs or the process that serves them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "host-stub/stub_fixture.h"
#include "vm_ledger.h"
#include "vmcuda/api/cudnn_abi.h"

namespace vmcuda::host::test {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// "with a 1 MiB quota one client held 128 MiB through small allocations"
TEST(SecurityQuota, SmallAllocationsCannotHoldMoreThanTheQuota) {
  StubLimits limits;
  limits.ledger = VmLedger::create(4 * kMiB);
  Stub s(limits);
  Client c(s);
  int granted = 0;
  api::PtrReply r{};
  for (int i = 0; i < 4096; ++i) {  // 4096 x 64 KiB = 256 MiB asked for, in small pieces
    const int32_t st = c.call<api::Call::Malloc>({64 * 1024}, &r);
    if (st == 0) ++granted;
    else ASSERT_EQ(st, CUDA_ERROR_OUT_OF_MEMORY);  // what a native program gets
  }
  EXPECT_EQ(granted, 64);  // 4 MiB of 64 KiB pieces, two 2 MiB chunks
  EXPECT_LE(tst::fake_allocated_bytes(), 4 * kMiB);
  EXPECT_EQ(limits.ledger->used(), 4 * kMiB);
}

// "--memory-quota-mib is per client, so a VM with 16 slots gets 16 times the quota"
TEST(SecurityQuota, TheQuotaIsTheVmsNotEachClients) {
  StubLimits limits;
  limits.ledger = VmLedger::create(16 * kMiB);
  Stub s(limits);
  Client a(s), b(s);
  const uint64_t pa = a.malloc(10 * kMiB);
  ASSERT_NE(pa, 0u);
  api::MemInfoReply m{};
  ASSERT_EQ(b.call<api::Call::MemGetInfo>({}, &m), 0);
  EXPECT_EQ(m.total_bytes, 16 * kMiB);
  EXPECT_EQ(m.free_bytes, 6 * kMiB);  // what the VM has left, seen by its other program
  api::PtrReply r{};
  EXPECT_EQ(b.call<api::Call::Malloc>({8 * kMiB}, &r), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(b.malloc(6 * kMiB), 0u);
  EXPECT_EQ(a.call<api::Call::Free>({pa}), 0);
  EXPECT_NE(b.malloc(8 * kMiB), 0u);  // given back, usable by the other program
}

TEST(SecurityQuota, AClosedClientGivesItsShareBack) {
  StubLimits limits;
  limits.ledger = VmLedger::create(8 * kMiB);
  Stub s(limits);
  {
    Client a(s);
    ASSERT_NE(a.malloc(8 * kMiB), 0u);
    EXPECT_EQ(limits.ledger->used(), 8 * kMiB);
  }
  for (int i = 0; i < 200 && limits.ledger->used() != 0; ++i) ::usleep(10000);  // the slot closes
  EXPECT_EQ(limits.ledger->used(), 0u);
  Client b(s);
  EXPECT_NE(b.malloc(8 * kMiB), 0u);
}

// Issue 10 (accounting: module images): each module a guest loaded was charged to nothing,
// while the stub kept its image in host memory and the driver its code and variables on the
// device; loading the same fatbin in a loop held without bound. Modules are the VM's: a load
// beyond the quota is CUDA_ERROR_OUT_OF_MEMORY, and what they hold is not the allocations'.
TEST(SecurityQuota, LoadedModulesAreChargedToTheVm) {
  StubLimits limits;
  limits.ledger = VmLedger::create(16 * kMiB);
  Stub s(limits);
  Client c(s);
  auto image = c.slot->heap().allocate(kMiB);
  ASSERT_TRUE(image);
  std::memset(image->data, ' ', kMiB);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic - 1);
  int loaded = 0;
  int32_t st = 0;
  for (int i = 0; i < 1000; ++i) {  // 1000 x 1 MiB asked for
    api::HandleReply r{};
    if ((st = c.call<api::Call::ModuleLoad>({image->ref()}, &r)) != 0) break;
    ++loaded;
  }
  EXPECT_EQ(st, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(loaded, 15);  // 1 MiB and the stub's 64 bytes of padding each
  EXPECT_LE(limits.ledger->used(), 16 * kMiB);
  // The modules hold the VM's memory: no 2 MiB chunk of device memory is left.
  api::PtrReply p{};
  EXPECT_EQ(c.call<api::Call::Malloc>({4096}, &p), CUDA_ERROR_OUT_OF_MEMORY);
  // The stub serves on; an unloaded module makes room.
  ASSERT_EQ(c.call<api::Call::ModuleUnload>({1}), 0);
  ASSERT_EQ(c.call<api::Call::ModuleUnload>({2}), 0);
  EXPECT_NE(c.malloc(4096), 0u);
}

// Finding 10.4: device limits took device memory charged to nothing. The malloc heap and
// printf FIFO beyond their defaults are the VM's: they count against its quota, come back
// when lowered, reset or closed, and cannot take what the VM's allocations hold.
TEST(SecurityQuota, DeviceLimitsAreChargedToTheVm) {
  StubLimits limits;
  limits.ledger = VmLedger::create(64 * kMiB);
  Stub s(limits);
  {
    Client c(s);
    api::LimitReply lim{};
    ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({2 /* malloc heap */}, &lim), 0);
    const uint64_t heap_default = lim.value;
    // 48 MiB more heap: charged.
    ASSERT_EQ(c.call<api::Call::DeviceSetLimit>({heap_default + 48 * kMiB, 2}, &lim), 0);
    EXPECT_EQ(limits.ledger->used(), 48 * kMiB);
    api::MemInfoReply m{};
    ASSERT_EQ(c.call<api::Call::MemGetInfo>({}, &m), 0);
    EXPECT_EQ(m.free_bytes, 16 * kMiB);
    api::PtrReply r{};
    EXPECT_EQ(c.call<api::Call::Malloc>({32 * kMiB}, &r), CUDA_ERROR_OUT_OF_MEMORY);  // the heap holds it
    // More than the quota has left: refused, nothing changes.
    EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({heap_default + 80 * kMiB, 2}, &lim), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(limits.ledger->used(), 48 * kMiB);
    // Lowered: given back.
    ASSERT_EQ(c.call<api::Call::DeviceSetLimit>({heap_default + 8 * kMiB, 2}, &lim), 0);
    EXPECT_EQ(limits.ledger->used(), 8 * kMiB);
    // The printf FIFO too; a reset gives both back.
    ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({1 /* printf FIFO */}, &lim), 0);
    ASSERT_EQ(c.call<api::Call::DeviceSetLimit>({lim.value + 4 * kMiB, 1}, &lim), 0);
    EXPECT_EQ(limits.ledger->used(), 12 * kMiB);
    ASSERT_EQ(c.call<api::Call::DeviceReset>({}), 0);
    EXPECT_EQ(limits.ledger->used(), 0u);
    ASSERT_EQ(c.call<api::Call::DeviceSetLimit>({heap_default + 16 * kMiB, 2}, &lim), 0);
    EXPECT_EQ(limits.ledger->used(), 16 * kMiB);
  }
  // Closed: nothing left charged.
  for (int i = 0; i < 200 && limits.ledger->used() != 0; ++i) ::usleep(10000);
  EXPECT_EQ(limits.ledger->used(), 0u);
}

// Finding 10.4: a context's own device memory (523.6 MiB measured on the H100) was charged
// to nothing. Each context a program makes is the VM's; a VM without room for one gets no
// context (cudaErrorMemoryAllocation), and a closed program gives it back.
TEST(SecurityQuota, EachContextIsChargedToTheVm) {
  StubLimits limits;
  limits.ledger = VmLedger::create(24 * kMiB);
  limits.context_bytes = 8 * kMiB;
  Stub s(limits, {0, 1});
  {
    Client a(s);
    ASSERT_NE(a.malloc(2 * kMiB), 0u);  // its context on device 0, then the allocation
    EXPECT_EQ(limits.ledger->used(), 10 * kMiB);
    api::MemInfoReply m{};
    ASSERT_EQ(a.call<api::Call::MemGetInfo>({}, &m), 0);
    EXPECT_EQ(m.free_bytes, 14 * kMiB);
    // A context on its second device: charged too.
    ASSERT_EQ(a.call<api::Call::SetDevice>({1, 0}), 0);
    ASSERT_NE(a.malloc(2 * kMiB), 0u);
    EXPECT_EQ(limits.ledger->used(), 20 * kMiB);
    // Another program of the VM has no room left for a context of its own.
    Client b(s);
    api::PtrReply r{};
    EXPECT_EQ(b.call<api::Call::Malloc>({4096}, &r), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(limits.ledger->used(), 20 * kMiB);
  }
  for (int i = 0; i < 200 && limits.ledger->used() != 0; ++i) ::usleep(10000);
  EXPECT_EQ(limits.ledger->used(), 0u);  // both contexts given back with the program
  Client c(s);
  EXPECT_NE(c.malloc(8 * kMiB), 0u);
  EXPECT_EQ(limits.ledger->used(), 16 * kMiB);
}

// A worker process that dies while holding a share (a crash, a kill) leaves nothing charged:
// the stub reclaims its entries when it reaps it.
TEST(SecurityQuota, ADeadWorkersShareIsReclaimed) {
  auto ledger = VmLedger::create(8 * kMiB);
  const pid_t child = ::fork();
  if (child == 0) {
    std::string why;
    auto mine = VmLedger::attach(ledger->fd(), &why);
    if (!mine) _exit(1);
    auto account = mine->open_account();
    if (!account || !account->charge(6 * kMiB)) _exit(2);
    ::raise(SIGKILL);  // dies holding it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(ledger->used(), 6 * kMiB);
  auto other = ledger->open_account();
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->charge(4 * kMiB));  // over the VM's limit meanwhile
  EXPECT_EQ(ledger->reclaim(child), 6 * kMiB);
  EXPECT_EQ(ledger->used(), 0u);
  EXPECT_TRUE(other->charge(8 * kMiB));
  EXPECT_FALSE(other->charge(1));
}

// Finding 10.6: a guest made the stub start 128 worker processes. Programs served at once
// are bounded per VM; one more is refused (cudaErrorDevicesUnavailable in the program), and
// served again once another has gone.
TEST(SecurityClients, ProgramsServedAtOnceAreBounded) {
  DriverApi api;
  tst::install_fake_driver(api);
  StubService service(api, StubLimits{}, [] { return std::vector<int>{0}; });
  vmrpc::HostEndpointOptions o{vmrpc::testing::temp_socket_path("clients"),
                               vmrpc::RegionConfig{16ull << 20, 4, 256 << 10, 4096}, 8};
  o.max_clients = 2;
  vmrpc::HostEndpoint endpoint(o, service);
  endpoint.start();
  auto claim = [&](std::unique_ptr<vmrpc::LocalConnection>& conn) {
    conn = vmrpc::LocalConnection::connect(endpoint.socket_path());
    std::string why;
    auto slot = vmrpc::ClientSlot::claim(conn->region(), *conn, &why);
    if (slot && slot->call(static_cast<uint32_t>(vmrpc::wire::MessageId::kNop), {}, 0).status != 0) slot.reset();
    return slot;
  };
  std::unique_ptr<vmrpc::LocalConnection> c1, c2, c3, c4;
  auto s1 = claim(c1), s2 = claim(c2);
  ASSERT_TRUE(s1);
  ASSERT_TRUE(s2);
  EXPECT_FALSE(claim(c3));  // the third at once
  s1.reset();
  c1.reset();
  std::unique_ptr<vmrpc::ClientSlot> s4;
  for (int i = 0; i < 200 && !s4; ++i) {
    ::usleep(10000);
    s4 = claim(c4);
  }
  EXPECT_TRUE(s4) << "a program is served again once another has gone";
}

// Finding 10.4 / 10.10: pinned host memory and worker processes were charged to nothing: each
// connection could pin its whole region (1 GiB), and each program's worker process costs the
// host its resident memory (the CUDA driver's). Both are the VM's host memory
// (vm_ledger.h kHost, --host-memory-quota-mib), shared by its programs; beyond it a pin or a
// program's first context answers cudaErrorMemoryAllocation and the stub serves on.
TEST(SecurityQuota, PinnedHostMemoryIsBoundedPerVm) {
  StubLimits limits;
  limits.ledger = VmLedger::create(~0ull, 4 * kMiB);
  Stub s(limits);
  Client a(s), b(s);
  auto pin = [](Client& c) -> std::optional<uint64_t> {
    auto r = c.slot->heap().allocate(kMiB);
    if (!r) return std::nullopt;
    const int32_t st = c.call<api::Call::PinHeap>({r->ref()});
    if (st != 0) {
      EXPECT_EQ(st, CUDA_ERROR_OUT_OF_MEMORY);  // what a native cudaHostRegister gets
      c.slot->heap().free(r->offset);
      return std::nullopt;
    }
    return r->offset;
  };
  std::vector<uint64_t> held;
  for (int i = 0; i < 3; ++i) {
    auto p = pin(a);
    ASSERT_TRUE(p);
    held.push_back(*p);
  }
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 3 * kMiB);
  const uint64_t ranges = tst::fake_pinned_ranges();
  ASSERT_TRUE(pin(b));  // the VM's last MiB, by its other program
  EXPECT_FALSE(pin(b));
  EXPECT_FALSE(pin(a));
  EXPECT_EQ(tst::fake_pinned_ranges(), ranges + 1);  // nothing pinned beyond the bound
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 4 * kMiB);
  // Unpinned: given back, usable by the other program.
  ASSERT_EQ(a.call<api::Call::UnpinHeap>({{held.back(), kMiB}}), 0);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 3 * kMiB);
  EXPECT_TRUE(pin(b));
  // Device memory is another bound: pinning took none of it.
  EXPECT_EQ(limits.ledger->used(), 0u);
}

TEST(SecurityQuota, EachWorkerProcessIsChargedToTheVmsHostMemory) {
  StubLimits limits;
  limits.ledger = VmLedger::create(~0ull, 20 * kMiB);
  limits.worker_host_bytes = 8 * kMiB;  // as vmcuda-stub sets it in its worker processes
  Stub s(limits);
  const uint64_t contexts = tst::fake_live_contexts();
  auto a = std::make_unique<Client>(s);
  Client b(s), c(s);
  ASSERT_NE(a->malloc(4096), 0u);  // its first context: its worker's cost
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 8 * kMiB);
  ASSERT_NE(b.malloc(4096), 0u);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 16 * kMiB);
  ASSERT_NE(b.malloc(4096), 0u);  // charged once per program
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 16 * kMiB);
  // A third program has no room: its first call that needs the GPU gets
  // cudaErrorMemoryAllocation (no context made); what needs none still answers.
  api::PtrReply r{};
  EXPECT_EQ(c.call<api::Call::Malloc>({4096}, &r), CUDA_ERROR_OUT_OF_MEMORY);
  api::DevicePropertiesReply props{};
  EXPECT_EQ(c.call<api::Call::DeviceProperties>({0}, &props), 0);
  EXPECT_EQ(tst::fake_live_contexts(), contexts + 2);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 16 * kMiB);
  // Those served keep working; once one has gone, the third is served.
  ASSERT_NE(b.malloc(4096), 0u);
  a.reset();
  for (int i = 0; i < 200 && limits.ledger->used(VmLedger::kHost) > 8 * kMiB; ++i) ::usleep(10000);
  EXPECT_EQ(c.call<api::Call::Malloc>({4096}, &r), 0);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 16 * kMiB);
}

// The libraries a worker loads for its program (cuDNN 483 MiB, cuSOLVER 230 MiB... measured:
// vmrpc/knobs.h) are the VM's host memory too: charged once per worker with the library's
// first object, refused with the library's own allocation status when the bound has no room.
TEST(SecurityQuota, EachLibraryAWorkerLoadsIsChargedToTheVmsHostMemory) {
#if defined(VMCUDA_WITH_CUDNN) && defined(VMCUDA_WITH_CUFFT) && defined(VMCUDA_WITH_CURAND)
  StubLimits limits;
  limits.ledger = VmLedger::create(~0ull, 40 * kMiB);
  limits.library_host_bytes[static_cast<size_t>(HostLibrary::kDnn)] = 24 * kMiB;
  limits.library_host_bytes[static_cast<size_t>(HostLibrary::kFft)] = 8 * kMiB;
  limits.library_host_bytes[static_cast<size_t>(HostLibrary::kRand)] = 8 * kMiB;
  Stub s(limits);
  auto a = std::make_unique<Client>(s);
  ASSERT_EQ(a->call<api::Call::cudnnCreate>({0x9000}), 0);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 24 * kMiB);
  ASSERT_EQ(a->call<api::Call::cudnnCreate>({0x9001}), 0);  // once per worker, not per handle
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 24 * kMiB);
  ASSERT_EQ(a->call<api::Call::cufftCreate>({0x9100}), 0);
  ASSERT_EQ(a->call<api::Call::cufftCreate>({0x9101}), 0);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 32 * kMiB);
  ASSERT_EQ(a->call<api::Call::curandCreateGenerator>({0x9200, 100}), 0);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 40 * kMiB);
  // Another worker finds the bound full: each library's own allocation-failed status
  // (CUDNN_STATUS_ALLOC_FAILED, CUFFT_ALLOC_FAILED, CURAND_STATUS_ALLOCATION_FAILED), nothing made.
  Client b(s);
  EXPECT_EQ(b.call<api::Call::cudnnCreate>({0x9000}), 4003);
  EXPECT_EQ(b.call<api::Call::cufftCreate>({0x9100}), 2);
  EXPECT_EQ(b.call<api::Call::curandCreateGenerator>({0x9200, 100}), 102);
  EXPECT_EQ(b.call<api::Call::cudnnDestroy>({0x9000}), api::kCudnnBadParam);  // none was made
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 40 * kMiB);
  // The first program's end gives its libraries' share back.
  a.reset();
  for (int i = 0; i < 200 && limits.ledger->used(VmLedger::kHost) > 0; ++i) ::usleep(10000);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 0u);
  EXPECT_EQ(b.call<api::Call::cudnnCreate>({0x9000}), 0);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 24 * kMiB);
#else
  GTEST_SKIP() << "this build has no cuDNN, cuFFT or cuRAND calls (their headers were not found)";
#endif
}

// A worker that dies holding pinned memory and its own cost leaves nothing charged either.
TEST(SecurityQuota, ADeadWorkersHostMemoryIsReclaimed) {
  auto ledger = VmLedger::create(~0ull, 8 * kMiB);
  const pid_t child = ::fork();
  if (child == 0) {
    std::string why;
    auto mine = VmLedger::attach(ledger->fd(), &why);
    if (!mine) _exit(1);
    auto account = mine->open_account();
    if (!account || !account->charge(6 * kMiB, VmLedger::kHost)) _exit(2);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(ledger->used(VmLedger::kHost), 6 * kMiB);
  EXPECT_EQ(ledger->used(), 0u);
  ledger->reclaim(child);
  EXPECT_EQ(ledger->used(VmLedger::kHost), 0u);
}

#ifdef VMCUDA_WITH_CUBLAS
// cuBLAS remoted at its own API: cublasCreate makes the library allocate a workspace of its own
// on the device (cudaMalloc inside the stub, outside the client's arena), which was charged to
// nothing: a guest that created handles in a loop held the GPU's memory without bound. Each
// handle's workspace is the VM's while the handle lives; beyond the quota cublasCreate answers
// CUBLAS_STATUS_ALLOC_FAILED, as natively when the workspace cannot be had; a workspace the
// program gives (cublasSetWorkspace, its own memory) costs nothing more.
TEST(SecurityQuota, ACublasHandlesWorkspaceIsChargedToTheVm) {
  constexpr int32_t kAllocFailed = 3;  // CUBLAS_STATUS_ALLOC_FAILED
  StubLimits limits;
  limits.ledger = VmLedger::create(16 * kMiB);
  limits.cublas_workspace_bytes = 4 * kMiB;
  Stub s(limits);
  {
    Client c(s);
    const uint64_t mine = c.malloc(8 * kMiB);
    ASSERT_NE(mine, 0u);
    EXPECT_EQ(limits.ledger->used(), 8 * kMiB);
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({0x7000}), 0);
    EXPECT_EQ(limits.ledger->used(), 12 * kMiB);
    // Room for exactly one more: the quota reached, not passed.
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({0x7001}), 0);
    EXPECT_EQ(limits.ledger->used(), 16 * kMiB);
    // One more would pass it: refused, nothing made or charged, the stub serves on.
    const uint64_t live = tst::fake_live_cublas_handles();
    EXPECT_EQ(c.call<api::Call::cublasCreate_v2>({0x7002}), kAllocFailed);
    EXPECT_EQ(tst::fake_live_cublas_handles(), live);
    EXPECT_EQ(limits.ledger->used(), 16 * kMiB);
    EXPECT_EQ(c.call<api::Call::cublasSetStream_v2>({0x7002, 0}), 1);  // no such handle: NOT_INITIALIZED
    // The workspaces hold the VM's memory: no room for an allocation either.
    api::PtrReply r{};
    EXPECT_EQ(c.call<api::Call::Malloc>({4096}, &r), CUDA_ERROR_OUT_OF_MEMORY);
    // A workspace of the program's own memory costs nothing more.
    EXPECT_EQ(c.call<api::Call::cublasSetWorkspace_v2>({0x7000, mine, 4 * kMiB}), 0);
    EXPECT_EQ(limits.ledger->used(), 16 * kMiB);
    // Destroyed: given back, and another handle fits again.
    ASSERT_EQ(c.call<api::Call::cublasDestroy_v2>({0x7001}), 0);
    EXPECT_EQ(limits.ledger->used(), 12 * kMiB);
    ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({0x7002}), 0);
    EXPECT_EQ(limits.ledger->used(), 16 * kMiB);
  }
  // The program's end gives its handles' workspaces back with the rest.
  for (int i = 0; i < 200 && limits.ledger->used() != 0; ++i) ::usleep(10000);
  EXPECT_EQ(limits.ledger->used(), 0u);
  EXPECT_EQ(tst::fake_live_cublas_handles(), 0u);
}

// Just below: a quota a byte short of the program's memory and one workspace refuses the handle.
TEST(SecurityQuota, ACublasHandleOneByteOverTheQuotaIsRefused) {
  StubLimits limits;
  limits.ledger = VmLedger::create(6 * kMiB - 1);
  limits.cublas_workspace_bytes = 4 * kMiB;
  Stub s(limits);
  Client c(s);
  ASSERT_NE(c.malloc(2 * kMiB), 0u);
  EXPECT_EQ(c.call<api::Call::cublasCreate_v2>({0x7000}), 3);  // CUBLAS_STATUS_ALLOC_FAILED
  EXPECT_EQ(limits.ledger->used(), 2 * kMiB);
}
#endif

TEST(SecurityQuota, ALedgerFdIsChecked) {
  std::string why;
  EXPECT_FALSE(VmLedger::attach(0, &why));
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace vmcuda::host::test
