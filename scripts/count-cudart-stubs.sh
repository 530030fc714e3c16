#!/usr/bin/env bash
# Lists NVIDIA's libcudart.so.13 exports (guest-lib/exports/libcudart.so.13.exports, from
# `nm -D --defined-only` of NVIDIA's library) that vmcuda still answers with the generated
# "not supported yet" stub (801): those whose definition in vmcuda's libcuda.so.1 is the stub
# itself (guest-lib/cmake/gen_unsupported_stubs.cmake: a weak alias of __vmcuda_stub_NAME that
# no hand-written definition overrode). The count is docs/running.md's.
#   scripts/count-cudart-stubs.sh [BUILD_DIR]   (default: build)
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
lib="${1:-$top/build}/guest-lib/libcuda.so.1"
exports="$top/guest-lib/exports/libcudart.so.13.exports"
[ -f "$lib" ] || { echo "no $lib: build guest-lib first" >&2; exit 1; }
nm "$lib" | awk '
  NR == FNR { addr[$3] = $1; next }
  /^[A-Za-z_]/ { stub = "__vmcuda_stub_" $1; if ((stub in addr) && addr[$1] == addr[stub]) print $1 }
' - "$exports" | tee /dev/stderr | wc -l | { read -r n; echo "$n of $(grep -c '^[A-Za-z_]' "$exports") exports are stubs"; }
