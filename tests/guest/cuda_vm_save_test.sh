#!/usr/bin/env bash
# CTest guest_cuda_vm_save: a VM saved and restored in the middle of a CUDA program, with
# the stub restarted in between (docs/snapshots.md), in a QEMU guest (TCG) against
# vmcuda-test-stub (the test executor standing in for the GPU):
#
#  1. stub A serves the VM; the guest runs `cuda_kill_probe steps` (device memory read back,
#     checked and changed every round; a stream and an event across rounds) and, beside it,
#     symbols_pitch over and over (kernels, module variables, pitched memory): two clients;
#  2. midway: `vmcudactl save vm1 DIR` (the GPU state), then QMP stop + migrate to a file +
#     quit (what `virsh save` does: the device runs with master=on, so QEMU saves the shared
#     region with the VM); stub A is stopped;
#  3. stub B (a new process, same --state-dir) starts; QEMU starts from the file
#     (-incoming); B finds the saved GPU state by the region's image token, brings the
#     clients back in their slots, and the programs end with the results of uninterrupted
#     runs (every symbols_pitch run prints its native output); a new program in the restored
#     VM runs too (vector_add, native output);
#  4. the same file restored once more against stub C, which has no saved state (a VM saved
#     without `vmcudactl save`): the program's next CUDA call fails with the guest library
#     saying its GPU state is gone, never a wrong result, and new programs still run.
#
#   cuda_vm_save_test.sh BUILD_DIR PROBE STUB VMCUDACTL
#
# Exit 77 (skip) when QEMU, busybox-static or the guest kernel headers are missing.
# Env (the GPU machine runs it against the real stub: scripts/gpu-vm-check.sh --save):
#   VMCUDA_SAVE_TEST_STUB_ARGS  more options for the stubs (e.g. --isolation thread)
#   VMCUDA_SAVE_TEST_VM_ARGS    more options for vmcuda-vm-run.sh (e.g. --image I --kernel K:
#                               a ready image with cuda_kill_probe in it)
#   VMCUDA_SAVE_TEST_RUN, VMCUDA_SAVE_TEST_LIBDIR   vmcuda-run and guest-lib for the
#                               reference run (default: the build tree's)
set -uo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BUILD_DIR PROBE STUB VMCUDACTL" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) PROBE=$2 STUB=$3 CTL=$4
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T0=$(date +%s)
fail=0
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_qemu
if [[ " ${VMCUDA_SAVE_TEST_VM_ARGS:-} " != *" --image "* ]]; then  # the image is built here
    need_static_busybox
fi
command -v python3 >/dev/null || skip "python3 (for QMP) not installed"
for f in "$STUB" "$PROBE" "$CTL"; do [ -x "$f" ] || { echo "FAIL: no $f"; exit 1; }; done

mkdir -p "$BUILD/guest"
WORK=$(mktemp -d "$BUILD/guest/cuda-vm-save.XXXXXX")
SOCK=$WORK/vm1.sock
VMFILE=$WORK/vm1.vmstate
ROUNDS=400
STUB_PID=''
RUN_PID=''
cleanup() {
    [ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
    [ -n "$STUB_PID" ] && kill -TERM "$STUB_PID" 2>/dev/null && wait "$STUB_PID" 2>/dev/null
}
trap cleanup EXIT

# ---- the guest's job: the program, a marker for the save, its result; then a new program
cat > "$WORK/job.sh" <<EOF
(
    n=0
    while [ ! -f /tmp/stop-loop ]; do
        n=\$((n + 1))
        LD_LIBRARY_PATH=\$VMCUDA_LIB \$VMCUDA_BIN/symbols_pitch > /tmp/loop.\$n.out 2> /tmp/loop.\$n.err
        echo \$? > /tmp/loop.\$n.rc
    done
    echo \$n > /tmp/loop.count
) &
loop=\$!
probe=\$VMCUDA_BIN/cuda_kill_probe
LD_LIBRARY_PATH=\$VMCUDA_LIB \$probe steps /tmp/steps.state $ROUNDS 1 > /tmp/steps.out 2> /tmp/steps.err &
pid=\$!
i=0
at_round() { # whether the program finished round \$1 (the state file is rewritten in place)
    r=\$(sed -n 's/^step round=\([0-9][0-9]*\) .*/\1/p' /tmp/steps.state 2>/dev/null)
    case \$r in ''|*[!0-9]*) return 1 ;; esac
    [ "\$r" -ge "\$1" ]
}
while ! at_round 5; do
    kill -0 \$pid 2>/dev/null && [ \$i -lt 3000 ] || break
    sleep 0.1; i=\$((i + 1))
done
echo "@@SAVE-NOW \$(cat /tmp/steps.state 2>/dev/null)"
wait \$pid
rc=\$?
echo "@@STEPS-RC \$rc after \$(cat /tmp/steps.state 2>/dev/null)"
sed 's/^/@@STEPS-OUT /' /tmp/steps.out
sed 's/^/@@STEPS-ERR /' /tmp/steps.err
touch /tmp/stop-loop
wait \$loop
n=\$(cat /tmp/loop.count)
i=1
while [ \$i -le \$n ]; do
    echo "@@LOOP \$i rc=\$(cat /tmp/loop.\$i.rc) md5=\$(md5sum < /tmp/loop.\$i.out | cut -d' ' -f1)"
    [ "\$(cat /tmp/loop.\$i.rc)" = 0 ] || sed "s/^/@@LOOP-ERR \$i /" /tmp/loop.\$i.err
    i=\$((i + 1))
done
run_program vector_add vector_add
VMCUDA_RC=0
EOF

start_stub() { # NAME STATE_DIR
    local sock_wait=0
    VMRPC_LOG=2 "$STUB" --socket "$SOCK" --vm vm1 --slots 4 --region-bytes $((256 << 20)) --state-dir "$2" ${VMCUDA_SAVE_TEST_STUB_ARGS:-} \
        > "$WORK/stub-$1.log" 2>&1 < /dev/null &
    STUB_PID=$!
    while [ ! -S "$SOCK" ] || [ ! -S "$WORK/vm1.ctl" ]; do
        sock_wait=$((sock_wait + 1))
        if [ $sock_wait -gt 400 ] || ! kill -0 "$STUB_PID" 2>/dev/null; then
            bad "stub $1 did not start:"; sed 's/^/  /' "$WORK/stub-$1.log"; exit 1
        fi
        sleep 0.05
    done
}
stop_stub() {
    kill -TERM "$STUB_PID" 2>/dev/null; wait "$STUB_PID" 2>/dev/null; STUB_PID=''
    rm -f "$SOCK" "$WORK/vm1.ctl"
}
VM_ARGS=(${VMCUDA_SAVE_TEST_VM_ARGS:-})
case " ${VM_ARGS[*]-} " in *" --image "*) ;; *) VM_ARGS+=(--add-program "$PROBE") ;; esac
run_vm() { # NAME [vmcuda-vm-run options...]: in the background
    local name=$1; shift
    VMCUDA_STUB=/bin/true "$REPO/scripts/vmcuda-vm-run.sh" --build "$BUILD" --socket "$SOCK" --slots 4 \
        --region-mib 256 "${VM_ARGS[@]}" --job "$WORK/job.sh" --out-dir "$WORK/$name" --timeout 900 "$@" \
        > "$WORK/$name.stdout" 2> "$WORK/$name.stderr" &
    RUN_PID=$!
}
console() { [ -f "$WORK/$1/console.log" ] && tr -d '\r' < "$WORK/$1/console.log"; }
qmp() { # SOCKET COMMAND-JSON... : runs each, waiting for its answer; migrate waits until done
    python3 - "$@" <<'PY'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
for _ in range(100):
    try:
        s.connect(sys.argv[1]); break
    except OSError:
        time.sleep(0.1)
f = s.makefile("rw")
def cmd(c):
    f.write(json.dumps(c) + "\n"); f.flush()
    while True:
        m = json.loads(f.readline())
        if "return" in m or "error" in m:
            if "error" in m: sys.exit("QMP %s: %s" % (c["execute"], m["error"]))
            return m["return"]
json.loads(f.readline())  # greeting
cmd({"execute": "qmp_capabilities"})
for a in sys.argv[2:]:
    c = json.loads(a)
    if c["execute"] == "cont-when-loaded":
        # A VM started with -incoming stays paused after a saved (stopped) VM is loaded,
        # as under virsh restore, which then continues it.
        for _ in range(3000):
            if cmd({"execute": "query-status"})["status"] != "inmigrate": break
            time.sleep(0.1)
        cmd({"execute": "cont"})
        continue
    cmd(c)
    if c["execute"] == "migrate":
        for _ in range(3000):
            st = cmd({"execute": "query-migrate"}).get("status")
            if st == "completed": break
            if st in ("failed", "cancelled"): sys.exit("migration " + st)
            time.sleep(0.1)
        else:
            sys.exit("migration did not complete")
PY
}
wait_console() { # RUN PATTERN SECONDS
    local i=0
    while ! console "$1" | grep -q "$2"; do
        i=$((i + 1))
        kill -0 "$RUN_PID" 2>/dev/null || return 1
        [ $i -gt $(($3 * 10)) ] && return 1
        sleep 0.1
    done
}
wait_run() { # -> the run's exit code
    local rc=0
    wait "$RUN_PID" || rc=$?
    RUN_PID=''
    return $rc
}
restore_vm() { # RUN: QEMU started from the saved VM, continued once loaded (as virsh restore does), waited for
    run_vm "$1" --incoming "exec:cat $VMFILE" --qmp "$WORK/$1.qmp"
    qmp "$WORK/$1.qmp" '{"execute":"cont-when-loaded"}' > "$WORK/$1.qmp.out" 2>&1 || {
        bad "continuing the restored VM ($1) failed:"; sed 's/^/  /' "$WORK/$1.qmp.out"; }
    wait_run
}
check_vector_add() { # RUN WHAT: vector_add in that run printed its native output
    if diff -u "$REPO/tests/cuda/expected/vector_add.out" "$WORK/$1/vector_add.out" > "$WORK/$1.va.diff" 2>&1; then
        echo "ok: $2: vector_add identical to the native run"
    else
        bad "$2: vector_add differs:"; sed 's/^/  /' "$WORK/$1.va.diff" | head -n 20
    fi
}

# The result an uninterrupted run gives (the program on this host's local transport).
REF=$(VMCUDA_STUB="$STUB" VMCUDA_SOCKET="$WORK/local.sock" VMCUDA_LIBDIR="${VMCUDA_SAVE_TEST_LIBDIR:-$BUILD/guest-lib}" \
      timeout 300 "${VMCUDA_SAVE_TEST_RUN:-$BUILD/host-stub/vmcuda-run}" -- "$PROBE" steps "$WORK/ref.state" $ROUNDS 1 2>&1)
grep -q '^STEPS-OK' <<< "$REF" || { bad "the reference run failed: $REF"; exit 1; }

# ---- 1-2. run, save midway -----------------------------------------------------------------
say "stub A; booting the guest (image build or reuse; logs in $WORK)"
start_stub A "$WORK/state"
run_vm run1 --qmp "$WORK/qmp1.sock"
if ! wait_console run1 '@@SAVE-NOW' 800; then
    rc=0; wait_run || rc=$?
    if [ $rc = 77 ]; then rm -rf "$WORK"; skip "the guest image cannot be built here"; fi
    bad "the program never got to its save point (vmcuda-vm-run exit $rc):"
    tail -n 30 "$WORK/run1.stderr"; console run1 | tail -n 20; exit 1
fi
say "guest: $(console run1 | grep -o '@@SAVE-NOW.*' | head -n 1)"
if ! "$CTL" --run-dir "$WORK" save vm1 "$WORK/saved" > "$WORK/save.out" 2>&1; then
    bad "vmcudactl save failed:"; sed 's/^/  /' "$WORK/save.out"; exit 1
fi
say "vmcudactl save: $(tail -n 1 "$WORK/save.out")"
if ! qmp "$WORK/qmp1.sock" '{"execute":"stop"}' \
        "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"exec:cat > $VMFILE\"}}" '{"execute":"quit"}' \
        > "$WORK/qmp1.out" 2>&1; then
    bad "saving the VM through QMP failed:"; sed 's/^/  /' "$WORK/qmp1.out"; exit 1
fi
wait_run
say "VM saved ($(stat -c %s "$VMFILE") bytes); stopping stub A"
stop_stub

# ---- 3. a new stub, the VM restored ------------------------------------------------------------
start_stub B "$WORK/state"
say "stub B; restoring the VM"
restore_vm run2
c2=$(console run2)
grep '^@@STEPS' <<< "$c2" | sed 's/^/  guest: /'
if grep -q '^@@STEPS-RC 0 ' <<< "$c2" && grep -qxF "@@STEPS-OUT $REF" <<< "$c2"; then
    echo "ok: the program saved at round 5 with stub A ended after the restore with stub B with the result of an uninterrupted run ($REF)"
else
    bad "after the restore the program did not end with the uninterrupted run's result ($REF)"
    tail -n 20 "$WORK/stub-B.log" | sed 's/^/  stub B: /'
fi
# Every symbols_pitch run, the one the save interrupted included, printed its native output.
want=$(md5sum < "$REPO/tests/cuda/expected/symbols_pitch.out" | cut -d' ' -f1)
loops=$(grep -c '^@@LOOP [0-9]' <<< "$c2")
good=$(grep -c "^@@LOOP [0-9]* rc=0 md5=$want\$" <<< "$c2")
if [ "$loops" -ge 1 ] && [ "$good" = "$loops" ]; then
    echo "ok: symbols_pitch ran $loops time(s) around the save and restore, each with its native output"
else
    bad "symbols_pitch around the save: $good of $loops run(s) printed the native output:"
    grep '^@@LOOP' <<< "$c2" | head -n 20 | sed 's/^/  /'
fi
if grep -q 'restored from' "$WORK/stub-B.log"; then
    echo "ok: stub B: $(grep -o 'the VM was restored from.*' "$WORK/stub-B.log" | head -n 1)"
else
    bad "stub B never said it restored the VM's clients"
fi
check_vector_add run2 "a new program in the restored VM"
stop_stub

# ---- 4. restored without its GPU state ---------------------------------------------------------
start_stub C "$WORK/state-empty"
say "stub C (no saved state); restoring the same VM image again"
restore_vm run3
c3=$(console run3)
grep '^@@STEPS' <<< "$c3" | head -n 5 | sed 's/^/  guest: /'
if grep -q '^@@STEPS-RC [1-9]' <<< "$c3" && grep -q '^@@STEPS-ERR .*GPU state is gone' <<< "$c3" &&
        ! grep -q '^@@STEPS-OUT STEPS-OK' <<< "$c3"; then
    echo "ok: without its saved GPU state the program failed with a clear error, no result"
else
    bad "a VM restored without its GPU state: the program should fail saying its GPU state is gone"
fi
if grep -q 'lose their GPU state' "$WORK/stub-C.log"; then
    echo "ok: stub C: $(grep -o 'the VM was restored;.*' "$WORK/stub-C.log" | head -n 1 | cut -c1-160)"
else
    bad "stub C did not log the lost clients"
fi
check_vector_add run3 "new programs still run in a VM restored without its GPU state"
stop_stub

if [ $fail = 0 ]; then
    rm -rf "$WORK"
    echo "=== $(( $(date +%s) - T0 ))s; PASSED"
else
    echo "=== $(( $(date +%s) - T0 ))s; FAILED (consoles, stub logs: $WORK)"
fi
exit $fail
