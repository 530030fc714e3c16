// One client (a guest process's slot) on the host: its CUDA context and its virtual
// object list (VOL): allocations, modules, functions, module globals, streams, events. Everything here is freed when the
// client closes its slot or dies. Handlers live in one file per CUDA area.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "driver_api.h"
#include "vmcuda/api/calls.h"
#include "vmrpc/service.h"

namespace vmcuda::host {

struct StubLimits {
  uint64_t memory_quota = ~0ull;           // device bytes per client
  uint64_t max_module_bytes = 1ull << 30;  // limit on untrusted input: a fatbin
  uint32_t max_name_bytes = 4096;          // a kernel's mangled name
  uint32_t max_streams = 4096;             // live streams per client (guest-made handles)
  uint32_t max_events = 1u << 18;          // live events per client
};

// Per-call view for handlers: trailing argument bytes and room for trailing reply bytes.
struct Request {
  std::span<const std::byte> tail;
  std::span<std::byte> extra;
  uint32_t extra_bytes = 0;
  const vmrpc::CallContext& ctx;
};

class Session : public vmrpc::SlotService {
 public:
  // `devices`: the host device ordinals this client may use; guest device i is devices[i].
  Session(const DriverApi& api, const StubLimits& limits, std::vector<int> devices, const vmrpc::SlotInfo& info);
  ~Session() override;

  int32_t call(const vmrpc::CallContext& ctx, uint32_t call_id, std::span<const std::byte> args,
               std::span<std::byte> reply, uint32_t& reply_bytes) override;
  void close() override;

  // Handlers, one per call of calls.def (device.cc, memory.cc, memory_2d.cc, module.cc,
  // symbol.cc, launch.cc, function.cc, stream.cc, event.cc).
#define VMCUDA_CALL(number, name, A, R, batchable) int32_t on_##name(const api::A& args, api::R& reply, Request& req);
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL

 private:
  struct Function {
    CUfunction fn;
    int device;
    std::vector<api::ParamInfo> params;
  };
  struct Allocation {
    uint64_t bytes;
    int device;
  };
  struct Module {
    CUmodule module;
    int device;
  };
  // A module's __device__/__constant__ variable (ModuleGetGlobal): device memory the
  // client may copy to and from (owns_range), which the driver frees with the module;
  // Free refuses it.
  struct Global {
    uint64_t bytes;
    int device;
    uint64_t module;   // the module handle
    std::string name;  // as the module names it (to find it again in a reloaded module)
  };
  struct Stream {
    CUstream stream;
    int device;
  };
  struct Event {
    CUevent event;
    int device;
    unsigned flags;
  };
  // A guest stream handle (api::kStream*, or one it created) as the driver's stream, and
  // the device it belongs to (the current one for the special streams). Unknown handles:
  // CUDA_ERROR_INVALID_HANDLE.
  CUresult resolve_stream(uint64_t handle, CUstream* stream, int* device) const;
  // Same for events.
  const Event* find_event(uint64_t handle) const;
  // Runs `f` with `device`'s context current, then makes the current device's current again.
  template <class F>
  CUresult on_device(int device, F&& f) {
    make_current(device);
    const CUresult r = f();
    make_current(current_);
    return r;
  }
  // Creates the current device's context on first use and makes it current.
  bool ensure_context();
  void make_current(int device);
  // Whether [ptr, ptr+bytes) lies inside one allocation or one module global of this client.
  int32_t heap_copy_async(const api::CopyHeapAsyncArgs& a, Request& req, bool to_device);
  bool owns_range(uint64_t ptr, uint64_t bytes) const;
  // Same for a 2D region: `height` rows of `width` bytes, `pitch` bytes apart (pitch >= width).
  bool owns_2d(uint64_t ptr, uint64_t pitch, uint64_t width, uint64_t height) const;
  // A function handle (ModuleGetFunction) of this client, or nullptr.
  const Function* find_function(uint64_t handle) const {
    return handle == 0 || handle > functions_.size() ? nullptr : &functions_[handle - 1];
  }

  const DriverApi& api_;
  StubLimits limits_;
  std::vector<int> devices_;
  vmrpc::SlotInfo info_;
  int current_ = 0;                           // guest device index (cudaSetDevice)
  int bound_ = -1;                            // whose context is current on this thread
  std::vector<CUcontext> contexts_;           // per guest device, created on first use
  CUresult ctx_error_ = CUDA_SUCCESS;
  uint64_t allocated_ = 0;
  std::map<uint64_t, Allocation> allocations_;  // device ptr -> allocation
  std::map<uint64_t, Global> globals_;          // device ptr -> module variable (never freed here)
  std::map<uint64_t, std::pair<void*, uint64_t>> pinned_;  // heap offset -> (host address, bytes)
  std::vector<Module> modules_;               // handle = index + 1
  std::vector<Function> functions_;           // handle = index + 1
  std::map<uint64_t, Stream> streams_;        // guest handle -> stream
  std::map<uint64_t, Event> events_;          // guest handle -> event
  std::string log_tag_;
};

// The vmrpc service of vmcuda-stub: one Session per claimed slot.
class StubService : public vmrpc::Service {
 public:
  StubService(const DriverApi& api, StubLimits limits, std::vector<int> devices)
      : api_(api), limits_(limits), devices_(std::move(devices)) {}
  std::unique_ptr<vmrpc::SlotService> open(const vmrpc::SlotInfo& info) override {
    return std::make_unique<Session>(api_, limits_, devices_, info);
  }

 private:
  const DriverApi& api_;
  StubLimits limits_;
  std::vector<int> devices_;
};

}  // namespace vmcuda::host
