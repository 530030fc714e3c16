#!/usr/bin/env bash
# CUDA IPC is between programs of ONE VM: a handle exported by a program of VM A opens in
# another program of VM A (worker processes, and again with --isolation thread) and is
# refused in a program of VM B (another stub: another table) with
# cudaErrorInvalidResourceHandle. Uses tests/cuda/bin/ipc's `export` and `open` halves; the
# same for a memory pool and a pointer of it (tests/cuda/bin/ipc_pool's halves; VM B:
# cudaErrorInvalidValue). With
# VMCUDACTL: VMs a and t suspended and resumed, then saved and restored, while their program has
# memory exported (host-stub/src/ipc.cc carries it): the handle printed before still opens in
# a program of the VM afterwards and reads the exporter's bytes (first: 41).
#   ipc_vm_test.sh STUB LIBDIR BINDIR [VMCUDACTL]
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub.
set -euo pipefail
stub="$1" libdir="$2" bindir="$3" ctl="${4:-}"
work="$(mktemp -d)"
export VMCUDA_RUN_DIR="$work"
pids=()
cleanup() {
  exec 3>&- 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
start_stub() {  # NAME [OPTIONS]
  local name="$1"; shift
  "$stub" --socket "$work/$name.sock" --state-dir '' "$@" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -S "$work/$name.sock" ] && return 0; sleep 0.05; done
  echo "stub $name did not start:"; cat "$work/$name.log"; exit 1
}
start_stub a
start_stub b
start_stub t --isolation thread
on() {  # VM PROGRAM-ARGS...
  local vm="$1"; shift
  VMCUDA_SOCKET="$work/$vm.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/ipc" "$@"
}
status=0
expect() {  # WHAT EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "$1: ok"; else echo "$1: expected '$2', got '$3'"; status=1; fi
}
for vm in a t; do
  mkfifo "$work/in.$vm"
  on "$vm" export <"$work/in.$vm" >"$work/handle.$vm" 2>"$work/export.$vm.err" &
  exporter=$!
  pids+=($exporter)
  exec 3>"$work/in.$vm"  # the exporter keeps its memory until this closes
  for _ in $(seq 400); do [ -s "$work/handle.$vm" ] && break; sleep 0.05; done
  handle="$(head -n1 "$work/handle.$vm")"
  [ -n "$handle" ] || { echo "no handle from the exporter in VM $vm:"; cat "$work/export.$vm.err"; exit 1; }
  if [ -n "$ctl" ]; then
    # Exported memory is carried (worker processes in VM a, threads in VM t): suspend and
    # resume, then save and restore, of the VM.
    if "$ctl" suspend "$vm" >"$work/ctl.out" 2>&1 && "$ctl" resume "$vm" >>"$work/ctl.out" 2>&1; then
      echo "VM $vm: suspend and resume with IPC memory exported: ok"
    else echo "VM $vm: suspend/resume with IPC memory exported failed:"; cat "$work/ctl.out"; "$ctl" resume "$vm" || true; status=1; fi
    expect "VM $vm: after suspend/resume, a program of the VM opens the handle from before" "open: cudaSuccess
first: 41
close: cudaSuccess" "$(on "$vm" open "$handle" 2>&1)"
    if "$ctl" save "$vm" "$work/saved-$vm" >"$work/ctl.out" 2>&1 &&
      "$ctl" restore "$work/saved-$vm" --vm "$vm" >>"$work/ctl.out" 2>&1; then
      echo "VM $vm: save and restore with IPC memory exported: ok"
    else echo "VM $vm: save/restore with IPC memory exported failed:"; cat "$work/ctl.out"; "$ctl" resume "$vm" || true; status=1; fi
  fi
  expect "VM $vm: a program of the same VM opens it" "open: cudaSuccess
first: 41
close: cudaSuccess" "$(on "$vm" open "$handle" 2>&1)"
  expect "VM $vm: a program of VM b is refused" "open: cudaErrorInvalidResourceHandle" \
    "$(VMCUDA_SOCKET="$work/b.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/ipc" open "$handle" 2>&1)"
  exec 3>&-
  wait "$exporter" || { echo "the exporter in VM $vm failed:"; cat "$work/export.$vm.err"; status=1; }
  # Its program ended: once the stub has closed its slot (asynchronously, as the driver
  # tears down a dead process), the handle names nothing any more, in its own VM too.
  for _ in $(seq 100); do
    after="$(on "$vm" open "$handle" 2>&1)"
    [ "$after" != "open: cudaSuccess"$'\n'"first: 41"$'\n'"close: cudaSuccess" ] && break
    sleep 0.1
  done
  expect "VM $vm: after the exporter ended" "open: cudaErrorInvalidResourceHandle" "$after"
done
# Memory pools (tests/cuda/bin/ipc_pool's halves): the pool's descriptor (opened through
# /proc/PID/fd) and a pointer's export data import in a program of the same VM, not in VM b.
for vm in a t; do
  mkfifo "$work/pin.$vm"
  on_pool() { local v="$1"; shift; VMCUDA_SOCKET="$work/$v.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/ipc_pool" "$@"; }
  on_pool "$vm" export <"$work/pin.$vm" >"$work/pool.$vm" 2>"$work/pool_export.$vm.err" &
  exporter=$!
  pids+=($exporter)
  exec 3>"$work/pin.$vm"
  for _ in $(seq 400); do [ -s "$work/pool.$vm" ] && break; sleep 0.05; done
  read -r epid efd edata <"$work/pool.$vm" || true
  [ -n "${edata:-}" ] || { echo "no pool export in VM $vm:"; cat "$work/pool_export.$vm.err"; exit 1; }
  expect "VM $vm: a program of the same VM imports the pool and its pointer" "import: cudaSuccess
pointer: cudaSuccess
first: 41
free: cudaSuccess" "$(on_pool "$vm" open "$epid" "$efd" "$edata" 2>&1)"
  expect "VM $vm: a program of VM b cannot import the pool" "import: cudaErrorInvalidValue" \
    "$(on_pool b open "$epid" "$efd" "$edata" 2>&1)"
  exec 3>&-
  wait "$exporter" || { echo "the pool exporter in VM $vm failed:"; cat "$work/pool_export.$vm.err"; status=1; }
done
exit $status
