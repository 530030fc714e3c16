// vmcuda CUDA test program: what cudaMemRangeGetAttribute[s] answers about managed memory
// after cudaMemAdvise and cudaMemPrefetchAsync (read-mostly, preferred location, accessed-by,
// last prefetch location, and CUDA 13's location type/id attributes), over a whole allocation
// and its halves, and the errors CUDA documents. Every line is deterministic (device 0 only;
// accessed-by lists are printed sorted, as CUDA promises no order); the output is the same
// natively, through vmcuda on the GPU and through vmcuda on the test executor.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

static int failures = 0;
static void expect(const char* what, cudaError_t got, cudaError_t want) {
  cudaError_t last = cudaGetLastError();
  std::printf("%s: %s (last error %s): %s\n", what, cudaGetErrorName(got), cudaGetErrorName(last),
              got == want ? "ok" : "MISMATCH");
  if (got != want) ++failures;
}

static const size_t kHalf = size_t{2} << 20;  // whole 2 MiB pieces: every page size CUDA uses divides it

static void show_int(const char* what, cudaMemRangeAttribute a, const void* p, size_t n) {
  int v = 12345;
  cudaError_t e = cudaMemRangeGetAttribute(&v, sizeof v, a, p, n);
  if (e != cudaSuccess) {
    std::printf("%s: %s\n", what, cudaGetErrorName(e));
    ++failures;
    (void)cudaGetLastError();
    return;
  }
  std::printf("%s: %d\n", what, v);
}

static void show_accessed_by(const char* what, const void* p, size_t n) {
  int ids[4] = {7, 7, 7, 7};
  cudaError_t e = cudaMemRangeGetAttribute(ids, sizeof ids, cudaMemRangeAttributeAccessedBy, p, n);
  if (e != cudaSuccess) {
    std::printf("%s: %s\n", what, cudaGetErrorName(e));
    ++failures;
    (void)cudaGetLastError();
    return;
  }
  std::vector<int> v(ids, ids + 4);
  std::sort(v.begin(), v.end());
  std::printf("%s: {%d, %d, %d, %d}\n", what, v[0], v[1], v[2], v[3]);
}

// The eight attributes of [p, p+n), one line each.
static void show_all(const char* range, const void* p, size_t n) {
  char what[128];
  std::snprintf(what, sizeof what, "%s read mostly", range);
  show_int(what, cudaMemRangeAttributeReadMostly, p, n);
  std::snprintf(what, sizeof what, "%s preferred location", range);
  show_int(what, cudaMemRangeAttributePreferredLocation, p, n);
  std::snprintf(what, sizeof what, "%s preferred location type", range);
  show_int(what, cudaMemRangeAttributePreferredLocationType, p, n);
  std::snprintf(what, sizeof what, "%s accessed by", range);
  show_accessed_by(what, p, n);
  std::snprintf(what, sizeof what, "%s last prefetch location", range);
  show_int(what, cudaMemRangeAttributeLastPrefetchLocation, p, n);
  std::snprintf(what, sizeof what, "%s last prefetch location type", range);
  show_int(what, cudaMemRangeAttributeLastPrefetchLocationType, p, n);
}

int main() {
  int concurrent = 0;
  cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0);
  if (!concurrent) {
    std::printf("device 0 has no concurrent managed access: advice needs it\n");
    return 0;
  }
  char* x = nullptr;
  expect("cudaMallocManaged(4 MiB)", cudaMallocManaged(&x, 2 * kHalf), cudaSuccess);
  char* lo = x;
  char* hi = x + kHalf;
  const size_t all = 2 * kHalf;
  const cudaMemLocation dev{cudaMemLocationTypeDevice, 0};
  const cudaMemLocation host{cudaMemLocationTypeHost, 0};

  std::printf("-- fresh memory\n");
  show_all("whole", x, all);

  std::printf("-- read mostly\n");
  expect("SetReadMostly(whole)", cudaMemAdvise(x, all, cudaMemAdviseSetReadMostly, dev), cudaSuccess);
  show_int("whole read mostly", cudaMemRangeAttributeReadMostly, x, all);
  expect("UnsetReadMostly(low half)", cudaMemAdvise(lo, kHalf, cudaMemAdviseUnsetReadMostly, dev), cudaSuccess);
  show_int("whole read mostly", cudaMemRangeAttributeReadMostly, x, all);
  show_int("low read mostly", cudaMemRangeAttributeReadMostly, lo, kHalf);
  show_int("high read mostly", cudaMemRangeAttributeReadMostly, hi, kHalf);
  show_int("high first byte read mostly", cudaMemRangeAttributeReadMostly, hi, 1);

  std::printf("-- preferred location\n");
  expect("SetPreferredLocation(whole, device 0)", cudaMemAdvise(x, all, cudaMemAdviseSetPreferredLocation, dev),
         cudaSuccess);
  show_int("whole preferred location", cudaMemRangeAttributePreferredLocation, x, all);
  show_int("whole preferred location type", cudaMemRangeAttributePreferredLocationType, x, all);
  show_int("whole preferred location id", cudaMemRangeAttributePreferredLocationId, x, all);
  expect("SetPreferredLocation(low half, host)", cudaMemAdvise(lo, kHalf, cudaMemAdviseSetPreferredLocation, host),
         cudaSuccess);
  show_int("whole preferred location", cudaMemRangeAttributePreferredLocation, x, all);
  show_int("whole preferred location type", cudaMemRangeAttributePreferredLocationType, x, all);
  show_int("low preferred location", cudaMemRangeAttributePreferredLocation, lo, kHalf);
  show_int("low preferred location type", cudaMemRangeAttributePreferredLocationType, lo, kHalf);
  show_int("high preferred location", cudaMemRangeAttributePreferredLocation, hi, kHalf);
  show_int("high preferred location id", cudaMemRangeAttributePreferredLocationId, hi, kHalf);
  expect("UnsetPreferredLocation(high half)", cudaMemAdvise(hi, kHalf, cudaMemAdviseUnsetPreferredLocation, dev),
         cudaSuccess);
  show_int("high preferred location", cudaMemRangeAttributePreferredLocation, hi, kHalf);
  show_int("high preferred location type", cudaMemRangeAttributePreferredLocationType, hi, kHalf);

  std::printf("-- accessed by\n");
  expect("SetAccessedBy(whole, device 0)", cudaMemAdvise(x, all, cudaMemAdviseSetAccessedBy, dev), cudaSuccess);
  expect("SetAccessedBy(low half, host)", cudaMemAdvise(lo, kHalf, cudaMemAdviseSetAccessedBy, host), cudaSuccess);
  show_accessed_by("whole accessed by", x, all);
  show_accessed_by("low accessed by", lo, kHalf);
  show_accessed_by("high accessed by", hi, kHalf);
  {
    int one = 7;
    expect("accessed by into one int (two set)",
           cudaMemRangeGetAttribute(&one, sizeof one, cudaMemRangeAttributeAccessedBy, lo, kHalf), cudaSuccess);
    std::printf("one int holds device 0 or the host: %s\n", one == 0 || one == cudaCpuDeviceId ? "yes" : "no");
  }
  expect("UnsetAccessedBy(whole, device 0)", cudaMemAdvise(x, all, cudaMemAdviseUnsetAccessedBy, dev), cudaSuccess);
  show_accessed_by("whole accessed by", x, all);
  show_accessed_by("low accessed by", lo, kHalf);

  std::printf("-- last prefetch location\n");
  expect("prefetch(whole, device 0)", cudaMemPrefetchAsync(x, all, dev, 0, 0), cudaSuccess);
  show_int("whole last prefetch location", cudaMemRangeAttributeLastPrefetchLocation, x, all);
  show_int("whole last prefetch location type", cudaMemRangeAttributeLastPrefetchLocationType, x, all);
  show_int("whole last prefetch location id", cudaMemRangeAttributeLastPrefetchLocationId, x, all);
  expect("prefetch(low half, host)", cudaMemPrefetchAsync(lo, kHalf, host, 0, 0), cudaSuccess);
  expect("cudaDeviceSynchronize", cudaDeviceSynchronize(), cudaSuccess);
  show_int("whole last prefetch location", cudaMemRangeAttributeLastPrefetchLocation, x, all);
  show_int("whole last prefetch location type", cudaMemRangeAttributeLastPrefetchLocationType, x, all);
  show_int("low last prefetch location", cudaMemRangeAttributeLastPrefetchLocation, lo, kHalf);
  show_int("low last prefetch location type", cudaMemRangeAttributeLastPrefetchLocationType, lo, kHalf);
  show_int("high last prefetch location", cudaMemRangeAttributeLastPrefetchLocation, hi, kHalf);

  std::printf("-- several at once\n");
  {
    int read_mostly = 7, preferred = 7, last = 7;
    int accessed[2] = {7, 7};
    void* data[4] = {&read_mostly, &preferred, accessed, &last};
    size_t sizes[4] = {4, 4, 8, 4};
    cudaMemRangeAttribute attrs[4] = {cudaMemRangeAttributeReadMostly, cudaMemRangeAttributePreferredLocation,
                                      cudaMemRangeAttributeAccessedBy, cudaMemRangeAttributeLastPrefetchLocation};
    expect("cudaMemRangeGetAttributes(high half)", cudaMemRangeGetAttributes(data, sizes, attrs, 4, hi, kHalf),
           cudaSuccess);
    std::printf("high: read mostly %d, preferred %d, accessed by {%d, %d}, last prefetch %d\n", read_mostly,
                preferred, accessed[0], accessed[1], last);
    sizes[0] = 8;
    expect("cudaMemRangeGetAttributes(read mostly into 8 bytes)",
           cudaMemRangeGetAttributes(data, sizes, attrs, 4, hi, kHalf), cudaErrorInvalidValue);
  }

  std::printf("-- errors\n");
  int v = 0;
  expect("read mostly into 8 bytes",
         cudaMemRangeGetAttribute(&v, 8, cudaMemRangeAttributeReadMostly, x, all), cudaErrorInvalidValue);
  expect("preferred location into 2 bytes",
         cudaMemRangeGetAttribute(&v, 2, cudaMemRangeAttributePreferredLocation, x, all), cudaErrorInvalidValue);
  expect("accessed by into 6 bytes", cudaMemRangeGetAttribute(&v, 6, cudaMemRangeAttributeAccessedBy, x, all),
         cudaErrorInvalidValue);
  expect("accessed by into 0 bytes", cudaMemRangeGetAttribute(&v, 0, cudaMemRangeAttributeAccessedBy, x, all),
         cudaErrorInvalidValue);
  expect("attribute 99",
         cudaMemRangeGetAttribute(&v, 4, static_cast<cudaMemRangeAttribute>(99), x, all), cudaErrorInvalidValue);
  expect("NULL data", cudaMemRangeGetAttribute(nullptr, 4, cudaMemRangeAttributeReadMostly, x, all),
         cudaErrorInvalidValue);
  void* d = nullptr;
  expect("cudaMalloc", cudaMalloc(&d, kHalf), cudaSuccess);
  expect("device memory", cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, d, kHalf),
         cudaErrorInvalidValue);
  std::vector<char> pageable(4096);
  expect("pageable host memory",
         cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, pageable.data(), 4096),
         cudaErrorInvalidValue);
  expect("cudaFree(device)", cudaFree(d), cudaSuccess);

  std::printf("-- a new allocation has no advice\n");
  expect("cudaFree(managed)", cudaFree(x), cudaSuccess);
  expect("cudaMallocManaged(4 MiB) again", cudaMallocManaged(&x, all), cudaSuccess);
  show_all("whole", x, all);
  expect("cudaFree(managed)", cudaFree(x), cudaSuccess);

  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
