#!/usr/bin/env bash
# fetch-kernel.sh OUTDIR
#
# Puts a bootable Debian guest kernel into OUTDIR:
#   OUTDIR/vmlinux         uncompressed ELF kernel (fast to boot under TCG), or
#   OUTDIR/bzImage         the compressed kernel, only if extraction failed
#   OUTDIR/kernel          symlink to whichever of the two exists
#   OUTDIR/kernel-version  e.g. 6.1.0-56-amd64 (what `uname -r` prints in the guest)
#   OUTDIR/kernel-tree     path of the extracted package (lib/modules/... for .ko files)
#
# The version comes from `apt-cache depends linux-image-amd64` (never the host's
# `uname -r`). The .deb is kept in a cache dir (VMCUDA_GUEST_CACHE, default
# <repo>/.guest/cache), so later runs work offline. Idempotent.
#
# Env: VMCUDA_GUEST_CACHE  cache dir
#      VMCUDA_GUEST_KVER   force a kernel version (e.g. 6.1.0-56-amd64)
set -euo pipefail

log() { echo "fetch-kernel: $*" >&2; }
die() { echo "fetch-kernel: error: $*" >&2; exit 1; }

[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUTDIR=$1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${VMCUDA_GUEST_CACHE:-$REPO/.guest/cache}
mkdir -p "$OUTDIR" "$CACHE"
OUTDIR=$(cd "$OUTDIR" && pwd)
CACHE=$(cd "$CACHE" && pwd)

# One fetch at a time per cache (parallel test runs share it).
exec 9>"$CACHE/.lock"
flock 9

# ---- 1. kernel version -------------------------------------------------------
apt_kver() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *|\{0,1\}Depends: <\{0,1\}linux-image-\([0-9][^ >]*\)>\{0,1\}$/\1/p' | head -n1
}

KVER=${VMCUDA_GUEST_KVER:-}
if [ -z "$KVER" ]; then
    KVER=$(apt_kver || true)
    if [ -z "$KVER" ] && [ ! -s "$CACHE/kernel-version" ] && [ "$(id -u)" = 0 ]; then
        log "apt-cache knows no linux-image-amd64; running apt-get update"
        apt-get update -qq >&2 || log "apt-get update failed"
        KVER=$(apt_kver || true)
    fi
    if [ -z "$KVER" ] && [ -s "$CACHE/kernel-version" ]; then
        KVER=$(cat "$CACHE/kernel-version")
        log "apt-cache gave no version; using cached $KVER"
    fi
fi
[ -n "$KVER" ] || die "cannot determine the kernel version (apt-cache depends linux-image-amd64 gave nothing, no cache in $CACHE)"
log "kernel version $KVER"

# ---- fast path: OUTDIR already complete ---------------------------------------
if [ "$(cat "$OUTDIR/kernel-version" 2>/dev/null)" = "$KVER" ] &&
   { [ -s "$OUTDIR/vmlinux" ] || [ -s "$OUTDIR/bzImage" ]; } && [ -e "$OUTDIR/kernel" ]; then
    log "up to date: $(readlink -f "$OUTDIR/kernel")"
    exit 0
fi

# ---- 2. download + extract into the cache -------------------------------------
extract_ok() { [ -s "$CACHE/linux-$1/boot/vmlinuz-$1" ]; }

download() { # $1 = package; prints the .deb path or nothing
    (cd "$CACHE" && apt-get download "$1" >&2) || return 0
    ls -t "$CACHE"/"$1"_*.deb 2>/dev/null | head -n1 || true
}
unpack() { # $1 = .deb; extracts into $CACHE/linux-$KVER
    rm -rf "$CACHE/linux-$KVER.tmp"
    if dpkg -x "$1" "$CACHE/linux-$KVER.tmp" && [ -s "$CACHE/linux-$KVER.tmp/boot/vmlinuz-$KVER" ]; then
        rm -rf "$CACHE/linux-$KVER"
        mv "$CACHE/linux-$KVER.tmp" "$CACHE/linux-$KVER"
        return 0
    fi
    rm -rf "$CACHE/linux-$KVER.tmp"
    return 1
}

if ! extract_ok "$KVER"; then
    PKG=linux-image-$KVER
    DEB=$(ls -t "$CACHE"/"${PKG}"_*.deb 2>/dev/null | head -n1 || true)
    OK=0
    if [ -n "$DEB" ]; then
        log "extracting cached $(basename "$DEB")"
        if unpack "$DEB"; then OK=1; else log "cached $DEB is broken; downloading again"; rm -f "$DEB"; fi
    fi
    if [ "$OK" = 0 ]; then
        log "downloading $PKG into $CACHE"
        DEB=$(download "$PKG")
        if [ -n "$DEB" ]; then
            log "extracting $(basename "$DEB")"
            unpack "$DEB" || die "$DEB does not unpack or has no boot/vmlinuz-$KVER"
            OK=1
        fi
    fi
    if [ "$OK" = 0 ]; then
        if [ -z "${VMCUDA_GUEST_KVER:-}" ] && [ -s "$CACHE/kernel-version" ] &&
           extract_ok "$(cat "$CACHE/kernel-version")"; then
            # Offline, and the apt lists moved on to a version we never downloaded.
            OLD=$(cat "$CACHE/kernel-version")
            log "warning: cannot download $PKG (offline?); falling back to cached $OLD"
            KVER=$OLD
        else
            die "cannot download $PKG and nothing usable is cached in $CACHE"
        fi
    fi
fi
echo "$KVER" > "$CACHE/kernel-version"

TREE=$CACHE/linux-$KVER
VMLINUZ=$TREE/boot/vmlinuz-$KVER

# ---- 3. uncompressed vmlinux ----------------------------------------------------
# bzImage carries the kernel as an XZ stream (Debian: CONFIG_KERNEL_XZ); find the
# stream that decompresses to an ELF image.
extract_vmlinux() { # $1 = vmlinuz, $2 = output
    local py
    for py in python3 /usr/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        "$py" - "$1" "$2" <<'EOF' && return 0
import lzma, sys
data = open(sys.argv[1], "rb").read()
magic = b"\xfd7zXZ\x00"
pos = data.find(magic)
while pos >= 0:
    try:
        out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[pos:])
    except lzma.LZMAError:
        out = b""
    if out[:4] == b"\x7fELF":
        open(sys.argv[2], "wb").write(out)
        sys.exit(0)
    pos = data.find(magic, pos + 1)
sys.exit(1)
EOF
    done
    # No usable python: the same with grep + xz.
    local off
    for off in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" 2>/dev/null | cut -d: -f1); do
        if tail -c +"$((off + 1))" "$1" | xz -dc --single-stream > "$2" 2>/dev/null &&
           [ "$(head -c4 "$2" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
            return 0
        fi
    done
    return 1
}

rm -f "$OUTDIR/vmlinux" "$OUTDIR/bzImage" "$OUTDIR/kernel" "$OUTDIR/vmlinux.tmp"
if [ -s "$TREE/vmlinux" ] || { log "decompressing vmlinuz -> vmlinux"; extract_vmlinux "$VMLINUZ" "$TREE/vmlinux.tmp" && mv "$TREE/vmlinux.tmp" "$TREE/vmlinux"; }; then
    cp "$TREE/vmlinux" "$OUTDIR/vmlinux.tmp"
    mv "$OUTDIR/vmlinux.tmp" "$OUTDIR/vmlinux"
    ln -s vmlinux "$OUTDIR/kernel"
    log "wrote $OUTDIR/vmlinux ($(stat -c %s "$OUTDIR/vmlinux") bytes)"
else
    rm -f "$TREE/vmlinux.tmp"
    log "warning: no XZ/ELF payload found in $VMLINUZ; using it as bzImage (slower boot)"
    cp "$VMLINUZ" "$OUTDIR/bzImage"
    ln -s bzImage "$OUTDIR/kernel"
    log "wrote $OUTDIR/bzImage"
fi
echo "$TREE" > "$OUTDIR/kernel-tree"
echo "$KVER" > "$OUTDIR/kernel-version"
log "done: $KVER"
