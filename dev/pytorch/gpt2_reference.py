"""Float64 PyTorch reference for the CPU parity test (tests/cpu/check_cpu_parity.sh).

Reads a GPT-2 model file (docs/contract.md, version 3 or 5) with numpy, independently of the C++
reader, and a token file of B*T+1 int32 ids (inputs are the first B*T, targets the last B*T). It
computes in float64 the logits over the real vocabulary, the mean cross-entropy, the gradient of
every parameter tensor, and the losses of `--steps` AdamW steps with global-norm clipping at 1.0,
and writes them to `--out` in this binary format (little endian):
    8 bytes "GPT2REF1", int64 array count, then per array:
    int64 name length, the name (ASCII), int64 element count, the elements as float64.
Arrays: "logits" (B*T*V), "loss" (1), "grad/<tensor>" for the 16 tensors in checkpoint layout,
"step_losses" (steps).
"""
import argparse
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC = 20240326
TENSOR_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
GLOBAL_TENSORS = {"wte", "wpe", "lnfw", "lnfb"}
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def read_model(path):
    raw = np.fromfile(path, dtype=np.uint8)
    header = raw[:1024].view("<i4")
    if header[0] != MAGIC or header[1] not in (3, 5):
        raise SystemExit(f"error: {path}: not a version 3/5 GPT-2 model file")
    max_t, vocab, layers, heads, channels, padded = (int(h) for h in header[2:8])
    if header[1] == 3:
        flat = raw[1024:].view("<f4").astype(np.float64)
    else:  # bf16 is the upper half of a float32
        flat = (raw[1024:].view("<u2").astype(np.uint32) << 16).view("<f4").astype(np.float64)
    L, C = layers, channels
    shapes = [(padded, C), (max_t, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
              (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
    tensors, offset = {}, 0
    for name, shape in zip(TENSOR_NAMES, shapes):
        n = int(np.prod(shape))
        tensors[name] = flat[offset:offset + n].reshape(shape)
        offset += n
    if offset != flat.size:
        raise SystemExit(f"error: {path}: {flat.size} parameters, header implies {offset}")
    config = dict(max_t=max_t, vocab=vocab, layers=layers, heads=heads, channels=channels, padded=padded)
    return config, tensors


class CausalSelfAttention(nn.Module):
    def __init__(self, C, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, hs).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, C, heads):
        super().__init__()
        self.ln1_w, self.ln1_b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        self.attn = CausalSelfAttention(C, heads)
        self.ln2_w, self.ln2_b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        C = x.shape[-1]
        x = x + self.attn(F.layer_norm(x, (C,), self.ln1_w, self.ln1_b, 1e-5))
        h = F.gelu(self.c_fc(F.layer_norm(x, (C,), self.ln2_w, self.ln2_b, 1e-5)), approximate="tanh")
        return x + self.c_proj(h)


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["channels"]
        self.vocab = cfg["vocab"]
        self.wte = nn.Embedding(cfg["padded"], C)
        self.wpe = nn.Embedding(cfg["max_t"], C)
        self.blocks = nn.ModuleList(Block(C, cfg["heads"]) for _ in range(cfg["layers"]))
        self.lnf_w, self.lnf_b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))

    def per_tensor(self):
        """The parameters grouped as the checkpoint's 16 tensors (per-layer ones as lists)."""
        b = self.blocks
        return {
            "wte": [self.wte.weight], "wpe": [self.wpe.weight],
            "ln1w": [x.ln1_w for x in b], "ln1b": [x.ln1_b for x in b],
            "qkvw": [x.attn.c_attn.weight for x in b], "qkvb": [x.attn.c_attn.bias for x in b],
            "attprojw": [x.attn.c_proj.weight for x in b], "attprojb": [x.attn.c_proj.bias for x in b],
            "ln2w": [x.ln2_w for x in b], "ln2b": [x.ln2_b for x in b],
            "fcw": [x.c_fc.weight for x in b], "fcb": [x.c_fc.bias for x in b],
            "fcprojw": [x.c_proj.weight for x in b], "fcprojb": [x.c_proj.bias for x in b],
            "lnfw": [self.lnf_w], "lnfb": [self.lnf_b],
        }

    def load(self, tensors):
        with torch.no_grad():
            for name, params in self.per_tensor().items():
                # per-layer tensors are stored L x ...; iterating gives one slice per block
                values = [tensors[name]] if name in GLOBAL_TENSORS else tensors[name]
                for p, value in zip(params, values):
                    p.copy_(torch.from_numpy(np.ascontiguousarray(value)))

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, (x.shape[-1],), self.lnf_w, self.lnf_b, 1e-5)
        # Tied output embedding; the padded rows of wte are not tokens, so they get no logit.
        return (x @ self.wte.weight.t())[..., :self.vocab]


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def flat_grads(model):
    return {name: torch.cat([p.grad.reshape(-1) for p in params]).numpy()
            for name, params in model.per_tensor().items()}


def adamw_losses(model, inputs, targets, steps, lr, wd, beta1=0.9, beta2=0.95, eps=1e-8):
    """docs/contract.md's AdamW: g *= min(1, 1/||g||); m, v bias-corrected; p -= lr*(m^/(sqrt(v^)+eps) + wd*p)."""
    groups = [(p, name in DECAYED) for name, ps in model.per_tensor().items() for p in ps]
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p, _ in groups]
    losses = []
    for t in range(1, steps + 1):
        model.zero_grad()
        loss = loss_of(model(inputs), targets)
        loss.backward()
        losses.append(loss.item())
        norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p, _ in groups))
        scale = min(1.0, 1.0 / norm)
        with torch.no_grad():
            for (p, decayed), (m, v) in zip(groups, state):
                g = p.grad * scale
                m.mul_(beta1).add_((1 - beta1) * g)
                v.mul_(beta2).add_((1 - beta2) * g * g)
                m_hat = m / (1 - beta1 ** t)
                v_hat = v / (1 - beta2 ** t)
                p.sub_(lr * (m_hat / (v_hat.sqrt() + eps) + (wd * p if decayed else 0.0)))
    return losses


def write_arrays(path, arrays):
    with open(path, "wb") as f:
        f.write(b"GPT2REF1")
        f.write(struct.pack("<q", len(arrays)))
        for name, values in arrays:
            values = np.ascontiguousarray(values, dtype="<f8").reshape(-1)
            f.write(struct.pack("<q", len(name)))
            f.write(name.encode("ascii"))
            f.write(struct.pack("<q", values.size))
            f.write(values.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--B", type=int, required=True)
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)

    cfg, tensors = read_model(args.model)
    tokens = np.fromfile(args.tokens, dtype="<i4")
    if tokens.size != args.B * args.T + 1:
        raise SystemExit(f"error: {args.tokens}: {tokens.size} tokens, expected B*T+1 = {args.B * args.T + 1}")
    inputs = torch.from_numpy(tokens[:-1].astype(np.int64)).view(args.B, args.T)
    targets = torch.from_numpy(tokens[1:].astype(np.int64)).view(args.B, args.T)

    model = GPT(cfg)
    model.load(tensors)
    logits = model(inputs)
    loss = loss_of(logits, targets)
    loss.backward()
    arrays = [("logits", logits.detach().numpy()), ("loss", np.array([loss.item()]))]
    arrays += [("grad/" + name, g) for name, g in flat_grads(model).items()]

    model = GPT(cfg)
    model.load(tensors)
    arrays.append(("step_losses", np.array(adamw_losses(model, inputs, targets, args.steps, args.lr, args.wd))))
    write_arrays(args.out, arrays)
    print(f"reference: loss {loss.item():.9f}, wrote {len(arrays)} arrays to {args.out}")


if __name__ == "__main__":
    main()
