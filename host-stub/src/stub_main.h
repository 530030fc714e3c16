// vmcuda-stub's entry point, shared by the daemon (real driver) and the test stub
// (tests/executor: the test executor standing in for a GPU).
#pragma once

#include "driver_api.h"

namespace vmcuda::host {

// Parses the command line and serves until SIGINT/SIGTERM. `preset`: entry points to use
// instead of loading libcuda.so.1.
int stub_main(int argc, char** argv, const DriverApi* preset);

}  // namespace vmcuda::host
