"""The table of dev/bench/vs_llmc.sh: llm.c's train_gpt2cu and ours, from their console logs.

Per side: the median step time over every step after the warm-up of every run (a median, so a
stray slow step, e.g. one that waits for a checkpoint or the clock, moves nothing), tokens/s as
tokens per step / that median, MFU as tokens/s x FLOPs per token / the GPU's peak, both taken
from our trainer's `mfu:` line so that the two sides are counted alike, and the peak GPU memory
(the largest sample of all the side's runs), and the losses after the same steps of each side's
first run (the n-th step line of both: llm.c counts steps from 1, ours from 0). Exits 1 when a log
has fewer steps than asked for.
"""
import argparse
import statistics
import sys

from step_log import read_step_log

SIDES = {"llmc": "llm.c", "ours": "ours"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens-per-step", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--runs", nargs="+", required=True, help="SIDE:LOG, SIDE one of llmc, ours")
    p.add_argument("--memory-mib", nargs="+", type=int, required=True, help="peak MiB of each run, in --runs order")
    a = p.parse_args()
    if len(a.runs) != len(a.memory_mib):
        sys.exit(f"vs_llmc: {len(a.runs)} runs but {len(a.memory_mib)} memory figures")

    timed = {side: [] for side in SIDES}
    per_run = {side: [] for side in SIDES}
    memory = {side: 0 for side in SIDES}
    flops_per_token, peak = 0, 0.0
    losses = {}
    for run, mib in zip(a.runs, a.memory_mib):
        side, path = run.split(":", 1)
        log = read_step_log(path)
        if len(log.ms) < a.steps:
            sys.exit(f"vs_llmc: {path} has {len(log.ms)} step lines, expected {a.steps}")
        after_warmup = log.ms[a.warmup:a.steps]
        timed[side] += after_warmup
        per_run[side].append(statistics.median(after_warmup))
        memory[side] = max(memory[side], mib)
        losses.setdefault(side, log.losses[:a.steps])
        if side == "ours" and log.flops_per_token:
            flops_per_token, peak = log.flops_per_token, log.peak_flops

    print(f"== vs_llmc: {a.title}")
    print(f"   median over steps {a.warmup}..{a.steps - 1} of each run; MFU at {flops_per_token} FLOPs per token "
          f"(ours' count) against {peak / 1e12:g} TFLOP/s; memory = nvidia-smi memory.used, largest sample")
    rate = {}
    for side, name in SIDES.items():
        ms = statistics.median(timed[side])
        rate[side] = a.tokens_per_step / ms * 1e3
        mfu = f"{100 * rate[side] * flops_per_token / peak:5.1f}%" if peak else "  n/a "
        runs = ", ".join(f"{m:.1f}" for m in per_run[side])
        print(f"{name:6} {ms:8.1f} ms/step {rate[side]:9.0f} tok/s  MFU {mfu}  peak {memory[side] / 1024:5.1f} GiB"
              f"  (runs: {runs} ms)")
    mem_ratio = f"{memory['ours'] / memory['llmc']:.2f}x" if memory["llmc"] else "n/a"
    marks = sorted({0, a.warmup, a.steps - 1})
    print("loss after step " + "  ".join(f"{n + 1}: {losses['ours'][n]:.4f}/{losses['llmc'][n]:.4f}" for n in marks)
          + "  (ours/llm.c, first runs)")
    last = losses["ours"][-1] / losses["llmc"][-1] - 1
    print(f"ours / llm.c: {rate['ours'] / rate['llmc']:.3f}x tokens/s, {mem_ratio} peak memory, "
          f"{100 * last:+.2f}% loss after step {a.steps}")


if __name__ == "__main__":
    main()
