// guest-lib's stream-ordered allocation and memory pools (memory_pool.cc) against vmcuda-stub
// in this process, on the test executor: allocations are the host's Malloc, frees its
// queued Free; pools and their attributes are kept in this process.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

vmcuda::host::test::Stub*& g_stub = vmcuda::host::test::g_guest_stub;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new vmcuda::host::test::GuestStubEnvironment);

class GuestMemoryPool : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    (void)last_error();
  }
};

uint64_t attr(cudaMemPool_t p, cudaMemPoolAttr a) {
  uint64_t v = ~0ull;
  EXPECT_EQ(cudaMemPoolGetAttribute(p, a, &v), cudaSuccess);
  return v;
}

// Allocated on a stream, written and read back through ordinary copies, known to the
// pointer attributes and to cudaMemcpyDefault, freed on the stream.
TEST_F(GuestMemoryPool, AllocateUseFreeOnAStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int* d = nullptr;
  ASSERT_EQ(cudaMallocAsync(reinterpret_cast<void**>(&d), 1024 * sizeof(int), s), cudaSuccess);
  ASSERT_NE(d, nullptr);
  cudaPointerAttributes pa{};
  ASSERT_EQ(cudaPointerGetAttributes(&pa, d + 5), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeDevice);
  EXPECT_EQ(pa.device, 0);
  std::vector<int> h(1024), back(1024, 0);
  for (int i = 0; i < 1024; ++i) h[i] = i * 3;
  ASSERT_EQ(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(int), cudaMemcpyDefault, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), d, back.size() * sizeof(int), cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(back, h);
  ASSERT_EQ(cudaFreeAsync(d, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  // Gone: a second free and copies to it fail at once.
  EXPECT_EQ(cudaFreeAsync(d, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)last_error();
}

TEST_F(GuestMemoryPool, MallocAsyncMemoryFreedByCudaFreeAndCudaMallocByFreeAsync) {
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMallocAsync(&a, 256, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 256), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(b, cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

TEST_F(GuestMemoryPool, ArgumentErrors) {
  void* p = nullptr;
  EXPECT_EQ(cudaMallocAsync(nullptr, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMallocAsync(&p, 0, nullptr), cudaSuccess);  // as on the H200: nothing, NULL
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaMallocAsync(&p, 16, reinterpret_cast<cudaStream_t>(0x123400)), cudaErrorInvalidResourceHandle);
  int local = 0;
  EXPECT_EQ(cudaFreeAsync(&local, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeAsync(nullptr, nullptr), cudaSuccess);  // as on the H200
  EXPECT_EQ(cudaMallocFromPoolAsync(&p, 16, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocFromPoolAsync(&p, 16, reinterpret_cast<cudaMemPool_t>(0x999900), nullptr),
            cudaErrorInvalidValue);
  cudaMemPool_t pool;
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolTrimTo(reinterpret_cast<cudaMemPool_t>(0x999900), 0), cudaErrorInvalidValue);
  (void)last_error();
}

// The default pool is one handle, the current pool until another is set; used memory
// follows this process's allocations through the pool.
TEST_F(GuestMemoryPool, DefaultPoolIdentityAndUsedMemory) {
  cudaMemPool_t def, cur, again;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&again, 0), cudaSuccess);
  EXPECT_EQ(def, cur);
  EXPECT_EQ(def, again);
  const uint64_t before = attr(def, cudaMemPoolAttrUsedMemCurrent);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 1 << 20, nullptr), cudaSuccess);
  EXPECT_EQ(attr(def, cudaMemPoolAttrUsedMemCurrent), before + (1 << 20));
  EXPECT_GE(attr(def, cudaMemPoolAttrUsedMemHigh), before + (1 << 20));
  ASSERT_EQ(cudaFreeAsync(p, nullptr), cudaSuccess);
  EXPECT_EQ(attr(def, cudaMemPoolAttrUsedMemCurrent), before);
  uint64_t zero = 0, one = 1;
  EXPECT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &one), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  EXPECT_EQ(attr(def, cudaMemPoolAttrUsedMemHigh), before);
  EXPECT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemCurrent, &zero), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(def), cudaErrorInvalidValue);  // default pools live on
  (void)last_error();
}

TEST_F(GuestMemoryPool, AttributesKeepTheirValues) {
  cudaMemPool_t def;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
  EXPECT_EQ(attr(def, cudaMemPoolAttrReleaseThreshold), 0u);
  uint64_t t = 64 << 20;
  ASSERT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &t), cudaSuccess);
  EXPECT_EQ(attr(def, cudaMemPoolAttrReleaseThreshold), t);
  int v = -1;
  ASSERT_EQ(cudaMemPoolGetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &v), cudaSuccess);
  EXPECT_EQ(v, 1);
  int off = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &off), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &v), cudaSuccess);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(cudaMemPoolGetAttribute(def, static_cast<cudaMemPoolAttr>(99), &v), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolTrimTo(def, 0), cudaSuccess);
  t = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &t), cudaSuccess);
  int on = 1;
  ASSERT_EQ(cudaMemPoolSetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &on), cudaSuccess);
  (void)last_error();
}

// A created pool: allocations from it, its limit, current pool, access, destruction.
TEST_F(GuestMemoryPool, CreatedPool) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location = {cudaMemLocationTypeDevice, 0};
  props.maxSize = 1 << 20;
  cudaMemPool_t pool, def, cur;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
  EXPECT_NE(pool, def);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&p, 4096, pool, nullptr), cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 4096u);
  void* q = nullptr;
  EXPECT_EQ(cudaMallocFromPoolAsync(&q, 1 << 20, pool, nullptr), cudaErrorMemoryAllocation);  // over maxSize
  // Current pool: cudaMallocAsync uses it.
  ASSERT_EQ(cudaDeviceSetMemPool(0, pool), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
  EXPECT_EQ(cur, pool);
  ASSERT_EQ(cudaMallocAsync(&q, 8192, nullptr), cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 4096u + 8192u);
  EXPECT_EQ(cudaDeviceSetMemPool(1, pool), cudaErrorInvalidDevice);
  // Access: read-write from its device, which cannot be lowered.
  cudaMemLocation loc{cudaMemLocationTypeDevice, 0};
  cudaMemAccessFlags f = cudaMemAccessFlagsProtNone;
  ASSERT_EQ(cudaMemPoolGetAccess(&f, pool, &loc), cudaSuccess);
  EXPECT_EQ(f, cudaMemAccessFlagsProtReadWrite);
  cudaMemAccessDesc rw{loc, cudaMemAccessFlagsProtReadWrite}, none{loc, cudaMemAccessFlagsProtNone};
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &rw, 1), cudaSuccess);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &none, 1), cudaErrorInvalidDevice);  // its own device: as on the H200
  cudaMemAccessDesc other{{cudaMemLocationTypeDevice, 3}, cudaMemAccessFlagsProtReadWrite};
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &other, 1), cudaErrorInvalidDevice);
  loc.id = 3;
  EXPECT_EQ(cudaMemPoolGetAccess(&f, pool, &loc), cudaErrorInvalidValue);  // as on the H200
  // Destroying the current pool makes the default current again; its allocations stay.
  ASSERT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
  EXPECT_EQ(cur, def);
  EXPECT_EQ(cudaMemPoolTrimTo(pool, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(p, 0, 4096), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(q, nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  (void)last_error();
}

TEST_F(GuestMemoryPool, CreateChecksItsProperties) {
  cudaMemPool_t pool;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location = {cudaMemLocationTypeDevice, 0};
  EXPECT_EQ(cudaMemPoolCreate(nullptr, &props), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolCreate(&pool, nullptr), cudaErrorInvalidValue);
  props.allocType = static_cast<cudaMemAllocationType>(7);
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);
  // A managed pool is created (as on the H200); allocations from it are not remoted.
  props.allocType = cudaMemAllocationTypeManaged;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  void* m = nullptr;
  EXPECT_EQ(cudaMallocFromPoolAsync(&m, 64, pool, nullptr), cudaErrorNotSupported);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.id = 7;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);  // as on the H200
  // Host pools: never IPC capable (CUDA: handleTypes must be 0); HostNumaCurrent is no
  // pool's location; a HostNuma node must exist.
  props.location = {cudaMemLocationTypeHost, 0};
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);
  props.handleTypes = cudaMemHandleTypeNone;
  props.location = {cudaMemLocationTypeHostNumaCurrent, 0};
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);
  props.location = {cudaMemLocationTypeHostNuma, 1 << 20};
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);
  props.location = {cudaMemLocationTypeHostNuma, 0};
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  (void)last_error();
}

// A pool of host memory: its allocations are pinned shared-heap blocks the host CPU reads
// and writes and the device reaches, counted as the pool's used memory, freed in stream
// order (and by cudaFree); the host locations' default and current pools.
TEST_F(GuestMemoryPool, HostPool) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location = {cudaMemLocationTypeHost, 42};  // the id is ignored
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int* h = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&h), 256 * sizeof(int), pool, s), cudaSuccess);
  ASSERT_NE(h, nullptr);
  cudaPointerAttributes pa{};
  ASSERT_EQ(cudaPointerGetAttributes(&pa, h + 3), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeHost);
  EXPECT_EQ(pa.hostPointer, h + 3);
  EXPECT_NE(pa.devicePointer, nullptr);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 256 * sizeof(int));
  // The CPU writes it directly; a copy reads it on the device's side.
  for (int i = 0; i < 256; ++i) h[i] = i;
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 256 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, h, 256 * sizeof(int), cudaMemcpyDefault, s), cudaSuccess);
  std::vector<int> back(256, -1);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d, 256 * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 256 * sizeof(int), s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(h, d, 256 * sizeof(int), cudaMemcpyDefault, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(back[i], i);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(h[i], 0);  // the device's bytes, seen by the CPU
  // Access: the host CPU read-write, devices as granted (heap memory is mapped for all).
  cudaMemAccessFlags f = cudaMemAccessFlagsProtRead;
  cudaMemLocation cpu{cudaMemLocationTypeHost, 0}, dev0{cudaMemLocationTypeDevice, 0};
  ASSERT_EQ(cudaMemPoolGetAccess(&f, pool, &cpu), cudaSuccess);
  EXPECT_EQ(f, cudaMemAccessFlagsProtReadWrite);
  ASSERT_EQ(cudaMemPoolGetAccess(&f, pool, &dev0), cudaSuccess);
  EXPECT_EQ(f, cudaMemAccessFlagsProtNone);
  const cudaMemAccessDesc grant{dev0, cudaMemAccessFlagsProtReadWrite};
  ASSERT_EQ(cudaMemPoolSetAccess(pool, &grant, 1), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAccess(&f, pool, &dev0), cudaSuccess);
  EXPECT_EQ(f, cudaMemAccessFlagsProtReadWrite);
  // Freed on the stream: the pool's used memory goes back, the pointer is no memory of ours.
  ASSERT_EQ(cudaFreeAsync(h, s), cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 0u);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemHigh), 256 * sizeof(int));
  ASSERT_EQ(cudaPointerGetAttributes(&pa, h), cudaSuccess);
  EXPECT_EQ(pa.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaFreeAsync(h, s), cudaErrorInvalidValue);
  // cudaFree frees it too; cudaFreeHost does not (it is the pool's, not cudaHostAlloc's).
  void* g = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&g, 100, pool, s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(g), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(g), cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 0u);
  // A host pool serves no device's allocations.
  EXPECT_EQ(cudaDeviceSetMemPool(0, pool), cudaErrorInvalidValue);
  // The host location's pools: a default one, and the current one as set.
  cudaMemPool_t def = nullptr, cur = nullptr;
  ASSERT_EQ(cudaMemGetDefaultMemPool(&def, &cpu, cudaMemAllocationTypePinned), cudaSuccess);
  EXPECT_NE(def, nullptr);
  EXPECT_NE(def, pool);
  ASSERT_EQ(cudaMemGetMemPool(&cur, &cpu, cudaMemAllocationTypePinned), cudaSuccess);
  EXPECT_EQ(cur, def);
  ASSERT_EQ(cudaMemSetMemPool(&cpu, cudaMemAllocationTypePinned, pool), cudaSuccess);
  ASSERT_EQ(cudaMemGetMemPool(&cur, &cpu, cudaMemAllocationTypePinned), cudaSuccess);
  EXPECT_EQ(cur, pool);
  EXPECT_EQ(cudaMemSetMemPool(&dev0, cudaMemAllocationTypePinned, pool), cudaErrorInvalidValue);
  cudaMemLocation numa0{cudaMemLocationTypeHostNuma, 0}, current{cudaMemLocationTypeHostNumaCurrent, 0};
  EXPECT_EQ(cudaMemSetMemPool(&numa0, cudaMemAllocationTypePinned, pool), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemGetMemPool(&cur, &current, cudaMemAllocationTypePinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(def), cudaErrorInvalidValue);  // a default pool lives on
  // Destroyed: the location's current pool is its default again.
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  ASSERT_EQ(cudaMemGetMemPool(&cur, &cpu, cudaMemAllocationTypePinned), cudaSuccess);
  EXPECT_EQ(cur, def);
  // The default host pool allocates too.
  void* x = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&x, 64, def, s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(x, s), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)last_error();
}

// Async notifications: an allocation refused for want of memory the VM has left notifies the
// device's callbacks (on the library's thread) with the bytes asked beyond what was free; a
// refusal of another device's or after unregistering notifies nobody; a callback may not
// register or unregister (cudaErrorNotPermitted).
struct Notified {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<unsigned long long> over;
  cudaError_t nested = cudaSuccess;
  cudaAsyncCallbackHandle_t handle_seen = nullptr;
};
void on_notification(cudaAsyncNotificationInfo_t* info, void* data, cudaAsyncCallbackHandle_t handle) {
  auto* n = static_cast<Notified*>(data);
  cudaAsyncCallbackHandle_t h2 = nullptr;
  const cudaError_t nested = cudaDeviceRegisterAsyncNotification(0, on_notification, data, &h2);
  std::lock_guard g(n->mu);
  if (info->type == cudaAsyncNotificationTypeOverBudget) n->over.push_back(info->info.overBudget.bytesOverBudget);
  n->nested = nested;
  n->handle_seen = handle;
  n->cv.notify_all();
}

TEST_F(GuestMemoryPool, OverBudgetNotification) {
  Notified n;
  cudaAsyncCallbackHandle_t h = nullptr;
  EXPECT_EQ(cudaDeviceRegisterAsyncNotification(0, nullptr, &n, &h), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceRegisterAsyncNotification(0, on_notification, &n, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceRegisterAsyncNotification(99, on_notification, &n, &h), cudaErrorInvalidDevice);
  ASSERT_EQ(cudaDeviceRegisterAsyncNotification(0, on_notification, &n, &h), cudaSuccess);
  ASSERT_NE(h, nullptr);
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  const size_t ask = free_bytes + (64ull << 20);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, ask), cudaErrorMemoryAllocation);
  {
    std::unique_lock g(n.mu);
    ASSERT_TRUE(n.cv.wait_for(g, std::chrono::seconds(5), [&] { return !n.over.empty(); }));
    EXPECT_EQ(n.over[0], ask - free_bytes);
    EXPECT_EQ(n.nested, cudaErrorNotPermitted);
    EXPECT_EQ(n.handle_seen, h);
  }
  // The stream-ordered path notifies too.
  EXPECT_EQ(cudaMallocAsync(&p, ask, nullptr), cudaErrorMemoryAllocation);
  {
    std::unique_lock g(n.mu);
    ASSERT_TRUE(n.cv.wait_for(g, std::chrono::seconds(5), [&] { return n.over.size() == 2; }));
  }
  // Another device's handle is not device 0's... (one device here: the handle unknown there).
  EXPECT_EQ(cudaDeviceUnregisterAsyncNotification(99, h), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceUnregisterAsyncNotification(0, h), cudaSuccess);
  EXPECT_EQ(cudaDeviceUnregisterAsyncNotification(0, h), cudaErrorInvalidValue);
  // Unregistered: nobody hears of the next refusal.
  EXPECT_EQ(cudaMalloc(&p, ask), cudaErrorMemoryAllocation);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::lock_guard g(n.mu);
    EXPECT_EQ(n.over.size(), 2u);
  }
  (void)last_error();
}

// Pool IPC in one program (the import itself needs another program: tests/cuda/ipc_pool.cu):
// a shareable pool exports as a real descriptor naming one token; what cannot export or
// import is refused as CUDA documents.
TEST_F(GuestMemoryPool, PoolIpcExportsAndRefusesWhatCudaRefuses) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location = {cudaMemLocationTypeDevice, 0};
  cudaMemPool_t plain, pool;
  ASSERT_EQ(cudaMemPoolCreate(&plain, &props), cudaSuccess);
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  constexpr auto kFd = cudaMemHandleTypePosixFileDescriptor;
  int fd = -1, fd2 = -1;
  ASSERT_EQ(cudaMemPoolExportToShareableHandle(&fd, pool, kFd, 0), cudaSuccess);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(cudaMemPoolExportToShareableHandle(&fd2, pool, kFd, 0), cudaSuccess);
  EXPECT_NE(fd, fd2);  // a descriptor of its own each time, naming the same pool
  char a[72] = {}, b[72] = {};
  ASSERT_EQ(pread(fd, a, sizeof a, 0), 72);
  ASSERT_EQ(pread(fd2, b, sizeof b, 0), 72);
  EXPECT_EQ(std::memcmp(a, b, sizeof a), 0);
  EXPECT_EQ(pwrite(fd, "x", 1, 0), -1);  // sealed: what it names cannot change
  int none = -1;
  EXPECT_EQ(cudaMemPoolExportToShareableHandle(&none, plain, kFd, 0), cudaErrorInvalidValue);  // not shareable
  EXPECT_EQ(cudaMemPoolExportToShareableHandle(&none, pool, kFd, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolExportToShareableHandle(nullptr, pool, kFd, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolExportToShareableHandle(&none, pool, cudaMemHandleTypeFabric, 0), cudaErrorNotSupported);
  EXPECT_EQ(none, -1);

  // Its own pool, a descriptor of something else, none at all.
  cudaMemPool_t imported = nullptr;
  auto as_handle = [](int d) { return reinterpret_cast<void*>(static_cast<intptr_t>(d)); };
  EXPECT_EQ(cudaMemPoolImportFromShareableHandle(&imported, as_handle(fd), kFd, 0), cudaErrorInvalidValue);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(cudaMemPoolImportFromShareableHandle(&imported, as_handle(pipe_fds[0]), kFd, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolImportFromShareableHandle(&imported, as_handle(-1), kFd, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolImportFromShareableHandle(&imported, as_handle(fd), kFd, 1), cudaErrorInvalidValue);
  EXPECT_EQ(imported, nullptr);
  close(pipe_fds[0]);
  close(pipe_fds[1]);

  // Pointers: of a shareable pool only.
  void* p = nullptr;
  void* q = nullptr;
  void* m = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&p, 4096, pool, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMallocFromPoolAsync(&q, 4096, plain, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&m, 4096), cudaSuccess);
  cudaMemPoolPtrExportData data{}, again{};
  ASSERT_EQ(cudaMemPoolExportPointer(&data, p), cudaSuccess);
  ASSERT_EQ(cudaMemPoolExportPointer(&again, p), cudaSuccess);
  EXPECT_EQ(std::memcmp(&data, &again, sizeof data), 0);
  EXPECT_EQ(cudaMemPoolExportPointer(&again, q), cudaErrorInvalidValue);  // its pool is not shareable
  EXPECT_EQ(cudaMemPoolExportPointer(&again, m), cudaErrorInvalidValue);  // no pool's
  EXPECT_EQ(cudaMemPoolExportPointer(nullptr, p), cudaErrorInvalidValue);
  // Imported through a pool that is not imported: refused.
  void* got = nullptr;
  EXPECT_EQ(cudaMemPoolImportPointer(&got, pool, &data), cudaErrorInvalidValue);
  EXPECT_EQ(got, nullptr);

  EXPECT_EQ(cudaFreeAsync(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(q, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFree(m), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(plain), cudaSuccess);
  close(fd);
  close(fd2);
  (void)last_error();
}

}  // namespace
