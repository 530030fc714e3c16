// vmcuda CUDA test program: memory pool IPC between two processes (nvcc -cudart shared). The
// parent forks before any CUDA call (as CUDA requires), creates a pool that can be shared
// (cudaMemHandleTypePosixFileDescriptor), allocates from it in stream order and fills the
// memory, and hands the child the pool's file descriptor (over a unix socket, SCM_RIGHTS, as
// CUDA's samples do) and the pointer's export data; the child imports the pool and the
// pointer, reads the parent's bytes, writes its own with a kernel and frees its import; the
// parent checks what the child wrote, then frees. Through vmcuda both processes are programs
// of one VM. Prints NVIDIA's answers at the edges ("probe" lines) and one line per check (the
// processes take turns); exits non-zero on any failure.
// `ipc_pool export` and `ipc_pool open PID FD DATA` are two halves for
// tests/cuda/ipc_vm_test.sh: a program that exports a pool and one allocation (prints its
// pid, the pool's descriptor and the pointer's export data in hex; keeps them until stdin
// closes) and one that opens the descriptor through /proc/PID/fd/FD and imports both (prints
// the answers), run in one VM or in two.
#include <fcntl.h>
#include <sys/socket.h>
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

// One message: `n` bytes and, if fd >= 0, a descriptor with them.
static bool send_msg(int sock, const void* p, size_t n, int fd) {
  msghdr msg{};
  iovec iov{const_cast<void*>(p), n};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &msg, 0) == static_cast<ssize_t>(n);
}
static bool recv_msg(int sock, void* p, size_t n, int* fd) {
  msghdr msg{};
  iovec iov{p, n};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(sock, &msg, 0) != static_cast<ssize_t>(n)) return false;
  if (fd) {
    *fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return true;
}

constexpr int kInts = 1 << 16;  // 256 KiB
constexpr int kThreads = 256;

static int child(int sock) {
  const char* who = "child";
  cudaMemPoolPtrExportData data;
  int fd = -1;
  if (!recv_msg(sock, &data, sizeof data, &fd)) return 2;
  check(who, "got a file descriptor", fd >= 0);
  cudaMemPool_t pool = nullptr;
  check(who, "import pool",
        cudaMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                             cudaMemHandleTypePosixFileDescriptor, 0) == cudaSuccess);
  close(fd);  // the pool stays imported
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* own = nullptr;
  probe(who, "allocating from an imported pool", cudaMallocFromPoolAsync(&own, 256, pool, s));
  cudaGetLastError();
  int* p = nullptr;
  check(who, "import pointer", cudaMemPoolImportPointer(reinterpret_cast<void**>(&p), pool, &data) == cudaSuccess);
  cudaPointerAttributes attr{};
  check(who, "imported pointer is device memory",
        cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeDevice);
  std::vector<int> v(kInts);
  check(who, "reads the parent's bytes",
        cudaMemcpy(v.data(), p, kInts * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  bool same = true;
  for (int i = 0; i < kInts; ++i) same &= v[i] == i;
  check(who, "bytes are the parent's", same);
  scale_add<<<(kInts + kThreads - 1) / kThreads, kThreads, 0, s>>>(p, 2, 1, kInts);
  check(who, "kernel on the parent's memory done", cudaStreamSynchronize(s) == cudaSuccess);
  // Export data that names nothing: every byte changed.
  cudaMemPoolPtrExportData forged = data;
  for (unsigned char& c : forged.reserved) c = static_cast<unsigned char>(~c);
  int* f = nullptr;
  check(who, "forged export data is refused",
        cudaMemPoolImportPointer(reinterpret_cast<void**>(&f), pool, &forged) != cudaSuccess);
  cudaGetLastError();
  // Freed before the parent frees it, as CUDA requires.
  check(who, "free the import", cudaFreeAsync(p, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess);
  check(who, "destroy the imported pool", cudaMemPoolDestroy(pool) == cudaSuccess);
  cudaStreamDestroy(s);
  std::fflush(stdout);
  const char done = 'd';
  if (!send_msg(sock, &done, 1, -1)) return 2;
  return failures ? 1 : 0;
}

static int parent(int sock, pid_t pid) {
  const char* who = "parent";
  int types = 0;
  cudaDeviceGetAttribute(&types, cudaDevAttrMemoryPoolSupportedHandleTypes, 0);
  check(who, "pools share by POSIX file descriptor", (types & cudaMemHandleTypePosixFileDescriptor) != 0);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr, plain = nullptr;
  check(who, "create a shareable pool", cudaMemPoolCreate(&pool, &props) == cudaSuccess);
  props.handleTypes = cudaMemHandleTypeNone;
  check(who, "create a plain pool", cudaMemPoolCreate(&plain, &props) == cudaSuccess);
  int fd = -1, plain_fd = -1;
  probe(who, "exporting a plain pool",
        cudaMemPoolExportToShareableHandle(&plain_fd, plain, cudaMemHandleTypePosixFileDescriptor, 0));
  cudaGetLastError();
  check(who, "export the pool",
        cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0) == cudaSuccess &&
            fd >= 0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int* p = nullptr;
  check(who, "allocate from the pool",
        cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p), kInts * sizeof(int), pool, s) == cudaSuccess);
  std::vector<int> v(kInts);
  for (int i = 0; i < kInts; ++i) v[i] = i;
  check(who, "fill it", cudaMemcpyAsync(p, v.data(), kInts * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess &&
                            cudaStreamSynchronize(s) == cudaSuccess);
  cudaMemPoolPtrExportData data;
  check(who, "export the pointer", cudaMemPoolExportPointer(&data, p) == cudaSuccess);
  int* other = nullptr;
  cudaMalloc(&other, 256);
  cudaMemPoolPtrExportData none;
  probe(who, "exporting a cudaMalloc pointer", cudaMemPoolExportPointer(&none, other));
  cudaGetLastError();
  cudaFree(other);
  std::fflush(stdout);
  if (!send_msg(sock, &data, sizeof data, fd)) return 2;
  close(fd);
  char done = 0;
  if (!recv_msg(sock, &done, 1, nullptr)) return 2;
  int status = 0;
  waitpid(pid, &status, 0);
  check(who, "child succeeded", WIFEXITED(status) && WEXITSTATUS(status) == 0);
  check(who, "reads the child's kernel",
        cudaMemcpy(v.data(), p, kInts * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  bool same = true;
  for (int i = 0; i < kInts; ++i) same &= v[i] == 2 * i + 1;
  check(who, "bytes are the child's", same);
  check(who, "free", cudaFreeAsync(p, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess);
  check(who, "destroy the pools", cudaMemPoolDestroy(pool) == cudaSuccess && cudaMemPoolDestroy(plain) == cudaSuccess);
  cudaStreamDestroy(s);
  return failures ? 1 : 0;
}

// Exports a pool and 16 ints (41, 42, ...) from it; prints "PID FD DATA"; keeps them until
// stdin ends.
static int export_half() {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  int* p = nullptr;
  int fd = -1;
  std::vector<int> v(16);
  for (int i = 0; i < 16; ++i) v[i] = 41 + i;
  cudaMemPoolPtrExportData data;
  if (cudaMemPoolCreate(&pool, &props) != cudaSuccess ||
      cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p), v.size() * sizeof(int), pool, nullptr) != cudaSuccess ||
      cudaMemcpy(p, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0) != cudaSuccess ||
      cudaMemPoolExportPointer(&data, p) != cudaSuccess)
    return 1;
  std::printf("%d %d ", static_cast<int>(getpid()), fd);
  for (unsigned char c : data.reserved) std::printf("%02x", c);
  std::printf("\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return cudaFree(p) == cudaSuccess && cudaMemPoolDestroy(pool) == cudaSuccess ? 0 : 1;
}

static int open_half(const char* pid, const char* fd_number, const char* hex) {
  cudaMemPoolPtrExportData data{};
  if (std::strlen(hex) != 2 * sizeof data.reserved) return 2;
  for (size_t i = 0; i < sizeof data.reserved; ++i) {
    unsigned v = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &v) != 1) return 2;
    data.reserved[i] = static_cast<unsigned char>(v);
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/fd/%s", pid, fd_number);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 2;
  cudaMemPool_t pool = nullptr;
  const cudaError_t e = cudaMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                             cudaMemHandleTypePosixFileDescriptor, 0);
  close(fd);
  std::printf("import: %s\n", cudaGetErrorName(e));
  if (e != cudaSuccess) return 0;
  int* p = nullptr;
  std::printf("pointer: %s\n", cudaGetErrorName(cudaMemPoolImportPointer(reinterpret_cast<void**>(&p), pool, &data)));
  int first = 0;
  cudaMemcpy(&first, p, sizeof first, cudaMemcpyDeviceToHost);
  std::printf("first: %d\n", first);
  std::printf("free: %s\n", cudaGetErrorName(cudaFree(p)));
  cudaMemPoolDestroy(pool);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 2 && std::strcmp(argv[1], "export") == 0) return export_half();
  if (argc == 5 && std::strcmp(argv[1], "open") == 0) return open_half(argv[2], argv[3], argv[4]);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    close(sv[0]);
    return child(sv[1]);
  }
  close(sv[1]);
  const int rc = parent(sv[0], pid);
  std::printf("%s\n", rc == 0 ? "ipc_pool: all checks passed" : "ipc_pool: FAILED");
  return rc;
}
