#!/usr/bin/env bash
# Every CUDA test program, unmodified, suspended and resumed over and over while it runs
# (vmcudactl suspend/resume against a running stub, clients in worker processes), and once
# saved to a directory and restored from it: each must print exactly what it prints natively.
# While suspended, the stub must hold no device memory for the VM (vmcudactl status).
#   suspend_resume_test.sh STUB VMCUDACTL LIBDIR BINDIR EXPECTED_DIR [PROGRAMS...]
# SUSPEND_TEST_STUB_ARGS: more options for the stub (e.g. "--isolation thread").
# SUSPEND_TEST_SEED: replays a run's suspend moments (each run prints its seed): between
# cycles the test waits 0 to 4 ms, drawn from this seed, so runs hit different moments.
# A failing run keeps its work directory (outputs, stderr, the stub's log) and names it.
# CI: the test stub (executor); the GPU machine: the real vmcuda-stub (scripts/gpu-check.sh).
set -euo pipefail
stub="$1" ctl="$2" libdir="$3" bindir="$4" expected="$5"
source "$(dirname "${BASH_SOURCE[0]}")/gpu_only.sh"  # comparable: [GPU only] lines
shift 5
work="$(mktemp -d)"
sock="$work/vm1.sock"
export VMCUDA_RUN_DIR="$work"
# shellcheck disable=SC2086  # word-split on purpose: several options
"$stub" --socket "$sock" ${SUSPEND_TEST_STUB_ARGS:-} 2>"$work/stub.log" &
stub_pid=$!
status=0
# At exit: a stub that died by a signal (not our SIGTERM) shows the end of its log, with the
# call stack it wrote (host-stub/src/crash_report.h). A failed run keeps its work directory
# (the programs' .out/.err and the whole stub log) to read later.
cleanup() {
  local rc=0
  kill $stub_pid 2>/dev/null
  wait $stub_pid 2>/dev/null || rc=$?
  if [ $rc -gt 128 ] && [ $rc -ne 143 ]; then
    echo "the stub died of signal $((rc - 128)); the end of its log:"; tail -n 60 "$work/stub.log"; status=1
  fi
  if [ $status -eq 0 ]; then rm -rf "$work"; else echo "--- kept for a look: $work"; fi
}
trap cleanup EXIT
seed="${SUSPEND_TEST_SEED:-$(( $(date +%s%N) % 1000000 ))}"
echo "suspend moments: SUSPEND_TEST_SEED=$seed replays them"
RANDOM=$seed
# 0 to 4 ms: a whole cycle takes a few ms, so the suspends fall at varied points of a program.
pause() { local us=$((RANDOM % 5000)); [ $us -lt 1000 ] || sleep "0.00$(printf %03d $((us / 1000)))"; }
for _ in $(seq 200); do [ -S "$sock" ] && [ -S "$work/vm1.ctl" ] && break; sleep 0.05; done
[ -S "$work/vm1.ctl" ] || { echo "the stub made no control socket"; cat "$work/stub.log"; exit 1; }

programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  for b in "$bindir"/*; do
    n="$(basename "$b")"
    # fault poisons its own client on purpose (a poisoned context has no state to save).
    # multi_gpu needs a stub with two devices (run_cuda_test.sh, scripts/gpu-multi-check.sh).
    # Graph programs are included: graphs and executable graphs are carried (graph_state.cc);
    # so are open stream captures one stream alone holds; only a suspend that lands while a
    # capture other streams joined (or with an event recorded in it) is open is refused (below).
    # ipc and ipc_pool (two processes of the VM sharing memory, an event, a pool) are carried:
    # both clients are suspended and resumed together (host-stub/src/ipc.cc). Virtual memory
    # objects, cuBLASLt objects (host-stub/src/cublaslt.cc), cuRAND generators (curand.cc; host
    # generators too: curand_host), cuDNN handles, backend descriptors and legacy descriptors
    # (tensor, filter, convolution, activation, pooling, dropout with its states, LRN, op-tensor,
    # reduce-tensor, spatial transformer, CTC loss, RNN and RNN data: cudnn.cc; cudnn_basic,
    # cudnn_legacy, cudnn_ops, cudnn_st_ctc, cudnn_rnn) and
    # cuSPARSE and cuSOLVER objects (nvobj.cc) are carried, and so are the attributes of every
    # stream, the per-thread and NULL streams' included (stream_attributes).
    case "$n" in fault|multi_gpu) continue ;; esac
    [ -f "$expected/$n.out" ] && programs+=("$n")
  done
fi

cycles_total=0
for p in "${programs[@]}"; do
  out="$work/$p.out"
  VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$bindir/$p" >"$out" 2>"$work/$p.err" &
  app=$!
  cycles=0
  # Suspend and resume as fast as the stub allows while the program runs.
  while kill -0 $app 2>/dev/null; do
    pause
    if "$ctl" suspend vm1 >"$work/ctl.out" 2>&1; then
      cycles=$((cycles + 1))
      # Nothing of the VM on the GPU meanwhile.
      # (A program that just ended may still be freeing its memory: its teardown runs on.)
      for _ in $(seq 50); do
        mem="$("$ctl" status vm1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["device_memory_bytes"])')"
        [ "$mem" = 0 ] && break
        sleep 0.1
      done
      [ "$mem" = 0 ] || { echo "$p: suspended, yet the VM holds $mem bytes of device memory 5 s later:"; "$ctl" status vm1; status=1; }
      if ! "$ctl" resume vm1 >"$work/ctl.out" 2>&1; then
        echo "$p: resume failed:"; cat "$work/ctl.out"; status=1
        kill $app 2>/dev/null; break  # held for good: nothing more to learn from it
      fi
    elif ! grep -q "not being served\|ended\|is gone\|no client\|did not reach\|stream capture(s) open\|a body of a conditional node\|(cudaGraphConditionalHandleCreate)\|(cudaGraphExecChildGraphNodeSetParams)\|which a resume could not replay\|zero pivot has not been read" "$work/ctl.out"; then
      # A client that ends between the listing and the hold is fine, and so is one with a
      # stream capture open that other streams joined, a conditional node's body held, a graph with
      # conditional handles or an executable graph whose child node was given another graph
      # after a resume (graph_nodes, for a moment: refused, it runs on: docs/snapshots.md);
      # and one whose cuSPARSE descriptor names a matrix the program destroyed before it (none
      # of ours do: they destroy descriptors first; refused, it runs on: docs/snapshots.md), or
      # whose legacy factorization or BSR solve left a zero pivot not read yet (cusparse_legacy,
      # cusparse_bsr read it right after, as NVIDIA's samples do: refused for that moment);
      # (cuFFT plans, cuRAND generators, cuDNN, cuSPARSE and cuSOLVER objects and IPC between
      # the VM's programs are carried);
      # anything else is not (texture and surface objects, views included, graphs and their
      # disabled nodes are carried: docs/snapshots.md).
      echo "$p: suspend failed:"; cat "$work/ctl.out"; status=1
    fi
  done
  rc=0
  wait $app || rc=$?
  cycles_total=$((cycles_total + cycles))
  if [ $rc -ne 0 ]; then
    echo "$p exited with $rc after $cycles suspend/resume cycles; its stderr:"; tail -n 20 "$work/$p.err"
    echo "its output, against the native run's:"; { diff -u "$expected/$p.out" "$out" || true; } | head -n 30; status=1
  elif diff -u <(comparable "$expected/$p.out" "$stub") <(comparable "$out" "$stub") >"$work/$p.diff"; then
    echo "$p: identical to the native run ($cycles suspend/resume cycles while it ran)"
  else
    echo "$p: DIFFERS from the native run after $cycles suspend/resume cycles:"; cat "$work/$p.diff"
    echo "its stderr:"; tail -n 20 "$work/$p.err"; status=1
  fi
done
[ $cycles_total -gt 0 ] || { echo "no program was ever suspended: the test proves nothing"; status=1; }

# Save to a directory and restore from it, midway through a program.
p=streams_events
[ -x "$bindir/$p" ] || p=vector_add
VMCUDA_SOCKET="$sock" LD_LIBRARY_PATH="$libdir" timeout 300 "$bindir/$p" >"$work/save.out" 2>"$work/save.err" &
app=$!
saved=0
while kill -0 $app 2>/dev/null; do
  rm -rf "$work/saved"
  if "$ctl" save vm1 "$work/saved" >"$work/ctl.out" 2>&1; then
    [ -f "$work/saved/manifest.json" ] || { echo "save wrote no manifest"; status=1; }
    if ! "$ctl" restore "$work/saved" --vm vm1 >"$work/ctl.out" 2>&1; then
      echo "restore failed:"; cat "$work/ctl.out"; status=1
      kill $app 2>/dev/null; break
    fi
    saved=$((saved + 1))
  fi
done
wait $app || { echo "$p exited with an error after save/restore"; status=1; }
if diff -u "$expected/$p.out" "$work/save.out"; then echo "$p: identical to the native run ($saved save/restore cycles)"
else echo "$p: DIFFERS after save/restore"; status=1; fi

# A dead stub not waited for is a zombie, which kill -0 still finds.
if ! kill -0 $stub_pid 2>/dev/null || [ "$(ps -o stat= -p $stub_pid | cut -c1)" = Z ]; then echo "the stub died"; status=1; fi
[ $status -eq 0 ] || { echo "--- the stub's log (seed $seed):"; tail -n 40 "$work/stub.log"; }
exit $status
