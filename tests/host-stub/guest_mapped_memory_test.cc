// guest-lib's pinned, mapped, managed and registered host memory (memory.cc) against
// vmcuda-stub in this process, on the test executor. The stub serves the region at its own
// mapping, an address this process cannot map again: the client is NOT at the host's
// address, so these tests cover that path (the device pointer comes from the host, managed
// memory is refused). tests/cuda/mapped_memory covers the same-address path end to end.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "host-stub/guest_stub_env.h"
#include "managed_advice.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace tst = vmcuda::testing;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

vmcuda::host::test::Stub*& g_stub = vmcuda::host::test::g_guest_stub;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new vmcuda::host::test::GuestStubEnvironment);

Remote& remote() {
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);
  EXPECT_NE(r, nullptr) << "no stub: error " << err;
  return *r;
}

class GuestMappedMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    (void)last_error();
  }
};

TEST_F(GuestMappedMemory, ThisProcessIsNotAtTheHostsAddress) {
  const auto& region = remote().slot().region();
  EXPECT_NE(region.layout().host_map_address, 0u);  // thread mode: the endpoint's mapping
  EXPECT_FALSE(region.same_address());
}

// The device address of mapped memory comes from the host (cuMemHostGetDevicePointer of
// its own mapping), and the device reaches the guest's bytes through it.
TEST_F(GuestMappedMemory, DevicePointerIsTheHostsAndReachesTheSameBytes) {
  int* h = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&h), 8192, cudaHostAllocMapped), cudaSuccess);
  const auto& region = remote().slot().region();
  const uint64_t host_heap = region.layout().host_map_address + region.layout().heap_offset;
  const uint64_t off = reinterpret_cast<uint64_t>(h) - reinterpret_cast<uint64_t>(region.heap().data());
  void* d = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&d, h + 10, 0), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uint64_t>(d), host_heap + off + 40);
  EXPECT_NE(d, static_cast<void*>(h + 10));
  // The "device" (the executor, in the stub's address space) writes there; the guest sees it.
  ASSERT_EQ(g_stub->api.cuMemsetD8_v2(reinterpret_cast<uint64_t>(d), 0x7f, 8), vmcuda::host::CUDA_SUCCESS);
  EXPECT_EQ(h[10], 0x7f7f7f7f);
  EXPECT_EQ(h[11], 0x7f7f7f7f);
  EXPECT_EQ(h[12], 0);
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, h + 10), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.devicePointer, d);
  EXPECT_EQ(a.hostPointer, static_cast<void*>(h + 10));
  unsigned flags = 0;
  ASSERT_EQ(cudaHostGetFlags(&flags, h), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaHostAllocMapped});
  ASSERT_EQ(cudaFreeHost(h), cudaSuccess);
  // Freed: no longer pinned memory, no device address.
  EXPECT_EQ(cudaHostGetDevicePointer(&d, h, 0), cudaErrorInvalidValue);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
}

TEST_F(GuestMappedMemory, HostPinsAndUnpinsEachBlock) {
  const uint64_t before = tst::fake_pinned_ranges();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMallocHost(&a, 100), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&b, 5000, cudaHostAllocPortable | cudaHostAllocWriteCombined), cudaSuccess);
  EXPECT_EQ(tst::fake_pinned_ranges(), before + 2);
  unsigned flags = 0;
  ASSERT_EQ(cudaHostGetFlags(&flags, b), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaHostAllocMapped | cudaHostAllocWriteCombined});  // Portable is not reported
  ASSERT_EQ(cudaFreeHost(a), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(b), cudaSuccess);
  EXPECT_EQ(tst::fake_pinned_ranges(), before);
  EXPECT_EQ(cudaFreeHost(a), cudaErrorInvalidValue);
}

TEST_F(GuestMappedMemory, ManagedMemoryNeedsTheSameAddress) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaMallocManaged(&p, 4096, cudaMemAttachGlobal), cudaErrorNotSupported);
  EXPECT_EQ(last_error(), cudaErrorNotSupported);
  // Argument errors come first, as CUDA's.
  EXPECT_EQ(cudaMallocManaged(&p, 4096, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocManaged(&p, 0, cudaMemAttachGlobal), cudaSuccess);
  EXPECT_EQ(p, nullptr);
  (void)last_error();
}

// Managed memory made by hand, as cudaMallocManaged makes it where the addresses match: a
// pinned heap block recorded as managed. Copies, memsets and frees treat it as host memory
// the device reaches too.
TEST_F(GuestMappedMemory, ManagedBlocksCopyMemsetAndFree) {
  auto& r = remote();
  std::optional<vmrpc::HeapBlock> b;
  {
    auto lock = r.lock();
    b = r.slot().heap().allocate(4096);
    ASSERT_TRUE(b);
    ASSERT_EQ(r.call<vmcuda::api::Call::PinHeap>({b->ref()}).status, 0);
  }
  int* m = reinterpret_cast<int*>(b->data);
  vgpu_db::AllocationMap::process().add(
      {reinterpret_cast<uint64_t>(m), 4096, vgpu_db::Allocation::kManaged, 0, b->offset});
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, m + 1), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  EXPECT_EQ(a.devicePointer, static_cast<void*>(m + 1));
  for (int i = 0; i < 1024; ++i) m[i] = i;
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  // "HostToDevice" into managed memory: where the sides are decides.
  ASSERT_EQ(cudaMemcpy(d, m, 4096, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(m, 0, 4096), cudaSuccess);
  EXPECT_EQ(m[1023], 0);
  ASSERT_EQ(cudaMemcpy(m, d, 4096, cudaMemcpyHostToDevice), cudaSuccess);  // really device -> managed
  EXPECT_EQ(m[1023], 1023);
  std::vector<int> host(1024);
  ASSERT_EQ(cudaMemcpy(host.data(), m, 4096, cudaMemcpyDeviceToHost), cudaSuccess);  // really host -> host
  EXPECT_EQ(host[7], 7);
  cudaMemLocation dev{cudaMemLocationTypeDevice, 0};
  EXPECT_EQ(cudaMemPrefetchAsync(m, 4096, dev, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemPrefetchAsync(m, 8192, dev, 0, nullptr), cudaErrorInvalidValue);  // past the block
  EXPECT_EQ(cudaMemAdvise(m, 4096, cudaMemAdviseSetAccessedBy, dev), cudaSuccess);
  EXPECT_EQ(cudaMemAdvise(host.data(), 4096, cudaMemAdviseSetReadMostly, dev), cudaErrorInvalidValue);
  const uint64_t pinned = tst::fake_pinned_ranges();
  EXPECT_EQ(cudaFreeHost(m), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(m), cudaSuccess);  // unpinned and back to the heap
  EXPECT_EQ(tst::fake_pinned_ranges(), pinned - 1);
  EXPECT_EQ(cudaFree(m), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  (void)last_error();
}

// cudaMemRangeGetAttribute[s] answer what cudaMemAdvise and cudaMemPrefetchAsync recorded, per
// page, as CUDA documents (tests/cuda/managed_range checks the same against a real GPU).
TEST_F(GuestMappedMemory, ManagedRangeAttributesFollowAdviceAndPrefetches) {
  auto& r = remote();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 8 * page;
  std::optional<vmrpc::HeapBlock> b;
  {
    auto lock = r.lock();
    b = r.slot().heap().allocate(bytes);
    ASSERT_TRUE(b);
    ASSERT_EQ(r.call<vmcuda::api::Call::PinHeap>({b->ref()}).status, 0);
  }
  char* m = reinterpret_cast<char*>(b->data);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(m) % page, 0u);
  vgpu_db::AllocationMap::process().add(
      {reinterpret_cast<uint64_t>(m), bytes, vgpu_db::Allocation::kManaged, 0, b->offset});
  auto& advice = vmcuda::guest::ManagedAdvice::process();
  const size_t segments = advice.segments();
  auto get = [&](cudaMemRangeAttribute a, const void* p, size_t n) {
    int v = 12345;
    EXPECT_EQ(cudaMemRangeGetAttribute(&v, sizeof v, a, p, n), cudaSuccess) << a;
    return v;
  };
  char* hi = m + 4 * page;
  const cudaMemLocation dev{cudaMemLocationTypeDevice, 0};
  const cudaMemLocation host{cudaMemLocationTypeHost, 5};  // a host location's id is ignored

  // Nothing advised yet.
  EXPECT_EQ(get(cudaMemRangeAttributeReadMostly, m, bytes), 0);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocation, m, bytes), cudaInvalidDeviceId);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationType, m, bytes), cudaMemLocationTypeInvalid);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, m, bytes), cudaInvalidDeviceId);

  // Read mostly: all pages or nothing; a byte stands for its page.
  ASSERT_EQ(cudaMemAdvise(m, bytes, cudaMemAdviseSetReadMostly, dev), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(m + 1, 10, cudaMemAdviseUnsetReadMostly, dev), cudaSuccess);  // the first page
  EXPECT_EQ(get(cudaMemRangeAttributeReadMostly, m, bytes), 0);
  EXPECT_EQ(get(cudaMemRangeAttributeReadMostly, m + page, bytes - page), 1);
  EXPECT_EQ(get(cudaMemRangeAttributeReadMostly, m + page - 1, 2), 0);

  // Preferred location: the legacy int, the type and the id.
  ASSERT_EQ(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, dev), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(m, 4 * page, cudaMemAdviseSetPreferredLocation, host), cudaSuccess);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocation, m, bytes), cudaInvalidDeviceId);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocation, m, 4 * page), cudaCpuDeviceId);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationType, m, 4 * page), cudaMemLocationTypeHost);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocation, hi, 4 * page), 0);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationType, hi, 4 * page), cudaMemLocationTypeDevice);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationId, hi, 4 * page), 0);
  ASSERT_EQ(cudaMemAdvise(m, page, cudaMemAdviseSetPreferredLocation, {cudaMemLocationTypeHostNuma, 3}),
            cudaSuccess);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationType, m, page), cudaMemLocationTypeHostNuma);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationId, m, page), 3);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocation, m, page), cudaCpuDeviceId);
  ASSERT_EQ(cudaMemAdvise(m, page, cudaMemAdviseSetPreferredLocation, {cudaMemLocationTypeHostNumaCurrent, 99}),
            cudaSuccess);
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocationType, m, page), cudaMemLocationTypeHostNuma);  // resolved
  ASSERT_EQ(cudaMemAdvise(hi, 4 * page, cudaMemAdviseUnsetPreferredLocation, {cudaMemLocationTypeDevice, 77}),
            cudaSuccess);  // the location is ignored
  EXPECT_EQ(get(cudaMemRangeAttributePreferredLocation, hi, 4 * page), cudaInvalidDeviceId);

  // Accessed by: the devices (and the host) set for every page, the rest cudaInvalidDeviceId.
  ASSERT_EQ(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, dev), cudaSuccess);
  ASSERT_EQ(cudaMemAdvise(m, page, cudaMemAdviseSetAccessedBy, host), cudaSuccess);
  int ids[3] = {7, 7, 7};
  ASSERT_EQ(cudaMemRangeGetAttribute(ids, sizeof ids, cudaMemRangeAttributeAccessedBy, m, page), cudaSuccess);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], cudaCpuDeviceId);
  EXPECT_EQ(ids[2], cudaInvalidDeviceId);
  ASSERT_EQ(cudaMemRangeGetAttribute(ids, sizeof ids, cudaMemRangeAttributeAccessedBy, m, bytes), cudaSuccess);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], cudaInvalidDeviceId);
  ids[1] = 7;
  ASSERT_EQ(cudaMemRangeGetAttribute(ids, 4, cudaMemRangeAttributeAccessedBy, m, page), cudaSuccess);
  EXPECT_EQ(ids[1], 7);  // one slot: one id, nothing written past it
  EXPECT_EQ(cudaMemAdvise(m, page, cudaMemAdviseSetAccessedBy, {cudaMemLocationTypeHostNuma, 0}),
            cudaErrorInvalidValue);  // a device or the host only
  ASSERT_EQ(cudaMemAdvise(m, bytes, cudaMemAdviseUnsetAccessedBy, dev), cudaSuccess);
  ASSERT_EQ(cudaMemRangeGetAttribute(ids, sizeof ids, cudaMemRangeAttributeAccessedBy, m, bytes), cudaSuccess);
  EXPECT_EQ(ids[0], cudaInvalidDeviceId);

  // Last prefetch location: what was asked last, per page.
  ASSERT_EQ(cudaMemPrefetchAsync(m, bytes, dev, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemPrefetchAsync(hi, page, host, 0, nullptr), cudaSuccess);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, m, 4 * page), 0);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocationType, m, 4 * page), cudaMemLocationTypeDevice);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocationId, m, 4 * page), 0);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, m, bytes), cudaInvalidDeviceId);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocationType, m, bytes), cudaMemLocationTypeInvalid);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, hi, page), cudaCpuDeviceId);

  // Several at once; one bad size fails the call.
  int rm = 7, last = 7;
  cudaMemLocationType type = static_cast<cudaMemLocationType>(7);
  void* data[3] = {&rm, &last, &type};
  size_t sizes[3] = {4, 4, sizeof type};
  cudaMemRangeAttribute attrs[3] = {cudaMemRangeAttributeReadMostly, cudaMemRangeAttributeLastPrefetchLocation,
                                    cudaMemRangeAttributeLastPrefetchLocationType};
  ASSERT_EQ(cudaMemRangeGetAttributes(data, sizes, attrs, 3, m + page, page), cudaSuccess);
  EXPECT_EQ(rm, 1);
  EXPECT_EQ(last, 0);
  EXPECT_EQ(type, cudaMemLocationTypeDevice);
  sizes[1] = 8;
  EXPECT_EQ(cudaMemRangeGetAttributes(data, sizes, attrs, 3, m, page), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttributes(data, sizes, attrs, 0, m, page), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttributes(nullptr, sizes, attrs, 3, m, page), cudaErrorInvalidValue);

  // CUDA's errors: sizes, unknown attributes, memory that is not managed, past the block.
  int v = 0;
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 8, cudaMemRangeAttributeReadMostly, m, bytes), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 6, cudaMemRangeAttributeAccessedBy, m, bytes), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 0, cudaMemRangeAttributeAccessedBy, m, bytes), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 4, static_cast<cudaMemRangeAttribute>(9), m, bytes), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 4, static_cast<cudaMemRangeAttribute>(0), m, bytes), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(nullptr, 4, cudaMemRangeAttributeReadMostly, m, bytes), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, m, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, m, bytes + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, &v, 4), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);

  // Stream association: the whole allocation only; Single names a stream, never NULL.
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachSingle), cudaSuccess);
  EXPECT_EQ(cudaStreamAttachMemAsync(s, m, bytes, cudaMemAttachHost), cudaSuccess);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, m, 0, cudaMemAttachGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, m, 0, cudaMemAttachSingle), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(s, m, page, cudaMemAttachSingle), cudaErrorInvalidValue);  // a part
  EXPECT_EQ(cudaStreamAttachMemAsync(s, m + page, 0, cudaMemAttachSingle), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(s, m, 0, 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(s, &v, 0, cudaMemAttachSingle), cudaErrorInvalidValue);

  // Batched prefetches: each location from its first operation on; discards change nothing here.
  void* ptrs[3] = {m, m + page, hi};
  size_t lens[3] = {page, page, page};
  cudaMemLocation locs[2] = {host, dev};
  size_t idxs[2] = {0, 2};
  ASSERT_EQ(cudaMemPrefetchBatchAsync(ptrs, lens, 3, locs, idxs, 2, 0, s), cudaSuccess);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, m, 2 * page), cudaCpuDeviceId);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, hi, page), 0);
  EXPECT_EQ(cudaMemPrefetchBatchAsync(ptrs, lens, 3, locs, idxs, 2, 0, nullptr), cudaErrorInvalidValue);  // legacy
  EXPECT_EQ(cudaMemPrefetchBatchAsync(ptrs, lens, 3, locs, idxs, 2, 1, s), cudaErrorInvalidValue);        // flags
  size_t bad_idxs[2] = {1, 2};
  EXPECT_EQ(cudaMemPrefetchBatchAsync(ptrs, lens, 3, locs, bad_idxs, 2, 0, s), cudaErrorInvalidValue);
  size_t late_idxs[2] = {0, 3};
  EXPECT_EQ(cudaMemPrefetchBatchAsync(ptrs, lens, 3, locs, late_idxs, 2, 0, s), cudaErrorInvalidValue);
  cudaMemLocation far{cudaMemLocationTypeDevice, 40};
  EXPECT_EQ(cudaMemPrefetchBatchAsync(ptrs, lens, 1, &far, idxs, 1, 0, s), cudaErrorInvalidDevice);
  void* outside[1] = {&v};
  EXPECT_EQ(cudaMemPrefetchBatchAsync(outside, lens, 1, locs, idxs, 1, 0, s), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemDiscardBatchAsync(ptrs, lens, 3, 0, s), cudaSuccess);
  EXPECT_EQ(cudaMemDiscardBatchAsync(ptrs, lens, 3, 0, cudaStreamLegacy), cudaErrorInvalidValue);
  cudaMemLocation to_dev = dev;
  EXPECT_EQ(cudaMemDiscardAndPrefetchBatchAsync(ptrs, lens, 3, &to_dev, idxs, 1, 0, s), cudaSuccess);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, m, 2 * page), 0);
  EXPECT_EQ(get(cudaMemRangeAttributeLastPrefetchLocation, m, bytes), 0);  // the rest from the whole prefetch above
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  (void)last_error();

  // Repeated advice does not grow the record; freeing the block drops it.
  const size_t grown = advice.segments();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(cudaMemAdvise(m, page, cudaMemAdviseSetReadMostly, dev), cudaSuccess);
  EXPECT_EQ(advice.segments(), grown);
  ASSERT_EQ(cudaFree(m), cudaSuccess);
  EXPECT_EQ(advice.segments(), segments);
  (void)last_error();
}

// Registered memory is outside the region: recorded, copied through staging, never mapped.
TEST_F(GuestMappedMemory, RegisteredMemoryIsRecordedButNotMapped) {
  std::vector<int> buf(4096);
  const uint64_t pinned = tst::fake_pinned_ranges();
  ASSERT_EQ(cudaHostRegister(buf.data(), 8192, cudaHostRegisterReadOnly), cudaSuccess);
  EXPECT_EQ(tst::fake_pinned_ranges(), pinned);  // nothing on the host
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, buf.data() + 5), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.devicePointer, nullptr);
  EXPECT_EQ(a.hostPointer, static_cast<void*>(buf.data() + 5));
  void* d = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaHostGetDevicePointer(&d, buf.data(), 0), cudaErrorNotSupported);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(last_error(), cudaErrorNotSupported);
  // Mapping it, or I/O memory, cannot be done: refused, nothing recorded.
  EXPECT_EQ(cudaHostRegister(buf.data() + 2048, 4096, cudaHostRegisterMapped), cudaErrorNotSupported);
  EXPECT_EQ(cudaHostRegister(buf.data() + 2048, 4096, cudaHostRegisterIoMemory), cudaErrorNotSupported);
  EXPECT_EQ(cudaHostUnregister(buf.data() + 2048), cudaErrorHostMemoryNotRegistered);
  // The second half overlaps nothing: fine.
  ASSERT_EQ(cudaHostRegister(buf.data() + 2048, 4096, 0), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(buf.data() + 2000, 400, 0), cudaErrorHostMemoryAlreadyRegistered);
  // Heap memory cannot be registered (CUDA: pinned memory gives invalid value).
  void* h = nullptr;
  ASSERT_EQ(cudaMallocHost(&h, 4096), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(h, 4096, 0), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFreeHost(h), cudaSuccess);
  // Copies through staging.
  for (int i = 0; i < 2048; ++i) buf[i] = 3 * i;
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 8192), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, buf.data(), 8192, cudaMemcpyDefault), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(buf.data() + 2048, dev, 8192, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(buf[2048 + 2047], 3 * 2047);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buf.data() + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostUnregister(buf.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buf.data() + 2048), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buf.data()), cudaErrorHostMemoryNotRegistered);
  (void)last_error();
}

// Memsets of pinned memory: the device sets it (at the address the host gives the heap bytes),
// in stream order; the synchronous form is done when it returns; never past the block.
TEST_F(GuestMappedMemory, PinnedMemoryMemsets) {
  int* h = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&h), 4096, cudaHostAllocMapped), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (int i = 0; i < 1024; ++i) h[i] = i;
  ASSERT_EQ(cudaMemsetAsync(h + 8, 0x5a, 16, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(h[7], 7);
  EXPECT_EQ(h[8], 0x5a5a5a5a);
  EXPECT_EQ(h[11], 0x5a5a5a5a);
  EXPECT_EQ(h[12], 12);
  ASSERT_EQ(cudaMemset(h, 0x01, 4096), cudaSuccess);
  EXPECT_EQ(h[0], 0x01010101);
  EXPECT_EQ(h[1023], 0x01010101);
  EXPECT_EQ(cudaMemsetAsync(h + 1000, 0, 100, s), cudaErrorInvalidValue);  // past the block
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(h), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(h, 0, 16, nullptr), cudaErrorInvalidValue);  // freed
  (void)last_error();
}

// Registered memory stays in this process: its memsets are done here, in stream order.
TEST_F(GuestMappedMemory, RegisteredMemoryMemsets) {
  std::vector<int> buf(1024, 9);
  ASSERT_EQ(cudaHostRegister(buf.data(), 4096, 0), cudaSuccess);
  ASSERT_EQ(cudaMemset(buf.data() + 4, 0x22, 8), cudaSuccess);
  EXPECT_EQ(buf[3], 9);
  EXPECT_EQ(buf[4], 0x22222222);
  EXPECT_EQ(buf[6], 9);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf.data(), 0, 4096, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(buf[1023], 0);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buf.data()), cudaSuccess);
  EXPECT_EQ(cudaMemset(buf.data(), 0, 16), cudaErrorInvalidValue);  // pageable again
  (void)last_error();
}

// The host sets only heap bytes this client pinned, in whole elements.
TEST_F(GuestMappedMemory, HostChecksHeapMemsets) {
  auto& r = remote();
  auto lock = r.lock();
  auto b = r.slot().heap().allocate(4096);
  ASSERT_TRUE(b);
  using vmcuda::api::Call;
  auto memset = [&](vmrpc::wire::HeapRef ref, uint32_t width) {
    return r.call<Call::MemsetHeapAsync>({ref, 0x7f, width, 0}).status;
  };
  EXPECT_EQ(memset(b->ref(), 1), cudaErrorInvalidValue);  // not pinned
  ASSERT_EQ(r.call<Call::PinHeap>({b->ref()}).status, 0);
  EXPECT_EQ(memset(b->ref(0, 64), 1), cudaSuccess);
  ASSERT_EQ(r.call<Call::StreamSynchronize>({0}).status, 0);
  EXPECT_EQ(static_cast<unsigned char>(b->data[63]), 0x7f);
  EXPECT_EQ(static_cast<unsigned char>(b->data[64]), 0);
  EXPECT_EQ(memset(b->ref(4000, 200), 1), cudaErrorInvalidValue);  // past it
  EXPECT_EQ(memset(b->ref(0, 6), 4), cudaErrorInvalidValue);       // not whole elements
  EXPECT_EQ(memset(b->ref(0, 8), 3), cudaErrorUnknown);            // no such element size: the guest's fault
  EXPECT_EQ(memset(vmrpc::wire::HeapRef{~0ull - 8, 16}, 1), cudaErrorUnknown);
  ASSERT_EQ(r.call<Call::UnpinHeap>({b->ref()}).status, 0);
  r.slot().heap().free(b->offset);
}

// 2D and 3D memsets of pinned memory: one call each (rows on the host), in stream order;
// registered memory: set here. Only the rows named change.
TEST_F(GuestMappedMemory, PinnedAndRegistered2DAnd3DMemsets) {
  constexpr int kPitchInts = 32, kRows = 8, kInts = kPitchInts * kRows;
  constexpr size_t kPitch = kPitchInts * sizeof(int);
  int* h = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&h), kInts * sizeof(int)), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (int i = 0; i < kInts; ++i) h[i] = 9;
  ASSERT_EQ(cudaMemset2DAsync(h, kPitch, 0x5a, 16 * sizeof(int), kRows, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int r = 0; r < kRows; ++r) {
    EXPECT_EQ(h[r * kPitchInts + 15], 0x5a5a5a5a) << r;
    EXPECT_EQ(h[r * kPitchInts + 16], 9) << r;
  }
  // Synchronous: done when it returns.
  ASSERT_EQ(cudaMemset2D(h + 1, kPitch, 0x01, 2 * sizeof(int), 3), cudaSuccess);
  EXPECT_EQ(h[0], 0x5a5a5a5a);
  EXPECT_EQ(h[1], 0x01010101);
  EXPECT_EQ(h[2 * kPitchInts + 2], 0x01010101);
  EXPECT_EQ(h[2 * kPitchInts + 3], 0x5a5a5a5a);
  EXPECT_EQ(h[3 * kPitchInts + 1], 0x5a5a5a5a);
  // 3D, not whole slices (slices of 4 rows, 3 set): one call per slice.
  for (int i = 0; i < kInts; ++i) h[i] = 9;
  const cudaPitchedPtr pp = cudaPitchedPtr{h, kPitch, 16 * sizeof(int), 4};
  ASSERT_EQ(cudaMemset3D(pp, 0x22, cudaExtent{8 * sizeof(int), 3, 2}), cudaSuccess);
  for (int r = 0; r < kRows; ++r) {
    EXPECT_EQ(h[r * kPitchInts + 7], r % 4 < 3 ? 0x22222222 : 9) << r;
    EXPECT_EQ(h[r * kPitchInts + 8], 9) << r;
  }
  // Past the block, or rows wider than the pitch: refused, nothing set.
  EXPECT_EQ(cudaMemset2D(h, kPitch, 0, 16, kRows + 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2D(h, 8, 0, 16, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset3D(pp, 0, cudaExtent{16, 4, 3}), cudaErrorInvalidValue);
  EXPECT_EQ(h[0], 0x22222222);
  (void)last_error();
  ASSERT_EQ(cudaFreeHost(h), cudaSuccess);

  // Registered memory: in stream order, in this process.
  std::vector<int> buf(kInts, 3);
  ASSERT_EQ(cudaHostRegister(buf.data(), kInts * sizeof(int), 0), cudaSuccess);
  ASSERT_EQ(cudaMemset2DAsync(buf.data(), kPitch, 0x33, 4 * sizeof(int), kRows, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int r = 0; r < kRows; ++r) {
    EXPECT_EQ(buf[r * kPitchInts + 3], 0x33333333) << r;
    EXPECT_EQ(buf[r * kPitchInts + 4], 3) << r;
  }
  ASSERT_EQ(cudaMemset3D(cudaPitchedPtr{buf.data(), kPitch, 16, 4}, 0, cudaExtent{4, 1, 2}), cudaSuccess);
  EXPECT_EQ(buf[0], 0);
  EXPECT_EQ(buf[kPitchInts], 0x33333333);
  EXPECT_EQ(buf[4 * kPitchInts], 0);
  EXPECT_EQ(cudaHostUnregister(buf.data()), cudaSuccess);
  EXPECT_EQ(cudaMemset2D(buf.data(), kPitch, 0, 16, 2), cudaErrorInvalidValue);  // pageable again
  (void)last_error();
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// The host sets only rows inside the heap bytes named, which this client pinned, in whole elements.
TEST_F(GuestMappedMemory, HostChecksHeap2DMemsets) {
  auto& r = remote();
  auto lock = r.lock();
  auto b = r.slot().heap().allocate(4096);
  ASSERT_TRUE(b);
  using vmcuda::api::Call;
  auto memset = [&](vmrpc::wire::HeapRef ref, uint64_t pitch, uint64_t width, uint64_t height, uint32_t value,
                    uint32_t element) {
    return r.call<Call::MemsetHeap2DAsync>({ref, pitch, width, height, value, element, 0}).status;
  };
  EXPECT_EQ(memset(b->ref(0, 1024), 256, 64, 4, 1, 0), cudaErrorInvalidValue);  // not pinned
  ASSERT_EQ(r.call<Call::PinHeap>({b->ref()}).status, 0);
  // Rows of 4-byte elements whose bytes differ: 4 rows of 8 bytes, 256 apart.
  EXPECT_EQ(memset(b->ref(0, 3 * 256 + 8), 256, 8, 4, 0x01020304, 4), cudaSuccess);
  ASSERT_EQ(r.call<Call::StreamSynchronize>({0}).status, 0);
  for (int row = 0; row < 4; ++row) {
    uint32_t v = 0, after = 0;
    std::memcpy(&v, b->data + row * 256 + 4, 4);
    std::memcpy(&after, b->data + row * 256 + 8, 4);
    EXPECT_EQ(v, 0x01020304u) << row;
    EXPECT_EQ(after, 0u) << row;
  }
  EXPECT_EQ(memset(b->ref(0, 3 * 256 + 7), 256, 8, 4, 0, 0), cudaErrorInvalidValue);  // the last row past the range
  EXPECT_EQ(memset(b->ref(0, 1024), 4, 8, 4, 0, 0), cudaErrorInvalidValue);           // rows wider than the pitch
  EXPECT_EQ(memset(b->ref(0, 1024), 256, 8, ~0ull, 0, 0), cudaErrorInvalidValue);     // rows without end
  EXPECT_EQ(memset(b->ref(0, 1024), 254, 8, 4, 0, 4), cudaErrorInvalidValue);         // a pitch of no whole elements
  EXPECT_EQ(memset(b->ref(0, 1024), 256, 6, 4, 0, 4), cudaErrorInvalidValue);         // rows of no whole elements
  EXPECT_EQ(memset(b->ref(0, 1024), 256, 8, 4, 0, 3), cudaErrorUnknown);  // no such element size: the guest's fault
  EXPECT_EQ(memset(vmrpc::wire::HeapRef{~0ull - 8, 16}, 8, 8, 1, 0, 0), cudaErrorUnknown);
  EXPECT_EQ(memset(b->ref(0, 1024), 256, 0, 4, 0, 0), cudaSuccess);  // nothing to set
  ASSERT_EQ(r.call<Call::UnpinHeap>({b->ref()}).status, 0);
  r.slot().heap().free(b->offset);
}

// The host refuses device addresses of heap bytes that no pinned block of this client holds.
TEST_F(GuestMappedMemory, HostChecksDevicePointerRequests) {
  auto& r = remote();
  auto lock = r.lock();
  auto b = r.slot().heap().allocate(4096);
  ASSERT_TRUE(b);
  using vmcuda::api::Call;
  EXPECT_EQ(r.call<Call::HostGetDevicePointer>({b->ref()}).status, cudaErrorInvalidValue);  // not pinned
  ASSERT_EQ(r.call<Call::PinHeap>({b->ref()}).status, 0);
  EXPECT_EQ(r.call<Call::HostGetDevicePointer>({b->ref()}).status, cudaSuccess);
  EXPECT_EQ(r.call<Call::HostGetDevicePointer>({b->ref(4000, 200)}).status, cudaErrorInvalidValue);  // past it
  EXPECT_EQ(r.call<Call::HostGetDevicePointer>({vmrpc::wire::HeapRef{~0ull - 8, 16}}).status, cudaErrorUnknown);
  ASSERT_EQ(r.call<Call::UnpinHeap>({b->ref()}).status, 0);
  r.slot().heap().free(b->offset);
}

}  // namespace
