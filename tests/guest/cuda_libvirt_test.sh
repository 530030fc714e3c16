#!/usr/bin/env bash
# CTest guest_cuda_libvirt: vmcuda under a real libvirtd (libvirt 9.0, QEMU 7.2, TCG), set up
# the way docs/attaching-a-vm.md tells a user: a domain made from qemu-config/example-domain.xml
# (the emulator wrapper qemu-config/qemu-vmcuda for master=on), the stub on
# /run/vmcuda/NAME.sock, and CUDA programs in the guest against vmcuda-test-stub (the test
# executor standing in for the GPU). Root only; it starts virtlogd and libvirtd when none runs
# (and stops them again), and leaves a running libvirtd running.
#
#  1. the domain runs the device with master=on (QEMU's /proc/PID/cmdline), untainted (its
#     libvirt log has no "Domain id=... is tainted" line); CUDA programs in the guest print
#     their native output (vector_add, symbols_pitch, device_query), cuda_kill_probe sees the
#     slots;
#  2. `vmcudactl domain-save` midway through two CUDA programs (cuda_kill_probe steps: device
#     memory read back, checked and changed every round, a stream and an event across rounds):
#     first into a file libvirt cannot write (the GPU state comes back, the VM runs on), then
#     for real; the stub is stopped and a NEW stub process started with the same --state-dir; a
#     plain `virsh restore`: both programs end with the result of an uninterrupted run; new
#     programs (vector_add, symbols_pitch) print their native output;
#  3. `vmcudactl domain-snapshot` (internal snapshot, qcow2 disk) midway: the programs go on
#     and end with the uninterrupted result; `virsh snapshot-revert`: they continue from the
#     snapshot point and end with that result once more;
#  4. live `virsh detach-device` / `attach-device` of the <shmem> device
#     (qemu-config/vmcuda-shmem.xml): /dev/vmcuda0 goes and comes back, a program runs;
#  5. a plain `virsh save` / `virsh restore` midway (no vmcudactl; also shows the hot-plugged
#     device runs with master=on): the program's next CUDA call fails saying its GPU state is
#     gone, never a wrong result; new programs still run.
#
#   cuda_libvirt_test.sh BUILD_DIR PROBE STUB VMCUDACTL
#
# Exit 77 (skip) when not root, or libvirt (libvirtd/virtlogd or virsh), QEMU, qemu-img,
# busybox-static, cpio or python3 is missing, vmcudactl was built without libvirt, or the guest
# image cannot be built here. Env: VMCUDA_LIBVIRT_TEST_KEEP=1 keeps the work directory;
# VMCUDA_LIBVIRT_TEST_LOOP=1 also runs symbols_pitch in a loop beside the programs (see LOOP).
set -uo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BUILD_DIR PROBE STUB VMCUDACTL" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) PROBE=$2 STUB=$3 CTL=$4
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T0=$(date +%s)
skip() { echo "SKIP: $*"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }
say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

# ---- what it needs ---------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (it runs libvirt's system instance, qemu:///system)"
command -v virsh >/dev/null || skip "virsh not installed (apt-get install libvirt-clients)"
QEMU_BIN=/usr/bin/qemu-system-x86_64
[ -x "$QEMU_BIN" ] || skip "$QEMU_BIN not installed (apt-get install qemu-system-x86)"
command -v qemu-img >/dev/null || skip "qemu-img not installed (apt-get install qemu-utils)"
bbdeps=$(LC_ALL=C ldd /bin/busybox 2>&1 || true)
{ [ -x /bin/busybox ] && ! grep -q '=>' <<< "$bbdeps"; } || skip "no static busybox (apt-get install busybox-static)"
command -v python3 >/dev/null || skip "python3 not installed"
command -v cpio >/dev/null || skip "cpio not installed (apt-get install cpio)"
for f in "$STUB" "$PROBE" "$CTL"; do [ -x "$f" ] || { echo "FAIL: no $f"; exit 1; }; done
if "$CTL" domain-save no-such-domain /nonexistent/x 2>&1 | grep -q 'built without libvirt'; then
    skip "vmcudactl was built without libvirt (apt-get install libvirt-dev, then configure and build again)"
fi
V() { timeout 120 virsh -q -c qemu:///system "$@"; }  # every virsh call has a time limit

# ---- work dir, clean-up -------------------------------------------------------------------------
# Under /var/tmp: QEMU runs as libvirt-qemu and must reach the kernel, disk and console files
# (a build tree under /root would not do).
WORK=$(mktemp -d /var/tmp/vmcuda-libvirt-test.XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
chmod 755 "$WORK"
DOM=vmcuda-ci-$$
SOCK=/run/vmcuda/$DOM.sock
CON=$WORK/console.log
CMD_SOCK=$WORK/cmd.sock
STARTED_LIBVIRTD='' STARTED_VIRTLOGD='' STUB_PID='' DEFINED=0
stop_pidfile() { # PIDFILE NAME: stops a daemon we started, waiting for it to go
    local pid i
    pid=$(cat "$1" 2>/dev/null) || return 0
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    echo "warning: $2 (pid $pid) did not stop within 10 s; killing it"
    kill -KILL "$pid" 2>/dev/null
}
cleanup() {
    if [ "$DEFINED" = 1 ]; then
        V destroy "$DOM" > /dev/null 2>&1
        V undefine "$DOM" --snapshots-metadata --managed-save > /dev/null 2>&1 ||
            echo "warning: could not undefine $DOM"
    fi
    [ -n "$STUB_PID" ] && kill -TERM "$STUB_PID" 2>/dev/null && wait "$STUB_PID" 2>/dev/null
    rm -f "$SOCK" "/run/vmcuda/$DOM.ctl"
    [ -n "$STARTED_LIBVIRTD" ] && stop_pidfile /run/libvirtd.pid libvirtd
    [ -n "$STARTED_VIRTLOGD" ] && stop_pidfile /run/virtlogd.pid virtlogd
    rm -f "/var/log/libvirt/qemu/$DOM.log"*
    if [ "$fail" = 0 ] && [ "${VMCUDA_LIBVIRT_TEST_KEEP:-0}" != 1 ]; then
        rm -rf "$WORK"
    else
        rm -f "$WORK"/*.save "$WORK"/disk.qcow2 "$WORK"/vmlinux "$WORK"/initrd.cpio.gz
        echo "(logs, console and stub logs kept in $WORK)"
    fi
}
trap cleanup EXIT
trap 'bad "interrupted"; exit 1' INT TERM

# ---- libvirt: the running one, or virtlogd + libvirtd of our own -----------------------------
if V uri > /dev/null 2>&1; then
    say "using the running libvirt ($(V version 2>/dev/null | grep -i 'running hypervisor' | head -n 1))"
else
    [ -x /usr/sbin/libvirtd ] || skip "no libvirtd runs and /usr/sbin/libvirtd is not installed (apt-get install libvirt-daemon-system)"
    [ -x /usr/sbin/virtlogd ] || skip "/usr/sbin/virtlogd is not installed (apt-get install libvirt-daemon-system)"
    if ! pgrep -x virtlogd > /dev/null; then
        /usr/sbin/virtlogd -d < /dev/null > "$WORK/virtlogd.out" 2>&1 || { bad "virtlogd -d failed: $(cat "$WORK/virtlogd.out")"; exit 1; }
        STARTED_VIRTLOGD=1
    fi
    /usr/sbin/libvirtd -d < /dev/null > "$WORK/libvirtd.out" 2>&1 || { bad "libvirtd -d failed: $(cat "$WORK/libvirtd.out")"; exit 1; }
    STARTED_LIBVIRTD=1
    for _ in $(seq 150); do V uri > /dev/null 2>&1 && break; sleep 0.2; done
    V uri > /dev/null 2>&1 || { bad "libvirtd does not answer at qemu:///system"; exit 1; }
    say "started virtlogd${STARTED_VIRTLOGD:+ (ours)} and libvirtd (pid $(cat /run/libvirtd.pid 2>/dev/null)); they are stopped at the end"
fi

# ---- the guest image: the one scripts/vmcuda-vm-run.sh builds for these programs -------------
ALL=()
for p in "$REPO"/tests/cuda/bin/*; do [ -f "$p" ] && [ -x "$p" ] && [ "$(basename "$p")" != cuda_kill_probe ] && ALL+=("$p"); done
ALL+=("$PROBE")
IMAGE=$BUILD/guest/cuda-image-$(basename "$PROBE" | sha256sum | cut -c1-8).cpio.gz
mkdir -p "$BUILD/guest"
say "guest image (build or reuse): $IMAGE"
rc=0
"$REPO/scripts/guest/build-cuda-image.sh" "$IMAGE" "$BUILD" "${ALL[@]}" > "$WORK/image.log" 2>&1 || rc=$?
[ $rc = 77 ] && skip "the guest image cannot be built here: $(tail -n 3 "$WORK/image.log")"
[ $rc = 0 ] || { bad "building the guest image failed:"; tail -n 20 "$WORK/image.log"; exit 1; }
KERNEL=$BUILD/guest/kernel/vmlinux
if [ ! -f "$KERNEL" ]; then
    "$REPO/scripts/guest/fetch-kernel.sh" "$BUILD/guest/kernel" > "$WORK/kernel.log" 2>&1 ||
        { bad "fetching the guest kernel failed:"; tail -n 20 "$WORK/kernel.log"; exit 1; }
fi
cp "$KERNEL" "$WORK/vmlinux"

# The guest's job (sourced by the image's /test.sh once vmcuda.ko is loaded): a command loop
# on the second serial port (ttyS1, a UNIX socket on the host); results on the console.
cat > "$WORK/vmcuda-job.sh" <<'EOF'
prog() { # TAG NAME [ARGS]: "@@PROG TAG NAME rc=RC md5=MD5 of its stdout"; its output when it failed
    tag=$1 name=$2
    shift 2
    LD_LIBRARY_PATH=$VMCUDA_LIB $VMCUDA_BIN/$name "$@" > /tmp/p.out 2> /tmp/p.err < /dev/null
    rc=$?
    echo "@@PROG $tag $name rc=$rc md5=$(md5sum < /tmp/p.out | cut -d' ' -f1)"
    if [ $rc != 0 ]; then
        head -n 20 /tmp/p.out | sed "s/^/@@PROG-OUT $tag /"
        head -n 20 /tmp/p.err | sed "s/^/@@PROG-ERR $tag /"
    fi
}
at_round() { # TAG N: whether the steps program finished round N
    r=$(sed -n 's/^step round=\([0-9][0-9]*\) .*/\1/p' /tmp/$1.state 2>/dev/null)
    case $r in ''|*[!0-9]*) return 1 ;; esac
    [ "$r" -ge "$2" ]
}
steps() { # TAG ROUNDS LOOP, in the background: two cuda_kill_probe steps clients (TAG.a, TAG.b) and, with
          # LOOP=1, symbols_pitch in a loop beside them; "@@AT TAG" once both finished round 5; at the
          # end each one's result, each loop run's, and "@@STEPS-END TAG"
    tag=$1 rounds=$2 withloop=$3
    (
        loop=''
        if [ "$withloop" = 1 ]; then
            (
                n=0
                while [ ! -f /tmp/$tag.stop ]; do
                    n=$((n + 1))
                    LD_LIBRARY_PATH=$VMCUDA_LIB $VMCUDA_BIN/symbols_pitch > /tmp/$tag.loop.$n.out 2> /tmp/$tag.loop.$n.err
                    echo $? > /tmp/$tag.loop.$n.rc
                done
                echo $n > /tmp/$tag.count
            ) &
            loop=$!
        fi
        for c in a b; do
            LD_LIBRARY_PATH=$VMCUDA_LIB $VMCUDA_BIN/cuda_kill_probe steps /tmp/$tag.$c.state $rounds 1 > /tmp/$tag.$c.out 2> /tmp/$tag.$c.err &
            eval pid_$c=\$!
        done
        i=0
        while ! { at_round $tag.a 5 && at_round $tag.b 5; }; do
            kill -0 $pid_a 2>/dev/null && kill -0 $pid_b 2>/dev/null && [ $i -lt 3000 ] || break
            sleep 0.1; i=$((i + 1))
        done
        echo "@@AT $tag $(cat /tmp/$tag.a.state 2>/dev/null) / $(cat /tmp/$tag.b.state 2>/dev/null)"
        for c in a b; do
            eval wait \$pid_$c
            rc=$?
            echo "@@STEPS $tag.$c rc=$rc after $(cat /tmp/$tag.$c.state 2>/dev/null)"
            sed "s/^/@@STEPS-OUT $tag.$c /" /tmp/$tag.$c.out
            sed "s/^/@@STEPS-ERR $tag.$c /" /tmp/$tag.$c.err
        done
        touch /tmp/$tag.stop
        if [ -n "$loop" ]; then
            wait $loop
            n=$(cat /tmp/$tag.count)
            i=1
            while [ $i -le $n ]; do
                echo "@@LOOP $tag $i rc=$(cat /tmp/$tag.loop.$i.rc) md5=$(md5sum < /tmp/$tag.loop.$i.out | cut -d' ' -f1)"
                if [ "$(cat /tmp/$tag.loop.$i.rc)" != 0 ]; then
                    head -n 5 /tmp/$tag.loop.$i.out | sed "s/^/@@LOOP-OUT $tag $i /"
                    head -n 5 /tmp/$tag.loop.$i.err | sed "s/^/@@LOOP-ERR $tag $i /"
                fi
                i=$((i + 1))
            done
        fi
        echo "@@STEPS-END $tag"
    ) &
}
wait_dev() { # gone|back: until /dev/vmcuda0 is gone or back (30 s)
    i=0
    while [ $i -lt 300 ]; do
        if [ "$1" = gone ]; then [ -e /dev/vmcuda0 ] || break; else [ -c /dev/vmcuda0 ] && break; fi
        sleep 0.1; i=$((i + 1))
    done
    echo "@@DEV $1 $(ls /dev/vmcuda* 2>/dev/null | tr '\n' ' ')end"
}
stty -F /dev/ttyS1 clocal -echo 2>/dev/null
exec 3< /dev/ttyS1
echo "@@CMD-READY"
while read -r line <&3; do
    echo "@@ACK $line"
    eval "$line"
done
echo "@@CMD-EOF"
EOF
(cd "$WORK" && echo vmcuda-job.sh | cpio -o -H newc -R 0:0 --quiet | gzip -1 > job.cpio.gz) ||
    { bad "writing the job archive failed"; exit 1; }
{
    cat "$IMAGE"
    pad=$(( (4 - $(stat -c %s "$IMAGE") % 4) % 4 )); [ $pad -gt 0 ] && head -c $pad /dev/zero
    cat "$WORK/job.cpio.gz"
} > "$WORK/initrd.cpio.gz"
qemu-img create -q -f qcow2 "$WORK/disk.qcow2" 16M || { bad "qemu-img create failed"; exit 1; }
# As docs/attaching-a-vm.md says: the emulator wrapper installed with mode 755.
install -m 755 "$REPO/qemu-config/qemu-vmcuda" "$WORK/qemu-vmcuda"

# ---- the domain: qemu-config/example-domain.xml with what the docs tell a user to change ------
python3 - "$REPO/qemu-config/example-domain.xml" "$DOM" "$WORK" "${VMCUDA_ACCEL:-tcg}" > "$WORK/domain.xml" <<'PY' ||
import sys, xml.etree.ElementTree as E
src, dom, work, accel = sys.argv[1:]
root = E.parse(src).getroot()
def one(path):
    e = root.find(path)
    if e is None: sys.exit("example-domain.xml has no " + path)
    return e
one("name").text = dom
if accel != "kvm":  # no KVM (TCG): domain type qemu, no host-passthrough CPU (the example's comment)
    root.set("type", "qemu")
    root.remove(one("cpu"))
one("memory").set("unit", "MiB"); one("memory").text = "512"  # a small guest: an initramfs, 1 vCPU
one("vcpu").text = "1"
# Direct kernel boot of the project's guest image (what scripts/vmcuda-vm-run.sh boots).
os_ = one("os")
for b in os_.findall("boot"): os_.remove(b)
for tag, text in (("kernel", work + "/vmlinux"), ("initrd", work + "/initrd.cpio.gz"),
                  ("cmdline", "console=ttyS0 quiet panic=-1 cryptomgr.notests")):
    E.SubElement(os_, tag).text = text
devs = one("devices")
one("devices/emulator").text = work + "/qemu-vmcuda"
one("devices/disk/source").set("file", work + "/disk.qcow2")
for i in devs.findall("interface"): devs.remove(i)  # no network needed (the example's comment)
# The serial console to a file (program output), and a second serial port for commands.
for tag in ("serial", "console"):
    e = one("devices/" + tag)
    e.set("type", "file")
    E.SubElement(e, "source", {"path": work + "/console.log", "append": "on"})
    e.insert(0, e[-1]); del e[-1]
cmd = E.Element("serial", {"type": "unix"})
E.SubElement(cmd, "source", {"mode": "bind", "path": work + "/cmd.sock"})
E.SubElement(cmd, "target", {"port": "1"})
devs.insert(list(devs).index(one("devices/console")) + 1, cmd)
sh = one("devices/shmem/server")
sh.set("path", sh.get("path").replace("/vm1.sock", "/" + dom + ".sock"))
E.ElementTree(root).write(sys.stdout, encoding="unicode")
PY
    { bad "making the domain from example-domain.xml failed"; exit 1; }
grep -q "<server path='/run/vmcuda/$DOM.sock'\|<server path=\"/run/vmcuda/$DOM.sock\"" "$WORK/domain.xml" ||
    { bad "example-domain.xml's socket is not /run/vmcuda/vm1.sock: $(grep server "$WORK/domain.xml")"; exit 1; }
sed "s/VMNAME/$DOM/" "$REPO/qemu-config/vmcuda-shmem.xml" > "$WORK/shmem.xml"
SLOTS=$(sed -n "s/.*<msi vectors='\([0-9]*\)'.*/\1/p" "$WORK/shmem.xml")
[ -n "$SLOTS" ] || { bad "no vectors in vmcuda-shmem.xml"; exit 1; }

# ---- helpers ---------------------------------------------------------------------------------------
start_stub() { # NAME STATE_DIR: as docs/attaching-a-vm.md step 1 "by hand"
    local i
    mkdir -p /run/vmcuda
    VMRPC_LOG=2 "$STUB" --socket "$SOCK" --socket-group libvirt-qemu --socket-mode 0660 --slots "$SLOTS" --region-bytes $((256 << 20)) --state-dir "$2" \
        > "$WORK/stub-$1.log" 2>&1 < /dev/null &
    STUB_PID=$!
    for i in $(seq 400); do
        [ -S "$SOCK" ] && [ -S "/run/vmcuda/$DOM.ctl" ] && break
        kill -0 "$STUB_PID" 2>/dev/null || break
        sleep 0.05
    done
    if ! [ -S "$SOCK" ] || ! kill -0 "$STUB_PID" 2>/dev/null; then
        bad "stub $1 did not start:"; sed 's/^/  /' "$WORK/stub-$1.log"; exit 1
    fi
    # QEMU runs as libvirt-qemu: the socket is the stub's, made for that group (docs, step 1).
    local got; got=$(stat -c '%a %G' "$SOCK")
    [ "$got" = "660 libvirt-qemu" ] || { bad "the stub's socket is '$got', not '660 libvirt-qemu'"; exit 1; }
}
stop_stub() {
    kill -TERM "$STUB_PID" 2>/dev/null; wait "$STUB_PID" 2>/dev/null; STUB_PID=''
}
con_size() { stat -c %s "$CON" 2>/dev/null || echo 0; }
con_from() { tail -c +$(( $1 + 1 )) "$CON" 2>/dev/null | tr -d '\r'; }  # the console after byte $1
wait_con() { # FROM REGEX SECONDS: until the console after FROM has a line matching REGEX
    local i=0
    while ! con_from "$1" | grep -aEq "$2"; do
        i=$((i + 1))
        [ $i -gt $(($3 * 5)) ] && return 1
        sleep 0.2
    done
}
guest() { # COMMAND: one line to the guest's command loop, waited for until the guest took it
    local from
    from=$(con_size)
    python3 - "$CMD_SOCK" "$1" <<'PY' || { bad "cannot send '$1' to the guest"; return 1; }
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
time.sleep(0.3)  # QEMU reads it into the UART before we hang up
s.close()
PY
    wait_con "$from" "^@@ACK $(sed 's/[][\.*^$(){}?+|/]/\\&/g' <<< "$1")\$" 30 ||
        { bad "the guest did not take '$1'"; con_from "$from" | tail -n 5; return 1; }
}
prog_check() { # TAG NAME WHAT: the guest runs NAME; its stdout must be the native one
    local from want line
    from=$(con_size)
    guest "prog $1 $2" || return 1
    if ! wait_con "$from" "^@@PROG $1 $2 rc=" 120; then bad "$3: $2 did not end"; return 1; fi
    want=$(md5sum < "$REPO/tests/cuda/expected/$2.out" | cut -d' ' -f1)
    line=$(con_from "$from" | grep -a "^@@PROG $1 $2 rc=" | head -n 1)
    if [ "$line" = "@@PROG $1 $2 rc=0 md5=$want" ]; then
        ok "$3: $2 printed its native output"
    else
        bad "$3: $2: $line (native md5 $want)"; con_from "$from" | grep -a "^@@PROG-" | head -n 20
        return 1
    fi
}
steps_result() { # FROM TAG WHAT: both steps clients (and the symbols_pitch loop) ended with native results
    local c loops good x
    if ! wait_con "$1" "^@@STEPS-END $2\$" 240; then
        bad "$3: the programs did not end"; con_from "$1" | tail -n 20; return 1
    fi
    c=$(con_from "$1")
    for x in a b; do
        grep -a "^@@STEPS $2.$x \|^@@STEPS-OUT $2.$x \|^@@STEPS-ERR $2.$x " <<< "$c" | sed 's/^/  guest: /'
        if grep -aq "^@@STEPS $2.$x rc=0 " <<< "$c" && grep -aqxF "@@STEPS-OUT $2.$x $REF" <<< "$c"; then
            ok "$3: cuda_kill_probe $2.$x ended with the result of an uninterrupted run ($REF)"
        else
            bad "$3: cuda_kill_probe $2.$x did not end with the uninterrupted run's result ($REF)"
        fi
    done
    [ "$LOOP" = 1 ] || return 0
    loops=$(grep -ac "^@@LOOP $2 [0-9]" <<< "$c")
    good=$(grep -ac "^@@LOOP $2 [0-9]* rc=0 md5=$SP_MD5\$" <<< "$c")
    if [ "$loops" -ge 1 ] && [ "$good" = "$loops" ]; then
        ok "$3: symbols_pitch ran $loops time(s) beside them, each with its native output"
    else
        bad "$3: $good of $loops symbols_pitch run(s) printed the native output:"
        grep -a "^@@LOOP" <<< "$c" | grep -av " rc=0 md5=$SP_MD5\$" | head -n 20 | sed 's/^/  /'
    fi
}
qemu_pid() { cat "/run/libvirt/qemu/$DOM.pid" 2>/dev/null; }
check_qemu() { # WHAT: QEMU runs the device with master=on (its command line); no taint
    local pid argv
    pid=$(qemu_pid)
    argv=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)
    if [[ $argv == *"-global ivshmem-doorbell.master=on"* ]] && [[ $argv == *'"driver":"ivshmem-doorbell"'* ]] &&
            [[ $argv != *'"master":"off"'* ]] && [[ $argv != *'master=off'* ]]; then
        ok "$1: QEMU (pid $pid) runs ivshmem-doorbell with master=on (-global from qemu-vmcuda, in /proc/$pid/cmdline)"
    else
        bad "$1: QEMU (pid '$pid') does not run ivshmem-doorbell with master=on: $argv"
    fi
    if grep -q 'is tainted' "/var/log/libvirt/qemu/$DOM.log" 2>/dev/null; then
        bad "$1: the domain is tainted: $(grep 'is tainted' "/var/log/libvirt/qemu/$DOM.log" | head -n 3)"
    else
        ok "$1: no taint in /var/log/libvirt/qemu/$DOM.log"
    fi
}
domstate() { V domstate "$DOM" 2>&1 | head -n 1; }
SP_MD5=$(md5sum < "$REPO/tests/cuda/expected/symbols_pitch.out" | cut -d' ' -f1)
ROUNDS=300
# symbols_pitch in a loop beside the steps clients (kernels and module variables restored
# mid-run): off by default, because a client that starts while the VM is being saved is not
# saved, and after the restore it is served as a new client, whose session the stub then drops
# when it gives the restored region a new image token (VmControl::adopt_restored; its next
# call finds an empty session); VMCUDA_LIBVIRT_TEST_LOOP=1 runs it.
LOOP=${VMCUDA_LIBVIRT_TEST_LOOP:-0}

# The result an uninterrupted run gives (the program on this host's local transport).
REF=$(VMCUDA_STUB="$STUB" VMCUDA_SOCKET="$WORK/local.sock" VMCUDA_LIBDIR="$BUILD/guest-lib" \
      timeout 300 "$BUILD/host-stub/vmcuda-run" -- "$PROBE" steps "$WORK/ref.state" $ROUNDS 1 2>&1)
grep -q '^STEPS-OK' <<< "$REF" || { bad "the reference run failed: $REF"; exit 1; }

# ---- 1. define, start, programs --------------------------------------------------------------------
start_stub A "$WORK/state"
V define "$WORK/domain.xml" > "$WORK/define.out" 2>&1 || { bad "virsh define failed: $(cat "$WORK/define.out")"; sed 's/^/  /' "$WORK/domain.xml"; exit 1; }
DEFINED=1
if ! V start "$DOM" > "$WORK/start.out" 2>&1; then
    bad "virsh start failed: $(cat "$WORK/start.out")"; tail -n 20 "/var/log/libvirt/qemu/$DOM.log"; exit 1
fi
say "domain $DOM started (from example-domain.xml; stub A on $SOCK, $SLOTS slots)"
check_qemu "start"
if ! wait_con 0 '^@@CMD-READY' 120; then
    bad "the guest did not get ready (console below)"; tail -n 30 "$CON"; exit 1
fi
say "guest: $(con_from 0 | grep -a -o '@@VMCUDA-READY.*' | head -n 1)"
prog_check p1 vector_add "in the libvirt domain"
prog_check p1 symbols_pitch "in the libvirt domain"
prog_check p1 device_query "in the libvirt domain"
from=$(con_size)
guest "prog p1 cuda_kill_probe slots"
wait_con "$from" "^@@PROG p1 cuda_kill_probe rc=" 60
if con_from "$from" | grep -aq "^@@PROG p1 cuda_kill_probe rc=0 md5=$(echo "free-slots=$SLOTS" | md5sum | cut -d' ' -f1)\$"; then
    ok "cuda_kill_probe: all $SLOTS slots of /dev/vmcuda0 free"
else
    bad "cuda_kill_probe slots: $(con_from "$from" | grep -a '^@@PROG' | head -n 5)"
fi

# ---- 2. vmcudactl domain-save midway; a new stub; virsh restore -----------------------------------
from=$(con_size)
guest "steps s1 $ROUNDS $LOOP"
wait_con "$from" '^@@AT s1 ' 120 || { bad "the program never got to round 5"; con_from "$from" | tail; exit 1; }
say "guest: $(con_from "$from" | grep -a -o '^@@AT s1 .*' | head -n 1)"
# libvirt cannot write there: the GPU state comes back and the VM runs on.
rc=0
"$CTL" domain-save "$DOM" "$WORK/no-such-dir/vm.save" --gpu-state "$WORK/failed.gpu" > "$WORK/save-fail.out" 2>&1 || rc=$?
if [ $rc = 4 ] && grep -q 'the GPU state is resumed and the VM runs on as before' "$WORK/save-fail.out" &&
        [ "$(domstate)" = running ] &&
        "$CTL" status "$DOM" --json 2>/dev/null | grep -q '"state": "running"'; then
    ok "domain-save into an unwritable file: exit 4, $(grep -o 'libvirt could not save[^;(]*' "$WORK/save-fail.out" | head -n 1 | cut -c1-100)...; GPU state resumed, domain running"
else
    bad "domain-save into an unwritable file (exit $rc, domain $(domstate)):"; sed 's/^/  /' "$WORK/save-fail.out"
fi
t=$(date +%s.%N)
if "$CTL" domain-save "$DOM" "$WORK/vm.save" > "$WORK/save.out" 2> "$WORK/save.err"; then
    ok "vmcudactl domain-save ($(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s): $(cat "$WORK/save.out")"
else
    bad "vmcudactl domain-save failed:"; sed 's/^/  /' "$WORK/save.err" "$WORK/save.out"; exit 1
fi
[ "$(domstate)" = "shut off" ] || bad "after domain-save the domain is '$(domstate)', not shut off"
n=$(grep -c '"file"' "$WORK/vm.save.gpu/manifest.json" 2>/dev/null)
[ "${n:-0}" -ge 2 ] && ok "GPU state of $n clients in $WORK/vm.save.gpu" ||
    bad "the GPU state in $WORK/vm.save.gpu has ${n:-no manifest.json, no} client(s), not the 2 steps clients"
stop_stub
start_stub B "$WORK/state"
say "stub A stopped, stub B (a new process, same --state-dir) started; virsh restore"
from=$(con_size)
V restore "$WORK/vm.save" > "$WORK/restore.out" 2>&1 || { bad "virsh restore failed: $(cat "$WORK/restore.out")"; exit 1; }
steps_result "$from" s1 "saved with domain-save, restored with virsh restore into a new stub"
if grep -q 'the VM was restored from' "$WORK/stub-B.log"; then
    ok "stub B: $(grep -o 'the VM was restored from.*' "$WORK/stub-B.log" | head -n 1)"
else
    bad "stub B never said it restored the VM's clients"; tail -n 20 "$WORK/stub-B.log" | sed 's/^/  stub B: /'
fi
prog_check p2 vector_add "a new program in the restored domain"
prog_check p2 symbols_pitch "a new program in the restored domain"
check_qemu "restored"

# ---- 3. vmcudactl domain-snapshot midway; virsh snapshot-revert ------------------------------------
from=$(con_size)
guest "steps s2 $ROUNDS $LOOP"
wait_con "$from" '^@@AT s2 ' 120 || { bad "the program never got to round 5"; exit 1; }
say "guest: $(con_from "$from" | grep -a -o '^@@AT s2 .*' | head -n 1)"
t=$(date +%s.%N)
if "$CTL" domain-snapshot "$DOM" snap1 --gpu-state "$WORK/snap1.gpu" > "$WORK/snap.out" 2> "$WORK/snap.err"; then
    ok "vmcudactl domain-snapshot ($(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s): $(cat "$WORK/snap.out")"
else
    bad "vmcudactl domain-snapshot failed:"; sed 's/^/  /' "$WORK/snap.err" "$WORK/snap.out"; exit 1
fi
V snapshot-list "$DOM" --name 2>&1 | grep -qx snap1 || bad "virsh snapshot-list has no snap1: $(V snapshot-list "$DOM" 2>&1)"
[ "$(domstate)" = running ] || bad "after domain-snapshot the domain is '$(domstate)', not running"
# A snapshot libvirt refuses (the name exists): the GPU state comes back, the programs go on.
rc=0
"$CTL" domain-snapshot "$DOM" snap1 --gpu-state "$WORK/snap1-again.gpu" > "$WORK/snap-fail.out" 2>&1 || rc=$?
if [ $rc = 4 ] && grep -q 'the GPU state is resumed and the VM runs on as before' "$WORK/snap-fail.out" &&
        [ "$(domstate)" = running ] && "$CTL" status "$DOM" --json 2>/dev/null | grep -q '"state": "running"'; then
    ok "domain-snapshot with a name that exists: exit 4, $(grep -o 'libvirt could not take the snapshot[^;]*' "$WORK/snap-fail.out" | head -n 1 | cut -c1-110); GPU state resumed"
else
    bad "domain-snapshot with a name that exists (exit $rc, domain $(domstate)):"; sed 's/^/  /' "$WORK/snap-fail.out"
fi
steps_result "$from" s2 "went on after domain-snapshot"
from=$(con_size)
V snapshot-revert "$DOM" snap1 > "$WORK/revert.out" 2>&1 || { bad "virsh snapshot-revert failed: $(cat "$WORK/revert.out")"; exit 1; }
say "virsh snapshot-revert $DOM snap1 (domain $(domstate))"
steps_result "$from" s2 "after virsh snapshot-revert, from the snapshot point"
if grep -q "the VM was restored from $WORK/snap1.gpu" "$WORK/stub-B.log"; then
    ok "stub B: $(grep -o "the VM was restored from $WORK/snap1.gpu.*" "$WORK/stub-B.log" | tail -n 1)"
else
    bad "stub B never said it restored the clients from $WORK/snap1.gpu"; tail -n 20 "$WORK/stub-B.log" | sed 's/^/  stub B: /'
fi
prog_check p3 vector_add "a new program after the revert"
prog_check p3 symbols_pitch "a new program after the revert"

# ---- 4. live detach and attach of the <shmem> device -------------------------------------------------
from=$(con_size)
if V detach-device "$DOM" "$WORK/shmem.xml" --live > "$WORK/detach.out" 2>&1; then
    ok "virsh detach-device $DOM shmem.xml --live"
else
    bad "virsh detach-device --live failed: $(cat "$WORK/detach.out")"
fi
guest "wait_dev gone"
wait_con "$from" '^@@DEV gone' 60
if con_from "$from" | grep -aq '^@@DEV gone end$' && ! V dumpxml "$DOM" | grep -q '<shmem'; then
    ok "the device is gone from the domain and the guest (no /dev/vmcuda0)"
else
    bad "after detach-device: $(con_from "$from" | grep -a '^@@DEV' | head -n 1); domain XML has $(V dumpxml "$DOM" | grep -c '<shmem') <shmem>"
fi
from=$(con_size)
if V attach-device "$DOM" "$WORK/shmem.xml" --live > "$WORK/attach.out" 2>&1; then
    ok "virsh attach-device $DOM shmem.xml --live"
else
    bad "virsh attach-device --live failed: $(cat "$WORK/attach.out")"
fi
guest "wait_dev back"
wait_con "$from" '^@@DEV back' 60
if con_from "$from" | grep -aq '^@@DEV back /dev/vmcuda0 end$'; then
    ok "the guest has /dev/vmcuda0 again"
else
    bad "after attach-device: $(con_from "$from" | grep -a '^@@DEV' | head -n 1)"
fi
prog_check p4 vector_add "after detach-device and attach-device"
prog_check p4 symbols_pitch "after detach-device and attach-device"

# ---- 5. a plain virsh save / restore midway: no GPU state ---------------------------------------------
from=$(con_size)
guest "steps s3 $ROUNDS $LOOP"
wait_con "$from" '^@@AT s3 ' 120 || { bad "the program never got to round 5"; exit 1; }
if V save "$DOM" "$WORK/plain.save" > "$WORK/plain-save.out" 2>&1; then
    ok "plain virsh save of the domain with the hot-plugged device (so it runs with master=on)"
else
    bad "plain virsh save failed: $(cat "$WORK/plain-save.out")"; exit 1
fi
from=$(con_size)
V restore "$WORK/plain.save" > "$WORK/plain-restore.out" 2>&1 || { bad "virsh restore failed: $(cat "$WORK/plain-restore.out")"; exit 1; }
if wait_con "$from" '^@@STEPS-END s3$' 240; then
    c=$(con_from "$from")
    for x in a b; do
        grep -a "^@@STEPS s3.$x \|^@@STEPS-OUT s3.$x \|^@@STEPS-ERR s3.$x " <<< "$c" | head -n 3 | sed 's/^/  guest: /'
        if grep -aq "^@@STEPS s3.$x rc=[1-9]" <<< "$c" && grep -aq "^@@STEPS-ERR s3.$x .*GPU state is gone" <<< "$c" &&
                ! grep -aq "^@@STEPS-OUT s3.$x STEPS-OK" <<< "$c"; then
            ok "restored without its GPU state: cuda_kill_probe s3.$x failed with the clear error, no result"
        else
            bad "a domain restored after a plain virsh save: cuda_kill_probe s3.$x should fail saying its GPU state is gone"
        fi
    done
    # Each symbols_pitch run beside them: its native output, or the same clear error; never another output.
    wrong=$(grep -a "^@@LOOP s3 [0-9]" <<< "$c" | grep -av " rc=0 md5=$SP_MD5\$" | while read -r _ _ i _; do
        grep -aq "^@@LOOP-ERR s3 $i .*GPU state is gone" <<< "$c" || echo "$i"; done)
    if [ "$LOOP" = 1 ]; then
        [ -z "$wrong" ] && ok "symbols_pitch runs around the plain save: native output or the clear error" ||
            bad "symbols_pitch run(s) $wrong around the plain save: neither native output nor the clear error"
    fi
else
    bad "after the plain restore the program did not end"; con_from "$from" | tail -n 20
fi
grep -q 'lose their GPU state' "$WORK/stub-B.log" && ok "stub B: $(grep -o 'the VM was restored;.*' "$WORK/stub-B.log" | tail -n 1 | cut -c1-150)" ||
    bad "stub B did not log the clients that lost their GPU state"
prog_check p5 vector_add "new programs in a domain restored without its GPU state"
check_qemu "at the end"

V destroy "$DOM" > /dev/null 2>&1
stop_stub
if [ $fail = 0 ]; then
    echo "=== $(( $(date +%s) - T0 ))s; PASSED"
else
    echo "=== $(( $(date +%s) - T0 ))s; FAILED"
fi
exit $fail
