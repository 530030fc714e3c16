// vmcuda-stub's cooperative launches (LaunchCooperativeKernel, 0x1401) and launches with
// attributes (LaunchKernelEx, 0x1402; host-stub/src/launch.cc) through the generic call
// path, on the test executor: what reaches the driver, and what a hostile guest's frames get.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gpu_worker.h"
#include "host-stub/stub_fixture.h"

namespace vmcuda::host::test {
namespace {

using vmrpc::wire::ChannelStatus;
constexpr int32_t kBad = static_cast<int32_t>(ChannelStatus::kBadArguments);

// tests/cuda/cooperative.cu's kernels, as the executor knows them.
constexpr char kGridSum[] = "_Z8grid_sumPKiiPiS1_";  // (const int* in, int n, int* partial, int* out)
constexpr char kBump[] = "_Z9coop_bumpPiii";         // (int* p, int n, int by): p[i] += by

uint64_t load_function(Client& c, const std::string& name) {
  auto image = c.slot->heap().allocate(64);
  EXPECT_TRUE(image);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
  api::HandleReply mod{};
  EXPECT_EQ(c.call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
  c.slot->heap().free(image->offset);
  api::GetFunctionReply fn{};
  std::vector<std::byte> params;
  EXPECT_EQ(c.call<api::Call::ModuleGetFunction>({mod.handle, uint32_t(name.size()), 0}, &fn,
                                                  std::as_bytes(std::span(name)), &params, 1024),
            0);
  return fn.function;
}

template <class... T>
std::vector<std::byte> pack(const T&... v) {
  std::vector<std::byte> out;
  auto put = [&](const auto& x) {
    const size_t at = (out.size() + sizeof x - 1) / sizeof x * sizeof x;  // natural alignment
    out.resize(at + sizeof x);
    std::memcpy(out.data() + at, &x, sizeof x);
  };
  (put(v), ...);
  return out;
}

// LaunchKernelEx's tail: the attributes, then the packed parameters.
std::vector<std::byte> ex_tail(const std::vector<api::LaunchAttribute>& attrs, const std::vector<std::byte>& params) {
  std::vector<std::byte> t(attrs.size() * sizeof(api::LaunchAttribute));
  if (!attrs.empty()) std::memcpy(t.data(), attrs.data(), t.size());
  t.insert(t.end(), params.begin(), params.end());
  return t;
}
api::LaunchExArgs ex_args(uint64_t fn, uint32_t grid, uint32_t block, size_t attrs, size_t arg_bytes,
                          uint64_t stream = 0) {
  return api::LaunchExArgs{fn, {grid, 1, 1}, {block, 1, 1}, 0, uint32_t(arg_bytes), stream, uint32_t(attrs), 0};
}

// The most blocks a cooperative grid of `fn` may have (the executor's 132 multiprocessors).
uint32_t max_cooperative(Client& c, uint64_t fn, int block) {
  api::OccupancyReply r{};
  EXPECT_EQ(c.call<api::Call::OccupancyMaxActiveBlocks>({fn, block, 0, 0}, &r), 0);
  EXPECT_GT(r.blocks, 0);
  return uint32_t(r.blocks) * 132;
}

struct Sum {
  uint64_t in, partial, out;
  int n;
  std::vector<std::byte> args() const { return pack(in, n, partial, out); }
};
Sum make_sum(Client& c, int n, uint32_t max_blocks) {
  Sum s{c.malloc(n * 4), c.malloc((max_blocks + 1) * 4), c.malloc(4), n};
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i % 7 - 2;
  c.put(s.in, v);
  c.put(s.out, {-1});
  return s;
}
int expected_sum(int n) {
  int t = 0;
  for (int i = 0; i < n; ++i) t += i % 7 - 2;
  return t;
}

TEST(StubLaunch, CooperativeKernelRunsOnEveryCoResidentBlockAndNoMore) {
  Stub s;
  Client c(s);
  const uint64_t fn = load_function(c, kGridSum);
  const uint32_t most = max_cooperative(c, fn, 256);
  const Sum sum = make_sum(c, 10000, most);
  const auto args = sum.args();
  ASSERT_EQ(args.size(), 32u);
  EXPECT_EQ(c.call<api::Call::LaunchCooperativeKernel>({fn, {most, 1, 1}, {256, 1, 1}, 0, 32, 0}, nullptr, args), 0);
  EXPECT_TRUE(tst::fake_last_launch().cooperative);
  EXPECT_FALSE(tst::fake_last_launch().ex);
  EXPECT_EQ(c.get(sum.out, 1), std::vector<int>{expected_sum(10000)});
  // One block more than can be co-resident; the kernel does not run.
  c.put(sum.out, {-1});
  EXPECT_EQ(c.call<api::Call::LaunchCooperativeKernel>({fn, {most + 1, 1, 1}, {256, 1, 1}, 0, 32, 0}, nullptr, args),
            CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  EXPECT_EQ(c.get(sum.out, 1), std::vector<int>{-1});
  // Batched (the guest's lazy queue): the error comes with the batch's result.
  auto f = c.queue<api::Call::LaunchCooperativeKernel>({fn, {most + 1, 1, 1}, {256, 1, 1}, 0, 32, 0}, args);
  ASSERT_EQ(c.flush(), ChannelStatus::kOk);
  EXPECT_EQ(c.status(f), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  // The same frame checks as LaunchKernel's: packed bytes that do not match, a forged
  // handle, a stream never created, parameters past the packed bytes.
  EXPECT_EQ(c.call<api::Call::LaunchCooperativeKernel>({fn, {1, 1, 1}, {256, 1, 1}, 0, 32, 0}, nullptr,
                                                        std::span(args).first(16)),
            kBad);
  EXPECT_EQ(c.call<api::Call::LaunchCooperativeKernel>({fn + 1000, {1, 1, 1}, {256, 1, 1}, 0, 32, 0}, nullptr, args),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(c.call<api::Call::LaunchCooperativeKernel>({fn, {1, 1, 1}, {256, 1, 1}, 0, 32, 77}, nullptr, args),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(c.call<api::Call::LaunchCooperativeKernel>({fn, {1, 1, 1}, {256, 1, 1}, 0, 16, 0}, nullptr,
                                                        std::span(args).first(16)),
            kBad);
  EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
}

TEST(StubLaunch, KernelExForwardsTheAttributesItKnows) {
  Stub s;
  Client c(s);
  const uint64_t fn = load_function(c, kBump);
  const uint64_t p = c.malloc(64 * 4);
  c.put(p, std::vector<int>(64, 1));
  const auto args = pack(p, 64, 10);
  ASSERT_EQ(args.size(), 16u);
  std::vector<api::LaunchAttribute> attrs = {
      {0, {7, 7, 7}, 0},  // cudaLaunchAttributeIgnore: whatever it holds, not passed on
      {api::kLaunchAttrPriority, {uint32_t(-3), 0, 0}, 0},
      {api::kLaunchAttrClusterDimension, {2, 1, 1}, 0},
      {api::kLaunchAttrClusterSchedulingPolicy, {1, 0, 0}, 0},
      {api::kLaunchAttrProgrammaticSerialization, {1, 0, 0}, 0},
  };
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 4, 16, attrs.size(), args.size()), nullptr,
                                              ex_tail(attrs, args)),
            0);
  auto info = tst::fake_last_launch();
  EXPECT_TRUE(info.ex);
  EXPECT_EQ(info.attributes, 4u);
  EXPECT_FALSE(info.cooperative);
  EXPECT_EQ(info.priority, -3);
  EXPECT_EQ(info.cluster[0], 2u);
  EXPECT_EQ(info.cluster[1], 1u);
  EXPECT_EQ(info.cluster_policy, 1);
  EXPECT_TRUE(info.programmatic_serialization);
  EXPECT_EQ(c.get(p, 64), std::vector<int>(64, 11));
  // No attributes: a plain launch through cuLaunchKernelEx. A priority past the device's range
  // is the driver's to clamp.
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 4, 16, 0, args.size()), nullptr, args), 0);
  EXPECT_EQ(tst::fake_last_launch().attributes, 0u);
  attrs = {{api::kLaunchAttrPriority, {uint32_t(-100), 0, 0}, 0}};
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 4, 16, 1, args.size()), nullptr, ex_tail(attrs, args)), 0);
  EXPECT_EQ(tst::fake_last_launch().priority, -5);
  EXPECT_EQ(c.get(p, 64), std::vector<int>(64, 31));
  // A cluster that does not divide the grid: the driver's error.
  attrs = {{api::kLaunchAttrClusterDimension, {3, 1, 1}, 0}};
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 4, 16, 1, args.size()), nullptr, ex_tail(attrs, args)),
            912);  // CUDA_ERROR_INVALID_CLUSTER_SIZE
}

TEST(StubLaunch, KernelExCooperativeAttribute) {
  Stub s;
  Client c(s);
  const uint64_t fn = load_function(c, kGridSum);
  const uint32_t most = max_cooperative(c, fn, 256);
  const Sum sum = make_sum(c, 5000, most);
  const auto args = sum.args();
  const std::vector<api::LaunchAttribute> attrs = {{api::kLaunchAttrCooperative, {1, 0, 0}, 0}};
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, most, 256, 1, args.size()), nullptr, ex_tail(attrs, args)),
            0);
  EXPECT_TRUE(tst::fake_last_launch().cooperative);
  EXPECT_EQ(c.get(sum.out, 1), std::vector<int>{expected_sum(5000)});
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, most + 1, 256, 1, args.size()), nullptr,
                                              ex_tail(attrs, args)),
            CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
}

TEST(StubLaunch, KernelExRefusesWhatTheGuestMustNotSend) {
  Stub s;
  Client c(s);
  const uint64_t fn = load_function(c, kBump);
  const uint64_t p = c.malloc(64 * 4);
  c.put(p, std::vector<int>(64, 0));
  const auto args = pack(p, 64, 1);
  auto one = [&](api::LaunchAttribute a) {
    return c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 1, args.size()), nullptr, ex_tail({a}, args));
  };
  // Malformed frames: more attributes than the limit, a tail of another size, the pad set.
  std::vector<api::LaunchAttribute> many(api::kMaxLaunchAttributes + 1, api::LaunchAttribute{0, {0, 0, 0}, 0});
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, many.size(), args.size()), nullptr,
                                              ex_tail(many, args)),
            kBad);
  many.resize(api::kMaxLaunchAttributes);  // the limit itself: ignored entries, a launch
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, many.size(), args.size()), nullptr,
                                              ex_tail(many, args)),
            0);
  const std::vector<api::LaunchAttribute> prio = {{api::kLaunchAttrPriority, {0, 0, 0}, 0}};
  auto tail = ex_tail(prio, args);
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 2, args.size()), nullptr, tail), kBad);
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 1, args.size() + 8), nullptr, tail), kBad);
  tail.pop_back();
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 1, args.size()), nullptr, tail), kBad);
  auto padded = ex_args(fn, 1, 64, 1, args.size());
  padded.pad = 1;
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(padded, nullptr, ex_tail(prio, args)), kBad);
  // Attribute counts that overflow: 0xffffffff attributes.
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 0xffffffffu, args.size()), nullptr,
                                              ex_tail(prio, args)),
            kBad);
  // Parameters past the packed bytes (arg_bytes smaller than the kernel's).
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 1, 8), nullptr,
                                              ex_tail(prio, std::vector<std::byte>(args.begin(), args.begin() + 8))),
            kBad);
  // Ids CUDA does not know.
  EXPECT_EQ(one({15, {0, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({99, {0, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({0xffffffffu, {0, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({32, {0, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);  // past the refused ids' bit mask
  // Ids CUDA knows and vmcuda does not forward (events, memory windows, ...).
  for (uint32_t id : {1u, 3u, 7u, 9u, 10u, 11u, 12u, 13u, 14u, 16u})
    EXPECT_EQ(one({id, {0, 0, 0}, 0}), CUDA_ERROR_NOT_SUPPORTED) << "id " << id;
  // Values out of their range, unused fields set, the reserved word set.
  EXPECT_EQ(one({api::kLaunchAttrCooperative, {2, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrCooperative, {1, 1, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrPriority, {0, 0, 5}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrClusterDimension, {0, 1, 1}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrClusterDimension, {1, 1, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrClusterSchedulingPolicy, {3, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrProgrammaticSerialization, {0xffffffffu, 0, 0}, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(one({api::kLaunchAttrPriority, {0, 0, 0}, 1}), CUDA_ERROR_INVALID_VALUE);
  // Forged handles.
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn + 1000, 1, 64, 1, args.size()), nullptr,
                                              ex_tail(prio, args)),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(fn, 1, 64, 1, args.size(), 0x99), nullptr, ex_tail(prio, args)),
            CUDA_ERROR_INVALID_HANDLE);
  // Only the launch at the limit ran.
  EXPECT_EQ(c.get(p, 64), std::vector<int>(64, 1));
}

TEST(StubLaunch, BothGoThroughTheGpuWorkingThread) {
  StubLimits limits;
  limits.gpu_threads = true;
  Stub s(limits);
  Client c(s);
  const uint64_t sum_fn = load_function(c, kGridSum), bump = load_function(c, kBump);
  const uint32_t most = max_cooperative(c, sum_fn, 256);
  const Sum sum = make_sum(c, 3000, most);
  const auto sargs = sum.args();
  ASSERT_EQ(c.call<api::Call::LaunchCooperativeKernel>({sum_fn, {8, 1, 1}, {256, 1, 1}, 0, 32, 0}, nullptr, sargs), 0);
  EXPECT_EQ(c.get(sum.out, 1), std::vector<int>{expected_sum(3000)});
  EXPECT_EQ(tst::fake_last_launch_thread(), GpuWorker::of(0).thread_id());
  const uint64_t p = c.malloc(16 * 4);
  c.put(p, std::vector<int>(16, 0));
  const auto bargs = pack(p, 16, 3);
  const std::vector<api::LaunchAttribute> attrs = {{api::kLaunchAttrPriority, {uint32_t(-1), 0, 0}, 0}};
  ASSERT_EQ(c.call<api::Call::LaunchKernelEx>(ex_args(bump, 1, 16, 1, bargs.size()), nullptr, ex_tail(attrs, bargs)),
            0);
  EXPECT_EQ(c.get(p, 16), std::vector<int>(16, 3));
  EXPECT_EQ(tst::fake_last_launch_thread(), GpuWorker::of(0).thread_id());
  // The working thread's errors come with a later call (SlotControl::late_status).
  ASSERT_EQ(c.call<api::Call::LaunchCooperativeKernel>({sum_fn, {most + 1, 1, 1}, {256, 1, 1}, 0, 32, 0}, nullptr,
                                                        sargs),
            0);
  EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(c.slot->take_late_status(), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
}

}  // namespace
}  // namespace vmcuda::host::test
