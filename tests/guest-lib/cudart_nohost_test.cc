// guest-lib's device area when no vmcuda-stub can be reached (VMCUDA_SOCKET names nothing):
// what NVIDIA's library does on a machine without a GPU (no device: cudaErrorNoDevice,
// zero devices, driver version 0), plus one message that says what to do. The library
// connects once per process; this program never has a stub.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "vmcuda/cudart_api.h"

namespace {

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

std::string g_socket;

// One test: the first call is the one that tries to connect and logs.
TEST(NoHost, EveryCallSaysNoDeviceAndTheReasonIsLoggedOnce) {
  ::testing::internal::CaptureStderr();
  int n = 7;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  n = 7;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);  // again: the answer does not change
  EXPECT_EQ(n, 0);

  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaErrorNoDevice);
  EXPECT_EQ(cudaSetDevice(0), cudaErrorNoDevice);
  cudaDeviceProp p;
  EXPECT_EQ(cudaGetDeviceProperties(&p, 0), cudaErrorNoDevice);
  int v = -1;
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0), cudaErrorNoDevice);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorNoDevice);
  size_t f = 0, t = 0;
  EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaErrorNoDevice);
  EXPECT_EQ(cudaDeviceReset(), cudaErrorNoDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNoDevice);
  // Documented: "If no driver is installed, then 0 is returned as the driver version".
  v = -1;
  EXPECT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(cudaDriverGetVersion(nullptr), cudaErrorInvalidValue);
  // The missing host comes before the arguments, as NVIDIA's missing driver does.
  EXPECT_EQ(cudaGetDeviceCount(nullptr), cudaErrorNoDevice);
  EXPECT_EQ(cudaDeviceGetAttribute(nullptr, cudaDevAttrMaxThreadsPerBlock, 0), cudaErrorNoDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoDevice);
  // Not sticky (a deviation: NVIDIA's cudaGetLastError keeps returning its init error).
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "vmcuda: no GPU: "), 1u) << err;
  EXPECT_NE(err.find(g_socket), std::string::npos) << "the message names the socket it tried: " << err;
  EXPECT_NE(err.find("vmcuda-run"), std::string::npos) << err;
  EXPECT_NE(err.find("VMCUDA_SOCKET"), std::string::npos) << err;
  EXPECT_EQ(count(err, "\n"), 1u) << "one line in all: " << err;
}

}  // namespace

int main(int argc, char** argv) {
  g_socket = "/tmp/vmcuda-no-such-stub-" + std::to_string(getpid()) + ".sock";
  setenv("VMCUDA_SOCKET", g_socket.c_str(), 1);
  setenv("VMCUDA_LOG", "1", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
