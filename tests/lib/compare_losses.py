"""The losses of two main.logs (tests/emu/check_emu_trainer.sh: train_gpt2cu-emu in fp32 against
train_gpt2):
  python3 tests/lib/compare_losses.py CPU_MAIN_LOG EMU_MAIN_LOG
Both must log the same train (trl), val (tel) and HellaSwag (eval) events, each within 1e-4 relative
of the first; prints a one-line summary, exits 1 otherwise."""
import sys

from main_log import parse

LOSS_KEYS = ("trl", "tel", "eval")


def losses(path):
    return {event: value for event, value in parse(path).items() if event[1] in LOSS_KEYS}


cpu, emu = losses(sys.argv[1]), losses(sys.argv[2])
if set(cpu) != set(emu):
    print(f"different log lines: cpu {sorted(cpu)} emu {sorted(emu)}")
    sys.exit(1)
worst = max(abs(emu[k] - cpu[k]) / max(abs(cpu[k]), 1e-12) for k in cpu)
n = sum(1 for k in cpu if k[1] == "trl")
print(f"{n} train losses, {len(cpu) - n} val/eval values, largest relative difference {worst:.2e}")
sys.exit(0 if worst < 1e-4 else 1)
