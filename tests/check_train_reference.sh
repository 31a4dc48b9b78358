#!/usr/bin/env bash
# End-to-end parity of the CPU trainer with an independent float64 PyTorch replay of the training
# contract (dev/pytorch/train_reference.py), driven only through the contract: a model file and
# shards written here with numpy, the trainer's flags, and main.log. The configuration is the
# awkward kind: 3 heads of 32, T not a power of two, a small padded vocabulary, weight decay on,
# gradient accumulation > 1, warmup and a cosine decay to a final fraction.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s train_gpt2
work=build/tmp/train_reference
rm -rf "$work"; mkdir -p "$work"

/usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(7)
L, H, C, maxT, V, Vp = 2, 3, 96, 64, 1000, 1024
header = np.zeros(256, dtype="<i4")
header[:8] = [20240326, 3, maxT, V, L, H, C, Vp]
def normal(*shape, std=0.02): return rng.normal(0.0, std, shape)
wte = normal(Vp, C); wte[V:] = 0.0
params = [wte, normal(maxT, C), 1 + normal(L, C, std=0.1), normal(L, C), normal(L, 3 * C, C),
          normal(L, 3 * C), normal(L, C, C, std=0.02 / np.sqrt(2 * L)), normal(L, C),
          1 + normal(L, C, std=0.1), normal(L, C), normal(L, 4 * C, C), normal(L, 4 * C),
          normal(L, C, 4 * C, std=0.02 / np.sqrt(2 * L)), normal(L, C), 1 + normal(C, std=0.1), normal(C)]
with open(f"{work}/model.bin", "wb") as f:
    f.write(header.tobytes())
    for p in params: f.write(p.astype("<f4").tobytes())
def shard(path, n):
    # A learnable stream: mostly a fixed successor function, sometimes a random token.
    tokens = np.empty(n, dtype=np.int64); tokens[0] = 50 % V
    for i in range(1, n):
        tokens[i] = (tokens[i - 1] * 7 + 3) % V if rng.random() < 0.8 else rng.integers(V)
    h = np.zeros(256, dtype="<i4"); h[:3] = [20240520, 1, n]
    with open(path, "wb") as f:
        f.write(h.tobytes()); f.write(tokens.astype("<u2").tobytes())
shard(f"{work}/tiny_val_000000.bin", 600)
shard(f"{work}/tiny_train_000001.bin", 1000)
shard(f"{work}/tiny_train_000002.bin", 700)
PY

flags=(-b 3 -t 23 -d 138 -x 10 -l 3e-3 -u 2 -q 0.1 -c 0.1 -m 4)
./train_gpt2 -e "$work/model.bin" -i "$work/tiny_train_*.bin" -j "$work/tiny_val_*.bin" \
  "${flags[@]}" -sh 0 -v 10 -s 0 -o "$work/out" > "$work/train.stdout"
(cd dev/pytorch && /usr/bin/python3 train_reference.py --model "../../$work/model.bin" \
  --train "../../$work/tiny_train_*.bin" --val "../../$work/tiny_val_*.bin" "${flags[@]}") \
  > "$work/reference.log"

/usr/bin/python3 - "$work/out/main.log" "$work/reference.log" <<'PY'
import re, sys
def parse(path):
    events = {}
    for line in open(path):
        fields = dict(kv.split(":", 1) for kv in line.split())
        step = int(fields.pop("s"))
        for key, value in fields.items():
            events[(step, key)] = float(value)
    return events
ours, ref = parse(sys.argv[1]), parse(sys.argv[2])
# fp32 trainer vs float64 reference: losses to 1e-4 relative (DESIGN.md §4's 10-step bar), the
# learning rate to float precision, the gradient norm to 1e-3 relative.
tolerance = {"trl": 1e-4, "tel": 1e-4, "lr": 1e-6, "norm": 1e-3}
missing = sorted(set(ref) - set(ours))
if missing: sys.exit(f"main.log lacks {missing}")
worst = {}
for key, want in sorted(ref.items()):
    got = ours[key]
    err = abs(got - want) / max(abs(want), 1e-12)
    worst[key[1]] = max(worst.get(key[1], 0.0), err)
    if err > tolerance[key[1]]:
        sys.exit(f"step {key[0]} {key[1]}: trainer {got} vs reference {want} (rel err {err:.2e})")
first, last = ref[(0, "trl")], ref[(max(s for s, k in ref if k == "trl"), "trl")]
if not last < first: sys.exit(f"the reference loss did not fall ({first} -> {last}): the test data is too hard")
print(f"main.log matches the float64 reference: loss {first:.4f} -> {last:.4f}, worst rel err "
      + ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items())))
PY
