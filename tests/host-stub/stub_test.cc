// vmcuda-stub's sessions end to end over the local transport, on the test executor.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "host-stub/stub_fixture.h"

namespace vmcuda::host {
namespace {

using vmrpc::wire::ChannelStatus;
using test::Client;
using test::Stub;
namespace tst = vmcuda::testing;

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
  limits.ledger = vmcuda::host::VmLedger::create(64 << 20);
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
  limits.ledger = vmcuda::host::VmLedger::create(3 << 20);
  Stub s(limits);
  Client c(s);
  api::PtrReply r{};
  EXPECT_EQ(c.call<api::Call::Malloc>({4 << 20}, &r), CUDA_ERROR_OUT_OF_MEMORY);
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

// Found by session_fuzz: cuModuleLoadData has no size argument, so the driver reads an image
// as far as its own headers say; images whose headers point past the bytes the guest sent are
// refused (CUDA_ERROR_INVALID_IMAGE) before the driver sees them.
TEST(Stub, ModuleImagesWhoseHeadersOverrunTheirBytesAreRefused) {
  Stub s;
  Client c(s);
  auto load = [&](const std::vector<uint8_t>& bytes) {
    auto image = c.slot->heap().allocate(bytes.size());
    EXPECT_TRUE(image);
    std::memcpy(image->data, bytes.data(), bytes.size());
    api::HandleReply mod{};
    const int32_t st = c.call<api::Call::ModuleLoad>({image->ref()}, &mod);
    c.slot->heap().free(image->offset);
    return st;
  };
  // A fatbin: {u32 magic, u16 version, u16 header_size, u64 fat_size}, then entries
  // {u16 kind, u16, u32 header_size, u64 payload_size, ...}.
  auto fatbin = [](uint16_t header, uint64_t fat, uint32_t entry_header, uint64_t payload, size_t bytes) {
    std::vector<uint8_t> b(std::max<size_t>(bytes, 32));
    const uint32_t magic = 0xBA55ED50u;
    const uint16_t version = 1;
    std::memcpy(b.data(), &magic, 4);
    std::memcpy(b.data() + 4, &version, 2);
    std::memcpy(b.data() + 6, &header, 2);
    std::memcpy(b.data() + 8, &fat, 8);
    std::memcpy(b.data() + 16 + 4, &entry_header, 4);
    std::memcpy(b.data() + 16 + 8, &payload, 8);
    b.resize(bytes);
    return b;
  };
  EXPECT_EQ(load(fatbin(16, 64 + 32, 64, 32, 16 + 96)), 0);             // fits exactly: loads
  EXPECT_EQ(load(fatbin(16, 1ull << 40, 64, 32, 16 + 96)), 200);         // fat_size past the image
  EXPECT_EQ(load(fatbin(16, ~0ull, 64, 32, 16 + 96)), 200);              // header + fat_size wraps
  EXPECT_EQ(load(fatbin(16, 64 + 32, 64, 1ull << 30, 16 + 96)), 200);    // an entry's payload past it
  EXPECT_EQ(load(fatbin(16, 64 + 32, 0, 0, 16 + 96)), 200);              // an entry that never advances
  EXPECT_EQ(load(fatbin(16, 0, 0, 0, 8)), 200);                          // shorter than its header
  // An ELF64 whose section header table lies past its bytes.
  std::vector<uint8_t> elf(64);
  std::memcpy(elf.data(), "\x7f" "ELF", 4);
  elf[4] = 2;
  const uint64_t shoff = 1ull << 20;
  const uint16_t shentsize = 64, shnum = 4;
  std::memcpy(elf.data() + 0x28, &shoff, 8);
  std::memcpy(elf.data() + 0x3a, &shentsize, 2);
  std::memcpy(elf.data() + 0x3c, &shnum, 2);
  EXPECT_EQ(load(elf), 200);
  // A 1-byte image: the driver sniffs its first bytes; the stub's copy is padded, the result
  // is the driver's own answer.
  EXPECT_EQ(load({'V'}), 200);
  EXPECT_EQ(tst::fake_live_modules(), 1u);
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
  // The context is made on the client's first call; wait for its slot to be closed.
  for (int i = 0; i < 1000 && (s.endpoint.stats().slots_closed_total != 1 || tst::fake_live_contexts() != 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.endpoint.stats().slots_closed_total, 1u);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_live_contexts(), 0u);
  EXPECT_EQ(tst::fake_live_modules(), 0u);
}

TEST(Stub, HeapRangesArePinnedOnRequestAndUnpinnedWithTheClient) {
  Stub s;
  {
    Client c(s);
    auto a = c.slot->heap().allocate(1 << 20);
    auto b = c.slot->heap().allocate(4096);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(c.call<api::Call::PinHeap>({a->ref()}), 0);
    EXPECT_EQ(c.call<api::Call::PinHeap>({b->ref()}), 0);
    EXPECT_EQ(tst::fake_pinned_ranges(), 2u);
    EXPECT_EQ(c.call<api::Call::PinHeap>({a->ref()}), 712);  // already registered
    EXPECT_EQ(c.call<api::Call::PinHeap>({{~0ull, 16}}), static_cast<int32_t>(ChannelStatus::kBadHeapRef));
    EXPECT_EQ(c.call<api::Call::UnpinHeap>({b->ref()}), 0);
    EXPECT_EQ(c.call<api::Call::UnpinHeap>({b->ref()}), 713);  // not registered
    EXPECT_EQ(tst::fake_pinned_ranges(), 1u);
  }
  // The client went away with a range still pinned: the stub unpinned it.
  for (int i = 0; i < 500 && tst::fake_pinned_ranges() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tst::fake_pinned_ranges(), 0u);
}


// ---------------------------------------------------------------- streams and events

constexpr int32_t kInvalidHandle = CUDA_ERROR_INVALID_HANDLE;  // cudaErrorInvalidResourceHandle (400)

// Waits until the stub has closed every session (a client's slot is closed asynchronously).
void wait_until_closed(Stub& s, uint64_t closed) {
  for (int i = 0; i < 500 && s.endpoint.stats().slots_closed_total < closed; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST(StubStreams, CreateLaunchSynchronizeQueryDestroy) {
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(64 * 4);
  c.put(p, std::vector<int>(64, 5));
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x1000, 1, -3}), 0);  // non-blocking, priority -3
  EXPECT_EQ(tst::fake_live_streams(), 1u);
  ASSERT_EQ(c.launch(fn, p, 64, 0x1000), 0);
  ASSERT_EQ(c.launch(fn, p, 64, api::kStreamDefault), 0);
  ASSERT_EQ(c.launch(fn, p, 64, api::kStreamLegacy), 0);
  ASSERT_EQ(c.launch(fn, p, 64, api::kStreamPerThread), 0);
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({0x1000}), 0);
  EXPECT_EQ(c.call<api::Call::StreamQuery>({0x1000}), 0);
  for (uint64_t special : {api::kStreamDefault, api::kStreamLegacy, api::kStreamPerThread}) {
    EXPECT_EQ(c.call<api::Call::StreamSynchronize>({special}), 0);
    EXPECT_EQ(c.call<api::Call::StreamQuery>({special}), 0);
  }
  EXPECT_EQ(c.get(p, 64), std::vector<int>(64, 9));
  // The driver clamps priorities to the device's range (0 least .. -5 greatest here).
  api::StreamPriorityReply pr{};
  ASSERT_EQ(c.call<api::Call::StreamGetPriority>({0x1000}, &pr), 0);
  EXPECT_EQ(pr.priority, -3);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x1001, 0, -100}), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetPriority>({0x1001}, &pr), 0);
  EXPECT_EQ(pr.priority, -5);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x1002, 0, 7}), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetPriority>({0x1002}, &pr), 0);
  EXPECT_EQ(pr.priority, 0);
  ASSERT_EQ(c.call<api::Call::StreamGetPriority>({api::kStreamDefault}, &pr), 0);
  EXPECT_EQ(pr.priority, 0);
  api::StreamPriorityRangeReply range{};
  ASSERT_EQ(c.call<api::Call::StreamPriorityRange>({}, &range), 0);
  EXPECT_EQ(range.least, 0);
  EXPECT_EQ(range.greatest, -5);
  // Destroyed: gone from the driver, and the handle is dead.
  EXPECT_EQ(c.call<api::Call::StreamDestroy>({0x1000}), 0);
  // 0x1001, 0x1002 and the client's own stream for its per-thread default stream (used
  // above): never the driver's CU_STREAM_PER_THREAD, which belongs to whichever host thread
  // issues (with a GPU working thread, a copy overtook a kernel on the H100).
  EXPECT_EQ(tst::fake_live_streams(), 3u);
  EXPECT_EQ(c.call<api::Call::StreamDestroy>({0x1000}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({0x1000}), kInvalidHandle);
  EXPECT_EQ(c.launch(fn, p, 64, 0x1000), kInvalidHandle);
  // A destroyed handle may be made again (the guest reuses its handles).
  EXPECT_EQ(c.call<api::Call::StreamCreate>({0x1000, 0, 0}), 0);
}

// Stream attributes (stream.cc): set, get and copy through the driver, values checked,
// an access policy window only over the client's own memory, malformed requests faulted.
api::StreamSetAttributeArgs window_attr(uint64_t stream, uint64_t base, uint64_t bytes, float ratio = 0.6f,
                                        uint32_t hit = 2, uint32_t miss = 1) {
  api::StreamSetAttributeArgs a{};
  a.stream = stream;
  a.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
  a.value.base_ptr = base;
  a.value.num_bytes = bytes;
  a.value.hit_ratio = ratio;
  a.value.hit_prop = hit;
  a.value.miss_prop = miss;
  return a;
}
api::StreamSetAttributeArgs value_attr(uint64_t stream, uint32_t id, int32_t value) {
  api::StreamSetAttributeArgs a{};
  a.stream = stream;
  a.id = id;
  a.value.value = value;
  return a;
}

TEST(StubStreams, AttributesSetGetCopy) {
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(1 << 20);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x1000, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x1001, 0, 0}), 0);
  // The driver's defaults: no window, no synchronization policy (-1: driver 580 on the H100), domains 0 and 1.
  api::StreamAttributeValue v{};
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
  EXPECT_EQ(v.num_bytes, 0u);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0}, &v), 0);
  EXPECT_EQ(v.value, -1);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, 0}, &v), 0);
  EXPECT_EQ(v.domain_default, 0);
  EXPECT_EQ(v.domain_remote, 1);

  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p, 1 << 20)), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
  EXPECT_EQ(v.base_ptr, p);
  EXPECT_EQ(v.num_bytes, 1u << 20);
  EXPECT_FLOAT_EQ(v.hit_ratio, 0.6f);
  EXPECT_EQ(v.hit_prop, 2u);
  EXPECT_EQ(v.miss_prop, 1u);
  // Work on it still runs.
  c.put(p, std::vector<int>(64, 1));
  ASSERT_EQ(c.launch(fn, p, 64, 0x1000), 0);
  ASSERT_EQ(c.call<api::Call::StreamSynchronize>({0x1000}), 0);
  EXPECT_EQ(c.get(p, 64), std::vector<int>(64, 2));

  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 4)), 0);
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, 1)), 0);
  api::StreamSetAttributeArgs map = value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, 0);
  map.value.domain_default = 1;
  map.value.domain_remote = 3;
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(map), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, 0}, &v), 0);
  EXPECT_EQ(v.domain_default, 1);
  EXPECT_EQ(v.domain_remote, 3);
  // The priority: clamped to the device's range, as at creation.
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_PRIORITY, -100)), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_PRIORITY, 0}, &v), 0);
  EXPECT_EQ(v.value, -5);

  // Copied to the other stream.
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({0x1001, 0x1000}), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1001, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
  EXPECT_EQ(v.base_ptr, p);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1001, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0}, &v), 0);
  EXPECT_EQ(v.value, 4);
  // An empty window resets it (its base is not memory anyone owns).
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1001, 0x1234, 0)), 0);
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1001, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
  EXPECT_EQ(v.num_bytes, 0u);
  EXPECT_EQ(v.base_ptr, 0u);
  // The special streams have attributes too.
  for (uint64_t special : {api::kStreamDefault, api::kStreamLegacy, api::kStreamPerThread}) {
    EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(special, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 3)), 0);
    ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({special, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0}, &v), 0);
    EXPECT_EQ(v.value, 3);
  }
}

TEST(StubStreams, AttributeValuesAndWindowsAreChecked) {
  Stub s;
  Client c(s);
  Client other(s);
  const uint64_t p = c.malloc(1 << 20);
  const uint64_t theirs = other.malloc(1 << 20);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x1000, 0, 0}), 0);
  constexpr int32_t kInvalid = CUDA_ERROR_INVALID_VALUE;
  // Out of range: CUDA's error, and the stream keeps its attributes.
  for (float ratio : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()})
    EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p, 4096, ratio)), kInvalid) << ratio;
  // Any hit property is taken and given back, as driver 580 does (it only names a policy).
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p, 4096, 0.5f, 7)), 0);
  {
    api::StreamAttributeValue got{};
    ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &got), 0);
    EXPECT_EQ(got.hit_prop, 7u);
  }
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p, 0)), 0);  // none again
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p, 4096, 0.5f, 2, 2)), kInvalid);  // a persisting miss
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0)), kInvalid);
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 5)), kInvalid);
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, 2)), kInvalid);
  api::StreamSetAttributeArgs map = value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, 0);
  map.value.domain_remote = 4;  // the device has 4 domains
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(map), kInvalid);
  // Ids that are not stream attributes, or not CUDA's.
  for (uint32_t id : {0u, 2u, 4u, 11u, 99u, 0xffffffffu}) {
    EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x1000, id, 1)), kInvalid) << id;
    api::StreamAttributeValue v{};
    EXPECT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, id, 0}, &v), kInvalid) << id;
  }
  // A window over memory that is not the client's (another client's, none, or running
  // past its allocation) is refused before the driver sees it.
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, theirs, 4096)), kInvalid);
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, 0x1000, 4096)), kInvalid);
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p + (1 << 20) - 16, 4096)), kInvalid);
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, p, ~0ull)), kInvalid);
  // Larger than the device's largest window: the driver's refusal.
  const uint64_t big = c.malloc(129ull << 20);
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(window_attr(0x1000, big, 129ull << 20)), kInvalid);
  api::StreamAttributeValue v{};
  ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
  EXPECT_EQ(v.num_bytes, 0u);
  // Forged, foreign or destroyed streams.
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(value_attr(0x7777, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 1)),
            kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::StreamGetAttribute>({0x7777, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0}, &v), kInvalidHandle);
  ASSERT_EQ(other.call<api::Call::StreamCreate>({0x2000, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamCopyAttributes>({0x1000, 0x2000}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::StreamCopyAttributes>({0x2000, 0x1000}), kInvalidHandle);
  // Malformed (padding that is not zero): the guest's fault, and the stub serves on.
  api::StreamSetAttributeArgs bad = value_attr(0x1000, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 1);
  bad.pad = 1;
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(bad), static_cast<int32_t>(ChannelStatus::kBadArguments));
  bad.pad = 0;
  bad.value.pad[5] = 1;
  EXPECT_EQ(c.call<api::Call::StreamSetAttribute>(bad), static_cast<int32_t>(ChannelStatus::kBadArguments));
  EXPECT_EQ(c.call<api::Call::StreamGetAttribute>({0x1000, CU_LAUNCH_ATTRIBUTE_PRIORITY, 1}, &v),
            static_cast<int32_t>(ChannelStatus::kBadArguments));
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({0x1000}), 0);
}

TEST(StubStreams, ForgedReservedAndForeignHandlesAreRejected) {
  Stub s;
  Client a(s), b(s);
  const uint64_t fn = a.load_add_one();
  const uint64_t p = a.malloc(4096);
  for (uint64_t reserved : {api::kStreamDefault, api::kStreamLegacy, api::kStreamPerThread}) {
    EXPECT_EQ(a.call<api::Call::StreamCreate>({reserved, 0, 0}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::StreamDestroy>({reserved}), kInvalidHandle);  // not the app's to destroy
  }
  ASSERT_EQ(a.call<api::Call::StreamCreate>({0x77, 0, 0}), 0);
  EXPECT_EQ(a.call<api::Call::StreamCreate>({0x77, 0, 0}), kInvalidHandle);  // already exists
  EXPECT_EQ(a.call<api::Call::StreamCreate>({0x78, 4, 0}), CUDA_ERROR_INVALID_VALUE);  // unknown flag
  // Handles that were never created, including the host's own driver handles.
  for (uint64_t forged : {uint64_t{0x76}, uint64_t{0x1000}, ~uint64_t{0}}) {
    EXPECT_EQ(a.call<api::Call::StreamSynchronize>({forged}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::StreamQuery>({forged}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::StreamDestroy>({forged}), kInvalidHandle);
    EXPECT_EQ(a.launch(fn, p, 4, forged), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::MemsetAsync>({p, 16, 0, 0, forged}), kInvalidHandle);
  }
  // Another client's stream does not exist for b, even under the same handle value.
  EXPECT_EQ(b.call<api::Call::StreamSynchronize>({0x77}), kInvalidHandle);
  EXPECT_EQ(b.call<api::Call::StreamDestroy>({0x77}), kInvalidHandle);
  ASSERT_EQ(b.call<api::Call::StreamCreate>({0x77, 0, 0}), 0);  // b's own 0x77
  EXPECT_EQ(b.call<api::Call::StreamDestroy>({0x77}), 0);
  EXPECT_EQ(a.call<api::Call::StreamSynchronize>({0x77}), 0);  // a's is untouched
}

TEST(StubStreams, PerClientLimit) {
  StubLimits limits;
  limits.max_streams = 2;
  limits.max_events = 1;
  Stub s(limits);
  Client c(s);
  EXPECT_EQ(c.call<api::Call::StreamCreate>({10, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamCreate>({11, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamCreate>({12, 0, 0}), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(c.call<api::Call::StreamDestroy>({10}), 0);
  EXPECT_EQ(c.call<api::Call::StreamCreate>({12, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventCreate>({10, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventCreate>({11, 0, 0}), CUDA_ERROR_OUT_OF_MEMORY);
}

TEST(StubEvents, RecordSynchronizeQueryElapsedTime) {
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(4096);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x500, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x600, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x601, 1, 0}), 0);  // blocking sync
  EXPECT_EQ(tst::fake_live_events(), 2u);
  // Never recorded: no elapsed time (cudaErrorInvalidResourceHandle, as CUDA says).
  api::ElapsedTimeReply t{};
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({0x600, 0x601}, &t), kInvalidHandle);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x600, 0x500, 0, 0}), 0);
  ASSERT_EQ(c.launch(fn, p, 4, 0x500), 0);  // 1 ms each on the executor
  ASSERT_EQ(c.launch(fn, p, 4, 0x500), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x601, 0x500, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventSynchronize>({0x601}), 0);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x601}), 0);
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({0x600, 0x601}, &t), 0);
  EXPECT_FLOAT_EQ(t.milliseconds, 2.0f);
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({0x601, 0x600}, &t), 0);
  EXPECT_FLOAT_EQ(t.milliseconds, -2.0f);
  // On the default streams too, with the external-record flag.
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x600, api::kStreamDefault, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x600, api::kStreamPerThread, 1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventRecord>({0x600, api::kStreamDefault, 2, 0}), CUDA_ERROR_INVALID_VALUE);
  // Timing disabled: recorded, but no elapsed time.
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x602, 2, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x602, 0x500, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({0x600, 0x602}, &t), kInvalidHandle);
  // Destroy, then the handle is dead.
  EXPECT_EQ(c.call<api::Call::EventDestroy>({0x602}), 0);
  EXPECT_EQ(c.call<api::Call::EventDestroy>({0x602}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x602}), kInvalidHandle);
  EXPECT_EQ(tst::fake_live_events(), 2u);
}

TEST(StubEvents, ForgedHandlesFlagsAndInterprocess) {
  Stub s;
  Client a(s), b(s);
  ASSERT_EQ(a.call<api::Call::EventCreate>({0x600, 0, 0}), 0);
  EXPECT_EQ(a.call<api::Call::EventCreate>({0x600, 0, 0}), kInvalidHandle);  // exists
  EXPECT_EQ(a.call<api::Call::EventCreate>({0, 0, 0}), kInvalidHandle);
  EXPECT_EQ(a.call<api::Call::EventCreate>({0x601, 8, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(a.call<api::Call::EventCreate>({0x601, 4, 0}), CUDA_ERROR_INVALID_VALUE);  // needs disable-timing
  EXPECT_EQ(a.call<api::Call::EventCreate>({0x601, 6, 0}), CUDA_ERROR_NOT_SUPPORTED);  // no IPC between guests
  api::ElapsedTimeReply t{};
  for (uint64_t forged : {uint64_t{0}, uint64_t{0x601}, ~uint64_t{0}}) {
    EXPECT_EQ(a.call<api::Call::EventRecord>({forged, 0, 0, 0}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::EventSynchronize>({forged}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::EventQuery>({forged}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::EventDestroy>({forged}), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::EventElapsedTime>({0x600, forged}, &t), kInvalidHandle);
    EXPECT_EQ(a.call<api::Call::StreamWaitEvent>({0, forged, 0, 0}), kInvalidHandle);
  }
  EXPECT_EQ(a.call<api::Call::EventRecord>({0x600, 0x999, 0, 0}), kInvalidHandle);  // unknown stream
  // b cannot reach a's event.
  EXPECT_EQ(b.call<api::Call::EventRecord>({0x600, 0, 0, 0}), kInvalidHandle);
  EXPECT_EQ(b.call<api::Call::StreamWaitEvent>({0, 0x600, 0, 0}), kInvalidHandle);
  EXPECT_EQ(b.call<api::Call::EventDestroy>({0x600}), kInvalidHandle);
  EXPECT_EQ(a.call<api::Call::EventQuery>({0x600}), 0);
}

TEST(StubStreams, WaitEvent) {
  Stub s;
  Client c(s);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x10, 1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x11, 1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x20, 2, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x11, 0x20, 0, 0}), 0);  // not recorded yet: no-op
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x20, 0x10, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x11, 0x20, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x11, 0x20, 1, 0}), 0);  // cudaEventWaitExternal
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({api::kStreamDefault, 0x20, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x11, 0x20, 2, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x12, 0x20, 0, 0}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x11, 0x10, 0, 0}), kInvalidHandle);  // a stream is no event
}

TEST(StubStreams, NotReadyWhileWorkIsPending) {
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(4096);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x10, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x20, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x21, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x20, 0x10, 0, 0}), 0);
  tst::fake_hold_completion(true);
  ASSERT_EQ(c.launch(fn, p, 4, 0x10), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x21, 0x10, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamQuery>({0x10}), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x21}), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x20}), 0);  // recorded before the work
  api::ElapsedTimeReply t{};
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({0x20, 0x21}, &t), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(c.call<api::Call::StreamQuery>({api::kStreamDefault}), 0);  // other streams are idle
  tst::fake_hold_completion(false);
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({0x10}), 0);
  EXPECT_EQ(c.call<api::Call::StreamQuery>({0x10}), 0);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x21}), 0);
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({0x20, 0x21}, &t), 0);
  EXPECT_FLOAT_EQ(t.milliseconds, 1.0f);
  // An event waited for is complete; a device synchronize completes everything.
  tst::fake_hold_completion(true);
  ASSERT_EQ(c.launch(fn, p, 4, 0x10), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x21, 0x10, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventSynchronize>({0x21}), 0);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x21}), 0);
  EXPECT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(c.call<api::Call::StreamQuery>({0x10}), 0);
  tst::fake_hold_completion(false);
}

TEST(StubStreams, StreamsAndEventsBelongToTheirDevice) {
  Stub s({}, {0, 1});
  Client c(s);
  const uint64_t fn0 = c.load_add_one();  // on device 0
  const uint64_t p0 = c.malloc(4096);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x20, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::SetDevice>({1, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x11, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventCreate>({0x21, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventRecord>({0x21, 0x11, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::SetDevice>({0, 0}), 0);
  // A launch into another device's stream fails; copies into it are fine (CUDA's rules).
  EXPECT_EQ(c.launch(fn0, p0, 4, 0x11), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::MemsetAsync>({p0, 16, 7, 0, 0x11}), 0);
  EXPECT_EQ(c.call<api::Call::StreamSynchronize>({0x11}), 0);
  EXPECT_EQ(c.call<api::Call::StreamQuery>({0x11}), 0);
  // An event is recorded only on a stream of its own device; streams may wait on any.
  EXPECT_EQ(c.call<api::Call::EventRecord>({0x21, api::kStreamDefault, 0, 0}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::EventRecord>({0x20, 0x11, 0, 0}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::EventRecord>({0x20, api::kStreamDefault, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({api::kStreamDefault, 0x21, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::StreamWaitEvent>({0x11, 0x20, 0, 0}), 0);
  EXPECT_EQ(c.call<api::Call::EventSynchronize>({0x21}), 0);
  EXPECT_EQ(c.call<api::Call::EventQuery>({0x21}), 0);
  api::ElapsedTimeReply t{};
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({0x20, 0x21}, &t), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::StreamDestroy>({0x11}), 0);  // from device 0
  EXPECT_EQ(c.call<api::Call::EventDestroy>({0x21}), 0);
  EXPECT_EQ(tst::fake_live_streams(), 0u);
  EXPECT_EQ(tst::fake_live_events(), 1u);
}

TEST(StubAsyncCopies, EveryDirectionOnAStream) {
  Stub s;
  Client c(s);
  const uint64_t a = c.malloc(1 << 20), b = c.malloc(1 << 20);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x10, 1, 0}), 0);
  for (uint64_t stream : {uint64_t{0x10}, api::kStreamDefault, api::kStreamLegacy, api::kStreamPerThread}) {
    // Inline host-to-device, memset, device-to-device, inline device-to-host.
    std::vector<int> v(256);
    for (int i = 0; i < 256; ++i) v[i] = i * 3 + static_cast<int>(stream);
    ASSERT_EQ(c.call<api::Call::CopyToDeviceInlineAsync>({a, stream}, nullptr, std::as_bytes(std::span(v))), 0);
    ASSERT_EQ(c.call<api::Call::MemsetAsync>({b, 1 << 20, 0x01, 0, stream}), 0);
    ASSERT_EQ(c.call<api::Call::CopyDeviceToDeviceAsync>({b + 64, a, 512, stream}), 0);
    std::vector<std::byte> out;
    ASSERT_EQ(c.call<api::Call::CopyFromDeviceInlineAsync>({b, 1024, stream}, nullptr, {}, &out, 1024), 0);
    ASSERT_EQ(out.size(), 1024u);
    std::vector<int> got(256);
    std::memcpy(got.data(), out.data(), 1024);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], 0x01010101);
    for (int i = 16; i < 144; ++i) EXPECT_EQ(got[i], v[i - 16]);
    for (int i = 144; i < 256; ++i) EXPECT_EQ(got[i], 0x01010101);
  }
  // Through the heap, staged (the host waits) and not.
  const uint64_t n = 256 << 10;
  auto in = c.slot->heap().allocate(n), out = c.slot->heap().allocate(n);
  ASSERT_TRUE(in && out);
  for (uint64_t i = 0; i < n; ++i) in->data[i] = std::byte(i * 7);
  for (uint32_t flags : {api::kHeapCopyWait, 0u}) {
    std::memset(out->data, 0, n);
    ASSERT_EQ(c.call<api::Call::CopyToDeviceHeapAsync>({a, in->ref(), 0x10, flags, 0}), 0);
    ASSERT_EQ(c.call<api::Call::CopyFromDeviceHeapAsync>({a, out->ref(), 0x10, flags, 0}), 0);
    ASSERT_EQ(c.call<api::Call::StreamSynchronize>({0x10}), 0);
    EXPECT_EQ(0, std::memcmp(in->data, out->data, n));
  }
  // Bad arguments: unowned ranges, heap references, flags, streams.
  EXPECT_EQ(c.call<api::Call::CopyToDeviceHeapAsync>({a + (1 << 20) - 8, in->ref(), 0x10, 0, 0}),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::CopyFromDeviceHeapAsync>({a, {~0ull, 8}, 0x10, 0, 0}),
            static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  EXPECT_EQ(c.call<api::Call::CopyToDeviceHeapAsync>({a, in->ref(), 0x10, 2, 0}),
            static_cast<int32_t>(ChannelStatus::kBadArguments));
  EXPECT_EQ(c.call<api::Call::CopyToDeviceHeapAsync>({a, in->ref(), 0x99, 0, 0}), kInvalidHandle);
  EXPECT_EQ(c.call<api::Call::MemsetAsync>({a + 8, 1 << 20, 0, 0, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::CopyDeviceToDeviceAsync>({a, 0x1234, 8, 0}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.call<api::Call::CopyToDeviceInlineAsync>({0x1234, 0}, nullptr, std::as_bytes(std::span("abcd", 4))),
            CUDA_ERROR_INVALID_VALUE);
  std::vector<std::byte> out2;
  EXPECT_EQ(c.call<api::Call::CopyFromDeviceInlineAsync>({a, 64, 0}, nullptr, {}, &out2, 32),
            static_cast<int32_t>(ChannelStatus::kReplyTooSmall));
  EXPECT_EQ(c.call<api::Call::CopyFromDeviceInlineAsync>({a, 64, 0x98}, nullptr, {}, &out2, 64), kInvalidHandle);
  // Another client cannot copy from or into a's memory on its streams.
  Client d(s);
  ASSERT_EQ(d.call<api::Call::StreamCreate>({0x10, 0, 0}), 0);
  EXPECT_EQ(d.call<api::Call::MemsetAsync>({a, 16, 0, 0, 0x10}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(d.call<api::Call::CopyFromDeviceInlineAsync>({a, 16, 0x10}, nullptr, {}, &out2, 16),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(StubLazy, EachQueuedCallGetsItsOwnStatusAndLaterCallsStillRun) {
  // What the guest's lazy queue sends: creations with guest handles, async work on
  // them, one bad call in the middle, then a synchronizing call, in one batch.
  Stub s;
  Client c(s);
  const uint64_t fn = c.load_add_one();
  const uint64_t p = c.malloc(64 * 4);
  std::vector<int> v(64, 1);
  const auto packed = Client::add_one_args(p, 64);
  auto f_stream = c.queue<api::Call::StreamCreate>({0x10, 1, 0});
  auto f_ev0 = c.queue<api::Call::EventCreate>({0x20, 0, 0});
  auto f_ev1 = c.queue<api::Call::EventCreate>({0x21, 0, 0});
  auto f_rec0 = c.queue<api::Call::EventRecord>({0x20, 0x10, 0, 0});
  auto f_put = c.queue<api::Call::CopyToDeviceInlineAsync>({p, 0x10}, std::as_bytes(std::span(v)));
  auto f_launch = c.queue<api::Call::LaunchKernel>({fn, {1, 1, 1}, {64, 1, 1}, 0, 12, 0x10}, packed);
  auto f_bad = c.queue<api::Call::MemsetAsync>({0xdead0000, 16, 0, 0, 0x10});       // not the client's memory
  auto f_forged = c.queue<api::Call::LaunchKernel>({fn, {1, 1, 1}, {1, 1, 1}, 0, 12, 0x11}, packed);  // no stream 0x11
  auto f_rec1 = c.queue<api::Call::EventRecord>({0x21, 0x10, 0, 0});
  auto f_destroy = c.queue<api::Call::StreamDestroy>({0x10});
  auto f_sync = c.queue<api::Call::EventSynchronize>({0x21});
  auto f_time = c.queue<api::Call::EventElapsedTime>({0x20, 0x21}, {}, sizeof(api::ElapsedTimeReply));
  ASSERT_EQ(c.flush(), ChannelStatus::kOk);
  EXPECT_EQ(c.status(f_stream), 0);
  EXPECT_EQ(c.status(f_ev0), 0);
  EXPECT_EQ(c.status(f_ev1), 0);
  EXPECT_EQ(c.status(f_rec0), 0);
  EXPECT_EQ(c.status(f_put), 0);
  EXPECT_EQ(c.status(f_launch), 0);
  EXPECT_EQ(c.status(f_bad), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(c.status(f_forged), kInvalidHandle);
  EXPECT_EQ(c.status(f_rec1), 0);
  EXPECT_EQ(c.status(f_destroy), 0);
  EXPECT_EQ(c.status(f_sync), 0);
  ASSERT_EQ(c.status(f_time), 0);
  api::ElapsedTimeReply t{};
  std::memcpy(&t, c.slot->result(f_time).reply.data(), sizeof t);
  EXPECT_FLOAT_EQ(t.milliseconds, 1.5f);  // the copy (0.5 ms) and the launch (1 ms)
  EXPECT_EQ(c.get(p, 64), std::vector<int>(64, 2));
}

TEST(StubStreams, EverythingIsDestroyedWhenTheClientGoes) {
  Stub s;
  {
    Client c(s);
    for (uint64_t h = 0x10; h < 0x20; ++h) ASSERT_EQ(c.call<api::Call::StreamCreate>({h, uint32_t(h & 1), 0}), 0);
    for (uint64_t h = 0x10; h < 0x30; ++h) ASSERT_EQ(c.call<api::Call::EventCreate>({h, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::EventRecord>({0x10, 0x11, 0, 0}), 0);
    EXPECT_EQ(tst::fake_live_streams(), 16u);
    EXPECT_EQ(tst::fake_live_events(), 32u);
  }
  wait_until_closed(s, 1);
  for (int i = 0; i < 500 && tst::fake_live_contexts() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tst::fake_live_streams(), 0u);
  EXPECT_EQ(tst::fake_live_events(), 0u);
  EXPECT_EQ(tst::fake_live_contexts(), 0u);
}

}  // namespace
}  // namespace vmcuda::host
