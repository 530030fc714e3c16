// guest-lib's libcudart.so.13 through its exported entry points, as an application calls
// them: the calls answered locally (docs/cuda-runtime-internals.md §7), the stubs of calls
// not remoted yet, the launch configuration stack, and the registration that nvcc's host
// code performs, fed a synthetic fatbin. The test binary links the built library (not
// NVIDIA's, which may be in the ldconfig cache: the first test checks).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <iterator>
#include <string>
#include <thread>

#include "guest-lib/fatbin_builder.h"
#include "vmcuda/cudart_api.h"

// Generated stubs (calls not remoted yet), declared with NVIDIA's signatures (cuda_runtime_api.h).
extern "C" cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags);
extern "C" cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count);

namespace {

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

TEST(Cudart, TheLoadedLibraryIsGuestLib) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&cudaGetErrorString), &info), 0);
  char loaded[PATH_MAX], built[PATH_MAX];
  ASSERT_NE(realpath(info.dli_fname, loaded), nullptr);
  // libcudart.so.13's exports are IFUNCs bound to their implementations in guest-lib's
  // libcuda.so.1, beside it (guest-lib/README.md).
  std::string cuda = VMCUDA_CUDART_PATH;
  cuda = cuda.substr(0, cuda.rfind('/') + 1) + "libcuda.so.1";
  ASSERT_NE(realpath(cuda.c_str(), built), nullptr);
  EXPECT_STREQ(loaded, built);
}

struct ErrorEntry {
  int value;
  const char* name;
  const char* string;
};
constexpr ErrorEntry kErrors[] = {
#define VMCUDA_CUDART_ERROR(name, value, string) {value, #name, string},
#include "vmcuda/cudart_errors.inc"
#undef VMCUDA_CUDART_ERROR
};

TEST(Cudart, ErrorNamesAndStringsAreNvidias) {
  for (const ErrorEntry& e : kErrors) {
    EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(e.value)), e.name);
    EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(e.value)), e.string);
  }
  EXPECT_EQ(std::size(kErrors), 134u);  // CUDA 13.0
  // A few spelled out, so that a broken generator cannot pass by itself.
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNotSupported), "operation not supported");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorApiFailureBase), "cudaErrorApiFailureBase");
  for (int unknown : {-1, 1000, 5000, 10001, 99999, INT_MAX, INT_MIN}) {
    EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(unknown)), "unrecognized error code");
    EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(unknown)), "unrecognized error code");
  }
  // Asking about an error is no error.
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

TEST(Cudart, RuntimeGetVersion) {
  int v = 0;
  EXPECT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaRuntimeGetVersion(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Two calls guest-lib does not remote (a library's unified functions, graphics interop): the
// generated stubs. Declared here as the real headers do (guest-lib's own header leaves them out).
extern "C" cudaError_t cudaLibraryGetUnifiedFunction(void** fptr, void* library, const char* symbol);
extern "C" cudaError_t cudaGraphicsUnmapResources(int count, void** resources, void* stream);

TEST(Cudart, UnsupportedCallReturns801AndLogsItsNameOnce) {
  void* p = reinterpret_cast<void*>(0x1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cudaLibraryGetUnifiedFunction(&p, nullptr, "x"), cudaErrorNotSupported);
  EXPECT_EQ(cudaGraphicsUnmapResources(1, &p, nullptr), cudaErrorNotSupported);
  EXPECT_EQ(cudaLibraryGetUnifiedFunction(&p, nullptr, "x"), cudaErrorNotSupported);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1));  // untouched
  EXPECT_EQ(count(err, "vmcuda: cudaLibraryGetUnifiedFunction is not supported yet; it returns cudaErrorNotSupported (801)\n"), 1u) << err;
  EXPECT_EQ(count(err, "vmcuda: cudaGraphicsUnmapResources is not supported yet; it returns cudaErrorNotSupported (801)\n"), 1u) << err;
  EXPECT_EQ(count(err, "not supported yet"), 2u) << err;
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(Cudart, LastErrorIsPerThreadPeekKeepsItGetClearsIt) {
  void* q = nullptr;
  EXPECT_EQ(cudaLibraryGetUnifiedFunction(&q, nullptr, "x"), cudaErrorNotSupported);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotSupported);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotSupported);
  cudaError_t other_first = cudaErrorUnknown, other_second = cudaErrorUnknown;
  std::thread t([&] {
    other_first = cudaGetLastError();
    cudaRuntimeGetVersion(nullptr);
    other_second = cudaGetLastError();
  });
  t.join();
  EXPECT_EQ(other_first, cudaSuccess);
  EXPECT_EQ(other_second, cudaErrorInvalidValue);
  // A success does not clear it either.
  int v;
  EXPECT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

TEST(Cudart, CreateChannelDesc) {
  cudaChannelFormatDesc d = cudaCreateChannelDesc(8, 16, 32, 0, cudaChannelFormatKindUnsigned);
  EXPECT_EQ(d.x, 8);
  EXPECT_EQ(d.y, 16);
  EXPECT_EQ(d.z, 32);
  EXPECT_EQ(d.w, 0);
  EXPECT_EQ(d.f, cudaChannelFormatKindUnsigned);
  d = cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);  // cudaCreateChannelDesc<float4>()
  EXPECT_EQ(d.w, 32);
  EXPECT_EQ(d.f, cudaChannelFormatKindFloat);
}

TEST(Cudart, CallConfigurationIsAPerThreadStack) {
  auto* s1 = reinterpret_cast<CUstream_st*>(0x1234);
  EXPECT_EQ(__cudaPushCallConfiguration(dim3(2, 3, 4), dim3(32), 128, s1), 0u);
  // k<<<...>>>(f()) where f launches too: pushed between the outer push and pop.
  EXPECT_EQ(__cudaPushCallConfiguration(dim3(1), dim3(1), 0, nullptr), 0u);
  dim3 grid, block;
  size_t shm = 99;
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x9);
  ASSERT_EQ(__cudaPopCallConfiguration(&grid, &block, &shm, &stream), cudaSuccess);
  EXPECT_EQ(grid.x, 1u);
  EXPECT_EQ(shm, 0u);
  EXPECT_EQ(stream, nullptr);

  // Another thread has its own (empty) stack.
  cudaError_t other = cudaSuccess;
  std::thread t([&] {
    dim3 g, b;
    size_t s;
    cudaStream_t st;
    other = __cudaPopCallConfiguration(&g, &b, &s, &st);
  });
  t.join();
  EXPECT_EQ(other, cudaErrorMissingConfiguration);

  ASSERT_EQ(__cudaPopCallConfiguration(&grid, &block, &shm, &stream), cudaSuccess);
  EXPECT_EQ(grid.x, 2u);
  EXPECT_EQ(grid.y, 3u);
  EXPECT_EQ(grid.z, 4u);
  EXPECT_EQ(block.x, 32u);
  EXPECT_EQ(block.y, 1u);
  EXPECT_EQ(block.z, 1u);
  EXPECT_EQ(shm, 128u);
  EXPECT_EQ(stream, reinterpret_cast<cudaStream_t>(s1));

  EXPECT_EQ(__cudaPopCallConfiguration(&grid, &block, &shm, &stream), cudaErrorMissingConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMissingConfiguration);
}

// Host stubs and shadows of a fake translation unit.
char kernel_add, kernel_tk, kernel_unregistered;
int dvar[4];
float cvar[16];
int* mvar_slot;

TEST(Cudart, RegistrationAsNvccDoesIt) {
  auto bin = vmcuda_test::typical_fatbin();
  auto wrapper = vmcuda_test::wrap(bin);
  void** h = __cudaRegisterFatBinary(&wrapper);
  ASSERT_NE(h, nullptr);
  char add_name[] = "_Z3addPif1Scx", tk_name[] = "_Z2tkIiEvPT_S0_";
  __cudaRegisterFunction(h, &kernel_add, add_name, add_name, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFunction(h, &kernel_tk, tk_name, tk_name, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  char dname[] = "dvar", cname[] = "cvar", mname[] = "mvar";
  __cudaRegisterVar(h, reinterpret_cast<char*>(dvar), dname, dname, 0, sizeof dvar, 0, 0);
  __cudaRegisterVar(h, reinterpret_cast<char*>(cvar), cname, cname, 0, sizeof cvar, 1, 0);
  __cudaRegisterManagedVar(h, reinterpret_cast<void**>(&mvar_slot), mname, mname, 0, 4, 0, 0);
  __cudaRegisterFatBinaryEnd(h);

  // __cudaGetKernel: a stable handle per kernel, an error for anything else.
  cudaKernel_t k1 = nullptr, k1_again = nullptr, k2 = nullptr;
  EXPECT_EQ(__cudaGetKernel(&k1, &kernel_add), cudaSuccess);
  EXPECT_EQ(__cudaGetKernel(&k1_again, &kernel_add), cudaSuccess);
  EXPECT_EQ(__cudaGetKernel(&k2, &kernel_tk), cudaSuccess);
  EXPECT_NE(k1, nullptr);
  EXPECT_EQ(k1, k1_again);
  EXPECT_NE(k1, k2);
  cudaKernel_t k3 = nullptr;
  EXPECT_EQ(cudaGetKernel(&k3, &kernel_add), cudaSuccess);
  EXPECT_EQ(k3, k1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaKernel_t none = nullptr;
  EXPECT_EQ(__cudaGetKernel(&none, &kernel_unregistered), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(__cudaGetKernel(nullptr, &kernel_add), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  // __cudaInitModule: with no host to bind the managed variable's shadow, it fails (0),
  // leaves the slot NULL, logs the variable and records cudaErrorNoDevice; once the slot
  // is filled it succeeds (1).
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(__cudaInitModule(h), 0);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(mvar_slot, nullptr);
  EXPECT_NE(err.find("mvar"), std::string::npos) << err;
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoDevice);
  int storage = 0;
  mvar_slot = &storage;
  EXPECT_EQ(__cudaInitModule(h), 1);
  mvar_slot = nullptr;

  __cudaUnregisterFatBinary(h);
  EXPECT_EQ(__cudaGetKernel(&none, &kernel_add), cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
}

TEST(Cudart, ModuleWithoutManagedVariablesInitializes) {
  auto bin = vmcuda_test::typical_fatbin();
  auto wrapper = vmcuda_test::wrap(bin);
  void** h = __cudaRegisterFatBinary(&wrapper);
  __cudaRegisterFatBinaryEnd(h);
  EXPECT_EQ(__cudaInitModule(h), 1);
  __cudaUnregisterFatBinary(h);
}

TEST(Cudart, RdcRegistrationWithRelocatableFatbins) {
  auto linked = vmcuda_test::typical_fatbin();
  auto a = vmcuda_test::typical_fatbin();
  auto b = vmcuda_test::typical_fatbin();
  void* list[] = {a.data(), b.data(), nullptr};
  auto wrapper = vmcuda_test::wrap(linked, 2, list);
  ::testing::internal::CaptureStderr();
  void** h = __cudaRegisterFatBinary(&wrapper);
  static char kernel_from_a, kernel_from_b;
  char na[] = "_Z1av", nb[] = "_Z1bv";
  __cudaRegisterFunction(h, &kernel_from_a, na, na, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFunction(h, &kernel_from_b, nb, nb, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(h);
  cudaKernel_t k;
  EXPECT_EQ(__cudaGetKernel(&k, &kernel_from_b), cudaSuccess);
  __cudaUnregisterFatBinary(h);
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("vmcuda: __cuda"), std::string::npos);
}

TEST(Cudart, UnknownFatbinsAndHandlesAreLoggedNeverFatal) {
  auto bin = vmcuda_test::typical_fatbin();
  auto wrapper = vmcuda_test::wrap(bin);
  wrapper.magic = 0x12345678;
  ::testing::internal::CaptureStderr();
  void** h = __cudaRegisterFatBinary(&wrapper);
  ASSERT_NE(h, nullptr);  // the application goes on registering
  static char kernel;
  char name[] = "_Z1kv";
  __cudaRegisterFunction(h, &kernel, name, name, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(h);

  void** null_wrapper = __cudaRegisterFatBinary(nullptr);
  __cudaRegisterFatBinaryEnd(null_wrapper);

  auto bad_fatbin = vmcuda_test::FatbinBuilder().build(0x0BADF00D);
  auto wrapper2 = vmcuda_test::wrap(bad_fatbin);
  void** h2 = __cudaRegisterFatBinary(&wrapper2);

  int not_a_handle = 0;
  void** bogus = reinterpret_cast<void**>(&not_a_handle);
  __cudaRegisterFunction(bogus, &kernel, name, name, -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterVar(bogus, reinterpret_cast<char*>(dvar), name, name, 0, 4, 0, 0);
  __cudaRegisterFatBinaryEnd(bogus);
  EXPECT_EQ(__cudaInitModule(bogus), 0);
  __cudaUnregisterFatBinary(bogus);
  __cudaUnregisterFatBinary(nullptr);
  __cudaRegisterUnifiedTable(h, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterUnifiedTable(h, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(__cudaGetProcAddress(), nullptr);
  std::string err = ::testing::internal::GetCapturedStderr();

  EXPECT_NE(err.find("vmcuda: __cudaRegisterFatBinary("), std::string::npos) << err;
  EXPECT_NE(err.find("unknown fatbin wrapper magic 0x12345678 (expected 0x466243b1)"), std::string::npos) << err;
  EXPECT_NE(err.find("null fatbin wrapper"), std::string::npos) << err;
  EXPECT_NE(err.find("fatbin: unknown fatbin magic 0x0badf00d (expected 0xba55ed50)"), std::string::npos) << err;
  EXPECT_NE(err.find("__cudaRegisterFunction: "), std::string::npos) << err;
  EXPECT_NE(err.find("is not a handle from __cudaRegisterFatBinary"), std::string::npos) << err;
  EXPECT_EQ(count(err, "__cudaRegisterUnifiedTable is not supported yet"), 1u) << err;

  // The kernel of the unparsable module is still known (its launch will fail later).
  cudaKernel_t k;
  EXPECT_EQ(__cudaGetKernel(&k, &kernel), cudaSuccess);
  __cudaUnregisterFatBinary(h);
  __cudaUnregisterFatBinary(null_wrapper);
  __cudaUnregisterFatBinary(h2);
}

}  // namespace

int main(int argc, char** argv) {
  // The log-once tests read warnings: at least level 1 (a higher one the caller chose stays).
  const char* level = getenv("VMCUDA_LOG");
  if (level == nullptr || atoi(level) < 1) setenv("VMCUDA_LOG", "1", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
