// Probe (run by hand on the GPU machine: gcc -I/usr/local/cuda/include interprocess_event_probe.c -lcuda):
// does the driver take a wait on another context's event, interprocess or not, in one process?
// Driver 580 on the H100 (2026-11-27): an interprocess event of another context kills the
// process with SIGSEGV (variant 1); ordinary events are fine (host-stub: driver_event_flags).
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("  %s -> %d\n", #x, r_); } } while (0)
static void run(int variant, unsigned flags, int cross) {
  CUdevice d; CUcontext a, b; CUstream sa, sb; CUevent e;
  cuInit(0); cuDeviceGet(&d, 0);
  CUctxCreateParams p = {0};
  CK(cuCtxCreate(&a, &p, 0, d)); CK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&e, flags));
  CK(cuEventRecord(e, sa));
  CK(cuCtxCreate(&b, &p, 0, d)); CK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
  if (!cross) cuCtxSetCurrent(a);
  CK(cuStreamWaitEvent(cross ? sb : sa, e, 0));
  CK(cuEventQuery(e));
  CK(cuEventSynchronize(e));
  CK(cuStreamSynchronize(cross ? sb : sa));
  printf("variant %d flags %u cross %d: done\n", variant, flags, cross); fflush(stdout);
}
int main() {
  struct { unsigned flags; int cross; } v[] = {
    {CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, 0},
    {CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, 1},
    {CU_EVENT_DISABLE_TIMING, 1},
    {0, 1},
  };
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    if (pid == 0) { run(i, v[i].flags, v[i].cross); _exit(0); }
    int st; waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) printf("variant %d flags %u cross %d: killed by signal %d\n", i, v[i].flags, v[i].cross, WTERMSIG(st));
  }
}
