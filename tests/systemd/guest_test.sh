#!/usr/bin/env bash
# Inside the systemd guest of systemd_unit_test.sh (a oneshot service of that guest's real
# systemd, as root): installs the built packages as an admin would, runs the shipped
# vmcuda-stub@.service with the test executor standing in for the GPU (a drop-in that
# changes ExecStart= only), and checks what the unit promises:
#  1. readiness (Type=notify: `systemctl start` returns with the socket in place), its own
#     user and the sandbox (uid, NoNewPrivs, no capabilities, seccomp), the socket's owner,
#     group and mode; `systemd-analyze security`'s score (CI/security.txt);
#  2. a CUDA program through the guest package's libcudart.so.13 on the unit's socket;
#  3. `systemctl restart` midway through a program: the connection is kept in systemd's fd
#     store and handed to the next stub, which brings the program back: it ends with the
#     result of an uninterrupted run;
#  4. `kill -9` of the stub midway through a program: systemd restarts it (Restart=on-failure)
#     with the fds from its store, the running program fails within seconds saying its GPU
#     state is gone, and a new program runs on the same (kept) listening socket.
#   guest_test.sh CI_DIR   (CI_DIR/env: REPO, PROBE, TEST_STUB; the packages in CI_DIR/debs)
# Writes CI_DIR/guest.log (ok/FAIL lines), CI_DIR/security.txt, CI_DIR/journal.txt, CI_DIR/rc.
set -uo pipefail
ci=$1
. "$ci/env"
exec > >(tee "$ci/guest.log") 2>&1
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
T0=$(date +%s)
say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
vm=ci1
unit=vmcuda-stub@$vm.service
sock=/run/vmcuda/$vm.sock
rounds=150
finish() {
  journalctl -b --no-pager -o short-monotonic -u "$unit" > "$ci/journal.txt" 2>&1
  echo "$fail" > "$ci/rc"
  exit "$fail"
}
main_pid() { systemctl show -P MainPID "$unit"; }
# Until cuda_kill_probe steps (state file $1) has done round $2 (or 60 s).
at_round() {
  local r
  for _ in $(seq 600); do
    r=$(sed -n 's/^step round=\([0-9][0-9]*\) .*/\1/p' "$1" 2>/dev/null)
    [ -n "$r" ] && [ "$r" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
# Until the unit is active with a main process other than $1 (or 60 s).
new_stub() {
  local p
  for _ in $(seq 600); do
    p=$(main_pid)
    [ "$(systemctl is-active "$unit")" = active ] && [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
# The journal lines of the stub process $1.
stub_log() { journalctl -b --no-pager -o cat _PID="$1" 2>/dev/null; }
# WHO: the running stub says (at the default log level) that it took the socket and the
# connection of the program running then from systemd's fd store.
took_over() {
  local line
  line=$(stub_log "$(main_pid)" | grep -o "the socket and [0-9]* connection(s) taken over from the service manager's fd store")
  if [[ "$line" == "the socket and "[1-9]* ]]; then ok "$1: $line"
  else bad "$1 did not take the VM's connections from the fd store: $(stub_log "$(main_pid)" | head -n 5)"; fi
}

# ---- installed as an admin would: the packages, then the test executor in the GPU's place
say "dpkg -i the host and guest packages"
# man-db's trigger reads every manual page of this machine through 9p under TCG (minutes):
# skipped as man-db allows (its auto-update flag file); nothing of the test needs it.
rm -f /var/lib/man-db/auto-update
if dpkg -i "$ci"/debs/vmcuda-host_*.deb "$ci"/debs/vmcuda-guest_*.deb > "$ci/dpkg.log" 2>&1; then
  ok "dpkg -i vmcuda-host vmcuda-guest"
else bad "dpkg -i: $(tail -n 5 "$ci/dpkg.log")"; finish; fi
getent passwd vmcuda > /dev/null && ok "the package's postinst made the system user: $(getent passwd vmcuda)" ||
  bad "no user vmcuda after installing vmcuda-host (sysusers.d/vmcuda.conf)"
shipped=/lib/systemd/system/vmcuda-stub@.service
install -D -m 755 "$TEST_STUB" /usr/local/lib/vmcuda-ci/vmcuda-test-stub
# The shipped ExecStart= with the test executor's binary in vmcuda-stub's place: nothing else changes.
exec_start=$(sed -n 's|^ExecStart=/usr/bin/vmcuda-stub |ExecStart=/usr/local/lib/vmcuda-ci/vmcuda-test-stub |p' "$shipped")
[ -n "$exec_start" ] || { bad "no ExecStart=/usr/bin/vmcuda-stub in $shipped"; finish; }
mkdir -p /etc/systemd/system/vmcuda-stub@.service.d /etc/vmcuda
printf '# The test executor stands in for the GPU.\n[Service]\nExecStart=\n%s\n' "$exec_start" \
  > /etc/systemd/system/vmcuda-stub@.service.d/test-executor.conf
# A VM of the TCG guest's size (the per-VM settings file the unit reads).
printf 'VMCUDA_SLOTS=4\nVMCUDA_REGION_BYTES=268435456\n' > /etc/vmcuda/$vm.conf
systemctl daemon-reload

# ---- 1. readiness, user, sandbox
say "systemctl start $unit"
t=$(date +%s%N)
if systemctl start "$unit"; then
  ok "systemctl start returned after $(( ($(date +%s%N) - t) / 1000000 )) ms (Type=notify)"
else
  bad "systemctl start $unit failed:"; systemctl status --no-pager "$unit" | sed 's/^/  /'; finish
fi
[ -S "$sock" ] && ok "the socket was in place when start returned" || bad "no socket $sock after start"
pid=$(main_pid)
st=/proc/$pid/status
uid=$(id -u vmcuda)
read -r _ ruid euid suid fsuid < <(grep '^Uid:' "$st")
[ "$ruid $euid $suid $fsuid" = "$uid $uid $uid $uid" ] && ok "the stub (pid $pid) runs as vmcuda (uid $uid)" ||
  bad "the stub's uids: $ruid $euid $suid $fsuid (want $uid)"
[ "$(awk '/^NoNewPrivs:/ {print $2}' "$st")" = 1 ] && ok "NoNewPrivs: 1" || bad "$(grep NoNewPrivs "$st")"
for c in CapEff CapPrm CapBnd CapAmb; do
  [ "$(awk -v c="$c:" '$1 == c {print $2}' "$st")" = 0000000000000000 ] && ok "$c: 0" || bad "$(grep "^$c" "$st")"
done
[ "$(awk '/^Seccomp:/ {print $2}' "$st")" = 2 ] && ok "Seccomp: 2 (a system call filter)" || bad "$(grep Seccomp "$st")"
ok "its groups: $(awk '/^Groups:/ {$1=""; print}' "$st" | xargs -n1 getent group 2>/dev/null | cut -d: -f1 | xargs)"
[ "$(stat -c '%U:%G %a' "$sock")" = "vmcuda:libvirt-qemu 660" ] && ok "the socket: vmcuda:libvirt-qemu 660" ||
  bad "the socket: $(stat -c '%U:%G %a' "$sock") (want vmcuda:libvirt-qemu 660)"
if systemd-analyze security --no-pager "$unit" > "$ci/security.txt" 2>&1; then
  ok "systemd-analyze security: $(grep -o 'Overall exposure level for .*: [0-9.]* [A-Z]*' "$ci/security.txt")"
else bad "systemd-analyze security: $(tail -n 3 "$ci/security.txt")"; fi
sock_ino=$(stat -c %i "$sock")

# ---- 2. a program through the guest package's library on the unit's socket
run_va() { # NAME: vector_add, compared with the native run
  if VMCUDA_SOCKET=$sock timeout 120 "$REPO/tests/cuda/bin/vector_add" > "/tmp/va.out" 2> /tmp/va.err &&
     diff -q "$REPO/tests/cuda/expected/vector_add.out" /tmp/va.out > /dev/null; then
    ok "$1: vector_add identical to the native run"
  else bad "$1: vector_add: $(tail -n 3 /tmp/va.err) $(head -n 3 /tmp/va.out)"; fi
}
say "programs"
run_va "served by the unit"
ref=$(VMCUDA_SOCKET=$sock timeout 300 "$PROBE" steps /tmp/ref.state $rounds 1 2>&1)
grep -q '^STEPS-OK' <<< "$ref" && ok "uninterrupted run: $ref" || { bad "the reference run failed: $ref"; finish; }

# ---- 3. systemctl restart midway
say "systemctl restart midway through a program"
VMCUDA_SOCKET=$sock timeout 300 "$PROBE" steps /tmp/restart.state $rounds 1 > /tmp/restart.out 2> /tmp/restart.err &
prog=$!
at_round /tmp/restart.state 5 || bad "the program never got to round 5: $(cat /tmp/restart.err)"
old=$(main_pid)
systemctl restart "$unit" || bad "systemctl restart $unit failed"
new_stub "$old" && ok "restarted: stub $old -> $(main_pid)" || bad "no new stub after systemctl restart"
rc=0; wait $prog || rc=$?
if [ $rc = 0 ] && [ "$(cat /tmp/restart.out)" = "$ref" ]; then
  ok "the program running across systemctl restart ended with the uninterrupted run's result"
else bad "across systemctl restart: rc $rc, $(cat /tmp/restart.out) $(tail -n 3 /tmp/restart.err)"; fi
took_over "the new stub"
[ "$(stat -c %i "$sock")" = "$sock_ino" ] && ok "the same listening socket (from the fd store)" ||
  bad "the socket was made again (not kept in the fd store)"
run_va "after systemctl restart"

# ---- 4. kill -9 midway
say "kill -9 of the stub midway through a program"
VMCUDA_SOCKET=$sock timeout 300 "$PROBE" steps /tmp/crash.state $rounds 1 > /tmp/crash.out 2> /tmp/crash.err &
prog=$!
at_round /tmp/crash.state 5 || bad "the program never got to round 5: $(cat /tmp/crash.err)"
old=$(main_pid)
restarts=$(systemctl show -P NRestarts "$unit")
kill -9 "$old"
t=$(date +%s)
new_stub "$old" && ok "systemd restarted the killed stub: $old -> $(main_pid), NRestarts $restarts -> $(systemctl show -P NRestarts "$unit")" ||
  bad "no new stub after kill -9: $(systemctl status --no-pager "$unit" | head -n 5)"
rc=0; wait $prog || rc=$?
took=$(( $(date +%s) - t ))
if [ $rc != 0 ] && grep -q 'GPU state is gone' /tmp/crash.err && ! grep -q '^STEPS-OK' /tmp/crash.out; then
  ok "the program running when the stub was killed failed ${took} s later saying its GPU state is gone"
  [ "$took" -le 30 ] || bad "it took $took s (want a few seconds)"
else bad "the program running during the crash: rc $rc: $(tail -n 3 /tmp/crash.err) $(cat /tmp/crash.out)"; fi
took_over "the restarted stub"
[ "$(stat -c %i "$sock")" = "$sock_ino" ] && ok "the same listening socket after the crash" ||
  bad "the socket was made again after the crash (not kept in the fd store)"
run_va "after kill -9"

systemctl stop "$unit" && ok "systemctl stop" || bad "systemctl stop $unit"
say "done"
finish
