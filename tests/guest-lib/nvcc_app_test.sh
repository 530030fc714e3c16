#!/usr/bin/env bash
# Builds ordinary CUDA programs with `nvcc -cudart shared` (linked against NVIDIA's
# libcudart.so, as any application is) and runs them against guest-lib's libcudart.so.13
# with LD_LIBRARY_PATH alone. Checks that they load with every import bound at start
# (LD_BIND_NOW), register their kernels and variables, get the local answers right, and
# that with no stub to reach every device call returns cudaErrorNoDevice and one line
# says why.
# Exits 77 (skip) when there is no nvcc: CI has no CUDA toolkit.
#
# Usage: nvcc_app_test.sh LIBDIR REPO_ROOT WORK_DIR
set -euo pipefail
libdir="$1" repo="$2" work="$3"
app_src="$repo/tests/guest-lib/app"

nvcc="${NVCC:-}"
if [ -z "$nvcc" ]; then
  for c in "$(command -v nvcc || true)" "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" /usr/local/cuda/bin/nvcc; do
    # (a wrapper left behind by an uninstalled toolkit does not count)
    if [ -n "$c" ] && [ -x "$c" ] && "$c" --version >/dev/null 2>&1; then nvcc="$c"; break; fi
  done
fi
if [ -z "$nvcc" ]; then
  echo "SKIP: nvcc not found (set NVCC or CUDA_HOME); this test needs the CUDA toolkit"
  exit 77
fi

fail=0
problem() { echo "FAIL: $*"; fail=1; }
expect_line() {  # FILE LINE: LINE occurs exactly once in FILE
  local n
  n="$(grep -cxF -- "$2" "$1" || true)"
  [ "$n" = 1 ] || problem "expected once in $(basename "$1"), found $n times: $2"
}
rm -rf "$work"
mkdir -p "$work"
cd "$work"

echo "== building with $nvcc"
"$nvcc" -std=c++20 -arch=sm_90 -I"$repo/guest-lib/include" -I"$repo/tests" -c "$app_src/abi_parity_nvcc.cu" -o abi_parity_nvcc.o
"$nvcc" -cudart shared -arch=sm_90 -o app "$app_src/registration_app.cu"
"$nvcc" -cudart shared -arch=sm_90 -rdc=true -o rdc_app "$app_src/rdc_main.cu" "$app_src/rdc_other.cu"

# The binaries are what any application is: NVIDIA's soname, versioned imports.
readelf -d app | grep -q 'NEEDED.*\[libcudart\.so\.13\]' || problem "app does not need libcudart.so.13"
nm -D --undefined-only app | grep -q ' __cudaRegisterFatBinary@libcudart\.so\.13$' ||
  problem "app does not import __cudaRegisterFatBinary@libcudart.so.13"

# A sanitizer build of the library needs its runtime loaded first.
preload=""
for rt in libasan libtsan; do
  if readelf -d "$libdir/libcudart.so.13" | grep -q "NEEDED.*\[$rt\.so"; then
    preload="$(ldd "$libdir/libcudart.so.13" | awk -v rt="$rt" '$1 ~ "^"rt {print $3}')"
  fi
done
run() {  # LOGLEVEL PROGRAM: runs it against guest-lib, stdout -> PROGRAM.LOGLEVEL.out, stderr -> .err
  local rc=0
  env LD_LIBRARY_PATH="$libdir" LD_BIND_NOW=1 VMCUDA_LOG="$1" VMCUDA_SOCKET=/nonexistent/vmcuda.sock ${preload:+LD_PRELOAD="$preload"} \
    "./$2" > "$2.$1.out" 2> "$2.$1.err" || rc=$?
  [ "$rc" = 0 ] || { problem "$2 (VMCUDA_LOG=$1) exited with $rc; stderr:"; head -20 "$2.$1.err"; }
  if grep -E 'no version information|undefined symbol|symbol lookup error' "$2.$1.err"; then
    problem "$2: the dynamic linker complained"
  fi
}

echo "== app, VMCUDA_LOG=1"
run 1 app
cat > app.expected <<'EOF'
runtime_version 0 13000
error_string invalid argument
error_name cudaErrorNotSupported
last_error_initial 0
malloc 100
malloc_again 100
peek 100
get 100
get_again 0
launch_add 100
launch_fill 100
launch_empty 100
channel 32 32 32 32 2
sync 100
EOF
diff -u app.expected app.1.out || problem "app's output differs (above)"
# With no stub to reach, every device call fails with cudaErrorNoDevice and one line says
# why and what to do; nothing else is logged. This also shows that guest-lib, not
# NVIDIA's library from the ldconfig cache, was loaded.
cat > app.expected_err <<'EOF'
vmcuda: no GPU: connect /nonexistent/vmcuda.sock (is vmcuda-stub running and serving this socket?): No such file or directory. Start the app with vmcuda-run, or set VMCUDA_SOCKET to the socket of a running vmcuda-stub
EOF
# (No __cudaInitModule warning: the app never touches mvar on the host.)
diff -u app.expected_err app.1.err || problem "app's warnings differ (above)"

echo "== app, VMCUDA_LOG=0"
run 0 app
cmp -s app.1.out app.0.out || problem "app's output depends on VMCUDA_LOG"
[ ! -s app.0.err ] || { problem "VMCUDA_LOG=0 still logs:"; cat app.0.err; }

echo "== app, VMCUDA_LOG=3"
run 3 app
for line in \
  "vmcuda: module: module 1: function _Z3addPif6Paramscl (host stub" \
  "vmcuda: module: module 1: function _Z4fillIiEvPT_S0_ (host stub" \
  "vmcuda: module: module 1: function _Z5emptyv (host stub" \
  "vmcuda: module: module 1: variable dvar, 16 bytes" \
  "vmcuda: module: module 1: constant cvar, 64 bytes" \
  "vmcuda: module: module 1: managed variable mvar, 4 bytes" \
  "vmcuda: module: module 1: registered 3 functions, 3 variables (1 managed)" \
  "vmcuda: launch: push grid 2,1,1 block 64,1,1 shared 0 stream (nil)" \
  "vmcuda: launch: push grid 1,2,3 block 4,5,1 shared 16 stream (nil)" \
  "vmcuda: module: kernel _Z3addPif6Paramscl (host" \
  "vmcuda: module: kernel _Z4fillIiEvPT_S0_ (host" \
  "vmcuda: module: kernel _Z5emptyv (host" \
  "vmcuda: module: module 1: unregistered"; do
  [ "$(grep -cF -- "$line" app.3.err || true)" = 1 ] || problem "expected once in VMCUDA_LOG=3 stderr: $line"
done
grep -Eq '^vmcuda: module: module 1: fatbin wrapper version 1 at 0x[0-9a-f]+: fatbin 0x[0-9a-f]+, [0-9]+ bytes \(sm_90 ELF, compute_90 PTX zstd\), 0 relocatable fatbins$' app.3.err ||
  problem "no fatbin line for module 1 (sm_90 ELF + compute_90 PTX zstd)"
expect_line app.3.err "vmcuda: no GPU: connect /nonexistent/vmcuda.sock (is vmcuda-stub running and serving this socket?): No such file or directory. Start the app with vmcuda-run, or set VMCUDA_SOCKET to the socket of a running vmcuda-stub"

echo "== rdc_app (-rdc=true), VMCUDA_LOG=3"
run 3 rdc_app
printf 'launch_main 100\nlaunch_other 100\n' | diff -u - rdc_app.3.out || problem "rdc_app's output differs (above)"
grep -Eq '^vmcuda: module: module 1: fatbin wrapper version 2 at .*, 2 relocatable fatbins$' rdc_app.3.err ||
  problem "rdc_app: no version-2 wrapper with 2 relocatable fatbins"
for line in \
  "vmcuda: module: module 1: function _Z11kernel_mainv (host stub" \
  "vmcuda: module: module 1: function _Z12kernel_otherPi (host stub" \
  "vmcuda: module: module 1: variable counter, 4 bytes" \
  "vmcuda: module: module 1: registered 2 functions, 1 variables (0 managed)" \
  "vmcuda: module: kernel _Z12kernel_otherPi (host"; do
  [ "$(grep -cF -- "$line" rdc_app.3.err || true)" = 1 ] || problem "expected once in rdc_app's stderr: $line"
done
[ "$(grep -c 'fatbin wrapper' rdc_app.3.err)" = 1 ] || problem "rdc_app registered more than one fatbin"

if [ "$fail" = 0 ]; then echo "PASS"; fi
exit "$fail"
