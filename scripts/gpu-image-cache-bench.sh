#!/usr/bin/env bash
# The module image cache on the GPU machine (issue 12 point 5; host-stub/src/image_cache.h):
# `import torch` and a first op (a matmul and a convolution, so cuBLAS/cuDNN kernels load
# too), run natively, then through one vmcuda-stub (--isolation process, a worker per
# program) without the cache (--image-cache-mib 0) and with it: three runs one after another,
# then two at once. Prints each run's seconds and, with the cache, the stub's image_cache
# counters after each (hits, misses, bytes): the first run sends each image once (misses),
# the later ones load them from the cache (hits, no image bytes cross). Without PyTorch the
# project's CUDA programs stand in.
#   scripts/gpu-image-cache-bench.sh --run OUT   # on the GPU machine, after scripts/gpu-check.sh here
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="${VMCUDA_CARRY:-$top/.carry/gpu}"  # (VMCUDA_CARRY: another, e.g. a test build here)
[ "${1:-}" = "--run" ] || { echo "usage: $0 --run OUT (on the GPU machine; scripts/gpu-check.sh builds the carry)" >&2; exit 2; }
out="${2:-/tmp/image-cache-bench}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
script='import torch
x = torch.randn(256, 256, device="cuda")
y = x @ x
c = torch.nn.functional.conv2d(torch.randn(1, 3, 32, 32, device="cuda"), torch.randn(8, 3, 3, 3, device="cuda"))
torch.cuda.synchronize()
print("ok", float(y.sum() * 0) + float(c.sum() * 0))'
if "$py" -c 'import torch' 2>/dev/null; then
  workload() { "$py" -c "$script"; }
  what="import torch + first ops"
else
  prog="$(ls "$carry"/cuda/* | head -1)"
  workload() { "$prog"; }
  what="$(basename "$prog") (no PyTorch here)"
fi
now() { date +%s.%N; }
timed() { # LABEL [env...]: one run, its seconds
  local label="$1" t0 t1 rc; shift
  t0=$(now)
  (for kv in "$@"; do export "$kv"; done; workload) >>"$out/runs.log" 2>&1
  rc=$?; t1=$(now)
  printf '%-28s %6.2f s rc %d\n' "$label" "$(awk "BEGIN{print $t1 - $t0}")" "$rc"
}
echo "== $what"
for i in 1 2; do timed "native run $i"; done
counters() { "$carry/vmcudactl" --socket "$1" status --json 2>/dev/null | "$py" -c '
import json, sys
c = json.load(sys.stdin).get("image_cache")
print("    image_cache:", "off" if c is None else
      "entries %d, %.2f MiB, hits %d, misses %d, stored %d" % (c["entries"], c["bytes"] / 2**20, c["hits"], c["misses"], c["stored"]))' \
  || echo "    (no status: vmcudactl --socket ${1})"; }
for mode in off on; do
  sock="/tmp/vmcuda-image-cache-$mode.sock"
  rm -rf "/tmp/image-cache" "$sock"
  args=(--socket "$sock" --region-bytes $((1 << 30)) --isolation process --image-cache-dir /tmp/image-cache)
  [ "$mode" = off ] && args+=(--image-cache-mib 0)
  "$carry/vmcuda-stub" "${args[@]}" 2>"$out/stub-$mode.log" &
  stub=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  vm=(VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  echo "== vmcuda, image cache $mode"
  for i in 1 2 3; do timed "vmcuda run $i" "${vm[@]}"; counters "${sock%.sock}.ctl"; done
  t0=$(now)
  timed "vmcuda two at once (a)" "${vm[@]}" & a=$!
  timed "vmcuda two at once (b)" "${vm[@]}" & b=$!
  wait $a $b
  printf '%-28s %6.2f s\n' "  both done after" "$(awk "BEGIN{print $(now) - $t0}")"
  counters "${sock%.sock}.ctl"
  kill "$stub" 2>/dev/null; wait "$stub" 2>/dev/null
done
echo "(program output: $out/runs.log; stub logs: $out/stub-*.log)"
