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

struct ModuleLoadArgs { vmrpc::wire::HeapRef image; };
struct HandleReply { uint64_t handle; };

// The mangled name follows the struct (name_bytes, no terminator).
struct GetFunctionArgs { uint64_t module; uint32_t name_bytes; uint32_t pad; };
struct ParamInfo { uint32_t offset; uint32_t size; };
inline constexpr uint32_t kMaxKernelParams = 1024;
// Followed by param_count ParamInfo.
struct GetFunctionReply { uint64_t function; uint32_t param_count; uint32_t pad; };

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
