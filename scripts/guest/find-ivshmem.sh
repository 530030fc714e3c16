#!/bin/sh
# find-ivshmem.sh [-a] [N]   (busybox sh; runs inside the guest)
#
# Prints the sysfs directory of the first ivshmem PCI device (vendor 0x1af4,
# device 0x1110), e.g. /sys/bus/pci/devices/0000:00:04.0, and exits 0; exits 1 if
# there is none. With N: the N-th such device (0-based). With -a: all of them.
# In that directory: resource0 (BAR0 registers, 256 B), resource2 (BAR2 shared
# memory; its size is the shared region's), enable, irq, msi_irqs/.
all=0
want=0
case ${1:-} in
    -a) all=1 ;;
    '') ;;
    *[!0-9]*) echo "usage: $0 [-a] [N]" >&2; exit 2 ;;
    *) want=$1 ;;
esac
i=0
found=1
for d in /sys/bus/pci/devices/*; do
    [ -r "$d/vendor" ] || continue
    [ "$(cat "$d/vendor")" = 0x1af4 ] || continue
    [ "$(cat "$d/device")" = 0x1110 ] || continue
    if [ "$all" = 1 ]; then
        echo "$d"; found=0
    elif [ "$i" = "$want" ]; then
        echo "$d"; exit 0
    fi
    i=$((i + 1))
done
exit $found
