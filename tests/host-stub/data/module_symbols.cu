__device__ int g_a[1000];
static __device__ int s_hidden = 5;
__constant__ float g_c[64];
__device__ double g_b = 3.0;
__managed__ int m_x = 9;
__global__ void k(int* p) { __shared__ int sh[32]; sh[threadIdx.x] = g_a[threadIdx.x] + (int)g_c[0] + (int)g_b + s_hidden++ + m_x; p[threadIdx.x] = sh[threadIdx.x]; }
