#include "session.h"

#include <cstring>
#include <type_traits>

#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

namespace {
// Calls whose argument struct is followed by variable bytes.
constexpr bool takes_tail(api::Call c) {
  return c == api::Call::CopyToDeviceInline || c == api::Call::ModuleGetFunction || c == api::Call::LaunchKernel;
}
}  // namespace

Session::Session(const DriverApi& api, const StubLimits& limits, int device, const vmrpc::SlotInfo& info)
    : api_(api), limits_(limits), device_(device), info_(info) {
  log_tag_ = "client " + std::to_string(info.connection_id) + "/" + std::to_string(info.slot) + " (pid " +
             std::to_string(info.owner_tag) + ")";
}

Session::~Session() { close(); }

bool Session::ensure_context() {
  if (ctx_) return true;
  if (ctx_error_ != CUDA_SUCCESS) return false;
  CUdevice dev;
  CUresult r = api_.cuDeviceGet(&dev, device_);
  if (r == CUDA_SUCCESS) r = api_.cuCtxCreate_v4(&ctx_, nullptr, 0, dev);
  if (r != CUDA_SUCCESS) {
    ctx_error_ = r;
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": cannot create a CUDA context: " + describe(api_, r));
    return false;
  }
  // The slot's service thread runs this client alone: the context stays current on it.
  api_.cuCtxSetCurrent(ctx_);
  return true;
}

void Session::close() {
  if (!ctx_) return;
  api_.cuCtxSetCurrent(ctx_);
  for (auto& [ptr, bytes] : allocations_) api_.cuMemFree_v2(ptr);
  for (CUmodule m : modules_)
    if (m) api_.cuModuleUnload(m);
  VMRPC_LOG(kInfo, "stub", log_tag_ + ": closed; freed " + std::to_string(allocations_.size()) + " allocations (" +
                               std::to_string(allocated_) + " bytes) and " + std::to_string(modules_.size()) +
                               " modules");
  allocations_.clear();
  modules_.clear();
  functions_.clear();
  allocated_ = 0;
  api_.cuCtxDestroy_v2(ctx_);
  ctx_ = nullptr;
}

bool Session::owns_range(uint64_t ptr, uint64_t bytes) const {
  auto it = allocations_.upper_bound(ptr);
  if (it == allocations_.begin()) return false;
  --it;
  const uint64_t off = ptr - it->first;
  return off <= it->second && bytes <= it->second - off;
}

int32_t Session::call(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
                      std::span<std::byte> reply, uint32_t& reply_bytes) {
  if (!ensure_context()) return ctx_error_;
  switch (static_cast<api::Call>(call_id)) {
#define VMCUDA_CALL(number, name, A, R, batchable)                                                   \
  case api::Call::name: {                                                                            \
    api::A a{};                                                                                      \
    constexpr size_t kArgBytes = std::is_empty_v<api::A> ? 0 : sizeof(api::A);                       \
    constexpr size_t kReplyBytes = std::is_empty_v<api::R> ? 0 : sizeof(api::R);                     \
    if (args.size() < kArgBytes || (!takes_tail(api::Call::name) && args.size() != kArgBytes))       \
      return static_cast<int32_t>(ChannelStatus::kBadArguments);                                     \
    if (reply.size() < kReplyBytes) return static_cast<int32_t>(ChannelStatus::kReplyTooSmall);      \
    if constexpr (kArgBytes) std::memcpy(&a, args.data(), kArgBytes);                                \
    api::R r{};                                                                                      \
    Request req{args.subspan(kArgBytes), reply.subspan(kReplyBytes), 0, ctx};                        \
    const int32_t status = on_##name(a, r, req);                                                     \
    if constexpr (kReplyBytes) std::memcpy(reply.data(), &r, kReplyBytes);                           \
    reply_bytes = static_cast<uint32_t>(kReplyBytes + req.extra_bytes);                              \
    return status;                                                                                   \
  }
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
  }
  return static_cast<int32_t>(ChannelStatus::kUnknownCall);
}

}  // namespace vmcuda::host
