#!/usr/bin/env bash
# --step-timeout (llmc/train/watchdog.h, docs/operations.md "Hangs"), on a tiny model (2 layers,
# vocabulary 1000, tests/lib/tiny_model_and_shards.py):
#  1. two CPU ranks, one of them SIGSTOPped while training: every process of the job (both ranks
#     and mpirun) is gone within the timeout plus a few seconds, mpirun's status is the watchdog's
#     (3), and the surviving rank's message names --step-timeout and where it waited (phase "step",
#     the step, the collective). Its watchdog calls MPI_Abort from its own thread while the main
#     thread waits in MPI_Allreduce or MPI_Waitall: this is also the check of that
#     (llmc/dist/process_group.cpp);
#  2. one process stalled inside a step (test hook LLMC_TEST_STALL_AT_STEP): it exits with status 3
#     within the timeout plus a few seconds, naming the step;
#  3. a healthy run of 800 steps with --step-timeout 1 is never stopped (it lasts about two
#     timeouts here; the unit test "no firing while beats keep coming" covers several): the timeout
#     bounds the time between two signs of progress, not the run.
# The only timing asserted is "gone within the timeout + 12 s", slack for a loaded 2-core machine.
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
SLACK=12

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 5 --first-token 17 \
  val_000000.bin:200 train_000001.bin:20000 >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 16 -v 0 -s 0)

# shellcheck source-path=SCRIPTDIR source=../lib/tracked_processes.sh
source "$(dirname "$0")/../lib/tracked_processes.sh"

# wait_gone SECONDS PID...: waits until none of the processes runs; fails after SECONDS.
wait_gone() {
  local limit=$1; shift
  local start=$SECONDS pid alive
  while :; do
    alive=()
    for pid in "$@"; do running "$pid" && alive+=("$pid"); done
    [ "${#alive[@]}" -eq 0 ] && return 0
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "still running after ${limit}s: ${alive[*]}"
      return 1
    fi
    sleep 0.2
  done
}

# --- 1. two ranks, one stopped --------------------------------------------------------------------
timeout=3
out=$tmp/stop.out
"${MPIRUN[@]}" -np 2 ./train_gpt2 "${flags[@]}" -x 1000000 --step-timeout "$timeout" >"$out" 2>&1 &
launcher=$!
pids+=("$launcher")
wait_for_ranks "$launcher" train_gpt2 5 "$out" 300
pids+=("${ranks[@]}")
[ "${#ranks[@]}" -eq 2 ] && grep -q "^step  *5/" "$out" || { cat "$out"; fail "the 2-rank run did not start training"; }
stopped=$(rank_pid 1 "${ranks[@]}")
[ -n "$stopped" ] || fail "no rank 1 among ${ranks[*]}"
if [ -n "$stopped" ]; then
  kill -STOP "$stopped"
  start=$SECONDS
  if wait_gone $((timeout + SLACK)) "$launcher" "${ranks[@]}"; then
    echo "job gone $((SECONDS - start))s after SIGSTOP of rank 1 (--step-timeout $timeout)"
  else
    fail "the job outlived --step-timeout $timeout by ${SLACK}s"
    # A watchdog that never fires leaves rank 1 stopped and mpirun waiting for it: end the job
    # here, or the `wait` below would hang the check instead of failing it.
    cleanup
  fi
  set +e
  wait "$launcher"
  rc=$?
  set -e
  [ "$rc" -eq 3 ] || fail "mpirun exited with $rc, not the watchdog's 3"
  message=$(grep "^error: rank 0: " "$out" || true)
  echo "message: $message"
  want='^error: rank 0: no progress for [0-9.]+ s \(--step-timeout 3 s\): phase "step", step [0-9]+, waiting in (all_reduce_sum|all_reduce_max|wait_all \(the gradient buckets. sums\))'
  grep -Eq "$want" <<<"$message" || { cat "$out"; fail "rank 0's message does not say where it waited"; }
fi

# --- 2. one process stalled inside a step -------------------------------------------------------
timeout=2
start=$SECONDS
set +e
LLMC_TEST_STALL_AT_STEP=3 timeout $((timeout + SLACK)) ./train_gpt2 "${flags[@]}" -x 10 --step-timeout "$timeout" \
  >"$tmp/stall.out" 2>&1
rc=$?
set -e
echo "stalled process: exit status $rc after $((SECONDS - start))s (--step-timeout $timeout)"
[ "$rc" -ne 124 ] || fail "the stalled process outlived --step-timeout $timeout by ${SLACK}s"
[ "$rc" -eq 3 ] || { cat "$tmp/stall.out"; fail "the stalled process exited with $rc, not 3"; }
want='^error: no progress for [0-9.]+ s \(--step-timeout 2 s\): phase "step", step 3, outside any collective or backend call; ending the job$'
grep -Eq "$want" "$tmp/stall.out" || { cat "$tmp/stall.out"; fail "the stalled process's message"; }
grep -q "^step  *2/10" "$tmp/stall.out" || fail "the steps before the stall did not run"

# --- 3. a healthy run longer than the timeout -----------------------------------------------------
start=$SECONDS
./train_gpt2 "${flags[@]}" -x 800 --step-timeout 1 >"$tmp/healthy.out" 2>&1 || { cat "$tmp/healthy.out"; fail "healthy run"; }
grep -q "^done: 800 steps" "$tmp/healthy.out" || fail "the healthy run did not finish"
echo "healthy run of $((SECONDS - start))s with --step-timeout 1: finished"

exit_if_failed
echo "watchdog: a SIGSTOPped rank's job and a stalled process ended with status 3 and where they waited; a healthy run kept going"
