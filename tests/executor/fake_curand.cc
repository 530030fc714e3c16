// A fake libcurand.so.10 for the test executor (fake_driver.h). A FAKE: its numbers are not
// NVIDIA's (no XORWOW, Philox, MTGP32 or Sobol here), so CI checks the plumbing and the shapes
// (counts, ranges, determinism for a seed, the offset advancing) while the GPU run checks the
// real sequences. Element i of a generator's stream is splitmix64(seed, offset + i); uniform
// floats are in (0, 1] as cuRAND's; normals are Box-Muller pairs (an odd count of a pseudo
// generator is CURAND_STATUS_LENGTH_NOT_MULTIPLE, as natively); memory no allocation holds is
// CURAND_STATUS_LAUNCH_FAILURE (a GPU would fault).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "executor/fake_driver.h"

namespace vmcuda::testing {
namespace {

constexpr int kSuccess = 0, kNotInitialized = 101, kTypeError = 103, kOutOfRange = 104, kLengthNotMultiple = 105,
              kLaunchFailure = 201;

struct Generator {
  int type = 0;
  uint64_t seed = 0, offset = 0;
  int ordering = 0;
  unsigned dims = 1;
  void* stream = nullptr;
};
std::mutex g_mu;
std::set<Generator*> g_gens;

Generator* live(void* g) {
  return g_gens.count(static_cast<Generator*>(g)) ? static_cast<Generator*>(g) : nullptr;
}
uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double unit(uint64_t v) { return double((v >> 11) + 1) * 0x1p-53; }  // (0, 1]

int f_create(void** out, int type) {
  if (!out) return kOutOfRange;
  const bool pseudo = type == 100 || type == 101 || type == 121 || type == 141 || type == 142 || type == 161;
  const bool quasi = type >= 200 && type <= 204;
  if (!pseudo && !quasi) return kTypeError;
  auto* g = new Generator;
  g->type = type;
  std::lock_guard l(g_mu);
  g_gens.insert(g);
  *out = g;
  return kSuccess;
}
int f_destroy(void* p) {
  std::lock_guard l(g_mu);
  if (!g_gens.erase(static_cast<Generator*>(p))) return kNotInitialized;
  delete static_cast<Generator*>(p);
  return kSuccess;
}
template <class F>
int with(void* p, F f) {
  std::lock_guard l(g_mu);
  Generator* g = live(p);
  return g ? f(*g) : kNotInitialized;
}
int f_set_stream(void* p, void* s) { return with(p, [&](Generator& g) { return g.stream = s, kSuccess; }); }
int f_set_seed(void* p, unsigned long long seed) {
  return with(p, [&](Generator& g) { return g.type >= 200 ? kTypeError : (g.seed = seed, g.offset = 0, kSuccess); });
}
int f_set_offset(void* p, unsigned long long o) { return with(p, [&](Generator& g) { return g.offset = o, kSuccess; }); }
int f_set_ordering(void* p, int o) {
  return with(p, [&](Generator& g) {
    const bool ok = g.type >= 200 ? o == 201 : (o >= 100 && o <= 104);
    return ok ? (g.ordering = o, kSuccess) : kOutOfRange;
  });
}
int f_set_dims(void* p, unsigned d) {
  return with(p, [&](Generator& g) {
    if (g.type < 200) return kTypeError;
    return d < 1 || d > 20000 ? kOutOfRange : (g.dims = d, kSuccess);
  });
}
int f_generate_seeds(void* p) { return with(p, [](Generator&) { return kSuccess; }); }

// Writes n elements of `elem` bytes, element i made by put(dst, value i of the stream).
template <class Put>
int generate(void* p, void* out, size_t n, size_t elem, bool pairs, Put put) {
  Generator g;
  {
    std::lock_guard l(g_mu);
    Generator* q = live(p);
    if (!q) return kNotInitialized;
    if (q->type >= 200 && n % q->dims) return kLengthNotMultiple;
    if (pairs && q->type < 200 && n % 2) return kLengthNotMultiple;
    g = *q;
    q->offset += n;
  }
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::byte* dst = at(reinterpret_cast<uint64_t>(out), n * elem);
    if (!dst) {
      status = kLaunchFailure;
      return;
    }
    for (size_t i = 0; i < n; ++i) put(dst + i * elem, g, g.offset + i);
  });
  return status;
}
template <class T>
void store(std::byte* d, T v) {
  std::memcpy(d, &v, sizeof v);
}
// Box-Muller on the pair (i & ~1, i | 1): element i is its cosine or sine half.
double normal(const Generator& g, uint64_t i) {
  const uint64_t a = i & ~uint64_t(1);
  const double r = std::sqrt(-2.0 * std::log(unit(mix(g.seed, a)))), t = 2.0 * M_PI * unit(mix(g.seed, a + 1));
  return (i & 1) ? r * std::sin(t) : r * std::cos(t);
}

int f_generate(void* p, void* out, size_t n) {
  return generate(p, out, n, 4, false, [](std::byte* d, const Generator& g, uint64_t i) {
    store(d, uint32_t(mix(g.seed, i) >> 32));
  });
}
int f_generate_ll(void* p, void* out, size_t n) {
  return generate(p, out, n, 8, false, [](std::byte* d, const Generator& g, uint64_t i) { store(d, mix(g.seed, i)); });
}
int f_uniform(void* p, void* out, size_t n) {
  return generate(p, out, n, 4, false, [](std::byte* d, const Generator& g, uint64_t i) {
    store(d, float(double((mix(g.seed, i) >> 40) + 1) * 0x1p-24));  // (0, 1], 24 bits
  });
}
int f_uniform_double(void* p, void* out, size_t n) {
  return generate(p, out, n, 8, false, [](std::byte* d, const Generator& g, uint64_t i) { store(d, unit(mix(g.seed, i))); });
}
int f_normal(void* p, void* out, size_t n, float mean, float sd) {
  return generate(p, out, n, 4, true, [=](std::byte* d, const Generator& g, uint64_t i) {
    store(d, float(mean + sd * normal(g, i)));
  });
}
int f_normal_double(void* p, void* out, size_t n, double mean, double sd) {
  return generate(p, out, n, 8, true, [=](std::byte* d, const Generator& g, uint64_t i) {
    store(d, mean + sd * normal(g, i));
  });
}
int f_log_normal(void* p, void* out, size_t n, float mean, float sd) {
  return generate(p, out, n, 4, true, [=](std::byte* d, const Generator& g, uint64_t i) {
    store(d, float(std::exp(mean + sd * normal(g, i))));
  });
}
int f_log_normal_double(void* p, void* out, size_t n, double mean, double sd) {
  return generate(p, out, n, 8, true, [=](std::byte* d, const Generator& g, uint64_t i) {
    store(d, std::exp(mean + sd * normal(g, i)));
  });
}
int f_poisson(void* p, void* out, size_t n, double lambda) {
  if (!(lambda > 0)) return kOutOfRange;  // cuRAND: CURAND_STATUS_OUT_OF_RANGE for lambda <= 0
  return generate(p, out, n, 4, false, [=](std::byte* d, const Generator& g, uint64_t i) {
    // The normal approximation, rounded and clamped at 0 (a fake: shapes, not distributions).
    const double v = std::round(lambda + std::sqrt(lambda) * normal(g, i));
    store(d, uint32_t(v < 0 ? 0 : v));
  });
}

}  // namespace

void* fake_curand_symbol(const char* name) {
  static const std::map<std::string, void*> t = {
      {"curandCreateGenerator", reinterpret_cast<void*>(f_create)},
      {"curandDestroyGenerator", reinterpret_cast<void*>(f_destroy)},
      {"curandSetStream", reinterpret_cast<void*>(f_set_stream)},
      {"curandSetPseudoRandomGeneratorSeed", reinterpret_cast<void*>(f_set_seed)},
      {"curandSetGeneratorOffset", reinterpret_cast<void*>(f_set_offset)},
      {"curandSetGeneratorOrdering", reinterpret_cast<void*>(f_set_ordering)},
      {"curandSetQuasiRandomGeneratorDimensions", reinterpret_cast<void*>(f_set_dims)},
      {"curandGenerateSeeds", reinterpret_cast<void*>(f_generate_seeds)},
      {"curandGenerate", reinterpret_cast<void*>(f_generate)},
      {"curandGenerateLongLong", reinterpret_cast<void*>(f_generate_ll)},
      {"curandGenerateUniform", reinterpret_cast<void*>(f_uniform)},
      {"curandGenerateUniformDouble", reinterpret_cast<void*>(f_uniform_double)},
      {"curandGenerateNormal", reinterpret_cast<void*>(f_normal)},
      {"curandGenerateNormalDouble", reinterpret_cast<void*>(f_normal_double)},
      {"curandGenerateLogNormal", reinterpret_cast<void*>(f_log_normal)},
      {"curandGenerateLogNormalDouble", reinterpret_cast<void*>(f_log_normal_double)},
      {"curandGeneratePoisson", reinterpret_cast<void*>(f_poisson)},
  };
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_curand_generators() {
  std::lock_guard l(g_mu);
  return g_gens.size();
}

}  // namespace vmcuda::testing
