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
  // A generator's position in its sequence cannot be read back from cuRAND (and replaying its
  // calls would redo all its work), so generators are not carried.
  if (const size_t gens = vol_.count(ObjectKind::CurandGenerator))
    return "the program holds " + std::to_string(gens) +
           " cuRAND generators, which a suspend does not carry (cuRAND cannot say where a generator is in its "
           "sequence); suspend when the program has destroyed them (curandDestroyGenerator), or end the program";
  for (const auto& [guest, id] : vol_.of(ObjectKind::CufftPlan))
    if (vol_.get(id)->as<CufftPlanObject>().overflow)
      return "a cuFFT plan was configured by more calls than a suspend records; suspend when the program has "
             "destroyed it (cufftDestroy), or end the program";
  return {};
}

}  // namespace vmcuda::host
