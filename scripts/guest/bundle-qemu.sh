#!/usr/bin/env bash
# bundle-qemu.sh OUTDIR
#
# Copies this machine's qemu-system-x86_64 with everything it needs to boot a vmcuda
# test guest into OUTDIR, for a host that has no QEMU installed (the GPU machine):
#   OUTDIR/qemu-system-x86_64   wrapper: runs the binary through the bundled dynamic
#                               loader and libraries (glibc included, so the host's
#                               library versions do not matter), with -L (firmware) and
#                               QEMU_MODULE_DIR (Debian builds TCG as a module)
#   OUTDIR/bin, lib, modules, share/qemu
# Use it with VMCUDA_QEMU=OUTDIR/qemu-system-x86_64 (scripts/guest/boot.sh,
# scripts/vmcuda-vm-run.sh). About 50 MB; `tar -cJf qemu.tar.xz -C OUTDIR .` packs it
# to ~15 MB.
#
# Firmware: SeaBIOS (bios-256k.bin), the std VGA BIOS, kvmvapic.bin, and the option ROMs
# for -kernel (linuxboot*, multiboot*, pvh.bin) - what `-M pc -kernel ... -nic none`
# opens (checked with strace).
set -euo pipefail
log() { echo "bundle-qemu: $*" >&2; }
die() { echo "bundle-qemu: error: $*" >&2; exit 1; }
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUT=$1
QEMU=$(command -v qemu-system-x86_64) || die "qemu-system-x86_64 not installed here (apt-get install qemu-system-x86)"
QEMU=$(readlink -f "$QEMU")
PREFIX=$(cd "$(dirname "$QEMU")/.." && pwd)

rm -rf "$OUT"
mkdir -p "$OUT"/{bin,lib,modules,share/qemu}
OUT=$(cd "$OUT" && pwd)
cp -L "$QEMU" "$OUT/bin/qemu-system-x86_64"

# Modules (accel-tcg-x86_64.so on Debian): only the x86_64 TCG one is needed here.
MODDIR=
for d in "$PREFIX/lib/x86_64-linux-gnu/qemu" "$PREFIX/lib/qemu" "$PREFIX/lib64/qemu"; do
    [ -d "$d" ] && { MODDIR=$d; break; }
done
if [ -n "$MODDIR" ]; then
    for m in "$MODDIR"/accel-tcg-x86_64.so; do [ -f "$m" ] && cp -L "$m" "$OUT/modules/"; done
fi

# Libraries of the binary and its modules, the loader included.
copy_libs() {
    local lib
    for lib in $(LC_ALL=C ldd "$1" | grep -o '/[^ ]*' | sort -u); do
        [ -f "$lib" ] && [ ! -e "$OUT/lib/$(basename "$lib")" ] && cp -L "$lib" "$OUT/lib/"
    done
    return 0
}
copy_libs "$OUT/bin/qemu-system-x86_64"
for m in "$OUT"/modules/*.so; do [ -f "$m" ] && copy_libs "$m"; done
LOADER=$(cd "$OUT/lib" && ls ld-linux-x86-64.so.* 2>/dev/null | head -n 1)
[ -n "$LOADER" ] || die "no ld-linux-x86-64.so in the libraries of $QEMU"

# Firmware, from QEMU's data directories.
n=0
for f in bios-256k.bin vgabios-stdvga.bin kvmvapic.bin pvh.bin linuxboot.bin linuxboot_dma.bin multiboot.bin \
         multiboot_dma.bin; do
    for d in "$PREFIX/share/qemu" "$PREFIX/share/seabios" /usr/share/qemu /usr/share/seabios; do
        if [ -f "$d/$f" ]; then cp -L "$d/$f" "$OUT/share/qemu/"; n=$((n + 1)); break; fi
    done
    [ -f "$OUT/share/qemu/$f" ] || log "warning: firmware $f not found"
done

cat > "$OUT/qemu-system-x86_64" <<EOF
#!/bin/sh
# $(qemu-system-x86_64 --version | head -n 1), bundled by scripts/guest/bundle-qemu.sh
d=\$(cd "\$(dirname "\$0")" && pwd)
QEMU_MODULE_DIR=\$d/modules
export QEMU_MODULE_DIR
exec "\$d/lib/$LOADER" --library-path "\$d/lib" "\$d/bin/qemu-system-x86_64" -L "\$d/share/qemu" "\$@"
EOF
chmod 755 "$OUT/qemu-system-x86_64"
"$OUT/qemu-system-x86_64" --version > /dev/null || die "the bundled QEMU does not start"
log "wrote $OUT ($(du -sh "$OUT" | cut -f1); $(ls "$OUT/lib" | wc -l) libraries, $n firmware files, modules: $(ls "$OUT/modules" | tr '\n' ' '))"
log "use: VMCUDA_QEMU=$OUT/qemu-system-x86_64"
