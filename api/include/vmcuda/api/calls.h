// Call numbers from calls.def, and per-call traits for the generic paths.
#pragma once

#include <cstdint>

#include "vmcuda/api/wire.h"

namespace vmcuda::api {

enum class Call : uint32_t {
#define VMCUDA_CALL(number, name, args, reply, batchable) name = number,
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
};

template <Call C>
struct CallTraits;
#define VMCUDA_CALL(number, name, args_t, reply_t, batch)                                     \
  template <>                                                                                 \
  struct CallTraits<Call::name> {                                                             \
    using Args = args_t;                                                                      \
    using Reply = reply_t;                                                                    \
    static constexpr bool kBatchable = batch;                                                 \
    static constexpr const char* kName = #name;                                               \
  };                                                                                          \
  static_assert(number >= vmrpc::wire::kFirstServiceCall);
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL

const char* call_name(uint32_t number);

}  // namespace vmcuda::api
