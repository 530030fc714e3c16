// Finding 10.6 (liveness), on the test stub with its worker processes (the executor's
// kernel that never ends: tests/executor/fake_kernels.cc, kFakeNeverEnds), through the
// channel as a guest library uses it:
//  - with --kernel-time-limit, a client whose kernel never ends gets kLaunchTimeout (the
//    guest library's cudaErrorLaunchTimeout) for its synchronize and every call after, its
//    worker is gone, and its slot serves a new client once released;
//  - a client that leaves (releases its slot, as a VM's program does at exit; the VM stays
//    connected) while its kernel never ends has its worker ended within a bound: the limit
//    when one is set, else VMRPC_WORKER_EXIT_MS.
// Bounds are generous: behaviour, not timing.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "executor/fake_driver.h"
#include "support/temp_socket.h"
#include "vmcuda/api/remote.h"
#include "vmrpc/client.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
namespace api = vmcuda::api;
using vmrpc::wire::ChannelStatus;

constexpr char kEndlessKernel[] = "_Z12spin_foreverPVi";  // tests/security/endless_kernel.cu

// vmcuda-test-stub in a process of its own (worker processes need a stub executable).
struct StubProcess {
  pid_t pid = -1;
  std::string socket = vmrpc::testing::temp_socket_path("liveness");
  std::string log = socket + ".log";
  StubProcess(std::vector<std::string> args, std::vector<std::string> env_extra = {}) {
    std::vector<std::string> all = {VMCUDA_TEST_STUB, "--socket", socket, "--control-socket", "none", "--state-dir", ""};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
    env_store.insert(env_store.end(), env_extra.begin(), env_extra.end());
    std::vector<char*> envp;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_EQ(::posix_spawn(&pid, all[0].c_str(), &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 400 && !std::filesystem::exists(socket); ++i) std::this_thread::sleep_for(25ms);
    EXPECT_TRUE(std::filesystem::exists(socket)) << text();
  }
  ~StubProcess() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st;
      ::waitpid(pid, &st, 0);
    }
    std::filesystem::remove(log);
  }
  std::string text() const {
    std::ifstream f(log);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // The stub's children: its worker processes.
  std::set<pid_t> workers() const {
    std::set<pid_t> out;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      std::ifstream f(t.path() / "children");
      pid_t c;
      while (f >> c) out.insert(c);
    }
    return out;
  }
};

bool gone(pid_t p) {
  // A zombie is gone for our purpose too (the stub reaps it).
  std::ifstream f("/proc/" + std::to_string(p) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return true;
  const auto r = line.rfind(')');
  return r == std::string::npos || (r + 2 < line.size() && line[r + 2] == 'Z');
}

// A client over the local transport; the connection (the VM) outlives its slot (the program).
struct Guest {
  std::unique_ptr<vmrpc::LocalConnection> conn;
  std::unique_ptr<vmrpc::ClientSlot> slot;
  explicit Guest(const std::string& socket) { conn = vmrpc::LocalConnection::connect(socket); }
  bool claim() {
    std::string why;
    for (int i = 0; i < 200 && !slot; ++i) {
      slot = vmrpc::ClientSlot::claim(conn->region(), *conn, &why);
      if (!slot) std::this_thread::sleep_for(25ms);
    }
    EXPECT_TRUE(slot) << why;
    return slot != nullptr;
  }
  template <api::Call C>
  int32_t call(const typename api::CallTraits<C>::Args& args, typename api::CallTraits<C>::Reply* reply = nullptr,
               std::span<const std::byte> tail = {}, uint32_t extra_capacity = 0) {
    auto r = api::remote<C>(*slot, args, tail, extra_capacity);
    if (reply) *reply = r.reply;
    return r.status;
  }
  // Launches the kernel that never ends; returns its launch status.
  int32_t launch_endless() {
    api::PtrReply flag{};
    if (int32_t st = call<api::Call::Malloc>({4}, &flag); st != 0) return st;
    if (int32_t st = call<api::Call::Memset>({flag.ptr, 4, 0, 0}); st != 0) return st;
    auto image = slot->heap().allocate(64);
    if (!image) return -100;
    std::memcpy(image->data, vmcuda::testing::kFakeModuleMagic, sizeof vmcuda::testing::kFakeModuleMagic);
    api::HandleReply mod{};
    const int32_t loaded = call<api::Call::ModuleLoad>({image->ref()}, &mod);
    slot->heap().free(image->offset);
    if (loaded != 0) return loaded;
    const std::string name = kEndlessKernel;
    api::GetFunctionReply fn{};
    if (int32_t st = call<api::Call::ModuleGetFunction>({mod.handle, uint32_t(name.size()), 0}, &fn,
                                                        std::as_bytes(std::span(name)), 1024);
        st != 0)
      return st;
    std::vector<std::byte> packed(8);
    std::memcpy(packed.data(), &flag.ptr, 8);
    return call<api::Call::LaunchKernel>({fn.function, {1, 1, 1}, {1, 1, 1}, 0, 8, api::kStreamDefault}, nullptr,
                                         packed);
  }
};

pid_t the_new_worker(const StubProcess& stub, const std::set<pid_t>& before) {
  for (int i = 0; i < 400; ++i) {
    for (pid_t p : stub.workers())
      if (!before.contains(p)) return p;
    std::this_thread::sleep_for(25ms);
  }
  return -1;
}

bool ends_within(pid_t p, std::chrono::seconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < until) {
    if (gone(p)) return true;
    std::this_thread::sleep_for(25ms);
  }
  return gone(p);
}

TEST(KernelTimeLimit, AnEndlessKernelEndsItsClientWithLaunchTimeout) {
  StubProcess stub({"--kernel-time-limit", "1"});
  Guest g(stub.socket);
  ASSERT_TRUE(g.claim());
  ASSERT_EQ(g.call<api::Call::DeviceSynchronize>({}), 0);
  const pid_t worker = the_new_worker(stub, {});
  ASSERT_GT(worker, 0);
  ASSERT_EQ(g.launch_endless(), 0);
  EXPECT_EQ(g.call<api::Call::StreamQuery>({api::kStreamDefault}), 600);  // CUDA_ERROR_NOT_READY: it runs
  // The synchronize waits for the kernel until the limit ends the client.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(g.call<api::Call::DeviceSynchronize>({}), static_cast<int32_t>(ChannelStatus::kLaunchTimeout));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  EXPECT_TRUE(ends_within(worker, 30s));
  // Every call after it fails the same way (the guest library makes it sticky too).
  api::PtrReply p{};
  EXPECT_EQ(g.call<api::Call::Malloc>({16}, &p), static_cast<int32_t>(ChannelStatus::kLaunchTimeout));
  EXPECT_NE(stub.text().find("ran past the kernel time limit"), std::string::npos) << stub.text();
  // Released, the slot serves a new client (a new worker) of the same VM.
  g.slot.reset();
  ASSERT_TRUE(g.claim());
  EXPECT_EQ(g.call<api::Call::Malloc>({16}, &p), 0);
  EXPECT_EQ(g.call<api::Call::DeviceSynchronize>({}), 0);
}

TEST(KernelTimeLimit, OtherClientsOfTheVmAreUnaffected) {
  StubProcess stub({"--kernel-time-limit", "1"});
  Guest a(stub.socket), b(stub.socket);  // two programs (two connections: two slots each served)
  ASSERT_TRUE(a.claim());
  ASSERT_TRUE(b.claim());
  ASSERT_EQ(a.launch_endless(), 0);
  std::thread t([&] { EXPECT_EQ(a.call<api::Call::DeviceSynchronize>({}), static_cast<int32_t>(ChannelStatus::kLaunchTimeout)); });
  // Meanwhile b works, and keeps working after a was ended; its own work is never older
  // than the limit (each synchronize shows it finished).
  api::PtrReply p{};
  ASSERT_EQ(b.call<api::Call::Malloc>({4096}, &p), 0);
  const auto until = std::chrono::steady_clock::now() + 3s;
  int rounds = 0;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(b.call<api::Call::Memset>({p.ptr, 4096, static_cast<uint32_t>(rounds & 0xff), 0}), 0);
    ASSERT_EQ(b.call<api::Call::DeviceSynchronize>({}), 0);
    ++rounds;
    std::this_thread::sleep_for(50ms);
  }
  t.join();
  EXPECT_GT(rounds, 10);
  EXPECT_EQ(b.call<api::Call::DeviceSynchronize>({}), 0);
}

// A client that launched work and did not synchronize for longer than the limit, its work
// long finished, is not ended: the watchdog's probe sees the GPU idle.
TEST(KernelTimeLimit, FinishedWorkNotSynchronizedIsNotATimeout) {
  StubProcess stub({"--kernel-time-limit", "0.5"});
  Guest g(stub.socket);
  ASSERT_TRUE(g.claim());
  api::PtrReply flag{};
  ASSERT_EQ(g.call<api::Call::Malloc>({4}, &flag), 0);
  ASSERT_EQ(g.call<api::Call::Memset>({flag.ptr, 4, 1, 0}), 0);  // the flag set: spin_forever ends at once
  auto image = g.slot->heap().allocate(64);
  ASSERT_TRUE(image);
  std::memcpy(image->data, vmcuda::testing::kFakeModuleMagic, sizeof vmcuda::testing::kFakeModuleMagic);
  api::HandleReply mod{};
  ASSERT_EQ(g.call<api::Call::ModuleLoad>({image->ref()}, &mod), 0);
  const std::string name = kEndlessKernel;
  api::GetFunctionReply fn{};
  ASSERT_EQ(g.call<api::Call::ModuleGetFunction>({mod.handle, uint32_t(name.size()), 0}, &fn,
                                                 std::as_bytes(std::span(name)), 1024),
            0);
  std::vector<std::byte> packed(8);
  std::memcpy(packed.data(), &flag.ptr, 8);
  ASSERT_EQ(g.call<api::Call::LaunchKernel>({fn.function, {1, 1, 1}, {1, 1, 1}, 0, 8, api::kStreamDefault}, nullptr,
                                            packed),
            0);
  std::this_thread::sleep_for(2500ms);  // five times the limit without a synchronize
  EXPECT_EQ(g.call<api::Call::DeviceSynchronize>({}), 0);
  EXPECT_EQ(stub.text().find("ran past the kernel time limit"), std::string::npos) << stub.text();
}

// Finding 10.4 / 10.6 with real worker processes: each costs the host memory of its own
// (VMCUDA_WORKER_HOST_BYTES), charged to the VM's host memory bound; a program beyond it gets
// cudaErrorMemoryAllocation at its first call (as natively on a host that cannot hold another
// process's driver state), those served run on, and a program that leaves makes room.
TEST(WorkerHostCost, WorkersBeyondTheVmsHostMemoryAreRefused) {
  StubProcess stub({"--host-memory-quota-mib", "600"}, {"VMCUDA_WORKER_HOST_BYTES=256M"});
  Guest a(stub.socket), b(stub.socket), c(stub.socket);
  ASSERT_TRUE(a.claim());
  ASSERT_TRUE(b.claim());
  ASSERT_TRUE(c.claim());
  api::PtrReply p{};
  ASSERT_EQ(a.call<api::Call::Malloc>({16}, &p), 0);
  ASSERT_EQ(b.call<api::Call::Malloc>({16}, &p), 0);
  EXPECT_EQ(c.call<api::Call::Malloc>({16}, &p), 2);  // CUDA_ERROR_OUT_OF_MEMORY: 3 x 256 MiB > 600 MiB
  EXPECT_NE(stub.text().find("host memory bound"), std::string::npos) << stub.text();
  ASSERT_EQ(b.call<api::Call::DeviceSynchronize>({}), 0);  // served on
  a.slot.reset();  // its worker ends; the stub reclaims its share
  int32_t st = -1;
  for (int i = 0; i < 400 && st != 0; ++i) {
    st = c.call<api::Call::Malloc>({16}, &p);
    if (st != 0) std::this_thread::sleep_for(25ms);
  }
  EXPECT_EQ(st, 0) << stub.text();
}

#ifdef VMCUDA_WITH_CUBLAS
// A library routine is GPU work like a kernel: a cuBLAS GEMM that runs past the limit (the
// executor's cublasSgemm_v2 with k = kFakeGemmNeverEnds never ends) ends its client with
// kLaunchTimeout as a kernel launch does. Before library calls were counted (kLaunches), the
// watchdog saw no outstanding work and the worker lived on.
TEST(KernelTimeLimit, ACublasGemmThatNeverEndsEndsItsClient) {
  StubProcess stub({"--kernel-time-limit", "1"});
  Guest g(stub.socket);
  ASSERT_TRUE(g.claim());
  ASSERT_EQ(g.call<api::Call::DeviceSynchronize>({}), 0);
  const pid_t worker = the_new_worker(stub, {});
  ASSERT_GT(worker, 0);
  api::PtrReply m{};
  ASSERT_EQ(g.call<api::Call::Malloc>({4096}, &m), 0);
  ASSERT_EQ(g.call<api::Call::cublasCreate_v2>({0x7000}), 0);
  api::cublasSgemm_v2_Args a{};
  a.handle = 0x7000;
  a.m = a.n = 1;
  a.k = vmcuda::testing::kFakeGemmNeverEnds;
  const float one = 1.0f, zero = 0.0f;
  std::memcpy(a.alpha, &one, sizeof one);
  std::memcpy(a.beta, &zero, sizeof zero);
  a.A = a.B = a.C = m.ptr;
  a.lda = a.ldb = a.ldc = 1;
  ASSERT_EQ(g.call<api::Call::cublasSgemm_v2>(a), 0);
  EXPECT_EQ(g.call<api::Call::StreamQuery>({api::kStreamDefault}), 600);  // CUDA_ERROR_NOT_READY: it runs
  ASSERT_TRUE(ends_within(worker, 30s)) << stub.text();  // else the synchronize below would wait for ever
  EXPECT_EQ(g.call<api::Call::DeviceSynchronize>({}), static_cast<int32_t>(ChannelStatus::kLaunchTimeout));
  EXPECT_NE(stub.text().find("ran past the kernel time limit"), std::string::npos) << stub.text();
}
#endif

// Without a limit: a program that leaves while its kernel never ends (its worker's teardown
// waits in cuCtxSynchronize) has its worker killed VMRPC_WORKER_EXIT_MS later; the slot
// serves again.
TEST(KernelTimeLimit, AClosedClientWithAnEndlessKernelEndsWithinTheExitBound) {
  StubProcess stub({}, {"VMRPC_WORKER_EXIT_MS=1000"});
  Guest g(stub.socket);
  ASSERT_TRUE(g.claim());
  ASSERT_EQ(g.call<api::Call::DeviceSynchronize>({}), 0);
  const pid_t worker = the_new_worker(stub, {});
  ASSERT_GT(worker, 0);
  ASSERT_EQ(g.launch_endless(), 0);
  g.slot.reset();  // the program leaves; the VM (connection) stays
  EXPECT_TRUE(ends_within(worker, 30s)) << stub.text();
  EXPECT_NE(stub.text().find("after its program left"), std::string::npos) << stub.text();
  ASSERT_TRUE(g.claim());
  api::PtrReply p{};
  EXPECT_EQ(g.call<api::Call::Malloc>({16}, &p), 0);
}

// With a limit, the same closed client is ended by the limit, long before the exit bound.
TEST(KernelTimeLimit, AClosedClientWithAnEndlessKernelEndsWithinTheLimit) {
  StubProcess stub({"--kernel-time-limit", "1"}, {"VMRPC_WORKER_EXIT_MS=600000"});
  Guest g(stub.socket);
  ASSERT_TRUE(g.claim());
  ASSERT_EQ(g.call<api::Call::DeviceSynchronize>({}), 0);
  const pid_t worker = the_new_worker(stub, {});
  ASSERT_GT(worker, 0);
  ASSERT_EQ(g.launch_endless(), 0);
  g.slot.reset();
  EXPECT_TRUE(ends_within(worker, 30s)) << stub.text();
  ASSERT_TRUE(g.claim());
  api::PtrReply p{};
  EXPECT_EQ(g.call<api::Call::Malloc>({16}, &p), 0);
}

}  // namespace
