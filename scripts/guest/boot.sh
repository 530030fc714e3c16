#!/usr/bin/env bash
# boot.sh --kernel K --initrd I [options] [-- extra qemu args...]
#
# Boots a vmcuda test guest under QEMU (-M pc, serial console on stdout) and exits
# with the guest's exit code, read from the "VMCUDA-GUEST-EXIT=<rc>" line that the
# initramfs /init prints (124 on timeout, 1 if the guest printed no marker).
#
#   --kernel K              vmlinux (preferred) or bzImage
#   --initrd I              initramfs from build-initramfs.sh
#   --ivshmem-socket PATH   add an ivshmem-doorbell device talking to the ivshmem
#                           server on the UNIX socket PATH (must already listen)
#   --vectors N             MSI-X vectors of that device (default 1)
#   --ivshmem-master on|off master= of the device (default on: VM is peer 0,
#                           savevm/migration allowed)
#   --timeout S             kill QEMU after S seconds (default 120)
#   --append "..."          extra kernel command line (after console=ttyS0 quiet panic=-1
#                           cryptomgr.notests: the crypto self-tests only slow a TCG boot)
#   --log FILE              also write the console output to FILE
#   --mem SIZE              guest memory (default 256M)
#   --smp N                 guest CPUs (default 1: with 2 vCPUs on a loaded 2-core host, TCG
#                           starved the guest into soft lockups; the single-vCPU CAS caveat
#                           is handled by reading a slot's state before claiming it)
#   --dry-run               print the QEMU command and exit
#
# Env: VMCUDA_ACCEL=tcg|kvm (default tcg: /dev/kvm on the dev/CI machines is a nested
#      software hypervisor that hangs on Debian's kernel; kvm falls back to tcg when
#      /dev/kvm is not usable). VMCUDA_QEMU: QEMU binary (default qemu-system-x86_64).
set -uo pipefail

usage() { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
log() { echo "boot: $*" >&2; }

KERNEL='' INITRD='' SOCK='' VECTORS=1 MASTER=on TIMEOUT=120 APPEND='' LOGFILE='' MEM=256M SMP=1 DRY=0
EXTRA=()
while [ $# -gt 0 ]; do
    case $1 in
        --kernel) KERNEL=${2-}; shift 2 || usage ;;
        --initrd) INITRD=${2-}; shift 2 || usage ;;
        --ivshmem-socket) SOCK=${2-}; shift 2 || usage ;;
        --vectors) VECTORS=${2-}; shift 2 || usage ;;
        --ivshmem-master) MASTER=${2-}; shift 2 || usage ;;
        --timeout) TIMEOUT=${2-}; shift 2 || usage ;;
        --append) APPEND=${2-}; shift 2 || usage ;;
        --log) LOGFILE=${2-}; shift 2 || usage ;;
        --mem) MEM=${2-}; shift 2 || usage ;;
        --smp) SMP=${2-}; shift 2 || usage ;;
        --dry-run) DRY=1; shift ;;
        -h|--help) usage ;;
        --) shift; EXTRA=("$@"); break ;;
        *) log "unknown argument $1"; usage ;;
    esac
done
[ -n "$KERNEL" ] && [ -n "$INITRD" ] || usage
[ -f "$KERNEL" ] || { log "kernel $KERNEL not found"; exit 2; }
[ -f "$INITRD" ] || { log "initrd $INITRD not found"; exit 2; }
case $VECTORS in ''|*[!0-9]*) log "--vectors wants a number"; exit 2 ;; esac
case $TIMEOUT in ''|*[!0-9]*) log "--timeout wants whole seconds"; exit 2 ;; esac
case $MASTER in on|off) ;; *) log "--ivshmem-master wants on or off"; exit 2 ;; esac

QEMU=${VMCUDA_QEMU:-qemu-system-x86_64}
command -v "$QEMU" >/dev/null 2>&1 || { log "$QEMU not found (apt-get install qemu-system-x86)"; exit 127; }

ACCEL=${VMCUDA_ACCEL:-tcg}
case $ACCEL in
    tcg) ;;
    kvm)
        if ! { [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; }; then
            log "VMCUDA_ACCEL=kvm but /dev/kvm is not usable; using tcg"
            ACCEL=tcg
        fi ;;
    *) log "VMCUDA_ACCEL must be kvm or tcg, not '$ACCEL'"; exit 2 ;;
esac

CMD=("$QEMU" -M pc -accel "$ACCEL" -m "$MEM" -smp "$SMP" -nographic -no-reboot
     -nic none -kernel "$KERNEL" -initrd "$INITRD"
     -append "console=ttyS0 quiet panic=-1 cryptomgr.notests${APPEND:+ $APPEND}")
if [ -n "$SOCK" ]; then
    [ -S "$SOCK" ] || log "warning: $SOCK is not a socket (is the ivshmem server running?)"
    # QEMU option syntax: a literal comma in a value is written ",,".
    CMD+=(-chardev "socket,id=ivsh,path=${SOCK//,/,,}"
          -device "ivshmem-doorbell,chardev=ivsh,vectors=$VECTORS,ioeventfd=on,master=$MASTER")
fi
CMD+=(${EXTRA[@]+"${EXTRA[@]}"})

if [ "$DRY" = 1 ]; then
    printf '%q ' "${CMD[@]}"; echo
    exit 0
fi

if [ -n "$LOGFILE" ]; then
    mkdir -p "$(dirname "$LOGFILE")"
    LOG=$LOGFILE
else
    LOG=$(mktemp "${TMPDIR:-/tmp}/vmcuda-boot.XXXXXX")
    trap 'rm -f "$LOG"' EXIT
fi
: > "$LOG"

log "accel=$ACCEL timeout=${TIMEOUT}s: $(printf '%q ' "${CMD[@]}")"
T0=$(date +%s.%N)
# --foreground: QEMU may read the terminal (interactive shell); without a terminal
# give it /dev/null so it never blocks on, or eats, a parent's stdin.
if [ -t 0 ]; then
    timeout --foreground -k 5 "$TIMEOUT" "${CMD[@]}" 2>&1 | tee "$LOG"
else
    timeout --foreground -k 5 "$TIMEOUT" "${CMD[@]}" < /dev/null 2>&1 | tee "$LOG"
fi
QRC=${PIPESTATUS[0]}
T1=$(date +%s.%N)
SECS=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.2f", b - a }')

if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
    log "timeout after ${TIMEOUT}s (QEMU killed)"
    exit 124
fi
MARK=$(tr -d '\r' < "$LOG" | grep -ao 'VMCUDA-GUEST-EXIT=[0-9]*' | tail -n1 | cut -d= -f2)
if [ -z "$MARK" ]; then
    log "no VMCUDA-GUEST-EXIT marker in the console output (QEMU rc $QRC, ${SECS}s)"
    exit 1
fi
log "guest exit $MARK (QEMU rc $QRC, ${SECS}s)"
exit "$MARK"
