// The test executor: a DriverApi that stands in for the GPU where there is none (CI).
// Device memory is host memory at fake device addresses; modules are images that
// start with "VMCUDA-FAKE-MODULE"; kernels are CPU functions known by their mangled
// name. It checks what the real driver would reject (unknown pointers, bad handles,
// streams and events used from a context they do not belong to). Two devices (0, 1), which
// can reach each other (peer access, cuMemcpyPeer); each context has its own limits (the
// H200's defaults; no device-runtime sync depth at compute capability 9.0) and cache config.
// Module variables live in fake device memory, made when first named; pitched
// allocations have the texture alignment's pitch (512 bytes); function attributes and
// occupancy come from each fake kernel's registers and shared memory.
#pragma once

#include <cstdint>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "driver_api.h"

namespace vmcuda::testing {

inline constexpr char kFakeModuleMagic[] = "VMCUDA-FAKE-MODULE";
// A kernel the fake runs: void add_one(int* p, int n): p[i] += 1 for i < n.
inline constexpr char kAddOneKernel[] = "_Z7add_onePii";
// A module variable every loaded module has (cuModuleGetGlobal): 256 bytes, initially
// 0, 1, ..., 255. The CUDA test programs' variables are in fake_kernels.cc too.
inline constexpr char kTestGlobal[] = "vmcuda_test_global";
inline constexpr uint64_t kTestGlobalBytes = 256;

// Fills `api` with the fake's entry points and resets its state.
// `recorded_profile`: pretend to be the GPU recorded in device_profile.inc (when built in).
void install_fake_driver(host::DriverApi& api, bool recorded_profile = false);
// Bytes of fake device memory currently allocated (to check for leaks): cuMemAlloc'd,
// module variables and VMM physical memory (cuMemCreate, mapped or not).
uint64_t fake_allocated_bytes();
// VMM: while on, every cuMemAddressReserve hint is treated as taken, so the driver
// returns another address, as the real one silently does.
void fake_move_reservations(bool on);
// Devices (bit d: device d) with RW access to the mapping at `va` (cuMemSetAccess); 0 when
// none or nothing is mapped there.
unsigned fake_vmm_access(uint64_t va);
uint64_t fake_live_reservations();  // cuMemAddressReserve'd ranges not freed
uint64_t fake_vmm_mappings();       // cuMemMap'd ranges not unmapped
uint64_t fake_live_contexts();
uint64_t fake_live_modules();
uint64_t fake_pinned_ranges();  // host ranges registered (cuMemHostRegister)
uint64_t fake_live_streams();   // streams created and not destroyed (cuStreamCreateWithPriority)
uint64_t fake_live_events();
// While on, work issued to a stream leaves it busy (cuStreamQuery: CUDA_ERROR_NOT_READY)
// and events recorded after it pending, until a synchronize. Work still runs at once.
void fake_hold_completion(bool on);
// While on, cuMemcpyHtoDAsync reads the host bytes only when the copy runs: at a
// synchronize of its stream, of its context or of an event recorded after it, at a query
// that finds such an event complete, before other work on its stream, or when turned off. So
// a program that changes the bytes before the copy completed sends the changed ones, as a
// real GPU may.
void fake_defer_async_htod(bool on);
// Clears the process-wide illegal-address fault (gpu_poisoned): the session fuzzer
// (tests/fuzz/session_fuzz.cc) starts each input on a healthy GPU.
void fake_clear_fault();
// Runs `hook` at the start of every cuCtxSynchronize, on the calling thread, before the fake
// takes its lock (so it may block that one caller); empty: none.
void fake_on_synchronize(std::function<void()> hook);
// The thread that made the last cuLaunchKernel call.
std::thread::id fake_last_launch_thread();
// The thread that made the last asynchronous copy between host and device memory.
std::thread::id fake_last_async_copy_thread();
// How the last kernel that ran was launched: cuLaunchCooperativeKernel, or cuLaunchKernelEx
// and the attributes it was given. Cooperative launches are refused
// (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) past the occupancy calculator's blocks per
// multiprocessor times the multiprocessors; clusters must divide the grid and hold at most 8
// blocks (CUDA_ERROR_INVALID_CLUSTER_SIZE); launch priorities are clamped to 0..-5.
struct FakeLaunchInfo {
  bool ex = false;           // cuLaunchKernelEx
  unsigned attributes = 0;   // its numAttrs
  bool cooperative = false;
  int priority = 0;
  unsigned cluster[3] = {0, 0, 0};  // 0: none
  int cluster_policy = 0;
  bool programmatic_serialization = false;
};
FakeLaunchInfo fake_last_launch();
// A kernel whose run() returns kFakeNeverEnds (fake_kernels.h) never ends: its stream stays
// busy and cuCtxSynchronize / cuStreamSynchronize on it block until its context is destroyed
// (or the process ends), as on a GPU; other contexts and processes are not held.
// Fake GPU time: each launch takes 1 ms and each async copy or memset 0.5 ms, so
// cuEventElapsedTime is exact. Priorities range from 0 (least) to -5 (greatest).

// Graphs (cuGraph*) and stream capture: a capturing stream records its work as nodes (after
// the stream's last captured work; streams join a capture by waiting on an event recorded in
// it) instead of running it; a synchronize of a capturing stream or its context invalidates
// the capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); a launch replays the executable
// graph's nodes in topological order on its stream (child graphs inlined).
uint64_t fake_live_graphs();       // graphs not destroyed (captured, created, cloned, children)
uint64_t fake_live_graph_execs();  // executable graphs not destroyed
uint64_t fake_graph_launches();    // cuGraphLaunch calls that ran
void fake_restart_capture_ids();   // capture ids count from 1 again, as in a new process's driver


// Fake device memory for the fake libraries' CPU code: runs `f` under the fake GPU's lock;
// `at(ptr, bytes)` is the host bytes of [ptr, ptr+bytes), or nullptr when no allocation holds them.
using FakeDeviceAt = std::function<std::byte*(uint64_t ptr, size_t bytes)>;
void fake_device_access(const std::function<void(const FakeDeviceAt& at)>& f);
// A fake library's routine ran as a kernel on `stream` of the current context: 1 ms of fake
// GPU time, its stream busy while completion is held, or for ever (`never_ends`, as a
// kFakeNeverEnds kernel). False when `stream` is not the current context's.
bool fake_library_work(void* stream, bool never_ends);

// cublasSgemm_v2 with this k never ends (its stream stays busy, as kFakeNeverEnds's): what a
// GEMM longer than the kernel time limit looks like.
inline constexpr int kFakeGemmNeverEnds = 0x7eadbeef;
// NVIDIA's libraries the host calls at their own API, faked (fake_cublas.cc; DriverApi's
// open_library and library_symbol): "libcublas.so.13" with CPU implementations of handle
// create/destroy/set stream/pointer mode/math mode/workspace, Sgemm, SgemmBatched,
// SgemmStridedBatched, GemmEx and GemmStridedBatchedEx (fp32 or bf16 A/B, fp32 or bf16 C,
// fp32 compute), Saxpy, Sscal, Sdot and Snrm2 over the fake device memory; every other
// entry point is missing (the stub answers CUBLAS_STATUS_NOT_SUPPORTED).
void* fake_open_library(const char* soname, std::string* why);
void* fake_library_symbol(void* library, const char* name);
uint64_t fake_live_cublas_handles();
// "libcublasLt.so.13" (fake_cublas.cc): handles (a fake cuBLAS handle is one too), matmul
// descriptors, layouts and preferences, a heuristic answering one algorithm, and
// cublasLtMatmul for fp32/bf16 column-major matrices with fp32 compute and the DEFAULT, RELU,
// BIAS and RELU_BIAS epilogues; the algorithm calls (ids 0 and 1 for fp32, their config and
// capabilities: the fake's own layout of the 64 bytes). The live handles and descriptors of
// the fake library, and how many heuristic queries reached it:
uint64_t fake_live_cublaslt_objects();
uint64_t fake_cublaslt_heuristic_calls();
// The last cuBLAS handle's settings as the fake library was given them.
struct FakeCublasSettings {
  void* stream = nullptr;
  int pointer_mode = 0;
  int math_mode = 0;
  uint64_t workspace = 0, workspace_bytes = 0;
};
FakeCublasSettings fake_cublas_last_settings();

// "libcufft.so.12" (fake_cufft.cc): 1D C2C/R2C/C2R plans by a naive DFT on the CPU; and
// "libcurand.so.10" (fake_curand.cc): deterministic fake generators (not NVIDIA's sequences).
void* fake_cufft_symbol(const char* name);
void* fake_curand_symbol(const char* name);
uint64_t fake_live_cufft_plans();
uint64_t fake_live_curand_generators();
struct FakeCufftPlan {
  bool live = false;
  int nx = 0, type = 0, batch = 0;
  void* stream = nullptr;
  uint64_t work_area = 0;
  int auto_allocation = 1;
};
FakeCufftPlan fake_cufft_newest_plan();  // the plan made last (the library's own numbering)

// "libcusparse.so.12" (fake_cusparse.cc): handles, CSR/COO and dense descriptors, SpMV and SpMM
// on the CPU (fp32/fp64); "libcusolver.so.12" (fake_cusolver.cc): handles, parameters, LU,
// Cholesky and symmetric eigenvalues on the CPU (S/D and the X forms). Their live objects:
void* fake_cusparse_symbol(const char* name);
void* fake_cusolver_symbol(const char* name);
uint64_t fake_live_cusparse_objects();
uint64_t fake_live_cusolver_objects();

// "libcudnn.so.9" (fake_cudnn.cc): handles and the backend API for graphs of fp32 pointwise
// operations (ADD, MUL, RELU_FWD, IDENTITY), run on the CPU; heuristics offer engine 0. The
// live handles and descriptors of the fake library:
void* fake_cudnn_library();
void* fake_cudnn_symbol(void* library, const char* name);
uint64_t fake_live_cudnn_objects();
// What the last cudnnFind*AlgorithmEx was given: its first buffer, its workspace and bytes.
struct FakeCudnnSearch {
  uint64_t first_buffer = 0, workspace = 0, workspace_bytes = 0;
};
FakeCudnnSearch fake_cudnn_last_search();

}  // namespace vmcuda::testing
