#!/usr/bin/env bash
# SIGKILL in the middle of a checkpoint write and SIGTERM at a random moment
# (tests/lib/crash_scenarios.sh, as tests/cpu/check_crash_resume.sh runs them on the CPU), through
# the CUDA trainer on the emulated GPU (FP32, ASan + UBSan), on a small model (2 layers, vocabulary
# 1000) for 18 steps, which leave the SIGTERM time to stop a step (crash_scenarios.sh): each resumed
# run's main.log and final model byte-identical to an uninterrupted run's. Skips (77) without the
# CUDA headers.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/emu_fp32_trainer.sh
source tests/lib/emu_fp32_trainer.sh
# shellcheck source-path=SCRIPTDIR source=../lib/crash_scenarios.sh
source tests/lib/crash_scenarios.sh
trainer=$emu
final=18
export OMP_NUM_THREADS=2

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 9 --first-token 7 --layers 2 --heads 2 \
  --channels 64 --max-seq-len 32 val_000000.bin:300 train_000001.bin:2000 >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -j "$tmp/val_*.bin" -b 2 -t 16 -x "$final" -l 1e-3 -u 2 -v 5 -m 2
  -s 0 -sh 1 -n 3)
"$trainer" "${flags[@]}" -o "$tmp/ref" >"$tmp/ref.out" 2>&1 || { tail -n 5 "$tmp/ref.out"; fail "the uninterrupted run"; }
kill_in_checkpoint killed "$tmp/ref" "${flags[@]}"
sigterm_resume terminated "$tmp/ref" "${flags[@]}"

exit_if_failed
echo "emulated GPU: SIGKILL mid-checkpoint and SIGTERM, both resumed runs identical to the uninterrupted one"
