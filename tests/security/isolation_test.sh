#!/usr/bin/env bash
# Finding 10.1: a program's kernel given another program's device address (same VM, same
# stub) must fault or read something else, never the other program's data
# (tests/security/isolation_probe.cu). --isolation process (the default) promises it;
# --isolation thread is documented as "the programs trust each other": its outcome is
# printed, not judged.
#   isolation_test.sh STUB LIBDIR PROBE
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub (scripts/gpu-check.sh).
set -uo pipefail
stub="$1" libdir="$2" probe="$3"
. "$(dirname "$0")/../support/checks.sh"
[ -x "$probe" ] || { echo "no probe $probe: run scripts/build-cuda-tests.sh where nvcc is"; exit 1; }

attempt() {  # MODE -> owner and intruder lines in $work/MODE.{owner,intruder}
  local mode="$1" d="$work/$1"
  mkdir -p "$d"
  "$stub" --socket "$d/vm.sock" --isolation "$mode" 2>"$d/stub.log" &
  local sp=$!
  pids+=($sp)
  wait_socket "$d/vm.sock" || { bad "$mode: the stub did not start: $(cat "$d/stub.log")"; return; }
  VMCUDA_SOCKET="$d/vm.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$probe" owner "$d" >"$d/owner" 2>&1 &
  local op=$!
  VMCUDA_SOCKET="$d/vm.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$probe" intruder "$d" >"$d/intruder" 2>&1
  wait $op
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
}

attempt process
owner="$(cat "$work/process/owner")" intruder="$(cat "$work/process/intruder")"
echo "process: $intruder"
if [[ "$intruder" =~ intruder:\ kernel\ [A-Za-z]+,\ 0\ secret\ words ]]; then
  ok "--isolation process: another program's address in a kernel returned none of its data"
else
  bad "--isolation process: $intruder"
fi
[[ "$owner" == *"$((256 * 1024)) of $((256 * 1024)) secret words intact"* ]] && ok "the owner's data is intact ($owner)" \
  || bad "the owner's data: $owner"

attempt thread
echo "thread (documented: the programs of a VM trust each other; not judged): $(cat "$work/thread/intruder")"
finish "isolation between the programs of a VM holds as documented"
