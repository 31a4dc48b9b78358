"""--fp8 1's convergence check (scripts/fp8_convergence.sh): the train losses of an FP8 run against
a bf16 run of the same model on the same batches (-sh 0, the same seed):
  python3 tests/lib/fp8_convergence.py BF16_MAIN_LOG FP8_MAIN_LOG
It ends within END_BAR of bf16 (the mean train loss of the last TAIL steps, and the last val loss),
no step spikes (no train loss more than SPIKE_BAR above bf16's on the same batch), and its gradient
norm tracks bf16's: the median ratio of the two, over the steps after the first TAIL, within
NORM_BAR of 1. A scale that clips (a stale amax) first shows there: the clipped activations and
gradients no longer add up to the bf16 gradient, while the loss drifts only slowly. Prints one line;
exits 1 when the run fails any of them."""
import sys

from main_log import parse

END_BAR = 0.01
SPIKE_BAR = 0.05
TAIL = 20
NORM_BAR = 0.10


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def series(path, key):
    return {step: value for (step, k), value in parse(path).items() if k == key}


bf16_path, fp8_path = sys.argv[1], sys.argv[2]
bf16, fp8 = series(bf16_path, "trl"), series(fp8_path, "trl")
if sorted(bf16) != sorted(fp8) or len(bf16) < TAIL:
    sys.exit(f"the logs have different or too few train steps: {len(bf16)} and {len(fp8)}")
steps = sorted(bf16)
tail = steps[-TAIL:]
end = abs(sum(fp8[s] for s in tail) - sum(bf16[s] for s in tail)) / sum(bf16[s] for s in tail)
spike_step = max(steps, key=lambda s: fp8[s] / bf16[s])
spike = fp8[spike_step] / bf16[spike_step] - 1.0
val_bf16, val_fp8 = series(bf16_path, "tel"), series(fp8_path, "tel")
last = max(val_bf16) if val_bf16 else None
val = abs(val_fp8.get(last, float("inf")) - val_bf16[last]) / val_bf16[last] if last is not None else 0.0
norm_bf16, norm_fp8 = series(bf16_path, "norm"), series(fp8_path, "norm")
norm = median([norm_fp8[s] / norm_bf16[s] for s in steps[TAIL:]]) - 1.0
ok = end < END_BAR and val < END_BAR and spike < SPIKE_BAR and abs(norm) < NORM_BAR
print(f"{'ok' if ok else 'FAILS'}: last {TAIL} train losses {end:.2%} from bf16's (bar {END_BAR:.0%}), "
      f"val loss at step {last} {val:.2%} (bar {END_BAR:.0%}), largest excess over bf16 {spike:+.2%} at step "
      f"{spike_step} (bar {SPIKE_BAR:.0%}), median gradient norm {norm:+.1%} from bf16's (bar {NORM_BAR:.0%})")
sys.exit(0 if ok else 1)
