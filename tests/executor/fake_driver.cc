#include "fake_driver.h"

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace vmcuda::testing {
using namespace host;

namespace {
CUresult f_mem_info(size_t*, size_t*);
struct FakeGpu {
  std::mutex mu;
  uint64_t next_ptr = 0x7f0000000000ull;
  std::map<uint64_t, std::vector<std::byte>> mem;
  std::set<CUcontext> contexts;
  std::set<CUmodule> modules;
  uintptr_t next_handle = 0x1000;
};
FakeGpu& gpu() {
  static FakeGpu g;
  return g;
}

// The bytes at [p, p+n) if one allocation holds them.
std::byte* find(uint64_t p, size_t n) {
  auto& g = gpu();
  auto it = g.mem.upper_bound(p);
  if (it == g.mem.begin()) return nullptr;
  --it;
  const uint64_t off = p - it->first;
  if (off > it->second.size() || n > it->second.size() - off) return nullptr;
  return it->second.data() + off;
}

CUresult f_init(unsigned) { return CUDA_SUCCESS; }
CUresult f_version(int* v) { return *v = 13000, CUDA_SUCCESS; }
CUresult f_count(int* n) { return *n = 1, CUDA_SUCCESS; }
CUresult f_get(CUdevice* d, int i) { return i == 0 ? (*d = 0, CUDA_SUCCESS) : 101; }
CUresult f_name(char* s, int len, CUdevice) {
  std::strncpy(s, "vmcuda test executor", len);
  return CUDA_SUCCESS;
}
CUresult f_total(size_t* b, CUdevice) { return *b = 1ull << 30, CUDA_SUCCESS; }
CUresult f_attr(int* v, int attr, CUdevice) {
  if (attr <= 0 || attr >= 148) return CUDA_ERROR_INVALID_VALUE;
  *v = attr == 75 ? 9 : attr == 1 ? 1024 : 0;  // compute capability 9.x, 1024 threads per block
  return CUDA_SUCCESS;
}
CUresult f_ctx_create(CUcontext* c, void*, unsigned, CUdevice) {
  std::lock_guard l(gpu().mu);
  *c = reinterpret_cast<CUcontext>(gpu().next_handle++);
  gpu().contexts.insert(*c);
  return CUDA_SUCCESS;
}
CUresult f_ctx_destroy(CUcontext c) {
  std::lock_guard l(gpu().mu);
  return gpu().contexts.erase(c) ? CUDA_SUCCESS : 201;
}
CUresult f_ctx_set(CUcontext) { return CUDA_SUCCESS; }
CUresult f_sync() { return CUDA_SUCCESS; }
CUresult f_alloc(CUdeviceptr* p, size_t n) {
  auto& g = gpu();
  std::lock_guard l(g.mu);
  if (n > (1ull << 30)) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = g.next_ptr;
  g.next_ptr += (n + 0xfffff) & ~0xfffffull;
  g.mem[*p].resize(n);
  return CUDA_SUCCESS;
}
CUresult f_free(CUdeviceptr p) {
  std::lock_guard l(gpu().mu);
  return gpu().mem.erase(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult f_htod(CUdeviceptr d, const void* s, size_t n) {
  std::lock_guard l(gpu().mu);
  std::byte* p = find(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(p, s, n);
  return CUDA_SUCCESS;
}
CUresult f_dtoh(void* d, CUdeviceptr s, size_t n) {
  std::lock_guard l(gpu().mu);
  std::byte* p = find(s, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(d, p, n);
  return CUDA_SUCCESS;
}
CUresult f_dtod(CUdeviceptr d, CUdeviceptr s, size_t n) {
  std::lock_guard l(gpu().mu);
  std::byte *pd = find(d, n), *ps = find(s, n);
  if (!pd || !ps) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(pd, ps, n);
  return CUDA_SUCCESS;
}
CUresult f_memset(CUdeviceptr d, unsigned char v, size_t n) {
  std::lock_guard l(gpu().mu);
  std::byte* p = find(d, n);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, v, n);
  return CUDA_SUCCESS;
}
CUresult f_mod_load(CUmodule* m, const void* image) {
  if (std::memcmp(image, kFakeModuleMagic, sizeof kFakeModuleMagic - 1) != 0) return 200;  // INVALID_IMAGE
  std::lock_guard l(gpu().mu);
  *m = reinterpret_cast<CUmodule>(gpu().next_handle++);
  gpu().modules.insert(*m);
  return CUDA_SUCCESS;
}
CUresult f_mod_unload(CUmodule m) {
  std::lock_guard l(gpu().mu);
  return gpu().modules.erase(m) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUfunction const kAddOne = reinterpret_cast<CUfunction>(0xadd1);
CUresult f_get_function(CUfunction* f, CUmodule, const char* name) {
  if (std::strcmp(name, kAddOneKernel) != 0) return CUDA_ERROR_NOT_FOUND;
  *f = kAddOne;
  return CUDA_SUCCESS;
}
CUresult f_param_info(CUfunction f, size_t i, size_t* off, size_t* size) {
  if (f != kAddOne || i > 1) return CUDA_ERROR_INVALID_VALUE;
  *off = i == 0 ? 0 : 8;
  *size = i == 0 ? 8 : 4;
  return CUDA_SUCCESS;
}
CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  unsigned, CUstream, void** params, void**) {
  if (f != kAddOne) return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ptr;
  int n;
  std::memcpy(&ptr, params[0], 8);
  std::memcpy(&n, params[1], 4);
  std::lock_guard l(gpu().mu);
  const uint64_t threads = uint64_t{gx} * gy * gz * bx * by * bz;
  const uint64_t count = std::min<uint64_t>(threads, n < 0 ? 0 : n);
  std::byte* p = find(ptr, count * sizeof(int));
  if (!p && count) return 700;  // an illegal address, as the GPU would report
  for (uint64_t i = 0; i < count; ++i) {
    int v;
    std::memcpy(&v, p + i * 4, 4);
    ++v;
    std::memcpy(p + i * 4, &v, 4);
  }
  return CUDA_SUCCESS;
}
CUresult f_uuid(unsigned char* u, CUdevice) {
  std::memset(u, 0xab, 16);
  return CUDA_SUCCESS;
}
CUresult f_mem_info(size_t* free_bytes, size_t* total) {
  *total = 1ull << 30;
  *free_bytes = *total - fake_allocated_bytes();
  return CUDA_SUCCESS;
}
CUresult f_primary(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(0x5e);
  return CUDA_SUCCESS;
}
std::set<void*>& pinned() {
  static std::set<void*> p;
  return p;
}
CUresult f_register(void* p, size_t, unsigned) {
  std::lock_guard l(gpu().mu);
  return pinned().insert(p).second ? CUDA_SUCCESS : 712;  // HOST_MEMORY_ALREADY_REGISTERED
}
CUresult f_unregister(void* p) {
  std::lock_guard l(gpu().mu);
  return pinned().erase(p) ? CUDA_SUCCESS : 713;
}
CUresult f_error_name(CUresult r, const char** s) {
  *s = r == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR (test executor)";
  return CUDA_SUCCESS;
}
}  // namespace

void install_fake_driver(DriverApi& api) {
  {
    auto& g = gpu();
    std::lock_guard l(g.mu);
    g.mem.clear();
    g.contexts.clear();
    g.modules.clear();
  }
  api.cuInit = f_init;
  api.cuDriverGetVersion = f_version;
  api.cuDeviceGetCount = f_count;
  api.cuDeviceGet = f_get;
  api.cuDeviceGetName = f_name;
  api.cuDeviceTotalMem_v2 = f_total;
  api.cuDeviceGetAttribute = f_attr;
  api.cuCtxCreate_v4 = f_ctx_create;
  api.cuCtxDestroy_v2 = f_ctx_destroy;
  api.cuCtxSetCurrent = f_ctx_set;
  api.cuCtxSynchronize = f_sync;
  api.cuMemAlloc_v2 = f_alloc;
  api.cuMemFree_v2 = f_free;
  api.cuMemcpyHtoD_v2 = f_htod;
  api.cuMemcpyDtoH_v2 = f_dtoh;
  api.cuMemcpyDtoD_v2 = f_dtod;
  api.cuMemsetD8_v2 = f_memset;
  api.cuModuleLoadData = f_mod_load;
  api.cuModuleUnload = f_mod_unload;
  api.cuModuleGetFunction = f_get_function;
  api.cuFuncGetParamInfo = f_param_info;
  api.cuLaunchKernel = f_launch;
  api.cuGetErrorName = f_error_name;
  api.cuDeviceGetUuid_v2 = f_uuid;
  api.cuMemGetInfo_v2 = f_mem_info;
  api.cuDevicePrimaryCtxRetain = f_primary;
  api.cuMemHostRegister_v2 = f_register;
  api.cuMemHostUnregister = f_unregister;
  api.origin = "vmcuda test executor (no GPU)";
}

uint64_t fake_allocated_bytes() {
  std::lock_guard l(gpu().mu);
  uint64_t s = 0;
  for (auto& [p, v] : gpu().mem) s += v.size();
  return s;
}
uint64_t fake_live_contexts() {
  std::lock_guard l(gpu().mu);
  return gpu().contexts.size();
}
uint64_t fake_pinned_ranges() {
  std::lock_guard l(gpu().mu);
  return pinned().size();
}
uint64_t fake_live_modules() {
  std::lock_guard l(gpu().mu);
  return gpu().modules.size();
}

}  // namespace vmcuda::testing
