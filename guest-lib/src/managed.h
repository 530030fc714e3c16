// __managed__ variables (docs/cuda-runtime-internals.md §1 "Managed variables"). nvcc's
// host code reaches a managed variable through a pointer slot (__cudaRegisterManagedVar's
// hostVarPtrAddress) that __cudaInitModule must fill. Here each variable gets a shadow, a
// block of the shared heap, and its slot points at it: the host code reads and writes the
// shadow, which is what cudaGetSymbolAddress gives and what the symbol calls are passed.
// Wherever the variable's module is loaded (a device), the variable is bound to the shadow
// on the host (ManagedVarBind), which keeps the two coherent at launches and synchronizing
// calls (host-stub/src/managed.cc). A shadow is never freed before the process ends: the
// host may write it until the process's slot closes.
#pragma once

#include <cstdint>

#include "remote.h"
#include "vgpu_db/module_registry.h"
#include "vmcuda/cudart_types.h"

namespace vmcuda::guest {

/// A managed variable as bound on one device.
struct ManagedBinding {
  uint64_t var = 0;    ///< the host's handle (ManagedVarSync)
  uint64_t ptr = 0;    ///< the variable's device address: where symbol copies go
  uint64_t bytes = 0;
};

/// Binds the managed variables of module `m`, loaded on the calling thread's device as the
/// host's `module`, that are not bound there yet; each gets its shadow the first time, and
/// its slot points at it. Precondition: r's lock held.
cudaError_t bind_managed(Remote& r, const vgpu_db::Module& m, uint64_t module);

/// __cudaInitModule's work: loads `m` on the calling thread's device and binds its managed
/// variables. Takes r's lock.
cudaError_t init_managed(const vgpu_db::Module& m);

/// The managed variable whose shadow starts at `symbol` (what the host code passes as a
/// symbol), or nullptr.
const vgpu_db::Variable* find_managed(const void* symbol) noexcept;

/// `v`'s binding on the calling thread's device, loading its module there first.
/// Precondition: r's lock held.
cudaError_t managed_binding(Remote& r, const vgpu_db::Variable& v, ManagedBinding* out);

/// Queues (pull: runs) ManagedVarSync of binding `var` on wire stream `stream`: the guest's
/// writes to the shadow reach the variable, ordered there; with `pull` the variable's value
/// then comes back into the shadow. Takes r's lock.
cudaError_t sync_managed(uint64_t var, uint64_t stream, bool pull);

/// Forgets module `m`'s managed variables (it is being unregistered); their shadows stay.
void forget_managed(const vgpu_db::Module* m) noexcept;

}  // namespace vmcuda::guest
