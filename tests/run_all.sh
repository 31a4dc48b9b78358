#!/usr/bin/env bash
# `make test`: runs every tests/check_*.sh (the doctest unit tests run in check_sanitize.sh, built
# with AddressSanitizer and UndefinedBehaviorSanitizer), one line per check, and ends
# with "N passed, N failed, N skipped". A check that exits 77 could not run here (e.g. no CUDA
# toolkit) and says why on its last line; it counts as skipped, never as passed. Each check's full
# output goes to build/test-logs/<check>.log; a failing check's tail is printed so CI logs show why.
set -u
cd "$(dirname "$0")/.."
# A calling `make -j` (make test) does not hand the checks its jobserver: without its MAKEFLAGS the
# checks' own makes run their own -j (or none) and do not warn "jobserver unavailable", a warning
# that check_cuda_build.sh would count as the build's.
unset MAKEFLAGS MFLAGS MAKELEVEL
logs=build/test-logs
mkdir -p "$logs"
passed=0; failed=0; skipped=0

run_check() {
  local name=$1; shift
  local log="$logs/$name.log"
  local start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    printf 'PASS  %-34s %4ss  %s\n' "$name" $((SECONDS - start)) "$(tail -n 1 "$log" | cut -c1-100)"
  elif [ "$rc" -eq 77 ]; then
    skipped=$((skipped + 1))
    printf 'SKIP  %-34s %4ss  %s\n' "$name" $((SECONDS - start)) "$(tail -n 1 "$log" | cut -c1-100)"
  else
    failed=$((failed + 1))
    printf 'FAIL  %-34s %4ss  (log: %s)\n' "$name" $((SECONDS - start)) "$log"
    tail -n 25 "$log" | sed 's/^/      | /'
  fi
}

# Two lanes. The CUDA compile check is the longest (minutes of nvcc) and shares no files with the
# others: it runs beside them from the start, one compiler at a time, on the core that the
# single-threaded checks leave idle (check_sanitize's two-job build competes with it for a while).
# After it, on that core, come checks that build nothing (their make is a no-op after `make test`'s
# own build) and whose assertions hold under any load: no timeouts, signals or timings. The other
# lane runs the rest in name order. The background lane's lines are printed last.
background=(cuda_build tokenizer_parity cpu_parity train_reference interop shard tokenizer_fuzz plot scaling
  flag_docs bad_inputs train_cpu)
for name in "${background[@]}"; do
  [ -e "tests/check_$name.sh" ] || { echo "tests/run_all.sh: no tests/check_$name.sh for the background lane"; exit 1; }
done
(
  for name in "${background[@]}"; do
    if [ "$name" = cuda_build ]; then run_check "$name" env CUDA_BUILD_JOBS=1 bash "tests/check_$name.sh"
    else run_check "$name" bash "tests/check_$name.sh"; fi
  done
) >"$logs/background.txt" &
background_pid=$!

for check in tests/check_*.sh; do
  [ -e "$check" ] || continue
  name=$(basename "$check" .sh)
  name=${name#check_}
  [[ " ${background[*]} " == *" $name "* ]] && continue
  run_check "$name" bash "$check"
done
# The background lane ran in a subshell: its lines and verdicts come back through the file.
wait "$background_pid"
cat "$logs/background.txt"
passed=$((passed + $(grep -c '^PASS' "$logs/background.txt")))
skipped=$((skipped + $(grep -c '^SKIP' "$logs/background.txt")))
background_failed=$(grep -c '^FAIL' "$logs/background.txt")
[ "$(grep -c -E '^(PASS|SKIP|FAIL)  ' "$logs/background.txt")" -eq "${#background[@]}" ] || background_failed=$((background_failed + 1))
failed=$((failed + background_failed))

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
