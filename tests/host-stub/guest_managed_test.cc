// __managed__ variables end to end: the real guest code (module.cc's __cudaInitModule,
// managed.cc, symbol.cc, launch.cc, stream.cc, event.cc, memory.cc) against vmcuda-stub in
// this process on the test executor, whose modules all have tests/cuda/managed_vars.cu's
// m_counter (initially 7) and m_values (0.5, 1.5, ... 7.5), and its kernels managed_bump
// (each thread adds `by` to m_counter) and managed_scale (m_values[i] = m_values[i] * f +
// m_counter). Also the host's side through the generic path: hostile input, and a client
// that dies with bound variables.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "guest-lib/fatbin_builder.h"
#include "host-stub/guest_stub_env.h"
#include "remote.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace {

using vmcuda::guest::Remote;
using vmrpc::wire::ChannelStatus;
namespace api = vmcuda::api;
namespace host = vmcuda::host;
namespace tst = vmcuda::testing;

constexpr char kBump[] = "_Z12managed_bumpi";
constexpr char kScale[] = "_Z13managed_scalefi";

host::DriverApi g_fake;
std::atomic<int> n_get_global{0};
host::CUresult count_get_global(host::CUdeviceptr* p, size_t* b, host::CUmodule m, const char* name) {
  ++n_get_global;
  return g_fake.cuModuleGetGlobal_v2(p, b, m, name);
}

host::test::Stub*& g_stub = host::test::g_guest_stub;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new host::test::GuestStubEnvironment(
    {0}, [](host::DriverApi& api) {
      g_fake = api;
      api.cuModuleGetGlobal_v2 = count_get_global;
    }));

std::vector<uint64_t> make_fatbin() {
  vmcuda_test::FatbinBuilder b;
  b.entry(vmcuda_test::EntrySpec{});
  return b.build();
}

// A module as nvcc's host code registers managed_vars.cu: its own host stubs and slots.
struct ManagedModule {
  std::vector<uint64_t> fatbin = make_fatbin();
  vmcuda_test::Wrapper wrapper;
  char bump_stub = 0, scale_stub = 0;  // only their addresses matter
  int* counter = nullptr;              // the slots (nvcc's `static int* m_counter`)
  float* values = nullptr;
  void** h = nullptr;

  ManagedModule() {
    wrapper.data = reinterpret_cast<const unsigned long long*>(fatbin.data());
    h = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterFunction(h, &bump_stub, const_cast<char*>(kBump), kBump, -1, nullptr, nullptr, nullptr, nullptr,
                           nullptr);
    __cudaRegisterFunction(h, &scale_stub, const_cast<char*>(kScale), kScale, -1, nullptr, nullptr, nullptr, nullptr,
                           nullptr);
    __cudaRegisterManagedVar(h, reinterpret_cast<void**>(&counter), const_cast<char*>("m_counter"), "m_counter", 0,
                             sizeof(int), 0, 0);
    __cudaRegisterManagedVar(h, reinterpret_cast<void**>(&values), const_cast<char*>("m_values"), "m_values", 0,
                             8 * sizeof(float), 0, 0);
    __cudaRegisterFatBinaryEnd(h);
  }
  ~ManagedModule() { __cudaUnregisterFatBinary(h); }
  ManagedModule(const ManagedModule&) = delete;
  ManagedModule& operator=(const ManagedModule&) = delete;

  // What the host code's first access does.
  void init() { ASSERT_EQ(__cudaInitModule(h), 1); }
  cudaError_t bump(int by, unsigned threads, cudaStream_t s = nullptr) {
    void* args[] = {&by};
    return cudaLaunchKernel(&bump_stub, dim3(1), dim3(threads), args, 0, s);
  }
  cudaError_t scale(float f, int n, unsigned threads) {
    void* args[] = {&f, &n};
    return cudaLaunchKernel(&scale_stub, dim3(1), dim3(threads), args, 0, nullptr);
  }
};

class GuestManaged : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Remote::get(nullptr), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    (void)vmcuda::guest::take_last_error();
  }
};

TEST_F(GuestManaged, InitModuleGivesEachVariableAShadowWithItsInitialValue) {
  ManagedModule m;
  EXPECT_EQ(m.counter, nullptr);
  const int gets = n_get_global;
  m.init();
  ASSERT_NE(m.counter, nullptr);
  ASSERT_NE(m.values, nullptr);
  EXPECT_EQ(*m.counter, 7);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(m.values[i], 0.5f + i) << i;
  EXPECT_EQ(n_get_global, gets + 2);
  // Once initialized, answered locally.
  EXPECT_EQ(__cudaInitModule(m.h), 1);
  EXPECT_EQ(n_get_global, gets + 2);
  // Not a handle: 0, as NVIDIA's.
  int not_a_module = 0;
  EXPECT_EQ(__cudaInitModule(reinterpret_cast<void**>(&not_a_module)), 0);
}

TEST_F(GuestManaged, HostWritesReachKernelsAndKernelWritesReachTheHostAtSyncs) {
  ManagedModule m;
  m.init();
  *m.counter = 10;
  ASSERT_EQ(m.bump(1, 4), cudaSuccess);
  EXPECT_EQ(*m.counter, 10);  // not synchronized yet
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 14);
  m.values[0] = 2.0f;
  ASSERT_EQ(m.scale(3.0f, 8, 8), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(m.values[0], 20.0f);  // 2 * 3 + 14
  EXPECT_EQ(m.values[1], 18.5f);  // 1.5 * 3 + 14
  EXPECT_EQ(m.values[7], 36.5f);
  // A synchronous copy to the host is a sync point too.
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4), cudaSuccess);
  ASSERT_EQ(m.bump(3, 2), cudaSuccess);
  int x = 0;
  ASSERT_EQ(cudaMemcpy(&x, d, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(*m.counter, 20);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(GuestManaged, LaunchesWithoutASyncInBetweenAllCount) {
  ManagedModule m;
  m.init();
  *m.counter = 0;
  // Each launch pushes only what the host wrote since the last sync: the second must not
  // put back the 0 the host last saw.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(m.bump(1, 1), cudaSuccess);
  ASSERT_EQ(m.bump(10, 2), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 25);
  // A host write between launches with no sync: it goes in before the next launch, the
  // earlier launches' work stays.
  ASSERT_EQ(m.bump(1, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 26);
  m.values[5] = 100.0f;  // another variable: pushed alone
  ASSERT_EQ(m.bump(1, 1), cudaSuccess);
  ASSERT_EQ(m.bump(1, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 28);
  EXPECT_EQ(m.values[5], 100.0f);
}

TEST_F(GuestManaged, AHostWriteBeforeASyncWithoutALaunchStays) {
  ManagedModule m;
  m.init();
  ASSERT_EQ(m.bump(1, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 8);
  *m.counter = 50;
  m.values[2] = -3.0f;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 50);
  EXPECT_EQ(m.values[2], -3.0f);
  ASSERT_EQ(m.bump(1, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 51);
}

TEST_F(GuestManaged, StreamsEventsAndQueries) {
  ManagedModule m;
  m.init();
  cudaStream_t s;
  cudaEvent_t ev;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  ASSERT_EQ(m.bump(1, 3, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*m.counter, 10);
  ASSERT_EQ(m.bump(1, 2, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(ev), cudaSuccess);
  EXPECT_EQ(*m.counter, 12);
  // A query that finds the work pending leaves the shadow; one that finds it done pulls.
  tst::fake_hold_completion(true);
  ASSERT_EQ(m.bump(1, 1, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  EXPECT_EQ(*m.counter, 12);
  tst::fake_hold_completion(false);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*m.counter, 13);
  ASSERT_EQ(m.bump(1, 1, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(*m.counter, 14);
  ASSERT_EQ(m.bump(1, 1, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);
  EXPECT_EQ(*m.counter, 15);
  ASSERT_EQ(cudaEventDestroy(ev), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(GuestManaged, SymbolCallsSeeAndChangeWhatTheHostCodeSees) {
  ManagedModule m;
  m.init();
  // The symbol is the shadow, which is also its address.
  void* p = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&p, m.counter), cudaSuccess);
  EXPECT_EQ(p, m.counter);
  size_t size = 0;
  ASSERT_EQ(cudaGetSymbolSize(&size, m.values), cudaSuccess);
  EXPECT_EQ(size, 32u);
  // From: the host's writes first.
  *m.counter = 33;
  int c = 0;
  ASSERT_EQ(cudaMemcpyFromSymbol(&c, m.counter, sizeof c), cudaSuccess);
  EXPECT_EQ(c, 33);
  // To: the copy wins over an earlier host write, and the host sees it at once.
  *m.counter = 5;
  const int nine = 9;
  ASSERT_EQ(cudaMemcpyToSymbol(m.counter, &nine, sizeof nine), cudaSuccess);
  EXPECT_EQ(*m.counter, 9);
  const float tail[2] = {-1.0f, -2.0f};
  m.values[0] = 42.0f;  // another part of the same variable, written by the host
  ASSERT_EQ(cudaMemcpyToSymbol(m.values, tail, sizeof tail, 6 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(m.values[0], 42.0f);
  EXPECT_EQ(m.values[5], 5.5f);
  EXPECT_EQ(m.values[6], -1.0f);
  EXPECT_EQ(m.values[7], -2.0f);
  ASSERT_EQ(m.scale(1.0f, 1, 1), cudaSuccess);  // values[0] + counter: both reached the device
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(m.values[0], 51.0f);
  // Asynchronous, ordered on the stream with a launch.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const int one = 1;
  ASSERT_EQ(cudaMemcpyToSymbolAsync(m.counter, &one, sizeof one, 0, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(m.bump(1, 3, s), cudaSuccess);
  int back = 0;
  ASSERT_EQ(cudaMemcpyFromSymbolAsync(&back, m.counter, sizeof back, 0, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(back, 4);
  EXPECT_EQ(*m.counter, 4);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  // Device to device, both ways.
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromSymbol(d, m.counter, 4, 0, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // a device-to-device copy does not wait (as in CUDA)
  *m.counter = 0;
  ASSERT_EQ(cudaMemcpyToSymbol(m.counter, d, 4, 0, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(*m.counter, 4);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  // Errors as for any symbol: past the end, the slot (not a symbol), a wrong direction.
  EXPECT_EQ(cudaMemcpyToSymbol(m.counter, &one, 4, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToSymbol(&m.counter, &one, 4), cudaErrorInvalidSymbol);
  EXPECT_EQ(cudaGetSymbolAddress(&p, m.counter + 1), cudaErrorInvalidSymbol);
  EXPECT_EQ(cudaMemcpyFromSymbol(&c, m.counter, 4, 0, cudaMemcpyHostToDevice), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(GuestManaged, TwoModulesHaveTheirOwnVariables) {
  ManagedModule a, b;
  a.init();
  b.init();
  EXPECT_NE(a.counter, b.counter);
  *a.counter = 1;
  *b.counter = 100;
  ASSERT_EQ(a.bump(1, 1), cudaSuccess);
  ASSERT_EQ(b.bump(1, 2), cudaSuccess);
  ASSERT_EQ(b.scale(2.0f, 1, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*a.counter, 2);
  EXPECT_EQ(*b.counter, 102);
  EXPECT_EQ(a.values[0], 0.5f);
  EXPECT_EQ(b.values[0], 103.0f);
}

TEST_F(GuestManaged, ALaunchBeforeTheFirstHostAccessBindsTheVariables) {
  ManagedModule m;
  ASSERT_EQ(m.bump(2, 1), cudaSuccess);  // loads the module, which binds its variables
  ASSERT_NE(m.counter, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  m.init();
  EXPECT_EQ(*m.counter, 9);
}

TEST_F(GuestManaged, AnUnregisteredModulesShadowIsNoSymbolAnyMore) {
  int* old = nullptr;
  {
    ManagedModule m;
    m.init();
    old = m.counter;
    void* p = nullptr;
    ASSERT_EQ(cudaGetSymbolAddress(&p, old), cudaSuccess);
  }
  void* p = nullptr;
  EXPECT_EQ(cudaGetSymbolAddress(&p, old), cudaErrorInvalidSymbol);
  (void)vmcuda::guest::take_last_error();
  // The host keeps its binding (the module stays loaded until the slot closes): syncs work.
  ManagedModule n;
  n.init();
  ASSERT_EQ(n.bump(1, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*n.counter, 8);
}

// A graph's launch synchronizes the variables as a kernel launch does: the host's writes
// reach its kernels, theirs reach the host at the next sync; a launch captured into a graph
// pushes nothing (the graph's launch does).
TEST_F(GuestManaged, GraphLaunchesSynchronizeTheVariablesAsLaunchesDo) {
  ManagedModule m;
  m.init();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  int by = 1;
  void* args[] = {&by};
  cudaKernelNodeParams kp{};
  kp.func = &m.bump_stub;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(4);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  ASSERT_EQ(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp), cudaSuccess);
  cudaGraphExec_t x;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  *m.counter = 30;
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  EXPECT_EQ(*m.counter, 30);  // not synchronized yet
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*m.counter, 34);
  // Two launches without a sync both count; a host write between them goes in before the second.
  *m.counter = 100;
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*m.counter, 108);

  // Captured: a host write before the capture is not replayed by the graph's launches.
  *m.counter = 1;
  cudaGraph_t cg;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(m.bump(5, 2, s), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &cg), cudaSuccess);
  cudaGraphExec_t cx;
  ASSERT_EQ(cudaGraphInstantiate(&cx, cg, 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*m.counter, 1);  // nothing ran
  *m.counter = 40;
  ASSERT_EQ(cudaGraphLaunch(cx, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(cx, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*m.counter, 60);
  for (cudaGraphExec_t e : {x, cx}) ASSERT_EQ(cudaGraphExecDestroy(e), cudaSuccess);
  for (cudaGraph_t e : {g, cg}) ASSERT_EQ(cudaGraphDestroy(e), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// ---------------------------------------------------------------- the host, generic path

using host::test::Client;
using host::CUDA_ERROR_INVALID_HANDLE;
using host::CUDA_ERROR_INVALID_VALUE;
using host::CUDA_ERROR_NOT_FOUND;

// Ships a fake module; its handle.
uint64_t ship_module(Client& c) {
  auto image = c.slot->heap().allocate(64);
  EXPECT_TRUE(image);
  std::memcpy(image->data, tst::kFakeModuleMagic, sizeof tst::kFakeModuleMagic);
  api::HandleReply mod{};
  EXPECT_EQ(c.call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
  c.slot->heap().free(image->offset);
  return mod.handle;
}
int32_t bind_var(Client& c, uint64_t module, vmrpc::wire::HeapRef shadow, const std::string& name,
             api::ManagedBindReply* r = nullptr, uint32_t flags = 0) {
  return c.call<api::Call::ManagedVarBind>({module, shadow, static_cast<uint32_t>(name.size()), flags}, r,
                                          std::as_bytes(std::span(name)));
}
uint64_t kernel_of(Client& c, uint64_t module, const std::string& name) {
  api::GetFunctionReply fn{};
  std::vector<std::byte> params;
  EXPECT_EQ(c.call<api::Call::ModuleGetFunction>({module, uint32_t(name.size()), 0}, &fn,
                                                  std::as_bytes(std::span(name)), &params, 1024),
            0);
  return fn.function;
}
int32_t launch_bump(Client& c, uint64_t fn, int by, uint32_t threads) {
  return c.call<api::Call::LaunchKernel>({fn, {1, 1, 1}, {threads, 1, 1}, 0, 4, 0}, nullptr,
                                         std::as_bytes(std::span(&by, 1)));
}

TEST(StubManaged, BindRefusesWhatIsWrongAndKeepsTheShadowCoherent) {
  Client c(*g_stub);
  const uint64_t mod = ship_module(c);
  auto shadow = c.slot->heap().allocate(4);
  auto big = c.slot->heap().allocate(8);
  ASSERT_TRUE(shadow && big);
  constexpr int32_t kBadArgs = static_cast<int32_t>(ChannelStatus::kBadArguments);
  EXPECT_EQ(bind_var(c, 0, shadow->ref(), "m_counter"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(bind_var(c, mod + 7, shadow->ref(), "m_counter"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(bind_var(c, mod, {~0ull - 2, 4}, "m_counter"), static_cast<int32_t>(ChannelStatus::kBadHeapRef));
  EXPECT_EQ(bind_var(c, mod, big->ref(), "m_counter"), CUDA_ERROR_INVALID_VALUE);  // not its size
  EXPECT_EQ(bind_var(c, mod, shadow->ref(), "no_such_variable"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(bind_var(c, mod, shadow->ref(), std::string("m_counter\0x", 11)), kBadArgs);
  EXPECT_EQ(bind_var(c, mod, shadow->ref(), ""), kBadArgs);
  EXPECT_EQ(bind_var(c, mod, shadow->ref(), "m_counter", nullptr, 4), kBadArgs);  // unknown flags
  // A library's (cuLibraryGetManaged): only a variable the driver made managed memory.
  EXPECT_EQ(bind_var(c, mod, shadow->ref(), "d_counter", nullptr, api::kManagedBindOnlyManaged), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(c.call<api::Call::ManagedVarBind>({mod, shadow->ref(), 20, 0}, nullptr,
                                             std::as_bytes(std::span("m_counter", 9))),
            kBadArgs);  // name_bytes is not the tail's size
  EXPECT_EQ(c.call<api::Call::ManagedVarSync>({1, 0, 0, 0}), CUDA_ERROR_INVALID_HANDLE);  // nothing bound yet
  // Bound: the initial value in the shadow.
  std::memset(shadow->data, 0x5a, 4);
  api::ManagedBindReply r{};
  ASSERT_EQ(bind_var(c, mod, shadow->ref(), "m_counter", &r), 0);
  EXPECT_EQ(r.var, 1u);
  EXPECT_EQ(r.bytes, 4u);
  EXPECT_NE(r.ptr, 0u);
  int v = 0;
  std::memcpy(&v, shadow->data, 4);
  EXPECT_EQ(v, 7);
  EXPECT_EQ(c.get(r.ptr, 1), std::vector<int>{7});  // the variable's bytes may be named by copies
  // The guest writes, a kernel adds, a sync brings it back.
  v = 41;
  std::memcpy(shadow->data, &v, 4);
  const uint64_t fn = kernel_of(c, mod, kBump);
  ASSERT_EQ(launch_bump(c, fn, 1, 1), 0);
  ASSERT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  std::memcpy(&v, shadow->data, 4);
  EXPECT_EQ(v, 42);
  // ManagedVarSync's checks.
  EXPECT_EQ(c.call<api::Call::ManagedVarSync>({0, 0, 0, 0}), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(c.call<api::Call::ManagedVarSync>({2, 0, 0, 0}), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(c.call<api::Call::ManagedVarSync>({1, 0, 4, 0}), kBadArgs);
  EXPECT_EQ(c.call<api::Call::ManagedVarSync>({1, 0x1234, 0, 0}), CUDA_ERROR_INVALID_HANDLE);  // no such stream
  v = 5;
  std::memcpy(shadow->data, &v, 4);
  ASSERT_EQ(c.call<api::Call::ManagedVarSync>({1, 0, api::kManagedPull, 0}), 0);
  EXPECT_EQ(c.get(r.ptr, 1), std::vector<int>{5});
  // Bound again (the module registered anew): the same entry; kManagedBindKeep leaves the shadow.
  std::memset(big->data, 0, 8);
  auto other = c.slot->heap().allocate(4);
  v = 77;
  std::memcpy(other->data, &v, 4);
  api::ManagedBindReply r2{};
  ASSERT_EQ(bind_var(c, mod, other->ref(), "m_counter", &r2, api::kManagedBindKeep), 0);
  EXPECT_EQ(r2.var, r.var);
  std::memcpy(&v, other->data, 4);
  EXPECT_EQ(v, 77);
  ASSERT_EQ(launch_bump(c, fn, 1, 1), 0);  // the shadow's 77 goes first
  ASSERT_EQ(c.call<api::Call::DeviceSynchronize>({}), 0);
  std::memcpy(&v, other->data, 4);
  EXPECT_EQ(v, 78);
}

TEST(StubManaged, WhatAClientBoundGoesWhenItDies) {
  const uint64_t streams = tst::fake_live_streams(), modules = tst::fake_live_modules();
  const uint64_t closed = g_stub->endpoint.stats().slots_closed_total;
  pid_t pid = fork();
  if (pid == 0) {
    Client c(*g_stub);
    const uint64_t mod = ship_module(c);
    auto shadow = c.slot->heap().allocate(32);
    api::ManagedBindReply r{};
    bool ok = shadow && bind_var(c, mod, shadow->ref(), "m_values", &r) == 0;
    ok = ok && launch_bump(c, kernel_of(c, mod, kBump), 1, 1) == 0;
    ok = ok && c.call<api::Call::DeviceSynchronize>({}) == 0;  // a pull: the client's own stream
    _exit(ok ? 0 : 1);  // (the fake's state lives in the parent)
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 0; i < 1000 && g_stub->endpoint.stats().slots_closed_total == closed; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(g_stub->endpoint.stats().slots_closed_total, closed + 1);
  EXPECT_EQ(tst::fake_live_streams(), streams);  // its pulls' stream
  EXPECT_EQ(tst::fake_live_modules(), modules);
}

}  // namespace
