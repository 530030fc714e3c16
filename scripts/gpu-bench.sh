#!/usr/bin/env bash
# The CUDA runtime benchmark (bench/cuda/runtime_bench.cu) and the graph benchmark
# (bench/cuda/graph_bench.cu) natively and through vmcuda, in one run on the GPU machine,
# side by side. Build here first (scripts/gpu-check.sh builds .carry/gpu and
# this script's binary), then on the GPU machine: scripts/gpu-bench.sh --run OUT
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
if [ "${1:-}" != "--run" ]; then
  mkdir -p "$carry"
  /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$carry/runtime_bench" \
    "$top/bench/cuda/runtime_bench.cu"
  # CUDA graphs (issue 11 point 5): 1- and 100-node graph launch rates, a captured stream of
  # 1,000 kernels replayed, and the same work launched directly.
  /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$carry/graph_bench" \
    "$top/bench/cuda/graph_bench.cu"
  exit 0
fi
out="${2:-/tmp}"
shift 2 || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
"$carry/runtime_bench" "$@" >"$out/bench.native"
VMCUDA_LIBDIR="$carry/lib" VMCUDA_SOCKET=/tmp/vmcuda-bench.sock "$carry/vmcuda-run" -- "$carry/runtime_bench" "$@" \
  >"$out/bench.vmcuda"
if [ -x "$carry/graph_bench" ]; then
  "$carry/graph_bench" "$@" >>"$out/bench.native"
  VMCUDA_LIBDIR="$carry/lib" VMCUDA_SOCKET=/tmp/vmcuda-bench.sock "$carry/vmcuda-run" -- "$carry/graph_bench" "$@" \
    >>"$out/bench.vmcuda"
fi
python3 - "$out/bench.native" "$out/bench.vmcuda" <<'PY' | tee "$out/bench.table"
import sys
def load(p):
    d = {}
    for line in open(p):
        name, value, unit = line.split()
        d[name] = (float(value), unit)
    return d
n, v = load(sys.argv[1]), load(sys.argv[2])
print(f"| figure | native | vmcuda | vmcuda/native |")
print(f"|---|---|---|---|")
for k in n:
    nv, unit = n[k]
    vv = v.get(k, (float('nan'), unit))[0]
    print(f"| {k} | {nv:g} {unit} | {vv:g} {unit} | {vv / nv if nv else float('nan'):.2f} |")
PY
