#!/usr/bin/env bash
# Fair sharing of one GPU between two VMs by weight (issue 13 point 5; host-stub/src/fair_share.h),
# on the GPU machine, with native processes in the same run:
#  - two stubs (VMs fs-a, fs-b; weights 1 and 3 from a policy file) on GPU 0, each running
#    bench/cuda/fairshare_bench (kernels that keep every SM busy) for the same ~20 s: each
#    VM's share of the kernels must be 25% and 75% (within 5 points);
#  - each VM alone (the other idle): its whole rate (work-conserving), against one native process;
#  - two native processes at once: the aggregate the pair of VMs is compared with;
#  - vmcudactl status (table and JSON) while both run: each VM's GPU time share.
#   scripts/gpu-fairshare-bench.sh            # here: build the program into .carry/gpu
#   scripts/gpu-fairshare-bench.sh --run OUT  # on the GPU machine (the carry of scripts/gpu-check.sh)
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
bin="$carry/fairshare_bench"
if [ "${1:-}" != "--run" ]; then
  mkdir -p "$carry"
  /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$bin" \
    "$top/bench/cuda/fairshare_bench.cu"
  exit 0
fi
out="${2:-/tmp}"
seconds="${FAIRSHARE_SECONDS:-20}"
mkdir -p "$out"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
work=$(mktemp -d)
cat >"$work/policy.toml" <<'EOF'
[vm.fs-a]
weight = 1
[vm.fs-b]
weight = 3
EOF
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for vm in fs-a fs-b; do
  "$carry/vmcuda-stub" --socket "$work/$vm.sock" --vm "$vm" --devices 0 --policy "$work/policy.toml" \
    --placement-dir "$work/placement" --state-dir "" 2>"$out/fairshare-$vm.log" &
  pids+=($!)
done
for vm in fs-a fs-b; do
  for _ in $(seq 100); do [ -S "$work/$vm.sock" ] && break; sleep 0.1; done
done
ctl() { "$carry/vmcudactl" --run-dir "$work" "$@"; }

# run WHO START END: the program natively (WHO=native) or in VM WHO; prints its figures.
run() {
  local who="$1"; shift
  if [ "$who" = native ]; then "$bin" "$@"
  else LD_LIBRARY_PATH="$carry/lib" VMCUDA_SOCKET="$work/$who.sock" "$bin" "$@"; fi
}
kernels() { awk '$1 == "kernels" {print $2}' "$1"; }
window() {  # START END, $1 seconds from now (time to start the programs)
  python3 -c "import time; s = time.time() + $1; print(f'{s:.3f} {s + $2:.3f}')"
}

# Alone: each VM with the other idle, and one native process.
for who in fs-a fs-b native; do
  read -r s e < <(window 2 $((seconds / 2)))
  run "$who" "$s" "$e" >"$work/alone-$who"
done
# Both VMs at once, the same window; status in the middle.
read -r s e < <(window 3 "$seconds")
run fs-a "$s" "$e" >"$work/pair-fs-a" & a=$!
run fs-b "$s" "$e" >"$work/pair-fs-b" & b=$!
sleep $((3 + seconds / 2))
ctl status | tee "$out/fairshare-status.txt"
ctl status --json >"$out/fairshare-status.json"
ctl metrics | grep -E '^vmcuda_vm_(gpu|weight)' | tee "$out/fairshare-metrics.txt"
wait $a $b
# Two native processes at once, the same length.
read -r s e < <(window 3 "$seconds")
run native "$s" "$e" >"$work/native-1" & a=$!
run native "$s" "$e" >"$work/native-2" & b=$!
wait $a $b

python3 - "$seconds" "$(kernels "$work/alone-fs-a")" "$(kernels "$work/alone-fs-b")" "$(kernels "$work/alone-native")" \
  "$(kernels "$work/pair-fs-a")" "$(kernels "$work/pair-fs-b")" "$(kernels "$work/native-1")" "$(kernels "$work/native-2")" \
  "$out/fairshare-status.json" <<'PY' | tee "$out/fairshare.table"
import json, sys
secs = float(sys.argv[1])
alone_a, alone_b, alone_n = (float(x) / (secs / 2) for x in sys.argv[2:5])
pa, pb, n1, n2 = (float(x) / secs for x in sys.argv[5:9])
status = json.load(open(sys.argv[9]))
def st(vm):
    for s in status:
        if s["vm"] == vm and "status" in s:
            g = s["status"].get("gpu_time") or [{}]
            return g[0].get("share", float("nan")), s["status"].get("weight")
    return float("nan"), None
share_a = pa / (pa + pb)
print("| figure | value |")
print("|---|---|")
print(f"| VM fs-a (weight {st('fs-a')[1]}) share of the kernels, both saturating | {100 * share_a:.1f}% (target 25 +- 5) |")
print(f"| VM fs-b (weight {st('fs-b')[1]}) share of the kernels, both saturating | {100 * (1 - share_a):.1f}% (target 75 +- 5) |")
print(f"| vmcudactl status GPU share mid-run, fs-a / fs-b | {100 * st('fs-a')[0]:.0f}% / {100 * st('fs-b')[0]:.0f}% |")
print(f"| two native processes at once, first's share | {100 * n1 / (n1 + n2):.1f}% |")
print(f"| aggregate kernels/s: VM pair / native pair | {pa + pb:.1f} / {n1 + n2:.1f} = {(pa + pb) / (n1 + n2):.3f} |")
print(f"| alone kernels/s: fs-a / fs-b / native | {alone_a:.1f} / {alone_b:.1f} / {alone_n:.1f} "
      f"= {alone_a / alone_n:.3f} / {alone_b / alone_n:.3f} |")
ok = abs(share_a - 0.25) <= 0.05 and (pa + pb) / (n1 + n2) >= 0.95 and min(alone_a, alone_b) / alone_n >= 0.95
print("RESULT:", "PASS" if ok else "FAIL",
      "(shares within 5 points, aggregate >= 0.95 of native, each VM alone >= 0.95 of native)")
PY
for vm in fs-a fs-b; do echo "--- $vm stub log"; tail -5 "$out/fairshare-$vm.log"; done
grep -q "RESULT: PASS" "$out/fairshare.table"
