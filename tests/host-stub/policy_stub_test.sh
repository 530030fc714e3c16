#!/usr/bin/env bash
# The per-VM policy file with the real stub (test executor): applied at start under the
# command line's options, reloaded by vmcudactl reload and SIGHUP, mistakes refused with
# the file, key and line, a bad reload keeping the VM's policy.
#   policy_stub_test.sh STUB VMCUDACTL
set -uo pipefail
stub="$1" ctl="$2"
. "$(dirname "$0")/../support/checks.sh"
export VMCUDA_RUN_DIR="$work"
pol="$work/policy.toml"
field() { "$ctl" status vm1 --json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
cat >"$pol" <<'T'
[profiles.small]
memory = "32M"
weight = 2
[vm.vm1]
profile = "small"
weight = 3
T
"$stub" --socket "$work/vm1.sock" --policy "$pol" 2>"$work/stub.log" &
pids+=($!)
stub_pid=$!
wait_socket "$work/vm1.ctl" || bad "the stub did not start: $(cat "$work/stub.log")"
[ "$(field memory_quota_bytes)" = $((32 << 20)) ] && ok "the profile's quota applies (32 MiB)" || bad "quota $(field memory_quota_bytes)"
[ "$(field weight)" = 3 ] && ok "the VM's own weight wins over its profile's" || bad "weight $(field weight)"
[ "$(field profile)" = small ] && ok "status names the profile" || bad "profile $(field profile)"

sed -i 's/32M/64M/' "$pol"
out="$("$ctl" reload vm1 2>&1)"
[ "$(field memory_quota_bytes)" = $((64 << 20)) ] && ok "vmcudactl reload: the new quota at once ($out)" || bad "after reload: $(field memory_quota_bytes): $out"
printf '[vm.vm1]\nmemroy = "1G"\n' >"$pol"
out="$("$ctl" reload vm1 2>&1)" && bad "vmcudactl reload succeeded on a bad file"
if [[ "$out" == *"not reloaded"*"memroy"* ]] && [ "$(field memory_quota_bytes)" = $((64 << 20)) ]; then ok "a bad file is refused and the VM keeps its policy"
else bad "bad file: $out, quota $(field memory_quota_bytes)"; fi
printf '[vm.vm1]\nmemory = "16M"\ndevices = "auto"\n' >"$pol"
kill -HUP $stub_pid
for _ in $(seq 50); do [ "$(field memory_quota_bytes)" = $((16 << 20)) ] && break; sleep 0.1; done
[ "$(field memory_quota_bytes)" = $((16 << 20)) ] && ok "SIGHUP reloads" || bad "after SIGHUP: $(field memory_quota_bytes)"
grep -q "GPUs apply when the stub restarts" "$work/stub.log" && ok "a change of GPUs waits for a restart, and says so" \
  || bad "no restart note: $(tail -n 3 "$work/stub.log")"
# An option on the command line wins over the file.
"$stub" --socket "$work/vm2.sock" --vm vm1b --policy "$pol" --memory-quota-mib 8 2>"$work/stub2.log" &
pids+=($!)
wait_socket "$work/vm2.ctl" || bad "the second stub did not start: $(cat "$work/stub2.log")"
q=$("$ctl" --socket "$work/vm2.ctl" status --json | python3 -c "import json,sys; print(json.load(sys.stdin)['memory_quota_bytes'])")
[ "$q" = $((8 << 20)) ] && ok "--memory-quota-mib wins over the policy" || bad "quota $q"
# Mistakes at start: refused, naming the file and the key.
printf '[vm.vm3]\nweight = 0\n' >"$work/bad.toml"
refused "a bad policy at start" "bad.toml: vm.vm3.weight (line 2) must be a whole number" \
  "$stub" --socket "$work/vm3.sock" --policy "$work/bad.toml"
refused "a named policy file that is missing" "does not exist" "$stub" --socket "$work/vm4.sock" --policy "$work/none.toml"
finish "the policy file works"
