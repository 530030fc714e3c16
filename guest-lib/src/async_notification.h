// Async notifications (cudaDeviceRegisterAsyncNotification, async_notification.cc): the
// allocation paths tell it when the VM's memory refused one.
#pragma once

#include <cstdint>

#include "remote.h"

namespace vmcuda::guest {

// Precondition: r's lock held, the calling thread's device the one that refused. An
// allocation of `bytes` on it failed for want of memory: when callbacks are registered for the
// device and `bytes` exceeds what the VM has left there (MemGetInfo: under a quota, the
// quota's), each gets cudaAsyncNotificationTypeOverBudget with the bytes above it.
void note_refused_allocation(Remote& r, int device, uint64_t bytes) noexcept;

}  // namespace vmcuda::guest
