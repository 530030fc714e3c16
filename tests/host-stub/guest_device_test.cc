// guest-lib's device settings, peer access and cudaDeviceReset end to end: the real guest
// code (device.cc, peer.cc, memory.cc, stream.cc, event.cc, the lazy queue) against
// vmcuda-stub in this process, on the test executor with two devices (each can reach the
// other; limits start at the H200's defaults, fake_driver.cc).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <numeric>
#include <vector>

#include "guest-lib/fatbin_builder.h"
#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace host = vmcuda::host;
namespace tst = vmcuda::testing;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

// The executor's entry points, and counters of the host's driver calls the tests watch.
host::DriverApi g_fake;
std::atomic<int> n_get_limit{0};
std::atomic<int> last_func_cache_config{-1};
host::CUresult count_get_limit(size_t* v, int limit) {
  ++n_get_limit;
  return g_fake.cuCtxGetLimit(v, limit);
}
host::CUresult record_func_cache_config(host::CUfunction f, int c) {
  const host::CUresult r = g_fake.cuFuncSetCacheConfig(f, c);
  if (r == 0) last_func_cache_config = c;
  return r;
}

host::test::Stub*& g_stub = host::test::g_guest_stub;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new host::test::GuestStubEnvironment(
    {0, 1}, [](host::DriverApi& api) {
      g_fake = api;
      api.cuCtxGetLimit = count_get_limit;
      api.cuFuncSetCacheConfig = record_func_cache_config;
    }));

// A module as nvcc registers it, with the executor's add_one kernel.
char add_one_stub;
struct Image {
  std::vector<uint64_t> fatbin = [] {
    vmcuda_test::FatbinBuilder b;
    b.entry(vmcuda_test::EntrySpec{});
    return b.build();
  }();
  vmcuda_test::Wrapper wrapper;
  Image() { wrapper.data = reinterpret_cast<const unsigned long long*>(fatbin.data()); }
};

uint32_t queued_frames() {
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);
  auto lock = r->lock();
  return r->slot().batch().frame_count();
}

class GuestDevice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static Image image;
    static bool done = false;
    if (done) return;
    done = true;
    void** h = __cudaRegisterFatBinary(&image.wrapper);
    __cudaRegisterFunction(h, &add_one_stub, const_cast<char*>(tst::kAddOneKernel), tst::kAddOneKernel, -1, nullptr,
                           nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterFatBinaryEnd(h);
  }
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    (void)last_error();
  }
  void TearDown() override {
    // Each test leaves both devices as it found them.
    for (int d : {1, 0}) {
      EXPECT_EQ(cudaSetDevice(d), cudaSuccess);
      EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    }
  }
};

TEST_F(GuestDevice, LimitsStartAtTheDefaultsAndFollowASet) {
  const std::pair<cudaLimit, size_t> defaults[] = {
      {cudaLimitStackSize, 1024},          {cudaLimitPrintfFifoSize, 8650752},
      {cudaLimitMallocHeapSize, 8388608},  {cudaLimitDevRuntimePendingLaunchCount, 2048},
      {cudaLimitMaxL2FetchGranularity, 64}, {cudaLimitPersistingL2CacheSize, 11796480}};
  for (auto [limit, value] : defaults) {
    size_t v = 1;
    EXPECT_EQ(cudaDeviceGetLimit(&v, limit), cudaSuccess) << limit;
    EXPECT_EQ(v, value) << limit;
  }
  size_t v = 7;
  // Compute capability 9.0 has no device-runtime synchronize depth.
  EXPECT_EQ(cudaDeviceGetLimit(&v, cudaLimitDevRuntimeSyncDepth), cudaErrorUnsupportedLimit);
  EXPECT_EQ(last_error(), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaDeviceSetLimit(cudaLimitDevRuntimeSyncDepth, 4), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaDeviceSetLimit(static_cast<cudaLimit>(-1), 1), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaDeviceGetLimit(&v, static_cast<cudaLimit>(100)), cudaErrorUnsupportedLimit);
  EXPECT_EQ(cudaDeviceGetLimit(nullptr, cudaLimitStackSize), cudaErrorInvalidValue);
  EXPECT_EQ(v, 7u);
  // Numbers past cudaLimit's go to the driver, as NVIDIA's runtime passes them on: 7 is
  // CU_LIMIT_SHMEM_SIZE, readable but not settable (the executor answers as the H200).
  EXPECT_EQ(cudaDeviceGetLimit(&v, static_cast<cudaLimit>(7)), cudaSuccess);
  EXPECT_EQ(v, 232448u);
  EXPECT_EQ(cudaDeviceSetLimit(static_cast<cudaLimit>(7), 1), cudaErrorNotPermitted);
  EXPECT_EQ(last_error(), cudaErrorNotPermitted);

  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(v, 4096u);
  // The value the driver made of the request, not the request: the fake clamps this hint.
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 1000), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitMaxL2FetchGranularity), cudaSuccess);
  EXPECT_EQ(v, 128u);
  // Per device: device 1 still has the default.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(v, 1024u);
}

TEST_F(GuestDevice, LimitQueriesAreAnsweredLocallyOnceKnown) {
  size_t v = 0;
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 24), cudaSuccess);
  const int asked = n_get_limit.load();
  // Something queued: a round trip would send it.
  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1), cudaSuccess);
  const uint32_t queued = queued_frames();
  ASSERT_GE(queued, 1u);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize), cudaSuccess);
    EXPECT_EQ(v, size_t{1} << 24);
  }
  EXPECT_EQ(n_get_limit.load(), asked);
  EXPECT_EQ(queued_frames(), queued);
  // A limit not asked yet is a round trip, once.
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize), cudaSuccess);
  EXPECT_EQ(n_get_limit.load(), asked + 1);
}

TEST_F(GuestDevice, CacheAndSharedMemoryConfiguration) {
  cudaFuncCache c = cudaFuncCachePreferEqual;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&c), cudaSuccess);
  EXPECT_EQ(c, cudaFuncCachePreferNone);
  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetCacheConfig(&c), cudaSuccess);
  EXPECT_EQ(c, cudaFuncCachePreferShared);
  EXPECT_EQ(cudaDeviceSetCacheConfig(static_cast<cudaFuncCache>(4)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetCacheConfig(nullptr), cudaErrorInvalidValue);

  ASSERT_EQ(cudaFuncSetCacheConfig(&add_one_stub, cudaFuncCachePreferL1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // sends the queued set
  EXPECT_EQ(last_func_cache_config.load(), int{cudaFuncCachePreferL1});
  int not_a_kernel = 0;
  EXPECT_EQ(cudaFuncSetCacheConfig(&not_a_kernel, cudaFuncCachePreferL1), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFuncSetCacheConfig(&add_one_stub, static_cast<cudaFuncCache>(9)), cudaErrorInvalidValue);

  cudaSharedMemConfig s = cudaSharedMemBankSizeDefault;
  ASSERT_EQ(cudaDeviceGetSharedMemConfig(&s), cudaSuccess);
  EXPECT_EQ(s, cudaSharedMemBankSizeFourByte);
  EXPECT_EQ(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte), cudaSuccess);
  EXPECT_EQ(cudaDeviceSetSharedMemConfig(static_cast<cudaSharedMemConfig>(3)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(&add_one_stub, cudaSharedMemBankSizeFourByte), cudaSuccess);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(&not_a_kernel, cudaSharedMemBankSizeFourByte),
            cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaDeviceGetSharedMemConfig(&s), cudaSuccess);
  EXPECT_EQ(s, cudaSharedMemBankSizeFourByte);  // fixed bank size: the set did nothing
}

TEST_F(GuestDevice, PeerAccessBetweenTheTwoDevices) {
  int can = -1;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  EXPECT_EQ(can, 1);
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 1, 0), cudaSuccess);
  EXPECT_EQ(can, 1);
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
  EXPECT_EQ(can, 0);
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceCanAccessPeer(nullptr, 0, 1), cudaErrorInvalidValue);

  EXPECT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);  // itself, as on the H200
  EXPECT_EQ(cudaDeviceEnablePeerAccess(2, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(last_error(), cudaErrorPeerAccessAlreadyEnabled);
  // One direction only: device 1 has no access to device 0 yet.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);

  int v = -1;
  ASSERT_EQ(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 1), cudaSuccess);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 5), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&v, static_cast<cudaDeviceP2PAttr>(99), 0, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(nullptr, cudaDevP2PAttrAccessSupported, 0, 1), cudaErrorInvalidValue);
}

TEST_F(GuestDevice, CopiesBetweenDevices) {
  std::vector<int> in(1000), out(1000, -1);
  std::iota(in.begin(), in.end(), 7);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 4000), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 4000), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(a, in.data(), 4000, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeer(b, 1, a, 0, 4000), cudaSuccess);
  ASSERT_EQ(cudaMemset(a, 0, 4000), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), b, 4000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, in);

  // Async, on a stream of device 1, back into device 0's buffer (half of it).
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeerAsync(a, 0, b, 1, 2000, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), a, 4000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::equal(in.begin(), in.begin() + 500, out.begin()));
  EXPECT_EQ(out[500], 0);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);

  // Refused at once: a range that is not device memory of this process, a device that is
  // not one, a stream that is not one.
  EXPECT_EQ(cudaMemcpyPeer(b, 1, in.data(), 0, 4000), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyPeer(b, 1, a, 0, 4001), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyPeer(b, 2, a, 0, 4000), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemcpyPeerAsync(b, 1, a, 0, 4000, reinterpret_cast<cudaStream_t>(0x999990)),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemcpyPeer(b, 1, a, 0, 0), cudaSuccess);
  // Same device, allowed (what the CUDA test program checks on one GPU).
  EXPECT_EQ(cudaMemcpyPeer(a, 0, static_cast<char*>(a) + 2000, 0, 2000), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

TEST_F(GuestDevice, ResetDestroysWhatTheDeviceHad) {
  const uint64_t streams_before = tst::fake_live_streams(), events_before = tst::fake_live_events();
  void *a = nullptr, *other = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&other, 4096), cudaSuccess);  // device 1's: survives device 0's reset
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const uint64_t bytes_before = tst::fake_allocated_bytes();
  ASSERT_EQ(cudaMalloc(&a, 1 << 20), cudaSuccess);
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 8192), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared), cudaSuccess);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleYield), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GT(tst::fake_allocated_bytes(), bytes_before);
  EXPECT_EQ(tst::fake_live_streams(), streams_before + 1);
  EXPECT_EQ(tst::fake_live_events(), events_before + 1);

  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  // The host freed them...
  EXPECT_EQ(tst::fake_allocated_bytes(), bytes_before);
  EXPECT_EQ(tst::fake_live_streams(), streams_before);
  EXPECT_EQ(tst::fake_live_events(), events_before);
  // ... and the guest forgot them: errors at once, as CUDA gives for freed objects.
  EXPECT_EQ(cudaFree(a), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(a, 0, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
  EXPECT_FALSE(vgpu_db::AllocationMap::process().find(reinterpret_cast<uint64_t>(a)));
  // Settings are back to the defaults (asked again from the host, not the old cache).
  size_t v = 0;
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(v, 1024u);
  cudaFuncCache c = cudaFuncCachePreferEqual;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&c), cudaSuccess);
  EXPECT_EQ(c, cudaFuncCachePreferNone);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceMapHost});
  ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);  // not "already enabled": it went
  // The device works on.
  void* fresh = nullptr;
  ASSERT_EQ(cudaMalloc(&fresh, 256), cudaSuccess);
  ASSERT_EQ(cudaMemset(fresh, 1, 256), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(last_error(), cudaErrorInvalidResourceHandle);  // the event query's, above
  // Device 1 was not reset.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_TRUE(vgpu_db::AllocationMap::process().find(reinterpret_cast<uint64_t>(other)));
  EXPECT_EQ(cudaFree(other), cudaSuccess);
}

TEST_F(GuestDevice, PeerAccessToAResetDeviceEnds) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  // Device 0's context went: device 1's access to it went too.
  EXPECT_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
}

}  // namespace

// The device queries CUDA 12-13 added and the small context calls (calls.def 0x1c00): the host
// driver's answers (the executor's: an H100's kind), the runtime's argument checks here.
TEST_F(GuestDevice, Cuda13DeviceQueriesAnswerFromTheHostDriver) {
  // 1D linear textures: per element format.
  size_t width = 0;
  const cudaChannelFormatDesc f4 = cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
  ASSERT_EQ(cudaDeviceGetTexture1DLinearMaxWidth(&width, &f4, 0), cudaSuccess);
  EXPECT_EQ(width, size_t{1} << 28);
  const cudaChannelFormatDesc bad = cudaCreateChannelDesc(32, 16, 0, 0, cudaChannelFormatKindFloat);
  EXPECT_EQ(cudaDeviceGetTexture1DLinearMaxWidth(&width, &bad, 0), cudaErrorInvalidChannelDescriptor);
  EXPECT_EQ(cudaDeviceGetTexture1DLinearMaxWidth(&width, &f4, 7), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetTexture1DLinearMaxWidth(nullptr, &f4, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetTexture1DLinearMaxWidth(&width, nullptr, 0), cudaErrorInvalidValue);

  // Atomic capabilities: one mask per operation, more operations than one call carries.
  std::vector<cudaAtomicOperation> ops;
  for (int i = 0; i < 70; ++i) ops.push_back(static_cast<cudaAtomicOperation>(i % 13));
  std::vector<unsigned> caps(ops.size(), 0xdead);
  ASSERT_EQ(cudaDeviceGetHostAtomicCapabilities(caps.data(), ops.data(), static_cast<unsigned>(ops.size()), 0),
            cudaSuccess);
  EXPECT_NE(caps[0] & cudaAtomicCapabilityScalar32, 0u);                // integer add
  EXPECT_EQ(caps[69], caps[69 - 13]);                                   // past the first piece
  EXPECT_EQ(caps[10] & cudaAtomicCapabilitySigned, 0u);                 // float add
  ASSERT_EQ(cudaDeviceGetP2PAtomicCapabilities(caps.data(), ops.data(), 13, 0, 1), cudaSuccess);
  EXPECT_NE(caps[9], 0u);
  EXPECT_EQ(cudaDeviceGetP2PAtomicCapabilities(caps.data(), ops.data(), 13, 1, 1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetP2PAtomicCapabilities(caps.data(), ops.data(), 13, 0, 5), cudaErrorInvalidDevice);
  const cudaAtomicOperation unknown = static_cast<cudaAtomicOperation>(99);
  EXPECT_EQ(cudaDeviceGetHostAtomicCapabilities(caps.data(), &unknown, 1, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetHostAtomicCapabilities(caps.data(), ops.data(), 0, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetHostAtomicCapabilities(nullptr, ops.data(), 1, 0), cudaErrorInvalidValue);

  // The persisting L2 reset (queued) and the RDMA flush.
  EXPECT_EQ(cudaCtxResetPersistingL2Cache(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                               cudaFlushGPUDirectRDMAWritesToOwner),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                               static_cast<cudaFlushGPUDirectRDMAWritesScope>(7)),
            cudaErrorInvalidValue);

  // The largest cluster for a configuration of a kernel.
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(16);
  config.blockDim = dim3(128);
  int size = 0;
  ASSERT_EQ(cudaOccupancyMaxPotentialClusterSize(&size, reinterpret_cast<const void*>(&add_one_stub), &config),
            cudaSuccess);
  EXPECT_EQ(size, 8);
  EXPECT_EQ(cudaOccupancyMaxPotentialClusterSize(nullptr, reinterpret_cast<const void*>(&add_one_stub), &config),
            cudaErrorInvalidValue);
  // No kernel: an invalid handle, as NVIDIA's 13.0 runtime answers the function queries (function.cc).
  EXPECT_EQ(cudaOccupancyMaxPotentialClusterSize(&size, reinterpret_cast<const void*>(&queued_frames), &config),
            cudaErrorInvalidResourceHandle);
  (void)last_error();
}

// Texture objects through a resource view (calls.def 0x1c06): of a mipmapped array, the view
// kept for cudaGetTextureObjectResourceViewDesc; the host driver checks levels and layers.
TEST_F(GuestDevice, TextureObjectsThroughResourceViews) {
  const cudaChannelFormatDesc f1 = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
  cudaMipmappedArray_t mip = nullptr;
  ASSERT_EQ(cudaMallocMipmappedArray(&mip, &f1, cudaExtent{64, 64, 0}, 4, 0), cudaSuccess);
  cudaResourceDesc res{};
  res.resType = cudaResourceTypeMipmappedArray;
  res.res.mipmap.mipmap = mip;
  cudaTextureDesc tex{};
  tex.readMode = cudaReadModeElementType;
  cudaResourceViewDesc view{};
  view.width = 32;
  view.height = 32;
  view.firstMipmapLevel = 1;
  view.lastMipmapLevel = 3;
  cudaTextureObject_t t = 0;
  ASSERT_EQ(cudaCreateTextureObject(&t, &res, &tex, &view), cudaSuccess);
  cudaResourceViewDesc got{};
  ASSERT_EQ(cudaGetTextureObjectResourceViewDesc(&got, t), cudaSuccess);
  EXPECT_EQ(got.width, 32u);
  EXPECT_EQ(got.firstMipmapLevel, 1u);
  EXPECT_EQ(got.lastMipmapLevel, 3u);
  EXPECT_EQ(cudaGetTextureObjectResourceViewDesc(nullptr, t), cudaErrorInvalidValue);
  // Without a view: none to give.
  cudaTextureObject_t plain = 0;
  ASSERT_EQ(cudaCreateTextureObject(&plain, &res, &tex, nullptr), cudaSuccess);
  EXPECT_EQ(cudaGetTextureObjectResourceViewDesc(&got, plain), cudaErrorInvalidValue);
  // Levels out of order: the driver's refusal.
  cudaResourceViewDesc backwards = view;
  backwards.firstMipmapLevel = 3;
  backwards.lastMipmapLevel = 1;
  cudaTextureObject_t bad = 0;
  EXPECT_EQ(cudaCreateTextureObject(&bad, &res, &tex, &backwards), cudaErrorInvalidValue);
  // Linear memory has no view.
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  cudaResourceDesc lin{};
  lin.resType = cudaResourceTypeLinear;
  lin.res.linear.devPtr = d;
  lin.res.linear.desc = f1;
  lin.res.linear.sizeInBytes = 4096;
  EXPECT_EQ(cudaCreateTextureObject(&bad, &lin, &tex, &view), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDestroyTextureObject(t), cudaSuccess);
  EXPECT_EQ(cudaDestroyTextureObject(plain), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeMipmappedArray(mip), cudaSuccess);
  (void)last_error();
}
