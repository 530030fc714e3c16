// vmcuda CUDA test program: CUDA IPC between two processes (nvcc -cudart shared). The parent
// forks before any CUDA call (as CUDA requires), allocates and fills device memory, and hands
// the child a memory handle and an interprocess event handle through a pipe; the child opens
// them, reads the parent's bytes, writes its own with a kernel, waits on the parent's event
// and closes; the parent checks what the child wrote. Through vmcuda both processes are
// programs of one VM. Prints NVIDIA's answers at the edges ("probe" lines) and one line per
// check (the child's lines first: the processes take turns); exits non-zero on any failure.
// `ipc export` and `ipc open HANDLE` are two halves for tests/cuda/ipc_vm_test.sh: a program
// that exports (prints its handle in hex, keeps it until stdin closes) and one that opens it
// (prints the answer), run in one VM or in two; `ipc hold` opens a handle read on stdin and
// reads through it twice (tests/cuda/upgrade_test.sh: across an upgrade).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

// p[i] = p[i] * mul + add for i < n (tests/executor/fake_kernels.cc has its CPU twin).
__global__ void scale_add(int* p, int mul, int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * mul + add;
}

static int failures = 0;
static void check(const char* who, const char* what, bool ok) {
  std::printf("%s: %s: %s\n", who, what, ok ? "ok" : "MISMATCH");
  if (!ok) ++failures;
}
static void probe(const char* who, const char* what, cudaError_t e) {
  std::printf("%s: probe %s = %s\n", who, what, cudaGetErrorName(e));
}

static bool put(int fd, const void* p, size_t n) { return write(fd, p, n) == static_cast<ssize_t>(n); }
static bool get(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n) {
    const ssize_t got = read(fd, b, n);
    if (got <= 0) return false;
    b += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

constexpr int kSmall = 1000;          // ints: carved from a shared chunk
constexpr int kLarge = 3 << 18;       // ints (3 MiB): memory of its own
constexpr int kThreads = 256;

static int child(int from_parent, int to_parent) {
  const char* who = "child";
  cudaIpcMemHandle_t small_h, large_h;
  cudaIpcEventHandle_t event_h;
  if (!get(from_parent, &small_h, sizeof small_h) || !get(from_parent, &large_h, sizeof large_h) ||
      !get(from_parent, &event_h, sizeof event_h))
    return 2;
  int* small = nullptr;
  int* large = nullptr;
  check(who, "open small", cudaIpcOpenMemHandle(reinterpret_cast<void**>(&small), small_h,
                                                cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
  check(who, "open large", cudaIpcOpenMemHandle(reinterpret_cast<void**>(&large), large_h,
                                                cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
  int* again = nullptr;
  check(who, "open small again gives the same pointer",
        cudaIpcOpenMemHandle(reinterpret_cast<void**>(&again), small_h, cudaIpcMemLazyEnablePeerAccess) ==
                cudaSuccess &&
            again == small);
  cudaPointerAttributes attr{};
  check(who, "opened pointer is device memory",
        cudaPointerGetAttributes(&attr, small) == cudaSuccess && attr.type == cudaMemoryTypeDevice);
  std::vector<int> v(kSmall);
  check(who, "reads the parent's small bytes",
        cudaMemcpy(v.data(), small, kSmall * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  bool same = true;
  for (int i = 0; i < kSmall; ++i) same &= v[i] == i;
  check(who, "small bytes are the parent's", same);
  // The child's kernel writes the parent's memory: small[i] = 2 * i + 1.
  scale_add<<<(kSmall + kThreads - 1) / kThreads, kThreads>>>(small, 2, 1, kSmall);
  // A copy into the large one: its last MiB.
  std::vector<int> w(1 << 18);
  for (size_t i = 0; i < w.size(); ++i) w[i] = -static_cast<int>(i);
  check(who, "writes the parent's large bytes",
        cudaMemcpy(large + (2 << 18), w.data(), w.size() * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  // Before the parent looks: a pageable copy may still be on its way when cudaMemcpy returns.
  check(who, "kernel and copy on the parent's memory done", cudaDeviceSynchronize() == cudaSuccess);
  cudaEvent_t ev = nullptr;
  check(who, "open event", cudaIpcOpenEventHandle(&ev, event_h) == cudaSuccess);
  // A handle of nothing: all its bytes changed.
  cudaIpcMemHandle_t forged = small_h;
  for (char& c : forged.reserved) c = static_cast<char>(~c);
  int* f = nullptr;
  check(who, "a forged handle is refused",
        cudaIpcOpenMemHandle(reinterpret_cast<void**>(&f), forged, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess);
  cudaGetLastError();
  std::fflush(stdout);
  const char done = 'w';
  if (!put(to_parent, &done, 1)) return 2;
  // The parent launches on its memory, records the event and says so; the child waits on it.
  char recorded = 0;
  if (!get(from_parent, &recorded, 1)) return 2;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  check(who, "stream waits on the parent's event", cudaStreamWaitEvent(s, ev, 0) == cudaSuccess);
  check(who, "event synchronize", cudaEventSynchronize(ev) == cudaSuccess);
  check(who, "event query", cudaEventQuery(ev) == cudaSuccess);
  check(who, "reads after the parent's kernel",
        cudaMemcpyAsync(v.data(), small, kSmall * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess &&
            cudaStreamSynchronize(s) == cudaSuccess);
  same = true;
  for (int i = 0; i < kSmall; ++i) same &= v[i] == (2 * i + 1) * 3;
  check(who, "sees the parent's kernel", same);
  float ms = 0;
  probe(who, "elapsed time of an interprocess event", cudaEventElapsedTime(&ms, ev, ev));
  cudaGetLastError();
  check(who, "close small (opened twice)", cudaIpcCloseMemHandle(small) == cudaSuccess);
  check(who, "close small again", cudaIpcCloseMemHandle(small) == cudaSuccess);
  check(who, "close large", cudaIpcCloseMemHandle(large) == cudaSuccess);
  check(who, "destroy event", cudaEventDestroy(ev) == cudaSuccess);
  cudaStreamDestroy(s);
  std::fflush(stdout);
  const char bye = 'c';
  put(to_parent, &bye, 1);
  return failures ? 1 : 0;
}

static int parent(int to_child, int from_child, pid_t pid) {
  const char* who = "parent";
  int *small = nullptr, *large = nullptr;
  check(who, "cudaMalloc small", cudaMalloc(&small, kSmall * sizeof(int)) == cudaSuccess);
  check(who, "cudaMalloc large", cudaMalloc(&large, kLarge * sizeof(int)) == cudaSuccess);
  std::vector<int> v(kSmall);
  for (int i = 0; i < kSmall; ++i) v[i] = i;
  cudaMemcpy(small, v.data(), kSmall * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(large, 0, kLarge * sizeof(int));
  cudaIpcMemHandle_t small_h, large_h, twice;
  check(who, "get small handle", cudaIpcGetMemHandle(&small_h, small) == cudaSuccess);
  check(who, "get large handle", cudaIpcGetMemHandle(&large_h, large) == cudaSuccess);
  check(who, "the same allocation gives the same handle",
        cudaIpcGetMemHandle(&twice, small) == cudaSuccess && std::memcmp(&twice, &small_h, sizeof twice) == 0);
  int* own = nullptr;
  probe(who, "opening its own handle",
        cudaIpcOpenMemHandle(reinterpret_cast<void**>(&own), small_h, cudaIpcMemLazyEnablePeerAccess));
  cudaGetLastError();
  cudaEvent_t plain, timed, ev;
  cudaEventCreateWithFlags(&plain, cudaEventDisableTiming);
  probe(who, "interprocess event with timing", cudaEventCreateWithFlags(&timed, cudaEventInterprocess));
  cudaGetLastError();
  check(who, "interprocess event",
        cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming) == cudaSuccess);
  cudaIpcEventHandle_t event_h;
  probe(who, "event handle of a plain event", cudaIpcGetEventHandle(&event_h, plain));
  cudaGetLastError();
  check(who, "get event handle", cudaIpcGetEventHandle(&event_h, ev) == cudaSuccess);
  std::fflush(stdout);
  if (!put(to_child, &small_h, sizeof small_h) || !put(to_child, &large_h, sizeof large_h) ||
      !put(to_child, &event_h, sizeof event_h))
    return 2;
  char done = 0;
  if (!get(from_child, &done, 1)) return 2;
  // The child wrote small[i] = 2i + 1 and the large one's last MiB.
  check(who, "sees the child's kernel",
        cudaMemcpy(v.data(), small, kSmall * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  bool same = true;
  for (int i = 0; i < kSmall; ++i) same &= v[i] == 2 * i + 1;
  check(who, "small bytes are the child's", same);
  std::vector<int> w(1 << 18);
  cudaMemcpy(w.data(), large + (2 << 18), w.size() * sizeof(int), cudaMemcpyDeviceToHost);
  same = true;
  for (size_t i = 0; i < w.size(); ++i) same &= w[i] == -static_cast<int>(i);
  int head = -1;
  cudaMemcpy(&head, large, sizeof head, cudaMemcpyDeviceToHost);
  check(who, "large bytes are the child's where it wrote", same && head == 0);
  // Work the child waits for: small[i] *= 3, then the event.
  scale_add<<<(kSmall + kThreads - 1) / kThreads, kThreads>>>(small, 3, 0, kSmall);
  check(who, "record interprocess event", cudaEventRecord(ev, 0) == cudaSuccess);
  std::fflush(stdout);
  const char recorded = 'r';
  if (!put(to_child, &recorded, 1)) return 2;
  char bye = 0;
  get(from_child, &bye, 1);
  int status = 0;
  waitpid(pid, &status, 0);
  check(who, "child succeeded", WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Still the parent's: freed once the child closed.
  check(who, "free small", cudaFree(small) == cudaSuccess);
  check(who, "free large", cudaFree(large) == cudaSuccess);
  cudaEventDestroy(ev);
  cudaEventDestroy(plain);
  return failures ? 1 : 0;
}

// Exports 16 ints (41, 42, ...) and prints the handle in hex; keeps them until stdin ends.
static int export_half() {
  int* p = nullptr;
  std::vector<int> v(16);
  for (int i = 0; i < 16; ++i) v[i] = 41 + i;
  cudaIpcMemHandle_t h;
  if (cudaMalloc(&p, v.size() * sizeof(int)) != cudaSuccess ||
      cudaMemcpy(p, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaIpcGetMemHandle(&h, p) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
    return 1;  // (synchronized: another program reads the bytes only after a synchronizing call)
  for (unsigned char c : h.reserved) std::printf("%02x", c);
  std::printf("\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return cudaFree(p) == cudaSuccess ? 0 : 1;
}

static int open_half(const char* hex) {
  cudaIpcMemHandle_t h{};
  if (std::strlen(hex) != 2 * sizeof h.reserved) return 2;
  for (size_t i = 0; i < sizeof h.reserved; ++i) {
    unsigned v = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &v) != 1) return 2;
    h.reserved[i] = static_cast<char>(v);
  }
  int* p = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(reinterpret_cast<void**>(&p), h, cudaIpcMemLazyEnablePeerAccess);
  std::printf("open: %s\n", cudaGetErrorName(e));
  if (e != cudaSuccess) return 0;
  int first = 0;
  cudaMemcpy(&first, p, sizeof first, cudaMemcpyDeviceToHost);
  std::printf("first: %d\n", first);
  std::printf("close: %s\n", cudaGetErrorName(cudaIpcCloseMemHandle(p)));
  return 0;
}

// Connects first (so its connection is older than the exporter's), says `ready`, then opens
// the handle read from stdin and prints its first value; after a second line on stdin (a
// moment later: after an upgrade of the stub, say) prints it again, then closes.
static int hold_half() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) return 2;
  std::printf("ready\n");
  char line[256];
  if (!std::fgets(line, sizeof line, stdin)) return 2;
  line[std::strcspn(line, "\r\n")] = 0;
  cudaIpcMemHandle_t h{};
  if (std::strlen(line) != 2 * sizeof h.reserved) return 2;
  for (size_t i = 0; i < sizeof h.reserved; ++i) {
    unsigned v = 0;
    if (std::sscanf(line + 2 * i, "%2x", &v) != 1) return 2;
    h.reserved[i] = static_cast<char>(v);
  }
  int* p = nullptr;
  std::printf("open: %s\n", cudaGetErrorName(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&p), h,
                                                                     cudaIpcMemLazyEnablePeerAccess)));
  int first = 0;
  cudaError_t e = cudaMemcpy(&first, p, sizeof first, cudaMemcpyDeviceToHost);
  std::printf("first: %s %d\n", cudaGetErrorName(e), first);
  if (!std::fgets(line, sizeof line, stdin)) return 2;
  first = 0;
  e = cudaMemcpy(&first, p, sizeof first, cudaMemcpyDeviceToHost);
  std::printf("again: %s %d\n", cudaGetErrorName(e), first);
  std::printf("close: %s\n", cudaGetErrorName(cudaIpcCloseMemHandle(p)));
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 2 && std::strcmp(argv[1], "export") == 0) return export_half();
  if (argc == 3 && std::strcmp(argv[1], "open") == 0) return open_half(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "hold") == 0) return hold_half();
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return 2;
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    return child(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  const int rc = parent(down[1], up[0], pid);
  std::printf("%s\n", rc == 0 ? "ipc: all checks passed" : "ipc: FAILED");
  return rc;
}
