#!/usr/bin/env bash
# Issue 10, finding 2 (docs/security.md): a program's small synchronous calls beside another
# program's long kernel on the same GPU. Measures, with bench/cuda/latency_beside_kernel.cu, a
# small client's per-iteration latency (a tiny kernel, a synchronous 4 KiB copy back into
# pageable memory, a 4 KiB copy to the device) alone and while another client runs one kernel
# of LONG seconds (default 10): natively (two processes, NVIDIA's runtime), and through one
# vmcuda-stub (one VM) with --isolation process and with --isolation thread. Prints p50 and p99
# of each and the ratio beside/alone (the goal: p99 within 10% of alone), and what the stub and
# each worker process cost the host meanwhile (resident memory, threads, fds). About a minute.
#   scripts/gpu-check.sh && scripts/gpu-latency-beside-long-kernel.sh   # here: build into .carry/gpu
#   scripts/gpu-latency-beside-long-kernel.sh --run [LONG]              # on the GPU machine
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
if [ "${1:-}" != "--run" ]; then
  mkdir -p "$carry"
  /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 \
    -gencode arch=compute_90,code=compute_90 -o "$carry/latency_beside_kernel" "$top/bench/cuda/latency_beside_kernel.cu"
  exit 0
fi
long="${2:-10}"
alone_s=3
beside_s=$(python3 -c "print(max(1.0, $long - 2.5))")  # every sample while the long kernel runs
bin="$carry/latency_beside_kernel"
[ -x "$bin" ] || { echo "no $bin: run scripts/gpu-latency-beside-long-kernel.sh (no --run) where nvcc is"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
work=$(mktemp -d)
export VMCUDA_RUN_DIR="$work"
stub=
cleanup() { [ -n "$stub" ] && { kill "$stub" 2>/dev/null; wait "$stub" 2>/dev/null; }; rm -rf "$work"; }
trap cleanup EXIT
status=0

# run_pair LABEL [ENV...]: the small client alone, then beside the long kernel; one table row.
run_pair() {
  local label="$1"; shift
  local a b
  a=$(env "$@" timeout 60 "$bin" small "$alone_s") || { echo "$label: the small client failed alone"; status=1; return; }
  env "$@" timeout $((long + 60)) "$bin" long "$long" >"$work/long.out" 2>&1 &
  local lp=$!
  for _ in $(seq 600); do grep -q READY "$work/long.out" 2>/dev/null && break; sleep 0.05; done
  grep -q READY "$work/long.out" || { echo "$label: the long kernel did not start: $(cat "$work/long.out")"; status=1; return; }
  [ -n "$stub" ] && (sleep 2; worker_cost "$label") >>"$work/costs" &
  b=$(env "$@" timeout 60 "$bin" small "$beside_s") || { echo "$label: the small client failed beside"; status=1; }
  wait $lp || { echo "$label: the long client failed: $(cat "$work/long.out")"; status=1; }
  python3 - "$label" "$a" "$b" "$(tail -n 1 "$work/long.out")" <<'PY'
import sys
label, a, b, long_out = sys.argv[1:5]
def parse(s):
    f = s.split(); return {f[i]: float(f[i + 1]) for i in range(0, len(f) - 1, 2)}
try:
    x, y = parse(a), parse(b)
except Exception:
    print(f"| {label} | {a} | {b} | | | | |"); sys.exit(0)
ratio = y["p99_us"] / x["p99_us"]
print(f"| {label} | {x['p50_us']:.1f} | {x['p99_us']:.1f} | {y['p50_us']:.1f} | {y['p99_us']:.1f} | "
      f"{ratio:.2f}{' (goal: <= 1.10)' if ratio > 1.10 else ''} | {int(y['samples'])} ({long_out}) |")
PY
}

# What each process serving this VM costs the host (docs/security.md, a worker's host-side
# cost): resident memory, threads and open fds of the stub and of each worker (its children).
worker_cost() {
  local p
  for p in "$stub" $(pgrep -P "$stub" || true); do
    [ -d "/proc/$p" ] || continue
    printf '%s: pid %s (%s) rss %s KiB, threads %s, fds %s\n' "$1" "$p" "$([ "$p" = "$stub" ] && echo stub || echo worker)" \
      "$(awk '/^VmRSS/ {print $2}' "/proc/$p/status")" "$(awk '/^Threads/ {print $2}' "/proc/$p/status")" \
      "$(ls "/proc/$p/fd" 2>/dev/null | wc -l)"
  done
}

start_stub() {  # ISOLATION [STUB ARGS...]
  rm -f "$work/vm.sock"
  local iso="$1"; shift
  "$carry/vmcuda-stub" --socket "$work/vm.sock" --isolation "$iso" --region-bytes $((1 << 30)) "$@" 2>"$work/stub-$iso.log" &
  stub=$!
  for _ in $(seq 100); do [ -S "$work/vm.sock" ] && break; sleep 0.1; done
  [ -S "$work/vm.sock" ] || { echo "the stub did not start: $(tail -n 5 "$work/stub-$iso.log")"; exit 1; }
}
stop_stub() { kill "$stub"; wait "$stub" 2>/dev/null || true; stub=; }

echo "small client: tiny kernel + synchronous 4 KiB D2H (pageable) + 4 KiB H2D per sample; long kernel: $long s"
echo "| setup | alone p50 us | alone p99 us | beside p50 us | beside p99 us | p99 beside/alone | samples beside (long client) |"
echo "|---|---|---|---|---|---|---|"
run_pair "native (2 processes)"
for iso in process thread; do
  start_stub "$iso"
  run_pair "vmcuda --isolation $iso" VMCUDA_SOCKET="$work/vm.sock" LD_LIBRARY_PATH="$carry/lib"
  stop_stub
done
# The same with the GPU shared at once (MPS) instead of in time slices: natively through an MPS
# daemon this script starts, through vmcuda with --gpu-sharing mps (the stub's own daemon).
if command -v nvidia-cuda-mps-control >/dev/null; then
  mkdir -p "$work/mps/pipe" "$work/mps/log"
  mps_env=(CUDA_MPS_PIPE_DIRECTORY="$work/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$work/mps/log")
  env "${mps_env[@]}" nvidia-cuda-mps-control -d
  run_pair "native (2 processes), MPS" "${mps_env[@]}"
  echo quit | env "${mps_env[@]}" nvidia-cuda-mps-control
  sleep 1
  start_stub process --gpu-sharing mps  # (the stub refuses mps with --isolation thread)
  run_pair "vmcuda --isolation process --gpu-sharing mps" VMCUDA_SOCKET="$work/vm.sock" LD_LIBRARY_PATH="$carry/lib"
  stop_stub
else
  echo "(no nvidia-cuda-mps-control here: the MPS rows are left out)"
fi
echo
echo "host-side cost while both clients ran (the stub, and with --isolation process one worker per client):"
cat "$work/costs" 2>/dev/null || true
exit $status
