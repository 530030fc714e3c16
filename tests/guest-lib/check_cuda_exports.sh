#!/usr/bin/env bash
# Checks guest-lib's libcuda.so.1 against NVIDIA's, as the dynamic linker sees it. Needs
# binutils only:
#  1. SONAME libcuda.so.1, and no symbol versions (NVIDIA's has none);
#  2. its defined dynamic functions are exactly the checked-in export list
#     (exports/libcuda.so.1.exports), plus nothing but the private __vmcuda_cudart_table and
#     __vmcuda_nvml_table (and __vmcuda_cublas_table, _cublasLt_, _cufft_, _curand_, _cusparse_, _cusolver_,
#     _cudnn_)
#     pairs that vmcuda's libcudart.so.13, libnvidia-ml.so.1 (and libcublas.so.13,
#     libcublasLt.so.13, libcufft.so.12, libcurand.so.10, libcusparse.so.12, libcusolver.so.12,
#     libcudnn.so.9) bind to;
#  3. no cuda* (runtime) name is exported: those stay libcudart.so.13's, so a program with
#     NVIDIA's own libcudart.so.13 is never bound to vmcuda's runtime by accident.
# Prints how many driver exports are implemented and how many are generated stubs (a stub's
# NAME is an alias of __vmcuda_stub_NAME in the full symbol table).
#
# Usage: check_cuda_exports.sh LIBCUDA EXPORTS_LIST
set -euo pipefail
lib="$1" exports="$2"
fail=0
problem() { echo "FAIL: $*"; fail=1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
[ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }

soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "libcuda.so.1" ] || problem "SONAME is '$soname', expected libcuda.so.1"
if readelf -V "$lib" | grep -q 'Version definition'; then problem "libcuda.so.1 defines symbol versions"; fi

nm -D --defined-only "$lib" > "$tmp/nm"
awk '$2 ~ /^[TWi]$/ { print $3 }' "$tmp/nm" | LC_ALL=C sort -u > "$tmp/ours"
grep -v '^#' "$exports" | grep . | LC_ALL=C sort -u > "$tmp/nvidia"
if ! cmp -s "$tmp/ours" "$tmp/nvidia"; then
  problem "exported functions differ from $(basename "$exports") (< missing here, > extra here):"
  diff "$tmp/nvidia" "$tmp/ours" | grep '^[<>]' | head -50 || true
fi
others="$(awk '$2 !~ /^[TWi]$/ && $3 !~ /^__vmcuda_(cudart|nvml|cublas|cublasLt|cufft|curand|cusparse|cusolver|cudnn)_table(_size)?$/' "$tmp/nm")"
[ -z "$others" ] || { problem "unexpected exports:"; echo "$others" | head -20; }
grep -q ' cuda' "$tmp/nm" && problem "runtime (cuda*) names exported: $(grep ' cuda' "$tmp/nm" | head -3 | tr '\n' ' ')"

nm "$lib" | awk '$2 ~ /^[tTwW]$/ { print $3, $1 }' | LC_ALL=C sort > "$tmp/symtab"
awk 'NR == FNR { if ($1 ~ /^__vmcuda_stub_/) stub[substr($1, 15)] = $2; next }
     { if (!($1 in stub) || stub[$1] != $2) print $1 }' "$tmp/symtab" "$tmp/symtab" | LC_ALL=C sort -u > "$tmp/impl"
total="$(wc -l < "$tmp/nvidia")"
implemented="$(LC_ALL=C comm -12 "$tmp/nvidia" "$tmp/impl" | wc -l)"
echo "libcuda.so.1: $total exports, $implemented implemented, $((total - implemented)) stubs returning CUDA_ERROR_NOT_SUPPORTED"
if [ "$fail" = 0 ]; then echo "PASS"; fi
exit "$fail"
