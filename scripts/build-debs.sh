#!/usr/bin/env bash
# Builds vmcuda's Debian packages from a build tree (cmake/install.cmake's components):
#   vmcuda-host    the GPU host: vmcuda-stub, vmcudactl, vmcuda-run, the systemd unit and its
#                  system user, the libvirt hook (qemu.d), the QEMU wrapper, docs, man pages
#   vmcuda-guest   inside a VM: libcudart.so.13, libcuda.so.1 and libnvidia-ml.so.1 found by the loader (ld.so.conf.d)
#   vmcuda-dkms    inside a VM: the guest driver (vmcuda.ko) built by DKMS for each kernel
#
#   scripts/build-debs.sh [--build DIR] [--out DIR]
# DIR defaults: build (configured and built first if needed), dist. Needs dpkg-deb.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-debs: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v dpkg-deb >/dev/null || { echo "build-debs: dpkg-deb is missing (apt-get install dpkg-dev)" >&2; exit 2; }

echo "build-debs: [1/4] building in $build"
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" --target vmcuda-stub vmcudactl vmcuda_cudart >/dev/null
# (The target list read whole first: grep -q leaving early would fail the pipe under pipefail.)
targets=$(cmake --build "$build" --target help 2>/dev/null || true)
if grep -q '\.\.\. man$' <<< "$targets"; then cmake --build "$build" --target man >/dev/null; fi

version=$(sed -n 's/^set(VMCUDA_VERSION "\(.*\)")/\1/p' CMakeLists.txt)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

# The shared libraries a staged tree's ELF files need, as Debian package names (dpkg -S),
# for Depends:. Without dpkg-shlibdeps' database this asks dpkg which package owns each.
depends_of() {
  local root="$1" f lib path pkgs=()
  while IFS= read -r f; do
    while IFS= read -r lib; do
      # This architecture's copy (ldconfig also lists 32-bit ones), as dpkg registered it:
      # the path itself, or where its links lead (merged /usr: /lib is /usr/lib).
      path=$(ldconfig -p | awk -v l="$lib" '!f && $1 == l && /x86-64|aarch64|64bit/ {print $NF; f = 1}')
      [ -n "$path" ] || path=$(ldconfig -p | awk -v l="$lib" '!f && $1 == l {print $NF; f = 1}')
      [ -n "$path" ] || continue
      local owner=""
      for p in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
        owner=$(dpkg -S "$p" 2>/dev/null | head -n1 | cut -d: -f1) && [ -n "$owner" ] && break
      done
      pkgs+=("$owner")  # (awk above reads to the end: no early exit into a closed pipe under pipefail)
    done < <(objdump -p "$f" 2>/dev/null | awk '$1 == "NEEDED" {print $2}')
  done < <(find "$root" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
  printf '%s\n' "${pkgs[@]}" | grep -v '^$' | sort -u | paste -sd, - | sed 's/,/, /g'
}

# As dh_strip does: the ELF files' debugging information out of the packages (xz takes
# minutes over unstripped binaries); their dynamic symbols stay.
strip_elf() {
  local f
  while IFS= read -r f; do strip --strip-unneeded "$f"; done \
    < <(find "$1" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
}

control() {  # NAME ROOT DESCRIPTION EXTRA-FIELDS... (PKG_ARCH: the architecture, default the build's)
  local name="$1" root="$2" desc="$3"; shift 3
  mkdir -p "$root/DEBIAN"
  local size; size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: ${PKG_ARCH:-$arch}"
    echo "Maintainer: vmcuda developers <vmcuda@localhost>"
    echo "Installed-Size: $size"
    echo "Section: misc"
    echo "Priority: optional"
    for f in "$@"; do [ -n "$f" ] && echo "$f"; done
    echo "Description: $desc"
  } > "$root/DEBIAN/control"
}

echo "build-debs: [2/4] vmcuda-host"
host="$stage/vmcuda-host"
DESTDIR="$host" cmake --install "$build" --component host --prefix /usr >/dev/null
strip_elf "$host"
control vmcuda-host "$host" "paravirtual CUDA for KVM guests: the GPU host's side
 vmcuda-stub serves CUDA to virtual machines over QEMU's ivshmem device (one
 systemd instance per VM, vmcuda-stub@VM), vmcudactl suspends, resumes, saves and
 restores their GPU state, vmcuda-run runs CUDA programs on this host through it." \
  "Depends: $(depends_of "$host")" "Recommends: libvirt-daemon-system, qemu-system-x86" \
  "Suggests: vmcuda-guest"
cat > "$host/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
# The stub's system user (sysusers.d/vmcuda.conf); the unit's files. Not inside a
# chrootless install into another root ($DPKG_ROOT): nothing of this system to change.
if [ "$1" = configure ] && [ -z "${DPKG_ROOT:-}" ]; then
  if command -v systemd-sysusers >/dev/null 2>&1; then systemd-sysusers vmcuda.conf || true; fi
  if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
fi
exit 0
EOF
cat > "$host/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
EOF
chmod 755 "$host/DEBIAN/postinst" "$host/DEBIAN/postrm"
(cd "$host" && find etc -type f 2>/dev/null | sed 's|^|/|') > "$host/DEBIAN/conffiles"
[ -s "$host/DEBIAN/conffiles" ] || rm -f "$host/DEBIAN/conffiles"

echo "build-debs: [3/4] vmcuda-guest, vmcuda-dkms"
guest="$stage/vmcuda-guest"
DESTDIR="$guest" cmake --install "$build" --component guest --prefix /usr >/dev/null
strip_elf "$guest"
control vmcuda-guest "$guest" "paravirtual CUDA for KVM guests: the guest's CUDA runtime
 vmcuda's libcudart.so.13, libcuda.so.1 (driver API) and libnvidia-ml.so.1 (NVML basics): unmodified CUDA programs (built with nvcc -cudart shared)
 in this virtual machine run on the host's GPU through vmcuda's device (vmcuda-dkms)." \
  "Depends: $(depends_of "$guest")" "Recommends: vmcuda-dkms"
printf '#!/bin/sh\nset -e\nif [ "$1" = configure ] && [ -z "${DPKG_ROOT:-}" ]; then ldconfig; fi\nexit 0\n' \
  > "$guest/DEBIAN/postinst"
printf '#!/bin/sh\nset -e\nif [ "$1" = remove ] && [ -z "${DPKG_ROOT:-}" ]; then ldconfig; fi\nexit 0\n' \
  > "$guest/DEBIAN/postrm"
chmod 755 "$guest/DEBIAN/postinst" "$guest/DEBIAN/postrm"
echo /etc/ld.so.conf.d/vmcuda.conf > "$guest/DEBIAN/conffiles"

dkms="$stage/vmcuda-dkms"
DESTDIR="$dkms" cmake --install "$build" --component dkms --prefix /usr >/dev/null
PKG_ARCH=all control vmcuda-dkms "$dkms" "paravirtual CUDA for KVM guests: the guest driver (DKMS)
 vmcuda.ko drives QEMU's ivshmem-doorbell device that vmcuda-stub serves, built by DKMS
 for every installed kernel (its headers are needed)." "Depends: dkms"
cat > "$dkms/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ] && [ -z "\${DPKG_ROOT:-}" ]; then
  dkms add -m vmcuda -v $version 2>/dev/null || true
  dkms install -m vmcuda -v $version || echo "vmcuda-dkms: the module did not build for \$(uname -r): install that kernel's headers, then: dkms install vmcuda/$version" >&2
fi
exit 0
EOF
cat > "$dkms/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
if [ -z "\${DPKG_ROOT:-}" ]; then dkms remove -m vmcuda -v $version --all 2>/dev/null || true; fi
exit 0
EOF
chmod 755 "$dkms/DEBIAN/postinst" "$dkms/DEBIAN/prerm"

echo "build-debs: [4/4] dpkg-deb"
for p in vmcuda-host vmcuda-guest vmcuda-dkms; do
  a=$(sed -n 's/^Architecture: //p' "$stage/$p/DEBIAN/control")
  dpkg-deb --root-owner-group -Zxz --build "$stage/$p" "$out/${p}_${version}_${a}.deb" >/dev/null
  echo "  $out/${p}_${version}_${a}.deb ($(du -h "$out/${p}_${version}_${a}.deb" | cut -f1))"
done
