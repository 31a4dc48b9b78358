#!/usr/bin/env bash
# `make test-gpu`: everything that needs a GPU, in one call, ending in a table (one line per check:
# PASS/FAIL/SKIP and its figure). Full logs go to build/test-gpu-logs/; they are also packed into
# test-gpu-logs.tgz in TEST_GPU_OUT (default out/test-gpu; a relative path is taken from the folder
# it is run in), with the summary and the main logs beside it as plain files.
#   1. the binaries: build/gpu-dist (`make gpu-dist`) when its binaries run on this machine, else a
#      build from source with this machine's nvcc (fmt header-only from
#      the bundle when the system has no libfmt; cuBLAS, cuDNN and NCCL from Python wheels when the
#      system has them only so, scripts/cuda_wheels.sh)
#   2. test_gpt2cu, FP32 then BF16 builds (parity with the CPU backend, docs/contract.md); when the
#      BF16 test stops on a cuDNN error, once more with LLMC_ATTENTION=fallback, and the BF16 runs
#      below use the fallback too
#   3. every dev/cuda kernel check (run_all.sh --check)
#   4. a 20-step d12 training run on the bundled corpus (build/gpu-dist/corpus, else data/corpus)
#   5. test_gpt2cu under compute-sanitizer memcheck on a small config (both precisions)
#   6. multi-rank paths on the one GPU (FP32 build, small model): NCCL with 1 rank (LLMC_COMMUNICATOR=nccl,
#      -z 1) against the plain run; 2 ranks sharing the GPU with ZeRO-1 through MPI (host staging)
#      against 1 rank with the same -d, under the bundle's mpirun (scripts/bundle_openmpi.sh) or,
#      for binaries built here, the machine's (SKIP when there is neither)
# Every step runs under a time limit cut from one budget (TEST_GPU_BUDGET seconds, default 540: the
# whole run stays under 10 minutes), so that a hang costs its own step and the table still comes out.
# More: docs/cuda-trainer.md.
set -u
out_dir=${TEST_GPU_OUT:-out/test-gpu}
[[ "$out_dir" == /* ]] || out_dir=$PWD/$out_dir  # the caller's folder
cd "$(dirname "$0")/.." || exit 1
root=$PWD
logs=build/test-gpu-logs
rm -rf "$logs"
mkdir -p "$logs"
dist=build/gpu-dist
budget=${TEST_GPU_BUDGET:-540}
# shellcheck source=scripts/gpu_steps_lib.sh
source scripts/gpu_steps_lib.sh

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "test-gpu: no GPU found (nvidia-smi lists none): nothing to test here; \`make test\` covers the rest"
  exit 1
fi
nvidia-smi -L | tee "$logs/nvidia-smi.txt"
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh

# ---- 1. binaries ----
gpu_binaries
ldd "$bin/train_gpt2cu-bf16" >"$logs/ldd.txt" 2>&1

# ---- 2. parity with the CPU backend ----
# BF16 runs below use cuDNN attention unless its test stopped on a cuDNN error.
parity_rows

# ---- 3. kernel checks ----
# shellcheck disable=SC2046
devcuda_row 150 $(devcuda_benches)

# ---- 4. d12 training run ----
name="train d12, 20 steps (B=16 T=1024)${attention_env:+, fallback attention}"
log="$logs/train_d12.log"
if ! find_corpus; then
  row FAIL "$name" "$corpus_missing"
else
  val=(-v 0)
  ls "$corpus"/corpus_val_*.bin >/dev/null 2>&1 && val=(-j "$corpus/corpus_val_*.bin" -v 10 -m 4)
  limited 180 "$log" env "${attention_env[@]}" "$bin/train_gpt2cu-bf16" -i "$corpus/corpus_train_*.bin" \
    "${val[@]}" -e d12 -b 16 -t 1024 -x 20 -l 6e-4 -u 5 -q 0.1 -c 0.1 -sh 0 -s 20 -g 32 -o "$logs/train_d12"
  rc=$?
  steps=$(train_steps "$log")
  first=$(first_loss <<<"$steps")
  last=$(last_loss <<<"$steps")
  # Mean over steps 5..19 (the first steps build GEMM algorithms and attention plans); MFU when
  # the trainer knows this GPU's peak (its "mfu:" line says which).
  speed=$(awk -F'|' 'NR > 5 { split($5, a, " "); split($6, b, " "); split($7, c, " "); ms += a[1]; tok += b[1]; n++
                              if (c[1] == "MFU") { sub("%", "", c[2]); mfu += c[2]; m++ } }
    END { if (n) printf "%.1f ms/step, %.0f tok/s", ms / n, tok / n
          if (m) printf ", MFU %.1f%%", mfu / m }' <<<"$steps")
  if [ "$rc" -eq 0 ] && [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'; then
    row PASS "$name" "loss $first -> $last, $speed"
  elif [ "$rc" -ne 0 ]; then
    row FAIL "$name" "$(status_text "$rc" "$log"), loss ${first:-?} -> ${last:-?}"
  else
    row FAIL "$name" "loss ${first:-?} -> ${last:-?} (want a drop > 1.0), $speed"
  fi
fi

# ---- 5. memcheck ----
sanitizer_rows memcheck 120

# ---- 6. multi-rank: NCCL with one rank, ZeRO-1 on 2 ranks sharing the GPU through MPI ----
multi_rank_rows

echo
echo "== test-gpu summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); ${SECONDS}s; logs: $logs)"
printf '%s\n' "${rows[@]}" | tee "$logs/summary.txt"
echo "test-gpu: $((${#rows[@]} - failed)) of ${#rows[@]} checks passed or skipped, $failed failed"
if mkdir -p "$out_dir"; then
  tar czf "$out_dir/test-gpu-logs.tgz" -C "$(dirname "$logs")" "$(basename "$logs")"
  for f in summary.txt test_gpt2cu-fp32.log test_gpt2cu-bf16.log dev_cuda_check.log train_d12.log; do
    rm -f "$out_dir/$f"
    [ -f "$logs/$f" ] && cp "$logs/$f" "$out_dir/"
  done
  echo "test-gpu: the summary, the main logs and test-gpu-logs.tgz (all the logs) in $out_dir"
else
  echo "test-gpu: TEST_GPU_OUT: cannot create the folder $out_dir; the logs are in $logs"
fi
[ "$failed" -eq 0 ]
