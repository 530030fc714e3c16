// What the app told CUDA about its managed memory (cudaMemAdvise, cudaMemPrefetchAsync),
// kept per page so that cudaMemRangeGetAttribute[s] answers as CUDA does.
//
// Why here and not on the host: managed memory is a pinned block of the shared heap, zero-copy
// on the GPU (memory.cc), not the host driver's managed memory, so the host driver never sees
// the advice; this record is the only truth there is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

class ManagedAdvice {
 public:
  // The advice of one page. Locations use cudaMemLocationTypeInvalid for "none".
  struct State {
    bool read_mostly = false;
    cudaMemLocation preferred{cudaMemLocationTypeInvalid, 0};
    uint64_t accessed_by = 0;  // bit d: device d; kCpuBit: the host
    cudaMemLocation last_prefetch{cudaMemLocationTypeInvalid, 0};
    bool operator==(const State& o) const {
      return read_mostly == o.read_mostly && same(preferred, o.preferred) && accessed_by == o.accessed_by &&
             same(last_prefetch, o.last_prefetch);
    }
    static bool same(const cudaMemLocation& a, const cudaMemLocation& b) { return a.type == b.type && a.id == b.id; }
  };
  static constexpr int kMaxDevices = 63;
  static constexpr uint64_t kCpuBit = uint64_t{1} << 63;

  static ManagedAdvice& process();

  // Preconditions (the caller checked them): [p, p+n) is managed memory, the advice and its
  // location are valid, HostNumaCurrent already resolved to a node.
  void advise(uint64_t p, uint64_t n, cudaMemoryAdvise advice, cudaMemLocation location);
  void prefetched(uint64_t p, uint64_t n, cudaMemLocation location);
  // The block [p, p+n) was freed: its pages have no advice any more.
  void forget(uint64_t p, uint64_t n);

  // One attribute of [p, p+n) into data (size bytes), as cudaMemRangeGetAttribute documents;
  // cudaErrorInvalidValue for an unknown attribute or a size it does not take.
  cudaError_t query(cudaMemRangeAttribute attribute, void* data, size_t size, uint64_t p, uint64_t n) const;

  // Number of recorded segments (tests: that freeing drops them).
  size_t segments() const;

 private:
  template <class F>
  void apply(uint64_t p, uint64_t n, F&& change);
  template <class F>
  void each(uint64_t p, uint64_t n, F&& visit) const;  // every page state in [p, p+n), gaps as State{}
  void split(uint64_t at);

  mutable std::mutex mu_;
  struct Segment {
    uint64_t end;
    State state;
  };
  std::map<uint64_t, Segment> segs_;  // by start; disjoint, page aligned; gaps have State{}
};

}  // namespace vmcuda::guest
