// Virtual memory management in vmcuda-stub (host-stub/src/vmm.cc) on the executor's VMM:
// reservations from the client's arena, physical allocations charged to the VM, mappings
// that the other calls see as the client's memory, and what a hostile guest gets.
#include <chrono>
#include <thread>

#include "client_control.h"
#include "host-stub/stub_fixture.h"
#include "object_list.h"
#include "vgpu_db/allocations.h"

namespace vmcuda::host::test {
namespace {

using namespace std::chrono_literals;
namespace cc = client_control;
constexpr uint64_t kG = 2ull << 20;  // the executor's granularity

struct Vmm {
  Client& c;
  uint64_t reserve(uint64_t bytes, uint64_t align = 0, uint64_t hint = 0, int32_t* st = nullptr) {
    api::PtrReply r{};
    const int32_t s = c.call<api::Call::VmmAddressReserve>({bytes, align, hint, 0}, &r);
    if (st) *st = s;
    else EXPECT_EQ(s, 0);
    return r.ptr;
  }
  uint64_t create(uint64_t bytes, int32_t device = 0, int32_t* st = nullptr) {
    api::VmmValueReply r{};
    const int32_t s = c.call<api::Call::VmmCreate>({bytes, device, 0}, &r);
    if (st) *st = s;
    else EXPECT_EQ(s, 0);
    return r.value;
  }
  int32_t map(uint64_t ptr, uint64_t bytes, uint64_t handle, uint64_t offset = 0) {
    api::VmmValueReply r{};
    return c.call<api::Call::VmmMap>({ptr, bytes, offset, handle, 0}, &r);
  }
  int32_t access(uint64_t ptr, uint64_t bytes, int32_t device = 0, uint32_t flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
    return c.call<api::Call::VmmSetAccess>({ptr, bytes, device, flags});
  }
};

TEST(StubVmm, GranularityReserveCreateMapCopyUnmap) {
  Stub s;
  Client c(s);
  Vmm v{c};
  api::VmmValueReply g{};
  ASSERT_EQ(c.call<api::Call::VmmGranularity>({0, 1}, &g), 0);
  EXPECT_EQ(g.value, kG);
  EXPECT_EQ(c.call<api::Call::VmmGranularity>({5, 1}, &g), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(c.call<api::Call::VmmGranularity>({0, 7}, &g), CUDA_ERROR_INVALID_VALUE);

  // Expandable-segments style: reserve big, map chunks as the segment grows.
  const uint64_t base = v.reserve(64 * kG);
  ASSERT_NE(base, 0u);
  EXPECT_EQ(base % kG, 0u);
  // Inside the client's arena (fixed per client: arena.h).
  EXPECT_GE(base, kArenaBase);
  EXPECT_LT(base, kArenaBase + kArenaMaxIndex * kArenaStride);
  std::vector<uint64_t> handles;
  for (int i = 0; i < 3; ++i) {
    handles.push_back(v.create(kG));
    ASSERT_EQ(v.map(base + i * kG, kG, handles.back()), 0) << i;
    ASSERT_EQ(v.access(base + i * kG, kG), 0);
  }
  EXPECT_EQ(tst::fake_vmm_mappings(), 3u);
  // The mapped memory is the client's device memory for copies and memsets.
  c.put(base + kG + 64, {1, 2, 3, 4});
  EXPECT_EQ(c.get(base + kG + 64, 4), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(c.call<api::Call::Memset>({base + 2 * kG, 16, 0x01, 1}), 0);
  EXPECT_EQ(c.get(base + 2 * kG, 4), std::vector<int>(4, 0x01010101));
  // A copy may span mappings that follow one another (a block of an expandable segment).
  c.put(base + kG - 8, {9, 8, 7, 6});
  EXPECT_EQ(c.get(base + kG - 8, 4), (std::vector<int>{9, 8, 7, 6}));
  EXPECT_EQ(c.get(base + kG, 2), (std::vector<int>{7, 6}));
  // Past what is mapped: not the client's.
  int32_t st = 0;
  c.get(base + 3 * kG, 1, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  // Access as set, for the device asked.
  api::VmmValueReply acc{};
  EXPECT_EQ(c.call<api::Call::VmmGetAccess>({base + kG, 0, 0, 0}, &acc), 0);
  EXPECT_EQ(acc.value, static_cast<uint64_t>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  // Properties and a retained handle.
  api::VmmPropertiesReply pr{};
  EXPECT_EQ(c.call<api::Call::VmmProperties>({handles[1]}, &pr), 0);
  EXPECT_EQ(pr.bytes, kG);
  EXPECT_EQ(pr.device, 0);
  api::VmmValueReply ret{};
  EXPECT_EQ(c.call<api::Call::VmmRetainHandle>({base + kG + 100}, &ret), 0);
  EXPECT_EQ(ret.value, handles[1]);
  // Released while mapped: the memory stays until its mapping goes (two references here).
  EXPECT_EQ(c.call<api::Call::VmmRelease>({handles[1]}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({handles[1]}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({handles[1]}), CUDA_ERROR_INVALID_VALUE);  // no reference left
  EXPECT_EQ(c.get(base + kG + 64, 4), (std::vector<int>{1, 2, 3, 4}));
  // cudaFree is not for it.
  EXPECT_EQ(c.call<api::Call::Free>({base}), CUDA_ERROR_INVALID_VALUE);
  // Unmap whole mappings (two at once), then the rest; the reservation goes last.
  EXPECT_EQ(c.call<api::Call::VmmAddressFree>({base, 64 * kG}), CUDA_ERROR_INVALID_VALUE);  // still mapped
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base + kG, kG / 2}), CUDA_ERROR_INVALID_VALUE);    // part of one
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base, 2 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base + 2 * kG, kG}), 0);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  c.get(base + kG, 1, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  // handles[0] and [2] are still referenced: map again, then release.
  EXPECT_EQ(v.map(base + 10 * kG, kG, handles[0]), 0);
  EXPECT_EQ(c.call<api::Call::VmmProperties>({handles[1]}, &pr), CUDA_ERROR_INVALID_VALUE);  // gone
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base + 10 * kG, kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({handles[0]}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({handles[2]}), 0);
  EXPECT_EQ(c.call<api::Call::VmmAddressFree>({base, 64 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmAddressFree>({base, 64 * kG}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

TEST(StubVmm, HintsAndAlignment) {
  Stub s;
  Client c(s);
  Vmm v{c};
  const uint64_t a = v.reserve(4 * kG, 16 * kG);
  EXPECT_EQ(a % (16 * kG), 0u);
  // A free hint is honoured; a taken one is a hint only (elsewhere, success).
  const uint64_t want = a + 64 * kG;
  EXPECT_EQ(v.reserve(2 * kG, 0, want), want);
  const uint64_t moved = v.reserve(2 * kG, 0, want);
  EXPECT_NE(moved, want);
  EXPECT_NE(moved, 0u);
  int32_t st = 0;
  v.reserve(2 * kG, 0, want + 4096, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);  // an unaligned hint, as the driver answers
  v.reserve(2 * kG, 4 * kG, want + 2 * kG, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);  // a hint not aligned like the range
  v.reserve(kG + 4096, 0, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);  // not whole granules
  v.reserve(2 * kG, 3 * kG, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);  // alignment not a power of two
  EXPECT_EQ(c.call<api::Call::VmmAddressReserve>({2 * kG, 0, 0, 1}, nullptr), CUDA_ERROR_INVALID_VALUE);  // flags
  v.reserve(1ull << 50, 0, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_OUT_OF_MEMORY);  // more than the arena's range
}

TEST(StubVmm, QuotaRefusesPhysicalMemoryAndCountsItBack) {
  StubLimits limits;
  limits.ledger = VmLedger::create(5 * kG);
  Stub s(limits);
  Client c(s);
  Vmm v{c};
  const uint64_t h1 = v.create(4 * kG);
  int32_t st = 0;
  v.create(2 * kG, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_OUT_OF_MEMORY);
  v.create(8 * kG, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_OUT_OF_MEMORY);  // more than the quota at all
  EXPECT_EQ(c.call<api::Call::VmmRelease>({h1}), 0);
  EXPECT_NE(v.create(4 * kG), 0u);  // room again
}

TEST(StubVmm, HostileArguments) {
  Stub s;
  Client c(s);
  Client other(s);
  Vmm v{c}, w{other};
  const uint64_t base = v.reserve(8 * kG);
  const uint64_t h = v.create(2 * kG);
  int32_t st = 0;
  v.create(kG + 1, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);  // unaligned size
  v.create(0, 0, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  v.create(kG, 3, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_DEVICE);  // not a device of the client
  EXPECT_EQ(c.call<api::Call::VmmCreate>({kG, 0, 1}, nullptr), CUDA_ERROR_INVALID_VALUE);  // flags
  // Unaligned, outside the reservation, beyond the allocation, unknown handle.
  EXPECT_EQ(v.map(base + 4096, kG, h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.map(base, kG + 4096, h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.map(base + 7 * kG, 2 * kG, h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.map(base - 2 * kG, 2 * kG, h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.map(base, 2 * kG, h, 2 * kG), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.map(base, 2 * kG, h + 100), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(v.map(kArenaBase + 1000 * kArenaStride, 2 * kG, h), CUDA_ERROR_INVALID_VALUE);
  // Double map of the same range.
  ASSERT_EQ(v.map(base, 2 * kG, h), 0);
  const uint64_t h2 = v.create(2 * kG);
  EXPECT_EQ(v.map(base, 2 * kG, h2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.map(base + kG, 2 * kG, h2), CUDA_ERROR_INVALID_VALUE);  // overlaps
  // Unmapped ranges: access, unmap, retain.
  EXPECT_EQ(v.access(base + 4 * kG, 2 * kG), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v.access(base, 4 * kG), CUDA_ERROR_INVALID_VALUE);  // runs past the mapping
  EXPECT_EQ(v.access(base, 2 * kG, 1), CUDA_ERROR_INVALID_DEVICE);  // a device the client does not have
  EXPECT_EQ(v.access(base, 2 * kG, 0, 2), CUDA_ERROR_INVALID_VALUE);  // not a CUmemAccess_flags
  // Reserved with nothing mapped: success, as the driver answers (H100, driver 580); part of a
  // mapping, or a range of no reservation: invalid.
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base + 4 * kG, 2 * kG}), CUDA_SUCCESS);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base + kG, 2 * kG}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base + 1024 * kG, kG}), CUDA_ERROR_INVALID_VALUE);
  api::VmmValueReply r{};
  EXPECT_EQ(c.call<api::Call::VmmRetainHandle>({base + 4 * kG}, &r), CUDA_ERROR_INVALID_VALUE);
  // Another client's handle, range and reservation are not this one's.
  const uint64_t ob = w.reserve(4 * kG);
  EXPECT_NE(ob, base);
  EXPECT_EQ(w.map(ob, 2 * kG, h), CUDA_ERROR_INVALID_HANDLE);  // host handles are per client
  EXPECT_EQ(other.call<api::Call::VmmRelease>({h}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(other.call<api::Call::VmmUnmap>({base, 2 * kG}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(other.call<api::Call::VmmAddressFree>({base, 8 * kG}), CUDA_ERROR_INVALID_VALUE);
  const uint64_t oh = w.create(2 * kG);
  EXPECT_EQ(w.map(base + 4 * kG, 2 * kG, oh), CUDA_ERROR_INVALID_VALUE);  // not its reservation
  int32_t got = 0;
  other.get(base, 1, &got);
  EXPECT_EQ(got, CUDA_ERROR_INVALID_VALUE);
  // The client still works.
  ASSERT_EQ(v.access(base, 2 * kG), 0);
  c.put(base, {7});
  EXPECT_EQ(c.get(base, 1), std::vector<int>{7});
}

TEST(StubVmm, EverythingGoesWhenTheClientDies) {
  Stub s;
  {
    Client c(s);
    Vmm v{c};
    const uint64_t base = v.reserve(8 * kG);
    const uint64_t h = v.create(2 * kG);
    ASSERT_EQ(v.map(base, 2 * kG, h), 0);
    v.create(2 * kG);  // never mapped
    EXPECT_EQ(c.call<api::Call::VmmRelease>({h}), 0);  // mapped, no reference
  }
  for (int i = 0; i < 200 && (tst::fake_vmm_mappings() || tst::fake_allocated_bytes()); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

// A suspend carries the client's VMM objects (suspend_test.cc, SuspendVmm, has the details):
// the memory is the GPU's again meanwhile, and the mapping's bytes come back where they were.
TEST(StubVmm, ASuspendCarriesVmmObjectsAndTheClientRunsOn) {
  Stub stub;
  Client c(stub);
  Vmm v{c};
  const uint64_t base = v.reserve(4 * kG);
  const uint64_t h = v.create(2 * kG);
  ASSERT_EQ(v.map(base, 2 * kG, h), 0);
  ASSERT_EQ(v.access(base, 2 * kG), 0);
  c.put(base, {5, 6});
  vmrpc::ServedSlot slot{};
  for (int i = 0; i < 200; ++i) {
    auto sl = stub.endpoint.served_slots();
    if (!sl.empty()) {
      slot = sl.front();
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  std::string why;
  ASSERT_TRUE(stub.endpoint.hold_slot(slot.connection_id, slot.slot, 2000ms, &why)) << why;
  auto control = [&](cc::Op op) {
    std::vector<std::byte> reply;
    EXPECT_TRUE(stub.endpoint.control_slot(slot.connection_id, slot.slot, cc::encode(cc::Request{op, {}}), &reply,
                                           [](std::span<const std::byte>) {}, &why))
        << why;
    cc::Reply r;
    EXPECT_TRUE(cc::decode(reply, &r));
    return r;
  };
  cc::Reply r = control(cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.status.suspended);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  r = control(cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  stub.endpoint.release_slot(slot.connection_id, slot.slot);
  EXPECT_EQ(c.get(base, 2), (std::vector<int>{5, 6}));
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({base, 2 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({h}), 0);
  EXPECT_EQ(c.call<api::Call::VmmAddressFree>({base, 4 * kG}), 0);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
}

// A range may run on over mappings that follow one another (expandable segments); a gap or
// another device ends it.
TEST(StubVmm, RangesSpanContiguousMappings) {
  ObjectList vol;
  auto map = [&](uint64_t va, uint64_t bytes, int device) {
    VmmMappingObject m;
    m.bytes = bytes;
    vol.add(ObjectKind::VmmMapping, device, va, 0, m);
  };
  map(0x1000, 0x1000, 0);
  map(0x2000, 0x1000, 0);
  map(0x4000, 0x1000, 0);
  map(0x5000, 0x1000, 1);
  ASSERT_NE(vol.find_range(0x1800, 0x1000), nullptr);
  EXPECT_EQ(vol.find_range(0x1800, 0x1000)->handle, 0x1000u);
  EXPECT_EQ(vol.find_range(0x1000, 0x2000)->handle, 0x1000u);
  EXPECT_EQ(vol.find_range(0x1000, 0x2001), nullptr);  // a gap after 0x3000
  EXPECT_EQ(vol.find_range(0x4800, 0x1000), nullptr);  // another device
  EXPECT_EQ(vol.find_range(0x3000, 1), nullptr);
  EXPECT_EQ(vol.find_range(0x800, 0x1000), nullptr);
}

// The guest's record (guest-lib/src/driver_vmm.cc): the same rule for its local checks, and a
// reset leaves VMM mappings alone (they are not the context's, here as on the host).
TEST(StubVmm, TheGuestsRecordSpansContiguousMappingsToo) {
  using vgpu_db::Allocation;
  vgpu_db::AllocationMap m;
  auto map = [&](uint64_t base, uint64_t bytes, int device) {
    m.add({base, bytes, Allocation::kDevice, device, 0, Allocation::kVmmMapping});
  };
  map(0x1000, 0x1000, 0);
  map(0x2000, 0x1000, 0);
  map(0x4000, 0x1000, 0);
  m.add({0x3000, 0x1000, Allocation::kDevice, 0, 0, 0});  // cudaMalloc's, between them
  ASSERT_TRUE(m.find(0x1800, 0x1000));
  EXPECT_EQ(m.find(0x1800, 0x1000)->base, 0x1000u);
  EXPECT_FALSE(m.find(0x1800, 0x2000));  // into cudaMalloc's block: not one range
  EXPECT_FALSE(m.find(0x3800, 0x1000));  // a cudaMalloc block does not run on
  EXPECT_EQ(m.remove_device(0, Allocation::kDevice), 1u);
  EXPECT_TRUE(m.find(0x1000, 0x2000));
}

}  // namespace
}  // namespace vmcuda::host::test
