#!/usr/bin/env bash
# scripts/scaling.py (docs/scaling.md): its figures for d12 on 8 GPUs against a count done by hand
# with the model of the script's docstring, its memory column from a stand-in for the trainer's
# plan, its bad-input errors, and overlap never predicted slower than no overlap.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(python3 scripts/scaling.py --models d12 --gpus 1,8 --step-ms d12=100)
row() { grep -F "| d12 | $1 | $2 |" <<<"$out" || fail "no row for $1 GPUs, ZeRO $2 in: $out"; }
# n = 124,475,904 parameters, 2 bytes each; W = 8 in one node: busbw 400 GB/s, alpha = 3 x 8 us.
# ZeRO-0: all-reduce sends 2*7/8 * n * 2 = 435.7 MB and takes 0.024 + 1.75*n*2/400e9 = 1.1132 ms;
# AdamW over all n: n * 28 / 2.6e12 = 1.3405 ms; step = 100 + 1.3405 + 1.1132 = 102.45 ms.
row 8 0 | grep -qF "| 436 / 436 MB | 102.5 ms |" || fail "d12 8 GPUs ZeRO-0: $(row 8 0)"
# ZeRO-1: chunks of n/8 = 15,559,488 (already a multiple of 32); reduce-scatter and all-gather
# 0.024 + 0.875*n*2/400e9 = 0.5686 ms each; AdamW over n/8: 0.1676 ms; step = 101.30 ms. Sent:
# 2 * 0.875 * n * 2 = 435.7 MB; overlapped, the reduces send about n * 2 = 249.0 MB instead of
# the reduce-scatter's 217.8: 466.8 MB.
row 8 1 | grep -qF "| 436 / 467 MB | 101.3 ms |" || fail "d12 8 GPUs ZeRO-1: $(row 8 1)"
# One GPU: no communication; 100 + 1.3405 ms.
row 1 0 | grep -qF "| 0 / 0 MB | 101.3 ms | 101.3 ms | 100% / 100% |" || fail "d12 1 GPU: $(row 1 0)"

# Overlap never predicted slower, for every model, GPU count and stage of the default table.
python3 scripts/scaling.py --models d12,d24,d36,d48 --gpus 2,8,16,64,512 | python3 -c '
import re, sys
rows = [l for l in sys.stdin if re.match(r"\| d\d+ \|", l)]
assert len(rows) == 4 * 5 * 2, f"{len(rows)} rows"
for l in rows:
    cells = [c.strip() for c in l.strip().strip("|").split("|")]
    off, on = (float(c.split()[0].replace(",", "")) for c in cells[4:6])
    assert on <= off + 1e-9, f"overlap slower: {l}"
' || fail "overlap predicted slower somewhere"

# --trainer: the memory column is the plan's total line read in its MiB column, whichever unit the
# parenthesis after it uses (MiB below 10 GiB, else GiB: llmc/cuda/memory_fit.cpp). A stand-in
# trainer answers the four --dry-run calls expected, and only those, with the total lines the real
# one prints for d12 on 8 ranks, -z 0 and 1: at B=8 4664.5 MiB = 4.56 GiB and 3418.1 MiB = 3.34
# GiB, at B=64 23577.9 MiB = 23.03 GiB and 22331.4 MiB = 21.81 GiB.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
cat >"$fake/train_gpt2cu" <<'SH'
#!/usr/bin/env bash
case "$*" in
  "--dry-run 8 -e d12 -b 8 -t 1024 -z 0") mib=4664.5 in_unit="4664.5 MiB" ;;
  "--dry-run 8 -e d12 -b 8 -t 1024 -z 1") mib=3418.1 in_unit="3418.1 MiB" ;;
  "--dry-run 8 -e d12 -b 64 -t 1024 -z 0") mib=23577.9 in_unit="23.03 GiB" ;;
  "--dry-run 8 -e d12 -b 64 -t 1024 -z 1") mib=22331.4 in_unit="21.81 GiB" ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
printf '  %-28s %14s %3s %12s  %s\n' "cuBLASLt workspace" 33554432 1 32.0 fixed
printf '  %-28s %14s %3s %12s  (%s)\n' total "" "" "$mib" "$in_unit"
SH
chmod +x "$fake/train_gpt2cu"
out=$(python3 scripts/scaling.py --trainer "$fake/train_gpt2cu" --models d12 --gpus 8 --micro-batch d12=8)
row 8 0 | grep -qF "| 4.6 GiB |" || fail "--trainer, d12 B=8 ZeRO-0: $(row 8 0)"
row 8 1 | grep -qF "| 3.3 GiB |" || fail "--trainer, d12 B=8 ZeRO-1: $(row 8 1)"
out=$(python3 scripts/scaling.py --trainer "$fake/train_gpt2cu" --models d12 --gpus 8)
row 8 0 | grep -qF "| 23.0 GiB |" || fail "--trainer, d12 B=64 ZeRO-0: $(row 8 0)"
row 8 1 | grep -qF "| 21.8 GiB |" || fail "--trainer, d12 B=64 ZeRO-1: $(row 8 1)"

expect_error() {  # expect_error "message part" args...
  local want=$1; shift
  local err
  if err=$(python3 scripts/scaling.py "$@" 2>&1 >/dev/null); then fail "expected an error from: $*"; fi
  grep -qF -- "$want" <<<"$err" || fail "'$*': error does not say '$want': $err"
}
expect_error "--step-ms: unknown model 'd99'" --step-ms d99=100
expect_error "--step-ms: 'd12=fast' is not model=number" --step-ms d12=fast
expect_error "--micro-batch: 'd12=0' must be positive" --micro-batch d12=0
expect_error "--models: unknown model 'gpt5'" --models gpt5
expect_error "--gpus: every count must be >= 1" --gpus 0,8
expect_error "is not positive" --mfu 0
echo "scaling.py: d12 on 1 and 8 GPUs as counted by hand, memory from MiB and GiB plan totals, overlap never slower, 6 bad inputs rejected"
