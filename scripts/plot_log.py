#!/usr/bin/python3
"""Plots training runs from their main.log files (the trainers' -o DIR/main.log).

Log lines (llm.c's keys):  s:<step> trl:<train loss> lr:<lr> norm:<grad norm>
                           s:<step> tel:<val loss>
                           s:<step> eval:<HellaSwag accuracy>
Left panel: train loss (thin) and val loss (markers) per step; right panel, when any log has
eval lines: HellaSwag accuracy. Reference lines mark a baseline, e.g. OpenAI's GPT-2 124M
(val loss 3.424958 on the fineweb10B val shard, 3.2924 on edu_fineweb10B's; HellaSwag 0.294463,
the figures llm.c and build-nanogpt plot against):

  /usr/bin/python3 scripts/plot_log.py log124M/main.log -o gpt2_124M.png \\
      --ref-loss 3.424958 --ref-loss-label "OpenAI GPT-2 124M" \\
      --ref-eval 0.294463 --ref-eval-label "OpenAI GPT-2 124M"

Uses Debian's python3-matplotlib (installed by `make setup`); run it with /usr/bin/python3.
"""
import argparse
import os
import re
import sys

LINE = re.compile(r"^s:(\d+)\s+(.*)$")
FIELD = re.compile(r"(\w+):(\S+)")


def parse_log(path):
    """{"trl": [(step, value)], "tel": [...], "eval": [...]} of one main.log. Lines that are not
    log events (or have other keys) are ignored; a malformed value is an error naming the line."""
    series = {"trl": [], "tel": [], "eval": []}
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            m = LINE.match(line.strip())
            if not m:
                continue
            step = int(m.group(1))
            for key, value in FIELD.findall(m.group(2)):
                if key in series:
                    try:
                        series[key].append((step, float(value)))
                    except ValueError:
                        raise ValueError(f"{path}: line {line_no}: {key} value '{value}' is not a number")
    return series


def finish_panel(ax, ylabel, title, ref, ref_label):
    """The optional dashed reference line, axis labels, title, grid and legend of one panel."""
    if ref is not None:
        ax.axhline(ref, color="red", linestyle="--", label=ref_label or f"reference {ref:g}")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()


def plot(logs, labels, output, ref_loss=None, ref_loss_label=None, ref_eval=None, ref_eval_label=None,
         title=None):
    import matplotlib
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    has_eval = any(s["eval"] for s in logs) or ref_eval is not None
    fig, axes = plt.subplots(1, 2 if has_eval else 1, figsize=(14 if has_eval else 8, 5), squeeze=False)
    loss_ax = axes[0][0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (series, label) in enumerate(zip(logs, labels)):
        color = colors[i % len(colors)]
        if series["trl"]:
            steps, values = zip(*series["trl"])
            loss_ax.plot(steps, values, color=color, alpha=0.5, linewidth=0.8, label=f"{label} train")
        if series["tel"]:
            steps, values = zip(*series["tel"])
            loss_ax.plot(steps, values, color=color, marker="o", markersize=3, label=f"{label} val")
    finish_panel(loss_ax, "loss", "loss", ref_loss, ref_loss_label)

    if has_eval:
        eval_ax = axes[0][1]
        for i, (series, label) in enumerate(zip(logs, labels)):
            if series["eval"]:
                steps, values = zip(*series["eval"])
                eval_ax.plot(steps, values, color=colors[i % len(colors)], marker="o", markersize=3, label=label)
        finish_panel(eval_ax, "accuracy", "HellaSwag accuracy", ref_eval, ref_eval_label)

    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", help="main.log files")
    parser.add_argument("-o", "--output", default="plot.png", help="PNG to write (default plot.png)")
    parser.add_argument("--labels", help="comma-separated label per log (default: each log's directory name)")
    parser.add_argument("--ref-loss", type=float, help="draw a horizontal reference line at this loss")
    parser.add_argument("--ref-loss-label", help="legend text of --ref-loss")
    parser.add_argument("--ref-eval", type=float, help="draw a horizontal reference line at this accuracy")
    parser.add_argument("--ref-eval-label", help="legend text of --ref-eval")
    parser.add_argument("--title", help="figure title")
    args = parser.parse_args()

    if args.labels is not None:
        labels = args.labels.split(",")
        if len(labels) != len(args.logs):
            parser.error(f"--labels has {len(labels)} labels for {len(args.logs)} logs")
    else:
        labels = [os.path.basename(os.path.dirname(os.path.abspath(p))) or p for p in args.logs]
    try:
        logs = [parse_log(p) for p in args.logs]
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path, series in zip(args.logs, logs):
        if not any(series.values()):
            print(f"error: {path}: no trl/tel/eval lines", file=sys.stderr)
            return 1
    plot(logs, labels, args.output, args.ref_loss, args.ref_loss_label, args.ref_eval, args.ref_eval_label, args.title)
    counts = ", ".join(f"{label}: {len(s['trl'])} train, {len(s['tel'])} val, {len(s['eval'])} eval points"
                       for label, s in zip(labels, logs))
    print(f"wrote {args.output} ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
