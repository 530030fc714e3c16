#!/usr/bin/env bash
# Checks guest-lib's libcudart.so.13 against NVIDIA's, as the dynamic linker sees it
# (docs/cuda-runtime-internals.md §4). Needs binutils only, no CUDA toolkit:
#  1. SONAME libcudart.so.13;
#  2. a version definition node named libcudart.so.13 besides the BASE one;
#  3. its defined dynamic functions are exactly the names in the checked-in export list;
#  4. nothing else is exported (no data, no stray C++ or linker symbols);
#  5. every export carries the default version libcudart.so.13 (nm and objdump -T agree);
#  6. every export with a return type other than cudaError_t is a real definition in
#     libcuda.so.1 (where vmcuda's libcudart.so.13 forwards every export: guest-lib/README.md),
#     not a generated stub.
# Prints how many exports are implemented and how many are still stubs (a stub's NAME is an
# alias of __vmcuda_stub_NAME in libcuda.so.1's symbol table; an implemented one is not).
#
# Usage: check_exports.sh LIBCUDART EXPORTS_LIST HAND_WRITTEN_LIST LIBCUDA
set -euo pipefail
lib="$1" exports="$2" hand_written="$3" libcuda="$4"
fail=0
problem() { echo "FAIL: $*"; fail=1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

for tool in readelf nm objdump; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (binutils)"; exit 1; }
done
[ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }

# 1. SONAME
soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "libcudart.so.13" ] || problem "SONAME is '$soname', expected libcudart.so.13"

# 2. version definitions: BASE libcudart.so.13 and the node libcudart.so.13
readelf -V "$lib" | sed -n '/Version definition/,/Version needs/p' > "$tmp/verdef"
grep -Eq 'Flags: BASE .*Name: libcudart\.so\.13$' "$tmp/verdef" || problem "no BASE version definition libcudart.so.13"
grep -Eq 'Flags: none .*Name: libcudart\.so\.13$' "$tmp/verdef" || problem "no version node libcudart.so.13"

# 3. function sets. nm -D types: T strong, W weak (a generated stub), i ifunc.
nm -D --defined-only "$lib" > "$tmp/nm"
awk '$2 ~ /^[TWi]$/ { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | LC_ALL=C sort -u > "$tmp/ours"
grep -v '^#' "$exports" | grep . | LC_ALL=C sort -u > "$tmp/nvidia"
if ! cmp -s "$tmp/ours" "$tmp/nvidia"; then
  problem "exported functions differ from $(basename "$exports") (< missing here, > extra here):"
  diff "$tmp/nvidia" "$tmp/ours" | grep '^[<>]' | head -50 || true
fi

# 4. nothing but functions, and the version node's own absolute symbol
others="$(awk '$2 !~ /^[TWi]$/ && !($2 == "A" && $3 == "libcudart.so.13")' "$tmp/nm")"
[ -z "$others" ] || { problem "exports that are not functions:"; echo "$others" | head -20 || true; }

# 5. versions: every defined function is NAME@@libcudart.so.13 ...
unversioned="$(awk '$2 ~ /^[TWi]$/ && $3 !~ /@@libcudart\.so\.13$/ { print $3 }' "$tmp/nm")"
[ -z "$unversioned" ] || { problem "exports without default version libcudart.so.13:"; echo "$unversioned" | head -20 || true; }
# ... and objdump -T shows the same version column for each (another reader, same answer)
objdump -T "$lib" | awk '$NF ~ /^[A-Za-z_]/ && $2 != "*UND*" && $0 ~ /\.text/ { print $(NF-1), $NF }' > "$tmp/objdump"
bad="$(awk '$1 != "libcudart.so.13"' "$tmp/objdump")"
[ -z "$bad" ] || { problem "objdump -T shows other versions:"; echo "$bad" | head -20 || true; }
[ "$(wc -l < "$tmp/objdump")" = "$(wc -l < "$tmp/nvidia")" ] ||
  problem "objdump -T lists $(wc -l < "$tmp/objdump") versioned .text symbols, expected $(wc -l < "$tmp/nvidia")"

# 6. implementations in libcuda.so.1 (its full symbol table): NAME defined at another address
#    than __vmcuda_stub_NAME, or without a stub at all
[ -f "$libcuda" ] || { echo "FAIL: no libcuda.so.1 at $libcuda"; exit 1; }
nm "$libcuda" | awk '$2 ~ /^[tTwW]$/ { print $3, $1 }' | LC_ALL=C sort > "$tmp/symtab"
awk 'NR == FNR { if ($1 ~ /^__vmcuda_stub_/) stub[substr($1, 15)] = $2; next }
     { if (!($1 in stub) || stub[$1] != $2) print $1 }' "$tmp/symtab" "$tmp/symtab" | LC_ALL=C sort -u > "$tmp/strong"
grep -q '^__vmcuda_stub_' "$tmp/symtab" || problem "$libcuda has no __vmcuda_stub_ symbols (stripped?): cannot tell stubs"
grep -v '^#' "$hand_written" | cut -f1 | grep . | LC_ALL=C sort -u > "$tmp/hand"
missing="$(LC_ALL=C comm -23 "$tmp/hand" "$tmp/strong")"
[ -z "$missing" ] || { problem "exports that need a hand-written implementation but have none:"; echo "$missing"; }
# every export forwards: an IFUNC (nm -D type i) whose target is in libcuda.so.1
not_ifunc="$(awk '$2 != "i" && $2 != "A"' "$tmp/nm")"
[ -z "$not_ifunc" ] || { problem "exports that do not forward to libcuda.so.1 (not IFUNCs):"; echo "$not_ifunc" | head; }
readelf -d "$lib" | grep -q 'NEEDED.*\[libcuda\.so\.1\]' || problem "libcudart.so.13 does not need libcuda.so.1"

total="$(wc -l < "$tmp/nvidia")"
strong="$(LC_ALL=C comm -12 "$tmp/nvidia" "$tmp/strong" | wc -l)"
echo "libcudart.so.13: $total exports, $strong implemented, $((total - strong)) stubs returning cudaErrorNotSupported"
if [ "$fail" = 0 ]; then echo "PASS"; fi
exit "$fail"
