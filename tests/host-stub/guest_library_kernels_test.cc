// cuLibraryGetKernelCount / cuLibraryEnumerateKernels (calls.def 0x1d02, ModuleKernelNames): the
// built libcuda.so.1, loaded with dlopen, against vmcuda-stub in this process on the test
// executor, whose modules hold the executor's kernels their image names.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host-stub/guest_libcuda.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test {
namespace {

using Result = int;
using Handle = void*;

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

  // An image without kernels: none.
  const std::string empty = std::string(tst::kFakeModuleMagic) + "\n";
  ASSERT_EQ(fn<LoadLibrary>("cuLibraryLoadData")(&lib, empty.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), 0);
  ASSERT_EQ(count_of(&count, lib), 0);
  EXPECT_EQ(count, 0u);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuLibraryUnload")(lib), 0);
}

}  // namespace
}  // namespace vmcuda::host::test
