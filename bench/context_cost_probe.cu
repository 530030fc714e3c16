// What a CUDA context costs in device memory (issue 10: "a measured fixed cost per context
// and per worker process"): this process holds a context and reads cuMemGetInfo's free
// memory while a child process creates its first context (a vmcuda worker's), then while
// this process creates a second one (a second device context of one worker, or thread mode).
// The child also prints its host-side cost with its first context (VMCUDA_WORKER_HOST_BYTES,
// docs/security.md): resident and pinned memory from /proc/self/status.
//   context_cost_probe [DEVICE]
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// A /proc/self/status field in kB (-1: none).
static long status_kb(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (!std::strncmp(line, field, n) && line[n] == ':') v = std::atol(line + n + 1);
  std::fclose(f);
  return v;
}

static size_t free_now() {
  size_t f = 0, t = 0;
  cuMemGetInfo(&f, &t);
  return f;
}

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  int pipe_up[2], pipe_down[2];
  if (pipe(pipe_up) || pipe(pipe_down)) return 1;
  const pid_t child = fork();
  if (child == 0) {  // the "worker": its first context, then wait to be told to go
    char c;
    if (read(pipe_down[0], &c, 1) != 1) _exit(1);
    CUdevice dev;
    CUcontext ctx;
    const long rss0 = status_kb("VmRSS");
    if (cuInit(0) || cuDeviceGet(&dev, device) || cuCtxCreate(&ctx, nullptr, 0, dev)) _exit(2);
    std::printf("device %d: a process with its first context: VmRSS %.1f MiB (%.1f MiB before cuInit), VmPin %.1f MiB, "
                "VmLck %.1f MiB, threads %ld\n",
                device, status_kb("VmRSS") / 1024.0, rss0 / 1024.0, status_kb("VmPin") / 1024.0,
                status_kb("VmLck") / 1024.0, status_kb("Threads"));
    std::fflush(stdout);
    if (write(pipe_up[1], "r", 1) != 1) _exit(3);
    if (read(pipe_down[0], &c, 1) != 1) _exit(4);
    _exit(0);
  }
  CUdevice dev;
  CUcontext ctx, second;
  if (cuInit(0) || cuDeviceGet(&dev, device) || cuCtxCreate(&ctx, nullptr, 0, dev)) return 2;
  const size_t before = free_now();
  char c;
  if (write(pipe_down[1], "g", 1) != 1 || read(pipe_up[0], &c, 1) != 1) return 3;
  const size_t with_child = free_now();
  if (cuCtxCreate(&second, nullptr, 0, dev)) return 4;
  const size_t with_second = free_now();
  if (write(pipe_down[1], "q", 1) != 1) return 5;
  waitpid(child, nullptr, 0);
  std::printf("device %d: a process's first context %.1f MiB, a second context in a process %.1f MiB\n", device,
              (before - with_child) / 1048576.0, (with_child - with_second) / 1048576.0);
  return 0;
}
