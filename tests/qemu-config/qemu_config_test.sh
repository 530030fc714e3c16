#!/usr/bin/env bash
# qemu_config_test.sh CHECK [TEST_STUB]
#
# Checks qemu-config/ (the libvirt <shmem> fragment, example domain, QEMU arguments,
# systemd unit and libvirt hook). CHECK is one of:
#   xml          virt-xml-validate accepts example-domain.xml and a minimal domain made
#                from vmcuda-shmem.xml, and rejects a broken one; both files describe
#                the same device. Exit 77 (skip) without virt-xml-validate/xmllint.
#   consistency  vectors == the unit's --slots == qemu-args.txt's vectors, same socket
#                path, master on everywhere, power-of-two region; the unit passes
#                systemd-analyze verify (when present) and passes the socket's group and
#                mode to the stub; the hook passes sh -n, bash -n and
#                (when installed) shellcheck, and starts/stops the right unit.
#   qemu         QEMU accepts qemu-args.txt against TEST_STUB (vmcuda-test-stub, same
#                options as vmcuda-stub) started as the unit starts vmcuda-stub:
#                device created with master=on and the vectors, BAR2 = the stub's
#                region, the VM can be saved (migrate to a file) with master=on and not
#                with master=off, and restored against a stub with the same region size
#                only; "Failed to connect" once the stub has stopped.
#                Exit 77 without qemu-system-x86_64 or TEST_STUB.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
QC=$REPO/qemu-config
FRAGMENT=$QC/vmcuda-shmem.xml
DOMAIN=$QC/example-domain.xml
ARGS=$QC/qemu-args.txt
UNIT=$QC/vmcuda-stub@.service
HOOK=$QC/libvirt-hook-qemu

CHECK=${1:-}
FAILS=0
T=$(mktemp -d "${TMPDIR:-/tmp}/vmcuda-qemu-config.XXXXXX")
PIDS=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    local p
    for p in ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
skip() { echo "SKIP: $*"; exit 77; }
finish() {
    if [ "$FAILS" -gt 0 ]; then echo "$CHECK: $FAILS check(s) failed"; exit 1; fi
    echo "$CHECK: all checks passed"; exit 0
}

# The value of attribute $2 of the first element $1 in XML file $3 (libvirt's quoting).
xml_attr() { sed -n "s/.*<$1[[:space:]][^>]*$2=['\"]\\([^'\"]*\\)['\"].*/\\1/p" "$3" | head -n1; }
# Default of Environment=NAME=VALUE in the unit.
unit_env() { sed -n "s/^Environment=$1=//p" "$UNIT" | head -n1; }
# qemu-args.txt without comments, one option and value a line.
qemu_args() { sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$ARGS"; }
# KEY=VALUE from the -device line of qemu-args.txt.
device_prop() { qemu_args | sed -n '/^-device /{s/^-device //;p}' | tr ',' '\n' | sed -n "s/^$1=//p"; }
chardev_prop() { qemu_args | sed -n '/^-chardev /{s/^-chardev //;p}' | tr ',' '\n' | sed -n "s/^$1=//p"; }

check_xml() {
    command -v virt-xml-validate >/dev/null 2>&1 ||
        skip "virt-xml-validate not found (apt-get install libvirt-clients libxml2-utils)"
    command -v xmllint >/dev/null 2>&1 || skip "xmllint not found (apt-get install libxml2-utils)"

    if xmllint --noout "$FRAGMENT"; then ok "vmcuda-shmem.xml is well-formed"; else fail "vmcuda-shmem.xml is not well-formed"; fi
    if virt-xml-validate "$DOMAIN" domain; then ok "virt-xml-validate accepts example-domain.xml"
    else fail "virt-xml-validate rejects example-domain.xml"; fi

    # A minimal domain around the fragment, as a user would paste it.
    make_domain() {
        printf "<domain type='kvm'>\n  <name>testvm</name>\n  <memory unit='MiB'>512</memory>\n"
        printf "  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n  </os>\n  <devices>\n"
        sed 's/VMNAME/testvm/g' "$1"
        printf "  </devices>\n</domain>\n"
    }
    make_domain "$FRAGMENT" > "$T/generated.xml"
    if virt-xml-validate "$T/generated.xml" domain; then ok "virt-xml-validate accepts a minimal domain with vmcuda-shmem.xml"
    else fail "virt-xml-validate rejects a minimal domain with vmcuda-shmem.xml ($(cat "$T/generated.xml"))"; fi

    # The validator must really validate: the same domain with a bad model is refused.
    sed "s/ivshmem-doorbell/ivshmem-bogus/" "$FRAGMENT" > "$T/broken-fragment.xml"
    make_domain "$T/broken-fragment.xml" > "$T/broken.xml"
    if virt-xml-validate "$T/broken.xml" domain >/dev/null 2>&1; then fail "virt-xml-validate accepts model 'ivshmem-bogus'"
    else ok "virt-xml-validate rejects a domain with a bad shmem model"; fi

    # example-domain.xml holds the fragment's device (VMNAME = vm1), attribute for attribute.
    local a b
    a=$(sed 's/VMNAME/vm1/g' "$FRAGMENT" | xmllint --xpath '//shmem' - 2>/dev/null | tr -s ' \n' ' ')
    b=$(xmllint --xpath '//devices/shmem' "$DOMAIN" 2>/dev/null | tr -s ' \n' ' ')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "example-domain.xml's <shmem> is vmcuda-shmem.xml's"
    else fail "example-domain.xml's <shmem> differs from vmcuda-shmem.xml's: [$b] vs [$a]"; fi
    finish
}

check_consistency() {
    local vectors slots dom_vectors arg_vectors region
    vectors=$(xml_attr msi vectors "$FRAGMENT")
    dom_vectors=$(xml_attr msi vectors "$DOMAIN")
    slots=$(unit_env VMCUDA_SLOTS)
    arg_vectors=$(device_prop vectors)
    region=$(unit_env VMCUDA_REGION_BYTES)
    echo "vectors: vmcuda-shmem.xml=$vectors example-domain.xml=$dom_vectors qemu-args.txt=$arg_vectors; unit VMCUDA_SLOTS=$slots"
    if [ -n "$vectors" ] && [ "$vectors" = "$slots" ] && [ "$vectors" = "$dom_vectors" ] && [ "$vectors" = "$arg_vectors" ]; then
        ok "MSI vectors == vmcuda-stub --slots ($vectors)"
    else
        fail "MSI vectors and vmcuda-stub --slots disagree"
    fi
    case $vectors in ''|*[!0-9]*) fail "vectors '$vectors' is not a number" ;;
        *) if [ "$vectors" -ge 1 ] && [ "$vectors" -le 255 ]; then ok "vectors in 1..255 (the guest driver uses at most 255)"
           else fail "vectors $vectors outside 1..255"; fi ;;
    esac
    if grep -Eq '^ExecStart=[^ ]*vmcuda-stub .*--slots \$\{VMCUDA_SLOTS\}' "$UNIT"; then ok "ExecStart passes --slots \${VMCUDA_SLOTS}"
    else fail "ExecStart does not pass --slots \${VMCUDA_SLOTS}"; fi
    if grep -Eq '^ExecStart=[^ ]*vmcuda-stub .*--region-bytes \$\{VMCUDA_REGION_BYTES\}' "$UNIT"; then ok "ExecStart passes --region-bytes"
    else fail "ExecStart does not pass --region-bytes \${VMCUDA_REGION_BYTES}"; fi
    if python3 -c 'import sys; n = int(sys.argv[1]); sys.exit(0 if n >= 1 << 20 and n & (n - 1) == 0 else 1)' "$region" 2>/dev/null; then
        ok "region $region bytes: a power of two >= 1 MiB"
    else fail "VMCUDA_REGION_BYTES '$region' is not a power of two >= 1 MiB"; fi

    # One socket path convention everywhere.
    local p_frag p_args
    p_frag=$(xml_attr server path "$FRAGMENT")
    p_args=$(chardev_prop path)
    if [ "$p_frag" = /run/vmcuda/VMNAME.sock ] && [ "$p_args" = /run/vmcuda/VMNAME.sock ] &&
        grep -Eq '^ExecStart=[^ ]*vmcuda-stub --socket /run/vmcuda/%i\.sock ' "$UNIT" &&
        [ "$(xml_attr server path "$DOMAIN")" = /run/vmcuda/vm1.sock ]; then
        ok "socket path /run/vmcuda/VMNAME.sock in the fragment, qemu-args.txt, the unit and the example"
    else fail "socket paths disagree: fragment '$p_frag', qemu-args.txt '$p_args'"; fi
    if [ "$(chardev_prop id)" = "$(device_prop chardev)" ]; then ok "qemu-args.txt: the device uses the chardev"
    else fail "qemu-args.txt: -device chardev= is not the -chardev id="; fi

    # Saveable: master everywhere; ioeventfd on; the doorbell model.
    if [ "$(sed -n "s/.*<shmem[[:space:]][^>]*role='\\([a-z]*\\)'.*/\\1/p" "$FRAGMENT")" = master ] &&
        [ "$(sed -n "s/.*<shmem[[:space:]][^>]*role='\\([a-z]*\\)'.*/\\1/p" "$DOMAIN")" = master ] &&
        [ "$(device_prop master)" = on ]; then ok "role='master' / master=on"
    else fail "role='master' / master=on missing somewhere"; fi
    if [ "$(xml_attr msi ioeventfd "$FRAGMENT")" = on ] && [ "$(device_prop ioeventfd)" = on ]; then ok "ioeventfd on"
    else fail "ioeventfd is not on"; fi
    if [ "$(xml_attr model type "$FRAGMENT")" = ivshmem-doorbell ] && qemu_args | grep -q '^-device ivshmem-doorbell,'; then
        ok "model ivshmem-doorbell"
    else fail "model is not ivshmem-doorbell"; fi
    if python3 -c 'import sys, xml.etree.ElementTree as E
found = any(next(E.parse(f).getroot().iter("size"), None) is not None for f in sys.argv[1:])
sys.exit(0 if found else 1)' "$FRAGMENT" "$DOMAIN" ||
        device_prop size | grep -q .; then fail "a size is given: the stub's memfd decides it"
    else ok "no size given (BAR2 = the stub's memfd)"; fi

    # The unit.
    if command -v systemd-analyze >/dev/null 2>&1; then
        mkdir -p "$T/units"
        sed 's|^ExecStart=/usr/local/bin/vmcuda-stub |ExecStart=/bin/true |' "$UNIT" > "$T/units/vmcuda-stub@.service"
        cp "$T/units/vmcuda-stub@.service" "$T/units/vmcuda-stub@vm1.service"
        if out=$(systemd-analyze verify --man=no "$T/units/vmcuda-stub@vm1.service" 2>&1) && [ -z "$out" ]; then
            ok "systemd-analyze verify vmcuda-stub@vm1.service"
        else fail "systemd-analyze verify: $out"; fi
        # Least privilege, scored as systemd scores it (docs/security.md keeps the figure).
        local score
        score=$(systemd-analyze security --offline=yes "$T/units/vmcuda-stub@vm1.service" 2>/dev/null |
                sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
        if [ -n "$score" ] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 2.0 else 1)' "$score"; then
            ok "systemd-analyze security: exposure $score (at most 2.0)"
        elif [ -n "$score" ]; then fail "systemd-analyze security: exposure $score, over 2.0"
        else echo "note: systemd-analyze security --offline not supported here; not scored"; fi
    else
        echo "note: systemd-analyze not found; unit not verified"
    fi
    for want in RuntimeDirectory=vmcuda RuntimeDirectoryPreserve=yes UMask=0077 Restart=on-failure \
                User=vmcuda NoNewPrivileges=yes CapabilityBoundingSet= ProtectSystem=strict \
                Type=notify KillMode=mixed FileDescriptorStoreMax=8192 \
                "Environment=VMCUDA_SOCKET_GROUP=libvirt-qemu" "Environment=VMCUDA_SOCKET_MODE=0660"; do
        if grep -qx "$want" "$UNIT"; then ok "unit: $want"; else fail "unit lacks $want"; fi
    done

    # The socket's group and mode come from the stub's own options, never the umask.
    if grep -Eq '^ExecStart=[^ ]*vmcuda-stub .*--socket-group \$\{VMCUDA_SOCKET_GROUP\} --socket-mode \$\{VMCUDA_SOCKET_MODE\}' "$UNIT"; then
        ok "ExecStart passes --socket-group \${VMCUDA_SOCKET_GROUP} --socket-mode \${VMCUDA_SOCKET_MODE}"
    else fail "ExecStart does not pass the socket's group and mode"; fi
    if grep -q '^ExecStartPost=' "$UNIT"; then fail "the unit still has an ExecStartPost (the stub sets group and mode)"
    else ok "no ExecStartPost: Type=notify readiness, the stub sets the socket's group and mode"; fi

    # The hook: a shell script that parses, lints, and starts/stops the right unit.
    if [ -x "$HOOK" ]; then ok "libvirt-hook-qemu is executable"; else fail "libvirt-hook-qemu is not executable"; fi
    if sh -n "$HOOK" && bash -n "$HOOK"; then ok "sh -n / bash -n libvirt-hook-qemu"; else fail "libvirt-hook-qemu has syntax errors"; fi
    if command -v shellcheck >/dev/null 2>&1; then
        if shellcheck "$HOOK"; then ok "shellcheck libvirt-hook-qemu"; else fail "shellcheck libvirt-hook-qemu"; fi
    else
        echo "note: shellcheck not found; hook only syntax-checked"
    fi
    mkdir -p "$T/bin"
    printf '#!/bin/sh\necho "systemctl $*" >> "%s"\n' "$T/systemctl.log" > "$T/bin/systemctl"
    chmod +x "$T/bin/systemctl"
    hook() { : > "$T/systemctl.log"; PATH="$T/bin:$PATH" "$HOOK" "$@"; }
    local got
    hook vm1 prepare begin - < "$DOMAIN"; rc=$?; got=$(cat "$T/systemctl.log")
    if [ "$rc" = 0 ] && [ "$got" = "systemctl start vmcuda-stub@vm1.service" ]; then ok "hook prepare: $got"
    else fail "hook prepare: rc $rc, ran [$got]"; fi
    hook vm1 release end - < "$DOMAIN"; rc=$?; got=$(cat "$T/systemctl.log")
    if [ "$rc" = 0 ] && [ "$got" = "systemctl stop --no-block vmcuda-stub@vm1.service" ]; then ok "hook release: $got"
    else fail "hook release: rc $rc, ran [$got]"; fi
    hook vm1 started begin - < "$DOMAIN"; rc=$?; got=$(cat "$T/systemctl.log")
    if [ "$rc" = 0 ] && [ -z "$got" ]; then ok "hook started: nothing to do"; else fail "hook started: rc $rc, ran [$got]"; fi
    grep -v '<server' "$DOMAIN" | hook other prepare begin -; rc=$?; got=$(cat "$T/systemctl.log")
    if [ "$rc" = 0 ] && [ -z "$got" ]; then ok "hook leaves a domain without vmcuda alone"; else fail "hook on a plain domain: rc $rc, ran [$got]"; fi
    sed "s|/run/vmcuda/vm1.sock|/run/vmcuda/a b.sock|" "$DOMAIN" | hook vm1 prepare begin - 2>/dev/null; rc=$?
    got=$(cat "$T/systemctl.log")
    if [ "$rc" != 0 ] && [ -z "$got" ]; then ok "hook refuses a socket name that is no unit instance name"
    else fail "hook with socket 'a b.sock': rc $rc, ran [$got]"; fi
    finish
}

check_qemu() {
    local stub=${1:-} qemu=${VMCUDA_QEMU:-qemu-system-x86_64}
    command -v "$qemu" >/dev/null 2>&1 || skip "$qemu not found (apt-get install qemu-system-x86)"
    if [ -z "$stub" ] || [ ! -x "$stub" ]; then skip "test stub '$stub' not built (cmake --build build --target vmcuda-test-stub)"; fi
    local vectors region sock="$T/vm1.sock"
    vectors=$(unit_env VMCUDA_SLOTS)
    region=$(unit_env VMCUDA_REGION_BYTES)

    # The stub as vmcuda-stub@vm1 runs it (socket, slots, region, group and mode from the
    # unit; this user's group stands in for libvirt-qemu), under the unit's umask.
    local group
    group=$(id -gn)
    (umask 077; exec "$stub" --socket "$sock" --socket-group "$group" --socket-mode "$(unit_env VMCUDA_SOCKET_MODE)" \
        --slots "$vectors" --region-bytes "$region") 2> "$T/stub.log" &
    local stub_pid=$!
    PIDS+=("$stub_pid")
    local _
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || { fail "the stub did not create its socket: $(cat "$T/stub.log")"; finish; }
    ok "test stub serving $sock: --slots $vectors --region-bytes $region"
    if [ "$(stat -c '%a %G' "$sock")" = "660 $group" ]; then ok "the socket has mode 0660 and group $group under umask 077"
    else fail "the socket is '$(stat -c '%a %G' "$sock")', not '660 $group'"; fi

    # qemu-args.txt with the socket path replaced, nothing booted (-S), the monitor on stdio.
    local -a args
    mapfile -t args < <(qemu_args | tr -s ' ' '\n' | sed "s|/run/vmcuda/VMNAME.sock|${sock//,/,,}|")
    run_qemu() {  # MACHINE OUTFILE MONITOR-COMMANDS... (extra -device props via DEVICE_EXTRA)
        local machine=$1 out=$2; shift 2
        local -a a=("${args[@]}")
        [ -n "${DEVICE_EXTRA:-}" ] && a=("${a[@]/%master=on/$DEVICE_EXTRA}")
        printf '%s\n' "$@" quit |
            timeout 120 "$qemu" -M "$machine" -accel tcg -m 128M -nodefaults -nographic -display none -S \
                "${a[@]}" -monitor stdio > "$out.raw" 2>&1
        local rc=$?
        # Drop the monitor's line editing (escape sequences, carriage returns).
        sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\r//g' "$out.raw" > "$out"
        return $rc
    }
    local hex
    hex=$(printf '0x%016x' "$region")
    for machine in pc q35; do
        local out="$T/qemu-$machine.txt" rc
        run_qemu "$machine" "$out" "info qtree" "info ramblock" "migrate \"exec:cat > $T/state-$machine\"" "info migrate"
        rc=$?
        if [ "$rc" = 0 ]; then ok "-M $machine: QEMU accepted qemu-args.txt and quit"
        else fail "-M $machine: QEMU exited $rc: $(grep -a 'qemu-system' "$out" | head -n3)"; continue; fi
        if grep -aq 'dev: ivshmem-doorbell' "$out" && grep -aq "vectors = $vectors " "$out" &&
            grep -aq 'master = "on"' "$out" && grep -aq 'ioeventfd = true' "$out"; then
            ok "-M $machine: ivshmem-doorbell with vectors = $vectors, master = on, ioeventfd"
        else fail "-M $machine: device properties not as expected: $(grep -a -A6 'dev: ivshmem-doorbell' "$out")"; fi
        if grep -aE 'ivshmem\.bar2' "$out" | grep -aq "$hex $hex"; then
            ok "-M $machine: BAR2 (ivshmem.bar2) is the stub's region, $hex bytes"
        else fail "-M $machine: BAR2 size is not $hex: $(grep -a 'ivshmem.bar2' "$out")"; fi
        if grep -aq 'Migration status: completed' "$out" && [ -s "$T/state-$machine" ]; then
            ok "-M $machine: saved with master=on (migrate to a file: $(stat -c %s "$T/state-$machine") bytes)"
        else fail "-M $machine: saving failed: $(grep -a -iE 'status|error|disabled' "$out" | head -n3)"; fi
        if grep -aE 'qemu-system[^:]*: ' "$out" | grep -aqv 'terminating on signal'; then
            fail "-M $machine: QEMU complained: $(grep -a 'qemu-system' "$out" | sort -u | head -n3)"
        fi
    done

    # Restore (incoming migration from the saved file), as virsh restore does: QEMU
    # connects again, the stub gives it a fresh region of the same size, and the saved
    # contents are loaded into it. A stub with another region size is refused.
    # shellcheck disable=SC2094  # polls QEMU's output file while QEMU writes it
    restore() {  # SOCKET OUTFILE: 0 once the VM is restored (paused), 1 on an error
        local s=$1 out=$2 _
        local -a a=("${args[@]//$sock/$s}")
        {
            for _ in $(seq 150); do
                echo "info status"; sleep 0.2
                sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$out" 2>/dev/null | grep -aqE 'paused \(prelaunch\)|qemu-system' && break
            done
            echo quit
        } | timeout 120 "$qemu" -M pc -accel tcg -m 128M -nodefaults -nographic -display none -S \
                "${a[@]}" -incoming "exec:cat $T/state-pc" -monitor stdio > "$out" 2>&1
        ! grep -aq 'qemu-system' "$out" && grep -aq 'paused (prelaunch)' "$out"
    }
    if [ -s "$T/state-pc" ]; then
        if restore "$sock" "$T/qemu-restore.txt"; then ok "restored the saved VM against the stub (fresh region, same size)"
        else fail "restore failed: $(grep -a 'qemu-system' "$T/qemu-restore.txt" | head -n3)"; fi
        local sock2="$T/other.sock"
        "$stub" --socket "$sock2" --slots "$vectors" --region-bytes $((region / 2)) 2>> "$T/stub.log" &
        PIDS+=($!)
        for _ in $(seq 100); do [ -S "$sock2" ] && break; sleep 0.1; done
        if restore "$sock2" "$T/qemu-restore2.txt"; then fail "restored against a stub with another region size"
        elif grep -aq 'Size mismatch' "$T/qemu-restore2.txt"; then
            ok "restore refused by a stub with another region size: $(grep -a -m1 'Size mismatch' "$T/qemu-restore2.txt" | sed 's/^.*qemu-system-x86_64: //')"
        else fail "restore against another region size: $(grep -a 'qemu-system' "$T/qemu-restore2.txt" | head -n2)"; fi
    fi

    # master=off: QEMU refuses to save (why the device is master=on).
    local out="$T/qemu-peer.txt"
    DEVICE_EXTRA=master=off run_qemu pc "$out" "migrate \"exec:cat > $T/state-peer\""
    if grep -aq "Migration is disabled when using feature 'peer mode'" "$out"; then
        ok "master=off: saving refused ('peer mode')"
    else fail "master=off: expected QEMU to refuse saving: $(tail -n3 "$out")"; fi

    # vectors below the slot count: QEMU complains (the check that vectors == slots prevents).
    out="$T/qemu-few.txt"
    DEVICE_EXTRA="master=on,vectors=$((vectors / 2))" run_qemu pc "$out" "info qtree"
    if [ "$vectors" -lt 2 ] || grep -aq 'Too many eventfd received' "$out"; then
        ok "vectors < slots: QEMU reports 'Too many eventfd received'"
    else fail "vectors $((vectors / 2)) < slots $vectors: expected 'Too many eventfd received': $(grep -a qemu-system "$out" | head -n2)"; fi

    # The stub stops (SIGTERM, as systemctl stop): socket gone, QEMU cannot start.
    kill "$stub_pid"; wait "$stub_pid" 2>/dev/null
    if [ ! -e "$sock" ]; then ok "the stub removed its socket on SIGTERM"; else fail "socket left after SIGTERM"; fi
    out="$T/qemu-nostub.txt"
    if run_qemu pc "$out"; then fail "QEMU started without the stub"
    elif grep -aq 'Failed to connect' "$out"; then ok "without the stub QEMU fails: $(grep -a -m1 'Failed to connect' "$out")"
    else fail "without the stub: unexpected output $(tail -n2 "$out")"; fi
    finish
}

case $CHECK in
    xml) check_xml ;;
    consistency) check_consistency ;;
    qemu) check_qemu "${2:-}" ;;
    *) echo "usage: $0 xml|consistency|qemu [TEST_STUB]" >&2; exit 2 ;;
esac
