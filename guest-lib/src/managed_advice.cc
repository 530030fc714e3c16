// Managed memory's advice record and cudaMemRangeGetAttribute[s] (managed_advice.h says why
// the record is the guest's).
#include "managed_advice.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <sched.h>

#include "entry.h"
#include "host_pointers.h"
#include "remote.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vgpu_db/allocations.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {

namespace {
uint64_t page_bytes() {
  static const uint64_t b = [] {
    long s = sysconf(_SC_PAGESIZE);
    return s > 0 ? static_cast<uint64_t>(s) : uint64_t{4096};
  }();
  return b;
}
// [p, p+n) widened to whole pages, as CUDA applies advice to every page the range touches.
std::pair<uint64_t, uint64_t> pages(uint64_t p, uint64_t n) {
  const uint64_t b = page_bytes();
  const uint64_t end = p + (n ? n : 1);
  return {p & ~(b - 1), (end + b - 1) & ~(b - 1)};
}
// The legacy attributes' one int: a device, the CPU for any host location, or no device.
int legacy_id(const cudaMemLocation& l) {
  switch (l.type) {
    case cudaMemLocationTypeDevice:
      return l.id;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
      return cudaCpuDeviceId;
    default:
      return cudaInvalidDeviceId;
  }
}
}  // namespace

ManagedAdvice& ManagedAdvice::process() {
  static ManagedAdvice* a = new ManagedAdvice;  // never destroyed: used by atexit-time frees
  return *a;
}

// Precondition: mu_ held. A segment boundary at `at` (a no-op inside a gap or on a boundary).
void ManagedAdvice::split(uint64_t at) {
  auto it = segs_.upper_bound(at);
  if (it == segs_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Segment tail{it->second.end, it->second.state};
  it->second.end = at;
  segs_.emplace(at, tail);
}

template <class F>
void ManagedAdvice::apply(uint64_t p, uint64_t n, F&& change) {
  auto [lo, hi] = pages(p, n);
  std::lock_guard g(mu_);
  split(lo);
  split(hi);
  // Fill the gaps with default pages, then change every page state in [lo, hi).
  for (uint64_t at = lo; at < hi;) {
    auto it = segs_.lower_bound(at);
    if (it == segs_.end() || it->first > at) {
      const uint64_t gap_end = it == segs_.end() ? hi : std::min(hi, it->first);
      it = segs_.emplace(at, Segment{gap_end, State{}}).first;
    }
    change(it->second.state);
    at = it->second.end;
  }
  // Default pages need no record; equal neighbours merge, so repeated advice does not grow the map.
  auto it = segs_.lower_bound(lo);
  if (it != segs_.begin()) --it;
  while (it != segs_.end() && it->first <= hi) {
    auto next = std::next(it);
    if (it->second.state == State{}) {
      segs_.erase(it);
    } else if (next != segs_.end() && next->first == it->second.end && next->second.state == it->second.state) {
      it->second.end = next->second.end;
      segs_.erase(next);
      continue;
    }
    it = next;
  }
}

template <class F>
void ManagedAdvice::each(uint64_t p, uint64_t n, F&& visit) const {
  auto [lo, hi] = pages(p, n);
  std::lock_guard g(mu_);
  auto it = segs_.upper_bound(lo);
  if (it != segs_.begin() && std::prev(it)->second.end > lo) --it;
  for (uint64_t at = lo; at < hi;) {
    if (it == segs_.end() || it->first > at) {  // a gap: pages with no advice
      visit(State{});
      at = it == segs_.end() ? hi : std::min(hi, it->first);
      continue;
    }
    visit(it->second.state);
    at = it->second.end;
    ++it;
  }
}

void ManagedAdvice::advise(uint64_t p, uint64_t n, cudaMemoryAdvise advice, cudaMemLocation l) {
  if (l.type == cudaMemLocationTypeHost) l.id = cudaCpuDeviceId;  // CUDA ignores a host location's id
  const uint64_t bit = l.type == cudaMemLocationTypeDevice ? uint64_t{1} << l.id : kCpuBit;
  apply(p, n, [&](State& s) {
    switch (advice) {
      case cudaMemAdviseSetReadMostly: s.read_mostly = true; break;
      case cudaMemAdviseUnsetReadMostly: s.read_mostly = false; break;
      case cudaMemAdviseSetPreferredLocation: s.preferred = l; break;
      case cudaMemAdviseUnsetPreferredLocation: s.preferred = {cudaMemLocationTypeInvalid, 0}; break;
      case cudaMemAdviseSetAccessedBy: s.accessed_by |= bit; break;
      case cudaMemAdviseUnsetAccessedBy: s.accessed_by &= ~bit; break;
    }
  });
}

void ManagedAdvice::prefetched(uint64_t p, uint64_t n, cudaMemLocation l) {
  if (l.type == cudaMemLocationTypeHost) l.id = cudaCpuDeviceId;
  apply(p, n, [&](State& s) { s.last_prefetch = l; });
}

void ManagedAdvice::forget(uint64_t p, uint64_t n) {
  apply(p, n, [](State& s) { s = State{}; });
}

size_t ManagedAdvice::segments() const {
  std::lock_guard g(mu_);
  return segs_.size();
}

cudaError_t ManagedAdvice::query(cudaMemRangeAttribute attribute, void* data, size_t size, uint64_t p,
                                 uint64_t n) const {
  // The location every page shares, or none (Invalid) when they differ or one has none.
  auto common = [&](cudaMemLocation State::*field) {
    bool first = true;
    cudaMemLocation c{cudaMemLocationTypeInvalid, 0};
    each(p, n, [&](const State& s) {
      if (first) c = s.*field, first = false;
      else if (!State::same(c, s.*field)) c = {cudaMemLocationTypeInvalid, 0};
    });
    return c;
  };
  auto put_int = [&](int v) {
    std::memcpy(data, &v, sizeof v);
    return cudaSuccess;
  };
  switch (attribute) {
    case cudaMemRangeAttributeReadMostly: {
      if (size != sizeof(int)) return cudaErrorInvalidValue;
      bool all = true;
      each(p, n, [&](const State& s) { all = all && s.read_mostly; });
      return put_int(all ? 1 : 0);
    }
    case cudaMemRangeAttributePreferredLocation:
    case cudaMemRangeAttributeLastPrefetchLocation:
      if (size != sizeof(int)) return cudaErrorInvalidValue;
      return put_int(legacy_id(common(attribute == cudaMemRangeAttributePreferredLocation ? &State::preferred
                                                                                           : &State::last_prefetch)));
    case cudaMemRangeAttributePreferredLocationType:
    case cudaMemRangeAttributeLastPrefetchLocationType: {
      if (size != sizeof(cudaMemLocationType)) return cudaErrorInvalidValue;
      const cudaMemLocationType t =
          common(attribute == cudaMemRangeAttributePreferredLocationType ? &State::preferred : &State::last_prefetch)
              .type;
      std::memcpy(data, &t, sizeof t);
      return cudaSuccess;
    }
    case cudaMemRangeAttributePreferredLocationId:
    case cudaMemRangeAttributeLastPrefetchLocationId: {
      if (size != sizeof(int)) return cudaErrorInvalidValue;
      const cudaMemLocation c =
          common(attribute == cudaMemRangeAttributePreferredLocationId ? &State::preferred : &State::last_prefetch);
      // Meaningful for a device or a NUMA node only ("should be ignored" otherwise).
      return put_int(c.type == cudaMemLocationTypeInvalid ? cudaInvalidDeviceId : c.id);
    }
    case cudaMemRangeAttributeAccessedBy: {
      if (size == 0 || size % sizeof(int) != 0) return cudaErrorInvalidValue;
      uint64_t all = ~uint64_t{0};
      each(p, n, [&](const State& s) { all &= s.accessed_by; });
      std::vector<int> ids;
      for (int d = 0; d < kMaxDevices; ++d)
        if (all & (uint64_t{1} << d)) ids.push_back(d);
      if (all & kCpuBit) ids.push_back(cudaCpuDeviceId);
      const size_t slots = size / sizeof(int);
      ids.resize(std::max(slots, ids.size()), cudaInvalidDeviceId);
      std::memcpy(data, ids.data(), size);  // as many as fit (CUDA: no guarantee which)
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidValue;
}

}  // namespace vmcuda::guest

using vmcuda::guest::ManagedAdvice;
using vmcuda::guest::record;

// Answered from this process's record (managed_advice.h): no round trip.
cudaError_t cudaMemRangeGetAttribute(void* data, size_t dataSize, enum cudaMemRangeAttribute attribute,
                                     const void* devPtr, size_t count) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!data || count == 0 || !vmcuda::guest::is_managed(devPtr, count)) return record(cudaErrorInvalidValue);
  return record(ManagedAdvice::process().query(attribute, data, dataSize, vmcuda::guest::addr(devPtr), count));
}

cudaError_t cudaMemRangeGetAttributes(void** data, size_t* dataSizes, enum cudaMemRangeAttribute* attributes,
                                      size_t numAttributes, const void* devPtr, size_t count) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!data || !dataSizes || !attributes || numAttributes == 0 || count == 0 ||
      !vmcuda::guest::is_managed(devPtr, count))
    return record(cudaErrorInvalidValue);
  for (size_t i = 0; i < numAttributes; ++i) {
    if (!data[i]) return record(cudaErrorInvalidValue);
    if (cudaError_t e =
            ManagedAdvice::process().query(attributes[i], data[i], dataSizes[i], vmcuda::guest::addr(devPtr), count))
      return record(e);
  }
  return cudaSuccess;
}

// ---------------------------------------------------------------- stream association, batches
// Managed memory here is zero-copy and coherent for every stream and the host (memory.cc), so
// attaching it to a stream, discarding it and prefetching it change nothing but the record;
// each is checked as CUDA checks it.
namespace {
using vmcuda::guest::addr;

// The stream as named by the entry point; `legacy_ok` false: the legacy NULL stream is refused.
cudaError_t check_stream(cudaStream_t stream, bool per_thread, bool legacy_ok) {
  const bool legacy = stream == cudaStreamLegacy || (stream == nullptr && !per_thread);
  if (legacy && !legacy_ok) return cudaErrorInvalidValue;
  uint64_t wire = 0;
  return vmcuda::guest::stream_wire_handle(stream, per_thread, &wire);
}

cudaError_t attach(cudaStream_t stream, void* devPtr, size_t length, unsigned flags, bool per_thread) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle)
    return record(cudaErrorInvalidValue);
  // Single names one stream: the NULL stream is every stream (CUDA refuses it).
  const bool null_stream = stream == nullptr || stream == cudaStreamLegacy;
  if (flags == cudaMemAttachSingle && null_stream && !per_thread) return record(cudaErrorInvalidValue);
  if (cudaError_t e = check_stream(stream, per_thread, true)) return record(e);
  // A whole managed allocation only: length 0 or its size, from its start.
  auto a = vgpu_db::AllocationMap::process().find(addr(devPtr));
  if (!a || a->kind != vgpu_db::Allocation::kManaged || a->base != addr(devPtr) ||
      (length != 0 && length != a->bytes))
    return record(cudaErrorInvalidValue);
  return cudaSuccess;
}

// The checks of the batch calls (cudaMemPrefetchBatchAsync's documentation); `locs` null: a
// discard only. On success the prefetches are recorded.
cudaError_t batch(void** dptrs, size_t* sizes, size_t count, cudaMemLocation* locs, size_t* loc_idxs, size_t num_locs,
                  unsigned long long flags, cudaStream_t stream, bool per_thread, bool prefetch) {
  if (cudaError_t e = vmcuda::guest::enter_device_call()) return e;
  if (!dptrs || !sizes || count == 0 || flags != 0) return record(cudaErrorInvalidValue);
  if (prefetch) {
    if (!locs || !loc_idxs || num_locs == 0 || num_locs > count || loc_idxs[0] != 0) return record(cudaErrorInvalidValue);
    for (size_t k = 1; k < num_locs; ++k)
      if (loc_idxs[k] <= loc_idxs[k - 1] || loc_idxs[k] >= count) return record(cudaErrorInvalidValue);
  }
  if (cudaError_t e = check_stream(stream, per_thread, false)) return record(e);
  cudaError_t e;
  vmcuda::guest::Remote* r = vmcuda::guest::Remote::get(&e);
  if (!r) return record(e);
  for (size_t i = 0; i < count; ++i)
    if (sizes[i] == 0 || !vmcuda::guest::is_managed(dptrs[i], sizes[i])) return record(cudaErrorInvalidValue);
  if (!prefetch) return cudaSuccess;
  for (size_t k = 0; k < num_locs; ++k) {
    const cudaMemLocation& l = locs[k];
    if (l.type == cudaMemLocationTypeDevice) {
      if (l.id < 0 || l.id >= r->handshake().device_count) return record(cudaErrorInvalidDevice);
    } else if (l.type != cudaMemLocationTypeHost && l.type != cudaMemLocationTypeHostNuma &&
               l.type != cudaMemLocationTypeHostNumaCurrent) {
      return record(cudaErrorInvalidValue);
    }
  }
  for (size_t k = 0; k < num_locs; ++k) {
    cudaMemLocation l = locs[k];
    if (l.type == cudaMemLocationTypeHostNumaCurrent) {
      unsigned cpu = 0, node = 0;
      if (getcpu(&cpu, &node) != 0) node = 0;
      l = {cudaMemLocationTypeHostNuma, static_cast<int>(node)};
    }
    const size_t end = k + 1 < num_locs ? loc_idxs[k + 1] : count;
    for (size_t i = loc_idxs[k]; i < end; ++i) ManagedAdvice::process().prefetched(addr(dptrs[i]), sizes[i], l);
  }
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length, unsigned int flags) {
  return attach(stream, devPtr, length, flags, false);
}
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* devPtr, size_t length, unsigned int flags) {
  return attach(stream, devPtr, length, flags, true);
}
cudaError_t cudaMemPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count, struct cudaMemLocation* prefetchLocs,
                                      size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags,
                                      cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, false, true);
}
cudaError_t cudaMemPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                           struct cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                           size_t numPrefetchLocs, unsigned long long flags, cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, true, true);
}
// Discarded contents are indeterminate in CUDA: keeping them is one such content.
cudaError_t cudaMemDiscardBatchAsync(void** dptrs, size_t* sizes, size_t count, unsigned long long flags,
                                     cudaStream_t stream) {
  return batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, stream, false, false);
}
cudaError_t cudaMemDiscardBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count, unsigned long long flags,
                                          cudaStream_t stream) {
  return batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, stream, true, false);
}
cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void** dptrs, size_t* sizes, size_t count,
                                                struct cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                                size_t numPrefetchLocs, unsigned long long flags,
                                                cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, false, true);
}
cudaError_t cudaMemDiscardAndPrefetchBatchAsync_ptsz(void** dptrs, size_t* sizes, size_t count,
                                                     struct cudaMemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                                     size_t numPrefetchLocs, unsigned long long flags,
                                                     cudaStream_t stream) {
  return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream, true, true);
}
