#!/usr/bin/env bash
# The CPU trainer end to end, on a tiny model and tiny generated shards under build/tmp:
#  (b) a real run: the train loss falls, main.log has the documented format and steps;
#  (c) a run resumed from a checkpoint writes a main.log identical to the uninterrupted run's,
#      with shuffling off and on (bit-identical losses: the lines are compared as text);
#  (d) -h 1: HellaSwag accuracy logged at the -v cadence and at the end, on an eval file whose
#      answers are known: every example's completions are identical, so the tie rule (lowest
#      index wins) predicts completion 0, and exactly the examples labelled 0 are right;
#  (e) -sg: skipped updates are logged with skipped:1 after the llm.c keys, and they do skip.
# Bad inputs: tests/cpu/check_bad_inputs.sh; signals and SIGKILL: tests/cpu/check_crash_resume.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"

# Shards of a learnable token stream: tokens 0..63 that mostly follow t -> (7t+3) mod 64.
tests_python <<'EOF'
import random, sys
from token_shards import learnable_stream, write_split
from hellaswag_to_evalfile import write_evalfile
d = sys.argv[1]
random.seed(1)
write_split(d, 3, 700, 400, lambda n: learnable_stream(n, 7, 3, 0.9))
# HellaSwag eval file (llm.c's layout, llmc/data/hellaswag.h): 8 examples of 4 identical completions,
# labels 0 for examples 0, 3 and 5, others 1..3: accuracy 3/8 = 0.375.
examples = []
for i, label in enumerate([0, 1, 2, 0, 3, 0, 1, 2]):
    context = [random.randrange(64) for _ in range(3 + i % 4)]
    completion = [random.randrange(64) for _ in range(1 + i % 3)]
    examples.append((context, [completion] * 4, label))
write_evalfile(f"{d}/hellaswag.bin", examples)
EOF

model=L1H2C16T32
common=(-i "$tmp/train_*.bin" -j "$tmp/val_0.bin" -e "$model" -b 2 -t 16)

# --- (b) a real run ---------------------------------------------------------------------------
./train_gpt2 "${common[@]}" -d 64 -x 12 -l 1e-2 -u 2 -q 0.1 -v 6 -m 4 -s 12 -g 4 -o "$tmp/run" >"$tmp/run.out"
log="$tmp/run/main.log"
bad_lines=$(grep -Evc '^s:[0-9]+ (trl:[0-9]+\.[0-9]{6} lr:[0-9]\.[0-9]{6}e[-+][0-9]{2} norm:[0-9]+\.[0-9]{6}|tel:[0-9]+\.[0-9]{6})$' "$log" || true)
[ "$bad_lines" = 0 ] || fail "main.log has $bad_lines malformed lines"
[ "$(grep -c trl: "$log")" = 12 ] || fail "main.log should have 12 trl lines"
[ "$(grep -o '^s:[0-9]* tel' "$log" | tr '\n' ' ')" = "s:0 tel s:6 tel s:12 tel " ] || fail "tel lines at steps 0, 6, 12 expected"
[ "$(sed -n 2p "$log" | cut -d' ' -f1)" = "s:0" ] || fail "trl of step 0 should follow its tel"
first=$(grep trl: "$log" | head -1 | sed 's/.*trl:\([0-9.]*\).*/\1/')
last=$(grep trl: "$log" | tail -1 | sed 's/.*trl:\([0-9.]*\).*/\1/')
python3 -c "import sys; sys.exit(0 if $last < $first - 1.0 else 1)" || fail "train loss did not fall: $first -> $last"
grep -q '^s:0 trl:[0-9.]* lr:5.000000e-03 ' "$log" || fail "warmup lr of step 0 should be 5e-3"
grep -q '^s:11 trl:[0-9.]* lr:1.000000e-03 ' "$log" || fail "last step's lr should be lr*q = 1e-3"
grep -q -- '--- sample at step 12 ---' "$tmp/run.out" || fail "no sample printed at the last step"
grep -q 'accumulation=2 -> 64 tokens per step' "$tmp/run.out" || fail "start-up summary missing"
echo "tiny run: train loss $first -> $last"

# --- (c) resume == uninterrupted ---------------------------------------------------------------
for shuffle in 0 1; do
  flags=("${common[@]}" -d 64 -x 8 -l 1e-2 -u 2 -q 0.1 -v 3 -m 2 -s 0 -n 2 -sh "$shuffle")
  full="$tmp/full_sh$shuffle"
  ./train_gpt2 "${flags[@]}" -o "$full" >/dev/null
  # An interrupted run's dir as it would be after step 6 was being written: complete checkpoints
  # 2 and 4, a checkpoint 6 whose model file is truncated (skipped), the log of the steps so far.
  part="$tmp/part_sh$shuffle"
  mkdir -p "$part"
  for s in 00000002 00000004 00000006; do
    cp "$full/model_$s.bin" "$full/state_${s}_00000.bin" "$full/DONE_$s" "$part/"
  done
  truncate -s 1000 "$part/model_00000006.bin"
  grep -E '^s:[0-6] ' "$full/main.log" >"$part/main.log"
  ./train_gpt2 "${flags[@]}" -y 1 -o "$part" >"$tmp/resume_sh$shuffle.out"
  grep -q 'resume: skipping checkpoint step 6' "$tmp/resume_sh$shuffle.out" || fail "the broken checkpoint 6 was not skipped"
  grep -q 'resume: continuing from checkpoint step 4' "$tmp/resume_sh$shuffle.out" || fail "did not resume from step 4"
  if ! cmp -s "$full/main.log" "$part/main.log"; then
    fail "-sh $shuffle: resumed main.log differs from the uninterrupted run's"
    diff "$full/main.log" "$part/main.log" || true
  fi
  cmp -s "$full/model_00000008.bin" "$part/model_00000008.bin" || fail "-sh $shuffle: final models differ"
done
lines=$(grep -c trl: "$tmp/full_sh1/main.log")
# Shuffling changes the data order, hence the losses.
cmp -s <(grep trl: "$tmp/full_sh0/main.log") <(grep trl: "$tmp/full_sh1/main.log") && fail "-sh 0 and -sh 1 gave the same losses"

# --- (d) HellaSwag in the loop ----------------------------------------------------------------
./train_gpt2 "${common[@]}" -x 5 -v 2 -m 2 -s 0 -h 1 --hellaswag-file "$tmp/hellaswag.bin" -b 3 -o "$tmp/hs" >"$tmp/hs.out"
[ "$(grep eval: "$tmp/hs/main.log" | tr '\n' ' ')" = "s:0 eval:0.375000 s:2 eval:0.375000 s:4 eval:0.375000 s:5 eval:0.375000 " ] ||
  fail "HellaSwag eval lines: $(grep eval: "$tmp/hs/main.log" | tr '\n' ' ')"
grep -q 'hellaswag 3/8 = 0.375000' "$tmp/hs.out" || fail "no HellaSwag line on stdout"

# --- (e) outlier skipping ----------------------------------------------------------------------
./train_gpt2 "${common[@]}" -x 24 -v 0 -s 0 -l 1e-2 -sg 0.3 -o "$tmp/skip" >"$tmp/skip.out"
skipped=$(grep -c ' skipped:1$' "$tmp/skip/main.log" || true)
[ "$skipped" -gt 0 ] || fail "-sg 0.3 skipped no step"
bad_lines=$(grep -Evc '^s:[0-9]+ trl:[0-9]+\.[0-9]{6} lr:[0-9]\.[0-9]{6}e[-+][0-9]{2} norm:[0-9]+\.[0-9]{6}( skipped:1)?$' "$tmp/skip/main.log" || true)
[ "$bad_lines" = 0 ] || fail "skip run: $bad_lines malformed main.log lines"
# The first 10 steps fill the window: none of them may be skipped.
grep -E '^s:[0-9] .*skipped' "$tmp/skip/main.log" && fail "a step was skipped before the window had 10 values"
# A skipped update leaves the weights alone. With -a 1 every step sees the same batch, so the loss
# is a function of the weights only: the step after a skipped one must log the same loss.
./train_gpt2 "${common[@]}" -x 24 -v 0 -s 0 -l 1e-2 -sg 0.3 -a 1 -o "$tmp/skip_a" >/dev/null
repeat=$(awk '/skipped:1/ {getline next_line; split($2, a, ":"); split(next_line, b, " "); split(b[2], c, ":");
  if (a[2] == c[2]) same++; else diff++} END {print same + 0, diff + 0}' "$tmp/skip_a/main.log")
[ "${repeat#* }" = 0 ] && [ "${repeat% *}" -gt 0 ] || fail "-a 1: losses after skipped steps (same, different): $repeat"

exit_if_failed
echo "loss $first -> $last; resume bit-identical over $lines steps (-sh 0 and 1); hellaswag 0.375 as built; $skipped skipped steps"
