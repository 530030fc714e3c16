#!/usr/bin/env bash
# What a worker process costs the host (VMCUDA_WORKER_HOST_BYTES, VMCUDA_BLAS_HOST_BYTES,
# docs/security.md): runs test programs one at a time through a real vmcuda-stub
# (--isolation process) and prints each worker's peak resident memory (VmHWM), sampled while
# the program runs. On the GPU machine, after scripts/gpu-check.sh built the carry:
#   scripts/tools/worker-memory.sh [CARRY_DIR (.carry/gpu)] [PROGRAM...]
set -uo pipefail
carry="${1:-.carry/gpu}"
shift || true
progs=("$@")
[ ${#progs[@]} -gt 0 ] || progs=(vector_add graphs cublas_basic cublaslt_basic)
work=$(mktemp -d)
sock=$work/s
# NVIDIA's libcublas for the stub: the toolkit's, else a Python wheel's (as gpu-check.sh).
[ -e /usr/local/cuda/lib64/libcublas.so.13 ] ||
  export VMCUDA_HOST_LIBDIR="$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))')"
"$carry/vmcuda-stub" --socket "$sock" 2>"$work/stub.log" &
stub=$!
trap 'kill $stub 2>/dev/null; wait $stub 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
peak() {
  local m=0 c r
  for c in $(pgrep -P "$stub"); do
    r=$(awk '/VmHWM/{print $2}' "/proc/$c/status" 2>/dev/null)
    [ -n "$r" ] && [ "$r" -gt "$m" ] && m=$r
  done
  echo "$m"
}
for prog in "${progs[@]}"; do
  VMCUDA_SOCKET="$sock" VMCUDA_LIBDIR="$carry/lib" "$carry/vmcuda-run" -- "$carry/cuda/$prog" >/dev/null 2>&1 &
  p=$!
  m=0
  while kill -0 $p 2>/dev/null; do x=$(peak); [ "$x" -gt "$m" ] && m=$x; sleep 0.02; done
  wait $p; rc=$?
  echo "$prog (exit $rc): worker peak VmHWM $((m / 1024)) MiB"
done
