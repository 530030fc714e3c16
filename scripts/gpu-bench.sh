#!/usr/bin/env bash
# The CUDA runtime benchmark (bench/cuda/runtime_bench.cu), the graph, texture, managed-memory
# atomics and driver-API launch benchmarks (bench/cuda/) natively and through vmcuda, in one run on the GPU machine,
# side by side. Build here first (scripts/gpu-check.sh builds .carry/gpu and
# this script's binary), then on the GPU machine: scripts/gpu-bench.sh --run OUT
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
if [ "${1:-}" != "--run" ]; then
  mkdir -p "$carry"
  # runtime_bench: the runtime's call costs; graph_bench: 1- and 100-node graph launch rates,
  # a captured stream of 1,000 kernels replayed, and the same work launched directly;
  # texture_bench: texture fetch and surface write kernel times, which must equal native (the
  # kernels run natively); managed_atomics_bench: CPU and GPU atomics on the same managed
  # memory at once (and the GPU's alone). Issue 11, point 5.
  for b in runtime_bench graph_bench texture_bench managed_atomics_bench; do
    /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$carry/$b" \
      "$top/bench/cuda/$b.cu"
  done
  # driver_launch_bench: cuLaunchKernel's rate, built the default way (NVIDIA's runtime
  # linked statically), so through vmcuda it runs on vmcuda's libcuda.so.1. Issue 12, point 8.
  /usr/local/cuda/bin/nvcc -O2 -gencode arch=compute_90,code=sm_90 -o "$carry/driver_launch_bench" \
    "$top/bench/cuda/driver_launch_bench.cu" -lcuda
  exit 0
fi
out="${2:-/tmp}"
shift 2 || true
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
: >"$out/bench.native"
: >"$out/bench.vmcuda"
for b in runtime_bench graph_bench texture_bench managed_atomics_bench driver_launch_bench; do
  [ -x "$carry/$b" ] || continue
  "$carry/$b" "$@" >>"$out/bench.native"
  VMCUDA_LIBDIR="$carry/lib" VMCUDA_SOCKET=/tmp/vmcuda-bench.sock "$carry/vmcuda-run" -- "$carry/$b" "$@" \
    >>"$out/bench.vmcuda"
done
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
