// cuRAND's hand-written part in libcuda.so.1 (curand.h): the generators' registry, their
// destruction and stream (api/libs/curand.calls `hand`), host generators (`local`, and their
// generation's scratch: HostOutput) and what the guest answers itself (versions). The rest is
// generated (scripts/gen-nvlib.py).
#include "curand.h"

#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest::curand {
namespace {

bool is_status(int32_t s) { return s == 0 || (s >= 100 && s <= 106) || (s >= 201 && s <= 204) || s == 999; }

struct Registry {
  std::mutex mu;
  std::unordered_set<Handle*> live;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

}  // namespace

const nvlib::Statuses kStatuses = {"curand", kInitializationFailed, kPreexistingFailure, kInternalError, is_status,
                                   "CURAND_STATUS_INTERNAL_ERROR (999)"};

int enter(curandGenerator_t app, Handle** h) noexcept {
  auto* p = reinterpret_cast<Handle*>(app);
  std::lock_guard l(registry().mu);
  if (!p || !registry().live.count(p)) return kNotInitialized;
  *h = p;
  return kSuccess;
}

std::unique_ptr<Handle> make_handle() {
  auto h = std::make_unique<Handle>();
  h->wire = handles::next();
  return h;
}

void publish(std::unique_ptr<Handle> h, curandGenerator_t* out) noexcept {
  std::lock_guard l(registry().mu);
  registry().live.insert(h.get());
  *out = reinterpret_cast<curandGenerator_t>(h.release());
}

HostOutput::HostOutput(Handle* h, void* out, size_t count, size_t elem) noexcept : h_(h), lock_(h->mu), out_(out) {
  if (count > SIZE_MAX / elem) {
    status_ = kAllocationFailed;  // more than any memory holds
    return;
  }
  bytes_ = count * elem;
  if (bytes_ <= h->scratch_bytes) return;
  if (h->scratch) cudaFree(h->scratch);  // its last numbers were copied out (copy_out waits)
  h->scratch = nullptr, h->scratch_bytes = 0;
  if (cudaMalloc(&h->scratch, bytes_) != cudaSuccess) {
    h->scratch = nullptr;
    status_ = kAllocationFailed;  // the client's memory (its quota) has no room for the numbers
    return;
  }
  h->scratch_bytes = bytes_;
}

int HostOutput::copy_out(int generated) noexcept {
  if (generated != kSuccess || bytes_ == 0) return generated;
  if (cudaMemcpyAsync(out_, h_->scratch, bytes_, cudaMemcpyDeviceToHost, h_->stream) != cudaSuccess ||
      cudaStreamSynchronize(h_->stream) != cudaSuccess)
    return kLaunchFailure;  // the generation (or the copy into the app's memory) failed
  return kSuccess;
}

int rng_bad(int t) noexcept {
  switch (t) {
    case 100: case 101: case 121: case 141: case 142: case 161:  // pseudo: default, XORWOW, MRG32k3a, MTGP32, MT19937, Philox
    case 200: case 201: case 202: case 203: case 204:            // quasi: default, Sobol32/64, scrambled
      return kSuccess;
  }
  return kTypeError;
}

}  // namespace vmcuda::guest::curand

using namespace vmcuda::guest::curand;
namespace api = vmcuda::api;

VMCUDA_CURAND_API int curandDestroyGenerator(curandGenerator_t generator) {
  Handle* h = reinterpret_cast<Handle*>(generator);
  {
    std::lock_guard l(registry().mu);
    if (!h || !registry().live.erase(h)) return kNotInitialized;
  }
  api::curandDestroyGenerator_Args a{};
  a.generator = h->wire;
  const int s = queue<api::Call::curandDestroyGenerator>(a);
  if (h->scratch) cudaFree(h->scratch);  // a host generator's numbers' room
  delete h;
  return s;
}

VMCUDA_CURAND_API int curandSetStream(curandGenerator_t generator, cudaStream_t stream) {
  Handle* h;
  if (int s = enter(generator, &h)) return s;
  api::curandSetStream_Args a{};
  a.generator = h->wire;
  if (vmcuda::guest::stream_wire_handle(stream, false, &a.stream) != cudaSuccess) return kOutOfRange;
  {
    std::lock_guard l(h->mu);
    h->stream = stream;  // a host generator's numbers are copied out on it (HostOutput)
  }
  return queue<api::Call::curandSetStream>(a);
}

// NVIDIA's host generator runs on the CPU; vmcuda's is a device generator on the host whose
// numbers the generation functions copy into the app's host memory (HostOutput). cuRAND documents
// the same sequence either way (its normals may differ slightly in the last bits: transcendental
// functions of the CPU against the GPU's).
VMCUDA_CURAND_API int curandCreateGenerator(curandGenerator_t* generator, int rng_type);
VMCUDA_CURAND_API int curandCreateGeneratorHost(curandGenerator_t* generator, int rng_type) {
  const int s = curandCreateGenerator(generator, rng_type);
  if (s == kSuccess) reinterpret_cast<Handle*>(*generator)->host = true;  // not yet the app's to use
  return s;
}

// ---- answered here (curand.h's version: the library vmcuda was built against)

VMCUDA_CURAND_API int curandGetVersion(int* version) {
  if (!version) return kOutOfRange;
  *version = kVersion[0] * 1000 + kVersion[1] * 100 + kVersion[2];  // CURAND_VERSION
  return kSuccess;
}

VMCUDA_CURAND_API int curandGetProperty(int type, int* value) {
  if (!value || type < 0 || type > 2) return kOutOfRange;  // libraryPropertyType: MAJOR, MINOR, PATCH
  *value = kVersion[type];
  return kSuccess;
}
