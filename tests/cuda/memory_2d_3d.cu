// vmcuda CUDA test program: 2D asynchronous copies and memsets, and 3D (pitched) memory:
// cudaMemcpy2DAsync in every direction from pageable and pinned host memory, in stream
// order and across streams; cudaMemset2DAsync; cudaMalloc3D, cudaMemset3D[Async],
// cudaMemcpy3D[Async] with positions, every direction. Every result is checked by the
// program against a model kept on the CPU. Prints NVIDIA's answers at the edges ("probe"
// lines, error numbers and pitches, which are deterministic) and one line per check; the
// output is the same natively on a GPU and through vmcuda.
#include <cstdio>
#include <cstring>
#include <vector>

static void probe(const char* what, int value) { std::printf("probe %s = %d\n", what, value); }

static int failures = 0;
#define CHECK(cond, what)                                 \
  do {                                                    \
    bool ok_ = (cond);                                    \
    std::printf("%s: %s\n", ok_ ? "ok" : "FAILED", what); \
    if (!ok_) ++failures;                                 \
  } while (0)

// A pattern byte for (x, y, z) of a volume and a seed.
static unsigned char pat(size_t x, size_t y, size_t z, unsigned seed) {
  return static_cast<unsigned char>((x * 7 + y * 13 + z * 29 + seed * 31) & 0xff);
}
// A host volume of `depth` slices of `ysize` rows `pitch` bytes apart, filled with a pattern.
static void fill(unsigned char* p, size_t pitch, size_t ysize, size_t depth, unsigned seed) {
  for (size_t z = 0; z < depth; ++z)
    for (size_t y = 0; y < ysize; ++y)
      for (size_t x = 0; x < pitch; ++x) p[(z * ysize + y) * pitch + x] = pat(x, y, z, seed);
}
// The CPU model of a 3D copy between pitched volumes (positions in bytes and rows).
static void model_copy3d(unsigned char* dst, size_t dpitch, size_t dysize, cudaPos dpos, const unsigned char* src,
                         size_t spitch, size_t sysize, cudaPos spos, cudaExtent e) {
  for (size_t z = 0; z < e.depth; ++z)
    for (size_t y = 0; y < e.height; ++y)
      std::memmove(dst + ((dpos.z + z) * dysize + dpos.y + y) * dpitch + dpos.x,
                   src + ((spos.z + z) * sysize + spos.y + y) * spitch + spos.x, e.width);
}
static void model_set3d(unsigned char* dst, size_t pitch, size_t ysize, cudaPos pos, unsigned char v, cudaExtent e) {
  for (size_t z = 0; z < e.depth; ++z)
    for (size_t y = 0; y < e.height; ++y)
      std::memset(dst + ((pos.z + z) * ysize + pos.y + y) * pitch + pos.x, v, e.width);
}
static size_t differences(const unsigned char* a, const unsigned char* b, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += a[i] != b[i];
  if (bad) std::printf("  %zu bytes differ\n", bad);
  return bad;
}
// Only the `width` bytes of each of `height` rows count (the rest of a pitch is padding).
static size_t differences_2d(const unsigned char* a, size_t apitch, const unsigned char* b, size_t bpitch,
                             size_t width, size_t height) {
  size_t bad = 0;
  for (size_t y = 0; y < height; ++y)
    for (size_t x = 0; x < width; ++x) bad += a[y * apitch + x] != b[y * bpitch + x];
  if (bad) std::printf("  %zu bytes differ\n", bad);
  return bad;
}

static cudaMemcpy3DParms parms(cudaPitchedPtr dst, cudaPos dpos, cudaPitchedPtr src, cudaPos spos, cudaExtent e,
                               cudaMemcpyKind kind) {
  cudaMemcpy3DParms p = {};
  p.dstPtr = dst;
  p.dstPos = dpos;
  p.srcPtr = src;
  p.srcPos = spos;
  p.extent = e;
  p.kind = kind;
  return p;
}

static void probes() {
  char* d = nullptr;
  size_t pitch = 0;
  cudaMallocPitch(reinterpret_cast<void**>(&d), &pitch, 100, 10);
  static unsigned char h[1 << 16];
  cudaStream_t s;
  cudaStreamCreate(&s);
  probe("MallocPitch(100, 10) pitch", static_cast<int>(pitch));
  probe("Memcpy2DAsync(width > dpitch)", cudaMemcpy2DAsync(d, 64, h, 128, 100, 2, cudaMemcpyHostToDevice, s));
  probe("Memcpy2DAsync(width > spitch)", cudaMemcpy2DAsync(h, 128, d, 64, 100, 2, cudaMemcpyDeviceToHost, s));
  probe("Memcpy2DAsync(kind 7)", cudaMemcpy2DAsync(h, 128, d, pitch, 100, 2, (cudaMemcpyKind)7, s));
  probe("Memcpy2DAsync(height 0, kind 7)", cudaMemcpy2DAsync(h, 128, d, pitch, 100, 0, (cudaMemcpyKind)7, s));
  probe("Memcpy2DAsync(width 0)", cudaMemcpy2DAsync(d, pitch, h, 128, 0, 2, cudaMemcpyHostToDevice, s));
  probe("Memcpy2DAsync(one row past)", cudaMemcpy2DAsync(d, pitch, h, 100, 100, 11, cudaMemcpyHostToDevice, s));
  probe("Memcpy2DAsync(NULL src)", cudaMemcpy2DAsync(d, pitch, nullptr, 100, 100, 2, cudaMemcpyHostToDevice, s));
  probe("GetLastError", cudaGetLastError());
  probe("Memset2DAsync(width > pitch)", cudaMemset2DAsync(d, 64, 0, 100, 2, s));
  probe("Memset2DAsync(one row past)", cudaMemset2DAsync(d, pitch, 0, 100, 11, s));
  probe("Memset2DAsync(height 0)", cudaMemset2DAsync(d, pitch, 0, 100, 0, s));
  probe("GetLastError", cudaGetLastError());

  cudaPitchedPtr pp = {};
  probe("Malloc3D(NULL)", cudaMalloc3D(nullptr, make_cudaExtent(100, 4, 4)));
  probe("Malloc3D(width 0)", cudaMalloc3D(&pp, make_cudaExtent(0, 4, 4)));
  probe("  ptr is NULL", pp.ptr == nullptr);
  probe("  pitch", static_cast<int>(pp.pitch));
  probe("  xsize", static_cast<int>(pp.xsize));
  probe("  ysize", static_cast<int>(pp.ysize));
  probe("Malloc3D(depth 0)", cudaMalloc3D(&pp, make_cudaExtent(100, 4, 0)));
  probe("  ptr is NULL", pp.ptr == nullptr);
  probe("  pitch", static_cast<int>(pp.pitch));
  probe("  xsize", static_cast<int>(pp.xsize));
  probe("  ysize", static_cast<int>(pp.ysize));
  probe("GetLastError", cudaGetLastError());
  cudaPitchedPtr v = {};
  probe("Malloc3D(100, 10, 3)", cudaMalloc3D(&v, make_cudaExtent(100, 10, 3)));
  probe("  pitch", static_cast<int>(v.pitch));
  probe("  xsize", static_cast<int>(v.xsize));
  probe("  ysize", static_cast<int>(v.ysize));
  probe("Memset3D(width > pitch)", cudaMemset3D(make_cudaPitchedPtr(v.ptr, 64, 100, 10), 0, make_cudaExtent(100, 2, 2)));
  probe("Memset3D(one slice past)", cudaMemset3D(v, 0, make_cudaExtent(100, 10, 4)));
  probe("Memset3D(depth 0)", cudaMemset3D(v, 0, make_cudaExtent(100, 10, 0)));
  probe("Memset3D(NULL ptr)", cudaMemset3D(make_cudaPitchedPtr(nullptr, v.pitch, 100, 10), 0, make_cudaExtent(100, 2, 2)));
  probe("Memset3D(height > ysize)", cudaMemset3D(v, 0, make_cudaExtent(100, 11, 1)));
  probe("Memset3DAsync(one slice past)", cudaMemset3DAsync(v, 0, make_cudaExtent(100, 10, 4), s));
  probe("GetLastError", cudaGetLastError());
  const cudaPos o = make_cudaPos(0, 0, 0);
  const cudaPitchedPtr hp = make_cudaPitchedPtr(h, 128, 100, 10);
  cudaMemcpy3DParms p = parms(v, o, hp, o, make_cudaExtent(100, 10, 3), cudaMemcpyHostToDevice);
  probe("Memcpy3D(NULL)", cudaMemcpy3D(nullptr));
  probe("Memcpy3D(ok)", cudaMemcpy3D(&p));
  cudaMemcpy3DParms q = p;
  q.kind = (cudaMemcpyKind)7;
  probe("Memcpy3D(kind 7)", cudaMemcpy3D(&q));
  q = p;
  q.extent = make_cudaExtent(0, 10, 3);
  probe("Memcpy3D(width 0)", cudaMemcpy3D(&q));
  q.extent = make_cudaExtent(100, 10, 0);
  probe("Memcpy3D(depth 0)", cudaMemcpy3D(&q));
  q = p;
  q.srcPtr.pitch = 64;
  probe("Memcpy3D(width > src pitch)", cudaMemcpy3D(&q));
  q = p;
  q.dstPtr.pitch = 64;
  probe("Memcpy3D(width > dst pitch)", cudaMemcpy3D(&q));
  q = p;
  q.extent.depth = 4;
  probe("Memcpy3D(one slice past)", cudaMemcpy3D(&q));
  q = p;
  q.dstPos = make_cudaPos(1, 0, 0);
  probe("Memcpy3D(dst x + width > pitch)", cudaMemcpy3D(&q));
  q = p;
  q.srcPtr.ptr = nullptr;
  probe("Memcpy3D(NULL src)", cudaMemcpy3D(&q));
  q = p;
  q.extent.height = 11;
  probe("Memcpy3D(height > dst ysize)", cudaMemcpy3D(&q));
  q = p;
  q.dstPtr.ysize = 5;
  q.extent = make_cudaExtent(100, 5, 2);
  probe("Memcpy3D(dst ysize 5, 2 slices)", cudaMemcpy3D(&q));
  q.extent = make_cudaExtent(100, 6, 1);
  probe("Memcpy3D(height 6 > dst ysize 5, 1 slice)", cudaMemcpy3D(&q));
  q = p;
  q.dstPos = make_cudaPos(0, 9, 0);
  q.extent = make_cudaExtent(100, 2, 1);
  probe("Memcpy3D(dst y + height > ysize, 1 slice)", cudaMemcpy3D(&q));
  q = p;
  q.dstPos = make_cudaPos(0, 9, 0);
  q.extent = make_cudaExtent(100, 2, 2);
  probe("Memcpy3D(dst y + height > ysize, 2 slices)", cudaMemcpy3D(&q));
  q = p;
  q.dstPtr.ysize = 5;
  q.extent = make_cudaExtent(100, 6, 2);
  probe("Memcpy3D(height 6 > dst ysize 5, 2 slices)", cudaMemcpy3D(&q));
  q = p;
  q.srcPtr.ysize = 5;
  q.extent = make_cudaExtent(100, 6, 1);
  probe("Memcpy3D(height 6 > src ysize 5, 1 slice)", cudaMemcpy3D(&q));
  q.extent = make_cudaExtent(100, 6, 2);
  probe("Memcpy3D(height 6 > src ysize 5, 2 slices)", cudaMemcpy3D(&q));
  q = p;
  q.srcPos = make_cudaPos(0, 9, 0);
  q.extent = make_cudaExtent(100, 2, 1);
  probe("Memcpy3D(src y + height > ysize, 1 slice)", cudaMemcpy3D(&q));
  q = p;
  q.srcPtr.ysize = 0;
  q.dstPtr.ysize = 0;
  q.extent = make_cudaExtent(100, 1, 1);
  probe("Memcpy3D(ysize 0, 1 row)", cudaMemcpy3D(&q));
  q = p;
  q.srcPos = make_cudaPos(40, 0, 0);
  probe("Memcpy3D(src x + width > src pitch)", cudaMemcpy3D(&q));
  q = p;
  q.dstPos = make_cudaPos(420, 0, 0);
  probe("Memcpy3D(dst x + width > dst pitch)", cudaMemcpy3D(&q));
  q = p;
  q.srcPtr = v;
  q.dstPtr = v;
  q.kind = cudaMemcpyDeviceToDevice;
  q.dstPos = make_cudaPos(0, 0, 1);
  q.extent = make_cudaExtent(100, 10, 2);
  probe("Memcpy3D(overlapping DtoD)", cudaMemcpy3D(&q));
  q = p;
  q.kind = cudaMemcpyDeviceToHost;
  probe("Memcpy3D(HtoD pointers as DtoH)", cudaMemcpy3D(&q));
  probe("Memset3D(ysize 0, 1 row)", cudaMemset3D(make_cudaPitchedPtr(v.ptr, v.pitch, 100, 0), 0, make_cudaExtent(100, 1, 1)));
  probe("Memset3D(ysize 0, 2 slices)", cudaMemset3D(make_cudaPitchedPtr(v.ptr, v.pitch, 100, 0), 0, make_cudaExtent(100, 1, 2)));
  probe("Memset3D(x + width > pitch)", cudaMemset3D(make_cudaPitchedPtr(static_cast<char*>(v.ptr) + 450, v.pitch, 100, 10), 0, make_cudaExtent(100, 1, 1)));
  probe("Memset2DAsync(host pointer)", cudaMemset2DAsync(h, 128, 0, 100, 2, s));
  probe("Memcpy2DAsync(HtoD into host)", cudaMemcpy2DAsync(h, 128, h + 4096, 128, 100, 2, cudaMemcpyHostToDevice, s));
  probe("Memcpy2DAsync(DtoD from host)", cudaMemcpy2DAsync(d, pitch, h, 128, 100, 2, cudaMemcpyDeviceToDevice, s));
  probe("Memcpy2D(spitch 2^31)", cudaMemcpy2D(d, pitch, h, size_t{1} << 31, 100, 1, cudaMemcpyHostToDevice));
  probe("Memcpy2DAsync(spitch 2^31)", cudaMemcpy2DAsync(d, pitch, h, size_t{1} << 31, 100, 1, cudaMemcpyHostToDevice, s));
  probe("Memset2D(pitch 2^31)", cudaMemset2D(d, size_t{1} << 31, 0, 100, 1));
  q = p;
  q.srcPtr.pitch = size_t{1} << 31;
  q.extent = make_cudaExtent(100, 1, 1);
  probe("Memcpy3D(src pitch 2^31)", cudaMemcpy3D(&q));
  probe("Memset3D(pitch 2^31)", cudaMemset3D(make_cudaPitchedPtr(v.ptr, size_t{1} << 31, 100, 1), 0, make_cudaExtent(100, 1, 1)));
  probe("GetLastError", cudaGetLastError());
  probe("Memcpy3DAsync(kind 7)", [&] {
    cudaMemcpy3DParms r = p;
    r.kind = (cudaMemcpyKind)7;
    return cudaMemcpy3DAsync(&r, s);
  }());
  probe("Memcpy3DAsync(NULL)", cudaMemcpy3DAsync(nullptr, s));
  probe("GetLastError", cudaGetLastError());
  probe("StreamSynchronize", cudaStreamSynchronize(s));
  cudaFree(v.ptr);
  cudaFree(d);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

// 2D async copies, HtoD then DtoD then DtoH on one stream, host memory pageable or pinned;
// `width` x `height` bytes (large regions take vmcuda's staged paths).
static bool async_2d(size_t width, size_t height, bool pinned) {
  const size_t spitch = width + 24, dpitch = width + 40;
  unsigned char *src, *dst;
  if (pinned) {
    cudaMallocHost(&src, spitch * height);
    cudaMallocHost(&dst, dpitch * height);
  } else {
    src = new unsigned char[spitch * height];
    dst = new unsigned char[dpitch * height];
  }
  fill(src, spitch, height, 1, 1);
  std::memset(dst, 0x5a, dpitch * height);
  void *a = nullptr, *b = nullptr;
  size_t ap = 0, bp = 0;
  bool ok = cudaMallocPitch(&a, &ap, width, height) == cudaSuccess && cudaMallocPitch(&b, &bp, width + 1, height) == cudaSuccess;
  cudaStream_t s;
  ok = ok && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
  ok = ok && cudaMemcpy2DAsync(a, ap, src, spitch, width, height, cudaMemcpyHostToDevice, s) == cudaSuccess;
  ok = ok && cudaMemcpy2DAsync(b, bp, a, ap, width, height, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
  ok = ok && cudaMemcpy2DAsync(dst, dpitch, b, bp, width, height, cudaMemcpyDeviceToHost, s) == cudaSuccess;
  // Into pageable memory the copy has completed when the call returns (CUDA's documented
  // behaviour); into pinned memory only once the stream is synchronized.
  size_t bad = 0;
  if (!pinned) bad += differences_2d(dst, dpitch, src, spitch, width, height);
  ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
  bad += differences_2d(dst, dpitch, src, spitch, width, height);
  for (size_t y = 0; y < height; ++y)  // the padding of each row is untouched
    for (size_t x = width; x < dpitch; ++x) bad += dst[y * dpitch + x] != 0x5a;
  ok = ok && cudaStreamDestroy(s) == cudaSuccess && cudaFree(a) == cudaSuccess && cudaFree(b) == cudaSuccess;
  if (pinned) {
    cudaFreeHost(src);
    cudaFreeHost(dst);
  } else {
    delete[] src;
    delete[] dst;
  }
  return ok && bad == 0;
}

// Work on two streams ordered by an event: stream a uploads and memsets parts of the image,
// stream b waits for it, copies a window device to device and reads everything back.
static bool ordered_2d(bool pinned) {
  const size_t width = 256, height = 64, hp = 300;
  unsigned char *img, *out;
  if (pinned) {
    cudaMallocHost(&img, hp * height);
    cudaMallocHost(&out, width * height);
  } else {
    img = new unsigned char[hp * height];
    out = new unsigned char[width * height];
  }
  fill(img, hp, height, 1, 2);
  std::vector<unsigned char> model(width * height);
  for (size_t y = 0; y < height; ++y) std::memcpy(&model[y * width], img + y * hp, width);
  void* d = nullptr;
  size_t dp = 0;
  bool ok = cudaMallocPitch(&d, &dp, width, height) == cudaSuccess;
  cudaStream_t a, b;
  cudaEvent_t e;
  ok = ok && cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess &&
       cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess &&
       cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess;
  char* dc = static_cast<char*>(d);
  ok = ok && cudaMemcpy2DAsync(d, dp, img, hp, width, height, cudaMemcpyHostToDevice, a) == cudaSuccess;
  ok = ok && cudaMemset2DAsync(dc + 4 * dp + 16, dp, 0xee, 32, 8, a) == cudaSuccess;
  for (size_t y = 4; y < 12; ++y) std::memset(&model[y * width + 16], 0xee, 32);
  ok = ok && cudaEventRecord(e, a) == cudaSuccess && cudaStreamWaitEvent(b, e, 0) == cudaSuccess;
  // A window of 40 x 10 from (8, 2) to (200, 50), then everything back, on stream b.
  ok = ok && cudaMemcpy2DAsync(dc + 50 * dp + 200, dp, dc + 2 * dp + 8, dp, 40, 10, cudaMemcpyDeviceToDevice, b) ==
                 cudaSuccess;
  for (size_t y = 0; y < 10; ++y) std::memmove(&model[(50 + y) * width + 200], &model[(2 + y) * width + 8], 40);
  ok = ok && cudaMemcpy2DAsync(out, width, d, dp, width, height, cudaMemcpyDefault, b) == cudaSuccess;
  ok = ok && cudaStreamSynchronize(b) == cudaSuccess;
  const size_t bad = differences(out, model.data(), width * height);
  ok = ok && cudaEventDestroy(e) == cudaSuccess && cudaStreamDestroy(a) == cudaSuccess &&
       cudaStreamDestroy(b) == cudaSuccess && cudaFree(d) == cudaSuccess;
  if (pinned) {
    cudaFreeHost(img);
    cudaFreeHost(out);
  } else {
    delete[] img;
    delete[] out;
  }
  return ok && bad == 0;
}

// Host to host and the default stream: cudaMemcpy2DAsync with cudaMemcpyHostToHost and
// cudaMemcpyDefault between host buffers, and cudaMemset2DAsync on stream 0.
static bool host_to_host_2d() {
  std::vector<unsigned char> a(50 * 20), b(64 * 20, 0x33);
  fill(a.data(), 50, 20, 1, 3);
  bool ok = cudaMemcpy2DAsync(b.data(), 64, a.data(), 50, 40, 20, cudaMemcpyHostToHost, 0) == cudaSuccess;
  ok = ok && cudaStreamSynchronize(0) == cudaSuccess;
  size_t bad = differences_2d(b.data(), 64, a.data(), 50, 40, 20);
  for (size_t y = 0; y < 20; ++y) bad += b[y * 64 + 40] != 0x33;
  std::vector<unsigned char> c(64 * 20, 0);
  ok = ok && cudaMemcpy2DAsync(c.data(), 64, b.data(), 64, 64, 20, cudaMemcpyDefault, 0) == cudaSuccess;
  ok = ok && cudaStreamSynchronize(0) == cudaSuccess;
  bad += differences(c.data(), b.data(), c.size());
  void* d = nullptr;
  size_t dp = 0;
  ok = ok && cudaMallocPitch(&d, &dp, 64, 20) == cudaSuccess;
  ok = ok && cudaMemset2DAsync(d, dp, 0x42, 64, 20, 0) == cudaSuccess;
  ok = ok && cudaMemset2DAsync(static_cast<char*>(d) + dp * 3 + 5, dp, 0x17, 10, 4, 0) == cudaSuccess;
  ok = ok && cudaMemcpy2D(c.data(), 64, d, dp, 64, 20, cudaMemcpyDeviceToHost) == cudaSuccess;
  for (size_t y = 0; y < 20; ++y)
    for (size_t x = 0; x < 64; ++x) bad += c[y * 64 + x] != (y >= 3 && y < 7 && x >= 5 && x < 15 ? 0x17 : 0x42);
  ok = ok && cudaFree(d) == cudaSuccess;
  if (bad) std::printf("  %zu bytes wrong\n", bad);
  return ok && bad == 0;
}

// cudaMalloc3D, cudaMemset3D and cudaMemcpy3D in every direction with positions, checked
// against a CPU model of both device volumes. `big` makes the host transfers staged.
static bool volumes(bool big, bool async, bool pinned) {
  const cudaExtent ea = make_cudaExtent(big ? 3000 : 300, big ? 120 : 20, 5);
  const cudaExtent eb = make_cudaExtent(big ? 2900 : 290, big ? 110 : 18, 6);
  cudaPitchedPtr va = {}, vb = {};
  bool ok = cudaMalloc3D(&va, ea) == cudaSuccess && cudaMalloc3D(&vb, eb) == cudaSuccess;
  if (!ok) return false;
  ok = va.xsize == ea.width && va.ysize == ea.height && va.pitch >= ea.width && vb.ysize == eb.height;
  cudaStream_t s = 0;
  if (async) ok = ok && cudaStreamCreate(&s) == cudaSuccess;
  // Models of both volumes, pitch for pitch.
  std::vector<unsigned char> ma(va.pitch * va.ysize * ea.depth), mb(vb.pitch * vb.ysize * eb.depth);
  auto memset3d = [&](cudaPitchedPtr p, int value, cudaExtent e) {
    return async ? cudaMemset3DAsync(p, value, e, s) : cudaMemset3D(p, value, e);
  };
  auto memcpy3d = [&](const cudaMemcpy3DParms& p) { return async ? cudaMemcpy3DAsync(&p, s) : cudaMemcpy3D(&p); };
  // Whole volumes, then a sub-volume of a (from (3, 2, 1) of its pitched pointer, as an app offsets it).
  ok = ok && memset3d(va, 0x11, ea) == cudaSuccess && memset3d(vb, 0x22, eb) == cudaSuccess;
  std::memset(ma.data(), 0x11, ma.size());
  std::memset(mb.data(), 0x22, mb.size());
  {
    cudaPitchedPtr sub = va;
    sub.ptr = static_cast<char*>(va.ptr) + (1 * va.ysize + 2) * va.pitch + 3;
    const cudaExtent e = make_cudaExtent(ea.width / 2, ea.height / 2, 3);
    ok = ok && memset3d(sub, 0x99, e) == cudaSuccess;
    model_set3d(ma.data(), va.pitch, va.ysize, make_cudaPos(3, 2, 1), 0x99, e);
  }
  // Host to device: a host volume with its own pitch and slice height, into a at an offset.
  const size_t hpitch = ea.width + 13, hys = ea.height + 3, hdepth = 4;
  unsigned char* host;
  if (pinned)
    cudaMallocHost(&host, hpitch * hys * hdepth);
  else
    host = new unsigned char[hpitch * hys * hdepth];
  fill(host, hpitch, hys, hdepth, 4);
  const cudaPitchedPtr hv = make_cudaPitchedPtr(host, hpitch, ea.width, hys);
  {
    const cudaPos sp = make_cudaPos(5, 1, 1), dp = make_cudaPos(7, 3, 2);
    const cudaExtent e = make_cudaExtent(ea.width - 20, ea.height - 5, 3);
    ok = ok && memcpy3d(parms(va, dp, hv, sp, e, cudaMemcpyHostToDevice)) == cudaSuccess;
    model_copy3d(ma.data(), va.pitch, va.ysize, dp, host, hpitch, hys, sp, e);
  }
  // Device to device: a window of a into b at an offset.
  {
    const cudaPos sp = make_cudaPos(10, 4, 0), dp = make_cudaPos(2, 1, 3);
    const cudaExtent e = make_cudaExtent(eb.width - 50, eb.height - 6, 3);
    ok = ok && memcpy3d(parms(vb, dp, va, sp, e, cudaMemcpyDeviceToDevice)) == cudaSuccess;
    model_copy3d(mb.data(), vb.pitch, vb.ysize, dp, ma.data(), va.pitch, va.ysize, sp, e);
  }
  // Whole slices (height == ysize on both sides): b's slices 0..1 into its slices 4..5,
  // with cudaMemcpyDefault.
  {
    const cudaExtent e = make_cudaExtent(eb.width, eb.height, 2);
    ok = ok && memcpy3d(parms(vb, make_cudaPos(0, 0, 4), vb, make_cudaPos(0, 0, 0), e, cudaMemcpyDefault)) ==
                   cudaSuccess;
    model_copy3d(mb.data(), vb.pitch, vb.ysize, make_cudaPos(0, 0, 4), mb.data(), vb.pitch, vb.ysize,
                 make_cudaPos(0, 0, 0), e);
  }
  // Device to host: everything back, both volumes, through cudaMemcpy3D into host volumes
  // with their own pitches, plus a window at an offset.
  std::vector<unsigned char> ra(ea.width * ea.height * ea.depth), rb((eb.width + 8) * eb.height * eb.depth);
  unsigned char* back = nullptr;  // pinned or pageable target of the window
  const size_t bpitch = 64, bys = 9, bdepth = 3;
  if (pinned)
    cudaMallocHost(&back, bpitch * bys * bdepth);
  else
    back = new unsigned char[bpitch * bys * bdepth];
  std::memset(back, 0xab, bpitch * bys * bdepth);
  std::vector<unsigned char> mback(back, back + bpitch * bys * bdepth);
  const cudaPos o = make_cudaPos(0, 0, 0);
  ok = ok && memcpy3d(parms(make_cudaPitchedPtr(ra.data(), ea.width, ea.width, ea.height), o, va, o, ea,
                            cudaMemcpyDeviceToHost)) == cudaSuccess;
  ok = ok && memcpy3d(parms(make_cudaPitchedPtr(rb.data(), eb.width + 8, eb.width, eb.height), o, vb, o, eb,
                            cudaMemcpyDefault)) == cudaSuccess;
  {
    const cudaPos sp = make_cudaPos(ea.width - 40, ea.height - 7, 2), dp = make_cudaPos(3, 1, 0);
    const cudaExtent e = make_cudaExtent(40, 7, 3);
    ok = ok && memcpy3d(parms(make_cudaPitchedPtr(back, bpitch, 50, bys), dp, va, sp, e, cudaMemcpyDeviceToHost)) ==
                   cudaSuccess;
    model_copy3d(mback.data(), bpitch, bys, dp, ma.data(), va.pitch, va.ysize, sp, e);
  }
  if (async) ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
  size_t bad = 0;
  std::vector<unsigned char> want(ra.size());
  model_copy3d(want.data(), ea.width, ea.height, o, ma.data(), va.pitch, va.ysize, o, ea);
  bad += differences(ra.data(), want.data(), ra.size());
  want.assign(rb.size(), 0);
  model_copy3d(want.data(), eb.width + 8, eb.height, o, mb.data(), vb.pitch, vb.ysize, o, eb);
  for (size_t i = 0; i < rb.size(); ++i)
    if (i % (eb.width + 8) >= eb.width) rb[i] = 0;  // the host rows' padding is the vector's zeros
  bad += differences(rb.data(), want.data(), rb.size());
  bad += differences(back, mback.data(), mback.size());
  // Host to host, 3D: the window back into a fresh host volume.
  std::vector<unsigned char> hh(bpitch * bys * bdepth, 0);
  ok = ok && memcpy3d(parms(make_cudaPitchedPtr(hh.data(), bpitch, bpitch, bys), o,
                            make_cudaPitchedPtr(back, bpitch, bpitch, bys), o, make_cudaExtent(bpitch, bys, bdepth),
                            cudaMemcpyHostToHost)) == cudaSuccess;
  if (async) ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
  bad += differences(hh.data(), back, hh.size());
  if (pinned) {
    cudaFreeHost(host);
    cudaFreeHost(back);
  } else {
    delete[] host;
    delete[] back;
  }
  if (async) ok = ok && cudaStreamDestroy(s) == cudaSuccess;
  ok = ok && cudaFree(va.ptr) == cudaSuccess && cudaFree(vb.ptr) == cudaSuccess;
  return ok && bad == 0;
}

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // every line out before anything can go wrong
  probes();
  CHECK(async_2d(100, 30, false), "cudaMemcpy2DAsync HtoD, DtoD, DtoH, 100 x 30, pageable (inline)");
  CHECK(async_2d(3000, 700, false), "cudaMemcpy2DAsync HtoD, DtoD, DtoH, 3000 x 700, pageable (staged)");
  CHECK(async_2d(100, 30, true), "cudaMemcpy2DAsync HtoD, DtoD, DtoH, 100 x 30, pinned");
  CHECK(async_2d(3000, 700, true), "cudaMemcpy2DAsync HtoD, DtoD, DtoH, 3000 x 700, pinned");
  CHECK(ordered_2d(false), "2D async work on two streams ordered by an event, pageable");
  CHECK(ordered_2d(true), "2D async work on two streams ordered by an event, pinned");
  CHECK(host_to_host_2d(), "cudaMemcpy2DAsync host to host and default, cudaMemset2DAsync on stream 0");
  CHECK(volumes(false, false, false), "3D: malloc, memset, copies with positions, small, pageable");
  CHECK(volumes(true, false, false), "3D: malloc, memset, copies with positions, large, pageable");
  CHECK(volumes(false, false, true), "3D: malloc, memset, copies with positions, small, pinned");
  CHECK(volumes(false, true, false), "3D async on a stream: small, pageable");
  CHECK(volumes(true, true, true), "3D async on a stream: large, pinned");
  CHECK(volumes(true, true, false), "3D async on a stream: large, pageable");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize at the end");
  std::printf("%s\n", failures ? "MEMORY_2D_3D FAILED" : "MEMORY_2D_3D PASSED");
  return failures ? 1 : 0;
}
