#!/usr/bin/env bash
# Runs one CUDA test program through vmcuda-run against a stub and compares its output
# with what the same binary printed natively on a GPU (tests/cuda/expected/NAME.out,
# captured by scripts/gpu-check.sh). CI uses the test stub (the executor standing in for
# the GPU); on the GPU machine the real vmcuda-stub.
#   run_cuda_test.sh NAME BUILD_DIR [STUB]
# multi_gpu runs on a stub with two devices (--devices 0,1: the executor has two; on the GPU
# machine scripts/gpu-multi-check.sh runs it).
# NAME_static is NAME built with NVIDIA's static runtime, compared with NAME's reference.
set -euo pipefail
name="$1" build="$2" stub="${3:-$2/tests/vmcuda-test-stub}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$top/tests/cuda/bin/$name"
# NAME_static (NVIDIA's static runtime, scripts/build-cuda-tests.sh) prints what NAME does.
expected="$top/tests/cuda/expected/${name%_static}.out"
[ -x "$bin" ] || { echo "no binary $bin: run scripts/build-cuda-tests.sh where nvcc is"; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
sock="$out/stub.sock"
stub_opts=()
case "$name" in multi_gpu) stub_opts=(--devices 0,1) ;; esac
rc=0
VMCUDA_STUB="$stub" VMCUDA_SOCKET="$sock" VMCUDA_LIBDIR="$build/guest-lib" \
  timeout 300 "$build/host-stub/vmcuda-run" "${stub_opts[@]}" -- "$bin" >"$out/actual" 2>"$out/stderr" || rc=$?
cat "$out/actual"
if [ $rc -ne 0 ]; then
  echo "--- $name exited with $rc; its stderr:"; cat "$out/stderr"; exit 1
fi
if [ ! -f "$expected" ]; then
  echo "no native reference $expected: capture it on the GPU machine (scripts/gpu-check.sh)"; exit 1
fi
source "$(dirname "${BASH_SOURCE[0]}")/gpu_only.sh"  # comparable: [GPU only] lines
comparable "$expected" "$stub" >"$out/expected"
comparable "$out/actual" "$stub" >"$out/actual.cmp"
expected="$out/expected"
if ! diff -u "$expected" "$out/actual.cmp"; then
  echo "--- $name: output differs from the native run (above: - native, + vmcuda)"; exit 1
fi
echo "--- $name: identical to the native run"
