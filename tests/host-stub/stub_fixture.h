// vmcuda-stub in this process on the test executor, and a client of it over the local
// transport (the generic call path of api/remote.h). Shared by the host-stub tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "executor/fake_driver.h"
#include "session.h"
#include "support/temp_socket.h"
#include "vmcuda/api/remote.h"
#include "vmrpc/client.h"
#include "vmrpc/host_endpoint.h"

namespace vmcuda::host::test {

namespace tst = vmcuda::testing;

struct Stub {
  DriverApi api;
  StubService service;
  vmrpc::HostEndpoint endpoint;
  explicit Stub(StubLimits limits = {}, std::vector<int> devices = {0})
      : service((tst::install_fake_driver(api), api), limits, [devices] { return devices; }),
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

  // Appends a call to the slot's batch without sending it (as the guest's lazy queue
  // does); flush() sends the batch, status() reads a queued call's result after it.
  template <api::Call C>
  vmrpc::FrameRef queue(const typename api::CallTraits<C>::Args& args, std::span<const std::byte> tail = {},
                        uint32_t reply_capacity = 0) {
    using A = typename api::CallTraits<C>::Args;
    constexpr size_t kA = std::is_empty_v<A> ? 0 : sizeof(A);
    auto f = slot->batch().append(static_cast<uint32_t>(C), static_cast<uint32_t>(kA + tail.size()), reply_capacity);
    EXPECT_TRUE(f);
    if (kA) std::memcpy(slot->batch().args(*f), &args, kA);
    if (!tail.empty()) std::memcpy(slot->batch().args(*f) + kA, tail.data(), tail.size());
    return *f;
  }
  vmrpc::wire::ChannelStatus flush() { return slot->flush(); }
  int32_t status(vmrpc::FrameRef f) const { return slot->result(f).status; }

  uint64_t malloc(uint64_t n) {
    api::PtrReply r{};
    EXPECT_EQ(call<api::Call::Malloc>({n}, &r), 0);
    return r.ptr;
  }
  void put(uint64_t dst, const std::vector<int>& v) {
    EXPECT_EQ(call<api::Call::CopyToDeviceInline>({dst}, nullptr, std::as_bytes(std::span(v))), 0);
  }
  // Ships a fake module and returns the function handle of tst::kAddOneKernel.
  uint64_t load_add_one() {
    auto image = slot->heap().allocate(64);
    EXPECT_TRUE(image);
    std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
    api::HandleReply mod{};
    EXPECT_EQ(call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
    slot->heap().free(image->offset);
    const std::string name = tst::kAddOneKernel;
    api::GetFunctionReply fn{};
    std::vector<std::byte> params;
    EXPECT_EQ(call<api::Call::ModuleGetFunction>({mod.handle, uint32_t(name.size()), 0}, &fn,
                                                  std::as_bytes(std::span(name)), &params, 1024),
              0);
    return fn.function;
  }
  // add_one(p, n) on `stream`, one block of n threads.
  static std::vector<std::byte> add_one_args(uint64_t p, int n) {
    std::vector<std::byte> packed(12);
    std::memcpy(packed.data(), &p, 8);
    std::memcpy(packed.data() + 8, &n, 4);
    return packed;
  }
  int32_t launch(uint64_t fn, uint64_t p, int n, uint64_t stream) {
    const auto packed = add_one_args(p, n);
    return call<api::Call::LaunchKernel>({fn, {1, 1, 1}, {uint32_t(n), 1, 1}, 0, 12, stream}, nullptr, packed);
  }

  std::vector<int> get(uint64_t src, size_t n, int32_t* status = nullptr) {
    std::vector<std::byte> extra;
    int32_t st = call<api::Call::CopyFromDeviceInline>({src, n * 4}, nullptr, {}, &extra, n * 4);
    if (status) *status = st;
    std::vector<int> v(extra.size() / 4);
    if (!v.empty()) std::memcpy(v.data(), extra.data(), v.size() * 4);
    return v;
  }
};

}  // namespace vmcuda::host::test
