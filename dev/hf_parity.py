#!/usr/bin/env python3
"""Checks that Hugging Face transformers' GPT2LMHeadModel, loaded from our export, computes the
same logits as our CPU forward pass. For a machine where `transformers` and `torch` are installed
(e.g. a GPU session); nothing in `make test` needs it.

  make hf_convert
  ./hf_convert export MODEL.bin out/hf_model            # or --dtype bfloat16
  python3 dev/hf_parity.py MODEL.bin out/hf_model [--tokens 50256 464 3290 ...] [--device cuda]

The script runs `./hf_convert logits MODEL.bin FILE TOKENS...`, which writes our CPU backend's
T x vocab_size logits (row t predicts the token after position t) as raw float32, runs the HF
model on the same tokens in float32 and compares. It passes when the relative L2 error of the
logits is below --tol (default 1e-4, the CUDA-FP32-vs-CPU bar of docs/contract.md) and both pick the same
arg-max token at every position. With a bfloat16 export, compare against the model file the
export was made from, and expect errors near 1e-2.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def our_logits(hf_convert, model_path, tokens, vocab_size):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "logits.f32")
        subprocess.run([hf_convert, "logits", model_path, path] + [str(t) for t in tokens], check=True,
                       stdout=subprocess.DEVNULL)
        logits = np.fromfile(path, dtype="<f4")
    if logits.size != len(tokens) * vocab_size:
        raise SystemExit(f"error: {hf_convert} logits wrote {logits.size} values, expected {len(tokens)} x {vocab_size}")
    return logits.reshape(len(tokens), vocab_size)


def hf_logits(hf_dir, tokens, device):
    import torch
    from transformers import GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.float32).to(device).eval()
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False  # compare at full fp32 precision
        torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        out = model(torch.tensor([tokens], device=device)).logits[0]
    return out.float().cpu().numpy(), model.config.vocab_size


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="our model file (MODEL.bin)")
    parser.add_argument("hf_dir", help="directory written by ./hf_convert export")
    parser.add_argument("--tokens", type=int, nargs="+",
                        default=[50256, 464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13],
                        help="token ids to run (default: <|endoftext|>The quick brown fox jumps over the lazy dog.)")
    parser.add_argument("--hf-convert", default="./hf_convert", help="path of our hf_convert tool")
    parser.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    parser.add_argument("--tol", type=float, default=1e-4, help="largest accepted relative L2 error")
    args = parser.parse_args()

    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    reference, vocab_size = hf_logits(args.hf_dir, args.tokens, device)
    ours = our_logits(args.hf_convert, args.model, args.tokens, vocab_size)
    rel = float(np.linalg.norm(ours.astype(np.float64) - reference) / np.linalg.norm(reference.astype(np.float64)))
    max_abs = float(np.abs(ours - reference).max())
    same_argmax = bool((ours.argmax(-1) == reference.argmax(-1)).all())
    print(f"{len(args.tokens)} positions x {vocab_size} logits on {device}: rel. L2 error {rel:.3e}, "
          f"max abs diff {max_abs:.3e}, same arg-max at every position: {same_argmax}")
    ok = rel < args.tol and same_argmax
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
