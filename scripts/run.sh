#!/usr/bin/env bash
# `make run` (after `make data`): trains on the bundled corpus in data/corpus/ and prints samples.
# With a GPU and the CUDA trainer's source, GPT-2 small (d12) with train_gpt2cu; otherwise the
# CPU trainer on a small model (4 layers, 256 channels) that shows the loss falling within a few
# minutes on two cores. Output (main.log, final checkpoint): out/run/.
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
  # 1024 tokens per step, ~1 s a step on two cores; lr 3e-3 with a 10-step warmup and cosine decay
  # to 3e-4 is the fastest stable setting we found for this size (higher rates make the norm spike
  # in the first steps).
  ./train_gpt2 "${data[@]}" -e L4H4C256T256 -b 8 -t 128 -x 150 -l 3e-3 -u 10 -q 0.1 \
    -v 25 -m 8 -s 75 -g 48 -n 150 -o "$out"
fi
echo "run: done; log in $out/main.log"
