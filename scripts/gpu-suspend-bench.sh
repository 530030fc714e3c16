#!/usr/bin/env bash
# Suspend/resume benchmark on the GPU machine (docs/benchmarks.md): a client holding N GiB
# of device memory (bench/suspend_bench.cu, through vmcuda with the real stub) is suspended
# to host memory and resumed, then saved to a directory on tmpfs and restored, while it keeps
# launching kernels; prints each operation's time and rate, the longest pause the program saw,
# and whether its memory came back bit-exact; then bench/state_file_bench (the state file's
# save and restore paths from and to host memory). Needs what scripts/gpu-check.sh carries.
#   scripts/gpu-suspend-bench.sh --run [GIB...]      (default: 1 8 32)
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
[ "${1:-}" = "--run" ] || { echo "usage: $0 --run [GIB...] (on the GPU machine, after scripts/gpu-check.sh here)"; exit 2; }
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 8 32)
work=$(mktemp -d)
export VMCUDA_RUN_DIR="$work"
sock="$work/bench.sock"
VMRPC_LOG=2 "$carry/vmcuda-stub" --socket "$sock" --region-bytes $((1 << 30)) ${SUSPEND_BENCH_STUB_ARGS:-} 2>"$work/stub.log" &
stub=$!
trap 'kill $stub 2>/dev/null; wait $stub 2>/dev/null; rm -rf "$work" /dev/shm/vmcuda-bench.saved' EXIT
for _ in $(seq 100); do [ -S "$work/bench.ctl" ] && break; sleep 0.1; done
now() { date +%s.%N; }
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
rate() { python3 -c "import sys; g=float(sys.argv[1]); s=float(sys.argv[2]); print(f'{s:.3f} s, {g*1.073741824/s:.1f} GB/s')" "$1" "$2"; }
status=0
for gib in "${sizes[@]}"; do
  secs=$((12 + gib * 2))
  "$carry/suspend_bench" copy "$gib" 2>&1 | tail -n 1
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$carry/lib" "$carry/suspend_bench" "$gib" "$secs" >"$work/app.out" 2>&1 &
  app=$!
  for _ in $(seq 600); do grep -q READY "$work/app.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  before=$(gpu_used)
  fail() { cat "$work/ctl.err"; status=1; kill $app 2>/dev/null; }
  t0=$(now); "$carry/vmcudactl" suspend bench >/dev/null 2>"$work/ctl.err" || fail; t1=$(now)
  during=$(gpu_used)
  t2=$(now); "$carry/vmcudactl" resume bench >/dev/null 2>"$work/ctl.err" || fail; t3=$(now)
  sleep 1
  t4=$(now); "$carry/vmcudactl" save bench /dev/shm/vmcuda-bench.saved >/dev/null 2>"$work/ctl.err" || fail; t5=$(now)
  t6=$(now); "$carry/vmcudactl" restore /dev/shm/vmcuda-bench.saved --vm bench >/dev/null 2>"$work/ctl.err" || fail; t7=$(now)
  rm -rf /dev/shm/vmcuda-bench.saved
  wait $app || status=1
  s1=$(python3 -c "print($t1-$t0)"); s2=$(python3 -c "print($t3-$t2)"); s3=$(python3 -c "print($t5-$t4)"); s4=$(python3 -c "print($t7-$t6)")
  echo "== $gib GiB (GPU memory used: $before MiB before, $during MiB while suspended)"
  echo "suspend to host memory: $(rate "$gib" "$s1")   (vmcudactl end to end)"
  echo "resume from host memory: $(rate "$gib" "$s2")"
  echo "save to tmpfs: $(rate "$gib" "$s3")"
  echo "restore from tmpfs: $(rate "$gib" "$s4")"
  echo "program: $(tail -n 1 "$work/app.out")"
done
grep -E "suspended:|resumed:|staging|saving to" "$work/stub.log" | tail -n 24 || true
[ $status = 0 ] || { echo "== the stub's log (last 150 lines): a cycle failed"; tail -n 150 "$work/stub.log"; }
# The state file's own paths without the GPU (host memory <-> file, the stub's copy threads,
# a stripe file each; then twice as many; then tmpfs stripes written through a mapping
# instead of pwritev; then one file, no stripes, mapped): what save and restore can reach on
# this machine's tmpfs and disk.
if [ -x "$carry/state_file_bench" ]; then
  "$carry/state_file_bench" --gib 8 /dev/shm /var/tmp || status=1
  threads=$(( $(nproc) / 2 < 16 ? $(nproc) / 2 : 16 ))
  "$carry/state_file_bench" --gib 8 --threads $((threads * 2)) /dev/shm || status=1
  "$carry/state_file_bench" --gib 8 --writes mapped /dev/shm || status=1
  "$carry/state_file_bench" --gib 8 --stripes 1 /dev/shm || status=1
fi
exit $status
