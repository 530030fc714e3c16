#!/usr/bin/env bash
# Builds the CUDA test programs (tests/cuda/*.cu) with nvcc -cudart shared into
# tests/cuda/bin/, where they are checked in: CI has no CUDA toolkit, and the binaries
# are small. Run after changing a program; `--check` fails when a binary is older than
# its source.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
mkdir -p "$top/tests/cuda/bin"
status=0
for src in "$top"/tests/cuda/*.cu; do
  name=$(basename "$src" .cu)
  bin="$top/tests/cuda/bin/$name"
  if [ "${1:-}" = "--check" ]; then
    if [ ! -f "$bin" ]; then echo "missing: tests/cuda/bin/$name (run scripts/build-cuda-tests.sh)"; status=1; fi
    continue
  fi
  # sm_90 code plus PTX, so the programs run on Hopper and JIT elsewhere.
  "$nvcc" -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -o "$bin" "$src"
  strip "$bin"
  echo "built tests/cuda/bin/$name ($(stat -c %s "$bin") bytes)"
done
exit $status
