#!/usr/bin/env bash
# `make test`: runs every tests/<area>/check_*.sh (area: cpu, dist, emu, gpu, text, tools: what they
# test; the doctest unit tests run in cpu/check_sanitize.sh, built with AddressSanitizer and
# UndefinedBehaviorSanitizer), one line per check as it ends, and ends with "N passed, N failed,
# N skipped". A check that exits 77 could not run here (e.g. no CUDA toolkit) and says why on its
# last line; it counts as skipped, never as passed. Each check's full output goes to
# build/test-logs/<check>.log; a failing check's tail is printed so CI logs show why.
#
# TEST_JOBS checks (default 2, one per core of the machine CI runs on) run side by side, the longest
# first; the checks that mostly wait (for watchdogs, signals and timeouts: a third of their time on
# a core or less) run one after another beside them, outside that count. Their makes take turns
# (tests/lib/make_lock/make), so that an object two checks need is built once; each line gives the
# check's seconds in all, in make (build) and after (run), and the CPU seconds it used. TEST_AREAS
# (default every area) runs only the areas it names: make test-cpu, test-dist, ... (the Makefile).
set -u
cd "$(dirname "$0")/.."
# A calling `make -j` (make test) does not hand the checks its jobserver: without its MAKEFLAGS the
# checks' own makes run their own -j (or none) and do not warn "jobserver unavailable", a warning
# that check_cuda_build.sh would count as the build's.
unset MAKEFLAGS MFLAGS MAKELEVEL
logs=build/test-logs
mkdir -p "$logs"
jobs=${TEST_JOBS:-2}
areas=${TEST_AREAS:-cpu dist emu gpu text tools}
RUN_ALL_MAKE=$(command -v make) || { echo "error: no make on PATH"; exit 1; }
export RUN_ALL_MAKE RUN_ALL_MAKE_LOCK=$PWD/build/.make.lock PATH=$PWD/tests/lib/make_lock:$PATH

# The waiting checks start at once; then the checks that take longest on a fresh clone
# (docs/testing.md has the times), so that the short ones fill the other core while they run; the
# rest follow in area order.
waiting="gpu_reliability gpu_session watchdog nompi recipe_loop"
longest_first="$waiting cuda_build emu_trainer emu gpu_dist sanitize emu_gpu_build nompi_emu emu_ranks"
checks=()
for name in $longest_first; do
  for check in tests/*/check_"$name".sh; do
    [ -e "$check" ] && checks+=("$check")
  done
done
for check in tests/*/check_*.sh; do
  [ -e "$check" ] || continue
  [[ " $longest_first " == *" $(basename "$check" .sh | cut -c7-) "* ]] || checks+=("$check")
done

run_check() {  # run_check NAME SCRIPT: runs it, prints its line, leaves its verdict in $logs/NAME.verdict
  local name=$1 script=$2
  local log="$logs/$name.log" builds="$logs/$name.builds" times="$logs/$name.times"
  : >"$builds"
  local TIMEFORMAT='%R %U %S' rc
  { time RUN_ALL_BUILD_SECONDS=$PWD/$builds bash "$script" >"$log" 2>&1; } 2>"$times"
  rc=$?
  local wall cpu build
  read -r wall user sys <"$times"
  wall=${wall%.*}
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%d", u + s }')
  build=$(awk '{ s += $2 - $1 } END { printf "%d", s }' "$builds")
  local figures
  figures=$(printf '%4ss (build %4s, run %4s, cpu %4s)' "$wall" "$build" $((wall - build)) "$cpu")
  if [ "$rc" -eq 0 ]; then
    echo pass >"$logs/$name.verdict"
    printf 'PASS  %-18s %s  %s\n' "$name" "$figures" "$(tail -n 1 "$log" | cut -c1-90)"
  elif [ "$rc" -eq 77 ]; then
    echo skip >"$logs/$name.verdict"
    printf 'SKIP  %-18s %s  %s\n' "$name" "$figures" "$(tail -n 1 "$log" | cut -c1-90)"
  else
    echo fail >"$logs/$name.verdict"
    # One write, so that the tail is not interleaved with another check's line.
    printf 'FAIL  %-18s %s  (log: %s)\n%s\n' "$name" "$figures" "$log" "$(tail -n 25 "$log" | sed 's/^/      | /')"
  fi
}

start=$SECONDS
names=()
selected=()
waiting_selected=()
for check in "${checks[@]}"; do
  area=$(basename "$(dirname "$check")")
  [[ " $areas " == *" $area "* ]] || continue
  name=$(basename "$check" .sh)
  name=${name#check_}
  names+=("$name")
  rm -f "$logs/$name.verdict"
  if [[ " $waiting " == *" $name "* ]]; then waiting_selected+=("$check"); else selected+=("$check"); fi
done
# The waiting checks one after another (the first two run scripts/gpu_session.sh, whose logs folder
# is one per checkout), beside the TEST_JOBS lanes.
waiting_lane=""
if [ "${#waiting_selected[@]}" -gt 0 ]; then
  (for check in "${waiting_selected[@]}"; do
    name=$(basename "$check" .sh)
    run_check "${name#check_}" "$check"
  done) &
  waiting_lane=$!
fi
for check in "${selected[@]}"; do
  name=$(basename "$check" .sh)
  while [ "$(jobs -rp | grep -cvx "$waiting_lane")" -ge "$jobs" ]; do wait -n; done
  run_check "${name#check_}" "$check" &
done
wait

passed=0; failed=0; skipped=0
for name in "${names[@]}"; do
  case $(cat "$logs/$name.verdict" 2>/dev/null) in
    pass) passed=$((passed + 1)) ;;
    skip) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done
echo "$passed passed, $failed failed, $skipped skipped in $((SECONDS - start))s ($jobs side by side)"
[ "$failed" -eq 0 ]
