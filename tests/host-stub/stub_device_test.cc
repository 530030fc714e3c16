// vmcuda-stub's limits, cache configuration, peer access and reset handlers (device.cc,
// peer.cc) through the generic call path, as a hostile guest could call them: every bad
// value is an error status, a client's peer copies and reset touch only its own memory,
// and under a memory quota the driver's reservations (stack, printf FIFO, device heap)
// count against it.
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test {
namespace {

constexpr int32_t kUnsupportedLimit = 215, kInvalidValue = 1, kInvalidDevice = 101, kInvalidHandle = 400;
constexpr int32_t kOutOfMemory = 2, kAlreadyEnabled = 704, kNotEnabled = 705;

TEST(StubDevice, LimitsAreCheckedAndPerDevice) {
  Stub stub({}, {0, 1});
  Client c(stub);
  api::LimitReply r{};
  // Limit numbers go to the driver as they are (7: CU_LIMIT_SHMEM_SIZE, read-only).
  ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({7, 0}, &r), 0);
  EXPECT_EQ(r.value, 232448u);
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({1, 7, 0}, &r), 800);  // CUDA_ERROR_NOT_PERMITTED
  EXPECT_EQ(c.call<api::Call::DeviceGetLimit>({-1, 0}, &r), kUnsupportedLimit);
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({1, 1 << 30, 0}, &r), kUnsupportedLimit);
  ASSERT_EQ(c.call<api::Call::DeviceSetLimit>({4096, 0, 0}, &r), 0);
  EXPECT_EQ(r.value, 4096u);
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({0, 0}, &r), 0);
  EXPECT_EQ(r.value, 1024u);
  ASSERT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({0, 0}, &r), 0);
  EXPECT_EQ(r.value, 4096u);
  // Another client has its own contexts: the default.
  Client other(stub);
  ASSERT_EQ(other.call<api::Call::DeviceGetLimit>({0, 0}, &r), 0);
  EXPECT_EQ(r.value, 1024u);
}

TEST(StubDevice, ReservationsCountAgainstTheQuota) {
  StubLimits limits;
  limits.ledger = vmcuda::host::VmLedger::create(64ull << 20);
  Stub stub(limits, {0});
  Client c(stub);
  api::LimitReply r{};
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({1ull << 30, 2, 0}, &r), kOutOfMemory);  // malloc heap
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({1ull << 30, 1, 0}, &r), kOutOfMemory);  // printf FIFO
  // 1 MiB of stack for each of the device's resident threads; less than now is always fine.
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({1ull << 20, 0, 0}, &r), kOutOfMemory);
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({512, 0, 0}, &r), 0);
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({~0ull, 0, 0}, &r), kOutOfMemory);
  ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({2, 0}, &r), 0);
  EXPECT_EQ(r.value, 8388608u);  // unchanged
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({16ull << 20, 2, 0}, &r), 0);
  EXPECT_EQ(r.value, 16ull << 20);
  // Hints that reserve nothing are not limited.
  EXPECT_EQ(c.call<api::Call::DeviceSetLimit>({~0ull, 5, 0}, &r), 0);
}

// NVML's question (guest libnvidia-ml.so.1): answered without making a context; memory as the
// VM may use it (the quota), free as MemGetInfo says once the client has a context.
TEST(StubDevice, NvmlDeviceInfoNeedsNoContextAndShowsTheQuota) {
  StubLimits limits;
  limits.ledger = vmcuda::host::VmLedger::create(64ull << 20);
  Stub stub(limits, {0});
  Client c(stub);
  api::NvmlDeviceInfoReply r{};
  for (int32_t d : {-1, 1, 0x7fffffff}) EXPECT_EQ(c.call<api::Call::NvmlDeviceInfo>({d, 0}, &r), kInvalidDevice) << d;
  ASSERT_EQ(c.call<api::Call::NvmlDeviceInfo>({0, 0}, &r), 0);
  EXPECT_EQ(r.total_bytes, 64ull << 20);
  EXPECT_EQ(r.free_bytes, 64ull << 20);
  EXPECT_EQ(r.flags & api::kNvmlMemoryFromContext, 0u) << "the query made a context";
  EXPECT_EQ(r.flags & api::kNvmlUtilizationMeasured, 0u) << "no fair sharing here";
  EXPECT_EQ(r.gpu_percent, 0u);
  EXPECT_LT(std::strlen(r.driver_version), sizeof r.driver_version);
  EXPECT_EQ(limits.ledger->used(), 0u);

  const uint64_t p = c.malloc(16ull << 20);
  ASSERT_NE(p, 0u);
  api::MemInfoReply m{};
  ASSERT_EQ(c.call<api::Call::MemGetInfo>({}, &m), 0);
  ASSERT_EQ(c.call<api::Call::NvmlDeviceInfo>({0, 0}, &r), 0);
  EXPECT_NE(r.flags & api::kNvmlMemoryFromContext, 0u);
  EXPECT_EQ(r.total_bytes, m.total_bytes);
  EXPECT_EQ(r.free_bytes, m.free_bytes);
  EXPECT_LE(r.free_bytes, (64ull - 16) << 20);
  // Another client of the VM, without a context: what the VM has left.
  Client other(stub);
  ASSERT_EQ(other.call<api::Call::NvmlDeviceInfo>({0, 0}, &r), 0);
  EXPECT_EQ(r.free_bytes, (64ull << 20) - limits.ledger->used());
}

TEST(StubDevice, CacheConfigurationValues) {
  Stub stub({}, {0});
  Client c(stub);
  EXPECT_EQ(c.call<api::Call::DeviceSetCacheConfig>({4, 0}), kInvalidValue);
  EXPECT_EQ(c.call<api::Call::DeviceSetCacheConfig>({-1, 0}), kInvalidValue);
  ASSERT_EQ(c.call<api::Call::DeviceSetCacheConfig>({2, 0}), 0);
  api::CacheConfigReply r{};
  ASSERT_EQ(c.call<api::Call::DeviceGetCacheConfig>({}, &r), 0);
  EXPECT_EQ(r.config, 2);
  EXPECT_EQ(c.call<api::Call::FuncSetCacheConfig>({0, 1, 0}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::FuncSetCacheConfig>({12345, 1, 0}), kInvalidHandle);
  const uint64_t fn = c.load_add_one();
  EXPECT_EQ(c.call<api::Call::FuncSetCacheConfig>({fn, 1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::FuncSetCacheConfig>({fn, 7, 0}), kInvalidValue);
}

TEST(StubDevice, PeerCallsCheckTheDevices) {
  Stub stub({}, {0, 1});
  Client c(stub);
  api::PeerReply r{};
  for (auto [d, p] : {std::pair{-1, 0}, {0, 2}, {2, 0}, {0x7fffffff, 1}})
    EXPECT_EQ(c.call<api::Call::DeviceCanAccessPeer>({d, p}, &r), kInvalidDevice) << d << " " << p;
  ASSERT_EQ(c.call<api::Call::DeviceCanAccessPeer>({1, 0}, &r), 0);
  EXPECT_EQ(r.value, 1);
  EXPECT_EQ(c.call<api::Call::EnablePeerAccess>({-1, 0}), kInvalidDevice);
  EXPECT_EQ(c.call<api::Call::EnablePeerAccess>({0, 0}), 217);  // itself: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
  EXPECT_EQ(c.call<api::Call::EnablePeerAccess>({1, 4}), kInvalidValue);
  EXPECT_EQ(c.call<api::Call::DisablePeerAccess>({5, 0}), kInvalidDevice);
  EXPECT_EQ(c.call<api::Call::DisablePeerAccess>({1, 0}), kNotEnabled);
  ASSERT_EQ(c.call<api::Call::EnablePeerAccess>({1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EnablePeerAccess>({1, 0}), kAlreadyEnabled);
  EXPECT_EQ(c.call<api::Call::DeviceGetP2PAttribute>({2, 1, 1, 0}, &r), kInvalidDevice);
  EXPECT_EQ(c.call<api::Call::DeviceGetP2PAttribute>({2, 0, -3, 0}, &r), kInvalidDevice);
}

// Device memory lives in the client's VMM arena, which cuCtxEnablePeerAccess does not
// cover: peer access grants the arena's mappings to the device too, and takes them back.
TEST(StubDevice, PeerAccessCoversTheArenasMappings) {
  Stub stub({}, {0, 1});
  Client c(stub);
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  const uint64_t on1 = c.malloc(4ull << 20);  // its own mapping, on device 1
  ASSERT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
  EXPECT_EQ(tst::fake_vmm_access(on1), 0b10u);
  ASSERT_EQ(c.call<api::Call::EnablePeerAccess>({1, 0}), 0);
  EXPECT_EQ(tst::fake_vmm_access(on1), 0b11u);
  const uint64_t on0 = c.malloc(4ull << 20);
  EXPECT_EQ(tst::fake_vmm_access(on0), 0b01u);
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  const uint64_t later1 = c.malloc(4ull << 20);  // later mappings too
  ASSERT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
  EXPECT_EQ(tst::fake_vmm_access(later1), 0b11u);
  ASSERT_EQ(c.call<api::Call::DisablePeerAccess>({1, 0}), 0);
  EXPECT_EQ(tst::fake_vmm_access(on1), 0b10u);
  // A reset of device 1 ends device 0's access to it as well.
  ASSERT_EQ(c.call<api::Call::EnablePeerAccess>({1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::DeviceReset>({}), 0);
  EXPECT_EQ(tst::fake_vmm_access(on0), 0b01u);
  ASSERT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::DisablePeerAccess>({1, 0}), kNotEnabled);
}

TEST(StubDevice, AClientWithOneDeviceHasNoPeer) {
  Stub one({}, {0});
  Client d(one);
  api::PeerReply r{};
  EXPECT_EQ(d.call<api::Call::EnablePeerAccess>({1, 0}), kInvalidDevice);
  EXPECT_EQ(d.call<api::Call::DeviceCanAccessPeer>({0, 1}, &r), kInvalidDevice);
  ASSERT_EQ(d.call<api::Call::DeviceCanAccessPeer>({0, 0}, &r), 0);
  EXPECT_EQ(r.value, 0);
}

TEST(StubDevice, PeerCopiesOnlyBetweenTheClientsOwnRanges) {
  Stub stub({}, {0, 1});
  Client a(stub), b(stub);
  const uint64_t mine = a.malloc(256);
  ASSERT_EQ(a.call<api::Call::SetDevice>({1, 0}), 0);
  const uint64_t mine1 = a.malloc(256);
  const uint64_t theirs = b.malloc(256);
  std::vector<int> v(64);
  for (int i = 0; i < 64; ++i) v[i] = i * 3;
  b.put(theirs, v);
  EXPECT_EQ(a.call<api::Call::MemcpyPeer>({mine1, theirs, 256, 1, 0}), kInvalidValue);
  EXPECT_EQ(a.call<api::Call::MemcpyPeer>({theirs, mine, 256, 0, 0}), kInvalidValue);
  EXPECT_EQ(a.call<api::Call::MemcpyPeer>({mine1, mine, 257, 1, 0}), kInvalidValue);
  EXPECT_EQ(a.call<api::Call::MemcpyPeer>({mine1, mine, ~0ull, 1, 0}), kInvalidValue);
  EXPECT_EQ(a.call<api::Call::MemcpyPeer>({mine1, mine, 256, 1, 9}), kInvalidDevice);
  EXPECT_EQ(a.call<api::Call::MemcpyPeerAsync>({mine1, mine, 256, 1, 0, 0x4242}), kInvalidHandle);
  EXPECT_EQ(b.get(theirs, 64), v);
  a.put(mine1, v);
  ASSERT_EQ(a.call<api::Call::MemcpyPeer>({mine, mine1, 256, 0, 1}), 0);
  EXPECT_EQ(a.get(mine, 64), v);
  ASSERT_EQ(a.call<api::Call::MemcpyPeerAsync>({mine1 + 128, mine, 128, 1, 0, api::kStreamDefault}), 0);
  auto back = a.get(mine1, 64);
  EXPECT_EQ(back[32], v[0]);
}

TEST(StubDevice, ResetFreesOnlyTheCurrentDevicesObjectsOfThisClient) {
  Stub stub({}, {0, 1});
  Client a(stub), b(stub);
  const uint64_t theirs = b.malloc(4096);
  const uint64_t mine = a.malloc(4096);
  ASSERT_EQ(a.call<api::Call::StreamCreate>({0x10000, 0, 0}), 0);
  ASSERT_EQ(a.call<api::Call::EventCreate>({0x10010, 0, 0}), 0);
  ASSERT_EQ(a.call<api::Call::SetDevice>({1, 0}), 0);
  const uint64_t mine1 = a.malloc(4096);
  ASSERT_EQ(a.call<api::Call::StreamCreate>({0x10020, 0, 0}), 0);
  ASSERT_EQ(a.call<api::Call::SetDevice>({0, 0}), 0);
  const uint64_t streams = tst::fake_live_streams(), events = tst::fake_live_events();
  ASSERT_EQ(a.call<api::Call::DeviceReset>({}), 0);
  EXPECT_EQ(tst::fake_live_streams(), streams - 1);
  EXPECT_EQ(tst::fake_live_events(), events - 1);
  EXPECT_EQ(a.call<api::Call::Free>({mine}), kInvalidValue);  // gone
  EXPECT_EQ(a.call<api::Call::StreamSynchronize>({0x10000}), kInvalidHandle);
  EXPECT_EQ(a.call<api::Call::StreamSynchronize>({0x10020}), 0);  // device 1's
  EXPECT_EQ(a.call<api::Call::Free>({mine1}), 0);
  EXPECT_EQ(b.call<api::Call::Free>({theirs}), 0);  // the other client's stayed
  // The handle may be made again, and the device works on.
  EXPECT_EQ(a.call<api::Call::StreamCreate>({0x10000, 0, 0}), 0);
  EXPECT_NE(a.malloc(64), 0u);
}

// Handlers from plain_calls.def check as the hand-written ones did: nonzero padding is the
// guest's fault (the client is served on), then each handle and device index, in the driver's
// parameter order; the driver's outputs reach the reply.
TEST(StubDevice, PlainCallsCheckPaddingHandlesAndDevices) {
  constexpr int32_t kBadArguments = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadArguments);
  Stub stub({}, {0, 1});
  Client c(stub);
  api::LimitReply limit{};
  EXPECT_EQ(c.call<api::Call::DeviceGetLimit>({0, 1}, &limit), kBadArguments);
  ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({0, 0}, &limit), 0);
  EXPECT_EQ(limit.value, 1024u);
  api::Texture1DWidthReply width{};
  EXPECT_EQ(c.call<api::Call::Texture1DLinearMaxWidth>({0, 0x20, 1, 1}, &width), kBadArguments);
  EXPECT_EQ(c.call<api::Call::Texture1DLinearMaxWidth>({2, 0x20, 1, 0}, &width), kInvalidDevice);
  EXPECT_EQ(c.call<api::Call::Texture1DLinearMaxWidth>({-1, 0x20, 1, 0}, &width), kInvalidDevice);
  ASSERT_EQ(c.call<api::Call::Texture1DLinearMaxWidth>({1, 0x20, 1, 0}, &width), 0);
  EXPECT_GT(width.width, 0u);
  api::StreamPriorityReply priority{};
  EXPECT_EQ(c.call<api::Call::StreamGetPriority>({0x7777}, &priority), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::StreamGetPriority>({api::kStreamDefault}, &priority), 0);
  api::OccupancyReply blocks{};
  EXPECT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({0x7777, 128, 0, 0}, &blocks), kInvalidHandle);
  api::OccupancySharedReply shared{};
  EXPECT_EQ(c.call<api::Call::OccupancyAvailableSharedMemory>({0x7777, 1, 128}, &shared), kInvalidHandle);
  // A hand-written handler's padding: the same idiom.
  EXPECT_EQ(c.call<api::Call::MemPoolAccess>({0, 1, 1, 1}), kBadArguments);
  api::StreamPriorityRangeReply range{};
  ASSERT_EQ(c.call<api::Call::StreamPriorityRange>({}, &range), 0);
  EXPECT_LE(range.greatest, range.least);
}

}  // namespace
}  // namespace vmcuda::host::test
