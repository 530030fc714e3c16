// The kernels tests/cuda/driver_api.cu loads with cuModuleLoadData/cuLibraryLoadData:
// scripts/build-cuda-tests.sh compiles this file to a fatbin (nvcc -fatbin) and embeds it
// in driver_api (bin2c). Not a program of its own. The test executor knows each kernel and
// variable by name (tests/executor/fake_kernels.cc).
__global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

__global__ void scale_add(int* p, int mul, int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * mul + add;
}

extern "C" __global__ void vecadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__device__ int d_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
