// Kernel launches (calls.def, 0x1400): parameters arrive packed at the offsets the host
// reported for the kernel; each is checked to lie inside the packed bytes. Cooperative
// launches (0x1401) are the same frame given to cuLaunchCooperativeKernel; launches with
// attributes (0x1402) carry their attributes before the parameters, each checked here
// before it reaches cuLaunchKernelEx.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;

namespace {

// The launch attributes CUDA knows that vmcuda does not forward (they name events or
// memory windows, or are for streams and graph nodes): refused, each logged once per process.
const char* refused_attribute(uint32_t id) {
  switch (id) {
    case 1: return "cudaLaunchAttributeAccessPolicyWindow";
    case 3: return "cudaLaunchAttributeSynchronizationPolicy";
    case 7: return "cudaLaunchAttributeProgrammaticEvent";
    case 9: return "cudaLaunchAttributeMemSyncDomainMap";
    case 10: return "cudaLaunchAttributeMemSyncDomain";
    case 11: return "cudaLaunchAttributePreferredClusterDimension";
    case 12: return "cudaLaunchAttributeLaunchCompletionEvent";
    case 13: return "cudaLaunchAttributeDeviceUpdatableKernelNode";
    case 14: return "cudaLaunchAttributePreferredSharedMemoryCarveout";
    case 16: return "cudaLaunchAttributeNvlinkUtilCentricScheduling";
    default: return nullptr;
  }
}
std::atomic<uint32_t> g_refused_logged{0};  // bit id: logged

// One wire attribute as the driver's, checked: CUDA_SUCCESS, or the error to return.
// `skip`: an ignored entry, nothing to pass on.
CUresult driver_attribute(const api::LaunchAttribute& w, CUlaunchAttribute* out, bool* skip,
                          const std::string& log_tag) {
  *skip = false;
  *out = CUlaunchAttribute{};
  out->id = static_cast<int>(w.id);
  if (w.reserved != 0) return CUDA_ERROR_INVALID_VALUE;
  const uint32_t* v = w.value;
  switch (w.id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
      *skip = true;
      return CUDA_SUCCESS;
    case api::kLaunchAttrCooperative:
      if (v[0] > 1 || v[1] || v[2]) return CUDA_ERROR_INVALID_VALUE;
      out->value.cooperative = static_cast<int>(v[0]);
      return CUDA_SUCCESS;
    case api::kLaunchAttrPriority:
      // Any int: the driver clamps it to the device's range, as stream priorities.
      if (v[1] || v[2]) return CUDA_ERROR_INVALID_VALUE;
      out->value.priority = static_cast<int>(v[0]);
      return CUDA_SUCCESS;
    case api::kLaunchAttrClusterDimension:
      // Whether they divide the grid and fit the device is the driver's to say.
      if (!v[0] || !v[1] || !v[2]) return CUDA_ERROR_INVALID_VALUE;
      out->value.clusterDim = {v[0], v[1], v[2]};
      return CUDA_SUCCESS;
    case api::kLaunchAttrClusterSchedulingPolicy:
      if (v[0] > 2 || v[1] || v[2]) return CUDA_ERROR_INVALID_VALUE;  // CUclusterSchedulingPolicy
      out->value.clusterSchedulingPolicyPreference = static_cast<int>(v[0]);
      return CUDA_SUCCESS;
    case api::kLaunchAttrProgrammaticSerialization:
      if (v[0] > 1 || v[1] || v[2]) return CUDA_ERROR_INVALID_VALUE;
      out->value.programmaticStreamSerializationAllowed = static_cast<int>(v[0]);
      return CUDA_SUCCESS;
    default:
      if (const char* name = refused_attribute(w.id)) {
        if (!(g_refused_logged.fetch_or(1u << w.id, std::memory_order_relaxed) & (1u << w.id)))
          VMRPC_LOG(kWarn, "stub", log_tag + ": a launch with " + name +
                                       " is not supported yet; refused with cudaErrorNotSupported (801)");
        return CUDA_ERROR_NOT_SUPPORTED;
      }
      return CUDA_ERROR_INVALID_VALUE;  // an id CUDA does not know
  }
}
}  // namespace

int32_t Session::launch_setup(uint64_t function, uint64_t stream_handle, std::span<const std::byte> packed,
                              const vmrpc::CallContext& ctx, CUfunction* fn, CUstream* stream, void*** params) {
  const Object* fo = find_function(function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  int stream_device;
  if (CUresult e = resolve_stream(stream_handle, stream, &stream_device); e != CUDA_SUCCESS) return e;
  // "A kernel launch will fail if it is issued to a stream that is not associated to the
  // current device" (cudaErrorInvalidResourceHandle).
  if (stream_device != current_) return CUDA_ERROR_INVALID_HANDLE;
  const FunctionObject& f = fo->as<FunctionObject>();
  if (fo->device != current_) return CUDART_ERROR_INVALID_DEVICE_FUNCTION;  // loaded for another device
  // Reused: launches are the hot path (no allocation per launch).
  thread_local std::vector<void*> pointers;
  pointers.resize(f.params.size());
  // `packed` lies in the decoder's private copy: stable for the launch.
  auto* base = const_cast<std::byte*>(packed.data());
  for (size_t i = 0; i < f.params.size(); ++i) {
    const auto& p = f.params[i];
    if (uint64_t{p.offset} + p.size > packed.size()) return guest_fault("launch: a parameter outside the bytes sent");
    pointers[i] = base + p.offset;
  }
  // Fair sharing (held back here while the VM is ahead of its share of the GPU: fair_share.h),
  // the kernel time limit's count and status.
  count_launch(current_, *stream, ctx);
  if (CUresult e = managed_before_launch(ctx, current_, *stream); e != CUDA_SUCCESS) return e;
  output_possible_ = true;
  *fn = f.fn;
  *params = pointers.data();
  return CUDA_SUCCESS;
}

int32_t Session::on_LaunchKernel(const api::LaunchArgs& a, api::Empty&, Request& req) {
  if (a.arg_bytes != req.tail.size()) return guest_fault("LaunchKernel: parameter bytes of the wrong length");
  CUfunction fn;
  CUstream stream;
  void** params;
  if (int32_t e = launch_setup(a.function, a.stream, req.tail, req.ctx, &fn, &stream, &params)) return e;
  return api_.cuLaunchKernel(fn, a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2], a.shared_bytes,
                             stream, params, nullptr);
}

// The driver refuses a grid whose blocks cannot all be co-resident
// (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) and devices without cooperative launches.
int32_t Session::on_LaunchCooperativeKernel(const api::LaunchArgs& a, api::Empty&, Request& req) {
  if (a.arg_bytes != req.tail.size()) return guest_fault("LaunchCooperativeKernel: parameter bytes of the wrong length");
  CUfunction fn;
  CUstream stream;
  void** params;
  if (int32_t e = launch_setup(a.function, a.stream, req.tail, req.ctx, &fn, &stream, &params)) return e;
  return api_.cuLaunchCooperativeKernel(fn, a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2],
                                        a.shared_bytes, stream, params);
}

int32_t Session::on_LaunchKernelEx(const api::LaunchExArgs& a, api::Empty&, Request& req) {
  if (a.attr_count > api::kMaxLaunchAttributes || a.pad != 0) return guest_fault("LaunchKernelEx: too many attributes");
  const size_t attr_bytes = size_t{a.attr_count} * sizeof(api::LaunchAttribute);
  if (req.tail.size() != attr_bytes + a.arg_bytes) return guest_fault("LaunchKernelEx: attribute and parameter bytes of the wrong length");
  CUlaunchAttribute attrs[api::kMaxLaunchAttributes];
  unsigned count = 0;
  for (uint32_t i = 0; i < a.attr_count; ++i) {
    api::LaunchAttribute w;
    std::memcpy(&w, req.tail.data() + i * sizeof w, sizeof w);
    bool skip;
    if (CUresult e = driver_attribute(w, &attrs[count], &skip, log_tag_); e != CUDA_SUCCESS) return e;
    if (!skip) ++count;
  }
  CUfunction fn;
  CUstream stream;
  void** params;
  if (int32_t e = launch_setup(a.function, a.stream, req.tail.subspan(attr_bytes), req.ctx, &fn, &stream, &params))
    return e;
  const CUlaunchConfig config{a.grid[0],  a.grid[1],  a.grid[2],      a.block[0], a.block[1],
                              a.block[2], a.shared_bytes, stream, count ? attrs : nullptr, count};
  return api_.cuLaunchKernelEx(&config, fn, params, nullptr);
}

// A launch configuration without its stream and arguments, for the cluster occupancy queries
// (cuOccupancyMaxActiveClusters, cuOccupancyMaxPotentialClusterSize): `query` runs on the
// function's device with the driver's function and configuration.
template <class Query>
int32_t Session::cluster_query(const char* what, const api::LaunchExArgs& a, Request& req, Query&& query) {
  if (a.attr_count > api::kMaxLaunchAttributes || a.pad != 0 || a.arg_bytes != 0 || a.stream != 0)
    return guest_fault((std::string(what) + ": parameters, a stream or too many attributes").c_str());
  if (req.tail.size() != size_t{a.attr_count} * sizeof(api::LaunchAttribute))
    return guest_fault((std::string(what) + ": attribute bytes of the wrong length").c_str());
  CUlaunchAttribute attrs[api::kMaxLaunchAttributes];
  unsigned count = 0;
  for (uint32_t i = 0; i < a.attr_count; ++i) {
    api::LaunchAttribute w;
    std::memcpy(&w, req.tail.data() + i * sizeof w, sizeof w);
    bool skip;
    if (CUresult e = driver_attribute(w, &attrs[count], &skip, log_tag_); e != CUDA_SUCCESS) return e;
    if (!skip) ++count;
  }
  const Object* fo = find_function(a.function);
  if (!fo) return CUDA_ERROR_INVALID_HANDLE;
  const CUfunction fn = fo->as<FunctionObject>().fn;
  const CUlaunchConfig config{a.grid[0],  a.grid[1],  a.grid[2],      a.block[0], a.block[1],
                              a.block[2], a.shared_bytes, nullptr, count ? attrs : nullptr, count};
  return on_device(fo->device, [&] { return query(fn, config); });
}

int32_t Session::on_OccupancyMaxActiveClusters(const api::LaunchExArgs& a, api::OccupancyReply& r, Request& req) {
  return cluster_query("OccupancyMaxActiveClusters", a, req, [&](CUfunction fn, const CUlaunchConfig& c) {
    return api_.cuOccupancyMaxActiveClusters(&r.blocks, fn, &c);
  });
}

int32_t Session::on_OccupancyMaxPotentialClusterSize(const api::LaunchExArgs& a, api::OccupancyReply& r,
                                                     Request& req) {
  return cluster_query("OccupancyMaxPotentialClusterSize", a, req, [&](CUfunction fn, const CUlaunchConfig& c) {
    return api_.cuOccupancyMaxPotentialClusterSize(&r.blocks, fn, &c);
  });
}

}  // namespace vmcuda::host
