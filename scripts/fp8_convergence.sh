#!/bin/bash
# --fp8 1 against bf16 on the emulated GPU: a small model (L4 H4 C256, T = 64) trained for 200 steps
# on data/corpus with the same batches (-sh 0) four times: in bf16, with --fp8 1, with --fp8 1 and
# every FP8 switch on (LLMC_FP8_LM_HEAD=on among them: the LM head in FP8 too), and with
# --fp8 1 and a stale amax on purpose (LLMC_TEST_FP8_STALE_AMAX=3: every delayed scale from an amax 8
# times too small, llmc/test_hooks.h). The two FP8 runs must end within 1% of bf16's with no loss
# spike and a gradient norm that tracks bf16's (tests/lib/fp8_convergence.py), and the stale run must
# fail that same check: it shows the check catches a wrong scale. The four curves go to
# build/fp8-convergence/fp8_convergence.png (docs/images/ keeps the one of the recorded run).
#   make fp8-convergence        (about 45 minutes on 2 cores; the result is in docs/cuda-trainer.md)
# Exit status: 0 when both hold, 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
trainer=build/emu-none/bf16/trainer/train_gpt2cu
out=build/fp8-convergence
[ -x "$trainer" ] || { echo "error: $trainer is missing (make fp8-convergence builds it)"; exit 1; }
rm -rf "$out" && mkdir -p "$out"
flags=(-i "data/corpus/corpus_train_*.bin" -j "data/corpus/corpus_val_*.bin" -e L4H4C256T64 -b 4 -t 64 -x 200
  -l 1e-3 -u 20 -q 0.1 -v 50 -m 8 -s 0 -sh 0 --seed 1337)
# shellcheck source=scripts/speed_switches.sh
source scripts/speed_switches.sh
read -r -a fp8_switches <<<"$(fp8_switches_on_env)"
for run in bf16 fp8 switches stale; do
  case $run in
    bf16) extra=() vars=() ;;
    fp8) extra=(--fp8 1) vars=() ;;
    switches) extra=(--fp8 1) vars=("${fp8_switches[@]}") ;;
    stale) extra=(--fp8 1) vars=(LLMC_TEST_FP8_STALE_AMAX=3) ;;
  esac
  start=$(date +%s)
  env "${vars[@]}" "$trainer" "${flags[@]}" "${extra[@]}" -o "$out/$run" >"$out/$run.out" 2>&1 ||
    { echo "error: the $run run failed (log: $out/$run.out)"; tail -n 5 "$out/$run.out"; exit 1; }
  echo "$run: $(grep -c '^s:[0-9]* trl:' "$out/$run/main.log") steps in $(($(date +%s) - start)) s, last: $(grep '^step' "$out/$run.out" | tail -n 1)"
done
status=0
for run in fp8 switches; do
  if result=$(python3 tests/lib/fp8_convergence.py "$out/bf16/main.log" "$out/$run/main.log"); then
    echo "$run: $result"
  else
    echo "$run: $result (fails)"
    status=1
  fi
done
echo "(switches: ${fp8_switches[*]})"
if stale=$(python3 tests/lib/fp8_convergence.py "$out/bf16/main.log" "$out/stale/main.log"); then
  echo "stale: $stale"
  echo "error: the check did not catch the stale amax"
  status=1
else
  echo "stale: $stale (caught, as it must be)"
fi
/usr/bin/python3 scripts/plot_log.py "$out/bf16/main.log" "$out/fp8/main.log" "$out/switches/main.log" \
  "$out/stale/main.log" --labels "bf16,--fp8 1,--fp8 1 every FP8 switch on (LM head in FP8),--fp8 1 with a stale amax (x8)" \
  --title "L4 H4 C256 on the emulated GPU" \
  -o "$out/fp8_convergence.png" || status=1
exit $status
