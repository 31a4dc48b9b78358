#!/usr/bin/env bash
# End-to-end parity of the CPU trainer with an independent float64 PyTorch replay of the training
# contract (dev/pytorch/train_reference.py), driven only through the contract: a model file and
# shards written with numpy (tests/lib/tiny_model_and_shards.py), the trainer's flags, and
# main.log. The configuration is the awkward kind: 3 heads of 32, T not a power of two, a small
# padded vocabulary, weight decay on, gradient accumulation > 1, warmup and a cosine decay to a
# final fraction.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s train_gpt2
work=build/tmp/train_reference
rm -rf "$work"; mkdir -p "$work"

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$work" --seed 7 --first-token 50 \
  tiny_val_000000.bin:600 tiny_train_000001.bin:1000 tiny_train_000002.bin:700

flags=(-b 3 -t 23 -d 138 -x 10 -l 3e-3 -u 2 -q 0.1 -c 0.1 -m 4)
./train_gpt2 -e "$work/model.bin" -i "$work/tiny_train_*.bin" -j "$work/tiny_val_*.bin" \
  "${flags[@]}" -sh 0 -v 10 -s 0 -o "$work/out" > "$work/train.stdout"
(cd dev/pytorch && /usr/bin/python3 train_reference.py --model "../../$work/model.bin" \
  --train "../../$work/tiny_train_*.bin" --val "../../$work/tiny_val_*.bin" "${flags[@]}") \
  > "$work/reference.log"

/usr/bin/python3 - "$work/out/main.log" "$work/reference.log" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
from main_log import REFERENCE_TOLERANCE, parse, summary, worst_rel_errors
ours, ref = parse(sys.argv[1]), parse(sys.argv[2])
worst = worst_rel_errors(ours, ref, REFERENCE_TOLERANCE, "trainer vs float64 reference")
first, last = ref[(0, "trl")], ref[(max(s for s, k in ref if k == "trl"), "trl")]
if not last < first: sys.exit(f"the reference loss did not fall ({first} -> {last}): the test data is too hard")
print(f"main.log matches the float64 reference: loss {first:.4f} -> {last:.4f}, worst rel err " + summary(worst))
PY
