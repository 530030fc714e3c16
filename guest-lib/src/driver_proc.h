// cuGetProcAddress's choice (driver_proc.cc), for the driver and its unit tests.
#pragma once

#include <cstddef>
#include <string_view>

#include "vmcuda/cuda_driver_types.h"

namespace vmcuda::guest {

struct ProcRow {
  const char* name;
  int version;  // the CUDA version that introduced this variant (PFN_name_vVERSION)
  int pt;       // 0 plain, 1 _ptds, 2 _ptsz
  void (*fn)(void);  // the exported symbol (its real type is NAME's)
};
// The generated table (proc_table.cc).
extern const ProcRow kProcRows[];
extern const size_t kProcRowCount;

struct ProcLookup {
  void* fn = nullptr;
  int status = cu::kProcSymbolNotFound;  // CUdriverProcAddressQueryResult
};

ProcLookup lookup_proc(std::string_view symbol, int cuda_version, cuuint64_t flags) noexcept;

}  // namespace vmcuda::guest
