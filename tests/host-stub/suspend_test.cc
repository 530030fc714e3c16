// Suspend and resume of a client (host-stub/src/suspend.cc) on the test executor, through
// the endpoint's control path as vmcuda-stub drives it: the slot held at a call boundary,
// the client's state written out and its GPU objects released, then recreated behind the
// same handles and pointers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <functional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client_control.h"
#include "host-stub/slot_control.h"
#include "host-stub/stub_fixture.h"
#include "vm_ledger.h"
#include "vmrpc/knobs.h"

namespace vmcuda::host::test {
namespace {

namespace cc = client_control;
using namespace std::chrono_literals;

using namespace slot_control;

std::vector<int> iota(int n, int from) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// A client holding one of each kind of object.
struct Workload {
  uint64_t small = 0, large = 0, fn = 0, global = 0;
  uint64_t stream = api::kFirstGuestHandle + 7, event = api::kFirstGuestHandle + 9;
  uint64_t event2 = api::kFirstGuestHandle + 10, unrecorded = api::kFirstGuestHandle + 11;
  uint64_t pinned_offset = 0;
  size_t large_ints = (3u << 20) / 4;

  void build(Client& c) {
    small = c.malloc(4096);
    large = c.malloc(large_ints * 4);
    c.put(small, iota(1024, 1));
    c.put(large, iota(1024, 100000));
    fn = c.load_add_one();
    // The module variable (the fake module's) with a value of its own.
    const std::string name = tst::kTestGlobal;
    api::GlobalReply g{};
    ASSERT_EQ(c.call<api::Call::ModuleGetGlobal>({1, uint32_t(name.size())}, &g, std::as_bytes(std::span(name))), 0);
    global = g.ptr;
    c.put(global, iota(64, 7000));
    ASSERT_EQ(c.call<api::Call::StreamCreate>({stream, 1 /* non-blocking */, 0}), 0);
    ASSERT_EQ(c.call<api::Call::EventCreate>({event, 0}), 0);
    ASSERT_EQ(c.launch(fn, small, 1024, stream), 0);
    ASSERT_EQ(c.call<api::Call::EventRecord>({event, stream, 0}), 0);
    ASSERT_EQ(c.call<api::Call::EventCreate>({event2, 0}), 0);
    ASSERT_EQ(c.call<api::Call::EventRecord>({event2, stream, 0}), 0);
    ASSERT_EQ(c.call<api::Call::EventCreate>({unrecorded, 0}), 0);
    ASSERT_EQ(c.call<api::Call::StreamSynchronize>({stream}), 0);
    api::LimitReply lim{};
    ASSERT_EQ(c.call<api::Call::DeviceSetLimit>({16u << 20, 2 /* malloc heap */}, &lim), 0);
    ASSERT_EQ(c.call<api::Call::DeviceSetCacheConfig>({1}), 0);
    auto block = c.slot->heap().allocate(8192);
    ASSERT_TRUE(block);
    pinned_offset = block->offset;
    ASSERT_EQ(c.call<api::Call::PinHeap>({block->ref()}), 0);
  }
};

TEST(Suspend, EveryObjectComesBackBehindTheSameHandlesAndPointers) {
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  const uint64_t contexts = tst::fake_live_contexts(), modules = tst::fake_live_modules();
  ASSERT_GT(tst::fake_allocated_bytes(), 0u);
  api::ElapsedTimeReply before{};
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({w.event, w.event2}, &before), 0);

  ASSERT_TRUE(hold(stub));
  std::vector<cc::Progress> progress;
  cc::Reply r = control(stub, cc::Op::kSuspend, {}, &progress);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.status.suspended);
  EXPECT_GT(r.state_bytes, 3u << 20);  // the memory and the module image
  EXPECT_FALSE(progress.empty());
  // The GPU is free for others: no memory, context, module, stream, event or pinning left.
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  EXPECT_EQ(tst::fake_live_contexts(), contexts - 1);
  EXPECT_EQ(tst::fake_live_modules(), modules - 1);
  EXPECT_EQ(tst::fake_live_streams(), 0u);
  EXPECT_EQ(tst::fake_live_events(), 0u);
  EXPECT_EQ(tst::fake_pinned_ranges(), 0u);
  // A second suspend says so and changes nothing.
  cc::Reply again = control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(again.ok);
  EXPECT_NE(again.error.find("already suspended"), std::string::npos);

  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.status.suspended);
  EXPECT_EQ(tst::fake_live_contexts(), contexts);
  EXPECT_EQ(tst::fake_live_modules(), modules);
  EXPECT_EQ(tst::fake_pinned_ranges(), 1u);
  release(stub);

  // Same pointers, same bytes (the kernel's +1 included), same handles.
  auto small = c.get(w.small, 1024);
  EXPECT_EQ(small, iota(1024, 2));
  EXPECT_EQ(c.get(w.large, 1024), iota(1024, 100000));
  EXPECT_EQ(c.get(w.global, 64), iota(64, 7000));
  ASSERT_EQ(c.launch(w.fn, w.small, 1024, w.stream), 0);
  ASSERT_EQ(c.call<api::Call::StreamSynchronize>({w.stream}), 0);
  EXPECT_EQ(c.get(w.small, 1024), iota(1024, 3));
  api::LimitReply lim{};
  ASSERT_EQ(c.call<api::Call::DeviceGetLimit>({2}, &lim), 0);
  EXPECT_EQ(lim.value, 16u << 20);
  api::CacheConfigReply cache{};
  ASSERT_EQ(c.call<api::Call::DeviceGetCacheConfig>({}, &cache), 0);
  EXPECT_EQ(cache.config, 1);
  // The events exist, and their GPU time between each other survived (the time suspended
  // does not count); an event never recorded is still refused.
  EXPECT_EQ(c.call<api::Call::EventQuery>({w.event}), 0);
  api::ElapsedTimeReply t{};
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({w.event, w.event2}, &t), 0);
  EXPECT_NEAR(t.milliseconds, before.milliseconds, 1e-3);
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({w.event, w.unrecorded}, &t), CUDA_ERROR_INVALID_HANDLE);
  // From an event recorded before the suspend to itself: 0, exact (it had completed); an
  // event never recorded is refused as natively.
  t.milliseconds = -1;
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({w.event, w.event}, &t), 0);
  EXPECT_EQ(t.milliseconds, 0.0f);
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({w.unrecorded, w.unrecorded}, &t), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(c.call<api::Call::EventRecord>({w.event, w.stream, 0}), 0);
  ASSERT_EQ(c.call<api::Call::EventSynchronize>({w.event}), 0);
  EXPECT_EQ(c.call<api::Call::EventElapsedTime>({w.event, w.event}, &t), 0);  // recorded anew: fine
  // From one recorded before the suspend to one recorded after: at least its time before.
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({w.event2, w.event}, &t), 0);
  EXPECT_GE(t.milliseconds, 0.0f);
  api::ElapsedTimeReply back{};
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({w.event, w.event2}, &back), 0);
  EXPECT_FLOAT_EQ(back.milliseconds, -t.milliseconds);
  // Across a second suspend: the older event's time adds up through both.
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  api::ElapsedTimeReply twice{};
  ASSERT_EQ(c.call<api::Call::EventElapsedTime>({w.event2, w.event}, &twice), 0);
  EXPECT_NEAR(twice.milliseconds, t.milliseconds, 1e-3);
  // New objects after the resume get new handles, old ones still free normally.
  const uint64_t more = c.malloc(4096);
  EXPECT_NE(more, w.small);
  EXPECT_EQ(c.call<api::Call::Free>({w.large}), 0);
  EXPECT_EQ(c.call<api::Call::Free>({more}), 0);
  EXPECT_EQ(c.call<api::Call::StreamDestroy>({w.stream}), 0);
}

TEST(Suspend, StreamAttributesComeBack) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(1 << 20);
  const uint64_t stream = api::kFirstGuestHandle + 3, copy = api::kFirstGuestHandle + 4;
  ASSERT_EQ(c.call<api::Call::StreamCreate>({stream, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({copy, 0, 0}), 0);
  api::StreamSetAttributeArgs win{};
  win.stream = stream;
  win.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
  win.value = {p + 4096, 65536, 0.25f, 2, 1, 0, 0, 0, {}};
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(win), 0);
  api::StreamSetAttributeArgs sync{};
  sync.stream = stream;
  sync.id = CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY;
  sync.value.value = 4;
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(sync), 0);
  api::StreamSetAttributeArgs map{};
  map.stream = stream;
  map.id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP;
  map.value.domain_default = 2;
  map.value.domain_remote = 3;
  ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(map), 0);
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({copy, stream}), 0);

  for (int cycle = 0; cycle < 2; ++cycle) {
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
    for (uint64_t s : {stream, copy}) {
      api::StreamAttributeValue v{};
      ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
      EXPECT_EQ(v.base_ptr, p + 4096);
      EXPECT_EQ(v.num_bytes, 65536u);
      EXPECT_FLOAT_EQ(v.hit_ratio, 0.25f);
      EXPECT_EQ(v.hit_prop, 2u);
      EXPECT_EQ(v.miss_prop, 1u);
      ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0}, &v), 0);
      EXPECT_EQ(v.value, 4);
      ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({s, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, 0}, &v), 0);
      EXPECT_EQ(v.domain_default, 2);
      EXPECT_EQ(v.domain_remote, 3);
    }
  }
}

// The per-thread default stream is the client's own (stream.cc resolve_stream): what the
// guest sets on it, and what a copy from it gives another stream, survive a suspend, as
// stream_attributes does it (a suspend between its copy from cudaStreamPerThread and the
// read-back read syncPolicy -1, the driver's "never set", instead of 3).
TEST(Suspend, ThePerThreadStreamsAttributesAndCopiesOfThemComeBack) {
  Stub stub;
  Client c(stub);
  const uint64_t s1 = api::kFirstGuestHandle + 3, s2 = api::kFirstGuestHandle + 4;
  ASSERT_EQ(c.call<api::Call::StreamCreate>({s1, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({s2, 0, -2}), 0);
  auto set_sync = [&](uint64_t s, int32_t policy) {
    api::StreamSetAttributeArgs a{};
    a.stream = s;
    a.id = CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY;
    a.value.value = policy;
    return c.call<api::Call::StreamSetAttribute>(a);
  };
  auto get = [&](uint64_t s, uint32_t id) {
    api::StreamAttributeValue v{};
    EXPECT_EQ(c.call<api::Call::StreamGetAttribute>({s, id, 0}, &v), 0);
    return v.value;
  };
  auto cycle = [&] {
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
  };
  const int32_t kUnset = get(s1, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY);  // the driver's "never set"
  ASSERT_EQ(set_sync(s1, 4 /* blocking sync */), 0);
  ASSERT_EQ(set_sync(api::kStreamPerThread, 3 /* yield */), 0);
  cycle();
  EXPECT_EQ(get(api::kStreamPerThread, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), 3) << "set on the per-thread stream";
  // A copy from the per-thread stream replaces the destination's attributes: s1 had 4.
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({s1, api::kStreamPerThread}), 0);
  EXPECT_EQ(get(s1, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), 3);
  cycle();
  EXPECT_EQ(get(s1, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), 3) << "copied from the per-thread stream";
  EXPECT_EQ(get(api::kStreamPerThread, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), 3);
  // The other way: a copy to the per-thread stream, priority included (the driver copies it).
  const int32_t s2_priority = get(s2, CU_LAUNCH_ATTRIBUTE_PRIORITY);
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({api::kStreamPerThread, s2}), 0);
  EXPECT_EQ(get(api::kStreamPerThread, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), kUnset);
  EXPECT_EQ(get(api::kStreamPerThread, CU_LAUNCH_ATTRIBUTE_PRIORITY), s2_priority);
  // And between streams of the client: s1 takes s2's (nothing set: "never set") and its priority.
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({s1, s2}), 0);
  cycle();
  EXPECT_EQ(get(api::kStreamPerThread, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), kUnset);
  EXPECT_EQ(get(api::kStreamPerThread, CU_LAUNCH_ATTRIBUTE_PRIORITY), s2_priority);
  EXPECT_EQ(get(s1, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY), kUnset);
  EXPECT_EQ(get(s1, CU_LAUNCH_ATTRIBUTE_PRIORITY), s2_priority);
  // Work on it still runs in order after all that.
  ASSERT_EQ(c.call<api::Call::StreamSynchronize>({api::kStreamPerThread}), 0);
}

// The NULL stream's attributes (cudaStreamSetAttribute on stream 0 or cudaStreamLegacy, one
// stream) are the context's, which a suspend releases: carried in a NullStream entry and set
// again on the new context's NULL stream, across a suspend and a save; a copy to it too; a
// device reset gives them a new stream's, as natively (a new context).
TEST(Suspend, TheNullStreamsAttributesComeBack) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(1 << 20);
  const uint64_t s1 = api::kFirstGuestHandle + 3;
  ASSERT_EQ(c.call<api::Call::StreamCreate>({s1, 0, 0}), 0);
  auto set = [&](uint64_t s, uint32_t id, api::StreamAttributeValue v) {
    api::StreamSetAttributeArgs a{};
    a.stream = s;
    a.id = id;
    a.value = v;
    return c.call<api::Call::StreamSetAttribute>(a);
  };
  auto get = [&](uint64_t s, uint32_t id) {
    api::StreamAttributeValue v{};
    EXPECT_EQ(c.call<api::Call::StreamGetAttribute>({s, id, 0}, &v), 0);
    return v;
  };
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-null-stream.state";
  auto cycle = [&](bool save) {
    state::remove_state_file(path);
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
  };
  const int32_t kUnset = get(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY).value;
  api::StreamAttributeValue sync{}, win{}, map{};
  sync.value = 2;  // spin
  win.base_ptr = p + 4096, win.num_bytes = 65536, win.hit_ratio = 0.5f, win.hit_prop = 1, win.miss_prop = 0;
  map.domain_default = 1, map.domain_remote = 2;
  ASSERT_EQ(set(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, sync), 0);
  ASSERT_EQ(set(api::kStreamLegacy, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, win), 0);  // the same stream
  ASSERT_EQ(set(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, map), 0);
  auto same = [&](const char* after) {
    SCOPED_TRACE(after);
    for (uint64_t s : {api::kStreamDefault, api::kStreamLegacy}) {
      EXPECT_EQ(get(s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY).value, 2) << "lost with the context";
      const api::StreamAttributeValue w = get(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
      EXPECT_EQ(w.base_ptr, p + 4096);
      EXPECT_EQ(w.num_bytes, 65536u);
      EXPECT_FLOAT_EQ(w.hit_ratio, 0.5f);
      EXPECT_EQ(w.hit_prop, 1u);
      const api::StreamAttributeValue m = get(s, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP);
      EXPECT_EQ(m.domain_default, 1);
      EXPECT_EQ(m.domain_remote, 2);
    }
  };
  ASSERT_NO_FATAL_FAILURE(cycle(false));
  same("suspend and resume");
  ASSERT_NO_FATAL_FAILURE(cycle(true));
  same("save and restore");
  // A copy to the NULL stream replaces its attributes with the source's (s1 has none set).
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({api::kStreamDefault, s1}), 0);
  EXPECT_EQ(get(api::kStreamLegacy, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY).value, kUnset);
  sync.value = 3;
  ASSERT_EQ(set(s1, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, sync), 0);
  ASSERT_EQ(c.call<api::Call::StreamCopyAttributes>({api::kStreamLegacy, s1}), 0);
  ASSERT_NO_FATAL_FAILURE(cycle(false));
  EXPECT_EQ(get(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY).value, 3) << "copied from s1";
  EXPECT_EQ(get(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW).num_bytes, 0u);
  // A reset: what a new context's NULL stream has, and nothing comes back after a suspend.
  ASSERT_EQ(c.call<api::Call::DeviceReset>({}), 0);
  EXPECT_EQ(get(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY).value, kUnset);
  ASSERT_NO_FATAL_FAILURE(cycle(false));
  EXPECT_EQ(get(api::kStreamDefault, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY).value, kUnset);
  state::remove_state_file(path);
}

// The per-thread and NULL streams' records in a state file are untrusted: one that is not its
// device's (another handle, flags, a priority), too many attributes or one twice, a value the
// driver refuses, a window over memory that is not the client's are refused; the good file
// restores.
TEST(Suspend, ForgedPerThreadAndNullStreamRecordsAreRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-special-streams-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-suspend-special-streams-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(1 << 16);
  for (uint64_t s : {api::kStreamPerThread, api::kStreamDefault}) {
    api::StreamSetAttributeArgs a{};
    a.stream = s;
    a.id = CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY;
    a.value.value = 4;
    ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(a), 0);
    a.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    a.value = {p, 4096, 1.0f, 1, 0, 0, 0, 0, {}};
    ASSERT_EQ(c.call<api::Call::StreamSetAttribute>(a), 0);
  }
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // A stream's record: kind (1 byte), id, parent, device (4), handle (8), flags (4), priority
  // (4), its attribute count (4), then each: id (4), base, bytes (8 each), hit ratio, hit and
  // miss property, value, domains (4 each). Attributes by id: the window (1) first.
  constexpr size_t kHandle = 21, kFlags = 29, kPriority = 33, kCount = 37, kFirst = 41, kEach = 40;
  const auto per_thread = static_cast<std::byte>(ObjectKind::PerThreadStream);
  const auto null_stream = static_cast<std::byte>(ObjectKind::NullStream);
  auto u32_at = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  auto u64_at = [](std::vector<std::byte>& p, size_t at, uint64_t v) { std::memcpy(p.data() + at, &v, 8); };
  const Forgery cases[] = {
      {"a per-thread stream of another device", [&](auto& p) { if (p[0] == per_thread) u64_at(p, kHandle, 1); },
       "not a device's per-thread stream"},
      {"a per-thread stream with flags", [&](auto& p) { if (p[0] == per_thread) u32_at(p, kFlags, 1); },
       "not a device's per-thread stream"},
      {"a per-thread stream with a priority", [&](auto& p) { if (p[0] == per_thread) u32_at(p, kPriority, uint32_t(-1)); },
       "not a device's per-thread stream"},
      {"a NULL stream of another device", [&](auto& p) { if (p[0] == null_stream) u64_at(p, kHandle, 3); },
       "not a device's NULL stream"},
      {"a NULL stream with flags", [&](auto& p) { if (p[0] == null_stream) u32_at(p, kFlags, 1); },
       "not a device's NULL stream"},
      {"too many attributes", [&](auto& p) { if (p[0] == per_thread) u32_at(p, kCount, 6); }, "too many attributes"},
      {"an attribute twice",
       [&](auto& p) { if (p[0] == null_stream) u32_at(p, kFirst + kEach, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW); },
       "an attribute twice"},
      {"a sync policy the driver refuses",
       [&](auto& p) { if (p[0] == per_thread) u32_at(p, kFirst + kEach + 4 + 16 + 12, 9); }, "per-thread stream"},
      {"an unknown attribute", [&](auto& p) { if (p[0] == null_stream) u32_at(p, kFirst + kEach, 77); }, "NULL stream"},
      {"a window over memory that is not the client's",
       [&](auto& p) { if (p[0] == per_thread) u64_at(p, kFirst + 4, p.size() + (1ull << 40)); }, "not the client's"},
      {"a window over the NULL stream beyond the allocation",
       [&](auto& p) { if (p[0] == null_stream) u64_at(p, kFirst + 4 + 8, 1ull << 20); }, "not the client's"},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) { EXPECT_EQ(tst::fake_allocated_bytes(), 0u); });
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  for (uint64_t s : {api::kStreamPerThread, api::kStreamDefault}) {
    api::StreamAttributeValue v{};
    ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, 0}, &v), 0);
    EXPECT_EQ(v.value, 4);
    ASSERT_EQ(c.call<api::Call::StreamGetAttribute>({s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 0}, &v), 0);
    EXPECT_EQ(v.base_ptr, p);
  }
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

#ifdef VMCUDA_WITH_CUBLAS
TEST(Suspend, CublasHandlesComeBackWithTheirSettings) {
  Stub stub;
  Client c(stub);
  // The handle is older than the stream and the workspace it names: its settings are applied
  // once everything is back.
  const uint64_t handle = api::kFirstGuestHandle + 20, stream = api::kFirstGuestHandle + 21;
  ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({handle}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({stream, 0, 0}), 0);
  const uint64_t ws = c.malloc(1 << 16), data = c.malloc(64);
  const std::vector<float> x = {1, 2, 3, 4};
  ASSERT_EQ(c.call<api::Call::CopyToDeviceInline>({data}, nullptr, std::as_bytes(std::span(x))), 0);
  ASSERT_EQ(c.call<api::Call::cublasSetStream_v2>({handle, stream}), 0);
  ASSERT_EQ(c.call<api::Call::cublasSetWorkspace_v2>({handle, ws, 1 << 16}), 0);
  ASSERT_EQ(c.call<api::Call::cublasSetMathMode>({handle, 3}), 0);
  ASSERT_EQ(c.call<api::Call::cublasSetPointerMode_v2>({handle, 1}), 0);
  for (int cycle = 0; cycle < 2; ++cycle) {
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(tst::fake_live_cublas_handles(), 0u);  // released with the client's GPU state
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
    EXPECT_EQ(tst::fake_live_cublas_handles(), 1u);
    const auto s = tst::fake_cublas_last_settings();
    EXPECT_EQ(s.pointer_mode, 1);
    EXPECT_EQ(s.math_mode, 3);
    EXPECT_NE(s.stream, nullptr);
    EXPECT_EQ(s.workspace, ws);
    EXPECT_EQ(s.workspace_bytes, 1u << 16);
    // Still in pointer mode device: the dot product lands in device memory.
    api::cublasSdot_v2_Args d{};
    d.handle = handle, d.n = 4, d.x = data, d.incx = 1, d.y = data, d.incy = 1, d.result = data + 32;
    ASSERT_EQ(c.call<api::Call::cublasSdot_v2>(d), 0);
    std::vector<std::byte> extra;
    ASSERT_EQ(c.call<api::Call::CopyFromDeviceInline>({data + 32, 4}, nullptr, {}, &extra, 4), 0);
    float r30;
    std::memcpy(&r30, extra.data(), 4);
    EXPECT_EQ(r30, 30.0f);
  }
}

// What a suspend gives back of the VM's quotas it charges again at the resume: a handle's own
// workspace (device memory) and pinned host memory (the VM's host memory bound).
TEST(Suspend, CublasWorkspacesAndPinnedMemoryAreChargedAgainAtTheResume) {
  constexpr uint64_t kMiB = 1 << 20;
  StubLimits limits;
  limits.ledger = VmLedger::create(64 * kMiB, 8 * kMiB);
  limits.cublas_workspace_bytes = 4 * kMiB;
  // One copy thread: no pinned ring, which an 8 MiB bound has no room for
  // (TheSuspendsStagingRingIsChargedToTheVmsHostMemoryBound).
  vmrpc::knobs::kSuspendCopyThreads.set(1);
  struct Reset {
    ~Reset() { vmrpc::knobs::kSuspendCopyThreads.set(0); }
  } reset;
  Stub stub(limits);
  Client c(stub);
  ASSERT_EQ(c.call<api::Call::cublasCreate_v2>({api::kFirstGuestHandle + 20}), 0);
  auto pinned = c.slot->heap().allocate(kMiB);
  ASSERT_TRUE(pinned);
  ASSERT_EQ(c.call<api::Call::PinHeap>({pinned->ref()}), 0);
  const uint64_t device = limits.ledger->used(), host = limits.ledger->used(VmLedger::kHost);
  EXPECT_GE(device, 4 * kMiB);
  EXPECT_EQ(host, kMiB);
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  EXPECT_LE(limits.ledger->used(), device - 4 * kMiB);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 0u);
  cc::Reply r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(limits.ledger->used(), device);
  EXPECT_EQ(limits.ledger->used(VmLedger::kHost), host);
  EXPECT_EQ(tst::fake_live_cublas_handles(), 1u);
}
#endif

TEST(Suspend, AGuestThatCallsWhileHeldWaitsAndIsServedAfter) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(4096);
  c.put(p, iota(16, 5));
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  std::atomic<bool> answered{false};
  std::vector<int> got;
  std::thread guest([&] {
    got = c.get(p, 16);
    answered = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(answered.load());  // held: the call waits in its slot
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  guest.join();
  EXPECT_EQ(got, iota(16, 5));
}

TEST(Suspend, ASaveThatFailsLeavesTheClientRunning) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(4096);
  c.put(p, iota(16, 5));
  const uint64_t before = tst::fake_allocated_bytes();
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, "/nonexistent-dir/vm.state");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("/nonexistent-dir"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  release(stub);
  EXPECT_EQ(tst::fake_allocated_bytes(), before);
  EXPECT_EQ(c.get(p, 16), iota(16, 5));
}

// An array's texels in and out, packed (ArrayCopyToInline / FromInline); w x h x d ints.
int32_t array_put(Client& c, uint64_t array, const std::vector<int>& v, uint64_t w, uint64_t h, uint64_t d = 1) {
  api::ArrayCopyArgs a{};
  a.array = array, a.width = w * 4, a.height = h, a.depth = d;
  return c.call<api::Call::ArrayCopyToInline>(a, nullptr, std::as_bytes(std::span(v)));
}
std::vector<int> array_get(Client& c, uint64_t array, uint64_t w, uint64_t h, uint64_t d = 1) {
  api::ArrayCopyArgs a{};
  a.array = array, a.width = w * 4, a.height = h, a.depth = d, a.flags = api::kArrayCopyFromArray;
  std::vector<std::byte> extra;
  EXPECT_EQ(c.call<api::Call::ArrayCopyFromInline>(a, nullptr, {}, &extra, uint32_t(w * h * d * 4)), 0);
  std::vector<int> v(extra.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), extra.data(), v.size() * 4);
  return v;
}
constexpr uint32_t kSignedInt32 = 0x0a;  // CU_AD_FORMAT_SIGNED_INT32

TEST(Suspend, ArraysComeBackWithTheirContentsBehindTheSameHandles) {
  Stub stub;
  Client c(stub);
  api::HandleReply a2{}, layered{}, mip{}, level1{};
  ASSERT_EQ(c.call<api::Call::ArrayCreate>({16, 8, 0, kSignedInt32, 1, 0, 0}, &a2), 0);
  ASSERT_EQ(c.call<api::Call::ArrayCreate>({4, 4, 3, kSignedInt32, 1, 1 /* layered */, 0}, &layered), 0);
  ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 8, 0, kSignedInt32, 1, 0, 3}, &mip), 0);
  ASSERT_EQ(c.call<api::Call::MipmappedArrayGetLevel>({mip.handle, 1, 0}, &level1), 0);
  ASSERT_EQ(array_put(c, a2.handle, iota(128, 1), 16, 8), 0);
  ASSERT_EQ(array_put(c, layered.handle, iota(48, 500), 4, 4, 3), 0);
  ASSERT_EQ(array_put(c, level1.handle, iota(16, 9000), 4, 4), 0);
  const uint64_t bytes = tst::fake_allocated_bytes();
  ASSERT_GE(bytes, (128 + 48 + 64 + 16 + 4) * 4u);

  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);  // the arrays went too
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(tst::fake_allocated_bytes(), bytes);
  EXPECT_EQ(array_get(c, a2.handle, 16, 8), iota(128, 1));
  EXPECT_EQ(array_get(c, layered.handle, 4, 4, 3), iota(48, 500));
  EXPECT_EQ(array_get(c, level1.handle, 4, 4), iota(16, 9000));
  // Through a state file too.
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-arrays.state";
  std::filesystem::remove(path);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  std::filesystem::remove(path);
  EXPECT_EQ(array_get(c, a2.handle, 16, 8), iota(128, 1));
  EXPECT_EQ(array_get(c, layered.handle, 4, 4, 3), iota(48, 500));
  EXPECT_EQ(array_get(c, level1.handle, 4, 4), iota(16, 9000));
  // The level's handle is the same one; new arrays get new handles.
  api::HandleReply again{}, fresh{};
  ASSERT_EQ(c.call<api::Call::MipmappedArrayGetLevel>({mip.handle, 1, 0}, &again), 0);
  EXPECT_EQ(again.handle, level1.handle);
  ASSERT_EQ(c.call<api::Call::ArrayCreate>({4, 4, 0, kSignedInt32, 1, 0, 0}, &fresh), 0);
  EXPECT_NE(fresh.handle, a2.handle);
  EXPECT_NE(fresh.handle, layered.handle);
  EXPECT_NE(fresh.handle, level1.handle);
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({mip.handle, 1, 0}), 0);
  EXPECT_EQ(c.call<api::Call::ArrayDestroy>({a2.handle, 0, 0}), 0);
}

// Texture and surface objects (host-stub/src/arrays.cc): kernels of tests/cuda/textures.cu
// (the fake's, tests/executor/fake_kernels.cc) read and write through them by value.
constexpr uint32_t kFloat = 0x20;  // CU_AD_FORMAT_FLOAT
uint64_t load_module(Client& c) {
  auto image = c.slot->heap().allocate(64);
  EXPECT_TRUE(image);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
  api::HandleReply mod{};
  EXPECT_EQ(c.call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
  c.slot->heap().free(image->offset);
  return mod.handle;
}
uint64_t function(Client& c, uint64_t mod, const std::string& name) {
  api::GetFunctionReply fn{};
  std::vector<std::byte> params;
  EXPECT_EQ(c.call<api::Call::ModuleGetFunction>({mod, uint32_t(name.size()), 0}, &fn, std::as_bytes(std::span(name)),
                                                 &params, 1024),
            0);
  return fn.function;
}
// A kernel's packed parameters: each value at the offset after the last (8-byte ones first).
struct Params {
  std::vector<std::byte> b;
  template <class T>
  Params& add(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
    return *this;
  }
};
int32_t launch(Client& c, uint64_t fn, uint32_t bx, uint32_t by, const Params& p) {
  return c.call<api::Call::LaunchKernel>({fn, {1, 1, 1}, {bx, by, 1}, 0, uint32_t(p.b.size()), 0}, nullptr, p.b);
}
uint64_t texture(Client& c, api::TextureCreateArgs t) {
  api::HandleReply r{};
  EXPECT_EQ(c.call<api::Call::TextureCreate>(t, &r), 0);
  return r.handle;
}
api::TextureCreateArgs on_array(uint64_t array, uint32_t resource = api::kTexResourceArray) {
  api::TextureCreateArgs t{};
  t.resource = resource;
  t.handle = array;
  return t;
}
uint64_t surface(Client& c, uint64_t array) {
  api::HandleReply r{};
  EXPECT_EQ(c.call<api::Call::SurfaceCreate>({array, 0, 0}, &r), 0);
  return r.handle;
}

// A client with textures on an array, a mipmapped array and device memory and surfaces on
// an array, some destroyed in between (their values are gaps), and what its kernels read.
struct TextureWorkload {
  uint64_t mod = 0, point = 0, linear = 0, fill = 0;
  uint64_t arr = 0, mip = 0, surf_arr = 0, lin = 0, out = 0;
  uint64_t t1 = 0, s2 = 0, t3 = 0, s5 = 0, t6 = 0, t7 = 0;
  std::vector<int> texels = iota(64, 0);

  void build(Client& c) {
    mod = load_module(c);
    point = function(c, mod, "_Z9tex_pointyPfii");
    linear = function(c, mod, "_Z12tex_linear1dyPii");
    fill = function(c, mod, "_Z9surf_fillyiii");
    api::HandleReply a{}, m{}, sa{};
    ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 8, 0, kFloat, 1, 0, 0}, &a), 0);
    ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 8, 0, kFloat, 1, 0, 2}, &m), 0);
    ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 4, 0, kSignedInt32, 1, 2 /* surface load/store */, 0}, &sa), 0);
    arr = a.handle, mip = m.handle, surf_arr = sa.handle;
    for (int i = 0; i < 64; ++i) texels[i] = std::bit_cast<int>(static_cast<float>(i) * 1.5f + 0.25f);
    ASSERT_EQ(array_put(c, arr, texels, 8, 8), 0);
    lin = c.malloc(64 * 4);
    c.put(lin, iota(64, 50));
    out = c.malloc(64 * 4);
    api::TextureCreateArgs tl{};
    tl.resource = api::kTexResourceLinear, tl.format = kSignedInt32, tl.channels = 1, tl.handle = lin, tl.bytes = 256;
    tl.tex_flags = 1;  // read as integer
    api::TextureCreateArgs clamp = on_array(arr);
    clamp.address_mode[0] = clamp.address_mode[1] = 3;  // border
    clamp.border_color[0] = 7.5f;
    // Values as the driver hands them out: per context from 1, one counter for both kinds,
    // the lowest free one first.
    t1 = texture(c, on_array(arr));
    const uint64_t t2 = texture(c, on_array(arr));
    t3 = texture(c, tl);
    const uint64_t t4 = texture(c, clamp);
    s5 = surface(c, surf_arr);
    t6 = texture(c, on_array(mip, api::kTexResourceMipmap));
    t7 = texture(c, clamp);
    EXPECT_EQ((std::vector<uint64_t>{t1, t2, t3, t4, s5, t6, t7}), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7}));
    ASSERT_EQ(c.call<api::Call::TextureDestroy>({t2}), 0);
    ASSERT_EQ(c.call<api::Call::TextureDestroy>({t4}), 0);
    s2 = surface(c, surf_arr);
    EXPECT_EQ(s2, 2u);  // a freed value again; 4 stays a gap
  }
  // What each object gives a kernel now: texels through t1 and t7, the memory through t3,
  // and the surface array after a fill through `surf`.
  std::vector<int> fetch(Client& c, uint64_t tex, uint32_t w = 8, uint32_t h = 8) {
    EXPECT_EQ(launch(c, point, w, h, Params{}.add(tex).add(out).add(int(w)).add(int(h))), 0);
    return c.get(out, w * h);
  }
  std::vector<int> fetch_linear(Client& c) {
    EXPECT_EQ(launch(c, linear, 64, 1, Params{}.add(t3).add(out).add(64)), 0);
    return c.get(out, 64);
  }
  std::vector<int> fill_surface(Client& c, uint64_t surf, int base) {
    EXPECT_EQ(launch(c, fill, 8, 4, Params{}.add(surf).add(8).add(4).add(base)), 0);
    return array_get(c, surf_arr, 8, 4);
  }
  static std::vector<int> filled(int base) {
    std::vector<int> v;
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 8; ++x) v.push_back(base + y * 1000 + x);
    return v;
  }
};

TEST(Suspend, TextureAndSurfaceObjectsComeBackWithTheirValues) {
  Stub stub;
  Client c(stub);
  TextureWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  const std::vector<int> through_t1 = w.fetch(c, w.t1), through_t7 = w.fetch(c, w.t7), through_t3 = w.fetch_linear(c);
  EXPECT_EQ(through_t1, w.texels);
  EXPECT_EQ(through_t3, [] { auto v = iota(64, 50); std::reverse(v.begin(), v.end()); return v; }());
  EXPECT_EQ(w.fill_surface(c, w.s2, 100), TextureWorkload::filled(100));
  const uint64_t bytes = tst::fake_allocated_bytes();
  auto same_values = [&](const char* after) {
    SCOPED_TRACE(after);
    EXPECT_EQ(tst::fake_allocated_bytes(), bytes);
    EXPECT_EQ(w.fetch(c, w.t1), through_t1);
    EXPECT_EQ(w.fetch(c, w.t7), through_t7);
    EXPECT_EQ(w.fetch_linear(c), through_t3);
    EXPECT_EQ(w.fill_surface(c, w.s2, 300), TextureWorkload::filled(300));
    EXPECT_EQ(w.fill_surface(c, w.s5, 200), TextureWorkload::filled(200));
  };

  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  same_values("suspend and resume");

  // Through a state file too.
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-textures.state";
  state::remove_state_file(path);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  state::remove_state_file(path);
  same_values("save and restore");

  // The placeholders the resume made for the gap are gone: the next objects get 4, then 8,
  // as they would have without the suspend; every object is destroyed by its value.
  EXPECT_EQ(texture(c, on_array(w.arr)), 4u);
  EXPECT_EQ(surface(c, w.surf_arr), 8u);
  for (uint64_t t : {w.t1, w.t3, w.t6, w.t7, uint64_t{4}}) EXPECT_EQ(c.call<api::Call::TextureDestroy>({t}), 0) << t;
  for (uint64_t s : {w.s2, w.s5, uint64_t{8}}) EXPECT_EQ(c.call<api::Call::SurfaceDestroy>({s}), 0) << s;
  EXPECT_EQ(c.call<api::Call::TextureDestroy>({w.t1}), CUDA_ERROR_INVALID_VALUE);
}

// A texture object made through a resource view (cudaResourceViewDesc) comes back with the
// same value and its view: here level 1 of a mipmapped array as its base level, which a texture
// of the whole array does not read.
struct TextureViewWorkload {
  static constexpr uint32_t kViewFloat1 = 0x16;  // CU_RES_VIEW_FORMAT_FLOAT_1X32
  uint64_t mod = 0, point = 0, mip = 0, out = 0, whole = 0, view = 0, lin = 0, on_lin = 0;
  std::vector<int> level0, level1;
  static std::vector<int> floats(int n, float base) {
    std::vector<int> v;
    for (int i = 0; i < n; ++i) v.push_back(std::bit_cast<int>(base + static_cast<float>(i) * 0.5f));
    return v;
  }
  void build(Client& c) {
    mod = load_module(c);
    point = function(c, mod, "_Z9tex_pointyPfii");
    api::HandleReply m{}, l0{}, l1{};
    ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 8, 0, kFloat, 1, 0, 2}, &m), 0);
    mip = m.handle;
    ASSERT_EQ(c.call<api::Call::MipmappedArrayGetLevel>({mip, 0, 0}, &l0), 0);
    ASSERT_EQ(c.call<api::Call::MipmappedArrayGetLevel>({mip, 1, 0}, &l1), 0);
    level0 = floats(64, 1.0f), level1 = floats(16, 500.0f);
    ASSERT_EQ(array_put(c, l0.handle, level0, 8, 8), 0);
    ASSERT_EQ(array_put(c, l1.handle, level1, 4, 4), 0);
    out = c.malloc(64 * 4);
    lin = c.malloc(256);
    api::TextureCreateArgs tl{};
    tl.resource = api::kTexResourceLinear, tl.format = kFloat, tl.channels = 1, tl.handle = lin, tl.bytes = 256;
    on_lin = texture(c, tl);
    whole = texture(c, on_array(mip, api::kTexResourceMipmap));
    api::TextureViewArgs v{};
    v.tex = on_array(mip, api::kTexResourceMipmap);
    v.format = kViewFloat1, v.width = 4, v.height = 4, v.first_mipmap_level = 1, v.last_mipmap_level = 1;
    api::HandleReply r{};
    ASSERT_EQ(c.call<api::Call::TextureCreateView>(v, &r), 0);
    view = r.handle;
  }
  std::vector<int> fetch(Client& c, uint64_t tex) {
    EXPECT_EQ(launch(c, point, 4, 4, Params{}.add(tex).add(out).add(4).add(4)), 0);
    return c.get(out, 16);
  }
  std::vector<int> level0_corner() const {
    std::vector<int> v;
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x) v.push_back(level0[y * 8 + x]);
    return v;
  }
};

TEST(Suspend, ATextureMadeThroughAResourceViewComesBackWithItsView) {
  Stub stub;
  Client c(stub);
  TextureViewWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  ASSERT_EQ(w.fetch(c, w.view), w.level1);
  ASSERT_EQ(w.fetch(c, w.whole), w.level0_corner());
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-texview.state";
  for (const bool save : {false, true}) {
    SCOPED_TRACE(save ? "save and restore" : "suspend and resume");
    state::remove_state_file(path);
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, save ? cc::Op::kSave : cc::Op::kSuspend, path);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, save ? cc::Op::kRestore : cc::Op::kResume, path);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
    EXPECT_EQ(w.fetch(c, w.view), w.level1) << "the view's base level was lost";
    EXPECT_EQ(w.fetch(c, w.whole), w.level0_corner());
  }
  state::remove_state_file(path);
  EXPECT_EQ(c.call<api::Call::TextureDestroy>({w.view}), 0);
  EXPECT_EQ(c.call<api::Call::TextureDestroy>({w.whole}), 0);
}

// A texture's resource view in a state file is untrusted: a flag that is neither 0 nor 1, an
// unknown format, a view of device memory, levels the array does not have are refused.
TEST(Suspend, AForgedTextureViewInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-texview-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-suspend-texview-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  TextureViewWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // A texture's record: kind (1 byte), id, parent, device (4), value, its resource id, its
  // description (a u32 length, then 112 bytes), then its view flag (1 byte) and the view:
  // format (4), width, height, depth (8 each), first and last level, first and last layer (4 each).
  constexpr size_t kValue = 21, kFlag = 37 + 4 + 112, kFormat = kFlag + 1, kLastLevel = kFormat + 4 + 24 + 4;
  const auto tex = static_cast<std::byte>(ObjectKind::TexObject);
  auto value_of = [](const std::vector<std::byte>& p) {
    uint64_t v;
    std::memcpy(&v, p.data() + kValue, 8);
    return v;
  };
  auto u32_at = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  const std::string view_name = "texture object " + std::to_string(w.view);
  const Forgery cases[] = {
      {"a view flag of 2", [&](auto& p) { if (p[0] == tex && value_of(p) == w.view) p[kFlag] = std::byte{2}; },
       "neither 0 nor 1"},
      {"an unknown view format", [&](auto& p) { if (p[0] == tex && value_of(p) == w.view) u32_at(p, kFormat, 0x99); },
       "unknown format"},
      {"a view of device memory",
       [&](auto& p) {
         if (p[0] != tex || value_of(p) != w.on_lin) return;
         p[kFlag] = std::byte{1};
         p.resize(p.size() + 4 + 24 + 16);
       },
       "a resource view of device memory"},
      {"a level the array does not have",
       [&](auto& p) { if (p[0] == tex && value_of(p) == w.view) u32_at(p, kLastLevel, 5); },
       view_name.c_str()},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) { EXPECT_EQ(tst::fake_allocated_bytes(), 0u); });
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(w.fetch(c, w.view), w.level1);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

TEST(Suspend, ATextureWhoseArrayIsFreedRefusesTheSuspendAndTheClientRunsOn) {
  Stub stub;
  Client c(stub);
  api::HandleReply a{};
  ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 8, 0, kSignedInt32, 1, 0, 0}, &a), 0);
  ASSERT_EQ(array_put(c, a.handle, iota(64, 3), 8, 8), 0);
  const uint64_t tex = texture(c, on_array(a.handle));
  api::HandleReply keep{};
  ASSERT_EQ(c.call<api::Call::ArrayCreate>({8, 8, 0, kSignedInt32, 1, 0, 0}, &keep), 0);
  ASSERT_EQ(array_put(c, keep.handle, iota(64, 9), 8, 8), 0);
  ASSERT_EQ(c.call<api::Call::ArrayDestroy>({a.handle, 0, 0}), 0);  // legal: the texture is not used again
  const uint64_t bytes = tst::fake_allocated_bytes();
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("texture object " + std::to_string(tex)), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("freed"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  release(stub);
  EXPECT_EQ(tst::fake_allocated_bytes(), bytes);
  EXPECT_EQ(array_get(c, keep.handle, 8, 8), iota(64, 9));
  // Once the program destroyed it, the suspend goes ahead.
  ASSERT_EQ(c.call<api::Call::TextureDestroy>({tex}), 0);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  EXPECT_EQ(array_get(c, keep.handle, 8, 8), iota(64, 9));
}

#if defined(VMCUDA_WITH_CUFFT) && defined(VMCUDA_WITH_CURAND)
std::vector<float> fetch_floats(Client& c, uint64_t p, size_t n) {
  std::vector<std::byte> extra;
  EXPECT_EQ(c.call<api::Call::CopyFromDeviceInline>({p, n * 4}, nullptr, {}, &extra, uint32_t(n * 4)), 0);
  std::vector<float> v(n);
  std::memcpy(v.data(), extra.data(), std::min(extra.size(), n * 4));
  return v;
}

TEST(Suspend, CufftPlansComeBackMadeByTheSameCallsWithTheirSettings) {
  Stub stub;
  Client c(stub);
  constexpr int kC2C = 0x29, kR2C = 0x2a;
  // One plan made at once, one in steps with its own work area and stream.
  ASSERT_EQ(c.call<api::Call::cufftPlan1d>({0x7000, 4, kC2C, 1}), 0);
  ASSERT_EQ(c.call<api::Call::cufftCreate>({0x7010}), 0);
  ASSERT_EQ(c.call<api::Call::cufftSetAutoAllocation>({0x7010, 0}), 0);
  ASSERT_EQ(c.call<api::Call::cufftMakePlan1d>({0x7010, 8, kR2C, 1}), 0);
  const uint64_t area = c.malloc(64);
  ASSERT_EQ(c.call<api::Call::cufftSetWorkArea>({0x7010, area}), 0);
  ASSERT_EQ(c.call<api::Call::StreamCreate>({0x9000, 0, 0}), 0);
  ASSERT_EQ(c.call<api::Call::cufftSetStream>({0x7010, 0x9000}), 0);
  const std::vector<float> x = {1, 2, 3, 4, 0, 0, 0, 0};
  const uint64_t in = c.malloc(32), out = c.malloc(40), cin = c.malloc(32), cout = c.malloc(32);
  ASSERT_EQ(c.call<api::Call::CopyToDeviceInline>({in}, nullptr, std::as_bytes(std::span(x))), 0);
  ASSERT_EQ(c.call<api::Call::CopyToDeviceInline>({cin}, nullptr, std::as_bytes(std::span(x))), 0);

  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_live_cufft_plans(), 0u);  // released with the client's GPU state
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  EXPECT_EQ(tst::fake_live_cufft_plans(), 2u);
  const auto made = tst::fake_cufft_newest_plan();  // made again in the same order: the stepwise one last
  EXPECT_EQ(made.nx, 8);
  EXPECT_EQ(made.type, kR2C);
  EXPECT_EQ(made.auto_allocation, 0);
  EXPECT_EQ(made.work_area, area);
  EXPECT_NE(made.stream, nullptr);
  // Both transform as before.
  ASSERT_EQ(c.call<api::Call::cufftExecR2C>({0x7010, in, out}), 0);
  EXPECT_NEAR(fetch_floats(c, out, 10)[0], 10, 1e-5);
  ASSERT_EQ(c.call<api::Call::cufftExecC2C>({0x7000, cin, cout, -1}), 0);
  // As complex values the input is 1+2i, 3+4i, 0, 0: bin 0 is their sum, 4+6i.
  EXPECT_NEAR(fetch_floats(c, cout, 8)[0], 4, 1e-5);
  EXPECT_NEAR(fetch_floats(c, cout, 8)[1], 6, 1e-5);
}

// cuRAND's types (curand.h) and the fake's statuses (tests/executor/fake_curand.cc).
constexpr int32_t kXorwow = 101, kPhilox = 161, kSobol32 = 201;
constexpr int32_t kLengthNotMultiple = 105;

template <class T>
std::vector<T> fetch(Client& c, uint64_t p, size_t n) {
  std::vector<std::byte> extra;
  EXPECT_EQ(c.call<api::Call::CopyFromDeviceInline>({p, n * sizeof(T)}, nullptr, {}, &extra, uint32_t(n * sizeof(T))), 0);
  std::vector<T> v(n);
  std::memcpy(v.data(), extra.data(), std::min(extra.size(), n * sizeof(T)));
  return v;
}

// Generators of each kind used, then (at `cut`) suspended and resumed, saved and restored, or
// neither: what each generates next. The same seeds, offsets and calls either way.
enum class Cut { kNone, kSuspend, kSave };
struct CurandRun {
  uint64_t philox, xorwow, sobol;
  std::vector<float> philox_next, sobol_next;
  std::vector<uint64_t> xorwow_next;

  void run(Stub& stub, Client& c, Cut cut, const std::string& path = {}) {
    const uint64_t buf = c.malloc(4096);
    auto uniform = [&](uint64_t g, uint64_t n) {
      return c.call<api::Call::curandGenerateUniform>({g, buf, n});
    };
    auto normal = [&](uint64_t g, uint64_t n) {
      api::curandGenerateNormal_Args a{};
      a.generator = g, a.outputPtr = buf, a.n = n, a.mean = 1, a.stddev = 2;
      return c.call<api::Call::curandGenerateNormal>(a);
    };
    // Philox: seeded, positioned, an odd count of normals (Philox takes them), a generation
    // repeated, the same seed again (the position stays), and a stream of its own.
    ASSERT_EQ(c.call<api::Call::curandCreateGenerator>({philox, kPhilox}), 0);
    ASSERT_EQ(c.call<api::Call::curandSetPseudoRandomGeneratorSeed>({philox, 1234}), 0);
    ASSERT_EQ(uniform(philox, 40), 0);  // dropped from the record by the offset below
    ASSERT_EQ(c.call<api::Call::curandSetGeneratorOffset>({philox, 5}), 0);
    ASSERT_EQ(uniform(philox, 6), 0);
    ASSERT_EQ(normal(philox, 3), 0);
    ASSERT_EQ(uniform(philox, 6), 0);
    ASSERT_EQ(uniform(philox, 6), 0);
    ASSERT_EQ(c.call<api::Call::curandSetPseudoRandomGeneratorSeed>({philox, 1234}), 0);
    ASSERT_EQ(uniform(philox, 2), 0);
    const uint64_t stream = philox + 0x300;  // a stream of each run's own
    ASSERT_EQ(c.call<api::Call::StreamCreate>({stream, 1, 0}), 0);
    ASSERT_EQ(c.call<api::Call::curandSetStream>({philox, stream}), 0);
    // XORWOW: an odd count of normals is refused (and so not replayed), seeds generated.
    ASSERT_EQ(c.call<api::Call::curandCreateGenerator>({xorwow, kXorwow}), 0);
    ASSERT_EQ(c.call<api::Call::curandSetPseudoRandomGeneratorSeed>({xorwow, 99}), 0);
    ASSERT_EQ(c.call<api::Call::curandGenerateSeeds>({xorwow}), 0);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(c.call<api::Call::curandGenerate>({xorwow, buf, 8}), 0);
    ASSERT_EQ(normal(xorwow, 3), kLengthNotMultiple);
    ASSERT_EQ(normal(xorwow, 4), 0);
    // A quasi-random generator with its dimensions.
    ASSERT_EQ(c.call<api::Call::curandCreateGenerator>({sobol, kSobol32}), 0);
    ASSERT_EQ(c.call<api::Call::curandSetQuasiRandomGeneratorDimensions>({sobol, 2}), 0);
    ASSERT_EQ(uniform(sobol, 4), 0);
    ASSERT_EQ(c.call<api::Call::StreamSynchronize>({0}), 0);

    if (cut != Cut::kNone) {
      ASSERT_TRUE(hold(stub));
      cc::Reply r = control(stub, cut == Cut::kSave ? cc::Op::kSave : cc::Op::kSuspend, path);
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
      r = control(stub, cut == Cut::kSave ? cc::Op::kRestore : cc::Op::kResume, path);
      ASSERT_TRUE(r.ok) << r.error;
      release(stub);
    }

    ASSERT_EQ(uniform(philox, 8), 0);
    philox_next = fetch<float>(c, buf, 8);
    ASSERT_EQ(c.call<api::Call::curandGenerateLongLong>({xorwow, buf, 4}), 0);
    xorwow_next = fetch<uint64_t>(c, buf, 4);
    ASSERT_EQ(uniform(sobol, 4), 0);
    sobol_next = fetch<float>(c, buf, 4);
    for (uint64_t g : {philox, xorwow, sobol}) ASSERT_EQ(c.call<api::Call::curandDestroyGenerator>({g}), 0);
  }
};

TEST(Suspend, CurandGeneratorsComeBackWhereTheyStoodInTheirSequences) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-curand." + std::to_string(::getpid()) + ".state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  const uint64_t base = api::kFirstGuestHandle + 0x7000;
  CurandRun plain{base, base + 1, base + 2};
  ASSERT_NO_FATAL_FAILURE(plain.run(stub, c, Cut::kNone));
  for (Cut cut : {Cut::kSuspend, Cut::kSave}) {
    SCOPED_TRACE(cut == Cut::kSave ? "save and restore" : "suspend and resume");
    CurandRun cut_run{base + 0x10 * (int(cut) + 1), base + 0x10 * (int(cut) + 1) + 1,
                      base + 0x10 * (int(cut) + 1) + 2};
    ASSERT_NO_FATAL_FAILURE(cut_run.run(stub, c, cut, path));
    EXPECT_EQ(cut_run.philox_next, plain.philox_next);
    EXPECT_EQ(cut_run.xorwow_next, plain.xorwow_next);
    EXPECT_EQ(cut_run.sobol_next, plain.sobol_next);
    state::remove_state_file(path);
  }
  // Not the same numbers as the start of the sequence: the position really was brought back.
  CurandRun fresh{base + 0x40, base + 0x41, base + 0x42};
  const uint64_t buf = c.malloc(64);
  ASSERT_EQ(c.call<api::Call::curandCreateGenerator>({fresh.philox, kPhilox}), 0);
  ASSERT_EQ(c.call<api::Call::curandSetPseudoRandomGeneratorSeed>({fresh.philox, 1234}), 0);
  ASSERT_EQ(c.call<api::Call::curandGenerateUniform>({fresh.philox, buf, 8}), 0);
  EXPECT_NE(fetch<float>(c, buf, 8), plain.philox_next);
}

TEST(Suspend, ACurandGeneratorWhoseRecordOverflowsRefusesTheSuspendUntilDestroyed) {
  Stub stub;
  Client c(stub);
  const uint64_t g = api::kFirstGuestHandle + 0x7010, buf = c.malloc(4096);
  ASSERT_EQ(c.call<api::Call::curandCreateGenerator>({g, kPhilox}), 0);
  // Generations of different sizes: each one a step of its own.
  for (uint64_t i = 0; i < kCurandMaxSteps + 4; ++i)
    ASSERT_EQ(c.call<api::Call::curandGenerateUniform>({g, buf, 1 + i % 2}), 0);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cuRAND generator"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("curandDestroyGenerator"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  release(stub);
  // The client runs on; once it destroyed the generator, the suspend goes ahead.
  ASSERT_EQ(c.call<api::Call::curandGenerateUniform>({g, buf, 4}), 0);
  ASSERT_EQ(c.call<api::Call::curandDestroyGenerator>({g}), 0);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
}

// A generator's record in a state file is the guest's to forge: steps that are no cuRAND
// call, a replay beyond the bound, no creation first are refused, and the client stays
// suspended with the file untouched.
TEST(Suspend, AHostileCurandRecordInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-curand-good." + std::to_string(::getpid()) + ".state";
  const std::string bad = path + ".bad";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  const uint64_t g = api::kFirstGuestHandle + 0x7020, buf = c.malloc(256);
  ASSERT_EQ(c.call<api::Call::curandCreateGenerator>({g, kPhilox}), 0);
  ASSERT_EQ(c.call<api::Call::curandGenerateUniform>({g, buf, 16}), 0);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // The object record: kind, id, parent, device, handle (29 bytes), then the stream (8), the
  // step count (4) and each step: call (4), repeat (8), arguments (a u32 length, the bytes).
  constexpr size_t kSteps = 37, kFirst = 41, kCreateArgs = 16;
  constexpr size_t kSecond = kFirst + 4 + 8 + 4 + kCreateArgs;
  const auto gen = static_cast<std::byte>(ObjectKind::CurandGenerator);
  auto put32 = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  auto put64 = [](std::vector<std::byte>& p, size_t at, uint64_t v) { std::memcpy(p.data() + at, &v, 8); };
  const Forgery cases[] = {
      {"no steps", [&](auto& p) { if (p[0] == gen) put32(p, kSteps, 0); }, "bad generator"},
      {"too many steps", [&](auto& p) { if (p[0] == gen) put32(p, kSteps, kCurandMaxSteps + 1); }, "bad generator"},
      {"a call that is not cuRAND's", [&](auto& p) { if (p[0] == gen) put32(p, kSecond, 0x10); }, "not a cuRAND call"},
      {"a replay of more than a resume generates",
       [&](auto& p) { if (p[0] == gen) put64(p, kSecond + 4, 1ull << 40); }, "repeated too often"},
      {"a repeat of 0", [&](auto& p) { if (p[0] == gen) put64(p, kSecond + 4, 0); }, "repeated too often"},
      {"no creation first",
       [&](auto& p) { if (p[0] == gen) put32(p, kFirst, uint32_t(api::Call::curandSetGeneratorOffset)); }, "creation"},
      {"arguments cut short", [&](auto& p) { if (p[0] == gen) p.resize(p.size() - 4); }, "cuRAND generator"},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  });
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  ASSERT_EQ(c.call<api::Call::curandGenerateUniform>({g, buf, 4}), 0);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}
#endif

#if defined(VMCUDA_WITH_CUSPARSE) && defined(VMCUDA_WITH_CUSOLVER)
// cuSPARSE and cuSOLVER objects (host-stub/src/nvobj.cc): carried as the calls that made and
// set them, replayed in the client's order once memory is back. The fake (tests/executor/
// fake_cusparse.cc) keeps an SpSV analysis and an SpGEMM product in the descriptor, as the
// library does: a solve or copy after the resume works only if they were replayed.
struct SparseWork {
  static constexpr int kR32F = 0, kR64F = 1, kIdx32 = 2;
  static constexpr uint64_t h = 0x7100, A = 0x7110, x = 0x7120, y = 0x7130, sv = 0x7140, B = 0x7150, C = 0x7160,
                            gm = 0x7170, sh = 0x7180, sp = 0x7190, sj = 0x71a0, stream = 0x9100;
  uint64_t xp = 0, yp = 0, cvals = 0;
  template <class T>
  static uint64_t upload(Client& c, const std::vector<T>& v) {
    const uint64_t p = c.malloc(v.size() * sizeof(T));
    EXPECT_EQ(c.call<api::Call::CopyToDeviceInline>({p}, nullptr, std::as_bytes(std::span(v))), 0);
    return p;
  }
  template <class T>
  static std::vector<T> get(Client& c, uint64_t p, size_t n) {
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<api::Call::CopyFromDeviceInline>({p, n * sizeof(T)}, nullptr, {}, &extra, uint32_t(n * sizeof(T))),
              0);
    std::vector<T> v(n);
    std::memcpy(v.data(), extra.data(), std::min(extra.size(), n * sizeof(T)));
    return v;
  }
  static void scalar(uint64_t (&to)[2], float v) { std::memcpy(to, &v, 4); }
  static uint64_t csr(Client& c, uint64_t guest, std::vector<int> off, std::vector<int> ind, std::vector<float> val) {
    api::cusparseCreateCsr_Args a{};
    a.spMatDescr = guest, a.rows = int64_t(off.size() - 1), a.cols = a.rows, a.nnz = int64_t(ind.size());
    a.csrRowOffsets = upload(c, off), a.csrColInd = upload(c, ind), a.csrValues = upload(c, val);
    a.csrRowOffsetsType = a.csrColIndType = kIdx32, a.valueType = kR32F;
    EXPECT_EQ(c.call<api::Call::cusparseCreateCsr>(a), 0);
    return guest;
  }
  // Up to the SpSV analysis and the SpGEMM compute, the handle on a stream of its own.
  void build(Client& c) {
    ASSERT_EQ(c.call<api::Call::StreamCreate>({stream, 0, 0}), 0);
    ASSERT_EQ(c.call<api::Call::cusparseCreate>({h}), 0);
    ASSERT_EQ(c.call<api::Call::cusparseSetStream>({h, stream}), 0);
    // A = [[2,0,0],[1,3,0],[4,0,5]] with an upper entry the lower fill mode leaves out.
    csr(c, A, {0, 2, 4, 6}, {0, 2, 0, 1, 0, 2}, {2, 9, 1, 3, 4, 5});
    api::cusparseSpMatSetAttribute_Args fill{};
    fill.spMatDescr = A, fill.attribute = 0, fill.dataSize = 4;  // CUSPARSE_SPMAT_FILL_MODE: lower (0)
    ASSERT_EQ(c.call<api::Call::cusparseSpMatSetAttribute>(fill), 0);
    xp = upload(c, std::vector<float>{2, 7, 13}), yp = upload(c, std::vector<float>{0, 0, 0});
    for (auto [guest, p] : {std::pair{x, xp}, std::pair{y, yp}}) {
      api::cusparseCreateDnVec_Args v{};
      v.dnVecDescr = guest, v.size = 3, v.values = p, v.valueType = kR32F;
      ASSERT_EQ(c.call<api::Call::cusparseCreateDnVec>(v), 0);
    }
    ASSERT_EQ(c.call<api::Call::cusparseSpSV_createDescr>({sv}), 0);
    api::cusparseSpSV_analysis_Args an{};
    an.handle = h, an.matA = A, an.vecX = x, an.vecY = y, an.computeType = kR32F, an.spsvDescr = sv;
    an.externalBuffer = c.malloc(256);
    scalar(an.alpha, 1);
    ASSERT_EQ(c.call<api::Call::cusparseSpSV_analysis>(an), 0);
    // SpGEMM: C = A B with B = the identity scaled by 2; C's arrays come after the compute.
    csr(c, B, {0, 1, 2, 3}, {0, 1, 2}, {2, 2, 2});
    api::cusparseCreateCsr_Args cc{};
    cc.spMatDescr = C, cc.rows = 3, cc.cols = 3, cc.csrRowOffsetsType = cc.csrColIndType = kIdx32, cc.valueType = kR32F;
    ASSERT_EQ(c.call<api::Call::cusparseCreateCsr>(cc), 0);
    ASSERT_EQ(c.call<api::Call::cusparseSpGEMM_createDescr>({gm}), 0);
    api::cusparseSpGEMM_workEstimation_Args we{};
    we.handle = h, we.matA = A, we.matB = B, we.matC = C, we.computeType = kR32F, we.spgemmDescr = gm;
    scalar(we.alpha, 1), scalar(we.beta, 0);
    api::cusparseSpGEMM_workEstimation_Reply wr{};
    ASSERT_EQ(c.call<api::Call::cusparseSpGEMM_workEstimation>(we, &wr), 0);
    we.bufferSize1 = wr.bufferSize1, we.externalBuffer1 = c.malloc(wr.bufferSize1);
    ASSERT_EQ(c.call<api::Call::cusparseSpGEMM_workEstimation>(we, &wr), 0);
    api::cusparseSpGEMM_compute_Args co{};
    co.handle = h, co.matA = A, co.matB = B, co.matC = C, co.computeType = kR32F, co.spgemmDescr = gm;
    scalar(co.alpha, 1), scalar(co.beta, 0);
    api::cusparseSpGEMM_compute_Reply cr{};
    ASSERT_EQ(c.call<api::Call::cusparseSpGEMM_compute>(co, &cr), 0);
    co.bufferSize2 = cr.bufferSize2, co.externalBuffer2 = c.malloc(cr.bufferSize2);
    ASSERT_EQ(c.call<api::Call::cusparseSpGEMM_compute>(co, &cr), 0);
    // cuSOLVER: a handle on the stream and a parameters object with an option set.
    ASSERT_EQ(c.call<api::Call::cusolverDnCreate>({sh}), 0);
    ASSERT_EQ(c.call<api::Call::cusolverDnSetStream>({sh, stream}), 0);
    ASSERT_EQ(c.call<api::Call::cusolverDnCreateParams>({sp}), 0);
    ASSERT_EQ(c.call<api::Call::cusolverDnSetAdvOptions>({sp, 0 /* CUSOLVERDN_GETRF */, 0 /* ALG_0 */}), 0);
    // A syevj information object that leaves the eigenvalues unsorted.
    ASSERT_EQ(c.call<api::Call::cusolverDnCreateSyevjInfo>({sj}), 0);
    ASSERT_EQ(c.call<api::Call::cusolverDnXsyevjSetTolerance>({sj, 1e-10}), 0);
    ASSERT_EQ(c.call<api::Call::cusolverDnXsyevjSetSortEig>({sj, 0}), 0);
  }
  // The solve and the product's copy (what needs the replayed analysis and compute).
  void finish(Client& c) {
    api::cusparseSpSV_solve_Args so{};
    so.handle = h, so.matA = A, so.vecX = x, so.vecY = y, so.computeType = kR32F, so.spsvDescr = sv;
    scalar(so.alpha, 1);
    ASSERT_EQ(c.call<api::Call::cusparseSpSV_solve>(so), 0);
    EXPECT_EQ(get<float>(c, yp, 3), (std::vector<float>{1, 2, 1.8f}));  // 2y0=2, y0+3y1=7, 4y0+5y2=13
    api::cusparseSpMatGetSize_Reply sz{};
    ASSERT_EQ(c.call<api::Call::cusparseSpMatGetSize>({C}, &sz), 0);
    ASSERT_EQ(sz.nnz, 6u);  // A's entries (the upper one too: SpGEMM takes the whole matrix)
    api::cusparseCsrSetPointers_Args sp{};
    sp.spMatDescr = C, sp.csrRowOffsets = c.malloc(16), sp.csrColInd = c.malloc(24), sp.csrValues = cvals = c.malloc(24);
    ASSERT_EQ(c.call<api::Call::cusparseCsrSetPointers>(sp), 0);
    api::cusparseSpGEMM_copy_Args cp{};
    cp.handle = h, cp.matA = A, cp.matB = B, cp.matC = C, cp.computeType = kR32F, cp.spgemmDescr = gm;
    scalar(cp.alpha, 1), scalar(cp.beta, 0);
    ASSERT_EQ(c.call<api::Call::cusparseSpGEMM_copy>(cp), 0);
    EXPECT_EQ(get<float>(c, cvals, 6), (std::vector<float>{4, 18, 2, 6, 8, 10}));
    EXPECT_EQ(get<int>(c, sp.csrRowOffsets, 4), (std::vector<int>{0, 2, 4, 6}));
    // [[3,1],[1,1]]: eigenvalues 2 +- sqrt(2), the larger first as one rotation leaves them
    // (sorted only if the information object's setting was lost).
    const uint64_t a = upload(c, std::vector<double>{3, 1, 1, 1}), wv = upload(c, std::vector<double>{0, 0});
    api::cusolverDnDsyevj_Args ej{};
    ej.handle = sh, ej.jobz = 0, ej.uplo = 0, ej.n = 2, ej.A = a, ej.lda = 2, ej.W = wv, ej.work = c.malloc(64);
    ej.lwork = 4, ej.info = upload(c, std::vector<int>{-1}), ej.params = sj;
    ASSERT_EQ(c.call<api::Call::cusolverDnDsyevj>(ej), 0);
    const std::vector<double> w = get<double>(c, wv, 2);
    EXPECT_NEAR(w[0], 2 + std::sqrt(2.0), 1e-9);
    EXPECT_NEAR(w[1], 2 - std::sqrt(2.0), 1e-9);
  }
};

TEST(Suspend, CusparseAndCusolverObjectsComeBackByTheirCallsInTheClientsOrder) {
  // Uninterrupted, suspended and resumed, saved and restored: the same results.
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-sparse." + std::to_string(::getpid()) + ".state";
  for (int cut : {0, 1, 2}) {
    SCOPED_TRACE(cut);
    Stub stub;
    Client c(stub);
    SparseWork w;
    ASSERT_NO_FATAL_FAILURE(w.build(c));
    if (cut) {
      ASSERT_TRUE(hold(stub));
      cc::Reply r = control(stub, cut == 1 ? cc::Op::kSuspend : cc::Op::kSave, cut == 1 ? std::string() : path);
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(tst::fake_live_cusparse_objects(), 0u);  // released with the client's GPU state
      EXPECT_EQ(tst::fake_live_cusolver_objects(), 0u);
      r = control(stub, cut == 1 ? cc::Op::kResume : cc::Op::kRestore, cut == 1 ? std::string() : path);
      ASSERT_TRUE(r.ok) << r.error;
      release(stub);
      EXPECT_EQ(tst::fake_live_cusparse_objects(), 8u);  // h, A, x, y, sv, B, C, gm
      EXPECT_EQ(tst::fake_live_cusolver_objects(), 3u);
    }
    ASSERT_NO_FATAL_FAILURE(w.finish(c));
    // A second suspend carries them again (the replay recorded them anew).
    ASSERT_TRUE(hold(stub));
    ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
    ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
    release(stub);
    api::cusparseSpMatGetSize_Reply sz{};
    ASSERT_EQ(c.call<api::Call::cusparseSpMatGetSize>({w.C}, &sz), 0);
    EXPECT_EQ(sz.nnz, 6u);
    state::remove_state_file(path);
  }
}

TEST(Suspend, ASparseStepNamingADestroyedObjectRefusesTheSuspendUntilItGoes) {
  Stub stub;
  Client c(stub);
  SparseWork w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  // The analysis named x: without it the descriptor cannot be made again.
  ASSERT_EQ(c.call<api::Call::cusparseDestroyDnVec>({w.x}), 0);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cusparseSpSV_analysis"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("destroyed"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  release(stub);
  ASSERT_EQ(c.call<api::Call::cusparseSpSV_destroyDescr>({w.sv}), 0);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  // Setters replace their earlier record: a stream set a thousand times is one step.
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(c.call<api::Call::cusparseSetStream>({w.h, i % 2 ? w.stream : 0}), 0);
  // A stream the program destroyed after setting it: the handle runs on the default one.
  ASSERT_EQ(c.call<api::Call::StreamDestroy>({w.stream}), 0);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
}

// The legacy API's ILU(0) info (api/libs/cusparse.calls): its analysis is replayed at a resume
// (the fake's factorization needs it); between a factorization and the program's reading of its
// zero pivot a suspend is refused, saying why (a replay could not make the pivot again).
TEST(Suspend, AnIluInfoComesBackWithItsAnalysisAndAnUnreadZeroPivotRefusesTheSuspend) {
  Stub stub;
  Client c(stub);
  const uint64_t h = 0x7300, info = 0x7310;
  ASSERT_EQ(c.call<api::Call::cusparseCreate>({h}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseCreateCsrilu02Info>({info}), 0);
  // [[1,1],[1,1]]: U(1,1) = 0, a numerical zero pivot at 1.
  const uint64_t off = SparseWork::upload(c, std::vector<int>{0, 2, 4});
  const uint64_t col = SparseWork::upload(c, std::vector<int>{0, 1, 0, 1});
  const uint64_t val = SparseWork::upload(c, std::vector<double>{1, 1, 1, 1}), buf = c.malloc(512);
  api::cusparseDcsrilu02_analysis_Args an{};
  an.handle = h, an.m = 2, an.nnz = 4, an.csrSortedValA = val, an.csrSortedRowPtrA = off, an.csrSortedColIndA = col;
  an.info = info, an.pBuffer = buf;
  ASSERT_EQ(c.call<api::Call::cusparseDcsrilu02_analysis>(an), 0);
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  api::cusparseDcsrilu02_Args f{};
  f.handle = h, f.m = 2, f.nnz = 4, f.csrSortedValA_valM = val, f.csrSortedRowPtrA = off, f.csrSortedColIndA = col;
  f.info = info, f.pBuffer = buf;
  ASSERT_EQ(c.call<api::Call::cusparseDcsrilu02>(f), 0);  // the replayed analysis is there
  EXPECT_EQ(SparseWork::get<double>(c, val, 4), (std::vector<double>{1, 1, 1, 0}));
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("zero pivot"), std::string::npos) << r.error;
  release(stub);
  api::cusparseXcsrilu02_zeroPivot_Reply pos{};
  ASSERT_EQ(c.call<api::Call::cusparseXcsrilu02_zeroPivot>({h, info, 0}, &pos), 0);
  EXPECT_EQ(pos.library_status, 9u);  // CUSPARSE_STATUS_ZERO_PIVOT
  EXPECT_EQ(int32_t(pos.position), 1);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  EXPECT_EQ(tst::fake_live_cusparse_objects(), 2u);  // the handle and the info
  ASSERT_EQ(c.call<api::Call::cusparseDestroyCsrilu02Info>({info}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseDestroy>({h}), 0);
}

// A BSR triangular solve's info (bsrsv2, api/libs/cusparse.calls: numbered in cuSPARSE's second
// area): its analysis is replayed at a resume (the fake's solve needs it); a solve leaves a
// zero pivot the program has not read, which refuses a suspend until it is read. A forged
// state that makes the info another kind of object, or one this build does not know, is refused.
TEST(Suspend, ABsrsv2InfoComesBackWithItsAnalysisAndAForgedOneIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-bsrsv2." + std::to_string(::getpid()) + ".state";
  const std::string bad = path + ".bad";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  const uint64_t h = 0x7400, info = 0x7410;
  ASSERT_EQ(c.call<api::Call::cusparseCreate>({h}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseCreateBsrsv2Info>({info}), 0);
  // Lower triangle of [[2,0,0,0],[1,2,0,0],[0,0,4,0],[0,0,1,4]] in 2x2 blocks (row-major): block
  // row 1 is the second diagonal block only.
  const uint64_t row = SparseWork::upload(c, std::vector<int>{0, 1, 2});
  const uint64_t col = SparseWork::upload(c, std::vector<int>{0, 1});
  const uint64_t val = SparseWork::upload(c, std::vector<double>{2, 0, 1, 2, 4, 0, 1, 4}), buf = c.malloc(512);
  const uint64_t f = SparseWork::upload(c, std::vector<double>{2, 3, 4, 9}), x = c.malloc(4 * sizeof(double));
  api::cusparseDbsrsv2_analysis_Args an{};
  an.handle = h, an.mb = 2, an.nnzb = 2, an.bsrSortedValA = val, an.bsrSortedRowPtrA = row, an.bsrSortedColIndA = col;
  an.blockDim = 2, an.info = info, an.pBuffer = buf;
  ASSERT_EQ(c.call<api::Call::cusparseDbsrsv2_analysis>(an), 0);
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  api::cusparseDbsrsv2_solve_Args sv{};
  sv.handle = h, sv.mb = 2, sv.nnzb = 2, sv.bsrSortedValA = val, sv.bsrSortedRowPtrA = row, sv.bsrSortedColIndA = col;
  sv.blockDim = 2, sv.info = info, sv.f = f, sv.x = x, sv.pBuffer = buf;
  const double one = 1;
  std::memcpy(sv.alpha, &one, sizeof one);
  ASSERT_EQ(c.call<api::Call::cusparseDbsrsv2_solve>(sv), 0);  // the replayed analysis is there
  EXPECT_EQ(SparseWork::get<double>(c, x, 4), (std::vector<double>{1, 1, 1, 2}));
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("zero pivot has not been read"), std::string::npos) << r.error;
  release(stub);
  api::cusparseXbsrsv2_zeroPivot_Reply pos{};
  ASSERT_EQ(c.call<api::Call::cusparseXbsrsv2_zeroPivot>({h, info, 0}, &pos), 0);
  EXPECT_EQ(pos.library_status, 0u);
  EXPECT_EQ(int32_t(pos.position), -1);
  ASSERT_TRUE(hold(stub));
  r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // The object record: kind, id, parent, device, handle (29 bytes), then the type (4).
  constexpr size_t kType = 29;
  const auto sparse = static_cast<std::byte>(ObjectKind::Cusparse);
  auto type_of = [](const std::vector<std::byte>& p) {
    int32_t t;
    std::memcpy(&t, p.data() + kType, 4);
    return t;
  };
  auto put32 = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  constexpr int32_t kBsrsv2Info = 12, kPruneInfo = 14;
  const Forgery cases[] = {
      {"a bsrsv2 info made a bsrsm2 info",
       [&](auto& p) { if (p[0] == sparse && type_of(p) == kBsrsv2Info) put32(p, kType, 13); }, "creation"},
      {"a type past the prune info",
       [&](auto& p) { if (p[0] == sparse && type_of(p) == kBsrsv2Info) put32(p, kType, kPruneInfo + 1); }, "unknown type"},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_live_cusparse_objects(), 0u);
  });
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  ASSERT_EQ(c.call<api::Call::cusparseDbsrsv2_solve>(sv), 0);  // restored with its analysis
  ASSERT_EQ(c.call<api::Call::cusparseXbsrsv2_zeroPivot>({h, info, 0}, &pos), 0);
  EXPECT_EQ(tst::fake_live_cusparse_objects(), 2u);  // the handle and the info
  ASSERT_EQ(c.call<api::Call::cusparseDestroyBsrsv2Info>({info}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseDestroy>({h}), 0);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// A bsrsm2 info (api/libs/cusparse.calls): its bufferSize writes the number of right-hand sides
// into it, which the analysis checks (NVIDIA's libcusparse 12.6 answers an analysis of more with
// CUSPARSE_STATUS_INVALID_VALUE, as the fake does), so a resume replays the bufferSize before the
// analysis on the new info; the solve then finds the analysis there. Twice: the replay records
// both anew.
TEST(Suspend, ABsrsm2InfoComesBackWithItsBufferSizeBeforeItsAnalysis) {
  Stub stub;
  Client c(stub);
  const uint64_t h = 0x7500, sm = 0x7510, bare = 0x7520;
  ASSERT_EQ(c.call<api::Call::cusparseCreate>({h}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseCreateBsrsm2Info>({sm}), 0);
  // [[2,0],[1,2]] as one 2x2 block (row-major), one right-hand side.
  const uint64_t row = SparseWork::upload(c, std::vector<int>{0, 1});
  const uint64_t col = SparseWork::upload(c, std::vector<int>{0});
  const uint64_t val = SparseWork::upload(c, std::vector<double>{2, 0, 1, 2}), buf = c.malloc(512);
  const uint64_t b = SparseWork::upload(c, std::vector<double>{2, 4}), x = c.malloc(2 * sizeof(double));
  api::cusparseDbsrsm2_bufferSize_Args size{};
  size.handle = h, size.mb = 1, size.n = 1, size.nnzb = 1, size.bsrSortedVal = val, size.bsrSortedRowPtr = row;
  size.bsrSortedColInd = col, size.blockSize = 2, size.info = sm;
  api::cusparseDbsrsm2_bufferSize_Reply bytes{};
  ASSERT_EQ(c.call<api::Call::cusparseDbsrsm2_bufferSize>(size, &bytes), 0);
  api::cusparseDbsrsm2_analysis_Args an{};
  an.handle = h, an.mb = 1, an.n = 1, an.nnzb = 1, an.bsrSortedVal = val, an.bsrSortedRowPtr = row;
  an.bsrSortedColInd = col, an.blockSize = 2, an.info = sm, an.pBuffer = buf;
  ASSERT_EQ(c.call<api::Call::cusparseDbsrsm2_analysis>(an), 0);
  // What the resume would do without the bufferSize: the analysis on a new info is refused.
  ASSERT_EQ(c.call<api::Call::cusparseCreateBsrsm2Info>({bare}), 0);
  api::cusparseDbsrsm2_analysis_Args on_bare = an;
  on_bare.info = bare;
  EXPECT_EQ(c.call<api::Call::cusparseDbsrsm2_analysis>(on_bare), 3);  // CUSPARSE_STATUS_INVALID_VALUE
  ASSERT_EQ(c.call<api::Call::cusparseDestroyBsrsm2Info>({bare}), 0);
  api::cusparseDbsrsm2_solve_Args sv{};
  sv.handle = h, sv.mb = 1, sv.n = 1, sv.nnzb = 1, sv.bsrSortedVal = val, sv.bsrSortedRowPtr = row;
  sv.bsrSortedColInd = col, sv.blockSize = 2, sv.info = sm, sv.B = b, sv.ldb = 2, sv.X = x, sv.ldx = 2, sv.pBuffer = buf;
  const double one = 1;
  std::memcpy(sv.alpha, &one, sizeof one);
  for (int cycle = 0; cycle < 2; ++cycle) {
    SCOPED_TRACE(cycle);
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
    EXPECT_EQ(tst::fake_live_cusparse_objects(), 2u);  // the handle and the info
    ASSERT_EQ(c.call<api::Call::cusparseDbsrsm2_solve>(sv), 0);  // the replayed analysis is there
    EXPECT_EQ(SparseWork::get<double>(c, x, 2), (std::vector<double>{1, 1.5}));
    api::cusparseXbsrsm2_zeroPivot_Reply pos{};
    ASSERT_EQ(c.call<api::Call::cusparseXbsrsm2_zeroPivot>({h, sm, 0}, &pos), 0);
    EXPECT_EQ(int32_t(pos.position), -1);
  }
  ASSERT_EQ(c.call<api::Call::cusparseDestroyBsrsm2Info>({sm}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseDestroy>({h}), 0);
}

// An object's record in a state file is the guest's to forge: an unknown type, no steps or too
// many, a step that is no call the objects replay, recorded on another object, out of order,
// are refused, and the client stays suspended with the file untouched.
TEST(Suspend, AHostileCusparseRecordInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-sparse-good." + std::to_string(::getpid()) + ".state";
  const std::string bad = path + ".bad";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  const uint64_t h = 0x7200;
  ASSERT_EQ(c.call<api::Call::cusparseCreate>({h}), 0);
  ASSERT_EQ(c.call<api::Call::cusparseSetPointerMode>({h, 1}), 0);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // The object record: kind, id, parent, device, handle (29 bytes), then the type (4), the step
  // count (4) and each step: seq (8), call (4), arguments (a u32 length, the bytes).
  constexpr size_t kType = 29, kSteps = 33, kFirst = 37, kCreateArgs = 8;
  constexpr size_t kSecond = kFirst + 8 + 4 + 4 + kCreateArgs;
  const auto sparse = static_cast<std::byte>(ObjectKind::Cusparse);
  auto put32 = [](std::vector<std::byte>& p, size_t at, uint32_t v) { std::memcpy(p.data() + at, &v, 4); };
  auto put64 = [](std::vector<std::byte>& p, size_t at, uint64_t v) { std::memcpy(p.data() + at, &v, 8); };
  const Forgery cases[] = {
      {"an unknown type", [&](auto& p) { if (p[0] == sparse) put32(p, kType, 99); }, "unknown type"},
      {"a negative type", [&](auto& p) { if (p[0] == sparse) put32(p, kType, uint32_t(-1)); }, "unknown type"},
      {"no steps", [&](auto& p) { if (p[0] == sparse) put32(p, kSteps, 0); }, "too many steps"},
      {"too many steps", [&](auto& p) { if (p[0] == sparse) put32(p, kSteps, kNvobjMaxSteps + 1); }, "too many steps"},
      {"a call that is not cuSPARSE's", [&](auto& p) { if (p[0] == sparse) put32(p, kFirst + 8, 0x10); }, "not a call"},
      {"a call of the wrong size",
       [&](auto& p) { if (p[0] == sparse) put32(p, kFirst + 8, uint32_t(api::Call::cusparseSetPointerMode)); }, "not a call"},
      {"the creation of another object", [&](auto& p) { if (p[0] == sparse) put64(p, kFirst + 16, 0x7300); }, "another object"},
      {"a descriptor's creation for a handle",
       [&](auto& p) { if (p[0] == sparse) put32(p, kFirst + 8, uint32_t(api::Call::cusparseSpSV_createDescr)); }, "creation"},
      {"steps out of order", [&](auto& p) { if (p[0] == sparse) put64(p, kSecond, 0); }, "out of order"},
      {"a cuSOLVER record of a cuSPARSE type",
       [&](auto& p) { if (p[0] == sparse) p[0] = static_cast<std::byte>(ObjectKind::Cusolver); }, "not a call"},
      {"arguments cut short", [&](auto& p) { if (p[0] == sparse) p.resize(p.size() - 4); }, "cuSPARSE handle"},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_live_cusparse_objects(), 0u);
  });
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  // Made again with its pointer mode: a device scalar that is not the client's is refused.
  api::cusparseSpMV_Args m{};
  m.handle = h, m.alpha_ptr = 0x10;
  EXPECT_NE(c.call<api::Call::cusparseSpMV>(m), 0);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}
#endif

TEST(Suspend, AHostileTextureRecordInAStateFileIsRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-tex-good.state";
  const std::string bad = ::testing::TempDir() + "vmcuda-suspend-tex-bad.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  TextureWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  const std::vector<int> through_t1 = w.fetch(c, w.t1);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // An object record: kind (1 byte), id, parent, device (4), value, then the texture's
  // resource id, its description (a u32 length, then the bytes) or the surface's array id.
  constexpr size_t kValue = 21, kResource = 29, kSpec = 37;
  const auto tex = static_cast<std::byte>(ObjectKind::TexObject), surf = static_cast<std::byte>(ObjectKind::SurfObject);
  auto u64_at = [](std::vector<std::byte>& p, size_t at, uint64_t v) { std::memcpy(p.data() + at, &v, 8); };
  auto value_of = [](const std::vector<std::byte>& p) {
    uint64_t v;
    std::memcpy(&v, p.data() + kValue, 8);
    return v;
  };
  const Forgery cases[] = {
      {"value 0", [&](auto& p) { if (p[0] == tex && value_of(p) == w.t1) u64_at(p, kValue, 0); }, "cannot give back"},
      {"a huge value", [&](auto& p) { if (p[0] == surf) u64_at(p, kValue, 1ull << 40); }, "cannot give back"},
      {"a value twice", [&](auto& p) { if (p[0] == tex && value_of(p) == w.t7) u64_at(p, kValue, w.t6); }, "value 6"},
      {"an array that is not in the state", [&](auto& p) { if (p[0] == tex && value_of(p) == w.t1) u64_at(p, kResource, 999999); },
       "comes later or not at all"},
      {"a surface whose array comes after it", [&](auto& p) { if (p[0] == surf) std::memcpy(p.data() + kResource, p.data() + 1, 8); },
       "comes later or not at all"},
      {"a description cut short", [&](auto& p) { if (p[0] == tex) p.resize(kSpec + 4 + 50), p[kSpec] = std::byte{50}; }, "wrong size"},
      {"a description that names another array",
       [&](auto& p) { if (p[0] == tex && value_of(p) == w.t1) u64_at(p, kSpec + 4 + 72, w.surf_arr); }, "not the one it names"},
      {"an unknown filter mode",
       [&](auto& p) { if (p[0] == tex && value_of(p) == w.t1) p[kSpec + 4 + 24] = std::byte{9}; }, "texture object 1"},
      {"a linear texture on memory the client does not have",
       [&](auto& p) { if (p[0] == tex && value_of(p) == w.t3) u64_at(p, kSpec + 4 + 72, w.lin + (1ull << 30)); },
       "texture object 3"},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply& reply) {
    EXPECT_TRUE(reply.error.find("texture") != std::string::npos || reply.error.find("surface") != std::string::npos)
        << reply.error;
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  });
  // The good file still restores (it was left untouched), and the values read as before.
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(w.fetch(c, w.t1), through_t1);
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

TEST(Suspend, SaveToAFileAndRestoreFromIt) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-test.state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  ASSERT_TRUE(std::filesystem::exists(path));
  // Striped over a file per copy thread (state_stream.h): the stripes' data is the stream.
  const unsigned stripes = state::FileSource(path).stripes();
  EXPECT_GE(stripes, 2u) << "a stripe per copy thread";
  uint64_t data = 0;
  for (unsigned k = 0; k < stripes; ++k) data += std::filesystem::file_size(state::stripe_path(path, k)) - state::kStripeHeaderBytes;
  EXPECT_EQ(data, r.state_bytes);
  EXPECT_FALSE(std::filesystem::exists(state::stripe_path(path, stripes)));
  const auto size = std::filesystem::file_size(path);

  // A damaged copy is refused with the reason; the client stays suspended and the file as it was.
  const std::string bad = path + ".bad";
  for (unsigned k = 0; k < stripes; ++k)
    std::filesystem::copy_file(state::stripe_path(path, k), state::stripe_path(bad, k),
                               std::filesystem::copy_options::overwrite_existing);
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    char x = 0;
    f.read(&x, 1);
    f.seekp(static_cast<std::streamoff>(size / 2));
    x ^= 0x5a;
    f.write(&x, 1);
  }
  r = control(stub, cc::Op::kRestore, bad);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(r.status.suspended);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_live_streams(), 0u);

  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(c.get(w.small, 1024), iota(1024, 2));
  EXPECT_EQ(c.get(w.global, 64), iota(64, 7000));
  ASSERT_EQ(c.launch(w.fn, w.small, 1024, w.stream), 0);
  EXPECT_EQ(c.get(w.small, 1024), iota(1024, 3));
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// A state written by another vmcuda-stub's format (an older or a newer client state version)
// is refused with both versions named; the client stays suspended, the file restores later.
TEST(Suspend, AStateOfAnotherVersionIsRefusedNamingBoth) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-version.state";
  const std::string bad = path + ".other";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  Workload w;
  w.build(c);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  uint32_t ours = 0;
  ASSERT_NO_FATAL_FAILURE(rewrite_state(path, bad, [&](auto& p) { std::memcpy(&ours, p.data(), 4); }, 1));
  ASSERT_GE(ours, 6u);
  for (const uint32_t v : {ours - 1, ours + 1}) {
    SCOPED_TRACE(v);
    state::remove_state_file(bad);
    ASSERT_NO_FATAL_FAILURE(rewrite_state(path, bad, [&](auto& p) { std::memcpy(p.data(), &v, 4); }, 1));
    r = control(stub, cc::Op::kRestore, bad);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("client state version " + std::to_string(v) +
                           (v < ours ? " (written by an older" : " (written by a newer")),
              std::string::npos)
        << r.error;
    EXPECT_NE(r.error.find("reads version " + std::to_string(ours) + " only"), std::string::npos) << r.error;
    EXPECT_TRUE(r.status.suspended);
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  }
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(c.get(w.small, 1024), iota(1024, 2));
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

TEST(Suspend, StatusCountsTheClientsMemory) {
  Stub stub;
  Client c(stub);
  c.malloc(3u << 20);
  cc::Reply r = control(stub, cc::Op::kStatus);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.status.suspended);
  EXPECT_GE(r.status.device_bytes, 3u << 20);
  EXPECT_GE(r.status.allocated_bytes, 3u << 20);
}

}  // namespace
}  // namespace vmcuda::host::test

namespace vmcuda::host::test {
namespace {

TEST(Suspend, ManyCyclesWithWorkBetween) {
  Stub stub;
  Client c(stub);
  std::vector<std::pair<uint64_t, int>> blocks;  // pointer, first value
  auto cycle_once = [&] {
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
    EXPECT_EQ(tst::fake_live_reservations(), 0u);
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
  };
  for (int cycle = 0; cycle < 4; ++cycle) {
    blocks.push_back({c.malloc(cycle % 2 ? 4096 : (2u << 20)), cycle * 100});
    c.put(blocks.back().first, iota(16, cycle * 100));
    if (cycle == 2) {  // an arena with no memory at all across a cycle, then memory again
      for (auto [p, v] : blocks) EXPECT_EQ(c.call<api::Call::Free>({p}), 0);
      blocks.clear();
      cycle_once();
      blocks.push_back({c.malloc(4096), 7});
      c.put(blocks.back().first, iota(16, 7));
    }
    cycle_once();
    for (auto [p, v] : blocks) EXPECT_EQ(c.get(p, 16), iota(16, v));
  }
}

}  // namespace
}  // namespace vmcuda::host::test

namespace vmcuda::host::test {
namespace {

// Failure injection: the driver fails in the middle of a suspend, then of a resume.
CUresult g_fail_with = CUDA_SUCCESS;
CUresult failing_dtoh(void*, CUdeviceptr, size_t) { return g_fail_with; }
CUresult failing_dtoh_async(void*, CUdeviceptr, size_t, CUstream) { return g_fail_with; }
CUresult failing_create(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) {
  return g_fail_with;
}
// Runs one control request while the driver entry `slot` answers `status` (then restores it).
template <class Fn>
cc::Reply control_with_failing(Stub& stub, Fn& slot, Fn failing, CUresult status, cc::Op op,
                               const std::string& path = {}) {
  const Fn real = slot;
  g_fail_with = status;
  slot = failing;
  cc::Reply r = control(stub, op, path);
  slot = real;
  return r;
}

TEST(Suspend, AGpuErrorDuringSuspendLeavesTheClientRunning) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(2u << 20);
  c.put(p, iota(64, 11));
  const uint64_t bytes = tst::fake_allocated_bytes(), contexts = tst::fake_live_contexts();
  ASSERT_TRUE(hold(stub));
  // The copies are asynchronous, through the pinned ring, to host memory and to a file
  // (unless VMCUDA_SUSPEND_THREADS=1: then a save's go straight into the file's buffers).
  cc::Reply r = control_with_failing(stub, stub.api.cuMemcpyDtoHAsync_v2, &failing_dtoh_async,
                                     static_cast<CUresult>(700) /* CUDA_ERROR_ILLEGAL_ADDRESS */, cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("copying device memory"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  EXPECT_EQ(tst::fake_allocated_bytes(), bytes);  // nothing was released
  EXPECT_EQ(tst::fake_live_contexts(), contexts);
  const std::string file = ::testing::TempDir() + "/vmcuda-failed-save.state";
  for (int64_t threads : {0, 1}) {
    SCOPED_TRACE("VMCUDA_SUSPEND_THREADS=" + std::to_string(threads));
    vmrpc::knobs::kSuspendCopyThreads.set(threads);
    r = threads == 1 ? control_with_failing(stub, stub.api.cuMemcpyDtoH_v2, &failing_dtoh,
                                            static_cast<CUresult>(700) /* CUDA_ERROR_ILLEGAL_ADDRESS */, cc::Op::kSave, file)
                     : control_with_failing(stub, stub.api.cuMemcpyDtoHAsync_v2, &failing_dtoh_async,
                                            static_cast<CUresult>(700), cc::Op::kSave, file);
    vmrpc::knobs::kSuspendCopyThreads.set(0);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("copying device memory"), std::string::npos) << r.error;
    EXPECT_FALSE(r.status.suspended);
    EXPECT_EQ(tst::fake_allocated_bytes(), bytes);
    EXPECT_EQ(tst::fake_live_contexts(), contexts);
    EXPECT_FALSE(std::filesystem::exists(file)) << "a failed save leaves no state file";
    EXPECT_FALSE(std::filesystem::exists(file + ".partial")) << "nor a partial one";
  }
  release(stub);
  EXPECT_EQ(c.get(p, 64), iota(64, 11));
}

TEST(Suspend, AResumeWithoutGpuMemoryStaysSuspendedAndCanBeRetried) {
  Stub stub;
  Client c(stub);
  const uint64_t p = c.malloc(2u << 20);
  c.put(p, iota(64, 21));
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  cc::Reply r = control_with_failing(stub, stub.api.cuMemCreate, &failing_create, CUDA_ERROR_OUT_OF_MEMORY,
                                     cc::Op::kResume);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("cannot recreate"), std::string::npos) << r.error;
  EXPECT_TRUE(r.status.suspended);
  // What the failed attempt made is gone again: the GPU stays free.
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  r = control(stub, cc::Op::kResume);  // the state was kept: the retry works
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_EQ(c.get(p, 64), iota(64, 21));
}

}  // namespace
}  // namespace vmcuda::host::test

namespace vmcuda::host::test {
namespace {

// The resume's ring (suspend.cc RingCopier::fill): copy threads verify the state's chunks
// and copy them into a pinned ring, the GPU copies its slots to the device.
std::vector<std::byte> pattern(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}
constexpr size_t kPiece = 64 << 10;  // inline copies through the slot
void put_bytes(Client& c, uint64_t dst, const std::vector<std::byte>& v) {
  for (size_t off = 0; off < v.size(); off += kPiece)
    ASSERT_EQ(c.call<api::Call::CopyToDeviceInline>({dst + off}, nullptr,
                                                    std::span(v).subspan(off, std::min(kPiece, v.size() - off))),
              0);
}
std::vector<std::byte> get_bytes(Client& c, uint64_t src, size_t n) {
  std::vector<std::byte> out;
  for (size_t off = 0; off < n; off += kPiece) {
    const size_t k = std::min(kPiece, n - off);
    std::vector<std::byte> extra;
    EXPECT_EQ(c.call<api::Call::CopyFromDeviceInline>({src + off, k}, nullptr, {}, &extra, static_cast<uint32_t>(k)), 0);
    EXPECT_EQ(extra.size(), k);
    out.insert(out.end(), extra.begin(), extra.end());
  }
  return out;
}

// Bytes the GPU copied from host to device asynchronously (the ring's copies).
uint64_t g_async_htod_bytes = 0;
decltype(DriverApi::cuMemcpyHtoDAsync_v2) g_real_htod_async = nullptr;
CUresult counting_htod_async(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  g_async_htod_bytes += n;
  return g_real_htod_async(d, s, n, st);
}
struct CountAsyncCopies {
  Stub& stub;
  explicit CountAsyncCopies(Stub& s) : stub(s) {
    g_real_htod_async = stub.api.cuMemcpyHtoDAsync_v2;
    stub.api.cuMemcpyHtoDAsync_v2 = &counting_htod_async;
    g_async_htod_bytes = 0;
  }
  ~CountAsyncCopies() { stub.api.cuMemcpyHtoDAsync_v2 = g_real_htod_async; }
};
struct CopyThreadsKnob {
  explicit CopyThreadsKnob(int64_t n) { vmrpc::knobs::kSuspendCopyThreads.set(n); }
  ~CopyThreadsKnob() { vmrpc::knobs::kSuspendCopyThreads.set(0); }
};

// The suspend's pinned staging ring (2 slots of 4 MiB per copy thread) is pinned host memory
// like the program's own: charged to the VM's host memory bound while the suspend runs and
// given back after. A suspend the bound has no room for is refused, saying so, and the client
// runs on; with room, it goes ahead and the bound ends as it was.
TEST(Suspend, TheSuspendsStagingRingIsChargedToTheVmsHostMemoryBound) {
  constexpr uint64_t kMiB = 1 << 20;
  CopyThreadsKnob knob(2);  // a 16 MiB ring
  for (const uint64_t bound : {16 * kMiB, 17 * kMiB}) {
    SCOPED_TRACE(std::to_string(bound >> 20) + " MiB bound");
    StubLimits limits;
    limits.ledger = VmLedger::create(256 * kMiB, bound);
    Stub stub(limits);
    Client c(stub);
    const uint64_t p = c.malloc(4096);
    c.put(p, iota(1024, 5));
    auto pinned = c.slot->heap().allocate(kMiB);
    ASSERT_TRUE(pinned);
    ASSERT_EQ(c.call<api::Call::PinHeap>({pinned->ref()}), 0);
    ASSERT_EQ(limits.ledger->used(VmLedger::kHost), kMiB);
    ASSERT_TRUE(hold(stub));
    cc::Reply r = control(stub, cc::Op::kSuspend);
    if (bound < 17 * kMiB) {
      // 1 MiB pinned by the program and 16 MiB of ring do not fit 16 MiB.
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.error.find("pinned staging ring (16 MiB"), std::string::npos) << r.error;
      EXPECT_NE(r.error.find("host memory bound (16 MiB"), std::string::npos) << r.error;
      EXPECT_NE(r.error.find("--host-memory-quota-mib"), std::string::npos) << r.error;
      EXPECT_FALSE(r.status.suspended);
      EXPECT_EQ(limits.ledger->used(VmLedger::kHost), kMiB);
      EXPECT_EQ(tst::fake_pinned_ranges(), 1u);
      release(stub);
      EXPECT_EQ(c.get(p, 1024), iota(1024, 5));  // the client runs on
      continue;
    }
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(limits.ledger->used(VmLedger::kHost), 0u) << "the ring was not given back";
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    release(stub);
    EXPECT_EQ(limits.ledger->used(VmLedger::kHost), kMiB);
    EXPECT_EQ(c.get(p, 1024), iota(1024, 5));
  }
}

// Blocks whose sizes are no multiple of the ring's slot (4 MiB), of the chunks a suspend
// makes through the ring (4 MiB) or a save with one copy thread makes (16 MiB: a chunk takes
// four adjacent slots, the ring's tail is skipped), nor of the ring (at least 8 slots).
struct OddBlocks {
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> blocks;
  void build(Client& c, uint64_t seed) {
    for (size_t n : {size_t{4097}, (size_t{1} << 20) + 17, (size_t{6} << 20) + 4099, (size_t{37} << 20) + 5,
                     (size_t{17} << 20) + 12345}) {
      const uint64_t p = c.malloc(n);
      ASSERT_NE(p, 0u);
      blocks.emplace_back(p, pattern(n, seed + n));
      put_bytes(c, p, blocks.back().second);
    }
  }
  void check(Client& c, const std::string& what) {
    for (const auto& [p, want] : blocks) EXPECT_TRUE(get_bytes(c, p, want.size()) == want) << what << ": the block at " << p << " differs";
  }
};

TEST(Suspend, TheResumeRingGivesBackEveryByteWithAnyNumberOfThreads) {
  const std::string path = ::testing::TempDir() + "vmcuda-resume-ring." + std::to_string(::getpid()) + ".state";
  for (int64_t threads : {1, 3, 8}) {
    SCOPED_TRACE("VMCUDA_SUSPEND_THREADS=" + std::to_string(threads));
    CopyThreadsKnob knob(threads);
    Stub stub;
    Client c(stub);
    OddBlocks b;
    b.build(c, static_cast<uint64_t>(threads));
    const uint64_t memory = tst::fake_allocated_bytes();
    CountAsyncCopies count(stub);
    // The GPU reads a ring slot only when its copy runs (as late as the next synchronize):
    // a slot refilled before its copy completed would send the wrong bytes.
    tst::fake_defer_async_htod(true);
    ASSERT_TRUE(hold(stub));
    // From host memory (4 MiB chunks through the suspend's ring).
    cc::Reply r = control(stub, cc::Op::kSuspend);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, cc::Op::kResume);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_GE(g_async_htod_bytes, memory - (1u << 20)) << "the memory did not go through the ring";
    EXPECT_EQ(tst::fake_pinned_ranges(), 0u) << "the ring stays pinned";
    EXPECT_EQ(tst::fake_live_streams(), 0u);
    release(stub);
    b.check(c, "threads " + std::to_string(threads) + ", from memory");
    // From a file: saved through the ring (4 MiB chunks) or, with 8 threads, by one thread
    // (16 MiB chunks, restored by 8).
    g_async_htod_bytes = 0;
    ASSERT_TRUE(hold(stub));
    if (threads == 8) vmrpc::knobs::kSuspendCopyThreads.set(1);
    r = control(stub, cc::Op::kSave, path);
    vmrpc::knobs::kSuspendCopyThreads.set(threads);
    ASSERT_TRUE(r.ok) << r.error;
    r = control(stub, cc::Op::kRestore, path);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_GE(g_async_htod_bytes, memory - (1u << 20)) << "the memory did not go through the ring";
    release(stub);
    b.check(c, "threads " + std::to_string(threads) + ", from a file");
    state::remove_state_file(path);
  }
}

TEST(Suspend, ADamagedChunkInHostMemoryIsRefusedAndTheClientStaysSuspended) {
  CopyThreadsKnob knob(4);
  Stub stub;
  Client c(stub);
  OddBlocks b;
  b.build(c, 99);
  tst::fake_defer_async_htod(true);
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  const uint64_t state_bytes = r.state_bytes;
  // A copy of the state with one byte flipped in the middle (device memory: a chunk's payload).
  std::vector<std::byte> damaged;
  cc::testing::resume_state_override = [&](const std::shared_ptr<const state::MemoryStream>& s) {
    damaged = s->flatten();
    damaged[damaged.size() / 2] ^= std::byte{0x20};
    return state::MemoryStream::borrow(damaged);
  };
  r = control(stub, cc::Op::kResume);
  cc::testing::resume_state_override = nullptr;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(damaged.size(), state_bytes);
  EXPECT_NE(r.error.find("state in host memory: record "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(": chunk "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("checksum mismatch"), std::string::npos) << r.error;
  EXPECT_TRUE(r.status.suspended);
  // Nothing of the attempt is left: no memory, stream, event, context of its own, pinning.
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_streams(), 0u);
  EXPECT_EQ(tst::fake_live_events(), 0u);
  EXPECT_EQ(tst::fake_pinned_ranges(), 0u);
  // The state itself was kept: the resume from it works.
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  b.check(c, "after a refused resume");
}

}  // namespace
}  // namespace vmcuda::host::test

namespace vmcuda::host::test {
namespace {

// Virtual memory objects (host-stub/src/vmm.cc) across a suspend: reservations at the same
// addresses, physical allocations with their bytes (each once, mapped twice, in part or not
// at all), mappings with their offsets and access, references as the guest left them.
constexpr uint64_t kG = 2ull << 20;  // the executor's granularity
struct VmmWorkload {
  uint64_t base = 0, base2 = 0;  // reservations of 16 and 4 granules
  uint64_t a = 0, b = 0, unmapped = 0;  // 2, 4 and 1 granules
  uint64_t block = 0;  // a cudaMalloc block beside them (the arena's own memory)
  std::vector<std::byte> pa, pb, pc;

  uint64_t reserve(Client& c, uint64_t bytes) {
    api::PtrReply r{};
    EXPECT_EQ(c.call<api::Call::VmmAddressReserve>({bytes, 0, 0, 0}, &r), 0);
    return r.ptr;
  }
  uint64_t create(Client& c, uint64_t bytes) {
    api::VmmValueReply r{};
    EXPECT_EQ(c.call<api::Call::VmmCreate>({bytes, 0, 0}, &r), 0);
    return r.value;
  }
  int32_t map(Client& c, uint64_t ptr, uint64_t bytes, uint64_t handle, uint64_t offset = 0) {
    api::VmmValueReply r{};
    return c.call<api::Call::VmmMap>({ptr, bytes, offset, handle, 0}, &r);
  }
  int32_t access(Client& c, uint64_t ptr, uint64_t bytes, uint32_t flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
    return c.call<api::Call::VmmSetAccess>({ptr, bytes, 0, flags});
  }
  uint64_t get_access(Client& c, uint64_t ptr) {
    api::VmmValueReply r{};
    EXPECT_EQ(c.call<api::Call::VmmGetAccess>({ptr, 0, 0, 0}, &r), 0);
    return r.value;
  }

  void build(Client& c) {
    block = c.malloc(4096);
    c.put(block, iota(16, 500));
    base = reserve(c, 16 * kG);
    base2 = reserve(c, 4 * kG);
    a = create(c, 2 * kG);
    b = create(c, 4 * kG);
    unmapped = create(c, kG);
    ASSERT_NE(base, 0u);
    ASSERT_NE(base2, 0u);
    // a: mapped whole twice (the same bytes at two addresses); b: its middle two granules
    // only, read-only, its reference dropped (the mapping keeps it); unmapped: written
    // through a mapping that is gone again.
    ASSERT_EQ(map(c, base, 2 * kG, a), 0);
    ASSERT_EQ(map(c, base + 4 * kG, 2 * kG, a), 0);
    ASSERT_EQ(map(c, base2, 2 * kG, b, kG), 0);
    ASSERT_EQ(access(c, base, 2 * kG), 0);
    ASSERT_EQ(access(c, base + 4 * kG, 2 * kG), 0);
    ASSERT_EQ(access(c, base2, 2 * kG), 0);
    ASSERT_EQ(map(c, base + 10 * kG, kG, unmapped), 0);
    ASSERT_EQ(access(c, base + 10 * kG, kG), 0);
    pa = pattern(2 * kG, 1);
    pb = pattern(2 * kG, 2);
    pc = pattern(kG, 3);
    ASSERT_NO_FATAL_FAILURE(put_bytes(c, base, pa));
    ASSERT_NO_FATAL_FAILURE(put_bytes(c, base2, pb));
    ASSERT_NO_FATAL_FAILURE(put_bytes(c, base + 10 * kG, pc));
    ASSERT_EQ(c.call<api::Call::VmmUnmap>({base + 10 * kG, kG}), 0);
    ASSERT_EQ(access(c, base2, 2 * kG, CU_MEM_ACCESS_FLAGS_PROT_READ), 0);
    // a: a second reference (cuMemRetainAllocationHandle); b: none left.
    api::VmmValueReply ret{};
    ASSERT_EQ(c.call<api::Call::VmmRetainHandle>({base + 4 * kG + 64}, &ret), 0);
    ASSERT_EQ(ret.value, a);
    ASSERT_EQ(c.call<api::Call::VmmRelease>({b}), 0);
  }

  void check(Client& c) {
    EXPECT_EQ(c.get(block, 16), iota(16, 500));
    // Every byte, at both of a's addresses, and b's middle at its mapping.
    EXPECT_TRUE(get_bytes(c, base, 2 * kG) == pa);
    EXPECT_TRUE(get_bytes(c, base + 4 * kG, 2 * kG) == pa);
    EXPECT_TRUE(get_bytes(c, base2, 2 * kG) == pb);
    // One physical allocation still: a write through one address shows at the other.
    c.put(base + 100, {42});
    EXPECT_EQ(c.get(base + 4 * kG + 100, 1), std::vector<int>{42});
    c.put(base + 100, {0});
    std::memcpy(pa.data() + 100, std::vector<int>{0}.data(), 4);
    // Access as the guest set it.
    EXPECT_EQ(get_access(c, base), static_cast<uint64_t>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    EXPECT_EQ(get_access(c, base2), static_cast<uint64_t>(CU_MEM_ACCESS_FLAGS_PROT_READ));
    // Properties, and nothing mapped where nothing was.
    api::VmmPropertiesReply pr{};
    ASSERT_EQ(c.call<api::Call::VmmProperties>({a}, &pr), 0);
    EXPECT_EQ(pr.bytes, 2 * kG);
    ASSERT_EQ(c.call<api::Call::VmmProperties>({unmapped}, &pr), 0);
    EXPECT_EQ(pr.bytes, kG);
    EXPECT_EQ(c.call<api::Call::VmmProperties>({b}, &pr), CUDA_ERROR_INVALID_VALUE);  // no reference left
    int32_t st = 0;
    c.get(base + 2 * kG, 1, &st);
    EXPECT_EQ(st, CUDA_ERROR_INVALID_VALUE);
  }
};

TEST(SuspendVmm, ReservationsAllocationsAndMappingsComeBackAtTheSameAddressesWithTheirBytes) {
  Stub stub;
  Client c(stub);
  VmmWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  EXPECT_EQ(tst::fake_vmm_mappings(), 4u);  // a twice, b, and the arena's chunk

  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSuspend);
  ASSERT_TRUE(r.ok) << r.error;
  // Each physical allocation once (7 granules), not each mapping, and the arena's chunk.
  EXPECT_GT(r.state_bytes, 7 * kG + kArenaChunkBytes);
  EXPECT_LT(r.state_bytes, 8 * kG + kArenaChunkBytes);
  EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_vmm_mappings(), 4u);
  release(stub);
  ASSERT_NO_FATAL_FAILURE(w.check(c));

  // The unmapped allocation kept its bytes; a's two references and the handle counter too.
  ASSERT_EQ(w.map(c, w.base + 10 * kG, kG, w.unmapped), 0);
  ASSERT_EQ(w.access(c, w.base + 10 * kG, kG), 0);
  EXPECT_TRUE(get_bytes(c, w.base + 10 * kG, kG) == w.pc);
  const uint64_t d = w.create(c, kG);
  EXPECT_GT(d, std::max({w.a, w.b, w.unmapped}));
  EXPECT_EQ(c.call<api::Call::VmmRelease>({d}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({w.a}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({w.a}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({w.a}), CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(get_bytes(c, w.base, 2 * kG) == w.pa);  // the mappings keep it

  // A second cycle, then everything goes as the guest frees it.
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  EXPECT_TRUE(get_bytes(c, w.base + 4 * kG, 2 * kG) == w.pa);
  EXPECT_TRUE(get_bytes(c, w.base + 10 * kG, kG) == w.pc);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({w.base, 2 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({w.base + 4 * kG, 2 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({w.base + 10 * kG, kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmUnmap>({w.base2, 2 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmRelease>({w.unmapped}), 0);
  EXPECT_EQ(c.call<api::Call::VmmAddressFree>({w.base, 16 * kG}), 0);
  EXPECT_EQ(c.call<api::Call::VmmAddressFree>({w.base2, 4 * kG}), 0);
  EXPECT_EQ(tst::fake_vmm_mappings(), 1u);  // the arena's chunk alone
  EXPECT_EQ(tst::fake_allocated_bytes(), kArenaChunkBytes);
}

TEST(SuspendVmm, SaveToAFileAndRestoreFromIt) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-vmm." + std::to_string(::getpid()) + ".state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  VmmWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
  EXPECT_EQ(tst::fake_live_reservations(), 0u);
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  ASSERT_NO_FATAL_FAILURE(w.check(c));
  state::remove_state_file(path);
}

// A forged state file: every malformed virtual memory record is refused with the reason,
// nothing stays on the GPU, and the good file still restores.
TEST(SuspendVmm, MalformedVirtualMemoryRecordsAreRefused) {
  const std::string path = ::testing::TempDir() + "vmcuda-suspend-vmm-good." + std::to_string(::getpid()) + ".state";
  const std::string bad = ::testing::TempDir() + "vmcuda-suspend-vmm-bad." + std::to_string(::getpid()) + ".state";
  state::remove_state_file(path);
  Stub stub;
  Client c(stub);
  VmmWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  ASSERT_TRUE(hold(stub));
  cc::Reply r = control(stub, cc::Op::kSave, path);
  ASSERT_TRUE(r.ok) << r.error;
  // An object record: kind (1 byte), id, parent, device (4), handle, then the kind's fields:
  // a reservation's size; an allocation's size and references; a mapping's size, offset,
  // allocation id, then its access list (a count, then device and flags).
  constexpr size_t kHandle = 21, kField = 29;
  const auto res = static_cast<std::byte>(ObjectKind::VmmReservation), alloc = static_cast<std::byte>(ObjectKind::VmmAllocation),
             mapping = static_cast<std::byte>(ObjectKind::VmmMapping);
  auto u64_at = [](std::vector<std::byte>& p, size_t at, uint64_t v) { std::memcpy(p.data() + at, &v, 8); };
  auto u64_of = [](const std::vector<std::byte>& p, size_t at) {
    uint64_t v;
    std::memcpy(&v, p.data() + at, 8);
    return v;
  };
  auto is = [&](const std::vector<std::byte>& p, std::byte kind, uint64_t handle) {
    return p[0] == kind && u64_of(p, kHandle) == handle;
  };
  const Forgery cases[] = {
      {"a reservation of no whole granules", [&](auto& p) { if (is(p, res, w.base2)) u64_at(p, kField, 4 * kG + 4096); },
       "not whole granules"},
      {"a reservation outside the arena", [&](auto& p) { if (is(p, res, w.base2)) u64_at(p, kHandle, 64 * kG); },
       "outside arena"},
      {"two reservations overlapping", [&](auto& p) { if (is(p, res, w.base2)) u64_at(p, kHandle, w.base + 8 * kG); },
       "overlaps"},
      {"a reservation over the arena's memory",
       [&](auto& p) { if (is(p, res, w.base2)) u64_at(p, kHandle, w.block / kG * kG); }, "overlaps its memory"},
      {"an allocation of no whole granules", [&](auto& p) { if (is(p, alloc, w.unmapped)) u64_at(p, kField, kG + 512); },
       "not whole granules"},
      {"an allocation neither referenced nor mapped",
       [&](auto& p) { if (is(p, alloc, w.unmapped)) std::memset(p.data() + kField + 8, 0, 4); }, "neither referenced nor mapped"},
      {"an allocation handle beyond the counter", [&](auto& p) { if (is(p, alloc, w.unmapped)) u64_at(p, kHandle, 1000); },
       "beyond the saved counter"},
      {"mappings overlapping", [&](auto& p) { if (is(p, mapping, w.base + 4 * kG)) u64_at(p, kHandle, w.base + kG); },
       "overlaps another mapping"},
      {"a mapping outside its reservation",
       [&](auto& p) { if (is(p, mapping, w.base + 4 * kG)) u64_at(p, kHandle, w.base + 15 * kG); }, "outside its reservation"},
      {"a mapping in another reservation", [&](auto& p) { if (is(p, mapping, w.base2)) u64_at(p, kHandle, w.base + 12 * kG); },
       "outside its reservation"},
      {"a mapping of no whole granules", [&](auto& p) { if (is(p, mapping, w.base2)) u64_at(p, kField, 2 * kG - 4096); },
       "not whole granules"},
      {"a mapping past its allocation", [&](auto& p) { if (is(p, mapping, w.base2)) u64_at(p, kField + 8, 3 * kG); },
       "run past its physical allocation"},
      {"a mapping of no allocation", [&](auto& p) { if (is(p, mapping, w.base2)) u64_at(p, kField + 16, 999999); },
       "maps no physical allocation"},
      {"a mapping of a reservation's id", [&](auto& p) {
         if (is(p, mapping, w.base2)) std::memcpy(p.data() + kField + 16, p.data() + 9, 8);  // its parent's id
       },
       "maps no physical allocation"},
      {"unknown access flags",
       [&](auto& p) { if (is(p, mapping, w.base2)) std::memset(p.data() + kField + 28 + 4, 7, 1); }, "unknown access flags"},
      {"access for a device the client does not have",
       [&](auto& p) { if (is(p, mapping, w.base2)) std::memset(p.data() + kField + 28, 5, 1); }, "access for device 5"},
      {"an access list cut short", [&](auto& p) { if (is(p, mapping, w.base2)) p.resize(p.size() - 2); }, "virtual memory mapping"},
  };
  expect_forgeries_refused(stub, path, bad, cases, [&](const cc::Reply&) {
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
    EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
    EXPECT_EQ(tst::fake_live_reservations(), 0u);
  });
  r = control(stub, cc::Op::kRestore, path);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  ASSERT_NO_FATAL_FAILURE(w.check(c));
  state::remove_state_file(path);
  state::remove_state_file(bad);
}

// Failure injection: a mapping the driver refuses at the resume, and a copy that fails
// during the suspend.
int g_maps_left = 0;
decltype(DriverApi::cuMemMap) g_real_map = nullptr;
CUresult map_then_fail(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h, unsigned long long f) {
  if (g_maps_left-- <= 0) return CUDA_ERROR_OUT_OF_MEMORY;
  return g_real_map(p, n, off, h, f);
}

TEST(SuspendVmm, AResumeThatCannotMapStaysSuspendedAndCanBeRetried) {
  Stub stub;
  Client c(stub);
  VmmWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  // The arena's chunk maps, then the first of the guest's mappings; the second fails.
  for (int passes : {0, 1, 2, 3, 4}) {
    SCOPED_TRACE(passes);
    g_real_map = stub.api.cuMemMap;
    g_maps_left = passes;
    stub.api.cuMemMap = &map_then_fail;
    cc::Reply r = control(stub, cc::Op::kResume);
    stub.api.cuMemMap = g_real_map;
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.status.suspended);
    if (passes == 2) {
      EXPECT_NE(r.error.find("cannot map physical allocation"), std::string::npos) << r.error;
    }
    if (passes == 4) {  // the copy's own mapping
      EXPECT_NE(r.error.find("to copy it failed"), std::string::npos) << r.error;
    }
    EXPECT_EQ(tst::fake_allocated_bytes(), 0u);
    EXPECT_EQ(tst::fake_vmm_mappings(), 0u);
    EXPECT_EQ(tst::fake_live_reservations(), 0u);
  }
  cc::Reply r = control(stub, cc::Op::kResume);
  ASSERT_TRUE(r.ok) << r.error;
  release(stub);
  ASSERT_NO_FATAL_FAILURE(w.check(c));
}

TEST(SuspendVmm, ACopyThatFailsDuringTheSuspendLeavesTheClientRunning) {
  Stub stub;
  Client c(stub);
  VmmWorkload w;
  ASSERT_NO_FATAL_FAILURE(w.build(c));
  ASSERT_TRUE(hold(stub));
  // Physical allocations are copied with cuMemcpyDtoH (the arena's memory through the ring).
  cc::Reply r = control_with_failing(stub, stub.api.cuMemcpyDtoH_v2, &failing_dtoh, CUDA_ERROR_MAP_FAILED,
                                     cc::Op::kSuspend);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("physical allocation"), std::string::npos) << r.error;
  EXPECT_FALSE(r.status.suspended);
  EXPECT_EQ(tst::fake_vmm_mappings(), 4u);  // the copy's own mapping went again
  release(stub);
  ASSERT_NO_FATAL_FAILURE(w.check(c));
  // And it suspends once the driver works.
  ASSERT_TRUE(hold(stub));
  ASSERT_TRUE(control(stub, cc::Op::kSuspend).ok);
  ASSERT_TRUE(control(stub, cc::Op::kResume).ok);
  release(stub);
  ASSERT_NO_FATAL_FAILURE(w.check(c));
}

}  // namespace
}  // namespace vmcuda::host::test
