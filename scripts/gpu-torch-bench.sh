#!/usr/bin/env bash
# PyTorch benchmarks natively and through vmcuda in one run on the GPU machine (issue 12
# point 8): `import torch` plus the first CUDA op (a fresh process each time, median of 3),
# GEMMs (fp32 and bf16 at 256, 1024, 8192), a small model's training steps/s and a
# GPT-2-small-sized transformer's training steps/s (tests/torch/torch_bench.py), side by side.
#   scripts/gpu-torch-bench.sh --run OUT   # on the GPU machine, after scripts/gpu-check.sh here
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
[ "${1:-}" = "--run" ] || { echo "usage: $0 --run OUT (on the GPU machine; scripts/gpu-check.sh builds the carry)" >&2; exit 2; }
out="${2:-/tmp/torch-bench}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
"$py" -c 'import torch' 2>/dev/null || { echo "no PyTorch here"; exit 0; }
sock=/tmp/vmcuda-torch-bench.sock
# The stub's NVIDIA libcudnn.so.9: the wheel's (nvidia-cudnn; the toolkit has none), added to
# VMCUDA_HOST_LIBDIR (several folders, ':') for the preloaded vmcuda cuDNN below.
if [ "${VMCUDA_REMOTE_CUDNN:-1}" = 1 ]; then
  d="$("$py" -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)"
  [ -z "$d" ] || export VMCUDA_HOST_LIBDIR="${VMCUDA_HOST_LIBDIR:-/usr/local/cuda/lib64}:$d"
fi
"$carry/vmcuda-stub" --socket "$sock" --region-bytes $((1 << 30)) 2>"$out/stub.log" &
stub=$!
trap 'kill $stub 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
vm_env=(VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
# vmcuda's cuBLAS and cuBLASLt, cuFFT and cuDNN preloaded, as vmcuda-run does by default
# (VMCUDA_REMOTE_CUBLAS=0, VMCUDA_REMOTE_CUFFT=0, VMCUDA_REMOTE_CUDNN=0: not).
preload=""
[ "${VMCUDA_REMOTE_CUBLAS:-1}" = 1 ] && [ -e "$carry/lib/libcublas.so.13" ] && [ -e "$carry/lib/libcublasLt.so.13" ] &&
  preload="$carry/lib/libcublasLt.so.13 $carry/lib/libcublas.so.13"
[ "${VMCUDA_REMOTE_CUFFT:-1}" = 1 ] && [ -e "$carry/lib/libcufft.so.12" ] && preload="${preload:+$preload }$carry/lib/libcufft.so.12"
[ "${VMCUDA_REMOTE_CUDNN:-1}" = 1 ] && [ -e "$carry/lib/libcudnn.so.9" ] && preload="${preload:+$preload }$carry/lib/libcudnn.so.9"
[ -n "$preload" ] && vm_env+=(LD_PRELOAD="$preload")

first_op() { # [env...]: seconds from process start to the first CUDA op's result, median of 3
  local times=()
  for _ in 1 2 3; do
    local a b
    a=$(date +%s%N)
    env "$@" "$py" -c 'import torch; torch.ones(1, device="cuda").add_(1).item()' >/dev/null 2>>"$out/first_op.err" || { echo nan; return; }
    b=$(date +%s%N)
    times+=("$(awk -v ns=$((b - a)) 'BEGIN { printf "%.3f", ns / 1e9 }')")
  done
  printf '%s\n' "${times[@]}" | sort -g | sed -n 2p
}
for side in native vmcuda; do
  envs=(); [ "$side" = vmcuda ] && envs=("${vm_env[@]}")
  f="$out/bench.$side"
  echo "import_torch_first_op $(first_op "${envs[@]}") s" >"$f"
  for fig in gemm train_small gpt2_small; do
    env "${envs[@]}" timeout "${TORCH_TIMEOUT:-300}" "$py" "$top/tests/torch/torch_bench.py" --figure "$fig" \
      >>"$f" 2>>"$out/$side.err"
  done
done
"$py" - "$out/bench.native" "$out/bench.vmcuda" <<'PY' | tee "$out/bench.table"
import sys
def load(p):
    d = {}
    for line in open(p):
        parts = line.split()
        if len(parts) == 3:
            d[parts[0]] = (float(parts[1]), parts[2])
    return d
n, v = load(sys.argv[1]), load(sys.argv[2])
print("| figure | native | vmcuda | vmcuda/native |")
print("|---|---|---|---|")
for k, (nv, unit) in n.items():
    vv = v.get(k, (float("nan"), unit))[0]
    print(f"| {k} | {nv:.4g} {unit} | {vv:.4g} {unit} | {vv / nv if nv else float('nan'):.2f} |")
PY
