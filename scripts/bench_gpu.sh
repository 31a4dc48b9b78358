#!/usr/bin/env bash
# `make bench`: train_gpt2cu vs PyTorch (dev/pytorch/bench_gpt2.py: bf16 autocast, torch.compile,
# SDPA, fused AdamW) on GPT-2 small (d12), T=1024, B=64 and B=32, on the bundled corpus, in one run:
# same initial weights (PyTorch writes them, train_gpt2cu loads them), same data order (-sh 0),
# same hyperparameters (constant lr 6e-4, weight decay 0.1, clipping at 1). Prints ms/step,
# tokens/s, MFU, peak GPU memory (nvidia-smi, sampled every 100 ms, same method for both) and
# the losses after the same steps. Logs in build/bench-logs/, packed into bench-logs.tgz in
# BENCH_OUT (default out/bench; a relative path is taken from the folder it is run in), with the
# summary beside it. Needs a GPU.
# BENCH_STEPS (default 30) steps per run; timings average the steps after the first 10. Every run
# has a time limit cut from one budget (BENCH_BUDGET seconds, default 540: the whole run stays
# under 10 minutes); a run that fails or runs out of time gets a line in the table and the next
# one goes on.
set -u
out_dir=${BENCH_OUT:-out/bench}
[[ "$out_dir" == /* ]] || out_dir=$PWD/$out_dir  # the caller's folder
cd "$(dirname "$0")/.." || exit 1
logs=build/bench-logs
rm -rf "$logs"
mkdir -p "$logs"
steps=${BENCH_STEPS:-30}
budget=${BENCH_BUDGET:-540}
skip=10
T=1024

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "bench: needs a GPU (nvidia-smi lists none); nothing was measured" >&2
  exit 1
fi
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
# shellcheck source=scripts/gpu_bench_lib.sh
source scripts/gpu_bench_lib.sh
if ! ls data/corpus/corpus_train_*.bin >/dev/null 2>&1; then
  echo "bench: data/corpus/corpus_train_*.bin missing: run \`make data\`" >&2
  exit 1
fi
bench_trainer bench || exit 1
python=python3
if ! $python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "bench: python3 has no CUDA-enabled torch; the PyTorch side cannot run" >&2
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)

init=build/bench-init-d12.bin  # 0.5 GB: kept out of the logs
declare -a table
failed=0
for B in 64 32; do
  echo "== B=$B T=$T, $steps steps: PyTorch"
  pylog="$logs/pytorch_b$B.log"
  if ! py_mem=$(run_with_memory 200 "$pylog" $python dev/pytorch/bench_gpt2.py --B "$B" --T "$T" --steps "$steps" \
    --write-init "$init"); then
    echo "bench: PyTorch run failed:"; tail -n 20 "$pylog"
    table+=("B=$B pytorch failed: $(tail -n 1 "$pylog") (log: $pylog)")
    failed=1
    continue
  fi
  echo "== B=$B T=$T, $steps steps: train_gpt2cu"
  culog="$logs/train_gpt2cu_b$B.log"
  if ! cu_mem=$(run_with_memory 150 "$culog" "$trainer" -e "$init" -i "data/corpus/corpus_train_*.bin" -b "$B" \
    -t "$T" -x "$steps" -l 6e-4 -u 0 -q 1.0 -c 0.1 -v 0 -s 0 -sh 0); then
    echo "bench: train_gpt2cu failed:"; tail -n 20 "$culog"
    table+=("B=$B train_gpt2cu failed: $(grep -m 1 '^error' "$culog" || tail -n 1 "$culog") (log: $culog)")
    failed=1
    continue
  fi

  table+=("$(PYTHONPATH=scripts $python - "$B" "$T" "$steps" "$skip" "$pylog" "$culog" "$py_mem" "$cu_mem" <<'EOF'
import json, sys
from step_log import read_step_log
B, T, steps, skip = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
pylog, culog, py_mem, cu_mem = sys.argv[5:9]
py = json.loads(open(pylog).read().strip().splitlines()[-1])
cu = read_step_log(culog)
cu_ms, cu_loss = cu.ms, cu.losses
# train_gpt2cu's own count (6N + 6LCT) and peak (llmc/mfu.h), for both sides' MFU.
flops_per_token, peak = cu.flops_per_token, cu.peak_flops
if len(cu_ms) < steps or len(py["ms"]) < steps:
    sys.exit(f"bench: expected {steps} steps, got {len(cu_ms)} (cuda) and {len(py['ms'])} (pytorch)")
def stats(ms):
    mean = sum(ms[skip:]) / len(ms[skip:])
    tps = B * T / mean * 1e3
    mfu = f"{100 * tps * flops_per_token / peak:.1f}%" if peak else "n/a"
    return mean, tps, mfu
c, p = stats(cu_ms), stats(py["ms"])
rows = [f"B={B:<3} train_gpt2cu  {c[0]:8.1f} ms/step  {c[1]:9.0f} tok/s  MFU {c[2]:>6}  peak {int(cu_mem) / 1024:5.1f} GiB",
        f"B={B:<3} pytorch       {p[0]:8.1f} ms/step  {p[1]:9.0f} tok/s  MFU {p[2]:>6}  peak {int(py_mem) / 1024:5.1f} GiB"
        f" (torch {py['torch']}, allocated {py['peak_allocated_gib']:.1f} GiB)",
        f"B={B:<3} speed ratio train_gpt2cu / pytorch: {c[1] / p[1]:.2f}x"]
marks = sorted({0, 1, 5, 10, 20, steps - 1} & set(range(steps)))
rows.append(f"B={B:<3} loss after step " + "  ".join(
    f"{s}: {cu_loss[s]:.4f}/{py['losses'][s]:.4f}" for s in marks) + "  (train_gpt2cu/pytorch)")
print("\n".join(rows))
EOF
)") || failed=1
done
echo
echo "== bench: GPT-2 d12 on $gpu, T=$T, mean over steps $skip..$((steps - 1)); peak = nvidia-smi memory.used"
printf '%s\n' "${table[@]}" | tee "$logs/summary.txt"
if mkdir -p "$out_dir"; then
  tar czf "$out_dir/bench-logs.tgz" -C "$(dirname "$logs")" "$(basename "$logs")"
  cp "$logs/summary.txt" "$out_dir/"
  echo "bench: the summary and bench-logs.tgz (all the logs) in $out_dir"
else
  echo "bench: BENCH_OUT: cannot create the folder $out_dir; the logs are in $logs"
fi
[ "$failed" -eq 0 ]
