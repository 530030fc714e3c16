# Sourced by the shell tests that check many things in one run: a work directory and the
# background processes started into `pids`, both gone at exit; ok/bad lines and a count of
# failures; wait_socket; refused (a command that must fail saying something).
work="$(mktemp -d)"
pids=()
cleanup() {
  local p
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Until the socket $1 exists (at most 10 s).
wait_socket() { local _; for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; return 1; }
# refused WHAT TEXT CMD...: CMD must exit non-zero with TEXT in its output.
refused() {
  local what="$1" text="$2" out rc; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q -- "$text"; then ok "$what"
  else bad "$what: rc $rc: $out"; fi
}
# The verdict line and exit status.
finish() {
  if [ "$fails" -gt 0 ]; then echo "$fails check(s) failed"; exit 1; fi
  echo "$1"
}
