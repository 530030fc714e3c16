#!/usr/bin/env bash
# Checks a library vmcuda provides in NVIDIA's place (libcublas.so.13, libcublasLt.so.13,
# libcudnn.so.9, libcufft.so.12, libcurand.so.10, libcusparse.so.12, libcusolver.so.12: the
# soname is the export list's name) against NVIDIA's, as the dynamic linker sees it: its
# SONAME; every defined function is one of the checked-in export list (exports/SONAME.exports)
# and all of them are there, each with the version node SONAME that programs' imports name;
# where NVIDIA's library is installed, its list is still the checked-in one (else regenerate
# the list: scripts/gen-cublas.py or gen-nvlib.py --exports LIB > the list).
#   check_library_exports.sh LIB EXPORTS_LIST [NVIDIA_LIB]
set -euo pipefail
lib="$1" exports="$2"
so="$(basename "$exports" .exports)"
nvidia="${3:-/usr/local/cuda/lib64/$so}"
fail=0
problem() { echo "FAIL: $*"; fail=1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "$so" ] || problem "SONAME is '$soname', expected $so"
objdump -T "$lib" | awk '/ (DF|iD) / && !/\*UND\*/ { print $(NF-1), $NF }' > "$tmp/dyn"
awk '{ print $2 }' "$tmp/dyn" | LC_ALL=C sort -u > "$tmp/ours"
grep -v '^#' "$exports" | grep . | LC_ALL=C sort -u > "$tmp/list"
cmp -s "$tmp/ours" "$tmp/list" || { problem "exports differ from the list (< missing, > extra):"; diff "$tmp/list" "$tmp/ours" | head -20 || true; }
bad_version="$(awk -v so="$so" '$1 != so' "$tmp/dyn" | head -5)"
[ -z "$bad_version" ] || problem "exports without the version node $so: $bad_version"
if [ -e "$nvidia" ]; then
  objdump -T "$nvidia" | awk '/ DF / && !/\*UND\*/ { print $NF }' | LC_ALL=C sort -u > "$tmp/nv"
  cmp -s "$tmp/nv" "$tmp/list" || problem "NVIDIA's $nvidia exports another list: regenerate $(basename "$exports")"
fi
echo "$so: $(wc -l < "$tmp/list") exports"
[ "$fail" = 0 ] && echo PASS
exit "$fail"
