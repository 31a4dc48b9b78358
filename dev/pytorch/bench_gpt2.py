"""PyTorch side of `make bench` (scripts/bench_gpu.sh): GPT-2 training the way a strong PyTorch user
would write it (bf16 autocast, torch.compile, F.scaled_dot_product_attention, fused AdamW), on the
same token shards, in the same order, from the same initial weights as train_gpt2cu.

  bench_gpt2.py --train "data/corpus/corpus_train_*.bin" --B 64 --T 1024 --steps 30 \
      [--write-init FILE [--init-bf16] [--init-only]] [--config d12] [--lr 6e-4] [--wd 0.1] [--seed 1337]

--write-init writes the initial weights as an llm.c model file, version 3 (fp32) or, with
--init-bf16, version 5 (bf16, what llm.c's bf16 train_gpt2cu loads), which the CUDA trainers then
load with -e FILE; --init-only stops there (needs no GPU). Data order: llm.c's sequential order
(train_gpt2cu -sh 0): in each shard (sorted by name) floor((n-1)/(B*T)) windows of B*T+1 tokens starting at k*B*T. The last line
printed is a JSON summary (per-step milliseconds and losses, peak memory).
"""
import argparse
import glob
import json
import math
import pathlib
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / "scripts"))
from gpt2_shapes import named_shapes  # noqa: E402 (found through the path above)

SHAPES = named_shapes()  # the trainers' descriptors (llmc/gpt2_shapes.def): (layers, heads, channels)
VOCAB, PADDED_VOCAB, MAX_T = 50257, 50304, 1024
SHARD_MAGIC, MODEL_MAGIC = 20240520, 20240326


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.attproj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C):
        super().__init__()
        self.wte = nn.Embedding(PADDED_VOCAB, C)
        self.wpe = nn.Embedding(MAX_T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.lnf(x), self.wte.weight)[..., :VOCAB]  # tied; loss over the real vocab
        return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


def init_weights(model, L, seed):
    """The trainers' GPT-2 init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0,
    LayerNorm 1/0, padded vocabulary rows 0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("lnf"):
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * L) if ("attproj" in name or "fcproj" in name) else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)
        model.wte.weight[VOCAB:].zero_()


def write_model(path, model, L, NH, C, bf16):
    """llm.c model file, tensors in checkpoint order: version 3 (fp32) or 5 (bf16, rounded to nearest)."""
    b = model.blocks
    tensors = [model.wte.weight, model.wpe.weight,
               [x.ln1.weight for x in b], [x.ln1.bias for x in b], [x.qkv.weight for x in b], [x.qkv.bias for x in b],
               [x.attproj.weight for x in b], [x.attproj.bias for x in b], [x.ln2.weight for x in b],
               [x.ln2.bias for x in b], [x.fc.weight for x in b], [x.fc.bias for x in b], [x.fcproj.weight for x in b],
               [x.fcproj.bias for x in b], model.lnf.weight, model.lnf.bias]
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [MODEL_MAGIC, 5 if bf16 else 3, MAX_T, VOCAB, L, NH, C, PADDED_VOCAB]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for t in tensors:
            parts = t if isinstance(t, list) else [t]
            for p in parts:
                x = p.detach().float().cpu()
                # bf16's bits are the top half of the float's; numpy has no bf16, so write them as int16.
                f.write(x.to(torch.bfloat16).view(torch.int16).numpy().tobytes() if bf16 else x.numpy().tobytes())


def batches(pattern, B, T):
    """llm.c's sequential order, forever (epochs repeat)."""
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"bench_gpt2.py: no shards match {pattern}")
    while True:
        for path in files:
            with open(path, "rb") as f:
                header = struct.unpack("<256i", f.read(1024))
                if header[0] != SHARD_MAGIC or header[1] != 1:
                    sys.exit(f"bench_gpt2.py: {path}: not a version-1 token shard")
                tokens = np.frombuffer(f.read(), dtype=np.uint16)[: header[2]]
            for k in range((len(tokens) - 1) // (B * T)):
                w = torch.from_numpy(tokens[k * B * T : k * B * T + B * T + 1].astype(np.int64))
                yield w[:-1].view(B, T), w[1:].view(B, T)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default="data/corpus/corpus_train_*.bin")
    ap.add_argument("--config", default="d12", choices=sorted(SHAPES))
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--write-init", default="")
    ap.add_argument("--init-bf16", action="store_true")
    ap.add_argument("--init-only", action="store_true")
    args = ap.parse_args()
    if args.init_only and not args.write_init:
        sys.exit("bench_gpt2.py: --init-only needs --write-init FILE")
    if not args.init_only and not torch.cuda.is_available():
        sys.exit("bench_gpt2.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    L, NH, C = SHAPES[args.config]
    model = GPT(L, NH, C)
    init_weights(model, L, args.seed)
    if args.write_init:
        write_model(args.write_init, model, L, NH, C, args.init_bf16)
        if args.init_only:
            return
    model = model.cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    compiled = torch.compile(model)
    data = batches(args.train, args.B, args.T)
    torch.cuda.reset_peak_memory_stats()
    ms, losses = [], []
    for step in range(args.steps):
        x, y = next(data)
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = compiled(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_value = loss.item()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - start) * 1e3)
        losses.append(loss_value)
        print(f"step {step:3d} | loss {loss_value:.6f} | norm {norm.item():.4f} | {ms[-1]:.1f} ms | "
              f"{args.B * args.T / ms[-1] * 1e3:.0f} tok/s", flush=True)
    print(json.dumps({"torch": torch.__version__, "ms": ms, "losses": losses,
                      "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30}))


if __name__ == "__main__":
    main()
