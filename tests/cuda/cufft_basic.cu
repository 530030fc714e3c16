// cuFFT through vmcuda's libcufft.so.12 (issue 12 point 3): 1D C2C forward and inverse (batched,
// out of place and in place), R2C and C2R, a plan made in steps with the program's own work area
// and stream (cufftCreate, cufftSetAutoAllocation, cufftMakePlanMany, cufftGetSize,
// cufftSetWorkArea, cufftSetStream), and cufftXtMakePlanMany + cufftXtExec as PyTorch calls them.
// Inputs are sums of a constant and cosines/sines at whole frequencies with small integer
// amplitudes, so every spectrum bin is an integer (or 0): bins are printed rounded to integers
// and compared with a DFT on the CPU; the output is the same whatever algorithm computes the
// transform, natively, through vmcuda and on the test executor (a naive DFT). Double precision,
// 2D/3D and callbacks are left to NVIDIA's simpleCUFFT sample and PyTorch on the GPU machine.
// Built with nvcc -cudart shared -lcufft (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA(call)                                                   \
  do {                                                               \
    cudaError_t e_ = (call);                                         \
    if (e_ != cudaSuccess) {                                         \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(e_));   \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)
#define FFT(call)                                                    \
  do {                                                               \
    cufftResult s_ = (call);                                         \
    if (s_ != CUFFT_SUCCESS) {                                       \
      std::printf("%s failed: cufftResult %d\n", #call, int(s_));    \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

using cd = std::complex<double>;

// x[j] = a + b cos(2 pi f j / n) + c sin(2 pi g j / n): bins 0, f, n-f, g, n-g are integers when
// n/2 divides b and c's products (n even).
static std::vector<float> signal(int n, int a, int b, int f, int c, int g) {
  std::vector<float> x(n);
  for (int j = 0; j < n; ++j)
    x[j] = float(a + b * std::cos(2 * M_PI * f * j / n) + c * std::sin(2 * M_PI * g * j / n));
  return x;
}

static std::vector<cd> dft(const std::vector<cd>& x, int sign) {
  const size_t n = x.size();
  std::vector<cd> y(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j) y[k] += x[j] * std::polar(1.0, sign * 2 * M_PI * double((j * k) % n) / n);
  return y;
}

// The bins that are not 0, rounded, and the largest difference from the CPU's DFT (relative to n).
static void report(const char* what, const std::vector<float>& got, const std::vector<cd>& want) {
  double worst = 0;
  std::printf("%s:", what);
  int shown = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const cd g(got[2 * k], got[2 * k + 1]);
    worst = std::max(worst, std::abs(g - want[k]));
    if (std::abs(want[k]) > 0.5 && shown++ < 8)
      std::printf(" [%zu] %ld%+ldi", k, std::lround(g.real()), std::lround(g.imag()));
  }
  std::printf("; matches the CPU's DFT: %s\n", worst < 1e-3 * want.size() ? "yes" : "NO");
}

template <class T>
static T* to_device(const std::vector<T>& h, size_t bytes = 0) {
  T* d = nullptr;
  CUDA(cudaMalloc(&d, bytes ? bytes : h.size() * sizeof(T)));
  CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
static std::vector<float> to_host(const void* d, size_t floats) {
  std::vector<float> h(floats);
  CUDA(cudaMemcpy(h.data(), d, floats * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

int main() {
  int version = 0, major = 0;
  FFT(cufftGetVersion(&version));
  FFT(cufftGetProperty(MAJOR_VERSION, &major));
  std::printf("cuFFT major version %d (version known: %s)\n", major, version > 0 ? "yes" : "no");

  // ---- C2C, 2 transforms of 64: out of place forward, in place inverse.
  const int n = 64, batch = 2;
  std::vector<float> xs[2] = {signal(n, 1, 2, 3, 4, 5), signal(n, -2, 6, 1, -2, 31)};
  const std::vector<float> imag = signal(n, 0, 2, 7, 0, 0);  // the second's imaginary part
  std::vector<float> in(2 * n * batch);
  std::vector<cd> want[2];
  for (int b = 0; b < batch; ++b) {
    std::vector<cd> x(n);
    for (int j = 0; j < n; ++j) {
      in[2 * (b * n + j)] = xs[b][j];
      in[2 * (b * n + j) + 1] = b ? imag[j] : 0.0f;
      x[j] = cd(in[2 * (b * n + j)], in[2 * (b * n + j) + 1]);
    }
    want[b] = dft(x, -1);
  }
  cufftHandle c2c;
  FFT(cufftPlan1d(&c2c, n, CUFFT_C2C, batch));
  float* d_in = to_device(in);
  float* d_out = nullptr;
  CUDA(cudaMalloc(&d_out, in.size() * sizeof(float)));
  FFT(cufftExecC2C(c2c, reinterpret_cast<cufftComplex*>(d_in), reinterpret_cast<cufftComplex*>(d_out), CUFFT_FORWARD));
  std::vector<float> spec = to_host(d_out, in.size());
  report("C2C forward, transform 0", std::vector<float>(spec.begin(), spec.begin() + 2 * n), want[0]);
  report("C2C forward, transform 1", std::vector<float>(spec.begin() + 2 * n, spec.end()), want[1]);
  FFT(cufftExecC2C(c2c, reinterpret_cast<cufftComplex*>(d_out), reinterpret_cast<cufftComplex*>(d_out), CUFFT_INVERSE));
  std::vector<float> back = to_host(d_out, in.size());
  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) worst = std::max(worst, double(std::fabs(back[i] / n - in[i])));
  std::printf("C2C inverse in place: input times n: %s\n", worst < 1e-4 ? "yes" : "NO");
  FFT(cufftDestroy(c2c));
  std::printf("a destroyed plan is refused: %s\n",
              cufftExecC2C(c2c, reinterpret_cast<cufftComplex*>(d_in), reinterpret_cast<cufftComplex*>(d_out),
                           CUFFT_FORWARD) == CUFFT_INVALID_PLAN ? "yes" : "NO");

  // ---- R2C then C2R, made in steps: no auto allocation, the program's work area and stream.
  const int m = 128;
  std::vector<float> real = signal(m, 3, -4, 10, 2, 63);
  std::vector<cd> rx(m);
  for (int j = 0; j < m; ++j) rx[j] = real[j];
  std::vector<cd> rwant = dft(rx, -1);
  rwant.resize(m / 2 + 1);
  cufftHandle r2c, c2r;
  FFT(cufftCreate(&r2c));
  FFT(cufftCreate(&c2r));
  FFT(cufftSetAutoAllocation(r2c, 0));
  int nn[1] = {m};
  size_t work = 0, asked = 0;
  FFT(cufftMakePlanMany(r2c, 1, nn, nullptr, 1, m, nullptr, 1, m / 2 + 1, CUFFT_R2C, 1, &work));
  FFT(cufftGetSize(r2c, &asked));
  void* area = nullptr;
  CUDA(cudaMalloc(&area, work ? work : 1));
  FFT(cufftSetWorkArea(r2c, area));
  cudaStream_t stream;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  FFT(cufftSetStream(r2c, stream));
  FFT(cufftSetStream(c2r, stream));
  std::printf("work area: GetSize agrees with MakePlanMany: %s\n", asked == work ? "yes" : "NO");
  FFT(cufftMakePlan1d(c2r, m, CUFFT_C2R, 1, &work));
  float* d_real = to_device(real);
  cufftComplex* d_half = nullptr;
  CUDA(cudaMalloc(&d_half, (m / 2 + 1) * sizeof(cufftComplex)));
  FFT(cufftExecR2C(r2c, d_real, d_half));
  CUDA(cudaStreamSynchronize(stream));
  report("R2C", to_host(d_half, 2 * (m / 2 + 1)), rwant);
  float* d_back = nullptr;
  CUDA(cudaMalloc(&d_back, m * sizeof(float)));
  FFT(cufftExecC2R(c2r, d_half, d_back));
  CUDA(cudaStreamSynchronize(stream));
  std::vector<float> rb = to_host(d_back, m);
  worst = 0;
  for (int j = 0; j < m; ++j) worst = std::max(worst, double(std::fabs(rb[j] / m - real[j])));
  std::printf("C2R of R2C: input times n: %s\n", worst < 1e-4 ? "yes" : "NO");
  FFT(cufftDestroy(r2c));
  FFT(cufftDestroy(c2r));

  // ---- cufftXtMakePlanMany + cufftXtExec (PyTorch's path): C2C of 3 transforms of 32.
  const int q = 32, qb = 3;
  std::vector<float> xin(2 * q * qb);
  std::vector<cd> xwant[qb];
  for (int b = 0; b < qb; ++b) {
    std::vector<float> s = signal(q, b, 2 * b + 2, b + 1, 2, 2 * b + 3);
    std::vector<cd> x(q);
    for (int j = 0; j < q; ++j) xin[2 * (b * q + j)] = s[j], x[j] = s[j];
    xwant[b] = dft(x, -1);
  }
  cufftHandle xt;
  FFT(cufftCreate(&xt));
  long long xn[1] = {q};
  size_t xwork = 0;
  FFT(cufftXtMakePlanMany(xt, 1, xn, nullptr, 1, q, CUDA_C_32F, nullptr, 1, q, CUDA_C_32F, qb, &xwork, CUDA_C_32F));
  float* d_xin = to_device(xin);
  float* d_xout = nullptr;
  CUDA(cudaMalloc(&d_xout, xin.size() * sizeof(float)));
  FFT(cufftXtExec(xt, d_xin, d_xout, CUFFT_FORWARD));
  std::vector<float> xs_out = to_host(d_xout, xin.size());
  for (int b = 0; b < qb; ++b) {
    char what[64];
    std::snprintf(what, sizeof what, "XtExec C2C, transform %d", b);
    report(what, std::vector<float>(xs_out.begin() + 2 * q * b, xs_out.begin() + 2 * q * (b + 1)), xwant[b]);
  }
  FFT(cufftDestroy(xt));

  // ---- errors as cuFFT answers them
  cufftHandle bad;
  std::printf("an invalid type is refused: %s\n",
              cufftPlan1d(&bad, 16, cufftType(0x77), 1) == CUFFT_INVALID_TYPE ? "yes" : "NO");
  std::printf("a plan never made is refused: %s\n", cufftSetAutoAllocation(12345, 0) == CUFFT_INVALID_PLAN ? "yes" : "NO");

  CUDA(cudaStreamDestroy(stream));
  CUDA(cudaFree(area));
  CUDA(cudaFree(d_in));
  CUDA(cudaFree(d_out));
  CUDA(cudaFree(d_real));
  CUDA(cudaFree(d_half));
  CUDA(cudaFree(d_back));
  CUDA(cudaFree(d_xin));
  CUDA(cudaFree(d_xout));
  std::printf("done\n");
  return 0;
}
