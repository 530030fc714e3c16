// cuSPARSE through vmcuda's libcusparse.so.12 (issue 12 points 3 and 7): a conjugate-gradient
// solve as NVIDIA's conjugateGradient sample does it (a CSR matrix, cusparseSpMV for A*p, cuBLAS
// Sdot/Saxpy/Sscal for the rest) on the SPD tridiagonal matrix tridiag(-1, 2, -1) of order 16
// with b = 1, whose solution is x_i = i (17 - i) / 2 (1-based): b is symmetric about the middle,
// so the Krylov space has dimension 8 and CG ends at the 8th iteration in exact arithmetic (the
// residual falls by orders of magnitude there): the count and the rounded solution are the same
// natively, through vmcuda and on the test executor. Then the descriptor calls programs use (SpMatGetSize,
// DnVecGet/GetValues/SetValues, CsrSetPointers, SpMatGetFormat), SpMV with alpha/beta in device
// memory (CUSPARSE_POINTER_MODE_DEVICE), a COO SpMV and a CSR SpMM, each against the CPU.
// Built with nvcc -cudart shared -lcusparse -lcublas (scripts/build-cuda-tests.sh).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "library_check.h"

#define SPARSE(call) CHECK_STATUS(call, cusparseStatus_t, CUSPARSE_STATUS_SUCCESS, cusparseGetErrorName)
#define BLAS(call)                                                   \
  do {                                                               \
    cublasStatus_t s_ = (call);                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                               \
      std::printf("%s failed: cublasStatus_t %d\n", #call, int(s_)); \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

static const char* yes(bool b) { return b ? "yes" : "no"; }

int main() {
  const int n = 16;
  // tridiag(-1, 2, -1) in CSR
  std::vector<int> rows{0}, cols;
  std::vector<float> vals;
  for (int i = 0; i < n; ++i) {
    for (int j = i - 1; j <= i + 1; ++j)
      if (j >= 0 && j < n) {
        cols.push_back(j);
        vals.push_back(j == i ? 2.0f : -1.0f);
      }
    rows.push_back(int(cols.size()));
  }
  const int nnz = int(vals.size());

  cusparseHandle_t sp;
  cublasHandle_t bl;
  SPARSE(cusparseCreate(&sp));
  BLAS(cublasCreate(&bl));
  int version = 0;
  SPARSE(cusparseGetVersion(sp, &version));
  std::printf("cuSPARSE major version %d; status 3 is %s (\"%s\")\n", version / 1000,
              cusparseGetErrorName(CUSPARSE_STATUS_INVALID_VALUE), cusparseGetErrorString(CUSPARSE_STATUS_INVALID_VALUE));
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  SPARSE(cusparseSetStream(sp, stream));
  BLAS(cublasSetStream(bl, stream));

  int* d_rows = upload(rows);
  int* d_cols = upload(cols);
  float* d_vals = upload(vals);
  float *d_x = upload(std::vector<float>(n, 0.0f)), *d_r = upload(std::vector<float>(n, 1.0f)),
        *d_p = upload(std::vector<float>(n, 0.0f)), *d_ap = upload(std::vector<float>(n, 0.0f));

  cusparseSpMatDescr_t A;
  cusparseDnVecDescr_t vp, vap;
  SPARSE(cusparseCreateCsr(&A, n, n, nnz, d_rows, d_cols, d_vals, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  SPARSE(cusparseCreateDnVec(&vp, n, d_p, CUDA_R_32F));
  SPARSE(cusparseCreateDnVec(&vap, n, d_ap, CUDA_R_32F));
  const float one = 1.0f, zero = 0.0f;
  size_t bytes = 0;
  SPARSE(cusparseSpMV_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vap, CUDA_R_32F,
                                 CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
  void* buffer = nullptr;
  CUDA(cudaMalloc(&buffer, bytes ? bytes : 1));

  // CG (NVIDIA's sample's loop): r = b - A x with x = 0, so r = b.
  const float tol = 1e-5f;
  const int max_iter = 100;
  float r1 = 0, r0 = 0, b_norm2 = float(n);
  BLAS(cublasSdot(bl, n, d_r, 1, d_r, 1, &r1));
  int k = 0;
  while (r1 > tol * tol * b_norm2 && k < max_iter) {
    ++k;
    if (k > 1) {
      const float beta = r1 / r0;
      BLAS(cublasSscal(bl, n, &beta, d_p, 1));
      BLAS(cublasSaxpy(bl, n, &one, d_r, 1, d_p, 1));
    } else {
      CUDA(cudaMemcpyAsync(d_p, d_r, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    }
    SPARSE(cusparseSpMV(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vap, CUDA_R_32F,
                        CUSPARSE_SPMV_ALG_DEFAULT, buffer));
    float dot = 0;
    BLAS(cublasSdot(bl, n, d_p, 1, d_ap, 1, &dot));
    const float alpha = r1 / dot, nalpha = -alpha;
    BLAS(cublasSaxpy(bl, n, &alpha, d_p, 1, d_x, 1));
    BLAS(cublasSaxpy(bl, n, &nalpha, d_ap, 1, d_r, 1));
    r0 = r1;
    BLAS(cublasSdot(bl, n, d_r, 1, d_r, 1, &r1));
  }
  std::vector<float> x = download(d_x, n);
  double err = 0;
  for (int i = 1; i <= n; ++i) err = std::fmax(err, std::fabs(x[i - 1] - i * (n + 1 - i) / 2.0));
  std::printf("CG on tridiag(-1, 2, -1) of order %d: %d iterations, relative residual below %g: %s\n", n, k, tol,
              yes(std::sqrt(r1 / b_norm2) < tol));
  std::printf("x[0] = %.4f, x[7] = %.4f, x[15] = %.4f; largest error against the exact solution below 1e-3: %s\n",
              x[0], x[7], x[15], yes(err < 1e-3));

  // Descriptor calls.
  int64_t r = 0, c = 0, z = 0;
  SPARSE(cusparseSpMatGetSize(A, &r, &c, &z));
  cusparseFormat_t format;
  SPARSE(cusparseSpMatGetFormat(A, &format));
  std::printf("SpMatGetSize: %lld x %lld, %lld nonzeros; CSR: %s\n", (long long)r, (long long)c, (long long)z,
              yes(format == CUSPARSE_FORMAT_CSR));
  int64_t size = 0;
  void* values = nullptr;
  cudaDataType type;
  SPARSE(cusparseDnVecGet(vp, &size, &values, &type));
  void* values2 = nullptr;
  SPARSE(cusparseDnVecGetValues(vap, &values2));
  std::printf("DnVecGet: size %lld, the pointer given: %s, CUDA_R_32F: %s; DnVecGetValues: %s\n", (long long)size,
              yes(values == d_p), yes(type == CUDA_R_32F), yes(values2 == d_ap));

  // y = 2 A e0 + 3 y (alpha, beta in device memory), e0 set through DnVecSetValues and the matrix's
  // values swapped for doubled ones through CsrSetPointers (so y = 4 A e0 + 3 y).
  std::vector<float> e0(n, 0.0f), y0(n);
  e0[0] = 1.0f;
  for (int i = 0; i < n; ++i) y0[i] = float(i % 3);
  float* d_e0 = upload(e0);
  float* d_y = upload(y0);
  std::vector<float> vals2(vals);
  for (float& v : vals2) v *= 2;
  float* d_vals2 = upload(vals2);
  float* d_ab = upload(std::vector<float>{2.0f, 3.0f});
  SPARSE(cusparseDnVecSetValues(vp, d_e0));
  SPARSE(cusparseDnVecSetValues(vap, d_y));
  SPARSE(cusparseCsrSetPointers(A, d_rows, d_cols, d_vals2));
  SPARSE(cusparseSetPointerMode(sp, CUSPARSE_POINTER_MODE_DEVICE));
  cusparsePointerMode_t mode;
  SPARSE(cusparseGetPointerMode(sp, &mode));
  SPARSE(cusparseSpMV(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, d_ab, A, vp, d_ab + 1, vap, CUDA_R_32F,
                      CUSPARSE_SPMV_ALG_DEFAULT, buffer));
  SPARSE(cusparseSetPointerMode(sp, CUSPARSE_POINTER_MODE_HOST));
  std::vector<float> y = download(d_y, n);
  bool good = true;
  for (int i = 0; i < n; ++i) good &= y[i] == (i == 0 ? 8.0f : i == 1 ? -4.0f : 0.0f) + 3.0f * y0[i];
  std::printf("SpMV with device alpha and beta (mode %d): y[0] = %.1f, y[1] = %.1f, y[2] = %.1f; all right: %s\n",
              int(mode), y[0], y[1], y[2], yes(good));

  // COO: A^T x with x = (1..n): a transposed SpMV of a 1-based COO matrix (the same tridiagonal).
  std::vector<int> coo_r, coo_c;
  for (int i = 0; i < n; ++i)
    for (int j = rows[i]; j < rows[i + 1]; ++j) coo_r.push_back(i + 1), coo_c.push_back(cols[j] + 1);
  std::vector<float> ramp(n);
  for (int i = 0; i < n; ++i) ramp[i] = float(i + 1);
  int *d_cr = upload(coo_r), *d_cc = upload(coo_c);
  float *d_ramp = upload(ramp), *d_out = upload(std::vector<float>(n, 0.0f));
  cusparseSpMatDescr_t B;
  cusparseDnVecDescr_t vr, vo;
  SPARSE(cusparseCreateCoo(&B, n, n, nnz, d_cr, d_cc, d_vals, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ONE, CUDA_R_32F));
  SPARSE(cusparseCreateDnVec(&vr, n, d_ramp, CUDA_R_32F));
  SPARSE(cusparseCreateDnVec(&vo, n, d_out, CUDA_R_32F));
  size_t coo_bytes = 0;
  SPARSE(cusparseSpMV_bufferSize(sp, CUSPARSE_OPERATION_TRANSPOSE, &one, B, vr, &zero, vo, CUDA_R_32F,
                                 CUSPARSE_SPMV_ALG_DEFAULT, &coo_bytes));
  void* coo_buffer = nullptr;
  CUDA(cudaMalloc(&coo_buffer, coo_bytes ? coo_bytes : 1));
  SPARSE(cusparseSpMV(sp, CUSPARSE_OPERATION_TRANSPOSE, &one, B, vr, &zero, vo, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT,
                      coo_buffer));
  std::vector<float> o = download(d_out, n);
  std::printf("COO A^T (1..%d): [0] = %.1f, [7] = %.1f, [15] = %.1f (the ends 0 and %d, the rest 0)\n", n, o[0], o[7],
              o[15], n + 1);

  // SpMM: C = A * Bd (Bd: n x 3, column-major, column j = (j+1) * (1..n)), C's columns are (j+1) * A (1..n).
  const int m3 = 3;
  std::vector<float> bd(n * m3);
  for (int j = 0; j < m3; ++j)
    for (int i = 0; i < n; ++i) bd[i + j * n] = float((j + 1) * (i + 1));
  float *d_bd = upload(bd), *d_c = upload(std::vector<float>(n * m3, 0.0f));
  cusparseDnMatDescr_t mb, mc;
  SPARSE(cusparseCreateDnMat(&mb, n, m3, n, d_bd, CUDA_R_32F, CUSPARSE_ORDER_COL));
  SPARSE(cusparseCreateDnMat(&mc, n, m3, n, d_c, CUDA_R_32F, CUSPARSE_ORDER_COL));
  SPARSE(cusparseCsrSetPointers(A, d_rows, d_cols, d_vals));
  size_t mm_bytes = 0;
  SPARSE(cusparseSpMM_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, mb,
                                 &zero, mc, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &mm_bytes));
  void* mm_buffer = nullptr;
  CUDA(cudaMalloc(&mm_buffer, mm_bytes ? mm_bytes : 1));
  SPARSE(cusparseSpMM(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, mb, &zero, mc,
                      CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, mm_buffer));
  std::vector<float> cm = download(d_c, n * m3);
  bool mm_good = true;
  for (int j = 0; j < m3; ++j)
    for (int i = 0; i < n; ++i) mm_good &= cm[i + j * n] == (i == 0 ? 0.0f : i == n - 1 ? float((j + 1) * (n + 1)) : 0.0f);
  std::printf("SpMM: C[15][2] = %.1f; every element right: %s\n", cm[15 + 2 * n], yes(mm_good));

  SPARSE(cusparseDestroySpMat(B));
  CUDA(cudaStreamSynchronize(stream));
  SPARSE(cusparseDestroyDnMat(mb));
  SPARSE(cusparseDestroyDnMat(mc));
  SPARSE(cusparseDestroyDnVec(vr));
  SPARSE(cusparseDestroyDnVec(vo));
  SPARSE(cusparseDestroyDnVec(vp));
  SPARSE(cusparseDestroyDnVec(vap));
  SPARSE(cusparseDestroySpMat(A));
  SPARSE(cusparseDestroy(sp));
  BLAS(cublasDestroy(bl));
  CUDA(cudaStreamDestroy(stream));
  std::printf("done\n");
  return 0;
}
