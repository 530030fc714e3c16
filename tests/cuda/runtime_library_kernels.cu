// The module tests/cuda/runtime_library.cu loads with cudaLibraryLoadData: the kernels and
// variable of driver_api's module (the test executor knows them by name), compiled to a
// fatbin by scripts/build-cuda-tests.sh. Not a program of its own.
#include "driver_api_kernels.cu"
