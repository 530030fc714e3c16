// Library management (CUDA 12's context-independent loading): cudaLibraryLoadData,
// LoadFromFile, GetKernel, GetGlobal, GetManaged, Unload, GetKernelCount, EnumerateKernels and
// cudaKernelSetAttributeForDevice. A
// cudaLibrary_t is the driver API's CUlibrary and a cudaKernel_t its CUkernel (as natively),
// so these are the driver's calls (driver_module.cc: the image is kept in the guest and
// loaded as a module on each device at its first use there), with the runtime's errors
// recorded as the last error. JIT and library options are ignored, as the driver's are.
#include "driver_state.h"
#include "entry.h"
#include "host_objects.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

extern "C" {
// driver_module.cc (same library).
CUresult cuLibraryLoadData(CUlibrary*, const void*, CUjit_option*, void**, unsigned int, CUlibraryOption*, void**,
                           unsigned int);
CUresult cuLibraryLoadFromFile(CUlibrary*, const char*, CUjit_option*, void**, unsigned int, CUlibraryOption*, void**,
                               unsigned int);
CUresult cuLibraryUnload(CUlibrary);
CUresult cuLibraryGetKernel(CUkernel*, CUlibrary, const char*);
CUresult cuLibraryGetGlobal(CUdeviceptr*, size_t*, CUlibrary, const char*);
CUresult cuLibraryGetManaged(CUdeviceptr*, size_t*, CUlibrary, const char*);
CUresult cuKernelSetAttribute(int, int, CUkernel, CUdevice);
CUresult cuLibraryGetKernelCount(unsigned int*, CUlibrary);
CUresult cuLibraryEnumerateKernels(CUkernel*, unsigned int, CUlibrary);
}

namespace g = vmcuda::guest;
using g::record;

namespace {
// The driver's answer as the runtime's: the codes these calls return have one number in both
// (invalid value 1, invalid image 200, file not found 301, invalid handle 400, not found 500).
cudaError_t runtime_error(CUresult e) { return record(static_cast<cudaError_t>(e)); }

// Every library call starts as a runtime call (the connection, the sticky error).
cudaError_t enter() {
  cudaError_t e;
  return g::device_call(&e) ? cudaSuccess : e;
}
}  // namespace

cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code, enum cudaJitOption*, void**, unsigned int,
                                enum cudaLibraryOption*, void**, unsigned int) {
  if (cudaError_t e = enter()) return e;
  return runtime_error(cuLibraryLoadData(library, code, nullptr, nullptr, 0, nullptr, nullptr, 0));
}

cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t* library, const char* fileName, enum cudaJitOption*, void**,
                                    unsigned int, enum cudaLibraryOption*, void**, unsigned int) {
  if (cudaError_t e = enter()) return e;
  return runtime_error(cuLibraryLoadFromFile(library, fileName, nullptr, nullptr, 0, nullptr, nullptr, 0));
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  if (cudaError_t e = enter()) return e;
  return runtime_error(cuLibraryUnload(library));
}

// The name is checked now, as natively (the driver's cuLibraryGetKernel leaves that to the
// kernel's first use, so NVIDIA's runtime, which asks for every kernel at start-up, does
// not load every image): the library is loaded on the current device here.
cudaError_t cudaLibraryGetKernel(cudaKernel_t* pKernel, cudaLibrary_t library, const char* name) {
  if (cudaError_t e = enter()) return e;
  cudaKernel_t k = nullptr;
  if (CUresult e = cuLibraryGetKernel(&k, library, name)) return runtime_error(e);
  g::HostKernel* unused = nullptr;
  if (cudaError_t e = g::driver_kernel(k, &unused)) return record(e);
  *pKernel = k;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetGlobal(void** dptr, size_t* bytes, cudaLibrary_t library, const char* name) {
  if (cudaError_t e = enter()) return e;
  if (!dptr) return record(cudaErrorInvalidValue);
  CUdeviceptr p = 0;
  if (CUresult e = cuLibraryGetGlobal(&p, bytes, library, name)) return runtime_error(e);
  *dptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  return cudaSuccess;
}

// A library's __managed__ variable: its shadow in the shared heap (driver_module.cc), which the
// program's CPU and the library's kernels share as natively they share managed memory.
cudaError_t cudaLibraryGetManaged(void** dptr, size_t* bytes, cudaLibrary_t library, const char* name) {
  if (cudaError_t e = enter()) return e;
  if (!dptr) return record(cudaErrorInvalidValue);
  CUdeviceptr p = 0;
  if (CUresult e = cuLibraryGetManaged(&p, bytes, library, name)) return runtime_error(e);
  *dptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  return cudaSuccess;
}

// cudaFuncAttribute's values are CUfunction_attribute's (8: max dynamic shared memory, ...).
cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr, int value, int device) {
  if (cudaError_t e = enter()) return e;
  return runtime_error(cuKernelSetAttribute(static_cast<int>(attr), value, kernel, device));
}

// The library's kernels, as the host's driver lists them in its module on the current device.
cudaError_t cudaLibraryGetKernelCount(unsigned int* count, cudaLibrary_t lib) {
  if (cudaError_t e = enter()) return e;
  return runtime_error(cuLibraryGetKernelCount(count, lib));
}
cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t* kernels, unsigned int numKernels, cudaLibrary_t lib) {
  if (cudaError_t e = enter()) return e;
  return runtime_error(cuLibraryEnumerateKernels(kernels, numKernels, lib));
}
