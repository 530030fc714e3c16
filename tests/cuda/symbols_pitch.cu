// vmcuda CUDA test program: module variables (__device__, __constant__) through the
// symbol calls and through their addresses, pitched memory and 2D copies and memsets,
// pointer attributes, function attributes, occupancy and the maximum dynamic shared
// memory of a kernel, as an ordinary application uses them (nvcc -cudart shared).
// Prints NVIDIA's answers at the edges ("probe" lines, printed, not judged) and one line
// per check, and exits non-zero on any failure. Everything printed is deterministic: the
// output is the same natively on a GPU, through vmcuda on the GPU, and through vmcuda on
// the test executor (whose CPU versions of these kernels and table of these variables are
// in tests/executor/fake_kernels.cc).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__device__ int d_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
__constant__ int c_coef[4];
__device__ int d_counter;
__device__ unsigned long long d_big[4096];  // 32 KiB: read back through the heap, not inline

// out[i] = in[i] * c_coef[i % 4] + d_table[i % 8], counting the threads that ran.
__global__ void apply_coef(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = in[i] * c_coef[i & 3] + d_table[i & 7];
    atomicAdd(&d_counter, 1);
  }
}

// p[i] = i * 3 + 1 (given d_big's address from cudaGetSymbolAddress).
__global__ void big_fill(unsigned long long* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 3ull * i + 1;
}

// Adds v to each of width x height ints of a pitched allocation.
__global__ void pitch_add(int* p, size_t pitch, int width, int height, int v) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < width && y < height) reinterpret_cast<int*>(reinterpret_cast<char*>(p) + y * pitch)[x] += v;
}

// 1 KiB of static shared memory: out[t] = 255 - t for a block of 256.
__global__ void static_shared(int* out) {
  __shared__ int buf[256];
  int t = threadIdx.x;
  buf[t] = t;
  __syncthreads();
  out[t] = buf[255 - t];
}

// n ints through dynamic shared memory (one block): out[i] = in[n - 1 - i] + 1.
__global__ void dyn_shared(const int* in, int* out, int n) {
  extern __shared__ int s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i] + 1;
}

static int failures = 0;
#define CHECK(cond, what)                                 \
  do {                                                    \
    bool ok_ = (cond);                                    \
    std::printf("%s: %s\n", ok_ ? "ok" : "FAILED", what); \
    if (!ok_) ++failures;                                 \
  } while (0)
static void probe(const char* what, long value) { std::printf("probe %s = %ld\n", what, value); }
// A call's result, then the last error twice (set once, then reset).
static void probe_call(const char* what, cudaError_t r) {
  int get1 = cudaGetLastError(), get2 = cudaGetLastError();
  std::printf("probe %s = %d (get=%d get=%d)\n", what, static_cast<int>(r), get1, get2);
}

static int host_int = 42;  // not a symbol

static void symbols() {
  size_t size = 0;
  CHECK(cudaGetSymbolSize(&size, d_table) == cudaSuccess && size == sizeof(int) * 8, "cudaGetSymbolSize d_table = 32");
  CHECK(cudaGetSymbolSize(&size, c_coef) == cudaSuccess && size == sizeof(int) * 4, "cudaGetSymbolSize c_coef = 16");
  CHECK(cudaGetSymbolSize(&size, d_counter) == cudaSuccess && size == sizeof(int), "cudaGetSymbolSize d_counter = 4");
  CHECK(cudaGetSymbolSize(&size, d_big) == cudaSuccess && size == sizeof(d_big), "cudaGetSymbolSize d_big = 32768");
  void *a1 = nullptr, *a2 = nullptr, *big = nullptr;
  CHECK(cudaGetSymbolAddress(&a1, d_table) == cudaSuccess && a1 != nullptr, "cudaGetSymbolAddress d_table");
  CHECK(cudaGetSymbolAddress(&a2, d_table) == cudaSuccess && a2 == a1, "same address the second time");
  CHECK(cudaGetSymbolAddress(&big, d_big) == cudaSuccess && big != nullptr && big != a1, "cudaGetSymbolAddress d_big");

  // The initial value of d_table, through the symbol and through its address.
  int t[8] = {0}, t2[8] = {0};
  CHECK(cudaMemcpyFromSymbol(t, d_table, sizeof t) == cudaSuccess, "cudaMemcpyFromSymbol d_table");
  std::printf("d_table initially:");
  for (int v : t) std::printf(" %d", v);
  std::printf("\n");
  CHECK(cudaMemcpy(t2, a1, sizeof t2, cudaMemcpyDeviceToHost) == cudaSuccess && std::memcmp(t, t2, sizeof t) == 0,
        "cudaMemcpy from the symbol's address reads the same");

  // Write the constants and the counter, run a kernel that reads them, read the counter.
  const int coef[4] = {2, 3, 4, 5};
  const int zero = 0;
  CHECK(cudaMemcpyToSymbol(c_coef, coef, sizeof coef) == cudaSuccess, "cudaMemcpyToSymbol c_coef");
  CHECK(cudaMemcpyToSymbol(d_counter, &zero, sizeof zero, 0, cudaMemcpyDefault) == cudaSuccess,
        "cudaMemcpyToSymbol d_counter (cudaMemcpyDefault)");
  // Offsets: elements 2 and 3 of d_table become 30 and 40.
  const int mid[2] = {30, 40};
  CHECK(cudaMemcpyToSymbol(d_table, mid, sizeof mid, 2 * sizeof(int)) == cudaSuccess, "cudaMemcpyToSymbol at an offset");
  int tail[2] = {0, 0};
  CHECK(cudaMemcpyFromSymbol(tail, d_table, sizeof tail, 6 * sizeof(int)) == cudaSuccess && tail[0] == 7 &&
            tail[1] == 8,
        "cudaMemcpyFromSymbol at an offset");
  const int n = 1000;
  std::vector<int> in(n), out(n, -1);
  for (int i = 0; i < n; ++i) in[i] = i - 300;
  int *din = nullptr, *dout = nullptr;
  cudaMalloc(&din, n * sizeof(int));
  cudaMalloc(&dout, n * sizeof(int));
  cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  apply_coef<<<(n + 127) / 128, 128>>>(din, dout, n);
  CHECK(cudaGetLastError() == cudaSuccess, "launch apply_coef");
  int counter = -1;
  CHECK(cudaMemcpyFromSymbol(&counter, d_counter, sizeof counter) == cudaSuccess && counter == n,
        "d_counter = 1000 after the kernel");
  cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost);
  const int table[8] = {1, 2, 30, 40, 5, 6, 7, 8};
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += out[i] != in[i] * coef[i & 3] + table[i & 7];
  CHECK(bad == 0, "the kernel saw c_coef and d_table as written");

  // Device to device through symbols, a kernel writing through a symbol's address, and a
  // 32 KiB read back.
  CHECK(cudaMemcpyFromSymbol(dout, d_table, sizeof t, 0, cudaMemcpyDeviceToDevice) == cudaSuccess,
        "cudaMemcpyFromSymbol device to device");
  CHECK(cudaMemcpyToSymbol(c_coef, dout + 4, 4 * sizeof(int), 0, cudaMemcpyDeviceToDevice) == cudaSuccess,
        "cudaMemcpyToSymbol device to device");
  int c[4] = {0};
  CHECK(cudaMemcpyFromSymbol(c, c_coef, sizeof c) == cudaSuccess && c[0] == 5 && c[3] == 8,
        "c_coef holds d_table[4..7]");
  const int big_n = 4096;
  big_fill<<<big_n / 256, 256>>>(static_cast<unsigned long long*>(big), big_n);
  std::vector<unsigned long long> b(big_n);
  CHECK(cudaMemcpyFromSymbol(b.data(), d_big, sizeof(d_big)) == cudaSuccess, "cudaMemcpyFromSymbol 32 KiB");
  bad = 0;
  for (int i = 0; i < big_n; ++i) bad += b[i] != 3ull * i + 1;
  CHECK(bad == 0, "a kernel wrote d_big through its symbol address");
  CHECK(cudaMemset(big, 0, sizeof(d_big)) == cudaSuccess, "cudaMemset on a symbol's address");
  CHECK(cudaMemcpyFromSymbol(b.data(), d_big, sizeof(d_big)) == cudaSuccess && b[0] == 0 && b[big_n - 1] == 0,
        "d_big cleared");

  // Asynchronous copies on a stream, into pinned memory.
  cudaStream_t s;
  cudaStreamCreate(&s);
  int* pinned = nullptr;
  cudaMallocHost(&pinned, sizeof t);
  const int vals[8] = {11, 12, 13, 14, 15, 16, 17, 18};
  CHECK(cudaMemcpyToSymbolAsync(d_table, vals, sizeof vals, 0, cudaMemcpyHostToDevice, s) == cudaSuccess,
        "cudaMemcpyToSymbolAsync");
  CHECK(cudaMemcpyFromSymbolAsync(pinned, d_table, sizeof vals, 0, cudaMemcpyDeviceToHost, s) == cudaSuccess,
        "cudaMemcpyFromSymbolAsync into pinned memory");
  CHECK(cudaStreamSynchronize(s) == cudaSuccess && std::memcmp(pinned, vals, sizeof vals) == 0,
        "the asynchronous copies arrived");
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);

  // Pointer attributes of a symbol's address.
  cudaPointerAttributes pa;
  std::memset(&pa, 0x5a, sizeof pa);
  CHECK(cudaPointerGetAttributes(&pa, a1) == cudaSuccess && pa.type == cudaMemoryTypeDevice && pa.device == 0 &&
            pa.devicePointer == a1 && pa.hostPointer == nullptr,
        "cudaPointerGetAttributes of a symbol's address: device memory");

  // Errors, printed as NVIDIA's library answers them.
  int h[16] = {0};
  void* p = nullptr;
  probe_call("MemcpyToSymbol(count past the end)", cudaMemcpyToSymbol(d_table, h, 40));
  probe_call("MemcpyToSymbol(offset at the end)", cudaMemcpyToSymbol(d_table, h, 4, 32));
  probe_call("MemcpyFromSymbol(count past the end)", cudaMemcpyFromSymbol(h, c_coef, 20));
  probe_call("MemcpyToSymbol(not a symbol)", cudaMemcpyToSymbol(host_int, h, 4));
  probe_call("MemcpyFromSymbol(not a symbol)", cudaMemcpyFromSymbol(h, host_int, 4));
  probe_call("MemcpyToSymbol(DeviceToHost)", cudaMemcpyToSymbol(d_table, h, 4, 0, cudaMemcpyDeviceToHost));
  probe_call("MemcpyFromSymbol(HostToDevice)", cudaMemcpyFromSymbol(h, d_table, 4, 0, cudaMemcpyHostToDevice));
  probe_call("GetSymbolAddress(not a symbol)", cudaGetSymbolAddress(&p, host_int));
  probe_call("GetSymbolSize(not a symbol)", cudaGetSymbolSize(&size, host_int));
  cudaFree(din);
  cudaFree(dout);
}

// Fills a host image of width x height ints at `pitch` bytes a row; padding bytes get `pad`.
static void fill(char* h, size_t pitch, int width, int height, int seed, unsigned char pad) {
  std::memset(h, pad, pitch * height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) reinterpret_cast<int*>(h + y * pitch)[x] = seed + y * 1000 + x;
}
// Whether the image holds seed + y * 1000 + x (+ add), and the padding bytes are still `pad`.
static bool holds(const char* h, size_t pitch, int width, int height, int seed, int add, unsigned char pad) {
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x)
      if (reinterpret_cast<const int*>(h + y * pitch)[x] != seed + y * 1000 + x + add) return false;
    for (size_t b = width * sizeof(int); b < pitch; ++b)
      if (static_cast<unsigned char>(h[y * pitch + b]) != pad) return false;
  }
  return true;
}

static void pitched(bool pinned_host, int width, int height, const char* what) {
  const size_t wbytes = width * sizeof(int), spitch = wbytes + 24, dpitch = wbytes + 40;
  char *src, *dst;
  if (pinned_host) {
    cudaMallocHost(&src, spitch * height);
    cudaMallocHost(&dst, dpitch * height);
  } else {
    src = static_cast<char*>(std::malloc(spitch * height));
    dst = static_cast<char*>(std::malloc(dpitch * height));
  }
  fill(src, spitch, width, height, 5, 0xa5);
  std::memset(dst, 0x5a, dpitch * height);
  int *p = nullptr, *q = nullptr;
  size_t pp = 0, qp = 0;
  bool ok = cudaMallocPitch(reinterpret_cast<void**>(&p), &pp, wbytes, height) == cudaSuccess && p && pp >= wbytes;
  ok = ok && cudaMallocPitch(reinterpret_cast<void**>(&q), &qp, wbytes + 4, height) == cudaSuccess && q &&
       qp >= wbytes + 4;
  ok = ok && cudaMemcpy2D(p, pp, src, spitch, wbytes, height, cudaMemcpyHostToDevice) == cudaSuccess;
  dim3 block(32, 8), grid((width + 31) / 32, (height + 7) / 8);
  pitch_add<<<grid, block>>>(p, pp, width, height, 7);
  ok = ok && cudaGetLastError() == cudaSuccess;
  ok = ok && cudaMemcpy2D(q, qp, p, pp, wbytes, height, cudaMemcpyDeviceToDevice) == cudaSuccess;
  ok = ok && cudaMemcpy2D(dst, dpitch, q, qp, wbytes, height, cudaMemcpyDeviceToHost) == cudaSuccess;
  ok = ok && holds(dst, dpitch, width, height, 5, 7, 0x5a);
  // A rectangle inside q set to 0xff bytes (-1), read back with cudaMemcpyDefault.
  const int rx = width / 4, ry = height / 3, rw = width / 2, rh = height / 3;
  ok = ok && cudaMemset2D(reinterpret_cast<char*>(q) + ry * qp + rx * sizeof(int), qp, 0xff, rw * sizeof(int), rh) ==
                 cudaSuccess;
  ok = ok && cudaMemcpy2D(dst, dpitch, q, qp, wbytes, height, cudaMemcpyDefault) == cudaSuccess;
  int bad = 0;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const bool inside = x >= rx && x < rx + rw && y >= ry && y < ry + rh;
      bad += reinterpret_cast<int*>(dst + y * dpitch)[x] != (inside ? -1 : 5 + y * 1000 + x + 7);
    }
  ok = ok && bad == 0;
  ok = ok && cudaFree(p) == cudaSuccess && cudaFree(q) == cudaSuccess;
  if (pinned_host) {
    cudaFreeHost(src);
    cudaFreeHost(dst);
  } else {
    std::free(src);
    std::free(dst);
  }
  CHECK(ok, what);
}

static void pitch_and_2d() {
  pitched(false, 100, 64, "2D copies and memset, 100 x 64 ints, pageable (inline)");
  pitched(true, 100, 64, "2D copies and memset, 100 x 64 ints, pinned");
  pitched(false, 1000, 3000, "2D copies and memset, 1000 x 3000 ints, pageable (staged)");
  pitched(true, 1000, 3000, "2D copies and memset, 1000 x 3000 ints, pinned");
  // Host to host.
  char a[3 * 32], b[3 * 40];
  for (int i = 0; i < (int)sizeof a; ++i) a[i] = static_cast<char>(i);
  std::memset(b, 0, sizeof b);
  CHECK(cudaMemcpy2D(b, 40, a, 32, 24, 3, cudaMemcpyHostToHost) == cudaSuccess && b[0] == 0 && b[23] == 23 &&
            b[24] == 0 && b[40] == 32 && b[80 + 23] == 64 + 23 && b[80 + 24] == 0,
        "cudaMemcpy2D host to host");
  // Pointer attributes of pitched memory.
  void* p = nullptr;
  size_t pitch = 0;
  cudaMallocPitch(&p, &pitch, 100, 10);
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, static_cast<char*>(p) + pitch) == cudaSuccess &&
            pa.type == cudaMemoryTypeDevice && pa.devicePointer == static_cast<char*>(p) + pitch,
        "cudaPointerGetAttributes inside a pitched allocation");
  // Errors, printed as NVIDIA's library answers them.
  char h[256];
  probe_call("Memcpy2D(width > dpitch)", cudaMemcpy2D(p, 64, h, 128, 100, 2, cudaMemcpyHostToDevice));
  probe_call("Memcpy2D(width > spitch)", cudaMemcpy2D(h, 128, p, 64, 100, 2, cudaMemcpyDeviceToHost));
  probe_call("Memcpy2D(kind 7)", cudaMemcpy2D(h, 128, p, pitch, 100, 2, static_cast<cudaMemcpyKind>(7)));
  probe_call("Memcpy2D(past the allocation)", cudaMemcpy2D(p, pitch, h, 100, 100, 11, cudaMemcpyHostToDevice));
  probe_call("Memcpy2D(height 0)", cudaMemcpy2D(p, pitch, h, 100, 100, 0, cudaMemcpyHostToDevice));
  probe_call("MallocPitch(NULL pitch)", cudaMallocPitch(&p, nullptr, 100, 10));
  cudaFree(p);
}

static void pointer_attributes() {
  void* d = nullptr;
  cudaMalloc(&d, 4096);
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, static_cast<char*>(d) + 100) == cudaSuccess &&
            pa.type == cudaMemoryTypeDevice && pa.device == 0 && pa.devicePointer == static_cast<char*>(d) + 100 &&
            pa.hostPointer == nullptr,
        "cudaPointerGetAttributes of device memory");
  void* h = nullptr;
  cudaMallocHost(&h, 4096);
  CHECK(cudaPointerGetAttributes(&pa, h) == cudaSuccess && pa.type == cudaMemoryTypeHost && pa.device == 0 &&
            pa.hostPointer == h,
        "cudaPointerGetAttributes of pinned host memory");
  int local = 0;
  std::memset(&pa, 0x5a, sizeof pa);
  cudaError_t r = cudaPointerGetAttributes(&pa, &local);
  probe("PointerGetAttributes(unregistered)", r);
  probe("  type", pa.type);
  probe("  device", pa.device);
  probe("  devicePointer is NULL", pa.devicePointer == nullptr);
  probe("  hostPointer is the pointer", pa.hostPointer == &local);
  probe_call("PointerGetAttributes(NULL attributes)", cudaPointerGetAttributes(nullptr, d));
  cudaFreeHost(h);
  cudaFree(d);
}

static void function_attributes() {
  cudaFuncAttributes fa;
  std::memset(&fa, 0x5a, sizeof fa);
  CHECK(cudaFuncGetAttributes(&fa, static_shared) == cudaSuccess, "cudaFuncGetAttributes static_shared");
  probe("static_shared sharedSizeBytes", fa.sharedSizeBytes);
  probe("static_shared localSizeBytes", fa.localSizeBytes);
  probe("static_shared maxThreadsPerBlock", fa.maxThreadsPerBlock);
  probe("static_shared numRegs > 0", fa.numRegs > 0);
  probe("static_shared ptxVersion", fa.ptxVersion);
  probe("static_shared binaryVersion", fa.binaryVersion);
  probe("static_shared cacheModeCA", fa.cacheModeCA);
  probe("static_shared maxDynamicSharedSizeBytes", fa.maxDynamicSharedSizeBytes);
  probe("static_shared requiredClusterWidth", fa.requiredClusterWidth);
  int* out = nullptr;
  cudaMalloc(&out, 256 * sizeof(int));
  static_shared<<<1, 256>>>(out);
  int o[256];
  cudaMemcpy(o, out, sizeof o, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int t = 0; t < 256; ++t) bad += o[t] != 255 - t;
  CHECK(bad == 0, "static_shared ran");

  // More dynamic shared memory than the default 48 KiB: allowed once the attribute says so.
  const int n = 16384;  // 64 KiB of ints
  CHECK(cudaFuncGetAttributes(&fa, dyn_shared) == cudaSuccess && fa.maxDynamicSharedSizeBytes == 48 * 1024,
        "dyn_shared may use 48 KiB of dynamic shared memory by default");
  CHECK(cudaFuncSetAttribute(dyn_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, n * sizeof(int)) == cudaSuccess,
        "cudaFuncSetAttribute MaxDynamicSharedMemorySize 64 KiB");
  CHECK(cudaFuncGetAttributes(&fa, dyn_shared) == cudaSuccess && fa.maxDynamicSharedSizeBytes == n * 4,
        "dyn_shared may now use 64 KiB");
  std::vector<int> in(n), res(n);
  for (int i = 0; i < n; ++i) in[i] = i * 7;
  int *din = nullptr, *dres = nullptr;
  cudaMalloc(&din, n * sizeof(int));
  cudaMalloc(&dres, n * sizeof(int));
  cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  dyn_shared<<<1, 256, n * sizeof(int)>>>(din, dres, n);
  CHECK(cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "dyn_shared with 64 KiB ran");
  cudaMemcpy(res.data(), dres, n * sizeof(int), cudaMemcpyDeviceToHost);
  bad = 0;
  for (int i = 0; i < n; ++i) bad += res[i] != in[n - 1 - i] + 1;
  CHECK(bad == 0, "dyn_shared results");

  // Occupancy.
  int blocks = -1;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, apply_coef, 256, 0) == cudaSuccess,
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  probe("occupancy apply_coef 256 threads", blocks);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, apply_coef, 1024, 0);
  probe("occupancy apply_coef 1024 threads", blocks);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, dyn_shared, 256, n * sizeof(int));
  probe("occupancy dyn_shared 256 threads, 64 KiB", blocks);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, static_shared, 256, 0);
  probe("occupancy static_shared 256 threads", blocks);
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, apply_coef, 128, 0, cudaOccupancyDefault) ==
            cudaSuccess,
        "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  probe("occupancy apply_coef 128 threads", blocks);

  // Errors, printed as NVIDIA's library answers them.
  probe_call("FuncGetAttributes(not a kernel)", cudaFuncGetAttributes(&fa, &host_int));
  probe_call("FuncGetAttributes(NULL)", cudaFuncGetAttributes(nullptr, dyn_shared));
  probe_call("FuncSetAttribute(1 MiB)", cudaFuncSetAttribute(dyn_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 20));
  probe_call("FuncSetAttribute(-1)", cudaFuncSetAttribute(dyn_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, -1));
  probe_call("FuncSetAttribute(not a kernel)",
             cudaFuncSetAttribute(&host_int, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024));
  probe_call("Occupancy(not a kernel)", cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &host_int, 256, 0));
  probe_call("Occupancy(NULL)", cudaOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, apply_coef, 256, 0));
  CHECK(cudaFuncGetAttributes(&fa, dyn_shared) == cudaSuccess && fa.maxDynamicSharedSizeBytes == n * 4,
        "refused settings left the attribute alone");
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize at the end");
  cudaFree(out);
  cudaFree(din);
  cudaFree(dres);
}

int main() {
  symbols();
  pitch_and_2d();
  pointer_attributes();
  function_attributes();
  std::printf("%s\n", failures ? "SYMBOLS_PITCH FAILED" : "SYMBOLS_PITCH PASSED");
  return failures ? 1 : 0;
}
