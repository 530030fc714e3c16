#!/usr/bin/env bash
# The stub restarted under a service manager while CUDA programs run (systemctl restart
# vmcuda-stub@VM; the unit keeps the VM's fds in systemd's fd store): here a stand-in for
# systemd (tests/support/fdstore_manager.py) with the same protocol.
#  1. restart (SIGTERM, a new stub process with the stored fds): the old stub saves its
#     clients and leaves the connections to the store; the new one takes them over and
#     brings each client back: cuda_kill_probe steps ends with the result of an
#     uninterrupted run, symbols_pitch run over and over meanwhile prints its native output
#     every time, and a program started afterwards runs;
#  2. crash (SIGKILL, then a new stub process): the program that was running gets a clear
#     error within seconds (its GPU state is gone), never a hang or a wrong result, and a
#     new program in the same connection's place runs;
#  3. stop: the saved state left by a stub that was stopped for good is removed by the next
#     stub that starts without it.
#   restart_test.sh STUB LIBDIR BINDIR EXPECTED_DIR PROBE
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub (scripts/gpu-check.sh).
set -uo pipefail
stub="$1" libdir="$2" bindir="$3" expected="$4" probe="$5"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
manager="$here/../support/fdstore_manager.py"
[ -f "$here/fdstore_manager.py" ] && manager="$here/fdstore_manager.py"  # beside it (scripts/gpu-check.sh's carry)
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
work="$(mktemp -d)"
sock="$work/vm1.sock"
export VMCUDA_RUN_DIR="$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
mgr_pid=''
# Nothing of ours may outlive the test (a process left holding ctest's output pipe reads as a hang).
trap '[ -n "$mgr_pid" ] && kill -TERM $mgr_pid 2>/dev/null && wait $mgr_pid 2>/dev/null; pkill -KILL -f -- "$work/" 2>/dev/null; rm -rf "$work"' EXIT

# Waits until the events file has a line matching $1 (at most $2 seconds).
wait_event() {
  local i
  for i in $(seq $(( $2 * 20 ))); do grep -q "$1" "$work/events" 2>/dev/null && return 0; sleep 0.05; done
  echo "no '$1' from the service manager within $2 s; events:"; sed 's/^/  /' "$work/events"
  return 1
}
start_manager() {
  VMRPC_LOG=2 python3 "$manager" "$work" -- "$stub" --socket "$sock" --state-dir "$work/state" &
  mgr_pid=$!
}
run() { VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$@"; }
# Until cuda_kill_probe steps (state file $1) has done 5 rounds.
wait_rounds() {
  local r
  for _ in $(seq 600); do
    r=$(sed -n 's/^step round=\([0-9][0-9]*\) .*/\1/p' "$1" 2>/dev/null)
    [ -n "$r" ] && [ "$r" -ge 5 ] && return 0
    sleep 0.05
  done
  return 1
}

start_manager
wait_event '^ready 1$' 20 || { sed 's/^/  stub: /' "$work/service.log"; exit 1; }
grep -q '^stored listen$' "$work/events" || bad "the stub did not store its listening socket"
ref=$(VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$probe" steps "$work/ref.state" 150 1 2>&1)
grep -q '^STEPS-OK' <<< "$ref" || {
  echo "the reference run failed: $ref"; sed 's/^/  events: /' "$work/events"; tail -n 30 "$work/service.log"; exit 1; }
wait_event '^removed c1\.sock$' 10 || bad "the reference run's connection was not removed from the store when it closed"

# --- 1. restart
run "$probe" steps "$work/steps.state" 150 1 > "$work/steps.out" 2> "$work/steps.err" &
steps=$!
(
  n=0
  while [ ! -f "$work/stop" ]; do
    n=$((n + 1))
    run "$bindir/symbols_pitch" > "$work/loop.$n.out" 2> "$work/loop.$n.err"
    echo $? > "$work/loop.$n.rc"
  done
) &
loop=$!
wait_rounds "$work/steps.state" || bad "the program made no progress before the restart"
kill -USR1 $mgr_pid
wait_event '^ready 2$' 60 || bad "the stub did not come back after the restart"
grep -q 'clients saved in' "$work/service.log" || bad "the stopping stub did not save its clients"
grep -q 'handed over by the previous stub' "$work/service.log" || bad "the new stub did not take the connections over"
rc=0
wait $steps || rc=$?
touch "$work/stop"
wait $loop
if [ $rc = 0 ] && [ "$(cat "$work/steps.out")" = "$ref" ]; then
  echo "ok: the program running across the restart ended with the uninterrupted run's result ($ref)"
else
  bad "the program across the restart: exit $rc, '$(cat "$work/steps.out")' (want '$ref'); stderr:"
  sed 's/^/  /' "$work/steps.err" | tail -n 5
fi
loops=0 good=0
for f in "$work"/loop.*.rc; do
  [ -f "$f" ] || continue
  i=${f#"$work"/loop.}; i=${i%.rc}
  loops=$((loops + 1))
  if [ "$(cat "$f")" = 0 ] && cmp -s "$expected/symbols_pitch.out" "$work/loop.$i.out"; then good=$((good + 1))
  else echo "symbols_pitch run $i: rc $(cat "$f")"; tail -n 3 "$work/loop.$i.err" | sed 's/^/  /'; fi
done
if [ $loops -ge 1 ] && [ $good = $loops ]; then
  echo "ok: symbols_pitch ran $loops time(s) around the restart, each with its native output"
else
  bad "symbols_pitch around the restart: $good of $loops run(s) printed the native output"
fi
if run "$bindir/vector_add" > "$work/va.out" 2>&1 && cmp -s "$expected/vector_add.out" "$work/va.out"; then
  echo "ok: a program started after the restart runs (vector_add identical to the native run)"
else
  bad "vector_add after the restart:"; head -n 5 "$work/va.out"
fi

# --- 2. crash
run "$probe" steps "$work/crash.state" 400 1 > "$work/crash.out" 2> "$work/crash.err" &
steps=$!
wait_rounds "$work/crash.state" || bad "the program made no progress before the crash"
kill -USR2 $mgr_pid
t0=$(date +%s)
wait_event '^ready 3$' 60 || bad "the stub did not come back after the crash"
rc=0
timeout 60 tail --pid=$steps -f /dev/null
if kill -0 $steps 2>/dev/null; then
  bad "the program running during the crash still hangs 60 s later"; kill -9 $steps
fi
wait $steps || rc=$?
took=$(( $(date +%s) - t0 ))
if [ $rc != 0 ] && grep -q 'GPU state is gone' "$work/crash.err"; then
  echo "ok: the program running during the crash failed after ${took} s saying: $(grep -o 'GPU state is gone[^;]*' "$work/crash.err" | head -n 1)"
  [ $took -le 15 ] || bad "it took ${took} s (want a few seconds)"
else
  bad "the program running during the crash: exit $rc, want a failure saying its GPU state is gone; stderr:"
  sed 's/^/  /' "$work/crash.err" | tail -n 5
fi
if run "$bindir/vector_add" > "$work/va2.out" 2>&1 && cmp -s "$expected/vector_add.out" "$work/va2.out"; then
  echo "ok: a program started after the crash runs (vector_add identical to the native run)"
else
  bad "vector_add after the crash:"; head -n 5 "$work/va2.out"
fi

# --- 3. stop for good: state saved for a restart that never comes goes at the next start
run "$probe" steps "$work/stop.state" 400 1 > /dev/null 2>&1 &
steps=$!
wait_rounds "$work/stop.state"
kill -TERM $mgr_pid
wait $mgr_pid
mgr_pid=''
wait $steps  # its connection went with the store: it fails, as when a VM's stub stops
left=$(ls -d "$work"/state/vm1/restart-* 2>/dev/null | wc -l)
[ "$left" -ge 1 ] || bad "the stopping stub saved nothing (no restart-* in $work/state/vm1)"
: > "$work/events"
start_manager
wait_event '^ready 1$' 20 || bad "the stub did not start again"
left=$(ls -d "$work"/state/vm1/restart-* 2>/dev/null | wc -l)
if [ "$left" = 0 ]; then echo "ok: the state saved for a restart that never came was removed at the next start"
else bad "$left restart-* dir(s) stay in $work/state/vm1 after a fresh start"; fi

grep -a 'handed over\|clients saved\|lose their GPU state\|removed' "$work/service.log" | sed 's/^/  stub: /' | head -n 20
if [ $fail != 0 ]; then echo "--- stub log:"; tail -n 40 "$work/service.log"; echo "--- events:"; tail -n 20 "$work/events"; fi
exit $fail
