#!/usr/bin/env bash
# scripts/run_gpt2_124M.sh's restart loop (llm.c's), with the CPU trainer as TRAINER, one process
# (LAUNCHER=none), a tiny model and tiny shards given as extra flags (which override the recipe's):
#  - a run whose first trainer process is killed mid-way (SIGKILL after checkpoint 3, while it is
#    stalled at step 5 by LLMC_TEST_STALL_AT_STEP) is restarted with the same -y 1 command, resumes,
#    ends with DONE_<-x>, and its main.log is byte-identical to an uninterrupted run's;
#  - a finished run is not started again; a trainer that fails at once stops the loop after 3 fast
#    failures, MAX_RESTARTS bounds the restarts, and a run that ends with status 0 before the marker
#    (stopped on purpose) is not restarted, each with a message saying so.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"

tests_python <<'PY'
import random, sys
from token_shards import learnable_stream, write_shard
random.seed(3)
d = sys.argv[1]
write_shard(f"{d}/fineweb_train_000001.bin", learnable_stream(1500, 5, 1, 0.8))
write_shard(f"{d}/fineweb_val_000000.bin", learnable_stream(400, 5, 1, 0.8))
PY

steps=8
tiny=(-e L1H2C16T32 -b 2 -t 16 -d 32 -x "$steps" -n 3 -v 4 -m 2 -s 0)
recipe() {  # recipe <out dir> <trainer> [env...]: the script with the tiny flags; output in <out dir>.txt
  local out=$1 trainer=$2; shift 2
  env LAUNCHER=none NUM_GPUS=1 HELLASWAG=0 DATA_DIR="$tmp" OUT_DIR="$out" TRAINER="$trainer" "$@" \
    bash scripts/run_gpt2_124M.sh "${tiny[@]}" >"$out.txt" 2>&1
}
done_marker=DONE_0000000$steps

# The uninterrupted run, through the same script.
recipe "$tmp/ref" ./train_gpt2 || fail "uninterrupted run: exit $?: $(tail -n 3 "$tmp/ref.txt")"
[ -e "$tmp/ref/$done_marker" ] || fail "uninterrupted run: no $done_marker"
grep -q "resume: no checkpoint in $tmp/ref .*starting from step 0" "$tmp/ref.txt" ||
  fail "the first -y 1 run did not say that it starts from step 0"
[ "$(grep -c trl: "$tmp/ref/main.log")" = "$steps" ] || fail "uninterrupted run: not $steps steps in main.log"

# TRAINER for the crash: each call appends its arguments to calls.txt; the first stalls at step 5
# and is killed with SIGKILL once checkpoint 3 is complete (a node dying mid-run), later calls are
# the plain trainer.
cat >"$tmp/crashing_trainer.sh" <<EOF
#!/usr/bin/env bash
echo "\$*" >>"$tmp/calls.txt"
[ "\$(wc -l <"$tmp/calls.txt")" -eq 1 ] || exec ./train_gpt2 "\$@"
LLMC_TEST_STALL_AT_STEP=5 ./train_gpt2 "\$@" &
pid=\$!
for _ in \$(seq 1500); do [ -e "$tmp/crash/DONE_00000003" ] && break; sleep 0.02; done
kill -9 "\$pid"
wait "\$pid"
EOF
chmod +x "$tmp/crashing_trainer.sh"
recipe "$tmp/crash" "$tmp/crashing_trainer.sh" || fail "crashed run: exit $?: $(tail -n 3 "$tmp/crash.txt")"
[ "$(wc -l <"$tmp/calls.txt")" = 2 ] || fail "the trainer ran $(wc -l <"$tmp/calls.txt") times, expected 2 (one kill, one restart)"
grep -q "the trainer failed (status 137) before $tmp/crash/$done_marker existed: restart 1 of at most 20, with -y 1" \
  "$tmp/crash.txt" || fail "no restart message: $(tail -n 5 "$tmp/crash.txt")"
while read -r call; do
  [[ " $call " == *" -y 1 "* ]] || fail "a run without -y 1: $call"
  [[ " $call " == *" -x $steps "* ]] || fail "the extra flags did not reach the trainer: $call"
done <"$tmp/calls.txt"
grep -q "resume: continuing from checkpoint step 3" "$tmp/crash.txt" || fail "the restarted run did not resume from step 3"
[ -e "$tmp/crash/$done_marker" ] || fail "crashed run: no $done_marker after the restart"
cmp -s "$tmp/ref/main.log" "$tmp/crash/main.log" || {
  fail "the restarted run's main.log differs from the uninterrupted run's"
  diff "$tmp/ref/main.log" "$tmp/crash/main.log" | head -5 || true
}
grep -q "$tmp/crash/$done_marker exists: the run is complete" "$tmp/crash.txt" || fail "no completion message"

# A finished run: the script sees the marker and starts nothing.
recipe "$tmp/crash" "$tmp/crashing_trainer.sh" || fail "finished run: exit $?"
[ "$(wc -l <"$tmp/calls.txt")" = 2 ] || fail "a finished run was started again"

# A trainer that fails at once: three fast failures stop the loop; MAX_RESTARTS=0 stops it at the first.
printf '#!/usr/bin/env bash\necho run >>"%s"\nexit 1\n' "$tmp/fails.txt" >"$tmp/failing_trainer.sh"
chmod +x "$tmp/failing_trainer.sh"
rc=0; recipe "$tmp/fast" "$tmp/failing_trainer.sh" || rc=$?
[ "$rc" = 1 ] || fail "fast failures: exit $rc, expected 1"
[ "$(wc -l <"$tmp/fails.txt")" = 3 ] || fail "fast failures: the trainer ran $(wc -l <"$tmp/fails.txt") times, expected 3"
grep -q "error: the trainer failed 3 times in a row, each within FAST_FAIL_SECONDS=60 s" "$tmp/fast.txt" ||
  fail "no fast-failure message: $(tail -n 2 "$tmp/fast.txt")"
rm "$tmp/fails.txt"
rc=0; recipe "$tmp/bounded" "$tmp/failing_trainer.sh" MAX_RESTARTS=0 || rc=$?
if [ "$rc" != 1 ] || [ "$(wc -l <"$tmp/fails.txt")" != 1 ]; then
  fail "MAX_RESTARTS=0: exit $rc after $(wc -l <"$tmp/fails.txt") runs, expected exit 1 after 1"
fi
grep -q "error: the trainer failed (status 1) after 0 restart(s), MAX_RESTARTS=0: giving up" "$tmp/bounded.txt" ||
  fail "no MAX_RESTARTS message: $(tail -n 2 "$tmp/bounded.txt")"

# Status 0 without the marker (a run stopped by SIGTERM): not restarted.
printf '#!/usr/bin/env bash\necho run >>"%s"\n' "$tmp/stops.txt" >"$tmp/stopping_trainer.sh"
chmod +x "$tmp/stopping_trainer.sh"
recipe "$tmp/stopped" "$tmp/stopping_trainer.sh" || fail "stopped run: exit $?"
[ "$(wc -l <"$tmp/stops.txt")" = 1 ] || fail "a run that ended with status 0 was restarted"
grep -q "stopped by SIGINT or SIGTERM, after a checkpoint; run this script again" "$tmp/stopped.txt" ||
  fail "no message for a stopped run"

# What the loop needs: a step count, checkpoints and -y 1.
for bad in "-x -1:-x -1: the restart loop waits" "-n 0:-n 0: the restart loop resumes from checkpoints" \
           "-y 0:-y 0: the restart loop resumes with -y 1"; do
  rc=0
  # shellcheck disable=SC2086  # the flag and its value, split on purpose
  env LAUNCHER=none NUM_GPUS=1 HELLASWAG=0 DATA_DIR="$tmp" TRAINER=./train_gpt2 \
    bash scripts/run_gpt2_124M.sh ${bad%%:*} >"$tmp/bad.txt" 2>&1 || rc=$?
  if [ "$rc" != 1 ] || ! grep -qF -- "error: ${bad#*:}" "$tmp/bad.txt"; then
    fail "${bad%%:*}: exit $rc, $(cat "$tmp/bad.txt")"
  fi
done

exit_if_failed
echo "recipe loop: killed run restarted with -y 1, resumed from step 3, $done_marker and main.log as uninterrupted; finished, failing, bounded and stopped runs handled"
