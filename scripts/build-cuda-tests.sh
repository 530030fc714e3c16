#!/usr/bin/env bash
# Builds the CUDA test programs (tests/cuda/*.cu, tests/security/*.cu) with nvcc -cudart
# shared into bin/ beside them, where they are checked in: CI has no CUDA toolkit, and the binaries
# are small. Run after changing a program; `--check` fails when a binary is missing.
# Names (`build-cuda-tests.sh cooperative`) build only those programs, leaving the other
# checked-in binaries as they are.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
mkdir -p "$top/tests/cuda/bin" "$top/tests/security/bin"
status=0
check=
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
only=" $* "
for src in "$top"/tests/cuda/*.cu "$top"/tests/security/*.cu; do
  name=$(basename "$src" .cu)
  if [ $# -gt 0 ] && [[ "$only" != *" $name "* ]]; then continue; fi
  dir="$(basename "$(dirname "$src")")"
  bin="$top/tests/$dir/bin/$name"
  if [ -n "$check" ]; then
    if [ ! -f "$bin" ]; then echo "missing: tests/$dir/bin/$name (run scripts/build-cuda-tests.sh)"; status=1; fi
    continue
  fi
  # sm_90 code plus PTX, so the programs run on Hopper and JIT elsewhere.
  "$nvcc" -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -o "$bin" "$src"
  strip "$bin"
  echo "built tests/$dir/bin/$name ($(stat -c %s "$bin") bytes)"
done
exit $status
