#!/usr/bin/env bash
# CPU backend vs. a float64 PyTorch GPT-2 (dev/pytorch/gpt2_reference.py) on two random models:
#   odd:  L2 H3 C96 (head size 32), T=23, vocab 1000 padded to 1024, fp32 model file (version 3)
#   vocab: L1 H2 C32, T=16, the real vocab 50257 padded to 50304, bf16 model file (version 5)
# Bars (docs/contract.md): loss rel err < 1e-5, logits and every gradient tensor rel L2 err < 1e-4
# (logits 1e-5), each of 10 AdamW steps' loss rel err < 1e-4; gradients bit-identical for 1-3 threads.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s test_gpt2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run_case() {
  local name=$1 desc=$2 vocab=$3 padded=$4 B=$5 T=$6 version=$7 lr=$8 wd=$9
  echo "== $name: $desc vocab $vocab/$padded B=$B T=$T version $version lr $lr wd $wd"
  ./test_gpt2 make-case --config "$desc" --vocab "$vocab" --padded "$padded" --seed 11 --B "$B" --T "$T" \
    --version "$version" --model "$dir/$name.bin" --tokens "$dir/$name.tok"
  /usr/bin/python3 dev/pytorch/gpt2_reference.py --model "$dir/$name.bin" --tokens "$dir/$name.tok" \
    --B "$B" --T "$T" --steps 10 --lr "$lr" --wd "$wd" --out "$dir/$name.expected"
  ./test_gpt2 check --model "$dir/$name.bin" --tokens "$dir/$name.tok" --expected "$dir/$name.expected" \
    --B "$B" --T "$T" --steps 10 --lr "$lr" --wd "$wd" | tee "$dir/$name.log"
}

run_case odd L2H3C96T23 1000 1024 2 23 3 1e-3 0.5
run_case vocab L1H2C32T16 50257 50304 2 16 5 1e-3 0.5
echo "2 models match float64 PyTorch: $(tail -n 1 "$dir/odd.log" | cut -d: -f2-) | $(tail -n 1 "$dir/vocab.log" | cut -d: -f2-)"
