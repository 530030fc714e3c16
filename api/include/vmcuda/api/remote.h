// Guest side of the generic path: one synchronous remoted call, encoded from the
// call's traits (calls.def). guest-lib's stubs and the tests use it.
#pragma once

#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "vmcuda/api/calls.h"
#include "vmrpc/client.h"

namespace vmcuda::api {

template <Call C>
struct RemoteResult {
  int32_t status = 0;  // the call's (>= 0: a CUresult/cudaError_t), or a vmrpc ChannelStatus (< 0)
  typename CallTraits<C>::Reply reply{};
  std::span<const std::byte> extra;  // trailing reply bytes; valid until the slot's next call
};

// Sends `args` followed by `tail`, with room for `extra_capacity` reply bytes after the
// reply struct. Flushes whatever the slot had queued, in the same batch.
template <Call C>
RemoteResult<C> remote(vmrpc::ClientSlot& slot, const typename CallTraits<C>::Args& args,
                       std::span<const std::byte> tail = {}, uint32_t extra_capacity = 0) {
  using A = typename CallTraits<C>::Args;
  using R = typename CallTraits<C>::Reply;
  constexpr size_t kA = std::is_empty_v<A> ? 0 : sizeof(A);
  constexpr size_t kR = std::is_empty_v<R> ? 0 : sizeof(R);
  RemoteResult<C> out;
  auto& batch = slot.batch();
  auto frame = batch.append(static_cast<uint32_t>(C), static_cast<uint32_t>(kA + tail.size()),
                            static_cast<uint32_t>(kR + extra_capacity));
  if (!frame && !batch.empty()) {
    if (auto st = slot.flush(); st != vmrpc::wire::ChannelStatus::kOk) return out.status = static_cast<int32_t>(st), out;
    frame = batch.append(static_cast<uint32_t>(C), static_cast<uint32_t>(kA + tail.size()),
                         static_cast<uint32_t>(kR + extra_capacity));
  }
  if (!frame) return out.status = static_cast<int32_t>(vmrpc::wire::ChannelStatus::kBadFrame), out;
  if (kA) std::memcpy(batch.args(*frame), &args, kA);
  if (!tail.empty()) std::memcpy(batch.args(*frame) + kA, tail.data(), tail.size());
  if (auto st = slot.flush(); st != vmrpc::wire::ChannelStatus::kOk) return out.status = static_cast<int32_t>(st), out;
  auto r = slot.result(*frame);
  out.status = r.status;
  if (r.status == 0 && kR && r.reply.size() >= kR) std::memcpy(&out.reply, r.reply.data(), kR);
  if (r.reply.size() >= kR) out.extra = r.reply.subspan(kR);
  return out;
}

}  // namespace vmcuda::api
