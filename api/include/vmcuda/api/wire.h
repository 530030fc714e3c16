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
struct CopyDeviceArgs { uint64_t dst; uint64_t src; uint64_t bytes; };
struct MemsetArgs { uint64_t dst; uint64_t bytes; uint32_t value; uint32_t pad; };

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
  uint64_t stream;         // 0: the client's default stream
};
static_assert(sizeof(LaunchArgs) == 48);

}  // namespace vmcuda::api
