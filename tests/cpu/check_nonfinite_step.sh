#!/usr/bin/env bash
# A NaN or an Inf in the gradients (scripts/nonfinite_step.sh; the test seam
# LLMC_TEST_POISON_GRADIENT sets one gradient after the step's sum over the ranks), on the CPU trainer
# and a tiny model (2 layers, vocabulary 1000): with -sg the step is skipped, logged, and training goes
# on with the weights it had; without -sl or -sg the run stops naming the step, its newest checkpoint
# the state before it. The same with 2 ranks under ZeRO-1 (-z 1), where only the first gradient each
# rank owns is poisoned and the norm summed over the ranks carries it to both: both skip, or both stop,
# and neither hangs.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mpirun.sh
source "$(dirname "$0")/../lib/mpirun.sh"
# shellcheck source=scripts/nonfinite_step.sh
source scripts/nonfinite_step.sh

/usr/bin/python3 tests/lib/tiny_model_and_shards.py "$tmp" --seed 7 --first-token 3 \
  val_000000.bin:200 train_000001.bin:4000 >/dev/null
flags=(-e "$tmp/model.bin" -i "$tmp/train_*.bin" -b 2 -t 16 -x 9 -l 1e-3 -u 2 -v 0 -s 0 -n 1)

nonfinite_step_checks cpu 4 nan ./train_gpt2 "${flags[@]}"
nonfinite_step_checks cpu-inf 3 inf ./train_gpt2 "${flags[@]}"
nonfinite_step_checks zero1-2ranks 4 nan timeout 300 "${MPIRUN[@]}" -np 2 ./train_gpt2 "${flags[@]}" -z 1

exit_if_failed
echo "non-finite gradients: skipped with -sg, a clear stop without, on 1 and 2 ranks"
