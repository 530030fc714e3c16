// vmcuda's libcufft.so.12 and libcurand.so.10 as a program loads them (dlopen of the built
// libraries): what the guest answers itself (versions) and the exports that are not remoted,
// which answer the library's not-supported status and log their name once. No host is needed.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

namespace {

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

void* open(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << dlerror();
  return lib;
}

TEST(NvlibStubs, CufftVersionsAndAnUnsupportedCallback) {
  void* lib = open(VMCUDA_TEST_CUFFT);
  ASSERT_NE(lib, nullptr);
  int version = 0, major = -1;
  ASSERT_EQ(symbol<int (*)(int*)>(lib, "cufftGetVersion")(&version), 0);
  EXPECT_GE(version, 12000);
  ASSERT_EQ(symbol<int (*)(int, int*)>(lib, "cufftGetProperty")(0, &major), 0);
  EXPECT_EQ(major, version / 1000);
  EXPECT_EQ(symbol<int (*)(int*)>(lib, "cufftGetVersion")(nullptr), 4);  // CUFFT_INVALID_VALUE
  // Callbacks: CUFFT_NOT_SUPPORTED, the name logged once.
  auto set_callback = symbol<int (*)(int, void**, int, void**)>(lib, "cufftXtSetCallback");
  ASSERT_NE(set_callback, nullptr);
  testing::internal::CaptureStderr();
  EXPECT_EQ(set_callback(1, nullptr, 0, nullptr), 16);
  EXPECT_EQ(set_callback(1, nullptr, 0, nullptr), 16);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string line = "cufftXtSetCallback is not supported yet; it returns CUFFT_NOT_SUPPORTED (16)";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line, err.find(line) + 1), std::string::npos) << "logged twice: " << err;
  // A plan that was never made: refused here, no host needed.
  EXPECT_EQ(symbol<int (*)(int, int)>(lib, "cufftSetAutoAllocation")(77, 0), 1);  // CUFFT_INVALID_PLAN
}

TEST(NvlibStubs, CurandVersionsAndHostGenerators) {
  void* lib = open(VMCUDA_TEST_CURAND);
  ASSERT_NE(lib, nullptr);
  int version = 0;
  ASSERT_EQ(symbol<int (*)(int*)>(lib, "curandGetVersion")(&version), 0);
  EXPECT_GE(version, 10000);
  // Host generators run NVIDIA's code on the CPU: not supported, logged once.
  void* g = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(symbol<int (*)(void**, int)>(lib, "curandCreateGeneratorHost")(&g, 101), 999);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("curandCreateGeneratorHost is not supported yet"), std::string::npos) << err;
  // A generator that was never made.
  int junk = 0;
  EXPECT_EQ(symbol<int (*)(void*, unsigned long long)>(lib, "curandSetPseudoRandomGeneratorSeed")(&junk, 1), 101);
}

}  // namespace
