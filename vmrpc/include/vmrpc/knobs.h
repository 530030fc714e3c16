// Every tuning knob of vmrpc, declared once: name, environment variable, default.
// One grep for VMRPC_KNOB finds them all. Values are read from the environment the
// first time they are used; tests and tools may override them with set().
#pragma once

#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace vmrpc::knobs {

class Knob {
 public:
  constexpr Knob(const char* env, int64_t def, const char* doc) : env_(env), def_(def), doc_(doc) {}
  // Thread-safe: the first uses may race (several client or service threads at
  // once); each then reads the same environment value and stores the same result.
  int64_t get() const {
    if (!loaded_.load(std::memory_order_acquire)) {
      value_.store(parse(std::getenv(env_)), std::memory_order_relaxed);
      loaded_.store(true, std::memory_order_release);
    }
    return value_.load(std::memory_order_relaxed);
  }
  // Call before the threads that read the knob start (a first get() racing with it
  // may store the environment's value over it).
  void set(int64_t v) const {
    value_.store(v, std::memory_order_relaxed);
    loaded_.store(true, std::memory_order_release);
  }
  const char* env() const { return env_; }
  const char* doc() const { return doc_; }
  int64_t default_value() const { return def_; }

 private:
  // A number (decimal, 0x hex) with an optional K, M or G (binary) suffix; anything else is
  // refused with a line on stderr and the default used, never read as something else.
  int64_t parse(const char* s) const {
    if (!s || !*s) return def_;
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s, &end, 0);
    int shift = 0;
    if (end != s && *end && !end[1]) shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
                                           : *end == 'G' || *end == 'g' ? 30 : -1;
    if (end == s || errno == ERANGE || shift < 0 || (*end && shift == 0) || v > (INT64_MAX >> shift) ||
        v < (INT64_MIN >> shift)) {
      std::fprintf(stderr, "vmrpc: ignoring %s=%s: not a number (such as 16, 0x100 or 1G); using %lld. %s: %s\n",
                   env_, s, static_cast<long long>(def_), env_, doc_);
      return def_;
    }
    return static_cast<int64_t>(v) * (int64_t{1} << shift);
  }
  const char* env_;
  int64_t def_;
  const char* doc_;
  mutable std::atomic<int64_t> value_{0};
  mutable std::atomic<bool> loaded_{false};
};

#define VMRPC_KNOB(name, env, def, doc) inline const Knob name{env, def, doc}

VMRPC_KNOB(kGuestSpinNs, "VMRPC_GUEST_SPIN_NS", 200000,
           "how long a guest spins on a reply before sleeping on its interrupt");
VMRPC_KNOB(kHostSpinNs, "VMRPC_HOST_SPIN_NS", 50000,
           "how long a host service thread spins on a request before sleeping on its eventfd");
VMRPC_KNOB(kRegionBytes, "VMRPC_REGION_BYTES", 1ll << 30,
           "size of a region created per connection (power of two; sparse: only what is used costs memory)");
VMRPC_KNOB(kSlotCount, "VMRPC_SLOTS", 16, "client slots per region (= MSI-X vectors)");
VMRPC_KNOB(kSlotBytes, "VMRPC_SLOT_BYTES", 1ll << 20, "control page + RPC stack per slot");
VMRPC_KNOB(kHeapPageBytes, "VMRPC_HEAP_PAGE_BYTES", 4096, "allocation unit of the shared heap");
VMRPC_KNOB(kWorkerMapAddress, "VMRPC_WORKER_MAP_ADDRESS", 0x600000000000ll,
           "address at which each worker process maps its region (RegionHeader::host_map_address); 0: anywhere");
VMRPC_KNOB(kGuestSameAddress, "VMRPC_SAME_ADDRESS", 1,
           "1: a guest maps the region at the host's address when it is free there; 0: never (tests)");
VMRPC_KNOB(kWorkerAslr, "VMRPC_WORKER_ASLR", 0,
           "1: worker processes keep address-space randomization; 0: they run without it, so that the CUDA "
           "driver places a client's module variables at the same addresses in a new worker (restore into a "
           "new stub process)");
VMRPC_KNOB(kRegionCheckMs, "VMRPC_REGION_CHECK_MS", 100,
           "how often the host looks for regions replaced by a saved image (a VM restore or snapshot revert)");
VMRPC_KNOB(kWorkerExitMs, "VMRPC_WORKER_EXIT_MS", 10000,
           "a worker process that outlives its program by this long is killed (a kernel that never ends blocks its "
           "teardown; a native process's kernels end with it): its slot and GPU memory go back; 0: never");
VMRPC_KNOB(kMaxConnectionsPerUser, "VMRPC_MAX_CONNECTIONS_PER_USER", 32,
           "connections one user (the connecting process's uid, SO_PEERCRED) may hold at once on a stub's socket, "
           "so that one local user cannot take all of them (each costs a region); 0: only the socket's limit");
VMRPC_KNOB(kConnectRatePerUser, "VMRPC_CONNECT_RATE", 20,
           "new connections a second one user may open on a stub's socket, after a burst of "
           "VMRPC_MAX_CONNECTIONS_PER_USER; more are closed at once (an accept and a close on the stub's event loop, "
           "no region); 0: no limit");
VMRPC_KNOB(kLogLevel, "VMRPC_LOG", 1, "0 quiet, 1 warnings, 2 info, 3 debug");
VMRPC_KNOB(kLogWarnRate, "VMRPC_LOG_WARN_RATE", 10,
           "warning lines a second per subsystem and process, after a burst (0: no limit): a guest cannot fill "
           "the journal");
VMRPC_KNOB(kLogWarnBurst, "VMRPC_LOG_WARN_BURST", 50, "warning lines let through at once before the rate applies");
VMRPC_KNOB(kExportableMemory, "VMCUDA_IPC_MEMORY", 1,
           "1: the stub makes its clients' device memory exportable (a POSIX fd) where the GPU can, so "
           "cudaIpcGetMemHandle works between a VM's programs; 0: plain memory, cudaIpcGetMemHandle answers "
           "cudaErrorNotSupported");
VMRPC_KNOB(kSuspendCopyThreads, "VMCUDA_SUSPEND_THREADS", 0,
           "threads that copy and checksum a client's device memory during a suspend to host memory "
           "(0: one per CPU, 2 to 16; 1: one, inline)");
VMRPC_KNOB(kStateStripes, "VMCUDA_STATE_STRIPES", 0,
           "files a client's saved state is striped over (state_stream.h): each copy thread mostly writes a file of "
           "its own, as one tmpfs or page-cache file takes one writer at a time (0: one per copy thread; at most 64)");

VMRPC_KNOB(kContextBytes, "VMCUDA_CONTEXT_BYTES", 524ll << 20,
           "device memory a CUDA context takes besides allocations, charged to the VM's quota for each context "
           "a program makes (measured: 523.6 MiB on an H100 80GB, driver 580: bench/context_cost_probe.cu); 0: none");

VMRPC_KNOB(kCublasWorkspaceBytes, "VMCUDA_CUBLAS_WORKSPACE_BYTES", -1,
           "device memory each cuBLAS handle's own workspace takes, charged to the VM's quota while the handle "
           "lives; -1: the size for the GPU (64 MiB from Hopper on, measured on an H100 by bench/cublas_cost_probe.cu: "
           "a second handle with a SGEMM took 64 MiB; 4 MiB before, NVIDIA's documented workspace); 0: none");

VMRPC_KNOB(kWorkerHostBytes, "VMCUDA_WORKER_HOST_BYTES", 160ll << 20,
           "host memory a worker process (--isolation process) costs besides what its program pins, charged to the "
           "VM's host memory bound (--host-memory-quota-mib) with the program's first context (measured on an H100, "
           "driver 580: a worker's peak resident memory 141 MiB running vector_add, 114 MiB running graphs); 0: none");

VMRPC_KNOB(kBlasHostBytes, "VMCUDA_BLAS_HOST_BYTES", 352ll << 20,
           "host memory NVIDIA's cuBLAS and cuBLASLt add to a worker process (--isolation process) once loaded, "
           "charged to the VM's host memory bound with the worker's first cuBLAS or cuBLASLt handle (measured on an "
           "H100, driver 580: a worker's peak resident memory 489 MiB running cublas_basic, 494 MiB cublaslt_basic, "
           "141 MiB without the libraries); 0: none");

// What NVIDIA's other libraries add to a worker, measured on an H100 (driver 580) with
// scripts/tools/worker-memory.sh: a worker's peak resident memory was 130 MiB running vector_add,
// 203 MiB cusparse_more, 360 MiB cusolver_basic (cuSOLVER loads cuBLAS and cuBLASLt), 360 MiB
// cudnn_basic and 613 MiB cudnn_legacy, 158 MiB cufft_basic, 150 MiB curand_basic.
VMRPC_KNOB(kSparseHostBytes, "VMCUDA_SPARSE_HOST_BYTES", 96ll << 20,
           "host memory NVIDIA's cuSPARSE adds to a worker process (--isolation process) once loaded, charged to the "
           "VM's host memory bound with the worker's first cuSPARSE handle (measured on an H100: 73 MiB); 0: none");

VMRPC_KNOB(kSolverHostBytes, "VMCUDA_SOLVER_HOST_BYTES", 256ll << 20,
           "host memory NVIDIA's cuSOLVER (with the cuBLAS it loads) adds to a worker process (--isolation process) "
           "once loaded, charged to the VM's host memory bound with the worker's first cuSOLVER handle (measured on "
           "an H100: 230 MiB); 0: none");

VMRPC_KNOB(kDnnHostBytes, "VMCUDA_DNN_HOST_BYTES", 512ll << 20,
           "host memory NVIDIA's cuDNN adds to a worker process (--isolation process) once loaded, charged to the VM's "
           "host memory bound with the worker's first cuDNN handle (measured on an H100: 230 MiB for a backend "
           "convolution, 483 MiB with the legacy convolutions, pooling, softmax and dropout); 0: none");

VMRPC_KNOB(kFftHostBytes, "VMCUDA_FFT_HOST_BYTES", 32ll << 20,
           "host memory NVIDIA's cuFFT adds to a worker process (--isolation process) once loaded, charged to the VM's "
           "host memory bound with the worker's first cuFFT plan (measured on an H100: 28 MiB); 0: none");

VMRPC_KNOB(kRandHostBytes, "VMCUDA_RAND_HOST_BYTES", 32ll << 20,
           "host memory NVIDIA's cuRAND adds to a worker process (--isolation process) once loaded, charged to the VM's "
           "host memory bound with the worker's first cuRAND generator (measured on an H100: 20 MiB); 0: none");

#undef VMRPC_KNOB

}  // namespace vmrpc::knobs
