#!/usr/bin/env bash
# `make run` (after `make data`): trains on the bundled corpus in data/corpus/ and prints samples.
# With a GPU and the CUDA trainer's source, GPT-2 small (d12) with train_gpt2cu; otherwise the
# CPU trainer on a small model (2 layers, 128 channels) that shows the loss falling in 180 steps.
# Output (main.log, final checkpoint): out/run/.
set -euo pipefail
cd "$(dirname "$0")/.."

out=out/run
data=(-i "data/corpus/corpus_train_*.bin" -j "data/corpus/corpus_val_*.bin")

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && [ -f train_gpt2.cu ]; then
  echo "run: GPU found: training GPT-2 small (d12) with train_gpt2cu into $out"
  make train_gpt2cu
  # 64K tokens per step, 150 steps: about 3 epochs of the 3M-token corpus.
  ./train_gpt2cu "${data[@]}" -e d12 -b 16 -t 1024 -d 65536 -x 150 -l 6e-4 -u 20 -q 0.1 -c 0.1 \
    -v 25 -m 20 -s 75 -g 128 -o "$out"
else
  echo "run: no GPU (or no CUDA trainer): training a small model with the CPU trainer into $out"
  make train_gpt2
  # A 2-layer, 128-channel model: with GPT-2's 50,257-token vocabulary the output layer dominates
  # the cost, so a narrow model sees the most tokens in a fixed time (2,048 per step; 0.34 s to
  # 1.5 s a step on the 2-core machines in README.md). Measured: val loss 10.85 -> 7.17 in 180
  # steps; after 80 steps 7.41, where a 4-layer, 256-channel model with 1,024 tokens a step reached
  # 7.54 in the same time. lr 5e-3 with warmup and cosine decay to a tenth.
  ./train_gpt2 "${data[@]}" -e L2H4C128T256 -b 16 -t 128 -x 180 -l 5e-3 -u 10 -q 0.1 \
    -v 30 -m 8 -s 90 -g 48 -n 180 -o "$out"
fi
echo "run: done; log in $out/main.log"
