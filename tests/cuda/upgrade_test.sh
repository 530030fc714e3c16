#!/usr/bin/env bash
# `vmcudactl upgrade` while CUDA programs run: the stub saves its clients, executes its binary
# again in place (same pid) with the listening socket and every connection handed over, and
# the new process brings every client back at once (one that opened another connection's IPC
# memory once that connection's exporter is back: a second upgrade checks it). The programs never see a
# disconnection: cuda_kill_probe steps (device memory checked every round) ends with the
# result of an uninterrupted run, and symbols_pitch, run over and over meanwhile (kernels,
# module variables), prints its native output every time; a program started afterwards runs.
#   upgrade_test.sh STUB VMCUDACTL LIBDIR BINDIR EXPECTED_DIR PROBE
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub (scripts/gpu-check.sh).
set -uo pipefail
stub="$1" ctl="$2" libdir="$3" bindir="$4" expected="$5" probe="$6"
work="$(mktemp -d)"
sock="$work/vm1.sock"
export VMCUDA_RUN_DIR="$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
VMRPC_LOG=2 "$stub" --socket "$sock" --state-dir "$work/state" 2>"$work/stub.log" &
stub_pid=$!
trap 'kill $stub_pid 2>/dev/null; wait $stub_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do [ -S "$sock" ] && [ -S "$work/vm1.ctl" ] && break; sleep 0.05; done
[ -S "$work/vm1.ctl" ] || { echo "the stub made no control socket"; cat "$work/stub.log"; exit 1; }

run() { VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$@"; }
ref=$(run "$probe" steps "$work/ref.state" 150 1 2>&1)
grep -q '^STEPS-OK' <<< "$ref" || { echo "the reference run failed: $ref"; exit 1; }

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
for _ in $(seq 600); do
  r=$(sed -n 's/^step round=\([0-9][0-9]*\) .*/\1/p' "$work/steps.state" 2>/dev/null)
  [ -n "$r" ] && [ "$r" -ge 5 ] && break
  sleep 0.05
done
if "$ctl" upgrade vm1 > "$work/upgrade.out" 2>&1; then
  echo "vmcudactl upgrade: $(tail -n 1 "$work/upgrade.out")"
else
  bad "vmcudactl upgrade failed:"; sed 's/^/  /' "$work/upgrade.out"
fi
# The same process, a new program image, serving again.
for _ in $(seq 200); do grep -q 'handed over by the previous stub' "$work/stub.log" && break; sleep 0.05; done
kill -0 $stub_pid 2>/dev/null || bad "the stub process is gone after the upgrade"
grep -q 'handed over by the previous stub' "$work/stub.log" || bad "the new stub did not take the connections over"
rc=0
wait $steps || rc=$?
touch "$work/stop"
wait $loop
if [ $rc = 0 ] && [ "$(cat "$work/steps.out")" = "$ref" ]; then
  echo "ok: the program upgraded under ended with the uninterrupted run's result ($ref)"
else
  bad "the program upgraded under: exit $rc, '$(cat "$work/steps.out")' (want '$ref'); stderr:"
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
  echo "ok: symbols_pitch ran $loops time(s) around the upgrade, each with its native output"
else
  bad "symbols_pitch around the upgrade: $good of $loops run(s) printed the native output"
fi
# (Not asserted: a symbols_pitch that was exiting during the upgrade never comes back, and
# then the saved state rightly stays.)
left=$(ls -d "$work"/state/vm1/upgrade-* 2>/dev/null)
if [ -z "$left" ]; then echo "the clients' saved state was removed once they were all back"
else echo "the upgrade's saved state stays (a client in it never came back): $left"; fi
# Programs on separate connections that share IPC memory, across a second upgrade: the
# importer connected first, so its connection comes back first, before its exporter's; the
# exporter's program idles meanwhile (it makes no call until its stdin ends).
mkfifo "$work/hold.in" "$work/export.in"
run "$bindir/ipc" hold < "$work/hold.in" > "$work/hold.out" 2>&1 &
holder=$!
exec 7>"$work/hold.in"
for _ in $(seq 400); do grep -q '^ready' "$work/hold.out" 2>/dev/null && break; sleep 0.05; done
run "$bindir/ipc" export < "$work/export.in" > "$work/export.out" 2>&1 &
exporter=$!
exec 8>"$work/export.in"
for _ in $(seq 400); do [ -s "$work/export.out" ] && break; sleep 0.05; done
head -n 1 "$work/export.out" >&7
for _ in $(seq 400); do grep -q '^first:' "$work/hold.out" 2>/dev/null && break; sleep 0.05; done
if ! grep -q '^first: cudaSuccess 41$' "$work/hold.out"; then
  bad "IPC before the second upgrade: $(tr '\n' ' ' < "$work/hold.out")"
elif "$ctl" upgrade vm1 > "$work/upgrade2.out" 2>&1; then
  echo "vmcudactl upgrade with IPC across connections: $(tail -n 1 "$work/upgrade2.out")"
else
  bad "vmcudactl upgrade with IPC across connections failed:"; sed 's/^/  /' "$work/upgrade2.out"
fi
for _ in $(seq 400); do [ "$(grep -c 'handed over by the previous stub' "$work/stub.log")" -ge 2 ] && break; sleep 0.05; done
echo go >&7
exec 7>&-
rc=0; wait $holder || rc=$?
exec 8>&-
rc2=0; wait $exporter || rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q '^again: cudaSuccess 41$' "$work/hold.out" && grep -q '^close: cudaSuccess$' "$work/hold.out"; then
  echo "ok: a program that opened another connection's IPC memory reads it after the upgrade (its connection came back first)"
  second=$(sed -n 's/.*clients saved in \(.*\))$/\1/p' "$work/stub.log" | sed -n 2p)
  if [ -n "$second" ] && [ ! -e "$second" ]; then echo "ok: the second upgrade's saved state was removed once both were back"
  else bad "the second upgrade's saved state stays: ${second:-(not found in the log)}"; fi
else
  bad "IPC across the upgrade: holder rc $rc ($(tr '\n' ' ' < "$work/hold.out")), exporter rc $rc2"
fi
if run "$bindir/vector_add" > "$work/va.out" 2>&1 && cmp -s "$expected/vector_add.out" "$work/va.out"; then
  echo "ok: a program started after the upgrade runs (vector_add identical to the native run)"
else
  bad "vector_add after the upgrade:"; head -n 5 "$work/va.out"
fi
grep -a 'restored from\|upgrading' "$work/stub.log" | sed 's/^/  stub: /'
if [ $fail != 0 ]; then echo "--- stub log:"; tail -n 30 "$work/stub.log"; fi
exit $fail
