// cuFFT's hand-written part in libcuda.so.1 (cufft.h): the plans' registry, their destruction
// and settings (api/libs/cufft.calls `hand`) and what the guest answers itself (versions). The
// rest is generated (scripts/gen-nvlib.py).
#include "cufft.h"

#include <map>
#include <mutex>

#include "stream_event.h"

namespace vmcuda::guest::cufft {
namespace {

bool is_status(int32_t s) { return (s >= 0 && s <= 9) || s == 11 || (s >= 13 && s <= 20); }

struct Registry {
  std::mutex mu;
  std::map<int, std::unique_ptr<Handle>> live;
  int last = 0;  // plans are numbered from 1, as NVIDIA's library numbers them
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

}  // namespace

const nvlib::Statuses kStatuses = {"cufft", kSetupFailed, kExecFailed, kInternalError, is_status,
                                   "CUFFT_NOT_SUPPORTED (16)"};

int enter(int plan, Handle** h) noexcept {
  std::lock_guard l(registry().mu);
  auto it = registry().live.find(plan);
  if (it == registry().live.end()) return kInvalidPlan;
  *h = it->second.get();
  return kSuccess;
}

std::unique_ptr<Handle> make_handle() {
  auto h = std::make_unique<Handle>();
  h->wire = handles::next();
  return h;
}

void publish(std::unique_ptr<Handle> h, int* plan) noexcept {
  std::lock_guard l(registry().mu);
  Registry& r = registry();
  do {
    r.last = r.last == INT32_MAX ? 1 : r.last + 1;
  } while (r.live.count(r.last));
  h->plan = r.last;
  *plan = r.last;
  r.live.emplace(r.last, std::move(h));
}

}  // namespace vmcuda::guest::cufft

using namespace vmcuda::guest::cufft;
namespace api = vmcuda::api;

VMCUDA_CUFFT_API int cufftDestroy(int plan) {
  std::unique_ptr<Handle> h;
  {
    std::lock_guard l(registry().mu);
    auto it = registry().live.find(plan);
    if (it == registry().live.end()) return kInvalidPlan;
    h = std::move(it->second);
    registry().live.erase(it);
  }
  api::cufftDestroy_Args a{};
  a.plan = h->wire;
  return queue<api::Call::cufftDestroy>(a);
}

VMCUDA_CUFFT_API int cufftSetWorkArea(int plan, void* workArea) {
  Handle* h;
  if (int s = enter(plan, &h)) return s;
  api::cufftSetWorkArea_Args a{};
  a.plan = h->wire;
  a.workArea = device_pointer(workArea);
  return queue<api::Call::cufftSetWorkArea>(a);
}

VMCUDA_CUFFT_API int cufftSetStream(int plan, cudaStream_t stream) {
  Handle* h;
  if (int s = enter(plan, &h)) return s;
  api::cufftSetStream_Args a{};
  a.plan = h->wire;
  if (vmcuda::guest::stream_wire_handle(stream, false, &a.stream) != cudaSuccess) return kInvalidValue;
  return queue<api::Call::cufftSetStream>(a);
}

// ---- answered here (cufft.h's version: the library vmcuda was built against)

VMCUDA_CUFFT_API int cufftGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = kVersion[0] * 1000 + kVersion[1] * 100 + kVersion[2];  // CUFFT_VERSION
  return kSuccess;
}

VMCUDA_CUFFT_API int cufftGetProperty(int type, int* value) {
  if (!value || type < 0 || type > 2) return kInvalidValue;  // libraryPropertyType: MAJOR, MINOR, PATCH
  *value = kVersion[type];
  return kSuccess;
}
