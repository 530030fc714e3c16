// The test executor: a DriverApi that stands in for the GPU where there is none (CI).
// Device memory is host memory at fake device addresses; modules are images that
// start with "VMCUDA-FAKE-MODULE"; kernels are CPU functions known by their mangled
// name. It checks what the real driver would reject (unknown pointers, bad handles).
#pragma once

#include <cstdint>

#include "driver_api.h"

namespace vmcuda::testing {

inline constexpr char kFakeModuleMagic[] = "VMCUDA-FAKE-MODULE";
// A kernel the fake runs: void add_one(int* p, int n): p[i] += 1 for i < n.
inline constexpr char kAddOneKernel[] = "_Z7add_onePii";

// Fills `api` with the fake's entry points and resets its state.
void install_fake_driver(host::DriverApi& api);
// Bytes of fake device memory currently allocated (to check for leaks).
uint64_t fake_allocated_bytes();
uint64_t fake_live_contexts();
uint64_t fake_live_modules();
uint64_t fake_pinned_ranges();  // host ranges registered (cuMemHostRegister)

}  // namespace vmcuda::testing
