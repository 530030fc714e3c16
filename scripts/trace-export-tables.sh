#!/usr/bin/env bash
# Logs what a CUDA program's runtime asks of libcuda.so.1: the private export tables
# (cuGetExportTable UUIDs, the calls of each entry with their return values), every
# cuGetProcAddress name, and with --calls every call of the functions it hands out. A
# forwarding libcuda.so.1 (scripts/tools/trace_libcuda.c) goes first on LD_LIBRARY_PATH and
# loads the real driver. Use it on the GPU machine for each CUDA 13.x release, to check
# what vmcuda's guest libcuda.so.1 must serve (docs/driver-export-tables.md).
#
#   trace-export-tables.sh --build DIR        build the tracer into DIR (here; gcc only)
#   trace-export-tables.sh [--lib DIR] [--real PATH] [--calls] [--out FILE] -- PROGRAM [ARGS]
#       run PROGRAM through the tracer (built into a temporary folder unless --lib names
#       one built before); the log goes to FILE (default stderr), a summary at the end.
# --real: the real libcuda.so.1 (default: the system's; vmcuda's own works too, under vmcuda-run).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
build() {
  local dir="$1" gen
  mkdir -p "$dir"
  gen="$(mktemp -d)"
  local exports="$top/guest-lib/exports/libcuda.so.1.exports"
  # Every export but the three the tracer defines jumps through vmcuda_trace_real[i].
  grep -v -e "^#" -e "^$" "$exports" | grep -v -x -e cuGetExportTable -e cuGetProcAddress -e cuGetProcAddress_v2 > "$gen/names"
  {
    echo '  .text'
    i=0
    while read -r n; do
      printf '  .globl %s\n  .type %s,@function\n%s:\n  jmp *vmcuda_trace_real+%d(%%rip)\n' "$n" "$n" "$n" $((i * 8))
      i=$((i + 1))
    done < "$gen/names"
    echo '  .section .note.GNU-stack,"",@progbits'
  } > "$gen/trace_exports.S"
  {
    echo '__attribute__((visibility("hidden"))) void* vmcuda_trace_real['"$(wc -l < "$gen/names")"'];'
    echo 'const int vmcuda_trace_count = '"$(wc -l < "$gen/names")"';'
    echo 'const char* const vmcuda_trace_names[] = {'
    sed 's/.*/  "&",/' "$gen/names"
    echo '};'
  } > "$gen/trace_names.c"
  {
    echo '#define W(k) static u64 w##k(u64 a, u64 b, u64 c, u64 d, u64 e, u64 f, u64 g, u64 h, u64 i, u64 j, u64 l, u64 m, u64 n, u64 o, u64 p, u64 q) { return call_slot(k, a, b, c, d, e, f, g, h, i, j, l, m, n, o, p, q); }'
    for k in $(seq 0 2047); do echo "W($k)"; done
    echo 'static fn16 const g_wrappers[kMaxSlots] = {'
    for k in $(seq 0 2047); do echo "  w$k,"; done
    echo '};'
  } > "$gen/trace_wrappers.inc"
  ${CC:-cc} -O1 -g -shared -fPIC -Wall -Wno-unused-function -I"$gen" -o "$dir/libcuda.so.1" \
    "$top/scripts/tools/trace_libcuda.c" "$gen/trace_names.c" "$gen/trace_exports.S" -ldl -lpthread \
    -Wl,-soname,libcuda.so.1
  rm -rf "$gen"
  echo "built $dir/libcuda.so.1" >&2
}
lib= real= calls= out=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build "$2"; exit 0 ;;
    --lib) lib="$2"; shift 2 ;;
    --real) real="$2"; shift 2 ;;
    --calls) calls=1; shift ;;
    --out) out="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--lib DIR] [--real PATH] [--calls] [--out FILE] -- PROGRAM [ARGS]" >&2; exit 2; }
if [ -z "$lib" ]; then
  lib="$(mktemp -d)"
  trap 'rm -rf "$lib"' EXIT
  build "$lib"
fi
[ -f "$lib/libcuda.so.1" ] || { echo "no tracer in $lib: build it with --build $lib" >&2; exit 1; }
env ${real:+VMCUDA_TRACE_REAL="$real"} ${calls:+VMCUDA_TRACE_CALLS=1} ${out:+VMCUDA_TRACE_FILE="$out"} \
  LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
