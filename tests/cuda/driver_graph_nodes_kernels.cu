// The kernels tests/cuda/driver_graph_nodes.cu loads with cuModuleLoadData and
// cuLibraryLoadData: scripts/build-cuda-tests.sh compiles this file to a fatbin and embeds it
// (bin2c). Not a program of its own. The test executor knows both by name
// (tests/executor/fake_kernels.cc: driver_api's add_one, host_func's scale_add).
__global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

__global__ void scale_add(int* p, int mul, int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * mul + add;
}
