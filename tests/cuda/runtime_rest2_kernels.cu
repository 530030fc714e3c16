// The module tests/cuda/runtime_rest2.cu loads with cudaLibraryLoadData (its kernels counted and
// enumerated): driver_api's module (the test executor knows its kernels by name), compiled to a
// fatbin by scripts/build-cuda-tests.sh. Not a program of its own.
#include "driver_api_kernels.cu"
