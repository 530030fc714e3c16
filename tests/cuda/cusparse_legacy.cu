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
//    coo2csr and csr2coo, csrsort, csr2cscEx2.
// Prints pass/fail and a few rounded values: the same natively, through vmcuda and on the test
// executor (tests/executor/fake_cusparse.cc). Built with nvcc -cudart shared -lcusparse -lcublas
// (scripts/build-cuda-tests.sh).
// The legacy API is deprecated (still declared, still in CUDA 13's library): quiet about it.
#define DISABLE_CUSPARSE_DEPRECATED
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

int main() {
  cusparseHandle_t h;
  SPARSE(cusparseCreate(&h));
  bool ok = descriptor();
  ok = ilu_pcg(h) && ok;
  ok = zero_pivots(h) && ok;
  ok = ic(h) && ok;
  ok = tridiagonal_solves(h) && ok;
  ok = sorts(h) && ok;
  SPARSE(cusparseDestroy(h));
  std::printf("cusparse_legacy: %s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
