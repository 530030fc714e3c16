#!/usr/bin/env bash
# boot-smoke.sh [BUILDDIR]   (default <repo>/build/guest)
#
# Fetches the Debian guest kernel, builds a busybox initramfs whose test prints
# `uname -r`, boots it under QEMU (no ivshmem device) and checks the exit code and
# the kernel version. Exit 77 (skip) when QEMU or busybox-static is missing.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
G=$REPO/scripts/guest
B=${1:-$REPO/build/guest}
mkdir -p "$B"
B=$(cd "$B" && pwd)

if ! command -v "${VMCUDA_QEMU:-qemu-system-x86_64}" >/dev/null 2>&1; then
    echo "SKIP: qemu-system-x86_64 not found (apt-get install $(tr '\n' ' ' < "$G/packages.txt"))"
    exit 77
fi
if [ ! -x /bin/busybox ] && [ -z "${VMCUDA_BUSYBOX:-}" ]; then
    echo "SKIP: /bin/busybox not found (apt-get install busybox-static)"
    exit 77
fi

"$G/fetch-kernel.sh" "$B/kernel"
KVER=$(cat "$B/kernel/kernel-version")

cat > "$B/smoke-test.sh" <<'T'
#!/bin/sh
echo "SMOKE-UNAME=$(uname -r)"
[ -d /sys/bus/pci/devices ] || { echo "no sysfs"; exit 3; }
[ -c /dev/null ] || { echo "no devtmpfs"; exit 4; }
ivsh=$(/bin/find-ivshmem.sh) && { echo "unexpected ivshmem device $ivsh"; exit 5; }
exit 0
T
"$G/build-initramfs.sh" "$B/smoke-initramfs.cpio.gz" --init-script "$B/smoke-test.sh" \
    --add "$G/find-ivshmem.sh:/bin/find-ivshmem.sh"

T0=$(date +%s%N)
rc=0
"$G/boot.sh" --kernel "$B/kernel/kernel" --initrd "$B/smoke-initramfs.cpio.gz" \
    --timeout "${VMCUDA_BOOT_TIMEOUT:-180}" --log "$B/smoke-boot.log" || rc=$?
T1=$(date +%s%N)
MS=$(( (T1 - T0) / 1000000 ))

fail() { echo "FAIL: boot-smoke: $*"; echo "--- $B/smoke-boot.log"; tail -n 40 "$B/smoke-boot.log"; exit 1; }
[ "$rc" = 0 ] || fail "guest exit code $rc (want 0)"
GOT=$(tr -d '\r' < "$B/smoke-boot.log" | sed -n 's/^SMOKE-UNAME=//p' | tail -n1)
[ "$GOT" = "$KVER" ] || fail "guest printed kernel '$GOT', want '$KVER'"
echo "PASS: boot-smoke: kernel $KVER booted, test ran, powered off in ${MS} ms"
