// cuBLASLt through vmcuda's libcublasLt.so.13 (issue 12 point 3), as PyTorch uses it: matmul
// descriptors, layouts and a preference with attributes, the heuristic's algorithm given to
// cublasLtMatmul with a workspace of the program's, the bias epilogue, fp32 and bf16 (fp32
// compute), transposes, and a cuBLAS handle used as the cuBLASLt handle (PyTorch casts its
// cublasHandle_t). Also cublasSetEnvironmentMode, which NVIDIA's cuSOLVER calls and no header
// declares. Inputs are small integers, so every result is exact (bf16 outputs stay below 256):
// the checksums are the same whatever order a GPU sums in, natively, through vmcuda and on the
// test executor. Built with nvcc -cudart shared -lcublasLt -lcublas (scripts/build-cuda-tests.sh).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" cublasStatus_t cublasSetEnvironmentMode(cublasHandle_t handle, int mode);  // in no header

#define CUDA(call)                                                   \
  do {                                                               \
    cudaError_t e_ = (call);                                         \
    if (e_ != cudaSuccess) {                                         \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(e_));   \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)
#define BLAS(call)                                                   \
  do {                                                               \
    cublasStatus_t s_ = (call);                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                               \
      std::printf("%s failed: %s\n", #call, cublasLtGetStatusName(s_)); \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

// Small integers in [-range, range], from a fixed sequence.
static std::vector<float> values(size_t n, unsigned seed, int range) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    v[i] = static_cast<float>(static_cast<int>((seed >> 16) % (2 * range + 1)) - range);
  }
  return v;
}
static double checksum(const std::vector<float>& v) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * static_cast<double>((i % 7) + 1);
  return s;
}

// D = alpha op(A) op(B) + beta C + bias (column-major, bias per row) on the CPU.
static std::vector<float> reference(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& A,
                                    int lda, const std::vector<float>& B, int ldb, float beta,
                                    const std::vector<float>& C, const std::vector<float>& bias) {
  std::vector<float> D(size_t(m) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l)
        s += static_cast<double>(ta ? A[l + i * lda] : A[i + l * lda]) * (tb ? B[j + l * ldb] : B[l + j * ldb]);
      D[i + size_t(j) * m] = static_cast<float>(alpha * s + beta * C[i + size_t(j) * m] + (bias.empty() ? 0 : bias[i]));
    }
  return D;
}

static void* to_device(const std::vector<float>& h, bool bf16) {
  void* d = nullptr;
  if (bf16) {
    std::vector<__nv_bfloat16> b(h.size());
    for (size_t i = 0; i < h.size(); ++i) b[i] = __float2bfloat16(h[i]);
    CUDA(cudaMalloc(&d, b.size() * 2));
    CUDA(cudaMemcpy(d, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  } else {
    CUDA(cudaMalloc(&d, h.size() * 4));
    CUDA(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  }
  return d;
}
static std::vector<float> to_host(const void* d, size_t n, bool bf16) {
  std::vector<float> h(n);
  if (bf16) {
    std::vector<__nv_bfloat16> b(n);
    CUDA(cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) h[i] = __bfloat162float(b[i]);
  } else {
    CUDA(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  }
  return h;
}

struct Case {
  const char* what;
  bool ta, tb;
  int m, n, k;
  bool bf16_in, bf16_out, bias;
  int range;
  float alpha, beta;
};

// One matmul as PyTorch's addmm makes it: descriptor, layouts, preference, heuristic, matmul.
static void run(cublasLtHandle_t lt, cudaStream_t stream, void* workspace, size_t workspace_bytes, const Case& c,
                unsigned seed) {
  const int arows = c.ta ? c.k : c.m, acols = c.ta ? c.m : c.k, brows = c.tb ? c.n : c.k, bcols = c.tb ? c.k : c.n;
  const auto A = values(size_t(arows) * acols, seed, c.range), B = values(size_t(brows) * bcols, seed + 1, c.range),
             C = values(size_t(c.m) * c.n, seed + 2, c.range);
  const auto bias = c.bias ? values(c.m, seed + 3, c.range) : std::vector<float>{};
  void *dA = to_device(A, c.bf16_in), *dB = to_device(B, c.bf16_in), *dC = to_device(C, c.bf16_out);
  void* dBias = c.bias ? to_device(bias, c.bf16_out) : nullptr;
  const cudaDataType in = c.bf16_in ? CUDA_R_16BF : CUDA_R_32F, out = c.bf16_out ? CUDA_R_16BF : CUDA_R_32F;

  cublasLtMatmulDesc_t desc;
  BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (c.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dBias, sizeof dBias));
  }
  cublasLtMatrixLayout_t la, lb, lc;
  BLAS(cublasLtMatrixLayoutCreate(&la, in, arows, acols, arows));
  BLAS(cublasLtMatrixLayoutCreate(&lb, in, brows, bcols, brows));
  BLAS(cublasLtMatrixLayoutCreate(&lc, out, c.m, c.n, c.m));
  cublasLtMatmulPreference_t pref;
  BLAS(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t limit = workspace_bytes;
  BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  BLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &result, &found));
  if (found != 1 || result.state != CUBLAS_STATUS_SUCCESS || result.workspaceSize > workspace_bytes) {
    std::printf("%s: the heuristic found no usable algorithm (%d)\n", c.what, found);
    std::exit(1);
  }
  BLAS(cublasLtMatmul(lt, desc, &c.alpha, dA, la, dB, lb, &c.beta, dC, lc, dC, lc, &result.algo, workspace,
                      workspace_bytes, stream));
  CUDA(cudaStreamSynchronize(stream));
  const auto got = to_host(dC, size_t(c.m) * c.n, c.bf16_out);
  const auto want = reference(c.ta, c.tb, c.m, c.n, c.k, c.alpha, A, arows, B, brows, c.beta, C, bias);
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  std::printf("%s: checksum %.1f, %zu of %zu differ from the CPU's\n", c.what, checksum(got), wrong, got.size());

  // The descriptor's attributes read back: a size query, then the value.
  size_t size = 0;
  int32_t got_ta = -1;
  BLAS(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 0, &size));
  BLAS(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &got_ta, sizeof got_ta, &size));
  uint64_t rows = 0;
  BLAS(cublasLtMatrixLayoutGetAttribute(la, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &size));
  std::printf("  transa read back: %d (%zu bytes), A's rows: %llu\n", got_ta, size, (unsigned long long)rows);

  BLAS(cublasLtMatmulPreferenceDestroy(pref));
  BLAS(cublasLtMatrixLayoutDestroy(lc));
  BLAS(cublasLtMatrixLayoutDestroy(lb));
  BLAS(cublasLtMatrixLayoutDestroy(la));
  BLAS(cublasLtMatmulDescDestroy(desc));
  for (void* p : {dA, dB, dC, dBias})
    if (p) CUDA(cudaFree(p));
}

int main() {
  std::printf("cublasLtGetVersion known: %s\n", cublasLtGetVersion() > 0 ? "yes" : "no");
  std::printf("status name: %s\n", cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE));
  cublasLtHandle_t lt;
  BLAS(cublasLtCreate(&lt));
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasCreate failed\n");
    return 1;
  }
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  const size_t workspace_bytes = 4 << 20;
  void* workspace;
  CUDA(cudaMalloc(&workspace, workspace_bytes));

  const Case cases[] = {
      {"fp32 NN, bias", false, false, 33, 17, 29, false, false, true, 4, 1.0f, 0.0f},
      {"fp32 TN, alpha 2 beta 1", true, false, 24, 40, 31, false, false, false, 4, 2.0f, 1.0f},
      {"bf16 in, fp32 out, NT, bias", false, true, 64, 48, 32, true, false, true, 4, 1.0f, 0.0f},
      {"bf16 in and out, TN, bias", true, false, 32, 16, 16, true, true, true, 2, 1.0f, 0.0f},
  };
  unsigned seed = 11;
  for (const Case& c : cases) run(lt, stream, workspace, workspace_bytes, c, seed += 10);
  // PyTorch's way: its cuBLAS handle (on the stream it uses) is the cuBLASLt handle.
  if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS) return 1;
  std::printf("through the cuBLAS handle:\n");
  run(reinterpret_cast<cublasLtHandle_t>(blas), stream, workspace, workspace_bytes, cases[0], 77);
  run(reinterpret_cast<cublasLtHandle_t>(blas), stream, workspace, workspace_bytes, cases[3], 78);

  // cuSOLVER's call: modes 0 and 1, anything else refused.
  std::printf("cublasSetEnvironmentMode 1: %d, 0: %d, 2: %d\n", cublasSetEnvironmentMode(blas, 1),
              cublasSetEnvironmentMode(blas, 0), cublasSetEnvironmentMode(blas, 2));
  CUDA(cudaFree(workspace));
  CUDA(cudaStreamDestroy(stream));
  if (cublasDestroy(blas) != CUBLAS_STATUS_SUCCESS) return 1;
  BLAS(cublasLtDestroy(lt));
  std::printf("done\n");
  return 0;
}
