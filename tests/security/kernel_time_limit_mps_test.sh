#!/usr/bin/env bash
# Finding 10.6 (liveness) with --gpu-sharing mps: under MPS the GPU context is the MPS server's,
# so ending a worker process does not stop its kernel (seen on an H100: the VM's next program
# got no context). The stub ends the client's GPU work through the VM's MPS daemon first
# (terminate_client), then the worker; if the daemon refuses, it restarts the daemon.
#  1. --kernel-time-limit 2: endless_kernel gets cudaErrorLaunchTimeout (702) at its
#     synchronize; terminate_client was sent for its worker's pid, before the worker ended;
#     the worker is gone; the next program (vector_add) prints what it prints natively.
#  2. No time limit: a program that leaves its endless kernel running and exits (a closed
#     client whose kernel never ends) has its worker's work ended by terminate_client and
#     its worker killed; the next program runs correctly.
#  3. (stand-in daemon only) The daemon refuses terminate_client: the stub restarts it (quit,
#     then a new daemon with the stub's GPUs), says so and that the VM's other GPU work there
#     ends; the next program runs correctly.
# With tests/host-stub/fake_mps_control.py as CONTROL (CI) the daemon's record is checked too;
# with NVIDIA's nvidia-cuda-mps-control (scripts/gpu-check.sh) cases 1 and 2 run on the GPU.
#   kernel_time_limit_mps_test.sh STUB LIBDIR ENDLESS_BIN CUDA_BINDIR EXPECTED_DIR CONTROL
set -euo pipefail
stub="$1" libdir="$2" endless="$3" bindir="$4" expected="$5" control="$6"
source "$(cd "$(dirname "$0")/../cuda" && pwd)/gpu_only.sh"
fake=0
[[ "$(basename "$control")" == fake_mps_control.py ]] && fake=1
work="$(mktemp -d)"
export FAKE_MPS_RECORD="$work/record" VMCUDA_RUN_DIR="$work"
stub_pid= app=
cleanup() {
  [ -n "$app" ] && { kill -9 "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; }
  [ -n "$stub_pid" ] && { kill "$stub_pid" 2>/dev/null || true; wait "$stub_pid" 2>/dev/null || true; }
  # A stand-in daemon its stub left (only those this test started, by the record's pids).
  for pid in $(sed -n 's/^start pid=\([0-9]*\) .*/\1/p' "$work/record" 2>/dev/null); do
    tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -q "^CUDA_MPS_PIPE_DIRECTORY=$work/" && kill "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- record:"; cat "$work/record" 2>/dev/null || true
  echo "--- the stub's log:"; tail -n 40 "$work/stub.log" 2>/dev/null || true
  exit 1
}
start_stub() {  # VM ARGS...
  local vm="$1"; shift
  : >"$work/stub.log"
  "$stub" --socket "$work/$vm.sock" --control-socket none --gpu-sharing mps --mps-control "$control" "$@" \
    2>"$work/stub.log" &
  stub_pid=$!
  for _ in $(seq 400); do [ -S "$work/$vm.sock" ] && return 0; kill -0 "$stub_pid" 2>/dev/null || break; sleep 0.05; done
  fail "the stub did not start"
}
stop_stub() { kill "$stub_pid"; wait "$stub_pid" 2>/dev/null || true; stub_pid=; }
daemon_pid() { sed -n 's/^start pid=\([0-9]*\) .*/\1/p' "$work/record" | tail -n 1; }
vector_add_after() {  # VM WHAT: the next program gives its native output
  local rc=0
  VMCUDA_SOCKET="$work/$1.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/vector_add" >"$work/va.out" \
    2>"$work/va.err" || rc=$?
  [ $rc -eq 0 ] || fail "vector_add after $2 exited with $rc: $(tail -n 5 "$work/va.err")"
  cmp -s <(comparable "$work/va.out" "$stub") <(comparable "$expected/vector_add.out" "$stub") ||
    fail "vector_add after $2 differs from its native run: $(diff "$work/va.out" "$expected/vector_add.out" | head)"
  echo "vector_add after $2: identical to its native run"
}
endless_timeout() {  # VM: endless_kernel under the time limit; sets worker to its worker's pid
  local out="$work/endless.out"
  VMCUDA_SOCKET="$work/$1.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$endless" timeout >"$out" 2>"$out.err" ||
    fail "endless_kernel exited with $?: $(cat "$out" "$out.err")"
  for want in launch=0 query=600 sync=702 get=702 malloc_after=702 sync_again=702 name=cudaErrorLaunchTimeout; do
    grep -qx "$want" "$out" || fail "endless_kernel: expected $want; it printed: $(tr '\n' ' ' <"$out")"
  done
  # The worker's own lines name it (`worker[PID]`): it answers cudaErrorLaunchTimeout from the
  # moment the limit fires, so the program may have closed its connection before the stub saw
  # the worker end, and the stub then has no slot left to log it for.
  worker=
  for _ in $(seq 100); do
    worker=$(sed -n 's/.* worker\[\([0-9]*\)\] .*\(has not finished (--kernel-time-limit\|GPU work was ended through\|could not end its GPU work\).*/\1/p' \
      "$work/stub.log" | tail -n 1)
    [ -n "$worker" ] && break
    sleep 0.1
  done
  [ -n "$worker" ] || fail "the worker past the time limit did not log it"
}

# 1. The time limit under MPS.
start_stub vm1 --kernel-time-limit 2
endless_timeout vm1
echo "time limit: endless_kernel got cudaErrorLaunchTimeout (702); its worker $worker ended"
for _ in $(seq 100); do kill -0 "$worker" 2>/dev/null || break; sleep 0.1; done
kill -0 "$worker" 2>/dev/null && fail "worker $worker still runs 10 s later"
if [ $fake = 1 ]; then
  grep -q "^command terminate_client $(daemon_pid) $worker pipe=" "$work/record" ||
    fail "no terminate_client $(daemon_pid) $worker was sent to the VM's daemon"
  grep -q "its GPU work was ended through the VM's MPS daemon" "$work/stub.log" || fail "the worker did not log it"
else
  # Ended by the worker's terminate_client, by the stub's second one (after 5 s), or by a
  # restart of the daemon: which one, the log says.
  for _ in $(seq 600); do
    grep -q "GPU work was ended\|MPS control daemon started again" "$work/stub.log" && break
    sleep 0.05
  done
  grep -q "GPU work was ended\|MPS control daemon started again" "$work/stub.log" ||
    fail "the stub says nothing of the client's GPU work under MPS within 30 s"
fi
grep "GPU sharing by MPS\|GPU work" "$work/stub.log" | sed 's/^/  log: /' | head -n 6
vector_add_after vm1 "the time limit"
[ $fake = 0 ] || [ "$(grep -c '^start' "$work/record")" = 1 ] || fail "the daemon was restarted, needlessly"
stop_stub

# 2. A closed program whose kernel never ends (no time limit): its worker's work is ended
# through the daemon before the worker is killed.
: >"$work/record"
start_stub vm2
VMCUDA_SOCKET="$work/vm2.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$endless" leave >"$work/leave.out" 2>&1 &
app=$!
for _ in $(seq 400); do grep -q "^query=" "$work/leave.out" 2>/dev/null && break; sleep 0.05; done
grep -qx "query=600" "$work/leave.out" || fail "endless_kernel leave did not launch: $(cat "$work/leave.out")"
# The stub's child that runs the stub's binary (a worker: "exe", started from /proc/self/exe),
# not the VM's MPS daemon.
worker=$(ps -o pid=,comm= --ppid "$stub_pid" | awk -v c="$(basename "$stub" | cut -c1-15)" '$2 == c || $2 == "exe" {print $1; exit}' || true)
[ -n "$worker" ] || fail "no worker process among the stub's children: $(ps -o pid=,comm= --ppid "$stub_pid" | tr "\n" " ")"
wait "$app" || fail "endless_kernel leave exited with $?"
app=
# Its connection closed: the worker is ended (terminate_client, then SIGKILL), within the
# daemon's bounds (docs/security.md).
for _ in $(seq 600); do kill -0 "$worker" 2>/dev/null || break; sleep 0.05; done
kill -0 "$worker" 2>/dev/null && fail "worker $worker of the closed program still runs 30 s later"
if [ $fake = 1 ]; then
  grep -q "^command terminate_client $(daemon_pid) $worker pipe=" "$work/record" ||
    fail "no terminate_client $(daemon_pid) $worker was sent before the worker was killed"
fi
echo "closed program with an endless kernel: its worker $worker ended$([ $fake = 1 ] && echo ", after terminate_client")"
grep "GPU sharing by MPS\|GPU work" "$work/stub.log" | sed 's/^/  log: /' | tail -n +2 | head -n 6
vector_add_after vm2 "the closed program"
stop_stub

# 3. A daemon that refuses terminate_client (older than CUDA 11.5): restarted.
if [ $fake = 1 ]; then
  : >"$work/record"
  CUDA_VISIBLE_DEVICES=0 FAKE_MPS_TERMINATE=refuse start_stub vm3 --kernel-time-limit 2
  first=$(daemon_pid)
  endless_timeout vm3
  grep -q "could not end its GPU work through the VM's MPS daemon" "$work/stub.log" ||
    fail "the worker did not log the refusal"
  # The stub waits kMpsClientGoneWaitMs (5 s) for the server to let go, asks once more, then
  # restarts the daemon.
  for _ in $(seq 400); do [ "$(grep -c '^start' "$work/record")" = 2 ] && break; sleep 0.05; done
  [ "$(grep -c '^start' "$work/record")" = 2 ] || fail "the daemon was not started again"
  [ "$(grep -c "^command terminate_client $first $worker pipe=" "$work/record")" = 2 ] ||
    fail "terminate_client was not asked by the worker and once more by the stub"
  sed -n "/^command terminate_client $first $worker/,\$p" "$work/record" | grep -q "^command quit pipe=" ||
    fail "the old daemon was not asked to quit before the new one started"
  kill -0 "$first" 2>/dev/null && fail "the old daemon $first still runs"
  [ "$(grep -c '^start pid=[0-9]* .* cvd=0 ' "$work/record")" = 2 ] ||
    fail "the new daemon did not get the GPUs the stub was given (CUDA_VISIBLE_DEVICES=0)"
  grep -q "restarting the VM's MPS daemon and its servers: the VM's other programs on its GPUs lose their GPU work" \
    "$work/stub.log" || fail "the restart's log line does not say what it costs"
  grep -q "MPS control daemon started again" "$work/stub.log" || fail "the stub did not log the new daemon"
  echo "refused terminate_client: daemon $first restarted as $(daemon_pid)"
  vector_add_after vm3 "the restart"
  stop_stub
fi
echo "PASS"
