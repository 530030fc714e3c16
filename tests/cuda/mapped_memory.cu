// vmcuda CUDA test program: mapped pinned memory, managed memory and registered host
// memory as an ordinary application uses them (nvcc -cudart shared): kernels that write
// through a cudaHostAlloc pointer and a cudaMallocManaged pointer, read on the host after
// a synchronize, cudaHostGetDevicePointer, cudaHostGetFlags, pointer attributes,
// cudaHostRegister with copies, and the error cases with the error names CUDA gives them.
// Every line is deterministic (no pointers are printed, only "same"/"differs"); the output
// is the same natively on a GPU, through vmcuda on the GPU, and through vmcuda on the test
// executor (whose CPU versions of these kernels are in tests/executor/fake_kernels.cc).
#include <cstdio>
#include <cstdlib>
#include <cstring>

// p[i] = base + 3 * i
__global__ void mm_fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + 3 * i;
}

// y[i] += a * x[i]
__global__ void mm_axpy(const int* x, int* y, int n, int a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

static int failures = 0;
static void check(bool ok, const char* what) {
  std::printf("%s: %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}
// A call's result by name, and the thread's last error it left (then cleared).
static void expect(const char* what, cudaError_t got, cudaError_t want) {
  cudaError_t last = cudaGetLastError();
  std::printf("%s: %s (last error %s): %s\n", what, cudaGetErrorName(got), cudaGetErrorName(last),
              got == want ? "ok" : "MISMATCH");
  if (got != want) ++failures;
}
static const char* same(const void* a, const void* b) { return a == b ? "same" : "differs"; }
static bool filled(const int* p, int n, int base) {
  for (int i = 0; i < n; ++i)
    if (p[i] != base + 3 * i) return false;
  return true;
}

static void mapped_pinned() {
  std::printf("-- mapped pinned memory\n");
  const int n = 4096;
  int* h = nullptr;
  expect("cudaHostAlloc(Mapped)", cudaHostAlloc(&h, n * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  // Unified addressing: the host pointer is the device pointer.
  mm_fill<<<(n + 255) / 256, 256>>>(h, n, 7);
  expect("kernel through the host pointer", cudaDeviceSynchronize(), cudaSuccess);
  check(filled(h, n, 7), "host reads what the kernel wrote");
  void* d = nullptr;
  expect("cudaHostGetDevicePointer", cudaHostGetDevicePointer(&d, h, 0), cudaSuccess);
  std::printf("device pointer vs host pointer: %s\n", same(d, h));
  void* di = nullptr;
  expect("cudaHostGetDevicePointer(interior)", cudaHostGetDevicePointer(&di, h + 100, 0), cudaSuccess);
  check(static_cast<char*>(di) == static_cast<char*>(d) + 100 * sizeof(int), "interior device pointer = base + 400");
  mm_fill<<<(n + 255) / 256, 256>>>(static_cast<int*>(d), n, 1000);
  expect("kernel through the device pointer", cudaDeviceSynchronize(), cudaSuccess);
  check(filled(h, n, 1000), "host reads what the kernel wrote through the device pointer");
  // The host writes, the kernel reads (axpy into device memory), the result comes back.
  int* dy = nullptr;
  expect("cudaMalloc", cudaMalloc(&dy, n * sizeof(int)), cudaSuccess);
  expect("cudaMemset", cudaMemset(dy, 0, n * sizeof(int)), cudaSuccess);
  for (int i = 0; i < n; ++i) h[i] = i;
  mm_axpy<<<(n + 255) / 256, 256>>>(static_cast<int*>(d), dy, n, 2);
  expect("cudaMemcpy DtoH into mapped memory", cudaMemcpy(h, dy, n * sizeof(int), cudaMemcpyDeviceToHost),
         cudaSuccess);
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == 2 * i;
  check(ok, "kernel read host-written mapped memory");

  unsigned flags = 99;
  expect("cudaHostGetFlags(Mapped)", cudaHostGetFlags(&flags, h), cudaSuccess);
  std::printf("flags of cudaHostAlloc(Mapped) = %u\n", flags);
  int *wc = nullptr, *mh = nullptr, *port = nullptr;
  expect("cudaHostAlloc(WriteCombined|Mapped)",
         cudaHostAlloc(&wc, 4096, cudaHostAllocWriteCombined | cudaHostAllocMapped), cudaSuccess);
  expect("cudaHostGetFlags(WriteCombined|Mapped)", cudaHostGetFlags(&flags, wc), cudaSuccess);
  std::printf("flags of cudaHostAlloc(WriteCombined|Mapped) = %u\n", flags);
  expect("cudaHostAlloc(Portable)", cudaHostAlloc(&port, 4096, cudaHostAllocPortable), cudaSuccess);
  expect("cudaHostGetFlags(Portable)", cudaHostGetFlags(&flags, port), cudaSuccess);
  std::printf("flags of cudaHostAlloc(Portable) = %u\n", flags);
  expect("cudaMallocHost", cudaMallocHost(&mh, 4096), cudaSuccess);
  expect("cudaHostGetFlags(cudaMallocHost, interior)", cudaHostGetFlags(&flags, mh + 10), cudaSuccess);
  std::printf("flags of cudaMallocHost = %u\n", flags);
  void* dm = nullptr;
  expect("cudaHostGetDevicePointer(cudaMallocHost)", cudaHostGetDevicePointer(&dm, mh, 0), cudaSuccess);
  std::printf("cudaMallocHost device pointer vs host pointer: %s\n", same(dm, mh));

  cudaPointerAttributes a;
  std::memset(&a, 0, sizeof a);
  expect("cudaPointerGetAttributes(mapped)", cudaPointerGetAttributes(&a, h + 5), cudaSuccess);
  std::printf("mapped: type %d device %d devicePointer %s hostPointer %s\n", static_cast<int>(a.type), a.device,
              same(a.devicePointer, h + 5), same(a.hostPointer, h + 5));

  expect("cudaFree", cudaFree(dy), cudaSuccess);
  expect("cudaFreeHost(mapped)", cudaFreeHost(h), cudaSuccess);
  expect("cudaFreeHost(wc)", cudaFreeHost(wc), cudaSuccess);
  expect("cudaFreeHost(portable)", cudaFreeHost(port), cudaSuccess);
  expect("cudaFreeHost(cudaMallocHost)", cudaFreeHost(mh), cudaSuccess);
}

static void managed() {
  std::printf("-- managed memory\n");
  const int n = 2048;
  int *x = nullptr, *y = nullptr;
  expect("cudaMallocManaged x", cudaMallocManaged(&x, n * sizeof(int)), cudaSuccess);
  expect("cudaMallocManaged y (AttachHost)", cudaMallocManaged(&y, n * sizeof(int), cudaMemAttachHost), cudaSuccess);
  for (int i = 0; i < n; ++i) {
    x[i] = i;
    y[i] = 1;
  }
  cudaMemLocation dev{};
  dev.type = cudaMemLocationTypeDevice;
  dev.id = 0;
  expect("cudaMemAdvise(SetReadMostly)", cudaMemAdvise(x, n * sizeof(int), cudaMemAdviseSetReadMostly, dev),
         cudaSuccess);
  expect("cudaMemAdvise(SetPreferredLocation)",
         cudaMemAdvise(y, n * sizeof(int), cudaMemAdviseSetPreferredLocation, dev), cudaSuccess);
  expect("cudaMemPrefetchAsync(device)", cudaMemPrefetchAsync(x, n * sizeof(int), dev, 0, 0), cudaSuccess);
  mm_axpy<<<(n + 255) / 256, 256>>>(x, y, n, 3);
  expect("cudaDeviceSynchronize after axpy", cudaDeviceSynchronize(), cudaSuccess);
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && y[i] == 1 + 3 * i;
  check(ok, "host reads the kernel's writes to managed memory");
  cudaMemLocation host{};
  host.type = cudaMemLocationTypeHost;
  expect("cudaMemPrefetchAsync(host)", cudaMemPrefetchAsync(y, n * sizeof(int), host, 0, 0), cudaSuccess);

  // Copies and memsets with managed memory on either side.
  int* d = nullptr;
  expect("cudaMalloc", cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
  expect("cudaMemcpy managed -> device", cudaMemcpy(d, y, n * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  expect("cudaMemset(managed)", cudaMemset(y, 0, n * sizeof(int)), cudaSuccess);
  check(y[0] == 0 && y[n - 1] == 0, "cudaMemset cleared managed memory");
  expect("cudaMemcpy device -> managed (Default)", cudaMemcpy(y, d, n * sizeof(int), cudaMemcpyDefault),
         cudaSuccess);
  check(y[5] == 16 && y[n - 1] == 1 + 3 * (n - 1), "managed memory holds the copy back");
  mm_fill<<<(n + 255) / 256, 256>>>(y, n, 5);
  expect("cudaMemcpy managed -> host", cudaMemcpy(x, y, n * sizeof(int), cudaMemcpyDefault), cudaSuccess);
  check(filled(x, n, 5), "copy after a kernel sees the kernel's writes");

  cudaPointerAttributes a;
  std::memset(&a, 0, sizeof a);
  expect("cudaPointerGetAttributes(managed)", cudaPointerGetAttributes(&a, y + 3), cudaSuccess);
  std::printf("managed: type %d device %d devicePointer %s hostPointer %s\n", static_cast<int>(a.type), a.device,
              same(a.devicePointer, y + 3), same(a.hostPointer, y + 3));
  unsigned flags = 99;
  expect("cudaHostGetFlags(managed)", cudaHostGetFlags(&flags, y), cudaSuccess);
  std::printf("flags of managed memory = %u\n", flags);

  void* p = reinterpret_cast<void*>(1);
  expect("cudaMallocManaged(0 bytes)", cudaMallocManaged(&p, 0), cudaSuccess);
  std::printf("0 bytes gives NULL: %s\n", p == nullptr ? "yes" : "no");
  expect("cudaMallocManaged(flags 0)", cudaMallocManaged(&p, 64, 0), cudaErrorInvalidValue);
  expect("cudaMallocManaged(AttachSingle)", cudaMallocManaged(&p, 64, cudaMemAttachSingle), cudaErrorInvalidValue);
  expect("cudaMallocManaged(NULL)", cudaMallocManaged(static_cast<void**>(nullptr), 64), cudaErrorInvalidValue);
  expect("cudaMemPrefetchAsync(flags 1)", cudaMemPrefetchAsync(x, 64, host, 1, 0), cudaErrorInvalidValue);
  expect("cudaMemPrefetchAsync(device memory)", cudaMemPrefetchAsync(d, 64, host, 0, 0), cudaErrorInvalidValue);
  cudaMemLocation bad = dev;
  bad.id = 77;
  expect("cudaMemPrefetchAsync(device 77)", cudaMemPrefetchAsync(x, 64, bad, 0, 0), cudaErrorInvalidDevice);
  expect("cudaMemAdvise(99)", cudaMemAdvise(x, 64, static_cast<cudaMemoryAdvise>(99), dev), cudaErrorInvalidValue);
  expect("cudaMemAdvise(device memory)", cudaMemAdvise(d, 64, cudaMemAdviseSetAccessedBy, dev),
         cudaErrorInvalidValue);
  expect("cudaFreeHost(managed)", cudaFreeHost(x), cudaErrorInvalidValue);
  expect("cudaFree(managed x)", cudaFree(x), cudaSuccess);
  expect("cudaFree(managed x) again", cudaFree(x), cudaErrorInvalidValue);
  expect("cudaFree(managed y)", cudaFree(y), cudaSuccess);
  expect("cudaFree(device)", cudaFree(d), cudaSuccess);
}

static void registered() {
  std::printf("-- registered host memory\n");
  const int n = 8192;
  int* buf = static_cast<int*>(std::malloc(3 * n * sizeof(int)));
  int* src = buf;
  int* back = buf + 2 * n;
  expect("cudaHostRegister", cudaHostRegister(src, n * sizeof(int), cudaHostRegisterDefault), cudaSuccess);
  expect("cudaHostRegister(Portable) of the rest",
         cudaHostRegister(back, n * sizeof(int), cudaHostRegisterPortable), cudaSuccess);
  unsigned flags = 99;
  expect("cudaHostGetFlags(registered)", cudaHostGetFlags(&flags, src + 1), cudaSuccess);
  std::printf("flags of registered memory = %u\n", flags);
  expect("cudaHostGetFlags(registered Portable)", cudaHostGetFlags(&flags, back), cudaSuccess);
  std::printf("flags of registered Portable memory = %u\n", flags);
  cudaPointerAttributes a;
  std::memset(&a, 0, sizeof a);
  expect("cudaPointerGetAttributes(registered)", cudaPointerGetAttributes(&a, src + 2), cudaSuccess);
  std::printf("registered: type %d device %d hostPointer %s\n", static_cast<int>(a.type), a.device,
              same(a.hostPointer, src + 2));
  std::memset(&a, 0, sizeof a);
  expect("cudaPointerGetAttributes(between)", cudaPointerGetAttributes(&a, buf + n + 3), cudaSuccess);
  std::printf("between: type %d device %d\n", static_cast<int>(a.type), a.device);

  for (int i = 0; i < n; ++i) src[i] = 5 * i + 1;
  int* d = nullptr;
  expect("cudaMalloc", cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
  expect("cudaMemcpy registered -> device", cudaMemcpy(d, src, n * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  mm_axpy<<<(n + 255) / 256, 256>>>(d, d, n, 1);  // doubles d
  std::memset(back, 0, n * sizeof(int));
  expect("cudaMemcpyAsync device -> registered", cudaMemcpyAsync(back, d, n * sizeof(int), cudaMemcpyDeviceToHost, 0),
         cudaSuccess);
  expect("cudaStreamSynchronize", cudaStreamSynchronize(0), cudaSuccess);
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && back[i] == 2 * (5 * i + 1);
  check(ok, "registered memory round trip through a kernel");
  std::memset(back, 0, n * sizeof(int));
  expect("cudaMemcpy device -> registered (Default)", cudaMemcpy(back, d, n * sizeof(int), cudaMemcpyDefault),
         cudaSuccess);
  check(back[n - 1] == 2 * (5 * (n - 1) + 1), "cudaMemcpyDefault into registered memory");

  expect("cudaHostRegister again", cudaHostRegister(src, n * sizeof(int), 0), cudaErrorHostMemoryAlreadyRegistered);
  expect("cudaHostRegister overlapping", cudaHostRegister(src + n / 2, n * sizeof(int), 0),
         cudaErrorHostMemoryAlreadyRegistered);
  expect("cudaHostRegister(0 bytes)", cudaHostRegister(buf + n, 0, 0), cudaErrorInvalidValue);
  expect("cudaHostRegister(NULL)", cudaHostRegister(nullptr, 64, 0), cudaErrorInvalidValue);
  expect("cudaHostRegister(flags 0x40)", cudaHostRegister(buf + n, 64, 0x40), cudaErrorInvalidValue);
  int* mh = nullptr;
  expect("cudaMallocHost", cudaMallocHost(&mh, 4096), cudaSuccess);
  expect("cudaHostRegister(cudaMallocHost memory)", cudaHostRegister(mh, 4096, 0), cudaErrorInvalidValue);
  expect("cudaHostUnregister(interior)", cudaHostUnregister(src + 1), cudaErrorInvalidValue);
  expect("cudaHostUnregister", cudaHostUnregister(src), cudaSuccess);
  expect("cudaHostUnregister again", cudaHostUnregister(src), cudaErrorHostMemoryNotRegistered);
  expect("cudaHostUnregister(Portable)", cudaHostUnregister(back), cudaSuccess);
  expect("cudaHostGetFlags(unregistered)", cudaHostGetFlags(&flags, src), cudaErrorInvalidValue);
  std::memset(&a, 0, sizeof a);
  expect("cudaPointerGetAttributes(unregistered)", cudaPointerGetAttributes(&a, src), cudaSuccess);
  std::printf("unregistered: type %d device %d\n", static_cast<int>(a.type), a.device);
  expect("cudaFreeHost", cudaFreeHost(mh), cudaSuccess);
  expect("cudaFree", cudaFree(d), cudaSuccess);
  std::free(buf);
}

static void errors() {
  std::printf("-- errors\n");
  void* p = reinterpret_cast<void*>(1);
  expect("cudaHostAlloc(flags 0x10)", cudaHostAlloc(&p, 64, 0x10), cudaErrorInvalidValue);
  std::printf("bad flags give NULL: %s\n", p == nullptr ? "yes" : "no");
  p = reinterpret_cast<void*>(1);
  expect("cudaHostAlloc(0 bytes)", cudaHostAlloc(&p, 0, 0), cudaSuccess);
  std::printf("0 bytes gives NULL: %s\n", p == nullptr ? "yes" : "no");
  expect("cudaHostAlloc(NULL)", cudaHostAlloc(nullptr, 64, 0), cudaErrorInvalidValue);
  int* h = nullptr;
  expect("cudaHostAlloc", cudaHostAlloc(&h, 4096, cudaHostAllocMapped), cudaSuccess);
  void* d = reinterpret_cast<void*>(1);
  expect("cudaHostGetDevicePointer(flags 1)", cudaHostGetDevicePointer(&d, h, 1), cudaErrorInvalidValue);
  std::printf("failure gives NULL: %s\n", d == nullptr ? "yes" : "no");
  int pageable[16];
  expect("cudaHostGetDevicePointer(pageable)", cudaHostGetDevicePointer(&d, pageable, 0), cudaErrorInvalidValue);
  unsigned flags;
  expect("cudaHostGetFlags(pageable)", cudaHostGetFlags(&flags, pageable), cudaErrorInvalidValue);
  expect("cudaHostUnregister(never registered)", cudaHostUnregister(pageable), cudaErrorHostMemoryNotRegistered);
  expect("cudaFree(pinned)", cudaFree(h), cudaErrorInvalidValue);
  expect("cudaFreeHost(interior)", cudaFreeHost(h + 4), cudaErrorInvalidValue);
  expect("cudaFreeHost(pageable)", cudaFreeHost(pageable), cudaErrorInvalidValue);
  expect("cudaFreeHost", cudaFreeHost(h), cudaSuccess);
  expect("cudaDeviceSynchronize at the end", cudaDeviceSynchronize(), cudaSuccess);
}

int main() {
  mapped_pinned();
  managed();
  registered();
  errors();
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
