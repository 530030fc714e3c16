// vmcuda-test-stub: vmcuda-stub on the test executor, for CI machines without a GPU.
// Same options as vmcuda-stub; its device runs the executor's CPU kernels and presents
// the device profile recorded on the GPU machine (tests/executor/device_profile.inc).
#include "executor/fake_driver.h"
#include "stub_main.h"

int main(int argc, char** argv) {
  vmcuda::host::DriverApi api;
  // The CUDA test programs' output is compared with native runs on the GPU machine: the
  // executor presents that machine's recorded device.
  vmcuda::testing::install_fake_driver(api, /*recorded_profile=*/true);
  return vmcuda::host::stub_main(argc, argv, &api);
}
