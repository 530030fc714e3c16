#!/usr/bin/env bash
# Builds what the GPU machine needs into .carry/gpu (here, where the toolchain is), or,
# with --run, runs it there: vmcuda-stub on the real driver + stub_gpu_check.
#   scripts/gpu-check.sh            # here: build into .carry/gpu
#   scripts/gpu-check.sh --run OUT  # on the GPU machine; OUT/NAME.out: native outputs
#                                   # to check in as tests/cuda/expected/NAME.out
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
carry="$top/.carry/gpu"
if [ "${1:-}" != "--run" ]; then
  cmake -S "$top" -B "$top/build-gpu" -DCMAKE_BUILD_TYPE=Release -DVMCUDA_BENCH=ON >/dev/null
  cmake --build "$top/build-gpu" -j"$(nproc)" --target vmcuda-stub vmcudactl stub_gpu_check vmcuda_cudart vmcuda_nvml cuda_kill_probe \
    state_file_bench vmcuda_cublas vmcuda_cublaslt vmcuda_cufft vmcuda_curand vmcuda_cudnn \
    vmcuda_cusparse vmcuda_cusolver
  mkdir -p "$carry/lib" "$carry/cuda"
  cp "$top/build-gpu/host-stub/vmcuda-stub" "$top/build-gpu/host-stub/vmcuda-run" "$top/build-gpu/host-stub/vmcudactl" \
    "$top/build-gpu/tests/stub_gpu_check" "$top/build-gpu/tests/cuda_kill_probe" "$top/build-gpu/bench/state_file_bench" \
    "$carry/"
  cp -L "$top/build-gpu/guest-lib/libcudart.so.13" "$top/build-gpu/guest-lib/libcuda.so.1" \
    "$top/build-gpu/guest-lib/libnvidia-ml.so.1" "$top/build-gpu/guest-lib/libcublas.so.13" \
    "$top/build-gpu/guest-lib/libcublasLt.so.13" "$top/build-gpu/guest-lib/libcufft.so.12" \
    "$top/build-gpu/guest-lib/libcurand.so.10" "$top/build-gpu/guest-lib/libcudnn.so.9" \
    "$top/build-gpu/guest-lib/libcusparse.so.12" "$top/build-gpu/guest-lib/libcusolver.so.12" "$carry/lib/"
  # NVML through vmcuda vs natively (plain C, dlopen: no toolkit needed).
  cc -O2 -o "$carry/nvml_query" "$top/tests/cuda/nvml_query.c" -ldl
  "$top/scripts/build-cuda-tests.sh" --check  # the checked-in binaries: the references were captured from them
  cp "$top"/tests/cuda/bin/* "$carry/cuda/"
  # Two devices: scripts/gpu-multi-check.sh runs it (and captures its reference) with
  # `--devices 0,1`; this script's single-device stub would answer "needs 2 devices".
  rm -f "$carry/cuda/multi_gpu"
  cp "$top/tests/cuda/shared_stub_test.sh" "$top/tests/cuda/gpu_thread_test.sh" "$top/tests/cuda/suspend_resume_test.sh" \
    "$top/tests/cuda/upgrade_test.sh" "$top/tests/cuda/restart_test.sh" "$top/tests/support/fdstore_manager.py" \
    "$top/tests/cuda/ipc_vm_test.sh" "$top/tests/cuda/gpu_only.sh" "$carry/"
  /usr/local/cuda/bin/nvcc -cudart shared -O2 -gencode arch=compute_90,code=sm_90 -o "$carry/suspend_bench" \
    "$top/bench/suspend_bench.cu"
  /usr/local/cuda/bin/nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -o "$carry/vecadd.fatbin" "$top/tests/gpu/vecadd.cu"
  # Probes for docs/benchmarks.md's suspend section: the pieces of a suspend's host-side time
  # (staging_probe GIB THREADS...) and NVIDIA's own process checkpoint (checkpoint_probe GIB).
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -o "$carry/staging_probe" \
    "$top/bench/staging_probe.cu"
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -o "$carry/checkpoint_probe" \
    "$top/bench/checkpoint_probe.cu" -lcuda
  # What a context costs in device memory (docs/security.md, the quota's fixed costs).
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -o "$carry/context_cost_probe" "$top/bench/context_cost_probe.cu" -lcuda
  # What a cuBLAS handle's workspace costs (VMCUDA_CUBLAS_WORKSPACE_BYTES, docs/security.md).
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -o "$carry/cublas_cost_probe" "$top/bench/cublas_cost_probe.cu" -lcuda -ldl
  # Whether texture/surface object values could survive a suspend (docs/snapshots.md).
  /usr/local/cuda/bin/nvcc -O2 -std=c++17 -o "$carry/texobj_value_probe" "$top/bench/texobj_value_probe.cu" -lcuda
  # Finding 2's latency benchmark (scripts/gpu-latency-beside-long-kernel.sh --run).
  "$top/scripts/gpu-latency-beside-long-kernel.sh"
  # Fair sharing between two VMs by weight (scripts/gpu-fairshare-bench.sh --run OUT).
  "$top/scripts/gpu-fairshare-bench.sh"
  [ -f "$top/build-gpu/bench/vmrpc_bench" ] && cp "$top/build-gpu/bench/vmrpc_bench" "$carry/" || true
  ls -la "$carry"
  exit 0
fi
out="${2:-/tmp}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
# One GPU, also on a machine with several: the native references (device counts, peer
# probes) must be those of the single-device stubs below (scripts/gpu-multi-check.sh does two).
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
sock=/tmp/vmcuda-gpu-check.sock
"$carry/vmcuda-stub" --socket "$sock" --region-bytes $((1 << 30)) 2>"$out/stub.log" &
stub=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
rc=0
VMCUDA_PROFILE_OUT="$out/device_profile.inc" "$carry/stub_gpu_check" "$sock" "$carry/vecadd.fatbin" || rc=$?
kill "$stub"; wait "$stub" || true
cat "$out/stub.log"; rm -f "$out/stub.log"
# NVIDIA's libcublas.so.13 for the stub (VMCUDA_HOST_LIBDIR) and for the native runs of the
# cublas_* programs: the toolkit's, else a Python wheel's (nvidia-cublas).
if [ -z "${VMCUDA_HOST_LIBDIR:-}" ] && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  VMCUDA_HOST_LIBDIR="$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)"
fi
export VMCUDA_HOST_LIBDIR="${VMCUDA_HOST_LIBDIR:-/usr/local/cuda/lib64}"
# NVIDIA's libcufft.so.12, libcurand.so.10, libcusparse.so.12, libcusolver.so.12 and libcudnn.so.9
# likewise (cufft_*, curand_*, cusparse_*, cusolver_*, cudnn_* programs): a folder added where the
# first folder lacks them (VMCUDA_HOST_LIBDIR takes several, ':'): the toolkit's lib folder (where
# cuDNN goes) if it has the library, else the wheel's (nvidia-cufft, nvidia-curand,
# nvidia-cusparse, nvidia-cusolver, nvidia-cudnn; cuSOLVER needs cuSPARSE's and nvJitLink's too,
# which the wheel's RPATH finds).
for m in cufft:libcufft.so.12 curand:libcurand.so.10 cusparse:libcusparse.so.12 cusolver:libcusolver.so.12 \
         cudnn:libcudnn.so.9; do
  if [ ! -e "${VMCUDA_HOST_LIBDIR%%:*}/${m#*:}" ]; then
    d=/usr/local/cuda/lib
    [ -e "$d/${m#*:}" ] || d="$(python3 -c "import nvidia.${m%%:*}, os; print(os.path.join(list(nvidia.${m%%:*}.__path__)[0], 'lib'))" 2>/dev/null || true)"
    [ -z "$d" ] || VMCUDA_HOST_LIBDIR="$VMCUDA_HOST_LIBDIR:$d"
  fi
done
echo "NVIDIA's libcublas.so.13, libcufft.so.12, libcurand.so.10, libcusparse.so.12, libcusolver.so.12," \
  "libcudnn.so.9 from: $VMCUDA_HOST_LIBDIR"
# cuDNN's runtime-compiled engines (pointwise graphs) dlopen NVRTC: the toolkit's, else the wheel's
# (nvidia-cuda-nvrtc), on the loader's path of the native runs and of the stubs vmcuda-run starts.
if [ ! -e /usr/local/cuda/lib64/libnvrtc.so.13 ]; then
  d="$(python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0], "lib"))' 2>/dev/null || true)"
  [ -z "$d" ] || export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# The CUDA test programs: natively (NVIDIA's libcudart), then through vmcuda-run; same output.
# VMCUDA_CHECK_PROGRAMS="a b": only those programs, natively and through vmcuda, then stop (a
# quick check of one area; the full run is the default).
work=$(mktemp -d)
for prog in "$carry"/cuda/*; do
  name=$(basename "$prog")
  [ -z "${VMCUDA_CHECK_PROGRAMS:-}" ] || [[ " $VMCUDA_CHECK_PROGRAMS " == *" $name "* ]] || continue
  LD_LIBRARY_PATH="$VMCUDA_HOST_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$prog" >"$work/$name.native" 2>&1 ||
    echo "native $name: rc $?"
  cp "$work/$name.native" "$out/$name.out"  # the reference for tests/cuda/expected/
  VMCUDA_LIBDIR="$carry/lib" VMCUDA_SOCKET=/tmp/vmcuda-run-check.sock "$carry/vmcuda-run" -- "$prog" >"$work/$name.vmcuda" 2>&1 \
    || { echo "vmcuda $name: rc $?"; rc=1; }
  if cmp -s "$work/$name.native" "$work/$name.vmcuda"; then echo "$name: identical output natively and through vmcuda"
  else echo "$name: OUTPUT DIFFERS"; diff "$work/$name.native" "$work/$name.vmcuda" | head -20 || true; rc=1; fi
done
[ -z "${VMCUDA_CHECK_PROGRAMS:-}" ] || exit $rc
# NVML (guest libnvidia-ml.so.1): NVIDIA's natively, vmcuda's through vmcuda-run; the "id" lines
# (count, name, UUID, PCI id, compute capability, versions) must be equal; memory and
# utilization are shown side by side (vmcuda's total: the CUDA-visible memory, or the quota).
if [ -x "$carry/nvml_query" ]; then
  "$carry/nvml_query" >"$work/nvml.native" 2>&1 || echo "native nvml_query: rc $?"
  VMCUDA_LIBDIR="$carry/lib" VMCUDA_SOCKET=/tmp/vmcuda-run-check.sock "$carry/vmcuda-run" -- "$carry/nvml_query" \
    >"$work/nvml.vmcuda" 2>&1 || { echo "vmcuda nvml_query: rc $?"; rc=1; }
  cp "$work/nvml.native" "$out/nvml_query.native"; cp "$work/nvml.vmcuda" "$out/nvml_query.vmcuda"
  if diff <(grep '^id ' "$work/nvml.native") <(grep '^id ' "$work/nvml.vmcuda"); then
    echo "nvml_query: same device identity natively and through vmcuda"
  else echo "nvml_query: IDENTITY DIFFERS (above)"; rc=1; fi
  paste -d'|' <(grep -E '^(mem|util) ' "$work/nvml.native") <(grep -E '^(mem|util) ' "$work/nvml.vmcuda") |
    sed 's/|/   vmcuda: /; s/^/native: /'
fi
# One real stub, several programs at once, one faulting (compared with the native outputs above).
"$carry/shared_stub_test.sh" "$carry/vmcuda-stub" "$carry/lib" "$carry/cuda" "$out" || rc=1
# Every program but the faulting one at once, clients as threads of one stub, their work
# issued by the GPU's working thread (--isolation thread --gpu-thread on).
"$carry/gpu_thread_test.sh" "$carry/vmcuda-stub" "$carry/lib" "$carry/cuda" "$out" || rc=1
# CUDA IPC between programs of one VM (worker processes and thread mode), refused from another VM.
"$carry/ipc_vm_test.sh" "$carry/vmcuda-stub" "$carry/lib" "$carry/cuda" "$carry/vmcudactl" || rc=1
# Every program suspended and resumed (and saved and restored) while it runs, real driver.
"$carry/suspend_resume_test.sh" "$carry/vmcuda-stub" "$carry/vmcudactl" "$carry/lib" "$carry/cuda" "$out" || rc=1
# vmcudactl upgrade under running programs (exec in place, connections handed over).
"$carry/upgrade_test.sh" "$carry/vmcuda-stub" "$carry/vmcudactl" "$carry/lib" "$carry/cuda" "$out" \
  "$carry/cuda_kill_probe" || rc=1
# The stub restarted and killed under a service manager (fd store) while programs run.
"$carry/restart_test.sh" "$carry/vmcuda-stub" "$carry/lib" "$carry/cuda" "$out" "$carry/cuda_kill_probe" || rc=1
# Finding 10.1 on the GPU: another program's device address in a kernel returns none of its data.
"$top/tests/security/isolation_test.sh" "$carry/vmcuda-stub" "$carry/lib" "$top/tests/security/bin/isolation_probe" || rc=1
# Finding 10.6 on the GPU: a kernel that never ends is stopped by --kernel-time-limit.
"$top/tests/security/kernel_time_limit_test.sh" "$carry/vmcuda-stub" "$carry/vmcudactl" "$carry/lib" \
  "$top/tests/security/bin/endless_kernel" "$top/tests/cuda/bin" "$top/tests/cuda/expected" || rc=1
# The same under --gpu-sharing mps with NVIDIA's daemon: the program's GPU work is ended
# through the VM's MPS daemon (terminate_client), and the VM's next program runs correctly.
if command -v nvidia-cuda-mps-control >/dev/null; then
  "$top/tests/security/kernel_time_limit_mps_test.sh" "$carry/vmcuda-stub" "$carry/lib" \
    "$top/tests/security/bin/endless_kernel" "$top/tests/cuda/bin" "$top/tests/cuda/expected" \
    "$(command -v nvidia-cuda-mps-control)" || rc=1
else
  echo "kernel time limit under MPS: left out (no nvidia-cuda-mps-control here)"
fi
# What a context costs in device memory (the quota's fixed costs, docs/security.md).
[ -x "$carry/context_cost_probe" ] && "$carry/context_cost_probe" 0
[ -x "$carry/cublas_cost_probe" ] && LD_LIBRARY_PATH="$VMCUDA_HOST_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$carry/cublas_cost_probe" 0 || echo "cublas_cost_probe: rc $?"
# Texture and surface object values across contexts (why a suspend refuses them).
[ -x "$carry/texobj_value_probe" ] && "$carry/texobj_value_probe" 0
exit $rc
