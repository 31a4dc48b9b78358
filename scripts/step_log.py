"""Reads a GPT-2 trainer's console output: ours (train_gpt2cu) and llm.c's train_gpt2cu print one
line per optimizer step that starts "step N/M" and holds "loss X" and "| Y ms |":

    ours:   step 12/40 | loss 7.312000 | norm 1.0200 | lr 6.00e-04 | 171.3 ms | 382594 tok/s | MFU 41.2% | eta 5s
    llm.c:  step   13/40 | loss 7.312000 (+0.01z)| norm 1.0200 (+0.02z)| lr 6.00e-04 | 171.30 ms | ...

(ours counts steps from 0, llm.c from 1), and ours also prints, once, the FLOPs it counts per
token and the peak it divides by (no figure when it knows no peak for the GPU):

    mfu: 803478528 FLOPs per token (6N + 6LCT at T=1024) against 989.4 TFLOP/s, the dense bf16 peak of ...
"""
import re
from dataclasses import dataclass, field

_STEP = re.compile(r"^step\s+\d+/\d+\s*\|\s*loss\s+(-?[0-9.]+(?:e[-+]?\d+)?|nan|inf)\b.*?\|\s*([0-9.]+) ms\s*\|")
_MFU = re.compile(r"^mfu: (\d+) FLOPs per token .* against (?:([0-9.]+) TFLOP/s)?")


@dataclass
class StepLog:
    losses: list = field(default_factory=list)
    ms: list = field(default_factory=list)
    flops_per_token: int = 0
    peak_flops: float = 0.0  # 0 when the trainer knows no peak for this GPU


def read_step_log(path):
    log = StepLog()
    with open(path, errors="replace") as f:
        for line in f:
            m = _STEP.match(line)
            if m:
                log.losses.append(float(m.group(1)))
                log.ms.append(float(m.group(2)))
                continue
            m = _MFU.match(line)
            if m:
                log.flops_per_token = int(m.group(1))
                log.peak_flops = float(m.group(2) or 0) * 1e12
    return log
