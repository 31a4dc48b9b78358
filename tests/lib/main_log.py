"""main.log (docs/training.md, "Logs") as {(step, key): value}, and the relative comparison of two logs that
the checks make, each key (trl, tel, lr, norm) with its own tolerance."""
import sys

# The fp32 trainer against the float64 replay dev/pytorch/train_reference.py: losses to 1e-4
# relative (docs/contract.md's 10-step bar), the learning rate to float precision, the gradient norm
# to 1e-3 relative.
REFERENCE_TOLERANCE = {"trl": 1e-4, "tel": 1e-4, "lr": 1e-6, "norm": 1e-3}


def parse(path):
    events = {}
    for line in open(path):
        fields = dict(kv.split(":", 1) for kv in line.split())
        step = int(fields.pop("s"))
        for key, value in fields.items():
            events[(step, key)] = float(value)
    return events


def worst_rel_errors(ours, theirs, tolerance, label):
    """Every event of `theirs` must be in `ours`, within tolerance[key] relative; exits naming the
    first that is not. Returns the worst relative error of each key."""
    missing = sorted(set(theirs) - set(ours))
    if missing:
        sys.exit(f"{label}: main.log lacks {missing}")
    worst = {}
    for key, want in sorted(theirs.items()):
        got = ours[key]
        err = abs(got - want) / max(abs(want), 1e-12)
        worst[key[1]] = max(worst.get(key[1], 0.0), err)
        if err > tolerance[key[1]]:
            sys.exit(f"{label}: step {key[0]} {key[1]}: {got} vs {want} (rel err {err:.2e})")
    return worst


def summary(worst):
    return ", ".join(f"{key} {err:.1e}" for key, err in sorted(worst.items()))
