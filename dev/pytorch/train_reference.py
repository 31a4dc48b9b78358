"""Float64 PyTorch reference of a whole training run, driven only by the contract of docs/contract.md and docs/training.md.

Reads a model file and token shards like the trainers do (with numpy, independently of the C++
code), then replays `train_gpt2 -sh 0` step by step: llm.c's sequential data order for `world`
ranks, gradient accumulation to `-d` tokens, the learning-rate schedule, global-norm clipping at
1.0 and AdamW with weight decay on the decayed tensors only. It prints main.log-style lines
(`s:<step> trl:<loss> lr:<lr> norm:<norm>` and `s:<step> tel:<loss>`) that
tests/cpu/check_train_reference.sh compares with the trainer's main.log.
"""
import argparse
import glob
import math

import numpy as np
import torch

from gpt2_reference import DECAYED, GPT, loss_of, read_model

SHARD_MAGIC, SHARD_VERSION = 20240520, 1


def read_shard(path):
    raw = np.fromfile(path, dtype=np.uint8)
    header = raw[:1024].view("<i4")
    if header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION:
        raise SystemExit(f"error: {path}: not a token shard")
    tokens = raw[1024:].view("<u2").astype(np.int64)
    if tokens.size != header[2]:
        raise SystemExit(f"error: {path}: header says {header[2]} tokens, file has {tokens.size}")
    return tokens


class SequentialBatches:
    """The contract's order: rank r's k-th micro-batch of a shard starts at k*W*B*T + r*B*T."""

    def __init__(self, pattern, B, T, world, rank):
        self.shards = [read_shard(p) for p in sorted(glob.glob(pattern))]
        self.B, self.T, self.world, self.rank = B, T, world, rank
        self.shard, self.k = 0, 0

    def next(self):
        B, T, W = self.B, self.T, self.world
        while self.k >= (self.shards[self.shard].size - 1) // (W * B * T):
            self.shard, self.k = (self.shard + 1) % len(self.shards), 0
        start = self.k * W * B * T + self.rank * B * T
        window = self.shards[self.shard][start:start + B * T + 1]
        self.k += 1
        x = torch.from_numpy(window[:-1].copy()).view(B, T)
        y = torch.from_numpy(window[1:].copy()).view(B, T)
        return x, y


def cosine_lr(step, lr, warmup, max_steps, final_frac):
    if step < warmup:
        return lr * (step + 1) / warmup
    lr_min = lr * final_frac
    span = max_steps - 1 - warmup
    ratio = 1.0 if span <= 0 else (step - warmup) / span
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - lr_min)


def val_loss(model, pattern, B, T, max_batches):
    loader = SequentialBatches(pattern, B, T, 1, 0)
    available = sum((s.size - 1) // (B * T) for s in loader.shards)
    n = available if max_batches < 0 else min(max_batches, available)
    with torch.no_grad():
        return sum(loss_of(model(x), y).item() for x, y in (loader.next() for _ in range(n))) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--train", required=True, help="train shard glob (-i)")
    ap.add_argument("--val", required=True, help="val shard glob (-j)")
    ap.add_argument("-b", type=int, required=True)
    ap.add_argument("-t", type=int, required=True)
    ap.add_argument("-d", type=int, required=True)
    ap.add_argument("-x", type=int, required=True)
    ap.add_argument("-l", type=float, required=True)
    ap.add_argument("-u", type=int, default=0)
    ap.add_argument("-q", type=float, default=1.0)
    ap.add_argument("-c", type=float, default=0.0)
    ap.add_argument("-m", type=int, default=20)
    ap.add_argument("--world", type=int, default=1, help="number of ranks the data is split over")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)

    cfg, tensors = read_model(args.model)
    model = GPT(cfg)
    model.load(tensors)
    B, T, W = args.b, args.t, args.world
    accum = args.d // (B * T * W)
    loaders = [SequentialBatches(args.train, B, T, W, r) for r in range(W)]
    groups = [(p, name in DECAYED) for name, ps in model.per_tensor().items() for p in ps]
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p, _ in groups]

    print(f"s:0 tel:{val_loss(model, args.val, B, T, args.m):.6f}")
    for step in range(args.x):
        model.zero_grad()
        total = 0.0
        for _ in range(accum):
            for loader in loaders:
                x, y = loader.next()
                loss = loss_of(model(x), y) / (accum * W)
                loss.backward()
                total += loss.item()
        norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p, _ in groups))
        scale = min(1.0, 1.0 / norm)
        lr = cosine_lr(step, args.l, args.u, args.x, args.q)
        t = step + 1
        with torch.no_grad():
            for (p, decayed), (m, v) in zip(groups, moments):
                g = p.grad * scale
                m.mul_(0.9).add_(0.1 * g)
                v.mul_(0.95).add_(0.05 * g * g)
                update = (m / (1 - 0.9 ** t)) / ((v / (1 - 0.95 ** t)).sqrt() + 1e-8)
                p.sub_(lr * (update + (args.c * p if decayed else 0.0)))
        print(f"s:{step} trl:{total:.6f} lr:{lr:.6e} norm:{norm:.6f}")
    print(f"s:{args.x} tel:{val_loss(model, args.val, B, T, args.m):.6f}")


if __name__ == "__main__":
    main()
