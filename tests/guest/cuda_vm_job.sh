# Guest side of the CUDA VM test (tests/guest/cuda_vm_test.sh), sourced by the image's
# /test.sh (scripts/guest/cuda-guest.sh) after vmcuda.ko is loaded:
#  1. every CUDA test program in the image (tests/cuda/bin) through run_program; the host
#     compares each output with the native one;
#  2. the kill test: a CUDA app (cuda_kill_probe busy) killed with SIGKILL while a
#     cudaMemcpy is in flight must get its slot back: the count of free slots of
#     /dev/vmcuda0 returns to what it was, and the host stub logs the client's close
#     (the host side checks that it came while the VM was still up);
#  3. vector_add once more, after the kill: the stub still serves this VM.
# Lines for the host: "@@KILL ..." (details) and "@@KILL-RESULT OK|FAIL ...".

for p in "$VMCUDA_BIN"/*; do
    n=$(basename "$p")
    [ "$n" = cuda_kill_probe ] && continue
    run_program "$n" "$p"
done

kill_free_slots() { # prints the number of free slots of /dev/vmcuda0
    LD_LIBRARY_PATH=$VMCUDA_LIB "$VMCUDA_BIN/cuda_kill_probe" slots | sed -n 's/^free-slots=//p'
}

kill_test() {
    probe=$VMCUDA_BIN/cuda_kill_probe
    [ -x "$probe" ] || { echo "@@KILL-RESULT FAIL no $probe in the image"; return 1; }
    free0=$(kill_free_slots)
    echo "@@KILL free slots before: $free0"
    attempt=1
    while [ $attempt -le 3 ]; do
        rm -f /tmp/kill.state /tmp/kill.out
        LD_LIBRARY_PATH=$VMCUDA_LIB "$probe" busy /tmp/kill.state 32 > /tmp/kill.out 2>&1 &
        pid=$!
        i=0
        while ! grep -q CUDA-BUSY /tmp/kill.out 2>/dev/null && kill -0 $pid 2>/dev/null && [ $i -lt 1200 ]; do
            sleep 0.1; i=$((i + 1))
        done
        if ! grep -q CUDA-BUSY /tmp/kill.out; then
            echo "@@KILL-RESULT FAIL the probe never got busy: $(cat /tmp/kill.out)"
            kill -9 $pid 2>/dev/null
            return 1
        fi
        # Let it run a few calls further; then look at it once more and kill it.
        sleep 0.$((3 + attempt * 2))
        free1=$(kill_free_slots)
        wchan=$(cat /proc/$pid/wchan 2>/dev/null)
        kill -9 $pid
        wait $pid
        krc=$?
        state=$(cat /tmp/kill.state | tr -s ' ')
        echo "@@KILL attempt $attempt: pid=$pid exit=$krc killed during: '$state' wchan=${wchan:-0} free slots while it ran: $free1"
        case $state in "in-call "*) break ;; esac
        echo "@@KILL attempt $attempt: killed between two calls; again"
        attempt=$((attempt + 1))
    done
    case $state in "in-call "*) ;; *) echo "@@KILL-RESULT FAIL never killed inside a call"; return 1 ;; esac
    # The driver released the slot (Closing + doorbell); the host finishes the call in
    # flight, frees the client's memory and hands the slot back (Free).
    t0=$(cut -d' ' -f1 /proc/uptime)
    i=0
    while :; do
        free2=$(kill_free_slots)
        [ "$free2" = "$free0" ] && break
        [ $i -ge 300 ] && break
        sleep 0.1; i=$((i + 1))
    done
    t1=$(cut -d' ' -f1 /proc/uptime)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    echo "@@KILL free slots after the kill: $free2 (after ${secs}s)"
    if [ "$krc" != 137 ]; then
        echo "@@KILL-RESULT FAIL pid=$pid exit $krc, not 137 (SIGKILL)"; return 1
    fi
    if [ "$free1" != $((free0 - 1)) ]; then
        echo "@@KILL-RESULT FAIL pid=$pid: $free1 free slots while it ran, expected $((free0 - 1))"; return 1
    fi
    if [ "$free2" != "$free0" ]; then
        echo "@@KILL-RESULT FAIL pid=$pid: its slot did not come back ($free2 free, $free0 before)"; return 1
    fi
    echo "@@KILL-RESULT OK pid=$pid killed during '$state'; slot back after ${secs}s"
    return 0
}

kill_test || { [ $VMCUDA_RC -eq 0 ] && VMCUDA_RC=30; }

[ -x "$VMCUDA_BIN/vector_add" ] && run_program vector_add-after-kill vector_add
