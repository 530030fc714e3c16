// What NVIDIA's handle-based libraries share on the host (nvlib.h): opening them, the logs, and
// why a suspend is refused while their objects exist.
#include "nvlib.h"

#include <atomic>
#include <set>

#include "vmrpc/log.h"

namespace vmcuda::host {

void* open_nvidia_library(const DriverApi& driver, const char* soname, const char* marker, std::string* why) {
  std::string w;
  void* lib = driver.open_library ? driver.open_library(soname, &w) : nullptr;
  if (lib && driver.library_symbol(lib, marker)) {
    lib = nullptr;  // vmcuda's own guest library, found through a path meant for applications
    w = std::string("the ") + soname + " found is vmcuda's guest library: remove vmcuda's library folder from "
        "vmcuda-stub's LD_LIBRARY_PATH";
  }
  if (!lib && w.empty()) w = "this vmcuda-stub cannot open libraries";
  if (!lib && why) *why = w;
  return lib;
}

namespace {
std::atomic<uint32_t> g_bad_pointers{0};
std::mutex g_missing_mu;
std::set<std::string> g_missing;
}  // namespace

void log_bad_pointer(const std::string& client, const char* call, const char* param, const char* answer) {
  if (g_bad_pointers.fetch_add(1, std::memory_order_relaxed) < 8)
    VMRPC_LOG(kWarn, "stub", client + ": " + call + ": " + param +
                                 " is not the client's device memory (or not all of what the call writes); "
                                 "the call answers " + answer);
}

int32_t log_missing(const char* library, const char* call, int32_t status, const char* status_name) {
  std::lock_guard l(g_missing_mu);
  if (g_missing.insert(call).second)
    VMRPC_LOG(kWarn, "stub", std::string("the host's ") + library + " has no " + call + ": the call answers " +
                                 status_name + " (" + std::to_string(status) + ")");
  return status;
}

std::string Session::nvlib_block_suspend() const {
  // A generator is carried as the steps that brought it where it stands (curand.h): refused
  // when they no longer fit the log, or when replaying them would generate too much.
  for (const auto& [guest, id] : vol_.of(ObjectKind::CurandGenerator)) {
    const auto& g = vol_.get(id)->as<CurandGeneratorObject>();
    if (g.overflow)
      return "a cuRAND generator was seeded, positioned and used by more distinct calls than a suspend records "
             "(curandSetGeneratorOffset resets the record); suspend when the program has destroyed it "
             "(curandDestroyGenerator), or end the program";
    if (g.replay_bytes > kCurandMaxReplayBytes)
      return "a cuRAND generator has generated " + std::to_string(g.replay_bytes >> 20) +
             " MiB since it was last positioned, which a resume would have to generate again (at most " +
             std::to_string(kCurandMaxReplayBytes >> 20) +
             " MiB; cuRAND cannot say where a generator stands); suspend after the program sets its offset "
             "(curandSetGeneratorOffset) or destroys it, or end the program";
  }
  for (const auto& [guest, id] : vol_.of(ObjectKind::CufftPlan))
    if (vol_.get(id)->as<CufftPlanObject>().overflow)
      return "a cuFFT plan was configured by more calls than a suspend records; suspend when the program has "
             "destroyed it (cufftDestroy), or end the program";
  return {};
}

}  // namespace vmcuda::host
