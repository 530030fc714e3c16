// Argument and reply structs of the remoted CUDA calls (see calls.def). Fixed-width,
// little-endian, explicit padding. Device pointers travel as uint64; handles of
// modules and functions are the host's per-client virtual handles, never pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vmrpc/wire.h"

namespace vmcuda::api {

struct Empty {};

struct HandshakeReply {
  int32_t device_count;    // devices this stub gives the guest (cudaSetDevice indexes them)
  int32_t driver_version;  // cuDriverGetVersion
  uint64_t memory_quota;   // device bytes per client (~0: none)
};
static_assert(sizeof(HandshakeReply) == 16);

struct DeviceArgs { int32_t device; uint32_t pad; };

// Every CUdevice_attribute value (== cudaDeviceAttr) of a device, indexed by number, so
// the guest answers cudaDeviceGetAttribute and builds cudaDeviceProp locally.
inline constexpr uint32_t kDeviceAttributeSlots = 160;
struct DevicePropertiesReply {
  char name[256];
  uint8_t uuid[16];
  uint64_t total_mem;      // min(device memory, quota)
  int32_t attributes[kDeviceAttributeSlots];  // 0 where the driver has none
};
static_assert(sizeof(DevicePropertiesReply) == 256 + 16 + 8 + 4 * kDeviceAttributeSlots);

struct MemInfoReply { uint64_t free_bytes; uint64_t total_bytes; };

struct MallocArgs { uint64_t bytes; };
struct PtrReply { uint64_t ptr; };
struct PtrArgs { uint64_t ptr; };

// Inline host-to-device: the bytes follow the struct in the same frame.
struct CopyToDeviceInlineArgs { uint64_t dst; };
// Inline device-to-host: the bytes come back as the reply.
struct CopyFromDeviceInlineArgs { uint64_t src; uint64_t bytes; };
struct CopyHeapArgs { uint64_t device; vmrpc::wire::HeapRef host; };
// A range of the shared heap the host pins (cudaMallocHost blocks, copy staging).
struct HeapRangeArgs { vmrpc::wire::HeapRef range; };
struct CopyDeviceArgs { uint64_t dst; uint64_t src; uint64_t bytes; };
struct MemsetArgs { uint64_t dst; uint64_t bytes; uint32_t value; uint32_t pad; };

// ---- async copies and memsets: `stream` is a guest stream handle (see below).
// Inline host-to-device, the bytes follow the struct (copied at call time: batchable).
struct CopyToDeviceInlineAsyncArgs { uint64_t dst; uint64_t stream; };
static_assert(sizeof(CopyToDeviceInlineAsyncArgs) == 16);
// Inline device-to-host: the bytes come back as the reply once the copy is done.
struct CopyFromDeviceInlineAsyncArgs { uint64_t src; uint64_t bytes; uint64_t stream; };
static_assert(sizeof(CopyFromDeviceInlineAsyncArgs) == 24);
// The host replies only when the copy has completed: the heap bytes are a staging copy
// (pageable memory on the guest), reused by the guest as soon as the reply arrives.
// Without it the copy is truly asynchronous: the heap bytes are the app's own pinned
// memory (cudaMallocHost from the shared heap), valid until the stream is synchronized.
inline constexpr uint32_t kHeapCopyWait = 1u << 0;
struct CopyHeapAsyncArgs {
  uint64_t device;
  vmrpc::wire::HeapRef host;
  uint64_t stream;
  uint32_t flags;  // kHeapCopyWait
  uint32_t pad;
};
static_assert(sizeof(CopyHeapAsyncArgs) == 40);
struct CopyDeviceAsyncArgs { uint64_t dst; uint64_t src; uint64_t bytes; uint64_t stream; };
static_assert(sizeof(CopyDeviceAsyncArgs) == 32);
struct MemsetAsyncArgs { uint64_t dst; uint64_t bytes; uint32_t value; uint32_t pad; uint64_t stream; };
static_assert(sizeof(MemsetAsyncArgs) == 32);

// ---- pitched memory and 2D copies (cudaMallocPitch, cudaMemcpy2D, cudaMemset2D). A 2D
// region of `height` rows of `width` bytes, `pitch` bytes apart, spans
// pitch * (height - 1) + width bytes; every pitch is at least the width.
// element_bytes: cuMemAllocPitch's ElementSizeBytes (4, 8 or 16).
struct MallocPitchArgs { uint64_t width; uint64_t height; uint32_t element_bytes; uint32_t pad; };
static_assert(sizeof(MallocPitchArgs) == 24);
struct PitchReply { uint64_t ptr; uint64_t pitch; };
static_assert(sizeof(PitchReply) == 16);
// Inline: the host side is width * height packed bytes, after the struct (to the device) or
// as the reply (from the device).
struct Copy2DInlineArgs { uint64_t device; uint64_t device_pitch; uint64_t width; uint64_t height; };
static_assert(sizeof(Copy2DInlineArgs) == 32);
// Through the shared heap: the host side is `host`, rows host_pitch bytes apart (the app's
// pinned memory with its own pitch, or packed staging). Synchronous, as cudaMemcpy2D is.
struct Copy2DHeapArgs {
  uint64_t device;
  uint64_t device_pitch;
  uint64_t width;
  uint64_t height;
  vmrpc::wire::HeapRef host;
  uint64_t host_pitch;
};
static_assert(sizeof(Copy2DHeapArgs) == 56 && offsetof(Copy2DHeapArgs, host) == 32);
struct Copy2DDeviceArgs {
  uint64_t dst;
  uint64_t dst_pitch;
  uint64_t src;
  uint64_t src_pitch;
  uint64_t width;
  uint64_t height;
};
static_assert(sizeof(Copy2DDeviceArgs) == 48);
struct Memset2DArgs { uint64_t dst; uint64_t pitch; uint64_t width; uint64_t height; uint32_t value; uint32_t pad; };
static_assert(sizeof(Memset2DArgs) == 40);

struct ModuleLoadArgs { vmrpc::wire::HeapRef image; };
struct HandleReply { uint64_t handle; };

// The mangled name follows the struct (name_bytes, no terminator).
struct GetFunctionArgs { uint64_t module; uint32_t name_bytes; uint32_t pad; };
struct ParamInfo { uint32_t offset; uint32_t size; };
inline constexpr uint32_t kMaxKernelParams = 1024;
// Followed by param_count ParamInfo.
struct GetFunctionReply { uint64_t function; uint32_t param_count; uint32_t pad; };

// A module's __device__ or __constant__ variable: its name follows the struct (name_bytes,
// no terminator), as GetFunctionArgs'. The reply is cuModuleGetGlobal's address and size.
struct GetGlobalArgs { uint64_t module; uint32_t name_bytes; uint32_t pad; };
static_assert(sizeof(GetGlobalArgs) == 16);
struct GlobalReply { uint64_t ptr; uint64_t bytes; };
static_assert(sizeof(GlobalReply) == 16);

// Followed by arg_bytes of packed parameters (laid out as ParamInfo says).
struct LaunchArgs {
  uint64_t function;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t arg_bytes;
  uint64_t stream;         // a guest stream handle (0: the legacy default stream)
};
static_assert(sizeof(LaunchArgs) == 48);

// ---- function attributes and occupancy, of a function handle (GetFunctionReply::function).
struct FunctionArgs { uint64_t function; };
// Every CUfunction_attribute value (0 MAX_THREADS_PER_BLOCK .. 15
// CLUSTER_SCHEDULING_POLICY_PREFERENCE), indexed by number: what cudaFuncGetAttributes reports.
inline constexpr uint32_t kFuncAttributeSlots = 16;
struct FuncAttributesReply { int32_t values[kFuncAttributeSlots]; };
static_assert(sizeof(FuncAttributesReply) == 64);
// cudaFuncSetAttribute: `attribute` is a cudaFuncAttribute (== CUfunction_attribute, 8..15).
struct FuncSetAttributeArgs { uint64_t function; int32_t attribute; int32_t value; };
static_assert(sizeof(FuncSetAttributeArgs) == 16);
// cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags]; flags: cudaOccupancy*.
struct OccupancyArgs { uint64_t function; int32_t block_size; uint32_t flags; uint64_t dynamic_shared_bytes; };
static_assert(sizeof(OccupancyArgs) == 24);
struct OccupancyReply { int32_t blocks; uint32_t pad; };
static_assert(sizeof(OccupancyReply) == 8);

// ---- streams and events. Their handles are made by the guest (a cudaStream_t or
// cudaEvent_t value it hands the app), so creations are batchable; the host maps each to
// its own CUstream/CUevent per client and rejects any handle it did not see created.
// Stream handles 0, 1, 2 are CUDA's special streams and are never created or destroyed.
inline constexpr uint64_t kStreamDefault = 0;    // the legacy default stream (NULL)
inline constexpr uint64_t kStreamLegacy = 1;     // cudaStreamLegacy
inline constexpr uint64_t kStreamPerThread = 2;  // cudaStreamPerThread
inline constexpr uint64_t kFirstGuestHandle = 3;  // created handles are >= this

struct StreamCreateArgs {
  uint64_t handle;
  uint32_t flags;    // cudaStreamDefault (0) / cudaStreamNonBlocking (1)
  int32_t priority;  // clamped to the device's range by the host, as CUDA does
};
static_assert(sizeof(StreamCreateArgs) == 16);
struct StreamArgs { uint64_t stream; };
struct StreamWaitEventArgs { uint64_t stream; uint64_t event; uint32_t flags; uint32_t pad; };
static_assert(sizeof(StreamWaitEventArgs) == 24);
struct StreamPriorityReply { int32_t priority; uint32_t pad; };
static_assert(sizeof(StreamPriorityReply) == 8);
// cudaDeviceGetStreamPriorityRange of the current device.
struct StreamPriorityRangeReply { int32_t least; int32_t greatest; };
static_assert(sizeof(StreamPriorityRangeReply) == 8);

struct EventCreateArgs { uint64_t handle; uint32_t flags; uint32_t pad; };  // cudaEvent* flags
static_assert(sizeof(EventCreateArgs) == 16);
struct EventArgs { uint64_t event; };
struct EventRecordArgs { uint64_t event; uint64_t stream; uint32_t flags; uint32_t pad; };  // cudaEventRecord*
static_assert(sizeof(EventRecordArgs) == 24);
struct EventPairArgs { uint64_t start; uint64_t end; };
static_assert(sizeof(EventPairArgs) == 16);
struct ElapsedTimeReply { float milliseconds; uint32_t pad; };
static_assert(sizeof(ElapsedTimeReply) == 8);

}  // namespace vmcuda::api
