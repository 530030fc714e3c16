// The private export tables NVIDIA's libraries ask of libcuda.so.1 (docs/driver-export-tables.md):
// the built libcuda.so.1, loaded with dlopen, against vmcuda-stub in this process on the
// test executor. Tools TLS slot 2 gives the current context; the context-queries table
// (21318c60, 93 entries) gives its id (slot 4), its device's memory pool (51) and that
// pool's reuse policies as bits (39), as the driver answered cuSOLVER on the H100.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

#include "host-stub/guest_libcuda.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test {
namespace {

using Result = int;
using Handle = void*;

const void* const* table(const unsigned char (&uuid)[16]) {
  const void* t = nullptr;
  EXPECT_EQ(fn<Result (*)(const void**, const void*)>("cuGetExportTable")(&t, uuid), 0);
  return static_cast<const void* const*>(t);
}

TEST(GuestExportTables, ContextQueriesAnswerAsTheDriver) {
  ASSERT_NE(libcuda(), nullptr) << dlerror();
  Stub stub;
  setenv("VMCUDA_SOCKET", stub.endpoint.socket_path().c_str(), 1);
  ASSERT_EQ(fn<Result (*)(unsigned)>("cuInit")(0), 0);
  Handle primary = nullptr;
  ASSERT_EQ(fn<Result (*)(Handle*, int)>("cuDevicePrimaryCtxRetain")(&primary, 0), 0);
  ASSERT_EQ(fn<Result (*)(Handle)>("cuCtxSetCurrent")(primary), 0);

  constexpr unsigned char kToolsTls[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                           0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
  constexpr unsigned char kQueries[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                          0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
  const void* const* tls = table(kToolsTls);
  ASSERT_NE(tls, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tls[0]), 3 * sizeof(void*));
  Handle current = nullptr;
  ASSERT_EQ(reinterpret_cast<Result (*)(Handle*)>(tls[2])(&current), 0);
  EXPECT_EQ(current, primary);

  const void* const* q = table(kQueries);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q[0]), 93 * sizeof(void*));
  unsigned long long id = 0, same = 0;
  ASSERT_EQ(reinterpret_cast<Result (*)(Handle, unsigned long long*)>(q[4])(primary, &id), 0);
  ASSERT_EQ(fn<Result (*)(Handle, unsigned long long*)>("cuCtxGetId")(primary, &same), 0);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(id, same);

  Handle pool = nullptr, device_pool = nullptr;
  ASSERT_EQ(reinterpret_cast<Result (*)(Handle, unsigned, Handle*)>(q[51])(primary, 0, &pool), 0);
  ASSERT_EQ(fn<Result (*)(Handle*, int)>("cuDeviceGetMemPool")(&device_pool, 0), 0);
  EXPECT_EQ(pool, device_pool);
  uint64_t bits = 0;
  ASSERT_EQ(reinterpret_cast<Result (*)(Handle, Handle, uint64_t*)>(q[39])(primary, pool, &bits), 0);
  EXPECT_EQ(bits, 7u);  // every reuse policy on, as a new pool has them
  // A policy turned off shows (CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2).
  int off = 0;
  ASSERT_EQ(fn<Result (*)(Handle, int, void*)>("cuMemPoolSetAttribute")(pool, 2, &off), 0);
  ASSERT_EQ(reinterpret_cast<Result (*)(Handle, Handle, uint64_t*)>(q[39])(primary, pool, &bits), 0);
  EXPECT_EQ(bits, 5u);
  EXPECT_EQ(reinterpret_cast<Result (*)(Handle, unsigned, Handle*)>(q[51])(primary, 1, &pool), 1);  // unknown flags
  // Slots not understood are logging stubs that answer 801, never NULL.
  EXPECT_EQ(reinterpret_cast<Result (*)()>(q[3])(), 801);
  EXPECT_EQ(reinterpret_cast<Result (*)()>(q[92])(), 801);
}

}  // namespace
}  // namespace vmcuda::host::test
