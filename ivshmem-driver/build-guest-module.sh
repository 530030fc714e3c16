#!/usr/bin/env bash
# build-guest-module.sh OUTDIR KVER
#
# Builds vmcuda.ko for the guest kernel KVER (e.g. the contents of
# build/guest/kernel/kernel-version) out of tree: copies the sources to OUTDIR/src
# (the source directory stays clean, parallel builds do not collide), installs the
# matching headers if needed (install-headers.sh), runs the Kbuild Makefile and
# leaves the module in OUTDIR/modules/vmcuda.ko (for build-initramfs.sh --modules).
#
# Exit: 0 on success, 77 when the headers cannot be had (callers skip), else 1.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OUTDIR KVER" >&2; exit 2; }
OUT=$1
KVER=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

rc=0
"$HERE/install-headers.sh" "$KVER" || rc=$?
[ "$rc" = 0 ] || exit "$rc"

mkdir -p "$OUT/src" "$OUT/modules"
OUT=$(cd "$OUT" && pwd)
exec 9>"$OUT/.lock"
flock 9
# Copy only the sources; keep the previous objects when nothing changed (Kbuild is
# incremental on the copy).
cp -p "$HERE/Makefile" "$HERE/vmcuda_drv.c" "$OUT/src/"
mkdir -p "$OUT/src/include/uapi"
cp -p "$HERE/include/uapi/vmcuda.h" "$OUT/src/include/uapi/"
if ! make -s -C "$OUT/src" KVER="$KVER" modules > "$OUT/build.log" 2>&1; then
    cat "$OUT/build.log" >&2
    echo "build-guest-module: building vmcuda.ko for $KVER failed" >&2
    exit 1
fi
# Kbuild warnings are errors for us.
if grep -E 'warning:|error:' "$OUT/build.log" >&2; then
    echo "build-guest-module: the module build printed warnings" >&2
    exit 1
fi
cp "$OUT/src/vmcuda.ko" "$OUT/modules/vmcuda.ko.tmp"
mv "$OUT/modules/vmcuda.ko.tmp" "$OUT/modules/vmcuda.ko"
echo "build-guest-module: $OUT/modules/vmcuda.ko for $KVER" >&2
