// A CUDA application (runtime API through guest-lib's libcudart.so.13, dynamically
// linked like an nvcc -cudart shared program) for the VM kill test
// (tests/guest/cuda_vm_job.sh): it keeps a large cudaMemcpy in flight until it is
// killed, and counts the free client slots of /dev/vmcuda0 for the check that a killed
// process's slot comes back.
//
//   cuda_kill_probe busy STATE_FILE [MIB]  cudaMalloc MIB (default 32) MiB, then copy
//       host->device->host in a loop for ever. Before each call STATE_FILE holds
//       "in-call <call> round=<n>", after it "between-calls round=<n>" (one fixed-size
//       pwrite each), so that whoever kills the process can tell where it died. Prints
//       "CUDA-BUSY pid=<pid> bytes=<n>" once the first round trip checked out.
//   cuda_kill_probe steps STATE_FILE ROUNDS [MIB]  for the VM save/restore test
//       (tests/guest/cuda_vm_save_test.sh): device memory that each round reads back,
//       checks against what the previous round left (a lost or stale byte fails it),
//       changes and writes again; a stream and an event live across the rounds. STATE_FILE
//       holds "step round=<n>" after each round; rounds pause 20 ms so a save lands mid-run.
//       Prints "STEPS-OK rounds=<n> sum=<checksum>" at the end (the same in every run).
//   cuda_kill_probe slots [DEVICE]         opens DEVICE (default /dev/vmcuda0) until the
//       driver says EBUSY (each open claims a slot), prints "free-slots=<n>", closes all.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vmcuda/cudart_api.h"

namespace {

int state_fd = -1;

void set_state(const char* what, unsigned long round) {
  char line[64];
  std::memset(line, ' ', sizeof line);
  const int n = std::snprintf(line, sizeof line, "%s round=%lu", what, round);
  if (n > 0 && n < static_cast<int>(sizeof line)) line[n] = ' ';
  line[sizeof line - 1] = '\n';
  if (pwrite(state_fd, line, sizeof line, 0) != static_cast<ssize_t>(sizeof line)) {
    std::perror("pwrite state file");
    std::exit(3);
  }
}

int busy(const char* state_path, size_t mib) {
  state_fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (state_fd < 0) {
    std::perror(state_path);
    return 3;
  }
  const size_t bytes = mib << 20;
  std::vector<unsigned char> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + (i >> 12));
  void* d = nullptr;
  set_state("in-call cudaMalloc", 0);
  cudaError_t e = cudaMalloc(&d, bytes);
  if (e != cudaSuccess) {
    std::printf("cudaMalloc(%zu) failed: %s\n", bytes, cudaGetErrorString(e));
    return 1;
  }
  for (unsigned long round = 0;; ++round) {
    set_state("in-call cudaMemcpy(HtoD)", round);
    e = cudaMemcpy(d, src.data(), bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
      set_state("in-call cudaMemcpy(DtoH)", round);
      e = cudaMemcpy(dst.data(), d, bytes, cudaMemcpyDeviceToHost);
    }
    set_state("between-calls", round);
    if (e != cudaSuccess) {
      std::printf("round %lu: cudaMemcpy failed: %s\n", round, cudaGetErrorString(e));
      return 1;
    }
    if (round == 0) {
      if (std::memcmp(src.data(), dst.data(), bytes) != 0) {
        std::printf("round 0: the data came back different\n");
        return 1;
      }
      std::printf("CUDA-BUSY pid=%d bytes=%zu\n", static_cast<int>(getpid()), bytes);
      std::fflush(stdout);
    }
  }
}

int steps(const char* state_path, unsigned long rounds, size_t mib) {
  state_fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (state_fd < 0) {
    std::perror(state_path);
    return 3;
  }
  const size_t words = (mib << 20) / sizeof(uint32_t);
  std::vector<uint32_t> host(words);
  for (size_t i = 0; i < words; ++i) host[i] = static_cast<uint32_t>(i * 2654435761u);
  uint32_t* d = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&d), words * 4) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
      cudaMemcpy(d, host.data(), words * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    std::printf("setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::vector<uint32_t> back(words);
  for (unsigned long round = 1; round <= rounds; ++round) {
    cudaError_t e = cudaMemcpyAsync(back.data(), d, words * 4, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaEventRecord(done, stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(done);
    if (e != cudaSuccess) {
      std::printf("round %lu: %s: %s\n", round, cudaGetErrorName(e), cudaGetErrorString(e));
      return 1;
    }
    for (size_t i = 0; i < words; ++i) {
      if (back[i] != host[i]) {
        std::printf("round %lu: word %zu is %u on the device, %u was written\n", round, i, back[i], host[i]);
        return 1;
      }
      host[i] = host[i] * 1664525u + static_cast<uint32_t>(round);
    }
    e = cudaMemcpyAsync(d, host.data(), words * 4, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
      std::printf("round %lu: %s: %s\n", round, cudaGetErrorName(e), cudaGetErrorString(e));
      return 1;
    }
    set_state("step", round);
    usleep(20000);
  }
  uint64_t sum = 0;
  for (uint32_t v : host) sum = sum * 31 + v;
  std::printf("STEPS-OK rounds=%lu sum=%llu\n", rounds, static_cast<unsigned long long>(sum));
  return 0;
}

int slots(const char* device) {
  std::vector<int> fds;
  int err = 0;
  for (int i = 0; i < 4096; ++i) {
    const int fd = open(device, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      err = errno;
      break;
    }
    fds.push_back(fd);
  }
  for (int fd : fds) close(fd);
  std::printf("free-slots=%zu\n", fds.size());
  if (err != EBUSY) {
    std::printf("open %s stopped with %s, not EBUSY\n", device, std::strerror(err));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "busy" && argc >= 3) return busy(argv[2], argc > 3 ? std::strtoul(argv[3], nullptr, 0) : 32);
  if (mode == "slots") return slots(argc > 2 ? argv[2] : "/dev/vmcuda0");
  if (mode == "steps" && argc >= 4)
    return steps(argv[2], std::strtoul(argv[3], nullptr, 0), argc > 4 ? std::strtoul(argv[4], nullptr, 0) : 4);
  std::fprintf(stderr, "usage: %s busy STATE_FILE [MIB] | steps STATE_FILE ROUNDS [MIB] | slots [DEVICE]\n", argv[0]);
  return 2;
}
