// Compiled (never run) by nvcc_app_test.sh: the internal entry points that only nvcc's
// headers declare (crt/device_functions.h, under __CUDACC__) against guest-lib's
// declarations, as tests/guest-lib/abi_parity_test.cc does for the rest.
#define VMCUDA_CUDART_PARITY_NAMESPACE ours
#include "guest-lib/abi_shape.h"
#include "vmcuda/cudart_api.h"

#ifndef __CUDA_ARCH__
VMCUDA_EXPECT_SAME_ABI(__cudaPushCallConfiguration)
VMCUDA_EXPECT_SAME_ABI(__cudaGetKernel)
#endif
