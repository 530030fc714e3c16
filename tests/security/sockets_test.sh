#!/usr/bin/env bash
# Adversarial checks of the local sockets (issue 10, finding 5; issue 13's second stub), as
# a hostile local user would try them, against the real programs:
#   - vmcuda-stub makes its socket with the mode and group asked for, under any umask;
#   - a second stub on a live socket is refused (naming the first's pid), and the first
#     keeps serving;
#   - vmcuda-run never falls back to a directory other users can write, and refuses a
#     socket that belongs to another user, or one in a directory others can write.
#   sockets_test.sh STUB VMCUDA_RUN
# STUB: vmcuda-test-stub (CI) or vmcuda-stub; same options.
set -uo pipefail
stub="$1" run="$2"
# shellcheck source=../support/checks.sh
. "$(dirname "$0")/../support/checks.sh"

# 1. The mode comes from --socket-mode (default 0660), never from the umask.
sock="$work/vm1.sock"
(umask 000; exec "$stub" --socket "$sock" --control-socket none) 2>"$work/stub1.log" &
pids+=($!)
first=$!
if wait_socket "$sock"; then
  got=$(stat -c '%a' "$sock")
  if [ "$got" = 660 ]; then ok "default socket mode 0660 under umask 000"; else bad "socket mode $got under umask 000"; fi
else bad "the stub did not start: $(cat "$work/stub1.log")"; fi

# 2. A second stub on the live socket: refused, names the first, leaves its socket.
"$stub" --socket "$sock" --control-socket none 2>"$work/stub2.log"
rc=$?
if [ "$rc" -ne 0 ] && grep -q "another vmcuda-stub serves $sock (pid $first)" "$work/stub2.log"; then
  ok "a second stub on a live socket is refused: $(grep -o 'another vmcuda-stub serves.*' "$work/stub2.log" | head -n1)"
else bad "second stub: rc $rc: $(cat "$work/stub2.log")"; fi
if kill -0 "$first" 2>/dev/null && [ -S "$sock" ] &&
   python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$sock" 2>/dev/null; then
  ok "the first stub still serves its socket"
else bad "the first stub's socket is gone or dead"; fi

# 3. --socket-mode and --socket-group are applied; a bad mode is refused.
sock2="$work/vm2.sock"
group=$(id -gn)
(umask 077; exec "$stub" --socket "$sock2" --socket-mode 0640 --socket-group "$group" --control-socket none) \
  2>"$work/stub3.log" &
pids+=($!)
if wait_socket "$sock2" && [ "$(stat -c '%a %G' "$sock2")" = "640 $group" ]; then
  ok "--socket-mode 0640 --socket-group $group under umask 077"
else bad "socket is '$(stat -c '%a %G' "$sock2" 2>&1)': $(cat "$work/stub3.log")"; fi
if "$stub" --socket "$work/vm3.sock" --socket-mode 0999 --control-socket none 2>"$work/stub4.log"; then
  bad "--socket-mode 0999 accepted"
elif grep -q "not an octal mode" "$work/stub4.log"; then ok "--socket-mode 0999 refused: $(cat "$work/stub4.log")"
else bad "--socket-mode 0999: $(cat "$work/stub4.log")"; fi
if "$stub" --socket "$work/vm3.sock" --socket-group no-such-group-vmcuda --control-socket none 2>"$work/stub5.log"; then
  bad "an unknown --socket-group accepted"
elif grep -q "group 'no-such-group-vmcuda'" "$work/stub5.log"; then ok "unknown --socket-group refused"
else bad "unknown group: $(cat "$work/stub5.log")"; fi

# 4. vmcuda-run: a directory other users can write (not sticky) is refused.
mkdir -m 0777 "$work/open"
chmod 0777 "$work/open"
refused "vmcuda-run refuses a socket directory others can write" "writable by other users" \
  env VMCUDA_SOCKET="$work/open/vmcuda/local.sock" VMCUDA_STUB="$stub" "$run" -- true
[ ! -e "$work/open/vmcuda" ] || bad "vmcuda-run created $work/open/vmcuda anyway"

# 5. vmcuda-run: a socket that belongs to another user is refused (root only: chown).
if [ "$(id -u)" -eq 0 ]; then
  mkdir -m 0700 "$work/priv"
  python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); time.sleep(120)' \
    "$work/priv/local.sock" &
  pids+=($!)
  wait_socket "$work/priv/local.sock"
  chown 65534 "$work/priv/local.sock"
  refused "vmcuda-run refuses a socket of another user's" "belongs to uid 65534" \
    env VMCUDA_SOCKET="$work/priv/local.sock" VMCUDA_STUB="$stub" "$run" -- true

  # 6. A user without XDG_RUNTIME_DIR (and no /run/user/UID): refused, nothing in /tmp.
  if command -v setpriv >/dev/null 2>&1 && [ ! -d /run/user/65534 ]; then
    chmod 0755 "$work"
    out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups \
            env -u XDG_RUNTIME_DIR -u VMCUDA_SOCKET HOME=/nonexistent VMCUDA_STUB="$stub" "$run" -- true 2>&1)
    rc=$?
    if [ "$rc" -eq 2 ] && printf '%s' "$out" | grep -q "XDG_RUNTIME_DIR is not set"; then
      ok "vmcuda-run without a private runtime directory refuses (no /tmp fallback)"
    else bad "vmcuda-run as uid 65534 without XDG_RUNTIME_DIR: rc $rc: $out"; fi
    [ ! -e /tmp/vmcuda/local.sock ] || bad "/tmp/vmcuda/local.sock exists"
  else
    echo "note: setpriv missing or /run/user/65534 exists: the no-XDG_RUNTIME_DIR case is not tried"
  fi
else
  echo "note: not root: another user's socket and a user without XDG_RUNTIME_DIR are not tried"
fi

# 7. Bad environment values are refused, not read as something else.
VMRPC_SLOTS=sixteen "$stub" --socket "$work/vm4.sock" --control-socket none 2>"$work/stub6.log" &
pids+=($!)
if wait_socket "$work/vm4.sock" && grep -q "ignoring VMRPC_SLOTS=sixteen" "$work/stub6.log"; then
  ok "VMRPC_SLOTS=sixteen: $(grep -o 'ignoring VMRPC_SLOTS=sixteen[^.]*' "$work/stub6.log" | head -n1)"
else bad "VMRPC_SLOTS=sixteen: $(cat "$work/stub6.log")"; fi

# 8. The VM's quota as vmcudactl shows it (vmcudactl sits beside vmcuda-run).
ctl="$(dirname "$run")/vmcudactl"
mkdir -m 700 "$work/q"
"$stub" --socket "$work/q/vmq.sock" --memory-quota-mib 64 2>"$work/stub7.log" &
pids+=($!)
if wait_socket "$work/q/vmq.ctl" &&
   quota=$(VMCUDA_RUN_DIR="$work/q" "$ctl" status vmq --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["memory_quota_bytes"], s["memory_charged_bytes"])') &&
   [ "$quota" = "67108864 0" ]; then
  ok "vmcudactl status shows the VM's quota and what is charged to it ($quota)"
else bad "vmcudactl status: '${quota:-}': $(cat "$work/stub7.log")"; fi

finish "all socket checks passed"
