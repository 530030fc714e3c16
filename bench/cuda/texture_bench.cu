// Texture fetch benchmark (issue 11, point 5): GPU time of kernels that fetch from a texture
// object (point and bilinear, normalized coordinates, on a 4096 x 4096 float array) and write
// a surface, measured with events around each launch; the median of the runs. Run natively
// and through vmcuda (scripts/gpu-bench.sh): the kernels run on the GPU either way, so the
// times must be equal. Prints one line per figure: "name value unit".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Each thread fetches `iters` times along a diagonal walk, so the texture cache matters.
__global__ void tex_walk(cudaTextureObject_t t, float* out, int w, int h, int iters) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.f;
  const float iw = 1.f / w, ih = 1.f / h;
  for (int i = 0; i < iters; ++i) acc += tex2D<float>(t, (x + 0.37f * i + 0.5f) * iw, (y + 0.71f * i + 0.5f) * ih);
  out[y * w + x] = acc;
}

__global__ void surf_walk(cudaSurfaceObject_t s, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) surf2Dwrite(static_cast<float>(x ^ y), s, x * 4, y);
}

template <class Launch>
static double median_ms(Launch launch, int runs) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<float> t;
  launch();  // warm-up
  for (int i = 0; i < runs; ++i) {
    check(cudaEventRecord(a), "record");
    launch();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms);
  }
  check(cudaGetLastError(), "launch");
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int W = 4096, H = 4096, iters = 16, runs = quick ? 5 : 50;
  std::vector<float> host(static_cast<size_t>(W) * H);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1009);
  const cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
  cudaArray_t a, s;
  check(cudaMallocArray(&a, &f, W, H), "array");
  check(cudaMallocArray(&s, &f, W, H, cudaArraySurfaceLoadStore), "surface array");
  check(cudaMemcpy2DToArray(a, 0, 0, host.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice), "copy");
  cudaResourceDesc res{};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = a;
  float* out;
  check(cudaMalloc(&out, host.size() * sizeof(float)), "malloc");
  const dim3 block(16, 16), grid(W / 16, H / 16);
  for (cudaTextureFilterMode filter : {cudaFilterModePoint, cudaFilterModeLinear}) {
    cudaTextureDesc td{};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeWrap;
    td.filterMode = filter;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 1;
    cudaTextureObject_t t;
    check(cudaCreateTextureObject(&t, &res, &td, nullptr), "texture");
    const double ms = median_ms([&] { tex_walk<<<grid, block>>>(t, out, W, H, iters); }, runs);
    std::printf("%s %.4f ms\n", filter == cudaFilterModePoint ? "tex2d_point_kernel" : "tex2d_linear_kernel", ms);
    check(cudaDestroyTextureObject(t), "destroy");
  }
  res.res.array.array = s;
  cudaSurfaceObject_t so;
  check(cudaCreateSurfaceObject(&so, &res), "surface");
  std::printf("surf2d_write_kernel %.4f ms\n", median_ms([&] { surf_walk<<<grid, block>>>(so, W, H); }, runs));
  check(cudaDestroySurfaceObject(so), "destroy");
  check(cudaFreeArray(a), "free");
  check(cudaFreeArray(s), "free");
  check(cudaFree(out), "free");
  return 0;
}
