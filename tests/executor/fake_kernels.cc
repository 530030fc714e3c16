#include "fake_kernels.h"

#include <algorithm>
#include <cstring>

namespace vmcuda::testing {
namespace {

template <class T>
T arg(void** params, int i) {
  T v;
  std::memcpy(&v, params[i], sizeof v);
  return v;
}

// void add_one(int* p, int n): p[i] += 1
int add_one(void** params, uint64_t threads, const DeviceMemory& mem) {
  const auto p = arg<uint64_t>(params, 0);
  const int n = arg<int>(params, 1);
  const uint64_t count = std::min<uint64_t>(threads, n < 0 ? 0 : n);
  std::byte* b = mem(p, count * 4);
  if (!b && count) return 700;
  for (uint64_t i = 0; i < count; ++i) {
    int v;
    std::memcpy(&v, b + i * 4, 4);
    ++v;
    std::memcpy(b + i * 4, &v, 4);
  }
  return 0;
}

// void vecadd(const float* a, const float* b, float* c, int n): c[i] = a[i] + b[i]
int vecadd(void** params, uint64_t threads, const DeviceMemory& mem) {
  const int n = arg<int>(params, 3);
  const uint64_t count = std::min<uint64_t>(threads, n < 0 ? 0 : n);
  std::byte* a = mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* b = mem(arg<uint64_t>(params, 1), count * 4);
  std::byte* c = mem(arg<uint64_t>(params, 2), count * 4);
  if ((!a || !b || !c) && count) return 700;
  for (uint64_t i = 0; i < count; ++i) {
    float x, y;
    std::memcpy(&x, a + i * 4, 4);
    std::memcpy(&y, b + i * 4, 4);
    x += y;
    std::memcpy(c + i * 4, &x, 4);
  }
  return 0;
}

// void fault(int* p): *p = 1 — the test programs pass a bad pointer to get error 700.
int fault(void** params, uint64_t, const DeviceMemory& mem) {
  std::byte* p = mem(arg<uint64_t>(params, 0), 4);
  if (!p) return 700;
  const int one = 1;
  std::memcpy(p, &one, 4);
  return 0;
}

int empty(void**, uint64_t, const DeviceMemory&) { return 0; }

const FakeKernel kKernels[] = {
    {"_Z12empty_kernelv", {}, empty},
    {"_Z7add_onePii", {{0, 8}, {8, 4}}, add_one},
    {"vecadd", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, vecadd},
    {"_Z6vecaddPKfS0_Pfi", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, vecadd},
    {"_Z5faultPi", {{0, 8}}, fault},
};

}  // namespace

const FakeKernel* find_fake_kernel(const char* name) {
  for (const auto& k : kKernels)
    if (std::strcmp(k.name, name) == 0) return &k;
  return nullptr;
}

}  // namespace vmcuda::testing
