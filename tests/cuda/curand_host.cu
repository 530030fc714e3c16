// cuRAND's host generators (curandCreateGeneratorHost: numbers written into host memory) through
// vmcuda's libcurand.so.10, as NVIDIA's sample MersenneTwisterGP11213 uses them. cuRAND documents
// that a host generator makes the same sequence as a device generator of the same type, seed,
// offset, ordering and dimensions (its normals and log-normals may differ in the last bits: the
// CPU's transcendental functions against the GPU's, curand.h). Each case generates with both and
// checks that: integers equal, floats within a relative 1e-5 (a line that holds natively and
// through vmcuda, on the GPU and on the test executor). Value lines marked [GPU only] hold
// NVIDIA's numbers (a hash of integers, a float sum to 4 places); the test executor's fake makes
// other numbers (tests/cuda/run_cuda_test.sh leaves those lines out).
// Built with nvcc -cudart shared -lcurand (scripts/build-cuda-tests.sh).
#include <curand.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "library_check.h"

#define RAND(call)                                                   \
  do {                                                               \
    curandStatus_t s_ = (call);                                      \
    if (s_ != CURAND_STATUS_SUCCESS) {                               \
      std::printf("%s failed: curandStatus %d\n", #call, int(s_));   \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

static bool all_good = true;
static const char* yes(bool ok) {
  all_good &= ok;
  return ok ? "yes" : "NO";
}

// An order-dependent hash of integers.
template <class T>
static uint64_t hash(const std::vector<T>& v) {
  uint64_t h = 1469598103934665603ull;
  for (T x : v) h = (h ^ uint64_t(x)) * 1099511628211ull;
  return h;
}

// What a generator starts from: its type and the settings a case gives it.
struct Settings {
  const char* name;
  curandRngType_t type;
  unsigned long long seed = 0;  // pseudo-random generators
  unsigned long long offset = 0;
  curandOrdering_t ordering = curandOrdering_t(0);  // 0: the type's default
  unsigned dims = 0;                                // quasi-random generators
  cudaStream_t stream = nullptr;
};
static curandGenerator_t make(const Settings& s, bool host) {
  curandGenerator_t g;
  if (host)
    RAND(curandCreateGeneratorHost(&g, s.type));
  else
    RAND(curandCreateGenerator(&g, s.type));
  if (s.stream) RAND(curandSetStream(g, s.stream));
  if (s.seed) RAND(curandSetPseudoRandomGeneratorSeed(g, s.seed));
  if (s.offset) RAND(curandSetGeneratorOffset(g, s.offset));
  if (s.ordering) RAND(curandSetGeneratorOrdering(g, s.ordering));
  if (s.dims) RAND(curandSetQuasiRandomGeneratorDimensions(g, s.dims));
  return g;
}

// One generation function with both generators (in turn, so each continues its sequence): the
// host one into host memory, the device one into device memory.
template <class T>
using Generate = std::function<curandStatus_t(curandGenerator_t, T*, size_t)>;
template <class T>
static void compare(const char* what, curandGenerator_t host, curandGenerator_t dev, size_t n, Generate<T> f) {
  std::vector<T> h(n, T(0));
  T* d = nullptr;
  CUDA(cudaMalloc(&d, n * sizeof(T)));
  RAND(f(host, h.data(), n));  // the numbers are in place when it returns: no synchronization
  RAND(f(dev, d, n));
  const std::vector<T> v = download(d, n);
  CUDA(cudaFree(d));
  if constexpr (std::is_integral_v<T>) {
    std::printf("%s: %zu from the host generator equal the device generator's: %s\n", what, n, yes(h == v));
    std::printf("%s: hash %016llx [GPU only]\n", what, (unsigned long long)hash(h));
  } else {
    double worst = 0, sum = 0;
    for (size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(double(h[i]) - double(v[i])) / std::max(1e-30, std::fabs(double(v[i]))));
      sum += h[i];
    }
    bool nonzero = false;
    for (T x : h) nonzero |= x != T(0);
    std::printf("%s: %zu from the host generator within 1e-5 of the device generator's: %s\n", what, n,
                yes(worst <= 1e-5 && nonzero));
    std::printf("%s: sum %.4g [GPU only]\n", what, sum);
  }
}

static void run_case(const Settings& s, const std::function<void(curandGenerator_t, curandGenerator_t)>& body) {
  curandGenerator_t host = make(s, true), dev = make(s, false);
  body(host, dev);
  RAND(curandDestroyGenerator(host));
  RAND(curandDestroyGenerator(dev));
}

int main() {
  const size_t n = 4096;
  auto uniform = [](curandGenerator_t g, float* p, size_t k) { return curandGenerateUniform(g, p, k); };
  auto bits32 = [](curandGenerator_t g, unsigned* p, size_t k) { return curandGenerate(g, p, k); };
  char what[96];

  // The sample's generator: MTGP32, seeded, its sequence going on from call to call.
  run_case({"MTGP32", CURAND_RNG_PSEUDO_MTGP32, 777}, [&](curandGenerator_t h, curandGenerator_t d) {
    compare<float>("MTGP32 uniform", h, d, n, uniform);
    compare<float>("MTGP32 uniform, the next call", h, d, n, uniform);
    compare<unsigned>("MTGP32 32-bit", h, d, n, bits32);
    compare<float>("MTGP32 normal(0, 1)", h, d, n,
                   [](curandGenerator_t g, float* p, size_t k) { return curandGenerateNormal(g, p, k, 0.f, 1.f); });
    compare<double>("MTGP32 uniform double", h, d, n,
                    [](curandGenerator_t g, double* p, size_t k) { return curandGenerateUniformDouble(g, p, k); });
  });

  // XORWOW with an offset and an ordering, on a stream of the program's.
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  Settings xorwow{"XORWOW", CURAND_RNG_PSEUDO_XORWOW, 42, 1000, CURAND_ORDERING_PSEUDO_SEEDED, 0, stream};
  run_case(xorwow, [&](curandGenerator_t h, curandGenerator_t d) {
    compare<float>("XORWOW (offset 1000, seeded ordering, a stream) uniform", h, d, n, uniform);
    compare<float>("XORWOW log-normal(0, 0.5)", h, d, n, [](curandGenerator_t g, float* p, size_t k) {
      return curandGenerateLogNormal(g, p, k, 0.f, 0.5f);
    });
    compare<unsigned>("XORWOW Poisson(4)", h, d, n,
                      [](curandGenerator_t g, unsigned* p, size_t k) { return curandGeneratePoisson(g, p, k, 4.0); });
    std::vector<float> odd(n);
    std::printf("XORWOW host generator: an odd count of normals is refused: %s\n",
                yes(curandGenerateNormal(h, odd.data(), n - 1, 0, 1) == CURAND_STATUS_LENGTH_NOT_MULTIPLE));
  });
  CUDA(cudaStreamDestroy(stream));

  run_case({"Philox", CURAND_RNG_PSEUDO_PHILOX4_32_10, 7}, [&](curandGenerator_t h, curandGenerator_t d) {
    compare<double>("Philox normal double(1, 2)", h, d, n, [](curandGenerator_t g, double* p, size_t k) {
      return curandGenerateNormalDouble(g, p, k, 1.0, 2.0);
    });
    compare<double>("Philox log-normal double(0, 0.25)", h, d, n, [](curandGenerator_t g, double* p, size_t k) {
      return curandGenerateLogNormalDouble(g, p, k, 0.0, 0.25);
    });
    compare<unsigned>("Philox 32-bit", h, d, n, bits32);
  });
  run_case({"MRG32k3a", CURAND_RNG_PSEUDO_MRG32K3A, 99}, [&](curandGenerator_t h, curandGenerator_t d) {
    compare<float>("MRG32k3a uniform", h, d, n, uniform);
  });
  run_case({"MT19937", CURAND_RNG_PSEUDO_MT19937, 5}, [&](curandGenerator_t h, curandGenerator_t d) {
    compare<unsigned>("MT19937 32-bit", h, d, n, bits32);
  });

  // Quasi-random: dimensions and an offset.
  Settings sobol{"Sobol32", CURAND_RNG_QUASI_SOBOL32, 0, 5, curandOrdering_t(0), 3};
  run_case(sobol, [&](curandGenerator_t h, curandGenerator_t d) {
    compare<float>("Sobol32 (3 dimensions, offset 5) uniform", h, d, 3000, uniform);
    compare<unsigned>("Sobol32 32-bit", h, d, 3000, bits32);
    std::vector<unsigned> u(3001);
    std::printf("Sobol32 host generator: a count not a multiple of the dimensions is refused: %s\n",
                yes(curandGenerate(h, u.data(), 3001) == CURAND_STATUS_LENGTH_NOT_MULTIPLE));
  });
  run_case({"Scrambled Sobol64", CURAND_RNG_QUASI_SCRAMBLED_SOBOL64, 0, 0, curandOrdering_t(0), 2},
           [&](curandGenerator_t h, curandGenerator_t d) {
             std::snprintf(what, sizeof what, "Scrambled Sobol64 (2 dimensions) 64-bit");
             compare<unsigned long long>(what, h, d, n, [](curandGenerator_t g, unsigned long long* p, size_t k) {
               return curandGenerateLongLong(g, p, k);
             });
           });

  // The host generator is a generator like the others: its checks; a large count.
  curandGenerator_t g;
  std::printf("a host generator of an unknown type is refused: %s\n",
              yes(curandCreateGeneratorHost(&g, curandRngType_t(7)) == CURAND_STATUS_TYPE_ERROR));
  RAND(curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_DEFAULT));
  std::vector<float> big(1 << 20);
  RAND(curandGenerateUniform(g, big.data(), big.size()));
  bool in = true;
  for (float x : big) in &= x > 0 && x <= 1;
  std::printf("a host generator's 1M uniform floats are in (0, 1]: %s\n", yes(in));
  RAND(curandDestroyGenerator(g));
  std::printf("curand_host: %s\n", all_good ? "all passed" : "FAILED");
  return 0;
}
