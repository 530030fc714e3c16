#!/usr/bin/env bash
# Finding 10.6 (liveness): a per-VM kernel time limit. With vmcuda-stub --kernel-time-limit 1:
#  - a program whose kernel never ends (endless_kernel) gets cudaErrorLaunchTimeout (702) at
#    its synchronize, sticky as natively; its worker is gone and the VM has none of its GPU
#    memory charged any more while the program still holds its slot;
#  - another program of the same VM, running meanwhile, prints exactly what it prints
#    natively, every run;
#  - once the program has gone, its slot serves new programs (the same case again, then
#    vector_add);
#  - --kernel-time-limit with --isolation thread is refused with the reason.
# Bounds are generous (CI machines are slow): this checks behaviour, not timing.
#   kernel_time_limit_test.sh STUB VMCUDACTL LIBDIR ENDLESS_BIN CUDA_BINDIR EXPECTED_DIR
set -euo pipefail
stub="$1" ctl="$2" libdir="$3" endless="$4" bindir="$5" expected="$6"
work="$(mktemp -d)"
sock="$work/vm1.sock"
export VMCUDA_RUN_DIR="$work"
stub_pid=
loop_pid=
cleanup() {
  touch "$work/stop" "$work/release"
  [ -n "$loop_pid" ] && { kill "$loop_pid" 2>/dev/null || true; wait "$loop_pid" 2>/dev/null || true; }
  [ -n "$stub_pid" ] && { kill "$stub_pid" 2>/dev/null || true; wait "$stub_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- the stub's log:"; tail -n 40 "$work/stub.log"
  exit 1
}
charged() {
  "$ctl" status vm1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["memory_charged_bytes"])'
}

# 1. Thread isolation: refused, with the reason.
rc=0
"$stub" --socket "$work/thread.sock" --isolation thread --kernel-time-limit 1 2>"$work/thread.log" || rc=$?
[ $rc -eq 2 ] || fail "--isolation thread --kernel-time-limit 1 exited with $rc, not 2"
grep -q "needs --isolation process" "$work/thread.log" || fail "no reason given: $(cat "$work/thread.log")"
[ ! -e "$work/thread.sock" ] || fail "a refused stub made its socket"
echo "thread isolation with a kernel time limit: refused ($(head -n 1 "$work/thread.log"))"

# 2. The limit on a stub with worker processes (the default).
"$stub" --socket "$sock" --kernel-time-limit 1 --memory-quota-mib 2048 2>"$work/stub.log" &
stub_pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && [ -S "$work/vm1.ctl" ] && break; sleep 0.05; done
[ -S "$work/vm1.ctl" ] || fail "the stub did not start"
grep -q "kernel time limit 1 s" "$work/stub.log" || fail "the stub does not say its kernel time limit"

run() {  # NAME RUN: one program against the stub, its output compared with the native run's
  local rc=0
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/$1" >"$work/$1.$2" 2>"$work/$1.$2.err" || rc=$?
  [ $rc -eq 0 ] || { echo "$1 (run $2) exited with $rc: $(tail -n 5 "$work/$1.$2.err")"; return 1; }
  diff -q "$expected/$1.out" "$work/$1.$2" >/dev/null || { echo "$1 (run $2) differs from the native run"; return 1; }
}
# Another program of the VM, over and over while the endless one runs and is ended.
(
  i=0
  while [ ! -e "$work/stop" ] || [ $i -lt 2 ]; do
    i=$((i + 1))
    run vector_add "loop$i" || { touch "$work/loop_failed"; exit 1; }
  done
  echo "$i" >"$work/loop_runs"
) &
loop_pid=$!

endless_case() {  # RUN: the endless program, checked; it keeps its slot until "release"
  local out="$work/endless.$1" start end
  rm -f "$work/release"
  start=$(date +%s)
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$endless" timeout "$work/release" >"$out" 2>"$out.err" &
  local app=$!
  for _ in $(seq 1200); do grep -q "^name=" "$out" 2>/dev/null && break; kill -0 $app 2>/dev/null || break; sleep 0.05; done
  end=$(date +%s)
  grep -q "^name=" "$out" || fail "endless_kernel (run $1) did not get past its synchronize in 60 s: $(cat "$out" "$out.err")"
  for want in malloc=0 memset=0 malloc_big=0 sync_before=0 launch=0 query=600 sync=702 get=702 malloc_after=702 \
              sync_again=702 name=cudaErrorLaunchTimeout; do
    grep -qx "$want" "$out" || fail "endless_kernel (run $1): expected $want; it printed: $(tr '\n' ' ' <"$out")"
  done
  echo "endless_kernel (run $1): cudaErrorLaunchTimeout at its synchronize, sticky ($((end - start)) s; the limit is 1 s)"
  # Its worker is gone and the VM has its memory back, while the program still holds its slot.
  local logged="ran past the kernel time limit\|has not finished (--kernel-time-limit"
  # (the worker's own line, or the stub's once it saw the worker end: the program may be gone first)
  for _ in $(seq 100); do grep -q "$logged" "$work/stub.log" && break; sleep 0.1; done
  grep -q "$logged" "$work/stub.log" || fail "the stub did not log the timeout"
  # vector_add, running meanwhile in a loop, holds up to 60 MiB and its context
  # (VMCUDA_CONTEXT_BYTES); for a moment two of its runs overlap, with a context each: a
  # sample is judged only after the charge was at most that once.
  local c= most=$(( (128 << 20) + ${VMCUDA_CONTEXT_BYTES:-549453824} ))
  for _ in $(seq 100); do
    c="$(charged)"
    [ "$c" -lt "$most" ] && break
    sleep 0.1
  done
  [ "$c" -lt "$most" ] ||
    fail "the ended program's 256 MiB are still charged to the VM ($c bytes)"
  echo "endless_kernel (run $1): its worker is gone, its GPU memory no longer charged to the VM"
  touch "$work/release"
  wait $app || fail "endless_kernel (run $1) exited with $?"
}
endless_case 1
# Its slot serves again: the same case once more, the other program still running.
endless_case 2
touch "$work/stop"
wait $loop_pid || fail "the other program failed meanwhile: see above"
loop_pid=
echo "vector_add meanwhile: identical to the native run in each of $(cat "$work/loop_runs") runs"
run vector_add after || fail "vector_add after the timeouts"
kill -0 $stub_pid || fail "the stub died"
# A program that has exited may still be closing its session in its worker (its context goes
# last, and with it the context's charge): a few seconds at most.
for _ in $(seq 100); do c="$(charged)"; [ "$c" = 0 ] && break; sleep 0.1; done
[ "$c" = 0 ] || fail "the VM has $c bytes charged 10 s after its last program left"
echo "vector_add afterwards: identical; nothing charged to the VM"
