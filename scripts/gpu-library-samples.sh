#!/usr/bin/env bash
# NVIDIA's CUDA library samples (bench/nvidia-samples: simpleCUBLAS, batchCUBLAS, simpleCUFFT,
# MersenneTwisterGP11213 (cuRAND), cuSolverDn_LinearSolver, conjugateGradient (cuSPARSE and
# cuBLAS)) natively and through vmcuda on the GPU machine, output side by side (issue 12
# point 7). Lines that report times or rates are left out of the comparison.
#   scripts/gpu-library-samples.sh              # here: builds them into .carry/samples
#   scripts/gpu-library-samples.sh --run OUT    # on the GPU machine (after scripts/gpu-check.sh here)
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
src="$top/bench/nvidia-samples"
carry="$top/.carry"
samples="simpleCUBLAS batchCUBLAS simpleCUFFT MersenneTwisterGP11213 cuSolverDn_LinearSolver conjugateGradient"
if [ "${1:-}" != "--run" ]; then
  set -e
  nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
  mkdir -p "$carry/samples"
  # As their CMakeLists: NVIDIA's libraries by soname, the runtime shared (vmcuda's libcudart
  # then serves the program's own calls; each library brings its static copy of NVIDIA's).
  common=(-cudart shared -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -I"$src/Common")
  "$nvcc" "${common[@]}" -o "$carry/samples/simpleCUBLAS" "$src/simpleCUBLAS/simpleCUBLAS.cpp" -lcublas
  "$nvcc" "${common[@]}" -o "$carry/samples/batchCUBLAS" "$src/batchCUBLAS/batchCUBLAS.cpp" -lcublas
  "$nvcc" "${common[@]}" --extended-lambda -o "$carry/samples/simpleCUFFT" "$src/simpleCUFFT/simpleCUFFT.cu" -lcufft
  "$nvcc" "${common[@]}" -o "$carry/samples/MersenneTwisterGP11213" "$src/MersenneTwisterGP11213/MersenneTwister.cpp" -lcurand
  gcc -O2 -c -o "$carry/samples/mmio.o" "$src/cuSolverDn_LinearSolver/mmio.c"
  "$nvcc" "${common[@]}" -o "$carry/samples/cuSolverDn_LinearSolver" "$src/cuSolverDn_LinearSolver/cuSolverDn_LinearSolver.cpp" \
    "$src/cuSolverDn_LinearSolver/mmio_wrapper.cpp" "$carry/samples/mmio.o" -lcublas -lcusolver -lcusparse
  rm "$carry/samples/mmio.o"
  cp "$src/cuSolverDn_LinearSolver/gr_900_900_crg.mtx" "$carry/samples/"
  "$nvcc" "${common[@]}" -o "$carry/samples/conjugateGradient" "$src/conjugateGradient/main.cpp" -lcublas -lcusparse
  ls -l "$carry/samples"
  exit 0
fi
out="${2:-/tmp/library-samples}"
mkdir -p "$out"
lib="$carry/gpu/lib"
sock=/tmp/vmcuda-library-samples.sock
"$carry/gpu/vmcuda-stub" --socket "$sock" --region-bytes $((1 << 30)) 2>"$out/stub.log" &
stub=$!
trap 'kill $stub 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
# What a run prints that must match: no times, rates or addresses.
filter() { grep -v -i -E 'time|sec|gflop|elapsed|throughput|ms\b|bandwidth|0x[0-9a-f]{6,}' "$1" || true; }
same=0 total=0
cd "$carry/samples"
for s in $samples; do
  total=$((total + 1))
  timeout 300 "./$s" >"$out/$s.native" 2>&1; nrc=$?
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 300 "./$s" \
    >"$out/$s.vmcuda" 2>&1; vrc=$?
  if [ $nrc = $vrc ] && diff <(filter "$out/$s.native") <(filter "$out/$s.vmcuda") >"$out/$s.diff"; then
    same=$((same + 1)); echo "same    $s (rc $nrc)"
  else
    echo "DIFFER  $s (native rc $nrc, vmcuda rc $vrc)"; head -20 "$out/$s.diff"; tail -5 "$out/$s.vmcuda"
  fi
done
echo "library samples with the native result through vmcuda: $same of $total"
