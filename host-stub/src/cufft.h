// cuFFT on the host (issue 12 point 3): the library's entry points and the traits every handler
// of a cuFFT call uses (generated: build/generated/cufft/cufft_host.cc; hand-written: cufft.cc).
#pragma once

#include "cufft_host_api.h"
#include "nvlib.h"

namespace vmcuda::host {

// cufftResult values (cufft.h) the host answers itself.
inline constexpr int32_t CUFFT_SUCCESS = 0, CUFFT_INVALID_PLAN = 1, CUFFT_ALLOC_FAILED = 2, CUFFT_INVALID_VALUE = 4, CUFFT_SETUP_FAILED = 7,
                         CUFFT_INVALID_SIZE = 8, CUFFT_INVALID_DEVICE = 11, CUFFT_NOT_SUPPORTED = 16;

// The entry points of libcufft.so.12 the calls use (generated list; ABI types).
struct CufftApi {
#define VMCUDA_CUFFT_DECLARE(name, type) std::type_identity_t<type> name = nullptr;
  VMCUDA_CUFFT_FUNCTIONS(VMCUDA_CUFFT_DECLARE)
#undef VMCUDA_CUFFT_DECLARE
};

struct CufftTraits {
  using Api = CufftApi;
  using Data = CufftPlanObject;
  using Native = int;
  static constexpr ObjectKind kKind = ObjectKind::CufftPlan;
  static constexpr int32_t kBadHandle = CUFFT_INVALID_PLAN, kNoLibrary = CUFFT_SETUP_FAILED,
                           kInvalidValue = CUFFT_INVALID_VALUE, kInvalidSize = CUFFT_INVALID_SIZE,
                           kNotSupported = CUFFT_NOT_SUPPORTED, kAllocFailed = CUFFT_ALLOC_FAILED;
  static constexpr HostLibrary kHostLibrary = HostLibrary::kFft;
  static constexpr const char* kLibrary = "libcufft.so.12";
  static const CufftApi* library(const DriverApi& driver, std::string* why);
  static int& native(CufftPlanObject& p) { return p.plan; }
  static void reset_stream(const CufftApi& lib, int plan) {
    if (lib.cufftSetStream) lib.cufftSetStream(plan, nullptr);
  }
  // The calls that made a plan, for a resume: a call repeated right after itself
  // (cufftSetAutoAllocation) replaces itself; more than kMaxMadeBy is an overflow.
  static constexpr size_t kMaxMadeBy = 16;
  static void record(CufftPlanObject& p, uint32_t call, std::span<const std::byte> args) {
    if (!p.made_by.empty() && p.made_by.back().first == call) p.made_by.pop_back();
    if (p.made_by.size() >= kMaxMadeBy) {
      p.overflow = true;
      return;
    }
    p.made_by.emplace_back(call, std::vector<std::byte>(args.begin(), args.end()));
  }
};
using CufftScope = NvlibScope<CufftTraits>;

// Generated (cufft_host.cc): replaying a recorded call on *plan (a resume).
bool cufft_replay_makes(uint32_t call);
bool cufft_replayable(uint32_t call, size_t bytes);
uint64_t cufft_replay_scratch(uint32_t call, std::span<const std::byte> bytes);
int cufft_replay(const CufftApi& lib, int* plan, uint32_t call, std::span<const std::byte> bytes, void* scratch);

}  // namespace vmcuda::host
