/* What an nvidia-smi-style tool asks NVML, through whichever libnvidia-ml.so.1 the loader finds
   (dlopen, as PyTorch and pynvml load it): NVIDIA's natively, vmcuda's under vmcuda-run or in a
   VM. scripts/gpu-check.sh --run compares the "id" lines native vs vmcuda (they must be equal)
   and prints the "mem"/"util" lines side by side (vmcuda's total is the GPU's CUDA-visible
   memory or the VM's quota; NVIDIA's NVML counts the driver's reservation in too).
   No CUDA toolkit needed: cc -o nvml_query nvml_query.c -ldl */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int ret_t;
typedef void* dev_t_;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned gpu, memory; } util_t;
typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} pci_t;

static void* lib;
static void* sym(const char* name) {
  void* p = dlsym(lib, name);
  if (!p) printf("missing: %s\n", name);
  return p;
}
#define CALL(type, name, ...) (((type)sym(#name))(__VA_ARGS__))

int main(void) {
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    printf("dlopen libnvidia-ml.so.1: %s\n", dlerror());
    return 1;
  }
  const char* (*err)(ret_t) = (const char* (*)(ret_t))sym("nvmlErrorString");
  ret_t r = CALL(ret_t (*)(void), nvmlInit_v2);
  if (r != 0) {
    printf("nvmlInit_v2: %d (%s)\n", r, err(r));
    return 1;
  }
  char s[96];
  int cuda = 0;
  r = CALL(ret_t (*)(int*), nvmlSystemGetCudaDriverVersion_v2, &cuda);
  printf("id cuda driver version: %d (%d)\n", cuda, r);
  r = CALL(ret_t (*)(char*, unsigned), nvmlSystemGetDriverVersion, s, sizeof s);
  printf("id driver version: %s (%d)\n", r == 0 ? s : err(r), r);
  unsigned count = 0;
  r = CALL(ret_t (*)(unsigned*), nvmlDeviceGetCount_v2, &count);
  printf("id devices: %u (%d)\n", count, r);
  for (unsigned i = 0; i < count; ++i) {
    dev_t_ d = 0;
    if ((r = CALL(ret_t (*)(unsigned, dev_t_*), nvmlDeviceGetHandleByIndex_v2, i, &d)) != 0) {
      printf("id %u: handle: %d (%s)\n", i, r, err(r));
      continue;
    }
    r = CALL(ret_t (*)(dev_t_, char*, unsigned), nvmlDeviceGetName, d, s, sizeof s);
    printf("id %u name: %s\n", i, r == 0 ? s : err(r));
    r = CALL(ret_t (*)(dev_t_, char*, unsigned), nvmlDeviceGetUUID, d, s, sizeof s);
    printf("id %u uuid: %s\n", i, r == 0 ? s : err(r));
    pci_t pci;
    memset(&pci, 0, sizeof pci);
    r = CALL(ret_t (*)(dev_t_, pci_t*), nvmlDeviceGetPciInfo_v3, d, &pci);
    printf("id %u pci: %s device id %08x (%d)\n", i, pci.busId, pci.pciDeviceId, r);
    int major = 0, minor = 0;
    r = CALL(ret_t (*)(dev_t_, int*, int*), nvmlDeviceGetCudaComputeCapability, d, &major, &minor);
    printf("id %u compute capability: %d.%d (%d)\n", i, major, minor, r);
    unsigned arch = 0, brand = 0, multi = 0;
    r = CALL(ret_t (*)(dev_t_, unsigned*), nvmlDeviceGetArchitecture, d, &arch);
    printf("id %u architecture: %u (%d)\n", i, arch, r);
    r = CALL(ret_t (*)(dev_t_, unsigned*), nvmlDeviceGetBrand, d, &brand);
    printf("id %u brand: %u (%d)\n", i, brand, r);
    r = CALL(ret_t (*)(dev_t_, unsigned*), nvmlDeviceGetMultiGpuBoard, d, &multi);
    printf("id %u multi-GPU board: %u (%d)\n", i, multi, r);
    mem_t m = {0, 0, 0};
    r = CALL(ret_t (*)(dev_t_, mem_t*), nvmlDeviceGetMemoryInfo, d, &m);
    printf("mem %u: total %llu MiB, free %llu MiB, used %llu MiB (%d)\n", i, m.total >> 20, m.free >> 20,
           m.used >> 20, r);
    util_t u = {0, 0};
    r = CALL(ret_t (*)(dev_t_, util_t*), nvmlDeviceGetUtilizationRates, d, &u);
    printf("util %u: gpu %u%%, memory %u%% (%d)\n", i, u.gpu, u.memory, r);
  }
  r = CALL(ret_t (*)(void), nvmlShutdown);
  printf("id shutdown: %d\n", r);
  return 0;
}
