// cuSPARSE's triangular solve (SpSV) and sparse x sparse product (SpGEMM) through vmcuda's
// libcusparse.so.12 (issue 12 point 3), as NVIDIA's CUDALibrarySamples spsv_csr and
// spgemm do them, each checked against the CPU:
//  - SpSV: a lower-triangular solve L y = alpha x on a CSR matrix of order 8 that also holds
//    upper entries (the fill-mode attribute tells cuSPARSE to take the lower triangle), once
//    with the stored diagonal and once, re-analysed, with a unit diagonal (diag-type attribute);
//  - SpGEMM: C = A B of a 4x5 and a 5x3 CSR matrix of small integers (exact in fp32), the
//    standard sequence: work estimation and compute (each asked for its buffer size first),
//    C's size, its arrays set (cusparseCsrSetPointers), the copy.
// Prints pass/fail and a few rounded values: the same natively, through vmcuda and on the test
// executor (tests/executor/fake_cusparse.cc). The descriptors go before the matrices they name.
// Built with nvcc -cudart shared -lcusparse -lcublas (scripts/build-cuda-tests.sh).
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "library_check.h"

#define SPARSE(call) CHECK_STATUS(call, cusparseStatus_t, CUSPARSE_STATUS_SUCCESS, cusparseGetErrorName)

static void* device_bytes(size_t n) {
  void* d = nullptr;
  CUDA(cudaMalloc(&d, n ? n : 8));
  return d;
}

struct Csr {
  int rows = 0, cols = 0;
  std::vector<int> off{0}, ind;
  std::vector<float> val;
  void add(int c, float v) { ind.push_back(c), val.push_back(v); }
  void end_row() { off.push_back(static_cast<int>(ind.size())), ++rows; }
};

// Forward substitution over the lower triangle (unit: the diagonal taken as 1).
static std::vector<double> lower_solve(const Csr& a, const std::vector<float>& x, float alpha, bool unit) {
  std::vector<double> y(a.rows);
  for (int r = 0; r < a.rows; ++r) {
    double sum = double(alpha) * x[r], diag = 1;
    for (int k = a.off[r]; k < a.off[r + 1]; ++k) {
      if (a.ind[k] == r) diag = unit ? 1 : a.val[k];
      else if (a.ind[k] < r) sum -= a.val[k] * y[a.ind[k]];
    }
    y[r] = sum / diag;
  }
  return y;
}

static bool spsv(cusparseHandle_t h) {
  constexpr int n = 8;
  Csr a;
  a.cols = n;
  for (int r = 0; r < n; ++r) {
    if (r >= 2) a.add(r - 2, -1.0f);
    if (r >= 1) a.add(r - 1, 0.5f);
    a.add(r, 4.0f + r);
    if (r + 3 < n) a.add(r + 3, 7.0f);  // upper: left out by the lower fill mode
    a.end_row();
  }
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = 1.0f + i;
  const float alpha = 2.0f;
  int *d_off = upload(a.off), *d_ind = upload(a.ind);
  float *d_val = upload(a.val), *d_x = upload(x), *d_y = upload(std::vector<float>(n, 0.0f));
  cusparseSpMatDescr_t mat;
  cusparseDnVecDescr_t vx, vy;
  SPARSE(cusparseCreateCsr(&mat, n, n, static_cast<int64_t>(a.ind.size()), d_off, d_ind, d_val, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  SPARSE(cusparseCreateDnVec(&vx, n, d_x, CUDA_R_32F));
  SPARSE(cusparseCreateDnVec(&vy, n, d_y, CUDA_R_32F));
  cusparseFillMode_t fill = CUSPARSE_FILL_MODE_LOWER;
  cusparseDiagType_t diag = CUSPARSE_DIAG_TYPE_NON_UNIT;
  SPARSE(cusparseSpMatSetAttribute(mat, CUSPARSE_SPMAT_FILL_MODE, &fill, sizeof fill));
  SPARSE(cusparseSpMatSetAttribute(mat, CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof diag));
  bool ok = true;
  for (int unit = 0; unit < 2; ++unit) {
    if (unit) {
      diag = CUSPARSE_DIAG_TYPE_UNIT;
      SPARSE(cusparseSpMatSetAttribute(mat, CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof diag));
    }
    cusparseSpSVDescr_t sv;
    SPARSE(cusparseSpSV_createDescr(&sv));
    size_t bytes = 0;
    SPARSE(cusparseSpSV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat, vx, vy, CUDA_R_32F,
                                   CUSPARSE_SPSV_ALG_DEFAULT, sv, &bytes));
    void* buf = device_bytes(bytes < 8 ? 8 : bytes);
    SPARSE(cusparseSpSV_analysis(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat, vx, vy, CUDA_R_32F,
                                 CUSPARSE_SPSV_ALG_DEFAULT, sv, buf));
    SPARSE(cusparseSpSV_solve(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat, vx, vy, CUDA_R_32F,
                              CUSPARSE_SPSV_ALG_DEFAULT, sv));
    const std::vector<float> y = download(d_y, n);
    const std::vector<double> want = lower_solve(a, x, alpha, unit);
    bool same = true;
    for (int i = 0; i < n; ++i) same = same && std::fabs(y[i] - want[i]) <= 1e-4 * (1 + std::fabs(want[i]));
    std::printf("spsv lower %s: %s; y[0]=%.3f y[3]=%.3f y[7]=%.3f\n", unit ? "unit diagonal" : "stored diagonal",
                same ? "pass" : "FAIL", y[0], y[3], y[7]);
    ok = ok && same;
    SPARSE(cusparseSpSV_destroyDescr(sv));
    CUDA(cudaFree(buf));
  }
  SPARSE(cusparseDestroyDnVec(vy));
  SPARSE(cusparseDestroyDnVec(vx));
  SPARSE(cusparseDestroySpMat(mat));
  for (void* p : {static_cast<void*>(d_off), static_cast<void*>(d_ind), static_cast<void*>(d_val),
                  static_cast<void*>(d_x), static_cast<void*>(d_y)})
    CUDA(cudaFree(p));
  return ok;
}

static bool spgemm(cusparseHandle_t h) {
  // A: 4x5, B: 5x3 (small integers: every sum exact).
  Csr a, b;
  a.cols = 5, b.cols = 3;
  const int av[4][5] = {{1, 0, 2, 0, 0}, {0, 3, 0, 0, 1}, {0, 0, 0, 0, 0}, {4, 0, 0, 5, 6}};
  const int bv[5][3] = {{1, 0, 2}, {0, 0, 3}, {0, 4, 0}, {1, 1, 0}, {0, 2, 0}};
  for (const auto& row : av) {
    for (int c = 0; c < 5; ++c)
      if (row[c]) a.add(c, float(row[c]));
    a.end_row();
  }
  for (const auto& row : bv) {
    for (int c = 0; c < 3; ++c)
      if (row[c]) b.add(c, float(row[c]));
    b.end_row();
  }
  int *da_off = upload(a.off), *da_ind = upload(a.ind), *db_off = upload(b.off), *db_ind = upload(b.ind);
  float *da_val = upload(a.val), *db_val = upload(b.val);
  cusparseSpMatDescr_t ma, mb, mc;
  SPARSE(cusparseCreateCsr(&ma, 4, 5, static_cast<int64_t>(a.ind.size()), da_off, da_ind, da_val, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  SPARSE(cusparseCreateCsr(&mb, 5, 3, static_cast<int64_t>(b.ind.size()), db_off, db_ind, db_val, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  SPARSE(cusparseCreateCsr(&mc, 4, 3, 0, nullptr, nullptr, nullptr, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                           CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseSpGEMMDescr_t gm;
  SPARSE(cusparseSpGEMM_createDescr(&gm));
  size_t bytes1 = 0, bytes2 = 0;
  SPARSE(cusparseSpGEMM_workEstimation(h, op, op, &alpha, ma, mb, &beta, mc, CUDA_R_32F, CUSPARSE_SPGEMM_DEFAULT, gm,
                                       &bytes1, nullptr));
  void* buf1 = device_bytes(bytes1);
  SPARSE(cusparseSpGEMM_workEstimation(h, op, op, &alpha, ma, mb, &beta, mc, CUDA_R_32F, CUSPARSE_SPGEMM_DEFAULT, gm,
                                       &bytes1, buf1));
  SPARSE(cusparseSpGEMM_compute(h, op, op, &alpha, ma, mb, &beta, mc, CUDA_R_32F, CUSPARSE_SPGEMM_DEFAULT, gm, &bytes2,
                                nullptr));
  void* buf2 = device_bytes(bytes2);
  SPARSE(cusparseSpGEMM_compute(h, op, op, &alpha, ma, mb, &beta, mc, CUDA_R_32F, CUSPARSE_SPGEMM_DEFAULT, gm, &bytes2,
                                buf2));
  int64_t rows = 0, cols = 0, nnz = 0;
  SPARSE(cusparseSpMatGetSize(mc, &rows, &cols, &nnz));
  int* dc_off = static_cast<int*>(device_bytes((rows + 1) * sizeof(int)));
  int* dc_ind = static_cast<int*>(device_bytes(nnz * sizeof(int)));
  float* dc_val = static_cast<float*>(device_bytes(nnz * sizeof(float)));
  SPARSE(cusparseCsrSetPointers(mc, dc_off, dc_ind, dc_val));
  SPARSE(cusparseSpGEMM_copy(h, op, op, &alpha, ma, mb, &beta, mc, CUDA_R_32F, CUSPARSE_SPGEMM_DEFAULT, gm));
  const std::vector<int> off = download(dc_off, rows + 1), ind = download(dc_ind, nnz);
  const std::vector<float> val = download(dc_val, nnz);
  // C as a dense matrix (whatever order the columns of a row come in) against the CPU's.
  float c[4][3] = {};
  bool ok = rows == 4 && cols == 3 && off[0] == 0 && off[4] == nnz;
  for (int r = 0; ok && r < 4; ++r)
    for (int k = off[r]; k < off[r + 1]; ++k) {
      ok = ok && ind[k] >= 0 && ind[k] < 3;
      if (ok) c[r][ind[k]] += val[k];
    }
  int structural = 0;
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 3; ++j) {
      int want = 0;
      bool any = false;
      for (int k = 0; k < 5; ++k) {
        want += av[r][k] * bv[k][j];
        any = any || (av[r][k] && bv[k][j]);
      }
      structural += any;
      ok = ok && c[r][j] == float(want);
    }
  ok = ok && nnz == structural;
  std::printf("spgemm 4x5 * 5x3: %s; C is %lldx%lld with %lld entries; rows start at %d %d %d %d %d\n",
              ok ? "pass" : "FAIL", (long long)rows, (long long)cols, (long long)nnz, off[0], off[1], off[2], off[3],
              off[4]);
  std::printf("spgemm C row 0: %.0f %.0f %.0f; row 3: %.0f %.0f %.0f\n", c[0][0], c[0][1], c[0][2], c[3][0], c[3][1],
              c[3][2]);
  SPARSE(cusparseSpGEMM_destroyDescr(gm));
  SPARSE(cusparseDestroySpMat(mc));
  SPARSE(cusparseDestroySpMat(mb));
  SPARSE(cusparseDestroySpMat(ma));
  for (void* p : {buf1, buf2, static_cast<void*>(dc_off), static_cast<void*>(dc_ind), static_cast<void*>(dc_val),
                  static_cast<void*>(da_off), static_cast<void*>(da_ind), static_cast<void*>(da_val),
                  static_cast<void*>(db_off), static_cast<void*>(db_ind), static_cast<void*>(db_val)})
    CUDA(cudaFree(p));
  return ok;
}

int main() {
  cusparseHandle_t h;
  SPARSE(cusparseCreate(&h));
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  SPARSE(cusparseSetStream(h, stream));
  const bool a = spsv(h);
  const bool b = spgemm(h);
  SPARSE(cusparseDestroy(h));
  CUDA(cudaStreamDestroy(stream));
  std::printf("cusparse_more: %s\n", a && b ? "all passed" : "FAILED");
  return a && b ? 0 : 1;
}
