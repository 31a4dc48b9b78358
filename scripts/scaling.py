#!/usr/bin/env python3
"""Scaling on paper (docs/scaling.md): per-step communication per rank, predicted step time and
efficiency of data-parallel training on W GPUs, ZeRO-0 and ZeRO-1, with the gradient sums
overlapped with the backward pass (--overlap 1) or after it (--overlap 0); memory per rank from
the CUDA trainer's own plan (`train_gpt2cu --dry-run`) when --trainer is given.

  python3 scripts/scaling.py [--models d12,d48] [--gpus 8,64,512] [--trainer ./train_gpt2cu]
                             [--step-ms d12=110,d48=430] [--micro-batch d12=8] [--mfu 0.4]
                             [--nvlink-gbs 400] [--ib-gbs 45]

The model, every number a flag: see --help. Each GPU runs one micro-batch per step (d12 B=64,
d48 B=16, T=1024, or --micro-batch), so by default the total batch grows with W (weak scaling);
to keep a total batch, give the smaller B and its step time.
  compute    the single-GPU step: --step-ms when given (a measured figure), otherwise
             tokens * (6N + 6LCT) flops / (MFU * peak), the accounting of docs/cuda-trainer.md
  backward   2/3 of the compute; the buckets of llmc/dist/gradient_buckets.h become ready at the
             end of their layer's backward pass (layers take equal time, the classifier's
             share first), the embeddings' bucket at the very end
  collective alpha(W) + f * S / busbw: S the buffer's bytes (bf16: 2 per element), f = 2(W-1)/W
             for an all-reduce, (W-1)/W for a reduce-scatter or all-gather (ring) and 1 for the
             reduces to the owners a ZeRO-1 bucket is sent as (one NCCL group), busbw the
             NVLink figure within one node and the per-GPU InfiniBand figure across nodes,
             alpha(W) = --latency-us * ceil(log2 W) (tree depth)
  AdamW      28 bytes of HBM traffic per owned parameter at --hbm-gbs (bf16 grad read, fp32
             master, m, v read and written, bf16 parameter written)
  step       compute + AdamW + the communication the backward pass does not hide: with overlap
             the buckets run one after another on the communication stream from their ready
             times; without, every sum starts after the backward pass. ZeRO-1's all-gather of
             the parameters follows AdamW in both cases.
"""
import argparse
import math
import re
import subprocess
import sys

from gpt2_shapes import named_shapes

# The models the scaling estimate covers, each with its default micro-batch per GPU; their shapes (layers,
# heads, channels) are the trainers' descriptors (llmc/gpt2_shapes.def), T = 1024, vocabulary 50257
# padded to 50304.
DEFAULT_MICRO_BATCH = {"d12": 64, "d24": 32, "d36": 16, "d48": 16}
MODELS = {name: shape for name, shape in named_shapes().items() if name in DEFAULT_MICRO_BATCH}
SEQ_LEN = 1024
PADDED_VOCAB = 50304
BF16_BYTES = 2
ADAMW_BYTES_PER_PARAM = 2 + 2 * 4 * 3 + 2
PARTITION_ALIGNMENT = 32  # kPartitionAlignment, llmc/backend.h


def sizes(model):
    """Parameters of one layer's bucket, of the embeddings' bucket (wte, wpe), and in all (the
    parameter table of docs/contract.md)."""
    L, _, C = MODELS[model]
    layer = 12 * C * C + 13 * C
    embeddings = PADDED_VOCAB * C + SEQ_LEN * C
    return layer, embeddings, L * layer + embeddings + 2 * C


def padded(n, W):
    """ZeRO-1's padded buffer: W chunks of ceil(n/W) rounded up to the alignment."""
    chunk = -(-n // W)
    chunk = -(-chunk // PARTITION_ALIGNMENT) * PARTITION_ALIGNMENT
    return chunk * W


class Network:
    def __init__(self, args):
        self.args = args

    def busbw(self, W):
        return (self.args.nvlink_gbs if W <= self.args.gpus_per_node else self.args.ib_gbs) * 1e9

    def alpha(self, W):
        return self.args.latency_us * 1e-6 * math.ceil(math.log2(W)) if W > 1 else 0.0

    def seconds(self, kind, elements, W):
        if W == 1:
            return 0.0
        factor = {"all-reduce": 2 * (W - 1) / W, "reduce": 1.0}.get(kind, (W - 1) / W)
        return self.alpha(W) + factor * elements * BF16_BYTES / self.busbw(W)


def compute_seconds(model, n, args):
    """The single-GPU step of `model`, which has n parameters."""
    if model in args.step_ms:
        return args.step_ms[model] / 1e3
    L, _, C = MODELS[model]
    tokens = args.micro_batch[model] * SEQ_LEN
    return tokens * (6 * n + 6 * L * C * SEQ_LEN) / (args.mfu * args.peak_tflops * 1e12)


def step(model, W, zero, overlap, args):
    """Predicted seconds of one step and its parts, and bytes each rank sends."""
    net = Network(args)
    L, _, C = MODELS[model]
    layer, embeddings, n = sizes(model)
    buffer = padded(n, W)  # elements of ZeRO-1's padded gradient and parameter buffers
    compute = compute_seconds(model, n, args)
    backward = compute * 2 / 3
    # Bucket sizes in backward order: layer L-1 with lnf, the other layers, the embeddings.
    buckets = [layer + 2 * C] + [layer] * (L - 1) + [embeddings]
    # Ready times from the start of the backward pass: the classifier's share first (its matmul
    # is C Vp of the N + LCT multiply-adds per token), then the layers, then the encoder.
    classifier = backward * (C * PADDED_VOCAB) / (n + L * C * SEQ_LEN)
    per_layer = (backward - classifier) / L
    ready = [classifier + per_layer * (k + 1) for k in range(L)] + [backward]
    exposed = 0.0
    if W > 1:
        if overlap:
            t = 0.0
            for r, b in zip(ready, buckets):
                t = max(t, r) + net.seconds("all-reduce" if zero == 0 else "reduce", b, W)
            exposed = t - backward
        elif zero == 0:
            exposed = net.seconds("all-reduce", n, W)
        else:
            exposed = net.seconds("reduce-scatter", buffer, W)
    owned = n if zero == 0 else -(-n // W)
    adamw = owned * ADAMW_BYTES_PER_PARAM / (args.hbm_gbs * 1e9)
    gather = net.seconds("all-gather", buffer, W) if zero == 1 and W > 1 else 0.0
    total = compute + adamw + exposed + gather
    # Bytes each rank sends: ring all-reduce 2(W-1)/W of the buffer; reduce-scatter and all-gather
    # (W-1)/W each; the overlapped ZeRO-1 reduces about the whole buffer.
    if W == 1:
        sent = 0.0
    elif zero == 0:
        sent = 2 * (W - 1) / W * n * BF16_BYTES
    else:
        gradients = n if overlap else (W - 1) / W * buffer
        sent = (gradients + (W - 1) / W * buffer) * BF16_BYTES
    return {"compute": compute, "adamw": adamw, "exposed": exposed, "gather": gather, "total": total, "sent": sent}


def memory_per_rank(trainer, model, W, zero, B):
    """GiB of the total line of the trainer's own plan, or None without a trainer."""
    if not trainer:
        return None
    cmd = [trainer, "--dry-run", str(W), "-e", model, "-b", str(B), "-t", str(SEQ_LEN),
           "-z", str(zero)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    # "  total  <MiB>  (<the same in MiB below 10 GiB, else in GiB>)": the MiB column has one
    # unit for every plan.
    match = re.search(r"^  total\s+([\d.]+)\s+\([\d.]+ [MG]iB\)$", out.stdout, re.M)
    if out.returncode != 0 or not match:
        sys.exit(f"scaling.py: no memory total from {' '.join(cmd)}:\n{out.stdout}{out.stderr}")
    return float(match[1]) / 1024


def known_model(flag, name):
    """name, when it is one of MODELS; the error for `flag` otherwise."""
    if name not in MODELS:
        raise argparse.ArgumentTypeError(f"{flag}: unknown model '{name}' (one of {', '.join(MODELS)})")
    return name


def per_model(flag, convert):
    """A parser of "model=value,..." for `flag`, each value through convert (positive)."""
    return lambda text: parse_per_model(flag, convert, text)


def parse_per_model(flag, convert, text):
    result = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        known_model(flag, name)
        try:
            result[name] = convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: '{item}' is not model=number")
        if not result[name] > 0:
            raise argparse.ArgumentTypeError(f"{flag}: '{item}' must be positive")
    return result


def positive(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not positive")
    return value


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="d12,d48")
    p.add_argument("--gpus", default="8,64,512")
    p.add_argument("--trainer", default="", help="train_gpt2cu for the memory column (its --dry-run)")
    p.add_argument("--step-ms", type=per_model("--step-ms", float), default={},
                   help="measured single-GPU step times, e.g. d12=110")
    p.add_argument("--micro-batch", type=per_model("--micro-batch", int), default={},
                   help="B per GPU instead of d12=64, d24=32, d36=16, d48=16")
    p.add_argument("--mfu", type=positive, default=0.4, help="MFU for the compute time when no --step-ms")
    p.add_argument("--peak-tflops", type=positive, default=989.0, help="dense bf16 peak (H100 SXM)")
    p.add_argument("--hbm-gbs", type=positive, default=2600.0, help="achieved HBM bandwidth, GB/s")
    p.add_argument("--nvlink-gbs", type=positive, default=400.0, help="NCCL bus bandwidth inside a node, GB/s")
    p.add_argument("--ib-gbs", type=positive, default=45.0, help="NCCL bus bandwidth per GPU across nodes, GB/s")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--latency-us", type=positive, default=8.0, help="latency per tree level of a collective")
    args = p.parse_args()
    args.micro_batch = {**DEFAULT_MICRO_BATCH, **args.micro_batch}
    try:
        models = [known_model("--models", m) for m in args.models.split(",")]
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    try:
        gpus = [int(g) for g in args.gpus.split(",")]
    except ValueError:
        p.error(f"--gpus: '{args.gpus}' is not a list of integers")
    if any(g < 1 for g in gpus):
        p.error("--gpus: every count must be >= 1")

    print("| model | GPUs | ZeRO | sent per rank per step, overlap 0 / 1 | step, overlap 0 | step, overlap 1 |"
          " efficiency 0 / 1 |"
          " tokens/s, overlap 1 | memory per rank |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in models:
        one = step(model, 1, 0, False, args)["total"]
        for W in gpus:
            for zero in (0, 1):
                off, on = step(model, W, zero, False, args), step(model, W, zero, True, args)
                memory = memory_per_rank(args.trainer, model, W, zero, args.micro_batch[model])
                tokens = args.micro_batch[model] * SEQ_LEN * W / on["total"]
                print(f"| {model} | {W} | {zero} | {off['sent'] / 1e6:,.0f} / {on['sent'] / 1e6:,.0f} MB |"
                      f" {off['total'] * 1e3:,.1f} ms |"
                      f" {on['total'] * 1e3:,.1f} ms | {one / off['total']:.0%} / {one / on['total']:.0%} |"
                      f" {tokens:,.0f} | {'' if memory is None else f'{memory:.1f} GiB'} |")


if __name__ == "__main__":
    main()
