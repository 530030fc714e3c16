#!/usr/bin/env bash
# CTest guest_cuda_vm: the CUDA test programs (tests/cuda/bin) inside a QEMU guest
# (TCG), through guest-lib -> /dev/vmcuda0 (the vmcuda module) -> ivshmem-doorbell ->
# vmcuda-test-stub on this host (the test executor standing in for the GPU), in one
# scripts/vmcuda-vm-run.sh command; each program's output must equal its native H200
# output (tests/cuda/expected/NAME.out) exactly, as tests/cuda/run_cuda_test.sh checks on
# the host (a program whose native output is not captured yet is compared with its run
# on the host's local transport instead, with a warning). Then the kill test (tests/guest/cuda_vm_job.sh): a CUDA app killed with
# SIGKILL in the middle of a cudaMemcpy must free its slot: the guest sees the slot
# count come back, and the stub's log shows the client closed with its allocation
# freed while the VM was still running (before "peer left").
#
#   cuda_vm_test.sh BUILD_DIR KILL_PROBE STUB
#
# Exit 77 (skip) when QEMU or busybox-static is missing, or the guest kernel headers
# are (the module cannot be built). Work files: BUILD_DIR/guest/cuda-vm-test.XXXXXX,
# kept when the test fails.
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR KILL_PROBE STUB" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) PROBE=$2 STUB=$3
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T0=$(date +%s)
fail=0
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$REPO/tests/cuda/gpu_only.sh"  # comparable: [GPU only] lines (the stub here is the test stub)

need_qemu
need_static_busybox
[ -x "$STUB" ] || { echo "FAIL: no stub $STUB"; exit 1; }
[ -x "$PROBE" ] || { echo "FAIL: no kill probe $PROBE"; exit 1; }

# A directory of its own: another CTest run on this build tree may run this test at the
# same time. Removed when the test passes, kept (and named) when it fails.
mkdir -p "$BUILD/guest"
WORK=$(mktemp -d "$BUILD/guest/cuda-vm-test.XXXXXX")
echo "=== vmcuda-vm-run.sh: CUDA programs + kill test in one guest (logs: $WORK)"
rc=0
VMRPC_LOG=2 "$REPO/scripts/vmcuda-vm-run.sh" --build "$BUILD" --stub "$STUB" --add-program "$PROBE" \
    --job "$REPO/tests/guest/cuda_vm_job.sh" --out-dir "$WORK" --timeout 400 \
    > "$WORK/vm-run.stdout" 2> "$WORK/vm-run.stderr" || rc=$?
grep -v '^  ' "$WORK/vm-run.stderr" | grep '^vmcuda-vm-run:\|^build-cuda-image:'
if [ $rc = 77 ]; then
    why=$(grep -h 'install-headers\|cannot build' "$WORK/vm-run.stderr" | tail -n 1)
    rm -rf "$WORK"
    skip "the guest image cannot be built: $why"
fi
echo "vmcuda-vm-run.sh exit: $rc"

# ---- 1. the programs, compared with their native runs ----------------------------------------
n=0
for bin in "$REPO"/tests/cuda/bin/*; do
    name=$(basename "$bin")
    # Its reference is a run on two devices; the guest here has one (it says "needs 2 devices").
    [ "$name" = multi_gpu ] && continue
    n=$((n + 1))
    check=("$name:$name")
    [ "$name" = vector_add ] && check+=("vector_add-after-kill:vector_add")
    for c in "${check[@]}"; do
        run=${c%%:*} ref=${c#*:}
        expected=$REPO/tests/cuda/expected/$ref.out
        if [ ! -f "$WORK/$run.rc" ]; then bad "$run did not run in the guest"; continue; fi
        r=$(cat "$WORK/$run.rc")
        if [ "$r" != 0 ]; then
            bad "$run exited $r in the guest; its stderr:"; sed 's/^/  /' "$WORK/$run.err"; continue
        fi
        what="the native run"
        if [ ! -f "$expected" ]; then
            # A program whose native output is not captured yet (its host test cuda_$ref
            # fails for that): compare with the same program on the host's local transport.
            echo "warning: no native reference $expected yet (capture it on the GPU machine: scripts/gpu-check.sh);" \
                 "comparing $run with its run on the host's local transport instead"
            expected=$WORK/$ref.host.out
            if [ ! -f "$expected" ] && ! VMCUDA_STUB="$STUB" VMCUDA_SOCKET="$WORK/local.sock" \
                   VMCUDA_LIBDIR="$BUILD/guest-lib" timeout 300 "$BUILD/host-stub/vmcuda-run" -- "$bin" \
                   > "$expected" 2> "$WORK/$ref.host.err"; then
                bad "$ref failed on the host's local transport too:"; sed 's/^/  /' "$WORK/$ref.host.err"; continue
            fi
            what="the host's local-transport run"
        fi
        if diff -u <(comparable "$expected" "$STUB") <(comparable "$WORK/$run.out" "$STUB") > "$WORK/$run.diff"; then
            echo "ok: $run in the VM: identical to $what"
        else
            bad "$run in the VM: output differs from $what (- reference, + vmcuda in the VM):"
            sed 's/^/  /' "$WORK/$run.diff" | head -n 40
        fi
    done
done
[ $n -gt 0 ] || bad "no programs in $REPO/tests/cuda/bin"

# ---- 2. the kill test ----------------------------------------------------------------------------
console=$(tr -d '\r' < "$WORK/console.log")
grep '^@@KILL' <<< "$console" | sed 's/^@@/guest: /'
kl=$(grep -o '@@KILL-RESULT OK pid=[0-9]*' <<< "$console" | head -n 1)
if [ -z "$kl" ]; then
    bad "kill test failed in the guest: $(grep -o '@@KILL-RESULT.*' <<< "$console" || echo 'no result line')"
else
    pid=${kl##*pid=}
    # Session::close's line (VMRPC_LOG=2) for the killed client, with the 32 MiB it held,
    # and before the VM went away: the driver freed the slot, not QEMU's exit.
    closed=$(grep -n "(pid $pid): closed; freed 1 allocations (33554432 bytes)" "$WORK/stub.log" | head -n 1 | cut -d: -f1)
    left=$(grep -n 'peer left' "$WORK/stub.log" | head -n 1 | cut -d: -f1)
    if [ -z "$closed" ]; then
        bad "the stub never logged the killed client (guest pid $pid) closed with its 32 MiB freed; stub log:"
        sed 's/^/  /' "$WORK/stub.log" | tail -n 20
    elif [ -n "$left" ] && [ "$closed" -gt "$left" ]; then
        bad "the killed client's slot was freed only when the VM left (stub log line $closed after 'peer left' at $left)"
    else
        echo "ok: stub: $(sed -n "${closed}p" "$WORK/stub.log" | sed 's/^vmrpc\[[0-9]*\] //') (log line $closed, VM left at line ${left:-never})"
    fi
fi
if grep -Eq 'Oops|(^|[^A-Za-z])BUG[: ]|Call Trace|WARNING:' <<< "$console"; then
    bad "the guest kernel complained:"; grep -E -A5 'Oops|BUG[: ]|Call Trace|WARNING:' <<< "$console" | head -n 30
fi
if [ $rc != 0 ] && [ $fail = 0 ]; then
    bad "vmcuda-vm-run.sh exited $rc; its stderr:"; tail -n 40 "$WORK/vm-run.stderr"
fi
if [ $fail = 0 ]; then
    rm -rf "$WORK"
    echo "=== $(( $(date +%s) - T0 ))s; PASSED"
else
    echo "=== $(( $(date +%s) - T0 ))s; FAILED (console, stub log, outputs: $WORK)"
fi
exit $fail
