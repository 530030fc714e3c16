// plain_calls.def against calls.def, at compile time (host-stub/src/plain_call.h): every line's
// words name fields of its call's own Args and Reply, one per driver parameter, each of a type
// the other side holds whole. Built as is, the table's lines must pass (and the program says
// how many there are); built with VMCUDA_PLAIN_BAD=n (ctest's plain_calls_rejects_n), one line
// that breaks a rule must make the build fail.
#include <cstdio>

#include "plain_call.h"

namespace vmcuda::host {

#define VMCUDA_PLAIN(name, fn, ...)                                                          \
  namespace check_##name {                                                                   \
  using A = api::CallTraits<api::Call::name>::Args;                                          \
  using R = api::CallTraits<api::Call::name>::Reply;                                         \
  static_assert(plain::check<api::Call::name>(&DriverApi::fn __VA_OPT__(, ) __VA_ARGS__));   \
  }
#include "plain_calls.def"

#ifdef VMCUDA_PLAIN_BAD
// The rule each case breaks; the words as plain_calls.def defines them.
#define in(f) plain::spec<plain::Kind::kIn>(&A::f)
#define out(f) plain::spec<plain::Kind::kOut>(&R::f)
#define stream(f) plain::spec<plain::Kind::kStream>(&A::f)
namespace bad {
#if VMCUDA_PLAIN_BAD == 1
// A line written for another call: CacheConfigReply has no field `value` (LimitReply has).
VMCUDA_PLAIN(DeviceGetCacheConfig, cuCtxGetCacheConfig, out(value))
#elif VMCUDA_PLAIN_BAD == 2
// A word too few: cuCtxGetLimit takes the limit too.
VMCUDA_PLAIN(DeviceGetLimit, cuCtxGetLimit, out(value))
#elif VMCUDA_PLAIN_BAD == 3
// The driver writes a size_t; StreamPriorityRangeReply's int32 fields would cut it.
VMCUDA_PLAIN(StreamPriorityRange, cuMemGetInfo_v2, out(least), out(greatest))
#elif VMCUDA_PLAIN_BAD == 4
// A guest's number as a host pointer.
VMCUDA_PLAIN(FlushGPUDirectRDMAWrites, cuMemHostUnregister, in(target))
#elif VMCUDA_PLAIN_BAD == 5
// A guest's stream handle passed raw, not through stream().
VMCUDA_PLAIN(StreamGetPriority, cuStreamGetPriority, in(stream), out(priority))
#endif
}  // namespace bad
#endif
#undef VMCUDA_PLAIN

}  // namespace vmcuda::host

int main() {
  int lines = 0;
#define VMCUDA_PLAIN(name, ...) ++lines;
#include "plain_calls.def"
#undef VMCUDA_PLAIN
  std::printf("plain_calls.def: %d lines match calls.def and their driver functions\n", lines);
  return lines > 0 ? 0 : 1;
}
