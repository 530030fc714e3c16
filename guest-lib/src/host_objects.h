// The host's side of this process's modules: a module's fatbin is shipped to vmcuda-stub
// once per device, at its first use (a launch, a symbol, a function attribute), and the
// host's handles of the module, its kernels and its variables are kept here per device,
// with what the host answered about them (parameter layouts, addresses and sizes,
// function attributes, occupancy), so that later uses answer locally
// (docs/cuda-runtime-internals.md §1, §7).
//
// Locking: callers hold the Remote's lock (every use of the slot does); the tables have
// their own leaf lock as well, because __cudaUnregisterFatBinary (forget_module) runs at
// exit without the Remote. A pointer handed out stays valid until its module is forgotten;
// an application that unregisters a module while another thread uses its kernels is
// undefined in CUDA too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "remote.h"
#include "vgpu_db/module_registry.h"
#include "vmcuda/api/wire.h"
#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

/// A kernel as loaded on one device.
struct HostKernel {
  uint64_t handle = 0;                  ///< the host's function handle
  std::vector<api::ParamInfo> params;   ///< cuFuncGetParamInfo's layout
  uint32_t arg_bytes = 0;               ///< end of the last parameter
  /// cudaFuncGetAttributes' answer (every CUfunction_attribute), once asked.
  std::optional<api::FuncAttributesReply> attributes;
  /// Occupancy answers: (block size, dynamic shared bytes, flags) -> blocks per multiprocessor.
  std::map<std::tuple<int, uint64_t, unsigned>, int> occupancy;
};

/// A module variable (__device__, __constant__) as loaded on one device.
struct HostGlobal {
  uint64_t ptr = 0;    ///< its device address (cuModuleGetGlobal)
  uint64_t bytes = 0;  ///< its size
};

/// The kernel `func` names: a host stub (what <<<>>>, cudaLaunchKernel and
/// cudaFuncGetAttributes are given) or a cudaKernel_t (__cudaGetKernel's handle); nullptr
/// when it is neither.
const vgpu_db::Function* find_kernel(const void* func) noexcept;
/// A driver-API kernel object given to a runtime call (a cudaKernel_t from
/// cudaLibraryGetKernel, a CUfunction), on the calling thread's device (its library's module
/// is loaded there at first use: call it without the Remote's lock).
/// cudaErrorInvalidDeviceFunction when `func` is none (driver_module.cc).
cudaError_t driver_kernel(const void* func, HostKernel** out) noexcept;

/// The registered kernel whose host handle on the calling thread's device is `handle` (what
/// a graph's kernel node names): its host stub and its HostKernel; nullptr when none.
const void* kernel_of_handle(uint64_t handle, const HostKernel** k) noexcept;
/// The same for the driver API's kernels: the live CUfunction whose host handle that is
/// (driver_module.cc); nullptr when none.
const void* driver_function_of_handle(uint64_t handle, const HostKernel** k) noexcept;

/// Preconditions for the three below: r's lock held. Each is per the calling thread's
/// device (Remote::thread_device), and a round trip only the first time.

/// The host's handle of module `m`, shipping its fatbin on first use.
cudaError_t load_module(Remote& r, const vgpu_db::Module& m, uint64_t* handle);
/// Kernel `f` on the host: its handle and parameter layout (loading its module first).
cudaError_t host_kernel(Remote& r, const vgpu_db::Function& f, HostKernel** out);
/// Variable `v` on the host: its address and size (loading its module first). The storage
/// joins the process's AllocationMap as Allocation::kModuleGlobal, so copies may name it.
/// A variable the module does not have is cudaErrorInvalidSymbol.
cudaError_t host_global(Remote& r, const vgpu_db::Variable& v, HostGlobal* out);

/// Kernel attributes and occupancy (function.cc), for the runtime's cudaFunc*/cudaOccupancy*
/// and the driver's cuFunc*/cuKernel*/cuOccupancy* alike. Preconditions: r's lock held, `k`
/// on the calling thread's device. Answers are kept with the kernel.
/// cuFuncGetAttribute's every value, asked once.
cudaError_t kernel_attributes(Remote& r, HostKernel& k, const api::FuncAttributesReply** out);
/// A settable attribute (cudaFuncAttribute == CUfunction_attribute numbers), checked as the
/// driver checks it, then queued.
cudaError_t set_kernel_attribute(Remote& r, HostKernel& k, int attr, int value);
/// The dynamic shared memory a block may have with `blocks` blocks per multiprocessor
/// (cuOccupancyAvailableDynamicSMemPerBlock); asked each time.
cudaError_t kernel_available_shared(Remote& r, HostKernel& k, int blocks, int block_size, size_t* bytes);
/// Clusters that fit at once (cuOccupancyMaxActiveClusters) for a configuration whose
/// attributes translate_attributes made; asked each time.
cudaError_t kernel_max_clusters(Remote& r, HostKernel& k, dim3 grid, dim3 block, size_t shared,
                                const std::vector<api::LaunchAttribute>& attrs, int* clusters);
/// The largest cluster size for that configuration (cuOccupancyMaxPotentialClusterSize).
cudaError_t kernel_max_cluster_size(Remote& r, HostKernel& k, dim3 grid, dim3 block, size_t shared,
                                    const std::vector<api::LaunchAttribute>& attrs, int* size);
/// Blocks per multiprocessor (cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags).
cudaError_t kernel_occupancy(Remote& r, HostKernel& k, int block_size, size_t shared, unsigned flags, int* blocks);

/// cudaLaunchKernelExC's attributes as the wire carries them (launch.cc): the ones vmcuda
/// forwards, checked; cudaLaunchAttributeIgnore dropped; the others 801 (logged once) or
/// cudaErrorInvalidValue. cuLaunchKernelEx's CUlaunchAttribute has the same layout and ids.
cudaError_t translate_attributes(const cudaLaunchConfig_t& config, std::vector<api::LaunchAttribute>* out,
                                 bool* cooperative);

/// cuMemsetD16/D32[Async] on device memory `dst` (memory_async.cc): one queued call of
/// `width`-byte elements; synchronous unless `async` (per_thread: on the thread's stream).
/// Pinned, managed or registered host memory too (memset_host_async; synchronous: waited for).
cudaError_t memset_elements(uint64_t dst, uint32_t value, unsigned width, uint64_t bytes, cudaStream_t stream,
                            bool per_thread, bool async);
/// A memset of pinned, managed or registered host memory [p, p+bytes) in `width`-byte elements
/// on wire stream `s` (memory_async.cc); cudaErrorInvalidValue for other memory.
cudaError_t memset_host_async(void* p, uint32_t value, unsigned width, uint64_t bytes, uint64_t s);
/// Its 2D form: `height` rows of `width` bytes, `pitch` bytes apart, in `element`-byte elements
/// (1, 2 or 4), on wire stream `s`; nothing to set (a width or height of 0) is success.
cudaError_t memset_host_2d_async(void* p, uint64_t pitch, uint32_t value, unsigned element, uint64_t width,
                                 uint64_t height, uint64_t s);

/// The launch configuration errors CUDA reports at once, without a round trip (launch.cc):
/// cudaErrorInvalidValue for a grid or block the calling thread's device refuses.
cudaError_t check_launch_configuration(const Remote& r, dim3 grid, dim3 block);

/// Forgets what the host holds of module `m` on every device (it is being unregistered):
/// its handles, kernels and variables, and its variables' entries in the AllocationMap.
/// The host keeps the module loaded until the process's slot closes.
void forget_module(const vgpu_db::Module* m) noexcept;

}  // namespace vmcuda::guest
