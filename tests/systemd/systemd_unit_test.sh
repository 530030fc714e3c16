#!/usr/bin/env bash
# CTest systemd_unit: the shipped vmcuda-stub@.service under a real systemd (issue 13 point 6,
# issue 10 point 4). CI's machine runs in a container without systemd as PID 1, so this boots
# a QEMU guest (TCG) whose root is this machine's / (9p, read-only) under a tmpfs overlay,
# with this machine's own /lib/systemd/systemd as PID 1. In it, tests/systemd/guest_test.sh
# installs the Debian packages (scripts/build-debs.sh), starts the unit with the test
# executor in the GPU's place, and checks readiness, the sandbox, `systemctl restart` and
# `kill -9` with systemd's fd store. The unit's `systemd-analyze security` report is left in
# BUILD_DIR/systemd-security.txt (docs/security.md quotes its score).
#
#   systemd_unit_test.sh BUILD_DIR TEST_STUB PROBE
#
# Exit 77 (skip) without QEMU, busybox-static, cpio, dpkg-deb, systemd, the libvirt-qemu group
# or root (the guest reads every file of / through 9p as the user QEMU runs as).
# tests/systemd/README.md: how and what.
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR TEST_STUB PROBE" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) STUB=$(readlink -f "$2") PROBE=$(readlink -f "$3")
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T0=$(date +%s)
fail=0
source "$REPO/tests/guest/lib.sh"

need_qemu
need_static_busybox
[ "$(id -u)" = 0 ] || skip "not root: the guest's root is this machine's / read through 9p as QEMU's user"
[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd (apt-get install systemd)"
command -v cpio > /dev/null || skip "no cpio (apt-get install cpio)"
command -v dpkg-deb > /dev/null || skip "no dpkg-deb (apt-get install dpkg-dev)"
getent group libvirt-qemu > /dev/null ||
    skip "no libvirt-qemu group: the unit hands the VM socket to it (apt-get install libvirt-daemon-system)"
for f in "$STUB" "$PROBE"; do [ -x "$f" ] || { echo "FAIL: no $f"; exit 1; }; done

mkdir -p "$BUILD/guest"
WORK=$(mktemp -d "$BUILD/guest/systemd-unit.XXXXXX")
ci=$WORK/ci
mkdir -p "$ci/overlay/etc/systemd/system" "$ci/debs" "$WORK/initrd/bin" "$WORK/initrd/lib/modules"

# ---- the kernel, and the modules that mount the root (9p over virtio, overlayfs)
"$REPO/scripts/guest/fetch-kernel.sh" "$BUILD/guest/kernel" > "$WORK/kernel.log" 2>&1 ||
    { rm -rf "$WORK"; skip "no guest kernel: $(tail -n 2 "$WORK/kernel.log" 2>/dev/null)"; }
KERNEL=$(readlink -f "$BUILD/guest/kernel/kernel")
MODS=$(cat "$BUILD/guest/kernel/kernel-tree")/lib/modules/$(cat "$BUILD/guest/kernel/kernel-version")
# Each module after the ones it depends on (the depends= field of its .modinfo).
declare -A loaded=()
add_module() {
    local f dep
    [ -n "${loaded[$1]:-}" ] && return 0
    loaded[$1]=1
    f=$(find "$MODS/kernel" -name "$1.ko" -print -quit)
    [ -n "$f" ] || return 0  # built into the kernel
    for dep in $(strings "$f" | sed -n 's/^depends=//p' | tr ',' ' '); do add_module "$dep"; done
    cp "$f" "$WORK/initrd/lib/modules/"
    echo "$1" >> "$WORK/initrd/lib/modules/order"
}
for m in virtio_pci 9pnet_virtio 9p overlay; do add_module "$m"; done

# ---- the initramfs: mount / (9p) under a tmpfs overlay and switch_root into systemd
cp /bin/busybox "$WORK/initrd/bin/busybox"
cat > "$WORK/initrd/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
die() { echo "VMCUDA-CI-INIT: $*"; poweroff -f; }
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko || die "insmod $m failed"; done
mkdir -p /lower /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose root /lower || die "no root share"
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || die "overlay failed"
mkdir -p /newroot/ci
mount -t 9p -o trans=virtio,version=9p2000.L ci /newroot/ci || die "no ci share"
cp -a /newroot/ci/overlay/. /newroot/ || die "cannot copy the CI units"
# This machine's /proc, /sys, /dev, /run and /tmp show through the share: the guest's own over them.
for d in proc sys dev run tmp; do mkdir -p /newroot/$d; done
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /newroot/run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /newroot/tmp
rm -f /newroot/.dockerenv /newroot/run/.containerenv
exec switch_root /newroot /lib/systemd/systemd --unit=vmcuda-ci.target
EOF
chmod 755 "$WORK/initrd/init"
(cd "$WORK/initrd" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initrd.gz"

# ---- what the guest's systemd runs: basic.target and the test, then power off
cat > "$ci/overlay/etc/systemd/system/vmcuda-ci.target" <<'EOF'
[Unit]
Description=vmcuda CI: the unit under a real systemd
Requires=basic.target vmcuda-ci.service
After=basic.target vmcuda-ci.service
AllowIsolate=yes
EOF
cat > "$ci/overlay/etc/systemd/system/vmcuda-ci.service" <<EOF
[Unit]
Description=vmcuda CI: tests/systemd/guest_test.sh
After=basic.target
[Service]
Type=oneshot
ExecStart=/bin/bash $REPO/tests/systemd/guest_test.sh /ci
ExecStopPost=/bin/systemctl poweroff --no-block
StandardOutput=journal+console
TimeoutStartSec=600
EOF
printf 'REPO=%q\nPROBE=%q\nTEST_STUB=%q\n' "$REPO" "$PROBE" "$STUB" > "$ci/env"

say "building the Debian packages"
"$REPO/scripts/build-debs.sh" --build "$BUILD" --out "$ci/debs" > "$WORK/debs.log" 2>&1 ||
    { bad "scripts/build-debs.sh failed: $(tail -n 5 "$WORK/debs.log")"; exit 1; }

say "booting systemd in the guest (TCG; logs in $WORK)"
timeout -k 5 420 "${VMCUDA_QEMU:-qemu-system-x86_64}" -M pc -accel tcg -m 1536M -smp 1 -nographic -no-reboot \
    -nic none -kernel "$KERNEL" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 panic=-1 cryptomgr.notests rdinit=/init systemd.show_status=0" \
    -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$ci,mount_tag=ci,security_model=none,multidevs=remap" \
    < /dev/null > "$WORK/console.log" 2>&1
qrc=$?
[ -f "$ci/guest.log" ] && sed 's/^/  guest: /' "$ci/guest.log"
cp "$ci/security.txt" "$BUILD/systemd-security.txt" 2>/dev/null
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then bad "the guest did not finish within 420 s"; fi
grep -a 'VMCUDA-CI-INIT' "$WORK/console.log" && bad "the guest's initramfs could not start systemd"
rc=$(cat "$ci/rc" 2>/dev/null)
[ "$rc" = 0 ] || bad "the test in the guest failed (rc ${rc:-none})"
if [ $fail = 0 ]; then
    rm -rf "$WORK"
    echo "=== $(( $(date +%s) - T0 ))s; PASSED"
else
    [ -f "$ci/journal.txt" ] && tail -n 40 "$ci/journal.txt" | sed 's/^/  journal: /'
    echo "=== $(( $(date +%s) - T0 ))s; FAILED (console, journal: $WORK)"
fi
exit $fail
