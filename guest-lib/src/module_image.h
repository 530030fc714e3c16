// Module images cross to the host once (calls.def 0x1330; host-stub/src/image_cache.h): the
// guest names an image by its SHA-256 and size; the host loads it from its cache when it
// has it, and only otherwise are the bytes sent (ModuleLoad), which the host hashes and
// stores itself. The runtime's modules (host_objects.cc) and the driver API's
// (driver_module.cc) both load through here.
//
// SHA-256 comes from the guest's libcrypto.so.3 (OpenSSL, in every Debian system), opened
// at the first load rather than linked: no new dependency of libcudart.so.13, and OpenSSL's
// SHA-NI/AVX2 code (~2 GB/s) rather than a vendored portable one. Without it, or with
// VMCUDA_IMAGE_CACHE=0, every image crosses as before.
#pragma once

#include <cstdint>
#include <span>

#include "remote.h"

namespace vmcuda::guest {

struct ModuleLoadResult {
  bool heap_full = false;  // the image did not fit in the shared heap: nothing was asked
  int32_t status = 0;      // the host's answer (a CUresult)
  uint64_t handle = 0;
};

// Loads `image` as a module on the calling thread's device. `stable`: the bytes at this
// address never change (a registered fatbin), so their hash is computed once per process.
// Precondition: r locked.
ModuleLoadResult load_module_image(Remote& r, std::span<const std::byte> image, bool stable);

namespace testing {
// Images this process sent across (ModuleLoad) and those the host had (ModuleLoadCached hits).
struct ImageCounts {
  uint64_t sent = 0, sent_bytes = 0, hits = 0;
};
ImageCounts image_counts();
}  // namespace testing

}  // namespace vmcuda::guest
