// guest-lib's libcuda.so.1 through its exports, without a host: cuGetProcAddress's choice
// of variant for every row of exports/libcuda.so.1.versions, the generated not-supported
// stubs, error names, calls before cuInit and cuInit without a stub; and libcudart.so.13's
// forwarding into libcuda.so.1.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0, kInvalidValue = 1, kNotInitialized = 3, kNoDevice = 100, kNotFound = 500,
                   kNotSupported = 801;
constexpr unsigned long long kLegacy = 1, kPerThread = 2;

void* libcuda() {
  static void* h = dlopen(VMCUDA_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  return h;
}
template <class F>
F fn(const char* name) {
  return reinterpret_cast<F>(dlsym(libcuda(), name));
}
using GetProc = CUresult (*)(const char*, void**, int, unsigned long long, int*);

struct Lookup {
  CUresult result;
  void* pfn;
  int status;
};
Lookup lookup(const char* name, int version, unsigned long long flags) {
  Lookup l{-1, reinterpret_cast<void*>(1), -1};
  l.result = fn<GetProc>("cuGetProcAddress_v2")(name, &l.pfn, version, flags, &l.status);
  return l;
}

TEST(DriverLocal, LoadsAndExportsTheDriverApi) {
  ASSERT_NE(libcuda(), nullptr) << dlerror();
  EXPECT_NE(dlsym(libcuda(), "cuInit"), nullptr);
  EXPECT_NE(dlsym(libcuda(), "cuMemAlloc_v2"), nullptr);
  EXPECT_EQ(dlsym(libcuda(), "cudaMalloc"), nullptr) << "runtime names stay libcudart.so.13's";
}

TEST(DriverLocal, ProcAddressPicksTheVariantOfTheVersion) {
  auto a = lookup("cuMemAlloc", 2000, 0);
  EXPECT_EQ(a.result, kSuccess);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuMemAlloc"));
  a = lookup("cuMemAlloc", 13000, 0);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuMemAlloc_v2"));
  EXPECT_EQ(a.status, 0);
  a = lookup("cuMemcpyHtoD", 13000, kPerThread);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuMemcpyHtoD_v2_ptds"));
  a = lookup("cuMemcpyHtoD", 13000, kLegacy);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuMemcpyHtoD_v2"));
  a = lookup("cuLaunchKernel", 13000, kPerThread);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuLaunchKernel_ptsz"));
  a = lookup("cuInit", 13000, kPerThread);  // no per-thread form: the plain one
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuInit"));
  a = lookup("cuCtxCreate", 12050, 0);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuCtxCreate_v4"));
  a = lookup("cuCtxCreate", 11000, 0);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuCtxCreate_v2"));
  a = lookup("cuGraphInstantiate", 12000, 0);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuGraphInstantiateWithFlags"));
  a = lookup("cuGraphInstantiate", 11000, 0);
  EXPECT_EQ(a.pfn, dlsym(libcuda(), "cuGraphInstantiate_v2"));
}

TEST(DriverLocal, ProcAddressRefusals) {
  // With a status to fill: CUDA_SUCCESS, the status says why there is no function (as
  // NVIDIA's driver answers, seen on the H100).
  auto a = lookup("cuMemAlloc", 1000, 0);
  EXPECT_EQ(a.result, kSuccess);
  EXPECT_EQ(a.pfn, nullptr);
  EXPECT_EQ(a.status, 2);  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
  a = lookup("cuNoSuchFunction", 13000, 0);
  EXPECT_EQ(a.result, kSuccess);
  EXPECT_EQ(a.pfn, nullptr);
  EXPECT_EQ(a.status, 1);  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  a = lookup("", 13000, 0);
  EXPECT_EQ(a.result, kSuccess);
  EXPECT_EQ(a.status, 1);
  a = lookup("cuInit", 13000, 4);  // an unknown flag
  EXPECT_EQ(a.result, kInvalidValue);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(fn<GetProc>("cuGetProcAddress_v2")(nullptr, &p, 13000, 0, nullptr), kInvalidValue);
  // Without one, a symbol not found is CUDA_ERROR_NOT_FOUND.
  EXPECT_EQ(fn<GetProc>("cuGetProcAddress_v2")("cuNoSuchFunction", &p, 13000, 0, nullptr), kNotFound);
  EXPECT_EQ(p, nullptr);
}

// Every row of the generated table: the query for its name at its version (per-thread for a
// per-thread row) is its symbol, and that symbol is exported.
TEST(DriverLocal, ProcAddressMatchesEveryRowOfTheTable) {
  std::ifstream in(VMCUDA_CUDA_VERSIONS);
  ASSERT_TRUE(in) << VMCUDA_CUDA_VERSIONS;
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string name, pt, symbol;
    int version = 0;
    f >> name >> version >> pt >> symbol;
    void* want = dlsym(libcuda(), symbol.c_str());
    ASSERT_NE(want, nullptr) << symbol;
    auto a = lookup(name.c_str(), version, pt == "-" ? kLegacy : kPerThread);
    EXPECT_EQ(a.pfn, want) << line;
    ++rows;
  }
  EXPECT_GT(rows, 600);
}

TEST(DriverLocal, UnsupportedStubsAnswer801) {
  using Any = CUresult (*)();
  for (const char* name : {"cuGraphAddBatchMemOpNode", "cuMemMapArrayAsync", "cuLibraryGetUnifiedFunction"}) {
    auto f = fn<Any>(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f(), kNotSupported) << name;
    EXPECT_EQ(f(), kNotSupported) << name;  // logged once, answered always
  }
  // The stub cuGetProcAddress hands out is the same function.
  auto a = lookup("cuGraphAddBatchMemOpNode", 13000, 0);
  ASSERT_NE(a.pfn, nullptr);
  EXPECT_EQ(reinterpret_cast<CUresult (*)()>(a.pfn)(), kNotSupported);
}

TEST(DriverLocal, ErrorNamesAndStrings) {
  using Get = CUresult (*)(CUresult, const char**);
  const char* s = nullptr;
  EXPECT_EQ(fn<Get>("cuGetErrorName")(0, &s), kSuccess);
  EXPECT_STREQ(s, "CUDA_SUCCESS");
  EXPECT_EQ(fn<Get>("cuGetErrorName")(801, &s), kSuccess);
  EXPECT_STREQ(s, "CUDA_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(fn<Get>("cuGetErrorString")(801, &s), kSuccess);
  EXPECT_STREQ(s, "operation not supported");
  EXPECT_EQ(fn<Get>("cuGetErrorName")(719, &s), kSuccess);
  EXPECT_STREQ(s, "CUDA_ERROR_LAUNCH_FAILED");
  EXPECT_EQ(fn<Get>("cuGetErrorName")(12345, &s), kInvalidValue);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(fn<Get>("cuGetErrorString")(0, nullptr), kInvalidValue);
}

TEST(DriverLocal, CallsBeforeCuInitAndCuInitWithoutAHost) {
  int n = -1;
  EXPECT_EQ(fn<CUresult (*)(int*)>("cuDeviceGetCount")(&n), kNotInitialized);
  EXPECT_EQ(fn<CUresult (*)(unsigned long long*, size_t)>("cuMemAlloc_v2")(nullptr, 8), kNotInitialized);
  int v = 0;
  EXPECT_EQ(fn<CUresult (*)(int*)>("cuDriverGetVersion")(&v), kSuccess) << "answered without cuInit";
  EXPECT_EQ(fn<CUresult (*)(unsigned)>("cuInit")(1), kInvalidValue);
  setenv("VMCUDA_SOCKET", "/nonexistent/vmcuda.sock", 1);
  setenv("VMCUDA_LOG", "0", 1);
  EXPECT_EQ(fn<CUresult (*)(unsigned)>("cuInit")(0), kNoDevice);
  EXPECT_EQ(fn<CUresult (*)(int*)>("cuDeviceGetCount")(&n), kNotInitialized);
}

// vmcuda's libcudart.so.13 binds each export to its implementation inside libcuda.so.1.
TEST(DriverLocal, LibcudartForwardsIntoLibcuda) {
  void* rt = dlopen(VMCUDA_CUDART_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(rt, nullptr) << dlerror();
  auto get_string = reinterpret_cast<const char* (*)(int)>(dlsym(rt, "cudaGetErrorString"));
  ASSERT_NE(get_string, nullptr);
  EXPECT_STREQ(get_string(1), "invalid argument");
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(get_string), &info), 0);
  EXPECT_NE(std::strstr(info.dli_fname, "libcuda.so.1"), nullptr) << info.dli_fname;
  auto stub = reinterpret_cast<int (*)()>(dlsym(rt, "cudaLibraryGetUnifiedFunction"));  // a runtime stub: 801 too
  ASSERT_NE(stub, nullptr);
  EXPECT_EQ(stub(), kNotSupported);
}

}  // namespace
