// cuLibraryGetKernelCount / cuLibraryEnumerateKernels (calls.def 0x1d02, ModuleKernelNames),
// cuLibraryGetManaged (ManagedVarBind with kManagedBindOnlyManaged), cuMemcpy3DPeer and cuMemcpyBatchAsync: the built libcuda.so.1, loaded with dlopen, against vmcuda-stub in this process
// on the test executor, whose modules hold the executor's kernels their image names.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "host-stub/guest_libcuda.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test {
namespace {

using Result = int;
using Handle = void*;

// A library's __managed__ variable: a heap shadow with the variable's initial value, the same
// each time, shared with the library's kernels at launches and synchronizations; a __device__
// variable or no variable is CUDA_ERROR_NOT_FOUND; gone with the library.
// (CountAndEnumerate's connection and context.)
void managed_variables() {
  const std::string image = std::string(tst::kFakeModuleMagic) + "\n.entry _Z12managed_bumpi(\n.param .u32 by\n)\n";
  Handle lib = nullptr;
  using LoadLibrary = Result (*)(Handle*, const void*, void*, void**, unsigned, void*, void**, unsigned);
  ASSERT_EQ(fn<LoadLibrary>("cuLibraryLoadData")(&lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), 0);
  auto get_managed = fn<Result (*)(unsigned long long*, size_t*, Handle, const char*)>("cuLibraryGetManaged");
  unsigned long long p = 0, again = 0;
  size_t bytes = 0;
  ASSERT_EQ(get_managed(&p, &bytes, lib, "m_counter"), 0);
  EXPECT_EQ(bytes, 4u);
  int* counter = reinterpret_cast<int*>(p);
  ASSERT_NE(counter, nullptr);
  EXPECT_EQ(*counter, 7);
  ASSERT_EQ(get_managed(&again, nullptr, lib, "m_counter"), 0);
  EXPECT_EQ(again, p);
  EXPECT_EQ(get_managed(&again, &bytes, lib, "d_table"), 500);  // a __device__ variable
  EXPECT_EQ(get_managed(&again, &bytes, lib, "nothing"), 500);
  EXPECT_EQ(get_managed(&again, &bytes, lib, nullptr), 1);
  EXPECT_EQ(get_managed(nullptr, nullptr, lib, "m_counter"), 1);
  EXPECT_EQ(get_managed(&again, &bytes, &bytes, "m_counter"), 500);  // not a library: nothing found
  // The CPU's write reaches the kernel, the kernel's adds the CPU after a synchronize.
  *counter = 100;
  Handle kernel = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, Handle, const char*)>("cuLibraryGetKernel")(&kernel, lib, "_Z12managed_bumpi"), 0);
  using Launch = Result (*)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle,
                            void**, void**);
  int by = 3;
  void* args[] = {&by};
  ASSERT_EQ(fn<Launch>("cuLaunchKernel")(kernel, 1, 1, 1, 2, 1, 1, 0, nullptr, args, nullptr), 0);
  ASSERT_EQ(fn<Result (*)()>("cuCtxSynchronize")(), 0);
  EXPECT_EQ(*counter, 106);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuLibraryUnload")(lib), 0);
  EXPECT_EQ(get_managed(&again, &bytes, lib, "m_counter"), 500);  // unloaded: NOT_FOUND, as NVIDIA's
}

TEST(GuestLibraryKernels, CountAndEnumerate) {
  ASSERT_NE(libcuda(), nullptr) << dlerror();
  Stub stub;
  setenv("VMCUDA_SOCKET", stub.endpoint.socket_path().c_str(), 1);
  ASSERT_EQ(fn<Result (*)(unsigned)>("cuInit")(0), 0);
  Handle primary = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, int)>("cuDevicePrimaryCtxRetain")(&primary, 0), 0);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuCtxSetCurrent")(primary), 0);

  // A PTX-like test image with two of the executor's kernels.
  const std::string image = std::string(tst::kFakeModuleMagic) +
                            "\n.entry _Z7add_onePii(\n.param .u64 p\n)\n.entry _Z9scale_addPiiii(\n)\n";
  Handle lib = nullptr;
  using LoadLibrary = Result (*)(Handle*, const void*, void*, void**, unsigned, void*, void**, unsigned);
  ASSERT_EQ(fn<LoadLibrary>("cuLibraryLoadData")(&lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), 0);
  auto count_of = fn<Result (*)(unsigned*, Handle)>("cuLibraryGetKernelCount");
  auto enumerate = fn<Result (*)(Handle*, unsigned, Handle)>("cuLibraryEnumerateKernels");
  auto name_of = fn<Result (*)(const char**, Handle)>("cuKernelGetName");
  unsigned count = 0;
  ASSERT_EQ(count_of(&count, lib), 0);
  EXPECT_EQ(count, 2u);
  std::vector<Handle> kernels(2, nullptr);
  ASSERT_EQ(enumerate(kernels.data(), 2, lib), 0);
  std::vector<std::string> names;
  for (Handle k : kernels) {
    const char* n = nullptr;
    ASSERT_EQ(name_of(&n, k), 0);
    names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"_Z7add_onePii", "_Z9scale_addPiiii"}));
  // The same handles cuLibraryGetKernel gives; a kernel enumerated launches as any other.
  Handle by_name = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, Handle, const char*)>("cuLibraryGetKernel")(&by_name, lib, "_Z7add_onePii"), 0);
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), by_name), kernels.end());
  // Fewer than there are: that many.
  Handle one[2] = {nullptr, nullptr};
  ASSERT_EQ(enumerate(one, 1, lib), 0);
  EXPECT_NE(one[0], nullptr);
  EXPECT_EQ(one[1], nullptr);
  // Errors: no output, a library that is not one.
  EXPECT_EQ(count_of(nullptr, lib), 1);
  EXPECT_EQ(enumerate(nullptr, 2, lib), 1);
  EXPECT_EQ(count_of(&count, &count), 400);
  EXPECT_EQ(enumerate(one, 1, &count), 400);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuLibraryUnload")(lib), 0);
  EXPECT_EQ(count_of(&count, lib), 400);

  managed_variables();

  // cuMemcpy3DPeer between contexts of one device (NULL: the current one): a 3D copy.
  struct Memcpy3DPeer {  // cuda.h's CUDA_MEMCPY3D_PEER
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void* srcHost;
    unsigned long long srcDevice;
    void* srcArray;
    Handle srcContext;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void* dstHost;
    unsigned long long dstDevice;
    void* dstArray;
    Handle dstContext;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
  };
  static_assert(sizeof(Memcpy3DPeer) == 200);
  auto alloc = fn<Result (*)(unsigned long long*, size_t)>("cuMemAlloc_v2");
  auto htod = fn<Result (*)(unsigned long long, const void*, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = fn<Result (*)(void*, unsigned long long, size_t)>("cuMemcpyDtoH_v2");
  auto peer = fn<Result (*)(const Memcpy3DPeer*)>("cuMemcpy3DPeer");
  unsigned long long a = 0, b = 0;
  ASSERT_EQ(alloc(&a, 64), 0);
  ASSERT_EQ(alloc(&b, 64), 0);
  unsigned char in[64], out[64];
  for (int i = 0; i < 64; ++i) in[i] = static_cast<unsigned char>(i);
  ASSERT_EQ(htod(a, in, 64), 0);
  std::memset(out, 0, sizeof out);
  ASSERT_EQ(htod(b, out, 64), 0);
  Memcpy3DPeer p{};
  p.srcMemoryType = p.dstMemoryType = 2;  // CU_MEMORYTYPE_DEVICE
  p.srcDevice = a;
  p.dstDevice = b;
  p.srcXInBytes = 2;
  p.srcY = 1;
  p.srcPitch = p.dstPitch = 8;
  p.srcHeight = p.dstHeight = 4;
  p.srcContext = primary;
  p.WidthInBytes = 4;
  p.Height = 2;
  p.Depth = 2;
  ASSERT_EQ(peer(&p), 0);
  ASSERT_EQ(dtoh(out, b, 64), 0);
  for (int z = 0; z < 2; ++z)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 8; ++x) {
        const int want = y < 2 && x < 4 ? in[z * 32 + (y + 1) * 8 + x + 2] : 0;
        EXPECT_EQ(out[z * 32 + y * 8 + x], want) << x << "," << y << "," << z;
      }
  // Batched copies through the driver: a -> b whole, then b's first 8 bytes -> a's last 8.
  Handle stream = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, unsigned)>("cuStreamCreate")(&stream, 1), 0);
  struct Attr {  // CUmemcpyAttributes
    int order;
    int src_loc[2], dst_loc[2];
    unsigned flags;
  } attr{1 /* stream order */, {}, {}, 0};
  static_assert(sizeof(Attr) == 24);
  unsigned long long dsts[] = {b, a + 56}, srcs[] = {a, b};
  size_t sizes[] = {64, 8}, idx = 0, fail = 5;
  auto batch = fn<Result (*)(unsigned long long*, unsigned long long*, size_t*, size_t, Attr*, size_t*, size_t,
                             size_t*, Handle)>("cuMemcpyBatchAsync");
  ASSERT_EQ(batch(dsts, srcs, sizes, 1, &attr, &idx, 1, &fail, stream), 0);
  ASSERT_EQ(batch(dsts + 1, srcs + 1, sizes + 1, 1, &attr, &idx, 1, &fail, stream), 0);
  EXPECT_EQ(fail, 5u);  // untouched on success
  ASSERT_EQ(fn<Result (*)(Handle)>("cuStreamSynchronize")(stream), 0);
  ASSERT_EQ(dtoh(out, a, 64), 0);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], i < 56 ? in[i] : in[i - 56]) << i;
  EXPECT_EQ(batch(dsts, srcs, sizes, 1, &attr, &idx, 1, &fail, nullptr), 1);  // the legacy stream
  EXPECT_EQ(fail, ~size_t{0});
  ASSERT_EQ(fn<Result (*)(Handle)>("cuStreamDestroy_v2")(stream), 0);

  p.dstContext = &count;  // not a context
  EXPECT_EQ(peer(&p), 201);  // CUDA_ERROR_INVALID_CONTEXT
  EXPECT_EQ(peer(nullptr), 1);

  // An image without kernels: none.
  const std::string empty = std::string(tst::kFakeModuleMagic) + "\n";
  ASSERT_EQ(fn<LoadLibrary>("cuLibraryLoadData")(&lib, empty.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), 0);
  ASSERT_EQ(count_of(&count, lib), 0);
  EXPECT_EQ(count, 0u);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuLibraryUnload")(lib), 0);
}

}  // namespace
}  // namespace vmcuda::host::test
