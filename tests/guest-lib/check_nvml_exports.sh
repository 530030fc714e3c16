#!/usr/bin/env bash
# Checks guest-lib's libnvidia-ml.so.1 as the dynamic linker sees it (binutils only):
#  1. SONAME libnvidia-ml.so.1, no symbol versions (NVIDIA's has none), DT_NEEDED libcuda.so.1
#     and RUNPATH $ORIGIN (vmcuda's libcuda.so.1 beside it holds the implementations);
#  2. its defined dynamic functions are exactly the checked-in export list
#     (exports/libnvidia-ml.so.1.exports), and nothing else is exported.
# Usage: check_nvml_exports.sh LIBNVIDIA_ML EXPORTS_LIST
set -euo pipefail
lib="$1" exports="$2"
fail=0
problem() { echo "FAIL: $*"; fail=1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
[ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }

readelf -d "$lib" > "$tmp/dyn"
grep -q '(SONAME).*\[libnvidia-ml.so.1\]' "$tmp/dyn" || problem "SONAME is not libnvidia-ml.so.1"
grep -q '(NEEDED).*\[libcuda.so.1\]' "$tmp/dyn" || problem "libcuda.so.1 is not DT_NEEDED"
grep -q '(RUNPATH).*\$ORIGIN' "$tmp/dyn" || problem "no RUNPATH \$ORIGIN"
if readelf -V "$lib" | grep -q 'Version definition'; then problem "libnvidia-ml.so.1 defines symbol versions"; fi

nm -D --defined-only "$lib" > "$tmp/nm"
awk '$2 ~ /^[TWi]$/ { print $3 }' "$tmp/nm" | LC_ALL=C sort -u > "$tmp/ours"
grep -v '^#' "$exports" | grep . | LC_ALL=C sort -u > "$tmp/nvidia"
if ! cmp -s "$tmp/ours" "$tmp/nvidia"; then
  problem "exported functions differ from $(basename "$exports") (< missing here, > extra here):"
  diff "$tmp/nvidia" "$tmp/ours" | grep '^[<>]' | head -50 || true
fi
others="$(awk '$2 !~ /^[TWi]$/' "$tmp/nm")"
[ -z "$others" ] || { problem "unexpected exports:"; echo "$others" | head -20; }
[ "$fail" = 0 ] && echo "OK: libnvidia-ml.so.1 exports NVIDIA's $(wc -l < "$tmp/nvidia") functions"
exit "$fail"
