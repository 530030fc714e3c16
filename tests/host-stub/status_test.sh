#!/usr/bin/env bash
# vmcudactl status / top / metrics against running stubs (test executor): each program of a
# VM with its guest pid, name, memory, modules' charge, kernels and library calls; Prometheus' text format with every family
# once and its samples together, also for several VMs; the textfile replaced whole.
#   status_test.sh STUB VMCUDACTL LIBDIR BINDIR
set -uo pipefail
stub="$1" ctl="$2" libdir="$3" bindir="$4"
. "$(dirname "$0")/../support/checks.sh"
export VMCUDA_RUN_DIR="$work"
for vm in vm1 vm2; do
  "$stub" --socket "$work/$vm.sock" 2>"$work/$vm.log" &
  pids+=($!)
  wait_socket "$work/$vm.ctl" || bad "$vm's stub did not start: $(cat "$work/$vm.log")"
done
(for _ in $(seq 200); do VMCUDA_SOCKET="$work/vm1.sock" LD_LIBRARY_PATH="$libdir" "$bindir/streams_events" >/dev/null 2>&1 || exit; done) &
pids+=($!)
seen=
for _ in $(seq 100); do
  out="$("$ctl" status vm1)"
  if grep -q "streams_events" <<<"$out"; then seen=1; break; fi
  sleep 0.05
done
[ -n "$seen" ] && ok "status lists the program by name: $(grep streams_events <<<"$out" | tr -s ' ')" \
  || bad "status never showed the program: $out"
grep -q "MODULES KiB" <<<"$out" && ok "status lists what each program's modules are charged (MODULES KiB)" \
  || bad "status has no MODULES KiB column: $out"
"$ctl" status vm1 --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert isinstance(s["module_bytes"], int) and s["module_bytes"] >= 0, s
assert all(isinstance(c["module_bytes"], int) for c in s["client_list"]), s
' && ok "status --json: module_bytes per VM and program" || bad "status --json has no module_bytes: $("$ctl" status vm1 --json)"
# The image cache (host-stub/src/image_cache.h): the program ran many times, each in a worker
# process of its own; its fatbin crossed once, the later runs loaded it from the cache.
for _ in $(seq 100); do
  "$ctl" status vm1 --json | python3 -c 'import json,sys; c=json.load(sys.stdin)["image_cache"]; sys.exit(c["hits"] < 2)' && break
  sleep 0.05
done
"$ctl" status vm1 --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["image_cache"]
assert c["entries"] >= 1 and c["bytes"] > 0 and c["vm_entries"] == c["entries"], c
assert c["hits"] >= 2 and c["stored"] == c["entries"], c
assert c["misses"] <= c["entries"] + 1, c  # each image crossed about once, not once per run
assert c["cap_bytes"] == 4096 << 20, c
' && ok "status --json: image_cache; worker processes share it (one crossing per image)" \
  || bad "image cache: $("$ctl" status vm1 --json)"
# Calls of a library remoted at its API, per program (which copy of cuFFT a program really used).
(for _ in $(seq 200); do VMCUDA_SOCKET="$work/vm2.sock" LD_LIBRARY_PATH="$libdir" "$bindir/cufft_basic" >/dev/null 2>&1 || exit; done) &
pids+=($!)
# (Each run is short: the status and the metrics are polled until they show one.)
got=
for _ in $(seq 400); do
  "$ctl" status vm2 --json >"$work/vm2.json" 2>/dev/null
  python3 -c '
import json, sys
cs = json.load(open(sys.argv[1]))["client_list"]
sys.exit(not (any(c["library_calls"]["cufft"] > 0 for c in cs) and
              all(c["library_calls"]["cudnn"] == 0 and set(c["library_calls"]) == {"cublas", "cublaslt", "cufft", "curand", "cusparse", "cusolver", "cudnn"} for c in cs)))' "$work/vm2.json" 2>/dev/null && { got=1; break; }
  sleep 0.025
done
[ -n "$got" ] && ok "status --json: library_calls per program (cufft_basic: cuFFT calls, no cuDNN)" \
  || bad "library_calls: $(cat "$work/vm2.json")"
got=
for _ in $(seq 400); do
  grep -q '^vmcuda_client_library_calls_total{vm="vm2",.*library="cufft"} [1-9]' <<<"$("$ctl" metrics)" && { got=1; break; }
  sleep 0.025
done
[ -n "$got" ] && ok "metrics: vmcuda_client_library_calls_total" || bad "metrics never showed cuFFT calls"
m="$("$ctl" metrics)"
for fam in vmcuda_vm_up vmcuda_vm_clients vmcuda_client_kernels_total vmcuda_vm_module_bytes vmcuda_client_module_bytes \
           vmcuda_image_cache_entries vmcuda_image_cache_hits_total vmcuda_image_cache_misses_total; do
  [ "$(grep -c "^# TYPE $fam " <<<"$m")" = 1 ] || bad "metrics: $fam's TYPE is not there once"
done
# Each family's samples right after its header, for both VMs.
python3 - "$m" <<'P' && ok "metrics: every family once, its samples together, both VMs" || bad "metrics are not grouped: $m"
import sys
current, seen = None, set()
for line in sys.argv[1].splitlines():
    if line.startswith("# TYPE "):
        current = line.split()[2]
        assert current not in seen
        seen.add(current)
    elif not line.startswith("#"):
        assert line.split("{")[0] == current, line
ups = [l for l in sys.argv[1].splitlines() if l.startswith("vmcuda_vm_up{")]
assert len(ups) == 2 and all(l.endswith(" 1") for l in ups), ups
P
"$ctl" metrics vm1 --textfile "$work/vmcuda.prom" && grep -q '^vmcuda_vm_up{vm="vm1"} 1$' "$work/vmcuda.prom" \
  && [ ! -e "$work/vmcuda.prom.tmp" ] && ok "metrics --textfile writes the file whole" || bad "textfile: $(cat "$work/vmcuda.prom" 2>&1)"
# Fair sharing's figures (host-stub/src/fair_share.h): per GPU in the JSON, the table's
# columns, the metrics' families.
"$ctl" status vm1 --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
g = s["gpu_time"]
assert len(g) == 1 and g[0]["gpu"] == 0 and g[0]["weight"] == 1, g
assert g[0]["busy_seconds"] >= 0 and 0 <= g[0]["share"] <= 1, g
' && ok "status --json: the VM's GPU time per GPU" || bad "status --json has no gpu_time: $("$ctl" status vm1 --json)"
grep -q "GPU SHARE" <<<"$("$ctl" status)" && ok "status table: GPU SHARE column" || bad "no GPU SHARE column: $("$ctl" status)"
for fam in vmcuda_vm_gpu_busy_seconds_total vmcuda_vm_gpu_time_share; do
  grep -q "^$fam{vm=\"vm1\",gpu=\"0\"} " <<<"$m" || bad "metrics: no $fam for vm1's GPU 0"
done
t="$("$ctl" top --count 2 --interval 0.2)"
[ "$(grep -c '^VM  *STATE' <<<"$t")" = 2 ] && ok "top refreshes (2 tables)" || bad "top: $t"
refused "top of a VM with no stub" "not answering" "$ctl" top nosuchvm --count 1
finish "status, top and metrics work"
