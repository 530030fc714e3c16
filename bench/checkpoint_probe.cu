// NVIDIA's own process checkpoint (cuCheckpointProcess*, driver r550+) timed on a native
// process holding N GiB of device memory: the figure vmcuda's suspend is compared with in
// docs/benchmarks.md. A child process fills its memory and waits; this process locks it,
// checkpoints it (device memory to host memory inside the child, GPU memory released),
// restores and unlocks it; then the child checks every word.
//   checkpoint_probe GIB
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda.h>
#include <cuda_runtime.h>

namespace {
using clk = std::chrono::steady_clock;
double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

__global__ void fill(unsigned* p, size_t words) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = unsigned(i * 2654435761u) ^ 0x5a5a5a5au;
}
__global__ void verify(const unsigned* p, size_t words, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    if (p[i] != (unsigned(i * 2654435761u) ^ 0x5a5a5a5au)) atomicAdd(wrong, 1ull);
}

int child(size_t bytes, int ready_fd, int go_fd) {
  unsigned* d = nullptr;
  unsigned long long* wrong = nullptr;
  if (cudaMalloc(&d, bytes) != cudaSuccess || cudaMalloc(&wrong, sizeof *wrong) != cudaSuccess) {
    std::fprintf(stderr, "child: cudaMalloc of %zu bytes failed\n", bytes);
    return 1;
  }
  const size_t words = bytes / sizeof(unsigned);
  fill<<<1024, 256>>>(d, words);
  cudaMemset(wrong, 0, sizeof *wrong);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  char c = 'r';
  if (write(ready_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 1) return 1;
  verify<<<1024, 256>>>(d, words, wrong);
  unsigned long long h = ~0ull;
  const cudaError_t e = cudaMemcpy(&h, wrong, sizeof h, cudaMemcpyDeviceToHost);
  std::printf("child after restore: %s, %llu wrong words of %zu\n", cudaGetErrorString(e), h, words);
  return e == cudaSuccess && h == 0 ? 0 : 1;
}

bool ok(CUresult e, const char* what) {
  if (e == CUDA_SUCCESS) return true;
  const char* s = nullptr;
  cuGetErrorName(e, &s);
  std::fprintf(stderr, "%s: %s\n", what, s ? s : "?");
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  const size_t gib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const size_t bytes = gib << 30;
  int ready[2], go[2];
  if (pipe(ready) || pipe(go)) return 1;
  const pid_t pid = fork();  // before this process touches CUDA
  if (pid == 0) _exit(child(bytes, ready[1], go[0]));
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  if (!ok(cuInit(0), "cuInit")) return 1;
  int driver = 0;
  cuDriverGetVersion(&driver);
  std::printf("== %zu GiB, driver API %d, child pid %d\n", gib, driver, int(pid));
  CUcheckpointLockArgs lock_args{};
  lock_args.timeoutMs = 10000;
  auto t = clk::now();
  bool good = ok(cuCheckpointProcessLock(pid, &lock_args), "cuCheckpointProcessLock");
  const double lock_s = since(t);
  t = clk::now();
  good = good && ok(cuCheckpointProcessCheckpoint(pid, nullptr), "cuCheckpointProcessCheckpoint");
  const double ckpt_s = since(t);
  if (good) std::fflush(stdout), std::system("nvidia-smi --query-gpu=memory.used --format=csv,noheader");
  t = clk::now();
  good = good && ok(cuCheckpointProcessRestore(pid, nullptr), "cuCheckpointProcessRestore");
  const double restore_s = since(t);
  t = clk::now();
  good = good && ok(cuCheckpointProcessUnlock(pid, nullptr), "cuCheckpointProcessUnlock");
  const double unlock_s = since(t);
  if (good)
    std::printf("lock %.1f ms, checkpoint %.1f ms (%.1f GB/s), restore %.1f ms (%.1f GB/s), unlock %.1f ms\n",
                lock_s * 1e3, ckpt_s * 1e3, bytes / ckpt_s / 1e9, restore_s * 1e3, bytes / restore_s / 1e9,
                unlock_s * 1e3);
  c = 'g';
  if (write(go[1], &c, 1) != 1) return 1;
  int status = 0;
  waitpid(pid, &status, 0);
  return good && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
