// IPC between programs of one VM (host-stub/src/ipc.cc, ipc_registry.cc) on the executor:
// two clients of one stub share memory and events through handles; a client of another VM
// (another stub, another table), a forged handle, a freed allocation and a gone exporter
// get nothing; closing and teardown unmap. The worker's socket protocol on its own.
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <string>
#include <vector>
#include <thread>

#include "client_control.h"
#include "host-stub/slot_control.h"
#include "host-stub/stub_fixture.h"
#include "ipc_registry.h"
#include "vm_control.h"

namespace vmcuda::host {
namespace {

using test::Client;
using test::Stub;
namespace tst = vmcuda::testing;
namespace cc = client_control;

constexpr uint64_t kMiB = 1ull << 20;

StubLimits with_ipc(std::shared_ptr<IpcRegistry>* registry = nullptr) {
  StubLimits limits;
  auto r = std::make_shared<IpcRegistry>();
  limits.ipc = local_ipc_channel(r);
  if (registry) *registry = r;
  return limits;
}

api::IpcHandle export_mem(Client& c, uint64_t ptr) {
  api::IpcHandleReply r{};
  EXPECT_EQ(c.call<api::Call::IpcGetMemHandle>({ptr}, &r), 0);
  return r.handle;
}

int32_t open_mem(Client& c, const api::IpcHandle& h, api::IpcOpenMemReply* r, uint32_t flags = 0) {
  return c.call<api::Call::IpcOpenMemHandle>({h, flags, 0}, r);
}

void wait_closed(Stub& s, uint64_t n) {
  for (int i = 0; i < 2000 && s.endpoint.stats().slots_closed_total < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(s.endpoint.stats().slots_closed_total, n);
}

std::vector<int> iota(int n, int from) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

TEST(StubIpc, AnotherClientOfTheVmReadsWritesAndLaunchesOnExportedMemory) {
  Stub s(with_ipc());
  Client a(s), b(s);
  const uint64_t small = a.malloc(64 * 4);
  a.malloc(100);  // a neighbour in the same chunk
  a.put(small, iota(64, 0));
  const api::IpcHandle h = export_mem(a, small);
  EXPECT_EQ(h.tag, api::kIpcMemTag);
  // The same allocation exports as the same handle.
  const api::IpcHandle again = export_mem(a, small);
  EXPECT_EQ(std::memcmp(&h, &again, sizeof h), 0);

  api::IpcOpenMemReply o{};
  ASSERT_EQ(open_mem(b, h, &o), 0);
  EXPECT_EQ(o.bytes, 64u * 4);
  EXPECT_EQ(o.device, 0);
  EXPECT_GE(o.ptr, kArenaBase + kArenaStride);  // in b's own arena
  EXPECT_EQ(b.get(o.ptr, 64), iota(64, 0));
  b.put(o.ptr, iota(64, 100));
  EXPECT_EQ(a.get(small, 64), iota(64, 100));
  const uint64_t fn = b.load_add_one();
  ASSERT_EQ(b.launch(fn, o.ptr, 64, api::kStreamLegacy), 0);
  EXPECT_EQ(a.get(small, 64), iota(64, 101));
  // Only the allocation's bytes are b's to name.
  EXPECT_EQ(b.call<api::Call::Memset>({o.ptr, 64 * 4 + 1, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  // Not b's to free; closed once, then gone.
  EXPECT_EQ(b.call<api::Call::Free>({o.ptr}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), 0);
  EXPECT_EQ(b.call<api::Call::Memset>({o.ptr, 4, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(a.get(small, 64), iota(64, 101));  // the exporter's memory is untouched by the close
}

TEST(StubIpc, OpensOfOneHandleAreCountedAndLargeAllocationsShareToo) {
  Stub s(with_ipc());
  Client a(s), b(s);
  const uint64_t big = a.malloc(3 * kMiB);
  a.put(big + 2 * kMiB, iota(16, 7));
  const api::IpcHandle h = export_mem(a, big + 12);  // an interior pointer names its allocation
  api::IpcOpenMemReply o1{}, o2{};
  ASSERT_EQ(open_mem(b, h, &o1, 1 /* cudaIpcMemLazyEnablePeerAccess */), 0);
  ASSERT_EQ(open_mem(b, h, &o2), 0);
  EXPECT_EQ(o1.ptr, o2.ptr);
  EXPECT_EQ(o1.bytes, 3 * kMiB);
  EXPECT_EQ(b.get(o1.ptr + 2 * kMiB, 16), iota(16, 7));
  EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o1.ptr}), 0);
  EXPECT_EQ(b.get(o1.ptr + 2 * kMiB, 16), iota(16, 7));  // one open left
  EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o1.ptr}), 0);
  int32_t st = 0;
  b.get(o1.ptr, 1, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  // Unknown flags, a pointer of no allocation, the exporter's own handle.
  api::IpcOpenMemReply o{};
  EXPECT_EQ(open_mem(b, h, &o, 2), CUDA_ERROR_INVALID_VALUE);
  api::IpcHandleReply none{};
  EXPECT_EQ(a.call<api::Call::IpcGetMemHandle>({big + 3 * kMiB}, &none), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(open_mem(a, h, &o), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(StubIpc, ForgedAndOtherVmsHandlesAndFreedAllocationsNameNothing) {
  Stub vm1(with_ipc()), vm2(with_ipc());
  Client a(vm1), b(vm1), stranger(vm2);
  const uint64_t p = a.malloc(4096), q = a.malloc(4096);
  a.put(p, iota(4, 1));
  const api::IpcHandle h = export_mem(a, p);
  api::IpcOpenMemReply o{};
  EXPECT_EQ(open_mem(stranger, h, &o), CUDA_ERROR_INVALID_HANDLE);  // another VM's table
  api::IpcHandle forged = h;
  forged.token[3] ^= 0x40;
  EXPECT_EQ(open_mem(b, forged, &o), CUDA_ERROR_INVALID_HANDLE);
  api::IpcHandle wrong_kind = h;
  wrong_kind.tag = api::kIpcEventTag;
  EXPECT_EQ(open_mem(b, wrong_kind, &o), CUDA_ERROR_INVALID_HANDLE);
  // Opened before the exporter frees it: the memory stays with the importer until it closes.
  ASSERT_EQ(open_mem(b, h, &o), 0);
  const api::IpcHandle hq = export_mem(a, q);
  ASSERT_EQ(a.call<api::Call::Free>({p}), 0);
  ASSERT_EQ(a.call<api::Call::Free>({q}), 0);
  EXPECT_EQ(b.get(o.ptr, 4), iota(4, 1));
  api::IpcOpenMemReply oq{};
  EXPECT_EQ(open_mem(b, hq, &oq), CUDA_ERROR_INVALID_HANDLE);  // freed: no new opens
  EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), 0);
}

TEST(StubIpc, TeardownClosesImportsAndRevokesExports) {
  std::shared_ptr<IpcRegistry> registry;
  Stub s(with_ipc(&registry));
  Client b(s);
  api::IpcHandle h{};
  {
    Client a(s);
    const uint64_t p = a.malloc(3 * kMiB);
    a.put(p, iota(8, 5));
    h = export_mem(a, p);
    EXPECT_EQ(registry->size(), 1u);
    api::IpcOpenMemReply o{};
    ASSERT_EQ(open_mem(b, h, &o), 0);
    // b keeps the bytes after a goes.
    EXPECT_EQ(b.get(o.ptr, 8), iota(8, 5));
  }
  wait_closed(s, 1);
  EXPECT_EQ(registry->size(), 0u);
  api::IpcOpenMemReply o{};
  {
    Client c(s);
    EXPECT_EQ(open_mem(c, h, &o), CUDA_ERROR_INVALID_HANDLE);
  }
  wait_closed(s, 2);
  // b still has it open (counted once): its bytes are still there. Then b goes too.
  EXPECT_GT(tst::fake_allocated_bytes(), 0u);
}

TEST(StubIpc, NothingIsLeftOnceEveryoneLeft) {
  Stub s(with_ipc());
  {
    Client a(s), b(s);
    const uint64_t p = a.malloc(64);
    api::IpcOpenMemReply o{};
    ASSERT_EQ(open_mem(b, export_mem(a, p), &o), 0);
  }
  wait_closed(s, 2);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
}

TEST(StubIpc, InterprocessEventsAreSharedWithinTheVm) {
  Stub vm1(with_ipc()), vm2(with_ipc());
  Client a(vm1), b(vm1), stranger(vm2);
  constexpr uint32_t kIpcFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  ASSERT_EQ(a.call<api::Call::EventCreate>({10, kIpcFlags, 0}), 0);
  ASSERT_EQ(a.call<api::Call::EventCreate>({11, 0, 0}), 0);
  EXPECT_EQ(a.call<api::Call::EventCreate>({12, CU_EVENT_INTERPROCESS, 0}), CUDA_ERROR_INVALID_VALUE);
  api::IpcHandleReply h{};
  EXPECT_EQ(a.call<api::Call::IpcGetEventHandle>({11}, &h), CUDA_ERROR_INVALID_HANDLE);  // not interprocess
  ASSERT_EQ(a.call<api::Call::IpcGetEventHandle>({10}, &h), 0);
  EXPECT_EQ(h.handle.tag, api::kIpcEventTag);
  ASSERT_EQ(a.call<api::Call::EventRecord>({10, api::kStreamLegacy, 0, 0}), 0);
  api::DeviceReply d{};
  ASSERT_EQ(b.call<api::Call::IpcOpenEventHandle>({h.handle, 20}, &d), 0);
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(b.call<api::Call::EventSynchronize>({20}), 0);
  EXPECT_EQ(b.call<api::Call::EventQuery>({20}), 0);
  EXPECT_EQ(b.call<api::Call::StreamWaitEvent>({api::kStreamLegacy, 20, 0}), 0);
  api::ElapsedTimeReply t{};
  EXPECT_EQ(b.call<api::Call::EventElapsedTime>({20, 20}, &t), CUDA_ERROR_INVALID_HANDLE);  // timing disabled
  EXPECT_EQ(stranger.call<api::Call::IpcOpenEventHandle>({h.handle, 20}, &d), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(a.call<api::Call::IpcOpenEventHandle>({h.handle, 21}, &d), CUDA_ERROR_INVALID_CONTEXT);
  // A memory handle is no event handle; a destroyed event's handle names nothing.
  api::IpcHandle as_mem = h.handle;
  as_mem.tag = api::kIpcMemTag;
  EXPECT_EQ(b.call<api::Call::IpcOpenEventHandle>({as_mem, 22}, &d), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(a.call<api::Call::EventDestroy>({10}), 0);
  EXPECT_EQ(b.call<api::Call::IpcOpenEventHandle>({h.handle, 23}, &d), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(b.call<api::Call::EventDestroy>({20}), 0);
}

// Clients of one process (the table in process: `--isolation thread`): the importer uses the
// exporter's own event, so it follows the exporter's records (the driver's IPC event opened
// in the process that made it did not, on the H100). The event outlives its exporter's
// destroy and the exporter itself until the importer lets go, context included.
TEST(StubIpc, InOneProcessAnOpenedEventFollowsTheExportersRecords) {
  Stub s(with_ipc());
  Client b(s);
  constexpr uint32_t kIpcFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  const uint64_t events_before = tst::fake_live_events();
  {
    Client a(s);
    const uint64_t fn = a.load_add_one();
    const uint64_t p = a.malloc(4096);
    ASSERT_EQ(a.call<api::Call::StreamCreate>({0x10, 0, 0}), 0);
    ASSERT_EQ(a.call<api::Call::EventCreate>({10, kIpcFlags, 0}), 0);
    api::IpcHandleReply h{};
    ASSERT_EQ(a.call<api::Call::IpcGetEventHandle>({10}, &h), 0);
    api::DeviceReply d{};
    ASSERT_EQ(b.call<api::Call::IpcOpenEventHandle>({h.handle, 20}, &d), 0);
    EXPECT_EQ(tst::fake_live_events(), events_before + 1);  // one event: the exporter's
    EXPECT_EQ(b.call<api::Call::EventQuery>({20}), 0);      // never recorded: complete
    tst::fake_hold_completion(true);
    ASSERT_EQ(a.launch(fn, p, 4, 0x10), 0);
    ASSERT_EQ(a.call<api::Call::EventRecord>({10, 0x10, 0, 0}), 0);
    EXPECT_EQ(b.call<api::Call::EventQuery>({20}), CUDA_ERROR_NOT_READY);  // the exporter's work is pending
    EXPECT_EQ(b.call<api::Call::StreamWaitEvent>({api::kStreamLegacy, 20, 0}), 0);
    tst::fake_hold_completion(false);
    EXPECT_EQ(b.call<api::Call::EventSynchronize>({20}), 0);
    EXPECT_EQ(b.call<api::Call::EventQuery>({20}), 0);
    api::ElapsedTimeReply t{};
    EXPECT_EQ(b.call<api::Call::EventElapsedTime>({20, 20}, &t), CUDA_ERROR_INVALID_HANDLE);  // timing disabled
    // The importer records it too (through a stream of a's context), on its own streams.
    ASSERT_EQ(b.call<api::Call::StreamCreate>({0x30, 0, 0}), 0);
    EXPECT_EQ(b.call<api::Call::EventRecord>({20, 0x30, 0, 0}), 0);
    EXPECT_EQ(b.call<api::Call::EventRecord>({20, api::kStreamLegacy, 0, 0}), 0);
    EXPECT_EQ(b.call<api::Call::EventRecord>({20, 0x30, CU_EVENT_RECORD_EXTERNAL, 0}), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.call<api::Call::EventSynchronize>({10}), 0);
    EXPECT_EQ(b.call<api::Call::EventSynchronize>({20}), 0);
    EXPECT_EQ(a.launch(fn, p, 4, 0x10), 0);  // a's own context still works after b used it
    // Opened again: another guest handle of the same event; the exporter destroys its own.
    ASSERT_EQ(b.call<api::Call::IpcOpenEventHandle>({h.handle, 21}, &d), 0);
    EXPECT_EQ(b.call<api::Call::EventDestroy>({21}), 0);
    ASSERT_EQ(a.call<api::Call::EventDestroy>({10}), 0);
    EXPECT_EQ(b.call<api::Call::IpcOpenEventHandle>({h.handle, 22}, &d), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(b.call<api::Call::EventQuery>({20}), 0);  // still b's to use (CUDA: undefined)
    EXPECT_EQ(tst::fake_live_events(), events_before + 1);
    // A second exported event, which b keeps open past a's end.
    ASSERT_EQ(a.call<api::Call::EventCreate>({11, kIpcFlags, 0}), 0);
    ASSERT_EQ(a.call<api::Call::IpcGetEventHandle>({11}, &h), 0);
    ASSERT_EQ(b.call<api::Call::IpcOpenEventHandle>({h.handle, 23}, &d), 0);
  }
  wait_closed(s, 1);
  // a's context stays for b's events; they still answer.
  EXPECT_EQ(tst::fake_live_contexts(), 2u);
  EXPECT_EQ(b.call<api::Call::EventQuery>({20}), 0);
  EXPECT_EQ(b.call<api::Call::StreamWaitEvent>({api::kStreamLegacy, 23, 0}), 0);
  EXPECT_EQ(b.call<api::Call::EventDestroy>({20}), 0);
  EXPECT_EQ(tst::fake_live_contexts(), 2u);
  EXPECT_EQ(b.call<api::Call::EventDestroy>({23}), 0);  // the last holder: a's context goes with it
  EXPECT_EQ(tst::fake_live_contexts(), 1u);
  EXPECT_EQ(tst::fake_live_events(), events_before);
}

// Memory pools (0x1a10): a pool exported is a token of the VM's table; another program of
// the VM learns its device from it, nobody else names it, and it goes with its pool's destroy
// or its exporter.
TEST(StubIpc, MemoryPoolsExportWithinTheVmOnly) {
  std::shared_ptr<IpcRegistry> registry;
  Stub vm1(with_ipc(&registry)), vm2(with_ipc());
  Client b(vm1), stranger(vm2);
  constexpr uint64_t kPool = 0x7f0000000100, kOther = 0x7f0000000200;
  api::IpcHandleReply h{};
  {
    Client a(vm1);
    ASSERT_EQ(a.call<api::Call::MemPoolExport>({kPool, 0, 0}, &h), 0);
    EXPECT_EQ(h.handle.tag, api::kIpcPoolTag);
    api::IpcHandleReply again{};
    ASSERT_EQ(a.call<api::Call::MemPoolExport>({kPool, 0, 0}, &again), 0);
    EXPECT_EQ(std::memcmp(&h, &again, sizeof h), 0);  // one token per pool
    EXPECT_EQ(a.call<api::Call::MemPoolExport>({kPool, 1, 0}, &again), CUDA_ERROR_INVALID_VALUE);  // no device 1
    EXPECT_EQ(a.call<api::Call::MemPoolExport>({0, 0, 0}, &again), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.call<api::Call::MemPoolExport>({kPool, -1, 0}, &again), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(registry->size(), 1u);

    api::DeviceReply d{};
    d.device = -1;
    ASSERT_EQ(b.call<api::Call::MemPoolImport>({h.handle}, &d), 0);
    EXPECT_EQ(d.device, 0);
    EXPECT_EQ(a.call<api::Call::MemPoolImport>({h.handle}, &d), CUDA_ERROR_INVALID_VALUE);         // its own
    EXPECT_EQ(stranger.call<api::Call::MemPoolImport>({h.handle}, &d), CUDA_ERROR_INVALID_VALUE);  // another VM
    api::IpcHandle forged = h.handle;
    forged.token[0] ^= 1;
    EXPECT_EQ(b.call<api::Call::MemPoolImport>({forged}, &d), CUDA_ERROR_INVALID_VALUE);
    api::IpcHandle as_mem = h.handle;
    as_mem.tag = api::kIpcMemTag;
    EXPECT_EQ(b.call<api::Call::MemPoolImport>({as_mem}, &d), CUDA_ERROR_INVALID_VALUE);
    // A memory or event token is no pool.
    const uint64_t p = a.malloc(64);
    const api::IpcHandle mem = export_mem(a, p);
    api::IpcHandle mem_as_pool = mem;
    mem_as_pool.tag = api::kIpcPoolTag;
    EXPECT_EQ(b.call<api::Call::MemPoolImport>({mem_as_pool}, &d), CUDA_ERROR_INVALID_VALUE);

    // Destroyed: its descriptors name nothing; exported again, a new token.
    EXPECT_EQ(a.call<api::Call::MemPoolForget>({kPool, 0, 0}), 0);
    EXPECT_EQ(a.call<api::Call::MemPoolForget>({kOther, 0, 0}), 0);  // never exported: nothing to do
    EXPECT_EQ(b.call<api::Call::MemPoolImport>({h.handle}, &d), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.call<api::Call::MemPoolExport>({kPool, 0, 0}, &again), 0);
    EXPECT_NE(std::memcmp(&h, &again, sizeof h), 0);
    EXPECT_EQ(b.call<api::Call::MemPoolImport>({again.handle}, &d), 0);
    h = again;
    ASSERT_EQ(a.call<api::Call::MemPoolExport>({kOther, 0, 0}, &again), 0);
  }
  // Its exporter gone: every token it made goes.
  wait_closed(vm1, 1);
  EXPECT_EQ(registry->size(), 0u);
  api::DeviceReply d{};
  EXPECT_EQ(b.call<api::Call::MemPoolImport>({h.handle}, &d), CUDA_ERROR_INVALID_VALUE);
}

// ---------------------------------------------------------------- suspend and resume

// A VM's IPC table reached directly (`--isolation thread`) or through a worker's socket
// (`--isolation process`: the driver's IPC event handles, the table in another thread here).
struct IpcVm {
  std::shared_ptr<IpcRegistry> registry = std::make_shared<IpcRegistry>();
  std::thread server;
  explicit IpcVm(bool worker) : worker_(worker) {}
  StubLimits limits() {
    StubLimits l;
    if (!worker_) {
      l.ipc = local_ipc_channel(registry);
      return l;
    }
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    server = std::thread(serve_ipc_worker, registry, vmrpc::UniqueFd(pair[0]));
    l.ipc = worker_ipc_channel(vmrpc::UniqueFd(pair[1]));
    return l;
  }
  ~IpcVm() {
    if (server.joinable()) server.join();  // once the stub (the channel's last holder) went
  }
  bool worker_;
};

constexpr uint32_t kSharedEventFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
constexpr uint64_t kSharedPool = 0x7f0000000100;

// What two programs of a VM share, made before a suspend and checked after it.
struct Shared {
  uint64_t small = 0, big = 0, fn_b = 0;
  api::IpcHandle h{}, hb{}, he{}, hp{};
  api::IpcOpenMemReply o{}, ob{};
  void build(Client& a, Client& b) {
    small = a.malloc(64 * 4);
    a.malloc(100);  // a neighbour in the same chunk
    a.put(small, iota(64, 0));
    big = a.malloc(3 * kMiB);
    a.put(big + 2 * kMiB, iota(16, 7));
    h = export_mem(a, small);
    hb = export_mem(a, big);
    ASSERT_EQ(open_mem(b, h, &o), 0);
    api::IpcOpenMemReply twice{};
    ASSERT_EQ(open_mem(b, h, &twice), 0);  // two opens: two closes
    ASSERT_EQ(open_mem(b, hb, &ob), 0);
    ASSERT_EQ(a.call<api::Call::EventCreate>({10, kSharedEventFlags, 0}), 0);
    api::IpcHandleReply r{};
    ASSERT_EQ(a.call<api::Call::IpcGetEventHandle>({10}, &r), 0);
    he = r.handle;
    api::DeviceReply d{};
    ASSERT_EQ(b.call<api::Call::IpcOpenEventHandle>({he, 20}, &d), 0);
    ASSERT_EQ(a.call<api::Call::MemPoolExport>({kSharedPool, 0, 0}, &r), 0);
    hp = r.handle;
    fn_b = b.load_add_one();
  }
  // Both programs after the resume: the same pointers and handles, the same memory both ways.
  void check(Client& a, Client& b, Client& c) {
    EXPECT_EQ(b.get(o.ptr, 64), iota(64, 0));
    EXPECT_EQ(b.get(ob.ptr + 2 * kMiB, 16), iota(16, 7));
    b.put(o.ptr, iota(64, 100));
    EXPECT_EQ(a.get(small, 64), iota(64, 100));
    ASSERT_EQ(b.launch(fn_b, o.ptr, 64, api::kStreamLegacy), 0);
    EXPECT_EQ(a.get(small, 64), iota(64, 101));
    a.put(big + 2 * kMiB, iota(16, 70));
    EXPECT_EQ(b.get(ob.ptr + 2 * kMiB, 16), iota(16, 70));
    // The exporter's handles are the ones from before; a third program opens them.
    const api::IpcHandle again = export_mem(a, small);
    EXPECT_EQ(std::memcmp(&h, &again, sizeof h), 0);
    api::IpcOpenMemReply oc{};
    ASSERT_EQ(open_mem(c, h, &oc), 0);
    EXPECT_EQ(c.get(oc.ptr, 64), iota(64, 101));
    // The event: a's records reach b's handle; c opens it too.
    ASSERT_EQ(a.call<api::Call::EventRecord>({10, api::kStreamLegacy, 0, 0}), 0);
    EXPECT_EQ(b.call<api::Call::EventSynchronize>({20}), 0);
    EXPECT_EQ(b.call<api::Call::StreamWaitEvent>({api::kStreamLegacy, 20, 0}), 0);
    EXPECT_EQ(b.call<api::Call::EventRecord>({20, api::kStreamLegacy, 0, 0}), 0);
    api::DeviceReply d{};
    EXPECT_EQ(c.call<api::Call::IpcOpenEventHandle>({he, 30}, &d), 0);
    EXPECT_EQ(c.call<api::Call::EventSynchronize>({30}), 0);
    // The pool's descriptor still names it.
    EXPECT_EQ(c.call<api::Call::MemPoolImport>({hp}, &d), 0);
    // Opens still counted: two closes of the first, then gone.
    EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), 0);
    EXPECT_EQ(b.get(o.ptr, 4), iota(4, 101));
    EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), 0);
    EXPECT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(b.call<api::Call::EventDestroy>({20}), 0);
  }
};

class StubIpcCarry : public ::testing::TestWithParam<bool> {};

// vmcudactl suspend and resume of a VM whose programs share memory, an event and a pool:
// every byte is given back while suspended (the shared memory saved once, with its
// exporter), the tokens stay in the VM's table, and after the resume the importer reads and
// writes the exporter's memory at the same pointer and waits for its event.
TEST_P(StubIpcCarry, SuspendAndResumeOfTheVmKeepWhatItsProgramsShare) {
  IpcVm vm_table(GetParam());
  Stub s(vm_table.limits());
  Client a(s), b(s);
  Shared sh;
  ASSERT_NO_FATAL_FAILURE(sh.build(a, b));
  VmControl vm(s.endpoint, "ipc", {"fake"});
  std::string why;
  ASSERT_TRUE(vm.suspend({}, &why)) << why;
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);  // the shared memory is free too
  EXPECT_EQ(vm_table.registry->size(), 4u);    // the tokens stay (parked)
  // Parked: nothing opens them meanwhile (a program that starts while suspended waits anyway).
  IpcRecord rec;
  vmrpc::UniqueFd fd;
  IpcToken t;
  std::memcpy(t.data(), sh.h.token, t.size());
  EXPECT_FALSE(vm_table.registry->lookup(t, &rec, &fd));
  ASSERT_TRUE(vm.resume({}, &why)) << why;
  Client c(s);
  sh.check(a, b, c);
  // A second round: suspended and resumed again.
  ASSERT_TRUE(vm.suspend({}, &why)) << why;
  ASSERT_TRUE(vm.resume({}, &why)) << why;
  EXPECT_EQ(b.get(sh.ob.ptr + 2 * kMiB, 16), iota(16, 70));
  EXPECT_EQ(a.call<api::Call::Free>({sh.big}), 0);
}

// Saved to files and restored into a new stub with a new table (a restart, an upgrade, a
// VM restored elsewhere): the tokens come from the state files; the importer alone (its
// exporter's state not restored) is refused naming the memory, and comes back once the
// exporter is there.
TEST_P(StubIpcCarry, SaveAndRestoreIntoANewStubRebuildsTheTable) {
  const std::string dir = ::testing::TempDir() + "vmcuda-ipc-save-" + std::to_string(::getpid()) + (GetParam() ? "w" : "t");
  std::filesystem::remove_all(dir);
  Shared sh;
  std::vector<std::string> files;  // exporter's, importer's
  {
    IpcVm vm_table(GetParam());
    Stub s(vm_table.limits());
    {
      Client a(s), b(s);
      ASSERT_NO_FATAL_FAILURE(sh.build(a, b));
      VmControl vm(s.endpoint, "ipc", {"fake"});
      std::string why;
      ASSERT_TRUE(vm.save(dir, {}, &why)) << why;
      auto slots = s.endpoint.served_slots();
      ASSERT_EQ(slots.size(), 2u);
      std::sort(slots.begin(), slots.end(), [](auto& x, auto& y) { return x.connection_id < y.connection_id; });
      for (const auto& sl : slots)
        files.push_back(dir + "/client-" + std::to_string(sl.connection_id) + "-" + std::to_string(sl.slot) + ".state");
      for (const auto& sl : slots) s.endpoint.release_slot(sl.connection_id, sl.slot);
    }
    wait_closed(s, 2);
  }
  IpcVm vm_table(GetParam());
  Stub s(vm_table.limits());
  Client a(s), b(s);
  auto slots = s.endpoint.served_slots();
  for (int i = 0; i < 200 && slots.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    slots = s.endpoint.served_slots();
  }
  ASSERT_EQ(slots.size(), 2u);
  std::sort(slots.begin(), slots.end(), [](auto& x, auto& y) { return x.connection_id < y.connection_id; });
  auto control = [&](size_t i, cc::Op op, const std::string& path) {
    std::vector<std::byte> reply;
    std::string why;
    EXPECT_TRUE(s.endpoint.control_slot(slots[i].connection_id, slots[i].slot, cc::encode(cc::Request{op, path}),
                                        &reply, [](std::span<const std::byte>) {}, &why))
        << why;
    cc::Reply r;
    EXPECT_TRUE(cc::decode(reply, &r));
    return r;
  };
  for (const auto& sl : slots) {
    std::string why;
    ASSERT_TRUE(s.endpoint.hold_slot(sl.connection_id, sl.slot, std::chrono::milliseconds(2000), &why)) << why;
  }
  // The importer first, alone: its memory's handle names nothing in this table yet.
  cc::Reply r = control(1, cc::Op::kRestore, files[1]);
  ASSERT_TRUE(r.ok) << r.error;
  r = control(1, cc::Op::kIpcAttach, {});
  EXPECT_FALSE(r.ok);
  auto hex = [](uint64_t v) {
    char t[32];
    std::snprintf(t, sizeof t, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(t);
  };
  EXPECT_NE(r.error.find("memory opened at " + hex(sh.o.ptr)), std::string::npos) << r.error;
  r = control(1, cc::Op::kSuspend, {});  // as VmControl does with one that cannot attach
  ASSERT_TRUE(r.ok) << r.error;
  // Exporter, then importer (from its state in host memory now), then both attach.
  r = control(0, cc::Op::kRestore, files[0]);
  ASSERT_TRUE(r.ok) << r.error;
  r = control(1, cc::Op::kResume, {});
  ASSERT_TRUE(r.ok) << r.error;
  for (size_t i = 0; i < 2; ++i) {
    r = control(i, cc::Op::kIpcAttach, {});
    ASSERT_TRUE(r.ok) << r.error;
  }
  for (const auto& sl : slots) s.endpoint.release_slot(sl.connection_id, sl.slot);
  Client c(s);
  sh.check(a, b, c);
  std::filesystem::remove_all(dir);
}

// Memory opened from a program that freed it since (natively still readable, CUDA leaves it
// undefined): nobody makes it again at a resume, so the suspend is refused naming it, the
// exporter's own suspend is undone and both run on; once closed the VM suspends.
TEST_P(StubIpcCarry, AnImportWhoseExporterFreedItRefusesTheSuspendNamingIt) {
  IpcVm vm_table(GetParam());
  Stub s(vm_table.limits());
  Client a(s), b(s);
  Shared sh;
  ASSERT_NO_FATAL_FAILURE(sh.build(a, b));
  const uint64_t p = a.malloc(4096);
  a.put(p, iota(8, 5));
  api::IpcOpenMemReply o{};
  ASSERT_EQ(open_mem(b, export_mem(a, p), &o), 0);
  ASSERT_EQ(a.call<api::Call::Free>({p}), 0);
  VmControl vm(s.endpoint, "ipc", {"fake"});
  std::string why;
  EXPECT_FALSE(vm.suspend({}, &why));
  char want[64];
  std::snprintf(want, sizeof want, "memory opened at 0x%llx", static_cast<unsigned long long>(o.ptr));
  EXPECT_NE(why.find(want), std::string::npos) << why;
  EXPECT_EQ(b.get(o.ptr, 8), iota(8, 5));
  ASSERT_EQ(b.call<api::Call::IpcCloseMemHandle>({o.ptr}), 0);
  Client c(s);
  sh.check(a, b, c);
  ASSERT_TRUE(vm.suspend({}, &why)) << why;
  ASSERT_TRUE(vm.resume({}, &why)) << why;
  EXPECT_EQ(b.get(sh.ob.ptr + 2 * kMiB, 16), iota(16, 70));
}

INSTANTIATE_TEST_SUITE_P(Isolation, StubIpcCarry, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "WorkerSocket" : "InProcess"; });

// Forged states: an importer's mapping outside its arena, or of another size than its
// exporter's allocation, is refused naming it; the state file stays as it was.
TEST(StubIpcCarryForged, AnImportOutsideTheArenaOrOfAnotherSizeIsRefused) {
  const std::string dir = ::testing::TempDir() + "vmcuda-ipc-forged-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  IpcVm vm_table(false);
  Stub s(vm_table.limits());
  Client a(s), b(s);
  Shared sh;
  ASSERT_NO_FATAL_FAILURE(sh.build(a, b));
  VmControl vm(s.endpoint, "ipc", {"fake"});
  std::string why;
  ASSERT_TRUE(vm.save(dir, {}, &why)) << why;
  auto slots = s.endpoint.served_slots();
  std::sort(slots.begin(), slots.end(), [](auto& x, auto& y) { return x.connection_id < y.connection_id; });
  const std::string importer =
      dir + "/client-" + std::to_string(slots[1].connection_id) + "-" + std::to_string(slots[1].slot) + ".state";
  auto restore_b = [&](const std::string& path) {
    std::vector<std::byte> reply;
    std::string w;
    EXPECT_TRUE(s.endpoint.control_slot(slots[1].connection_id, slots[1].slot,
                                        cc::encode(cc::Request{cc::Op::kRestore, path}), &reply,
                                        [](std::span<const std::byte>) {}, &w));
    cc::Reply r;
    EXPECT_TRUE(cc::decode(reply, &r));
    return r;
  };
  // The IpcMemory record (kind, id, parent, device, handle, token, va, mapping bytes, bytes,
  // opens) of the memory opened at `ptr`: fields at `at` set to `value`.
  constexpr size_t kHandleAt = 1 + 8 + 8 + 4, kVaAt = kHandleAt + 8 + 16, kMappingAt = kVaAt + 8;
  auto edit_import = [&](const std::string& to, uint64_t ptr, std::vector<std::pair<size_t, uint64_t>> fields) {
    test::slot_control::rewrite_state(importer, to, [&](std::vector<std::byte>& p) {
      uint64_t handle = 0;
      if (p.size() != kMappingAt + 8 + 8 + 4 || static_cast<uint8_t>(p[0]) != static_cast<uint8_t>(ObjectKind::IpcMemory))
        return;
      std::memcpy(&handle, p.data() + kHandleAt, 8);
      if (handle != ptr) return;
      for (const auto& [at, value] : fields) std::memcpy(p.data() + at, &value, 8);
    });
  };
  const std::string outside = dir + "/outside.state", bigger = dir + "/bigger.state";
  // In the exporter's arena, not b's.
  edit_import(outside, sh.o.ptr, {{kHandleAt, kArenaBase + 0x40}, {kVaAt, kArenaBase}});
  // A mapping bigger than the exporter's (the pointer and bytes still inside it).
  edit_import(bigger, sh.ob.ptr, {{kMappingAt, 6 * kMiB}});
  cc::Reply r = restore_b(outside);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("memory opened at 0x500000000040"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("lies outside arena"), std::string::npos) << r.error;
  // The exporter back, the importer from a state whose mapping is bigger than the export.
  {
    std::vector<std::byte> reply;
    std::string w;
    ASSERT_TRUE(s.endpoint.control_slot(slots[0].connection_id, slots[0].slot,
                                        cc::encode(cc::Request{cc::Op::kResume, {}}), &reply,
                                        [](std::span<const std::byte>) {}, &w));
  }
  r = restore_b(bigger);
  ASSERT_TRUE(r.ok) << r.error;
  {
    std::vector<std::byte> reply;
    std::string w;
    ASSERT_TRUE(s.endpoint.control_slot(slots[1].connection_id, slots[1].slot,
                                        cc::encode(cc::Request{cc::Op::kIpcAttach, {}}), &reply,
                                        [](std::span<const std::byte>) {}, &w));
    ASSERT_TRUE(cc::decode(reply, &r));
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("cannot be mapped again: its exporter's allocation is now"), std::string::npos) << r.error;
  }
  std::filesystem::remove_all(dir);
}

TEST(StubIpc, WithoutATableIpcIsNotSupported) {
  Stub s;
  Client a(s);
  const uint64_t p = a.malloc(64);
  api::IpcHandleReply h{};
  EXPECT_EQ(a.call<api::Call::IpcGetMemHandle>({p}, &h), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(a.call<api::Call::EventCreate>({10, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, 0}),
            CUDA_ERROR_NOT_SUPPORTED);
  api::IpcHandleReply pool{};
  EXPECT_EQ(a.call<api::Call::MemPoolExport>({0x7f0000000100, 0, 0}, &pool), CUDA_ERROR_NOT_SUPPORTED);
  api::DeviceReply d{};
  EXPECT_EQ(a.call<api::Call::MemPoolImport>({pool.handle}, &d), CUDA_ERROR_NOT_SUPPORTED);
}

// ---------------------------------------------------------------- a worker's socket

TEST(IpcWorkerSocket, PublishLookupRevokeAndAWorkerThatGoesTakesItsExportsAlong) {
  auto registry = std::make_shared<IpcRegistry>();
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  std::thread server(serve_ipc_worker, registry, vmrpc::UniqueFd(pair[0]));
  {
    auto channel = worker_ipc_channel(vmrpc::UniqueFd(pair[1]));
    vmrpc::UniqueFd mem(::memfd_create("ipc-test", MFD_CLOEXEC));
    ASSERT_TRUE(mem);
    ASSERT_EQ(::write(mem.get(), "shared", 6), 6);
    IpcRecord rec;
    rec.kind = IpcRecord::kMemory;
    rec.owner = 42;
    rec.mapping_bytes = 2 * kMiB;
    rec.bytes = 100;
    IpcToken t{}, t2{};
    ASSERT_TRUE(channel->publish(rec, mem.get(), &t));
    ASSERT_TRUE(channel->publish(rec, mem.get(), &t2));
    EXPECT_NE(t, t2);
    // Memory without its fd is refused.
    IpcToken bad{};
    EXPECT_FALSE(channel->publish(rec, -1, &bad));
    IpcRecord got;
    vmrpc::UniqueFd fd;
    ASSERT_TRUE(channel->lookup(t, &got, &fd));
    EXPECT_EQ(got.bytes, 100u);
    EXPECT_EQ(got.owner, 42u);
    char buf[6] = {};
    ASSERT_EQ(::pread(fd.get(), buf, 6, 0), 6);
    EXPECT_EQ(std::string(buf, 6), "shared");
    // Only its owner revokes it.
    channel->revoke(t, 7);
    EXPECT_TRUE(channel->lookup(t, &got, &fd));
    channel->revoke(t, 42);
    EXPECT_FALSE(channel->lookup(t, &got, &fd));
    EXPECT_EQ(registry->size(), 1u);
  }  // the worker's end closes: what it published goes
  server.join();
  EXPECT_EQ(registry->size(), 0u);
}

// A suspend parks a token (nothing opens it, its fd goes); the resume republishes it under
// the same token with a new generation. A token that names another client's live export is
// not taken over (a forged or mixed-up state); one the table does not know is (a restore
// into a new stub process).
TEST(IpcRegistry, ParkAndRepublishKeepTheTokenAndRefuseAnotherClientsLiveOne) {
  IpcRegistry r;
  IpcRecord rec;
  rec.kind = IpcRecord::kPool;
  rec.owner = 7;
  const IpcToken t = r.publish(rec, {});
  IpcRecord got;
  vmrpc::UniqueFd fd;
  ASSERT_TRUE(r.lookup(t, &got, &fd));
  const uint64_t first = got.generation;
  IpcRecord other = rec;
  other.owner = 9;
  EXPECT_FALSE(r.republish(t, other, {}));  // 7's, live
  r.park(t, 9);                              // not 9's to park
  EXPECT_TRUE(r.lookup(t, &got, &fd));
  r.park(t, 7);
  EXPECT_FALSE(r.lookup(t, &got, &fd));
  EXPECT_EQ(r.size(), 1u);
  ASSERT_TRUE(r.republish(t, rec, {}));
  ASSERT_TRUE(r.lookup(t, &got, &fd));
  EXPECT_GT(got.generation, first);
  EXPECT_TRUE(r.republish(t, rec, {}));  // its own again: fine
  IpcToken fresh{};
  fresh[0] = 1;
  EXPECT_TRUE(r.republish(fresh, other, {}));
  EXPECT_EQ(r.size(), 2u);
  r.revoke_owner(7);
  r.revoke_owner(9);
  EXPECT_EQ(r.size(), 0u);
}

}  // namespace
}  // namespace vmcuda::host
