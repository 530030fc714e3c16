#!/usr/bin/env bash
# gpu-vm-check.sh: the CUDA test programs and the runtime benchmark INSIDE A QEMU GUEST on
# the GPU machine (which has no QEMU and no package registry), against the real
# vmcuda-stub, with the native and local-transport figures from the same run.
#
#   scripts/gpu-vm-check.sh                  # here: builds .carry/gpu (gpu-check.sh,
#                                            # gpu-bench.sh) and .carry/vm: the guest image
#                                            # (tests/cuda/bin + runtime_bench), the
#                                            # compressed guest kernel, a QEMU bundle
#   scripts/gpu-vm-check.sh --run OUT        # on the GPU machine (carry .carry/gpu and
#                                            # .carry/vm); results in OUT (7 files)
#   scripts/gpu-vm-check.sh --run OUT --test-stub   # the same here, against the test
#                                            # executor (no GPU: the native run is skipped)
#   scripts/gpu-vm-check.sh --run OUT --save # instead: tests/guest/cuda_vm_save_test.sh
#                                            # against the real stub (a VM saved midway,
#                                            # the stub restarted, restored) -> OUT/save.txt
#
# --run does, in one go:
#   1. unpacks the QEMU bundle (.carry/vm/qemu.tar.xz) into /tmp;
#   2. every tests/cuda/bin program in one guest (scripts/vmcuda-vm-run.sh, --image/--kernel
#      from .carry/vm), each output compared with tests/cuda/expected/NAME.out and with the
#      program's native run on this machine -> OUT/tests.txt. KVM is tried first
#      (VMCUDA_ACCEL=kvm, short timeout); if the guest does not get to run the programs
#      (no @@VMCUDA-READY), TCG. OUT/summary.txt says which one ran;
#   3. bench/cuda/runtime_bench natively, through vmcuda-run (local transport), in the VM
#      with guest-lib's default spinning, and in the VM with vmcuda.spin_ns=0 (the guest
#      sleeps until the reply's MSI-X interrupt) -> OUT/bench.table.md (side by side),
#      OUT/bench-raw.txt. Under TCG the VM runs use --quick (16 MiB largest copy, fewer
#      repetitions), and so do the native and local runs of the table (their full runs
#      are in bench-raw.txt too).
# OUT files: summary.txt, tests.txt, bench.table.md, bench-raw.txt, console-tests.log,
# console-bench.log, stub-vm.log.
#
# Env: GVC_ACCEL=auto|kvm|tcg (default auto: kvm, then tcg), GVC_KVM_TIMEOUT (default 30 s),
# GVC_TCG_TIMEOUT (default 180 s, the test run), GVC_BENCH_TIMEOUT (default 150 s per VM
# benchmark run), GVC_QUICK=auto|0|1 (VM runs with --quick; auto: under TCG only),
# GVC_SMP (guest vCPUs, default 1), GVC_MEM (guest RAM, default 2G), GVC_DEADLINE (default
# 390: seconds from the start within which everything should end; the timeouts above are
# cut down to fit it, the second VM benchmark run getting what the first left).
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
gpu="$top/.carry/gpu"
vm="$top/.carry/vm"

if [ "${1:-}" != "--run" ]; then
  set -e
  "$top/scripts/gpu-check.sh"
  "$top/scripts/gpu-bench.sh"
  mkdir -p "$vm"
  kdir="$top/build/guest/kernel"
  "$top/scripts/guest/fetch-kernel.sh" "$kdir"
  kver=$(cat "$kdir/kernel-version")
  # The compressed kernel (8 MB; the 66 MB vmlinux does not fit the 64 MiB the GPU machine takes).
  vmlinuz=''
  for d in "$(cat "$kdir/kernel-tree" 2>/dev/null)" "${VMCUDA_GUEST_CACHE:-$top/.guest/cache}/linux-$kver"; do
    [ -n "$d" ] && [ -f "$d/boot/vmlinuz-$kver" ] && { vmlinuz=$d/boot/vmlinuz-$kver; break; }
  done
  [ -n "$vmlinuz" ] || { echo "gpu-vm-check: no vmlinuz-$kver in the unpacked kernel package" >&2; exit 1; }
  cp "$vmlinuz" "$vm/vmlinuz"
  echo "$kver" > "$vm/kernel-version"
  "$top/scripts/guest/build-cuda-image.sh" --kernel-dir "$kdir" "$vm/cuda-image.cpio.gz" "$top/build-gpu" \
    "$top"/tests/cuda/bin/* "$gpu/runtime_bench" "$gpu/cuda_kill_probe"
  rm -f "$vm/cuda-image.cpio.gz.lock"
  if [ ! -s "$vm/qemu.tar.xz" ] || [ "$(command -v qemu-system-x86_64)" -nt "$vm/qemu.tar.xz" ]; then
    qb=$(mktemp -d)
    "$top/scripts/guest/bundle-qemu.sh" "$qb/qemu"
    tar -cJf "$vm/qemu.tar.xz" -C "$qb/qemu" .
    rm -rf "$qb"
  fi
  ls -la "$vm"
  du -sh "$top/.carry/gpu" "$vm"
  exit 0
fi

out="${2:?usage: $0 --run OUT [--test-stub]}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
test_stub=0 save=0
[ "${3:-}" = --test-stub ] && test_stub=1
[ "${3:-}" = --save ] && save=1
T0=$(date +%s)
summary="$out/summary.txt"
: > "$summary"
DEADLINE=$((T0 + ${GVC_DEADLINE:-390}))
# cap SECONDS [RESERVE]: SECONDS, or less so that RESERVE seconds stay before the deadline (min 10)
cap() { local l=$((DEADLINE - $(date +%s) - ${2:-0})); [ $l -lt "$1" ] && { [ $l -lt 10 ] && l=10; echo $l; return; }; echo "$1"; }
say() { echo "gpu-vm-check: [$(( $(date +%s) - T0 ))s] $*" | tee -a "$summary" >&2; }

work=$(mktemp -d /tmp/gpu-vm-check.XXXXXX)
say "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'); $(nproc) cores; kernel $(uname -r); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
say "/dev/kvm: $(ls -l /dev/kvm 2>&1)"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# ---- 1. QEMU -----------------------------------------------------------------------------------
qb="$work/qemu"
mkdir -p "$qb"
if command -v xz >/dev/null 2>&1; then
  tar -xJf "$vm/qemu.tar.xz" -C "$qb"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$vm/qemu.tar.xz" "$qb"
fi
export VMCUDA_QEMU="$qb/qemu-system-x86_64"
say "QEMU: $("$VMCUDA_QEMU" --version 2>&1 | head -n 1)"

if [ $test_stub = 1 ]; then stub="$top/build/tests/vmcuda-test-stub"; else stub="$gpu/vmcuda-stub"; fi
if [ $save = 1 ]; then
  accel=tcg
  { [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] && [ "${GVC_ACCEL:-tcg}" = kvm ]; } && accel=kvm
  say "save test against $stub (VMCUDA_ACCEL=$accel)"
  mkdir -p "$work/build"
  rc=0
  VMCUDA_ACCEL=$accel VMCUDA_SAVE_TEST_VM_ARGS="--image $vm/cuda-image.cpio.gz --kernel $vm/vmlinuz --mem 2G" \
    VMCUDA_SAVE_TEST_RUN="$gpu/vmcuda-run" VMCUDA_SAVE_TEST_LIBDIR="$gpu/lib" \
    timeout "$(cap 500)" "$top/tests/guest/cuda_vm_save_test.sh" "$work/build" "$gpu/cuda_kill_probe" "$stub" \
    "$gpu/vmcudactl" > "$out/save.txt" 2>&1 || rc=$?
  say "save test: exit $rc"
  d=$(ls -d "$work"/build/guest/cuda-vm-save.* 2>/dev/null | head -n 1)
  [ -n "$d" ] && cp "$d"/stub-*.log "$out/" 2>/dev/null
  exit $rc
fi
say "stub: $stub"
image="$vm/cuda-image.cpio.gz"
kernel="$vm/vmlinuz"
progs=()
for p in "$gpu"/cuda/*; do [ -x "$p" ] && progs+=("$(basename "$p")"); done
smp=${GVC_SMP:-1} mem=${GVC_MEM:-2G}
vmrun() { # vmrun ACCEL TIMEOUT OUTDIR [vmcuda-vm-run args...]
  local accel=$1 t=$2 d=$3
  shift 3
  mkdir -p "$d"
  VMCUDA_ACCEL=$accel "$top/scripts/vmcuda-vm-run.sh" --stub "$stub" --image "$image" --kernel "$kernel" \
    --smp "$smp" --mem "$mem" --timeout "$t" --out-dir "$d" "$@" > "$d/stdout" 2> "$d/stderr"
  local rc=$?
  grep '^vmcuda-vm-run:' "$d/stderr" | sed 's/^/  /' >> "$summary"
  return $rc
}

# ---- 2. the test programs -----------------------------------------------------------------------
want=${GVC_ACCEL:-auto}
kvm_ok=0
{ [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; } && kvm_ok=1
accel=''
if [ "$want" != tcg ] && [ $kvm_ok = 1 ]; then
  t=$(cap "${GVC_KVM_TIMEOUT:-30}")
  say "tests: trying KVM (timeout ${t}s)"
  rc=0; vmrun kvm "$t" "$work/tests-kvm" "${progs[@]}" || rc=$?
  if grep -aq '@@VMCUDA-READY' "$work/tests-kvm/console.log" 2>/dev/null; then
    accel=kvm; tdir="$work/tests-kvm"
    say "tests: KVM guest ran the programs (vmcuda-vm-run exit $rc)"
  else
    say "tests: KVM guest did not get to run the programs (vmcuda-vm-run exit $rc); console tail:"
    tr -d '\r' < "$work/tests-kvm/console.log" 2>/dev/null | grep -av '^[A-Za-z0-9+/=]*$' | tail -n 15 | sed 's/^/  | /' >> "$summary"
    tail -n 15 "$work/tests-kvm/stderr" | sed 's/^/  ! /' >> "$summary"
  fi
elif [ "$want" != tcg ]; then
  say "tests: /dev/kvm missing or not read/writable: TCG"
fi
if [ -z "$accel" ]; then
  accel=tcg; tdir="$work/tests-tcg"
  t=$(cap "${GVC_TCG_TIMEOUT:-180}" 120)
  say "tests: TCG (timeout ${t}s)"
  rc=0; vmrun tcg "$t" "$tdir" "${progs[@]}" || rc=$?
  say "tests: TCG run exit $rc"
fi
say "ACCELERATOR: $accel"
cp "$tdir/console.log" "$out/console-tests.log" 2>/dev/null
cp "$tdir/stub.log" "$out/stub-vm.log" 2>/dev/null
tests="$out/tests.txt"
{
  echo "# tests/cuda/bin in a $accel guest against $(basename "$stub"); reference: tests/cuda/expected/NAME.out"
  echo "# and the program's native run on this machine (stdout only; the VM run's rc must be 0)"
} > "$tests"
nok=0 nbad=0
for name in "${progs[@]}"; do
  native="$work/$name.native"
  if [ $test_stub = 0 ]; then "$gpu/cuda/$name" > "$native" 2> "$native.err" || echo "native $name: rc $?" >> "$tests"; fi
  if [ ! -f "$tdir/$name.rc" ]; then echo "$name: DID NOT RUN in the VM" >> "$tests"; nbad=$((nbad + 1)); continue; fi
  r=$(cat "$tdir/$name.rc")
  line="$name: vm rc=$r"
  exp="$top/tests/cuda/expected/$name.out"
  if [ -f "$exp" ] && cmp -s "$exp" "$tdir/$name.out"; then line+=", IDENTICAL to expected/$name.out"
  elif [ -f "$exp" ]; then line+=", DIFFERS from expected/$name.out"
  else line+=", no expected/$name.out"; fi
  if [ -s "$native" ]; then
    if cmp -s "$native" "$tdir/$name.out"; then line+=", identical to this machine's native run"
    else line+=", DIFFERS from this machine's native run"; fi
  fi
  echo "$line" >> "$tests"
  # Passing: identical to the checked-in reference, or (on a GPU machine other than the one the
  # references were captured on, e.g. another UUID) to this machine's native run.
  if [ "$r" = 0 ] && { { [ -f "$exp" ] && cmp -s "$exp" "$tdir/$name.out"; } ||
                       { [ -s "$native" ] && cmp -s "$native" "$tdir/$name.out"; }; }; then
    nok=$((nok + 1))
  else nbad=$((nbad + 1)); fi
  if [ -f "$exp" ] && ! cmp -s "$exp" "$tdir/$name.out"; then
    echo "--- diff expected/$name.out (-) vs VM (+):" >> "$tests"
    diff -u "$exp" "$tdir/$name.out" | head -n 60 >> "$tests"
  fi
  if [ -s "$native" ] && ! cmp -s "$native" "$tdir/$name.out"; then
    echo "--- diff native run here (-) vs VM (+):" >> "$tests"
    diff -u "$native" "$tdir/$name.out" | head -n 60 >> "$tests"
  fi
  if [ "$r" != 0 ] || [ -s "$tdir/$name.err" ]; then
    echo "--- $name stderr in the VM:" >> "$tests"; head -n 20 "$tdir/$name.err" >> "$tests"
  fi
done
say "tests: $nok of ${#progs[@]} identical to the expected output with rc 0, $nbad not"
cat "$tests" >&2

# ---- 3. the benchmark ------------------------------------------------------------------------------
quick=${GVC_QUICK:-auto}
if [ "$quick" = auto ]; then if [ "$accel" = tcg ]; then quick=1; else quick=0; fi; fi
qarg=(); [ "$quick" = 1 ] && qarg=(--quick)
raw="$out/bench-raw.txt"
: > "$raw"
bench_native() { # FILE ARGS...
  local f=$1; shift
  if [ $test_stub = 1 ]; then : > "$f"; return 0; fi
  timeout "$(cap 120 60)" "$gpu/runtime_bench" "$@" > "$f" 2> "$f.err" || say "native runtime_bench $*: rc $? ($(tail -n 3 "$f.err"))"
}
bench_local() { # FILE ARGS...
  local f=$1; shift
  local sockdir; sockdir=$(mktemp -d)
  VMCUDA_STUB="$stub" VMCUDA_LIBDIR="$gpu/lib" VMCUDA_SOCKET="$sockdir/local.sock" \
    timeout "$(cap 120 60)" "$gpu/vmcuda-run" -- "$gpu/runtime_bench" "$@" > "$f" 2> "$f.err" \
    || say "local runtime_bench $*: rc $? ($(tail -n 3 "$f.err"))"
  rm -rf "$sockdir"
}
say "bench: native, local transport (full${qarg[*]+ and --quick})"
bench_native "$work/b.native.full"
bench_local "$work/b.local.full"
if [ "$quick" = 1 ]; then
  bench_native "$work/b.native" --quick
  bench_local "$work/b.local" --quick
else
  cp "$work/b.native.full" "$work/b.native"; cp "$work/b.local.full" "$work/b.local"
fi
bt=${GVC_BENCH_TIMEOUT:-150}
say "bench: VM ($accel, ${qarg[*]:-full}), guest-lib spinning (default)"
left=$((DEADLINE - $(date +%s) - 5))
t=$(cap "$bt" $((left / 2)))
say "bench: VM timeout ${t}s"
rc=0; vmrun "$accel" "$t" "$work/bench-spin" -- runtime_bench ${qarg[@]+"${qarg[@]}"} || rc=$?
cp "$work/bench-spin/stdout" "$work/b.vmspin" 2>/dev/null
[ $rc = 0 ] || { say "bench: VM spinning run exit $rc"; tail -n 20 "$work/bench-spin/stderr" | sed 's/^/  ! /' >> "$summary"; }
say "bench: VM ($accel, ${qarg[*]:-full}), vmcuda.spin_ns=0 (replies wake the guest by MSI-X)"
t=$(cap "$bt" 5)
say "bench: VM timeout ${t}s"
rc=0; vmrun "$accel" "$t" "$work/bench-msix" --append vmcuda.spin_ns=0 -- runtime_bench ${qarg[@]+"${qarg[@]}"} || rc=$?
cp "$work/bench-msix/stdout" "$work/b.vmmsix" 2>/dev/null
[ $rc = 0 ] || { say "bench: VM MSI-X run exit $rc"; tail -n 20 "$work/bench-msix/stderr" | sed 's/^/  ! /' >> "$summary"; }
grep -a 'VMRPC_GUEST_SPIN_NS\|spin_ns' "$work/bench-msix/console.log" 2>/dev/null | head -n 3 >> "$summary"
{ tr -d '\r' < "$work/bench-spin/console.log"; echo "======== spin_ns=0 run"; tr -d '\r' < "$work/bench-msix/console.log"; } \
  2>/dev/null | grep -av '^[A-Za-z0-9+/=]*$' > "$out/console-bench.log"
{ echo "======== VM runs' stub logs"; cat "$work/bench-spin/stub.log" "$work/bench-msix/stub.log" 2>/dev/null; } >> "$out/stub-vm.log"
for f in native.full local.full native local vmspin vmmsix; do
  echo "==== $f"; cat "$work/b.$f" 2>/dev/null; cat "$work/b.$f.err" 2>/dev/null
done > "$raw"
python3 - "$work" "$accel" "${qarg[*]:-full}" > "$out/bench.table.md" <<'PY'
import math, sys
work, accel, mode = sys.argv[1:4]
def load(name):
    d = {}
    try:
        for line in open(f"{work}/b.{name}"):
            p = line.split()
            if len(p) == 3:
                d[p[0]] = (float(p[1]), p[2])
    except OSError:
        pass
    return d
cols = [("native", load("native")), ("local transport", load("local")),
        (f"VM {accel} spinning", load("vmspin")), (f"VM {accel} MSI-X sleep", load("vmmsix"))]
keys = []
for _, d in cols:
    for k in d:
        if k not in keys:
            keys.append(k)
print(f"runtime_bench ({mode}); VM = QEMU {accel}")
print()
print("| figure | " + " | ".join(c for c, _ in cols) + " |")
print("|---|" + "---|" * len(cols))
for k in keys:
    cells = []
    for _, d in cols:
        v = d.get(k)
        cells.append(f"{v[0]:g} {v[1]}" if v else "-")
    print(f"| {k} | " + " | ".join(cells) + " |")
PY
cat "$out/bench.table.md" >&2
say "done in $(( $(date +%s) - T0 ))s; accelerator $accel"
rm -rf "$work"
[ $nbad = 0 ]
