#!/usr/bin/env bash
# install-headers.sh [KVER]
#
# Makes sure the Debian kernel headers the guest module builds against are installed:
# linux-headers-KVER (exact match with the guest kernel; its package pulls in
# linux-headers-*-common and linux-kbuild-*). KVER defaults to the version
# scripts/guest/fetch-kernel.sh picks: VMCUDA_GUEST_KVER, else
# `apt-cache depends linux-image-amd64` (never the host's `uname -r`).
#
# Exit: 0 when /lib/modules/KVER/build is there (already, or after installing);
# 77 when it is missing and cannot be installed (not root and no sudo, or apt
# failed: offline); 2 on bad usage. Called by build-guest-module.sh (and so by the
# driver VM test) and fit for scripts/install-deps.sh.
set -euo pipefail
log() { echo "install-headers: $*" >&2; }

[ $# -le 1 ] || { echo "usage: $0 [KVER]" >&2; exit 2; }
KVER=${1:-${VMCUDA_GUEST_KVER:-}}
if [ -z "$KVER" ]; then
    KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *|\{0,1\}Depends: <\{0,1\}linux-image-\([0-9][^ >]*\)>\{0,1\}$/\1/p' | head -n1 || true)
fi
if [ -z "$KVER" ]; then
    REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    KVER=$(cat "${VMCUDA_GUEST_CACHE:-$REPO/.guest/cache}/kernel-version" 2>/dev/null || true)
fi
[ -n "$KVER" ] || { log "cannot tell the guest kernel version (apt-cache knows no linux-image-amd64; run apt-get update)"; exit 77; }

if [ -e "/lib/modules/$KVER/build/Makefile" ]; then
    exit 0
fi
PKG=linux-headers-$KVER
SUDO=
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        log "$PKG is not installed and we are not root: apt-get install $PKG"
        exit 77
    fi
fi
log "installing $PKG"
if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$PKG" >&2; then
    log "apt-get install $PKG failed; trying after apt-get update"
    $SUDO apt-get update -qq >&2 || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$PKG" >&2 ||
        { log "cannot install $PKG (offline, or the archive moved on to a newer kernel)"; exit 77; }
fi
[ -e "/lib/modules/$KVER/build/Makefile" ] || { log "$PKG installed but /lib/modules/$KVER/build is missing"; exit 77; }
log "$PKG installed"
