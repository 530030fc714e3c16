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
  // The client's device arena (host-stub/src/arena.h): every device pointer it gets lies
  // in [arena_base, arena_base + arena_bytes); the guest reserves that range in its own
  // address space so that no host pointer can equal a device pointer. 0, 0: none.
  uint64_t arena_base;
  uint64_t arena_bytes;
};
static_assert(sizeof(HandshakeReply) == 32);

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

// ---- NVML (NvmlDeviceInfo): one guest device as libnvidia-ml.so.1 reports it.
inline constexpr uint32_t kNvmlDriverVersionBytes = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
inline constexpr uint32_t kNvmlUtilizationMeasured = 1u << 0;  // flags: gpu_percent is a measurement
inline constexpr uint32_t kNvmlMemoryFromContext = 1u << 1;    // flags: free is the driver's (a context exists)
struct NvmlDeviceInfoReply {
  uint64_t total_bytes;  // min(device memory, the VM's quota)
  uint64_t free_bytes;   // what the VM may still allocate on it (as MemGetInfo's free)
  uint32_t gpu_percent;  // the VM's share of the GPU's time recently (fair_share.h), 0..100
  uint32_t flags;        // kNvml*
  char driver_version[kNvmlDriverVersionBytes];  // the host's NVIDIA driver ("580.65.06"); "" unknown
};
static_assert(sizeof(NvmlDeviceInfoReply) == 24 + kNvmlDriverVersionBytes);

// ---- limits and cache configuration (cudaLimit == CUlimit, cudaFuncCache == CUfunc_cache).
struct LimitArgs { int32_t limit; uint32_t pad; };
static_assert(sizeof(LimitArgs) == 8);
struct SetLimitArgs { uint64_t value; int32_t limit; uint32_t pad; };
static_assert(sizeof(SetLimitArgs) == 16);
// The limit's value (after a set: what the driver made of the request, rounded or clamped).
struct LimitReply { uint64_t value; };
struct CacheConfigArgs { int32_t config; uint32_t pad; };
static_assert(sizeof(CacheConfigArgs) == 8);
struct CacheConfigReply { int32_t config; uint32_t pad; };
static_assert(sizeof(CacheConfigReply) == 8);
struct FuncCacheConfigArgs { uint64_t function; int32_t config; uint32_t pad; };
static_assert(sizeof(FuncCacheConfigArgs) == 16);

// ---- kernel printf output (OutputRing). A ring in the shared heap: this header, then the
// data (the rest of the block). Positions count bytes since registration and only grow;
// byte p lies at data[p % capacity]. The host writes data, then publishes write_pos with
// release; the guest reads up to it (acquire), writes it out, then publishes read_pos with
// release. The host never trusts read_pos: one outside [write_pos - capacity, write_pos]
// counts as a full ring (nothing is written until it is sane again).
struct OutputRingHeader {
  uint64_t write_pos;  // host
  uint64_t read_pos;   // guest
  uint64_t pending;    // host: bytes waiting on the host that did not fit (ask with OutputRing)
  uint64_t dropped;    // host: bytes lost so far (the host's buffer was full)
  uint64_t reserved[4];
};
static_assert(sizeof(OutputRingHeader) == 64);
// The ring: 64-byte aligned, header + at least kOutputRingMinData bytes of data.
inline constexpr uint64_t kOutputRingMinData = 256;
inline constexpr uint64_t kOutputRingMaxBytes = 64ull << 20;
struct OutputRingArgs { vmrpc::wire::HeapRef ring; };
static_assert(sizeof(OutputRingArgs) == 16);
// captured 0: the host leaves kernel printf output on its own stdout (--isolation thread,
// where clients share a process); the guest may free the ring.
struct OutputRingReply { uint32_t captured; uint32_t pad; };
static_assert(sizeof(OutputRingReply) == 8);

// ---- peer access: devices are guest device indexes.
struct PeerArgs { int32_t device; int32_t peer; };
static_assert(sizeof(PeerArgs) == 8);
struct PeerReply { int32_t value; uint32_t pad; };
static_assert(sizeof(PeerReply) == 8);
// From the current device to `peer`; flags must be 0.
struct PeerAccessArgs { int32_t peer; uint32_t flags; };
static_assert(sizeof(PeerAccessArgs) == 8);
inline constexpr uint32_t kMaxProgramName = 64;  // ClientInfo's trailing bytes
// cudaMemPoolSetAccess: whether `accessor` may reach the memory of a pool on `owner`.
struct PoolAccessArgs { int32_t owner; int32_t accessor; uint32_t enable; uint32_t pad; };
static_assert(sizeof(PoolAccessArgs) == 16);
struct P2PAttributeArgs { int32_t attribute; int32_t src; int32_t dst; uint32_t pad; };  // cudaDeviceP2PAttr
static_assert(sizeof(P2PAttributeArgs) == 16);
struct MemcpyPeerArgs { uint64_t dst; uint64_t src; uint64_t bytes; int32_t dst_device; int32_t src_device; };
static_assert(sizeof(MemcpyPeerArgs) == 32);
struct MemcpyPeerAsyncArgs {
  uint64_t dst;
  uint64_t src;
  uint64_t bytes;
  int32_t dst_device;
  int32_t src_device;
  uint64_t stream;  // a guest stream handle
};
static_assert(sizeof(MemcpyPeerAsyncArgs) == 40);

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
// Memsets: `element_bytes` 0 or 1 sets bytes (cudaMemset: `value`'s low byte); 2 and 4 set
// 16- and 32-bit elements (cuMemsetD16/D32: `bytes` a multiple of it, `dst` aligned to it).
struct MemsetArgs { uint64_t dst; uint64_t bytes; uint32_t value; uint32_t element_bytes; };

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
struct MemsetAsyncArgs { uint64_t dst; uint64_t bytes; uint32_t value; uint32_t element_bytes; uint64_t stream; };
static_assert(sizeof(MemsetAsyncArgs) == 32);
// A memset of pinned heap bytes (cudaMallocHost / cudaHostAlloc, cudaMallocManaged memory),
// which the host has mapped for the device: run by the device on `stream`, as natively on
// the pinned pointer.
struct MemsetHeapAsyncArgs { vmrpc::wire::HeapRef dst; uint32_t value; uint32_t element_bytes; uint64_t stream; };
static_assert(sizeof(MemsetHeapAsyncArgs) == 32);
// The same, of `height` rows of `width` bytes, `pitch` bytes apart, that `dst` spans
// (cudaMemset2D/3D[Async], cuMemsetD2D* of pinned and managed memory).
struct MemsetHeap2DAsyncArgs {
  vmrpc::wire::HeapRef dst;
  uint64_t pitch;
  uint64_t width;
  uint64_t height;
  uint32_t value;
  uint32_t element_bytes;  // 0 or 1, 2, 4
  uint64_t stream;
};
static_assert(sizeof(MemsetHeap2DAsyncArgs) == 56);

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
// A 2D memset of `width`-byte rows of elements of element_bytes (0 or 1, 2, 4: cuMemsetD2D16/32).
struct Memset2DArgs { uint64_t dst; uint64_t pitch; uint64_t width; uint64_t height; uint32_t value; uint32_t element_bytes; };
static_assert(sizeof(Memset2DArgs) == 40);
// Async 2D copies and memsets (cudaMemcpy2DAsync, cudaMemset2DAsync): the same regions on a
// guest stream handle; heap copies take kHeapCopyWait as CopyHeapAsyncArgs do.
struct Copy2DInlineAsyncArgs { uint64_t device; uint64_t device_pitch; uint64_t width; uint64_t height; uint64_t stream; };
static_assert(sizeof(Copy2DInlineAsyncArgs) == 40);
struct Copy2DHeapAsyncArgs {
  uint64_t device;
  uint64_t device_pitch;
  uint64_t width;
  uint64_t height;
  vmrpc::wire::HeapRef host;
  uint64_t host_pitch;
  uint64_t stream;
  uint32_t flags;  // kHeapCopyWait
  uint32_t pad;
};
static_assert(sizeof(Copy2DHeapAsyncArgs) == 72 && offsetof(Copy2DHeapAsyncArgs, host) == 32);
struct Copy2DDeviceAsyncArgs {
  uint64_t dst;
  uint64_t dst_pitch;
  uint64_t src;
  uint64_t src_pitch;
  uint64_t width;
  uint64_t height;
  uint64_t stream;
};
static_assert(sizeof(Copy2DDeviceAsyncArgs) == 56);
struct Memset2DAsyncArgs {
  uint64_t dst;
  uint64_t pitch;
  uint64_t width;
  uint64_t height;
  uint32_t value;
  uint32_t element_bytes;  // as Memset2DArgs'
  uint64_t stream;
};
static_assert(sizeof(Memset2DAsyncArgs) == 48);

// ---- arrays and textures (calls.def 0x1800). Formats and flags are the driver's
// (CUarray_format, CUDA_ARRAY3D_* flags, CUaddress_mode, CUfilter_mode, CU_TRSF_*): the guest
// translates the runtime's descriptors; the host checks every value before the driver sees it.
// ArrayCreate: a CUDA array (levels 0) or a mipmapped array of `levels` levels. Sizes as
// CUDA_ARRAY3D_DESCRIPTOR's: height 0 for 1D, depth 0 unless 3D, layered or cubemap.
struct ArrayCreateArgs {
  uint64_t width;
  uint64_t height;
  uint64_t depth;
  uint32_t format;    // CUarray_format
  uint32_t channels;  // 1, 2 or 4
  uint32_t flags;     // CUDA_ARRAY3D_* (== cudaArray* flags)
  uint32_t levels;    // 0: a plain array; else a mipmapped array of that many levels
};
static_assert(sizeof(ArrayCreateArgs) == 40);
// An array (mipmapped 0) or a mipmapped array (1) by its handle.
struct ArrayArgs { uint64_t array; uint32_t mipmapped; uint32_t pad; };
static_assert(sizeof(ArrayArgs) == 16);
struct ArrayLevelArgs { uint64_t mipmapped_array; uint32_t level; uint32_t pad; };
static_assert(sizeof(ArrayLevelArgs) == 16);
// A copy between a region of an array and: packed bytes after the struct (ArrayCopyToInline)
// or in the reply (ArrayCopyFromInline), `host` with `pitch` and `rows` (ArrayCopyHeap), device
// memory at `other` with `pitch` and `rows` (ArrayCopyDevice), or with kArrayCopyOtherArray
// the array `other` at (other_x, other_y, other_z) (ArrayCopyDevice). The region is `width`
// bytes by `height` rows by `depth` slices (or layers) at byte `x`, row `y`, slice `z`; on the
// memory side rows are `pitch` bytes apart and slices `rows` rows apart.
inline constexpr uint32_t kArrayCopyFromArray = 1u << 1;   // the array is the source (else the destination)
inline constexpr uint32_t kArrayCopyAsync = 1u << 2;       // ordered on `stream` (else synchronous)
inline constexpr uint32_t kArrayCopyOtherArray = 1u << 3;  // `other` is an array handle
struct ArrayCopyArgs {
  uint64_t array;
  uint64_t x, y, z;
  uint64_t width, height, depth;
  uint64_t other;
  uint64_t other_x, other_y, other_z;
  uint64_t pitch, rows;
  vmrpc::wire::HeapRef host;
  uint64_t stream;  // a guest stream handle (with kArrayCopyAsync)
  uint32_t flags;   // kHeapCopyWait, kArrayCopy*
  uint32_t pad;
};
static_assert(sizeof(ArrayCopyArgs) == 136 && offsetof(ArrayCopyArgs, host) == 104);
// cudaCreateTextureObject: the resource (cudaResourceType numbering) and CUDA_TEXTURE_DESC's
// fields. Array resources name an array handle (kTexResourceArray) or a mipmapped array's
// (kTexResourceMipmap); linear ones a device address with their format and sizes.
inline constexpr uint32_t kTexResourceArray = 0, kTexResourceMipmap = 1, kTexResourceLinear = 2,
                          kTexResourcePitch2D = 3;
struct TextureCreateArgs {
  uint32_t resource;
  uint32_t format;    // linear, pitch2D: CUarray_format
  uint32_t channels;  // linear, pitch2D
  uint32_t address_mode[3];  // CUaddress_mode
  uint32_t filter_mode;      // CUfilter_mode
  uint32_t mipmap_filter_mode;
  uint32_t tex_flags;        // CU_TRSF_*
  uint32_t max_anisotropy;
  float mipmap_level_bias, min_mipmap_level_clamp, max_mipmap_level_clamp;
  float border_color[4];
  uint32_t pad;
  uint64_t handle;  // array or mipmapped array handle, or device address
  uint64_t bytes;   // linear: size
  uint64_t width, height, pitch;  // pitch2D: elements, rows, bytes between rows
};
static_assert(sizeof(TextureCreateArgs) == 112 && offsetof(TextureCreateArgs, handle) == 72);
// A texture or surface object by the driver's value.
struct ObjectValueArgs { uint64_t value; };

struct ModuleLoadArgs { vmrpc::wire::HeapRef image; };
struct HandleReply { uint64_t handle; };
// ModuleLoadCached: an image by its SHA-256 (over its `bytes` bytes, as ModuleLoad would
// send them). hit 1: loaded, `handle` as ModuleLoad's; hit 0: not cached, send it.
struct ModuleLoadCachedArgs { uint8_t sha256[32]; uint64_t bytes; };
static_assert(sizeof(ModuleLoadCachedArgs) == 40);
struct ModuleLoadCachedReply { uint64_t handle; uint32_t hit; uint32_t pad; };
static_assert(sizeof(ModuleLoadCachedReply) == 16);
// ModuleUnload: a module handle from ModuleLoad.
struct ModuleArgs { uint64_t module; };
static_assert(sizeof(ModuleArgs) == 8);

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

// A module's __managed__ variable (its name follows the struct, name_bytes, no terminator)
// bound to `shadow`: heap bytes of exactly the variable's size, filled with its value. The
// reply is the binding's handle and the variable's device address and size. With
// kManagedBindKeep (the shadow is bound on another device already) the shadow keeps its
// bytes, and the next launch gives them to this device's variable.
inline constexpr uint32_t kManagedBindKeep = 1u << 0;
// kManagedBindOnlyManaged (cuLibraryGetManaged): only a variable the driver made managed
// memory is bound; any other global, a __device__ one, answers CUDA_ERROR_NOT_FOUND.
inline constexpr uint32_t kManagedBindOnlyManaged = 1u << 1;
struct ManagedBindArgs { uint64_t module; vmrpc::wire::HeapRef shadow; uint32_t name_bytes; uint32_t flags; };
static_assert(sizeof(ManagedBindArgs) == 32);
struct ManagedBindReply { uint64_t var; uint64_t ptr; uint64_t bytes; };
static_assert(sizeof(ManagedBindReply) == 24);
inline constexpr uint32_t kManagedPull = 1u << 0;
struct ManagedSyncArgs { uint64_t var; uint64_t stream; uint32_t flags; uint32_t pad; };  // flags: kManagedPull
static_assert(sizeof(ManagedSyncArgs) == 24);

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

// cudaLaunchKernelExC (LaunchKernelEx): LaunchArgs' fields, then attr_count LaunchAttribute
// and arg_bytes of packed parameters follow the struct, in that order. The guest drops
// cudaLaunchAttributeIgnore entries and sends only the attributes vmcuda forwards; the host
// checks each again (ids, values, unused fields zero) before it reaches the driver.
inline constexpr uint32_t kMaxLaunchAttributes = 16;  // limit on untrusted input (CUDA has 16 ids)
// cudaLaunchAttributeID values vmcuda forwards (== CUlaunchAttributeID), and what `value` holds.
inline constexpr uint32_t kLaunchAttrCooperative = 2;                // value[0]: 0 or 1
inline constexpr uint32_t kLaunchAttrClusterDimension = 4;           // value[0..2]: x, y, z (>= 1)
inline constexpr uint32_t kLaunchAttrClusterSchedulingPolicy = 5;    // value[0]: cudaClusterSchedulingPolicy (0..2)
inline constexpr uint32_t kLaunchAttrProgrammaticSerialization = 6;  // value[0]: 0 or 1
inline constexpr uint32_t kLaunchAttrPriority = 8;                   // value[0]: an int, clamped by the driver
struct LaunchAttribute {
  uint32_t id;
  uint32_t value[3];  // unused ones 0
  uint64_t reserved;  // 0 (room for an event handle)
};
static_assert(sizeof(LaunchAttribute) == 24);
struct LaunchExArgs {
  uint64_t function;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t arg_bytes;
  uint64_t stream;  // a guest stream handle (0: the legacy default stream)
  uint32_t attr_count;
  uint32_t pad;
};
static_assert(sizeof(LaunchExArgs) == 56);

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
struct OccupancySharedArgs { uint64_t function; int32_t blocks; int32_t block_size; };
static_assert(sizeof(OccupancySharedArgs) == 16);
struct OccupancySharedReply { uint64_t bytes; };
static_assert(sizeof(OccupancySharedReply) == 8);

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

// ---- stream attributes (cudaStreamSetAttribute/GetAttribute, cuStream*Attribute). The id
// is cudaStreamAttrID == CUstreamAttrID (== the launch attribute ids); the value travels as
// the fields of the stream attributes CUDA has, never as the raw 64-byte union (which holds
// a guest pointer and padding). Which fields an id uses:
//   1 access policy window: base_ptr, num_bytes, hit_ratio, hit_prop, miss_prop
//   3 synchronization policy, 8 priority, 10 memory sync domain: value
//   9 memory sync domain map: domain_default, domain_remote
struct StreamAttributeValue {
  uint64_t base_ptr;   // device address of the window (the client's memory)
  uint64_t num_bytes;
  float hit_ratio;     // in [0, 1]
  uint32_t hit_prop;   // CUaccessProperty
  uint32_t miss_prop;
  int32_t value;
  uint8_t domain_default;
  uint8_t domain_remote;
  uint8_t pad[6];
};
static_assert(sizeof(StreamAttributeValue) == 40);
struct StreamSetAttributeArgs {
  uint64_t stream;
  uint32_t id;
  uint32_t pad;
  StreamAttributeValue value;
};
static_assert(sizeof(StreamSetAttributeArgs) == 56);
struct StreamGetAttributeArgs { uint64_t stream; uint32_t id; uint32_t pad; };
static_assert(sizeof(StreamGetAttributeArgs) == 16);
struct StreamCopyAttributesArgs { uint64_t dst; uint64_t src; };
static_assert(sizeof(StreamCopyAttributesArgs) == 16);

// ---- host functions (cudaLaunchHostFunc, cudaStreamAddCallback). The function runs in the
// guest: the guest keeps a mailbox, an array of HostFuncEntry in the shared heap; the host
// puts a gate on the stream that, when the stream reaches it, publishes `reached` and holds
// the stream until the guest has run the function and published `done` (or the client
// goes away). An entry is reused; its generation (the guest's count of its uses, wrapping)
// tells the uses apart: the gate of generation g waits until (int32_t)(done - g) >= 0, so a
// gate that looks late is never stuck behind a newer use.
struct HostFuncEntry {
  uint32_t reached;  // host: the generation reached (stored last, with release)
  uint32_t done;     // guest: the generation it has run (release)
  int32_t status;    // host: the stream's CUresult when reached (cudaStreamAddCallback's status)
  uint32_t order;    // host: this client's count of reached gates: the guest runs them in this order
};
static_assert(sizeof(HostFuncEntry) == 16);
inline constexpr uint32_t kHostFuncCallback = 1u << 0;  // cudaStreamAddCallback: runs even on a stream error
// Into a stream capture: the entry is a graph host node's (GraphHostNodeArgs), run at every
// launch of the graph; `generation` is unused.
inline constexpr uint32_t kHostFuncPersistent = 1u << 1;
struct LaunchHostFuncArgs {
  uint64_t stream;               // a guest stream handle
  vmrpc::wire::HeapRef mailbox;  // the whole mailbox (16-byte aligned, whole entries)
  uint32_t index;                // the entry
  uint32_t generation;
  uint32_t flags;                // kHostFuncCallback
  uint32_t pad;
};
static_assert(sizeof(LaunchHostFuncArgs) == 40);

struct EventCreateArgs { uint64_t handle; uint32_t flags; uint32_t pad; };  // cudaEvent* flags
static_assert(sizeof(EventCreateArgs) == 16);
struct EventArgs { uint64_t event; };
struct EventRecordArgs { uint64_t event; uint64_t stream; uint32_t flags; uint32_t pad; };  // cudaEventRecord*
static_assert(sizeof(EventRecordArgs) == 24);
struct EventPairArgs { uint64_t start; uint64_t end; };
static_assert(sizeof(EventPairArgs) == 16);
struct ElapsedTimeReply { float milliseconds; uint32_t pad; };
static_assert(sizeof(ElapsedTimeReply) == 8);

// ---- graphs (calls.def 0x1700). Handles of graphs, nodes and executable graphs are made
// by the guest (>= kFirstGuestHandle, from the same counter as streams'); the host maps each
// to its CUgraph/CUgraphNode/CUgraphExec per client and checks every handle. Nodes the guest
// did not add (captured or cloned graphs' nodes) get handles made by the host when the guest
// lists them: those have kHostNodeHandle set, so the two never collide.
inline constexpr uint64_t kHostNodeHandle = 1ull << 63;
inline constexpr uint32_t kMaxGraphDeps = 4096;   // limit on untrusted input: one call's node handles
inline constexpr uint32_t kMaxGraphList = 8192;   // GraphGetNodes' most handles in one reply
// cudaStreamCaptureMode (== CUstreamCaptureMode): 0 global, 1 thread-local, 2 relaxed.
struct CaptureBeginArgs { uint64_t stream; uint32_t mode; uint32_t pad; };
static_assert(sizeof(CaptureBeginArgs) == 16);
// The captured graph gets the guest's handle `graph` (on success only).
struct CaptureEndArgs { uint64_t stream; uint64_t graph; };
static_assert(sizeof(CaptureEndArgs) == 16);
// cudaStreamCaptureStatus (0 none, 1 active, 2 invalidated) and the capture's unique id.
struct CaptureInfoReply { uint32_t status; uint32_t pad; uint64_t id; };
static_assert(sizeof(CaptureInfoReply) == 16);
// cudaThreadExchangeStreamCaptureMode's new mode for the client's thread on the host.
struct CaptureModeArgs { uint32_t mode; uint32_t pad; };
static_assert(sizeof(CaptureModeArgs) == 8);
struct GraphArgs { uint64_t graph; uint32_t flags; uint32_t pad; };  // cudaGraphCreate's flags: 0
static_assert(sizeof(GraphArgs) == 16);
struct GraphCloneArgs { uint64_t clone; uint64_t original; };
static_assert(sizeof(GraphCloneArgs) == 16);
// Followed by dep_count node handles, then arg_bytes of packed parameters (LaunchArgs' layout).
struct GraphKernelNodeArgs {
  uint64_t graph;
  uint64_t node;
  uint64_t function;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t arg_bytes;
  uint32_t dep_count;
  uint32_t pad;
};
static_assert(sizeof(GraphKernelNodeArgs) == 64);
// One side of a memcpy node: device memory of the client, or pinned shared-heap memory of
// the client (cudaMallocHost: a heap range the host pinned). `pitch` bytes per row, `height`
// rows per slice; the copy starts at pos (x in bytes, y rows, z slices).
inline constexpr uint32_t kGraphMemDevice = 0;
inline constexpr uint32_t kGraphMemHeap = 1;
struct GraphMemcpySide {
  uint32_t kind;  // kGraphMemDevice / kGraphMemHeap
  uint32_t pad;
  uint64_t device;             // kGraphMemDevice: the address of the region's start
  vmrpc::wire::HeapRef heap;   // kGraphMemHeap: the whole pinned range the region lies in
  uint64_t heap_offset;        // kGraphMemHeap: the region's start inside `heap`
  uint64_t pitch;
  uint64_t height;
  uint64_t pos[3];
};
static_assert(sizeof(GraphMemcpySide) == 80);
struct GraphMemcpyNodeArgs {
  uint64_t graph;
  uint64_t node;
  GraphMemcpySide src;
  GraphMemcpySide dst;
  uint64_t extent[3];  // width in bytes, height in rows, depth in slices
  uint32_t dep_count;
  uint32_t pad;
};
static_assert(sizeof(GraphMemcpyNodeArgs) == 208);
// cudaMemsetParams: element_size 1, 2 or 4; width in elements.
struct GraphMemsetNodeArgs {
  uint64_t graph;
  uint64_t node;
  uint64_t dst;
  uint64_t pitch;
  uint64_t width;
  uint64_t height;
  uint32_t value;
  uint32_t element_size;
  uint32_t dep_count;
  uint32_t pad;
};
static_assert(sizeof(GraphMemsetNodeArgs) == 64);
// A host node: its function runs in the guest, as a host function's (HostFuncEntry), at
// every launch: the entry is re-armed (persistent gate: `reached` counts the launches that
// reached it, `done` the runs the guest has finished).
struct GraphHostNodeArgs {
  uint64_t graph;
  uint64_t node;
  vmrpc::wire::HeapRef mailbox;
  uint32_t index;
  uint32_t dep_count;
};
static_assert(sizeof(GraphHostNodeArgs) == 40);
// GraphAddNode's kinds (== cudaGraphNodeType): `object` is an event (record, wait) or a
// graph (child: the driver adds a copy of it), 0 for an empty node.
inline constexpr uint32_t kGraphNodeKernel = 0, kGraphNodeMemcpy = 1, kGraphNodeMemset = 2, kGraphNodeHost = 3,
                          kGraphNodeChild = 4, kGraphNodeEmpty = 5, kGraphNodeWaitEvent = 6,
                          kGraphNodeEventRecord = 7;
struct GraphNodeArgs { uint64_t graph; uint64_t node; uint64_t object; uint32_t type; uint32_t dep_count; };
static_assert(sizeof(GraphNodeArgs) == 32);
// from[count] then to[count] node handles follow.
struct GraphEdgesArgs { uint64_t graph; uint32_t count; uint32_t pad; };
static_assert(sizeof(GraphEdgesArgs) == 16);
// roots 1: cudaGraphGetRootNodes. At most `capacity` handles come back after the reply;
// `count` is how many there are (all of them, as CUDA's numNodes).
struct GraphListArgs { uint64_t graph; uint32_t roots; uint32_t capacity; };
static_assert(sizeof(GraphListArgs) == 16);
struct GraphListReply { uint64_t count; };
struct GraphNodeRefArgs { uint64_t node; };
struct GraphNodeTypeReply { uint32_t type; uint32_t pad; };
static_assert(sizeof(GraphNodeTypeReply) == 8);
struct GraphFindInCloneArgs { uint64_t node; uint64_t clone; };
static_assert(sizeof(GraphFindInCloneArgs) == 16);
struct GraphInstantiateArgs { uint64_t exec; uint64_t graph; uint64_t flags; };  // cudaGraphInstantiateFlag*
static_assert(sizeof(GraphInstantiateArgs) == 24);
struct GraphLaunchArgs { uint64_t exec; uint64_t stream; };
static_assert(sizeof(GraphLaunchArgs) == 16);
struct GraphExecArgs { uint64_t exec; };
// Followed by arg_bytes of packed parameters.
struct GraphExecKernelArgs {
  uint64_t exec;
  uint64_t node;
  uint64_t function;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t arg_bytes;
};
static_assert(sizeof(GraphExecKernelArgs) == 56);
struct GraphExecUpdateArgs { uint64_t exec; uint64_t graph; };
static_assert(sizeof(GraphExecUpdateArgs) == 16);
// cudaGraphExecUpdateResultInfo: the result (cudaGraphExecUpdateResult) and the nodes it names
// (0: none), with the update's CUresult in `status` (the call itself succeeds, so that the
// reply comes back with the refusal: cudaErrorGraphExecUpdateFailure's result says why).
struct GraphExecUpdateReply { uint32_t result; int32_t status; uint64_t error_node; uint64_t error_from_node; };
static_assert(sizeof(GraphExecUpdateReply) == 24);

// ---- graph nodes (calls.def 0x1b00): node parameters, relations, enabling, kernel node
// attributes. A node's parameters, whichever its type (== cudaGraphNodeType): what
// GraphNodeGetParams answers and GraphNodeSetParams sets; only the type's fields count.
struct GraphNodeParams {
  uint32_t type;       // kGraphNode*
  uint32_t arg_bytes;  // kernel: its packed parameters' bytes, after the args (set) or the reply (get)
  uint64_t object;     // kernel: the host's function handle; event record/wait: the event; child: a graph
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t index;                // host: the mailbox entry
  vmrpc::wire::HeapRef mailbox;  // host: the whole mailbox (get: offset of the entry, bytes 0)
  GraphMemcpySide src;           // memcpy (get: a heap side's heap.offset is the region start's, bytes 0)
  GraphMemcpySide dst;
  uint64_t extent[3];
  uint64_t memset_dst;  // memset (cudaMemsetParams)
  uint64_t memset_pitch;
  uint64_t memset_width;
  uint64_t memset_height;
  uint32_t memset_value;
  uint32_t memset_element_size;
};
static_assert(sizeof(GraphNodeParams) == 288);
// exec 0: the graph's node; else that executable graph's copy of it (cudaGraphExec*SetParams).
// A kernel's packed parameters follow (params.arg_bytes).
struct GraphNodeSetArgs {
  uint64_t exec;
  uint64_t node;
  GraphNodeParams params;
};
static_assert(sizeof(GraphNodeSetArgs) == 304);
// A node's dependencies (which 0) or dependent nodes (1), as GraphGetNodes answers.
inline constexpr uint32_t kGraphNodeDependencies = 0, kGraphNodeDependents = 1;
struct GraphNodeListArgs { uint64_t node; uint32_t which; uint32_t capacity; };
static_assert(sizeof(GraphNodeListArgs) == 16);
// A graph's edges: capacity from handles then capacity to handles come back (count: all).
// GraphGetEdges uses GraphListArgs (roots 0) and GraphListReply.
// cudaGraphNodeGetEnabled (set 0) / SetEnabled (set 1) of a node in an executable graph.
struct GraphNodeEnableArgs { uint64_t exec; uint64_t node; uint32_t set; uint32_t enabled; };
static_assert(sizeof(GraphNodeEnableArgs) == 24);
struct GraphNodeEnableReply { uint32_t enabled; uint32_t pad; };
static_assert(sizeof(GraphNodeEnableReply) == 8);
// cudaGraphChildGraphNodeGetGraph: the embedded graph, named by `graph` (the guest's new
// handle) unless it has a handle already; the reply names the one to use.
struct GraphChildArgs { uint64_t node; uint64_t graph; };
static_assert(sizeof(GraphChildArgs) == 16);
struct GraphChildReply { uint64_t graph; };
// Kernel node attributes (cudaLaunchAttributeID; value: cudaLaunchAttributeValue's words):
// op 0 get, 1 set, 2 copy all from `source`.
inline constexpr uint32_t kAttrGet = 0, kAttrSet = 1, kAttrCopy = 2;
struct GraphKernelAttrArgs {
  uint64_t node;
  uint64_t source;
  uint32_t op;
  uint32_t id;
  uint32_t value[4];
};
static_assert(sizeof(GraphKernelAttrArgs) == 40);
struct GraphKernelAttrReply { uint32_t value[4]; };
static_assert(sizeof(GraphKernelAttrReply) == 16);
// cudaStreamGetId: the driver's unique id of the stream.
struct StreamIdReply { uint64_t id; };
// Conditional nodes: a handle of `graph` (cudaGraphConditionalHandleCreate: the default value
// and cudaGraphCondAssignDefault), the driver's 64-bit value kernels give cudaGraphSetConditional.
struct GraphCondHandleArgs { uint64_t graph; uint32_t default_value; uint32_t flags; };
static_assert(sizeof(GraphCondHandleArgs) == 16);
struct GraphCondHandleReply { uint64_t handle; };
// A conditional node (cudaGraphCondTypeIf/While/Switch: 0, 1, 2): dep_count node handles, then
// `size` graph handles the guest made for its bodies (the node's own graphs).
inline constexpr uint32_t kGraphNodeConditional = 13;
inline constexpr uint32_t kMaxConditionalBodies = 256;
struct GraphConditionalNodeArgs {
  uint64_t graph;
  uint64_t node;
  uint64_t handle;
  uint32_t type;
  uint32_t size;
  uint32_t dep_count;
  uint32_t pad;
};
static_assert(sizeof(GraphConditionalNodeArgs) == 40);

// ---- virtual memory management (calls.def 0x1140). Devices are guest device indexes;
// handles of physical allocations are made by the host (never 0).
// cuMemGetAllocationGranularity: option 0 minimum, 1 recommended (CUmemAllocationGranularity_flags).
struct VmmGranularityArgs { int32_t device; uint32_t option; };
static_assert(sizeof(VmmGranularityArgs) == 8);
struct VmmValueReply { uint64_t value; };
static_assert(sizeof(VmmValueReply) == 8);
// cuMemAddressReserve: alignment 0 is the granularity; addr a hint (0: none).
struct VmmReserveArgs { uint64_t bytes; uint64_t alignment; uint64_t addr; uint64_t flags; };
static_assert(sizeof(VmmReserveArgs) == 32);
struct VmmRangeArgs { uint64_t ptr; uint64_t bytes; };
static_assert(sizeof(VmmRangeArgs) == 16);
// cuMemCreate of pinned device memory on `device` (the guest checked the rest of the
// properties; the host checks what it acts on).
struct VmmCreateArgs { uint64_t bytes; int32_t device; uint32_t flags; };
static_assert(sizeof(VmmCreateArgs) == 16);
struct VmmHandleArgs { uint64_t handle; };
static_assert(sizeof(VmmHandleArgs) == 8);
struct VmmMapArgs { uint64_t ptr; uint64_t bytes; uint64_t offset; uint64_t handle; uint64_t flags; };
static_assert(sizeof(VmmMapArgs) == 40);
// cuMemSetAccess for one device (the guest sends one per descriptor); cuMemGetAccess of
// `ptr` for `device` (bytes and flags unused). flags: CUmemAccess_flags.
struct VmmAccessArgs { uint64_t ptr; uint64_t bytes; int32_t device; uint32_t flags; };
static_assert(sizeof(VmmAccessArgs) == 24);
struct VmmPropertiesReply { uint64_t bytes; int32_t device; uint32_t pad; };
static_assert(sizeof(VmmPropertiesReply) == 16);
// ---- IPC (calls.def 0x1a00). The 64 bytes of cudaIpcMemHandle_t / cudaIpcEventHandle_t as
// vmcuda fills them: a tag, then the VM's random token; the rest zero. Only the host's table
// gives a token meaning (a forged or another VM's handle names nothing).
inline constexpr size_t kIpcHandleBytes = 64;
inline constexpr size_t kIpcTokenBytes = 16;
inline constexpr uint64_t kIpcMemTag = 0x6d4350496163766dull;    // "mvcaIPCm" little-endian
inline constexpr uint64_t kIpcEventTag = 0x654350496163766dull;  // "mvcaIPCe"
struct IpcHandle {
  uint64_t tag;
  uint8_t token[kIpcTokenBytes];
  uint8_t zero[kIpcHandleBytes - 8 - kIpcTokenBytes];
};
static_assert(sizeof(IpcHandle) == kIpcHandleBytes);
struct IpcHandleReply { IpcHandle handle; };
// cudaIpcOpenMemHandle: flags 0 or cudaIpcMemLazyEnablePeerAccess (1).
struct IpcOpenMemArgs { IpcHandle handle; uint32_t flags; uint32_t pad; };
static_assert(sizeof(IpcOpenMemArgs) == 72);
// The importer's pointer, the exporter's allocation size there and the guest device it is on.
struct IpcOpenMemReply { uint64_t ptr; uint64_t bytes; int32_t device; uint32_t pad; };
static_assert(sizeof(IpcOpenMemReply) == 24);
// cudaIpcOpenEventHandle: `event` is the guest-made handle the opened event gets.
struct IpcOpenEventArgs { IpcHandle handle; uint64_t event; };
static_assert(sizeof(IpcOpenEventArgs) == 72);
// The guest device the opened event belongs to.
struct DeviceReply { int32_t device; uint32_t pad; };
static_assert(sizeof(DeviceReply) == 8);
// ---- Memory pool IPC (calls.def 0x1a10). An exported pool is a token of the VM's table
// too (an IpcHandle tagged kIpcPoolTag): the guest hands the program a real file descriptor
// holding it (guest-lib memory_pool.cc). A pointer's export data (cudaMemPoolPtrExportData,
// 64 bytes) is the pool's token and the allocation's IPC memory token (IpcGetMemHandle's).
inline constexpr uint64_t kIpcPoolTag = 0x704350496163766dull;     // "mvcaIPCp"
inline constexpr uint64_t kIpcPoolPtrTag = 0x784350496163766dull;  // "mvcaIPCx"
struct PoolPtrExport {
  uint64_t tag;  // kIpcPoolPtrTag
  uint8_t memory[kIpcTokenBytes];
  uint8_t pool[kIpcTokenBytes];
  uint8_t zero[kIpcHandleBytes - 8 - 2 * kIpcTokenBytes];
};
static_assert(sizeof(PoolPtrExport) == kIpcHandleBytes);
// cudaMemPoolExportToShareableHandle (and cudaMemPoolDestroy of an exported pool): the
// guest's pool handle and its device.
struct MemPoolExportArgs { uint64_t pool; int32_t device; uint32_t pad; };
static_assert(sizeof(MemPoolExportArgs) == 16);
// cudaMemPoolImportFromShareableHandle: the token the descriptor held.
struct MemPoolImportArgs { IpcHandle handle; };
static_assert(sizeof(MemPoolImportArgs) == 64);

// ---- device queries of CUDA 12-13 (calls.def 0x1c00). Devices are guest device indexes.
// cuDeviceGetTexture1DLinearMaxWidth: a CUarray_format and 1, 2 or 4 channels.
struct Texture1DWidthArgs { int32_t device; uint32_t format; uint32_t channels; uint32_t pad; };
static_assert(sizeof(Texture1DWidthArgs) == 16);
struct Texture1DWidthReply { uint64_t width; };
static_assert(sizeof(Texture1DWidthReply) == 8);
// cuDeviceGetHostAtomicCapabilities (dst kAtomicHost) or cuDeviceGetP2PAtomicCapabilities:
// `count` CUatomicOperation values (uint32) follow; the reply has one capability mask each.
inline constexpr uint32_t kMaxAtomicOperations = 64;
inline constexpr int32_t kAtomicHost = -1;
struct AtomicCapsArgs { int32_t src; int32_t dst; uint32_t count; uint32_t pad; };
static_assert(sizeof(AtomicCapsArgs) == 16);
struct AtomicCapsReply { uint32_t caps[kMaxAtomicOperations]; };
static_assert(sizeof(AtomicCapsReply) == 256);
// cudaStreamBeginCaptureToGraph: capture into the guest's graph `graph` after `count` of its
// nodes (handles at the tail's start), each with its edge data (CUgraphEdgeData, 8 bytes,
// following the handles) when `edges` is 1. The capture ends in that graph (CaptureEndArgs
// names it).
struct CaptureToGraphArgs { uint64_t stream; uint64_t graph; uint32_t mode; uint32_t count; uint32_t edges; uint32_t pad; };
static_assert(sizeof(CaptureToGraphArgs) == 32);
// A texture object of an array or mipmapped array through a resource view
// (cudaResourceViewDesc / CUDA_RESOURCE_VIEW_DESC: its format is a CUresourceViewFormat).
struct TextureViewArgs {
  TextureCreateArgs tex;
  uint32_t format;
  uint32_t first_mipmap_level, last_mipmap_level, first_layer, last_layer;
  uint32_t pad;
  uint64_t width, height, depth;
};
static_assert(sizeof(TextureViewArgs) == 160);
// cuFlushGPUDirectRDMAWrites: CUflushGPUDirectRDMAWritesTarget and Scope.
struct FlushRdmaArgs { uint32_t target; uint32_t scope; };
static_assert(sizeof(FlushRdmaArgs) == 8);

// ---- rt3 (calls.def 0x1d00)
// cudaStreamGetCaptureInfo's graph and dependencies of a capture in progress: the graph gets
// the guest's handle `graph` unless it has one (a capture into the program's graph, or one
// asked before); the reply's trailing bytes are min(count, capacity) node handles, then (when
// `edges` is 1) as many CUgraphEdgeData (8 bytes each).
struct CaptureGraphArgs { uint64_t stream; uint64_t graph; uint32_t capacity; uint32_t pad; };
static_assert(sizeof(CaptureGraphArgs) == 24);
struct CaptureGraphReply { uint32_t status; uint32_t edges; uint64_t id; uint64_t graph; uint64_t count; };
static_assert(sizeof(CaptureGraphReply) == 32);
// cudaStreamUpdateCaptureDependencies: `count` node handles of the capture's graph at the
// tail's start, then (edges 1) their CUgraphEdgeData; flags cudaStreamAdd/SetCaptureDependencies.
struct CaptureDepsArgs { uint64_t stream; uint32_t count; uint32_t flags; uint32_t edges; uint32_t pad; };
static_assert(sizeof(CaptureDepsArgs) == 24);
// cuLibraryGetKernelCount / EnumerateKernels: the kernels of a host module, as `count` names
// (each NUL-terminated) in the reply's trailing bytes, `bytes` long; 0 trailing bytes when
// they do not fit the reply area (ask again with `bytes`).
struct KernelNamesReply { uint32_t count; uint32_t bytes; };
static_assert(sizeof(KernelNamesReply) == 8);
inline constexpr uint32_t kMaxKernelNameBytes = 1u << 20;  // a module's names, all together

}  // namespace vmcuda::api

// NVIDIA's libraries at their own API (issue 12 point 3): generated from NVIDIA's headers at
// build time (api/CMakeLists.txt, scripts/gen-cublas.py) where they are installed.
#ifdef VMCUDA_WITH_CUBLAS
#include "vmcuda/api/cublas_wire.h"
#include "vmcuda/api/cublasLt_wire.h"
#endif
// cuFFT and cuRAND (scripts/gen-nvlib.py).
#ifdef VMCUDA_WITH_CUFFT
#include "vmcuda/api/cufft_wire.h"
#endif
#ifdef VMCUDA_WITH_CURAND
#include "vmcuda/api/curand_wire.h"
#endif
// cuSPARSE and cuSOLVER (scripts/gen-nvobj.py).
#ifdef VMCUDA_WITH_CUSPARSE
#include "vmcuda/api/cusparse_wire.h"
#endif
#ifdef VMCUDA_WITH_CUSOLVER
#include "vmcuda/api/cusolver_wire.h"
#endif
// cuDNN (scripts/gen-cudnn.py).
#ifdef VMCUDA_WITH_CUDNN
#include "vmcuda/api/cudnn_wire.h"
#endif
