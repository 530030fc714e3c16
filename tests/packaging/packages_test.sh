#!/usr/bin/env bash
# The packages as a user gets them (issue 13, point 2): `make install` into a staging root
# for another prefix, then scripts/build-debs.sh, each package's files and metadata, the
# three installed into a clean root with dpkg (chrootless: the maintainer scripts see
# $DPKG_ROOT and leave this system alone), and a CUDA program run through the installed
# vmcuda-run (host package) and through the installed guest library, against the test stub;
# then removed again.
#   packages_test.sh BUILD_DIR TEST_STUB CUDA_BIN_DIR EXPECTED_DIR
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build="$1" stub="$2" bindir="$3" expected="$4"
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb not found (apt-get install dpkg-dev)"; exit 77; }
# shellcheck source=../support/checks.sh
. "$repo/tests/support/checks.sh"
has() { [ -e "$1" ] && ok "${2:-$1}" || bad "missing: ${2:-$1}"; }

# 1. make install's files for another prefix (cmake --install, as the Makefile runs it).
mi="$work/mi"
if DESTDIR="$mi" cmake --install "$build" --prefix /opt/vmcuda > "$work/install.log" 2>&1; then
  ok "cmake --install --prefix /opt/vmcuda with DESTDIR"
else bad "install failed: $(tail -n 5 "$work/install.log")"; fi
for f in bin/vmcuda-stub bin/vmcudactl bin/vmcuda-run lib/vmcuda-run/libcudart.so.13 lib/vmcuda/libcudart.so.13 \
         lib/vmcuda-run/libcuda.so.1 lib/vmcuda/libcuda.so.1 lib/vmcuda/libcuda.so \
         lib/vmcuda-run/libnvidia-ml.so.1 lib/vmcuda/libnvidia-ml.so.1 lib/vmcuda/libnvidia-ml.so \
         lib/vmcuda/qemu-vmcuda lib/sysusers.d/vmcuda.conf lib/systemd/system/vmcuda-stub@.service \
         etc/libvirt/hooks/qemu.d/vmcuda etc/ld.so.conf.d/vmcuda.conf share/doc/vmcuda/security.md \
         share/doc/vmcuda/examples/example-domain.xml src/vmcuda-0.1.0/dkms.conf src/vmcuda-0.1.0/vmcuda_drv.c; do
  has "$mi/opt/vmcuda/$f" "/opt/vmcuda/$f"
done
grep -q '^ExecStart=/opt/vmcuda/bin/vmcuda-stub ' "$mi/opt/vmcuda/lib/systemd/system/vmcuda-stub@.service" &&
  ok "the unit runs /opt/vmcuda/bin/vmcuda-stub" || bad "the unit's ExecStart is not the installed stub"
grep -qx /opt/vmcuda/lib/vmcuda "$mi/opt/vmcuda/etc/ld.so.conf.d/vmcuda.conf" &&
  ok "ld.so.conf.d names /opt/vmcuda/lib/vmcuda" || bad "ld.so.conf.d/vmcuda.conf: $(cat "$mi/opt/vmcuda/etc/ld.so.conf.d/vmcuda.conf")"
grep -q "/opt/vmcuda/lib/vmcuda/qemu-vmcuda" "$mi/opt/vmcuda/share/doc/vmcuda/examples/example-domain.xml" &&
  ok "the example domain's emulator is the installed wrapper" || bad "example-domain.xml names another emulator"
[ -x "$mi/opt/vmcuda/etc/libvirt/hooks/qemu.d/vmcuda" ] && ok "the libvirt hook is executable" || bad "hook not executable"
version=$("$mi/opt/vmcuda/bin/vmcuda-stub" --version 2>&1)
[ "$version" = "vmcuda-stub 0.1.0" ] && ok "vmcuda-stub --version: $version" || bad "vmcuda-stub --version: $version"
[ "$("$mi/opt/vmcuda/bin/vmcuda-run" --version)" = "vmcuda-run 0.1.0" ] && ok "vmcuda-run --version" || bad "vmcuda-run --version"
"$mi/opt/vmcuda/bin/vmcuda-stub" --help > "$work/help.txt" 2>&1
grep -q -- '--socket-mode.*0660' "$work/help.txt" && grep -q -- '--max-clients.*64' "$work/help.txt" &&
  ok "vmcuda-stub --help shows the defaults" || bad "--help without defaults: $(grep -- '--socket-mode' "$work/help.txt")"

# 2. The packages.
dist="$work/dist"
if "$repo/scripts/build-debs.sh" --build "$build" --out "$dist" > "$work/debs.log" 2>&1; then
  ok "scripts/build-debs.sh: $(ls "$dist" | tr '\n' ' ')"
else bad "build-debs.sh failed: $(tail -n 10 "$work/debs.log")"; echo "$fails check(s) failed"; exit 1; fi
host=$(ls "$dist"/vmcuda-host_*.deb) guest=$(ls "$dist"/vmcuda-guest_*.deb) dkms=$(ls "$dist"/vmcuda-dkms_*.deb)
dpkg-deb --contents "$host" > "$work/host.list"
for f in ./usr/bin/vmcuda-stub ./usr/bin/vmcudactl ./usr/bin/vmcuda-run ./usr/lib/vmcuda-run/libcudart.so.13 \
         ./usr/lib/vmcuda-run/libcuda.so.1 ./usr/lib/vmcuda-run/libnvidia-ml.so.1 \
         ./lib/systemd/system/vmcuda-stub@.service ./usr/lib/sysusers.d/vmcuda.conf ./etc/libvirt/hooks/qemu.d/vmcuda \
         ./usr/lib/vmcuda/qemu-vmcuda ./usr/share/doc/vmcuda/running.md; do
  grep -q " $f\$" "$work/host.list" && ok "vmcuda-host has $f" || bad "vmcuda-host lacks $f"
done
if command -v help2man >/dev/null; then
  for f in ./usr/share/man/man8/vmcuda-stub.8 ./usr/share/man/man8/vmcudactl.8 ./usr/share/man/man1/vmcuda-run.1; do
    grep -q " $f\$" "$work/host.list" && ok "vmcuda-host has $f" || bad "vmcuda-host lacks $f"
  done
fi
if grep -q ' root/root .* ./usr/bin/vmcuda-stub$' "$work/host.list"; then ok "files owned by root"; else bad "file owners: $(grep vmcuda-stub "$work/host.list")"; fi
dpkg-deb --field "$host" Depends | grep -q libc6 && ok "vmcuda-host Depends: $(dpkg-deb --field "$host" Depends)" ||
  bad "vmcuda-host has no Depends on libc6"
# (Listings to files first: grep -q leaving early would break dpkg-deb's pipe under pipefail.)
dpkg-deb --contents "$guest" > "$work/guest.list"
dpkg-deb --contents "$dkms" > "$work/dkms.list"
grep -q ' ./usr/lib/vmcuda/libcudart.so.13$' "$work/guest.list" && grep -q ' ./usr/lib/vmcuda/libcuda.so.1$' "$work/guest.list" &&
  grep -q ' ./usr/lib/vmcuda/libcuda.so -> libcuda.so.1$' "$work/guest.list" && grep -q ' ./etc/ld.so.conf.d/vmcuda.conf$' "$work/guest.list" &&
  grep -q ' ./usr/lib/vmcuda/libnvidia-ml.so.1$' "$work/guest.list" &&
  grep -q ' ./usr/lib/vmcuda/libnvidia-ml.so -> libnvidia-ml.so.1$' "$work/guest.list" &&
  ok "vmcuda-guest: the libraries (libcudart.so.13, libcuda.so.1, libnvidia-ml.so.1, their .so links) and the loader config" || bad "vmcuda-guest contents: $(cat "$work/guest.list")"
[ "$(dpkg-deb --field "$dkms" Architecture)" = all ] && grep -q ' ./usr/src/vmcuda-0.1.0/dkms.conf$' "$work/dkms.list" &&
  ok "vmcuda-dkms: architecture all, /usr/src/vmcuda-0.1.0" || bad "vmcuda-dkms: $(dpkg-deb --info "$dkms" | head)"

# 3. Installed into a clean root (as root: dpkg writes files owned by root there).
if [ "$(id -u)" -ne 0 ]; then
  echo "note: not root: the packages are not installed into a clean root"
else
  root="$work/root"
  mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
  : > "$root/var/lib/dpkg/status"
  if dpkg --root="$root" --force-script-chrootless --force-depends --force-not-root -i "$host" "$guest" "$dkms" \
      > "$work/dpkg.log" 2>&1; then
    ok "dpkg -i into a clean root: $(grep -c '^Setting up' "$work/dpkg.log") package(s) set up"
  else bad "dpkg -i: $(tail -n 10 "$work/dpkg.log")"; fi
  [ "$(dpkg --root="$root" -l 'vmcuda-*' 2>/dev/null | grep -c '^ii')" = 3 ] && ok "dpkg -l: three packages installed" ||
    bad "dpkg -l: $(dpkg --root="$root" -l 'vmcuda-*' 2>&1 | tail -n 3)"

  # A CUDA program through the installed vmcuda-run (it starts the stub given, finds the
  # host package's libcudart.so.13 next to itself).
  sockdir="$work/run"; mkdir -m 700 "$sockdir"
  if VMCUDA_SOCKET="$sockdir/local.sock" VMCUDA_STUB="$stub" timeout 120 "$root/usr/bin/vmcuda-run" -- \
       "$bindir/vector_add" > "$work/run.out" 2> "$work/run.err" && diff -q "$expected/vector_add.out" "$work/run.out" >/dev/null; then
    ok "vector_add through the installed vmcuda-run: identical to the native run"
  else bad "vector_add through the installed vmcuda-run: $(tail -n 5 "$work/run.err")"; fi
  # Through the guest package's library, as the loader config in the root names it.
  libdir="$root$(grep '^/' "$root/etc/ld.so.conf.d/vmcuda.conf")"
  "$stub" --socket "$sockdir/guest.sock" --control-socket none 2> "$work/stub.log" &
  pids+=($!)
  wait_socket "$sockdir/guest.sock"
  if VMCUDA_SOCKET="$sockdir/guest.sock" LD_LIBRARY_PATH="$libdir" timeout 120 "$bindir/vector_add" > "$work/guest.out" 2> "$work/guest.err" &&
     diff -q "$expected/vector_add.out" "$work/guest.out" >/dev/null; then
    ok "vector_add with the guest package's libcudart.so.13 ($libdir): identical to the native run"
  else bad "vector_add with the guest library: $(tail -n 5 "$work/guest.err")"; fi
  if dpkg --root="$root" --force-script-chrootless --force-not-root -r vmcuda-host vmcuda-guest vmcuda-dkms > "$work/rm.log" 2>&1 &&
     [ ! -e "$root/usr/bin/vmcuda-stub" ] && [ ! -e "$root/usr/lib/vmcuda/libcudart.so.13" ]; then
    ok "dpkg -r removes them"
  else bad "dpkg -r: $(tail -n 5 "$work/rm.log")"; fi
fi

finish "all packaging checks passed"
