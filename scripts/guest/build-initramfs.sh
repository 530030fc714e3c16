#!/usr/bin/env bash
# build-initramfs.sh OUT.cpio.gz [--add SRC:DEST]... [--init-script FILE] [--modules DIR]
#                    [--skip-lib NAME]...
#
# Builds a busybox-static initramfs for a vmcuda test guest. Its /init mounts proc,
# sysfs, devtmpfs, prints "VMCUDA-GUEST-BOOTED ...", runs /test.sh (the --init-script
# FILE), prints "VMCUDA-GUEST-EXIT=<rc>" and powers off (poweroff -f).
#
#   --add SRC:DEST     copy SRC (file or dir) to DEST inside the image (repeatable).
#                      Dynamically linked ELF files get their shared libraries copied
#                      along (static binaries are preferred).
#   --init-script FILE the test, installed as /test.sh (mode 755). Without it /init
#                      starts an interactive shell on the console.
#   --modules DIR      copy DIR/*.ko into /lib/modules/ (test.sh does the insmod).
#   --skip-lib NAME    do not copy the shared library whose file name is NAME (e.g.
#                      libcudart.so.13) along with dynamic ELF files: the image brings
#                      its own (repeatable).
#
# Kernel command line knobs understood by /init:
#   vmcuda.shell=1     drop to a shell after /test.sh instead of powering off.
#
# Env: VMCUDA_BUSYBOX  busybox binary to use (default: the busybox-static one)
set -euo pipefail

log() { echo "build-initramfs: $*" >&2; }
die() { echo "build-initramfs: error: $*" >&2; exit 1; }
usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

OUT=
ADDS=()
INIT_SCRIPT=
MODDIRS=()
SKIP_LIBS=()
while [ $# -gt 0 ]; do
    case $1 in
        --add) [ $# -ge 2 ] || usage; ADDS+=("$2"); shift 2 ;;
        --add=*) ADDS+=("${1#--add=}"); shift ;;
        --init-script) [ $# -ge 2 ] || usage; INIT_SCRIPT=$2; shift 2 ;;
        --init-script=*) INIT_SCRIPT=${1#--init-script=}; shift ;;
        --modules) [ $# -ge 2 ] || usage; MODDIRS+=("$2"); shift 2 ;;
        --modules=*) MODDIRS+=("${1#--modules=}"); shift ;;
        --skip-lib) [ $# -ge 2 ] || usage; SKIP_LIBS+=("$2"); shift 2 ;;
        --skip-lib=*) SKIP_LIBS+=("${1#--skip-lib=}"); shift ;;
        -h|--help) usage ;;
        -*) echo "build-initramfs: unknown option $1" >&2; usage ;;
        *) [ -z "$OUT" ] || usage; OUT=$1; shift ;;
    esac
done
[ -n "$OUT" ] || usage
command -v cpio >/dev/null || die "cpio not found (apt-get install cpio)"
command -v gzip >/dev/null || die "gzip not found"

# ---- busybox (must be static: the image has no libc) ------------------------------
is_dynamic() { # ELF with a program interpreter?
    [ "$(head -c4 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || return 1
    LC_ALL=C ldd "$1" 2>/dev/null | grep -q '=>\|ld-linux'
}
BB=${VMCUDA_BUSYBOX:-}
if [ -z "$BB" ]; then
    for c in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null || true)"; do
        [ -n "$c" ] && [ -x "$c" ] && ! is_dynamic "$c" && { BB=$c; break; }
    done
fi
[ -n "$BB" ] && [ -x "$BB" ] || die "no static busybox found (apt-get install busybox-static)"
is_dynamic "$BB" && die "$BB is dynamically linked; install busybox-static"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/vmcuda-initramfs.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,root,etc,lib/modules,mnt}
chmod 1777 "$STAGE/tmp"
cp "$BB" "$STAGE/bin/busybox"
chmod 755 "$STAGE/bin/busybox"
# Applet links, made here so that scripts can use #!/bin/sh and plain names.
"$BB" --list-full | while read -r p; do
    [ "$p" = bin/busybox ] && continue
    mkdir -p "$STAGE/$(dirname "$p")"
    ln -sf /bin/busybox "$STAGE/$p"
done
[ -e "$STAGE/bin/sh" ] || ln -s busybox "$STAGE/bin/sh"
echo "root:x:0:0:root:/root:/bin/sh" > "$STAGE/etc/passwd"
echo "root:x:0:" > "$STAGE/etc/group"

# ---- /init ------------------------------------------------------------------------
cat > "$STAGE/init" <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs tmpfs /dev/shm 2>/dev/null
mount -t tmpfs tmpfs /run 2>/dev/null
echo "VMCUDA-GUEST-BOOTED kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)"
cd /
if [ -e /test.sh ]; then
    /test.sh
    rc=$?
else
    echo "no /test.sh: starting a shell (exit it to power off)"
    setsid cttyhack sh
    rc=$?
fi
if grep -q 'vmcuda.shell=1' /proc/cmdline; then
    echo "vmcuda.shell=1: starting a shell (exit it to power off)"
    setsid cttyhack sh
fi
echo
echo "VMCUDA-GUEST-EXIT=$rc"
# Let the serial port drain before the power goes.
sleep 0.1 2>/dev/null || sleep 1
poweroff -f
EOF
chmod 755 "$STAGE/init"

# ---- test script, extra files, modules ----------------------------------------------
if [ -n "$INIT_SCRIPT" ]; then
    [ -f "$INIT_SCRIPT" ] || die "--init-script $INIT_SCRIPT: no such file"
    cp "$INIT_SCRIPT" "$STAGE/test.sh"
    chmod 755 "$STAGE/test.sh"
fi

copy_libs() { # copy the shared libraries of ELF $1 into the stage
    local lib
    for lib in $(LC_ALL=C ldd "$1" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
        [ -e "$lib" ] || continue
        [ -e "$STAGE$lib" ] && continue
        case " ${SKIP_LIBS[*]-} " in *" $(basename "$lib") "*) continue ;; esac
        mkdir -p "$STAGE$(dirname "$lib")"
        cp -L "$lib" "$STAGE$lib"
    done
}

for spec in ${ADDS[@]+"${ADDS[@]}"}; do
    case $spec in *:*) ;; *) die "--add $spec: want SRC:DEST" ;; esac
    src=${spec%%:*}
    dest=${spec#*:}
    [ -e "$src" ] || die "--add $spec: $src does not exist"
    case $dest in /*) ;; *) dest=/$dest ;; esac
    case $dest in */) dest=$dest$(basename "$src") ;; esac
    mkdir -p "$STAGE$(dirname "$dest")"
    cp -a "$src" "$STAGE$dest"
    while IFS= read -r -d '' f; do
        if is_dynamic "$f"; then
            log "warning: $f is dynamically linked; copying its libraries too"
            copy_libs "$f"
        fi
    done < <(find "$src" -type f -print0)
done

for d in ${MODDIRS[@]+"${MODDIRS[@]}"}; do
    [ -d "$d" ] || die "--modules $d: not a directory"
    n=0
    for ko in "$d"/*.ko; do
        [ -e "$ko" ] || continue
        cp "$ko" "$STAGE/lib/modules/"
        n=$((n + 1))
    done
    log "added $n module(s) from $d"
done

# ---- pack ---------------------------------------------------------------------------
mkdir -p "$(dirname "$OUT")"
(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) |
    gzip -1 > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "wrote $OUT ($(stat -c %s "$OUT") bytes)"
