// Writes the seed corpus of session_fuzz into a folder: call sequences as guest-lib makes
// them (handshake, memory, a fake module's kernel launch, cooperative launches and launches
// with attributes, streams and events, 2D copies, kernel printf, managed variables, peer
// access, pinned heap), so that the fuzzer starts
// past the handlers' first checks. Generated from the code (session_fuzz_input.h), so the
// seeds follow the wire structs when they move.
//
//   session_fuzz_seeds DIR
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "executor/fake_driver.h"
#include "session_fuzz_input.h"

namespace {

using namespace vmcuda;
using fuzz::InputWriter;
using api::Call;

std::string g_dir;
int g_written = 0;

void save(const std::string& name, const InputWriter& w) {
  const std::string path = g_dir + "/seed-session-" + name;
  const auto& b = w.bytes();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  ++g_written;
}

constexpr uint64_t kModuleAt = 0;          // heap offset of the fake module image
constexpr uint64_t kStagingAt = 8192;      // heap bytes of copies
constexpr uint64_t kMailboxAt = 4096;      // host function mailbox
constexpr uint64_t kShadowAt = 12288;      // managed variable shadow
constexpr uint64_t kRingAt = 65536;        // printf output ring
constexpr uint64_t kPinAt = 131072;        // pinned heap range

void module_image(InputWriter& w) { w.heap(kModuleAt, testing::kFakeModuleMagic, sizeof testing::kFakeModuleMagic); }

// ModuleLoad, then ModuleGetFunction of `kernel` with the module patched in (remembered
// value `module_rem`).
void load_function(InputWriter& w, const std::string& kernel, int module_rem) {
  w.call(Call::ModuleLoad, api::ModuleLoadArgs{{kModuleAt, 64}});
  w.call(Call::ModuleGetFunction, api::GetFunctionArgs{0, uint32_t(kernel.size()), 0}, kernel.data(),
         uint16_t(kernel.size()), 1024, module_rem, 0);
}

std::vector<std::byte> packed(std::initializer_list<std::pair<const void*, size_t>> parts) {
  std::vector<std::byte> b;
  for (auto [p, n] : parts) {
    const auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
  }
  return b;
}

void memory(uint8_t flags, const char* name, uint8_t neighbor_mib = 0) {
  InputWriter w(flags);
  const char hello[] = "0123456789abcdef";
  w.heap(kStagingAt, hello, 16);
  if (flags & fuzz::kFlagNeighbor) w.neighbor(neighbor_mib);
  w.call(Call::Handshake, api::Empty{});                        // rem 0
  w.call(Call::Malloc, api::MallocArgs{4096});                  // rem 1
  w.call(Call::CopyToDeviceInline, api::CopyToDeviceInlineArgs{0}, hello, 16, 0, 1, 0);
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, 16}, nullptr, 0, 16, 1, 0);
  w.call(Call::Memset, api::MemsetArgs{0, 64, 7, 0}, nullptr, 0, 0, 1, 0);
  w.call(Call::CopyToDeviceHeap, api::CopyHeapArgs{0, {kStagingAt, 256}}, nullptr, 0, 0, 1, 0);
  w.call(Call::CopyFromDeviceHeap, api::CopyHeapArgs{0, {kStagingAt, 256}}, nullptr, 0, 0, 1, 0);
  w.call(Call::Malloc, api::MallocArgs{4 << 20});               // rem 2
  w.call(Call::CopyDeviceToDevice, api::CopyDeviceArgs{0, 0, 64}, nullptr, 0, 0, 1, 0);
  w.call(Call::CopyToDeviceHeapAsync, api::CopyHeapAsyncArgs{0, {kStagingAt, 64}, 0, api::kHeapCopyWait, 0},
         nullptr, 0, 0, 2, 0);
  w.call(Call::MemGetInfo, api::Empty{});
  w.call(Call::Free, api::PtrArgs{0}, nullptr, 0, 0, 1, 0);
  w.call(Call::Free, api::PtrArgs{0}, nullptr, 0, 0, 2, 0);
  save(name, w);
}

void kernel(uint8_t flags, const char* name) {
  InputWriter w(flags);
  module_image(w);
  load_function(w, testing::kAddOneKernel, 0);                   // rem 0 module, rem 1 function
  w.call(Call::Malloc, api::MallocArgs{1024});                  // rem 2
  const uint64_t p = 0;
  const int n = 16;
  const auto args = packed({{&p, 8}, {&n, 4}});
  // Function handles are the session's (1 for the first); the pointer is patched into the tail.
  w.call(Call::LaunchKernel, api::LaunchArgs{1, {1, 1, 1}, {16, 1, 1}, 0, 12, 0}, args.data(), 12, 0, 2,
         sizeof(api::LaunchArgs));
  w.call(Call::StreamSynchronize, api::StreamArgs{0});
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, 64}, nullptr, 0, 64, 2, 0);
  w.call(Call::FuncGetAttributes, api::FunctionArgs{1});
  w.call(Call::FuncSetAttribute, api::FuncSetAttributeArgs{1, 8, 1024});
  w.call(Call::OccupancyMaxActiveBlocks, api::OccupancyArgs{1, 128, 0, 0});
  const std::string global = testing::kTestGlobal;
  w.call(Call::ModuleGetGlobal, api::GetGlobalArgs{0, uint32_t(global.size()), 0}, global.data(),
         uint16_t(global.size()), 0, 0, 0);                      // rem 3
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, 256}, nullptr, 0, 256, 3, 0);
  w.call(Call::DeviceSynchronize, api::Empty{});
  // Unloaded: its function and variable are gone (a launch and a copy naming them refused).
  w.call(Call::ModuleUnload, api::ModuleArgs{0}, nullptr, 0, 0, 0, 0);
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, 256}, nullptr, 0, 256, 3, 0);
  w.call(Call::LaunchKernel, api::LaunchArgs{1, {1, 1, 1}, {16, 1, 1}, 0, 12, 0}, args.data(), 12, 0, 2,
         sizeof(api::LaunchArgs));
  save(name, w);
}

void streams_events(uint8_t flags, const char* name) {
  InputWriter w(flags);
  w.call(Call::Malloc, api::MallocArgs{4096});                  // rem 0
  w.call(Call::StreamCreate, api::StreamCreateArgs{3, 1, -1});
  w.call(Call::EventCreate, api::EventCreateArgs{4, 0, 0});
  w.call(Call::EventCreate, api::EventCreateArgs{5, 0, 0});
  w.call(Call::EventRecord, api::EventRecordArgs{4, 3, 0, 0});
  w.call(Call::MemsetAsync, api::MemsetAsyncArgs{0, 4096, 1, 0, 3}, nullptr, 0, 0, 0, 0);
  w.call(Call::CopyDeviceToDeviceAsync, api::CopyDeviceAsyncArgs{0, 0, 64, 3}, nullptr, 0, 0, 0, 0);
  w.call(Call::CopyFromDeviceInlineAsync, api::CopyFromDeviceInlineAsyncArgs{0, 32, 3}, nullptr, 0, 32, 0, 0);
  w.call(Call::EventRecord, api::EventRecordArgs{5, 3, 0, 0});
  w.call(Call::StreamWaitEvent, api::StreamWaitEventArgs{2, 5, 0, 0});
  w.call(Call::EventSynchronize, api::EventArgs{5});
  w.call(Call::EventElapsedTime, api::EventPairArgs{4, 5});
  w.call(Call::EventQuery, api::EventArgs{4});
  w.call(Call::StreamQuery, api::StreamArgs{3});
  w.call(Call::StreamGetPriority, api::StreamArgs{3});
  w.call(Call::StreamPriorityRange, api::Empty{});
  w.call(Call::LaunchHostFunc, api::LaunchHostFuncArgs{3, {kMailboxAt, 64}, 1, 1, 0, 0});
  w.call(Call::LaunchHostFunc, api::LaunchHostFuncArgs{3, {kMailboxAt, 64}, 2, 1, api::kHostFuncCallback, 0});
  w.call(Call::StreamSynchronize, api::StreamArgs{3});
  w.call(Call::StreamDestroy, api::StreamArgs{3});
  w.call(Call::EventDestroy, api::EventArgs{4});
  save(name, w);
}

void two_d(const char* name) {
  InputWriter w;
  std::vector<uint8_t> rows(64);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint8_t(i);
  w.heap(kStagingAt, rows.data(), uint16_t(rows.size()));
  w.call(Call::MallocPitch, api::MallocPitchArgs{256, 16, 4, 0});   // rem 0 (ptr)
  w.call(Call::Memset2D, api::Memset2DArgs{0, 512, 256, 16, 1, 0}, nullptr, 0, 0, 0, 0);
  w.call(Call::Copy2DToDeviceInline, api::Copy2DInlineArgs{0, 512, 16, 4}, rows.data(), 64, 0, 0, 0);
  w.call(Call::Copy2DFromDeviceInline, api::Copy2DInlineArgs{0, 512, 16, 4}, nullptr, 0, 64, 0, 0);
  w.call(Call::Copy2DToDeviceHeap, api::Copy2DHeapArgs{0, 512, 16, 4, {kStagingAt, 64}, 16}, nullptr, 0, 0, 0, 0);
  w.call(Call::Copy2DFromDeviceHeap, api::Copy2DHeapArgs{0, 512, 16, 4, {kStagingAt, 64}, 16}, nullptr, 0, 0, 0, 0);
  w.call(Call::Copy2DDeviceToDevice, api::Copy2DDeviceArgs{0, 512, 0, 512, 64, 2}, nullptr, 0, 0, 0, 0);
  w.call(Call::Copy2DToDeviceHeapAsync,
         api::Copy2DHeapAsyncArgs{0, 512, 16, 4, {kStagingAt, 64}, 16, 0, api::kHeapCopyWait, 0}, nullptr, 0, 0, 0, 0);
  w.call(Call::Memset2DAsync, api::Memset2DAsyncArgs{0, 512, 128, 4, 9, 0, 0}, nullptr, 0, 0, 0, 0);
  w.call(Call::Copy2DFromDeviceInlineAsync, api::Copy2DInlineAsyncArgs{0, 512, 16, 4, 0}, nullptr, 0, 64, 0, 0);
  save(name, w);
}

// Cooperative launches and launches with attributes (tests/cuda/cooperative.cu's coop_bump).
void cooperative(uint8_t flags, const char* name) {
  InputWriter w(flags);
  module_image(w);
  load_function(w, "_Z9coop_bumpPiii", 0);                      // rem 0 module, rem 1 function
  w.call(Call::Malloc, api::MallocArgs{1024});                  // rem 2
  const uint64_t p = 0;
  const int n = 16, by = 3;
  const auto args = packed({{&p, 8}, {&n, 4}, {&by, 4}});
  w.call(Call::LaunchCooperativeKernel, api::LaunchArgs{1, {1, 1, 1}, {16, 1, 1}, 0, 16, 0}, args.data(), 16, 0, 2,
         sizeof(api::LaunchArgs));
  const api::LaunchAttribute attrs[2] = {{api::kLaunchAttrPriority, {uint32_t(-1), 0, 0}, 0},
                                         {api::kLaunchAttrClusterDimension, {1, 1, 1}, 0}};
  std::vector<std::byte> tail = packed({{attrs, sizeof attrs}});
  tail.insert(tail.end(), args.begin(), args.end());
  w.call(Call::LaunchKernelEx, api::LaunchExArgs{1, {2, 1, 1}, {8, 1, 1}, 0, 16, 0, 2, 0}, tail.data(),
         uint16_t(tail.size()), 0, 2, sizeof(api::LaunchExArgs) + sizeof attrs);
  w.call(Call::StreamSynchronize, api::StreamArgs{0});
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, 64}, nullptr, 0, 64, 2, 0);
  save(name, w);
}

void printf_ring(const char* name) {
  InputWriter w;
  module_image(w);
  w.call(Call::OutputRing, api::OutputRingArgs{{kRingAt, 4096}});   // rem 0 (captured: 1)
  load_function(w, "_Z11print_linesii", 1);                         // rem 1 module, rem 2 function
  const int n = 3, base = 5;
  const auto args = packed({{&n, 4}, {&base, 4}});
  w.call(Call::LaunchKernel, api::LaunchArgs{1, {1, 1, 1}, {1, 1, 1}, 0, 8, 0}, args.data(), 8);
  w.call(Call::DeviceSynchronize, api::Empty{});
  w.call(Call::OutputRing, api::OutputRingArgs{{kRingAt, 4096}});
  save(name, w);
}

void managed(const char* name) {
  InputWriter w;
  module_image(w);
  w.call(Call::ModuleLoad, api::ModuleLoadArgs{{kModuleAt, 64}});  // rem 0
  const std::string var = "m_counter";
  w.call(Call::ManagedVarBind, api::ManagedBindArgs{0, {kShadowAt, 4}, uint32_t(var.size()), 0}, var.data(),
         uint16_t(var.size()), 0, 0, 0);                             // rem 1 (var handle)
  const std::string k = "_Z12managed_bumpi";
  w.call(Call::ModuleGetFunction, api::GetFunctionArgs{0, uint32_t(k.size()), 0}, k.data(), uint16_t(k.size()),
         1024, 0, 0);
  const int by = 2;
  w.call(Call::LaunchKernel, api::LaunchArgs{1, {1, 1, 1}, {4, 1, 1}, 0, 4, 0}, &by, 4);
  w.call(Call::ManagedVarSync, api::ManagedSyncArgs{1, 0, api::kManagedPull, 0});
  w.call(Call::StreamSynchronize, api::StreamArgs{0});
  save(name, w);
}

void device_peer(const char* name) {
  InputWriter w;
  w.call(Call::DeviceProperties, api::DeviceArgs{1, 0});        // rem 0 (the name's first bytes)
  w.call(Call::SetDevice, api::DeviceArgs{1, 0});
  w.call(Call::Malloc, api::MallocArgs{4096});                  // rem 1 (on device 1: the arena's first block)
  w.call(Call::SetDevice, api::DeviceArgs{0, 0});
  w.call(Call::Malloc, api::MallocArgs{4096});                  // rem 2 (on device 0)
  w.call(Call::DeviceCanAccessPeer, api::PeerArgs{0, 1});
  w.call(Call::EnablePeerAccess, api::PeerAccessArgs{1, 0});
  // One pointer is patched in; the other is the arena's first block (kArenaBase).
  constexpr uint64_t kFirstBlock = 0x500000000000ull;
  w.call(Call::MemcpyPeer, api::MemcpyPeerArgs{0, kFirstBlock, 64, 0, 1}, nullptr, 0, 0, 2, 0);
  w.call(Call::MemcpyPeerAsync, api::MemcpyPeerAsyncArgs{kFirstBlock, 0, 64, 1, 0, 0}, nullptr, 0, 0, 2, 8);
  w.call(Call::DeviceGetP2PAttribute, api::P2PAttributeArgs{1, 0, 1, 0});
  w.call(Call::DisablePeerAccess, api::PeerAccessArgs{1, 0});
  w.call(Call::DeviceGetLimit, api::LimitArgs{1, 0});
  w.call(Call::DeviceSetLimit, api::SetLimitArgs{1 << 20, 1, 0});
  w.call(Call::DeviceGetCacheConfig, api::Empty{});
  w.call(Call::DeviceSetCacheConfig, api::CacheConfigArgs{1, 0});
  w.call(Call::PinHeap, api::HeapRangeArgs{{kPinAt, 8192}});
  w.call(Call::HostGetDevicePointer, api::HeapRangeArgs{{kPinAt, 8192}});
  w.call(Call::CopyFromDeviceHeapAsync, api::CopyHeapAsyncArgs{0, {kPinAt, 64}, 0, 0, 0}, nullptr, 0, 0, 2, 0);
  w.call(Call::MemsetHeap2DAsync, api::MemsetHeap2DAsyncArgs{{kPinAt, 1024}, 256, 64, 4, 0x01020304, 4, 0});
  w.call(Call::UnpinHeap, api::HeapRangeArgs{{kPinAt, 8192}});
  w.call(Call::DeviceReset, api::Empty{});
  save(name, w);
}

}  // namespace

// Graphs (host-stub/src/graph.cc): an explicit graph of memset -> add_one -> empty,
// instantiated and launched twice; a capture on a stream, replayed; the nodes listed.
void graphs(uint8_t flags, const char* name) {
  InputWriter w(flags);
  module_image(w);
  load_function(w, "_Z7add_onePii", 0);                         // rem 0 module, rem 1 function
  w.call(Call::Malloc, api::MallocArgs{1024});                  // rem 2
  w.call(Call::GraphCreate, api::GraphArgs{0x100, 0, 0});
  w.call(Call::GraphAddMemsetNode, api::GraphMemsetNodeArgs{0x100, 0x200, 0, 0, 16, 1, 0, 4, 0, 0}, nullptr, 0, 0, 2,
         16);
  const uint64_t p = 0, dep = 0x200, dep2 = 0x210;
  const int n = 16;
  const auto tail = packed({{&dep, 8}, {&p, 8}, {&n, 4}});
  w.call(Call::GraphAddKernelNode, api::GraphKernelNodeArgs{0x100, 0x210, 1, {1, 1, 1}, {16, 1, 1}, 0, 12, 1, 0},
         tail.data(), uint16_t(tail.size()), 0, 2, sizeof(api::GraphKernelNodeArgs) + 8);
  w.call(Call::GraphAddNode, api::GraphNodeArgs{0x100, 0x220, 0, api::kGraphNodeEmpty, 1}, &dep2, 8);
  w.call(Call::GraphInstantiate, api::GraphInstantiateArgs{0x300, 0x100, 0});
  w.call(Call::GraphLaunch, api::GraphLaunchArgs{0x300, 0});
  w.call(Call::GraphLaunch, api::GraphLaunchArgs{0x300, 0});
  w.call(Call::GraphGetNodes, api::GraphListArgs{0x100, 0, 8}, nullptr, 0, 64);
  w.call(Call::StreamCreate, api::StreamCreateArgs{3, 1, 0});
  w.call(Call::StreamBeginCapture, api::CaptureBeginArgs{3, 0, 0});
  w.call(Call::MemsetAsync, api::MemsetAsyncArgs{0, 64, 7, 0, 3}, nullptr, 0, 0, 2, 0);
  w.call(Call::StreamEndCapture, api::CaptureEndArgs{3, 0x400});
  w.call(Call::GraphInstantiate, api::GraphInstantiateArgs{0x310, 0x400, 0});
  w.call(Call::GraphLaunch, api::GraphLaunchArgs{0x310, 3});
  w.call(Call::StreamSynchronize, api::StreamArgs{3});
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, 64}, nullptr, 0, 64, 2, 0);
  w.call(Call::GraphExecDestroy, api::GraphExecArgs{0x300});
  w.call(Call::GraphDestroy, api::GraphArgs{0x100, 0, 0});
  save(name, w);
}

// CUDA arrays, copies to and from them (inline, heap, device memory, another array), a
// mipmapped array's level, texture and surface objects (arrays.cc).
void arrays(uint8_t flags, const char* name) {
  InputWriter w(flags);
  const char texels[] = "0123456789abcdef0123456789abcdef";
  w.heap(kStagingAt, texels, 32);
  constexpr uint32_t kFloat = 0x20;
  w.call(Call::ArrayCreate, api::ArrayCreateArgs{4, 2, 0, kFloat, 1, 2 /* surface */, 0});  // rem 0
  api::ArrayCopyArgs c{};
  c.width = 16, c.height = 2, c.depth = 1;
  w.call(Call::ArrayCopyToInline, c, texels, 32, 0, 0, 0);
  api::ArrayCopyArgs from = c;
  from.flags = api::kArrayCopyFromArray;
  w.call(Call::ArrayCopyFromInline, from, nullptr, 0, 32, 0, 0);
  api::ArrayCopyArgs heap = c;
  heap.host = {kStagingAt, 32}, heap.pitch = 16, heap.rows = 2;
  w.call(Call::ArrayCopyHeap, heap, nullptr, 0, 0, 0, 0);
  w.call(Call::Malloc, api::MallocArgs{4096});  // rem 1
  api::ArrayCopyArgs dev = from;
  dev.other = 0, dev.pitch = 64, dev.rows = 2;
  w.call(Call::ArrayCopyDevice, dev, nullptr, 0, 0, 0, 0);
  w.call(Call::ArrayCreate, api::ArrayCreateArgs{4, 2, 0, kFloat, 1, 0, 0});  // rem 2
  api::ArrayCopyArgs other = from;
  other.flags |= api::kArrayCopyOtherArray | api::kArrayCopyAsync;
  w.call(Call::ArrayCopyDevice, other, nullptr, 0, 0, 2, offsetof(api::ArrayCopyArgs, other));
  api::TextureCreateArgs t{};
  t.resource = api::kTexResourceArray;
  t.filter_mode = 1;
  t.tex_flags = 2;  // normalized coordinates
  w.call(Call::TextureCreate, t, nullptr, 0, 0, 0, offsetof(api::TextureCreateArgs, handle));  // rem 3
  w.call(Call::SurfaceCreate, api::ArrayArgs{0, 0, 0}, nullptr, 0, 0, 0, 0);                 // rem 4
  w.call(Call::TextureDestroy, api::ObjectValueArgs{0}, nullptr, 0, 0, 3, 0);
  w.call(Call::SurfaceDestroy, api::ObjectValueArgs{0}, nullptr, 0, 0, 4, 0);
  w.call(Call::ArrayCreate, api::ArrayCreateArgs{8, 8, 0, kFloat, 4, 0, 3});  // rem 5: mipmapped
  w.call(Call::MipmappedArrayGetLevel, api::ArrayLevelArgs{0, 1, 0}, nullptr, 0, 0, 5, 0);
  w.call(Call::ArrayDestroy, api::ArrayArgs{0, 0, 0}, nullptr, 0, 0, 2, 0);
  save(name, w);
}

// Virtual memory management (host-stub/src/vmm.cc): reserve, create, map, set access, copy
// through the mapping, query, unmap, release, free, as PyTorch's expandable segments do.
void vmm(uint8_t flags, const char* name) {
  InputWriter w(flags);
  constexpr uint64_t kG = 2ull << 20;
  const int32_t data[4] = {1, 2, 3, 4};
  w.call(Call::VmmGranularity, api::VmmGranularityArgs{0, 1});                    // rem 0
  w.call(Call::VmmAddressReserve, api::VmmReserveArgs{8 * kG, 0, 0, 0});         // rem 1
  w.call(Call::VmmCreate, api::VmmCreateArgs{kG, 0, 0});                         // rem 2
  w.call(Call::VmmMap, api::VmmMapArgs{0, kG, 0, 1, 0}, nullptr, 0, 0, 1, 0);   // rem 3 (device)
  w.call(Call::VmmSetAccess, api::VmmAccessArgs{0, kG, 0, 3}, nullptr, 0, 0, 1, 0);
  w.call(Call::CopyToDeviceInline, api::CopyToDeviceInlineArgs{0}, data, sizeof data, 0, 1, 0);
  w.call(Call::CopyFromDeviceInline, api::CopyFromDeviceInlineArgs{0, sizeof data}, nullptr, 0, sizeof data, 1, 0);
  w.call(Call::VmmGetAccess, api::VmmAccessArgs{0, 0, 0, 0}, nullptr, 0, 0, 1, 0);
  w.call(Call::VmmRetainHandle, api::PtrArgs{0}, nullptr, 0, 0, 1, 0);
  w.call(Call::VmmProperties, api::VmmHandleArgs{0}, nullptr, 0, 0, 2, 0);
  w.call(Call::VmmRelease, api::VmmHandleArgs{0}, nullptr, 0, 0, 2, 0);
  w.call(Call::VmmUnmap, api::VmmRangeArgs{0, kG}, nullptr, 0, 0, 1, 0);
  w.call(Call::VmmRelease, api::VmmHandleArgs{0}, nullptr, 0, 0, 2, 0);
  w.call(Call::VmmAddressFree, api::VmmRangeArgs{0, 8 * kG}, nullptr, 0, 0, 1, 0);
  save(name, w);
}

// Virtual memory objects left in place for a suspend (suspend.cc carries them): an
// allocation mapped in two reservations (read-write, read-only) and referenced twice, and
// one never mapped.
void vmm_held(uint8_t flags, const char* name) {
  InputWriter w(flags);
  constexpr uint64_t kG = 2ull << 20;
  const int32_t data[4] = {5, 6, 7, 8};
  w.call(Call::VmmGranularity, api::VmmGranularityArgs{0, 1});                  // rem 0
  w.call(Call::VmmAddressReserve, api::VmmReserveArgs{8 * kG, 0, 0, 0});       // rem 1
  w.call(Call::VmmAddressReserve, api::VmmReserveArgs{4 * kG, 0, 0, 0});       // rem 2
  w.call(Call::VmmCreate, api::VmmCreateArgs{kG, 0, 0});                       // rem 3: handle 1
  w.call(Call::VmmCreate, api::VmmCreateArgs{kG, 0, 0});                       // rem 4: handle 2
  w.call(Call::VmmMap, api::VmmMapArgs{0, kG, 0, 1, 0}, nullptr, 0, 0, 1, 0);  // rem 5 (device)
  w.call(Call::VmmSetAccess, api::VmmAccessArgs{0, kG, 0, 3}, nullptr, 0, 0, 1, 0);
  w.call(Call::VmmMap, api::VmmMapArgs{0, kG, 0, 1, 0}, nullptr, 0, 0, 2, 0);  // rem 6
  w.call(Call::VmmSetAccess, api::VmmAccessArgs{0, kG, 0, 1}, nullptr, 0, 0, 2, 0);
  w.call(Call::CopyToDeviceInline, api::CopyToDeviceInlineArgs{0}, data, sizeof data, 0, 1, 0);
  w.call(Call::VmmRetainHandle, api::PtrArgs{0}, nullptr, 0, 0, 1, 0);
  save(name, w);
}

// IPC exports (calls.def 0x1a00): memory (a chunk's block and a large allocation), an
// interprocess event and a pool, which a suspend carries under their tokens (suspend.cc
// kIpcExports, ipc.cc).
void ipc_exports(uint8_t flags, const char* name) {
  InputWriter w(flags);
  w.call(Call::Malloc, api::MallocArgs{4096});     // rem 0
  w.call(Call::Malloc, api::MallocArgs{3 << 20});  // rem 1
  w.call(Call::IpcGetMemHandle, api::PtrArgs{0}, nullptr, 0, 0, 0, 0);
  w.call(Call::IpcGetMemHandle, api::PtrArgs{0}, nullptr, 0, 0, 1, 0);
  w.call(Call::EventCreate, api::EventCreateArgs{4, 0x6 /* interprocess, no timing */, 0});
  w.call(Call::IpcGetEventHandle, api::EventArgs{4});
  w.call(Call::MemPoolExport, api::MemPoolExportArgs{0x7f0000000100, 0, 0});
  save(name, w);
}

// The image cache (calls.def 0x1330): a load that stores the image, then names by hash and
// size (one unknown hash, a size beyond the limit, none), and a load again.
void image_cache(uint8_t flags, const char* name) {
  InputWriter w(flags);
  module_image(w);
  w.call(Call::ModuleLoad, api::ModuleLoadArgs{{kModuleAt, 64}});
  api::ModuleLoadCachedArgs a{};
  a.bytes = 64;
  w.call(Call::ModuleLoadCached, a);
  for (int i = 0; i < 32; ++i) a.sha256[i] = uint8_t(i * 37);
  w.call(Call::ModuleLoadCached, a);
  a.bytes = ~0ull;
  w.call(Call::ModuleLoadCached, a);
  a.bytes = 0;
  w.call(Call::ModuleLoadCached, a);
  w.call(Call::ModuleLoad, api::ModuleLoadArgs{{kModuleAt, 64}});
  save(name, w);
}

#ifdef VMCUDA_WITH_CUBLAS
// cuBLASLt objects (host-stub/src/cublaslt.cc) with attributes set, one of them twice and one a
// device pointer (the bias, patched in from Malloc), as a suspend carries them.
void cublaslt(uint8_t flags, const char* name) {
  InputWriter w(flags);
  w.call(Call::Handshake, api::Empty{});        // rem 0
  w.call(Call::Malloc, api::MallocArgs{4096});  // rem 1
  constexpr uint64_t kLt = 0x100, kDesc = 0x110, kLayout = 0x120, kPref = 0x130;
  const int32_t trans = 1, epilogue = 4 /* BIAS */, no_trans = 0;
  const uint64_t rows = 2, workspace = 1 << 20, bias = 0;
  w.call(Call::cublasLtCreate, api::cublasLtCreate_Args{kLt});
  w.call(Call::cublasLtMatmulDescCreate, api::cublasLtMatmulDescCreate_Args{kDesc, 68, 0});
  w.call(Call::cublasLtMatmulDescSetAttribute, api::cublasLtMatmulDescSetAttribute_Args{kDesc, 4, 3}, &trans, 4);
  w.call(Call::cublasLtMatmulDescSetAttribute, api::cublasLtMatmulDescSetAttribute_Args{kDesc, 4, 7}, &epilogue, 4);
  w.call(Call::cublasLtMatmulDescSetAttribute, api::cublasLtMatmulDescSetAttribute_Args{kDesc, 8, 8}, &bias, 8, 0,
         1, sizeof(api::cublasLtMatmulDescSetAttribute_Args));
  w.call(Call::cublasLtMatmulDescSetAttribute, api::cublasLtMatmulDescSetAttribute_Args{kDesc, 4, 3}, &no_trans, 4);
  api::cublasLtMatrixLayoutCreate_Args l{};
  l.matLayout = kLayout, l.rows = 3, l.cols = 2, l.ld = 3;
  w.call(Call::cublasLtMatrixLayoutCreate, l);
  w.call(Call::cublasLtMatrixLayoutSetAttribute, api::cublasLtMatrixLayoutSetAttribute_Args{kLayout, 8, 2}, &rows, 8);
  w.call(Call::cublasLtMatmulPreferenceCreate, api::cublasLtMatmulPreferenceCreate_Args{kPref});
  w.call(Call::cublasLtMatmulPreferenceSetAttribute, api::cublasLtMatmulPreferenceSetAttribute_Args{kPref, 8, 1},
         &workspace, 8);
  save(name, w);
}
#endif

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  memory(0, "memory");
  memory(fuzz::kFlagGpuThreads, "memory-gpu-threads");
  kernel(0, "kernel");
  kernel(fuzz::kFlagGpuThreads, "kernel-gpu-threads");
  streams_events(0, "streams-events");
  streams_events(fuzz::kFlagGpuThreads, "streams-events-gpu-threads");
  two_d("2d");
  printf_ring("printf");
  cooperative(0, "cooperative");
  cooperative(fuzz::kFlagGpuThreads, "cooperative-gpu-threads");
  managed("managed");
  graphs(0, "graphs");
  graphs(fuzz::kFlagGpuThreads, "graphs-gpu-threads");
  device_peer("device-peer");
  arrays(0, "arrays");
  arrays(fuzz::kFlagGpuThreads, "arrays-gpu-threads");
  vmm(0, "vmm");
  image_cache(0, "image-cache");
  // The same sessions suspended and resumed (no damage: the resume must succeed).
  memory(fuzz::kFlagSuspend, "memory-suspend");
  kernel(fuzz::kFlagSuspend, "kernel-suspend");
  streams_events(fuzz::kFlagSuspend, "streams-events-suspend");
  arrays(fuzz::kFlagSuspend, "arrays-suspend");
  graphs(fuzz::kFlagSuspend, "graphs-suspend");  // graphs carried (graph_state.cc)
  vmm_held(fuzz::kFlagSuspend, "vmm-held-suspend");  // VMM objects carried (suspend.cc)
  ipc_exports(0, "ipc-exports");
  ipc_exports(fuzz::kFlagSuspend, "ipc-exports-suspend");  // IPC exports carried (ipc.cc)
#ifdef VMCUDA_WITH_CUBLAS
  cublaslt(0, "cublaslt");
  cublaslt(fuzz::kFlagSuspend, "cublaslt-suspend");  // cuBLASLt objects carried (cublaslt.cc)
#endif
  // Another client of the VM holds most of its quota: the session's allocations meet it.
  memory(fuzz::kFlagNeighbor, "memory-neighbor-24", 24);
  memory(fuzz::kFlagNeighbor | fuzz::kFlagSuspend, "memory-neighbor-30-suspend", 30);
  std::printf("session_fuzz_seeds: wrote %d seeds to %s\n", g_written, g_dir.c_str());
  return 0;
}
