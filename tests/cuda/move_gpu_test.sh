#!/usr/bin/env bash
# Two GPUs of one model (the executor's two; on the GPU machine, two real ones):
#  1. a VM moved between them while its programs run (vmcudactl suspend, then resume
#     --devices 1, then back): each program prints exactly what it prints natively, and
#     status names the GPU the VM is on;
#  2. placement by policy: stubs started with --devices auto share a --placement-dir and
#     each takes the GPU that the fewest live VMs use; a stub that ended counts no more.
#   move_gpu_test.sh STUB VMCUDACTL LIBDIR BINDIR EXPECTED_DIR [PROGRAMS...]
set -uo pipefail
stub="$1" ctl="$2" libdir="$3" bindir="$4" expected="$5"
shift 5
. "$(dirname "$0")/../support/checks.sh"
export VMCUDA_RUN_DIR="$work"
gpus_of() { "$ctl" status "$1" --json | python3 -c 'import json,sys; print(",".join(g.split(":")[0] for g in json.load(sys.stdin)["gpus"]))'; }

# 1. Moves while programs run.
"$stub" --socket "$work/vm1.sock" --devices 0 --gpu-pool 0,1 --placement-dir "$work/placement" 2>"$work/stub.log" &
pids+=($!)
wait_socket "$work/vm1.ctl" || bad "the stub made no control socket: $(cat "$work/stub.log")"
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(vector_add streams_events symbols_pitch managed_vars)
moves=0
for p in "${programs[@]}"; do
  [ -x "$bindir/$p" ] || { bad "no test program $bindir/$p"; continue; }
  VMCUDA_SOCKET="$work/vm1.sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$bindir/$p" >"$work/$p.out" 2>"$work/$p.err" &
  app=$!
  to=1
  while kill -0 $app 2>/dev/null; do
    "$ctl" suspend vm1 >"$work/ctl.out" 2>&1 || continue
    if ! "$ctl" resume vm1 --devices $to >"$work/ctl.out" 2>&1; then
      bad "$p: resume on GPU $to failed: $(cat "$work/ctl.out")"; kill $app 2>/dev/null; break
    fi
    on="$(gpus_of vm1)"
    [ "$on" = "$to" ] || bad "$p: moved to GPU $to, status says the VM is on $on"
    moves=$((moves + 1)); to=$((1 - to))
  done
  wait $app || bad "$p exited with an error after moves between GPUs: $(tail -n 5 "$work/$p.err")"
  if diff -u "$expected/$p.out" "$work/$p.out" >"$work/$p.diff"; then ok "$p: identical to the native run, moved between GPUs while it ran"
  else bad "$p: differs after moves: $(head -n 20 "$work/$p.diff")"; fi
done
[ $moves -gt 0 ] || bad "no move happened: the test proves nothing"
ok "$moves moves between GPU 0 and GPU 1"
# Refused moves say why and leave the VM where it is.
"$ctl" suspend vm1 >/dev/null 2>&1
refused "a move to a GPU outside the pool" "not among the GPUs" "$ctl" resume vm1 --devices 7
refused "a move that names two GPUs for a VM with one" "has 1 GPU" "$ctl" resume vm1 --devices 0,1
"$ctl" resume vm1 >/dev/null 2>&1 || bad "resume after refused moves failed"
[ "$(gpus_of vm1)" = "$(gpus_of vm1)" ] && ok "status answers after refused moves"

# 2. Placement by policy.
start_auto() {  # VM [auto:N]
  "$stub" --socket "$work/$1.sock" --devices "${2:-auto}" --placement-dir "$work/auto" 2>"$work/$1.log" &
  echo $! >"$work/$1.pid"
  pids+=("$(cat "$work/$1.pid")")
  wait_socket "$work/$1.ctl" || bad "$1's stub did not start: $(cat "$work/$1.log")"
}
start_auto a; start_auto b
[ "$(gpus_of a)" = 0 ] && [ "$(gpus_of b)" = 1 ] && ok "two auto-placed VMs take different GPUs (a: $(gpus_of a), b: $(gpus_of b))" \
  || bad "auto placement put a on $(gpus_of a) and b on $(gpus_of b)"
start_auto c
[ "$(gpus_of c)" = 0 ] && ok "a third goes to the least used, lowest GPU (0)" || bad "a third VM went to $(gpus_of c)"
kill "$(cat "$work/a.pid")"; wait "$(cat "$work/a.pid")" 2>/dev/null || true
start_auto d
[ "$(gpus_of d)" = 1 ] || [ "$(gpus_of d)" = 0 ] || bad "d on $(gpus_of d)"
# a ended: GPU 0 has c, GPU 1 has b: a tie, so the lowest.
[ "$(gpus_of d)" = 0 ] && ok "a stub that ended counts no more (d takes GPU 0 beside c)" || bad "d went to $(gpus_of d) though a ended"
start_auto e auto:2
[ "$(gpus_of e)" = "0,1" ] && ok "auto:2 gives a VM both GPUs" || bad "auto:2 gave $(gpus_of e)"
refused "auto:3 on two GPUs" "more GPUs than" "$stub" --socket "$work/f.sock" --devices auto:3 --placement-dir "$work/auto"
finish "moves between GPUs and placement by policy work"
