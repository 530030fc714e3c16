#!/usr/bin/env bash
# Installs the Debian 12 packages vmcuda needs to build and test (idempotent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pkgs=(build-essential cmake pkg-config googletest libgtest-dev libbenchmark-dev liburing-dev libxxhash-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libsystemd-dev libssl-dev
      clang libclang-rt-14-dev llvm-14 python3)
# Guest boot tooling (QEMU, busybox, the Debian kernel) lists its own.
[ -f "$here/guest/packages.txt" ] && mapfile -t -O "${#pkgs[@]}" pkgs < <(grep -v '^\s*#' "$here/guest/packages.txt" | grep .)
# libvirt: vmcudactl domain-save / domain-snapshot use its C API (libvirt-dev); the test
# guest_cuda_libvirt runs a real libvirtd (it starts libvirtd and virtlogd itself where no
# systemd does) with QEMU, and a qcow2 disk (qemu-img) for internal snapshots.
pkgs+=(libvirt-dev libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils cpio)
# Packages (scripts/build-debs.sh): man pages from --help, dpkg-deb and objdump.
pkgs+=(help2man dpkg-dev binutils)
# The unit under a real systemd (tests/systemd): a TCG guest boots this machine's own
# systemd as PID 1; systemd-analyze security asks it over the system bus (dbus).
pkgs+=(systemd dbus)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#pkgs[@]} packages present"
fi
# Headers of the guest kernel, for building the ivshmem driver (the driver's VM test skips without them).
"$here/../ivshmem-driver/install-headers.sh" || echo "install-deps: no guest kernel headers; the driver VM test will skip"
