// guest-lib's device area through the exports of the built libcudart.so.13, as an
// application calls them, against vmcuda-stub in this process on the test executor
// (tests/executor: "vmcuda test executor", compute capability 9.0, 1024 threads per
// block, 1 GiB, a few more H100-like attributes), over the local transport (VMCUDA_SOCKET).
//
// The library connects once per process, so the stub is made once, before any test. Built
// twice: with VMCUDA_TEST_DEVICES=1 (the stub serves one device) and =2 (two).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <string>
#include <thread>

#include "host-stub/stub_fixture.h"
#include "vmcuda/cudart_api.h"

#ifndef VMCUDA_TEST_DEVICES
#define VMCUDA_TEST_DEVICES 1
#endif

namespace {

constexpr int kDevices = VMCUDA_TEST_DEVICES;
static_assert(kDevices == 1 || kDevices == 2, "the executor has two devices");

vmcuda::host::test::Stub* g_stub = nullptr;

class StubEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::vector<int> devices;
    for (int i = 0; i < kDevices; ++i) devices.push_back(i);
    g_stub = new vmcuda::host::test::Stub({}, devices);
    setenv("VMCUDA_SOCKET", g_stub->endpoint.socket_path().c_str(), 1);
  }
  // The stub outlives the tests; the library's connection is closed by the process's end.
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new StubEnvironment);

// What the executor's driver says of attribute `a` of device `d` (0 where it has none), as
// vmcuda-stub reads it into the vGPU database.
int executor_attribute(int a, int d) {
  int v = 0;
  return g_stub->api.cuDeviceGetAttribute(&v, a, d) == 0 ? v : 0;
}

class Device : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  void TearDown() override { EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a test left an error behind"; }
};

// The error that the last failing call recorded, which the call also returned.
#define EXPECT_RECORDED(call, error)          \
  do {                                        \
    EXPECT_EQ((call), (error));               \
    EXPECT_EQ(cudaGetLastError(), (error));   \
    EXPECT_EQ(cudaGetLastError(), cudaSuccess); \
  } while (0)

TEST_F(Device, TheLoadedLibraryIsGuestLib) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info), 0);
  char loaded[PATH_MAX], built[PATH_MAX];
  ASSERT_NE(realpath(info.dli_fname, loaded), nullptr);
  // libcudart.so.13's exports are IFUNCs bound to their implementations in guest-lib's
  // libcuda.so.1, beside it (guest-lib/README.md).
  std::string cuda = VMCUDA_CUDART_PATH;
  cuda = cuda.substr(0, cuda.rfind('/') + 1) + "libcuda.so.1";
  ASSERT_NE(realpath(cuda.c_str(), built), nullptr);
  EXPECT_STREQ(loaded, built);
}

TEST_F(Device, Count) {
  int n = -1;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, kDevices);
  EXPECT_RECORDED(cudaGetDeviceCount(nullptr), cudaErrorInvalidValue);
}

TEST_F(Device, DriverAndRuntimeVersion) {
  int v = -1;
  EXPECT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);  // the executor's cuDriverGetVersion
  EXPECT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  EXPECT_RECORDED(cudaDriverGetVersion(nullptr), cudaErrorInvalidValue);
}

TEST_F(Device, PropertiesFromTheExecutor) {
  for (int d = 0; d < kDevices; ++d) {
    cudaDeviceProp p;
    std::memset(&p, 0x5a, sizeof p);  // every byte must be written
    ASSERT_EQ(cudaGetDeviceProperties(&p, d), cudaSuccess);
    EXPECT_STREQ(p.name, "vmcuda test executor");
    for (char b : p.uuid.bytes) EXPECT_EQ(static_cast<unsigned char>(b), 0xab);
    for (char b : p.luid) EXPECT_EQ(b, 0);
    EXPECT_EQ(p.luidDeviceNodeMask, 0u);
    EXPECT_EQ(p.totalGlobalMem, size_t{1} << 30);
    EXPECT_EQ(p.major, 9);
    EXPECT_EQ(p.minor, 0);
    EXPECT_EQ(p.maxThreadsPerBlock, 1024);
    // The rest as the executor's driver has them (device_remote_test.cc checks the whole
    // field-to-attribute table, tests/gpu/device_props_check.cu against NVIDIA's).
    EXPECT_EQ(p.warpSize, executor_attribute(10, d));
    EXPECT_EQ(p.sharedMemPerBlock, static_cast<size_t>(executor_attribute(8, d)));
    EXPECT_EQ(p.memPitch, static_cast<size_t>(executor_attribute(11, d)));
    EXPECT_EQ(p.multiProcessorCount, executor_attribute(16, d));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(p.maxThreadsDim[i], executor_attribute(2 + i, d));
      EXPECT_EQ(p.maxGridSize[i], executor_attribute(5 + i, d));
    }
    EXPECT_EQ(p.hostNumaMultinodeIpcSupported, executor_attribute(143, d));
    for (int r : p.reserved) EXPECT_EQ(r, 0);
    // Nothing of the 0x5a filler is left anywhere (padding included).
    const auto* bytes = reinterpret_cast<const unsigned char*>(&p);
    for (size_t i = 0; i < sizeof p; ++i)
      if (bytes[i] == 0x5a) ADD_FAILURE() << "byte " << i << " of cudaDeviceProp left unwritten";
  }
}

TEST_F(Device, PropertiesOfAnInvalidDevice) {
  cudaDeviceProp p;
  EXPECT_RECORDED(cudaGetDeviceProperties(&p, kDevices), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaGetDeviceProperties(&p, -1), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaGetDeviceProperties(&p, INT_MAX), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaGetDeviceProperties(nullptr, 0), cudaErrorInvalidValue);
}

TEST_F(Device, AttributesAreTheHostsAndMatchTheProperties) {
  for (int d = 0; d < kDevices; ++d) {
    int v = -1;
    EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, d), cudaSuccess);
    EXPECT_EQ(v, 1024);
    EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, d), cudaSuccess);
    EXPECT_EQ(v, 9);
    EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMinor, d), cudaSuccess);
    EXPECT_EQ(v, 0);
    // Every number CUDA 13.0 knows, the reserved ones included.
    for (int a = 1; a < cudaDevAttrMax; ++a) {
      v = -1;
      EXPECT_EQ(cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(a), d), cudaSuccess) << a;
      EXPECT_EQ(v, executor_attribute(a, d)) << a;
    }
  }
}

TEST_F(Device, AttributeErrors) {
  int v = 12345;
  EXPECT_RECORDED(cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(0), 0), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaDeviceGetAttribute(&v, cudaDevAttrMax, 0), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(-1), 0), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(159), 0), cudaErrorInvalidValue);
  EXPECT_EQ(v, 12345);
  EXPECT_RECORDED(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, kDevices), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, -1), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceGetAttribute(nullptr, cudaDevAttrMaxThreadsPerBlock, 0), cudaErrorInvalidValue);
  EXPECT_EQ(v, 12345);
}

TEST_F(Device, SetAndGetArePerThread) {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, 0);
  EXPECT_RECORDED(cudaSetDevice(kDevices), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, 0);  // unchanged by the failures
  EXPECT_RECORDED(cudaGetDevice(nullptr), cudaErrorInvalidValue);

  const int last = kDevices - 1;
  EXPECT_EQ(cudaSetDevice(last), cudaSuccess);
  int other = -1;
  std::thread([&] {
    cudaGetDevice(&other);  // a new thread starts on device 0
    cudaSetDevice(0);
  }).join();
  EXPECT_EQ(other, 0);
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, last);
  // The host hears of the device with the next remoted call, and accepts it.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{1} << 30);
}

#if VMCUDA_TEST_DEVICES >= 2
TEST_F(Device, ThreadsOnDifferentDevicesShareTheConnection) {
  std::thread t([] {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    for (int i = 0; i < 50; ++i) ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  for (int i = 0; i < 50; ++i) ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  t.join();
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, 0);
}

// An event of one device recorded on another device's stream: refused at once, as CUDA
// does, not at the next synchronizing call; the same device's stream is fine.
TEST_F(Device, AnEventIsRecordedOnlyOnItsOwnDevicesStreams) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaEvent_t e0;
  cudaStream_t s0;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s0), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s1;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(e0, nullptr), cudaErrorInvalidResourceHandle);  // device 1's default stream
  EXPECT_EQ(cudaEventRecord(e0, s0), cudaSuccess);  // its own device's stream, from device 1
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // nothing deferred
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(e0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e0), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s0), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e0), cudaSuccess);
  cudaGetLastError();
}
#endif

TEST_F(Device, InitDevice) {
  EXPECT_EQ(cudaInitDevice(kDevices - 1, 0, 0), cudaSuccess);
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, 0);  // not made current
  EXPECT_RECORDED(cudaInitDevice(kDevices, 0, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaInitDevice(0, 0, 2), cudaSuccess);  // other bits of `flags` are ignored, as by NVIDIA's
  EXPECT_RECORDED(cudaInitDevice(0, 0x100, cudaInitDeviceFlagsAreValid), cudaErrorInvalidValue);
  EXPECT_EQ(cudaInitDevice(0, cudaDeviceScheduleYield, cudaInitDeviceFlagsAreValid), cudaSuccess);
  unsigned flags = 0;
  EXPECT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceScheduleYield | cudaDeviceMapHost});
  EXPECT_EQ(cudaSetDeviceFlags(0), cudaSuccess);
}

TEST_F(Device, Flags) {
  unsigned flags = 0;
  EXPECT_EQ(cudaSetDeviceFlags(0), cudaSuccess);
  EXPECT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceMapHost});  // implicit for the runtime
  EXPECT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
  EXPECT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceScheduleBlockingSync | cudaDeviceMapHost});
  // Two scheduling modes at once, or bits outside cudaDeviceMask.
  EXPECT_RECORDED(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceScheduleBlockingSync | cudaDeviceMapHost});  // unchanged
  EXPECT_RECORDED(cudaGetDeviceFlags(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaSetDeviceFlags(cudaDeviceLmemResizeToMax), cudaSuccess);
  EXPECT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceLmemResizeToMax | cudaDeviceMapHost});
  // A reset forgets them.
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags, unsigned{cudaDeviceMapHost});
}

TEST_F(Device, PciBusId) {
  // The executor's devices report PCI domain, bus and device 0.
  char id[32];
  std::memset(id, 'x', sizeof id);
  ASSERT_EQ(cudaDeviceGetPCIBusId(id, sizeof id, 0), cudaSuccess);
  EXPECT_STREQ(id, "0000:00:00.0");
  char exact[13];
  ASSERT_EQ(cudaDeviceGetPCIBusId(exact, sizeof exact, 0), cudaSuccess);
  EXPECT_STREQ(exact, "0000:00:00.0");
  // Shorter: as much as fits, and an error (NVIDIA's does both).
  char shorter[5];
  EXPECT_RECORDED(cudaDeviceGetPCIBusId(shorter, sizeof shorter, 0), cudaErrorInvalidValue);
  EXPECT_STREQ(shorter, "0000");
  EXPECT_RECORDED(cudaDeviceGetPCIBusId(exact, 12, 0), cudaErrorInvalidValue);
  EXPECT_STREQ(exact, "0000:00:00.");
  EXPECT_RECORDED(cudaDeviceGetPCIBusId(id, sizeof id, kDevices), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceGetPCIBusId(nullptr, 13, 0), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaDeviceGetPCIBusId(id, 0, 0), cudaErrorInvalidValue);

  int d = -1;
  // The forms NVIDIA's takes (checked on an H200).
  for (const char* form : {"0000:00:00.0", "00000000:00:00.0", "000000000:00:00.0", "0:0:0", "0:0:0.0", "00:00.0",
                           "0000:00:00", "0000:00:0000.0", " 0000:00:00.0"}) {
    d = -1;
    EXPECT_EQ(cudaDeviceGetByPCIBusId(&d, form), cudaSuccess) << form;
    EXPECT_EQ(d, 0) << form;
  }
  EXPECT_RECORDED(cudaDeviceGetByPCIBusId(&d, "0000:3B:00.0"), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceGetByPCIBusId(&d, "0001:00:00.0"), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceGetByPCIBusId(&d, "0000:00:00.1"), cudaErrorInvalidDevice);  // not function 0
  EXPECT_RECORDED(cudaDeviceGetByPCIBusId(&d, "0000:00:00.f"), cudaErrorInvalidDevice);
  for (const char* bad : {"", "0", "garbage", "00:00", "zz:00.0", "0000:00:00.0.0", "0:0:0:0", "0000:00:.0",
                          "0000:00:00.", "0000:00:00.0 "})
    EXPECT_RECORDED(cudaDeviceGetByPCIBusId(&d, bad), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaDeviceGetByPCIBusId(nullptr, "0000:00:00.0"), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaDeviceGetByPCIBusId(&d, nullptr), cudaErrorInvalidValue);
}

TEST_F(Device, ChooseDevice) {
  cudaDeviceProp want;
  std::memset(&want, 0, sizeof want);
  int d = -1;
  EXPECT_EQ(cudaChooseDevice(&d, &want), cudaSuccess);
  EXPECT_EQ(d, 0);
  want.major = 9;
  std::strcpy(want.name, "vmcuda test executor");
  EXPECT_EQ(cudaChooseDevice(&d, &want), cudaSuccess);
  EXPECT_EQ(d, 0);
  want.major = 12;  // more than any device: still the best there is
  EXPECT_EQ(cudaChooseDevice(&d, &want), cudaSuccess);
  EXPECT_EQ(d, 0);
  EXPECT_RECORDED(cudaChooseDevice(nullptr, &want), cudaErrorInvalidValue);
  EXPECT_RECORDED(cudaChooseDevice(&d, nullptr), cudaErrorInvalidValue);
}

TEST_F(Device, CanAccessPeer) {
  int can = -1;
  for (int a = 0; a < kDevices; ++a)
    for (int b = 0; b < kDevices; ++b) {
      can = -1;
      EXPECT_EQ(cudaDeviceCanAccessPeer(&can, a, b), cudaSuccess);
      EXPECT_EQ(can, a != b ? 1 : 0);  // the executor's two devices are peers; never itself
    }
  EXPECT_RECORDED(cudaDeviceCanAccessPeer(&can, 0, kDevices), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceCanAccessPeer(&can, -1, 0), cudaErrorInvalidDevice);
  EXPECT_RECORDED(cudaDeviceCanAccessPeer(nullptr, 0, 0), cudaErrorInvalidValue);
}

TEST_F(Device, MemGetInfo) {
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{1} << 30);  // the executor's device
  EXPECT_LE(free_bytes, total);
  EXPECT_GT(free_bytes, 0u);
  // NULL asks for nothing (NVIDIA's answers cudaSuccess too).
  total = 0;
  EXPECT_EQ(cudaMemGetInfo(nullptr, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{1} << 30);
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemGetInfo(nullptr, nullptr), cudaSuccess);
}

TEST_F(Device, SynchronizeAndReset) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  // Still usable after the (synchronize-only) reset.
  int n = 0;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(Device, SuccessesLeaveTheLastErrorAlone) {
  EXPECT_EQ(cudaSetDevice(-5), cudaErrorInvalidDevice);
  int n;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  size_t f, t;
  EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
}

}  // namespace
