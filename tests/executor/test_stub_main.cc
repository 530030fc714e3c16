// vmcuda-test-stub: vmcuda-stub on the test executor, for CI machines without a GPU.
// Same options as vmcuda-stub; its device runs the executor's CPU kernels.
#include "executor/fake_driver.h"
#include "stub_main.h"

int main(int argc, char** argv) {
  vmcuda::host::DriverApi api;
  vmcuda::testing::install_fake_driver(api);
  return vmcuda::host::stub_main(argc, argv, &api);
}
