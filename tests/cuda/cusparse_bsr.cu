// cuSPARSE's legacy BSR calls and pruning through vmcuda's libcusparse.so.12 (issue 12 point 3),
// each checked against the CPU on a Hermitian positive definite block tridiagonal matrix
// (3 x 3 blocks, blocks stored by row or by column):
//  - bsrmv (S, D, C, Z), bsrxmv (D, Z: the masked block rows only), bsrmm (D with op(B) N and T, C);
//  - bsrsv2 (S, D, C, Z; D also transposed, Z conjugate-transposed on the upper triangle) and
//    bsrsm2 (D: three right-hand sides, X and B transposed too; Z) with their info objects, the
//    zero pivot read after each solve, and a structural zero pivot (a missing diagonal block);
//  - bsric02 (D, Z): block IC(0), its lower triangle against the CPU's IC(0) on the blocks'
//    pattern, and a structural zero pivot;
//  - pruneDense2csr and pruneCsr2csr (H, S, D) by threshold (host and device pointer mode) and by
//    percentage with a prune info.
// Prints pass/fail and a few rounded values: the same natively, through vmcuda and on the test
// executor (tests/executor/fake_cusparse.cc). Built with nvcc -cudart shared -lcusparse -lcublas
// (scripts/build-cuda-tests.sh).
#define DISABLE_CUSPARSE_DEPRECATED
#include <cuComplex.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "library_check.h"

#define SPARSE(call) CHECK_STATUS(call, cusparseStatus_t, CUSPARSE_STATUS_SUCCESS, cusparseGetErrorName)

using cf = std::complex<float>;
using cd = std::complex<double>;

static const char* yes(bool b) { return b ? "yes" : "no"; }
static void* device_bytes(size_t n) {
  void* d = nullptr;
  CUDA(cudaMalloc(&d, n ? n : 8));
  return d;
}

// Each value type: its letter, whether it is complex, the tolerance of a check, and the
// library's calls (cuComplex and cuDoubleComplex are std::complex's layout).
template <class T> struct Type;
template <> struct Type<__half> { static constexpr const char* name = "H"; static constexpr bool complex = false; static constexpr double tol = 1e-3; };
template <> struct Type<float> { static constexpr const char* name = "S"; static constexpr bool complex = false; static constexpr double tol = 2e-4; };
template <> struct Type<double> { static constexpr const char* name = "D"; static constexpr bool complex = false; static constexpr double tol = 1e-11; };
template <> struct Type<cf> { static constexpr const char* name = "C"; static constexpr bool complex = true; static constexpr double tol = 2e-4; };
template <> struct Type<cd> { static constexpr const char* name = "Z"; static constexpr bool complex = true; static constexpr double tol = 1e-11; };

#define BSR_CALLS(T, P, CT)                                                                                          \
  inline cusparseStatus_t bsrmv(cusparseHandle_t h, cusparseDirection_t dir, int mb, int nb, int nnzb, const T* al, \
                                cusparseMatDescr_t d, const T* v, const int* r, const int* c, int bd, const T* x,   \
                                const T* be, T* y) {                                                                \
    return cusparse##P##bsrmv(h, dir, CUSPARSE_OPERATION_NON_TRANSPOSE, mb, nb, nnzb, (const CT*)al, d,             \
                              (const CT*)v, r, c, bd, (const CT*)x, (const CT*)be, (CT*)y);                         \
  }                                                                                                                 \
  inline cusparseStatus_t bsrxmv(cusparseHandle_t h, cusparseDirection_t dir, int masks, int mb, int nb, int nnzb,  \
                                 const T* al, cusparseMatDescr_t d, const T* v, const int* mask, const int* r,       \
                                 const int* e, const int* c, int bd, const T* x, const T* be, T* y) {               \
    return cusparse##P##bsrxmv(h, dir, CUSPARSE_OPERATION_NON_TRANSPOSE, masks, mb, nb, nnzb, (const CT*)al, d,     \
                               (const CT*)v, mask, r, e, c, bd, (const CT*)x, (const CT*)be, (CT*)y);               \
  }                                                                                                                 \
  inline cusparseStatus_t bsrmm(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t tb, int mb, int n, \
                                int kb, int nnzb, const T* al, cusparseMatDescr_t d, const T* v, const int* r,       \
                                const int* c, int bd, const T* b, int ldb, const T* be, T* cm, int ldc) {           \
    return cusparse##P##bsrmm(h, dir, CUSPARSE_OPERATION_NON_TRANSPOSE, tb, mb, n, kb, nnzb, (const CT*)al, d,      \
                              (const CT*)v, r, c, bd, (const CT*)b, ldb, (const CT*)be, (CT*)cm, ldc);              \
  }                                                                                                                 \
  inline cusparseStatus_t sv_buffer(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t op, int mb,    \
                                    int nnzb, cusparseMatDescr_t d, T* v, const int* r, const int* c, int bd,       \
                                    bsrsv2Info_t info, int* bytes) {                                                \
    return cusparse##P##bsrsv2_bufferSize(h, dir, op, mb, nnzb, d, (CT*)v, r, c, bd, info, bytes);                  \
  }                                                                                                                 \
  inline cusparseStatus_t sv_analysis(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t op, int mb,  \
                                      int nnzb, cusparseMatDescr_t d, const T* v, const int* r, const int* c,       \
                                      int bd, bsrsv2Info_t info, void* buf) {                                       \
    return cusparse##P##bsrsv2_analysis(h, dir, op, mb, nnzb, d, (const CT*)v, r, c, bd, info,                      \
                                        CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf);                                      \
  }                                                                                                                 \
  inline cusparseStatus_t sv_solve(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t op, int mb,     \
                                   int nnzb, const T* al, cusparseMatDescr_t d, const T* v, const int* r,           \
                                   const int* c, int bd, bsrsv2Info_t info, const T* f, T* x, void* buf) {          \
    return cusparse##P##bsrsv2_solve(h, dir, op, mb, nnzb, (const CT*)al, d, (const CT*)v, r, c, bd, info,          \
                                     (const CT*)f, (CT*)x, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf);                   \
  }                                                                                                                 \
  inline cusparseStatus_t sm_buffer(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t op,            \
                                    cusparseOperation_t xy, int mb, int n, int nnzb, cusparseMatDescr_t d, T* v,    \
                                    const int* r, const int* c, int bd, bsrsm2Info_t info, int* bytes) {            \
    return cusparse##P##bsrsm2_bufferSize(h, dir, op, xy, mb, n, nnzb, d, (CT*)v, r, c, bd, info, bytes);           \
  }                                                                                                                 \
  inline cusparseStatus_t sm_analysis(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t op,          \
                                      cusparseOperation_t xy, int mb, int n, int nnzb, cusparseMatDescr_t d,        \
                                      const T* v, const int* r, const int* c, int bd, bsrsm2Info_t info,            \
                                      void* buf) {                                                                  \
    return cusparse##P##bsrsm2_analysis(h, dir, op, xy, mb, n, nnzb, d, (const CT*)v, r, c, bd, info,               \
                                        CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf);                                      \
  }                                                                                                                 \
  inline cusparseStatus_t sm_solve(cusparseHandle_t h, cusparseDirection_t dir, cusparseOperation_t op,             \
                                   cusparseOperation_t xy, int mb, int n, int nnzb, const T* al,                    \
                                   cusparseMatDescr_t d, const T* v, const int* r, const int* c, int bd,            \
                                   bsrsm2Info_t info, const T* b, int ldb, T* x, int ldx, void* buf) {              \
    return cusparse##P##bsrsm2_solve(h, dir, op, xy, mb, n, nnzb, (const CT*)al, d, (const CT*)v, r, c, bd, info,   \
                                     (const CT*)b, ldb, (CT*)x, ldx, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf);         \
  }                                                                                                                 \
  inline cusparseStatus_t ic_buffer(cusparseHandle_t h, cusparseDirection_t dir, int mb, int nnzb,                  \
                                    cusparseMatDescr_t d, T* v, const int* r, const int* c, int bd,                 \
                                    bsric02Info_t info, int* bytes) {                                               \
    return cusparse##P##bsric02_bufferSize(h, dir, mb, nnzb, d, (CT*)v, r, c, bd, info, bytes);                     \
  }                                                                                                                 \
  inline cusparseStatus_t ic_analysis(cusparseHandle_t h, cusparseDirection_t dir, int mb, int nnzb,                \
                                      cusparseMatDescr_t d, const T* v, const int* r, const int* c, int bd,         \
                                      bsric02Info_t info, void* buf) {                                              \
    return cusparse##P##bsric02_analysis(h, dir, mb, nnzb, d, (const CT*)v, r, c, bd, info,                         \
                                         CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf);                                     \
  }                                                                                                                 \
  inline cusparseStatus_t ic(cusparseHandle_t h, cusparseDirection_t dir, int mb, int nnzb, cusparseMatDescr_t d,   \
                             T* v, const int* r, const int* c, int bd, bsric02Info_t info, void* buf) {             \
    return cusparse##P##bsric02(h, dir, mb, nnzb, d, (CT*)v, r, c, bd, info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, buf); \
  }
BSR_CALLS(float, S, float)
BSR_CALLS(double, D, double)
BSR_CALLS(cf, C, cuComplex)
BSR_CALLS(cd, Z, cuDoubleComplex)

template <class T>
static T conj_of(T v) {
  if constexpr (Type<T>::complex) return std::conj(v);
  else return v;
}
template <class T>
static T value(double re, double im) {
  if constexpr (Type<T>::complex) return T(re, im);
  else return T(re);
}

// A dense n x n (row-major) Hermitian positive definite matrix, block tridiagonal with bd x bd
// blocks (diagonally dominant); `skip_diag`: block row whose diagonal block is left out.
template <class T>
struct Blocked {
  int mb = 0, bd = 0, n = 0;
  std::vector<T> a;          // dense, row-major
  std::vector<int> row, col;  // BSR structure
  bool in(int i, int j) const {  // (i, j) in a stored block
    for (int k = row[i / bd]; k < row[i / bd + 1]; ++k)
      if (col[k] == j / bd) return true;
    return false;
  }
  std::vector<T> pack(cusparseDirection_t dir) const {
    std::vector<T> v;
    for (int bi = 0; bi < mb; ++bi)
      for (int k = row[bi]; k < row[bi + 1]; ++k)
        for (int s = 0; s < bd * bd; ++s) {
          const int ii = dir == CUSPARSE_DIRECTION_ROW ? s / bd : s % bd, jj = dir == CUSPARSE_DIRECTION_ROW ? s % bd : s / bd;
          v.push_back(a[(bi * bd + ii) * n + col[k] * bd + jj]);
        }
    return v;
  }
  // From BSR values back into a dense matrix (entries outside the blocks zero).
  std::vector<T> unpack(const std::vector<T>& v, cusparseDirection_t dir) const {
    std::vector<T> d(size_t(n) * n, T(0));
    size_t p = 0;
    for (int bi = 0; bi < mb; ++bi)
      for (int k = row[bi]; k < row[bi + 1]; ++k)
        for (int s = 0; s < bd * bd; ++s, ++p) {
          const int ii = dir == CUSPARSE_DIRECTION_ROW ? s / bd : s % bd, jj = dir == CUSPARSE_DIRECTION_ROW ? s % bd : s / bd;
          d[(bi * bd + ii) * n + col[k] * bd + jj] = v[p];
        }
    return d;
  }
};
template <class T>
static Blocked<T> blocked(int mb, int bd, int skip_diag = -1) {
  Blocked<T> m;
  m.mb = mb, m.bd = bd, m.n = mb * bd;
  m.a.assign(size_t(m.n) * m.n, T(0));
  m.row.push_back(0);
  for (int bi = 0; bi < mb; ++bi) {
    for (int bj = std::max(0, bi - 1); bj <= std::min(mb - 1, bi + 1); ++bj)
      if (!(bi == bj && bi == skip_diag)) m.col.push_back(bj);
    m.row.push_back(int(m.col.size()));
  }
  for (int i = 0; i < m.n; ++i)
    for (int j = 0; j <= i; ++j) {
      if (!m.in(i, j)) continue;
      if (i == j) {
        m.a[i * m.n + i] = value<T>(4.0 + 0.25 * (i % 3), 0);
      } else {
        const T v = value<T>(-(0.3 + 0.05 * ((i + 2 * j) % 5)), 0.1 * ((i + j) % 3));
        m.a[i * m.n + j] = v;
        m.a[j * m.n + i] = conj_of(v);
      }
    }
  return m;
}
template <class T>
static std::vector<T> vector_of(int n, double scale) {
  std::vector<T> v(n);
  for (int i = 0; i < n; ++i) v[i] = value<T>(scale * ((i % 5) - 2 + 0.5), 0.25 * (i % 3));
  return v;
}
template <class T>
static double max_error(const std::vector<T>& got, const std::vector<T>& want) {
  double m = 0, scale = 1;
  for (const T& w : want) scale = std::max(scale, double(std::abs(w)));
  for (size_t i = 0; i < got.size(); ++i) m = std::max(m, double(std::abs(got[i] - want[i])));
  return m / scale;
}

struct Context {
  cusparseHandle_t h;
  cusparseMatDescr_t general;
};

template <class T>
static bool mv(const Context& c, cusparseDirection_t dir) {
  const Blocked<T> m = blocked<T>(5, 3);
  const std::vector<T> val = m.pack(dir), x = vector_of<T>(m.n, 1.0), y0 = vector_of<T>(m.n, -0.5);
  const T alpha = value<T>(2.0, 0.5), beta = value<T>(0.5, -1.0);
  T *d_val = upload(val), *d_x = upload(x), *d_y = upload(y0);
  int *d_row = upload(m.row), *d_col = upload(m.col);
  SPARSE(bsrmv(c.h, dir, m.mb, m.mb, int(m.col.size()), &alpha, c.general, d_val, d_row, d_col, m.bd, d_x, &beta, d_y));
  const std::vector<T> y = download(d_y, m.n);
  std::vector<T> want(m.n);
  for (int i = 0; i < m.n; ++i) {
    T s(0);
    for (int j = 0; j < m.n; ++j) s += m.a[i * m.n + j] * x[j];
    want[i] = alpha * s + beta * y0[i];
  }
  const bool ok = max_error(y, want) < Type<T>::tol;
  std::printf("bsrmv (%s, %s blocks): matches the CPU %s, |y[0]| = %.4f\n", Type<T>::name,
              dir == CUSPARSE_DIRECTION_ROW ? "row-major" : "column-major", yes(ok), double(std::abs(y[0])));
  CUDA(cudaFree(d_val)); CUDA(cudaFree(d_x)); CUDA(cudaFree(d_y)); CUDA(cudaFree(d_row)); CUDA(cudaFree(d_col));
  return ok;
}

// bsrxmv on block rows 0, 2 and 3 (end pointers: each row's last block left out where it has
// more than one): the others keep y's values.
template <class T>
static bool xmv(const Context& c) {
  const Blocked<T> m = blocked<T>(5, 3);
  const auto dir = CUSPARSE_DIRECTION_COLUMN;
  const std::vector<T> val = m.pack(dir), x = vector_of<T>(m.n, 1.0), y0 = vector_of<T>(m.n, 3.0);
  const std::vector<int> mask{0, 2, 3};
  std::vector<int> end(m.mb);
  for (int i = 0; i < m.mb; ++i) end[i] = m.row[i + 1] - (m.row[i + 1] - m.row[i] > 1 ? 1 : 0);
  const T alpha = value<T>(1.5, 0), beta = value<T>(-1.0, 0.5);
  T *d_val = upload(val), *d_x = upload(x), *d_y = upload(y0);
  int *d_row = upload(m.row), *d_end = upload(end), *d_col = upload(m.col), *d_mask = upload(mask);
  SPARSE(bsrxmv(c.h, dir, int(mask.size()), m.mb, m.mb, int(m.col.size()), &alpha, c.general, d_val, d_mask, d_row,
                d_end, d_col, m.bd, d_x, &beta, d_y));
  const std::vector<T> y = download(d_y, m.n);
  std::vector<T> want = y0;
  for (int bi : mask)
    for (int i = bi * m.bd; i < (bi + 1) * m.bd; ++i) {
      T s(0);
      for (int k = m.row[bi]; k < end[bi]; ++k)
        for (int j = m.col[k] * m.bd; j < (m.col[k] + 1) * m.bd; ++j) s += m.a[i * m.n + j] * x[j];
      want[i] = alpha * s + beta * y0[i];
    }
  const bool ok = max_error(y, want) < Type<T>::tol;
  std::printf("bsrxmv (%s, block rows 0, 2, 3 to their end pointers): matches the CPU %s, others untouched %s\n",
              Type<T>::name, yes(ok), yes(y[m.bd] == y0[m.bd] && y[m.n - 1] == y0[m.n - 1]));
  CUDA(cudaFree(d_val)); CUDA(cudaFree(d_x)); CUDA(cudaFree(d_y)); CUDA(cudaFree(d_row)); CUDA(cudaFree(d_end));
  CUDA(cudaFree(d_col)); CUDA(cudaFree(d_mask));
  return ok;
}

// C = alpha A op(B) + beta C, 4 columns, B and C with leading dimensions past their rows.
template <class T>
static bool mm(const Context& c, cusparseOperation_t tb) {
  const Blocked<T> m = blocked<T>(4, 3);
  const auto dir = CUSPARSE_DIRECTION_ROW;
  const int n = 4, ldb = tb == CUSPARSE_OPERATION_NON_TRANSPOSE ? m.n + 2 : n + 1, ldc = m.n + 3;
  const std::vector<T> val = m.pack(dir);
  const std::vector<T> b = vector_of<T>(ldb * (tb == CUSPARSE_OPERATION_NON_TRANSPOSE ? n : m.n), 0.5);
  const std::vector<T> c0 = vector_of<T>(ldc * n, -1.0);
  const T alpha = value<T>(1.0, -0.5), beta = value<T>(0.25, 0);
  T *d_val = upload(val), *d_b = upload(b), *d_c = upload(c0);
  int *d_row = upload(m.row), *d_col = upload(m.col);
  SPARSE(bsrmm(c.h, dir, tb, m.mb, n, m.mb, int(m.col.size()), &alpha, c.general, d_val, d_row, d_col, m.bd, d_b, ldb,
               &beta, d_c, ldc));
  const std::vector<T> got = download(d_c, c0.size());
  std::vector<T> want = c0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m.n; ++i) {
      T s(0);
      for (int k = 0; k < m.n; ++k)
        s += m.a[i * m.n + k] * (tb == CUSPARSE_OPERATION_NON_TRANSPOSE ? b[k + j * ldb] : b[j + k * ldb]);
      want[i + j * ldc] = alpha * s + beta * c0[i + j * ldc];
    }
  const bool ok = max_error(got, want) < Type<T>::tol;
  std::printf("bsrmm (%s, op(B) %s, 4 columns): matches the CPU %s, |C(0,0)| = %.4f\n", Type<T>::name,
              tb == CUSPARSE_OPERATION_NON_TRANSPOSE ? "N" : "T", yes(ok), double(std::abs(got[0])));
  CUDA(cudaFree(d_val)); CUDA(cudaFree(d_b)); CUDA(cudaFree(d_c)); CUDA(cudaFree(d_row)); CUDA(cudaFree(d_col));
  return ok;
}

// The CPU's op(A) x = b on A's triangle (`lower`), columns of b solved one by one.
template <class T>
static std::vector<T> cpu_solve(const Blocked<T>& m, cusparseFillMode_t fill, cusparseOperation_t op,
                                const std::vector<T>& b) {
  auto at = [&](int i, int j) {  // op(A)'s element restricted to A's triangle
    const int r = op == CUSPARSE_OPERATION_NON_TRANSPOSE ? i : j, c = op == CUSPARSE_OPERATION_NON_TRANSPOSE ? j : i;
    if (fill == CUSPARSE_FILL_MODE_LOWER ? c > r : c < r) return T(0);
    const T v = m.a[r * m.n + c];
    return op == CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE ? conj_of(v) : v;
  };
  const bool lower = (fill == CUSPARSE_FILL_MODE_LOWER) == (op == CUSPARSE_OPERATION_NON_TRANSPOSE);
  std::vector<T> x = b;
  for (int s = 0; s < m.n; ++s) {
    const int i = lower ? s : m.n - 1 - s;
    T sum = x[i];
    for (int j = 0; j < m.n; ++j)
      if (j != i && (lower ? j < i : j > i)) sum -= at(i, j) * x[j];
    x[i] = sum / at(i, i);
  }
  return x;
}

// bsrsv2: op(A) x = alpha f on A's triangle (non-unit diagonal); the zero pivot read after it.
template <class T>
static bool sv(const Context& c, cusparseFillMode_t fill, cusparseOperation_t op) {
  const Blocked<T> m = blocked<T>(5, 3);
  const auto dir = op == CUSPARSE_OPERATION_NON_TRANSPOSE ? CUSPARSE_DIRECTION_ROW : CUSPARSE_DIRECTION_COLUMN;
  const int nnzb = int(m.col.size());
  cusparseMatDescr_t d;
  SPARSE(cusparseCreateMatDescr(&d));
  SPARSE(cusparseSetMatFillMode(d, fill));
  SPARSE(cusparseSetMatDiagType(d, CUSPARSE_DIAG_TYPE_NON_UNIT));
  const std::vector<T> val = m.pack(dir), f = vector_of<T>(m.n, 2.0);
  const T alpha = value<T>(0.5, 0.25);
  T *d_val = upload(val), *d_f = upload(f), *d_x = upload(std::vector<T>(m.n, T(0)));
  int *d_row = upload(m.row), *d_col = upload(m.col);
  bsrsv2Info_t info;
  SPARSE(cusparseCreateBsrsv2Info(&info));
  int bytes = 0;
  SPARSE(sv_buffer(c.h, dir, op, m.mb, nnzb, d, d_val, d_row, d_col, m.bd, info, &bytes));
  void* buf = device_bytes(bytes);
  SPARSE(sv_analysis(c.h, dir, op, m.mb, nnzb, d, d_val, d_row, d_col, m.bd, info, buf));
  SPARSE(sv_solve(c.h, dir, op, m.mb, nnzb, &alpha, d, d_val, d_row, d_col, m.bd, info, d_f, d_x, buf));
  int position = -2;
  const cusparseStatus_t pivot = cusparseXbsrsv2_zeroPivot(c.h, info, &position);
  std::vector<T> af(m.n);
  for (int i = 0; i < m.n; ++i) af[i] = alpha * f[i];
  const std::vector<T> x = download(d_x, m.n);
  const bool ok = max_error(x, cpu_solve(m, fill, op, af)) < Type<T>::tol;
  std::printf("bsrsv2 (%s, %s triangle, op %s): %s, zero pivot %d, matches the CPU %s, |x[0]| = %.4f\n", Type<T>::name,
              fill == CUSPARSE_FILL_MODE_LOWER ? "lower" : "upper",
              op == CUSPARSE_OPERATION_NON_TRANSPOSE ? "N" : op == CUSPARSE_OPERATION_TRANSPOSE ? "T" : "C",
              cusparseGetErrorName(pivot), position, yes(ok), double(std::abs(x[0])));
  SPARSE(cusparseDestroyBsrsv2Info(info));
  SPARSE(cusparseDestroyMatDescr(d));
  CUDA(cudaFree(buf)); CUDA(cudaFree(d_val)); CUDA(cudaFree(d_f)); CUDA(cudaFree(d_x)); CUDA(cudaFree(d_row));
  CUDA(cudaFree(d_col));
  return ok && pivot == CUSPARSE_STATUS_SUCCESS && position == -1;
}

// bsrsm2: op(A) X = alpha B, 3 right-hand sides; `xy` T: B and X stored transposed.
template <class T>
static bool sm(const Context& c, cusparseFillMode_t fill, cusparseOperation_t xy) {
  const Blocked<T> m = blocked<T>(4, 3);
  const auto dir = CUSPARSE_DIRECTION_ROW;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  const int nnzb = int(m.col.size()), n = 3;
  const bool t = xy == CUSPARSE_OPERATION_TRANSPOSE;
  const int ld = t ? n + 1 : m.n + 2, outer = t ? m.n : n;
  cusparseMatDescr_t d;
  SPARSE(cusparseCreateMatDescr(&d));
  SPARSE(cusparseSetMatFillMode(d, fill));
  const std::vector<T> val = m.pack(dir), b = vector_of<T>(ld * outer, 1.0);
  const T alpha = value<T>(2.0, 0);
  T *d_val = upload(val), *d_b = upload(b), *d_x = upload(std::vector<T>(ld * outer, T(0)));
  int *d_row = upload(m.row), *d_col = upload(m.col);
  bsrsm2Info_t info;
  SPARSE(cusparseCreateBsrsm2Info(&info));
  int bytes = 0;
  SPARSE(sm_buffer(c.h, dir, op, xy, m.mb, n, nnzb, d, d_val, d_row, d_col, m.bd, info, &bytes));
  void* buf = device_bytes(bytes);
  SPARSE(sm_analysis(c.h, dir, op, xy, m.mb, n, nnzb, d, d_val, d_row, d_col, m.bd, info, buf));
  SPARSE(sm_solve(c.h, dir, op, xy, m.mb, n, nnzb, &alpha, d, d_val, d_row, d_col, m.bd, info, d_b, ld, d_x, ld, buf));
  int position = -2;
  const cusparseStatus_t pivot = cusparseXbsrsm2_zeroPivot(c.h, info, &position);
  const std::vector<T> x = download(d_x, ld * outer);
  double err = 0;
  for (int j = 0; j < n; ++j) {
    std::vector<T> col(m.n), got(m.n);
    for (int i = 0; i < m.n; ++i) col[i] = alpha * (t ? b[j + i * ld] : b[i + j * ld]), got[i] = t ? x[j + i * ld] : x[i + j * ld];
    err = std::max(err, max_error(got, cpu_solve(m, fill, op, col)));
  }
  const bool ok = err < Type<T>::tol;
  std::printf("bsrsm2 (%s, %s triangle, 3 right-hand sides%s): %s, zero pivot %d, matches the CPU %s\n", Type<T>::name,
              fill == CUSPARSE_FILL_MODE_LOWER ? "lower" : "upper", t ? ", X and B transposed" : "",
              cusparseGetErrorName(pivot), position, yes(ok));
  SPARSE(cusparseDestroyBsrsm2Info(info));
  SPARSE(cusparseDestroyMatDescr(d));
  CUDA(cudaFree(buf)); CUDA(cudaFree(d_val)); CUDA(cudaFree(d_b)); CUDA(cudaFree(d_x)); CUDA(cudaFree(d_row));
  CUDA(cudaFree(d_col));
  return ok && pivot == CUSPARSE_STATUS_SUCCESS && position == -1;
}

// A missing diagonal block (block row 2): the analyses find the structural zero pivot there.
static bool structural_pivot(const Context& c) {
  const Blocked<double> m = blocked<double>(4, 2, 2);
  const auto dir = CUSPARSE_DIRECTION_ROW;
  const int nnzb = int(m.col.size());
  const std::vector<double> val = m.pack(dir);
  double* d_val = upload(val);
  int *d_row = upload(m.row), *d_col = upload(m.col);
  bsrsv2Info_t sv_info;
  bsric02Info_t ic_info;
  SPARSE(cusparseCreateBsrsv2Info(&sv_info));
  SPARSE(cusparseCreateBsric02Info(&ic_info));
  int bytes = 0, more = 0;
  SPARSE(sv_buffer(c.h, dir, CUSPARSE_OPERATION_NON_TRANSPOSE, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd, sv_info,
                   &bytes));
  SPARSE(ic_buffer(c.h, dir, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd, ic_info, &more));
  void* buf = device_bytes(std::max(bytes, more));
  SPARSE(sv_analysis(c.h, dir, CUSPARSE_OPERATION_NON_TRANSPOSE, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd,
                     sv_info, buf));
  int sv_at = -2, ic_at = -2;
  const cusparseStatus_t sv_pivot = cusparseXbsrsv2_zeroPivot(c.h, sv_info, &sv_at);
  SPARSE(ic_analysis(c.h, dir, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd, ic_info, buf));
  const cusparseStatus_t ic_pivot = cusparseXbsric02_zeroPivot(c.h, ic_info, &ic_at);
  std::printf("structural zero pivot (block row 2 without its diagonal block): bsrsv2 %s at %d, bsric02 %s at %d\n",
              cusparseGetErrorName(sv_pivot), sv_at, cusparseGetErrorName(ic_pivot), ic_at);
  SPARSE(cusparseDestroyBsrsv2Info(sv_info));
  SPARSE(cusparseDestroyBsric02Info(ic_info));
  CUDA(cudaFree(buf)); CUDA(cudaFree(d_val)); CUDA(cudaFree(d_row)); CUDA(cudaFree(d_col));
  return sv_pivot == CUSPARSE_STATUS_ZERO_PIVOT && sv_at == 2 && ic_pivot == CUSPARSE_STATUS_ZERO_PIVOT && ic_at == 2;
}

// IC(0) on the CPU over the blocks' pattern (dense blocks): L L^H = A there, L in the lower
// triangle of the dense result.
template <class T>
static std::vector<T> cpu_ic0(const Blocked<T>& m) {
  std::vector<T> x = m.a;
  const int n = m.n;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) {
      if (!m.in(i, j)) continue;
      T s = x[i * n + j];
      for (int k = 0; k < j; ++k)
        if (m.in(i, k) && m.in(j, k)) s -= x[i * n + k] * conj_of(x[j * n + k]);
      x[i * n + j] = i == j ? T(std::sqrt(std::real(s))) : s / x[j * n + j];
    }
  return x;
}

template <class T>
static bool bsric(const Context& c) {
  const Blocked<T> m = blocked<T>(5, 3);
  const auto dir = CUSPARSE_DIRECTION_COLUMN;
  const int nnzb = int(m.col.size());
  const std::vector<T> val = m.pack(dir);
  T* d_val = upload(val);
  int *d_row = upload(m.row), *d_col = upload(m.col);
  bsric02Info_t info;
  SPARSE(cusparseCreateBsric02Info(&info));
  int bytes = 0;
  SPARSE(ic_buffer(c.h, dir, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd, info, &bytes));
  void* buf = device_bytes(bytes);
  SPARSE(ic_analysis(c.h, dir, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd, info, buf));
  SPARSE(ic(c.h, dir, m.mb, nnzb, c.general, d_val, d_row, d_col, m.bd, info, buf));
  int position = -2;
  const cusparseStatus_t pivot = cusparseXbsric02_zeroPivot(c.h, info, &position);
  const std::vector<T> got = m.unpack(download(d_val, val.size()), dir), want = cpu_ic0(m);
  double err = 0, scale = 1;
  for (int i = 0; i < m.n; ++i)
    for (int j = 0; j <= i; ++j)
      if (m.in(i, j)) err = std::max(err, double(std::abs(got[i * m.n + j] - want[i * m.n + j])));
  for (const T& w : want) scale = std::max(scale, double(std::abs(w)));
  const bool ok = err / scale < Type<T>::tol;
  std::printf("bsric02 (%s, column-major blocks): %s, zero pivot %d, lower triangle matches the CPU's IC(0) %s, L(0,0) = %.4f\n",
              Type<T>::name, cusparseGetErrorName(pivot), position, yes(ok), double(std::abs(got[0])));
  SPARSE(cusparseDestroyBsric02Info(info));
  CUDA(cudaFree(buf)); CUDA(cudaFree(d_val)); CUDA(cudaFree(d_row)); CUDA(cudaFree(d_col));
  return ok && pivot == CUSPARSE_STATUS_SUCCESS && position == -1;
}

// ---- pruning (fp32, fp64): a 6 x 5 dense matrix (column-major, lda 7) of distinct magnitudes
#define PRUNE_CALLS(T, P)                                                                                             \
  inline cusparseStatus_t prune_dense_size(cusparseHandle_t h, int m, int n, const T* a, int lda, const T* t,        \
                                           cusparseMatDescr_t d, size_t* bytes) {                                    \
    return cusparse##P##pruneDense2csr_bufferSizeExt(h, m, n, a, lda, t, d, nullptr, nullptr, nullptr, bytes);       \
  }                                                                                                                   \
  inline cusparseStatus_t prune_dense_nnz(cusparseHandle_t h, int m, int n, const T* a, int lda, const T* t,         \
                                          cusparseMatDescr_t d, int* row, int* nnz, void* buf) {                     \
    return cusparse##P##pruneDense2csrNnz(h, m, n, a, lda, t, d, row, nnz, buf);                                     \
  }                                                                                                                   \
  inline cusparseStatus_t prune_dense(cusparseHandle_t h, int m, int n, const T* a, int lda, const T* t,             \
                                      cusparseMatDescr_t d, T* val, const int* row, int* col, void* buf) {           \
    return cusparse##P##pruneDense2csr(h, m, n, a, lda, t, d, val, row, col, buf);                                   \
  }                                                                                                                   \
  inline cusparseStatus_t prune_csr_size(cusparseHandle_t h, int m, int n, int nnz, cusparseMatDescr_t da,           \
                                         const T* va, const int* ra, const int* ca, const T* t,                      \
                                         cusparseMatDescr_t dc, size_t* bytes) {                                     \
    return cusparse##P##pruneCsr2csr_bufferSizeExt(h, m, n, nnz, da, va, ra, ca, t, dc, nullptr, nullptr, nullptr,   \
                                                   bytes);                                                           \
  }                                                                                                                   \
  inline cusparseStatus_t prune_csr_nnz(cusparseHandle_t h, int m, int n, int nnz, cusparseMatDescr_t da,            \
                                        const T* va, const int* ra, const int* ca, const T* t, cusparseMatDescr_t dc, \
                                        int* row, int* total, void* buf) {                                           \
    return cusparse##P##pruneCsr2csrNnz(h, m, n, nnz, da, va, ra, ca, t, dc, row, total, buf);                       \
  }                                                                                                                   \
  inline cusparseStatus_t prune_csr(cusparseHandle_t h, int m, int n, int nnz, cusparseMatDescr_t da, const T* va,   \
                                    const int* ra, const int* ca, const T* t, cusparseMatDescr_t dc, T* val,         \
                                    const int* row, int* col, void* buf) {                                           \
    return cusparse##P##pruneCsr2csr(h, m, n, nnz, da, va, ra, ca, t, dc, val, row, col, buf);                       \
  }                                                                                                                   \
  inline cusparseStatus_t prune_dense_pct_size(cusparseHandle_t h, int m, int n, const T* a, int lda, float p,       \
                                               cusparseMatDescr_t d, pruneInfo_t info, size_t* bytes) {              \
    return cusparse##P##pruneDense2csrByPercentage_bufferSizeExt(h, m, n, a, lda, p, d, nullptr, nullptr, nullptr,   \
                                                                 info, bytes);                                       \
  }                                                                                                                   \
  inline cusparseStatus_t prune_dense_pct_nnz(cusparseHandle_t h, int m, int n, const T* a, int lda, float p,        \
                                              cusparseMatDescr_t d, int* row, int* nnz, pruneInfo_t info,            \
                                              void* buf) {                                                           \
    return cusparse##P##pruneDense2csrNnzByPercentage(h, m, n, a, lda, p, d, row, nnz, info, buf);                   \
  }                                                                                                                   \
  inline cusparseStatus_t prune_dense_pct(cusparseHandle_t h, int m, int n, const T* a, int lda, float p,            \
                                          cusparseMatDescr_t d, T* val, const int* row, int* col, pruneInfo_t info,  \
                                          void* buf) {                                                               \
    return cusparse##P##pruneDense2csrByPercentage(h, m, n, a, lda, p, d, val, row, col, info, buf);                 \
  }                                                                                                                   \
  inline cusparseStatus_t prune_csr_pct_nnz(cusparseHandle_t h, int m, int n, int nnz, cusparseMatDescr_t da,        \
                                            const T* va, const int* ra, const int* ca, float p,                      \
                                            cusparseMatDescr_t dc, int* row, int* total, pruneInfo_t info,           \
                                            void* buf) {                                                             \
    return cusparse##P##pruneCsr2csrNnzByPercentage(h, m, n, nnz, da, va, ra, ca, p, dc, row, total, info, buf);     \
  }                                                                                                                   \
  inline cusparseStatus_t prune_csr_pct(cusparseHandle_t h, int m, int n, int nnz, cusparseMatDescr_t da,            \
                                        const T* va, const int* ra, const int* ca, float p, cusparseMatDescr_t dc,   \
                                        T* val, const int* row, int* col, pruneInfo_t info, void* buf) {             \
    return cusparse##P##pruneCsr2csrByPercentage(h, m, n, nnz, da, va, ra, ca, p, dc, val, row, col, info, buf);     \
  }
PRUNE_CALLS(__half, H)
PRUNE_CALLS(float, S)
PRUNE_CALLS(double, D)

struct CpuCsr {
  std::vector<int> row{0}, col;
  std::vector<double> val;
};
// What pruning keeps of (i, j, value) entries given row by row: |value| > threshold.
static CpuCsr keep(int m, const std::vector<std::vector<std::pair<int, double>>>& rows, double threshold, int base) {
  CpuCsr c;
  c.row[0] = base;
  for (int i = 0; i < m; ++i) {
    for (auto [j, v] : rows[i])
      if (std::fabs(v) > threshold) c.col.push_back(j + base), c.val.push_back(v);
    c.row.push_back(int(c.col.size()) + base);
  }
  return c;
}
// NVIDIA's choice of threshold for a percentage: the sorted magnitudes' element at
// floor(count * percentage / 100), clamped to the elements (on the H100 30 elements pruned by
// 40% keep 17, 17 by 50% keep 8).
static double percentile(std::vector<double> v, float percentage) {
  for (double& x : v) x = std::fabs(x);
  std::sort(v.begin(), v.end());
  int pos = int(std::floor(double(v.size()) * (percentage / 100.0)));
  pos = std::min(std::max(pos, 0), int(v.size()) - 1);
  return v[pos];
}

template <class T>
static bool same(const CpuCsr& want, const std::vector<int>& row, const std::vector<int>& col, const std::vector<T>& val) {
  if (row != want.row || col != want.col || val.size() != want.val.size()) return false;
  for (size_t k = 0; k < val.size(); ++k)
    if (std::fabs(double(val[k]) - want.val[k]) > 1e-6 * std::max(1.0, std::fabs(want.val[k]))) return false;
  return true;
}

template <class T>
static bool prune(const Context& c) {
  const int m = 6, n = 5, lda = 7;
  std::vector<T> a(lda * n, T(0));
  std::vector<std::vector<std::pair<int, double>>> dense_rows(m);
  std::vector<double> all;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      const double v = ((i * 7 + j * 3) % 11 - 5) * 0.125 + (i + j) * 0.01 * ((i + j) % 2 ? 1 : -1);
      a[i + j * lda] = T(v);
      all.push_back(double(T(v)));
    }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) dense_rows[i].push_back({j, double(a[i + j * lda])});
  cusparseMatDescr_t dc;  // C one-based
  SPARSE(cusparseCreateMatDescr(&dc));
  SPARSE(cusparseSetMatIndexBase(dc, CUSPARSE_INDEX_BASE_ONE));
  T* d_a = upload(a);
  int* d_row = upload(std::vector<int>(m + 1, 0));
  // By threshold, the threshold and nnz total in host memory.
  const T threshold = T(0.3);
  size_t bytes = 0;
  SPARSE(prune_dense_size(c.h, m, n, d_a, lda, &threshold, dc, &bytes));
  void* buf = device_bytes(bytes);
  int nnz = -1;
  SPARSE(prune_dense_nnz(c.h, m, n, d_a, lda, &threshold, dc, d_row, &nnz, buf));
  T* d_val = static_cast<T*>(device_bytes(nnz * sizeof(T)));
  int* d_col = static_cast<int*>(device_bytes(nnz * sizeof(int)));
  SPARSE(prune_dense(c.h, m, n, d_a, lda, &threshold, dc, d_val, d_row, d_col, buf));
  const CpuCsr want = keep(m, dense_rows, double(threshold), 1);
  const bool dense_ok = same(want, download(d_row, m + 1), download(d_col, nnz), download(d_val, nnz));
  std::printf("pruneDense2csr (%s, |a| > 0.3, C one-based): %d of %d kept, matches the CPU %s\n", Type<T>::name, nnz,
              m * n, yes(dense_ok));
  // The same CSR pruned again by 0.5, the threshold and nnz total in device memory.
  cusparseMatDescr_t da;
  SPARSE(cusparseCreateMatDescr(&da));
  SPARSE(cusparseSetMatIndexBase(da, CUSPARSE_INDEX_BASE_ONE));
  std::vector<std::vector<std::pair<int, double>>> csr_rows(m);
  for (int i = 0; i < m; ++i)
    for (int k = want.row[i] - 1; k < want.row[i + 1] - 1; ++k) csr_rows[i].push_back({want.col[k] - 1, want.val[k]});
  const T t2 = T(0.5);
  T* d_t2 = upload(std::vector<T>{t2});
  int* d_total = upload(std::vector<int>{-1});
  int* d_row2 = upload(std::vector<int>(m + 1, 0));
  SPARSE(prune_csr_size(c.h, m, n, nnz, da, d_val, d_row, d_col, &t2, dc, &bytes));
  void* buf2 = device_bytes(bytes);
  SPARSE(cusparseSetPointerMode(c.h, CUSPARSE_POINTER_MODE_DEVICE));
  SPARSE(prune_csr_nnz(c.h, m, n, nnz, da, d_val, d_row, d_col, d_t2, dc, d_row2, d_total, buf2));
  const int nnz2 = download(d_total, 1)[0];
  T* d_val2 = static_cast<T*>(device_bytes(nnz2 * sizeof(T)));
  int* d_col2 = static_cast<int*>(device_bytes(nnz2 * sizeof(int)));
  SPARSE(prune_csr(c.h, m, n, nnz, da, d_val, d_row, d_col, d_t2, dc, d_val2, d_row2, d_col2, buf2));
  SPARSE(cusparseSetPointerMode(c.h, CUSPARSE_POINTER_MODE_HOST));
  const bool csr_ok = same(keep(m, csr_rows, double(t2), 1), download(d_row2, m + 1), download(d_col2, nnz2),
                           download(d_val2, nnz2));
  std::printf("pruneCsr2csr (%s, |a| > 0.5, threshold and nnz in device memory): %d of %d kept, matches the CPU %s\n",
              Type<T>::name, nnz2, nnz, yes(csr_ok));
  // By percentage (40% of the dense matrix's elements pruned, then 50% of the CSR's), with a prune info.
  pruneInfo_t info;
  SPARSE(cusparseCreatePruneInfo(&info));
  SPARSE(prune_dense_pct_size(c.h, m, n, d_a, lda, 40.0f, dc, info, &bytes));
  void* buf3 = device_bytes(bytes);
  int nnz3 = -1;
  int* d_row3 = upload(std::vector<int>(m + 1, 0));
  SPARSE(prune_dense_pct_nnz(c.h, m, n, d_a, lda, 40.0f, dc, d_row3, &nnz3, info, buf3));
  T* d_val3 = static_cast<T*>(device_bytes(nnz3 * sizeof(T)));
  int* d_col3 = static_cast<int*>(device_bytes(nnz3 * sizeof(int)));
  SPARSE(prune_dense_pct(c.h, m, n, d_a, lda, 40.0f, dc, d_val3, d_row3, d_col3, info, buf3));
  const bool pct_ok = same(keep(m, dense_rows, percentile(all, 40.0f), 1), download(d_row3, m + 1),
                           download(d_col3, nnz3), download(d_val3, nnz3));
  int nnz4 = -1;
  int* d_row4 = upload(std::vector<int>(m + 1, 0));
  SPARSE(prune_csr_pct_nnz(c.h, m, n, nnz, da, d_val, d_row, d_col, 50.0f, dc, d_row4, &nnz4, info, buf3));
  T* d_val4 = static_cast<T*>(device_bytes(nnz4 * sizeof(T)));
  int* d_col4 = static_cast<int*>(device_bytes(nnz4 * sizeof(int)));
  SPARSE(prune_csr_pct(c.h, m, n, nnz, da, d_val, d_row, d_col, 50.0f, dc, d_val4, d_row4, d_col4, info, buf3));
  std::vector<double> kept(want.val);
  const bool pct_csr_ok = same(keep(m, csr_rows, percentile(kept, 50.0f), 1), download(d_row4, m + 1),
                               download(d_col4, nnz4), download(d_val4, nnz4));
  std::printf("pruneDense2csrByPercentage (%s, 40%%): %d kept, matches the CPU %s; pruneCsr2csrByPercentage (50%%): %d "
              "kept, matches the CPU %s\n",
              Type<T>::name, nnz3, yes(pct_ok), nnz4, yes(pct_csr_ok));
  SPARSE(cusparseDestroyPruneInfo(info));
  SPARSE(cusparseDestroyMatDescr(da));
  SPARSE(cusparseDestroyMatDescr(dc));
  for (void* p : {(void*)d_a, (void*)d_row, buf, (void*)d_val, (void*)d_col, (void*)d_t2, (void*)d_total,
                  (void*)d_row2, buf2, (void*)d_val2, (void*)d_col2, buf3, (void*)d_row3, (void*)d_val3,
                  (void*)d_col3, (void*)d_row4, (void*)d_val4, (void*)d_col4})
    CUDA(cudaFree(p));
  return dense_ok && csr_ok && pct_ok && pct_csr_ok;
}

int main() {
  Context c;
  SPARSE(cusparseCreate(&c.h));
  SPARSE(cusparseCreateMatDescr(&c.general));
  bool ok = true;
  ok &= mv<float>(c, CUSPARSE_DIRECTION_ROW);
  ok &= mv<double>(c, CUSPARSE_DIRECTION_COLUMN);
  ok &= mv<cf>(c, CUSPARSE_DIRECTION_ROW);
  ok &= mv<cd>(c, CUSPARSE_DIRECTION_COLUMN);
  ok &= xmv<double>(c);
  ok &= xmv<cd>(c);
  ok &= mm<double>(c, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= mm<double>(c, CUSPARSE_OPERATION_TRANSPOSE);
  ok &= mm<cf>(c, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= sv<float>(c, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= sv<double>(c, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= sv<double>(c, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_OPERATION_TRANSPOSE);
  ok &= sv<cf>(c, CUSPARSE_FILL_MODE_UPPER, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= sv<cd>(c, CUSPARSE_FILL_MODE_UPPER, CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE);
  ok &= sm<double>(c, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= sm<double>(c, CUSPARSE_FILL_MODE_UPPER, CUSPARSE_OPERATION_TRANSPOSE);
  ok &= sm<cd>(c, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_OPERATION_NON_TRANSPOSE);
  ok &= structural_pivot(c);
  ok &= bsric<double>(c);
  ok &= bsric<cd>(c);
  ok &= prune<__half>(c);
  ok &= prune<float>(c);
  ok &= prune<double>(c);
  SPARSE(cusparseDestroyMatDescr(c.general));
  SPARSE(cusparseDestroy(c.h));
  std::printf("cusparse_bsr: %s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
