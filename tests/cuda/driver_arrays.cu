// CUDA arrays, texture and surface objects through the driver API (cuArrayCreate,
// cuArray3DCreate, cuMipmappedArrayCreate, cuMemcpy2D/3D with arrays, cuMemcpyHtoA and its
// kin, cuTexObjectCreate, cuSurfObjectCreate), beside the runtime on the same objects, as
// frameworks mix them. Built with -lcuda. Kernels are launched with the runtime; their
// signatures are those of tests/cuda/textures.cu (the test executor fakes them by name).
// Prints what it sees (deterministic; compared with the native run) and the number of
// failed expectations.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

static int failures = 0;

static const char* name_of(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unnamed)";
}
static void expect(const char* what, CUresult got, CUresult want = CUDA_SUCCESS) {
  std::printf("%s: %s\n", what, name_of(got));
  if (got != want) {
    std::printf("  FAIL: expected %s\n", name_of(want));
    ++failures;
  }
}
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "yes" : "no");
  if (!ok) ++failures;
}
// What the driver answers, printed: for calls whose native answer the reference records.
static void answer(const char* what, CUresult got) { std::printf("%s: %s\n", what, name_of(got)); }

__global__ void tex_point(cudaTextureObject_t t, float* out, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

__global__ void tex_layered(cudaTextureObject_t t, float* out, int w, int h) {
  const int x = threadIdx.x, y = threadIdx.y, layer = blockIdx.x;
  if (x < w && y < h) out[(layer * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, layer);
}

__global__ void tex_linear1d(cudaTextureObject_t t, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int>(t, n - 1 - i);
}

__global__ void surf_fill(cudaSurfaceObject_t s, int w, int h, int base) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) surf2Dwrite(base + y * 1000 + x, s, x * static_cast<int>(sizeof(int)), y);
}

static void print_desc(const char* what, CUarray a) {
  CUDA_ARRAY_DESCRIPTOR d{};
  CUresult e = cuArrayGetDescriptor(&d, a);
  std::printf("%s: %s format 0x%x channels %u %zux%zu\n", what, name_of(e), d.Format, d.NumChannels, d.Width,
              d.Height);
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  e = cuArray3DGetDescriptor(&d3, a);
  std::printf("%s (3D): %s format 0x%x channels %u %zux%zux%zu flags 0x%x\n", what, name_of(e), d3.Format,
              d3.NumChannels, d3.Width, d3.Height, d3.Depth, d3.Flags);
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash still shows how far it got
  expect("cuInit", cuInit(0));
  CUdevice dev;
  expect("cuDeviceGet", cuDeviceGet(&dev, 0));
  CUcontext ctx;
  expect("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
  expect("cuCtxSetCurrent", cuCtxSetCurrent(ctx));

  // ---- a 2D float array: descriptors, 2D copies in and out, a sub-region
  const int W = 16, H = 8;
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = W;
  ad.Height = H;
  ad.Format = CU_AD_FORMAT_FLOAT;
  ad.NumChannels = 1;
  CUarray a2d = nullptr;
  expect("cuArrayCreate 2D float", cuArrayCreate(&a2d, &ad));
  print_desc("2D float", a2d);
  std::vector<float> host(W * H), back(W * H, -1.f);
  for (int i = 0; i < W * H; ++i) host[i] = static_cast<float>(i) * 0.5f;
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = host.data();
  c.srcPitch = W * sizeof(float);
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = a2d;
  c.WidthInBytes = W * sizeof(float);
  c.Height = H;
  expect("cuMemcpy2D host to array", cuMemcpy2D(&c));
  CUDA_MEMCPY2D r{};
  r.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  r.srcArray = a2d;
  r.dstMemoryType = CU_MEMORYTYPE_HOST;
  r.dstHost = back.data();
  r.dstPitch = W * sizeof(float);
  r.WidthInBytes = W * sizeof(float);
  r.Height = H;
  expect("cuMemcpy2D array to host", cuMemcpy2D(&r));
  check("2D round trip equal", back == host);
  // A 3x2 region at (x 5, y 4) of the array into a tight host buffer.
  float region[6] = {};
  CUDA_MEMCPY2D s{};
  s.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  s.srcArray = a2d;
  s.srcXInBytes = 5 * sizeof(float);
  s.srcY = 4;
  s.dstMemoryType = CU_MEMORYTYPE_HOST;
  s.dstHost = region;
  s.dstPitch = 3 * sizeof(float);
  s.WidthInBytes = 3 * sizeof(float);
  s.Height = 2;
  expect("cuMemcpy2D array region to host", cuMemcpy2D(&s));
  std::printf("region: %g %g %g / %g %g %g\n", region[0], region[1], region[2], region[3], region[4], region[5]);
  // Out of the array: invalid.
  s.srcY = H - 1;
  answer("cuMemcpy2D past the array's last row", cuMemcpy2D(&s));

  // ---- texture object on it (point filter) read by a kernel
  CUDA_RESOURCE_DESC rd{};
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = a2d;
  CUDA_TEXTURE_DESC td{};
  td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
  td.filterMode = CU_TR_FILTER_MODE_POINT;
  CUtexObject tex = 0;
  expect("cuTexObjectCreate on the array", cuTexObjectCreate(&tex, &rd, &td, nullptr));
  float* out = nullptr;
  cudaMalloc(&out, W * H * sizeof(float));
  tex_point<<<dim3(1, 1), dim3(W, H)>>>(tex, out, W, H);
  expect("kernel", static_cast<CUresult>(cudaDeviceSynchronize()));
  std::vector<float> fetched(W * H, -1.f);
  cudaMemcpy(fetched.data(), out, W * H * sizeof(float), cudaMemcpyDeviceToHost);
  check("point fetch equals the array", fetched == host);
  CUDA_RESOURCE_DESC rd_back{};
  expect("cuTexObjectGetResourceDesc", cuTexObjectGetResourceDesc(&rd_back, tex));
  check("resource desc: the same array", rd_back.resType == CU_RESOURCE_TYPE_ARRAY && rd_back.res.array.hArray == a2d);
  CUDA_TEXTURE_DESC td_back{};
  expect("cuTexObjectGetTextureDesc", cuTexObjectGetTextureDesc(&td_back, tex));
  std::printf("texture desc: address %d %d filter %d flags 0x%x\n", td_back.addressMode[0], td_back.addressMode[1],
              td_back.filterMode, td_back.flags);
  // The same texture made by the runtime answers the same way.
  expect("cuTexObjectDestroy", cuTexObjectDestroy(tex));

  // ---- linear memory as a texture of ints, read as integers
  const int N = 64;
  CUdeviceptr lin;
  expect("cuMemAlloc", cuMemAlloc(&lin, N * sizeof(int)));
  std::vector<int> ints(N);
  for (int i = 0; i < N; ++i) ints[i] = i * 3 + 1;
  expect("cuMemcpyHtoD", cuMemcpyHtoD(lin, ints.data(), N * sizeof(int)));
  CUDA_RESOURCE_DESC lr{};
  lr.resType = CU_RESOURCE_TYPE_LINEAR;
  lr.res.linear.devPtr = lin;
  lr.res.linear.format = CU_AD_FORMAT_SIGNED_INT32;
  lr.res.linear.numChannels = 1;
  lr.res.linear.sizeInBytes = N * sizeof(int);
  CUDA_TEXTURE_DESC lt{};
  lt.flags = CU_TRSF_READ_AS_INTEGER;
  CUtexObject ltex = 0;
  expect("cuTexObjectCreate on linear memory", cuTexObjectCreate(&ltex, &lr, &lt, nullptr));
  int* iout = nullptr;
  cudaMalloc(&iout, N * sizeof(int));
  tex_linear1d<<<1, N>>>(ltex, iout, N);
  expect("kernel", static_cast<CUresult>(cudaDeviceSynchronize()));
  std::vector<int> reversed(N);
  cudaMemcpy(reversed.data(), iout, N * sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("linear fetch reversed: %d %d .. %d %d\n", reversed[0], reversed[1], reversed[N - 2], reversed[N - 1]);
  check("linear fetch reversed", reversed[0] == ints[N - 1] && reversed[N - 1] == ints[0]);
  expect("cuTexObjectDestroy linear", cuTexObjectDestroy(ltex));

  // ---- a 1D array of uint32: HtoA / AtoH / DtoA / AtoD with byte offsets
  CUDA_ARRAY_DESCRIPTOR d1{};
  d1.Width = 256;
  d1.Height = 0;
  d1.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  d1.NumChannels = 1;
  CUarray a1d = nullptr;
  expect("cuArrayCreate 1D uint32", cuArrayCreate(&a1d, &d1));
  print_desc("1D uint32", a1d);
  std::vector<unsigned> u(256), ub(256, 0);
  for (unsigned i = 0; i < 256; ++i) u[i] = 0xA0000000u + i;
  expect("cuMemcpyHtoA", cuMemcpyHtoA(a1d, 0, u.data(), 256 * 4));
  expect("cuMemcpyAtoH at offset 40", cuMemcpyAtoH(ub.data(), a1d, 40, 16));
  std::printf("AtoH at 40: %x %x %x %x\n", ub[0], ub[1], ub[2], ub[3]);
  CUdeviceptr dl;
  expect("cuMemAlloc", cuMemAlloc(&dl, 256 * 4));
  expect("cuMemcpyAtoD", cuMemcpyAtoD(dl, a1d, 0, 256 * 4));
  expect("cuMemsetD32 8 words", cuMemsetD32(dl + 16, 0x5555u, 8));
  expect("cuMemcpyDtoA at offset 64", cuMemcpyDtoA(a1d, 64, dl + 64, 64));
  expect("cuMemcpyDtoA at offset 0", cuMemcpyDtoA(a1d, 0, dl, 64));
  expect("cuMemcpyAtoH all", cuMemcpyAtoH(ub.data(), a1d, 0, 256 * 4));
  std::printf("after DtoA: %x %x %x %x %x\n", ub[3], ub[4], ub[11], ub[12], ub[20]);
  CUarray a1d_copy = nullptr;
  expect("cuArrayCreate 1D copy", cuArrayCreate(&a1d_copy, &d1));
  expect("cuMemcpyAtoA", cuMemcpyAtoA(a1d_copy, 8, a1d, 0, 128));
  std::vector<unsigned> uc(256, 0);
  expect("cuMemcpyAtoH copy", cuMemcpyAtoH(uc.data(), a1d_copy, 0, 256 * 4));
  std::printf("AtoA at 8: %x %x %x\n", uc[2], uc[3], uc[33]);
  CUstream st;
  expect("cuStreamCreate", cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  unsigned* pinned = nullptr;
  expect("cuMemAllocHost", cuMemAllocHost(reinterpret_cast<void**>(&pinned), 256 * 4));
  for (unsigned i = 0; i < 256; ++i) pinned[i] = 7 * i;
  expect("cuMemcpyHtoAAsync", cuMemcpyHtoAAsync(a1d, 0, pinned, 256 * 4, st));
  expect("cuStreamSynchronize", cuStreamSynchronize(st));  // the copy reads `pinned` when it runs
  std::memset(pinned, 0, 256 * 4);
  expect("cuMemcpyAtoHAsync", cuMemcpyAtoHAsync(pinned, a1d, 4 * 100, 16, st));
  expect("cuStreamSynchronize", cuStreamSynchronize(st));
  std::printf("AtoHAsync at 100: %u %u %u %u\n", pinned[0], pinned[1], pinned[2], pinned[3]);
  answer("cuMemcpyHtoA past the end", cuMemcpyHtoA(a1d, 1020, u.data(), 8));

  // ---- a layered array through cuArray3DCreate and cuMemcpy3D; a layered texture
  const int LW = 4, LH = 3, L = 3;
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  d3.Width = LW;
  d3.Height = LH;
  d3.Depth = L;
  d3.Format = CU_AD_FORMAT_FLOAT;
  d3.NumChannels = 1;
  d3.Flags = CUDA_ARRAY3D_LAYERED;
  CUarray alayer = nullptr;
  expect("cuArray3DCreate layered", cuArray3DCreate(&alayer, &d3));
  print_desc("layered", alayer);
  std::vector<float> lh(LW * LH * L), lb(LW * LH * L, -1.f);
  for (int i = 0; i < LW * LH * L; ++i) lh[i] = 100.f + i;
  CUDA_MEMCPY3D m{};
  m.srcMemoryType = CU_MEMORYTYPE_HOST;
  m.srcHost = lh.data();
  m.srcPitch = LW * sizeof(float);
  m.srcHeight = LH;
  m.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  m.dstArray = alayer;
  m.WidthInBytes = LW * sizeof(float);
  m.Height = LH;
  m.Depth = L;
  expect("cuMemcpy3D host to layered array", cuMemcpy3D(&m));
  CUDA_RESOURCE_DESC lrd{};
  lrd.resType = CU_RESOURCE_TYPE_ARRAY;
  lrd.res.array.hArray = alayer;
  CUDA_TEXTURE_DESC ltd{};
  ltd.filterMode = CU_TR_FILTER_MODE_POINT;
  CUtexObject ltex2 = 0;
  expect("cuTexObjectCreate layered", cuTexObjectCreate(&ltex2, &lrd, &ltd, nullptr));
  float* lout = nullptr;
  cudaMalloc(&lout, LW * LH * L * sizeof(float));
  tex_layered<<<L, dim3(LW, LH)>>>(ltex2, lout, LW, LH);
  expect("kernel", static_cast<CUresult>(cudaDeviceSynchronize()));
  cudaMemcpy(lb.data(), lout, lb.size() * sizeof(float), cudaMemcpyDeviceToHost);
  check("layered fetch equals what was copied in", lb == lh);
  // Layer 1 back through cuMemcpy3D into pitched device memory, then to the host.
  CUdeviceptr pitched;
  size_t pitch = 0;
  expect("cuMemAllocPitch", cuMemAllocPitch(&pitched, &pitch, LW * sizeof(float), LH, 4));
  CUDA_MEMCPY3D m2{};
  m2.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  m2.srcArray = alayer;
  m2.srcZ = 1;
  m2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m2.dstDevice = pitched;
  m2.dstPitch = pitch;
  m2.dstHeight = LH;
  m2.WidthInBytes = LW * sizeof(float);
  m2.Height = LH;
  m2.Depth = 1;
  expect("cuMemcpy3D layer 1 to pitched memory", cuMemcpy3D(&m2));
  std::vector<float> layer1(LW * LH, -1.f);
  CUDA_MEMCPY2D p2{};
  p2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p2.srcDevice = pitched;
  p2.srcPitch = pitch;
  p2.dstMemoryType = CU_MEMORYTYPE_HOST;
  p2.dstHost = layer1.data();
  p2.dstPitch = LW * sizeof(float);
  p2.WidthInBytes = LW * sizeof(float);
  p2.Height = LH;
  expect("cuMemcpy2D pitched to host", cuMemcpy2D(&p2));
  std::printf("layer 1: %g %g .. %g\n", layer1[0], layer1[1], layer1[LW * LH - 1]);
  // A 3D copy between linear memories (host to device and back), async.
  std::vector<int> box(5 * 4 * 3), box_back(5 * 4 * 3, 0);
  for (size_t i = 0; i < box.size(); ++i) box[i] = static_cast<int>(i * i);
  CUdeviceptr dbox;
  expect("cuMemAlloc box", cuMemAlloc(&dbox, 8 * 4 * 4 * 3));
  CUDA_MEMCPY3D h3{};
  h3.srcMemoryType = CU_MEMORYTYPE_HOST;
  h3.srcHost = box.data();
  h3.srcPitch = 5 * 4;
  h3.srcHeight = 4;
  h3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  h3.dstDevice = dbox;
  h3.dstPitch = 8 * 4;
  h3.dstHeight = 4;
  h3.WidthInBytes = 5 * 4;
  h3.Height = 4;
  h3.Depth = 3;
  expect("cuMemcpy3DAsync host to device", cuMemcpy3DAsync(&h3, st));
  CUDA_MEMCPY3D b3{};
  b3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  b3.srcDevice = dbox;
  b3.srcPitch = 8 * 4;
  b3.srcHeight = 4;
  b3.srcXInBytes = 4;
  b3.srcY = 1;
  b3.srcZ = 1;
  b3.dstMemoryType = CU_MEMORYTYPE_HOST;
  b3.dstHost = box_back.data();
  b3.dstPitch = 4 * 4;
  b3.dstHeight = 3;
  b3.WidthInBytes = 4 * 4;
  b3.Height = 3;
  b3.Depth = 2;
  expect("cuMemcpy3DAsync device to host", cuMemcpy3DAsync(&b3, st));
  expect("cuStreamSynchronize", cuStreamSynchronize(st));
  std::printf("3D box back: %d %d %d .. %d\n", box_back[0], box_back[1], box_back[4], box_back[23]);
  check("3D box back", box_back[0] == box[(1 * 4 + 1) * 5 + 1] && box_back[23] == box[(2 * 4 + 3) * 5 + 4]);

  // ---- a surface object on an array made for load/store
  CUDA_ARRAY3D_DESCRIPTOR sd{};
  sd.Width = 8;
  sd.Height = 4;
  sd.Depth = 0;
  sd.Format = CU_AD_FORMAT_SIGNED_INT32;
  sd.NumChannels = 1;
  sd.Flags = CUDA_ARRAY3D_SURFACE_LDST;
  CUarray asurf = nullptr;
  expect("cuArray3DCreate surface", cuArray3DCreate(&asurf, &sd));
  print_desc("surface array", asurf);
  CUDA_RESOURCE_DESC srd{};
  srd.resType = CU_RESOURCE_TYPE_ARRAY;
  srd.res.array.hArray = asurf;
  CUsurfObject surf = 0;
  expect("cuSurfObjectCreate", cuSurfObjectCreate(&surf, &srd));
  surf_fill<<<1, dim3(8, 4)>>>(surf, 8, 4, 500);
  expect("kernel", static_cast<CUresult>(cudaDeviceSynchronize()));
  int sv[32] = {};
  CUDA_MEMCPY2D sr{};
  sr.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  sr.srcArray = asurf;
  sr.dstMemoryType = CU_MEMORYTYPE_HOST;
  sr.dstHost = sv;
  sr.dstPitch = 8 * 4;
  sr.WidthInBytes = 8 * 4;
  sr.Height = 4;
  expect("cuMemcpy2D surface array to host", cuMemcpy2D(&sr));
  std::printf("surface: %d %d %d %d\n", sv[0], sv[7], sv[8], sv[31]);
  CUDA_RESOURCE_DESC srd_back{};
  expect("cuSurfObjectGetResourceDesc", cuSurfObjectGetResourceDesc(&srd_back, surf));
  check("surface resource: the same array", srd_back.res.array.hArray == asurf);
  expect("cuSurfObjectDestroy", cuSurfObjectDestroy(surf));

  // ---- mipmapped array: levels, a copy into level 1
  CUDA_ARRAY3D_DESCRIPTOR md{};
  md.Width = 16;
  md.Height = 8;
  md.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  md.NumChannels = 4;
  CUmipmappedArray mip = nullptr;
  expect("cuMipmappedArrayCreate 3 levels", cuMipmappedArrayCreate(&mip, &md, 3));
  CUarray level1 = nullptr;
  expect("cuMipmappedArrayGetLevel 1", cuMipmappedArrayGetLevel(&level1, mip, 1));
  print_desc("level 1", level1);
  answer("cuMipmappedArrayGetLevel 3", cuMipmappedArrayGetLevel(&level1, mip, 3));
  expect("cuMipmappedArrayDestroy", cuMipmappedArrayDestroy(mip));

  // ---- answers to wrong arguments
  CUDA_ARRAY_DESCRIPTOR bad = ad;
  bad.NumChannels = 3;
  CUarray none = nullptr;
  answer("cuArrayCreate with 3 channels", cuArrayCreate(&none, &bad));
  bad = ad;
  bad.Format = static_cast<CUarray_format>(0x7f);
  answer("cuArrayCreate with an unknown format", cuArrayCreate(&none, &bad));
  bad = ad;
  bad.Width = 0;
  answer("cuArrayCreate with width 0", cuArrayCreate(&none, &bad));
  answer("cuTexObjectCreate without a resource", cuTexObjectCreate(&tex, nullptr, &td, nullptr));
  answer("cuArrayGetDescriptor of nothing", cuArrayGetDescriptor(&ad, nullptr));

  // ---- the runtime sees the driver's arrays
  cudaChannelFormatDesc cd{};
  cudaExtent ext{};
  unsigned flags = 0;
  expect("cudaArrayGetInfo of a driver array",
         static_cast<CUresult>(cudaArrayGetInfo(&cd, &ext, &flags, reinterpret_cast<cudaArray_t>(alayer))));
  std::printf("runtime view: %d bits kind %d, %zux%zux%zu flags 0x%x\n", cd.x, cd.f, ext.width, ext.height, ext.depth,
              flags);

  // A texture outlives nothing it reads (a suspend refuses one whose array is gone).
  cuTexObjectDestroy(ltex2);
  expect("cuArrayDestroy 2D", cuArrayDestroy(a2d));
  expect("cuArrayDestroy 1D", cuArrayDestroy(a1d));
  expect("cuArrayDestroy 1D copy", cuArrayDestroy(a1d_copy));
  expect("cuArrayDestroy layered", cuArrayDestroy(alayer));
  expect("cuArrayDestroy surface", cuArrayDestroy(asurf));
  cudaFree(out);
  cudaFree(iout);
  cudaFree(lout);
  cuMemFree(lin);
  cuMemFree(dl);
  cuMemFree(pitched);
  cuMemFree(dbox);
  cuMemFreeHost(pinned);
  cuStreamDestroy(st);
  std::printf("failures: %d\n", failures);
  return failures == 0 ? 0 : 1;
}
