#!/usr/bin/env bash
# Several CUDA programs at once on ONE stub, one of them faulting (an illegal address):
# the faulting one gets CUDA's sticky error, the others are served on, with results
# identical to native runs, and the stub serves a new client afterwards.
#   shared_stub_test.sh STUB LIBDIR BINDIR EXPECTED_DIR
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub (scripts/gpu-check.sh).
set -euo pipefail
stub="$1" libdir="$2" bindir="$3" expected="$4"
work="$(mktemp -d)"
sock="$work/stub.sock"
"$stub" --socket "$sock" 2>"$work/stub.log" &
stub_pid=$!
trap 'kill $stub_pid 2>/dev/null; wait $stub_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
run() {
  local rc=0
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$bindir/$1" >"$work/$1.$2" 2>"$work/$1.$2.err" || rc=$?
  [ $rc -eq 0 ] || { echo "$1 (run $2) exited with $rc; its stderr:"; tail -n 20 "$work/$1.$2.err"; }
  return $rc
}
status=0
pids=()
programs=${VMCUDA_SHARED_PROGRAMS:-fault vector_add streams_events}
for p in $programs; do run "$p" 1 & pids+=($!); done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ $status -eq 0 ] || { echo "--- the stub's log:"; tail -n 30 "$work/stub.log"; }
for p in $programs; do
  if diff -u "$expected/$p.out" "$work/$p.1"; then echo "$p (concurrent): identical to the native run"
  else echo "$p (concurrent): DIFFERS from the native run"; status=1; fi
done
kill -0 $stub_pid || { echo "the stub died"; cat "$work/stub.log"; exit 1; }
run vector_add 2 || status=1
if diff -q "$expected/vector_add.out" "$work/vector_add.2" >/dev/null; then echo "vector_add after the fault: identical"
else echo "vector_add after the fault: DIFFERS"; status=1; fi
exit $status
