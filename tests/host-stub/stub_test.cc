// vmcuda-stub's sessions end to end over the local transport, on the test executor.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "executor/fake_driver.h"
#include "session.h"
#include "support/temp_socket.h"
#include "vmcuda/api/remote.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"

namespace vmcuda::host {
namespace {

using vmrpc::wire::ChannelStatus;
namespace tst = vmcuda::testing;

struct Stub {
  DriverApi api;
  StubService service;
  vmrpc::HostEndpoint endpoint;
  explicit Stub(StubLimits limits = {})
      : service((tst::install_fake_driver(api), api), limits, {0}),
        endpoint({vmrpc::testing::temp_socket_path("stub"), vmrpc::RegionConfig{16ull << 20, 4, 256 << 10, 4096}, 8},
                 service) {
    endpoint.start();
  }
};

struct Client {
  std::unique_ptr<vmrpc::LocalConnection> conn;
  std::unique_ptr<vmrpc::ClientSlot> slot;
  explicit Client(Stub& s) {
    conn = vmrpc::LocalConnection::connect(s.endpoint.socket_path());
    std::string why;
    slot = vmrpc::ClientSlot::claim(conn->region(), *conn, &why);
    EXPECT_TRUE(slot) << why;
  }

  // One call through the generic path (api/remote.h).
  template <api::Call C>
  int32_t call(const typename api::CallTraits<C>::Args& args, typename api::CallTraits<C>::Reply* reply = nullptr,
               std::span<const std::byte> tail = {}, std::vector<std::byte>* extra = nullptr,
               uint32_t extra_capacity = 0) {
    auto r = api::remote<C>(*slot, args, tail, extra_capacity);
    if (reply) *reply = r.reply;
    if (extra) extra->assign(r.extra.begin(), r.extra.end());
    return r.status;
  }

  uint64_t malloc(uint64_t n) {
    api::PtrReply r{};
    EXPECT_EQ(call<api::Call::Malloc>({n}, &r), 0);
    return r.ptr;
  }
  void put(uint64_t dst, const std::vector<int>& v) {
    EXPECT_EQ(call<api::Call::CopyToDeviceInline>({dst}, nullptr, std::as_bytes(std::span(v))), 0);
  }
  std::vector<int> get(uint64_t src, size_t n, int32_t* status = nullptr) {
    std::vector<std::byte> extra;
    int32_t st = call<api::Call::CopyFromDeviceInline>({src, n * 4}, nullptr, {}, &extra, n * 4);
    if (status) *status = st;
    std::vector<int> v(extra.size() / 4);
    std::memcpy(v.data(), extra.data(), v.size() * 4);
    return v;
  }
};

TEST(Stub, HandshakeAndDevicePropertiesComeFromTheExecutor) {
  Stub s;
  Client c(s);
  api::HandshakeReply hs{};
  ASSERT_EQ(c.call<api::Call::Handshake>({}, &hs), 0);
  EXPECT_EQ(hs.device_count, 1);
  EXPECT_EQ(hs.driver_version, 13000);
  api::DevicePropertiesReply p{};
  ASSERT_EQ(c.call<api::Call::DeviceProperties>({0, 0}, &p), 0);
  EXPECT_STREQ(p.name, "vmcuda test executor");
  EXPECT_EQ(p.attributes[75], 9);
  EXPECT_EQ(p.attributes[1], 1024);
  EXPECT_EQ(p.uuid[0], 0xab);
  EXPECT_EQ(c.call<api::Call::DeviceProperties>({1, 0}, &p), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(c.call<api::Call::SetDevice>({-1, 0}), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
}

TEST(Stub, MemGetInfoShowsTheQuota) {
  StubLimits limits;
  limits.memory_quota = 64 << 20;
  Stub s(limits);
  Client c(s);
  c.malloc(16 << 20);
  api::MemInfoReply m{};
  ASSERT_EQ(c.call<api::Call::MemGetInfo>({}, &m), 0);
  EXPECT_EQ(m.total_bytes, 64u << 20);
  EXPECT_EQ(m.free_bytes, 48u << 20);
}

TEST(Stub, MallocCopyLaunchCopyBack) {
  Stub s;
  Client c(s);
  const uint64_t p = c.malloc(64 * 4);
  ASSERT_NE(p, 0u);
  std::vector<int> v(64);
  for (int i = 0; i < 64; ++i) v[i] = i * 10;
  c.put(p, v);
  // Ship a module and find the kernel with its parameter layout.
  auto image = c.slot->heap().allocate(64);
  ASSERT_TRUE(image);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
  api::HandleReply mod{};
  ASSERT_EQ(c.call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
  const std::string name = tst::kAddOneKernel;
  api::GetFunctionReply fn{};
  std::vector<std::byte> params;
  ASSERT_EQ(c.call<api::Call::ModuleGetFunction>({mod.handle, uint32_t(name.size()), 0}, &fn,
                                                  std::as_bytes(std::span(name)), &params, 1024),
            0);
  ASSERT_EQ(fn.param_count, 2u);
  ASSERT_EQ(params.size(), 2 * sizeof(api::ParamInfo));
  // Launch add_one(p, 64) with the arguments packed at the reported offsets.
  std::vector<std::byte> packed(12);
  int n = 64;
  std::memcpy(packed.data(), &p, 8);
  std::memcpy(packed.data() + 8, &n, 4);
  api::LaunchArgs la{fn.function, {1, 1, 1}, {64, 1, 1}, 0, 12, 0};
  ASSERT_EQ(c.call<api::Call::LaunchKernel>(la, nullptr, packed), 0);
  ASSERT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  auto back = c.get(p, 64);
  ASSERT_EQ(back.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[i], i * 10 + 1);
  // Launch errors: packed bytes that do not match, a forged handle.
  la.arg_bytes = 4;
  EXPECT_EQ(c.call<api::Call::LaunchKernel>(la, nullptr, std::span(packed).first(4)),
            static_cast<int32_t>(ChannelStatus::kBadArguments));
  la = api::LaunchArgs{99, {1, 1, 1}, {1, 1, 1}, 0, 12, 0};
  EXPECT_EQ(c.call<api::Call::LaunchKernel>(la, nullptr, packed), CUDA_ERROR_INVALID_HANDLE);
}

TEST(Stub, HeapCopiesBothWays) {
  Stub s;
  Client c(s);
  const uint64_t n = 1 << 20;
  const uint64_t p = c.malloc(n);
  auto in = c.slot->heap().allocate(n), out = c.slot->heap().allocate(n);
  ASSERT_TRUE(in && out);
  for (uint64_t i = 0; i < n; ++i) in->data[i] = std::byte(i * 13);
  ASSERT_EQ(c.call<api::Call::CopyToDeviceHeap>({p, in->ref()}), 0);
  ASSERT_EQ(c.call<api::Call::CopyFromDeviceHeap>({p, out->ref()}), 0);
  EXPECT_EQ(0, std::memcmp(in->data, out->data, n));
  EXPECT_EQ(c.call<api::Call::CopyToDeviceHeap>({p + 1, in->ref()}), CUDA_ERROR_INVALID_VALUE);  // past the end
  EXPECT_EQ(c.call<api::Call::CopyToDeviceHeap>({p, {~0ull, 8}}), static_cast<int32_t>(ChannelStatus::kBadHeapRef));
}

TEST(Stub, ClientsCannotTouchEachOthersMemory) {
  Stub s;
  Client a(s), b(s);
  const uint64_t pa = a.malloc(4096);
  a.put(pa, {1, 2, 3, 4});
  int32_t st = 0;
  b.get(pa, 4, &st);
  EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(b.call<api::Call::Free>({pa}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(b.call<api::Call::Memset>({pa, 16, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  const uint64_t pb = b.malloc(4096);
  EXPECT_EQ(b.call<api::Call::CopyDeviceToDevice>({pb, pa, 16}), CUDA_ERROR_INVALID_VALUE);
  auto v = a.get(pa, 4);
  EXPECT_EQ(v, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(a.call<api::Call::Free>({pa}), 0);
  EXPECT_EQ(a.call<api::Call::Free>({pa}), CUDA_ERROR_INVALID_VALUE);  // double free
}

TEST(Stub, BadArgumentsAndQuota) {
  StubLimits limits;
  limits.memory_quota = 1 << 20;
  Stub s(limits);
  Client c(s);
  api::PtrReply r{};
  EXPECT_EQ(c.call<api::Call::Malloc>({2 << 20}, &r), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(c.malloc(1 << 19), 0u);
  // A frame whose size does not match the call's struct.
  auto bad = c.slot->call(static_cast<uint32_t>(api::Call::Malloc), std::as_bytes(std::span("abc", 3)), 8);
  EXPECT_EQ(bad.status, static_cast<int32_t>(ChannelStatus::kBadArguments));
  auto image = c.slot->heap().allocate(16);
  std::memcpy(image->data, "not a module", 12);
  api::HandleReply mod{};
  EXPECT_EQ(c.call<api::Call::ModuleLoad>({image->ref()}, &mod), 200);
  EXPECT_EQ(c.call<api::Call::ModuleGetFunction>({7, 3, 0}, nullptr, std::as_bytes(std::span("abc", 3))),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST(Stub, EverythingAClientOwnedIsFreedWhenItDies) {
  Stub s;
  // The client is a child process that allocates, loads a module and dies without
  // cleaning up (_exit): the stub must free all of it.
  pid_t pid = fork();
  if (pid == 0) {
    Client c(s);
    c.malloc(1 << 20);
    c.malloc(4096);
    auto image = c.slot->heap().allocate(64);
    std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
    api::HandleReply mod{};
    const bool ok = c.call<api::Call::ModuleLoad>({image->ref()}, &mod) == 0 && tst::fake_live_modules() == 0;
    _exit(ok ? 0 : 1);  // (the fake's state lives in the parent: the child sees none of it)
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 0; i < 500 && tst::fake_live_contexts() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.endpoint.stats().slots_closed_total, 1u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_live_contexts(), 0u);
  EXPECT_EQ(tst::fake_live_modules(), 0u);
  for (int i = 0; i < 500 && tst::fake_pinned_ranges() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tst::fake_pinned_ranges(), 0u);  // the connection's heap was unpinned
}

TEST(Stub, EachConnectionsHeapIsPinnedWhileItLives) {
  Stub s;
  {
    Client a(s), b(s);
    EXPECT_EQ(tst::fake_pinned_ranges(), 2u);
  }
  for (int i = 0; i < 500 && tst::fake_pinned_ranges() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tst::fake_pinned_ranges(), 0u);
}

}  // namespace
}  // namespace vmcuda::host
