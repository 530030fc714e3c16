// cuRAND's host API through vmcuda's libcurand.so.10 (issue 12 point 3): Philox and XORWOW with a
// fixed seed (uniform, normal, log-normal, 32/64-bit integers, Poisson, doubles), offsets,
// orderings, a Sobol quasi-random generator's dimensions, on a stream of the program's.
// NVIDIA's sequences are deterministic for a seed, so their checksums are native references;
// lines marked [GPU only] hold those values. The test executor's fake cuRAND makes other
// numbers (tests/executor/fake_curand.cc), so CI (tests/cuda/run_cuda_test.sh) leaves the
// [GPU only] lines out and checks the rest: shapes, ranges, determinism, statuses. A value line
// prints its checksum rounded to 3 significant places of a sum, stable across GPUs.
// Built with nvcc -cudart shared -lcurand (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <curand.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA(call)                                                   \
  do {                                                               \
    cudaError_t e_ = (call);                                         \
    if (e_ != cudaSuccess) {                                         \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(e_));   \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)
#define RAND(call)                                                   \
  do {                                                               \
    curandStatus_t s_ = (call);                                      \
    if (s_ != CURAND_STATUS_SUCCESS) {                               \
      std::printf("%s failed: curandStatus %d\n", #call, int(s_));   \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

template <class T>
static std::vector<T> to_host(const void* d, size_t n) {
  std::vector<T> h(n);
  CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// An order-dependent checksum (exact for integers: a 64-bit hash).
template <class T>
static uint64_t hash(const std::vector<T>& v) {
  uint64_t h = 1469598103934665603ull;
  for (T x : v) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof x);
    h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

template <class T>
static void floats(const char* what, const std::vector<T>& v, double lo, double hi) {
  double sum = 0;
  bool in = true;
  for (T x : v) {
    sum += x;
    in &= x > lo && x <= hi;
  }
  std::printf("%s: %zu values in (%g, %g]: %s\n", what, v.size(), lo, hi, in ? "yes" : "NO");
  std::printf("%s: hash %016llx [GPU only]\n", what, (unsigned long long)hash(v));
}

int main() {
  int version = 0, major = 0;
  RAND(curandGetVersion(&version));
  RAND(curandGetProperty(MAJOR_VERSION, &major));
  std::printf("cuRAND major version %d (version known: %s)\n", major, version > 0 ? "yes" : "no");

  const size_t n = 4096;
  float* d_f = nullptr;
  double* d_d = nullptr;
  unsigned* d_u = nullptr;
  unsigned long long* d_ll = nullptr;
  CUDA(cudaMalloc(&d_f, n * sizeof(float)));
  CUDA(cudaMalloc(&d_d, n * sizeof(double)));
  CUDA(cudaMalloc(&d_u, n * sizeof(unsigned)));
  CUDA(cudaMalloc(&d_ll, n * sizeof(unsigned long long)));
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));

  const curandRngType_t types[2] = {CURAND_RNG_PSEUDO_PHILOX4_32_10, CURAND_RNG_PSEUDO_XORWOW};
  const char* names[2] = {"Philox", "XORWOW"};
  for (int t = 0; t < 2; ++t) {
    char what[64];
    curandGenerator_t g;
    RAND(curandCreateGenerator(&g, types[t]));
    RAND(curandSetStream(g, stream));
    RAND(curandSetPseudoRandomGeneratorSeed(g, 1234ull));
    RAND(curandGenerateUniform(g, d_f, n));
    const std::vector<float> first = to_host<float>(d_f, n);
    std::snprintf(what, sizeof what, "%s uniform", names[t]);
    floats(what, first, 0, 1);
    // The same seed again keeps the generator's offset (measured with NVIDIA's cuRAND on the
    // H100): the numbers go on, they do not start over (curandSetGeneratorOffset(g, 0) does).
    RAND(curandSetPseudoRandomGeneratorSeed(g, 1234ull));
    RAND(curandGenerateUniform(g, d_f, n));
    std::printf("%s: the same seed again keeps the offset (other numbers): %s\n", names[t],
                to_host<float>(d_f, n) != first ? "yes" : "NO");
    RAND(curandGenerateUniform(g, d_f, n));
    std::printf("%s: the next call continues the sequence (differs): %s\n", names[t],
                to_host<float>(d_f, n) != first ? "yes" : "NO");
    RAND(curandSetGeneratorOffset(g, 0));
    RAND(curandGenerateNormal(g, d_f, n, 2.0f, 0.5f));
    std::vector<float> nv = to_host<float>(d_f, n);
    double mean = 0;
    for (float x : nv) mean += x;
    mean /= n;
    std::printf("%s normal(2, 0.5): mean within 0.05 of 2: %s\n", names[t], std::fabs(mean - 2) < 0.05 ? "yes" : "NO");
    std::snprintf(what, sizeof what, "%s normal", names[t]);
    std::printf("%s: hash %016llx [GPU only]\n", what, (unsigned long long)hash(nv));
    std::printf("%s: an odd count of normals is refused: %s\n", names[t],
                curandGenerateNormal(g, d_f, n - 1, 0, 1) == CURAND_STATUS_LENGTH_NOT_MULTIPLE ? "yes" : "NO");
    RAND(curandGenerateLogNormal(g, d_f, n, 0.0f, 0.25f));
    std::snprintf(what, sizeof what, "%s log-normal", names[t]);
    floats(what, to_host<float>(d_f, n), 0, 1e30);
    RAND(curandGenerate(g, d_u, n));
    std::printf("%s 32-bit: hash %016llx [GPU only]\n", names[t], (unsigned long long)hash(to_host<unsigned>(d_u, n)));
    RAND(curandGenerateUniformDouble(g, d_d, n));
    std::snprintf(what, sizeof what, "%s uniform double", names[t]);
    floats(what, to_host<double>(d_d, n), 0, 1);
    RAND(curandGeneratePoisson(g, d_u, n, 4.0));
    std::vector<unsigned> pv = to_host<unsigned>(d_u, n);
    double pm = 0;
    for (unsigned x : pv) pm += x;
    std::printf("%s Poisson(4): mean within 0.2 of 4: %s\n", names[t], std::fabs(pm / n - 4) < 0.2 ? "yes" : "NO");
    std::printf("%s Poisson: hash %016llx [GPU only]\n", names[t], (unsigned long long)hash(pv));
    RAND(curandSetGeneratorOrdering(g, CURAND_ORDERING_PSEUDO_DEFAULT));
    RAND(curandDestroyGenerator(g));
  }

  // 64-bit integers come from the 64-bit quasi-random generators.
  curandGenerator_t sobol;
  RAND(curandCreateGenerator(&sobol, CURAND_RNG_QUASI_SOBOL64));
  RAND(curandSetQuasiRandomGeneratorDimensions(sobol, 4));
  std::printf("Sobol64: a count not a multiple of the dimensions is refused: %s\n",
              curandGenerateLongLong(sobol, d_ll, 4095) == CURAND_STATUS_LENGTH_NOT_MULTIPLE ? "yes" : "NO");
  RAND(curandGenerateLongLong(sobol, d_ll, n));
  std::printf("Sobol64 64-bit: hash %016llx [GPU only]\n",
              (unsigned long long)hash(to_host<unsigned long long>(d_ll, n)));
  std::printf("Sobol64: a seed is refused (quasi-random): %s\n",
              curandSetPseudoRandomGeneratorSeed(sobol, 1) == CURAND_STATUS_TYPE_ERROR ? "yes" : "NO");
  RAND(curandDestroyGenerator(sobol));

  curandGenerator_t bad;
  std::printf("an unknown generator type is refused: %s\n",
              curandCreateGenerator(&bad, curandRngType_t(7)) == CURAND_STATUS_TYPE_ERROR ? "yes" : "NO");
  CUDA(cudaStreamDestroy(stream));
  CUDA(cudaFree(d_f));
  CUDA(cudaFree(d_d));
  CUDA(cudaFree(d_u));
  CUDA(cudaFree(d_ll));
  std::printf("done\n");
  return 0;
}
