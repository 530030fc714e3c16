#!/usr/bin/env bash
# Two GPUs through vmcuda (issue 14): NVIDIA's multi-GPU samples (bench/nvidia-samples, from
# NVIDIA/cuda-samples v13.0) and tests/cuda/bin/multi_gpu, natively and through vmcuda-run on
# a real vmcuda-stub with `--devices 0,1`, their results compared; and benchmarks natively and
# through vmcuda side by side (bench/cuda/multi_gpu_bench.cu): P2P copy bandwidth and latency,
# and two clients on two GPUs (one process per GPU, both at once).
#   scripts/gpu-multi-check.sh              # here: build into .carry/gpu-multi (the stub, its
#                                           # vmcuda-run and libcudart.so.13 come from .carry/gpu:
#                                           # run scripts/gpu-check.sh first)
#   scripts/gpu-multi-check.sh --run OUT    # on the 2-GPU machine: samples + multi_gpu
#   scripts/gpu-multi-check.sh --bench OUT  # on the 2-GPU machine: benchmarks
# OUT gets every output (NAME.native, NAME.vmcuda, their stderr, the stub's log), the summary
# (summary.txt, bench.txt) and multi_gpu.out: the native reference for tests/cuda/expected/.
# Each step has a time limit (GMC_TIMEOUT seconds, default 300) and a failing step does not
# stop the others. Exit status: 0 when every comparison passed.
# Environment: GMC_TIMEOUT, GMC_CLIENT_LAUNCHES (compute launches per client, default 2000: ~5 s on an H100),
# GMC_P2P_MIB (copy size, default 256), GMC_REGION_BYTES (the --run stubs' shared region,
# default 2 GiB).
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu-multi"
gpu="$top/.carry/gpu"
# Never NVLink multicast on the shared machines (NCCL would try it; vmcuda must not need it).
export NCCL_NVLS_ENABLE=0
samples="simpleP2P simpleMultiGPU MonteCarloMultiGPU p2pBandwidthLatencyTest conjugateGradientMultiDeviceCG"

if [ "${1:-}" != "--run" ] && [ "${1:-}" != "--bench" ]; then
  set -e
  nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
  src="$top/bench/nvidia-samples"
  mkdir -p "$carry"
  # As the samples' CMakeLists build them (separable compilation, extended lambdas), for
  # sm_90 only and against the shared runtime (which vmcuda replaces).
  flags=(-cudart shared -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -I"$src/Common" --extended-lambda -rdc=true)
  for s in simpleP2P simpleMultiGPU p2pBandwidthLatencyTest conjugateGradientMultiDeviceCG; do
    "$nvcc" "${flags[@]}" -o "$carry/$s" "$src/$s/$s.cu"
  done
  mc="$src/MonteCarloMultiGPU"
  # libcurand: only MonteCarlo_gold.cpp's CPU path uses it (built without DO_CPU: never called),
  # but it is linked; the GPU machine's CUDA 13 has it (LD_LIBRARY_PATH below adds its lib64).
  "$nvcc" "${flags[@]}" -I"$mc" -o "$carry/MonteCarloMultiGPU" "$mc/MonteCarloMultiGPU.cpp" "$mc/MonteCarlo_gold.cpp" \
    "$mc/MonteCarlo_kernel.cu" "$mc/multithreading.cpp" -lcurand
  "$nvcc" -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$carry/multi_gpu_bench" \
    "$top/bench/cuda/multi_gpu_bench.cu"
  "$top/scripts/build-cuda-tests.sh" --check >/dev/null  # tests/cuda/bin/multi_gpu is checked in
  for f in vmcuda-stub vmcuda-run lib/libcudart.so.13 lib/libcuda.so.1; do
    [ -e "$gpu/$f" ] || echo "note: $gpu/$f is missing: run scripts/gpu-check.sh (build mode) as well"
  done
  ls -la "$carry"
  exit 0
fi

mode="$1"
out="${2:?usage: $0 --run|--bench OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
T="${GMC_TIMEOUT:-300}"
# The machine's CUDA libraries (libcurand for MonteCarloMultiGPU) after vmcuda's libcudart.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
work="$(mktemp -d /tmp/vmcuda-multi.XXXXXX)"
chmod 700 "$work"
stubs=()
cleanup() {
  for p in ${stubs[@]+"${stubs[@]}"}; do kill "$p" 2>/dev/null; done
  for p in ${stubs[@]+"${stubs[@]}"}; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
say() { echo "gpu-multi-check: $*" | tee -a "$out/log.txt"; }
: >"$out/log.txt"
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | tee "$out/gpus.txt"
nvidia-smi topo -m >"$out/topo.txt" 2>&1 || true
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${ngpu:-0}" -ge 2 ] || say "WARNING: nvidia-smi lists ${ngpu:-0} GPU(s); two are needed"
for f in vmcuda-stub vmcuda-run lib/libcudart.so.13 lib/libcuda.so.1; do
  [ -e "$gpu/$f" ] || { say "missing $gpu/$f: build with scripts/gpu-check.sh and carry .carry"; exit 2; }
done

# start_stub NAME ARGS...: a real vmcuda-stub on $work/NAME.sock (log OUT/NAME.stub.log);
# its pid in $stub_pid. Returns 1 when it does not come up.
start_stub() {
  local name="$1"; shift
  local sock="$work/$name.sock"
  rm -f "$sock"
  "$gpu/vmcuda-stub" --socket "$sock" --socket-mode 0600 "$@" 2>"$out/$name.stub.log" &
  stub_pid=$!
  stubs+=("$stub_pid")
  for _ in $(seq 200); do
    [ -S "$sock" ] && return 0
    kill -0 "$stub_pid" 2>/dev/null || break
    sleep 0.05
  done
  say "$name: the stub did not start (log: $name.stub.log):"; tail -n 5 "$out/$name.stub.log"
  return 1
}
stop_stub() {
  kill "$1" 2>/dev/null; wait "$1" 2>/dev/null || true
}
# through SOCKNAME PROGRAM ARGS...: PROGRAM through vmcuda-run on the stub at SOCKNAME.
through() {
  local sock="$work/$1.sock"; shift
  VMCUDA_SOCKET="$sock" VMCUDA_LIBDIR="$gpu/lib" VMCUDA_STUB="$gpu/vmcuda-stub" \
    timeout -k 10 "$T" "$gpu/vmcuda-run" -- "$@"
}

if [ "$mode" = --run ]; then
  # name|program|arguments|lines to drop (ERE: timings, not results)|sort (threads print in any order)
  progs=(
    "multi_gpu|$top/tests/cuda/bin/multi_gpu|||"
    "simpleP2P|$carry/simpleP2P||GB/s|"
    "simpleMultiGPU|$carry/simpleMultiGPU||Processing time|"
    "MonteCarloMultiGPU|$carry/MonteCarloMultiGPU||[Tt]ime|per sec|Note:|sort"
    "MonteCarloMultiGPU-streamed|$carry/MonteCarloMultiGPU|--method=streamed|[Tt]ime|per sec|Note:|sort"
    "p2pBandwidthLatencyTest|$carry/p2pBandwidthLatencyTest||[0-9]\.[0-9][0-9]|"
    "conjugateGradientMultiDeviceCG|$carry/conjugateGradientMultiDeviceCG||residual|Error amount|"
  )
  # The shared region holds managed memory (zero-copy, memory.cc): conjugateGradientMultiDeviceCG
  # allocates ~0.9 GiB of it.
  region="${GMC_REGION_BYTES:-$((2 << 30))}"
  rows=()
  fails=0
  for entry in "${progs[@]}"; do
    # The drop pattern may hold '|': name, program, args are the first three fields, sort the
    # last, the pattern what lies between.
    IFS='|' read -r name prog args rest <<<"$entry"
    sortit="${rest##*|}"; drop="${rest%|*}"
    read -r -a argv <<<"$args"
    if [ ! -x "$prog" ]; then rows+=("$name|missing|-|-|FAIL ($prog not built)"); fails=$((fails + 1)); continue; fi
    say "$name: native"
    nrc=0; timeout -k 10 "$T" "$prog" ${argv[@]+"${argv[@]}"} >"$out/$name.native" 2>"$out/$name.native.err" || nrc=$?
    vrc=0
    if start_stub "$name" --devices 0,1 --region-bytes "$region"; then
      say "$name: through vmcuda (stub --devices 0,1)"
      through "$name" "$prog" ${argv[@]+"${argv[@]}"} >"$out/$name.vmcuda" 2>"$out/$name.vmcuda.err" || vrc=$?
      stop_stub "$stub_pid"
    else
      vrc=stub; : >"$out/$name.vmcuda"
    fi
    [ "$name" = multi_gpu ] && cp "$out/$name.native" "$out/multi_gpu.out"  # for tests/cuda/expected/
    filt() {
      if [ -n "$drop" ]; then grep -Ev -- "$drop" "$1"; else cat "$1"; fi | if [ -n "$sortit" ]; then sort; else cat; fi
    }
    filt "$out/$name.native" >"$work/n"; filt "$out/$name.vmcuda" >"$work/v"
    if [ "$nrc" = "$vrc" ] && [ -s "$work/n" ] && cmp -s "$work/n" "$work/v"; then
      verdict="same results"
    else
      verdict="DIFFERS"; fails=$((fails + 1))
      { echo "--- $name: native (-) vs vmcuda (+), timing lines dropped"; diff -u "$work/n" "$work/v" | head -n 40; } \
        | tee -a "$out/log.txt"
    fi
    [ "$nrc" = 124 ] || [ "$nrc" = 137 ] && verdict+=", native timed out"
    [ "$vrc" = 124 ] || [ "$vrc" = 137 ] && verdict+=", vmcuda timed out"
    # Unsupported calls (guest-lib's stubs say so once on stderr).
    uns=$(grep -h "not supported" "$out/$name.vmcuda.err" 2>/dev/null | grep -oE "cuda[A-Za-z0-9_]+" | sort -u | \
          head -n 3 | tr '\n' ' ')
    [ -n "$uns" ] && verdict+=" (vmcuda: $uns)"
    # The result lines for the eye: PASS/FAIL and the samples' own verdicts.
    key=$(grep -Ei 'passed|failed|waiv|&&&&|L1 norm|Relative difference' "$out/$name.vmcuda" | tail -n 1 | cut -c1-60)
    rows+=("$name|$nrc|$vrc|${key:--}|$verdict")
  done
  # Suspend on one GPU, resume on the other (real stubs), and VMs placed by policy.
  say "move_gpu_test: a VM moved between GPU 0 and GPU 1 while programs run; --devices auto"
  mrc=0
  timeout -k 10 "$((T * 2))" "$top/tests/cuda/move_gpu_test.sh" "$gpu/vmcuda-stub" "$gpu/vmcudactl" "$gpu/lib" \
    "$top/tests/cuda/bin" "$top/tests/cuda/expected" >"$out/move_gpu_test.txt" 2>&1 || mrc=$?
  [ $mrc = 0 ] && verdict="same results" || { verdict="FAILED"; fails=$((fails + 1)); }
  rows+=("move_gpu_test|-|$mrc|$(grep -c '^ok:' "$out/move_gpu_test.txt") ok, $(grep -c '^FAIL' "$out/move_gpu_test.txt") failed|$verdict")
  {
    echo
    echo "| program | native rc | vmcuda rc | vmcuda's result line | verdict (timings not compared) |"
    echo "|---|---|---|---|---|"
    for r in "${rows[@]}"; do IFS='|' read -r a b c d e <<<"$r"; echo "| $a | $b | $c | $d | $e |"; done
    echo
    echo "native reference for tests/cuda/expected/multi_gpu.out: $out/multi_gpu.out"
  } | tee "$out/summary.txt"
  [ $fails = 0 ]
  exit $?
fi

# ---- --bench
bench="$carry/multi_gpu_bench"
[ -x "$bench" ] || { say "missing $bench (build mode)"; exit 2; }
mib="${GMC_P2P_MIB:-256}"
launches="${GMC_CLIENT_LAUNCHES:-2000}"
value() { awk -v k="$1" '$1 == k {print $2}' "$2" 2>/dev/null; }

# 1. P2P copies.
say "p2p: native"
timeout -k 10 "$T" "$bench" p2p "$mib" >"$out/p2p.native" 2>"$out/p2p.native.err" || say "p2p native: rc $?"
if start_stub p2p --devices 0,1; then
  say "p2p: through vmcuda"
  through p2p "$bench" p2p "$mib" >"$out/p2p.vmcuda" 2>"$out/p2p.vmcuda.err" || say "p2p vmcuda: rc $?"
  stop_stub "$stub_pid"
fi

# 2. Two clients, one per GPU, both at once: natively; through one stub serving both GPUs
# (each client picks its device); through two stubs of one GPU each (as two VMs would be).
# pair TAG CMD0... -- CMD1...: runs the two at once, outputs OUT/clients.TAG.{0,1}.
pair() {
  local tag="$1"; shift
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift; b=("$@")
  "${a[@]}" >"$out/clients.$tag.0" 2>"$out/clients.$tag.0.err" & local p0=$!
  "${b[@]}" >"$out/clients.$tag.1" 2>"$out/clients.$tag.1.err" & local p1=$!
  wait "$p0" || say "clients $tag, client 0: rc $?"
  wait "$p1" || say "clients $tag, client 1: rc $?"
}
say "two clients: native, one process per GPU"
pair native timeout -k 10 "$T" "$bench" compute 0 "$launches" -- timeout -k 10 "$T" "$bench" compute 1 "$launches"
say "two clients: alone, native (each GPU's figure without the other)"
timeout -k 10 "$T" "$bench" compute 0 "$launches" >"$out/clients.alone.0" 2>&1
if start_stub clients1 --devices 0,1; then
  say "two clients: through one stub (--devices 0,1), client k on device k"
  pair onestub through clients1 "$bench" compute 0 "$launches" -- through clients1 "$bench" compute 1 "$launches"
  stop_stub "$stub_pid"
fi
if start_stub clientsA --devices 0 && sa=$stub_pid && start_stub clientsB --devices 1; then
  sb=$stub_pid
  say "two clients: through two stubs (--devices 0 and --devices 1), each client on its stub's device 0"
  pair twostubs through clientsA "$bench" compute 0 "$launches" -- through clientsB "$bench" compute 0 "$launches"
  stop_stub "$sa"; stop_stub "$sb"
fi

python3 - "$out" <<'PY' | tee "$out/bench.txt"
import os, sys
out = sys.argv[1]
def load(p):
    d = {}
    try:
        for line in open(p):
            f = line.split()
            if len(f) >= 2:
                try: d[f[0]] = (float(f[1]), f[2] if len(f) > 2 else "")
                except ValueError: pass
    except OSError:
        pass
    return d
n, v = load(f"{out}/p2p.native"), load(f"{out}/p2p.vmcuda")
print("P2P copies between GPU 0 and GPU 1 (cudaMemcpyPeerAsync; wall clock):")
print("| figure | native | vmcuda | vmcuda/native |")
print("|---|---|---|---|")
for k, (nv, unit) in n.items():
    vv = v.get(k, (float("nan"), unit))[0]
    print(f"| {k} | {nv:g} {unit} | {vv:g} {unit} | {vv / nv if nv else float('nan'):.3f} |")
if not n: print("| (no native figures: see p2p.native.err) | | | |")
print()
print("Two clients, one per GPU, both at once (fixed FMA kernel; wall time of each client's launches):")
print("| run | client 0 (GPU 0) s | client 1 (GPU 1) s | throughput vs native, client 0 | client 1 | >= 0.95 |")
print("|---|---|---|---|---|---|")
def cs(tag, i):
    return load(f"{out}/clients.{tag}.{i}").get("compute_s", (float("nan"), ""))[0]
base = [cs("native", 0), cs("native", 1)]
alone = load(f"{out}/clients.alone.0").get("compute_s", (float("nan"), ""))[0]
for tag, what in (("native", "native"), ("onestub", "vmcuda, one stub --devices 0,1"),
                  ("twostubs", "vmcuda, a stub per GPU")):
    s = [cs(tag, 0), cs(tag, 1)]
    r = [base[i] / s[i] if s[i] == s[i] and s[i] > 0 else float("nan") for i in range(2)]
    ok = "yes" if all(x >= 0.95 for x in r) else "NO"
    print(f"| {what} | {s[0]:.3f} | {s[1]:.3f} | {r[0]:.3f} | {r[1]:.3f} | {ok} |")
print(f"\nnative client 0 alone (no other client): {alone:.3f} s")
PY
