#!/usr/bin/env bash
# `make test`: runs every tests/<area>/check_*.sh, area by area (cpu, dist, emu, gpu, text, tools: what
# they test; the doctest unit tests run in cpu/check_sanitize.sh, built with AddressSanitizer and
# UndefinedBehaviorSanitizer), one line per check, and ends with "N passed, N failed, N skipped". A
# check that exits 77 could not run here (e.g. no CUDA toolkit) and says why on its last line; it
# counts as skipped, never as passed. Each check's full output goes to build/test-logs/<check>.log; a
# failing check's tail is printed so CI logs show why.
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

# The CUDA compile check is the longest (minutes of nvcc) and shares no files with the others: it
# runs beside them from the start, one compiler at a time, on the core that the single-threaded
# checks leave idle (check_sanitize's two-job build competes with it for a while). Its line is
# printed last.
background_check=cuda_build
run_check "$background_check" env CUDA_BUILD_JOBS=1 bash "tests/gpu/check_$background_check.sh" \
  >"$logs/background.txt" &
background_pid=$!

for check in tests/*/check_*.sh; do
  [ -e "$check" ] || continue
  name=$(basename "$check" .sh)
  [ "${name#check_}" = "$background_check" ] && continue
  run_check "${name#check_}" bash "$check"
done
# run_check ran in a subshell there: its line and its verdict come back through the file.
wait "$background_pid"
cat "$logs/background.txt"
case $(head -c 4 "$logs/background.txt") in
  PASS) passed=$((passed + 1)) ;;
  SKIP) skipped=$((skipped + 1)) ;;
  *) failed=$((failed + 1)) ;;
esac

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
