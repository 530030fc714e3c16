#!/bin/sh
# /test.sh of the vmrpc VM test: find the ivshmem device, run the probe.
d=$(find-ivshmem.sh) || { echo "no ivshmem device in the guest"; exit 2; }
echo "ivshmem at $d, BAR2 $(stat -c %s $d/resource2) bytes"
/bin/vmrpc_guest_probe "$d"
