#include "driver_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

namespace vmcuda::host {

namespace {
// VMCUDA_HOST_LIBDIR (folders separated by ':', e.g. Python wheels' nvidia/cublas/lib and
// nvidia/cufft/lib) first, then the loader's path, then the CUDA toolkit's own folder, which
// the loader is often not told about.
void* open_host_library(const char* soname, std::string* why) {
  if (const char* dirs = std::getenv("VMCUDA_HOST_LIBDIR"); dirs && *dirs) {
    const std::string all = dirs;
    for (size_t at = 0; at <= all.size();) {
      const size_t end = std::min(all.find(':', at), all.size());
      if (end > at)
        if (void* lib = ::dlopen((all.substr(at, end - at) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
      at = end + 1;
    }
  }
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib) return lib;
  const std::string first = ::dlerror();
  lib = ::dlopen(("/usr/local/cuda/lib64/" + std::string(soname)).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib && why) *why = first + "; nor in /usr/local/cuda/lib64 (or set VMCUDA_HOST_LIBDIR)";
  return lib;
}
void* host_library_symbol(void* lib, const char* name) { return ::dlsym(lib, name); }
}  // namespace

bool load_libcuda(DriverApi& api, std::string* why) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why)
      *why = std::string("cannot load libcuda.so.1 (") + ::dlerror() +
             "): this host has no NVIDIA driver. Install the NVIDIA driver (580 or newer) on the GPU host, "
             "or run the tests' executor instead of a GPU";
    return false;
  }
  // vmcuda's own guest libcuda.so.1 (guest-lib/) found first, through an LD_LIBRARY_PATH meant
  // for applications: it would forward the stub's calls to a stub.
  if (::dlsym(lib, "__vmcuda_cudart_table")) {
    if (why)
      *why = "the libcuda.so.1 found is vmcuda's guest library, not NVIDIA's driver: remove vmcuda's library "
             "folder (guest-lib, lib/vmcuda, lib/vmcuda-run) from this process's LD_LIBRARY_PATH";
    ::dlclose(lib);
    return false;
  }
  std::string missing;
#define VMCUDA_LOAD(name, type)                                    \
  api.name = reinterpret_cast<std::type_identity_t<type>>(::dlsym(lib, #name));          \
  if (!api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  VMCUDA_DRIVER_FUNCTIONS(VMCUDA_LOAD)
#undef VMCUDA_LOAD
  if (!missing.empty()) {
    if (why) *why = "libcuda.so.1 lacks " + missing + ": the NVIDIA driver is too old for CUDA 13 (need 580 or newer)";
    return false;
  }
  int version = 0;
  api.cuDriverGetVersion(&version);
  api.origin = "libcuda.so.1 (CUDA driver API " + std::to_string(version) + ")";
  api.open_library = open_host_library;
  api.library_symbol = host_library_symbol;
  return true;
}

std::string describe(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(r) + ")";
}

}  // namespace vmcuda::host
