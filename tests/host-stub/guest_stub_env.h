// One vmcuda-stub on the test executor for a whole guest-lib test program, with guest-lib
// in this process pointed at it (VMCUDA_SOCKET): for tests that call the CUDA runtime API.
// Register it once per test program:
//   const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new GuestStubEnvironment);
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "host-stub/stub_fixture.h"
#include "ipc_registry.h"

namespace vmcuda::host::test {

// The program's stub, between the environment's SetUp and TearDown.
inline Stub* g_guest_stub = nullptr;

class GuestStubEnvironment : public ::testing::Environment {
 public:
  // `devices`: the stub's host devices. `patch` changes the driver table (e.g. to count
  // calls) before any client connects: sessions read the table through a reference.
  explicit GuestStubEnvironment(std::vector<int> devices = {0}, std::function<void(DriverApi&)> patch = {})
      : devices_(std::move(devices)), patch_(std::move(patch)) {}
  void SetUp() override {
    // As vmcuda-stub: the VM's IPC table (ipc_registry.h), so the guest's cudaIpc* work.
    StubLimits limits;
    limits.ipc = local_ipc_channel(std::make_shared<IpcRegistry>());
    g_guest_stub = new Stub(limits, devices_);
    if (patch_) patch_(g_guest_stub->api);
    setenv("VMCUDA_SOCKET", g_guest_stub->endpoint.socket_path().c_str(), 1);
  }
  void TearDown() override {
    delete g_guest_stub;
    g_guest_stub = nullptr;
  }

 private:
  std::vector<int> devices_;
  std::function<void(DriverApi&)> patch_;
};

}  // namespace vmcuda::host::test
