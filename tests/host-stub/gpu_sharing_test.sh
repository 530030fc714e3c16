#!/usr/bin/env bash
# --gpu-sharing mps (issue 10 point 2: a small program's latency beside another's long kernel):
# what the stub does with the VM's MPS control daemon, with a stand-in for NVIDIA's
# nvidia-cuda-mps-control (fake_mps_control.py; the GPU machine runs the real one:
# scripts/gpu-latency-beside-long-kernel.sh). Checks that the stub
#  - starts `CONTROL -f` before serving, in a private directory of its own beside the socket
#    (mode 0700), with no fd of its own passed on, and waits until it answers;
#  - points its worker processes at that daemon (CUDA_MPS_PIPE_DIRECTORY in their environment)
#    and still serves programs (vector_add: its native output);
#  - asks the daemon to quit when it stops; finds a daemon that answers already (after an
#    upgrade replaced the stub's image) instead of starting a second;
#  - takes the mode from the policy file; refuses, with what to do, a missing daemon binary,
#    a daemon that dies at start, a directory that is a link, and --isolation thread (the VM
#    would be one MPS client: a fault would keep MPS from serving it until a restart).
#   gpu_sharing_test.sh STUB LIBDIR CUDA_BINDIR EXPECTED_DIR ENDLESS_BIN
set -euo pipefail
stub="$1" libdir="$2" bindir="$3" expected="$4" endless="$5"
fake="$(cd "$(dirname "$0")" && pwd)/fake_mps_control.py"
work="$(mktemp -d)"
export FAKE_MPS_RECORD="$work/record" VMCUDA_RUN_DIR="$work"
stub_pid= app= daemon=
cleanup() {
  [ -n "$app" ] && { kill -9 "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; }
  [ -n "$stub_pid" ] && { kill "$stub_pid" 2>/dev/null || true; wait "$stub_pid" 2>/dev/null || true; }
  [ -n "$daemon" ] && { kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; }
  # Only the daemons this test started (their pids are in its record), never another test's
  # running at the same time (security_kernel_time_limit_mps uses the same stand-in).
  for pid in $(sed -n 's/^start pid=\([0-9]*\) .*/\1/p' "$work/record" 2>/dev/null); do
    tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -q "^CUDA_MPS_PIPE_DIRECTORY=$work/" && kill "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- record:"; cat "$work/record" 2>/dev/null || true
  echo "--- the stub's log:"; tail -n 30 "$work/stub.log" 2>/dev/null || true
  exit 1
}
start_stub() {  # VM ARGS...
  local vm="$1"; shift
  "$stub" --socket "$work/$vm.sock" --control-socket none --policy "$work/policy.toml" "$@" 2>"$work/stub.log" &
  stub_pid=$!
  for _ in $(seq 200); do [ -S "$work/$vm.sock" ] && return 0; kill -0 "$stub_pid" 2>/dev/null || break; sleep 0.05; done
  fail "the stub did not start"
}
stop_stub() { kill "$stub_pid"; wait "$stub_pid" 2>/dev/null || true; stub_pid=; }
: >"$work/policy.toml"

# 1. The daemon is the VM's own, started before serving, given the GPUs the stub was given.
CUDA_VISIBLE_DEVICES=0 start_stub vm1 --gpu-sharing mps --mps-control "$fake"
d="$work/mps-vm1"
grep -q "^start pid=[0-9]* pipe=$d/pipe log=$d/log cvd=0 stdin_is_devnull=True fds=\[0, 1, 2, 3\]$" "$work/record" ||
  fail "the stub did not start the daemon in $d with its GPUs and nothing of its own (record above)"
[ "$(stat -c %a "$d")" = 700 ] || fail "$d has mode $(stat -c %a "$d"), not 700"
grep -q "started the VM's MPS control daemon" "$work/stub.log" || fail "the stub did not log the daemon"
grep -q "GPUs shared at once through the VM's MPS daemon" "$work/stub.log" || fail "the serving line does not say MPS"
echo "started: $(grep -m1 "started the VM's MPS" "$work/stub.log" | sed 's/.*GPU sharing/GPU sharing/')"

# 2. Its workers are pointed at it, and programs are served.
VMCUDA_SOCKET="$work/vm1.sock" LD_LIBRARY_PATH="$libdir" "$endless" timeout "$work/never" >"$work/endless.out" 2>&1 &
app=$!
for _ in $(seq 400); do grep -q "^query=" "$work/endless.out" 2>/dev/null && break; sleep 0.05; done
grep -q "^query=600" "$work/endless.out" || fail "endless_kernel did not start: $(cat "$work/endless.out")"
worker=$(pgrep -P "$stub_pid" -f -- "--gpu-sharing" | head -n 1 || true)
[ -n "$worker" ] || fail "no worker process"
tr '\0' '\n' <"/proc/$worker/environ" | grep -qx "CUDA_MPS_PIPE_DIRECTORY=$d/pipe" ||
  fail "worker $worker is not pointed at the VM's daemon"
# The server numbers the GPUs it was given from 0; a client that names them again fails.
tr '\0' '\n' <"/proc/$worker/environ" | grep -q "^CUDA_VISIBLE_DEVICES=" &&
  fail "worker $worker names CUDA_VISIBLE_DEVICES again under MPS"
kill -9 "$app"; wait "$app" 2>/dev/null || true; app=
VMCUDA_SOCKET="$work/vm1.sock" LD_LIBRARY_PATH="$libdir" timeout 60 "$bindir/vector_add" >"$work/vector_add.out" 2>&1 ||
  fail "vector_add failed: $(cat "$work/vector_add.out")"
cmp -s "$work/vector_add.out" "$expected/vector_add.out" || fail "vector_add: $(diff "$work/vector_add.out" "$expected/vector_add.out" | head)"
echo "served: worker $worker has CUDA_MPS_PIPE_DIRECTORY=$d/pipe; vector_add gives its native output"

# 3. Stopping the stub stops the daemon.
pid=$(sed -n 's/^start pid=\([0-9]*\) .*/\1/p' "$work/record" | head -n 1)
stop_stub
grep -q "^command quit pipe=$d/pipe$" "$work/record" || fail "the stub did not ask the daemon to quit"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "the daemon (pid $pid) still runs after the stub stopped"
echo "stopped: quit sent, daemon $pid gone"

# 4. A daemon that answers already (the stub's image replaced by an upgrade) is used, not doubled.
: >"$work/record"
CUDA_MPS_PIPE_DIRECTORY="$d/pipe" CUDA_MPS_LOG_DIRECTORY="$d/log" "$fake" -f </dev/null &
daemon=$!
for _ in $(seq 100); do [ -S "$d/pipe/control" ] && break; sleep 0.05; done
start_stub vm1 --gpu-sharing mps --mps-control "$fake"
grep -q "answers already" "$work/stub.log" || fail "the stub did not find the running daemon"
[ "$(grep -c '^start' "$work/record")" = 1 ] || fail "a second daemon was started"
stop_stub
wait "$daemon" 2>/dev/null || true; daemon=
echo "found: the running daemon was used, and quit with the stub"

# 5. The policy's key; the mistakes a user makes.
printf '[vm.vm3]\ngpu_sharing = "mps"\n' >"$work/policy.toml"
: >"$work/record"
start_stub vm3 --mps-control "$fake"
grep -q "^start pid=[0-9]* pipe=$work/mps-vm3/pipe" "$work/record" || fail "policy gpu_sharing = \"mps\" started no daemon"
stop_stub
: >"$work/policy.toml"
rc=0; "$stub" --socket "$work/vm4.sock" --control-socket none --policy "$work/policy.toml" --gpu-sharing mps \
  --mps-control "$work/no-such-mps-control" 2>"$work/missing.log" || rc=$?
[ "$rc" = 3 ] && grep -q "cannot run $work/no-such-mps-control.*--gpu-sharing time" "$work/missing.log" ||
  fail "a missing daemon binary: rc $rc, $(cat "$work/missing.log")"
printf '#!/bin/sh\necho "daemon refused to start" >>"$CUDA_MPS_LOG_DIRECTORY/control.log"\nexit 5\n' >"$work/dying-control"
chmod +x "$work/dying-control"
rc=0; "$stub" --socket "$work/vm5.sock" --control-socket none --policy "$work/policy.toml" --gpu-sharing mps \
  --mps-control "$work/dying-control" 2>"$work/dying.log" || rc=$?
[ "$rc" = 3 ] && grep -q "ended (exit 5) before it answered.*" "$work/dying.log" && grep -q "daemon refused to start" "$work/dying.log" ||
  fail "a daemon that dies at start: rc $rc, $(cat "$work/dying.log")"
rc=0; "$stub" --socket "$work/vm7.sock" --control-socket none --policy "$work/policy.toml" --gpu-sharing mps \
  --isolation thread --mps-control "$fake" 2>"$work/thread.log" || rc=$?
[ "$rc" = 2 ] && grep -q "needs --isolation process" "$work/thread.log" || fail "mps with threads: rc $rc, $(cat "$work/thread.log")"
[ -d "$work/mps-vm7" ] && fail "a daemon directory was made for a refused mode"
mkdir "$work/elsewhere"; ln -s "$work/elsewhere" "$work/mps-vm6"
rc=0; "$stub" --socket "$work/vm6.sock" --control-socket none --policy "$work/policy.toml" --gpu-sharing mps \
  --mps-control "$fake" 2>"$work/link.log" || rc=$?
[ "$rc" = 3 ] && grep -q "is not a directory of this user" "$work/link.log" || fail "a linked directory: rc $rc, $(cat "$work/link.log")"
[ -S "$work/vm6.sock" ] && fail "the stub served with a linked MPS directory"
echo "refused with what to do: $(head -n 1 "$work/missing.log")"
echo "PASS"
