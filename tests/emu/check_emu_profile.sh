#!/usr/bin/env bash
# LLMC_PROFILE=on (llmc/cuda/launch_profile.h) on the emulated GPU, BF16 under ASan + UBSan: a 4-step
# run prints the `profile:` table of its 3 steps after the warm-up step, whose calls per step are
# those counted by hand from the model below, and trains bit for bit as the same run without it
# (main.log equal, the same `cuda:` line: the events allocate no device memory); the default
# LLMC_GEMM_SEARCH=timed's tuning pass is not counted as a step, and LLMC_GEMM_SEARCH=heuristic (no
# tuning pass) counts the same calls and trains the same. A retired speed switch in the environment
# gets its one-line notice and changes nothing. The emulator's times mean nothing; only the names
# and counts are checked. A bad value is refused by name.
# Skips (77) without the CUDA headers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/emu_headers.sh
source tests/lib/emu_headers.sh
make -s -j2 CUDA_HOME="$cuda_home" EMU_SANITIZER=address PRECISION=BF16 build/emu-address/bf16/trainer/train_gpt2cu \
  >"$tmp/build.log" 2>&1 || { tail -n 30 "$tmp/build.log"; echo "FAIL: build of the emulated trainer (BF16)"; exit 1; }
trainer=build/emu-address/bf16/trainer/train_gpt2cu
export OMP_NUM_THREADS=2

# L=3 layers, 3 heads of 32 (C=96), T=40, a vocabulary of 1000 padded to 1024; B=2, one micro-batch
# per step, -r 1, every speed switch at its default, the fallback attention (no cuDNN emulated).
/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 11 --first-token 5 --layers 3 --heads 3 \
  --channels 96 --max-seq-len 40 train_000001.bin:1000 train_000002.bin:800
run=(-i "$tmp/train_*.bin" -e "$tmp/model.bin" -b 2 -t 40 -d 80 -x 4 -l 1e-3 -v 0 -s 0 -sh 0 -r 1)
LLMC_EMU_SEED=3 "$trainer" "${run[@]}" -o "$tmp/plain" >"$tmp/plain.out" 2>&1 || fail "the run without LLMC_PROFILE (log: $tmp/plain.out)"
LLMC_PROFILE=on LLMC_EMU_SEED=4 "$trainer" "${run[@]}" -o "$tmp/profiled" >"$tmp/profiled.out" 2>&1 ||
  fail "the run with LLMC_PROFILE=on (log: $tmp/profiled.out)"
cmp -s "$tmp/plain/main.log" "$tmp/profiled/main.log" ||
  fail "main.log with LLMC_PROFILE=on differs: $(diff "$tmp/plain/main.log" "$tmp/profiled/main.log" | head -n 4)"
[ "$(grep '^cuda:' "$tmp/plain.out")" = "$(grep '^cuda:' "$tmp/profiled.out")" ] ||
  fail "the cuda: line (planned and allocated MiB) differs with LLMC_PROFILE=on"
! grep -q '^profile:' "$tmp/plain.out" || fail "a profile table without LLMC_PROFILE"
grep -q '^profile: 3 step(s) after 1 warm-up: ' "$tmp/profiled.out" ||
  fail "no profile summary of 3 steps after 1 warm-up: $(grep '^profile:' "$tmp/profiled.out" | head -n 1)"

# Calls per step, counted from llmc/cuda/cuda_backend.cu's forward and backward and
# forward_backward.cu's classifier (B*T = 80 rows: one chunk) with L=3:
#   the encoder and layer 0's ln1 in one registers kernel (kEmbedding) 1; the fused residual +
#   LayerNorm (kResidual) 2L = 6 (every ln2, ln1 of layers 1-2, lnf), 1 vector per lane at C=96;
#   layernorm_backward_kernel 2L+1 = 7 (lnf, then ln2 and ln1 of each layer) and as many
#   layernorm_backward_finish_kernel;
#   gelu_forward_kernel 2L = 6 (the forward, then -r 1's recompute before each layer's backward);
#   the fcproj input gradient with gelu' folded in, "cublasLt m=384 n=80 k=96 NN dgelu" L = 3
#   (LLMC_GELU=mixed; column-major m = 4C, n = B*T, k = C);
#   the tied logits "cublasLt m=1024 n=80 k=96 TN" 1 (m = Vp) and their weight gradient
#   "cublasLt m=96 n=1024 k=80 NT +=" 1;
#   causal_softmax_forward_kernel and causal_softmax_backward_kernel L = 3 each (the fallback);
#   bias_grad_partial_kernel and bias_grad_finish_kernel 4L = 12 each (qkv, attproj, fc, fcproj biases);
#   fused_classifier_kernel 1; accumulate_loss_kernel 1; encoder_backward_wte_kernel and
#   encoder_backward_wpe_kernel 1 each (no token has more than kEncoderPieceRows positions, so none
#   is cut into pieces); global_norm_partial_kernel 1; adamw_multi_tensor_kernel 1 (one launch for
#   the 16 parameter tensors).
# The kernels' template arguments: the element type, then the registers LayerNorm's source and
# vectors per lane and the classifier's false (no FP8 copy).
# The calls per step (4th field) of the row whose name (the rest of the line after two spaces) is $1,
# in the output $2 (default: the profiled run's).
calls_of() {
  awk -v name="$1" '/^profile: / { tail = "  " name; if (substr($0, length($0) - length(tail) + 1) == tail) { print $4; exit } }' \
    "${2:-$tmp/profiled.out}"
}
# expect_calls LABEL OUTPUT NAME:COUNT...: each row's calls per step in OUTPUT are COUNT (an empty
# COUNT: no such row); a failure names LABEL.
expect_calls() {
  local label=$1 output=$2 row got
  shift 2
  for row in "$@"; do
    got=$(calls_of "${row%:*}" "$output")
    [ "$got" = "${row##*:}" ] || fail "$label: ${row%:*}: ${got:-no row} calls per step, want ${row##*:}"
  done
}
expect_calls profile "$tmp/profiled.out" \
  "layernorm_forward_registers_kernel<__nv_bfloat16, llmc::LayerNormSource::kEmbedding, 1>:1" \
  "layernorm_forward_registers_kernel<__nv_bfloat16, llmc::LayerNormSource::kResidual, 1>:6" \
  "layernorm_backward_kernel<__nv_bfloat16>:7" "layernorm_backward_finish_kernel<__nv_bfloat16>:7" \
  "gelu_forward_kernel<__nv_bfloat16>:6" "cublasLt m=384 n=80 k=96 NN dgelu:3" "cublasLt m=1024 n=80 k=96 TN:1" \
  "cublasLt m=96 n=1024 k=80 NT +=:1" "causal_softmax_forward_kernel<__nv_bfloat16>:3" \
  "causal_softmax_backward_kernel<__nv_bfloat16>:3" "bias_grad_partial_kernel<__nv_bfloat16, StoredRows<__nv_bfloat16> >:12" \
  "bias_grad_finish_kernel<__nv_bfloat16>:12" "fused_classifier_kernel<__nv_bfloat16, false>:1" \
  "accumulate_loss_kernel:1" "encoder_backward_wte_kernel<__nv_bfloat16>:1" \
  "encoder_backward_wpe_kernel<__nv_bfloat16>:1" "global_norm_partial_kernel<__nv_bfloat16>:1" \
  "adamw_multi_tensor_kernel<__nv_bfloat16>:1"
rows=$(grep -c '^profile: ' "$tmp/profiled.out")

# The default LLMC_GEMM_SEARCH=timed ran a start-up tuning pass (a forward and backward pass that
# runs every GEMM's candidates), which is no training step: without it (heuristic), still 3 steps
# after 1 warm-up, the same calls per step, and (the emulated algorithms all sum alike) the same
# training.
grep -q '^kernel choices: rank 0 timed ' "$tmp/profiled.out" || fail "the default run did not time its GEMMs"
LLMC_GEMM_SEARCH=heuristic LLMC_PROFILE=on LLMC_EMU_SEED=5 "$trainer" "${run[@]}" -o "$tmp/heuristic" \
  >"$tmp/heuristic.out" 2>&1 || fail "the run with LLMC_GEMM_SEARCH=heuristic LLMC_PROFILE=on (log: $tmp/heuristic.out)"
! grep -q '^kernel choices' "$tmp/heuristic.out" || fail "LLMC_GEMM_SEARCH=heuristic timed its GEMMs"
grep -q '^profile: 3 step(s) after 1 warm-up: ' "$tmp/heuristic.out" ||
  fail "with LLMC_GEMM_SEARCH=heuristic: $(grep '^profile:' "$tmp/heuristic.out" | head -n 1)"
for name in "cublasLt m=384 n=80 k=96 NN dgelu" "cublasLt m=96 n=1024 k=80 NT +=" \
  "adamw_multi_tensor_kernel<__nv_bfloat16>"; do
  [ "$(calls_of "$name" "$tmp/heuristic.out")" = "$(calls_of "$name")" ] ||
    fail "with LLMC_GEMM_SEARCH=heuristic, $name: $(calls_of "$name" "$tmp/heuristic.out") calls per step, not $(calls_of "$name")"
done
cmp -s "$tmp/plain/main.log" "$tmp/heuristic/main.log" || fail "main.log with LLMC_GEMM_SEARCH=heuristic differs"

# Retired switches (llmc/cuda/speed_switches.cpp): each set one gets a line saying it no longer
# exists, and the run trains as the one without them, bit for bit.
LLMC_CLASSIFIER=whole LLMC_BIAS_GRAD=layernorm LLMC_EMU_SEED=6 "$trainer" "${run[@]}" -o "$tmp/retired" \
  >"$tmp/retired.out" 2>&1 || fail "the run with two retired switches set (log: $tmp/retired.out)"
for variable in LLMC_CLASSIFIER=whole LLMC_BIAS_GRAD=layernorm; do
  [ "$(grep -c "^$variable: this switch no longer exists (.*); ignored$" "$tmp/retired.out")" = 1 ] ||
    fail "no single notice for $variable: $(grep "^${variable%%=*}" "$tmp/retired.out" | head -n 2)"
done
cmp -s "$tmp/plain/main.log" "$tmp/retired/main.log" || fail "main.log with two retired switches set differs"

out=$(LLMC_PROFILE=yes "$trainer" "${run[@]}" 2>&1) && fail "LLMC_PROFILE=yes was accepted"
grep -q "LLMC_PROFILE: 'yes' is neither 'on' nor 'off'" <<<"$out" || fail "LLMC_PROFILE=yes: $(tail -n 1 <<<"$out")"

exit_if_failed
echo "LLMC_PROFILE=on on the emulated GPU: a table of $((rows - 2)) names, 18 calls-per-step counted by hand, training bit-identical to the run without it, the default timed GEMM search's tuning pass no step and the heuristic alike, retired switches noticed and ignored, a bad value refused"
