// guest-lib's libnvidia-ml.so.1 through its exports (dlopen, as frameworks load NVML), against
// vmcuda-stub in this process on the test executor ("vmcuda test executor", compute
// capability 9.0, 1 GiB) over the local transport. Built twice: without a memory quota and
// with VMCUDA_NVML_QUOTA_MIB (the VM's quota is the device NVML shows). The library connects
// once per process, so the stub is made once, before any test. Built a third time with
// VMCUDA_NVML_NO_HOST: no stub at all (only the NoHost test).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <regex>
#include <string>

#include "host-stub/stub_fixture.h"
#include "vm_ledger.h"
#include "vmcuda/nvml_types.h"

#ifndef VMCUDA_NVML_QUOTA_MIB
#define VMCUDA_NVML_QUOTA_MIB 0
#endif

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kQuota = VMCUDA_NVML_QUOTA_MIB * kMiB;  // 0: none
vmcuda::host::test::Stub* g_stub = nullptr;

class StubEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
#ifdef VMCUDA_NVML_NO_HOST
    setenv("VMCUDA_SOCKET", "/nonexistent/vmcuda-nvml-test.sock", 1);
    return;
#endif
    vmcuda::host::StubLimits limits;
    if (kQuota) limits.ledger = vmcuda::host::VmLedger::create(kQuota);
    g_stub = new vmcuda::host::test::Stub(limits, {0});
    setenv("VMCUDA_SOCKET", g_stub->endpoint.socket_path().c_str(), 1);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new StubEnvironment);

void* nvml() {
  static void* h = dlopen(VMCUDA_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  return h;
}
[[maybe_unused]] void* cudart() {
  static void* h = dlopen(VMCUDA_CUDART_PATH, RTLD_NOW | RTLD_LOCAL);
  return h;
}
template <class F>
F fn(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  EXPECT_NE(p, nullptr) << name;
  return reinterpret_cast<F>(p);
}
#define NVML(name, ...) fn<nvmlReturn_t (*)(__VA_ARGS__)>(nvml(), #name)

[[maybe_unused]] int executor_attribute(int a) {
  int v = 0;
  return g_stub->api.cuDeviceGetAttribute(&v, a, 0) == 0 ? v : 0;
}

[[maybe_unused]] nvmlDevice_t device0() {
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &d), NVML_SUCCESS);
  return d;
}

[[maybe_unused]] nvmlMemory_t memory(nvmlDevice_t d) {
  nvmlMemory_t m{};
  EXPECT_EQ(NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, nvmlMemory_t*)(d, &m), NVML_SUCCESS);
  return m;
}

#ifdef VMCUDA_NVML_NO_HOST
// No stub reachable: NVIDIA's library on a machine without its driver says so at init.
TEST(NvmlNoHost, InitSaysTheDriverIsNotLoaded) {
  ASSERT_NE(nvml(), nullptr) << dlerror();
  EXPECT_EQ(NVML(nvmlInit_v2, void)(), NVML_ERROR_DRIVER_NOT_LOADED);
  unsigned n = 7;
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(NVML(nvmlShutdown, void)(), NVML_ERROR_UNINITIALIZED);
}
#else
TEST(Nvml, LoadsWithoutLibcudart) {
  ASSERT_NE(nvml(), nullptr) << dlerror();
  EXPECT_EQ(dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD), nullptr) << "libnvidia-ml.so.1 must not need libcudart";
  EXPECT_EQ(dlsym(nvml(), "cuInit") == nullptr, false) << "its DT_NEEDED libcuda.so.1 is vmcuda's";
}

TEST(Nvml, CallsBeforeInitAnswerUninitialized) {
  unsigned n = 7;
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(n, 7u);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &d), NVML_ERROR_UNINITIALIZED);
  int v = 0;
  EXPECT_EQ(NVML(nvmlSystemGetCudaDriverVersion, int*)(&v), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(NVML(nvmlShutdown, void)(), NVML_ERROR_UNINITIALIZED);
}

TEST(Nvml, ErrorStrings) {
  auto s = fn<const char* (*)(nvmlReturn_t)>(nvml(), "nvmlErrorString");
  EXPECT_STREQ(s(NVML_SUCCESS), "Success");
  EXPECT_STREQ(s(NVML_ERROR_UNINITIALIZED), "Uninitialized");
  EXPECT_STREQ(s(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
  EXPECT_STREQ(s(static_cast<nvmlReturn_t>(12345)), "Unknown Error");
}

TEST(Nvml, InitAndShutdownAreCounted) {
  EXPECT_EQ(NVML(nvmlInit_v2, void)(), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlInitWithFlags, unsigned)(0), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlShutdown, void)(), NVML_SUCCESS);
  unsigned n = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_SUCCESS) << "one init is still open";
  EXPECT_EQ(NVML(nvmlShutdown, void)(), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(NVML(nvmlShutdown, void)(), NVML_ERROR_UNINITIALIZED);
}

class NvmlInitialized : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(NVML(nvmlInit_v2, void)(), NVML_SUCCESS); }
  void TearDown() override { EXPECT_EQ(NVML(nvmlShutdown, void)(), NVML_SUCCESS); }
};

TEST_F(NvmlInitialized, CountAndHandles) {
  unsigned n = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2, unsigned*)(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(NVML(nvmlDeviceGetCount, unsigned*)(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2, unsigned*)(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDevice_t d = nullptr, d1 = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, &d), NVML_SUCCESS);
  EXPECT_NE(d, nullptr);
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex, unsigned, nvmlDevice_t*)(0, &d1), NVML_SUCCESS);
  EXPECT_EQ(d, d1);
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(1, &d1), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*)(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  unsigned index = 9;
  EXPECT_EQ(NVML(nvmlDeviceGetIndex, nvmlDevice_t, unsigned*)(d, &index), NVML_SUCCESS);
  EXPECT_EQ(index, 0u);
  EXPECT_EQ(NVML(nvmlDeviceGetMinorNumber, nvmlDevice_t, unsigned*)(d, &index), NVML_SUCCESS);
  EXPECT_EQ(index, 0u);
  EXPECT_EQ(NVML(nvmlDeviceGetIndex, nvmlDevice_t, unsigned*)(d, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlInitialized, ForeignHandlesAreInvalidArguments) {
  unsigned index = 0;
  auto get_index = NVML(nvmlDeviceGetIndex, nvmlDevice_t, unsigned*);
  EXPECT_EQ(get_index(nullptr, &index), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(get_index(reinterpret_cast<nvmlDevice_t>(&index), &index), NVML_ERROR_INVALID_ARGUMENT);
  // The next element of the handle array: a device the VM does not have.
  EXPECT_EQ(get_index(reinterpret_cast<nvmlDevice_t>(reinterpret_cast<unsigned*>(device0()) + 1), &index),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(get_index(reinterpret_cast<nvmlDevice_t>(reinterpret_cast<char*>(device0()) + 1), &index),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlInitialized, NameAndUuid) {
  nvmlDevice_t d = device0();
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  auto get_name = NVML(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned);
  EXPECT_EQ(get_name(d, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "vmcuda test executor");
  EXPECT_EQ(get_name(d, name, 5), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(get_name(d, nullptr, 64), NVML_ERROR_INVALID_ARGUMENT);

  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  auto get_uuid = NVML(nvmlDeviceGetUUID, nvmlDevice_t, char*, unsigned);
  ASSERT_EQ(get_uuid(d, uuid, sizeof uuid), NVML_SUCCESS);
  EXPECT_TRUE(std::regex_match(uuid, std::regex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")))
      << uuid;
  unsigned char bytes[16];
  ASSERT_EQ(g_stub->api.cuDeviceGetUuid_v2(bytes, 0), 0);
  char first[16];
  std::snprintf(first, sizeof first, "GPU-%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
  EXPECT_EQ(std::string(uuid).substr(0, 12), first) << "the UUID the driver reports";
  EXPECT_EQ(get_uuid(d, uuid, 40), NVML_ERROR_INSUFFICIENT_SIZE);  // 40 characters and the NUL

  auto by_uuid = NVML(nvmlDeviceGetHandleByUUID, const char*, nvmlDevice_t*);
  nvmlDevice_t found = nullptr;
  EXPECT_EQ(by_uuid(uuid, &found), NVML_SUCCESS);
  EXPECT_EQ(found, d);
  EXPECT_EQ(by_uuid("GPU-00000000-0000-0000-0000-000000000000", &found), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_uuid(nullptr, &found), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlInitialized, PciInfo) {
  nvmlDevice_t d = device0();
  nvmlPciInfo_t pci;
  std::memset(&pci, 0x5a, sizeof pci);
  ASSERT_EQ(NVML(nvmlDeviceGetPciInfo_v3, nvmlDevice_t, nvmlPciInfo_t*)(d, &pci), NVML_SUCCESS);
  EXPECT_EQ(pci.domain, static_cast<unsigned>(executor_attribute(50)));
  EXPECT_EQ(pci.bus, static_cast<unsigned>(executor_attribute(33)));
  EXPECT_EQ(pci.device, static_cast<unsigned>(executor_attribute(34)));
  EXPECT_EQ(pci.pciDeviceId, static_cast<unsigned>(executor_attribute(139)));
  char want[32];
  std::snprintf(want, sizeof want, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
  EXPECT_STREQ(pci.busId, want);
  std::snprintf(want, sizeof want, "%04X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
  EXPECT_STREQ(pci.busIdLegacy, want);

  auto by_pci = NVML(nvmlDeviceGetHandleByPciBusId_v2, const char*, nvmlDevice_t*);
  nvmlDevice_t found = nullptr;
  EXPECT_EQ(by_pci(pci.busId, &found), NVML_SUCCESS);
  EXPECT_EQ(found, d);
  found = nullptr;
  EXPECT_EQ(by_pci(pci.busIdLegacy, &found), NVML_SUCCESS);
  EXPECT_EQ(found, d);
  EXPECT_EQ(by_pci("0000:ff:1f.0", &found), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_pci("not a bus id", &found), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_pci(nullptr, &found), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlInitialized, MemoryIsWhatTheVmMayUse) {
  nvmlDevice_t d = device0();
  const uint64_t device_bytes = 1ull << 30;  // the executor's
  const uint64_t total = kQuota ? kQuota : device_bytes;
  nvmlMemory_t m = memory(d);
  EXPECT_EQ(m.total, total);
  EXPECT_EQ(m.free + m.used, m.total);
  EXPECT_LE(m.free, m.total);

  nvmlMemory_v2_t m2{};
  auto v2 = NVML(nvmlDeviceGetMemoryInfo_v2, nvmlDevice_t, nvmlMemory_v2_t*);
  EXPECT_EQ(v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m2.version = nvmlMemory_v2;
  EXPECT_EQ(v2(d, &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, total);
  EXPECT_EQ(m2.free + m2.used + m2.reserved, m2.total);
  EXPECT_EQ(NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, nvmlMemory_t*)(d, nullptr), NVML_ERROR_INVALID_ARGUMENT);

  // The same session as the runtime's: an allocation shows, and NVML's free is cudaMemGetInfo's.
  ASSERT_NE(cudart(), nullptr) << dlerror();
  auto cuda_malloc = fn<int (*)(void**, size_t)>(cudart(), "cudaMalloc");
  auto cuda_free = fn<int (*)(void*)>(cudart(), "cudaFree");
  auto mem_info = fn<int (*)(size_t*, size_t*)>(cudart(), "cudaMemGetInfo");
  void* p = nullptr;
  ASSERT_EQ(cuda_malloc(&p, 64 * kMiB), 0);
  size_t cuda_free_bytes = 0, cuda_total = 0;
  ASSERT_EQ(mem_info(&cuda_free_bytes, &cuda_total), 0);
  m = memory(d);
  EXPECT_EQ(m.total, cuda_total);
  EXPECT_EQ(m.free, cuda_free_bytes);
  EXPECT_GE(m.used, 64 * kMiB);
  EXPECT_EQ(cuda_free(p), 0);
}

TEST_F(NvmlInitialized, DeviceFacts) {
  nvmlDevice_t d = device0();
  int major = -1, minor = -1;
  EXPECT_EQ(NVML(nvmlDeviceGetCudaComputeCapability, nvmlDevice_t, int*, int*)(d, &major, &minor), NVML_SUCCESS);
  EXPECT_EQ(major, executor_attribute(75));
  EXPECT_EQ(minor, executor_attribute(76));
  EXPECT_EQ(NVML(nvmlDeviceGetCudaComputeCapability, nvmlDevice_t, int*, int*)(d, &major, nullptr),
            NVML_ERROR_INVALID_ARGUMENT);
  nvmlDeviceArchitecture_t arch = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetArchitecture, nvmlDevice_t, nvmlDeviceArchitecture_t*)(d, &arch), NVML_SUCCESS);
  EXPECT_EQ(arch, major == 9 ? NVML_DEVICE_ARCH_HOPPER : arch) << "compute capability 9.x is Hopper";
  nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
  EXPECT_EQ(NVML(nvmlDeviceGetBrand, nvmlDevice_t, nvmlBrandType_t*)(d, &brand), NVML_SUCCESS);
  EXPECT_EQ(brand, NVML_BRAND_NVIDIA);
  nvmlComputeMode_t mode = NVML_COMPUTEMODE_PROHIBITED;
  EXPECT_EQ(NVML(nvmlDeviceGetComputeMode, nvmlDevice_t, nvmlComputeMode_t*)(d, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_DEFAULT);
  nvmlEnableState_t persistence = NVML_FEATURE_ENABLED;
  EXPECT_EQ(NVML(nvmlDeviceGetPersistenceMode, nvmlDevice_t, nvmlEnableState_t*)(d, &persistence), NVML_SUCCESS);
  EXPECT_EQ(persistence, NVML_FEATURE_DISABLED);
  unsigned multi = 7;
  EXPECT_EQ(NVML(nvmlDeviceGetMultiGpuBoard, nvmlDevice_t, unsigned*)(d, &multi), NVML_SUCCESS);
  EXPECT_EQ(multi, executor_attribute(84) != 0 ? 1u : 0u);
  // The test stub measures no fair share: 0, and memory utilization is never measured.
  nvmlUtilization_t u{7, 7};
  EXPECT_EQ(NVML(nvmlDeviceGetUtilizationRates, nvmlDevice_t, nvmlUtilization_t*)(d, &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 0u);
  EXPECT_EQ(u.memory, 0u);
}

TEST_F(NvmlInitialized, Versions) {
  int cuda = 0, driver = 0;
  EXPECT_EQ(NVML(nvmlSystemGetCudaDriverVersion_v2, int*)(&cuda), NVML_SUCCESS);
  ASSERT_EQ(g_stub->api.cuDriverGetVersion(&driver), 0);
  EXPECT_EQ(cuda, driver);
  EXPECT_EQ(NVML(nvmlSystemGetCudaDriverVersion, int*)(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  char v[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
  EXPECT_EQ(NVML(nvmlSystemGetNVMLVersion, char*, unsigned)(v, sizeof v), NVML_SUCCESS);
  EXPECT_EQ(std::string(v).substr(0, 2), "13") << v;
  // The host's driver version is its NVIDIA module's: none where the stub runs on the executor.
  const nvmlReturn_t r = NVML(nvmlSystemGetDriverVersion, char*, unsigned)(v, sizeof v);
  if (r == NVML_SUCCESS)
    EXPECT_TRUE(std::regex_match(v, std::regex("[0-9][0-9.]*"))) << v;
  else
    EXPECT_EQ(r, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlInitialized, UnsupportedCallsAnswerNotSupportedAndLogOnce) {
  auto temperature = NVML(nvmlDeviceGetTemperatureV, nvmlDevice_t, void*);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(temperature(device0(), nullptr), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(temperature(device0(), nullptr), NVML_ERROR_NOT_SUPPORTED);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string line = "vmcuda: nvmlDeviceGetTemperatureV is not supported yet; it returns NVML_ERROR_NOT_SUPPORTED (3)";
  const size_t at = err.find(line);
  EXPECT_NE(at, std::string::npos) << err;
  EXPECT_EQ(err.find(line, at + 1), std::string::npos) << "logged once: " << err;
}

TEST(Nvml, HandlesAfterShutdownAnswerUninitialized) {
  ASSERT_EQ(NVML(nvmlInit_v2, void)(), NVML_SUCCESS);
  nvmlDevice_t d = device0();
  ASSERT_EQ(NVML(nvmlShutdown, void)(), NVML_SUCCESS);
  unsigned index = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetIndex, nvmlDevice_t, unsigned*)(d, &index), NVML_ERROR_UNINITIALIZED);
  nvmlMemory_t m{};
  EXPECT_EQ(NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, nvmlMemory_t*)(d, &m), NVML_ERROR_UNINITIALIZED);
}

#endif  // VMCUDA_NVML_NO_HOST

}  // namespace
