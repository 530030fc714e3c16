// The second translation unit of the -rdc=true program (see rdc_main.cu).
__device__ int counter;
__device__ void bump() { atomicAdd(&counter, 1); }
__global__ void kernel_other(int* out) { *out = counter; }
void launch_other() { kernel_other<<<1, 1>>>(nullptr); }
