// Calls the driver VM test adds to the test service (tests/support/test_service.h),
// shared by the guest program (driver_guest_probe.cc) and the host side
// (tests/vmrpc/qemu_driver_test.cc).
#pragma once

#include <cstdint>

namespace vmrpc::testing {

// No arguments -> DriverHostView: what the host sees of the region right now.
inline constexpr uint32_t kDriverHostView = 0x1f0;

inline constexpr uint32_t kDriverViewMaxSlots = 16;

struct DriverHostView {
  uint64_t opened;        // slots the service opened so far
  uint64_t closed;        // slots the service closed so far (client closed or died)
  uint32_t slot_count;
  uint32_t asking_slot;   // the slot this call came from
  uint32_t state[kDriverViewMaxSlots];       // SlotControl.state of each slot
  uint32_t owner_tag[kDriverViewMaxSlots];   // SlotControl.owner_tag of each slot
};
static_assert(sizeof(DriverHostView) == 24 + 8 * kDriverViewMaxSlots);

}  // namespace vmrpc::testing
