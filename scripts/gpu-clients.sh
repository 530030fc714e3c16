#!/usr/bin/env bash
# Several clients on one GPU, natively and through one vmcuda-stub, in one run on the GPU
# machine (bench/cuda/clients_bench.cu):
#  - a client's host round trip (cudaMemGetInfo) alone and while another client waits in
#    a 3 s kernel: one client's wait must not hold up another's calls;
#  - 1 and 8 processes each running 200 synchronized ~1 ms kernels: the aggregate rate.
#   scripts/gpu-clients.sh             # here: build the program into .carry/gpu
#   scripts/gpu-clients.sh --run OUT   # on the GPU machine (after scripts/gpu-check.sh)
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
bin="$carry/clients_bench"
if [ "${1:-}" != "--run" ]; then
  mkdir -p "$carry"
  /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$bin" \
    "$top/bench/cuda/clients_bench.cu"
  exit 0
fi
out="${2:-/tmp}"
isolation="${3:-process}"
sock=/tmp/vmcuda-clients.sock
"$carry/vmcuda-stub" --socket "$sock" --isolation "$isolation" 2>"$out/clients-stub.log" &
stub=$!
trap 'kill $stub 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done

# run SIDE ARGS...: the program natively or through the stub.
run() {
  local side="$1"; shift
  if [ "$side" = native ]; then "$bin" "$@"
  else LD_LIBRARY_PATH="$carry/lib" VMCUDA_SOCKET="$sock" "$bin" "$@"; fi
}
value() { awk -v k="$1" '$1 == k {print $2}'; }

declare -A fig
for side in native vmcuda; do
  fig[$side,alone]=$(run "$side" probe 20000 | value probe_p50_us)
  run "$side" hog 3000 & hog=$!
  sleep 0.5
  probe=$(run "$side" probe 20000)
  fig[$side,during]=$(echo "$probe" | value probe_p50_us)
  fig[$side,during99]=$(echo "$probe" | value probe_p99_us)
  wait $hog
  fig[$side,work1]=$(run "$side" work 200 | value work_s)
  start=$(date +%s.%N)
  pids=()
  for _ in $(seq 8); do run "$side" work 200 >/dev/null & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
  fig[$side,work8]=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {print e - s}')
done
python3 - "${fig[native,alone]}" "${fig[vmcuda,alone]}" "${fig[native,during]}" "${fig[vmcuda,during]}" \
  "${fig[native,during99]}" "${fig[vmcuda,during99]}" "${fig[native,work1]}" "${fig[vmcuda,work1]}" \
  "${fig[native,work8]}" "${fig[vmcuda,work8]}" "$isolation" <<'PY' | tee "$out/clients.table"
import sys
a = [float(x) for x in sys.argv[1:11]]
iso = sys.argv[11]
rows = [
    ("cudaMemGetInfo p50, alone", a[0], a[1], "us"),
    ("cudaMemGetInfo p50, while another client waits 3 s", a[2], a[3], "us"),
    ("cudaMemGetInfo p99, while another client waits 3 s", a[4], a[5], "us"),
    ("1 client: 200 x ~1 ms kernel + sync, kernels/s", 200 / a[6], 200 / a[7], "1/s"),
    ("8 clients at once: aggregate kernels/s", 1600 / a[8], 1600 / a[9], "1/s"),
]
print(f"isolation: {iso}")
print("| figure | native | vmcuda | vmcuda/native |")
print("|---|---|---|---|")
for name, n, v, unit in rows:
    print(f"| {name} | {n:.2f} {unit} | {v:.2f} {unit} | {v / n:.2f} |")
PY
