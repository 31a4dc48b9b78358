# shellcheck shell=bash
# Every kernel family's dev/cuda checks at small shapes on the emulated GPU, as one build runs them;
# sourced by tests/emu/check_emu.sh and tests/quick.sh, whose `fail` it calls.
#   emu_kernel_checks SANITIZER PRECISION SEED LOGDIR
# Builds the benchmarks (make emu-benches, EMU_JOBS jobs), runs each `all --check --small` with
# LLMC_EMU_SEED=SEED (the order of blocks and warps), its output in
# LOGDIR/<sanitizer>-<precision>-<family>.log; a family passes with exit 0, no FAIL line and at
# least one PASS. Adds the PASS lines to $kernel_checks; returns non-zero if the build failed.
emu_kernel_checks() {
  local san=$1 precision=$2 seed=$3 logdir=$4 prec out bench log rc passes fails
  prec=$(tr 'A-Z' 'a-z' <<<"$precision")
  if ! out=$(make --no-print-directory -j"${EMU_JOBS:-2}" CUDA_HOME="$cuda_home" EMU_SANITIZER="$san" PRECISION="$precision" \
    emu-benches 2>&1); then
    fail "build of emu-benches ($san, $precision)"
    tail -n 30 <<<"$out" | sed 's/^/      /'
    return 1
  fi
  for bench in $(make --no-print-directory -s print-emu-benches EMU_SANITIZER="$san"); do
    log="$logdir/$san-$prec-$bench.log"
    rc=0
    LLMC_EMU_SEED=$seed "build/emu-$san/$prec/$bench" all --check --small >"$log" 2>&1 || rc=$?
    passes=$(grep -c '^PASS' "$log")
    fails=$(grep -c '^FAIL' "$log")
    kernel_checks=$((kernel_checks + passes))
    if [ "$rc" -ne 0 ] || [ "$fails" -ne 0 ] || [ "$passes" -eq 0 ]; then
      fail "$san $prec $bench: exit $rc, $passes passed, $fails failed (log: $log)"
      grep -E -m 10 '^FAIL|ERROR|WARNING|emulated GPU' "$log" | sed 's/^/      /'
    else
      echo "ok    $san $prec $bench: $passes checks"
    fi
  done
}
