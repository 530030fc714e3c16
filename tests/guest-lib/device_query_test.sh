#!/usr/bin/env bash
# The device area through an unmodified nvcc-built program: tests/cuda/bin/device_query
# (tests/cuda/device_query.cu, prebuilt by scripts/build-cuda-tests.sh) run by vmcuda-run
# against the test stub (the executor standing in for the GPU).
#  - What does not depend on the device (flags, peers of one device, every error code and
#    last-error line) must equal the program's native run on a GPU
#    (tests/cuda/expected/device_query.out, captured on an H200 with NVIDIA's library).
#  - What describes the device must be consistent: each cudaDeviceProp field equals its
#    attribute, the PCI id string the PCI fields, cudaMemGetInfo's total totalGlobalMem,
#    whichever device the stub presents (tests/cuda's cuda_device_query compares it all
#    with the native run when the stub presents the recorded GPU).
# Exits 77 (skip) when the prebuilt program is missing.
#
# Usage: device_query_test.sh REPO_ROOT VMCUDA_RUN LIBDIR TEST_STUB
set -euo pipefail
repo="$1" run="$2" libdir="$3" stub="$4"
bin="$repo/tests/cuda/bin/device_query"
native="$repo/tests/cuda/expected/device_query.out"
if [ ! -x "$bin" ]; then
  echo "SKIP: no $bin (scripts/build-cuda-tests.sh builds it where nvcc is)"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rc=0
VMCUDA_STUB="$stub" VMCUDA_SOCKET="$work/stub.sock" VMCUDA_LIBDIR="$libdir" VMCUDA_LOG=1 \
  timeout 120 "$run" -- "$bin" >"$work/out" 2>"$work/err" || rc=$?
fail=0
problem() { echo "FAIL: $*"; fail=1; }
[ "$rc" = 0 ] || { problem "device_query exited with $rc; stderr:"; cat "$work/err"; }
if grep -q 'vmcuda: ' "$work/err"; then problem "vmcuda warned:"; grep 'vmcuda: ' "$work/err"; fi

expect() {  # LINE: occurs exactly once in the output
  [ "$(grep -cxF -- "$1" "$work/out" || true)" = 1 ] || problem "expected once: $1"
}
value() { sed -n "s/^$1 //p" "$work/out"; }  # the rest of the line that starts with $1
expect "runtime 13000 driver_positive 1"
expect "count 1"
expect "device 0 reserved nonzero 0"
expect "device 0 by pci 0"
expect "failures 0"
# Whichever device the stub presents (the executor's own or the recorded GPU profile),
# the properties, the attributes and the PCI id must agree with one another.
for pair in maxThreadsPerBlock:1 warpSize:10 multiProcessorCount:16 major:75 minor:76 l2CacheSize:38 \
            pciBusID:33 pciDeviceID:34 pciDomainID:50 unifiedFunctionPointers:129 gpuPciSubsystemID:140; do
  field=${pair%%:*} attr=${pair##*:}
  [ -n "$(value "device 0 $field")" ] || problem "no line for $field"
  [ "$(value "device 0 $field")" = "$(value "device 0 attribute $attr =")" ] ||
    problem "$field ($(value "device 0 $field")) is not attribute $attr ($(value "device 0 attribute $attr ="))"
done
pci="$(printf '%04X:%02X:%02X.0' "$(value 'device 0 pciDomainID')" "$(value 'device 0 pciBusID')" \
       "$(value 'device 0 pciDeviceID')")"
expect "device 0 pci $pci"
[ "$(value 'meminfo total' | cut -d' ' -f1)" = "$(value 'device 0 totalGlobalMem')" ] ||
  problem "cudaMemGetInfo's total is not totalGlobalMem"
# Every attribute number CUDA 13.0 knows answers, as NVIDIA's does on an H200.
[ "$(grep -c '^device 0 attribute [0-9]* = ' "$work/out" || true)" = 147 ] || problem "not 147 attributes answered"

if [ -f "$native" ]; then
  filter() { grep -v -e '^device ' -e '^meminfo total ' "$1"; }
  if ! diff -u <(filter "$native") <(filter "$work/out"); then
    problem "the device-independent lines differ from NVIDIA's (above: - native, + vmcuda)"
  fi
else
  echo "note: no native reference $native; device-independent lines not compared"
fi
[ "$fail" = 0 ] && echo "PASS (device: $(value "device 0 name"), pci $pci)"
exit "$fail"
