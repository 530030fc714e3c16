#!/usr/bin/env bash
# Finding 10.6: programs served at once per VM, with unmodified CUDA programs on the test
# stub (worker processes, the default). With vmcuda-stub --max-clients 1:
#  - a program that holds its place (endless_kernel, whose kernel never ends) is served;
#  - another program (device_query) meanwhile gets cudaErrorDevicesUnavailable at its first call,
#    and says why (the guest library's line names --max-clients); the stub logs the refusal
#    with the VM's name and the limit, once for many refusals; no worker process is started
#    for any refused program;
#  - once the first program has gone, the place serves again: vector_add gives its native
#    output.
#   max_clients_test.sh STUB LIBDIR ENDLESS_BIN CUDA_BINDIR EXPECTED_DIR
set -euo pipefail
stub="$1" libdir="$2" endless="$3" bindir="$4" expected="$5"
work="$(mktemp -d)"
sock="$work/vm7.sock"
export VMCUDA_RUN_DIR="$work"
stub_pid= app=
cleanup() {
  [ -n "$app" ] && { kill -9 "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; }
  [ -n "$stub_pid" ] && { kill "$stub_pid" 2>/dev/null || true; wait "$stub_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- the stub's log:"; tail -n 30 "$work/stub.log"
  exit 1
}
workers() { pgrep -P "$stub_pid" | wc -l; }

"$stub" --socket "$sock" --max-clients 1 --control-socket none 2>"$work/stub.log" &
stub_pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "the stub did not start"

VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" "$endless" timeout "$work/never" >"$work/endless.out" 2>&1 &
app=$!
for _ in $(seq 400); do grep -q "^query=" "$work/endless.out" 2>/dev/null && break; sleep 0.05; done
grep -q "^query=600" "$work/endless.out" || fail "endless_kernel did not start: $(cat "$work/endless.out")"
[ "$(workers)" = 1 ] || fail "$(workers) worker processes for one program"

for i in 1 2 3 4 5; do
  rc=0
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 60 "$bindir/device_query" >"$work/refused.$i" 2>&1 || rc=$?
  [ $rc -ne 0 ] || fail "device_query ran although the VM's one place is taken"
  grep -q "cudaGetDeviceCount(&n): 46 cudaErrorDevicesUnavailable" "$work/refused.$i" ||
    fail "device_query did not get cudaErrorDevicesUnavailable: $(head -n 3 "$work/refused.$i")"
  grep -q -- "--max-clients" "$work/refused.$i" || fail "device_query was not told why: $(cat "$work/refused.$i")"
done
echo "refused 5 times: $(grep -m1 -- '--max-clients' "$work/refused.1")"
[ "$(workers)" = 1 ] || fail "refused programs started worker processes ($(workers))"
grep -q "vmcuda-stub vm7.*at most 1 at once for this VM" "$work/stub.log" || fail "the stub did not log the refusal"
n=$(grep -c "at most 1 at once" "$work/stub.log")
[ "$n" -le 2 ] || fail "the stub logged $n lines for 5 refusals (rate-limited: one per 10 s)"
echo "the stub's log: $(grep -m1 'at most 1 at once' "$work/stub.log")"
grep -q "^sync=" "$work/endless.out" && fail "the program served first was disturbed: $(cat "$work/endless.out")"
kill -0 "$app" || fail "the program served first ended"

kill -9 "$app"; wait "$app" 2>/dev/null || true; app=
# Its connection closes, its worker is killed and reaped: then its place is free.
for _ in $(seq 200); do [ "$(workers)" = 0 ] && break; sleep 0.05; done
[ "$(workers)" = 0 ] || fail "the first program's worker outlived its connection by 10 s"
ok=0
VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/vector_add" >"$work/after" 2>"$work/after.err" && ok=1
[ $ok = 1 ] || fail "vector_add was not served after the first program left: $(tail -n 3 "$work/after" "$work/after.err")"
diff -q "$expected/vector_add.out" "$work/after" >/dev/null || fail "vector_add differs from the native run"
echo "after the first program left: vector_add served, identical to the native run"
kill -0 "$stub_pid" || fail "the stub died"
echo PASS
