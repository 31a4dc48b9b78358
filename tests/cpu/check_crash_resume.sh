#!/usr/bin/env bash
# Crash safety and exact resume with real signals (docs/operations.md). Each scenario interrupts a
# CPU training run that writes checkpoints every 3 steps, resumes it with -y 1, and requires the
# resumed main.log and final model to be byte-identical to an uninterrupted run's:
#  (A) SIGKILL at a random moment after checkpoint 6 exists           (-sh 0)
#  (B) SIGKILL while a checkpoint file is written (test hook pauses    (-sh 1, outlier skipping on,
#      between the complete .tmp and its rename)                         so its window is resumed too)
#  (C) SIGTERM: exit 0 with a checkpoint at the step it stopped before  (-sh 1)
#  (D) SIGINT twice during a checkpoint write: exits at once (130), the (-sh 0)
#      half-written checkpoint is never trusted
# (B) and (C) are tests/lib/crash_scenarios.sh's, which tests/emu/check_emu_crash_resume.sh runs
# through the CUDA trainer on the emulated GPU too.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/crash_scenarios.sh
source "$(dirname "$0")/../lib/crash_scenarios.sh"
trainer=./train_gpt2
final=45

tests_python <<'PY'
import random, sys
from token_shards import learnable_stream, write_split
random.seed(2)
write_split(sys.argv[1], 2, 900, 200, lambda n: learnable_stream(n, 5, 1, 0.8))
PY

seed=${CRASH_SEED:-$RANDOM}
RANDOM=$seed
echo "random kill points from seed $seed (rerun with CRASH_SEED=$seed)"
base=(-i "$tmp/train_*.bin" -j "$tmp/val_0.bin" -e L1H2C16T32 -b 2 -t 16 -x "$final" -l 3e-3 -u 3 -q 0.1
      -v 5 -m 2 -s 0 -n 3)

sh0=("${base[@]}" -sh 0)
sh1=("${base[@]}" -sh 1 -sl 1.0 -sg 0.5)
"$trainer" "${sh0[@]}" -o "$tmp/ref0" >/dev/null
"$trainer" "${sh1[@]}" -o "$tmp/ref1" >/dev/null
skipped=$(grep -c 'skipped:1' "$tmp/ref1/main.log" || true)
[ "$skipped" -gt 0 ] || fail "-sl 1.0 -sg 0.5 skipped no step: the resumed outlier window would go untested"

# (A) SIGKILL at a random moment. Each checkpoint file waits 30 ms before its rename, so the 13
# checkpoints after step 6 keep the run alive for over a second: a loaded machine that notices
# DONE_00000006 late still kills a running process, not a finished one.
LLMC_TEST_PAUSE_BEFORE_RENAME_MS=30 "$trainer" "${sh0[@]}" -o "$tmp/A" >"$tmp/A.out" 2>&1 &
pid=$!
wait_for 30 has_file "$tmp/A/DONE_00000006" || fail "A: no checkpoint 6 appeared"
sleep "0.$((RANDOM % 10))"  # 0 to 0.9 s
kill -9 "$pid"
rc=0; wait "$pid" || rc=$?
[ "$rc" = 137 ] || fail "A: the run was not killed (exit $rc): it finished too early"
echo "A: killed after $(grep -c trl: "$tmp/A/main.log") logged steps, checkpoints: $(ls "$tmp/A" | grep -c DONE_)"
resume "$tmp/A" "${sh0[@]}"
same_as_reference A "$tmp/ref0" "$tmp/A"

# (B) SIGKILL in the middle of a checkpoint write.
kill_in_checkpoint B "$tmp/ref1" "${sh1[@]}"

# (C) SIGTERM: finish the step, checkpoint, exit 0.
sigterm_resume C "$tmp/ref1" "${sh1[@]}"

# (D) Two SIGINTs while a checkpoint is being written: immediate exit 130, nothing promoted.
LLMC_TEST_PAUSE_BEFORE_RENAME_MS=400 "$trainer" "${sh0[@]}" -o "$tmp/D" >"$tmp/D.out" 2>&1 &
pid=$!
wait_for 30 has_file "$tmp/D/DONE_00000003" || fail "D: no checkpoint 3 appeared"
wait_for 30 has_file "$tmp/D/model_0000000[6-9].bin.tmp" || fail "D: no model .tmp"
kill -INT "$pid"
sleep 0.05
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
[ "$rc" = 130 ] || fail "D: a second SIGINT should exit 130 at once, got $rc"
grep -q 'second signal' "$tmp/D.out" || fail "D: no message for the second signal"
for done in "$tmp"/D/DONE_*; do
  s=${done##*DONE_}
  [ -e "$tmp/D/model_$s.bin" ] && [ -e "$tmp/D/state_${s}_00000.bin" ] || fail "D: $done without its files"
done
resume "$tmp/D" "${sh0[@]}"
same_as_reference D "$tmp/ref0" "$tmp/D"

exit_if_failed
echo "SIGKILL (anywhere, mid-checkpoint), SIGTERM and double SIGINT: 4 resumed runs identical to uninterrupted ($skipped skipped steps resumed)"
