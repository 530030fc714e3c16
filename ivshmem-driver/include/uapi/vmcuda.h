/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * vmcuda.h - user-space interface of the vmcuda ivshmem driver (/dev/vmcudaN).
 *
 * One open file of /dev/vmcudaN owns one client slot of the vmrpc region that the
 * host stub serves through the ivshmem-doorbell device (PCI 1af4:1110):
 *
 *   open()   claims a free slot (SlotControl.state Free -> Claimed, owner_tag = pid)
 *            and rings the host on the slot's vector; -EBUSY when no slot is free,
 *            -ENODEV when the region header is not a vmrpc region (host stub not
 *            serving).
 *   mmap()   MAP_SHARED, offset 0, length <= region size: the whole shared region
 *            (BAR2), ordinary cacheable memory (atomics work).
 *   ioctl()  VMCUDA_IOC_INFO, VMCUDA_IOC_RING, VMCUDA_IOC_WAIT below.
 *   poll()   POLLIN (and POLLRDNORM) when the slot's MSI-X vector fired since the
 *            last VMCUDA_IOC_WAIT of this file; POLLERR | POLLHUP when the device
 *            is gone. poll() does not consume: call VMCUDA_IOC_WAIT with
 *            timeout_ns = 0 to take the event.
 *   close()  (also when the process dies; note that a mapping holds the file open
 *            until munmap) sets the slot to Closing and rings the host, which
 *            frees what the client owned and then marks the slot Free.
 *
 * Slot i receives interrupts on MSI-X vector i and rings the host's vector i, so a
 * file can only ever ring and wait on its own slot.
 *
 * Plain C with fixed-width types; usable from C and C++. Numbers never change: new
 * ioctls get new numbers, new struct fields go into the reserved words (which must
 * be zero on input).
 */
#ifndef _UAPI_VMCUDA_H
#define _UAPI_VMCUDA_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* Interface version reported in vmcuda_info.version. */
#define VMCUDA_UAPI_VERSION 1

/* ioctl type byte ("vmcuda"). */
#define VMCUDA_IOC_MAGIC 0xB7

/**
 * struct vmcuda_info - what VMCUDA_IOC_INFO reports about the device and this file.
 * @version:      VMCUDA_UAPI_VERSION of the driver.
 * @slot:         index of the slot this file owns (its MSI-X vector number).
 * @region_bytes: size of the shared region (BAR2): the most that mmap() maps.
 * @slot_count:   slots in the region (from its header).
 * @vectors:      MSI-X vectors the driver got; only slots below it are handed out.
 * @iv_position:  this VM's ivshmem peer id (BAR0 IVPosition register).
 * @host_peer_id: ivshmem peer id of the host stub (the doorbell target).
 * @reserved:     zero.
 */
struct vmcuda_info {
	__u32 version;
	__u32 slot;
	__u64 region_bytes;
	__u32 slot_count;
	__u32 vectors;
	__u32 iv_position;
	__u32 host_peer_id;
	__u64 reserved[4];
};

/* Wait without a time limit (until the vector fires or a signal arrives). */
#define VMCUDA_WAIT_FOREVER (~(__u64)0)

/**
 * struct vmcuda_wait - argument of VMCUDA_IOC_WAIT.
 * @timeout_ns: in: how long to sleep at most; 0 = do not sleep (just take a
 *              pending event); VMCUDA_WAIT_FOREVER = no limit.
 * @fired:      out: how many times the vector fired since the previous wait
 *              (>= 1 when the call returns 0).
 * @flags:      in: zero.
 * @reserved:   in: zero.
 *
 * Returns 0 when the slot's vector fired since the previous VMCUDA_IOC_WAIT of
 * this file (or since open()), -ETIMEDOUT when the time ran out first, -EINTR when a
 * signal came first (the call is not restarted), -ENODEV when the device is gone.
 */
struct vmcuda_wait {
	__u64 timeout_ns;
	__u64 fired;
	__u32 flags;
	__u32 reserved;
};

/* struct vmcuda_info (out). */
#define VMCUDA_IOC_INFO _IOR(VMCUDA_IOC_MAGIC, 0x01, struct vmcuda_info)
/*
 * Ring the host on this file's slot: the driver writes
 * (host_peer_id << 16) | slot to the Doorbell register. No argument.
 */
#define VMCUDA_IOC_RING _IO(VMCUDA_IOC_MAGIC, 0x02)
/* struct vmcuda_wait (in/out). */
#define VMCUDA_IOC_WAIT _IOWR(VMCUDA_IOC_MAGIC, 0x03, struct vmcuda_wait)

#endif /* _UAPI_VMCUDA_H */
