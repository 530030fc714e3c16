#!/bin/sh
# /test.sh of the vmcuda CUDA guest image (scripts/guest/build-cuda-image.sh): loads
# vmcuda.ko, waits for /dev/vmcuda0, then runs CUDA programs against the host's
# vmcuda-stub through guest-lib (/opt/vmcuda/lib/libcudart.so.13) and prints each
# program's stdout, stderr and exit code between markers that vmcuda-vm-run.sh reads
# back from the serial console:
#
#   @@VMCUDA-READY ivshmem=<sysfs dir> bar2=<bytes> kernel=<version>   module loaded
#   @@VMCUDA-BEGIN <i> <name>                      program i starts
#   @@VMCUDA-OUT <i> <name>   + base64 of its stdout (exact bytes; no \r, no printk mixing)
#   @@VMCUDA-ERR <i> <name>   + base64 of its stderr
#   @@VMCUDA-END <i> <name> rc=<exit code> secs=<wall time>
#
# What runs: /vmcuda-job.sh when it exists (vmcuda-vm-run.sh appends it to the image as
# a second cpio archive; it is sourced here and may call run_program), else every
# program in /opt/vmcuda/bin. The guest's exit code (VMCUDA-GUEST-EXIT) is the first
# non-zero program exit code, 0 when all succeeded, 20-29 when setup failed.
#
# Kernel command line knobs: vmcuda.spin_ns=N sets VMRPC_GUEST_SPIN_NS (how long guest-lib
# spins on a reply before sleeping on its MSI-X vector); vmcuda.log=N sets VMCUDA_LOG.

VMCUDA_BIN=/opt/vmcuda/bin
VMCUDA_LIB=/opt/vmcuda/lib
VMCUDA_RC=0
VMCUDA_N=0

# Only emergencies on the console: kernel messages must not land among the markers.
dmesg -n 1 2>/dev/null

cmdline_value() { # cmdline_value KEY -> value of KEY=value on the kernel command line
    for w in $(cat /proc/cmdline); do
        case $w in "$1="*) echo "${w#*=}"; return 0 ;; esac
    done
    return 1
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

# run_program NAME PROGRAM [ARGS...]: runs PROGRAM (a name in /opt/vmcuda/bin or a path)
# with our libcudart, prints its output between markers, remembers its exit code.
run_program() {
    name=$1
    shift
    prog=$1
    shift
    case $prog in */*) ;; *) prog=$VMCUDA_BIN/$prog ;; esac
    VMCUDA_N=$((VMCUDA_N + 1))
    i=$VMCUDA_N
    echo "@@VMCUDA-BEGIN $i $name"
    t0=$(uptime_s)
    if [ -x "$prog" ]; then
        LD_LIBRARY_PATH=$VMCUDA_LIB "$prog" "$@" > /tmp/run.$i.out 2> /tmp/run.$i.err < /dev/null
        rc=$?
    else
        echo "vmcuda guest: no program $prog in the image (it has: $(ls $VMCUDA_BIN | tr '\n' ' '))" > /tmp/run.$i.err
        : > /tmp/run.$i.out
        rc=127
    fi
    t1=$(uptime_s)
    echo "@@VMCUDA-OUT $i $name"
    base64 < /tmp/run.$i.out
    echo "@@VMCUDA-ERR $i $name"
    base64 < /tmp/run.$i.err
    echo "@@VMCUDA-END $i $name rc=$rc secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
    rm -f /tmp/run.$i.out /tmp/run.$i.err
    [ $rc -ne 0 ] && [ $VMCUDA_RC -eq 0 ] && VMCUDA_RC=$rc
    return $rc
}

# ---- setup ------------------------------------------------------------------------
d=$(find-ivshmem.sh) || { echo "vmcuda guest: no ivshmem device (the VM needs -device ivshmem-doorbell)"; exit 20; }
insmod /lib/modules/vmcuda.ko || { echo "vmcuda guest: insmod vmcuda.ko failed"; dmesg | tail -n 20; exit 21; }
i=0
while [ ! -c /dev/vmcuda0 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
if [ ! -c /dev/vmcuda0 ]; then
    echo "vmcuda guest: no /dev/vmcuda0 after insmod (is vmcuda-stub serving the VM's socket?)"
    dmesg | grep -i vmcuda | tail -n 20
    exit 22
fi
v=$(cmdline_value vmcuda.spin_ns) && export VMRPC_GUEST_SPIN_NS=$v
v=$(cmdline_value vmcuda.log) && export VMCUDA_LOG=$v
echo "@@VMCUDA-READY ivshmem=$d bar2=$(stat -c %s "$d/resource2") kernel=$(uname -r)"

# ---- the job ----------------------------------------------------------------------
if [ -f /vmcuda-job.sh ]; then
    . /vmcuda-job.sh
else
    for p in "$VMCUDA_BIN"/*; do
        [ -x "$p" ] && run_program "$(basename "$p")" "$p"
    done
fi
exit $VMCUDA_RC
