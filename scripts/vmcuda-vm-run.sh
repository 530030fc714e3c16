#!/usr/bin/env bash
# vmcuda-vm-run.sh [options] PROGRAM...
# vmcuda-vm-run.sh [options] -- PROGRAM [ARGS...]
#
# Runs CUDA programs inside a QEMU guest against a vmcuda-stub on this host, in one
# command: starts the stub on a socket of its own (one per VM), builds the guest image
# or reuses it (scripts/guest/build-cuda-image.sh), boots the guest with an
# ivshmem-doorbell device (master=on: the VM is peer 0 and can be saved), loads the
# vmcuda module inside, runs the programs there through guest-lib (/dev/vmcuda0),
# prints their stdout on stdout and their stderr on stderr, and exits with their status
# (the first non-zero one). Progress goes to stderr, prefixed "vmcuda-vm-run:".
# The VM-path counterpart of host-stub/vmcuda-run (the local transport).
#
#   vmcuda-vm-run.sh --test-stub vector_add device_query    # CI, no GPU: test executor
#   vmcuda-vm-run.sh -- ./my_app --size 1024                 # GPU host: real vmcuda-stub
#
# PROGRAM: a name in tests/cuda/bin, or a path with a slash (./app) to a program built
# with nvcc -cudart shared (it is added to the image). With --image, names in that image.
#
# Stub:
#   --test-stub         the test executor standing in for a GPU (BUILD/tests/vmcuda-test-stub)
#   --stub PATH         this stub binary (env VMCUDA_STUB); default BUILD/host-stub/vmcuda-stub
#                       (needs the NVIDIA driver, libcuda.so.1)
#   --stub-arg ARG      one more option for the stub, e.g. --stub-arg --memory-quota-mib=4096
#                       (repeatable)
#   --slots N           client slots = MSI-X vectors of the device (default 8; at most 255)
#   --region-mib M      shared region per VM in MiB, a power of two (default 1024: BAR2
#                       lies outside guest RAM, 256 and 1024 both boot under TCG)
#   --socket PATH       use the stub that already serves PATH (started and stopped by the
#                       caller, with the same --slots and --region-mib) instead of one of
#                       this run's own
# Saving the VM (docs/snapshots.md; tests/guest/cuda_vm_save_test.sh):
#   --qmp PATH          QEMU's QMP monitor on the UNIX socket PATH (stop, migrate, quit)
#   --incoming URI      start from a saved VM (QEMU -incoming, e.g. "exec:cat FILE") instead
#                       of booting; the same image, job and options as the saved run
# Guest:
#   --build DIR         build tree (default <repo>/build): guest-lib/libcudart.so.13, the stubs
#   --image FILE        boot this image as it is (from build-cuda-image.sh); default: build
#                       or reuse BUILD/guest/cuda-image.cpio.gz
#   --add-program PATH  put PATH into the image as well (for --job; repeatable)
#   --kernel FILE       guest kernel (default BUILD/guest/kernel/vmlinux, fetched if missing)
#   --job FILE          a guest shell fragment to run instead of PROGRAMs; it may call
#                       `run_program NAME PROGRAM [ARGS...]` (scripts/guest/cuda-guest.sh)
#   --mem SIZE          guest RAM (default 1G)    --smp N   guest CPUs (default 1, see boot.sh)
#   --append "..."      kernel command line additions, e.g. vmcuda.spin_ns=0 vmcuda.log=2
#   --timeout S         whole run, boot included (default 600)
# Output:
#   --out-dir DIR       keep NAME.out, NAME.err, NAME.rc per program, console.log, stub.log
#   -v, --verbose       show the guest console as it comes
#
# Environment: VMCUDA_STUB (stub binary), VMCUDA_QEMU (QEMU binary, e.g. a carried
# bundle, see scripts/guest/bundle-qemu.sh), VMCUDA_ACCEL=tcg|kvm, VMRPC_LOG (the stub's
# log level; 2 logs every client closed), other VMRPC_* knobs (the stub's).
#
# Exit: the programs' status (the first non-zero one; with --job the guest's exit code,
# which is that unless the job sets VMCUDA_RC); 2 bad usage; 3 the stub did not start; 4 the guest
# failed before or while running the programs (console tail shown); 77 the image cannot
# be built here (guest kernel headers missing); 124 timeout; 127 no QEMU.
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "vmcuda-vm-run: $*" >&2; }
die() { local rc=$1; shift; echo "vmcuda-vm-run: error: $*" >&2; exit "$rc"; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 2; }

BUILD=$REPO/build STUB=${VMCUDA_STUB:-} TEST_STUB=0 STUB_ARGS=() SLOTS=8 REGION_MIB=1024
IMAGE='' ADD_PROGS=() KERNEL='' JOB='' MEM=1G SMP=1 APPEND='' TIMEOUT=600 OUTDIR='' VERBOSE=0
PROGS=() ARGV_MODE=0 EXT_SOCK='' QMP='' INCOMING=''
need() { [ $# -ge 2 ] || { say "$1 wants a value"; usage; }; }
while [ $# -gt 0 ]; do
    case $1 in
        --test-stub) TEST_STUB=1; shift ;;
        --stub) need "$@"; STUB=$2; shift 2 ;;
        --stub-arg) need "$@"; STUB_ARGS+=("$2"); shift 2 ;;
        --slots) need "$@"; SLOTS=$2; shift 2 ;;
        --region-mib) need "$@"; REGION_MIB=$2; shift 2 ;;
        --socket) need "$@"; EXT_SOCK=$2; shift 2 ;;
        --qmp) need "$@"; QMP=$2; shift 2 ;;
        --incoming) need "$@"; INCOMING=$2; shift 2 ;;
        --build) need "$@"; BUILD=$2; shift 2 ;;
        --image) need "$@"; IMAGE=$2; shift 2 ;;
        --add-program) need "$@"; ADD_PROGS+=("$2"); shift 2 ;;
        --kernel) need "$@"; KERNEL=$2; shift 2 ;;
        --job) need "$@"; JOB=$2; shift 2 ;;
        --mem) need "$@"; MEM=$2; shift 2 ;;
        --smp) need "$@"; SMP=$2; shift 2 ;;
        --append) need "$@"; APPEND="${APPEND:+$APPEND }$2"; shift 2 ;;
        --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
        --out-dir) need "$@"; OUTDIR=$2; shift 2 ;;
        -v|--verbose) VERBOSE=1; shift ;;
        -h|--help) usage ;;
        --) shift; ARGV_MODE=1; PROGS=("$@"); break ;;
        -*) say "unknown option $1"; usage ;;
        *) PROGS+=("$1"); shift ;;
    esac
done
if [ -n "$JOB" ]; then
    [ ${#PROGS[@]} -eq 0 ] || die 2 "give either --job or programs, not both"
    [ -f "$JOB" ] || die 2 "--job $JOB: no such file"
else
    [ ${#PROGS[@]} -gt 0 ] || { say "no program given"; usage; }
fi
isnum() { case $1 in ''|*[!0-9]*) return 1 ;; esac; }
isnum "$SLOTS" && [ "$SLOTS" -ge 1 ] && [ "$SLOTS" -le 255 ] || die 2 "--slots wants 1..255 (the driver's limit)"
isnum "$REGION_MIB" && [ "$REGION_MIB" -ge 1 ] && [ $((REGION_MIB & (REGION_MIB - 1))) -eq 0 ] ||
    die 2 "--region-mib wants a power of two (QEMU's ivshmem needs one), not '$REGION_MIB'"
isnum "$TIMEOUT" || die 2 "--timeout wants whole seconds"
REGION_BYTES=$((REGION_MIB << 20))

# ---- the programs -------------------------------------------------------------------------
# A PROGRAM with a slash is a file to add to the image (under its file name); one without
# is a name in the image (tests/cuda/bin's programs are always there).
GUEST_NAMES=()
IMG_PROGS=()
if [ $ARGV_MODE = 1 ]; then RUN_PROGS=("${PROGS[0]}"); else RUN_PROGS=(${PROGS[@]+"${PROGS[@]}"}); fi
for p in ${RUN_PROGS[@]+"${RUN_PROGS[@]}"}; do
    case $p in
        */*)
            [ -f "$p" ] || die 2 "program $p not found"
            IMG_PROGS+=("$p")
            GUEST_NAMES+=("$(basename "$p")") ;;
        *)
            if [ -z "$IMAGE" ] && [ ! -x "$REPO/tests/cuda/bin/$p" ]; then
                die 2 "no program $p in $REPO/tests/cuda/bin (it has: $(ls "$REPO/tests/cuda/bin" 2>/dev/null | tr '\n' ' ')); give a path (./$p) for another program"
            fi
            GUEST_NAMES+=("$p") ;;
    esac
done
for p in ${ADD_PROGS[@]+"${ADD_PROGS[@]}"}; do
    [ -f "$p" ] || die 2 "--add-program $p: no such file"
    IMG_PROGS+=("$p")
done
if [ -n "$IMAGE" ]; then
    [ -f "$IMAGE" ] || die 2 "--image $IMAGE: no such file"
    [ ${#IMG_PROGS[@]} -eq 0 ] || die 2 "with --image, programs must be in the image: name them, do not give paths (${IMG_PROGS[*]})"
fi

# ---- the stub binary ----------------------------------------------------------------------
if [ -n "$EXT_SOCK" ]; then
    [ -S "$EXT_SOCK" ] || die 3 "--socket $EXT_SOCK: no stub serves it (no such socket)"
    STUB=/bin/true  # not started
elif [ -z "$STUB" ]; then
    if [ "$TEST_STUB" = 1 ]; then STUB=$BUILD/tests/vmcuda-test-stub; else STUB=$BUILD/host-stub/vmcuda-stub; fi
fi
[ -x "$STUB" ] || die 3 "no stub at $STUB (build it, or name one with --stub / VMCUDA_STUB)"
QEMU=${VMCUDA_QEMU:-qemu-system-x86_64}
command -v "$QEMU" >/dev/null 2>&1 || die 127 "$QEMU not found (apt-get install qemu-system-x86, or set VMCUDA_QEMU to a carried bundle's qemu-system-x86_64)"

# ---- work dir, clean-up ----------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vmcuda-vm.XXXXXX") || die 1 "mktemp failed"
if [ -n "$OUTDIR" ]; then mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || die 2 "cannot create $OUTDIR"; fi
RES=${OUTDIR:-$WORK/results}
mkdir -p "$RES"
STUB_PID='' BOOT_PID='' FOLLOW_PID=''
cleanup() {
    if [ -n "$BOOT_PID" ] && kill -0 "$BOOT_PID" 2>/dev/null; then
        kill -TERM -- "-$BOOT_PID" 2>/dev/null || kill -TERM "$BOOT_PID" 2>/dev/null
        wait "$BOOT_PID" 2>/dev/null
    fi
    [ -n "$FOLLOW_PID" ] && kill -TERM "$FOLLOW_PID" 2>/dev/null
    if [ -n "$STUB_PID" ]; then
        kill -TERM "$STUB_PID" 2>/dev/null
        wait "$STUB_PID" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# ---- the stub ------------------------------------------------------------------------------------
SOCK=$WORK/vm.sock
STUBLOG=$RES/stub.log
if [ -n "$OUTDIR" ]; then where=$STUBLOG; else where="its tail is shown on failure; --out-dir keeps it"; fi
if [ -n "$EXT_SOCK" ]; then
    SOCK=$EXT_SOCK
    echo "(the stub serving $SOCK is not this run's: see its own log)" > "$STUBLOG"
    say "stub: the one serving $SOCK"
else
say "stub: $STUB --slots $SLOTS --region-bytes $REGION_BYTES${STUB_ARGS[*]+ ${STUB_ARGS[*]}} (log: $where)"
"$STUB" --socket "$SOCK" --slots "$SLOTS" --region-bytes "$REGION_BYTES" ${STUB_ARGS[@]+"${STUB_ARGS[@]}"} \
    > "$STUBLOG" 2>&1 < /dev/null &
STUB_PID=$!
for _ in $(seq 400); do
    [ -S "$SOCK" ] && break
    if ! kill -0 "$STUB_PID" 2>/dev/null; then
        wait "$STUB_PID"; src=$?
        sed 's/^/  stub: /' "$STUBLOG" >&2
        STUB_PID=''
        if [ "$TEST_STUB" = 0 ] && [ -z "${VMCUDA_STUB:-}" ] && grep -qi 'libcuda' "$STUBLOG"; then
            say "no NVIDIA driver here: to run against the test executor instead of a GPU, add --test-stub"
        fi
        die 3 "the stub exited ($src) before serving $SOCK"
    fi
    sleep 0.05
done
[ -S "$SOCK" ] || die 3 "the stub did not create $SOCK within 20 s"
fi

# ---- the image -------------------------------------------------------------------------------
if [ -n "$IMAGE" ]; then
    say "image $IMAGE ($(sed -n 's/^programs=//p' "$IMAGE.info" 2>/dev/null || echo 'no .info'))"
else
    [ -d "$BUILD" ] || die 2 "build dir $BUILD does not exist (--build DIR)"
    BUILD=$(cd "$BUILD" && pwd)
    # Extra programs get an image of their own, so that runs with and without them do
    # not rebuild one image in turn.
    IMAGE=$BUILD/guest/cuda-image.cpio.gz
    if [ ${#IMG_PROGS[@]} -gt 0 ]; then
        IMAGE=$BUILD/guest/cuda-image-$(for q in "${IMG_PROGS[@]}"; do basename "$q"; done | sort | sha256sum | cut -c1-8).cpio.gz
    fi
    DEFAULT_PROGS=()
    for p in "$REPO"/tests/cuda/bin/*; do [ -f "$p" ] && [ -x "$p" ] && DEFAULT_PROGS+=("$p"); done
    # A program given by path replaces tests/cuda/bin's program of the same name.
    ALL=()
    for p in ${DEFAULT_PROGS[@]+"${DEFAULT_PROGS[@]}"}; do
        keep=1
        for q in ${IMG_PROGS[@]+"${IMG_PROGS[@]}"}; do [ "$(basename "$q")" = "$(basename "$p")" ] && keep=0; done
        [ $keep = 1 ] && ALL+=("$p")
    done
    ALL+=(${IMG_PROGS[@]+"${IMG_PROGS[@]}"})
    say "guest image (build or reuse): $IMAGE"
    rc=0
    "$REPO/scripts/guest/build-cuda-image.sh" "$IMAGE" "$BUILD" "${ALL[@]}" || rc=$?
    [ $rc = 77 ] && die 77 "the guest image cannot be built here (see above)"
    [ $rc = 0 ] || die 1 "building the guest image failed"
fi

# ---- the kernel ------------------------------------------------------------------------------
if [ -z "$KERNEL" ]; then
    KERNEL=$BUILD/guest/kernel/vmlinux
    if [ ! -f "$KERNEL" ]; then
        say "fetching the guest kernel into $BUILD/guest/kernel"
        "$REPO/scripts/guest/fetch-kernel.sh" "$BUILD/guest/kernel" || die 1 "fetching the guest kernel failed"
        KERNEL=$(readlink -f "$BUILD/guest/kernel/kernel")
    fi
fi
[ -f "$KERNEL" ] || die 2 "kernel $KERNEL not found"
# The module in the image loads only into the kernel it was built for.
IKVER=$(sed -n 's/^kernel=//p' "$IMAGE.info" 2>/dev/null)
KKVER=$(cat "$(dirname "$KERNEL")/kernel-version" 2>/dev/null)
if [ -n "$IKVER" ] && [ -n "$KKVER" ] && [ "$IKVER" != "$KKVER" ]; then
    die 2 "the image's vmcuda.ko is for kernel $IKVER but $KERNEL is $KKVER: rebuild the image or pass --kernel"
fi

# ---- the job (a second cpio archive appended to the image) -------------------------------------
sq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }  # single-quote for sh
JOBFILE=$WORK/vmcuda-job.sh
if [ -n "$JOB" ]; then
    cp "$JOB" "$JOBFILE"
elif [ $ARGV_MODE = 1 ]; then
    { printf 'run_program %s %s' "$(sq "${GUEST_NAMES[0]}")" "$(sq "${GUEST_NAMES[0]}")"
      for a in "${PROGS[@]:1}"; do printf ' %s' "$(sq "$a")"; done; echo; } > "$JOBFILE"
else
    for n in "${GUEST_NAMES[@]}"; do printf 'run_program %s %s\n' "$(sq "$n")" "$(sq "$n")"; done > "$JOBFILE"
fi

# newc cpio (the kernel's initramfs format), written without cpio(1): the GPU host may not have it.
newc_entry() { # NAME MODE(octal) FILE|''
    local name=$1 mode=$2 file=$3 size=0 ns pad
    [ -n "$file" ] && size=$(stat -c %s "$file")
    ns=$((${#name} + 1))
    printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X' \
        "$((++INO))" "$((8#$mode))" 0 0 1 0 "$size" 0 0 0 0 "$ns" 0
    printf '%s\0' "$name"
    pad=$(( (4 - (110 + ns) % 4) % 4 )); [ $pad -gt 0 ] && head -c $pad /dev/zero
    if [ -n "$file" ]; then
        cat "$file"
        pad=$(( (4 - size % 4) % 4 )); [ $pad -gt 0 ] && head -c $pad /dev/zero
    fi
    return 0
}
INO=900000
{
    newc_entry vmcuda-job.sh 100644 "$JOBFILE"
    newc_entry 'TRAILER!!!' 0 ''
} | gzip -1 > "$WORK/job.cpio.gz" || die 1 "writing the job archive failed"
INITRD=$WORK/initrd.cpio.gz
{
    cat "$IMAGE"
    # The kernel skips zero padding between archives; keep the next one 4-byte aligned.
    pad=$(( (4 - $(stat -c %s "$IMAGE") % 4) % 4 )); [ $pad -gt 0 ] && head -c $pad /dev/zero
    cat "$WORK/job.cpio.gz"
} > "$INITRD"

# ---- boot and follow the console ------------------------------------------------------------------
CONSOLE=$RES/console.log
: > "$CONSOLE"
NPROG=${#GUEST_NAMES[@]}
say "booting the guest ($KERNEL, ${MEM} RAM, $SMP vCPUs, $SLOTS vectors, master=on; $([ -n "$JOB" ] && echo "job $JOB" || echo "$NPROG program(s)"))"
QEMU_EXTRA=()
[ -n "$QMP" ] && QEMU_EXTRA+=(-qmp "unix:$QMP,server=on,wait=off")
[ -n "$INCOMING" ] && QEMU_EXTRA+=(-incoming "$INCOMING")
setsid "$REPO/scripts/guest/boot.sh" --kernel "$KERNEL" --initrd "$INITRD" --ivshmem-socket "$SOCK" \
    --vectors "$SLOTS" --ivshmem-master on --timeout "$TIMEOUT" --mem "$MEM" --smp "$SMP" \
    ${APPEND:+--append "$APPEND"} --log "$CONSOLE" -- ${QEMU_EXTRA[@]+"${QEMU_EXTRA[@]}"} \
    > /dev/null 2> "$WORK/boot.err" &
BOOT_PID=$!

# One line at a time: progress on stderr; each program's output, once it ended, decoded
# into RES/NAME.{out,err,rc} and printed.
follow() {
    local line cur='' stream='' idx='' name='' rest rc secs base
    while IFS= read -r line; do
        line=${line%$'\r'}
        [ "$VERBOSE" = 1 ] && case $line in *@@VMCUDA-*|'') ;; *[!A-Za-z0-9+/=]*) echo "  | $line" >&2 ;; esac
        case $line in
            *VMCUDA-GUEST-BOOTED*) say "guest booted: ${line#*VMCUDA-GUEST-BOOTED } ($(elapsed)s)" ;;
            *@@VMCUDA-READY*) say "vmcuda.ko loaded, /dev/vmcuda0 ready (${line#*@@VMCUDA-READY })" ;;
            *@@VMCUDA-BEGIN\ *)
                rest=${line#*@@VMCUDA-BEGIN }; idx=${rest%% *}; name=${rest#* }
                base=$RES/$name; [ -e "$base.rc" ] && base=$RES/$name.$idx
                : > "$WORK/cur.out.b64"; : > "$WORK/cur.err.b64"; stream=''
                say "[$idx] $name: running" ;;
            *@@VMCUDA-OUT\ *) stream=out ;;
            *@@VMCUDA-ERR\ *) stream=err ;;
            *@@VMCUDA-END\ *)
                rest=${line#*@@VMCUDA-END }; rc=${rest#* rc=}; rc=${rc%% *}; secs=${rest##*secs=}
                base64 -d < "$WORK/cur.out.b64" > "$base.out" 2>/dev/null || say "[$idx] $name: stdout garbled on the console"
                base64 -d < "$WORK/cur.err.b64" > "$base.err" 2>/dev/null || say "[$idx] $name: stderr garbled on the console"
                echo "$rc" > "$base.rc"
                echo "$idx $name $base" >> "$WORK/done"
                cat "$base.out"
                cat "$base.err" >&2
                say "[$idx] $name: exit $rc (${secs}s in the guest)"
                stream='' ;;
            *)
                # base64 lines only: a stray kernel message cannot corrupt the output.
                if [ -n "$stream" ] && [ -n "$line" ] && [ -z "${line//[A-Za-z0-9+\/=]/}" ]; then
                    echo "$line" >> "$WORK/cur.$stream.b64"
                fi ;;
        esac
    done
}
# In the background, waited for with `wait`: a signal to this script is handled at once.
tail -n +1 -s 0.2 -F --pid="$BOOT_PID" "$CONSOLE" 2>/dev/null | follow &
FOLLOW_PID=$!
wait "$FOLLOW_PID"
wait "$BOOT_PID"; BRC=$?
BOOT_PID='' FOLLOW_PID=''

# ---- result -----------------------------------------------------------------------------------------
touch "$WORK/done"
NDONE=$(wc -l < "$WORK/done")
fail_tail() {
    say "console (last 40 lines; --out-dir keeps all of it):"
    tr -d '\r' < "$CONSOLE" | grep -av '^[A-Za-z0-9+/=]*$' | tail -n 40 | sed 's/^/  | /' >&2
    sed 's/^/  /' "$WORK/boot.err" >&2
    say "stub log (last 20 lines):"
    tail -n 20 "$STUBLOG" | sed 's/^/  stub: /' >&2
}
# boot.sh's exit code is the guest's (a program's) unless boot.sh says otherwise.
if grep -q '^boot: timeout after' "$WORK/boot.err"; then
    fail_tail
    die 124 "timeout after ${TIMEOUT}s ($NDONE program(s) finished)"
fi
# (A VM started from a saved one says nothing of its boot: it continues where it was saved.)
if [ -z "$INCOMING" ] && ! grep -aq '@@VMCUDA-READY' "$CONSOLE"; then
    fail_tail
    die 4 "the guest did not get to run the programs (boot.sh exit $BRC)"
fi
if [ -z "$JOB" ] && [ "$NDONE" -lt "$NPROG" ]; then
    fail_tail
    die 4 "only $NDONE of $NPROG program(s) finished (boot.sh exit $BRC)"
fi
RC=0
if [ -n "$JOB" ]; then
    RC=$BRC  # the job's verdict: the guest's exit code (cuda-guest.sh's VMCUDA_RC unless the job set it)
else
    while read -r idx name base; do
        r=$(cat "$base.rc")
        [ "$r" != 0 ] && [ $RC = 0 ] && RC=$r
    done < "$WORK/done"
fi
say "done in $(elapsed)s: $NDONE program(s), exit $RC${OUTDIR:+; results in $OUTDIR}"
exit $RC
