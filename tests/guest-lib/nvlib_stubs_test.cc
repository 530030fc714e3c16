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

TEST(NvlibStubs, CurandVersionsAndUnsupportedCalls) {
  void* lib = open(VMCUDA_TEST_CURAND);
  ASSERT_NE(lib, nullptr);
  int version = 0;
  ASSERT_EQ(symbol<int (*)(int*)>(lib, "curandGetVersion")(&version), 0);
  EXPECT_GE(version, 10000);
  // Discrete distributions are not remoted: not supported, logged once.
  void* dist = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(symbol<int (*)(double, void**)>(lib, "curandCreatePoissonDistribution")(4.0, &dist), 999);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("curandCreatePoissonDistribution is not supported yet"), std::string::npos) << err;
  // A generator that was never made.
  int junk = 0;
  EXPECT_EQ(symbol<int (*)(void*, unsigned long long)>(lib, "curandSetPseudoRandomGeneratorSeed")(&junk, 1), 101);
}

#if defined(VMCUDA_TEST_CUSPARSE) && defined(VMCUDA_TEST_CUSOLVER)
TEST(NvlibStubs, CusparseAnswersTheMatrixDescriptorAndAnUnsupportedLegacyCall) {
  void* lib = open(VMCUDA_TEST_CUSPARSE);
  ASSERT_NE(lib, nullptr);
  EXPECT_STREQ(symbol<const char* (*)(int)>(lib, "cusparseGetErrorName")(3), "CUSPARSE_STATUS_INVALID_VALUE");
  EXPECT_STREQ(symbol<const char* (*)(int)>(lib, "cusparseGetErrorString")(10), "operation not supported");
  int major = 0;
  ASSERT_EQ(symbol<int (*)(int, int*)>(lib, "cusparseGetProperty")(0, &major), 0);
  EXPECT_EQ(major, 12);
  // A legacy call not remoted (csru2csr's info): CUSPARSE_STATUS_NOT_SUPPORTED, the
  // name logged once.
  void* csru2csr = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(symbol<int (*)(void**)>(lib, "cusparseCreateCsru2csrInfo")(&csru2csr), 10);
  EXPECT_EQ(symbol<int (*)(void**)>(lib, "cusparseCreateCsru2csrInfo")(&csru2csr), 10);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string line = "cusparseCreateCsru2csrInfo is not supported yet; it returns CUSPARSE_STATUS_NOT_SUPPORTED (10)";
  ASSERT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line, err.find(line) + 1), std::string::npos) << "logged twice: " << err;
  // The legacy matrix descriptor is answered here: the library's defaults, a setter's range
  // checked, a destroyed or never made one refused.
  void* descr = nullptr;
  ASSERT_EQ(symbol<int (*)(void**)>(lib, "cusparseCreateMatDescr")(&descr), 0);
  auto get_type = symbol<int (*)(const void*)>(lib, "cusparseGetMatType");
  auto set_type = symbol<int (*)(void*, int)>(lib, "cusparseSetMatType");
  auto set_base = symbol<int (*)(void*, int)>(lib, "cusparseSetMatIndexBase");
  EXPECT_EQ(get_type(descr), 0);  // CUSPARSE_MATRIX_TYPE_GENERAL
  EXPECT_EQ(symbol<int (*)(const void*)>(lib, "cusparseGetMatIndexBase")(descr), 0);
  EXPECT_EQ(set_type(descr, 3), 0);  // TRIANGULAR
  EXPECT_EQ(get_type(descr), 3);
  EXPECT_EQ(set_type(descr, 4), 3);  // no such type: invalid value, the old one kept
  EXPECT_EQ(set_base(descr, -1), 3);
  EXPECT_EQ(get_type(descr), 3);
  EXPECT_EQ(symbol<int (*)(void*)>(lib, "cusparseDestroyMatDescr")(descr), 0);
  EXPECT_EQ(symbol<int (*)(void*)>(lib, "cusparseDestroyMatDescr")(descr), 3);
  EXPECT_EQ(set_type(descr, 0), 3);
  // Objects that were never made: refused here (a handle: not initialized; a descriptor: invalid).
  int junk = 0, mode = 0;
  EXPECT_EQ(symbol<int (*)(void*, int*)>(lib, "cusparseGetPointerMode")(&junk, &mode), 1);
  EXPECT_EQ(symbol<int (*)(void*)>(lib, "cusparseDestroyDnVec")(&junk), 3);
}

TEST(NvlibStubs, CusolverVersionAndAnUnsupportedCall) {
  void* lib = open(VMCUDA_TEST_CUSOLVER);
  ASSERT_NE(lib, nullptr);
  int version = 0;
  ASSERT_EQ(symbol<int (*)(int*)>(lib, "cusolverGetVersion")(&version), 0);
  EXPECT_GE(version, 12000);
  testing::internal::CaptureStderr();
  EXPECT_EQ(symbol<int (*)(void**)>(lib, "cusolverSpCreate")(nullptr), 9);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cusolverSpCreate is not supported yet; it returns CUSOLVER_STATUS_NOT_SUPPORTED (9)"),
            std::string::npos) << err;
  int junk = 0;
  EXPECT_EQ(symbol<int (*)(void*, void*)>(lib, "cusolverDnSetStream")(&junk, nullptr), 1);  // never made
}
#endif

}  // namespace
