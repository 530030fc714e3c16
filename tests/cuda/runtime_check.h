// What the runtime test programs (runtime_library, runtime_rest2/3/4) share: an
// expected status printed by name (a mismatch counted, the last error cleared after), and a
// yes/no check counted the same way. `failures` is what each program's summary reports.
#pragma once

#include <cstdio>

static int failures = 0;
static void expect(const char* what, cudaError_t got, cudaError_t want = cudaSuccess) {
  std::printf("%s: %s\n", what, cudaGetErrorName(got));
  if (got != want) {
    std::printf("  FAIL: expected %s\n", cudaGetErrorName(want));
    ++failures;
  }
  cudaGetLastError();
}
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "yes" : "no");
  if (!ok) ++failures;
}
