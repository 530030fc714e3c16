# Shared by the guest tests (sourced): how they report and what they need to run.
# The caller sets T0 (start time) and fail=0 first.
skip() { echo "SKIP: $*"; exit 77; }
bad() { echo "FAIL: $*"; fail=1; }
say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
# QEMU ($VMCUDA_QEMU or qemu-system-x86_64) and a static busybox (the guest image's userland),
# else skip (exit 77) saying what to install.
need_qemu() {
    command -v "${VMCUDA_QEMU:-qemu-system-x86_64}" >/dev/null ||
        skip "${VMCUDA_QEMU:-qemu-system-x86_64} not installed (apt-get install qemu-system-x86; see scripts/guest/packages.txt)"
}
need_static_busybox() {
    local deps
    deps=$(LC_ALL=C ldd /bin/busybox 2>&1 || true)
    { [ -x /bin/busybox ] && ! grep -q '=>' <<< "$deps"; } || skip "no static busybox (apt-get install busybox-static)"
}
