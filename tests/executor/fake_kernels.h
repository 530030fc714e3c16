// The kernels the test executor can run: CPU versions of the kernels in the CUDA test
// programs (tests/cuda/), found by their mangled names as the driver finds them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace vmcuda::testing {

// Device memory [ptr, ptr + bytes) as host bytes, or nullptr (an illegal address).
using DeviceMemory = std::function<std::byte*(uint64_t ptr, size_t bytes)>;

struct FakeKernel {
  const char* name;
  std::vector<std::pair<uint32_t, uint32_t>> params;  // (offset, size), as cuFuncGetParamInfo
  // Runs `threads` threads' worth of work; returns a CUresult (700 for an illegal address).
  int (*run)(void** params, uint64_t threads, const DeviceMemory& mem);
};

// The kernel named `name`, or nullptr.
const FakeKernel* find_fake_kernel(const char* name);

}  // namespace vmcuda::testing
