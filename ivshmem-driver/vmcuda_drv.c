// SPDX-License-Identifier: GPL-2.0
/*
 * vmcuda_drv.c - guest driver for the ivshmem-doorbell PCI device (1af4:1110) that
 * carries vmcuda's vmrpc channel between a KVM guest and the host's vmcuda-stub.
 *
 * Per device it creates /dev/vmcudaN. Each open file owns one client slot of the
 * shared region (claimed with the same CAS protocol user space uses, see
 * vmrpc/include/vmrpc/wire.h), may map the whole region (BAR2), ring the host on its
 * own slot's vector only, and sleep or poll on its own slot's MSI-X vector. Closing
 * the file (also when its process dies) marks the slot Closing and rings the host,
 * which frees what the client owned and hands the slot back (Free).
 *
 * The user-space interface is include/uapi/vmcuda.h.
 *
 * Locking:
 *  - vmcuda_dev.lock (mutex): slot ownership (busy bitmap), the open-file list,
 *    the cached region layout, and "gone" transitions; taken by open, release,
 *    mmap and remove.
 *  - vmcuda_dev.hw_lock (rw_semaphore): read side around every BAR0 register access
 *    that can race with remove (RING, INFO); remove takes it for writing to set
 *    "gone" before it unmaps anything.
 *  - WAIT and poll touch only the per-vector counters and wait queues, which live as
 *    long as vmcuda_dev (every open file holds a reference on it).
 */
#include <linux/atomic.h>
#include <linux/cdev.h>
#include <linux/compat.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/poll.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <linux/wait.h>

#include "uapi/vmcuda.h"

#define VMCUDA_NAME "vmcuda"
#define VMCUDA_MAX_DEVICES 64

/* ivshmem BAR0 registers (32-bit accesses only). */
#define IVSHMEM_REG_IVPOSITION 8
#define IVSHMEM_REG_DOORBELL 12
#define IVSHMEM_REGS_BYTES 16
/* QEMU takes only the low 8 bits of a Doorbell write as the vector number. */
#define IVSHMEM_MAX_DOORBELL_VECTORS 256

/*
 * The parts of the vmrpc wire ABI (vmrpc/include/vmrpc/wire.h) the driver reads.
 * Offsets are fixed by that ABI and checked below.
 */
#define VMRPC_REGION_MAGIC 0x564d525043000001ULL
#define VMRPC_ABI_VERSION 1
#define VMRPC_PAGE_BYTES 4096u
#define VMRPC_MAX_SLOTS 2048u

struct vmrpc_region_header {
	__le64 magic;
	__le32 abi_version;
	__le32 header_bytes;
	__le64 region_bytes;
	__le32 slot_count;
	__le32 slot_bytes;
	__le64 slots_offset;
	__le64 heap_table_offset;
	__le64 heap_offset;
	__le64 heap_bytes;
	__le32 heap_page_bytes;
	__le32 host_peer_id;
	__le32 guest_peer_id;
	__le32 reserved0;
	__le64 host_epoch;
	__u8 reserved[56];
};
static_assert(sizeof(struct vmrpc_region_header) == 144);
static_assert(offsetof(struct vmrpc_region_header, slot_count) == 24);
static_assert(offsetof(struct vmrpc_region_header, host_peer_id) == 68);

/* The guest-written head of a slot's control page. */
struct vmrpc_slot_control {
	u32 state;          /* enum vmrpc_slot_state */
	u32 guest_sleeping;
	u64 request_seq;
	u32 request_bytes;
	u32 owner_tag;      /* claimer's pid: diagnostics only */
};
static_assert(offsetof(struct vmrpc_slot_control, owner_tag) == 20);

enum vmrpc_slot_state {
	VMRPC_SLOT_FREE = 0,
	VMRPC_SLOT_CLAIMED = 1,
	VMRPC_SLOT_CLOSING = 2,
};

/**
 * struct vmcuda_layout - what the driver keeps from a validated region header.
 * @slot_count:   slots in the region.
 * @slot_bytes:   bytes per slot (control page first).
 * @slots_offset: offset of slot 0 from the start of the region.
 * @host_peer_id: ivshmem peer id of the host stub: the doorbell target.
 */
struct vmcuda_layout {
	u32 slot_count;
	u32 slot_bytes;
	u64 slots_offset;
	u32 host_peer_id;
};

/**
 * struct vmcuda_vec - one MSI-X vector (= one slot's "host rang us" line).
 * @count: times the vector fired since probe.
 * @wq:    WAIT and poll sleep here.
 * @irq:   Linux irq number, 0 while not requested.
 * @name:  irq name shown in /proc/interrupts.
 */
struct vmcuda_vec {
	atomic64_t count;
	wait_queue_head_t wq;
	int irq;
	char name[24];
};

/**
 * struct vmcuda_dev - one ivshmem-doorbell device and its /dev/vmcudaN.
 * @dev:        the char device's struct device; its release frees this struct,
 *              so every open file keeps the structure alive (not the hardware).
 * @cdev:       /dev/vmcudaN.
 * @pdev:       the PCI device.
 * @minor:      N of /dev/vmcudaN.
 * @regs:       BAR0 (IVPosition, Doorbell).
 * @shm_phys:   bus address of BAR2 (the shared region).
 * @shm_len:    size of BAR2.
 * @shm:        kernel mapping of BAR2 (write-back: it is RAM on the host side).
 * @nvec:       MSI-X vectors allocated.
 * @vecs:       @nvec vectors.
 * @lock:       see "Locking" at the top of the file.
 * @hw_lock:    see "Locking".
 * @gone:       the PCI device was removed: no hardware access any more.
 * @layout:     the region layout, valid when @layout_ok.
 * @layout_ok:  a header was validated at least once.
 * @busy:       slots owned by an open file of this driver (bitmap of @nvec bits).
 * @files:      open files (for remove).
 */
struct vmcuda_dev {
	struct device dev;
	struct cdev cdev;
	struct pci_dev *pdev;
	int minor;
	void __iomem *regs;
	phys_addr_t shm_phys;
	resource_size_t shm_len;
	void *shm;
	int nvec;
	struct vmcuda_vec *vecs;
	struct mutex lock;
	struct rw_semaphore hw_lock;
	bool gone;
	struct vmcuda_layout layout;
	bool layout_ok;
	unsigned long *busy;
	struct list_head files;
};

/**
 * struct vmcuda_file - per open file: the slot it owns.
 * @vd:   the device.
 * @file: the struct file (for unmapping at remove).
 * @node: in vmcuda_dev.files.
 * @slot: slot index = MSI-X vector index.
 * @seen: value of the vector's count at the last WAIT (or open).
 */
struct vmcuda_file {
	struct vmcuda_dev *vd;
	struct file *file;
	struct list_head node;
	u32 slot;
	atomic64_t seen;
};

static dev_t vmcuda_devt;
static struct class *vmcuda_class;
static DEFINE_IDA(vmcuda_ida);

static struct vmrpc_slot_control *vmcuda_slot_ctl(struct vmcuda_dev *vd, u32 slot)
{
	return (struct vmrpc_slot_control *)((u8 *)vd->shm + vd->layout.slots_offset +
					     (u64)slot * vd->layout.slot_bytes);
}

/**
 * vmcuda_slot_cas() - move a slot's state from @from to @to, if it is @from.
 * @ctl:  the slot's control page.
 * @from: expected state.
 * @to:   new state.
 *
 * Reads first and attempts the compare-and-swap only when the state is @from. A
 * failing x86 CMPXCHG writes the old value back; an emulator that runs it as
 * load + store (QEMU TCG with one vCPU does) could then undo a concurrent host
 * store (Closing -> Free). The host writes the state only when it is Closing, so a
 * CAS from Free or Claimed never races with it.
 *
 * Return: the state seen (@from on success).
 */
static u32 vmcuda_slot_cas(struct vmrpc_slot_control *ctl, u32 from, u32 to)
{
	u32 seen = READ_ONCE(ctl->state);

	if (seen != from)
		return seen;
	return cmpxchg(&ctl->state, from, to);
}

/**
 * vmcuda_usable_slots() - how many slots this driver can hand out.
 * @vd: the device, with a valid layout.
 *
 * Slot i needs MSI-X vector i, and QEMU's Doorbell register addresses only 256
 * vectors.
 *
 * Return: min(slot_count, vectors, 256).
 */
static u32 vmcuda_usable_slots(const struct vmcuda_dev *vd)
{
	u32 n = vd->layout.slot_count;

	n = min_t(u32, n, vd->nvec);
	return min_t(u32, n, IVSHMEM_MAX_DOORBELL_VECTORS);
}

/**
 * vmcuda_read_layout() - read and check the vmrpc region header in BAR2.
 * @vd:  the device (lock held, not gone).
 * @out: the layout, on success.
 *
 * The host stub writes the header before QEMU gets the memory. The host is trusted
 * here, but a region that is not a vmrpc region (another ivshmem server, or the
 * stub not serving) must be refused clearly rather than corrupted.
 *
 * Return: 0, or -ENODEV with a log line saying what is wrong.
 */
static int vmcuda_read_layout(struct vmcuda_dev *vd, struct vmcuda_layout *out)
{
	struct vmrpc_region_header h;
	u64 magic, region_bytes, slots_offset, slots_end;
	u32 abi, header_bytes, slot_count, slot_bytes, host_peer_id;

	if (vd->shm_len < VMRPC_PAGE_BYTES) {
		dev_err_ratelimited(&vd->dev, "shared memory (BAR2) is only %llu bytes: not a vmrpc region\n",
				    (unsigned long long)vd->shm_len);
		return -ENODEV;
	}
	/* One copy, then checks on the copy. */
	memcpy(&h, vd->shm, sizeof(h));
	magic = le64_to_cpu(h.magic);
	abi = le32_to_cpu(h.abi_version);
	header_bytes = le32_to_cpu(h.header_bytes);
	region_bytes = le64_to_cpu(h.region_bytes);
	slot_count = le32_to_cpu(h.slot_count);
	slot_bytes = le32_to_cpu(h.slot_bytes);
	slots_offset = le64_to_cpu(h.slots_offset);
	host_peer_id = le32_to_cpu(h.host_peer_id);

	if (magic != VMRPC_REGION_MAGIC) {
		dev_err_ratelimited(&vd->dev,
				    "shared memory has no vmrpc header (magic %#llx, want %#llx): is the vmcuda host stub serving this VM's ivshmem socket?\n",
				    (unsigned long long)magic, (unsigned long long)VMRPC_REGION_MAGIC);
		return -ENODEV;
	}
	if (abi != VMRPC_ABI_VERSION) {
		dev_err_ratelimited(&vd->dev, "host speaks vmrpc ABI %u, this driver %u: install matching versions\n",
				    abi, VMRPC_ABI_VERSION);
		return -ENODEV;
	}
	if (header_bytes < sizeof(h) || region_bytes != vd->shm_len || slot_count == 0 ||
	    slot_count > VMRPC_MAX_SLOTS || slot_bytes < 2 * VMRPC_PAGE_BYTES ||
	    slot_bytes % VMRPC_PAGE_BYTES || slots_offset < VMRPC_PAGE_BYTES ||
	    slots_offset % VMRPC_PAGE_BYTES || slots_offset > region_bytes || host_peer_id > 0xffff) {
		dev_err_ratelimited(&vd->dev,
				    "bad vmrpc region header: header %u B, region %llu B (BAR2 %llu B), %u slots of %u B at %#llx, host peer %u\n",
				    header_bytes, (unsigned long long)region_bytes,
				    (unsigned long long)vd->shm_len, slot_count, slot_bytes,
				    (unsigned long long)slots_offset, host_peer_id);
		return -ENODEV;
	}
	/* slot_count <= 2048 and slot_bytes < 2^32: no overflow. */
	slots_end = slots_offset + (u64)slot_count * slot_bytes;
	if (slots_end > region_bytes) {
		dev_err_ratelimited(&vd->dev, "bad vmrpc region header: slots end at %#llx, region is %#llx bytes\n",
				    (unsigned long long)slots_end, (unsigned long long)region_bytes);
		return -ENODEV;
	}
	out->slot_count = slot_count;
	out->slot_bytes = slot_bytes;
	out->slots_offset = slots_offset;
	out->host_peer_id = host_peer_id;
	return 0;
}

/**
 * vmcuda_check_layout() - validate the header and cache its layout.
 * @vd: the device (lock held, not gone).
 *
 * Called at probe (to report) and at every open (the header may appear after probe,
 * e.g. when the stub was not serving yet). While files are open the layout must not
 * change.
 *
 * Return: 0, -ENODEV (no valid header) or -EIO (layout changed under open files).
 */
static int vmcuda_check_layout(struct vmcuda_dev *vd)
{
	struct vmcuda_layout l;
	int ret;

	ret = vmcuda_read_layout(vd, &l);
	if (ret)
		return ret;
	if (vd->layout_ok && memcmp(&l, &vd->layout, sizeof(l))) {
		if (!list_empty(&vd->files)) {
			dev_err_ratelimited(&vd->dev, "region layout changed while files are open\n");
			return -EIO;
		}
		dev_info(&vd->dev, "region layout changed\n");
	}
	if (!vd->layout_ok || memcmp(&l, &vd->layout, sizeof(l))) {
		vd->layout = l;
		vd->layout_ok = true;
		dev_info(&vd->dev, "vmrpc region %llu MiB, %u slots (%u usable), host peer %u\n",
			 (unsigned long long)(vd->shm_len >> 20), l.slot_count, vmcuda_usable_slots(vd),
			 l.host_peer_id);
	}
	return 0;
}

/**
 * vmcuda_ring() - write the Doorbell: ring the host's vector @slot.
 * @vd:   the device.
 * @slot: the caller's own slot.
 *
 * Everything the caller wrote to the region must be visible before the host is
 * woken: full barrier before the (uncached) register write.
 *
 * Return: 0 or -ENODEV.
 */
static int vmcuda_ring(struct vmcuda_dev *vd, u32 slot)
{
	int ret = 0;

	down_read(&vd->hw_lock);
	if (vd->gone) {
		ret = -ENODEV;
	} else {
		mb();
		iowrite32((vd->layout.host_peer_id << 16) | slot, vd->regs + IVSHMEM_REG_DOORBELL);
	}
	up_read(&vd->hw_lock);
	return ret;
}

static irqreturn_t vmcuda_irq(int irq, void *data)
{
	struct vmcuda_vec *v = data;

	atomic64_inc(&v->count);
	wake_up_all(&v->wq);
	return IRQ_HANDLED;
}

/* ------------------------------------------------------------------ file ops */

/**
 * vmcuda_open() - claim a free slot for this file.
 * @inode: the /dev/vmcudaN inode.
 * @file:  the new file.
 *
 * Free -> Claimed with a compare-and-swap on SlotControl.state (the host and
 * driverless user-space clients use the same protocol), owner_tag = pid, then ring
 * the host on the slot's vector so that it starts serving it.
 *
 * Return: 0, -EBUSY (no free slot), -ENODEV (no vmrpc region, device gone),
 * -ENOMEM.
 */
static int vmcuda_open(struct inode *inode, struct file *file)
{
	struct vmcuda_dev *vd = container_of(inode->i_cdev, struct vmcuda_dev, cdev);
	struct vmcuda_file *vf;
	u32 i, n;
	int ret;

	vf = kzalloc(sizeof(*vf), GFP_KERNEL);
	if (!vf)
		return -ENOMEM;
	get_device(&vd->dev);
	vf->vd = vd;
	vf->file = file;

	mutex_lock(&vd->lock);
	ret = -ENODEV;
	if (vd->gone)
		goto fail;
	ret = vmcuda_check_layout(vd);
	if (ret)
		goto fail;
	ret = -EBUSY;
	n = vmcuda_usable_slots(vd);
	for (i = 0; i < n; i++) {
		struct vmrpc_slot_control *ctl;

		if (test_bit(i, vd->busy))
			continue;
		ctl = vmcuda_slot_ctl(vd, i);
		if (vmcuda_slot_cas(ctl, VMRPC_SLOT_FREE, VMRPC_SLOT_CLAIMED) != VMRPC_SLOT_FREE)
			continue;
		WRITE_ONCE(ctl->owner_tag, (u32)task_tgid_vnr(current));
		__set_bit(i, vd->busy);
		vf->slot = i;
		atomic64_set(&vf->seen, atomic64_read(&vd->vecs[i].count));
		list_add(&vf->node, &vd->files);
		ret = 0;
		break;
	}
	mutex_unlock(&vd->lock);
	if (ret)
		goto out;
	file->private_data = vf;
	nonseekable_open(inode, file);
	/* Tell the host a client claimed the slot (wire.h: "then rings the slot's doorbell"). */
	vmcuda_ring(vd, vf->slot);
	return 0;

fail:
	mutex_unlock(&vd->lock);
out:
	put_device(&vd->dev);
	kfree(vf);
	return ret;
}

/**
 * vmcuda_release() - the last reference to the file went (close, exit, or death).
 * @inode: the inode.
 * @file:  the file.
 *
 * Claimed -> Closing and ring the host, which frees what the client owned and then
 * sets the slot Free. If user space already closed the slot (Closing, or even Free
 * again) nothing is taken from anyone: the CAS only moves our own Claimed slot; a
 * Closing slot gets one more ring (harmless), a Free one none.
 *
 * Return: 0.
 */
static int vmcuda_release(struct inode *inode, struct file *file)
{
	struct vmcuda_file *vf = file->private_data;
	struct vmcuda_dev *vd = vf->vd;
	bool ring = false;

	mutex_lock(&vd->lock);
	list_del(&vf->node);
	if (!vd->gone) {
		struct vmrpc_slot_control *ctl = vmcuda_slot_ctl(vd, vf->slot);
		u32 old = vmcuda_slot_cas(ctl, VMRPC_SLOT_CLAIMED, VMRPC_SLOT_CLOSING);

		ring = old == VMRPC_SLOT_CLAIMED || old == VMRPC_SLOT_CLOSING;
	}
	__clear_bit(vf->slot, vd->busy);
	mutex_unlock(&vd->lock);
	if (ring)
		vmcuda_ring(vd, vf->slot);
	put_device(&vd->dev);
	kfree(vf);
	return 0;
}

/* A mapping of a removed device: nothing behind it any more. */
static vm_fault_t vmcuda_vm_fault(struct vm_fault *vmf)
{
	return VM_FAULT_SIGBUS;
}

static const struct vm_operations_struct vmcuda_vm_ops = {
	.fault = vmcuda_vm_fault,
};

/**
 * vmcuda_mmap() - map the shared region (BAR2).
 * @file: the file.
 * @vma:  MAP_SHARED, offset and length within BAR2 (vm_iomap_memory checks them).
 *
 * The mapping keeps the default (write-back) page protection: the region is RAM on
 * the host side, and clients use atomics and spin on it.
 *
 * Return: 0, -EINVAL (private mapping, offset or length outside BAR2), -ENODEV.
 */
static int vmcuda_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct vmcuda_file *vf = file->private_data;
	struct vmcuda_dev *vd = vf->vd;
	int ret;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	mutex_lock(&vd->lock);
	if (vd->gone) {
		ret = -ENODEV;
	} else {
		vma->vm_ops = &vmcuda_vm_ops;
		ret = vm_iomap_memory(vma, vd->shm_phys, vd->shm_len);
	}
	mutex_unlock(&vd->lock);
	return ret;
}

static long vmcuda_ioctl_info(struct vmcuda_file *vf, void __user *argp)
{
	struct vmcuda_dev *vd = vf->vd;
	struct vmcuda_info info;

	memset(&info, 0, sizeof(info));
	info.version = VMCUDA_UAPI_VERSION;
	info.slot = vf->slot;
	info.region_bytes = vd->shm_len;
	info.vectors = vd->nvec;
	down_read(&vd->hw_lock);
	if (vd->gone) {
		up_read(&vd->hw_lock);
		return -ENODEV;
	}
	/* The layout cannot change while this file is open (vmcuda_check_layout). */
	info.slot_count = vd->layout.slot_count;
	info.host_peer_id = vd->layout.host_peer_id;
	info.iv_position = ioread32(vd->regs + IVSHMEM_REG_IVPOSITION);
	up_read(&vd->hw_lock);
	if (copy_to_user(argp, &info, sizeof(info)))
		return -EFAULT;
	return 0;
}

static bool vmcuda_fired(struct vmcuda_file *vf, struct vmcuda_vec *v)
{
	return atomic64_read(&v->count) != atomic64_read(&vf->seen) || READ_ONCE(vf->vd->gone);
}

static long vmcuda_ioctl_wait(struct vmcuda_file *vf, void __user *argp)
{
	struct vmcuda_dev *vd = vf->vd;
	struct vmcuda_vec *v = &vd->vecs[vf->slot];
	struct vmcuda_wait w;
	long ret = 0;
	u64 now;

	if (copy_from_user(&w, argp, sizeof(w)))
		return -EFAULT;
	if (w.flags || w.reserved)
		return -EINVAL;
	if (w.timeout_ns == 0) {
		if (!vmcuda_fired(vf, v))
			ret = -ETIMEDOUT;
	} else if (w.timeout_ns == VMCUDA_WAIT_FOREVER) {
		if (wait_event_interruptible(v->wq, vmcuda_fired(vf, v)))
			ret = -EINTR;
	} else {
		ktime_t t = w.timeout_ns > (u64)KTIME_MAX ? KTIME_MAX : ns_to_ktime(w.timeout_ns);

		ret = wait_event_interruptible_hrtimeout(v->wq, vmcuda_fired(vf, v), t);
		if (ret == -ETIME)
			ret = -ETIMEDOUT;
		else if (ret)
			ret = -EINTR;
	}
	if (READ_ONCE(vd->gone))
		return -ENODEV;
	if (ret)
		return ret;
	/* Take the events (another thread waiting on this file may have taken them). */
	now = atomic64_read(&v->count);
	w.fired = now - atomic64_xchg(&vf->seen, now);
	if (copy_to_user(argp, &w, sizeof(w)))
		return -EFAULT;
	return 0;
}

/**
 * vmcuda_ioctl() - VMCUDA_IOC_INFO, VMCUDA_IOC_RING, VMCUDA_IOC_WAIT.
 * @file: the file.
 * @cmd:  the command; its size and direction bits must match exactly.
 * @arg:  user pointer (INFO, WAIT) or unused (RING).
 *
 * Return: 0 or a negative errno: -ENOTTY for commands that are not ours, -EINVAL
 * for one of our numbers with the wrong size/direction or bad fields, -EFAULT for
 * bad pointers, see uapi/vmcuda.h for the rest.
 */
static long vmcuda_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct vmcuda_file *vf = file->private_data;
	void __user *argp = (void __user *)arg;

	if (_IOC_TYPE(cmd) != VMCUDA_IOC_MAGIC)
		return -ENOTTY;
	switch (cmd) {
	case VMCUDA_IOC_INFO:
		return vmcuda_ioctl_info(vf, argp);
	case VMCUDA_IOC_RING:
		return vmcuda_ring(vf->vd, vf->slot);
	case VMCUDA_IOC_WAIT:
		return vmcuda_ioctl_wait(vf, argp);
	}
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(VMCUDA_IOC_INFO):
	case _IOC_NR(VMCUDA_IOC_RING):
	case _IOC_NR(VMCUDA_IOC_WAIT):
		return -EINVAL; /* ours, but the wrong size or direction */
	}
	return -ENOTTY;
}

/**
 * vmcuda_poll() - POLLIN when the slot's vector fired since the last WAIT.
 * @file: the file.
 * @wait: poll table.
 *
 * Return: EPOLLIN | EPOLLRDNORM, EPOLLERR | EPOLLHUP when the device is gone, or 0.
 */
static __poll_t vmcuda_poll(struct file *file, poll_table *wait)
{
	struct vmcuda_file *vf = file->private_data;
	struct vmcuda_vec *v = &vf->vd->vecs[vf->slot];

	poll_wait(file, &v->wq, wait);
	if (READ_ONCE(vf->vd->gone))
		return EPOLLERR | EPOLLHUP;
	if (atomic64_read(&v->count) != atomic64_read(&vf->seen))
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}

static const struct file_operations vmcuda_fops = {
	.owner = THIS_MODULE,
	.open = vmcuda_open,
	.release = vmcuda_release,
	.mmap = vmcuda_mmap,
	.unlocked_ioctl = vmcuda_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.poll = vmcuda_poll,
};

/* ------------------------------------------------------------------ PCI */

static void vmcuda_dev_release(struct device *dev)
{
	struct vmcuda_dev *vd = container_of(dev, struct vmcuda_dev, dev);

	if (vd->minor >= 0)
		ida_free(&vmcuda_ida, vd->minor);
	bitmap_free(vd->busy);
	kfree(vd->vecs);
	kfree(vd);
}

/* Undo what probe set up on the hardware (irqs, mappings, regions). */
static void vmcuda_hw_teardown(struct vmcuda_dev *vd)
{
	struct pci_dev *pdev = vd->pdev;
	int i;

	for (i = 0; i < vd->nvec; i++) {
		if (vd->vecs[i].irq > 0)
			free_irq(vd->vecs[i].irq, &vd->vecs[i]);
		vd->vecs[i].irq = 0;
	}
	if (vd->nvec > 0)
		pci_free_irq_vectors(pdev);
	if (vd->shm)
		memunmap(vd->shm);
	vd->shm = NULL;
	if (vd->regs)
		pci_iounmap(pdev, vd->regs);
	vd->regs = NULL;
	pci_clear_master(pdev);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
}

static int vmcuda_setup_irqs(struct vmcuda_dev *vd)
{
	struct pci_dev *pdev = vd->pdev;
	int want, got, i, ret;

	want = pci_msix_vec_count(pdev);
	if (want < 1) {
		dev_err(&pdev->dev,
			"no MSI-X: vmcuda needs an ivshmem-doorbell device with vectors >= 1 (not ivshmem-plain)\n");
		return -ENODEV;
	}
	/* Interrupts sent before MSI-X and bus mastering are on are dropped, not left pending. */
	pci_set_master(pdev);
	got = pci_alloc_irq_vectors(pdev, 1, want, PCI_IRQ_MSIX);
	if (got < 0) {
		dev_err(&pdev->dev, "cannot allocate MSI-X vectors: %d\n", got);
		return got;
	}
	vd->vecs = kcalloc(got, sizeof(*vd->vecs), GFP_KERNEL);
	vd->busy = bitmap_zalloc(got, GFP_KERNEL);
	if (!vd->vecs || !vd->busy) {
		pci_free_irq_vectors(pdev);
		return -ENOMEM;
	}
	vd->nvec = got;
	for (i = 0; i < got; i++) {
		struct vmcuda_vec *v = &vd->vecs[i];
		int irq = pci_irq_vector(pdev, i);

		atomic64_set(&v->count, 0);
		init_waitqueue_head(&v->wq);
		snprintf(v->name, sizeof(v->name), "vmcuda%d-%d", vd->minor, i);
		if (irq < 0)
			return irq;
		ret = request_irq(irq, vmcuda_irq, 0, v->name, v);
		if (ret) {
			dev_err(&pdev->dev, "request_irq(%d) for vector %d: %d\n", irq, i, ret);
			return ret;
		}
		v->irq = irq;
	}
	if (got < want)
		dev_warn(&pdev->dev, "got %d of %d MSI-X vectors: only slots below %d usable\n", got, want, got);
	return 0;
}

static int vmcuda_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct vmcuda_dev *vd;
	int ret;

	vd = kzalloc(sizeof(*vd), GFP_KERNEL);
	if (!vd)
		return -ENOMEM;
	vd->pdev = pdev;
	mutex_init(&vd->lock);
	init_rwsem(&vd->hw_lock);
	INIT_LIST_HEAD(&vd->files);
	device_initialize(&vd->dev); /* from here on put_device() frees vd */
	vd->dev.release = vmcuda_dev_release;
	vd->minor = ida_alloc_max(&vmcuda_ida, VMCUDA_MAX_DEVICES - 1, GFP_KERNEL);
	if (vd->minor < 0) {
		ret = vd->minor;
		dev_err(&pdev->dev, "more than %d vmcuda devices\n", VMCUDA_MAX_DEVICES);
		goto err_put;
	}
	vd->dev.class = vmcuda_class;
	vd->dev.parent = &pdev->dev;
	vd->dev.devt = MKDEV(MAJOR(vmcuda_devt), vd->minor);
	ret = dev_set_name(&vd->dev, VMCUDA_NAME "%d", vd->minor);
	if (ret)
		goto err_put;

	ret = pci_enable_device(pdev);
	if (ret)
		goto err_put;
	ret = pci_request_regions(pdev, VMCUDA_NAME);
	if (ret) {
		pci_disable_device(pdev);
		goto err_put;
	}
	ret = -ENODEV;
	if (!(pci_resource_flags(pdev, 0) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, 0) < IVSHMEM_REGS_BYTES ||
	    !(pci_resource_flags(pdev, 2) & IORESOURCE_MEM) || pci_resource_len(pdev, 2) == 0) {
		dev_err(&pdev->dev, "not an ivshmem device: BAR0 or BAR2 missing\n");
		goto err_hw;
	}
	ret = -ENOMEM;
	vd->regs = pci_iomap(pdev, 0, IVSHMEM_REGS_BYTES);
	if (!vd->regs)
		goto err_hw;
	vd->shm_phys = pci_resource_start(pdev, 2);
	vd->shm_len = pci_resource_len(pdev, 2);
	/* RAM on the host side: map it write-back so the driver's CAS is ordinary. */
	vd->shm = memremap(vd->shm_phys, vd->shm_len, MEMREMAP_WB);
	if (!vd->shm) {
		dev_err(&pdev->dev, "cannot map BAR2 (%llu bytes)\n", (unsigned long long)vd->shm_len);
		goto err_hw;
	}
	ret = vmcuda_setup_irqs(vd);
	if (ret)
		goto err_hw;

	mutex_lock(&vd->lock);
	/* Only to report: open() checks again (the stub may start serving later). */
	if (vmcuda_check_layout(vd))
		dev_warn(&pdev->dev, "no vmrpc region yet: opening /dev/" VMCUDA_NAME "%d fails until the host stub serves it\n",
			 vd->minor);
	mutex_unlock(&vd->lock);

	cdev_init(&vd->cdev, &vmcuda_fops);
	vd->cdev.owner = THIS_MODULE;
	ret = cdev_device_add(&vd->cdev, &vd->dev);
	if (ret) {
		dev_err(&pdev->dev, "cannot add /dev/" VMCUDA_NAME "%d: %d\n", vd->minor, ret);
		goto err_hw;
	}
	pci_set_drvdata(pdev, vd);
	dev_info(&pdev->dev, "/dev/%s: BAR2 %llu MiB, %d MSI-X vectors, IVPosition %u\n", dev_name(&vd->dev),
		 (unsigned long long)(vd->shm_len >> 20), vd->nvec, ioread32(vd->regs + IVSHMEM_REG_IVPOSITION));
	return 0;

err_hw:
	vmcuda_hw_teardown(vd);
err_put:
	put_device(&vd->dev);
	return ret;
}

static void vmcuda_remove(struct pci_dev *pdev)
{
	struct vmcuda_dev *vd = pci_get_drvdata(pdev);
	struct vmcuda_file *vf;
	int i;

	cdev_device_del(&vd->cdev, &vd->dev); /* no new opens */
	mutex_lock(&vd->lock);
	/*
	 * Open files lose their slots now: hand them to the host while the device is
	 * still reachable (their later release() touches nothing).
	 */
	list_for_each_entry(vf, &vd->files, node) {
		struct vmrpc_slot_control *ctl = vmcuda_slot_ctl(vd, vf->slot);
		u32 old = vmcuda_slot_cas(ctl, VMRPC_SLOT_CLAIMED, VMRPC_SLOT_CLOSING);

		if (old == VMRPC_SLOT_CLAIMED || old == VMRPC_SLOT_CLOSING)
			vmcuda_ring(vd, vf->slot);
	}
	down_write(&vd->hw_lock);
	WRITE_ONCE(vd->gone, true);
	up_write(&vd->hw_lock);
	/* Mappings of the region of open files go; touching them now gives SIGBUS. */
	list_for_each_entry(vf, &vd->files, node)
		unmap_mapping_range(vf->file->f_mapping, 0, 0, 1);
	mutex_unlock(&vd->lock);
	for (i = 0; i < vd->nvec; i++)
		wake_up_all(&vd->vecs[i].wq);
	vmcuda_hw_teardown(vd);
	pci_set_drvdata(pdev, NULL);
	put_device(&vd->dev); /* open files keep vd (not the hardware) until they close */
}

static const struct pci_device_id vmcuda_ids[] = {
	{ PCI_DEVICE(0x1af4, 0x1110) }, /* ivshmem (QEMU, Red Hat vendor id) */
	{ }
};
MODULE_DEVICE_TABLE(pci, vmcuda_ids);

static struct pci_driver vmcuda_pci_driver = {
	.name = VMCUDA_NAME,
	.id_table = vmcuda_ids,
	.probe = vmcuda_probe,
	.remove = vmcuda_remove,
};

static int __init vmcuda_init(void)
{
	int ret;

	ret = alloc_chrdev_region(&vmcuda_devt, 0, VMCUDA_MAX_DEVICES, VMCUDA_NAME);
	if (ret)
		return ret;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	vmcuda_class = class_create(VMCUDA_NAME);
#else
	vmcuda_class = class_create(THIS_MODULE, VMCUDA_NAME);
#endif
	if (IS_ERR(vmcuda_class)) {
		ret = PTR_ERR(vmcuda_class);
		goto err_region;
	}
	ret = pci_register_driver(&vmcuda_pci_driver);
	if (ret)
		goto err_class;
	return 0;

err_class:
	class_destroy(vmcuda_class);
err_region:
	unregister_chrdev_region(vmcuda_devt, VMCUDA_MAX_DEVICES);
	return ret;
}

static void __exit vmcuda_exit(void)
{
	pci_unregister_driver(&vmcuda_pci_driver);
	class_destroy(vmcuda_class);
	unregister_chrdev_region(vmcuda_devt, VMCUDA_MAX_DEVICES);
	ida_destroy(&vmcuda_ida);
}

module_init(vmcuda_init);
module_exit(vmcuda_exit);

MODULE_DESCRIPTION("vmcuda: ivshmem-doorbell driver for the vmrpc channel (/dev/vmcudaN)");
MODULE_AUTHOR("vmcuda authors");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
