#include "fake_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <type_traits>

namespace vmcuda::testing {
namespace {

template <class T>
T arg(void** params, int i) {
  T v;
  std::memcpy(&v, params[i], sizeof v);
  return v;
}

// int arithmetic as the GPU does it: wrapping (no undefined behaviour on the CPU).
int wadd(int a, int b) { return static_cast<int>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }
int wmul(int a, int b) { return static_cast<int>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b)); }

uint64_t count_of(const FakeLaunch& l, int n) { return std::min<uint64_t>(l.threads, n < 0 ? 0 : n); }

template <class T>
T load(const std::byte* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof v);
  return v;
}
template <class T>
void store(std::byte* p, uint64_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof v);
}

// void add_one(int* p, int n): p[i] += 1
int add_one(void** params, const FakeLaunch& l) {
  const auto p = arg<uint64_t>(params, 0);
  const uint64_t count = count_of(l, arg<int>(params, 1));
  std::byte* b = l.mem(p, count * 4);
  if (!b && count) return 700;
  for (uint64_t i = 0; i < count; ++i) store<int>(b, i, wadd(load<int>(b, i), 1));
  return 0;
}

// void vecadd(const float* a, const float* b, float* c, int n): c[i] = a[i] + b[i]
int vecadd(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 3));
  std::byte* a = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* b = l.mem(arg<uint64_t>(params, 1), count * 4);
  std::byte* c = l.mem(arg<uint64_t>(params, 2), count * 4);
  if ((!a || !b || !c) && count) return 700;
  for (uint64_t i = 0; i < count; ++i) store<float>(c, i, load<float>(a, i) + load<float>(b, i));
  return 0;
}

// void fault(int* p): *p = 1 — the test programs pass a bad pointer to get error 700.
int fault(void** params, const FakeLaunch& l) {
  std::byte* p = l.mem(arg<uint64_t>(params, 0), 4);
  if (!p) return 700;
  store<int>(p, 0, 1);
  return 0;
}

int empty(void**, const FakeLaunch&) { return 0; }

// ---- tests/security/endless_kernel.cu: spin_forever(volatile int* flag) spins while *flag
// is 0, which nothing changes: it never ends (kFakeNeverEnds).
int spin_forever(void** params, const FakeLaunch& l) {
  std::byte* p = l.mem(arg<uint64_t>(params, 0), 4);
  if (!p) return 700;
  return load<int>(p, 0) == 0 ? kFakeNeverEnds : 0;
}

// ---- tests/cuda/symbols_pitch.cu

// apply_coef(const int* in, int* out, int n):
//   out[i] = in[i] * c_coef[i % 4] + d_table[i % 8]; atomicAdd(&d_counter, 1)
int apply_coef(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 2));
  std::byte* in = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* out = l.mem(arg<uint64_t>(params, 1), count * 4);
  std::byte *coef = l.global("c_coef"), *table = l.global("d_table"), *counter = l.global("d_counter");
  if (!coef || !table || !counter) return 700;
  if ((!in || !out) && count) return 700;
  for (uint64_t i = 0; i < count; ++i) {
    // In 32-bit unsigned arithmetic, as the GPU's int arithmetic wraps.
    const uint32_t v = load<uint32_t>(in, i) * load<uint32_t>(coef, i & 3) + load<uint32_t>(table, i & 7);
    store<uint32_t>(out, i, v);
  }
  store<uint32_t>(counter, 0, load<uint32_t>(counter, 0) + static_cast<uint32_t>(count));
  return 0;
}

// big_fill(unsigned long long* p, int n): p[i] = 3 * i + 1
int big_fill(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 1));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * 8);
  if (!p && count) return 700;
  for (uint64_t i = 0; i < count; ++i) store<uint64_t>(p, i, 3 * i + 1);
  return 0;
}

// pitch_add(int* p, size_t pitch, int width, int height, int v): the ints (x, y) the 2D grid
// covers, x < width and y < height, get v added.
int pitch_add(void** params, const FakeLaunch& l) {
  const auto p = arg<uint64_t>(params, 0);
  const auto pitch = arg<uint64_t>(params, 1);
  const int width = arg<int>(params, 2), height = arg<int>(params, 3), v = arg<int>(params, 4);
  const uint64_t w = std::min<uint64_t>(width < 0 ? 0 : width, uint64_t{l.grid[0]} * l.block[0]);
  const uint64_t h = std::min<uint64_t>(height < 0 ? 0 : height, uint64_t{l.grid[1]} * l.block[1]);
  if (w == 0) return 0;  // no thread writes (and no row to look up 67M times)
  for (uint64_t y = 0; y < h; ++y) {
    std::byte* row = l.mem(p + y * pitch, w * 4);
    if (!row && w) return 700;
    for (uint64_t x = 0; x < w; ++x) store<uint32_t>(row, x, load<uint32_t>(row, x) + static_cast<uint32_t>(v));
  }
  return 0;
}

// static_shared(int* out), blocks of 256: out[t] = 255 - t (through 1 KiB of static shared memory).
int static_shared(void** params, const FakeLaunch& l) {
  const uint64_t threads = std::min<uint64_t>(l.block[0], 256);
  std::byte* out = l.mem(arg<uint64_t>(params, 0), threads * 4);
  if (!out && threads) return 700;
  for (uint64_t t = 0; t < threads; ++t) store<int>(out, t, 255 - static_cast<int>(t));
  return 0;
}

// dyn_shared(const int* in, int* out, int n), one block with n ints of dynamic shared
// memory: out[i] = in[n - 1 - i] + 1.
int dyn_shared(void** params, const FakeLaunch& l) {
  const int n = arg<int>(params, 2);
  const uint64_t count = n < 0 ? 0 : n;
  if (count * 4 > l.shared_bytes) return 700;  // past the block's shared memory
  std::byte* in = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* out = l.mem(arg<uint64_t>(params, 1), count * 4);
  if ((!in || !out) && count) return 700;
  std::vector<int> s(count);
  for (uint64_t i = 0; i < count; ++i) s[i] = load<int>(in, i);
  for (uint64_t i = 0; i < count; ++i) store<int>(out, i, wadd(s[count - 1 - i], 1));
  return 0;
}

// ---- tests/cuda/execution.cu

// scale<T>(T* p, T factor, int n): p[i] *= factor
template <class T>
int scale(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 2));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * sizeof(T));
  if (!p && count) return 700;
  const T factor = arg<T>(params, 1);
  for (uint64_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, int>)
      store<T>(p, i, wmul(load<T>(p, i), factor));
    else
      store<T>(p, i, static_cast<T>(load<T>(p, i) * factor));
  }
  return 0;
}

// struct_arg(Params p, long long* out), Params {int a; double b; char c;} (24 bytes):
// out = {a, (long long)(b * 2), c}
int struct_arg(void** params, const FakeLaunch& l) {
  const std::byte* p = static_cast<const std::byte*>(params[0]);
  std::byte* out = l.mem(arg<uint64_t>(params, 1), 24);
  if (!out) return 700;
  store<int64_t>(out, 0, load<int>(p, 0));
  // (long long)(double) as the GPU converts (cvt.rzi.s64.f64): saturating, NaN 0; a plain
  // cast of an out-of-range double is undefined on the CPU.
  const double b2 = load<double>(p + 8, 0) * 2;
  const int64_t b2i = b2 != b2                       ? 0
                      : b2 >= 9223372036854775807.0  ? INT64_MAX
                      : b2 <= -9223372036854775808.0 ? INT64_MIN
                                                     : static_cast<int64_t>(b2);
  store<int64_t>(out, 1, b2i);
  store<int64_t>(out, 2, static_cast<int64_t>(static_cast<signed char>(p[16])));
  return 0;
}

// tests/cuda/mapped_memory.cu: mm_fill(int* p, int n, int base): p[i] = base + 3 * i
int mm_fill(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 1));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * 4);
  if (!p && count) return 700;
  const int base = arg<int>(params, 2);
  for (uint64_t i = 0; i < count; ++i) store<int>(p, i, wadd(base, wmul(3, static_cast<int>(i))));
  return 0;
}

// tests/cuda/per_thread_stream.cu: fill(int* p, int n, int base): p[i] = base + i
int pts_fill(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 1));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * 4);
  if (!p && count) return 700;
  const int base = arg<int>(params, 2);
  for (uint64_t i = 0; i < count; ++i) store<int>(p, i, wadd(base, static_cast<int>(i)));
  return 0;
}

// bump_sym(int v): d_sym[i] += v for the first 64 threads
int bump_sym(void** params, const FakeLaunch& l) {
  std::byte* sym = l.global("d_sym");
  if (!sym) return 700;
  const uint64_t count = std::min<uint64_t>(64, l.threads);
  for (uint64_t i = 0; i < count; ++i) store<int>(sym, i, wadd(load<int>(sym, i), arg<int>(params, 0)));
  return 0;
}

// tests/cuda/runtime_library.cu: with_params(char c, double d, int* p, short s): *p = c + (int)d + s
int with_params(void** params, const FakeLaunch& l) {
  const auto p = arg<uint64_t>(params, 2);
  if (!p) return 0;
  std::byte* b = l.mem(p, 4);
  if (!b) return 700;
  store<int>(b, 0, arg<char>(params, 0) + static_cast<int>(arg<double>(params, 1)) + arg<short>(params, 3));
  return 0;
}

// mm_axpy(const int* x, int* y, int n, int a): y[i] += a * x[i] (x may be y)
int mm_axpy(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 2));
  const std::byte* x = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* y = l.mem(arg<uint64_t>(params, 1), count * 4);
  if ((!x || !y) && count) return 700;
  const int a = arg<int>(params, 3);
  for (uint64_t i = 0; i < count; ++i) store<int>(y, i, wadd(load<int>(y, i), wmul(a, load<int>(x, i))));
  return 0;
}

// ---- tests/cuda/managed_vars.cu (__managed__ m_counter, m_values)

// managed_bump(int by): every thread adds `by` to m_counter.
int managed_bump(void** params, const FakeLaunch& l) {
  std::byte* counter = l.global("m_counter");
  if (!counter) return 700;
  const uint32_t add = static_cast<uint32_t>(arg<int>(params, 0)) * static_cast<uint32_t>(l.threads);
  store<uint32_t>(counter, 0, load<uint32_t>(counter, 0) + add);
  return 0;
}

// managed_scale(float f, int n): m_values[i] = m_values[i] * f + m_counter, i < n (8 at most).
int managed_scale(void** params, const FakeLaunch& l) {
  std::byte *values = l.global("m_values"), *counter = l.global("m_counter");
  if (!values || !counter) return 700;
  const uint64_t count = std::min<uint64_t>(count_of(l, arg<int>(params, 1)), 8);
  const float f = arg<float>(params, 0);
  const float c = static_cast<float>(load<int>(counter, 0));
  for (uint64_t i = 0; i < count; ++i) store<float>(values, i, load<float>(values, i) * f + c);
  return 0;
}

// tests/cuda/host_func.cu: void scale_add(int* p, int mul, int add, int n): p[i] = p[i] * mul + add
int scale_add(void** params, const FakeLaunch& l) {
  const auto p = arg<uint64_t>(params, 0);
  const int mul = arg<int>(params, 1), add = arg<int>(params, 2);
  const uint64_t count = count_of(l, arg<int>(params, 3));
  std::byte* b = l.mem(p, count * 4);
  if (!b && count) return 700;
  for (uint64_t i = 0; i < count; ++i) store<int>(b, i, wadd(wmul(load<int>(b, i), mul), add));
  return 0;
}

// tests/cuda/kernel_printf.cu: one thread each.
// void print_lines(int n, int base)
int print_lines(void** params, const FakeLaunch& l) {
  const int n = arg<int>(params, 0), base = arg<int>(params, 1);
  // Stops at a full FIFO: a guest's n of 2^31 would otherwise keep the CPU busy for minutes.
  for (int i = 0; i < n; ++i)
    if (!device_printf(l, "kernel: line %d of %d, value %d\n", i, n, wadd(base, wmul(i, i)))) break;
  return 0;
}
// void print_values(float x, unsigned long long u, int tag)
int print_values(void** params, const FakeLaunch& l) {
  const auto u = arg<unsigned long long>(params, 1);
  const int tag = arg<int>(params, 2);
  device_printf(l, "kernel %d: %.3f %llu 0x%llx %c\n", tag, static_cast<double>(arg<float>(params, 0)), u, u,
                'A' + tag);
  return 0;
}
// void print_many(int n)
int print_many(void** params, const FakeLaunch& l) {
  const int n = arg<int>(params, 0);
  for (int i = 0; i < n; ++i)
    if (!device_printf(l, "many %05d abcdefghijklmnopqrstuvwxyz\n", i)) break;
  return 0;
}
// void store_and_print(int* out, int v): *out = 2 * v
int store_and_print(void** params, const FakeLaunch& l) {
  std::byte* p = l.mem(arg<uint64_t>(params, 0), 4);
  if (!p) return 700;
  const int v = wmul(arg<int>(params, 1), 2);
  store<int>(p, 0, v);
  device_printf(l, "kernel: stored %d\n", v);
  return 0;
}

// ---- tests/cuda/multi_gpu.cu (the executor's memory is one: any device's kernel reaches
// any device's allocation, as peer access gives on the GPU)

// mg_fill(int* p, int n, int seed): p[i] = seed + 7 * i
int mg_fill(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 1));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * 4);
  if (!p && count) return 700;
  const int seed = arg<int>(params, 2);
  for (uint64_t i = 0; i < count; ++i) store<int>(p, i, wadd(seed, wmul(7, static_cast<int>(i))));
  return 0;
}

// mg_mix(const int* x, int* y, int n, int a): y[i] = y[i] * a + x[i]
int mg_mix(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 2));
  const std::byte* x = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* y = l.mem(arg<uint64_t>(params, 1), count * 4);
  if ((!x || !y) && count) return 700;
  const int a = arg<int>(params, 3);
  for (uint64_t i = 0; i < count; ++i) store<int>(y, i, wadd(wmul(load<int>(y, i), a), load<int>(x, i)));
  return 0;
}

// ---- tests/cuda/cooperative.cu: kernels with grid-wide barriers (cooperative launches only)

// grid_sum(const int* in, int n, int* partial, int* out), blocks of 256: partial[b] = what
// block b's threads summed (grid-stride), then, after the barrier, *out = the partials' sum.
int grid_sum(void** params, const FakeLaunch& l) {
  if (!l.cooperative) return 700;  // grid.sync() without a grid workspace
  const int n = arg<int>(params, 1);
  const uint64_t count = n < 0 ? 0 : n;
  const uint64_t block_threads = uint64_t{l.block[0]} * l.block[1] * l.block[2];
  const uint64_t blocks = l.threads / block_threads;
  const std::byte* in = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* partial = l.mem(arg<uint64_t>(params, 2), uint64_t{l.grid[0]} * 4);
  std::byte* out = l.mem(arg<uint64_t>(params, 3), 4);
  if ((!in && count) || !partial || !out) return 700;
  std::vector<uint32_t> sums(blocks, 0);
  for (uint64_t i = 0; i < count; ++i) sums[(i % l.threads) / block_threads] += load<uint32_t>(in, i);
  for (uint64_t b = 0; b < blocks; ++b) store<uint32_t>(partial, b % l.grid[0], sums[b]);  // partial[blockIdx.x]
  uint32_t total = 0;
  for (uint64_t b = 0; b < l.grid[0]; ++b) total += load<uint32_t>(partial, b);
  store<uint32_t>(out, 0, total);
  return 0;
}

// grid_rounds(int* a, int* b, int n, int rounds): round r writes dst[i] = src[(i + 1) % n] + 1
// (a -> b, then b -> a, ...), a grid barrier after each.
int grid_rounds(void** params, const FakeLaunch& l) {
  const int n = arg<int>(params, 2), rounds = arg<int>(params, 3);
  if (rounds <= 0) return 0;
  if (!l.cooperative) return 700;
  const uint64_t count = n < 0 ? 0 : n;
  std::byte* a = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* b = l.mem(arg<uint64_t>(params, 1), count * 4);
  if ((!a || !b) && count) return 700;
  for (int r = 0; r < rounds; ++r) {
    const std::byte* src = r % 2 ? b : a;
    std::byte* dst = r % 2 ? a : b;
    for (uint64_t i = 0; i < count; ++i) store<int>(dst, i, wadd(load<int>(src, (i + 1) % count), 1));
  }
  return 0;
}

// coop_bump(int* p, int n, int by): p[i] += by
int coop_bump(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 1));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * 4);
  if (!p && count) return 700;
  const int by = arg<int>(params, 2);
  for (uint64_t i = 0; i < count; ++i) store<int>(p, i, wadd(load<int>(p, i), by));
  return 0;
}

// ---- tests/cuda/graphs.cu and bench/cuda/graph_bench.cu
// g_add(int* p, int v, int n): p[i] += v; g_scale(int* p, int k, int n): p[i] *= k
template <bool kScale>
int g_update(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 2));
  std::byte* p = l.mem(arg<uint64_t>(params, 0), count * 4);
  if (!p && count) return 700;
  const int v = arg<int>(params, 1);
  for (uint64_t i = 0; i < count; ++i) store<int>(p, i, kScale ? wmul(load<int>(p, i), v) : wadd(load<int>(p, i), v));
  return 0;
}
// g_sum2(const int* a, const int* b, int* c, int n): c[i] = a[i] + b[i]
int g_sum2(void** params, const FakeLaunch& l) {
  const uint64_t count = count_of(l, arg<int>(params, 3));
  std::byte* a = l.mem(arg<uint64_t>(params, 0), count * 4);
  std::byte* b = l.mem(arg<uint64_t>(params, 1), count * 4);
  std::byte* c = l.mem(arg<uint64_t>(params, 2), count * 4);
  if ((!a || !b || !c) && count) return 700;
  for (uint64_t i = 0; i < count; ++i) store<int>(c, i, wadd(load<int>(a, i), load<int>(b, i)));
  return 0;
}

// ---- tests/cuda/textures.cu: texture fetches (tex_fetch below) and surface writes.

// Its texture or surface argument, or nothing (an unknown value: an illegal access).
const FakeTexture* texture_arg(void** params, int i, const FakeLaunch& l, FakeTexture* t) {
  return l.texture && l.texture(arg<uint64_t>(params, i), t) ? t : nullptr;
}

// tex_point(cudaTextureObject_t t, float* out, int w, int h): out[y * w + x] = tex2D(t, x + .5, y + .5)
int tex_point(void** params, const FakeLaunch& l) {
  FakeTexture t;
  if (!texture_arg(params, 0, l, &t)) return 700;
  const int w = arg<int>(params, 2), h = arg<int>(params, 3);
  const uint64_t nx = std::min<uint64_t>(std::max(w, 0), uint64_t{l.grid[0]} * l.block[0]);
  const uint64_t ny = std::min<uint64_t>(std::max(h, 0), uint64_t{l.grid[1]} * l.block[1]);
  for (uint64_t y = 0; y < ny; ++y)
    for (uint64_t x = 0; x < nx; ++x) {
      std::byte* o = l.mem(arg<uint64_t>(params, 1) + (y * w + x) * 4, 4);
      if (!o) return 700;
      double v[4];
      tex_fetch(t, 2, x + 0.5f, y + 0.5f, 0, v);
      store<float>(o, 0, static_cast<float>(v[0]));
    }
  return 0;
}

// tex_sample(t, const float2* coords, float* out, int n): out[i] = tex2D(t, coords[i])
// tex_sample4(t, const float2* coords, float4* out, int n): the same, four channels.
template <int kChannels>
int tex_sample(void** params, const FakeLaunch& l) {
  FakeTexture t;
  if (!texture_arg(params, 0, l, &t)) return 700;
  const uint64_t count = count_of(l, arg<int>(params, 3));
  const std::byte* c = l.mem(arg<uint64_t>(params, 1), count * 8);
  std::byte* o = l.mem(arg<uint64_t>(params, 2), count * 4 * kChannels);
  if ((!c || !o) && count) return 700;
  for (uint64_t i = 0; i < count; ++i) {
    double v[4];
    tex_fetch(t, 2, load<float>(c, 2 * i), load<float>(c, 2 * i + 1), 0, v);
    for (int k = 0; k < kChannels; ++k) store<float>(o, i * kChannels + k, static_cast<float>(v[k]));
  }
  return 0;
}

// tex_layered(t, float* out, int w, int h): block (x, y) of grid x = layer:
// out[(layer * h + y) * w + x] = tex2DLayered(t, x + .5, y + .5, layer)
int tex_layered(void** params, const FakeLaunch& l) {
  FakeTexture t;
  if (!texture_arg(params, 0, l, &t)) return 700;
  const int w = arg<int>(params, 2), h = arg<int>(params, 3);
  const uint64_t nx = std::min<uint64_t>(std::max(w, 0), l.block[0]), ny = std::min<uint64_t>(std::max(h, 0), l.block[1]);
  for (uint64_t layer = 0; layer < l.grid[0]; ++layer)
    for (uint64_t y = 0; y < ny; ++y)
      for (uint64_t x = 0; x < nx; ++x) {
        std::byte* o = l.mem(arg<uint64_t>(params, 1) + ((layer * h + y) * w + x) * 4, 4);
        if (!o) return 700;
        double v[4];
        tex_fetch(t, 2, x + 0.5f, y + 0.5f, static_cast<int>(layer), v);
        store<float>(o, 0, static_cast<float>(v[0]));
      }
  return 0;
}

// tex_linear1d(t, int* out, int n): out[i] = tex1Dfetch<int>(t, n - 1 - i) (0 outside the texture)
int tex_linear1d(void** params, const FakeLaunch& l) {
  FakeTexture t;
  if (!texture_arg(params, 0, l, &t)) return 700;
  const int n = arg<int>(params, 2);
  const uint64_t count = count_of(l, n);
  std::byte* o = l.mem(arg<uint64_t>(params, 1), count * 4);
  if (!o && count) return 700;
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t at = int64_t{n} - 1 - static_cast<int64_t>(i);
    store<int>(o, i, at >= 0 && static_cast<uint64_t>(at) < t.width ? load<int>(t.data, at) : 0);
  }
  return 0;
}

// surf_fill(cudaSurfaceObject_t s, int w, int h, int base): surf2Dwrite(base + y * 1000 + x, s, x * 4, y)
int surf_fill(void** params, const FakeLaunch& l) {
  FakeSurface s;
  if (!l.surface || !l.surface(arg<uint64_t>(params, 0), &s)) return 700;
  const int w = arg<int>(params, 1), h = arg<int>(params, 2), base = arg<int>(params, 3);
  const uint64_t nx = std::min<uint64_t>(std::max(w, 0), uint64_t{l.grid[0]} * l.block[0]);
  const uint64_t ny = std::min<uint64_t>(std::max(h, 0), uint64_t{l.grid[1]} * l.block[1]);
  for (uint64_t y = 0; y < ny; ++y)
    for (uint64_t x = 0; x < nx; ++x) {
      // cudaBoundaryModeTrap: an access outside the surface faults.
      if (x * 4 + 4 > s.width_bytes || y >= s.height) return 700;
      store<int>(s.data + y * s.pitch, x, wadd(base, wadd(wmul(static_cast<int>(y), 1000), static_cast<int>(x))));
    }
  return 0;
}

// g_countdown(int* counter, cudaGraphConditionalHandle h): --*counter; the condition is
// whether it is still above 0 (tests/cuda/graph_nodes.cu's while loop).
int g_countdown(void** params, const FakeLaunch& l) {
  std::byte* p = l.mem(arg<uint64_t>(params, 0), 4);
  if (!p) return 700;
  const int c = wadd(load<int>(p, 0), -1);
  store<int>(p, 0, c);
  fake_set_conditional(arg<uint64_t>(params, 1), c > 0 ? 1 : 0);
  return 0;
}

const FakeKernel kKernels[] = {
    // tests/cuda/graph_nodes.cu
    {"_Z11g_countdownPiy", {{0, 8}, {8, 8}}, g_countdown, 10},
    // tests/cuda/graphs.cu
    {"_Z5g_addPiii", {{0, 8}, {8, 4}, {12, 4}}, g_update<false>, 10},
    {"_Z7g_scalePiii", {{0, 8}, {8, 4}, {12, 4}}, g_update<true>, 10},
    {"_Z6g_sum2PKiS0_Pii", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, g_sum2, 10},
    // bench/cuda/graph_bench.cu: bump(int* p, int n): p[i] += 1
    {"_Z4bumpPii", {{0, 8}, {8, 4}}, add_one, 8},
    {"_Z12empty_kernelv", {}, empty},
    {"_Z12spin_foreverPVi", {{0, 8}}, spin_forever, 8},
    // tests/cuda/managed_vars.cu
    {"_Z12managed_bumpi", {{0, 4}}, managed_bump, 8},
    {"_Z13managed_scalefi", {{0, 4}, {4, 4}}, managed_scale, 10},
    {"_Z7add_onePii", {{0, 8}, {8, 4}}, add_one},
    {"vecadd", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, vecadd},
    {"_Z6vecaddPKfS0_Pfi", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, vecadd},
    {"_Z5faultPi", {{0, 8}}, fault},
    // tests/cuda/symbols_pitch.cu; registers and shared memory as ptxas -v says for sm_90.
    {"_Z10apply_coefPKiPii", {{0, 8}, {8, 8}, {16, 4}}, apply_coef, 18},
    {"_Z8big_fillPyi", {{0, 8}, {8, 4}}, big_fill, 10},
    {"_Z9pitch_addPimiii", {{0, 8}, {8, 8}, {16, 4}, {20, 4}, {24, 4}}, pitch_add, 10},
    {"_Z13static_sharedPi", {{0, 8}}, static_shared, 10, 1024},
    {"_Z10dyn_sharedPKiPii", {{0, 8}, {8, 8}, {16, 4}}, dyn_shared, 14},
    // tests/cuda/execution.cu
    {"_Z5scaleIiEvPT_S0_i", {{0, 8}, {8, 4}, {12, 4}}, scale<int>, 8},
    {"_Z5scaleIdEvPT_S0_i", {{0, 8}, {8, 8}, {16, 4}}, scale<double>, 8},
    {"_Z10struct_arg6ParamsPx", {{0, 24}, {24, 8}}, struct_arg, 12},
    // tests/cuda/mapped_memory.cu
    {"_Z7mm_fillPiii", {{0, 8}, {8, 4}, {12, 4}}, mm_fill, 10},
    {"_Z7mm_axpyPKiPiii", {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, mm_axpy, 10},
    // tests/cuda/host_func.cu
    {"_Z9scale_addPiiii", {{0, 8}, {8, 4}, {12, 4}, {16, 4}}, scale_add, 8},
    // tests/cuda/kernel_printf.cu (local memory: ptxas -v's stack frame, printf's arguments)
    {"_Z11print_linesii", {{0, 4}, {4, 4}}, print_lines, 26, 0, 0, 16},
    {"_Z12print_valuesfyi", {{0, 4}, {8, 8}, {16, 4}}, print_values, 24, 0, 0, 40},
    {"_Z10print_manyi", {{0, 4}}, print_many, 27, 0, 0, 8},
    {"_Z15store_and_printPii", {{0, 8}, {8, 4}}, store_and_print, 24, 0, 0, 8},
    // tests/cuda/multi_gpu.cu
    {"_Z7mg_fillPiii", {{0, 8}, {8, 4}, {12, 4}}, mg_fill, 10},
    {"_Z6mg_mixPKiPiii", {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, mg_mix, 10},
    // tests/cuda/cooperative.cu (registers and static shared memory as ptxas -v says for
    // sm_90: the occupancy that sizes its cooperative grids)
    {"_Z8grid_sumPKiiPiS1_", {{0, 8}, {8, 4}, {16, 8}, {24, 8}}, grid_sum, 29, 1024},
    {"_Z11grid_roundsPiS_ii", {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, grid_rounds, 32},
    {"_Z9coop_bumpPiii", {{0, 8}, {8, 4}, {12, 4}}, coop_bump, 8},
    // tests/cuda/per_thread_stream.cu, tests/cuda/runtime_library.cu
    {"_Z4fillPiii", {{0, 8}, {8, 4}, {12, 4}}, pts_fill, 10},
    {"_Z8bump_symi", {{0, 4}}, bump_sym, 8},
    {"_Z11with_paramscdPis", {{0, 1}, {8, 8}, {16, 8}, {24, 2}}, with_params, 10},
    // tests/cuda/textures.cu
    {"_Z9tex_pointyPfii", {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, tex_point, 10},
    {"_Z10tex_sampleyPK6float2Pfi", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, tex_sample<1>, 12},
    {"_Z11tex_sample4yPK6float2P6float4i", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, tex_sample<4>, 14},
    {"_Z11tex_layeredyPfii", {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, tex_layered, 14},
    {"_Z12tex_linear1dyPii", {{0, 8}, {8, 8}, {16, 4}}, tex_linear1d, 10},
    {"_Z9surf_fillyiii", {{0, 8}, {8, 4}, {12, 4}, {16, 4}}, surf_fill, 8},
};

template <class T>
std::vector<std::byte> bytes_of(std::initializer_list<T> values) {
  std::vector<std::byte> b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.begin(), b.size());
  return b;
}
std::vector<std::byte> iota_bytes(size_t n) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = std::byte(i);
  return b;
}

const FakeGlobal kGlobals[] = {
    // tests/cuda/managed_vars.cu's __managed__ variables (runtime_rest4's library's too).
    {"m_counter", 4, bytes_of<int>({7}), true},
    {"m_values", 32, bytes_of<float>({0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f}), true},
    // The host-stub tests' own (fake_driver.h: kTestGlobal).
    {"vmcuda_test_global", 256, iota_bytes(256)},
    // tests/cuda/symbols_pitch.cu
    {"d_table", 32, bytes_of<int>({1, 2, 3, 4, 5, 6, 7, 8})},
    {"c_coef", 16, {}},
    {"d_counter", 4, {}},
    {"d_big", 32768, {}},
    // tests/cuda/per_thread_stream.cu
    {"d_sym", 256, {}},
};

}  // namespace

namespace {

// CUarray_format values (cuda.h).
constexpr int kU8 = 0x01, kU16 = 0x02, kU32 = 0x03, kS8 = 0x08, kS16 = 0x09, kS32 = 0x0a, kHalf = 0x10, kFloat = 0x20;

int format_bytes(int format) {
  switch (format) {
    case kU8: case kS8: return 1;
    case kU16: case kS16: case kHalf: return 2;
    default: return 4;
  }
}

float half_to_float(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float sign = (h & 0x8000) ? -1.f : 1.f;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) return m ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(m | 0x400), e - 25);
}

// Channel c of the texel at p, as the read mode returns it.
double channel(const FakeTexture& t, const std::byte* p, unsigned c) {
  const std::byte* q = p + c * format_bytes(t.format);
  switch (t.format) {
    case kU8: { const auto v = load<uint8_t>(q, 0); return t.read_as_integer ? v : v / 255.f; }
    case kS8: { const auto v = load<int8_t>(q, 0); return t.read_as_integer ? v : std::max(v / 127.f, -1.f); }
    case kU16: { const auto v = load<uint16_t>(q, 0); return t.read_as_integer ? v : v / 65535.f; }
    case kS16: { const auto v = load<int16_t>(q, 0); return t.read_as_integer ? v : std::max(v / 32767.f, -1.f); }
    case kU32: return load<uint32_t>(q, 0);
    case kS32: return load<int32_t>(q, 0);
    case kHalf: return half_to_float(load<uint16_t>(q, 0));
    default: return load<float>(q, 0);
  }
}

// Texel index i of n after address mode `mode`; -1: outside (border).
int64_t address(int64_t i, uint64_t n, int mode, bool normalized) {
  const int64_t N = static_cast<int64_t>(n);
  if (!normalized && (mode == 0 || mode == 2)) mode = 1;  // wrap and mirror need normalized coordinates: clamp
  switch (mode) {
    case 0: return ((i % N) + N) % N;
    case 2: {
      const int64_t m = ((i % (2 * N)) + 2 * N) % (2 * N);
      return m < N ? m : 2 * N - 1 - m;
    }
    case 3: return i < 0 || i >= N ? -1 : i;
    default: return std::clamp<int64_t>(i, 0, N - 1);
  }
}

}  // namespace

void tex_fetch(const FakeTexture& t, int dims, float x, float y, int layer, double out[4]) {
  const uint64_t w = std::max<uint64_t>(t.width, 1), h = dims > 1 ? std::max<uint64_t>(t.height, 1) : 1;
  if (t.normalized) {
    x *= static_cast<float>(w);
    y *= static_cast<float>(h);
  }
  const uint64_t elem = static_cast<uint64_t>(format_bytes(t.format)) * t.channels;
  const uint64_t z = t.depth ? static_cast<uint64_t>(std::clamp<int64_t>(layer, 0, int64_t(t.depth) - 1)) : 0;
  // The value of texel (i, j), each channel; the border colour outside in border mode.
  auto texel = [&](int64_t i, int64_t j, double v[4]) {
    const int64_t ai = address(i, w, t.address[0], t.normalized);
    const int64_t aj = dims > 1 ? address(j, h, t.address[1], t.normalized) : 0;
    for (unsigned c = 0; c < 4; ++c) v[c] = c == 3 ? 1 : 0;  // absent channels: (0, 0, 0, 1)
    if (ai < 0 || aj < 0) {
      for (unsigned c = 0; c < 4; ++c) v[c] = t.border[c];
      return;
    }
    const std::byte* p = t.data + z * t.slice + static_cast<uint64_t>(aj) * t.pitch + static_cast<uint64_t>(ai) * elem;
    for (unsigned c = 0; c < t.channels; ++c) v[c] = channel(t, p, c);
  };
  if (t.filter == 0) {  // point: T[floor(x)]
    texel(static_cast<int64_t>(std::floor(x)), static_cast<int64_t>(std::floor(y)), out);
    return;
  }
  // Linear: xB = x - 0.5, i = floor(xB), alpha = frac(xB) in 8-bit fixed point.
  const float xb = x - 0.5f, yb = dims > 1 ? y - 0.5f : 0.f;
  const int64_t i = static_cast<int64_t>(std::floor(xb)), j = static_cast<int64_t>(std::floor(yb));
  const float a = std::round((xb - std::floor(xb)) * 256.f) / 256.f, b = std::round((yb - std::floor(yb)) * 256.f) / 256.f;
  double t00[4], t10[4], t01[4], t11[4];
  texel(i, j, t00);
  texel(i + 1, j, t10);
  texel(i, j + 1, t01);
  texel(i + 1, j + 1, t11);
  for (int c = 0; c < 4; ++c)
    out[c] = static_cast<float>((1 - a) * (1 - b) * static_cast<float>(t00[c]) + a * (1 - b) * static_cast<float>(t10[c]) +
                                (1 - a) * b * static_cast<float>(t01[c]) + a * b * static_cast<float>(t11[c]));
}

bool device_printf(const FakeLaunch& launch, const char* format, ...) {
  if (!launch.printf_fifo) return false;
  char line[1024];
  va_list ap;
  va_start(ap, format);
  const int n = std::vsnprintf(line, sizeof line, format, ap);
  va_end(ap);
  if (n < 0) return true;
  const size_t len = std::min<size_t>(static_cast<size_t>(n), sizeof line - 1);
  if (launch.printf_fifo->size() + len > launch.printf_fifo_bytes) return false;
  launch.printf_fifo->append(line, len);
  return true;
}

std::span<const FakeKernel> all_fake_kernels() { return kKernels; }

const FakeKernel* find_fake_kernel(const char* name) {
  for (const auto& k : kKernels)
    if (std::strcmp(k.name, name) == 0) return &k;
  return nullptr;
}

uint64_t fake_global_offset(const FakeGlobal* g) {
  uint64_t off = 0;
  for (const auto& v : kGlobals) {
    if (&v == g) return off;
    off += (v.bytes + 255) / 256 * 256;
  }
  return off;
}

const FakeGlobal* find_fake_global(const char* name) {
  for (const auto& g : kGlobals)
    if (std::strcmp(g.name, name) == 0) return &g;
  return nullptr;
}

namespace {
struct Conditional {
  unsigned default_value = 0, flags = 0, value = 0;
};
struct Conditionals {
  std::mutex mu;
  uint64_t next = 0x6000;
  std::map<uint64_t, Conditional> values;
};
Conditionals& conditionals() {
  static auto* c = new Conditionals;
  return *c;
}
}  // namespace

uint64_t fake_conditional_create(unsigned default_value, unsigned flags) {
  auto& c = conditionals();
  std::lock_guard l(c.mu);
  const uint64_t h = ++c.next;
  c.values[h] = Conditional{default_value, flags, default_value};
  return h;
}
bool fake_conditional_known(uint64_t handle) {
  auto& c = conditionals();
  std::lock_guard l(c.mu);
  return c.values.contains(handle);
}
unsigned fake_conditional_value(uint64_t handle) {
  auto& c = conditionals();
  std::lock_guard l(c.mu);
  auto it = c.values.find(handle);
  return it == c.values.end() ? 0 : it->second.value;
}
void fake_set_conditional(uint64_t handle, unsigned value) {
  auto& c = conditionals();
  std::lock_guard l(c.mu);
  if (auto it = c.values.find(handle); it != c.values.end()) it->second.value = value;
}
void fake_conditionals_to_default() {
  auto& c = conditionals();
  std::lock_guard l(c.mu);
  for (auto& [h, v] : c.values)
    if (v.flags & 1) v.value = v.default_value;
}

}  // namespace vmcuda::testing
