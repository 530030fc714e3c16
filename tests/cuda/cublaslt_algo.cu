// cuBLASLt's algorithm calls through vmcuda's libcublasLt.so.13 (issue 12): ids of the
// algorithms for fp32, an algorithm initialized from the first, its config read and changed,
// its capabilities (a scalar and an array's size), cublasLtMatmulAlgoCheck of the heuristic's
// algorithm, a matmul through it, and the heuristic asked again (vmcuda answers a repeated
// question from its cache: the answer must be the same bytes). Prints only what does not depend
// on which algorithms a library has (ids and tiles differ between cuBLAS releases and the test
// executor's fake); inputs are small integers, so the product is exact. Built with nvcc -cudart
// shared -lcublasLt -lcublas (scripts/build-cuda-tests.sh).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA(call)                                                 \
  do {                                                             \
    cudaError_t e_ = (call);                                       \
    if (e_ != cudaSuccess) {                                       \
      std::printf("%s failed: %s\n", #call, cudaGetErrorName(e_)); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)
static void status(const char* what, cublasStatus_t s) { std::printf("%s: %s\n", what, cublasLtGetStatusName(s)); }
static void yes(const char* what, bool ok) { std::printf("%s: %s\n", what, ok ? "yes" : "no"); }

int main() {
  cublasLtHandle_t lt;
  status("cublasLtCreate", cublasLtCreate(&lt));
  int ids[256], n = 0;
  status("cublasLtMatmulAlgoGetIds", cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                                              CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 256, ids, &n));
  yes("at least one id", n > 0);
  status("GetIds asking for none", cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                                            CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0, ids, &n));
  cublasLtMatmulAlgo_t algo;
  status("cublasLtMatmulAlgoInit(first id)", cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                                                    CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[0], &algo));
  int32_t id = -1;
  size_t written = 0;
  status("ConfigGetAttribute(ID)", cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id,
                                                                       &written));
  yes("  the id it was made from", id == ids[0] && written == sizeof id);
  status("ConfigGetAttribute(ID) with no room and no sizeWritten",
         cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, nullptr, 0, nullptr));
  int32_t splitk = 2, back = 0;
  status("ConfigSetAttribute(SPLITK_NUM 2)",
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk));
  status("ConfigGetAttribute(SPLITK_NUM)",
         cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &back, sizeof back, nullptr));
  yes("  2 read back", back == 2);
  int32_t support = -1;
  status("CapGetAttribute(SPLITK_SUPPORT)",
         cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &support, sizeof support, &written));
  yes("  4 bytes", written == 4);
  status("CapGetAttribute(TILE_IDS) size",
         cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &written));
  yes("  a whole number of tile ids", written % 4 == 0);

  // D (3x2) = A (3x4) B (4x2), column-major fp32, through the heuristic's algorithm.
  const int m = 3, n2 = 2, k = 4;
  std::vector<float> A(m * k), B(k * n2), D(m * n2, 0.0f);
  for (int i = 0; i < m * k; ++i) A[i] = float(i % 5 - 2);
  for (int i = 0; i < k * n2; ++i) B[i] = float(i % 3 + 1);
  float *dA, *dB, *dD;
  CUDA(cudaMalloc(&dA, A.size() * 4));
  CUDA(cudaMalloc(&dB, B.size() * 4));
  CUDA(cudaMalloc(&dD, D.size() * 4));
  CUDA(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
  CUDA(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
  CUDA(cudaMemset(dD, 0, D.size() * 4));
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulPreference_t pref;
  status("cublasLtMatmulDescCreate", cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  status("cublasLtMatrixLayoutCreate(A)", cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
  status("cublasLtMatrixLayoutCreate(B)", cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n2, k));
  status("cublasLtMatrixLayoutCreate(D)", cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n2, m));
  status("cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(&pref));
  uint64_t workspace = 0;
  status("PreferenceSetAttribute(MAX_WORKSPACE_BYTES 0)",
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                              sizeof workspace));
  cublasLtMatmulHeuristicResult_t first{}, again{};
  int returned = 0;
  status("cublasLtMatmulAlgoGetHeuristic",
         cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &first, &returned));
  yes("  one result", returned == 1);
  bool same = true;
  for (int i = 0; i < 3; ++i) {
    std::memset(&again, 0, sizeof again);
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &again, &returned);
    same = same && returned == 1 && std::memcmp(&again, &first, sizeof first) == 0;
  }
  yes("  asked again: the same answer", same);
  cublasLtMatmulHeuristicResult_t checked{};
  status("cublasLtMatmulAlgoCheck(the heuristic's)",
         cublasLtMatmulAlgoCheck(lt, op, la, lb, ld, ld, &first.algo, &checked));
  yes("  no workspace needed", checked.workspaceSize == 0);
  float alpha = 1.0f, beta = 0.0f;
  status("cublasLtMatmul", cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld, &first.algo, nullptr,
                                          0, nullptr));
  CUDA(cudaMemcpy(D.data(), dD, D.size() * 4, cudaMemcpyDeviceToHost));
  std::printf("D:");
  for (float v : D) std::printf(" %g", v);
  std::printf("\n");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(op);
  status("cublasLtDestroy", cublasLtDestroy(lt));
  CUDA(cudaFree(dA));
  CUDA(cudaFree(dB));
  CUDA(cudaFree(dD));
  std::printf("done\n");
  return 0;
}
