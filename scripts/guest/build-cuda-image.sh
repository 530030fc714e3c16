#!/usr/bin/env bash
# build-cuda-image.sh [--force] [--kernel-dir DIR] OUT.cpio.gz BUILD_DIR [PROGRAM...]
#
# Builds the initramfs of a vmcuda CUDA guest: busybox, the guest kernel module
# (vmcuda.ko, built against the guest kernel's headers), guest-lib's libcudart.so.13 and
# CUDA programs with the libraries they need, and /test.sh = scripts/guest/cuda-guest.sh
# (insmod, then runs each program with LD_LIBRARY_PATH=/opt/vmcuda/lib between markers).
# Boot it with scripts/vmcuda-vm-run.sh (which also starts the host's stub).
#
#   OUT.cpio.gz      the image; OUT.cpio.gz.info says what is in it (kernel version,
#                    programs, and the hash of every input)
#   BUILD_DIR        the CMake build tree: BUILD_DIR/guest-lib/libcudart.so.13; the
#                    kernel goes to BUILD_DIR/guest/kernel, the module to BUILD_DIR/guest/driver
#   PROGRAM          a file, or a name in tests/cuda/bin (default: every program there).
#                    In the image: /opt/vmcuda/bin/<file name>. Programs must be built
#                    with nvcc -cudart shared (they load libcudart.so.13).
#   --force          rebuild even when OUT is up to date (same hash of the inputs)
#   --kernel-dir DIR where fetch-kernel.sh puts the guest kernel (default BUILD_DIR/guest/kernel)
#
# Image layout: /lib/modules/vmcuda.ko, /opt/vmcuda/lib/libcudart.so.13,
# /opt/vmcuda/bin/*, /bin/find-ivshmem.sh, the programs' shared libraries (libstdc++,
# libgcc_s, libc, libm, ld-linux, ...) at their host paths (NVIDIA's libcudart, if the
# host has one, is left out).
#
# Exit: 0 built (or up to date); 77 the module cannot be built (guest kernel headers
# missing and not installable: callers skip); 1 other errors; 2 bad usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
T0=$(date +%s.%N)
STEPS=5
step() { printf 'build-cuda-image: [%s/%s] %s (%.1fs)\n' "$1" "$STEPS" "$2" \
             "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" >&2; }
log() { echo "build-cuda-image: $*" >&2; }
die() { echo "build-cuda-image: error: $*" >&2; exit 1; }
usage() { sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

FORCE=0 KDIR='' POS=()
while [ $# -gt 0 ]; do
    case $1 in
        --force) FORCE=1; shift ;;
        --kernel-dir) [ $# -ge 2 ] || usage; KDIR=$2; shift 2 ;;
        -h|--help) usage ;;
        -*) log "unknown option $1"; usage ;;
        *) POS+=("$1"); shift ;;
    esac
done
[ ${#POS[@]} -ge 2 ] || usage
OUT=${POS[0]}
BUILD=${POS[1]}
PROGS=("${POS[@]:2}")
[ -d "$BUILD" ] || die "build dir $BUILD does not exist (configure and build first: cmake -B build && cmake --build build)"
BUILD=$(cd "$BUILD" && pwd)
KDIR=${KDIR:-$BUILD/guest/kernel}
CUDART=$BUILD/guest-lib/libcudart.so.13
[ -f "$CUDART" ] || die "no $CUDART: build guest-lib first (cmake --build $BUILD --target vmcuda_cudart)"
# libcudart.so.13 forwards to libcuda.so.1, which holds both APIs (guest-lib/README.md).
LIBCUDA=$BUILD/guest-lib/libcuda.so.1
[ -f "$LIBCUDA" ] || die "no $LIBCUDA: build guest-lib first (cmake --build $BUILD --target vmcuda_cudart)"
# vmcuda's libcublas.so.13, libcublasLt.so.13, libcufft.so.12, libcurand.so.10, libcusparse.so.12,
# libcusolver.so.12 and libcudnn.so.9 where they are built (guest-lib/README.md "cuBLAS",
# "cuBLASLt", "cuFFT and cuRAND", "cuSPARSE and cuSOLVER", "cuDNN");
# NVIDIA's (hundreds of MB) never go into the image.
NVLIBS=() NVSKIPS=()
for l in libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcurand.so.10 libcusparse.so.12 libcusolver.so.12 \
         libcudnn.so.9; do
    [ -f "$BUILD/guest-lib/$l" ] && NVLIBS+=("$BUILD/guest-lib/$l")
    NVSKIPS+=(--skip-lib "$l")  # never NVIDIA's copy as a program's dependency (libcufft: ~280 MB)
done
CUBLAS_ADDS=()
for f in "${NVLIBS[@]}"; do CUBLAS_ADDS+=(--add "$f:/opt/vmcuda/lib/$(basename "$f")"); done

if [ ${#PROGS[@]} -eq 0 ]; then
    for p in "$REPO"/tests/cuda/bin/*; do [ -f "$p" ] && [ -x "$p" ] && PROGS+=("$p"); done
    [ ${#PROGS[@]} -gt 0 ] || die "no programs given and none in $REPO/tests/cuda/bin (scripts/build-cuda-tests.sh builds them where nvcc is)"
fi

# ---- 1. guest kernel ----------------------------------------------------------------
step 1 "guest kernel -> $KDIR"
"$HERE/fetch-kernel.sh" "$KDIR" 2> >(sed 's/^/  /' >&2) || die "fetching the guest kernel failed"
KVER=$(cat "$KDIR/kernel-version")
[ -n "$KVER" ] || die "$KDIR/kernel-version is empty"

# ---- 2. programs ----------------------------------------------------------------------
step 2 "checking ${#PROGS[@]} program(s)"
ADDS=()
NAMES=()
for p in "${PROGS[@]}"; do
    case $p in */*) ;; *) p=$REPO/tests/cuda/bin/$p ;; esac
    [ -f "$p" ] || die "program $p not found"
    [ -x "$p" ] || die "program $p is not executable"
    n=$(basename "$p")
    case " ${NAMES[*]-} " in *" $n "*) die "two programs named $n" ;; esac
    NAMES+=("$n")
    deps=$(LC_ALL=C ldd "$p" 2>/dev/null || true)
    if ! grep -q 'libcudart\.so\.13' <<< "$deps"; then
        log "  warning: $n does not load libcudart.so.13 (built with nvcc's default -cudart static?): vmcuda serves only programs built with -cudart shared"
    fi
    ADDS+=(--add "$(cd "$(dirname "$p")" && pwd)/$n:/opt/vmcuda/bin/$n")
    log "  $n ($(stat -c %s "$p") bytes)"
done

# Everything the image is made of: when the hash matches OUT.info, OUT is reused.
MODSRC=("$REPO/ivshmem-driver/vmcuda_drv.c" "$REPO/ivshmem-driver/include/uapi/vmcuda.h" "$REPO/ivshmem-driver/Makefile")
inputs_hash() {
    {
        echo "kernel $KVER"
        for f in "${BASH_SOURCE[0]}" "$HERE/build-initramfs.sh" "$HERE/cuda-guest.sh" "$HERE/find-ivshmem.sh" \
                 "${MODSRC[@]}" "$CUDART" "$LIBCUDA" "${NVLIBS[@]}"; do
            echo "$(basename "$f") $(sha256sum < "$f")"
        done
        for a in "${ADDS[@]}"; do
            [ "$a" = --add ] && continue
            echo "${a#*:} $(sha256sum < "${a%%:*}")"
        done
    } | sha256sum | cut -d' ' -f1
}
HASH=$(inputs_hash)
# One build of OUT at a time (parallel runs of vmcuda-vm-run.sh share the image).
mkdir -p "$(dirname "$OUT")"
exec 8>"$OUT.lock"
flock 8
if [ "$FORCE" = 0 ] && [ -s "$OUT" ] && [ -f "$OUT.info" ] && grep -qx "inputs=$HASH" "$OUT.info"; then
    step 5 "up to date: $OUT (kernel $KVER; programs: ${NAMES[*]})"
    exit 0
fi

# ---- 3. kernel module -------------------------------------------------------------------
step 3 "vmcuda.ko for $KVER"
rc=0
"$REPO/ivshmem-driver/build-guest-module.sh" "$BUILD/guest/driver" "$KVER" 2> >(sed 's/^/  /' >&2) || rc=$?
if [ "$rc" = 77 ]; then
    log "cannot build vmcuda.ko: linux-headers-$KVER is missing and cannot be installed here (run ivshmem-driver/install-headers.sh $KVER as root)"
    exit 77
fi
[ "$rc" = 0 ] || die "building vmcuda.ko failed"
MOD=$BUILD/guest/driver/modules

# ---- 4. guest-lib -------------------------------------------------------------------------
step 4 "guest-lib: $CUDART ($(stat -c %s "$CUDART") bytes) and $LIBCUDA ($(stat -c %s "$LIBCUDA") bytes), debug sections left out of the image"

# ---- 5. pack ------------------------------------------------------------------------------
step 5 "packing $OUT"
mkdir -p "$(dirname "$OUT")"
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/build-cuda-image.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT
BLOG=$TMPD/build.log
# The image's copy without debug sections (they stay in the build tree): a smaller image.
cp -L "$CUDART" "$TMPD/libcudart.so.13"
cp -L "$LIBCUDA" "$TMPD/libcuda.so.1"
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$TMPD/libcudart.so.13" || cp -L "$CUDART" "$TMPD/libcudart.so.13"
    strip --strip-debug "$TMPD/libcuda.so.1" || cp -L "$LIBCUDA" "$TMPD/libcuda.so.1"
fi
rc=0
"$HERE/build-initramfs.sh" "$OUT.building" \
    --init-script "$HERE/cuda-guest.sh" \
    --add "$HERE/find-ivshmem.sh:/bin/find-ivshmem.sh" \
    --add "$TMPD/libcudart.so.13:/opt/vmcuda/lib/libcudart.so.13" \
    --add "$TMPD/libcuda.so.1:/opt/vmcuda/lib/libcuda.so.1" \
    "${ADDS[@]}" "${CUBLAS_ADDS[@]}" \
    --skip-lib libcudart.so.13 \
    --skip-lib libcuda.so.1 \
    "${NVSKIPS[@]}" \
    --modules "$MOD" 2> "$BLOG" || rc=$?
grep -v 'is dynamically linked; copying its libraries too' "$BLOG" | sed 's/^/  /' >&2 || true
[ "$rc" = 0 ] || die "build-initramfs.sh failed"
mv "$OUT.building" "$OUT"
{
    echo "inputs=$HASH"
    echo "kernel=$KVER"
    echo "programs=${NAMES[*]}"
    echo "libcudart=$CUDART"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$OUT.info"
step 5 "wrote $OUT ($(stat -c %s "$OUT") bytes; kernel $KVER; programs: ${NAMES[*]})"
