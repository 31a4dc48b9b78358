#!/usr/bin/env bash
# The whole CUDA trainer on the emulated GPU (docs/cuda-emulator.md), under ASan + UBSan:
#  (a) test_gpt2cu, both precisions, against the CPU backend on a small odd-shaped model (below): logits,
#      loss, every gradient tensor, recompute 0/1/2 bit for bit, the GELU paths, the overlapped
#      NCCL buckets on one rank, parameters after AdamW steps, the memory plan, (bf16) --fp8 1 at
#      its derived bars;
#  (b) train_gpt2cu-emu (FP32) against train_gpt2 on the same model (weight decay, accumulation 2):
#      per-step losses within the FP32 bar (1e-4 relative);
#      validation loss, sampling and the HellaSwag eval in the run; MFU in the step lines and
#      main.log against LLMC_PEAK_TFLOPS, with the FLOPs per token counted by hand;
#      The same run with LLMC_GELU=epilogues and LLMC_CUDA_GRAPHS=on together, against the same bar.
#  (c) train_gpt2cu-emu (BF16) stopped and resumed from its checkpoint (-y 1), with those two switches
#      and with the defaults: main.log and the final model equal to an unbroken run's, bit for bit;
#      with the two switches the resumed run loads the GEMM algorithm table (LLMC_GEMM_SEARCH=timed)
#      from the checkpoint instead of timing again;
#      no MFU anywhere, as the emulated GPU's name is in no table of peaks; and with --fp8 1, whose
#      checkpoint carries the FP8 scaling state, with the FP8 switches off and on;
#  (d) --fp8 1 refused, naming why, on compute capability 8.0 (LLMC_EMU_COMPUTE_CAPABILITY) and with
#      LLMC_GELU=epilogues;
#  (e) (BF16) a NaN set in the device's gradients at a step (scripts/nonfinite_step.sh): skipped with
#      -sg, the weights unchanged over it; without -sl/-sg a stop naming the step, resumable.
# Each run's seed orders blocks and warps differently. test_gpt2cu runs in the seeded stream order
# (LLMC_EMU_STREAMS=seeded: some work as soon as it is issued, the rest when the host waits, the
# streams interleaved by the seed), which finds a missing wait between the compute stream and the
# overlapped buckets' stream; the training runs in the latest order (the default).
# Skips (77) without the CUDA headers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/emu_headers.sh
source tests/lib/emu_headers.sh
# shellcheck source=scripts/speed_switches.sh
source scripts/speed_switches.sh
# shellcheck source=scripts/nonfinite_step.sh
source scripts/nonfinite_step.sh
for precision in BF16 FP32; do
  make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION="$precision" \
    "build/emu-address/$(tr 'A-Z' 'a-z' <<<"$precision")/trainer/test_gpt2cu" \
    "build/emu-address/$(tr 'A-Z' 'a-z' <<<"$precision")/trainer/train_gpt2cu" >"$tmp/build-$precision.log" 2>&1 ||
    { tail -n 30 "$tmp/build-$precision.log"; echo "FAIL: build of the emulated trainer ($precision)"; exit 1; }
done
emu=build/emu-address
export OMP_NUM_THREADS=2

# The odd-shaped model (3 layers, 3 heads of 32, T=40, a vocabulary of 1000 padded to 1024, random
# LayerNorm weights and biases), its shards, and a HellaSwag file of tokens it knows.
/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 11 --first-token 5 --layers 3 --heads 3 \
  --channels 96 --max-seq-len 40 val_000000.bin:400 train_000001.bin:1000 train_000002.bin:800
tests_python <<'EOF'
import random, sys
from hellaswag_to_evalfile import write_evalfile
random.seed(2)
examples = []
for i, label in enumerate([0, 2, 1, 3]):
    context = [random.randrange(1000) for _ in range(4 + i)]
    examples.append((context, [[random.randrange(1000) for _ in range(2 + i % 2)] for _ in range(4)], label))
write_evalfile(f"{sys.argv[1]}/hellaswag.bin", examples)
EOF

# --- (a) the parity test ------------------------------------------------------------------------
for prec in bf16 fp32; do
  seed=$([ "$prec" = bf16 ] && echo 3 || echo 4)
  if LLMC_EMU_STREAMS=seeded LLMC_EMU_SEED=$seed "$emu/$prec/trainer/test_gpt2cu" --model "$tmp/model.bin" --B 2 --T 40 --steps 4 \
    >"$tmp/test_gpt2cu-$prec.log" 2>&1; then
    echo "ok    test_gpt2cu ($prec): $(tail -n 1 "$tmp/test_gpt2cu-$prec.log")"
  else
    fail "test_gpt2cu ($prec) (log: $tmp/test_gpt2cu-$prec.log)"
    grep -E '^FAIL|rror' "$tmp/test_gpt2cu-$prec.log" | head -n 10 | sed 's/^/      /'
  fi
done
# The training runs: (b) the same shape with GPT-2's vocabulary, as the HellaSwag eval pads with its
# end-of-text token 50256; the others start from the model file, whose vocabulary of 1000 halves
# an emulated step's time.
shape=(-i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 40 -d 160 -x 6 -l 1e-3 -c 0.1 -v 3 -m 2 -sh 0)
train=("${shape[@]}" -e "$tmp/model.bin")
run=("${shape[@]}" -e L3H3C96T40 -s 6 -g 8 -h 1 --hellaswag-file "$tmp/hellaswag.bin")

# --- (b) FP32 against the CPU trainer -----------------------------------------------------------
./train_gpt2 "${run[@]}" -o "$tmp/cpu" >"$tmp/cpu.out" 2>&1 || fail "train_gpt2 (log: $tmp/cpu.out)"
# A peak of 0.001 TFLOP/s, below the emulator's pace: MFU figures of a few hundred percent, which
# check the count to about 1% (tok/s is rounded to a whole number).
LLMC_PEAK_TFLOPS=0.001 LLMC_EMU_SEED=5 "$emu/fp32/trainer/train_gpt2cu" "${run[@]}" -o "$tmp/emu" >"$tmp/emu.out" 2>&1 ||
  fail "train_gpt2cu-emu (FP32) (log: $tmp/emu.out)"
# MFU: N = Vp C + T C + L (12 C^2 + 13 C) + 2 C = 50304*96 + 40*96 + 3*(110592 + 1248) + 192 = 5,168,736
# parameters; 6N + 6 L C T = 31,012,416 + 69,120 = 31,081,536 FLOPs per token, so MFU in percent is
# 100 * 31,081,536 * tok/s / 1e9 = 3.1081536 * tok/s (tok/s is printed rounded to a whole number).
grep -q '^mfu: 31081536 FLOPs per token (6N + 6LCT at T=40) against 0.001 TFLOP/s from LLMC_PEAK_TFLOPS$' "$tmp/emu.out" ||
  fail "train_gpt2cu-emu's mfu line: $(grep '^mfu' "$tmp/emu.out")"
mfu_steps=$(awk -F'|' '/^step +[0-9]+\/[0-9]+ \| loss / { n++; split($6, t, " "); split($7, m, " "); sub("%", "", m[2]);
    if (m[1] != "MFU" || (m[2] - 3.1081536 * t[1]) ^ 2 > (3.1081536 * 0.5 + 0.05) ^ 2) bad++ }
  END { print n + 0, bad + 0 }' "$tmp/emu.out")
mfu_log=$(grep -c ' norm:[0-9.]* mfu:[0-9.]*$' "$tmp/emu/main.log" || true)
[ "$mfu_steps" = "6 0" ] && [ "$mfu_log" = 6 ] ||
  fail "MFU: step lines (count, wrong) '$mfu_steps', main.log train lines with mfu: $mfu_log of 6"
grep -q 'emulated GPU' "$tmp/emu.out" || fail "train_gpt2cu-emu did not say it runs on the emulated GPU"
grep -q -- '--- sample at step 6 ---' "$tmp/emu.out" || fail "train_gpt2cu-emu printed no sample"
compare=$(python3 tests/lib/compare_losses.py "$tmp/cpu/main.log" "$tmp/emu/main.log") &&
  echo "ok    train_gpt2cu-emu (fp32) against train_gpt2: $compare" ||
  fail "FP32 losses against train_gpt2: $compare"
# And with the switches that change what runs on the emulated GPU at their other values together
# (llmc/cuda/speed_switches.def: the GELU epilogues, CUDA graphs; the GEMM search stays timed, whose
# table (c) resumes; LLMC_CUDNN_BACKWARD does nothing without cuDNN) and -r auto, which takes 0: the
# epilogues allow no recompute.
together=(LLMC_GELU=epilogues LLMC_CUDA_GRAPHS=on)
# The cuda: line's summary of every switch with those set (the others at their defaults).
together_summary=""
while read -r variable values; do
  value=${values%%|*}
  for setting in "${together[@]}"; do [ "${setting%%=*}" = "$variable" ] && value=${setting#*=}; done
  together_summary+="${together_summary:+ }$variable=$value"
done < <(speed_switch_rows)
env "${together[@]}" LLMC_EMU_SEED=8 "$emu/fp32/trainer/train_gpt2cu" "${run[@]}" -r auto -o "$tmp/emu-on" \
  >"$tmp/emu-on.out" 2>&1 || fail "train_gpt2cu-emu (FP32, ${together[*]}) (log: $tmp/emu-on.out)"
grep -qF "| $together_summary | recompute 0 (auto) |" "$tmp/emu-on.out" ||
  fail "the cuda: line does not name ${together[*]}: $(grep '^cuda:' "$tmp/emu-on.out")"
compare_on=$(python3 tests/lib/compare_losses.py "$tmp/cpu/main.log" "$tmp/emu-on/main.log") &&
  echo "ok    train_gpt2cu-emu (fp32, ${together[*]}) against train_gpt2: $compare_on" ||
  fail "FP32 losses with ${together[*]} against train_gpt2: $compare_on"

# --- (c) BF16 stopped and resumed, with the defaults and with the switches together ---------------
# Without the sampling and the HellaSwag eval of (b), which write nothing the comparison reads.
resume=("${train[@]}" -s 0 -n 3)
# resume_exactly NAME SEED [VARIABLE=VALUE... --] [FLAGS...]: a 6-step run, and one resumed from its
# step-3 checkpoint with another seed; main.log and the final model must be bit-identical.
resume_exactly() {
  local name=$1 seed=$2 vars=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ] && [[ "$1" == *=* ]]; do vars+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  env "${vars[@]}" LLMC_EMU_SEED="$seed" "$emu/bf16/trainer/train_gpt2cu" "${resume[@]}" "$@" -o "$tmp/full-$name" \
    >"$tmp/full-$name.out" 2>&1 || fail "train_gpt2cu-emu (BF16, $name) (log: $tmp/full-$name.out)"
  mkdir -p "$tmp/part-$name"
  cp "$tmp/full-$name/model_00000003.bin" "$tmp/full-$name/state_00000003_00000.bin" "$tmp/full-$name/DONE_00000003" \
    "$tmp/part-$name/"
  grep -E '^s:[0-3] ' "$tmp/full-$name/main.log" >"$tmp/part-$name/main.log"
  env "${vars[@]}" LLMC_EMU_SEED=$((seed + 1)) "$emu/bf16/trainer/train_gpt2cu" "${resume[@]}" "$@" -y 1 \
    -o "$tmp/part-$name" >"$tmp/part-$name.out" 2>&1 || fail "train_gpt2cu-emu (BF16, $name) resumed (log: $tmp/part-$name.out)"
  grep -q 'resume: continuing from checkpoint step 3' "$tmp/part-$name.out" ||
    fail "the BF16 run ($name) did not resume from step 3"
  cmp -s "$tmp/full-$name/main.log" "$tmp/part-$name/main.log" ||
    fail "resumed main.log ($name) differs: $(diff "$tmp/full-$name/main.log" "$tmp/part-$name/main.log" | head -n 4)"
  cmp -s "$tmp/full-$name/model_00000006.bin" "$tmp/part-$name/model_00000006.bin" ||
    fail "resumed final model ($name) differs"
}
before=$failures
resume_exactly together 9 "${together[@]}" -- -r 0
# With LLMC_GEMM_SEARCH=timed: the unbroken run timed the GEMMs before step 0, the resumed one loaded
# that table from its checkpoint instead (the emulated algorithms all sum alike, so only this line
# shows which).
grep -q '^kernel choices: rank 0 timed the cuBLASLt algorithms of [1-9][0-9]* GEMM shapes in [0-9.]* s$' "$tmp/full-together.out" ||
  fail "the run with ${together[*]} did not time its GEMM algorithms: $(grep '^kernel choices' "$tmp/full-together.out")"
grep -q '^kernel choices: loaded the cuBLASLt algorithms of [1-9][0-9]* GEMM shapes from checkpoint step 3 instead of timing them$' \
  "$tmp/part-together.out" && ! grep -q '^gemm search:' "$tmp/part-together.out" ||
  fail "the resumed run (${together[*]}) did not load the GEMM algorithm table from its checkpoint: $(grep -E '^(kernel choices|gemm search)' "$tmp/part-together.out" | head -n 3)"
[ "$failures" = "$before" ] && echo "ok    train_gpt2cu-emu (bf16, ${together[*]}): resumed at step 3, main.log and model bit-identical"
before=$failures
resume_exactly defaults 6
grep -q "^mfu: .*'NVIDIA H100 80GB HBM3 (emulated on the CPU)' is not in the table" "$tmp/full-defaults.out" &&
  ! grep -q 'MFU' "$tmp/full-defaults.out" && ! grep -q 'mfu:' "$tmp/full-defaults/main.log" ||
  fail "the emulated GPU, in no table, showed an MFU or did not say why not"
[ "$failures" = "$before" ] && echo "ok    train_gpt2cu-emu (bf16): resumed at step 3, main.log and model bit-identical, no MFU"

before=$failures
resume_exactly fp8 10 -- --fp8 1
grep -q '| precision bf16, FP8 matmuls |' "$tmp/full-fp8.out" || fail "the cuda: line does not say FP8: $(grep '^cuda:' "$tmp/full-fp8.out")"
[ "$failures" = "$before" ] && echo "ok    train_gpt2cu-emu (bf16, --fp8 1): resumed at step 3 with its FP8 scaling state, main.log and model bit-identical"
# Every FP8 switch (LLMC_FP8_*) on: the same, and the timed search keys the forward FP8
# GEMMs (E4M3 x E4M3) with fast accumulation and the input-gradient ones (E4M3 x E5M2) without, a
# table the resumed run loads from the checkpoint.
before=$failures
fp8_on=$(fp8_switches_on_env)
# shellcheck disable=SC2086
resume_exactly fp8-on 12 $fp8_on -- --fp8 1
grep -q '^gemm search: .* fp8 e4m3 x e4m3 fast accumulation: ' "$tmp/full-fp8-on.out" &&
  grep -q '^gemm search: .* fp8 e4m3 x e5m2: ' "$tmp/full-fp8-on.out" &&
  ! grep -q 'e5m2 fast accumulation' "$tmp/full-fp8-on.out" ||
  fail "LLMC_FP8_FAST_ACCUM=forward: the searched FP8 GEMMs are not the forward ones fast, the others not: $(grep '^gemm search: .*fp8' "$tmp/full-fp8-on.out" | head -n 3)"
[ "$failures" = "$before" ] && echo "ok    train_gpt2cu-emu (bf16, --fp8 1 $fp8_on): resumed bit-identically, fast accumulation in the forward GEMMs only"

# --- (d) --fp8 1 where it cannot run: a GPU without FP8 tensor cores, the GELU epilogues ----------
fp8_refused() {  # fp8_refused NAME TEXT VARIABLE=VALUE: the run stops before training, naming TEXT
  local name=$1 text=$2
  if env "$3" "$emu/bf16/trainer/train_gpt2cu" "${train[@]}" -x 1 --fp8 1 >"$tmp/fp8-$name.out" 2>&1; then
    fail "--fp8 1 with $3 ran"
  else
    grep -qF -- "$text" "$tmp/fp8-$name.out" && ! grep -q '^step' "$tmp/fp8-$name.out" ||
      fail "--fp8 1 with $3: $(tail -n 1 "$tmp/fp8-$name.out")"
  fi
}
before=$failures
fp8_refused sm80 "--fp8 1 needs FP8 tensor cores (compute capability 8.9 or more" LLMC_EMU_COMPUTE_CAPABILITY=8.0
fp8_refused epilogues "LLMC_GELU=epilogues is for the bf16 GEMMs" LLMC_GELU=epilogues
[ "$failures" = "$before" ] && echo "ok    --fp8 1 refused on compute capability 8.0 and with LLMC_GELU=epilogues, naming why"

# --- (e) a NaN in the gradients on the device (scripts/nonfinite_step.sh) ------------------------
nonfinite_step_checks emu-bf16 3 nan env LLMC_EMU_SEED=13 "$emu/bf16/trainer/train_gpt2cu" "${train[@]}" -v 0 -s 0 -n 1

exit_if_failed
echo "emulated trainer: test_gpt2cu bf16+fp32, train_gpt2cu-emu fp32 vs train_gpt2 ($compare; ${together[*]}: $compare_on) with MFU, bf16 resume exact (defaults, ${together[*]}, --fp8 1 with its switches off and on), --fp8 1's refusals, a NaN gradient skipped or stopping"
