"""The table of dev/bench/vs_llmc.sh: llm.c's train_gpt2cu and ours at several settings, from their
console logs.

Per setting: the median step time over every step after the warm-up of every run (a median, so a
stray slow step, e.g. one that waits for a checkpoint or the clock, moves nothing), tokens/s as
tokens per step / that median, MFU as tokens/s x FLOPs per token / the GPU's peak, both taken
from our trainer's `mfu:` line so that every setting is counted alike, the peak GPU memory (the
largest sample of all the setting's runs), and the losses after the same steps of the setting's
first run (the n-th step line: llm.c counts steps from 1, ours from 0). Then one line per pair (each
of ours against each of llm.c's), which names both settings and holds the ratio of tokens/s as
"N.NNNx tokens/s", both memories and both losses after the last step. A setting is llm.c's when its
name starts with "llm.c ", else ours. Exits 1 when a log has fewer steps than asked for.
"""
import argparse
import statistics
import sys

from step_log import read_step_log


def gib(mib):
    return f"{mib / 1024:.1f} GiB"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens-per-step", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--title", required=True)
    p.add_argument("--legend", required=True, help="what each setting is")
    p.add_argument("--settings", nargs="+", required=True, help="the settings' names, in the table's order")
    p.add_argument("--runs", nargs="+", required=True, help="INDEX:LOG, INDEX a setting's place in --settings")
    p.add_argument("--memory-mib", nargs="+", type=int, required=True, help="peak MiB of each run, in --runs order")
    a = p.parse_args()
    if len(a.runs) != len(a.memory_mib):
        sys.exit(f"vs_llmc: {len(a.runs)} runs but {len(a.memory_mib)} memory figures")

    n = len(a.settings)
    timed = [[] for _ in range(n)]
    per_run = [[] for _ in range(n)]
    memory = [0] * n
    losses = [None] * n
    flops_per_token, peak = 0, 0.0
    for run, mib in zip(a.runs, a.memory_mib):
        index, path = run.split(":", 1)
        s = int(index)
        log = read_step_log(path)
        if len(log.ms) < a.steps:
            sys.exit(f"vs_llmc: {path} has {len(log.ms)} step lines, expected {a.steps}")
        after_warmup = log.ms[a.warmup:a.steps]
        timed[s] += after_warmup
        per_run[s].append(statistics.median(after_warmup))
        memory[s] = max(memory[s], mib)
        if losses[s] is None:
            losses[s] = log.losses[:a.steps]
        if log.flops_per_token:
            flops_per_token, peak = log.flops_per_token, log.peak_flops
    missing = [a.settings[s] for s in range(n) if not per_run[s]]
    if missing:
        sys.exit(f"vs_llmc: no run of {', '.join(missing)}")

    print(f"== vs_llmc: {a.title}")
    print(f"   {a.legend}")
    print(f"   median over steps {a.warmup}..{a.steps - 1} of each run; MFU at {flops_per_token} FLOPs per token "
          f"(ours' count) against {peak / 1e12:g} TFLOP/s; memory = nvidia-smi memory.used, largest sample")
    marks = sorted({0, a.warmup, a.steps - 1})
    width = max(len(name) for name in a.settings)
    rate = []
    for s, name in enumerate(a.settings):
        ms = statistics.median(timed[s])
        rate.append(a.tokens_per_step / ms * 1e3)
        mfu = f"{100 * rate[s] * flops_per_token / peak:5.1f}%" if peak else "  n/a "
        runs = ", ".join(f"{m:.1f}" for m in per_run[s])
        after = " / ".join(str(m + 1) for m in marks)
        loss = " / ".join(f"{losses[s][m]:.4f}" for m in marks)
        print(f"{name:{width}} {ms:8.1f} ms/step {rate[s]:9.0f} tok/s  MFU {mfu}  peak {memory[s] / 1024:5.1f} GiB"
              f"  loss after step {after}: {loss}  (runs: {runs} ms)")
    theirs = [s for s, name in enumerate(a.settings) if name.startswith("llm.c ")]
    for o in (s for s in range(n) if s not in theirs):
        for t in theirs:
            last_o, last_t = losses[o][-1], losses[t][-1]
            print(f"{a.settings[o]} vs {a.settings[t]}: {rate[o] / rate[t]:.3f}x tokens/s, "
                  f"memory {gib(memory[o])} vs {gib(memory[t])}, loss after {a.steps} steps "
                  f"{last_o:.3f} vs {last_t:.3f} ({100 * (last_o / last_t - 1):+.2f}%)")


if __name__ == "__main__":
    main()
