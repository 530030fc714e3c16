#!/usr/bin/env bash
# PyTorch through vmcuda on the GPU machine (issue 12 point 6): tests/torch/torch_steps.py
# natively, then with vmcuda's guest libraries (libcuda.so.1, libcudart.so.13) in place of
# the host's driver, against a real vmcuda-stub; prints which steps give the native result.
#   scripts/gpu-torch-check.sh --run OUT   # on the GPU machine, after scripts/gpu-check.sh here
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
[ "${1:-}" = "--run" ] || { echo "usage: $0 --run OUT (on the GPU machine; scripts/gpu-check.sh builds the carry)" >&2; exit 2; }
out="${2:-/tmp/torch-check}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || { echo "no PyTorch here"; exit 0; }
# Each step in its own process: one that kills its process (a crash in a library) does not
# hide the others.
# TORCH_STEPS="a b": only those steps (default: all, then expandable segments).
steps=${TORCH_STEPS:-$("$py" "$top/tests/torch/torch_steps.py" --list)}
run_steps() { # OUTFILE ERRFILE [env...]: every step, one process each
  local o="$1" e="$2"; shift 2
  : >"$o"; : >"$e"
  run_each "$o" "$e" "$steps" "$@"
  # PyTorch's expandable segments (the driver's virtual memory calls: cuMemAddressReserve,
  # cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease) instead of cudaMalloc.
  [ -n "${TORCH_STEPS:-}" ] || run_each "$o" "$e" expandable_segments "$@" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
}
run_each() { # OUTFILE ERRFILE STEPS [env...]
  local o="$1" e="$2" list="$3"; shift 3
  for s in $list; do
    env "$@" timeout "${TORCH_TIMEOUT:-120}" "$py" "$top/tests/torch/torch_steps.py" --step "$s" >>"$o" 2>>"$e"
    local rc=$?
    grep -q "^STEP $s:" "$o" || echo "STEP $s: FAIL the process ended with rc $rc" >>"$o"
  done
}
run_steps "$out/native.txt" "$out/native.err"
sock=/tmp/vmcuda-torch-check.sock
# The stub's NVIDIA libcublas.so.13, libcufft.so.12 and libcurand.so.10: those PyTorch's wheels
# bring (nvidia-cublas, nvidia-cufft, nvidia-curand; VMCUDA_HOST_LIBDIR takes several folders), unless set.
if [ -z "${VMCUDA_HOST_LIBDIR:-}" ]; then
  VMCUDA_HOST_LIBDIR="$("$py" -c '
import importlib, os
dirs = []
for m in ("nvidia.cublas", "nvidia.cufft", "nvidia.curand"):
    try:
        dirs.append(os.path.join(list(importlib.import_module(m).__path__)[0], "lib"))
    except Exception:
        pass
print(":".join(dirs))' 2>/dev/null || true)"
  export VMCUDA_HOST_LIBDIR
fi
# VMCUDA_REMOTE_CUDNN (default 1, as in vmcuda-run): the stub's NVIDIA libcudnn.so.9 is the wheel's (nvidia-cudnn), added to
# VMCUDA_HOST_LIBDIR (several folders, ':').
if [ "${VMCUDA_REMOTE_CUDNN:-1}" = 1 ]; then
  d="$("$py" -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)"
  [ -z "$d" ] || export VMCUDA_HOST_LIBDIR="${VMCUDA_HOST_LIBDIR:+$VMCUDA_HOST_LIBDIR:}$d"
fi
# Info level: the stub logs, once per program and library, that it serves that library's calls
# (which copy of cuBLAS, cuDNN, cuFFT... PyTorch really used), counted below.
VMRPC_LOG=2 "$carry/vmcuda-stub" --socket "$sock" --region-bytes $((1 << 30)) 2>"$out/stub.log" &
stub=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
# VMCUDA_REMOTE_CUBLAS=1: vmcuda's libcublas.so.13 preloaded (PyTorch's wheel finds NVIDIA's
# copy through its own RPATH, but a library already loaded under the soname wins; issue 12
# point 3), and vmcuda's libcublasLt.so.13 with it (PyTorch gives its cuBLAS handle to
# cuBLASLt: both must be vmcuda's). On by default, as in vmcuda-run; VMCUDA_REMOTE_CUBLAS=0
# runs NVIDIA's copies on vmcuda's libcuda instead.
preload=""
[ "${VMCUDA_REMOTE_CUBLAS:-1}" = 1 ] && [ -e "$carry/lib/libcublas.so.13" ] && [ -e "$carry/lib/libcublasLt.so.13" ] &&
  preload="$carry/lib/libcublasLt.so.13:$carry/lib/libcublas.so.13"
# VMCUDA_REMOTE_CUFFT (default 1, as in vmcuda-run) / VMCUDA_REMOTE_CURAND=1: the same for vmcuda's libcufft.so.12 and
# libcurand.so.10 (the fft step needs it: NVIDIA's cuFFT cannot run on vmcuda's libcuda.so.1).
# The list is one word (':'-separated): run_steps passes it to env.
[ "${VMCUDA_REMOTE_CUFFT:-1}" = 1 ] && [ -e "$carry/lib/libcufft.so.12" ] && preload="${preload:+$preload:}$carry/lib/libcufft.so.12"
[ "${VMCUDA_REMOTE_CURAND:-0}" = 1 ] && [ -e "$carry/lib/libcurand.so.10" ] && preload="${preload:+$preload:}$carry/lib/libcurand.so.10"
# VMCUDA_REMOTE_CUDNN (default 1): vmcuda's libcudnn.so.9 too (PyTorch's convolutions; NVIDIA's cuDNN cannot
# run on vmcuda's libcuda.so.1).
[ "${VMCUDA_REMOTE_CUDNN:-1}" = 1 ] && [ -e "$carry/lib/libcudnn.so.9" ] && preload="${preload:+$preload:}$carry/lib/libcudnn.so.9"
run_steps "$out/vmcuda.txt" "$out/vmcuda.err" VMCUDA_SOCKET="$sock" \
  LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ${preload:+LD_PRELOAD="$preload"}
kill "$stub" 2>/dev/null; wait "$stub" 2>/dev/null
same=0 total=0
while IFS= read -r line; do
  total=$((total + 1))
  name="${line%%:*}"
  theirs=$(grep -F "$name:" "$out/vmcuda.txt" | head -1)
  if [ "$theirs" = "$line" ]; then same=$((same + 1)); echo "same   $line"
  else echo "DIFFER $line  |  vmcuda: ${theirs:-(not reached)}"; fi
done < <(grep '^STEP' "$out/native.txt")
echo "torch steps with the native result through vmcuda: $same of $total"
# Evidence per library: the programs (steps) whose calls of a library the stub served at that
# library's API (a library whose calls went to a wheel's own copy would be missing here).
grep -o "serving the program's [a-z]* calls at the library's API" "$out/stub.log" | awk '{ n[$4]++ }
  END { for (l in n) printf "steps whose %s calls vmcuda-stub served: %d\n", l, n[l] }' | sort
grep -h "import torch\|vmcuda:" "$out/native.err" "$out/vmcuda.err" | sort | uniq -c | sort -rn | head -30
