#!/usr/bin/env bash
# Every CUDA test program except the faulting one, all at once, on ONE stub whose clients are
# threads of one process and whose non-blocking work goes through one working thread per GPU
# (`--isolation thread --gpu-thread on`): outputs identical to the native runs, and the
# working thread did issue the work (the stub reports how many tasks it ran).
#   gpu_thread_test.sh STUB LIBDIR BINDIR EXPECTED_DIR
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub (scripts/gpu-check.sh).
set -euo pipefail
stub="$1" libdir="$2" bindir="$3" expected="$4"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_only.sh"  # comparable: [GPU only] lines
work="$(mktemp -d)"
sock="$work/stub.sock"
# On the H100 (2026-11-27) this run failed before three fixes: the driver placed other clients'
# own allocations where the next arenas lie (a fresh arena now moves to the next index:
# arena.cc), the driver crashed on a wait for another context's interprocess event (event.cc),
# and cudnn_legacy read its results without waiting for its non-blocking stream (a race natively
# too, which the busier GPU of this run lost; CUDA_LAUNCH_BLOCKING=1 hid it).
# Some 35 programs (with the children of ipc and ipc_pool) of one user connect at once: more
# than a user's default share of connections and rate (VMRPC_MAX_CONNECTIONS_PER_USER, VMRPC_CONNECT_RATE).
VMRPC_MAX_CONNECTIONS_PER_USER=0 VMRPC_CONNECT_RATE=0 VMRPC_LOG=2 "$stub" --socket "$sock" --isolation thread --gpu-thread on 2>"$work/stub.log" &
stub_pid=$!
# At exit: a stub that died by a signal (not our SIGTERM) shows the end of its log, with the
# call stack it wrote (host-stub/src/crash_report.h).
cleanup() {
  local rc=0
  kill $stub_pid 2>/dev/null
  wait $stub_pid 2>/dev/null || rc=$?
  if [ $rc -gt 128 ] && [ $rc -ne 143 ]; then
    echo "the stub died of signal $((rc - 128)); the end of its log:"; tail -n 60 "$work/stub.log"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
for _ in $(seq 100); do grep -q "working thread per GPU" "$work/stub.log" && break; sleep 0.05; done
grep -q "working thread per GPU" "$work/stub.log" || { echo "the stub does not say it uses GPU working threads:"; cat "$work/stub.log"; exit 1; }
status=0
pids=()
names=()
for prog in "$bindir"/*; do
  name=$(basename "$prog")
  [ "$name" = fault ] && continue  # a fault poisons every context of the process: see shared_stub_test.sh
  [ "$name" = kernel_printf ] && continue  # in thread mode kernel printf goes to the stub's stdout
  [ "$name" = multi_gpu ] && continue  # needs a stub with two devices (run_cuda_test.sh, gpu-multi-check.sh)
  [[ "$name" == *_static ]] && continue  # NAME built with NVIDIA's static runtime: its own test (cuda_NAME_static)
  names+=("$name")
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$prog" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  if [ $rc != 0 ]; then
    # 124: the timeout ended it. The programs' CHECK lines go to stdout, so show both.
    echo "${names[$i]} failed (exit $rc); the end of its stdout and stderr:"
    tail -n 5 "$work/${names[$i]}.out"; tail -n 20 "$work/${names[$i]}.err"; status=1
  fi
done
for name in "${names[@]}"; do
  if diff -u <(comparable "$expected/$name.out" "$stub") <(comparable "$work/$name.out" "$stub") >/dev/null; then echo "$name (with the others, GPU working thread): identical to the native run"
  elif [ "$name" = device_query ]; then
    # The reference was recorded on another GPU of the same kind: only its UUID may differ.
    if diff <(grep -v uuid "$expected/$name.out") <(grep -v uuid "$work/$name.out") >/dev/null; then
      echo "$name: identical but for the GPU's UUID"
    else echo "$name: DIFFERS"; { diff -u "$expected/$name.out" "$work/$name.out" | head -20 || true; }; status=1; fi
  else
    echo "$name: DIFFERS from the native run"
    { diff -u <(comparable "$expected/$name.out" "$stub") <(comparable "$work/$name.out" "$stub") | head -20 || true; }
    status=1
  fi
done
# A dead stub we have not waited for is a zombie, which kill -0 still finds.
if ! kill -0 $stub_pid 2>/dev/null || [ "$(ps -o stat= -p $stub_pid | cut -c1)" = Z ]; then
  rc=0; wait $stub_pid || rc=$?
  echo "the stub died (exit $rc; above 128: signal $((rc > 128 ? rc - 128 : 0))); the end of its log:"
  tail -n 80 "$work/stub.log"; exit 1
fi
[ $status = 0 ] || { echo "the stub's first warnings (the first is the cause):"; grep -E "warning|error|fatal" "$work/stub.log" | head -n 30; }
exit $status
