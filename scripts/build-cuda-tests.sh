#!/usr/bin/env bash
# Builds the CUDA test programs (tests/cuda/*.cu, tests/security/*.cu) with nvcc -cudart
# shared into their bin/ folders, where they are checked in: CI has no CUDA toolkit, and the binaries
# are small. Run after changing a program; `--check` fails when a binary is missing.
# The programs named in static_runtime below are also built as NAME_static with nvcc's
# default, NVIDIA's static runtime (libcudart_static.a inside the binary, which dlopens
# libcuda.so.1 and reaches it through cuGetProcAddress and cuGetExportTable:
# docs/driver-export-tables.md); they print what NAME prints (tests/cuda/expected/NAME.out).
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
static_runtime=" vector_add streams_events symbols_pitch kernel_printf device_query driver_graphs driver_arrays textures "
# tests/security's CUDA probes go beside them, into tests/security/bin.
# NAME_kernels.cu is no program: it is NAME's module, compiled to a fatbin that NAME embeds
# (driver API programs load it with cuModuleLoadData); driver_* programs link -lcuda.
for src in "$top"/tests/cuda/*.cu "$top"/tests/security/*.cu; do
  name=$(basename "$src" .cu)
  case "$name" in *_kernels) continue ;; esac
  bindir="$(dirname "$src")/bin"
  if [ $# -gt 0 ] && [[ "$only" != *" $name "* ]]; then continue; fi
  bin="$bindir/$name"
  static=
  [[ "$static_runtime" != *" $name "* ]] || static="${bin}_static"
  if [ -n "$check" ]; then
    for b in "$bin" $static; do
      if [ ! -f "$b" ]; then echo "missing: $b (run scripts/build-cuda-tests.sh)"; status=1; fi
    done
    continue
  fi
  # sm_90 code plus PTX, so the programs run on Hopper and JIT elsewhere.
  gencode=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
  extra=()
  kernels="$(dirname "$src")/${name}_kernels.cu"
  if [ -f "$kernels" ]; then
    gen="$(mktemp -d)"
    "$nvcc" -fatbin "${gencode[@]}" -o "$gen/${name}.fatbin" "$kernels"
    "$(dirname "$nvcc")/bin2c" --name "${name}_fatbin" --type longlong --const "$gen/${name}.fatbin" > "$gen/${name}_fatbin.h"
    extra+=(-I"$gen")
  fi
  case "$name" in driver_*) extra+=(-L"$(dirname "$nvcc")/../lib64/stubs" -lcuda) ;; esac
  # cublas_*, cublaslt_*, cufft_*, curand_*, cusparse_*, cusolver_*, cudnn_* programs use those
  # libraries (vmcuda's through vmcuda-run, NVIDIA's natively; cuBLASLt's with cuBLAS, cuSPARSE's
  # and cuSOLVER's too; cuDNN 9's libcudnn.so.9 from the toolkit's lib folder here, a wheel's
  # natively).
  case "$name" in
    cublas_*) extra+=(-lcublas) ;; cublaslt_*) extra+=(-lcublasLt -lcublas) ;;
    cufft_*) extra+=(-lcufft) ;; curand_*) extra+=(-lcurand) ;;
    cusparse_*) extra+=(-lcusparse -lcublas) ;; cusolver_*) extra+=(-lcusolver -lcublas) ;;
    cudnn_*) extra+=(-L"$(dirname "$nvcc")/../lib" -lcudnn) ;;
  esac
  # per_thread_* programs use the per-thread default stream (the _ptds/_ptsz entry points).
  case "$name" in per_thread_*) extra+=(--default-stream per-thread) ;; esac
  "$nvcc" -cudart shared -O2 "${gencode[@]}" "${extra[@]}" -o "$bin" "$src"
  [ -z "$static" ] || "$nvcc" -cudart static -O2 "${gencode[@]}" "${extra[@]}" -o "$static" "$src"
  [ -z "${gen:-}" ] || { rm -rf "$gen"; gen=; }
  for b in "$bin" $static; do
    strip "$b"
    echo "built ${b#$top/} ($(stat -c %s "$b") bytes)"
  done
done
exit $status
