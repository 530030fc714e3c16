// guest-lib's device area with its sources compiled in (not through the library), so that
// the test can queue calls on the process's connection the way the other API areas do:
// cudaDeviceSynchronize returns the deferred error of queued work, once, and a sticky one
// (an illegal address in a kernel on the test executor) sticks to every later call that
// needs the device, while the device queries answered from the vGPU database still work.
// Also checks fill_device_prop (device_props.h) field by field.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "device_props.h"
#include "host-stub/stub_fixture.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace api = vmcuda::api;
namespace tst = vmcuda::testing;

vmcuda::host::test::Stub* g_stub = nullptr;

class StubEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_stub = new vmcuda::host::test::Stub({}, {0});
    setenv("VMCUDA_SOCKET", g_stub->endpoint.socket_path().c_str(), 1);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new StubEnvironment);

Remote& remote() {
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);
  EXPECT_NE(r, nullptr) << "no stub: error " << err;
  return *r;
}

class DeviceRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // nothing left over
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  void TearDown() override {
    vmcuda::guest::reset_sticky_error_for_testing();
    (void)cudaGetLastError();
  }
};

TEST_F(DeviceRemote, SynchronizeReturnsTheDeferredErrorOfQueuedWorkOnce) {
  {
    auto& r = remote();
    auto lock = r.lock();
    // Freeing a pointer the host never gave out fails on the host, later.
    ASSERT_EQ(r.enqueue<api::Call::Free>({0xdead0000ull}), cudaSuccess);
    ASSERT_EQ(r.slot().batch().frame_count(), 1u);  // still queued
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // reported once
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  size_t f = 0, t = 0;
  EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaSuccess);  // not sticky
}

TEST_F(DeviceRemote, ResetDropsTheErrorsOfDiscardedWork) {
  {
    auto& r = remote();
    auto lock = r.lock();
    ASSERT_EQ(r.enqueue<api::Call::Free>({0xdead0000ull}), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Queues add_one(p, 4) on the default stream of the current device.
void queue_add_one(uint64_t p) {
  auto& r = remote();
  auto lock = r.lock();
  auto image = r.slot().heap().allocate(64);
  ASSERT_TRUE(image);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
  const auto mod = r.call<api::Call::ModuleLoad>({image->ref()});
  r.slot().heap().free(image->offset);
  ASSERT_EQ(mod.status, 0);
  const std::string name = tst::kAddOneKernel;
  const auto fn = r.call<api::Call::ModuleGetFunction>({mod.reply.handle, uint32_t(name.size()), 0},
                                                       std::as_bytes(std::span(name)), 1024);
  ASSERT_EQ(fn.status, 0);
  std::vector<std::byte> packed(12);
  const int n = 4;
  std::memcpy(packed.data(), &p, 8);
  std::memcpy(packed.data() + 8, &n, 4);
  ASSERT_EQ(r.enqueue<api::Call::LaunchKernel>({fn.reply.function, {1, 1, 1}, {4, 1, 1}, 0, 12, 0}, packed),
            cudaSuccess);
}

TEST_F(DeviceRemote, AStickyErrorSticksToDeviceCallsNotToQueries) {
  queue_add_one(0x10);  // an illegal address: the kernel faults (700)
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // Every call that needs the device returns it, and sets it as the last error again.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  size_t f = 0, t = 0;
  EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaSetDevice(0), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaSetDeviceFlags(0), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceReset(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);

  // The device queries are the vGPU database's: they still answer.
  int n = 0, v = 0;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 1);
  cudaDeviceProp p;
  EXPECT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(cudaGetDevice(&v), cudaSuccess);
  EXPECT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---- fill_device_prop, field by field: with attribute i set to 1000 + i, every field
// holds the number of the attribute it was filled from, and no two fields share one.
TEST(DeviceProps, EveryFieldComesFromItsOwnAttribute) {
  api::DevicePropertiesReply d{};
  std::strcpy(d.name, "a device");
  for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<uint8_t>(i + 1);
  d.total_mem = 80ull << 30;
  for (uint32_t i = 0; i < api::kDeviceAttributeSlots; ++i) d.attributes[i] = static_cast<int32_t>(1000 + i);
  cudaDeviceProp p;
  std::memset(&p, 0xff, sizeof p);
  vmcuda::guest::fill_device_prop(d, &p);

  EXPECT_STREQ(p.name, "a device");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(p.uuid.bytes[i], i + 1);
  EXPECT_EQ(p.totalGlobalMem, 80ull << 30);
  for (char c : p.luid) EXPECT_EQ(c, 0);
  EXPECT_EQ(p.luidDeviceNodeMask, 0u);
  for (int r : p.reserved) EXPECT_EQ(r, 0);

  // The attribute fields: everything from totalGlobalMem's end to reserved, as 4-byte
  // words (the size_t fields' high halves are 0: every attribute fits 32 bits).
  const size_t begin = offsetof(cudaDeviceProp, totalGlobalMem) + sizeof p.totalGlobalMem;
  const size_t end = offsetof(cudaDeviceProp, reserved);
  std::set<int> seen;
  int fields = 0;
  for (size_t off = begin; off < end; off += 4) {
    int32_t w;
    std::memcpy(&w, reinterpret_cast<const char*>(&p) + off, 4);
    if (w == 0) continue;  // the high half of a size_t
    ++fields;
    EXPECT_GE(w, 1001) << "offset " << off;
    EXPECT_LT(w, 1000 + static_cast<int>(cudaDevAttrMax)) << "offset " << off;
    EXPECT_TRUE(seen.insert(w).second) << "attribute " << w - 1000 << " fills two fields (offset " << off << ")";
  }
  EXPECT_EQ(fields, 111);  // the fields of CUDA 13.0's cudaDeviceProp between totalGlobalMem and reserved, arrays by element
  // A few by name, against cuda.h's numbers.
  EXPECT_EQ(p.maxThreadsPerBlock, 1001);
  EXPECT_EQ(p.sharedMemPerBlock, 1008u);
  EXPECT_EQ(p.memPitch, 1011u);
  EXPECT_EQ(p.textureAlignment, 1014u);
  EXPECT_EQ(p.major, 1075);
  EXPECT_EQ(p.minor, 1076);
  EXPECT_EQ(p.pciDomainID, 1050);
  EXPECT_EQ(p.maxTexture1DMipmap, 1077);
  EXPECT_EQ(p.texturePitchAlignment, 1051u);
  EXPECT_EQ(p.unifiedFunctionPointers, 1129);
  EXPECT_EQ(p.gpuPciSubsystemID, 1140u);
  EXPECT_EQ(p.hostNumaMultinodeIpcSupported, 1143);
}

TEST(DeviceProps, TheNameIsAlwaysTerminated) {
  api::DevicePropertiesReply d{};
  std::memset(d.name, 'n', sizeof d.name);
  cudaDeviceProp p;
  vmcuda::guest::fill_device_prop(d, &p);
  EXPECT_EQ(std::strlen(p.name), sizeof p.name - 1);
}

}  // namespace
