// cuRAND's hand-written part in libcuda.so.1 (curand.h): the generators' registry, their
// destruction and stream (api/libs/curand.calls `hand`) and what the guest answers itself
// (versions). The rest is generated (scripts/gen-nvlib.py).
#include "curand.h"

#include <mutex>
#include <unordered_set>

#include "stream_event.h"

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
  delete h;
  return queue<api::Call::curandDestroyGenerator>(a);
}

VMCUDA_CURAND_API int curandSetStream(curandGenerator_t generator, cudaStream_t stream) {
  Handle* h;
  if (int s = enter(generator, &h)) return s;
  api::curandSetStream_Args a{};
  a.generator = h->wire;
  if (vmcuda::guest::stream_wire_handle(stream, false, &a.stream) != cudaSuccess) return kOutOfRange;
  return queue<api::Call::curandSetStream>(a);
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
