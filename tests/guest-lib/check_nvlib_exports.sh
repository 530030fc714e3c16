#!/usr/bin/env bash
# Checks vmcuda's libcufft.so.12, libcurand.so.10, libcusparse.so.12 or libcusolver.so.12 against NVIDIA's, as the dynamic linker sees
# it (as check_cublas_exports.sh does libcublas.so.13): the SONAME; every defined function is one
# of the checked-in export list and all of them are there, each with the version node named as
# the soname; where NVIDIA's library is installed, its list is still the checked-in one (else run
# scripts/gen-nvlib.py --exports LIB > the list).
#   check_nvlib_exports.sh LIB EXPORTS_LIST SONAME [NVIDIA_LIB]
set -euo pipefail
lib="$1" exports="$2" want="$3" nvidia="${4:-/usr/local/cuda/lib64/$3}"
fail=0
problem() { echo "FAIL: $*"; fail=1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "$want" ] || problem "SONAME is '$soname', expected $want"
objdump -T "$lib" | awk '/ (DF|iD) / && !/\*UND\*/ { print $(NF-1), $NF }' > "$tmp/dyn"
awk '{ print $2 }' "$tmp/dyn" | LC_ALL=C sort -u > "$tmp/ours"
grep -v '^#' "$exports" | grep . | LC_ALL=C sort -u > "$tmp/list"
cmp -s "$tmp/ours" "$tmp/list" || { problem "exports differ from the list (< missing, > extra):"; diff "$tmp/list" "$tmp/ours" | head -20 || true; }
bad_version="$(awk -v v="$want" '$1 != v' "$tmp/dyn" | head -5)"
[ -z "$bad_version" ] || problem "exports without the version node $want: $bad_version"
if [ -e "$nvidia" ]; then
  objdump -T "$nvidia" | awk '/ DF / && !/\*UND\*/ { print $NF }' | LC_ALL=C sort -u > "$tmp/nv"
  cmp -s "$tmp/nv" "$tmp/list" || problem "NVIDIA's $nvidia exports another list: regenerate $(basename "$exports")"
fi
echo "$want: $(wc -l < "$tmp/list") exports"
[ "$fail" = 0 ] && echo PASS
exit "$fail"
