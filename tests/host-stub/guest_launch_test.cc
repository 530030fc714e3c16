// guest-lib's cudaLaunchCooperativeKernel and cudaLaunchKernelExC end to end: the real guest
// code (launch.cc, function.cc, host_objects.cc, module.cc, remote.cc) against vmcuda-stub in
// this process, on the test executor, over the local transport. What must be refused at the
// launch (a cooperative grid too large, attributes vmcuda does not forward, ids CUDA does not
// know) is refused there, without a round trip and without reaching the driver; the rest is
// queued like any launch. The tests share one client and one stub.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "guest-lib/fatbin_builder.h"
#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
namespace api = vmcuda::api;
namespace host = vmcuda::host;
namespace tst = vmcuda::testing;

cudaError_t last_error() { return vmcuda::guest::take_last_error(); }

// ---- the driver's launch entry points and occupancy, counted
host::DriverApi g_fake;
std::atomic<int> n_launch{0}, n_cooperative{0}, n_ex{0}, n_occupancy{0};
host::CUresult count_launch(host::CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned sh, host::CUstream s, void** p, void** e) {
  ++n_launch;
  return g_fake.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e);
}
host::CUresult count_cooperative(host::CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned sh, host::CUstream s, void** p) {
  ++n_cooperative;
  return g_fake.cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, sh, s, p);
}
host::CUresult count_ex(const host::CUlaunchConfig* c, host::CUfunction f, void** p, void** e) {
  ++n_ex;
  return g_fake.cuLaunchKernelEx(c, f, p, e);
}
host::CUresult count_occupancy(int* n, host::CUfunction f, int b, size_t s) {
  ++n_occupancy;
  return g_fake.cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, b, s);
}
host::CUresult count_occupancy_flags(int* n, host::CUfunction f, int b, size_t s, unsigned flags) {
  ++n_occupancy;
  return g_fake.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, b, s, flags);
}

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new host::test::GuestStubEnvironment(
    {0}, [](host::DriverApi& api) {
      g_fake = api;
      api.cuLaunchKernel = count_launch;
      api.cuLaunchCooperativeKernel = count_cooperative;
      api.cuLaunchKernelEx = count_ex;
      api.cuOccupancyMaxActiveBlocksPerMultiprocessor = count_occupancy;
      api.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags = count_occupancy_flags;
    }));

// tests/cuda/cooperative.cu's kernels, registered as nvcc's host code registers them.
char grid_sum_stub, bump_stub;  // host stubs: only their addresses matter
constexpr char kGridSum[] = "_Z8grid_sumPKiiPiS1_";
constexpr char kBump[] = "_Z9coop_bumpPiii";

class GuestLaunch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static std::vector<uint64_t> fatbin = [] {
      vmcuda_test::FatbinBuilder b;
      b.entry(vmcuda_test::EntrySpec{});
      return b.build();
    }();
    static vmcuda_test::Wrapper wrapper = vmcuda_test::wrap(fatbin);
    static bool done = false;
    if (done) return;
    done = true;
    void** h = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterFunction(h, &grid_sum_stub, const_cast<char*>(kGridSum), kGridSum, -1, nullptr, nullptr, nullptr,
                           nullptr, nullptr);
    __cudaRegisterFunction(h, &bump_stub, const_cast<char*>(kBump), kBump, -1, nullptr, nullptr, nullptr, nullptr,
                           nullptr);
    __cudaRegisterFatBinaryEnd(h);
  }
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    (void)last_error();
  }
};

// The most blocks a cooperative grid may have, as programs compute it.
int max_blocks(const void* func, int block) {
  int per_sm = 0, sms = 0;
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, block, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_GT(per_sm * sms, 0);
  return per_sm * sms;
}

struct Sum {
  int* in = nullptr;
  int* partial = nullptr;
  int* out = nullptr;
  int n = 0;
  void* args[4] = {&in, &n, &partial, &out};
  int expect = 0;
  Sum(int count, int blocks) : n(count) {
    std::vector<int> v(n);
    for (int i = 0; i < n; ++i) v[i] = i % 5 - 1, expect += v[i];
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), n * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&partial), (blocks + 1) * sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), sizeof(int)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(in, v.data(), n * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemset(out, 0xff, sizeof(int)), cudaSuccess);
  }
  ~Sum() {
    cudaFree(in);
    cudaFree(partial);
    cudaFree(out);
  }
  int result() const {
    int r = 0;
    EXPECT_EQ(cudaMemcpy(&r, out, sizeof r, cudaMemcpyDeviceToHost), cudaSuccess);
    return r;
  }
};

TEST_F(GuestLaunch, CooperativeKernelQueuedAndTooLargeGridsRefusedAtTheLaunch) {
  const int most = max_blocks(&grid_sum_stub, 256);
  Sum sum(10000, most);
  const int occupancy = n_occupancy, cooperative = n_cooperative;
  ASSERT_EQ(cudaLaunchCooperativeKernel(&grid_sum_stub, dim3(most), dim3(256), sum.args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaLaunchCooperativeKernel(&grid_sum_stub, dim3(most / 2), dim3(256), sum.args, 0, nullptr),
            cudaSuccess);
  EXPECT_EQ(n_cooperative, cooperative);  // queued: nothing reached the host yet
  EXPECT_EQ(sum.result(), sum.expect);
  EXPECT_EQ(n_cooperative, cooperative + 2);
  // The occupancy the program asked for answers the launches' check too: no more questions.
  EXPECT_EQ(n_occupancy, occupancy);
  // One block more: refused at once, as the last error too, and never sent.
  EXPECT_EQ(cudaLaunchCooperativeKernel(&grid_sum_stub, dim3(most + 1), dim3(256), sum.args, 0, nullptr),
            cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(last_error(), cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(last_error(), cudaSuccess);
  EXPECT_EQ(cudaLaunchCooperativeKernel_ptsz(&grid_sum_stub, dim3(most, 2), dim3(256), sum.args, 0, nullptr),
            cudaErrorCooperativeLaunchTooLarge);
  (void)last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(n_cooperative, cooperative + 2);
  // Another block size: its occupancy asked once, then kept.
  ASSERT_EQ(cudaLaunchCooperativeKernel(&grid_sum_stub, dim3(4), dim3(128), sum.args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaLaunchCooperativeKernel(&grid_sum_stub, dim3(4), dim3(128), sum.args, 0, nullptr), cudaSuccess);
  EXPECT_EQ(n_occupancy, occupancy + 1);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // The ordinary checks come first, as for any launch.
  EXPECT_EQ(cudaLaunchCooperativeKernel(&grid_sum_stub, dim3(1), dim3(2048), sum.args, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaLaunchCooperativeKernel(&sum, dim3(1), dim3(32), sum.args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  (void)last_error();
}

TEST_F(GuestLaunch, KernelExForwardsAttributesAndRefusesOthersAtTheLaunch) {
  const int n = 256;
  int* p = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(p, 0, n * sizeof(int)), cudaSuccess);
  int nn = n, by = 2;
  void* args[] = {&p, &nn, &by};
  cudaLaunchAttribute attrs[4] = {};
  attrs[0].id = cudaLaunchAttributeIgnore;
  attrs[1].id = cudaLaunchAttributePriority;
  attrs[1].val.priority = -2;
  attrs[2].id = cudaLaunchAttributeClusterDimension;
  attrs[2].val.clusterDim.x = 2;
  attrs[2].val.clusterDim.y = 1;
  attrs[2].val.clusterDim.z = 1;
  attrs[3].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attrs[3].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicyLoadBalancing;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(4);
  cfg.blockDim = dim3(64);
  cfg.attrs = attrs;
  cfg.numAttrs = 4;
  const int ex = n_ex;
  ASSERT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaSuccess);
  EXPECT_EQ(n_ex, ex);  // queued
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(n_ex, ex + 1);
  auto info = tst::fake_last_launch();
  EXPECT_TRUE(info.ex);
  EXPECT_EQ(info.attributes, 3u);  // the ignored entry stays in the guest
  EXPECT_EQ(info.priority, -2);
  EXPECT_EQ(info.cluster[0], 2u);
  EXPECT_EQ(info.cluster_policy, 2);
  std::vector<int> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<int>(n, 2));
  // Refused at once, and never sent: no configuration, attributes missing, ids CUDA does
  // not know, attributes vmcuda does not forward (events, memory windows), bad values.
  EXPECT_EQ(cudaLaunchKernelExC(nullptr, &bump_stub, args), cudaErrorInvalidValue);
  EXPECT_EQ(last_error(), cudaErrorInvalidValue);
  cfg.attrs = nullptr;
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaErrorInvalidValue);
  cfg.attrs = attrs;
  cfg.numAttrs = 1;
  for (int id : {15, 17, 99, -1}) {  // written as the int it is: an app may put anything there
    std::memcpy(&attrs[0].id, &id, sizeof id);
    EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaErrorInvalidValue) << "id " << id;
  }
  for (auto id : {cudaLaunchAttributeProgrammaticEvent, cudaLaunchAttributeLaunchCompletionEvent,
                  cudaLaunchAttributeAccessPolicyWindow, cudaLaunchAttributeMemSyncDomain}) {
    attrs[0].id = id;
    EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaErrorNotSupported) << "id " << id;
    EXPECT_EQ(last_error(), cudaErrorNotSupported);
  }
  attrs[0].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attrs[0].val.clusterSchedulingPolicyPreference = static_cast<cudaClusterSchedulingPolicy>(3);
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaErrorInvalidValue);
  // More attributes than CUDA has ids (repeats) beyond the wire's limit; ignored ones do not count.
  std::vector<cudaLaunchAttribute> many(40);
  for (size_t i = 0; i < many.size(); ++i) {
    many[i] = cudaLaunchAttribute{};
    many[i].id = i < 24 ? cudaLaunchAttributeIgnore : cudaLaunchAttributePriority;
  }
  cfg.attrs = many.data();
  cfg.numAttrs = 40;  // 16 priorities
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaSuccess);
  cfg.numAttrs = 24;  // ignored ones only: a plain launch
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaSuccess);
  many.resize(41, many.back());
  cfg.attrs = many.data();
  cfg.numAttrs = 41;  // 17 priorities
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, &bump_stub, args), cudaErrorInvalidValue);
  (void)last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(n_ex, ex + 3);
  ASSERT_EQ(cudaMemcpy(back.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<int>(n, 6));
  cudaFree(p);
}

TEST_F(GuestLaunch, KernelExCooperative) {
  const int most = max_blocks(&grid_sum_stub, 256);
  Sum sum(9000, most);
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 5;  // nonzero: cooperative
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(most);
  cfg.blockDim = dim3(256);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cfg.stream = s;
  ASSERT_EQ(cudaLaunchKernelExC_ptsz(&cfg, &grid_sum_stub, sum.args), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(tst::fake_last_launch().cooperative);
  EXPECT_EQ(sum.result(), sum.expect);
  const int ex = n_ex;
  cfg.gridDim = dim3(most + 1);
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, &grid_sum_stub, sum.args), cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(last_error(), cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(n_ex, ex);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
