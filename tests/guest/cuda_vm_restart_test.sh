#!/usr/bin/env bash
# CTest guest_cuda_vm_stub_restart: the stub of a running VM restarted and killed under a
# service manager (tests/support/fdstore_manager.py, a stand-in for systemd's fd store with
# the same protocol) while a CUDA program runs in a QEMU guest (TCG); the test executor stands
# in for the GPU. QEMU never reconnects to an ivshmem server: the VM's connection, region and
# event fds must survive in the store.
#
#  1. restart (what `systemctl restart vmcuda-stub@vm1` does: SIGTERM, a new stub process
#     with the stored fds) at round 5 of `cuda_kill_probe steps`: the program pauses and ends
#     with the result of an uninterrupted run;
#  2. crash (SIGKILL, then a new stub process, as Restart=on-failure does) at round 5 of a
#     second run: that program fails within seconds saying its GPU state is gone (never a
#     hang or a wrong result), and a new program in the same VM runs (vector_add, native
#     output) without restarting the VM.
#
#   cuda_vm_restart_test.sh BUILD_DIR PROBE STUB
#
# Exit 77 (skip) when QEMU, busybox-static, python3 or the guest kernel headers are missing.
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR PROBE STUB" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) PROBE=$2 STUB=$3
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T0=$(date +%s)
fail=0
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_qemu
need_static_busybox
command -v python3 >/dev/null || skip "python3 (the fd store stand-in) not installed"
for f in "$STUB" "$PROBE"; do [ -x "$f" ] || { echo "FAIL: no $f"; exit 1; }; done

mkdir -p "$BUILD/guest"
WORK=$(mktemp -d "$BUILD/guest/cuda-vm-restart.XXXXXX")
SOCK=$WORK/vm1.sock
ROUNDS=300
MGR_PID='' RUN_PID=''
cleanup() {
    [ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
    [ -n "$MGR_PID" ] && kill -TERM "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
}
trap cleanup EXIT

# ---- the guest's job: a program through a restart, another through a crash, then a new one
cat > "$WORK/job.sh" <<EOF
probe=\$VMCUDA_BIN/cuda_kill_probe
at_round() { # whether the program (state file \$1) finished round \$2
    r=\$(sed -n 's/^step round=\([0-9][0-9]*\) .*/\1/p' \$1 2>/dev/null)
    case \$r in ''|*[!0-9]*) return 1 ;; esac
    [ "\$r" -ge "\$2" ]
}
phase() { # NAME: runs the program, says @@NAME-NOW at round 5, then its end and how long it took after
    LD_LIBRARY_PATH=\$VMCUDA_LIB \$probe steps /tmp/\$1.state $ROUNDS 1 > /tmp/\$1.out 2> /tmp/\$1.err &
    pid=\$!
    i=0
    while ! at_round /tmp/\$1.state 5; do
        kill -0 \$pid 2>/dev/null && [ \$i -lt 3000 ] || break
        sleep 0.1; i=\$((i + 1))
    done
    echo "@@\$1-NOW \$(cat /tmp/\$1.state 2>/dev/null)"
    t0=\$(date +%s)
    wait \$pid
    rc=\$?
    echo "@@\$1-RC \$rc after \$(( \$(date +%s) - t0 )) s at \$(cat /tmp/\$1.state 2>/dev/null)"
    sed "s/^/@@\$1-OUT /" /tmp/\$1.out
    sed "s/^/@@\$1-ERR /" /tmp/\$1.err
}
phase RESTART
phase CRASH
run_program vector_add vector_add
VMCUDA_RC=0
EOF

wait_event() { # PATTERN SECONDS: a line of the manager's events
    local i
    for i in $(seq $(( $2 * 20 ))); do grep -q "$1" "$WORK/events" 2>/dev/null && return 0; sleep 0.05; done
    return 1
}
console() { [ -f "$WORK/run/console.log" ] && tr -d '\r' < "$WORK/run/console.log"; }
wait_console() { # PATTERN SECONDS
    local i=0
    while ! console | grep -q "$1"; do
        i=$((i + 1))
        kill -0 "$RUN_PID" 2>/dev/null || return 1
        [ $i -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
}

# The result an uninterrupted run gives (the program on this host's local transport).
REF=$(VMCUDA_STUB="$STUB" VMCUDA_SOCKET="$WORK/local.sock" VMCUDA_LIBDIR="$BUILD/guest-lib" \
      timeout 300 "$BUILD/host-stub/vmcuda-run" -- "$PROBE" steps "$WORK/ref.state" $ROUNDS 1 2>&1)
grep -q '^STEPS-OK' <<< "$REF" || { bad "the reference run failed: $REF"; exit 1; }

say "stub under the fd store stand-in; booting the guest (image build or reuse; logs in $WORK)"
VMRPC_LOG=2 python3 "$REPO/tests/support/fdstore_manager.py" "$WORK" -- "$STUB" --socket "$SOCK" --vm vm1 \
    --slots 4 --region-bytes $((256 << 20)) --state-dir "$WORK/state" &
MGR_PID=$!
wait_event '^ready 1$' 30 || { bad "the stub did not start:"; sed 's/^/  /' "$WORK/service.log"; exit 1; }
VMCUDA_STUB=/bin/true "$REPO/scripts/vmcuda-vm-run.sh" --build "$BUILD" --socket "$SOCK" --slots 4 \
    --region-mib 256 --add-program "$PROBE" --job "$WORK/job.sh" --out-dir "$WORK/run" --timeout 900 \
    > "$WORK/run.stdout" 2> "$WORK/run.stderr" &
RUN_PID=$!

# ---- 1. restart
if ! wait_console '@@RESTART-NOW' 800; then
    rc=0; wait "$RUN_PID" || rc=$?; RUN_PID=''
    if [ $rc = 77 ]; then rm -rf "$WORK"; skip "the guest image cannot be built here"; fi
    bad "the program never got to its restart point (vmcuda-vm-run exit $rc):"
    tail -n 30 "$WORK/run.stderr"; console | tail -n 20; exit 1
fi
say "guest: $(console | grep -o '@@RESTART-NOW.*' | head -n 1); restarting the stub"
kill -USR1 "$MGR_PID"
wait_event '^ready 2$' 120 || bad "the stub did not come back after the restart"
grep -q 'handed over by the previous stub' "$WORK/service.log" || bad "the new stub did not take the VM's connection over"

# ---- 2. crash
if wait_console '@@CRASH-NOW' 600; then
    say "guest: $(console | grep -o '@@CRASH-NOW.*' | head -n 1); killing the stub (SIGKILL)"
    kill -USR2 "$MGR_PID"
    wait_event '^ready 3$' 120 || bad "the stub did not come back after the crash"
else
    bad "the second program never got to its crash point"
fi
rc=0; wait "$RUN_PID" || rc=$?; RUN_PID=''
[ $rc = 0 ] || bad "vmcuda-vm-run exit $rc: $(tail -n 5 "$WORK/run.stderr")"
c=$(console)
grep '^@@\(RESTART\|CRASH\)-\(RC\|ERR\)' <<< "$c" | head -n 8 | sed 's/^/  guest: /'
if grep -q '^@@RESTART-RC 0 ' <<< "$c" && grep -qxF "@@RESTART-OUT $REF" <<< "$c"; then
    echo "ok: the program running across the stub's restart ended with the result of an uninterrupted run ($REF)"
else
    bad "across the restart the program did not end with the uninterrupted run's result ($REF)"
fi
crash=$(grep -o '^@@CRASH-RC [0-9]* after [0-9]* s' <<< "$c" | head -n 1)
took=$(awk '{print $4}' <<< "$crash")
if [[ "$crash" == "@@CRASH-RC "[1-9]* ]] && grep -q '^@@CRASH-ERR .*GPU state is gone' <<< "$c" &&
        ! grep -q '^@@CRASH-OUT STEPS-OK' <<< "$c"; then
    echo "ok: the program running when the stub was killed failed ${took} s later saying its GPU state is gone"
    # Under TCG the guest is slow; natively the error comes within a second or two.
    [ "${took:-999}" -le 30 ] || bad "it took ${took} s (want a few seconds)"
else
    bad "the program running during the crash should fail saying its GPU state is gone (got: ${crash:-nothing})"
fi
if diff -u "$REPO/tests/cuda/expected/vector_add.out" "$WORK/run/vector_add.out" > "$WORK/va.diff" 2>&1; then
    echo "ok: a new program in the same VM after the crash ran (vector_add identical to the native run)"
else
    bad "vector_add after the crash differs:"; head -n 20 "$WORK/va.diff" | sed 's/^/  /'
fi
kill -TERM "$MGR_PID"; wait "$MGR_PID" 2>/dev/null; MGR_PID=''

if [ $fail = 0 ]; then
    rm -rf "$WORK"
    echo "=== $(( $(date +%s) - T0 ))s; PASSED"
else
    grep -a 'handed over\|clients saved\|lose their GPU state\|restored' "$WORK/service.log" | head -n 20 | sed 's/^/  stub: /'
    echo "=== $(( $(date +%s) - T0 ))s; FAILED (console, stub log: $WORK)"
fi
exit $fail
