// Probe (run by hand on the GPU machine:
//   nvcc -o /tmp/bsrsm2_replay_probe tests/gpu/bsrsm2_replay_probe.cu -lcusparse && /tmp/bsrsm2_replay_probe):
// what a resume replays for a bsrsm2 info, done natively. vmcuda's resume makes a new handle and
// a new info and runs the recorded calls again with the same arguments on the same device
// memory (api/libs/cusparse.calls). Before the fix it replayed only cusparseCreateBsrsm2Info and
// cusparse?bsrsm2_analysis, and NVIDIA's library answered CUSPARSE_STATUS_INVALID_VALUE (3) on the
// H100. Read from libcusparse.so.12 (12.6.3, CUDA 13.0): bsrsm2_bufferSize writes the number of
// right-hand sides n (and the buffer's layout) into the info, which cusparseCreateBsrsm2Info
// zeroes, and bsrsm2_analysis answers 3 when its n is larger than the info's. The probe checks
// that on the GPU, the fix (bufferSize replayed before the analysis) and bsrsv2 for comparison.
// Expected: "replay without bufferSize: 3", "replay with bufferSize: 0 ... solve matches yes",
// "bufferSize n=1 then analysis n=3: 3", "bufferSize n=5 then analysis n=3: 0",
// "bsrsv2 analysis on a new info without bufferSize: 0".
#define DISABLE_CUSPARSE_DEPRECATED
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cmath>
#include <cstdio>
#include <vector>

#define CUDA(x)                                                                      \
  do {                                                                               \
    if (cudaError_t e_ = (x); e_ != cudaSuccess) {                                   \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e_));                           \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

namespace {

constexpr int kMb = 4, kBd = 3, kN = 3, kRows = kMb * kBd;

template <class T>
T* upload(const std::vector<T>& v) {
  void* d = nullptr;
  if (cudaMalloc(&d, v.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(d);
}

struct Problem {
  std::vector<int> row, col;
  std::vector<double> val;  // row-major blocks
  double *d_val = nullptr, *d_b = nullptr, *d_x = nullptr;
  int *d_row = nullptr, *d_col = nullptr;
  void* buf = nullptr;
  int nnzb = 0;
};

// Block lower bidiagonal, diagonally dominant (as tests/cuda/cusparse_bsr.cu's sm(), lower part).
Problem make() {
  Problem p;
  p.row.push_back(0);
  for (int bi = 0; bi < kMb; ++bi) {
    for (int bj = bi > 0 ? bi - 1 : 0; bj <= bi; ++bj) {
      p.col.push_back(bj);
      for (int s = 0; s < kBd * kBd; ++s) {
        const int i = bi * kBd + s / kBd, j = bj * kBd + s % kBd;
        p.val.push_back(i == j ? 4.0 + 0.25 * (i % 3) : -(0.3 + 0.05 * ((i + 2 * j) % 5)));
      }
    }
    p.row.push_back(int(p.col.size()));
  }
  p.nnzb = int(p.col.size());
  std::vector<double> b(kRows * kN);
  for (size_t i = 0; i < b.size(); ++i) b[i] = double(i % 5) - 1.5;
  p.d_val = upload(p.val), p.d_row = upload(p.row), p.d_col = upload(p.col), p.d_b = upload(b);
  p.d_x = upload(std::vector<double>(kRows * kN, 0.0));
  return p;
}

const char* name(cusparseStatus_t s) { return cusparseGetErrorName(s); }

cusparseStatus_t buffer_size(cusparseHandle_t h, cusparseMatDescr_t d, const Problem& p, int n, bsrsm2Info_t info,
                             int* bytes) {
  return cusparseDbsrsm2_bufferSize(h, CUSPARSE_DIRECTION_ROW, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                    CUSPARSE_OPERATION_NON_TRANSPOSE, kMb, n, p.nnzb, d, p.d_val, p.d_row, p.d_col, kBd,
                                    info, bytes);
}
cusparseStatus_t analysis(cusparseHandle_t h, cusparseMatDescr_t d, const Problem& p, int n, bsrsm2Info_t info) {
  return cusparseDbsrsm2_analysis(h, CUSPARSE_DIRECTION_ROW, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                  CUSPARSE_OPERATION_NON_TRANSPOSE, kMb, n, p.nnzb, d, p.d_val, p.d_row, p.d_col, kBd,
                                  info, CUSPARSE_SOLVE_POLICY_USE_LEVEL, p.buf);
}
cusparseStatus_t solve(cusparseHandle_t h, cusparseMatDescr_t d, const Problem& p, bsrsm2Info_t info) {
  const double alpha = 2.0;
  return cusparseDbsrsm2_solve(h, CUSPARSE_DIRECTION_ROW, CUSPARSE_OPERATION_NON_TRANSPOSE,
                               CUSPARSE_OPERATION_NON_TRANSPOSE, kMb, kN, p.nnzb, &alpha, d, p.d_val, p.d_row, p.d_col,
                               kBd, info, p.d_b, kRows, p.d_x, kRows, CUSPARSE_SOLVE_POLICY_USE_LEVEL, p.buf);
}
std::vector<double> result(const Problem& p) {
  std::vector<double> x(kRows * kN);
  cudaMemcpy(x.data(), p.d_x, x.size() * sizeof(double), cudaMemcpyDeviceToHost);
  return x;
}

}  // namespace

int main() {
  int version = 0;
  cusparseHandle_t h;
  if (cusparseStatus_t s = cusparseCreate(&h); s != CUSPARSE_STATUS_SUCCESS)
    return std::printf("cusparseCreate: %s\n", name(s)), 1;
  cusparseGetVersion(h, &version);
  std::printf("cuSPARSE %d\n", version);
  cusparseMatDescr_t d;
  cusparseCreateMatDescr(&d);
  cusparseSetMatFillMode(d, CUSPARSE_FILL_MODE_LOWER);
  Problem p = make();

  // The program: create, bufferSize, analysis, solve.
  bsrsm2Info_t program;
  cusparseCreateBsrsm2Info(&program);
  int bytes = 0;
  const cusparseStatus_t size_st = buffer_size(h, d, p, kN, program, &bytes);
  CUDA(cudaMalloc(&p.buf, bytes ? bytes : 8));
  const cusparseStatus_t an_st = analysis(h, d, p, kN, program);
  const cusparseStatus_t solve_st = solve(h, d, p, program);
  const std::vector<double> want = result(p);
  std::printf("program: bufferSize %s (%d bytes), analysis %s, solve %s\n", name(size_st), bytes, name(an_st),
              name(solve_st));
  cusparseDestroyBsrsm2Info(program);  // as after a resume: the program's info is gone

  // A resume: a new handle, a new info, the recorded calls with the same arguments and memory
  // (the buffer keeps the bytes the program's analysis left, as the restored memory does).
  cusparseHandle_t h2;
  cusparseCreate(&h2);
  bsrsm2Info_t bare;
  cusparseCreateBsrsm2Info(&bare);
  const cusparseStatus_t bare_st = analysis(h2, d, p, kN, bare);
  std::printf("replay without bufferSize: analysis %d (%s)\n", int(bare_st), name(bare_st));
  cusparseDestroyBsrsm2Info(bare);

  bsrsm2Info_t fixed;
  cusparseCreateBsrsm2Info(&fixed);
  int again = 0;
  const cusparseStatus_t size2 = buffer_size(h2, d, p, kN, fixed, &again);
  const cusparseStatus_t an2 = analysis(h2, d, p, kN, fixed);
  CUDA(cudaMemset(p.d_x, 0, kRows * kN * sizeof(double)));
  const cusparseStatus_t solve2 = an2 == CUSPARSE_STATUS_SUCCESS ? solve(h2, d, p, fixed) : an2;
  const std::vector<double> got = result(p);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::fmax(err, std::fabs(got[i] - want[i]));
  std::printf("replay with bufferSize: bufferSize %s (%d bytes), analysis %d (%s), solve %s, solve matches %s\n",
              name(size2), again, int(an2), name(an2), name(solve2),
              solve2 == CUSPARSE_STATUS_SUCCESS && err <= 1e-12 ? "yes" : "no");
  cusparseDestroyBsrsm2Info(fixed);

  // The cause: the info keeps bufferSize's n, and the analysis refuses a larger one.
  for (int n : {1, 5}) {
    bsrsm2Info_t info;
    cusparseCreateBsrsm2Info(&info);
    int b = 0;
    buffer_size(h2, d, p, n, info, &b);
    Problem q = p;  // a buffer of the size this bufferSize asked for
    CUDA(cudaMalloc(&q.buf, b ? b : 8));
    const cusparseStatus_t s = analysis(h2, d, q, kN, info);
    std::printf("bufferSize n=%d (%d bytes) then analysis n=%d: %d (%s)\n", n, b, kN, int(s), name(s));
    cusparseDestroyBsrsm2Info(info);
    cudaFree(q.buf);
  }

  // bsrsv2 for comparison (its replay has no bufferSize either, and is carried).
  bsrsv2Info_t sv;
  cusparseCreateBsrsv2Info(&sv);
  int sv_bytes = 0;
  bsrsv2Info_t sized;
  cusparseCreateBsrsv2Info(&sized);
  cusparseDbsrsv2_bufferSize(h2, CUSPARSE_DIRECTION_ROW, CUSPARSE_OPERATION_NON_TRANSPOSE, kMb, p.nnzb, d, p.d_val,
                             p.d_row, p.d_col, kBd, sized, &sv_bytes);
  void* sv_buf = nullptr;
  CUDA(cudaMalloc(&sv_buf, sv_bytes ? sv_bytes : 8));
  const cusparseStatus_t sv_st =
      cusparseDbsrsv2_analysis(h2, CUSPARSE_DIRECTION_ROW, CUSPARSE_OPERATION_NON_TRANSPOSE, kMb, p.nnzb, d, p.d_val,
                               p.d_row, p.d_col, kBd, sv, CUSPARSE_SOLVE_POLICY_USE_LEVEL, sv_buf);
  std::printf("bsrsv2 analysis on a new info without bufferSize: %d (%s)\n", int(sv_st), name(sv_st));
  cusparseDestroyBsrsv2Info(sv);
  cusparseDestroyBsrsv2Info(sized);
  cudaFree(sv_buf);
  cusparseDestroyMatDescr(d);
  cusparseDestroy(h2);
  cusparseDestroy(h);
  return 0;
}
