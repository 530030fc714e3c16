// cuGetExportTable: the driver's private tables that NVIDIA's own CUDA runtime (the static
// libcudart_static.a that `nvcc app.cu` links, and NVIDIA's libcudart.so.13) asks for at
// start-up, looked up by UUID. What each table and entry is, and how that was learned from
// public open-source implementations: docs/driver-export-tables.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "vmcuda/cuda_driver_types.h"

namespace vmcuda::guest {

/// Runs and forgets the context-local storage destructors of `ctx` (table c693336e...):
/// cuCtxDestroy calls it for the context it destroys, cuDevicePrimaryCtxReset for the
/// device's primary context, before their resources go. Call with no lock held: the
/// destructors are the application's (the runtime's) code and call back into the driver.
void run_context_storage_destructors(CUcontext ctx) noexcept;

namespace export_tables {

/// MD2 (RFC 1319) in the 66-byte layout the integrity check is described with (ZLUDA's
/// dark_api): X[48] (state, block, state ^ block), C[16] (checksum), n (bytes of the block
/// so far), L (last checksum byte). Exposed for its unit test (tests/guest-lib).
struct Md2 {
  uint8_t x[48] = {};
  uint8_t c[16] = {};
  uint8_t n = 0;
  uint8_t l = 0;
  void update(const void* data, size_t size, uint8_t xor_mask = 0) noexcept;
  std::array<uint8_t, 16> finish() noexcept;
};
static_assert(sizeof(Md2) == 66);

/// What the integrity check hashes: the 48 bytes of its first message part, in this order.
struct IntegrityInputs {
  uint32_t driver_version;     // what cuDriverGetVersion answers
  uint32_t version;            // the runtime's argument
  uint32_t pid;                // getpid()
  uint32_t tid;                // pthread_self(), its low 32 bits
  const void* cudart_table;    // the address of table 6bd5fb6c... as handed out
  const void* integrity_table; // the address of table d4082055... as handed out
  const void* function;        // its entry 1 (the integrity check function)
  uint64_t unix_seconds;       // the runtime's argument
};
static_assert(sizeof(IntegrityInputs) == 48);

/// Then, per device in ordinal order, 28 bytes: what cuDeviceGetUuid and cuDeviceGetAttribute
/// (PCI domain, bus, device) answer.
struct DeviceIds {
  unsigned char uuid[16];
  int32_t pci_domain;
  int32_t pci_bus;
  int32_t pci_device;
};
static_assert(sizeof(DeviceIds) == 28);

/// The answer of the integrity check: HMAC-MD2 under a fixed 16-byte key over the inputs and
/// the devices; for a version whose last decimal digit is 0 or 1, fixed values.
std::array<uint64_t, 2> integrity_answer(const IntegrityInputs& in, std::span<const DeviceIds> devices) noexcept;

}  // namespace export_tables
}  // namespace vmcuda::guest
