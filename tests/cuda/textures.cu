// CUDA arrays, texture and surface objects: 2D, layered, cubemap and mipmapped arrays, copies
// to and from them (every 2D form, the deprecated 1D forms, cudaMemcpy3D, async, pinned,
// device memory, array to array, a copy large enough to be staged), array queries, texture
// fetches (point and linear filtering, normalized coordinates, clamp, wrap and border
// addressing, normalized-float reads of 8-bit texels, a layered texture), surface writes, the
// descriptors read back, and the errors of wrong uses. Deterministic output, compared with
// the native run's (tests/cuda/expected/textures.out).
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

static void status(const char* what, cudaError_t e) {
  std::printf("%s: %s\n", what, cudaGetErrorName(e));
  cudaGetLastError();
}

__global__ void tex_point(cudaTextureObject_t t, float* out, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

__global__ void tex_sample(cudaTextureObject_t t, const float2* coords, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(t, coords[i].x, coords[i].y);
}

__global__ void tex_sample4(cudaTextureObject_t t, const float2* coords, float4* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float4>(t, coords[i].x, coords[i].y);
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

static unsigned long long checksum(const float* p, size_t n) {
  unsigned long long s = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned v;
    std::memcpy(&v, &p[i], 4);
    s = s * 1099511628211ull + v;
  }
  return s;
}

static void print_info(const char* name, cudaArray_t a) {
  cudaChannelFormatDesc d{};
  cudaExtent e{};
  unsigned flags = 99;
  cudaError_t r = cudaArrayGetInfo(&d, &e, &flags, a);
  std::printf("%s info: %s desc (%d,%d,%d,%d kind %d) extent %zux%zux%zu flags %u\n", name, cudaGetErrorName(r), d.x,
              d.y, d.z, d.w, static_cast<int>(d.f), e.width, e.height, e.depth, flags);
}

static cudaTextureDesc tex_desc(cudaTextureAddressMode mode, cudaTextureFilterMode filter, bool normalized,
                                cudaTextureReadMode read = cudaReadModeElementType) {
  cudaTextureDesc t{};
  t.addressMode[0] = t.addressMode[1] = t.addressMode[2] = mode;
  t.filterMode = filter;
  t.readMode = read;
  t.normalizedCoords = normalized;
  return t;
}

int main() {
  const cudaChannelFormatDesc f1 = cudaCreateChannelDesc<float>();
  std::printf("channel desc float: %d %d %d %d kind %d\n", f1.x, f1.y, f1.z, f1.w, static_cast<int>(f1.f));
  const cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  std::printf("channel desc uchar4: %d %d %d %d kind %d\n", u4.x, u4.y, u4.z, u4.w, static_cast<int>(u4.f));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));

  // ---- a 2D float array: round trips through every copy form.
  const int W = 13, H = 7;
  std::vector<float> host(16 * H), back(W * H, -1.f);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < 16; ++x) host[y * 16 + x] = x < W ? y * 100.f + x : -7.f;
  cudaArray_t a2;
  CHECK(cudaMallocArray(&a2, &f1, W, H));
  print_info("2D", a2);
  CHECK(cudaMemcpy2DToArray(a2, 0, 0, host.data(), 16 * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DFromArray(back.data(), W * sizeof(float), a2, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) bad += back[y * W + x] != y * 100.f + x;
  std::printf("2D round trip: %d wrong\n", bad);
  // A sub-region at an offset, into a pitched host buffer.
  float sub[3][4];
  CHECK(cudaMemcpy2DFromArray(sub, sizeof sub[0], a2, 5 * sizeof(float), 2, 4 * sizeof(float), 3, cudaMemcpyDeviceToHost));
  std::printf("sub-region: %g %g %g %g / %g %g %g %g / %g ... %g\n", sub[0][0], sub[0][1], sub[0][2], sub[0][3], sub[1][0],
              sub[1][1], sub[1][2], sub[1][3], sub[2][0], sub[2][3]);
  // Device memory in and out, array to array, async with pinned memory.
  float* dev;
  size_t pitch;
  CHECK(cudaMallocPitch(reinterpret_cast<void**>(&dev), &pitch, W * sizeof(float), H));
  CHECK(cudaMemcpy2DFromArray(dev, pitch, a2, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToDevice));
  cudaArray_t a2b;
  CHECK(cudaMallocArray(&a2b, &f1, W, H));
  CHECK(cudaMemcpy2DToArray(a2b, 0, 0, dev, pitch, W * sizeof(float), H, cudaMemcpyDeviceToDevice));
  cudaArray_t a2c;
  CHECK(cudaMallocArray(&a2c, &f1, W, H));
  CHECK(cudaMemcpy2DArrayToArray(a2c, 0, 0, a2b, 0, 0, W * sizeof(float), H));
  float* pinned;
  CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), W * H * sizeof(float)));
  std::memset(pinned, 0, W * H * sizeof(float));
  CHECK(cudaMemcpy2DFromArrayAsync(pinned, W * sizeof(float), a2c, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToHost,
                                   stream));
  CHECK(cudaStreamSynchronize(stream));
  bad = 0;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) bad += pinned[y * W + x] != y * 100.f + x;
  std::printf("device, array to array, async pinned: %d wrong\n", bad);
  // Async from pageable memory, then the deprecated 1D forms.
  for (int i = 0; i < W * H; ++i) back[i] = 0.5f * i;
  CHECK(cudaMemcpy2DToArrayAsync(a2c, 0, 0, back.data(), W * sizeof(float), W * sizeof(float), H,
                                 cudaMemcpyHostToDevice, stream));
  CHECK(cudaStreamSynchronize(stream));
  float row[20];
  CHECK(cudaMemcpyFromArray(row, a2c, 3 * sizeof(float), 1, sizeof row, cudaMemcpyDeviceToHost));
  std::printf("1D from (3,1), 20 floats across rows: %g %g .. %g %g\n", row[0], row[9], row[10], row[19]);
  const float ones[5] = {1, 2, 3, 4, 5};
  CHECK(cudaMemcpyToArray(a2c, 11 * sizeof(float), 0, ones, sizeof ones, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DFromArray(sub, sizeof sub[0], a2c, 10 * sizeof(float), 0, 3 * sizeof(float), 2,
                              cudaMemcpyDeviceToHost));
  std::printf("1D to (11,0): %g %g %g / %g %g %g\n", sub[0][0], sub[0][1], sub[0][2], sub[1][0], sub[1][1], sub[1][2]);

  // ---- a large array (4 MiB): staged through the shared heap.
  const int BW = 1024, BH = 1024;
  std::vector<float> big(BW * BH), big_back(BW * BH);
  for (int i = 0; i < BW * BH; ++i) big[i] = static_cast<float>((static_cast<long long>(i) * 7919) % 100003);
  cudaArray_t abig;
  CHECK(cudaMallocArray(&abig, &f1, BW, BH));
  CHECK(cudaMemcpy2DToArray(abig, 0, 0, big.data(), BW * 4, BW * 4, BH, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DFromArray(big_back.data(), BW * 4, abig, 0, 0, BW * 4, BH, cudaMemcpyDeviceToHost));
  std::printf("4 MiB round trip: %s, checksum %016llx\n", big == big_back ? "same" : "DIFFERENT",
              checksum(big_back.data(), big_back.size()));
  CHECK(cudaFreeArray(abig));

  // ---- textures on an 8x8 float array: T(x, y) = x * x + 10 * y.
  const int TW = 8, TH = 8;
  float tex_host[TH][TW];
  for (int y = 0; y < TH; ++y)
    for (int x = 0; x < TW; ++x) tex_host[y][x] = static_cast<float>(x * x + 10 * y);
  cudaArray_t at;
  CHECK(cudaMallocArray(&at, &f1, TW, TH));
  CHECK(cudaMemcpy2DToArray(at, 0, 0, tex_host, TW * 4, TW * 4, TH, cudaMemcpyHostToDevice));
  cudaResourceDesc res{};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = at;
  cudaTextureObject_t tp;
  cudaTextureDesc td = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
  CHECK(cudaCreateTextureObject(&tp, &res, &td, nullptr));
  float* out;
  CHECK(cudaMalloc(&out, 256 * sizeof(float)));
  tex_point<<<dim3(1, 1), dim3(TW, TH)>>>(tp, out, TW, TH);
  CHECK(cudaGetLastError());
  float got[TH][TW];
  CHECK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
  bad = 0;
  for (int y = 0; y < TH; ++y)
    for (int x = 0; x < TW; ++x) bad += got[y][x] != tex_host[y][x];
  std::printf("point fetch at texel centers: %d wrong; T(3,2) = %g, T(7,7) = %g\n", bad, got[2][3], got[7][7]);

  // Sampling: linear filtering with normalized coordinates, in clamp, wrap and border modes.
  // Coordinates are chosen so that each weight is a multiple of 1/8 (exact at 8 bits).
  std::vector<float2> coords;
  for (int k = 0; k < 12; ++k) coords.push_back(make_float2((0.5f + k * 0.625f) / TW, (0.5f + k * 0.375f) / TH));
  coords.push_back(make_float2(-1.f / 16, 0.5f));       // left of the first texel's center
  coords.push_back(make_float2(1.f + 3.f / 32, 0.25f));  // past the right edge
  coords.push_back(make_float2(1.25f, -0.25f));         // outside in both directions
  coords.push_back(make_float2(0.5f, 0.5f));            // the center: between four texels
  const int n = static_cast<int>(coords.size());
  float2* dcoords;
  CHECK(cudaMalloc(&dcoords, n * sizeof(float2)));
  CHECK(cudaMemcpy(dcoords, coords.data(), n * sizeof(float2), cudaMemcpyHostToDevice));
  const cudaTextureAddressMode modes[] = {cudaAddressModeClamp, cudaAddressModeWrap, cudaAddressModeBorder,
                                          cudaAddressModeMirror};
  const char* mode_names[] = {"clamp", "wrap", "border", "mirror"};
  for (int m = 0; m < 4; ++m) {
    cudaTextureObject_t tl;
    cudaTextureDesc tdl = tex_desc(modes[m], cudaFilterModeLinear, true);
    CHECK(cudaCreateTextureObject(&tl, &res, &tdl, nullptr));
    tex_sample<<<1, 64>>>(tl, dcoords, out, n);
    CHECK(cudaGetLastError());
    std::vector<float> vals(n);
    CHECK(cudaMemcpy(vals.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("linear %s:", mode_names[m]);
    for (float v : vals) std::printf(" %.4f", v);
    std::printf("\n");
    CHECK(cudaDestroyTextureObject(tl));
  }
  // Point sampling with normalized coordinates, wrap mode.
  {
    cudaTextureObject_t tw;
    cudaTextureDesc tdw = tex_desc(cudaAddressModeWrap, cudaFilterModePoint, true);
    CHECK(cudaCreateTextureObject(&tw, &res, &tdw, nullptr));
    tex_sample<<<1, 64>>>(tw, dcoords, out, n);
    CHECK(cudaGetLastError());
    std::vector<float> vals(n);
    CHECK(cudaMemcpy(vals.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("point wrap normalized:");
    for (float v : vals) std::printf(" %g", v);
    std::printf("\n");
    // The descriptors read back.
    cudaResourceDesc rb{};
    cudaTextureDesc tb{};
    CHECK(cudaGetTextureObjectResourceDesc(&rb, tw));
    CHECK(cudaGetTextureObjectTextureDesc(&tb, tw));
    std::printf("read back: resType %d same array %d; address %d %d filter %d read %d normalized %d\n",
                static_cast<int>(rb.resType), rb.res.array.array == at, static_cast<int>(tb.addressMode[0]),
                static_cast<int>(tb.addressMode[1]), static_cast<int>(tb.filterMode), static_cast<int>(tb.readMode),
                tb.normalizedCoords);
    CHECK(cudaDestroyTextureObject(tw));
  }

  // uchar4 texels read as normalized floats, linear filtering between two texels.
  {
    uchar4 px[2][4];
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 4; ++x)
        px[y][x] = make_uchar4(static_cast<unsigned char>(x * 60), static_cast<unsigned char>(255 - y * 100),
                               static_cast<unsigned char>(17 * (x + y)), 255);
    cudaArray_t ac;
    CHECK(cudaMallocArray(&ac, &u4, 4, 2));
    print_info("uchar4", ac);
    CHECK(cudaMemcpy2DToArray(ac, 0, 0, px, sizeof px[0], sizeof px[0], 2, cudaMemcpyHostToDevice));
    cudaResourceDesc rc{};
    rc.resType = cudaResourceTypeArray;
    rc.res.array.array = ac;
    cudaTextureObject_t tc;
    cudaTextureDesc tdc = tex_desc(cudaAddressModeClamp, cudaFilterModeLinear, false, cudaReadModeNormalizedFloat);
    CHECK(cudaCreateTextureObject(&tc, &rc, &tdc, nullptr));
    const float2 cc[3] = {make_float2(0.5f, 0.5f), make_float2(1.0f, 0.5f), make_float2(2.75f, 1.25f)};
    CHECK(cudaMemcpy(dcoords, cc, sizeof cc, cudaMemcpyHostToDevice));
    float4* out4;
    CHECK(cudaMalloc(&out4, 3 * sizeof(float4)));
    tex_sample4<<<1, 32>>>(tc, dcoords, out4, 3);
    CHECK(cudaGetLastError());
    float4 v4[3];
    CHECK(cudaMemcpy(v4, out4, sizeof v4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 3; ++i) std::printf("uchar4 normalized (%g,%g): %.4f %.4f %.4f %.4f\n", cc[i].x, cc[i].y, v4[i].x,
                                            v4[i].y, v4[i].z, v4[i].w);
    CHECK(cudaDestroyTextureObject(tc));
    CHECK(cudaFree(out4));
    CHECK(cudaFreeArray(ac));
  }

  // A texture on linear device memory (int elements, element-type reads).
  {
    int* lin;
    const int LN = 40;
    CHECK(cudaMalloc(&lin, LN * sizeof(int)));
    int li[LN];
    for (int i = 0; i < LN; ++i) li[i] = i * i - 50;
    CHECK(cudaMemcpy(lin, li, sizeof li, cudaMemcpyHostToDevice));
    cudaResourceDesc rl{};
    rl.resType = cudaResourceTypeLinear;
    rl.res.linear.devPtr = lin;
    rl.res.linear.desc = cudaCreateChannelDesc<int>();
    rl.res.linear.sizeInBytes = sizeof li;
    cudaTextureObject_t tlin;
    cudaTextureDesc tdl = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
    CHECK(cudaCreateTextureObject(&tlin, &rl, &tdl, nullptr));
    int* iout;
    CHECK(cudaMalloc(&iout, LN * sizeof(int)));
    tex_linear1d<<<1, 64>>>(tlin, iout, LN);
    CHECK(cudaGetLastError());
    int lo[LN];
    CHECK(cudaMemcpy(lo, iout, sizeof lo, cudaMemcpyDeviceToHost));
    std::printf("linear memory texture, reversed: %d %d %d ... %d\n", lo[0], lo[1], lo[2], lo[LN - 1]);
    CHECK(cudaDestroyTextureObject(tlin));
    CHECK(cudaFree(iout));
    CHECK(cudaFree(lin));
  }

  // ---- a layered array: 3 layers of 4x4, filled with cudaMemcpy3D, fetched per layer.
  {
    const int LW = 4, LH = 4, L = 3;
    float lh[L][LH][LW];
    for (int l = 0; l < L; ++l)
      for (int y = 0; y < LH; ++y)
        for (int x = 0; x < LW; ++x) lh[l][y][x] = l * 100.f + y * 4 + x;
    cudaArray_t al;
    CHECK(cudaMalloc3DArray(&al, &f1, make_cudaExtent(LW, LH, L), cudaArrayLayered));
    print_info("layered", al);
    cudaMemcpy3DParms p{};
    p.srcPtr = make_cudaPitchedPtr(lh, LW * sizeof(float), LW, LH);
    p.dstArray = al;
    p.extent = make_cudaExtent(LW, LH, L);
    p.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&p));
    cudaResourceDesc rl{};
    rl.resType = cudaResourceTypeArray;
    rl.res.array.array = al;
    cudaTextureObject_t tl;
    cudaTextureDesc tdl = tex_desc(cudaAddressModeClamp, cudaFilterModePoint, false);
    CHECK(cudaCreateTextureObject(&tl, &rl, &tdl, nullptr));
    tex_layered<<<L, dim3(LW, LH)>>>(tl, out, LW, LH);
    CHECK(cudaGetLastError());
    float lo[L][LH][LW];
    CHECK(cudaMemcpy(lo, out, sizeof lo, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int l = 0; l < L; ++l)
      for (int y = 0; y < LH; ++y)
        for (int x = 0; x < LW; ++x) bad += lo[l][y][x] != lh[l][y][x];
    std::printf("layered fetch: %d wrong; layer 2 (1,3) = %g\n", bad, lo[2][3][1]);
    // Back with cudaMemcpy3D, one layer at an offset.
    float one[LH][LW] = {};
    cudaMemcpy3DParms q{};
    q.srcArray = al;
    q.srcPos = make_cudaPos(0, 0, 1);
    q.dstPtr = make_cudaPitchedPtr(one, LW * sizeof(float), LW, LH);
    q.extent = make_cudaExtent(LW, LH, 1);
    q.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&q));
    std::printf("layer 1 back: %g %g ... %g\n", one[0][0], one[0][1], one[3][3]);
    CHECK(cudaDestroyTextureObject(tl));
    CHECK(cudaFreeArray(al));
  }

  // ---- a surface: written by a kernel, read back.
  {
    const int SW = 8, SH = 4;
    const cudaChannelFormatDesc i1 = cudaCreateChannelDesc<int>();
    cudaArray_t as;
    CHECK(cudaMallocArray(&as, &i1, SW, SH, cudaArraySurfaceLoadStore));
    print_info("surface", as);
    cudaResourceDesc rs{};
    rs.resType = cudaResourceTypeArray;
    rs.res.array.array = as;
    cudaSurfaceObject_t s;
    CHECK(cudaCreateSurfaceObject(&s, &rs));
    surf_fill<<<1, dim3(SW, SH)>>>(s, SW, SH, 5);
    CHECK(cudaGetLastError());
    int sv[SH][SW];
    CHECK(cudaMemcpy2DFromArray(sv, sizeof sv[0], as, 0, 0, sizeof sv[0], SH, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int y = 0; y < SH; ++y)
      for (int x = 0; x < SW; ++x) bad += sv[y][x] != 5 + y * 1000 + x;
    std::printf("surface write: %d wrong; (7,3) = %d\n", bad, sv[3][7]);
    cudaResourceDesc sb{};
    CHECK(cudaGetSurfaceObjectResourceDesc(&sb, s));
    std::printf("surface read back: resType %d same array %d\n", static_cast<int>(sb.resType), sb.res.array.array == as);
    CHECK(cudaDestroySurfaceObject(s));
    // An array without cudaArraySurfaceLoadStore: NVIDIA's 13.0 runtime takes it (seen on
    // the H100). The object is destroyed at once: none outlives its array.
    rs.res.array.array = a2;
    const cudaError_t plain = cudaCreateSurfaceObject(&s, &rs);
    status("surface on an array without cudaArraySurfaceLoadStore", plain);
    if (plain == cudaSuccess) CHECK(cudaDestroySurfaceObject(s));
    CHECK(cudaFreeArray(as));
  }

  // ---- cubemap, 1D and mipmapped arrays.
  {
    cudaArray_t cube, a1;
    CHECK(cudaMalloc3DArray(&cube, &f1, make_cudaExtent(8, 8, 6), cudaArrayCubemap));
    print_info("cubemap", cube);
    CHECK(cudaFreeArray(cube));
    CHECK(cudaMallocArray(&a1, &u4, 64));
    print_info("1D", a1);
    CHECK(cudaFreeArray(a1));
    cudaMipmappedArray_t mm;
    CHECK(cudaMallocMipmappedArray(&mm, &f1, make_cudaExtent(16, 16, 0), 10));
    for (unsigned l = 0; l < 6; ++l) {
      cudaArray_t lv = nullptr;
      cudaError_t e = cudaGetMipmappedArrayLevel(&lv, mm, l);
      if (e != cudaSuccess) {
        status("mipmap level 5 of 5", e);
        break;
      }
      char name[32];
      std::snprintf(name, sizeof name, "mipmap level %u", l);
      print_info(name, lv);
    }
    cudaArray_t l2;
    CHECK(cudaGetMipmappedArrayLevel(&l2, mm, 2));
    const float l2v[4][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 16}};
    float l2b[4][4] = {};
    CHECK(cudaMemcpy2DToArray(l2, 0, 0, l2v, 16, 16, 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy2DFromArray(l2b, 16, l2, 0, 0, 16, 4, cudaMemcpyDeviceToHost));
    std::printf("mipmap level 2 round trip: %s\n", std::memcmp(l2v, l2b, sizeof l2v) == 0 ? "same" : "DIFFERENT");
    CHECK(cudaFreeMipmappedArray(mm));
  }

  // ---- errors.
  {
    cudaArray_t e1 = nullptr;
    status("cudaMallocArray with unknown flags", cudaMallocArray(&e1, &f1, 8, 8, 0x100));
    const cudaChannelFormatDesc three = cudaCreateChannelDesc(32, 32, 32, 0, cudaChannelFormatKindFloat);
    status("cudaMallocArray with 3 channels", cudaMallocArray(&e1, &three, 8, 8));
    status("cubemap of 8x4 faces", cudaMalloc3DArray(&e1, &f1, make_cudaExtent(8, 4, 6), cudaArrayCubemap));
    status("copy past the array's width",
           cudaMemcpy2DToArray(a2, 4 * sizeof(float), 0, host.data(), 16 * sizeof(float), 10 * sizeof(float), 1,
                               cudaMemcpyHostToDevice));
    status("copy past the array's height",
           cudaMemcpy2DToArray(a2, 0, 5, host.data(), 16 * sizeof(float), 4 * sizeof(float), 3, cudaMemcpyHostToDevice));
    status("host to host kind", cudaMemcpy2DToArray(a2, 0, 0, host.data(), 16 * sizeof(float), 4 * sizeof(float), 1,
                                                    cudaMemcpyHostToHost));
    cudaTextureObject_t tx;
    status("texture without a texture descriptor", cudaCreateTextureObject(&tx, &res, nullptr, nullptr));
    cudaArray_t twice;
    CHECK(cudaMallocArray(&twice, &f1, 4, 4));
    status("first cudaFreeArray", cudaFreeArray(twice));
    status("second cudaFreeArray", cudaFreeArray(twice));
    status("cudaFreeArray(NULL)", cudaFreeArray(nullptr));
  }

  CHECK(cudaDestroyTextureObject(tp));
  CHECK(cudaFreeArray(at));
  CHECK(cudaFreeArray(a2));
  CHECK(cudaFreeArray(a2b));
  CHECK(cudaFreeArray(a2c));
  CHECK(cudaFree(dev));
  CHECK(cudaFree(out));
  CHECK(cudaFree(dcoords));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaDeviceSynchronize());
  std::printf("done\n");
  return 0;
}
