#!/usr/bin/env bash
# cudnnGetErrorString of vmcuda's libcudnn.so.9 (answered in the guest, from cudnn_graph.h's
# names) against NVIDIA's library, for every status 0-5999: the same string each time. Skips
# (77) where NVIDIA's libcudnn.so.9 is not installed. Also: an export that is not remoted (a
# legacy call) answers CUDNN_STATUS_NOT_SUPPORTED (3000) and logs its name once.
#   check_cudnn_status_names.sh VMCUDA_LIBCUDNN NVIDIA_LIBCUDNN
set -euo pipefail
ours="$1" nvidia="$2"
stub="$(python3 - "$ours" 2>&1 <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
d = ctypes.c_void_p()
print("status", lib.cudnnCreateAttnDescriptor(ctypes.byref(d)), lib.cudnnCreateAttnDescriptor(ctypes.byref(d)))
PY
)"
echo "$stub"
grep -q '^status 3000 3000$' <<<"$stub" || { echo "FAIL: a stub does not answer 3000 twice"; exit 1; }
[ "$(grep -c 'cudnnCreateAttnDescriptor is not supported yet' <<<"$stub")" = 1 ] ||
  { echo "FAIL: a stub's call is not logged exactly once"; exit 1; }
[ -e "$nvidia" ] || { echo "SKIP: no NVIDIA $nvidia"; exit 77; }
dump() {
  python3 - "$1" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
f = lib.cudnnGetErrorString
f.restype = ctypes.c_char_p
f.argtypes = [ctypes.c_int]
for s in range(6000):
    print(s, f(s).decode())
PY
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
dump "$ours" > "$tmp/ours"
dump "$nvidia" > "$tmp/nvidia"
if ! diff "$tmp/nvidia" "$tmp/ours" > "$tmp/diff"; then
  echo "FAIL: cudnnGetErrorString differs from NVIDIA's (< NVIDIA's, > vmcuda's):"; head -20 "$tmp/diff"; exit 1
fi
echo "cudnnGetErrorString: $(grep -vc UNKNOWN "$tmp/ours") named statuses, as NVIDIA's"
echo PASS
