// cuSOLVER's dense API through vmcuda's libcusolver.so.12 (issue 12 points 3 and 7): LU
// (getrf/getrs, fp32 and fp64, a transposed solve, a singular matrix's info), Cholesky
// (potrf/potrs, a matrix that is not positive definite), the 64-bit generic API PyTorch uses
// (cusolverDnXgetrf/Xgetrs, Xpotrf/Xpotrs with their buffer sizes and a params object) and the
// symmetric eigenvalue solver (syevd). Small well-conditioned matrices with integer solutions and
// eigenvalues, printed with modest precision, so the output is the same natively, through vmcuda
// and on the test executor; info is device memory, as the library writes it.
// Built with nvcc -cudart shared -lcusolver -lcublas (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "library_check.h"

#define SOLVER(call)                                                    \
  do {                                                                  \
    cusolverStatus_t s_ = (call);                                       \
    if (s_ != CUSOLVER_STATUS_SUCCESS) {                                \
      std::printf("%s failed: cusolverStatus_t %d\n", #call, int(s_));  \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

static int info_of(const int* d) { return download(d, 1)[0]; }
static const char* yes(bool b) { return b ? "yes" : "no"; }

const int n = 4;
// Column-major: A(i, j) = a[i + j * n]. A nonsymmetric matrix with distinct pivots, the solution
// x = (1, -2, 3, -4) and b = A x (op(A) x for the transposed solve).
static std::vector<double> matrix() {
  const double rows[n][n] = {{4, 1, -2, 3}, {8, -3, 1, 2}, {-2, 7, 5, 1}, {1, 2, -6, 9}};
  std::vector<double> a(n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) a[i + j * n] = rows[i][j];
  return a;
}
static const double kX[n] = {1, -2, 3, -4};
static std::vector<double> rhs(const std::vector<double>& a, bool transposed) {
  std::vector<double> b(n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) b[i] += (transposed ? a[j + i * n] : a[i + j * n]) * kX[j];
  return b;
}
// An SPD matrix: tridiag(-1, 4, -1) plus 1 on the corners' off-diagonal pair.
static std::vector<double> spd() {
  std::vector<double> a(n * n, 0);
  for (int i = 0; i < n; ++i) {
    a[i + i * n] = 4;
    if (i + 1 < n) a[i + (i + 1) * n] = a[(i + 1) + i * n] = -1;
  }
  a[0 + 3 * n] = a[3 + 0 * n] = 1;
  return a;
}
template <class T>
static std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
static void print_x(const char* what, const std::vector<T>& x, double tol) {
  double err = 0;
  for (int i = 0; i < n; ++i) err = std::fmax(err, std::fabs(double(x[i]) - kX[i]));
  std::printf("%s: x = (%.4f, %.4f, %.4f, %.4f); within %g of the solution: %s\n", what, double(x[0]), double(x[1]),
              double(x[2]), double(x[3]), tol, yes(err < tol));
}

int main() {
  cusolverDnHandle_t h;
  SOLVER(cusolverDnCreate(&h));
  int version = 0;
  SOLVER(cusolverGetVersion(&version));
  std::printf("cuSOLVER major version %d\n", version / 1000);
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  SOLVER(cusolverDnSetStream(h, stream));
  int* d_info = upload(std::vector<int>{-7});
  int* d_ipiv = upload(std::vector<int>(n, 0));

  // ---- fp32 LU and a solve
  {
    float* d_a = upload(as<float>(matrix()));
    float* d_b = upload(as<float>(rhs(matrix(), false)));
    int lwork = 0;
    SOLVER(cusolverDnSgetrf_bufferSize(h, n, n, d_a, n, &lwork));
    float* d_work = upload(std::vector<float>(lwork > 0 ? lwork : 1));
    SOLVER(cusolverDnSgetrf(h, n, n, d_a, n, d_work, d_ipiv, d_info));
    const int info = info_of(d_info);
    SOLVER(cusolverDnSgetrs(h, CUBLAS_OP_N, n, 1, d_a, n, d_ipiv, d_b, n, d_info));
    std::printf("Sgetrf: work size given: %s, info %d\n", yes(lwork > 0), info);
    print_x("Sgetrs", download(d_b, n), 1e-4);
  }
  // ---- fp64 LU, a transposed solve
  {
    double* d_a = upload(matrix());
    double* d_b = upload(rhs(matrix(), true));
    int lwork = 0;
    SOLVER(cusolverDnDgetrf_bufferSize(h, n, n, d_a, n, &lwork));
    double* d_work = upload(std::vector<double>(lwork > 0 ? lwork : 1));
    SOLVER(cusolverDnDgetrf(h, n, n, d_a, n, d_work, d_ipiv, d_info));
    const int info = info_of(d_info);
    SOLVER(cusolverDnDgetrs(h, CUBLAS_OP_T, n, 1, d_a, n, d_ipiv, d_b, n, d_info));
    std::printf("Dgetrf: info %d; Dgetrs (transposed): info %d\n", info, info_of(d_info));
    print_x("Dgetrs A^T x = b", download(d_b, n), 1e-9);
    // A singular matrix: its third column is zero, so the third pivot is exactly zero (info 3).
    std::vector<double> s = matrix();
    for (int i = 0; i < n; ++i) s[i + 2 * n] = 0;
    double* d_s = upload(s);
    SOLVER(cusolverDnDgetrf(h, n, n, d_s, n, d_work, d_ipiv, d_info));
    std::printf("Dgetrf of a matrix with a zero column: info %d\n", info_of(d_info));
  }
  // ---- Cholesky
  {
    const std::vector<double> a = spd();
    double* d_a = upload(a);
    std::vector<double> b(n, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) b[i] += a[i + j * n] * kX[j];
    double* d_b = upload(b);
    int lwork = 0;
    SOLVER(cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, d_a, n, &lwork));
    double* d_work = upload(std::vector<double>(lwork > 0 ? lwork : 1));
    SOLVER(cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, n, d_a, n, d_work, lwork, d_info));
    const int info = info_of(d_info);
    const std::vector<double> l = download(d_a, n * n);
    SOLVER(cusolverDnDpotrs(h, CUBLAS_FILL_MODE_LOWER, n, 1, d_a, n, d_b, n, d_info));
    std::printf("Dpotrf: info %d, L(0,0) = %.6f, L(1,0) = %.6f\n", info, l[0], l[1]);
    print_x("Dpotrs", download(d_b, n), 1e-9);
    // Not positive definite: the third diagonal element negative.
    std::vector<double> bad(n * n, 0);
    for (int i = 0; i < n; ++i) bad[i + i * n] = i == 2 ? -1 : 2;
    double* d_bad = upload(bad);
    SOLVER(cusolverDnDpotrf(h, CUBLAS_FILL_MODE_UPPER, n, d_bad, n, d_work, lwork, d_info));
    std::printf("Dpotrf of a matrix that is not positive definite: info %d\n", info_of(d_info));
  }
  // ---- the 64-bit generic API (PyTorch's): Xgetrf/Xgetrs and Xpotrf/Xpotrs in fp64
  {
    cusolverDnParams_t params;
    SOLVER(cusolverDnCreateParams(&params));
    double* d_a = upload(matrix());
    double* d_b = upload(rhs(matrix(), false));
    int64_t* d_ipiv64 = upload(std::vector<int64_t>(n, 0));
    size_t dev_bytes = 0, host_bytes = 0;
    SOLVER(cusolverDnXgetrf_bufferSize(h, params, n, n, CUDA_R_64F, d_a, n, CUDA_R_64F, &dev_bytes, &host_bytes));
    void* d_work = nullptr;
    CUDA(cudaMalloc(&d_work, dev_bytes ? dev_bytes : 1));
    std::vector<char> host_work(host_bytes ? host_bytes : 1);
    SOLVER(cusolverDnXgetrf(h, params, n, n, CUDA_R_64F, d_a, n, d_ipiv64, CUDA_R_64F, d_work, dev_bytes,
                            host_bytes ? host_work.data() : nullptr, host_bytes, d_info));
    const int info = info_of(d_info);
    SOLVER(cusolverDnXgetrs(h, params, CUBLAS_OP_N, n, 1, CUDA_R_64F, d_a, n, d_ipiv64, CUDA_R_64F, d_b, n, d_info));
    std::printf("Xgetrf: info %d; Xgetrs: info %d\n", info, info_of(d_info));
    print_x("Xgetrs", download(d_b, n), 1e-9);

    const std::vector<double> a = spd();
    double* d_p = upload(a);
    std::vector<double> b(n, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) b[i] += a[i + j * n] * kX[j];
    double* d_pb = upload(b);
    SOLVER(cusolverDnXpotrf_bufferSize(h, params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, d_p, n, CUDA_R_64F,
                                       &dev_bytes, &host_bytes));
    void* d_pwork = nullptr;
    CUDA(cudaMalloc(&d_pwork, dev_bytes ? dev_bytes : 1));
    std::vector<char> host_pwork(host_bytes ? host_bytes : 1);
    SOLVER(cusolverDnXpotrf(h, params, CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, d_p, n, CUDA_R_64F, d_pwork, dev_bytes,
                            host_bytes ? host_pwork.data() : nullptr, host_bytes, d_info));
    const int pinfo = info_of(d_info);
    SOLVER(cusolverDnXpotrs(h, params, CUBLAS_FILL_MODE_UPPER, n, 1, CUDA_R_64F, d_p, n, CUDA_R_64F, d_pb, n, d_info));
    std::printf("Xpotrf (upper): info %d; Xpotrs: info %d\n", pinfo, info_of(d_info));
    print_x("Xpotrs", download(d_pb, n), 1e-9);
    SOLVER(cusolverDnDestroyParams(params));
  }
  // ---- symmetric eigenvalues: Q diag(1, 2, 3, 4) Q^T with Q a Householder reflection
  {
    const double v[n] = {1, 1, 1, 1};  // Q = I - 2 v v^T / (v^T v) = I - v v^T / 2
    const double lambda[n] = {1, 2, 3, 4};
    std::vector<double> a(n * n, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) {
          const double qik = (i == k) - v[i] * v[k] / 2, qjk = (j == k) - v[j] * v[k] / 2;
          a[i + j * n] += qik * lambda[k] * qjk;
        }
    double* d_a = upload(a);
    double* d_w = upload(std::vector<double>(n, 0));
    int lwork = 0;
    SOLVER(cusolverDnDsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, d_a, n, d_w, &lwork));
    double* d_work = upload(std::vector<double>(lwork > 0 ? lwork : 1));
    SOLVER(cusolverDnDsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, d_a, n, d_w, d_work, lwork, d_info));
    const std::vector<double> w = download(d_w, n), q = download(d_a, n * n);
    double worst = 0;  // |A q_k - w_k q_k|, whatever each eigenvector's sign
    for (int k = 0; k < n; ++k)
      for (int i = 0; i < n; ++i) {
        double s = -w[k] * q[i + k * n];
        for (int j = 0; j < n; ++j) s += a[i + j * n] * q[j + k * n];
        worst = std::fmax(worst, std::fabs(s));
      }
    std::printf("Dsyevd: info %d, eigenvalues %.6f %.6f %.6f %.6f; eigenvectors within 1e-9: %s\n", info_of(d_info),
                w[0], w[1], w[2], w[3], yes(worst < 1e-9));
  }
  CUDA(cudaStreamSynchronize(stream));
  SOLVER(cusolverDnDestroy(h));
  CUDA(cudaStreamDestroy(stream));
  std::printf("done\n");
  return 0;
}
