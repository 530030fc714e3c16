// Call numbers and per-call traits, all from calls.def.
#pragma once

#include <cstdint>

#include "vmcuda/api/wire.h"

namespace vmcuda::api {

// What calls.def's flags column says about a call (see there).
enum CallFlag : uint32_t {
  kQueued = 1u << 0,
  kTail = 1u << 1,
  kIssues = 1u << 2,
  kIssuesIfPinned = 1u << 3,
  kNoContext = 1u << 4,
  kSyncs = 1u << 5,
  kLaunches = 1u << 6,
};

enum class Call : uint32_t {
#define VMCUDA_CALL(number, name, args, reply, flags) name = number,
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
};

template <Call C>
struct CallTraits;
#define VMCUDA_CALL(number, name, args_t, reply_t, flags)                                     \
  template <>                                                                                 \
  struct CallTraits<Call::name> {                                                             \
    using Args = args_t;                                                                      \
    using Reply = reply_t;                                                                    \
    static constexpr uint32_t kFlags = (flags);                                               \
    static constexpr bool kBatchable = (kFlags & kQueued) != 0;                               \
    static constexpr const char* kName = #name;                                               \
  };                                                                                          \
  static_assert(number >= vmrpc::wire::kFirstServiceCall);                                    \
  static_assert(((flags) & (kIssues | kIssuesIfPinned)) == 0 || ((flags) & kQueued) != 0,      \
                #name ": work that only issues is queued by the guest");                      \
  static_assert(((flags) & kSyncs) == 0 || ((flags) & (kIssues | kIssuesIfPinned)) == 0,      \
                #name ": a call cannot both wait for the GPU and only issue work");             \
  static_assert(((flags) & kLaunches) == 0 || ((flags) & kNoContext) == 0,                    \
                #name ": GPU work needs the client's context");
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL

// The flags of a call number known only at run time (0 for an unknown number).
constexpr uint32_t call_flags(uint32_t number) {
  switch (static_cast<Call>(number)) {
#define VMCUDA_CALL(number, name, args, reply, flags) \
  case Call::name:                                    \
    return CallTraits<Call::name>::kFlags;
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
  }
  return 0;
}

const char* call_name(uint32_t number);

}  // namespace vmcuda::api
