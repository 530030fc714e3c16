// libnvidia-ml.so.1's implemented functions (README.md "NVML"): the VM's GPUs as vmcuda's
// policy shows them, from the process's one session (Remote, shared with libcuda.so.1 and
// libcudart.so.13). Device names, UUIDs, PCI ids and attributes come from the device records
// of the handshake (DevicePropertiesReply); memory, utilization and the host driver's version
// from NvmlDeviceInfo, which needs no context (a query makes none, as nvidia-smi makes none).
// Everything else is a generated stub (nvml_stubs.cc): NVML_ERROR_NOT_SUPPORTED, logged once.
//
// Handles: nvmlDevice_t points into a static array, one element per guest device, so a
// handle stays valid (and comparable) for the life of the process, as NVIDIA's do; one that
// points elsewhere is an invalid argument, never dereferenced.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "device_props.h"
#include "log.h"
#include "nvml_state.h"
#include "remote.h"
#include "vmcuda/nvml_types.h"

struct nvmlDevice_st {
  unsigned index;
};

namespace vmcuda::guest::nvml {

int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.load(std::memory_order_relaxed) && !logged.exchange(true, std::memory_order_relaxed))
    VMCUDA_LOG(kWarn, "nvml", "%s is not supported yet; it returns NVML_ERROR_NOT_SUPPORTED (3)", name);
  return NVML_ERROR_NOT_SUPPORTED;
}

namespace {

constexpr unsigned kMaxDevices = 64;
nvmlDevice_st g_devices[kMaxDevices] = {};

std::mutex g_mu;          // init/shutdown
int g_refs = 0;           // nvmlInit calls not yet shut down (NVML counts them)
std::atomic<Remote*> g_remote{nullptr};  // set by the first successful init

// The session while NVML is initialized, else null.
Remote* initialized() noexcept {
  std::lock_guard l(g_mu);
  return g_refs > 0 ? g_remote.load(std::memory_order_acquire) : nullptr;
}

unsigned device_count(const Remote& r) noexcept {
  return static_cast<unsigned>(std::min<size_t>(r.devices().size(), kMaxDevices));
}

// The device record behind `device`, after the checks every device query makes.
nvmlReturn_t lookup(nvmlDevice_t device, Remote** remote, const api::DevicePropertiesReply** props) noexcept {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  const auto at = reinterpret_cast<uintptr_t>(device), first = reinterpret_cast<uintptr_t>(&g_devices[0]);
  if (device == nullptr || at < first || at >= first + sizeof g_devices || (at - first) % sizeof(nvmlDevice_st) != 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned index = static_cast<unsigned>((at - first) / sizeof(nvmlDevice_st));
  if (index >= device_count(*r)) return NVML_ERROR_INVALID_ARGUMENT;
  *remote = r;
  *props = &r->devices()[index];
  return NVML_SUCCESS;
}

int attribute(const api::DevicePropertiesReply& d, cu::DeviceAttribute a) noexcept { return d.attributes[a]; }

// Copies `s` into the caller's buffer of `length` bytes (NUL included).
nvmlReturn_t put_string(const std::string& s, char* out, unsigned length) noexcept {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and NVIDIA's NVML print the
// UUID that cuDeviceGetUuid returns.
std::string uuid_string(const uint8_t (&u)[16]) {
  char s[64];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
                u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return s;
}

struct Pci {
  unsigned domain, bus, device;
};
Pci pci_of(const api::DevicePropertiesReply& d) {
  return {static_cast<unsigned>(attribute(d, cu::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)),
          static_cast<unsigned>(attribute(d, cu::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)),
          static_cast<unsigned>(attribute(d, cu::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID))};
}

// domain:bus:device.function or bus:device.function (domain 0), hexadecimal, as NVML takes
// them ("00000000:3B:00.0", "0000:3b:00.0", "3b:00.0"); the whole string or nothing.
bool parse_bus_id(const char* s, Pci* out) {
  unsigned a = 0, b = 0, c = 0, f = 0;
  int n = -1;
  if (std::sscanf(s, "%x:%x:%x.%x%n", &a, &b, &c, &f, &n) == 4 && n >= 0 && s[n] == '\0') {
    *out = {a, b, c};
    return f == 0;
  }
  n = -1;
  if (std::sscanf(s, "%x:%x.%x%n", &b, &c, &f, &n) == 3 && n >= 0 && s[n] == '\0') {
    *out = {0, b, c};
    return f == 0;
  }
  return false;
}

// NvmlDeviceInfo of guest device `index` (a round trip: memory and utilization change).
nvmlReturn_t device_info(Remote& r, unsigned index, api::NvmlDeviceInfoReply* out) {
  auto lock = r.lock();
  auto res = r.query<api::Call::NvmlDeviceInfo>({static_cast<int32_t>(index), 0});
  if (res.status != 0) {
    VMCUDA_LOG(kInfo, "nvml", "NvmlDeviceInfo of device %u failed (status %d)", index, res.status);
    return NVML_ERROR_UNKNOWN;
  }
  *out = res.reply;
  out->driver_version[sizeof out->driver_version - 1] = '\0';  // the host's bytes: bounded
  return NVML_SUCCESS;
}

unsigned index_of(const Remote& r, const api::DevicePropertiesReply* p) {
  return static_cast<unsigned>(p - r.devices().data());
}

// The host driver's version string ("" unknown): the first device's answer.
nvmlReturn_t driver_version(std::string* out) {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (device_count(*r) == 0) return NVML_ERROR_NOT_SUPPORTED;
  api::NvmlDeviceInfoReply info{};
  if (nvmlReturn_t e = device_info(*r, 0, &info); e != NVML_SUCCESS) return e;
  *out = info.driver_version;
  for (char c : *out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) out->clear();
  return NVML_SUCCESS;
}

nvmlReturn_t init(unsigned flags) {
  std::lock_guard l(g_mu);
  if (g_refs > 0) {
    ++g_refs;
    return NVML_SUCCESS;
  }
  cudaError_t err = cudaSuccess;
  Remote* r = Remote::get(&err);  // says why, once, when no host can be reached
  if (!r) return NVML_ERROR_DRIVER_NOT_LOADED;
  if (r->devices().empty() && (flags & NVML_INIT_FLAG_NO_GPUS) == 0) return NVML_ERROR_GPU_NOT_FOUND;
  for (unsigned i = 0; i < kMaxDevices; ++i) g_devices[i].index = i;
  g_remote.store(r, std::memory_order_release);
  ++g_refs;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace vmcuda::guest::nvml

using namespace vmcuda::guest;
using namespace vmcuda::guest::nvml;
using vmcuda::api::NvmlDeviceInfoReply;

extern "C" {

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return init(flags); }
nvmlReturn_t nvmlInit_v2(void) { return init(0); }
nvmlReturn_t nvmlInit(void) { return init(0); }

nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard l(g_mu);
  if (g_refs == 0) return NVML_ERROR_UNINITIALIZED;
  --g_refs;  // the session stays: libcuda.so.1 and libcudart.so.13 share it
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "The requested vgpu operation is not available on target device, becasue ECC is enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Ran out of critical resources, other than memory";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Requested frequency is not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
    default: return "Unknown Error";
  }
}

// ---- system

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::string v;
  if (nvmlReturn_t e = driver_version(&v); e != NVML_SUCCESS) return e;
  if (v.empty()) return NVML_ERROR_NOT_SUPPORTED;  // the host has no NVIDIA module (test executor)
  return put_string(v, version, length);
}

// NVIDIA's reads "<NVML API>.<driver version>" ("13.580.65.06").
nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  std::string v;
  if (nvmlReturn_t e = driver_version(&v); e != NVML_SUCCESS) return e;
  return put_string(std::to_string(NVML_API_VERSION) + (v.empty() ? "" : "." + v), version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *cudaDriverVersion = r->handshake().driver_version;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

// ---- devices

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = device_count(*r);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= device_count(*r)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < device_count(*r); ++i)
    if (strcasecmp(uuid_string(r->devices()[i].uuid).c_str(), uuid) == 0) {
      *device = &g_devices[i];
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  Remote* r = initialized();
  if (!r) return NVML_ERROR_UNINITIALIZED;
  Pci want{};
  if (pciBusId == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!parse_bus_id(pciBusId, &want)) return NVML_ERROR_NOT_FOUND;
  for (unsigned i = 0; i < device_count(*r); ++i) {
    const Pci p = pci_of(r->devices()[i]);
    if (p.domain == want.domain && p.bus == want.bus && p.device == want.device) {
      *device = &g_devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

// A device query: `out` checked, then `body(remote, record)`.
#define VMCUDA_NVML_DEVICE(device, out)                                      \
  Remote* r = nullptr;                                                       \
  const vmcuda::api::DevicePropertiesReply* d = nullptr;                     \
  if (nvmlReturn_t e = lookup(device, &r, &d); e != NVML_SUCCESS) return e; \
  if ((out) == nullptr) return NVML_ERROR_INVALID_ARGUMENT

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  VMCUDA_NVML_DEVICE(device, index);
  *index = index_of(*r, d);
  return NVML_SUCCESS;
}

// The guest device's index: the VM has no /dev/nvidiaN of its own.
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  VMCUDA_NVML_DEVICE(device, minorNumber);
  *minorNumber = index_of(*r, d);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  VMCUDA_NVML_DEVICE(device, name);
  return put_string(std::string(d->name, strnlen(d->name, sizeof d->name)), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  VMCUDA_NVML_DEVICE(device, uuid);
  return put_string(uuid_string(d->uuid), uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  VMCUDA_NVML_DEVICE(device, pci);
  const Pci p = pci_of(*d);
  std::memset(pci, 0, sizeof *pci);
  pci->domain = p.domain;
  pci->bus = p.bus;
  pci->device = p.device;
  pci->pciDeviceId = static_cast<unsigned>(attribute(*d, cu::CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID));
  pci->pciSubSystemId = static_cast<unsigned>(attribute(*d, cu::CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID));
  std::snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, p.domain, p.bus, p.device);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, p.domain, p.bus,
                p.device);
  return NVML_SUCCESS;
}

// Memory as the VM may use it: total is the VM's quota where one is set, else the GPU's;
// free is what cudaMemGetInfo says through vmcuda (the driver's where this process has a
// context on the device, else the device less what the VM holds), used the rest.
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  VMCUDA_NVML_DEVICE(device, memory);
  NvmlDeviceInfoReply info{};
  if (nvmlReturn_t e = device_info(*r, index_of(*r, d), &info); e != NVML_SUCCESS) return e;
  const uint64_t free_bytes = std::min(info.free_bytes, info.total_bytes);
  *memory = {info.total_bytes, free_bytes, info.total_bytes - free_bytes};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  VMCUDA_NVML_DEVICE(device, memory);
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  NvmlDeviceInfoReply info{};
  if (nvmlReturn_t e = device_info(*r, index_of(*r, d), &info); e != NVML_SUCCESS) return e;
  const uint64_t free_bytes = std::min(info.free_bytes, info.total_bytes);
  memory->total = info.total_bytes;
  memory->reserved = 0;  // the driver's own reservation is the host's, outside the VM's view
  memory->free = free_bytes;
  memory->used = info.total_bytes - free_bytes;
  return NVML_SUCCESS;
}

// gpu: the VM's own share of the GPU's time over the last ~2 s, as vmcuda's fair-share
// sampler measures it (vmcuda-stub with fair sharing on); 0 where the host does not measure.
// memory: 0 (not measured per VM).
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  VMCUDA_NVML_DEVICE(device, utilization);
  NvmlDeviceInfoReply info{};
  if (nvmlReturn_t e = device_info(*r, index_of(*r, d), &info); e != NVML_SUCCESS) return e;
  utilization->gpu = std::min(info.gpu_percent, 100u);
  utilization->memory = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  VMCUDA_NVML_DEVICE(device, major);
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = attribute(*d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  *minor = attribute(*d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  return NVML_SUCCESS;
}

// The host device's compute mode (what its driver enforces), as cudaDeviceProp::computeMode.
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  VMCUDA_NVML_DEVICE(device, mode);
  *mode = static_cast<nvmlComputeMode_t>(attribute(*d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE));
  return NVML_SUCCESS;
}

// Disabled: the guest has no driver of its own to keep loaded.
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  VMCUDA_NVML_DEVICE(device, mode);
  *mode = NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int* multiGpuBool) {
  VMCUDA_NVML_DEVICE(device, multiGpuBool);
  *multiGpuBool = attribute(*d, cu::CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD) != 0;
  return NVML_SUCCESS;
}

// From the product name, as NVIDIA's brands go: data-center parts without a family name
// ("NVIDIA H100 80GB HBM3") are NVML_BRAND_NVIDIA.
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  VMCUDA_NVML_DEVICE(device, type);
  const std::string name(d->name, strnlen(d->name, sizeof d->name));
  const auto has = [&name](const char* s) { return name.find(s) != std::string::npos; };
  *type = has("GeForce") ? NVML_BRAND_GEFORCE
          : has("TITAN") ? NVML_BRAND_TITAN
          : has("Quadro") ? NVML_BRAND_QUADRO
          : has("Tesla")  ? NVML_BRAND_TESLA
          : has("NVS")    ? NVML_BRAND_NVS
          : has("RTX")    ? NVML_BRAND_NVIDIA_RTX
                          : NVML_BRAND_NVIDIA;
  return NVML_SUCCESS;
}

// From the compute capability.
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  VMCUDA_NVML_DEVICE(device, arch);
  const int major = attribute(*d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(*d, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  switch (major) {
    case 3: *arch = NVML_DEVICE_ARCH_KEPLER; break;
    case 5: *arch = NVML_DEVICE_ARCH_MAXWELL; break;
    case 6: *arch = NVML_DEVICE_ARCH_PASCAL; break;
    case 7: *arch = minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA; break;
    case 8: *arch = minor >= 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE; break;
    case 9: *arch = NVML_DEVICE_ARCH_HOPPER; break;
    case 10:
    case 12: *arch = NVML_DEVICE_ARCH_BLACKWELL; break;
    default: *arch = NVML_DEVICE_ARCH_UNKNOWN; break;
  }
  return NVML_SUCCESS;
}

}  // extern "C"
