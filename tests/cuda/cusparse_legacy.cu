// cuSPARSE's legacy API through vmcuda's libcusparse.so.12 (issue 12 point 3), as NVIDIA's
// conjugateGradientPrecond and cuSolverSp samples and PyTorch/CuPy's sparse paths use it, each
// checked against the CPU:
//  - cusparseMatDescr_t: its defaults, setters and getters, a value it refuses;
//  - csrilu02: ILU(0) of the 5-point Laplacian on a 6x6 grid (the factor against the CPU's),
//    then ILU(0)-preconditioned CG with it (SpMV, two SpSV solves), as conjugateGradientPrecond;
//  - zero pivots: a structural one (a row without its diagonal, found by the analysis), a
//    numerical one (the factorization of [[1,1],[1,1]]), its position in host and in device
//    memory (the pointer mode), and the numeric boost that replaces the zero diagonal;
//  - csric02: IC(0) of the same Laplacian (its lower triangle against the CPU's);
//  - gtsv2 (fp64, two right-hand sides), gtsv2_nopivot (fp32), gtsv2StridedBatch (fp64, 3
//    systems): tridiagonal solves against the CPU's;
//  - COO sorts by row and by column with a permutation (cusparseCreateIdentityPermutation),
//    coo2csr and csr2coo, csrsort, csr2cscEx2;
//  - the calls of every value type: csrilu02 (Z) and csric02 (C, Hermitian) with complex values,
//    bsrilu02 (D, Z; blocks by row and by column), cscsort, Dnnz/Cnnz (the total in host and
//    device memory), csrgeam2 (D, Z), gtsvInterleavedBatch (S, Z), gpsvInterleavedBatch (D),
//    gtsv2 (Z), csrcolor (D: a valid coloring; the number of colors is the library's own).
// Prints pass/fail and a few rounded values: the same natively, through vmcuda and on the test
// executor (tests/executor/fake_cusparse.cc). Built with nvcc -cudart shared -lcusparse -lcublas
// (scripts/build-cuda-tests.sh).
// The legacy API is deprecated (still declared, still in CUDA 13's library): quiet about it.
#define DISABLE_CUSPARSE_DEPRECATED
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "library_check.h"

#define SPARSE(call) CHECK_STATUS(call, cusparseStatus_t, CUSPARSE_STATUS_SUCCESS, cusparseGetErrorName)

static const char* yes(bool b) { return b ? "yes" : "no"; }

static void* device_bytes(size_t n) {
  void* d = nullptr;
  CUDA(cudaMalloc(&d, n ? n : 8));
  return d;
}

struct Csr {
  int n = 0;
  std::vector<int> off{0}, col;
  std::vector<double> val;
  int nnz() const { return int(col.size()); }
  int find(int r, int c) const {
    for (int k = off[r]; k < off[r + 1]; ++k)
      if (col[k] == c) return k;
    return -1;
  }
};

// The 5-point Laplacian on a g x g grid (4 on the diagonal, -1 to each neighbour): SPD.
static Csr laplacian(int g) {
  Csr a;
  a.n = g * g;
  for (int i = 0; i < g; ++i)
    for (int j = 0; j < g; ++j) {
      const int r = i * g + j;
      const int cs[5] = {r - g, r - 1, r, r + 1, r + g};
      const bool in[5] = {i > 0, j > 0, true, j + 1 < g, i + 1 < g};
      for (int k = 0; k < 5; ++k)
        if (in[k]) a.col.push_back(cs[k]), a.val.push_back(k == 2 ? 4.0 : -1.0);
      a.off.push_back(a.nnz());
    }
  return a;
}

// ILU(0) on the CPU (IKJ, in A's pattern; L unit lower below the diagonal, U on and above).
static std::vector<double> ilu0(const Csr& a) {
  std::vector<double> x = a.val;
  for (int i = 0; i < a.n; ++i)
    for (int p = a.off[i]; p < a.off[i + 1] && a.col[p] < i; ++p) {
      const int k = a.col[p];
      x[p] /= x[a.find(k, k)];
      for (int q = p + 1; q < a.off[i + 1]; ++q) {
        const int kj = a.find(k, a.col[q]);
        if (kj >= 0) x[q] -= x[p] * x[kj];
      }
    }
  return x;
}

// IC(0) on the CPU: L in the lower triangle of A's pattern (L L^T = A there).
static std::vector<double> ic0(const Csr& a) {
  std::vector<double> x = a.val;
  for (int i = 0; i < a.n; ++i) {
    const int di = a.find(i, i);
    for (int p = a.off[i]; p < di; ++p) {
      const int k = a.col[p];
      double sum = x[p];
      for (int q = a.off[i]; q < p; ++q) {
        const int kj = a.find(k, a.col[q]);
        if (kj >= 0) sum -= x[q] * x[kj];
      }
      x[p] = sum / x[a.find(k, k)];
    }
    double d = x[di];
    for (int q = a.off[i]; q < di; ++q) d -= x[q] * x[q];
    x[di] = std::sqrt(d);
  }
  return x;
}

static double max_diff(const std::vector<double>& a, const std::vector<double>& b, const Csr* lower_of = nullptr) {
  double m = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (lower_of) {
      int r = 0;
      while (lower_of->off[r + 1] <= int(k)) ++r;
      if (lower_of->col[k] > r) continue;
    }
    m = std::max(m, std::fabs(a[k] - b[k]));
  }
  return m;
}

static bool descriptor() {
  cusparseMatDescr_t d;
  SPARSE(cusparseCreateMatDescr(&d));
  const bool defaults = cusparseGetMatType(d) == CUSPARSE_MATRIX_TYPE_GENERAL &&
                        cusparseGetMatFillMode(d) == CUSPARSE_FILL_MODE_LOWER &&
                        cusparseGetMatDiagType(d) == CUSPARSE_DIAG_TYPE_NON_UNIT &&
                        cusparseGetMatIndexBase(d) == CUSPARSE_INDEX_BASE_ZERO;
  SPARSE(cusparseSetMatType(d, CUSPARSE_MATRIX_TYPE_TRIANGULAR));
  SPARSE(cusparseSetMatFillMode(d, CUSPARSE_FILL_MODE_UPPER));
  SPARSE(cusparseSetMatDiagType(d, CUSPARSE_DIAG_TYPE_UNIT));
  SPARSE(cusparseSetMatIndexBase(d, CUSPARSE_INDEX_BASE_ONE));
  const bool set = cusparseGetMatType(d) == CUSPARSE_MATRIX_TYPE_TRIANGULAR &&
                   cusparseGetMatFillMode(d) == CUSPARSE_FILL_MODE_UPPER &&
                   cusparseGetMatDiagType(d) == CUSPARSE_DIAG_TYPE_UNIT &&
                   cusparseGetMatIndexBase(d) == CUSPARSE_INDEX_BASE_ONE;
  const cusparseStatus_t bad = cusparseSetMatIndexBase(d, static_cast<cusparseIndexBase_t>(7));
  SPARSE(cusparseDestroyMatDescr(d));
  std::printf("matrix descriptor: defaults %s, set and read back %s, index base 7: %s\n", yes(defaults), yes(set),
              cusparseGetErrorName(bad));
  return defaults && set && bad == CUSPARSE_STATUS_INVALID_VALUE;
}

// y = A x on the CPU.
static std::vector<double> multiply(const Csr& a, const std::vector<double>& x) {
  std::vector<double> y(a.n, 0.0);
  for (int r = 0; r < a.n; ++r)
    for (int k = a.off[r]; k < a.off[r + 1]; ++k) y[r] += a.val[k] * x[a.col[k]];
  return y;
}
static double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ILU(0) of the Laplacian, checked, then ILU(0)-preconditioned CG as conjugateGradientPrecond:
// A p by SpMV, the preconditioner by two SpSV solves (L unit lower, U upper) on the factor.
static bool ilu_pcg(cusparseHandle_t h) {
  const Csr a = laplacian(6);
  const int n = a.n, nnz = a.nnz();
  int *d_off = upload(a.off), *d_col = upload(a.col);
  double *d_val = upload(a.val), *d_ilu = upload(a.val);
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  csrilu02Info_t info;
  SPARSE(cusparseCreateCsrilu02Info(&info));
  int bytes = 0;
  SPARSE(cusparseDcsrilu02_bufferSize(h, n, nnz, descr, d_ilu, d_off, d_col, info, &bytes));
  void* buffer = device_bytes(bytes);
  SPARSE(cusparseDcsrilu02_analysis(h, n, nnz, descr, d_ilu, d_off, d_col, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL,
                                    buffer));
  int position = -2;
  const cusparseStatus_t analysed = cusparseXcsrilu02_zeroPivot(h, info, &position);
  std::printf("csrilu02 analysis: %s, zero pivot %d\n", cusparseGetErrorName(analysed), position);
  SPARSE(cusparseDcsrilu02(h, n, nnz, descr, d_ilu, d_off, d_col, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buffer));
  position = -2;
  const cusparseStatus_t factored = cusparseXcsrilu02_zeroPivot(h, info, &position);
  const std::vector<double> ilu = download(d_ilu, nnz);
  const double diff = max_diff(ilu, ilu0(a));
  std::printf("csrilu02 of the 6x6-grid Laplacian: %s, zero pivot %d, matches the CPU's ILU(0): %s, U(35,35) = %.6f\n",
              cusparseGetErrorName(factored), position, yes(diff < 1e-12), ilu[nnz - 1]);

  // PCG: b = A x_true.
  std::vector<double> x_true(n), x(n, 0.0);
  for (int i = 0; i < n; ++i) x_true[i] = (i % 7) - 3.0;
  const std::vector<double> b = multiply(a, x_true);
  std::vector<double> r = b;
  double *d_p = upload(std::vector<double>(n, 0.0)), *d_q = upload(std::vector<double>(n, 0.0)),
         *d_r = upload(r), *d_t = upload(std::vector<double>(n, 0.0)), *d_z = upload(std::vector<double>(n, 0.0));
  cusparseSpMatDescr_t matA, matL, matU;
  SPARSE(cusparseCreateCsr(&matA, n, n, nnz, d_off, d_col, d_val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  SPARSE(cusparseCreateCsr(&matL, n, n, nnz, d_off, d_col, d_ilu, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  SPARSE(cusparseCreateCsr(&matU, n, n, nnz, d_off, d_col, d_ilu, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  cusparseFillMode_t lower = CUSPARSE_FILL_MODE_LOWER, upper = CUSPARSE_FILL_MODE_UPPER;
  cusparseDiagType_t unit = CUSPARSE_DIAG_TYPE_UNIT, non_unit = CUSPARSE_DIAG_TYPE_NON_UNIT;
  SPARSE(cusparseSpMatSetAttribute(matL, CUSPARSE_SPMAT_FILL_MODE, &lower, sizeof lower));
  SPARSE(cusparseSpMatSetAttribute(matL, CUSPARSE_SPMAT_DIAG_TYPE, &unit, sizeof unit));
  SPARSE(cusparseSpMatSetAttribute(matU, CUSPARSE_SPMAT_FILL_MODE, &upper, sizeof upper));
  SPARSE(cusparseSpMatSetAttribute(matU, CUSPARSE_SPMAT_DIAG_TYPE, &non_unit, sizeof non_unit));
  cusparseDnVecDescr_t vp, vq, vr, vt, vz;
  SPARSE(cusparseCreateDnVec(&vp, n, d_p, CUDA_R_64F));
  SPARSE(cusparseCreateDnVec(&vq, n, d_q, CUDA_R_64F));
  SPARSE(cusparseCreateDnVec(&vr, n, d_r, CUDA_R_64F));
  SPARSE(cusparseCreateDnVec(&vt, n, d_t, CUDA_R_64F));
  SPARSE(cusparseCreateDnVec(&vz, n, d_z, CUDA_R_64F));
  const double one = 1.0, zero = 0.0;
  cusparseSpSVDescr_t svL, svU;
  SPARSE(cusparseSpSV_createDescr(&svL));
  SPARSE(cusparseSpSV_createDescr(&svU));
  size_t sizeL = 0, sizeU = 0, sizeMV = 0;
  SPARSE(cusparseSpSV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matL, vr, vt, CUDA_R_64F,
                                 CUSPARSE_SPSV_ALG_DEFAULT, svL, &sizeL));
  SPARSE(cusparseSpSV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matU, vt, vz, CUDA_R_64F,
                                 CUSPARSE_SPSV_ALG_DEFAULT, svU, &sizeU));
  SPARSE(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matA, vp, &zero, vq, CUDA_R_64F,
                                 CUSPARSE_SPMV_ALG_DEFAULT, &sizeMV));
  void *bufL = device_bytes(sizeL), *bufU = device_bytes(sizeU), *bufMV = device_bytes(sizeMV);
  SPARSE(cusparseSpSV_analysis(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matL, vr, vt, CUDA_R_64F,
                               CUSPARSE_SPSV_ALG_DEFAULT, svL, bufL));
  SPARSE(cusparseSpSV_analysis(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matU, vt, vz, CUDA_R_64F,
                               CUSPARSE_SPSV_ALG_DEFAULT, svU, bufU));
  // z = M^-1 r: L t = r, U z = t.
  auto precondition = [&](const std::vector<double>& res) {
    CUDA(cudaMemcpy(d_r, res.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    SPARSE(cusparseSpSV_solve(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matL, vr, vt, CUDA_R_64F,
                              CUSPARSE_SPSV_ALG_DEFAULT, svL));
    SPARSE(cusparseSpSV_solve(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matU, vt, vz, CUDA_R_64F,
                              CUSPARSE_SPSV_ALG_DEFAULT, svU));
    return download(d_z, n);
  };
  std::vector<double> z = precondition(r), p = z;
  double rz = dot(r, z);
  const double bnorm = std::sqrt(dot(b, b));
  bool converged = false;
  for (int it = 0; it < 200 && !converged; ++it) {
    CUDA(cudaMemcpy(d_p, p.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    SPARSE(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, matA, vp, &zero, vq, CUDA_R_64F,
                        CUSPARSE_SPMV_ALG_DEFAULT, bufMV));
    const std::vector<double> q = download(d_q, n);
    const double alpha = rz / dot(p, q);
    for (int i = 0; i < n; ++i) x[i] += alpha * p[i], r[i] -= alpha * q[i];
    converged = std::sqrt(dot(r, r)) < 1e-12 * bnorm;
    if (converged) break;
    z = precondition(r);
    const double rz_next = dot(r, z), beta = rz_next / rz;
    rz = rz_next;
    for (int i = 0; i < n; ++i) p[i] = z[i] + beta * p[i];
  }
  double err = 0;
  for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(x[i] - x_true[i]));
  std::printf("ILU(0)-preconditioned CG (n = %d): converged %s, solution within 1e-9 of the true one %s\n", n,
              yes(converged), yes(err < 1e-9));

  SPARSE(cusparseSpSV_destroyDescr(svL));
  SPARSE(cusparseSpSV_destroyDescr(svU));
  for (cusparseDnVecDescr_t v : {vp, vq, vr, vt, vz}) SPARSE(cusparseDestroyDnVec(v));
  for (cusparseSpMatDescr_t m : {matA, matL, matU}) SPARSE(cusparseDestroySpMat(m));
  SPARSE(cusparseDestroyCsrilu02Info(info));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* d : {(void*)d_off, (void*)d_col, (void*)d_val, (void*)d_ilu, (void*)d_p, (void*)d_q, (void*)d_r,
                  (void*)d_t, (void*)d_z, buffer, bufL, bufU, bufMV})
    CUDA(cudaFree(d));
  return analysed == CUSPARSE_STATUS_SUCCESS && factored == CUSPARSE_STATUS_SUCCESS && diff < 1e-12 && converged &&
         err < 1e-9;
}

// Zero pivots: a structural one (row 2 of a 4x4 tridiagonal matrix without its diagonal), found
// by the analysis; a numerical one, U(1,1) = 0 in [[1,1],[1,1]], found by the factorization, its
// position in host memory and in device memory; then the numeric boost replacing it.
static bool zero_pivots(cusparseHandle_t h) {
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  bool ok = true;
  {
    Csr a;
    a.n = 4;
    for (int r = 0; r < 4; ++r) {
      for (int c = r - 1; c <= r + 1; ++c)
        if (c >= 0 && c < 4 && !(r == 2 && c == 2)) a.col.push_back(c), a.val.push_back(c == r ? 3.0 : 1.0);
      a.off.push_back(a.nnz());
    }
    int *d_off = upload(a.off), *d_col = upload(a.col);
    double* d_val = upload(a.val);
    csrilu02Info_t info;
    SPARSE(cusparseCreateCsrilu02Info(&info));
    int bytes = 0;
    SPARSE(cusparseDcsrilu02_bufferSize(h, a.n, a.nnz(), descr, d_val, d_off, d_col, info, &bytes));
    void* buffer = device_bytes(bytes);
    SPARSE(cusparseDcsrilu02_analysis(h, a.n, a.nnz(), descr, d_val, d_off, d_col, info,
                                      CUSPARSE_SOLVE_POLICY_NO_LEVEL, buffer));
    int position = -2;
    const cusparseStatus_t s = cusparseXcsrilu02_zeroPivot(h, info, &position);
    std::printf("structural zero pivot: %s at %d\n", cusparseGetErrorName(s), position);
    ok = ok && s == CUSPARSE_STATUS_ZERO_PIVOT && position == 2;
    SPARSE(cusparseDestroyCsrilu02Info(info));
    for (void* d : {(void*)d_off, (void*)d_col, (void*)d_val, buffer}) CUDA(cudaFree(d));
  }
  const std::vector<int> off{0, 2, 4}, col{0, 1, 0, 1};
  const std::vector<double> ones(4, 1.0);
  int *d_off = upload(off), *d_col = upload(col), *d_position = upload(std::vector<int>{-2});
  double* d_val = upload(ones);
  for (int boost = 0; boost < 2; ++boost) {
    CUDA(cudaMemcpy(d_val, ones.data(), 4 * sizeof(double), cudaMemcpyHostToDevice));
    csrilu02Info_t info;
    SPARSE(cusparseCreateCsrilu02Info(&info));
    int bytes = 0;
    SPARSE(cusparseDcsrilu02_bufferSize(h, 2, 4, descr, d_val, d_off, d_col, info, &bytes));
    void* buffer = device_bytes(bytes);
    SPARSE(cusparseDcsrilu02_analysis(h, 2, 4, descr, d_val, d_off, d_col, info, CUSPARSE_SOLVE_POLICY_NO_LEVEL,
                                      buffer));
    double tol = 1e-8, boost_val = 0.5;
    if (boost) SPARSE(cusparseDcsrilu02_numericBoost(h, info, 1, &tol, &boost_val));
    SPARSE(cusparseDcsrilu02(h, 2, 4, descr, d_val, d_off, d_col, info, CUSPARSE_SOLVE_POLICY_NO_LEVEL, buffer));
    int position = -2;
    const cusparseStatus_t host = cusparseXcsrilu02_zeroPivot(h, info, &position);
    SPARSE(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_DEVICE));
    const cusparseStatus_t device = cusparseXcsrilu02_zeroPivot(h, info, d_position);
    SPARSE(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST));
    const int device_position = download(d_position, 1)[0];
    const std::vector<double> lu = download(d_val, 4);
    std::printf("ILU(0) of [[1,1],[1,1]]%s: %s at %d (host), %s at %d (device); U(1,1) = %g\n",
                boost ? " with the numeric boost (tol 1e-8, 0.5)" : "", cusparseGetErrorName(host), position,
                cusparseGetErrorName(device), device_position, lu[3]);
    const cusparseStatus_t want = boost ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_ZERO_PIVOT;
    ok = ok && host == want && device == want && position == (boost ? -1 : 1) && device_position == position &&
         lu[3] == (boost ? 0.5 : 0.0);
    SPARSE(cusparseDestroyCsrilu02Info(info));
    CUDA(cudaFree(buffer));
  }
  for (void* d : {(void*)d_off, (void*)d_col, (void*)d_val, (void*)d_position}) CUDA(cudaFree(d));
  SPARSE(cusparseDestroyMatDescr(descr));
  return ok;
}

static bool ic(cusparseHandle_t h) {
  const Csr a = laplacian(6);
  const int n = a.n, nnz = a.nnz();
  int *d_off = upload(a.off), *d_col = upload(a.col);
  double* d_val = upload(a.val);
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  csric02Info_t info;
  SPARSE(cusparseCreateCsric02Info(&info));
  int bytes = 0;
  SPARSE(cusparseDcsric02_bufferSize(h, n, nnz, descr, d_val, d_off, d_col, info, &bytes));
  void* buffer = device_bytes(bytes);
  SPARSE(cusparseDcsric02_analysis(h, n, nnz, descr, d_val, d_off, d_col, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL,
                                   buffer));
  SPARSE(cusparseDcsric02(h, n, nnz, descr, d_val, d_off, d_col, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buffer));
  int position = -2;
  const cusparseStatus_t s = cusparseXcsric02_zeroPivot(h, info, &position);
  const std::vector<double> l = download(d_val, nnz);
  const double diff = max_diff(l, ic0(a), &a);
  std::printf("csric02 of the Laplacian: %s, zero pivot %d, lower triangle matches the CPU's IC(0): %s, L(0,0) = %.6f\n",
              cusparseGetErrorName(s), position, yes(diff < 1e-12), l[0]);
  SPARSE(cusparseDestroyCsric02Info(info));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* d : {(void*)d_off, (void*)d_col, (void*)d_val, buffer}) CUDA(cudaFree(d));
  return s == CUSPARSE_STATUS_SUCCESS && position == -1 && diff < 1e-12;
}

// A tridiagonal solve on the CPU: dl (dl[0] = 0), d, du (du[m-1] = 0) from `first`, the
// right-hand side from b_first (default: first).
template <class T>
static std::vector<double> thomas(const std::vector<T>& dl, const std::vector<T>& d, const std::vector<T>& du,
                                  const std::vector<T>& b, int first, int m, int b_first = -1) {
  if (b_first < 0) b_first = first;
  std::vector<double> c(m), x(m);
  for (int i = 0; i < m; ++i) {
    const double a = i ? double(dl[first + i]) : 0.0, den = double(d[first + i]) - (i ? a * c[i - 1] : 0.0);
    c[i] = double(du[first + i]) / den;
    x[i] = (double(b[b_first + i]) - (i ? a * x[i - 1] : 0.0)) / den;
  }
  for (int i = m - 2; i >= 0; --i) x[i] -= c[i] * x[i + 1];
  return x;
}
template <class T>
static void tridiagonal(int total, std::vector<T>* dl, std::vector<T>* d, std::vector<T>* du, std::vector<T>* b, int m) {
  for (int i = 0; i < total; ++i) {
    dl->push_back(i % m ? T(-1.0 - 0.01 * i) : T(0));
    d->push_back(T(4.0 + 0.1 * (i % 5)));
    du->push_back(i % m != m - 1 ? T(-1.0 + 0.02 * (i % 3)) : T(0));
    b->push_back(T(1.0 + (i % 4)));
  }
}
template <class T>
static double worst(const std::vector<T>& got, const std::vector<double>& want, int first) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) e = std::max(e, std::fabs(double(got[first + i]) - want[i]));
  return e;
}

static bool tridiagonal_solves(cusparseHandle_t h) {
  const int m = 16;
  bool ok = true;
  {  // gtsv2, fp64, two right-hand sides (ldb = m); the diagonals are those of the first column
    std::vector<double> dl, d, du, b;
    tridiagonal(2 * m, &dl, &d, &du, &b, m);
    double *d_dl = upload(dl), *d_d = upload(d), *d_du = upload(du), *d_b = upload(b);
    size_t bytes = 0;
    SPARSE(cusparseDgtsv2_bufferSizeExt(h, m, 2, d_dl, d_d, d_du, d_b, m, &bytes));
    void* buffer = device_bytes(bytes);
    SPARSE(cusparseDgtsv2(h, m, 2, d_dl, d_d, d_du, d_b, m, buffer));
    const std::vector<double> x = download(d_b, 2 * m);
    const double e = std::max(worst(x, thomas(dl, d, du, b, 0, m), 0), worst(x, thomas(dl, d, du, b, 0, m, m), m));
    std::printf("gtsv2 (fp64, m = %d, 2 right-hand sides): matches the CPU %s, x[0] = %.6f\n", m, yes(e < 1e-12), x[0]);
    ok = ok && e < 1e-12;
    for (void* p : {(void*)d_dl, (void*)d_d, (void*)d_du, (void*)d_b, buffer}) CUDA(cudaFree(p));
  }
  {  // gtsv2_nopivot, fp32, one right-hand side
    std::vector<float> dl, d, du, b;
    tridiagonal(m, &dl, &d, &du, &b, m);
    float *d_dl = upload(dl), *d_d = upload(d), *d_du = upload(du), *d_b = upload(b);
    size_t bytes = 0;
    SPARSE(cusparseSgtsv2_nopivot_bufferSizeExt(h, m, 1, d_dl, d_d, d_du, d_b, m, &bytes));
    void* buffer = device_bytes(bytes);
    SPARSE(cusparseSgtsv2_nopivot(h, m, 1, d_dl, d_d, d_du, d_b, m, buffer));
    const std::vector<float> x = download(d_b, m);
    const double e = worst(x, thomas(dl, d, du, b, 0, m), 0);
    std::printf("gtsv2_nopivot (fp32, m = %d): matches the CPU %s, x[0] = %.4f\n", m, yes(e < 1e-5), x[0]);
    ok = ok && e < 1e-5;
    for (void* p : {(void*)d_dl, (void*)d_d, (void*)d_du, (void*)d_b, buffer}) CUDA(cudaFree(p));
  }
  {  // gtsv2StridedBatch, fp64, 3 systems of m, stride m + 2
    const int batch = 3, stride = m + 2;
    std::vector<double> dl, d, du, b;
    tridiagonal(batch * stride, &dl, &d, &du, &b, stride);
    double *d_dl = upload(dl), *d_d = upload(d), *d_du = upload(du), *d_b = upload(b);
    // each system is the first m of its stride: its last row's du must be 0
    std::vector<double> du_sys = du;
    for (int s = 0; s < batch; ++s) du_sys[s * stride + m - 1] = 0;
    CUDA(cudaMemcpy(d_du, du_sys.data(), du_sys.size() * sizeof(double), cudaMemcpyHostToDevice));
    size_t bytes = 0;
    SPARSE(cusparseDgtsv2StridedBatch_bufferSizeExt(h, m, d_dl, d_d, d_du, d_b, batch, stride, &bytes));
    void* buffer = device_bytes(bytes);
    SPARSE(cusparseDgtsv2StridedBatch(h, m, d_dl, d_d, d_du, d_b, batch, stride, buffer));
    const std::vector<double> x = download(d_b, b.size());
    double e = 0;
    for (int s = 0; s < batch; ++s) e = std::max(e, worst(x, thomas(dl, d, du_sys, b, s * stride, m), s * stride));
    std::printf("gtsv2StridedBatch (fp64, 3 systems of %d): matches the CPU %s, last x = %.6f\n", m, yes(e < 1e-12),
                x[2 * stride + m - 1]);
    ok = ok && e < 1e-12;
    for (void* p : {(void*)d_dl, (void*)d_d, (void*)d_du, (void*)d_b, buffer}) CUDA(cudaFree(p));
  }
  return ok;
}

// The entries (row[i], col[i]) after a sort are the input's at P[i], and ordered by `major`.
static bool sorted_as(const std::vector<int>& row0, const std::vector<int>& col0, const std::vector<int>& row,
                      const std::vector<int>& col, const std::vector<int>& perm, bool by_row) {
  std::vector<bool> seen(perm.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    const int p = perm[i];
    if (p < 0 || p >= int(perm.size()) || seen[p] || row[i] != row0[p] || col[i] != col0[p]) return false;
    seen[p] = true;
    if (i && (by_row ? row[i] < row[i - 1] : col[i] < col[i - 1])) return false;
  }
  return true;
}

static bool sorts(cusparseHandle_t h) {
  const int m = 5, n = 6;
  const std::vector<int> row0{3, 0, 4, 1, 0, 3, 2, 4, 1, 0, 2, 3}, col0{1, 5, 0, 2, 1, 4, 3, 5, 0, 3, 2, 0};
  const int nnz = int(row0.size());
  bool ok = true;
  int *d_row = upload(row0), *d_col = upload(col0), *d_perm = upload(std::vector<int>(nnz, -1));
  size_t bytes = 0;
  SPARSE(cusparseXcoosort_bufferSizeExt(h, m, n, nnz, d_row, d_col, &bytes));
  void* buffer = device_bytes(bytes);
  for (int by_row = 1; by_row >= 0; --by_row) {
    CUDA(cudaMemcpy(d_row, row0.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(d_col, col0.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
    SPARSE(cusparseCreateIdentityPermutation(h, nnz, d_perm));
    if (by_row) SPARSE(cusparseXcoosortByRow(h, m, n, nnz, d_row, d_col, d_perm, buffer));
    else SPARSE(cusparseXcoosortByColumn(h, m, n, nnz, d_row, d_col, d_perm, buffer));
    const bool good = sorted_as(row0, col0, download(d_row, nnz), download(d_col, nnz), download(d_perm, nnz), by_row);
    std::printf("coosort by %s (%d entries) with its permutation: %s\n", by_row ? "row" : "column", nnz, yes(good));
    ok = ok && good;
  }
  // coo2csr of the rows sorted, csr2coo back (one-based both ways)
  std::vector<int> rows1 = row0;
  std::sort(rows1.begin(), rows1.end());
  for (int& r : rows1) r += 1;
  std::vector<int> want_off(m + 1, 0);
  for (int r : rows1) ++want_off[r];
  for (int i = 0; i < m; ++i) want_off[i + 1] += want_off[i];
  for (int& o : want_off) o += 1;
  int *d_rows1 = upload(rows1), *d_off = upload(std::vector<int>(m + 1, 0)), *d_back = upload(std::vector<int>(nnz, 0));
  SPARSE(cusparseXcoo2csr(h, d_rows1, nnz, m, d_off, CUSPARSE_INDEX_BASE_ONE));
  SPARSE(cusparseXcsr2coo(h, d_off, nnz, m, d_back, CUSPARSE_INDEX_BASE_ONE));
  const bool conv = download(d_off, m + 1) == want_off && download(d_back, nnz) == rows1;
  std::printf("coo2csr and csr2coo (one-based): match the CPU %s\n", yes(conv));
  ok = ok && conv;

  // csrsort: the CSR of the same entries, columns unsorted within rows (the input's order)
  std::vector<int> off(m + 1, 0), cols, order;
  for (int r = 0; r < m; ++r) {
    for (int k = 0; k < nnz; ++k)
      if (row0[k] == r) cols.push_back(col0[k]), order.push_back(k);
    off[r + 1] = int(cols.size());
  }
  int *d_coff = upload(off), *d_ccol = upload(cols);
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  size_t csr_bytes = 0;
  SPARSE(cusparseXcsrsort_bufferSizeExt(h, m, n, nnz, d_coff, d_ccol, &csr_bytes));
  void* csr_buffer = device_bytes(csr_bytes);
  SPARSE(cusparseCreateIdentityPermutation(h, nnz, d_perm));
  SPARSE(cusparseXcsrsort(h, m, n, nnz, descr, d_coff, d_ccol, d_perm, csr_buffer));
  const std::vector<int> sorted = download(d_ccol, nnz), perm = download(d_perm, nnz);
  bool csr_ok = true;
  for (int r = 0; r < m; ++r)
    for (int k = off[r]; k < off[r + 1]; ++k)
      csr_ok = csr_ok && perm[k] >= off[r] && perm[k] < off[r + 1] && sorted[k] == cols[perm[k]] &&
               (k == off[r] || sorted[k] > sorted[k - 1]);
  std::printf("csrsort with its permutation: %s\n", yes(csr_ok));
  ok = ok && csr_ok;

  // csr2cscEx2 of the sorted CSR with values 1..nnz
  std::vector<float> vals(nnz);
  for (int k = 0; k < nnz; ++k) vals[k] = float(k + 1);
  float *d_vals = upload(vals), *d_cvals = upload(std::vector<float>(nnz, 0));
  int *d_colptr = upload(std::vector<int>(n + 1, 0)), *d_rowind = upload(std::vector<int>(nnz, 0));
  size_t t_bytes = 0;
  SPARSE(cusparseCsr2cscEx2_bufferSize(h, m, n, nnz, d_vals, d_coff, d_ccol, d_cvals, d_colptr, d_rowind, CUDA_R_32F,
                                       CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1,
                                       &t_bytes));
  void* t_buffer = device_bytes(t_bytes);
  SPARSE(cusparseCsr2cscEx2(h, m, n, nnz, d_vals, d_coff, d_ccol, d_cvals, d_colptr, d_rowind, CUDA_R_32F,
                            CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, t_buffer));
  std::vector<int> want_colptr(n + 1, 0), want_rowind, fill(n, 0);
  std::vector<float> want_vals;
  for (int c : sorted) ++want_colptr[c + 1];
  for (int j = 0; j < n; ++j) want_colptr[j + 1] += want_colptr[j];
  want_rowind.resize(nnz), want_vals.resize(nnz);
  for (int r = 0; r < m; ++r)
    for (int k = off[r]; k < off[r + 1]; ++k) {
      const int at = want_colptr[sorted[k]] + fill[sorted[k]]++;
      want_rowind[at] = r, want_vals[at] = vals[k];
    }
  const bool csc = download(d_colptr, n + 1) == want_colptr && download(d_rowind, nnz) == want_rowind &&
                   download(d_cvals, nnz) == want_vals;
  std::printf("csr2cscEx2 (fp32): matches the CPU %s\n", yes(csc));
  ok = ok && csc;

  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* d : {(void*)d_row, (void*)d_col, (void*)d_perm, buffer, (void*)d_rows1, (void*)d_off, (void*)d_back,
                  (void*)d_coff, (void*)d_ccol, csr_buffer, (void*)d_vals, (void*)d_cvals, (void*)d_colptr,
                  (void*)d_rowind, t_buffer})
    CUDA(cudaFree(d));
  return ok;
}

// ---- the legacy calls of every value type (complex factorizations, bsrilu02, cscsort, ?nnz,
// csrgeam2, complex and interleaved tridiagonal/pentadiagonal solves, csrcolor), against the CPU
using cf = std::complex<float>;
using cd = std::complex<double>;

template <class T>
static T conj_of(T v) { return std::conj(v); }
// re + im i, or re for a real type.
template <class T>
static T value_of(double re, double im) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return T(re);
  else return T(re, im);
}
static double conj_of(double v) { return v; }
template <class T>
static double worst_of(const std::vector<T>& got, const std::vector<T>& want) {
  double m = 0, scale = 1;
  for (const T& w : want) scale = std::max(scale, double(std::abs(w)));
  for (size_t k = 0; k < got.size(); ++k) m = std::max(m, double(std::abs(got[k] - want[k])));
  return got.size() == want.size() ? m / scale : 1e30;
}
// ILU(0) / IC(0) on the CPU over `a`'s pattern, values of any type (IC: L in the lower triangle).
template <class T>
static std::vector<T> factor_cpu(const Csr& a, std::vector<T> x, bool ilu) {
  for (int i = 0; i < a.n; ++i) {
    if (ilu) {
      for (int p = a.off[i]; p < a.off[i + 1] && a.col[p] < i; ++p) {
        const int k = a.col[p];
        x[p] /= x[a.find(k, k)];
        for (int q = p + 1; q < a.off[i + 1]; ++q) {
          const int kj = a.find(k, a.col[q]);
          if (kj >= 0) x[q] -= x[p] * x[kj];
        }
      }
      continue;
    }
    for (int p = a.off[i]; p < a.off[i + 1] && a.col[p] <= i; ++p) {
      const int j = a.col[p];
      T s = x[p];
      for (int q = a.off[i]; q < p; ++q) {
        const int jk = a.find(j, a.col[q]);
        if (jk >= 0) s -= x[q] * conj_of(x[jk]);
      }
      x[p] = j < i ? s / x[a.find(j, j)] : T(std::sqrt(std::real(s)));
    }
  }
  return x;
}
// The Laplacian's pattern with complex values: 4 + i/2 on the diagonal, -1 +- i/5 off it
// (Hermitian when `hermitian`: the upper entries the conjugates of the lower).
template <class T>
static std::vector<T> complex_values(const Csr& a, bool hermitian) {
  std::vector<T> v(a.nnz());
  for (int r = 0; r < a.n; ++r)
    for (int k = a.off[r]; k < a.off[r + 1]; ++k)
      v[k] = a.col[k] == r ? T(4, hermitian ? 0 : 0.5) : T(-1, a.col[k] < r || !hermitian ? 0.2 : -0.2);
  return v;
}
static bool complex_factorizations(cusparseHandle_t h) {
  const Csr a = laplacian(5);
  const int n = a.n, nnz = a.nnz();
  int *d_off = upload(a.off), *d_col = upload(a.col);
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  // csrilu02 (Z)
  const std::vector<cd> zv = complex_values<cd>(a, false);
  cd* d_z = upload(zv);
  csrilu02Info_t ilu;
  SPARSE(cusparseCreateCsrilu02Info(&ilu));
  int bytes = 0;
  SPARSE(cusparseZcsrilu02_bufferSize(h, n, nnz, descr, (cuDoubleComplex*)d_z, d_off, d_col, ilu, &bytes));
  void* buffer = device_bytes(bytes);
  SPARSE(cusparseZcsrilu02_analysis(h, n, nnz, descr, (cuDoubleComplex*)d_z, d_off, d_col, ilu,
                                    CUSPARSE_SOLVE_POLICY_USE_LEVEL, buffer));
  SPARSE(cusparseZcsrilu02(h, n, nnz, descr, (cuDoubleComplex*)d_z, d_off, d_col, ilu, CUSPARSE_SOLVE_POLICY_USE_LEVEL,
                           buffer));
  int position = -2;
  const cusparseStatus_t ilu_pivot = cusparseXcsrilu02_zeroPivot(h, ilu, &position);
  const bool ilu_ok = worst_of(download(d_z, nnz), factor_cpu(a, zv, true)) < 1e-12;
  std::printf("csrilu02 (Z) of the 5x5-grid Laplacian with complex values: %s, zero pivot %d, matches the CPU %s\n",
              cusparseGetErrorName(ilu_pivot), position, yes(ilu_ok));
  // csric02 (C), Hermitian: the lower triangle
  const std::vector<cf> cv = complex_values<cf>(a, true);
  cf* d_c = upload(cv);
  csric02Info_t ic;
  SPARSE(cusparseCreateCsric02Info(&ic));
  SPARSE(cusparseCcsric02_bufferSize(h, n, nnz, descr, (cuComplex*)d_c, d_off, d_col, ic, &bytes));
  void* buffer2 = device_bytes(bytes);
  SPARSE(cusparseCcsric02_analysis(h, n, nnz, descr, (cuComplex*)d_c, d_off, d_col, ic, CUSPARSE_SOLVE_POLICY_USE_LEVEL,
                                   buffer2));
  SPARSE(cusparseCcsric02(h, n, nnz, descr, (cuComplex*)d_c, d_off, d_col, ic, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buffer2));
  int ic_position = -2;
  const cusparseStatus_t ic_pivot = cusparseXcsric02_zeroPivot(h, ic, &ic_position);
  std::vector<cf> got = download(d_c, nnz), want = factor_cpu(a, cv, false);
  for (int r = 0; r < n; ++r)
    for (int k = a.off[r]; k < a.off[r + 1]; ++k)
      if (a.col[k] > r) got[k] = want[k] = cf(0);  // the lower triangle is the factor
  const bool ic_ok = worst_of(got, want) < 1e-5;
  std::printf("csric02 (C), Hermitian: %s, zero pivot %d, lower triangle matches the CPU %s\n",
              cusparseGetErrorName(ic_pivot), ic_position, yes(ic_ok));
  SPARSE(cusparseDestroyCsrilu02Info(ilu));
  SPARSE(cusparseDestroyCsric02Info(ic));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* p : {(void*)d_off, (void*)d_col, (void*)d_z, buffer, (void*)d_c, buffer2}) CUDA(cudaFree(p));
  return ilu_ok && ic_ok && ilu_pivot == CUSPARSE_STATUS_SUCCESS && ic_pivot == CUSPARSE_STATUS_SUCCESS;
}

// bsrilu02 (D, 2x2 blocks by row; Z by column) of the 6x6-grid Laplacian: the blocks any entry
// falls in, stored whole (zeros included), against the CPU's ILU(0) on that pattern.
template <class T>
static bool bsrilu(cusparseHandle_t h, cusparseDirection_t dir) {
  const Csr a = laplacian(6);
  const int bd = 2, mb = a.n / bd;
  std::vector<int> brow{0}, bcol;
  for (int bi = 0; bi < mb; ++bi) {
    std::vector<int> cols;
    for (int r = bi * bd; r < (bi + 1) * bd; ++r)
      for (int k = a.off[r]; k < a.off[r + 1]; ++k) cols.push_back(a.col[k] / bd);
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    bcol.insert(bcol.end(), cols.begin(), cols.end());
    brow.push_back(int(bcol.size()));
  }
  // The expanded pattern (each block whole) as a CSR, its values from A (zeros where A has none).
  Csr e;
  e.n = a.n;
  std::vector<T> ev;
  for (int r = 0; r < a.n; ++r) {
    for (int k = brow[r / bd]; k < brow[r / bd + 1]; ++k)
      for (int jj = 0; jj < bd; ++jj) {
        const int c = bcol[k] * bd + jj, at = a.find(r, c);
        e.col.push_back(c);
        ev.push_back(at < 0 ? T(0) : value_of<T>(a.val[at], c == r ? 0.5 : 0.2));
      }
    e.off.push_back(e.nnz());
  }
  std::vector<T> bv;  // BSR values
  for (int bi = 0; bi < mb; ++bi)
    for (int k = brow[bi]; k < brow[bi + 1]; ++k)
      for (int s = 0; s < bd * bd; ++s) {
        const int ii = dir == CUSPARSE_DIRECTION_ROW ? s / bd : s % bd, jj = dir == CUSPARSE_DIRECTION_ROW ? s % bd : s / bd;
        bv.push_back(ev[e.find(bi * bd + ii, bcol[k] * bd + jj)]);
      }
  T* d_v = upload(bv);
  int *d_row = upload(brow), *d_col = upload(bcol);
  const int nnzb = int(bcol.size());
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  bsrilu02Info_t info;
  SPARSE(cusparseCreateBsrilu02Info(&info));
  int bytes = 0;
  cusparseStatus_t st;
  if constexpr (std::is_same_v<T, double>) {
    SPARSE(cusparseDbsrilu02_bufferSize(h, dir, mb, nnzb, descr, d_v, d_row, d_col, bd, info, &bytes));
    void* buf = device_bytes(bytes);
    SPARSE(cusparseDbsrilu02_analysis(h, dir, mb, nnzb, descr, d_v, d_row, d_col, bd, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf));
    SPARSE(cusparseDbsrilu02(h, dir, mb, nnzb, descr, d_v, d_row, d_col, bd, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf));
    CUDA(cudaFree(buf));
  } else {
    auto* z = reinterpret_cast<cuDoubleComplex*>(d_v);
    SPARSE(cusparseZbsrilu02_bufferSize(h, dir, mb, nnzb, descr, z, d_row, d_col, bd, info, &bytes));
    void* buf = device_bytes(bytes);
    SPARSE(cusparseZbsrilu02_analysis(h, dir, mb, nnzb, descr, z, d_row, d_col, bd, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf));
    SPARSE(cusparseZbsrilu02(h, dir, mb, nnzb, descr, z, d_row, d_col, bd, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf));
    CUDA(cudaFree(buf));
  }
  int position = -2;
  st = cusparseXbsrilu02_zeroPivot(h, info, &position);
  const std::vector<T> got = download(d_v, bv.size()), want_e = factor_cpu(e, ev, true);
  std::vector<T> want;
  for (int bi = 0; bi < mb; ++bi)
    for (int k = brow[bi]; k < brow[bi + 1]; ++k)
      for (int s = 0; s < bd * bd; ++s) {
        const int ii = dir == CUSPARSE_DIRECTION_ROW ? s / bd : s % bd, jj = dir == CUSPARSE_DIRECTION_ROW ? s % bd : s / bd;
        want.push_back(want_e[e.find(bi * bd + ii, bcol[k] * bd + jj)]);
      }
  const bool ok = worst_of(got, want) < 1e-12;
  std::printf("bsrilu02 (%s, 2x2 blocks by %s) of the 6x6-grid Laplacian: %s, zero pivot %d, matches the CPU %s\n",
              std::is_same_v<T, double> ? "D" : "Z", dir == CUSPARSE_DIRECTION_ROW ? "row" : "column",
              cusparseGetErrorName(st), position, yes(ok));
  SPARSE(cusparseDestroyBsrilu02Info(info));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* p : {(void*)d_v, (void*)d_row, (void*)d_col}) CUDA(cudaFree(p));
  return ok && st == CUSPARSE_STATUS_SUCCESS;
}

// Xcscsort: a CSC matrix whose row indices are out of order within columns, with a permutation.
static bool csc_sort(cusparseHandle_t h) {
  const int m = 5, n = 4;
  const std::vector<int> colptr{0, 3, 5, 8, 10}, rows0{4, 0, 2, 3, 1, 2, 4, 0, 1, 3};
  int *d_ptr = upload(colptr), *d_rows = upload(rows0), *d_p = static_cast<int*>(device_bytes(rows0.size() * 4));
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  size_t bytes = 0;
  SPARSE(cusparseXcscsort_bufferSizeExt(h, m, n, int(rows0.size()), d_ptr, d_rows, &bytes));
  void* buf = device_bytes(bytes);
  SPARSE(cusparseCreateIdentityPermutation(h, int(rows0.size()), d_p));
  SPARSE(cusparseXcscsort(h, m, n, int(rows0.size()), descr, d_ptr, d_rows, d_p, buf));
  const std::vector<int> rows = download(d_rows, rows0.size()), p = download(d_p, rows0.size());
  bool ok = true;
  for (int c = 0; c < n; ++c)
    for (int k = colptr[c]; k < colptr[c + 1]; ++k) {
      ok &= rows[k] == rows0[p[k]] && p[k] >= colptr[c] && p[k] < colptr[c + 1];
      if (k > colptr[c]) ok &= rows[k] > rows[k - 1];
    }
  std::printf("cscsort with its permutation: %s\n", yes(ok));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* q : {(void*)d_ptr, (void*)d_rows, (void*)d_p, buf}) CUDA(cudaFree(q));
  return ok;
}

// ?nnz: nonzeros of a 4 x 5 dense matrix (lda 6) per row (D, total in host memory) and per column
// (C, total in device memory).
static bool dense_nnz(cusparseHandle_t h) {
  const int m = 4, n = 5, lda = 6;
  std::vector<double> a(lda * n, 0.0);
  std::vector<cf> ac(lda * n, cf(0));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      if ((i * 3 + j * 2) % 4) a[i + j * lda] = i + j + 1, ac[i + j * lda] = cf(0, float(i - j));
  std::vector<int> rows(m, 0), cols(n, 0);
  int total_rows = 0, total_cols = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      if (a[i + j * lda] != 0) ++rows[i], ++total_rows;
      if (ac[i + j * lda] != cf(0)) ++cols[j], ++total_cols;
    }
  double* d_a = upload(a);
  cf* d_ac = upload(ac);
  int *d_rows = upload(std::vector<int>(m, -1)), *d_cols = upload(std::vector<int>(n, -1)),
      *d_total = upload(std::vector<int>{-1});
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  int total = -1;
  SPARSE(cusparseDnnz(h, CUSPARSE_DIRECTION_ROW, m, n, descr, d_a, lda, d_rows, &total));
  SPARSE(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_DEVICE));
  SPARSE(cusparseCnnz(h, CUSPARSE_DIRECTION_COLUMN, m, n, descr, (cuComplex*)d_ac, lda, d_cols, d_total));
  SPARSE(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST));
  const bool ok = download(d_rows, m) == rows && total == total_rows && download(d_cols, n) == cols &&
                  download(d_total, 1)[0] == total_cols;
  std::printf("Dnnz per row (%d in all, host memory) and Cnnz per column (%d, device memory): match the CPU %s\n",
              total, total_cols, yes(ok));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* q : {(void*)d_a, (void*)d_ac, (void*)d_rows, (void*)d_cols, (void*)d_total}) CUDA(cudaFree(q));
  return ok;
}

// csrgeam2: C = alpha A + beta B, A the 4x4-grid Laplacian, B a band of the same size (entries at
// columns r and r+3); D and Z (complex scalars), C zero-based. (With a one-based C, NVIDIA's
// answer on the H100 differed from this model of it: not checked.)
template <class T>
static bool geam(cusparseHandle_t h) {
  const Csr a = laplacian(4);
  const int n = a.n;
  Csr b;
  b.n = n;
  for (int r = 0; r < n; ++r) {
    for (int c : {r, r + 3})
      if (c < n) b.col.push_back(c), b.val.push_back(0.5 * (r % 3) + 1);
    b.off.push_back(b.nnz());
  }
  std::vector<T> av(a.val.begin(), a.val.end()), bv(b.val.begin(), b.val.end());
  if constexpr (!std::is_same_v<T, double>)
    for (size_t k = 0; k < bv.size(); ++k) bv[k] *= value_of<T>(1, 0.5);
  const T alpha = std::is_same_v<T, double> ? value_of<T>(2, 0) : value_of<T>(1, 1), beta = value_of<T>(-1, 0);
  int *d_ao = upload(a.off), *d_ac = upload(a.col), *d_bo = upload(b.off), *d_bc = upload(b.col);
  T *d_av = upload(av), *d_bv = upload(bv);
  int* d_co = static_cast<int*>(device_bytes((n + 1) * 4));
  cusparseMatDescr_t da, dc;
  SPARSE(cusparseCreateMatDescr(&da));
  SPARSE(cusparseCreateMatDescr(&dc));
  const int base = 0;
  SPARSE(cusparseSetMatIndexBase(dc, base ? CUSPARSE_INDEX_BASE_ONE : CUSPARSE_INDEX_BASE_ZERO));
  size_t bytes = 0;
  int nnz = -1;
  using L = std::conditional_t<std::is_same_v<T, double>, double, cuDoubleComplex>;
  auto lib = [](const T* p) { return reinterpret_cast<const L*>(p); };
  if constexpr (std::is_same_v<T, double>)
    SPARSE(cusparseDcsrgeam2_bufferSizeExt(h, n, n, &alpha, da, a.nnz(), d_av, d_ao, d_ac, &beta, da, b.nnz(), d_bv,
                                           d_bo, d_bc, dc, nullptr, d_co, nullptr, &bytes));
  else
    SPARSE(cusparseZcsrgeam2_bufferSizeExt(h, n, n, lib(&alpha), da, a.nnz(), lib(d_av), d_ao, d_ac, lib(&beta), da,
                                           b.nnz(), lib(d_bv), d_bo, d_bc, dc, nullptr, d_co, nullptr, &bytes));
  void* buf = device_bytes(bytes);
  SPARSE(cusparseXcsrgeam2Nnz(h, n, n, da, a.nnz(), d_ao, d_ac, da, b.nnz(), d_bo, d_bc, dc, d_co, &nnz, buf));
  T* d_cv = static_cast<T*>(device_bytes(nnz * sizeof(T)));
  int* d_cc = static_cast<int*>(device_bytes(nnz * 4));
  if constexpr (std::is_same_v<T, double>)
    SPARSE(cusparseDcsrgeam2(h, n, n, &alpha, da, a.nnz(), d_av, d_ao, d_ac, &beta, da, b.nnz(), d_bv, d_bo, d_bc, dc,
                             d_cv, d_co, d_cc, buf));
  else
    SPARSE(cusparseZcsrgeam2(h, n, n, lib(&alpha), da, a.nnz(), lib(d_av), d_ao, d_ac, lib(&beta), da, b.nnz(),
                             lib(d_bv), d_bo, d_bc, dc, reinterpret_cast<L*>(d_cv), d_co, d_cc, buf));
  // The CPU's: dense sums, then C's rows (the union of the patterns, by column).
  std::vector<int> co{base}, cc;
  std::vector<T> cv;
  for (int r = 0; r < n; ++r) {
    std::vector<std::pair<int, T>> row;
    for (int c = 0; c < n; ++c) {
      const int ia = a.find(r, c), ib = b.find(r, c);
      if (ia >= 0 || ib >= 0)
        row.push_back({c, (ia >= 0 ? alpha * av[ia] : T(0)) + (ib >= 0 ? beta * bv[ib] : T(0))});
    }
    for (auto [c, v] : row) cc.push_back(c + base), cv.push_back(v);
    co.push_back(int(cc.size()) + base);
  }
  const bool ok = nnz == int(cc.size()) && download(d_co, n + 1) == co && download(d_cc, nnz) == cc &&
                  worst_of(download(d_cv, nnz), cv) < 1e-12;
  std::printf("csrgeam2 (%s, C %s-based): %d entries, matches the CPU %s\n", std::is_same_v<T, double> ? "D" : "Z",
              base ? "one" : "zero", nnz, yes(ok));
  SPARSE(cusparseDestroyMatDescr(da));
  SPARSE(cusparseDestroyMatDescr(dc));
  for (void* q : {(void*)d_ao, (void*)d_ac, (void*)d_bo, (void*)d_bc, (void*)d_av, (void*)d_bv, (void*)d_co, buf,
                  (void*)d_cv, (void*)d_cc})
    CUDA(cudaFree(q));
  return ok;
}

// Interleaved batches (element i of system k at i * batch + k): gtsvInterleavedBatch (S, algo 0:
// Thomas; Z, algo 1: LU with pivoting) and gpsvInterleavedBatch (D, QR), and gtsv2 of complex
// values (Z, 2 right-hand sides); each solution checked by its residual on the CPU.
template <class T>
static double residual(int m, int batch, const std::vector<T>* bands, int nbands, const std::vector<T>& x,
                       const std::vector<T>& b) {
  double worst = 0;
  const int half = nbands / 2;
  for (int k = 0; k < batch; ++k)
    for (int i = 0; i < m; ++i) {
      T s(0);
      for (int o = -half; o <= half; ++o)
        if (i + o >= 0 && i + o < m) s += bands[o + half][i * batch + k] * x[(i + o) * batch + k];
      worst = std::max(worst, double(std::abs(s - b[i * batch + k])));
    }
  return worst;
}
template <class T>
static std::vector<T> band(int n, double diag, double off, int salt) {
  std::vector<T> v(n);
  for (int i = 0; i < n; ++i) {
    const double re = diag != 0 ? diag + 0.25 * ((i + salt) % 3) : off * (1 + 0.1 * ((i + salt) % 4));
    if constexpr (std::is_same_v<T, cd>) v[i] = cd(re, 0.1 * ((i * salt) % 3));
    else v[i] = T(re);
  }
  return v;
}
static bool interleaved(cusparseHandle_t h) {
  bool ok = true;
  {
    const int m = 8, batch = 3, total = m * batch;
    std::vector<float> bands[3] = {band<float>(total, 0, -1, 1), band<float>(total, 4, 0, 2), band<float>(total, 0, -1, 3)};
    for (int k = 0; k < batch; ++k) bands[0][k] = 0, bands[2][(m - 1) * batch + k] = 0;
    const std::vector<float> b = band<float>(total, 0, 1, 5);
    float *dl = upload(bands[0]), *d = upload(bands[1]), *du = upload(bands[2]), *x = upload(b);
    size_t bytes = 0;
    SPARSE(cusparseSgtsvInterleavedBatch_bufferSizeExt(h, 0, m, dl, d, du, x, batch, &bytes));
    void* buf = device_bytes(bytes);
    SPARSE(cusparseSgtsvInterleavedBatch(h, 0, m, dl, d, du, x, batch, buf));
    const double r = residual(m, batch, bands, 3, download(x, total), b);
    std::printf("gtsvInterleavedBatch (S, Thomas, 3 systems of 8): residual below 1e-4 %s\n", yes(r < 1e-4));
    ok &= r < 1e-4;
    for (void* q : {(void*)dl, (void*)d, (void*)du, (void*)x, buf}) CUDA(cudaFree(q));
  }
  {
    const int m = 6, batch = 2, total = m * batch;
    std::vector<cd> bands[3] = {band<cd>(total, 0, -1, 2), band<cd>(total, 5, 0, 1), band<cd>(total, 0, 1.5, 4)};
    for (int k = 0; k < batch; ++k) bands[0][k] = 0, bands[2][(m - 1) * batch + k] = 0;
    const std::vector<cd> b = band<cd>(total, 0, 2, 3);
    auto* dl = upload(bands[0]);
    auto* d = upload(bands[1]);
    auto* du = upload(bands[2]);
    auto* x = upload(b);
    auto z = [](cd* p) { return reinterpret_cast<cuDoubleComplex*>(p); };
    size_t bytes = 0;
    SPARSE(cusparseZgtsvInterleavedBatch_bufferSizeExt(h, 1, m, z(dl), z(d), z(du), z(x), batch, &bytes));
    void* buf = device_bytes(bytes);
    // the factorization may overwrite the diagonals: the residual is of the saved bands
    SPARSE(cusparseZgtsvInterleavedBatch(h, 1, m, z(dl), z(d), z(du), z(x), batch, buf));
    const double r = residual(m, batch, bands, 3, download(x, total), b);
    std::printf("gtsvInterleavedBatch (Z, LU with pivoting, 2 systems of 6): residual below 1e-10 %s\n", yes(r < 1e-10));
    ok &= r < 1e-10;
    for (void* q : {(void*)dl, (void*)d, (void*)du, (void*)x, buf}) CUDA(cudaFree(q));
  }
  {
    const int m = 9, batch = 2, total = m * batch;
    std::vector<double> bands[5] = {band<double>(total, 0, 0.5, 1), band<double>(total, 0, -1, 2),
                                    band<double>(total, 6, 0, 3), band<double>(total, 0, -1, 4),
                                    band<double>(total, 0, 0.5, 5)};
    for (int k = 0; k < batch; ++k) {
      bands[0][k] = bands[0][batch + k] = bands[1][k] = 0;
      bands[4][(m - 1) * batch + k] = bands[4][(m - 2) * batch + k] = bands[3][(m - 1) * batch + k] = 0;
    }
    const std::vector<double> b = band<double>(total, 0, 1, 7);
    double* dv[5];
    for (int k = 0; k < 5; ++k) dv[k] = upload(bands[k]);
    double* x = upload(b);
    size_t bytes = 0;
    SPARSE(cusparseDgpsvInterleavedBatch_bufferSizeExt(h, 0, m, dv[0], dv[1], dv[2], dv[3], dv[4], x, batch, &bytes));
    void* buf = device_bytes(bytes);
    SPARSE(cusparseDgpsvInterleavedBatch(h, 0, m, dv[0], dv[1], dv[2], dv[3], dv[4], x, batch, buf));
    const double r = residual(m, batch, bands, 5, download(x, total), b);
    std::printf("gpsvInterleavedBatch (D, QR, 2 pentadiagonal systems of 9): residual below 1e-10 %s\n", yes(r < 1e-10));
    ok &= r < 1e-10;
    for (void* q : {(void*)dv[0], (void*)dv[1], (void*)dv[2], (void*)dv[3], (void*)dv[4], (void*)x, buf}) CUDA(cudaFree(q));
  }
  {
    const int m = 7, n = 2, ldb = 8;
    std::vector<cd> bands[3] = {band<cd>(m, 0, -1, 1), band<cd>(m, 4, 0, 2), band<cd>(m, 0, -1, 3)};
    bands[0][0] = 0, bands[2][m - 1] = 0;
    const std::vector<cd> b = band<cd>(ldb * n, 0, 1, 6);
    auto* dl = upload(bands[0]);
    auto* d = upload(bands[1]);
    auto* du = upload(bands[2]);
    auto* x = upload(b);
    auto z = [](cd* p) { return reinterpret_cast<cuDoubleComplex*>(p); };
    size_t bytes = 0;
    SPARSE(cusparseZgtsv2_bufferSizeExt(h, m, n, z(dl), z(d), z(du), z(x), ldb, &bytes));
    void* buf = device_bytes(bytes);
    SPARSE(cusparseZgtsv2(h, m, n, z(dl), z(d), z(du), z(x), ldb, buf));
    const std::vector<cd> got = download(x, ldb * n);
    double r = 0;
    for (int j = 0; j < n; ++j) {
      std::vector<cd> col(got.begin() + j * ldb, got.begin() + j * ldb + m), rhs(b.begin() + j * ldb, b.begin() + j * ldb + m);
      r = std::max(r, residual(m, 1, bands, 3, col, rhs));
    }
    std::printf("gtsv2 (Z, m = 7, 2 right-hand sides): residual below 1e-10 %s\n", yes(r < 1e-10));
    ok &= r < 1e-10;
    for (void* q : {(void*)dl, (void*)d, (void*)du, (void*)x, buf}) CUDA(cudaFree(q));
  }
  return ok;
}

// csrcolor (D) of the 6x6-grid Laplacian, every node colored: no two neighbours share a color,
// the colors are below ncolors, the reordering is a permutation.
static bool coloring(cusparseHandle_t h) {
  const Csr a = laplacian(6);
  const int n = a.n;
  int *d_off = upload(a.off), *d_col = upload(a.col), *d_color = static_cast<int*>(device_bytes(n * 4)),
      *d_order = static_cast<int*>(device_bytes(n * 4));
  double* d_val = upload(a.val);
  cusparseMatDescr_t descr;
  SPARSE(cusparseCreateMatDescr(&descr));
  cusparseColorInfo_t info;
  SPARSE(cusparseCreateColorInfo(&info));
  const double fraction = 1.0;
  int ncolors = -1;
  SPARSE(cusparseDcsrcolor(h, n, a.nnz(), descr, d_val, d_off, d_col, &fraction, &ncolors, d_color, d_order, info));
  const std::vector<int> color = download(d_color, n), order = download(d_order, n);
  bool valid = ncolors > 0, perm = true;
  for (int r = 0; r < n; ++r) {
    valid &= color[r] >= 0 && color[r] < ncolors;
    for (int k = a.off[r]; k < a.off[r + 1]; ++k) valid &= a.col[k] == r || color[a.col[k]] != color[r];
  }
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i) perm &= sorted[i] == i;
  std::printf("csrcolor (D) of the 6x6-grid Laplacian: a valid coloring %s, the reordering a permutation %s\n",
              yes(valid), yes(perm));
  std::printf("csrcolor colors: %d [GPU only]\n", ncolors);
  SPARSE(cusparseDestroyColorInfo(info));
  SPARSE(cusparseDestroyMatDescr(descr));
  for (void* q : {(void*)d_off, (void*)d_col, (void*)d_color, (void*)d_order, (void*)d_val}) CUDA(cudaFree(q));
  return valid && perm;
}

int main() {
  cusparseHandle_t h;
  SPARSE(cusparseCreate(&h));
  bool ok = descriptor();
  ok = ilu_pcg(h) && ok;
  ok = zero_pivots(h) && ok;
  ok = ic(h) && ok;
  ok = tridiagonal_solves(h) && ok;
  ok = sorts(h) && ok;
  ok = complex_factorizations(h) && ok;
  ok = bsrilu<double>(h, CUSPARSE_DIRECTION_ROW) && ok;
  ok = bsrilu<cd>(h, CUSPARSE_DIRECTION_COLUMN) && ok;
  ok = csc_sort(h) && ok;
  ok = dense_nnz(h) && ok;
  ok = geam<double>(h) && ok;
  ok = geam<cd>(h) && ok;
  ok = interleaved(h) && ok;
  ok = coloring(h) && ok;
  SPARSE(cusparseDestroy(h));
  std::printf("cusparse_legacy: %s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
