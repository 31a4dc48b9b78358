"""Figures for scripts/gpu_session.sh, from the trainers' console logs and ncu's CSV.

  gpu_session_report.py sweep --tokens-per-step N --warmup W --steps S NAME=LOG:PEAK_MIB ...
      one line per setting: median ms/step over steps W..S-1, tokens/s, peak GPU memory and the
      loss after step S; the first setting is the baseline: each line gives its speed against it,
      and the fastest setting whose loss after step S is within 1% of the baseline's is marked
      "<- fastest within 1% loss". Exits 1 when no setting has S step lines.
  gpu_session_report.py run --tokens-per-step N --warmup W LOG PEAK_MIB
      one run's median ms/step after W warm-up steps, tokens/s, peak memory and last loss.
  gpu_session_report.py kernels --steps N --top K NCU_CSV
      the K kernels that took the most GPU time in ncu's `--csv --metrics gpu__time_duration.sum
      --print-units base` output (nanoseconds), summed by kernel name, per step (the total / N),
      with their share of all the kernels' time.
"""
import argparse
import collections
import csv
import statistics
import sys

from step_log import read_step_log

LOSS_BAR = 0.01  # a setting "keeps the loss" when its last loss is within 1% of the baseline's


def run_figures(path, mib, tokens_per_step, warmup, steps=None):
    """(median ms, tokens/s, peak GiB, last loss) of one log, or None when it has too few steps."""
    log = read_step_log(path)
    n = steps if steps is not None else len(log.ms)
    if len(log.ms) < n or n <= warmup:
        return None
    ms = statistics.median(log.ms[warmup:n])
    return ms, tokens_per_step / ms * 1e3, mib / 1024, log.losses[n - 1]


def sweep(a):
    figures = []
    for spec in a.runs:
        name, rest = spec.rsplit("=", 1)  # NAME may hold "=" (LLMC_GELU=kernels), LOG does not
        path, mib = rest.rsplit(":", 1)
        figures.append((name, run_figures(path, int(mib or 0), a.tokens_per_step, a.warmup, a.steps)))
    base = figures[0][1]
    keep = [(f[1], name) for name, f in figures if f and base and abs(f[3] / base[3] - 1) <= LOSS_BAR]
    # The most tokens/s; at a tie the first in the sweep's order (the simpler setting), not the name.
    fastest = max(keep, key=lambda k: k[0])[1] if keep else None
    for name, f in figures:
        if not f:
            print(f"{name:34} failed or fewer than {a.steps} steps")
            continue
        ratio = f"{f[1] / base[1]:5.3f}x" if base else "  n/a "
        mark = "  <- fastest within 1% loss" if name == fastest else ""
        print(f"{name:34} {f[0]:7.1f} ms/step {f[1]:9.0f} tok/s {ratio}  peak {f[2]:5.1f} GiB  "
              f"loss after step {a.steps}: {f[3]:.4f}{mark}")
    return 0 if any(f for _, f in figures) else 1


def run(a):
    f = run_figures(a.log, a.peak_mib, a.tokens_per_step, a.warmup)
    if not f:
        print(f"fewer than {a.warmup + 1} steps in {a.log}")
        return 1
    print(f"{f[0]:.1f} ms/step, {f[1]:.0f} tok/s, peak {f[2]:.1f} GiB, loss {f[3]:.4f}")
    return 0


def kernels(a):
    total = collections.Counter()
    calls = collections.Counter()
    with open(a.csv, newline="", errors="replace") as f:
        # ncu prints its own "==PROF==" lines before the CSV header.
        lines = [line for line in f if line.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        total[r["Kernel Name"]] += value
        calls[r["Kernel Name"]] += 1
    all_ns = sum(total.values())
    if not all_ns:
        print(f"no gpu__time_duration rows in {a.csv}")
        return 1
    print(f"{len(total)} kernels, {all_ns / 1e6 / a.steps:.1f} ms of kernel time per step over {a.steps} steps")
    for name, ns in total.most_common(a.top):
        print(f"{ns / 1e6 / a.steps:8.2f} ms/step {100 * ns / all_ns:5.1f}%  {calls[name] / a.steps:6.1f} calls/step  "
              f"{name[:90]}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("--tokens-per-step", type=int, required=True)
    s.add_argument("--warmup", type=int, required=True)
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("runs", nargs="+", help="NAME=LOG:PEAK_MIB, the baseline first")
    r = sub.add_parser("run")
    r.add_argument("--tokens-per-step", type=int, required=True)
    r.add_argument("--warmup", type=int, required=True)
    r.add_argument("log")
    r.add_argument("peak_mib", type=int)
    k = sub.add_parser("kernels")
    k.add_argument("--steps", type=int, required=True)
    k.add_argument("--top", type=int, default=15)
    k.add_argument("csv")
    a = p.parse_args()
    return {"sweep": sweep, "run": run, "kernels": kernels}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())
