#!/usr/bin/env bash
# NVIDIA's CUDA library samples (bench/nvidia-samples: simpleCUBLAS, batchCUBLAS, simpleCUFFT,
# MersenneTwisterGP11213 (cuRAND), cuSolverDn_LinearSolver (LU, QR, Cholesky), conjugateGradient
# (cuSPARSE and cuBLAS)) and vmcuda's own programs of the same kinds (tests/cuda: cublas_basic,
# cufft_basic, curand_basic, curand_host, cusolver_basic, cusparse_cg/_more/_legacy/_bsr), natively and through
# vmcuda on the GPU machine, output side by side (issue 12 point 7). Each is built twice: as
# their CMakeLists do (`-cudart shared`: vmcuda's libcudart.so.13 serves the program's own calls)
# and as `nvcc` does by default (NAME_static: NVIDIA's static runtime inside the binary, on
# vmcuda's libcuda.so.1). NVIDIA's libraries are taken by soname either way (vmcuda's
# libcublas.so.13 and the others through vmcuda). Through vmcuda the program runs with the host's
# driver out of sight, as inside a VM: as root, in a mount namespace where /dev/nvidia* and the
# host's libcuda.so.1 are /dev/null (else only LD_LIBRARY_PATH puts vmcuda's first; the summary
# says which). Lines that report times or rates are left out of the comparison.
#   scripts/gpu-library-samples.sh              # here: builds them into .carry/samples
#   scripts/gpu-library-samples.sh --run OUT    # on the GPU machine (after scripts/gpu-check.sh here)
# SAMPLES="a b": only those (names as built, NAME or NAME_static).
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
src="$top/bench/nvidia-samples"
carry="$top/.carry"
ours="cublas_basic cufft_basic curand_basic curand_host cusolver_basic cusparse_cg cusparse_more cusparse_legacy cusparse_bsr"
if [ "${1:-}" != "--run" ]; then
  set -e
  nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
  mkdir -p "$carry/samples"
  gcc -O2 -c -o "$carry/samples/mmio.o" "$src/cuSolverDn_LinearSolver/mmio.c"
  for runtime in shared static; do
    suffix=""
    [ $runtime = shared ] || suffix=_static
    common=(-cudart $runtime -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -I"$src/Common")
    b() { "$nvcc" "${common[@]}" -o "$carry/samples/$1$suffix" "${@:2}"; }
    b simpleCUBLAS "$src/simpleCUBLAS/simpleCUBLAS.cpp" -lcublas
    b batchCUBLAS "$src/batchCUBLAS/batchCUBLAS.cpp" -lcublas
    b simpleCUFFT --extended-lambda "$src/simpleCUFFT/simpleCUFFT.cu" -lcufft
    b MersenneTwisterGP11213 "$src/MersenneTwisterGP11213/MersenneTwister.cpp" -lcurand
    b cuSolverDn_LinearSolver "$src/cuSolverDn_LinearSolver/cuSolverDn_LinearSolver.cpp" \
      "$src/cuSolverDn_LinearSolver/mmio_wrapper.cpp" "$carry/samples/mmio.o" -lcublas -lcusolver -lcusparse
    b conjugateGradient "$src/conjugateGradient/main.cpp" -lcublas -lcusparse
    # vmcuda's programs of these kinds (as scripts/build-cuda-tests.sh links them).
    for n in $ours; do
      case "$n" in
        cublas_*) libs=(-lcublas) ;; cufft_*) libs=(-lcufft) ;; curand_*) libs=(-lcurand) ;;
        cusparse_*) libs=(-lcusparse -lcublas) ;; cusolver_*) libs=(-lcusolver -lcublas) ;;
      esac
      b "$n" "$top/tests/cuda/$n.cu" "${libs[@]}"
    done
  done
  rm "$carry/samples/mmio.o"
  cp "$src/cuSolverDn_LinearSolver/gr_900_900_crg.mtx" "$carry/samples/"
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
# The host's driver out of sight of the program (the stub, started before, keeps it).
hidden=no
host_libcuda="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF}' | xargs -r readlink -f | sort -u | tr '\n' ' ')"
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then hidden=yes; fi
through_vmcuda() { # COMMAND...: through vmcuda, the driver hidden where it can be
  if [ $hidden = yes ]; then
    VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HIDE="$host_libcuda" \
      unshare -m -- bash -c 'for f in /dev/nvidia* $HIDE; do if [ -d "$f" ]; then mount -t tmpfs -o size=4k none "$f"; elif [ -e "$f" ]; then mount --bind /dev/null "$f"; fi; done; exec "$@"' \
      hide "$@"
  else
    VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
  fi
}
# What a run prints that must match: no times, rates or addresses.
filter() { grep -v -i -E 'time|sec|gflop|elapsed|throughput|ms\b|bandwidth|0x[0-9a-f]{6,}' "$1" || true; }
same=0 total=0
cd "$carry/samples"
samples="${SAMPLES:-}"
if [ -z "$samples" ]; then
  for n in simpleCUBLAS batchCUBLAS simpleCUFFT MersenneTwisterGP11213 cuSolverDn_LinearSolver conjugateGradient $ours; do
    samples="$samples $n ${n}_static"
  done
fi
for s in $samples; do
  [ -x "./$s" ] || { echo "missing $s: run scripts/gpu-library-samples.sh here first"; continue; }
  total=$((total + 1))
  timeout 300 "./$s" >"$out/$s.native" 2>&1; nrc=$?
  through_vmcuda timeout 300 "./$s" >"$out/$s.vmcuda" 2>&1; vrc=$?
  if [ $nrc = $vrc ] && diff <(filter "$out/$s.native") <(filter "$out/$s.vmcuda") >"$out/$s.diff"; then
    same=$((same + 1)); echo "same    $s (rc $nrc)"
  else
    echo "DIFFER  $s (native rc $nrc, vmcuda rc $vrc)"; head -20 "$out/$s.diff"; tail -5 "$out/$s.vmcuda"
  fi
done
echo "library samples with the native result through vmcuda: $same of $total (host driver hidden: $hidden)"
# The native output of vmcuda's own programs is their reference (tests/cuda/expected/NAME.out).
for n in $ours; do [ -f "$out/$n.native" ] && cp "$out/$n.native" "$out/$n.out"; done
