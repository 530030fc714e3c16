// cuBLAS through vmcuda's libcublas.so.13 (issue 12 point 3): Sgemm, GemmEx (fp32, and bf16
// inputs with fp32 compute), batched and strided-batched GEMMs, axpy/dot/nrm2 in both pointer
// modes, on a stream of the program's, with its own workspace. Inputs are small integers, so
// every product and sum is exact in fp32 (and bf16 holds them exactly): the checksums are the
// same whatever order a GPU sums in, natively, through vmcuda and on the test executor.
// Built with nvcc -cudart shared -lcublas (scripts/build-cuda-tests.sh).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA(call)                                                                   \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(e_));                   \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define BLAS(call)                                                                   \
  do {                                                                               \
    cublasStatus_t s_ = (call);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
      std::printf("%s failed: %s\n", #call, cublasGetStatusName(s_));                \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Small integers in [-4, 4], from a fixed sequence.
static std::vector<float> values(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    v[i] = static_cast<float>(static_cast<int>((seed >> 16) % 9) - 4);
  }
  return v;
}

// An order-dependent checksum of exact values.
static double checksum(const std::vector<float>& v) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * static_cast<double>((i % 7) + 1);
  return s;
}

// C = alpha op(A) op(B) + beta C on the CPU (column-major), for comparison.
static std::vector<float> reference(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& A,
                                    int lda, const std::vector<float>& B, int ldb, float beta,
                                    std::vector<float> C, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l)
        s += static_cast<double>(ta ? A[l + i * lda] : A[i + l * lda]) * (tb ? B[j + l * ldb] : B[l + j * ldb]);
      C[i + j * ldc] = static_cast<float>(alpha * s + beta * C[i + j * ldc]);
    }
  return C;
}

template <class T>
static T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  CUDA(cudaMalloc(&d, h.size() * sizeof(T)));
  CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
static std::vector<T> to_host(const T* d, size_t n) {
  std::vector<T> h(n);
  CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

static void report(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  std::printf("%s: checksum %.1f, %zu of %zu differ from the CPU's\n", what, checksum(got), wrong, got.size());
}

int main() {
  cublasHandle_t h;
  BLAS(cublasCreate(&h));
  int version = 0;
  BLAS(cublasGetVersion(h, &version));
  std::printf("cublasCreate: ok (version known: %s)\n", version >= 130000 ? "yes" : "no");
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));  // blocking: ordered with the default stream's copies
  BLAS(cublasSetStream(h, stream));
  cudaStream_t got_stream = nullptr;
  BLAS(cublasGetStream(h, &got_stream));
  std::printf("cublasGetStream gives the stream set: %s\n", got_stream == stream ? "yes" : "no");
  void* workspace = nullptr;
  const size_t workspace_bytes = size_t(4) << 20;
  CUDA(cudaMalloc(&workspace, workspace_bytes));
  BLAS(cublasSetWorkspace(h, workspace, workspace_bytes));
  BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  cublasMath_t math;
  BLAS(cublasGetMathMode(h, &math));
  std::printf("math mode: %d\n", static_cast<int>(math));

  // ---- Sgemm, both transposes, beta 0 and not.
  const int m = 37, n = 29, k = 53;
  const std::vector<float> A = values(size_t(m) * k, 1), B = values(size_t(k) * n, 2), C0 = values(size_t(m) * n, 3);
  float* dA = to_device(A);
  float* dB = to_device(B);
  float* dC = to_device(C0);
  const float two = 2.0f, one = 1.0f, zero = 0.0f;
  BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &two, dA, m, dB, k, &one, dC, m));
  report("Sgemm NN alpha 2 beta 1", to_host(dC, C0.size()), reference(false, false, m, n, k, 2, A, m, B, k, 1, C0, m));
  // op(A) = A^T with A stored k x m: reuse the m*k values as a k x m matrix.
  BLAS(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, dA, k, dB, k, &zero, dC, m));
  report("Sgemm TN beta 0", to_host(dC, C0.size()), reference(true, false, m, n, k, 1, A, k, B, k, 0, C0, m));

  // ---- GemmEx: fp32 in and out, fp32 compute.
  CUDA(cudaMemcpy(dC, C0.data(), C0.size() * sizeof(float), cudaMemcpyHostToDevice));
  BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, dA, CUDA_R_32F, m, dB, CUDA_R_32F, n, &one, dC,
                    CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  report("GemmEx fp32 NT", to_host(dC, C0.size()), reference(false, true, m, n, k, 1, A, m, B, n, 1, C0, m));

  // ---- GemmEx: bf16 inputs, fp32 output and compute (PyTorch's bf16 matmul kind).
  std::vector<__nv_bfloat16> A16(A.size()), B16(B.size());
  for (size_t i = 0; i < A.size(); ++i) A16[i] = __float2bfloat16(A[i]);
  for (size_t i = 0; i < B.size(); ++i) B16[i] = __float2bfloat16(B[i]);
  __nv_bfloat16* dA16 = to_device(A16);
  __nv_bfloat16* dB16 = to_device(B16);
  BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA16, CUDA_R_16BF, m, dB16, CUDA_R_16BF, k, &zero, dC,
                    CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  report("GemmEx bf16 in, fp32 out", to_host(dC, C0.size()), reference(false, false, m, n, k, 1, A, m, B, k, 0, C0, m));
  // bf16 output too: the sums (at most 53 * 16) are integers bf16 rounds; compared after the
  // same rounding on the CPU.
  __nv_bfloat16* dC16 = nullptr;
  CUDA(cudaMalloc(&dC16, C0.size() * sizeof(__nv_bfloat16)));
  BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA16, CUDA_R_16BF, m, dB16, CUDA_R_16BF, k, &zero,
                    dC16, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  {
    const std::vector<__nv_bfloat16> c16 = to_host(dC16, C0.size());
    std::vector<float> got(c16.size()), want = reference(false, false, m, n, k, 1, A, m, B, k, 0, C0, m);
    for (size_t i = 0; i < got.size(); ++i) got[i] = __bfloat162float(c16[i]);
    for (float& w : want) w = __bfloat162float(__float2bfloat16(w));
    report("GemmEx bf16 in and out", got, want);
  }

  // ---- strided batched and batched (arrays of device pointers in device memory).
  const int batch = 3, bm = 16, bn = 8, bk = 12;
  const std::vector<float> SA = values(size_t(batch) * bm * bk, 4), SB = values(size_t(batch) * bk * bn, 5);
  std::vector<float> SC0(size_t(batch) * bm * bn, 0.0f);
  float* dSA = to_device(SA);
  float* dSB = to_device(SB);
  float* dSC = to_device(SC0);
  BLAS(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bn, bk, &one, dSA, bm, static_cast<long long>(bm) * bk, dSB, bk,
                                 static_cast<long long>(bk) * bn, &zero, dSC, bm, static_cast<long long>(bm) * bn, batch));
  auto batched_reference = [&] {
    std::vector<float> want;
    for (int b = 0; b < batch; ++b) {
      std::vector<float> a(SA.begin() + b * bm * bk, SA.begin() + (b + 1) * bm * bk);
      std::vector<float> bb(SB.begin() + b * bk * bn, SB.begin() + (b + 1) * bk * bn);
      std::vector<float> c = reference(false, false, bm, bn, bk, 1, a, bm, bb, bk, 0, std::vector<float>(bm * bn), bm);
      want.insert(want.end(), c.begin(), c.end());
    }
    return want;
  };
  report("SgemmStridedBatched", to_host(dSC, SC0.size()), batched_reference());
  CUDA(cudaMemset(dSC, 0, SC0.size() * sizeof(float)));
  BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bn, bk, &one, dSA, CUDA_R_32F, bm,
                                  static_cast<long long>(bm) * bk, dSB, CUDA_R_32F, bk, static_cast<long long>(bk) * bn, &zero, dSC, CUDA_R_32F,
                                  bm, static_cast<long long>(bm) * bn, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  report("GemmStridedBatchedEx", to_host(dSC, SC0.size()), batched_reference());
  CUDA(cudaMemset(dSC, 0, SC0.size() * sizeof(float)));
  std::vector<const float*> pa, pb;
  std::vector<float*> pc;
  for (int b = 0; b < batch; ++b) {
    pa.push_back(dSA + b * bm * bk);
    pb.push_back(dSB + b * bk * bn);
    pc.push_back(dSC + b * bm * bn);
  }
  const float** dpa = to_device(pa);
  const float** dpb = to_device(pb);
  float** dpc = to_device(pc);
  BLAS(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bn, bk, &one, dpa, bm, dpb, bk, &zero, dpc, bm, batch));
  report("SgemmBatched", to_host(dSC, SC0.size()), batched_reference());

  // ---- level 1 in pointer mode host: scalars and results in this process's memory.
  const int len = 1000;
  const std::vector<float> X = values(len, 6), Y0 = values(len, 7);
  float* dX = to_device(X);
  float* dY = to_device(Y0);
  const float three = 3.0f;
  BLAS(cublasSaxpy(h, len, &three, dX, 1, dY, 1));
  std::vector<float> want_y(Y0);
  for (int i = 0; i < len; ++i) want_y[i] += 3.0f * X[i];
  report("Saxpy (host alpha)", to_host(dY, len), want_y);
  float dot = 0, nrm = 0;
  BLAS(cublasSdot(h, len, dX, 1, dY, 1, &dot));
  double want_dot = 0, want_nrm2 = 0;
  for (int i = 0; i < len; ++i) want_dot += double(X[i]) * want_y[i], want_nrm2 += double(X[i]) * X[i];
  std::printf("Sdot (host result): %.1f, the CPU's %.1f\n", dot, want_dot);
  BLAS(cublasSnrm2(h, len, dX, 1, &nrm));
  std::printf("Snrm2 (host result): %.3f squared %.1f, the CPU's %.1f\n", nrm, std::round(double(nrm) * nrm), want_nrm2);
  // strided access (every other element).
  BLAS(cublasSdot(h, len / 2, dX, 2, dY, 2, &dot));
  want_dot = 0;
  for (int i = 0; i < len; i += 2) want_dot += double(X[i]) * want_y[i];
  std::printf("Sdot incx 2 (host result): %.1f, the CPU's %.1f\n", dot, want_dot);

  // ---- level 1 in pointer mode device: scalars and results in device memory; the calls
  // are queued and only the copy back waits.
  BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
  cublasPointerMode_t mode;
  BLAS(cublasGetPointerMode(h, &mode));
  std::printf("pointer mode: %s\n", mode == CUBLAS_POINTER_MODE_DEVICE ? "device" : "host");
  float* dscalars = nullptr;  // [0] alpha, [1] dot, [2] nrm2
  CUDA(cudaMalloc(&dscalars, 3 * sizeof(float)));
  const float minus_one = -1.0f;
  CUDA(cudaMemcpy(dscalars, &minus_one, sizeof(float), cudaMemcpyHostToDevice));
  BLAS(cublasSaxpy(h, len, dscalars, dX, 1, dY, 1));
  BLAS(cublasSdot(h, len, dX, 1, dY, 1, dscalars + 1));
  BLAS(cublasSnrm2(h, len, dY, 1, dscalars + 2));
  CUDA(cudaStreamSynchronize(stream));
  float back[3];
  CUDA(cudaMemcpy(back, dscalars, sizeof back, cudaMemcpyDeviceToHost));
  for (int i = 0; i < len; ++i) want_y[i] -= X[i];
  double want_dot2 = 0, want_nrm2y = 0;
  for (int i = 0; i < len; ++i) want_dot2 += double(X[i]) * want_y[i], want_nrm2y += double(want_y[i]) * want_y[i];
  report("Saxpy (device alpha)", to_host(dY, len), want_y);
  std::printf("Sdot (device result): %.1f, the CPU's %.1f\n", back[1], want_dot2);
  std::printf("Snrm2 (device result): squared %.1f, the CPU's %.1f\n", std::round(double(back[2]) * back[2]), want_nrm2y);
  // Sgemm with device alpha and beta.
  const float ab[2] = {1.0f, 0.0f};
  CUDA(cudaMemcpy(dscalars, ab, sizeof ab, cudaMemcpyHostToDevice));
  BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, dscalars, dA, m, dB, k, dscalars + 1, dC, m));
  report("Sgemm (device alpha, beta)", to_host(dC, C0.size()), reference(false, false, m, n, k, 1, A, m, B, k, 0, C0, m));

  // ---- errors as cuBLAS reports them.
  BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  std::printf("Sgemm with lda < m: %s\n",
              cublasGetStatusName(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m - 1, dB, k, &zero, dC, m)));
  std::printf("Sgemm with m < 0: %s\n",
              cublasGetStatusName(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, n, k, &one, dA, m, dB, k, &zero, dC, m)));
  CUDA(cudaDeviceSynchronize());

  BLAS(cublasDestroy(h));
  std::printf("cublasDestroy: ok\n");
  CUDA(cudaGetLastError());
  std::printf("done\n");
  return 0;
}
