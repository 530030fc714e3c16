// libnvidia-ml.so.1's state shared with its generated stubs (nvml.cc, README.md "NVML").
#pragma once

#include <atomic>

namespace vmcuda::guest::nvml {

// The body of every generated NVML stub: logs "NAME is not supported yet" once per name and
// returns NVML_ERROR_NOT_SUPPORTED (3), as NVIDIA's library answers for what a GPU lacks.
int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept;

}  // namespace vmcuda::guest::nvml
