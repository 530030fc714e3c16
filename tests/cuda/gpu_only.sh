# Sourced by the scripts that compare a CUDA test program's output with its native reference
# (tests/cuda/expected/NAME.out). Lines marked [GPU only] hold what only NVIDIA's libraries make
# (cuRAND's sequences): the test executor's fakes make other numbers, so against the test stub
# those lines are left out of the comparison; against the real vmcuda-stub (scripts/gpu-check.sh)
# every line counts.
#   comparable FILE STUB: FILE as it is compared for a run on STUB (stdout)
comparable() {
  case "$(basename "$2")" in
    vmcuda-test-stub) grep -v '\[GPU only\]' "$1" || true ;;
    *) cat "$1" ;;
  esac
}
