// guest-lib's stream, event and async copy entry points end to end: the real guest code
// (remote.cc's lazy queue, stream.cc, event.cc, memory_async.cc) against vmcuda-stub in
// this process, on the test executor, over the local transport. The process has one
// connection (Remote::get connects once), so the tests share one client and one stub.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace api = vmcuda::api;
namespace tst = vmcuda::testing;

// cudaGetLastError / cudaPeekAtLastError (error.cc, not linked here) are these.
cudaError_t last_error() { return vmcuda::guest::take_last_error(); }
cudaError_t peek_last_error() { return vmcuda::guest::peek_last_error(); }

vmcuda::host::test::Stub*& g_stub = vmcuda::host::test::g_guest_stub;

// One stub for the whole program; VMCUDA_SOCKET points guest-lib at it.
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new vmcuda::host::test::GuestStubEnvironment);

Remote& remote() {
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);
  EXPECT_NE(r, nullptr) << "no stub: error " << err;
  return *r;
}

uint64_t device_malloc(uint64_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
  return reinterpret_cast<uint64_t>(p);
}

// Device memory the guest believes it has but the host never gave it (a stale map, or a
// hostile guest): the guest's own checks pass, the host's refuse.
struct GhostAllocation {
  static constexpr uint64_t kBase = 0xdead0000;
  GhostAllocation() { vgpu_db::AllocationMap::process().add({kBase, 4096, vgpu_db::Allocation::kDevice, 0, 0}); }
  ~GhostAllocation() { vgpu_db::AllocationMap::process().remove(kBase, vgpu_db::Allocation::kDevice); }
  void* ptr() const { return reinterpret_cast<void*>(kBase); }
};

// Frames waiting in the lazy queue (not yet sent).
uint32_t queued_frames() {
  auto& r = remote();
  auto lock = r.lock();
  return r.slot().batch().frame_count();
}

class GuestStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // nothing left over
    (void)last_error();
  }
};

TEST_F(GuestStreams, CreateIsQueuedAndTheHandleWorksAtOnce) {
  const uint64_t streams_before = tst::fake_live_streams();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s, cudaStreamLegacy);
  EXPECT_NE(s, cudaStreamPerThread);
  EXPECT_GE(queued_frames(), 1u);  // not sent yet
  EXPECT_EQ(tst::fake_live_streams(), streams_before);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);  // sends the creation, then synchronizes
  EXPECT_EQ(queued_frames(), 0u);
  EXPECT_EQ(tst::fake_live_streams(), streams_before + 1);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  unsigned flags = 99;
  ASSERT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaStreamDefault});
  int prio = 99;
  ASSERT_EQ(cudaStreamGetPriority(s, &prio), cudaSuccess);
  EXPECT_EQ(prio, 0);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(tst::fake_live_streams(), streams_before);
  // Destroyed: an error at once, locally, and the thread's last error.
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(last_error(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(last_error(), cudaSuccess);
}

TEST_F(GuestStreams, FlagsAndPriorities) {
  cudaStream_t a, b, c;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&b, cudaStreamDefault, -3), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&c, cudaStreamNonBlocking, -100), cudaSuccess);
  EXPECT_NE(a, b);
  unsigned flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(a, &flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaStreamNonBlocking});
  int prio = 0;
  ASSERT_EQ(cudaStreamGetPriority(b, &prio), cudaSuccess);
  EXPECT_EQ(prio, -3);
  ASSERT_EQ(cudaStreamGetPriority(c, &prio), cudaSuccess);
  EXPECT_EQ(prio, -5);  // clamped to the device's range, as CUDA does
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  EXPECT_EQ(cudaDeviceGetStreamPriorityRange(nullptr, &greatest), cudaSuccess);
  // Bad arguments, at once.
  EXPECT_EQ(cudaStreamCreate(nullptr), cudaErrorInvalidValue);
  cudaStream_t d;
  EXPECT_EQ(cudaStreamCreateWithFlags(&d, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamGetFlags(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamGetPriority(a, nullptr), cudaErrorInvalidValue);
  for (cudaStream_t s : {a, b, c}) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

TEST_F(GuestStreams, Attributes) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreate(&a), cudaSuccess);  // queued: the set below sends it first
  ASSERT_EQ(cudaStreamCreate(&b), cudaSuccess);
  const uint64_t mem = device_malloc(1 << 20);
  cudaStreamAttrValue v{};
  v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(mem);
  v.accessPolicyWindow.num_bytes = 1 << 20;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  ASSERT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributeAccessPolicyWindow, &v), cudaSuccess);
  cudaStreamAttrValue out;
  std::memset(&out, 0x5a, sizeof out);
  ASSERT_EQ(cudaStreamGetAttribute(a, cudaStreamAttributeAccessPolicyWindow, &out), cudaSuccess);
  EXPECT_EQ(out.accessPolicyWindow.base_ptr, v.accessPolicyWindow.base_ptr);
  EXPECT_EQ(out.accessPolicyWindow.num_bytes, size_t{1} << 20);
  EXPECT_EQ(out.accessPolicyWindow.hitRatio, 0.5f);
  EXPECT_EQ(out.accessPolicyWindow.hitProp, cudaAccessPropertyPersisting);
  EXPECT_EQ(out.accessPolicyWindow.missProp, cudaAccessPropertyStreaming);
  EXPECT_EQ(out.pad[40], 0);  // the rest of the union is cleared, not left as it was
  v = {};
  v.syncPolicy = cudaSyncPolicyYield;
  ASSERT_EQ(cudaStreamSetAttribute_ptsz(a, cudaStreamAttributeSynchronizationPolicy, &v), cudaSuccess);
  ASSERT_EQ(cudaStreamGetAttribute(a, cudaStreamAttributeSynchronizationPolicy, &out), cudaSuccess);
  EXPECT_EQ(out.syncPolicy, cudaSyncPolicyYield);
  v = {};
  v.priority = -2;
  ASSERT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributePriority, &v), cudaSuccess);
  int prio = 0;
  ASSERT_EQ(cudaStreamGetPriority(a, &prio), cudaSuccess);
  EXPECT_EQ(prio, -2);
  v = {};
  v.memSyncDomain = cudaLaunchMemSyncDomainRemote;
  ASSERT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributeMemSyncDomain, &v), cudaSuccess);
  v = {};
  v.memSyncDomainMap = {2, 3};
  ASSERT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributeMemSyncDomainMap, &v), cudaSuccess);
  // Copied, queued; the next get sends it.
  ASSERT_EQ(cudaStreamCopyAttributes(b, a), cudaSuccess);
  ASSERT_EQ(cudaStreamGetAttribute(b, cudaStreamAttributeAccessPolicyWindow, &out), cudaSuccess);
  EXPECT_EQ(out.accessPolicyWindow.base_ptr, reinterpret_cast<void*>(mem));
  ASSERT_EQ(cudaStreamGetAttribute(b, cudaStreamAttributeMemSyncDomainMap, &out), cudaSuccess);
  EXPECT_EQ(out.memSyncDomainMap.default_, 2);
  EXPECT_EQ(out.memSyncDomainMap.remote, 3);
  ASSERT_EQ(cudaStreamGetAttribute(b, cudaStreamAttributeMemSyncDomain, &out), cudaSuccess);
  EXPECT_EQ(out.memSyncDomain, cudaLaunchMemSyncDomainRemote);

  // Errors are this call's (a round trip), and become the last error.
  v = {};
  v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(mem);
  v.accessPolicyWindow.num_bytes = 4096;
  v.accessPolicyWindow.hitRatio = 2.0f;
  EXPECT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributeAccessPolicyWindow, &v), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  {
    GhostAllocation ghost;  // memory the host never gave: only the host can tell
    v.accessPolicyWindow.base_ptr = ghost.ptr();
    v.accessPolicyWindow.hitRatio = 1.0f;
    EXPECT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributeAccessPolicyWindow, &v), cudaErrorInvalidValue);
  }
  v = {};
  v.syncPolicy = static_cast<cudaSynchronizationPolicy>(9);
  EXPECT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributeSynchronizationPolicy, &v), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSetAttribute(a, cudaLaunchAttributeCooperative, &v), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamGetAttribute(a, static_cast<cudaStreamAttrID>(77), &out), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSetAttribute(a, cudaStreamAttributePriority, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamGetAttribute(a, cudaStreamAttributePriority, nullptr), cudaErrorInvalidValue);
  const auto forged = reinterpret_cast<cudaStream_t>(0x12340);
  EXPECT_EQ(cudaStreamGetAttribute(forged, cudaStreamAttributePriority, &out), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamCopyAttributes(forged, a), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(last_error(), cudaErrorInvalidResourceHandle);
  // The special streams.
  ASSERT_EQ(cudaStreamGetAttribute(nullptr, cudaStreamAttributeSynchronizationPolicy, &out), cudaSuccess);
  EXPECT_EQ(static_cast<int>(out.syncPolicy), -1);  // none set (driver 580 on the H100)
  for (cudaStream_t s : {a, b}) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFree(reinterpret_cast<void*>(mem)), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

TEST_F(GuestStreams, SpecialStreams) {
  for (cudaStream_t s : {static_cast<cudaStream_t>(nullptr), cudaStreamLegacy, cudaStreamPerThread}) {
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize_ptsz(s), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery_ptsz(s), cudaSuccess);
    unsigned flags = 9;
    EXPECT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
    EXPECT_EQ(flags, 0u);
    int prio = 9;
    EXPECT_EQ(cudaStreamGetPriority(s, &prio), cudaSuccess);
    EXPECT_EQ(prio, 0);
    // Not the app's to destroy (NVIDIA's answer too).
    EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  }
  EXPECT_EQ(last_error(), cudaErrorInvalidResourceHandle);
}

TEST_F(GuestStreams, ForgedHandlesAreRejectedHereOrByTheHost) {
  const auto forged = reinterpret_cast<cudaStream_t>(0x12340);
  EXPECT_EQ(cudaStreamSynchronize(forged), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamQuery(forged), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(forged), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemsetAsync(reinterpret_cast<void*>(0x1000), 0, 4, forged), cudaErrorInvalidResourceHandle);
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(ev, forged), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(forged, ev, 0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, reinterpret_cast<cudaEvent_t>(0x12340), 0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, ev, 2), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  // A handle the guest believes in but the host never saw created (a guest-lib bug, or a
  // hostile guest): the queued call succeeds here, the host refuses it, and its error is
  // the next synchronizing call's answer.
  const uint64_t ghost = vmcuda::guest::handles::next();
  ASSERT_TRUE(vmcuda::guest::handles::add_stream(ghost, {}));
  EXPECT_EQ(cudaEventRecord(ev, reinterpret_cast<cudaStream_t>(ghost)), cudaSuccess);
  EXPECT_EQ(last_error(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(last_error(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // reported once
  vmcuda::guest::handles::remove_stream(ghost);
  EXPECT_EQ(cudaEventDestroy(ev), cudaSuccess);
}

TEST_F(GuestStreams, EventsRecordSynchronizeQueryElapsedTime) {
  const uint64_t p = device_malloc(1 << 16);
  cudaStream_t s;
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&end, cudaEventBlockingSync), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // never recorded
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  // Four memsets of 0.5 ms each on the executor's clock, all queued.
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(cudaMemsetAsync(reinterpret_cast<void*>(p), i, 1 << 16, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecordWithFlags(untimed, s, cudaEventRecordExternal), cudaSuccess);
  EXPECT_GE(queued_frames(), 7u);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_FLOAT_EQ(ms, 2.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(nullptr, start, end), cudaErrorInvalidValue);
  // Another stream waits on the event; the per-thread variants take stream 0 as the
  // per-thread default stream.
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, end, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent_ptsz(nullptr, end, cudaEventWaitExternal), cudaSuccess);
  EXPECT_EQ(cudaEventRecord_ptsz(start, nullptr), cudaSuccess);
  EXPECT_EQ(cudaEventRecordWithFlags_ptsz(start, cudaStreamPerThread, 0), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(start, nullptr), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(start), cudaSuccess);
  // Bad arguments.
  EXPECT_EQ(cudaEventCreate(nullptr), cudaErrorInvalidValue);
  cudaEvent_t bad;
  EXPECT_EQ(cudaEventCreateWithFlags(&bad, 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventCreateWithFlags(&bad, cudaEventInterprocess), cudaErrorInvalidValue);
  cudaEvent_t ipc_event;  // shared with programs of the VM (host-stub/src/ipc.cc)
  EXPECT_EQ(cudaEventCreateWithFlags(&ipc_event, cudaEventInterprocess | cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(ipc_event), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(nullptr, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecordWithFlags(start, s, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventQuery(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventSynchronize(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(nullptr), cudaErrorInvalidResourceHandle);
  // Destroy: queued; the handles are dead at once.
  const uint64_t events_before = tst::fake_live_events();
  for (cudaEvent_t e : {start, end, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(start), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventDestroy(end), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(tst::fake_live_events(), events_before - 3);
  (void)last_error();
}

TEST_F(GuestStreams, NotReadyIsAnAnswerNotAnError) {
  const uint64_t p = device_malloc(4096);
  cudaStream_t s;
  cudaEvent_t a, b;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  tst::fake_hold_completion(true);
  ASSERT_EQ(cudaMemsetAsync(reinterpret_cast<void*>(p), 1, 4096, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(b), cudaErrorNotReady);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  EXPECT_EQ(peek_last_error(), cudaSuccess);  // none of these is the last error
  EXPECT_EQ(last_error(), cudaSuccess);
  tst::fake_hold_completion(false);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(b), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_FLOAT_EQ(ms, 0.5f);
  EXPECT_EQ(cudaEventDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(b), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(GuestStreams, AsyncCopiesInEveryDirection) {
  // Sizes: inline (queued), and larger than a frame takes (staged through the heap).
  for (size_t bytes : {size_t{4096}, size_t{(3 << 20) + 12}}) {
    SCOPED_TRACE(bytes);
    const uint64_t a = device_malloc(bytes), b = device_malloc(bytes);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    std::vector<uint8_t> in(bytes), out(bytes, 0), host2(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 31 + 7);
    auto* da = reinterpret_cast<void*>(a);
    auto* db = reinterpret_cast<void*>(b);
    ASSERT_EQ(cudaMemcpyAsync(da, in.data(), bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
    std::fill(in.begin(), in.begin() + 16, 0xee);  // the bytes were taken at call time
    ASSERT_EQ(cudaMemsetAsync(db, 0x5a, bytes, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(db, da, bytes / 2, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(out.data(), db, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
    // Device to host is complete when the call returns (pageable memory).
    for (size_t i = 0; i < bytes; ++i) {
      const uint8_t want = i < 16 ? static_cast<uint8_t>(i * 31 + 7)
                           : i < bytes / 2 ? in[i]
                                           : 0x5a;
      ASSERT_EQ(out[i], want) << "at " << i;
    }
    ASSERT_EQ(cudaMemcpyAsync(host2.data(), out.data(), bytes, cudaMemcpyHostToHost, s), cudaSuccess);
    EXPECT_EQ(host2, out);
    // The per-thread variants, on stream 0 (the per-thread default stream).
    ASSERT_EQ(cudaMemsetAsync_ptsz(da, 0x11, bytes, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync_ptsz(out.data(), da, bytes, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
    EXPECT_EQ(out, std::vector<uint8_t>(bytes, 0x11));
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

TEST_F(GuestStreams, AsyncCopiesFromAndToPinnedHeapMemoryAreQueued) {
  // Memory in the shared heap (what cudaMallocHost hands out): a true DMA, no round trip.
  const size_t bytes = 1 << 20;
  const uint64_t d = device_malloc(bytes);
  uint8_t *in = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&in), bytes), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&out), bytes), cudaSuccess);
  std::memset(in, 0x42, bytes);
  std::memset(out, 0, bytes);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(reinterpret_cast<void*>(d), in, bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out, reinterpret_cast<void*>(d), bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
  // Small ones too, and with cudaMemcpyDefault.
  ASSERT_EQ(cudaMemcpyAsync(out + bytes - 8, reinterpret_cast<void*>(d), 8, cudaMemcpyDefault, s), cudaSuccess);
  EXPECT_GE(queued_frames(), 4u);  // creation and the copies, none sent
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(0, std::memcmp(in, out, bytes));
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(in), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(out), cudaSuccess);
  EXPECT_EQ(cudaFree(reinterpret_cast<void*>(d)), cudaSuccess);
}

TEST_F(GuestStreams, CopyArgumentsCheckedAtOnce) {
  const uint64_t d = device_malloc(64);
  char host[64] = {};
  auto* dp = reinterpret_cast<void*>(d);
  EXPECT_EQ(cudaMemcpyAsync(dp, host, 64, static_cast<cudaMemcpyKind>(7), nullptr), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(last_error(), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpyAsync(nullptr, host, 64, cudaMemcpyHostToDevice, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(dp, host, 0, cudaMemcpyHostToDevice, nullptr), cudaSuccess);  // nothing to do
  // Nothing to do comes before the kind is checked (NVIDIA's answer, seen on the H200).
  EXPECT_EQ(cudaMemcpyAsync(dp, host, 0, static_cast<cudaMemcpyKind>(7), nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(nullptr, 0, 64, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(nullptr, 0, 0, nullptr), cudaSuccess);
  // Device sides are checked against this process's allocations, at once (as CUDA does).
  EXPECT_EQ(cudaMemsetAsync(dp, 0, 65, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(reinterpret_cast<void*>(0xbad000), 0, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(host, host, 64, cudaMemcpyHostToDevice, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(host, host, 64, cudaMemcpyDeviceToHost, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(dp, host, 64, cudaMemcpyDeviceToDevice, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(dp, dp, 128, cudaMemcpyDeviceToDevice, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(queued_frames(), 0u);  // none of them went anywhere
  // cudaMemcpyDefault finds the direction from the allocations.
  char back[64] = {};
  std::memset(host, 9, sizeof host);
  EXPECT_EQ(cudaMemcpyAsync(dp, host, 64, cudaMemcpyDefault, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(back, dp, 64, cudaMemcpyDefault, nullptr), cudaSuccess);
  EXPECT_EQ(0, std::memcmp(back, host, 64));
  std::memset(back, 0, sizeof back);
  EXPECT_EQ(cudaMemcpyAsync(back, host, 64, cudaMemcpyDefault, nullptr), cudaSuccess);  // host to host
  EXPECT_EQ(0, std::memcmp(back, host, 64));
  EXPECT_EQ(cudaFree(dp), cudaSuccess);
  (void)last_error();
}

TEST_F(GuestStreams, AnErrorOfAQueuedCallIsTheNextSynchronizingCallsAnswer) {
  const uint64_t d = device_malloc(64);
  GhostAllocation ghost;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  // Not this client's memory on the host: queued, so it succeeds here...
  EXPECT_EQ(cudaMemsetAsync(ghost.ptr(), 0, 16, s), cudaSuccess);
  std::vector<int> v(4, 7);
  EXPECT_EQ(cudaMemcpyAsync(ghost.ptr(), v.data(), 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(reinterpret_cast<void*>(d), v.data(), 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  EXPECT_EQ(peek_last_error(), cudaSuccess);
  // ... and the next synchronizing call reports the first error, once.
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  // The good copy after the bad ones still ran (queued calls are independent).
  std::vector<int> back(4, 0);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), reinterpret_cast<void*>(d), 16, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(back, v);
  // A round trip that returns data reports a queued error too, but still copies.
  EXPECT_EQ(cudaMemsetAsync(ghost.ptr(), 0, 16, s), cudaSuccess);
  std::fill(back.begin(), back.end(), 0);
  EXPECT_EQ(cudaMemcpyAsync(back.data(), reinterpret_cast<void*>(d), 16, cudaMemcpyDeviceToHost, s),
            cudaErrorInvalidValue);
  EXPECT_EQ(back, v);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  (void)last_error();
}

TEST_F(GuestStreams, ManyQueuedCallsOverflowTheStackAndStillReportTheirErrors) {
  const uint64_t d = device_malloc(1 << 16);
  GhostAllocation ghost;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  // 8 KiB inline copies: the RPC stack (252 KiB in this stub) fills and is sent on its own.
  std::vector<uint8_t> chunk(8192);
  for (int i = 0; i < 200; ++i) {
    std::fill(chunk.begin(), chunk.end(), static_cast<uint8_t>(i));
    ASSERT_EQ(cudaMemcpyAsync(reinterpret_cast<void*>(d + (i % 8) * 8192), chunk.data(), chunk.size(),
                              cudaMemcpyHostToDevice, s),
              cudaSuccess);
    if (i == 3) {
      ASSERT_EQ(cudaMemsetAsync(ghost.ptr(), 0, 1, s), cudaSuccess);
    }
  }
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidValue);  // from a batch sent long ago
  std::vector<uint8_t> out(8192);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), reinterpret_cast<void*>(d + 7 * 8192), 8192, cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  EXPECT_EQ(out, std::vector<uint8_t>(8192, 199));
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)last_error();
}

TEST_F(GuestStreams, ThreadsCreateUseAndDestroyTheirOwn) {
  const uint64_t streams_before = tst::fake_live_streams(), events_before = tst::fake_live_events();
  const uint64_t d = device_malloc(4 * 4096);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        cudaStream_t s;
        cudaEvent_t e;
        bool ok = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
                  cudaEventCreate(&e) == cudaSuccess &&
                  cudaMemsetAsync(reinterpret_cast<void*>(d + t * 4096), t, 4096, s) == cudaSuccess &&
                  cudaEventRecord(e, s) == cudaSuccess && cudaStreamWaitEvent(nullptr, e, 0) == cudaSuccess &&
                  cudaEventSynchronize(e) == cudaSuccess && cudaEventDestroy(e) == cudaSuccess &&
                  cudaStreamDestroy(s) == cudaSuccess;
        if (!ok) ++failures;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(tst::fake_live_streams(), streams_before);
  EXPECT_EQ(tst::fake_live_events(), events_before);
  std::vector<uint8_t> out(4 * 4096);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), reinterpret_cast<void*>(d), out.size(), cudaMemcpyDeviceToHost, nullptr),
            cudaSuccess);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(out[t * 4096 + 17], t);
}

// Last: it leaves the process with a sticky error until the test resets it.
TEST_F(GuestStreams, StickyErrorsStick) {
  // A kernel that touches memory it does not own: the executor reports an illegal
  // address (700), sticky, as the GPU would.
  auto& r = remote();
  uint64_t fn = 0;
  {
    auto lock = r.lock();
    auto image = r.slot().heap().allocate(64);
    ASSERT_TRUE(image);
    std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
    auto mod = r.call<api::Call::ModuleLoad>({image->ref()});
    ASSERT_EQ(mod.status, 0);
    r.slot().heap().free(image->offset);
    const std::string name = tst::kAddOneKernel;
    auto f = r.call<api::Call::ModuleGetFunction>({mod.reply.handle, uint32_t(name.size()), 0},
                                                  std::as_bytes(std::span(name)), 1024);
    ASSERT_EQ(f.status, 0);
    fn = f.reply.function;
  }
  cudaStream_t s;
  cudaEvent_t e;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  {
    auto lock = r.lock();
    const auto packed = vmcuda::host::test::Client::add_one_args(0xbad0000, 4);
    ASSERT_EQ(r.enqueue<api::Call::LaunchKernel>(
                  {fn, {1, 1, 1}, {4, 1, 1}, 0, 12, reinterpret_cast<uint64_t>(s)}, packed),
              cudaSuccess);
  }
  EXPECT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
  EXPECT_EQ(last_error(), cudaErrorIllegalAddress);
  // From now on every call that needs the device answers 700, queued ones included.
  cudaStream_t s2;
  EXPECT_EQ(cudaStreamCreate(&s2), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemsetAsync(reinterpret_cast<void*>(0x1000), 0, 4, s), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemcpyAsync(&s2, &s, 8, cudaMemcpyHostToHost, s), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorIllegalAddress);
  EXPECT_EQ(last_error(), cudaErrorIllegalAddress);
  vmcuda::guest::reset_sticky_error_for_testing();
  (void)last_error();
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
}

}  // namespace
