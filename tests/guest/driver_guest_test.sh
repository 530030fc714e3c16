#!/bin/sh
# /test.sh of the driver VM test (tests/vmrpc/qemu_driver_test.cc): load vmcuda.ko,
# run the probe against /dev/vmcuda0 with sleeping waits only, unplug/rescan the
# device under an open file, unload the module, and fail on any kernel oops/BUG/WARN.
d=$(find-ivshmem.sh) || { echo "no ivshmem device in the guest"; exit 2; }
echo "ivshmem at $d, BAR2 $(stat -c %s $d/resource2) bytes"
insmod /lib/modules/vmcuda.ko || { echo "insmod vmcuda.ko failed"; dmesg | tail -n 20; exit 20; }
i=0
while [ ! -c /dev/vmcuda0 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -c /dev/vmcuda0 ] || { echo "no /dev/vmcuda0 after insmod"; dmesg | tail -n 20; exit 21; }
dmesg | grep -i vmcuda
echo "slab poisoning (kmalloc-256): $(cat /sys/kernel/slab/kmalloc-256/poison 2>/dev/null || echo off)"

# Every reply must be waited for by sleeping on the slot's MSI-X vector.
export VMRPC_GUEST_SPIN_NS=0
/bin/driver_guest_probe main /dev/vmcuda0
rc=$?
grep vmcuda /proc/interrupts
if [ $rc = 0 ]; then
    /bin/driver_guest_probe unplug /dev/vmcuda0 "$d"
    rc=$?
fi
if [ $rc = 0 ]; then
    rmmod vmcuda || { echo "rmmod vmcuda failed"; rc=22; }
    [ -e /dev/vmcuda0 ] && { echo "/dev/vmcuda0 still there after rmmod"; rc=23; }
fi
if dmesg | grep -E 'Oops|(^|[^A-Za-z])BUG[: ]|Call Trace|WARNING:'; then
    echo "kernel complained (see above)"
    [ $rc = 0 ] && rc=24
fi
echo "--- dmesg (vmcuda)"
dmesg | grep -i vmcuda | tail -n 30
exit $rc
