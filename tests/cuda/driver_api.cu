// The driver API (libcuda.so.1) beside the runtime: initialization, devices, contexts,
// memory, streams and events, modules, libraries and launches, cuGetProcAddress, error
// names; and the two APIs on the same pointers, streams and events, as natively they are
// the same objects. Built with -lcuda; its kernels (driver_api_kernels.cu) are a fatbin
// embedded by scripts/build-cuda-tests.sh. Prints what it sees (deterministic; compared
// with the native run) and the number of failed expectations.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "driver_api_fatbin.h"  // driver_api_fatbin[]: the kernels' fatbin

static int failures = 0;

static const char* name_of(CUresult r) {
  const char* s = nullptr;
  return cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unnamed)";
}

// Prints a call's result and counts it as a failure when it is not `want`.
static void expect(const char* what, CUresult got, CUresult want = CUDA_SUCCESS) {
  std::printf("%s: %s\n", what, name_of(got));
  if (got != want) {
    std::printf("  FAIL: expected %s\n", name_of(want));
    ++failures;
  }
}
static void check(const char* what, bool ok) {
  std::printf("%s: %s\n", what, ok ? "yes" : "no");
  if (!ok) ++failures;
}

// A thread that has made no runtime call has no current context until it sets one.
static void context_thread() {
  CUcontext c = reinterpret_cast<CUcontext>(1);
  expect("fresh thread: cuCtxGetCurrent", cuCtxGetCurrent(&c));
  check("fresh thread: no current context", c == nullptr);
  CUdeviceptr p = 0;
  expect("fresh thread: cuMemAlloc without a context", cuMemAlloc(&p, 256), CUDA_ERROR_INVALID_CONTEXT);
  expect("fresh thread: cuCtxPopCurrent with an empty stack", cuCtxPopCurrent(&c), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext primary = nullptr;
  expect("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&primary, 0));
  unsigned flags = 99;
  int active = -1;
  expect("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState(0, &flags, &active));
  check("primary context active once retained", active == 1);
  expect("cuCtxSetCurrent(primary)", cuCtxSetCurrent(primary));
  CUcontext cur = nullptr;
  cuCtxGetCurrent(&cur);
  check("current context is the primary context", cur == primary);
  CUdevice d = -1;
  expect("cuCtxGetDevice", cuCtxGetDevice(&d));
  check("context device is 0", d == 0);
  unsigned api = 0;
  expect("cuCtxGetApiVersion", cuCtxGetApiVersion(primary, &api));
  std::printf("context API version: %u\n", api);
  expect("cuMemAlloc in the primary context", cuMemAlloc(&p, 256));
  expect("cuMemFree", cuMemFree(p));
  expect("cuCtxPushCurrent(primary)", cuCtxPushCurrent(primary));
  CUcontext popped = nullptr;
  expect("cuCtxPopCurrent", cuCtxPopCurrent(&popped));
  check("popped the pushed context", popped == primary);
  CUcontext mine = nullptr;
  expect("cuCtxCreate", cuCtxCreate(&mine, nullptr, 0, 0));
  cuCtxGetCurrent(&cur);
  check("cuCtxCreate makes the new context current", cur == mine && mine != primary);
  expect("cuCtxSynchronize", cuCtxSynchronize());
  expect("cuCtxDestroy", cuCtxDestroy(mine));
  expect("cuCtxSetCurrent(NULL)", cuCtxSetCurrent(nullptr));
  expect("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(0));
}

// cuGetProcAddress: which exported function a query returns, by name.
static void proc(void* libcuda, const char* symbol, int version, cuuint64_t flags) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r = cuGetProcAddress(symbol, &fn, version, flags, &status);
  const char* match = "(none)";
  static const char* const suffixes[] = {"", "_v2", "_v3", "_v4", "_ptds", "_ptsz", "_v2_ptds", "_v2_ptsz", "_v3_ptds"};
  for (const char* s : suffixes) {
    static char buf[128];
    std::snprintf(buf, sizeof buf, "%s%s", symbol, s);
    if (fn && dlsym(libcuda, buf) == fn) {
      match = buf;
      break;
    }
  }
  std::printf("cuGetProcAddress(%s, %d, %s): %s, status %d, %s\n", symbol, version,
              flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? "per-thread" : "legacy", name_of(r),
              static_cast<int>(status), match);
}

int main() {
  int n = -1;
  expect("cuDeviceGetCount before cuInit", cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  expect("cuInit(1)", cuInit(1), CUDA_ERROR_INVALID_VALUE);
  expect("cuInit(0)", cuInit(0));
  int version = 0;
  expect("cuDriverGetVersion", cuDriverGetVersion(&version));
  check("driver version >= 13000", version >= 13000);
  expect("cuDeviceGetCount", cuDeviceGetCount(&n));
  check("at least one device", n >= 1);
  CUdevice dev = -1;
  expect("cuDeviceGet(0)", cuDeviceGet(&dev, 0));
  expect("cuDeviceGet(count)", cuDeviceGet(&dev, n), CUDA_ERROR_INVALID_DEVICE);
  check("cudaGetLastError untouched by failed driver calls", cudaGetLastError() == cudaSuccess);

  // A thread without runtime calls first: contexts by hand.
  std::thread(context_thread).join();

  // Device queries agree with the runtime's.
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  char name[256] = {};
  expect("cuDeviceGetName", cuDeviceGetName(name, sizeof name, 0));
  check("name as cudaGetDeviceProperties'", std::strcmp(name, prop.name) == 0);
  CUuuid uuid{};
  expect("cuDeviceGetUuid", cuDeviceGetUuid(&uuid, 0));
  check("UUID as cudaGetDeviceProperties'", std::memcmp(uuid.bytes, prop.uuid.bytes, 16) == 0);
  size_t total = 0;
  expect("cuDeviceTotalMem", cuDeviceTotalMem(&total, 0));
  check("total memory as cudaGetDeviceProperties'", total == prop.totalGlobalMem);
  int v = 0;
  expect("cuDeviceGetAttribute(MAX_THREADS_PER_BLOCK)", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
  check("max threads per block as the runtime's", v == prop.maxThreadsPerBlock);
  expect("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  check("compute capability major as the runtime's", v == prop.major);
  CUdevprop dp{};
  expect("cuDeviceGetProperties", cuDeviceGetProperties(&dp, 0));
  check("properties: threads per block, warp size", dp.maxThreadsPerBlock == prop.maxThreadsPerBlock && dp.SIMDWidth == prop.warpSize);

  // The runtime's context is the device's primary context.
  cudaFree(nullptr);
  CUcontext cur = nullptr, primary = nullptr;
  expect("cuCtxGetCurrent after a runtime call", cuCtxGetCurrent(&cur));
  cuDevicePrimaryCtxRetain(&primary, 0);
  check("the runtime's context is the primary context", cur == primary && cur != nullptr);

  // Memory: driver pointers in runtime calls and the reverse.
  const int kN = 1024;
  std::vector<int> h(kN), back(kN);
  for (int i = 0; i < kN; ++i) h[i] = i * 3;
  CUdeviceptr d1 = 0;
  expect("cuMemAlloc(0 bytes)", cuMemAlloc(&d1, 0), CUDA_ERROR_INVALID_VALUE);
  expect("cuMemAlloc", cuMemAlloc(&d1, kN * sizeof(int)));
  int* d2 = nullptr;
  cudaMalloc(&d2, kN * sizeof(int));
  check("cudaMemcpy into a cuMemAlloc pointer", cudaMemcpy(reinterpret_cast<void*>(d1), h.data(), kN * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  expect("cuMemcpyDtoH of it", cuMemcpyDtoH(back.data(), d1, kN * sizeof(int)));
  check("round trip driver <- runtime", back == h);
  expect("cuMemcpyDtoD into a cudaMalloc pointer", cuMemcpyDtoD(reinterpret_cast<CUdeviceptr>(d2), d1, kN * sizeof(int)));
  std::fill(back.begin(), back.end(), 0);
  cudaMemcpy(back.data(), d2, kN * sizeof(int), cudaMemcpyDeviceToHost);
  check("round trip runtime <- driver", back == h);
  expect("cuMemcpyHtoD", cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(d2), h.data(), 64));
  expect("cuMemsetD32", cuMemsetD32(d1, 0x01020304u, kN));
  cuMemcpyDtoH(back.data(), d1, kN * sizeof(int));
  check("cuMemsetD32 pattern", back[0] == 0x01020304 && back[kN - 1] == 0x01020304);
  expect("cuMemsetD16", cuMemsetD16(d1, 0xbeef, kN * 2));
  cuMemcpyDtoH(back.data(), d1, kN * sizeof(int));
  check("cuMemsetD16 pattern", static_cast<unsigned>(back[7]) == 0xbeefbeefu);
  expect("cuMemsetD8", cuMemsetD8(d1, 0, kN * sizeof(int)));
  cuMemcpyDtoH(back.data(), d1, kN * sizeof(int));
  check("cuMemsetD8 zeroes", back[0] == 0 && back[kN - 1] == 0);
  size_t free_b = 0, total_b = 0, rt_free = 0, rt_total = 0;
  expect("cuMemGetInfo", cuMemGetInfo(&free_b, &total_b));
  cudaMemGetInfo(&rt_free, &rt_total);
  check("cuMemGetInfo total as cudaMemGetInfo's", total_b == rt_total && free_b <= total_b);

  unsigned mtype = 0;
  expect("cuPointerGetAttribute(MEMORY_TYPE) of cuMemAlloc memory", cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1));
  check("device memory", mtype == CU_MEMORYTYPE_DEVICE);
  expect("cuPointerGetAttribute(MEMORY_TYPE) of cudaMalloc memory", cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(d2)));
  check("device memory", mtype == CU_MEMORYTYPE_DEVICE);
  CUdeviceptr start = 0;
  expect("cuPointerGetAttribute(RANGE_START_ADDR) inside", cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d1 + 64));
  check("range starts at the allocation", start == d1);
  int ordinal = -1;
  expect("cuPointerGetAttribute(DEVICE_ORDINAL)", cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1));
  check("device 0", ordinal == 0);
  int stack_var = 0;
  expect("cuPointerGetAttribute of unregistered host memory", cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(&stack_var)), CUDA_ERROR_INVALID_VALUE);
  cudaPointerAttributes attr{};
  cudaPointerGetAttributes(&attr, reinterpret_cast<void*>(d1));
  check("cudaPointerGetAttributes of cuMemAlloc memory: device", attr.type == cudaMemoryTypeDevice);
  CUpointer_attribute which[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  unsigned t2 = 0;
  int o2 = -1;
  void* data[2] = {&t2, &o2};
  expect("cuPointerGetAttributes", cuPointerGetAttributes(2, which, data, d1));
  check("type and ordinal", t2 == CU_MEMORYTYPE_DEVICE && o2 == 0);

  // Pinned and registered host memory.
  int* pinned = nullptr;
  expect("cuMemAllocHost", cuMemAllocHost(reinterpret_cast<void**>(&pinned), kN * sizeof(int)));
  expect("cuPointerGetAttribute(MEMORY_TYPE) of cuMemAllocHost memory", cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(pinned)));
  check("host memory", mtype == CU_MEMORYTYPE_HOST);
  for (int i = 0; i < kN; ++i) pinned[i] = 7 * i;
  expect("cuMemcpyHtoD from pinned memory", cuMemcpyHtoD(d1, pinned, kN * sizeof(int)));
  int* mapped = nullptr;
  expect("cuMemHostAlloc(DEVICEMAP)", cuMemHostAlloc(reinterpret_cast<void**>(&mapped), 4096, CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr mapped_dev = 0;
  expect("cuMemHostGetDevicePointer", cuMemHostGetDevicePointer(&mapped_dev, mapped, 0));
  check("a device pointer", mapped_dev != 0);
  expect("cuMemFreeHost(mapped)", cuMemFreeHost(mapped));
  std::vector<int> reg(kN);
  expect("cuMemHostRegister", cuMemHostRegister(reg.data(), kN * sizeof(int), 0));
  expect("cuMemcpyDtoH into registered memory", cuMemcpyDtoH(reg.data(), d1, kN * sizeof(int)));
  check("registered memory has the data", reg[kN - 1] == 7 * (kN - 1));
  expect("cuMemHostUnregister", cuMemHostUnregister(reg.data()));

  // Streams and events shared by both APIs.
  CUstream ds = nullptr;
  expect("cuStreamCreate(NON_BLOCKING)", cuStreamCreate(&ds, CU_STREAM_NON_BLOCKING));
  unsigned sflags = 0;
  expect("cuStreamGetFlags", cuStreamGetFlags(ds, &sflags));
  check("non-blocking", sflags == CU_STREAM_NON_BLOCKING);
  cudaStream_t rs = nullptr;
  cudaStreamCreate(&rs);
  check("cudaMemcpyAsync on a driver stream", cudaMemcpyAsync(d2, h.data(), kN * sizeof(int), cudaMemcpyHostToDevice, ds) == cudaSuccess);
  expect("cuMemcpyHtoDAsync on a runtime stream", cuMemcpyHtoDAsync(d1, h.data(), kN * sizeof(int), rs));
  CUevent e0 = nullptr, e1 = nullptr;
  expect("cuEventCreate", cuEventCreate(&e0, CU_EVENT_DEFAULT));
  expect("cuEventCreate", cuEventCreate(&e1, CU_EVENT_DEFAULT));
  expect("cuEventRecord on the driver stream", cuEventRecord(e0, ds));
  check("cudaEventSynchronize on a driver event", cudaEventSynchronize(e0) == cudaSuccess);
  expect("cuStreamWaitEvent (runtime stream, driver event)", cuStreamWaitEvent(rs, e0, 0));
  expect("cuEventRecord on the runtime stream", cuEventRecord(e1, rs));
  expect("cuStreamSynchronize(runtime stream)", cuStreamSynchronize(rs));
  expect("cuEventSynchronize", cuEventSynchronize(e1));
  expect("cuEventQuery", cuEventQuery(e1));
  float ms = -1;
  expect("cuEventElapsedTime", cuEventElapsedTime(&ms, e0, e1));
  check("elapsed time >= 0", ms >= 0);
  expect("cuStreamQuery", cuStreamQuery(ds));

  // Modules and launches.
  CUmodule mod = nullptr;
  expect("cuModuleLoadData(fatbin)", cuModuleLoadData(&mod, driver_api_fatbin));
  CUfunction add_one = nullptr, scale_add = nullptr, vecadd = nullptr, none = nullptr;
  expect("cuModuleGetFunction(add_one)", cuModuleGetFunction(&add_one, mod, "_Z7add_onePii"));
  expect("cuModuleGetFunction(scale_add)", cuModuleGetFunction(&scale_add, mod, "_Z9scale_addPiiii"));
  expect("cuModuleGetFunction(vecadd)", cuModuleGetFunction(&vecadd, mod, "vecadd"));
  expect("cuModuleGetFunction(no such kernel)", cuModuleGetFunction(&none, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  int max_threads = 0;
  expect("cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)", cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, add_one));
  check("a kernel takes >= 256 threads", max_threads >= 256);
  CUdeviceptr table = 0;
  size_t table_bytes = 0;
  expect("cuModuleGetGlobal(d_table)", cuModuleGetGlobal(&table, &table_bytes, mod, "d_table"));
  int t[8] = {};
  cuMemcpyDtoH(t, table, sizeof t);
  check("d_table: 32 bytes, 1..8", table_bytes == 32 && t[0] == 1 && t[7] == 8);
  expect("cuModuleGetGlobal(no such variable)", cuModuleGetGlobal(&table, &table_bytes, mod, "no_such_variable"), CUDA_ERROR_NOT_FOUND);

  // kernelParams on a driver pointer and stream.
  cuMemcpyHtoD(d1, h.data(), kN * sizeof(int));
  int count = kN;
  void* params[] = {&d1, &count};
  expect("cuLaunchKernel(add_one, kernelParams)", cuLaunchKernel(add_one, kN / 256, 1, 1, 256, 1, 1, 0, ds, params, nullptr));
  expect("cuStreamSynchronize", cuStreamSynchronize(ds));
  cudaMemcpy(back.data(), reinterpret_cast<void*>(d1), kN * sizeof(int), cudaMemcpyDeviceToHost);
  check("add_one ran", back[0] == 1 && back[kN - 1] == h[kN - 1] + 1);
  // CU_LAUNCH_PARAM_BUFFER_POINTER on a cudaMalloc pointer and a runtime stream.
  cudaMemcpy(d2, h.data(), kN * sizeof(int), cudaMemcpyHostToDevice);
  struct alignas(8) {
    int* p;
    int mul, add, n;
  } packed = {d2, 2, 5, kN};
  size_t packed_size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size, CU_LAUNCH_PARAM_END};
  expect("cuLaunchKernel(scale_add, extra)", cuLaunchKernel(scale_add, kN / 128, 1, 1, 128, 1, 1, 0, rs, nullptr, extra));
  check("cudaStreamSynchronize", cudaStreamSynchronize(rs) == cudaSuccess);
  cuMemcpyDtoH(back.data(), reinterpret_cast<CUdeviceptr>(d2), kN * sizeof(int));
  check("scale_add ran", back[3] == h[3] * 2 + 5 && back[kN - 1] == h[kN - 1] * 2 + 5);
  // Many launches queued, one synchronization.
  cuMemsetD32(d1, 0, kN);
  for (int i = 0; i < 100; ++i) cuLaunchKernel(add_one, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  expect("cuCtxSynchronize after 100 launches", cuCtxSynchronize());
  cuMemcpyDtoH(back.data(), d1, kN * sizeof(int));
  check("100 launches: every element is 100", back[0] == 100 && back[kN / 2] == 100 && back[kN - 1] == 100);
  // Launch errors.
  expect("cuLaunchKernel(block of 2048 threads)", cuLaunchKernel(add_one, 1, 1, 1, 2048, 1, 1, 0, nullptr, params, nullptr), CUDA_ERROR_INVALID_VALUE);
  expect("cuLaunchKernel(NULL function)", cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), CUDA_ERROR_INVALID_HANDLE);

  // A library, its kernel, and the kernel launched as a CUkernel and as a CUfunction.
  CUlibrary lib = nullptr;
  expect("cuLibraryLoadData", cuLibraryLoadData(&lib, driver_api_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kern = nullptr;
  expect("cuLibraryGetKernel(vecadd)", cuLibraryGetKernel(&kern, lib, "vecadd"));
  CUfunction kfn = nullptr;
  expect("cuKernelGetFunction", cuKernelGetFunction(&kfn, kern));
  float *fa = nullptr, *fb = nullptr, *fc = nullptr;
  cudaMalloc(&fa, kN * sizeof(float));
  cudaMalloc(&fb, kN * sizeof(float));
  cudaMalloc(&fc, kN * sizeof(float));
  std::vector<float> ha(kN), hb(kN), hc(kN);
  for (int i = 0; i < kN; ++i) ha[i] = 0.5f * i, hb[i] = 2.0f;
  cudaMemcpy(fa, ha.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(fb, hb.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
  void* vparams[] = {&fa, &fb, &fc, &count};
  expect("cuLaunchKernel(CUkernel as CUfunction)", cuLaunchKernel(reinterpret_cast<CUfunction>(kern), kN / 256, 1, 1, 256, 1, 1, 0, nullptr, vparams, nullptr));
  cudaMemcpy(hc.data(), fc, kN * sizeof(float), cudaMemcpyDeviceToHost);
  check("vecadd through the library kernel", hc[10] == 7.0f && hc[kN - 1] == 0.5f * (kN - 1) + 2.0f);
  cudaMemset(fc, 0, kN * sizeof(float));
  expect("cuLaunchKernel(the kernel's function)", cuLaunchKernel(kfn, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, vparams, nullptr));
  cudaMemcpy(hc.data(), fc, kN * sizeof(float), cudaMemcpyDeviceToHost);
  check("vecadd through cuKernelGetFunction", hc[10] == 7.0f);
  expect("cuLibraryUnload", cuLibraryUnload(lib));

  // cuGetProcAddress: the variant each version and stream mode gets.
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  check("libcuda.so.1 is loaded", libcuda != nullptr);
  proc(libcuda, "cuMemAlloc", 2000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  proc(libcuda, "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  proc(libcuda, "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  proc(libcuda, "cuCtxCreate", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuCtxCreate", 11000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuStreamBeginCapture", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  proc(libcuda, "cuDeviceGetUuid", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuGetProcAddress", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuEventElapsedTime", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuInit", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuMemAllocAsync", 11000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "cuNoSuchFunction", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  proc(libcuda, "", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
  // A function got through cuGetProcAddress works.
  void* fn = nullptr;
  cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr);
  CUdeviceptr via = 0;
  expect("cuMemAlloc through cuGetProcAddress", reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(fn)(&via, 4096));
  cuMemFree(via);

  // Error names and strings.
  int named = 0;
  for (int code = 0; code < 1100; ++code) {
    const char* s = nullptr;
    if (cuGetErrorName(static_cast<CUresult>(code), &s) == CUDA_SUCCESS) {
      ++named;
      std::printf("error %d: %s\n", code, s);
    }
  }
  std::printf("named error codes: %d\n", named);
  for (int code : {0, 1, 2, 3, 100, 101, 200, 201, 209, 400, 500, 600, 700, 719, 801, 999}) {
    const char* s = nullptr;
    cuGetErrorString(static_cast<CUresult>(code), &s);
    std::printf("error string %d: %s\n", code, s ? s : "(null)");
  }
  const char* s = reinterpret_cast<const char*>(1);
  expect("cuGetErrorName(12345)", cuGetErrorName(static_cast<CUresult>(12345), &s), CUDA_ERROR_INVALID_VALUE);
  check("no name for an unknown code", s == nullptr);

  expect("cuEventDestroy", cuEventDestroy(e0));
  expect("cuEventDestroy", cuEventDestroy(e1));
  expect("cuStreamDestroy", cuStreamDestroy(ds));
  cudaStreamDestroy(rs);
  expect("cuModuleUnload", cuModuleUnload(mod));
  expect("cuMemFreeHost", cuMemFreeHost(pinned));
  expect("cuMemFree", cuMemFree(d1));
  cudaFree(d2);
  cudaFree(fa), cudaFree(fb), cudaFree(fc);
  cuDevicePrimaryCtxRelease(0);
  std::printf("driver_api: %d failures\n", failures);
  return failures ? 1 : 0;
}
