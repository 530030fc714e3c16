// The module tests/cuda/runtime_rest4.cu loads with cudaLibraryLoadData: a __managed__
// variable and a kernel that adds to it (managed_vars.cu's, which the test executor knows by
// name), and a __device__ variable, which is no managed one. Compiled to a fatbin by
// scripts/build-cuda-tests.sh. Not a program of its own.
__managed__ int m_counter = 7;
__device__ int d_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};

__global__ void managed_bump(int by) { atomicAdd(&m_counter, by); }
